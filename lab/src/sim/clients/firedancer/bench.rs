//! The leader pipeline under `fddev bench`, calibrated on seed 003 (Firedancer's
//! "Performance Tuning" guide, on a 32-core AMD EPYC 7513):
//! - a verify tile checks 20-40k signatures a second; saturated ones are overrun by the
//!   QUIC tile and drop part of what they read (the guide's rising `ovrnp cnt`), so the
//!   stock 4 tiles deliver about 63,000 TPS (bench1: 63,373 txn/s) at 99.7-99.8% busy;
//! - bank tiles execute with diminishing returns; the guide's 30 verify / 6 bank layout
//!   without the blockstore reaches ~270,000 TPS (bench7: 268-278k), which 6 bank tiles
//!   at the guide's 20-40k each could not: on this machine the bench's simple transfers
//!   run ~56k on one bank tile, ~45k each of six;
//! - the blockstore (Agave's RocksDB, behind the store tile) holds the same layout to
//!   ~90,000 TPS at 99.973% busy, with poh and shred in backpressure (bench4, bench6);
//! - net and QUIC tiles handle over 1M TPS each, one shred tile over 1M in a one-node
//!   cluster, a benchs tile ~320k packets a second (default.toml [development.bench]);
//! - without `larger_max_cost_per_block` consensus limits hold it near 81,000 TPS (the
//!   guide's "Testing" section), with no tile saturated.
//!
//! Each stretch of time has its TPS (a little noise around the pipeline's limit); a tile
//! kind's busy share is the load it carries over what its tiles can do.
//!
//! Full Firedancer (`firedancer-dev bench`) runs the same leader pipeline with execle
//! tiles for bank tiles and no blockstore (no store tile: it keeps shreds in its own
//! store, and `disable_blockstore_from_slot` is no key of its config). Upstream publishes
//! no full Firedancer benchmark figures, so the lab assumes its stages carry what
//! Frankendancer's do: verify tiles at the 20-40k its default.toml also states ("each
//! verify tile can handle around 20-40K transactions per second",
//! src/app/firedancer/config/default.toml L836 @v1.1.4), execle tiles as bank tiles.

use super::super::normal;

/// What a layout and bench configuration is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setup {
    pub net: u32,
    pub quic: u32,
    pub verify: u32,
    pub resolv: u32,
    pub bank: u32,
    pub shred: u32,
    pub benchg: u32,
    pub benchs: u32,
    pub blockstore: bool,
    pub larger_blocks: bool,
    /// Full Firedancer: no store stage; `exec` is its execrp count (replay only).
    pub full: bool,
    pub exec: u32,
}

/// Per-tile capacities, TPS.
pub const VERIFY_PER_TILE: f64 = 20_000.0;
/// The share of a saturated verify tile's work lost to overruns.
pub const VERIFY_OVERRUN_LOSS: f64 = 0.21;
pub const BANK_ONE_TILE: f64 = 56_000.0;
/// Bank tiles scale as n^0.88 (account locks, pack's scheduling).
pub const BANK_SCALING: f64 = 0.88;
pub const STORE: f64 = 90_500.0;
pub const BLOCK_LIMIT: f64 = 81_000.0;
const NET_PER_TILE: f64 = 1_500_000.0;
const QUIC_PER_TILE: f64 = 1_200_000.0;
const SHRED_PER_TILE: f64 = 1_100_000.0;
const DEDUP: f64 = 1_000_000.0;
const RESOLV_PER_TILE: f64 = 800_000.0;
const PACK: f64 = 600_000.0;
const POH: f64 = 1_500_000.0;
const BENCHG_PER_TILE: f64 = 28_000.0;
const BENCHS_PER_TILE: f64 = 320_000.0;

/// How busy a saturated tile is, as monitor shows it (bench3: verify 99.7-99.8%; bench6:
/// store 99.973%).
const SATURATED: f64 = 0.998;
const STORE_SATURATED: f64 = 0.99973;

/// A tile kind's share of time: busy (`% finish`) and in backpressure (`% backp`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub busy: f64,
    pub backpressure: f64,
}

impl Setup {
    pub fn bank_capacity(&self) -> f64 {
        BANK_ONE_TILE * f64::from(self.bank).powf(BANK_SCALING)
    }

    /// Capacity of each stage, in pipeline order: (kind, TPS the kind's tiles can carry).
    pub fn stages(&self) -> Vec<(&'static str, f64)> {
        let n = |x: u32| f64::from(x.max(1));
        vec![
            ("benchg", BENCHG_PER_TILE * n(self.benchg)),
            ("benchs", BENCHS_PER_TILE * n(self.benchs)),
            ("net", NET_PER_TILE * n(self.net)),
            ("quic", QUIC_PER_TILE * n(self.quic)),
            ("verify", VERIFY_PER_TILE * n(self.verify)),
            ("dedup", DEDUP),
            ("resolv", RESOLV_PER_TILE * n(self.resolv)),
            ("pack", PACK),
            ("bank", self.bank_capacity()),
            ("poh", POH),
            ("shred", SHRED_PER_TILE * n(self.shred)),
            (
                "store",
                if self.blockstore && !self.full {
                    STORE
                } else {
                    f64::INFINITY
                },
            ),
        ]
    }

