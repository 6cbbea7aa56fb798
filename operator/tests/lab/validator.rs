//! The Validator kind in the lab (issue 21): a Besu Validator reaches Ready from Besu's
//! own `/readiness` answer (the simulated Besu answers it on its Engine port as Besu
//! does, Host allowlist included); a second Validator naming the same identity gets no
//! pod and says which Validator holds it; an Agave Validator is Ready by its getHealth
//! and replaces its pod only in its restart window (the simulated Agave has a leader
//! schedule for its identity), never two pods of its identity at once; so is a
//! Frankendancer Validator (its Agave child's RPC, the same window); a nodeos Validator is
//! Ready by its get_info, and as a producer restarts only after its round; a node that
//! stops answering gets no second pod until its pod is confirmed gone, and the
//! replacement resumes from the ledger on the machine's volume; bad input is refused
//! naming the field.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use valtune::api::Validator;
use valtune::api::validator::ValidatorPhase;

use crate::common::{Lab, lab, refusals, wait_for};

const EXAMPLE: &str = "manifests/validators/besu.yaml";

/// The Besu example, renamed into `ns`, on `node`.
pub(crate) fn validator(ns: &str, name: &str, node: &str) -> Value {
    example(EXAMPLE, ns, name, node)
}

/// The example `file`, renamed into `ns`, on `node`.
pub(crate) fn example(file: &str, ns: &str, name: &str, node: &str) -> Value {
    let mut v = crate::common::yaml_file(file);
    v["metadata"] = json!({"name": name, "namespace": ns});
    on_node(&mut v, node);
    v
}

/// Pins a Validator to one of the lab's Validator machines (vv-01..06, lab/topology-test.yaml:
/// tainted so no trial of another test holds them), one per test.
pub(crate) fn on_node(v: &mut Value, node: &str) {
    v["spec"]["nodeName"] = json!(node);
    let tolerations = &mut v["spec"]["template"]["placement"]["tolerations"];
    if !tolerations.is_array() {
        *tolerations = json!([]);
    }
    tolerations.as_array_mut().unwrap().push(json!(
        {"key": "valtune.dev/lab-pool", "operator": "Equal", "value": "validators", "effect": "NoSchedule"}
    ));
}

/// Creates the Validator of the example `file`, named `name`, on the machine `node`.
async fn create_on(api: &Api<Validator>, file: &str, name: &str, node: &str) {
    // Its machine on time, whatever a failed run before left.
    slow_rpc(api.clone().into_client(), node, None).await;
    let ns = api.namespace().unwrap_or_default().to_string();
    let v: Validator = serde_json::from_value(example(file, &ns, name, node)).unwrap();
    api.create(&PostParams::default(), &v).await.unwrap();
}

