//! What a validator's pod is rendered from, and nothing else: the object it belongs to,
//! the group whose shared objects it mounts, the resolved template, where its pushed
//! metrics go, its role (whose keys it runs with) and how long it lives. A trial's
//! attempt builds one with [`RenderInput::for_trial`]; a `Validator` builds its own from
//! the same template (controller/validator), and the clients render both alike.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use super::{RenderError, pod};
use crate::api::labels;
use crate::api::template::ValidatorTemplate;
use crate::api::trial::ValidatorTrial;

/// The one input of rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderInput {
    pub owner: Owner,
    pub group: Group,
    /// The resolved template: the client, its resources, storage, placement and tuning.
    pub template: ValidatorTemplate,
    /// Where pushed datapoints are remote-written (Prometheus' receiver), if known.
    pub remote_write: Option<String>,
    /// How far behind the chain the validator may be and count as caught up, in the
    /// client's unit (a trial's `warmup.maxLag`); unset: the client's default. nodeos'
    /// chain exporter marks it, and the memory hog waits for the mark.
    pub max_lag: Option<i64>,
    pub role: Role,
    pub lifecycle: Lifecycle,
}

/// Whose keys the validator runs with, and whether it signs.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// A trial's: it follows the chain under a throwaway identity the pod makes for
    /// itself, and never votes.
    Observer,
    /// A `Validator`'s: it votes with `keys.vote` as `keys.identity`.
    Voting(Keys),
    /// A `Validator`'s: it follows the chain under its own identity, without voting.
    NonVoting(Keys),
    /// A `Validator`'s hot spare: it follows under its own (unstaked) identity, ready to
    /// take a voting identity over.
    Standby(Keys),
}

impl Role {
    /// The Secrets the pod reads its keys from (none for an observer).
    pub fn keys(&self) -> Option<&Keys> {
        match self {
            Role::Observer => None,
            Role::Voting(k) | Role::NonVoting(k) | Role::Standby(k) => Some(k),
        }
    }
}

/// Keys from Secrets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keys {
    pub identity: Option<SecretKey>,
    pub vote: Option<SecretKey>,
    /// A nodeos producer's account (`--producer-name`); `identity` holds its signature
    /// provider.
    pub producer: Option<String>,
    /// A failover pair member's (Agave, Frankendancer): the staked identity (its
    /// authorized voter) and its own unstaked one, with the vote account in `vote`. Both
    /// set: the pod runs as agave's failover guide sets a machine up (its identity a link
    /// on the ledger).
    pub pair: Option<Pair>,
}

/// The two identities of a failover pair member.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub staked: SecretKey,
    pub spare: SecretKey,
    /// The identity agent's port (`identityAgentPort`).
    pub agent_port: i32,
    /// The identity agent may enter the validator container's mount namespace
    /// (`identityAgentEntersValidatorMountNamespace`): Frankendancer's set-identity runs
    /// there.
    pub agent_enters_validator: bool,
}

/// One key of one Secret of the owner's namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretKey {
    pub secret: String,
    pub key: String,
}

/// The object a pod belongs to: it names the pod and its ConfigMaps, owns them, and
/// labels them.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    /// What the pod's and its ConfigMaps' names start with.
    pub name: String,
    pub namespace: Option<String>,
    /// The controller reference of the pod and its ConfigMaps: they go with the object.
    pub reference: Option<OwnerReference>,
    /// Labels of the pod, its volumes and its ConfigMaps, besides the client's.
    pub labels: BTreeMap<String, String>,
}

/// Pods that share generated objects, such as Besu's Engine API JWT Secret: the trials of
/// one experiment share theirs; a validator running on its own is a group of one.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// What the shared objects' names start with (`<name>-engine-jwt`).
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Who owns the shared objects, so they go with the group rather than with one pod.
    pub owners: Vec<OwnerReference>,
}

