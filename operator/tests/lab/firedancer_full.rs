//! Full Firedancer in the lab (`flavor: firedancer`): admission by flavor and version,
//! its own limits and cores without an Agave child, a follower only privileged, a bench
//! only before v1.1.0 (later, its configure stages write /proc/irq, /sys and the cgroup
//! tree); the tile session on `firedancer-dev bench` naming each layout's bottleneck in
//! the names of its version; a follower measured from its own replay and repair metrics,
//! whose execrp tiles decide whether it catches up; a key its version lacks ending the
//! trial with firedancer's own message.

use std::time::Duration;

use serde_json::{Value, json};
use valtune::api::ValidatorExperiment;
use valtune::api::trial::{TrialOutcome, TrialResults, ValidatorTrial};
use valtune::results::dataset::Dataset;

use crate::common::{
    Lab, create, experiments, lab, merge, refusals, trials, wait_finished, yaml_file,
};
use crate::firedancer::{names, query};

const EXAMPLE: &str = "manifests/examples/firedancer-bench-tiles.yaml";
const NAME: &str = "fdf-bench-tiles";

fn example() -> Value {
    yaml_file(EXAMPLE)
}

/// The example as the lab runs it (compressed), renamed, with a merge patch.
fn experiment(ns: &str, name: &str, patch: Value) -> ValidatorExperiment {
    let mut v = merge(&crate::common::example(EXAMPLE), &patch);
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    serde_json::from_value(v).unwrap()
}

fn fd(f: Value) -> Value {
    json!({"spec": {"template": {"firedancer": f}}})
}

/// One layout of the example: verify and execle tiles.
fn point(verify: i32, execle: i32) -> Value {
    json!({"spec": {"sweep": {"threads": [
        {"name": "verifyTiles", "values": [verify]},
        {"name": "bankTiles", "values": [execle]},
    ]}}})
}

fn results(t: &ValidatorTrial) -> TrialResults {
    t.status.clone().unwrap().results.unwrap_or_default()
}

