//! The lab's simulated bare-metal nodes, from a checked-in topology file, rendered as the
//! Node, PersistentVolume and StorageClass objects a real cluster would have.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use k8s_openapi::api::core::v1::{
    LocalVolumeSource, Node, NodeAddress, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    NodeSpec, NodeStatus, NodeSwapStatus, NodeSystemInfo, PersistentVolume, PersistentVolumeSpec,
    Taint, VolumeNodeAffinity,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use serde::Deserialize;

use crate::allocatable::{Allocatable, Capacity, KubeletConfig, format_bytes, format_cpu};

/// kwok manages nodes carrying this annotation (and only those).
pub const KWOK_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");
/// The label whose value says whether the node's kubelet answers: kwok plays the nodes
/// that carry it with this value (`--manage-nodes-with-label-selector`, a selector the API
/// server applies, so a node whose label changes leaves kwok's watch and kwok lets its
/// Lease and heartbeats go, as a machine cut off the network). A test sets another value
/// to take a node away (`stopped`: its kubelet does not answer and its pods run on;
/// `off`: the machine is off, crate::kubelet::NodeState) and this one to bring it back.
pub const KUBELET_LABEL: (&str, &str) = ("valtune.dev/lab-kubelet", "answers");
/// Label on everything the lab creates, so a second lab's objects are never touched.
pub const LAB_LABEL: &str = "valtune.dev/lab";
/// Fault injection: the JSON-RPC answers of the validators on a node labelled so come
/// this many real seconds late (sim/workloads/serve.rs `slow_rpc`); a test sets and removes it.
pub const SLOW_RPC_LABEL: &str = "valtune.dev/lab-slow-rpc";
pub const STORAGE_CLASS: &str = "local-nvme";
/// The NVIDIA device plugin's extended resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Every lab's ordinary worker, beside the topology's validator machines.
pub const SYSTEM_NODE: &str = "lab-system";
/// The root disk every lab node reports (capacity.ephemeral-storage).
const EPHEMERAL_STORAGE_GI: u128 = 400;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub defaults: NodeClass,
    pub nodes: Vec<NodeEntry>,
    /// The lab's registry: what is inside the images trials may run (a real kubelet pulls
    /// an image and the program in it behaves as it was built; the lab needs to be told).
    #[serde(default)]
    pub images: Vec<ImageEntry>,
}

/// What an image holds, as far as the simulated programs care.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageEntry {
    /// The image reference, as pods name it.
    pub image: String,
    /// Agave: `MAX_LOADED_ENTRY_COUNT` as compiled (program-runtime/src/loaded_programs.rs;
    /// 512 in release builds from 2.1, 256 before).
    #[serde(default)]
    pub program_cache_entries: Option<u32>,
    /// Agave: the CUDA signature-verification libraries next to agave-validator
    /// (`/usr/bin/perf-libs`, scripts/cargo-install-all.sh).
    #[serde(default)]
    pub perf_libs: bool,
}

impl Topology {
    /// What the lab's registry says of an image.
    pub fn image(&self, image: &str) -> Option<&ImageEntry> {
        self.images.iter().find(|i| i.image == image)
    }
}

/// What a node has. Every field may be overridden per node.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeClass {
    pub cpu: Option<u32>,
    pub memory: Option<String>,
    pub hugepages1_gi: Option<u32>,
    pub hugepages2_mi: Option<u32>,
    /// GPUs, advertised as the extended resource `nvidia.com/gpu` (as the NVIDIA device
    /// plugin does).
    pub gpus: Option<u32>,
    pub pods: Option<u32>,
    pub nvme: Option<Vec<String>>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub taints: Option<Vec<TaintEntry>>,
    /// What the machine's kernel and container runtime give a validator (what a preflight
    /// check reads): sysctls and rlimits. Unset: prepared as validators need.
    pub prepared: Option<Prepared>,
    /// The kubelet's reservations (KubeletConfiguration fields): allocatable is the
    /// capacity above less these and the hugepages ([`crate::allocatable`]). Unset: the
    /// kubelet's defaults (nothing reserved, 100Mi and 10% eviction thresholds).
    pub kubelet: Option<KubeletConfig>,
    /// The chain this machine's validators follow has a load that varies over the day
    /// (lab/src/sim/chain_load.rs). Unset: a steady chain, as the seeds' shapes assume.
    pub chain_load: Option<ChainLoad>,
    /// How fast the machine's cores replay the chain, against the machines the seeds
    /// measured on: 0.9 is an older generation doing 90% of their work in the same time
    /// (a heterogeneous pool). A validator's processing capacity is its model's times
    /// this. Unset: 1.
    pub speed: Option<f64>,
}

