//! A toy client, compiled only for tests: the proof that a client is one module plus the
//! registry lines. It touches nothing outside this file but its line in `CLIENTS`
//! (clients/mod.rs) and its line in the template's `ClientSpec` (api/template.rs), and
//! its tests show it rendered (a trial's pod), admitted (its rules in the generated
//! CRDs, the template's one-of and the rules built from its roles included) and decided
//! (a Validator's change waiting for its restart window, then applied). docs/clients.md
//! walks through the same steps for a real client.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Container;
use kube::core::Rule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::knobs::{Dim, Generic, How, Knob, KnobTable, Reach as KnobReach};
use super::pod::Skeleton;
use super::profile::{LagUnit, MetricProfile};
use super::window::{Judging, Kept, Reach, Read, Reading, RestartWindow, Verdict};
use super::{ClientPod, RenderError, RenderInput, ValidatorClient, Warmup};
use crate::api::settings::{QueryKey, WindowStart};
use crate::api::template::{ClientSettings, ClientSpec, ValidatorTemplate};
use crate::api::validator_rules::{ValidatorRoles, Votes};

/// `template.toy`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToySpec {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where it answers whose turn it is (its restart window).
    #[serde(default = "default_port")]
    pub port: i32,
}

fn default_port() -> i32 {
    7000
}

impl ClientSettings for ToySpec {}

pub struct Toy;

static TOY: KnobTable = KnobTable {
    client: "toy",
    display: "Toy",
    knobs: &[Knob {
        dim: Dim::Memory,
        reach: &[KnobReach::always(How::Resource("memory"))],
        source: "",
    }],
    refusals: &[],
    generic: Generic {
        env: true,
        arg: true,
        config_key: false,
        no_config_key: "Toy has no config file",
    },
};

/// The message of the toy's own Validator rule, which its test looks for in the CRD.
const VALIDATOR_RULE: &str = "a toy Validator runs on port 7000 or above";
/// The message of the toy's own experiment rule.
const EXPERIMENT_RULE: &str = "a toy experiment needs an image";

fn spec(t: &ValidatorTemplate) -> Option<&ToySpec> {
    t.client.toy.as_ref()
}

