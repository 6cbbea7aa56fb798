//! agave-validator as the lab plays it: recognised by its command, started with the args
//! and env of its container, exiting as the real one does on a flag its version lacks or
//! a bad setting, and then serving JSON-RPC on its RPC port, pushing InfluxDB datapoints
//! to `SOLANA_METRICS_CONFIG`, and showing its /proc entries, from the [`model`] of its
//! memory behaviour. Facts are from anza-xyz/agave at the versions cited (the notes of
//! docs/lab.md list them).

pub mod agent;
pub mod exit;
pub mod identity;
pub mod leader;
pub mod model;
pub mod program_cache;
pub mod signer;
pub mod snapshots;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::{
    Datapoint, Env, Exit, MetricsSink, ProcFigures, Process, Rpc, SimClient, Started, flag_values,
    image_version, seed,
};
use crate::sim::chain_load::solana;
use crate::sim::clock::Clock;
use crate::sim::pod_view::PodView;
use leader::LeaderModel;
use model::{AgaveModel, HEALTH_SLOT_DISTANCE, SLOTS_PER_SECOND};
use program_cache::ProgramCache;

pub struct AgaveSim;

const PROCESS: &str = "agave-validator";

/// (major, minor, patch) of a version, comparable.
type V = (u32, u32, u32);

/// `MINIMUM_VALIDATOR_PORT_RANGE_WIDTH` of net-utils: 14 in 2.0, 16 in 2.1, 17 in 2.2
/// and 2.3, 25 from 3.0.
fn min_port_range_width(v: V) -> u16 {
    match v {
        (0..=1, _, _) | (2, 0, _) => 14,
        (2, 1, _) => 16,
        (2, _, _) => 17,
        _ => 25,
    }
}

/// Methods JSON-RPC serves without `--full-rpc-api` (rpc/src/rpc.rs `rpc_minimal`).
const MINIMAL_RPC: &[&str] = &[
    "getBalance",
    "getEpochInfo",
    "getGenesisHash",
    "getHealth",
    "getIdentity",
    "getSlot",
    "getBlockHeight",
    "getHighestSnapshotSlot",
    "getTransactionCount",
    "getVersion",
    "getVoteAccounts",
    "getLeaderSchedule",
];

/// Some methods of the full API (`rpc_full`, `rpc_bank`, ...) the lab answers.
const FULL_RPC: &[&str] = &[
    "minimumLedgerSlot",
    "getFirstAvailableBlock",
    "getBlockProduction",
];

/// The image tag's version; an untagged image is taken to be the newest release.
fn version_of(image: &str) -> V {
    image_version(image).unwrap_or((4, 0, 3))
}

fn clap_unknown(flag: &str) -> String {
    // clap 2.33 (every version), exit code 1.
    format!(
        "error: Found argument '{flag}' which wasn't expected, or isn't valid in this context\n\nUSAGE:\n    agave-validator [FLAGS] [OPTIONS] --ledger <DIR>\n\nFor more information try --help"
    )
}

fn exit_now(message: String) -> Started {
    Started::Exited(Exit {
        at: 0.0,
        reason: "Error",
        code: 1,
        message,
    })
}

/// Reads `SOLANA_METRICS_CONFIG` as metrics/src/metrics.rs does: `host=..,db=..,u=..,p=..`,
/// all four non-empty, or the validator does not start.
fn metrics_sink(value: &str) -> Result<Option<MetricsSink>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let (mut host, mut db, mut user, mut password) = (None, None, None, None);
    for pair in value.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("SOLANA_METRICS_CONFIG is invalid: '{pair}'"));
        };
        match k {
            "host" => host = Some(v.to_string()),
            "db" => db = Some(v.to_string()),
            "u" => user = Some(v.to_string()),
            "p" => password = Some(v.to_string()),
            _ => return Err(format!("SOLANA_METRICS_CONFIG is invalid: '{pair}'")),
        }
    }
    match (host, db, user, password) {
        (Some(host), Some(db), Some(user), Some(password))
            if !host.is_empty() && !db.is_empty() && !user.is_empty() && !password.is_empty() =>
        {
            Ok(Some(MetricsSink {
                host,
                db,
                user,
                password,
            }))
        }
        _ => Err("SOLANA_METRICS_CONFIG is incomplete".into()),
    }
}

/// What `--cuda` needs (perf/src/perf_libs.rs init_cuda and perf/src/sigverify.rs init
/// at v2.1.14): perf-libs next to agave-validator (in the image, or mounted there), the
/// library of `CUDA_HOME`'s name, and a GPU; otherwise the validator exits.
fn cuda(pod: &PodView, container: &Container, env: &Env) -> Result<(), Started> {
    const PERF_LIBS: &str = "/usr/bin/perf-libs";
    let mounted = container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == PERF_LIBS);
    let in_image = pod.image(container).is_some_and(|i| i.perf_libs);
    let unable = |why: &str| {
        exit_now(format!(
            "Unable to load \"libcuda-crypt.so\": {why}\nthread 'main' panicked: perf-libs not found"
        ))
    };
    if !mounted && !in_image {
        return Err(unable(&format!("{PERF_LIBS} does not exist")));
    }
    // perf-libs v0.19.3 ships a library per CUDA version it was built for.
    let home = env.get("CUDA_HOME").map(String::as_str).unwrap_or("");
    let name = home.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if !["cuda-10.0", "cuda-10.1", "cuda-10.2"].contains(&name) {
        return Err(unable(&format!(
            "{PERF_LIBS}/{name}/libcuda-crypt.so: cannot open shared object file: No such file or directory"
        )));
    }
    let gpus = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get(crate::topology::GPU_RESOURCE))
        .and_then(|q| q.0.parse::<u32>().ok())
        .unwrap_or(0);
    if gpus == 0 {
        // ed25519_init() finds no device; Rust's default panic exit code.
        return Err(Started::Exited(Exit {
            at: 0.0,
            reason: "Error",
            code: 101,
            message: "thread 'main' panicked at perf/src/sigverify.rs: ed25519_init() failed"
                .into(),
        }));
    }
    Ok(())
}

