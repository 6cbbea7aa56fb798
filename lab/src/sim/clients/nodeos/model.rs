//! A model of a WAX nodeos (2021) following its chain with a state that may not fit in the
//! memory it gets, calibrated on seed 002 ("WAX node performance, Part II", cc32d9):
//! - 32 GB of state on a tmpfs, 16 GB of RAM and 128 GB of swap: a slow, I/O-bound start,
//!   then about 35 blocks per second while resyncing, then in sync with "20-30 reads or
//!   writes per second" of swap;
//! - a 6 GB hog: still in sync, with "swapping increased dramatically"; an 8 GB hog:
//!   "falling behind constantly";
//! - the state mapped on an SSD instead: in sync with 600-900 writes per second.
//!
//! The core is one curve: the time to apply a block is CPU time plus the page faults it
//! takes, which grow e-fold for every LAMBDA GiB less RAM the state gets (the memory
//! budget less nodeos' own heap, the sidecars and the hog). Where the state lives decides
//! what must fit and what may swap: page cache for a file on disk, unswappable shmem for
//! a memory-backed emptyDir (mounted noswap), swappable shmem for a node's own tmpfs,
//! anonymous memory for heap and mapped_private, locked memory for locked, hugetlb (off
//! the memory cgroup) for heap or locked with enough hugepages. Too little memory and
//! swap is the kernel's OOM kill. Deterministic for a seed (the pod's name).

use super::super::{normal, uniform};
use crate::sim::chain_load;
use crate::topology::ChainLoad;

/// The lab's scrapes between the catch-up and the hog taking its memory (see `run`).
pub const HOG_WAIT_SCRAPES: f64 = 8.0;
/// Antelope's block interval (block_interval_ms = 500).
pub const BLOCKS_PER_SECOND: f64 = 2.0;
/// "Current WAX state is about 32GB in size."
pub const STATE_GIB: f64 = 32.0;
/// nodeos' own memory beside the state (heap, fork database, code): an estimate.
pub const ANON_GIB: f64 = 1.5;
/// The metric sidecars' resident memory inside the pod's budget.
pub const SIDECARS_GIB: f64 = 0.25;
/// Seconds per block without waiting on memory: with the seed's faults in sync, about 37
/// blocks/s at most, so a resync from a day-old snapshot averages about 35 (the seed's).
const T_CPU: f64 = 0.015;
/// Seconds per major fault (a swap-in or a read of the state file, under load).
const T_FAULT: f64 = 0.001;
/// The seed's machine: RAM left for the state (16 - ANON - SIDECARS) and the faults per
/// block there (about 24 a second in sync: "20-30 reads or writes per second").
const R_REF_GIB: f64 = 16.0 - ANON_GIB - SIDECARS_GIB;
const F_REF: f64 = 12.0;
/// GiB per e-fold of faults: a 6 GiB hog keeps up (about 2.6 blocks/s of capacity) and
/// an 8 GiB hog falls behind (about 0.9 blocks/s).
const LAMBDA_GIB: f64 = 1.752;
/// Right after the load every page is fresh: faults doubled, decaying with this time
/// (the resync then averages about 35 blocks/s).
const SLOW_START_S: f64 = 300.0;
/// Loading the snapshot, per GiB of state; "a few minutes longer" when it does not fit.
const LOAD_S_PER_GIB: f64 = 20.0;
const LOAD_SWAP_S: f64 = 300.0;
/// The snapshot's age when the trial starts: a day, as public WAX snapshots are taken
/// (the resync then takes about 40 minutes: several of the lab's scrapes even when a busy
/// lab misses some, so the chain exporter sees it catching up as a cluster's would).
pub const SNAPSHOT_AGE_S: f64 = 24.0 * 3600.0;
/// A node started from genesis replays years of WAX: it never catches up in a trial.
const CHAIN_AGE_S: f64 = 2.0 * 365.0 * 86400.0;
/// Pages written back per block applied: a state file on an SSD (750 a second in sync,
/// the seed's 600-900), or the blocks log alone.
const STATE_PAGES_PER_BLOCK: f64 = 375.0;
const LOG_PAGES_PER_BLOCK: f64 = 2.0;
const MINOR_FAULTS_PER_BLOCK: f64 = 150.0;
/// WAX transactions per block on a steady chain (not calibrated: the seed gives none).
pub const TRX_PER_BLOCK: f64 = 100.0;
/// Below this much RAM for the state the node thrashes until the kernel kills it.
const MIN_ROOM_GIB: f64 = 0.5;
/// The trajectory's resolution and horizon (simulated seconds).
const DT: f64 = 10.0;
const HORIZON_S: f64 = 4.0 * 86400.0;
/// Spring reports block metrics only within 5 minutes of now, or every 1000th block
/// (libraries/chain/controller.cpp `log_applied`, v1.2.2); leap 5 reports every block.
const GATE_S: f64 = 300.0;

