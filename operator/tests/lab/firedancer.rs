//! Frankendancer in the lab (seed 003): admission of layouts, privileges (a follower is
//! privileged: its tiles' sandbox writes /proc/sys) and hugepages;
//! the guide's benchmark session naming each layout's bottleneck; fdctl's own refusals
//! (too few gigantic pages, a layout larger than its cores); metric names by version; a
//! follower measured like Agave; a bench whose network namespace lacks net.core.rmem_max
//! (Linux before 6.11) ends NodeNotPrepared with the reason.

use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use valtune::api::trial::TrialOutcome;
use valtune::api::{ValidatorExperiment, ValidatorTrial};
use valtune::results::dataset::Dataset;

use crate::common::{Lab, experiments, lab, merge, refusals, trials, wait_finished, yaml_file};

const EXAMPLE: &str = "manifests/examples/frankendancer-bench-tiles.yaml";

fn example() -> Value {
    yaml_file(EXAMPLE)
}

/// The example as the lab runs it (compressed), renamed into a namespace, with a merge
/// patch.
fn bench(ns: &str, name: &str, patch: Value) -> ValidatorExperiment {
    let mut v = merge(&crate::common::example(EXAMPLE), &patch);
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    serde_json::from_value(v).unwrap()
}

async fn create(lab: &Lab, vx: &ValidatorExperiment) {
    let ns = vx.metadata.namespace.clone().unwrap();
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), vx).await.unwrap();
}