/// Banking workers: `--block-production-num-workers` from 3.0 (default 4), before that
/// `SOLANA_BANKING_THREADS` less the two vote threads (default 6, at least 3; an
/// unparsable value is the default: core/src/banking_stage.rs).
fn banking_workers(args: &[String], env: &Env, version: V) -> u32 {
    if version >= (3, 0, 0) {
        return flag_values(args, "--block-production-num-workers")
            .first()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4);
    }
    let total: u32 = env
        .get("SOLANA_BANKING_THREADS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
        .max(3);
    total - 2
}

/// The sending threads of the pod's solana-bench-tps, if it runs one (0 otherwise).
fn bench_senders(pod: &PodView) -> u32 {
    let spec = pod.pod.spec.as_ref();
    let containers = spec.into_iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    });
    for c in containers {
        let words: Vec<String> = pod
            .command_line(c)
            .iter()
            .flat_map(|a| a.split_whitespace().map(String::from).collect::<Vec<_>>())
            .collect();
        let Some(at) = words.iter().position(|w| w.ends_with("solana-bench-tps")) else {
            continue;
        };
        let rest = &words[at..];
        if rest.iter().any(|w| w == "--write-client-keys") {
            continue;
        }
        return flag_values(rest, "--threads")
            .first()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4);
    }
    0
}

