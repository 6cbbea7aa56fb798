//! One container of a pod the lab runs as a local process, kept as the kubelet keeps it:
//! started with its command line and env, probed (readiness: the container's and the
//! pod's Ready status; liveness: a restart after failureThreshold failures), restarted
//! when it exits with the kubelet's back-off (at once, then 10 s doubling to 5 min:
//! kubernetes v1.34.2 pkg/kubelet/kubelet.go backOffPeriod, MaxCrashLoopBackOff; reset
//! after 10 min running, as the pod lifecycle docs say), and stopped with SIGTERM then SIGKILL after the pod's grace period. Its status
//! (running, waiting in CrashLoopBackOff, the last termination, restarts) is written to
//! the pod as the kubelet writes it. Probes run in real time: this is a real process.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, Pod, Probe,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::watch;
use tracing::{info, warn};

use super::LocalProgram;
use super::credentials::Projected;
use crate::sim::kubelet::now_time;
use crate::sim::pod_view::PodView;
use crate::state::LabState;

/// What runs, and where its status goes.
pub struct Run {
    pub api: Api<Pod>,
    pub pod: String,
    pub container: Container,
    pub program: PathBuf,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub workdir: PathBuf,
    pub log: PathBuf,
    pub ip: IpAddr,
    pub grace: Duration,
    /// One status write at a time per pod.
    pub status_lock: Arc<tokio::sync::Mutex<()>>,
}

/// The container's arguments: its command (less the image's entrypoint, which is the
/// program) and args, `$(VAR)`s expanded, pod-local listen addresses on the pod's IP.
pub fn argv(program: LocalProgram, view: &PodView, c: &Container) -> Vec<String> {
    let line = view.command_line(c);
    let skip = c
        .command
        .as_ref()
        .and_then(|cmd| cmd.first())
        .is_some_and(|first| {
            first == program.entrypoint() || first.rsplit('/').next() == Some("valtune")
        });
    line.into_iter()
        .skip(usize::from(skip))
        .map(|a| view.local_addr(&a))
        .collect()
}

/// The container's environment: the pod's (resolved as the kubelet resolves it), what
/// the kubelet adds (HOSTNAME, the API server's service address), and the kubeconfig with
/// the projected token. Nothing of the simulator's own environment.
pub fn env(
    view: &PodView,
    c: &Container,
    state: &LabState,
    creds: &Projected,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOSTNAME".to_string(), view.name.clone()),
    ]);
    if let Some(hostport) = state.apiserver_url.strip_prefix("https://")
        && let Some((host, port)) = hostport.rsplit_once(':')
    {
        env.insert("KUBERNETES_SERVICE_HOST".into(), host.into());
        env.insert("KUBERNETES_SERVICE_PORT".into(), port.into());
    }
    env.extend(view.env(c));
    env.insert("KUBECONFIG".into(), creds.kubeconfig.display().to_string());
    env
}

/// Why a run of the process ended.
enum Ended {
    Exited(Option<i32>),
    Unhealthy,
    Stopped,
}

/// A probe and its recent results (kubelet prober semantics).
struct ProbeState {
    probe: Probe,
    next: Instant,
    successes: i32,
    failures: i32,
}

impl ProbeState {
    fn new(probe: &Probe, start: Instant) -> Self {
        let delay = probe.initial_delay_seconds.unwrap_or(0).max(0) as u64;
        Self {
            probe: probe.clone(),
            next: start + Duration::from_secs(delay),
            successes: 0,
            failures: 0,
        }
    }

    fn period(&self) -> Duration {
        Duration::from_secs(self.probe.period_seconds.unwrap_or(10).max(1) as u64)
    }

    /// Records one result; the (success, failure) thresholds reached, if any.
    fn record(&mut self, ok: bool) -> Option<bool> {
        self.next += self.period();
        if ok {
            self.failures = 0;
            self.successes += 1;
            (self.successes >= self.probe.success_threshold.unwrap_or(1)).then_some(true)
        } else {
            self.successes = 0;
            self.failures += 1;
            (self.failures >= self.probe.failure_threshold.unwrap_or(3)).then_some(false)
        }
    }
}

/// The port a probe names, by number or by the container's port name.
fn probe_port(c: &Container, port: &IntOrString) -> Option<u16> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).ok(),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port as u16),
    }
}

