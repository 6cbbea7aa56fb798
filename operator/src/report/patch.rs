//! The recommendation as something to apply: a JSON merge patch (RFC 7386) of a
//! ValidatorExperiment's `spec.template` that writes the recommended point where the
//! template keeps it. Computed, never mapped by hand: the point is applied with
//! [`resolve_template`] (as the operator does for the trial) and the patch is what differs
//! between the template and the result. Pure; `valtune recommend` prints it.

use serde_json::{Map, Value, json};

use crate::api::experiment::ExperimentPhase;
use crate::api::resolve::resolve_template;
use crate::api::sweep::TrialPoint;
use crate::api::tuning::PointValueError;
use crate::api::{Validator, ValidatorExperiment};

/// RFC 7386's apply of `patch` to `base`: objects merge, null deletes, anything else
/// replaces (what `kubectl patch --type merge` does).
pub fn merge_apply(base: &Value, patch: &Value) -> Value {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            let mut out = b.clone();
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    out.insert(k.clone(), merge_apply(b.get(k).unwrap_or(&Value::Null), v));
                }
            }
            Value::Object(out)
        }
        (_, p) => p.clone(),
    }
}

/// The RFC 7386 merge patch that turns `from` into `to`: objects are compared key by key
/// (a key `to` lacks becomes null, which deletes it), anything else, lists included (a
/// merge patch replaces a list whole), is written as `to` has it. None when equal.
pub fn merge_diff(from: &Value, to: &Value) -> Option<Value> {
    if from == to {
        return None;
    }
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = Map::new();
            for (k, fv) in f {
                match t.get(k) {
                    None => {
                        out.insert(k.clone(), Value::Null);
                    }
                    Some(tv) => {
                        if let Some(d) = merge_diff(fv, tv) {
                            out.insert(k.clone(), d);
                        }
                    }
                }
            }
            for (k, tv) in t {
                if !f.contains_key(k) {
                    out.insert(k.clone(), tv.clone());
                }
            }
            Some(Value::Object(out))
        }
        _ => Some(to.clone()),
    }
}

/// The merge patch of the experiment (`{"spec": {"template": ...}}`) that sets its
/// template to the point's resolved template; `{}` when the point changes nothing (the
/// baseline). An error means the point names a value no sweep holds.
pub fn template_patch(
    vx: &ValidatorExperiment,
    point: &TrialPoint,
) -> Result<Value, PointValueError> {
    spec_template_patch(&vx.spec.template, vx, point)
}

/// The merge patch of a Validator (`{"spec": {"template": ...}}`) that writes the
/// experiment's point into the Validator's template, resolved as the experiment's trials
/// were (its sweep says how each generic knob reaches the process): what a GitOps user
/// commits instead of `spec.tuning.fromExperiment`. `{}` when the point changes nothing.
pub fn validator_patch(
    v: &Validator,
    vx: &ValidatorExperiment,
    point: &TrialPoint,
) -> Result<Value, PointValueError> {
    spec_template_patch(&v.spec.template, vx, point)
}

/// `{"spec": {"template": d}}` with `d` what resolving the experiment's point over
/// `template` changes, or `{}`.
fn spec_template_patch(
    template: &crate::api::template::ValidatorTemplate,
    vx: &ValidatorExperiment,
    point: &TrialPoint,
) -> Result<Value, PointValueError> {
    let resolved = resolve_template(template, &vx.spec.sweep, point)?;
    let (from, to) = (
        serde_json::to_value(template).expect("a template serializes"),
        serde_json::to_value(&resolved).expect("a template serializes"),
    );
    Ok(match merge_diff(&from, &to) {
        Some(d) => json!({"spec": {"template": d}}),
        None => json!({}),
    })
}