impl SimClient for AgaveSim {
    fn name(&self) -> &'static str {
        "agave"
    }

    /// `agave-validator [--ledger DIR] exit --force` (exit.rs); no other.
    fn pre_stop(&self, command: &[String], hook: super::Hook) -> Option<super::Hooked> {
        let cmd = exit::parse(command)?;
        Some(Box::pin(async move {
            exit::run(&cmd, &hook.view, &hook.container, &hook.proc_dir).await
        }))
    }

    fn recognise<'a>(&self, pod: &'a Pod) -> Option<&'a Container> {
        pod.spec.as_ref()?.containers.iter().find(|c| {
            c.command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .next()
                .is_some_and(|a| a.rsplit('/').next() == Some(PROCESS))
        })
    }

    fn start(&self, pod: &PodView, container: &Container, env: &Env, clock: &Clock) -> Started {
        let line = pod.command_line(container);
        let args = &line[1..];
        let version = version_of(container.image.as_deref().unwrap_or(""));
        // Flags whose presence depends on the version (upstream-keys, as the operator's).
        for (flag, since, before, _) in upstream_keys::agave::VERSIONED_FLAGS {
            let present = args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")));
            let exists = upstream_keys::in_range((since, before), version);
            if present && !exists {
                return exit_now(clap_unknown(flag));
            }
        }
        if let Some(range) = flag_values(args, "--dynamic-port-range").first() {
            let parsed = range
                .split_once('-')
                .and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)))
                .filter(|(a, b)| a < b);
            let Some((lo, hi)) = parsed else {
                return exit_now("error: Invalid value for '--dynamic-port-range <MIN_PORT-MAX_PORT>': Invalid port range".into());
            };
            let min = min_port_range_width(version);
            if hi - lo < min {
                return exit_now(format!(
                    "Port range is too small.  Try --dynamic-port-range {lo}-{}",
                    lo + min
                ));
            }
        }
        // Behind a pod's SNAT the cluster cannot reach the validator's ports, and the
        // start-up port check exits (net-utils verify_reachable_ports).
        // Only a validator with an entrypoint checks (validator/src/bootstrap.rs): the
        // leader of a cluster of its own has nobody to ask.
        let host_network = pod.pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let joins = !flag_values(args, "--entrypoint").is_empty();
        if joins && !host_network && !args.iter().any(|a| a == "--no-port-check") {
            let gossip = flag_values(args, "--dynamic-port-range")
                .first()
                .and_then(|r| r.split('-').next())
                .unwrap_or("8000")
                .to_string();
            return exit_now(format!(
                "Received no response at tcp/{gossip}, check your port configuration: timed out waiting on channel"
            ));
        }
        let sink = match metrics_sink(
            env.get("SOLANA_METRICS_CONFIG")
                .map(String::as_str)
                .unwrap_or(""),
        ) {
            Ok(s) => s,
            Err(e) => return exit_now(e),
        };
        // The agent reads its budget when the first point is submitted, at start.
        let agent_budget = match agent::budget(
            env.get("SOLANA_METRICS_MAX_POINTS_PER_SECOND")
                .map(String::as_str),
        ) {
            Ok(b) => b,
            Err(e) => return exit_now(e),
        };
        let gpu = args.iter().any(|a| a == "--cuda");
        if gpu && let Err(exit) = cuda(pod, container, env) {
            return exit;
        }
        // No `--rpc-port`, no RPC service (`rpc_addrs` is None: execute.rs at v4.0.0).
        let rpc_port = flag_values(args, "--rpc-port")
            .first()
            .and_then(|p| p.parse().ok());
        let rpc_bind = match rpc_bind(args) {
            Ok(ip) => ip,
            Err(e) => return exit_now(e),
        };
        let limit = PodView::memory_limit(container).unwrap_or(1 << 40);
        let model = AgaveModel::new(seed(&pod.name), limit, clock.stretch_s())
            .with_chain(crate::sim::chain_load::of(
                pod,
                &container.name,
                clock.scale,
            ))
            .on_machine_of_speed(pod.machine.speed.unwrap_or(1.0));
        // MAX_LOADED_ENTRY_COUNT as the image was built: release builds have 512 from 2.1
        // and 256 before (program-runtime/src/loaded_programs.rs).
        let capacity = pod
            .image(container)
            .and_then(|i| i.program_cache_entries)
            .unwrap_or(if version >= (2, 1, 0) { 512 } else { 256 });
        let crash_after = env
            .get("VALTUNE_LAB_CRASH_AFTER")
            .and_then(|v| crate::state::parse_seconds(v));
        // The leader of a cluster of its own (a bench workload): it leads every slot.
        let leader = (!joins
            && args
                .iter()
                .any(|a| a == "--no-wait-for-vote-to-start-leader"))
        .then(|| {
            LeaderModel::new(
                seed(&pod.name),
                banking_workers(args, env, version),
                gpu,
                bench_senders(pod),
                // One scrape interval: a burst is one sample of the window.
                clock.stretch_s() / 3.0,
            )
        });
        // The identity: the keypair file `--identity` names (a JSON array of 64 bytes,
        // the public key last: solana-keypair's `read_keypair_file`); one the pod made
        // for itself on its ledger volume is not readable here and keeps the lab's.
        let identity = match flag_values(args, "--identity")
            .first()
            .and_then(|path| pod.file(container, path))
        {
            Some(text) => match identity::pubkey_of_keypair(&text) {
                Some(k) => k,
                None => {
                    return exit_now(format!(
                        "Failed to read identity keypair from {:?}: not a keypair file",
                        flag_values(args, "--identity").first().unwrap_or(&"")
                    ));
                }
            },
            None => LAB_IDENTITY.to_string(),
        };
        // Stake is delegated to a vote account; the lab takes a validator that votes
        // (`--vote-account`, without `--no-voting`) to be staked: its vote account's node
        // identity (the `--authorized-voter`'s key when given, else its own identity) has
        // leader slots and votes. A validator running another identity beside it is a
        // hot spare ([`signer`]); one that does not vote is unstaked, with none.
        let voting = !flag_values(args, "--vote-account").is_empty()
            && !args.iter().any(|a| a == "--no-voting");
        let vote_node = voting.then(|| {
            flag_values(args, "--authorized-voter")
                .first()
                .and_then(|path| pod.file(container, path))
                .and_then(|text| identity::pubkey_of_keypair(&text))
                .unwrap_or_else(|| identity.clone())
        });
        let started = crate::sim::workloads::started_at(&pod.pod, &container.name)
            .unwrap_or_else(jiff::Timestamp::now);
        let chain_offset = if joins {
            identity::chain_offset(clock, started)
        } else {
            0.0
        };
        // The ledger on its volume: a follower that kept one resumes from its last slot
        // and catches up the gap only (a bench leader's chain is its own genesis).
        let ledger_dir = flag_values(args, "--ledger")
            .first()
            .and_then(|l| pod.volume_dir(container, l))
            .filter(|_| joins);
        let ledger = ledger_dir.as_ref().map(|d| d.join(LEDGER_TIP));
        let (view, c) = (pod.clone(), container.clone());
        let signer = signer::Signer::new(
            identity,
            vote_node,
            ledger_dir,
            Box::new(move |path| view.file(&c, path)),
            crate::sim::signing::Recorder::for_container(pod, &container.name, started),
        );
        let tip = ledger.as_deref().and_then(ledger_tip);
        // A follower's start with no ledger to resume from: reuse a local snapshot fresh
        // enough, or download one.
        let start = (joins && tip.is_none()).then(|| {
            let dir = snapshots::archive_path(args).and_then(|p| pod.host_dir(container, p));
            snapshots::Start::decide(
                dir,
                chain_offset as u64,
                snapshots::max_age(args),
                model.rpc_start_seconds(),
            )
        });
        let model = match tip {
            // Stopped by `agave-validator exit`: it fastboots from the bank snapshot its
            // exit made at the tip.
            Some((tip, true)) => {
                let head = model.slot_height_at_chain_head() + chain_offset;
                tracing::info!(pod = %pod.name, tip, gap = head - tip as f64, "resuming from the ledger on its volume");
                model.resuming(head - tip as f64)
            }
            // Killed (SIGTERM: agave-validator 4.0 installs no handler): its storages were
            // not flushed, so no bank snapshot is loadable (solana-core 4.0.0
            // snapshot_packager_service.rs `teardown` marks one only on a graceful exit;
            // anza-xyz/agave#6225 "Graceful exit is required for fastboot"), and
            // `--use-snapshot-archives-at-startup when-newest` loads its newest archives
            // (ledger/src/bank_forks_utils.rs): unpacked and indexed as after a download,
            // from the last incremental, then the ledger replayed from there.
            Some((tip, false)) => {
                let archive = tip - tip % snapshots::INCREMENTAL_INTERVAL;
                let head = model.slot_height_at_chain_head() + chain_offset;
                let load_s = (1.0 - snapshots::DOWNLOAD_SHARE) * model.rpc_start_seconds();
                tracing::info!(pod = %pod.name, tip, archive, load_s, "unclean stop: starting from its snapshot archives");
                model.resuming(head - archive as f64).loading_for(load_s)
            }
            None => model,
        };
        Started::Running(Arc::new(Agave {
            ledger,
            signer,
            chain_offset,
            model,
            leader,
            rpc_port,
            rpc_bind,
            // Bound to an address the pod does not have, the RPC service fails to start
            // and the validator exits (rpc/src/rpc_service.rs at v4.0.0: "JSON RPC
            // service unavailable error", a ValidatorError).
            rpc_unbindable: rpc_port.is_some() && pod.listen_addrs(rpc_bind).is_empty(),
            full_rpc: args.iter().any(|a| a == "--full-rpc-api"),
            sink,
            crash_after,
            agent_budget,
            clock: clock.clone(),
            version,
            cache: ProgramCache::new(seed(&pod.name), capacity as usize),
            snapshot: start,
            exit_requested: std::sync::Mutex::new(None),
        }))
    }
}

