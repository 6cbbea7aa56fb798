//! The seam between the kubelet and what runs a container: the kubelet decides when a
//! container starts, is signalled and is done with (lifecycle.rs); a [`Runtime`] runs
//! its process and says how it ended. The lab's runtimes (sim/runtimes.rs) are the
//! simulated client process, a local program (valtune's operator; a real program in a
//! memory cgroup fits the same seam), an exporter sidecar (a real program or one
//! played), an init step's shell script, and a container that only runs (an image the
//! lab has nothing for).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

pub use super::lifecycle::End;

/// A signal to a running container's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: the process ends as it does on it (one with no handler at once, 143).
    Term,
    /// SIGKILL: it ends at once, 137.
    Kill,
    /// The kernel's OOM kill (a fault, or its memory cgroup's limit): SIGKILL, reported
    /// as OOMKilled.
    Oom,
}

impl Signal {
    /// How a process killed by it ends, as the kubelet reports it: 128 + the signal's
    /// number, OOMKilled for the kernel's OOM kill.
    pub fn end(self) -> End {
        match self {
            Signal::Term => End::exit(143, ""),
            Signal::Kill => End::exit(137, ""),
            Signal::Oom => End {
                code: 137,
                reason: "OOMKilled".into(),
                message: String::new(),
            },
        }
    }
}

/// Signals a run of a container.
pub trait Control: Send + Sync {
    fn signal(&self, signal: Signal);
}

/// A run of a container: its end, once it ends, and its control.
pub struct Run {
    pub end: BoxFuture<'static, End>,
    pub control: Box<dyn Control>,
}

/// What runs one container of a pod, run after run.
pub trait Runtime: Send + Sync {
    /// Starts a run at `start` (the time its status says it started); Err: what the
    /// runtime says as it fails to start it (a StartError).
    fn start(&self, start: Timestamp) -> BoxFuture<'_, Result<Run, String>>;
    /// Runs a command in the running container (a preStop hook, an exec probe): Ok once
    /// it succeeded, else what it printed; None if the lab cannot run it there.
    fn exec<'a>(&'a self, _command: &'a [String]) -> Option<BoxFuture<'a, Result<(), String>>> {
        None
    }
}

/// What runs a pod's containers, and what the pod has on the node while it runs (its
/// volumes, its downward API files).
pub trait PodRuntime: Send + Sync {
    /// The runtime of a container, by name.
    fn container(&self, name: &str) -> Arc<dyn Runtime>;
    /// Simulated seconds per real second of the pod's clock: the lab's time scale for a
    /// pod whose client it plays, 1 for others (docs/lab.md, "The kubelet").
    fn scale(&self) -> f64;
    /// The pod as the API server has it now (the kubelet's sync: its downward API files).
    fn updated(&self, _pod: &Pod) {}
}

/// The lab's nodes and their labels.
pub type Nodes = Arc<RwLock<HashMap<String, BTreeMap<String, String>>>>;

/// Makes the runtimes of a pod.
pub trait Runtimes: Send + Sync {
    fn pod<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, anyhow::Result<Box<dyn PodRuntime>>>;
}

/// Signals a played run: the first signal ends it, as a process with no handler for it.
struct Played(std::sync::Mutex<Option<tokio::sync::oneshot::Sender<Signal>>>);

impl Control for Played {
    fn signal(&self, signal: Signal) {
        if let Some(tx) = self.0.lock().expect("lock").take() {
            let _ = tx.send(signal);
        }
    }
}

impl Run {
    /// A run the lab plays as a future (an init step, a played exporter, a container it
    /// has nothing for): it ends as the future does, or at the first signal.
    pub fn played(run: impl std::future::Future<Output = End> + Send + 'static) -> Run {
        let (tx, rx) = tokio::sync::oneshot::channel::<Signal>();
        let end = async move {
            tokio::select! {
                end = run => end,
                Ok(s) = rx => s.end(),
            }
        };
        Run {
            end: Box::pin(end),
            control: Box::new(Played(std::sync::Mutex::new(Some(tx)))),
        }
    }

    /// A run of a real process: signals are sent to it; it ends with its exit code, or
    /// 128 + the signal that killed it, OOMKilled when the kernel's OOM killer did (a
    /// fault here; `oom_killed` asks its memory cgroup, when it runs in one).
    pub fn child(
        mut child: tokio::process::Child,
        oom_killed: Option<Box<dyn Fn() -> bool + Send + Sync>>,
    ) -> Run {
        let pid = child.id();
        let faulted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let control = Process {
            pid,
            faulted: faulted.clone(),
        };
        let end = async move {
            use std::os::unix::process::ExitStatusExt;
            let status = child.wait().await;
            let oom = faulted.load(std::sync::atomic::Ordering::SeqCst)
                || oom_killed.as_ref().is_some_and(|f| f());
            match status {
                Ok(s) if s.signal() == Some(9) && oom => Signal::Oom.end(),
                Ok(s) => End::exit(s.code().or(s.signal().map(|n| 128 + n)).unwrap_or(137), ""),
                Err(e) => End::exit(137, e.to_string()),
            }
        };
        Run {
            end: Box::pin(end),
            control: Box::new(control),
        }
    }
}

/// Signals a real process.
struct Process {
    pid: Option<u32>,
    faulted: Arc<std::sync::atomic::AtomicBool>,
}

impl Control for Process {
    fn signal(&self, signal: Signal) {
        use nix::sys::signal::{Signal as S, kill};
        let Some(pid) = self.pid else { return };
        if signal == Signal::Oom {
            self.faulted
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let s = match signal {
            Signal::Term => S::SIGTERM,
            Signal::Kill | Signal::Oom => S::SIGKILL,
        };
        let _ = kill(nix::unistd::Pid::from_raw(pid as i32), s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_played_run_ends_on_its_own_or_at_a_signal() {
        let own = Run::played(async { End::exit(0, "done") });
        assert_eq!(own.end.await, End::exit(0, "done"));
        let forever = Run::played(std::future::pending());
        forever.control.signal(Signal::Oom);
        forever.control.signal(Signal::Term);
        assert_eq!(forever.end.await.reason, "OOMKilled");
    }

    #[tokio::test]
    async fn a_real_process_ends_with_its_code_or_its_signal() {
        let spawn = |script: &str| {
            tokio::process::Command::new("sh")
                .args(["-c", script])
                .kill_on_drop(true)
                .spawn()
                .unwrap()
        };
        assert_eq!(
            Run::child(spawn("exit 3"), None).end.await,
            End::exit(3, "")
        );
        let run = Run::child(spawn("sleep 30"), None);
        run.control.signal(Signal::Term);
        assert_eq!(run.end.await, End::exit(143, ""));
        let run = Run::child(spawn("sleep 30"), None);
        run.control.signal(Signal::Oom);
        assert_eq!(run.end.await, Signal::Oom.end());
        // Killed while its cgroup counted an OOM kill: the kernel's.
        let run = Run::child(spawn("kill -9 $$"), Some(Box::new(|| true)));
        assert_eq!(run.end.await.reason, "OOMKilled");
    }
}
