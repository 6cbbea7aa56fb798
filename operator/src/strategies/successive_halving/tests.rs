//! Successive halving's decisions, rung by rung, its answer, its windows and its cost.

use super::*;
use crate::api::trial::TrialPhase::*;

const EXPERIMENT: &str = "alloc";

/// Besu: 4 points (allocator x arenas), a 12h window.
fn spec(extra: &str) -> ValidatorExperimentSpec {
    serde_saphyr::from_str(&format!(
        "template: {{besu: {{image: hyperledger/besu:25.12.0}}}}\nsweep: {{allocator: [jemalloc, glibc], mallocArenaMax: [1, 4]}}\nstrategy: {{successiveHalving: {{eta: 2}}}}\ntrial: {{measurement: {{duration: 12h}}}}\n{extra}"
    ))
    .unwrap()
}

#[test]
fn rungs_keep_a_fraction_down_to_one() {
    // (points, eta, sizes)
    let cases: [(usize, usize, &[usize]); 6] = [
        (4, 2, &[4, 2, 1]),
        (4, 3, &[4, 1]),
        (9, 3, &[9, 3, 1]),
        (10, 3, &[10, 3, 1]),
        (2, 4, &[2, 1]),
        (1, 3, &[1]),
    ];
    for (points, eta, sizes) in cases {
        assert_eq!(rungs(points, eta), sizes, "{points} points, eta {eta}");
    }
}

#[test]
fn windows_grow_by_eta_to_the_full_window() {
    let full = Duration::from_secs(12 * 3600);
    let w: Vec<String> = (0..3)
        .map(|r| duration_text(rung_window(full, 2, r, 3)))
        .collect();
    assert_eq!(w, ["3h", "6h", "12h"]);
    assert_eq!(duration_text(Duration::from_millis(3333)), "3333ms");
    let s = spec("");
    assert_eq!(window(&s, 1).as_deref(), Some("3h"));
    assert_eq!(window(&s, 3).as_deref(), Some("12h"));
    let mut grid = spec("");
    grid.strategy.successive_halving = None;
    assert_eq!(window(&grid, 1), None);
    // The trial object carries its rung's window; the grid's, the experiment's.
    let built = |s: &ValidatorExperimentSpec| {
        let p = PlannedTrial {
            point: s.sweep.expand()[0].clone(),
            repetition: 2,
            pair: None,
        };
        let vx = crate::api::ValidatorExperiment::new("alloc", s.clone());
        let t = crate::strategies::build::build_trial(&vx, &p).unwrap();
        t.spec.settings.measurement.duration
    };
    assert_eq!(built(&s), "6h");
    assert_eq!(built(&grid), "12h");
}

/// Block processing p95 (ms) per point in the sweep's order: jemalloc/1, jemalloc/4,
/// glibc/1, glibc/4 (lower is better).
const P95: [f64; 4] = [100.0, 101.0, 108.0, 103.0];

fn trial(
    s: &ValidatorExperimentSpec,
    index: usize,
    rung: usize,
    phase: TrialPhase,
    outcome: Option<TrialOutcome>,
) -> TrialRecord {
    let p = PlannedTrial {
        point: s.sweep.expand()[index].clone(),
        repetition: rung as i32 + 1,
        pair: None,
    };
    let mut results = TrialResults::default();
    results.figures.insert(
        crate::clients::besu::profile::P95.into(),
        P95[index] + rung as f64,
    );
    TrialRecord {
        name: p.name(EXPERIMENT),
        point: p.point,
        repetition: p.repetition,
        phase,
        outcome,
        results: Some(results),
        ..Default::default()
    }
}

fn kept(s: &ValidatorExperimentSpec, index: usize, rung: usize) -> TrialRecord {
    trial(s, index, rung, Succeeded, Some(TrialOutcome::KeptUp))
}

fn started(d: &Decision) -> Vec<String> {
    d.start
        .iter()
        .flat_map(|g| &g.0)
        .map(|p| format!("{} {}", p.point.describe(), p.repetition))
        .collect()
}

