//! Firedancer as the lab plays it: Frankendancer (fdctl, fddev; v0.x images) and full
//! Firedancer (firedancer, firedancer-dev; v1.0.0 on), recognised by a container that
//! starts one of them (directly or from its start script, which [`wrapper`] runs for
//! real), exiting as the program does on what it refuses ([`fdctl`]: config keys of the
//! image's version, root, full Firedancer's tile-count checks, a layout larger than its
//! cores, missing capabilities, too few hugepages), and then serving its metric tile's
//! `/metrics` in the version's names ([`metrics`]): the leader benchmark from the model
//! calibrated on seed 003 ([`bench`]), a Frankendancer follower's Agave side from Agave's
//! model ([`follow`]), a full Firedancer follower's own replay ([`full_follow`]).

pub mod bench;
pub mod fdctl;
pub mod follow;
pub mod full;
pub mod full_follow;
pub mod full_snapshots;
/// Firedancer's config keys by release, as upstream-keys read them from every release's
/// default.toml (fdctl here refuses by them; the operator judges a trial's keys by the
/// same).
pub use upstream_keys::firedancer as keys;
pub mod keyswitch;
pub mod metrics;
pub mod perms;
pub mod toml;
pub mod topology;
pub mod wrapper;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::agave::identity;
use super::agave::model::{AgaveModel, SLOTS_PER_SECOND};
use super::agave::snapshots as agave_snapshots;
use super::{
    Datapoint, Env, Exit, Forked, MetricsSink, ProcFigures, Process, Rpc, SimClient, Started,
    image_version, seed,
};
use crate::kubelet::privileges::Privileges;
use crate::sim::clock::Clock;
use crate::sim::pod_view::{PodView, parse_bytes};
use full_follow::FullFollower;
use keys::V;
use metrics::{Replay, TileFigures};
use topology::{Cfg, Tile, Topology};

pub struct FiredancerSim;

/// An untagged image is taken to be the newest release the lab knows.
const NEWEST: V = (0, 1106, 40201);
/// Tiles report `booting` this long (simulated seconds) before `running`.
const BOOT_S: f64 = 240.0;

fn version_of(image: &str) -> V {
    image_version(image).unwrap_or(NEWEST)
}

fn exit_now(message: String) -> Started {
    Started::Exited(Exit {
        at: 0.0,
        reason: "Error",
        code: 1,
        message,
    })
}

/// The end of a text, as a termination message keeps it.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn pages(c: &Container) -> fdctl::Pages {
    let limit = |r: &str, unit: u128| {
        c.resources
            .as_ref()
            .and_then(|x| x.limits.as_ref())
            .and_then(|l| l.get(r))
            .and_then(|q| parse_bytes(&q.0))
            .map(|b| (b / unit) as u32)
            .unwrap_or(0)
    };
    (
        limit("hugepages-1Gi", 1 << 30),
        limit("hugepages-2Mi", 2 << 20),
    )
}

impl SimClient for FiredancerSim {
    fn name(&self) -> &'static str {
        "firedancer"
    }

    /// `fdctl set-identity` (keyswitch.rs), which joins the validator's workspaces.
    fn namespace_programs(&self) -> &'static [&'static str] {
        &["fdctl"]
    }

    fn recognise<'a>(&self, pod: &'a Pod) -> Option<&'a Container> {
        pod.spec.as_ref()?.containers.iter().find(|c| {
            let line: Vec<String> = c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect();
            wrapper::starts_firedancer(&line)
        })
    }

    fn start(&self, pod: &PodView, container: &Container, env: &Env, clock: &Clock) -> Started {
        match boot(pod, container, env, clock) {
            Ok(p) => Started::Running(Arc::new(p)),
            Err(message) => exit_now(message),
        }
    }
}

