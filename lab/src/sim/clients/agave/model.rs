//! A model of an unstaked Agave validator on mainnet-beta as a function of its memory
//! limit and of time since start, calibrated from "Maxing Out the SVM" (seed 000):
//! Figure 3 (average TPS, time at zero TPS, max TPS per RAM size) and section 3.2:
//! - 1 TiB and up catch up within 1-2 hours and keep up smoothly, RSS around 512 GiB,
//!   VSZ 600-700 GiB, few major faults;
//! - 512 GiB keeps up, with more time at zero TPS, RSS near the limit and about 1 TiB
//!   of virtual memory;
//! - 256 GiB catches up but then processes about 1,000 TPS less than the chain, so its
//!   slot lag grows (it falls behind), with heavy faulting;
//! - 128 GiB never catches up, runs about 1,200 TPS (max about 2,300) and is OOM-killed
//!   within 3 hours.
//!
//! Everything is deterministic for a seed (the pod's name): the noise of each stretch of
//! time comes from a hash of the seed and the stretch's index.
//!
//! On a chain whose load varies (the machine's `chainLoad`, crate::sim::chain_load) the
//! stretches are the chain's: they start at fixed simulated times, their noise comes from
//! the chain's seed, and a node keeping up replays the chain's transactions, as many more
//! per slot as the load is above the mean; nodes side by side see one chain. getEpochInfo
//! counts the chain's blocks and transactions up to the node's slot.

use super::super::{normal, uniform};
use crate::sim::chain_load::solana;
use crate::topology::ChainLoad;

/// One anchor of the calibration table.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    gib: f64,
    /// Hours to catch up after start; infinite if it never does.
    catch_up_h: f64,
    /// Processing capacity relative to the chain once caught up (below 1 falls behind).
    capacity: f64,
    /// Fraction of time at zero TPS (Figure 3: zero-TPS seconds / 43,200).
    zero_fraction: f64,
    /// Mean TPS of the non-zero stretches (Figure 3 average / (1 - zero fraction)).
    busy_tps: f64,
    rss_gib: f64,
    vsz_gib: f64,
    major_faults: f64,
    minor_faults: f64,
}

const ANCHORS: [Anchor; 5] = [
    Anchor {
        gib: 128.0,
        catch_up_h: f64::INFINITY,
        capacity: 0.25,
        zero_fraction: 0.45,
        busy_tps: 1330.0,
        rss_gib: 124.0,
        vsz_gib: 420.0,
        major_faults: 6000.0,
        minor_faults: 60000.0,
    },
    Anchor {
        gib: 256.0,
        catch_up_h: 1.5,
        capacity: 0.80,
        zero_fraction: 0.36,
        busy_tps: 5940.0,
        rss_gib: 250.0,
        vsz_gib: 1000.0,
        major_faults: 2500.0,
        minor_faults: 45000.0,
    },
    Anchor {
        gib: 512.0,
        catch_up_h: 1.25,
        capacity: 1.0,
        zero_fraction: 0.31,
        busy_tps: 6720.0,
        rss_gib: 500.0,
        vsz_gib: 1000.0,
        major_faults: 300.0,
        minor_faults: 30000.0,
    },
    Anchor {
        gib: 1024.0,
        catch_up_h: 1.5,
        capacity: 1.0,
        zero_fraction: 0.24,
        busy_tps: 6380.0,
        rss_gib: 512.0,
        vsz_gib: 680.0,
        major_faults: 8.0,
        minor_faults: 25000.0,
    },
    Anchor {
        gib: 1536.0,
        catch_up_h: 1.0,
        capacity: 1.0,
        zero_fraction: 0.21,
        busy_tps: 5890.0,
        rss_gib: 512.0,
        vsz_gib: 650.0,
        major_faults: 3.0,
        minor_faults: 24000.0,
    },
];

