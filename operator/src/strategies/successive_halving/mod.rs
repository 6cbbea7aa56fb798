//! Successive halving (Jamieson and Talwalkar, "Non-stochastic Best Arm Identification
//! and Hyperparameter Optimization", AISTATS 2016; one bracket of Li et al.'s Hyperband,
//! JMLR 2018): every point runs a short window; the best 1/eta of them, by the client's
//! objective among those that kept up, run again with a window eta times longer; and so
//! on until one is left, which runs the experiment's full window: promotion is not
//! acceptance, the answer is measured as a grid would measure it.
//!
//! Rung `r` is repetition `r + 1` of a point (so trial names stay those of the plan), and
//! its window is `trial.measurement.duration / eta^(last - r)`. A rung starts when the one
//! before it has finished, its trials side by side up to `parallelism` (they see one chain
//! and its load), the rest as nodes free up: never more at once than the user gave.
//! Stateless: the rungs, their survivors and the winner are read from the trials.

use std::time::Duration;

use kube::core::Rule;

use super::plan::PlannedTrial;
use super::schedule::{Bounds, Schedule, Stage};
use super::{Answer, Decision, Done, Setting, Strategy, TrialGroup, room};
use crate::api::experiment::{Recommendation, ValidatorExperimentSpec};
use crate::api::settings::{TrialSettings, human, parse_duration};
use crate::api::trial::{TrialOutcome, TrialPhase, TrialResults};
use crate::clients::profile::Objective;
use crate::results::dataset::{Dataset, Point, TrialRecord};

pub struct SuccessiveHalving;

/// How many points each rung runs: all of them, then the best 1/eta of the rung before
/// (at least one), down to one. One point is one rung.
pub fn rungs(points: usize, eta: usize) -> Vec<usize> {
    let eta = eta.max(2);
    let mut sizes = vec![points.max(1)];
    while let Some(&last) = sizes.last().filter(|n| **n > 1) {
        sizes.push((last / eta).max(1));
    }
    sizes
}

/// Rung `rung`'s window of `count` rungs: the full window over eta per rung after it.
pub fn rung_window(full: Duration, eta: usize, rung: usize, count: usize) -> Duration {
    let divisor = (eta.max(2) as u32).saturating_pow(count.saturating_sub(rung + 1) as u32);
    full / divisor.max(1)
}

/// A duration as `trial.measurement.duration` writes it, to the millisecond.
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(60_000) => format!("{}m", ms / 60_000),
        _ if ms.is_multiple_of(1_000) => format!("{}s", ms / 1_000),
        _ => format!("{ms}ms"),
    }
}

/// The measurement window of a trial at `repetition` when the experiment halves: its
/// rung's. None for other strategies (the trial takes `trial.measurement.duration`).
pub fn window(spec: &ValidatorExperimentSpec, repetition: i32) -> Option<String> {
    let settings = spec.strategy.successive_halving.as_ref()?;
    let full = parse_duration(&spec.trial.measurement.duration).ok()?;
    let count = rungs(spec.sweep.points(), settings.eta()).len();
    let rung = (repetition.max(1) - 1) as usize;
    Some(duration_text(rung_window(
        full,
        settings.eta(),
        rung,
        count,
    )))
}

/// Where the halving stands: each rung's points (indices into the in-sweep points) and,
/// for a finished rung, its ranking.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    /// The rungs reached, each with the points it runs.
    pub rungs: Vec<Vec<usize>>,
    /// For each finished rung, its points that kept up with their objective, best first.
    pub ranked: Vec<Vec<(usize, f64)>>,
}

/// The trial of point `i` at rung `r`.
fn at<'a>(points: &[&'a Point], i: usize, r: usize) -> Option<&'a TrialRecord> {
    points[i]
        .trials
        .iter()
        .find(|t| t.repetition == r as i32 + 1 && !t.deleting)
}

/// A finished trial's objective, when it kept up and measured it.
fn score(t: &TrialRecord, objective: &Objective) -> Option<f64> {
    if t.phase != TrialPhase::Succeeded || t.outcome != Some(TrialOutcome::KeptUp) {
        return None;
    }
    t.results
        .as_ref()
        .and_then(|r: &TrialResults| (objective.value)(r))
}

