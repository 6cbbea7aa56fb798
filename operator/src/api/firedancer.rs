//! Firedancer and Frankendancer (firedancer-io/firedancer): the settings of a trial.
//! What each field becomes in the TOML config and the pod, with the upstream sources, is
//! in docs/clients/firedancer.md.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::agave::SolanaCluster;
use super::shapes;
use super::version::VERSION_PATTERN;

/// Frankendancer (`fdctl run`, or `fddev bench` for the leader benchmark) or full
/// Firedancer (`firedancer run`, or `firedancer-dev bench`), from a TOML config valtune
/// writes for each trial.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.cluster != 'custom' || self.workload == 'bench' || (has(self.entrypoints) && size(self.entrypoints) > 0)")
        .message("cluster custom needs at least one entrypoint: set entrypoints to host:port of a gossip node")
        .field_path(".entrypoints"),
    validation = Rule::new("self.exporters.rpcPort != self.exporters.datapointsPort && !(self.exporters.rpcPort in [self.rpcPort, self.rpcPort + 1, self.metricsPort]) && !(self.exporters.datapointsPort in [self.rpcPort, self.rpcPort + 1, self.metricsPort]) && self.metricsPort != self.rpcPort && self.metricsPort != self.rpcPort + 1")
        .message("the metrics, RPC (and its websocket, rpcPort + 1) and exporter ports share the node's network: make metricsPort, rpcPort, exporters.rpcPort and exporters.datapointsPort differ")
        .field_path(".exporters"),
    validation = Rule::new("self.flavor != 'firedancer' || !has(self.entrypoints) || self.entrypoints.all(e, !e.startsWith('['))")
        .message("full Firedancer resolves [gossip] entrypoints to IPv4 addresses only (src/app/firedancer/topology.c resolve_addresses, AF_INET, at v1.1.4): use a hostname or an IPv4 address")
        .field_path(".entrypoints"),
    validation = Rule::new("!has(self.snapshotCache) || self.workload != 'bench'")
        .message("snapshotCache is for a follower: the bench makes its own genesis and never downloads a snapshot; remove snapshotCache")
        .field_path(".snapshotCache"),
    validation = Rule::new("!has(self.snapshotCache) || self.cluster != 'custom' || has(self.expectedGenesisHash)")
        .message("snapshotCache keeps one directory per cluster, named by its genesis hash, and a custom cluster has none: set expectedGenesisHash")
        .field_path(".snapshotCache"),
    validation = Rule::new("!has(self.snapshotCache) || self.flavor == 'firedancer' || (!has(self.snapshotCache.maxLocalFullEffectiveAge) && !has(self.snapshotCache.maxLocalIncrementalAge))")
        .message("Frankendancer has no key for how old a local snapshot may be (fdctl passes no --maximum-local-snapshot-age to its Agave, src/app/fdctl/commands/run_agave.c @v0.1106.40201, so Agave's 2,500 slots apply): remove snapshotCache.maxLocalFullEffectiveAge and maxLocalIncrementalAge, or use flavor: firedancer")
        .field_path(".snapshotCache"),
    validation = Rule::new("!has(self.snapshotCache) || !has(self.config) || self.config.all(k, !(k in ['snapshots.path', 'snapshots.incremental_path', 'paths.snapshots', 'snapshots.sources.max_local_full_effective_age', 'snapshots.sources.max_local_incremental_age']))")
        .message("with snapshotCache valtune writes the snapshot directory and the local snapshot's ages: remove these keys from config and set snapshotCache.maxLocalFullEffectiveAge / maxLocalIncrementalAge instead")
        .field_path(".config"),
)]
pub struct FiredancerSpec {
    /// An image with `fdctl` (and `fddev` for the bench workload), or for full Firedancer
    /// `firedancer` (and `firedancer-dev`), a POSIX shell with `sed`, and the non-root
    /// `user` (upstream publishes no image; docs say how to build one).
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    /// The client version (`0.1106.40201`); read from the image tag (`:v0.1106.40201`)
    /// when unset. Config keys, tile names and metric names depend on it, so it must be known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// `frankendancer` (Firedancer tiles around an Agave child, v0.x releases) or
    /// `firedancer` (full Firedancer, v1.0.0 and later, no Agave inside).
    #[serde(default)]
    pub flavor: FiredancerFlavor,
    /// `follow`: `fdctl run` (`firedancer run`) joins `cluster`; Frankendancer is measured
    /// like Agave, full Firedancer from its own replay and repair metrics (slot lag, TPS).
    /// `bench`: `fddev bench` (`firedancer-dev bench`), a local single-node cluster under
    /// generated load (seed 003).
    #[serde(default)]
    pub workload: FiredancerWorkload,
    /// Which Solana cluster a follower joins (ignored by the bench).
    #[serde(default)]
    pub cluster: SolanaCluster,
    /// `[gossip] entrypoints`, host:port; added to the cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 3, max = 253)))]
    #[x_kube(validation = shapes::host_ports("entrypoint", "entrypoint.testnet.solana.com:8001"))]
    pub entrypoints: Vec<String>,
    /// `[consensus] known_validators`; added to the cluster's own (Frankendancer only:
    /// full Firedancer has no such key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 32, max = 44)))]
    #[x_kube(validation = shapes::base58_keys("known validator"))]
    pub known_validators: Vec<String>,
    /// `[consensus] expected_genesis_hash`; defaults to the known cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 32, max = 44))]
    #[x_kube(validation = shapes::base58_hash("expectedGenesisHash"))]
    pub expected_genesis_hash: Option<String>,
    /// `[net] provider`: `socket` runs in the pod's network (from v0.501); `xdp` attaches
    /// to the node's interface and needs `privileged: true` (the pod then uses the node's
    /// network).
    #[serde(default)]
    pub net_provider: FiredancerNetProvider,
    /// Tile counts of every trial (`[layout] *_tile_count`); a tuned count
    /// (`tuning.threads`, or `sweep.threads`) replaces its entry. Unset counts keep fdctl's
    /// defaults.
    #[serde(default)]
    pub layout: FiredancerLayout,
    /// `[development.bench]` and `[development.genesis]` of the bench workload.
    #[serde(default)]
    pub bench: FiredancerBench,
    /// Run the validator container privileged (all capabilities, no AppArmor or seccomp
    /// confinement, /proc/sys and /sys writable). Needed for XDP and by a follower: each
    /// tile's sandbox writes /proc/sys/user/max_*_namespaces, which the kubelet mounts
    /// read-only otherwise, and a live cluster refuses the sandbox off. An explicit opt-in.
    #[serde(default)]
    pub privileged: bool,
    /// Capabilities added to the validator container, an explicit opt-in: `fdctl run`
    /// checks NET_RAW and SYS_ADMIN even with the socket provider, SYS_ADMIN also mounts
    /// hugetlbfs, and SYS_RESOURCE raises the memlock, nofile and nice limits
    /// (shared/commands/run/run.c `run_cmd_perm`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d == c))").message("each capability may appear once: remove the repeated one"))]
    pub capabilities: Vec<Capability>,
    /// `user` in the config: the non-root user of the image Firedancer drops to (it
    /// refuses root: shared/fd_config.c).
    #[serde(default = "default_user")]
    #[schemars(length(min = 1, max = 32), regex(pattern = r"^[a-z_][a-z0-9_-]*$"))]
    #[x_kube(validation = Rule::new("self != 'root'").message("Firedancer refuses to run as root ('firedancer cannot run as root'): name a non-root user of the image"))]
    pub user: String,
    /// `[tiles.gui] enabled`: the GUI adds two tiles (plugin, gui) and its default port 80
    /// needs CAP_NET_BIND_SERVICE; valtune turns it off unless asked, and then serves it
    /// on 127.0.0.1:`guiPort` (kubectl port-forward).
    #[serde(default)]
    pub gui: bool,
    #[serde(default = "default_gui_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub gui_port: i32,
    /// `[rpc] port` of a Frankendancer follower, private to the node, read by the RPC
    /// exporter; full Firedancer's `[tiles.rpc] rpc_listen_port` (127.0.0.1).
    #[serde(default = "default_rpc_port")]
    #[schemars(range(min = 1024, max = 65534))]
    pub rpc_port: i32,
    /// More config keys (dotted TOML paths such as `rpc.transaction_history`) to TOML
    /// values (`30`, `true`, `"text"`; other text is written as a string). Keys valtune
    /// sets from the fields above are refused; a key the version's config lacks ends the
    /// trial Invalid before its pod is created (fdctl would exit at start).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64), transform = shapes::bounded_values)]
    #[x_kube(
        validation = shapes::config_keys("[a-z0-9_]+", "rpc.transaction_history"),
        validation = shapes::one_line_values(),
    )]
    pub config: BTreeMap<String, String>,
    /// `[tiles.metric] prometheus_listen_port` (valtune listens on 0.0.0.0 so Prometheus
    /// can scrape it; fdctl's default is 127.0.0.1).
    #[serde(default = "default_firedancer_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
    /// Check the node's kernel settings fdctl needs before starting, and end the trial
    /// NodeNotPrepared naming what is missing.
    #[serde(default = "yes")]
    pub preflight: bool,
    /// The sidecars that carry a follower's slot lag and TPS to Prometheus.
    #[serde(default)]
    pub exporters: FiredancerExporters,
    /// Keep a follower's snapshot archives on the node between trials, so a trial that
    /// lands where an earlier one of the same cluster ran can start from them instead of
    /// downloading (docs/clients/firedancer.md, snapshot reuse). A hostPath: opt-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_cache: Option<FiredancerSnapshotCache>,
}

