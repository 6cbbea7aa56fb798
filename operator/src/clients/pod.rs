//! The parts of a validator's pod every client shares: labels and ownership, Guaranteed
//! QoS with whole cores, hugepages as hugetlbfs, one local NVMe volume per role (for one
//! attempt, a generic ephemeral volume, so it lives and goes with the attempt's pod; for
//! a long-running validator, a claim of its own that outlives every pod), placement
//! (selector, tolerations, one valtune pod per node, the validator's node) and what the
//! pod's [`Lifecycle`] decides; plus the pod-level [`Tweaks`] a client may ask for.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, EmptyDirVolumeSource, EphemeralVolumeSource, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimTemplate, PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm,
    PodAntiAffinity, PodSecurityContext, PodSpec, ResourceRequirements, Secret, Toleration, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::ObjectMeta;

use super::input::{Lifecycle, RenderInput};
use super::{ClientPod, RenderError, Rendered, ValidatorClient};
use crate::api::labels;
use crate::api::template::VolumeSpec;

/// On every exclusive pod; the anti-affinity keeps two of them off one node.
pub const EXCLUSIVE_LABEL: &str = "valtune.dev/exclusive";

/// The init container a client may add to check the node's prerequisites: when it fails,
/// the trial ends NodeNotPrepared with what it printed.
pub const PREFLIGHT_CONTAINER: &str = "preflight";

/// The head of a preflight script (`sh -c`), shared by the clients that check the node:
/// `val PATH` reads a kernel setting under /proc/sys (`SYSCTL_DIR` overrides it; empty
/// where this namespace has none), and `need NAME HAVE WANT` notes in `$missing` a value
/// below WANT or one that cannot be read, with the reason. `net.core.rmem_max` and
/// `wmem_max` exist outside the host's network namespace only from Linux 6.11 (commit
/// 19249c0724f2, "net: make net.core.{r,w}mem_{default,max} namespaced"): in a pod with
/// its own network (`host_network` false) an older kernel has no such files, which the
/// message says with the node's `uname -r`.
pub fn preflight_head(host_network: bool) -> String {
    let netns = if host_network {
        ""
    } else {
        "\n    net.core.*) why=\"not in the pod's own network namespace, where Linux shows it from 6.11 (kernel commit 19249c0724f2); this node runs $(uname -r): use nodes with Linux 6.11 or later\";;"
    };
    format!(
        r#"set -u
sys=${{SYSCTL_DIR:-/proc/sys}}
missing=""
val() {{ cat "$sys/$1" 2>/dev/null; }}
need() {{ # need NAME HAVE WANT
  case "$2" in
  "") case "$1" in{netns}
    *) why="no such kernel setting in /proc/sys on $(uname -r)";;
    esac
    missing="$missing $1 is missing ($why);";;
  unlimited) ;;
  *[!0-9]*) missing="$missing $1 is $2 (not a number; needs $3);";;
  *) if [ "$2" -lt "$3" ]; then missing="$missing $1 is $2 (needs $3);"; fi;;
  esac
}}
"#
    )
}

/// The pod of a trial's attempt (see [`Lifecycle::pod_name`]).
pub fn pod_name(trial: &str, attempt: i32) -> String {
    format!("{trial}-{attempt}")
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

/// Pod-level settings a client may ask of the skeleton.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tweaks {
    /// Run in the node's network namespace (the client's ports must be reachable from
    /// the cluster it joins), with cluster DNS still resolving.
    pub host_network: bool,
    /// Let sidecars see the validator's processes (a process exporter reads /proc).
    pub share_process_namespace: bool,
    /// e.g. `nvidia` for GPU pods.
    pub runtime_class_name: Option<String>,
    /// Pod-level requests and limits (Kubernetes 1.34 beta `PodLevelResources`): a
    /// memory budget the containers share, e.g. a validator and a memory hog.
    pub pod_resources: Option<ResourceRequirements>,
    /// Node labels the pod needs beyond the template's selector (a prepared node).
    pub node_selector: BTreeMap<String, String>,
    /// The pod's security context (e.g. the user its images run as, and `fsGroup` so that
    /// user owns its volumes).
    pub security_context: Option<PodSecurityContext>,
    /// Tolerations beyond the placement's (e.g. of the taint GPU nodes carry).
    pub tolerations: Vec<Toleration>,
}

/// A Secret of random bytes the operator creates when it does not exist yet, and never
/// changes (e.g. the JWT secret an execution and a consensus client share). Its value is
/// not part of the rendering, which stays pure; the operator fills it in when it creates
/// the Secret.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedSecret {
    pub metadata: ObjectMeta,
    /// The key whose value is the random bytes, hex-encoded.
    pub key: String,
    pub bytes: usize,
}

impl GeneratedSecret {
    /// The Secret, holding `random` (at least `bytes` long) hex-encoded under its key.
    pub fn secret(&self, random: &[u8]) -> Secret {
        let hex: String = random
            .iter()
            .take(self.bytes)
            .map(|b| format!("{b:02x}"))
            .collect();
        Secret {
            metadata: self.metadata.clone(),
            string_data: Some(BTreeMap::from([(self.key.clone(), hex)])),
            type_: Some("Opaque".into()),
            ..Default::default()
        }
    }
}

