//! A pod's containers as the kubelet keeps them, pure: what to pull, start, probe,
//! signal, and when to delete the pod, from the pod spec, what its containers did and
//! the time. Its effects are [`Action`]s (performed by the pod's worker, worker.rs) and
//! the pod status it reports (status.rs). Kubernetes v1.34.2 is the reference:
//! pkg/kubelet/kuberuntime/kuberuntime_manager.go `computePodActions` and `doBackOff`,
//! kuberuntime_container.go `killContainer`, kuberuntime_termination_order.go,
//! images/image_manager.go, prober/worker.go, kubelet_pods.go `getPhase`.
//!
//! - Init containers run one at a time, in order; a native sidecar (an init container
//!   with `restartPolicy: Always`) is started and, once it has started (its startup
//!   probe passed, or it has none), the next one is; then every container. A container
//!   is restarted as its policy says (the pod's `restartPolicy`; an init container's is
//!   OnFailure unless the pod's is Never; a sidecar's Always), with the restart back-off
//!   (backoff.rs); an init container that fails under Never fails the pod.
//! - Once every container has ended for good, the sidecars are stopped and the pod is
//!   Succeeded or Failed (`keepCount == 0`: KillPod).
//! - An image not on the node (or with `imagePullPolicy: Always`) is pulled first; a
//!   failed pull shows `ErrImagePull`, then `ImagePullBackOff` while its back-off runs.
//! - A container is stopped (deleted pod, a failed liveness or startup probe, a pod past
//!   its activeDeadlineSeconds, the sidecars of a completed pod) by its preStop hook
//!   within the grace period, then SIGTERM, then SIGKILL when the grace is spent (at
//!   least 2 s after the SIGTERM); sidecars wait for the other containers first.
//!
//! Times are seconds on the pod's clock ([`Timing`]).

mod spec;
mod stop;

pub use spec::{ContainerSpec, PodSpec, Pull, Restart, Role};
pub use stop::Why;
use stop::{Step, Stopping};

use super::backoff::Backoff;
use super::probe::{self, Kind, Prober};

/// The lab's floors, in seconds of the pod's clock: its own steps are not compressed
/// (a socket round trip, a poll of /proc), so a preStop hook gets at least a few real
/// seconds and a probe runs at most every so often, whatever the grace period or the
/// probe's period compress to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub hook_floor: f64,
    pub probe_period_floor: f64,
    /// The least running that starts a back-off over (10 minutes otherwise).
    pub backoff_reset_floor: f64,
}

/// How a run of a container ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub code: i32,
    pub reason: String,
    pub message: Option<String>,
    pub started: f64,
    pub finished: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        since: f64,
    },
    Terminated(Ended),
}

/// What a runtime says of a process that ended: its code, the kubelet's reason
/// (Completed, Error, OOMKilled, StartError) and its termination message.
#[derive(Debug, Clone, PartialEq)]
pub struct End {
    pub code: i32,
    pub reason: String,
    pub message: String,
}

impl End {
    /// An exit with `code`: Completed for 0, Error otherwise.
    pub fn exit(code: i32, message: impl Into<String>) -> End {
        End {
            code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

/// What the kubelet is to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The image was pulled: it is on the node now.
    Pulled {
        image: String,
    },
    /// Start a run of the container (its [`Container::generation`]).
    Start {
        container: usize,
    },
    /// Run a probe of the container's current run.
    Probe {
        container: usize,
        kind: Kind,
        action: probe::Action,
        timeout: f64,
    },
    /// Run its preStop hook, for at most `budget` (pod clock).
    PreStop {
        container: usize,
        command: Vec<String>,
        budget: f64,
    },
    Signal {
        container: usize,
        signal: Signal,
    },
    /// Every container has stopped: delete the pod (grace 0, its UID as precondition).
    DeletePod,
}

/// Whether an image can be had: on the node already, or pulled now (the error as the
/// runtime reports it).
pub trait Images {
    fn present(&self, image: &str) -> bool;
    fn pull(&self, image: &str) -> Result<(), String>;
}

#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub spec: ContainerSpec,
    pub state: State,
    pub last: Option<Ended>,
    pub restarts: i32,
    pub ready: bool,
    /// Its startup probe passed, or it has none, while it runs.
    pub started: bool,
    /// Counts its runs: what a runtime or a probe reports of an older run is stale.
    pub generation: u32,
    probers: Vec<Prober>,
    crash: Backoff,
    pulls: Backoff,
    pull_error: Option<String>,
    stopping: Option<Stopping>,
    /// When a waiting container looks again (its back-off ends).
    wake: Option<f64>,
}

impl Container {
    fn new(spec: ContainerSpec, first: &str, timing: Timing) -> Container {
        Container {
            spec,
            state: State::Waiting {
                reason: first.into(),
                message: None,
            },
            last: None,
            restarts: 0,
            ready: false,
            started: false,
            generation: 0,
            probers: Vec::new(),
            crash: Backoff::crash_loop().expiring_after(timing.backoff_reset_floor),
            pulls: Backoff::image_pull().expiring_after(timing.backoff_reset_floor),
            pull_error: None,
            stopping: None,
            wake: None,
        }
    }