/// One probe, as the kubelet's prober runs it: an HTTP GET answered 200-399, or a TCP
/// connection, within timeoutSeconds. Exec and gRPC probes cannot run outside a
/// container; they count as passing (with a warning).
async fn probe_once(c: &Container, ip: IpAddr, probe: &Probe) -> bool {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(get) = &probe.http_get {
        let Some(port) = probe_port(c, &get.port) else {
            return false;
        };
        let host = get.host.clone().unwrap_or_else(|| ip.to_string());
        let scheme = get.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        let path = get.path.clone().unwrap_or_else(|| "/".into());
        let url = format!("{scheme}://{host}:{port}{path}");
        let client = reqwest::Client::new();
        return match client.get(&url).timeout(timeout).send().await {
            Ok(r) => (200..400).contains(&r.status().as_u16()),
            Err(_) => false,
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let Some(port) = probe_port(c, &tcp.port) else {
            return false;
        };
        let connect = tokio::net::TcpStream::connect((ip, port));
        return matches!(tokio::time::timeout(timeout, connect).await, Ok(Ok(_)));
    }
    warn!(container = %c.name, "exec and gRPC probes cannot run in the lab; counted as passing");
    true
}

/// Runs the container until `stop` turns true.
pub async fn run(r: Run, mut stop: watch::Receiver<bool>) {
    let _ = std::fs::create_dir_all(&r.workdir);
    let mut restarts = 0i32;
    let mut backoffs = 0u32;
    let mut last: Option<ContainerStateTerminated> = None;
    loop {
        let started = Instant::now();
        let started_at = now_time();
        let mut child = match spawn(&r) {
            Ok(c) => c,
            Err(e) => {
                warn!(pod = %r.pod, container = %r.container.name, error = %e, "starting the container's program");
                let waiting = ContainerStateWaiting {
                    reason: Some("RunContainerError".into()),
                    message: Some(e.to_string()),
                };
                report(&r, state_waiting(waiting), false, restarts, last.clone()).await;
                if sleep_or_stop(Duration::from_secs(30), &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let running = ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(started_at.clone()),
            }),
            ..Default::default()
        };
        // A container with a readiness probe is not ready until it passes; one without is
        // ready once it runs.
        let mut ready = r.container.readiness_probe.is_none();
        report(&r, running.clone(), ready, restarts, last.clone()).await;
        let mut readiness = r
            .container
            .readiness_probe
            .as_ref()
            .map(|p| ProbeState::new(p, started));
        let mut liveness = r
            .container
            .liveness_probe
            .as_ref()
            .map(|p| ProbeState::new(p, started));
        let ended = loop {
            let next = [readiness.as_ref(), liveness.as_ref()]
                .into_iter()
                .flatten()
                .map(|p| p.next)
                .min()
                .unwrap_or(started + Duration::from_secs(3600));
            tokio::select! {
                status = child.wait() => break Ended::Exited(status.ok().and_then(|s| s.code())),
                _ = stop.changed() => break Ended::Stopped,
                _ = tokio::time::sleep_until(next.into()) => {}
            }
            if let Some(p) = readiness.as_mut().filter(|p| p.next <= Instant::now()) {
                let ok = probe_once(&r.container, r.ip, &p.probe).await;
                if let Some(now_ready) = p.record(ok)
                    && now_ready != ready
                {
                    ready = now_ready;
                    info!(pod = %r.pod, container = %r.container.name, ready, "readiness changed");
                    report(&r, running.clone(), ready, restarts, last.clone()).await;
                }
            }
            if let Some(p) = liveness.as_mut().filter(|p| p.next <= Instant::now()) {
                let ok = probe_once(&r.container, r.ip, &p.probe).await;
                if p.record(ok) == Some(false) {
                    break Ended::Unhealthy;
                }
            }
        };
        let (code, reason) = match ended {
            Ended::Stopped => {
                terminate(&mut child, r.grace).await;
                return;
            }
            Ended::Unhealthy => {
                warn!(pod = %r.pod, container = %r.container.name, "liveness probe failed; restarting the container");
                let grace = r
                    .container
                    .liveness_probe
                    .as_ref()
                    .and_then(|p| p.termination_grace_period_seconds)
                    .map(|s| Duration::from_secs(s.max(0) as u64))
                    .unwrap_or(r.grace);
                (terminate(&mut child, grace).await, "Error")
            }
            Ended::Exited(code) => (
                code,
                if code == Some(0) {
                    "Completed"
                } else {
                    "Error"
                },
            ),
        };
        let code = code.unwrap_or(137);
        info!(pod = %r.pod, container = %r.container.name, code, reason, "container exited");
        last = Some(ContainerStateTerminated {
            exit_code: code,
            reason: Some(reason.into()),
            started_at: Some(started_at),
            finished_at: Some(now_time()),
            ..Default::default()
        });
        restarts += 1;
        if started.elapsed() > Duration::from_secs(600) {
            backoffs = 0;
        }
        // The first restart is at once; then the back-off doubles.
        let wait = if backoffs == 0 {
            Duration::ZERO
        } else {
            Duration::from_secs(10 << (backoffs - 1).min(5)).min(Duration::from_secs(300))
        };
        backoffs += 1;
        if !wait.is_zero() {
            let waiting = ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some(format!(
                    "back-off {}s restarting failed container={} pod={}",
                    wait.as_secs(),
                    r.container.name,
                    r.pod
                )),
            };
            report(&r, state_waiting(waiting), false, restarts, last.clone()).await;
        }
        if sleep_or_stop(wait, &mut stop).await {
            return;
        }
    }
}

fn state_waiting(w: ContainerStateWaiting) -> ContainerState {
    ContainerState {
        waiting: Some(w),
        ..Default::default()
    }
}