/// A chain whose load (the work in each block) follows a daily curve plus noise, the
/// same for every validator following it at one moment of simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChainLoad {
    /// The daily curve's amplitude: 0.3 makes the busiest hour 1.3 times the mean.
    pub amplitude: f64,
    /// The standard deviation of the load's noise, drawn per simulated 20 minutes.
    #[serde(default)]
    pub noise: f64,
    /// The noise's seed.
    #[serde(default)]
    pub seed: u64,
}

/// A machine's settings that validators need (Agave: docs/src/operations/setup-a-validator.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Prepared {
    #[serde(default = "million")]
    pub max_map_count: u64,
    #[serde(default = "socket_buffers")]
    pub rmem_max: u64,
    #[serde(default = "socket_buffers")]
    pub wmem_max: u64,
    /// The open files limit containers get (LimitNOFILE of the runtime).
    #[serde(default = "million")]
    pub nofile: u64,
    /// The locked memory limit containers get, in KiB (None: unlimited).
    #[serde(default)]
    pub memlock_kib: Option<u64>,
    /// fs.nr_open and fs.file-max (Firedancer checks both: 1,024,000).
    #[serde(default = "nr_open")]
    pub nr_open: u64,
    #[serde(default = "file_max")]
    pub file_max: u64,
    /// The machine's swap (a quantity; None: none), reported as nodeInfo.swap.capacity.
    #[serde(default)]
    pub swap: Option<String>,
    /// The kubelet's `memorySwap.swapBehavior` (NoSwap or LimitedSwap; None: NoSwap).
    #[serde(default)]
    pub swap_behavior: Option<String>,
    /// Directories the machine mounts as tmpfs without `noswap` (swap can back them).
    #[serde(default)]
    pub tmpfs: Vec<String>,
    /// The kernel's release (`uname -r`). It decides what a pod with its own network
    /// namespace sees of `net.core`: `rmem_max` and `wmem_max` from 6.11 only
    /// ([`Prepared::sysctls`]).
    #[serde(default = "kernel")]
    pub kernel: String,
}

/// Ubuntu 24.04's hardware-enablement kernel (24.04.3), which machines bought for
/// validators now run.
fn kernel() -> String {
    "6.14.0-29-generic".into()
}

/// `MAJOR.MINOR` of a kernel release such as `6.8.0-45-generic`.
fn release(kernel: &str) -> (u32, u32) {
    let mut n = kernel
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (n.next().unwrap_or(0), n.next().unwrap_or(0))
}

fn million() -> u64 {
    1_000_000
}
fn socket_buffers() -> u64 {
    134_217_728
}
fn nr_open() -> u64 {
    1_048_576
}
fn file_max() -> u64 {
    9_223_372_036_854_775_807
}

impl Default for Prepared {
    fn default() -> Self {
        Self {
            max_map_count: million(),
            rmem_max: socket_buffers(),
            wmem_max: socket_buffers(),
            nofile: million(),
            memlock_kib: None,
            nr_open: nr_open(),
            file_max: file_max(),
            swap: None,
            swap_behavior: None,
            tmpfs: Vec::new(),
            kernel: kernel(),
        }
    }
}

