//! The Validator reconciler: [`observe`] (what is rendered, the identity's Lease, the pod,
//! its node, the client's own health answer) -> a pure [`decide::decide`] -> [`act`]
//! (the Lease, the claims, ConfigMaps, Secrets and pod, a deletion, events, status).
//!
//! Rules that keep it safe: one Validator holds an identity at a time (a Lease per
//! identity Secret, owned by the holder); a pod is created only when no pod of the
//! Validator or of its identity exists, so a pod on a node that stops answering is not
//! replaced until its object is gone; a change of the rendered pod waits for the
//! client's restart window; `spec` is never written.

pub mod act;
pub mod decide;
pub mod failover;
pub mod observe;
pub mod pair;
pub mod pdb;
pub mod tuning;

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::{Context, Result, now};
use crate::api::{Validator, ValidatorExperiment};
use crate::operator_metrics::OperatorMetrics;

pub async fn reconcile(v: Arc<Validator>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("validator");
    if v.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let obs = observe::observe(&v, &ctx).await?;
    let previous = v.status.clone().unwrap_or_default();
    let step = decide::decide(&v.spec, v.metadata.generation, &previous, &obs, now());
    act::act(&v, &ctx, &obs, &step).await?;
    Ok(step.action())
}

/// The Validators' controller, woken too by the experiments they name (a new
/// recommendation reaches each Validator whose `spec.tuning.fromExperiment` names it), its
/// cache read by the metrics at each scrape.
pub fn watching(
    c: Controller<Validator>,
    experiments: Api<ValidatorExperiment>,
    metrics: &OperatorMetrics,
) -> Controller<Validator> {
    let named = c.store();
    metrics.watch_validators(c.store());
    c.watches(experiments, watcher::Config::default(), move |vx| {
        tuning::naming(&named.state(), &vx)
    })
}
