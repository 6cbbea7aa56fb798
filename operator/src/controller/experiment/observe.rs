//! What a pass observes: the experiment's trials, and for a paired comparison the nodes
//! its pairs are matched to.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::decide::Observed;
use super::kube_err;
use crate::api::labels;
use crate::api::{ValidatorExperiment, ValidatorTrial};
use crate::clients::pod::EXCLUSIVE_LABEL;
use crate::controller::{Context, Error, Result};
use crate::readiness::nodes::{Amounts, eligible, pod_requests, ready, shortfalls};
use crate::results::dataset::{HOSTNAME_LABEL, NodeSlot};
use crate::strategies::build::first_attempts;

/// What a pass observes.
pub async fn observe(
    vx: &ValidatorExperiment,
    ctx: &Context,
    now: jiff::Timestamp,
) -> Result<Observed> {
    Ok(Observed {
        trials: trials(vx, ctx).await?,
        nodes: nodes(vx, ctx).await?,
        pipeline: crate::controller::preflight::check(ctx, vx, now).await,
        pod_monitors: ctx.pod_monitors,
    })
}

/// The trials labelled with the experiment's name that it owns (by uid: the trials of an
/// earlier experiment of the same name, still being collected, are not its own), from
/// the operator's watch of trials, with those this process created that the watch has
/// not delivered yet.
pub async fn trials(vx: &ValidatorExperiment, ctx: &Context) -> Result<Vec<ValidatorTrial>> {
    // Until the watch's first list arrives the store is empty, not "no trials".
    ctx.trials_ready
        .clone()
        .wait_for(|ready| *ready)
        .await
        .map_err(|_| Error::WatchStopped("trials"))?;
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let (ns, name) = (vx.namespace(), vx.name_any());
    let mut own: Vec<ValidatorTrial> = ctx
        .trials
        .state()
        .iter()
        .filter(|t| t.namespace() == ns && t.labels().get(labels::EXPERIMENT) == Some(&name))
        .filter(|t| t.owner_references().iter().any(|o| o.uid == uid))
        .map(|t| (**t).clone())
        .collect();
    let mut created = ctx.created.lock().expect("lock");
    if let Some(mine) = created.get_mut(&uid) {
        with_unseen(&mut own, mine, Instant::now());
        if mine.is_empty() {
            created.remove(&uid);
        }
    }
    Ok(own)
}

/// Adds to `own` (what the watch holds) the trials this process created that it does not
/// hold yet; forgets those it holds and those unseen for longer than [`UNSEEN_FOR`]. Pure.
fn with_unseen(
    own: &mut Vec<ValidatorTrial>,
    mine: &mut Vec<(Instant, ValidatorTrial)>,
    now: Instant,
) {
    let seen: HashSet<String> = own.iter().map(|t| t.name_any()).collect();
    mine.retain(|(at, t)| now.duration_since(*at) < UNSEEN_FOR && !seen.contains(&t.name_any()));
    own.extend(mine.iter().map(|(_, t)| t.clone()));
}

/// How long a trial this process created counts as existing without the watch having
/// delivered it (a watch delivers in well under a second; one deleted by someone else
/// in between is forgotten after this).
const UNSEEN_FOR: Duration = Duration::from_secs(60);

/// Records trials this process created (or found existing on create), so the next pass
/// counts them before the watch delivers them.
pub fn remember(vx: &ValidatorExperiment, ctx: &Context, trials: &[ValidatorTrial]) {
    if trials.is_empty() {
        return;
    }
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let now = Instant::now();
    ctx.created
        .lock()
        .expect("lock")
        .entry(uid)
        .or_default()
        .extend(trials.iter().map(|t| (now, t.clone())));
}

/// For a paired comparison, the nodes its trials may be matched to: Ready, schedulable,
/// and able to run every point's pod (selected and tolerated by it, its requests within
/// the node's allocatable: a pair matched to a node none of its pods fits would wait in
/// Scheduling for good), with their class (the value of `comparison.matchNodesBy`) and
/// whether a valtune pod (of any experiment in the namespace) holds them. None for other
/// experiments.
pub async fn nodes(vx: &ValidatorExperiment, ctx: &Context) -> Result<Option<Vec<NodeSlot>>> {
    let Some(cmp) = vx.spec.comparison.as_ref().filter(|c| c.paired()) else {
        return Ok(None);
    };
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let listed = nodes
        .list(&ListParams::default())
        .await
        .map_err(kube_err(vx, Error::ListNodes, "listing the nodes"))?
        .items;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    let held: Vec<String> = pods
        .list(&ListParams::default().labels(&format!("{EXCLUSIVE_LABEL}=true")))
        .await
        .map_err(kube_err(
            vx,
            Error::ListPods,
            "listing the pods that hold nodes",
        ))?
        .items
        .into_iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded") | Some("Failed"))
        })
        .filter_map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    let needs = pod_needs(vx, ctx.prometheus_url.as_deref());
    Ok(Some(node_slots(
        &listed,
        &needs,
        &cmp.match_nodes_by,
        &held,
    )))
}

