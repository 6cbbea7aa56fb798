//! A simulated process as it runs: its model, its clock, whether it has ended, and the
//! tasks that keep what it shows the node current (its /proc entries, the files it keeps
//! on its volumes) and notice its own end.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use tracing::warn;

use super::super::clients::{Exit, Process};
use super::super::clock::Clock;
use super::super::procfs;

/// A running workload: the process, its clock and whether it has exited.
pub(super) struct Live {
    pub(super) process: Arc<dyn Process>,
    pub(super) clock: Clock,
    pub(super) start: Timestamp,
    pub(super) dead: AtomicBool,
    /// Its pid in the pod's process namespace (its /proc entry; the admin RPC's `pid`).
    pub(super) pid: u32,
    /// Woken when something may have changed when it exits (an admin RPC call).
    pub(super) poke: tokio::sync::Notify,
    /// Woken when it ends ([`Live::end`]).
    pub(super) gone: tokio::sync::Notify,
}

impl Live {
    pub(super) fn now(&self) -> f64 {
        self.clock.since(self.start, Timestamp::now())
    }

    pub(super) fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }

    /// It has ended: what serves it stops, its /proc entries go at once.
    pub(super) fn end(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.gone.notify_waiters();
    }
}

/// The process's own end (an OOM kill, a crash, an `exit` asked over its admin RPC),
/// once it comes; looked at again whenever the process is poked.
pub(super) async fn watch_exit(live: Arc<Live>) -> Exit {
    loop {
        let exit = live.process.exit();
        let at = exit.as_ref().map(|e| live.clock.at(live.start, e.at));
        let wait = at
            .map(|t| Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default())
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = live.poke.notified() => {}
            _ = tokio::time::sleep(wait) => {
                if let (Some(exit), Some(at)) = (exit, at)
                    && Timestamp::now() >= at
                {
                    // What it leaves on its volumes as it ends (a clean exit's ledger).
                    if let Err(e) = live.process.persist(exit.at) {
                        warn!(error = %e, "writing the process's files on its volume");
                    }
                    live.end();
                    return exit;
                }
            }
        }
    }
}

/// Keeps the process's /proc entries current; removes them when it exits. `cmdline` is
/// its container's command line, the argv it starts with.
pub(super) async fn keep_proc(live: Arc<Live>, root: PathBuf, pid: u32, cmdline: Vec<String>) {
    let started = live.start.as_second().max(0) as u64;
    let boot = started - 3600;
    // The processes it forked, numbered after it (forked, not exec'd: its argv).
    let mut forked = 0;
    let remove = |from: u32, to: u32| {
        for p in from..to {
            let _ = std::fs::remove_dir_all(root.join(p.to_string()));
        }
    };
    loop {
        let gone = live.gone.notified();
        tokio::pin!(gone);
        gone.as_mut().enable();
        if !live.alive() {
            remove(pid, pid + 1 + forked);
            return;
        }
        let now = live.now();
        let figures = live.process.proc(now);
        let children = live.process.children(now);
        let argv = live.process.argv().unwrap_or_else(|| cmdline.clone());
        let mnt = |own: bool, p: u32| match own {
            true => procfs::own_mnt(p),
            false => procfs::container_mnt(pid),
        };
        let written = procfs::write(&root, pid, 1, boot, started, &argv, &figures)
            .and_then(|()| procfs::write_mnt(&root, pid, &mnt(live.process.private_mounts(), pid)))
            .and_then(|()| procfs::write_files(&root, pid, &live.process.proc_files(now)))
            .and_then(|()| {
                children.iter().zip(pid + 1..).try_for_each(|(c, child)| {
                    let argv = c.argv.as_ref().unwrap_or(&argv);
                    procfs::write(&root, child, pid, boot, started, argv, &c.figures)?;
                    procfs::write_mnt(&root, child, &mnt(c.private_mounts, child))
                })
            });
        if let Err(e) = written {
            warn!(error = %e, "writing /proc entries");
        }
        if let Err(e) = live.process.write_files(now) {
            warn!(error = %e, "writing the files the process makes");
        }
        let n = children.len() as u32;
        remove(pid + 1 + n, pid + 1 + forked.max(n));
        forked = n;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = &mut gone => {}
        }
    }
}

/// Lets the process write what it keeps on its volumes (Agave's ledger), often: a
/// fifth of a real second is 144 simulated seconds at the lab's usual time scale.
pub(super) async fn keep_files(live: Arc<Live>) {
    while live.alive() {
        if let Err(e) = live.process.persist(live.now()) {
            warn!(error = %e, "writing the process's files on its volume");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
