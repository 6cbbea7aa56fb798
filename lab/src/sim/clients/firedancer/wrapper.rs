//! The validator container's own start script, run for real: here with the cpuset the
//! kubelet's static CPU manager would give the container (Guaranteed QoS, whole cores:
//! that many cores of its own), the config template of its ConfigMap, and stubs for the
//! programs of the image (fdctl, fddev, firedancer, firedancer-dev, chown, id) that
//! record how they are called. What the script writes and calls is what the simulated
//! program then reads and does.
//!
//! The script's `FD_TEMPLATE`, `FD_CONFIG` and `CPUSET_FILE` point it at files here. A
//! container that runs fdctl itself (no script) is read from its command line.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Container;

use super::super::Env;
use crate::sim::pod_view::PodView;

/// The programs of Firedancer's images: Frankendancer's and full Firedancer's.
pub const BINARIES: [&str; 4] = ["fdctl", "fddev", "firedancer", "firedancer-dev"];

/// What the container did up to exec'ing fdctl.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// The script's exit code (0 when it exec'd fdctl).
    pub code: i32,
    /// What it printed on stderr.
    pub stderr: String,
    /// fdctl/fddev invocations in order: argv, program name first.
    pub calls: Vec<Vec<String>>,
    /// The config the last invocation reads.
    pub config: Option<String>,
    /// The container's cores.
    pub cpuset: Vec<u32>,
    /// Files the script wrote into the container's emptyDirs (its path there: content),
    /// e.g. a Validator's keys copied from its Secrets.
    pub files: std::collections::BTreeMap<String, String>,
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The script a container runs with `sh -c`, if it does.
pub fn script(line: &[String]) -> Option<&str> {
    match line {
        [sh, c, script, ..] if basename(sh) == "sh" && c == "-c" => Some(script),
        _ => None,
    }
}

/// Whether a command line starts fdctl or fddev, directly or from a script.
pub fn starts_firedancer(line: &[String]) -> bool {
    if line
        .first()
        .is_some_and(|p| BINARIES.contains(&basename(p)))
    {
        return true;
    }
    script(line).is_some_and(|s| {
        s.lines().any(|l| {
            let l = l.trim_start();
            BINARIES
                .iter()
                .any(|b| l.starts_with(&format!("exec {b} ")))
        })
    })
}

/// The cores the kubelet's static CPU manager gives a Guaranteed container with a whole
/// number of CPUs (after two it keeps for the system); the shared pool otherwise.
pub fn cpuset(c: &Container) -> Vec<u32> {
    let cpus = c
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("cpu"))
        .and_then(|q| q.0.parse::<u32>().ok());
    match cpus {
        Some(n) => (2..2 + n).collect(),
        None => (0..64).collect(),
    }
}

fn ranges(cpus: &[u32]) -> String {
    match (cpus.first(), cpus.last()) {
        (Some(a), Some(b)) => format!("{a}-{b}\n"),
        _ => String::new(),
    }
}

