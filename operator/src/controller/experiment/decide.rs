//! The experiment's pass, pure: its strategy's decision, the trials to delete because
//! their point left the sweep before they started, the trial objects to create; and,
//! once those are acted on, the status.

use std::collections::BTreeSet;

use jiff::Timestamp;
use kube::ResourceExt;

use super::summary::compute_status;
use crate::api::experiment::{ValidatorExperiment, ValidatorExperimentStatus};
use crate::api::trial::{TrialPhase, ValidatorTrial};
use crate::clients;
use crate::cost;
use crate::results::dataset::{Dataset, NodeSlot};
use crate::strategies::build::build_trial;
use crate::strategies::{Decision, Done, failed_limit_reached, strategy_for};

/// What a pass does.
#[derive(Debug)]
pub struct Step {
    /// Why the experiment cannot run at all; then nothing is created or deleted.
    pub blocked: Option<String>,
    pub decision: Decision,
    /// Trials not started that are no longer among the strategy's (their point left the
    /// sweep).
    pub delete: Vec<String>,
    /// Trial objects to create, group by group.
    pub create: Vec<Vec<ValidatorTrial>>,
}

pub fn decide(
    vx: &ValidatorExperiment,
    trials: &[ValidatorTrial],
    nodes: Option<Vec<NodeSlot>>,
) -> Step {
    let mut data = Dataset::from_trials(&vx.spec.sweep, trials);
    if let Some(nodes) = nodes {
        data = data.with_nodes(nodes);
    }
    let strategy = strategy_for(&vx.spec);
    let mut decision = strategy.decide(&vx.name_any(), &vx.spec, &data);
    never_hang(&mut decision, strategy.name(), vx, &data);
    debug_assert!(
        decision.stop.is_empty(),
        "strategies do not stop trials (early abort does, from their lag): {:?}",
        decision.stop
    );
    let blocked = unsupported(vx);
    if blocked.is_some() {
        return Step {
            blocked,
            decision,
            delete: Vec::new(),
            create: Vec::new(),
        };
    }
    let wanted: BTreeSet<&str> = decision.trials.iter().map(String::as_str).collect();
    let delete = data
        .trials()
        .filter(|t| {
            t.phase == TrialPhase::Pending && !t.deleting && !wanted.contains(t.name.as_str())
        })
        .map(|t| t.name.clone())
        .collect();
    let create: Result<Vec<Vec<ValidatorTrial>>, _> = decision
        .start
        .iter()
        .map(|group| group.0.iter().map(|p| build_trial(vx, p)).collect())
        .collect();
    match create {
        Ok(create) => Step {
            blocked,
            decision,
            delete,
            create,
        },
        Err(e) => Step {
            blocked: Some(format!("a trial the strategy chose cannot be built: {e}")),
            decision,
            delete: Vec::new(),
            create: Vec::new(),
        },
    }
}

/// The status once the step is acted on: `trials` as they are now.
pub fn status(
    vx: &ValidatorExperiment,
    step: &Step,
    trials: &[ValidatorTrial],
    old: &ValidatorExperimentStatus,
    now: Timestamp,
) -> ValidatorExperimentStatus {
    let data = Dataset::from_trials(&vx.spec.sweep, trials);
    let mut st = compute_status(vx, &step.decision, &data, step.blocked.clone(), old, now);
    st.node_hours = Some(cost::node_hours_status(&vx.spec, trials, now));
    st
}

/// `maxNodeHours`: once the trials have held `spent` node-hours that reach it, nothing
/// more starts, and (unless its strategy already was) the experiment is done: it ends
/// with reason MaxNodeHoursReached when the running trials have finished.
pub fn hold_to_budget(step: &mut Step, vx: &ValidatorExperiment, spent: f64) {
    let Some(max) = vx.spec.max_node_hours.filter(|m| spent >= *m) else {
        return;
    };
    step.create.clear();
    step.decision.start.clear();
    if step.decision.done.is_none() {
        step.decision.done = Some(Done {
            reason: "MaxNodeHoursReached",
            message: format!(
                "the trials held {} node-hours, reaching maxNodeHours={max}: no further trials were started",
                (spent * 100.0).round() / 100.0
            ),
        });
    }
}

/// A strategy that starts nothing while nothing runs, and does not say it is done, would
/// leave the experiment running for ever (Katib #1494, #1534): it is done.
pub(super) fn never_hang(
    decision: &mut Decision,
    strategy: &str,
    vx: &ValidatorExperiment,
    data: &Dataset,
) {
    let tally = data.tally(&decision.trials);
    let held = vx.spec.suspend || failed_limit_reached(&vx.spec, tally.failed.len());
    if decision.done.is_none() && decision.start.is_empty() && tally.active == 0 && !held {
        decision.done = Some(Done {
            reason: "NothingToPropose",
            message: format!(
                "the {strategy} strategy has nothing left to propose and no trial runs ({} finished)",
                tally.finished
            ),
        });
    }
}

/// Why the experiment cannot run at all (checked before anything is created).
fn unsupported(vx: &ValidatorExperiment) -> Option<String> {
    if let Some(c) = &vx.spec.comparison {
        let values = c.baseline_values();
        if Dataset::new(&vx.spec.sweep, [])
            .find_point(&values)
            .is_none()
        {
            let written: Vec<String> = values.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            return Some(format!(
                "comparison.baseline {{{}}} is not a point of the sweep: give each swept parameter one of its swept values",
                written.join(", ")
            ));
        }
    }
    match clients::client_for(&vx.spec.template) {
        Ok(c) if c.runs_trials() => None,
        Ok(c) => Some(format!(
            "valtune cannot run {} trials yet: this version renders {} pods (see docs/clients.md)",
            c.display(),
            clients::CLIENTS
                .iter()
                .filter(|c| c.runs_trials())
                .map(|c| c.display())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(e) => Some(e.to_string()),
    }
}
