//! What a nodeos container's pod gives it, read as nodeos and the kubelet read it: the
//! options (command line, then config.ini) with nodeos' own refusals, the state's volume,
//! the memory budget and the hog sharing it, hugepages, and the swap the kubelet grants.

use k8s_openapi::api::core::v1::{Container, ResourceRequirements, Volume};

use super::model::{Mode, Place, STATE_GIB, Setup};
use super::options::{COMMON, LEAP_ONLY, SPRING_ONLY};
use super::{OTHER_FAIL, flag};
use crate::sim::clients::{Env, flag_values};
use crate::sim::pod_view::{PodView, parse_bytes};

const GIB: f64 = (1u64 << 30) as f64;
/// fc::app_path() of the nodeos images (root's data and config, programs/nodeos/main.cpp).
const DEFAULT_DATA_DIR: &str = "/root/.local/share/eosio/nodeos/data";
const DEFAULT_CONFIG_DIR: &str = "/root/.local/share/eosio/nodeos/config";

pub struct Reading {
    pub setup: Setup,
    /// Spring (1.x) rather than leap (5.x): its block metrics are gated.
    pub spring: bool,
    pub version_string: String,
    pub http_port: u16,
    pub chain_api: bool,
    pub prometheus: bool,
    /// How starting fails part way through loading the state, if it does: (share of the
    /// load done, exit code, message).
    pub load_failure: Option<(f64, i32, String)>,
    pub seed: u64,
    /// `producer-name`s (composing: the command line's and config.ini's together,
    /// producer_plugin.cpp L1287 @spring v1.2.2).
    pub producers: Vec<String>,
}

type Refusal = (i32, String);

fn refuse(message: String) -> Refusal {
    (OTHER_FAIL, message)
}

fn known(option: &str, spring: bool) -> bool {
    COMMON.contains(&option)
        || if spring {
            SPRING_ONLY.contains(&option)
        } else {
            LEAP_ONLY.contains(&option)
        }
}

/// `key = value` lines of config.ini (appbase reads it with boost's parse_config_file).
fn config_entries(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The volume mounted deepest above `path` in the container, if any.
fn volume_at<'a>(pod: &'a PodView, c: &Container, path: &str) -> Option<&'a Volume> {
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| {
            path == m.mount_path
                || path.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))
        })
        .max_by_key(|m| m.mount_path.len())?;
    pod.pod
        .spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
}

fn quantity(c: &Container, side: &str, name: &str) -> Option<u128> {
    let r = c.resources.as_ref()?;
    let list = if side == "requests" {
        &r.requests
    } else {
        &r.limits
    };
    parse_bytes(&list.as_ref()?.get(name)?.0)
}

