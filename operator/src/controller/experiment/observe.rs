//! What a pass observes: the experiment's trials. Nodes come here when trials are matched
//! to them (paired trials, issue 19).

use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::kube_err;
use crate::api::labels;
use crate::api::{ValidatorExperiment, ValidatorTrial};
use crate::controller::{Context, Result};

/// The trials labelled with the experiment's name that it owns (by uid: the trials of an
/// earlier experiment of the same name, still being collected, are not its own).
pub async fn trials(vx: &ValidatorExperiment, ctx: &Context) -> Result<Vec<ValidatorTrial>> {
    let api: Api<ValidatorTrial> =
        Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let lp = ListParams::default().labels(&format!("{}={}", labels::EXPERIMENT, vx.name_any()));
    Ok(api
        .list(&lp)
        .await
        .map_err(kube_err(vx, "listing the trials"))?
        .items
        .into_iter()
        .filter(|t| t.owner_references().iter().any(|o| o.uid == uid))
        .collect())
}
