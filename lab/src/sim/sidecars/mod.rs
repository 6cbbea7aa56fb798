//! The sidecar containers of a pod the lab plays, run as a kubelet runs them: the image
//! names the program (the lab's image store maps it to a local binary), the container's
//! command and args are its argv, its pod-local addresses are on the pod's IP, and its
//! /proc is the pod's process-namespace directory. Programs that build here run for real
//! (process-exporter, vmagent, Python scripts of the pod); solana-exporter, which does
//! not, is played from its source at v3.0.2 ([`solana_exporter`]).
//!
//! The kubelet restarts them as it restarts any container (crate::kubelet): a native
//! sidecar (an init container with `restartPolicy: Always`) with its back-off, any other
//! as its pod's `restartPolicy` says.

pub mod forward;
pub mod solana_exporter;
mod spawn;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Container;
use tracing::warn;

use super::pod_view::PodView;
use super::runtimes::PodCtx;
use crate::kubelet::runtime::{End, Run, Runtime};

/// What runs in a sidecar container.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    /// A local build of the image's program.
    Real(Real),
    /// asymmetric-research/solana-exporter, played (it does not build here).
    SolanaExporter { tag: String },
    /// A Python script of the pod's ConfigMaps, run by this machine's `python3` (the
    /// official `python` image runs it the same way). Its /proc is the pod's
    /// process-namespace directory, given as `PROCFS`.
    Python,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Real {
    ProcessExporter,
    Vmagent,
}

impl Real {
    fn binary(self) -> &'static str {
        match self {
            Real::ProcessExporter => "process-exporter",
            Real::Vmagent => "vmagent",
        }
    }
}

/// The image's repository (no registry, no tag) and tag.
pub(crate) fn repository(image: &str) -> (&str, &str) {
    let (name, tag) = match image.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, t),
        _ => (image, "latest"),
    };
    let name = name.split('@').next().unwrap_or(name);
    // A registry host has a dot or a port: drop it.
    let repo = match name.split_once('/') {
        Some((host, rest)) if host.contains('.') || host.contains(':') => rest,
        _ => name,
    };
    (repo, tag)
}

/// The program an image runs, if the lab has it.
pub fn program_of(image: &str) -> Option<Program> {
    let (repo, tag) = repository(image);
    match repo {
        "ncabatoff/process-exporter" => Some(Program::Real(Real::ProcessExporter)),
        "victoriametrics/vmagent" => Some(Program::Real(Real::Vmagent)),
        "asymmetric-research/solana-exporter" => Some(Program::SolanaExporter {
            tag: tag.to_string(),
        }),
        "python" | "library/python" => Some(Program::Python),
        _ => None,
    }
}

/// The metric names process-exporter 0.8.7 serves for a group
/// (collector/process_collector.go L13-148).
pub const PROCESS_EXPORTER_NAMES: &[&str] = &[
    "namedprocess_namegroup_num_procs",
    "namedprocess_namegroup_cpu_seconds_total",
    "namedprocess_namegroup_read_bytes_total",
    "namedprocess_namegroup_write_bytes_total",
    "namedprocess_namegroup_major_page_faults_total",
    "namedprocess_namegroup_minor_page_faults_total",
    "namedprocess_namegroup_context_switches_total",
    "namedprocess_namegroup_memory_bytes",
    "namedprocess_namegroup_open_filedesc",
    "namedprocess_namegroup_worst_fd_ratio",
    "namedprocess_namegroup_oldest_start_time_seconds",
    "namedprocess_namegroup_num_threads",
    "namedprocess_namegroup_states",
];

