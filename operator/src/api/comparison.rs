//! How an experiment compares its points with a baseline (docs/concepts.md, "Numbers you
//! can trust"): side by side in pairs on matched nodes (duet benchmarking, Bulej et al.,
//! ICPE 2020), or from trials run one after the other.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sweep::Setting;

/// The practical difference when unset, in percent: about the run-to-run noise of one
/// configuration on a shared chain (docs/concepts.md).
pub const DEFAULT_PRACTICAL_DIFFERENCE: f64 = 5.0;
/// The node label whose value makes nodes a match when unset: the well-known instance
/// type label (kubernetes.io/docs/reference/labels-annotations-taints,
/// node.kubernetes.io/instance-type), which a bare-metal cluster sets by machine model.
pub const DEFAULT_MATCH_LABEL: &str = "node.kubernetes.io/instance-type";

/// The baseline every other point is compared with, and how.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonSpec {
    /// The baseline: a point of the sweep, each swept parameter by name (memory, cpu,
    /// allocator, heap, a thread knob's or a knob's name) with one of its swept values,
    /// written as the sweep writes it: `{allocator: glibc}`.
    #[schemars(extend("maxProperties" = 16))]
    pub baseline: BTreeMap<String, IntOrString>,
    /// `paired` (the default): each other point runs at the same time as a trial of the
    /// baseline, on a matched node, and the nodes swap between repetitions, so what both
    /// saw (the chain's load, the hour) cancels. `unpaired`: the trials run as the grid
    /// runs them, and the effect compares their means (sequential runs differ by more
    /// than their configurations: docs/concepts.md).
    #[serde(default)]
    pub mode: ComparisonMode,
    /// Add baseline-against-baseline pairs (one per repetition): their difference is
    /// the noise floor, what two identical configurations differ by side by side.
    #[serde(default)]
    pub aa_calibration: bool,
    /// The smallest difference, in percent of the baseline, worth calling: an effect
    /// whose 95% interval excludes zero but is smaller is reported as negligible.
    #[serde(default = "default_practical")]
    #[schemars(range(min = 0.1, max = 100.0))]
    pub practical_difference: f64,
    /// Nodes match when this label has the same value on both (paired mode): unset,
    /// node.kubernetes.io/instance-type. Nodes without the label match each other.
    #[serde(default = "default_match_label")]
    #[schemars(length(min = 1, max = 316))]
    pub match_nodes_by: String,
}

fn default_practical() -> f64 {
    DEFAULT_PRACTICAL_DIFFERENCE
}

fn default_match_label() -> String {
    DEFAULT_MATCH_LABEL.into()
}

/// How the trials being compared run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ComparisonMode {
    #[default]
    Paired,
    Unpaired,
}

impl ComparisonSpec {
    pub fn paired(&self) -> bool {
        self.mode == ComparisonMode::Paired
    }

    /// The practical difference as a fraction (5% -> 0.05).
    pub fn practical(&self) -> f64 {
        self.practical_difference / 100.0
    }

    /// The baseline's values as text, as trial points and the dataset write them.
    pub fn baseline_values(&self) -> BTreeMap<String, String> {
        self.baseline
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    IntOrString::Int(i) => i.to_string(),
                    IntOrString::String(s) => s.clone(),
                };
                (k.clone(), v)
            })
            .collect()
    }
}

/// Swept fields with one value list each, by name (threads and knobs are lists of named
/// sweeps, handled apart).
fn plain_fields() -> Vec<&'static str> {
    let mut f = vec!["memory", "cpu", "hugepages1Gi", "programCacheEntries"];
    f.extend(Setting::ALL.map(Setting::as_str));
    f
}

/// The experiment-level admission rules of comparisons (on `ValidatorExperimentSpec`).
pub fn rules() -> Vec<kube::core::Rule> {
    use kube::core::Rule;
    let when = "!has(self.comparison) || ";
    let b = "self.comparison.baseline";
    let named = |list: &str, k: &str| {
        format!("(has(self.sweep.{list}) && self.sweep.{list}.exists(x, x.name == {k}))")
    };
    let known = plain_fields()
        .iter()
        .map(|f| format!("(k == '{f}' && has(self.sweep.{f}))"))
        .chain([named("threads", "k"), named("knobs", "k")])
        .collect::<Vec<_>>()
        .join(" || ");
    let mut complete: Vec<String> = plain_fields()
        .iter()
        .map(|f| format!("(!has(self.sweep.{f}) || '{f}' in {b})"))
        .collect();
    for list in ["threads", "knobs"] {
        complete.push(format!(
            "(!has(self.sweep.{list}) || self.sweep.{list}.all(x, x.name in {b}))"
        ));
    }
    // Whether each value is one of the swept ones is checked when the experiment is
    // reconciled (controller/experiment/decide.rs): comparing the baseline's values with
    // the sweep's in CEL costs 27 times the API server's per-rule budget.
    vec![
        Rule::new(format!("{when}{b}.all(k, {known})"))
            .message("comparison.baseline names a parameter the sweep does not vary: name only swept parameters (memory, cpu, allocator, heap, ..., a thread knob's or a knob's name)")
            .field_path(".comparison.baseline"),
        Rule::new(format!("{when}({})", complete.join(" && ")))
            .message("comparison.baseline is not a whole point: give every swept parameter a value (one of its swept values)")
            .field_path(".comparison.baseline"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c: ComparisonSpec =
            serde_saphyr::from_str("baseline: {allocator: glibc, cpu: 32}").unwrap();
        assert_eq!(c.mode, ComparisonMode::Paired);
        assert!(!c.aa_calibration);
        assert_eq!(c.practical(), 0.05);
        assert_eq!(c.match_nodes_by, DEFAULT_MATCH_LABEL);
        assert_eq!(
            c.baseline_values(),
            BTreeMap::from([
                ("allocator".to_string(), "glibc".to_string()),
                ("cpu".to_string(), "32".to_string())
            ])
        );
    }

    #[test]
    fn rules_name_their_fields() {
        for r in rules() {
            let v = serde_json::to_value(&r).unwrap();
            let path = v["fieldPath"].as_str().unwrap();
            assert!(path.starts_with(".comparison"), "{v}");
            assert!(v["message"].as_str().unwrap().contains("comparison"), "{v}");
        }
    }
}