/// Waits until the Validator is Ready, with the phases its status went through.
pub(crate) async fn wait_ready(
    api: &Api<Validator>,
    name: &str,
) -> (Validator, Vec<ValidatorPhase>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = wait_for(&format!("{name} Ready"), Duration::from_secs(300), || {
        let (api, seen) = (api.clone(), seen.clone());
        async move {
            let v = api.get(name).await.map_err(|e| e.to_string())?;
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
    (ready, seen)
}

pub(crate) fn condition(v: &Validator, type_: &str) -> Option<(String, String, String)> {
    v.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

pub(crate) async fn node_key(lab: &Lab, ns: &str) {
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
    let first: Validator = serde_json::from_value(validator(&ns, "besu-a", "vv-01")).unwrap();
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
    assert_eq!(spec.node_name.as_deref(), Some("vv-01"));
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
    let second: Validator = serde_json::from_value(validator(&ns, "besu-b", "vv-02")).unwrap();
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
                "a producing nodeos without its producer account",
                json!({"spec": {"role": "voting", "identity": {"secretName": "k"}, "template": {"besu": null, "nodeos": {"image": "waxteam/waxnode:v5.0.3wax02"}}}}),
                "spec.producerName",
                "a producing nodeos needs its producer account and its key",
            ),
            (
                "a nodeos producer's key in its config",
                json!({"spec": {"template": {"besu": null, "nodeos": {"image": "waxteam/waxnode:v5.0.3wax02", "config": {"signature-provider": "PUB_K1_x=KEY:PVT_K1_y"}}}}}),
                "spec.template.nodeos.config",
                "the key stays in its Secret",
            ),
            (
                "a nodeos standby",
                json!({"spec": {"role": "standby", "template": {"besu": null, "nodeos": {"image": "waxteam/waxnode:v5.0.3wax02"}}}}),
                "spec.role",
                "valtune has no nodeos standby",
            ),
            (
                "full Firedancer",
                json!({"spec": {"template": {"besu": null, "firedancer": {"image": "r/firedancer:v1.1.4", "flavor": "firedancer", "privileged": true}}}}),
                "spec.template.firedancer.flavor",
                "valtune runs Frankendancer Validators (fdctl, v0.x) only",
            ),
            (
                "the Frankendancer bench",
                json!({"spec": {"template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "workload": "bench", "capabilities": ["NET_RAW", "SYS_ADMIN"]}}}}),
                "spec.template.firedancer.workload",
                "a Validator follows its cluster",
            ),
            (
                "Frankendancer's RPC address in its config",
                json!({"spec": {"template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true, "config": {"rpc.bind_address": "127.0.0.1"}}}}}),
                "spec.template.firedancer.config",
                "rpc.bind_address (0.0.0.0, so the operator reads getHealth)",
            ),
            (
                "a producer name on a non-producer",
                json!({"spec": {"producerName": "bp1"}}),
                "spec.producerName",
                "producerName is a nodeos producer's account",
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
            (
                "a node key in extraArgs beside the identity",
                json!({"spec": {"template": {"extraArgs": ["--node-private-key-file=/data/key"]}}}),
                "spec.template.extraArgs",
                "remove it from extraArgs",
            ),
            (
                "--no-voting in extraArgs of an Agave Validator",
                json!({"spec": {"template": {"besu": null, "agave": {"image": "anzaxyz/agave:v4.0.3"}, "extraArgs": ["--no-voting"]}}}),
                "spec.template.extraArgs",
                "which valtune renders for an Agave Validator",
            ),
            (
                "--identity= in extraArgs of an Agave Validator",
                json!({"spec": {"template": {"besu": null, "agave": {"image": "anzaxyz/agave:v4.0.3"}, "extraArgs": ["--identity=/mnt/ledger/id.json"]}}}),
                "spec.template.extraArgs",
                "which valtune renders for an Agave Validator",
            ),
            (
                "a Frankendancer failover pair without the agent's privilege",
                json!({"spec": {"role": "voting", "identity": {"secretName": "fd-identity", "publicKey": "Stake11111111111111111111111111111111111111"}, "spareIdentity": {"secretName": "fd-spare"}, "voteAccount": {"secretName": "fd-vote"}, "template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true}}}}),
                "spec.identityAgentEntersValidatorMountNamespace",
                "needs identityAgentEntersValidatorMountNamespace: true: fdctl set-identity",
            ),
            (
                "a Frankendancer standby without the agent's privilege",
                json!({"spec": {"role": "standby", "identity": {"secretName": "fd-spare"}, "standbyFor": {"secretName": "fd-identity", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "fd-vote"}, "identityAgentEntersValidatorMountNamespace": false, "template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true}}}}),
                "spec.identityAgentEntersValidatorMountNamespace",
                "the identity agent must run it in that container's mount namespace",
            ),
            (
                "the agent's privilege on a Validator that is no Frankendancer pair member",
                json!({"spec": {"identityAgentEntersValidatorMountNamespace": true}}),
                "spec.identityAgentEntersValidatorMountNamespace",
                "this Validator is not one",
            ),
            (
                "a Frankendancer identity agent port on its RPC",
                json!({"spec": {"role": "standby", "identity": {"secretName": "fd-spare"}, "standbyFor": {"secretName": "fd-identity", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "fd-vote"}, "identityAgentEntersValidatorMountNamespace": true, "identityAgentPort": 8899, "template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true}}}}),
                "spec.identityAgentPort",
                "collides with a port Frankendancer binds",
            ),
            (
                "a Frankendancer identity agent port inside its config's dynamic_port_range",
                json!({"spec": {"role": "standby", "identity": {"secretName": "fd-spare"}, "standbyFor": {"secretName": "fd-identity", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "fd-vote"}, "identityAgentEntersValidatorMountNamespace": true, "template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true, "config": {"dynamic_port_range": "\"10900-11000\""}}}}}),
                "spec.identityAgentPort",
                "lies inside Frankendancer's dynamic_port_range",
            ),
            (
                "a Frankendancer identity agent port inside fdctl's default dynamic_port_range",
                json!({"spec": {"role": "standby", "identity": {"secretName": "fd-spare"}, "standbyFor": {"secretName": "fd-identity", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "fd-vote"}, "identityAgentEntersValidatorMountNamespace": true, "identityAgentPort": 8950, "template": {"besu": null, "firedancer": {"image": "r/frankendancer:v0.1106.40201", "privileged": true}}}}),
                "spec.identityAgentPort",
                "(template.firedancer.config's, default 8900-9000)",
            ),
            (
                "a spare identity that is the staked identity",
                json!({"spec": {"role": "voting", "identity": {"secretName": "staked", "key": "keypair", "publicKey": "Stake11111111111111111111111111111111111111"}, "spareIdentity": {"secretName": "staked"}, "voteAccount": {"secretName": "vote"}}}),
                "spec.spareIdentity",
                "spareIdentity is the staked identity itself",
            ),
            (
                "a spare identity with the staked identity's public key",
                json!({"spec": {"role": "voting", "identity": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "spareIdentity": {"secretName": "copy", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "vote"}}}),
                "spec.spareIdentity",
                "spareIdentity is the staked identity itself",
            ),
            (
                "a vote account that is the identity",
                json!({"spec": {"role": "voting", "identity": {"secretName": "staked", "key": "keypair"}, "voteAccount": {"secretName": "staked"}}}),
                "spec.voteAccount",
                "voteAccount is the identity keypair itself",
            ),
            (
                "a standby under the staked identity",
                json!({"spec": {"role": "standby", "identity": {"secretName": "staked", "key": "keypair"}, "standbyFor": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "vote"}}}),
                "spec.identity",
                "a standby's identity is the staked identity it stands by for",
            ),
            (
                "a standby whose vote account is the staked identity",
                json!({"spec": {"role": "standby", "identity": {"secretName": "spare"}, "standbyFor": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "staked"}}}),
                "spec.voteAccount",
                "voteAccount is the staked identity standbyFor names",
            ),
            (
                "an identity agent port on a Validator that is no pair member",
                json!({"spec": {"identityAgentPort": 10911}}),
                "spec.identityAgentPort",
                "identityAgentPort is the port of a failover pair member's identity agent",
            ),
            (
                "an identity agent port inside Agave's dynamicPortRange",
                json!({"spec": {"role": "standby", "identity": {"secretName": "spare"}, "standbyFor": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "vote"}, "identityAgentPort": 8010, "template": {"besu": null, "agave": {"image": "anzaxyz/agave:v4.0.3"}, "storage": [{"role": "ledger", "size": "1Gi"}]}}}),
                "spec.identityAgentPort",
                "identityAgentPort (default 10910) collides with a port Agave binds",
            ),
            (
                "Agave's range widened over the default identity agent port",
                json!({"spec": {"role": "standby", "identity": {"secretName": "spare"}, "standbyFor": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "vote"}, "template": {"besu": null, "agave": {"image": "anzaxyz/agave:v4.0.3", "dynamicPortRange": "8000-12000"}, "storage": [{"role": "ledger", "size": "1Gi"}]}}}),
                "spec.identityAgentPort",
                "identityAgentPort (default 10910) collides with a port Agave binds",
            ),
            (
                "an identity agent port on an exporter's",
                json!({"spec": {"role": "standby", "identity": {"secretName": "spare"}, "standbyFor": {"secretName": "staked", "publicKey": "Stake11111111111111111111111111111111111111"}, "voteAccount": {"secretName": "vote"}, "identityAgentPort": 9634, "template": {"besu": null, "agave": {"image": "anzaxyz/agave:v4.0.3"}, "storage": [{"role": "ledger", "size": "1Gi"}]}}}),
                "spec.identityAgentPort",
                "identityAgentPort (default 10910) collides with a port Agave binds",
            ),
            (
                "fromExperiment without a name",
                json!({"spec": {"tuning": {"fromExperiment": ""}}}),
                "spec.tuning.fromExperiment",
                "at least 1",
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
pub(crate) fn keypair(seed: u8) -> String {
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
    /// How each pod's validator container ended, as its last status said: (exit code,
    /// reason).
    ended: std::collections::BTreeMap<String, (i32, String)>,
}

/// How a pod's validator container ended, if its status says it did.
fn ended(p: &Pod) -> Option<(i32, String)> {
    let cs = p.status.as_ref()?.container_statuses.as_ref()?;
    let t = cs
        .iter()
        .find(|c| c.name == "validator")?
        .state
        .as_ref()?
        .terminated
        .as_ref()?;
    Some((t.exit_code, t.reason.clone().unwrap_or_default()))
}

/// At no moment two pods of the identity, over a rollout the watch saw (two pods at least).
fn one_signer_throughout(signers: &std::sync::Mutex<Signers>) {
    let s = signers.lock().unwrap();
    assert!(s.seen.len() >= 2, "the watch saw {} pods", s.seen.len());
    assert_eq!(s.most, 1, "two pods of one identity at once");
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
                    if let Some(end) = ended(&p) {
                        st.ended.insert(uid(&p), end);
                    }
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

/// An image change of a Solana Validator (Agave, Frankendancer: the same window, over the
/// same RPC) whose identity leads a group of slots every 6,000 (the lab's schedule): with
/// an hour of idle time (9,000 slots) no window exists and the pod keeps running, saying
/// why, pass after pass; with the command's default (10 minutes, 1,500 slots) the window
/// opens between two groups and the pod is replaced, on the new image, and Ready again,
/// as the Restarting event says.
#[allow(clippy::too_many_arguments)]
async fn restarts_only_in_its_window(
    lab: &Lab,
    ns: &str,
    api: &Api<Validator>,
    pods: &Api<Pod>,
    name: &str,
    client: &str,
    old_image: &str,
    new_image: &str,
) {
    let old_uid = pods.get(name).await.unwrap().metadata.uid;

    // An image change, with a minimum idle time no gap in its leader schedule gives (an
    // hour: 9,000 slots; the lab's identity leads every 6,000): it waits, saying why,
    // while the pod keeps running, pass after pass.
    let patch = |p: Value| {
        let api = api.clone();
        async move {
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(p),
            )
            .await
            .unwrap();
        }
    };
    patch(json!({"spec": {
        "restartWindow": {"minIdleTime": 60},
        "template": {client: {"image": new_image}},
    }}))
    .await;
    let waiting = pending_change(api, name, "no idle window", Duration::from_secs(120)).await;
    assert!(
        waiting.contains(&format!("image {old_image} -> {new_image}"))
            && waiting.contains("at least 9000 slots"),
        "{waiting}"
    );
    let pending = Some(ValidatorPhase::RestartPending);
    keeps_its_pod(
        api,
        pods,
        name,
        &old_uid,
        pending,
        10,
        "with a leader slot near",
    )
    .await;

    // Its RPC too busy to answer in time (the lab's slow-RPC node label: every answer 5 s
    // late, past the operator's 3 s): a busy validator may still lead its slots, so the
    // change waits, saying why, and the pod keeps running; a timeout is not a refusal.
    let node = pods
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .unwrap();
    slow_rpc(lab.client.clone(), &node, Some(5)).await;
    let busy = pending_change(api, name, "did not answer", Duration::from_secs(90)).await;
    assert!(busy.contains("RPC did not answer"), "{busy}");
    keeps_its_pod(api, pods, name, &old_uid, None, 8, "on a getHealth timeout").await;
    slow_rpc(lab.client.clone(), &node, None).await;

    // The command's default (10 minutes, 1,500 slots): the window opens between two of
    // its leader groups, and the pod is replaced, on the new image, and Ready again.
    patch(json!({"spec": {"restartWindow": {"minIdleTime": null}}})).await;
    wait_for(
        &format!("{name} restarted and Ready"),
        Duration::from_secs(300),
        || {
            let (api, pods, old_uid) = (api.clone(), pods.clone(), old_uid.clone());
            async move {
                let p = pods.get(name).await.map_err(|e| e.to_string())?;
                let image = p.spec.as_ref().unwrap().containers[0].image.clone();
                let v = api.get(name).await.map_err(|e| e.to_string())?;
                let ready = condition(&v, "Ready").is_some_and(|c| c.0 == "True");
                if p.metadata.uid != old_uid && image.as_deref() == Some(new_image) && ready {
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
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(lab.client.clone(), ns);
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
    create_on(&api, AGAVE_EXAMPLE, "agave-a", "vv-04").await;

    // Ready only once Agave's own getHealth says "ok" (behind first, while it catches up).
    let (ready, seen) = wait_ready(&api, "agave-a").await;
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
    // Ready, so its RPC answered the operator at the pod's IP (the node's: host network);
    // and only there: not on the node's loopback, as 0.0.0.0 would also put it (with
    // every other address of the node, a public one included). lab/src/net.rs
    // `loopback_of`: the lab's stand-in for the node's 127.0.0.1.
    let ip: std::net::IpAddr = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .unwrap()
        .parse()
        .unwrap();
    let loopback = valtune_lab::net::loopback_of(ip).unwrap();
    let on_loopback = reqwest::Client::new()
        .post(format!("http://{loopback}:8899/"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "getHealth"}))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(
        on_loopback.as_ref().is_err_and(|e| e.is_connect()),
        "the RPC answers on the node's loopback {loopback}, not only on its address {ip}: {on_loopback:?}"
    );
    let args = pod.spec.clone().unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    let flag = |f: &str| flag_value(&args, f);
    assert_eq!(
        flag("--identity").as_deref(),
        Some("/etc/valtune/identity/keypair")
    );
    assert_eq!(
        flag("--vote-account").as_deref(),
        Some("/etc/valtune/vote/keypair")
    );
    assert!(!args.iter().any(|a| a == "--no-voting"), "{args:?}");
    let old_uid = pod.metadata.uid.clone().unwrap_or_default();
    restarts_only_in_its_window(
        &lab,
        &ns,
        &api,
        &pods,
        "agave-a",
        "agave",
        "anzaxyz/agave:v4.0.3",
        "registry.example.com/agave:v4.0.3-pc1024",
    )
    .await;
    // At no moment two pods of the identity.
    one_signer_throughout(&signers);
    // The replaced pod's validator ended on its preStop hook's `agave-validator exit`
    // (code 0, its ledger closed with a fastboot snapshot), not on the kubelet's SIGTERM
    // (143: agave-validator 4.0 has no handler, so the next start loads its archives).
    let end = signers.lock().unwrap().ended.get(old_uid.as_str()).cloned();
    assert_eq!(
        end,
        Some((0, "Completed".to_string())),
        "how the replaced pod's validator ended (with no hook, kwok deletes the pod at the SIGTERM, leaving no status: None)"
    );
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
    create_on(&api, "manifests/validators/nodeos.yaml", "wax-api", "vv-05").await;
    let (ready, seen) = wait_ready(&api, "wax-api").await;
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
    // lag is head - LIB, the blocks not yet irreversible: the lab's 325 (leap's DPoS)
    // in block numbers that grow 720 times slower (docs/lab.md), so under one.
    assert!(
        st.head.is_some_and(|h| h > 0) && st.lag.is_some_and(|l| (0..400).contains(&l)),
        "{st:?}"
    );

    // Now a producer: its account and its signature provider from a Secret (the old pod
    // is no producer, so it restarts at once).
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), &ns);
    let key: Secret = serde_json::from_value(json!({
        "metadata": {"name": "wax-producer"},
        "stringData": {"signature-provider": "PUB_K1_6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5BoDq1=KEY:PVT_K1_2bfGi9rYsXQSXXTvJbDAPhHLQUojjaNLomdm3cEJ1XTzMqUt3V"}
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &key).await.unwrap();
    const PRODUCER: &str = "valtunelab11";
    let patch = |p: Value| {
        let api = api.clone();
        async move {
            api.patch(
                "wax-api",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(p),
            )
            .await
            .unwrap();
        }
    };
    patch(json!({"spec": {"role": "voting", "producerName": PRODUCER,
        "identity": {"secretName": "wax-producer", "key": "signature-provider"}}}))
    .await;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = wait_for("wax-api producing", Duration::from_secs(300), || {
        let (api, pods) = (api.clone(), pods.clone());
        async move {
            let p = pods.get("wax-api").await.map_err(|e| e.to_string())?;
            let args = p.spec.as_ref().unwrap().containers[0]
                .args
                .clone()
                .unwrap_or_default();
            let v = api.get("wax-api").await.map_err(|e| e.to_string())?;
            let ready = condition(&v, "Ready").is_some_and(|c| c.0 == "True");
            match (
                args.iter().any(|a| a == PRODUCER),
                ready,
                p.status.and_then(|s| s.pod_ip),
            ) {
                (true, true, Some(ip)) => Ok((p.metadata.uid, ip)),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;

    // Its round, from the schedule nodeos serves: slot s (500 ms from 2000-01-01) is
    // producers[(s % (n * 12)) / 12]'s.
    let url = format!("http://{}:8888/v1/chain/get_producer_schedule", pod.1);
    let schedule: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let producers: Vec<String> = schedule["active"]["producers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["producer_name"].as_str().unwrap().to_string())
        .collect();
    let index = producers
        .iter()
        .position(|p| p == PRODUCER)
        .expect("elected") as i64;
    let n = producers.len() as i64;
    const EPOCH_MS: i64 = 946_684_800_000;
    let slot_ms = |slot: i64| EPOCH_MS + slot * 500;
    let now_ms = || jiff::Timestamp::now().as_millisecond();
    let cycle = n * 12;
    let next_start = |from_ms: i64| {
        let slot = (from_ms - EPOCH_MS) / 500;
        let start = slot - slot % cycle + index * 12;
        if start > slot { start } else { start + cycle }
    };
    // An image change 50 s before its next round (in the half of the gap that is closed):
    // it waits through the round, and the pod goes only once the round is over.
    let start = next_start(now_ms() + 55_000);
    let patch_at = slot_ms(start) - 50_000;
    tokio::time::sleep(Duration::from_millis((patch_at - now_ms()).max(0) as u64)).await;
    let deletion = std::sync::Arc::new(std::sync::Mutex::new(None::<i64>));
    let watch = {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let (deletion, old) = (deletion.clone(), pod.0.clone());
        let cfg = watcher::Config::default().fields("metadata.name=wax-api");
        let mut stream = watcher(pods.clone(), cfg).boxed();
        tokio::spawn(async move {
            while let Some(e) = stream.next().await {
                let (Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p))) = e else {
                    continue;
                };
                if p.metadata.uid == old
                    && let Some(at) = &p.metadata.deletion_timestamp
                {
                    // deletionTimestamp is now + the grace period.
                    let grace = p.metadata.deletion_grace_period_seconds.unwrap_or(0);
                    *deletion.lock().unwrap() = Some(at.0.as_millisecond() - grace * 1000);
                }
            }
        })
    };
    patch(json!({"spec": {"template": {"nodeos": {"image": "waxteam/waxnode:v5.0.3wax03"}}}}))
        .await;
    let waiting = wait_for(
        "wax-api waits for its round",
        Duration::from_secs(30),
        || {
            let api = api.clone();
            async move {
                let v = api.get("wax-api").await.map_err(|e| e.to_string())?;
                match v.status.and_then(|s| s.pending_change) {
                    Some(p) if p.waiting_for.contains("next round starts in") => Ok(p.waiting_for),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert!(waiting.contains(PRODUCER), "{waiting}");
    let round_end = slot_ms(start + 12);
    // When the operator deleted it: the deletionTimestamp a watch sees on the first pod.
    let deleted = wait_for("wax-api deleted", Duration::from_secs(180), || {
        let deletion = deletion.clone();
        async move {
            let at = *deletion.lock().unwrap();
            at.ok_or_else(|| "the first pod still runs".to_string())
        }
    })
    .await;
    watch.abort();
    // deletionTimestamp is in whole seconds: a second of slack.
    assert!(
        deleted >= round_end - 1_000 && deleted < round_end + 61_000,
        "deleted at {deleted} ms, its round ends at {round_end} ms"
    );
    lab.delete_namespace(&ns).await;
}

/// The Validator's pod as it is rendered now: the validator container's env var.
async fn env_of(pods: &Api<Pod>, pod: &str, name: &str) -> Option<String> {
    let p = pods.get(pod).await.ok()?;
    p.spec?.containers[0]
        .env
        .clone()?
        .into_iter()
        .find(|e| e.name == name)?
        .value
}

/// `spec.tuning.fromExperiment` (issue 21, part 6): a Besu Validator names an experiment
/// that does not exist yet (refused, it runs its template), then a real one-point
/// experiment finishes and its recommendation reaches the pod (Besu restarts at once) and
/// status; `valtune recommend --for` prints the Validator's patch, which the API server
/// takes.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn an_experiments_recommendation_is_applied_to_a_besu_validator() {
    let lab = lab().await;
    let ns = lab.namespace("validator-tuning").await;
    let _op = lab.start_operator(&ns);
    node_key(&lab, &ns).await;
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let mut v = crate::common::yaml_file("manifests/validators/besu-from-experiment.yaml");
    v["metadata"] = json!({"name": "besu-t", "namespace": ns});
    on_node(&mut v, "vv-06");
    let v: Validator = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &v).await.unwrap();

    // No experiment yet: refused, saying so, and the template runs as written.
    let refused = wait_for("TuningApplied=False", Duration::from_secs(120), || {
        let api = api.clone();
        let pods = pods.clone();
        async move {
            let v = api.get("besu-t").await.map_err(|e| e.to_string())?;
            pods.get_opt("besu-t")
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no pod yet")?;
            match condition(&v, "TuningApplied") {
                Some(c) if c.0 == "False" => Ok(c),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert_eq!(refused.1, "ExperimentNotFound", "{refused:?}");
    assert!(refused.2.contains("besu-allocators"), "{}", refused.2);
    let untuned = env_of(&pods, "besu-t", "BESU_OPTS")
        .await
        .unwrap_or_default();
    assert!(!untuned.contains("-Xmx"), "{untuned}");

    // A real experiment of one point, the example's name and template.
    let vx = crate::common::example_as(
        "manifests/examples/besu-allocator-heap-sweep.yaml",
        &ns,
        "besu-allocators",
        json!({"spec": {"sweep": {"allocator": ["glibc"], "mallocArenaMax": [2], "heap": ["5Gi"]},
                        "trial": {"measurement": {"duration": "30s"}}}}),
    );
    crate::common::create(&lab, &vx).await;
    let done =
        crate::common::wait_finished(&lab, &ns, "besu-allocators", Duration::from_secs(300)).await;
    let rec = done
        .status
        .clone()
        .unwrap()
        .recommendation
        .expect("a recommendation");
    assert_eq!(
        rec.point.clone().unwrap().settings["heap"],
        "5Gi",
        "{rec:?}"
    );

    // The watch on the experiment brings the answer; Besu restarts at once with it.
    let applied = wait_for("TuningApplied=True", Duration::from_secs(180), || {
        let api = api.clone();
        async move {
            let v = api.get("besu-t").await.map_err(|e| e.to_string())?;
            match condition(&v, "TuningApplied") {
                Some(c) if c.0 == "True" => Ok(v),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let st = applied.status.clone().unwrap();
    let a = st.applied_tuning.clone().expect("status.appliedTuning");
    assert_eq!(a.experiment, "besu-allocators");
    assert_eq!(a.summary, rec.summary);
    assert_eq!(a.trial, rec.trial);
    assert_eq!(Some(&a.point), rec.point.as_ref());
    let opts = env_of(&pods, "besu-t", "BESU_OPTS")
        .await
        .unwrap_or_default();
    assert!(opts.contains("-Xmx5g"), "{opts}");
    assert_eq!(
        env_of(&pods, "besu-t", "MALLOC_ARENA_MAX").await.as_deref(),
        Some("2")
    );
    // The operator never wrote spec.
    assert_eq!(api.get("besu-t").await.unwrap().spec, v.spec);

    // GitOps: the patch of the Validator that commits the same values.
    let valtune = std::path::Path::new(env!("CARGO_BIN_EXE_valtune"));
    let out = std::process::Command::new(valtune)
        .args(["recommend", "besu-allocators", "--for", "besu-t", "-n", &ns])
        .arg("--kubeconfig")
        .arg(&lab.state.kubeconfig)
        .output()
        .unwrap();
    let yaml = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    assert!(
        yaml.contains("# a merge patch of Validator besu-t's spec.template"),
        "{yaml}"
    );
    let patch: Value = serde_saphyr::from_str(&yaml).unwrap();
    let dry = kube::api::PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let patched = api
        .patch("besu-t", &dry, &kube::api::Patch::Merge(&patch))
        .await
        .expect("the API server refused the Validator's patch");
    let t = &patched.spec.template;
    assert_eq!(t.tuning.heap.as_deref(), Some("5Gi"), "{patch}");
    assert_eq!(t.tuning.malloc_arena_max, Some(2), "{patch}");
    assert_eq!(t.storage, v.spec.template.storage);
    lab.delete_namespace(&ns).await;
}

/// A Validator's pod is guarded by a budget that lets no eviction through (a drain stops
/// at it), and an identity Secret whose name is longer than a label value still gets a pod.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_validators_pod_is_not_evicted_and_a_long_identity_name_gets_a_pod() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let lab = lab().await;
    let ns = lab.namespace("validator-budget").await;
    let _op = lab.start_operator(&ns);
    let long = format!("besu-node-key-{}", "x".repeat(60));
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), &ns);
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": long},
        "stringData": {"key": "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"}
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    let mut v = validator(&ns, "besu-l", "vv-03");
    v["spec"]["identity"]["secretName"] = json!(long);
    api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let pod = wait_for("besu-l's pod running", Duration::from_secs(180), || {
        let pods = pods.clone();
        async move {
            let p = pods
                .get_opt("besu-l")
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no pod yet")?;
            match p.status.as_ref().and_then(|s| s.phase.clone()).as_deref() {
                Some("Running") => Ok(p),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    let label = pod.metadata.labels.unwrap()["valtune.dev/identity"].clone();
    assert!(
        label.len() <= 63 && label.starts_with("besu-node-key-"),
        "{label}"
    );

    let budgets: Api<PodDisruptionBudget> = Api::namespaced(lab.client.clone(), &ns);
    let b = budgets.get("besu-l").await.unwrap();
    assert_eq!(b.metadata.owner_references.unwrap()[0].kind, "Validator");
    // What `kubectl drain` does: the Eviction API, refused (429) by the budget. The
    // disruption controller must have counted the pod first.
    wait_for(
        "the budget to count the pod",
        Duration::from_secs(60),
        || {
            let budgets = budgets.clone();
            async move {
                let b = budgets.get("besu-l").await.map_err(|e| e.to_string())?;
                match b.status.map(|s| s.expected_pods) {
                    Some(1) => Ok(()),
                    other => Err(format!("expected pods {other:?}")),
                }
            }
        },
    )
    .await;
    // One request, answered as the API server answers it: kube 5's client retries a 429
    // up to 15 times with doubling pauses (kube-client 5.0.0, src/client/retry.rs
    // `RetryPolicy::server_retry`, on by `Config::default_retry`), minutes before the same
    // refusal would come back.
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&lab.state.kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    config.default_retry = false;
    let once: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), &ns);
    match once.evict("besu-l", &Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 429, "{s:?}"),
        other => panic!("the eviction went through: {other:?}"),
    }
    assert!(
        pods.get("besu-l")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    lab.delete_namespace(&ns).await;
}

/// A Frankendancer Validator (issue 21): voting with its keys from Secrets (the start
/// script copies them for fdctl's user; the simulated Frankendancer reads its identity
/// from the copy), Ready only once its Agave child's getHealth says "ok", and an image
/// change applied only in the restart window Agave's command would wait for, over the
/// same RPC.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_frankendancer_validator_is_ready_by_get_health_and_restarts_only_in_its_window() {
    let lab = lab().await;
    let ns = lab.namespace("validator-fd").await;
    let _op = lab.start_operator(&ns);
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), &ns);
    for (name, seed) in [("fd-identity", 3), ("fd-vote", 4)] {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name},
            "stringData": {"keypair": keypair(seed)}
        }))
        .unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let (signers, watch) = watch_signers(pods.clone(), "fd-identity");
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    create_on(
        &api,
        "manifests/validators/frankendancer.yaml",
        "fd-a",
        "vv-fd",
    )
    .await;

    let (ready, seen) = wait_ready(&api, "fd-a").await;
    let st = ready.status.clone().unwrap();
    assert_eq!(st.phase, ValidatorPhase::Running, "{st:?}");
    assert!(
        seen.first() != Some(&ValidatorPhase::Running),
        "Ready before Frankendancer answered: {seen:?}"
    );
    let health = st.health.clone().unwrap_or_default();
    assert!(health.contains(r#""result":"ok""#), "{health}");
    assert!(st.head.is_some_and(|h| h > 0), "{st:?}");

    restarts_only_in_its_window(
        &lab,
        &ns,
        &api,
        &pods,
        "fd-a",
        "firedancer",
        "registry.example.com/frankendancer:v0.1106.40201",
        "registry.example.com/frankendancer:v0.1105.40200",
    )
    .await;
    one_signer_throughout(&signers);
    watch.abort();
    lab.delete_namespace(&ns).await;
}

/// What each pod (by uid) answered `getSlot` with, polled from the pod's own RPC every
/// tenth of a second: the first and the last slot, and when.
#[derive(Clone, Copy)]
struct Answered {
    first: (u64, std::time::Instant),
    last: (u64, std::time::Instant),
}

type Slots = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Answered>>>;

fn poll_slots(pods: Api<Pod>, name: &'static str) -> (Slots, tokio::task::JoinHandle<()>) {
    let slots: Slots = Default::default();
    let out = slots.clone();
    let task = tokio::spawn(async move {
        // A connection per call: a pooled one to the same address (a host-network pod's
        // replacement has its node's) would reach the old process.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Ok(Some(p)) = pods.get_opt(name).await else {
                continue;
            };
            let (Some(uid), Some(ip)) = (
                p.metadata.uid.clone(),
                p.status.as_ref().and_then(|s| s.pod_ip.clone()),
            ) else {
                continue;
            };
            let args = p.spec.unwrap().containers[0]
                .args
                .clone()
                .unwrap_or_default();
            let port = args
                .iter()
                .position(|a| a == "--rpc-port")
                .map(|i| args[i + 1].clone())
                .unwrap_or_else(|| "8899".into());
            let got = http
                .post(format!("http://{ip}:{port}/"))
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "getSlot"}))
                .timeout(Duration::from_millis(500))
                .send()
                .await;
            let Ok(resp) = got else { continue };
            let Some(slot) = resp
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["result"].as_u64())
            else {
                continue;
            };
            let now = (slot, std::time::Instant::now());
            let mut s = out.lock().unwrap();
            s.entry(uid)
                .or_insert(Answered {
                    first: now,
                    last: now,
                })
                .last = now;
        }
    });
    (slots, task)
}

/// Makes the validators of a lab node answer their JSON-RPC `seconds` late, or on time
/// again (None): the lab's slow-RPC label (lab/src/topology.rs `SLOW_RPC_LABEL`).
/// The value following `flag` in a container's args.
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// What the Validator's pending change waits for, once it says `needle`.
async fn pending_change(
    api: &Api<Validator>,
    name: &str,
    needle: &str,
    within: Duration,
) -> String {
    wait_for(&format!("{name} waits: {needle}"), within, || {
        let api = api.clone();
        async move {
            let v = api.get(name).await.map_err(|e| e.to_string())?;
            let st = v.status.clone().ok_or("no status")?;
            match st.pending_change {
                Some(p) if p.waiting_for.contains(needle) => Ok(p.waiting_for),
                other => Err(format!("{:?} {other:?}", st.phase)),
            }
        }
    })
    .await
}

/// For `seconds`, the pod `old_uid` runs on, not deleted (and the Validator in `phase`).
async fn keeps_its_pod(
    api: &Api<Validator>,
    pods: &Api<Pod>,
    name: &str,
    old_uid: &Option<String>,
    phase: Option<ValidatorPhase>,
    seconds: u32,
    why: &str,
) {
    for _ in 0..seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let p = pods.get(name).await.unwrap();
        assert_eq!(&p.metadata.uid, old_uid, "restarted {why}");
        assert!(p.metadata.deletion_timestamp.is_none(), "deleted {why}");
        if let Some(phase) = phase {
            assert_eq!(api.get(name).await.unwrap().status.unwrap().phase, phase);
        }
    }
}

async fn slow_rpc(client: kube::Client, node: &str, seconds: Option<u32>) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let value = seconds.map(|s| s.to_string());
    nodes
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {"valtune.dev/lab-slow-rpc": value}}}),
            ),
        )
        .await
        .unwrap();
}

/// Turns a lab node's machine off, or on again: kwok plays the nodes labelled
/// `valtune.dev/lab-kubelet=answers` (lab/src/topology.rs `KUBELET_LABEL`), so with `off`
/// the node's Lease and heartbeats stop, and the lab's kubelet kills its processes (its
/// disks stay: lab/src/kubelet `NodeState::Off`); the node controller marks it not Ready
/// (its pods still run, as far as anyone knows, and nothing confirms their deletion).
pub(crate) async fn node_answers(lab: &Lab, node: &str, answers: bool) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(lab.client.clone());
    let value = if answers { "answers" } else { "off" };
    nodes
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {"valtune.dev/lab-kubelet": value}}}),
            ),
        )
        .await
        .unwrap();
}

/// The node's machine goes off ([`node_answers`] false), until the node controller says
/// so (Ready not True). kwok v0.7.0 can miss it, most likely a heartbeat job in flight
/// when the node leaves its watch plays and schedules the next one after the Deleted event
/// cancelled the queued one (pkg/kwok/controllers/node_controller.go `watchResources`), so
/// it heartbeats on, every 22 s, and the node stays Ready (seen once in six suites: its
/// Lease stopped, its status patches did not). The lab's stand-in for a machine going away,
/// not the operator, is what is tried again: answering, then stopped again.
async fn node_stops(lab: &Lab, node: &str) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(lab.client.clone());
    for _ in 0..3 {
        node_answers(lab, node, false).await;
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let ready = nodes.get(node).await.ok().and_then(|n| {
                n.status?
                    .conditions?
                    .into_iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.status)
            });
            if ready.as_deref() != Some("True") {
                return;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        node_answers(lab, node, true).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    panic!("node {node} stayed Ready after its kubelet stopped answering, three times");
}

/// A node that stops answering does not get a second pod: its pod may still run. Once an
/// operator confirms it gone (a forced deletion), the replacement is created, and once the
/// machine is back it resumes from the ledger on the machine's volume, catching up the
/// gap only (its first slot is near its last one, not near the chain's head).
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_node_that_stops_answering_gets_no_second_pod_and_the_ledger_survives() {
    let lab = lab().await;
    let ns = lab.namespace("validator-lost").await;
    let _op = lab.start_operator(&ns);
    agave_keys(&lab, &ns).await;
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), &ns);
    let (signers, watch) = watch_signers(pods.clone(), "agave-identity");
    let (slots, poll) = poll_slots(pods.clone(), "agave-lost");
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), &ns);
    create_on(&api, AGAVE_EXAMPLE, "agave-lost", "vv-lost").await;
    wait_ready(&api, "agave-lost").await;
    let old = pods.get("agave-lost").await.unwrap().metadata.uid.unwrap();

    node_stops(&lab, "vv-lost").await;
    let why = wait_for("NodeNotAnswering", Duration::from_secs(120), || {
        let api = api.clone();
        async move {
            let v = api.get("agave-lost").await.map_err(|e| e.to_string())?;
            match condition(&v, "Ready") {
                // Not the client's NoAnswer, which may come first (its process is killed
                // with the machine before the node controller marks the node).
                Some((_, r, m)) if r == "NodeNotAnswering" => Ok(m),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert!(
        why.contains("vv-lost") && why.contains("--force --grace-period=0"),
        "{why}"
    );
    // Pass after pass, the pod that may still run is the only one.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let p = pods.get("agave-lost").await.unwrap();
        assert_eq!(p.metadata.uid.as_deref(), Some(old.as_str()), "replaced");
    }
    // The operator (the person) knows the machine is off and says so.
    pods.delete(
        "agave-lost",
        &kube::api::DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    wait_for("a replacement pod", Duration::from_secs(60), || {
        let (pods, old) = (pods.clone(), old.clone());
        async move {
            let p = pods.get("agave-lost").await.map_err(|e| e.to_string())?;
            match p.metadata.uid {
                Some(u) if u != old => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;

    // The machine stays away a while (the replacement Pending: the node is not Ready),
    // then comes back with its disks: the replacement runs there, from its ledger.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let p = pods.get("agave-lost").await.unwrap();
    assert_eq!(
        p.status.and_then(|s| s.phase).as_deref(),
        Some("Pending"),
        "the replacement ran on a node that does not answer"
    );
    node_answers(&lab, "vv-lost", true).await;
    let (_, _) = wait_ready(&api, "agave-lost").await;
    let p = pods.get("agave-lost").await.unwrap();
    let new = p.metadata.uid.clone().unwrap();
    let validator = p.spec.as_ref().unwrap().containers[0].name.clone();
    let started = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == validator))
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .expect("the new container's start")
        .0;
    let (last, first) = {
        let s = slots.lock().unwrap();
        (
            s[&old].last,
            s.get(&new).expect("the new pod answered getSlot").first,
        )
    };
    // Between the old process's last answer and the new one's first the chain went on,
    // 2.5 slots a simulated second. From its ledger the new one replays from its last
    // slot, 4.5 slots a simulated second since its start (two over the chain's), so its
    // first answer is within that of the old one's last; from a fresh snapshot it would
    // be near the chain's head (at most 10,800 slots behind it), far past that.
    let scale = lab.state.time_scale;
    let chain_moved = (first.1 - last.1).as_secs_f64() * scale * 2.5;
    let since_start = (jiff::Timestamp::now().duration_since(started).as_secs_f64()
        - first.1.elapsed().as_secs_f64())
    .max(0.0)
        * scale;
    // startedAt has whole seconds: one more second of replay, and the model's jitter.
    let replayed = 4.5 * (since_start + scale) + 200.0;
    assert!(
        chain_moved > replayed + 10_800.0 + 10_000.0,
        "the outage was too short to tell: the chain moved {chain_moved:.0}, {replayed:.0} replayed"
    );
    assert!(
        first.0 + 200 >= last.0 && ((first.0 as i64 - last.0 as i64) as f64) < replayed,
        "first slot {} after the restart, last {} before: {} on, {replayed:.0} replayable since its start; the chain moved {chain_moved:.0}",
        first.0,
        last.0,
        first.0 as i64 - last.0 as i64
    );
    let most = signers.lock().unwrap().most;
    assert_eq!(most, 1, "two pods of one identity at once");
    poll.abort();
    watch.abort();
    lab.delete_namespace(&ns).await;
}

pub(crate) const FAILOVER_EXAMPLE: &str = "manifests/validators/agave-failover.yaml";

/// What each pod (by uid) said `getIdentity` was, polled every tenth of a second from
/// both pods of a failover pair: every identity each pod reported, and every moment both
/// surely held the staked one (the one thing that must never happen).
///
/// The two pods are asked one after the other, so one round's answers are not one
/// moment: a pod that answered "staked" and handed the identity over before the other
/// was asked would look like two signers. What proves two at once: one pod's staked
/// answer (sent to received) within a stretch the other surely held it, from one staked
/// answer of it to its next, with nothing else answered between.
#[derive(Default)]
pub(crate) struct Identities {
    seen: std::collections::BTreeMap<String, Vec<String>>,
    /// Per pod ("name (uid)"): each answer as (sent, received, staked).
    answers: std::collections::BTreeMap<String, Vec<(Instant, Instant, bool)>>,
    rounds: usize,
    /// Rounds where both pods answered staked, one after the other (a hand-over between
    /// the two reads, unless [`Identities::both`] proves an overlap): printed, so a run
    /// shows how close the poll came.
    same_round: Vec<String>,
    /// Per pod name: the identity it answered last.
    last: std::collections::BTreeMap<String, String>,
}

impl Identities {
    /// Each pair of pods both surely holding the staked identity at one moment.
    pub(crate) fn both(&self) -> Vec<String> {
        let held = |a: &[(Instant, Instant, bool)]| -> Vec<(Instant, Instant)> {
            a.windows(2)
                .filter(|w| w[0].2 && w[1].2)
                .map(|w| (w[0].1, w[1].0))
                .filter(|(from, to)| from <= to)
                .collect()
        };
        let mut out = Vec::new();
        for (x, xs) in &self.answers {
            for (y, ys) in &self.answers {
                if x == y || x.split(' ').next() == y.split(' ').next() {
                    continue;
                }
                for (from, to) in held(xs) {
                    let within = ys.iter().any(|(sent, received, staked)| {
                        *staked && *sent >= from && *received <= to
                    });
                    if within {
                        out.push(format!("{y} answered staked while {x} held it"));
                    }
                }
            }
        }
        out
    }
}

/// The overlap rule on hand-made answers (no lab): a hand-over between two sequential
/// reads is not two signers; a staked answer inside the other's held stretch is.
#[test]
fn two_signers_need_an_answer_within_the_others_held_stretch() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let answers = |a: Vec<(u64, u64, bool)>, b: Vec<(u64, u64, bool)>| Identities {
        answers: [("agave-a (1)", a), ("agave-b (2)", b)]
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.into_iter().map(|(s, r, x)| (at(s), at(r), x)).collect(),
                )
            })
            .collect(),
        ..Default::default()
    };
    // a answers staked, hands over, then b answers staked in the same round: no proof.
    let handed = answers(
        vec![(0, 10, true), (100, 110, false)],
        vec![(20, 90, true), (120, 130, true)],
    );
    assert!(handed.both().is_empty(), "{:?}", handed.both());
    // a held it from 10 to 100 (staked at both ends); b answered staked within: two.
    let overlap = answers(vec![(0, 10, true), (100, 110, true)], vec![(20, 90, true)]);
    assert_eq!(
        overlap.both(),
        ["agave-b (2) answered staked while agave-a (1) held it"]
    );
}

fn poll_identities(
    pods: Api<Pod>,
    names: [&'static str; 2],
    staked: String,
) -> (
    std::sync::Arc<std::sync::Mutex<Identities>>,
    tokio::task::JoinHandle<()>,
) {
    let state = std::sync::Arc::new(std::sync::Mutex::new(Identities::default()));
    let out = state.clone();
    let task = tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let start = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut round = Vec::new();
            for name in names {
                let Ok(Some(p)) = pods.get_opt(name).await else {
                    continue;
                };
                let (Some(uid), Some(ip)) = (
                    p.metadata.uid.clone(),
                    p.status.as_ref().and_then(|s| s.pod_ip.clone()),
                ) else {
                    continue;
                };
                let sent = Instant::now();
                let got = http
                    .post(format!("http://{ip}:8899/"))
                    .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "getIdentity"}))
                    .timeout(Duration::from_millis(500))
                    .send()
                    .await;
                let Ok(resp) = got else { continue };
                let Some(id) = resp
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["result"]["identity"].as_str().map(String::from))
                else {
                    continue;
                };
                round.push((name, uid, sent, Instant::now(), id));
            }
            let mut s = out.lock().unwrap();
            s.rounds += 1;
            if round.len() == 2 && round.iter().all(|r| r.4 == staked) {
                let ms = |t: Instant| t.duration_since(start).as_millis();
                let line = round
                    .iter()
                    .map(|r| format!("{} staked {}..{} ms", r.0, ms(r.2), ms(r.3)))
                    .collect::<Vec<_>>()
                    .join(", then ");
                let n = s.rounds;
                s.same_round.push(format!("round {n}: {line}"));
            }
            for (name, uid, sent, received, id) in round {
                s.last.insert(name.to_string(), id.clone());
                s.answers
                    .entry(format!("{name} ({uid})"))
                    .or_default()
                    .push((sent, received, id == staked));
                let ids = s.seen.entry(uid).or_default();
                if ids.last() != Some(&id) {
                    ids.push(id);
                }
            }
        }
    });
    (state, task)
}

