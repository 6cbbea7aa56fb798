//! The experiment's status, pure: trial counts by the strategy's trial names, the phase
//! and its conditions, the per-point summary (capped), and the recommendation, all read
//! from the [`Dataset`].

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::experiment::{
    ExperimentPhase, MAX_SUMMARY_ROWS, Recommendation, SummaryRow, TrialCounts,
    ValidatorExperiment, ValidatorExperimentStatus,
};
use crate::api::quantity::{Bytes, parse_quantity};
use crate::api::trial::TrialResults;
use crate::controller::status::condition;
use crate::results::analysis::round2;
use crate::results::dataset::{Dataset, Point};
use crate::results::stats;
use crate::strategies::{Answer, Decision, failed_limit_reached, strategy_for};

/// The experiment's status from its strategy's decision and its trials. Pure.
pub fn compute_status(
    vx: &ValidatorExperiment,
    decision: &Decision,
    data: &Dataset,
    blocked: Option<String>,
    old: &ValidatorExperimentStatus,
    now: Timestamp,
) -> ValidatorExperimentStatus {
    let g = vx.metadata.generation;
    // Counted by the strategy's trial names; started trials of points that left the sweep
    // run to the end: they hold nodes, and the experiment is not finished while they run.
    let tally = data.tally(&decision.trials);
    let counts = TrialCounts {
        expected: decision.expected as i32,
        pending: decision.expected.saturating_sub(tally.created) as i32,
        active: tally.active as i32,
        finished: tally.finished as i32,
        succeeded: tally.succeeded as i32,
        failed: tally.failed.len() as i32,
    };
    let failed_names = tally.failed;
    let limit_hit = failed_limit_reached(&vx.spec, failed_names.len());
    let created = counts.expected - counts.pending;
    let (phase, reason, message) = if let Some(why) = &blocked {
        (ExperimentPhase::Failed, "Unsupported", why.clone())
    } else if limit_hit && counts.active == 0 {
        (
            ExperimentPhase::Failed,
            "MaxFailedTrialsReached",
            format!(
                "{} trials failed, reaching maxFailedTrials={}; no further trials were started",
                counts.failed,
                vx.spec.max_failed_trials.unwrap_or_default()
            ),
        )
    } else if limit_hit {
        (
            ExperimentPhase::Running,
            "MaxFailedTrialsReached",
            format!(
                "{} trials failed (maxFailedTrials={}): starting no more, waiting for {} running",
                counts.failed,
                vx.spec.max_failed_trials.unwrap_or_default(),
                counts.active
            ),
        )
    } else if let Some(done) = decision.done.as_ref().filter(|_| counts.active == 0) {
        (
            ExperimentPhase::Succeeded,
            done.reason,
            done.message.clone(),
        )
    } else if vx.spec.suspend && counts.active == 0 {
        (
            ExperimentPhase::Suspended,
            "Suspended",
            format!(
                "suspended with {} of {} trials finished",
                counts.finished, counts.expected
            ),
        )
    } else if vx.spec.suspend {
        (
            ExperimentPhase::Running,
            "Suspending",
            format!(
                "suspended: starting no more trials, waiting for {} running",
                counts.active
            ),
        )
    } else if created == 0 {
        (
            ExperimentPhase::Pending,
            "Pending",
            "no trial started yet".into(),
        )
    } else {
        (
            ExperimentPhase::Running,
            "TrialsRunning",
            format!(
                "{} running, {} finished, {} to start (of {})",
                counts.active, counts.finished, counts.pending, counts.expected
            ),
        )
    };
    let done = matches!(phase, ExperimentPhase::Succeeded | ExperimentPhase::Failed);
    // The summary and the recommendation read the strategy's trials only.
    let counted: BTreeSet<&str> = decision.trials.iter().map(String::as_str).collect();
    let data = data.only(|t| counted.contains(t.name.as_str()));
    let (summary, truncated) = summarize(&data);
    let recommendation = recommend(vx, &data, counts.expected - counts.finished);
    let prev = &old.conditions;
    let degraded = if counts.failed > 0 {
        let shown: Vec<_> = failed_names.iter().take(3).cloned().collect();
        (
            true,
            "TrialsFailed",
            format!(
                "{} trials failed: {}{}",
                counts.failed,
                shown.join(", "),
                if counts.failed > 3 { ", ..." } else { "" }
            ),
        )
    } else {
        (false, "NoFailures", "no trial failed".to_string())
    };
    let conditions = vec![
        condition(
            prev,
            "Ready",
            phase == ExperimentPhase::Succeeded,
            reason,
            message.clone(),
            g,
            now,
        ),
        condition(
            prev,
            "Progressing",
            matches!(phase, ExperimentPhase::Pending | ExperimentPhase::Running),
            reason,
            message,
            g,
            now,
        ),
        condition(prev, "Degraded", degraded.0, degraded.1, degraded.2, g, now),
    ];
    ValidatorExperimentStatus {
        observed_generation: g,
        phase,
        client: crate::clients::client_for(&vx.spec.template)
            .ok()
            .map(|c| c.name().to_string()),
        trials: counts,
        conditions,
        start_time: old
            .start_time
            .clone()
            .or_else(|| (created > 0).then_some(Time(now))),
        completion_time: if done {
            old.completion_time.clone().or(Some(Time(now)))
        } else {
            None
        },
        recommendation,
        summary,
        summary_truncated: truncated,
        node_hours: None,
        comparison: super::compare::status(vx, &data),
    }
}

