//! A Firedancer trial's pod: a preflight check of the node's kernel settings, the config
//! template in a ConfigMap, the start script ([`super::start`]) that fills in the affinity
//! from the container's cpuset and execs `fdctl run` (a Frankendancer follower, with the
//! RPC exporter and vmagent beside it), `firedancer run` (a full Firedancer follower, on
//! its own), or the bench (`fddev bench`, `firedancer-dev bench`), with privileges only as
//! the spec names them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::config::{self, Inputs, KeyFiles, RUN_DIR, SCRATCH_DIR, TEMPLATE_DIR, TEMPLATE_FILE};
use super::layout::{self, Needs};
use super::profile::{METRICS_PORT_NAME, RPC_EXPORTER_PORT_NAME};
use super::{VALIDATOR_CONTAINER, start};
use crate::api::firedancer::{
    Capability, FiredancerNetProvider, FiredancerSpec, FiredancerWorkload,
};
use crate::api::template::VolumeRole;
use crate::api::version::Version;
use crate::clients::input::{Lifecycle, Role, SecretKey};
use crate::clients::parts::{self, empty_dir, env, mount, port, sidecar};
use crate::clients::pod::{
    PREFLIGHT_CONTAINER, Skeleton, Tweaks, config_map, preflight_head, sidecar_resources,
};
use crate::clients::{ClientPod, RenderError, RenderInput, ValidatorClient};

/// A Validator's keys: its Secrets mounted read-only (root's, 0400), the copies the start
/// script makes for fdctl's user in a Memory emptyDir, and the config's paths to them.
struct ValidatorKeys {
    files: KeyFiles,
    copies: start::Keys,
    mounts: Vec<VolumeMount>,
    volumes: Vec<Volume>,
}

/// None for a trial (an observer with a throwaway identity). A voting Validator adds its
/// vote account (`[consensus] vote_account_path`: "If no voting account is provided,
/// voting will be disabled", default.toml @v0.1106.40201); nonVoting and standby run
/// their identity without one. A failover pair member ([`super::pair`]) runs the link on
/// its ledger (`ledger`, the ledger volume's mount) as its identity, with copies of both
/// identities, the staked one its authorized voter, and the vote account whatever its
/// role.
fn validator_keys(
    input: &RenderInput,
    ledger: Option<&str>,
) -> Result<Option<ValidatorKeys>, RenderError> {
    if !matches!(input.lifecycle, Lifecycle::LongRunning { .. }) {
        return Ok(None);
    }
    let mut k = ValidatorKeys {
        files: KeyFiles::default(),
        copies: start::Keys::default(),
        mounts: Vec::new(),
        volumes: Vec::new(),
    };
    let mut add = |name: &str, dir: &str, key: &SecretKey, file: &str| {
        k.mounts.push(mount(name, dir, true));
        k.volumes.push(Volume {
            name: name.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(key.secret.clone()),
                default_mode: Some(0o400),
                ..Default::default()
            }),
            ..Default::default()
        });
        let to = format!("{}/{file}", start::KEYS_DIR);
        k.copies
            .copies
            .push((format!("{dir}/{}", key.key), to.clone()));
        to
    };
    let keys = input.role.keys();
    let pair = keys.and_then(|k| k.pair.as_ref().zip(k.vote.as_ref()));
    if let Some((pair, _)) = pair {
        let ledger = ledger.ok_or_else(|| {
            RenderError::Invalid(
                "a Frankendancer failover pair member keeps its identity link and tower files on its ledger volume: add template.storage with role: ledger".into(),
            )
        })?;
        k.files.authorized_voter = Some(add(
            "staked-identity",
            "/etc/valtune/staked",
            &pair.staked,
            super::pair::STAKED_COPY,
        ));
        add(
            "spare-identity",
            "/etc/valtune/spare",
            &pair.spare,
            super::pair::SPARE_COPY,
        );
        k.files.identity = Some(super::pair::link(ledger));
        k.copies.identity = true;
    } else if let Some(id) = keys.and_then(|k| k.identity.as_ref()) {
        k.files.identity = Some(add(
            "identity",
            "/etc/valtune/identity",
            id,
            "identity.json",
        ));
        k.copies.identity = true;
    }
    let votes = matches!(input.role, Role::Voting(_)) || pair.is_some();
    if let (true, Some(vote)) = (votes, keys.and_then(|k| k.vote.as_ref())) {
        k.files.vote_account = Some(add(
            "vote-account",
            "/etc/valtune/vote",
            vote,
            "vote-account.json",
        ));
    }
    if !k.copies.copies.is_empty() {
        k.mounts.push(mount("fd-keys", start::KEYS_DIR, false));
        k.volumes.push(Volume {
            name: "fd-keys".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                size_limit: Some(Quantity("1Mi".into())),
            }),
            ..Default::default()
        });
    }
    Ok(Some(k))
}

