//! Antelope nodeos (AntelopeIO/leap 5.x, AntelopeIO/spring 1.x), e.g. a WAX node
//! following its chain: seed 002's state larger than RAM, swap, and a memory hog inside
//! the pod's memory. The pod is in [`render`], how results are read in [`profile`], the
//! admission rules in [`rules`], the report in [`report`]; why each choice, with the
//! upstream sources, in docs/clients/nodeos.md.

mod knobs;
pub mod options;
mod profile;
mod render;
mod report;
mod rules;
pub mod swap;

use kube::core::Rule;

pub use render::{CHAIN_EXPORTER, EXPORTER_SCRIPT, HOG_CONTAINER, STATE_TMPFS_LABEL, SWAP_LABEL};

use super::knobs::KnobTable;
use super::pod::Skeleton;
use super::profile::{Layout, MetricProfile, Objective};
use super::{ClientPod, RenderError, RenderInput, ValidatorClient};
use crate::api::nodeos::{NodeosMapMode, NodeosSpec, StateMedium};
use crate::api::quantity::parse_quantity;
use crate::api::settings::QueryKey;
use crate::api::sweep::SweepSpec;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::{TrialResults, ValidatorTrial};

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

impl ValidatorClient for Nodeos {
    fn name(&self) -> &'static str {
        "nodeos"
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
}

#[cfg(test)]
mod tests;
