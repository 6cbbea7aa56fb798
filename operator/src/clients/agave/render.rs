//! An Agave trial's pod: a preflight check of the node, the identity key, three native
//! sidecars (restarted if they exit, unlike containers under `restartPolicy: Never`),
//! and agave-validator on the node's network.

use k8s_openapi::api::core::v1::{Container, SecretVolumeSource, Volume, VolumeMount};

use super::{
    Agave, LEDGER_DIR, PROCESS_NAME, VALIDATOR_CONTAINER, args, bench, gpu, points, snapshots,
};
use crate::api::agave::AgaveWorkload;
use crate::api::sweep::Sigverify;
use crate::api::template::{AgaveSpec, Tuning};
use crate::api::version::Version;
use crate::clients::input::{Lifecycle, Role, SecretKey};
use crate::clients::parts::{self, env, port, sidecar};
use crate::clients::pod::{
    PREFLIGHT_CONTAINER, Skeleton, Tweaks, preflight_head, sidecar_resources,
};
use crate::clients::{ClientPod, RenderError, RenderInput, ValidatorClient};

/// Where a Validator's identity and vote account keypairs are mounted.
const IDENTITY_DIR: &str = "/etc/valtune/identity";
const VOTE_DIR: &str = "/etc/valtune/vote";

/// The env var a Validator's containers read the pod's IP from (the downward API's
/// `status.podIP`: the node's own address under host networking), for `$(POD_IP)`.
const POD_IP_ENV: &str = "POD_IP";

/// The metrics agent's budget of points a second (metrics/src/metrics.rs).
const POINTS_BUDGET_ENV: &str = "SOLANA_METRICS_MAX_POINTS_PER_SECOND";

/// Port names of the endpoints Prometheus scrapes.
pub const RPC_EXPORTER_PORT_NAME: &str = "metrics-rpc";
pub const PROCESS_EXPORTER_PORT_NAME: &str = "metrics-proc";

/// What the node must give Agave, and what Agave does without it (anza-xyz/agave:
/// `docs/src/operations/setup-a-validator.md`; the validator exits with
/// `UnableToSetOpenFileDescriptorLimit` below 1,000,000 open files, and on the OS network
/// limits test): checked before it starts, so the trial names what is missing.
fn preflight_script(version: Option<Version>, host_network: bool) -> String {
    // 3.1 refuses to start without 2,000,000,000 bytes of lockable memory.
    let memlock = version.is_some_and(|v| v >= Version::new(3, 1, 0) && v < Version::new(4, 0, 0));
    let mut s = preflight_head(host_network);
    s.push_str(
        r#"need "the open files limit (nofile)" "$(ulimit -Hn)" 1000000
need vm.max_map_count "$(val vm/max_map_count)" 1000000
need net.core.rmem_max "$(val net/core/rmem_max)" 134217728
need net.core.wmem_max "$(val net/core/wmem_max)" 134217728
"#,
    );
    if memlock {
        s.push_str("need \"the locked memory limit (memlock, KiB)\" \"$(ulimit -Hl)\" 1953125\n");
    }
    s.push_str(
        r#"if [ -n "$missing" ]; then
  # The kubelet makes the end of the log the termination message (FallbackToLogsOnError).
  echo "the node is not prepared for Agave:$missing see docs/clients.md (node preparation)" >&2
  exit 1
fi
"#,
    );
    s
}

/// The image: the one built with the tuned program cache size, if there is one.
fn image(tuning: &Tuning, agave: &AgaveSpec) -> Result<String, RenderError> {
    match tuning.program_cache_entries {
        None => Ok(agave.image.clone()),
        Some(n) => agave
            .program_cache_images
            .iter()
            .find(|i| i.entries == n)
            .map(|i| i.image.clone())
            .ok_or_else(|| {
                RenderError::Invalid(format!(
                    "no image in template.agave.programCacheImages has entries={n}"
                ))
            }),
    }
}

