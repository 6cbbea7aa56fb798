//! The pod's life: none (create it), stopping (wait until it is gone), on a node that
//! does not answer (it may still run: no other starts until it is confirmed gone), ended
//! (delete it, freeing the name for its replacement), or running.

use std::time::Duration;

use super::{Act, Pass};
use crate::api::validator::ValidatorPhase;
use crate::controller::validator::observe::PodState;

/// What the pod step decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Life<'a> {
    /// No pod: create it.
    Create,
    /// The pod is being deleted: wait until it is gone, and why.
    Stopping(String),
    /// Its node does not answer: nothing is done, and why.
    NodeSilent(String),
    /// It ended (evicted, or its node rebooted it away): delete it, and why.
    Ended(String),
    /// It runs, or starts: the rollout and health steps judge it.
    Runs(&'a PodState),
}

pub fn judge(pod: Option<&PodState>) -> Life<'_> {
    let Some(pod) = pod else {
        return Life::Create;
    };
    let node = pod.node.clone().unwrap_or_default();
    if pod.terminating {
        return Life::Stopping(if pod.node_ready == Some(false) {
            format!(
                "node {node} does not answer: pod {} is not replaced until it is confirmed gone (by its kubelet, or by an operator who knows the machine is off: kubectl delete pod {} --force --grace-period=0)",
                pod.name, pod.name
            )
        } else {
            format!("waiting for pod {} to stop on {node}", pod.name)
        });
    }
    if pod.node_ready == Some(false) {
        return Life::NodeSilent(format!(
            "node {node} does not answer: its pod {} may still run, so no other starts until it is confirmed gone (kubectl delete pod {} --force --grace-period=0 once the machine is known to be off)",
            pod.name, pod.name
        ));
    }
    if matches!(pod.phase.as_str(), "Failed" | "Succeeded") {
        // With restart policy Always nothing else ends a pod.
        return Life::Ended(format!("pod {} ended ({}): replaced", pod.name, pod.phase));
    }
    Life::Runs(pod)
}

/// A pod that does not run: the pass ends here.
pub(super) fn apply(pass: &mut Pass<'_>, life: Life<'_>) {
    match life {
        Life::Create => {
            pass.act(Act::CreatePod);
            pass.out.phase = ValidatorPhase::Starting;
            pass.set("Ready", false, "PodCreated", "the pod is created");
            pass.set(
                "RestartPending",
                false,
                "UpToDate",
                "the pod runs what is rendered",
            );
            pass.requeue = Duration::from_secs(2);
        }
        Life::Stopping(why) => {
            pass.out.phase = ValidatorPhase::Restarting;
            pass.set("Ready", false, "Restarting", why);
            pass.requeue = Duration::from_secs(2);
        }
        Life::NodeSilent(why) => {
            pass.out.phase = pass.previous.phase;
            pass.set("Ready", false, "NodeNotAnswering", why.clone());
            pass.event(true, "NodeNotAnswering", why);
        }
        Life::Ended(why) => {
            pass.act(Act::DeletePod);
            pass.out.phase = ValidatorPhase::Restarting;
            pass.set("Ready", false, "PodEnded", why);
            pass.requeue = Duration::from_secs(2);
        }
        Life::Runs(_) => {}
    }
}