pub fn read(pod: &PodView, c: &Container, args: &[String], env: &Env) -> Result<Reading, Refusal> {
    let image = c.image.clone().unwrap_or_default();
    let version = super::super::image_version(&image);
    // Leap 5 is 5.x; spring restarted at 1.x. Unknown: the newest, spring.
    let spring = version.is_none_or(|(major, _, _)| major < 5);
    let version_string = version
        .map(|(a, b, p)| format!("v{a}.{b}.{p}"))
        .unwrap_or_else(|| "v1.2.2".into());

    // Options nodeos does not know end it at once (appbase application_base.cpp).
    for a in args.iter().filter(|a| a.starts_with("--")) {
        let name = a[2..].split('=').next().unwrap_or("");
        if !known(name, spring) {
            return Err(refuse(format!(
                "Unknown option '{}' passed as command line argument",
                a.split('=').next().unwrap_or(a)
            )));
        }
    }
    let config_dir = flag(args, "--config-dir").unwrap_or(DEFAULT_CONFIG_DIR);
    let config_path = format!(
        "{}/{}",
        config_dir.trim_end_matches('/'),
        flag(args, "--config").unwrap_or("config.ini")
    );
    let config = pod
        .file(c, &config_path)
        .map(|t| config_entries(&t))
        .unwrap_or_default();
    for (k, _) in &config {
        if !known(k, spring) {
            return Err(refuse(format!(
                "Unknown option '{k}' inside the config file {config_path}"
            )));
        }
    }
    // The command line wins over the file (boost::program_options stores it first).
    let get = |name: &str| -> Option<String> {
        flag(args, &format!("--{name}"))
            .map(str::to_string)
            .or_else(|| {
                config
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
    };
    let mode = match get("database-map-mode").as_deref().unwrap_or("mapped") {
        "mapped" => Mode::Mapped,
        "mapped_private" if spring || version.is_some_and(|v| v.0 >= 5) => Mode::MappedPrivate,
        "heap" => Mode::Heap,
        "locked" => Mode::Locked,
        other => {
            return Err(refuse(format!(
                "the argument ('{other}') for option '--database-map-mode' is invalid"
            )));
        }
    };
    // chain_plugin.cpp (plugin_initialize): a snapshot carries its genesis.
    let snapshot = get("snapshot").is_some();
    if snapshot && get("genesis-json").is_some() {
        return Err(refuse(
            "3110000 plugin_config_exception: Incorrect plugin configuration\n--snapshot is incompatible with --genesis-json as the snapshot contains genesis information".into(),
        ));
    }
    let db_mib: f64 = get("chain-state-db-size-mb")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024.0);
    let data_dir = get("data-dir").unwrap_or_else(|| DEFAULT_DATA_DIR.into());
    let state_dir = match get("state-dir") {
        Some(d) if d.starts_with('/') => d,
        Some(d) => format!("{data_dir}/{d}"),
        None => format!("{data_dir}/state"),
    };
    let place = match volume_at(pod, c, &state_dir) {
        Some(v) if v.empty_dir.as_ref().and_then(|e| e.medium.as_deref()) == Some("Memory") => {
            Place::MemoryTmpfs
        }
        Some(v)
            if v.host_path.as_ref().is_some_and(|h| {
                pod.machine
                    .prepared
                    .tmpfs
                    .iter()
                    .any(|t| h.path == *t || h.path.starts_with(&format!("{t}/")))
            }) =>
        {
            Place::SwapTmpfs
        }
        _ => Place::Disk,
    };
    // chainbase src/pinnable_mapped_file.cpp (leap 5.0 and spring): only the shared
    // mapping may keep its file on tmpfs.
    if place != Place::Disk && mode != Mode::Mapped {
        return Err(refuse(
            "3060000 std_exception: std_exception\nWe recommend storing the state db file on tmpfs only when database-map-mode=mapped".into(),
        ));
    }
    let plugins: Vec<String> = flag_values(args, "--plugin")
        .into_iter()
        .map(str::to_string)
        .chain(
            config
                .iter()
                .filter(|(k, _)| k == "plugin")
                .map(|(_, v)| v.clone()),
        )
        .collect();
    let http_port = get("http-server-address")
        .as_deref()
        .unwrap_or("127.0.0.1:8888")
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8888);

    // The memory nodeos gets: the pod-level limit it shares with the hog, or its own.
    let spec = pod.pod.spec.as_ref();
    let pod_level = |side: &str| {
        let r = spec?.resources.as_ref()?;
        let list = if side == "requests" {
            &r.requests
        } else {
            &r.limits
        };
        parse_bytes(&list.as_ref()?.get("memory")?.0)
    };
    let budget = pod_level("limits")
        .or(quantity(c, "limits", "memory"))
        .unwrap_or(pod.machine.memory.max(1 << 40));
    // The hog counts only inside a shared (pod-level) budget.
    let hog = pod_level("limits").and_then(|_| {
        spec?.containers.iter().find_map(|h| {
            let line = pod.command_line(h).join(" ");
            let bytes = line
                .split_whitespace()
                .skip_while(|w| *w != "--vm-bytes")
                .nth(1)?;
            Some((stress_ng_bytes(bytes)?, line.contains("until [ -e")))
        })
    });
    let caught_up_blocks = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter_map(|x| {
            let line = pod.command_line(x);
            flag(&line, "--caught-up-blocks").and_then(|v| v.parse().ok())
        })
        .next()
        .unwrap_or(120.0);
    let huge = quantity(c, "limits", "hugepages-1Gi").unwrap_or(0)
        + quantity(c, "limits", "hugepages-2Mi").unwrap_or(0);
    let state_gib = env
        .get("VALTUNE_LAB_CHAIN_STATE")
        .and_then(|q| parse_bytes(q))
        .map(|b| b as f64 / GIB)
        .unwrap_or(STATE_GIB);

    let lock = c
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.as_ref())
        .is_some_and(|a| a.iter().any(|x| x == "IPC_LOCK" || x == "CAP_IPC_LOCK"));
    let memlock = pod.machine.prepared.memlock_kib.map(|k| k as u128 * 1024);
    let db_bytes = (db_mib * 1024.0 * 1024.0) as u128;
    let load_failure = if db_mib / 1024.0 < state_gib {
        // chainbase runs out of its file while the snapshot is read: programs/nodeos/
        // main.cpp catches boost::interprocess::bad_alloc and returns BAD_ALLOC.
        Some((db_mib / 1024.0 / state_gib, 1, "bad alloc".to_string()))
    } else if mode == Mode::Locked && !lock && memlock.is_some_and(|m| m < db_bytes) {
        let m = memlock.unwrap_or(0);
        Some((
            1.0,
            OTHER_FAIL,
            if spring {
                format!(
                    "Failed to mlock database \"state\". Current locked memory soft limit: {m} bytes, hard limit: {m} bytes. Run \"ulimit -l\" to increase locked memory limit."
                )
            } else {
                "Failed to mlock database \"state\"".into()
            },
        ))
    } else {
        None
    };

    Ok(Reading {
        setup: Setup {
            state_gib,
            db_gib: db_mib / 1024.0,
            budget_gib: budget as f64 / GIB,
            hog_gib: hog.map(|h| h.0 as f64 / GIB).unwrap_or(0.0),
            hog_waits: hog.is_some_and(|h| h.1),
            caught_up_blocks,
            place,
            mode,
            huge_gib: huge as f64 / GIB,
            swap_gib: swap_limit(pod, c) as f64 / GIB,
            from_snapshot: snapshot,
        },
        spring,
        version_string,
        http_port,
        chain_api: plugins.iter().any(|p| p == "eosio::chain_api_plugin"),
        prometheus: plugins.iter().any(|p| p == "eosio::prometheus_plugin"),
        load_failure,
        seed: crate::sim::clients::seed(&pod.name),
        producers: flag_values(args, "--producer-name")
            .into_iter()
            .map(String::from)
            .chain(
                config
                    .iter()
                    .filter(|(k, _)| k == "producer-name")
                    .map(|(_, v)| v.clone()),
            )
            .collect(),
    })
}

