//! What fdctl (or fddev, firedancer, firedancer-dev: the shared boot code) does with a
//! config before its tiles run, in its order, exiting with its message where it would
//! (firedancer-io/firedancer at v0.1106.40201 unless noted; full Firedancer at v1.1.4): load the config (shared/fd_config.c: parse, unrecognized keys, the user, the
//! live-cluster checks), build the topology (src/app/fdctl/topology.c: affinity), check
//! permissions (shared/boot/fd_boot.c), for `bench` configure the host as a container
//! lets it ([`bench_stages`]: sysctls where its network namespace has them, and from
//! full Firedancer v1.1.0 /proc/irq, /sys and the cgroup tree), then for `run`/`bench`
//! create the workspaces in hugetlbfs (shared/commands/run/run.c: ENOMEM), pin the tiles
//! (fd_topo_run.c), and for `run` enter each tile's sandbox ([`sandbox`]).

use std::collections::BTreeMap;

use super::full as full_topology;
use super::keys::{FULL_KEYS, KEYS, V};
use super::perms;
use super::toml::{self, Toml};
use super::topology::{self, Cfg, Topology};
use crate::kubelet::privileges::Privileges;
use crate::topology::Prepared;

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

/// The node as the process finds it: its kernel settings, read in the pod's network
/// namespace (the host's with `hostNetwork`).
pub struct Node<'a> {
    pub prepared: &'a Prepared,
    pub host_network: bool,
}

/// fd_io_strerror's words for the errnos a container meets (src/util/io/fd_io.c).
const ENOENT: &str = "2-ENOENT-no such file or directory";
const EROFS: &str = "30-EROFS-read-only file system";
const EBUSY: &str = "16-EBUSY-device or resource busy";

/// The sysctl stage's `check` then `init` (shared/commands/configure/sysctl.c, the same at
/// v0.913.40003, v0.1106.40201, v1.0.1 and v1.1.4): a parameter it cannot read is fatal,
/// one below its minimum is written, which a read-only /proc/sys refuses. (XDP's loopback
/// parameters are not modelled: the lab writes no net/ipv4.)
fn sysctl_stage(cfg: &Cfg, p: &Privileges, node: &Node) -> Result<(), String> {
    let mut params = vec![
        ("vm/max_map_count", 1_000_000),
        ("fs/file-max", 1_024_000),
        ("fs/nr_open", 1_024_000),
    ];
    if cfg.str("net.provider", "xdp") == "socket" {
        params.push((
            "net/core/rmem_max",
            cfg.int("net.socket.receive_buffer_size", 134_217_728) as u64,
        ));
        params.push((
            "net/core/wmem_max",
            cfg.int("net.socket.send_buffer_size", 134_217_728) as u64,
        ));
    }
    let mut low = Vec::new();
    for (path, want) in params {
        match node.prepared.sysctl(path, node.host_network) {
            None => {
                return Err(err(&format!(
                    "could not read kernel parameter `/proc/sys/{path}`, system might not support configuring sysctl ({ENOENT})"
                )));
            }
            Some(have) if have < want => low.push((path, want)),
            Some(_) => {}
        }
    }
    match low.first() {
        Some((path, want)) if !p.proc_writable() => Err(err(&format!(
            "could not set kernel parameter `/proc/sys/{path}` to {want} ({EROFS})"
        ))),
        _ => Ok(()),
    }
}

/// `configure init` of every stage, which `bench` runs before its tiles
/// (shared_dev/commands/bench/bench.c `bench_cmd_fn`; the stages of src/app/fddev/main.h
/// and src/app/firedancer-dev/main.h), where a container decides the outcome. Frankendancer's
/// and full Firedancer's before v1.1.0 check or set what a prepared node has; from v1.1.0
/// firedancer-dev adds irq-affinity, whose check writes each IRQ's mask back to
/// /proc/irq/N/smp_affinity (irq-affinity.c; EROFS is not among the errors it tolerates),
/// kworkers (/sys/devices/virtual/workqueue/cpumask), and cpuset, which enables the cpuset
/// controller in the cgroup root it sees: in a container that is its own cgroup, which
/// holds the process, so even a privileged one gets EBUSY (cgroup v2 allows no
/// controllers below a cgroup with processes, kernel/cgroup/cgroup.c
/// `cgroup_vet_subtree_control_enable`).
pub fn bench_stages(cfg: &Cfg, v: V, p: &Privileges, node: &Node) -> Result<(), String> {
    sysctl_stage(cfg, p, node)?;
    if !(full(v) && v >= (1, 1, 0)) {
        return Ok(());
    }
    if !p.proc_writable() {
        return Err(err(&format!(
            "write(/proc/irq/0/smp_affinity) failed ({EROFS})"
        )));
    }
    if !p.sys_writable() {
        return Err(err(&format!(
            "open(/sys/devices/virtual/workqueue/cpumask) failed ({EROFS})"
        )));
    }
    Err(err(&format!(
        "could not enable the cpuset controller in `/sys/fs/cgroup/cgroup.subtree_control` ({EBUSY})"
    )))
}

