//! The walking skeleton end to end: the paper's RAM experiment (the quickstart) through
//! a real API server, scheduler, prometheus-operator and Prometheus, with only the
//! kubelet and the validator simulated.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use valtune::api::trial::{TrialOutcome, TrialPhase};
use valtune::api::{ValidatorExperiment, ValidatorTrial};

use crate::common::{Lab, lab, quickstart_with, trials, wait_finished, wait_for, wait_released};

fn experiment(ns: &str, patch: serde_json::Value) -> ValidatorExperiment {
    quickstart_with(ns, "agave-ram", patch)
}

/// A Prometheus instant query, written here independently of the operator's code.
async fn query(prom: &str, q: &str, at: i64) -> Option<f64> {
    let resp: serde_json::Value = reqwest::Client::new()
        .post(format!("{prom}/api/v1/query"))
        .form(&[("query", q.to_string()), ("time", at.to_string())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["status"], "success", "{q}: {resp}");
    let result = resp["data"]["result"].as_array().unwrap();
    result
        .first()
        .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
}

fn close(field: &str, status: Option<f64>, expected: Option<f64>) -> Result<(), String> {
    let round = |v: f64| (v * 100.0).round() / 100.0;
    match (status, expected) {
        (Some(s), Some(e)) if (s - round(e)).abs() <= 0.011 => Ok(()),
        (None, None) => Ok(()),
        (s, e) => Err(format!("{field}: status {s:?}, Prometheus {e:?}")),
    }
}

/// The figures in a trial's status equal what Prometheus answers for its window.
async fn check_against_prometheus(lab: &Lab, ns: &str, t: &ValidatorTrial) -> Result<(), String> {
    let st = t.status.clone().unwrap();
    let r = st.results.clone().ok_or("no results")?;
    let start = st.window_start.clone().unwrap().0.as_second();
    let end = st.window_end.clone().unwrap().0.as_second();
    let w = end - start;
    let pod = format!("{}-{}", t.metadata.name.clone().unwrap(), st.attempts);
    let sel = format!("namespace=\"{ns}\",pod=\"{pod}\"");
    // TPS per 1 s scrape: the replayed transactions Agave's datapoints report in it,
    // zero when none, while Prometheus scraped the pod.
    let tps = format!(
        "(sum(sum_over_time(replay_slot_stats_total_transactions{{{sel}}}[1s])) or vector(0)) / 1 and on() (max(max_over_time(up{{{sel}}}[3s])) == 1)"
    );
    let proc = format!("{sel},groupname=\"agave-validator\"");
    let rss = format!("sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"resident\"}})");
    let p = &lab.state.prometheus_url;
    let range = format!("[{w}s:1s]");
    let plain = query(p, &format!("avg_over_time(({tps}){range})"), end)
        .await
        .unwrap_or(0.0);
    let avg = query(
        p,
        &format!("avg_over_time((({tps}) <= {}){range})", 3.0 * plain),
        end,
    )
    .await;
    let max = query(p, &format!("max_over_time(({tps}){range})"), end).await;
    let zero = query(p, &format!("count_over_time((({tps}) == 0){range})"), end)
        .await
        .or(Some(0.0));
    let max_rss = query(p, &format!("max_over_time(({rss}){range})"), end)
        .await
        .map(|b| b / (1u64 << 30) as f64);
    let mut errors = Vec::new();
    // Every datapoint the validator pushed is in Prometheus with its own timestamp (the lab's
    // Agave pushes ten a second): none was flattened into the last value of a batch.
    let points = query(
        p,
        &format!("sum(count_over_time(replay_slot_stats_total_transactions{{{sel}}}[{w}s]))"),
        end,
    )
    .await
    .unwrap_or(0.0);
    if st.outcome == Some(TrialOutcome::KeptUp) && points < 8.0 * w as f64 {
        errors.push(format!("only {points} datapoints in a {w}s window"));
    }
    for (field, s, e) in [
        ("avgTps", r.avg_tps, avg),
        ("maxTps", r.max_tps, max),
        ("zeroTpsSeconds", r.zero_tps_seconds, zero),
        ("maxRssGiB", r.max_rss_gib, max_rss),
    ] {
        if let Err(e) = close(field, s, e) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_ram_sweep_reproduces_the_papers_shape_from_prometheus() {
    let lab = lab().await;
    let ns = lab.namespace("e2e").await;
    let _operator = lab.start_operator(&ns);
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), &experiment(&ns, json!({})))
        .await
        .unwrap();

    let vx = wait_finished(&lab, &ns, "agave-ram", Duration::from_secs(420)).await;
    let st = vx.status.clone().unwrap();
    assert_eq!(
        st.phase,
        valtune::api::experiment::ExperimentPhase::Succeeded,
        "{st:?}"
    );
    assert_eq!(st.trials.expected, 5);
    assert_eq!(st.trials.finished, 5);

    let by_memory: BTreeMap<String, ValidatorTrial> = trials(&lab, &ns)
        .await
        .into_iter()
        .map(|t| (t.spec.point.memory.clone().unwrap(), t))
        .collect();
    let outcome = |m: &str| by_memory[m].status.as_ref().and_then(|s| s.outcome);
    assert_eq!(outcome("128Gi"), Some(TrialOutcome::OOMKilled));
    assert_eq!(outcome("256Gi"), Some(TrialOutcome::FellBehind));
    for m in ["512Gi", "1Ti", "1400Gi"] {
        assert_eq!(outcome(m), Some(TrialOutcome::KeptUp), "{m}");
    }
    // An OOM kill is a result: the trial succeeded, with what ran until the kill.
    let oom = by_memory["128Gi"].status.clone().unwrap();
    assert_eq!(oom.phase, TrialPhase::Succeeded);
    let oom_results = oom.results.clone().unwrap();
    assert!(oom_results.measured_seconds.unwrap() > 0.0);
    assert!(oom_results.avg_tps.unwrap() < 2000.0, "{oom_results:?}");
    // The paper's shape: kept-up runs do about 4,600 TPS with peaks far above it.
    for m in ["512Gi", "1Ti", "1400Gi"] {
        let r = by_memory[m].status.clone().unwrap().results.unwrap();
        assert!((3000.0..7000.0).contains(&r.avg_tps.unwrap()), "{m}: {r:?}");
        assert!(r.max_tps.unwrap() > 2.0 * r.avg_tps.unwrap(), "{m}: {r:?}");
        assert!(r.max_rss_gib.unwrap() > 300.0, "{m}: {r:?}");
    }
    let behind = by_memory["256Gi"].status.clone().unwrap().results.unwrap();
    assert!(behind.final_lag.unwrap() > 1000.0, "{behind:?}");

    for (m, t) in &by_memory {
        if let Err(e) = check_against_prometheus(&lab, &ns, t).await {
            panic!("{m}: {e}");
        }
    }
    // Prometheus answered throughout: collection read the pushed samples' arrival rather
    // than timing out on a query it refused (prometheus/prometheus#11397), which warned
    // PrometheusUnreachable on every Agave trial.
    let events: Api<Event> = Api::namespaced(lab.client.clone(), &ns);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let notes = |reason: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| e.note.clone().unwrap_or_default())
            .collect()
    };
    let unreachable = notes("PrometheusUnreachable");
    assert!(unreachable.is_empty(), "{unreachable:?}");
    // Every trial's creation is told (not only the first one's, counted N times).
    let created = notes("TrialCreated");
    for t in by_memory.values() {
        let name = format!("trial {}:", t.name_any());
        assert!(
            created.iter().any(|n| n.contains(&name)),
            "{name} in {created:?}"
        );
    }
    let rec = st.recommendation.unwrap();
    assert_eq!(rec.summary, "memory=512Gi", "{rec:?}");
    report_draws_the_papers_figures(&lab, &ns);
    // Finished trials released their nodes: no pod or volume is left.
    wait_released(&lab, &ns, false, Duration::from_secs(60)).await;
    lab.delete_namespace(&ns).await;
}

