//! nodeos as the lab plays it: recognised by its command (alone, or `exec`ed by a
//! `sh -c` wrapper), started with its container's arguments and config.ini, exiting as
//! the real one does on an option its version lacks or a setting chainbase refuses, and
//! then serving its HTTP API (`/v1/chain/get_info`, the prometheus_plugin's
//! `/v1/prometheus/metrics`) and its /proc entries (with `smaps_rollup`) from the
//! [`model`], which reads what the pod gives it: the memory budget and the hog beside it,
//! the state's volume, hugepages, the swap the kubelet grants. Sources: AntelopeIO/leap
//! v5.0.3, AntelopeIO/spring v1.2.2 and chainbase at their submodule commits (cited per
//! item; docs/clients/nodeos.md).

pub mod model;
/// nodeos' options by release line, as upstream-keys extracted them from AntelopeIO's
/// sources (the model refuses unknown options by them; the operator judges config.ini
/// keys by the same).
pub use upstream_keys::nodeos as options;
mod pod_reading;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::json;

use super::{Env, Exit, Forked, ProcFigures, Process, SimClient, Started, flag_values, seed};
use crate::sim::clock::Clock;
use crate::sim::pod_view::PodView;
use crate::sim::signing::{Kind as SignKind, Recorder, Stretch};
use model::{BLOCKS_PER_SECOND, NodeosModel};

pub struct NodeosSim;

const PROCESS: &str = "nodeos";
/// WAX mainnet's chain id (it is in every WAX client configuration; nodeos shows it in
/// get_info and `nodeos_info`).
const WAX_CHAIN_ID: &str = "1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4";
/// WAX's head block number when the lab's runs start (any base will do).
const HEAD_BASE: f64 = 125_000_000.0;
/// Irreversibility trails the head by two thirds of a producer round (leap's DPoS).
const LIB_BEHIND: f64 = 325.0;
const GIB: f64 = (1u64 << 30) as f64;

/// The lab chain's producers, as many as WAX elects (21). A node started with
/// `--producer-name` is taken to be elected: its name replaces the one at the place it
/// draws, as a voting Agave is taken to be staked.
const PRODUCERS: [&str; 21] = [
    "eosnationftw",
    "waxswedenorg",
    "alohaeosprod",
    "cryptolions1",
    "eosdacserver",
    "blacklusionx",
    "guild.nefty",
    "amsterdamwax",
    "dapplicaprod",
    "waxhiveguild",
    "blokcrafters",
    "bountyblokbp",
    "eosphereiobp",
    "nation.wax",
    "ledgerwiseio",
    "sentnlagents",
    "waxdaobp1111",
    "guild.taco",
    "greeneosiobp",
    "3dkrenderwax",
    "liquidstudio",
];
/// `config::producer_repetitions`, `config::block_interval_ms`, `block_timestamp_epoch`
/// (spring v1.2.2 libraries/chain/include/eosio/chain/config.hpp, block_timestamp.hpp).
const REPETITIONS: u64 = 12;
const BLOCK_MS: i64 = 500;
const EPOCH_MS: i64 = 946_684_800_000;

/// The active schedule of a node producing as `own`.
fn schedule(own: &[String]) -> Vec<String> {
    let mut s: Vec<String> = PRODUCERS.iter().map(|p| p.to_string()).collect();
    for name in own {
        let at = (seed(name) % PRODUCERS.len() as u64) as usize;
        s[at] = name.clone();
    }
    s
}

/// The producer of the block slot of `at` (`get_scheduled_producer`,
/// block_header_state_utils.hpp L42-46).
fn scheduled(schedule: &[String], at: jiff::Timestamp) -> &str {
    scheduled_at(schedule, block_slot(at))
}

fn scheduled_at(schedule: &[String], slot: u64) -> &str {
    let n = schedule.len() as u64;
    &schedule[((slot % (n * REPETITIONS)) / REPETITIONS) as usize]
}

