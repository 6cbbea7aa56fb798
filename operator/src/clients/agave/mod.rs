//! Agave (anza-xyz/agave): `agave-validator` on a bare-metal node, as it must run there:
//! the node's network (its port check and gossip, turbine and repair need reachable
//! ports), native sidecars that carry its metrics to Prometheus, a preflight check of
//! the node, and flags by version ([`knobs`]). How results are read is in [`profile`];
//! why each choice, with the upstream sources, in docs/clients.md.

mod args;
mod bench;
mod gpu;
mod knobs;
pub mod pair;
mod points;
mod profile;
mod render;
mod snapshots;
mod validator_rules;
pub mod window;

use std::sync::Arc;

use kube::core::Rule;

pub use profile::{profile, snapshot_figure};

use super::health::{Health, HealthProbe};
use super::knobs::{Dim, KnobTable, Place};
use super::pod::Skeleton;
use super::profile::{Layout, MetricProfile, Objective};
use super::window::{Immediate, RestartWindow};
use super::{ClientPod, RenderError, RenderInput, ValidatorClient, Warmup};
use crate::api::agave::AgaveWorkload;
use crate::api::settings::{QueryKey, WindowStart};
use crate::api::sweep::{Setting, SweepSpec, ThreadKnob};
use crate::api::template::{AgaveSpec, ClientSpec, ValidatorTemplate};
use crate::api::trial::TrialResults;
use crate::api::validator_rules::{ValidatorRoles, Votes};
use crate::api::version::{Version, Versions, cel_known, cel_version};

pub const VALIDATOR_CONTAINER: &str = "validator";
pub const PROCESS_NAME: &str = "agave-validator";
const LEDGER_DIR: &str = "/mnt/ledger";

pub struct Agave;

/// A JSON-RPC `getHealth` answer judged by its body (see [`Agave::health`]).
pub fn get_health(_code: u16, body: &str) -> Health {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return Health::Unknown;
    };
    if v.get("result").and_then(|r| r.as_str()) == Some("ok") {
        return Health::Healthy;
    }
    let err = &v["error"];
    // JSON_RPC_SERVER_ERROR_NODE_UNHEALTHY, rpc-client-api/src/custom_error.rs.
    if err["code"].as_i64() == Some(-32005) && err["data"]["numSlotsBehind"].is_u64() {
        Health::Behind
    } else {
        Health::Unknown
    }
}

fn spec(t: &ValidatorTemplate) -> Result<&AgaveSpec, RenderError> {
    t.client
        .agave
        .as_ref()
        .ok_or_else(|| RenderError::Invalid("the template has no agave settings".into()))
}

/// net-utils `MINIMUM_VALIDATOR_PORT_RANGE_WIDTH` (end - start must be at least this):
/// 14 in 2.0.25, 16 in 2.1.14, 17 in 2.2.x and 2.3.x, 25 from 3.0.0.
const MIN_PORT_RANGE: [(Versions, i64); 4] = [
    (Versions::before(Version::new(2, 1, 0)), 14),
    (
        Versions {
            since: Some(Version::new(2, 1, 0)),
            before: Some(Version::new(2, 2, 0)),
        },
        16,
    ),
    (
        Versions {
            since: Some(Version::new(2, 2, 0)),
            before: Some(Version::new(3, 0, 0)),
        },
        17,
    ),
    (Versions::since(Version::new(3, 0, 0)), 25),
];

/// The widest of them.
const WIDEST_MIN_PORT_RANGE: i64 = 25;