/// `valtune report --out` on the finished sweep: figures, their data and a page, with the
/// paper's shape in the data behind them (Figure 3): 128Gi's series ends early, where the
/// kernel killed it, while 256Gi runs its window and falls behind. The directory then
/// redraws from its own files (`--from`). VALTUNE_REPORT_KEEP=DIR keeps a copy (docs).
fn report_draws_the_papers_figures(lab: &Lab, ns: &str) {
    use valtune::report::series::{Mark, read_series_csv, read_summary_csv};
    let out = std::env::temp_dir().join(format!("valtune-report-{ns}"));
    let _ = std::fs::remove_dir_all(&out);
    let valtune = env!("CARGO_BIN_EXE_valtune");
    let run = |args: &[&str]| {
        let o = std::process::Command::new(valtune)
            .args(args)
            .env("KUBECONFIG", &lab.state.kubeconfig)
            .env("PROMETHEUS_URL", &lab.state.prometheus_url)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "valtune {args:?}: {text}");
        text
    };
    let dir = out.to_str().unwrap();
    let printed = run(&["report", "agave-ram", "-n", ns, "--out", dir]);
    assert!(
        printed.contains("recommendation: memory=512Gi"),
        "{printed}"
    );
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let series = read_series_csv(&read("series.csv"), "").unwrap();
    let names: Vec<&str> = series.iter().map(|f| f.name.as_str()).collect();
    for name in ["tps", "lag", "rss", "vsz"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }
    let tps = &series[0];
    assert_eq!(tps.traces.len(), 5, "one line per trial");
    let trace = |f: &valtune::report::series::SeriesFigure, point: &str| {
        f.traces
            .iter()
            .find(|t| t.point == point)
            .unwrap_or_else(|| panic!("{point} in {}", f.name))
            .clone()
    };
    let (oom, behind) = (trace(tps, "128Gi"), trace(tps, "256Gi"));
    assert_eq!(
        (oom.mark(), behind.mark()),
        (Mark::OomKilled, Mark::FellBehind)
    );
    let (oom_end, behind_end) = (oom.end().unwrap(), behind.end().unwrap());
    assert!(
        oom_end < 0.9 * behind_end,
        "128Gi's series ends at {oom_end} s, 256Gi's at {behind_end} s"
    );
    // 256Gi falls behind over its window: its lag ends far above where it started, and
    // far above the runs that kept up.
    let lag = series.iter().find(|f| f.name == "lag").unwrap();
    let behind_lag = trace(lag, "256Gi").samples;
    let kept_lag = trace(lag, "512Gi").samples;
    let last = |s: &[(f64, f64)]| s.last().unwrap().1;
    assert!(last(&behind_lag) > 1000.0, "{behind_lag:?}");
    assert!(
        last(&behind_lag) > 10.0 * last(&kept_lag).max(1.0),
        "{kept_lag:?}"
    );
    // The bars per point carry each point's ending.
    let summaries = read_summary_csv(&read("summary.csv"), "").unwrap();
    let avg = summaries.iter().find(|f| f.name == "avg-tps").unwrap();
    let marks: Vec<(&str, Mark)> = avg
        .bars
        .iter()
        .map(|b| (b.point.as_str(), b.mark))
        .collect();
    assert_eq!(
        marks,
        [
            ("128Gi", Mark::OomKilled),
            ("256Gi", Mark::FellBehind),
            ("512Gi", Mark::KeptUp),
            ("1Ti", Mark::KeptUp),
            ("1400Gi", Mark::KeptUp)
        ]
    );
    // Every figure as SVG and PNG, and inline in the page with the table and the patch.
    let figures = series.len() + summaries.len();
    for f in series
        .iter()
        .map(|f| &f.name)
        .chain(summaries.iter().map(|f| &f.name))
    {
        for ext in ["svg", "png"] {
            let path = out.join(format!("figures/{f}.{ext}"));
            assert!(path.metadata().unwrap().len() > 1000, "{}", path.display());
        }
    }
    let html = read("index.html");
    assert_eq!(html.matches("<figure ").count(), figures);
    assert_eq!(html.matches("<svg ").count(), figures);
    for text in [
        "memory=512Gi",
        "OOMKilled",
        "<pre id=\"patch\">",
        "<table id=\"nodes\">",
        "resources:",
    ] {
        assert!(html.contains(text), "{text} not in index.html");
    }
    crate::report::browser_check(&out, figures);
    // Redrawn from the directory alone.
    std::fs::remove_dir_all(out.join("figures")).unwrap();
    std::fs::remove_file(out.join("index.html")).unwrap();
    let printed = run(&["report", "--from", dir]);
    assert!(
        printed.contains(&format!("redrew {figures} figures")),
        "{printed}"
    );
    assert_eq!(read("index.html"), html, "the same page, redrawn");
    assert!(out.join("figures/tps.png").exists());
    if let Some(keep) = std::env::var_os("VALTUNE_REPORT_KEEP") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for entry in std::fs::read_dir(out.join("figures")).unwrap() {
            let p = entry.unwrap().path();
            std::fs::copy(&p, keep.join(p.file_name().unwrap())).unwrap();
        }
        std::fs::copy(out.join("index.html"), keep.join("index.html")).unwrap();
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn deleting_an_experiment_removes_its_trials_pods_and_volumes() {
    let lab = lab().await;
    let ns = lab.namespace("delete").await;
    let _operator = lab.start_operator(&ns);
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    // Long trials, so none ends before the experiment is deleted. The lab's nodes are
    // shared with the tests running beside this one, so a trial may still wait for a node:
    // deletion must release a pending trial as well as a running one.
    let vx = experiment(
        &ns,
        json!({"spec": {"sweep": {"memory": ["512Gi", "1Ti", "1400Gi"]}, "trial": {"measurement": {"duration": "1h"}}}}),
    );
    api.create(&PostParams::default(), &vx).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(lab.client.clone(), &ns);
    wait_for(
        "three pods, one running with its volumes bound",
        Duration::from_secs(180),
        || {
            let (pods, pvcs) = (pods.clone(), pvcs.clone());
            async move {
                let pods = pods
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?
                    .items;
                let running = pods
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count();
                let bound = pvcs
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .iter()
                    .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
                    .count();
                if pods.len() == 3 && running >= 1 && bound >= 2 {
                    Ok(())
                } else {
                    Err(format!(
                        "{} pods, {running} running, {bound} bound",
                        pods.len()
                    ))
                }
            }
        },
    )
    .await;

    api.delete("agave-ram", &DeleteParams::default())
        .await
        .unwrap();
    wait_released(&lab, &ns, true, Duration::from_secs(120)).await;
    lab.delete_namespace(&ns).await;
}
