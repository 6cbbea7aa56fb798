//! prometheus-operator integration: one PodMonitor per experiment selects its trial pods
//! and scrapes the client's metrics ports at the experiment's scrape interval.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api::{ValidatorExperiment, labels};
use crate::clients::agave;

fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "PodMonitor",
    ))
}

/// Whether the cluster serves the PodMonitor kind.
pub async fn pod_monitor_served(client: &Client) -> bool {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    api.list(&kube::api::ListParams::default().limit(1))
        .await
        .is_ok()
}

/// The PodMonitor of an experiment. Pure.
pub fn pod_monitor(vx: &ValidatorExperiment) -> serde_json::Value {
    let name = vx.name_any();
    let ports: Vec<_> = agave::METRICS_PORTS
        .iter()
        .map(
            |p| json!({"port": p, "path": "/metrics", "interval": vx.spec.metrics.scrape_interval}),
        )
        .collect();
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": name,
            "namespace": vx.namespace(),
            "labels": {labels::EXPERIMENT: name, labels::MANAGED_BY: labels::MANAGER},
            "ownerReferences": vx.controller_owner_ref(&()).map(|o| vec![o]),
        },
        "spec": {
            "selector": {"matchLabels": {labels::EXPERIMENT: name, labels::MANAGED_BY: labels::MANAGER}},
            "podMetricsEndpoints": ports,
        },
    })
}

pub async fn apply_pod_monitor(client: &Client, vx: &ValidatorExperiment) -> kube::Result<()> {
    let ns = vx.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource());
    let pp = PatchParams::apply(crate::controller::MANAGER).force();
    api.patch(&vx.name_any(), &pp, &Patch::Apply(&pod_monitor(vx)))
        .await?;
    Ok(())
}
