//! The bisection's decisions, pass by pass, against a model of which sizes keep up.

use super::*;
use crate::api::trial::TrialPhase::*;
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::results::dataset::{Dataset, TrialRecord};

const EXPERIMENT: &str = "ram";

/// 23 memory values, 128Gi to 1536Gi by 64Gi, as the quickstart's question at 64 GiB.
pub(super) fn spec(extra: &str) -> ValidatorExperimentSpec {
    let values: Vec<String> = (2..=24).map(|i| format!("{}Gi", i * 64)).collect();
    serde_saphyr::from_str(&format!(
        "template: {{agave: {{image: agave}}}}\nsweep: {{memory: [{}]}}\nstrategy: {{bisection: {{}}}}\n{extra}",
        values.join(", ")
    ))
    .unwrap()
}

/// A trial of value `index` (0: 128Gi), repetition `rep`, in `phase` with `outcome`.
pub(super) fn trial(
    s: &ValidatorExperimentSpec,
    index: usize,
    rep: i32,
    phase: TrialPhase,
    outcome: Option<TrialOutcome>,
) -> TrialRecord {
    let p = PlannedTrial {
        point: s.sweep.expand()[index].clone(),
        repetition: rep,
        pair: None,
    };
    TrialRecord {
        name: p.name(EXPERIMENT),
        point: p.point,
        repetition: rep,
        phase,
        outcome,
        ..Default::default()
    }
}

/// A started trial of a point that left the sweep: it holds a node.
fn leftover(phase: TrialPhase) -> TrialRecord {
    let p = PlannedTrial {
        point: serde_saphyr::from_str("memory: 64Gi").unwrap(),
        repetition: 1,
        pair: None,
    };
    TrialRecord {
        name: p.name(EXPERIMENT),
        point: p.point,
        repetition: 1,
        phase,
        ..Default::default()
    }
}

/// The model: 512Gi (index 6) and above keep up.
pub(super) fn measured(s: &ValidatorExperimentSpec, index: usize, rep: i32) -> TrialRecord {
    let outcome = if index >= 6 {
        TrialOutcome::KeptUp
    } else {
        TrialOutcome::FellBehind
    };
    trial(s, index, rep, Succeeded, Some(outcome))
}

fn started(d: &Decision) -> Vec<Vec<String>> {
    d.start
        .iter()
        .map(|g| {
            g.0.iter()
                .map(|p| format!("{} {}", p.point.describe(), p.repetition))
                .collect()
        })
        .collect()
}

/// The search run to its end against the model, pass by pass, as the reconciler would
/// (every started trial finishes before the next pass).
fn run(s: &ValidatorExperimentSpec) -> (Vec<Vec<Vec<String>>>, Done, usize) {
    let mut trials: Vec<TrialRecord> = Vec::new();
    let mut rounds = Vec::new();
    for _ in 0..20 {
        let d = Bisection.decide(EXPERIMENT, s, &Dataset::new(&s.sweep, trials.clone()));
        if let Some(done) = d.done {
            assert!(d.start.is_empty());
            return (rounds, done, trials.len());
        }
        rounds.push(started(&d));
        for p in d.start.iter().flat_map(|g| g.0.iter()) {
            let index = s.sweep.expand().iter().position(|q| *q == p.point).unwrap();
            trials.push(measured(s, index, p.repetition));
        }
    }
    panic!("the search did not end: {rounds:?}");
}

