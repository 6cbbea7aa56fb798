//! Full Firedancer's topology as `firedancer` builds it from a config
//! (firedancer-io/firedancer `src/app/firedancer/topology.c` `fd_topo_initialize` at
//! v1.0.1, v1.1.4 and v26.08.1; the bench's tiles from
//! `src/app/shared_dev/commands/bench/bench.c`), its checks, with their messages, and the
//! pages its workspaces take.

use super::bench::Setup;
use super::keys::V;
use super::topology::{Cfg, Topology, bench_tiles, push};

/// rserve, accdb, admin and snapwr came with v1.1.0.
fn v1_1(v: V) -> bool {
    v >= (1, 1, 0)
}

/// The tiles of a config, in `fd_topo_initialize`'s order (defaults of
/// src/app/firedancer/config/default.toml, the same from v1.0.0 to v26.08.1).
pub fn topology(c: &Cfg, v: V, bench: bool) -> Topology {
    let n = |key: &str, d: i64| c.int(key, d).max(0) as u32;
    let leader = c.bool("layout.enable_block_production", true);
    let on = |count: u32| if leader { count } else { 0 };
    let (net, quic, verify, resolv, execle, shred) = (
        n("layout.net_tile_count", 2),
        on(n("layout.quic_tile_count", 1)),
        on(n("layout.verify_tile_count", 6)),
        on(n("layout.resolv_tile_count", 1)),
        on(n("layout.execle_tile_count", 2)),
        n("layout.shred_tile_count", 1),
    );
    let (gossvf, execrp, sign) = (
        n("layout.gossvf_tile_count", 2),
        n("layout.execrp_tile_count", 10),
        n("layout.sign_tile_count", 2),
    );
    let mut t = Vec::new();
    if c.str("net.provider", "xdp") == "xdp" {
        push(&mut t, "netlnk", 1);
        push(&mut t, "net", net);
    } else {
        push(&mut t, "sock", net);
    }
    push(&mut t, "metric", 1);
    push(&mut t, "diag", 1);
    let entrypoints =
        matches!(c.0.get("gossip.entrypoints"), Some(super::toml::Toml::Arr(a)) if !a.is_empty());
    if entrypoints {
        for kind in ["snapct", "snapld", "snapdc", "snapin"] {
            push(&mut t, kind, 1);
        }
        if v1_1(v) {
            push(&mut t, "snapwr", 1);
        }
    }
    push(&mut t, "genesi", 1);
    push(&mut t, "ipecho", 1);
    push(&mut t, "gossvf", gossvf);
    push(&mut t, "gossip", 1);
    push(&mut t, "shred", shred);
    push(&mut t, "repair", 1);
    if v1_1(v) && c.bool("tiles.rserve.enabled", true) {
        push(&mut t, "rserve", 1);
    }
    push(&mut t, "replay", 1);
    if v1_1(v) {
        push(&mut t, "accdb", 1);
    }
    push(&mut t, "execrp", execrp);
    push(&mut t, "tower", 1);
    push(&mut t, "txsend", 1);
    if leader {
        push(&mut t, "quic", quic);
        push(&mut t, "verify", verify);
        push(&mut t, "dedup", 1);
        push(&mut t, "resolv", resolv);
        push(&mut t, "pack", 1);
        push(&mut t, "execle", execle);
        push(&mut t, "poh", 1);
    }
    push(&mut t, "sign", sign);
    if c.bool("tiles.rpc.enabled", true) {
        push(&mut t, "rpc", 1);
    }
    if v1_1(v) {
        push(&mut t, "admin", 1);
    }
    // `telemetry` and a `[tiles.event] url` (both on by default) run the event tile.
    if c.bool("telemetry", true)
        && !c
            .str("tiles.event.url", "https://events-in.firedancer.io")
            .is_empty()
    {
        push(&mut t, "event", 1);
    }
    if c.bool("tiles.bundle.enabled", false) && leader {
        push(&mut t, "bundle", 1);
    }
    if c.bool("tiles.gui.enabled", true) {
        push(&mut t, "gui", 1);
    }
    let (benchg, benchs, bench_tiles) = bench_tiles(c, bench);
    Topology {
        tiles: t,
        bench: bench_tiles,
        setup: Setup {
            net,
            quic,
            verify,
            resolv,
            bank: execle,
            shred,
            benchg,
            benchs,
            blockstore: false,
            larger_blocks: c.bool("development.bench.larger_max_cost_per_block", false),
            full: true,
            exec: execrp,
        },
    }
}

