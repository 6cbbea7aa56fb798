//! The validator template: which client runs, with what resources, on which volumes and
//! nodes. Experiments hold one as the base of every trial; a trial holds a resolved copy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Toleration};
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A client, a Kubernetes-style image reference and its settings. Exactly one client is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(
        "[has(self.agave), has(self.firedancer), has(self.besu), has(self.nodeos)].filter(x, x).size() == 1"
    ).message("set exactly one client: agave, firedancer, besu or nodeos"),
    validation = Rule::new("!has(self.agave) || (has(self.storage) && self.storage.exists(v, v.role == 'ledger'))")
        .message("Agave needs a ledger volume (--ledger): add {role: ledger, size: 2Ti} to storage")
        .field_path(".storage"),
)]
pub struct ValidatorTemplate {
    /// The validator client and its client-specific settings.
    #[serde(flatten)]
    pub client: ClientSpec,
    /// CPU, memory and hugepages for the validator container.
    #[serde(default)]
    pub resources: Resources,
    /// Volumes by role. Each becomes a PersistentVolumeClaim on local NVMe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.all(v, self.exists_one(w, w.role == v.role))")
        .message("each volume role may appear once; merge the duplicate entries"))]
    pub storage: Vec<VolumeSpec>,
    /// Which nodes may run the validator.
    #[serde(default)]
    pub placement: Placement,
    /// Extra environment variables of the validator container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env: Vec<EnvVar>,
    /// Extra arguments of the validator, appended after the rendered ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 1024)))]
    pub extra_args: Vec<String>,
}

/// The tagged union of clients, flattened into the template so a manifest reads
/// `template: {agave: {...}}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClientSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agave: Option<AgaveSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firedancer: Option<FiredancerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub besu: Option<BesuSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodeos: Option<NodeosSpec>,
}

/// Which client a template runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    Agave,
    Firedancer,
    Besu,
    Nodeos,
}

impl ClientKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientKind::Agave => "agave",
            ClientKind::Firedancer => "firedancer",
            ClientKind::Besu => "besu",
            ClientKind::Nodeos => "nodeos",
        }
    }
}

impl ClientSpec {
    /// The client that is set. The schema guarantees exactly one; an object that slipped
    /// past it (e.g. written before the CRD was installed) yields None.
    pub fn kind(&self) -> Option<ClientKind> {
        match (&self.agave, &self.firedancer, &self.besu, &self.nodeos) {
            (Some(_), None, None, None) => Some(ClientKind::Agave),
            (None, Some(_), None, None) => Some(ClientKind::Firedancer),
            (None, None, Some(_), None) => Some(ClientKind::Besu),
            (None, None, None, Some(_)) => Some(ClientKind::Nodeos),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Agave
// ---------------------------------------------------------------------------------------

/// Agave (anza-xyz/agave), run as a non-voting validator by default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.cluster != 'custom' || (has(self.entrypoints) && size(self.entrypoints) > 0)")
    .message("cluster custom needs at least one entrypoint: set entrypoints to host:port of a gossip node")
    .field_path(".entrypoints"))]
pub struct AgaveSpec {
    /// Container image with `agave-validator` on its PATH.
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// Which Solana cluster to join. Known clusters fill in entrypoints, known validators
    /// and the genesis hash; `custom` takes them from the fields below.
    #[serde(default)]
    pub cluster: SolanaCluster,
    /// Gossip entrypoints (`--entrypoint`), host:port. Added to the cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 3, max = 253)))]
    pub entrypoints: Vec<String>,
    /// Validators trusted for snapshots (`--known-validator`). Added to the cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 32, max = 44)))]
    pub known_validators: Vec<String>,
    /// `--expected-genesis-hash`; defaults to the known cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 32, max = 44))]
    pub expected_genesis_hash: Option<String>,
    /// JSON RPC port (`--rpc-port`); the RPC exporter sidecar reads TPS and slot lag here.
    #[serde(default = "default_agave_rpc_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub rpc_port: i32,
    /// `--dynamic-port-range` for gossip, TPU and repair.
    #[serde(default = "default_agave_port_range")]
    #[schemars(regex(pattern = r"^[0-9]{4,5}-[0-9]{4,5}$"))]
    pub dynamic_port_range: String,
    /// `--limit-ledger-size` in shreds; unset keeps Agave's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 50_000_000))]
    pub limit_ledger_size: Option<i64>,
    /// Agave's program cache size is the compile-time constant `MAX_LOADED_ENTRY_COUNT`
    /// (program-runtime/src/loaded_programs.rs), so sweeping it needs one image per value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.all(i, self.exists_one(j, j.entries == i.entries))")
        .message("each entries value may appear once; keep one image per program cache size"))]
    pub program_cache_images: Vec<ProgramCacheImage>,
    /// Sidecar images that turn Agave's RPC and process counters into Prometheus metrics.
    #[serde(default)]
    pub exporters: AgaveExporters,
}