/// Where the RPC listens (validator/src/commands/run/execute.rs at v4.0.0):
/// `--rpc-bind-address`, else 127.0.0.1 with `--private-rpc`, else the first
/// `--bind-address` (default 0.0.0.0: src/cli.rs `DefaultArgs`). A host that is not an
/// address is refused by clap's `is_host` validator (a name the lab cannot resolve).
fn rpc_bind(args: &[String]) -> Result<std::net::IpAddr, String> {
    let host = |flag: &str, h: &str| -> Result<std::net::IpAddr, String> {
        match h {
            "localhost" => Ok(std::net::Ipv4Addr::LOCALHOST.into()),
            _ => h.parse().map_err(|_| {
                format!("error: Invalid value for '{flag} <HOST>': failed to look up address information: Name or service not known")
            }),
        }
    };
    if let Some(h) = flag_values(args, "--rpc-bind-address").first() {
        return host("--rpc-bind-address", h);
    }
    if args.iter().any(|a| a == "--private-rpc") {
        return Ok(std::net::Ipv4Addr::LOCALHOST.into());
    }
    match flag_values(args, "--bind-address").first() {
        Some(h) => host("--bind-address", h),
        None => Ok(std::net::Ipv4Addr::UNSPECIFIED.into()),
    }
}

/// The identity of a validator whose keypair the lab cannot read.
const LAB_IDENTITY: &str = "Va1tune1ab1dentity11111111111111111111111111";

/// The lab's stand-in for the ledger directory's blockstore and snapshots, on the ledger
/// volume: the last slot the validator processed (`{"slot": N}`).
const LEDGER_TIP: &str = "valtune-lab-ledger-tip.json";

/// The slot a ledger tip file records, and whether the process that wrote it stopped
/// cleanly (a loadable bank snapshot at that slot), if it holds one.
fn ledger_tip(path: &std::path::Path) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(path).ok()?;
    let v = serde_json::from_str::<Value>(&text).ok()?;
    Some((v["slot"].as_u64()?, v["clean"].as_bool().unwrap_or(false)))
}

/// Simulated seconds from the admin RPC's `exit` to the process's end: the fastboot
/// snapshot (waited for up to 5 s), then the services' stop, cut off
/// `SOLANA_VALIDATOR_EXIT_TIMEOUT` (5 s) later by `std::process::exit(0)`
/// (validator/src/admin_rpc_service.rs `exit` at v4.0.0).
pub const EXIT_S: f64 = 10.0;

/// A running agave-validator.
pub struct Agave {
    /// Its ledger's tip file on the ledger volume, where it keeps its last slot.
    ledger: Option<std::path::PathBuf>,
    /// Who it signs as, and its admin RPC's identity commands.
    signer: signer::Signer,
    /// The chain's slots before this process started: a restarted validator of a
    /// cluster rejoins the same chain, further on ([`identity::chain_offset`]).
    chain_offset: f64,
    model: AgaveModel,
    leader: Option<LeaderModel>,
    rpc_port: Option<u16>,
    /// Where its RPC listens ([`rpc_bind`]).
    rpc_bind: std::net::IpAddr,
    rpc_unbindable: bool,
    full_rpc: bool,
    sink: Option<MetricsSink>,
    crash_after: Option<f64>,
    /// `SOLANA_METRICS_MAX_POINTS_PER_SECOND` ([`agent`]).
    agent_budget: f64,
    clock: Clock,
    version: V,
    cache: ProgramCache,
    /// A follower's snapshot: where it came from, and where it writes its own.
    snapshot: Option<snapshots::Start>,
    /// When the admin RPC's `exit` was asked (simulated seconds), if it was.
    exit_requested: std::sync::Mutex<Option<f64>>,
}

/// A bench cluster's validator answers once its genesis ledger is open, and bench-tps
/// sends from a little later (it reads its accounts first).
const LEADER_RPC_START_S: f64 = 60.0;
const LEADER_LOAD_START_S: f64 = 90.0;

impl Agave {
    /// Votes (and saves its tower) on every slot it has replayed by `t`, counted on the
    /// cluster's chain (the same slot numbers in every process of the lab's cluster, which
    /// `slot_height`, seeded per pod, is not).
    fn sign_to(&self, t: f64) -> std::io::Result<()> {
        let start = self.rooted_slot(self.rpc_start(), 0);
        self.signer.advance(start, self.rooted_slot(t, 0))
    }

    /// When it ends after an `exit` request ([`EXIT_S`]).
    fn exit_at(&self) -> Option<f64> {
        self.exit_requested
            .lock()
            .expect("exit lock")
            .map(|t| t + EXIT_S)
    }

    /// Counters a client reads through RPC or /proc grow `scale` times slower than the
    /// simulated ones, so per-second rates read in simulated units (docs/lab.md).
    fn lab_count(&self, simulated: f64) -> u64 {
        (simulated / self.clock.scale).max(0.0) as u64
    }

    fn rpc_start(&self) -> f64 {
        match self.leader {
            Some(_) => LEADER_RPC_START_S,
            None => {
                self.model.rpc_start_seconds() - self.snapshot.as_ref().map_or(0.0, |s| s.saved_s)
            }
        }
    }

