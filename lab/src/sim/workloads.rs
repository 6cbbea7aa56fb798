//! Validator workloads: for every running pod on a lab node whose container runs a
//! client the lab models (today: `agave-validator`), serve on the pod's own IP, at the
//! ports of its exporter sidecars, what those exporters would serve; and do what the
//! kubelet would when the model's validator runs out of memory (container terminated,
//! reason OOMKilled) or the pod passes its activeDeadlineSeconds.
//!
//! Fault injection: a validator container with the env var `VALTUNE_LAB_CRASH_AFTER`
//! (a duration of simulated time, e.g. `3h`) exits with an error then, as a crashing
//! validator would.
//!
//! Time is compressed: simulated time runs `time_scale` times faster than the wall
//! clock, and counters are scaled so that per-second rates read in simulated units
//! (a validator doing 4,600 TPS shows rate() = 4,600 whatever the scale).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, ContainerState, ContainerStateTerminated, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

use super::agave::{AgaveModel, seed};
use crate::state::LabState;
use crate::topology::LAB_LABEL;

/// Which exporter a container port plays, recognised by the container's image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exporter {
    /// asymmetric-research/solana-exporter (JSON RPC: TPS, slots behind).
    SolanaRpc,
    /// ncabatoff/process-exporter (RSS, VSZ, page faults).
    Process,
    /// prometheus/influxdb_exporter (Agave's pushed datapoints).
    Influxdb,
}

fn exporter_of(image: &str) -> Option<Exporter> {
    if image.contains("solana-exporter") {
        Some(Exporter::SolanaRpc)
    } else if image.contains("process-exporter") {
        Some(Exporter::Process)
    } else if image.contains("influxdb-exporter") || image.contains("influxdb_exporter") {
        Some(Exporter::Influxdb)
    } else {
        None
    }
}

/// The container running agave-validator, if any.
fn agave_container(pod: &Pod) -> Option<&Container> {
    pod.spec.as_ref()?.containers.iter().find(|c| {
        c.command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .any(|a| a.ends_with("agave-validator"))
    })
}

/// Bytes of a Kubernetes quantity (the forms memory limits are written in).
pub fn parse_bytes(q: &str) -> Option<u128> {
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let value: f64 = num.parse().ok()?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        _ => return None,
    };
    Some((value * mult).round() as u128)
}

fn started_at(pod: &Pod, container: &str) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container)
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .or(status.start_time.clone())
        .map(|t| t.0)
}