/// The table: the trials there are, what it starts, whether it is done, and the trial
/// count it expects.
#[test]
fn successive_halving_decides() {
    type Trials = fn(&ValidatorExperimentSpec) -> Vec<TrialRecord>;
    // (case, spec additions, trials, started, done's reason, expected)
    type Case = (
        &'static str,
        &'static str,
        Trials,
        &'static [&'static str],
        Option<&'static str>,
        usize,
    );
    let cases: [Case; 8] = [
        (
            "the first rung, side by side",
            "parallelism: 4",
            |_| vec![],
            &[
                "allocator=jemalloc mallocArenaMax=1 1",
                "allocator=jemalloc mallocArenaMax=4 1",
                "allocator=glibc mallocArenaMax=1 1",
                "allocator=glibc mallocArenaMax=4 1",
            ],
            None,
            7,
        ),
        (
            "never more than parallelism",
            "parallelism: 2",
            |_| vec![],
            &[
                "allocator=jemalloc mallocArenaMax=1 1",
                "allocator=jemalloc mallocArenaMax=4 1",
            ],
            None,
            7,
        ),
        (
            "a rung waits for its last trial",
            "parallelism: 4",
            |s| {
                vec![
                    kept(s, 0, 0),
                    kept(s, 1, 0),
                    kept(s, 2, 0),
                    trial(s, 3, 0, Measuring, None),
                ]
            },
            &[],
            None,
            7,
        ),
        (
            "the best half goes on with a longer window",
            "parallelism: 4",
            |s| (0..4).map(|i| kept(s, i, 0)).collect(),
            &[
                "allocator=jemalloc mallocArenaMax=1 2",
                "allocator=jemalloc mallocArenaMax=4 2",
            ],
            None,
            7,
        ),
        (
            "a point that fell behind is out, whatever its figure",
            "parallelism: 4",
            |s| {
                vec![
                    trial(s, 0, 0, Succeeded, Some(TrialOutcome::FellBehind)),
                    kept(s, 1, 0),
                    kept(s, 2, 0),
                    kept(s, 3, 0),
                ]
            },
            &[
                "allocator=jemalloc mallocArenaMax=4 2",
                "allocator=glibc mallocArenaMax=4 2",
            ],
            None,
            7,
        ),
        (
            "the winner runs the full window",
            "parallelism: 4",
            |s| {
                vec![
                    kept(s, 0, 0),
                    kept(s, 1, 0),
                    kept(s, 2, 0),
                    kept(s, 3, 0),
                    kept(s, 0, 1),
                    kept(s, 1, 1),
                ]
            },
            &["allocator=jemalloc mallocArenaMax=1 3"],
            None,
            7,
        ),
        (
            "then it is the answer",
            "parallelism: 4",
            |s| {
                vec![
                    kept(s, 0, 0),
                    kept(s, 1, 0),
                    kept(s, 2, 0),
                    kept(s, 3, 0),
                    kept(s, 0, 1),
                    kept(s, 1, 1),
                    kept(s, 0, 2),
                ]
            },
            &[],
            Some("BestFound"),
            7,
        ),
        (
            "nothing kept up: it ends without an answer",
            "parallelism: 4",
            |s| {
                (0..4)
                    .map(|i| trial(s, i, 0, Succeeded, Some(TrialOutcome::OOMKilled)))
                    .collect()
            },
            &[],
            Some("NoValuePasses"),
            7,
        ),
    ];
    for (case, extra, trials, want, done, expected) in cases {
        let s = spec(extra);
        let d = SuccessiveHalving.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials(&s)));
        assert_eq!(started(&d), want, "{case}");
        assert_eq!(
            d.done.as_ref().map(|d| d.reason),
            done,
            "{case}: {:?}",
            d.done
        );
        assert_eq!(d.expected, expected, "{case}");
        assert!(d.stop.is_empty());
    }
}

