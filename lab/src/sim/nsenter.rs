//! `nsenter --target PID --mount -- PROGRAM ARGS...` for the sidecars the lab runs as
//! local processes (a Python script of the pod's ConfigMaps): busybox's nsenter, as the
//! python:alpine image has it (alpinelinux/aports main/busybox/busyboxconfig
//! `CONFIG_NSENTER=y`), judged from what the kubelet knows, the pod spec:
//!
//! - PID must be in the container's /proc: the pod's processes are shared
//!   (`shareProcessNamespace`), else the container sees only its own;
//! - opening /proc/PID/ns/mnt is a ptrace read (Linux `proc_ns_get_link` ->
//!   `ptrace_may_access`): allowed between processes of one user (the target's `Uid:` in
//!   its /proc/PID/status) when the target's capabilities are a subset of the caller's,
//!   else only with CAP_SYS_PTRACE (kernel/ptrace.c `__ptrace_may_access`,
//!   security/commoncap.c `cap_ptrace_access_check`);
//! - setns(2) into a mount namespace needs CAP_SYS_ADMIN and CAP_SYS_CHROOT
//!   (fs/namespace.c `mntns_install`);
//! - then PROGRAM runs in the target's mount namespace, the one its `/proc/PID/ns/mnt`
//!   names (the lab's procfs.rs writes it). Only the validator container's namespace has
//!   programs the lab can run there: the ones its client model says its image holds
//!   (`SimClient::namespace_programs`; Frankendancer's `fdctl`, clients/firedancer/keyswitch.rs),
//!   played by the simulated validator over a socket that stands for that namespace; a
//!   process that sandboxed itself into an empty root of its own (fdctl run's main
//!   process and its tiles) has no program at all, nor has another container's. Its
//!   messages are busybox's (util-linux/nsenter.c, `xopen`, "setns(): can't reassociate
//!   to namespace", and BB_EXECVP_or_die's "can't execute").
//!
//! The socket answers a program's run as JSON-RPC: its output (exit 0), an error (its
//! code, the exit status, and message), or one of two codes for a program that blocks
//! ([`WAITS`]: still waiting, ask again; [`HANGS`]: never returns).
//!
//! The kubelet writes the facts ([`Facts`]) beside the container and puts a `nsenter` on
//! its PATH that runs `valtune-lab lab-nsenter`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The subcommand of valtune-lab the shim runs.
pub const SUBCOMMAND: &str = "lab-nsenter";
/// The environment variable naming the facts file.
pub const FACTS_ENV: &str = "VALTUNE_LAB_NSENTER";
/// The answer code for "the program is still waiting: ask again in a second".
pub const WAITS: i64 = -40001;
/// The answer code for "the program never returns" (its output so far in the message).
pub const HANGS: i64 = -40002;

/// Where a pod's validator serves calls made from inside its container's mount
/// namespace (the lab's stand-in for that namespace; short: a Unix socket path is at
/// most 107 bytes).
pub fn socket(pod_dir: &Path) -> PathBuf {
    pod_dir.join("mntns.sock")
}

/// What the kubelet knows of the calling container and the validator's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Facts {
    /// The container's /proc (the pod's when its processes are shared).
    pub procfs: PathBuf,
    /// The caller's capabilities ("ALL" when privileged) and the validator's.
    pub caps: BTreeSet<String>,
    pub target_caps: BTreeSet<String>,
    /// The validator container's mount namespace, as [`socket`].
    pub socket: PathBuf,
    /// That namespace as `/proc/PID/ns/mnt` names it (procfs::container_mnt).
    pub validator_mnt: String,
    /// The programs the validator's image has there, which its model plays.
    #[serde(default)]
    pub programs: BTreeSet<String>,
    /// The caller's uid.
    pub uid: u32,
}

/// What the caller's /proc says of the target: its mount namespace (`ns/mnt`) and its
/// user (`status`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target<'a> {
    pub mnt: &'a str,
    pub uid: u32,
}

fn has(caps: &BTreeSet<String>, cap: &str) -> bool {
    caps.contains("ALL") || caps.contains(cap)
}

