//! The experiment's pass, pure: [`decide`] from what the pass observed to one [`Step`]:
//! its strategy's decision ([`choose`]: the trials to create, those to delete because their
//! point left the sweep before they started), held to `maxNodeHours` and to a metrics
//! pipeline that would leave trials blind, the acts, and the status as it will be once
//! they are done.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::summary::compute_status;
use crate::api::experiment::{ValidatorExperiment, ValidatorExperimentStatus};
use crate::api::trial::{TrialPhase, ValidatorTrial};
use crate::clients;
use crate::controller::preflight;
use crate::controller::step::Note;
use crate::cost;
use crate::results::dataset::{Dataset, NodeSlot};
use crate::strategies::build::build_trial;
use crate::strategies::{Decision, Done, failed_limit_reached, strategy_for};

/// What a pass observed (observe.rs).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The trials it owns, with those this process created that the watch has not
    /// delivered yet.
    pub trials: Vec<ValidatorTrial>,
    /// For a paired comparison, the nodes its pairs may be matched to.
    pub nodes: Option<Vec<NodeSlot>>,
    /// Whether its Prometheus can receive what its client remote-writes (None: its
    /// client writes nothing).
    pub pipeline: Option<preflight::Verdict>,
    /// Whether prometheus-operator's PodMonitor kind is served.
    pub pod_monitors: bool,
}

/// Something act.rs does, in order.
#[derive(Debug, Clone)]
pub enum Act {
    /// Apply the experiment's PodMonitor (when it would change).
    EnsurePodMonitor,
    /// Delete a trial not started whose point left the sweep.
    DeleteTrial(String),
    /// Create a group's trials, one after the other (a pass that fails between two leaves
    /// the rest to the next pass, whose strategy sees the part that exists).
    CreateTrials(Vec<ValidatorTrial>),
    /// An event on the experiment, published once.
    Event(Note),
}

/// An experiment's pass.
pub type Step = crate::controller::step::Step<ValidatorExperimentStatus, Act>;

/// Trials a create found existing (created by an earlier pass the watch had not
/// delivered), as read back: None when gone since.
pub type Found = [(String, Option<ValidatorTrial>)];

/// The pass: what to create and delete, and the status once that is done. Trials wake
/// the experiment when they change; its requeue is a safety net (sooner while it waits
/// for its Prometheus: nothing else would wake it).
pub fn decide(
    vx: &ValidatorExperiment,
    obs: &Observed,
    old: &ValidatorExperimentStatus,
    now: Timestamp,
) -> Step {
    decide_with(vx, obs, old, now, &[])
}

/// [`decide`], with the status counting the trials in `found` as read back rather than
/// as this pass built them: the same pass, restated once its creates are done.
pub fn decide_with(
    vx: &ValidatorExperiment,
    obs: &Observed,
    old: &ValidatorExperimentStatus,
    now: Timestamp,
    found: &Found,
) -> Step {
    let mut plan = choose(vx, &obs.trials, obs.nodes.clone());
    // Nothing starts past maxNodeHours, nor while the pipeline would leave trials blind.
    hold_to_budget(&mut plan, vx, cost::spent(&obs.trials, now));
    let waiting = obs.pipeline.as_ref().is_some_and(|p| p.wait);
    if waiting {
        plan.create.clear();
    }
    let mut acts = Vec::new();
    if plan.blocked.is_none() {
        if vx.spec.metrics.pod_monitor && obs.pod_monitors {
            acts.push(Act::EnsurePodMonitor);
        }
        acts.extend(plan.delete.iter().cloned().map(Act::DeleteTrial));
        acts.extend(plan.create.iter().cloned().map(Act::CreateTrials));
    }
    // The trials as they are once the creates are done.
    let mut trials = obs.trials.clone();
    for t in plan.create.iter().flatten() {
        match found.iter().find(|(name, _)| *name == t.name_any()) {
            Some((_, read)) => trials.extend(read.clone()),
            None => trials.push(t.clone()),
        }
    }
    let mut status = status(vx, &plan, &trials, old, now);
    if let Some(p) = &obs.pipeline {
        status.conditions.push(p.condition.clone());
        if p.wait {
            acts.push(Act::Event(Note::warning(
                "RemoteWriteReceiverOff",
                p.condition.message.clone(),
            )));
        }
    }
    // An experiment that cannot run as written waits for a change of it.
    let requeue = match (waiting, &plan.blocked) {
        (true, _) => Some(preflight::RECHECK),
        (false, Some(_)) => None,
        (false, None) => Some(Duration::from_secs(300)),
    };
    Step {
        status,
        acts,
        requeue,
    }
}

/// What its strategy decides.
#[derive(Debug)]
pub struct Choice {
    /// Why the experiment cannot run at all; then nothing is created or deleted.
    pub blocked: Option<String>,
    pub decision: Decision,
    /// Trials not started that are no longer among the strategy's (their point left the
    /// sweep).
    pub delete: Vec<String>,
    /// Trial objects to create, group by group.
    pub create: Vec<Vec<ValidatorTrial>>,
}

/// Its strategy's decision, the trials to delete because their point left the sweep, the
/// trial objects to create.
pub fn choose(
    vx: &ValidatorExperiment,
    trials: &[ValidatorTrial],
    nodes: Option<Vec<NodeSlot>>,
) -> Choice {
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
        return Choice {
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
        Ok(create) => Choice {
            blocked,
            decision,
            delete,
            create,
        },
        Err(e) => Choice {
            blocked: Some(format!("a trial the strategy chose cannot be built: {e}")),
            decision,
            delete: Vec::new(),
            create: Vec::new(),
        },
    }
}

