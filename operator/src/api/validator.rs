//! `Validator`: a long-running validator from the same template as an experiment (one
//! schema, the same generated admission rules: crd.rs), on one node, in a role, with its
//! keys from Secrets. The operator runs its pod, holds its identity (a Lease per identity,
//! so two Validators never sign with one key), reads the client's own health answer into
//! status, and never writes `spec`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sweep::TrialPoint;
use super::template::ValidatorTemplate;

/// Validator names leave room in 63 characters for a claim's volume role.
pub const MAX_NAME_LEN: usize = 48;

/// A validator in production: runs the template on `nodeName` until deleted.
// clippy reads the repeated `type_ = ...` of printcolumn(...) as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "valtune.dev",
    version = "v1alpha1",
    kind = "Validator",
    namespaced,
    shortname = "vv",
    category = "valtune",
    status = "ValidatorStatus",
    doc = "A long-running validator: the template of an experiment, on one node, in a role, with its keys",
    printcolumn(name = "Node", type_ = "string", json_path = ".spec.nodeName"),
    printcolumn(name = "Role", type_ = "string", json_path = ".spec.role"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Health", type_ = "string", json_path = ".status.health"),
    printcolumn(name = "Head", type_ = "integer", json_path = ".status.head"),
    printcolumn(name = "Lag", type_ = "integer", json_path = ".status.lag"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.version", priority = 1),
    printcolumn(name = "Tuning", type_ = "string", json_path = ".status.appliedTuning.summary", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(format!("size(self.metadata.name) <= {MAX_NAME_LEN}"))
        .message(format!("metadata.name is longer than {MAX_NAME_LEN} characters: the state's claims add the volume role to it, so choose a shorter name").as_str())
)]
#[serde(rename_all = "camelCase")]
// The rules that name no client; each client's, and those built from what each client's
// Validator can be (clients::validator_rules), are added by crd.rs.
#[x_kube(
    validation = Rule::new("self.role != 'standby' || has(self.identity)")
        .message("a standby needs an identity of its own (an unstaked keypair): set identity.secretName; it must never run with the voting identity it stands by for")
        .field_path(".identity"),
    validation = Rule::new("!has(self.spareIdentity) || has(self.identity.publicKey)")
        .message("a voting validator with spareIdentity needs its staked identity's public key, so the operator tells from getIdentity whether it signs with it: set identity.publicKey (solana-keygen pubkey KEYPAIR)")
        .field_path(".identity.publicKey"),
    validation = Rule::new("!has(self.standbyFor) || has(self.standbyFor.publicKey)")
        .message("standbyFor needs the staked identity's public key, so the operator tells from getIdentity who signs with it: set standbyFor.publicKey (solana-keygen pubkey KEYPAIR)")
        .field_path(".standbyFor.publicKey"),
    validation = Rule::new("!has(self.identityAgentPort) || has(self.spareIdentity) || has(self.standbyFor)")
        .message("identityAgentPort is the port of a failover pair member's identity agent (spareIdentity or standbyFor): remove it")
        .field_path(".identityAgentPort"),
    validation = Rule::new("has(self.template.resources.memory)")
        .message("no memory given: set template.resources.memory")
        .field_path(".template.resources.memory"),
    // A key that must never sign as the staked identity, given as the staked one: the
    // member would run, or vote, with the staked key where valtune's guard (the identity's
    // Lease) does not look (issue 34, finding 11).
    validation = Rule::new(not_aliased("spareIdentity", "identity"))
        .message("spareIdentity is the staked identity itself (the same Secret and key, or the same publicKey): a failover member's spare must be an unstaked keypair of its own (solana-keygen new), or the member signs with the staked key while it should be spare; set spareIdentity to its own keypair")
        .field_path(".spareIdentity"),
    validation = Rule::new(not_aliased("voteAccount", "identity"))
        .message("voteAccount is the identity keypair itself (the same Secret and key, or the same publicKey): the vote account is a keypair of its own (solana-keygen new; solana create-vote-account); set voteAccount to it")
        .field_path(".voteAccount"),
    validation = Rule::new(not_aliased("identity", "standbyFor"))
        .message("a standby's identity is the staked identity it stands by for (the same Secret and key as standbyFor, or the same publicKey): a standby must run under an unstaked keypair of its own until a failover; set identity to its own keypair")
        .field_path(".identity"),
    validation = Rule::new(not_aliased("voteAccount", "standbyFor"))
        .message("voteAccount is the staked identity standbyFor names (the same Secret and key, or the same publicKey): set voteAccount to the staked identity's vote account keypair")
        .field_path(".voteAccount"),
)]
pub struct ValidatorSpec {
    /// The validator, exactly as an experiment's template writes it (tuning included).
    pub template: ValidatorTemplate,
    /// The node the validator runs on, and keeps its state on. Required: a validator's
    /// ledger lives on one machine's NVMe.
    #[schemars(length(min = 1, max = 253))]
    pub node_name: String,
    /// voting (signs and votes with `identity` and `voteAccount`), nonVoting (follows the
    /// chain under `identity`) or standby (a hot spare under its own identity).
    #[serde(default)]
    pub role: ValidatorRole,
    /// The validator's identity keypair. One Validator at a time holds an identity (a
    /// Lease per identity Secret); the client uses it as its identity (Agave's
    /// `--identity`; Frankendancer's `[consensus] identity_path`; Besu's node key,
    /// `--node-private-key-file`; a nodeos producer's `signature-provider`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<KeyRef>,
    /// The vote account keypair (a voting Agave or Frankendancer, or an Agave standby
    /// with `standbyFor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vote_account: Option<KeyRef>,
    /// A voting Agave's or Frankendancer's own unstaked ("junk") keypair, for failover:
    /// with it the pod runs as agave's failover guide sets both machines up (its identity
    /// a link on the ledger volume, its authorized voter the staked `identity`; for
    /// Frankendancer with `identityAgentEntersValidatorMountNamespace`), starts with this identity,
    /// signs with `identity` once the operator sees it hold the identity's Lease, and
    /// switches back to this one when it hands the identity to a standby
    /// (`valtune failover`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spare_identity: Option<KeyRef>,
    /// A standby Agave's or Frankendancer's: the staked identity keypair it takes over at
    /// a failover, its authorized voter (never its identity, which is its own unstaked
    /// `identity`). Needs `voteAccount`, the staked identity's vote account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_for: Option<KeyRef>,
    /// A failover pair member's identity agent port (with `spareIdentity` or
    /// `standbyFor`; default [`DEFAULT_IDENTITY_AGENT_PORT`]): the agent serves the
    /// ledger's tower files there, on the node's address, to the other member's agent.
    /// Refused where it collides with a port the pod binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1024, max = 65535))]
    pub identity_agent_port: Option<i32>,
    /// A Frankendancer failover pair member's: lets its identity agent enter the
    /// validator container's mount namespace to run the image's own `fdctl set-identity`
    /// there (the pod's processes shared; the agent with CAP_SYS_ADMIN, CAP_SYS_CHROOT and
    /// CAP_SYS_PTRACE, and DAC_OVERRIDE, SETUID and SETGID named rather than left to the
    /// runtime's defaults). fdctl finds the running validator through its shared-memory
    /// workspaces, files on the hugetlbfs mounts fdctl makes inside the validator
    /// container, which no other container sees (docs/validators.md, failover). Required
    /// for a Frankendancer pair; refused elsewhere.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity_agent_enters_validator_mount_namespace: bool,
    /// A producing nodeos' producer account (`--producer-name`); its key is `identity`'s
    /// signature provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 12), regex(pattern = r"^[a-z1-5.]{1,12}$"))]
    pub producer_name: Option<String>,
    /// When a change of the pod may replace the running one (the client's restart window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_window: Option<RestartWindowSpec>,
    /// Tuning taken from elsewhere than `template.tuning`: an experiment's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningSource>,
}

