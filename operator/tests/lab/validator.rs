//! The Validator kind in the lab (issue 21): a Besu Validator reaches Ready from Besu's
//! own `/readiness` answer (the simulated Besu answers it on its Engine port as Besu
//! does, Host allowlist included); a second Validator naming the same identity gets no
//! pod and says which Validator holds it; bad input is refused naming the field.

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
