//! Bisection: the boundary value of one ordered parameter (the least memory that keeps
//! up, the most memory pressure that still does), found in rounds of up to `parallelism`
//! points over what is still unknown, placed where they cost least on average without
//! ever taking more rounds than an even k-section ([`placement`]), so a round's trials
//! run side by side and see one chain. It ends with a confirmation round: the answer and
//! the value next to it, again, side by side. Like running-ng's `minheap`
//! (anupli/running-ng src/running/command/minheap.py): a measured failure (FellBehind,
//! OOMKilled, Aborted) means too small; a trial that measured nothing (Crashed, NodeLost,
//! ...) is run again up to `retries` times, then its value is Inconclusive and the search
//! goes around it.
//!
//! Stateless: every decision is read from the trials, so an operator restarted mid-search
//! resumes it exactly, and a trial deleted by hand is run again.

use super::placement;
use super::plan::PlannedTrial;
use super::{Decision, Done, Strategy, TrialGroup, room};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::strategy::{BisectionSpec, Seek};
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::results::dataset::{Dataset, Point, TrialRecord};

pub struct Bisection;

/// What a value's trials say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Measured trials that kept up, and that did not.
    pub passed: usize,
    pub failed: usize,
    /// Trials that measured nothing since the value's last measurement.
    pub broken_since: usize,
    pub running: bool,
    /// Trials of the value (the next one's repetition is this plus one).
    pub trials: usize,
}

impl Evidence {
    pub fn of(p: &Point) -> Evidence {
        let mut e = Evidence::default();
        for t in p.trials.iter().filter(|t| !t.deleting) {
            e.trials += 1;
            match (t.phase, t.outcome) {
                (TrialPhase::Succeeded, Some(TrialOutcome::KeptUp)) => {
                    e.passed += 1;
                    e.broken_since = 0;
                }
                (TrialPhase::Succeeded, _) => {
                    e.failed += 1;
                    e.broken_since = 0;
                }
                (TrialPhase::Failed, _) => e.broken_since += 1,
                _ => e.running = true,
            }
        }
        // Deleted trials keep their repetition numbers taken.
        e.trials = e.trials.max(
            p.trials
                .iter()
                .map(|t| t.repetition.max(0) as usize)
                .max()
                .unwrap_or(0),
        );
        e
    }

    fn measured(&self) -> usize {
        self.passed + self.failed
    }

    /// Too small (or unstable: a value that both passed and failed is no answer).
    fn fails(&self) -> bool {
        self.failed > 0
    }

    fn passes(&self) -> bool {
        self.passed > 0 && self.failed == 0
    }

    fn inconclusive(&self, retries: i32) -> bool {
        self.measured() == 0 && self.broken_since > retries.max(0) as usize
    }
}

/// Where the search stands, over values ordered so that passing lies above failing (for
/// `seek: most` the sweep's order reversed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The highest failing index, if any.
    pub lo: Option<usize>,
    /// The least passing index above `lo`: the answer once nothing between is unknown.
    pub hi: Option<usize>,
    /// Passing indices below `lo`: the data contradict a single boundary.
    pub non_monotone: Vec<usize>,
    /// Indices strictly between `lo` and `hi` that may still be tested.
    pub open: Vec<usize>,
    /// Indices between `lo` and `hi` given up on.
    pub inconclusive: Vec<usize>,
}

/// The boundary `evidence` (in pass-above-fail order) shows.
pub fn boundary(evidence: &[Evidence], retries: i32) -> Boundary {
    let lo = evidence.iter().rposition(Evidence::fails);
    let above = lo.map_or(0, |l| l + 1);
    let hi = (above..evidence.len()).find(|i| evidence[*i].passes());
    let end = hi.unwrap_or(evidence.len());
    let (inconclusive, open): (Vec<usize>, Vec<usize>) =
        (above..end).partition(|i| evidence[*i].inconclusive(retries));
    Boundary {
        lo,
        hi,
        non_monotone: (0..lo.unwrap_or(0))
            .filter(|i| evidence[*i].passes())
            .collect(),
        open,
        inconclusive,
    }
}

/// A round's picks among `open` (sorted indices, between `lo` and `hi`) for `parallelism`
/// points: the placement of least expected cost ([`placement`]), or the k-section's even
/// spread where that is not computed.
pub fn picks(
    open: &[usize],
    lo: Option<usize>,
    hi: usize,
    parallelism: usize,
    fail: f64,
) -> Vec<usize> {
    if parallelism == 0 {
        return Vec::new();
    }
    match placement::placement(open.len(), parallelism, fail) {
        Some(positions) => positions.into_iter().map(|i| open[i]).collect(),
        None => spread(open, lo, hi, parallelism),
    }
}