/// Chain: 400 ms slots; the chain's own transaction rate for the lag arithmetic.
pub const SLOTS_PER_SECOND: f64 = solana::SLOTS_PER_SECOND;
pub const CHAIN_TPS: f64 = solana::TPS;
/// getHealth reports a node healthy (0 slots behind) within this distance (Agave's
/// --health-check-slot-distance default).
pub const HEALTH_SLOT_DISTANCE: f64 = 128.0;
/// A validator behind the chain always has slots to replay: it is rarely idle.
const BEHIND_ZERO_FRACTION: f64 = 0.08;
/// After catching up, capacity holds for a while, then declines to the anchor's as the
/// working set outgrows memory (256 GiB: caught up, then falling behind).
const HOLD_S: f64 = 3600.0;
const RAMP_S: f64 = 7200.0;
/// The anonymous working set (accounts index, caches) grows towards this; above the
/// memory limit the kernel OOM-kills the validator (file-backed pages just fault).
const ANON_BASE_GIB: f64 = 20.0;
const ANON_GROWTH_GIB: f64 = 180.0;
const ANON_TAU_H: f64 = 2.8;

fn interpolate(gib: f64) -> Anchor {
    let x = gib.clamp(ANCHORS[0].gib, ANCHORS[4].gib).log2();
    let i = ANCHORS
        .windows(2)
        .position(|w| x <= w[1].gib.log2())
        .unwrap_or(ANCHORS.len() - 2);
    let (a, b) = (ANCHORS[i], ANCHORS[i + 1]);
    let f = (x - a.gib.log2()) / (b.gib.log2() - a.gib.log2());
    let lerp = |p: f64, q: f64| p + (q - p) * f;
    // Interpolate the catch-up *rate*, so "never" (rate 0) blends smoothly.
    let rate = lerp(1.0 / a.catch_up_h, 1.0 / b.catch_up_h);
    Anchor {
        gib,
        catch_up_h: if rate <= 0.0 {
            f64::INFINITY
        } else {
            1.0 / rate
        },
        capacity: lerp(a.capacity, b.capacity),
        zero_fraction: lerp(a.zero_fraction, b.zero_fraction),
        busy_tps: lerp(a.busy_tps, b.busy_tps),
        rss_gib: lerp(a.rss_gib, b.rss_gib),
        vsz_gib: lerp(a.vsz_gib, b.vsz_gib),
        major_faults: lerp(a.major_faults, b.major_faults).max(0.0),
        minor_faults: lerp(a.minor_faults, b.minor_faults),
    }
}

#[derive(Debug, Clone)]
pub struct AgaveModel {
    seed: u64,
    limit_gib: f64,
    a: Anchor,
    /// Length of a stretch of constant TPS, in simulated seconds.
    stretch_s: f64,
    /// A chain whose load varies, and the simulated time since the epoch at start.
    chain: Option<(ChainLoad, f64)>,
    /// Slots behind the chain when it starts from the ledger of its volume (a restart);
    /// None: it starts from a snapshot it downloads.
    resume: Option<f64>,
    /// Seconds such a restart loads its state before serving RPC ([`LOCAL_START_S`]
    /// from the bank snapshot of a clean exit; longer from its archives).
    local_start_s: f64,
}

/// Seconds a restarted validator takes to load the snapshot on its own ledger volume and
/// replay its ledger's last slots before it serves RPC again (no download; the lab's
/// assumption: minutes on a real node).
pub const LOCAL_START_S: f64 = 300.0;

const TPS: u64 = 1;
const ZERO: u64 = 2;
const SPIKE: u64 = 3;
const FAULTS: u64 = 4;
const MEMORY: u64 = 5;
const OOM: u64 = 6;

impl AgaveModel {
    /// `stretch_s`: simulated seconds per stretch of constant TPS; the lab uses a few
    /// scrape intervals' worth, so every stretch is visible to Prometheus.
    pub fn new(seed: u64, limit_bytes: u128, stretch_s: f64) -> Self {
        let limit_gib = limit_bytes as f64 / (1u64 << 30) as f64;
        Self {
            seed,
            limit_gib,
            a: interpolate(limit_gib),
            stretch_s: stretch_s.max(1.0),
            chain: None,
            resume: None,
            local_start_s: LOCAL_START_S,
        }
    }

    /// A restart that loads its state for `seconds` (at least [`LOCAL_START_S`]) before
    /// it serves RPC: from its snapshot archives after an unclean stop.
    pub fn loading_for(mut self, seconds: f64) -> Self {
        self.local_start_s = seconds.max(LOCAL_START_S);
        self
    }