/// How long the pod lives, which decides its name, restart policy, volumes, placement
/// and grace period.
#[derive(Debug, Clone, PartialEq)]
pub enum Lifecycle {
    /// One attempt of a trial.
    OneAttempt {
        /// 1-based; a retry after a lost node is a new attempt.
        attempt: i32,
        /// Nodes earlier attempts lost: this attempt avoids them.
        avoid_nodes: Vec<String>,
    },
    /// A `Validator`'s pod: restarted in place, its state on PersistentVolumeClaims that
    /// outlive it, on one node.
    LongRunning {
        /// The node it runs on (`spec.nodeName`).
        node: String,
    },
}

impl Lifecycle {
    /// The pod's name: one per attempt, since a retry after a lost node needs new volumes
    /// on another node.
    pub fn pod_name(&self, owner: &str) -> String {
        match self {
            Lifecycle::OneAttempt { attempt, .. } => pod::pod_name(owner, *attempt),
            // One name for every pod of the validator: the API server holds a name until
            // the object is gone (a terminating pod keeps it until its kubelet confirms the
            // containers stopped), so a replacement can never be created beside the old
            // one, whatever the operator believes.
            Lifecycle::LongRunning { .. } => owner.to_string(),
        }
    }

    /// Nodes the pod must not run on.
    pub fn avoid_nodes(&self) -> &[String] {
        match self {
            Lifecycle::OneAttempt { avoid_nodes, .. } => avoid_nodes,
            Lifecycle::LongRunning { .. } => &[],
        }
    }

    /// The node the pod must run on, if one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Lifecycle::OneAttempt { .. } => None,
            Lifecycle::LongRunning { node } => Some(node),
        }
    }

    pub fn restart_policy(&self) -> &'static str {
        match self {
            // A trial is one run: a crash or an OOM kill is its result, not a reason to
            // restart and measure something else.
            Lifecycle::OneAttempt { .. } => "Never",
            // The kubelet restarts a crashed validator in place, on its state.
            Lifecycle::LongRunning { .. } => "Always",
        }
    }

    pub fn grace_period_seconds(&self) -> i64 {
        match self {
            // Time for a clean shutdown that flushes the ledger.
            Lifecycle::OneAttempt { .. } => 120,
            // A validator in production closes its databases with no hurry: 120 s cuts
            // off Agave's own `exit` (kubernetes#65496 is why preStop hooks do not help).
            Lifecycle::LongRunning { .. } => 600,
        }
    }
}