/// CEL, on the experiment spec: the admission rules only Agave has.
fn agave_rules() -> Vec<Rule> {
    let a = "self.template.agave";
    let lo = format!("int({a}.dynamicPortRange.split('-')[0])");
    let hi = format!("int({a}.dynamicPortRange.split('-')[1])");
    let version = cel_version(a);
    let known = cel_known(&version);
    let mut rules = vec![
        Rule::new(format!("!has({a}) || (has(self.template.storage) && self.template.storage.exists(v, v.role == 'ledger'))"))
            .message("Agave needs a ledger volume (--ledger): add {role: ledger, size: 2Ti} to template.storage")
            .field_path(".template.storage"),
        Rule::new(format!("!has({a}) || !has(self.sweep.programCacheEntries) || self.sweep.programCacheEntries.all(n, has({a}.programCacheImages) && {a}.programCacheImages.exists(i, i.entries == n))"))
            .message("Agave's program cache size is the compile-time constant MAX_LOADED_ENTRY_COUNT, so each swept value needs an image built with it: add {entries: N, image: ...} to template.agave.programCacheImages for every value in sweep.programCacheEntries (docs/clients.md says how to build one)")
            .field_path(".sweep.programCacheEntries"),
        Rule::new(format!("!has({a}) || !{} || (has({a}.programCacheImages) && {a}.programCacheImages.exists(i, i.entries == self.template.tuning.programCacheEntries))", Dim::ProgramCacheEntries.cel_from_tuning()))
            .message("Agave's program cache size is the compile-time constant MAX_LOADED_ENTRY_COUNT, so it needs an image built with it: add {entries: N, image: ...} to template.agave.programCacheImages for template.tuning.programCacheEntries (docs/clients.md says how to build one)")
            .field_path(".template.tuning.programCacheEntries"),
        Rule::new(format!("!has({a}) || {lo} < {hi}"))
            .message("dynamicPortRange is reversed or empty: write LOW-HIGH with LOW below HIGH, e.g. 8000-8030")
            .field_path(".template.agave.dynamicPortRange"),
    ];
    // net-utils MINIMUM_VALIDATOR_PORT_RANGE_WIDTH by version; with the version unknown,
    // the range must fit every version.
    rules.push(
        Rule::new(format!("!has({a}) || {known} || {hi} - {lo} >= {WIDEST_MIN_PORT_RANGE}"))
            .message(format!("dynamicPortRange has fewer than {WIDEST_MIN_PORT_RANGE} ports, which Agave 3.x refuses ('Port range is too small'), and the version is not known: widen it (e.g. 8000-8030) or set template.agave.version").as_str())
            .field_path(".template.agave.dynamicPortRange"),
    );
    for (versions, width) in MIN_PORT_RANGE {
        rules.push(
            Rule::new(format!("!has({a}) || !({known}) || !({}) || {hi} - {lo} >= {width}", versions.cel_contains(&version)))
                .message(format!("dynamicPortRange is narrower than Agave {} accepts ({width} ports; it exits with 'Port range is too small'): widen it, e.g. 8000-8030", versions.describe()).as_str())
                .field_path(".template.agave.dynamicPortRange"),
        );
    }
    for (flag, versions) in knobs::versioned_flags() {
        let used = format!(
            "((has(self.template.extraArgs) && self.template.extraArgs.exists(x, x == '{flag}' || x.startsWith('{flag}='))) || (has(self.sweep.knobs) && self.sweep.knobs.exists(k, has(k.arg) && k.arg == '{flag}')))"
        );
        rules.push(
            Rule::new(format!("!has({a}) || !({known}) || ({}) || !{used}", versions.cel_contains(&version)))
                .message(format!("this Agave version has no {flag} (it exists {}), and agave-validator exits on a flag it does not know: remove it from template.extraArgs and sweep.knobs, or use another version", versions.describe()).as_str())
                .field_path(".template.extraArgs"),
        );
    }
    // GPU signature verification is --cuda, removed in 4.0.0 (agave PR #10753, CHANGELOG).
    let gpu = format!(
        "({a}.sigverify == 'gpu' || ({} && self.template.tuning.sigverify == 'gpu') || (has(self.sweep.sigverify) && self.sweep.sigverify.exists(s, s == 'gpu')))",
        Dim::Setting(Setting::Sigverify).cel_set(Place::Tuning)
    );
    let since4 = Versions::since(Version::new(4, 0, 0)).cel_contains(&version);
    rules.push(
        Rule::new(format!("!has({a}) || !({known}) || !({since4}) || !{gpu}"))
            .message("Agave 4.0 removed --cuda (anza-xyz/agave PR #10753), so it cannot verify signatures on a GPU: use a 3.x or earlier image, or remove gpu from sweep.sigverify, template.tuning.sigverify and template.agave.sigverify")
            .field_path(".sweep.sigverify"),
    );
    // 3.0 release images no longer carry solana-bench-tps (scripts/cargo-install-all.sh).
    let since3 = Versions::since(Version::new(3, 0, 0)).cel_contains(&version);
    rules.push(
        Rule::new(format!("!has({a}) || {a}.workload != 'bench' || !({known}) || !({since3}) || has({a}.bench.image)"))
            .message("Agave 3.0 and later release images do not ship solana-bench-tps: set template.agave.bench.image to an image that has it (built from the agave repository with cargo build --release --bin solana-bench-tps)")
            .field_path(".template.agave.bench.image"),
    );
    // Banking threads only work while the validator leads; a follower never does.
    let banking = Dim::Thread(ThreadKnob::BankingThreads);
    for place in Place::ALL {
        rules.push(
            Rule::new(format!("!has({a}) || {a}.workload == 'bench' || !{}", banking.cel_set(place)))
                .message("bankingThreads only matter while the validator produces blocks, and a follower never leads: set template.agave.workload to bench (a private cluster where it is the leader)")
                .field_path(format!(".{}", banking.field(place))),
        );
    }
    // solana-exporter up to v3.0.x calls minimumLedgerSlot and getFirstAvailableBlock on
    // every scrape (collector.go L339-341 at v3.0.2), served only with --full-rpc-api.
    rules.push(
        Rule::new(format!("!has({a}) || {a}.fullRpcApi || !{a}.exporters.rpc.matches(':v?([0-2][.]|3[.]0[.])')"))
            .message("solana-exporter v3.0.x answers HTTP 500 on every scrape of an Agave without --full-rpc-api: keep fullRpcApi true, or use an exporter built after commit d112d7b (its light mode skips the full-API methods)")
            .field_path(".template.agave.fullRpcApi"),
    );
    // The node's network is the pod's: the sidecars' and RPC ports must not collide with
    // Agave's range (gossip, TPU, TVU, repair) or its RPC and websocket ports.
    for (field, what) in [
        ("exporters.rpcPort", "the RPC exporter's port"),
        ("exporters.processPort", "the process exporter's port"),
        ("exporters.datapointsPort", "vmagent's port"),
        ("rpcPort", "rpcPort"),
    ] {
        let p = format!("{a}.{field}");
        rules.push(
            Rule::new(format!("!has({a}) || {p} < {lo} || {p} > {hi}"))
                .message(format!("{what} is inside dynamicPortRange, which Agave uses on the node's network: move one of them").as_str())
                .field_path(format!(".template.agave.{field}")),
        );
        if field != "rpcPort" {
            rules.push(
                Rule::new(format!("!has({a}) || ({p} != {a}.rpcPort && {p} != {a}.rpcPort + 1)"))
                    .message(format!("{what} collides with Agave's RPC port or its websocket (rpcPort + 1): choose another").as_str())
                    .field_path(format!(".template.agave.{field}")),
            );
        }
    }
    rules
}