    /// The slot it has rooted at `t`, on the lab chain's numbering (a follower).
    fn rooted_slot(&self, t: f64, from: u64) -> u64 {
        let slot = self.chain_offset + t * SLOTS_PER_SECOND - self.model.slot_lag(t);
        (slot.max(0.0) as u64).max(from)
    }

    /// Transactions processed from 0 to `t`.
    fn transactions(&self, t: f64) -> f64 {
        match &self.leader {
            Some(l) => l.transactions(t - LEADER_LOAD_START_S),
            None => self.model.transactions(t),
        }
    }

    fn slot_lag(&self, t: f64) -> f64 {
        match self.leader {
            // The cluster is the validator: never behind.
            Some(_) => 0.0,
            None => self.model.slot_lag(t),
        }
    }

    /// getEpochInfo's block height and transaction count: a follower's are the chain's up
    /// to its slot (simulated counts, like the slot); a bench leader's, its own blocks
    /// (every slot) and what it processed, in lab units.
    fn epoch_counts(&self, t: f64) -> (u64, u64) {
        match self.leader {
            Some(_) => (
                self.slot_height(t) as u64,
                self.lab_count(self.transactions(t)),
            ),
            None => {
                // A rejoining Validator is further on the same chain (`chain_offset`):
                // its counts go on from there, like its slot.
                let (blocks, txs) = self.model.chain_counts(t);
                let blocks_before = self.chain_offset * (1.0 - solana::SKIP_RATE);
                (
                    blocks + blocks_before as u64,
                    txs + (blocks_before * solana::TX_PER_BLOCK) as u64,
                )
            }
        }
    }

    fn slot_height(&self, t: f64) -> f64 {
        match self.leader {
            Some(_) => (t * SLOTS_PER_SECOND).floor(),
            None => self.model.slot_height(t) + self.chain_offset,
        }
    }

    /// The leader's points: what each banking worker processed (tag `id`), and the
    /// replay stats of its own slots, which count no transactions (replay skips them).
    fn leader_points(&self, l: &LeaderModel, at: f64, step: f64, slot: i64) -> Vec<Datapoint> {
        // Workers report only while they have work (consume_worker.rs `has_data`).
        let busy = l.tps(at - LEADER_LOAD_START_S) > 0.0;
        let rate = agent::submitted(if busy { l.workers() } else { 0 });
        let kept = agent::kept(rate, self.agent_budget);
        let txs =
            self.lab_count(self.transactions(at)) - self.lab_count(self.transactions(at - step));
        // The points of the window's end past the agent's budget never leave the node.
        let txs = (txs as f64 * kept).round() as u64;
        let workers = l.workers().max(1) as u64;
        let mut out: Vec<Datapoint> = (0..workers)
            .map(|w| {
                // Worker ids after the two vote threads (consume_worker.rs `id`).
                let share = txs / workers + u64::from(w < txs % workers);
                Datapoint {
                    measurement: "banking_stage_worker_counts",
                    tags: vec![("id", (w + 2).to_string())],
                    fields: vec![
                        ("processed_transactions_count", share as i64),
                        ("processed_with_successful_result_count", share as i64),
                    ],
                    at,
                }
            })
            .collect();
        out.push(Datapoint {
            measurement: "replay-slot-stats",
            tags: Vec::new(),
            fields: vec![
                ("slot", slot),
                ("total_transactions", 0),
                ("program_cache_us", 0),
            ],
            at,
        });
        out.push(self.agent_point(rate, at, step));
        out
    }

    /// The agent's own point for the writes of (at - step, at] (`combine_points`), its
    /// counts in lab units like the transactions'.
    fn agent_point(&self, rate: f64, at: f64, step: f64) -> Datapoint {
        let (written, lost) = agent::write(rate, self.agent_budget);
        let writes = step / agent::WRITE_S;
        let n = |v: f64| self.lab_count(v * writes) as i64;
        Datapoint {
            measurement: "metrics",
            tags: Vec::new(),
            fields: vec![
                ("points_written", n(written)),
                ("num_points", n(written + lost)),
                ("points_lost", n(lost)),
                ("points_buffered", 0),
                ("secs_since_last_write", agent::WRITE_S as i64),
            ],
            at,
        }
    }
}

