//! A Prometheus outage loses no result: a real Prometheus is stopped and started again
//! under running experiments. They stop the lab's third Prometheus (`lab-outage`), which
//! scrapes only their namespaces, so the other tests keep theirs; they take turns.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::{TrialOutcome, TrialPhase};

use crate::common::{Lab, Operator, create, lab, quickstart_with, trials, wait_finished, wait_for};
use valtune_lab::prometheus::{OUTAGE_NAMESPACE_LABEL, OUTAGE_PROCESS};

/// One outage at a time: they share the lab's outage Prometheus.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Prometheus stopped for as long as this lives; started again when it goes, even when
/// the test fails.
struct Outage {
    dir: PathBuf,
}

impl Outage {
    fn begin(dir: PathBuf) -> Outage {
        valtune_lab::control_plane::stop_one(&dir, OUTAGE_PROCESS).expect("stopping Prometheus");
        Outage { dir }
    }

    fn end(self) {}
}

impl Drop for Outage {
    fn drop(&mut self) {
        valtune_lab::control_plane::start_again(&self.dir, OUTAGE_PROCESS)
            .expect("starting Prometheus again");
    }
}

/// A namespace the outage Prometheus scrapes, its operator reading that Prometheus, and
/// the quickstart experiment in it, named `name` and patched with `patch`.
async fn start_experiment(lab: &Lab, name: &str, patch: serde_json::Value) -> (String, Operator) {
    let ns = lab.namespace_labelled(name, OUTAGE_NAMESPACE_LABEL).await;
    let op = lab.start_operator_with(&ns, Some(&lab.state.prometheus_outage_url));
    create(lab, &quickstart_with(&ns, name, patch)).await;
    (ns, op)
}