/// A directory on the node that outlives trials, one subdirectory per flavor and cluster
/// (its genesis hash): Frankendancer's `[snapshots] path` and `incremental_path` (its
/// Agave's archives), full Firedancer's `[paths] snapshots`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerSnapshotCache {
    /// The node's directory (a hostPath volume, created if missing), e.g. on its NVMe:
    /// `/var/lib/valtune/snapshots`. The pod mounts
    /// `<hostPath>/<frankendancer|firedancer>/<genesis hash>`.
    #[schemars(length(min = 2, max = 256))]
    #[x_kube(validation = Rule::new("self.startsWith('/') && !self.contains('..')")
        .message("snapshotCache.hostPath is an absolute path on the node without '..', e.g. /var/lib/valtune/snapshots"))]
    pub host_path: String,
    /// Full Firedancer only: `[snapshots.sources] max_local_full_effective_age` (default
    /// 1,000 slots), how far behind the cluster the local full snapshot's effective slot
    /// (the incremental it would be used with) may be. Raise it, with
    /// `maxLocalIncrementalAge`, to the slots between trials on a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10_000_000))]
    pub max_local_full_effective_age: Option<i64>,
    /// Full Firedancer only: `[snapshots.sources] max_local_incremental_age` (default 50
    /// slots), how far behind the cluster the local incremental snapshot may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10_000_000))]
    pub max_local_incremental_age: Option<i64>,
}