/// A figure's mean over a point's finished repetitions, as the status shows it.
fn mean(p: &Point, figure: impl Fn(&TrialResults) -> Option<f64>) -> Option<f64> {
    p.mean(figure).map(round2)
}

/// A figure's 95% interval over a point's repetitions, as the status shows it.
fn interval(p: &Point, figure: impl Fn(&TrialResults) -> Option<f64>) -> Option<[f64; 2]> {
    let i = p.estimate(figure)?.interval?;
    Some([round2(i.lo), round2(i.hi)])
}

/// One row per point with a finished trial, in the dataset's order, at most
/// [`MAX_SUMMARY_ROWS`].
fn summarize(data: &Dataset) -> (Vec<SummaryRow>, bool) {
    let points: Vec<&Point> = data
        .points()
        .iter()
        .filter(|p| p.finished().next().is_some())
        .collect();
    let truncated = points.len() > MAX_SUMMARY_ROWS;
    let rows = points
        .into_iter()
        .take(MAX_SUMMARY_ROWS)
        .map(|p| {
            let figures: BTreeSet<&String> = p
                .finished()
                .filter_map(|t| t.results.as_ref())
                .flat_map(|r| r.figures.keys())
                .collect();
            let mut intervals: BTreeMap<String, [f64; 2]> = figures
                .iter()
                .filter_map(|n| Some((n.to_string(), interval(p, |r| r.figure(n))?)))
                .collect();
            intervals.extend(interval(p, |r| r.avg_tps).map(|i| ("avgTps".to_string(), i)));
            intervals.extend(interval(p, |r| r.max_rss_gib).map(|i| ("maxRssGiB".to_string(), i)));
            let (k, n) = p.kept_up_count();
            SummaryRow {
                point: p.point.describe(),
                repetitions: p.finished().count() as i32,
                outcomes: p
                    .outcomes()
                    .map(|o| o.map_or("Failed", |o| o.as_str()))
                    .collect::<Vec<_>>()
                    .join(","),
                avg_tps: mean(p, |r| r.avg_tps),
                max_tps: mean(p, |r| r.max_tps),
                zero_tps_seconds: mean(p, |r| r.zero_tps_seconds),
                max_rss_gib: mean(p, |r| r.max_rss_gib),
                figures: figures
                    .into_iter()
                    .filter_map(|n| Some((n.clone(), mean(p, |r| r.figure(n))?)))
                    .collect(),
                kept_up: (n > 0).then(|| format!("{k}/{n}")),
                intervals,
            }
        })
        .collect();
    (rows, truncated)
}

