//! The tiles of a Firedancer topology, and the cores and hugepages they need: each tile
//! owns one core (the seed's "threads take ownership of the core"), and each has an
//! 8 MiB stack in 2 MiB pages. The same counts are written twice: in Rust for rendering,
//! and in CEL for the admission rules ([`cel`]).
//!
//! Frankendancer: firedancer-io/firedancer `src/app/fdctl/topology.c` and
//! `src/disco/net/fd_net_tile_topo.c`, the same in every release from v0.501.20212 to
//! v0.1106.40201 (names changed at v0.901: resolv -> resolh, poh -> pohh, cswtch -> diag).
//!
//! Full Firedancer: `src/app/firedancer/topology.c` `fd_topo_initialize` at v1.0.1, v1.1.4
//! and v26.08.1: the net tiles, metric, diag, the snapshot loaders (snapct, snapld, snapdc,
//! snapin, and snapwr from v1.1.0; only when `[gossip] entrypoints` is set, so a follower
//! and not the bench), genesi, ipecho, gossvf x n, gossip, shred x n, repair, rserve (from
//! v1.1.0, `[tiles.rserve] enabled` by default), replay, accdb (from v1.1.0), execrp x n,
//! tower, txsend, the leader pipeline (quic x n, verify x n, dedup, resolv x n, pack,
//! execle x n, poh; `[layout] enable_block_production` is on by default), sign x n, rpc
//! (valtune enables it), admin (from v1.1.0), then gui when enabled. valtune turns
//! `telemetry` off, so there is no event tile; bundle and solcap are off by default, and
//! so is v26.08's snapshot production (`enable_snapshot_production = false`).

use crate::api::firedancer::{
    FiredancerFlavor, FiredancerLayout, FiredancerNetProvider, FiredancerSpec, FiredancerWorkload,
};
use crate::api::sweep::ThreadKnob;
use crate::api::template::Tuning;
use crate::api::version::Version;

use super::versions::V1_1;

/// Frankendancer's tiles of which there is always exactly one: dedup, pack, poh, store,
/// sign, metric and cswtch (diag from v0.901).
pub const FIXED_TILES: u32 = 7;

/// Full Firedancer's single tiles besides its snapshot loaders (see the module docs):
/// metric, diag, genesi, ipecho, gossip, repair, replay, tower, txsend, dedup, pack, poh,
/// rpc; from v1.1.0 also rserve, accdb and admin.
pub const FULL_FIXED_V1_0: u32 = 13;
pub const FULL_FIXED_V1_1: u32 = 16;
/// snapct, snapld, snapdc, snapin; snapwr from v1.1.0.
pub const FULL_SNAPSHOT_V1_0: u32 = 4;
pub const FULL_SNAPSHOT_V1_1: u32 = 5;

/// Huge pages of each tile's stack: `(FD_TILE_PRIVATE_STACK_SZ / 2 MiB) + 2` with an
/// 8 MiB stack (src/disco/topo/fd_topo.c `fd_topo_tile_extra_huge_pages`,
/// src/util/tile/fd_tile.h).
pub const STACK_HUGE_PAGES: u32 = 6;

/// The counts of the configurable tiles (exec, gossvf and sign are full Firedancer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub net: u32,
    pub quic: u32,
    pub verify: u32,
    /// bank (Frankendancer) or execle (full Firedancer): leader execution.
    pub bank: u32,
    pub shred: u32,
    pub resolv: u32,
    pub exec: u32,
    pub gossvf: u32,
    pub sign: u32,
}

/// fdctl's defaults (`[layout]` of src/app/fdctl/config/default.toml, the same from
/// v0.501.20212 to v0.1106.40201).
pub const DEFAULT: Layout = Layout {
    net: 1,
    quic: 1,
    verify: 6,
    bank: 4,
    shred: 1,
    resolv: 1,
    exec: 0,
    gossvf: 0,
    sign: 1,
};

/// Full Firedancer's defaults (`[layout]` of src/app/firedancer/config/default.toml, the
/// same in every tag from v1.0.0 to v26.08.1).
pub const FULL_DEFAULT: Layout = Layout {
    net: 2,
    quic: 1,
    verify: 6,
    bank: 2,
    shred: 1,
    resolv: 1,
    exec: 10,
    gossvf: 2,
    sign: 2,
};