    /// The same node restarting on the ledger it kept, `gap` slots behind the chain: it
    /// catches up that gap only, at the rate it catches up from a snapshot (two slots a
    /// second over the chain's), and serves RPC once its local snapshot is loaded.
    pub fn resuming(mut self, gap: f64) -> Self {
        self.resume = Some(gap.max(0.0));
        self
    }

    /// The same node following a chain whose load varies, started at simulated time
    /// `origin` (seconds since the epoch); None: a steady chain.
    pub fn with_chain(mut self, chain: Option<(ChainLoad, f64)>) -> Self {
        self.chain = chain;
        self
    }

    /// On a machine `speed` times as fast as the seeds' (topology `speed`): its capacity
    /// once caught up scales with it, so a size that keeps up on the seeds' machines falls
    /// behind on one slower by more than its margin (none above 512 GiB: capacity 1).
    pub fn on_machine_of_speed(mut self, speed: f64) -> Self {
        self.a.capacity *= speed;
        self
    }

    fn origin(&self) -> f64 {
        self.chain.map_or(0.0, |(_, origin)| origin)
    }

    /// How far into its stretch the chain is at start: on a varying chain stretches start
    /// at multiples of their length since the epoch, the same for every node.
    fn phase(&self) -> f64 {
        self.origin().rem_euclid(self.stretch_s)
    }

    /// The stretch containing `t`.
    fn stretch(&self, t: f64) -> u64 {
        ((t + self.phase()) / self.stretch_s).floor().max(0.0) as u64
    }

    fn stretch_start(&self, i: u64) -> f64 {
        (i as f64 * self.stretch_s - self.phase()).max(0.0)
    }

    /// Where the piece of constant rate containing `t` starts: its stretch's start, or
    /// the catch-up if that falls within the stretch and `t` is past it. A node that
    /// reports itself caught up replays the chain as it comes from that moment, not at
    /// its catch-up pace to the end of the stretch (which made the later side of a pair,
    /// measured from its catch-up, replay up to 30% more for a third of a lab window).
    fn piece_start(&self, t: f64) -> f64 {
        let start = self.stretch_start(self.stretch(t));
        if self.caught_up(t) {
            start.max(self.catch_up_seconds())
        } else {
            start
        }
    }

    /// The seed and index of stretch `i`'s noise: the chain's on a varying chain (the
    /// stretch's index since the epoch), the node's own otherwise.
    fn key(&self, i: u64) -> (u64, u64) {
        match self.chain {
            Some((c, origin)) => (c.seed, i + (origin / self.stretch_s).floor() as u64),
            None => (self.seed, i),
        }
    }

    /// The chain's load at `t` (1 on a steady chain).
    fn load(&self, t: f64) -> f64 {
        solana::load(self.chain.as_ref().map(|(c, _)| c), self.origin() + t)
    }

    pub fn catch_up_seconds(&self) -> f64 {
        let from_snapshot = self.a.catch_up_h * 3600.0;
        match self.resume {
            // A node that cannot keep up never catches up, whatever its start.
            Some(gap) if from_snapshot.is_finite() => gap / 2.0,
            _ => from_snapshot,
        }
    }

    /// When the RPC service starts: after the snapshot is downloaded and loaded, a
    /// quarter of the catch-up, at most half an hour; from its own ledger, once the
    /// local snapshot is loaded ([`LOCAL_START_S`]).
    pub fn rpc_start_seconds(&self) -> f64 {
        let from_snapshot = (0.25 * self.a.catch_up_h * 3600.0).min(1800.0);
        match self.resume {
            Some(_) => from_snapshot.min(self.local_start_s),
            None => from_snapshot,
        }
    }

    /// When the anonymous working set outgrows the limit: the OOM kill, if any.
    pub fn oom_at(&self) -> Option<f64> {
        let room = (0.97 * self.limit_gib - ANON_BASE_GIB) / ANON_GROWTH_GIB;
        if room >= 1.0 {
            return None;
        }
        let jitter = 1.0 + 0.05 * (2.0 * uniform(self.seed, OOM, 0) - 1.0);
        Some((-ANON_TAU_H * 3600.0 * (1.0 - room.max(0.0)).ln() * jitter).max(60.0))
    }

