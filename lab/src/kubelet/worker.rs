//! One pod's worker, as the kubelet's pod worker: it keeps the pod's lifecycle
//! (lifecycle.rs) on the pod's clock, performs what it decides through the pod's
//! runtimes (start, signal, preStop hooks, probes, image pulls), writes the pod's status
//! when it changes, and deletes the pod once a deletion has stopped everything.
//!
//! While its node's kubelet does not answer (the node stopped, `valtune-lab fault
//! stop-node`), the worker goes on running the pod's containers as the machine would,
//! restarts included, but neither hears of the pod's changes nor writes its status; once
//! the node answers again it catches up (a deletion, a forced one included, stops the
//! containers then). When the machine is off (`stop-node --off`) its processes are
//! killed and the worker ends, writing nothing; the pod, if still bound to the node,
//! gets a new worker when the machine is back.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

use super::lifecycle::{Action, End, Ending, PodLife, PodSpec, Signal as Sig, Timing};
use super::probe::Kind;
use super::runtime::{Control, Runtime, Signal};
use super::{Kubelet, NodeState};
use super::{prober, status};

/// A fault's order to one of the pod's containers, answered once given.
pub struct Order {
    pub container: String,
    pub signal: Signal,
    pub done: oneshot::Sender<Result<(), String>>,
}

enum Event {
    Exited {
        i: usize,
        generation: u32,
        end: End,
    },
    StartFailed {
        i: usize,
        generation: u32,
        message: String,
    },
    Probed {
        i: usize,
        generation: u32,
        kind: Kind,
        ok: bool,
    },
    HookDone {
        i: usize,
        generation: u32,
    },
}

/// The pod's clock: `scale` simulated seconds per real second from `origin`.
#[derive(Debug, Clone, Copy)]
struct Clock {
    origin: Timestamp,
    scale: f64,
}

impl Clock {
    fn now(&self) -> f64 {
        Timestamp::now().duration_since(self.origin).as_secs_f64() * self.scale
    }

    /// The wall-clock second of moment `t` (what a status shows, and what a process
    /// started then counts its time from).
    fn stamp(&self, t: f64) -> Timestamp {
        let at = self.origin + SignedDuration::from_secs_f64(t / self.scale);
        Timestamp::from_second(at.as_second()).unwrap_or(at)
    }

    fn at(&self, wall: Timestamp) -> f64 {
        wall.duration_since(self.origin).as_secs_f64() * self.scale
    }

    fn real(&self, d: f64) -> Duration {
        Duration::from_secs_f64((d / self.scale).clamp(0.0, 1e7))
    }
}

/// The lab's floors, in real seconds (lifecycle.rs [`Timing`]): a preStop hook gets
/// at least 5, a probe of a simulated pod runs at most once a second, and a back-off
/// starts over only after 5 of running.
fn timing(scale: f64) -> Timing {
    let floor = |real: f64| if scale > 1.0 { real * scale } else { 0.0 };
    Timing {
        hook_floor: floor(5.0),
        probe_period_floor: floor(1.0),
        backoff_reset_floor: floor(5.0),
    }
}

/// The pod's activeDeadlineSeconds, on the wall clock from its start (`status.startTime`):
/// real seconds, as the operator counts it when it sets one to stop a pod.
fn deadline(pod: &Pod) -> Option<Timestamp> {
    let ads = pod.spec.as_ref()?.active_deadline_seconds?;
    let start = pod.status.as_ref()?.start_time.as_ref()?.0;
    Some(start + SignedDuration::from_secs(ads))
}

fn newer(a: &Pod, than: &Pod) -> bool {
    let rv = |p: &Pod| p.resource_version().and_then(|v| v.parse::<u64>().ok());
    match (rv(a), rv(than)) {
        (Some(a), Some(b)) => a > b,
        _ => true,
    }
}

struct State {
    life: PodLife,
    clock: Clock,
    runtimes: Vec<Arc<dyn Runtime>>,
    controls: Vec<Option<(u32, Box<dyn Control>)>>,
    events: mpsc::UnboundedSender<Event>,
    pod: Pod,
    name: String,
    node: String,
}

