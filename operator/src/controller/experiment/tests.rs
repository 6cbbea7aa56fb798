use super::summary::compute_status;
use super::*;
use crate::api::experiment::MAX_SUMMARY_ROWS;
use crate::api::trial::TrialOutcome;
use crate::api::trial::{TrialResults, ValidatorTrialStatus};
use jiff::Timestamp;

fn experiment(extra: &str) -> ValidatorExperiment {
    let yaml = format!(
        "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: ram, namespace: ns, uid: u1, generation: 1}}\nspec:\n  template:\n    agave: {{image: agave}}\n    storage: [{{role: ledger, size: 1Ti}}]\n  sweep: {{memory: [128Gi, 256Gi, 512Gi, 1Ti]}}\n  parallelism: 2\n{extra}"
    );
    serde_saphyr::from_str(&yaml).unwrap()
}

fn trial(
    vx: &ValidatorExperiment,
    p: &PlannedTrial,
    phase: TrialPhase,
    outcome: Option<TrialOutcome>,
    tps: f64,
) -> ValidatorTrial {
    let mut t = build_trial(vx, p);
    t.status = Some(ValidatorTrialStatus {
        phase,
        outcome,
        results: outcome.map(|_| TrialResults {
            avg_tps: Some(tps),
            ..Default::default()
        }),
        ..Default::default()
    });
    t
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

#[test]
fn starts_trials_in_plan_order_up_to_parallelism() {
    let vx = experiment("");
    let planned = plan(&vx.spec.sweep, 1);
    let next = next_to_start(&vx, &planned, &BTreeMap::new());
    assert_eq!(next.len(), 2);
    assert_eq!(next[0].point.memory.as_deref(), Some("128Gi"));
    let mut existing = BTreeMap::new();
    for p in &next {
        existing.insert(
            p.name("ram"),
            trial(&vx, p, TrialPhase::Measuring, None, 0.0),
        );
    }
    assert!(next_to_start(&vx, &planned, &existing).is_empty());
    // One finishes: exactly one more starts, the next point in order.
    existing.insert(
        planned[0].name("ram"),
        trial(
            &vx,
            &planned[0],
            TrialPhase::Succeeded,
            Some(TrialOutcome::OOMKilled),
            1.0,
        ),
    );
    let next = next_to_start(&vx, &planned, &existing);
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
        trial(
            &vx,
            &planned[1],
            TrialPhase::Succeeded,
            Some(TrialOutcome::KeptUp),
            1.0,
        ),
    );
    existing.insert(
        planned[2].name("ram"),
        trial(
            &vx,
            &planned[2],
            TrialPhase::Succeeded,
            Some(TrialOutcome::KeptUp),
            1.0,
        ),
    );
    // Two finished, none active: the two missing ones start, whatever the count says.
    let next: Vec<_> = next_to_start(&vx, &planned, &existing)
        .iter()
        .map(|p| p.name("ram"))
        .collect();
    assert_eq!(next, vec![planned[0].name("ram"), planned[3].name("ram")]);
}

#[test]
fn suspend_and_the_failure_limit_stop_new_trials() {
    let vx = experiment("  suspend: true\n");
    assert!(next_to_start(&vx, &plan(&vx.spec.sweep, 1), &BTreeMap::new()).is_empty());
    let vx = experiment("  maxFailedTrials: 1\n");
    let planned = plan(&vx.spec.sweep, 1);
    let mut existing = BTreeMap::new();
    existing.insert(
        planned[0].name("ram"),
        trial(
            &vx,
            &planned[0],
            TrialPhase::Failed,
            Some(TrialOutcome::Crashed),
            0.0,
        ),
    );
    assert!(next_to_start(&vx, &planned, &existing).is_empty());
    let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
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
                trial(&vx, p, TrialPhase::Succeeded, Some(o), 4600.0),
            )
        })
        .collect();
    let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
    assert_eq!(st.phase, ExperimentPhase::Succeeded);
    assert_eq!(st.trials.finished, 4);
    let rec = st.recommendation.unwrap();
    assert_eq!(rec.summary, "memory=512Gi");
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
            let mut t = trial(
                &vx,
                p,
                TrialPhase::Succeeded,
                Some(TrialOutcome::KeptUp),
                4600.0,
            );
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
    let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
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
                trial(
                    &vx,
                    p,
                    TrialPhase::Succeeded,
                    Some(TrialOutcome::KeptUp),
                    1.0,
                ),
            )
        })
        .collect();
    let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
    assert_eq!(st.summary.len(), MAX_SUMMARY_ROWS);
    assert!(st.summary_truncated);
}