/// (what is wrong, merge patch on the example, field the error names, text it says)
fn refused() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    vec![
        (
            "full Firedancer with a Frankendancer release",
            fd(json!({"image": "registry.example.com/firedancer:v0.1106.40201"})),
            "spec.template.firedancer.flavor",
            "full Firedancer (the firedancer binary) exists from v1.0.0",
        ),
        (
            "Frankendancer with a full Firedancer release",
            fd(json!({"flavor": "frankendancer", "layout": null})),
            "spec.template.firedancer.version",
            "v1.0.0 and later (v1.x, v26.x) is full Firedancer: set template.firedancer.flavor: firedancer",
        ),
        (
            "full Firedancer's tiles on Frankendancer",
            fd(
                json!({"flavor": "frankendancer", "image": "registry.example.com/frankendancer:v0.1106.40201"}),
            ),
            "spec.template.firedancer.layout",
            "execTiles, gossvfTiles and signTiles are full Firedancer's tiles",
        ),
        (
            "one sign tile swept",
            json!({"spec": {"sweep": {"threads": [{"name": "signTiles", "values": [1, 2]}]}}}),
            "spec.sweep.threads",
            "full Firedancer needs at least 2 sign tiles ('layout.sign_tile_count must be >= 2'",
        ),
        (
            "one sign tile set",
            fd(json!({"layout": {"signTiles": 1}})),
            "spec.template.firedancer.layout.signTiles",
            "greater than or equal to 2",
        ),
        (
            "known validators",
            fd(json!({"knownValidators": ["5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8on"]})),
            "spec.template.firedancer.knownValidators",
            "full Firedancer has no [consensus] known_validators",
        ),
        (
            "more tiles than cores, with no Agave to count",
            json!({"spec": {"sweep": {"threads": [{"name": "verifyTiles", "values": [6, 40]}, {"name": "bankTiles", "values": [3, 6]}]}}}),
            "spec.template.resources.cpu",
            "the largest layout needs 67 tile cores and 12 for the bench generators and senders, 79 cores in all, but a trial gets 62",
        ),
        (
            "more tuned tiles than cores",
            json!({"spec": {"sweep": {"threads": null}, "template": {"tuning": {"threads": {"verifyTiles": 40, "bankTiles": 6}}}}}),
            "spec.template.resources.cpu",
            "the largest layout needs 67 tile cores and 12 for the bench generators and senders, 79 cores in all, but a trial gets 62",
        ),
        (
            "one sign tile tuned",
            json!({"spec": {"template": {"tuning": {"threads": {"signTiles": 1}}}}}),
            "spec.template.tuning.threads",
            "full Firedancer needs at least 2 sign tiles",
        ),
        (
            "the bench from v1.1.0, whose configure stages write /proc/irq, /sys and the cgroup tree",
            fd(json!({"image": "registry.example.com/firedancer:v1.1.4"})),
            "spec.template.firedancer.version",
            "firedancer-dev bench from v1.1.0 runs configure init of every stage and no flag skips one",
        ),
        (
            "a follower without privileged: true",
            fd(json!({"workload": "follow", "cluster": "testnet"})),
            "spec.template.firedancer.privileged",
            "a follower needs privileged: true",
        ),
        (
            "a follower's stacks in too few 2 MiB pages",
            json!({"spec": {"template": {"firedancer": {"workload": "follow", "cluster": "testnet"}, "resources": {"hugepages2Mi": 200}}}}),
            "spec.template.resources.hugepages2Mi",
            "the largest layout has 51 tiles",
        ),
    ]
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn admission_refuses_what_full_firedancer_cannot_run() {
    let lab = lab().await;
    let ns = lab.namespace("fdf-admission").await;
    let api = experiments(&lab.client, &ns);
    let failures = refusals(&api, &example(), refused()).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether Prometheus holds `metric` for a trial's pod in its window.
async fn served(lab: &Lab, ns: &str, t: &ValidatorTrial, metric: &str) -> bool {
    let s = t.status.clone().unwrap();
    let sel = format!(
        "namespace=\"{ns}\",pod=\"{}-1\"",
        t.metadata.name.clone().unwrap()
    );
    let end = s.window_end.clone().unwrap().0.as_second();
    let w = end - s.window_start.clone().unwrap().0.as_second();
    let q = format!("count(last_over_time({metric}{{{sel}}}[{w}s]))");
    query(&lab.state.prometheus_url, &q, end).await.is_some()
}

async fn served_names(lab: &Lab, ns: &str, t: &ValidatorTrial) -> Vec<String> {
    let s = t.status.clone().unwrap();
    let sel = format!(
        "namespace=\"{ns}\",pod=\"{}-1\"",
        t.metadata.name.clone().unwrap()
    );
    let end = s.window_end.clone().unwrap().0.as_second();
    let w = end - s.window_start.clone().unwrap().0.as_second();
    names(&lab.state.prometheus_url, &sel, w, end).await
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_bench_session_names_each_layouts_bottleneck_in_its_versions_names() {
    let lab = lab().await;
    let ns = lab.namespace("fdf-bench").await;
    let _op = lab.start_operator(&ns);
    create(&lab, &experiment(&ns, NAME, json!({}))).await;
    let vx = wait_finished(&lab, &ns, NAME, Duration::from_secs(600)).await;
    let all = trials(&lab, &ns).await;
    let all = valtune::report::sorted(all, &vx.spec.sweep);
    let layout = valtune::clients::client_for(&vx.spec.template)
        .unwrap()
        .report(&vx.spec.template, &vx.spec.sweep);
    let table = valtune::report::table(&Dataset::from_trials(&vx.spec.sweep, &all), &layout);
    println!("{table}");
    assert_eq!(all.len(), 4, "{table}");
    // Its own tiles in the columns: execle for bank, execrp where the store tile was.
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("EXECLE BUSY %") && header.contains("EXECRP BUSY %"),
        "{header}"
    );
    assert!(!header.contains("STORE"), "{header}");
    for t in &all {
        let s = t.status.clone().unwrap();
        assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "{s:?}");
    }
    let at = |v: i32, b: i32| {
        all.iter()
            .find(|t| {
                t.spec.point.threads["verifyTiles"] == v && t.spec.point.threads["bankTiles"] == b
            })
            .unwrap()
    };
    // The lab's assumption (docs/clients/firedancer.md): the default 6 verify tiles hold
    // it near 95k; with 20, the execle tiles do (3: ~147k; 6: ~272k).
    for (v, b, lo, hi, tile) in [
        (6, 3, 85_000.0, 105_000.0, "verify"),
        (6, 6, 85_000.0, 105_000.0, "verify"),
        (20, 3, 130_000.0, 165_000.0, "bank"),
        (20, 6, 240_000.0, 300_000.0, "bank"),
    ] {
        let t = at(v, b);
        let r = results(t);
        let avg = r.avg_tps.unwrap();
        assert!(
            (lo..hi).contains(&avg),
            "verify {v} execle {b}: {avg}\n{table}"
        );
        let named = (layout.text[0].value)(&r).unwrap();
        assert!(
            named.starts_with(tile),
            "verify {v} execle {b}: {named}\n{table}"
        );
        assert!(r.figure("storeBusyPct").is_none(), "{r:?}");
        assert!(r.figure("execrpBusyPct").is_some(), "{r:?}");
    }
    // The report: 20 verify and 6 execle tiles the highest bar, the 6 verify tiles' two
    // alike (verify holds them).
    let fig = crate::report::write(&lab, &vx, &all);
    assert_eq!(fig.tallest("avg-tps").point, "20 / 6");
    let bar = |p: &str| fig.bar("avg-tps", p).mean;
    assert!((bar("6 / 3") / bar("6 / 6") - 1.0).abs() < 0.1);
    assert_eq!(
        vx.status.unwrap().recommendation.unwrap().summary,
        "bankTiles=6 verifyTiles=20"
    );
    // The example's v1.0.1 exports the names from before the 2026-06-10 rename (the
    // follower below, v26.08.1, the new ones).
    let t = at(6, 3);
    for (metric, served_here) in [
        ("execle_transaction_landed", true),
        ("tile_regime_duration_nanos", true),
        ("execle_txn_landed_total", false),
        ("tile_regime_duration_nanos_total", false),
        ("bank_txn_executed_total", false),
    ] {
        let names = served_names(&lab, &ns, t).await;
        assert_eq!(
            served(&lab, &ns, t, metric).await,
            served_here,
            "v1.0.1 {metric}: {names:?}"
        );
    }
    lab.delete_namespace(&ns).await;
}