/// Where the state directory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A file on a disk volume (page cache).
    Disk,
    /// A memory-backed emptyDir: shmem, noswap.
    MemoryTmpfs,
    /// The node's own tmpfs without noswap: shmem that swap backs.
    SwapTmpfs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Mapped,
    MappedPrivate,
    Heap,
    Locked,
}

/// What the pod gives nodeos, read from the pod spec and the node.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// The chain's state (what the snapshot holds).
    pub state_gib: f64,
    /// `--chain-state-db-size-mb` in GiB.
    pub db_gib: f64,
    /// The memory cgroup limit nodeos and (with pod-level resources) the hog share.
    pub budget_gib: f64,
    /// The hog's bytes inside that budget (0: none, or outside it).
    pub hog_gib: f64,
    /// The hog waits until nodeos has caught up to `caught_up_blocks`.
    pub hog_waits: bool,
    pub caught_up_blocks: f64,
    pub place: Place,
    pub mode: Mode,
    /// Hugepages the container may use (hugetlb, off the memory cgroup).
    pub huge_gib: f64,
    /// The container's memory.swap.max.
    pub swap_gib: f64,
    pub from_snapshot: bool,
}

/// How the state fits the memory for a given hog.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// GiB of the state in RAM (page cache, shmem, anonymous or hugetlb).
    pub resident_gib: f64,
    /// Anonymous pages in swap (VmSwap).
    pub anon_swap_gib: f64,
    /// tmpfs pages in swap (in smaps' Swap of the mapping, not in VmSwap).
    pub shmem_swap_gib: f64,
    /// The state held in hugetlb pages (not in RSS).
    pub hugetlb: bool,
    pub oom: bool,
}

impl Setup {
    fn hugetlb(&self) -> bool {
        matches!(self.mode, Mode::Heap | Mode::Locked) && self.huge_gib >= self.db_gib.ceil()
    }

    /// The state's place in memory with `hog` GiB held beside nodeos.
    pub fn fit(&self, hog: f64) -> Fit {
        let room = self.budget_gib - ANON_GIB - SIDECARS_GIB - hog;
        let s = self.state_gib;
        let mut f = Fit {
            resident_gib: s,
            anon_swap_gib: 0.0,
            shmem_swap_gib: 0.0,
            hugetlb: false,
            oom: room < MIN_ROOM_GIB,
        };
        if f.oom {
            f.resident_gib = 0.0;
            return f;
        }
        if self.hugetlb() {
            f.hugetlb = true;
            return f;
        }
        match (self.mode, self.place) {
            (Mode::Locked, _) => f.oom = self.db_gib > room,
            (Mode::Mapped, Place::MemoryTmpfs) => f.oom = s > room,
            (Mode::Mapped, Place::Disk) => f.resident_gib = s.min(room),
            (Mode::Mapped, Place::SwapTmpfs) => {
                f.resident_gib = s.min(room);
                f.shmem_swap_gib = s - f.resident_gib;
                f.oom = f.shmem_swap_gib > self.swap_gib;
            }
            (Mode::Heap | Mode::MappedPrivate, _) => {
                // heap preloads the whole file; mapped_private copies what it touches.
                let size = if self.mode == Mode::Heap {
                    self.db_gib.max(s)
                } else {
                    s
                };
                let anon = size.min(room);
                f.anon_swap_gib = size - anon;
                // The kernel swaps the cold (never used) part first.
                f.resident_gib = s.min(anon);
                f.oom = f.anon_swap_gib > self.swap_gib;
            }
        }
        f
    }

