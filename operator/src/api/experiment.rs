//! `ValidatorExperiment`: a validator template, the parameters to sweep and how each trial
//! runs. The operator runs one `ValidatorTrial` per point and summarises them here.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::comparison::ComparisonSpec;
use super::settings::{MetricsSettings, TrialSettings};
use super::strategy::StrategySpec;
use super::sweep::{SweepSpec, cel_swept};
use super::template::ValidatorTemplate;

/// The hard cap on `maxTrials`: keeps an experiment's trials listable and its status small.
pub const MAX_TRIALS_CAP: i32 = 1024;
/// Experiment names leave room in 63 characters for the trial suffix and volume roles.
pub const MAX_NAME_LEN: usize = 40;
/// Status rows kept per experiment (one per point, most informative first).
pub const MAX_SUMMARY_ROWS: usize = 32;

/// A tuning experiment: one trial per point of the sweep, each a validator pod on its own
/// bare-metal node, measured through Prometheus.
// clippy reads the repeated `type_ = ...` of printcolumn(...) as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "valtune.dev",
    version = "v1alpha1",
    kind = "ValidatorExperiment",
    namespaced,
    shortname = "vx",
    category = "valtune",
    status = "ValidatorExperimentStatus",
    doc = "A tuning experiment: runs a validator once per point of a parameter sweep and gathers the results",
    printcolumn(name = "Client", type_ = "string", json_path = ".status.client"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Trials", type_ = "integer", json_path = ".status.trials.expected"),
    printcolumn(name = "Done", type_ = "integer", json_path = ".status.trials.finished"),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.trials.active"),
    // Node-hours held so far (kubectl prints a `number` as it is: rounded in status).
    printcolumn(name = "Node-h", type_ = "number", json_path = ".status.nodeHours.spent"),
    printcolumn(name = "Recommendation", type_ = "string", json_path = ".status.recommendation.summary"),
    printcolumn(name = "Support", type_ = "string", json_path = ".status.recommendation.support", priority = 1),
    // Each point against the baseline, with its interval (a comparison's).
    printcolumn(name = "Vs Baseline", type_ = "string", json_path = ".status.comparison.summary"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(format!("size(self.metadata.name) <= {MAX_NAME_LEN}"))
        .message(format!("metadata.name is longer than {MAX_NAME_LEN} characters: trial, pod and volume names add a suffix to it, so choose a shorter name").as_str())
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(format!("has(self.template.resources.memory) || {}", cel_swept("memory")))
        .message("no memory given: set template.resources.memory or sweep it with sweep.memory")
        .field_path(".template.resources.memory"),
    validation = Rule::new(format!("!{} || !has(self.template.resources.memoryLimit)", cel_swept("memory")))
        .message("template.resources.memoryLimit conflicts with sweep.memory (each trial's memory is its request and limit): remove memoryLimit")
        .field_path(".template.resources.memoryLimit"),
    validation = Rule::new("!has(self.maxFailedTrials) || self.maxFailedTrials <= self.maxTrials")
        .message("maxFailedTrials is larger than maxTrials, so it can never be reached: lower it or remove it")
        .field_path(".maxFailedTrials"),
)]
pub struct ValidatorExperimentSpec {
    /// The validator every trial runs; swept parameters override its values.
    pub template: ValidatorTemplate,
    /// The parameters to sweep. The experiment runs their cartesian product.
    #[serde(default)]
    pub sweep: SweepSpec,
    /// How each trial runs.
    #[serde(default)]
    pub trial: TrialSettings,
    /// Where results come from.
    #[serde(default)]
    pub metrics: MetricsSettings,
    /// How the experiment chooses its trials: unset, every point of the sweep (the
    /// grid); `bisection`, a search for the boundary value of one ordered parameter.
    #[serde(default, skip_serializing_if = "is_grid")]
    pub strategy: StrategySpec,
    /// Compare every point with a baseline point: in pairs run side by side on matched
    /// nodes (`mode: paired`, the default), with an interval on each effect and the
    /// noise floor from baseline-against-baseline pairs (`aaCalibration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonSpec>,
    /// How many trials run at once (each on its own node); with a paired comparison, how
    /// many pairs.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 64))]
    pub parallelism: i32,
    /// The most trials this experiment may have (sweep points times repetitions).
    #[serde(default = "default_max_trials")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_trials: i32,
    /// Stop starting trials once this many have failed (Crashed, Unschedulable, TimedOut,
    /// NodeLost after retries, MetricsUnavailable); the experiment then fails. OOMKilled,
    /// FellBehind and Aborted are results, not failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_failed_trials: Option<i32>,
    /// Start no new trials; running ones finish.
    #[serde(default)]
    pub suspend: bool,
    /// The most node-hours the experiment may hold (status.nodeHours.spent): once
    /// reached, no new trial starts, and when the running ones have finished the
    /// experiment ends with reason MaxNodeHoursReached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001, max = 1_000_000.0))]
    pub max_node_hours: Option<f64>,
}

fn is_grid(s: &StrategySpec) -> bool {
    *s == StrategySpec::default()
}

fn default_parallelism() -> i32 {
    1
}
fn default_max_trials() -> i32 {
    256
}