impl Prepared {
    /// Whether a network namespace other than the host's has `net.core.rmem_max` and
    /// `wmem_max` (and the defaults): Linux 6.11 made them visible there, read-only,
    /// mirroring the host's (commit 19249c0724f2, "net: make
    /// net.core.{r,w}mem_{default,max} namespaced"); before, `net_core_table` was
    /// registered for init_net only, so the files do not exist in a pod's own network.
    pub fn socket_buffers_in_netns(&self) -> bool {
        release(&self.kernel) >= (6, 11)
    }

    /// The sysctls a process reads under /proc/sys: in the host's network namespace, or
    /// (`host_network` false) in a pod's own.
    pub fn sysctls(&self, host_network: bool) -> Vec<(&'static str, u64)> {
        let buffers = host_network || self.socket_buffers_in_netns();
        [
            ("vm/max_map_count", self.max_map_count),
            ("net/core/rmem_max", self.rmem_max),
            ("net/core/wmem_max", self.wmem_max),
            ("fs/nr_open", self.nr_open),
            ("fs/file-max", self.file_max),
        ]
        .into_iter()
        .filter(|(p, _)| buffers || !p.starts_with("net/core/"))
        .collect()
    }

    /// The value of a sysctl (`net/core/rmem_max`) where a process reads it, if it
    /// exists there.
    pub fn sysctl(&self, path: &str, host_network: bool) -> Option<u64> {
        self.sysctls(host_network)
            .into_iter()
            .find(|(p, _)| *p == path)
            .map(|(_, v)| v)
    }

    /// Writes the sysctls a process reads under /proc/sys into `dir`.
    pub fn write_sysctls(&self, dir: &Path, host_network: bool) -> std::io::Result<()> {
        for (path, value) in self.sysctls(host_network) {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().expect("a parent"))?;
            std::fs::write(file, format!("{value}\n"))?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintEntry {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    pub effect: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub name: String,
    #[serde(flatten)]
    pub overrides: NodeClass,
}

/// A node with its defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct LabNode {
    pub name: String,
    /// CPUs the machine has (capacity).
    pub cpu: u32,
    /// The kernel's MemTotal (capacity.memory): the RAM less what the kernel keeps.
    pub memory: String,
    pub hugepages1_gi: u32,
    pub hugepages2_mi: u32,
    pub gpus: u32,
    pub pods: u32,
    pub nvme: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<TaintEntry>,
    pub prepared: Prepared,
    pub kubelet: KubeletConfig,
    pub chain_load: Option<ChainLoad>,
    /// [`NodeClass::speed`], 1 when unset.
    pub speed: f64,
    /// The node's own InternalIP (set when the lab assigns addresses).
    pub ip: Option<String>,
}

impl Topology {
    pub fn load(path: &Path) -> anyhow::Result<Topology> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading topology {}", path.display()))?;
        let topology: Topology = serde_saphyr::from_str(&text)
            .with_context(|| format!("parsing topology {}", path.display()))?;
        topology.nodes()?;
        Ok(topology)
    }

