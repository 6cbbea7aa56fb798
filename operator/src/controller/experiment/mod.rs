//! The experiment reconciler: expands the sweep into expected trials (by name), starts
//! them up to `parallelism`, and summarises them in a small, bounded status.

mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use tracing::info;

use super::status::apply_status;
use super::{Context, Error, Result, now, pod_monitor};
use crate::api::experiment::{ExperimentPhase, ValidatorExperiment, ValidatorExperimentStatus};
use crate::api::labels;
use crate::api::resolve::resolve_template;
use crate::api::sweep::{PlannedTrial, plan};
use crate::api::trial::{TrialPhase, ValidatorTrial, ValidatorTrialSpec};
use crate::clients;
pub use summary::{compute_status, recommend};

/// Why the experiment cannot run at all (checked before anything is created).
fn unsupported(vx: &ValidatorExperiment) -> Option<String> {
    match clients::client_for(&vx.spec.template) {
        Ok(c) if c.runs_trials() => None,
        Ok(c) => Some(format!(
            "valtune cannot run {} trials yet: this version renders {} pods (see docs/clients.md)",
            c.display(),
            clients::CLIENTS
                .iter()
                .filter(|c| c.runs_trials())
                .map(|c| c.display())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(e) => Some(e.to_string()),
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
    let kube_err = |step: &str| {
        let what = format!("{step} of experiment {ns}/{name}");
        move |e| Error::kube(what, e)
    };

    let planned = plan(&vx.spec.sweep, vx.spec.trial.repetitions);
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let lp = ListParams::default().labels(&format!("{}={name}", labels::EXPERIMENT));
    let mut existing: BTreeMap<String, ValidatorTrial> = trials_api
        .list(&lp)
        .await
        .map_err(kube_err("listing the trials"))?
        .items
        .into_iter()
        .filter(|t| t.owner_references().iter().any(|o| o.uid == uid))
        .map(|t| (t.name_any(), t))
        .collect();

    let blocked = unsupported(&vx);
    // Can its Prometheus receive what its client sends? If not, start no trials.
    let pipeline = super::preflight::check(&ctx, &vx, now).await;
    let waiting = pipeline.as_ref().is_some_and(|p| p.wait);
    if blocked.is_none() {
        if vx.spec.metrics.pod_monitor && ctx.pod_monitors {
            let client = clients::client_for(&vx.spec.template)
                .map_err(|e| Error::Invalid(e.to_string()))?;
            let endpoints = client.profile(&vx.spec.template).endpoints;
            pod_monitor::ensure(&ctx, &vx, &endpoints).await?;
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
                    Err(e) => return Err(kube_err("deleting a trial that left the sweep")(e)),
                }
            }
        }
        existing.retain(|n, t| expected.contains(n) || t.metadata.deletion_timestamp.is_none());

        let to_start = if waiting {
            Vec::new()
        } else {
            next_to_start(&vx, &planned, &existing)
        };
        for planned_trial in to_start {
            let trial = build_trial(&vx, &planned_trial);
            let tname = trial.name_any();
            match trials_api.create(&PostParams::default(), &trial).await {
                Ok(created) => {
                    ctx.publish(
                        vx.as_ref(),
                        false,
                        "TrialCreated",
                        &format!(
                            "trial {tname}: {} (repetition {})",
                            planned_trial.point.describe(),
                            planned_trial.repetition
                        ),
                        false,
                    )
                    .await;
                    existing.insert(tname, created);
                }
                // Created by an earlier pass whose list did not see it yet: fine.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    if let Some(t) = trials_api
                        .get_opt(&tname)
                        .await
                        .map_err(kube_err("reading a trial"))?
                    {
                        existing.insert(tname, t);
                    }
                }
                Err(e) => return Err(kube_err("creating a trial")(e)),
            }
        }
    }

    let mut st = compute_status(&vx, &planned, &existing, blocked, &old, now);
    if let Some(p) = &pipeline {
        st.conditions.push(p.condition.clone());
        if p.wait {
            ctx.publish(
                vx.as_ref(),
                true,
                "RemoteWriteReceiverOff",
                &p.condition.message,
                true,
            )
            .await;
        }
    }
    if st != old {
        apply_status(&api, vx.as_ref(), &st)
            .await
            .map_err(kube_err("writing the status"))?;
        if st.phase != old.phase {
            let (warning, note) = match st.phase {
                ExperimentPhase::Failed => (true, condition_message(&st, "Ready")),
                _ => (false, condition_message(&st, "Progressing")),
            };
            ctx.publish(
                vx.as_ref(),
                warning,
                &format!("{:?}", st.phase),
                &note,
                false,
            )
            .await;
        }
    }
    ctx.succeeded(&uid);
    // Trials wake the experiment when they change; this is only a safety net (sooner
    // while it waits for its Prometheus: nothing else would wake it).
    Ok(Action::requeue(if waiting {
        super::preflight::RECHECK
    } else {
        Duration::from_secs(300)
    }))
}

fn condition_message(st: &ValidatorExperimentStatus, type_: &str) -> String {
    st.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

pub(super) fn failed_limit_reached(vx: &ValidatorExperiment, failed: i32) -> bool {
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

#[cfg(test)]
mod tests;