/// stress-ng sizes: bytes, or with b/k/m/g (binary: stress-ng's get_uint64_byte).
fn stress_ng_bytes(v: &str) -> Option<u128> {
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u128 = num.parse().ok()?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    Some(n << shift)
}

/// The swap the kubelet gives the container (kubernetes pkg/kubelet/kuberuntime/
/// kuberuntime_container_linux.go, v1.34): LimitedSwap, a Burstable pod, a container whose
/// memory request differs from its limit: request / node memory x node swap; else none.
fn swap_limit(pod: &PodView, c: &Container) -> u128 {
    let m = &pod.machine;
    if !m.limited_swap() || m.memory == 0 {
        return 0;
    }
    let Some(request) = quantity(c, "requests", "memory") else {
        return 0;
    };
    if quantity(c, "limits", "memory") == Some(request) || !burstable(pod) {
        return 0;
    }
    (request as f64 / m.memory as f64 * m.swap() as f64) as u128
}

/// The pod's QoS class is Burstable: neither Guaranteed (requests equal to limits for
/// CPU and memory; the pod-level ones decide when set) nor BestEffort.
fn burstable(pod: &PodView) -> bool {
    let Some(spec) = pod.pod.spec.as_ref() else {
        return false;
    };
    fn guaranteed(r: Option<&ResourceRequirements>) -> bool {
        let Some(r) = r else { return false };
        ["cpu", "memory"].iter().all(|k| {
            let limit = r.limits.as_ref().and_then(|l| l.get(*k));
            let request = r.requests.as_ref().and_then(|q| q.get(*k)).or(limit);
            limit.is_some() && request == limit
        })
    }
    if spec.resources.is_some() {
        return !guaranteed(spec.resources.as_ref());
    }
    !spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .all(|c| guaranteed(c.resources.as_ref()))
}