fn terminated(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.name == container && c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

/// A running pod on one of the lab's nodes that the lab can play.
fn playable(pod: &Pod, nodes: &HashSet<String>) -> bool {
    let on_lab_node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some_and(|n| nodes.contains(n));
    let status = pod.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let has_ip = status.and_then(|s| s.pod_ip.as_ref()).is_some();
    on_lab_node
        && running
        && has_ip
        && pod.metadata.deletion_timestamp.is_none()
        && agave_container(pod).is_some()
}

pub async fn run(client: Client, state: LabState) -> anyhow::Result<()> {
    let nodes: Arc<RwLock<HashSet<String>>> = Arc::default();
    let node_api: Api<Node> = Api::all(client.clone());
    let node_cfg = watcher::Config::default().labels(&format!("{LAB_LABEL}={}", state.name));
    let nodes_w = nodes.clone();
    let node_watch = async move {
        let mut stream = watcher::watcher(node_api, node_cfg).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(n) | Event::InitApply(n)) => {
                    nodes_w.write().expect("lock").insert(n.name_any());
                }
                Ok(Event::Delete(n)) => {
                    nodes_w.write().expect("lock").remove(&n.name_any());
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(error = %e, "watching nodes");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    };

    let pod_api: Api<Pod> = Api::all(client.clone());
    let pod_watch = async move {
        let mut running: HashMap<String, (watch::Sender<Pod>, tokio::task::JoinHandle<()>)> =
            HashMap::new();
        let mut stream = watcher::watcher(pod_api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let (pod, deleted) = match ev {
                Ok(Event::Apply(p) | Event::InitApply(p)) => (p, false),
                Ok(Event::Delete(p)) => (p, true),
                Ok(_) => continue,
                Err(e) => {
                    warn!(error = %e, "watching pods");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let keep = !deleted && playable(&pod, &nodes.read().expect("lock"));
            match (running.get(&uid), keep) {
                (Some((tx, _)), true) => {
                    let _ = tx.send(pod);
                }
                (Some(_), false) => {
                    if let Some((_, task)) = running.remove(&uid) {
                        task.abort();
                        info!(pod = %pod.name_any(), "workload stopped");
                    }
                }
                (None, true) => {
                    let (tx, rx) = watch::channel(pod.clone());
                    let task = tokio::spawn(workload(client.clone(), state.clone(), rx));
                    running.insert(uid, (tx, task));
                }
                (None, false) => {}
            }
        }
    };
    tokio::join!(node_watch, pod_watch);
    Ok(())
}

/// What a running workload serves.
struct Live {
    model: AgaveModel,
    start: Timestamp,
    scale: f64,
    dead: AtomicBool,
}

impl Live {
    fn sim_seconds(&self) -> f64 {
        Timestamp::now()
            .duration_since(self.start)
            .as_secs_f64()
            .max(0.0)
            * self.scale
    }

    /// The exporter's /metrics page now (empty once the validator is gone).
    fn render(&self, exporter: Exporter) -> String {
        let t = self.sim_seconds();
        let m = &self.model;
        let dead = self.dead.load(Ordering::SeqCst);
        match exporter {
            Exporter::SolanaRpc if dead => String::new(),
            Exporter::SolanaRpc => {
                let lag = m.reported_slots_behind(t);
                let slot = m.slot_height(t);
                format!(
                    "# HELP solana_node_transactions_total Total number of transactions processed without error since genesis.\n\
                     # TYPE solana_node_transactions_total gauge\n\
                     solana_node_transactions_total {:.3}\n\
                     # HELP solana_node_num_slots_behind The number of slots that the node is behind the latest cluster confirmed slot.\n\
                     # TYPE solana_node_num_slots_behind gauge\n\
                     solana_node_num_slots_behind {lag}\n\
                     # HELP solana_node_is_healthy Whether the node is healthy\n\
                     # TYPE solana_node_is_healthy gauge\n\
                     solana_node_is_healthy {}\n\
                     # HELP solana_node_slot_height The current slot number\n\
                     # TYPE solana_node_slot_height gauge\n\
                     solana_node_slot_height {slot}\n\
                     # HELP solana_node_block_height The current block height of the node\n\
                     # TYPE solana_node_block_height gauge\n\
                     solana_node_block_height {}\n",
                    m.transactions(t) / self.scale,
                    if lag == 0.0 { 1 } else { 0 },
                    (slot * 0.95).round(),
                )
            }
            Exporter::Process => {
                let g = "groupname=\"agave-validator\"";
                if dead {
                    return format!(
                        "# TYPE namedprocess_namegroup_num_procs gauge\nnamedprocess_namegroup_num_procs{{{g}}} 0\n"
                    );
                }
                let (major, minor) = m.faults(t);
                format!(
                    "# HELP namedprocess_namegroup_num_procs number of processes in this group\n\
                     # TYPE namedprocess_namegroup_num_procs gauge\n\
                     namedprocess_namegroup_num_procs{{{g}}} 1\n\
                     # HELP namedprocess_namegroup_memory_bytes number of bytes of memory in use\n\
                     # TYPE namedprocess_namegroup_memory_bytes gauge\n\
                     namedprocess_namegroup_memory_bytes{{{g},memtype=\"resident\"}} {:.0}\n\
                     namedprocess_namegroup_memory_bytes{{{g},memtype=\"virtual\"}} {:.0}\n\
                     namedprocess_namegroup_memory_bytes{{{g},memtype=\"swapped\"}} 0\n\
                     # HELP namedprocess_namegroup_major_page_faults_total Major page faults\n\
                     # TYPE namedprocess_namegroup_major_page_faults_total counter\n\
                     namedprocess_namegroup_major_page_faults_total{{{g}}} {:.0}\n\
                     # HELP namedprocess_namegroup_minor_page_faults_total Minor page faults\n\
                     # TYPE namedprocess_namegroup_minor_page_faults_total counter\n\
                     namedprocess_namegroup_minor_page_faults_total{{{g}}} {:.0}\n",
                    m.rss_bytes(t),
                    m.vsz_bytes(t),
                    major / self.scale,
                    minor / self.scale,
                )
            }
            // Agave pushes its datapoints here; the lab does not model them yet, so
            // the exporter has nothing to show, as before a validator's first push.
            Exporter::Influxdb => String::new(),
        }
    }
}

async fn workload(client: Client, state: LabState, mut rx: watch::Receiver<Pod>) {
    let pod = rx.borrow().clone();
    let name = pod.name_any();
    let ns = pod.namespace().unwrap_or_default();
    let Some(validator) = agave_container(&pod).cloned() else {
        return;
    };
    let Some(ip) = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .and_then(|ip| ip.parse::<IpAddr>().ok())
    else {
        return;
    };
    let limit = validator
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .and_then(|q| parse_bytes(&q.0))
        .unwrap_or(1 << 40);
    let scale = state.time_scale;
    let step = crate::state::parse_seconds(&state.scrape_interval).unwrap_or(15.0);
    let start = started_at(&pod, &validator.name).unwrap_or_else(Timestamp::now);
    let live = Arc::new(Live {
        model: AgaveModel::new(seed(&name), limit, step * scale * 3.0),
        start,
        scale,
        dead: AtomicBool::new(terminated(&pod, &validator.name)),
    });
    info!(pod = %name, %ip, limit_gib = limit / (1 << 30), "workload started");

    let mut servers = Vec::new();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let Some(exporter) = c.image.as_deref().and_then(exporter_of) else {
            continue;
        };
        for p in c.ports.iter().flatten() {
            let addr = SocketAddr::new(ip, p.container_port as u16);
            servers.push(tokio::spawn(serve(addr, exporter, live.clone())));
        }
    }
    let _guard = AbortOnDrop(servers);

    let api: Api<Pod> = Api::namespaced(client, &ns);
    let oom_at = live
        .model
        .oom_at()
        .map(|t| start + jiff::SignedDuration::from_secs_f64(t / scale));
    let crash_at = crash_after(&validator)
        .map(|t| start + jiff::SignedDuration::from_secs_f64(t / scale))
        .filter(|c| oom_at.is_none_or(|o| *c < o));
    loop {
        let pod = rx.borrow().clone();
        let deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .and_then(|d| {
                let begun = pod.status.as_ref()?.start_time.clone()?.0;
                Some(begun + jiff::SignedDuration::from_secs(d))
            });
        let alive = !live.dead.load(Ordering::SeqCst);
        let next = [
            oom_at.filter(|_| alive),
            crash_at.filter(|_| alive),
            deadline,
        ]
        .into_iter()
        .flatten()
        .min();
        let wait = next
            .map(|t| Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() { return; }
            }
            _ = tokio::time::sleep(wait) => {
                let now = Timestamp::now();
                if deadline.is_some_and(|d| now >= d) {
                    live.dead.store(true, Ordering::SeqCst);
                    if let Err(e) = kubelet_stop(&api, &name, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline").await {
                        warn!(pod = %name, error = %e, "marking the pod past its deadline");
                    }
                    return;
                }
                if crash_at.is_some_and(|t| now >= t) && !live.dead.load(Ordering::SeqCst) {
                    live.dead.store(true, Ordering::SeqCst);
                    match terminate(&api, &name, &validator.name, "Error", 1).await {
                        Ok(()) => info!(pod = %name, "validator crashed (VALTUNE_LAB_CRASH_AFTER)"),
                        Err(e) => warn!(pod = %name, error = %e, "marking the crash"),
                    }
                }
                if oom_at.is_some_and(|t| now >= t) && !live.dead.load(Ordering::SeqCst) {
                    live.dead.store(true, Ordering::SeqCst);
                    match terminate(&api, &name, &validator.name, "OOMKilled", 137).await {
                        Ok(()) => info!(pod = %name, "validator OOM-killed (working set above the memory limit)"),
                        Err(e) => warn!(pod = %name, error = %e, "marking the OOM kill"),
                    }
                }
            }
        }
    }
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

async fn serve(addr: SocketAddr, exporter: Exporter, live: Arc<Live>) {
    use axum::routing::get;
    // The IP may still be held by the previous pod's listener for a moment.
    let mut listener = None;
    for _ in 0..40 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                listener = Some(l);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let Some(listener) = listener else {
        warn!(%addr, "could not listen for the workload's metrics");
        return;
    };
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let live = live.clone();
            async move {
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    live.render(exporter),
                )
            }
        }),
    );
    let _ = axum::serve(listener, app).await;
}

