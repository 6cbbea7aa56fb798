//! Agave's other experiments (issue: program cache sizes, banking threads with GPU
//! signature verification): the examples run in the lab to completion with the seeds'
//! shape, and a GPU trial fails as a real cluster would make it fail.

use std::time::Duration;

use serde_json::json;
use valtune::api::trial::{TrialOutcome, ValidatorTrial};
use valtune::results::dataset::Dataset;

use crate::common::{
    create, example_as as example, figure, lab, merge, start_experiment, trials, wait_finished,
};

fn by_entries(ts: &[ValidatorTrial], n: i32) -> &ValidatorTrial {
    ts.iter()
        .find(|t| t.spec.point.program_cache_entries == Some(n))
        .unwrap()
}

/// Section 4: misses and evictions fall with the cache's size, 2,048 entries evict (next
/// to) nothing, and the time in the program cache follows; read by Prometheus from every
/// datapoint the validator pushed.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_program_cache_example_reproduces_figure_12() {
    let lab = lab().await;
    let ns = lab.namespace("pcache").await;
    let _op = lab.start_operator(&ns);
    let vx = example(
        "manifests/examples/agave-program-cache.yaml",
        &ns,
        "pcache",
        json!({}),
    );
    create(&lab, &vx).await;
    let done = wait_finished(&lab, &ns, "pcache", Duration::from_secs(400)).await;
    let ts = trials(&lab, &ns).await;
    let layout = valtune::clients::client_for(&done.spec.template)
        .unwrap()
        .report(&done.spec.template, &done.spec.sweep);
    let table = valtune::report::table(&Dataset::from_trials(&done.spec.sweep, &ts), &layout);
    eprintln!("{table}");
    for t in &ts {
        let st = t.status.clone().unwrap();
        assert_eq!(st.outcome, Some(TrialOutcome::KeptUp), "{st:?}");
    }
    let per_batch = |n, f: &str| figure(by_entries(&ts, n), f);
    let misses = |n| per_batch(n, "programCacheMissesPerBatch");
    let evictions = |n| per_batch(n, "programCacheEvictionsPerBatch");
    let time = |n| per_batch(n, "programCacheTimeUsPerBatch");
    assert!(
        misses(512) > 3.0 * misses(1024) && misses(1024) > misses(2048),
        "{table}"
    );
    assert!((0.5..1.2).contains(&evictions(512)), "{table}");
    assert!(evictions(1024) < 0.25 && evictions(2048) < 0.01, "{table}");
    assert!(
        time(512) > 2.0 * time(1024) && time(1024) > time(2048),
        "{table}"
    );
    assert!((30_000.0..50_000.0).contains(&time(512)), "{table}");
    // Sums are over every datapoint, so they are the means times the points.
    assert!(
        per_batch(512, "programCacheMisses") > 50.0 * misses(512),
        "{table}"
    );
    assert!(table.contains("PC SAVED %") && table.contains("EVICTIONS/BATCH"));
    // The report draws it as Figures 11 and 12: misses per batch fall with the size.
    let fig = crate::report::write(&lab, &done, &ts);
    let bar = |p: &str| fig.bar("misses-batch", p).mean;
    assert!(bar("512") > 3.0 * bar("1024") && bar("1024") > bar("2048"));
    let line = |p: &str| crate::report::mean(fig.trace("programCacheMissesPerBatch", p));
    assert!(line("512") > 3.0 * line("2048"));
    let rec = done.status.unwrap().recommendation.unwrap();
    assert_eq!(rec.summary, "programCacheEntries=2048", "{rec:?}");
    lab.delete_namespace(&ns).await;
}