/// Where a Validator's tuning comes from beyond its template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TuningSource {
    /// A ValidatorExperiment of this namespace: its finished recommendation's point is
    /// applied over `template` (as its trials applied it) in the next restart window.
    /// Refused, and the template runs as written, while the experiment has no final
    /// recommendation or ran another client, version or node class
    /// (condition TuningApplied).
    #[schemars(length(min = 1, max = 253))]
    pub from_experiment: String,
}

/// The restart window: Agave's are the options of `agave-validator
/// wait-for-restart-window`, with its defaults (validator/src/commands/
/// wait_for_restart_window/mod.rs), checked by the operator over the validator's RPC.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestartWindowSpec {
    /// Minutes the validator must not be leader after the restart begins (`--min-idle-time`,
    /// default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1440))]
    pub min_idle_time: Option<u32>,
    /// Restart without waiting for a snapshot newer than the one seen when the window
    /// opened (`--skip-new-snapshot-check`, default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_new_snapshot_check: Option<bool>,
    /// The delinquent stake, in percent of all, at or above which no restart starts
    /// (`--max-delinquent-stake`, default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_delinquent_stake: Option<u8>,
    /// Apply a pending change at once, outside the window (named in an event). It stays
    /// in force while set: remove it once the change is applied.
    #[serde(default)]
    pub force: bool,
}