/// Checks `fd_config_validatef` makes of the counts (src/app/shared/fd_config.c @v1.1.4).
pub fn validate(c: &Cfg) -> Result<(), String> {
    for key in [
        "layout.sign_tile_count",
        "layout.resolv_tile_count",
        "layout.execle_tile_count",
    ] {
        if c.int(key, 1) == 0 {
            return Err(format!("missing `{key}`"));
        }
    }
    if c.int("layout.sign_tile_count", 2) < 2 {
        return Err("layout.sign_tile_count must be >= 2".into());
    }
    Ok(())
}

/// The workspaces placed in 1 GiB pages, in creation order, with their pages. A lab
/// approximation, not `firedancer mem`: the accounts cache (`[accounts] cache_size_gib`,
/// 12 by default from v1.1.0; the lab takes 12 for v1.0 too) and the program cache heap
/// (768 MiB) rounded up, plus the tiles' own workspaces scaled by their counts as for
/// Frankendancer. About 40 pages for the default follower.
pub fn gigantic_workspaces(t: &Topology, c: &Cfg) -> Vec<(&'static str, u32)> {
    let s = &t.setup;
    let half = |n: u32| n.div_ceil(2);
    let mut w = vec![
        ("accdb", c.int("accounts.cache_size_gib", 12).max(0) as u32),
        ("progcache", 1),
        ("gossip", 2),
        ("repair", 1),
        ("replay", 2),
        ("execrp", half(s.exec)),
        ("shred", 2 * s.shred),
        ("quic", 2 * s.quic),
        ("verify", half(s.verify)),
        ("dedup", 2),
        ("resolv", s.resolv),
        ("pack", 3),
        ("execle", half(s.bank)),
    ];
    if t.tiles.iter().any(|t| t.kind == "snapct") {
        w.push(("snapshots", 4));
    }
    if !t.bench.is_empty() {
        w.push(("bench", 2 + s.benchg.div_ceil(4)));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::clients::firedancer::toml;

    fn cfg(text: &str) -> std::collections::BTreeMap<String, toml::Toml> {
        toml::parse(text).unwrap()
    }

    const FOLLOWER: &str = "telemetry = false\n[gossip]\nentrypoints = [\"a:8001\"]\n[net]\nprovider = \"socket\"\n[tiles.gui]\nenabled = false\n";

    #[test]
    fn the_tiles_match_the_operators_count_by_version() {
        // The operator's layout.rs counts 48 (v1.1.4) and 44 (v1.0.1) for this follower.
        let c = cfg(FOLLOWER);
        assert_eq!(topology(&Cfg(&c), (1, 1, 4), false).tiles.len(), 48);
        assert_eq!(topology(&Cfg(&c), (1, 0, 1), false).tiles.len(), 44);
        // The bench: no entrypoints, so no snapshot tiles; its own bencho/benchg/benchs.
        let c = cfg(&FOLLOWER.replace("entrypoints = [\"a:8001\"]", ""));
        let t = topology(&Cfg(&c), (26, 8, 1), true);
        assert_eq!((t.tiles.len(), t.bench.len()), (43, 7));
        // Defaults: telemetry's event tile and the GUI run unless turned off.
        let c = cfg("[net]\nprovider = \"socket\"\n");
        assert_eq!(topology(&Cfg(&c), (1, 1, 4), false).tiles.len(), 43 + 2);
    }

    #[test]
    fn the_default_follower_takes_about_forty_gigantic_pages() {
        let c = cfg(FOLLOWER);
        let t = topology(&Cfg(&c), (1, 1, 4), false);
        let pages: u32 = gigantic_workspaces(&t, &Cfg(&c)).iter().map(|w| w.1).sum();
        assert!((35..=45).contains(&pages), "{pages}");
    }

    #[test]
    fn sign_tiles_must_be_two() {
        let c = cfg("[layout]\nsign_tile_count = 1\n");
        assert_eq!(
            validate(&Cfg(&c)),
            Err("layout.sign_tile_count must be >= 2".into())
        );
        let c = cfg("[layout]\nexecle_tile_count = 0\n");
        assert_eq!(
            validate(&Cfg(&c)),
            Err("missing `layout.execle_tile_count`".into())
        );
    }
}
