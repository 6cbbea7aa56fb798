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
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{info, warn};

use super::clients::{self, Exit, Process, Rpc, Started};
use super::clock::Clock;
use super::pod_view::PodView;
use super::sidecars::{self, PodDirs};
use super::{init_steps, kubelet, procfs};
use crate::state::LabState;
use crate::topology::{KUBELET_LABEL, LAB_LABEL, SLOW_RPC_LABEL};

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

/// A running workload: the process, its clock and whether it has exited.
struct Live {
    process: Arc<dyn Process>,
    clock: Clock,
    start: Timestamp,
    dead: AtomicBool,
    /// Its pid in the pod's process namespace (its /proc entry; the admin RPC's `pid`).
    pid: u32,
    /// Woken when something may have changed when it exits (an admin RPC call).
    poke: tokio::sync::Notify,
}

impl Live {
    fn now(&self) -> f64 {
        self.clock.since(self.start, Timestamp::now())
    }

    fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }
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

/// The process's own end (an OOM kill, a crash, an `exit` asked over its admin RPC), as
/// the kubelet reports it; looked at again whenever the process is poked.
async fn watch_exit(live: Arc<Live>, api: Api<Pod>, pod: String, container: String) {
    while live.alive() {
        let exit = live.process.exit();
        let at = exit.as_ref().map(|e| live.clock.at(live.start, e.at));
        let wait = at
            .map(|t| Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = live.poke.notified() => {}
            _ = tokio::time::sleep(wait) => {
                if let (Some(exit), Some(at)) = (exit, at)
                    && Timestamp::now() >= at
                    && live.alive()
                {
                    // What it leaves on its volumes as it ends (a clean exit's ledger).
                    if let Err(e) = live.process.persist(exit.at) {
                        warn!(error = %e, "writing the process's files on its volume");
                    }
                    live.dead.store(true, Ordering::SeqCst);
                    exited(&api, &pod, &container, &exit).await;
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

/// Keeps the process's /proc entries current; removes them when it exits. `cmdline` is
/// its container's command line, the argv it starts with.
async fn keep_proc(live: Arc<Live>, root: PathBuf, pid: u32, cmdline: Vec<String>) {
    let started = live.start.as_second().max(0) as u64;
    let boot = started - 3600;
    // The processes it forked, numbered after it (forked, not exec'd: its argv).
    let mut forked = 0;
    let remove = |from: u32, to: u32| {
        for p in from..to {
            let _ = std::fs::remove_dir_all(root.join(p.to_string()));
        }
    };
    loop {
        if !live.alive() {
            remove(pid, pid + 1 + forked);
            return;
        }
        let now = live.now();
        let figures = live.process.proc(now);
        let children = live.process.children(now);
        let argv = live.process.argv().unwrap_or_else(|| cmdline.clone());
        let mnt = |own: bool, p: u32| match own {
            true => procfs::own_mnt(p),
            false => procfs::container_mnt(pid),
        };
        let written = procfs::write(&root, pid, 1, boot, started, &argv, &figures)
            .and_then(|()| procfs::write_mnt(&root, pid, &mnt(live.process.private_mounts(), pid)))
            .and_then(|()| procfs::write_files(&root, pid, &live.process.proc_files(now)))
            .and_then(|()| {
                children.iter().zip(pid + 1..).try_for_each(|(c, child)| {
                    let argv = c.argv.as_ref().unwrap_or(&argv);
                    procfs::write(&root, child, pid, boot, started, argv, &c.figures)?;
                    procfs::write_mnt(&root, child, &mnt(c.private_mounts, child))
                })
            });
        if let Err(e) = written {
            warn!(error = %e, "writing /proc entries");
        }
        if let Err(e) = live.process.write_files(now) {
            warn!(error = %e, "writing the files the process makes");
        }
        let n = children.len() as u32;
        remove(pid + 1 + n, pid + 1 + forked.max(n));
        forked = n;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Lets the process write what it keeps on its volumes (Agave's ledger), often: a
/// fifth of a real second is 144 simulated seconds at the lab's usual time scale.
async fn keep_files(live: Arc<Live>) {
    while live.alive() {
        if let Err(e) = live.process.persist(live.now()) {
            warn!(error = %e, "writing the process's files on its volume");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The admin RPC on its Unix socket, as jsonrpc-ipc-server serves it: JSON-RPC 2.0
/// requests one after another on a connection, each answer a line.
async fn serve_admin(path: PathBuf, live: Arc<Live>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // A socket file left by the previous process of this ledger.
    let _ = std::fs::remove_file(&path);
    let l = match tokio::net::UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "admin RPC socket");
            return;
        }
    };
    let _gone = RemoveOnDrop(path);
    while live.alive() {
        let Ok((mut conn, _)) = l.accept().await else {
            continue;
        };
        let live = live.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = match conn.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                let mut stream = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
                let mut answers = Vec::new();
                while let Some(Ok(call)) = stream.next() {
                    answers.push(admin_answer(&live, &call));
                }
                let used = stream.byte_offset();
                buf.drain(..used);
                for a in answers {
                    let mut line = a.to_string();
                    line.push('\n');
                    if conn.write_all(line.as_bytes()).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
}

fn admin_answer(live: &Live, call: &Value) -> Value {
    let id = call.get("id").cloned().unwrap_or(Value::Null);
    let method = call.get("method").and_then(Value::as_str).unwrap_or("");
    let params = call.get("params").cloned().unwrap_or(Value::Null);
    let answer = live.process.admin_rpc(live.now(), method, &params);
    // A call may change when it ends (`exit`).
    live.poke.notify_one();
    match answer {
        Some(rpc) => rpc_answer(rpc, id),
        // `pid` (admin_rpc_service.rs: `std::process::id()`): its pid in the pod.
        None if method == "pid" => rpc_answer(Rpc::Result(json!(live.pid)), id),
        None => {
            json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": id})
        }
    }
}

/// A JSON-RPC 2.0 answer: the result, or the error with its data when it has some.
fn rpc_answer(rpc: Rpc, id: Value) -> Value {
    match rpc {
        Rpc::Result(r) => json!({"jsonrpc": "2.0", "result": r, "id": id}),
        Rpc::Error {
            code,
            message,
            data,
        } => {
            let mut err = json!({"code": code, "message": message});
            if let Some(d) = data {
                err["data"] = d;
            }
            json!({"jsonrpc": "2.0", "error": err, "id": id})
        }
    }
}

/// Removes the socket file when its server stops (the process exited).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn listener(addr: SocketAddr) -> Option<tokio::net::TcpListener> {
    // The address may still be held by the previous pod's listener for a moment.
    for _ in 0..40 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    warn!(%addr, "could not listen for the workload");
    None
}

/// How late the processes of `node` answer JSON-RPC: the seconds of the node's
/// [`SLOW_RPC_LABEL`] (fault injection: a machine so busy its validator's RPC answers
/// come after its callers' timeouts), none without it.
fn slow_rpc(nodes: &Nodes, node: &str) -> Duration {
    nodes
        .read()
        .expect("lock")
        .get(node)
        .and_then(|l| l.get(SLOW_RPC_LABEL))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 600.0)))
        .unwrap_or_default()
}

/// JSON-RPC 2.0 over HTTP POST (and Agave's `GET /health`), refused until the process
/// answers and after it exits; each answer held `late()` (the node's slow RPC).
async fn serve_rpc<L>(addr: SocketAddr, live: Arc<Live>, late: L)
where
    L: Fn() -> Duration + Clone + Send + Sync + 'static,
{
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    // A process that is not up yet refuses connections: listen only once it answers.
    while live
        .process
        .json_rpc(live.now(), "getHealth", &Value::Null)
        .is_none()
    {
        if !live.alive() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(l) = listener(addr).await else {
        return;
    };
    let health_live = live.clone();
    let rpc_live = live.clone();
    let health_late = late.clone();
    let app = axum::Router::new()
        .route(
            "/",
            post(move |body: axum::Json<Value>| {
                let live = rpc_live.clone();
                let late = late();
                async move {
                    if !late.is_zero() {
                        tokio::time::sleep(late).await;
                    }
                    let t = live.now();
                    let id = body.get("id").cloned().unwrap_or(Value::Null);
                    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
                    let params = body.get("params").cloned().unwrap_or(Value::Null);
                    match live
                        .process
                        .json_rpc(t, method, &params)
                        .filter(|_| live.alive())
                    {
                        None => Err(StatusCode::SERVICE_UNAVAILABLE),
                        Some(rpc) => Ok(axum::Json(rpc_answer(rpc, id))),
                    }
                }
            }),
        )
        .route(
            "/health",
            get(move || {
                let live = health_live.clone();
                let late = health_late();
                async move {
                    if !late.is_zero() {
                        tokio::time::sleep(late).await;
                    }
                    match live.process.json_rpc(live.now(), "getHealth", &Value::Null) {
                        Some(Rpc::Result(_)) if live.alive() => (StatusCode::OK, "ok"),
                        Some(_) if live.alive() => (StatusCode::OK, "behind"),
                        _ => (StatusCode::SERVICE_UNAVAILABLE, "unknown"),
                    }
                }
            }),
        );
    // A process that is not up yet, or no more, refuses connections: serve only between.
    while live
        .process
        .json_rpc(live.now(), "getHealth", &Value::Null)
        .is_none()
    {
        if !live.alive() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gone = {
        let live = live.clone();
        async move {
            while live.alive() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let _ = axum::serve(l, app).with_graceful_shutdown(gone).await;
}

/// The process's native Prometheus pages and its other HTTP pages (health endpoints).
async fn serve_metrics(addr: SocketAddr, live: Arc<Live>) {
    let Some(l) = listener(addr).await else {
        return;
    };
    let port = addr.port();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let live = live.clone();
            async move {
                let host = headers.get("host").and_then(|h| h.to_str().ok());
                let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                if let Some((code, body)) = live
                    .process
                    .http_get(live.now(), port, path, host)
                    .filter(|_| live.alive())
                {
                    return (
                        axum::http::StatusCode::from_u16(code)
                            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
                        [("content-type", "application/json")],
                        body,
                    );
                }
                match live
                    .process
                    .metrics(live.now(), port, uri.path())
                    .filter(|_| live.alive())
                {
                    Some(text) => (
                        axum::http::StatusCode::OK,
                        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                        text,
                    ),
                    None => (
                        axum::http::StatusCode::NOT_FOUND,
                        [("content-type", "text/plain")],
                        String::new(),
                    ),
                }
            }
        },
    );
    let _ = axum::serve(l, app).await;
}

/// Sends the HTTP POSTs the process makes on its own (a log appender's lines), once per
/// real second, to their pod-local addresses. A failed POST is dropped.
async fn send_posts(live: Arc<Live>, view: PodView) {
    let http = reqwest::Client::new();
    let mut last = live.now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !live.alive() {
            return;
        }
        let now = live.now();
        let posts = live.process.posts(last, now);
        last = now;
        for post in posts {
            let url = view.local_addr(&post.url);
            match http.post(&url).body(post.body).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => warn!(%url, status = %r.status(), "post refused"),
                Err(e) => warn!(%url, error = %e, "posting"),
            }
        }
    }
}

/// Pushes the process's datapoints as InfluxDB line protocol, one POST per real second
/// (Agave batches every 10 s; a second of lab time is many simulated minutes). A failed
/// POST is dropped, as Agave drops it.
async fn push_datapoints(live: Arc<Live>, url: String, host_id: String) {
    let http = reqwest::Client::new();
    // The agent buffers what the process submitted before its first write, and this task
    // starts a moment after the process (hours of simulated time, compressed): the first
    // write carries the last ten seconds' points (a start-up point such as Agave's
    // `bootstrap-snapshot-download`). A restarted simulator resends the same points.
    let mut last = (live.now() - 10.0 * live.clock.scale).max(0.0);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !live.alive() {
            return;
        }
        let now = live.now();
        let points = live.process.datapoints(last, now);
        last = now;
        if points.is_empty() {
            continue;
        }
        let body: String = points
            .iter()
            .map(|p| {
                let fields: Vec<String> =
                    p.fields.iter().map(|(k, v)| format!("{k}={v}i")).collect();
                let ns = live.clock.at(live.start, p.at).as_nanosecond();
                // metrics/src/metrics.rs serialize_points: host_id, then the point's tags.
                let tags: String = p.tags.iter().map(|(k, v)| format!(",{k}={v}")).collect();
                format!(
                    "{},host_id={host_id}{tags} {} {ns}\n",
                    p.measurement,
                    fields.join(",")
                )
            })
            .collect();
        match http.post(&url).body(body).send().await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => warn!(%url, status = %r.status(), "datapoints refused"),
            Err(e) => warn!(%url, error = %e, "pushing datapoints"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A process whose admin RPC answers `pid`.
    struct Admin;

    impl Process for Admin {
        fn exit(&self) -> Option<Exit> {
            None
        }
        fn proc(&self, _t: f64) -> clients::ProcFigures {
            clients::ProcFigures::sized("admin", 0, 0)
        }
        fn admin_rpc(&self, _t: f64, method: &str, _params: &Value) -> Option<Rpc> {
            (method == "pid").then(|| Rpc::Result(json!(42)))
        }
    }

    /// Two calls in one write get two answers, a line each; an unknown method is
    /// "Method not found"; the socket goes with its server.
    #[tokio::test]
    async fn the_admin_rpc_answers_on_its_unix_socket() {
        let dir = std::env::temp_dir().join(format!("vv-admin-{}", std::process::id()));
        let path = dir.join("admin.rpc");
        let live = Arc::new(Live {
            process: Arc::new(Admin),
            clock: Clock {
                scale: 1.0,
                step: 15.0,
            },
            start: Timestamp::now(),
            dead: AtomicBool::new(false),
            pid: 7,
            poke: tokio::sync::Notify::new(),
        });
        let server = tokio::spawn(serve_admin(path.clone(), live));
        let mut conn = loop {
            match tokio::net::UnixStream::connect(&path).await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        conn.write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"pid"}{"jsonrpc":"2.0","id":2,"method":"exit"}"#,
        )
        .await
        .unwrap();
        let mut lines = BufReader::new(conn).lines();
        let first: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let second: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(
            (first["id"].clone(), first["result"].clone()),
            (json!(1), json!(42))
        );
        assert_eq!(second["error"]["code"], -32601);
        server.abort();
        let _ = server.await;
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