fn now_time() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).expect("a valid time"))
}

/// Simulated seconds after which the validator crashes, from `VALTUNE_LAB_CRASH_AFTER`.
fn crash_after(c: &Container) -> Option<f64> {
    let v = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "VALTUNE_LAB_CRASH_AFTER")?;
    crate::state::parse_seconds(v.value.as_deref()?)
}

/// As the kubelet reports a container's exit (an OOM kill: reason OOMKilled, code 137):
/// the container terminated; the pod keeps running its other containers
/// (restartPolicy Never).
async fn terminate(
    api: &Api<Pod>,
    pod: &str,
    container: &str,
    reason: &str,
    code: i32,
) -> kube::Result<()> {
    let current = api.get_status(pod).await?;
    let mut status = current.status.unwrap_or_default();
    for c in status.container_statuses.iter_mut().flatten() {
        if c.name == container {
            let started = c
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone());
            c.state = Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some(reason.into()),
                    started_at: started,
                    finished_at: Some(now_time()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            c.ready = false;
            c.started = Some(false);
        }
    }
    for cond in status.conditions.iter_mut().flatten() {
        if cond.type_ == "Ready" || cond.type_ == "ContainersReady" {
            cond.status = "False".into();
            cond.reason = Some("ContainersNotReady".into());
            cond.message = Some(format!("containers with unready status: [{container}]"));
            cond.last_transition_time = Some(now_time());
        }
    }
    let patch = serde_json::json!({"status": {"containerStatuses": status.container_statuses, "conditions": status.conditions}});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// As the kubelet stops a pod (past activeDeadlineSeconds): every container terminated,
/// the pod Failed with the reason.
async fn kubelet_stop(api: &Api<Pod>, pod: &str, reason: &str, message: &str) -> kube::Result<()> {
    let current = api.get_status(pod).await?;
    let mut status = current.status.unwrap_or_default();
    for c in status.container_statuses.iter_mut().flatten() {
        if c.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
            continue;
        }
        c.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("Error".into()),
                finished_at: Some(now_time()),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.ready = false;
    }
    let patch = serde_json::json!({"status": {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        "containerStatuses": status.container_statuses,
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_parse() {
        assert_eq!(parse_bytes("128Gi"), Some(128 << 30));
        assert_eq!(parse_bytes("1.5Ti"), Some(1536 << 30));
        assert_eq!(parse_bytes("512G"), Some(512_000_000_000));
        assert_eq!(parse_bytes("lots"), None);
    }

    #[test]
    fn exporters_are_recognised_by_image() {
        assert_eq!(
            exporter_of("ghcr.io/asymmetric-research/solana-exporter:v3.0.2"),
            Some(Exporter::SolanaRpc)
        );
        assert_eq!(
            exporter_of("ncabatoff/process-exporter:0.8.7"),
            Some(Exporter::Process)
        );
        assert_eq!(
            exporter_of("prom/influxdb-exporter:v0.12.1"),
            Some(Exporter::Influxdb)
        );
        assert_eq!(exporter_of("anzaxyz/agave:v2.0.5"), None);
    }

    #[test]
    fn rates_read_in_simulated_units_whatever_the_scale() {
        let model = AgaveModel::new(seed("p"), 1536 << 30, 2160.0);
        let live = Live {
            model,
            start: Timestamp::now(),
            scale: 720.0,
            dead: AtomicBool::new(false),
        };
        let text = live.render(Exporter::SolanaRpc);
        assert!(text.contains("# TYPE solana_node_transactions_total gauge"));
        assert!(text.contains("solana_node_num_slots_behind"));
        live.dead.store(true, Ordering::SeqCst);
        assert_eq!(live.render(Exporter::SolanaRpc), "");
        assert!(
            live.render(Exporter::Process)
                .contains("num_procs{groupname=\"agave-validator\"} 0")
        );
    }
}
