//! Antelope nodeos (AntelopeIO/leap 5.x, AntelopeIO/spring 1.x), e.g. a WAX node
//! following its chain: seed 002's state larger than RAM, swap, and a memory hog inside
//! the pod's memory. The pod is in [`render`], how results are read in [`profile`], the
//! admission rules in [`rules`], the report in [`report`]; why each choice, with the
//! upstream sources, in docs/clients/nodeos.md.

mod keys;
mod knobs;
mod profile;
mod render;
mod report;
mod rules;
pub mod swap;
mod validator_rules;
pub mod window;

use std::sync::Arc;

use kube::core::Rule;

pub use render::{CHAIN_EXPORTER, EXPORTER_SCRIPT, HOG_CONTAINER, STATE_TMPFS_LABEL, SWAP_LABEL};

use super::config_keys::ConfigKeys;
use super::knobs::KnobTable;
use super::pod::Skeleton;
use super::profile::{Layout, MetricProfile, Objective};
use super::window::RestartWindow;
use super::{ClientPod, RenderError, RenderInput, ValidatorClient, Warmup};
use crate::api::nodeos::{NodeosMapMode, NodeosSpec, StateMedium};
use crate::api::quantity::parse_quantity;
use crate::api::settings::{QueryKey, WindowStart};
use crate::api::sweep::SweepSpec;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::{TrialResults, ValidatorTrial};
use crate::api::validator_rules::{ValidatorRoles, Votes};

pub const VALIDATOR_CONTAINER: &str = "nodeos";
pub const PROCESS_NAME: &str = "nodeos";

pub struct Nodeos;

fn spec(t: &ValidatorTemplate) -> Result<&NodeosSpec, RenderError> {
    t.client
        .nodeos
        .as_ref()
        .ok_or_else(|| RenderError::Invalid("the template has no nodeos settings".into()))
}

/// What the pod runs, from the template's resources and tuning.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: NodeosMapMode,
    /// Bytes the memory hog holds (0: no hog).
    pub hog: u128,
    /// The pod's memory limit: the RAM under test.
    pub budget: u128,
    /// nodeos' memory request (it sizes the swap the kubelet gives).
    pub request: u128,
    pub swap: bool,
}

/// The pod's plan; errors are what admission refuses, for objects that bypassed it.
pub fn plan(template: &ValidatorTemplate, spec: &NodeosSpec) -> Result<Plan, RenderError> {
    let tuning = &template.tuning;
    let invalid = |m: String| RenderError::Invalid(m);
    let mode = tuning.database_map_mode.unwrap_or(spec.database_map_mode);
    let quantity =
        |what: &str, q: &str| parse_quantity(q).map_err(|e| invalid(format!("{what} {q:?}: {e}")));
    let hog = match &tuning.memory_pressure {
        Some(q) => quantity("memoryPressure", q)?,
        None => 0,
    };
    let r = &template.resources;
    let memory = r.memory.as_deref().ok_or_else(|| {
        invalid("no memory: set template.resources.memory or sweep.memory".into())
    })?;
    let request = quantity("memory", memory)?;
    let budget = match &r.memory_limit {
        Some(l) => quantity("memoryLimit", l)?,
        None => request,
    };
    if hog >= budget {
        return Err(invalid(format!(
            "memoryPressure {} leaves nodeos no memory in a {} budget",
            tuning.memory_pressure.as_deref().unwrap_or_default(),
            crate::api::quantity::Bytes(budget),
        )));
    }
    if spec.state.medium != StateMedium::Disk && mode != NodeosMapMode::Mapped {
        return Err(invalid(format!(
            "databaseMapMode {} with the state on tmpfs: chainbase refuses it ('We recommend storing the state db file on tmpfs only when database-map-mode=mapped')",
            mode.as_str()
        )));
    }
    Ok(Plan {
        mode,
        hog,
        budget,
        request,
        swap: spec.swap,
    })
}

/// How far behind its head block may be and nodeos count as in sync: a minute, the
/// trials' default warm-up bound ([`profile::DEFAULT_MAX_LAG_BLOCKS`] blocks of 500 ms).
const IN_SYNC_SECONDS: f64 = profile::DEFAULT_MAX_LAG_BLOCKS as f64 / profile::BLOCKS_PER_SECOND;

/// `get_info`'s head block and its age, in seconds, at `now` (`head_block_time` is UTC
/// without a zone, to the millisecond: spring chain_plugin get_info_db.hpp).
fn head_and_age(body: &str, now: jiff::Timestamp) -> Option<(i64, f64)> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let head = v["head_block_num"].as_i64()?;
    let at: jiff::civil::DateTime = v["head_block_time"].as_str()?.parse().ok()?;
    let at = at.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some((head, now.duration_since(at).as_secs_f64().max(0.0)))
}

/// get_info judged: in sync when its head block is at most [`IN_SYNC_SECONDS`] old,
/// behind when older; anything else (not 200, not get_info) unknown.
pub fn get_info_health(code: u16, body: &str) -> crate::clients::health::Health {
    use crate::clients::health::Health;
    match head_and_age(body, jiff::Timestamp::now()) {
        Some((_, age)) if code == 200 && age <= IN_SYNC_SECONDS => Health::Healthy,
        Some(_) if code == 200 => Health::Behind,
        _ => Health::Unknown,
    }
}

/// (head block, head - LIB) from get_info: the blocks not yet irreversible
/// (`last_irreversible_block_num`), which grows when finality stalls (about 325 under
/// leap's DPoS, two or three under spring's Savanna). The head's age is Ready's.
fn get_info_position(body: &str) -> Option<(i64, i64)> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let head = v["head_block_num"].as_i64()?;
    let lib = v["last_irreversible_block_num"].as_i64()?;
    Some((head, (head - lib).max(0)))
}