    /// Every node with the defaults applied; refuses a topology the lab cannot serve.
    pub fn nodes(&self) -> anyhow::Result<Vec<LabNode>> {
        let d = &self.defaults;
        let mut out = Vec::new();
        for n in &self.nodes {
            let o = &n.overrides;
            let mut labels = d.labels.clone();
            labels.extend(o.labels.clone());
            labels.insert("kubernetes.io/hostname".into(), n.name.clone());
            labels.insert("kubernetes.io/os".into(), "linux".into());
            labels.insert("kubernetes.io/arch".into(), "amd64".into());
            labels.insert("type".into(), "kwok".into());
            let node = LabNode {
                name: n.name.clone(),
                cpu: o.cpu.or(d.cpu).unwrap_or(64),
                memory: o
                    .memory
                    .clone()
                    .or(d.memory.clone())
                    .unwrap_or("512Gi".into()),
                hugepages1_gi: o.hugepages1_gi.or(d.hugepages1_gi).unwrap_or(0),
                hugepages2_mi: o.hugepages2_mi.or(d.hugepages2_mi).unwrap_or(0),
                gpus: o.gpus.or(d.gpus).unwrap_or(0),
                pods: o.pods.or(d.pods).unwrap_or(110),
                nvme: o.nvme.clone().or(d.nvme.clone()).unwrap_or_default(),
                labels,
                taints: o.taints.clone().or(d.taints.clone()).unwrap_or_default(),
                prepared: o
                    .prepared
                    .clone()
                    .or(d.prepared.clone())
                    .unwrap_or_default(),
                kubelet: o.kubelet.clone().or(d.kubelet.clone()).unwrap_or_default(),
                chain_load: o.chain_load.or(d.chain_load),
                speed: o.speed.or(d.speed).unwrap_or(1.0),
                ip: None,
            };
            anyhow::ensure!(
                node.speed > 0.0 && node.speed <= 4.0,
                "topology: node {}: speed {} must be above 0 and at most 4",
                node.name,
                node.speed
            );
            anyhow::ensure!(
                !node.name.is_empty() && node.name.len() <= 40,
                "topology: node name {:?} must be 1 to 40 characters",
                node.name
            );
            node.allocatable()
                .with_context(|| format!("topology: node {}", node.name))?;
            out.push(node);
        }
        anyhow::ensure!(!out.is_empty(), "topology: no nodes");
        anyhow::ensure!(
            out.iter().all(|n| n.name != SYSTEM_NODE),
            "topology: {SYSTEM_NODE} is the lab's own system node; name yours differently"
        );
        let mut names: Vec<_> = out.iter().map(|n| &n.name).collect();
        names.sort();
        names.dedup();
        anyhow::ensure!(
            names.len() == out.len(),
            "topology: node names must be unique"
        );
        Ok(out)
    }
}

/// The worker every lab has for cluster add-ons, as a cluster's system pool: the valtune
/// operator's own pod lands here (the validator machines are tainted). No validator
/// labels and no taint, so pods without a node selector may run here too, as on a real
/// cluster; trials select their machines.
pub fn system_node() -> LabNode {
    let labels = BTreeMap::from([
        ("kubernetes.io/hostname".into(), SYSTEM_NODE.into()),
        ("kubernetes.io/os".into(), "linux".into()),
        ("kubernetes.io/arch".into(), "amd64".into()),
        ("node-role.kubernetes.io/system".into(), String::new()),
        ("type".into(), "kwok".into()),
    ]);
    LabNode {
        name: SYSTEM_NODE.into(),
        cpu: 8,
        memory: "32Gi".into(),
        hugepages1_gi: 0,
        hugepages2_mi: 0,
        gpus: 0,
        pods: 110,
        nvme: Vec::new(),
        labels,
        taints: Vec::new(),
        prepared: Prepared::default(),
        kubelet: KubeletConfig::default(),
        chain_load: None,
        speed: 1.0,
        ip: None,
    }
}

impl LabNode {
    /// The machine's swap in bytes, if it has any.
    pub fn swap_bytes(&self) -> Option<u128> {
        self.prepared
            .swap
            .as_deref()
            .and_then(crate::sim::pod_view::parse_bytes)
            .filter(|b| *b > 0)
    }