const HALVING: &str = "manifests/examples/firedancer-tiles-halving.yaml";

/// The halving example as written (issue 22: every example's report): nine layouts a
/// short window, the best third a longer one, the best of those the full window. Its
/// answer is the grid's (the bench session above), and the report draws every trial of
/// every rung and a bar per layout.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_halving_example_answers_as_the_grid_and_reports_every_rung() {
    let lab = lab().await;
    let ns = lab.namespace("fdf-halving").await;
    let _op = lab.start_operator(&ns);
    let mut v = crate::common::example(HALVING);
    v["metadata"]["namespace"] = json!(ns);
    create(&lab, &serde_json::from_value(v).unwrap()).await;
    let vx = wait_finished(&lab, &ns, "fdf-tiles-halving", Duration::from_secs(900)).await;
    let all = trials(&lab, &ns).await;
    assert_eq!(all.len(), 13, "rungs of 9, 3 and 1 trials");
    let rec = vx.status.clone().unwrap().recommendation.unwrap();
    assert_eq!(rec.summary, "bankTiles=6 verifyTiles=20", "{rec:?}");
    let fig = crate::report::write(&lab, &vx, &all);
    assert_eq!(fig.summary("avg-tps").bars.len(), 9);
    assert_eq!(fig.tallest("avg-tps").point, "20 / 6");
    assert_eq!(fig.series("tps").traces.len(), 13);
    lab.delete_namespace(&ns).await;
}

