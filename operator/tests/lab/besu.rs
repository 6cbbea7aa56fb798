//! Besu in the lab (issue 11, seed 004): the example's allocator x MALLOC_ARENA_MAX x heap
//! sweep to its table; Teku wired over the Engine API with the generated JWT Secret; an
//! allocator the image lacks; a heap too small; a heap that makes Besu fall behind.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use valtune::api::ValidatorExperiment;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::{TrialOutcome, ValidatorTrial};
use valtune::clients::besu::profile::{BLOCKS, P50, P95, P99};
use valtune::results::dataset::Dataset;

use crate::common::{
    Lab, Operator, experiments, figure, lab, merge, refusals, trials, wait_finished, yaml_file,
};

const EXAMPLE: &str = "manifests/examples/besu-allocator-heap-sweep.yaml";

/// The example as the lab runs it (compressed), renamed, in its own namespace with its
/// own operator, with a merge patch.
async fn start(lab: &Lab, name: &str, patch: Value) -> (String, Operator) {
    let ns = lab.namespace(name).await;
    let op = lab.start_operator(&ns);
    let mut v = merge(&crate::common::example(EXAMPLE), &patch);
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&Default::default(), &vx).await.unwrap();
    (ns, op)
}

/// One point: the example's template with these sweep values.
fn one_point(sweep: Value) -> Value {
    json!({"spec": {"sweep": merge(&json!({"allocator": null, "mallocArenaMax": null, "heap": null}), &sweep),
                    "trial": {"measurement": {"duration": "30s"}}}})
}

fn max_rss(t: &ValidatorTrial) -> f64 {
    t.status
        .as_ref()
        .and_then(|s| s.results.as_ref())
        .and_then(|r| r.max_rss_gib)
        .unwrap()
}

