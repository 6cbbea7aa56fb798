//! A nodeos trial's pod: nodeos with its data and state volumes, a snapshot or genesis to
//! start from, two metric sidecars, and the memory hog of `tuning.memoryPressure`, all
//! inside one pod-level memory budget (docs/clients/nodeos.md, "The pod").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, HostPathVolumeSource,
    ResourceRequirements, SecurityContext, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::profile::DEFAULT_MAX_LAG_BLOCKS;
use super::{Nodeos, PROCESS_NAME, VALIDATOR_CONTAINER, plan};
use crate::api::nodeos::{NodeosMapMode, NodeosSpec, StateMedium};
use crate::api::template::VolumeRole;
use crate::clients::knobs;
use crate::clients::parts::{mount, port};
use crate::clients::pod::{Skeleton, Tweaks, config_map, sidecar_resources};
use crate::clients::{ClientPod, RenderError, RenderInput, ValidatorClient};

/// Port names of the endpoints Prometheus scrapes.
pub const HTTP_PORT_NAME: &str = "http";
pub const CHAIN_PORT_NAME: &str = "metrics-chain";
pub const PROCESS_PORT_NAME: &str = "metrics-proc";

/// Node labels an admin sets on prepared nodes (docs/clients/nodeos.md, "Node
/// preparation"): the kubelet gives Burstable pods swap, and a tmpfs without `noswap`
/// is mounted for the state.
pub const SWAP_LABEL: (&str, &str) = ("valtune.dev/swap", "LimitedSwap");
pub const STATE_TMPFS_LABEL: (&str, &str) = ("valtune.dev/nodeos-state-tmpfs", "true");

pub const HOG_CONTAINER: &str = "memory-hog";
pub const CHAIN_EXPORTER: &str = "chain-exporter";
pub const EXPORTER_SCRIPT: &str = include_str!("chain_exporter.py");
const EXPORTER_FILE: &str = "chain_exporter.py";

const CONFIG_DIR: &str = "/etc/nodeos";
const EXPORTER_DIR: &str = "/etc/valtune";
/// Shared by the chain exporter (it writes `caught-up` there) and the hog (it waits).
const RUN_DIR: &str = "/run/valtune";
pub const STATE_DIR: &str = "/mnt/state";
const SNAPSHOT_DIR: &str = "/mnt/snapshot";

/// The EOS VM OC code cache lives in the state directory too (spring v1.2.2
/// libraries/chain/controller.cpp passes `conf.state_dir`; `eos-vm-oc-cache-size-mb`
/// defaults to 1024, libraries/chain/include/eosio/chain/webassembly/eos-vm-oc/config.hpp).
pub const OC_CACHE_MIB: i64 = 1024;
const MI: u128 = 1 << 20;
/// The hog's own memory beyond the bytes it holds, and its request.
const HOG_OVERHEAD: u128 = 64 * MI;

fn quantities(pairs: &[(&str, String)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.clone())))
        .collect()
}

