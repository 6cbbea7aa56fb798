//! The validator processes the lab plays, one model per client behind [`SimClient`].
//! A model recognises its client's pod from what a kubelet sees (the pod spec, its env,
//! args and mounted ConfigMaps; never valtune's own resources) and plays the process at
//! its own interfaces: JSON-RPC, the datapoints it pushes, its /proc entries, its native
//! /metrics, and the exit a real one would make.
//!
//! Adding a client: a module here implementing [`SimClient`] and one line in [`CLIENTS`].

pub mod agave;
pub mod besu;
pub mod firedancer;
pub mod nodeos;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use super::clock::Clock;
use super::pod_view::PodView;

/// Every client the lab plays.
pub static CLIENTS: [&dyn SimClient; 4] = [
    &agave::AgaveSim,
    &firedancer::FiredancerSim,
    &nodeos::NodeosSim,
    &besu::BesuSim,
];

/// The model of a client whose pod the lab plays.
pub trait SimClient: Send + Sync {
    fn name(&self) -> &'static str;
    /// The container that runs this client's validator, if the pod runs it.
    fn recognise<'a>(&self, pod: &'a Pod) -> Option<&'a Container>;
    /// The process that container starts, as of its start.
    fn start(&self, pod: &PodView, container: &Container, env: &Env, clock: &Clock) -> Started;
    /// Runs a preStop exec hook's command in the validator's container, as its image
    /// would (the program played against the running process): Ok once it is done, else
    /// what it prints as it fails. None: the image has no program the lab plays for that
    /// command, so the hook fails (the kubelet's FailedPreStopHook).
    fn pre_stop(&self, _command: &[String], _hook: Hook) -> Option<Hooked> {
        None
    }
    /// The programs of its image that another container of the pod may run in the
    /// validator container's mount namespace (`nsenter --mount`, sim/nsenter.rs), which
    /// the process answers on that namespace's socket ([`Process::admin_rpc`], the
    /// program's name as the method).
    fn namespace_programs(&self) -> &'static [&'static str] {
        &[]
    }
}

/// Where a preStop hook runs: the pod, its validator container, and the pod's process
/// namespace (its /proc).
#[derive(Clone)]
pub struct Hook {
    pub view: PodView,
    pub container: Container,
    pub proc_dir: std::path::PathBuf,
}

/// A hook being run.
pub type Hooked = futures::future::BoxFuture<'static, Result<(), String>>;

/// The validator container's environment, resolved as a kubelet resolves it.
pub type Env = BTreeMap<String, String>;

/// What starting the process gave.
pub enum Started {
    Running(Arc<dyn Process>),
    /// It exits at once (an unknown flag, a malformed setting), as the real one would.
    Exited(Exit),
}

/// How and when (simulated seconds after start) the process exits.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    pub at: f64,
    /// The kubelet's reason: OOMKilled for the kernel's OOM kill, Error otherwise.
    pub reason: &'static str,
    pub code: i32,
    /// What it prints last (the container's termination message).
    pub message: String,
}

/// A JSON-RPC answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Rpc {
    Result(Value),
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
    },
}

/// One InfluxDB line-protocol point: measurement, fields (integers), wall-clock time.
#[derive(Debug, Clone, PartialEq)]
pub struct Datapoint {
    pub measurement: &'static str,
    /// Tags after `host_id` (e.g. a banking worker's `id`).
    pub tags: Vec<(&'static str, String)>,
    pub fields: Vec<(&'static str, i64)>,
    /// Simulated seconds since start at which it was emitted.
    pub at: f64,
}

/// What `/proc/<pid>/` says of the process (counters already in lab units: see
/// docs/lab.md, time compression).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcFigures {
    /// The command name (`comm`, at most 15 characters).
    pub comm: String,
    pub rss_bytes: u64,
    pub vsz_bytes: u64,
    pub swap_bytes: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub threads: u32,
}

impl ProcFigures {
    /// A one-thread process of its size alone: no faults, no I/O, no swap.
    pub fn sized(comm: &str, rss_bytes: u64, vsz_bytes: u64) -> Self {
        ProcFigures {
            comm: comm.into(),
            rss_bytes,
            vsz_bytes,
            swap_bytes: 0,
            minor_faults: 0,
            major_faults: 0,
            read_bytes: 0,
            write_bytes: 0,
            threads: 1,
        }
    }
}

/// A process the validator forked, as `/proc/<pid>/` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Forked {
    pub figures: ProcFigures,
    /// Its argv when it exec'd (None: forked only, its parent's argv).
    pub argv: Option<Vec<String>>,
    /// It moved into a mount namespace of its own (a sandbox's empty root): entering
    /// its namespace finds none of its container's files.
    pub private_mounts: bool,
}

impl Forked {
    /// A child forked without exec, in its parent's mount namespace.
    pub fn without_exec(figures: ProcFigures) -> Self {
        Forked {
            figures,
            argv: None,
            private_mounts: false,
        }
    }
}

