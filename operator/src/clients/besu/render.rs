//! A Besu trial's pod: Besu (started through a small wrapper that checks and preloads the
//! trial's allocator), Teku beside it on the Engine API with a shared generated JWT
//! secret, and vmagent carrying every block's processing time to Prometheus. Everything
//! runs as the images' user (uid 1000), which owns the volumes through `fsGroup`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, HTTPGetAction, HTTPHeader, PodSecurityContext, Probe,
    ResourceRequirements, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;

use super::args::{self, Command};
use super::{
    BLOCK_TIMES_CONTAINER, CONFIG_DIR, DATA_DIR, JWT_DIR, JWT_FILE, LOG4J_FILE, METRICS_PORT_NAME,
    TOML_FILE, VALIDATOR_CONTAINER,
};
use crate::api::besu::BesuSpec;
use crate::api::template::{ValidatorTemplate, VolumeRole};
use crate::api::version::Version;
use crate::clients::input::Lifecycle;
use crate::clients::parts::{self, env, mount, protocol_port};
use crate::clients::pod::{GeneratedSecret, Skeleton, Tweaks, config_map};
use crate::clients::{ClientPod, RenderError, RenderInput};

/// The start script the wrapper hands over to (docker/Dockerfile @25.12.0: Besu in
/// /opt/besu, its bin/ on PATH).
const BESU_BIN: &str = "/opt/besu/bin/besu";

/// Where a Validator's identity Secret is mounted.
const IDENTITY_DIR: &str = "/etc/valtune/identity";

/// Runs before Besu: preloads the trial's allocator the way Besu's start script tests
/// jemalloc (`LD_PRELOAD=lib sh -c true` prints ld.so's error when the image lacks the
/// library: unixStartScript.txt @25.12.0 L199-212), and fails the trial with that error
/// instead of silently measuring glibc's malloc.
pub const WRAPPER: &str = r#"lib="${VALTUNE_ALLOCATOR_LIBRARY:-}"
if [ -n "$lib" ]; then
  err=$(LD_PRELOAD="$lib" sh -c true 2>&1)
  if [ -n "$err" ]; then
    echo "valtune: allocator ${VALTUNE_ALLOCATOR:-?} is not in this image: $err" >&2
    exit 1
  fi
  export LD_PRELOAD="$lib"
fi
exec /opt/besu/bin/besu "$@"
"#;

/// The images' user: besu (docker/Dockerfile @25.12.0 L23) and teku
/// (docker/jdk25/Dockerfile @25.12.0 L31-35) are both uid 1000.
const USER: i64 = 1000;

/// The random bytes of the Engine API's JWT secret (HS256, 256 bits: EngineAuthService
/// reads at least 64 hex characters; Teku's JwtSecretKeyLoader a 32-byte hex key).
const JWT_BYTES: usize = 32;

/// The log4j2 configuration: Besu's console log, and each block's time to vmagent.
pub fn log4j2_xml(vmagent_port: i32) -> String {
    include_str!("log4j2.xml").replace("{port}", &vmagent_port.to_string())
}

/// besu.toml from `template.besu.config` (each value is TOML already).
fn besu_toml(config: &BTreeMap<String, String>) -> String {
    let mut s = String::from("# valtune: template.besu.config\n");
    for (k, v) in config {
        s.push_str(&format!("{k}={v}\n"));
    }
    s
}

/// The group's JWT Secret: one per group (an experiment's trials' pods all mount it),
/// owned by the group's owners (the experiment, like its trials), created once: one API
/// write per group.
pub fn jwt_secret(input: &RenderInput) -> GeneratedSecret {
    let group = &input.group;
    GeneratedSecret {
        metadata: ObjectMeta {
            name: Some(secret_name(&group.name)),
            namespace: input.owner.namespace.clone(),
            labels: Some(group.labels.clone()),
            owner_references: (!group.owners.is_empty()).then(|| group.owners.clone()),
            ..Default::default()
        },
        key: JWT_FILE.into(),
        bytes: JWT_BYTES,
    }
}