/// Sleeps; true if the container is to stop instead.
async fn sleep_or_stop(wait: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(wait) => false,
        _ = stop.changed() => true,
    }
}

fn spawn(r: &Run) -> std::io::Result<tokio::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&r.log)?;
    tokio::process::Command::new(&r.program)
        .args(&r.argv)
        .env_clear()
        .envs(&r.env)
        .env("HOME", &r.workdir)
        .current_dir(&r.workdir)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
}

/// SIGTERM, then SIGKILL after `grace`; the exit code.
async fn terminate(child: &mut tokio::process::Child, grace: Duration) -> Option<i32> {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok().and_then(|s| s.code()),
        Err(_) => {
            let _ = child.kill().await;
            Some(137)
        }
    }
}

/// Writes the container's status, and the pod's Ready conditions from every container's
/// readiness, as the kubelet does.
async fn report(
    r: &Run,
    state: ContainerState,
    ready: bool,
    restarts: i32,
    last: Option<ContainerStateTerminated>,
) {
    let _guard = r.status_lock.lock().await;
    let current = match r.api.get_status(&r.pod).await {
        Ok(p) => p,
        Err(e) => {
            warn!(pod = %r.pod, error = %e, "reading the pod's status");
            return;
        }
    };
    let mut status = current.status.unwrap_or_default();
    let mut statuses = status.container_statuses.take().unwrap_or_default();
    let Some(cs) = statuses.iter_mut().find(|c| c.name == r.container.name) else {
        warn!(pod = %r.pod, container = %r.container.name, "the pod has no status for the container yet");
        return;
    };
    cs.state = Some(state.clone());
    cs.ready = ready;
    cs.started = Some(state.running.is_some());
    cs.restart_count = restarts;
    cs.last_state = last.map(|t| ContainerState {
        terminated: Some(t),
        ..Default::default()
    });
    let all_ready = statuses.iter().all(|c| c.ready);
    let not_ready: Vec<&str> = statuses
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let mut conditions = status.conditions.take().unwrap_or_default();
    for cond in conditions.iter_mut() {
        if cond.type_ != "Ready" && cond.type_ != "ContainersReady" {
            continue;
        }
        let value = if all_ready { "True" } else { "False" };
        if cond.status != value {
            cond.status = value.into();
            cond.last_transition_time = Some(now_time());
        }
        (cond.reason, cond.message) = if all_ready {
            (None, None)
        } else {
            (
                Some("ContainersNotReady".into()),
                Some(format!(
                    "containers with unready status: [{}]",
                    not_ready.join(" ")
                )),
            )
        };
    }
    let patch =
        serde_json::json!({"status": {"containerStatuses": statuses, "conditions": conditions}});
    if let Err(e) = r
        .api
        .patch_status(&r.pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        warn!(pod = %r.pod, error = %e, "writing the container's status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> PodView {
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: valtune-abc, namespace: ops}\nspec:\n  nodeName: lab-system\n  containers:\n  - name: operator\n    image: ghcr.io/valtune/valtune:0.1.0\n    args: [operator, --listen=0.0.0.0:8080, --prometheus-url=http://prometheus:9090, --lease-namespace=$(POD_NAMESPACE)]\n    env:\n    - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}\n    ports: [{name: http-metrics, containerPort: 8080}]\n",
        )
        .unwrap();
        PodView::new(
            pod,
            "127.9.9.7".parse().unwrap(),
            BTreeMap::new(),
            BTreeMap::new(),
        )
    }

    #[test]
    fn the_command_line_listens_on_the_pods_ip() {
        let v = view();
        let c = &v.pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            argv(LocalProgram::Valtune, &v, c),
            vec![
                "operator",
                "--listen=127.9.9.7:8080",
                "--prometheus-url=http://prometheus:9090",
                "--lease-namespace=ops"
            ]
        );
        // A command naming the entrypoint is the program itself.
        let mut c = c.clone();
        c.command = Some(vec!["/usr/local/bin/valtune".into()]);
        assert_eq!(argv(LocalProgram::Valtune, &v, &c)[0], "operator");
    }

    #[test]
    fn probe_thresholds_count_as_the_kubelets() {
        let probe: Probe =
            serde_saphyr::from_str("{periodSeconds: 5, failureThreshold: 2, successThreshold: 1}")
                .unwrap();
        let start = Instant::now();
        let mut p = ProbeState::new(&probe, start);
        assert_eq!(p.record(false), None);
        assert_eq!(p.record(false), Some(false));
        assert_eq!(p.record(true), Some(true));
        assert_eq!(p.next, start + Duration::from_secs(15));
    }

    #[test]
    fn probes_name_ports_by_number_or_name() {
        let v = view();
        let c = &v.pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(probe_port(c, &IntOrString::Int(9090)), Some(9090));
        assert_eq!(
            probe_port(c, &IntOrString::String("http-metrics".into())),
            Some(8080)
        );
        assert_eq!(probe_port(c, &IntOrString::String("nope".into())), None);
    }
}