/// What nsenter does with `args`, given the facts and the target (None: no such process
/// in the container's /proc): the program's argv to run in the validator's namespace, or
/// (exit code, message).
pub fn decide(
    args: &[String],
    facts: &Facts,
    target_proc: Option<Target>,
) -> Result<Vec<String>, (i32, String)> {
    let mut target = None;
    let mut mount = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--" => {
                i += 1;
                break;
            }
            "-t" | "--target" => {
                target = args.get(i + 1).cloned();
                i += 1;
            }
            "-m" | "--mount" => mount = true,
            _ if a.starts_with("--target=") => target = Some(a["--target=".len()..].into()),
            _ if a.starts_with('-') => {
                return Err((
                    1,
                    format!("nsenter: the lab plays --target and --mount only, not {a}"),
                ));
            }
            _ => break,
        }
        i += 1;
    }
    let program: Vec<String> = args[i..].to_vec();
    let Some(pid) = target.filter(|p| p.parse::<u32>().is_ok()) else {
        return Err((1, "nsenter: no --target PID".into()));
    };
    if !mount {
        return Err((1, "nsenter: the lab plays --mount only".into()));
    }
    let ns = format!("/proc/{pid}/ns/mnt");
    let Some(t) = target_proc else {
        return Err((
            1,
            format!("nsenter: can't open '{ns}': No such file or directory"),
        ));
    };
    let subset = facts.target_caps.is_subset(&facts.caps) && !has(&facts.target_caps, "ALL")
        || has(&facts.caps, "ALL");
    if !(t.uid == facts.uid && subset || has(&facts.caps, "SYS_PTRACE")) {
        return Err((1, format!("nsenter: can't open '{ns}': Permission denied")));
    }
    if !has(&facts.caps, "SYS_ADMIN") || !has(&facts.caps, "SYS_CHROOT") {
        return Err((
            1,
            "nsenter: setns(): can't reassociate to namespace 'mnt': Operation not permitted"
                .into(),
        ));
    }
    let name = program.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    // Only the validator container's namespace has its image's programs; a sandbox's
    // has nothing.
    if t.mnt != facts.validator_mnt || !name.is_some_and(|n| facts.programs.contains(n)) {
        let p = program.first().cloned().unwrap_or_default();
        return Err((
            127,
            format!("nsenter: can't execute '{p}': No such file or directory"),
        ));
    }
    Ok(program)
}

/// The shim: nsenter's exit code, its output printed.
pub fn main(args: &[String]) -> i32 {
    let facts: Facts = match std::env::var(FACTS_ENV)
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        Some(f) => f,
        None => {
            eprintln!("nsenter: the lab's facts ({FACTS_ENV}) are missing");
            return 1;
        }
    };
    let target = args
        .iter()
        .position(|a| a == "-t" || a == "--target")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--target=").map(String::from))
        })
        .unwrap_or_default();
    let dir = facts.procfs.join(&target);
    let mnt = std::fs::read_link(dir.join("ns/mnt"))
        .ok()
        .map(|l| l.to_string_lossy().into_owned());
    let uid = std::fs::read_to_string(dir.join("status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().next()?.parse().ok())
        });
    let found = mnt
        .as_deref()
        .zip(uid)
        .map(|(mnt, uid)| Target { mnt, uid });
    let program = match decide(args, &facts, found) {
        Ok(p) => p,
        Err((code, message)) => {
            eprintln!("{message}");
            return code;
        }
    };
    let name = program[0].rsplit('/').next().unwrap_or(&program[0]);
    loop {
        return match call(&facts.socket, name, &program[1..]) {
            Ok(Ok(out)) => {
                println!("{out}");
                0
            }
            // The program blocks: until the validator can answer, or for ever.
            Ok(Err((WAITS, _))) => {
                std::thread::sleep(std::time::Duration::from_secs(1));
                continue;
            }
            Ok(Err((HANGS, said))) => {
                eprint!("{said}");
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
            Ok(Err((_, message))) => {
                eprintln!("{message}");
                1
            }
            // The validator is gone: its namespace with it.
            Err(e) => {
                eprintln!("nsenter: can't open '/proc/{target}/ns/mnt': {e}");
                1
            }
        };
    }
}

