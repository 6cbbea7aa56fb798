//! The kubelet's two back-offs, pure: restarting a container that keeps exiting
//! (CrashLoopBackOff) and pulling an image that keeps failing (ImagePullBackOff).
//!
//! Both are client-go's `flowcontrol.Backoff` (k8s.io/client-go v0.34.2
//! util/flowcontrol/backoff.go) as kubernetes v1.34.2 configures it
//! (pkg/kubelet/kubelet.go):
//! - restarts: `NewBackOff(initialCrashLoopBackOff = 10s, MaxCrashLoopBackOff = 300s)`
//!   with `HasExpiredFunc` "more than 600 s since the last update" (L1003-1006), checked
//!   against the container's last exit (kuberuntime_manager.go `doBackOff`:
//!   `IsInBackOffSince(key, finishedAt)`, else `Next(key, finishedAt)` and start it). So
//!   the first restart is at once, the next ones wait 10 s, 20 s, ... 300 s after the
//!   exit, and a container that ran more than 10 minutes since its last restart starts
//!   over at 10 s;
//! - pulls: `NewBackOff(imageBackOffPeriod = 10s, MaxImageBackOff = 300s)` with the
//!   default expiry, twice the maximum (images/image_manager.go `pullImage`:
//!   `IsInBackOffSinceUpdate(key, now)`, and `Next` after a failed pull).
//!
//! Times are seconds on the pod's clock (simulated seconds for a pod the lab plays: see
//! [`super`]). One [`Backoff`] holds one key's entry (a container of a pod, or an image
//! of a pod), as the kubelet keys them (`GetBackoffKey`: pod and container; `podUID_image`).

/// One key's back-off entry, and the rule it is kept by.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    initial: f64,
    max: f64,
    /// An entry last updated more than this long before an event starts over.
    expiry: f64,
    entry: Option<Entry>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    backoff: f64,
    last_update: f64,
}

impl Backoff {
    /// The kubelet's restart back-off (CrashLoopBackOff).
    pub fn crash_loop() -> Backoff {
        Backoff {
            initial: 10.0,
            max: 300.0,
            expiry: 600.0,
            entry: None,
        }
    }

    /// The kubelet's image pull back-off (ImagePullBackOff).
    pub fn image_pull() -> Backoff {
        Backoff {
            initial: 10.0,
            max: 300.0,
            expiry: 2.0 * 300.0,
            entry: None,
        }
    }

    /// The same, starting over only after `floor` at least: the lab's own steps in a
    /// run (starting a process, writing its status) are not compressed, so on a busy
    /// machine a run that crashes at once can outlast 10 compressed minutes.
    pub fn expiring_after(mut self, floor: f64) -> Backoff {
        self.expiry = self.expiry.max(floor);
        self
    }

    /// The current back-off (`Get`): 0 before the first `next`.
    pub fn get(&self) -> f64 {
        self.entry.map(|e| e.backoff).unwrap_or(0.0)
    }

    fn expired(&self, event: f64, e: &Entry) -> bool {
        event - e.last_update > self.expiry
    }

    /// `IsInBackOffSince(event)`: whether `now` is still within the back-off counted from
    /// `event` (a container's exit).
    pub fn in_backoff_since(&self, event: f64, now: f64) -> bool {
        match &self.entry {
            Some(e) if !self.expired(event, e) => now - event < e.backoff,
            _ => false,
        }
    }

    /// `IsInBackOffSinceUpdate(now)`: whether `now` is within the back-off counted from
    /// the last `next` (an image's last failed pull).
    pub fn in_backoff_since_update(&self, now: f64) -> bool {
        match &self.entry {
            Some(e) if !self.expired(now, e) => now - e.last_update < e.backoff,
            _ => false,
        }
    }

    /// When the back-off counted from the last update ends.
    pub fn until_since_update(&self) -> Option<f64> {
        self.entry.map(|e| e.last_update + e.backoff)
    }

    /// `Next(event)`: the back-off starts at its initial value (no entry, or one expired
    /// at `event`), else doubles up to its maximum; updated `now`.
    pub fn next(&mut self, event: f64, now: f64) {
        let backoff = match &self.entry {
            Some(e) if !self.expired(event, e) => (e.backoff * 2.0).min(self.max),
            _ => self.initial,
        };
        self.entry = Some(Entry {
            backoff,
            last_update: now,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container that exits a second after each start: restarted at once, then 10 s
    /// doubling to 5 min after each exit, as the kubelet does.
    #[test]
    fn a_crash_loop_waits_10_s_doubling_to_5_minutes_after_each_exit() {
        let mut b = Backoff::crash_loop();
        let mut now = 0.0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            // It runs a second, then exits.
            now += 1.0;
            let exit = now;
            // Each sync: wait while in back-off, then `next` and start.
            while b.in_backoff_since(exit, now) {
                now += 1.0;
            }
            waits.push(now - exit);
            b.next(exit, now);
        }
        assert_eq!(
            waits,
            vec![0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]
        );
    }

    /// A container that ran more than 10 minutes since its last restart starts over: its
    /// next restart is at once, the one after 10 s.
    #[test]
    fn ten_minutes_of_running_resets_the_restart_back_off() {
        let mut b = Backoff::crash_loop();
        for (exit, restart) in [(1.0, 1.0), (2.0, 12.0), (13.0, 33.0)] {
            assert_eq!(b.in_backoff_since(exit, restart - 0.5), restart > exit);
            b.next(exit, restart);
        }
        assert_eq!(b.get(), 40.0);
        // 600 s after the last restart (33): not yet expired, in back-off for 40 s more.
        assert!(b.in_backoff_since(633.0, 633.0));
        // 601 s after it: expired, so no wait, and the next back-off is 10 s again.
        assert!(!b.in_backoff_since(634.0, 634.0));
        b.next(634.0, 634.0);
        assert_eq!(b.get(), 10.0);
    }

    /// The lab's floor keeps a fast crash loop doubling on a slow machine.
    #[test]
    fn the_labs_floor_delays_the_reset() {
        let mut b = Backoff::crash_loop().expiring_after(3600.0);
        b.next(0.0, 0.0);
        b.next(700.0, 700.0);
        assert_eq!(b.get(), 20.0);
    }

    /// A failed pull waits 10 s from the failure, doubling; ten quiet minutes later a
    /// failure starts over at 10 s.
    #[test]
    fn an_image_pull_backs_off_from_its_last_failure() {
        let mut b = Backoff::image_pull();
        assert!(!b.in_backoff_since_update(0.0));
        b.next(0.0, 0.0);
        assert!(b.in_backoff_since_update(9.9) && !b.in_backoff_since_update(10.0));
        b.next(10.0, 10.0);
        assert_eq!((b.get(), b.until_since_update()), (20.0, Some(30.0)));
        b.next(700.0, 700.0);
        assert_eq!(b.get(), 10.0);
    }
}
