//! What a bisection costs before it runs: the search simulated with its boundary at every
//! place it can be, its mean and its most.

use std::time::Duration;

use super::Bisection;
use super::boundary::{of, ordered};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::results::dataset::{Dataset, TrialRecord};
use crate::strategies::Strategy;
use crate::strategies::plan::plan;
use crate::strategies::schedule::{Bounds, Schedule, Stage};

/// Its trials and rounds (waves): the mean over every place the boundary can be, and the
/// most, at `parallelism` points a round.
pub fn schedule(spec: &ValidatorExperimentSpec, parallelism: u32, window: Duration) -> Schedule {
    let mut at = spec.clone();
    at.parallelism = parallelism as i32;
    let runs = simulate(&at);
    let mean = |f: fn(&(usize, usize)) -> usize| {
        (runs.iter().map(f).sum::<usize>() as f64 / runs.len().max(1) as f64).ceil() as u32
    };
    let most = |f: fn(&(usize, usize)) -> usize| runs.iter().map(f).max().unwrap_or(0) as u32;
    Schedule {
        stages: vec![Stage {
            trials: Bounds {
                expected: mean(|r| r.0),
                worst: most(|r| r.0),
            },
            waves: Bounds {
                expected: mean(|r| r.1),
                worst: most(|r| r.1),
            },
            window,
        }],
        stage: None,
        searches: true,
    }
}

/// `valtune plan`'s words for it: the values it chooses among, and its trials wherever the
/// answer is.
pub fn describe(spec: &ValidatorExperimentSpec, schedule: &Schedule, parallelism: u32) -> String {
    let values: Vec<String> = plan(&spec.sweep, spec.trial.repetitions)
        .iter()
        .map(|t| t.point.describe())
        .collect();
    let trials = schedule.trials();
    format!(
        "a bisection over {} values, about {} trials ({} at most) wherever the answer lies, {parallelism} at a time (a grid: {} trials)\n  values: {}\n",
        values.len(),
        trials.expected,
        trials.worst,
        values.len(),
        values.join(", ")
    )
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
    use crate::strategies::bisection::tests::spec;

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

    /// The quickstart's question at 64 GiB: 23 values, 128Gi to 1536Gi.
    #[test]
    fn a_bisection_costs_a_fraction_of_the_grid() {
        let values: Vec<String> = (2..=24).map(|i| format!("{}Gi", i * 64)).collect();
        let s: ValidatorExperimentSpec = serde_saphyr::from_str(&format!(
            "template: {{agave: {{image: a}}}}\nsweep: {{memory: [{}]}}\nstrategy: {{bisection: {{}}}}\ntrial: {{warmup: {{timeout: 4h}}, measurement: {{duration: 12h}}}}\nparallelism: 3\n",
            values.join(", ")
        ))
        .unwrap();
        let c = crate::cost::plan_cost(&s, None).unwrap();
        let grid = c.grid.clone().unwrap();
        assert_eq!(grid.trials, 23);
        assert_eq!((c.trials.expected, c.trials.worst), (9, 11));
        // Every trial here runs its whole window (an estimate before anything ran): the
        // search costs 9/23 of the grid's node-hours and half its wall-clock.
        assert!(c.node_hours.expected * 2.5 <= grid.node_hours, "{c:?}");
        assert!(c.wall_clock.expected * 2 <= grid.wall_clock, "{c:?}");
        assert!(
            c.summary().contains(
                "; a grid of the same points: 23 trials, about 322 node-hours, 112h wall-clock"
            ),
            "{}",
            c.summary()
        );
    }
}
