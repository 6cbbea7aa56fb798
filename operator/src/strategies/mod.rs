//! Search strategies: what an experiment runs next, and what its trials answer. A
//! strategy is one module behind [`Strategy`], shaped like Katib's suggester
//! (kubeflow/katib pkg/apis/manager/v1beta1/api.proto, `GetSuggestions`): the
//! experiment's spec and all its trials, running and finished, in; the trials to start,
//! the running trials to stop and whether it is done, out. It keeps no state of its own,
//! so an operator restarted at any moment resumes exactly. It also owns its answer (the
//! recommendation).
//!
//! The grid runs every point; the bisection searches one ordered parameter for its
//! boundary value; successive halving finds the best point in rungs of growing windows; a
//! paired comparison runs each point beside the baseline. [`STRATEGIES`] is the one list
//! of them, and [`strategy_for`] the one place an experiment's is chosen: the reconciler,
//! the status and `valtune plan` ask it and name no strategy.

pub mod admission;
pub mod bisection;
pub mod build;
pub mod grid;
pub mod paired;
pub mod plan;
pub mod schedule;
pub mod successive_halving;
#[cfg(test)]
pub mod toy;

use std::time::Duration;

use kube::core::Rule;

use crate::api::experiment::{Recommendation, ValidatorExperimentSpec};
use crate::api::settings::TrialSettings;
use crate::results::dataset::{Dataset, Tally};
use plan::PlannedTrial;
use schedule::Schedule;

/// Every strategy, in the order an experiment is matched against them ([`Strategy::runs`]):
/// those `spec.strategy` names first, then a paired comparison, the grid last (it runs any
/// experiment).
pub static STRATEGIES: &[&dyn Strategy] = &[
    &bisection::Bisection,
    &successive_halving::SuccessiveHalving,
    #[cfg(test)]
    &toy::Toy,
    &paired::Paired,
    &grid::Grid,
];

pub trait Strategy: Sync {
    /// How messages name it ("grid").
    fn name(&self) -> &'static str;

    /// Whether an experiment runs it. [`strategy_for`] asks each of [`STRATEGIES`] in turn.
    fn runs(&self, spec: &ValidatorExperimentSpec) -> bool;

    /// Its field under `spec.strategy`, if it is chosen there (the grid and a paired
    /// comparison are not).
    fn setting(&self) -> Option<Setting> {
        None
    }

    /// Its own admission rules, on the experiment spec ([`admission`] adds those that
    /// depend on every strategy). Each names the field to fix and how.
    fn rules(&self) -> Vec<Rule> {
        Vec::new()
    }

    /// Whether maxTrials bounds it rather than the sweep's size: it runs a part of the
    /// sweep and stops at maxTrials, so a sweep larger than maxTrials is admitted.
    fn bounded_by_max_trials(&self) -> bool {
        false
    }

    /// The next step of experiment `experiment` given every trial it has. Pure.
    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision;

    /// How one of its trials runs: the experiment's `trial` settings, unless the strategy
    /// gives the trial a window of its own. Pure.
    fn trial_settings(
        &self,
        spec: &ValidatorExperimentSpec,
        _trial: &PlannedTrial,
    ) -> TrialSettings {
        spec.trial.clone()
    }

    /// What it will run, before anything runs, at `parallelism` trials (or pairs) at a
    /// time, `window` being the experiment's measurement window: `valtune plan` and the
    /// examples' headers price it (cost.rs). Pure.
    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        parallelism: u32,
        window: Duration,
    ) -> Schedule;

    /// What `valtune plan` says it runs, after "experiment NAME (CLIENT): ": its trials
    /// and the points they run, one line each after the first. Every trial of the plan,
    /// unless the strategy says otherwise.
    fn describe(
        &self,
        spec: &ValidatorExperimentSpec,
        schedule: &Schedule,
        parallelism: u32,
    ) -> String {
        let n = schedule.trials().expected;
        let mut out = format!(
            "{n} {}, {parallelism} at a time\n",
            if n == 1 { "trial" } else { "trials" }
        );
        for t in plan::plan(&spec.sweep, spec.trial.repetitions) {
            out.push_str(&format!(
                "  {:<48} repetition {}\n",
                t.point.describe(),
                t.repetition
            ));
        }
        out
    }

    /// Its answer from its trials (the strategy's trials only). `provisional` ends a
    /// reason while trials are still to come. Pure.
    fn answer(
        &self,
        _spec: &ValidatorExperimentSpec,
        _trials: &Dataset,
        _provisional: &str,
    ) -> Answer {
        Answer::BestMeasured
    }
}