/// The block slot of a time (block_timestamp.hpp: half-seconds since the epoch).
fn block_slot(at: jiff::Timestamp) -> u64 {
    ((at.as_millisecond() - EPOCH_MS) / BLOCK_MS).max(0) as u64
}

/// A producer signs the blocks of its rounds only while its head is recent: the
/// producer_plugin's production is disabled on a node that is not synced (spring
/// plugins/producer_plugin/producer_plugin.cpp `on_incoming_block` / `production_enabled`,
/// unless `enable-stale-production`); the lab takes "recent" as within one round.
const SYNCED_BLOCKS: f64 = REPETITIONS as f64;

/// `OTHER_FAIL` (-2) of programs/nodeos/main.cpp: exit status 254.
const OTHER_FAIL: i32 = 254;

/// Where a container's nodeos arguments start: after `nodeos` as the command, or as
/// `$0` of a `sh -c 'script' nodeos ...` wrapper.
fn nodeos_args(line: &[String]) -> Option<usize> {
    let is = |a: &String| a.rsplit('/').next() == Some(PROCESS);
    match line {
        [first, ..] if is(first) => Some(1),
        [sh, c, _, zero, ..] if sh.ends_with("sh") && c == "-c" && is(zero) => Some(4),
        _ => None,
    }
}

fn exit_now(code: i32, message: String) -> Started {
    Started::Exited(Exit {
        at: 0.0,
        reason: "Error",
        code,
        message,
    })
}

impl SimClient for NodeosSim {
    fn name(&self) -> &'static str {
        "nodeos"
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
            nodeos_args(&line).is_some()
        })
    }

    fn start(&self, pod: &PodView, container: &Container, env: &Env, clock: &Clock) -> Started {
        let line = pod.command_line(container);
        let args = &line[nodeos_args(&line).unwrap_or(line.len())..];
        let reading = match pod_reading::read(pod, container, args, env) {
            Ok(r) => r,
            Err((code, message)) => return exit_now(code, message),
        };
        let model = NodeosModel::new(
            reading.setup.clone(),
            seed(&pod.name),
            clock.stretch_s(),
            clock.scrapes_s(model::HOG_WAIT_SCRAPES),
            reading.spring,
        )
        .with_chain(crate::sim::chain_load::of(
            pod,
            &container.name,
            clock.scale,
        ));
        // A state larger than its file, or a lock chainbase cannot take (chainbase
        // src/pinnable_mapped_file.cpp: mlock without IPC_LOCK under a smaller
        // RLIMIT_MEMLOCK), ends the start part way through loading.
        let exit_at_load = reading
            .load_failure
            .clone()
            .map(|(share, code, message)| Exit {
                at: model.http_from() * share.min(0.95),
                reason: "Error",
                code,
                message,
            });
        let crash_after = env
            .get("VALTUNE_LAB_CRASH_AFTER")
            .and_then(|v| crate::state::parse_seconds(v));
        let started = crate::sim::workloads::started_at(&pod.pod, &container.name)
            .unwrap_or_else(jiff::Timestamp::now);
        Started::Running(Arc::new(Nodeos {
            model,
            reading,
            exit_at_load,
            crash_after,
            clock: clock.clone(),
            recorder: Recorder::for_container(pod, &container.name, started),
            produced_to: Mutex::new(None),
        }))
    }
}

/// A running nodeos.
pub struct Nodeos {
    model: NodeosModel,
    reading: pod_reading::Reading,
    exit_at_load: Option<Exit>,
    crash_after: Option<f64>,
    clock: Clock,
    /// Where the blocks it signs are recorded, and the last block slot it has passed.
    recorder: Recorder,
    produced_to: Mutex<Option<u64>>,
}

impl Nodeos {
    /// Counters (and block numbers, whose rates are read) grow `scale` times slower than
    /// the simulated ones, so per-second rates read in simulated units (docs/lab.md).
    fn lab(&self, simulated: f64) -> f64 {
        simulated / self.clock.scale
    }