/// The rungs `points`' trials have reached and how the finished ones rank. Ties keep the
/// sweep's order, so the ranking is deterministic.
pub fn standing(points: &[&Point], sizes: &[usize], objective: &Objective) -> Standing {
    let mut s = Standing {
        rungs: vec![(0..points.len()).collect()],
        ranked: Vec::new(),
    };
    for r in 0..sizes.len() {
        let here = s.rungs[r].clone();
        let finished = here
            .iter()
            .all(|i| at(points, *i, r).is_some_and(|t| t.phase.is_finished()));
        if !finished {
            break;
        }
        let mut ranked: Vec<(usize, f64)> = here
            .iter()
            .filter_map(|i| Some((*i, score(at(points, *i, r)?, objective)?)))
            .collect();
        ranked.sort_by(|a, b| {
            let order = a.1.total_cmp(&b.1);
            let order = if objective.higher_is_better {
                order.reverse()
            } else {
                order
            };
            order.then(a.0.cmp(&b.0))
        });
        s.ranked.push(ranked.clone());
        match sizes.get(r + 1) {
            Some(next) if !ranked.is_empty() => {
                let mut survivors: Vec<usize> =
                    ranked.iter().take(*next).map(|(i, _)| *i).collect();
                survivors.sort_unstable();
                s.rungs.push(survivors);
            }
            _ => break,
        }
    }
    s
}

/// The objective of the experiment's client.
pub fn objective(spec: &ValidatorExperimentSpec) -> Objective {
    crate::clients::client_for(&spec.template)
        .map(|c| c.objective(&spec.sweep))
        .unwrap_or_default()
}

/// The in-sweep points, in the sweep's order.
fn in_sweep(data: &Dataset) -> Vec<&Point> {
    data.points().iter().filter(|p| p.in_sweep).collect()
}

/// The winner once the last rung has measured it: its point, its objective over the full
/// window, and its trial there.
pub fn winner<'a>(
    spec: &ValidatorExperimentSpec,
    data: &'a Dataset,
) -> Option<(&'a Point, f64, String)> {
    let settings = spec.strategy.successive_halving.as_ref()?;
    let points = in_sweep(data);
    let sizes = rungs(points.len(), settings.eta());
    let s = standing(&points, &sizes, &objective(spec));
    if s.ranked.len() < sizes.len() {
        return None;
    }
    let (i, value) = *s.ranked.last()?.first()?;
    let trial = at(&points, i, sizes.len() - 1)?.name.clone();
    Some((points[i], value, trial))
}