fn outcome_and_message(t: &ValidatorTrial) -> (Option<TrialOutcome>, String) {
    let s = t.status.clone().unwrap_or_default();
    (s.outcome, s.message.unwrap_or_default())
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_example_runs_to_completion_with_the_seeds_shape() {
    let lab = lab().await;
    let (ns, _op) = start(&lab, "besu-example", json!({})).await;
    let done = wait_finished(&lab, &ns, "besu-example", Duration::from_secs(600)).await;
    let ts = trials(&lab, &ns).await;
    assert_eq!(ts.len(), 8);
    let st = done.status.clone().unwrap();
    assert_eq!(st.phase, ExperimentPhase::Succeeded, "{st:?}");
    for t in &ts {
        let (outcome, message) = outcome_and_message(t);
        assert_eq!(outcome, Some(TrialOutcome::KeptUp), "{message}");
        // The seed's recommended configuration: p95 about 250 ms, p99 about 500 ms.
        let (p50, p95, p99) = (figure(t, P50), figure(t, P95), figure(t, P99));
        assert!(p50 < p95 && p95 < p99, "{p50} {p95} {p99}");
        assert!(
            (180.0..360.0).contains(&p95),
            "p95 {p95} ({})",
            t.spec.point.describe()
        );
        assert!((350.0..750.0).contains(&p99), "p99 {p99}");
        // Every block of 12 hours, not one a scrape: about 3,600 (minus missed slots).
        assert!(figure(t, BLOCKS) > 3000.0, "{}", figure(t, BLOCKS));
    }
    let rss = |allocator: &str, arenas: &str, heap: &str| {
        ts.iter()
            .find(|t| {
                let s = &t.spec.point.settings;
                s["allocator"] == allocator && s["mallocArenaMax"] == arenas && s["heap"] == heap
            })
            .map(max_rss)
            .unwrap()
    };
    for heap in ["5Gi", "8Gi"] {
        // jemalloc about 40% leaner than glibc's malloc with its default arenas ...
        let saving = 1.0 - rss("jemalloc", "96", heap) / rss("glibc", "96", heap);
        assert!(
            (0.3..0.5).contains(&saving),
            "{heap}: jemalloc saves {saving}"
        );
        // ... and two arenas close most of the gap.
        assert!(rss("glibc", "2", heap) < 0.7 * rss("glibc", "96", heap));
    }
    // The report reads like the seed's table, and the recommendation has the lowest p95.
    let client = valtune::clients::client_for(&done.spec.template).unwrap();
    let table = valtune::report::table(
        &Dataset::from_trials(&done.spec.sweep, &ts),
        &client.report(&done.spec.template, &done.spec.sweep),
    );
    eprintln!("{table}");
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("P50 ms  P95 ms  P99 ms  MAX RSS GiB"),
        "{table}"
    );
    // The report: glibc's malloc with 96 arenas the highest RSS bar, every p95 near 250 ms.
    let fig = crate::report::write(&lab, &done, &ts);
    let top = &fig.tallest("max-rss-gib").point;
    assert!(top.contains("glibc") && top.contains("96"), "{top}");
    assert!(
        fig.summary("p95-ms")
            .bars
            .iter()
            .all(|b| (180.0..360.0).contains(&b.mean))
    );
    let rec = st.recommendation.expect("a recommendation");
    assert!(
        rec.reason.contains("lowest block processing p95"),
        "{}",
        rec.reason
    );
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn teku_drives_besu_over_the_engine_api_with_the_generated_jwt() {
    let lab = lab().await;
    let (ns, _op) = start(
        &lab,
        "besu-wired",
        one_point(json!({"allocator": ["jemalloc"]})),
    )
    .await;
    // The Secret both containers mount: 64 hex characters, one per experiment.
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = crate::common::wait_for("the trial's pod", Duration::from_secs(60), || async {
        pods.list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .pop()
            .ok_or_else(|| "no pod yet".to_string())
    })
    .await;
    let secret = secrets.get("besu-wired-engine-jwt").await.unwrap();
    let jwt = String::from_utf8(secret.data.unwrap()["jwt.hex"].0.clone()).unwrap();
    assert_eq!(jwt.len(), 64);
    assert!(jwt.chars().all(|c| c.is_ascii_hexdigit()));
    let spec = pod.spec.unwrap();
    let teku = spec
        .init_containers
        .unwrap()
        .into_iter()
        .find(|c| c.name == "teku")
        .unwrap();
    let besu = spec
        .containers
        .into_iter()
        .find(|c| c.name == "besu")
        .unwrap();
    let engine = besu
        .ports
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("engine"))
        .unwrap();
    let teku_args = teku.args.unwrap();
    assert!(teku_args.contains(&format!(
        "--ee-endpoint=http://127.0.0.1:{}",
        engine.container_port
    )));
    let besu_args = besu.args.unwrap();
    assert!(besu_args.contains(&format!("--engine-rpc-port={}", engine.container_port)));
    let secret_file = |args: &[String], flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("{flag}=")))
            .map(str::to_string)
            .unwrap()
    };
    assert_eq!(
        secret_file(&teku_args, "--ee-jwt-secret-file"),
        secret_file(&besu_args, "--engine-jwt-secret")
    );
    for mounts in [teku.volume_mounts.unwrap(), besu.volume_mounts.unwrap()] {
        assert!(mounts.iter().any(|m| m.name == "engine-jwt"));
    }
    // Driven by Teku, Besu syncs and imports every block: the trial keeps up.
    wait_finished(&lab, &ns, "besu-wired", Duration::from_secs(300)).await;
    let t = trials(&lab, &ns).await.remove(0);
    let (outcome, message) = outcome_and_message(&t);
    assert_eq!(outcome, Some(TrialOutcome::KeptUp), "{message}");
    assert!(figure(&t, BLOCKS) > 1000.0);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_heap_the_live_set_nearly_fills_falls_behind_by_blocks() {
    let lab = lab().await;
    let (ns, _op) = start(
        &lab,
        "besu-behind",
        json!({"spec": {"sweep": {"allocator": null, "mallocArenaMax": null, "heap": ["2800Mi"]}}}),
    )
    .await;
    wait_finished(&lab, &ns, "besu-behind", Duration::from_secs(300)).await;
    let t = trials(&lab, &ns).await.remove(0);
    let (outcome, message) = outcome_and_message(&t);
    assert_eq!(outcome, Some(TrialOutcome::FellBehind), "{message}");
    let st = t.status.unwrap();
    // Caught up after the sync, then garbage collection made every block slower than the
    // slot: blocks behind the head at the window's end.
    assert!(st.caught_up_at.is_some());
    let r = st.results.unwrap();
    assert!(r.final_lag.unwrap() > 50.0, "{r:?}");
    assert_eq!(r.kept_up, Some(false));
    lab.delete_namespace(&ns).await;
}

