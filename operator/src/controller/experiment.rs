//! The experiment reconciler: expands the sweep into expected trials (by name), starts
//! them up to `parallelism`, and summarises them in a small, bounded status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::status::{apply_status, condition};
use super::{Context, Error, Result, now};
use crate::api::experiment::{
    ExperimentPhase, MAX_SUMMARY_ROWS, Recommendation, SummaryRow, TrialCounts,
    ValidatorExperiment, ValidatorExperimentStatus,
};
use crate::api::labels;
use crate::api::quantity::{Bytes, parse_quantity};
use crate::api::resolve::resolve_template;
use crate::api::sweep::{PlannedTrial, plan};
use crate::api::template::ClientKind;
use crate::api::trial::{TrialOutcome, TrialPhase, ValidatorTrial, ValidatorTrialSpec};

pub fn error_policy(vx: Arc<ValidatorExperiment>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_error("experiment", err.kind());
    warn!(experiment = %vx.name_any(), error = %err, "experiment reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Why the experiment cannot run at all (checked before anything is created).
fn unsupported(vx: &ValidatorExperiment) -> Option<String> {
    match vx.spec.template.client.kind() {
        Some(ClientKind::Agave) => None,
        Some(other) => Some(format!(
            "valtune cannot run {} trials yet: only Agave pods are rendered in this version (see docs/clients.md)",
            other.as_str()
        )),
        None => Some("the template must set exactly one client".into()),
    }
}

pub async fn reconcile(vx: Arc<ValidatorExperiment>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("experiment");
    if vx.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = vx.namespace().unwrap_or_default();
    let name = vx.name_any();
    let api: Api<ValidatorExperiment> = Api::namespaced(ctx.client.clone(), &ns);
    let trials_api: Api<ValidatorTrial> = Api::namespaced(ctx.client.clone(), &ns);
    let old = vx.status.clone().unwrap_or_default();
    let now = now();

    let planned = plan(&vx.spec.sweep, vx.spec.trial.repetitions);
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let lp = ListParams::default().labels(&format!("{}={name}", labels::EXPERIMENT));
    let mut existing: BTreeMap<String, ValidatorTrial> = trials_api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|t| t.owner_references().iter().any(|o| o.uid == uid))
        .map(|t| (t.name_any(), t))
        .collect();

    let blocked = unsupported(&vx);
    if blocked.is_none() {
        if vx.spec.metrics.pod_monitor && ctx.pod_monitors {
            crate::monitoring::apply_pod_monitor(&ctx.client, &vx).await?;
        }
        // Spec edits: points no longer swept that have not started are removed.
        let expected: std::collections::BTreeSet<String> =
            planned.iter().map(|p| p.name(&name)).collect();
        for (tname, t) in &existing {
            let phase = t.status.as_ref().map(|s| s.phase).unwrap_or_default();
            if !expected.contains(tname)
                && phase == TrialPhase::Pending
                && t.metadata.deletion_timestamp.is_none()
            {
                info!(trial = %tname, "removing a trial whose point left the sweep");
                match trials_api.delete(tname, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        existing.retain(|n, t| expected.contains(n) || t.metadata.deletion_timestamp.is_none());

        for planned_trial in next_to_start(&vx, &planned, &existing) {
            let trial = build_trial(&vx, &planned_trial);
            let tname = trial.name_any();
            match trials_api.create(&PostParams::default(), &trial).await {
                Ok(created) => {
                    publish(
                        &ctx,
                        &vx,
                        EventType::Normal,
                        "TrialCreated",
                        format!(
                            "trial {tname}: {} (repetition {})",
                            planned_trial.point.describe(),
                            planned_trial.repetition
                        ),
                    )
                    .await;
                    existing.insert(tname, created);
                }
                // Created by an earlier pass whose list did not see it yet: fine.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    if let Some(t) = trials_api.get_opt(&tname).await? {
                        existing.insert(tname, t);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    let st = compute_status(&vx, &planned, &existing, blocked, &old, now);
    if st != old {
        apply_status(&api, &vx, &st).await?;
        if st.phase != old.phase {
            let (kind, note) = match st.phase {
                ExperimentPhase::Failed => (EventType::Warning, condition_message(&st, "Ready")),
                _ => (EventType::Normal, condition_message(&st, "Progressing")),
            };
            publish(&ctx, &vx, kind, &format!("{:?}", st.phase), note).await;
        }
    }
    // Trials wake the experiment when they change; this is only a safety net.
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn condition_message(st: &ValidatorExperimentStatus, type_: &str) -> String {
    st.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

async fn publish(
    ctx: &Context,
    vx: &ValidatorExperiment,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &vx.object_ref(&())).await {
        warn!(error = %e, "publishing an event");
    }
}

fn failed_limit_reached(vx: &ValidatorExperiment, failed: i32) -> bool {
    vx.spec.max_failed_trials.is_some_and(|m| failed >= m)
}

/// The planned trials to create now: in plan order, while fewer than `parallelism` are
/// active, unless suspended or too many failed. Pure.
pub fn next_to_start(
    vx: &ValidatorExperiment,
    planned: &[PlannedTrial],
    existing: &BTreeMap<String, ValidatorTrial>,
) -> Vec<PlannedTrial> {
    let name = vx.name_any();
    let phase = |t: &ValidatorTrial| t.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let in_plan: Vec<(&PlannedTrial, Option<&ValidatorTrial>)> = planned
        .iter()
        .map(|p| (p, existing.get(&p.name(&name))))
        .collect();
    // Trials of points that left the sweep but had started still hold a node.
    let active = existing
        .values()
        .filter(|t| !phase(t).is_finished())
        .count();
    let failed = in_plan
        .iter()
        .filter(|(_, t)| t.is_some_and(|t| phase(t) == TrialPhase::Failed))
        .count() as i32;
    if vx.spec.suspend || failed_limit_reached(vx, failed) {
        return Vec::new();
    }
    let room = (vx.spec.parallelism.max(1) as usize).saturating_sub(active);
    in_plan
        .into_iter()
        .filter(|(_, t)| t.is_none())
        .take(room)
        .map(|(p, _)| p.clone())
        .collect()
}

/// The trial object for a planned point: self-contained, owned by the experiment.
pub fn build_trial(vx: &ValidatorExperiment, p: &PlannedTrial) -> ValidatorTrial {
    let name = vx.name_any();
    let spec = ValidatorTrialSpec {
        experiment: name.clone(),
        point: p.point.clone(),
        repetition: p.repetition,
        template: resolve_template(&vx.spec.template, &vx.spec.sweep, &p.point),
        settings: vx.spec.trial.clone(),
        metrics: vx.spec.metrics.clone(),
    };
    let mut trial = ValidatorTrial::new(&p.name(&name), spec);
    trial.metadata = ObjectMeta {
        name: Some(p.name(&name)),
        namespace: vx.namespace(),
        labels: Some(BTreeMap::from([
            (labels::EXPERIMENT.into(), name),
            (labels::MANAGED_BY.into(), labels::MANAGER.into()),
        ])),
        owner_references: vx.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    };
    trial
}

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
    let limit_hit = failed_limit_reached(vx, counts.failed);
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
        client: vx
            .spec
            .template
            .client
            .kind()
            .map(|k| k.as_str().to_string()),
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
        .then(|| crate::metrics::analysis::round2(v.iter().sum::<f64>() / v.len() as f64))
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
    let avg = |ts: &Vec<&ValidatorTrial>| {
        mean(ts.iter().map(|t| {
            t.status
                .as_ref()
                .and_then(|s| s.results.as_ref())
                .and_then(|r| r.avg_tps)
        }))
    };
    let (best, ts) = kept_up.iter().max_by(|a, b| {
        avg(&a.1)
            .unwrap_or(0.0)
            .total_cmp(&avg(&b.1).unwrap_or(0.0))
    })?;
    Some(Recommendation {
        summary: best.point.describe(),
        reason: format!(
            "the highest average TPS ({}) among points that kept up{provisional}",
            avg(ts).unwrap_or(0.0)
        ),
        trial: ts[0].name_any(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::{TrialResults, ValidatorTrialStatus};

    fn experiment(extra: &str) -> ValidatorExperiment {
        let yaml = format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: ram, namespace: ns, uid: u1, generation: 1}}\nspec:\n  template:\n    agave: {{image: agave}}\n    storage: [{{role: ledger, size: 1Ti}}]\n  sweep: {{memory: [128Gi, 256Gi, 512Gi, 1Ti]}}\n  parallelism: 2\n{extra}"
        );
        serde_saphyr::from_str(&yaml).unwrap()
    }

    fn trial(
        vx: &ValidatorExperiment,
        p: &PlannedTrial,
        phase: TrialPhase,
        outcome: Option<TrialOutcome>,
        tps: f64,
    ) -> ValidatorTrial {
        let mut t = build_trial(vx, p);
        t.status = Some(ValidatorTrialStatus {
            phase,
            outcome,
            results: outcome.map(|_| TrialResults {
                avg_tps: Some(tps),
                ..Default::default()
            }),
            ..Default::default()
        });
        t
    }

    fn t0() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn starts_trials_in_plan_order_up_to_parallelism() {
        let vx = experiment("");
        let planned = plan(&vx.spec.sweep, 1);
        let next = next_to_start(&vx, &planned, &BTreeMap::new());
        assert_eq!(next.len(), 2);
        assert_eq!(next[0].point.memory.as_deref(), Some("128Gi"));
        let mut existing = BTreeMap::new();
        for p in &next {
            existing.insert(
                p.name("ram"),
                trial(&vx, p, TrialPhase::Measuring, None, 0.0),
            );
        }
        assert!(next_to_start(&vx, &planned, &existing).is_empty());
        // One finishes: exactly one more starts, the next point in order.
        existing.insert(
            planned[0].name("ram"),
            trial(
                &vx,
                &planned[0],
                TrialPhase::Succeeded,
                Some(TrialOutcome::OOMKilled),
                1.0,
            ),
        );
        let next = next_to_start(&vx, &planned, &existing);
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].point.memory.as_deref(), Some("512Gi"));
    }

    #[test]
    fn a_deleted_trial_is_recreated_because_trials_are_compared_by_name() {
        let vx = experiment("");
        let planned = plan(&vx.spec.sweep, 1);
        let mut existing = BTreeMap::new();
        existing.insert(
            planned[1].name("ram"),
            trial(
                &vx,
                &planned[1],
                TrialPhase::Succeeded,
                Some(TrialOutcome::KeptUp),
                1.0,
            ),
        );
        existing.insert(
            planned[2].name("ram"),
            trial(
                &vx,
                &planned[2],
                TrialPhase::Succeeded,
                Some(TrialOutcome::KeptUp),
                1.0,
            ),
        );
        // Two finished, none active: the two missing ones start, whatever the count says.
        let next: Vec<_> = next_to_start(&vx, &planned, &existing)
            .iter()
            .map(|p| p.name("ram"))
            .collect();
        assert_eq!(next, vec![planned[0].name("ram"), planned[3].name("ram")]);
    }

    #[test]
    fn suspend_and_the_failure_limit_stop_new_trials() {
        let vx = experiment("  suspend: true\n");
        assert!(next_to_start(&vx, &plan(&vx.spec.sweep, 1), &BTreeMap::new()).is_empty());
        let vx = experiment("  maxFailedTrials: 1\n");
        let planned = plan(&vx.spec.sweep, 1);
        let mut existing = BTreeMap::new();
        existing.insert(
            planned[0].name("ram"),
            trial(
                &vx,
                &planned[0],
                TrialPhase::Failed,
                Some(TrialOutcome::Crashed),
                0.0,
            ),
        );
        assert!(next_to_start(&vx, &planned, &existing).is_empty());
        let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
        assert_eq!(st.phase, ExperimentPhase::Failed);
        assert!(
            st.conditions
                .iter()
                .any(|c| c.reason == "MaxFailedTrialsReached")
        );
    }

    #[test]
    fn recommends_the_smallest_memory_that_kept_up() {
        let vx = experiment("");
        let planned = plan(&vx.spec.sweep, 1);
        let outcomes = [
            TrialOutcome::OOMKilled,
            TrialOutcome::FellBehind,
            TrialOutcome::KeptUp,
            TrialOutcome::KeptUp,
        ];
        let existing: BTreeMap<_, _> = planned
            .iter()
            .zip(outcomes)
            .map(|(p, o)| {
                (
                    p.name("ram"),
                    trial(&vx, p, TrialPhase::Succeeded, Some(o), 4600.0),
                )
            })
            .collect();
        let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
        assert_eq!(st.phase, ExperimentPhase::Succeeded);
        assert_eq!(st.trials.finished, 4);
        let rec = st.recommendation.unwrap();
        assert_eq!(rec.summary, "memory=512Gi");
        assert!(rec.reason.contains("256Gi: FellBehind"), "{}", rec.reason);
        assert!(rec.reason.contains("128Gi: OOMKilled"), "{}", rec.reason);
        assert_eq!(st.summary.len(), 4);
        assert_eq!(st.summary[2].outcomes, "KeptUp");
        assert!(st.completion_time.is_some());
    }

    /// The worst case at the cap: every one of 1024 trials finished with results, the
    /// summary full. The object must stay far from etcd's limits (Katib #1847).
    #[test]
    fn an_experiment_at_the_cap_with_every_trial_finished_stays_under_64_kib() {
        let mut vx = experiment("  maxTrials: 1024\n");
        vx.spec.sweep.memory = Some((1..=32).map(|i| format!("{}Gi", 256 + 32 * i)).collect());
        vx.spec.sweep.cpu = Some((1..=32).map(|i| i * 2).collect());
        let planned = plan(&vx.spec.sweep, 1);
        assert_eq!(planned.len(), 1024);
        let existing: BTreeMap<_, _> = planned
            .iter()
            .map(|p| {
                let mut t = trial(
                    &vx,
                    p,
                    TrialPhase::Succeeded,
                    Some(TrialOutcome::KeptUp),
                    4600.0,
                );
                t.status.as_mut().unwrap().results = Some(TrialResults {
                    avg_tps: Some(4598.12),
                    max_tps: Some(120790.77),
                    zero_tps_seconds: Some(10039.3),
                    max_rss_gib: Some(607.93),
                    ..Default::default()
                });
                (p.name("ram"), t)
            })
            .collect();
        let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
        vx.status = Some(st);
        let size = serde_json::to_vec(&vx).unwrap().len();
        assert!(size < 64 * 1024, "{size} bytes");
    }

    #[test]
    fn the_summary_is_capped() {
        let memory: Vec<String> = (1..=40).map(|i| format!("{}Gi", i * 16)).collect();
        let mut vx = experiment("  maxTrials: 64\n");
        vx.spec.sweep.memory = Some(memory);
        let planned = plan(&vx.spec.sweep, 1);
        let existing: BTreeMap<_, _> = planned
            .iter()
            .map(|p| {
                (
                    p.name("ram"),
                    trial(
                        &vx,
                        p,
                        TrialPhase::Succeeded,
                        Some(TrialOutcome::KeptUp),
                        1.0,
                    ),
                )
            })
            .collect();
        let st = compute_status(&vx, &planned, &existing, None, &Default::default(), t0());
        assert_eq!(st.summary.len(), MAX_SUMMARY_ROWS);
        assert!(st.summary_truncated);
    }
}