    fn head(&self, t: f64) -> f64 {
        HEAD_BASE + BLOCKS_PER_SECOND * t - self.model.lag_blocks(t)
    }

    fn up(&self, t: f64) -> bool {
        t >= self.model.http_from()
    }

    /// `/v1/chain/get_info` (spring plugins/chain_plugin/include/eosio/chain_plugin/
    /// get_info_db.hpp). The head block time is the wall clock less the simulated lag, so
    /// whoever subtracts it from the time reads the lag in simulated seconds.
    fn get_info(&self, t: f64) -> String {
        let head = self.lab(self.head(t)).floor();
        let lag = self.model.lag_blocks(t) / BLOCKS_PER_SECOND;
        let head_at = jiff::Timestamp::now() - jiff::SignedDuration::from_secs_f64(lag);
        let when = |behind_s: f64| {
            let at = jiff::Timestamp::now() - jiff::SignedDuration::from_secs_f64(behind_s);
            at.strftime("%Y-%m-%dT%H:%M:%S%.3f").to_string()
        };
        let producer = scheduled(&schedule(&self.reading.producers), head_at).to_string();
        let lib = self.lab(self.head(t) - LIB_BEHIND).floor();
        json!({
            "server_version": "8d6d6a5a",
            "chain_id": WAX_CHAIN_ID,
            "head_block_num": head as u64,
            "last_irreversible_block_num": lib as u64,
            "last_irreversible_block_id": format!("{:016x}{:048x}", lib as u64, self.reading.seed),
            "head_block_id": format!("{:016x}{:048x}", head as u64, self.reading.seed),
            "head_block_time": when(lag),
            "head_block_producer": producer,
            "virtual_block_cpu_limit": 200_000_000,
            "virtual_block_net_limit": 1_048_576_000,
            "block_cpu_limit": 199_900,
            "block_net_limit": 1_048_576,
            "server_version_string": self.reading.version_string,
            "fork_db_head_block_num": head as u64,
            "fork_db_head_block_id": format!("{:016x}{:048x}", head as u64, self.reading.seed),
            "server_full_version_string": self.reading.version_string,
            "total_cpu_weight": "384830000000000",
            "total_net_weight": "54430000000000",
            "earliest_available_block_num": self.lab(HEAD_BASE) as u64,
            "last_irreversible_block_time": when(lag + LIB_BEHIND / BLOCKS_PER_SECOND),
        })
        .to_string()
    }

    /// `/v1/chain/get_producer_schedule` (chain_plugin.cpp L1855-1864: `active`, and
    /// `pending` and `proposed` when there are; the lab's schedule never changes).
    fn producer_schedule(&self) -> String {
        let producers: Vec<serde_json::Value> = schedule(&self.reading.producers)
            .into_iter()
            .map(|p| {
                json!({"producer_name": p, "authority": [0, {"threshold": 1, "keys": [
                    {"key": "PUB_K1_6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5BoDq1", "weight": 1}
                ]}]})
            })
            .collect();
        json!({"active": {"version": 1, "producers": producers}, "pending": null, "proposed": null})
            .to_string()
    }