impl RenderInput {
    /// An attempt of a trial: the trial names and owns the pod, its experiment's trials
    /// share their generated objects, and its metrics settings (over the operator's
    /// default Prometheus, `prometheus_url`) say where pushed datapoints go.
    pub fn for_trial(
        trial: &ValidatorTrial,
        attempt: i32,
        avoid_nodes: &[String],
        prometheus_url: Option<&str>,
    ) -> Result<RenderInput, RenderError> {
        let name = trial.metadata.name.clone().unwrap_or_default();
        let experiment = trial.spec.experiment.clone();
        let mut template = trial.spec.template.clone();
        // A trial created before `template.tuning` existed has its tuned values only in
        // its point.
        if template.tuning.is_empty() {
            template.tuning.apply_point(&trial.spec.point)?;
        }
        let group_labels = BTreeMap::from([
            (labels::MANAGED_BY.into(), labels::MANAGER.into()),
            (labels::EXPERIMENT.into(), experiment.clone()),
        ]);
        let mut owner_labels = group_labels.clone();
        owner_labels.insert(labels::TRIAL.into(), name.clone());
        Ok(RenderInput {
            owner: Owner {
                name,
                namespace: trial.metadata.namespace.clone(),
                reference: trial.controller_owner_ref(&()),
                labels: owner_labels,
            },
            group: Group {
                name: experiment,
                labels: group_labels,
                owners: trial.metadata.owner_references.clone().unwrap_or_default(),
            },
            template,
            remote_write: trial.spec.metrics.remote_write(prometheus_url),
            max_lag: trial.spec.settings.warmup.max_lag,
            role: Role::Observer,
            lifecycle: Lifecycle::OneAttempt {
                attempt,
                avoid_nodes: avoid_nodes.to_vec(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::{golden, render};

    /// Nothing of the trial reaches the pod but through the input: another owner and
    /// group (as a validator running on its own would have) name, label and own it all.
    #[test]
    fn the_pod_is_named_labelled_and_grouped_by_the_input() {
        let trial = golden::trial(&golden::example("besu-allocator-heap-sweep.yaml"), 0);
        let mut input = golden::input(&trial);
        input.owner = Owner {
            name: "mainnet-a".into(),
            namespace: Some("validators".into()),
            reference: None,
            labels: BTreeMap::from([("app".to_string(), "mainnet".to_string())]),
        };
        input.group = Group {
            name: "mainnet-a".into(),
            labels: input.owner.labels.clone(),
            owners: Vec::new(),
        };
        let r = render(&input).unwrap();
        assert_eq!(r.pod.metadata.name.as_deref(), Some("mainnet-a-1"));
        let labels = r.pod.metadata.labels.clone().unwrap();
        assert_eq!(labels["app"], "mainnet");
        assert_eq!(labels[labels::CLIENT], "besu");
        assert!(!labels.contains_key(labels::TRIAL) && !labels.contains_key(labels::EXPERIMENT));
        assert_eq!(r.pod.metadata.owner_references, None);
        assert_eq!(
            r.config_maps[0].metadata.name.as_deref(),
            Some("mainnet-a-1-besu")
        );
        let secret = &r.secrets[0].metadata;
        assert_eq!(secret.name.as_deref(), Some("mainnet-a-engine-jwt"));
        assert_eq!(secret.namespace.as_deref(), Some("validators"));
        assert_eq!(secret.owner_references, None);
        let yaml = serde_saphyr::to_string(&r.pod).unwrap();
        assert!(!yaml.contains(&trial.spec.experiment), "{yaml}");
    }

    #[test]
    fn a_trial_is_the_owner_and_its_experiment_the_group() {
        let trial = golden::trial(&golden::example("quickstart-agave-ram-sweep.yaml"), 0);
        let input = golden::input(&trial);
        assert_eq!(Some(&input.owner.name), trial.metadata.name.as_ref());
        assert_eq!(input.owner.labels[labels::TRIAL], input.owner.name);
        assert_eq!(input.group.name, trial.spec.experiment);
        assert_eq!(
            Some(input.group.owners.clone()),
            trial.metadata.owner_references
        );
        assert_eq!(
            input.remote_write.as_deref(),
            Some("http://prometheus-operated.monitoring:9090/api/v1/write")
        );
        assert_eq!(
            input.lifecycle.pod_name(&input.owner.name),
            format!("{}-1", input.owner.name)
        );
    }

    /// A long-running input renders the same client part around another lifecycle: one
    /// pod name for every restart, restarted in place, claims of its own that the pod
    /// names, placed on its node through the scheduler.
    #[test]
    fn a_long_running_pod_keeps_its_name_and_its_claims_on_its_node() {
        let trial = golden::trial(&golden::example("besu-allocator-heap-sweep.yaml"), 0);
        let attempt = render(&golden::input(&trial)).unwrap();
        let mut input = golden::input(&trial);
        input.owner.name = "mainnet-a".into();
        input.role = Role::NonVoting(Keys::default());
        input.lifecycle = Lifecycle::LongRunning {
            node: "bm-07".into(),
        };
        let r = render(&input).unwrap();
        let spec = r.pod.spec.clone().unwrap();
        assert_eq!(r.pod.metadata.name.as_deref(), Some("mainnet-a"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.node_name, None);
        let term = &spec
            .affinity
            .unwrap()
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms[0];
        let req = &term.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (req.operator.as_str(), req.values.clone()),
            ("In", Some(vec!["bm-07".to_string()]))
        );
        let claims: Vec<String> = r
            .claims
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(claims, vec!["mainnet-a-data".to_string()]);
        let volumes = spec.volumes.unwrap();
        let data = volumes.iter().find(|v| v.name == "data").unwrap();
        assert!(data.ephemeral.is_none());
        assert_eq!(
            data.persistent_volume_claim.as_ref().unwrap().claim_name,
            "mainnet-a-data"
        );
        assert!(attempt.claims.is_empty());
        // The client's part is the same: the same containers and arguments.
        assert_eq!(
            attempt.pod.spec.unwrap().containers[0].args,
            spec.containers[0].args
        );
    }
}