/// What the experiment is doing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum ExperimentPhase {
    #[default]
    Pending,
    Running,
    Suspended,
    Succeeded,
    Failed,
}

/// Observed state; small and bounded (per-trial data lives in the trials).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorExperimentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub phase: ExperimentPhase,
    /// The client the experiment runs (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(default)]
    pub trials: TrialCounts,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The point the results recommend, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<Recommendation>,
    /// One row per point (averaged over repetitions), at most 32 rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<SummaryRow>,
    /// Set when the sweep has more points than summary rows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary_truncated: bool,
    /// What the experiment's nodes cost so far, and what a grid would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_hours: Option<NodeHours>,
    /// Each point against the baseline (`spec.comparison`), and the noise floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<ComparisonStatus>,
}

/// The points against the baseline, on the client's objective (docs/concepts.md,
/// "Numbers you can trust": what each call means and assumes).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComparisonStatus {
    /// The baseline point.
    pub baseline: String,
    /// The figure compared (the client's objective, e.g. "block processing p95 (ms)").
    pub figure: String,
    /// One line for `kubectl get vx`: each point's effect, interval, n and call, and the
    /// noise floor.
    pub summary: String,
    /// What baseline-against-baseline pairs differ by ("+1% [-2%, +3%], 3 pairs"), when
    /// `aaCalibration` ran them; their variance is pooled into every point's interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<String>,
    /// How the intervals' variance was estimated: pooled over the design's pairs (with
    /// its degrees of freedom), or per point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variance: Option<String>,
    /// Trials left out of the comparison, with why (a window cut short, a failure, a
    /// pair whose sides measured different windows), at most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub set_apart: Vec<String>,
    /// One row per point with an effect, at most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<EffectRow>,
}

/// One point against the baseline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EffectRow {
    pub point: String,
    /// The ratio of its geometric mean to the baseline's, minus one (-0.12 is 12% lower).
    pub effect: f64,
    /// The effect's 95% interval.
    pub interval: [f64; 2],
    /// Pairs (paired) or the smaller side's repetitions (unpaired).
    pub n: i32,
    /// `Different` (by at least practicalDifference), `Equivalent` (within it), `Real`
    /// (a difference exists, its size unsettled) or `Inconclusive`.
    pub call: String,
    /// For an unsettled effect: about how many more pairs (repetitions per side) would
    /// likely settle it, if the effect is what was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<i32>,
    /// As a report writes it: "-12% [-17%, -6%], 3 pairs: different by more than 5%".
    pub text: String,
}

/// Node-hours: each trial holds one node from its validator's start to its end.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeHours {
    /// Held by the experiment's trials so far (a running trial until now), to 0.01.
    pub spent: f64,
    /// What a full grid of the same points would hold: every point, every repetition,
    /// a warm-up (the mean of this experiment's, its collection included, else the
    /// client's typical one) and a whole window each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<f64>,
}

/// Trial counts, by expected name (not by listing).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialCounts {
    /// Trials the sweep asks for.
    pub expected: i32,
    /// Trials not started yet.
    pub pending: i32,
    /// Trials running (scheduled, warming up, measuring or collecting).
    pub active: i32,
    /// Trials finished with any outcome.
    pub finished: i32,
    /// Finished trials with a measured outcome (KeptUp, FellBehind, OOMKilled, Aborted).
    pub succeeded: i32,
    /// Finished trials that produced no measurement (Crashed, Unschedulable, TimedOut,
    /// NodeLost, MetricsUnavailable).
    pub failed: i32,
}

/// The recommended point.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    /// One line, for `kubectl get`: e.g. "memory=512Gi".
    pub summary: String,
    /// Why this point.
    pub reason: String,
    /// A trial of this point.
    pub trial: String,
    /// What backs it: how many measured repetitions of the point kept up, with the exact
    /// (Clopper-Pearson) 95% interval, and the same for the points that lost to it ("kept
    /// up 3/3 [29%, 100%]; 256Gi: kept up 0/3 [0%, 71%]").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support: Option<String>,
    /// The recommended point itself, as its trials ran it (the swept values: memory,
    /// thread counts, typed settings, generic knobs by name): what a Validator's
    /// `spec.tuning.fromExperiment` applies and `valtune recommend --for` patches in.
    /// Absent in statuses written before valtune recorded it (`summary` stays the line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<super::sweep::TrialPoint>,
}

/// Results of one point, averaged over its finished repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRow {
    pub point: String,
    pub repetitions: i32,
    /// The outcome of each finished repetition, comma separated.
    pub outcomes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_tps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_tps_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rss_gib: Option<f64>,
    /// The client's own figures (results.figures), averaged.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub figures: std::collections::BTreeMap<String, f64>,
    /// Measured repetitions that kept up, of those measured ("2/3"; crashes and lost
    /// nodes are not measurements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_up: Option<String>,
    /// The 95% interval of each averaged figure (`avgTps`, `maxRssGiB`, the client's
    /// figures by name), Student's t over the repetitions that measured their whole
    /// window: present from two on. One repetition has a mean but no spread.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub intervals: std::collections::BTreeMap<String, [f64; 2]>,
}