/// Each tile's `fd_sandbox_enter` (src/util/sandbox/fd_sandbox.c, the same at v0.913.40003,
/// v0.1106.40201 and v1.1.4): after `unshare(CLONE_NEWUSER)` it opens
/// /proc/sys/user/max_user_namespaces (and the other max_*_namespaces) for writing, which
/// the kubelet mounts read-only unless the container is privileged. `bench` runs its tiles
/// in one process without the sandbox; `[development] sandbox = false` turns it off, which
/// fd_config.c refuses on a live cluster ([`load`]).
pub fn sandbox(cfg: &Cfg, p: &Privileges) -> Result<(), String> {
    if cfg.bool("development.sandbox", true) && !p.proc_writable() {
        return Err(err(&format!(
            "open(/proc/sys/user/max_user_namespaces) failed ({EROFS})"
        )));
    }
    Ok(())
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
        if !cfg.bool("development.sandbox", true) {
            return Err(err(
                "trying to join a live cluster, but configuration disables the sandbox which is a development only feature",
            ));
        }
        if cfg.bool("development.no_clone", false) {
            return Err(err(
                "trying to join a live cluster, but configuration disables multiprocess which is a development only feature",
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
    node: &Node,
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
    if bench {
        bench_stages(&cfg, v, p, node)?;
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
    if command == "run" {
        sandbox(&cfg, p)?;
    }
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

    fn privileges(security: serde_json::Value) -> Privileges {
        let c: k8s_openapi::api::core::v1::Container =
            serde_json::from_value(serde_json::json!({"name": "v", "securityContext": security}))
                .unwrap();
        Privileges::of(&k8s_openapi::api::core::v1::Pod::default(), &c)
    }

    fn parsed(text: &str) -> BTreeMap<String, Toml> {
        toml::parse(text).unwrap()
    }

    #[test]
    fn a_tiles_sandbox_needs_a_writable_proc_sys() {
        let c = parsed("user = \"fd\"\n");
        let caps = privileges(
            serde_json::json!({"capabilities": {"add": ["NET_RAW", "SYS_ADMIN", "SYS_RESOURCE"]}}),
        );
        assert_eq!(
            sandbox(&Cfg(&c), &caps).unwrap_err(),
            "ERR     open(/proc/sys/user/max_user_namespaces) failed (30-EROFS-read-only file system)"
        );
        assert_eq!(
            sandbox(
                &Cfg(&c),
                &privileges(serde_json::json!({"privileged": true}))
            ),
            Ok(())
        );
        assert_eq!(
            sandbox(
                &Cfg(&c),
                &privileges(serde_json::json!({"procMount": "Unmasked"}))
            ),
            Ok(())
        );
        // Off, as only a development cluster may have it.
        let off = parsed("user = \"fd\"\n[development]\nsandbox = false\n");
        assert_eq!(sandbox(&Cfg(&off), &caps), Ok(()));
        let live = "user = \"fd\"\n[consensus]\nexpected_genesis_hash = \"5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d\"\nidentity_path = \"/i\"\n[development]\nsandbox = false\n";
        assert!(
            load(live, "/c", NEW, false)
                .unwrap_err()
                .contains("configuration disables the sandbox which is a development only feature")
        );
    }

    #[test]
    fn the_bench_configures_what_its_container_lets_it() {
        let socket = parsed("user = \"fd\"\n[net]\nprovider = \"socket\"\n");
        let caps = privileges(
            serde_json::json!({"capabilities": {"add": ["NET_RAW", "SYS_ADMIN", "SYS_RESOURCE"]}}),
        );
        let new_kernel = Prepared::default();
        let old_kernel = Prepared {
            kernel: "6.8.0-45-generic".into(),
            ..Default::default()
        };
        let pod_net = |p| Node {
            prepared: p,
            host_network: false,
        };
        // Frankendancer and full Firedancer before v1.1.0 on a prepared node.
        for v in [NEW, (1, 0, 1)] {
            assert_eq!(
                bench_stages(&Cfg(&socket), v, &caps, &pod_net(&new_kernel)),
                Ok(())
            );
            // In the pod's own network of an older kernel the sysctl stage cannot read
            // the socket buffer limit.
            assert_eq!(
                bench_stages(&Cfg(&socket), v, &caps, &pod_net(&old_kernel)).unwrap_err(),
                "ERR     could not read kernel parameter `/proc/sys/net/core/rmem_max`, system might not support configuring sysctl (2-ENOENT-no such file or directory)"
            );
            assert_eq!(
                bench_stages(
                    &Cfg(&socket),
                    v,
                    &caps,
                    &Node {
                        prepared: &old_kernel,
                        host_network: true
                    }
                ),
                Ok(())
            );
        }
        let low = Prepared {
            rmem_max: 212_992,
            ..Default::default()
        };
        assert_eq!(
            bench_stages(&Cfg(&socket), NEW, &caps, &pod_net(&low)).unwrap_err(),
            "ERR     could not set kernel parameter `/proc/sys/net/core/rmem_max` to 134217728 (30-EROFS-read-only file system)"
        );
        // From v1.1.0: /proc/irq, then the cgroup tree, which not even privileged helps.
        assert_eq!(
            bench_stages(&Cfg(&socket), (1, 1, 4), &caps, &pod_net(&new_kernel)).unwrap_err(),
            "ERR     write(/proc/irq/0/smp_affinity) failed (30-EROFS-read-only file system)"
        );
        assert_eq!(
            bench_stages(
                &Cfg(&socket),
                (1, 1, 0),
                &privileges(serde_json::json!({"privileged": true})),
                &pod_net(&new_kernel)
            )
            .unwrap_err(),
            "ERR     could not enable the cpuset controller in `/sys/fs/cgroup/cgroup.subtree_control` (16-EBUSY-device or resource busy)"
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
