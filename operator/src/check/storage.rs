//! `valtune check`'s storage check: the StorageClass exists, binds when the pod is
//! scheduled, and has local volumes on the nodes the trials may use.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::Finding;
use super::cluster::{Needs, STORAGE_CLASS};

pub(super) async fn storage_checks(client: &Client, n: &Needs, eligible: &[&Node]) -> Vec<Finding> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (class, per_trial) in &n.storage_classes {
        let sc = classes.get_opt(class).await.ok().flatten();
        out.push(storage_finding(
            n,
            class,
            *per_trial,
            sc.as_ref(),
            &pvs,
            eligible,
        ));
    }
    out
}

/// The StorageClass exists, binds when the pod is scheduled, and has local volumes on the
/// nodes the trials may use. Pure.
pub(super) fn storage_finding(
    n: &Needs,
    class: &str,
    per_trial: usize,
    sc: Option<&StorageClass>,
    pvs: &[PersistentVolume],
    eligible: &[&Node],
) -> Finding {
    let Some(sc) = sc else {
        return Finding::fail(
            "storage",
            format!(
                "{}: StorageClass {class} does not exist: trial volumes would stay Pending",
                n.what
            ),
            if class == STORAGE_CLASS {
                "kubectl apply -f manifests/prepare/local-nvme.yaml, and run the local static provisioner on the validator machines (docs/prepare-cluster.md)".to_string()
            } else {
                format!(
                    "create StorageClass {class}, or use local-nvme (template.storage[].storageClassName)"
                )
            },
        );
    };
    if sc.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
        return Finding::warn(
            "storage",
            format!(
                "{}: StorageClass {class} binds {}: a local volume may be bound on a node before the scheduler picks one for the pod",
                n.what,
                sc.volume_binding_mode.as_deref().unwrap_or("Immediate")
            ),
            "set volumeBindingMode: WaitForFirstConsumer (manifests/prepare/local-nvme.yaml)",
        );
    }
    let names: BTreeSet<String> = eligible.iter().map(|e| e.name_any()).collect();
    let on_node = |pv: &PersistentVolume| -> Option<String> {
        let spec = pv.spec.as_ref()?;
        if spec.storage_class_name.as_deref() != Some(class) {
            return None;
        }
        let terms = &spec
            .node_affinity
            .as_ref()?
            .required
            .as_ref()?
            .node_selector_terms;
        terms
            .iter()
            .flat_map(|t| t.match_expressions.iter().flatten())
            .filter(|e| e.key == "kubernetes.io/hostname" && e.operator == "In")
            .flat_map(|e| e.values.iter().flatten())
            .find(|v| names.contains(*v))
            .cloned()
    };
    let mut total = 0;
    let mut available: BTreeMap<String, usize> = BTreeMap::new();
    for pv in pvs {
        if let Some(node) = on_node(pv) {
            total += 1;
            if pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available") {
                *available.entry(node).or_default() += 1;
            }
        }
    }
    // A provisioner with dynamic volumes needs no PersistentVolumes ahead of time.
    if sc.provisioner != "kubernetes.io/no-provisioner" {
        return Finding::pass(
            "storage",
            format!(
                "{}: StorageClass {class} ({}) binds when the pod is scheduled",
                n.what, sc.provisioner
            ),
        );
    }
    if total == 0 {
        return Finding::fail(
            "storage",
            format!(
                "{}: no PersistentVolume of StorageClass {class} on the nodes the trials may use",
                n.what
            ),
            "mount each NVMe under the local static provisioner's discovery directory and run the provisioner with the validator taint tolerated (docs/prepare-cluster.md)",
        );
    }
    let room = available.values().filter(|c| **c >= per_trial).count();
    if room == 0 {
        return Finding::warn(
            "storage",
            format!(
                "{}: {total} volumes of {class} on its nodes, but none has {per_trial} Available now (in use by running trials?)",
                n.what
            ),
            "wait for running trials to release their volumes, or add disks",
        );
    }
    Finding::pass(
        "storage",
        format!(
            "{}: StorageClass {class}, WaitForFirstConsumer; {room} nodes have {per_trial} Available volumes",
            n.what
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::cluster::example_needs as needs;
    use super::*;
    use crate::check::Status;

    #[test]
    fn a_missing_storage_class_names_the_manifest_to_apply() {
        let f = storage_finding(&needs(), "local-nvme", 1, None, &[], &[]);
        assert_eq!(f.status, Status::Fail);
        assert!(f.fix.unwrap().contains("manifests/prepare/local-nvme.yaml"));
        let immediate: StorageClass = serde_saphyr::from_str(
            "metadata: {name: local-nvme}\nprovisioner: kubernetes.io/no-provisioner\n",
        )
        .unwrap();
        let f = storage_finding(&needs(), "local-nvme", 1, Some(&immediate), &[], &[]);
        assert_eq!(f.status, Status::Warn);
    }
}