    /// The stage that limits throughput, and the throughput.
    pub fn limit(&self) -> (&'static str, f64) {
        let stages = self.stages();
        let (mut kind, mut tps) = stages
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("stages");
        if kind == "verify" {
            // Offered more than they can verify, verify tiles are overrun and lose work.
            tps *= 1.0 - VERIFY_OVERRUN_LOSS;
        }
        if !self.larger_blocks && tps > BLOCK_LIMIT {
            // Consensus block limits: pack stops filling blocks, no tile is saturated.
            (kind, tps) = ("blocks", BLOCK_LIMIT);
        }
        (kind, tps)
    }

    /// The throughput of stretch `i` of a run seeded `seed`: the limit, ±1.5%.
    pub fn tps(&self, seed: u64, i: u64) -> f64 {
        let (_, tps) = self.limit();
        (tps * (1.0 + 0.015 * normal(seed, 11, i))).max(0.0)
    }

    /// Each stage's share of time at throughput `tps`.
    pub fn share(&self, kind: &str, tps: f64) -> Share {
        let (limit, _) = self.limit();
        let capacity = self
            .stages()
            .into_iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, c)| c)
            .unwrap_or(f64::INFINITY);
        let busy = if kind == limit {
            if kind == "store" {
                STORE_SATURATED
            } else {
                SATURATED
            }
        } else {
            (tps / capacity).min(0.95)
        };
        // Upstream of a saturated blockstore, poh and shred wait on it (bench6: poh 76.9%,
        // shred 95.9% in backpressure).
        let backpressure = match (limit, kind) {
            ("store", "shred") => 0.9586,
            ("store", "poh") => 0.7692,
            _ => 0.0,
        };
        Share {
            busy: busy.min(1.0 - backpressure).max(0.0),
            backpressure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's bench configuration with a layout.
    fn seed(verify: u32, bank: u32, blockstore: bool) -> Setup {
        Setup {
            net: 1,
            quic: 1,
            verify,
            resolv: 1,
            bank,
            shred: 1,
            benchg: 12,
            benchs: 2,
            blockstore,
            larger_blocks: true,
            full: false,
            exec: 0,
        }
    }

    #[test]
    fn the_stock_layout_is_held_by_its_verify_tiles_near_63k() {
        let (kind, tps) = seed(4, 2, true).limit();
        assert_eq!(kind, "verify");
        assert!((61_000.0..65_000.0).contains(&tps), "{tps}");
        // Verify tiles within the seed's 20-40k per tile.
        assert!((20_000.0..=40_000.0).contains(&VERIFY_PER_TILE));
        let s = seed(4, 2, true).share("verify", tps);
        assert!((0.997..0.999).contains(&s.busy), "{s:?}");
    }

    #[test]
    fn thirty_verify_and_six_bank_tiles_meet_the_blockstore_near_90k() {
        let setup = seed(30, 6, true);
        let (kind, tps) = setup.limit();
        assert_eq!(kind, "store");
        assert!((88_000.0..92_000.0).contains(&tps), "{tps}");
        let store = setup.share("store", tps);
        assert!(store.busy > 0.9997, "{store:?}");
        assert!(setup.share("shred", tps).backpressure > 0.95);
        assert!(setup.share("poh", tps).backpressure > 0.75);
        assert!(setup.share("verify", tps).busy < 0.2);
    }

    #[test]
    fn without_the_blockstore_the_bank_tiles_reach_270k() {
        let (kind, tps) = seed(30, 6, false).limit();
        assert_eq!(kind, "bank");
        assert!((260_000.0..285_000.0).contains(&tps), "{tps}");
    }

    #[test]
    fn bank_tiles_have_diminishing_returns() {
        let per_tile = |n| seed(30, n, false).bank_capacity() / f64::from(n);
        assert!(per_tile(1) > per_tile(2) && per_tile(2) > per_tile(6));
        // Two bank tiles cap the 30-verify layout below the blockstore.
        let (kind, tps) = seed(30, 2, true).limit();
        assert_eq!((kind, tps.round()), ("store", STORE));
        let (kind, _) = seed(30, 2, false).limit();
        assert_eq!(kind, "bank");
    }

    #[test]
    fn full_firedancer_has_no_blockstore_to_wait_on() {
        // The full example's points: 6 or 20 verify, 3 or 6 execle, 10 benchg.
        let full = |verify, bank| Setup {
            benchg: 10,
            full: true,
            exec: 1,
            ..seed(verify, bank, true)
        };
        let (kind, tps) = full(6, 3).limit();
        assert_eq!(kind, "verify");
        assert!((92_000.0..97_000.0).contains(&tps), "{tps}");
        assert_eq!(full(6, 6).limit(), (kind, tps));
        let (kind, tps) = full(20, 3).limit();
        assert_eq!(kind, "bank");
        assert!((140_000.0..150_000.0).contains(&tps), "{tps}");
        let (kind, tps) = full(20, 6).limit();
        assert_eq!(kind, "bank");
        assert!((265_000.0..280_000.0).contains(&tps), "{tps}");
        assert!(full(20, 6).share("store", tps).busy < 0.01);
    }

    #[test]
    fn stock_block_limits_hold_the_benchmark_near_81k() {
        let mut s = seed(30, 6, false);
        s.larger_blocks = false;
        assert_eq!(s.limit(), ("blocks", BLOCK_LIMIT));
        assert!(s.share("bank", BLOCK_LIMIT).busy < 0.5);
    }
}