/// A Validator's pod (not a trial's).
fn validator_role_of(input: &RenderInput) -> bool {
    matches!(input.lifecycle, Lifecycle::LongRunning { .. })
}

/// What fdctl run checks of the node (shared/commands/configure/sysctl.c @v0.1106.40201:
/// the ENFORCE_MINIMUM params, the socket provider's buffer sizes, default 134217728 in
/// `[net.socket]`, or XDP's loopback settings; a file it cannot read is fatal, "could not
/// read kernel parameter"). /proc/sys is read-only in a pod, so the node must be prepared;
/// in the pod's own network (the bench) `net.core.*` must exist there at all (Linux 6.11,
/// [`preflight_head`]).
fn preflight_script(provider: FiredancerNetProvider, program: &str, host_network: bool) -> String {
    let mut s = preflight_head(host_network);
    s.push_str(
        r#"need vm.max_map_count "$(val vm/max_map_count)" 1000000
need fs.file-max "$(val fs/file-max)" 1024000
need fs.nr_open "$(val fs/nr_open)" 1024000
"#,
    );
    match provider {
        FiredancerNetProvider::Socket => s.push_str(
            "need net.core.rmem_max \"$(val net/core/rmem_max)\" 134217728\nneed net.core.wmem_max \"$(val net/core/wmem_max)\" 134217728\n",
        ),
        // XDP's own (xdp_params), on the node's network.
        FiredancerNetProvider::Xdp => s.push_str(
            "need net.ipv4.conf.lo.rp_filter \"$(val net/ipv4/conf/lo/rp_filter)\" 2\nneed net.ipv4.conf.lo.accept_local \"$(val net/ipv4/conf/lo/accept_local)\" 1\n",
        ),
    }
    s.push_str(
        &r#"if [ -n "$missing" ]; then
  echo "the node is not prepared for Firedancer:$missing PROGRAM refuses to start without them and a pod cannot set them; see docs/clients/firedancer.md (node preparation)" >&2
  exit 1
fi
"#
        .replace("PROGRAM", program),
    );
    s
}

