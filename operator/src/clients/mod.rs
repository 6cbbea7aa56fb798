//! Validator clients. Each is one module behind [`ValidatorClient`]: its knob table, how
//! a [`RenderInput`] (a resolved template, its owner and group, a role, a lifecycle) becomes its
//! pod (on the shared skeleton of [`pod`]), its metric profile and its admission rules.
//! [`client_for`] is the one place that lists them.
//!
//! Adding a client: a module under `clients/` implementing the trait, one line in
//! [`CLIENTS`], a model under `lab/src/sim/clients/`, one line in the simulator's
//! registry (docs/clients.md, "Adding a client").

pub mod agave;
pub mod besu;
pub mod config_keys;
pub mod firedancer;
#[cfg(test)]
pub mod golden;
pub mod health;
pub mod input;
pub mod knobs;
pub mod nodeos;
pub mod parts;
pub mod pod;
pub mod profile;
#[cfg(test)]
mod seam_tests;
pub mod solana_load;
#[cfg(test)]
mod startup_tests;
#[cfg(test)]
pub mod toy;
pub mod window;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Node, Pod, Volume};
use kube::core::Rule;

use crate::api::ValidatorTrial;
use crate::api::settings::WindowStart;
use crate::api::sweep::SweepSpec;
use crate::api::template::{ClientSpec, ValidatorTemplate, VolumeRole};
use crate::api::tuning::PointValueError;
use crate::api::validator_rules::ValidatorRoles;
use crate::api::version::Version;
use crate::finding::Finding;
pub use input::RenderInput;
use knobs::{KnobError, KnobTable};
use profile::MetricProfile;
use window::RestartWindow;

/// Every client valtune knows, in the order docs list them (and `ClientSpec` declares
/// them).
pub static CLIENTS: &[&dyn ValidatorClient] = &[
    &agave::Agave,
    &firedancer::Firedancer,
    &besu::Besu,
    &nodeos::Nodeos,
    #[cfg(test)]
    &toy::Toy,
];