fn default_agave_rpc_port() -> i32 {
    8899
}

fn default_agave_port_range() -> String {
    "8000-8020".into()
}

/// A Solana cluster agave-validator knows how to join.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SolanaCluster {
    #[default]
    MainnetBeta,
    Testnet,
    Devnet,
    Custom,
}

/// An image built with a given `MAX_LOADED_ENTRY_COUNT`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgramCacheImage {
    /// The program cache capacity compiled into the image.
    #[schemars(range(min = 16, max = 65536))]
    pub entries: i32,
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
}

/// Sidecars that expose an Agave pod's metrics to Prometheus. Agave itself pushes InfluxDB
/// line protocol and serves JSON RPC; these translate both (see docs/clients.md).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgaveExporters {
    /// asymmetric-research/solana-exporter: TPS and slot lag from JSON RPC, port 8080.
    #[serde(default = "default_rpc_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub rpc: String,
    /// ncabatoff/process-exporter: RSS, VSZ and page faults of the validator, port 9256.
    #[serde(default = "default_process_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub process: String,
    /// prom/influxdb-exporter: receives `SOLANA_METRICS_CONFIG` datapoints (program cache
    /// stats, replay timings), port 9122.
    #[serde(default = "default_influxdb_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub influxdb: String,
}

fn default_rpc_exporter() -> String {
    "ghcr.io/asymmetric-research/solana-exporter:v3.0.2".into()
}
fn default_process_exporter() -> String {
    "ncabatoff/process-exporter:0.8.7".into()
}
fn default_influxdb_exporter() -> String {
    "prom/influxdb-exporter:v0.12.1".into()
}

