//! The sidecar containers of a pod the lab plays, run as a kubelet runs them: the image
//! names the program (the lab's image store maps it to a local binary), the container's
//! command and args are its argv, its pod-local addresses are on the pod's IP, and its
//! /proc is the pod's process-namespace directory. Programs that build here run for real
//! (process-exporter, vmagent, Python scripts of the pod); solana-exporter, which does
//! not, is played from its source at v3.0.2 ([`solana_exporter`]).
//!
//! A native sidecar (an init container with `restartPolicy: Always`) that exits is
//! restarted with the kubelet's back-off; any other container that exits stays down, as
//! under the pod's `restartPolicy: Never`.

pub mod solana_exporter;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use tracing::{info, warn};

use super::pod_view::PodView;

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

/// Where a pod's programs keep their files.
#[derive(Debug, Clone)]
pub struct PodDirs {
    /// The pod's process namespace, as /proc.
    pub proc: PathBuf,
    /// Scratch space per container (its working directory).
    pub root: PathBuf,
    pub logs: PathBuf,
}

/// The argv of a real program, with the pod's addresses and paths as they are here.
fn argv(real: Real, view: &PodView, c: &Container, dirs: &PodDirs) -> Vec<String> {
    let mut args: Vec<String> = view
        .command_line(c)
        .iter()
        // The image's entrypoint is the program itself.
        .skip_while(|a| a.rsplit('/').next() == Some(real.binary()))
        .map(|a| view.local_addr(a))
        .collect();
    let mut set = |flag: &str, value: String| {
        args.retain(|a| !a.starts_with(&format!("{flag}=")) && a != flag);
        args.push(format!("{flag}={value}"));
    };
    let work = dirs.root.join(&c.name);
    match real {
        Real::ProcessExporter => {
            set("-procfs", dirs.proc.display().to_string());
        }
        Real::Vmagent => {
            set(
                "-remoteWrite.tmpDataPath",
                work.join("remotewrite-data").display().to_string(),
            );
        }
    }
    args
}

/// Runs a sidecar's program until the task is aborted (the pod stops).
pub async fn run(
    program: Program,
    view: PodView,
    container: Container,
    restart_always: bool,
    dirs: PodDirs,
    tools: PathBuf,
    clock: super::clock::Clock,
) {
    let scale = clock.scale;
    let name = format!("{}/{}:{}", view.namespace, view.name, container.name);
    let mut failures = 0u32;
    loop {
        let started = std::time::Instant::now();
        let code = match &program {
            Program::Real(real) => run_real(*real, &view, &container, &dirs, &tools).await,
            Program::Python => run_python(&view, &container, &dirs).await,
            Program::SolanaExporter { tag } => {
                solana_exporter::run(
                    &view,
                    &container,
                    tag,
                    &dirs.logs.join(log_name(&view, &container)),
                    Duration::from_secs_f64(clock.step),
                )
                .await
            }
        };
        warn!(container = %name, ?code, "sidecar exited");
        if !restart_always {
            return;
        }
        // The kubelet's back-off: 10 s doubling to 5 min, reset after 10 min running, in
        // the lab's simulated time like everything else about the pod.
        if started.elapsed().as_secs_f64() * scale > 600.0 {
            failures = 0;
        }
        let wait = Duration::from_secs(10 << failures.min(5))
            .min(Duration::from_secs(300))
            .div_f64(scale)
            .max(Duration::from_millis(10));
        failures += 1;
        info!(container = %name, ?wait, "restarting the sidecar (restartPolicy Always)");
        tokio::time::sleep(wait).await;
    }
}

fn log_name(view: &PodView, c: &Container) -> String {
    format!("{}_{}_{}.log", view.namespace, view.name, c.name)
}