/// Seed 001: more banking threads, more TPS; on the CPU, verification caps it, and the
/// GPU trials land only on GPU nodes, through the RuntimeClass.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn banking_threads_raise_tps_and_a_gpu_lifts_the_verification_ceiling() {
    let lab = lab().await;
    let ns = lab.namespace("banking").await;
    let _op = lab.start_operator(&ns);
    let vx = example(
        "manifests/examples/agave-banking-threads-gpu.yaml",
        &ns,
        "banking",
        json!({"spec": {"sweep": {"threads": [{"name": "bankingThreads", "values": [4, 32]}]}}}),
    );
    create(&lab, &vx).await;
    // GPU trials may wait for one of the two GPU nodes.
    let done = wait_finished(&lab, &ns, "banking", Duration::from_secs(400)).await;
    let ts = trials(&lab, &ns).await;
    let tps = |threads: i32, verify: &str| {
        let t = ts
            .iter()
            .find(|t| {
                t.spec.point.threads["bankingThreads"] == threads
                    && t.spec.point.settings["sigverify"] == verify
            })
            .unwrap();
        let st = t.status.clone().unwrap();
        assert_eq!(st.outcome, Some(TrialOutcome::KeptUp), "{st:?}");
        let node = st.node_name.unwrap_or_default();
        assert_eq!(
            node.starts_with("gpu-"),
            verify == "gpu",
            "{verify} on {node}"
        );
        let r = st.results.unwrap();
        // Agave's metrics agent kept every point: the pod sized its budget for its banking
        // workers (SOLANA_METRICS_MAX_POINTS_PER_SECOND); with the default 4,000 a second,
        // 32 workers' 4,800 lose the last fifth of every 10 s write, TPS included.
        assert_eq!(
            r.figure("metricsPointsLost"),
            Some(0.0),
            "{threads} {verify}: {r:?}"
        );
        r.avg_tps.unwrap()
    };
    let (c4, c32, g4, g32) = (tps(4, "cpu"), tps(32, "cpu"), tps(4, "gpu"), tps(32, "gpu"));
    eprintln!("cpu {c4} -> {c32}, gpu {g4} -> {g32}");
    assert!(g32 > 1.7 * g4, "gpu {g4} -> {g32}");
    assert!(c32 > c4, "cpu {c4} -> {c32}");
    assert!(g32 > 1.2 * c32, "32 threads: cpu {c32}, gpu {g32}");
    assert!(
        (1_100.0..1_900.0).contains(&g4) && (2_600.0..4_300.0).contains(&g32),
        "the seed's 1,454 and 3,244: {g4} {g32}"
    );
    // The report's TPS per point: 32 threads on the GPU the highest bar.
    let fig = crate::report::write(&lab, &done, &ts);
    let top = &fig.tallest("avg-tps").point;
    assert!(top.contains("32") && top.contains("gpu"), "{top}");
    let rec = done.status.unwrap().recommendation.unwrap();
    assert!(rec.summary.contains("bankingThreads=32") && rec.summary.contains("gpu"));
    lab.delete_namespace(&ns).await;
}

/// A RuntimeClass the cluster lacks is refused by the API server, and the trial ends
/// Invalid quoting it. (Sigverify on GPUs with an image without perf-libs exits as
/// agave-validator does: clients/startup_tests.rs.)
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_gpu_runtime_class_the_cluster_lacks_ends_the_trial_quoting_the_api_server() {
    let lab = lab().await;
    let gpu = json!({"sigverify": "gpu"});
    let (ns, _op) = start_experiment(
        &lab,
        "noclass",
        json!({"spec": {
            "template": {"agave": merge(&json!({"image": "anzaxyz/agave:v2.1.14", "gpu": {"runtimeClassName": "nvidia-missing"}}), &gpu)},
            "sweep": {"memory": ["1Ti"]},
        }}),
    )
    .await;
    wait_finished(&lab, &ns, "noclass", Duration::from_secs(120)).await;
    let st = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(st.outcome, Some(TrialOutcome::Invalid), "{st:?}");
    let message = st.message.unwrap_or_default();
    assert!(message.contains("RuntimeClass"), "{message}");
    lab.delete_namespace(&ns).await;
}
