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
pub mod observe;
pub mod window;

use std::sync::Arc;

use kube::runtime::controller::Action;

use super::{Context, Result, now};
use crate::api::Validator;

pub async fn reconcile(v: Arc<Validator>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("validator");
    if v.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let obs = observe::observe(&v, &ctx).await?;
    let previous = v.status.clone().unwrap_or_default();
    let decision = decide::decide(&v.spec, v.metadata.generation, &previous, &obs, now());
    act::act(&v, &ctx, &obs, &decision).await?;
    Ok(Action::requeue(decision.requeue))
}
