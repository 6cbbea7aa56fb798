//! Workloads: for every running pod on a lab node whose container runs a client the lab
//! models ([`super::clients`]), start that client's process model and serve it at its
//! own interfaces on the pod's IP (JSON-RPC, native /metrics), push its datapoints where
//! its config says, keep its /proc entries, run the pod's sidecars ([`super::sidecars`]),
//! and do what the kubelet would when the process exits (container terminated with its
//! reason, code and message) or the pod passes its activeDeadlineSeconds.
//!
//! Fault injection: a validator container with the env var `VALTUNE_LAB_CRASH_AFTER`
//! (a duration of simulated time, e.g. `3h`) exits with an error then.
//!
//! Time is compressed ([`super::clock`]): counters are scaled so that per-second rates
//! read in simulated units (a validator doing 4,600 TPS shows rate() = 4,600).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

mod live;
mod push;
mod serve;

use live::{Live, keep_files, keep_proc, watch_exit};
use push::{push_datapoints, send_posts};
use serve::{serve_admin, serve_metrics, serve_rpc, slow_rpc};

use super::clients::{self, Exit, Started};
use super::clock::Clock;
use super::pod_view::PodView;
use super::sidecars::{self, PodDirs};
use super::{init_steps, kubelet, procfs};
use crate::state::LabState;
use crate::topology::{KUBELET_LABEL, LAB_LABEL};

/// The lab's nodes and their labels.
type Nodes = Arc<RwLock<HashMap<String, BTreeMap<String, String>>>>;

fn node_of(pod: &Pod) -> Option<&String> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_ref())
}

/// A running pod on one of the lab's nodes whose validator the lab plays.
fn playable(pod: &Pod, nodes: &HashMap<String, BTreeMap<String, String>>) -> bool {
    let on_lab_node = node_of(pod).is_some_and(|n| nodes.contains_key(n));
    let status = pod.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let has_ip = status.and_then(|s| s.pod_ip.as_ref()).is_some();
    on_lab_node
        && running
        && has_ip
        && pod.metadata.deletion_timestamp.is_none()
        && clients::recognise(pod).is_some()
}

/// A pod being deleted whose termination the lab's kubelet plays (kwok leaves it: see
/// kwok.rs): one with a preStop hook, on a lab node whose kubelet answers.
fn stopped_by_the_lab(pod: &Pod, nodes: &HashMap<String, BTreeMap<String, String>>) -> bool {
    let answers = node_of(pod)
        .and_then(|n| nodes.get(n))
        .is_some_and(|l| l.get(KUBELET_LABEL.0).map(String::as_str) == Some(KUBELET_LABEL.1));
    pod.metadata.deletion_timestamp.is_some() && answers && pre_stop(pod).next().is_some()
}

/// The containers' preStop exec hooks: (container, command).
fn pre_stop(pod: &Pod) -> impl Iterator<Item = (&Container, &Vec<String>)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| {
            let cmd = c
                .lifecycle
                .as_ref()?
                .pre_stop
                .as_ref()?
                .exec
                .as_ref()?
                .command
                .as_ref()?;
            Some((c, cmd))
        })
}

pub async fn run(client: Client, state: LabState) -> anyhow::Result<()> {
    let nodes: Nodes = Arc::default();
    let node_api: Api<Node> = Api::all(client.clone());
    let node_cfg = watcher::Config::default().labels(&format!("{LAB_LABEL}={}", state.name));
    let nodes_w = nodes.clone();
    let node_watch = async move {
        let mut stream = watcher::watcher(node_api, node_cfg).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(n) | Event::InitApply(n)) => {
                    nodes_w
                        .write()
                        .expect("lock")
                        .insert(n.name_any(), n.labels().clone());
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
        let mut stopping: HashSet<String> = HashSet::new();
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
            if !deleted && stopped_by_the_lab(&pod, &nodes.read().expect("lock")) {
                // Its workload plays the termination; with none (never started here) the
                // pod is deleted at once, as the kubelet does with nothing to stop.
                match running.get(&uid) {
                    Some((tx, _)) => {
                        let _ = tx.send(pod);
                    }
                    None => {
                        if stopping.insert(uid.clone()) {
                            let api: Api<Pod> = Api::namespaced(
                                client.clone(),
                                &pod.namespace().unwrap_or_default(),
                            );
                            let name = pod.name_any();
                            tokio::spawn(async move {
                                if let Err(e) = kubelet::delete_stopped(&api, &name, &uid).await {
                                    warn!(pod = %name, error = %e, "deleting the stopped pod");
                                }
                            });
                        }
                    }
                }
                continue;
            }
            if deleted {
                stopping.remove(&uid);
            }
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
                    let task =
                        tokio::spawn(workload(client.clone(), state.clone(), rx, nodes.clone()));
                    running.insert(uid, (tx, task));
                }
                (None, false) => {}
            }
        }
    };
    tokio::join!(node_watch, pod_watch);
    Ok(())
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

