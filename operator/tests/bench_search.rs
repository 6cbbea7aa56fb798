//! `make bench-search`: the quickstart's question at 64 GiB resolution, 23 sizes from 128Gi
//! to 1536Gi on 3 nodes, answered by the bisection (manifests/examples/agave-ram-bisection.yaml
//! with this sweep) and by a grid of the same sizes, one after the other on a lab of their
//! own. For each: the answer, the trials run, node-hours and wall-clock. Node-hours are
//! the time a trial's pod occupied a node (scheduled and not yet stopped, polled every
//! second), wall-clock from the experiment's creation to its end; both in simulated hours
//! (the lab's seconds times its time scale). It prints them and writes
//! `target/bench/search.txt`. Issue 20's bar: the same answer, the bisection's node-hours
//! at most a third of the grid's (goal a fifth), its wall-clock at most half.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use valtune::api::ValidatorExperiment;
use valtune::api::experiment::ExperimentPhase;

mod bench_lab;

/// What one strategy cost.
struct Run {
    answer: String,
    trials: usize,
    node_hours: f64,
    wall_hours: f64,
    outcomes: BTreeMap<String, Vec<String>>,
}

fn sizes() -> Vec<String> {
    (0..23).map(|i| format!("{}Gi", 128 + 64 * i)).collect()
}

async fn run(lab: &bench_lab::BenchLab, name: &str, bisection: bool) -> Run {
    let client = lab.client.clone();
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let mut v = lab.example("manifests/examples/agave-ram-bisection.yaml", name);
    v["spec"]["sweep"] = json!({"memory": sizes()});
    if !bisection {
        v["spec"].as_object_mut().unwrap().remove("strategy");
    }
    let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
    let api = Api::<ValidatorExperiment>::namespaced(client.clone(), name);
    let pods = Api::<Pod>::namespaced(client.clone(), name);
    api.create(&PostParams::default(), &vx).await.unwrap();
    let started = Instant::now();
    let mut occupied = 0.0;
    let mut last = Instant::now();
    let vx = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let on_nodes = pods
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|p| {
                        let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                        bound && matches!(phase, Some("Pending" | "Running"))
                    })
                    .count()
            })
            .unwrap_or(0);
        occupied += on_nodes as f64 * last.elapsed().as_secs_f64();
        last = Instant::now();
        let vx = api.get(name).await.unwrap();
        if matches!(
            vx.status.as_ref().map(|s| s.phase),
            Some(ExperimentPhase::Succeeded | ExperimentPhase::Failed)
        ) {
            break vx;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "{name} did not finish in an hour"
        );
    };
    let scale = lab.state.time_scale / 3600.0;
    let trials = Api::<valtune::api::ValidatorTrial>::namespaced(client, name)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let mut outcomes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &trials {
        let s = t.status.clone().unwrap_or_default();
        outcomes
            .entry(t.spec.point.memory.clone().unwrap_or_default())
            .or_default()
            .push(s.outcome.map(|o| format!("{o:?}")).unwrap_or("-".into()));
    }
    let st = vx.status.unwrap();
    Run {
        answer: st
            .recommendation
            .map(|r| r.summary)
            .unwrap_or_else(|| format!("none ({:?})", st.phase)),
        trials: trials.len(),
        node_hours: occupied * scale,
        wall_hours: started.elapsed().as_secs_f64() * scale,
        outcomes,
    }
}

#[tokio::test]
#[ignore = "a benchmark: run `make bench-search`"]
async fn bench_search() {
    let lab = bench_lab::up("search", &bench_lab::topology(3, "2Ti")).await;
    lab.spawn_operator();
    let bisection = run(&lab, "bisection", true).await;
    let grid = run(&lab, "grid", false).await;

    let mut report = format!(
        "valtune bench-search: the least memory that keeps up, 23 sizes (128Gi..1536Gi by 64Gi), 3 nodes, time scale {}x; hours are simulated\n\n",
        lab.state.time_scale
    );
    report.push_str(&format!(
        "{:<10} {:<14} {:>6} {:>11} {:>11}\n",
        "strategy", "answer", "trials", "node-hours", "wall-clock"
    ));
    for (name, r) in [("bisection", &bisection), ("grid", &grid)] {
        report.push_str(&format!(
            "{name:<10} {:<14} {:>6} {:>10.1}h {:>10.1}h\n",
            r.answer, r.trials, r.node_hours, r.wall_hours
        ));
    }
    report.push_str(&format!(
        "\nbisection / grid: node-hours {:.2} (bar <= 0.33, goal 0.20), wall-clock {:.2} (bar <= 0.50); same answer: {}\n",
        bisection.node_hours / grid.node_hours,
        bisection.wall_hours / grid.wall_hours,
        bisection.answer == grid.answer
    ));
    report.push_str("\nbisection's trials by size: ");
    for (m, o) in &bisection.outcomes {
        report.push_str(&format!("{m} {}; ", o.join(",")));
    }
    report.push('\n');
    println!("\n{report}");
    std::fs::write(bench_lab::repo().join("target/bench/search.txt"), &report).unwrap();
    lab.down();
    assert_eq!(bisection.answer, grid.answer, "{report}");
}