/// The public key (base58) of a [`keypair`] file: its last 32 bytes.
pub(crate) fn pubkey(seed: u8) -> String {
    let bytes: Vec<u8> = serde_json::from_str(&keypair(seed)).unwrap();
    valtune_lab::sim::clients::agave::identity::base58(&bytes[32..])
}

pub(crate) async fn identity_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    let ip = pods.get(name).await.ok()?.status?.pod_ip?;
    let v: Value = reqwest::Client::new()
        .post(format!("http://{ip}:8899/"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "getIdentity"}))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["result"]["identity"].as_str().map(String::from)
}

/// Secrets of keypairs, one per (name, seed).
pub(crate) async fn key_secrets(lab: &Lab, ns: &str, keys: &[(&str, u8)]) {
    let secrets: Api<Secret> = Api::namespaced(lab.client.clone(), ns);
    for (name, seed) in keys {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name},
            "stringData": {"keypair": keypair(*seed)}
        }))
        .unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
}

/// A failover pair as both failover tests start one: its keys as Secrets (`{keys}-identity`,
/// `-vote`, `-spare-a`, `-spare-b` from seeds `seed`..`seed + 3`), both pods' getIdentity
/// polled from the start, and the example's two Validators created on their nodes.
pub(crate) struct PairStart {
    pub(crate) pods: Api<Pod>,
    pub(crate) api: Api<Validator>,
    pub(crate) ids: std::sync::Arc<std::sync::Mutex<Identities>>,
    pub(crate) poll: tokio::task::JoinHandle<()>,
    pub(crate) staked: String,
    pub(crate) spare_a: String,
    pub(crate) spare_b: String,
}

