//! The lab's kubelet (lab/src/kubelet/): a Validator's simulated process that crashes is
//! restarted in place with the kubelet's back-off (its restarts counted, CrashLoopBackOff
//! between them, its last termination kept), and the Validator says so; and the fault
//! hooks the identity tests drive (docs/lab.md, "Faults") do what they say.

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

/// The validator container's status in the pod, and the pod's uid.
async fn validator_status(
    pods: &Api<Pod>,
    name: &str,
) -> (k8s_openapi::api::core::v1::ContainerStatus, String) {
    let p = pods.get(name).await.unwrap();
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let cs = p
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == "validator")
        .expect("a validator container status");
    (cs, uid)
}

/// The last termination of the validator container once it restarted `n` times.
async fn restarted(pods: &Api<Pod>, name: &str, n: i32) -> (i32, String) {
    let (pods, name) = (pods.clone(), name.to_string());
    crate::common::wait_for(&format!("restart {n}"), Duration::from_secs(60), || {
        let (pods, name) = (pods.clone(), name.clone());
        async move {
            let (cs, _) = validator_status(&pods, &name).await;
            let last = cs.last_state.and_then(|s| s.terminated);
            match last {
                Some(t) if cs.restart_count >= n => Ok((t.exit_code, t.reason.unwrap_or_default())),
                _ => Err(format!("{} restarts", cs.restart_count)),
            }
        }
    })
    .await
}

/// How a connection to `addr` fares within a second: "answers", "refused" or "no answer".
async fn reach(addr: std::net::SocketAddr) -> &'static str {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let talk = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").await?;
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(())
    };
    match tokio::time::timeout(Duration::from_secs(1), talk).await {
        Ok(Ok(())) => "answers",
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => "refused",
        Ok(Err(_)) | Err(_) => "no answer",
    }
}

