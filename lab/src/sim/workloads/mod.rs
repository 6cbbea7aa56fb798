//! The simulated client process, a runtime of the lab's kubelet (crate::kubelet): for
//! the validator container of a pod whose client the lab models ([`super::clients`]), each
//! run starts that client's process model and serves it at its own interfaces on the
//! pod's IP (JSON-RPC, native /metrics, its admin RPC), pushes its datapoints where its
//! config says, keeps its /proc entries and the files it keeps on its volumes, and ends
//! as the model says (an OOM kill, a crash, an `exit` asked over its admin RPC, a flag
//! the image does not know) or at a signal: the models install no SIGTERM handler
//! (agave-validator 4.0 has none), so SIGTERM ends the process on the spot (143). A
//! preStop hook is played by the client's model ([`clients::SimClient::pre_stop`]).
//!
//! Fault injection: a validator container with the env var `VALTUNE_LAB_CRASH_AFTER`
//! (a duration of simulated time, e.g. `3h`) exits with an error then, run after run.
//!
//! Time is compressed ([`super::clock`]): counters are scaled so that per-second rates
//! read in simulated units (a validator doing 4,600 TPS shows rate() = 4,600).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStatus, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::oneshot;
use tracing::info;

mod live;
mod push;
mod serve;

use live::{Live, keep_files, keep_proc, watch_exit};
use push::{push_datapoints, send_posts};
use serve::{serve_admin, serve_metrics, serve_rpc, slow_rpc};

use super::clients::{self, Exit, SimClient, Started};
use super::runtimes::PodCtx;
use crate::kubelet::runtime::{Control, End, Run, Runtime, Signal};

/// When the process started: its container's `startedAt` (the pod's start before it
/// has one), which the models count their time from.
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

/// The pod as the kubelet reports it once this run started: the container running since
/// `start`.
fn running_since(pod: &mut Pod, container: &str, start: Timestamp) {
    let status = pod.status.get_or_insert_with(Default::default);
    let list = status.container_statuses.get_or_insert_with(Vec::new);
    if !list.iter().any(|c| c.name == container) {
        list.push(ContainerStatus {
            name: container.into(),
            ..Default::default()
        });
    }
    for c in list.iter_mut().filter(|c| c.name == container) {
        c.state = Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(start)),
            }),
            ..Default::default()
        });
    }
}

/// The validator's pid in its pod's process namespace (the pod's `uid`): the same for
/// every start of the pod, as the lab numbers them.
pub fn validator_pid(uid: &str) -> u32 {
    1000 + (clients::seed(uid) % 60_000) as u32
}

fn end_of(exit: Exit) -> End {
    End {
        code: exit.code,
        reason: exit.reason.into(),
        message: exit.message,
    }
}

/// The validator container of a pod the lab plays.
pub struct SimProcess {
    ctx: Arc<PodCtx>,
    sim: &'static dyn SimClient,
    container: Container,
}