/// Up to `k` of `open` (sorted), spread evenly over (lo, hi): the k-section's picks.
pub fn spread(open: &[usize], lo: Option<usize>, hi: usize, k: usize) -> Vec<usize> {
    let k = k.min(open.len());
    let lo = lo.map_or(-1.0, |l| l as f64);
    let mut picked: Vec<usize> = Vec::with_capacity(k);
    for j in 1..=k {
        let target = lo + (hi as f64 - lo) * j as f64 / (k + 1) as f64;
        if let Some(best) = open.iter().filter(|i| !picked.contains(i)).min_by(|a, b| {
            (**a as f64 - target)
                .abs()
                .total_cmp(&(**b as f64 - target).abs())
                .then(a.cmp(b))
        }) {
            picked.push(*best);
        }
    }
    picked.sort_unstable();
    picked
}

/// The in-sweep points of the one swept parameter in pass-above-fail order.
pub fn ordered(data: &Dataset, seek: Seek) -> Vec<&Point> {
    let mut points: Vec<&Point> = data.points().iter().filter(|p| p.in_sweep).collect();
    if seek == Seek::Most {
        points.reverse();
    }
    points
}

/// The bisection settings and the sought end of an experiment, if it bisects.
pub fn of(spec: &ValidatorExperimentSpec, data: &Dataset) -> Option<(BisectionSpec, Seek)> {
    let b = spec.strategy.bisection.clone()?;
    let field = data
        .dimensions()
        .first()
        .map(|d| d.name.as_str())
        .unwrap_or("");
    let seek = b.seek_for(field);
    Some((b, seek))
}