    fn caught_up(&self, t: f64) -> bool {
        t >= self.catch_up_seconds()
    }

    /// Processing capacity relative to the chain at `t` (1 until the hold ends).
    fn capacity(&self, t: f64) -> f64 {
        let d = t - self.catch_up_seconds() - HOLD_S;
        if d <= 0.0 {
            1.0
        } else {
            1.0 - (1.0 - self.a.capacity) * (d / RAMP_S).min(1.0)
        }
    }

    /// Transactions per second during the stretch containing `t`.
    pub fn tps(&self, t: f64) -> f64 {
        let i = self.stretch(t);
        let start = self.piece_start(t);
        // The chain's load is the stretch's, whenever in it a node caught up.
        let chain_load = self.load(self.stretch_start(i));
        let (seed, i) = self.key(i);
        let behind = self.slot_lag(start) > HEALTH_SLOT_DISTANCE;
        let keeping_up = self.caught_up(start) && !behind;
        // Keeping up, it replays the chain's slots as they come: their transactions are
        // the chain's load. Behind, it replays as fast as it can.
        let load = if keeping_up { chain_load } else { 1.0 };
        if keeping_up {
            // Keeping up, with bursts of queued slots: peaks far above the mean (the
            // paper's max TPS is about 25x its average), about one every 2 simulated
            // hours; capped per stretch, because a burst lasts a whole stretch and long
            // stretches (a compressed lab) would otherwise be bursts too often for the
            // paper's 3x-mean outlier rule to set them apart.
            let p_burst = (1.0 - (-self.stretch_s / (2.0 * 3600.0)).exp()).min(0.05);
            if uniform(seed, SPIKE, i) < p_burst {
                return self.a.busy_tps
                    * load
                    * (12.0 + 14.0 * uniform(seed, SPIKE, i + 1_000_000));
            }
        }
        let idle = if behind {
            BEHIND_ZERO_FRACTION
        } else {
            self.a.zero_fraction
        };
        if uniform(seed, ZERO, i) < idle {
            return 0.0;
        }
        let sigma = 0.3;
        let noise = (sigma * normal(seed, TPS, i) - sigma * sigma / 2.0).exp();
        let level = if !self.caught_up(start) {
            if self.catch_up_seconds().is_finite() {
                // Catching up: replaying faster than the chain.
                self.a.busy_tps * 1.3
            } else {
                self.a.busy_tps
            }
        } else if behind {
            // Fallen behind: as fast as its capacity lets it.
            CHAIN_TPS * self.capacity(start) / (1.0 - BEHIND_ZERO_FRACTION)
        } else {
            self.a.busy_tps
        };
        level * noise * load
    }

    /// The integral from 0 to `t` of a rate that is constant over each stretch, and on
    /// either side of the catch-up within its stretch.
    fn integrate(&self, t: f64, rate: impl Fn(f64) -> f64) -> f64 {
        let (s, phase) = (self.stretch_s, self.phase());
        let t = t.max(0.0);
        let whole = self.stretch(t);
        let tc = self.catch_up_seconds();
        // Stretch 0 may be cut short by the phase; the last is cut at `t`.
        (0..=whole)
            .map(|i| {
                let a = self.stretch_start(i);
                let b = if i == whole {
                    t
                } else {
                    (i + 1) as f64 * s - phase
                };
                if a < tc && tc < b {
                    rate(a) * (tc - a) + rate(tc) * (b - tc)
                } else {
                    rate(a) * (b - a)
                }
            })
            .sum()
    }

    /// Transactions processed from 0 to `t`.
    pub fn transactions(&self, t: f64) -> f64 {
        self.integrate(t, |u| self.tps(u))
    }

    /// Slots behind the chain.
    pub fn slot_lag(&self, t: f64) -> f64 {
        let tc = self.catch_up_seconds();
        // Catching up removes two slots a second; the start lag is what that takes (from
        // its own ledger: the gap since it stopped).
        let initial = self.resume.unwrap_or(2.0 * tc.min(3600.0 * 1.5));
        let deficit = (1.0 - self.a.capacity).max(0.0) * SLOTS_PER_SECOND;
        let lag = if tc.is_infinite() {
            initial + t * deficit
        } else if t < tc {
            initial * (1.0 - t / tc)
        } else {
            // The integral of (1 - capacity) over the hold and the ramp.
            let d = t - tc - HOLD_S;
            if d <= 0.0 {
                0.0
            } else if d < RAMP_S {
                deficit * d * d / (2.0 * RAMP_S)
            } else {
                deficit * (RAMP_S / 2.0 + d - RAMP_S)
            }
        };
        let jitter = 40.0 * uniform(self.seed, TPS, (t / self.stretch_s) as u64 + 7);
        (lag + jitter).max(0.0)
    }