impl Strategy for SuccessiveHalving {
    fn name(&self) -> &'static str {
        "successiveHalving"
    }

    fn runs(&self, spec: &ValidatorExperimentSpec) -> bool {
        spec.strategy.successive_halving.is_some()
    }

    fn setting(&self) -> Option<Setting> {
        Some(Setting {
            field: "successiveHalving",
            does: "finds the best point of any sweep",
        })
    }

    /// Its rungs are its repetitions; it ranks points by the objective, not against a
    /// baseline.
    fn rules(&self) -> Vec<Rule> {
        let halving = "has(self.strategy) && has(self.strategy.successiveHalving)";
        vec![
            Rule::new(format!("!({halving}) || self.trial.repetitions == 1"))
                .message("strategy.successiveHalving runs each surviving point again with a longer window (its repetitions are its rungs): set trial.repetitions to 1")
                .field_path(".trial.repetitions"),
            Rule::new(format!("!({halving}) || !has(self.comparison)"))
                .message("strategy.successiveHalving ranks points by the client's objective, not against a baseline: remove comparison (or the strategy, for a paired comparison)")
                .field_path(".comparison"),
        ]
    }

    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision {
        let settings = spec.strategy.successive_halving.clone().unwrap_or_default();
        let points = in_sweep(trials);
        let sizes = rungs(points.len(), settings.eta());
        let objective = objective(spec);
        let s = standing(&points, &sizes, &objective);
        let planned = |i: usize, r: usize| PlannedTrial {
            point: points[i].point.clone(),
            repetition: r as i32 + 1,
            pair: None,
        };
        let names: Vec<String> = s
            .rungs
            .iter()
            .enumerate()
            .flat_map(|(r, rung)| rung.iter().map(move |i| (*i, r)))
            .map(|(i, r)| planned(i, r).name(experiment))
            .collect();
        let tally = trials.tally(&names);
        let cap = (spec.max_trials.max(0) as usize).saturating_sub(tally.created);
        let current = s.rungs.len() - 1;
        let mut start = Vec::new();
        let mut done = None;
        if s.ranked.len() == s.rungs.len() {
            // The last rung reached has finished: nothing kept up there, or it was the
            // last rung.
            done = Some(finished(&points, &s, &sizes, &objective));
        } else {
            let missing: Vec<usize> = s.rungs[current]
                .iter()
                .copied()
                .filter(|i| at(&points, *i, current).is_none())
                .collect();
            start = missing
                .into_iter()
                .take(room(spec, &tally).min(cap))
                .map(|i| TrialGroup(vec![planned(i, current)]))
                .collect();
            let unstarted = s.rungs[current]
                .iter()
                .filter(|i| at(&points, **i, current).is_none())
                .count();
            if start.is_empty() && unstarted > 0 && cap == 0 && tally.active == 0 {
                done = Some(Done {
                    reason: "MaxTrialsReached",
                    message: format!(
                        "successive halving reached maxTrials={} before its last rung: raise maxTrials to go on",
                        spec.max_trials
                    ),
                });
            }
        }
        // The rungs not reached yet run their planned sizes.
        let expected = names.len() + sizes.iter().skip(s.rungs.len()).sum::<usize>();
        Decision {
            trials: names,
            start,
            stop: Vec::new(),
            expected,
            done,
        }
    }

    /// Each rung's trials at its own window, the rung's waves of `parallelism` one after
    /// the other.
    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        parallelism: u32,
        window: Duration,
    ) -> Schedule {
        let eta = spec
            .strategy
            .successive_halving
            .clone()
            .unwrap_or_default()
            .eta();
        let sizes = rungs(spec.sweep.points(), eta);
        let stages = sizes
            .iter()
            .enumerate()
            .map(|(r, size)| Stage {
                trials: Bounds::exactly(*size as u32),
                waves: Bounds::exactly(size.div_ceil(parallelism.max(1) as usize) as u32),
                window: rung_window(window, eta, r, sizes.len()),
            })
            .collect();
        Schedule {
            stages,
            stage: Some("rung"),
            searches: true,
        }
    }

    fn describe(
        &self,
        spec: &ValidatorExperimentSpec,
        schedule: &Schedule,
        parallelism: u32,
    ) -> String {
        let points: Vec<String> = super::plan::plan(&spec.sweep, spec.trial.repetitions)
            .iter()
            .map(|t| t.point.describe())
            .collect();
        let rungs: Vec<String> = schedule
            .stages
            .iter()
            .map(|s| format!("{} x {}", s.trials.expected, human(s.window)))
            .collect();
        format!(
            "successive halving over {} points, {} trials in rungs of {}, each up to {parallelism} at a time (a grid: {} trials)\n  points: {}\n",
            points.len(),
            schedule.trials().expected,
            rungs.join(", then "),
            points.len(),
            points.join(", ")
        )
    }

    /// A rung's trials measure over its window.
    fn trial_settings(
        &self,
        spec: &ValidatorExperimentSpec,
        trial: &PlannedTrial,
    ) -> TrialSettings {
        let mut settings = spec.trial.clone();
        if let Some(window) = window(spec, trial.repetition) {
            settings.measurement.duration = window;
        }
        settings
    }

    /// The point that survived every rung, measured over the full window; until then
    /// none (a short window's leader is not an answer).
    fn answer(
        &self,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
        provisional: &str,
    ) -> Answer {
        Answer::Own(answer(spec, trials, provisional))
    }
}

/// The winner as the recommendation, once the last rung has measured it.
fn answer(
    spec: &ValidatorExperimentSpec,
    data: &Dataset,
    provisional: &str,
) -> Option<Recommendation> {
    let (best, value, trial) = winner(spec, data)?;
    Some(Recommendation {
        summary: best.point.describe(),
        reason: format!(
            "the best {} ({value} over the full window) after every rung of successive halving{provisional}",
            objective(spec).name
        ),
        trial,
        support: best.kept_up_support(),
        point: Some(best.point.clone()),
    })
}

/// The halving's conclusion once its last reached rung has finished.
fn finished(points: &[&Point], s: &Standing, sizes: &[usize], objective: &Objective) -> Done {
    let first = s
        .ranked
        .first()
        .map(|ranked| {
            ranked
                .iter()
                .map(|(i, v)| format!("{} {v}", points[*i].point.describe()))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let trials: usize = s.rungs.iter().map(Vec::len).sum();
    match s.ranked.last().and_then(|r| r.first()) {
        Some((i, value)) if s.ranked.len() == sizes.len() => Done {
            reason: "BestFound",
            message: format!(
                "{} is the best by {} ({value} over the full window) after {} rungs ({trials} trials for {} points; the first rung: {first})",
                points[*i].point.describe(),
                objective.name,
                sizes.len(),
                points.len()
            ),
        },
        _ => Done {
            reason: "NoValuePasses",
            message: format!(
                "no point kept up at rung {} of {} ({trials} trials for {} points)",
                s.ranked.len(),
                sizes.len(),
                points.len()
            ),
        },
    }
}

#[cfg(test)]
mod tests;