    /// The prometheus_plugin's page (spring plugins/prometheus_plugin/metrics.hpp; names
    /// exactly as registered: prometheus-cpp adds no `_total`). Spring reports block
    /// metrics every 1000th block while more than 5 minutes behind.
    fn plugin_page(&self, t: f64) -> String {
        let head = self.head(t);
        let lag_s = self.model.lag_blocks(t) / BLOCKS_PER_SECOND;
        let shown = if self.model.gated() && lag_s > 300.0 {
            (head / 1000.0).floor() * 1000.0
        } else {
            head
        };
        let (blocks, latency_us) = self.model.reported(t);
        let v = &self.reading.version_string;
        let mut out = String::new();
        let mut put = |name: &str, kind: &str, help: &str, value: String| {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        };
        put(
            "nodeos_head_block_num",
            "gauge",
            "head block number",
            format!("{}", self.lab(shown).floor()),
        );
        put(
            "nodeos_last_irreversible",
            "gauge",
            "last irreversible block number",
            format!("{}", self.lab(shown - LIB_BEHIND).floor()),
        );
        put(
            "nodeos_blocks_incoming",
            "counter",
            "number of incoming blocks",
            format!("{}", self.lab(blocks)),
        );
        put(
            "nodeos_trxs_incoming_total",
            "counter",
            "number of incoming transactions",
            format!("{}", self.lab(self.model.reported_txs(t))),
        );
        put(
            "nodeos_incoming_us_block_latency",
            "counter",
            "total incoming block latency",
            format!("{}", self.lab(latency_us)),
        );
        out.push_str(&format!(
            "# HELP nodeos_info info for this nodeos instance\n# TYPE nodeos_info gauge\nnodeos_info{{server_version=\"8d6d6a5a\",chain_id=\"{WAX_CHAIN_ID}\",server_version_string=\"{v}\",server_full_version_string=\"{v}\",earliest_available_block_num=\"{}\"}} 1\n",
            HEAD_BASE as u64
        ));
        out
    }
}