pub(crate) async fn start_pair(
    lab: &Lab,
    ns: &str,
    (keys, seed): (&str, u8),
    example: &str,
    members: [(&'static str, &str); 2],
) -> PairStart {
    let names = ["identity", "vote", "spare-a", "spare-b"].map(|k| format!("{keys}-{k}"));
    let secrets: Vec<(&str, u8)> = names.iter().map(String::as_str).zip(seed..).collect();
    key_secrets(lab, ns, &secrets).await;
    let staked = pubkey(seed);
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), ns);
    let (ids, poll) = poll_identities(pods.clone(), members.map(|m| m.0), staked.clone());
    let api: Api<Validator> = Api::namespaced(lab.client.clone(), ns);
    create_pair(&api, example, members, &staked).await;
    PairStart {
        pods,
        api,
        ids,
        poll,
        staked,
        spare_a: pubkey(seed + 2),
        spare_b: pubkey(seed + 3),
    }
}

/// The failover pair of the example `file` (the active first), as `members` (name,
/// machine), with the staked identity's public key `staked`.
pub(crate) async fn create_pair(
    api: &Api<Validator>,
    file: &str,
    members: [(&str, &str); 2],
    staked: &str,
) {
    for (i, (name, node)) in members.into_iter().enumerate() {
        create_member(api, file, i, (name, node), staked).await;
    }
}