/// (thread knob, whose name is the spec.layout field; Frankendancer default; full default)
/// of each configurable tile; the last three are full Firedancer's only (0 for
/// Frankendancer).
pub const KINDS: [(ThreadKnob, u32, u32); 9] = [
    (ThreadKnob::NetTiles, DEFAULT.net, FULL_DEFAULT.net),
    (ThreadKnob::QuicTiles, DEFAULT.quic, FULL_DEFAULT.quic),
    (ThreadKnob::VerifyTiles, DEFAULT.verify, FULL_DEFAULT.verify),
    (ThreadKnob::BankTiles, DEFAULT.bank, FULL_DEFAULT.bank),
    (ThreadKnob::ShredTiles, DEFAULT.shred, FULL_DEFAULT.shred),
    (ThreadKnob::ResolvTiles, DEFAULT.resolv, FULL_DEFAULT.resolv),
    (ThreadKnob::ExecTiles, 0, FULL_DEFAULT.exec),
    (ThreadKnob::GossvfTiles, 0, FULL_DEFAULT.gossvf),
    (ThreadKnob::SignTiles, 0, FULL_DEFAULT.sign),
];

pub fn full(spec: &FiredancerSpec) -> bool {
    spec.flavor == FiredancerFlavor::Firedancer
}

impl Layout {
    /// The layout: the flavor's defaults, the spec's counts, then the tuned ones.
    pub fn of(spec: &FiredancerSpec, tuning: &Tuning) -> Layout {
        let l = &spec.layout;
        let d = if full(spec) { FULL_DEFAULT } else { DEFAULT };
        let pick = |knob: ThreadKnob, default: u32| {
            tuning
                .threads
                .get(&knob)
                .copied()
                .or(Layout::spec_count(l, knob))
                .map(|n| n.max(0) as u32)
                .unwrap_or(default)
        };
        let only_full = |n: u32| if full(spec) { n } else { 0 };
        Layout {
            net: pick(ThreadKnob::NetTiles, d.net),
            quic: pick(ThreadKnob::QuicTiles, d.quic),
            verify: pick(ThreadKnob::VerifyTiles, d.verify),
            bank: pick(ThreadKnob::BankTiles, d.bank),
            shred: pick(ThreadKnob::ShredTiles, d.shred),
            resolv: pick(ThreadKnob::ResolvTiles, d.resolv),
            exec: only_full(pick(ThreadKnob::ExecTiles, d.exec)),
            gossvf: only_full(pick(ThreadKnob::GossvfTiles, d.gossvf)),
            sign: if full(spec) {
                pick(ThreadKnob::SignTiles, d.sign)
            } else {
                1
            },
        }
    }

    /// The spec's count of a kind.
    pub fn spec_count(l: &FiredancerLayout, knob: ThreadKnob) -> Option<i32> {
        match knob {
            ThreadKnob::NetTiles => l.net_tiles,
            ThreadKnob::QuicTiles => l.quic_tiles,
            ThreadKnob::VerifyTiles => l.verify_tiles,
            ThreadKnob::BankTiles => l.bank_tiles,
            ThreadKnob::ShredTiles => l.shred_tiles,
            ThreadKnob::ResolvTiles => l.resolv_tiles,
            ThreadKnob::ExecTiles => l.exec_tiles,
            ThreadKnob::GossvfTiles => l.gossvf_tiles,
            ThreadKnob::SignTiles => l.sign_tiles,
            _ => None,
        }
    }
}

/// The cores and pages a trial's topology needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Tiles placed by `[layout] affinity`.
    pub tiles: u32,
    /// benchg and benchs tiles, placed by `[development.bench] affinity` (bencho floats).
    pub bench_cores: u32,
    /// Every tile, bencho included (each has a stack in huge pages).
    pub all_tiles: u32,
}

impl Needs {
    pub fn of(spec: &FiredancerSpec, tuning: &Tuning, version: Version) -> Needs {
        let l = Layout::of(spec, tuning);
        let bench = spec.workload == FiredancerWorkload::Bench;
        // XDP adds the netlnk tile; the socket provider runs `net_tile_count` sock tiles.
        let xdp = u32::from(spec.net_provider == FiredancerNetProvider::Xdp);
        let tiles = if full(spec) {
            let v1_1 = version >= V1_1;
            let fixed = if v1_1 {
                FULL_FIXED_V1_1
            } else {
                FULL_FIXED_V1_0
            };
            let snapshots = match (bench, v1_1) {
                (true, _) => 0,
                (false, true) => FULL_SNAPSHOT_V1_1,
                (false, false) => FULL_SNAPSHOT_V1_0,
            };
            l.net
                + xdp
                + l.quic
                + l.verify
                + l.resolv
                + l.bank
                + l.shred
                + l.exec
                + l.gossvf
                + l.sign
                + fixed
                + snapshots
                + u32::from(spec.gui)
        } else {
            // The GUI adds the plugin and gui tiles.
            let gui = 2 * u32::from(spec.gui);
            l.net + xdp + l.quic + l.verify + l.resolv + l.bank + l.shred + FIXED_TILES + gui
        };
        let (bench_cores, bencho) = if bench {
            (
                (spec.bench.benchg_tiles + spec.bench.benchs_tiles).max(0) as u32,
                1,
            )
        } else {
            (0, 0)
        };
        Needs {
            tiles,
            bench_cores,
            all_tiles: tiles + bench_cores + bencho,
        }
    }
}

