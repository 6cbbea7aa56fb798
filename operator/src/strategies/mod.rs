//! Search strategies: what an experiment runs next. A strategy is one pure call, shaped
//! like Katib's suggester (kubeflow/katib pkg/apis/manager/v1beta1/api.proto,
//! `GetSuggestions`): the experiment's spec and all its trials, running and finished, in;
//! the trials to start, the running trials to stop and whether it is done, out. It keeps
//! no state of its own, so an operator restarted at any moment resumes exactly.
//!
//! The grid runs every point; the bisection searches one ordered parameter for its
//! boundary value; successive halving finds the best point in rungs of growing windows. The experiment reconciler asks [`strategy_for`] and acts on the
//! [`Decision`].

pub mod bisection;
pub mod build;
pub mod grid;
pub mod paired;

pub mod plan;
pub mod successive_halving;

use crate::api::experiment::ValidatorExperimentSpec;
use crate::results::dataset::{Dataset, Tally};
use plan::PlannedTrial;

pub trait Strategy: Sync {
    /// How messages name it ("grid").
    fn name(&self) -> &'static str;

    /// The next step of experiment `experiment` given every trial it has. Pure.
    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision;
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

/// The strategy an experiment runs: `strategy.bisection`, `strategy.successiveHalving`,
/// a paired comparison, or the grid (an unpaired comparison runs the grid).
pub fn strategy_for(spec: &ValidatorExperimentSpec) -> &'static dyn Strategy {
    if spec.strategy.bisection.is_some() {
        &bisection::Bisection
    } else if spec.strategy.successive_halving.is_some() {
        &successive_halving::SuccessiveHalving
    } else if spec.comparison.as_ref().is_some_and(|c| c.paired()) {
        &paired::Paired
    } else {
        &grid::Grid
    }
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