fn boot(view: &PodView, c: &Container, env: &Env, clock: &Clock) -> Result<Frankendancer, String> {
    let image = c.image.clone().unwrap_or_default();
    let v = version_of(&image);
    if v < (0, 501, 0) {
        return Err(format!(
            "the lab plays Frankendancer from v0.501 and full Firedancer from v1.0.0, not {image}"
        ));
    }
    let ran = wrapper::run(view, c, env)?;
    if ran.code != 0 {
        return Err(tail(&ran.stderr));
    }
    let last = ran
        .calls
        .last()
        .ok_or("the start script exited without starting fdctl")?
        .clone();
    let path = last
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| last.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let text = ran.config.clone().ok_or_else(|| {
        format!("ERR     failed to open config file `{path}` (2-No such file or directory)")
    })?;
    let program = last.first().map(String::as_str).unwrap_or("");
    // A Frankendancer image has fdctl and fddev, a full Firedancer image firedancer and
    // firedancer-dev (their Local.mk targets), and no other.
    let has = if fdctl::full(v) {
        ["firedancer", "firedancer-dev"]
    } else {
        ["fdctl", "fddev"]
    };
    if let Some(missing) = ran
        .calls
        .iter()
        .filter_map(|a| a.first())
        .find(|p| !has.contains(&p.as_str()))
    {
        return Err(format!("sh: {missing}: not found"));
    }
    let local = program == "fddev" || program == "firedancer-dev";
    let config = fdctl::load(&text, &path, v, local)?;
    let privileges = Privileges::of(&view.pod, c);
    let node = fdctl::Node {
        prepared: &view.machine.prepared,
        host_network: view.host_network(),
    };
    let mut topology = None;
    for argv in &ran.calls {
        topology = fdctl::invoke(argv, &config, v, &privileges, &node, &ran.cpuset, pages(c))?;
    }
    let topology = topology.ok_or("the start script's last command does not run Firedancer")?;
    let cfg = Cfg(&config);
    let metrics_port = (cfg.str("tiles.metric.prometheus_listen_address", "127.0.0.1")
        == "0.0.0.0")
        .then(|| cfg.int("tiles.metric.prometheus_listen_port", 7999) as u16);
    let s = seed(&view.name);
    // The lab chain's slot at its start: the snapshots the cluster serves then.
    let started =
        crate::sim::workloads::started_at(&view.pod, &c.name).unwrap_or_else(jiff::Timestamp::now);
    let chain_offset = identity::chain_offset(clock, started);
    // A directory of the node (a hostPath) where the config puts it, else none.
    let node_dir = |key: &str, default: &str| {
        Some(cfg.str(key, default))
            .filter(|p| !p.is_empty())
            .and_then(|p| view.host_dir(c, p))
    };
    let kind = if local {
        Kind::Bench
    } else if fdctl::full(v) {
        // Its snapct tile, on what it finds in `[paths] snapshots` (full_snapshots.rs).
        let sources = full_snapshots::Sources::of(&cfg, v >= (26, 0, 0));
        let dir = node_dir("paths.snapshots", "");
        let found = dir
            .as_deref()
            .map(|d| full_snapshots::prune(d, &sources))
            .unwrap_or_default();
        let start = full_snapshots::Start::decide(dir, &found, chain_offset as u64, &sources);
        tracing::info!(pod = %view.name, ?start, "full Firedancer's snapshot");
        Kind::FullFollow(
            FullFollower::new(s, topology.setup.exec, BOOT_S)
                .with_chain(crate::sim::chain_load::of(view, &c.name, clock.scale))
                .with_snapshot(start),
        )
    } else {
        let limit = PodView::memory_limit(c).unwrap_or(1 << 40);
        let model = AgaveModel::new(s, limit, clock.stretch_s())
            .with_chain(crate::sim::chain_load::of(view, &c.name, clock.scale));
        // Its Agave's archives: `--snapshots` is `[snapshots] path`, else `[ledger] path`
        // (src/app/shared/fd_config.c), the incremental ones beside them as valtune
        // renders; Agave's default age, as fdctl passes none (run_agave.c).
        let dir = node_dir("snapshots.path", "").or_else(|| node_dir("ledger.path", ""));
        let snapshot = agave_snapshots::Start::decide(
            dir,
            chain_offset as u64,
            agave_snapshots::DEFAULT_MAX_AGE,
            model.rpc_start_seconds(),
        );
        Kind::Follow {
            model: Box::new(model),
            snapshot,
            chain_offset,
            rpc_port: match cfg.int("rpc.port", 0) {
                0 => None,
                p => Some(p as u16),
            },
            rpc_bind: rpc_bind(&cfg),
            full_rpc: cfg.bool("rpc.full_api", false),
            sink: follow::sink(cfg.str("reporting.solana_metrics_config", ""))?,
            agave: format!("{}.{}.{}", v.2 / 10000, v.2 / 100 % 100, v.2 % 100),
            cluster: Box::new(follow::Cluster::of(
                &cfg,
                container_files(view, c, &ran.files, (&path, &text)),
                node_dir_or_volume(view, c, cfg.str("ledger.path", "")),
                crate::sim::signing::Recorder::for_container(view, &c.name, started),
            )?),
            config_path: path.clone(),
            keyswitch: view.pod_dir.as_deref().map(crate::sim::nsenter::socket),
            keyswitch_lock: keyswitch::Lock::new(false),
        }
    };
    Ok(Frankendancer {
        version: v,
        clock: clock.clone(),
        seed: s,
        comm: program.to_string(),
        argv: last.clone(),
        sandbox: cfg.bool("development.sandbox", true),
        metrics_port,
        topology,
        kind,
        crash_after: env
            .get("VALTUNE_LAB_CRASH_AFTER")
            .and_then(|v| crate::state::parse_seconds(v)),
    })
}