impl State {
    fn generation(&self, i: usize) -> u32 {
        self.life.containers[i].generation
    }

    fn container(&self, i: usize) -> String {
        format!(
            "{}/{}:{}",
            self.pod.namespace().unwrap_or_default(),
            self.name,
            self.life.containers[i].spec.name
        )
    }

    async fn perform(&mut self, k: &Kubelet, api: &Api<Pod>, a: Action) {
        match a {
            Action::Pulled { image } => k.images.pulled(&self.node, &image),
            Action::Start { container: i } => {
                let generation = self.generation(i);
                let since = match self.life.containers[i].state {
                    super::lifecycle::State::Running { since } => since,
                    _ => self.clock.now(),
                };
                match self.runtimes[i].start(self.clock.stamp(since)).await {
                    Ok(run) => {
                        info!(container = %self.container(i), restarts = self.life.containers[i].restarts, "container started");
                        self.controls[i] = Some((generation, run.control));
                        let tx = self.events.clone();
                        let end = run.end;
                        tokio::spawn(async move {
                            let end = end.await;
                            let _ = tx.send(Event::Exited { i, generation, end });
                        });
                    }
                    Err(message) => {
                        warn!(container = %self.container(i), %message, "the container could not start");
                        let _ = self.events.send(Event::StartFailed {
                            i,
                            generation,
                            message,
                        });
                    }
                }
            }
            Action::Probe {
                container: i,
                kind,
                action,
                timeout,
            } => {
                let (generation, tx) = (self.generation(i), self.events.clone());
                let runtime = self.runtimes[i].clone();
                let ip = self
                    .pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.as_deref())
                    .and_then(|ip| ip.parse().ok())
                    .unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
                tokio::spawn(async move {
                    let timeout = Duration::from_secs_f64(timeout);
                    let ok = prober::run(&action, ip, timeout, &*runtime).await;
                    let _ = tx.send(Event::Probed {
                        i,
                        generation,
                        kind,
                        ok,
                    });
                });
            }
            Action::PreStop {
                container: i,
                command,
                budget,
            } => {
                let (generation, tx) = (self.generation(i), self.events.clone());
                let runtime = self.runtimes[i].clone();
                let budget = self.clock.real(budget);
                let who = self.container(i);
                tokio::spawn(async move {
                    let ran = match runtime.exec(&command) {
                        Some(hook) => tokio::time::timeout(budget, hook)
                            .await
                            .unwrap_or_else(|_| Err("it ran out of its grace period".into())),
                        None => Err(format!("the lab does not play the hook {command:?}")),
                    };
                    match ran {
                        Ok(()) => info!(container = %who, ?command, "preStop hook done"),
                        Err(e) => {
                            warn!(container = %who, ?command, error = %e, "FailedPreStopHook")
                        }
                    }
                    let _ = tx.send(Event::HookDone { i, generation });
                });
            }
            Action::Signal {
                container: i,
                signal,
            } => {
                let signal = match signal {
                    Sig::Term => Signal::Term,
                    Sig::Kill => Signal::Kill,
                };
                self.signal(i, signal);
            }
            Action::DeletePod => {
                let uid = self.pod.metadata.uid.clone().unwrap_or_default();
                if let Err(e) = delete_stopped(api, &self.name, &uid).await {
                    warn!(pod = %self.name, error = %e, "deleting the stopped pod");
                }
            }
        }
    }

    fn signal(&self, i: usize, signal: Signal) -> bool {
        match &self.controls[i] {
            Some((g, c)) if *g == self.generation(i) && self.life.containers[i].running() => {
                c.signal(signal);
                true
            }
            _ => false,
        }
    }

    fn apply(&mut self, e: Event) {
        let now = self.clock.now();
        match e {
            Event::Exited { i, generation, end } => {
                if generation == self.generation(i) {
                    info!(container = %self.container(i), code = end.code, reason = %end.reason, message = %end.message, "container exited");
                }
                self.life.exited(i, generation, end, now)
            }
            Event::StartFailed {
                i,
                generation,
                message,
            } => self.life.start_failed(i, generation, message, now),
            Event::Probed {
                i,
                generation,
                kind,
                ok,
            } => self.life.probed(i, generation, kind, ok, now),
            Event::HookDone { i, generation } => self.life.hook_done(i, generation),
        }
    }
}

