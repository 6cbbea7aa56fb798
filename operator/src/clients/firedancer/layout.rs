//! The tiles of a Frankendancer topology, and the cores and hugepages they need: each
//! tile owns one core (the seed's "threads take ownership of the core"), and each has an
//! 8 MiB stack in 2 MiB pages. Counted from firedancer-io/firedancer
//! `src/app/fdctl/topology.c` and `src/disco/net/fd_net_tile_topo.c`, the same in every
//! release from v0.501.20212 to v0.1106.40201 (names changed at v0.901: resolv -> resolh,
//! poh -> pohh, cswtch -> diag). The same counts are written twice: in Rust for rendering,
//! and in CEL for the admission rules ([`cel`]).

use crate::api::firedancer::FiredancerWorkload;
use crate::api::firedancer::{FiredancerLayout, FiredancerNetProvider, FiredancerSpec};
use crate::api::sweep::TrialPoint;

/// Tiles of which there is always exactly one: dedup, pack, poh, store, sign, metric and
/// cswtch (diag from v0.901).
pub const FIXED_TILES: u32 = 7;

/// Huge pages of each tile's stack: `(FD_TILE_PRIVATE_STACK_SZ / 2 MiB) + 2` with an
/// 8 MiB stack (src/disco/topo/fd_topo.c `fd_topo_tile_extra_huge_pages`,
/// src/util/tile/fd_tile.h).
pub const STACK_HUGE_PAGES: u32 = 6;

/// The counts of the configurable tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub net: u32,
    pub quic: u32,
    pub verify: u32,
    pub bank: u32,
    pub shred: u32,
    pub resolv: u32,
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
};

/// (sweep.threads name, spec.layout field, default) of each configurable tile.
pub const KINDS: [(&str, &str, u32); 6] = [
    ("netTiles", "netTiles", DEFAULT.net),
    ("quicTiles", "quicTiles", DEFAULT.quic),
    ("verifyTiles", "verifyTiles", DEFAULT.verify),
    ("bankTiles", "bankTiles", DEFAULT.bank),
    ("shredTiles", "shredTiles", DEFAULT.shred),
    ("resolvTiles", "resolvTiles", DEFAULT.resolv),
];

impl Layout {
    /// The layout of a trial: fdctl's defaults, the spec's counts, then the point's.
    pub fn of(spec: &FiredancerLayout, point: &TrialPoint) -> Layout {
        let pick = |knob: &str, set: Option<i32>, default: u32| {
            point
                .threads
                .get(knob)
                .copied()
                .or(set)
                .map(|n| n.max(0) as u32)
                .unwrap_or(default)
        };
        Layout {
            net: pick("netTiles", spec.net_tiles, DEFAULT.net),
            quic: pick("quicTiles", spec.quic_tiles, DEFAULT.quic),
            verify: pick("verifyTiles", spec.verify_tiles, DEFAULT.verify),
            bank: pick("bankTiles", spec.bank_tiles, DEFAULT.bank),
            shred: pick("shredTiles", spec.shred_tiles, DEFAULT.shred),
            resolv: pick("resolvTiles", spec.resolv_tiles, DEFAULT.resolv),
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
    pub fn of(spec: &FiredancerSpec, point: &TrialPoint) -> Needs {
        let l = Layout::of(&spec.layout, point);
        // XDP adds the netlnk tile; the socket provider runs `net_tile_count` sock tiles.
        let xdp = u32::from(spec.net_provider == FiredancerNetProvider::Xdp);
        // The GUI adds the plugin and gui tiles.
        let gui = 2 * u32::from(spec.gui);
        let tiles =
            l.net + xdp + l.quic + l.verify + l.resolv + l.bank + l.shred + FIXED_TILES + gui;
        let (bench_cores, bencho) = match spec.workload {
            FiredancerWorkload::Bench => (
                (spec.bench.benchg_tiles + spec.bench.benchs_tiles).max(0) as u32,
                1,
            ),
            FiredancerWorkload::Follow => (0, 0),
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
    use super::{FIXED_TILES, KINDS, STACK_HUGE_PAGES};

    pub const SPEC: &str = "self.template.firedancer";

    /// The largest swept count of a kind, else the spec's, else the default. (A `map`
    /// over the four thread sweeps keeps the apiserver's cost estimate bounded; `filter`
    /// then indexing loses the bound of `values`.)
    fn count(knob: &str, field: &str, default: u32) -> String {
        format!(
            "(has(self.sweep.threads) && self.sweep.threads.exists(t, t.name == '{knob}') ? self.sweep.threads.map(t, t.name == '{knob}' ? t.values.max() : 0).max() : (has({SPEC}.layout) && has({SPEC}.layout.{field}) ? {SPEC}.layout.{field} : {default}))"
        )
    }

    /// Tiles placed by `[layout] affinity`, for the largest swept layout.
    pub fn tiles() -> String {
        let mut terms: Vec<String> = KINDS.iter().map(|(k, f, d)| count(k, f, *d)).collect();
        terms.push(format!("({SPEC}.netProvider == 'xdp' ? 1 : 0)"));
        terms.push(format!("({SPEC}.gui ? 2 : 0)"));
        terms.push(FIXED_TILES.to_string());
        format!("({})", terms.join(" + "))
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

    /// The fewest cores a trial gets.
    pub fn min_cpu() -> String {
        "(has(self.sweep.cpu) ? self.sweep.cpu.min() : self.template.resources.cpu)".into()
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

    #[test]
    fn the_default_layout_has_the_tiles_topology_c_builds() {
        // Socket provider, no GUI: sock, quic, verify x6, dedup, resolh, pack, bank x4,
        // pohh, shred, store, sign, metric, diag.
        let s = spec("image: x");
        let n = Needs::of(&s, &TrialPoint::default());
        assert_eq!(n.tiles, 21);
        // XDP adds netlnk; the GUI plugin and gui: the research notes' 24 tiles.
        let s = spec("image: x\nnetProvider: xdp\ngui: true");
        assert_eq!(Needs::of(&s, &TrialPoint::default()).tiles, 24);
    }

    #[test]
    fn the_seeds_bench_layout_fits_its_64_cpus() {
        // verify 30, bank 6, shred 1, 12 benchg and 2 benchs (bench-zen3-32core.toml).
        let s = spec(
            "image: x\nworkload: bench\nlayout: {shredTiles: 1}\nbench: {benchgTiles: 12, benchsTiles: 2}",
        );
        let p = TrialPoint {
            threads: [
                ("verifyTiles".to_string(), 30),
                ("bankTiles".to_string(), 6),
            ]
            .into(),
            ..Default::default()
        };
        let n = Needs::of(&s, &p);
        assert_eq!((n.tiles, n.bench_cores, n.all_tiles), (47, 14, 62));
        // With one core for the Agave child: 62 of the seed machine's 64 CPUs.
        assert_eq!(n.tiles + n.bench_cores + 1, 62);
        assert_eq!(STACK_HUGE_PAGES * n.all_tiles, 372);
    }

    #[test]
    fn the_cel_counts_every_kind_with_its_default() {
        let t = cel::tiles();
        for (k, f, d) in KINDS {
            assert!(t.contains(&format!("t.name == '{k}'")), "{k}");
            assert!(t.contains(&format!("layout.{f} : {d})")), "{f}");
        }
        assert!(t.ends_with(" + 7)"));
        assert!(
            cel::all_tiles().contains("benchgTiles + self.template.firedancer.bench.benchsTiles")
        );
    }
}