/// How vmagent names a line-protocol field with `-usePromCompatibleNaming`: measurement,
/// `_`, field, with every character Prometheus does not allow in a name made `_`
/// (lib/protoparser/influx, lib/promrelabel SanitizeMetricName at v1.110.0).
pub fn vmagent_name(measurement: &str, field: &str) -> String {
    format!("{measurement}_{field}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The metric names a sidecar program makes of a process's output, up to simulated time
/// `t` (the contract between a client's metric profile and what the lab serves).
pub fn metric_names(
    program: &Program,
    process: &dyn super::clients::Process,
    t: f64,
) -> Vec<String> {
    match program {
        Program::Real(Real::ProcessExporter) => PROCESS_EXPORTER_NAMES
            .iter()
            .map(|n| n.to_string())
            .collect(),
        Program::Real(Real::Vmagent) => {
            let mut names: Vec<String> = process
                .datapoints(0.0, t)
                .iter()
                .flat_map(|p| p.fields.iter().map(|(f, _)| vmagent_name(p.measurement, f)))
                .collect();
            // InfluxDB lines the process posts itself: `measurement[,tags] field=v,... ts`.
            for post in process.posts(0.0, t) {
                for line in post.body.lines() {
                    let mut parts = line.split(' ');
                    let (Some(head), Some(fields)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    let measurement = head.split(',').next().unwrap_or(head);
                    for field in fields.split(',') {
                        if let Some((f, _)) = field.split_once('=') {
                            names.push(vmagent_name(measurement, f));
                        }
                    }
                }
            }
            names
        }
        Program::SolanaExporter { .. } => solana_exporter::NAMES
            .iter()
            .map(|n| n.to_string())
            .collect(),
        // A script's names are its own: see [`script_metric_names`].
        Program::Python => Vec::new(),
    }
}

/// The metric names a script serves: those it declares with `# TYPE <name>` lines.
pub fn script_metric_names(script: &str) -> Vec<String> {
    script
        .match_indices("# TYPE ")
        .filter_map(|(i, m)| {
            let rest = &script[i + m.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The script a Python sidecar runs (its first `.py` argument) and its text, read from
/// the ConfigMap mounted there.
pub fn python_script(view: &PodView, c: &Container) -> Option<(String, String)> {
    let line = view.command_line(c);
    let path = line.iter().find(|a| a.ends_with(".py"))?.clone();
    let text = view.file(c, &path)?;
    Some((path, text))
}

/// The other files of the volume mounted where `path` is (file name, content).
fn siblings(view: &PodView, c: &Container, path: &str) -> Vec<(String, String)> {
    let Some((dir, own)) = path.rsplit_once('/') else {
        return Vec::new();
    };
    let volumes = view.volumes();
    c.volume_mounts
        .iter()
        .flatten()
        .filter(|m| m.mount_path.trim_end_matches('/') == dir && m.sub_path.is_none())
        .filter_map(|m| volumes.iter().find(|v| v.name == m.name))
        .filter_map(|v| view.volume_files(v))
        .flat_map(|files| files.iter())
        .filter(|(name, _)| name.as_str() != own && !name.contains('/'))
        .map(|(n, b)| (n.clone(), b.clone()))
        .collect()
}

/// A sidecar container the lab runs: its program, started run after run by the kubelet
/// (a native sidecar is restarted with the kubelet's back-off; any other container as
/// its pod's policy says). A real program's declared ports are served through the node's
/// firewall by a forwarder ([`forward`]) for as long as the pod runs.
pub struct Sidecar {
    ctx: Arc<PodCtx>,
    program: Program,
    container: Container,
    forwards: std::sync::Mutex<Option<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Sidecar {
    pub fn new(ctx: Arc<PodCtx>, program: Program, container: Container) -> Sidecar {
        Sidecar {
            ctx,
            program,
            container,
            forwards: std::sync::Mutex::new(None),
        }
    }

    /// The container's own ports, forwarded from the pod's IP to where the program
    /// listens (started once).
    fn forward(&self, view: &PodView) -> Vec<u16> {
        let ports = forward::own_ports(view, &self.container);
        let mut f = self.forwards.lock().expect("lock");
        if f.is_none() {
            *f = Some(
                ports
                    .iter()
                    .map(|p| {
                        tokio::spawn(forward::run(
                            self.ctx
                                .firewall
                                .listen(&view.node, SocketAddr::new(view.ip, *p)),
                            SocketAddr::new(view.loopback(), *p),
                        ))
                    })
                    .collect(),
            );
        }
        ports
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        for t in self.forwards.lock().expect("lock").iter().flatten() {
            t.abort();
        }
    }
}

impl Runtime for Sidecar {
    fn start(&self, _start: Timestamp) -> BoxFuture<'_, Result<Run, String>> {
        Box::pin(async move {
            let ctx = &self.ctx;
            let view = ctx.view();
            let c = &self.container;
            let name = format!("{}/{}:{}", view.namespace, view.name, c.name);
            match &self.program {
                Program::Real(real) => {
                    let own = self.forward(&view);
                    let child = spawn::real(*real, &view, c, &ctx.dirs, &ctx.state.tools, &own)?;
                    Ok(Run::child(child, None))
                }
                Program::Python => {
                    let own = self.forward(&view);
                    let child = spawn::python(&view, c, &ctx.dirs, &own)?;
                    Ok(Run::child(child, None))
                }
                Program::SolanaExporter { tag } => {
                    let (tag, c) = (tag.clone(), c.clone());
                    let log = ctx.dirs.logs.join(spawn::log_name(&view, &c));
                    let refresh = Duration::from_secs_f64(ctx.clock.step);
                    let pod = ctx.clone();
                    let resolve: solana_exporter::Resolve =
                        Arc::new(move |u| pod.view().local_addr(u));
                    Ok(Run::played(async move {
                        let code =
                            solana_exporter::run(&view, &c, &tag, &log, refresh, resolve).await;
                        warn!(container = %name, ?code, "sidecar exited");
                        End::exit(code.unwrap_or(1), "")
                    }))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmagent_names_datapoints_as_prometheus_allows() {
        assert_eq!(
            vmagent_name("loaded-programs-cache-stats", "misses"),
            "loaded_programs_cache_stats_misses"
        );
        assert_eq!(
            vmagent_name("replay-slot-stats", "total_transactions"),
            "replay_slot_stats_total_transactions"
        );
    }

    #[test]
    fn images_name_their_programs() {
        assert_eq!(
            program_of("ncabatoff/process-exporter:0.8.7"),
            Some(Program::Real(Real::ProcessExporter))
        );
        assert_eq!(
            program_of("docker.io/victoriametrics/vmagent:v1.110.0"),
            Some(Program::Real(Real::Vmagent))
        );
        assert_eq!(
            program_of("ghcr.io/asymmetric-research/solana-exporter:v3.0.2"),
            Some(Program::SolanaExporter {
                tag: "v3.0.2".into()
            })
        );
        assert_eq!(program_of("anzaxyz/agave:v2.0.5"), None);
        assert_eq!(program_of("python:3.13-alpine"), Some(Program::Python));
        assert_eq!(
            script_metric_names("x = '# TYPE a_b gauge'\n# TYPE c:d counter\n"),
            vec!["a_b", "c:d"]
        );
        assert_eq!(
            program_of("registry.local:5000/ncabatoff/process-exporter"),
            Some(Program::Real(Real::ProcessExporter))
        );
    }
}