async fn wait_prometheus(url: &str) {
    let http = reqwest::Client::new();
    wait_for("Prometheus to answer", Duration::from_secs(60), || async {
        match http.get(format!("{url}/-/ready")).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_outage_while_trials_warm_up_and_measure_loses_no_result() {
    let _turn = TURN.lock().await;
    let lab = lab().await;
    // One wave of three: two trials measuring, the 128Gi one still warming up (it is
    // OOM-killed during or just before the outage). Each measuring trial has scrapes in
    // its window first (5 s, five scrapes, an hour at 720x): an outage begun a second
    // into a window leaves it nothing to judge (MetricsUnavailable, rightly), and which
    // second the test sees "Measuring" hinges on the operator's pace.
    let (ns, _op) = start_experiment(
        &lab,
        "outage",
        json!({"spec": {"sweep": {"memory": ["128Gi", "256Gi", "512Gi"]}, "parallelism": 3}}),
    )
    .await;
    wait_for(
        "two trials 5 s into their windows",
        Duration::from_secs(120),
        || async {
            let ts = trials(&lab, &ns).await;
            let into = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5);
            let measuring = ts
                .iter()
                .filter(|t| {
                    t.status.as_ref().is_some_and(|s| {
                        s.phase == TrialPhase::Measuring
                            && s.window_start.as_ref().is_some_and(|w| w.0 <= into)
                    })
                })
                .count();
            if measuring >= 2 {
                Ok(())
            } else {
                Err(format!("{measuring} measuring"))
            }
        },
    )
    .await;
    // 65 scrape intervals (1 s each) without Prometheus: more than 12 simulated hours.
    let outage = Outage::begin(lab.state.dir.clone());
    tokio::time::sleep(Duration::from_secs(65)).await;
    let during: BTreeMap<String, TrialPhase> = trials(&lab, &ns)
        .await
        .iter()
        .map(|t| {
            (
                t.metadata.name.clone().unwrap(),
                t.status.clone().unwrap_or_default().phase,
            )
        })
        .collect();
    outage.end();
    wait_prometheus(&lab.state.prometheus_outage_url).await;

    let done = wait_finished(&lab, &ns, "outage", Duration::from_secs(400)).await;
    let st = done.status.unwrap();
    assert_eq!(st.phase, ExperimentPhase::Succeeded, "{st:?}");
    assert_eq!(
        st.recommendation.unwrap().summary,
        "memory=512Gi",
        "the same recommendation as without the outage"
    );
    let by_memory: BTreeMap<String, _> = trials(&lab, &ns)
        .await
        .into_iter()
        .map(|t| (t.spec.point.memory.clone().unwrap(), t))
        .collect();
    let outcome = |m: &str| by_memory[m].status.as_ref().and_then(|s| s.outcome);
    assert_eq!(outcome("128Gi"), Some(TrialOutcome::OOMKilled));
    assert_eq!(outcome("256Gi"), Some(TrialOutcome::FellBehind));
    assert_eq!(outcome("512Gi"), Some(TrialOutcome::KeptUp));
    let mut blind = 0;
    for (m, t) in &by_memory {
        let s = t.status.clone().unwrap();
        let r = s
            .results
            .clone()
            .unwrap_or_else(|| panic!("{m}: no results: {s:?}"));
        assert!(r.avg_tps.is_some(), "{m}: {r:?}");
        // The agent's backlog from the outage had arrived when the window was read.
        assert!(
            !s.message
                .clone()
                .unwrap_or_default()
                .contains("samples end at"),
            "{m}: collected before the pushed samples were in: {:?}",
            s.message
        );
        if s.blind_seconds > 0.0 {
            blind += 1;
            // The figures cover the observed part; the gap shows as coverage, not as
            // zero TPS (an uninterrupted run idles about a quarter of the time).
            assert!(r.coverage.unwrap() < 0.9, "{m}: {r:?}");
            assert!(
                r.zero_tps_seconds.unwrap() < 0.5 * r.measured_seconds.unwrap(),
                "{m}: {r:?}"
            );
            assert!(
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Complete" && c.reason == "LowCoverage"),
                "{m}: {:?}",
                s.conditions
            );
        }
        // Trials the outage missed measure as an uninterrupted run does.
        if m != "128Gi" && m != "256Gi" && r.coverage.unwrap() >= 0.9 {
            assert!((3000.0..7000.0).contains(&r.avg_tps.unwrap()), "{m}: {r:?}");
        }
    }
    assert!(blind >= 2, "the outage hit the wave: {during:?}");
    // The figures are in Prometheus: collect one trial again, the same result.
    let t512 = by_memory["512Gi"].clone();
    let name = t512.metadata.name.clone().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_valtune"))
        .args(["collect", &name, "-n", &ns, "--wait", "2m"])
        .env("KUBECONFIG", &lab.state.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("KeptUp"));
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn prometheus_away_past_the_collection_deadline_ends_trials_saying_so() {
    let _turn = TURN.lock().await;
    let lab = lab().await;
    let (ns, op) = start_experiment(
        &lab,
        "gone",
        json!({"spec": {
            "sweep": {"memory": ["1Ti"]},
            "trial": {"collectionDeadline": "40s", "measurement": {"duration": "20s"}},
        }}),
    )
    .await;
    wait_for("the trial measuring", Duration::from_secs(120), || async {
        let ts = trials(&lab, &ns).await;
        match ts.first().and_then(|t| t.status.clone()).map(|s| s.phase) {
            Some(TrialPhase::Measuring) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let outage = Outage::begin(lab.state.dir.clone());
    // The operator waits without a tight loop: count the trial's writes while it waits.
    let writes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = {
        use futures::StreamExt;
        let api: kube::Api<valtune::api::ValidatorTrial> =
            kube::Api::namespaced(lab.client.clone(), &ns);
        let writes = writes.clone();
        tokio::spawn(async move {
            let mut events = kube::runtime::watcher(api, Default::default()).boxed();
            while let Some(e) = events.next().await {
                if let Ok(kube::runtime::watcher::Event::Apply(_)) = e {
                    writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(15)).await;
    let rss = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0))
            })
            .unwrap_or(0)
    };
    let pid = op.pid();
    let rss_early = rss(pid);
    wait_finished(&lab, &ns, "gone", Duration::from_secs(90)).await;
    let rss_late = rss(pid);
    counter.abort();
    outage.end();
    let t = trials(&lab, &ns).await.remove(0);
    let s = t.status.clone().unwrap();
    assert!(
        matches!(
            s.outcome,
            Some(TrialOutcome::Unobserved | TrialOutcome::MetricsUnavailable)
        ),
        "{s:?}"
    );
    let message = s.message.clone().unwrap();
    assert!(
        message.contains(&format!(
            "Prometheus at {}",
            lab.state.prometheus_outage_url
        )),
        "{message}"
    );
    assert!(message.contains("was unreachable for"), "{message}");
    // Going blind, giving up (with its cleanup): a handful of writes in 40 s, not one
    // per retry.
    let writes = writes.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        writes <= 4,
        "the trial was written {writes} times while Prometheus was away"
    );
    assert!(
        rss_late < rss_early + 20 * 1024,
        "operator RSS grew from {rss_early} to {rss_late} kB"
    );
    lab.delete_namespace(&ns).await;
}
