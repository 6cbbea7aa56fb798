//! The lab's kubelet (lab/src/kubelet/): a Validator's simulated process that crashes is
//! restarted in place with the kubelet's back-off (its restarts counted, CrashLoopBackOff
//! between them, its last termination kept), and the Validator says so.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use valtune::api::Validator;
use valtune::api::validator::ValidatorPhase;

use crate::common::lab;
use crate::validator::{condition, example};

const AGAVE: &str = "manifests/validators/agave.yaml";

/// A non-voting Agave Validator with no identity of its own, on `node`, its process
/// crashing `crash_after` (simulated) into each run (the lab's `VALTUNE_LAB_CRASH_AFTER`).
fn crashing(ns: &str, name: &str, node: &str, crash_after: &str) -> Validator {
    let mut v = example(AGAVE, ns, name, node);
    let spec = v["spec"].as_object_mut().unwrap();
    spec.remove("identity");
    spec.remove("voteAccount");
    spec.insert("role".into(), json!("nonVoting"));
    spec["template"]["env"] = json!([{"name": "VALTUNE_LAB_CRASH_AFTER", "value": crash_after}]);
    serde_json::from_value(v).unwrap()
}

/// What a watch of the pod saw of its validator container: the most restarts, every
/// CrashLoopBackOff message in order, the last termination, and every pod uid.
#[derive(Default, Debug)]
struct Seen {
    restarts: i32,
    backoffs: Vec<String>,
    last: Option<(i32, String, String)>,
    uids: BTreeSet<String>,
}

/// The crash loop at 720x: each run crashes a simulated minute in (a twelfth of a real
/// second), within 10 minutes of its start (and of the lab's 5 real seconds: docs/lab.md,
/// "Clocks"), so the back-off doubles: 10 s, 20 s, ..., 5 min (simulated) between an exit
/// and the next start.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_validator_whose_process_crashes_is_restarted_with_back_off_and_says_so() {
    let lab = lab().await;
    let ns = lab.namespace("kubelet-crash").await;
    let _op = lab.start_operator(&ns);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
    let watch = {
        let (pods, seen) = (pods.clone(), seen.clone());
        tokio::spawn(async move {
            let cfg = watcher::Config::default().fields("metadata.name=agave-crash");
            let mut stream = watcher::watcher(pods, cfg).boxed();
            while let Some(e) = stream.next().await {
                let (Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p))) = e else {
                    continue;
                };
                let mut s = seen.lock().unwrap();
                s.uids.insert(p.metadata.uid.clone().unwrap_or_default());
                let cs = p
                    .status
                    .and_then(|s| s.container_statuses)
                    .unwrap_or_default();
                let Some(c) = cs.into_iter().find(|c| c.name == "validator") else {
                    continue;
                };
                s.restarts = s.restarts.max(c.restart_count);
                if let Some(w) = c.state.and_then(|st| st.waiting)
                    && w.reason.as_deref() == Some("CrashLoopBackOff")
                {
                    let m = w.message.unwrap_or_default();
                    if s.backoffs.last() != Some(&m) {
                        s.backoffs.push(m);
                    }
                }
                if let Some(t) = c.last_state.and_then(|st| st.terminated) {
                    s.last = Some((
                        t.exit_code,
                        t.reason.unwrap_or_default(),
                        t.message.unwrap_or_default(),
                    ));
                }
            }
        })
    };
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    api.create(
        &PostParams::default(),
        &crashing(&ns, "agave-crash", "vv-crash", "1m"),
    )
    .await
    .unwrap();

    // Restarted in place (one pod all along), again and again, waiting longer each time;
    // and the Validator says why it is not Ready. Read before anything is asserted, so
    // the crash loop is stopped (its namespace deleted) whatever the outcome.
    let restarted = until(Duration::from_secs(180), || {
        let s = seen.lock().unwrap();
        (s.restarts >= 6 && s.backoffs.iter().any(|m| m.contains("back-off 5m0s")))
            .then_some(())
            .ok_or(format!("{s:?}"))
    })
    .await;
    let mut said = Err("not read".to_string());
    if restarted.is_ok() {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let v = api.get("agave-crash").await.unwrap();
            let phase = v.status.as_ref().map(|s| s.phase);
            said = match condition(&v, "Ready") {
                Some((status, reason, message)) if reason == "ContainerRestarted" => {
                    Ok((status, message, phase))
                }
                other => Err(format!("{other:?}")),
            };
            if said.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    watch.abort();
    lab.delete_namespace(&ns).await;
    restarted.unwrap();
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.uids.len(), 1, "restarted in place, not replaced: {s:?}");
        // The kubelet's words, its back-off doubling from 10 s to 5 min. A wait of a few
        // compressed seconds (10 s is 14 ms) may be over before the kubelet's next sync,
        // so it is not written; the longer ones are, in order.
        let steps = ["10s", "20s", "40s", "1m20s", "2m40s", "5m0s"];
        let order: Vec<usize> = s
            .backoffs
            .iter()
            .map(|m| {
                let pos = steps.iter().position(|d| {
                    m.starts_with(&format!(
                        "back-off {d} restarting failed container=validator pod=agave-crash_{ns}("
                    ))
                });
                pos.unwrap_or_else(|| panic!("not the kubelet's words: {m}"))
            })
            .collect();
        let doubling: Vec<usize> = order.iter().take_while(|i| **i < 5).copied().collect();
        assert!(
            doubling.windows(2).all(|w| w[0] < w[1]) && order.get(doubling.len()) == Some(&5),
            "{:?}",
            s.backoffs
        );
        assert!(!doubling.is_empty(), "{:?}", s.backoffs);
        let (code, reason, message) = s.last.clone().expect("a last termination");
        assert_eq!((code, reason.as_str()), (1, "Error"), "{message}");
        assert!(message.contains("VALTUNE_LAB_CRASH_AFTER"), "{message}");
    }
    let (status, message, phase) = said.expect("the Validator reports the restarts");
    assert_eq!(status, "False");
    assert_eq!(phase, Some(ValidatorPhase::Starting));
    assert!(
        message.contains("container validator restarted")
            && message.contains("the last ending Error with exit code 1"),
        "{message}"
    );
}

/// Polls `check` every 200 ms until it holds or `timeout`: its value, or its last word.
async fn until<T>(timeout: Duration, check: impl Fn() -> Result<T, String>) -> Result<T, String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(e) if std::time::Instant::now() >= deadline => {
                return Err(format!("timed out after {timeout:?}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