fn default_firedancer_metrics_port() -> i32 {
    7999
}
fn default_user() -> String {
    "firedancer".into()
}
fn default_gui_port() -> i32 {
    8080
}
fn default_rpc_port() -> i32 {
    8899
}
fn yes() -> bool {
    true
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
pub enum FiredancerWorkload {
    #[default]
    Follow,
    Bench,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum FiredancerNetProvider {
    Xdp,
    #[default]
    Socket,
}

/// A Linux capability, as a container's `securityContext.capabilities.add` names it.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Capability {
    NetRaw,
    SysAdmin,
    SysResource,
    SysNice,
    NetAdmin,
    NetBindService,
    IpcLock,
    Bpf,
    Perfmon,
    Setuid,
    Setgid,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::NetRaw => "NET_RAW",
            Capability::SysAdmin => "SYS_ADMIN",
            Capability::SysResource => "SYS_RESOURCE",
            Capability::SysNice => "SYS_NICE",
            Capability::NetAdmin => "NET_ADMIN",
            Capability::NetBindService => "NET_BIND_SERVICE",
            Capability::IpcLock => "IPC_LOCK",
            Capability::Bpf => "BPF",
            Capability::Perfmon => "PERFMON",
            Capability::Setuid => "SETUID",
            Capability::Setgid => "SETGID",
        }
    }
}

