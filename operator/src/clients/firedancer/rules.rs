//! Admission rules only Firedancer has (CEL on the experiment spec), beyond its knob
//! table's: a known version of the flavor asked for; privileges only by explicit opt-in;
//! a layout that fits the trial's cores and hugepages (with the numbers); config keys
//! valtune owns; full Firedancer's own limits (at least two sign tiles, no known validators).

use kube::core::Rule;

use super::config_full;
use super::layout::{STACK_HUGE_PAGES, cel};
use super::versions::{V0_501, V1, V1_1};
use crate::api::sweep::{ThreadKnob, cel_swept};
use crate::api::version::{Versions, cel_known, cel_version};
use crate::clients::knobs::{Dim, Place};

/// Keys valtune writes from the spec; setting them as config keys would break the trial.
pub const RESERVED_KEYS: [&str; 21] = [
    "user",
    "scratch_directory",
    "layout.affinity",
    "layout.agave_affinity",
    "layout.solana_labs_affinity",
    "hugetlbfs.mount_path",
    "net.provider",
    "tiles.metric.prometheus_listen_address",
    "tiles.metric.prometheus_listen_port",
    "tiles.gui.enabled",
    "tiles.gui.gui_listen_port",
    "tiles.bundle.enabled",
    "rpc.port",
    "reporting.solana_metrics_config",
    "consensus.identity_path",
    "ledger.path",
    "ledger.accounts_path",
    "snapshots.path",
    "development.bench.affinity",
    "development.bench.benchg_tile_count",
    "development.bench.benchs_tile_count",
];

fn reserved(key: &str) -> String {
    let list = RESERVED_KEYS
        .iter()
        .chain(&config_full::RESERVED)
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("({key} in [{list}] || {key}.endsWith('_tile_count'))")
}

/// Development-only keys fdctl refuses on a live cluster (shared/fd_config.c L384-390
/// @v0.1106.40201, the same at v0.913.40003 and v1.1.4: "trying to join a live cluster,
/// but configuration enables ..." / "disables the sandbox" / "disables multiprocess").
fn development(key: &str) -> String {
    format!(
        "({key}.startsWith('development.bench.') || {key}.startsWith('development.genesis.') || {key} in ['development.sandbox', 'development.no_clone'])"
    )
}

fn rule(cond: String, message: &str, field: &str) -> Rule {
    Rule::new(format!("!has({}) || {cond}", cel::SPEC))
        .message(message)
        .field_path(field)
}