/// The `index`th Validator of the failover pair example `file` (0: the active), as `name`
/// on machine `node`, with the staked identity's public key `staked`.
pub(crate) async fn create_member(
    api: &Api<Validator>,
    file: &str,
    index: usize,
    (name, node): (&str, &str),
    staked: &str,
) {
    let ns = api.namespace().unwrap_or_default().to_string();
    let text = std::fs::read_to_string(crate::common::repo_root().join(file)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let mut v = docs[index].clone();
    v["metadata"] = json!({"name": name, "namespace": ns});
    on_node(&mut v, node);
    for field in ["identity", "standbyFor"] {
        if v["spec"][field]["publicKey"].is_string() {
            v["spec"][field]["publicKey"] = json!(staked);
        }
    }
    let v: Validator = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &v).await.unwrap();
}

/// `valtune failover FROM --to TO`, as a user runs it. On the blocking pool, not the
/// test's runtime thread: the getIdentity poll must go on while the identity moves (run
/// on that thread, the poll stood still through every hand-over and could not fail).
pub(crate) async fn failover(lab: &Lab, ns: &str, from: &str, to: &str) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_valtune"));
    command
        .args(["failover", from, "--to", to, "-n", ns, "--wait", "5m"])
        .arg("--kubeconfig")
        .arg(&lab.state.kubeconfig);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// Waits until `name`'s pod answers getIdentity with `id`.
