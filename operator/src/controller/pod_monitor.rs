//! prometheus-operator integration: one PodMonitor per experiment selects its trial pods
//! and scrapes the client's endpoints at the experiment's scrape interval. It is applied
//! when what it should be changes, not on every reconcile.

use std::hash::{Hash, Hasher};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::{Context, Error, Result, name_of};
use crate::api::{FIELD_MANAGER, ValidatorExperiment, labels};
use crate::clients::profile::Endpoint;

fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "PodMonitor",
    ))
}

/// Whether the cluster serves the PodMonitor kind. Asked of API discovery, which every
/// authenticated user may read (the system:discovery role), not by listing PodMonitors:
/// an operator that watches one namespace has no right to list them cluster-wide.
pub async fn served(client: &Client) -> bool {
    let gv = format!("{}/{}", resource().group, resource().version);
    client
        .list_api_group_resources(&gv)
        .await
        .is_ok_and(|list| list.resources.iter().any(|r| r.name == resource().plural))
}

/// The PodMonitor of an experiment whose client is scraped at `endpoints`. Pure.
pub fn pod_monitor(vx: &ValidatorExperiment, endpoints: &[Endpoint]) -> serde_json::Value {
    let name = vx.name_any();
    let ports: Vec<_> = endpoints
        .iter()
        .map(|e| json!({"port": e.port, "path": e.path, "interval": vx.spec.metrics.scrape_interval}))
        .collect();
    // The user's labels (e.g. `release: <kube-prometheus-stack release>`, which its
    // Prometheus selects PodMonitors by), then valtune's own.
    let mut meta_labels = serde_json::Map::new();
    for (k, v) in &vx.spec.metrics.pod_monitor_labels {
        meta_labels.insert(k.clone(), json!(v));
    }
    meta_labels.insert(labels::EXPERIMENT.into(), json!(name));
    meta_labels.insert(labels::MANAGED_BY.into(), json!(labels::MANAGER));
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": name,
            "namespace": vx.namespace(),
            "labels": meta_labels,
            "ownerReferences": vx.controller_owner_ref(&()).map(|o| vec![o]),
        },
        "spec": {
            "selector": {"matchLabels": {labels::EXPERIMENT: name, labels::MANAGED_BY: labels::MANAGER}},
            "podMetricsEndpoints": ports,
        },
    })
}

fn digest(v: &serde_json::Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// Applies the experiment's PodMonitor if it differs from what this process last applied
/// (or, after a restart, from what the cluster holds).
pub async fn ensure(ctx: &Context, vx: &ValidatorExperiment, endpoints: &[Endpoint]) -> Result<()> {
    let desired = pod_monitor(vx, endpoints);
    let key = name_of(vx);
    let hash = digest(&desired);
    if ctx.applied_monitors.lock().expect("lock").get(&key) == Some(&hash) {
        return Ok(());
    }
    let ns = vx.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &resource());
    let step = || format!("applying PodMonitor {key}");
    let current = api
        .get_opt(&vx.name_any())
        .await
        .map_err(|e| Error::EnsurePodMonitor(step(), e))?;
    let same = current.is_some_and(|c| {
        let labels = serde_json::to_value(c.metadata.labels.unwrap_or_default()).ok();
        labels.as_ref() == desired["metadata"].get("labels")
            && c.data.get("spec") == desired.get("spec")
    });
    if !same {
        api.patch(
            &vx.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&desired),
        )
        .await
        .map_err(|e| Error::EnsurePodMonitor(step(), e))?;
    }
    ctx.applied_monitors.lock().expect("lock").insert(key, hash);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_labels_come_first_and_valtune_keeps_its_own() {
        let vx: ValidatorExperiment = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: x, namespace: ns, uid: u}\nspec:\n  template: {agave: {image: a}}\n  metrics: {podMonitorLabels: {release: kps, app.kubernetes.io/managed-by: someone}}\n",
        )
        .unwrap();
        let pm = pod_monitor(
            &vx,
            &[Endpoint {
                port: "metrics",
                path: "/metrics",
            }],
        );
        assert_eq!(pm["metadata"]["labels"]["release"], "kps");
        assert_eq!(
            pm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "valtune"
        );
        assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
        assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["interval"], "15s");
    }
}