/// The strategy's own answer, if it has one; else the smallest memory whose every measured
/// repetition kept up (memory sweeps), or the best mean of the client's objective among
/// points that kept up (other sweeps). Pure.
pub fn recommend(
    vx: &ValidatorExperiment,
    data: &Dataset,
    unfinished: i32,
) -> Option<Recommendation> {
    let kept_up: Vec<&Point> = data.points().iter().filter(|p| p.kept_up()).collect();
    let provisional = if unfinished > 0 {
        format!(" (provisional: {unfinished} trials to go)")
    } else {
        String::new()
    };
    let memory_of = |p: &Point| {
        p.point
            .memory
            .as_deref()
            .and_then(|m| parse_quantity(m).ok())
    };
    // The trial a recommendation names: its point's first finished repetition.
    let first_trial = |p: &Point| p.finished().next().map(|t| t.name.clone());
    if let Answer::Own(answer) = strategy_for(&vx.spec).answer(&vx.spec, data, &provisional) {
        return answer;
    }
    if vx.spec.sweep.resolved().memory.is_some() {
        let best = kept_up.iter().min_by_key(|p| memory_of(p))?;
        let below: Vec<String> = data
            .points()
            .iter()
            .filter(|p| p.finished().next().is_some() && memory_of(p) < memory_of(best))
            .map(|p| {
                format!(
                    "{}: {}",
                    memory_of(p)
                        .map(|b| Bytes(b).to_string())
                        .unwrap_or_default(),
                    p.outcomes()
                        .flatten()
                        .map(|o| o.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                )
            })
            .collect();
        // Measured repetitions: one that crashed measured nothing (dataset.rs, kept_up).
        let mut reason = match best.kept_up_count().1 {
            1 => "the smallest memory that kept up with the chain".to_string(),
            n => format!("the smallest memory that kept up with the chain in all {n} repetitions"),
        };
        if !below.is_empty() {
            reason.push_str(&format!("; below it {}", below.join(", ")));
        }
        reason.push_str(&provisional);
        let lower: Vec<String> = data
            .points()
            .iter()
            .filter(|p| memory_of(p) < memory_of(best))
            .filter_map(|p| {
                let size = Bytes(memory_of(p)?).to_string();
                Some(format!("{size}: {}", p.kept_up_support()?))
            })
            .collect();
        let support = best
            .kept_up_support()
            .map(|s| [s].into_iter().chain(lower).collect::<Vec<_>>().join("; "));
        return Some(Recommendation {
            summary: best.point.describe(),
            reason,
            trial: first_trial(best)?,
            support,
            point: Some(best.point.clone()),
        });
    }
    // Otherwise the client's objective: e.g. the highest TPS, or the lowest block time.
    let objective = crate::clients::client_for(&vx.spec.template)
        .map(|c| c.objective(&vx.spec.sweep))
        .unwrap_or_default();
    let scored: Vec<_> = kept_up
        .iter()
        .filter_map(|p| Some((p, mean(p, objective.value)?)))
        .collect();
    let mut ranked = scored;
    ranked.sort_by(|a, b| {
        let order = a.1.total_cmp(&b.1);
        if objective.higher_is_better {
            order.reverse()
        } else {
            order
        }
    });
    let (best, value) = *ranked.first()?;
    let runner_up = ranked.get(1).map(|(p, _)| **p);
    let support = [
        best.kept_up_support(),
        objective_support(
            vx.spec
                .comparison
                .as_ref()
                .map_or(PRACTICAL_DIFFERENCE, |c| c.practical()),
            best,
            runner_up,
            &objective,
        ),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("; ");
    Some(Recommendation {
        summary: best.point.describe(),
        reason: format!(
            "the {} {} ({value}) among points that kept up{provisional}",
            if objective.higher_is_better {
                "highest"
            } else {
                "lowest"
            },
            objective.name
        ),
        trial: first_trial(best)?,
        support: (!support.is_empty()).then_some(support),
        point: Some(best.point.clone()),
    })
}

/// The smallest relative difference of the objective worth acting on, without a
/// `comparison.practicalDifference`: 5%, the order of run-to-run noise on a shared chain
/// (docs/concepts.md, "Numbers you can trust").
pub const PRACTICAL_DIFFERENCE: f64 = crate::api::comparison::DEFAULT_PRACTICAL_DIFFERENCE / 100.0;

/// What the numbers say of the best point's objective, and whether it beats the runner-up
/// by more than noise: "average TPS 4600 [4510, 4690], 3 repetitions; against
/// bankingThreads=8: +12% [+6%, +17%]" or "...: no difference larger than 9%".
fn objective_support(
    practical: f64,
    best: &Point,
    runner_up: Option<&Point>,
    objective: &crate::clients::profile::Objective,
) -> Option<String> {
    let e = best.estimate(objective.value)?;
    let mut text = match e.interval {
        Some(i) => format!(
            "{} {} [{}, {}], {} repetitions",
            objective.name,
            round2(e.mean),
            round2(i.lo),
            round2(i.hi),
            e.n
        ),
        None => format!(
            "{} {} from one repetition (no interval: repeat to know its spread)",
            objective.name,
            round2(e.mean)
        ),
    };
    let Some(other) = runner_up else {
        return Some(text);
    };
    // Welch's t on the two points' repetitions (results/stats/compare.rs), as
    // `comparison.mode: unpaired` judges them.
    let judged = stats::compare::unpaired(
        &other.figure_values(objective.value),
        &[best.figure_values(objective.value)],
        practical,
    );
    let against = other.point.describe();
    text.push_str(&match judged.effects.into_iter().next().flatten() {
        None => format!("; against {against}: too few repetitions to call a difference"),
        Some(e) => format!(
            "; against {against}: {}: {}",
            e.describe(),
            e.verdict(practical)
        ),
    });
    Some(text)
}