/// `wait-for-restart-window`'s defaults: `DEFAULT_MIN_IDLE_TIME` ("10" minutes) and
/// `DEFAULT_MAX_DELINQUENT_STAKE` ("5" percent).
pub const DEFAULT_MIN_IDLE_TIME_MINUTES: u32 = 10;
pub const DEFAULT_MAX_DELINQUENT_STAKE_PERCENT: u8 = 5;

/// The field that names the privilege a Frankendancer pair's identity agent needs.
pub const ENTER: &str = "identityAgentEntersValidatorMountNamespace";

/// The identity agent's port when `identityAgentPort` is unset. Outside every port the
/// clients bind by default, so it collides with nothing a validator operator left as
/// it is: Agave's own `--dynamic-port-range` default, 8000-10000 (agave-validator 4.0.0
/// `src/cli.rs` L237, solana-net-utils `VALIDATOR_PORT_RANGE`), the range operators open
/// to every validator; its RPC 8899 and websocket 8900; Frankendancer's
/// `dynamic_port_range` 8900-9000, gossip 8001, shred 8003, QUIC 9001 and 9007,
/// metrics 7999 and GUI 80 (`src/app/fdctl/config/default.toml` @v0.1106.40201); the
/// exporters' 9634, 9256 and 8429. Below Linux's ephemeral range (32768-60999), so no
/// outgoing connection holds it. A tower file is a vote record, not a key, but it is
/// not for the world: firewall the port like the RPC.
pub const DEFAULT_IDENTITY_AGENT_PORT: i32 = 10910;

/// What the validator does with its identity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum ValidatorRole {
    Voting,
    #[default]
    NonVoting,
    Standby,
}

/// CEL: the key references `a` and `b` of the spec, when both are given, are not one key:
/// not the same Secret and key (`key` is defaulted by the schema), nor the same publicKey.
fn not_aliased(a: &str, b: &str) -> String {
    format!(
        "!has(self.{a}) || !has(self.{b}) || !((self.{a}.secretName == self.{b}.secretName && self.{a}.key == self.{b}.key) || (has(self.{a}.publicKey) && has(self.{b}.publicKey) && self.{a}.publicKey == self.{b}.publicKey))"
    )
}

/// A key in a Secret of the Validator's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// The key of the Secret holding the keypair file.
    #[serde(default = "default_key")]
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// The keypair's public key (base58), for a failover pair's staked identity: the
    /// operator tells from the validator's own `getIdentity` whether it signs with it,
    /// without reading the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 32, max = 44),
        regex(pattern = r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")
    )]
    pub public_key: Option<String>,
}

fn default_key() -> String {
    "keypair".into()
}

/// What the validator is doing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum ValidatorPhase {
    /// No pod yet, or its process has not answered its health endpoint.
    #[default]
    Starting,
    /// Running, and the client says it is behind the chain.
    CatchingUp,
    /// Running, and the client says it is healthy.
    Running,
    /// The rendered pod changed: the running one is replaced in the client's restart
    /// window (`pendingChange` says what and why it waits).
    RestartPending,
    /// The old pod is being deleted; the new one starts once it is gone.
    Restarting,
    /// A standby, healthy and following the chain.
    Standby,
    /// It cannot run as written (the reason is in Ready's message).
    Failed,
}

/// What the client answers at its health endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorStatus {
    #[serde(default)]
    pub phase: ValidatorPhase,
    /// The pod running the validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The client's own health answer, verbatim (Besu's `/readiness` body, Agave's
    /// `/health` body), with the HTTP status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
    /// The chain head the validator has (Besu's block number, Agave's slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<i64>,
    /// How far behind the chain's head it is, in the client's unit (blocks, slots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,
    /// The image the running pod runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A change to the pod that has not reached it yet, and why it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_change: Option<PendingChange>,
    /// The generation of the spec this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, CaughtUp, IdentityHeld, RestartPending, TuningApplied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the last health answer was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// The experiment's point the running pod runs (`spec.tuning.fromExperiment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_tuning: Option<AppliedTuning>,
    /// A failover asked of this Validator (annotation `valtune.dev/failover-to`) and
    /// where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverStatus>,
}

/// One failover of a voting identity to a standby, as the active Validator records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailoverStatus {
    /// The standby Validator that takes the identity.
    pub to: String,
    /// The staked identity's public key, as this validator reported it while signing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The last step taken, or why it waits.
    pub step: String,
    /// The standby's slot when this validator was first seen to have let go (the
    /// no-tower path waits 200 slots from there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at_slot: Option<i64>,
    /// The `valtune.dev/failover-requested` annotation it answered (`valtune failover`
    /// writes the time): a new one asks again, after a move back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
    /// The identity moved: the standby signs and holds the Lease.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
}

