//! The lab's processes: started detached in their own process group, recorded by pid and
//! kernel start time, so `down` stops exactly those processes and never a recycled pid.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRecord {
    pub name: String,
    pub pid: i32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22).
    pub start_ticks: u64,
    pub log: PathBuf,
    /// Started into a running lab (`valtune-lab spawn`), not part of its control plane:
    /// `down` stops it, but its exit does not make the lab unhealthy.
    #[serde(default)]
    pub adopted: bool,
    /// What was started, so it can be started again (`valtune-lab prometheus start`).
    #[serde(default)]
    pub program: PathBuf,
    #[serde(default)]
    pub args: Vec<String>,
}

/// Reads a process's start time and state from /proc; None if it no longer exists.
fn stat(pid: i32) -> Option<(u64, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; the fields after it do not.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, state))
}

impl ProcessRecord {
    /// Starts `program` detached (own process group, output to `log`).
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        let pid = child.id() as i32;
        let (start_ticks, _) =
            stat(pid).with_context(|| format!("{name} exited at once; see {}", log.display()))?;
        Ok(Self {
            name: name.into(),
            pid,
            start_ticks,
            log: log.into(),
            adopted: false,
            program: program.into(),
            args: args.to_vec(),
        })
    }

    /// Whether this very process (same pid and start time) is still running.
    pub fn is_alive(&self) -> bool {
        matches!(stat(self.pid), Some((start, state)) if start == self.start_ticks && state != 'Z')
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&self, grace: Duration) {
        if !self.is_alive() {
            return;
        }
        let group = Pid::from_raw(self.pid);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of the process's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_exactly_the_process_it_started() {
        let dir = std::env::temp_dir().join(format!("valtune-proc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = ProcessRecord::spawn(
            "sleeper",
            Path::new("/bin/sleep"),
            &["30".into()],
            &dir.join("sleep.log"),
        )
        .unwrap();
        assert!(p.is_alive());
        let mut impostor = p.clone();
        impostor.start_ticks += 1;
        assert!(
            !impostor.is_alive(),
            "a recycled pid must not count as ours"
        );
        p.stop(Duration::from_secs(5));
        // The child is ours (the test process), so reap it before checking.
        let _ = nix::sys::wait::waitpid(Pid::from_raw(p.pid), None);
        assert!(!p.is_alive());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