    pub fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    /// Whether it is to run again after `e`.
    fn restarts_after(&self, e: &Ended) -> bool {
        match self.spec.restart {
            Restart::Always => true,
            Restart::OnFailure => e.code != 0,
            Restart::Never => false,
        }
    }

    /// Whether it has ended for good (it ran, and its policy does not start it again).
    fn done(&self) -> bool {
        match &self.state {
            State::Terminated(e) => !self.restarts_after(e),
            _ => false,
        }
    }

    fn wait(&mut self, reason: &str, message: Option<String>, until: Option<f64>) {
        self.state = State::Waiting {
            reason: reason.into(),
            message,
        };
        self.wake = until;
    }
}

/// Why the pod is ending, once it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    /// Deleted, with this grace period (`deletionGracePeriodSeconds`).
    Deleted { grace: f64 },
    /// Gone from the API (a forced deletion): stopped, nothing left to report.
    Gone,
    /// Past its activeDeadlineSeconds.
    Deadline,
    /// Every container has ended for good.
    Completed,
    /// An init container failed under `restartPolicy: Never`.
    InitFailed,
}

/// A pod's containers.
#[derive(Debug, Clone, PartialEq)]
pub struct PodLife {
    pub id: String,
    pub containers: Vec<Container>,
    pub ending: Option<Ending>,
    grace: f64,
    timing: Timing,
    deleted: bool,
    /// Every init container has completed and every sidecar started, once.
    initialized: bool,
}

