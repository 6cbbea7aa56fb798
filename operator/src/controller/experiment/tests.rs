use std::collections::BTreeMap;

use super::decide::{choose, never_hang, status};
use crate::api::experiment::{
    ExperimentPhase, MAX_SUMMARY_ROWS, ValidatorExperiment, ValidatorExperimentStatus,
};
use crate::api::trial::TrialOutcome;
use crate::api::trial::{TrialPhase, TrialResults, ValidatorTrial};
use crate::results::dataset::Dataset;
use crate::strategies::plan::{PlannedTrial, plan};
use crate::strategies::{Decision, TrialGroup};
use jiff::Timestamp;

/// [`ValidatorExperiment::test`], with `extra` (lines of its spec).
fn experiment(extra: &str) -> ValidatorExperiment {
    match extra.trim() {
        "" => ValidatorExperiment::test(),
        _ => ValidatorExperiment::test().with(&format!("spec:\n{extra}")),
    }
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn listed(existing: &BTreeMap<String, ValidatorTrial>) -> Vec<ValidatorTrial> {
    existing.values().cloned().collect()
}

/// The trials a pass creates, as planned trials.
fn next_to_start(
    vx: &ValidatorExperiment,
    existing: &BTreeMap<String, ValidatorTrial>,
) -> Vec<PlannedTrial> {
    choose(vx, &listed(existing), None)
        .create
        .into_iter()
        .flatten()
        .map(|t| PlannedTrial {
            point: t.spec.point,
            repetition: t.spec.repetition,
            pair: None,
        })
        .collect()
}

/// The status of a pass that finds `existing` (and creates nothing).
fn compute_status(
    vx: &ValidatorExperiment,
    existing: &BTreeMap<String, ValidatorTrial>,
) -> ValidatorExperimentStatus {
    let trials = listed(existing);
    status(
        vx,
        &choose(vx, &trials, None),
        &trials,
        &Default::default(),
        t0(),
    )
}

#[test]
fn starts_trials_in_plan_order_up_to_parallelism() {
    let vx = experiment("");
    let planned = plan(&vx.spec.sweep, 1);
    let next = next_to_start(&vx, &BTreeMap::new());
    assert_eq!(next.len(), 2);
    assert_eq!(next[0].point.memory.as_deref(), Some("128Gi"));
    let mut existing = BTreeMap::new();
    for p in &next {
        existing.insert(
            p.name("ram"),
            ValidatorTrial::planned(&vx, p).in_phase(TrialPhase::Measuring),
        );
    }
    assert!(next_to_start(&vx, &existing).is_empty());
    // One finishes: exactly one more starts, the next point in order.
    existing.insert(
        planned[0].name("ram"),
        ValidatorTrial::planned(&vx, &planned[0]).ended(TrialOutcome::OOMKilled, 1.0),
    );
    let next = next_to_start(&vx, &existing);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].point.memory.as_deref(), Some("512Gi"));
}

#[test]
fn a_deleted_trial_is_recreated_because_trials_are_compared_by_name() {
    let vx = experiment("");
    let planned = plan(&vx.spec.sweep, 1);
    let mut existing = BTreeMap::new();
    existing.insert(
        planned[1].name("ram"),
        ValidatorTrial::planned(&vx, &planned[1]).ended(TrialOutcome::KeptUp, 1.0),
    );
    existing.insert(
        planned[2].name("ram"),
        ValidatorTrial::planned(&vx, &planned[2]).ended(TrialOutcome::KeptUp, 1.0),
    );
    // Two finished, none active: the two missing ones start, whatever the count says.
    let next: Vec<_> = next_to_start(&vx, &existing)
        .iter()
        .map(|p| p.name("ram"))
        .collect();
    assert_eq!(next, vec![planned[0].name("ram"), planned[3].name("ram")]);
}

