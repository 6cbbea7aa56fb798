//! A full Firedancer follower: no Agave inside, so the lab plays its own replay. It boots
//! its tiles, loads a snapshot (its snapct/snapld/snapdc/snapin tiles, which then shut
//! down), then replays from the snapshot's slot with its execrp tiles until it reaches the
//! slot turbine delivers, and follows the cluster after that. What it serves is what
//! `watch` reads (src/app/shared/commands/watch/watch.c @v1.1.4): repair's current slot
//! (the turbine slot), replay's reset slot, and the transactions and slots replayed.
//!
//! The chain it follows is the lab's Solana chain (crate::sim::chain_load::solana): on a
//! machine whose chain load varies, its blocks carry the chain's load and a busy chain
//! skips more slots, as the Agave model's chain does; on a steady one, the mean block and
//! skip rate. Replay serves what the chain's load is read from (metrics.xml @v1.0.1 L786,
//! L815, @v1.1.4 L1229, L1254): the scheduler's blocks fully replayed (`SchedBlockReplayed`,
//! fd_sched.c `block_removed_cnt`: every fork's blocks) and the consensus root
//! (`RootSlot`, fd_replay_tile.c L144 @v1.1.4, 32 slots behind replay here, the tower's
//! lockout). Counts compared with slots are in simulated units, like the slots (as the
//! Agave lab's getEpochInfo counts): the blocks, and `txn_processed`.
//!
//! Two transaction counts, as upstream keeps them (src/discof/replay/): the scheduler's
//! transactions fully replayed, a counter from the tile's start (fd_sched.c
//! `txn_done_cnt`), and `txn_processed`, which replay *sets* on every completed block
//! (fd_replay_tile.c `publish_slot_completed`): from v1.1.0 the block's fork's count since
//! genesis (`parent_txn_count + txn_count`, L337 @v1.1.4; the snapshot manifest's total
//! when the snapshot loads, fd_ssload.c L399), before it the block's own count
//! (`txn_count`, L358 @v1.0.1). So it is 0, then the chain's total, and lower whenever
//! replay completes a block of a lighter fork, until the next block of the heavier one.
//!
//! Calibration. The cluster is the Agave model's mainnet (2.5 slots a second, 4,800 TPS,
//! `super::super::agave::model`). Upstream states only that "10 execrp tiles achieve near
//! optimal replay speed under current mainnet conditions"
//! (src/app/firedancer/config/default.toml L875-876 @v1.1.4); the rest is the lab's
//! assumption, to be replaced by measurements:
//! - replay speed saturates in the execrp count: `MAX_REPLAY * (1 - e^(-n / 3.5))` slots
//!   a second, 94% of the most at 10 tiles, 7.5 slots a second (3x the cluster); one tile
//!   (2.0) cannot keep up with the cluster's 2.5;
//! - the snapshot takes 20 minutes to download and load, and is 500 slots old;
//! - the chain's transactions since genesis are the mean slot's times the slot (mainnet
//!   counts hundreds of billions);
//! - one slot in 200 also has a block of a minority fork, built on the slot before its
//!   parent with half a slot's transactions, which replay completes halfway through the
//!   slot's replay.

use super::super::agave::model::{CHAIN_TPS, SLOTS_PER_SECOND};
use super::super::uniform;
use super::full_snapshots::{Sources, Start};
use crate::sim::chain_load::solana;
use crate::topology::ChainLoad;

/// Slots a second replay reaches with unlimited execrp tiles (assumption).
pub const MAX_REPLAY: f64 = 8.0;
/// execrp tiles at which replay reaches 63% of its most (assumption).
const EXECRP_SCALE: f64 = 3.5;
/// Seconds from running tiles to a downloaded and loaded snapshot (assumption; its parts
/// and a local snapshot's in [`super::full_snapshots`]).
pub const SNAPSHOT_S: f64 = 1200.0;
/// The cluster's slot when the validator starts (any slot of mainnet's era).
const SLOT0: f64 = 360_000_000.0;
/// Transactions in a mainnet slot, on average.
const TXN_PER_SLOT: f64 = CHAIN_TPS / SLOTS_PER_SECOND;
/// Slots that also have a minority fork's block (assumption).
const FORK_SHARE: f64 = 1.0 / 200.0;
const FORK: u64 = 37;
/// Slots from replay's slot back to the consensus root: the tower's full lockout
/// (MAX_LOCKOUT_HISTORY 31, plus the slot voted on).
const ROOT_DISTANCE: f64 = 32.0;