/// (what is wrong, merge patch on the example, field the error names, text it says)
fn refused() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    let fd = |f: Value| json!({"spec": {"template": {"firedancer": f}}});
    vec![
        (
            "a layout with more tiles than the trial has cores",
            json!({"spec": {"sweep": {"threads": [{"name": "verifyTiles", "values": [4, 60]}, {"name": "bankTiles", "values": [2, 6]}]}}}),
            "spec.template.resources.cpu",
            "the largest layout needs 77 tile cores and 14 for the bench generators and senders and at least 1 for the Agave child, 92 cores in all, but a trial gets 62",
        ),
        (
            "fewer cores swept than the layout needs",
            json!({"spec": {"sweep": {"cpu": [48, 62]}}}),
            "spec.template.resources.cpu",
            "62 cores in all, but a trial gets 48",
        ),
        (
            "fewer 2 MiB pages than the tiles' stacks take",
            json!({"spec": {"template": {"resources": {"hugepages2Mi": 100}}}}),
            "spec.template.resources.hugepages2Mi",
            "the largest layout has 62 tiles, each with an 8 MiB stack in 2 MiB pages (6 each, src/disco/topo/fd_topo.c): set template.resources.hugepages2Mi to at least 372",
        ),
        (
            "no 1 GiB pages",
            json!({"spec": {"template": {"resources": {"hugepages1Gi": null}}}}),
            "spec.template.resources.hugepages1Gi",
            "Required Gigantic Pages",
        ),
        (
            "XDP without privileges",
            fd(json!({"netProvider": "xdp"})),
            "spec.template.firedancer.netProvider",
            "needs privileged: true",
        ),
        (
            "no privileges at all",
            fd(json!({"capabilities": null})),
            "spec.template.firedancer.capabilities",
            "fdctl run checks CAP_NET_RAW and CAP_SYS_ADMIN even with the socket provider",
        ),
        (
            "capabilities without SYS_ADMIN",
            fd(json!({"capabilities": ["NET_RAW", "SYS_RESOURCE"]})),
            "spec.template.firedancer.capabilities",
            "opt in with template.firedancer.capabilities",
        ),
        (
            "a capability valtune does not know",
            fd(json!({"capabilities": ["NET_RAW", "SYS_ADMIN", "SYS_MODULE"]})),
            "spec.template.firedancer.capabilities[2]",
            "Unsupported value",
        ),
        (
            "full Firedancer",
            fd(json!({"flavor": "firedancer"})),
            "spec.template.firedancer.flavor",
            "full Firedancer",
        ),
        (
            "an image whose version is not known",
            fd(json!({"image": "registry.example.com/frankendancer:latest"})),
            "spec.template.firedancer.version",
            "which is not known",
        ),
        (
            "a release older than the socket provider",
            fd(json!({"version": "0.411.20121"})),
            "spec.template.firedancer.version",
            "from v0.501.20212",
        ),
        (
            "a config key valtune sets",
            fd(json!({"config": {"layout.affinity": "auto"}})),
            "spec.template.firedancer.config",
            "this config key is valtune's",
        ),
        (
            "a tile count as a config key knob",
            json!({"spec": {"sweep": {"knobs": [{"name": "v", "configKey": "layout.verify_tile_count", "values": ["8"]}]}}}),
            "spec.sweep.knobs",
            "sweep tile counts with sweep.threads",
        ),
        (
            "execTiles on Frankendancer",
            json!({"spec": {"sweep": {"threads": [{"name": "execTiles", "values": [4]}]}}}),
            "spec.sweep.threads",
            "this Firedancer version has no execTiles: it exists from 1.0.0",
        ),
        (
            "execTiles tuned on Frankendancer",
            json!({"spec": {"template": {"tuning": {"threads": {"execTiles": 4}}}}}),
            "spec.template.tuning.threads",
            "this Firedancer version has no execTiles: it exists from 1.0.0",
        ),
        (
            "an arg knob",
            json!({"spec": {"sweep": {"knobs": [{"name": "x", "arg": "--foo", "values": ["1"]}]}}}),
            "spec.sweep.knobs",
            "Firedancer takes no arg knobs",
        ),
        (
            "bench keys on a follower",
            fd(json!({"workload": "follow"})),
            "spec.template.firedancer.workload",
            "development.bench, development.genesis, development.sandbox and development.no_clone keys are for the bench workload",
        ),
        (
            "a follower without privileged: true (its tiles' sandbox writes /proc/sys)",
            json!({"spec": {"template": {"firedancer": {"workload": "follow"}}, "sweep": {"knobs": null}}}),
            "spec.template.firedancer.privileged",
            "a follower needs privileged: true: every tile's sandbox writes /proc/sys/user/max_*_namespaces",
        ),
        (
            "the sandbox turned off on a follower",
            json!({"spec": {"template": {"firedancer": {"workload": "follow", "privileged": true, "config": {"development.sandbox": "false"}}}, "sweep": {"knobs": null}}}),
            "spec.template.firedancer.workload",
            "development.sandbox and development.no_clone keys are for the bench workload",
        ),
        (
            "running as root",
            fd(json!({"user": "root"})),
            "spec.template.firedancer.user",
            "Firedancer refuses to run as root",
        ),
        (
            "arguments",
            json!({"spec": {"template": {"extraArgs": ["--foo"]}}}),
            "spec.template.extraArgs",
            "fdctl takes its settings from its TOML config",
        ),
    ]
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn admission_refuses_layouts_privileges_and_pages_with_the_numbers() {
    let lab = lab().await;
    let ns = lab.namespace("fd-admission").await;
    let api = experiments(&lab.client, &ns);
    let failures = refusals(&api, &example(), refused()).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn results(t: &ValidatorTrial) -> valtune::api::trial::TrialResults {
    t.status.clone().unwrap().results.unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_seed_session_names_the_bottleneck_of_each_layout() {
    let lab = lab().await;
    let ns = lab.namespace("fd-seed").await;
    let _op = lab.start_operator(&ns);
    create(&lab, &bench(&ns, "fd-bench-tiles", json!({}))).await;
    let vx = wait_finished(&lab, &ns, "fd-bench-tiles", Duration::from_secs(600)).await;
    let st = vx.status.clone().unwrap();
    assert_eq!(st.trials.expected, 8);
    let all = valtune::report::sorted(trials(&lab, &ns).await, &vx.spec.sweep);
    let layout = valtune::clients::client_for(&vx.spec.template)
        .unwrap()
        .report(&vx.spec.template, &vx.spec.sweep);
    let table = valtune::report::table(&Dataset::from_trials(&vx.spec.sweep, &all), &layout);
    println!("{table}");
    let point = |v: i32, b: i32, off: &str| {
        all.iter()
            .find(|t| {
                let p = &t.spec.point;
                p.threads["verifyTiles"] == v
                    && p.threads["bankTiles"] == b
                    && p.knobs["noBlockstore"] == off
            })
            .unwrap()
    };
    for t in &all {
        let s = t.status.clone().unwrap();
        assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "{:?}", s);
    }
    let check = |v, b, off, lo: f64, hi: f64, tile: &str| {
        let t = point(v, b, off);
        let r = results(t);
        let avg = r.avg_tps.unwrap();
        assert!(
            (lo..hi).contains(&avg),
            "verify {v} bank {b} noBlockstore {off}: {avg}\n{table}"
        );
        let named = (layout.text[0].value)(&r).unwrap();
        assert!(
            named.starts_with(tile),
            "verify {v} bank {b} noBlockstore {off}: {named}\n{table}"
        );
        assert!(
            t.status
                .clone()
                .unwrap()
                .message
                .unwrap()
                .contains(&format!("bottleneck: {tile} tiles"))
        );
    };
    // The guide: stock ~63k on saturated verify tiles; 30/6 ~90k on the blockstore;
    // without it ~270k. (The bands allow for the lab's scrape jitter under load: at 720x
    // a scrape 10 ms late reads 7 simulated seconds more.)
    check(4, 2, "0", 55_000.0, 70_000.0, "verify");
    check(4, 6, "1", 55_000.0, 70_000.0, "verify");
    check(30, 6, "0", 80_000.0, 100_000.0, "store");
    check(30, 2, "1", 90_000.0, 115_000.0, "bank");
    check(30, 6, "1", 235_000.0, 300_000.0, "bank");
    let avg = |v, b, off| results(point(v, b, off)).avg_tps.unwrap();
    assert!(
        avg(4, 2, "0") < avg(30, 6, "0") && avg(30, 6, "0") < avg(30, 6, "1"),
        "{table}"
    );
    // At the blockstore's limit, shred and poh wait on it (the guide's bench6).
    let r = results(point(30, 6, "0"));
    assert!(r.figure("storeBusyPct").unwrap() > 99.9, "{r:?}");
    assert!(r.figure("shredBackpressurePct").unwrap() > 90.0, "{r:?}");
    assert!(r.figure("pohBackpressurePct").unwrap() > 70.0, "{r:?}");
    // The report draws the guide's ladder: 30/6 without the blockstore far above the rest.
    let fig = crate::report::write(&lab, &vx, &all);
    let bar = |p: &str| fig.bar("avg-tps", p).mean;
    assert_eq!(fig.tallest("avg-tps").point, "30 / 6 / 1");
    assert!(bar("4 / 2 / 0") < bar("30 / 6 / 0") && bar("30 / 6 / 0") < 0.5 * bar("30 / 6 / 1"));
    let rec = st.recommendation.unwrap();
    assert_eq!(
        rec.summary, "bankTiles=6 verifyTiles=30 noBlockstore=1",
        "{rec:?}"
    );
    assert!(
        table.contains("BOTTLENECK") && table.contains("store (99.97% busy)"),
        "{table}"
    );
    lab.delete_namespace(&ns).await;
}

/// One point of the example: its verify and bank tiles, the blockstore on or off.
fn point(verify: i32, bank: i32, off: &str) -> Value {
    json!({"spec": {"sweep": {
        "threads": [{"name": "verifyTiles", "values": [verify]}, {"name": "bankTiles", "values": [bank]}],
        "knobs": [{"name": "noBlockstore", "configKey": "development.bench.disable_blockstore_from_slot", "values": [off]}],
    }}})
}

fn one_point(off: &str) -> Value {
    point(30, 6, off)
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_bench_where_its_network_has_no_socket_buffer_limit_is_not_prepared() {
    // fd-k68 runs Linux 6.8: a pod with its own network (the bench's) has no
    // net.core.rmem_max there, which fddev's sysctl stage must read. The preflight says
    // so, with the kernel, before fddev starts.
    let lab = lab().await;
    let ns = lab.namespace("fd-kernel").await;
    let _op = lab.start_operator(&ns);
    let patch = merge(
        &one_point("1"),
        &json!({"spec": {"template": {"placement": {
            "nodeSelector": {"valtune.dev/lab-pool": "firedancer-kernel-6.8"},
            "tolerations": [
                {"key": "valtune.dev/validator", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "valtune.dev/lab-pool", "operator": "Exists", "effect": "NoSchedule"},
            ],
        }}}}),
    );
    create(&lab, &bench(&ns, "fd-kernel", patch)).await;
    wait_finished(&lab, &ns, "fd-kernel", Duration::from_secs(180)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::NodeNotPrepared), "{s:?}");
    let msg = s.message.unwrap();
    assert!(
        msg.contains("net.core.rmem_max is missing (not in the pod's own network namespace, where Linux shows it from 6.11 (kernel commit 19249c0724f2); this node runs 6.8.0-45-generic"),
        "{msg}"
    );
    lab.delete_namespace(&ns).await;
}

/// A Prometheus instant query's first value at `at`, written here independently of the
/// operator.
pub(crate) async fn query(prom: &str, q: &str, at: i64) -> Option<f64> {
    let resp: Value = reqwest::Client::new()
        .post(format!("{prom}/api/v1/query"))
        .form(&[("query", q.to_string()), ("time", at.to_string())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["status"], "success", "{q}: {resp}");
    resp["data"]["result"]
        .as_array()
        .unwrap()
        .first()
        .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
}

/// The metric names Prometheus holds for a selector in the `w` seconds before `at`.
pub(crate) async fn names(prom: &str, sel: &str, w: i64, at: i64) -> Vec<String> {
    let q = format!("count by (__name__) (last_over_time({{{sel}}}[{w}s]))");
    let resp: Value = reqwest::Client::new()
        .post(format!("{prom}/api/v1/query"))
        .form(&[("query", q), ("time", at.to_string())])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    resp["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["metric"]["__name__"].as_str().map(String::from))
        .collect()
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn metric_names_follow_the_version_of_the_image() {
    // c7473a8d80 renamed the metrics and added `_total` to counters: v0.1006 has the old
    // names, v0.1106 the new; the profile reads each by the version of its trial.
    let lab = lab().await;
    let ns = lab.namespace("fd-names").await;
    let _op = lab.start_operator(&ns);
    for (name, tag) in [("fd-old", "v0.1006.40100"), ("fd-new", "v0.1106.40201")] {
        let image = format!("registry.example.com/frankendancer:{tag}");
        let patch = merge(
            &point(4, 2, "0"),
            &json!({"spec": {"template": {"firedancer": {"image": image}}}}),
        );
        create(&lab, &bench(&ns, name, patch)).await;
    }
    for name in ["fd-old", "fd-new"] {
        wait_finished(&lab, &ns, name, Duration::from_secs(240)).await;
    }
    let p = &lab.state.prometheus_url;
    for t in trials(&lab, &ns).await {
        let s = t.status.clone().unwrap();
        assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "{s:?}");
        let r = results(&t);
        assert!((55_000.0..70_000.0).contains(&r.avg_tps.unwrap()), "{r:?}");
        assert!(r.figure("verifyBusyPct").unwrap() > 99.0, "{r:?}");
        let old = t.spec.experiment == "fd-old";
        let sel = format!(
            "namespace=\"{ns}\",pod=\"{}-1\"",
            t.metadata.name.clone().unwrap()
        );
        // What Prometheus scraped of the pod in its window (after the pod is gone, a new
        // pod may get its IP while Prometheus still scrapes it under the old pod's name).
        let end = s.window_end.clone().unwrap().0.as_second();
        let w = end - s.window_start.clone().unwrap().0.as_second();
        let has = |metric: &str| {
            let q = format!("count(last_over_time({metric}{{{sel}}}[{w}s]))");
            async move { query(p, &q, end).await.is_some() }
        };
        let names = names(p, &sel, w, end).await;
        for (metric, expected) in [
            ("bank_successful_transactions", old),
            ("tile_regime_duration_nanos", old),
            ("bank_txn_executed_total", !old),
            ("tile_regime_duration_nanos_total", !old),
        ] {
            assert_eq!(
                has(metric).await,
                expected,
                "{} {metric}: {names:?}",
                t.spec.experiment
            );
        }
    }
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_follower_keeps_up_and_is_measured_like_agave() {
    let lab = lab().await;
    let ns = lab.namespace("fd-follow").await;
    let _op = lab.start_operator(&ns);
    let vx: ValidatorExperiment = serde_json::from_value(json!({
        "apiVersion": "valtune.dev/v1alpha1",
        "kind": "ValidatorExperiment",
        "metadata": {"name": "fd-follow", "namespace": ns},
        "spec": {
            "template": {
                "firedancer": {
                    "image": "registry.example.com/frankendancer:v0.1106.40201",
                    "cluster": "mainnet-beta",
                    // Its tiles' sandbox writes /proc/sys (src/util/sandbox/fd_sandbox.c).
                    "privileged": true,
                },
                "resources": {"cpu": 32, "memory": "512Gi", "hugepages1Gi": 32, "hugepages2Mi": 512},
                "storage": [{"role": "ledger", "size": "2Ti"}, {"role": "accounts", "size": "2Ti"}],
                "placement": {
                    "nodeSelector": {"valtune.dev/lab-pool": "firedancer"},
                    "tolerations": [{"key": "valtune.dev/validator", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
            "trial": {"warmup": {"timeout": "30s"}, "measurement": {"duration": "30s"}},
            "metrics": {"scrapeInterval": "1s"},
        },
    }))
    .unwrap();
    create(&lab, &vx).await;
    wait_finished(&lab, &ns, "fd-follow", Duration::from_secs(240)).await;
    let t = trials(&lab, &ns).await.remove(0);
    let s = t.status.clone().unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "{s:?}");
    let r = results(&t);
    // Replayed transactions like an Agave follower with 512 GiB (seed 000's shape).
    assert!((3_000.0..7_000.0).contains(&r.avg_tps.unwrap()), "{r:?}");
    assert!(r.final_lag.unwrap() <= 100.0, "{r:?}");
    assert!(r.catch_up_seconds.unwrap() > 0.0, "{r:?}");
    // Its tiles: turbine shreds and the blockstore work, the leader pipeline idles.
    assert!(r.figure("shredBusyPct").unwrap() > 10.0, "{r:?}");
    assert!(r.figure("bankBusyPct").unwrap() < 5.0, "{r:?}");
    lab.delete_namespace(&ns).await;
}
