//! nodeos trials (seed 002) against the lab: the example reproduces the seed's shape and
//! the report states the working set; what cannot run is refused at admission or ends as
//! Kubernetes would end it (Unschedulable: lifecycle.rs, with the other reasons).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use valtune::api::ValidatorExperiment;
use valtune::api::trial::{TrialOutcome, TrialPhase, ValidatorTrial};
use valtune::results::dataset::Dataset;

use crate::common::{Lab, experiments, lab, merge, refusals, trials, wait_finished, yaml_file};

const EXAMPLE: &str = "manifests/examples/nodeos-wax-memory-pressure.yaml";

/// The example as the lab runs it (compressed), renamed into a namespace, with a merge
/// patch. It lands on the test lab's WAX machines by its own placement: valtune selects
/// the nodes prepared for swap and the state's tmpfs.
fn example(ns: &str, name: &str, patch: Value) -> Value {
    let mut v = merge(&crate::common::example(EXAMPLE), &patch);
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    v
}

async fn run(lab: &Lab, name: &str, patch: Value, timeout: Duration) -> Vec<ValidatorTrial> {
    let ns = lab.namespace(name).await;
    let _op = lab.start_operator(&ns);
    let vx: ValidatorExperiment = serde_json::from_value(example(&ns, name, patch)).unwrap();
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), &vx).await.unwrap();
    wait_finished(lab, &ns, name, timeout).await;
    let ts = trials(lab, &ns).await;
    lab.delete_namespace(&ns).await;
    ts
}

fn hog(t: &ValidatorTrial) -> String {
    t.spec.point.settings["memoryPressure"].clone()
}