/// Marks the process dead when its workload stops (the pod deleted).
struct DeadOnDrop(Arc<Live>);

impl Drop for DeadOnDrop {
    fn drop(&mut self) {
        self.0.dead.store(true, Ordering::SeqCst);
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

pub fn started_at(pod: &Pod, container: &str) -> Option<Timestamp> {
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

/// The pod's sidecars: native ones (init containers that restart Always), and the
/// regular containers beside the validator.
fn sidecars<'a>(pod: &'a Pod, validator: &str) -> Vec<(&'a Container, bool)> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let native = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| (c, true));
    let regular = spec
        .containers
        .iter()
        .filter(|c| c.name != validator)
        .map(|c| (c, false));
    native.chain(regular).collect()
}

async fn workload(client: Client, state: LabState, mut rx: watch::Receiver<Pod>, nodes: Nodes) {
    let pod = rx.borrow().clone();
    let name = pod.name_any();
    let ns = pod.namespace().unwrap_or_default();
    let Some((sim, validator)) = clients::recognise(&pod) else {
        return;
    };
    let validator = validator.clone();
    let mut view = match PodView::load(&client, &pod).await {
        Ok(v) => v,
        Err(e) => {
            warn!(pod = %name, error = %e, "reading what the pod references");
            return;
        }
    };
    view.registry = crate::topology::Topology::load(&state.topology)
        .map(|t| t.images)
        .unwrap_or_default();
    view.volumes_root = Some(super::volumes::root(&state.dir, &view.node));
    let clock = Clock {
        scale: state.time_scale,
        step: crate::state::parse_seconds(&state.scrape_interval).unwrap_or(15.0),
    };
    let start = started_at(&pod, &validator.name).unwrap_or_else(Timestamp::now);
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let dirs = PodDirs {
        proc: state.dir.join("pods").join(&uid).join("proc"),
        root: state.dir.join("pods").join(&uid).join("containers"),
        logs: state.dir.join("logs").join("pods"),
    };
    let _ = std::fs::create_dir_all(&dirs.logs);
    view.pod_dir = Some(state.dir.join("pods").join(&uid));
    if let Err(e) = view.write_downward() {
        warn!(pod = %name, error = %e, "writing the pod's downward API files");
    }
    // The pod's process namespace exists from its start (its boot time included).
    let boot = start.as_second().max(0) as u64 - 3600;
    if let Err(e) = procfs::namespace(&dirs.proc, boot) {
        warn!(pod = %name, error = %e, "creating the pod's /proc");
    }
    let api: Api<Pod> = Api::namespaced(client, &ns);
    // The init steps first, against the node's settings (they only read them, so a
    // restarted simulator may run them again).
    view.machine = machine(&state, &view.node);
    view.node_root = Some(state.dir.join("nodes").join(&view.node).join("root"));
    let prepared = view.machine.prepared.clone();
    let sys = init_steps::sysctl_dir(
        &state.dir.join("nodes").join(&view.node),
        view.host_network(),
    );
    if let Err((container, code, message)) = init_steps::run(&view, &sys, &prepared).await {
        info!(pod = %name, %container, code, %message, "init step failed");
        if let Err(e) = kubelet::init_failed(&api, &name, &container, code, &message).await {
            warn!(pod = %name, error = %e, "marking the init step's failure");
        }
        return;
    }
    let env = view.env(&validator);
    let already_dead = terminated(&pod, &validator.name);
    let pid = validator_pid(&uid);
    let live = match sim.start(&view, &validator, &env, &clock) {
        Started::Running(process) => Some(Arc::new(Live {
            process,
            clock: clock.clone(),
            start,
            dead: AtomicBool::new(already_dead),
            pid,
            poke: tokio::sync::Notify::new(),
        })),
        Started::Exited(exit) => {
            if !already_dead {
                exited(&api, &name, &validator.name, &exit).await;
            }
            None
        }
    };
    // Where its RPC listens, as its flags say: a listener on the pod's loopback alone is
    // reached there by the pod's own programs, and not at the pod's IP.
    let rpc = live.as_ref().and_then(|l| {
        let port = l.process.rpc_port()?;
        let addrs = match l.process.rpc_bind() {
            Some(bind) => view.listen_addrs(bind),
            None => vec![view.ip],
        };
        Some((port, addrs))
    });
    if let Some((port, addrs)) = &rpc
        && !addrs.contains(&view.ip)
    {
        view.loopback_ports.insert(*port);
    }
    let mut tasks = Vec::new();
    for (c, always) in sidecars(&pod, &validator.name) {
        if let Some(program) = sidecars::program_of(c.image.as_deref().unwrap_or("")) {
            tasks.push(tokio::spawn(sidecars::run(
                program,
                view.clone(),
                c.clone(),
                always,
                dirs.clone(),
                state.tools.clone(),
                clock.clone(),
            )));
        }
    }
    if let Some(live) = &live {
        info!(pod = %name, ip = %view.ip, client = sim.name(), "workload started");
        tasks.push(tokio::spawn(keep_proc(
            live.clone(),
            dirs.proc.clone(),
            pid,
            view.command_line(&validator),
        )));
        for (port, addr) in rpc
            .iter()
            .flat_map(|(p, a)| a.iter().map(move |a| (*p, *a)))
        {
            info!(pod = %name, %addr, port, "RPC listens");
            let (nodes, node) = (nodes.clone(), view.node.clone());
            let late = move || slow_rpc(&nodes, &node);
            tasks.push(tokio::spawn(serve_rpc(
                SocketAddr::new(addr, port),
                live.clone(),
                late,
            )));
        }
        let mut ports = live.process.metrics_ports();
        ports.extend(live.process.http_ports());
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            tasks.push(tokio::spawn(serve_metrics(
                SocketAddr::new(view.ip, port),
                live.clone(),
            )));
        }
        tasks.push(tokio::spawn(send_posts(live.clone(), view.clone())));
        tasks.push(tokio::spawn(watch_exit(
            live.clone(),
            api.clone(),
            name.clone(),
            validator.name.clone(),
        )));
        tasks.push(tokio::spawn(keep_files(live.clone())));
        if let Some(path) = live.process.admin_socket() {
            tasks.push(tokio::spawn(serve_admin(path, live.clone())));
        }
        if let Some(sink) = live.process.metrics_sink() {
            let url = format!(
                "{}/write?db={}&u={}&p={}&precision=n",
                view.local_addr(sink.host.trim_end_matches('/')),
                sink.db,
                sink.user,
                sink.password
            );
            tasks.push(tokio::spawn(push_datapoints(
                live.clone(),
                url,
                uid.clone(),
            )));
        }
    }
    let _guard = AbortOnDrop(tasks);
    // A stopped pod's process is gone: connections its servers still hold (a client's
    // keep-alive) must not be answered by it any more.
    let _dead = live.clone().map(DeadOnDrop);

    loop {
        let pod = rx.borrow().clone();
        if pod.metadata.deletion_timestamp.is_some() {
            stop(
                &api,
                &pod,
                sim,
                &view,
                &validator,
                live.as_ref(),
                &dirs.proc,
            )
            .await;
            return;
        }
        let deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .and_then(|d| {
                let begun = pod.status.as_ref()?.start_time.clone()?.0;
                Some(begun + jiff::SignedDuration::from_secs(d))
            });
        let wait = deadline
            .map(|t| Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() { return; }
                // The kubelet's sync rewrites the downward API files (annotations).
                let mut now = view.clone();
                now.pod = rx.borrow().clone();
                if let Err(e) = now.write_downward() {
                    warn!(pod = %name, error = %e, "writing the pod's downward API files");
                }
            }
            _ = tokio::time::sleep(wait) => {
                if deadline.is_some_and(|d| Timestamp::now() >= d) {
                    if let Some(l) = &live { l.dead.store(true, Ordering::SeqCst); }
                    if let Err(e) = kubelet::stop(&api, &name, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline").await {
                        warn!(pod = %name, error = %e, "marking the pod past its deadline");
                    }
                    return;
                }
            }
        }
    }
}