/// Where one point's pod may run: its own selector and tolerations (a client adds to the
/// template's) and what it requests.
#[derive(Debug, Clone, Default)]
pub struct PodNeed {
    pub selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    pub requests: Amounts,
}

/// Every distinct point's pod as rendered for its first attempt. A point that cannot be
/// rendered adds the template's placement alone (its trial fails on its own, saying why).
fn pod_needs(vx: &ValidatorExperiment, prometheus_url: Option<&str>) -> Vec<PodNeed> {
    first_attempts(vx, prometheus_url, usize::MAX)
        .into_iter()
        .map(|attempt| match attempt {
            Ok((_, pod)) => {
                let spec = pod.spec.clone().unwrap_or_default();
                PodNeed {
                    selector: spec.node_selector.unwrap_or_default(),
                    tolerations: spec.tolerations.unwrap_or_default(),
                    requests: pod_requests(&pod),
                }
            }
            Err(_) => PodNeed {
                selector: vx.spec.template.placement.node_selector.clone(),
                tolerations: vx.spec.template.placement.tolerations.clone(),
                requests: Amounts::new(),
            },
        })
        .collect()
}

/// The nodes every point's pod can run on, as slots. Pure.
pub fn node_slots(
    nodes: &[Node],
    needs: &[PodNeed],
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
        .filter(|n| {
            needs.iter().all(|need| {
                eligible(n, &need.selector, &need.tolerations)
                    && shortfalls(n, &need.requests).is_empty()
            })
        })
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

#[cfg(test)]
mod unseen_tests {
    use super::*;

    fn node(name: &str, labels: &str, cpu: &str, taint: bool) -> Node {
        let taints = if taint {
            "taints: [{key: valtune.dev/dedicated, value: validator, effect: NoSchedule}]"
        } else {
            ""
        };
        serde_saphyr::from_str(&format!(
            "metadata: {{name: {name}, labels: {{{labels}}}}}\nspec: {{{taints}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 1Ti}}, conditions: [{{type: Ready, status: 'True'}}]}}\n"
        ))
        .unwrap()
    }

    /// A pair is matched only to nodes every point's pod selects, tolerates and fits: a
    /// 64-CPU trial never goes to a 62-CPU node of the same labels.
    #[test]
    fn slots_are_nodes_every_points_pod_fits() {
        let nodes = [
            node("bm-01", "bare-metal: 'true'", "94", false),
            node("fd-01", "bare-metal: 'true'", "62", false),
            node("bm-05", "bare-metal: 'true'", "94", true),
            node("gpu-1", "gpu: 'true'", "94", false),
        ];
        let need = |cpu: u128| PodNeed {
            selector: [("bare-metal".to_string(), "true".to_string())].into(),
            tolerations: Vec::new(),
            requests: [("cpu".to_string(), cpu * 1000)].into(),
        };
        let names = |needs: &[PodNeed]| -> Vec<String> {
            node_slots(&nodes, needs, "class", &[])
                .into_iter()
                .map(|s| s.name)
                .collect()
        };
        assert_eq!(names(&[need(32)]), ["bm-01", "fd-01"]);
        assert_eq!(names(&[need(32), need(64)]), ["bm-01"]);
        assert!(names(&[need(128)]).is_empty());
    }

    fn names(v: &[ValidatorTrial]) -> Vec<String> {
        v.iter().map(|t| t.name_any()).collect()
    }

    /// Read-your-writes: what this process created counts before the watch delivers it,
    /// once (not twice when it does), and not forever.
    #[test]
    fn created_trials_count_until_the_watch_holds_them() {
        let now = Instant::now();
        let mut own = vec![ValidatorTrial::test().named("t-1")];
        let mut mine = vec![
            (now, ValidatorTrial::test().named("t-1")),
            (now, ValidatorTrial::test().named("t-2")),
            (
                now - UNSEEN_FOR - Duration::from_secs(1),
                ValidatorTrial::test().named("t-3"),
            ),
        ];
        with_unseen(&mut own, &mut mine, now);
        assert_eq!(names(&own), ["t-1", "t-2"]);
        assert_eq!(
            names(&mine.iter().map(|m| m.1.clone()).collect::<Vec<_>>()),
            ["t-2"]
        );
        // The watch delivers t-2: nothing left to remember.
        let mut own = vec![
            ValidatorTrial::test().named("t-1"),
            ValidatorTrial::test().named("t-2"),
        ];
        with_unseen(&mut own, &mut mine, now);
        assert_eq!(names(&own), ["t-1", "t-2"]);
        assert!(mine.is_empty());
    }
}