    /// Seconds to load the snapshot.
    pub fn load_s(&self) -> f64 {
        let fits = self.fit(self.first_hog()).resident_gib >= self.state_gib;
        LOAD_S_PER_GIB * self.state_gib + if fits { 0.0 } else { LOAD_SWAP_S }
    }

    fn first_hog(&self) -> f64 {
        if self.hog_waits { 0.0 } else { self.hog_gib }
    }
}

/// Major faults per block with `resident` GiB of the state in RAM.
pub fn faults_per_block(resident: f64, state: f64) -> f64 {
    if resident >= state {
        return 0.0;
    }
    (F_REF * ((R_REF_GIB - resident) / LAMBDA_GIB).exp()).min(1e6)
}

/// Blocks a second nodeos can apply with `faults` per block.
pub fn capacity(faults: f64) -> f64 {
    capacity_at(faults, 1.0)
}

/// The same on a chain at `load` times its mean: a block's transactions, and the CPU time
/// executing them, scale with it.
fn capacity_at(faults: f64, load: f64) -> f64 {
    1.0 / (T_CPU * load + faults * T_FAULT)
}

/// Cumulative figures at a grid point.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sample {
    behind: f64,
    applied: f64,
    majors: f64,
    minors: f64,
    dirtied: f64,
    /// Blocks whose metrics the prometheus_plugin reported, and their summed latency.
    reported: f64,
    latency_us: f64,
    /// The transactions of the blocks reported.
    txs: f64,
}

#[derive(Debug, Clone)]
pub struct NodeosModel {
    pub setup: Setup,
    seed: u64,
    /// Length of a stretch of constant noise (simulated seconds).
    stretch_s: f64,
    /// How long after the catch-up the hog takes its memory (simulated seconds).
    hog_wait_s: f64,
    gated: bool,
    load_s: f64,
    /// When the hog took its memory (None: never).
    hog_from: Option<f64>,
    oom: Option<f64>,
    trajectory: Vec<Sample>,
    /// A chain whose load varies, and the simulated time since the epoch at start.
    chain: Option<(ChainLoad, f64)>,
}

const NOISE: u64 = 1;
const JITTER: u64 = 2;

impl NodeosModel {
    /// `gated`: spring's reporting of block metrics (leap 5 reports every block).
    pub fn new(setup: Setup, seed: u64, stretch_s: f64, hog_wait_s: f64, gated: bool) -> Self {
        let mut m = NodeosModel {
            load_s: setup.load_s(),
            setup,
            seed,
            stretch_s: stretch_s.max(1.0),
            hog_wait_s,
            gated,
            hog_from: None,
            oom: None,
            trajectory: Vec::new(),
            chain: None,
        };
        m.run();
        m
    }

    /// The same node on a chain whose load varies (the machine's `chainLoad`), started
    /// at simulated time `origin` (seconds since the epoch): each block's transactions,
    /// and the CPU time applying it, scale with the load when it was produced.
    pub fn with_chain(mut self, chain: Option<(ChainLoad, f64)>) -> Self {
        if chain.is_some() {
            self.chain = chain;
            self.hog_from = None;
            self.oom = None;
            self.trajectory.clear();
            self.run();
        }
        self
    }

    /// The chain's load when the blocks applied at `t`, `lag_s` behind, were produced.
    fn load(&self, t: f64, lag_s: f64) -> f64 {
        self.chain.map_or(1.0, |(c, origin)| {
            chain_load::factor(&c, origin + t - lag_s)
        })
    }

    fn hog_at(&self, t: f64) -> f64 {
        match self.hog_from {
            Some(from) if t >= from => self.setup.hog_gib,
            _ => 0.0,
        }
    }