    /// What the machine has, as its kubelet reports in `status.capacity`.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            cpu_millis: self.cpu as u64 * 1000,
            memory: crate::sim::pod_view::parse_bytes(&self.memory).unwrap_or(0),
            hugepages_1gi: self.hugepages1_gi,
            hugepages_2mi: self.hugepages2_mi,
            ephemeral_storage: EPHEMERAL_STORAGE_GI << 30,
        }
    }

    /// What pods may request, as its kubelet computes `status.allocatable`.
    pub fn allocatable(&self) -> anyhow::Result<Allocatable> {
        anyhow::ensure!(
            crate::sim::pod_view::parse_bytes(&self.memory).is_some(),
            "memory {:?} is not a quantity such as 1512Gi",
            self.memory
        );
        self.kubelet.allocatable(&self.capacity())
    }

    /// `status.capacity` (allocatable: None) or `status.allocatable`.
    fn resources(&self, allocatable: Option<&Allocatable>) -> BTreeMap<String, Quantity> {
        let cap = self.capacity();
        let (cpu, memory, disk) = match allocatable {
            Some(a) => (a.cpu_millis, a.memory, a.ephemeral_storage),
            None => (cap.cpu_millis, cap.memory, cap.ephemeral_storage),
        };
        let mut r = BTreeMap::from([
            ("cpu".into(), Quantity(format_cpu(cpu))),
            ("memory".into(), Quantity(format_bytes(memory))),
            (
                "hugepages-1Gi".into(),
                Quantity(format!("{}Gi", self.hugepages1_gi)),
            ),
            (
                "hugepages-2Mi".into(),
                Quantity(format!("{}Mi", self.hugepages2_mi * 2)),
            ),
            ("pods".into(), Quantity(self.pods.to_string())),
            ("ephemeral-storage".into(), Quantity(format_bytes(disk))),
        ]);
        if self.gpus > 0 {
            r.insert(GPU_RESOURCE.into(), Quantity(self.gpus.to_string()));
        }
        r
    }

    /// The Node object; kwok fills in conditions, addresses and heartbeats.
    pub fn node(&self, lab: &str) -> Node {
        let mut labels = self.labels.clone();
        labels.insert(LAB_LABEL.into(), lab.into());
        labels.insert(KUBELET_LABEL.0.into(), KUBELET_LABEL.1.into());
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    KWOK_ANNOTATION.0.into(),
                    KWOK_ANNOTATION.1.into(),
                )])),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    self.taints
                        .iter()
                        .map(|t| Taint {
                            key: t.key.clone(),
                            value: t.value.clone(),
                            effect: t.effect.clone(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                // kwok keeps addresses it finds, and gives host-network pods the first.
                addresses: self.ip.as_ref().map(|ip| {
                    vec![
                        NodeAddress {
                            type_: "InternalIP".into(),
                            address: ip.clone(),
                        },
                        NodeAddress {
                            type_: "Hostname".into(),
                            address: self.name.clone(),
                        },
                    ]
                }),
                // Checked when the topology was loaded.
                allocatable: Some(self.resources(self.allocatable().ok().as_ref())),
                capacity: Some(self.resources(None)),
                node_info: Some(NodeSystemInfo {
                    architecture: "amd64".into(),
                    operating_system: "linux".into(),
                    kubelet_version: "v1.34.2-kwok".into(),
                    kube_proxy_version: String::new(),
                    container_runtime_version: "kwok".into(),
                    os_image: "valtune lab (simulated bare metal)".into(),
                    // The kubelet reports `uname -r`.
                    kernel_version: self.prepared.kernel.clone(),
                    boot_id: String::new(),
                    machine_id: String::new(),
                    system_uuid: String::new(),
                    // Reported by the kubelet since Kubernetes 1.33 (KEP-2400).
                    swap: self.swap_bytes().map(|b| NodeSwapStatus {
                        capacity: Some(b as i64),
                    }),
                }),
                ..Default::default()
            }),
        }
    }

    /// One local PersistentVolume per NVMe drive, pinned to this node.
    pub fn volumes(&self, lab: &str) -> Vec<PersistentVolume> {
        self.nvme
            .iter()
            .enumerate()
            .map(|(i, size)| PersistentVolume {
                metadata: ObjectMeta {
                    name: Some(format!("{}-nvme{i}", self.name)),
                    labels: Some(BTreeMap::from([
                        (LAB_LABEL.into(), lab.into()),
                        ("valtune.dev/node".into(), self.name.clone()),
                    ])),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeSpec {
                    capacity: Some(BTreeMap::from([("storage".into(), Quantity(size.clone()))])),
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    // Retain, then the lab makes it Available again, as the local static
                    // provisioner does after it wipes the disk.
                    persistent_volume_reclaim_policy: Some("Retain".into()),
                    storage_class_name: Some(STORAGE_CLASS.into()),
                    volume_mode: Some("Filesystem".into()),
                    local: Some(LocalVolumeSource {
                        path: format!("/mnt/nvme{i}"),
                        fs_type: None,
                    }),
                    node_affinity: Some(VolumeNodeAffinity {
                        required: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![NodeSelectorRequirement {
                                    key: "kubernetes.io/hostname".into(),
                                    operator: "In".into(),
                                    values: Some(vec![self.name.clone()]),
                                }]),
                                ..Default::default()
                            }],
                        }),
                    }),
                    ..Default::default()
                }),
                status: None,
            })
            .collect()
    }
}

