//! Trial lifecycle under the things that go wrong on real clusters: operator restarts,
//! lost nodes, impossible requests, runaway trials, failure limits, suspension, spec
//! edits, and an experiment at the size cap.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::{TrialOutcome, TrialPhase};
use valtune::api::{ValidatorExperiment, ValidatorTrial};
use valtune::strategies::plan::plan;

use crate::common::{
    Lab, create, example_as, experiment, lab, quickstart_with, start_experiment, trials,
    wait_finished, wait_for, wait_released,
};

async fn set_suspend(lab: &Lab, ns: &str, name: &str, suspend: bool) {
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), ns);
    let patch = json!({"spec": {"suspend": suspend}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn phases(ts: &[ValidatorTrial]) -> Vec<TrialPhase> {
    ts.iter()
        .map(|t| t.status.as_ref().map(|s| s.phase).unwrap_or_default())
        .collect()
}

/// Waits until some trial of the namespace is in `phase` (or `count` of them are).
async fn wait_phase(lab: &Lab, ns: &str, phase: TrialPhase, count: usize, timeout: Duration) {
    wait_for(&format!("{count} trial(s) {phase:?}"), timeout, || async {
        let ts = trials(lab, ns).await;
        let n = phases(&ts).iter().filter(|p| **p == phase).count();
        if n >= count {
            Ok(())
        } else {
            Err(format!("{:?}", phases(&ts)))
        }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn killing_the_operator_three_times_loses_and_duplicates_nothing() {
    let lab = lab().await;
    let ns = lab.namespace("restarts").await;
    let vx = quickstart_with(
        &ns,
        "restarts",
        json!({"spec": {
            "sweep": {"memory": ["512Gi", "640Gi", "768Gi", "1Ti", "1280Gi", "1400Gi"]},
            "trial": {"measurement": {"duration": "20s"}},
        }}),
    );
    create(&lab, &vx).await;
    let limit = Duration::from_secs(180);

    // SIGKILL at three different points of the trials' lives, each time starting a new
    // process that must pick up exactly where the killed one was.
    let op = lab.start_operator(&ns);
    wait_phase(&lab, &ns, TrialPhase::Scheduling, 1, limit).await;
    op.kill();
    let op = lab.start_operator(&ns);
    wait_phase(&lab, &ns, TrialPhase::Measuring, 1, limit).await;
    op.kill();
    let op = lab.start_operator(&ns);
    wait_phase(&lab, &ns, TrialPhase::Succeeded, 1, limit).await;
    op.kill();
    let op = lab.start_operator(&ns);
    // A fourth, while the second wave warms up.
    wait_for("a second-wave trial", limit, || async {
        let n = trials(&lab, &ns).await.len();
        if n > 3 {
            Ok(())
        } else {
            Err(format!("{n} trials"))
        }
    })
    .await;
    op.kill();
    let _op = lab.start_operator(&ns);

    let done = wait_finished(&lab, &ns, "restarts", Duration::from_secs(360)).await;
    let st = done.status.clone().unwrap();
    assert_eq!(st.phase, ExperimentPhase::Succeeded, "{st:?}");
    let expected: BTreeSet<String> = plan(&vx.spec.sweep, 1)
        .iter()
        .map(|p| p.name("restarts"))
        .collect();
    let got = trials(&lab, &ns).await;
    let names: BTreeSet<String> = got
        .iter()
        .map(|t| t.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(got.len(), 6, "no trial duplicated");
    assert_eq!(names, expected, "exactly the expected trials");
    for t in &got {
        let s = t.status.clone().unwrap();
        assert_eq!(
            s.outcome,
            Some(TrialOutcome::KeptUp),
            "{}: {s:?}",
            t.metadata.name.clone().unwrap()
        );
        assert!(
            s.results.as_ref().and_then(|r| r.avg_tps).is_some(),
            "results lost: {s:?}"
        );
        // Restarts are not failures: every trial ran its one and only attempt.
        assert_eq!(s.attempts, 1, "{s:?}");
        assert!(s.previous_attempts.is_empty());
    }
    assert_eq!(
        (st.trials.expected, st.trials.finished, st.trials.failed),
        (6, 6, 0)
    );
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn of_two_replicas_only_the_lease_holder_reconciles_and_the_other_takes_over() {
    let lab = lab().await;
    let ns = lab.namespace("replicas").await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(lab.client.clone(), &ns);
    let holder = || async {
        leases
            .get_opt("valtune-operator")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
    };
    let a = lab.start_operator(&ns);
    let a_id = a.identity();
    wait_for("replica A to lead", Duration::from_secs(30), || async {
        match holder().await {
            Some(h) if h == a_id => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let b = lab.start_operator(&ns);
    create(&lab, &quickstart_with(&ns, "replicas", json!({"spec": {"sweep": {"memory": ["512Gi", "1Ti"]}, "parallelism": 1, "trial": {"measurement": {"duration": "10s"}}}}))).await;
    wait_phase(&lab, &ns, TrialPhase::Measuring, 1, Duration::from_secs(60)).await;
    assert_eq!(holder().await, Some(a_id.clone()));
    let b_log = b.log_text();
    assert!(b_log.contains("waiting for the leader lease"), "{b_log}");
    assert!(
        !b_log.contains("controllers started"),
        "the follower reconciled:\n{b_log}"
    );

    a.kill();
    let b_id = b.identity();
    wait_for(
        "replica B to take over",
        Duration::from_secs(30),
        || async {
            match holder().await {
                Some(h) if h == b_id => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let done = wait_finished(&lab, &ns, "replicas", Duration::from_secs(180)).await;
    assert_eq!(done.status.unwrap().trials.succeeded, 2);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_lost_node_ends_the_attempt_as_node_lost_and_retries_elsewhere() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(&lab, "nodelost", json!({"spec": {"sweep": {"memory": ["1Ti"]}, "trial": {"measurement": {"duration": "10m"}}}})).await;
    wait_phase(
        &lab,
        &ns,
        TrialPhase::Measuring,
        1,
        Duration::from_secs(120),
    )
    .await;
    let trial = trials(&lab, &ns).await.remove(0);
    let lost = trial.status.clone().unwrap().node_name.unwrap();

    let nodes: Api<Node> = Api::all(lab.client.clone());
    nodes.delete(&lost, &DeleteParams::default()).await.unwrap();

    let tapi: Api<ValidatorTrial> = Api::namespaced(lab.client.clone(), &ns);
    let name = trial.metadata.name.clone().unwrap();
    let retried = wait_for(
        "a second attempt on another node",
        Duration::from_secs(120),
        || async {
            let t = tapi.get(&name).await.map_err(|e| e.to_string())?;
            let s = t.status.clone().unwrap_or_default();
            let running = matches!(s.phase, TrialPhase::WarmingUp | TrialPhase::Measuring);
            if s.attempts == 2 && running && s.node_name.as_deref() != Some(lost.as_str()) {
                Ok(s)
            } else {
                Err(format!(
                    "{:?} attempt {} on {:?}",
                    s.phase, s.attempts, s.node_name
                ))
            }
        },
    )
    .await;
    let first = &retried.previous_attempts[0];
    assert_eq!(first.outcome, TrialOutcome::NodeLost);
    assert_eq!(first.node.as_deref(), Some(lost.as_str()));
    assert!(retried.lost_nodes.contains(&lost));
    // The new pod is kept off the lost node's name, should it come back.
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = pods.get(&format!("{name}-2")).await.unwrap();
    let affinity = serde_json::to_string(&pod.spec.unwrap().affinity).unwrap();
    assert!(
        affinity.contains("NotIn") && affinity.contains(&lost),
        "{affinity}"
    );
    // A user looking at events sees why.
    let events: Api<Event> = Api::namespaced(lab.client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "NodeLost"), "{reasons:?}");

    // Put the node back for the other tests.
    let topology = valtune_lab::topology::Topology::load(&lab.state.topology).unwrap();
    let node = topology
        .nodes()
        .unwrap()
        .into_iter()
        .find(|n| n.name == lost)
        .unwrap();
    valtune_lab::control_plane::apply(&lab.client, node.node(&lab.state.name))
        .await
        .unwrap();
    lab.delete_namespace(&ns).await;
}

/// Pods no node can take end Unschedulable quoting the scheduler, for the three reasons
/// the examples meet: more 1 GiB hugepages than any node has (Agave), more GPUs than any
/// node has (Agave with sigverify on GPUs), no node prepared for swap (nodeos). One
/// operator runs the three experiments side by side.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn trials_no_node_can_take_end_unschedulable_with_the_schedulers_reason() {
    let lab = lab().await;
    let ns = lab.namespace("unschedulable").await;
    let _op = lab.start_operator(&ns);
    let fast = json!({"schedulingTimeout": "5s", "retries": 0});
    let cases = [
        (
            "hugepages",
            "manifests/examples/quickstart-agave-ram-sweep.yaml",
            json!({"spec": {
                "sweep": {"memory": ["512Gi"]},
                "template": {"resources": {"hugepages1Gi": 128}},
                "trial": fast,
            }}),
            vec!["Insufficient hugepages-1Gi"],
        ),
        (
            "gpu",
            "manifests/examples/agave-banking-threads-gpu.yaml",
            json!({"spec": {
                "template": {"agave": {"gpu": {"count": 3}}},
                "sweep": {"threads": [{"name": "bankingThreads", "values": [8]}], "sigverify": ["gpu"]},
                "trial": fast,
            }}),
            vec!["Insufficient nvidia.com/gpu"],
        ),
        (
            // Only the r6a machines, none of them prepared for swap.
            "noswap",
            "manifests/examples/nodeos-wax-memory-pressure.yaml",
            json!({"spec": {
                "template": {"placement": {"nodeSelector": {"node.kubernetes.io/instance-type": "r6a.metal"}}},
                "sweep": {"memoryPressure": ["0"]},
                "trial": fast,
            }}),
            vec![
                "didn't match Pod's node affinity/selector",
                "valtune.dev/swap=LimitedSwap",
            ],
        ),
    ];
    for (name, path, patch, _) in &cases {
        create(&lab, &example_as(path, &ns, name, patch.clone())).await;
    }
    for (name, _, _, texts) in &cases {
        let done = wait_finished(&lab, &ns, name, Duration::from_secs(120)).await;
        assert_eq!(done.status.unwrap().trials.failed, 1, "{name}");
        let t = trials(&lab, &ns)
            .await
            .into_iter()
            .find(|t| t.spec.experiment == *name)
            .unwrap();
        let s = t.status.clone().unwrap();
        assert_eq!(s.phase, TrialPhase::Failed, "{name}: {s:?}");
        assert_eq!(
            s.outcome,
            Some(TrialOutcome::Unschedulable),
            "{name}: {s:?}"
        );
        let degraded = s.conditions.iter().find(|c| c.type_ == "Degraded").unwrap();
        assert_eq!(degraded.status, "True");
        assert_eq!(degraded.reason, "Unschedulable");
        let message = s.message.unwrap_or_default();
        for text in texts {
            assert!(message.contains(text), "{name}: {message}");
            assert!(
                degraded.message.contains(text),
                "{name}: {}",
                degraded.message
            );
        }
    }
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_abort_rule_ends_the_trial_as_aborted_with_its_figures() {
    let lab = lab().await;
    // 256 GiB falls behind during the window; abort once it is 1,000 slots behind for
    // 5 seconds (an hour of simulated time).
    let (ns, _op) = start_experiment(
        &lab,
        "abort",
        json!({"spec": {
            "sweep": {"memory": ["256Gi"]},
            "trial": {"abortWhen": [{"metric": "slotLag", "above": 1000, "for": "5s"}]},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "abort", Duration::from_secs(180)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::Aborted), "{s:?}");
    assert_eq!(s.phase, TrialPhase::Succeeded, "an abort is a result");
    assert!(
        s.message
            .clone()
            .unwrap()
            .contains("slotLag stayed above 1000"),
        "{s:?}"
    );
    let r = s.results.unwrap();
    assert!(r.measured_seconds.unwrap() < 60.0, "{r:?}");
    assert!(r.avg_tps.is_some() && r.max_lag.unwrap() > 1000.0, "{r:?}");
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_validator_that_exits_with_an_error_ends_crashed() {
    let lab = lab().await;
    // The lab's fault injection: the validator exits with an error 3 simulated hours in.
    let (ns, _op) = start_experiment(
        &lab,
        "crash",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "template": {"env": [{"name": "VALTUNE_LAB_CRASH_AFTER", "value": "3h"}]},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "crash", Duration::from_secs(120)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::Crashed), "{s:?}");
    assert_eq!(s.phase, TrialPhase::Failed);
    assert!(s.message.clone().unwrap().contains("exit code 1"), "{s:?}");
    // What ran before the crash is still measured.
    assert!(s.results.and_then(|r| r.avg_tps).is_some());
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_validator_that_never_catches_up_times_out() {
    let lab = lab().await;
    // 160 GiB would catch up only after about 4.7 simulated hours (23 s here) and is
    // OOM-killed first, at about 4.2 (21 s); a 10-second warm-up limit, counted from
    // Prometheus' first scrape of the pod (a few seconds after it starts), ends it before
    // either, with 10 s of warm-up measured.
    let (ns, _op) = start_experiment(
        &lab,
        "timeout",
        json!({"spec": {"sweep": {"memory": ["160Gi"]}, "trial": {"warmup": {"timeout": "10s"}}}}),
    )
    .await;
    wait_finished(&lab, &ns, "timeout", Duration::from_secs(120)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::TimedOut), "{s:?}");
    assert_eq!(s.phase, TrialPhase::Failed);
    assert!(s.caught_up_at.is_none());
    assert!(
        s.message
            .clone()
            .unwrap()
            .contains("did not catch up within the warm-up limit of 10s"),
        "{s:?}"
    );
    // The warm-up was still measured, for reference.
    assert!(s.results.and_then(|r| r.max_lag).unwrap() > 1000.0);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_finished_trial_keeps_its_stopped_pod_for_the_ttl_then_deletes_it() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "ttl",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "trial": {"measurement": {"duration": "10s"}, "ttlSecondsAfterFinished": 15},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "ttl", Duration::from_secs(120)).await;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(lab.client.clone(), &ns);
    // At once: the validator stopped (the pod is terminal, so its CPU and memory are
    // free) but kept for `kubectl logs`; its claims are the pod's (ephemeral volumes) and
    // go with it.
    wait_for(
        "the pod stopped and kept, with its claims",
        Duration::from_secs(30),
        || async {
            let pod = pods
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items;
            let claims = pvcs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items;
            let phase = pod.first().and_then(|p| p.status.as_ref()?.phase.clone());
            let owned_by_pod = claims.iter().all(|c| {
                c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "Pod")
            });
            if pod.len() == 1
                && phase.as_deref() == Some("Failed")
                && claims.len() == 2
                && owned_by_pod
            {
                Ok(())
            } else {
                Err(format!(
                    "{} pods ({phase:?}), {} claims, owned by the pod: {owned_by_pod}",
                    pod.len(),
                    claims.len()
                ))
            }
        },
    )
    .await;
    // After the TTL: the pod and its claims are gone, the results stay.
    wait_released(&lab, &ns, false, Duration::from_secs(60)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::KeptUp));
    assert!(s.results.and_then(|r| r.avg_tps).is_some());
    lab.delete_namespace(&ns).await;
}

/// Issue 23: a trial follows its pod and node from the operator's watches, and an
/// experiment its trials, instead of reading them from the API server on every pass (85
/// pod GETs per trial were measured at 100 trials, a list of the trials per experiment
/// pass). The audit log records the operator user's gets and lists.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_trial_follows_its_pod_and_node_from_the_watches_not_by_reading_them() {
    let lab = lab().await;
    let since = jiff::Timestamp::now();
    let ns = lab.namespace("reads").await;
    let _op = lab.start_audited_operator(&ns);
    create(
        &lab,
        &quickstart_with(
            &ns,
            "reads",
            json!({"spec": {"sweep": {"memory": ["1Ti", "256Gi"]}, "parallelism": 2}}),
        ),
    )
    .await;
    wait_finished(&lab, &ns, "reads", Duration::from_secs(180)).await;
    let all = trials(&lab, &ns).await;
    assert_eq!(all.len(), 2);
    for t in &all {
        let s = t.status.clone().unwrap();
        assert!(s.phase.is_finished(), "{s:?}");
        assert!(s.started_at.is_some(), "{s:?}");
    }
    let audit = std::fs::read_to_string(lab.state.dir.join("logs/audit.log")).unwrap();
    let mut reads: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for e in audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let at: Option<jiff::Timestamp> = e["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse().ok());
        let r = &e["objectRef"];
        let here = r["namespace"] == ns.as_str() || r["resource"] == "nodes";
        if e["user"]["username"] == valtune_lab::control_plane::OPERATOR_USER
            && e["stage"] == "ResponseComplete"
            && at.is_some_and(|at| at >= since)
            && here
            && matches!(e["verb"].as_str(), Some("get" | "list"))
        {
            let key = (
                r["resource"].as_str().unwrap_or("").to_string(),
                e["verb"].as_str().unwrap_or("").to_string(),
            );
            *reads.entry(key).or_default() += 1;
        }
    }
    let n = |resource: &str, verb: &str| {
        reads
            .get(&(resource.to_string(), verb.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // At most a read per attempt that the watch had not delivered yet (a new pod).
    assert!(n("pods", "get") <= 2, "{reads:?}");
    assert!(n("nodes", "get") <= 2, "{reads:?}");
    // Both controllers read the trials from one watch, a collecting trial too (what
    // downloading a snapshot cost the others): its first list is the only one.
    assert!(n("validatortrials", "list") <= 1, "{reads:?}");
    // A finished trial stops and deletes its pods as the watch of pods holds them: the
    // lists left are the first of the two watches of managed pods (the trial
    // controller's, and the validator controller's of their metadata).
    assert!(n("pods", "list") <= 2, "{reads:?}");
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn without_a_prometheus_a_trial_fails_saying_how_to_configure_one() {
    let lab = lab().await;
    let ns = lab.namespace("noprom").await;
    let _op = lab.start_operator_with(&ns, None);
    create(
        &lab,
        &quickstart_with(
            &ns,
            "noprom",
            json!({"spec": {"sweep": {"memory": ["1Ti"]}}}),
        ),
    )
    .await;
    wait_finished(&lab, &ns, "noprom", Duration::from_secs(60)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::MetricsUnavailable));
    let message = s.message.unwrap();
    assert!(
        message.contains("--prometheus-url") && message.contains("spec.metrics.prometheusUrl"),
        "{message}"
    );
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn max_failed_trials_stops_the_experiment() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "maxfailed",
        json!({"spec": {
            "sweep": {"memory": ["512Gi", "768Gi", "1Ti", "1400Gi"]},
            "template": {"resources": {"hugepages1Gi": 128}},
            "trial": {"schedulingTimeout": "3s", "retries": 0},
            "parallelism": 1,
            "maxFailedTrials": 2,
        }}),
    )
    .await;
    let done = wait_finished(&lab, &ns, "maxfailed", Duration::from_secs(120)).await;
    let st = done.status.unwrap();
    assert_eq!(st.phase, ExperimentPhase::Failed);
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "MaxFailedTrialsReached", "{ready:?}");
    assert_eq!((st.trials.failed, st.trials.pending), (2, 2));
    // No third trial was started, then or later.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(trials(&lab, &ns).await.len(), 2);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn suspend_starts_nothing_new_and_lets_running_trials_finish() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "suspend",
        json!({"spec": {
            "sweep": {"memory": ["512Gi", "1Ti", "1400Gi"]},
            "trial": {"measurement": {"duration": "10s"}},
            "parallelism": 1,
            "suspend": true,
        }}),
    )
    .await;
    wait_for(
        "the experiment Suspended",
        Duration::from_secs(30),
        || async {
            let st = experiment(&lab, &ns, "suspend")
                .await
                .status
                .unwrap_or_default();
            if st.phase == ExperimentPhase::Suspended {
                Ok(())
            } else {
                Err(format!("{:?}", st.phase))
            }
        },
    )
    .await;
    assert!(
        trials(&lab, &ns).await.is_empty(),
        "a suspended experiment starts no trial"
    );

    set_suspend(&lab, &ns, "suspend", false).await;
    wait_phase(&lab, &ns, TrialPhase::WarmingUp, 1, Duration::from_secs(60)).await;
    set_suspend(&lab, &ns, "suspend", true).await;
    wait_for(
        "the running trial to finish, and nothing new",
        Duration::from_secs(120),
        || async {
            let st = experiment(&lab, &ns, "suspend")
                .await
                .status
                .unwrap_or_default();
            if st.phase == ExperimentPhase::Suspended {
                Ok(st)
            } else {
                Err(format!("{:?} {:?}", st.phase, st.trials))
            }
        },
    )
    .await;
    let ts = trials(&lab, &ns).await;
    assert_eq!(ts.len(), 1);
    assert_eq!(phases(&ts), vec![TrialPhase::Succeeded]);

    set_suspend(&lab, &ns, "suspend", false).await;
    let done = wait_finished(&lab, &ns, "suspend", Duration::from_secs(180)).await;
    assert_eq!(done.status.unwrap().trials.finished, 3);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn spec_edits_keep_finished_results_add_new_points_and_drop_unstarted_ones() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "edits",
        json!({"spec": {
            "sweep": {"memory": ["512Gi", "1Ti", "1400Gi"]},
            "trial": {"measurement": {"duration": "10s"}},
            "parallelism": 1,
        }}),
    )
    .await;
    wait_phase(
        &lab,
        &ns,
        TrialPhase::Succeeded,
        1,
        Duration::from_secs(120),
    )
    .await;
    let first = trials(&lab, &ns)
        .await
        .into_iter()
        .find(|t| {
            t.status
                .as_ref()
                .is_some_and(|s| s.phase == TrialPhase::Succeeded)
        })
        .unwrap();
    assert_eq!(first.spec.point.memory.as_deref(), Some("512Gi"));

    // 512Gi stays (written differently), 768Gi is new, 1Ti and 1400Gi leave the sweep.
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    let patch = json!({"spec": {"sweep": {"memory": ["0.5Ti", "768Gi"]}}});
    api.patch("edits", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    let done = wait_finished(&lab, &ns, "edits", Duration::from_secs(180)).await;
    let st = done.status.unwrap();
    assert_eq!((st.trials.expected, st.trials.finished), (2, 2), "{st:?}");
    assert_eq!(st.observed_generation, done.metadata.generation);
    let ts = trials(&lab, &ns).await;
    let kept = ts
        .iter()
        .find(|t| t.metadata.name == first.metadata.name)
        .unwrap();
    assert_eq!(
        kept.status.as_ref().unwrap().results,
        first.status.as_ref().unwrap().results
    );
    assert!(
        ts.iter()
            .any(|t| t.spec.point.memory.as_deref() == Some("768Gi"))
    );
    assert!(
        !ts.iter()
            .any(|t| t.spec.point.memory.as_deref() == Some("1400Gi")),
        "never started"
    );
    // The operator never wrote the experiment's spec: it is exactly what the user sent.
    assert_eq!(
        done.spec.sweep.memory,
        Some(vec!["0.5Ti".into(), "768Gi".into()])
    );
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_experiment_at_the_trial_cap_stays_under_64_kib() {
    let lab = lab().await;
    let ns = lab.namespace("cap").await;
    let _op = lab.start_operator(&ns);
    let memory: Vec<String> = (1..=32).map(|i| format!("{}Gi", 256 + 32 * i)).collect();
    let cpu: Vec<i32> = (1..=32).map(|i| i * 2).collect();
    let vx = quickstart_with(
        &ns,
        "cap",
        json!({"spec": {
            "sweep": {"memory": memory, "cpu": cpu},
            "maxTrials": 1024,
            "parallelism": 2,
            "trial": {"measurement": {"duration": "1h"}},
        }}),
    );
    create(&lab, &vx).await;
    let vx = wait_for(
        "the experiment to run at the cap",
        Duration::from_secs(60),
        || async {
            let vx = experiment(&lab, &ns, "cap").await;
            let t = vx.status.clone().unwrap_or_default().trials;
            if t.expected == 1024 && t.active == 2 {
                Ok(vx)
            } else {
                Err(format!("{t:?}"))
            }
        },
    )
    .await;
    let size = serde_json::to_vec(&vx).unwrap().len();
    assert!(size < 64 * 1024, "the experiment object is {size} bytes");
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_operator_serves_health_and_metrics_and_shuts_down_cleanly() {
    let lab = lab().await;
    let ns = lab.namespace("health").await;
    let op = lab.start_operator(&ns);
    let base = format!("http://{}", op.listen);
    let http = reqwest::Client::new();
    wait_for("/readyz", Duration::from_secs(30), || async {
        match http.get(format!("{base}/readyz")).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    create(
        &lab,
        &quickstart_with(
            &ns,
            "health",
            json!({"spec": {"sweep": {"memory": ["1Ti"]}}}),
        ),
    )
    .await;
    wait_phase(&lab, &ns, TrialPhase::WarmingUp, 1, Duration::from_secs(60)).await;
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "valtune_reconciles_total{controller=\"trial\"}",
        "valtune_reconcile_duration_seconds_bucket",
        "valtune_trial_phase_transitions_total{phase=\"WarmingUp\"}",
        "valtune_trials{phase=\"WarmingUp\"}",
    ] {
        assert!(metrics.contains(name), "missing {name} in:\n{metrics}");
    }
    // SIGTERM: a clean exit that hands the lease back at once.
    let status = op.terminate();
    assert!(status.success(), "{status:?}");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(lab.client.clone(), &ns);
    let lease = leases.get("valtune-operator").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
    lab.delete_namespace(&ns).await;
}