fn config_arg(argv: &[String]) -> Option<&str> {
    argv.iter()
        .position(|a| a == "--config")
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

/// Runs the container's start as far as fdctl.
pub fn run(view: &PodView, c: &Container, env: &Env) -> Result<Ran, String> {
    let line = view.command_line(c);
    let cpus = cpuset(c);
    let Some(body) = script(&line) else {
        // fdctl started directly: its config is a mounted file.
        let config = config_arg(&line).and_then(|p| view.file(c, p));
        return Ok(Ran {
            code: 0,
            stderr: String::new(),
            calls: vec![line.clone()],
            config,
            cpuset: cpus,
            files: Default::default(),
        });
    };
    let dir = std::env::temp_dir().join(format!(
        "valtune-lab-fd-{}-{}-{}",
        std::process::id(),
        view.name,
        super::super::seed(&format!("{:?}", std::time::SystemTime::now()))
    ));
    let out = in_dir(&dir, view, c, env, body, &cpus);
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn in_dir(
    dir: &Path,
    view: &PodView,
    c: &Container,
    env: &Env,
    body: &str,
    cpus: &[u32],
) -> Result<Ran, String> {
    let io = |e: std::io::Error| format!("the lab could not run the start script: {e}");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(io)?;
    let calls = dir.join("calls");
    let record = format!(
        "#!/bin/sh\nfor a in \"$(basename \"$0\")\" \"$@\"; do printf '%s\\037' \"$a\"; done >> {calls}\necho >> {calls}\n",
        calls = calls.display()
    );
    for (name, text) in [
        ("fdctl", record.as_str()),
        ("fddev", record.as_str()),
        ("firedancer", record.as_str()),
        ("firedancer-dev", record.as_str()),
        ("chown", "#!/bin/sh\nexit 0\n"),
        ("id", "#!/bin/sh\nexit 0\n"),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, text).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    // The template the script reads: its default path, from the pod's ConfigMap.
    let default = body
        .split_once("FD_TEMPLATE:-")
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(path, _)| path.to_string())
        .ok_or("the start script names no template (FD_TEMPLATE)")?;
    let template = view
        .file(c, &default)
        .ok_or_else(|| format!("sed: {default}: No such file or directory"))?;
    std::fs::write(dir.join("template"), template).map_err(io)?;
    std::fs::write(dir.join("cpuset"), ranges(cpus)).map_err(io)?;
    // The container's file system where the script names it under `FD_ROOT`: its
    // Secrets' and ConfigMaps' files as mounted, its emptyDirs empty.
    let root = dir.join("root");
    let volumes = view.volumes();
    let mut scratch = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let at = root.join(m.mount_path.trim_start_matches('/'));
        std::fs::create_dir_all(&at).map_err(io)?;
        let Some(v) = volumes.iter().find(|v| v.name == m.name) else {
            continue;
        };
        if v.empty_dir.is_some() {
            scratch.push(m.mount_path.clone());
        }
        for (key, text) in view.volume_files(v).into_iter().flatten() {
            std::fs::write(at.join(key), text).map_err(io)?;
        }
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(body)
        .env_clear()
        .envs(env)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("FD_TEMPLATE", dir.join("template"))
        .env("FD_CONFIG", dir.join("config"))
        .env("CPUSET_FILE", dir.join("cpuset"))
        .env("FD_ROOT", &root)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(io)?;
    let calls: Vec<Vec<String>> = std::fs::read_to_string(&calls)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.split('\u{1f}')
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect()
        })
        .collect();
    let config = calls
        .last()
        .and_then(|argv| config_arg(argv))
        .and_then(|p| std::fs::read_to_string(p).ok());
    // The programs saw the lab's file; in the container it is the script's own path
    // (`FD_CONFIG`'s default), which their messages name.
    let here = dir.join("config").display().to_string();
    let own = body
        .split_once("FD_CONFIG:-")
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(path, _)| path.to_string());
    let calls = match own {
        Some(own) => calls
            .into_iter()
            .map(|argv| {
                argv.into_iter()
                    .map(|a| if a == here { own.clone() } else { a })
                    .collect()
            })
            .collect(),
        None => calls,
    };
    let mut files = std::collections::BTreeMap::new();
    for mount in scratch {
        let at = root.join(mount.trim_start_matches('/'));
        for entry in std::fs::read_dir(&at).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                files.insert(format!("{}/{name}", mount.trim_end_matches('/')), text);
            }
        }
    }
    Ok(Ran {
        code: out.status.code().unwrap_or(1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        calls,
        config,
        cpuset: cpus.to_vec(),
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_that_execs_fdctl_is_firedancer() {
        let l = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(starts_firedancer(&l(&[
            "sh",
            "-c",
            "set -eu\nexec fdctl run --config /x\n"
        ])));
        assert!(starts_firedancer(&l(&["/opt/fd/bin/fddev", "bench"])));
        assert!(starts_firedancer(&l(&[
            "sh",
            "-c",
            "exec firedancer-dev bench --config /x\n"
        ])));
        assert!(!starts_firedancer(&l(&["sh", "-c", "echo fdctl"])));
        assert!(!starts_firedancer(&l(&["agave-validator"])));
    }
}
