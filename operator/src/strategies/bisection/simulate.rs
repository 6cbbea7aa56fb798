//! What a bisection costs wherever its boundary lies, simulated before it runs.

use super::Bisection;
use super::boundary::{of, ordered};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::results::dataset::{Dataset, TrialRecord};
use crate::strategies::Strategy;

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
}