/// Go's `time.Duration` String of whole seconds ("10s", "1m20s", "5m0s").
pub fn go_duration(seconds: f64) -> String {
    let s = seconds.round() as i64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

impl PodLife {
    pub fn new(spec: PodSpec, timing: Timing) -> PodLife {
        let has_init = spec.containers.iter().any(|c| c.role != Role::Main);
        let first = if has_init {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        PodLife {
            id: spec.id,
            containers: spec
                .containers
                .into_iter()
                .map(|c| Container::new(c, first, timing))
                .collect(),
            ending: None,
            grace: spec.grace,
            timing,
            deleted: false,
            initialized: false,
        }
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|c| c.spec.name == name)
    }

    /// The pod was deleted (its `deletionGracePeriodSeconds`), or is gone from the API.
    pub fn delete(&mut self, ending: Ending) {
        let replace = !matches!(
            (self.ending, ending),
            (Some(Ending::Gone), _) | (Some(Ending::Deleted { .. }), Ending::Deleted { .. })
        );
        if replace {
            self.ending = Some(ending);
        }
    }

    /// The pod passed its activeDeadlineSeconds.
    pub fn past_deadline(&mut self) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Deadline);
        }
    }

    /// A run of container `i` started, or failed to (the runtime's message: containerd
    /// reports a StartError, exit code 128).
    pub fn start_failed(&mut self, i: usize, generation: u32, message: String, now: f64) {
        self.exited(
            i,
            generation,
            End {
                code: 128,
                reason: "StartError".into(),
                message,
            },
            now,
        );
    }

    /// A run of container `i` ended.
    pub fn exited(&mut self, i: usize, generation: u32, end: End, now: f64) {
        let c = &mut self.containers[i];
        let State::Running { since } = c.state else {
            return;
        };
        if generation != c.generation {
            return;
        }
        c.state = State::Terminated(Ended {
            code: end.code,
            reason: end.reason,
            message: (!end.message.is_empty()).then_some(end.message),
            started: since,
            finished: now,
        });
        c.ready = false;
        c.started = false;
        c.probers.clear();
        c.stopping = None;
    }

    /// A probe of container `i`'s run `generation` answered.
    pub fn probed(&mut self, i: usize, generation: u32, kind: Kind, ok: bool, now: f64) {
        let c = &mut self.containers[i];
        if generation != c.generation || !c.running() {
            return;
        }
        let Some(p) = c.probers.iter_mut().find(|p| p.kind == kind) else {
            return;
        };
        let Some(result) = p.record(now, ok) else {
            return;
        };
        match (kind, result) {
            (Kind::Readiness, ready) => c.ready = ready,
            (Kind::Startup, true) => {
                c.started = true;
                c.ready = !c.probers.iter().any(|p| p.kind == Kind::Readiness);
                for p in c.probers.iter_mut().filter(|p| p.kind != Kind::Startup) {
                    p.due = p.due.max(now);
                }
            }
            (Kind::Startup, false) => self.stop(i, Why::Startup, now),
            (Kind::Liveness, false) => self.stop(i, Why::Liveness, now),
            (Kind::Liveness, true) => {}
        }
    }

    /// The pod's next step at `now`: what to do, given what is on the node.
    pub fn sync(&mut self, now: f64, images: &dyn Images) -> Vec<Action> {
        let mut acts = Vec::new();
        if let Some(ending) = self.ending {
            let why = match ending {
                Ending::Deleted { .. } | Ending::Gone => Why::Deleted,
                Ending::Deadline => Why::Deadline,
                Ending::Completed | Ending::InitFailed => Why::Done,
            };
            for i in 0..self.containers.len() {
                self.stop(i, why, now);
                // Nothing more starts; a waiting container is not started.
                self.containers[i].wake = None;
            }
            self.advance_stops(now, &mut acts);
            let stopped = !self.containers.iter().any(Container::running);
            if matches!(ending, Ending::Deleted { .. }) && stopped && !self.deleted {
                self.deleted = true;
                acts.push(Action::DeletePod);
            }
            return acts;
        }
        self.advance_stops(now, &mut acts);
        // Init containers, one at a time, until the pod is initialized; then a sidecar
        // that restarts holds nothing up.
        for i in 0..self.containers.len() {
            match self.containers[i].spec.role {
                Role::Main => break,
                Role::Sidecar => {
                    self.keep(i, now, images, &mut acts);
                    if !self.containers[i].started && !self.initialized {
                        return acts;
                    }
                }
                Role::Init if self.initialized => {}
                Role::Init => match &self.containers[i].state {
                    State::Terminated(e) if e.code == 0 => {}
                    State::Terminated(_) if self.containers[i].done() => {
                        self.ending = Some(Ending::InitFailed);
                        return self.sync(now, images);
                    }
                    _ => {
                        self.keep(i, now, images, &mut acts);
                        return acts;
                    }
                },
            }
        }
        self.initialized = true;
        let main: Vec<usize> = (0..self.containers.len())
            .filter(|i| self.containers[*i].spec.role == Role::Main)
            .collect();
        for &i in &main {
            self.keep(i, now, images, &mut acts);
        }
        if !main.is_empty() && main.iter().all(|i| self.containers[*i].done()) {
            self.ending = Some(Ending::Completed);
            acts.extend(self.sync(now, images));
        }
        acts
    }

    /// Keeps container `i` as its policy says: probes a running one, restarts one that
    /// ended (after its back-off), pulls and starts one that waits.
    fn keep(&mut self, i: usize, now: f64, images: &dyn Images, acts: &mut Vec<Action>) {
        let id = self.id.clone();
        let timing = self.timing;
        let c = &mut self.containers[i];
        match &c.state {
            State::Running { .. } => {
                if c.stopping.is_none() {
                    let started = c.started;
                    for p in c.probers.iter_mut().filter(|p| p.is_due(now, started)) {
                        // Asked once: its answer moves it on.
                        p.asked = true;
                        acts.push(Action::Probe {
                            container: i,
                            kind: p.kind,
                            action: p.spec.action.clone(),
                            timeout: p.spec.timeout,
                        });
                    }
                }
                return;
            }
            State::Terminated(e) => {
                if !c.restarts_after(e) {
                    return;
                }
                c.last = Some(e.clone());
            }
            State::Waiting { .. } => {}
        }
        // The restart back-off, counted from its last exit.
        if let Some(last) = &c.last {
            let finished = last.finished;
            if c.crash.in_backoff_since(finished, now) {
                let message = format!(
                    "back-off {} restarting failed container={} pod={id}",
                    go_duration(c.crash.get()),
                    c.spec.name
                );
                let until = finished + c.crash.get();
                c.wait("CrashLoopBackOff", Some(message), Some(until));
                return;
            }
        }
        if c.spec.pull == Pull::Always || !images.present(&c.spec.image) {
            if c.spec.pull == Pull::Never {
                let message = format!(
                    "Container image {:?} is not present with pull policy of Never",
                    c.spec.image
                );
                c.wait("ErrImageNeverPull", Some(message), None);
                return;
            }
            if c.pulls.in_backoff_since_update(now) {
                let mut message = format!("Back-off pulling image {:?}", c.spec.image);
                if let Some(e) = &c.pull_error {
                    message = format!("{message}: ErrImagePull: {e}");
                }
                let until = c.pulls.until_since_update();
                c.wait("ImagePullBackOff", Some(message), until);
                return;
            }
            match images.pull(&c.spec.image) {
                Ok(()) => {
                    c.pull_error = None;
                    acts.push(Action::Pulled {
                        image: c.spec.image.clone(),
                    });
                }
                Err(e) => {
                    c.pulls.next(now, now);
                    c.pull_error = Some(e.clone());
                    let until = c.pulls.until_since_update();
                    c.wait("ErrImagePull", Some(e), until);
                    return;
                }
            }
        }
        if let Some(last) = &c.last {
            let finished = last.finished;
            c.crash.next(finished, now);
            c.restarts += 1;
        }
        c.generation += 1;
        c.state = State::Running { since: now };
        c.wake = None;
        c.started = !c.spec.probes.iter().any(|(k, _)| *k == Kind::Startup);
        c.ready = c.started && !c.spec.probes.iter().any(|(k, _)| *k == Kind::Readiness);
        c.probers = c
            .spec
            .probes
            .iter()
            .map(|(k, s)| Prober::new(*k, s.clone(), now, timing.probe_period_floor))
            .collect();
        acts.push(Action::Start { container: i });
    }

    /// When the pod next needs a sync, if nothing happens before: a back-off ending, a
    /// probe due, a hook or a grace period running out.
    pub fn wake(&self) -> Option<f64> {
        self.containers
            .iter()
            .flat_map(|c| {
                let probes = c
                    .probers
                    .iter()
                    .filter(|_| c.running() && c.stopping.is_none())
                    .filter_map(|p| p.wake(c.started));
                let stop = c.stopping.and_then(|s| match s.step {
                    Step::HookDue { .. } | Step::Terminate => Some(f64::NEG_INFINITY),
                    Step::Hook { until } => Some(until),
                    Step::Turn => Some(s.grace_end),
                    Step::Term { kill_at } => Some(kill_at),
                    Step::Killed => None,
                });
                let waiting = c.wake.filter(|_| !c.running());
                probes.chain(stop).chain(waiting)
            })
            .reduce(f64::min)
    }

    /// Whether nothing of the pod runs or will (its worker may end).
    pub fn finished(&self) -> bool {
        let stopped = !self.containers.iter().any(Container::running);
        match self.ending {
            Some(Ending::Gone) => stopped,
            Some(Ending::Deleted { .. }) => stopped && self.deleted,
            _ => false,
        }
    }

    /// The pod's phase (kubelet_pods.go `getPhase`, sidecars aside): Failed past its
    /// deadline or when an init container failed under Never; once no container runs
    /// and none will, Succeeded if every one exited 0, else Failed; Running otherwise
    /// (kwok reports the pod Running from its start).
    pub fn phase(&self) -> (&'static str, Option<(&'static str, &'static str)>) {
        let running = self.containers.iter().any(Container::running);
        match self.ending {
            Some(Ending::Deadline) => (
                "Failed",
                Some((
                    "DeadlineExceeded",
                    "Pod was active on the node longer than the specified deadline",
                )),
            ),
            Some(Ending::InitFailed) if !running => ("Failed", None),
            Some(Ending::Completed | Ending::Deleted { .. }) if !running => {
                let main = self.containers.iter().filter(|c| c.spec.role == Role::Main);
                let ok = main
                    .clone()
                    .all(|c| matches!(&c.state, State::Terminated(e) if e.code == 0));
                (if ok { "Succeeded" } else { "Failed" }, None)
            }
            _ => ("Running", None),
        }
    }
}

#[cfg(test)]
mod tests;