impl Process for Nodeos {
    fn exit(&self) -> Option<Exit> {
        let oom = self.model.oom_at().map(|at| Exit {
            at,
            reason: "OOMKilled",
            code: 137,
            message: String::new(),
        });
        let crash = self.crash_after.map(|at| Exit {
            at,
            reason: "Error",
            code: 1,
            message: "nodeos crashed (VALTUNE_LAB_CRASH_AFTER)".into(),
        });
        [oom, crash, self.exit_at_load.clone()]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.at.total_cmp(&b.at))
    }

    fn metrics(&self, t: f64, port: u16, path: &str) -> Option<String> {
        if port != self.reading.http_port || !self.up(t) {
            return None;
        }
        match path {
            "/v1/chain/get_info" if self.reading.chain_api => Some(self.get_info(t)),
            "/v1/chain/get_producer_schedule" if self.reading.chain_api => {
                Some(self.producer_schedule())
            }
            "/v1/prometheus/metrics" if self.reading.prometheus => Some(self.plugin_page(t)),
            _ => None,
        }
    }

    fn metrics_ports(&self) -> Vec<u16> {
        vec![self.reading.http_port]
    }

    fn proc(&self, t: f64) -> ProcFigures {
        let (major, minor) = self.model.faults(t);
        let fit = self.model.fit(t);
        let pages = self.model.dirtied_pages(t);
        ProcFigures {
            comm: PROCESS.into(),
            rss_bytes: (self.model.rss_gib(t) * GIB) as u64,
            vsz_bytes: (self.model.vsz_gib() * GIB) as u64,
            // VmSwap: anonymous pages only (proc(5)).
            swap_bytes: (fit.anon_swap_gib * GIB) as u64,
            minor_faults: self.lab(minor) as u64,
            major_faults: self.lab(major) as u64,
            read_bytes: self.lab(major * 4096.0) as u64,
            write_bytes: self.lab(pages * 4096.0) as u64,
            threads: 40,
        }
    }

    /// The EOS VM OC compile monitor and its trampoline, forked before `main` and named
    /// by `prctl(PR_SET_NAME)` (libraries/chain/webassembly/runtimes/eos-vm-oc/
    /// compile_monitor.cpp `__wrap_main`, "oc-monitor"; compile_trampoline.cpp
    /// "oc-trampoline": AntelopeIO/spring v1.2.2, the same in leap 5). Their sizes are the
    /// lab's assumption; the `oc-compile` processes the trampoline forks per contract
    /// come and go and are left out.
    fn children(&self, _t: f64) -> Vec<Forked> {
        [("oc-monitor", 48u64 << 20), ("oc-trampoline", 24 << 20)]
            .into_iter()
            .map(|(comm, rss)| ProcFigures::sized(comm, rss, 256 << 20))
            .map(Forked::without_exec)
            .collect()
    }

    /// `smaps_rollup`: its `Swap` counts the tmpfs pages of the state's mapping in swap
    /// too (fs/proc/task_mmu.c, shmem_swap_usage), `SwapPss` only anonymous ones.
    fn proc_files(&self, t: f64) -> Vec<(String, String)> {
        let fit = self.model.fit(t);
        let kb = |gib: f64| (gib * GIB / 1024.0) as u64;
        let rss = kb(self.model.rss_gib(t));
        let swap = kb(fit.anon_swap_gib + fit.shmem_swap_gib);
        let anon = kb(fit.anon_swap_gib);
        vec![(
            "smaps_rollup".into(),
            format!(
                "00400000-7ffc00000000 ---p 00000000 00:00 0                          [rollup]\nRss:            {rss:>8} kB\nPss:            {rss:>8} kB\nShared_Clean:          0 kB\nShared_Dirty:          0 kB\nPrivate_Clean:         0 kB\nPrivate_Dirty:  {rss:>8} kB\nReferenced:     {rss:>8} kB\nAnonymous:      {:>8} kB\nSwap:           {swap:>8} kB\nSwapPss:        {anon:>8} kB\nLocked:                0 kB\n",
                kb(model::ANON_GIB)
            ),
        )]
    }

    /// The blocks it has signed since the last pass, recorded: its producers' slots of
    /// the schedule, while it is up and synced.
    fn persist(&self, t: f64) -> std::io::Result<()> {
        if self.reading.producers.is_empty() {
            return Ok(());
        }
        let now = block_slot(jiff::Timestamp::now());
        let from = {
            let mut to = self.produced_to.lock().expect("produced lock");
            let from = to.map_or(now, |p| p + 1);
            *to = Some(now);
            from
        };
        if !self.up(t) || self.model.lag_blocks(t) > SYNCED_BLOCKS {
            return Ok(());
        }
        let schedule = schedule(&self.reading.producers);
        let own = |slot: u64| {
            let p = scheduled_at(&schedule, slot);
            self.reading.producers.iter().any(|o| o == p).then_some(p)
        };
        let mut slot = from;
        while slot <= now {
            let Some(p) = own(slot) else {
                slot += 1;
                continue;
            };
            let first = slot;
            while slot < now && own(slot + 1) == Some(p) {
                slot += 1;
            }
            self.recorder.write(Stretch {
                identity: p.to_string(),
                kind: SignKind::Block,
                first,
                last: slot,
                tower_root: None,
                tower_last_vote: None,
                process: String::new(),
                period: 1,
                node: String::new(),
                at: String::new(),
            });
            slot += 1;
        }
        Ok(())
    }
}

/// The last value of an option on the command line (a later one wins).
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    flag_values(args, name).last().copied()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod schedule_tests {
    use super::*;

    /// A producer is elected in the place its name draws; each producer's round is 12
    /// slots of 500 ms, in the schedule's order.
    #[test]
    fn a_producer_is_elected_and_produces_its_round() {
        let own = vec!["valtunelab11".to_string()];
        let s = schedule(&own);
        assert_eq!(s.len(), 21);
        let at = s.iter().position(|p| p == "valtunelab11").unwrap();
        assert_eq!(schedule(&[]).len(), 21);
        // The first slot of its round in some cycle, and the 12 that follow.
        let slot = 1_000 * 252 + at as i64 * 12;
        let t = |slot: i64| jiff::Timestamp::from_millisecond(EPOCH_MS + slot * BLOCK_MS).unwrap();
        for k in 0..12 {
            assert_eq!(scheduled(&s, t(slot + k)), "valtunelab11");
        }
        assert_ne!(scheduled(&s, t(slot + 12)), "valtunelab11");
    }
}