/// "memory=512Gi (KeptUp/KeptUp)"-style listing of indices.
fn listed(points: &[&Point], indices: &[usize]) -> String {
    indices
        .iter()
        .map(|i| points[*i].point.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Strategy for Bisection {
    fn name(&self) -> &'static str {
        "bisection"
    }

    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision {
        let (settings, seek) = of(spec, trials).unwrap_or((BisectionSpec::default(), Seek::Least));
        let points = ordered(trials, seek);
        let evidence: Vec<Evidence> = points.iter().map(|p| Evidence::of(p)).collect();
        let b = boundary(&evidence, settings.retries);
        let fail = placement::of_spec(spec);
        let mut names: Vec<String> = points
            .iter()
            .flat_map(|p| p.trials.iter().map(|t| t.name.clone()))
            .collect();
        let tally = trials.tally(&names);
        let planned = |i: usize| PlannedTrial {
            point: points[i].point.clone(),
            repetition: evidence[i].trials as i32 + 1,
            pair: None,
        };
        let cap = (spec.max_trials.max(0) as usize).saturating_sub(tally.created);
        // A round starts whole: nothing new while one of its trials still runs.
        let running = evidence.iter().any(|e| e.running);
        let slots = if running {
            0
        } else {
            room(spec, &tally).min(cap)
        };

        let mut start = Vec::new();
        let mut done = None;
        // Confirmation trials still to come once the bracket is closed (beyond those
        // running or starting now).
        let mut confirming = 0;
        if !b.open.is_empty() {
            let hi = b.hi.unwrap_or(points.len());
            // A round whose trials are created one by one can be cut short (the operator
            // stopped between two creates): the round it was is the k-section of the same
            // open values, k as wide as it started, and its missing trials start now, all
            // of them or none, so a restart resumes the search exactly.
            let in_round: Vec<usize> = b
                .open
                .iter()
                .copied()
                .filter(|i| evidence[*i].running)
                .collect();
            // The round was planned on today's evidence only if nothing measured ended
            // after its trials started (else it is a round partly done: it waits).
            let started = |i: &usize| {
                points[*i]
                    .trials
                    .iter()
                    .filter(|t| !t.phase.is_finished())
                    .map(|t| t.started)
                    .min()
                    .flatten()
            };
            let first_start = in_round.iter().map(started).min().flatten();
            let last_measured = points
                .iter()
                .flat_map(|p| p.trials.iter())
                .filter(|t| t.phase.is_finished())
                .map(|t| t.finished)
                .max()
                .flatten();
            let planned_on_today = match (first_start, last_measured) {
                (Some(s), Some(m)) => m <= s,
                (Some(_), None) => !points
                    .iter()
                    .any(|p| p.trials.iter().any(|t| t.phase.is_finished())),
                _ => false,
            };
            let all_running_in_round = planned_on_today
                && in_round.iter().all(|i| started(i).is_some())
                && evidence.iter().filter(|e| e.running).count() == in_round.len();
            let parallelism = spec.parallelism.max(1) as usize;
            let chosen = if in_round.is_empty() {
                picks(&b.open, b.lo, hi, parallelism.min(slots), fail)
            } else {
                let k = parallelism.min(cap + in_round.len());
                let round = picks(&b.open, b.lo, hi, k, fail);
                let missing: Vec<usize> = round
                    .iter()
                    .copied()
                    .filter(|i| !evidence[*i].running)
                    .collect();
                let fits = missing.len() <= room(spec, &tally).min(cap);
                if all_running_in_round && in_round.iter().all(|i| round.contains(i)) && fits {
                    missing
                } else {
                    Vec::new()
                }
            };
            start = chosen
                .into_iter()
                .map(|i| TrialGroup(vec![planned(i)]))
                .collect();
            if start.is_empty() && !running && cap == 0 {
                done = Some(max_trials_done(spec));
            }
        } else {
            // The bracket is closed: confirm the answer and the value below it.
            let wanted: Vec<usize> = match (settings.confirm, b.hi) {
                (true, Some(hi)) => b.lo.into_iter().chain([hi]).collect(),
                _ => Vec::new(),
            };
            let unconfirmed: Vec<usize> = wanted
                .iter()
                .copied()
                .filter(|i| evidence[*i].measured() < 2)
                .collect();
            let stuck: Vec<usize> = unconfirmed
                .iter()
                .copied()
                .filter(|i| evidence[*i].broken_since > settings.retries.max(0) as usize)
                .collect();
            if !unconfirmed.is_empty() && stuck.is_empty() {
                // Side by side, whole or not yet; one after the other where parallelism
                // is 1 and a pair could never start.
                let whole = unconfirmed.len().min(spec.parallelism.max(1) as usize);
                let group = &unconfirmed[..whole];
                if slots >= group.len() {
                    start = vec![TrialGroup(group.iter().map(|i| planned(*i)).collect())];
                } else if !running && cap < group.len() {
                    done = Some(max_trials_done(spec));
                }
            } else if !running {
                done = Some(finished(&points, &b, &stuck, names.len()));
            }
            if stuck.is_empty() {
                confirming = unconfirmed
                    .iter()
                    .map(|i| {
                        let starting = start
                            .iter()
                            .flat_map(|g| &g.0)
                            .filter(|p| p.point == points[*i].point)
                            .count();
                        2usize
                            .saturating_sub(evidence[*i].measured())
                            .saturating_sub(usize::from(evidence[*i].running) + starting)
                    })
                    .sum();
            }
        }
        names.extend(
            start
                .iter()
                .flat_map(|g| g.0.iter().map(|p| p.name(experiment))),
        );
        let expected = names.len()
            + confirming
            + remaining(
                &b,
                spec.parallelism.max(1) as usize,
                fail,
                settings.confirm,
                &start,
            );
        Decision {
            trials: names,
            start,
            stop: Vec::new(),
            expected,
            done,
        }
    }
}

/// An estimate of the trials still to come after those started now, while the bracket is
/// open: rounds as placed over what is open, each leaving the mean of its gaps, then the
/// confirmation pair (once it is closed, the caller counts the confirmation trials still
/// to come).
fn remaining(
    b: &Boundary,
    parallelism: usize,
    fail: f64,
    confirm: bool,
    starting: &[TrialGroup],
) -> usize {
    let started: usize = starting.iter().map(|g| g.0.len()).sum();
    let mut open = b.open.len().saturating_sub(started);
    let mut trials = 0;
    while open > 0 {
        let all: Vec<usize> = (0..open).collect();
        let k = picks(&all, None, open, parallelism, fail).len();
        trials += k;
        open = (open - k) / (k + 1);
    }
    let confirmation = if confirm && !b.open.is_empty() { 2 } else { 0 };
    trials + confirmation
}

fn max_trials_done(spec: &ValidatorExperimentSpec) -> Done {
    Done {
        reason: "MaxTrialsReached",
        message: format!(
            "the bisection reached maxTrials={} before it could finish: raise maxTrials to go on",
            spec.max_trials
        ),
    }
}

/// The search's conclusion.
fn finished(points: &[&Point], b: &Boundary, stuck: &[usize], trials: usize) -> Done {
    let mut notes = Vec::new();
    if !b.non_monotone.is_empty() {
        notes.push(format!(
            "non-monotone: {} kept up below a value that did not ({})",
            listed(points, &b.non_monotone),
            listed(points, &b.lo.into_iter().collect::<Vec<_>>())
        ));
    }
    if !b.inconclusive.is_empty() {
        notes.push(format!(
            "inconclusive (no measurement after retries): {}",
            listed(points, &b.inconclusive)
        ));
    }
    if !stuck.is_empty() {
        notes.push(format!(
            "the confirmation of {} measured nothing after retries",
            listed(points, stuck)
        ));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    match b.hi {
        Some(hi) => Done {
            reason: if b.non_monotone.is_empty() {
                "BoundaryFound"
            } else {
                "NonMonotone"
            },
            message: format!(
                "{} is the boundary: it kept up{} ({trials} trials for {} values){notes}",
                points[hi].point.describe(),
                b.lo.map(|l| format!(" and {} did not", points[l].point.describe()))
                    .unwrap_or_default(),
                points.len()
            ),
        },
        // Nothing kept up above the highest failure; below it something did (a slower
        // machine, a load peak): that is no answer, and not "nothing kept up" either.
        None if !b.non_monotone.is_empty() => Done {
            reason: "NonMonotone",
            message: format!(
                "no value at or above {} kept up ({trials} trials for {} values){notes}",
                listed(points, &b.lo.into_iter().collect::<Vec<_>>()),
                points.len()
            ),
        },
        None => Done {
            reason: "NoValuePasses",
            message: format!(
                "no value kept up{} ({trials} trials for {} values){notes}",
                b.lo.map(|l| format!(", up to {}", points[l].point.describe()))
                    .unwrap_or_default(),
                points.len()
            ),
        },
    }
}

/// What the search costs if the boundary lies at each place it can (at every value, or
/// beyond the last), every trial measuring as that boundary says: (trials, rounds) for
/// each place. `valtune plan` reads its mean and its most.
pub fn simulate(spec: &ValidatorExperimentSpec) -> Vec<(usize, usize)> {
    let empty = Dataset::new(&spec.sweep, []);
    let Some((_, seek)) = of(spec, &empty) else {
        return Vec::new();
    };
    let order: Vec<String> = ordered(&empty, seek)
        .iter()
        .map(|p| p.key.clone())
        .collect();
    (0..=order.len())
        .map(|boundary| {
            let mut trials: Vec<TrialRecord> = Vec::new();
            let mut rounds = 0;
            // Each round adds a trial; the bound only guards against a bug looping.
            for _ in 0..=4 * order.len() + 4 {
                let d = Bisection.decide("plan", spec, &Dataset::new(&spec.sweep, trials.clone()));
                if d.done.is_some() || d.start.is_empty() {
                    break;
                }
                rounds += 1;
                for p in d.start.iter().flat_map(|g| g.0.iter()) {
                    let index = order.iter().position(|k| *k == p.point.canonical());
                    let kept_up = index.is_some_and(|i| i >= boundary);
                    trials.push(TrialRecord {
                        name: p.name("plan"),
                        point: p.point.clone(),
                        repetition: p.repetition,
                        phase: TrialPhase::Succeeded,
                        outcome: Some(if kept_up {
                            TrialOutcome::KeptUp
                        } else {
                            TrialOutcome::FellBehind
                        }),
                        ..Default::default()
                    });
                }
            }
            (trials.len(), rounds)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::TrialPhase::*;

    fn ev(passed: usize, failed: usize, broken_since: usize) -> Evidence {
        Evidence {
            passed,
            failed,
            broken_since,
            running: false,
            trials: passed + failed + broken_since,
        }
    }
    const U: Evidence = Evidence {
        passed: 0,
        failed: 0,
        broken_since: 0,
        running: false,
        trials: 0,
    };

    #[test]
    fn the_boundary_is_the_least_pass_above_the_highest_failure() {
        let p = ev(1, 0, 0);
        let f = ev(0, 1, 0);
        // (case, evidence, lo, hi, open, non-monotone)
        type Case = (
            &'static str,
            Vec<Evidence>,
            Option<usize>,
            Option<usize>,
            Vec<usize>,
            Vec<usize>,
        );
        let cases: [Case; 6] = [
            (
                "nothing known",
                vec![U, U, U],
                None,
                None,
                vec![0, 1, 2],
                vec![],
            ),
            (
                "bracketed",
                vec![f, U, U, p, U],
                Some(0),
                Some(3),
                vec![1, 2],
                vec![],
            ),
            ("closed", vec![f, f, p, p], Some(1), Some(2), vec![], vec![]),
            (
                "nothing passes yet",
                vec![U, f, U],
                Some(1),
                None,
                vec![2],
                vec![],
            ),
            (
                "a pass below a failure",
                vec![p, f, U, p],
                Some(1),
                Some(3),
                vec![2],
                vec![0],
            ),
            (
                "passed and failed is no answer",
                vec![f, ev(1, 1, 0), p],
                Some(1),
                Some(2),
                vec![],
                vec![],
            ),
        ];
        for (case, evidence, lo, hi, open, non_monotone) in cases {
            let b = boundary(&evidence, 1);
            assert_eq!((b.lo, b.hi), (lo, hi), "{case}");
            assert_eq!(b.open, open, "{case}");
            assert_eq!(b.non_monotone, non_monotone, "{case}");
        }
        // Two trials that measured nothing with one retry allowed: inconclusive.
        let b = boundary(&[ev(0, 1, 0), ev(0, 0, 2), ev(0, 0, 1), ev(1, 0, 0)], 1);
        assert_eq!((b.open, b.inconclusive), (vec![2], vec![1]));
    }

    #[test]
    fn a_round_spreads_its_points_evenly() {
        let all: Vec<usize> = (0..23).collect();
        assert_eq!(spread(&all, None, 23, 3), [5, 11, 17]);
        assert_eq!(spread(&all, None, 23, 1), [11]);
        assert_eq!(spread(&[6, 7, 8, 9, 10], Some(5), 11, 3), [6, 8, 9]);
        assert_eq!(spread(&[6], Some(5), 7, 3), [6]);
        assert_eq!(spread(&[6, 7], Some(5), 8, 0), Vec::<usize>::new());
    }

    const EXPERIMENT: &str = "ram";

    /// 23 memory values, 128Gi to 1536Gi by 64Gi, as the quickstart's question at 64 GiB.
    fn spec(extra: &str) -> ValidatorExperimentSpec {
        let values: Vec<String> = (2..=24).map(|i| format!("{}Gi", i * 64)).collect();
        serde_saphyr::from_str(&format!(
            "template: {{agave: {{image: agave}}}}\nsweep: {{memory: [{}]}}\nstrategy: {{bisection: {{}}}}\n{extra}",
            values.join(", ")
        ))
        .unwrap()
    }

    /// A trial of value `index` (0: 128Gi), repetition `rep`, in `phase` with `outcome`.
    fn trial(
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
    fn measured(s: &ValidatorExperimentSpec, index: usize, rep: i32) -> TrialRecord {
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

    #[test]
    fn the_plan_simulates_every_place_the_boundary_can_be() {
        let runs = simulate(&spec("parallelism: 3"));
        assert_eq!(runs.len(), 24);
        // The boundary at 512Gi: the run above, in four rounds.
        assert_eq!(runs[6], (9, 4));
        // Never more than the k-section's 4 rounds wherever the boundary is (a grid: 23
        // trials in 8); up to 11 trials, the extra ones sizes too small, ended early.
        assert!(runs.iter().all(|r| r.0 <= 11 && r.1 <= 4), "{runs:?}");
        // Nothing keeps up: no answer to confirm.
        assert_eq!(runs[23], (9, 3));
    }

    #[test]
    fn seek_most_answers_with_the_largest_passing_value() {
        let s: ValidatorExperimentSpec = serde_saphyr::from_str(
            "template: {nodeos: {image: nodeos}}\nsweep: {memoryPressure: ['0', 2Gi, 4Gi, 6Gi, 8Gi, 10Gi]}\nstrategy: {bisection: {}}\nparallelism: 2\n",
        )
        .unwrap();
        let data = Dataset::new(&s.sweep, []);
        assert_eq!(of(&s, &data).unwrap().1, Seek::Most);
        let points: Vec<String> = ordered(&data, Seek::Most)
            .iter()
            .map(|p| p.point.describe())
            .collect();
        assert_eq!(points[0], "memoryPressure=10Gi");
        assert_eq!(points[5], "memoryPressure=0");
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
}