impl ValidatorClient for Agave {
    fn name(&self) -> &'static str {
        "agave"
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.agave.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .agave
            .as_ref()
            .map(|a| (a.image.as_str(), a.version.as_deref()))
            .unwrap_or(("", None))
    }

    fn knobs(&self) -> &'static KnobTable {
        &knobs::AGAVE
    }

    fn rules(&self) -> Vec<Rule> {
        agave_rules()
    }

    fn render(&self, input: &RenderInput, skeleton: &Skeleton) -> Result<ClientPod, RenderError> {
        let agave = spec(&input.template)?;
        render::pod(self, input, agave, skeleton)
    }

    fn profile(&self, t: &ValidatorTemplate) -> MetricProfile {
        profile::profile(
            t.client
                .agave
                .as_ref()
                .map(|a| a.workload)
                .unwrap_or_default(),
        )
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(
            profile::profile(AgaveWorkload::Follow)
                .queries
                .keys()
                .copied()
                .collect(),
        )
    }

    /// JSON-RPC `getHealth` on the RPC port, judged by its body: result `"ok"`, or the
    /// error `NodeUnhealthy` (-32005) with `numSlotsBehind` when behind and without it
    /// when it cannot tell (rpc/src/rpc.rs `get_health` over rpc/src/rpc_health.rs
    /// `RpcHealthStatus::{Ok, Behind, Unknown}`; solana-rpc 4.0.0 from crates.io, tag
    /// v4.0.0 (2a165e7a), L2835-2847, the newest of the 4.0 line published, and the
    /// same answers on master). The HTTP code is 200 for all three.
    fn health(&self, t: &ValidatorTemplate) -> Option<HealthProbe> {
        let agave = t.client.agave.as_ref()?;
        Some(HealthProbe {
            port: agave.rpc_port,
            path: "/".into(),
            host: None,
            rpc_method: Some("getHealth"),
            judge: get_health,
            position: None,
        })
    }

    /// `agave-validator wait-for-restart-window`'s checks, over the same RPC.
    fn restart_window(&self, t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        match t.client.agave.as_ref() {
            Some(a) => Arc::new(window::LeaderSchedule {
                rpc_port: a.rpc_port,
            }),
            None => Arc::new(Immediate),
        }
    }

    fn validator_roles(&self) -> ValidatorRoles {
        ValidatorRoles {
            name: "agave",
            display: "Agave",
            votes: Votes::WithVoteAccount,
            failover: true,
            window_options: true,
        }
    }

    fn validator_rules(&self) -> Vec<Rule> {
        validator_rules::rules()
    }

    fn identity_rpc_port(&self, t: &ValidatorTemplate) -> Option<i32> {
        t.client.agave.as_ref().map(|a| a.rpc_port)
    }

    fn typical_warmup(&self, t: &ValidatorTemplate, from: WindowStart) -> Warmup {
        let workload = t
            .client
            .agave
            .as_ref()
            .map_or(AgaveWorkload::Follow, |a| a.workload);
        match (workload, from) {
            (AgaveWorkload::Bench, _) => Warmup::minutes(
                10,
                "an Agave leader of its own genesis: no snapshot, it starts in minutes (docs/clients/agave.md)",
            ),
            (AgaveWorkload::Follow, WindowStart::FirstExecution) => Warmup::minutes(
                30,
                "an Agave follower until its first transaction: downloading and loading a snapshot (an estimate; the window includes catching up)",
            ),
            (AgaveWorkload::Follow, WindowStart::CaughtUp) => Warmup::minutes(
                120,
                "an Agave follower: a snapshot, then catching up (seed 000: 1 hour at 1.5 TB, slightly over 2 hours at 1 TB)",
            ),
        }
    }

    fn report(&self, t: &ValidatorTemplate, sweep: &SweepSpec) -> Layout {
        let mut layout = if sweep.program_cache_entries.is_some() {
            profile::program_cache_layout()
        } else {
            Layout::ram()
        };
        // A follower's chain load beside its results (a bench's is the benchmark's).
        if t.client
            .agave
            .as_ref()
            .map(|a| a.workload)
            .unwrap_or_default()
            == AgaveWorkload::Follow
        {
            layout.numbers.extend(crate::clients::solana_load::COLUMNS);
        }
        layout
    }

    fn objective(&self, sweep: &SweepSpec) -> Objective {
        if sweep.program_cache_entries.is_some() {
            Objective {
                name: "time in the program cache per batch (µs)",
                value: |r| r.figure("programCacheTimeUsPerBatch"),
                higher_is_better: false,
            }
        } else {
            Objective::default()
        }
    }

    fn summary(&self) -> fn(&TrialResults) -> String {
        profile::summary
    }
}

