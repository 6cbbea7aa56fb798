//! Stopping a container as the kubelet's `killContainer` does (kuberuntime_container.go,
//! kuberuntime_termination_order.go at v1.34.2): its preStop hook within the grace
//! period (at least the lab's floor), a sidecar stopped with its pod waiting for the
//! containers it outlives, then SIGTERM, then SIGKILL once the grace is spent, at least
//! 2 s after the SIGTERM (minimumGracePeriodInSeconds).

use super::{Action, Ending, PodLife, Role, Signal};
use crate::kubelet::probe::Kind;

/// Why a container is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Deleted,
    Deadline,
    /// A sidecar of a pod whose containers have all ended, or whose init failed.
    Done,
    Liveness,
    Startup,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// Its preStop hook is to run, until done or `until`.
    HookDue {
        until: f64,
    },
    /// Its preStop hook runs, until done or `until`.
    Hook {
        until: f64,
    },
    /// A sidecar waiting for the containers it outlives.
    Turn,
    /// SIGTERM is to be sent.
    Terminate,
    /// SIGTERM sent; SIGKILL at `kill_at`.
    Term {
        kill_at: f64,
    },
    Killed,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stopping {
    pub(super) why: Why,
    pub(super) grace_end: f64,
    pub(super) step: Step,
}

/// The step after a stop's hook: a sidecar stopped with its pod waits for its turn.
pub(super) fn after_hook(sidecar: bool, why: Why) -> Step {
    if sidecar && matches!(why, Why::Deleted | Why::Deadline | Why::Done) {
        Step::Turn
    } else {
        Step::Terminate
    }
}

impl PodLife {
    /// Container `i`'s preStop hook is done (or failed, or ran out of time).
    pub fn hook_done(&mut self, i: usize, generation: u32) {
        let c = &mut self.containers[i];
        if generation != c.generation {
            return;
        }
        let sidecar = c.spec.role == Role::Sidecar;
        if let Some(s) = c.stopping.as_mut()
            && matches!(s.step, Step::Hook { .. } | Step::HookDue { .. })
        {
            s.step = after_hook(sidecar, s.why);
        }
    }

    /// Begins stopping container `i` (its grace: the deletion's, a probe's, or the pod's).
    pub(super) fn stop(&mut self, i: usize, why: Why, now: f64) {
        let grace = match (self.ending, why) {
            (Some(Ending::Deleted { grace }), Why::Deleted | Why::Done) => grace,
            (Some(Ending::Gone), _) => 0.0,
            _ => self.grace,
        };
        let c = &mut self.containers[i];
        if !c.running() || c.stopping.is_some() {
            return;
        }
        let grace = match why {
            Why::Liveness | Why::Startup => c
                .probers
                .iter()
                .find(|p| {
                    p.kind
                        == if why == Why::Liveness {
                            Kind::Liveness
                        } else {
                            Kind::Startup
                        }
                })
                .and_then(|p| p.spec.grace)
                .unwrap_or(grace),
            _ => grace,
        };
        let grace_end = now + grace;
        let step = if c.spec.pre_stop.is_some() && grace > 0.0 {
            Step::HookDue {
                until: grace_end.max(now + self.timing.hook_floor),
            }
        } else {
            after_hook(c.spec.role == Role::Sidecar, why)
        };
        c.stopping = Some(Stopping {
            why,
            grace_end,
            step,
        });
    }

    /// Moves the stops under way on, from their steps and the time.
    pub(super) fn advance_stops(&mut self, now: f64, acts: &mut Vec<Action>) {
        for i in 0..self.containers.len() {
            let Some(mut s) = self.containers[i].stopping else {
                continue;
            };
            if let Step::HookDue { until } = s.step {
                acts.push(Action::PreStop {
                    container: i,
                    command: self.containers[i].spec.pre_stop.clone().unwrap_or_default(),
                    budget: until - now,
                });
                s.step = Step::Hook { until };
            }
            if let Step::Hook { until } = s.step
                && now >= until
            {
                s.step = after_hook(self.containers[i].spec.role == Role::Sidecar, s.why);
            }
            // A sidecar outlives the other containers and the sidecars after it.
            let outlived = !self.containers.iter().enumerate().any(|(j, c)| {
                c.running()
                    && (c.spec.role == Role::Main || (c.spec.role == Role::Sidecar && j > i))
            });
            if s.step == Step::Turn && (now >= s.grace_end || outlived) {
                s.step = Step::Terminate;
            }
            if s.step == Step::Terminate {
                // SIGTERM now; SIGKILL once the grace is spent, at least 2 s later
                // (minimumGracePeriodInSeconds).
                s.step = Step::Term {
                    kill_at: s.grace_end.max(now + 2.0),
                };
                acts.push(Action::Signal {
                    container: i,
                    signal: Signal::Term,
                });
            }
            if let Step::Term { kill_at } = s.step
                && now >= kill_at
            {
                s.step = Step::Killed;
                acts.push(Action::Signal {
                    container: i,
                    signal: Signal::Kill,
                });
            }
            self.containers[i].stopping = Some(s);
        }
    }
}