/// A file as the validator container sees it: what its start script wrote into its
/// emptyDirs (the key copies), its config, a link on a volume to either (a failover pair
/// member's `identity_path`), or a mounted Secret's or ConfigMap's file.
fn container_files(
    view: &PodView,
    c: &Container,
    written: &std::collections::BTreeMap<String, String>,
    (config, text): (&str, &str),
) -> super::agave::signer::Files {
    let mut written = written.clone();
    written.insert(config.to_string(), text.to_string());
    let (view, c) = (view.clone(), c.clone());
    Box::new(move |path| {
        if let Some(t) = written.get(path) {
            return Some(t.clone());
        }
        let link = view
            .volume_dir(&c, path)
            .and_then(|local| std::fs::read_link(local).ok());
        match link.as_ref().and_then(|t| t.to_str()) {
            Some(target) => written
                .get(target)
                .cloned()
                .or_else(|| view.file(&c, target)),
            None => view.file(&c, path),
        }
    })
}

/// A directory of the container on the node: a claim's volume or a hostPath.
fn node_dir_or_volume(view: &PodView, c: &Container, path: &str) -> Option<std::path::PathBuf> {
    (!path.is_empty())
        .then(|| view.volume_dir(c, path).or_else(|| view.host_dir(c, path)))
        .flatten()
}

/// Where the Agave child's RPC listens: fdctl passes `[rpc] bind_address` as
/// `--rpc-bind-address` when set, `private` as `--private-rpc` and `[net] bind_address` as
/// `--bind-address` (src/app/fdctl/commands/run_agave.c at v0.1106.40201; default.toml:
/// "the default RPC bind address is 127.0.0.1 if [rpc.private] = true, otherwise it's
/// 0.0.0.0"), and Agave picks as it does on its own flags.
fn rpc_bind(cfg: &Cfg) -> std::net::IpAddr {
    let ip = |s: &str| s.parse().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    match cfg.str("rpc.bind_address", "") {
        "" if cfg.bool("rpc.private", false) => std::net::Ipv4Addr::LOCALHOST.into(),
        "" => match cfg.str("net.bind_address", "") {
            "" => std::net::Ipv4Addr::UNSPECIFIED.into(),
            a => ip(a),
        },
        a => ip(a),
    }
}

