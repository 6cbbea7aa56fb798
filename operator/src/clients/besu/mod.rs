//! Hyperledger Besu: an execution client following a post-Merge chain, so the pod runs
//! Teku beside it on the Engine API; the trial's allocator, heap and G1, RocksDB and
//! Bonsai settings by version ([`knobs`], [`args`]); every block's processing time
//! carried to Prometheus ([`render`], [`profile`]). Why each choice, with the upstream
//! sources: docs/clients/besu.md.

mod args;
mod keys;
pub mod knobs;
pub mod profile;
mod render;
mod validator_rules;

use std::sync::Arc;

use kube::core::Rule;

use super::config_keys::ConfigKeys;
use super::health::{Health, HealthProbe, PositionProbe};
use super::knobs::{Dim, KnobTable};
use super::pod::{GeneratedSecret, Skeleton};
use super::profile::{Layout, MetricProfile, Objective};
use super::window::{Immediate, RestartWindow};
use super::{ClientPod, RenderError, RenderInput, ValidatorClient, Warmup};
use crate::api::besu::BesuSpec;
use crate::api::settings::{QueryKey, WindowStart};
use crate::api::sweep::{Setting, SweepSpec, cel_bounds, cel_swept};
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::TrialResults;
use crate::api::validator_rules::{ValidatorRoles, Votes};

pub use render::{WRAPPER, log4j2_xml, secret_name};

pub const VALIDATOR_CONTAINER: &str = "besu";
pub const BLOCK_TIMES_CONTAINER: &str = "block-times";
pub const METRICS_PORT_NAME: &str = "metrics";
/// Where the `data` volume is mounted (`/mnt/<role>`): Besu in `besu/`, Teku in `teku/`.
const DATA_DIR: &str = "/mnt/data";
const CONFIG_DIR: &str = "/etc/valtune/besu";
const LOG4J_FILE: &str = "log4j2.xml";
const TOML_FILE: &str = "besu.toml";
const JWT_DIR: &str = "/etc/valtune/engine-jwt";
const JWT_FILE: &str = "jwt.hex";
const JWT_PATH: &str = "/etc/valtune/engine-jwt/jwt.hex";

/// Flags valtune always renders: Besu refuses a repeated option ("Option '--x' should be
/// specified only once": BesuCommand.java @25.12.0 L1029-1053, from 25.8.0), so knobs
/// and extraArgs may not set them again.
const RENDERED_FLAGS: [&str; 11] = [
    "--network",
    "--data-path",
    "--data-storage-format",
    "--metrics-enabled",
    "--metrics-host",
    "--metrics-port",
    "--host-allowlist",
    "--engine-rpc-port",
    "--engine-jwt-secret",
    "--p2p-port",
    "--config-file",
];

pub struct Besu;

fn spec(t: &ValidatorTemplate) -> Result<&BesuSpec, RenderError> {
    t.client
        .besu
        .as_ref()
        .ok_or_else(|| RenderError::Invalid("the template has no besu settings".into()))
}