pub(crate) async fn wait_identity(pods: &Api<Pod>, name: &str, id: &str) {
    wait_for(
        &format!("{name} reports {id}"),
        Duration::from_secs(120),
        || async move {
            match identity_of(pods, name).await {
                Some(got) if got == id => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Waits until `name` says it signs (IdentityHeld True, Signs).
async fn wait_says_it_signs(api: &Api<Validator>, name: &str) {
    wait_for(
        &format!("{name} says it signs"),
        Duration::from_secs(60),
        || async move {
            let v = api.get(name).await.map_err(|e| e.to_string())?;
            match condition(&v, "IdentityHeld") {
                Some(c) if c.0 == "True" && c.1 == "Signs" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Waits until the poll has seen each (pod, identity) as that pod's last answer: a move
/// in the lab takes seconds, so the test does not go on before the poll saw it.
async fn polled(ids: &std::sync::Mutex<Identities>, want: &[(&str, &str)]) {
    wait_for(
        "the poll to see the move",
        Duration::from_secs(30),
        || async {
            let ids = ids.lock().unwrap();
            let missing: Vec<_> = want
                .iter()
                .filter(|(pod, id)| ids.last.get(*pod).map(String::as_str) != Some(*id))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("{missing:?} last {:?}", ids.last))
            }
        },
    )
    .await;
}

/// A failover asked with the CLI went through, the getIdentity poll `ids` going on
/// meanwhile: `to` signs with `staked` and holds the identity's Lease (`lease`), `from`
/// reports its spare identity `spare`.
async fn moved(
    lab: &Lab,
    ns: &str,
    ids: &std::sync::Mutex<Identities>,
    (from, to): (&str, &str),
    (staked, spare): (&str, &str),
    lease: &str,
) {
    let rounds = || ids.lock().unwrap().rounds;
    let before = rounds();
    let out = failover(lab, ns, from, to).await;
    assert!(out.status.success(), "{out:?}");
    // The poll went on while the identity moved (it is the proof of no overlap).
    assert!(rounds() >= before + 3, "{} poll rounds", rounds() - before);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("{to} signs with {staked}")),
        "{out:?}"
    );
    let leases: Api<Lease> = Api::namespaced(lab.client.clone(), ns);
    let l = leases.get(lease).await.unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some(to));
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), ns);
    assert_eq!(identity_of(&pods, to).await.as_deref(), Some(staked));
    assert_eq!(identity_of(&pods, from).await.as_deref(), Some(spare));
}

/// Failover (issue 21, part 5): a voting Agave and its standby on two machines, set up
/// as agave's failover guide sets them up (manifests/validators/agave-failover.yaml);
/// `valtune failover` moves the staked identity: the active switches to its spare
/// identity, the standby copies the tower from the active's identity agent and takes the
/// identity with --require-tower, and the Lease moves. Both pods' getIdentity, polled
/// throughout, never both report the staked identity, and neither a restart of the old
/// active's pod nor of the operator brings a second signer.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_voting_agave_identity_fails_over_to_its_standby_and_never_signs_twice() {
    let lab = lab().await;
    let ns = lab.namespace("validator-failover").await;
    let op = lab.start_operator(&ns);
    let PairStart {
        pods,
        api,
        ids,
        poll,
        staked,
        spare_a,
        spare_b,
    } = start_pair(
        &lab,
        &ns,
        ("agave", 1),
        FAILOVER_EXAMPLE,
        [("agave-a", "vv-active"), ("agave-b", "vv-standby")],
    )
    .await;

    // The holder signs with the staked identity (its pod started on its spare one and was
    // asked to take it); the standby follows on its own, signing nothing.
    wait_ready(&api, "agave-a").await;
    wait_ready(&api, "agave-b").await;
    wait_identity(&pods, "agave-a", &staked).await;
    assert_eq!(identity_of(&pods, "agave-b").await, Some(spare_b.clone()));
    let b = api.get("agave-b").await.unwrap();
    assert_eq!(b.status.clone().unwrap().phase, ValidatorPhase::Standby);
    let args = pods.get("agave-b").await.unwrap().spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    let flag = |f: &str| flag_value(&args, f);
    // The guide's hot spare: the link, the vote account, the staked identity as voter.
    assert_eq!(
        flag("--identity").as_deref(),
        Some("/mnt/ledger/valtune-identity.json")
    );
    assert_eq!(
        flag("--authorized-voter").as_deref(),
        Some("/etc/valtune/staked/keypair")
    );
    assert!(flag("--vote-account").is_some() && !args.iter().any(|a| a == "--no-voting"));

    // The failover, asked as a user asks it.
    let rounds = || ids.lock().unwrap().rounds;
    let before = rounds();
    let out = failover(&lab, &ns, "agave-a", "agave-b").await;
    assert!(out.status.success(), "{out:?}");
    // The poll went on while the identity moved (it is the proof of no overlap).
    assert!(rounds() >= before + 3, "{} poll rounds", rounds() - before);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("agave-b signs with {staked}")),
        "{out:?}"
    );
    let leases: Api<Lease> = Api::namespaced(lab.client.clone(), &ns);
    let lease = leases.get("valtune-identity-agave-identity").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("agave-b")
    );
    let b_uid = api.get("agave-b").await.unwrap().metadata.uid;
    assert_eq!(
        lease.metadata.owner_references.unwrap()[0].uid,
        b_uid.unwrap()
    );
    assert_eq!(identity_of(&pods, "agave-b").await, Some(staked.clone()));
    assert_eq!(identity_of(&pods, "agave-a").await, Some(spare_a.clone()));
    // Both say who signs.
    let a = api.get("agave-a").await.unwrap();
    let held = condition(&a, "IdentityHeld").unwrap();
    assert_eq!(
        (held.0.as_str(), held.1.as_str()),
        ("False", "Spare"),
        "{held:?}"
    );
    assert!(held.2.contains("held by Validator agave-b"), "{held:?}");
    let f = a.status.clone().unwrap().failover.unwrap();
    assert!(
        f.done && f.identity.as_deref() == Some(staked.as_str()),
        "{f:?}"
    );
    wait_says_it_signs(&api, "agave-b").await;
    // Each step an event, in order.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(lab.client.clone(), &ns);
    let mut steps: Vec<(String, String)> = events
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("Failover"))
        })
        .map(|e| {
            (
                e.first_timestamp
                    .map(|t| t.0.to_string())
                    .or(e.event_time.map(|t| t.0.to_string()))
                    .unwrap_or_default(),
                format!(
                    "{}: {}",
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default()
                ),
            )
        })
        .collect();
    steps.sort();
    let reasons: Vec<&str> = steps
        .iter()
        .map(|(_, m)| m.split(':').next().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "FailoverSwitchActive",
            "FailoverStandbyTakes",
            "FailoverDone"
        ],
        "{steps:?}"
    );
    assert!(
        steps[1].1.contains("with the tower file copied from"),
        "{steps:?}"
    );

    // The old active's pod restarted: it comes back on its spare identity (the link).
    let old = pods.get("agave-a").await.unwrap().metadata.uid;
    pods.delete("agave-a", &Default::default()).await.unwrap();
    wait_for("agave-a back, spare", Duration::from_secs(180), || {
        let (pods, old, spare_a) = (pods.clone(), old.clone(), spare_a.clone());
        async move {
            let p = pods.get("agave-a").await.map_err(|e| e.to_string())?;
            if p.metadata.uid == old {
                return Err("the old pod".into());
            }
            match identity_of(&pods, "agave-a").await {
                Some(id) if id == spare_a => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    // And a restart of the operator changes nothing.
    drop(op);
    let _op = lab.start_operator(&ns);
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(identity_of(&pods, "agave-a").await, Some(spare_a.clone()));
    assert_eq!(identity_of(&pods, "agave-b").await, Some(staked.clone()));

    // Moving it back, manifests untouched: the Lease's holder (agave-b, the standby by
    // its spec) hands the identity over; agave-a, which holds it no more, cannot.
    let out = failover(&lab, &ns, "agave-a", "agave-b").await;
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("agave-b already signs"),
        "{out:?}"
    );
    let before = rounds();
    let out = failover(&lab, &ns, "agave-b", "agave-a").await;
    assert!(out.status.success(), "{out:?}");
    assert!(rounds() >= before + 3, "{} poll rounds", rounds() - before);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("agave-a signs with {staked}")),
        "{out:?}"
    );
    let lease = leases.get("valtune-identity-agave-identity").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("agave-a")
    );
    assert_eq!(identity_of(&pods, "agave-a").await, Some(staked.clone()));
    assert_eq!(identity_of(&pods, "agave-b").await, Some(spare_b.clone()));
    let b = api.get("agave-b").await.unwrap();
    let back = b.status.clone().unwrap().failover.unwrap();
    assert!(back.done && back.to == "agave-a", "{back:?}");
    wait_says_it_signs(&api, "agave-a").await;
    // The first failover's annotation, still on agave-a, starts nothing again.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(identity_of(&pods, "agave-a").await, Some(staked.clone()));
    assert_eq!(identity_of(&pods, "agave-b").await, Some(spare_b.clone()));

    poll.abort();
    {
        let ids = ids.lock().unwrap();
        eprintln!(
            "getIdentity poll: {} rounds; {} with both pods answering staked one after the other (a hand-over between the reads): {:?}",
            ids.rounds,
            ids.same_round.len(),
            ids.same_round
        );
        let both = ids.both();
        assert!(both.is_empty(), "two signers: {both:?}");
        // The poll saw the move: agave-a's first pod went from the staked identity to its
        // spare one (agave-b's, below, from its spare one to the staked one and back).
        let seen: Vec<&Vec<String>> = ids.seen.values().collect();
        assert!(
            seen.iter()
                .any(|s| s.ends_with(&[staked.clone(), spare_a.clone()])),
            "{:?}",
            ids.seen
        );
        // And back: agave-a's second pod from its spare identity to the staked one,
        // agave-b's from the staked one to its spare one.
        assert!(
            seen.iter()
                .any(|s| s.ends_with(&[spare_a.clone(), staked.clone()])),
            "{:?}",
            ids.seen
        );
        assert!(
            seen.iter()
                .any(|s| s.ends_with(&[spare_b.clone(), staked.clone(), spare_b.clone()])),
            "{:?}",
            ids.seen
        );
        assert!(ids.rounds > 50, "{} rounds", ids.rounds);
    }
    signed_by_both_never_twice(&lab, &ns, &staked, ["agave-a", "agave-b"]);
    lab.delete_namespace(&ns).await;
}