#[derive(Debug, Clone, PartialEq)]
pub struct FullFollower {
    seed: u64,
    /// Slots a second replay can do with this many execrp tiles.
    pub speed: f64,
    /// When tiles run (simulated seconds).
    boot: f64,
    /// A chain whose load varies, and the simulated time since the epoch at start.
    chain: Option<(ChainLoad, f64)>,
    /// Where its snapshot comes from, how old it is and how long it takes to load.
    snapshot: Start,
}

impl FullFollower {
    pub fn new(seed: u64, execrp: u32, boot: f64) -> Self {
        FullFollower {
            seed,
            speed: replay_speed(execrp),
            boot,
            chain: None,
            // Nothing on disk: the cluster's newest, downloaded.
            snapshot: Start::decide(
                None,
                &[],
                SLOT0 as u64,
                &Sources {
                    incremental: true,
                    max_full_age: 1_000,
                    max_incremental_age: 50,
                    keep_full: 1,
                    keep_incremental: 1,
                },
            ),
        }
    }

    /// The same follower starting as `start` says (a local snapshot, or a download).
    pub fn with_snapshot(mut self, start: Start) -> Self {
        self.snapshot = start;
        self
    }

    /// snapct's state at `t`, and the bytes of a downloaded full snapshot written out.
    pub fn snapct(&self, t: f64) -> (u64, u64) {
        let since = t - self.boot;
        (
            self.snapshot.state(since),
            self.snapshot.full_bytes_written(since),
        )
    }

    /// The archives it downloaded by `t`, into its directory on the node.
    pub fn write_files(&self, t: f64) -> std::io::Result<()> {
        self.snapshot.write(t - self.boot)
    }

    /// The same follower of a chain whose load varies, started at simulated time `origin`
    /// (seconds since the epoch); None: a steady chain.
    pub fn with_chain(mut self, chain: Option<(ChainLoad, f64)>) -> Self {
        self.chain = chain;
        self
    }

    /// The chain's clock at `s` slots after the snapshot: when the chain made that slot.
    fn chain_time(&self, s: f64) -> f64 {
        let origin = self.chain.map_or(0.0, |(_, o)| o);
        origin + (self.snapshot_slot() + s - SLOT0) / SLOTS_PER_SECOND
    }

    /// Blocks and transactions of the chain in its first `s` slots after the snapshot;
    /// the transactions with a smooth wave over the slots besides (so one slot's differ
    /// from the next; the count only grows).
    fn chain(&self, s: f64) -> (f64, f64) {
        let (blocks, txs) = match &self.chain {
            Some((c, _)) => solana::made(Some(c), self.chain_time(0.0), self.chain_time(s)),
            // What `made` sums on a steady chain, at once.
            None => {
                let blocks = s.max(0.0) * (1.0 - solana::SKIP_RATE);
                (blocks, blocks * solana::TX_PER_BLOCK)
            }
        };
        (
            blocks,
            txs + TXN_PER_SLOT * 0.1 * 400.0 * (1.0 - (s / 400.0).cos()),
        )
    }

    /// When the snapshot is loaded and replay starts.
    pub fn replay_start(&self) -> f64 {
        self.boot + self.snapshot.load_s()
    }

    /// The cluster's slot at `t` (what turbine delivers once gossip is up).
    pub fn cluster_slot(&self, t: f64) -> f64 {
        SLOT0 + SLOTS_PER_SECOND * t
    }

    fn snapshot_slot(&self) -> f64 {
        self.cluster_slot(self.boot) - self.snapshot.age as f64
    }

    /// When replay reaches the cluster, if it ever does.
    pub fn caught_up_at(&self) -> Option<f64> {
        let gap = self.cluster_slot(self.replay_start()) - self.snapshot_slot();
        (self.speed > SLOTS_PER_SECOND)
            .then(|| self.replay_start() + gap / (self.speed - SLOTS_PER_SECOND))
    }

    /// The slot replay has reached at `t` (fractional), None before it starts.
    pub fn replayed_to(&self, t: f64) -> Option<f64> {
        if t < self.replay_start() {
            return None;
        }
        let chasing = self.snapshot_slot() + self.speed * (t - self.replay_start());
        Some(match self.caught_up_at() {
            Some(at) if t >= at => self.cluster_slot(t),
            _ => chasing,
        })
    }

    /// Repair's current slot: the highest slot turbine has shown, 0 before tiles run.
    pub fn turbine_slot(&self, t: f64) -> u64 {
        if t < self.boot {
            0
        } else {
            self.cluster_slot(t).floor() as u64
        }
    }

    /// Replay's reset slot: 0 until replay starts; a slot or two behind turbine when
    /// keeping up (the slot in flight).
    pub fn reset_slot(&self, t: f64) -> u64 {
        match self.replayed_to(t) {
            None => 0,
            Some(s) => {
                let behind = 1.0 + (2.0 * uniform(self.seed, 31, (t / 10.0) as u64)).floor();
                (s.floor() - behind).max(self.snapshot_slot()) as u64
            }
        }
    }