/// A round created one trial at a time and cut short (the operator killed between
/// two creates) starts its missing trials on the next pass, as the round it was; a
/// round partly measured waits for its last trial.
#[test]
fn a_round_cut_short_resumes_as_it_was_planned() {
    let s = spec("parallelism: 3");
    let at = |secs: i64| Some(jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap());
    let running = |index, started| TrialRecord {
        started,
        ..trial(&s, index, 1, Measuring, None)
    };
    let done = |index, finished| TrialRecord {
        finished,
        ..measured(&s, index, 1)
    };
    let decide = |trials: Vec<TrialRecord>| {
        started(&Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials)))
    };
    // The first round (192Gi, 512Gi, 896Gi) with one trial created.
    assert_eq!(
        decide(vec![running(1, at(10)), running(6, at(11))]),
        [vec!["memory=896Gi 1"]]
    );
    // The second round (256Gi, 320Gi) after the first was measured.
    let first = || vec![done(1, at(100)), done(6, at(101)), done(12, at(102))];
    let mut cut = first();
    cut.push(running(2, at(110)));
    assert_eq!(decide(cut), [vec!["memory=320Gi 1"]]);
    // Not yet started (no start time): wait rather than guess.
    let mut unknown = first();
    unknown.push(running(6, None));
    assert!(decide(unknown).is_empty());
    // A round partly measured: 1216Gi ended after 448Gi started; nothing new.
    assert!(decide(vec![running(1, at(10)), done(12, at(20))]).is_empty());
}

/// Two rounds of the three spend a whole window on sizes that keep up (192Gi fails,
/// 512Gi and 896Gi keep up; then 256Gi to 448Gi fail, each ended early), then the
/// confirmation: 3 trials that keep up where the even k-section (448Gi, 832Gi, 1216Gi;
/// 512Gi, 640Gi, 704Gi) ran 6, in no more rounds at worst.
#[test]
fn three_nodes_find_512gi_in_nine_trials_of_twenty_three() {
    let (rounds, done, count) = run(&spec("parallelism: 3"));
    assert_eq!(
        rounds,
        [
            vec![
                vec!["memory=192Gi 1"],
                vec!["memory=512Gi 1"],
                vec!["memory=896Gi 1"]
            ],
            vec![vec!["memory=256Gi 1"], vec!["memory=320Gi 1"]],
            vec![vec!["memory=384Gi 1"], vec!["memory=448Gi 1"]],
            vec![vec!["memory=448Gi 2", "memory=512Gi 2"]],
        ]
    );
    assert_eq!(done.reason, "BoundaryFound");
    assert!(done.message.starts_with("memory=512Gi is the boundary: it kept up and memory=448Gi did not (9 trials for 23 values)"), "{}", done.message);
    assert_eq!(count, 9);
    let (_, done, count) = run(&spec("parallelism: 1"));
    assert_eq!(done.reason, "BoundaryFound");
    assert!(count <= 7, "plain bisection took {count} trials");
}

/// The table: the trials there are, what the bisection starts and whether it is done.
#[test]
fn the_bisection_decides() {
    type Trials = fn(&ValidatorExperimentSpec) -> Vec<TrialRecord>;
    // (case, spec additions, trials, groups started, done's reason)
    type Case = (
        &'static str,
        &'static str,
        Trials,
        &'static [&'static [&'static str]],
        Option<&'static str>,
    );
    let cases: [Case; 9] = [
        (
            "a round waits for its last trial",
            "parallelism: 3",
            |s| vec![measured(s, 5, 1), trial(s, 11, 1, Measuring, None)],
            &[],
            None,
        ),
        (
            "suspended: nothing new",
            "parallelism: 3\nsuspend: true",
            |_| vec![],
            &[],
            None,
        ),
        (
            "a trial that measured nothing is run again",
            "",
            |s| {
                vec![
                    measured(s, 5, 1),
                    measured(s, 7, 1),
                    trial(s, 6, 1, Failed, Some(TrialOutcome::Crashed)),
                ]
            },
            &[&["memory=512Gi 2"]],
            None,
        ),
        (
            "then it is inconclusive, and the search goes around it",
            "",
            |s| {
                vec![
                    measured(s, 5, 1),
                    measured(s, 5, 2),
                    measured(s, 7, 1),
                    measured(s, 7, 2),
                    trial(s, 6, 1, Failed, Some(TrialOutcome::Crashed)),
                    trial(s, 6, 2, Failed, Some(TrialOutcome::NodeLost)),
                ]
            },
            &[],
            Some("BoundaryFound"),
        ),
        (
            "the confirmation pair starts whole or not at all",
            "parallelism: 2",
            |s| vec![measured(s, 5, 1), measured(s, 6, 1), leftover(Measuring)],
            &[],
            None,
        ),
        (
            "with parallelism 1 it confirms one after the other",
            "",
            |s| vec![measured(s, 5, 1), measured(s, 6, 1)],
            &[&["memory=448Gi 2"]],
            None,
        ),
        (
            "a confirmation that fails moves the boundary up",
            "",
            |s| {
                vec![
                    measured(s, 5, 1),
                    measured(s, 6, 1),
                    measured(s, 5, 2),
                    trial(s, 6, 2, Succeeded, Some(TrialOutcome::FellBehind)),
                    measured(s, 8, 1),
                ]
            },
            &[&["memory=576Gi 1"]],
            None,
        ),
        (
            "nothing keeps up",
            "",
            |s| {
                vec![
                    measured(s, 3, 1),
                    trial(s, 22, 1, Succeeded, Some(TrialOutcome::OOMKilled)),
                ]
            },
            &[],
            Some("NoValuePasses"),
        ),
        (
            "maxTrials ends it",
            "maxTrials: 2",
            |s| vec![measured(s, 3, 1), measured(s, 11, 1)],
            &[],
            Some("MaxTrialsReached"),
        ),
    ];
    for (case, extra, trials, want, done) in cases {
        let s = spec(extra);
        let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials(&s)));
        let want: Vec<Vec<String>> = want
            .iter()
            .map(|g| g.iter().map(|t| t.to_string()).collect())
            .collect();
        assert_eq!(started(&d), want, "{case}");
        assert_eq!(
            d.done.as_ref().map(|d| d.reason),
            done,
            "{case}: {:?}",
            d.done
        );
        assert!(d.stop.is_empty());
    }
}