pub fn pod(
    client: &Agave,
    input: &RenderInput,
    agave: &AgaveSpec,
    skeleton: &Skeleton,
) -> Result<ClientPod, RenderError> {
    let template = &input.template;
    let version = client.version(template);
    let (mut args, knob_env) = args::args(template, agave, version, |r| client.mount_path(r))?;
    let (key_mounts, key_volumes) = keys(&input.role, &mut args);
    let long_running = matches!(input.lifecycle, Lifecycle::LongRunning { .. });
    if long_running {
        // The operator reads getHealth and the restart window's figures from outside the
        // pod, at its IP: --private-rpc alone binds the RPC to 127.0.0.1
        // (--rpc-bind-address's default; agave-validator 4.0.0 src/commands/run/args.rs,
        // execute.rs). Bound to that one address, the node's own (host network), not to
        // 0.0.0.0, which would open the RPC and its websocket on every interface of the
        // node, a public one included. Still not advertised in gossip (docs/validators.md).
        args.extend(["--rpc-bind-address".into(), format!("$({POD_IP_ENV})")]);
    }
    let image = image(&template.tuning, agave)?;
    let remote_write = input.remote_write.clone().ok_or_else(|| {
        RenderError::Invalid(
            "Agave's datapoints are remote-written to Prometheus, and no Prometheus is configured: set spec.metrics.prometheusUrl (or remoteWriteUrl), or start the operator with --prometheus-url".into(),
        )
    })?;
    let x = &agave.exporters;
    let mut validator_env = vec![
        // All four keys, or Agave refuses to start (metrics/src/metrics.rs); vmagent ignores
        // the credentials.
        env(
            "SOLANA_METRICS_CONFIG",
            &format!(
                "host=http://127.0.0.1:{},db=agave,u=valtune,p=valtune",
                x.datapoints_port
            ),
        ),
        env("RUST_LOG", &agave.log_filter),
    ];
    if long_running {
        validator_env.push(parts::field_env(POD_IP_ENV, "status.podIP"));
    }
    // Room for every point the banking workers submit, or the agent drops the last of
    // each 10 s write, TPS included (points.rs). A value in template.env wins.
    if !template.env.iter().any(|e| e.name == POINTS_BUDGET_ENV) {
        validator_env.push(env(
            POINTS_BUDGET_ENV,
            &points::budget(&template.tuning).to_string(),
        ));
    }
    validator_env.extend(knob_env.iter().map(|(k, v)| env(k, v)));
    validator_env.extend(template.env.iter().cloned());

    let bench = agave.workload == AgaveWorkload::Bench;
    // Agave's start-up port check and gossip, turbine and repair need its ports reachable
    // from the cluster it joins: behind pod SNAT the check exits. A bench cluster is the
    // pod itself.
    let host_network = !bench;
    let mut init = Vec::new();
    if agave.preflight {
        init.push(Container {
            name: PREFLIGHT_CONTAINER.into(),
            image: Some(image.clone()),
            command: Some(vec!["sh".into(), "-c".into()]),
            args: Some(vec![preflight_script(version, host_network)]),
            resources: Some(sidecar_resources()),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        });
    }
    if bench {
        init.extend(bench::init_containers(agave, &image, &skeleton.mounts));
    } else if key_mounts.is_empty() {
        // An unstaked, non-voting identity, made once per ledger volume.
        init.push(identity(&image, skeleton));
    }
    let pair = input
        .role
        .keys()
        .and_then(|k| k.pair.as_ref().filter(|_| k.vote.is_some()))
        .filter(|_| long_running)
        .map(|p| super::pair::parts(input, skeleton, &image, p));
    let mut config_maps = Vec::new();
    if let Some(p) = &pair {
        init.extend(p.init.iter().cloned());
        config_maps.push(p.config_map.clone());
    }
    init.extend(exporters(agave, &remote_write, long_running));
    if bench {
        init.push(bench::sidecar(agave, &image, &skeleton.mounts));
    }

    let mut mounts: Vec<VolumeMount> = skeleton.mounts.iter().cloned().chain(key_mounts).collect();
    let mut volumes = vec![parts::empty_dir(parts::VMAGENT_VOLUME)];
    volumes.extend(key_volumes);
    volumes.extend(pair.into_iter().flat_map(|p| p.volumes));
    if let Some((volume, mount)) = snapshots::volume(agave) {
        volumes.push(volume);
        mounts.push(mount);
    }
    let mut validator = Container {
        name: VALIDATOR_CONTAINER.into(),
        image: Some(image),
        command: Some(vec![PROCESS_NAME.into()]),
        args: Some(args),
        env: Some(validator_env),
        ports: Some(vec![port("rpc", agave.rpc_port)]),
        resources: Some(skeleton.validator_resources.clone()),
        volume_mounts: Some(mounts),
        // An exit at start-up (an unknown flag, a refused setting) explains itself.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };
    if long_running {
        validator.lifecycle = Some(exit_before_stop());
    }
    let mut tweaks = Tweaks {
        host_network,
        // The process exporter reads the validator's /proc entries.
        share_process_namespace: true,
        ..Default::default()
    };
    if gpu::sigverify(&template.tuning, agave) == Sigverify::Gpu {
        gpu::apply(&agave.gpu, &mut validator, &mut volumes, &mut tweaks);
    }
    Ok(ClientPod {
        init_containers: init,
        containers: vec![validator],
        volumes,
        config_maps,
        tweaks,
    })
}

/// A Validator's pod stops its validator as `agave-validator exit` does, before the
/// kubelet's SIGTERM: agave-validator installs no SIGTERM handler (agave-validator and
/// solana-core 4.0.0 register none; solana-core only SIGUSR1), so SIGTERM ends it on
/// the spot and the grace period buys nothing. `exit` asks it over the admin RPC socket
/// in the ledger (`<ledger>/admin.rpc`) to take a fastboot snapshot (up to 5 s), stop
/// its services and wait for them, and waits until the process is gone
/// (src/commands/exit/mod.rs, src/admin_rpc_service.rs `exit`). `--force`: the
/// operator deletes the pod in the restart window it judged itself; a pod deleted by
/// hand stops at once, as asked.
fn exit_before_stop() -> k8s_openapi::api::core::v1::Lifecycle {
    use k8s_openapi::api::core::v1::{ExecAction, LifecycleHandler};
    k8s_openapi::api::core::v1::Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(
                    [PROCESS_NAME, "--ledger", LEDGER_DIR, "exit", "--force"]
                        .map(String::from)
                        .to_vec(),
                ),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Validator's keys from its Secrets: `--identity` is its identity keypair, and a
/// voting one votes with `--vote-account` (a keypair file is accepted as its address:
/// `is_pubkey_or_keypair`; the identity is the authorized voter by default) instead of
/// `--no-voting`. A trial (an observer) keeps the throwaway identity.
fn keys(role: &Role, args: &mut Vec<String>) -> (Vec<VolumeMount>, Vec<Volume>) {
    let Some(keys) = role.keys() else {
        return (Vec::new(), Vec::new());
    };
    if let (Some(pair), Some(vote)) = (&keys.pair, &keys.vote) {
        return super::pair::keys(pair, vote, args);
    }
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let mut secret = |name: &str, dir: &str, k: &SecretKey| {
        mounts.push(parts::mount(name, dir, true));
        volumes.push(Volume {
            name: name.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(k.secret.clone()),
                default_mode: Some(0o400),
                ..Default::default()
            }),
            ..Default::default()
        });
        format!("{dir}/{}", k.key)
    };
    if let Some(id) = &keys.identity {
        let path = secret("identity", IDENTITY_DIR, id);
        if let Some(i) = args.iter().position(|a| a == "--identity") {
            args[i + 1] = path;
        }
    }
    if let (Role::Voting(_), Some(vote)) = (role, &keys.vote) {
        let path = secret("vote-account", VOTE_DIR, vote);
        args.retain(|a| a != "--no-voting");
        args.extend(["--vote-account".into(), path]);
    }
    (mounts, volumes)
}