/// CPU in millicores as a quantity ("32", "32200m").
fn cpu(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// config.ini: the template's keys (and configKey knobs), one `key = value` a line. Always
/// present, so nodeos never writes a default one into its (read-only) config dir.
fn config_ini(spec: &NodeosSpec) -> String {
    let mut s = String::from("# Rendered by valtune (template.nodeos.config).\n");
    for (k, v) in &spec.config {
        s.push_str(&format!("{k} = {v}\n"));
    }
    s
}

pub fn pod(
    client: &Nodeos,
    input: &RenderInput,
    spec: &NodeosSpec,
    skeleton: &Skeleton,
) -> Result<ClientPod, RenderError> {
    let template = &input.template;
    let plan = plan(template, spec)?;
    let data_dir = client.mount_path(VolumeRole::Data);
    let separate_state = spec.state.medium != StateMedium::Disk
        || template.storage.iter().any(|v| v.role == VolumeRole::State);

    // The command line (plugins/chain_plugin/chain_plugin.cpp, http_plugin.cpp,
    // net_plugin.cpp and appbase application_base.cpp at spring v1.2.2 / leap v5.0.3).
    let mut args: Vec<String> = vec![
        "--data-dir".into(),
        data_dir.clone(),
        "--config-dir".into(),
        CONFIG_DIR.into(),
        // Written at start; the config dir is a read-only ConfigMap.
        "--protocol-features-dir".into(),
        format!("{data_dir}/protocol_features"),
    ];
    if separate_state {
        args.extend(["--state-dir".into(), STATE_DIR.into()]);
    }
    args.extend([
        "--chain-state-db-size-mb".into(),
        spec.chain_state_db_size_mb.to_string(),
        "--http-server-address".into(),
        format!("0.0.0.0:{}", spec.http_port),
        "--plugin".into(),
        "eosio::chain_api_plugin".into(),
        "--plugin".into(),
        "eosio::prometheus_plugin".into(),
    ]);
    // A tuned map mode comes with the knobs below.
    if template.tuning.database_map_mode.is_none() {
        args.extend(["--database-map-mode".into(), plan.mode.as_str().into()]);
    }
    for peer in &spec.peers {
        args.extend(["--p2p-peer-address".into(), peer.clone()]);
    }
    let mut files = BTreeMap::from([
        ("config.ini".to_string(), config_ini(spec)),
        (EXPORTER_FILE.to_string(), EXPORTER_SCRIPT.to_string()),
    ]);
    let mut volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: format!("{}-nodeos", skeleton.pod_name),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "run".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ];
    let mut mounts = skeleton.mounts.clone();
    mounts.push(mount("config", CONFIG_DIR, true));
    let mut init = Vec::new();
    match (&spec.snapshot, &spec.genesis_json) {
        (Some(s), _) => {
            if let Some(url) = &s.url {
                // No shell: curl alone writes the file onto the data volume.
                let file = format!("{data_dir}/snapshot.bin");
                init.push(Container {
                    name: "snapshot".into(),
                    image: Some(s.fetch_image.clone()),
                    command: Some(vec!["curl".into()]),
                    args: Some(vec![
                        "--fail".into(),
                        "--silent".into(),
                        "--show-error".into(),
                        "--location".into(),
                        "--retry".into(),
                        "5".into(),
                        "--output".into(),
                        file.clone(),
                        url.clone(),
                    ]),
                    resources: Some(sidecar_resources()),
                    volume_mounts: Some(skeleton.mounts.clone()),
                    termination_message_policy: Some("FallbackToLogsOnError".into()),
                    ..Default::default()
                });
                args.extend(["--snapshot".into(), file]);
            } else if let Some(path) = &s.host_path {
                volumes.push(Volume {
                    name: "snapshot".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: path.clone(),
                        type_: Some("File".into()),
                    }),
                    ..Default::default()
                });
                let file = format!("{SNAPSHOT_DIR}/snapshot.bin");
                mounts.push(mount("snapshot", &file, true));
                args.extend(["--snapshot".into(), file]);
            }
        }
        (None, Some(genesis)) => {
            files.insert("genesis.json".into(), genesis.clone());
            args.extend([
                "--genesis-json".into(),
                format!("{CONFIG_DIR}/genesis.json"),
            ]);
        }
        (None, None) => {}
    }
    match spec.state.medium {
        StateMedium::Disk => {}
        StateMedium::Memory => {
            // tmpfs sized for the state and the OC cache; the kubelet caps it at the pod's
            // memory limit and mounts it noswap (pkg/volume/emptydir/empty_dir.go).
            volumes.push(Volume {
                name: "state".into(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".into()),
                    size_limit: Some(Quantity(format!(
                        "{}Mi",
                        spec.chain_state_db_size_mb + OC_CACHE_MIB
                    ))),
                }),
                ..Default::default()
            });
            mounts.push(mount("state", STATE_DIR, false));
        }
        StateMedium::HostTmpfs => {
            let path = spec.state.host_path.clone().ok_or_else(|| {
                RenderError::Invalid(
                    "state.medium hostTmpfs needs state.hostPath (the node's tmpfs)".into(),
                )
            })?;
            volumes.push(Volume {
                name: "state".into(),
                host_path: Some(HostPathVolumeSource {
                    path,
                    type_: Some("Directory".into()),
                }),
                ..Default::default()
            });
            mounts.push(mount("state", STATE_DIR, false));
        }
    }
    let applied = knobs::apply(
        &super::knobs::NODEOS,
        &template.tuning,
        client.version(template),
    )?;
    args.extend(applied.args);
    args.extend(template.extra_args.iter().cloned());
    let mut env = template.env.clone();
    env.extend(
        applied
            .env
            .iter()
            .map(|(k, v)| k8s_openapi::api::core::v1::EnvVar {
                name: k.clone(),
                value: Some(v.clone()),
                ..Default::default()
            }),
    );
    producer(input, &mut args, &mut env);
    let config_map = config_map(input, skeleton, "nodeos", files);

    // The node's tmpfs outlives pods: a fresh start from the snapshot needs it empty.
    let command = if spec.state.medium == StateMedium::HostTmpfs {
        vec![
            "sh".into(),
            "-c".into(),
            format!("find {STATE_DIR} -mindepth 1 -delete && exec {PROCESS_NAME} \"$@\""),
            PROCESS_NAME.into(),
        ]
    } else {
        vec![PROCESS_NAME.into()]
    };

    // One memory budget for the pod (pod-level resources), shared by nodeos, the hog and
    // the sidecars, as the seed's machine shared its RAM.
    let sidecar = sidecar_resources();
    let sidecar_memory = 2 * 256 * MI;
    let hog_request = if plan.hog > 0 { HOG_OVERHEAD } else { 0 };
    let overhead = sidecar_memory + hog_request;
    let (nodeos_request, pod_request) = if plan.swap {
        (plan.request, plan.request + overhead)
    } else {
        let request = plan.budget.checked_sub(overhead).filter(|r| *r >= 256 * MI);
        let request = request.ok_or_else(|| {
            RenderError::Invalid(format!(
                "the memory budget {} leaves nothing for nodeos beside its sidecars: raise it",
                crate::api::quantity::Bytes(plan.budget)
            ))
        })?;
        (request, plan.budget)
    };
    if pod_request > plan.budget {
        return Err(RenderError::Invalid(
            "template.resources.memory (the request) plus 1Gi for the sidecars must not exceed memoryLimit".into(),
        ));
    }
    let cores = template.resources.cpu as u64 * 1000;
    let hog_cpu = if plan.hog > 0 { 1000 } else { 0 };
    let pod_cpu = cpu(cores + 200 + hog_cpu);
    let pod_memory = |b: u128| crate::api::quantity::Bytes(b).to_string();
    let pod_resources = ResourceRequirements {
        requests: Some(quantities(&[
            ("cpu", pod_cpu.clone()),
            ("memory", pod_memory(pod_request)),
        ])),
        limits: Some(quantities(&[
            ("cpu", pod_cpu),
            ("memory", pod_memory(plan.budget)),
        ])),
        ..Default::default()
    };
    let mut requests = quantities(&[("cpu", cpu(cores)), ("memory", pod_memory(nodeos_request))]);
    let mut limits = quantities(&[("cpu", cpu(cores)), ("memory", pod_memory(plan.budget))]);
    // Hugepages stay container resources (heap and locked map the state with them).
    for (which, skel) in [
        (&mut requests, &skeleton.validator_resources.requests),
        (&mut limits, &skeleton.validator_resources.limits),
    ] {
        for (k, v) in skel.iter().flatten() {
            if k.starts_with("hugepages-") {
                which.insert(k.clone(), v.clone());
            }
        }
    }

    let lock = plan.mode == NodeosMapMode::Locked;
    if lock && !spec.allow_memory_lock {
        return Err(RenderError::Invalid(
            "databaseMapMode locked needs template.nodeos.allowMemoryLock: true (the IPC_LOCK capability)".into(),
        ));
    }
    let nodeos = Container {
        name: VALIDATOR_CONTAINER.into(),
        image: Some(spec.image.clone()),
        command: Some(command),
        args: Some(args),
        env: (!env.is_empty()).then_some(env),
        ports: Some(vec![port(HTTP_PORT_NAME, spec.http_port)]),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            limits: Some(limits),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        // mlock of the whole state: CAP_IPC_LOCK lifts RLIMIT_MEMLOCK (mlock(2)).
        security_context: lock.then(|| SecurityContext {
            capabilities: Some(Capabilities {
                add: Some(vec!["IPC_LOCK".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        // An exit at start-up (an unknown option, a refused setting) explains itself.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };

    let max_lag = input.max_lag.unwrap_or(DEFAULT_MAX_LAG_BLOCKS);
    let x = &spec.exporters;
    // Native sidecars: restarted if they exit, unlike containers under restartPolicy Never.
    init.push(Container {
        name: CHAIN_EXPORTER.into(),
        image: Some(x.chain.clone()),
        command: Some(vec![
            "python3".into(),
            format!("{EXPORTER_DIR}/{EXPORTER_FILE}"),
        ]),
        args: Some(vec![
            format!("--nodeos=http://127.0.0.1:{}", spec.http_port),
            format!("--listen=:{}", x.chain_port),
            format!("--caught-up-blocks={max_lag}"),
            "--marker=caught-up".into(),
            format!("--process={PROCESS_NAME}"),
        ]),
        working_dir: Some(RUN_DIR.into()),
        ports: Some(vec![port(CHAIN_PORT_NAME, x.chain_port)]),
        resources: Some(sidecar.clone()),
        volume_mounts: Some(vec![
            mount("config", EXPORTER_DIR, true),
            mount("run", RUN_DIR, false),
        ]),
        restart_policy: Some("Always".into()),
        ..Default::default()
    });
    init.push(Container {
        name: "process-exporter".into(),
        image: Some(x.process.clone()),
        args: Some(vec![
            format!("-procnames={PROCESS_NAME}"),
            format!("-web.listen-address=:{}", x.process_port),
            // nodeos alone: its EOS VM OC compile monitor, trampoline and compile processes
            // are its children (forked before main, named oc-monitor, oc-trampoline and
            // oc-compile: eos-vm-oc/compile_monitor.cpp, compile_trampoline.cpp, spring
            // v1.2.2), which the default -children=true adds to its RSS, faults and writes
            // (process-exporter v0.8.7 cmd/process-exporter/main.go).
            "-children=false".into(),
            "-threads=false".into(),
            "-gather-smaps=false".into(),
        ]),
        ports: Some(vec![port(PROCESS_PORT_NAME, x.process_port)]),
        resources: Some(sidecar),
        restart_policy: Some("Always".into()),
        ..Default::default()
    });

    let mut containers = vec![nodeos];
    if plan.hog > 0 {
        containers.push(hog(spec, plan.hog));
    }
    let mut node_selector = BTreeMap::new();
    if plan.swap {
        node_selector.insert(SWAP_LABEL.0.into(), SWAP_LABEL.1.into());
    }
    if spec.state.medium == StateMedium::HostTmpfs {
        node_selector.insert(STATE_TMPFS_LABEL.0.into(), STATE_TMPFS_LABEL.1.into());
    }
    Ok(ClientPod {
        init_containers: init,
        containers,
        volumes,
        config_maps: vec![config_map],
        tweaks: Tweaks {
            // process-exporter and the chain exporter read nodeos' /proc entries.
            share_process_namespace: true,
            pod_resources: Some(pod_resources),
            node_selector,
            ..Default::default()
        },
    })
}

/// stress-ng holding `bytes` (`--vm 1 --vm-bytes N --vm-keep`: one worker that maps N
/// bytes once and keeps rewriting them, so they stay resident; `--no-madvise` leaves out
/// the random madvise(2) advice stress-ng gives by default; `--timeout 0` runs until the
/// pod stops: stress-ng.1 at V0.22.00). It waits for the chain exporter's marker when
/// asked to start after catch-up.
fn hog(spec: &NodeosSpec, bytes: u128) -> Container {
    let run =
        format!("exec stress-ng --vm 1 --vm-bytes {bytes} --vm-keep --no-madvise --timeout 0");
    let script = if spec.memory_hog.after_catch_up {
        format!("until [ -e {RUN_DIR}/caught-up ]; do sleep 5; done; {run}")
    } else {
        run
    };
    let r = |memory: u128| {
        quantities(&[
            ("cpu", "1".into()),
            ("memory", crate::api::quantity::Bytes(memory).to_string()),
        ])
    };
    Container {
        name: HOG_CONTAINER.into(),
        image: Some(spec.memory_hog.image.clone()),
        command: Some(vec!["sh".into(), "-c".into(), script]),
        resources: Some(ResourceRequirements {
            requests: Some(r(HOG_OVERHEAD)),
            limits: Some(r(bytes + HOG_OVERHEAD)),
            ..Default::default()
        }),
        volume_mounts: Some(vec![mount("run", RUN_DIR, true)]),
        ..Default::default()
    }
}

/// The env var that carries a producer's signature provider from its Secret.
pub const SIGNATURE_ENV: &str = "NODEOS_SIGNATURE_PROVIDER";

/// A producing Validator: `--producer-name` and `--signature-provider
/// <public-key>=KEY:<private-key>` (producer_plugin.cpp L1287-1291, the spec's form in
/// signature_provider_plugin.cpp L75-80, spring v1.2.2), the latter from the identity
/// Secret through an env var the kubelet expands in the arguments, so the key is in no
/// object of the API (the pod says `$(NODEOS_SIGNATURE_PROVIDER)` and where it comes
/// from). The producer_plugin is always loaded (programs/nodeos/main.cpp L183).
fn producer(
    input: &RenderInput,
    args: &mut Vec<String>,
    env: &mut Vec<k8s_openapi::api::core::v1::EnvVar>,
) {
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};
    let crate::clients::input::Role::Voting(keys) = &input.role else {
        return;
    };
    let (Some(name), Some(key)) = (&keys.producer, &keys.identity) else {
        return;
    };
    args.extend([
        "--producer-name".into(),
        name.clone(),
        "--signature-provider".into(),
        format!("$({SIGNATURE_ENV})"),
    ]);
    env.push(EnvVar {
        name: SIGNATURE_ENV.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: key.secret.clone(),
                key: key.key.clone(),
                optional: Some(false),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
}