/// The client a template runs. The schema ensures exactly one is set; an object that
/// slipped past it (written before the CRD) gets an error naming the choices.
pub fn client_for(
    template: &ValidatorTemplate,
) -> Result<&'static dyn ValidatorClient, RenderError> {
    let mut set = CLIENTS.iter().filter(|c| c.runs(&template.client));
    match (set.next(), set.next()) {
        (Some(c), None) => Ok(*c),
        _ => Err(RenderError::Invalid(format!(
            "the template must set exactly one client: {}",
            CLIENTS
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Every client's admission rules, on the experiment spec.
pub fn admission_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = CLIENTS
        .iter()
        .flat_map(|c| {
            let mut rules = c.knobs().rules();
            rules.extend(c.rules());
            rules.extend(profile_rule(*c));
            rules
        })
        .collect();
    rules.extend(CLIENTS.iter().flat_map(|c| c.key_rules()));
    rules
}

/// The rules on what the template says (its knobs, each client's own, its config keys),
/// the same for every kind holding a template at `spec.template` (an experiment, a
/// Validator). They also read `spec.sweep`, which only an experiment has: the Validator's
/// schema declares it to refuse it (crd.rs).
pub fn template_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = CLIENTS
        .iter()
        .flat_map(|c| {
            let mut rules = c.knobs().rules();
            rules.extend(c.rules());
            rules
        })
        .collect();
    rules.extend(CLIENTS.iter().flat_map(|c| c.key_rules()));
    rules
}

/// Every Validator rule that depends on the client: those built from what each client's
/// validator can be, then each client's own.
pub fn validator_rules() -> Vec<Rule> {
    let roles: Vec<ValidatorRoles> = CLIENTS.iter().map(|c| c.validator_roles()).collect();
    let mut rules = crate::api::validator_rules::rules(&roles);
    rules.extend(CLIENTS.iter().flat_map(|c| c.validator_rules()));
    rules
}

/// `metrics.queries` and abort rules may only name series of the client's profile.
fn profile_rule(c: &dyn ValidatorClient) -> Vec<Rule> {
    let Some(keys) = c.profile_keys() else {
        return Vec::new();
    };
    let list = format!(
        "[{}]",
        keys.iter()
            .map(|k| format!("'{k}'"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let names = keys
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let spec = format!("self.template.{}", c.name());
    vec![
        Rule::new(format!(
            "!has({spec}) || !has(self.metrics.queries) || self.metrics.queries.all(k, k in {list})"
        ))
        .message(format!("{} has no such series: name one of {names}", c.display()).as_str())
        .field_path(".metrics.queries"),
        Rule::new(format!(
            "!has({spec}) || !has(self.trial.abortWhen) || self.trial.abortWhen.all(r, r.metric in {list})"
        ))
        .message(
            format!(
                "{} has no such series to watch: use one of {names}",
                c.display()
            )
            .as_str(),
        )
        .field_path(".trial.abortWhen"),
    ]
}

/// A validator client.
pub trait ValidatorClient: Send + Sync {
    /// The template key and label value: `agave`.
    fn name(&self) -> &'static str;
    /// Its name in messages: `Agave`.
    fn display(&self) -> &'static str {
        self.knobs().display
    }
    /// Whether a template's client spec is this client's.
    fn runs(&self, spec: &ClientSpec) -> bool;
    /// The image and explicit version of the spec (for [`ValidatorClient::version`]).
    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>);
    /// The client version a template runs, when known (its `version`, else its image tag).
    fn version(&self, t: &ValidatorTemplate) -> Option<Version> {
        let (image, explicit) = self.image_and_version(t);
        Version::of(explicit, image)
    }
    /// What it honours and how each value reaches the process.
    fn knobs(&self) -> &'static KnobTable;
    /// Admission rules of its own beyond the knob table, on the experiment spec.
    fn rules(&self) -> Vec<Rule> {
        Vec::new()
    }
    /// Its config file and the long options it takes under the same names, judged by its
    /// version's key table (upstream-keys) before a pod is created; None: no table.
    fn config_keys<'a>(&self, _t: &'a ValidatorTemplate) -> Option<config_keys::ConfigKeys<'a>> {
        None
    }
    /// The admission rules of its key table, on the experiment spec (after every
    /// client's own rules).
    fn key_rules(&self) -> Vec<Rule> {
        Vec::new()
    }
    /// What its long-running validator can be (whether it votes and how, whether it
    /// fails over, whether its restart window takes `restartWindow`'s options): the
    /// Validator's rules that list clients are built from these.
    fn validator_roles(&self) -> ValidatorRoles;
    /// Admission rules of its own on a Validator's spec, beyond the template's.
    fn validator_rules(&self) -> Vec<Rule> {
        Vec::new()
    }
    /// Where a failover pair member answers Solana's JSON-RPC (`getIdentity`), if it
    /// fails over.
    fn identity_rpc_port(&self, _t: &ValidatorTemplate) -> Option<i32> {
        None
    }
    /// Whether this version of valtune renders its trials (an experiment for a client
    /// that cannot run fails before anything is created).
    fn runs_trials(&self) -> bool {
        true
    }
    /// Where a volume of `role` is mounted in the validator container.
    fn mount_path(&self, role: VolumeRole) -> String {
        format!("/mnt/{}", role.as_str())
    }
    /// Where hugepages are mounted as hugetlbfs (`.gigantic` and `.huge` below it).
    fn hugetlbfs_path(&self) -> &'static str {
        "/mnt/hugepages"
    }
    /// Secrets of random bytes the client's pods mount, created once if they do not exist
    /// and shared by the input's group (e.g. an Engine API JWT). Pure: the value is the
    /// operator's to generate.
    fn secrets(&self, _input: &RenderInput) -> Vec<pod::GeneratedSecret> {
        Vec::new()
    }
    /// The client's part of the pod, on the shared skeleton. Pure.
    fn render(
        &self,
        input: &RenderInput,
        skeleton: &pod::Skeleton,
    ) -> Result<ClientPod, RenderError>;
    /// How results are read, before the experiment's overrides.
    fn profile(&self, t: &ValidatorTemplate) -> MetricProfile;
    /// The series its profile has (for the admission rule on `metrics.queries`); None
    /// accepts any.
    fn profile_keys(&self) -> Option<Vec<crate::api::settings::QueryKey>>;
    /// The columns of `valtune report`'s table for an experiment's sweep, shaped like the
    /// seed the experiment reproduces.
    fn report(&self, _t: &ValidatorTemplate, _sweep: &SweepSpec) -> profile::Layout {
        profile::Layout::ram()
    }
    /// What the recommendation optimises when the sweep has no memory values.
    fn objective(&self, _sweep: &SweepSpec) -> profile::Objective {
        profile::Objective::default()
    }
    /// The one-line summary of a trial's results (its message when it ends).
    fn summary(&self) -> fn(&crate::api::trial::TrialResults) -> String {
        profile::ram_summary
    }
    /// What `valtune report` says under the table beyond the recommendation: the
    /// experiment's conclusion in the seed's terms (e.g. nodeos' working-set estimate).
    fn report_notes(&self, _trials: &[ValidatorTrial]) -> Vec<String> {
        Vec::new()
    }
    /// Where a long-running validator answers whether it is healthy; None: valtune does
    /// not read this client's health yet.
    fn health(&self, _t: &ValidatorTemplate) -> Option<health::HealthProbe> {
        None
    }
    /// Where it shows its head and the chain's, if it does.
    fn position(&self, _t: &ValidatorTemplate) -> Option<health::PositionProbe> {
        None
    }
    /// When a change of a long-running validator's pod may be applied (window.rs).
    fn restart_window(&self, _t: &ValidatorTemplate) -> Arc<dyn RestartWindow> {
        Arc::new(window::NotComputed(
            "valtune does not compute this client's restart window yet",
        ))
    }
    /// The typical time from a trial's start to its window's start (`valtune plan`'s
    /// expected cost), with where the figure comes from.
    fn typical_warmup(&self, t: &ValidatorTemplate, from: WindowStart) -> Warmup;
    /// Why the trial cannot run as measured on the node its pod was bound to, if it
    /// cannot (what the node gives it that admission could not know: e.g. the swap the
    /// kubelet grants nodeos there). Pure.
    fn node_shortfall(&self, _t: &ValidatorTemplate, _pod: &Pod, _node: &Node) -> Option<String> {
        None
    }
    /// What `valtune check` says of the nodes an experiment may use beyond what every pod
    /// needs (e.g. nodeos' swap nodes). Pure.
    fn node_findings(&self, _n: &NodeCheck) -> Vec<Finding> {
        Vec::new()
    }
}