/// What backs a recommendation, printed beside the patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub experiment: String,
    pub namespace: String,
    pub phase: ExperimentPhase,
    /// The recommended point ("memory=512Gi").
    pub point: String,
    pub reason: String,
    pub support: Option<String>,
    /// The trial the recommendation names.
    pub trial: String,
    /// Set when that trial ran another template than the point applied to the
    /// experiment's template now (the template was edited since).
    pub template_changed: bool,
    /// The Validator the patch is of (`--for`); None: the experiment's own template.
    pub validator: Option<String>,
}

impl Evidence {
    fn command(&self) -> String {
        match &self.validator {
            Some(v) => format!(
                "a merge patch of Validator {v}'s spec.template (commit it to the Validator's manifest, or: kubectl patch validator {v} -n {} --type merge --patch-file FILE)",
                self.namespace
            ),
            None => format!(
                "a merge patch of the experiment's spec.template: kubectl patch validatorexperiment {} -n {} --type merge --patch-file FILE",
                self.experiment, self.namespace
            ),
        }
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !matches!(
            self.phase,
            ExperimentPhase::Succeeded | ExperimentPhase::Failed
        ) {
            notes.push(format!(
                "the experiment is {:?}: the recommendation is provisional until it finishes",
                self.phase
            ));
        }
        if self.template_changed {
            notes.push(format!(
                "spec.template changed since trial {} ran: the patch applies the point to the template as it is now",
                self.trial
            ));
        }
        notes
    }
}

