//! One module per validator client: how a trial becomes a pod, and the PromQL that reads
//! the client's metrics.

pub mod agave;
pub mod pod;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::api::template::ClientKind;
use crate::api::trial::ValidatorTrial;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RenderError {
    #[error(
        "valtune cannot run {0} trials yet: only Agave pods are rendered in this version (see docs/clients.md)"
    )]
    Unsupported(&'static str),
    #[error("{0}")]
    Knob(String),
    #[error("{0}")]
    Invalid(String),
}

/// What the operator applies for one attempt of a trial.
pub struct Rendered {
    pub pod: Pod,
    pub pvcs: Vec<PersistentVolumeClaim>,
}

/// How results are read for a client.
#[derive(Debug, Clone)]
pub struct MetricProfile {
    /// Instant-vector PromQL per metric: tps, slotLag, rssBytes, vszBytes,
    /// majorFaultsPerSecond, minorFaultsPerSecond.
    pub queries: BTreeMap<String, String>,
    /// Container port names Prometheus scrapes.
    pub ports: Vec<String>,
    /// The container whose termination ends the trial.
    pub validator_container: &'static str,
}

fn kind(trial: &ValidatorTrial) -> Result<ClientKind, RenderError> {
    trial
        .spec
        .template
        .client
        .kind()
        .ok_or_else(|| RenderError::Invalid("the template must set exactly one client".into()))
}

pub fn profile(trial: &ValidatorTrial) -> Result<MetricProfile, RenderError> {
    let mut profile = match kind(trial)? {
        ClientKind::Agave => agave::profile(),
        other => return Err(RenderError::Unsupported(other.as_str())),
    };
    // The experiment may replace any query.
    for (name, query) in &trial.spec.metrics.queries {
        profile.queries.insert(name.clone(), query.clone());
    }
    Ok(profile)
}

/// The pod and claims of one attempt of a trial. Pure: the same trial and attempt always
/// render the same objects, so re-applying them is a no-op.
pub fn render(
    trial: &ValidatorTrial,
    attempt: i32,
    avoid_nodes: &[String],
) -> Result<Rendered, RenderError> {
    let kind = kind(trial)?;
    let labels = pod::labels(trial, kind.as_str());
    let parts = pod::parts(trial, attempt)?;
    let (init, containers) = match kind {
        ClientKind::Agave => {
            let agave = trial
                .spec
                .template
                .client
                .agave
                .as_ref()
                .expect("kind is agave");
            agave::containers(trial, agave, &parts)?
        }
        other => return Err(RenderError::Unsupported(other.as_str())),
    };
    let pvcs = pod::pvcs(trial, attempt, &labels);
    let pod = pod::pod(
        trial,
        attempt,
        labels,
        init,
        containers,
        parts.volumes,
        avoid_nodes,
    );
    Ok(Rendered { pod, pvcs })
}