fn identity(image: &str, skeleton: &Skeleton) -> Container {
    Container {
        name: "identity".into(),
        image: Some(image.into()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![format!(
            "test -f {LEDGER_DIR}/identity.json || solana-keygen new --no-bip39-passphrase --silent --outfile {LEDGER_DIR}/identity.json"
        )]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(skeleton.mounts.clone()),
        ..Default::default()
    }
}

/// The sidecars that carry Agave's metrics to Prometheus. A Validator's RPC is on the
/// pod's IP, not on 127.0.0.1 (`pod`).
fn exporters(agave: &AgaveSpec, remote_write: &str, rpc_on_pod_ip: bool) -> Vec<Container> {
    let x = &agave.exporters;
    let mut init = Vec::new();
    let rpc_host = if rpc_on_pod_ip {
        format!("$({POD_IP_ENV})")
    } else {
        "127.0.0.1".to_string()
    };
    // Slot lag from getHealth (solana-exporter, light mode: the node's own figures).
    let mut rpc_exporter = sidecar(
        "rpc-exporter",
        &x.rpc,
        vec![
            format!("-rpc-url=http://{rpc_host}:{}", agave.rpc_port),
            format!("-listen-address=:{}", x.rpc_port),
            "-light-mode".into(),
        ],
        vec![port(RPC_EXPORTER_PORT_NAME, x.rpc_port)],
    );
    if rpc_on_pod_ip {
        rpc_exporter.env = Some(vec![parts::field_env(POD_IP_ENV, "status.podIP")]);
    }
    init.push(rpc_exporter);
    // RSS, VSZ and page faults of the validator, read from the shared process namespace.
    init.push(sidecar(
        "process-exporter",
        &x.process,
        vec![
            format!("-procnames={PROCESS_NAME}"),
            format!("-web.listen-address=:{}", x.process_port),
            "-threads=false".into(),
            // smaps of a validator with millions of mappings is expensive to read.
            "-gather-smaps=false".into(),
        ],
        vec![port(PROCESS_EXPORTER_PORT_NAME, x.process_port)],
    ));
    // Every datapoint Agave pushes, with its own timestamp, remote-written to Prometheus
    // (`loaded-programs-cache-stats` becomes loaded_programs_cache_stats_<field>).
    let vmagent = parts::vmagent(
        "vmagent",
        &x.datapoints,
        "datapoints",
        x.datapoints_port,
        remote_write,
    );
    init.push(vmagent);
    init
}