    /// What getHealth (and so solana-exporter) reports: 0 while within the health
    /// distance, else the lag.
    pub fn reported_slots_behind(&self, t: f64) -> f64 {
        let lag = self.slot_lag(t);
        if lag <= HEALTH_SLOT_DISTANCE {
            0.0
        } else {
            lag.round()
        }
    }

    pub fn slot_height(&self, t: f64) -> f64 {
        (self.first_slot() + t * SLOTS_PER_SECOND - self.slot_lag(t)).round()
    }

    /// The chain's slot when the node starts (its own slot with no lag).
    pub fn slot_height_at_chain_head(&self) -> f64 {
        self.first_slot()
    }

    fn first_slot(&self) -> f64 {
        300_000_000.0 + (self.seed % 10_000_000) as f64
    }

    /// When the chain made the slot the node is at, on the chain's clock.
    fn chain_time(&self, t: f64) -> f64 {
        self.origin() + t - self.slot_lag(t) / SLOTS_PER_SECOND
    }

    /// getEpochInfo's `blockHeight` and `transactionCount` at `t`: the chain's blocks and
    /// transactions up to the node's slot (simulated counts, like the slot: valtune reads
    /// their ratios over a window).
    pub fn chain_counts(&self, t: f64) -> (u64, u64) {
        let (blocks, txs) = solana::made(
            self.chain.as_ref().map(|(c, _)| c),
            self.chain_time(0.0),
            self.chain_time(t),
        );
        let base = self.first_slot() * (1.0 - solana::SKIP_RATE);
        (
            (base + blocks) as u64,
            (base * solana::TX_PER_BLOCK + txs) as u64,
        )
    }

    fn wobble(&self, stream: u64, t: f64) -> f64 {
        1.0 + 0.02 * normal(self.seed, stream, (t / self.stretch_s) as u64)
    }

    /// Resident memory: rising towards the working set the limit allows.
    pub fn rss_bytes(&self, t: f64) -> f64 {
        let target = self.a.rss_gib.min(0.97 * self.limit_gib);
        let warm = 1.0 - 0.85 * (-t / 5400.0).exp();
        let anon = ANON_BASE_GIB + ANON_GROWTH_GIB * (1.0 - (-t / (ANON_TAU_H * 3600.0)).exp());
        let gib = (target * warm).max(anon.min(0.97 * self.limit_gib)) * self.wobble(MEMORY, t);
        gib.min(self.limit_gib) * (1u64 << 30) as f64
    }

    pub fn vsz_bytes(&self, t: f64) -> f64 {
        let gib = self.a.vsz_gib * (1.0 - 0.7 * (-t / 3600.0).exp()) * self.wobble(MEMORY + 10, t);
        gib * (1u64 << 30) as f64
    }

    /// Page faults per second (major and minor); warm-up faults in the snapshot.
    pub fn fault_rates(&self, t: f64) -> (f64, f64) {
        let warmup = if self.caught_up(t) { 1.0 } else { 3.0 };
        let n = (0.25 * normal(self.seed, FAULTS, (t / self.stretch_s) as u64)).exp();
        (self.a.major_faults * warmup * n, self.a.minor_faults * n)
    }

