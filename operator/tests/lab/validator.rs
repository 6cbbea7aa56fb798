//! The Validator kind in the lab (issue 21): a Besu Validator reaches Ready from Besu's
//! own `/readiness` answer (the simulated Besu answers it on its Engine port as Besu
//! does, Host allowlist included); a second Validator naming the same identity gets no
//! pod and says which Validator holds it; an Agave Validator is Ready by its getHealth
//! and replaces its pod only in its restart window (the simulated Agave has a leader
//! schedule for its identity), never two pods of its identity at once; bad input is
//! refused naming the field.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use valtune::api::Validator;
use valtune::api::validator::ValidatorPhase;

use crate::common::{Lab, lab, refusals, wait_for};

const EXAMPLE: &str = "manifests/validators/besu.yaml";

/// The example, renamed into `ns`, on `node`.
fn validator(ns: &str, name: &str, node: &str) -> Value {
    let mut v = crate::common::yaml_file(EXAMPLE);
    v["metadata"] = json!({"name": name, "namespace": ns});
    v["spec"]["nodeName"] = json!(node);
    v
}

fn condition(v: &Validator, type_: &str) -> Option<(String, String, String)> {
    v.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn node_key(lab: &Lab, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), ns);
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "besu-node-key"},
        "stringData": {"key": "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"}
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_besu_validator_is_ready_by_its_own_answer_and_holds_its_identity() {
    let lab = lab().await;
    let ns = lab.namespace("validator").await;
    let _op = lab.start_operator(&ns);
    node_key(&lab, &ns).await;
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    let first: Validator = serde_json::from_value(validator(&ns, "besu-a", "bm-12")).unwrap();
    api.create(&PostParams::default(), &first).await.unwrap();

    // Starting or catching up first, then Ready only once Besu itself says UP.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = wait_for("besu-a Ready", Duration::from_secs(300), || {
        let api = api.clone();
        let seen = seen.clone();
        async move {
            let v = api.get("besu-a").await.map_err(|e| e.to_string())?;
            let st = v.status.clone().ok_or("no status yet")?;
            let mut seen = seen.lock().unwrap();
            if seen.last() != Some(&st.phase) {
                seen.push(st.phase);
            }
            match condition(&v, "Ready") {
                Some(c) if c.0 == "True" => Ok(v),
                other => Err(format!("{:?} {other:?} {:?}", st.phase, st.health)),
            }
        }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    let st = ready.status.clone().unwrap();
    assert_eq!(st.phase, ValidatorPhase::Running, "{st:?}");
    assert!(
        seen.first() != Some(&ValidatorPhase::Running),
        "Ready before Besu answered: {seen:?}"
    );
    let health = st.health.clone().unwrap_or_default();
    assert!(
        health.starts_with("HTTP 200:") && health.contains("\"UP\""),
        "{health}"
    );
    assert!(st.lag.is_some_and(|l| l <= 2), "{st:?}");
    assert!(st.head.is_some_and(|h| h > 23_900_000), "{st:?}");
    assert_eq!(condition(&ready, "CaughtUp").unwrap().0, "True");
    assert_eq!(condition(&ready, "IdentityHeld").unwrap().0, "True");

    // Its pod: one, on its node, with its node key, its state on a claim of its own.
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = pods.get("besu-a").await.unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("bm-12"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    let args = spec.containers[0].args.clone().unwrap_or_default();
    assert!(
        args.contains(&"--node-private-key-file=/etc/valtune/identity/key".to_string()),
        "{args:?}"
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(lab.client.clone(), &ns);
    let claim = claims.get("besu-a-data").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    let leases: Api<Lease> = Api::namespaced(lab.client.clone(), &ns);
    let lease = leases.get("valtune-identity-besu-node-key").await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("besu-a")
    );

    // A change of the rendered pod (its resources): Besu has no restart window, so the
    // pod is replaced at once, under the same name, on the same claim.
    let (old_pod, old_claim) = (pod.metadata.uid.clone(), claim.metadata.uid.clone());
    api.patch(
        "besu-a",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"template": {"resources": {"cpu": 14}}}})),
    )
    .await
    .unwrap();
    wait_for(
        "besu-a restarted and Ready",
        Duration::from_secs(300),
        || {
            let (api, pods, old_pod) = (api.clone(), pods.clone(), old_pod.clone());
            async move {
                let p = pods.get("besu-a").await.map_err(|e| e.to_string())?;
                let cpu = p.spec.as_ref().unwrap().containers[0]
                    .resources
                    .as_ref()
                    .and_then(|r| r.limits.as_ref())
                    .and_then(|l| l.get("cpu"))
                    .map(|q| q.0.clone());
                let v = api.get("besu-a").await.map_err(|e| e.to_string())?;
                let ready = condition(&v, "Ready").is_some_and(|c| c.0 == "True");
                if p.metadata.uid != old_pod && cpu.as_deref() == Some("14") && ready {
                    Ok(())
                } else {
                    Err(format!(
                        "cpu {cpu:?}, ready {ready}, {:?}",
                        v.status.map(|s| s.phase)
                    ))
                }
            }
        },
    )
    .await;
    let claim = claims.get("besu-a-data").await.unwrap();
    assert_eq!(
        claim.metadata.uid, old_claim,
        "the state's claim was replaced"
    );

    // A second Validator with the same identity: held back, saying who holds it.
    let second: Validator = serde_json::from_value(validator(&ns, "besu-b", "bm-11")).unwrap();
    api.create(&PostParams::default(), &second).await.unwrap();
    let held = wait_for("besu-b held back", Duration::from_secs(60), || {
        let api = api.clone();
        async move {
            let v = api.get("besu-b").await.map_err(|e| e.to_string())?;
            match condition(&v, "IdentityHeld") {
                Some(c) if c.0 == "False" => Ok(c),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert_eq!(held.1, "HeldElsewhere");
    assert!(
        held.2.contains("held by Validator besu-a") && held.2.contains("besu-node-key"),
        "{}",
        held.2
    );
    // Several passes later, still no pod of its own.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(pods.get_opt("besu-b").await.unwrap().is_none());
    let with_key: Vec<String> = pods
        .list(&kube::api::ListParams::default().labels("valtune.dev/identity=besu-node-key"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(with_key, vec!["besu-a".to_string()]);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn bad_validators_are_refused_naming_the_field() {
    let lab = lab().await;
    let ns = lab.namespace("validator-admission").await;
    let ar = ApiResource::erase::<Validator>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(lab.client.clone(), &ns, &ar);
    let mut base = validator(&ns, "besu-x", "bm-01");
    base["apiVersion"] = json!("valtune.dev/v1alpha1");
    base["kind"] = json!("Validator");
    let failures = refusals(
        &api,
        &base,
        vec![
            (
                "no node",
                json!({"spec": {"nodeName": null}}),
                "spec.nodeName",
                "Required value",
            ),
            (
                "a standby without its own identity",
                json!({"spec": {"role": "standby", "identity": null}}),
                "spec.identity",
                "a standby needs an identity of its own",
            ),
            (
                "a knob Besu cannot honour",
                json!({"spec": {"template": {"tuning": {"programCacheEntries": 2048}}}}),
                "spec.template.tuning.programCacheEntries",
                "Besu has no program cache",
            ),
            (
                "a knob this Besu version cannot honour",
                json!({"spec": {"template": {"besu": {"image": "hyperledger/besu:24.1.0"}, "tuning": {"allocator": "glibc"}}}}),
                "spec.template.tuning.allocator",
                "24.12.0",
            ),
            (
                "a sweep",
                json!({"spec": {"sweep": {"heap": ["5Gi", "8Gi"]}}}),
                "spec.sweep",
                "a Validator runs one configuration",
            ),
            (
                "a producing nodeos",
                json!({"spec": {"role": "voting", "voteAccount": {"secretName": "v"}, "identity": {"secretName": "k"}, "template": {"besu": null, "nodeos": {"image": "waxteam/waxnode:v5.0.3wax02"}}}}),
                "spec.role",
                "a nodeos Validator is a non-producing node",
            ),
            (
                "Agave's restart window options on Besu",
                json!({"spec": {"restartWindow": {"minIdleTime": 5}}}),
                "spec.restartWindow",
                "wait-for-restart-window",
            ),
            (
                "a voting Besu",
                json!({"spec": {"role": "voting", "voteAccount": {"secretName": "v"}}}),
                "spec.role",
                "Besu is an execution client",
            ),
        ],
    )
    .await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{failures:#?}");
}

const AGAVE_EXAMPLE: &str = "manifests/validators/agave.yaml";

/// A keypair file as solana-keygen writes it: 64 bytes as a JSON array, the public key
/// last (the lab reads the identity's public key from it).
fn keypair(seed: u8) -> String {
    let bytes: Vec<u8> = (0..64u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(seed))
        .collect();
    serde_json::to_string(&bytes).unwrap()
}

async fn agave_keys(lab: &Lab, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), ns);
    for (name, seed) in [("agave-identity", 1), ("agave-vote", 2)] {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name},
            "stringData": {"keypair": keypair(seed)}
        }))
        .unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
}

/// Every pod of one identity that exists (terminating included) at each moment of a
/// watch: the most seen at once, and every pod seen.
#[derive(Default)]
struct Signers {
    now: std::collections::BTreeSet<String>,
    most: usize,
    seen: std::collections::BTreeSet<String>,
}

fn watch_signers(
    pods: Api<Pod>,
    identity: &str,
) -> (
    std::sync::Arc<std::sync::Mutex<Signers>>,
    tokio::task::JoinHandle<()>,
) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let state = std::sync::Arc::new(std::sync::Mutex::new(Signers::default()));
    let s = state.clone();
    let cfg = watcher::Config::default().labels(&format!("valtune.dev/identity={identity}"));
    let task = tokio::spawn(async move {
        let mut stream = watcher(pods, cfg).boxed();
        let mut init = std::collections::BTreeSet::new();
        while let Some(e) = stream.next().await {
            let Ok(e) = e else { continue };
            let mut st = s.lock().unwrap();
            let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
            match e {
                watcher::Event::Apply(p) => {
                    st.now.insert(uid(&p));
                    st.seen.insert(uid(&p));
                }
                watcher::Event::Delete(p) => {
                    st.now.remove(&uid(&p));
                }
                watcher::Event::Init => init.clear(),
                watcher::Event::InitApply(p) => {
                    init.insert(uid(&p));
                    st.seen.insert(uid(&p));
                }
                watcher::Event::InitDone => st.now = std::mem::take(&mut init),
            }
            st.most = st.most.max(st.now.len());
        }
    });
    (state, task)
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_agave_validator_is_ready_by_get_health_and_restarts_only_in_its_window() {
    let lab = lab().await;
    let ns = lab.namespace("validator-agave").await;
    let _op = lab.start_operator(&ns);
    agave_keys(&lab, &ns).await;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let (signers, watch) = watch_signers(pods.clone(), "agave-identity");
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    let mut v = crate::common::yaml_file(AGAVE_EXAMPLE);
    v["metadata"] = json!({"name": "agave-a", "namespace": ns});
    v["spec"]["nodeName"] = json!("bm-10");
    let first: Validator = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &first).await.unwrap();

    // Ready only once Agave's own getHealth says "ok" (behind first, while it catches up).
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = wait_for("agave-a Ready", Duration::from_secs(300), || {
        let (api, seen) = (api.clone(), seen.clone());
        async move {
            let v = api.get("agave-a").await.map_err(|e| e.to_string())?;
            let st = v.status.clone().ok_or("no status yet")?;
            let mut seen = seen.lock().unwrap();
            if seen.last() != Some(&st.phase) {
                seen.push(st.phase);
            }
            match condition(&v, "Ready") {
                Some(c) if c.0 == "True" => Ok(v),
                other => Err(format!("{:?} {other:?} {:?}", st.phase, st.health)),
            }
        }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    let st = ready.status.clone().unwrap();
    assert_eq!(st.phase, ValidatorPhase::Running, "{st:?}");
    assert!(
        seen.first() != Some(&ValidatorPhase::Running),
        "Ready before Agave answered: {seen:?}"
    );
    let health = st.health.clone().unwrap_or_default();
    assert!(health.contains(r#""result":"ok""#), "{health}");
    assert!(
        st.head.is_some_and(|h| h > 0) && st.lag == Some(0),
        "{st:?}"
    );
    let pod = pods.get("agave-a").await.unwrap();
    let args = pod.spec.clone().unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .map(|i| args[i + 1].clone())
    };
    assert_eq!(
        flag("--identity").as_deref(),
        Some("/etc/valtune/identity/keypair")
    );
    assert_eq!(
        flag("--vote-account").as_deref(),
        Some("/etc/valtune/vote/keypair")
    );
    assert!(!args.iter().any(|a| a == "--no-voting"), "{args:?}");
    let old_uid = pod.metadata.uid.clone();

    // An image change, with a minimum idle time no gap in its leader schedule gives (an
    // hour: 9,000 slots; the lab's identity leads every 6,000): it waits, saying why,
    // while the pod keeps running, pass after pass.
    let patch = |p: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "agave-a",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(p),
            )
            .await
            .unwrap();
        }
    };
    patch(json!({"spec": {
        "restartWindow": {"minIdleTime": 60},
        "template": {"agave": {"image": "registry.example.com/agave:v4.0.3-pc1024"}},
    }}))
    .await;
    let waiting = wait_for(
        "agave-a waits for its window",
        Duration::from_secs(120),
        || {
            let api = api.clone();
            async move {
                let v = api.get("agave-a").await.map_err(|e| e.to_string())?;
                let st = v.status.clone().ok_or("no status")?;
                match st.pending_change {
                    Some(p) if p.waiting_for.contains("no idle window") => Ok(p.waiting_for),
                    other => Err(format!("{:?} {other:?}", st.phase)),
                }
            }
        },
    )
    .await;
    assert!(
        waiting.contains("image anzaxyz/agave:v4.0.3 -> registry.example.com/agave:v4.0.3-pc1024")
            && waiting.contains("at least 9000 slots"),
        "{waiting}"
    );
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let p = pods.get("agave-a").await.unwrap();
        assert_eq!(p.metadata.uid, old_uid, "restarted with a leader slot near");
        assert!(
            p.metadata.deletion_timestamp.is_none(),
            "deleted with a leader slot near"
        );
        let v = api.get("agave-a").await.unwrap();
        assert_eq!(v.status.unwrap().phase, ValidatorPhase::RestartPending);
    }

    // The command's default (10 minutes, 1,500 slots): the window opens between two of
    // its leader groups, and the pod is replaced, on the new image, and Ready again.
    patch(json!({"spec": {"restartWindow": {"minIdleTime": null}}})).await;
    wait_for(
        "agave-a restarted and Ready",
        Duration::from_secs(300),
        || {
            let (api, pods, old_uid) = (api.clone(), pods.clone(), old_uid.clone());
            async move {
                let p = pods.get("agave-a").await.map_err(|e| e.to_string())?;
                let image = p.spec.as_ref().unwrap().containers[0].image.clone();
                let v = api.get("agave-a").await.map_err(|e| e.to_string())?;
                let ready = condition(&v, "Ready").is_some_and(|c| c.0 == "True");
                if p.metadata.uid != old_uid
                    && image.as_deref() == Some("registry.example.com/agave:v4.0.3-pc1024")
                    && ready
                {
                    Ok(())
                } else {
                    Err(format!(
                        "{image:?} ready {ready} {:?}",
                        v.status.map(|s| s.phase)
                    ))
                }
            }
        },
    )
    .await;
    // The restart was decided in a window, as the event says.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(lab.client.clone(), &ns);
    let restarts: Vec<String> = events
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Restarting"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        restarts
            .iter()
            .any(|m| m.contains("slots away (at least 1500 idle)")
                || m.contains("no leader slot of this identity")),
        "{restarts:?}"
    );
    // At no moment two pods of the identity.
    let (seen, most) = {
        let s = signers.lock().unwrap();
        (s.seen.len(), s.most)
    };
    assert!(seen >= 2, "the watch saw {seen} pods");
    assert_eq!(most, 1, "two pods of one identity at once");
    watch.abort();
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_nodeos_validator_is_ready_by_its_get_info() {
    let lab = lab().await;
    let ns = lab.namespace("validator-nodeos").await;
    let _op = lab.start_operator(&ns);
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    let mut v = crate::common::yaml_file("manifests/validators/nodeos.yaml");
    v["metadata"] = json!({"name": "wax-api", "namespace": ns});
    v["spec"]["nodeName"] = json!("bm-09");
    let v: Validator = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &v).await.unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = wait_for("wax-api Ready", Duration::from_secs(300), || {
        let (api, seen) = (api.clone(), seen.clone());
        async move {
            let v = api.get("wax-api").await.map_err(|e| e.to_string())?;
            let st = v.status.clone().ok_or("no status yet")?;
            let mut seen = seen.lock().unwrap();
            if seen.last() != Some(&st.phase) {
                seen.push(st.phase);
            }
            match condition(&v, "Ready") {
                Some(c) if c.0 == "True" => Ok(v),
                other => Err(format!("{:?} {other:?} {:?}", st.phase, st.health)),
            }
        }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    let st = ready.status.clone().unwrap();
    assert_eq!(st.phase, ValidatorPhase::Running, "{st:?}");
    assert!(
        seen.first() != Some(&ValidatorPhase::Running),
        "Ready before nodeos answered: {seen:?}"
    );
    let health = st.health.clone().unwrap_or_default();
    assert!(
        health.starts_with("HTTP 200:") && health.contains("head_block_time"),
        "{health}"
    );
    assert!(
        st.head.is_some_and(|h| h > 0) && st.lag.is_some_and(|l| l <= 120),
        "{st:?}"
    );
    lab.delete_namespace(&ns).await;
}