#[cfg(test)]
mod tests {
    use crate::clients::golden;

    #[test]
    fn get_health_is_judged_by_its_body_not_its_code() {
        use super::get_health;
        use crate::clients::health::Health;
        let ok = r#"{"jsonrpc":"2.0","result":"ok","id":1}"#;
        let behind = r#"{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind by 42 slots","data":{"numSlotsBehind":42}},"id":1}"#;
        let unknown = r#"{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is unhealthy","data":{"numSlotsBehind":null}},"id":1}"#;
        assert_eq!(get_health(200, ok), Health::Healthy);
        assert_eq!(get_health(200, behind), Health::Behind);
        assert_eq!(get_health(200, unknown), Health::Unknown);
        assert_eq!(get_health(200, "ok"), Health::Unknown);
        assert_eq!(get_health(503, ""), Health::Unknown);
    }

    const V3_BANKING: &str = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: banking}\nspec:\n  template:\n    agave: {image: 'anzaxyz/agave:v3.0.14', workload: bench, bench: {image: 'registry.example.com/solana-bench-tps:v3.0.14'}}\n    resources: {cpu: 48, memory: 512Gi}\n    storage: [{role: ledger, size: 2Ti}, {role: accounts, size: 1Ti}]\n  sweep:\n    threads: [{name: bankingThreads, values: [4, 32]}]\n";

    #[test]
    fn golden_quickstart_pod() {
        let t = golden::trial(&golden::example("quickstart-agave-ram-sweep.yaml"), 0);
        golden::check("agave", "quickstart-128Gi", &golden::rendered(&t));
    }

    /// A snapshot cache is the node's directory for the cluster, mounted where the
    /// archive flags point; a follower without one renders neither.
    #[test]
    fn a_snapshot_cache_renders_a_host_path_per_cluster_and_the_archive_flags() {
        let yaml = golden::example("quickstart-agave-ram-sweep.yaml");
        let plain = golden::rendered(&golden::trial(&yaml, 0));
        assert!(!plain.contains("snapshot-cache"), "{plain}");
        let cached = yaml.replace(
            "cluster: mainnet-beta",
            "cluster: mainnet-beta\n      snapshotCache: {hostPath: /var/lib/valtune/snapshots, maximumLocalSnapshotAge: 50000}",
        );
        let pod = golden::rendered(&golden::trial(&cached, 0));
        for want in [
            "- --full-snapshot-archive-path\n    - /mnt/snapshot-cache\n    - --incremental-snapshot-archive-path\n    - /mnt/snapshot-cache\n    - --maximum-local-snapshot-age\n    - \"50000\"",
            "path: /var/lib/valtune/snapshots/agave/5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d\n      type: DirectoryOrCreate",
            "mountPath: /mnt/snapshot-cache\n      name: snapshot-cache",
        ] {
            assert!(pod.contains(want), "{want}\n{pod}");
        }
    }

    /// A count set by hand in the template reaches every trial of a sweep of something
    /// else.
    #[test]
    fn a_tuned_thread_count_reaches_every_trial() {
        let yaml = V3_BANKING
            .replace(
                "threads: [{name: bankingThreads, values: [4, 32]}]",
                "memory: [256Gi, 512Gi]",
            )
            .replace(
                "resources: {cpu: 48, memory: 512Gi}",
                "resources: {cpu: 48, memory: 512Gi}\n    tuning: {threads: {bankingThreads: 8}}",
            );
        for index in 0..2 {
            let pod = golden::rendered(&golden::trial(&yaml, index));
            assert!(
                pod.contains("- --block-production-num-workers\n    - \"8\""),
                "{pod}"
            );
        }
    }

    /// Banking threads reach 3.x as a flag and 2.x as its env var, which counts the two
    /// vote threads too.
    #[test]
    fn golden_banking_threads_by_version() {
        let t = golden::trial(V3_BANKING, 1);
        let pod = golden::rendered(&t);
        assert!(
            pod.contains("- --block-production-num-workers\n    - \"32\""),
            "{pod}"
        );
        golden::check("agave", "banking-v3", &pod);
        let t = golden::trial(&V3_BANKING.replace("v3.0.14", "v2.1.14"), 1);
        let pod = golden::rendered(&t);
        assert!(!pod.contains("--block-production-num-workers"));
        assert!(
            pod.contains("name: SOLANA_BANKING_THREADS\n      value: \"34\""),
            "{pod}"
        );
        golden::check("agave", "banking-v2", &pod);
    }
}