/// The same counts in CEL, on the experiment spec, for the largest layout a sweep runs
/// (tile counts only add cores, so the largest swept value of each is the worst point).
pub mod cel {
    use super::{
        FIXED_TILES, FULL_FIXED_V1_0, FULL_FIXED_V1_1, FULL_SNAPSHOT_V1_0, FULL_SNAPSHOT_V1_1,
        KINDS, STACK_HUGE_PAGES, ThreadKnob, V1_1,
    };
    use crate::api::sweep::{cel_bounds, cel_ranged, cel_swept};
    use crate::api::version::{cel_at_least, cel_version};
    use crate::clients::knobs::{Dim, Place};

    pub const SPEC: &str = "self.template.firedancer";

    /// Whether the spec is full Firedancer.
    pub fn full() -> String {
        format!("{SPEC}.flavor == 'firedancer'")
    }

    /// The largest swept count of a kind, else the tuned one, else the spec's, else the
    /// flavor's default. (A `map` over the thread sweeps keeps the apiserver's cost
    /// estimate bounded; `filter` then indexing loses the bound of `values`.)
    pub fn count(knob: ThreadKnob) -> String {
        let (_, franken, full_default) = KINDS
            .iter()
            .find(|(k, _, _)| *k == knob)
            .copied()
            .unwrap_or((knob, 0, 0));
        let tuned = Dim::Thread(knob).cel_set(Place::Tuning);
        let knob = knob.as_str();
        let ranged = cel_ranged(knob);
        let default = if franken == full_default {
            franken.to_string()
        } else {
            format!("({} ? {full_default} : {franken})", full())
        };
        format!(
            "(has(self.sweep.threads) && self.sweep.threads.exists(t, t.name == '{knob}') ? self.sweep.threads.map(t, t.name == '{knob}' ? t.values.max() : 0).max() : {ranged} ? self.sweep.ranges.map(r, r.name == '{knob}' ? int(r.max) : 0).max() : ({tuned} ? self.template.tuning.threads.{knob} : (has({SPEC}.layout) && has({SPEC}.layout.{knob}) ? {SPEC}.layout.{knob} : {default})))"
        )
    }

    /// Tiles placed by `[layout] affinity`, for the largest swept layout.
    pub fn tiles() -> String {
        let common: Vec<String> = KINDS[..6].iter().map(|(k, _, _)| count(*k)).collect();
        let only_full: Vec<String> = KINDS[6..].iter().map(|(k, _, _)| count(*k)).collect();
        let v1_1 = cel_at_least(&cel_version(SPEC), V1_1);
        let bench = format!("{SPEC}.workload == 'bench'");
        format!(
            "({} + ({SPEC}.netProvider == 'xdp' ? 1 : 0) + ({} ? {} + ({v1_1} ? {FULL_FIXED_V1_1} + ({bench} ? 0 : {FULL_SNAPSHOT_V1_1}) : {FULL_FIXED_V1_0} + ({bench} ? 0 : {FULL_SNAPSHOT_V1_0})) + ({SPEC}.gui ? 1 : 0) : {FIXED_TILES} + ({SPEC}.gui ? 2 : 0)))",
            common.join(" + "),
            full(),
            only_full.join(" + "),
        )
    }

    /// benchg and benchs cores of the bench workload.
    pub fn bench_cores() -> String {
        format!(
            "({SPEC}.workload == 'bench' ? {SPEC}.bench.benchgTiles + {SPEC}.bench.benchsTiles : 0)"
        )
    }

    /// Every tile, bencho included.
    pub fn all_tiles() -> String {
        format!(
            "({} + {} + ({SPEC}.workload == 'bench' ? 1 : 0))",
            tiles(),
            bench_cores()
        )
    }

    /// Cores besides the tiles: one for Frankendancer's Agave child.
    pub fn agave_cores() -> String {
        format!("({} ? 0 : 1)", full())
    }

