//! A container's probes as the kubelet's prober keeps them, pure (kubernetes v1.34.2
//! pkg/kubelet/prober/worker.go `doProbe`):
//! - a readiness probe's result starts as Failure (not ready), a liveness probe's as
//!   Success, a startup probe's as unknown (not started);
//! - none runs before `initialDelaySeconds` since the container started, and readiness
//!   and liveness not before the startup probe succeeded (without one, a running
//!   container has started);
//! - a result counts once it repeats `successThreshold` or `failureThreshold` times in a
//!   row; then a failed liveness or startup probe gets the container killed (and
//!   restarted as its policy says), and that probe holds until the next start.
//!
//! What a probe does ([`Action`]) is read from the container's spec here; running it
//! (an HTTP GET, a TCP connection, a command in the container) is the kubelet's act
//! (kubelet/prober.rs). Periods and delays are seconds on the pod's clock, the timeout
//! real seconds (it bounds a network call).

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Startup,
    Readiness,
    Liveness,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Startup => "startup",
            Kind::Readiness => "readiness",
            Kind::Liveness => "liveness",
        }
    }
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// An HTTP GET answered 200-399 (pkg/probe/http): the host defaults to the pod's IP,
    /// a `Host` header becomes the request's Host.
    HttpGet {
        https: bool,
        host: Option<String>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    /// A TCP connection accepted (pkg/probe/tcp).
    Tcp { host: Option<String>, port: u16 },
    /// A command run in the container, exit 0 (pkg/probe/exec).
    Exec(Vec<String>),
    /// A gRPC health check (pkg/probe/grpc).
    Grpc { port: u16 },
    /// A probe the kubelet cannot run: a port name the container does not declare.
    Invalid(String),
}

/// A probe as the container declares it, with the API's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub action: Action,
    pub initial_delay: f64,
    pub period: f64,
    /// Real seconds.
    pub timeout: f64,
    pub success_threshold: i32,
    pub failure_threshold: i32,
    /// `terminationGracePeriodSeconds` of a liveness or startup probe: the grace of the
    /// kill it causes, instead of the pod's.
    pub grace: Option<f64>,
}

/// The port a probe names, by number or by one of the container's port names.
fn port(c: &Container, port: &IntOrString) -> Result<u16, String> {
    match port {
        IntOrString::Int(p) => u16::try_from(*p).map_err(|_| format!("invalid port {p}")),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| format!("port {name:?} is not a port of container {}", c.name)),
    }
}

impl Spec {
    /// The probe of container `c`, with the defaults of the Probe type (period 10 s,
    /// timeout 1 s, thresholds 1 and 3).
    pub fn of(probe: &Probe, c: &Container) -> Spec {
        let action = if let Some(get) = &probe.http_get {
            match port(c, &get.port) {
                Ok(p) => Action::HttpGet {
                    https: get.scheme.as_deref() == Some("HTTPS"),
                    host: get.host.clone().filter(|h| !h.is_empty()),
                    port: p,
                    path: get.path.clone().unwrap_or_else(|| "/".into()),
                    headers: get
                        .http_headers
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                },
                Err(e) => Action::Invalid(e),
            }
        } else if let Some(tcp) = &probe.tcp_socket {
            match port(c, &tcp.port) {
                Ok(p) => Action::Tcp {
                    host: tcp.host.clone().filter(|h| !h.is_empty()),
                    port: p,
                },
                Err(e) => Action::Invalid(e),
            }
        } else if let Some(exec) = &probe.exec {
            Action::Exec(exec.command.clone().unwrap_or_default())
        } else if let Some(grpc) = &probe.grpc {
            match u16::try_from(grpc.port) {
                Ok(p) => Action::Grpc { port: p },
                Err(_) => Action::Invalid(format!("invalid port {}", grpc.port)),
            }
        } else {
            Action::Invalid("a probe with no handler".into())
        };
        let secs = |v: Option<i32>, default: i32| f64::from(v.unwrap_or(default).max(0));
        Spec {
            action,
            initial_delay: secs(probe.initial_delay_seconds, 0),
            period: secs(probe.period_seconds, 10).max(1.0),
            timeout: secs(probe.timeout_seconds, 1).max(1.0),
            success_threshold: probe.success_threshold.unwrap_or(1).max(1),
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1),
            grace: probe
                .termination_grace_period_seconds
                .map(|s| s.max(0) as f64),
        }
    }
}

/// One probe of one run of a container.
#[derive(Debug, Clone, PartialEq)]
pub struct Prober {
    pub kind: Kind,
    pub spec: Spec,
    /// When it runs next (pod clock).
    pub due: f64,
    /// The result that counts: None while unknown (a startup probe's start).
    pub result: Option<bool>,
    last: Option<bool>,
    run: i32,
    /// After a liveness failure or a settled startup probe: no more probing this run.
    pub on_hold: bool,
    /// Asked, and not answered yet.
    pub asked: bool,
}

impl Prober {
    /// The probe of a container that started at `since`; `period_floor` is the shortest
    /// period the lab keeps (pod-clock seconds: a probe compressed to a few milliseconds
    /// would only load the machine).
    pub fn new(kind: Kind, spec: Spec, since: f64, period_floor: f64) -> Prober {
        let mut spec = spec;
        spec.period = spec.period.max(period_floor);
        Prober {
            kind,
            due: since + spec.initial_delay,
            result: match kind {
                Kind::Readiness => Some(false),
                Kind::Liveness => Some(true),
                Kind::Startup => None,
            },
            last: None,
            run: 0,
            on_hold: false,
            asked: false,
            spec,
        }
    }