/// What the skeleton gives a client to render on.
#[derive(Debug, Clone)]
pub struct Skeleton {
    pub pod_name: String,
    pub labels: BTreeMap<String, String>,
    /// CPU, memory and hugepages of the validator container (requests = limits).
    pub validator_resources: ResourceRequirements,
    /// The template's volumes and hugetlbfs mounts, at the client's paths.
    pub mounts: Vec<VolumeMount>,
    pub volumes: Vec<Volume>,
    /// Claims the operator creates beside the pod (a long-running validator's state).
    pub claims: Vec<PersistentVolumeClaim>,
}

impl Skeleton {
    /// Metadata for an object that goes with the pod (a ConfigMap), owned as it is.
    pub fn meta(&self, input: &RenderInput, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: input.owner.namespace.clone(),
            labels: Some(self.labels.clone()),
            owner_references: owned_by(input),
            ..Default::default()
        }
    }
}

fn owned_by(input: &RenderInput) -> Option<Vec<OwnerReference>> {
    input.owner.reference.clone().map(|o| vec![o])
}

/// The claim of a long-running validator's volume of `role`.
pub fn claim_name(owner: &str, role: &str) -> String {
    format!("{owner}-{role}")
}

/// A volume of the template's storage, claimed as the lifecycle needs, and the claim the
/// operator creates for it if the pod does not make its own.
fn storage_volume(
    input: &RenderInput,
    v: &VolumeSpec,
    pod_labels: &BTreeMap<String, String>,
) -> (Volume, Option<PersistentVolumeClaim>) {
    let role = v.role.as_str().to_string();
    let mut claim_labels = pod_labels.clone();
    claim_labels.insert(labels::VOLUME_ROLE.into(), role.clone());
    let claim = PersistentVolumeClaimSpec {
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
    };
    match &input.lifecycle {
        // The claim is `<pod>-<volume>`, created by the ephemeral volume controller with
        // the pod, bound where the scheduler puts the pod (WaitForFirstConsumer), and
        // deleted with the pod: the attempt's local disks come and go with it.
        Lifecycle::OneAttempt { .. } => (
            Volume {
                name: role,
                ephemeral: Some(EphemeralVolumeSource {
                    volume_claim_template: Some(PersistentVolumeClaimTemplate {
                        metadata: Some(ObjectMeta {
                            labels: Some(claim_labels),
                            ..Default::default()
                        }),
                        spec: claim,
                    }),
                }),
                ..Default::default()
            },
            None,
        ),
        // A claim by name, bound on the validator's node at its first pod (the local
        // volume's WaitForFirstConsumer) and kept through restarts and upgrades. Nothing
        // owns it: like a StatefulSet's claims, the ledger stays when the Validator is
        // deleted, until someone deletes the claim.
        Lifecycle::LongRunning { .. } => {
            let name = claim_name(&input.owner.name, &role);
            let volume = Volume {
                name: role,
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: name.clone(),
                    read_only: None,
                }),
                ..Default::default()
            };
            let pvc = PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: input.owner.namespace.clone(),
                    labels: Some(claim_labels),
                    ..Default::default()
                },
                spec: Some(claim),
                status: None,
            };
            (volume, Some(pvc))
        }
    }
}

/// The skeleton of the pod. Pure.
pub fn skeleton(
    input: &RenderInput,
    client: &dyn ValidatorClient,
) -> Result<Skeleton, RenderError> {
    let t = &input.template;
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
    let mut labels = input.owner.labels.clone();
    labels.extend([
        (labels::CLIENT.to_string(), client.name().to_string()),
        ("app.kubernetes.io/name".into(), client.name().into()),
    ]);
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let mut claims = Vec::new();
    let huge = client.hugetlbfs_path();
    for (resource, pages, medium, dir) in [
        (
            "hugepages-1Gi",
            t.resources.hugepages1_gi.map(|n| format!("{n}Gi")),
            "HugePages-1Gi",
            ".gigantic",
        ),
        (
            "hugepages-2Mi",
            t.resources.hugepages2_mi.map(|n| format!("{}Mi", n * 2)),
            "HugePages-2Mi",
            ".huge",
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
            mount_path: format!("{huge}/{dir}"),
            ..Default::default()
        });
    }
    for v in &t.storage {
        let (volume, claim) = storage_volume(input, v, &labels);
        volumes.push(volume);
        claims.extend(claim);
        mounts.push(VolumeMount {
            name: v.role.as_str().into(),
            mount_path: client.mount_path(v.role),
            ..Default::default()
        });
    }
    Ok(Skeleton {
        pod_name: input.lifecycle.pod_name(&input.owner.name),
        labels,
        validator_resources: ResourceRequirements {
            requests: Some(requests),
            limits: Some(limits),
            ..Default::default()
        },
        mounts,
        volumes,
        claims,
    })
}