/// One run of `program` on the validator's socket (the method is the program's name, the
/// params its arguments): its output or its error (code, message).
fn call(
    socket: &Path,
    program: &str,
    argv: &[String],
) -> std::io::Result<Result<String, (i64, String)>> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": program, "params": argv});
    s.write_all(req.to_string().as_bytes())?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    let answer: Value = serde_json::from_str(&line).map_err(std::io::Error::other)?;
    Ok(match answer.get("error") {
        Some(e) => Err((
            e["code"].as_i64().unwrap_or(1),
            e["message"].as_str().unwrap_or("").to_string(),
        )),
        None => Ok(answer["result"].as_str().unwrap_or("").to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(caps: &[&str], target: &[&str]) -> Facts {
        Facts {
            procfs: "/p".into(),
            caps: caps.iter().map(|c| c.to_string()).collect(),
            target_caps: target.iter().map(|c| c.to_string()).collect(),
            socket: "/s".into(),
            validator_mnt: CONTAINER.into(),
            programs: ["fdctl".to_string()].into(),
            uid: 0,
        }
    }

    /// The Agave child: fdctl's user, in the container's namespace.
    fn agave(mnt: &str) -> Option<Target<'_>> {
        Some(Target { mnt, uid: 1000 })
    }

    const CONTAINER: &str = "mnt:[4026533234]";

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    /// The agent's call passes with SYS_ADMIN, SYS_CHROOT and SYS_PTRACE into a
    /// privileged validator's Agave child, and each missing piece stops it as busybox's
    /// nsenter would.
    #[test]
    fn entering_the_validators_mount_namespace_takes_the_pods_processes_and_three_capabilities() {
        let a = args("--target 1234 --mount -- fdctl set-identity --config /c /k");
        let all = ["CHOWN", "SYS_ADMIN", "SYS_CHROOT", "SYS_PTRACE"];
        let without = |cap: &str| {
            let caps: Vec<&str> = all.iter().copied().filter(|c| *c != cap).collect();
            facts(&caps, &["ALL"])
        };
        let ok = facts(&all, &["ALL"]);
        assert_eq!(
            decide(&a, &ok, agave(CONTAINER)).unwrap(),
            args("fdctl set-identity --config /c /k")
        );
        // Not shared: the validator's pid is not in the agent's /proc.
        assert!(
            decide(&a, &ok, None)
                .unwrap_err()
                .1
                .contains("No such file")
        );
        assert_eq!(
            decide(&a, &without("SYS_PTRACE"), agave(CONTAINER))
                .unwrap_err()
                .1,
            "nsenter: can't open '/proc/1234/ns/mnt': Permission denied"
        );
        // Another user's process, even one with no capabilities, takes SYS_PTRACE; the
        // caller's own user's, with fewer capabilities than the caller, does not.
        let plain = |caps: &[&str]| facts(caps, &[]);
        let (admin, root) = (
            ["SYS_ADMIN", "SYS_CHROOT"],
            Some(Target {
                mnt: CONTAINER,
                uid: 0,
            }),
        );
        assert!(decide(&a, &plain(&admin), agave(CONTAINER)).is_err());
        assert!(decide(&a, &plain(&admin), root).is_ok());
        for cap in ["SYS_ADMIN", "SYS_CHROOT"] {
            assert!(
                decide(&a, &without(cap), agave(CONTAINER))
                    .unwrap_err()
                    .1
                    .contains("can't reassociate to namespace 'mnt'"),
                "{cap}"
            );
        }
        // A sandbox's empty root, or another container's namespace, has no fdctl.
        assert_eq!(
            decide(&a, &ok, agave("mnt:[4026633235]")).unwrap_err(),
            (
                127,
                "nsenter: can't execute 'fdctl': No such file or directory".into()
            )
        );
        assert!(decide(&args("-t 1234 -m fdctl x"), &ok, agave(CONTAINER)).is_ok());
    }
}