/// Once the bracket is closed, `expected` counts the confirmation trials still to
/// come: the pair waiting for a node, the second of a pair confirmed one at a time.
#[test]
fn expected_counts_the_confirmation_still_to_come() {
    let s = spec("parallelism: 2");
    let trials = vec![measured(&s, 5, 1), measured(&s, 6, 1), leftover(Measuring)];
    let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials));
    assert!(d.start.is_empty());
    assert_eq!(d.expected, 2 + 2, "the waiting pair");
    let s = spec("");
    let trials = vec![measured(&s, 5, 1), measured(&s, 6, 1)];
    let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials));
    assert_eq!(started(&d), vec![vec!["memory=448Gi 2".to_string()]]);
    assert_eq!(d.expected, 2 + 1 + 1, "448Gi starting, 512Gi to come");
    let trials = vec![
        measured(&s, 5, 1),
        measured(&s, 6, 1),
        measured(&s, 5, 2),
        measured(&s, 6, 2),
    ];
    let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials));
    assert_eq!(d.expected, 4, "confirmed");
}

#[test]
fn a_non_monotone_result_is_reported() {
    let s = spec("");
    let trials = vec![
        measured(&s, 2, 1),
        trial(&s, 3, 1, Succeeded, Some(TrialOutcome::KeptUp)),
        measured(&s, 5, 1),
        measured(&s, 5, 2),
        measured(&s, 6, 1),
        measured(&s, 6, 2),
    ];
    let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials));
    let done = d.done.unwrap();
    assert_eq!(done.reason, "NonMonotone");
    assert!(
        done.message.contains(
            "non-monotone: memory=320Gi kept up below a value that did not (memory=448Gi)"
        ),
        "{}",
        done.message
    );
    // Nothing kept up above the failure: still flagged, never "no value kept up".
    let trials = vec![
        trial(&s, 3, 1, Succeeded, Some(TrialOutcome::KeptUp)),
        measured(&s, 5, 1),
        trial(&s, 22, 1, Succeeded, Some(TrialOutcome::FellBehind)),
    ];
    let d = Bisection.decide(EXPERIMENT, &s, &Dataset::new(&s.sweep, trials));
    let done = d.done.unwrap();
    assert_eq!(done.reason, "NonMonotone");
    assert!(
        done.message.starts_with("no value at or above memory=1536Gi kept up (3 trials for 23 values); non-monotone: memory=320Gi kept up below a value that did not (memory=1536Gi)"),
        "{}",
        done.message
    );
}