/// A running validator process.
pub trait Process: Send + Sync {
    /// When it exits on its own (OOM kill, crash), if it does.
    fn exit(&self) -> Option<Exit>;
    /// The address it serves JSON-RPC on (pod-local port), if any.
    fn rpc_port(&self) -> Option<u16> {
        None
    }
    /// The address its JSON-RPC listener is bound to, as its flags or config say
    /// (0.0.0.0, 127.0.0.1, an IP); None: the pod's IP.
    fn rpc_bind(&self) -> Option<std::net::IpAddr> {
        None
    }
    /// Answers a JSON-RPC call at `t`; None: not listening yet (connection refused).
    fn json_rpc(&self, _t: f64, _method: &str, _params: &Value) -> Option<Rpc> {
        None
    }
    /// Where it pushes InfluxDB line protocol (`host` URL, `db`, `u`, `p`), if anywhere.
    fn metrics_sink(&self) -> Option<MetricsSink> {
        None
    }
    /// The datapoints it emits in (t0, t1].
    fn datapoints(&self, _t0: f64, _t1: f64) -> Vec<Datapoint> {
        Vec::new()
    }
    /// The HTTP POSTs it makes on its own in (t0, t1] (e.g. a log appender posting
    /// lines), the timestamps in their bodies already on the wall clock.
    fn posts(&self, _t0: f64, _t1: f64) -> Vec<Post> {
        Vec::new()
    }
    /// Its /proc entries at `t`.
    fn proc(&self, t: f64) -> ProcFigures;
    /// Its argv, when its container's command exec'd another program (a start script's
    /// `exec fdctl run`); None: the container's command line.
    fn argv(&self) -> Option<Vec<String>> {
        None
    }
    /// It moved into a mount namespace of its own (see [`Forked::private_mounts`]).
    fn private_mounts(&self) -> bool {
        false
    }
    /// The processes it has forked at `t` (their /proc entries name it as parent).
    fn children(&self, _t: f64) -> Vec<Forked> {
        Vec::new()
    }
    /// More files under /proc/<pid>/ at `t` than [`ProcFigures`] makes (name, content in
    /// the kernel's format), e.g. `smaps_rollup`.
    fn proc_files(&self, _t: f64) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Native Prometheus pages it serves: (port, path) -> exposition at `t`.
    fn metrics(&self, _t: f64, _port: u16, _path: &str) -> Option<String> {
        None
    }
    /// Pod-local ports it listens on for [`Process::metrics`].
    fn metrics_ports(&self) -> Vec<u16> {
        Vec::new()
    }
    /// Other HTTP GET pages it serves (health endpoints): the status and body for a path
    /// with its query, asked with a Host header; None: no such page (404).
    fn http_get(
        &self,
        _t: f64,
        _port: u16,
        _path: &str,
        _host: Option<&str>,
    ) -> Option<(u16, String)> {
        None
    }
    /// Pod-local ports it listens on for [`Process::http_get`].
    fn http_ports(&self) -> Vec<u16> {
        Vec::new()
    }
    /// The Unix socket of its admin RPC (Agave's `admin.rpc` in its ledger directory),
    /// where the node's file system is the lab's, if it serves one.
    fn admin_socket(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// Answers an admin RPC call at `t`; None: no such method.
    fn admin_rpc(&self, _t: f64, _method: &str, _params: &Value) -> Option<Rpc> {
        None
    }
    /// Writes what it keeps on its volumes as of `t` (Agave's ledger), called often while
    /// it runs: what a restarted process finds there.
    fn persist(&self, _t: f64) -> std::io::Result<()> {
        Ok(())
    }
    /// Brings the files it has written by `t` onto disk (e.g. snapshot archives in a
    /// directory of the node), removing the ones it has purged.
    fn write_files(&self, _t: f64) -> std::io::Result<()> {
        Ok(())
    }
}

/// An HTTP POST a process makes: where (an address as the pod sees it) and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub url: String,
    pub body: String,
}

/// Where a process pushes its datapoints (Agave's `SOLANA_METRICS_CONFIG`).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsSink {
    pub host: String,
    pub db: String,
    pub user: String,
    pub password: String,
}

/// The model for a pod, if the lab plays one of its containers.
pub fn recognise(pod: &Pod) -> Option<(&'static dyn SimClient, &Container)> {
    CLIENTS
        .iter()
        .find_map(|c| c.recognise(pod).map(|container| (*c, container)))
}

/// The values of a flag in an argument list (`--flag value` or `--flag=value`).
pub fn flag_values<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if a == flag {
            if let Some(v) = it.next() {
                out.push(v.as_str());
            }
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.push(v);
        }
    }
    out
}

/// A client version, (major, minor, patch): comparable.
pub type Version = (u32, u32, u32);

/// The version in an image's tag: its first `X.Y.Z` (`v2.1.14`, `v5.0.3wax02`,
/// `ce-v1.0.3wax01`, `24.1.2-amd64`); None for an untagged image.
pub fn image_version(image: &str) -> Option<Version> {
    let tag = image
        .rsplit_once(':')
        .map(|(_, t)| t)
        .filter(|t| !t.contains('/'))?;
    let start = tag.find(|c: char| c.is_ascii_digit())?;
    let mut it = tag[start..].splitn(3, '.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let rest = it.next()?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    Some((major, minor, rest[..end].parse().ok()?))
}

/// A seed from a name (FNV-1a), so a pod's run is reproducible.
pub fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// splitmix64: a small, good, deterministic mixer.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform number in [0, 1) for (seed, stream, index).
pub fn uniform(seed: u64, stream: u64, index: u64) -> f64 {
    let v = mix(seed ^ mix(stream.wrapping_mul(0x1000_0000_01b3) ^ index));
    (v >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal number for (seed, stream, index) (Box-Muller).
pub fn normal(seed: u64, stream: u64, index: u64) -> f64 {
    let u1 = uniform(seed, stream, 2 * index).max(1e-12);
    let u2 = uniform(seed, stream, 2 * index + 1);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_in_both_spellings() {
        let args: Vec<String> = [
            "--rpc-port",
            "8899",
            "--entrypoint=a:1",
            "--entrypoint",
            "b:2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(flag_values(&args, "--rpc-port"), vec!["8899"]);
        assert_eq!(flag_values(&args, "--entrypoint"), vec!["a:1", "b:2"]);
        assert!(flag_values(&args, "--ledger").is_empty());
    }
}