    /// Slots replayed by `t`.
    pub fn slots(&self, t: f64) -> f64 {
        self.replayed_to(t)
            .map(|s| s - self.snapshot_slot())
            .unwrap_or(0.0)
    }

    /// Transactions replayed by `t` on the cluster's fork: a slot's transactions vary
    /// around the mean with the slot (a smooth wave, so the count only grows).
    pub fn transactions(&self, t: f64) -> f64 {
        self.chain(self.slots(t)).1
    }

    /// The scheduler's transactions fully replayed by `t`: the cluster's fork's and the
    /// minority forks' blocks (`SchedTxnDone`, a counter).
    pub fn sched_done(&self, t: f64) -> f64 {
        let s = self.slots(t);
        self.chain(s).1 + s * FORK_SHARE * 0.5 * TXN_PER_SLOT
    }

    /// The scheduler's blocks fully replayed by `t` (`SchedBlockReplayed`, a counter):
    /// the chain's blocks and the minority forks'.
    pub fn blocks_replayed(&self, t: f64) -> f64 {
        let s = self.slots(t);
        self.chain(s).0 + s * FORK_SHARE
    }

    /// The consensus root at `t` (`RootSlot`): 0 until replay starts, then the snapshot's
    /// slot until replay is a lockout past it.
    pub fn root_slot(&self, t: f64) -> u64 {
        match self.replayed_to(t) {
            None => 0,
            Some(s) => (s - ROOT_DISTANCE).max(self.snapshot_slot()).floor() as u64,
        }
    }

    /// Whether the slot `k` after the snapshot has a minority fork's block too.
    fn forked(&self, k: u64) -> bool {
        uniform(self.seed, FORK, k) < FORK_SHARE
    }

    /// What the replay tile's `txn_processed` holds at `t` (simulated transactions): 0
    /// until the snapshot loads; then, from v1.1.0 (`cumulative`), the fork's count since
    /// genesis of the last block replay completed, before it that block's own count.
    pub fn txn_processed(&self, t: f64, cumulative: bool) -> f64 {
        let Some(to) = self.replayed_to(t) else {
            return 0.0;
        };
        let genesis = TXN_PER_SLOT * self.snapshot_slot();
        let done = (to - self.snapshot_slot()).max(0.0);
        let k = done.floor();
        if k < 1.0 {
            // The snapshot's bank: the manifest's total, at either version.
            return genesis;
        }
        let minority = self.forked(k as u64) && done - k >= 0.5;
        let txs = |s: f64| self.chain(s).1;
        match (cumulative, minority) {
            (true, false) => genesis + txs(k),
            (true, true) => genesis + txs((k - 2.0).max(0.0)) + 0.5 * TXN_PER_SLOT,
            // The last block's own: the chain's transactions per block about slot k.
            (false, false) => {
                let (b0, t0) = self.chain(k - 1.0);
                let (b1, t1) = self.chain(k);
                (t1 - t0) / (b1 - b0).max(0.01)
            }
            (false, true) => 0.5 * TXN_PER_SLOT,
        }
    }

    /// Share of time the execrp tiles work at `t`: all of it while chasing the cluster,
    /// the cluster's pace over their speed after.
    pub fn execrp_busy(&self, t: f64) -> f64 {
        match (self.replayed_to(t), self.caught_up_at()) {
            (None, _) => 0.0,
            (Some(_), Some(at)) if t >= at => SLOTS_PER_SECOND / self.speed,
            _ => 0.998,
        }
    }
}

