//! The experiment reconciler: observe its trials -> a pure [`decide::decide`] (its
//! strategy's decision: which trials start, which unstarted ones left the sweep) -> act
//! (create and delete trials, events) -> the status, pure, written when it changed.

mod act;
mod compare;
mod decide;
mod observe;
mod summary;

use std::sync::Arc;
use std::time::Duration;

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
    // Observe (client): the trials the experiment owns, and whether its Prometheus can
    // receive what its client sends (controller/preflight.rs).
    let observed = observe::trials(&vx, &ctx).await?;
    let nodes = observe::nodes(&vx, &ctx).await?;
    let pipeline = super::preflight::check(&ctx, &vx, now).await;
    let waiting = pipeline.as_ref().is_some_and(|p| p.wait);
    // Decide (pure): what its strategy starts, which unstarted trials left the sweep;
    // nothing starts past maxNodeHours, nor while the pipeline would leave trials blind.
    let mut step = decide::decide(&vx, &observed, nodes);
    decide::hold_to_budget(&mut step, &vx, crate::cost::spent(&observed, now));
    if waiting {
        step.create.clear();
    }
    // Act (client): the PodMonitor, deletes and creates; the trials as they are now.
    let trials = act::act(&vx, &ctx, &step, observed).await?;
    // The status (pure), written when it changed (client), an event when its phase did.
    let mut status = decide::status(&vx, &step, &trials, &old, now);
    if let Some(p) = &pipeline {
        status.conditions.push(p.condition.clone());
        if p.wait {
            let text = &p.condition.message;
            ctx.publish(vx.as_ref(), true, "RemoteWriteReceiverOff", text, true)
                .await;
        }
    }
    act::write_status(&vx, &ctx, &old, &status).await?;
    ctx.succeeded(&vx.metadata.uid.clone().unwrap_or_default());
    // Trials wake the experiment when they change; this is only a safety net (sooner
    // while it waits for its Prometheus: nothing else would wake it).
    Ok(Action::requeue(if waiting {
        super::preflight::RECHECK
    } else {
        Duration::from_secs(300)
    }))
}

/// An API error in one step of a pass, naming the step and the experiment.
fn kube_err(vx: &ValidatorExperiment, step: &str) -> impl FnOnce(kube::Error) -> Error {
    let what = format!("{step} of experiment {}", name_of(vx));
    move |e| Error::kube(what, e)
}

#[cfg(test)]
mod tests;