/// Root in the container (the start script chowns, mounts hugetlbfs; fdctl drops to
/// `user` itself), with exactly the privileges the spec opts into.
fn security(spec: &FiredancerSpec) -> SecurityContext {
    let caps: Vec<String> = spec
        .capabilities
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    // The runtime's default AppArmor profile denies mount(2), which fdctl's hugetlbfs
    // stage needs; naming SYS_ADMIN opts into that too (docs/clients/firedancer.md).
    let mounts = !spec.privileged && spec.capabilities.contains(&Capability::SysAdmin);
    SecurityContext {
        run_as_user: Some(0),
        run_as_non_root: Some(false),
        privileged: spec.privileged.then_some(true),
        capabilities: (!caps.is_empty()).then(|| Capabilities {
            add: Some(caps),
            ..Default::default()
        }),
        app_armor_profile: mounts.then(|| AppArmorProfile {
            type_: "Unconfined".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn pod(
    client: &super::Firedancer,
    input: &RenderInput,
    spec: &FiredancerSpec,
    version: Version,
    skeleton: &Skeleton,
) -> Result<ClientPod, RenderError> {
    let t = &input.template;
    let follow = spec.workload == FiredancerWorkload::Follow;
    let x = &spec.exporters;
    let volumes: Vec<_> = t
        .storage
        .iter()
        .map(|v| (v.role, client.mount_path(v.role)))
        .collect();
    let ledger = volumes
        .iter()
        .find(|(r, _)| *r == VolumeRole::Ledger)
        .map(|(_, p)| p.clone());
    let keys = validator_keys(input, ledger.as_deref())?;
    let cfg = config::config(&Inputs {
        spec,
        tuning: &t.tuning,
        version: Some(version),
        volumes: volumes.clone(),
        datapoints_port: follow.then_some(x.datapoints_port),
        validator: keys.as_ref().map(|k| k.files.clone()),
    })?;
    let header = format!(
        "# Written by valtune for trial {} (firedancer-io/firedancer {version}). The @...@\n# affinity placeholders are filled in from the container's cpuset at start.\n",
        input.owner.name
    );
    let cm = config_map(
        input,
        skeleton,
        "config",
        BTreeMap::from([(TEMPLATE_FILE.to_string(), cfg.render(&header))]),
    );
    let needs = Needs::of(spec, &t.tuning, version);
    let mut dirs = vec![SCRATCH_DIR.to_string()];
    dirs.extend(volumes.iter().map(|(_, p)| p.clone()));
    let full = layout::full(spec);
    let cache = super::snapshots::volume(spec);
    let script = start::script(
        full,
        spec.workload,
        needs,
        t.resources.cpu,
        &spec.user,
        (&dirs, cache.is_some().then_some(super::snapshots::MOUNT)),
        keys.as_ref().map(|k| &k.copies),
    );

    // A follower's gossip, turbine and repair ports (and Agave's start-up port check) must
    // be reachable from the cluster; XDP attaches to the node's NIC.
    let host_network = follow || spec.net_provider == FiredancerNetProvider::Xdp;
    let mut init = Vec::new();
    if spec.preflight {
        init.push(Container {
            name: PREFLIGHT_CONTAINER.into(),
            image: Some(spec.image.clone()),
            command: Some(vec!["sh".into(), "-c".into()]),
            args: Some(vec![preflight_script(
                spec.net_provider,
                &start::command(full, spec.workload),
                host_network,
            )]),
            resources: Some(sidecar_resources()),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        });
    }
    let mut pod_volumes = vec![
        Volume {
            name: "fd-config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.metadata.name.clone().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        },
        empty_dir("fd-run"),
        empty_dir("fd-scratch"),
    ];
    let mut ports = vec![port(METRICS_PORT_NAME, spec.metrics_port)];
    // Full Firedancer is measured from its own metric tile alone: it has no Agave child
    // to push datapoints, and its rpc tile answers on 127.0.0.1 only.
    if follow && !full {
        ports.push(port("rpc", spec.rpc_port));
        // Slot lag from getHealth on the Agave child's RPC (solana-exporter, light mode).
        init.push(sidecar(
            "rpc-exporter",
            &x.rpc,
            vec![
                format!("-rpc-url=http://127.0.0.1:{}", spec.rpc_port),
                format!("-listen-address=:{}", x.rpc_port),
                "-light-mode".into(),
            ],
            vec![port(RPC_EXPORTER_PORT_NAME, x.rpc_port)],
        ));
        // Every datapoint the Agave child pushes, remote-written with its own timestamp
        // under the pod's namespace and name (vmagent app/vmagent, lib/protoparser/influx).
        let remote_write = input.remote_write.clone().ok_or_else(|| {
            RenderError::Invalid(
                "a Frankendancer follower's datapoints are remote-written to Prometheus, and no Prometheus is configured: set spec.metrics.prometheusUrl (or remoteWriteUrl), or start the operator with --prometheus-url".into(),
            )
        })?;
        let vmagent = parts::vmagent(
            "vmagent",
            &x.datapoints,
            "datapoints",
            x.datapoints_port,
            &remote_write,
        );
        init.push(vmagent);
        pod_volumes.push(empty_dir(parts::VMAGENT_VOLUME));
    }

    // A failover pair member's identity link step and agent, which enters the validator
    // container's mount namespace: the pod's processes shared (pair.rs).
    let mut config_maps = vec![cm];
    let pair = input
        .role
        .keys()
        .and_then(|k| k.pair.as_ref().filter(|_| k.vote.is_some()))
        .filter(|_| validator_role_of(input));
    if let Some(p) = pair {
        let ledger = skeleton
            .mounts
            .iter()
            .find(|m| Some(&m.mount_path) == ledger.as_ref())
            .ok_or_else(|| {
                RenderError::Invalid(
                    "a Frankendancer failover pair member needs a ledger volume (template.storage role: ledger)".into(),
                )
            })?;
        let parts = super::pair::parts(input, skeleton, &spec.image, p, ledger)?;
        init.extend(parts.init);
        pod_volumes.extend(parts.volumes);
        config_maps.push(parts.config_map);
    }

    let mut mounts = skeleton.mounts.clone();
    mounts.extend([
        mount("fd-config", TEMPLATE_DIR, false),
        mount("fd-run", RUN_DIR, false),
        mount("fd-scratch", SCRATCH_DIR, false),
    ]);
    if let Some((volume, mount)) = cache {
        pod_volumes.push(volume);
        mounts.push(mount);
    }
    let validator_role = keys.is_some();
    if let Some(k) = keys {
        mounts.extend(k.mounts);
        pod_volumes.extend(k.volumes);
    }
    let mut validator_env: Vec<EnvVar> = Vec::new();
    let applied = crate::clients::knobs::apply(client.knobs(), &t.tuning, Some(version))?;
    validator_env.extend(applied.env.iter().map(|(k, v)| env(k, v)));
    validator_env.extend(t.env.iter().cloned());
    if validator_role {
        // The RPC's bind address (config::POD_IP), the node's own under host networking.
        validator_env.push(parts::field_env("POD_IP", "status.podIP"));
    }
    let validator = Container {
        name: VALIDATOR_CONTAINER.into(),
        image: Some(spec.image.clone()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![script]),
        env: (!validator_env.is_empty()).then_some(validator_env),
        ports: Some(ports),
        resources: Some(skeleton.validator_resources.clone()),
        volume_mounts: Some(mounts),
        security_context: Some(security(spec)),
        // fdctl's refusals (a layout too large, a missing capability) explain themselves.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };
    Ok(ClientPod {
        init_containers: init,
        containers: vec![validator],
        volumes: pod_volumes,
        config_maps,
        tweaks: Tweaks {
            host_network,
            share_process_namespace: pair.is_some(),
            ..Default::default()
        },
    })
}