/// The pod around the client's part. Pure.
pub fn assemble(input: &RenderInput, skeleton: Skeleton, part: ClientPod) -> Rendered {
    let placement = &input.template.placement;
    let avoid_nodes = input.lifecycle.avoid_nodes();
    let mut labels = skeleton.labels.clone();
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
    // Placement on nodes by hostname: away from the nodes earlier attempts lost, or onto
    // the validator's node. Through the scheduler, not `spec.nodeName`: a pod bound by
    // name skips it, and a WaitForFirstConsumer claim (local NVMe) is only bound by the
    // scheduler, so such a pod would wait for its volumes forever.
    let by_hostname = match input.lifecycle.node() {
        Some(node) => Some(("In", vec![node.to_string()])),
        None => (!avoid_nodes.is_empty()).then(|| ("NotIn", avoid_nodes.to_vec())),
    };
    if let Some((operator, values)) = by_hostname {
        affinity.node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: operator.into(),
                        values: Some(values),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        });
    }
    let tweaks = part.tweaks;
    let mut node_selector = placement.node_selector.clone();
    node_selector.extend(tweaks.node_selector.clone());
    let mut volumes = skeleton.volumes;
    volumes.extend(part.volumes);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(skeleton.pod_name.clone()),
            namespace: input.owner.namespace.clone(),
            labels: Some(labels),
            owner_references: owned_by(input),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(input.lifecycle.restart_policy().into()),
            share_process_namespace: tweaks.share_process_namespace.then_some(true),
            host_network: tweaks.host_network.then_some(true),
            // With the node's network, cluster names still resolve through cluster DNS.
            dns_policy: tweaks
                .host_network
                .then(|| "ClusterFirstWithHostNet".to_string()),
            runtime_class_name: tweaks.runtime_class_name,
            security_context: tweaks.security_context,
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(input.lifecycle.grace_period_seconds()),
            node_selector: (!node_selector.is_empty()).then_some(node_selector),
            resources: tweaks.pod_resources,
            tolerations: {
                let mut all = placement.tolerations.clone();
                all.extend(tweaks.tolerations.iter().cloned());
                (!all.is_empty()).then_some(all)
            },
            affinity: (affinity != Affinity::default()).then_some(affinity),
            init_containers: (!part.init_containers.is_empty()).then_some(part.init_containers),
            containers: part.containers,
            volumes: (!volumes.is_empty()).then_some(volumes),
            ..Default::default()
        }),
        status: None,
    };
    Rendered {
        pod,
        config_maps: part.config_maps,
        secrets: Vec::new(),
        claims: skeleton.claims,
    }
}

/// A ConfigMap of the pod holding files, named after the pod.
pub fn config_map(
    input: &RenderInput,
    skeleton: &Skeleton,
    suffix: &str,
    files: BTreeMap<String, String>,
) -> ConfigMap {
    ConfigMap {
        metadata: skeleton.meta(input, format!("{}-{suffix}", skeleton.pod_name)),
        data: Some(files),
        ..Default::default()
    }
}

#[cfg(test)]
mod preflight_tests {
    use super::preflight_head;

    /// What `$missing` holds after `checks`, against a /proc/sys holding `files`, on a
    /// kernel `uname -r` calls `release`.
    fn missing(host_network: bool, files: &[(&str, &str)], checks: &str) -> String {
        let dir = std::env::temp_dir().join(format!(
            "valtune-preflight-{}-{}",
            std::process::id(),
            checks.len() + files.len() * 100 + usize::from(host_network) * 10_000
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, value) in files {
            let f = dir.join(path);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, format!("{value}\n")).unwrap();
        }
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!(
            "uname() {{ echo 6.8.0-45-generic; }}\n{}{checks}\necho \"$missing\"",
            preflight_head(host_network)
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .env("SYSCTL_DIR", &dir)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    const RMEM: &str = r#"need net.core.rmem_max "$(val net/core/rmem_max)" 134217728"#;

    #[test]
    fn a_value_below_the_minimum_is_named_with_both_numbers() {
        assert_eq!(
            missing(true, &[("net/core/rmem_max", "212992")], RMEM),
            "net.core.rmem_max is 212992 (needs 134217728);"
        );
        assert_eq!(
            missing(true, &[("net/core/rmem_max", "134217728")], RMEM),
            ""
        );
        assert_eq!(missing(true, &[], r#"need nofile unlimited 1000000"#), "");
    }

    #[test]
    fn a_missing_value_fails_with_the_reason() {
        // `[ "" -lt N ]` is false: before, a missing file passed.
        let own = missing(false, &[], RMEM);
        assert!(
            own.starts_with("net.core.rmem_max is missing (not in the pod's own network namespace, where Linux shows it from 6.11 (kernel commit 19249c0724f2); this node runs 6.8.0-45-generic"),
            "{own}"
        );
        let host = missing(true, &[], RMEM);
        assert_eq!(
            host,
            "net.core.rmem_max is missing (no such kernel setting in /proc/sys on 6.8.0-45-generic);"
        );
        assert_eq!(
            missing(
                true,
                &[("vm/max_map_count", "lots")],
                r#"need vm.max_map_count "$(val vm/max_map_count)" 1000000"#
            ),
            "vm.max_map_count is lots (not a number; needs 1000000);"
        );
    }
}