/// A strategy's field under `spec.strategy`, and what it does (for messages).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Setting {
    /// "bisection".
    pub field: &'static str,
    /// "searches one ordered parameter".
    pub does: &'static str,
}

/// What a strategy answers with.
// Returned once per status computation and never stored: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// An answer of its own (None: none yet, or none to give).
    Own(Option<Recommendation>),
    /// The best point measured, as the experiment's status reads it from any set of
    /// points (the smallest memory that kept up, or the best objective among points that
    /// kept up): the grid's and a paired comparison's.
    BestMeasured,
}

/// What a strategy wants now.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The names of every trial it stands by, started or not, in its order (the grid: its
    /// whole plan). Status counts these; a trial of the experiment outside them that has
    /// not started is deleted (its point left the sweep), a started one runs to its end.
    pub trials: Vec<String>,
    /// Trials to create now, each group whole or not at all, within `parallelism`.
    pub start: Vec<TrialGroup>,
    /// Running trials to end early. No strategy proposes one, and the reconciler does not
    /// act on them: a trial that cannot keep up is ended by its own early abort
    /// (trial.earlyAbort, results/early_abort.rs), from its lag, not by a strategy.
    pub stop: Vec<Stop>,
    /// How many trials it expects in all (`status.trials.expected`): the grid's plan; a
    /// search's estimate.
    pub expected: usize,
    /// Set once it will propose nothing more: the experiment ends when no trial runs.
    pub done: Option<Done>,
}

/// Trials that start together: one for the grid; a pair for paired comparisons.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialGroup(pub Vec<PlannedTrial>);

/// A running trial to end early, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Stop {
    pub trial: String,
    pub reason: String,
}

/// Why a strategy is done: the experiment's condition reason and message.
#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    pub reason: &'static str,
    pub message: String,
}

/// The strategy an experiment runs: the first of [`STRATEGIES`] that runs it
/// (`strategy.bisection`, `strategy.successiveHalving`, a paired comparison, or the grid:
/// an unpaired comparison runs the grid).
pub fn strategy_for(spec: &ValidatorExperimentSpec) -> &'static dyn Strategy {
    STRATEGIES
        .iter()
        .copied()
        .find(|s| s.runs(spec))
        .unwrap_or(&grid::Grid)
}

/// Whether `failed` failed trials reach `maxFailedTrials`.
pub fn failed_limit_reached(spec: &ValidatorExperimentSpec, failed: usize) -> bool {
    spec.max_failed_trials
        .is_some_and(|m| i64::from(m) <= failed as i64)
}

/// How many trials may start now: none while suspended or once `maxFailedTrials` of the
/// strategy's trials failed; otherwise `parallelism` less the trials holding a node
/// (started trials of points that left the sweep included).
pub fn room(spec: &ValidatorExperimentSpec, tally: &Tally) -> usize {
    if spec.suspend || failed_limit_reached(spec, tally.failed.len()) {
        return 0;
    }
    (spec.parallelism.max(1) as usize).saturating_sub(tally.active)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> ValidatorExperimentSpec {
        serde_saphyr::from_str(&format!(
            "template: {{besu: {{image: b}}}}\nsweep: {{allocator: [jemalloc, glibc]}}\n{extra}"
        ))
        .unwrap()
    }

    /// The registry's order decides: a strategy `spec.strategy` names, then a paired
    /// comparison, the grid for the rest (an unpaired comparison included).
    #[test]
    fn each_experiment_runs_the_first_strategy_that_takes_it() {
        let cases = [
            ("", "grid"),
            ("strategy: {successiveHalving: {}}", "successiveHalving"),
            ("strategy: {bisection: {}}", "bisection"),
            (
                "strategy: {bisection: {}, successiveHalving: {}}",
                "bisection",
            ),
            ("comparison: {baseline: {allocator: glibc}}", "paired"),
            (
                "comparison: {baseline: {allocator: glibc}, mode: unpaired}",
                "grid",
            ),
        ];
        for (extra, name) in cases {
            assert_eq!(strategy_for(&spec(extra)).name(), name, "{extra}");
        }
        let names: Vec<&str> = STRATEGIES.iter().map(|s| s.name()).collect();
        assert_eq!(
            names.last(),
            Some(&"grid"),
            "the grid runs any experiment: last"
        );
    }
}