enum Kind {
    /// `fddev bench` or `firedancer-dev bench`: the node leads every slot of its own
    /// cluster.
    Bench,
    /// `firedancer run` joined to a cluster: full Firedancer replays itself.
    FullFollow(FullFollower),
    /// `fdctl run` joined to a cluster.
    Follow {
        model: Box<AgaveModel>,
        /// Its Agave's snapshot: local or downloaded, and where its archives go.
        snapshot: agave_snapshots::Start,
        /// The lab chain's slot at its start.
        chain_offset: f64,
        rpc_port: Option<u16>,
        /// Where its Agave child's RPC listens ([`rpc_bind`]).
        rpc_bind: std::net::IpAddr,
        full_rpc: bool,
        sink: Option<MetricsSink>,
        /// The Agave version inside (the tag's patch field, src/app/fdctl/with-version.mk).
        agave: String,
        /// Its identity and whether it votes (so leads slots).
        cluster: Box<follow::Cluster>,
        /// The config it was started with, as its container names it.
        config_path: String,
        /// Where `fdctl set-identity` reaches it from inside its container's mount
        /// namespace ([`keyswitch`], sim/nsenter.rs).
        keyswitch: Option<std::path::PathBuf>,
        /// Its PoH tile's keyswitch lock.
        keyswitch_lock: keyswitch::Lock,
    },
}

/// A running fdctl, fddev, firedancer or firedancer-dev.
pub struct Frankendancer {
    version: V,
    clock: Clock,
    seed: u64,
    comm: String,
    /// What the start script exec'd (`fdctl run --config PATH`).
    argv: Vec<String>,
    /// `[development] sandbox`: fdctl run's processes, but for its Agave child, pivot
    /// into an empty root of their own mount namespace.
    sandbox: bool,
    metrics_port: Option<u16>,
    topology: Topology,
    kind: Kind,
    crash_after: Option<f64>,
}

/// The model's name for a tile kind.
fn stage(kind: &str) -> &str {
    match kind {
        "sock" => "net",
        "resolh" => "resolv",
        "pohh" => "poh",
        "execle" => "bank",
        other => other,
    }
}

/// A follower's tiles while it replays: turbine shreds, the blockstore, a little gossip
/// traffic; it never leads, so pack and bank idle.
fn follower_busy(stage: &str) -> f64 {
    match stage {
        "shred" => 0.18,
        "store" => 0.22,
        "poh" => 0.05,
        "net" => 0.03,
        "verify" | "quic" | "dedup" => 0.02,
        _ => 0.01,
    }
}

/// Regime shares from busy and backpressure shares (monitor.c's columns in reverse).
fn regimes(busy: f64, backpressure: f64) -> [f64; 8] {
    // Housekeeping takes what a saturated tile leaves of it.
    let hk = 0.004_f64.min((1.0 - busy - backpressure).max(0.0));
    let wait = (1.0 - hk - busy - backpressure).max(0.0);
    [
        0.6 * hk,
        0.4 * hk,
        0.0,
        0.05 * busy,
        0.15 * busy,
        backpressure,
        wait,
        0.8 * busy,
    ]
}

impl Frankendancer {
    fn stretch(&self) -> f64 {
        self.clock.stretch_s()
    }