fn status(t: &ValidatorTrial) -> valtune::api::ValidatorTrialStatus {
    t.status.clone().unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_example_reproduces_the_seed_and_the_report_states_the_working_set() {
    let lab = lab().await;
    let ns = lab.namespace("wax").await;
    let _op = lab.start_operator(&ns);
    let vx: ValidatorExperiment = serde_json::from_value(example(&ns, "wax", json!({}))).unwrap();
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), &vx).await.unwrap();
    // While it runs: the pods share one Burstable 16Gi budget on swap-prepared nodes.
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    crate::common::wait_for("the trial pods", Duration::from_secs(60), || async {
        let list = pods
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.len() < 3 {
            return Err(format!("{} pods", list.items.len()));
        }
        for p in &list.items {
            let qos = p.status.as_ref().and_then(|s| s.qos_class.clone());
            assert_eq!(
                qos.as_deref(),
                Some("Burstable"),
                "swap needs a Burstable pod"
            );
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
            if node.is_none_or(|n| !n.starts_with("wax-")) {
                return Err("not scheduled yet".into());
            }
        }
        Ok(())
    })
    .await;
    let done = wait_finished(&lab, &ns, "wax", Duration::from_secs(300)).await;
    let ts = trials(&lab, &ns).await;
    let by: BTreeMap<String, &ValidatorTrial> = ts.iter().map(|t| (hog(t), t)).collect();
    let outcome = |h: &str| status(by[h]).outcome;
    let results = |h: &str| status(by[h]).results.clone().unwrap_or_default();
    assert_eq!(
        outcome("0"),
        Some(TrialOutcome::KeptUp),
        "{:?}",
        status(by["0"])
    );
    assert_eq!(
        outcome("6Gi"),
        Some(TrialOutcome::KeptUp),
        "{:?}",
        status(by["6Gi"])
    );
    assert_eq!(
        outcome("8Gi"),
        Some(TrialOutcome::FellBehind),
        "{:?}",
        status(by["8Gi"])
    );
    for h in ["0", "6Gi", "8Gi"] {
        assert_eq!(status(by[h]).phase, TrialPhase::Succeeded);
        // nodeos' process group is nodeos alone: its EOS VM OC monitor and trampoline
        // (its children, named oc-*) stay out of its RSS, faults and writes.
        let t = by[h];
        let st = status(t);
        let end = st.window_end.clone().unwrap().0.as_second();
        let w = end - st.window_start.clone().unwrap().0.as_second();
        let q = format!(
            "max(max_over_time(namedprocess_namegroup_num_procs{{namespace=\"{ns}\",pod=\"{}-1\",groupname=\"nodeos\"}}[{w}s]))",
            t.metadata.name.clone().unwrap()
        );
        let procs = crate::firedancer::query(&lab.state.prometheus_url, &q, end).await;
        assert_eq!(procs, Some(1.0), "{h}: {q}");
    }
    // The seed's figures: ~35 blocks/s of resync, 2 blocks/s in sync, heavy swapping
    // with the 6 GiB hog, about one block a second with the 8 GiB one.
    let calm = results("0");
    let resync = calm.figure("catchUpBlocksPerSecond").unwrap();
    assert!((28.0..42.0).contains(&resync), "resync {resync}");
    for h in ["0", "6Gi"] {
        let bps = results(h).figure("blocksPerSecond").unwrap();
        assert!((1.8..2.2).contains(&bps), "{h}: {bps} blocks/s");
        assert!(results(h).final_lag.unwrap() <= 120.0);
    }
    let behind = results("8Gi");
    assert!(
        behind.figure("blocksPerSecond").unwrap() < 1.5,
        "{behind:?}"
    );
    assert!(behind.final_lag.unwrap() > 10_000.0, "{behind:?}");
    let swap0 = calm.figure("maxSwapGiB").unwrap();
    let swap6 = results("6Gi").figure("maxSwapGiB").unwrap();
    assert!(
        (15.0..20.0).contains(&swap0) && swap6 > swap0 + 4.0,
        "{swap0} {swap6}"
    );
    let f0 = calm.major_faults_per_second.unwrap();
    let f6 = results("6Gi").major_faults_per_second.unwrap();
    assert!(f6 > 10.0 * f0, "faults {f0} -> {f6}");
    assert!(calm.max_rss_gib.unwrap() < 16.0);
    // valtune report's conclusion, as the seed drew it.
    let client = valtune::clients::client_for(&ts[0].spec.template).unwrap();
    let notes = client.report_notes(&ts);
    assert_eq!(
        notes,
        vec![
            "active working set about 16 GiB - 6 GiB = 10 GiB (the largest memory pressure that kept up on a 16 GiB budget; 8 GiB FellBehind)"
        ]
    );
    let table = valtune::report::table(
        &Dataset::from_trials(&vx.spec.sweep, &ts),
        &client.report(&vx.spec.template, &vx.spec.sweep),
    );
    assert!(
        table.contains("CATCH-UP blk/s") && table.contains("MAX SWAP GiB"),
        "{table}"
    );
    // The report draws the seed's pressure: more swap and major faults with the 6 GiB hog.
    let fig = crate::report::write(&lab, &done, &ts);
    let bar = |f: &str, p: &str| fig.bar(f, p).mean;
    assert!(bar("max-swap-gib", "6Gi") > bar("max-swap-gib", "0") + 4.0);
    let faults = |p: &str| crate::report::mean(fig.trace("majorFaults", p));
    assert!(
        faults("6Gi") > 10.0 * faults("0"),
        "{} {}",
        faults("0"),
        faults("6Gi")
    );
    lab.delete_namespace(&ns).await;
}

