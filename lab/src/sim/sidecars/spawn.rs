//! Starting a sidecar's real program as a kubelet starts its container: the image's
//! program (a local build, or this machine's `python3` for a script of the pod's
//! ConfigMaps), its command line with the pod's addresses and paths as they are here,
//! its env, its working directory and log. A port the container declares is listened on
//! at the pod's loopback twin (net.rs `loopback_of`), where the forwarder (forward.rs)
//! passes what the node's firewall lets through from the pod's IP.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;
use tracing::warn;

use super::{PodView, Real, python_script, siblings};
use crate::sim::runtimes::PodDirs;

/// An address the program listens on, `IP:PORT` for one of its own ports, moved to the
/// pod's loopback twin, behind the forwarder.
fn listen_here(view: &PodView, own: &[u16], arg: &str) -> String {
    let mut out = arg.to_string();
    for p in own {
        out = out.replace(
            &format!("{}:{p}", view.ip),
            &format!("{}:{p}", view.loopback()),
        );
    }
    out
}

fn open_log(view: &PodView, c: &Container, dirs: &PodDirs) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dirs.logs.join(log_name(view, c)))
        .map_err(|e| format!("opening its log: {e}"))
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

pub(super) fn log_name(view: &PodView, c: &Container) -> String {
    format!("{}_{}_{}.log", view.namespace, view.name, c.name)
}

/// Runs a Python sidecar's script with this machine's `python3`; its exit code.
/// Starts a Python sidecar's script with this machine's `python3`.
pub(super) fn python(
    view: &PodView,
    c: &Container,
    dirs: &PodDirs,
    own: &[u16],
) -> Result<tokio::process::Child, String> {
    let Some((path, text)) = python_script(view, c) else {
        return Err("no script of the pod's ConfigMaps to run".into());
    };
    let work = dirs.root.join(&c.name);
    let _ = std::fs::create_dir_all(&work);
    let local = work.join(path.rsplit('/').next().unwrap_or("script.py"));
    std::fs::write(&local, text).map_err(|e| format!("writing the script: {e}"))?;
    // The other files of its ConfigMap beside it, as the container sees them (a module
    // the script imports).
    for (name, body) in siblings(view, c, &path) {
        if let Err(e) = std::fs::write(work.join(name), body) {
            warn!(error = %e, "writing a file beside a sidecar's script");
        }
    }
    let log = open_log(view, c, dirs)?;
    // Its arguments after the script, with the pod's addresses and the paths of its
    // volumes as they are here; its working directory is its own scratch space.
    let args: Vec<String> = view
        .command_line(c)
        .iter()
        .skip_while(|a| **a != path)
        .skip(1)
        .map(|a| view.local_path(c, &listen_here(view, own, &view.local_addr(a))))
        .collect();
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(&local)
        .args(&args)
        .current_dir(&work)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
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
                .env(crate::sim::nsenter::FACTS_ENV, facts);
        }
        Err(e) => warn!(error = %e, "writing the sidecar's nsenter"),
    }
    cmd.spawn().map_err(|e| format!("starting python3: {e}"))
}

/// A `nsenter` for the container (bin/nsenter, which runs this program's
/// [`crate::sim::nsenter::SUBCOMMAND`]) and its facts from the pod spec: (bin dir, facts file).
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
    let validator = crate::sim::clients::recognise(&view.pod);
    let target_caps = validator.map(|(_, v)| caps(v)).unwrap_or_default();
    let programs = validator
        .iter()
        .flat_map(|(sim, _)| sim.namespace_programs())
        .map(|p| p.to_string())
        .collect();
    let facts = crate::sim::nsenter::Facts {
        procfs,
        caps: caps(c),
        target_caps,
        socket: crate::sim::nsenter::socket(view.pod_dir.as_deref().unwrap_or(work)),
        validator_mnt: crate::sim::procfs::container_mnt(crate::sim::workloads::validator_pid(
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
            crate::sim::nsenter::SUBCOMMAND
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

/// Starts a local build of the program.
pub(super) fn real(
    real: Real,
    view: &PodView,
    c: &Container,
    dirs: &PodDirs,
    tools: &Path,
    own: &[u16],
) -> Result<tokio::process::Child, String> {
    let work = dirs.root.join(&c.name);
    let _ = std::fs::create_dir_all(&work);
    let log = open_log(view, c, dirs)?;
    let args: Vec<String> = argv(real, view, c, dirs)
        .iter()
        .map(|a| listen_here(view, own, a))
        .collect();
    let mut cmd = tokio::process::Command::new(tools.join(real.binary()));
    cmd.args(&args)
        .current_dir(&work)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .kill_on_drop(true);
    for (k, v) in view.env(c) {
        cmd.env(k, v);
    }
    cmd.spawn()
        .map_err(|e| format!("starting {} (is `make tools` done?): {e}", real.binary()))
}
