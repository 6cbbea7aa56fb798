//! The topology fdctl builds from a config (firedancer-io/firedancer
//! `src/app/fdctl/topology.c`, `src/disco/net/fd_net_tile_topo.c`, and the bench's
//! `src/app/shared_dev/commands/bench/bench.c`), the affinity checks it makes, with its
//! messages, and the pages its workspaces take.

use std::collections::{BTreeMap, BTreeSet};

use super::bench::Setup;
use super::keys::V;
use super::toml::Toml;

/// A config as fdctl reads it: dotted keys over the defaults of default.toml.
pub struct Cfg<'a>(pub &'a BTreeMap<String, Toml>);

impl Cfg<'_> {
    pub fn int(&self, key: &str, default: i64) -> i64 {
        self.0.get(key).and_then(Toml::as_int).unwrap_or(default)
    }
    pub fn str<'b>(&'b self, key: &str, default: &'b str) -> &'b str {
        self.0.get(key).and_then(Toml::as_str).unwrap_or(default)
    }
    pub fn bool(&self, key: &str, default: bool) -> bool {
        self.0.get(key).and_then(Toml::as_bool).unwrap_or(default)
    }
    /// An array of strings (empty when unset).
    pub fn strs(&self, key: &str) -> Vec<&str> {
        match self.0.get(key) {
            Some(Toml::Arr(items)) => items.iter().filter_map(Toml::as_str).collect(),
            _ => Vec::new(),
        }
    }
}

/// The names and renames of v0.901 (23baa3ef35 and siblings).
fn renamed(v: V) -> bool {
    v >= (0, 901, 0)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tile {
    pub kind: &'static str,
    pub id: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Tiles placed by `[layout] affinity`, in topology.c's order.
    pub tiles: Vec<Tile>,
    /// bencho, benchg, benchs (the bench only).
    pub bench: Vec<Tile>,
    pub setup: Setup,
}

/// The bench's tiles, the same in both flavors (src/app/shared_dev/commands/bench/bench.c):
/// bencho, then the generators and senders; with their counts.
pub fn bench_tiles(c: &Cfg, bench: bool) -> (u32, u32, Vec<Tile>) {
    let n = |key: &str, d: i64| c.int(key, d).max(0) as u32;
    let (benchg, benchs) = (
        n("development.bench.benchg_tile_count", 4),
        n("development.bench.benchs_tile_count", 2),
    );
    let mut tiles = Vec::new();
    if bench {
        push(&mut tiles, "bencho", 1);
        push(&mut tiles, "benchg", benchg);
        push(&mut tiles, "benchs", benchs);
    }
    (benchg, benchs, tiles)
}

pub fn push(out: &mut Vec<Tile>, kind: &'static str, n: u32) {
    out.extend((0..n).map(|id| Tile { kind, id }));
}

/// The tiles of a config (defaults of default.toml from v0.501.20212 to v0.1106.40201).
pub fn topology(c: &Cfg, v: V, bench: bool) -> Topology {
    let n = |key: &str, d: i64| c.int(key, d).max(0) as u32;
    let resolv_key = if renamed(v) {
        "layout.resolh_tile_count"
    } else {
        "layout.resolv_tile_count"
    };
    let (net, quic, verify, resolv, bank, shred) = (
        n("layout.net_tile_count", 1),
        n("layout.quic_tile_count", 1),
        n("layout.verify_tile_count", 6),
        n(resolv_key, 1),
        n("layout.bank_tile_count", 4),
        n("layout.shred_tile_count", 1),
    );
    let mut tiles = Vec::new();
    if c.str("net.provider", "xdp") == "xdp" {
        push(&mut tiles, "netlnk", 1);
        push(&mut tiles, "net", net);
    } else {
        push(&mut tiles, "sock", net);
    }
    let r = renamed(v);
    push(&mut tiles, "quic", quic);
    push(&mut tiles, "verify", verify);
    push(&mut tiles, "dedup", 1);
    push(&mut tiles, if r { "resolh" } else { "resolv" }, resolv);
    push(&mut tiles, "pack", 1);
    push(&mut tiles, "bank", bank);
    push(&mut tiles, if r { "pohh" } else { "poh" }, 1);
    push(&mut tiles, "shred", shred);
    push(&mut tiles, "store", 1);
    push(&mut tiles, "sign", 1);
    push(&mut tiles, "metric", 1);
    push(&mut tiles, if r { "diag" } else { "cswtch" }, 1);
    if c.bool("tiles.gui.enabled", true) {
        push(&mut tiles, "plugin", 1);
        // gui became guih in v0.1101.
        push(
            &mut tiles,
            if v >= (0, 1101, 0) { "guih" } else { "gui" },
            1,
        );
    }
    if c.bool("tiles.bundle.enabled", false) {
        push(&mut tiles, "bundle", 1);
    }
    let (benchg, benchs, bench_tiles) = bench_tiles(c, bench);
    Topology {
        tiles,
        bench: bench_tiles,
        setup: Setup {
            net,
            quic,
            verify,
            resolv,
            bank,
            shred,
            benchg,
            benchs,
            blockstore: c.int("development.bench.disable_blockstore_from_slot", 0) == 0,
            larger_blocks: c.bool("development.bench.larger_max_cost_per_block", false),
            full: false,
            exec: 0,
        },
    }
}

/// `fd_topob_parse_affinity_cstr` (src/disco/topo/fd_topob.c @v0.1106.40201): one entry
/// per tile, `None` for a floating one (`fN`).
pub fn parse_affinity(s: &str) -> Result<Vec<Option<u32>>, String> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some(f) = part.strip_prefix('f') {
            let n: usize = if f.is_empty() {
                1
            } else {
                f.parse()
                    .map_err(|_| "fd_topob: malformed affinity string (malformed float count)")?
            };
            out.extend(std::iter::repeat_n(None, n));
            continue;
        }
        let (range, stride) = match part.split_once(['/', ':']) {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .map_err(|_| "fd_topob: malformed affinity string (stride not an int)")?,
            ),
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>(), b.trim().parse::<u32>()),
            None => (range.parse::<u32>(), range.parse::<u32>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            return Err("fd_topob: malformed affinity string (range lo not a cpu)".into());
        };
        if hi < lo || stride == 0 {
            return Err("fd_topob: malformed affinity string (invalid range)".into());
        }
        for cpu in (lo..=hi).step_by(stride as usize) {
            if !seen.insert(cpu) {
                return Err("fd_topob: malformed affinity string (repeated cpu)".into());
            }
            out.push(Some(cpu));
        }
    }
    Ok(out)
}