impl ValidatorClient for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.toy.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        spec(t).map_or(("", None), |s| (s.image.as_str(), s.version.as_deref()))
    }

    fn knobs(&self) -> &'static KnobTable {
        &TOY
    }

    fn rules(&self) -> Vec<Rule> {
        vec![
            Rule::new("!has(self.template.toy) || size(self.template.toy.image) > 0")
                .message(EXPERIMENT_RULE),
        ]
    }

    fn validator_roles(&self) -> ValidatorRoles {
        ValidatorRoles {
            name: "toy",
            display: "Toy",
            votes: Votes::WithIdentity("a toy signs with its identity alone"),
            failover: false,
            window_options: false,
        }
    }

    fn validator_rules(&self) -> Vec<Rule> {
        vec![
            Rule::new("!has(self.template.toy) || self.template.toy.port >= 7000")
                .message(VALIDATOR_RULE)
                .field_path(".template.toy.port"),
        ]
    }

    fn render(&self, input: &RenderInput, skeleton: &Skeleton) -> Result<ClientPod, RenderError> {
        let s = spec(&input.template).ok_or(RenderError::Invalid("no template.toy".into()))?;
        let mut args = vec!["--port".to_string(), s.port.to_string()];
        args.extend(input.template.extra_args.iter().cloned());
        Ok(ClientPod {
            containers: vec![Container {
                name: "toy".into(),
                image: Some(s.image.clone()),
                args: Some(args),
                resources: Some(skeleton.validator_resources.clone()),
                volume_mounts: Some(skeleton.mounts.clone()),
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    fn profile(&self, _t: &ValidatorTemplate) -> MetricProfile {
        MetricProfile {
            queries: BTreeMap::from([(
                QueryKey::BlockLag,
                "toy_blocks_behind{$selector}".to_string(),
            )]),
            lag: QueryKey::BlockLag,
            lag_unit: LagUnit::Blocks,
            default_max_lag: 10,
            endpoints: Vec::new(),
            validator_container: "toy",
            figures: Vec::new(),
            remote_written: Vec::new(),
        }
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(vec![QueryKey::BlockLag])
    }

    fn typical_warmup(&self, _t: &ValidatorTemplate, _from: WindowStart) -> Warmup {
        Warmup::minutes(1, "a toy starts at once")
    }

    fn restart_window(&self, t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        Arc::new(TurnWindow {
            port: spec(t).map_or(default_port(), |s| s.port),
        })
    }
}

/// The toy's window: it restarts when its `/turn` says it is idle.
#[derive(Debug)]
struct TurnWindow {
    port: i32,
}

/// What `/turn` said.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Turn {
    Idle,
    Busy,
}

impl RestartWindow for TurnWindow {
    fn read<'a>(&'a self, at: Reach<'a>) -> BoxFuture<'a, Read> {
        Box::pin(async move {
            if !at.pending {
                return Read::default();
            }
            let url = format!("http://{}:{}/turn", at.ip, self.port);
            let turn = match at.endpoints.get(&url).await {
                Some((200, body)) if body == "idle" => Ok(Reading::new(Turn::Idle)),
                Some((200, _)) => Ok(Reading::new(Turn::Busy)),
                other => Err(format!("{url}: {other:?}")),
            };
            Read {
                position: None,
                reading: Some(turn),
            }
        })
    }

    fn judge(&self, j: &Judging) -> (Verdict, Option<Kept>) {
        let verdict = match j
            .reading
            .map(|r| r.as_ref().map(|r| r.get::<Turn>().copied()))
        {
            Some(Ok(Some(Turn::Idle))) => Verdict::Open("the toy is idle".into()),
            Some(Ok(_)) => Verdict::Wait("the toy is busy".into()),
            Some(Err(e)) => Verdict::Wait(format!("the toy's turn cannot be read: {e}")),
            None => Verdict::Wait("the toy's turn is not read yet".into()),
        };
        (verdict, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::validator::{Validator, ValidatorStatus};
    use crate::clients::health::Health;
    use crate::clients::{client_for, golden};
    use crate::controller::validator::decide::{Act, decide};
    use crate::controller::validator::observe::{self, Answer, LeaseState, Observed, PodState};
    use crate::controller::validator::tuning::Tuned;

    const EXPERIMENT: &str = "apiVersion: valtune.dev/v1alpha1
kind: ValidatorExperiment
metadata: {name: toys}
spec:
  template:
    toy: {image: 'toy:v1'}
    resources: {cpu: 2, memory: 4Gi}
  sweep: {memory: [4Gi, 8Gi]}
";

    const VALIDATOR: &str = "apiVersion: valtune.dev/v1alpha1
kind: Validator
metadata: {name: toy-1, namespace: validators}
spec:
  nodeName: node-1
  template:
    toy: {image: 'toy:v2', port: 7100}
    resources: {cpu: 2, memory: 4Gi}
";

    /// A trial of the toy renders through the generic path: its point's memory on its
    /// container, its own arguments.
    #[test]
    fn a_toy_trial_is_rendered() {
        let trial = golden::trial(EXPERIMENT, 1);
        let r = crate::clients::render(&golden::input(&trial)).unwrap();
        let c = &r.pod.spec.unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("toy:v1"));
        assert_eq!(c.args.clone().unwrap(), ["--port", "7000"]);
        let limits = c.resources.clone().unwrap().limits.unwrap();
        assert_eq!(limits["memory"].0, "8Gi");
    }

    /// Its rules reach the CRDs: its own, the template's one-of and those built from its
    /// roles.
    #[test]
    fn the_toys_rules_reach_the_crds() {
        let crds = crate::crd::crds();
        // The CRDs as JSON: every rule and message verbatim.
        let text = |i: usize| serde_json::to_string(&crds[i].1).unwrap();
        let (vx, vv) = (text(0), text(2));
        assert!(vx.contains(EXPERIMENT_RULE));
        assert!(vv.contains(VALIDATOR_RULE));
        assert!(vx.contains("has(self.nodeos), has(self.toy)].filter(x, x).size() == 1"));
        assert!(vx.contains("set exactly one client: agave, firedancer, besu, nodeos or toy"));
        // It votes with its identity alone: spared the vote account, as nodeos is.
        assert!(vv.contains("self.role != 'voting' || has(self.template.nodeos) || has(self.template.toy) || (has(self.identity)"));
        assert!(vv.contains("(a nodeos producer signs with its identity's signature provider; a toy signs with its identity alone)"));
        // Its knob table's refusals, and its profile's series.
        assert!(vx.contains("Toy has no config file"));
        assert!(vx.contains("Toy has no such series"));
    }

    /// A Validator of the toy: its change waits while the toy is busy and is applied once
    /// it is idle, as its window judges; the read asks its own endpoint.
    #[tokio::test]
    async fn a_toy_validator_is_decided_by_its_window() {
        let v: Validator = serde_saphyr::from_str(VALIDATOR).unwrap();
        let (rendered, hash) = observe::render(&v, None);
        let client = client_for(&v.spec.template).unwrap();
        assert_eq!(client.name(), "toy");
        let window = client.restart_window(&v.spec.template);
        let turn = |says: &str| {
            let mut a = crate::clients::window::fixtures::Answers::default();
            a.get
                .insert("http://10.0.0.5:7100/turn".into(), (200, says.to_string()));
            a
        };
        let (busy, idle) = (turn("busy"), turn("idle"));
        let reach = |e| Reach {
            endpoints: e,
            ip: "10.0.0.5",
            spec: &v.spec,
            health: None,
            pending: true,
        };
        let busy = window.read(reach(&busy)).await.reading;
        let idle = window.read(reach(&idle)).await.reading;
        let observed = |look| Observed {
            rendered: rendered.clone(),
            hash: hash.clone(),
            lease: LeaseState::NoIdentity,
            pod: Some(PodState {
                name: "toy-1".into(),
                hash: Some("an older one".into()),
                terminating: false,
                phase: "Running".into(),
                node: Some("node-1".into()),
                node_ready: Some(true),
                image: Some("toy:v1".into()),
                restarts: None,
            }),
            others: Vec::new(),
            answer: Some(Answer {
                code: 200,
                body: "ok".into(),
                health: Health::Healthy,
            }),
            unanswered: None,
            position: None,
            window: window.clone(),
            look,
            tuning: Tuned::NotAsked,
            pair: None,
        };
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let d = decide(
            &v.spec,
            Some(1),
            &ValidatorStatus::default(),
            &observed(busy),
            now,
        );
        assert!(!deletes(&d));
        let waiting = d.status.pending_change.unwrap().waiting_for;
        assert!(waiting.ends_with("waiting: the toy is busy"), "{waiting}");
        let d = decide(
            &v.spec,
            Some(1),
            &ValidatorStatus::default(),
            &observed(idle),
            now,
        );
        assert!(deletes(&d), "{:?}", d.status);
    }

    fn deletes(step: &crate::controller::step::Step<ValidatorStatus, Act>) -> bool {
        step.acts.iter().any(|a| matches!(a, Act::DeletePod))
    }
}