    /// Faults from 0 to `t` (major, minor).
    pub fn faults(&self, t: f64) -> (f64, f64) {
        (
            self.integrate(t, |u| self.fault_rates(u).0),
            self.integrate(t, |u| self.fault_rates(u).1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::seed;
    use super::*;

    const GI: u128 = 1 << 30;
    const HOUR: f64 = 3600.0;

    fn model(gib: u128, name: &str) -> AgaveModel {
        // Fine stretches, so the statistics below rest on hundreds of samples.
        AgaveModel::new(seed(name), gib * GI, 120.0)
    }

    /// From its own ledger a node starts where it stopped, serves RPC within minutes and
    /// catches up the gap only; from a snapshot it starts near the head, later.
    #[test]
    fn a_restart_on_its_ledger_resumes_from_its_last_slot() {
        let fresh = model(512, "resume");
        let head = fresh.slot_height_at_chain_head();
        let resumed = model(512, "resume").resuming(20_000.0);
        assert!((resumed.slot_height(0.0) - (head - 20_000.0)).abs() <= 40.0);
        assert_eq!(resumed.rpc_start_seconds(), LOCAL_START_S);
        assert!(fresh.rpc_start_seconds() > LOCAL_START_S);
        assert!(resumed.slot_lag(9_000.0) > 128.0 && resumed.slot_lag(10_001.0) <= 40.0);
        // Its slot never goes back.
        let slots: Vec<f64> = (0..200)
            .map(|i| resumed.slot_height(i as f64 * 60.0))
            .collect();
        assert!(slots.windows(2).all(|w| w[1] >= w[0] - 40.0), "{slots:?}");
    }

    /// Mean TPS over [from, to], sampled per stretch, excluding the paper's outliers.
    fn average(m: &AgaveModel, from: f64, to: f64) -> (f64, f64, f64) {
        let samples: Vec<f64> = (0..)
            .map(|i| from + i as f64 * m.stretch_s)
            .take_while(|t| *t < to)
            .map(|t| m.tps(t))
            .collect();
        let plain = samples.iter().sum::<f64>() / samples.len() as f64;
        let kept: Vec<f64> = samples
            .iter()
            .copied()
            .filter(|v| *v <= 3.0 * plain)
            .collect();
        let zero = samples.iter().filter(|v| **v == 0.0).count() as f64 / samples.len() as f64;
        let max = samples.iter().copied().fold(0.0, f64::max);
        (kept.iter().sum::<f64>() / kept.len() as f64, zero, max)
    }

    #[test]
    fn the_paper_shape_holds_across_seeds() {
        for name in ["a", "b", "c", "d"] {
            // 128 GiB: never catches up, about 1,200 TPS, OOM-killed within 3 hours.
            let m = model(128, name);
            let oom = m.oom_at().expect("128 GiB is OOM-killed");
            assert!(oom > 1.5 * HOUR && oom < 3.0 * HOUR, "oom at {oom}");
            assert!(m.reported_slots_behind(oom - 1.0) > 1000.0);
            let (avg, _, max) = average(&m, 0.0, oom);
            assert!((800.0..1600.0).contains(&avg), "128 GiB avg {avg}");
            assert!(max < 4000.0, "128 GiB max {max}");

            // 256 GiB: catches up (and stays so for a while), then falls behind by
            // about 1,000 TPS.
            let m = model(256, name);
            assert_eq!(m.oom_at(), None);
            let tc = m.catch_up_seconds();
            assert!(tc < 4.0 * HOUR);
            assert_eq!(m.reported_slots_behind(tc + 60.0), 0.0);
            assert_eq!(m.reported_slots_behind(tc + 0.9 * HOUR), 0.0);
            assert!(m.reported_slots_behind(tc + 12.0 * HOUR) > 10_000.0);
            let (avg, _, _) = average(&m, tc + 6.0 * HOUR, tc + 12.0 * HOUR);
            assert!((3300.0..4300.0).contains(&avg), "256 GiB behind avg {avg}");

            // 512 GiB and up: catch up and keep up for the 12-hour window.
            for gib in [512, 1024, 1536] {
                let m = model(gib, name);
                assert_eq!(m.oom_at(), None);
                let tc = m.catch_up_seconds();
                assert!(tc <= 2.0 * HOUR);
                assert_eq!(m.reported_slots_behind(tc + 12.0 * HOUR), 0.0);
                let (avg, zero, max) = average(&m, tc, tc + 12.0 * HOUR);
                assert!((3800.0..5800.0).contains(&avg), "{gib} GiB avg {avg}");
                assert!((0.1..0.45).contains(&zero), "{gib} GiB zero {zero}");
                assert!(max > 30_000.0, "{gib} GiB max {max}");
                let rss = m.rss_bytes(tc + 6.0 * HOUR) / GI as f64;
                assert!(rss > 400.0 && rss < gib as f64, "{gib} GiB rss {rss}");
            }
        }
    }

    /// A machine slower than the seeds' (topology `speed`) turns a size that keeps up
    /// into one that falls behind: the heterogeneous pool a non-monotone search meets.
    #[test]
    fn on_a_slower_machine_1024_gib_falls_behind() {
        let m = model(1024, "x").on_machine_of_speed(0.9);
        let tc = m.catch_up_seconds();
        assert_eq!(m.reported_slots_behind(tc + 0.9 * HOUR), 0.0);
        assert!(m.reported_slots_behind(tc + 12.0 * HOUR) > 5_000.0);
        let same = model(1024, "x").on_machine_of_speed(1.0);
        assert_eq!(same.reported_slots_behind(tc + 12.0 * HOUR), 0.0);
    }

    /// Between the anchors: 192 GiB catches up slowly (after 2 to 3 hours) and is not
    /// OOM-killed, which the lab's TimedOut test relies on.
    #[test]
    fn between_128_and_256_gib_catching_up_is_slow_but_possible() {
        let m = model(192, "x");
        let tc = m.catch_up_seconds();
        assert!((2.0 * HOUR..3.0 * HOUR).contains(&tc), "{tc}");
        assert!(
            m.oom_at().is_none_or(|t| t > 6.0 * HOUR),
            "{:?}",
            m.oom_at()
        );
        assert!(m.reported_slots_behind(0.8 * tc) > 1000.0);
    }

    #[test]
    fn more_memory_means_less_time_at_zero_and_fewer_faults() {
        let (_, z512, _) = average(&model(512, "x"), 2.0 * HOUR, 14.0 * HOUR);
        let (_, z1536, _) = average(&model(1536, "x"), 2.0 * HOUR, 14.0 * HOUR);
        assert!(z512 > z1536);
        let f = |g| model(g, "x").fault_rates(5.0 * HOUR).0;
        assert!(f(256) > f(512) && f(512) > f(1024));
    }

    #[test]
    fn counters_integrate_the_rates_and_never_decrease() {
        let m = model(512, "counter");
        let mut last = 0.0;
        for i in 0..2000 {
            let t = i as f64 * 37.0;
            let n = m.transactions(t);
            assert!(n >= last);
            last = n;
        }
        // Over one stretch the counter grows by exactly rate x time.
        let s = m.stretch_s;
        let t = 100.0 * s;
        let grown = m.transactions(t + s * 0.5) - m.transactions(t);
        assert!((grown - m.tps(t) * s * 0.5).abs() < 1e-6 * grown.max(1.0));
    }

    /// On a chain whose load varies, two nodes started apart replay one chain in the same
    /// window (the same stretches, the same blocks); twelve simulated hours later the
    /// load, and so the TPS and the transactions per block, are others.
    #[test]
    fn a_varying_chain_is_one_for_nodes_side_by_side_and_another_hours_later() {
        let load = ChainLoad {
            amplitude: 0.3,
            noise: 0.05,
            seed: 19,
        };
        // Three hours before the busiest hour of a day.
        let origin = 86_400.0 * 11_574.0 + 3.0 * HOUR;
        let on = |name: &str, origin: f64| model(1024, name).with_chain(Some((load, origin)));
        let (a, b) = (on("a", origin), on("b", origin + 100.0));
        // One window of the chain: b started 100 s after a.
        let from = a.catch_up_seconds() + 600.0;
        let to = from + 2.0 * HOUR;
        let grown = |m: &AgaveModel, from: f64, to: f64| {
            let (b0, t0) = m.chain_counts(from);
            let (b1, t1) = m.chain_counts(to);
            let txs = m.transactions(to) - m.transactions(from);
            (txs, (t1 - t0) as f64 / (b1 - b0) as f64)
        };
        let (txs_a, per_block_a) = grown(&a, from, to);
        let (txs_b, per_block_b) = grown(&b, from - 100.0, to - 100.0);
        assert!((txs_a / txs_b - 1.0).abs() < 0.01, "{txs_a} {txs_b}");
        assert!(
            (per_block_a / per_block_b - 1.0).abs() < 0.01,
            "{per_block_a} {per_block_b}"
        );
        // Twelve hours later, in the quiet hours: fewer transactions per block, and fewer
        // replayed per second (the paper's outliers aside).
        let c = on("c", origin + 12.0 * HOUR);
        let (_, per_block_c) = grown(&c, from, to);
        assert!(
            per_block_c < 0.75 * per_block_a,
            "{per_block_a} then {per_block_c}"
        );
        let (tps_a, _, _) = average(&a, from, to);
        let (tps_c, _, _) = average(&c, from, to);
        assert!(tps_c < 0.8 * tps_a, "{tps_a} then {tps_c}");
        // A steady chain keeps each node's own stretches.
        let ts: Vec<f64> = (0..50).map(|i| from + i as f64 * 120.0).collect();
        let tps = |m: &AgaveModel| ts.iter().map(|t| m.tps(*t)).collect::<Vec<_>>();
        assert_ne!(tps(&model(1024, "a")), tps(&model(1024, "b")));
    }

    /// The two sides of a pair started apart measure one window, a scrape after the
    /// later catch-up (the operator's pair window), sampled as Prometheus does in the lab
    /// (a 1 s scrape at 720x: stretches of 2,160 simulated seconds, a sample per 720, ten
    /// in a window). From the moment a node is caught up it replays the chain as it
    /// comes, as its partner does, so every sample, and the paper's average of them, is
    /// the same on both sides. (A node held at its catch-up pace to the end of its
    /// stretch replayed up to 30% more, at the mean load, for up to three samples.)
    #[test]
    fn a_pair_replays_one_chain_from_the_later_catch_up() {
        let load = ChainLoad {
            amplitude: 0.3,
            noise: 0.05,
            seed: 19,
        };
        let (stretch, step) = (2160.0, 720.0);
        let mut worst = 0.0f64;
        for k in 0..40 {
            let origin = 86_400.0 * 11_574.0 + k as f64 * 997.0;
            for apart in [150.0, 400.0, 700.0, 1100.0, 1500.0] {
                let on = |name: String, origin: f64| {
                    AgaveModel::new(seed(&name), 1024 * GI, stretch)
                        .with_chain(Some((load, origin)))
                };
                let (a, b) = (
                    on(format!("a{k}"), origin),
                    on(format!("b{k}"), origin + apart),
                );
                // b caught up later: the first scrape that sees it, then one more.
                let caught = ((origin + apart + b.catch_up_seconds()) / step).ceil() * step;
                let start = caught + step;
                let samples = |m: &AgaveModel, started: f64| {
                    (1..=10)
                        .map(|j| start + j as f64 * step - started)
                        .map(|t| (m.transactions(t) - m.transactions(t - step)) / step)
                        .collect::<Vec<f64>>()
                };
                // The paper's average: without the samples above 3x the plain mean.
                let average = |v: &[f64]| {
                    let plain = v.iter().sum::<f64>() / v.len() as f64;
                    let kept: Vec<f64> = v.iter().copied().filter(|x| *x <= 3.0 * plain).collect();
                    kept.iter().sum::<f64>() / kept.len() as f64
                };
                let (sa, sb) = (samples(&a, origin), samples(&b, origin + apart));
                for (x, y) in sa.iter().zip(&sb) {
                    worst = worst.max((x - y).abs() / x.max(1.0));
                }
                worst = worst.max((average(&sa) / average(&sb) - 1.0).abs());
            }
        }
        assert!(worst < 1e-6, "A/A pairs differ by up to {worst}");
    }

    #[test]
    fn a_run_is_reproducible_from_its_seed() {
        let a = model(256, "same-pod");
        let b = model(256, "same-pod");
        let c = model(256, "other-pod");
        let ts: Vec<f64> = (0..50).map(|i| i as f64 * 1000.0).collect();
        assert_eq!(
            ts.iter().map(|t| a.tps(*t)).collect::<Vec<_>>(),
            ts.iter().map(|t| b.tps(*t)).collect::<Vec<_>>()
        );
        assert_ne!(
            ts.iter().map(|t| a.tps(*t)).collect::<Vec<_>>(),
            ts.iter().map(|t| c.tps(*t)).collect::<Vec<_>>()
        );
    }
}