/// CEL, on the experiment spec: the admission rules only Besu has.
fn besu_rules() -> Vec<Rule> {
    let b = "self.template.besu";
    let flags = format!(
        "[{}]",
        RENDERED_FLAGS
            .iter()
            .map(|f| format!("'{f}'"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let ports = format!(
        "[{b}.metricsPort, {b}.enginePort, {b}.p2pPort, {b}.consensus.p2pPort, {b}.blockTimes.port]"
    );
    let below = |heaps: &str, memory: &str| {
        format!(
            "{heaps}.all(h, !isQuantity(h) || !isQuantity({memory}) || quantity(h).isLessThan(quantity({memory})))"
        )
    };
    let mem = "self.template.resources.memory";
    let tuned = "self.template.tuning.heap";
    // Swept as lists or ranges: a range's ends bound its values, and `below` is
    // monotone in both heap and memory.
    let (swept_mem, mems) = (cel_swept("memory"), cel_bounds("memory"));
    let swept_heap = cel_swept("heap");
    let mut rules = vec![
        Rule::new(format!("!has({b}) || (has(self.template.storage) && self.template.storage.exists(v, v.role == 'data'))"))
            .message("Besu needs a data volume (--data-path, and Teku's beacon database unless a state volume is given): add {role: data, size: 2Ti} to template.storage")
            .field_path(".template.storage"),
        Rule::new(format!("!has({b}) || !has({b}.flatDbHealing) || {b}.dataStorageFormat != 'FOREST'"))
            .message("flatDbHealing is a Bonsai setting (Forest has no flat database): remove it or set dataStorageFormat to BONSAI")
            .field_path(".template.besu.flatDbHealing"),
        Rule::new(format!("!has({b}) || {ports}.all(p, {ports}.exists_one(q, q == p))"))
            .message("Besu's and its sidecars' ports share the pod's network and must differ: change metricsPort, enginePort, p2pPort, consensus.p2pPort or blockTimes.port")
            .field_path(".template.besu"),
        Rule::new(format!("!has({b}) || !has(self.sweep.knobs) || self.sweep.knobs.all(k, !has(k.arg) || !(k.arg in {flags}))"))
            .message("valtune already sets this Besu option, and Besu refuses one given twice: change it with its template.besu field (network, dataStorageFormat, metricsPort, enginePort, p2pPort, config) instead of a knob")
            .field_path(".sweep.knobs"),
        Rule::new(format!("!has({b}) || !has(self.template.extraArgs) || self.template.extraArgs.all(a, !{flags}.exists(f, a == f || a.startsWith(f + '=')))"))
            .message("valtune already sets this Besu option, and Besu refuses one given twice: change it with its template.besu field (network, dataStorageFormat, metricsPort, enginePort, p2pPort, config) instead of extraArgs")
            .field_path(".template.extraArgs"),
        Rule::new(format!(
            "!has({b}) || !{swept_heap} || ({swept_mem} ? {mems}.all(m, {}) : (!has({mem}) || {}))",
            below(&cel_bounds("heap"), "m"),
            below(&cel_bounds("heap"), mem)
        ))
        .message("every heap must be below the container's memory, which also holds Besu's native memory (RocksDB caches, malloc arenas): lower sweep.heap or raise the memory")
        .field_path(".sweep.heap"),
        Rule::new(format!(
            "!has({b}) || !has({b}.heap) || {swept_heap} || ({swept_mem} ? {mems}.all(m, {}) : (!has({mem}) || {}))",
            below(&format!("[{b}.heap]"), "m"),
            below(&format!("[{b}.heap]"), mem)
        ))
        .message("template.besu.heap must be below the container's memory, which also holds Besu's native memory: lower the heap or raise the memory")
        .field_path(".template.besu.heap"),
        Rule::new(format!(
            "!has({b}) || !{} || ({swept_mem} ? {mems}.all(m, {}) : (!has({mem}) || {}))",
            Dim::Setting(Setting::Heap).cel_from_tuning(),
            below(&format!("[{tuned}]"), "m"),
            below(&format!("[{tuned}]"), mem)
        ))
        .message("template.tuning.heap must be below the container's memory, which also holds Besu's native memory: lower the heap or raise the memory")
        .field_path(".template.tuning.heap"),
    ];
    rules.extend(knobs::versioned_rules());
    rules
}

impl ValidatorClient for Besu {
    fn name(&self) -> &'static str {
        "besu"
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.besu.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .besu
            .as_ref()
            .map(|b| (b.image.as_str(), b.version.as_deref()))
            .unwrap_or(("", None))
    }

    fn knobs(&self) -> &'static KnobTable {
        &knobs::BESU
    }

    fn rules(&self) -> Vec<Rule> {
        besu_rules()
    }

    fn render(&self, input: &RenderInput, skeleton: &Skeleton) -> Result<ClientPod, RenderError> {
        let besu = spec(&input.template)?;
        render::pod(input, besu, self.version(&input.template), skeleton)
    }

    fn secrets(&self, input: &RenderInput) -> Vec<GeneratedSecret> {
        vec![render::jwt_secret(input)]
    }

    fn profile(&self, _t: &ValidatorTemplate) -> MetricProfile {
        profile::profile()
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(profile::profile().queries.keys().copied().collect())
    }

    fn report(&self, _t: &ValidatorTemplate, _sweep: &SweepSpec) -> Layout {
        Layout {
            numbers: profile::columns(),
            ..Default::default()
        }
    }

    /// besu.toml keys, and the same names as long options in `extraArgs`.
    fn config_keys<'a>(&self, t: &'a ValidatorTemplate) -> Option<ConfigKeys<'a>> {
        let b = t.client.besu.as_ref()?;
        Some(ConfigKeys {
            client: "Besu",
            field: "template.besu.config (or a sweep.knobs configKey)",
            config: &b.config,
            args: true,
            judge: Box::new(keys::judge),
        })
    }

    fn validator_roles(&self) -> ValidatorRoles {
        ValidatorRoles {
            name: "besu",
            display: "Besu",
            votes: Votes::No,
            failover: false,
            window_options: false,
        }
    }

    fn validator_rules(&self) -> Vec<Rule> {
        validator_rules::rules()
    }

    fn typical_warmup(&self, _t: &ValidatorTemplate, _from: WindowStart) -> Warmup {
        Warmup::minutes(
            24 * 60,
            "Besu and Teku on mainnet from nothing: Teku's checkpoint sync, then Besu's snap sync (world state about 6 hours, the blocks longer: besu.hyperledger.org, sync-node)",
        )
    }

    fn objective(&self, _sweep: &SweepSpec) -> Objective {
        profile::objective()
    }

    fn summary(&self) -> fn(&TrialResults) -> String {
        profile::summary
    }

    /// `GET /readiness` on the Engine API's port: 200 `{"status" : "UP"}` with at least
    /// one peer and at most 2 blocks behind the best known, else 503 `"DOWN"`
    /// (ethereum/api/.../jsonrpc/health/HealthService.java and ReadinessCheck.java
    /// @25.12.0; the Engine service routes it before its JWT check:
    /// EngineJsonRpcService.java L436-443, RunnerBuilder.java L907-908). That service
    /// answers 403 to a Host header off `--engine-host-allowlist` (default
    /// `localhost,127.0.0.1`: EngineRPCOptions.java L57-63; EngineJsonRpcService.java
    /// L604-616), so the operator, reaching the pod by its IP, names `localhost`.
    fn health(&self, t: &ValidatorTemplate) -> Option<HealthProbe> {
        let besu = t.client.besu.as_ref()?;
        Some(HealthProbe {
            port: besu.engine_port,
            path: "/readiness".into(),
            host: Some("localhost".into()),
            rpc_method: None,
            judge: readiness,
            position: None,
        })
    }

    /// `ethereum_blockchain_height` (DefaultBlockchain.java L202-203) and
    /// `ethereum_best_known_block_number` (DefaultSynchronizer.java L196-198) @25.12.0,
    /// on the metrics page valtune opens to the pod's network.
    fn position(&self, t: &ValidatorTemplate) -> Option<PositionProbe> {
        let besu = t.client.besu.as_ref()?;
        Some(PositionProbe {
            port: besu.metrics_port,
            path: "/metrics".into(),
            head: "ethereum_blockchain_height",
            best: "ethereum_best_known_block_number",
        })
    }

    /// An execution client proposes nothing itself (the consensus client beside it
    /// does): a restart misses no slot of its own.
    fn restart_window(&self, _t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        Arc::new(Immediate)
    }
}

