//! `make bench`: the operator's footprint on a lab of its own. N experiments of M trials
//! each (defaults 10 x 20; BENCH_EXPERIMENTS, BENCH_TRIALS, BENCH_PARALLELISM), then:
//! - the operator's API writes per trial, by resource and verb, from the API server's
//!   audit log of the operator's own user (cross-checked against the API server's
//!   `apiserver_request_total` for valtune's resources);
//! - Prometheus queries per trial, reconcile p50/p99 and peak RSS of the operator;
//! - the raw write rate of the same API server, measured by a plain client loop in the
//!   same run, and the operator's write rate as a share of it.
//!
//! It is a test only to share the lab harness; `make bench` runs it (release build).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::json;
use valtune::api::ValidatorExperiment;
use valtune::api::experiment::ExperimentPhase;
use valtune_lab::control_plane;

mod bench_lab;
use bench_lab::env_usize;

/// Writes per second a plain client loop gets from this API server (create + delete of
/// ConfigMaps, one at a time, for `for`).
async fn raw_write_rate(client: &kube::Client, ns: &str, r#for: Duration) -> f64 {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let mut writes = 0u64;
    let mut i = 0u64;
    while start.elapsed() < r#for {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("raw-{i}")),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await.unwrap();
        api.delete(&format!("raw-{i}"), &DeleteParams::default())
            .await
            .unwrap();
        writes += 2;
        i += 1;
    }
    writes as f64 / start.elapsed().as_secs_f64()
}

/// The operator user's writes in the audit log, by (resource, verb).
fn audited_writes(log: &Path) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if e["user"]["username"] != control_plane::OPERATOR_USER || e["stage"] != "ResponseComplete"
        {
            continue;
        }
        let r = &e["objectRef"];
        let mut resource = r["resource"].as_str().unwrap_or("?").to_string();
        if let Some(sub) = r["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        *out.entry((resource, e["verb"].as_str().unwrap_or("?").to_string()))
            .or_insert(0) += 1;
    }
    out
}

