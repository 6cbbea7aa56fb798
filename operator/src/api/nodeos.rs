//! Antelope nodeos (AntelopeIO/leap 5.x, AntelopeIO/spring 1.x; e.g. a WAX node): the
//! settings of a trial. Every option below is cited in docs/clients/nodeos.md.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shapes;
use super::version::VERSION_PATTERN;

/// Antelope nodeos (e.g. a WAX node), following its chain from a snapshot or genesis.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.snapshot) || !has(self.genesisJson)")
    .message("nodeos refuses --snapshot with --genesis-json ('--snapshot is incompatible with --genesis-json as the snapshot contains genesis information'): set one of snapshot or genesisJson")
    .field_path(".genesisJson"))]
pub struct NodeosSpec {
    /// Container image with `nodeos` on its PATH (e.g. `waxteam/waxnode:v5.0.3wax02`).
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    /// The leap (5.x) or spring (1.x) version; read from the image tag (`:vX.Y.Z`) when
    /// unset. Leap 4 and older are refused (docs/clients/nodeos.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// `--chain-state-db-size-mb`: the state file's size (sparse; it must hold the chain's
    /// state, about 32 GiB for WAX in 2021).
    #[serde(default = "default_nodeos_state_size")]
    #[schemars(range(min = 256, max = 8_388_608))]
    pub chain_state_db_size_mb: i64,
    /// `--database-map-mode` unless `tuning.databaseMapMode` (or the sweep) sets it; `heap`
    /// and `locked` use hugepages when the
    /// pod has enough for the whole state (`template.resources.hugepages1Gi`).
    #[serde(default)]
    pub database_map_mode: NodeosMapMode,
    /// Where the state directory lives.
    #[serde(default)]
    pub state: NodeosState,
    /// Start from a snapshot (`--snapshot`), the usual way to join a long chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<NodeosSnapshot>,
    /// Start from this genesis instead (`--genesis-json`), for a chain short enough to
    /// replay from its first block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 65536))]
    pub genesis_json: Option<String>,
    /// Peers to sync from (`--p2p-peer-address`, host:port, optionally `:trx` or `:blk`).
    /// nodeos has no chain-id option: the chain is the snapshot's (or the genesis'), and
    /// peers of another chain are refused at their handshake.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 3, max = 253)))]
    #[x_kube(validation = Rule::new(format!("self.all(e, {})", shapes::cel_host_port("e", "(:(trx|blk))?")))
        .message("each peer must be host:port[:trx|:blk] as --p2p-peer-address takes it (AntelopeIO/spring plugins/net_plugin/net_plugin.cpp at v1.2.2): a hostname or an IPv4 address (or [IPv6]), a colon and a port from 1 to 65535, e.g. peer.wax.alohaeos.com:9876: fix the entry"))]
    pub peers: Vec<String>,
    /// Ask for swap: the pod becomes Burstable and runs only on nodes labelled
    /// `valtune.dev/swap: LimitedSwap` (the kubelet with NodeSwap and
    /// `memorySwap.swapBehavior: LimitedSwap` on cgroup v2). The kubelet gives the
    /// container `request / node memory x node swap` of swap, so
    /// `template.resources.memory` (the request) sizes it and `memoryLimit` is the RAM.
    #[serde(default)]
    pub swap: bool,
    /// Let nodeos lock its state in memory (`databaseMapMode: locked` mlocks it): adds
    /// the IPC_LOCK capability to the nodeos container. Off unless asked for.
    #[serde(default)]
    pub allow_memory_lock: bool,
    /// The memory hog that `tuning.memoryPressure` (or `sweep.memoryPressure`) runs beside
    /// nodeos.
    #[serde(default)]
    pub memory_hog: NodeosMemoryHog,
    /// The sidecars that carry nodeos' figures to Prometheus, and their ports.
    #[serde(default)]
    pub exporters: NodeosExporters,
    /// config.ini keys (nodeos' option names) to values. A key the version lacks ends the
    /// trial Invalid before its pod is created (nodeos would exit 'Unknown option').
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64), transform = shapes::bounded_values)]
    #[x_kube(
        validation = Rule::new("self.all(k, k.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))")
            .message("a config.ini key is a nodeos option name such as max-transaction-time (no leading --): fix the key"),
        validation = shapes::one_line_values(),
    )]
    pub config: BTreeMap<String, String>,
    /// HTTP port (`--http-server-address 0.0.0.0:<port>`); the chain API and the
    /// prometheus_plugin (`/v1/prometheus/metrics`) serve on it.
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

