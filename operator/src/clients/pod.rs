//! The parts of a trial's pod every client shares: labels and ownership, Guaranteed QoS
//! with whole cores, hugepages as hugetlbfs, one local NVMe claim per volume role, and
//! placement (selector, tolerations, one valtune pod per node).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm, PodAntiAffinity, PodSpec,
    ResourceRequirements, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Resource;
use kube::api::ObjectMeta;

use super::RenderError;
use crate::api::labels;
use crate::api::template::VolumeRole;
use crate::api::trial::ValidatorTrial;

/// On every exclusive pod; the anti-affinity keeps two of them off one node.
pub const EXCLUSIVE_LABEL: &str = "valtune.dev/exclusive";

pub fn volume_path(role: VolumeRole) -> String {
    format!("/mnt/{}", role.as_str())
}

/// The pod of an attempt: a retry after a lost node needs new volumes on another node.
pub fn pod_name(trial: &str, attempt: i32) -> String {
    format!("{trial}-{attempt}")
}

pub fn pvc_name(trial: &str, attempt: i32, role: VolumeRole) -> String {
    format!("{}-{}", pod_name(trial, attempt), role.as_str())
}

/// Sidecars get small fixed requests equal to their limits, so the pod stays Guaranteed.
pub fn sidecar_resources() -> ResourceRequirements {
    let r = BTreeMap::from([
        ("cpu".to_string(), Quantity("100m".into())),
        ("memory".to_string(), Quantity("256Mi".into())),
    ]);
    ResourceRequirements {
        requests: Some(r.clone()),
        limits: Some(r),
        ..Default::default()
    }
}

/// What the client modules need from the shared skeleton.
pub struct PodParts {
    pub validator_resources: ResourceRequirements,
    pub mounts: Vec<VolumeMount>,
    pub volumes: Vec<Volume>,
}

pub fn labels(trial: &ValidatorTrial, client: &str) -> BTreeMap<String, String> {
    let name = trial.metadata.name.clone().unwrap_or_default();
    BTreeMap::from([
        (labels::MANAGED_BY.into(), labels::MANAGER.into()),
        (labels::EXPERIMENT.into(), trial.spec.experiment.clone()),
        (labels::TRIAL.into(), name),
        (labels::CLIENT.into(), client.into()),
        ("app.kubernetes.io/name".into(), client.into()),
    ])
}

pub fn parts(trial: &ValidatorTrial, attempt: i32) -> Result<PodParts, RenderError> {
    let t = &trial.spec.template;
    let name = trial.metadata.name.clone().unwrap_or_default();
    let memory = t.resources.memory.clone().ok_or_else(|| {
        RenderError::Invalid("no memory: set template.resources.memory or sweep.memory".into())
    })?;
    let limit = t.resources.memory_limit.clone().unwrap_or(memory.clone());
    let cpu = Quantity(t.resources.cpu.to_string());
    let mut requests = BTreeMap::from([
        ("cpu".to_string(), cpu.clone()),
        ("memory".to_string(), Quantity(memory)),
    ]);
    let mut limits = BTreeMap::from([
        ("cpu".to_string(), cpu),
        ("memory".to_string(), Quantity(limit)),
    ]);
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    for (resource, pages, medium, path) in [
        (
            "hugepages-1Gi",
            t.resources.hugepages1_gi.map(|n| format!("{n}Gi")),
            "HugePages-1Gi",
            "/mnt/hugepages/.gigantic",
        ),
        (
            "hugepages-2Mi",
            t.resources.hugepages2_mi.map(|n| format!("{}Mi", n * 2)),
            "HugePages-2Mi",
            "/mnt/hugepages/.huge",
        ),
    ] {
        let Some(q) = pages.filter(|q| !q.starts_with('0')) else {
            continue;
        };
        requests.insert(resource.into(), Quantity(q.clone()));
        limits.insert(resource.into(), Quantity(q));
        let vol = resource.to_lowercase();
        volumes.push(Volume {
            name: vol.clone(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some(medium.into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: vol,
            mount_path: path.into(),
            ..Default::default()
        });
    }
    for v in &t.storage {
        let vol = v.role.as_str().to_string();
        volumes.push(Volume {
            name: vol.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name(&name, attempt, v.role),
                read_only: None,
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: vol,
            mount_path: volume_path(v.role),
            ..Default::default()
        });
    }
    Ok(PodParts {
        validator_resources: ResourceRequirements {
            requests: Some(requests),
            limits: Some(limits),
            ..Default::default()
        },
        mounts,
        volumes,
    })
}

pub fn pvcs(
    trial: &ValidatorTrial,
    attempt: i32,
    labels: &BTreeMap<String, String>,
) -> Vec<PersistentVolumeClaim> {
    let name = trial.metadata.name.clone().unwrap_or_default();
    trial
        .spec
        .template
        .storage
        .iter()
        .map(|v| {
            let mut l = labels.clone();
            l.insert(labels::VOLUME_ROLE.into(), v.role.as_str().into());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(pvc_name(&name, attempt, v.role)),
                    namespace: trial.metadata.namespace.clone(),
                    labels: Some(l),
                    owner_references: trial.controller_owner_ref(&()).map(|o| vec![o]),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: Some(v.storage_class_name.clone()),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(v.size.clone()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: None,
            }
        })
        .collect()
}

/// Assembles the pod around the client's containers.
pub fn pod(
    trial: &ValidatorTrial,
    attempt: i32,
    mut labels: BTreeMap<String, String>,
    init_containers: Vec<Container>,
    containers: Vec<Container>,
    volumes: Vec<Volume>,
    avoid_nodes: &[String],
) -> Pod {
    let name = trial.metadata.name.clone().unwrap_or_default();
    let placement = &trial.spec.template.placement;
    let mut affinity = Affinity::default();
    if placement.exclusive {
        labels.insert(EXCLUSIVE_LABEL.into(), "true".into());
        affinity.pod_anti_affinity = Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(EXCLUSIVE_LABEL.into(), "true".into())])),
                    ..Default::default()
                }),
                // Any namespace: no two valtune trials share a node, whoever runs them.
                namespace_selector: Some(LabelSelector::default()),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }
    if !avoid_nodes.is_empty() {
        affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: "NotIn".into(),
                        values: Some(avoid_nodes.to_vec()),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        });
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&name, attempt)),
            namespace: trial.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references: trial.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            // A trial is one run: a crash or an OOM kill is its result, not a reason to
            // restart and measure something else.
            restart_policy: Some("Never".into()),
            // The process exporter reads the validator's /proc entries.
            share_process_namespace: Some(true),
            enable_service_links: Some(false),
            // Time for a clean shutdown that flushes the ledger.
            termination_grace_period_seconds: Some(120),
            node_selector: (!placement.node_selector.is_empty())
                .then(|| placement.node_selector.clone()),
            tolerations: (!placement.tolerations.is_empty()).then(|| placement.tolerations.clone()),
            affinity: (affinity != Affinity::default()).then_some(affinity),
            init_containers: (!init_containers.is_empty()).then_some(init_containers),
            containers,
            volumes: (!volumes.is_empty()).then_some(volumes),
            ..Default::default()
        }),
        status: None,
    }
}