/// fdctl's affinity checks for a topology whose process may run on `cpuset`.
/// Full Firedancer has no Agave: its auto-ness is `[layout.affinity]`'s own
/// (bench_topo, src/app/shared_dev/commands/bench/bench.c @v1.1.4).
pub fn check_affinity(c: &Cfg, t: &Topology, cpuset: &[u32]) -> Result<(), String> {
    let affinity = c.str("layout.affinity", "auto");
    let agave = if t.setup.full {
        affinity
    } else {
        c.str("layout.agave_affinity", "auto")
    };
    if (affinity == "auto") != (agave == "auto") {
        return Err("The CPU affinity string in the configuration file under [layout.affinity] and [layout.agave_affinity] must both be set to 'auto' or both be set to a specific CPU affinity string.".into());
    }
    let bench_affinity = c.str("development.bench.affinity", "auto");
    if !t.bench.is_empty() && (affinity == "auto") != (bench_affinity == "auto") {
        return Err("The CPU affinity string in the configuration file under [layout.affinity], [layout.agave_affinity], and [development.bench.affinity] must all be set to 'auto' or all be set to a specific CPU affinity string.".into());
    }
    if affinity == "auto" {
        // fd_topob_auto_layout places tiles over every CPU the machine has
        // (/sys/devices/system/cpu/present), not the container's cpuset: pinning a tile
        // outside it fails (src/disco/topo/fd_topo_run.c).
        return match cpuset.first() {
            Some(0) => Ok(()),
            _ => Err("sched_setaffinity failed (22-Invalid argument)".into()),
        };
    }
    let cpus = parse_affinity(affinity)?;
    if cpus.len() < t.tiles.len() {
        return Err(format!(
            "The topology you are using has {} tiles, but the CPU affinity specified in the config tile as [layout.affinity] only provides for {} cores. You should either increase the number of cores dedicated to Firedancer in the affinity string, or decrease the number of cores needed by reducing the total tile count. You can reduce the tile count by decreasing individual tile counts in the [layout] section of the configuration file.",
            t.tiles.len(),
            cpus.len()
        ));
    }
    let mut pinned: Vec<Option<u32>> = cpus.into_iter().take(t.tiles.len()).collect();
    if !t.setup.full {
        pinned.extend(parse_affinity(agave)?);
    }
    if !t.bench.is_empty() {
        let b = parse_affinity(bench_affinity)?;
        if b.len() < t.bench.len() {
            return Err(format!(
                "The benchmark topology you are using has {} bench tiles, but the CPU affinity specified in the [development.bench.affinity] only provides for {} cores. ",
                t.bench.len(),
                b.len()
            ));
        }
        pinned.extend(b);
    }
    if pinned.iter().flatten().any(|cpu| !cpuset.contains(cpu)) {
        return Err("sched_setaffinity failed (22-Invalid argument)".into());
    }
    Ok(())
}