/// The kubelet grants swap by the node: a 2Gi request on a 63Gi machine with 256Gi of
/// swap gets 8.1 GiB, less than the 35 GiB the state may take beyond its 16Gi. The trial
/// ends NodeNotPrepared as soon as its pod is bound, before it measures (without the
/// check the kernel OOM-kills nodeos while it loads the state).
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_node_that_grants_too_little_swap_ends_the_trial_before_it_measures() {
    let lab = lab().await;
    let ts = run(
        &lab,
        "wax-smallswap",
        json!({"spec": {
            "template": {"resources": {"memory": "2Gi"}},
            "sweep": {"memoryPressure": ["0"]},
            "trial": {"retries": 0},
        }}),
        Duration::from_secs(120),
    )
    .await;
    let s = status(&ts[0]);
    assert_eq!(s.phase, TrialPhase::Failed, "{s:?}");
    assert_eq!(s.outcome, Some(TrialOutcome::NodeNotPrepared), "{s:?}");
    assert!(s.window_start.is_none(), "nothing measured: {s:?}");
    let message = s.message.unwrap_or_default();
    for text in [
        "the kubelet grants nodeos 8.1 GiB of swap (LimitedSwap: request 2Gi / node memory 63Gi x node swap 256Gi)",
        "the state may need 35.0 GiB beyond the memory limit",
        "raise template.resources.memory (the request) to at least 9Gi on this node",
    ] {
        assert!(message.contains(text), "{text}: {message}");
    }
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn what_nodeos_or_kubernetes_would_refuse_is_refused_at_admission() {
    let lab = lab().await;
    let ns = lab.namespace("wax-admission").await;
    let api = experiments(&lab.client, &ns);
    let disk = json!({"state": {"medium": "disk", "hostPath": null}});
    let cases = [
        (
            "locked without the IPC_LOCK opt-in",
            json!({"spec": {"template": {"nodeos": disk}, "sweep": {"databaseMapMode": ["mapped", "locked"]}}}),
            "spec.template.nodeos.allowMemoryLock",
            "set template.nodeos.allowMemoryLock: true",
        ),
        (
            "a tmpfs state larger than the memory limit",
            json!({"spec": {"template": {"nodeos": {"state": {"medium": "memory", "hostPath": null}}}}}),
            "spec.template.nodeos.state.medium",
            "never swaps (the kubelet mounts it noswap since Kubernetes 1.30)",
        ),
        (
            "a hog that cannot fit beside an unswappable state",
            json!({"spec": {
                "template": {"nodeos": {"chainStateDbSizeMb": 8192, "state": {"medium": "memory", "hostPath": null}}},
                "sweep": {"memoryPressure": ["6Gi"]},
            }}),
            "spec.sweep.memoryPressure",
            "the kernel OOM-kills the hog",
        ),
        (
            "heap on tmpfs, which chainbase refuses",
            json!({"spec": {"sweep": {"databaseMapMode": ["heap"]}}}),
            "spec.template.nodeos.state.medium",
            "We recommend storing the state db file on tmpfs only when database-map-mode=mapped",
        ),
        (
            "swap without a request below the limit",
            json!({"spec": {"template": {"resources": {"memory": "16Gi"}}}}),
            "spec.template.nodeos.swap",
            "swap needs a Burstable pod",
        ),
        (
            "a hog as large as the memory",
            json!({"spec": {"sweep": {"memoryPressure": ["16Gi"]}}}),
            "spec.sweep.memoryPressure",
            "leaves nodeos no memory",
        ),
        (
            "a tuned hog as large as the memory",
            json!({"spec": {"sweep": {"memoryPressure": null}, "template": {"tuning": {"memoryPressure": "16Gi"}}}}),
            "spec.template.tuning.memoryPressure",
            "leaves nodeos no memory",
        ),
        (
            "a tuned heap mode on tmpfs",
            json!({"spec": {"template": {"tuning": {"databaseMapMode": "heap"}}}}),
            "spec.template.nodeos.state.medium",
            "We recommend storing the state db file on tmpfs only when database-map-mode=mapped",
        ),
        (
            "a snapshot and a genesis",
            json!({"spec": {"template": {"nodeos": {"genesisJson": "{}"}}}}),
            "spec.template.nodeos.genesisJson",
            "--snapshot is incompatible with --genesis-json",
        ),
        (
            "leap 4",
            json!({"spec": {"template": {"nodeos": {"image": "waxteam/waxnode:v4.0.6wax01"}}}}),
            "spec.template.nodeos.version",
            "leap 5.x or spring 1.x",
        ),
        (
            "hugepages with the mapped mode",
            json!({"spec": {"template": {"resources": {"hugepages1Gi": 48}}}}),
            "spec.template.resources",
            "uses hugepages only in databaseMapMode heap or locked",
        ),
    ];
    let mut base = merge(&yaml_file(EXAMPLE), &json!({}));
    base["metadata"]["namespace"] = json!(ns);
    let failures = refusals(&api, &base, Vec::from(cases)).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