impl Process for Agave {
    fn exit(&self) -> Option<Exit> {
        // A bench cluster's state is its fresh genesis: it outgrows no memory limit.
        let oom = self
            .model
            .oom_at()
            .filter(|_| self.leader.is_none())
            .map(|at| Exit {
                at,
                reason: "OOMKilled",
                code: 137,
                message: String::new(),
            });
        let crash = self.crash_after.map(|at| Exit {
            at,
            reason: "Error",
            code: 1,
            message: "validator crashed (VALTUNE_LAB_CRASH_AFTER)".into(),
        });
        let unbindable = self.rpc_unbindable.then(|| Exit {
            at: self.rpc_start(),
            reason: "Error",
            code: 1,
            message: format!(
                "JSON RPC service unavailable error: Cannot assign requested address (os error 99). Also, check that port {} is not already in use by another application",
                self.rpc_port.unwrap_or_default()
            ),
        });
        let requested = self.exit_at().map(|at| Exit {
            at,
            reason: "Completed",
            code: 0,
            message: String::new(),
        });
        [oom, crash, unbindable, requested]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.at.total_cmp(&b.at))
    }

    fn rpc_port(&self) -> Option<u16> {
        self.rpc_port
    }

    fn rpc_bind(&self) -> Option<std::net::IpAddr> {
        Some(self.rpc_bind)
    }

    fn json_rpc(&self, t: f64, method: &str, params: &Value) -> Option<Rpc> {
        // The RPC service starts once the snapshot is downloaded and loaded.
        if t < self.rpc_start() {
            return None;
        }
        let slot = self.slot_height(t) as u64;
        let served = MINIMAL_RPC.contains(&method) || (self.full_rpc && FULL_RPC.contains(&method));
        if !served {
            return Some(Rpc::Error {
                code: -32601,
                message: "Method not found".into(),
                data: None,
            });
        }
        Some(match method {
            "getHealth" => {
                let behind = self.slot_lag(t).round();
                if behind <= HEALTH_SLOT_DISTANCE {
                    Rpc::Result(json!("ok"))
                } else {
                    Rpc::Error {
                        code: -32005,
                        message: format!("Node is behind by {behind} slots"),
                        data: Some(json!({"numSlotsBehind": behind as u64})),
                    }
                }
            }
            "getSlot" => Rpc::Result(json!(slot)),
            "getBlockHeight" => Rpc::Result(json!((slot as f64 * 0.95) as u64)),
            "getTransactionCount" => Rpc::Result(json!(self.epoch_counts(t).1)),
            "getEpochInfo" => {
                let (blocks, txs) = self.epoch_counts(t);
                Rpc::Result(json!({
                    "absoluteSlot": slot,
                    "blockHeight": blocks,
                    "epoch": slot / identity::SLOTS_PER_EPOCH,
                    "slotIndex": slot % identity::SLOTS_PER_EPOCH,
                    "slotsInEpoch": identity::SLOTS_PER_EPOCH,
                    "transactionCount": txs,
                }))
            }
            "getVersion" => Rpc::Result(json!({
                "solana-core": format!("{}.{}.{}", self.version.0, self.version.1, self.version.2),
                "feature-set": 3_294_202_862u64,
            })),
            "getIdentity" => Rpc::Result(json!({"identity": self.signer.identity()})),
            "getGenesisHash" => Rpc::Result(json!("5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d")),
            "getVoteAccounts" => Rpc::Result(identity::vote_accounts(
                &self.signer.identity(),
                self.signer.votes(),
            )),
            "getLeaderSchedule" => Rpc::Result(identity::leader_schedule_answer(
                &self.signer.identity(),
                self.signer.votes(),
                slot,
                params,
            )),
            "getBalance" => Rpc::Result(json!({"context": {"slot": slot}, "value": 0})),
            "getHighestSnapshotSlot" => Rpc::Result(identity::highest_snapshot_answer(slot)),
            "minimumLedgerSlot" | "getFirstAvailableBlock" => {
                Rpc::Result(json!(slot.saturating_sub(200_000)))
            }
            "getBlockProduction" => Rpc::Result(json!({
                "context": {"slot": slot},
                "value": {"byIdentity": {}, "range": {"firstSlot": slot, "lastSlot": slot}},
            })),
            _ => Rpc::Error {
                code: -32601,
                message: "Method not found".into(),
                data: None,
            },
        })
    }

    fn metrics_sink(&self) -> Option<MetricsSink> {
        self.sink.clone()
    }

    fn datapoints(&self, t0: f64, t1: f64) -> Vec<Datapoint> {
        // Replay starts after the snapshot is loaded; before that nothing is replayed.
        let step = self.clock.datapoint_s();
        let replay_from = self.rpc_start();
        let first = (t0 / step).floor() as u64 + 1;
        let last = (t1 / step).floor() as u64;
        let mut out: Vec<Datapoint> = self
            .snapshot
            .as_ref()
            .and_then(|s| s.bootstrap_point(t0, t1))
            .into_iter()
            .collect();
        for at in (first..=last).map(|i| i as f64 * step) {
            if at < replay_from {
                continue;
            }
            if let Some(l) = &self.leader {
                out.extend(self.leader_points(l, at, step, self.slot_height(at) as i64));
                continue;
            }
            // Transactions replayed in (at - step, at], in lab units (see lab_count);
            // rounded by differences of the running total so sums stay exact.
            let rate = agent::submitted(0);
            let kept = agent::kept(rate, self.agent_budget);
            let txs = self.lab_count(self.model.transactions(at))
                - self.lab_count(self.model.transactions(at - step));
            let txs = (txs as f64 * kept).round() as u64;
            let slot = self.slot_height(at) as i64;
            // One point stands for `step` of replay; the program cache's figures are those
            // of its last slot, so means per slot are the mechanism's (docs/lab.md).
            let replayed = ((at - replay_from) * SLOTS_PER_SECOND) as u64;
            let pc = self.cache.stats_of_slot(replayed.saturating_sub(1));
            out.push(Datapoint {
                measurement: "replay-slot-stats",
                tags: Vec::new(),
                fields: vec![
                    ("slot", slot),
                    ("total_transactions", txs as i64),
                    ("program_cache_us", pc.program_cache_us),
                ],
                at,
            });
            // runtime/src/bank/metrics.rs report_loaded_programs_stats: reported for the
            // parent slot, every counter reset per point.
            out.push(Datapoint {
                measurement: "loaded-programs-cache-stats",
                tags: Vec::new(),
                fields: vec![
                    ("slot", slot - 1),
                    ("hits", pc.hits),
                    ("misses", pc.misses),
                    ("evictions", pc.evictions),
                    ("reloads", pc.reloads),
                    ("insertions", pc.insertions),
                    ("one_hit_wonders", pc.one_hit_wonders),
                    ("water_level", pc.water_level),
                ],
                at,
            });
            out.push(self.agent_point(rate, at, step));
        }
        out
    }

    fn admin_socket(&self) -> Option<std::path::PathBuf> {
        self.signer.admin_socket()
    }

    fn admin_rpc(&self, t: f64, method: &str, params: &Value) -> Option<Rpc> {
        // `exit` (no `with_post_init`): it ends EXIT_S later; the first request counts.
        if method == "exit" {
            self.exit_requested
                .lock()
                .expect("exit lock")
                .get_or_insert(t);
            return Some(Rpc::Result(Value::Null));
        }
        // `with_post_init`: the identity commands wait for the start-up to complete.
        if t < self.rpc_start() && method.starts_with("setIdentity") {
            return Some(Rpc::Error {
                code: -32602,
                message: "Retry once validator start up is complete".into(),
                data: None,
            });
        }
        // What it signed up to now, before its identity may change.
        if method.starts_with("setIdentity")
            && let Err(e) = self.sign_to(t)
        {
            tracing::warn!(error = %e, "could not save the tower before set-identity");
        }
        self.signer.admin_rpc(method, params)
    }

    fn persist(&self, t: f64) -> std::io::Result<()> {
        // Before its RPC serves, it is still loading: the ledger is as it found it, and
        // it signs nothing.
        if t < self.rpc_start() {
            return Ok(());
        }
        // Nothing after its end; an `exit` asked once start-up completed (its snapshot
        // controller runs) leaves a loadable bank snapshot at the tip: `clean`.
        let requested = *self.exit_requested.lock().expect("exit lock");
        let t = self.exit_at().map_or(t, |end| t.min(end));
        let clean = requested.is_some_and(|r| r >= self.rpc_start() && t >= r + EXIT_S);
        self.sign_to(t)?;
        let Some(path) = self.ledger.as_ref() else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            json!({"slot": self.slot_height(t) as u64, "clean": clean}).to_string(),
        )?;
        std::fs::rename(&tmp, path)
    }

    /// Its snapshot archives on the node: the ones it downloaded, once loaded, and the
    /// ones it makes as it roots slots (snapshots.rs).
    fn write_files(&self, t: f64) -> std::io::Result<()> {
        let Some(s) = &self.snapshot else {
            return Ok(());
        };
        if t < self.rpc_start() {
            return Ok(());
        }
        s.write(self.rooted_slot(t, s.from.1))
    }

    fn proc(&self, t: f64) -> ProcFigures {
        let (major, minor) = self.model.faults(t);
        ProcFigures {
            comm: PROCESS.into(),
            rss_bytes: self.model.rss_bytes(t) as u64,
            vsz_bytes: self.model.vsz_bytes(t) as u64,
            swap_bytes: 0,
            minor_faults: self.lab_count(minor),
            major_faults: self.lab_count(major),
            read_bytes: 0,
            write_bytes: 0,
            threads: 600,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follower whose ledger is on a claim's volume, its container started at `started`.
    fn follower(volumes: &std::path::Path, started: &str) -> Arc<dyn Process> {
        let pod: Pod = serde_saphyr::from_str(&format!(
            "metadata: {{name: agave-a, namespace: ns}}
spec:
  nodeName: vv-01
  volumes: [{{name: ledger, persistentVolumeClaim: {{claimName: agave-a-ledger}}}}]
  containers:
  - name: validator
    image: anzaxyz/agave:v4.0.3
    command: [agave-validator]
    args: [--ledger, /mnt/ledger, --entrypoint, 'entrypoint.mainnet-beta.solana.com:8001', --no-port-check, --no-voting]
    resources: {{limits: {{memory: 512Gi}}}}
    volumeMounts: [{{name: ledger, mountPath: /mnt/ledger}}]
status:
  containerStatuses:
  - {{name: validator, state: {{running: {{startedAt: '{started}'}}}}}}
"
        ))
        .unwrap();
        let mut view = PodView::new(
            pod.clone(),
            "127.9.9.9".parse().unwrap(),
            Default::default(),
            Default::default(),
        );
        view.volumes_root = Some(volumes.to_path_buf());
        view.claims.insert("ledger".into(), "vv-01-nvme0".into());
        let c = pod.spec.as_ref().unwrap().containers[0].clone();
        let clock = Clock {
            scale: 720.0,
            step: 15.0,
        };
        match AgaveSim.start(&view, &c, &Env::new(), &clock) {
            Started::Running(p) => p,
            Started::Exited(e) => panic!("{e:?}"),
        }
    }

    fn slot(p: &Arc<dyn Process>, t: f64) -> u64 {
        match p.json_rpc(t, "getSlot", &Value::Null) {
            Some(Rpc::Result(v)) => v.as_u64().unwrap(),
            other => panic!("{other:?}"),
        }
    }

    /// Restarted a real minute later (12 simulated hours: 108,000 slots of chain), a
    /// follower stopped by `exit` (admin RPC) fastboots: it answers from near the slot its
    /// ledger kept, within its local start; one killed (no `exit`) loads its last
    /// snapshot archive, longer, and answers from there; one on an empty volume starts
    /// from a snapshot near the chain's head.
    #[test]
    fn a_restarted_follower_resumes_from_the_ledger_on_its_volume() {
        let dir = std::env::temp_dir().join(format!("vv-ledger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = follower(&dir, "2026-11-28T00:00:00Z");
        let t = 4_000.0;
        first.persist(t).unwrap();
        let last = slot(&first, t);
        assert!(dir.join("vv-01-nvme0").join(LEDGER_TIP).is_file());
        // Killed: no loadable bank snapshot.
        let killed = follower(&dir, "2026-11-28T00:01:00Z");
        assert!(
            killed
                .json_rpc(model::LOCAL_START_S, "getSlot", &Value::Null)
                .is_none()
        );
        let at = fresh_rpc_start(&killed);
        let archive = last - last % snapshots::INCREMENTAL_INTERVAL;
        let from_archive = slot(&killed, at);
        assert!(
            from_archive >= archive && from_archive < archive + 5 * at as u64,
            "from its archive at {from_archive}, the ledger had {last}, {at} s to load"
        );
        // Stopped by `exit`: the ledger is clean, and nothing happens after its end.
        assert_eq!(
            first.admin_rpc(t, "exit", &Value::Null),
            Some(Rpc::Result(Value::Null))
        );
        assert_eq!(first.exit().map(|e| (e.at, e.code)), Some((t + EXIT_S, 0)));
        first.persist(t + 600.0).unwrap();
        let last = slot(&first, t + EXIT_S);
        let second = follower(&dir, "2026-11-28T00:01:00Z");
        assert!(
            second
                .json_rpc(model::LOCAL_START_S - 1.0, "getSlot", &Value::Null)
                .is_none()
        );
        let resumed = slot(&second, model::LOCAL_START_S);
        assert!(
            resumed >= last && resumed < last + 2_000,
            "resumed at {resumed}, the ledger had {last}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let fresh = follower(&dir, "2026-11-28T00:01:00Z");
        let from_snapshot = slot(&fresh, fresh_rpc_start(&fresh));
        assert!(
            from_snapshot > last + 10_000,
            "a fresh start at {from_snapshot}, the old ledger had {last}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The first simulated second a process answers RPC.
    fn fresh_rpc_start(p: &Arc<dyn Process>) -> f64 {
        (0..)
            .map(|i| i as f64 * 60.0)
            .find(|t| p.json_rpc(*t, "getSlot", &Value::Null).is_some())
            .unwrap()
    }

    #[test]
    fn the_metrics_config_needs_all_four_keys() {
        assert_eq!(
            metrics_sink("host=http://127.0.0.1:8429,db=agave,u=valtune,p=valtune")
                .unwrap()
                .unwrap()
                .host,
            "http://127.0.0.1:8429"
        );
        assert_eq!(metrics_sink(""), Ok(None));
        assert_eq!(
            metrics_sink("host=http://x,db=agave"),
            Err("SOLANA_METRICS_CONFIG is incomplete".into())
        );
        assert!(
            metrics_sink("host")
                .unwrap_err()
                .contains("is invalid: 'host'")
        );
    }

    /// The RPC's address as agave-validator 4.0.0 picks it.
    #[test]
    fn the_rpc_binds_where_the_flags_say() {
        let bind = |a: &[&str]| rpc_bind(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(bind(&[]).unwrap().to_string(), "0.0.0.0");
        assert_eq!(bind(&["--private-rpc"]).unwrap().to_string(), "127.0.0.1");
        assert_eq!(
            bind(&["--private-rpc", "--rpc-bind-address", "127.20.1.5"])
                .unwrap()
                .to_string(),
            "127.20.1.5"
        );
        assert_eq!(
            bind(&["--bind-address", "10.1.2.3"]).unwrap().to_string(),
            "10.1.2.3"
        );
        assert!(bind(&["--rpc-bind-address", "$(POD_IP)"]).is_err());
    }

    #[test]
    fn versions_come_from_the_image_tag() {
        assert_eq!(version_of("anzaxyz/agave:v2.0.5"), (2, 0, 5));
        assert_eq!(version_of("registry:5000/agave:3.1.2"), (3, 1, 2));
        assert_eq!(min_port_range_width((2, 0, 5)), 14);
        assert_eq!(min_port_range_width((2, 3, 13)), 17);
        assert_eq!(min_port_range_width((3, 1, 0)), 25);
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;

    /// A follower whose archive directory is a hostPath of the node: the first start
    /// downloads (minutes, in its bootstrap point), writes its archives there as it runs,
    /// and the next start on the node reuses them (seconds).
    #[test]
    fn a_follower_reuses_the_archives_an_earlier_one_left_on_the_node() {
        let root = std::env::temp_dir().join(format!("valtune-agave-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: t-1, namespace: ns}\nspec:\n  nodeName: bm-01\n  hostNetwork: true\n  volumes:\n  - {name: snapshot-cache, hostPath: {path: /var/snap/agave/h, type: DirectoryOrCreate}}\n  containers:\n  - name: validator\n    image: anzaxyz/agave:v4.0.3\n    command: [agave-validator]\n    args: ['--ledger', '/mnt/ledger', '--entrypoint', 'e:8001', '--full-snapshot-archive-path', '/mnt/snapshot-cache', '--maximum-local-snapshot-age', '1000000']\n    resources: {limits: {memory: 512Gi}}\n    volumeMounts: [{name: snapshot-cache, mountPath: /mnt/snapshot-cache}]\n",
        )
        .unwrap();
        let mut view = PodView::new(
            pod,
            "127.9.9.201".parse().unwrap(),
            Default::default(),
            Default::default(),
        );
        view.node_root = Some(root.clone());
        let clock = Clock {
            scale: 720.0,
            step: 1.0,
        };
        let container = view.pod.spec.as_ref().unwrap().containers[0].clone();
        let start = |view: &PodView| match AgaveSim.start(view, &container, &Env::new(), &clock) {
            Started::Running(p) => p,
            Started::Exited(e) => panic!("{e:?}"),
        };
        let fetch = |p: &Arc<dyn Process>| {
            p.datapoints(0.0, 7200.0)
                .into_iter()
                .find(|d| d.measurement == "bootstrap-snapshot-download")
                .and_then(|d| {
                    d.fields
                        .iter()
                        .find(|f| f.0 == "snapshot_download_time_secs")
                        .map(|f| f.1)
                })
                .expect("the bootstrap point")
        };
        let first = start(&view);
        assert!(fetch(&first) > 60, "downloaded: {}", fetch(&first));
        first.write_files(40_000.0).unwrap();
        let second = start(&view);
        assert!(fetch(&second) < 60, "reused: {}", fetch(&second));
        let _ = std::fs::remove_dir_all(&root);
    }
}