    /// The trajectory from start to the horizon, and the events on the way.
    fn run(&mut self) {
        let s = self.setup.clone();
        if s.hog_gib > 0.0 && !s.hog_waits {
            self.hog_from = Some(0.0);
        }
        let first = s.fit(self.hog_at(0.0));
        if first.oom {
            // While loading, when the state outgrows what memory and swap hold.
            let room = s.budget_gib - ANON_GIB - SIDECARS_GIB - self.hog_at(0.0) + s.swap_gib;
            let share = (room / s.state_gib).clamp(0.05, 1.0);
            self.oom = Some(self.load_s * share);
        }
        let steps = (HORIZON_S / DT) as usize;
        let mut now = Sample {
            behind: BLOCKS_PER_SECOND
                * (self.load_s
                    + if s.from_snapshot {
                        SNAPSHOT_AGE_S
                    } else {
                        CHAIN_AGE_S
                    }),
            ..Default::default()
        };
        let load_steps = (self.load_s / DT).ceil() as usize;
        for i in 0..=steps {
            let t = i as f64 * DT;
            self.trajectory.push(now);
            if i < load_steps {
                continue;
            }
            let hog = self.hog_at(t);
            let fit = s.fit(hog);
            if fit.oom && self.oom.is_none() {
                self.oom = Some(t + 60.0);
            }
            let fresh = 1.0 + (-(t - self.load_s) / SLOW_START_S).exp();
            let faults = faults_per_block(fit.resident_gib, s.state_gib) * fresh;
            let noise = 1.0 + 0.03 * normal(self.seed, NOISE, (t / self.stretch_s) as u64);
            let lag_s = now.behind / BLOCKS_PER_SECOND;
            let load = self.load(t, lag_s);
            let v = capacity_at(faults, load) * noise;
            let rate = if now.behind > 1.0 {
                v
            } else {
                v.min(BLOCKS_PER_SECOND)
            };
            let pages = if s.place == Place::Disk && s.mode == Mode::Mapped {
                STATE_PAGES_PER_BLOCK
            } else {
                LOG_PAGES_PER_BLOCK
            };
            let report = if self.gated && lag_s > GATE_S {
                1.0 / 1000.0
            } else {
                1.0
            };
            now.applied += rate * DT;
            now.majors += rate * faults * DT;
            now.minors += rate * MINOR_FAULTS_PER_BLOCK * DT;
            now.dirtied += rate * pages * DT;
            now.reported += rate * report * DT;
            now.latency_us += rate * report * DT * lag_s * 1e6;
            now.txs += rate * report * DT * TRX_PER_BLOCK * load;
            now.behind = (now.behind + (BLOCKS_PER_SECOND - rate) * DT).max(0.0);
            // On a cluster the hog takes its memory seconds after the exporter's marker
            // (its 5 s poll, then stress-ng filling 8 GiB) and nodeos needs about 100 s
            // more to fall 120 blocks behind: Prometheus scraping every 15 s records the
            // node in sync some seven times first. Time runs compressed here, so the hog
            // waits as many of the lab's scrapes ([`HOG_WAIT_SCRAPES`]): a busy lab that
            // misses a scrape or two still records the catch-up, as a cluster would.
            if s.hog_gib > 0.0 && self.hog_from.is_none() && now.behind <= s.caught_up_blocks {
                self.hog_from = Some(t + DT + self.hog_wait_s);
            }
        }
    }

    /// The cumulative figures at `t`, interpolated (extrapolated past the horizon).
    fn at(&self, t: f64) -> Sample {
        let x = t.max(0.0) / DT;
        let i = (x.floor() as usize).min(self.trajectory.len() - 2);
        let (a, b) = (self.trajectory[i], self.trajectory[i + 1]);
        let f = x - i as f64;
        let lerp = |p: f64, q: f64| p + (q - p) * f;
        Sample {
            behind: lerp(a.behind, b.behind).max(0.0),
            applied: lerp(a.applied, b.applied),
            majors: lerp(a.majors, b.majors),
            minors: lerp(a.minors, b.minors),
            dirtied: lerp(a.dirtied, b.dirtied),
            reported: lerp(a.reported, b.reported),
            latency_us: lerp(a.latency_us, b.latency_us),
            txs: lerp(a.txs, b.txs),
        }
    }

    /// When the HTTP server (get_info, the metrics) answers: after the snapshot is loaded.
    pub fn http_from(&self) -> f64 {
        self.load_s
    }

    pub fn oom_at(&self) -> Option<f64> {
        self.oom
    }

    /// When the hog took its memory, if it did.
    pub fn hog_from(&self) -> Option<f64> {
        self.hog_from
    }

    /// Blocks behind the chain's head, as get_info shows it (in sync: the blocks still on
    /// their way from the producer, under a second).
    pub fn lag_blocks(&self, t: f64) -> f64 {
        let i = (t / self.stretch_s) as u64;
        self.at(t).behind + 0.3 + 1.2 * uniform(self.seed, JITTER, i)
    }