/// The status once the plan is acted on: `trials` as they are then.
pub fn status(
    vx: &ValidatorExperiment,
    step: &Choice,
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
pub fn hold_to_budget(step: &mut Choice, vx: &ValidatorExperiment, spent: f64) {
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

#[cfg(test)]
mod step_tests {
    use super::*;
    use crate::api::trial::TrialOutcome;

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn names(acts: &[Act]) -> Vec<String> {
        acts.iter()
            .map(|a| match a {
                Act::EnsurePodMonitor => "monitor".to_string(),
                Act::DeleteTrial(n) => format!("delete {n}"),
                Act::CreateTrials(g) => {
                    let g: Vec<String> = g.iter().map(|t| t.name_any()).collect();
                    format!("create {}", g.join(" "))
                }
                Act::Event(n) => format!("event {}", n.reason),
            })
            .collect()
    }

    /// The PodMonitor, the deletes, then the creates, group by group; the status counts
    /// the trials the pass creates. (The trial that left the sweep still holds one of
    /// the two places in this pass.)
    #[test]
    fn a_pass_deletes_what_left_the_sweep_and_creates_what_its_strategy_starts() {
        let vx = ValidatorExperiment::test();
        let left = ValidatorTrial::test()
            .named("ram-old")
            .at("memory=64Gi")
            .in_phase(TrialPhase::Pending);
        let obs = Observed {
            trials: vec![left],
            pod_monitors: true,
            ..Default::default()
        };
        let step = decide(&vx, &obs, &Default::default(), t0());
        let first = ValidatorTrial::of(&vx, 0).name_any();
        assert_eq!(
            names(&step.acts),
            [
                "monitor".to_string(),
                "delete ram-old".into(),
                format!("create {first}"),
            ]
        );
        assert_eq!(step.status.trials.expected, 4);
        assert_eq!(step.status.trials.pending, 3, "{:?}", step.status.trials);
        let both = decide(&vx, &Observed::default(), &Default::default(), t0());
        let second = ValidatorTrial::of(&vx, 1).name_any();
        assert_eq!(
            names(&both.acts),
            [format!("create {first}"), format!("create {second}")]
        );
        assert_eq!(both.status.trials.pending, 2, "{:?}", both.status.trials);
        assert_eq!(step.requeue, Some(Duration::from_secs(300)));
        // Without the PodMonitor kind served, none is applied.
        let obs = Observed {
            pod_monitors: false,
            ..obs
        };
        assert!(
            !names(&decide(&vx, &obs, &Default::default(), t0()).acts).contains(&"monitor".into())
        );
    }

    /// A trial a create found existing counts as it is, not as the pass built it.
    #[test]
    fn a_trial_found_existing_counts_as_read_back() {
        let vx = ValidatorExperiment::test();
        let obs = Observed::default();
        let built = decide(&vx, &obs, &Default::default(), t0());
        assert_eq!(built.status.trials.finished, 0);
        let done = ValidatorTrial::of(&vx, 0).ended(TrialOutcome::OOMKilled, 10.0);
        let found = [(done.name_any(), Some(done))];
        let restated = decide_with(&vx, &obs, &Default::default(), t0(), &found);
        assert_eq!(restated.status.trials.finished, 1);
        assert_eq!(names(&restated.acts), names(&built.acts));
        // Gone since: not counted at all.
        let gone = [(ValidatorTrial::of(&vx, 0).name_any(), None)];
        let restated = decide_with(&vx, &obs, &Default::default(), t0(), &gone);
        assert_eq!(
            restated.status.trials.pending,
            built.status.trials.pending + 1
        );
    }

    /// A pipeline that would leave trials blind: nothing starts, the condition and a
    /// warning say why, and the pass looks again soon.
    #[test]
    fn a_receiver_off_starts_nothing_and_says_so() {
        let vx = ValidatorExperiment::test();
        let condition = crate::controller::status::condition(
            &[],
            "MetricsPipelineReady",
            false,
            "RemoteWriteReceiverOff",
            "the receiver is off",
            Some(1),
            t0(),
        );
        let obs = Observed {
            pipeline: Some(preflight::Verdict {
                wait: true,
                condition,
            }),
            ..Default::default()
        };
        let step = decide(&vx, &obs, &Default::default(), t0());
        assert_eq!(names(&step.acts), ["event RemoteWriteReceiverOff"]);
        assert!(
            step.status
                .conditions
                .iter()
                .any(|c| c.type_ == "MetricsPipelineReady" && c.status == "False")
        );
        assert_eq!(step.requeue, Some(preflight::RECHECK));
    }

    /// An experiment that cannot run does nothing against the API server.
    #[test]
    fn a_blocked_experiment_acts_on_nothing() {
        let vx = ValidatorExperiment::test().with(
            "
            spec:
              comparison: {baseline: {memory: 3Ti}}
            ",
        );
        let obs = Observed {
            pod_monitors: true,
            ..Default::default()
        };
        let step = decide(&vx, &obs, &Default::default(), t0());
        assert!(step.acts.is_empty(), "{:?}", names(&step.acts));
    }

    /// An experiment that cannot run as written waits for a change of it: looking again
    /// cannot help (its trials changing wake it too).
    #[test]
    fn a_blocked_experiment_waits_for_a_change() {
        let vx = ValidatorExperiment::test().with(
            "
            spec:
              comparison: {baseline: {memory: 3Ti}}
            ",
        );
        let step = decide(&vx, &Observed::default(), &Default::default(), t0());
        assert!(
            step.status
                .conditions
                .iter()
                .any(|c| c.message.contains("is not a point of the sweep")),
            "{:?}",
            step.status.conditions
        );
        assert_eq!(step.requeue, None);
        assert!(
            matches!(step.action(), a if a == kube::runtime::controller::Action::await_change())
        );
    }
}