/// Tile counts (`[layout] *_tile_count`); unset keeps the version's default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerLayout {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub net_tiles: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub quic_tiles: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub verify_tiles: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub bank_tiles: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub shred_tiles: Option<i32>,
    /// `resolv_tile_count` before v0.901, `resolh_tile_count` from v0.901 (Frankendancer);
    /// `resolv_tile_count` in full Firedancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub resolv_tiles: Option<i32>,
    /// Full Firedancer only: `execrp_tile_count`, the tiles that replay other leaders'
    /// blocks (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub exec_tiles: Option<i32>,
    /// Full Firedancer only: `gossvf_tile_count`, gossip signature verification (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub gossvf_tiles: Option<i32>,
    /// Full Firedancer only: `sign_tile_count`, at least 2 (default 2; `layout.sign_tile_count
    /// must be >= 2`, src/app/shared/fd_config.c).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 16))]
    pub sign_tiles: Option<i32>,
}

/// The load generator of `fddev bench` (`[development.bench]`, `[development.genesis]`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerBench {
    /// `benchg_tile_count`: tiles that generate and sign transactions (one core each).
    #[serde(default = "default_benchg")]
    #[schemars(range(min = 1, max = 64))]
    pub benchg_tiles: i32,
    /// `benchs_tile_count`: tiles that send them over QUIC (one core each).
    #[serde(default = "default_benchs")]
    #[schemars(range(min = 1, max = 16))]
    pub benchs_tiles: i32,
    /// `[development.genesis] fund_initial_accounts` (fdctl's default 1024; the seed
    /// uses 32768 so more transfers run in parallel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10_000_000))]
    pub fund_initial_accounts: Option<i64>,
    /// `larger_max_cost_per_block`: lift the consensus block limits that hold the
    /// benchmark near 81,000 TPS.
    #[serde(default)]
    pub larger_max_cost_per_block: bool,
    /// `larger_shred_limits_per_block`.
    #[serde(default)]
    pub larger_shred_limits_per_block: bool,
}

fn default_benchg() -> i32 {
    4
}
fn default_benchs() -> i32 {
    2
}

impl Default for FiredancerBench {
    fn default() -> Self {
        Self {
            benchg_tiles: default_benchg(),
            benchs_tiles: default_benchs(),
            fund_initial_accounts: None,
            larger_max_cost_per_block: false,
            larger_shred_limits_per_block: false,
        }
    }
}

/// The sidecars of a follower (native sidecars, restarted if they exit). The pod uses
/// the node's network, so their ports are on the node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerExporters {
    /// asymmetric-research/solana-exporter: slot lag (getHealth) from the Agave RPC.
    #[serde(default = "super::images::solana_exporter")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub rpc: String,
    #[serde(default = "super::images::solana_exporter_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub rpc_port: i32,
    /// VictoriaMetrics vmagent: receives the Agave child's datapoints (`[reporting]
    /// solana_metrics_config`) and remote-writes every point to Prometheus.
    #[serde(default = "super::images::vmagent")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub datapoints: String,
    #[serde(default = "super::images::vmagent_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub datapoints_port: i32,
}

impl Default for FiredancerExporters {
    fn default() -> Self {
        Self {
            rpc: super::images::solana_exporter(),
            rpc_port: super::images::solana_exporter_port(),
            datapoints: super::images::vmagent(),
            datapoints_port: super::images::vmagent_port(),
        }
    }
}

impl super::template::ClientSettings for FiredancerSpec {
    fn config_mut(&mut self) -> Option<&mut BTreeMap<String, String>> {
        Some(&mut self.config)
    }
}
