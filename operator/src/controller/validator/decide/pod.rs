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
            pass.requeue = Some(Duration::from_secs(2));
        }
        Life::Stopping(why) => {
            pass.out.phase = ValidatorPhase::Restarting;
            pass.set("Ready", false, "Restarting", why);
            pass.requeue = Some(Duration::from_secs(2));
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
            pass.requeue = Some(Duration::from_secs(2));
        }
        Life::Runs(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::yaml;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Row {
        what: String,
        pod: Option<PodState>,
        expect: Expect,
    }

    /// The step's decision, with (part of) its reason.
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    enum Expect {
        Create,
        Runs,
        Stopping(String),
        NodeSilent(String),
        Ended(String),
    }

    #[test]
    fn the_table() {
        let rows: Vec<Row> = yaml(
            "
            - what: no pod, so one is created
              expect: create
            - what: running on a node that answers
              pod: {name: v, phase: Running, node: bm-01, nodeReady: true}
              expect: runs
            - what: not bound to a node yet
              pod: {name: v, phase: Pending}
              expect: runs
            - what: stopping on a node that answers
              pod: {name: v, phase: Running, node: bm-01, nodeReady: true, terminating: true}
              expect: {stopping: waiting for pod v to stop on bm-01}
            - what: stopping on a node that does not answer, so not replaced
              pod: {name: v, phase: Running, node: bm-01, nodeReady: false, terminating: true}
              expect:
                stopping: >-
                  node bm-01 does not answer: pod v is not replaced until it is confirmed
                  gone
            - what: on a node that does not answer, so it may still run
              pod: {name: v, phase: Running, node: bm-01, nodeReady: false}
              expect:
                nodeSilent: >-
                  node bm-01 does not answer: its pod v may still run, so no other starts
                  until it is confirmed gone
            - what: on a node gone from the cluster
              pod: {name: v, phase: Running, node: bm-01, nodeReady: false}
              expect: {nodeSilent: kubectl delete pod v --force --grace-period=0}
            - what: evicted, so its name is freed
              pod: {name: v, phase: Failed, node: bm-01, nodeReady: true}
              expect: {ended: pod v ended (Failed)}
            - what: ended by itself
              pod: {name: v, phase: Succeeded, node: bm-01, nodeReady: true}
              expect: {ended: pod v ended (Succeeded)}
            ",
        );
        for row in rows {
            let what = &row.what;
            match (judge(row.pod.as_ref()), row.expect) {
                (Life::Create, Expect::Create) => {}
                (Life::Runs(p), Expect::Runs) => assert_eq!(Some(p), row.pod.as_ref()),
                (Life::Stopping(why), Expect::Stopping(want))
                | (Life::NodeSilent(why), Expect::NodeSilent(want))
                | (Life::Ended(why), Expect::Ended(want)) => {
                    assert!(why.contains(&want), "{what}: {why}")
                }
                (got, _) => panic!("{what}: {got:?}"),
            }
        }
    }

    /// What each life asks of the API server and says in status.
    #[test]
    fn each_life_acts_and_says() {
        let previous = crate::api::validator::ValidatorStatus {
            phase: ValidatorPhase::Running,
            ..Default::default()
        };
        let run = |life: Life<'_>| {
            let mut pass = Pass::new(&previous, Some(1), "2026-11-27T22:00:00Z".parse().unwrap());
            apply(&mut pass, life);
            pass.done()
        };
        let ready = |s: &super::super::Step| {
            let c = s.status.conditions.iter().find(|c| c.type_ == "Ready");
            c.map(|c| c.reason.clone()).unwrap_or_default()
        };
        type Row<'a> = (Life<'a>, &'a [Act], ValidatorPhase, &'a str, u64);
        let rows: Vec<Row> = vec![
            (
                Life::Create,
                &[Act::EnsureBudget, Act::CreatePod],
                ValidatorPhase::Starting,
                "PodCreated",
                2,
            ),
            (
                Life::Stopping("waiting".into()),
                &[Act::EnsureBudget],
                ValidatorPhase::Restarting,
                "Restarting",
                2,
            ),
            (
                Life::Ended("ended".into()),
                &[Act::EnsureBudget, Act::DeletePod],
                ValidatorPhase::Restarting,
                "PodEnded",
                2,
            ),
        ];
        for (life, acts, phase, reason, requeue) in rows {
            let what = format!("{life:?}");
            let s = run(life);
            assert_eq!(s.acts, acts, "{what}");
            assert_eq!(s.status.phase, phase, "{what}");
            assert_eq!(ready(&s), reason, "{what}");
            assert_eq!(s.requeue, Some(Duration::from_secs(requeue)), "{what}");
        }
        // A node that does not answer: the phase it had, nothing done, a warning.
        let s = run(Life::NodeSilent("node bm-01 does not answer".into()));
        assert_eq!(s.status.phase, ValidatorPhase::Running);
        assert_eq!(ready(&s), "NodeNotAnswering");
        assert!(matches!(&s.acts[..], [Act::EnsureBudget, Act::Event(n)] if n.warning));
    }
}
