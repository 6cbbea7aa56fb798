//! The grid: every point of the sweep, `repetitions` times, in plan order (every point
//! once before any repeats), up to `parallelism` at a time.

use std::time::Duration;

use super::plan::plan;
use super::schedule::Schedule;
use super::{Decision, Done, Strategy, TrialGroup, room};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::results::dataset::Dataset;

pub struct Grid;

impl Strategy for Grid {
    fn name(&self) -> &'static str {
        "grid"
    }

    fn runs(&self, _spec: &ValidatorExperimentSpec) -> bool {
        true
    }

    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision {
        let planned = plan(&spec.sweep, spec.trial.repetitions);
        let names: Vec<String> = planned.iter().map(|p| p.name(experiment)).collect();
        let tally = trials.tally(&names);
        // Trials are compared by name: one deleted by hand is proposed again.
        let start = planned
            .into_iter()
            .zip(&names)
            .filter(|(_, name)| trials.trial(name).is_none())
            .take(room(spec, &tally))
            .map(|(p, _)| TrialGroup(vec![p]))
            .collect();
        let done = (tally.finished == names.len()).then(|| Done {
            reason: "AllTrialsFinished",
            message: format!(
                "all {} trials finished ({} failed)",
                names.len(),
                tally.failed.len()
            ),
        });
        Decision {
            expected: names.len(),
            trials: names,
            start,
            stop: Vec::new(),
            done,
        }
    }

    /// Every trial of the plan, in waves of `parallelism`.
    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        parallelism: u32,
        window: Duration,
    ) -> Schedule {
        let n = plan(&spec.sweep, spec.trial.repetitions).len() as u32;
        Schedule::all(n, parallelism, window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::TrialPhase;
    use crate::results::dataset::TrialRecord;
    use crate::strategies::plan::PlannedTrial;

    const EXPERIMENT: &str = "ram";

    fn spec(extra: &str) -> ValidatorExperimentSpec {
        serde_saphyr::from_str(&format!(
            "template: {{agave: {{image: agave}}}}\nsweep: {{memory: [128Gi, 256Gi, 512Gi]}}\n{extra}"
        ))
        .unwrap()
    }

    /// A trial of the plan's `index`-th entry (for `spec`'s sweep, 2 repetitions) in `phase`.
    fn trial(spec: &ValidatorExperimentSpec, index: usize, phase: TrialPhase) -> TrialRecord {
        let p = &plan(&spec.sweep, 2)[index];
        TrialRecord {
            name: p.name(EXPERIMENT),
            point: p.point.clone(),
            repetition: p.repetition,
            phase,
            ..Default::default()
        }
    }

    /// Trials of the plan's first entries, in these phases.
    fn first(spec: &ValidatorExperimentSpec, phases: &[TrialPhase]) -> Vec<TrialRecord> {
        phases
            .iter()
            .enumerate()
            .map(|(i, phase)| trial(spec, i, *phase))
            .collect()
    }

    /// A trial of a point no longer in the sweep.
    fn leftover(repetition: i32, phase: TrialPhase, deleting: bool) -> TrialRecord {
        let p = PlannedTrial {
            point: serde_saphyr::from_str("memory: 64Gi").unwrap(),
            repetition,
            pair: None,
        };
        TrialRecord {
            name: p.name(EXPERIMENT),
            point: p.point,
            repetition,
            phase,
            deleting,
            ..Default::default()
        }
    }

    /// The table: spec additions, the trials there are (plan index or leftover), and the
    /// plan indices the grid starts and whether it is done.
    #[test]
    fn the_grid_decides() {
        use TrialPhase::*;
        type Trials = fn(&ValidatorExperimentSpec) -> Vec<TrialRecord>;
        let cases: [(&str, &str, Trials, &[usize], bool); 10] = [
            (
                "nothing yet: up to parallelism, in plan order",
                "parallelism: 2",
                |_| vec![],
                &[0, 1],
                false,
            ),
            ("parallelism 1 by default", "", |_| vec![], &[0], false),
            (
                "one of two running: one more",
                "parallelism: 2",
                |s| first(s, &[Measuring]),
                &[1],
                false,
            ),
            (
                "every point before any repeats",
                "parallelism: 2\ntrial: {repetitions: 2}",
                |s| first(s, &[Succeeded, Succeeded, WarmingUp]),
                &[3],
                false,
            ),
            (
                "a started leftover of a removed point holds a node",
                "parallelism: 2",
                |_| vec![leftover(1, Measuring, false)],
                &[0],
                false,
            ),
            (
                "one being deleted does not, nor a finished one",
                "parallelism: 2",
                |_| vec![leftover(1, Pending, true), leftover(2, Succeeded, false)],
                &[0, 1],
                false,
            ),
            (
                "suspended: nothing new",
                "parallelism: 2\nsuspend: true",
                |_| vec![],
                &[],
                false,
            ),
            (
                "maxFailedTrials reached: nothing new",
                "parallelism: 2\nmaxFailedTrials: 1",
                |s| first(s, &[Failed]),
                &[],
                false,
            ),
            (
                "a deleted trial is proposed again: trials are compared by name",
                "parallelism: 3",
                |s| vec![trial(s, 1, Succeeded), trial(s, 2, Succeeded)],
                &[0],
                false,
            ),
            (
                "all finished: done",
                "parallelism: 3",
                |s| first(s, &[Succeeded, Failed, Succeeded]),
                &[],
                true,
            ),
        ];
        for (case, extra, trials, starts, done) in cases {
            let spec = spec(extra);
            let data = Dataset::new(&spec.sweep, trials(&spec));
            let d = Grid.decide(EXPERIMENT, &spec, &data);
            let planned = plan(&spec.sweep, spec.trial.repetitions);
            let want: Vec<TrialGroup> = starts
                .iter()
                .map(|i| TrialGroup(vec![planned[*i].clone()]))
                .collect();
            assert_eq!(d.start, want, "{case}");
            assert_eq!(d.done.is_some(), done, "{case}");
            assert_eq!(d.expected, planned.len(), "{case}");
            assert!(d.stop.is_empty(), "{case}");
        }
    }

    #[test]
    fn done_says_how_many_trials_failed() {
        use TrialPhase::*;
        let spec = spec("");
        let data = Dataset::new(&spec.sweep, first(&spec, &[Succeeded, Failed, Succeeded]));
        let d = Grid.decide(EXPERIMENT, &spec, &data);
        assert_eq!(
            d.done,
            Some(Done {
                reason: "AllTrialsFinished",
                message: "all 3 trials finished (1 failed)".into(),
            })
        );
        assert_eq!(
            d.trials,
            plan(&spec.sweep, 1)
                .iter()
                .map(|p| p.name(EXPERIMENT))
                .collect::<Vec<_>>()
        );
    }
}