/// The lab's signing record of the pair's namespace: both members voted with the staked
/// identity (there and back), and the checker finds no two signers and no broken lockout.
fn signed_by_both_never_twice(lab: &Lab, ns: &str, staked: &str, members: [&str; 2]) {
    let (record, violations) = lab.signed(ns, staked);
    for m in members {
        assert!(
            record
                .iter()
                .any(|s| s.process.starts_with(&format!("{ns}/{m}/"))),
            "no vote of {m} with {staked} in the signing record: {record:?}"
        );
    }
    let shown: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(violations.is_empty(), "signing record: {shown:#?}");
}

pub(crate) const FD_FAILOVER_EXAMPLE: &str = "manifests/validators/frankendancer-failover.yaml";

/// Failover of a Frankendancer pair (manifests/validators/frankendancer-failover.yaml):
/// the same moves as the Agave pair's, each set-identity the validator image's `fdctl
/// set-identity` run by the identity agent in the validator container's mount namespace
/// (`nsenter`, which the lab judges from the pod spec: the processes shared, the agent's
/// SYS_ADMIN, SYS_CHROOT and SYS_PTRACE). There and back, both pods' getIdentity polled throughout,
/// never two signers.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_frankendancer_identity_fails_over_with_fdctl_set_identity_and_never_signs_twice() {
    let lab = lab().await;
    let ns = lab.namespace("validator-fd-failover").await;
    let op = lab.start_operator(&ns);
    let PairStart {
        pods,
        api,
        ids,
        poll,
        staked,
        spare_a,
        spare_b,
    } = start_pair(
        &lab,
        &ns,
        ("fd", 11),
        FD_FAILOVER_EXAMPLE,
        [("fd-a", "vv-fd-active"), ("fd-b", "vv-fd-standby")],
    )
    .await;
    wait_ready(&api, "fd-a").await;
    wait_ready(&api, "fd-b").await;
    // The holder took the staked identity with fdctl (its pod started on its spare one).
    wait_identity(&pods, "fd-a", &staked).await;
    assert_eq!(identity_of(&pods, "fd-b").await, Some(spare_b.clone()));
    let spec = pods.get("fd-b").await.unwrap().spec.unwrap();
    assert_eq!(spec.share_process_namespace, Some(true));

    polled(&ids, &[("fd-a", &staked), ("fd-b", &spare_b)]).await;
    let lease = "valtune-identity-fd-identity";
    moved(
        &lab,
        &ns,
        &ids,
        ("fd-a", "fd-b"),
        (&staked, &spare_a),
        lease,
    )
    .await;
    polled(&ids, &[("fd-a", &spare_a), ("fd-b", &staked)]).await;
    wait_says_it_signs(&api, "fd-b").await;
    moved(
        &lab,
        &ns,
        &ids,
        ("fd-b", "fd-a"),
        (&staked, &spare_b),
        lease,
    )
    .await;
    polled(&ids, &[("fd-a", &staked), ("fd-b", &spare_b)]).await;
    wait_says_it_signs(&api, "fd-a").await;

    poll.abort();
    {
        let ids = ids.lock().unwrap();
        let both = ids.both();
        assert!(both.is_empty(), "two signers: {both:?}");
        let seen: Vec<&Vec<String>> = ids.seen.values().collect();
        // fd-a: spare, staked, spare, staked; fd-b: spare, staked, spare.
        assert!(
            seen.iter()
                .any(|s| s.ends_with(&[staked.clone(), spare_a.clone(), staked.clone()])),
            "{:?}",
            ids.seen
        );
        assert!(
            seen.iter()
                .any(|s| s.ends_with(&[spare_b.clone(), staked.clone(), spare_b.clone()])),
            "{:?}",
            ids.seen
        );
        assert!(ids.rounds > 50, "{} rounds", ids.rounds);
    }
    signed_by_both_never_twice(&lab, &ns, &staked, ["fd-a", "fd-b"]);

    // The same pod without the privilege, as a node would refuse it: fd-b's pod spec,
    // asked by hand (the operator stopped) to take the identity fd-a holds, never signs.
    // Each under a name of its own: a pod created under a name just freed may meet the
    // old pod's deletion.
    drop(op);
    let spec = pods.get("fd-b").await.unwrap().spec.unwrap();
    gone(&pods, "fd-b").await;
    let mut no_ptrace = spec.clone();
    for c in no_ptrace.init_containers.iter_mut().flatten() {
        if c.name == "identity-agent" {
            c.security_context = None;
        }
    }
    let mut unshared = spec;
    unshared.share_process_namespace = None;
    for (name, spec, refusal) in [
        ("fd-b-no-ptrace", no_ptrace, "nsenter: can't open '/proc/"),
        ("fd-b-unshared", unshared, "no `fdctl run-agave` process in"),
    ] {
        refused_by_hand(&lab, &pods, name, spec, refusal, &spare_b).await;
        gone(&pods, name).await;
    }
    lab.delete_namespace(&ns).await;
}

