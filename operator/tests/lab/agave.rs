//! Agave as it must run on bare metal (issue: "Agave as it must run on bare metal"): each
//! test is the failure a real cluster would show if its item regressed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;
use valtune::api::trial::{TrialOutcome, TrialPhase};

use crate::common::{lab, start_experiment, trials, wait_finished};

/// The quickstart's tolerations plus one more taint key.
fn tolerating(key: &str) -> serde_json::Value {
    json!([
        {"key": "valtune.dev/validator", "operator": "Exists", "effect": "NoSchedule"},
        {"key": key, "operator": "Exists", "effect": "NoSchedule"},
    ])
}

/// Item 1 and 6: the validator is on its node's network (its ports reachable, as its
/// start-up port check and gossip need), and its exporters are native sidecars.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_validator_runs_on_the_nodes_network_with_native_sidecars() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "hostnet",
        json!({"spec": {"sweep": {"memory": ["1Ti"]}, "trial": {"measurement": {"duration": "10s"}, "ttlSecondsAfterFinished": 60}}}),
    )
    .await;
    let done = wait_finished(&lab, &ns, "hostnet", Duration::from_secs(120)).await;
    assert_eq!(done.status.unwrap().trials.succeeded, 1);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let node: Node = Api::all(lab.client.clone())
        .get(spec.node_name.as_deref().unwrap())
        .await
        .unwrap();
    let node_ip = node.status.unwrap().addresses.unwrap()[0].address.clone();
    assert_eq!(
        pod.status.unwrap().pod_ip.unwrap(),
        node_ip,
        "the pod has its node's address"
    );
    for sidecar in ["rpc-exporter", "process-exporter", "vmagent"] {
        let c = spec
            .init_containers
            .iter()
            .flatten()
            .find(|c| c.name == sidecar)
            .unwrap();
        assert_eq!(
            c.restart_policy.as_deref(),
            Some("Always"),
            "{sidecar} is a native sidecar"
        );
    }
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    let r = t.results.unwrap();
    assert!(
        r.avg_tps.unwrap() > 1000.0,
        "TPS from Agave's own datapoints: {r:?}"
    );
    assert!(
        r.startup_seconds.is_some() && r.catch_up_seconds.is_some(),
        "{r:?}"
    );
    lab.delete_namespace(&ns).await;
}

/// Item 2: an exporter build that skips the full-API methods works without --full-rpc-api
/// (v3.0.2 would answer HTTP 500 on every scrape: refused at admission, see admission.rs).
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_fixed_exporter_build_reads_the_slot_lag_without_the_full_rpc_api() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "lightrpc",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "template": {"agave": {"fullRpcApi": false, "exporters": {"rpc": "ghcr.io/asymmetric-research/solana-exporter:22fd4f3"}}},
            "trial": {"measurement": {"duration": "10s"}},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "lightrpc", Duration::from_secs(120)).await;
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::KeptUp), "{t:?}");
    let r = t.results.unwrap();
    assert!(r.final_lag.is_some(), "{r:?}");
    lab.delete_namespace(&ns).await;
}

/// Item 4: a flag the image's version lacks (here `--cuda`, removed in 4.0; the image's
/// version is unknown at admission) makes agave-validator exit, and the trial says why.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_flag_the_images_version_lacks_makes_the_validator_exit_and_the_trial_say_why() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "badflag",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "template": {"agave": {"image": "anzaxyz/agave:stable"}, "extraArgs": ["--cuda"]},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "badflag", Duration::from_secs(120)).await;
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::Crashed), "{t:?}");
    let message = t.message.unwrap();
    assert!(
        message.contains("exit code 1") && message.contains("Found argument '--cuda'"),
        "{message}"
    );
    lab.delete_namespace(&ns).await;
}

/// Item 5: a PodMonitor the cluster's Prometheus does not select is never scraped; the
/// trial ends saying so, naming the PodMonitor and the Prometheus.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_pod_monitor_prometheus_does_not_select_ends_the_trial_naming_it() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "unselected",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "metrics": {"podMonitorLabels": {"valtune.dev/lab-unselected": "true"}},
            "trial": {"warmup": {"timeout": "2m"}},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "unselected", Duration::from_secs(90)).await;
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::MetricsUnavailable), "{t:?}");
    let message = t.message.unwrap();
    assert!(
        message.contains(&format!("PodMonitor {ns}/unselected")),
        "{message}"
    );
    assert!(message.contains(&lab.state.prometheus_url), "{message}");
    lab.delete_namespace(&ns).await;
}

/// Item 7: a node without the kernel settings and limits Agave needs ends the trial
/// NodeNotPrepared, naming what is missing.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_unprepared_node_ends_the_trial_naming_what_is_missing() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "unprepared",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "template": {"placement": {
                "nodeSelector": {"valtune.dev/lab-pool": "unprepared"},
                "tolerations": tolerating("valtune.dev/lab-pool"),
            }},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "unprepared", Duration::from_secs(90)).await;
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::NodeNotPrepared), "{t:?}");
    assert_eq!(t.phase, TrialPhase::Failed);
    let message = t.message.unwrap();
    for missing in [
        "node bm-raw",
        "vm.max_map_count is 65530 (needs 1000000)",
        "net.core.rmem_max is 212992",
        "net.core.wmem_max is 212992",
    ] {
        assert!(message.contains(missing), "{missing}: {message}");
    }
    assert!(
        !message.contains("nofile"),
        "the open files limit was enough: {message}"
    );
    lab.delete_namespace(&ns).await;
}

/// Item 9: a pod the API server refuses (a toleration key that is no label key, which the
/// CRD cannot check) ends the trial Failed with the API server's words, at once.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_pod_the_api_server_refuses_ends_the_trial_with_its_message() {
    let lab = lab().await;
    let started = std::time::Instant::now();
    let (ns, _op) = start_experiment(
        &lab,
        "refused",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "template": {"placement": {"tolerations": tolerating("not a label key!")}},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "refused", Duration::from_secs(60)).await;
    assert!(started.elapsed() < Duration::from_secs(60));
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::Invalid), "{t:?}");
    let message = t.message.unwrap();
    assert!(
        message.contains("the API server refused applying pod"),
        "{message}"
    );
    assert!(message.contains("spec.tolerations[1].key"), "{message}");
    lab.delete_namespace(&ns).await;
}

/// The paper's window: from the first transaction processed, catch-up included.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_window_can_start_at_the_first_execution_as_the_paper_measured() {
    let lab = lab().await;
    let (ns, _op) = start_experiment(
        &lab,
        "firstexec",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "trial": {"measurement": {"duration": "20s", "from": "firstExecution"}},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "firstexec", Duration::from_secs(120)).await;
    let t = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(t.outcome, Some(TrialOutcome::KeptUp), "{t:?}");
    let first = t.first_execution_at.clone().unwrap().0;
    let caught = t.caught_up_at.clone().unwrap().0;
    assert_eq!(t.window_start.unwrap().0, first);
    // Times are kept to the second and, at the lab's 720x, catching up can take less.
    assert!(caught >= first, "catching up happened inside the window");
    let r = t.results.unwrap();
    assert!(
        r.catch_up_seconds.unwrap() > 0.0 && r.startup_seconds.is_some(),
        "{r:?}"
    );
    lab.delete_namespace(&ns).await;
}