#[test]
fn suspend_and_the_failure_limit_stop_new_trials() {
    let vx = experiment("  suspend: true\n");
    assert!(next_to_start(&vx, &BTreeMap::new()).is_empty());
    let vx = experiment("  maxFailedTrials: 1\n");
    let planned = plan(&vx.spec.sweep, 1);
    let mut existing = BTreeMap::new();
    existing.insert(
        planned[0].name("ram"),
        ValidatorTrial::planned(&vx, &planned[0]).ended(TrialOutcome::Crashed, 0.0),
    );
    assert!(next_to_start(&vx, &existing).is_empty());
    let st = compute_status(&vx, &existing);
    assert_eq!(st.phase, ExperimentPhase::Failed);
    assert!(
        st.conditions
            .iter()
            .any(|c| c.reason == "MaxFailedTrialsReached")
    );
}

#[test]
fn recommends_the_smallest_memory_that_kept_up() {
    let vx = experiment("");
    let planned = plan(&vx.spec.sweep, 1);
    let outcomes = [
        TrialOutcome::OOMKilled,
        TrialOutcome::FellBehind,
        TrialOutcome::KeptUp,
        TrialOutcome::KeptUp,
    ];
    let existing: BTreeMap<_, _> = planned
        .iter()
        .zip(outcomes)
        .map(|(p, o)| {
            (
                p.name("ram"),
                ValidatorTrial::planned(&vx, p).ended(o, 4600.0),
            )
        })
        .collect();
    let st = compute_status(&vx, &existing);
    assert_eq!(st.phase, ExperimentPhase::Succeeded);
    assert_eq!(st.trials.finished, 4);
    let rec = st.recommendation.unwrap();
    assert_eq!(rec.summary, "memory=512Gi");
    // The point itself, not only its line: what a Validator's fromExperiment applies.
    let point = rec.point.clone().expect("the structured point");
    assert_eq!(point.memory.as_deref(), Some("512Gi"));
    assert_eq!(point.describe(), rec.summary);
    assert!(rec.reason.contains("256Gi: FellBehind"), "{}", rec.reason);
    assert!(rec.reason.contains("128Gi: OOMKilled"), "{}", rec.reason);
    assert_eq!(st.summary.len(), 4);
    assert_eq!(st.summary[2].outcomes, "KeptUp");
    assert!(st.completion_time.is_some());
}

/// The worst case at the cap: every one of 1024 trials finished with results, the
/// summary full. The object must stay far from etcd's limits (Katib #1847).
#[test]
fn an_experiment_at_the_cap_with_every_trial_finished_stays_under_64_kib() {
    let mut vx = experiment("  maxTrials: 1024\n");
    vx.spec.sweep.memory = Some((1..=32).map(|i| format!("{}Gi", 256 + 32 * i)).collect());
    vx.spec.sweep.cpu = Some((1..=32).map(|i| i * 2).collect());
    let planned = plan(&vx.spec.sweep, 1);
    assert_eq!(planned.len(), 1024);
    let existing: BTreeMap<_, _> = planned
        .iter()
        .map(|p| {
            let mut t = ValidatorTrial::planned(&vx, p).ended(TrialOutcome::KeptUp, 4600.0);
            t.status.as_mut().unwrap().results = Some(TrialResults {
                avg_tps: Some(4598.12),
                max_tps: Some(120790.77),
                zero_tps_seconds: Some(10039.3),
                max_rss_gib: Some(607.93),
                ..Default::default()
            });
            (p.name("ram"), t)
        })
        .collect();
    let st = compute_status(&vx, &existing);
    vx.status = Some(st);
    let size = serde_json::to_vec(&vx).unwrap().len();
    assert!(size < 64 * 1024, "{size} bytes");
}