#[test]
fn the_winner_and_its_full_window_trial() {
    let s = spec("parallelism: 4");
    let trials = vec![
        kept(&s, 0, 0),
        kept(&s, 1, 0),
        kept(&s, 2, 0),
        kept(&s, 3, 0),
        kept(&s, 0, 1),
        kept(&s, 1, 1),
        kept(&s, 0, 2),
    ];
    let data = Dataset::new(&s.sweep, trials.clone());
    let (p, value, trial) = winner(&s, &data).unwrap();
    assert_eq!(p.point.describe(), "allocator=jemalloc mallocArenaMax=1");
    assert_eq!(value, 102.0);
    assert_eq!(trial, trials[6].name);
    let d = SuccessiveHalving.decide(EXPERIMENT, &s, &data);
    assert!(
        d.done.unwrap().message.starts_with("allocator=jemalloc mallocArenaMax=1 is the best by block processing p95 (ms) (102 over the full window) after 3 rungs (7 trials for 4 points"),
    );
    // Before the last rung has measured, there is no winner.
    assert!(winner(&s, &Dataset::new(&s.sweep, trials[..6].to_vec())).is_none());
}

/// Its answer is the winner over the full window, never a short window's leader.
#[test]
fn the_answer_is_the_winner_once_the_last_rung_has_measured() {
    let s = spec("parallelism: 4");
    let mut trials: Vec<TrialRecord> = (0..4).map(|i| kept(&s, i, 0)).collect();
    trials.extend([kept(&s, 0, 1), kept(&s, 1, 1)]);
    let answer_of = |trials: &[TrialRecord]| {
        SuccessiveHalving.answer(
            &s,
            &Dataset::new(&s.sweep, trials.to_vec()),
            " (provisional)",
        )
    };
    assert_eq!(answer_of(&trials), Answer::Own(None));
    trials.push(kept(&s, 0, 2));
    let Answer::Own(Some(r)) = answer_of(&trials) else {
        panic!("no answer")
    };
    assert_eq!(r.summary, "allocator=jemalloc mallocArenaMax=1");
    assert_eq!(
        r.reason,
        "the best block processing p95 (ms) (102 over the full window) after every rung of successive halving (provisional)"
    );
    assert_eq!(r.trial, trials[6].name);
    assert_eq!(r.point.as_ref(), Some(&trials[6].point));
    assert!(r.support.unwrap().starts_with("kept up 3/3 "));
}

/// Successive halving: 9 Firedancer bench layouts, eta 3, 30-minute warm-ups: rungs
/// of 9, 3 and 1 trials at 80 minutes, 4 hours and 12 hours.
#[test]
fn successive_halving_costs_its_rungs_windows() {
    let s: ValidatorExperimentSpec = serde_saphyr::from_str(
        "template: {firedancer: {image: f, workload: bench}}\nsweep: {threads: [{name: verifyTiles, values: [2, 4, 6]}, {name: bankTiles, values: [2, 4, 6]}]}\nstrategy: {successiveHalving: {}}\ntrial: {warmup: {timeout: 1h}, measurement: {duration: 12h}}\nparallelism: 3\n",
    )
    .unwrap();
    let c = crate::cost::plan_cost(&s, None).unwrap();
    assert_eq!(c.trials.expected, 13);
    // 9 x (0.5 + 4/3) + 3 x (0.5 + 4) + 1 x (0.5 + 12): 16.5 + 13.5 + 12.5.
    assert!((c.node_hours.expected - 42.5).abs() < 1e-9, "{c:?}");
    // 3 waves of the first rung, 1 of the second, 1 of the last.
    assert_eq!(
        c.wall_clock.expected,
        Duration::from_secs(3 * 6600 + 16200 + 45000)
    );
    let grid = c.grid.unwrap();
    assert_eq!(grid.trials, 9);
    assert!((grid.node_hours - 112.5).abs() < 1e-9, "{grid:?}");
}