/// An experiment's recommended point, as a Validator runs it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedTuning {
    /// The ValidatorExperiment.
    pub experiment: String,
    /// The point as one line ("allocator=jemalloc heap=8Gi").
    pub summary: String,
    /// The point's values, as the experiment's recommendation has them.
    pub point: TrialPoint,
    /// The trial the recommendation names.
    pub trial: String,
}

/// A rendered pod that differs from the running one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingChange {
    /// The rendered pod's hash (`valtune.dev/pod-hash` on the pod that will run it).
    pub hash: String,
    /// Why it has not been applied yet.
    pub waiting_for: String,
    /// Agave: the highest snapshot slot seen when the window first opened; the restart
    /// waits for a newer one (wait-for-restart-window's `restart_snapshot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_slot: Option<i64>,
    /// Agave: an incremental snapshot was seen while waiting, so a full one alone waits
    /// for its first incremental (`seen_incremential_snapshot`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incremental_seen: bool,
}

/// The annotation on a Validator's pod: the hash of what was rendered, so a change of
/// the rendering (image, tuning, resources) is seen without comparing defaulted pods.
pub const POD_HASH: &str = "valtune.dev/pod-hash";
/// The label on a Validator's pod and Lease: the identity Secret it runs with, as
/// [`identity_label`] writes it.
pub const IDENTITY_LABEL: &str = "valtune.dev/identity";