    /// Whether it runs at `now`, given whether the container has started (its startup
    /// probe succeeded, or it has none).
    pub fn is_due(&self, now: f64, started: bool) -> bool {
        let gated = match self.kind {
            Kind::Startup => started,
            Kind::Readiness | Kind::Liveness => !started,
        };
        !self.on_hold && !self.asked && !gated && now >= self.due
    }

    /// The next time it runs (pod clock), if it will.
    pub fn wake(&self, started: bool) -> Option<f64> {
        let gated = match self.kind {
            Kind::Startup => started,
            Kind::Readiness | Kind::Liveness => !started,
        };
        (!self.on_hold && !self.asked && !gated).then_some(self.due)
    }

    /// Records a result taken at `now`: the result that counts, when it changed. The
    /// next run is a period after this one was due, as on the prober's ticker.
    pub fn record(&mut self, now: f64, ok: bool) -> Option<bool> {
        self.asked = false;
        self.due = (self.due + self.spec.period).max(now);
        if self.last == Some(ok) {
            self.run += 1;
        } else {
            self.last = Some(ok);
            self.run = 1;
        }
        let threshold = if ok {
            self.spec.success_threshold
        } else {
            self.spec.failure_threshold
        };
        if self.run < threshold {
            return None;
        }
        if self.kind == Kind::Startup || (self.kind == Kind::Liveness && !ok) {
            self.on_hold = true;
            self.run = 0;
        }
        let changed = self.result != Some(ok);
        self.result = Some(ok);
        changed.then_some(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(probe: &str) -> Container {
        serde_saphyr::from_str(&format!(
            "name: c\nports: [{{name: http-metrics, containerPort: 8080}}]\nlivenessProbe: {probe}\n"
        ))
        .unwrap()
    }

    fn spec(probe: &str) -> Spec {
        let c = container(probe);
        Spec::of(c.liveness_probe.as_ref().unwrap(), &c)
    }

    #[test]
    fn a_probe_is_read_with_the_apis_defaults() {
        assert_eq!(
            spec(
                "{httpGet: {path: /readiness, port: http-metrics, httpHeaders: [{name: Host, value: localhost}]}}"
            ),
            Spec {
                action: Action::HttpGet {
                    https: false,
                    host: None,
                    port: 8080,
                    path: "/readiness".into(),
                    headers: vec![("Host".into(), "localhost".into())],
                },
                initial_delay: 0.0,
                period: 10.0,
                timeout: 1.0,
                success_threshold: 1,
                failure_threshold: 3,
                grace: None,
            }
        );
        assert_eq!(
            spec("{tcpSocket: {port: nope}}").action,
            Action::Invalid("port \"nope\" is not a port of container c".into())
        );
        assert_eq!(
            spec("{exec: {command: [true]}, periodSeconds: 0, terminationGracePeriodSeconds: 5}"),
            Spec {
                action: Action::Exec(vec!["true".into()]),
                period: 1.0,
                grace: Some(5.0),
                ..spec("{exec: {command: [true]}}")
            }
        );
    }

    /// Liveness: passing until failureThreshold failures in a row, then held until the
    /// next start; a success in between starts the count over.
    #[test]
    fn liveness_fails_after_its_threshold_in_a_row_and_then_holds() {
        let s = spec("{tcpSocket: {port: 8080}, periodSeconds: 5, initialDelaySeconds: 20}");
        let mut p = Prober::new(Kind::Liveness, s, 100.0, 0.0);
        assert_eq!(p.result, Some(true));
        assert!(!p.is_due(119.0, true) && p.is_due(120.0, true));
        let results: Vec<Option<bool>> = [false, false, true, false, false, false]
            .iter()
            .enumerate()
            .map(|(i, ok)| p.record(120.0 + 5.0 * i as f64, *ok))
            .collect();
        assert_eq!(results, vec![None, None, None, None, None, Some(false)]);
        assert!(p.on_hold && p.wake(true).is_none());
    }

    /// Readiness: not ready until successThreshold successes, gated on the startup probe
    /// (which runs only until it succeeds); the period is kept above the lab's floor.
    #[test]
    fn readiness_waits_for_the_startup_probe_and_its_own_successes() {
        let s = spec("{httpGet: {port: 8080}, successThreshold: 2, periodSeconds: 1}");
        let mut ready = Prober::new(Kind::Readiness, s, 0.0, 3.0);
        // A startup probe's successThreshold is 1 (the API's validation).
        let s = spec("{httpGet: {port: 8080}, periodSeconds: 1}");
        let mut startup = Prober::new(Kind::Startup, s, 0.0, 3.0);
        assert_eq!((ready.result, startup.result), (Some(false), None));
        assert!(!ready.is_due(0.0, false) && startup.is_due(0.0, false));
        assert_eq!(startup.record(0.0, false), None);
        assert_eq!(startup.due, 3.0);
        assert_eq!(startup.record(3.0, true), Some(true));
        assert!(startup.on_hold && !startup.is_due(100.0, true));
        assert!(ready.is_due(6.0, true));
        assert_eq!(ready.record(6.0, true), None);
        assert_eq!(ready.record(9.0, true), Some(true));
        assert_eq!(ready.record(12.0, true), None);
        assert_eq!(ready.record(15.0, false), None);
        assert_eq!(ready.record(18.0, false), None);
        assert_eq!(ready.record(21.0, false), Some(false));
    }
}