/// The patch as YAML, the evidence as comments above it.
pub fn render_yaml(evidence: &Evidence, patch: &Value) -> String {
    let mut out = format!(
        "# valtune recommends {} for experiment {}/{}\n",
        evidence.point, evidence.namespace, evidence.experiment
    );
    let mut comment = |label: &str, text: &str| {
        for (i, line) in text.lines().enumerate() {
            let head = if i == 0 { label } else { "" };
            out.push_str(&format!("# {head:<9}{line}\n"));
        }
    };
    comment("reason:", &evidence.reason);
    if let Some(s) = &evidence.support {
        comment("support:", s);
    }
    comment(
        "trial:",
        &format!(
            "{} (kubectl describe vtrial {} -n {})",
            evidence.trial, evidence.trial, evidence.namespace
        ),
    );
    for note in evidence.notes() {
        comment("note:", &note);
    }
    let empty = patch.as_object().is_some_and(Map::is_empty);
    if empty {
        out.push_str("# the point is the template as written: nothing to change\n{}\n");
        return out;
    }
    out.push_str(&format!("# {}\n", evidence.command()));
    out.push_str(&serde_saphyr::to_string(patch).expect("a JSON value serializes to YAML"));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The patch and the evidence as one JSON object, for scripts.
pub fn render_json(evidence: &Evidence, patch: &Value) -> Value {
    json!({
        "experiment": evidence.experiment,
        "namespace": evidence.namespace,
        "validator": evidence.validator,
        "phase": evidence.phase,
        "recommendation": {
            "point": evidence.point,
            "reason": evidence.reason,
            "support": evidence.support,
            "trial": evidence.trial,
        },
        "notes": evidence.notes(),
        "patchType": "merge",
        "patch": patch,
    })
}

/// Why an experiment has no recommendation: it is still running (or has not started, or
/// is suspended), or it finished and found none.
pub fn no_recommendation(vx: &ValidatorExperiment) -> String {
    let st = vx.status.clone().unwrap_or_default();
    let c = &st.trials;
    match st.phase {
        ExperimentPhase::Pending => "none yet: no trial has started".into(),
        ExperimentPhase::Running => format!(
            "none yet: the experiment is running ({} of {} trials finished) and no finished point kept up so far",
            c.finished, c.expected
        ),
        ExperimentPhase::Suspended => format!(
            "none yet: the experiment is suspended ({} of {} trials finished) and no finished point kept up",
            c.finished, c.expected
        ),
        ExperimentPhase::Succeeded => format!(
            "none: the experiment finished and no point kept up ({} trials: {} measured, {} failed)",
            c.finished, c.succeeded, c.failed
        ),
        ExperimentPhase::Failed => format!(
            "none: the experiment failed before any point kept up ({} trials: {} measured, {} failed)",
            c.finished, c.succeeded, c.failed
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vx(yaml: &str) -> ValidatorExperiment {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: e, namespace: ns}}\nspec:\n{yaml}"
        ))
        .unwrap()
    }

    /// The point of the sweep whose description is `describe`.
    fn point(vx: &ValidatorExperiment, describe: &str) -> TrialPoint {
        vx.spec
            .sweep
            .expand()
            .into_iter()
            .find(|p| p.describe() == describe)
            .unwrap()
    }

    fn apply(vx: &ValidatorExperiment, patch: &Value) -> crate::api::template::ValidatorTemplate {
        let base = serde_json::to_value(vx).unwrap();
        let merged = super::merge_apply(&base, patch);
        serde_json::from_value::<ValidatorExperiment>(merged)
            .unwrap()
            .spec
            .template
    }

    #[test]
    fn a_memory_sweep_patches_the_memory_and_nothing_else() {
        let vx = vx(
            "  template: {agave: {image: a}, resources: {cpu: 64}, storage: [{role: ledger, size: 2Ti}]}\n  sweep: {memory: [256Gi, 512Gi]}\n",
        );
        let p = point(&vx, "memory=512Gi");
        let patch = template_patch(&vx, &p).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"template": {"resources": {"memory": "512Gi"}}}})
        );
        let t = apply(&vx, &patch);
        assert_eq!(
            t,
            resolve_template(&vx.spec.template, &vx.spec.sweep, &p).unwrap()
        );
    }

    #[test]
    fn a_memory_point_replaces_a_templates_memory_and_drops_its_limit() {
        // A template written with a request and a limit, the point from a sweep of
        // another experiment: the patch deletes the limit (null), as resolving does.
        let vx = vx(
            "  template: {agave: {image: a}, resources: {cpu: 64, memory: 64Gi, memoryLimit: 128Gi}}\n",
        );
        let p = TrialPoint {
            memory: Some("1Ti".into()),
            ..Default::default()
        };
        let patch = template_patch(&vx, &p).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"template": {"resources": {"memory": "1Ti", "memoryLimit": null}}}})
        );
        assert_eq!(apply(&vx, &patch).resources.memory_limit, None);
    }

    #[test]
    fn a_tuning_sweep_patches_tuning_and_keeps_the_templates_other_settings() {
        let vx = vx(
            "  template: {agave: {image: a}, resources: {memory: 512Gi}, tuning: {threads: {rpcThreads: 4}}}\n  sweep:\n    threads: [{name: bankingThreads, values: [4, 8]}]\n    programCacheEntries: [512, 1024]\n",
        );
        let p = point(&vx, "programCacheEntries=1024 bankingThreads=8");
        let patch = template_patch(&vx, &p).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"template": {"tuning": {
                "programCacheEntries": 1024,
                "threads": {"bankingThreads": 8}
            }}}})
        );
        let t = apply(&vx, &patch);
        assert_eq!(t.tuning.threads.len(), 2, "{t:?}");
        assert_eq!(
            t,
            resolve_template(&vx.spec.template, &vx.spec.sweep, &p).unwrap()
        );
    }

    #[test]
    fn typed_settings_land_in_tuning_by_their_name() {
        let vx = vx(
            "  template: {besu: {image: b}, resources: {memory: 16Gi}}\n  sweep: {allocator: [jemalloc, glibc], heap: [5Gi]}\n",
        );
        let patch = template_patch(&vx, &point(&vx, "allocator=glibc heap=5Gi")).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"template": {"tuning": {"allocator": "glibc", "heap": "5Gi"}}}})
        );
    }

    #[test]
    fn generic_knobs_patch_the_whole_env_list_args_or_config() {
        // A merge patch replaces a list whole: the env list carries the template's own
        // variables beside the knob's.
        let vx = vx(
            "  template:\n    firedancer: {image: f}\n    resources: {memory: 64Gi}\n    env: [{name: RUST_LOG, value: info}, {name: MALLOC_ARENA_MAX, value: '8'}]\n    extraArgs: [--log-level=info]\n  sweep:\n    knobs:\n      - {name: arena, env: MALLOC_ARENA_MAX, values: ['2', '4']}\n      - {name: cacheMb, arg: --cache-mb, values: ['4096']}\n      - {name: quicConns, configKey: tiles.quic.max_concurrent_connections, values: ['2048']}\n",
        );
        let p = point(&vx, "arena=4 cacheMb=4096 quicConns=2048");
        let patch = template_patch(&vx, &p).unwrap();
        let t = &patch["spec"]["template"];
        assert_eq!(
            t["env"],
            json!([{"name": "RUST_LOG", "value": "info"}, {"name": "MALLOC_ARENA_MAX", "value": "4"}])
        );
        assert_eq!(
            t["extraArgs"],
            json!(["--log-level=info", "--cache-mb=4096"])
        );
        assert_eq!(
            t["firedancer"]["config"],
            json!({"tiles.quic.max_concurrent_connections": "2048"})
        );
        assert_eq!(t.as_object().unwrap().len(), 3, "{patch}");
        let applied = apply(&vx, &patch);
        assert_eq!(
            applied,
            resolve_template(&vx.spec.template, &vx.spec.sweep, &p).unwrap()
        );
    }

    #[test]
    fn the_baseline_changes_nothing() {
        let vx = vx("  template: {agave: {image: a}, resources: {memory: 64Gi}}\n");
        let patch = template_patch(&vx, &TrialPoint::default()).unwrap();
        assert_eq!(patch, json!({}));
        let e = evidence();
        assert!(render_yaml(&e, &patch).ends_with("nothing to change\n{}\n"));
    }

    #[test]
    fn a_point_no_sweep_holds_is_an_error() {
        let vx = vx("  template: {agave: {image: a}, resources: {memory: 64Gi}}\n");
        let mut p = TrialPoint::default();
        p.threads.insert("noSuchThreads".into(), 4);
        assert_eq!(template_patch(&vx, &p).unwrap_err().field, "threads");
    }

    fn evidence() -> Evidence {
        Evidence {
            experiment: "agave-ram".into(),
            namespace: "validators".into(),
            phase: ExperimentPhase::Succeeded,
            point: "memory=512Gi".into(),
            reason: "the smallest memory that kept up with the chain; below it 256Gi: FellBehind"
                .into(),
            support: Some("kept up 1/1 [21%, 100%]; 256Gi: kept up 0/1 [0%, 79%]".into()),
            trial: "agave-ram-512gi-1".into(),
            template_changed: false,
            validator: None,
        }
    }

    #[test]
    fn the_yaml_carries_the_evidence_as_comments_and_parses_as_the_patch() {
        let patch =
            json!({"spec": {"template": {"resources": {"memory": "512Gi", "memoryLimit": null}}}});
        let out = render_yaml(&evidence(), &patch);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "# valtune recommends memory=512Gi for experiment validators/agave-ram",
                "# reason:  the smallest memory that kept up with the chain; below it 256Gi: FellBehind",
                "# support: kept up 1/1 [21%, 100%]; 256Gi: kept up 0/1 [0%, 79%]",
                "# trial:   agave-ram-512gi-1 (kubectl describe vtrial agave-ram-512gi-1 -n validators)",
                "# a merge patch of the experiment's spec.template: kubectl patch validatorexperiment agave-ram -n validators --type merge --patch-file FILE",
            ],
            "{out}"
        );
        let parsed: Value = serde_saphyr::from_str(&out).unwrap();
        assert_eq!(parsed, patch, "{out}");
    }

    #[test]
    fn a_provisional_or_stale_recommendation_says_so() {
        let mut e = evidence();
        e.phase = ExperimentPhase::Running;
        e.template_changed = true;
        let out = render_yaml(
            &e,
            &json!({"spec": {"template": {"resources": {"memory": "1Ti"}}}}),
        );
        assert!(out.contains("# note:    the experiment is Running: the recommendation is provisional until it finishes\n"), "{out}");
        assert!(
            out.contains("# note:    spec.template changed since trial agave-ram-512gi-1 ran"),
            "{out}"
        );
        let j = render_json(&e, &json!({}));
        assert_eq!(j["notes"].as_array().unwrap().len(), 2);
        assert_eq!(j["recommendation"]["trial"], "agave-ram-512gi-1");
        assert_eq!(j["phase"], "Running");
        assert_eq!(j["patch"], json!({}));
    }

    #[test]
    fn no_recommendation_says_whether_the_experiment_is_still_running() {
        let mut x = vx("  template: {agave: {image: a}, resources: {memory: 64Gi}}\n");
        let mut st = crate::api::experiment::ValidatorExperimentStatus::default();
        st.trials.expected = 5;
        st.trials.finished = 2;
        st.trials.succeeded = 2;
        for (phase, starts) in [
            (ExperimentPhase::Pending, "none yet: no trial has started"),
            (
                ExperimentPhase::Running,
                "none yet: the experiment is running (2 of 5",
            ),
            (
                ExperimentPhase::Suspended,
                "none yet: the experiment is suspended",
            ),
            (
                ExperimentPhase::Succeeded,
                "none: the experiment finished and no point kept up (2 trials: 2 measured, 0 failed)",
            ),
            (ExperimentPhase::Failed, "none: the experiment failed"),
        ] {
            st.phase = phase;
            x.status = Some(st.clone());
            let text = no_recommendation(&x);
            assert!(text.starts_with(starts), "{phase:?}: {text}");
        }
    }

    /// A Validator's patch writes the point into the Validator's own template (its other
    /// settings stay), and applies back to the resolved template.
    #[test]
    fn a_validators_patch_writes_the_point_into_its_own_template() {
        let vx = vx(
            "  template: {besu: {image: b}, resources: {memory: 16Gi}}\n  sweep:\n    allocator: [jemalloc, glibc]\n    heap: [5Gi, 8Gi]\n    knobs: [{name: arena, env: MALLOC_ARENA_MAX, values: ['2']}]\n",
        );
        let v: Validator = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {name: v, namespace: ns}\nspec:\n  nodeName: bm-01\n  template: {besu: {image: b}, resources: {cpu: 12, memory: 32Gi}, env: [{name: TZ, value: UTC}], tuning: {allocator: glibc}}\n",
        )
        .unwrap();
        let p = point(&vx, "allocator=jemalloc heap=8Gi arena=2");
        let patch = validator_patch(&v, &vx, &p).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"template": {
                "tuning": {"allocator": "jemalloc", "heap": "8Gi"},
                "env": [{"name": "TZ", "value": "UTC"}, {"name": "MALLOC_ARENA_MAX", "value": "2"}]
            }}})
        );
        let merged = super::merge_apply(&serde_json::to_value(&v).unwrap(), &patch);
        let back: Validator = serde_json::from_value(merged).unwrap();
        assert_eq!(
            back.spec.template,
            resolve_template(&v.spec.template, &vx.spec.sweep, &p).unwrap()
        );
        assert_eq!(back.spec.template.resources.memory.as_deref(), Some("32Gi"));
        let mut e = evidence();
        e.validator = Some("v".into());
        let out = render_yaml(&e, &patch);
        assert!(
            out.contains("# a merge patch of Validator v's spec.template"),
            "{out}"
        );
        assert_eq!(render_json(&e, &patch)["validator"], "v");
    }
}