/// The [`IDENTITY_LABEL`] value of an identity Secret. A label value is at most 63
/// characters, a Secret's name up to 253 (a DNS subdomain, whose characters a label value
/// allows), so a longer name would make the pod's creation fail. A name that fits is the
/// value as it is (readable in `kubectl get pods -l`, and the same as valtune wrote
/// before); a longer one is its first 46 characters and an FNV-1a hash of the whole name
/// (stable across releases and toolchains, unlike std's hasher).
pub fn identity_label(secret: &str) -> String {
    if secret.len() <= 63 {
        return secret.to_string();
    }
    let h = secret.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{}-{h:016x}", &secret[..46])
}
/// The annotation on an active Validator that asks the operator to move its identity to
/// the standby Validator it names (`valtune failover`): metadata, never `spec`.
pub const FAILOVER_TO: &str = "valtune.dev/failover-to";
/// Beside [`FAILOVER_TO`]: when the failover was asked, so that asking again for the
/// same standby (after a move back) is a new failover, not the one already done.
pub const FAILOVER_REQUESTED: &str = "valtune.dev/failover-requested";
/// The annotation on a failover pair member's pod that its identity agent follows
/// (through the downward API): `<nonce> take|release [require-tower] [tower=<url>]`.
pub const IDENTITY_REQUEST: &str = "valtune.dev/identity-request";
/// The label on a Validator's pod: the Validator.
pub const VALIDATOR_LABEL: &str = "valtune.dev/validator";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::validator::observe;

    fn example() -> Validator {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/validators/besu.yaml"
        );
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The example renders a long-running pod with its node key, on its node.
    #[test]
    fn the_example_renders_with_its_identity_on_its_node() {
        let mut v = example();
        v.metadata.namespace = Some("validators".into());
        let (rendered, hash) = observe::render(&v, Some("http://prometheus:9090"));
        let r = rendered.unwrap();
        assert_eq!(r.pod.metadata.name.as_deref(), Some("besu-mainnet"));
        assert_eq!(r.pod.metadata.annotations.unwrap()[POD_HASH], hash);
        let labels = r.pod.metadata.labels.unwrap();
        assert_eq!(labels[IDENTITY_LABEL], "besu-node-key");
        assert_eq!(labels[VALIDATOR_LABEL], "besu-mainnet");
        let spec = r.pod.spec.unwrap();
        let args = spec.containers[0].args.clone().unwrap();
        assert!(args.contains(&"--node-private-key-file=/etc/valtune/identity/key".to_string()));
        assert_eq!(spec.termination_grace_period_seconds, Some(600));
        // Ready by Besu's own /readiness (Host: localhost for the Engine port's
        // allowlist); never killed for answering 503 while it syncs.
        let besu = &spec.containers[0];
        let get = besu.readiness_probe.clone().unwrap().http_get.unwrap();
        assert_eq!(get.path.as_deref(), Some("/readiness"));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8551)
        );
        assert_eq!(get.http_headers.unwrap()[0].value, "localhost");
        assert!(spec.containers.iter().all(|c| c.liveness_probe.is_none()));
        assert_eq!(r.claims.len(), 1);
        assert_eq!(
            r.secrets[0].metadata.name.as_deref(),
            Some("besu-mainnet-engine-jwt")
        );
        // The same spec renders the same hash: an unchanged Validator is never restarted.
        assert_eq!(observe::render(&v, Some("http://prometheus:9090")).1, hash);
        v.spec.template.resources.cpu = 16;
        assert_ne!(observe::render(&v, Some("http://prometheus:9090")).1, hash);
    }

    /// The Agave example votes with its keys from Secrets, its RPC open to the operator;
    /// as a non-voting Validator it keeps `--no-voting`; neither makes an identity.
    #[test]
    fn the_agave_example_runs_with_its_keys_and_an_rpc_the_operator_reaches() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/validators/agave.yaml"
        );
        let mut v: Validator =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v.metadata.namespace = Some("validators".into());
        let spec = |v: &Validator| {
            let r = observe::render(v, Some("http://prometheus:9090"))
                .0
                .unwrap();
            r.pod.spec.unwrap()
        };
        let s = spec(&v);
        let args = s.containers[0].args.clone().unwrap();
        let flag = |args: &[String], f: &str| {
            args.iter()
                .position(|a| a == f)
                .map(|i| args[i + 1].clone())
        };
        assert_eq!(
            flag(&args, "--identity").as_deref(),
            Some("/etc/valtune/identity/keypair")
        );
        assert_eq!(
            flag(&args, "--vote-account").as_deref(),
            Some("/etc/valtune/vote/keypair")
        );
        // The RPC on the pod's IP (the node's, host network), not on every interface.
        assert_eq!(
            flag(&args, "--rpc-bind-address").as_deref(),
            Some("$(POD_IP)")
        );
        let pod_ip = |c: &k8s_openapi::api::core::v1::Container| {
            c.env.iter().flatten().any(|e| {
                e.name == "POD_IP"
                    && e.value_from
                        .as_ref()
                        .and_then(|f| f.field_ref.as_ref())
                        .is_some_and(|f| f.field_path == "status.podIP")
            })
        };
        assert!(pod_ip(&s.containers[0]), "{:?}", s.containers[0].env);
        // Stopped as `agave-validator exit` stops it: SIGTERM would kill it on the spot.
        let stop = s.containers[0]
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|h| h.exec.as_ref())
            .and_then(|e| e.command.clone());
        assert_eq!(
            stop.unwrap(),
            [
                "agave-validator",
                "--ledger",
                "/mnt/ledger",
                "exit",
                "--force"
            ]
        );
        // The exporter asks the RPC where it now listens.
        let exporter = s
            .init_containers
            .iter()
            .flatten()
            .find(|c| c.name == "rpc-exporter")
            .unwrap();
        assert!(pod_ip(exporter));
        assert!(
            exporter
                .args
                .iter()
                .flatten()
                .any(|a| a == "-rpc-url=http://$(POD_IP):8899"),
            "{:?}",
            exporter.args
        );
        assert!(!args.contains(&"--no-voting".to_string()), "{args:?}");
        let inits: Vec<String> = s
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert!(!inits.contains(&"identity".to_string()), "{inits:?}");
        let secrets: Vec<String> = s
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| v.secret?.secret_name)
            .collect();
        assert!(
            secrets.contains(&"agave-identity".to_string())
                && secrets.contains(&"agave-vote".to_string()),
            "{secrets:?}"
        );

        v.spec.role = ValidatorRole::NonVoting;
        v.spec.vote_account = None;
        let args = spec(&v).containers[0].args.clone().unwrap();
        assert!(args.contains(&"--no-voting".to_string()), "{args:?}");
        assert!(flag(&args, "--vote-account").is_none());
        assert_eq!(
            flag(&args, "--identity").as_deref(),
            Some("/etc/valtune/identity/keypair")
        );
    }

    fn example_at(file: &str) -> Validator {
        let path = format!(
            "{}/../manifests/validators/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut v: Validator =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        v.metadata.namespace = Some("validators".into());
        v
    }

    /// The Frankendancer example votes with its keys copied from its Secrets for fdctl's
    /// user, its RPC open to the operator; nonVoting keeps the identity, without a vote
    /// account; neither makes a throwaway identity.
    #[test]
    fn the_frankendancer_example_runs_with_its_keys_and_an_rpc_the_operator_reaches() {
        let mut v = example_at("frankendancer.yaml");
        let render = |v: &Validator| {
            let r = observe::render(v, Some("http://prometheus:9090"))
                .0
                .unwrap();
            let config = r.config_maps[0].data.clone().unwrap()["config.toml"].clone();
            let spec = r.pod.spec.unwrap();
            let script = spec.containers[0].args.clone().unwrap()[0].clone();
            (config, script, spec)
        };
        let (config, script, spec) = render(&v);
        for part in [
            "identity_path = \"/run/valtune/keys/identity.json\"",
            "vote_account_path = \"/run/valtune/keys/vote-account.json\"",
            "bind_address = \"@POD_IP@\"",
        ] {
            assert!(config.contains(part), "{part}: {config}");
        }
        assert!(
            script.contains(
                "(umask 077; cat \"$root/etc/valtune/identity/keypair\" > \"$root/run/valtune/keys/identity.json\")"
            ) && script.contains("/etc/valtune/vote/keypair"),
            "{script}"
        );
        assert!(!script.contains("keys new"), "{script}");
        // The pod's IP reaches the start script, which fills in the RPC's bind address.
        let env = spec.containers[0].env.clone().unwrap_or_default();
        assert!(
            env.iter().any(|e| e.name == "POD_IP"
                && e.value_from
                    .as_ref()
                    .and_then(|f| f.field_ref.as_ref())
                    .is_some_and(|f| f.field_path == "status.podIP")),
            "{env:?}"
        );
        let volumes = spec.volumes.unwrap();
        let secrets: Vec<String> = volumes
            .iter()
            .filter_map(|v| v.secret.clone()?.secret_name)
            .collect();
        assert_eq!(
            secrets,
            vec!["fd-identity".to_string(), "fd-vote".to_string()]
        );
        let keys = volumes.iter().find(|v| v.name == "fd-keys").unwrap();
        assert_eq!(
            keys.empty_dir.as_ref().unwrap().medium.as_deref(),
            Some("Memory")
        );
        assert!(spec.containers.iter().all(|c| c.liveness_probe.is_none()));

        v.spec.role = ValidatorRole::NonVoting;
        v.spec.vote_account = None;
        let (config, script, _) = render(&v);
        assert!(!config.contains("vote_account_path"), "{config}");
        assert!(config.contains("identity_path = \"/run/valtune/keys/identity.json\""));
        assert!(!script.contains("/etc/valtune/vote"), "{script}");
    }

    /// A failover pair (manifests/validators/agave-failover.yaml): both members run as
    /// the guide's hot-swap machines: `--identity` the link on the ledger, the staked key
    /// as `--authorized-voter`, the vote account, no `--no-voting`; the link made at the
    /// first start pointing at the member's own spare key; the identity agent with the
    /// ledger and the pod's annotations, and no key.
    #[test]
    fn a_failover_pair_runs_as_the_guides_hot_swap_machines() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/validators/agave-failover.yaml"
        ))
        .unwrap();
        let docs: Vec<Validator> = serde_saphyr::from_multiple(&text).unwrap();
        for (mut v, spare) in docs.into_iter().zip(["agave-spare-a", "agave-spare-b"]) {
            v.metadata.namespace = Some("validators".into());
            let r = observe::render(&v, Some("http://prometheus:9090"))
                .0
                .unwrap();
            let spec = r.pod.spec.unwrap();
            let args = spec.containers[0].args.clone().unwrap();
            let flag = |f: &str| {
                args.iter()
                    .position(|a| a == f)
                    .map(|i| args[i + 1].as_str())
            };
            assert_eq!(
                flag("--identity"),
                Some("/mnt/ledger/valtune-identity.json")
            );
            assert_eq!(
                flag("--authorized-voter"),
                Some("/etc/valtune/staked/keypair")
            );
            assert_eq!(flag("--vote-account"), Some("/etc/valtune/vote/keypair"));
            assert!(
                !args
                    .iter()
                    .any(|a| a == "--no-voting" || a == "--check-vote-account")
            );
            let secret = |vol: &str| {
                spec.volumes
                    .iter()
                    .flatten()
                    .find(|v| v.name == vol)
                    .and_then(|v| v.secret.clone()?.secret_name)
            };
            assert_eq!(secret("staked-identity").as_deref(), Some("agave-identity"));
            assert_eq!(secret("spare-identity").as_deref(), Some(spare));
            let inits = spec.init_containers.clone().unwrap();
            let link = inits.iter().find(|c| c.name == "identity-link").unwrap();
            assert_eq!(
                link.args.clone().unwrap()[0],
                "test -L /mnt/ledger/valtune-identity.json || ln -s /etc/valtune/spare/keypair /mnt/ledger/valtune-identity.json"
            );
            let agent = inits.iter().find(|c| c.name == "identity-agent").unwrap();
            assert_eq!(agent.restart_policy.as_deref(), Some("Always"));
            // The agent's port: identityAgentPort, else the default.
            let listen = agent.args.clone().unwrap();
            assert!(
                listen.contains(&format!("--listen=$(POD_IP):{DEFAULT_IDENTITY_AGENT_PORT}")),
                "{listen:?}"
            );
            assert_eq!(
                agent.ports.clone().unwrap()[0].container_port,
                DEFAULT_IDENTITY_AGENT_PORT
            );
            let mounts: Vec<&str> = agent
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.as_str())
                .collect();
            assert_eq!(
                mounts,
                ["/mnt/ledger", "/etc/valtune/agent", "/etc/valtune/podinfo"]
            );
            let downward = spec
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == "podinfo")
                .and_then(|v| v.downward_api.clone())
                .unwrap();
            assert_eq!(
                downward.items.unwrap()[0]
                    .field_ref
                    .clone()
                    .unwrap()
                    .field_path,
                "metadata.annotations"
            );
            assert!(
                r.config_maps.iter().any(|c| c
                    .data
                    .as_ref()
                    .unwrap()
                    .contains_key("identity_agent.py"))
            );
        }
    }

    /// A Frankendancer pair (manifests/validators/frankendancer-failover.yaml): both
    /// members run as the guide's hot-swap machines in fdctl's terms: `identity_path` the
    /// link on the ledger, the staked copy the authorized voter, the vote account; the
    /// link made at the first start pointing at the member's own spare copy; the agent
    /// entering the validator's mount namespace with exactly the capabilities it needs
    /// (SYS_ADMIN, SYS_CHROOT, SYS_PTRACE; DAC_OVERRIDE, SETUID, SETGID for fdctl),
    /// the pod's processes shared, no key mounted.
    #[test]
    fn a_frankendancer_pair_runs_set_identity_in_the_validators_mount_namespace() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/validators/frankendancer-failover.yaml"
        ))
        .unwrap();
        let docs: Vec<Validator> = serde_saphyr::from_multiple(&text).unwrap();
        for (mut v, spare) in docs.into_iter().zip(["fd-spare-a", "fd-spare-b"]) {
            v.metadata.namespace = Some("validators".into());
            let r = observe::render(&v, Some("http://prometheus:9090"))
                .0
                .unwrap();
            let config = r.config_maps[0].data.clone().unwrap()["config.toml"].clone();
            for part in [
                "identity_path = \"/mnt/ledger/valtune-identity.json\"",
                "authorized_voter_paths = [\"/run/valtune/keys/staked.json\"]",
                "vote_account_path = \"/run/valtune/keys/vote-account.json\"",
            ] {
                assert!(config.contains(part), "{part}: {config}");
            }
            let spec = r.pod.spec.unwrap();
            assert_eq!(spec.share_process_namespace, Some(true));
            let script = spec.containers[0].args.clone().unwrap()[0].clone();
            for copy in [
                "cat \"$root/etc/valtune/staked/keypair\" > \"$root/run/valtune/keys/staked.json\"",
                "cat \"$root/etc/valtune/spare/keypair\" > \"$root/run/valtune/keys/spare.json\"",
                "cat \"$root/etc/valtune/vote/keypair\" > \"$root/run/valtune/keys/vote-account.json\"",
            ] {
                assert!(script.contains(copy), "{copy}: {script}");
            }
            assert!(!script.contains("keys new"), "{script}");
            let secret = |vol: &str| {
                spec.volumes
                    .iter()
                    .flatten()
                    .find(|v| v.name == vol)
                    .and_then(|v| v.secret.clone()?.secret_name)
            };
            assert_eq!(secret("staked-identity").as_deref(), Some("fd-identity"));
            assert_eq!(secret("spare-identity").as_deref(), Some(spare));
            assert_eq!(secret("vote-account").as_deref(), Some("fd-vote"));
            assert_eq!(secret("identity"), None);
            let inits = spec.init_containers.clone().unwrap();
            let link = inits.iter().find(|c| c.name == "identity-link").unwrap();
            assert_eq!(
                link.args.clone().unwrap()[0],
                "test -L /mnt/ledger/valtune-identity.json || ln -s /run/valtune/keys/spare.json /mnt/ledger/valtune-identity.json"
            );
            assert_eq!(link.image, spec.containers[0].image);
            let agent = inits.iter().find(|c| c.name == "identity-agent").unwrap();
            assert_eq!(agent.restart_policy.as_deref(), Some("Always"));
            assert_eq!(
                agent.command.clone().unwrap(),
                [
                    "python3",
                    "/etc/valtune/agent/frankendancer_identity_agent.py"
                ]
            );
            let args = agent.args.clone().unwrap();
            for a in [
                "--ledger=/mnt/ledger",
                "--link=/mnt/ledger/valtune-identity.json",
                "--staked=/run/valtune/keys/staked.json",
                "--spare=/run/valtune/keys/spare.json",
                "--config=/var/run/firedancer/config.toml",
            ] {
                assert!(args.contains(&a.to_string()), "{a}: {args:?}");
            }
            let sc = agent.security_context.clone().unwrap();
            assert_eq!(
                sc.capabilities.unwrap().add.unwrap(),
                [
                    "SYS_ADMIN",
                    "SYS_CHROOT",
                    "SYS_PTRACE",
                    "DAC_OVERRIDE",
                    "SETUID",
                    "SETGID"
                ]
            );
            assert_eq!(sc.privileged, None);
            assert_eq!(sc.app_armor_profile.unwrap().type_, "Unconfined");
            let mounts: Vec<&str> = agent
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| m.mount_path.as_str())
                .collect();
            assert_eq!(
                mounts,
                ["/mnt/ledger", "/etc/valtune/agent", "/etc/valtune/podinfo"]
            );
            let agent_cm = r
                .config_maps
                .iter()
                .find(|c| c.data.as_ref().unwrap().contains_key("identity_agent.py"))
                .unwrap()
                .data
                .clone()
                .unwrap();
            // The Agave agent's loop, unchanged, beside the wrapper that imports it.
            assert_eq!(
                agent_cm["identity_agent.py"],
                crate::clients::agave::pair::AGENT_SCRIPT
            );
            assert!(agent_cm["frankendancer_identity_agent.py"].contains("nsenter"));
        }
    }

    /// Without the field the pod is not rendered (admission refuses it first, naming it).
    #[test]
    fn a_frankendancer_pair_without_the_agents_privilege_is_not_rendered() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/validators/frankendancer-failover.yaml"
        ))
        .unwrap();
        let mut v: Validator = serde_saphyr::from_multiple::<Validator>(&text)
            .unwrap()
            .remove(1);
        v.metadata.namespace = Some("validators".into());
        v.spec.identity_agent_enters_validator_mount_namespace = false;
        let err = observe::render(&v, Some("http://prometheus:9090"))
            .0
            .unwrap_err();
        assert!(err.contains(ENTER), "{err}");
    }

    /// A producing nodeos: its producer name, and its signature provider from the
    /// identity Secret through the env, never in the pod object.
    #[test]
    fn a_producing_nodeos_signs_with_its_secret() {
        let mut v = example_at("nodeos.yaml");
        v.spec.role = ValidatorRole::Voting;
        v.spec.producer_name = Some("valtunelab11".into());
        v.spec.identity = Some(KeyRef {
            secret_name: "wax-producer".into(),
            key: "signature-provider".into(),
            public_key: None,
        });
        let r = observe::render(&v, None).0.unwrap();
        let c = &r.pod.spec.unwrap().containers[0];
        let args = c.args.clone().unwrap();
        let at = args.iter().position(|a| a == "--producer-name").unwrap();
        assert_eq!(args[at + 1], "valtunelab11");
        let at = args
            .iter()
            .position(|a| a == "--signature-provider")
            .unwrap();
        assert_eq!(args[at + 1], "$(NODEOS_SIGNATURE_PROVIDER)");
        let env = c
            .env
            .clone()
            .unwrap()
            .into_iter()
            .find(|e| e.name == "NODEOS_SIGNATURE_PROVIDER")
            .unwrap();
        let from = env.value_from.unwrap().secret_key_ref.unwrap();
        assert_eq!(
            (from.name.as_str(), from.key.as_str()),
            ("wax-producer", "signature-provider")
        );
        assert_eq!(env.value, None);
    }

    #[test]
    fn the_identity_label_is_a_valid_label_value_for_any_secret_name() {
        assert_eq!(identity_label("besu-node-key"), "besu-node-key");
        let long = format!("{}.node-key", "a".repeat(240));
        let other = format!("{}.node-kez", "a".repeat(240));
        let l = identity_label(&long);
        assert_eq!(l.len(), 63);
        assert!(l.starts_with(&"a".repeat(46)) && l.ends_with(|c: char| c.is_ascii_hexdigit()));
        assert_ne!(l, identity_label(&other));
        // Stable: the same value from every build (a pod labelled by an older operator
        // is still found).
        assert_eq!(l, identity_label(&long));
        assert_eq!(
            identity_label(&"b".repeat(64)),
            format!("{}-{}", "b".repeat(46), "5338487becab6325")
        );
    }
}