/// An experiment as `valtune check` asks its client about the nodes it may use.
#[derive(Debug, Clone, Copy)]
pub struct NodeCheck<'a> {
    /// `experiment NAME`, as findings name it.
    pub what: &'a str,
    pub template: &'a ValidatorTemplate,
    /// (point, its pod) of each point checked.
    pub points: &'a [(String, Pod)],
    /// The resolved template of each of those points, in the same order.
    pub templates: &'a [ValidatorTemplate],
    /// The nodes the pods may go to (selector and tolerations).
    pub eligible: &'a [&'a Node],
}

/// A client's typical warm-up, with its source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Warmup {
    pub typical: std::time::Duration,
    /// What the trial does meanwhile, and where the figure comes from.
    pub basis: &'static str,
}

impl Warmup {
    /// `minutes` of warm-up, for `basis`.
    pub const fn minutes(minutes: u64, basis: &'static str) -> Warmup {
        Warmup {
            typical: std::time::Duration::from_secs(minutes * 60),
            basis,
        }
    }
}

/// What a client adds to the pod skeleton.
#[derive(Debug, Clone, Default)]
pub struct ClientPod {
    pub init_containers: Vec<Container>,
    /// The validator container first, then its sidecars.
    pub containers: Vec<Container>,
    /// Volumes beyond the skeleton's (config files, scratch space).
    pub volumes: Vec<Volume>,
    /// ConfigMaps the pod mounts, created with it.
    pub config_maps: Vec<ConfigMap>,
    pub tweaks: pod::Tweaks,
}

