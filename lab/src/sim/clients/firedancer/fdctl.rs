//! What fdctl (or fddev, firedancer, firedancer-dev: the shared boot code) does with a
//! config before its tiles run, in its order, exiting with its message where it would
//! (firedancer-io/firedancer at v0.1106.40201 unless noted; full Firedancer at v1.1.4): load the config (shared/fd_config.c: parse, unrecognized keys, the user, the
//! live-cluster checks), build the topology (src/app/fdctl/topology.c: affinity), check
//! permissions (shared/boot/fd_boot.c), then for `run`/`bench` create the workspaces in
//! hugetlbfs (shared/commands/run/run.c: ENOMEM) and pin the tiles (fd_topo_run.c).

use std::collections::BTreeMap;

use super::full as full_topology;
use super::keys::{FULL_KEYS, KEYS, V};
use super::perms::{self, Privileges};
use super::toml::{self, Toml};
use super::topology::{self, Cfg, Topology};

/// Genesis hashes fdctl recognises as live clusters (src/disco/genesis/fd_genesis_cluster.c
/// `fd_genesis_cluster_identify`): devnet, testnet, mainnet-beta, pythtest, pythnet.
const LIVE: [&str; 5] = [
    "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG",
    "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY",
    "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d",
    "EkCkB7RWVrgkcpariRpd3pjf7GwiCMZaMHKUpB5Na1Ve",
    "GLKkBUr6r72nBtGrtBPJLRqtsh8wXZanX4xfnqKnWwKq",
];

fn err(line: &str) -> String {
    format!("ERR     {line}")
}

/// Full Firedancer (`firedancer`, v1.0.0 on) rather than Frankendancer.
pub fn full(v: V) -> bool {
    v.0 >= 1
}

fn known_key(key: &str, v: V) -> bool {
    let keys = if full(v) { FULL_KEYS } else { KEYS };
    keys.iter().any(|(k, since, before)| {
        *k == key && since.is_none_or(|s| v >= s) && before.is_none_or(|b| v < b)
    })
}

/// `fd_config_load`: the parsed config, or fdctl's exit message.
pub fn load(
    text: &str,
    path: &str,
    v: V,
    local_cluster: bool,
) -> Result<BTreeMap<String, Toml>, String> {
    let c = toml::parse(text).map_err(|(line, what)| {
        err(&match what {
            "duplicate key" => {
                format!("Failed to parse config file ({path}) at line {line}: duplicate key")
            }
            _ => format!("Failed to parse config file ({path}) at line {line}"),
        })
    })?;
    let unknown: Vec<&String> = c.keys().filter(|k| !known_key(k, v)).collect();
    if !unknown.is_empty() {
        let mut out: Vec<String> = unknown
            .iter()
            .map(|k| format!("WARNING Config file contains unrecognized key `{k}`"))
            .collect();
        out.push(err(&format!(
            "Failed to parse config file ({path}): there are unrecognized keys logged above"
        )));
        return Err(out.join("\n"));
    }
    let cfg = Cfg(&c);
    let user = cfg.str("user", "");
    // An empty user is the login user, which in a container is root.
    if user.is_empty() || user == "root" {
        return Err(err(
            "firedancer cannot run as root. please specify a non-root user in the configuration file",
        ));
    }
    if full(v) {
        full_topology::validate(&cfg).map_err(|e| err(&e))?;
    }
    let live = !local_cluster && LIVE.contains(&cfg.str("consensus.expected_genesis_hash", ""));
    if live {
        // Full Firedancer's key is `[paths] identity_key`; the message names the old one
        // (src/app/shared/fd_config.c fd_config_fill @v1.1.4).
        let identity = if full(v) {
            "paths.identity_key"
        } else {
            "consensus.identity_path"
        };
        if cfg.str(identity, "").is_empty() {
            return Err(err(
                "configuration file must specify [consensus.identity_path] when joining a live cluster",
            ));
        }
        for key in ["larger_max_cost_per_block", "larger_shred_limits_per_block"] {
            if cfg.bool(&format!("development.bench.{key}"), false) {
                return Err(err(&format!(
                    "trying to join a live cluster, but configuration enables [development.bench.{key}] which is a development only feature"
                )));
            }
        }
        if cfg.int("development.bench.disable_blockstore_from_slot", 0) != 0 {
            return Err(err(
                "trying to join a live cluster, but configuration has a non-zero value for [development.bench.disable_blockstore_from_slot] which is a development only feature",
            ));
        }
    }
    Ok(c)
}

/// Pages a container may draw: (1 GiB, 2 MiB), from its hugepages limits (the kubelet's
/// hugetlb cgroup limits).
pub type Pages = (u32, u32);