/// As the kubelet ends a terminating pod once its containers have stopped: deleted with
/// no grace left, for this pod only (its UID), as the status manager does
/// (pkg/kubelet/status/status_manager.go `canBeDeleted`, then `Delete` with
/// `GracePeriodSeconds: 0` and a UID precondition).
pub async fn delete_stopped(api: &Api<Pod>, pod: &str, uid: &str) -> kube::Result<()> {
    let dp = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(kube::api::Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(pod, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The pod's status writes, as the kubelet's status manager makes them: on their own,
/// the latest status winning, so the pod's sync never waits on the API server (a
/// compressed back-off of a few milliseconds is not outlasted by a write).
struct Writer {
    /// The status to write, numbered.
    next: watch::Sender<(u64, Option<Value>)>,
    /// The number of the last one written (or given up on: the pod is gone).
    done: watch::Receiver<u64>,
    gone: Arc<std::sync::atomic::AtomicBool>,
}

impl Writer {
    fn start(api: Api<Pod>, name: String) -> Writer {
        let (next, mut rx) = watch::channel((0u64, None::<Value>));
        let (done_tx, done) = watch::channel(0u64);
        let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lost = gone.clone();
        tokio::spawn(async move {
            let mut written: Option<Value> = None;
            loop {
                let (n, patch) = rx.borrow_and_update().clone();
                if let Some(patch) = patch.filter(|p| Some(p) != written.as_ref()) {
                    match api
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(_) => written = Some(patch),
                        Err(kube::Error::Api(e)) if e.code == 404 => {
                            lost.store(true, std::sync::atomic::Ordering::SeqCst)
                        }
                        Err(e) => {
                            warn!(pod = %name, error = %e, "writing the pod's status");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    }
                }
                let _ = done_tx.send(n);
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        Writer { next, done, gone }
    }

    fn write(&self, patch: Value) {
        self.next.send_if_modified(|(n, p)| {
            if p.as_ref() == Some(&patch) {
                return false;
            }
            *n += 1;
            *p = Some(patch);
            true
        });
    }

    /// Until everything given has been written.
    async fn flush(&mut self) {
        let want = self.next.borrow().0;
        let _ = self.done.wait_for(|n| *n >= want).await;
    }

    fn gone(&self) -> bool {
        self.gone.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Runs one pod on its node until it is gone, or deleted once stopped.
pub async fn run(
    k: Arc<Kubelet>,
    pod: Pod,
    mut updates: watch::Receiver<Option<Pod>>,
    mut orders: mpsc::UnboundedReceiver<Order>,
    mut answers: watch::Receiver<NodeState>,
) {
    let name = pod.name_any();
    let ns = pod.namespace().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(k.client.clone(), &ns);
    let deleting = |p: &Pod| {
        p.metadata
            .deletion_timestamp
            .as_ref()
            .map(|_| Ending::Deleted {
                grace: p
                    .metadata
                    .deletion_grace_period_seconds
                    .unwrap_or(30)
                    .max(0) as f64,
            })
    };
    let mut current = pod;
    // What the pod's runtimes need (its volumes, what it references): retried while the
    // pod is there, as a kubelet retries a pod it cannot set up yet.
    let runtime = loop {
        if deleting(&current).is_some()
            && current
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_ref())
                .is_none()
        {
            // Never started here: nothing to stop.
            let uid = current.metadata.uid.clone().unwrap_or_default();
            if *answers.borrow() == NodeState::Answers
                && let Err(e) = delete_stopped(&api, &name, &uid).await
            {
                warn!(pod = %name, error = %e, "deleting the stopped pod");
            }
            return;
        }
        match k.runtimes.pod(&current).await {
            Ok(r) => break r,
            Err(e) => warn!(pod = %format!("{ns}/{name}"), error = %e, "setting up the pod"),
        }
        tokio::select! {
            r = updates.changed() => match (r, updates.borrow_and_update().clone()) {
                (Ok(()), Some(p)) => current = p,
                _ => return,
            },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    };
    let scale = runtime.scale();
    let clock = Clock {
        origin: Timestamp::now(),
        scale,
    };
    let life = PodLife::new(PodSpec::of(&current), timing(scale));
    let runtimes = life
        .containers
        .iter()
        .map(|c| runtime.container(&c.spec.name))
        .collect();
    let (tx, mut events) = mpsc::unbounded_channel();
    let mut s = State {
        controls: life.containers.iter().map(|_| None).collect(),
        life,
        clock,
        runtimes,
        events: tx,
        pod: current,
        name: name.clone(),
        node: node.clone(),
    };
    if let Some(ending) = deleting(&s.pod) {
        s.life.delete(ending);
    }
    let mut writer = Writer::start(api.clone(), name.clone());
    let mut gone = false;
    loop {
        let now = clock.now();
        let deadline = deadline(&s.pod).map(|d| clock.at(d));
        if deadline.is_some_and(|d| now >= d) {
            s.life.past_deadline();
        }
        let acts = s.life.sync(now, &k.images.on(&node));
        let answering = *answers.borrow() == NodeState::Answers;
        for a in acts {
            if a == Action::DeletePod && answering {
                // Its last status (how its containers ended) before it goes.
                let patch = status::patch(&s.life, &s.pod, now, &|t| Time(clock.stamp(t)));
                writer.write(patch);
                writer.flush().await;
            }
            s.perform(&k, &api, a).await;
        }
        gone |= writer.gone();
        if answering && !gone {
            writer.write(status::patch(&s.life, &s.pod, now, &|t| {
                Time(clock.stamp(t))
            }));
        }
        if s.life.finished() || (gone && s.life.ending.is_none()) {
            if gone && s.life.ending.is_none() {
                s.life.delete(Ending::Gone);
                continue;
            }
            break;
        }
        let wake = [s.life.wake(), deadline.filter(|_| s.life.ending.is_none())]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let sleep = wake
            .map(|w| clock.real(w - clock.now()))
            .unwrap_or(Duration::from_secs(3600));
        let listening = *answers.borrow() == NodeState::Answers;
        tokio::select! {
            Some(e) = events.recv() => {
                s.apply(e);
                // What else has happened meanwhile, before the next sync.
                while let Ok(e) = events.try_recv() {
                    s.apply(e);
                }
            }
            r = updates.changed(), if listening => {
                match (r, updates.borrow_and_update().clone()) {
                    (Ok(()), Some(p)) => {
                        if let Some(ending) = deleting(&p) {
                            s.life.delete(ending);
                        }
                        runtime.updated(&p);
                        if newer(&p, &s.pod) {
                            s.pod = p;
                        }
                    }
                    _ => {
                        gone = true;
                        s.life.delete(Ending::Gone);
                    }
                }
            }
            Some(o) = orders.recv() => {
                let answer = match s.life.index(&o.container) {
                    Some(i) if s.signal(i, o.signal) => Ok(()),
                    Some(_) => Err(format!("container {} of pod {ns}/{name} is not running", o.container)),
                    None => Err(format!("pod {ns}/{name} has no container {}", o.container)),
                };
                let _ = o.done.send(answer);
            }
            r = answers.changed() => {
                if r.is_err() || *answers.borrow() == NodeState::Off {
                    // The machine is off: its processes die with it; nothing is told.
                    for i in 0..s.life.containers.len() {
                        s.signal(i, Signal::Kill);
                    }
                    info!(pod = %format!("{ns}/{name}"), node = %node, "the machine is off");
                    return;
                }
            }
            _ = tokio::time::sleep(sleep) => {}
        }
    }
    info!(pod = %format!("{ns}/{name}"), "pod stopped");
}
