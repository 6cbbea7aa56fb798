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

mod answer;
mod boundary;
mod cost;
pub mod placement;
mod rules;
#[cfg(test)]
mod tests;

use std::time::Duration;

use kube::core::Rule;

use boundary::{Boundary, Evidence, boundary, of, ordered};
use placement::picks;

use super::plan::PlannedTrial;
use super::schedule::Schedule;
use super::{Answer, Decision, Done, Setting, Strategy, TrialGroup, room};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::strategy::{BisectionSpec, Seek};
use crate::results::dataset::{Dataset, Point};

pub struct Bisection;

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

    fn runs(&self, spec: &ValidatorExperimentSpec) -> bool {
        spec.strategy.bisection.is_some()
    }

    fn setting(&self) -> Option<Setting> {
        Some(Setting {
            field: "bisection",
            does: "searches one ordered parameter",
        })
    }

    fn rules(&self) -> Vec<Rule> {
        rules::rules()
    }

    /// It runs a part of the sweep, and stops at maxTrials.
    fn bounded_by_max_trials(&self) -> bool {
        true
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

    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        parallelism: u32,
        window: Duration,
    ) -> Schedule {
        cost::schedule(spec, parallelism, window)
    }

    fn describe(
        &self,
        spec: &ValidatorExperimentSpec,
        schedule: &Schedule,
        parallelism: u32,
    ) -> String {
        cost::describe(spec, schedule, parallelism)
    }

    /// The boundary its trials show, with the value beyond it.
    fn answer(
        &self,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
        provisional: &str,
    ) -> Answer {
        Answer::Own(answer::answer(spec, trials, provisional))
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
