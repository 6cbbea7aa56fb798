//! Hyperledger Besu: the settings of a trial. How each reaches Besu, and the upstream
//! sources, are in `clients/besu/` and docs/clients/besu.md.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shapes;
use super::version::VERSION_PATTERN;

/// Hyperledger Besu (execution client) beside a consensus client (Teku) in the trial's pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BesuSpec {
    /// e.g. `hyperledger/besu:25.12.0`.
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:X.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// The chain, for Besu's and the consensus client's `--network`.
    #[serde(default)]
    pub network: BesuNetwork,
    /// `--data-storage-format`.
    #[serde(default)]
    pub data_storage_format: BesuStorageFormat,
    /// Bonsai's full flat database (the seed's "flat DB healing"): `--Xbonsai-full-flat-db-enabled`
    /// from 24.5.2 (default true), `--Xsnapsync-synchronizer-flat-db-healing-enabled` from
    /// 23.7.0 to 25.5.x (default false). Unset: the version's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flat_db_healing: Option<bool>,
    /// `--Xplugin-rocksdb-high-spec-enabled`: a 1 GiB RocksDB block cache per column family
    /// instead of 128 MiB (native memory, outside the heap; for machines with more than
    /// 16 GiB).
    #[serde(default)]
    pub rocksdb_high_spec: bool,
    /// The JVM's maximum heap (`-Xmx` in `BESU_OPTS`) when `tuning.heap` (or `sweep.heap`)
    /// does not set it;
    /// unset: the JVM's default (a quarter of the container's memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = shapes::positive_quantity("5Gi"))]
    pub heap: Option<String>,
    /// Garbage-collector options for `BESU_OPTS`, e.g. the seed's G1 tuning
    /// `-XX:G1ConcRefinementThreads=2 -XX:G1HeapWastePercent=15 -XX:MaxGCPauseMillis=100`
    /// (Besu's defaults from 23.10.0 to 25.11.x, no longer from 25.12.0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(
            length(max = 128),
            regex(pattern = r"^-XX:[+-]?[A-Za-z][A-Za-z0-9]*(=[A-Za-z0-9_.,:/%+-]+)?$")
        )
    )]
    pub gc_options: Vec<String>,
    /// `-XX:+ExitOnOutOfMemoryError`: without it the JVM logs an OutOfMemoryError and Besu
    /// keeps running degraded; with it the heap running out ends the trial (Crashed) with
    /// the JVM's message.
    #[serde(default = "yes")]
    pub exit_on_out_of_memory_error: bool,
    /// More `BESU_OPTS`, after valtune's (the JVM takes the last of a repeated option):
    /// options, each starting with `-`, separated by spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    #[x_kube(validation = Rule::new("self.matches('^[ \\t]*(-[^ \\t\\r\\n]+([ \\t]+|$))*$')")
        .message("jvmOptions are JVM options separated by spaces, each starting with - (e.g. -XX:+AlwaysPreTouch -Xss4m): the JVM takes a word without - for the class to run and exits; remove it or add its -"))]
    pub jvm_options: Option<String>,
    /// The library `LD_PRELOAD` loads for `sweep.allocator: tcmalloc` (Ubuntu's
    /// libtcmalloc-minimal4t64); the official image does not have it.
    #[serde(default = "default_tcmalloc")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[A-Za-z0-9_./+-]+$"))]
    pub tcmalloc_library: String,
    /// The library `LD_PRELOAD` loads for `sweep.allocator: mimalloc` (Ubuntu's
    /// libmimalloc2.0); the official image does not have it.
    #[serde(default = "default_mimalloc")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^[A-Za-z0-9_./+-]+$"))]
    pub mimalloc_library: String,
    /// Config file keys (besu.toml, `--config-file`) to TOML values, e.g. `"true"`,
    /// `"512"`, `"\"FULL\""`. A key is an option's long name without `--`; one the
    /// version lacks ends the trial Invalid before its pod is created (Besu would exit).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64), transform = shapes::bounded_values)]
    #[x_kube(
        validation = shapes::config_keys("[A-Za-z0-9][A-Za-z0-9_-]*", "rpc-http-enabled (an option without --)"),
        validation = shapes::one_line_values(),
    )]
    pub config: BTreeMap<String, String>,
    /// `--metrics-port` (served on 0.0.0.0; Besu's default host is loopback-only).
    #[serde(default = "default_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
    /// `--engine-rpc-port`: the Engine API the consensus client drives Besu through.
    #[serde(default = "default_engine_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub engine_port: i32,
    /// `--p2p-port`.
    #[serde(default = "default_p2p_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub p2p_port: i32,
    /// The consensus client beside Besu (a post-Merge chain advances only through one).
    #[serde(default)]
    pub consensus: ConsensusSpec,
    /// The sidecar that carries every block's processing time to Prometheus.
    #[serde(default)]
    pub block_times: BlockTimesSpec,
}

