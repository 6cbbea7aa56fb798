//! The experiment's status, pure: trial counts by expected name, the phase and its
//! conditions, the per-point summary (capped), and the recommendation.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::api::experiment::{
    ExperimentPhase, MAX_SUMMARY_ROWS, Recommendation, SummaryRow, TrialCounts,
    ValidatorExperiment, ValidatorExperimentStatus,
};
use crate::api::quantity::{Bytes, parse_quantity};
use crate::api::sweep::PlannedTrial;
use crate::api::trial::{TrialOutcome, TrialPhase, ValidatorTrial};
use crate::controller::status::condition;

/// The experiment's status from its planned and existing trials. Pure.
pub fn compute_status(
    vx: &ValidatorExperiment,
    planned: &[PlannedTrial],
    existing: &BTreeMap<String, ValidatorTrial>,
    blocked: Option<String>,
    old: &ValidatorExperimentStatus,
    now: Timestamp,
) -> ValidatorExperimentStatus {
    let name = vx.name_any();
    let g = vx.metadata.generation;
    let mut counts = TrialCounts {
        expected: planned.len() as i32,
        ..Default::default()
    };
    let mut failed_names = Vec::new();
    for p in planned {
        let tname = p.name(&name);
        match existing
            .get(&tname)
            .map(|t| t.status.clone().unwrap_or_default())
        {
            None => counts.pending += 1,
            Some(s) if !s.phase.is_finished() => counts.active += 1,
            Some(s) => {
                counts.finished += 1;
                if s.phase == TrialPhase::Succeeded {
                    counts.succeeded += 1;
                } else {
                    counts.failed += 1;
                    failed_names.push(tname);
                }
            }
        }
    }
    // Started trials of points that left the sweep run to the end: they hold nodes, and
    // the experiment is not finished while they run.
    let planned_names: std::collections::BTreeSet<String> =
        planned.iter().map(|p| p.name(&name)).collect();
    let leftovers = existing
        .iter()
        .filter(|(n, t)| {
            !planned_names.contains(*n)
                && !t
                    .status
                    .as_ref()
                    .map(|s| s.phase)
                    .unwrap_or_default()
                    .is_finished()
        })
        .count() as i32;
    counts.active += leftovers;
    let limit_hit = super::failed_limit_reached(vx, counts.failed);
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
    } else if counts.finished == counts.expected && counts.expected > 0 && counts.active == 0 {
        (
            ExperimentPhase::Succeeded,
            "AllTrialsFinished",
            format!(
                "all {} trials finished ({} failed)",
                counts.expected, counts.failed
            ),
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
    let (summary, truncated) = summarize(vx, planned, existing);
    let recommendation = recommend(vx, planned, existing, counts.expected - counts.finished);
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
    }
}

/// Finished trials grouped by point, in plan order.
fn by_point<'a>(
    vx: &ValidatorExperiment,
    planned: &'a [PlannedTrial],
    existing: &'a BTreeMap<String, ValidatorTrial>,
) -> Vec<(&'a PlannedTrial, Vec<&'a ValidatorTrial>)> {
    let name = vx.name_any();
    let mut groups: Vec<(&PlannedTrial, Vec<&ValidatorTrial>)> = Vec::new();
    for p in planned {
        let key = p.point.canonical();
        let finished = existing
            .get(&p.name(&name))
            .filter(|t| t.status.as_ref().is_some_and(|s| s.phase.is_finished()));
        match groups.iter_mut().find(|(q, _)| q.point.canonical() == key) {
            Some((_, ts)) => ts.extend(finished),
            None => groups.push((p, finished.into_iter().collect())),
        }
    }
    groups
}

fn mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.flatten().collect();
    (!v.is_empty())
        .then(|| crate::results::analysis::round2(v.iter().sum::<f64>() / v.len() as f64))
}

