//! Agave (anza-xyz/agave): the settings of an Agave trial.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shapes;
use super::version::VERSION_PATTERN;

/// Agave (anza-xyz/agave), run as a non-voting validator by default.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.cluster != 'custom' || self.workload == 'bench' || (has(self.entrypoints) && size(self.entrypoints) > 0)")
    .message("cluster custom needs at least one entrypoint: set entrypoints to host:port of a gossip node")
    .field_path(".entrypoints"),
    validation = Rule::new("!has(self.snapshotCache) || self.cluster != 'custom' || has(self.expectedGenesisHash)")
    .message("snapshotCache keeps one directory per cluster, named by its genesis hash, and a custom cluster has none: set expectedGenesisHash")
    .field_path(".snapshotCache"),
    validation = Rule::new("!has(self.snapshotCache) || self.workload != 'bench'")
    .message("snapshotCache is for a follower: the bench workload makes its own genesis and never downloads a snapshot; remove snapshotCache")
    .field_path(".snapshotCache"))]
pub struct AgaveSpec {
    /// Container image with `agave-validator` on its PATH.
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: String,
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:vX.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// What the trial runs: `follow` joins `cluster` as a non-voting validator and replays
    /// its blocks; `bench` makes a private cluster of one (its own genesis) where the
    /// validator is the only leader, and a `solana-bench-tps` sidecar sends it
    /// transactions: block production, where banking threads and TPU signature
    /// verification work (docs/clients/agave.md).
    #[serde(default)]
    pub workload: AgaveWorkload,
    /// The load generator of the `bench` workload.
    #[serde(default)]
    pub bench: AgaveBench,
    /// Where signatures are verified when `tuning.sigverify` (or the sweep) does not say:
    /// `cpu`, or `gpu`
    /// (`--cuda`, with the GPU of `gpu`).
    #[serde(default)]
    pub sigverify: super::sweep::Sigverify,
    /// The GPU of `gpu` signature verification.
    #[serde(default)]
    pub gpu: AgaveGpu,
    /// Which Solana cluster to join. Known clusters fill in entrypoints, known validators
    /// and the genesis hash; `custom` takes them from the fields below.
    #[serde(default)]
    pub cluster: SolanaCluster,
    /// Gossip entrypoints (`--entrypoint`), host:port. Added to the cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 3, max = 253)))]
    #[x_kube(validation = shapes::host_ports("entrypoint", "entrypoint.testnet.solana.com:8001"))]
    pub entrypoints: Vec<String>,
    /// Validators trusted for snapshots (`--known-validator`). Added to the cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 32, max = 44)))]
    #[x_kube(validation = shapes::base58_keys("known validator"))]
    pub known_validators: Vec<String>,
    /// `--expected-genesis-hash`; defaults to the known cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 32, max = 44))]
    #[x_kube(validation = shapes::base58_hash("expectedGenesisHash"))]
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
    #[x_kube(validation = Rule::new("!self.matches('^[0-9]+-[0-9]+$') || int(self.split('-')[1]) <= 65535")
        .message("dynamicPortRange ends above port 65535, the last port there is: lower it, e.g. 8000-8030"))]
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
    /// Keep snapshot archives on the node between trials, so a trial that lands where an
    /// earlier one of the same cluster ran starts from its snapshot instead of
    /// downloading one (docs/clients/agave.md, snapshot reuse). A hostPath: opt-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_cache: Option<AgaveSnapshotCache>,
}

/// A directory on the node that outlives trials: Agave's full and incremental snapshot
/// archive paths (`--full-snapshot-archive-path`, `--incremental-snapshot-archive-path`),
/// one subdirectory per cluster (its genesis hash), so a snapshot of another cluster is
/// never offered. Bank snapshots (`--snapshots`) stay on the trial's own volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgaveSnapshotCache {
    /// The node's directory (a hostPath volume, created if missing), e.g. on its NVMe:
    /// `/var/lib/valtune/snapshots`. The pod mounts `<hostPath>/agave/<genesis hash>`.
    #[schemars(length(min = 2, max = 256))]
    #[x_kube(validation = Rule::new("self.startsWith('/') && !self.contains('..')")
        .message("snapshotCache.hostPath is an absolute path on the node without '..', e.g. /var/lib/valtune/snapshots"))]
    pub host_path: String,
    /// `--maximum-local-snapshot-age`: a local snapshot at most this many slots behind
    /// the cluster's newest is used instead of downloading (validator/src/bootstrap.rs
    /// `should_use_local_snapshot`). Unset keeps Agave's 2,500 slots (about 17 minutes):
    /// raise it to the time between trials on a node; the trial then replays the extra
    /// slots while catching up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10_000_000))]
    pub maximum_local_snapshot_age: Option<i64>,
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

/// What an Agave trial runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum AgaveWorkload {
    #[default]
    Follow,
    Bench,
}