fn follower(ns: &str) -> ValidatorExperiment {
    serde_json::from_value(json!({
        "apiVersion": "valtune.dev/v1alpha1",
        "kind": "ValidatorExperiment",
        "metadata": {"name": "fdf-follow", "namespace": ns},
        "spec": {
            "template": {
                "firedancer": {
                    "image": "registry.example.com/firedancer:v26.08.1",
                    "flavor": "firedancer",
                    "cluster": "mainnet-beta",
                    // Its tiles' sandbox writes /proc/sys (src/util/sandbox/fd_sandbox.c).
                    "privileged": true,
                },
                "resources": {"cpu": 62, "memory": "256Gi", "hugepages1Gi": 48, "hugepages2Mi": 512},
                "storage": [{"role": "ledger", "size": "1Ti"}, {"role": "accounts", "size": "2Ti"}],
                "placement": {
                    "nodeSelector": {"valtune.dev/lab-pool": "firedancer"},
                    "tolerations": [{"key": "valtune.dev/validator", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
            "sweep": {"threads": [{"name": "execTiles", "values": [1, 10]}]},
            "trial": {"warmup": {"timeout": "30s"}, "measurement": {"duration": "30s"}},
            "metrics": {"scrapeInterval": "1s"},
        },
    }))
    .unwrap()
}

/// The most the trial's TPS query read at any scrape from its pod's start to the end of
/// its window.
async fn fastest_tps_since_start(lab: &Lab, ns: &str, t: &ValidatorTrial) -> f64 {
    let s = t.status.clone().unwrap();
    let sel = format!(
        "namespace=\"{ns}\",pod=\"{}-1\"",
        t.metadata.name.clone().unwrap()
    );
    let profile = valtune::clients::profile(t).unwrap();
    let step = Duration::from_secs(1);
    let tps = valtune::results::analysis::expand(
        profile
            .query(valtune::api::settings::QueryKey::Tps)
            .unwrap(),
        &sel,
        step,
    );
    let end = s.window_end.unwrap().0.as_second();
    let life = end - s.started_at.unwrap().0.as_second();
    let q = format!("max_over_time(({tps})[{life}s:1s])");
    query(&lab.state.prometheus_url, &q, end).await.unwrap()
}

/// The chain's load in a follower's window, from its replay tile: the lab's steady chain
/// has about 2,000 transactions a block and skips 5% of its slots (the minority forks'
/// blocks, one slot in 200, count as blocks replayed).
fn chain_load_recorded(r: &valtune::api::trial::TrialResults, version: &str) {
    let tx = r.figure("txPerSlot");
    let skip = r.figure("skipRatePct");
    assert!(
        tx.is_some_and(|tx| (1_700.0..2_300.0).contains(&tx)),
        "{version}: {tx:?} transactions per block ({r:?})"
    );
    assert!(
        skip.is_some_and(|s| (3.0..6.5).contains(&s)),
        "{version}: {skip:?}% of slots skipped ({r:?})"
    );
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_follower_is_measured_from_its_own_replay_and_its_execrp_tiles_decide() {
    let lab = lab().await;
    let ns = lab.namespace("fdf-follow").await;
    let _op = lab.start_operator(&ns);
    create(&lab, &follower(&ns)).await;
    // v1.0.1, whose replay tile sets `replay_transactions_total` to each replayed block's
    // own count (fd_replay_tile.c L358 @v1.0.1): read from the scheduler's counter too.
    let mut old = follower(&ns);
    old.metadata.name = Some("fdf-follow-old".into());
    let f = old.spec.template.client.firedancer.as_mut().unwrap();
    f.image = "registry.example.com/firedancer:v1.0.1".into();
    old.spec.sweep.threads.as_mut().unwrap()[0].values = vec![10];
    create(&lab, &old).await;
    wait_finished(&lab, &ns, "fdf-follow", Duration::from_secs(300)).await;
    wait_finished(&lab, &ns, "fdf-follow-old", Duration::from_secs(300)).await;
    let mut all = trials(&lab, &ns).await;
    let old: Vec<ValidatorTrial> = all
        .extract_if(.., |t| t.spec.experiment == "fdf-follow-old")
        .collect();
    let s = old[0].status.clone().unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "v1.0.1: {s:?}");
    let r = results(&old[0]);
    assert!(
        (4_000.0..5_600.0).contains(&r.avg_tps.unwrap()),
        "v1.0.1: {r:?}"
    );
    let fastest = fastest_tps_since_start(&lab, &ns, &old[0]).await;
    assert!((3_000.0..16_000.0).contains(&fastest), "v1.0.1: {fastest}");
    chain_load_recorded(&r, "v1.0.1");
    let by = |n: i32| {
        all.iter()
            .find(|t| t.spec.point.threads["execTiles"] == n)
            .unwrap()
    };
    // Ten execrp tiles replay three times the cluster's pace: caught up, then the
    // cluster's transactions (the Agave model's mainnet, 4,800 TPS).
    let t = by(10);
    let s = t.status.clone().unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::KeptUp), "{s:?}");
    let r = results(t);
    assert!((4_000.0..5_600.0).contains(&r.avg_tps.unwrap()), "{r:?}");
    assert!(r.final_lag.unwrap() <= 5.0, "{r:?}");
    // Its lag is read once replay starts after the snapshot; at 720x the ~15 simulated
    // minutes from there to the cluster's slot fall within a scrape or two.
    assert!(
        r.catch_up_seconds.is_some() && r.startup_seconds.unwrap() > 0.0,
        "{r:?}"
    );
    assert!(
        (25.0..45.0).contains(&r.figure("execrpBusyPct").unwrap()),
        "{r:?}"
    );
    // Read from the scheduler's counter, never faster than replay goes (8 slots a second
    // of ~1,920 transactions at most), from the pod's start: not from the fork's running
    // total, which jumps to the chain's total when the snapshot loads and drops at every
    // block of a minority fork (a reset to rate()).
    assert!(r.max_tps.unwrap() < 16_000.0, "{r:?}");
    let fastest = fastest_tps_since_start(&lab, &ns, t).await;
    assert!((3_000.0..16_000.0).contains(&fastest), "{fastest}");
    chain_load_recorded(&r, "v26.08.1");
    for metric in [
        "replay_sched_block_replayed_total",
        "replay_root_slot",
        "replay_sched_txn_done_total",
        "replay_txn_processed_total",
        "repair_slot_current",
        "replay_reset_slot",
        "tile_regime_duration_nanos_total",
    ] {
        assert!(served(&lab, &ns, t, metric).await, "{metric}");
    }
    for metric in [
        "replay_transactions_total",
        "solana_node_num_slots_behind",
        "tile_regime_duration_nanos",
    ] {
        assert!(!served(&lab, &ns, t, metric).await, "{metric}");
    }
    // One cannot keep up with the cluster: the warm-up ends with the lag it reached.
    let s = by(1).status.clone().unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::TimedOut), "{s:?}");
    let msg = s.message.unwrap();
    assert!(
        msg.contains("did not catch up within the warm-up limit of 30s"),
        "{msg}"
    );
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_key_its_version_lacks_ends_the_trial_before_its_pod() {
    // [tiles.rserve] came with v1.1.0. The operator judges the keys by the release's table
    // before the pod is created, where firedancer would exit "Config file contains
    // unrecognized key". (A key no release has is refused at admission: admission.rs.)
    let lab = lab().await;
    let ns = lab.namespace("fdf-keys").await;
    let _op = lab.start_operator(&ns);
    let patch = merge(
        &point(6, 3),
        &fd(json!({
            "image": "registry.example.com/firedancer:v1.0.1",
            "config": {"tiles.rserve.enabled": "false"},
        })),
    );
    create(&lab, &experiment(&ns, "fdf-keys", patch)).await;
    wait_finished(&lab, &ns, "fdf-keys", Duration::from_secs(180)).await;
    let s = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(s.outcome, Some(TrialOutcome::Invalid), "{s:?}");
    assert_eq!(s.attempts, 0, "no pod was created: {s:?}");
    let msg = s.message.unwrap();
    assert!(
        msg.contains("full Firedancer 1.0.1 has no config key `tiles.rserve.enabled` (it exists from 1.1.0), and would exit at start: remove it, or use a release that has it"),
        "{msg}"
    );
    lab.delete_namespace(&ns).await;
}