/// What the operator applies for a pod: the pod, its ConfigMaps, and its group's Secrets.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub pod: Pod,
    pub config_maps: Vec<ConfigMap>,
    pub secrets: Vec<pod::GeneratedSecret>,
    /// Claims created beside the pod and kept after it (a long-running validator's state).
    pub claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RenderError {
    #[error("valtune cannot run {0} trials yet (see docs/clients.md)")]
    Unsupported(&'static str),
    #[error(transparent)]
    Knob(#[from] KnobError),
    #[error(transparent)]
    Point(#[from] PointValueError),
    #[error(transparent)]
    ConfigKey(#[from] Box<config_keys::KeyError>),
    #[error("{0}")]
    Invalid(String),
}

/// The pod, ConfigMaps and generated Secrets of an input. Pure: the same input always
/// renders the same objects, so re-applying them is a no-op. What the API server could not
/// judge is judged here, before any pod exists: the config keys by the version's table.
pub fn render(input: &RenderInput) -> Result<Rendered, RenderError> {
    let client = client_for(&input.template)?;
    if !client.runs_trials() {
        return Err(RenderError::Unsupported(client.display()));
    }
    config_keys::check(&input.template, client.version(&input.template))?;
    let skeleton = pod::skeleton(input, client)?;
    let part = client.render(input, &skeleton)?;
    let mut rendered = pod::assemble(input, skeleton, part);
    rendered.secrets = client.secrets(input);
    Ok(rendered)
}

/// How a trial's results are read: its client's profile with the experiment's queries.
pub fn profile(trial: &ValidatorTrial) -> Result<MetricProfile, RenderError> {
    let client = client_for(&trial.spec.template)?;
    Ok(client
        .profile(&trial.spec.template)
        .with_overrides(&trial.spec.metrics.queries))
}

#[cfg(test)]
mod tests {
    use crate::api::ValidatorExperiment;
    use crate::api::sweep::SweepSpec;
    use crate::clients::golden;
    use crate::strategies::plan::plan;

    /// What a template's tuning sets renders exactly as the same value swept: every trial
    /// of every example, rendered again from an experiment that sweeps nothing and whose
    /// template is that trial's resolved one.
    #[test]
    fn a_tuned_template_renders_as_its_swept_point() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples");
        let mut tuned = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let file = entry.unwrap().file_name().into_string().unwrap();
            let yaml = golden::example(&file);
            let vx: ValidatorExperiment = serde_saphyr::from_str(&yaml).unwrap();
            for index in 0..plan(&vx.spec.sweep, vx.spec.trial.repetitions).len() {
                let swept = golden::trial(&yaml, index);
                tuned += usize::from(!swept.spec.template.tuning.is_empty());
                let mut by_hand = vx.clone();
                by_hand.spec.template = swept.spec.template.clone();
                by_hand.spec.sweep = SweepSpec::default();
                let unswept = golden::trial(&serde_saphyr::to_string(&by_hand).unwrap(), 0);
                assert_eq!(unswept.spec.point.describe(), "baseline");
                let text = |t: &crate::api::ValidatorTrial| {
                    let name = t.metadata.name.clone().unwrap();
                    golden::rendered(t).replace(&name, "TRIAL")
                };
                assert_eq!(text(&unswept), text(&swept), "{file}, trial {index}");
            }
        }
        assert!(tuned >= 10, "the examples tune {tuned} trials");
    }

    /// A trial written before `template.tuning` existed renders from its point as before.
    #[test]
    fn a_trial_without_tuning_renders_from_its_point() {
        let trial = golden::trial(&golden::example("firedancer-bench-tiles.yaml"), 3);
        assert!(!trial.spec.template.tuning.is_empty());
        let mut old = trial.clone();
        old.spec.template.tuning = Default::default();
        assert_eq!(golden::rendered(&old), golden::rendered(&trial));
    }
}