/// Each fault hook a test can inject through the lab's kubelet (docs/lab.md, "Faults"):
/// a killed and an OOM-killed validator restarted in place with the kubelet's words; a
/// port blocked on the node, dropped then refused, the played RPC and a real sidecar's
/// alike; an image the registry refuses (ErrImagePull, then ImagePullBackOff, then
/// running once it serves it); and a node whose kubelet stops answering, whose
/// container's restart only shows once it answers again.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_fault_hooks_do_what_they_say() {
    use valtune_lab::kubelet::faults::{Fault, send};
    let lab = lab().await;
    let dir = lab.state.dir.clone();
    let ns = lab.namespace("kubelet-faults").await;
    let _op = lab.start_operator(&ns);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    // A healthy validator (its crash far off).
    api.create(
        &PostParams::default(),
        &crashing(&ns, "agave-f", "vv-faults", "9000h"),
    )
    .await
    .unwrap();
    crate::validator::wait_ready(&api, "agave-f").await;
    let (_, uid) = validator_status(&pods, "agave-f").await;
    let fault = |f: Fault| {
        let dir = dir.clone();
        async move { send(&dir, &f).await.unwrap() }
    };
    let container = |c: &str| (ns.clone(), "agave-f".to_string(), c.to_string());

    let (namespace, pod, c) = container("validator");
    fault(Fault::Kill {
        namespace,
        pod,
        container: c,
    })
    .await;
    assert_eq!(restarted(&pods, "agave-f", 1).await, (137, "Error".into()));
    let (namespace, pod, c) = container("validator");
    fault(Fault::Oom {
        namespace,
        pod,
        container: c,
    })
    .await;
    assert_eq!(
        restarted(&pods, "agave-f", 2).await,
        (137, "OOMKilled".into())
    );
    assert_eq!(
        validator_status(&pods, "agave-f").await.1,
        uid,
        "restarted in place"
    );
    let (namespace, pod, c) = container("nope");
    let e = send(
        &dir,
        &Fault::Kill {
            namespace,
            pod,
            container: c,
        },
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("has no container nope"), "{e}");

    // The played RPC (8899) and the real process-exporter's port, on the node's address.
    let p = pods.get("agave-f").await.unwrap();
    let ip: std::net::IpAddr = p.status.unwrap().pod_ip.unwrap().parse().unwrap();
    let exporter = p
        .spec
        .unwrap()
        .init_containers
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == "process-exporter")
        .and_then(|c| c.ports?.first().map(|p| p.container_port as u16))
        .expect("a process-exporter port");
    for port in [8899, exporter] {
        let addr = std::net::SocketAddr::new(ip, port);
        crate::common::wait_for(
            &format!("{addr} answering"),
            Duration::from_secs(60),
            || async move {
                match reach(addr).await {
                    "answers" => Ok(()),
                    other => Err(other.to_string()),
                }
            },
        )
        .await;
        for (reject, fared) in [(false, "no answer"), (true, "refused")] {
            fault(Fault::Block {
                node: "vv-faults".into(),
                port,
                reject,
            })
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(reach(addr).await, fared, "{addr} blocked (reject {reject})");
        }
        fault(Fault::Unblock {
            node: "vv-faults".into(),
            port,
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(reach(addr).await, "answers", "{addr} open again");
    }

    // An image the registry refuses, on a bare pod of the node.
    let image = format!("registry.example.com/lab/{ns}:1");
    fault(Fault::FailImage {
        image: image.clone(),
    })
    .await;
    let bare: Pod = serde_json::from_value(json!({
        "metadata": {"name": "bare"},
        "spec": {
            "nodeName": "vv-faults",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "app", "image": image}],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &bare).await.unwrap();
    let waiting = |want: &'static str| {
        let pods = pods.clone();
        async move {
            crate::common::wait_for(want, Duration::from_secs(60), || {
                let pods = pods.clone();
                async move {
                    let p = pods.get("bare").await.map_err(|e| e.to_string())?;
                    let cs = p
                        .status
                        .and_then(|s| s.container_statuses)
                        .unwrap_or_default();
                    let state = cs.first().and_then(|c| c.state.clone()).unwrap_or_default();
                    match (&state.waiting, &state.running, want) {
                        (Some(w), _, _) if w.reason.as_deref() == Some(want) => {
                            Ok(w.message.clone().unwrap_or_default())
                        }
                        // ErrImagePull lasts until the pod's next sync, which may come
                        // before a poll sees it (the unit tests of the lifecycle hold the
                        // exact sequence); the back-off quotes the pull's error.
                        (Some(w), _, "ErrImagePull")
                            if w.reason.as_deref() == Some("ImagePullBackOff") =>
                        {
                            Ok(w.message.clone().unwrap_or_default())
                        }
                        (_, Some(_), "running") => Ok(String::new()),
                        _ => Err(format!("{state:?}")),
                    }
                }
            })
            .await
        }
    };
    let m = waiting("ErrImagePull").await;
    assert!(m.contains(": not found"), "{m}");
    let m = waiting("ImagePullBackOff").await;
    assert!(
        m.starts_with(&format!(
            "Back-off pulling image \"{image}\": ErrImagePull: rpc error: code = NotFound"
        )),
        "{m}"
    );
    fault(Fault::FixImage {
        image: image.clone(),
    })
    .await;
    waiting("running").await;

    // The node's kubelet stops answering: a container killed meanwhile is restarted on
    // the machine, and the API hears of it once the kubelet answers again.
    fault(Fault::StopNode {
        node: "vv-faults".into(),
        off: false,
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = validator_status(&pods, "agave-f").await.0.restart_count;
    let (namespace, pod, c) = container("validator");
    fault(Fault::Kill {
        namespace,
        pod,
        container: c,
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        validator_status(&pods, "agave-f").await.0.restart_count,
        before,
        "a kubelet that does not answer writes nothing"
    );
    fault(Fault::StartNode {
        node: "vv-faults".into(),
    })
    .await;
    assert_eq!(
        restarted(&pods, "agave-f", before + 1).await,
        (137, "Error".into())
    );
    lab.delete_namespace(&ns).await;
}
