//! A Validator's decision, done against the API server: the identity's Lease first (a
//! pass that loses it stops there), then the claims, generated Secrets, ConfigMaps and
//! the pod (each created once: an existing one is kept), a deletion, events, status.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};

use super::decide::{Act, Step};
use super::observe::Observed;
use crate::api::validator::{IDENTITY_LABEL, IDENTITY_REQUEST, identity_label};
use crate::api::{Validator, labels};
use crate::clients::Rendered;
use crate::controller::apply::{Applied, Applier, PodWrite, Refused};
use crate::controller::status::apply_status;
use crate::controller::{Context, Error, Result, name_of};

pub async fn act(v: &Validator, ctx: &Context, obs: &Observed, step: &Step) -> Result<()> {
    let ns = v.namespace().unwrap_or_default();
    let name = v.name_any();
    let client = &ctx.client;
    for a in &step.acts {
        match a {
            Act::TakeLease(lease) => take_lease(v, ctx, lease).await?,
            Act::EnsureBudget => super::pdb::ensure(v, ctx).await?,
            Act::CreatePod => {
                if let Ok(r) = &obs.rendered {
                    create_pod(v, ctx, r).await?
                }
            }
            Act::DeletePod => {
                let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
                // The long-running grace period, named (the client closes its databases
                // and, for Agave, its tower and ledger), never a forced deletion.
                let dp = DeleteParams {
                    grace_period_seconds: Some(
                        crate::clients::input::Lifecycle::LongRunning {
                            node: v.spec.node_name.clone(),
                        }
                        .grace_period_seconds() as u32,
                    ),
                    ..DeleteParams::default()
                };
                match pods.delete(&name, &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(Error::DeletePods(format!("deleting pod {ns}/{name}"), e));
                    }
                }
            }
            Act::Annotate { pod, request } => {
                let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let patch =
                    serde_json::json!({"metadata": {"annotations": {IDENTITY_REQUEST: request}}});
                pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| {
                        Error::AnnotatePod(format!("asking pod {ns}/{pod} ({request})"), e)
                    })?;
            }
            Act::MoveLease { lease, to } => move_lease(ctx, &ns, lease, to).await?,
            Act::Event(note) => {
                ctx.publish(v, note.warning, &note.reason, &note.text, true)
                    .await
            }
        }
    }
    let api: Api<Validator> = Api::namespaced(client.clone(), &ns);
    apply_status(&api, v, &step.status)
        .await
        .map(|_| ())
        .map_err(|e| Error::WriteStatus(format!("writing the status of {}", name_of(v)), e))
}

/// Creates the claims, generated Secrets and pod, and applies the ConfigMaps
/// ([`Applier`]); a pod that exists is kept.
async fn create_pod(v: &Validator, ctx: &Context, r: &Rendered) -> Result<()> {
    let ns = v.namespace().unwrap_or_default();
    let applier = Applier {
        client: &ctx.client,
        namespace: &ns,
        pod: PodWrite::Create,
        secrets_once: false,
    };
    match applier.apply(r).await {
        Ok(Applied::Pod) => {
            ctx.publish(
                v,
                false,
                "PodCreated",
                &format!("pod {} created on {}", v.name_any(), v.spec.node_name),
                false,
            )
            .await;
            Ok(())
        }
        Ok(Applied::PodKept) => Ok(()),
        Err(Refused::Api { what, source }) => Err(Error::ApplyRendered(what, source)),
        Err(Refused::Random { what, source }) => Err(Error::GenerateSecret(what, source)),
    }
}

/// Creates the identity's Lease held by `v` and owned by it (it goes with the Validator).
/// Losing the race to another Validator is an error: the pass runs again and sees the
/// holder.
async fn take_lease(v: &Validator, ctx: &Context, lease: &str) -> Result<()> {
    let ns = v.namespace().unwrap_or_default();
    let secret = v
        .spec
        .identity
        .as_ref()
        .map(|i| identity_label(&i.secret_name))
        .unwrap_or_default();
    let obj = Lease {
        metadata: ObjectMeta {
            name: Some(lease.to_string()),
            namespace: Some(ns.clone()),
            labels: Some(
                [
                    (labels::MANAGED_BY.to_string(), labels::MANAGER.to_string()),
                    (IDENTITY_LABEL.to_string(), secret),
                ]
                .into(),
            ),
            owner_references: v.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(v.name_any()),
            ..Default::default()
        }),
    };
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ns);
    leases
        .create(&PostParams::default(), &obj)
        .await
        .map(|_| ())
        .map_err(|e| Error::TakeLease(format!("taking Lease {ns}/{lease}"), e))
}

/// Hands the staked identity's Lease to the Validator `to` (holder and owner: it goes
/// with that Validator now), once `to`'s pod signs with it and this one's does not.
async fn move_lease(ctx: &Context, ns: &str, lease: &str, to: &str) -> Result<()> {
    let vs: Api<Validator> = Api::namespaced(ctx.client.clone(), ns);
    let standby = vs
        .get(to)
        .await
        .map_err(|e| Error::MoveLease(format!("reading Validator {ns}/{to}"), e))?;
    let owner = standby.controller_owner_ref(&());
    let patch = serde_json::json!({
        "metadata": {"ownerReferences": owner.into_iter().collect::<Vec<_>>()},
        "spec": {"holderIdentity": to},
    });
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    leases
        .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| Error::MoveLease(format!("moving Lease {ns}/{lease} to {to}"), e))
}