pub fn secret_name(group: &str) -> String {
    format!("{group}-engine-jwt")
}

/// Teku, the consensus client: a native sidecar (started before Besu, restarted if it
/// exits). Flags: teku/.../cli/options/*.java @25.12.0 (docs/clients/besu.md).
fn teku(template: &ValidatorTemplate, besu: &BesuSpec, skeleton: &Skeleton) -> Container {
    let c = &besu.consensus;
    let has_state = template.storage.iter().any(|v| v.role == VolumeRole::State);
    // Its beacon database on a drive of its own when the template has one (the seed ran
    // Teku on another disk), else beside Besu's.
    let (volume, dir) = if has_state {
        (
            VolumeRole::State,
            format!("/mnt/{}/teku", VolumeRole::State.as_str()),
        )
    } else {
        (VolumeRole::Data, format!("{DATA_DIR}/teku"))
    };
    let mut args = vec![
        format!("--network={}", besu.network.as_str()),
        format!("--data-base-path={dir}"),
        format!("--ee-endpoint=http://127.0.0.1:{}", besu.engine_port),
        format!("--ee-jwt-secret-file={JWT_DIR}/{JWT_FILE}"),
        format!("--p2p-port={}", c.p2p_port),
    ];
    if let Some(url) = &c.checkpoint_sync_url {
        args.push(format!("--checkpoint-sync-url={url}"));
    }
    args.extend(c.extra_args.iter().cloned());
    let mut mounts: Vec<VolumeMount> = skeleton
        .mounts
        .iter()
        .filter(|m| m.name == volume.as_str())
        .cloned()
        .collect();
    mounts.push(mount("engine-jwt", JWT_DIR, true));
    let quantity = |v: String| Quantity(v);
    let r = BTreeMap::from([
        ("cpu".to_string(), quantity(c.cpu.to_string())),
        ("memory".to_string(), quantity(c.memory.clone())),
    ]);
    Container {
        name: "teku".into(),
        image: Some(c.image.clone()),
        args: Some(args),
        ports: Some(vec![
            protocol_port("cl-p2p", c.p2p_port, "TCP"),
            protocol_port("cl-discovery", c.p2p_port, "UDP"),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(r.clone()),
            limits: Some(r),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        restart_policy: Some("Always".into()),
        ..Default::default()
    }
}

/// vmagent: receives the InfluxDB lines Besu's log posts and remote-writes them under the
/// pod's namespace and name (app/vmagent, lib/protoparser/influx @v1.110.0).
fn vmagent(besu: &BesuSpec, remote_write: &str) -> Container {
    parts::vmagent(
        BLOCK_TIMES_CONTAINER,
        &besu.block_times.image,
        "block-times",
        besu.block_times.port,
        remote_write,
    )
}

/// A long-running Besu's readiness: Besu's own `/readiness` (200 with a peer and at most
/// 2 blocks behind, else 503: HealthService.java and ReadinessCheck.java @25.12.0) on the
/// Engine API's port, the endpoint the operator reads for status (`Besu::health`). That
/// service answers 403 to a Host off `--engine-host-allowlist` (default localhost), so
/// the probe names `localhost`: the kubelet sends an httpHeaders Host as the request's
/// Host (kubernetes pkg/probe/http/request.go, newProbeRequest: `req.Host =
/// headers.Get("Host")`). No liveness probe: a node syncing for hours answers 503 all
/// along, and a kill would only start its sync over.
fn readiness_probe(engine_port: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/readiness".into()),
            port: IntOrString::Int(engine_port),
            http_headers: Some(vec![HTTPHeader {
                name: "Host".into(),
                value: "localhost".into(),
            }]),
            ..Default::default()
        }),
        period_seconds: Some(10),
        timeout_seconds: Some(3),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

pub fn pod(
    input: &RenderInput,
    besu: &BesuSpec,
    version: Option<Version>,
    skeleton: &Skeleton,
) -> Result<ClientPod, RenderError> {
    let template = &input.template;
    let remote_write = input.remote_write.clone().ok_or_else(|| {
        RenderError::Invalid(
            "Besu's block times are remote-written to Prometheus, and no Prometheus is configured: set spec.metrics.prometheusUrl (or remoteWriteUrl), or start the operator with --prometheus-url".into(),
        )
    })?;
    let Command {
        mut args,
        env: own_env,
    } = args::command(template, besu, version)?;
    let mut validator_env: Vec<EnvVar> = own_env.iter().map(|(k, v)| env(k, v)).collect();
    validator_env.extend(template.env.iter().cloned());

    let mut files = BTreeMap::from([(LOG4J_FILE.to_string(), log4j2_xml(besu.block_times.port))]);
    if !besu.config.is_empty() {
        files.insert(TOML_FILE.into(), besu_toml(&besu.config));
    }
    let config = config_map(input, skeleton, "besu", files);
    let config_name = config.metadata.name.clone().unwrap_or_default();

    let mut mounts = skeleton.mounts.clone();
    mounts.push(mount("besu-config", CONFIG_DIR, true));
    mounts.push(mount("engine-jwt", JWT_DIR, true));
    let mut volumes = Vec::new();
    // A Validator's identity: Besu's node key (the enode's secp256k1 key, a hex file;
    // read, not written, when it exists: --node-private-key-file, KeyPairUtil). A trial
    // keeps the key Besu makes in its data directory.
    if let Some(id) = input.role.keys().and_then(|k| k.identity.as_ref()) {
        mounts.push(mount("identity", IDENTITY_DIR, true));
        args.push(format!("--node-private-key-file={IDENTITY_DIR}/{}", id.key));
        volumes.push(Volume {
            name: "identity".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(id.secret.clone()),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let validator = Container {
        name: VALIDATOR_CONTAINER.into(),
        image: Some(besu.image.clone()),
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            WRAPPER.into(),
            BESU_BIN.into(),
        ]),
        args: Some(args),
        env: Some(validator_env),
        ports: Some(vec![
            protocol_port(METRICS_PORT_NAME, besu.metrics_port, "TCP"),
            protocol_port("engine", besu.engine_port, "TCP"),
            protocol_port("p2p", besu.p2p_port, "TCP"),
            protocol_port("discovery", besu.p2p_port, "UDP"),
        ]),
        resources: Some(skeleton.validator_resources.clone()),
        volume_mounts: Some(mounts),
        // The JVM's or the wrapper's last words (an unknown option, an OutOfMemoryError,
        // a missing allocator) become the trial's message.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        readiness_probe: matches!(input.lifecycle, Lifecycle::LongRunning { .. })
            .then(|| readiness_probe(besu.engine_port)),
        ..Default::default()
    };
    Ok(ClientPod {
        init_containers: vec![teku(template, besu, skeleton), vmagent(besu, &remote_write)],
        containers: vec![validator],
        volumes: vec![
            Volume {
                name: "besu-config".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_name,
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "engine-jwt".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret_name(&input.group.name)),
                    default_mode: Some(0o440),
                    ..Default::default()
                }),
                ..Default::default()
            },
            parts::empty_dir(parts::VMAGENT_VOLUME),
        ]
        .into_iter()
        .chain(volumes)
        .collect(),
        config_maps: vec![config],
        tweaks: Tweaks {
            // Both images' user; fsGroup makes the data volume theirs (the image's entry
            // script would otherwise chown it as root on every start: besu-entry.sh L26-50).
            security_context: Some(PodSecurityContext {
                run_as_user: Some(USER),
                run_as_group: Some(USER),
                fs_group: Some(USER),
                run_as_non_root: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
    })
}
