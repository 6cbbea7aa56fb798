//! A Frankendancer failover pair member's pod (docs/validators.md, failover): the Agave
//! pair's machine ([`crate::clients::agave::pair`]) in Frankendancer's terms, every path
//! and flag read at firedancer-io/firedancer v0.1106.40201:
//!
//! - `[consensus] identity_path` is a link on the ledger volume (fdctl passes it to its
//!   Agave child as `--identity`, src/app/fdctl/commands/run_agave.c, and its sign tile
//!   loads it at start), made at the pod's first start pointing at the member's own spare
//!   identity; only the identity agent changes it, so a restart starts with the identity
//!   the process last held (`set-identity` is "live only ... the validator reverts to the
//!   configured [identity] on its next restart", set_identityh.c);
//! - `authorized_voter_paths` the staked identity (`--authorized-voter`, run_agave.c) and
//!   `vote_account_path` the vote account, on both members: with a spare identity the
//!   Agave child votes nothing (a hot spare, as for Agave);
//! - the keys are copies for fdctl's user, made by the start script in the Memory
//!   emptyDir ([`super::start::KEYS_DIR`]);
//! - the identity agent runs `fdctl set-identity` in the validator container's mount
//!   namespace, where its workspaces are (identity_agent.py beside this file): the pod's
//!   processes shared, the agent with CAP_SYS_ADMIN and CAP_SYS_PTRACE, as the Validator's
//!   `identityAgentEntersValidatorMountNamespace` grants. The Agave child keeps its tower
//!   in the ledger (fdctl passes `--ledger` and no `--tower`, run_agave.c), so the tower
//!   files are served and copied as for Agave.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Capabilities, ConfigMap, Container, SecurityContext, Volume, VolumeMount,
};

use super::config::config_path;
use super::start::KEYS_DIR;
use crate::clients::agave::pair::{
    self as agave_pair, AGENT_CONTAINER, AGENT_DIR, AGENT_IMAGE, AGENT_SCRIPT as AGAVE_AGENT,
    PODINFO_DIR, agent_volumes,
};
use crate::clients::input::Pair;
use crate::clients::parts::{self, port};
use crate::clients::pod::{Skeleton, config_map, sidecar_resources};
use crate::clients::{RenderError, RenderInput};

/// The agent's own script: identity_agent.py with fdctl's set-identity.
pub const AGENT_SCRIPT: &str = include_str!("identity_agent.py");
const AGENT_FILE: &str = "frankendancer_identity_agent.py";
/// The key copies' file names in [`KEYS_DIR`].
pub const STAKED_COPY: &str = "staked.json";
pub const SPARE_COPY: &str = "spare.json";

/// `[consensus] identity_path`: a link on the ledger volume.
pub fn link(ledger: &str) -> String {
    format!("{ledger}/valtune-identity.json")
}

pub fn staked_copy() -> String {
    format!("{KEYS_DIR}/{STAKED_COPY}")
}

pub fn spare_copy() -> String {
    format!("{KEYS_DIR}/{SPARE_COPY}")
}

/// The pod's own pieces beyond the keys.
pub struct Parts {
    pub init: Vec<Container>,
    pub volumes: Vec<Volume>,
    pub config_map: ConfigMap,
}

/// What setns(2) into another container's mount namespace and fdctl there take, and no
/// more, named rather than left to the runtime's default set (CRI-O's lacks SYS_CHROOT):
/// - SYS_PTRACE: opening /proc/PID/ns/mnt is a ptrace read, and the Agave child runs as
///   fdctl's user, not the agent's root (`fd_sandbox_switch_uid_gid`,
///   src/app/fdctl/commands/run_agave.c @v0.1106.40201): another user's process only
///   with CAP_SYS_PTRACE (kernel/ptrace.c `__ptrace_may_access`);
/// - SYS_ADMIN and SYS_CHROOT: joining a mount namespace (fs/namespace.c
///   `mntns_install`);
/// - DAC_OVERRIDE: fdctl set-identity, run as root, joins workspaces fdctl's user owns
///   (0600 files in 0700 directories); SETUID and SETGID: fdctl's boot switches its
///   effective ids to that user while it opens its log (src/app/shared/boot/fd_boot.c).
///
/// Unconfined by AppArmor: the runtime's default profile allows ptrace only between
/// processes of that profile (moby/profiles apparmor/template.go `ptrace
/// (trace,read,tracedby,readby) peer={{.Name}}`, replicated in containerd), and the
/// validator runs unconfined (privileged, or SYS_ADMIN: render.rs).
pub const AGENT_CAPABILITIES: [&str; 6] = [
    "SYS_ADMIN",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "DAC_OVERRIDE",
    "SETUID",
    "SETGID",
];

fn agent_security() -> SecurityContext {
    SecurityContext {
        capabilities: Some(Capabilities {
            add: Some(AGENT_CAPABILITIES.map(String::from).to_vec()),
            ..Default::default()
        }),
        app_armor_profile: Some(AppArmorProfile {
            type_: "Unconfined".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The link's first target (an init step in the validator's image, so the validator
/// never starts without it) and the identity agent. `ledger` is the ledger volume's
/// mount.
pub fn parts(
    input: &RenderInput,
    skeleton: &Skeleton,
    image: &str,
    pair: &Pair,
    ledger: &VolumeMount,
) -> Result<Parts, RenderError> {
    if !pair.agent_enters_validator {
        return Err(RenderError::Invalid(
            super::validator_rules::FRANKENDANCER_PAIR_NEEDS_PRIVILEGE.into(),
        ));
    }
    let dir = &ledger.mount_path;
    let link = link(dir);
    let link_step = agave_pair::link_step(image, &link, &spare_copy(), vec![ledger.clone()]);
    let agent = Container {
        name: AGENT_CONTAINER.into(),
        image: Some(AGENT_IMAGE.into()),
        command: Some(vec!["python3".into(), format!("{AGENT_DIR}/{AGENT_FILE}")]),
        args: Some(vec![
            format!("--ledger={dir}"),
            format!("--request={PODINFO_DIR}/annotations"),
            format!("--link={link}"),
            // The key copies as the validator container sees them: fdctl reads them there.
            format!("--staked={}", staked_copy()),
            format!("--spare={}", spare_copy()),
            format!("--listen=$(POD_IP):{}", pair.agent_port),
            // The validator's own config: set-identity finds its workspaces from it.
            format!("--config={}", config_path()),
        ]),
        env: Some(vec![parts::field_env("POD_IP", "status.podIP")]),
        ports: Some(vec![port("identity-agent", pair.agent_port)]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(vec![
            ledger.clone(),
            parts::mount("identity-agent", AGENT_DIR, true),
            parts::mount("podinfo", PODINFO_DIR, true),
        ]),
        security_context: Some(agent_security()),
        restart_policy: Some("Always".into()),
        ..Default::default()
    };
    let cm = config_map(
        input,
        skeleton,
        "identity-agent",
        BTreeMap::from([
            ("identity_agent.py".to_string(), AGAVE_AGENT.to_string()),
            (AGENT_FILE.to_string(), AGENT_SCRIPT.to_string()),
        ]),
    );
    Ok(Parts {
        init: vec![link_step, agent],
        volumes: agent_volumes(&cm),
        config_map: cm,
    })
}