#[test]
fn the_summary_is_capped() {
    let memory: Vec<String> = (1..=40).map(|i| format!("{}Gi", i * 16)).collect();
    let mut vx = experiment("  maxTrials: 64\n");
    vx.spec.sweep.memory = Some(memory);
    let planned = plan(&vx.spec.sweep, 1);
    let existing: BTreeMap<_, _> = planned
        .iter()
        .map(|p| {
            (
                p.name("ram"),
                ValidatorTrial::planned(&vx, p).ended(TrialOutcome::KeptUp, 1.0),
            )
        })
        .collect();
    let st = compute_status(&vx, &existing);
    assert_eq!(st.summary.len(), MAX_SUMMARY_ROWS);
    assert!(st.summary_truncated);
}

/// A trial of a point no longer in the sweep.
fn left_the_sweep(vx: &ValidatorExperiment, memory: &str, phase: TrialPhase) -> ValidatorTrial {
    let p = PlannedTrial {
        point: crate::api::sweep::TrialPoint {
            memory: Some(memory.into()),
            ..Default::default()
        },
        repetition: 1,
        pair: None,
    };
    ValidatorTrial::planned(vx, &p).in_phase(phase)
}

#[test]
fn created_trials_count_as_running_in_the_status_of_the_pass_that_creates_them() {
    let vx = experiment("");
    let step = choose(&vx, &[], None);
    assert!(step.delete.is_empty());
    let created: Vec<ValidatorTrial> = step.create.iter().flatten().cloned().collect();
    assert_eq!(created.len(), 2);
    let st = status(&vx, &step, &created, &Default::default(), t0());
    assert_eq!(st.phase, ExperimentPhase::Running);
    assert_eq!(
        (st.trials.expected, st.trials.pending, st.trials.active),
        (4, 2, 2)
    );
    assert_eq!(st.start_time.map(|t| t.0), Some(t0()));
    let progressing = st.conditions.iter().find(|c| c.type_ == "Progressing");
    assert_eq!(
        progressing.unwrap().message,
        "2 running, 0 finished, 2 to start (of 4)"
    );
}

#[test]
fn unstarted_trials_that_left_the_sweep_are_deleted_and_started_ones_run_to_their_end() {
    let vx = experiment("");
    let unstarted = left_the_sweep(&vx, "64Gi", TrialPhase::Pending);
    let started = left_the_sweep(&vx, "96Gi", TrialPhase::Measuring);
    let mut going = left_the_sweep(&vx, "32Gi", TrialPhase::Pending);
    going.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let trials = vec![unstarted.clone(), started, going];
    let step = choose(&vx, &trials, None);
    assert_eq!(step.delete, vec![unstarted.metadata.name.clone().unwrap()]);
    // Until it is gone, the deleted one still counts as holding a node, as the started
    // one does: parallelism 2 leaves no room.
    assert!(step.create.is_empty());
    let st = status(&vx, &step, &trials, &Default::default(), t0());
    assert_eq!(
        (st.trials.expected, st.trials.pending, st.trials.active),
        (4, 4, 2)
    );
    assert_eq!(st.phase, ExperimentPhase::Pending);
}

#[test]
fn a_strategy_with_nothing_to_propose_and_nothing_running_ends_the_experiment() {
    let vx = experiment("");
    let planned = plan(&vx.spec.sweep, 1);
    let finished = ValidatorTrial::planned(&vx, &planned[0]).ended(TrialOutcome::KeptUp, 1.0);
    let silent = Decision {
        trials: vec![planned[0].name("ram")],
        start: Vec::new(),
        stop: Vec::new(),
        expected: 1,
        done: None,
    };
    // Something to start, or a trial running: not done.
    let mut starting = silent.clone();
    starting.start = vec![TrialGroup(vec![planned[1].clone()])];
    let data = Dataset::from_trials(&vx.spec.sweep, [&finished]);
    never_hang(&mut starting, "test", &vx, &data);
    assert_eq!(starting.done, None);
    let running = ValidatorTrial::planned(&vx, &planned[0]).in_phase(TrialPhase::Measuring);
    let mut waiting = silent.clone();
    never_hang(
        &mut waiting,
        "test",
        &vx,
        &Dataset::from_trials(&vx.spec.sweep, [&running]),
    );
    assert_eq!(waiting.done, None);
    // Suspended: it waits for the user.
    let mut suspended = silent.clone();
    never_hang(
        &mut suspended,
        "test",
        &experiment("  suspend: true\n"),
        &data,
    );
    assert_eq!(suspended.done, None);
    // Otherwise the experiment ends, saying why.
    let mut decision = silent;
    never_hang(&mut decision, "test", &vx, &data);
    let st = super::summary::compute_status(&vx, &decision, &data, None, &Default::default(), t0());
    assert_eq!(st.phase, ExperimentPhase::Succeeded);
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "NothingToPropose");
    assert_eq!(
        ready.message,
        "the test strategy has nothing left to propose and no trial runs (1 finished)"
    );
}