/// Runs a Python sidecar's script with this machine's `python3`; its exit code.
async fn run_python(view: &PodView, c: &Container, dirs: &PodDirs) -> Option<i32> {
    let Some((path, text)) = python_script(view, c) else {
        warn!(container = %c.name, "no script of the pod's ConfigMaps to run");
        tokio::time::sleep(Duration::from_secs(60)).await;
        return None;
    };
    let work = dirs.root.join(&c.name);
    let _ = std::fs::create_dir_all(&work);
    let local = work.join(path.rsplit('/').next().unwrap_or("script.py"));
    if let Err(e) = std::fs::write(&local, text) {
        warn!(error = %e, "writing a sidecar's script");
        return None;
    }
    // The other files of its ConfigMap beside it, as the container sees them (a module
    // the script imports).
    for (name, body) in siblings(view, c, &path) {
        if let Err(e) = std::fs::write(work.join(name), body) {
            warn!(error = %e, "writing a file beside a sidecar's script");
        }
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dirs.logs.join(log_name(view, c)))
        .ok()?;
    // Its arguments after the script, with the pod's addresses and the paths of its
    // volumes as they are here; its working directory is its own scratch space.
    let args: Vec<String> = view
        .command_line(c)
        .iter()
        .skip_while(|a| **a != path)
        .skip(1)
        .map(|a| view.local_path(c, &view.local_addr(a)))
        .collect();
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(&local)
        .args(&args)
        .current_dir(&work)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().ok()?)
        .stderr(log)
        .kill_on_drop(true);
    for (k, v) in view.env(c) {
        cmd.env(k, v);
    }
    // Its /proc: the pod's processes only when the pod shares them
    // (`shareProcessNamespace`), else its own, where no other container's process is.
    let shared = view
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false);
    let procfs = if shared {
        dirs.proc.clone()
    } else {
        work.join("proc")
    };
    let _ = std::fs::create_dir_all(&procfs);
    cmd.env("PROCFS", &procfs);
    // busybox's nsenter, as the python:alpine image has it, played (sim/nsenter.rs).
    match nsenter_shim(view, c, &work, procfs) {
        Ok((bin, facts)) => {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", bin.display()))
                .env(super::nsenter::FACTS_ENV, facts);
        }
        Err(e) => warn!(error = %e, "writing the sidecar's nsenter"),
    }
    match cmd.spawn() {
        Ok(mut child) => child.wait().await.ok().and_then(|s| s.code()),
        Err(e) => {
            warn!(error = %e, "starting python3 for a sidecar");
            tokio::time::sleep(Duration::from_secs(60)).await;
            None
        }
    }
}

/// A `nsenter` for the container (bin/nsenter, which runs this program's
/// [`super::nsenter::SUBCOMMAND`]) and its facts from the pod spec: (bin dir, facts file).
fn nsenter_shim(
    view: &PodView,
    c: &Container,
    work: &Path,
    procfs: PathBuf,
) -> std::io::Result<(PathBuf, PathBuf)> {
    use crate::kubelet::privileges::Privileges;
    let caps = |c: &Container| {
        let p = Privileges::of(&view.pod, c);
        let mut caps = p.caps;
        if p.privileged {
            caps.insert("ALL".into());
        }
        caps
    };
    let validator = super::clients::recognise(&view.pod);
    let target_caps = validator.map(|(_, v)| caps(v)).unwrap_or_default();
    let programs = validator
        .iter()
        .flat_map(|(sim, _)| sim.namespace_programs())
        .map(|p| p.to_string())
        .collect();
    let facts = super::nsenter::Facts {
        procfs,
        caps: caps(c),
        target_caps,
        socket: super::nsenter::socket(view.pod_dir.as_deref().unwrap_or(work)),
        validator_mnt: super::procfs::container_mnt(super::workloads::validator_pid(
            view.pod.metadata.uid.as_deref().unwrap_or(""),
        )),
        programs,
        uid: u32::try_from(Privileges::of(&view.pod, c).uid).unwrap_or(u32::MAX),
    };
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin)?;
    // This program; once rebuilt while the lab runs, Linux names the running one
    // "PATH (deleted)", and PATH holds the new build.
    let exe = std::env::current_exe()?;
    let exe = exe
        .to_str()
        .and_then(|p| p.strip_suffix(" (deleted)"))
        .map(PathBuf::from)
        .unwrap_or(exe);
    let shim = bin.join("nsenter");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nexec '{}' {} \"$@\"\n",
            exe.display(),
            super::nsenter::SUBCOMMAND
        ),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755))?;
    let file = work.join("nsenter.json");
    std::fs::write(
        &file,
        serde_json::to_string(&facts).map_err(std::io::Error::other)?,
    )?;
    Ok((bin, file))
}

/// Runs a local build of the program; its exit code.
async fn run_real(
    real: Real,
    view: &PodView,
    c: &Container,
    dirs: &PodDirs,
    tools: &Path,
) -> Option<i32> {
    let work = dirs.root.join(&c.name);
    let _ = std::fs::create_dir_all(&work);
    let log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dirs.logs.join(log_name(view, c)))
    {
        Ok(f) => f,
        Err(e) => {
            warn!(error = %e, "opening a sidecar log");
            return None;
        }
    };
    let args = argv(real, view, c, dirs);
    let mut cmd = tokio::process::Command::new(tools.join(real.binary()));
    cmd.args(&args)
        .current_dir(&work)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().ok()?)
        .stderr(log)
        .kill_on_drop(true);
    for (k, v) in view.env(c) {
        cmd.env(k, v);
    }
    match cmd.spawn() {
        Ok(mut child) => child.wait().await.ok().and_then(|s| s.code()),
        Err(e) => {
            warn!(binary = %real.binary(), error = %e, "starting a sidecar (is `make tools` done?)");
            // Do not spin on a missing binary.
            tokio::time::sleep(Duration::from_secs(60)).await;
            None
        }
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