impl ValidatorClient for Nodeos {
    fn name(&self) -> &'static str {
        "nodeos"
    }

    /// `GET /v1/chain/get_info` on the HTTP port (chain_api_plugin; spring serves the
    /// chain API to GET and POST alike), judged by its head block's age.
    fn health(&self, t: &ValidatorTemplate) -> Option<crate::clients::health::HealthProbe> {
        let n = t.client.nodeos.as_ref()?;
        Some(crate::clients::health::HealthProbe {
            port: n.http_port,
            path: "/v1/chain/get_info".into(),
            host: None,
            rpc_method: None,
            judge: get_info_health,
            position: Some(get_info_position),
        })
    }

    /// A producer restarts after its round, from the active schedule of
    /// `get_producer_schedule` (window.rs); a non-producing node misses
    /// no round and restarts at once. Either is stopped by the kubelet's SIGTERM, which
    /// nodeos takes as it takes SIGINT or SIGQUIT, a clean shutdown, within the 600 s
    /// grace that lets it close chainbase (killed before, its state is dirty and needs a
    /// replay: spring v1.2.2 docs/01_nodeos/08_troubleshooting/index.md).
    fn restart_window(&self, t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        match t.client.nodeos.as_ref() {
            Some(n) => Arc::new(window::ProducerRound {
                http_port: n.http_port,
            }),
            None => Arc::new(crate::clients::window::Immediate),
        }
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.nodeos.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .nodeos
            .as_ref()
            .map(|n| (n.image.as_str(), n.version.as_deref()))
            .unwrap_or(("", None))
    }

    fn knobs(&self) -> &'static KnobTable {
        &knobs::NODEOS
    }

    fn rules(&self) -> Vec<Rule> {
        rules::rules()
    }

    fn render(&self, input: &RenderInput, skeleton: &Skeleton) -> Result<ClientPod, RenderError> {
        let nodeos = spec(&input.template)?;
        render::pod(self, input, nodeos, skeleton)
    }

    fn profile(&self, _t: &ValidatorTemplate) -> MetricProfile {
        profile::profile()
    }

    /// config.ini keys, and the same names as long options in `extraArgs`.
    fn config_keys<'a>(&self, t: &'a ValidatorTemplate) -> Option<ConfigKeys<'a>> {
        let n = t.client.nodeos.as_ref()?;
        Some(ConfigKeys {
            client: "nodeos",
            field: "template.nodeos.config (or a sweep.knobs configKey)",
            config: &n.config,
            args: true,
            judge: Box::new(keys::judge),
        })
    }

    fn validator_roles(&self) -> ValidatorRoles {
        ValidatorRoles {
            name: "nodeos",
            display: "nodeos",
            votes: Votes::WithIdentity(
                "a nodeos producer signs with its identity's signature provider",
            ),
            failover: false,
            window_options: false,
        }
    }

    fn validator_rules(&self) -> Vec<Rule> {
        validator_rules::rules()
    }

    fn typical_warmup(&self, _t: &ValidatorTemplate, _from: WindowStart) -> Warmup {
        Warmup::minutes(
            30,
            "nodeos from a snapshot: loading it, then about 35 blocks a second to the head (seed 002: a 3-hour-old snapshot catches up in about 11 minutes)",
        )
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(profile::profile().queries.keys().copied().collect())
    }

    fn report(&self, _t: &ValidatorTemplate, _sweep: &SweepSpec) -> Layout {
        Layout {
            numbers: report::COLUMNS.to_vec(),
            ..Default::default()
        }
    }

    fn objective(&self, _sweep: &SweepSpec) -> Objective {
        report::OBJECTIVE
    }

    fn summary(&self) -> fn(&TrialResults) -> String {
        report::summary
    }

    fn report_notes(&self, trials: &[ValidatorTrial]) -> Vec<String> {
        report::working_set(trials)
    }

    fn node_shortfall(
        &self,
        t: &ValidatorTemplate,
        pod: &k8s_openapi::api::core::v1::Pod,
        node: &k8s_openapi::api::core::v1::Node,
    ) -> Option<String> {
        swap::shortfall(t, spec(t).ok()?, pod, node)
    }

    fn node_findings(&self, n: &crate::clients::NodeCheck) -> Vec<crate::finding::Finding> {
        match &n.template.client.nodeos {
            Some(spec) if spec.swap => vec![swap::finding(n)],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod validator_health_tests {
    use super::head_and_age;

    #[test]
    fn the_position_is_the_head_and_its_distance_to_irreversibility() {
        let body = r#"{"head_block_num": 400000123, "last_irreversible_block_num": 400000120, "head_block_time": "2026-11-28T01:00:00.500"}"#;
        assert_eq!(super::get_info_position(body), Some((400_000_123, 3)));
        assert_eq!(super::get_info_position(r#"{"head_block_num": 5}"#), None);
    }

    #[test]
    fn get_info_gives_the_head_and_its_age() {
        let body = r#"{"head_block_num": 400000123, "last_irreversible_block_num": 400000120, "head_block_time": "2026-11-28T01:00:00.500"}"#;
        let now: jiff::Timestamp = "2026-11-28T01:00:30.500Z".parse().unwrap();
        let (head, age) = head_and_age(body, now).unwrap();
        assert_eq!(head, 400_000_123);
        assert!((age - 30.0).abs() < 1e-6, "{age}");
        assert!(head_and_age("{}", now).is_none());
        assert!(head_and_age("not json", now).is_none());
    }
}