/// A trial that ran from `t0` for `hours`, finished or (None) still running.
fn timed(
    vx: &ValidatorExperiment,
    p: &PlannedTrial,
    hours: i64,
    outcome: Option<TrialOutcome>,
) -> ValidatorTrial {
    let mut t = match outcome {
        Some(o) => ValidatorTrial::planned(vx, p).ended(o, 4000.0),
        None => ValidatorTrial::planned(vx, p).in_phase(TrialPhase::Measuring),
    };
    let st = t.status.as_mut().unwrap();
    let at = |h: i64| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            t0() + jiff::SignedDuration::from_hours(h),
        )
    };
    st.started_at = Some(at(0));
    st.window_start = Some(at(2));
    st.finished_at = outcome.map(|_| at(hours));
    t
}

/// maxNodeHours: below it trials start; once the trials held it, none starts, and when
/// the running ones have finished the experiment ends with the reason. The status shows
/// what was spent and what a grid of the same points would hold.
#[test]
fn max_node_hours_stops_new_trials_and_ends_the_experiment_with_the_reason() {
    let vx = experiment("  maxNodeHours: 20\n");
    let planned = plan(&vx.spec.sweep, 1);
    let mut existing = BTreeMap::new();
    existing.insert(
        planned[0].name("ram"),
        timed(&vx, &planned[0], 14, Some(TrialOutcome::OOMKilled)),
    );
    let pass = |existing: &BTreeMap<String, ValidatorTrial>, now_h: i64| {
        let trials = listed(existing);
        let now = t0() + jiff::SignedDuration::from_hours(now_h);
        let mut step = choose(&vx, &trials, None);
        super::decide::hold_to_budget(&mut step, &vx, crate::cost::spent(&trials, now));
        let st = status(&vx, &step, &trials, &Default::default(), now);
        (step, st)
    };
    // 14 node-hours: below the budget, two more start.
    let (step, st) = pass(&existing, 14);
    assert_eq!(step.create.len(), 2);
    assert_eq!(st.node_hours.clone().unwrap().spent, 14.0);
    // Four points, each 2h of warm-up (observed) and a 12h window.
    assert_eq!(st.node_hours.unwrap().grid, Some(56.0));
    // A second trial running 7 hours: 21 node-hours, nothing more starts.
    existing.insert(planned[1].name("ram"), timed(&vx, &planned[1], 0, None));
    let (step, st) = pass(&existing, 7);
    assert!(step.create.is_empty() && step.decision.start.is_empty());
    assert_eq!(st.phase, ExperimentPhase::Running);
    assert_eq!(
        step.decision.done.as_ref().unwrap().reason,
        "MaxNodeHoursReached"
    );
    // It finishes: the experiment ends, saying why.
    existing.insert(
        planned[1].name("ram"),
        timed(&vx, &planned[1], 8, Some(TrialOutcome::KeptUp)),
    );
    let (step, st) = pass(&existing, 9);
    assert!(step.create.is_empty());
    assert_eq!(st.phase, ExperimentPhase::Succeeded);
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "MaxNodeHoursReached");
    assert!(
        ready
            .message
            .contains("held 22 node-hours, reaching maxNodeHours=20"),
        "{}",
        ready.message
    );
    // Without a budget the same trials go on.
    let free = experiment("");
    let trials = listed(&existing);
    let mut step = choose(&free, &trials, None);
    super::decide::hold_to_budget(&mut step, &free, 22.0);
    assert_eq!(step.create.len(), 2);
}