/// Deletes pod `name` and waits until it is gone.
async fn gone(pods: &Api<Pod>, name: &str) {
    pods.delete(name, &Default::default()).await.unwrap();
    wait_for(
        &format!("{name} gone"),
        Duration::from_secs(120),
        || async {
            match pods.get_opt(name).await {
                Ok(Some(_)) => Err("still there".to_string()),
                Ok(None) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
}

/// Runs a pod `name` of `spec`, asked to take the staked identity (the request
/// annotation its agent follows), and checks its agent says `refusal` while the validator
/// keeps reporting `spare`.
async fn refused_by_hand(
    lab: &Lab,
    pods: &Api<Pod>,
    name: &str,
    spec: k8s_openapi::api::core::v1::PodSpec,
    refusal: &str,
    spare: &str,
) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"valtune.dev/identity-request": "1 take"}},
        "spec": spec,
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let ns = pods.namespace().unwrap_or_default().to_string();
    // Up, on its spare identity; then asked, refused, and still on it.
    wait_identity(pods, name, spare).await;
    let log = lab
        .state
        .dir
        .join("logs/pods")
        .join(format!("{ns}_{name}_identity-agent.log"));
    wait_for(
        &format!("{name}'s agent refused: {refusal}"),
        Duration::from_secs(120),
        || async {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let last = text.lines().last().unwrap_or_default().to_string();
            if last.contains("request '1 take'") && last.contains(refusal) {
                Ok(())
            } else {
                Err(last)
            }
        },
    )
    .await;
    assert_eq!(identity_of(pods, name).await.as_deref(), Some(spare));
}