pub fn rules() -> Vec<Rule> {
    let f = cel::SPEC;
    let version = cel_version(f);
    let known = cel_known(&version);
    let frankendancer = Versions {
        since: Some(V0_501),
        before: Some(V1),
    };
    let full = cel::full();
    let (tiles, bench, agave, min_cpu, stacks) = (
        cel::tiles(),
        cel::bench_cores(),
        cel::agave_cores(),
        cel::min_cpu(),
        cel::stack_pages(),
    );
    let mut rules = vec![
        rule(
            known.clone(),
            "Firedancer's config keys, tile names and metric names depend on its version, which is not known: set template.firedancer.version (e.g. 0.1106.40201) or use an image tagged :vX.Y.Z",
            ".template.firedancer.version",
        ),
        rule(
            format!(
                "!({known}) || {full} || ({})",
                frankendancer.cel_contains(&version)
            ),
            "valtune renders Frankendancer from v0.501.20212 (the socket provider and the topology it counts) and below v1.0.0; v1.0.0 and later (v1.x, v26.x) is full Firedancer: set template.firedancer.flavor: firedancer, or use a Frankendancer image (v0.x)",
            ".template.firedancer.version",
        ),
        rule(
            format!(
                "!({known}) || !({full}) || {}",
                Versions::since(V1).cel_contains(&version)
            ),
            "full Firedancer (the firedancer binary) exists from v1.0.0; v0.x releases are Frankendancer (fdctl): set template.firedancer.flavor: frankendancer, or use a full Firedancer image (v1.0.0 or later)",
            ".template.firedancer.flavor",
        ),
        rule(
            format!(
                "{full} || !has({f}.layout) || (!has({f}.layout.execTiles) && !has({f}.layout.gossvfTiles) && !has({f}.layout.signTiles))"
            ),
            "execTiles, gossvfTiles and signTiles are full Firedancer's tiles (execrp, gossvf, sign counts); Frankendancer has one sign tile and replays in its Agave child: remove them or set flavor: firedancer",
            ".template.firedancer.layout",
        ),
        rule(
            format!("!({full}) || !has({f}.knownValidators) || size({f}.knownValidators) == 0"),
            "full Firedancer has no [consensus] known_validators (src/app/firedancer/config/default.toml): remove knownValidators; to pick snapshot peers use template.firedancer.config snapshots.sources.gossip.allow_list with allow_any = false",
            ".template.firedancer.knownValidators",
        ),
        rule(
            "(!has(self.sweep.threads) || self.sweep.threads.all(t, t.name != 'signTiles' || t.values.min() >= 2)) && (!has(self.sweep.ranges) || self.sweep.ranges.all(r, r.name != 'signTiles' || int(r.min) >= 2))".into(),
            "full Firedancer needs at least 2 sign tiles ('layout.sign_tile_count must be >= 2', src/app/shared/fd_config.c fd_config_validatef): sweep signTiles from 2",
            ".sweep.threads",
        ),
        rule(
            format!(
                "!{} || self.template.tuning.threads.signTiles >= 2",
                Dim::Thread(ThreadKnob::SignTiles).cel_set(Place::Tuning)
            ),
            "full Firedancer needs at least 2 sign tiles ('layout.sign_tile_count must be >= 2', src/app/shared/fd_config.c fd_config_validatef): set signTiles to 2 or more",
            ".template.tuning.threads",
        ),
        rule(
            format!(
                "{f}.privileged || (has({f}.capabilities) && 'NET_RAW' in {f}.capabilities && 'SYS_ADMIN' in {f}.capabilities)"
            ),
            "fdctl run checks CAP_NET_RAW and CAP_SYS_ADMIN even with the socket provider (shared/commands/run/run.c run_cmd_perm), and SYS_ADMIN mounts its hugetlbfs: opt in with template.firedancer.capabilities: [NET_RAW, SYS_ADMIN, SYS_RESOURCE] (SYS_RESOURCE raises the memlock, nofile and nice limits) or privileged: true",
            ".template.firedancer.capabilities",
        ),
        rule(
            format!("{f}.workload == 'bench' || {f}.privileged"),
            "a follower needs privileged: true: every tile's sandbox writes /proc/sys/user/max_*_namespaces after unshare(CLONE_NEWUSER) (src/util/sandbox/fd_sandbox.c fd_sandbox_private_deny_namespaces), the kubelet mounts /proc/sys read-only in a container that is not privileged (kubernetes pkg/securitycontext/util.go), and the sandbox cannot be turned off on a live cluster ('configuration disables the sandbox which is a development only feature', src/app/shared/fd_config.c): opt in with template.firedancer.privileged: true",
            ".template.firedancer.privileged",
        ),
        rule(
            format!(
                "!({full}) || {f}.workload != 'bench' || !({known}) || !({})",
                Versions::since(V1_1).cel_contains(&version)
            ),
            "firedancer-dev bench from v1.1.0 runs configure init of every stage and no flag skips one (src/app/firedancer-dev/main.h STAGES, src/app/shared_dev/commands/bench/bench.c); its irq-affinity, kworkers, cpuset and console stages write /proc/irq, /sys/devices/virtual/workqueue/cpumask, /sys/fs/cgroup/cgroup.subtree_control and /proc/sys/kernel/printk, which a container cannot (the cpuset stage's isolated partition not even privileged): benchmark with a v1.0.x image (e.g. tagged :v1.0.1), whose bench runs none of these stages, or use workload: follow",
            ".template.firedancer.version",
        ),
        rule(
            format!("{f}.netProvider != 'xdp' || {f}.privileged"),
            "XDP loads a BPF program onto the node's network interface, which needs privileged: true (and the pod then uses the node's network): opt in with template.firedancer.privileged: true, or use netProvider: socket",
            ".template.firedancer.netProvider",
        ),
        rule(
            format!("has(self.template.resources.hugepages1Gi) || {}", cel_swept("hugepages1Gi")),
            "Firedancer places its workspaces in hugepages (1 GiB pages): set template.resources.hugepages1Gi (or sweep.hugepages1Gi) to at least what `fdctl mem` (full Firedancer: `firedancer mem`) prints as Required Gigantic Pages",
            ".template.resources.hugepages1Gi",
        ),
        rule(
            "!has(self.template.extraArgs) || size(self.template.extraArgs) == 0".into(),
            "fdctl takes its settings from its TOML config, not arguments: use template.firedancer.config instead of extraArgs",
            ".template.extraArgs",
        ),
        rule(
            format!("!has({f}.config) || {f}.config.all(k, !{})", reserved("k")),
            "this config key is valtune's: tile counts come from sweep.threads, template.tuning.threads or template.firedancer.layout, affinity from the container's cores, paths from template.storage, and user, netProvider, metricsPort, gui, rpcPort and bench from their fields",
            ".template.firedancer.config",
        ),
        rule(
            format!(
                "!has(self.sweep.knobs) || self.sweep.knobs.all(k, !has(k.configKey) || !{})",
                reserved("k.configKey")
            ),
            "this configKey is valtune's: sweep tile counts with sweep.threads; affinity is computed from the container's cores",
            ".sweep.knobs",
        ),
        rule(
            format!(
                "{f}.workload == 'bench' || ((!has({f}.config) || {f}.config.all(k, !{})) && (!has(self.sweep.knobs) || self.sweep.knobs.all(k, !has(k.configKey) || !{})))",
                development("k"),
                development("k.configKey")
            ),
            "development.bench, development.genesis, development.sandbox and development.no_clone keys are for the bench workload: fdctl refuses them when joining a live cluster ('trying to join a live cluster, but configuration enables [development.bench...] which is a development only feature', shared/fd_config.c): set workload: bench or remove them",
            ".template.firedancer.workload",
        ),
    ];
    // Each tile owns a core, the bench's generators and senders too, and Frankendancer's
    // Agave child needs at least one (src/app/fdctl/topology.c and
    // src/app/firedancer/topology.c refuse fewer affinity cores than tiles). Messages use
    // `format`: the apiserver's cost estimate of `+ string(n)` is unbounded.
    rules.push(
        Rule::new(format!("!has({f}) || {tiles} + {bench} + {agave} <= {min_cpu}"))
            .message(kube::core::Message::Expression(format!(
                "'the largest layout needs %d tile cores%s%s, %d cores in all, but a trial gets %d: raise template.resources.cpu (or sweep.cpu) or lower the tile counts (each tile owns a core)'.format([{tiles}, {f}.workload == 'bench' ? ' and %d for the bench generators and senders'.format([{bench}]) : '', {full} ? '' : ' and at least 1 for the Agave child', {tiles} + {bench} + {agave}, {min_cpu}])"
            )))
            .field_path(".template.resources.cpu"),
    );
    rules.push(
        Rule::new(format!(
            "!has({f}) || (has(self.template.resources.hugepages2Mi) && self.template.resources.hugepages2Mi >= {stacks})"
        ))
        .message(kube::core::Message::Expression(format!(
            "'the largest layout has %d tiles, each with an 8 MiB stack in 2 MiB pages ({STACK_HUGE_PAGES} each, src/disco/topo/fd_topo.c): set template.resources.hugepages2Mi to at least %d plus its small workspaces (fdctl mem prints Required Huge Pages)'.format([{}, {stacks}])",
            cel::all_tiles()
        )))
        .field_path(".template.resources.hugepages2Mi"),
    );
    rules
}