/// A baseline that is no point of the sweep (a value it does not sweep): nothing starts,
/// and the experiment says which field and how to fix it. The same value written another
/// way ("1024Gi" for "1Ti") is the same point.
#[test]
fn a_baseline_outside_the_sweep_blocks_the_experiment_naming_the_field() {
    let vx = experiment("  comparison: {baseline: {memory: 768Gi}}\n");
    let step = choose(&vx, &[], None);
    assert!(step.create.is_empty());
    let why = step.blocked.unwrap();
    assert!(
        why.starts_with("comparison.baseline {memory: 768Gi} is not a point of the sweep"),
        "{why}"
    );
    let vx = experiment("  comparison: {baseline: {memory: 1024Gi}}\n");
    let step = choose(&vx, &[], None);
    assert_eq!(step.blocked, None);
    // Paired: a pair of two trials per group, the baseline (1Ti) in each.
    assert!(
        step.create.iter().all(|g| g.len() == 2),
        "{:?}",
        step.create.len()
    );
    let pinned = &step.create[0][0].spec;
    assert_eq!(pinned.point.memory.as_deref(), Some("1Ti"));
    assert_eq!(
        pinned.pair.as_ref().unwrap().role,
        crate::api::trial::PairRole::Baseline
    );
}

/// A repetition that measured nothing (a crash, a lost node, a warm-up that timed out)
/// says nothing of whether the memory is enough: it neither moves the memory
/// recommendation up nor counts as a repetition that kept up. A measured failure does.
#[test]
fn a_failure_that_measured_nothing_does_not_move_the_memory_recommendation() {
    use TrialOutcome::*;
    let vx = experiment("");
    // 256Gi's three repetitions (128Gi is OOM-killed, 512Gi and 1Ti keep up), what is
    // recommended, and the repetitions its reason counts.
    let cases: [([TrialOutcome; 3], &str, &str); 6] = [
        (
            [KeptUp, KeptUp, Crashed],
            "memory=256Gi",
            "in all 2 repetitions",
        ),
        (
            [NodeLost, KeptUp, KeptUp],
            "memory=256Gi",
            "in all 2 repetitions",
        ),
        (
            [KeptUp, TimedOut, KeptUp],
            "memory=256Gi",
            "in all 2 repetitions",
        ),
        (
            [Crashed, NodeLost, TimedOut],
            "memory=512Gi",
            "in all 3 repetitions",
        ),
        (
            [KeptUp, FellBehind, KeptUp],
            "memory=512Gi",
            "in all 3 repetitions",
        ),
        (
            [KeptUp, KeptUp, OOMKilled],
            "memory=512Gi",
            "in all 3 repetitions",
        ),
    ];
    for (at_256, want, counted) in cases {
        let trials: Vec<ValidatorTrial> = plan(&vx.spec.sweep, 3)
            .iter()
            .map(|p| {
                let o = match p.point.memory.as_deref() {
                    Some("128Gi") => OOMKilled,
                    Some("256Gi") => at_256[p.repetition as usize - 1],
                    _ => KeptUp,
                };
                ValidatorTrial::planned(&vx, p).ended(o, 4600.0)
            })
            .collect();
        let data = Dataset::from_trials(&vx.spec.sweep, &trials);
        let rec = super::summary::recommend(&vx, &data, 0).unwrap();
        assert_eq!(rec.summary, want, "{at_256:?}: {}", rec.reason);
        assert!(rec.reason.contains(counted), "{at_256:?}: {}", rec.reason);
    }
}