/// The real seconds the lab gives a preStop hook at least, whatever the grace period
/// compresses to: the lab's own steps (a socket round trip, polling /proc) are not
/// compressed.
const HOOK_FLOOR_S: f64 = 5.0;

/// As the kubelet stops a container of a pod being deleted (pkg/kubelet/kuberuntime
/// `killContainer`): its preStop hook first, within the grace period
/// (`deletionGracePeriodSeconds`, on the pod's clock; no hook when it is 0), then SIGTERM,
/// which ends a process with no handler at once (code 143, as agave-validator 4.0, which
/// installs none); then the pod is deleted. The hook is played by the client's model; one
/// it does not play fails (logged, as the kubelet's FailedPreStopHook event) and the stop
/// goes on.
async fn stop(
    api: &Api<Pod>,
    pod: &Pod,
    sim: &dyn clients::SimClient,
    view: &PodView,
    validator: &Container,
    live: Option<&Arc<Live>>,
    proc_dir: &std::path::Path,
) {
    let name = pod.name_any();
    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30);
    let was_alive = live.is_some_and(|l| l.alive());
    if let Some(l) = live.filter(|l| l.alive() && grace > 0)
        && let Some((_, command)) = pre_stop(pod).find(|(c, _)| c.name == validator.name)
    {
        let budget = Duration::from_secs_f64((grace as f64 / l.clock.scale).max(HOOK_FLOOR_S));
        let at = clients::Hook {
            view,
            container: validator,
            proc_dir,
        };
        let hook = async {
            match sim.pre_stop(command, at) {
                Some(played) => played.await,
                None => Err(format!("the lab does not play the hook {command:?}")),
            }
        };
        match tokio::time::timeout(budget, hook).await {
            Ok(Ok(())) => info!(pod = %name, ?command, "preStop hook done"),
            Ok(Err(e)) => warn!(pod = %name, ?command, error = %e, "FailedPreStopHook"),
            Err(_) => warn!(pod = %name, ?command, "preStop hook ran out of its grace period"),
        }
    }
    // Its end as the pod's last status says before the pod goes: its own (an `exit`
    // during the hook), else the SIGTERM's.
    if let Some(l) = live.filter(|_| was_alive) {
        let end = match l.process.exit().filter(|_| !l.alive()) {
            Some(own) => own,
            None => {
                l.dead.store(true, Ordering::SeqCst);
                Exit {
                    at: l.now(),
                    reason: "Error",
                    code: 143,
                    message: String::new(),
                }
            }
        };
        exited(api, &name, &validator.name, &end).await;
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if let Err(e) = kubelet::delete_stopped(api, &name, &uid).await {
        warn!(pod = %name, error = %e, "deleting the stopped pod");
    }
}

/// What the node's machine gives a validator (its topology entry).
fn machine(state: &LabState, node: &str) -> super::pod_view::Machine {
    crate::topology::Topology::load(&state.topology)
        .ok()
        .and_then(|t| t.nodes().ok())
        .and_then(|ns| ns.into_iter().find(|n| n.name == node))
        .map(|n| super::pod_view::Machine::of(&n))
        .unwrap_or_default()
}

/// As the kubelet reports the validator's exit.
async fn exited(api: &Api<Pod>, pod: &str, container: &str, exit: &Exit) {
    match kubelet::terminate(api, pod, container, exit.reason, exit.code, &exit.message).await {
        Ok(()) => {
            info!(pod = %pod, reason = exit.reason, code = exit.code, message = %exit.message, "validator exited")
        }
        Err(e) => warn!(pod = %pod, error = %e, "marking the validator's exit"),
    }
}

/// The validator's pid in its pod's process namespace (the pod's `uid`): the same for
/// every start of the pod, as the lab numbers them.
pub fn validator_pid(uid: &str) -> u32 {
    1000 + (clients::seed(uid) % 60_000) as u32
}
