//! What a step asks for, done against the API server: the experiment's PodMonitor,
//! deleting trials that left the sweep, creating trials (an event each), and the status.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use tracing::info;

use super::decide::Step;
use super::kube_err;
use crate::api::experiment::{ExperimentPhase, ValidatorExperiment, ValidatorExperimentStatus};
use crate::api::trial::ValidatorTrial;
use crate::clients;
use crate::controller::status::apply_status;
use crate::controller::{Context, Error, Result, pod_monitor};

/// Acts on `step`; returns `trials` with those it created (as the API server returned
/// them). A group's trials are created one after the other: a pass that fails between
/// two leaves the rest to the next pass, whose strategy sees the part that exists.
pub async fn act(
    vx: &ValidatorExperiment,
    ctx: &Context,
    step: &Step,
    mut trials: Vec<ValidatorTrial>,
) -> Result<Vec<ValidatorTrial>> {
    if step.blocked.is_some() {
        return Ok(trials);
    }
    if vx.spec.metrics.pod_monitor && ctx.pod_monitors {
        let client =
            clients::client_for(&vx.spec.template).map_err(|e| Error::Invalid(e.to_string()))?;
        let endpoints = client.profile(&vx.spec.template).endpoints;
        pod_monitor::ensure(ctx, vx, &endpoints).await?;
    }
    let api: Api<ValidatorTrial> =
        Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    for name in &step.delete {
        info!(trial = %name, "removing a trial whose point left the sweep");
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(kube_err(vx, "deleting a trial that left the sweep")(e)),
        }
    }
    for trial in step.create.iter().flatten() {
        let name = trial.name_any();
        match api.create(&PostParams::default(), trial).await {
            Ok(created) => {
                let text = format!(
                    "trial {name}: {} (repetition {})",
                    trial.spec.point.describe(),
                    trial.spec.repetition
                );
                ctx.publish(vx, false, "TrialCreated", &text, false).await;
                trials.push(created);
            }
            // Created by an earlier pass whose list did not see it yet: fine.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                if let Some(t) = api
                    .get_opt(&name)
                    .await
                    .map_err(kube_err(vx, "reading a trial"))?
                {
                    trials.push(t);
                }
            }
            Err(e) => return Err(kube_err(vx, "creating a trial")(e)),
        }
    }
    Ok(trials)
}

/// Writes the status when it changed, with an event when the phase changed.
pub async fn write_status(
    vx: &ValidatorExperiment,
    ctx: &Context,
    old: &ValidatorExperimentStatus,
    st: &ValidatorExperimentStatus,
) -> Result<()> {
    if st == old {
        return Ok(());
    }
    let api: Api<ValidatorExperiment> =
        Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    apply_status(&api, vx, st)
        .await
        .map_err(kube_err(vx, "writing the status"))?;
    if st.phase != old.phase {
        let (warning, note) = match st.phase {
            ExperimentPhase::Failed => (true, condition_message(st, "Ready")),
            _ => (false, condition_message(st, "Progressing")),
        };
        ctx.publish(vx, warning, &format!("{:?}", st.phase), &note, false)
            .await;
    }
    Ok(())
}

fn condition_message(st: &ValidatorExperimentStatus, type_: &str) -> String {
    st.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}