/// The workspaces placed in 1 GiB pages ([hugetlbfs] gigantic_page_threshold_mib = 128),
/// in creation order, with their pages. A lab approximation of `fdctl mem` scaled by the
/// layout: 25 pages for the default layout (book/api/cli.md shows 25 for 17 tiles) and
/// more for each verify tile's signature cache and each bank.
pub fn gigantic_workspaces(t: &Topology, v: V) -> Vec<(&'static str, u32)> {
    let s = &t.setup;
    let half = |n: u32| n.div_ceil(2);
    let r = renamed(v);
    let mut w = vec![
        ("net_quic", 1),
        ("quic", 2 * s.quic),
        ("quic_verify", 1),
        ("verify", half(s.verify)),
        ("verify_dedup", 1),
        ("dedup", 2),
        (if r { "dedup_resolh" } else { "dedup_resolv" }, 1),
        (if r { "resolh" } else { "resolv" }, s.resolv),
        ("pack", 3),
        ("pack_bank", 1),
        ("bank", half(s.bank)),
        ("shred", 2 * s.shred),
        ("shred_store", 4),
        ("store", 1),
    ];
    if !t.bench.is_empty() {
        w.push(("bench", 2 + s.benchg.div_ceil(4)));
    }
    w
}

/// 2 MiB pages: each tile's stack (6, src/disco/topo/fd_topo.c) and the small workspaces.
pub fn huge_pages(t: &Topology) -> u32 {
    let all = (t.tiles.len() + t.bench.len()) as u32;
    6 * all + 20 + all
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: V = (0, 1106, 40201);

    fn cfg(text: &str) -> BTreeMap<String, Toml> {
        super::super::toml::parse(text).unwrap()
    }

    #[test]
    fn the_default_topology_matches_the_operators_count() {
        let c = cfg("[net]\nprovider = \"xdp\"\n");
        let t = topology(&Cfg(&c), NEW, false);
        // netlnk, net, quic, verify x6, dedup, resolh, pack, bank x4, pohh, shred, store,
        // sign, metric, diag, plugin, guih: 24 (the research notes' count).
        assert_eq!(t.tiles.len(), 24);
        assert_eq!(t.tiles[0].kind, "netlnk");
        let c = cfg("[net]\nprovider = \"socket\"\n[tiles.gui]\nenabled = false\n");
        assert_eq!(topology(&Cfg(&c), NEW, false).tiles.len(), 21);
        assert_eq!(
            gigantic_workspaces(&topology(&Cfg(&c), NEW, false), NEW)
                .iter()
                .map(|w| w.1)
                .sum::<u32>(),
            25
        );
    }

    #[test]
    fn affinity_strings_read_as_fdctl_reads_them() {
        assert_eq!(
            parse_affinity("f1,0-2,8").unwrap(),
            vec![None, Some(0), Some(1), Some(2), Some(8)]
        );
        assert_eq!(parse_affinity("14-57,f1").unwrap().len(), 45);
        assert_eq!(parse_affinity("0-6/2").unwrap().len(), 4);
        assert!(parse_affinity("1,1").is_err());
        assert_eq!(parse_affinity("").unwrap(), vec![]);
    }

    #[test]
    fn a_layout_larger_than_its_cores_is_refused_with_the_numbers() {
        let c = cfg(
            "[layout]\naffinity = \"2-9\"\nagave_affinity = \"\"\n[net]\nprovider = \"socket\"\n[tiles.gui]\nenabled = false\n",
        );
        let t = topology(&Cfg(&c), NEW, false);
        let e = check_affinity(&Cfg(&c), &t, &(2..10).collect::<Vec<_>>()).unwrap_err();
        assert!(e.starts_with("The topology you are using has 21 tiles, but the CPU affinity specified in the config tile as [layout.affinity] only provides for 8 cores."), "{e}");
        // Cores outside the container's cpuset cannot be pinned.
        let c = cfg(
            "[layout]\naffinity = \"0-30\"\nagave_affinity = \"31\"\n[net]\nprovider = \"socket\"\n[tiles.gui]\nenabled = false\n",
        );
        let t = topology(&Cfg(&c), NEW, false);
        assert_eq!(
            check_affinity(&Cfg(&c), &t, &(2..34).collect::<Vec<_>>()).unwrap_err(),
            "sched_setaffinity failed (22-Invalid argument)"
        );
    }
}