/// A metric family's samples from a Prometheus text page: (labels, value).
fn samples(page: &str, name: &str) -> Vec<(String, f64)> {
    page.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            Some((head.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// A quantile of a histogram from its cumulative buckets (the bucket's upper bound).
fn quantile(page: &str, name: &str, controller: &str, q: f64) -> Option<f64> {
    let buckets: Vec<(f64, f64)> = samples(page, &format!("{name}_bucket"))
        .into_iter()
        .filter(|(l, _)| l.contains(&format!("controller=\"{controller}\"")))
        .filter_map(|(l, v)| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            Some((
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                },
                v,
            ))
        })
        .collect();
    let total = buckets.iter().map(|b| b.1).fold(0.0, f64::max);
    buckets
        .iter()
        .find(|(_, count)| *count >= q * total)
        .map(|(le, _)| *le)
}

#[tokio::test]
#[ignore = "a benchmark: run `make bench`"]
async fn bench() {
    let experiments = env_usize("BENCH_EXPERIMENTS", 10);
    let per = env_usize("BENCH_TRIALS", 20);
    let parallelism = env_usize("BENCH_PARALLELISM", 1);
    let lab = bench_lab::up(
        "lab",
        &bench_lab::topology(experiments * parallelism, "1512Gi"),
    )
    .await;
    let (state, client) = (&lab.state, lab.client.clone());
    let work = bench_lab::repo().join("target/bench");

    // The API server's own write rate, before the operator starts.
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("bench-raw".into());
    ns_api.create(&PostParams::default(), &ns).await.unwrap();
    let raw = raw_write_rate(&client, "bench-raw", Duration::from_secs(10)).await;

    let listen = lab.spawn_operator();

    let memories: Vec<String> = (0..per).map(|i| format!("{}Gi", 512 + 32 * i)).collect();
    let started = Instant::now();
    for e in 0..experiments {
        let name = format!("bench-{e:02}");
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        ns_api.create(&PostParams::default(), &ns).await.unwrap();
        // As the lab runs the example, then the bench's own timings.
        let mut v = lab.example("manifests/examples/quickstart-agave-ram-sweep.yaml", &name);
        v["spec"]["sweep"] = json!({"memory": memories});
        v["spec"]["parallelism"] = json!(parallelism);
        v["spec"]["trial"] =
            json!({"warmup": {"timeout": "60s"}, "measurement": {"duration": "10s"}});
        let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
        Api::<ValidatorExperiment>::namespaced(client.clone(), &name)
            .create(&PostParams::default(), &vx)
            .await
            .unwrap();
    }
    loop {
        let mut done = 0;
        for e in 0..experiments {
            let name = format!("bench-{e:02}");
            let vx = Api::<ValidatorExperiment>::namespaced(client.clone(), &name)
                .get(&name)
                .await
                .unwrap();
            if matches!(
                vx.status.map(|s| s.phase),
                Some(ExperimentPhase::Succeeded | ExperimentPhase::Failed)
            ) {
                done += 1;
            }
        }
        if done == experiments {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the bench did not finish in an hour"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Let the last cleanups land.
    tokio::time::sleep(Duration::from_secs(10)).await;

    let trials = (experiments * per) as f64;
    let writes = audited_writes(&state.dir.join("logs/audit.log"));
    let metrics = reqwest::get(format!("http://{listen}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let queries: f64 = samples(&metrics, "valtune_prometheus_queries_total")
        .iter()
        .map(|s| s.1)
        .sum();
    let op = valtune_lab::LabState::load(&state.dir).unwrap();
    let op_pid = op.process("operator").unwrap().pid;
    let hwm = std::fs::read_to_string(format!("/proc/{op_pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    let apiserver = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    let valtune_writes: f64 = samples(&apiserver, "apiserver_request_total")
        .iter()
        .filter(|(l, _)| {
            l.contains("group=\"valtune.dev\"")
                && ["POST", "PATCH", "APPLY", "PUT", "DELETE"]
                    .iter()
                    .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .map(|s| s.1)
        .sum();

    let mut report = format!(
        "valtune bench: {experiments} experiments x {per} trials (parallelism {parallelism}, {} trials at once), {:.0}s\n\n",
        experiments * parallelism,
        elapsed
    );
    report.push_str("operator API writes per trial (audit log of its user):\n");
    let mut per_trial_total = 0.0;
    let mut leases = 0.0;
    for ((resource, verb), n) in &writes {
        let share = *n as f64 / trials;
        if resource == "leases" {
            leases += *n as f64;
        } else {
            per_trial_total += share;
        }
        report.push_str(&format!(
            "  {resource:<32} {verb:<7} {n:>6}  {share:>6.2}/trial\n"
        ));
    }
    report.push_str(&format!(
        "  total, leases apart: {per_trial_total:.2}/trial; the lease: {leases:.0} renewals in {elapsed:.0}s\n"
    ));
    let audited_valtune: u64 = writes
        .iter()
        .filter(|((r, _), _)| r.starts_with("validator"))
        .map(|(_, n)| n)
        .sum();
    report.push_str(&format!(
        "  cross-check: apiserver_request_total has {valtune_writes:.0} writes to valtune.dev resources; the audit log {audited_valtune}\n\n"
    ));
    report.push_str(&format!(
        "Prometheus queries per trial: {:.1}\n",
        queries / trials
    ));
    for c in ["experiment", "trial"] {
        let p50 = quantile(&metrics, "valtune_reconcile_duration_seconds", c, 0.5);
        let p99 = quantile(&metrics, "valtune_reconcile_duration_seconds", c, 0.99);
        report.push_str(&format!(
            "reconcile {c}: p50 <= {}, p99 <= {} (histogram bucket bounds)\n",
            p50.map(|v| format!("{:.0} ms", v * 1000.0))
                .unwrap_or("-".into()),
            p99.map(|v| format!("{:.0} ms", v * 1000.0))
                .unwrap_or("-".into())
        ));
    }
    report.push_str(&format!("operator peak RSS: {hwm}\n"));
    let op_total: f64 = writes.values().map(|n| *n as f64).sum::<f64>() - leases;
    report.push_str(&format!(
        "API server raw write rate (plain client loop, one at a time): {raw:.0} writes/s; the operator wrote {:.2} writes/s on average, {:.3}% of it\n",
        op_total / elapsed,
        100.0 * op_total / elapsed / raw
    ));
    println!("\n{report}");
    std::fs::write(work.join("report.txt"), &report).unwrap();
    lab.down();
}