/// (what is wrong, merge patch on the example, field the error names, text it says)
fn invalid_cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let besu = |b: Value| json!({"spec": {"template": {"besu": b}}});
    vec![
        (
            "flat-db healing on a version before the flag",
            besu(json!({"image": "hyperledger/besu:23.4.4", "flatDbHealing": true})),
            "spec.template.besu.flatDbHealing",
            "this Besu version has no flat-db healing flag: it exists from 23.7.0",
        ),
        (
            "flat-db healing with the version unknown",
            besu(json!({"image": "hyperledger/besu:latest", "flatDbHealing": true})),
            "spec.template.besu.flatDbHealing",
            "set template.besu.version",
        ),
        (
            "flat-db healing on Forest",
            besu(json!({"flatDbHealing": false, "dataStorageFormat": "FOREST"})),
            "spec.template.besu.flatDbHealing",
            "flatDbHealing is a Bonsai setting",
        ),
        (
            "an allocator sweep before BESU_USING_JEMALLOC",
            besu(json!({"image": "hyperledger/besu:24.10.0"})),
            "spec.sweep.allocator",
            "this Besu version has no allocator: it exists from 24.12.0",
        ),
        (
            "hoodi before Besu knew it",
            json!({"spec": {"template": {"besu": {"image": "hyperledger/besu:25.1.0", "network": "hoodi"}},
                   "sweep": {"allocator": null}}}),
            "spec.template.besu.network",
            "this Besu version has no hoodi network: it exists from 25.3.0",
        ),
        (
            "a heap as large as the container",
            json!({"spec": {"sweep": {"heap": ["8Gi", "32Gi"]}}}),
            "spec.sweep.heap",
            "every heap must be below the container's memory",
        ),
        (
            "a tuned heap as large as the container",
            json!({"spec": {"sweep": {"heap": null}, "template": {"tuning": {"heap": "32Gi"}}}}),
            "spec.template.tuning.heap",
            "template.tuning.heap must be below the container's memory",
        ),
        (
            "a tuned allocator before BESU_USING_JEMALLOC",
            json!({"spec": {"sweep": {"allocator": null}, "template": {"besu": {"image": "hyperledger/besu:24.10.0"}, "tuning": {"allocator": "glibc"}}}}),
            "spec.template.tuning.allocator",
            "this Besu version has no allocator: it exists from 24.12.0",
        ),
        (
            "a tuned program cache size",
            json!({"spec": {"template": {"tuning": {"programCacheEntries": 512}}}}),
            "spec.template.tuning.programCacheEntries",
            "Besu has no program cache",
        ),
        (
            "an option valtune sets, again",
            json!({"spec": {"template": {"extraArgs": ["--metrics-port=9000"]}}}),
            "spec.template.extraArgs",
            "Besu refuses one given twice",
        ),
        (
            "no data volume",
            json!({"spec": {"template": {"storage": null}}}),
            "spec.template.storage",
            "Besu needs a data volume",
        ),
        (
            "two sidecars on one port",
            besu(json!({"blockTimes": {"port": 9545}})),
            "spec.template.besu",
            "ports share the pod's network and must differ",
        ),
    ]
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn besu_settings_a_version_cannot_honour_are_refused_with_the_field_and_the_fix() {
    let lab = lab().await;
    let ns = lab.namespace("besu-admission").await;
    let api = experiments(&lab.client, &ns);
    let failures = refusals(&api, &yaml_file(EXAMPLE), invalid_cases()).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