fn summarize(
    vx: &ValidatorExperiment,
    planned: &[PlannedTrial],
    existing: &BTreeMap<String, ValidatorTrial>,
) -> (Vec<SummaryRow>, bool) {
    let groups: Vec<_> = by_point(vx, planned, existing)
        .into_iter()
        .filter(|(_, ts)| !ts.is_empty())
        .collect();
    let truncated = groups.len() > MAX_SUMMARY_ROWS;
    let rows = groups
        .into_iter()
        .take(MAX_SUMMARY_ROWS)
        .map(|(p, ts)| {
            let results: Vec<_> = ts
                .iter()
                .map(|t| {
                    t.status
                        .as_ref()
                        .and_then(|s| s.results.clone())
                        .unwrap_or_default()
                })
                .collect();
            SummaryRow {
                point: p.point.describe(),
                repetitions: ts.len() as i32,
                outcomes: ts
                    .iter()
                    .map(|t| {
                        t.status
                            .as_ref()
                            .and_then(|s| s.outcome)
                            .map(|o| o.as_str())
                            .unwrap_or("Failed")
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                avg_tps: mean(results.iter().map(|r| r.avg_tps)),
                max_tps: mean(results.iter().map(|r| r.max_tps)),
                zero_tps_seconds: mean(results.iter().map(|r| r.zero_tps_seconds)),
                max_rss_gib: mean(results.iter().map(|r| r.max_rss_gib)),
                figures: {
                    let names: std::collections::BTreeSet<&String> =
                        results.iter().flat_map(|r| r.figures.keys()).collect();
                    names
                        .into_iter()
                        .filter_map(|n| {
                            Some((n.clone(), mean(results.iter().map(|r| r.figure(n)))?))
                        })
                        .collect()
                },
            }
        })
        .collect();
    (rows, truncated)
}

/// The smallest memory whose every finished repetition kept up (memory sweeps), or the
/// highest mean TPS among points that kept up (other sweeps). Pure.
pub fn recommend(
    vx: &ValidatorExperiment,
    planned: &[PlannedTrial],
    existing: &BTreeMap<String, ValidatorTrial>,
    unfinished: i32,
) -> Option<Recommendation> {
    let outcome = |t: &ValidatorTrial| t.status.as_ref().and_then(|s| s.outcome);
    let groups = by_point(vx, planned, existing);
    let kept_up: Vec<_> = groups
        .iter()
        .filter(|(_, ts)| {
            !ts.is_empty() && ts.iter().all(|t| outcome(t) == Some(TrialOutcome::KeptUp))
        })
        .collect();
    let provisional = if unfinished > 0 {
        format!(" (provisional: {unfinished} trials to go)")
    } else {
        String::new()
    };
    let memory_of = |p: &PlannedTrial| {
        p.point
            .memory
            .as_deref()
            .and_then(|m| parse_quantity(m).ok())
    };
    if vx.spec.sweep.memory.is_some() {
        let (best, ts) = kept_up.iter().min_by_key(|(p, _)| memory_of(p))?;
        let below: Vec<String> = groups
            .iter()
            .filter(|(p, ts)| !ts.is_empty() && memory_of(p) < memory_of(best))
            .map(|(p, ts)| {
                format!(
                    "{}: {}",
                    memory_of(p)
                        .map(|b| Bytes(b).to_string())
                        .unwrap_or_default(),
                    ts.iter()
                        .filter_map(|t| outcome(t))
                        .map(|o| o.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                )
            })
            .collect();
        let mut reason = match ts.len() {
            1 => "the smallest memory that kept up with the chain".to_string(),
            n => format!("the smallest memory that kept up with the chain in all {n} repetitions"),
        };
        if !below.is_empty() {
            reason.push_str(&format!("; below it {}", below.join(", ")));
        }
        reason.push_str(&provisional);
        return Some(Recommendation {
            summary: best.point.describe(),
            reason,
            trial: ts[0].name_any(),
        });
    }
    // Otherwise the client's objective: e.g. the highest TPS, or the lowest block time.
    let objective = crate::clients::client_for(&vx.spec.template)
        .map(|c| c.objective(&vx.spec.sweep))
        .unwrap_or_default();
    let score = |ts: &Vec<&ValidatorTrial>| {
        mean(ts.iter().map(|t| {
            t.status
                .as_ref()
                .and_then(|s| s.results.as_ref())
                .and_then(|r| (objective.value)(r))
        }))
    };
    let scored: Vec<_> = kept_up
        .iter()
        .filter_map(|(p, ts)| Some((p, ts, score(ts)?)))
        .collect();
    let (best, ts, value) = if objective.higher_is_better {
        scored.into_iter().max_by(|a, b| a.2.total_cmp(&b.2))?
    } else {
        scored.into_iter().min_by(|a, b| a.2.total_cmp(&b.2))?
    };
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
        trial: ts[0].name_any(),
    })
}
