//! An Agave failover pair member's pod: a machine set up as agave's failover guide sets
//! both of its machines up (anza-xyz/agave docs/src/operations/guides/
//! validator-failover.md, "Manual Identity Transition", read at commit 2359a8b3):
//!
//! - `--identity` is a symbolic link, "so that the validator can restart or stop/start
//!   with the same identity we last intended it to have": here on the ledger volume (it
//!   outlives the pod), made at the pod's first start pointing at the member's own
//!   unstaked identity, never at the staked one; only the identity agent changes it;
//! - `--vote-account` the staked identity's vote account and `--authorized-voter` the
//!   staked identity, on both machines; no `--no-voting`, which would start a validator
//!   that never votes, whatever identity it later takes (agave-validator 4.0.0
//!   src/commands/run/args.rs `no_voting`: "Launch validator without voting"). With
//!   another identity than its vote account's node identity it votes nothing (a hot
//!   spare). At 4.0 the start-up vote account check is opt-in (`--check-vote-account
//!   RPC_URL`, src/commands/run/args/rpc_bootstrap_config.rs; the guide's
//!   `--no-check-vote-account` is gone), and it would refuse a spare identity ("vote
//!   account's identity ... does not match the validator's identity", src/bootstrap.rs
//!   `check_vote_account`): valtune does not render it;
//! - the identity agent ([`AGENT_SCRIPT`]), a native sidecar that runs `set-identity`
//!   over the ledger's `admin.rpc` when the operator annotates the pod, and serves the
//!   ledger's tower files to the other member's agent.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, DownwardAPIVolumeFile, DownwardAPIVolumeSource,
    ObjectFieldSelector, SecretVolumeSource, Volume, VolumeMount,
};

use super::LEDGER_DIR;
use crate::clients::RenderInput;
use crate::clients::input::{Pair, SecretKey};
use crate::clients::parts::{self, port};
use crate::clients::pod::{Skeleton, config_map, sidecar_resources};

/// The identity agent's script.
pub const AGENT_SCRIPT: &str = include_str!("identity_agent.py");
/// The image it runs in (the official Python image; the lab runs the script with python3).
pub const AGENT_IMAGE: &str = "python:3.13-alpine";
pub const AGENT_CONTAINER: &str = "identity-agent";
/// The `--identity` link, on the ledger volume.
pub fn link() -> String {
    format!("{LEDGER_DIR}/valtune-identity.json")
}
const STAKED_DIR: &str = "/etc/valtune/staked";
const SPARE_DIR: &str = "/etc/valtune/spare";
const VOTE_DIR: &str = "/etc/valtune/vote";
/// Where the agent's ConfigMap and the pod's annotations (downward API) are mounted.
pub const AGENT_DIR: &str = "/etc/valtune/agent";
pub const PODINFO_DIR: &str = "/etc/valtune/podinfo";

/// The init step that makes the identity link, pointing at the member's spare key, where
/// no link is yet: a restart keeps the identity it last held.
pub fn link_step(image: &str, link: &str, spare: &str, mounts: Vec<VolumeMount>) -> Container {
    Container {
        name: "identity-link".into(),
        image: Some(image.into()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![format!("test -L {link} || ln -s {spare} {link}")]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(mounts),
        ..Default::default()
    }
}

/// The pod's own pieces beyond the keys.
pub struct Parts {
    pub init: Vec<Container>,
    pub volumes: Vec<Volume>,
    pub config_map: ConfigMap,
}

fn secret_volume(name: &str, k: &SecretKey) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(k.secret.clone()),
            default_mode: Some(0o400),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The validator's key flags and their mounts: `--identity` the link, `--vote-account`,
/// `--authorized-voter` the staked identity; the spare identity mounted where the link
/// can point.
pub fn keys(
    pair: &Pair,
    vote: &SecretKey,
    args: &mut Vec<String>,
) -> (Vec<VolumeMount>, Vec<Volume>) {
    if let Some(i) = args.iter().position(|a| a == "--identity") {
        args[i + 1] = link();
    }
    args.retain(|a| a != "--no-voting");
    args.extend([
        "--vote-account".into(),
        format!("{VOTE_DIR}/{}", vote.key),
        "--authorized-voter".into(),
        format!("{STAKED_DIR}/{}", pair.staked.key),
    ]);
    let mounts = vec![
        parts::mount("staked-identity", STAKED_DIR, true),
        parts::mount("spare-identity", SPARE_DIR, true),
        parts::mount("vote-account", VOTE_DIR, true),
    ];
    let volumes = vec![
        secret_volume("staked-identity", &pair.staked),
        secret_volume("spare-identity", &pair.spare),
        secret_volume("vote-account", vote),
    ];
    (mounts, volumes)
}

/// The link's first target (an init step, so the validator never starts without it) and
/// the identity agent.
pub fn parts(input: &RenderInput, skeleton: &Skeleton, image: &str, pair: &Pair) -> Parts {
    let ledger: Vec<VolumeMount> = skeleton
        .mounts
        .iter()
        .filter(|m| m.mount_path == LEDGER_DIR)
        .cloned()
        .collect();
    let spare = format!("{SPARE_DIR}/{}", pair.spare.key);
    let staked = format!("{STAKED_DIR}/{}", pair.staked.key);
    let link_step = link_step(image, &link(), &spare, ledger.clone());
    let mut mounts = ledger;
    mounts.push(parts::mount("identity-agent", AGENT_DIR, true));
    mounts.push(parts::mount("podinfo", PODINFO_DIR, true));
    let agent = Container {
        name: AGENT_CONTAINER.into(),
        image: Some(AGENT_IMAGE.into()),
        command: Some(vec![
            "python3".into(),
            format!("{AGENT_DIR}/identity_agent.py"),
        ]),
        args: Some(vec![
            format!("--ledger={LEDGER_DIR}"),
            format!("--request={PODINFO_DIR}/annotations"),
            format!("--link={}", link()),
            format!("--staked={staked}"),
            format!("--spare={spare}"),
            // The tower files, on the pod's IP (the node's, host network): `identityAgentPort`.
            format!("--listen=$(POD_IP):{}", pair.agent_port),
        ]),
        env: Some(vec![parts::field_env("POD_IP", "status.podIP")]),
        ports: Some(vec![port("identity-agent", pair.agent_port)]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(mounts),
        restart_policy: Some("Always".into()),
        ..Default::default()
    };
    let cm = config_map(
        input,
        skeleton,
        "identity-agent",
        BTreeMap::from([("identity_agent.py".to_string(), AGENT_SCRIPT.to_string())]),
    );
    let volumes = agent_volumes(&cm);
    Parts {
        init: vec![link_step, agent],
        volumes,
        config_map: cm,
    }
}

/// The agent's volumes: its ConfigMap `cm` and the pod's annotations.
pub fn agent_volumes(cm: &ConfigMap) -> Vec<Volume> {
    vec![
        Volume {
            name: "identity-agent".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.metadata.name.clone().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        },
        // The kubelet rewrites this file when the pod's annotations change (on its sync:
        // up to about a minute, the kubelet's sync period).
        Volume {
            name: "podinfo".into(),
            downward_api: Some(DownwardAPIVolumeSource {
                items: Some(vec![DownwardAPIVolumeFile {
                    path: "annotations".into(),
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.annotations".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        },
    ]
}