/// `solana-bench-tps` against the trial's validator (bench-tps/src/cli.rs at v2.1.14).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgaveBench {
    /// An image with `solana-bench-tps`; unset uses the validator's image. Agave 3.0
    /// release images no longer ship it (scripts/cargo-install-all.sh at v3.0.14), so a
    /// 3.x bench needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub image: Option<String>,
    /// `--tx-count`: transactions per batch; its accounts (times 8, bench-tps's
    /// `--keypair-multiplier`) are funded in the genesis.
    #[serde(default = "default_bench_tx_count")]
    #[schemars(range(min = 1000, max = 1_000_000))]
    pub tx_count: i32,
    /// `--threads`: sending threads.
    #[serde(default = "default_bench_threads")]
    #[schemars(range(min = 1, max = 64))]
    pub threads: i32,
    /// Whole cores of the bench-tps container: it signs every transaction it sends, so
    /// too few cores make the load generator, not the validator, the limit.
    #[serde(default = "default_bench_cpu")]
    #[schemars(range(min = 1, max = 256))]
    pub cpu: i32,
    /// Memory of the bench-tps container (its accounts' keys and queued batches).
    #[serde(default = "default_bench_memory")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))").message("bench.memory must be a positive quantity such as 16Gi"))]
    pub memory: String,
}

fn default_bench_tx_count() -> i32 {
    10_000
}
fn default_bench_threads() -> i32 {
    4
}
fn default_bench_cpu() -> i32 {
    8
}
fn default_bench_memory() -> String {
    "16Gi".into()
}

impl Default for AgaveBench {
    fn default() -> Self {
        Self {
            image: None,
            tx_count: default_bench_tx_count(),
            threads: default_bench_threads(),
            cpu: default_bench_cpu(),
            memory: default_bench_memory(),
        }
    }
}

/// The GPU of `--cuda` signature verification (perf/src/perf_libs.rs at v2.1.14).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgaveGpu {
    /// GPUs the validator container requests.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 16))]
    pub count: i32,
    /// The extended resource the device plugin advertises.
    #[serde(default = "default_gpu_resource")]
    #[schemars(length(min = 1, max = 253))]
    pub resource: String,
    /// The RuntimeClass that gives the container the GPU driver (the NVIDIA GPU operator
    /// creates `nvidia`); empty uses the node's default runtime.
    #[serde(default = "default_gpu_runtime_class")]
    #[schemars(length(max = 253))]
    pub runtime_class_name: String,
    /// `CUDA_HOME`: agave-validator loads `perf-libs/<basename of CUDA_HOME>/libcuda-crypt.so`
    /// from the directory of its executable (perf-libs v0.19.3 ships cuda-10.0, 10.1 and 10.2).
    #[serde(default = "default_cuda_home")]
    #[schemars(length(min = 1, max = 256))]
    pub cuda_home: String,
    /// A host directory holding perf-libs, mounted where agave-validator looks for them
    /// (`/usr/bin/perf-libs` in the official image) for images built without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^/"))]
    pub perf_libs_host_path: Option<String>,
}

fn one() -> i32 {
    1
}
fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}
fn default_gpu_runtime_class() -> String {
    "nvidia".into()
}
fn default_cuda_home() -> String {
    "/usr/bin/perf-libs/cuda-10.2".into()
}

impl Default for AgaveGpu {
    fn default() -> Self {
        Self {
            count: one(),
            resource: default_gpu_resource(),
            runtime_class_name: default_gpu_runtime_class(),
            cuda_home: default_cuda_home(),
            perf_libs_host_path: None,
        }
    }
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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgramCacheImage {
    /// The program cache capacity compiled into the image.
    #[schemars(range(min = 16, max = 65536))]
    pub entries: i32,
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
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
    #[serde(default = "super::images::solana_exporter")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub rpc: String,
    #[serde(default = "super::images::solana_exporter_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub rpc_port: i32,
    /// ncabatoff/process-exporter: RSS, VSZ and page faults of the validator.
    #[serde(default = "super::images::process_exporter")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub process: String,
    #[serde(default = "super::images::process_exporter_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub process_port: i32,
    /// VictoriaMetrics vmagent: receives `SOLANA_METRICS_CONFIG` datapoints (every
    /// point, with its own timestamp) and remote-writes them to Prometheus.
    #[serde(default = "super::images::vmagent")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = shapes::image())]
    pub datapoints: String,
    #[serde(default = "super::images::vmagent_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub datapoints_port: i32,
}

impl Default for AgaveExporters {
    fn default() -> Self {
        Self {
            rpc: super::images::solana_exporter(),
            rpc_port: super::images::solana_exporter_port(),
            process: super::images::process_exporter(),
            process_port: super::images::process_exporter_port(),
            datapoints: super::images::vmagent(),
            datapoints_port: super::images::vmagent_port(),
        }
    }
}

/// Agave has no config file.
impl super::template::ClientSettings for AgaveSpec {}