    /// The fewest cores a trial gets.
    pub fn min_cpu() -> String {
        format!(
            "({} ? {}.min() : self.template.resources.cpu)",
            cel_swept("cpu"),
            cel_bounds("cpu")
        )
    }

    pub fn stack_pages() -> String {
        format!("({STACK_HUGE_PAGES} * {})", all_tiles())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> FiredancerSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const NEW: Version = Version::new(0, 1106, 40201);

    fn threads(t: &[(ThreadKnob, i32)]) -> Tuning {
        Tuning {
            threads: t.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_default_layout_has_the_tiles_topology_c_builds() {
        // Socket provider, no GUI: sock, quic, verify x6, dedup, resolh, pack, bank x4,
        // pohh, shred, store, sign, metric, diag.
        let s = spec("image: x");
        let n = Needs::of(&s, &Tuning::default(), NEW);
        assert_eq!(n.tiles, 21);
        // XDP adds netlnk; the GUI plugin and gui: the research notes' 24 tiles.
        let s = spec("image: x\nnetProvider: xdp\ngui: true");
        assert_eq!(Needs::of(&s, &Tuning::default(), NEW).tiles, 24);
    }

    #[test]
    fn full_firedancer_counts_its_own_tiles_by_version() {
        // v1.1.4 follower, socket, no GUI: sock x2, metric, diag, snapct/ld/dc/in/wr,
        // genesi, ipecho, gossvf x2, gossip, shred, repair, rserve, replay, accdb,
        // execrp x10, tower, txsend, quic, verify x6, dedup, resolv, pack, execle x2, poh,
        // sign x2, rpc, admin: 48.
        let s = spec("image: x\nflavor: firedancer");
        let p = Tuning::default();
        let n = Needs::of(&s, &p, Version::new(1, 1, 4));
        assert_eq!(n.tiles, 48);
        // v1.0.1 has no snapwr, rserve, accdb or admin.
        assert_eq!(Needs::of(&s, &p, Version::new(1, 0, 1)).tiles, 44);
        // The bench loads no snapshot; the GUI is one tile; XDP adds netlnk.
        let s = spec("image: x\nflavor: firedancer\nworkload: bench\ngui: true\nnetProvider: xdp");
        let n = Needs::of(&s, &p, Version::new(26, 8, 1));
        assert_eq!((n.tiles, n.bench_cores, n.all_tiles), (48 - 5 + 2, 6, 52));
    }

    #[test]
    fn the_seeds_bench_layout_fits_its_64_cpus() {
        // verify 30, bank 6, shred 1, 12 benchg and 2 benchs (bench-zen3-32core.toml).
        let s = spec(
            "image: x\nworkload: bench\nlayout: {shredTiles: 1}\nbench: {benchgTiles: 12, benchsTiles: 2}",
        );
        let p = threads(&[(ThreadKnob::VerifyTiles, 30), (ThreadKnob::BankTiles, 6)]);
        let n = Needs::of(&s, &p, NEW);
        assert_eq!((n.tiles, n.bench_cores, n.all_tiles), (47, 14, 62));
        // With one core for the Agave child: 62 of the seed machine's 64 CPUs.
        assert_eq!(n.tiles + n.bench_cores + 1, 62);
        assert_eq!(STACK_HUGE_PAGES * n.all_tiles, 372);
    }

    #[test]
    fn spec_counts_and_defaults_follow_the_flavor() {
        let s = spec("image: x\nflavor: firedancer\nlayout: {execTiles: 4}");
        let l = Layout::of(&s, &threads(&[(ThreadKnob::SignTiles, 3)]));
        assert_eq!((l.net, l.bank, l.exec, l.gossvf, l.sign), (2, 2, 4, 2, 3));
        let l = Layout::of(&spec("image: x"), &Tuning::default());
        assert_eq!((l.net, l.bank, l.exec, l.gossvf), (1, 4, 0, 0));
    }

    #[test]
    fn the_cel_counts_every_kind_with_its_flavors_default() {
        let t = cel::tiles();
        for (k, franken, full) in KINDS {
            let k = k.as_str();
            assert!(t.contains(&format!("t.name == '{k}'")), "{k}");
            if franken == full {
                assert!(t.contains(&format!("layout.{k} : {full}))")), "{k}");
            } else {
                assert!(t.contains(&format!("? {full} : {franken})))")), "{k}");
            }
        }
        assert!(t.contains(&format!(" : {FIXED_TILES} + (")));
        assert!(
            cel::all_tiles().contains("benchgTiles + self.template.firedancer.bench.benchsTiles")
        );
    }
}