/// Local NVMe: no provisioner, bound when the first pod is scheduled (so the scheduler
/// picks the node and the volume together). As manifests/prepare/local-nvme.yaml has it
/// (its PersistentVolumes keep their own Retain: the lab plays the provisioner's wipe).
pub fn storage_class(lab: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(STORAGE_CLASS.into()),
            labels: Some(BTreeMap::from([(LAB_LABEL.into(), lab.into())])),
            ..Default::default()
        },
        provisioner: "kubernetes.io/no-provisioner".into(),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    }
}

/// The RuntimeClass the NVIDIA GPU operator creates (handler `nvidia`): GPU pods name it,
/// and the API server refuses a pod naming a RuntimeClass that does not exist.
pub fn gpu_runtime_class(lab: &str) -> RuntimeClass {
    RuntimeClass {
        metadata: ObjectMeta {
            name: Some("nvidia".into()),
            labels: Some(BTreeMap::from([(LAB_LABEL.into(), lab.into())])),
            ..Default::default()
        },
        handler: "nvidia".into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_own_network_has_socket_buffer_limits_from_linux_6_11() {
        let on = |kernel: &str| Prepared {
            kernel: kernel.into(),
            ..Default::default()
        };
        for (kernel, in_netns) in [
            ("6.8.0-45-generic", false),
            ("6.10.14", false),
            ("6.11.0", true),
            ("6.14.0-29-generic", true),
            ("7.0", true),
            ("5.15.0-119-generic", false),
        ] {
            let p = on(kernel);
            assert_eq!(
                p.sysctl("net/core/rmem_max", false).is_some(),
                in_netns,
                "{kernel}"
            );
            // The host's network namespace always has them.
            assert_eq!(p.sysctl("net/core/wmem_max", true), Some(134_217_728));
            assert_eq!(p.sysctl("vm/max_map_count", false), Some(1_000_000));
        }
    }

    #[test]
    fn the_checked_in_topology_meets_the_lab_promises() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("topology.yaml");
        let nodes = Topology::load(&path).unwrap().nodes().unwrap();
        assert!(nodes.len() >= 3);
        for n in &nodes {
            // Every validator machine carries the one label and taint docs/prepare-cluster.md
            // documents, so the examples land on them unpatched.
            assert_eq!(n.labels["valtune.dev/bare-metal"], "true", "{}", n.name);
            assert!(
                n.taints
                    .iter()
                    .any(|t| t.key == "valtune.dev/validator" && t.effect == "NoSchedule"),
                "{}",
                n.name
            );
            assert!(n.kubelet.reserved_cpu_millis().unwrap() > 0, "{}", n.name);
        }
        // The paper's machines; pools of other clients' machines (labelled
        // valtune.dev/lab-pool) are shaped after their own seeds.
        for n in nodes
            .iter()
            .filter(|n| !n.labels.contains_key("valtune.dev/lab-pool"))
        {
            assert!(n.cpu >= 64, "{} has {} CPUs", n.name, n.cpu);
            assert!(n.hugepages1_gi > 0);
            assert!(n.nvme.len() >= 2);
            let node = n.node("t");
            let alloc = node.status.unwrap().allocatable.unwrap();
            assert_eq!(alloc["hugepages-1Gi"].0, format!("{}Gi", n.hugepages1_gi));
            // As on a real r6a.metal: 1.5 TiB cannot be requested, 1400Gi can.
            let memory = n.allocatable().unwrap().memory;
            assert!(memory < 1536 << 30 && memory > 1401 << 30, "{}", n.name);
            assert_eq!(alloc["cpu"].0, "190");
            assert_eq!(n.volumes("t").len(), n.nvme.len());
        }
    }

    #[test]
    fn the_test_topology_has_room_for_parallel_experiments() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("topology-test.yaml");
        let nodes = Topology::load(&path).unwrap().nodes().unwrap();
        assert!(nodes.len() >= 10);
        // Pools of a client's own tests (labelled valtune.dev/lab-pool) may differ.
        let bm: Vec<_> = nodes
            .iter()
            .filter(|n| !n.labels.contains_key("valtune.dev/lab-pool"))
            .collect();
        assert!(bm.iter().all(|n| n.memory == "1512Gi" && n.nvme.len() >= 2));
        // The Firedancer machines offer 62 of their 64 CPUs, as a static CPU manager with
        // one core reserved does.
        let fd = nodes.iter().find(|n| n.name == "fd-01").unwrap();
        assert_eq!(fd.allocatable().unwrap().cpu_millis, 62_000);
    }

    #[test]
    fn capacity_is_the_machine_and_allocatable_what_its_kubelet_leaves() {
        let t: Topology = serde_saphyr::from_str(
            "defaults: {cpu: 16, memory: 63Gi, hugepages1Gi: 4, kubelet: {reservedSystemCPUs: '0,8', systemReserved: {memory: 2Gi}}}\nnodes:\n- name: n1\n",
        )
        .unwrap();
        let n = &t.nodes().unwrap()[0];
        let st = n.node("t").status.unwrap();
        let (cap, alloc) = (st.capacity.unwrap(), st.allocatable.unwrap());
        assert_eq!(cap["cpu"].0, "16");
        assert_eq!(cap["memory"].0, format!("{}Ki", 63u64 << 20));
        assert_eq!(alloc["cpu"].0, "14");
        // 63 - 2 (system) - 4 (hugepages) GiB, less the default 100Mi threshold.
        assert_eq!(
            alloc["memory"].0,
            format!("{}Ki", (57u64 << 20) - 100 * 1024)
        );
        // A topology a kubelet could not start with is refused.
        let bad: Topology = serde_saphyr::from_str(
            "defaults: {cpu: 16, kubelet: {cpuManagerPolicy: static}}\nnodes:\n- name: n1\n",
        )
        .unwrap();
        assert!(bad.nodes().is_err());
    }

    #[test]
    fn node_overrides_win_over_defaults() {
        let t: Topology = serde_saphyr::from_str(
            "defaults: {cpu: 64, memory: 1Ti, labels: {a: one}}\nnodes:\n- name: n1\n  cpu: 128\n  labels: {b: two}\n- name: n2\n",
        )
        .unwrap();
        let nodes = t.nodes().unwrap();
        assert_eq!(nodes[0].cpu, 128);
        assert_eq!(nodes[1].cpu, 64);
        assert_eq!(nodes[0].labels["a"], "one");
        assert_eq!(nodes[0].labels["b"], "two");
    }

    #[test]
    fn the_system_node_is_an_untainted_worker_with_no_validator_labels() {
        let n = system_node();
        assert!(n.taints.is_empty());
        assert!(!n.labels.contains_key("valtune.dev/bare-metal"));
        let t: Topology =
            serde_saphyr::from_str(&format!("defaults: {{}}\nnodes:\n- name: {SYSTEM_NODE}\n"))
                .unwrap();
        assert!(t.nodes().is_err(), "a topology may not take its name");
    }

    #[test]
    fn duplicate_names_are_refused() {
        let t: Topology =
            serde_saphyr::from_str("defaults: {}\nnodes:\n- name: n1\n- name: n1\n").unwrap();
        assert!(t.nodes().is_err());
    }
}