impl SimProcess {
    pub fn new(ctx: Arc<PodCtx>, sim: &'static dyn SimClient, container: Container) -> Self {
        SimProcess {
            ctx,
            sim,
            container,
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

/// Marks the process dead when its run is dropped: its servers stop answering.
struct DeadOnDrop(Arc<Live>);

impl Drop for DeadOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// Signals a simulated process: the first signal ends it.
struct Signals(std::sync::Mutex<Option<oneshot::Sender<Signal>>>);

impl Control for Signals {
    fn signal(&self, signal: Signal) {
        if let Some(tx) = self.0.lock().expect("lock").take() {
            let _ = tx.send(signal);
        }
    }
}

impl SimProcess {
    /// Starts the model and what serves it; the run's end.
    fn run(&self, start: Timestamp) -> Run {
        let ctx = &self.ctx;
        let mut view = ctx.view();
        running_since(&mut view.pod, &self.container.name, start);
        let env = view.env(&self.container);
        let clock = ctx.clock.clone();
        let process = match self.sim.start(&view, &self.container, &env, &clock) {
            Started::Running(p) => p,
            Started::Exited(exit) => {
                let end = end_of(exit);
                return Run::played(async move { end });
            }
        };
        let uid = view.pod.metadata.uid.clone().unwrap_or_default();
        let pid = validator_pid(&uid);
        let live = Arc::new(Live {
            process,
            clock,
            start,
            dead: AtomicBool::new(false),
            pid,
            poke: tokio::sync::Notify::new(),
            gone: tokio::sync::Notify::new(),
        });
        // Where its RPC listens, as its flags say: a listener on the pod's loopback alone
        // is reached there by the pod's own programs (the sidecars started after this),
        // and not at the pod's IP.
        let rpc = live.process.rpc_port().map(|port| {
            let addrs = match live.process.rpc_bind() {
                Some(bind) => view.listen_addrs(bind),
                None => vec![view.ip],
            };
            (port, addrs)
        });
        if let Some((port, addrs)) = &rpc
            && !addrs.contains(&view.ip)
        {
            view.loopback_ports.insert(*port);
            ctx.view.write().expect("lock").loopback_ports.insert(*port);
        }
        info!(pod = %view.name, ip = %view.ip, client = self.sim.name(), "workload started");
        let proc = tokio::spawn(keep_proc(
            live.clone(),
            ctx.dirs.proc.clone(),
            pid,
            view.command_line(&self.container),
        ));
        let mut tasks = Vec::new();
        for (port, addr) in rpc
            .iter()
            .flat_map(|(p, a)| a.iter().map(move |a| (*p, *a)))
        {
            info!(pod = %view.name, %addr, port, "RPC listens");
            let (nodes, node) = (ctx.nodes.clone(), view.node.clone());
            let late = move || slow_rpc(&nodes, &node);
            let listener = ctx.firewall.listen(&view.node, SocketAddr::new(addr, port));
            tasks.push(tokio::spawn(serve_rpc(listener, live.clone(), late)));
        }
        let mut ports = live.process.metrics_ports();
        ports.extend(live.process.http_ports());
        ports.sort_unstable();
        ports.dedup();
        for port in ports {
            let listener = ctx
                .firewall
                .listen(&view.node, SocketAddr::new(view.ip, port));
            tasks.push(tokio::spawn(serve_metrics(listener, live.clone())));
        }
        tasks.push(tokio::spawn(send_posts(live.clone(), view.clone())));
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
            tasks.push(tokio::spawn(push_datapoints(live.clone(), url, uid)));
        }
        let (tx, signals) = oneshot::channel::<Signal>();
        let end = async move {
            let _tasks = AbortOnDrop(tasks);
            let _dead = DeadOnDrop(live.clone());
            let end = tokio::select! {
                exit = watch_exit(live.clone()) => end_of(exit),
                Ok(signal) = signals => {
                    // No handler for any: it ends on the spot.
                    live.end();
                    signal.end()
                }
            };
            // Its /proc entries go with it before its end is reported (an `exit` hook
            // waits for them to go).
            let _ = tokio::time::timeout(Duration::from_secs(2), proc).await;
            end
        };
        Run {
            end: Box::pin(end),
            control: Box::new(Signals(std::sync::Mutex::new(Some(tx)))),
        }
    }
}

impl Runtime for SimProcess {
    fn start(&self, start: Timestamp) -> BoxFuture<'_, Result<Run, String>> {
        Box::pin(async move { Ok(self.run(start)) })
    }

    /// A preStop hook, as the client's model plays it.
    fn exec<'a>(&'a self, command: &'a [String]) -> Option<BoxFuture<'a, Result<(), String>>> {
        let hook = clients::Hook {
            view: self.ctx.view(),
            container: self.container.clone(),
            proc_dir: self.ctx.dirs.proc.clone(),
        };
        self.sim.pre_stop(command, hook)
    }
}