    /// (start, length, tps) of each stretch of the bench up to `t`, after boot.
    fn stretches(&self, t: f64) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        let len = self.stretch();
        let n = ((t - BOOT_S).max(0.0) / len).ceil() as u64;
        (0..n).map(move |i| {
            let start = BOOT_S + i as f64 * len;
            (
                start,
                len.min(t - start),
                self.topology.setup.tps(self.seed, i),
            )
        })
    }

    /// Transactions executed as leader by `t` (simulated).
    fn executed(&self, t: f64) -> f64 {
        match &self.kind {
            Kind::Bench => self.stretches(t).map(|(_, d, tps)| d * tps).sum(),
            Kind::Follow { .. } | Kind::FullFollow(_) => 0.0,
        }
    }

    /// Full Firedancer's replay tile at `t` (see [`full_follow`] for its two transaction
    /// counts). In the bench it replays nothing of others' and counts its own leader
    /// slots (metrics.xml: "Slots replayed successfully or leader slots packed and
    /// shredded successfully"); its fork is its own chain from genesis, without forks.
    /// Counts that accumulate are in lab units; a slot's own count is not one.
    fn replay(&self, t: f64) -> Replay {
        let cumulative = metrics::renamed(self.version);
        match &self.kind {
            Kind::FullFollow(m) => {
                // `processed` and the blocks are compared with slots: simulated counts,
                // like the slots (full_follow's module docs).
                Replay {
                    processed: m.txn_processed(t, cumulative) as u64,
                    done: self.lab(m.sched_done(t)),
                    slots: self.lab(m.slots(t)),
                    reset_slot: m.reset_slot(t),
                    blocks: m.blocks_replayed(t) as u64,
                    root_slot: m.root_slot(t),
                }
            }
            _ => {
                let up = (t - BOOT_S).max(0.0);
                let processed = if cumulative {
                    self.lab(self.executed(t))
                } else {
                    // The last leader slot's own count (400 ms of the stretch's rate).
                    let tps = self.stretches(t).last().map(|(_, _, tps)| tps);
                    (0.4 * tps.unwrap_or(0.0)) as u64
                };
                let reset_slot = if t >= BOOT_S {
                    1 + (up * 2.5) as u64
                } else {
                    0
                };
                Replay {
                    processed,
                    done: 0,
                    slots: self.lab(up * 2.5),
                    reset_slot,
                    // Its own leader slots, every one a block, rooted as made.
                    blocks: (up * 2.5) as u64,
                    root_slot: reset_slot,
                }
            }
        }
    }

    fn turbine_slot(&self, t: f64) -> u64 {
        match &self.kind {
            Kind::FullFollow(m) => m.turbine_slot(t),
            _ => self.replay(t).reset_slot,
        }
    }

    /// Seconds a tile spent in each regime by `t` (simulated).
    fn regime_seconds(&self, kind: &str, t: f64) -> [f64; 8] {
        let mut out = [0.0; 8];
        let mut add = |d: f64, busy: f64, bp: f64| {
            for (o, s) in out.iter_mut().zip(regimes(busy, bp)) {
                *o += d * s;
            }
        };
        match &self.kind {
            Kind::Bench => {
                for (_, d, tps) in self.stretches(t) {
                    let s = self.topology.setup.share(stage(kind), tps);
                    let busy = if [
                        "sign", "metric", "diag", "cswtch", "netlnk", "plugin", "gui", "guih",
                        "bencho",
                    ]
                    .contains(&kind)
                    {
                        0.01
                    } else {
                        s.busy
                    };
                    add(d, busy, s.backpressure);
                }
            }
            Kind::Follow { .. } => add((t - BOOT_S).max(0.0), follower_busy(stage(kind)), 0.0),
            Kind::FullFollow(m) => {
                // Before replay: loading the snapshot; then chasing the cluster, then
                // following it (its execrp tiles' share from the model).
                let start = m.replay_start();
                let loading = (t.min(start) - BOOT_S).max(0.0);
                let snap = kind.starts_with("snap");
                add(loading, if snap { 0.6 } else { 0.01 }, 0.0);
                let mut from = start;
                let caught = m.caught_up_at().unwrap_or(f64::INFINITY);
                for (until, exec) in [
                    (caught, 0.998),
                    (f64::INFINITY, m.execrp_busy(caught.max(start) + 1.0)),
                ] {
                    let d = (t.min(until) - from).max(0.0);
                    let busy = match stage(kind) {
                        "execrp" => exec,
                        "replay" => 0.6 * exec,
                        "repair" => {
                            if until == caught {
                                0.3
                            } else {
                                0.05
                            }
                        }
                        _ if snap => 0.0,
                        other => follower_busy(other),
                    };
                    add(d, busy, 0.0);
                    from = until;
                }
            }
        }
        out
    }

    fn lab(&self, simulated: f64) -> u64 {
        (simulated / self.clock.scale).max(0.0) as u64
    }

    fn figures(&self, tile: &Tile, t: f64, executed: f64, banks: u32) -> TileFigures {
        let secs = self.regime_seconds(tile.kind, t);
        let bp = secs[5];
        let in_bp = match &self.kind {
            Kind::Bench => self
                .stretches(t)
                .last()
                .map(|(_, _, tps)| {
                    self.topology
                        .setup
                        .share(stage(tile.kind), tps)
                        .backpressure
                        > 0.5
                })
                .unwrap_or(false),
            Kind::Follow { .. } | Kind::FullFollow(_) => false,
        };
        let per_bank = executed / f64::from(banks.max(1));
        // Snapshot tiles shut down once loaded (`allow_shutdown`; status 2).
        let status = match &self.kind {
            Kind::FullFollow(m) if tile.kind.starts_with("snap") && t >= m.replay_start() => 2,
            _ => u64::from(t >= BOOT_S),
        };
        TileFigures {
            status,
            regime_nanos: secs.map(|s| self.lab(s * 1e9)),
            in_backpressure: u64::from(in_bp),
            backpressure_count: self.lab(bp * 1000.0),
            executed: (tile.kind == "bank" || tile.kind == "execle")
                .then(|| (self.lab(per_bank * 0.998), self.lab(per_bank * 0.002))),
            replay: (tile.kind == "replay").then(|| self.replay(t)),
            turbine_slot: (tile.kind == "repair").then(|| self.turbine_slot(t)),
            snapct: match &self.kind {
                Kind::FullFollow(m) if tile.kind == "snapct" => Some(m.snapct(t)),
                _ => None,
            },
            inserted: (tile.kind == "store").then(|| {
                if self.topology.setup.blockstore {
                    self.lab(executed)
                } else {
                    0
                }
            }),
        }
    }

    /// fdctl run's main process or pidns: a small process that waits on the rest.
    fn fdctl_own(&self) -> ProcFigures {
        ProcFigures::sized(&self.comm, 24 << 20, 256 << 20)
    }

    /// The validator's memory: its Agave child's, or (full Firedancer, the bench) the
    /// whole process's.
    fn agave_figures(&self, t: f64) -> ProcFigures {
        let (rss, vsz) = match &self.kind {
            Kind::Follow { model, .. } => (model.rss_bytes(t), model.vsz_bytes(t)),
            // Workspaces live in hugetlbfs, outside RSS: the rest (assumed).
            Kind::Bench | Kind::FullFollow(_) => {
                (12.0 * (1u64 << 30) as f64, 80.0 * (1u64 << 30) as f64)
            }
        };
        ProcFigures {
            comm: self.comm.clone(),
            rss_bytes: rss as u64,
            vsz_bytes: vsz as u64,
            swap_bytes: 0,
            minor_faults: 0,
            major_faults: 0,
            read_bytes: 0,
            write_bytes: 0,
            threads: (self.topology.tiles.len() + self.topology.bench.len() + 40) as u32,
        }
    }
}

