//! Agave (anza-xyz/agave): the settings of an Agave trial.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::version::VERSION_PATTERN;

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
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:vX.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
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
    /// JSON RPC port (`--rpc-port`); private to the node (`--private-rpc`), read by the
    /// RPC exporter sidecar.
    #[serde(default = "default_agave_rpc_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub rpc_port: i32,
    /// `--dynamic-port-range` for gossip, TPU, TVU and repair. Agave refuses a range
    /// narrower than its minimum (14 ports in 2.0, 16 in 2.1, 17 in 2.2-2.3, 25 from 3.0:
    /// net-utils `MINIMUM_VALIDATOR_PORT_RANGE_WIDTH`); the default fits every version.
    #[serde(default = "default_agave_port_range")]
    #[schemars(regex(pattern = r"^[0-9]{4,5}-[0-9]{4,5}$"))]
    pub dynamic_port_range: String,
    /// `--full-rpc-api`. On by default: solana-exporter v3.0.2 calls `minimumLedgerSlot`
    /// and `getFirstAvailableBlock` on every scrape, which Agave serves only with it, and
    /// answers HTTP 500 otherwise (docs/clients.md). The RPC stays private to the node.
    #[serde(default = "yes")]
    pub full_rpc_api: bool,
    /// `--only-known-rpc`: download snapshots only from known validators. Off by default:
    /// it often stalls snapshot download when few known validators serve one.
    #[serde(default)]
    pub only_known_rpc: bool,
    /// `RUST_LOG` of the validator. Datapoints are sent only while their module logs at
    /// info, and Agave logs every datapoint it sends at info too; the default keeps the
    /// datapoints and silences that echo.
    #[serde(default = "default_agave_log_filter")]
    #[schemars(length(min = 1, max = 512))]
    pub log_filter: String,
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
    /// Check the node's prerequisites (open files, vm.max_map_count, socket buffers)
    /// before starting, and end the trial NodeNotPrepared naming what is missing.
    #[serde(default = "yes")]
    pub preflight: bool,
    /// The sidecars that carry Agave's metrics to Prometheus, and their ports.
    #[serde(default)]
    pub exporters: AgaveExporters,
}

fn yes() -> bool {
    true
}

fn default_agave_rpc_port() -> i32 {
    8899
}

fn default_agave_port_range() -> String {
    "8000-8030".into()
}

fn default_agave_log_filter() -> String {
    "solana_metrics=warn,info".into()
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

/// The sidecars of an Agave pod (native sidecars, restarted if they exit). With host
/// networking their ports are on the node: keep them clear of Agave's ports.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.rpcPort != self.processPort && self.rpcPort != self.datapointsPort && self.processPort != self.datapointsPort")
    .message("the exporters' ports must differ: change rpcPort, processPort or datapointsPort"))]
pub struct AgaveExporters {
    /// asymmetric-research/solana-exporter: slot lag (getHealth) from JSON RPC.
    #[serde(default = "default_rpc_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub rpc: String,
    #[serde(default = "default_rpc_exporter_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub rpc_port: i32,
    /// ncabatoff/process-exporter: RSS, VSZ and page faults of the validator.
    #[serde(default = "default_process_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub process: String,
    #[serde(default = "default_process_exporter_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub process_port: i32,
    /// VictoriaMetrics vmagent: receives `SOLANA_METRICS_CONFIG` datapoints (every
    /// point, with its own timestamp) and remote-writes them to Prometheus.
    #[serde(default = "default_datapoints_exporter")]
    #[schemars(length(min = 1, max = 512))]
    pub datapoints: String,
    #[serde(default = "default_datapoints_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub datapoints_port: i32,
}

fn default_rpc_exporter() -> String {
    "ghcr.io/asymmetric-research/solana-exporter:v3.0.2".into()
}
fn default_rpc_exporter_port() -> i32 {
    9634
}
fn default_process_exporter() -> String {
    "ncabatoff/process-exporter:0.8.7".into()
}
fn default_process_exporter_port() -> i32 {
    9256
}
fn default_datapoints_exporter() -> String {
    "victoriametrics/vmagent:v1.110.0".into()
}
fn default_datapoints_port() -> i32 {
    8429
}

impl Default for AgaveExporters {
    fn default() -> Self {
        Self {
            rpc: default_rpc_exporter(),
            rpc_port: default_rpc_exporter_port(),
            process: default_process_exporter(),
            process_port: default_process_exporter_port(),
            datapoints: default_datapoints_exporter(),
            datapoints_port: default_datapoints_port(),
        }
    }
}