    /// Blocks applied since start.
    pub fn applied(&self, t: f64) -> f64 {
        self.at(t).applied
    }

    /// (major, minor) faults since start.
    pub fn faults(&self, t: f64) -> (f64, f64) {
        let s = self.at(t);
        (s.majors, s.minors)
    }

    /// Pages written back since start.
    pub fn dirtied_pages(&self, t: f64) -> f64 {
        self.at(t).dirtied
    }

    /// Blocks the prometheus_plugin counted, and their summed latency in microseconds.
    pub fn reported(&self, t: f64) -> (f64, f64) {
        let s = self.at(t);
        (s.reported, s.latency_us)
    }

    /// The transactions of the blocks the prometheus_plugin counted.
    pub fn reported_txs(&self, t: f64) -> f64 {
        self.at(t).txs
    }

    /// Major faults per second at `t` (for tests).
    pub fn major_rate(&self, t: f64) -> f64 {
        (self.at(t + 600.0).majors - self.at(t).majors) / 600.0
    }

    /// Blocks applied per second over [t0, t1].
    pub fn block_rate(&self, t0: f64, t1: f64) -> f64 {
        (self.applied(t1) - self.applied(t0)) / (t1 - t0)
    }

    /// How the state sits in memory at `t`, scaled by how much of it is loaded.
    pub fn fit(&self, t: f64) -> Fit {
        let mut f = self.setup.fit(self.hog_at(t));
        let loaded = (t / self.load_s).clamp(0.0, 1.0);
        f.resident_gib *= loaded;
        f.anon_swap_gib *= loaded;
        f.shmem_swap_gib *= loaded;
        f
    }

    /// Resident memory of the process (hugetlb pages are not in VmRSS).
    pub fn rss_gib(&self, t: f64) -> f64 {
        let f = self.fit(t);
        let state = if f.hugetlb { 0.0 } else { f.resident_gib };
        let w = 1.0 + 0.01 * normal(self.seed, NOISE + 10, (t / self.stretch_s) as u64);
        // Never more than the budget leaves it beside the sidecars and the hog.
        let room = self.setup.budget_gib - SIDECARS_GIB - self.hog_at(t);
        ((ANON_GIB + state) * w).min(room)
    }

    pub fn vsz_gib(&self) -> f64 {
        self.setup.db_gib + 4.0
    }

