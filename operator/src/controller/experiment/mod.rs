//! The experiment reconciler: observe (its trials, the nodes of a paired comparison, its
//! metrics pipeline) -> a pure [`decide::decide`] (its strategy's decision: which trials
//! start, which unstarted ones left the sweep; the status once that is done) -> act
//! (the PodMonitor, create and delete trials, events) -> the status, written when it
//! changed.

mod act;
mod compare;
mod decide;
mod observe;
mod summary;

use std::sync::Arc;

use kube::runtime::controller::Action;

use super::{Context, Error, Result, name_of, now};
use crate::api::experiment::ValidatorExperiment;
pub use summary::{compute_status, recommend};

pub async fn reconcile(vx: Arc<ValidatorExperiment>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("experiment");
    if vx.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx.already_written(vx.as_ref()) {
        return Ok(Action::requeue(super::STALE_RECHECK));
    }
    let old = vx.status.clone().unwrap_or_default();
    let now = now();
    // Observe (client): the trials the experiment owns, the nodes a paired comparison
    // matches, whether its Prometheus can receive what its client sends.
    let obs = observe::observe(&vx, &ctx, now).await?;
    // Decide (pure): what its strategy starts and deletes, the status once that is done.
    let mut step = decide::decide(&vx, &obs, &old, now);
    // Act (client): the PodMonitor, deletes, creates, events; a create that found its
    // trial existing restates the status with the trial as it is.
    let found = act::act(&vx, &ctx, &step).await?;
    if !found.is_empty() {
        step.status = decide::decide_with(&vx, &obs, &old, now, &found).status;
    }
    // The status, written when it changed, an event when its phase did.
    act::write_status(&vx, &ctx, &old, &step.status).await?;
    ctx.succeeded(&vx.metadata.uid.clone().unwrap_or_default());
    Ok(step.action())
}

/// An API error in one step of a pass, naming what it did and the experiment.
fn kube_err(
    vx: &ValidatorExperiment,
    step: fn(String, kube::Error) -> Error,
    what: &str,
) -> impl FnOnce(kube::Error) -> Error {
    let what = format!("{what} of experiment {}", name_of(vx));
    move |e| step(what, e)
}

#[cfg(test)]
mod tests;