/// One invocation, after the config loaded: the topology, permission checks, and for
/// `run`/`bench` the workspaces and the pinning of tiles.
pub fn invoke(
    argv: &[String],
    c: &BTreeMap<String, Toml>,
    v: V,
    p: &Privileges,
    cpuset: &[u32],
    pages: Pages,
) -> Result<Option<Topology>, String> {
    let program = argv.first().map(String::as_str).unwrap_or("");
    let command = argv.get(1).map(String::as_str).unwrap_or("");
    let dev = program == "fddev" || program == "firedancer-dev";
    let bench = dev && command == "bench";
    let cfg = Cfg(c);
    if bench && full(v) && !cfg.bool("tiles.rpc.enabled", true) {
        // bench_topo (src/app/shared_dev/commands/bench/bench.c @v1.1.4).
        return Err(err("RPC tile must be enabled to run bench"));
    }
    let t = if full(v) {
        full_topology::topology(&cfg, v, bench)
    } else {
        topology::topology(&cfg, v, bench)
    };
    // Affinity strings are read while the topology is built, before anything else.
    let affinity = topology::check_affinity(&cfg, &t, cpuset);
    if let Err(e) = &affinity
        && !e.starts_with("sched_setaffinity")
    {
        return Err(err(e));
    }
    match command {
        "keys" => return Ok(None),
        "configure" => {
            perms::check("configure", p)?;
            return Ok(None);
        }
        "run" | "bench" => perms::check(command, p)?,
        other => return Err(err(&format!("unknown subcommand `{other}`"))),
    }
    let mount = cfg.str("hugetlbfs.mount_path", "/mnt/.fd");
    let name = cfg.str("name", "fd1");
    let mut used = 0;
    let workspaces = if full(v) {
        full_topology::gigantic_workspaces(&t, &cfg)
    } else {
        topology::gigantic_workspaces(&t, v)
    };
    for (wksp, n) in workspaces {
        used += n;
        if used > pages.0 {
            return Err(err(&format!(
                "ENOMEM-Out of memory when trying to create workspace `{wksp}` at `{mount}/.gigantic/{name}_{wksp}.wksp` with {n} gigantic pages. Firedancer reserves enough memory for all of its workspaces during the `hugetlbfs` configure step, so it is likely you have unknown files left over in this directory which are consuming memory, or another program on the system is using pages from the same mount."
            )));
        }
    }
    if topology::huge_pages(&t) > pages.1 {
        let tile = t.tiles.last().map(|t| t.kind).unwrap_or("metric");
        return Err(err(&format!(
            "ENOMEM-Out of memory when trying to create huge page stack for tile `{tile}` at `{mount}/.huge/{name}_stack_{tile}0`. Firedancer reserves enough memory for all of its stacks during the `hugetlbfs` configure step, so it is likely you have unknown files left over in this directory which are consuming memory, or another program on the system is using pages from the same mount."
        )));
    }
    affinity.map_err(|e| err(&e))?;
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: V = (0, 1106, 40201);

    #[test]
    fn an_unrecognized_or_renamed_key_is_fatal() {
        let e = load(
            "user = \"fd\"\n[layout]\nresolv_tile_count = 2\n",
            "/c.toml",
            NEW,
            true,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "WARNING Config file contains unrecognized key `layout.resolv_tile_count`\nERR     Failed to parse config file (/c.toml): there are unrecognized keys logged above"
        );
        // The same key is right before v0.901.
        assert!(
            load(
                "user = \"fd\"\n[layout]\nresolv_tile_count = 2\n",
                "/c.toml",
                (0, 505, 20216),
                true
            )
            .is_ok()
        );
        assert!(
            load(
                "user = \"fd\"\n[layout]\nsolana_labs_affinity = \"1\"\n",
                "/c",
                NEW,
                true
            )
            .is_err()
        );
    }

    #[test]
    fn root_and_development_keys_on_a_live_cluster_are_refused() {
        assert!(
            load("user = \"root\"\n", "/c", NEW, true)
                .unwrap_err()
                .contains("cannot run as root")
        );
        let live = "user = \"fd\"\n[consensus]\nexpected_genesis_hash = \"5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d\"\nidentity_path = \"/i\"\n[development.bench]\ndisable_blockstore_from_slot = 1\n";
        assert!(
            load(live, "/c", NEW, false)
                .unwrap_err()
                .contains("non-zero value for [development.bench.disable_blockstore_from_slot]")
        );
        assert!(load(live, "/c", NEW, true).is_ok());
    }
}