fn yes() -> bool {
    true
}
fn default_tcmalloc() -> String {
    "libtcmalloc_minimal.so.4".into()
}
fn default_mimalloc() -> String {
    "libmimalloc.so.2".into()
}
fn default_metrics_port() -> i32 {
    9545
}
fn default_engine_port() -> i32 {
    8551
}
fn default_p2p_port() -> i32 {
    30303
}

/// The Ethereum networks both Besu and Teku know by name (12-second slots).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum BesuNetwork {
    #[default]
    Mainnet,
    Sepolia,
    /// Besu from 25.3.0, Teku from 25.3.0.
    Hoodi,
    /// Besu from 24.10.0.
    Ephemery,
}

impl BesuNetwork {
    pub fn as_str(self) -> &'static str {
        match self {
            BesuNetwork::Mainnet => "mainnet",
            BesuNetwork::Sepolia => "sepolia",
            BesuNetwork::Hoodi => "hoodi",
            BesuNetwork::Ephemery => "ephemery",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BesuStorageFormat {
    #[default]
    Bonsai,
    Forest,
}

impl BesuStorageFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            BesuStorageFormat::Bonsai => "BONSAI",
            BesuStorageFormat::Forest => "FOREST",
        }
    }
}

/// The consensus client: Teku, sharing a generated JWT secret with Besu and driving it
/// over the Engine API on the pod's loopback.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsensusSpec {
    /// A Teku image: the flags valtune renders for this container are Teku's.
    #[serde(default = "default_teku")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image(), validation = shapes::teku_image())]
    pub image: String,
    /// `--checkpoint-sync-url`: start from a recent finalized state instead of genesis
    /// (without one, Teku syncs the beacon chain from genesis, which takes days on
    /// mainnet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = shapes::http_url("https://beaconstate.info"))]
    pub checkpoint_sync_url: Option<String>,
    /// `--p2p-port`.
    #[serde(default = "default_teku_p2p_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub p2p_port: i32,
    /// Whole cores for Teku (request = limit, so the pod stays Guaranteed).
    #[serde(default = "default_teku_cpu")]
    #[schemars(range(min = 1, max = 64))]
    pub cpu: i32,
    /// Teku's memory (request = limit); its JVM takes a quarter for its heap by default.
    #[serde(default = "default_teku_memory")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = shapes::positive_quantity("8Gi"))]
    pub memory: String,
    /// More Teku arguments, after valtune's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 1024)))]
    pub extra_args: Vec<String>,
}

fn default_teku() -> String {
    "consensys/teku:25.12.0".into()
}
fn default_teku_p2p_port() -> i32 {
    9000
}
fn default_teku_cpu() -> i32 {
    2
}
fn default_teku_memory() -> String {
    "8Gi".into()
}

impl Default for ConsensusSpec {
    fn default() -> Self {
        Self {
            image: default_teku(),
            checkpoint_sync_url: None,
            p2p_port: default_teku_p2p_port(),
            cpu: default_teku_cpu(),
            memory: default_teku_memory(),
            extra_args: Vec::new(),
        }
    }
}

/// vmagent beside Besu: Besu's log posts each block's processing time to it (a log4j2
/// HTTP appender), and it remote-writes every one, with its own timestamp, to Prometheus.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockTimesSpec {
    #[serde(default = "default_vmagent")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    #[serde(default = "default_vmagent_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: i32,
}

fn default_vmagent() -> String {
    super::images::vmagent()
}
fn default_vmagent_port() -> i32 {
    8429
}

impl Default for BlockTimesSpec {
    fn default() -> Self {
        Self {
            image: default_vmagent(),
            port: default_vmagent_port(),
        }
    }
}

impl super::template::ClientSettings for BesuSpec {
    fn config_mut(&mut self) -> Option<&mut BTreeMap<String, String>> {
        Some(&mut self.config)
    }
}
