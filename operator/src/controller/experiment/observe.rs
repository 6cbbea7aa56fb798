//! What a pass observes: the experiment's trials, and for a paired comparison the nodes
//! its pairs are matched to.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::kube_err;
use crate::api::labels;
use crate::api::template::Placement;
use crate::api::{ValidatorExperiment, ValidatorTrial};
use crate::check::nodes::{eligible, ready};
use crate::clients::pod::EXCLUSIVE_LABEL;
use crate::controller::{Context, Result};
use crate::results::dataset::{HOSTNAME_LABEL, NodeSlot};

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

/// For a paired comparison, the nodes its trials may be matched to: Ready, schedulable,
/// selected and tolerated by the template's placement, with their class (the value of
/// `comparison.matchNodesBy`) and whether a valtune pod (of any experiment in the
/// namespace) holds them. None for other experiments.
pub async fn nodes(vx: &ValidatorExperiment, ctx: &Context) -> Result<Option<Vec<NodeSlot>>> {
    let Some(cmp) = vx.spec.comparison.as_ref().filter(|c| c.paired()) else {
        return Ok(None);
    };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let listed = nodes
        .list(&ListParams::default())
        .await
        .map_err(kube_err(vx, "listing the nodes"))?
        .items;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    let held: Vec<String> = pods
        .list(&ListParams::default().labels(&format!("{EXCLUSIVE_LABEL}=true")))
        .await
        .map_err(kube_err(vx, "listing the pods that hold nodes"))?
        .items
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded") | Some("Failed"))
        })
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    Ok(Some(node_slots(
        &listed,
        &vx.spec.template.placement,
        &cmp.match_nodes_by,
        &held,
    )))
}

/// The placement's nodes as slots. Pure.
pub fn node_slots(
    nodes: &[Node],
    placement: &Placement,
    class_label: &str,
    held: &[String],
) -> Vec<NodeSlot> {
    let mut slots: Vec<NodeSlot> = nodes
        .iter()
        .filter(|n| {
            ready(n)
                && !n
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
        })
        .filter(|n| eligible(n, &placement.node_selector, &placement.tolerations))
        .map(|n| {
            let name = n.name_any();
            let labels = n.metadata.labels.clone().unwrap_or_default();
            NodeSlot {
                hostname: labels.get(HOSTNAME_LABEL).cloned().unwrap_or(name.clone()),
                class: labels.get(class_label).cloned().unwrap_or_default(),
                busy: held.contains(&name),
                name,
            }
        })
        .collect();
    slots.sort_by(|a, b| a.name.cmp(&b.name));
    slots
}