/// Besu's readiness answer: the HTTP code is the verdict (HealthService.java @25.12.0).
fn readiness(code: u16, body: &str) -> Health {
    match code {
        200 if body.contains("UP") => Health::Healthy,
        503 if body.contains("DOWN") => Health::Behind,
        _ => Health::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_is_the_code_and_the_body() {
        assert_eq!(
            readiness(200, "{\n  \"status\" : \"UP\"\n}"),
            Health::Healthy
        );
        assert_eq!(
            readiness(503, "{\n  \"status\" : \"DOWN\"\n}"),
            Health::Behind
        );
        assert_eq!(
            readiness(403, "{\"message\":\"Host not authorized.\"}"),
            Health::Unknown
        );
    }
    use crate::clients::golden;
    use crate::clients::knobs::Place;

    const EXAMPLE: &str = "besu-allocator-heap-sweep.yaml";

    #[test]
    fn golden_example_pods() {
        let yaml = golden::example(EXAMPLE);
        // jemalloc (the image's), then glibc with two arenas.
        let t = golden::trial(&yaml, 0);
        golden::check("besu", "jemalloc", &golden::rendered(&t));
        let t = golden::trial(&yaml, 5);
        let pod = golden::rendered(&t);
        assert!(
            pod.contains("name: BESU_USING_JEMALLOC\n      value: \"false\""),
            "{pod}"
        );
        golden::check("besu", "glibc-arena2", &pod);
    }

    #[test]
    fn flat_db_healing_is_rendered_by_version() {
        let base = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: flat}\nspec:\n  template:\n    besu: {image: 'hyperledger/besu:VERSION', flatDbHealing: true}\n    resources: {cpu: 8, memory: 32Gi}\n    storage: [{role: data, size: 2Ti}]\n";
        let pod = golden::rendered(&golden::trial(&base.replace("VERSION", "24.1.0"), 0));
        assert!(pod.contains("--Xsnapsync-synchronizer-flat-db-healing-enabled=true"));
        let pod = golden::rendered(&golden::trial(&base.replace("VERSION", "25.12.0"), 0));
        assert!(pod.contains("--Xbonsai-full-flat-db-enabled=true"));
        assert!(!pod.contains("--Xsnapsync"));
    }

    #[test]
    fn teku_shares_the_jwt_and_reaches_the_engine_port() {
        let t = golden::trial(&golden::example(EXAMPLE), 0);
        let r = crate::clients::render(&golden::input(&t)).unwrap();
        let spec = r.pod.spec.unwrap();
        let teku = &spec.init_containers.as_ref().unwrap()[0];
        let args = teku.args.clone().unwrap();
        assert!(args.contains(&"--ee-endpoint=http://127.0.0.1:8551".to_string()));
        assert!(args.contains(&format!("--ee-jwt-secret-file={JWT_PATH}")));
        let besu = &spec.containers[0];
        assert!(
            besu.args
                .as_ref()
                .unwrap()
                .contains(&format!("--engine-jwt-secret={JWT_PATH}"))
        );
        assert_eq!(r.secrets.len(), 1);
        assert_eq!(
            r.secrets[0].metadata.name.as_deref(),
            Some("besu-allocators-engine-jwt")
        );
        let secret = r.secrets[0].secret(&[0xab; 32]);
        assert_eq!(secret.string_data.unwrap()["jwt.hex"], "ab".repeat(32));
    }

    /// Each entry of the knob table, rendered: the value reaches the pod as the table says.
    #[test]
    fn every_knob_reaches_the_pod_the_way_the_table_says() {
        let yaml = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: knobs}\nspec:\n  template:\n    besu: {image: 'hyperledger/besu:25.12.0', mimallocLibrary: /opt/mi/libmimalloc.so}\n    resources: {cpu: 8, memory: 32Gi}\n    storage: [{role: data, size: 2Ti}]\n  sweep:\n    memory: [24Gi]\n    cpu: [6]\n    allocator: [mimalloc]\n    mallocArenaMax: [3]\n    heap: [1536Mi]\n    knobs: [{name: sync, configKey: sync-mode, values: ['\"FULL\"']}]\n";
        let t = golden::trial(yaml, 0);
        for knob in knobs::BESU
            .knobs
            .iter()
            .filter(|k| k.dim.is_at(Place::Tuning))
        {
            let value = knob
                .dim
                .value(&t.spec.template.tuning)
                .expect("the fixture sweeps every knob");
            assert!(!value.is_empty());
        }
        let pod = golden::rendered(&t);
        for expected in [
            "cpu: \"6\"",
            "memory: 24Gi",
            "name: BESU_USING_JEMALLOC\n      value: \"false\"",
            "name: VALTUNE_ALLOCATOR_LIBRARY\n      value: /opt/mi/libmimalloc.so",
            "name: MALLOC_ARENA_MAX\n      value: \"3\"",
            "-Xmx1536m -XX:+ExitOnOutOfMemoryError",
            "--config-file=/etc/valtune/besu/besu.toml",
            "sync-mode=\"FULL\"",
        ] {
            assert!(pod.contains(expected), "{expected} not in\n{pod}");
        }
    }

    #[test]
    fn rules_are_valid_cel_shapes_and_name_fields() {
        let text = serde_json::to_string(&besu_rules()).unwrap();
        assert!(text.contains("Besu needs a data volume"));
        assert!(text.contains("'--engine-jwt-secret'"));
        assert!(text.contains(".sweep.heap"));
    }

    #[test]
    fn the_summary_reads_like_the_seed() {
        let mut r = TrialResults {
            max_rss_gib: Some(6.2),
            ..Default::default()
        };
        r.figures.insert(profile::P95.into(), 251.3);
        assert!(profile::summary(&r).contains("p95 251.3 ms"));
        assert!(!profile::objective().higher_is_better);
    }
}
