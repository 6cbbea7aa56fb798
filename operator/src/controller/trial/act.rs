//! What a transition asks for, done against the API server: the attempt's generated
//! Secrets (created once), ConfigMaps and pod (server-side apply, one field manager),
//! deleting or stopping pods, events.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use super::transition::{Act, Step, finish};
use crate::api::labels;
use crate::api::trial::{TrialOutcome, ValidatorTrial};
use crate::clients::{self, RenderInput};
use crate::controller::apply::{Applier, PodWrite, Refused};
use crate::controller::{Context, Error, Result, is_permanent, name_of, now};

pub async fn act(
    trial: &ValidatorTrial,
    ctx: &Context,
    step: &mut Step,
    at: Timestamp,
) -> Result<()> {
    for a in std::mem::take(&mut step.acts) {
        match a {
            Act::StartAttempt {
                attempt,
                avoid_nodes,
            } => {
                if let Err(refused) = start_attempt(trial, ctx, attempt, &avoid_nodes).await? {
                    // Retrying cannot fix an object the API server refuses: the trial ends
                    // with the API server's words.
                    finish(&mut step.status, Some(TrialOutcome::Invalid), refused, at);
                    step.requeue = Some(std::time::Duration::from_secs(1));
                }
            }
            Act::DeletePods => delete_pods(trial, ctx).await?,
            Act::StopPods => stop_pods(trial, ctx).await?,
            Act::Event(note) => {
                ctx.publish(trial, note.warning, &note.reason, &note.text, true)
                    .await
            }
        }
    }
    Ok(())
}

/// Creates the attempt's generated Secrets unless they exist, applies its ConfigMaps, then
/// its pod ([`Applier`]). Ok(Err(why)) when the API server refuses one of them for good
/// ([`is_permanent`]).
async fn start_attempt(
    trial: &ValidatorTrial,
    ctx: &Context,
    attempt: i32,
    avoid_nodes: &[String],
) -> Result<Result<(), String>> {
    let input = RenderInput::for_trial(trial, attempt, avoid_nodes, ctx.prometheus_url.as_deref());
    let rendered = match input.and_then(|i| clients::render(&i)) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("cannot render the pod: {e}"))),
    };
    let ns = trial.namespace().unwrap_or_default();
    let applier = Applier {
        client: &ctx.client,
        namespace: &ns,
        pod: PodWrite::Apply,
        secrets_once: true,
    };
    match applier.apply(&rendered).await {
        Ok(_) => Ok(Ok(())),
        Err(Refused::Api { what, source }) => refused_or_retry(source, what),
        Err(Refused::Random { what, source }) => Err(Error::GenerateSecret(what, source)),
    }
}

fn refused_or_retry(e: kube::Error, step: String) -> Result<Result<(), String>> {
    match is_permanent(&e) {
        Some(msg) => Ok(Err(format!("the API server refused {step}: {msg}"))),
        None => Err(Error::ApplyRendered(step, e)),
    }
}

fn trial_pods(trial: &ValidatorTrial) -> ListParams {
    ListParams::default().labels(&format!("{}={}", labels::TRIAL, trial.name_any()))
}

/// The trial's pods: from the trial controller's watch of them once it has listed
/// ([`Context::pods`]; issue 23: a finished trial listed its pods on every pass its
/// pod's events caused), else from the API server. The watch is updated before the
/// trial it wakes is reconciled, and every change of a pod wakes its trial again, so a
/// pod the store has not delivered yet (applied a moment ago) is stopped or deleted on
/// the pass its arrival causes.
async fn pods_of(
    trial: &ValidatorTrial,
    ctx: &Context,
    api: &Api<Pod>,
) -> kube::Result<Vec<Arc<Pod>>> {
    if *ctx.pods_ready.borrow() {
        let (ns, name) = (trial.namespace(), trial.name_any());
        return Ok(ctx
            .pods
            .state()
            .into_iter()
            .filter(|p| p.namespace() == ns && p.labels().get(labels::TRIAL) == Some(&name))
            .collect());
    }
    Ok(api
        .list(&trial_pods(trial))
        .await?
        .items
        .into_iter()
        .map(Arc::new)
        .collect())
}

/// Deletes the trial's pods; their volumes (ephemeral claims) go with them.
async fn delete_pods(trial: &ValidatorTrial, ctx: &Context) -> Result<()> {
    let ns = trial.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let step = || format!("deleting the pods of trial {}", name_of(trial));
    let failed = |e| Error::DeletePods(step(), e);
    for pod in pods_of(trial, ctx, &api).await.map_err(failed)? {
        if pod.metadata.deletion_timestamp.is_none() {
            ignore_gone(api.delete(&pod.name_any(), &DeleteParams::default()).await)
                .map_err(failed)?;
        }
    }
    Ok(())
}

/// Stops running pods without deleting them (the kubelet kills a pod past its
/// activeDeadlineSeconds), so `kubectl logs` still works until the TTL.
async fn stop_pods(trial: &ValidatorTrial, ctx: &Context) -> Result<()> {
    let ns = trial.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let step = || format!("stopping the pods of trial {}", name_of(trial));
    let failed = |e| Error::StopPods(step(), e);
    for pod in pods_of(trial, ctx, &api).await.map_err(failed)? {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let has_deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .is_some();
        if running && !has_deadline {
            let started = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.clone())
                .map(|t| t.0)
                .unwrap_or_else(now);
            let age = now().duration_since(started).as_secs().max(1);
            let patch = serde_json::json!({"spec": {"activeDeadlineSeconds": age}});
            ignore_gone(
                api.patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await,
            )
            .map_err(failed)?;
        }
    }
    Ok(())
}

fn ignore_gone<T>(r: kube::Result<T>) -> kube::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
