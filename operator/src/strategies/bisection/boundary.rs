//! What a bisection's trials say: each value's evidence, and the boundary they show over
//! the values in pass-above-fail order.

use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::strategy::{BisectionSpec, Seek};
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::results::dataset::{Dataset, Point};

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

    pub(super) fn measured(&self) -> usize {
        self.passed + self.failed
    }

    /// Too small (or unstable: a value that both passed and failed is no answer).
    pub(super) fn fails(&self) -> bool {
        self.failed > 0
    }

    pub(super) fn passes(&self) -> bool {
        self.passed > 0 && self.failed == 0
    }

    pub(super) fn inconclusive(&self, retries: i32) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