impl Process for Frankendancer {
    fn exit(&self) -> Option<Exit> {
        let oom = match &self.kind {
            Kind::Follow { model, .. } => model.oom_at().map(|at| Exit {
                at,
                reason: "OOMKilled",
                code: 137,
                message: String::new(),
            }),
            Kind::Bench | Kind::FullFollow(_) => None,
        };
        let crash = self.crash_after.map(|at| Exit {
            at,
            reason: "Error",
            code: 1,
            message: "validator crashed (VALTUNE_LAB_CRASH_AFTER)".into(),
        });
        [oom, crash]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.at.total_cmp(&b.at))
    }

    fn rpc_bind(&self) -> Option<std::net::IpAddr> {
        match &self.kind {
            Kind::Follow { rpc_bind, .. } => Some(*rpc_bind),
            _ => None,
        }
    }

    fn rpc_port(&self) -> Option<u16> {
        match &self.kind {
            Kind::Follow { rpc_port, .. } => *rpc_port,
            // Full Firedancer's rpc tile listens on 127.0.0.1 (`[tiles.rpc]`), out of reach.
            _ if fdctl::full(self.version) => None,
            // bench forces the Agave RPC on 8899 (shared_dev/commands/bench/bench.c).
            Kind::Bench | Kind::FullFollow(_) => Some(8899),
        }
    }

    fn json_rpc(&self, t: f64, method: &str, params: &Value) -> Option<Rpc> {
        match &self.kind {
            Kind::Follow {
                model,
                full_rpc,
                agave,
                cluster,
                snapshot,
                ..
            } => follow::rpc(
                (model, model.rpc_start_seconds() - snapshot.saved_s),
                *full_rpc,
                agave,
                cluster,
                t,
                method,
                params,
            ),
            Kind::FullFollow(_) => None,
            Kind::Bench => (t >= BOOT_S).then(|| match method {
                "getHealth" => Rpc::Result(json!("ok")),
                "getTransactionCount" => Rpc::Result(json!(self.lab(self.executed(t)))),
                _ => Rpc::Error {
                    code: -32601,
                    message: "Method not found".into(),
                    data: None,
                },
            }),
        }
    }

    fn metrics_sink(&self) -> Option<MetricsSink> {
        match &self.kind {
            Kind::Follow { sink, .. } => sink.clone(),
            Kind::Bench | Kind::FullFollow(_) => None,
        }
    }

    fn datapoints(&self, t0: f64, t1: f64) -> Vec<Datapoint> {
        match &self.kind {
            Kind::Follow {
                model, snapshot, ..
            } => {
                let mut out: Vec<Datapoint> =
                    snapshot.bootstrap_point(t0, t1).into_iter().collect();
                out.extend(follow::datapoints(
                    model,
                    model.rpc_start_seconds() - snapshot.saved_s,
                    self.clock.scale,
                    self.clock.datapoint_s(),
                    t0,
                    t1,
                ));
                out
            }
            Kind::Bench | Kind::FullFollow(_) => Vec::new(),
        }
    }

    /// Its snapshot archives on the node: a Frankendancer follower's Agave downloads and
    /// makes them as Agave does; full Firedancer keeps what it downloaded.
    fn write_files(&self, t: f64) -> std::io::Result<()> {
        match &self.kind {
            Kind::Follow {
                model,
                snapshot,
                chain_offset,
                ..
            } => {
                if t < model.rpc_start_seconds() - snapshot.saved_s {
                    return Ok(());
                }
                let rooted = chain_offset + t * SLOTS_PER_SECOND - model.slot_lag(t);
                snapshot.write((rooted.max(0.0) as u64).max(snapshot.from.1))
            }
            Kind::FullFollow(m) => m.write_files(t),
            Kind::Bench => Ok(()),
        }
    }

    fn argv(&self) -> Option<Vec<String>> {
        Some(self.argv.clone())
    }

    /// fdctl run's main process enters its sandbox once it has cloned pidns (which forks
    /// the Agave child and the tiles)
    /// (`run_firedancer`, src/app/shared/commands/run/run.c L995-1037 @v0.1106.40201):
    /// `fd_sandbox_enter` unshares its mount namespace and pivots its root into an empty
    /// directory (src/util/sandbox/fd_sandbox.c L344-378, L656-672).
    fn private_mounts(&self) -> bool {
        self.sandbox
    }

    /// The process tree under fdctl run (run.c L925-964): `pidns`, cloned without exec and
    /// sandboxed like main (`main_pid_namespace`, L286-475), and the Agave child, which
    /// execs `fdctl run-agave --config-fd N` (`execve_agave`, L137-165) and runs Agave
    /// in a clone of that (src/app/fdctl/commands/run_agave.c L228-258): CLONE_NEWPID
    /// only, no sandbox, so it alone stays in the container's mount namespace. Agave's
    /// memory is its; fdctl's own processes are small (assumed). The tiles (`fdctl run1
    /// TILE`, sandboxed, renamed) and the exec'd run-agave that exits once it has cloned
    /// are left out; full Firedancer and the bench have no Agave child here. The lab
    /// simplifies two things no reader of /proc here depends on: every child's parent
    /// is main (the Agave child's is pidns), and argv[0] is the script's `fdctl` (the
    /// absolute path `/proc/self/exe` names).
    fn children(&self, t: f64) -> Vec<Forked> {
        let Kind::Follow { .. } = &self.kind else {
            return Vec::new();
        };
        let mut pidns = Forked::without_exec(self.fdctl_own());
        pidns.private_mounts = self.sandbox;
        let mut argv = self.argv.first().cloned().into_iter().collect::<Vec<_>>();
        argv.extend(["run-agave", "--config-fd", "3"].map(String::from));
        let agave = Forked {
            figures: self.agave_figures(t),
            argv: Some(argv),
            private_mounts: false,
        };
        vec![pidns, agave]
    }

    fn proc(&self, t: f64) -> ProcFigures {
        match &self.kind {
            Kind::Follow { .. } => self.fdctl_own(),
            Kind::Bench | Kind::FullFollow(_) => self.agave_figures(t),
        }
    }

    fn metrics(&self, t: f64, port: u16, path: &str) -> Option<String> {
        // Only GET /metrics answers (src/disco/metrics/fd_metric_tile.c); 404 otherwise.
        if Some(port) != self.metrics_port || path != "/metrics" {
            return None;
        }
        let executed = self.executed(t);
        let banks = self.topology.setup.bank;
        let tiles: Vec<(Tile, TileFigures)> = self
            .topology
            .tiles
            .iter()
            .chain(&self.topology.bench)
            .map(|tile| (tile.clone(), self.figures(tile, t, executed, banks)))
            .collect();
        Some(metrics::render(self.version, &tiles))
    }

    fn metrics_ports(&self) -> Vec<u16> {
        self.metrics_port.into_iter().collect()
    }

    /// Not an admin RPC of its own (fdctl has none): the stand-in for its container's
    /// mount namespace, where `fdctl set-identity` joins its workspaces (keyswitch.rs).
    fn admin_socket(&self) -> Option<std::path::PathBuf> {
        match &self.kind {
            Kind::Follow { keyswitch, .. } => keyswitch.clone(),
            _ => None,
        }
    }

    fn admin_rpc(&self, t: f64, method: &str, params: &Value) -> Option<Rpc> {
        let Kind::Follow {
            model,
            snapshot,
            cluster,
            config_path,
            keyswitch_lock,
            ..
        } = &self.kind
        else {
            return None;
        };
        if method != "fdctl" {
            return None;
        }
        let argv: Vec<String> = serde_json::from_value(params.clone()).unwrap_or_default();
        let ready = t >= model.rpc_start_seconds() - snapshot.saved_s;
        // What it signed up to now, before its identity may change.
        if ready && let Err(e) = self.persist(t) {
            tracing::warn!(error = %e, "could not save the tower before set-identity");
        }
        let read = |p: &str| cluster.signer.read(p);
        Some(keyswitch::fdctl(
            &argv,
            config_path,
            ready,
            &cluster.signer,
            keyswitch_lock,
            &read,
        ))
    }

    /// Its Agave child's tower in the ledger, while it votes.
    fn persist(&self, t: f64) -> std::io::Result<()> {
        match &self.kind {
            Kind::Follow {
                model,
                snapshot,
                cluster,
                chain_offset,
                ..
            } if t >= model.rpc_start_seconds() - snapshot.saved_s => {
                // Slots of the cluster's chain, as Agave's (the same in every process).
                let slot = |t: f64| {
                    (chain_offset + t * SLOTS_PER_SECOND - model.slot_lag(t)).max(0.0) as u64
                };
                let start = slot(model.rpc_start_seconds() - snapshot.saved_s);
                cluster.signer.advance(start, slot(t))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_frankendancer_tags() {
        assert_eq!(
            version_of("r/frankendancer:v0.1106.40201"),
            (0, 1106, 40201)
        );
        assert_eq!(version_of("r/frankendancer:0.1006.40100"), (0, 1006, 40100));
        assert_eq!(version_of("r/frankendancer"), NEWEST);
    }
}