    /// Whether spring-style gating applies (for the plugin's pages).
    pub fn gated(&self) -> bool {
        self.gated
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::seed;
    use super::*;

    const HOUR: f64 = 3600.0;

    /// The seed's machine: 16 GiB, the state on a node tmpfs, plenty of swap.
    fn seed_setup(hog: f64) -> Setup {
        Setup {
            state_gib: STATE_GIB,
            db_gib: 48.0,
            budget_gib: 16.0,
            hog_gib: hog,
            hog_waits: true,
            caught_up_blocks: 120.0,
            place: Place::SwapTmpfs,
            mode: Mode::Mapped,
            huge_gib: 0.0,
            swap_gib: 64.0,
            from_snapshot: true,
        }
    }

    fn model(setup: Setup, name: &str) -> NodeosModel {
        NodeosModel::new(setup, seed(name), 120.0, 120.0, true)
    }

    /// Catch-up ends when the hog starts (or when the lag first drops to the bound).
    fn caught_up(m: &NodeosModel) -> f64 {
        (0..)
            .map(|i| i as f64 * 60.0)
            .find(|t| *t > m.http_from() && m.at(*t).behind <= 120.0)
            .unwrap()
    }

    #[test]
    fn the_seed_keeps_up_after_a_slow_start_at_about_35_blocks_a_second() {
        for name in ["a", "b", "c"] {
            let m = model(seed_setup(0.0), name);
            assert_eq!(m.oom_at(), None);
            let load = m.http_from();
            // "a few minutes longer" than a state that fits.
            assert!((600.0..1200.0).contains(&load), "load {load}");
            let tc = caught_up(&m);
            let speed = m.block_rate(load, tc);
            assert!((30.0..40.0).contains(&speed), "resync {speed} blocks/s");
            // The start is I/O bound: slower than later.
            assert!(m.block_rate(load, load + 60.0) < 0.85 * m.block_rate(tc - 300.0, tc - 120.0));
            // In sync for the next 12 hours, with 20-30 swap-ins a second.
            for h in 1..=12 {
                assert!(m.lag_blocks(tc + h as f64 * HOUR) < 5.0);
            }
            let faults = m.major_rate(tc + 6.0 * HOUR);
            assert!((15.0..35.0).contains(&faults), "{faults} faults/s in sync");
            let f = m.fit(tc + HOUR);
            assert!((15.0..20.0).contains(&f.shmem_swap_gib), "{f:?}");
            assert_eq!(f.anon_swap_gib, 0.0);
        }
    }

    #[test]
    fn a_6_gib_hog_swaps_hard_but_keeps_up_and_8_gib_falls_behind() {
        for name in ["a", "b", "c"] {
            let calm = model(seed_setup(0.0), name);
            let six = model(seed_setup(6.0), name);
            let start = six.hog_from().expect("the hog starts once caught up");
            for h in 1..=12 {
                assert!(
                    six.lag_blocks(start + h as f64 * HOUR) < 5.0,
                    "6 GiB behind"
                );
            }
            let (f6, f0) = (
                six.major_rate(start + 6.0 * HOUR),
                calm.major_rate(start + 6.0 * HOUR),
            );
            assert!(f6 > 10.0 * f0, "6 GiB faults {f6} vs {f0}");
            let eight = model(seed_setup(8.0), name);
            let start = eight.hog_from().unwrap();
            let behind = eight.lag_blocks(start + 12.0 * HOUR);
            assert!(behind > 20_000.0, "8 GiB is only {behind} blocks behind");
            let rate = eight.block_rate(start + HOUR, start + 12.0 * HOUR);
            assert!((0.6..1.4).contains(&rate), "8 GiB applies {rate} blocks/s");
            assert_eq!(eight.oom_at(), None);
        }
    }

    #[test]
    fn the_threshold_lies_between_6_and_8_gib() {
        let c = |hog: f64| capacity(faults_per_block(R_REF_GIB - hog, STATE_GIB));
        assert!(c(6.0) > 2.3 && c(6.0) < 3.0, "{}", c(6.0));
        assert!(c(7.0) < BLOCKS_PER_SECOND);
        assert!(c(8.0) < 1.0);
        assert!((c(0.0) - 37.0).abs() < 1.0, "{}", c(0.0));
    }

    #[test]
    fn a_state_mapped_on_an_ssd_keeps_up_with_600_to_900_writes_a_second() {
        let m = model(
            Setup {
                place: Place::Disk,
                swap_gib: 0.0,
                ..seed_setup(0.0)
            },
            "ssd",
        );
        assert_eq!(m.oom_at(), None);
        let tc = caught_up(&m);
        let t = tc + 6.0 * HOUR;
        let writes = (m.dirtied_pages(t + 600.0) - m.dirtied_pages(t)) / 600.0;
        assert!((600.0..900.0).contains(&writes), "{writes} writes/s");
        assert!(m.lag_blocks(tc + 12.0 * HOUR) < 5.0);
        assert_eq!(m.fit(t).shmem_swap_gib + m.fit(t).anon_swap_gib, 0.0);
    }

    #[test]
    fn memory_that_cannot_hold_the_state_is_an_oom_kill() {
        // A memory-backed emptyDir never swaps: 32 GiB of state in 16 GiB.
        let tmpfs = Setup {
            place: Place::MemoryTmpfs,
            swap_gib: 0.0,
            ..seed_setup(0.0)
        };
        let m = model(tmpfs.clone(), "x");
        let oom = m.oom_at().expect("OOM-killed while loading");
        assert!(oom < m.http_from(), "{oom}");
        // A state that fits, until the hog arrives.
        let small = Setup {
            state_gib: 12.0,
            db_gib: 14.0,
            ..tmpfs.clone()
        };
        assert_eq!(model(small.clone(), "x").oom_at(), None);
        let m = model(
            Setup {
                hog_gib: 6.0,
                ..small
            },
            "x",
        );
        let start = m.hog_from().unwrap();
        assert_eq!(m.oom_at(), Some(start + 60.0));
        // Swap that cannot hold what the tmpfs spills.
        let m = model(
            Setup {
                swap_gib: 4.0,
                ..seed_setup(0.0)
            },
            "x",
        );
        assert!(m.oom_at().is_some());
    }

    #[test]
    fn heap_with_hugepages_for_the_whole_state_never_faults() {
        let m = model(
            Setup {
                place: Place::Disk,
                mode: Mode::Heap,
                huge_gib: 48.0,
                budget_gib: 8.0,
                swap_gib: 0.0,
                ..seed_setup(0.0)
            },
            "huge",
        );
        assert_eq!(m.oom_at(), None);
        let t = caught_up(&m) + HOUR;
        assert_eq!(m.major_rate(t), 0.0);
        assert!(m.rss_gib(t) < 2.0, "hugetlb pages are not RSS");
        // Without them, heap preloads the whole 48 GiB file into swappable memory.
        let f = Setup {
            place: Place::Disk,
            mode: Mode::Heap,
            ..seed_setup(0.0)
        }
        .fit(0.0);
        assert!((f.anon_swap_gib - (48.0 - R_REF_GIB)).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn spring_reports_block_metrics_every_1000th_block_while_far_behind() {
        let gated = NodeosModel::new(seed_setup(8.0), seed("g"), 120.0, 120.0, true);
        let every = NodeosModel::new(seed_setup(8.0), seed("g"), 120.0, 120.0, false);
        let start = gated.hog_from().unwrap();
        let t0 = start + 6.0 * HOUR;
        let t1 = t0 + HOUR;
        let (g, _) = (gated.reported(t1).0 - gated.reported(t0).0, 0);
        let e = every.reported(t1).0 - every.reported(t0).0;
        assert!((e / g - 1000.0).abs() < 1.0, "{e} vs {g}");
        // The plugin's own latency figure is the lag of the blocks it reports.
        let (n0, l0) = every.reported(t0);
        let (n1, l1) = every.reported(t1);
        let lag_s = (l1 - l0) / (n1 - n0) / 1e6;
        let behind = every.at(t0 + 0.5 * HOUR).behind / BLOCKS_PER_SECOND;
        assert!((lag_s / behind - 1.0).abs() < 0.05, "{lag_s} vs {behind}");
    }

    /// On a chain whose load varies, two nodes in sync at one moment count the same
    /// transactions per block, and twelve simulated hours later others; a busier chain
    /// costs more per block (a hog that kept up on the steady chain is behind at the peak).
    #[test]
    fn a_varying_chain_is_one_for_nodes_side_by_side_and_another_hours_later() {
        let load = ChainLoad {
            amplitude: 0.3,
            noise: 0.05,
            seed: 19,
        };
        let origin = 86_400.0 * 11_574.0;
        let on =
            |name: &str, origin: f64| model(seed_setup(0.0), name).with_chain(Some((load, origin)));
        let per_block = |m: &NodeosModel, t0: f64, t1: f64| {
            (m.reported_txs(t1) - m.reported_txs(t0)) / (m.reported(t1).0 - m.reported(t0).0)
        };
        let (a, b) = (on("a", origin), on("b", origin));
        let t0 = caught_up(&a).max(caught_up(&b)) + HOUR;
        let (pa, pb) = (per_block(&a, t0, t0 + HOUR), per_block(&b, t0, t0 + HOUR));
        assert!((pa / pb - 1.0).abs() < 0.01, "{pa} {pb}");
        let c = on("c", origin + 12.0 * HOUR);
        let t = caught_up(&c) + HOUR;
        let pc = per_block(&c, t, t + HOUR);
        assert!((pa / pc - 1.0).abs() > 0.2, "{pa} then {pc}");
        // Steady: the mean block.
        let s = model(seed_setup(0.0), "s");
        let t = caught_up(&s) + HOUR;
        assert!((per_block(&s, t, t + HOUR) - TRX_PER_BLOCK).abs() < 1e-6);
        assert!(capacity_at(10.0, 1.3) < capacity(10.0));
    }

    #[test]
    fn a_run_is_reproducible_from_its_seed() {
        let a = model(seed_setup(6.0), "p");
        let b = model(seed_setup(6.0), "p");
        let ts: Vec<f64> = (0..40).map(|i| i as f64 * 1234.0).collect();
        assert_eq!(
            ts.iter().map(|t| a.lag_blocks(*t)).collect::<Vec<_>>(),
            ts.iter().map(|t| b.lag_blocks(*t)).collect::<Vec<_>>()
        );
    }
}