/// Slots a second replay does with `n` execrp tiles (module docs).
pub fn replay_speed(n: u32) -> f64 {
    MAX_REPLAY * (1.0 - (-f64::from(n) / EXECRP_SCALE).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_execrp_tiles_are_near_the_best_and_one_falls_behind() {
        assert!(replay_speed(10) / MAX_REPLAY > 0.93);
        assert!(replay_speed(10) > 2.9 * SLOTS_PER_SECOND);
        assert!(replay_speed(1) < SLOTS_PER_SECOND);
        assert!(replay_speed(2) > SLOTS_PER_SECOND);
        assert_eq!(FullFollower::new(1, 1, 240.0).caught_up_at(), None);
    }

    #[test]
    fn it_loads_a_snapshot_then_catches_up_then_follows() {
        let f = FullFollower::new(7, 10, 240.0);
        assert_eq!(f.reset_slot(600.0), 0);
        assert!(f.turbine_slot(600.0) > 0);
        let at = f.caught_up_at().unwrap();
        // 3,500 slots behind at the start of replay, gained back at ~5 slots a second.
        assert!((1_800.0..2_300.0).contains(&at), "{at}");
        let lag = |t: f64| f.turbine_slot(t) as f64 - f.reset_slot(t) as f64;
        assert!(lag(f.replay_start() + 1.0) > 3_000.0);
        assert!(
            (1.0..=3.0).contains(&lag(at + 5_000.0)),
            "{}",
            lag(at + 5_000.0)
        );
        // Replayed TPS: the cluster's once it follows.
        let tps = (f.transactions(at + 7_000.0) - f.transactions(at + 3_000.0)) / 4_000.0;
        assert!((4_300.0..5_300.0).contains(&tps), "{tps}");
        assert!((0.3..0.4).contains(&f.execrp_busy(at + 10.0)));
        let done = (f.sched_done(at + 7_000.0) - f.sched_done(at + 3_000.0)) / 4_000.0;
        assert!((tps..tps * 1.01).contains(&done), "{done} {tps}");
    }

    /// The chain's load as replay reads it: transactions per block replayed and the
    /// share of the root's slots without one; on a varying chain a busy hour has fuller
    /// blocks and more skipped slots, and two followers read one chain.
    #[test]
    fn replay_reads_the_chains_load_and_skipped_slots() {
        let window = |f: &FullFollower, from: f64, to: f64| {
            let blocks = f.blocks_replayed(to) - f.blocks_replayed(from);
            let txs = f.txn_processed(to, true) - f.txn_processed(from, true);
            let slots = (f.root_slot(to) - f.root_slot(from)) as f64;
            (txs / blocks, 100.0 * (1.0 - blocks / slots))
        };
        let steady = FullFollower::new(7, 10, 240.0);
        let at = steady.caught_up_at().unwrap();
        let (per_block, skip) = window(&steady, at + 600.0, at + 7_800.0);
        assert!((1_950.0..2_100.0).contains(&per_block), "{per_block}");
        // 5% skipped, less the minority forks' blocks (one slot in 200).
        assert!((4.0..5.0).contains(&skip), "{skip}");
        let load = ChainLoad {
            amplitude: 0.3,
            noise: 0.05,
            seed: 19,
        };
        // Started three hours before the busiest hour of a day, and twelve hours later.
        let origin = 86_400.0 * 11_574.0 + 3.0 * 3_600.0;
        let on = |seed, origin| FullFollower::new(seed, 10, 240.0).with_chain(Some((load, origin)));
        let (busy, skip_busy) = window(&on(1, origin), 3.0 * 3_600.0, 4.0 * 3_600.0);
        let (other, skip_other) = window(
            &on(2, origin - 100.0),
            3.0 * 3_600.0 + 100.0,
            4.0 * 3_600.0 + 100.0,
        );
        assert!((busy / other - 1.0).abs() < 0.01, "{busy} {other}");
        assert!(
            (skip_busy - skip_other).abs() < 0.2,
            "{skip_busy} {skip_other}"
        );
        let (quiet, skip_quiet) = window(&on(3, origin + 43_200.0), 3.0 * 3_600.0, 4.0 * 3_600.0);
        assert!(busy > 1.3 * quiet, "{busy} {quiet}");
        assert!(skip_busy > skip_quiet + 2.0, "{skip_busy} {skip_quiet}");
        // The root follows replay a lockout behind, and is 0 before replay starts.
        assert_eq!(steady.root_slot(steady.replay_start() - 1.0), 0);
        let t = at + 1_000.0;
        assert!(steady.reset_slot(t) - steady.root_slot(t) > 25);
    }

    #[test]
    fn txn_processed_is_set_per_block_not_counted() {
        let f = FullFollower::new(7, 10, 240.0);
        let start = f.replay_start();
        assert_eq!(f.txn_processed(start - 1.0, true), 0.0);
        // The snapshot's total at once: hundreds of billions.
        assert!(f.txn_processed(start + 0.1, true) > 5e11);
        // Every block of a minority fork drops the fork total below the last value, and
        // a slot's own count (v1.0.x) goes up and down with the slots.
        let (mut drops, mut last, mut own) = (0, 0.0, Vec::new());
        for i in 0..200_000 {
            let t = start + f64::from(i) * 0.05;
            let v = f.txn_processed(t, true);
            drops += u32::from(v < last);
            last = v;
            own.push(f.txn_processed(t, false));
        }
        assert!(drops > 5, "{drops}");
        assert!(own.windows(2).filter(|w| w[1] < w[0]).count() > 1_000);
        // The scheduler's count only grows.
        let done: Vec<f64> = (0..10_000)
            .map(|i| f.sched_done(start + f64::from(i)))
            .collect();
        assert!(done.windows(2).all(|w| w[1] >= w[0]));
    }
}