impl Default for AgaveExporters {
    fn default() -> Self {
        Self {
            rpc: default_rpc_exporter(),
            process: default_process_exporter(),
            influxdb: default_influxdb_exporter(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Firedancer / Frankendancer
// ---------------------------------------------------------------------------------------

/// Firedancer or Frankendancer, run by `fdctl run --config` (or `firedancer run`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// Frankendancer executes inside an Agave child process; full Firedancer does not.
    #[serde(default)]
    pub flavor: FiredancerFlavor,
    /// Which Solana cluster to join.
    #[serde(default)]
    pub cluster: SolanaCluster,
    /// `[net] provider`: `xdp` needs hostNetwork and CAP_NET_RAW; `socket` runs in a pod network.
    #[serde(default)]
    pub net_provider: FiredancerNetProvider,
    /// Config keys (dotted TOML paths such as `layout.verify_tile_count`) to TOML values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// `[tiles.metric] prometheus_listen_port`.
    #[serde(default = "default_firedancer_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
}

fn default_firedancer_metrics_port() -> i32 {
    7999
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum FiredancerFlavor {
    #[default]
    Frankendancer,
    Firedancer,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum FiredancerNetProvider {
    Xdp,
    #[default]
    Socket,
}

// ---------------------------------------------------------------------------------------
// Besu
// ---------------------------------------------------------------------------------------

/// Hyperledger Besu (execution client).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BesuSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// `--network`.
    #[serde(default = "default_besu_network")]
    #[schemars(length(min = 1, max = 64))]
    pub network: String,
    /// `--data-storage-format`.
    #[serde(default)]
    pub data_storage_format: BesuStorageFormat,
    /// `BESU_OPTS`, e.g. `-Xmx8g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub jvm_options: Option<String>,
    /// Config file keys (besu.toml) to TOML values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// `--metrics-port` (served on 0.0.0.0; Besu's default host is loopback-only).
    #[serde(default = "default_besu_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
}

fn default_besu_network() -> String {
    "mainnet".into()
}
fn default_besu_metrics_port() -> i32 {
    9545
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BesuStorageFormat {
    #[default]
    Bonsai,
    Forest,
}

// ---------------------------------------------------------------------------------------
// Antelope nodeos
// ---------------------------------------------------------------------------------------

/// Antelope nodeos (e.g. a WAX node).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeosSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// `--chain-state-db-size-mb`.
    #[serde(default = "default_nodeos_state_size")]
    #[schemars(range(min = 256))]
    pub chain_state_db_size_mb: i64,
    /// `--database-map-mode`; `heap` and `locked` use hugepages when the pod has them.
    #[serde(default)]
    pub database_map_mode: NodeosMapMode,
    /// config.ini keys to values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// HTTP port; the prometheus_plugin serves `/v1/prometheus/metrics` on it.
    #[serde(default = "default_nodeos_http_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub http_port: i32,
}

fn default_nodeos_state_size() -> i64 {
    1024
}
fn default_nodeos_http_port() -> i32 {
    8888
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum NodeosMapMode {
    #[default]
    Mapped,
    MappedPrivate,
    Heap,
    Locked,
}

// ---------------------------------------------------------------------------------------
// Resources, storage, placement
// ---------------------------------------------------------------------------------------

/// Validator container resources. CPU is whole cores and requests equal limits, so the pod
/// is Guaranteed QoS and the kubelet's static CPU manager pins its cores.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "!has(self.memoryLimit) || !has(self.memory) || !isQuantity(self.memory) || !isQuantity(self.memoryLimit) || quantity(self.memoryLimit).compareTo(quantity(self.memory)) >= 0"
).message("memoryLimit is below memory (the request): raise memoryLimit or remove it to use memory as the limit")
 .field_path(".memoryLimit"))]
pub struct Resources {
    /// Whole CPU cores (request = limit).
    #[serde(default = "default_cpu")]
    #[schemars(range(min = 1, max = 1024))]
    pub cpu: i32,
    /// Memory request, and limit unless memoryLimit is set. Swept memory overrides both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self)").message("must be a quantity such as 512Gi or 1Ti"))]
    pub memory: Option<String>,
    /// Memory limit when it should differ from the request (the pod is then Burstable and
    /// loses CPU pinning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self)").message("must be a quantity such as 512Gi or 1Ti"))]
    pub memory_limit: Option<String>,
    /// 1 GiB hugepages (`hugepages-1Gi`), mounted as hugetlbfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 4096))]
    pub hugepages1_gi: Option<i32>,
    /// 2 MiB hugepages (`hugepages-2Mi`), mounted as hugetlbfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1048576))]
    pub hugepages2_mi: Option<i32>,
}

fn default_cpu() -> i32 {
    32
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            cpu: default_cpu(),
            memory: None,
            memory_limit: None,
            hugepages1_gi: None,
            hugepages2_mi: None,
        }
    }
}

/// A volume for one role of the client's data, claimed on local NVMe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    pub role: VolumeRole,
    /// Requested size.
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("must be a positive quantity such as 2Ti"))]
    pub size: String,
    /// StorageClass of the claim; local PVs with `WaitForFirstConsumer` binding.
    #[serde(default = "default_storage_class")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: String,
}

fn default_storage_class() -> String {
    "local-nvme".into()
}

/// What a volume holds. Each client mounts the roles it uses (docs/clients.md).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum VolumeRole {
    Ledger,
    Accounts,
    Snapshots,
    AccountsIndex,
    Data,
    State,
}

impl VolumeRole {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeRole::Ledger => "ledger",
            VolumeRole::Accounts => "accounts",
            VolumeRole::Snapshots => "snapshots",
            VolumeRole::AccountsIndex => "accounts-index",
            VolumeRole::Data => "data",
            VolumeRole::State => "state",
        }
    }
}

/// Where validators run: bare-metal nodes chosen by labels and taints.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node labels a node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub node_selector: BTreeMap<String, String>,
    /// Taints to tolerate (bare-metal validator nodes are usually tainted NoSchedule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tolerations: Vec<Toleration>,
    /// At most one valtune pod per node at a time (no noisy neighbours).
    #[serde(default = "default_true")]
    pub exclusive: bool,
}

fn default_true() -> bool {
    true
}

impl Default for Placement {
    fn default() -> Self {
        Self {
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            exclusive: true,
        }
    }
}