/// How chainbase maps the state: the typed setting `databaseMapMode` (api/tuning.rs).
pub use super::tuning::DatabaseMapMode as NodeosMapMode;

/// Where the state directory (`<data-dir>/state`, `--state-dir`) lives.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.medium != 'hostTmpfs' || (has(self.hostPath) && self.hostPath.startsWith('/'))")
    .message("state.medium hostTmpfs needs hostPath: the absolute path of the tmpfs the node mounts for nodeos (docs/clients/nodeos.md)")
    .field_path(".hostPath"))]
pub struct NodeosState {
    #[serde(default)]
    pub medium: StateMedium,
    /// For `hostTmpfs`: where the node mounts its tmpfs (without `noswap`), e.g.
    /// `/srv/nodeos-state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 256))]
    pub host_path: Option<String>,
}

impl Default for NodeosState {
    fn default() -> Self {
        Self {
            medium: StateMedium::Disk,
            host_path: None,
        }
    }
}

/// The medium of the state directory.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum StateMedium {
    /// On the data volume, or on a volume of its own (`template.storage` role `state`).
    #[default]
    Disk,
    /// A memory-backed emptyDir (tmpfs) sized for the state: counted in the pod's memory
    /// limit and never swapped (the kubelet mounts it `noswap` since Kubernetes 1.30).
    Memory,
    /// A tmpfs the node's admin mounted at `hostPath` without `noswap`, so swap backs it
    /// (the seed's set-up); only nodes labelled `valtune.dev/nodeos-state-tmpfs: "true"`.
    HostTmpfs,
}

/// Where the snapshot comes from: exactly one of url or hostPath.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.url) != has(self.hostPath)")
    .message("set exactly one of snapshot.url (downloaded before nodeos starts) or snapshot.hostPath (a file on the node)"))]
pub struct NodeosSnapshot {
    /// An uncompressed snapshot (`.bin`) to download onto the data volume first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 8, max = 1024))]
    #[x_kube(validation = shapes::http_url("https://snapshots.example.com/wax/snapshot.bin (an uncompressed snapshot file)"))]
    pub url: Option<String>,
    /// A snapshot file already on the node (mounted read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 1024), regex(pattern = r"^/.*[^/]$"))]
    pub host_path: Option<String>,
    /// The image that downloads `url` (it runs `curl`).
    #[serde(default = "default_fetch_image")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub fetch_image: String,
}

fn default_fetch_image() -> String {
    "curlimages/curl:8.11.1".into()
}

/// The hog `tuning.memoryPressure` runs in the pod: stress-ng holding the value's bytes
/// (`--vm 1 --vm-bytes N --vm-keep`, rewriting them so they stay resident).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeosMemoryHog {
    /// An image with stress-ng and a POSIX shell. The default is the stress-ng project's
    /// own image of release V0.22.00 (tagged by its commit): pin it by digest on a real
    /// cluster.
    #[serde(default = "default_hog_image")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    /// Start the hog once nodeos has caught up with the chain (the seed's procedure: a
    /// node in sync, then the hog), rather than with the pod.
    #[serde(default = "yes")]
    pub after_catch_up: bool,
}

fn default_hog_image() -> String {
    "ghcr.io/colinianking/stress-ng:6c2ab8831bca51f17d97538d106996ca411c4c79".into()
}

fn yes() -> bool {
    true
}

impl Default for NodeosMemoryHog {
    fn default() -> Self {
        Self {
            image: default_hog_image(),
            after_catch_up: true,
        }
    }
}

/// The metric sidecars of a nodeos pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeosExporters {
    /// Runs valtune's chain exporter (a Python script, standard library only): head block
    /// time and number from `/v1/chain/get_info`, and the state's swap.
    #[serde(default = "default_python_image")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub chain: String,
    #[serde(default = "default_chain_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub chain_port: i32,
    /// RSS, faults and disk writes of the nodeos process.
    #[serde(default = "default_process_image")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub process: String,
    #[serde(default = "default_process_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub process_port: i32,
}

fn default_python_image() -> String {
    "python:3.13-alpine".into()
}
fn default_chain_port() -> i32 {
    9108
}
fn default_process_image() -> String {
    super::images::process_exporter()
}
fn default_process_port() -> i32 {
    9256
}

impl Default for NodeosExporters {
    fn default() -> Self {
        Self {
            chain: default_python_image(),
            chain_port: default_chain_port(),
            process: default_process_image(),
            process_port: default_process_port(),
        }
    }
}

impl super::template::ClientSettings for NodeosSpec {
    fn config_mut(&mut self) -> Option<&mut BTreeMap<String, String>> {
        Some(&mut self.config)
    }
}
