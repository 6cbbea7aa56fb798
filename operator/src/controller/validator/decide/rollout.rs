//! A change of the rendered pod reaches the running one only in the client's restart
//! window (or when `spec.restartWindow.force` says so): the running pod is deleted, and
//! the pod step creates the new one once it is gone.

use std::time::Duration;

use jiff::Timestamp;

use super::{Act, Pass};
use crate::api::validator::{PendingChange, ValidatorPhase, ValidatorSpec, ValidatorStatus};
use crate::clients::Rendered;
use crate::clients::health::RestartWindow;
use crate::controller::validator::observe::{Observed, PodState};
use crate::controller::validator::window::{Memory, Settings, Verdict, judge as leader_window};

/// What the rollout step decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollout {
    /// The pod runs what is rendered.
    UpToDate,
    /// The window is open (or forced): delete the running pod. `change` says what
    /// changed, `why` why now.
    Restart {
        change: String,
        why: String,
        forced: bool,
    },
    /// The change waits for the window: what the status keeps while it does (what
    /// changed and what it waits for in `waiting_for`).
    Wait(PendingChange),
}

pub fn judge(
    spec: &ValidatorSpec,
    previous: &ValidatorStatus,
    obs: &Observed,
    pod: &PodState,
    rendered: &Rendered,
    now: Timestamp,
) -> Rollout {
    if pod.hash.as_deref() == Some(obs.hash.as_str()) {
        return Rollout::UpToDate;
    }
    let new_image = rendered
        .pod
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone());
    let what = match (&pod.image, &new_image) {
        (Some(a), Some(b)) if a != b => format!("image {a} -> {b}"),
        _ => "its tuning, resources or arguments".to_string(),
    };
    let change = format!(
        "the rendered pod changed ({what}; hash {} -> {})",
        pod.hash.as_deref().unwrap_or("none"),
        obs.hash
    );
    let forced = spec.restart_window.as_ref().is_some_and(|r| r.force);
    let (verdict, kept) = window(spec, previous, obs, forced, now);
    match verdict {
        Verdict::Open(why) => Rollout::Restart {
            change,
            why,
            forced,
        },
        Verdict::Wait(why) => {
            let mut pending = kept.unwrap_or_else(|| PendingChange {
                hash: obs.hash.clone(),
                waiting_for: String::new(),
                snapshot_slot: None,
                incremental_seen: false,
            });
            pending.waiting_for = format!("{change}; waiting: {why}");
            Rollout::Wait(pending)
        }
    }
}

/// The client's restart window for a pending change: its verdict, and for Agave's window
/// what its loop keeps between looks (in `status.pendingChange`).
fn window(
    spec: &ValidatorSpec,
    previous: &ValidatorStatus,
    obs: &Observed,
    forced: bool,
    now: Timestamp,
) -> (Verdict, Option<PendingChange>) {
    let verdict = match obs.window {
        _ if forced => Verdict::Open(
            "spec.restartWindow.force is set: restarting outside the client's window".into(),
        ),
        RestartWindow::Immediate => {
            Verdict::Open("the client has no restart window: restarting now".into())
        }
        RestartWindow::NotImplemented(why) => Verdict::Wait(format!(
            "the client's restart window: {why}; the pod keeps running as it is"
        )),
        RestartWindow::ProducerRound { .. } => match (&obs.producer, &obs.schedule) {
            (None, _) => {
                Verdict::Open("a non-producing nodeos misses no round: restarting now".into())
            }
            (Some(p), Some(Ok(producers))) => {
                crate::controller::validator::round::judge(producers, p, now)
            }
            (Some(_), Some(Err(e))) => Verdict::Wait(format!(
                "the producer schedule cannot be read from nodeos: {e}"
            )),
            // Not serving its API (starting, replaying): it produces nothing.
            (Some(_), None) if obs.answer.is_none() => Verdict::Open(
                "nodeos does not answer its API: it produces no block, restarting now".into(),
            ),
            (Some(_), None) => Verdict::Wait("the producer schedule is not read yet".into()),
        },
        RestartWindow::LeaderSchedule { .. } => {
            let kept = previous
                .pending_change
                .as_ref()
                .filter(|p| p.hash == obs.hash);
            let memory = Memory {
                snapshot_slot: kept.and_then(|p| p.snapshot_slot).map(|x| x as u64),
                incremental_seen: kept.is_some_and(|p| p.incremental_seen),
            };
            match (&obs.look, &obs.answer) {
                (Some(Ok(look)), _) => {
                    let (v, m) =
                        leader_window(look, Settings::of(spec.restart_window.as_ref()), memory);
                    let pending = PendingChange {
                        hash: obs.hash.clone(),
                        waiting_for: String::new(),
                        snapshot_slot: m.snapshot_slot.map(|x| x as i64),
                        incremental_seen: m.incremental_seen,
                    };
                    return (v, Some(pending));
                }
                // Asked, and no answer in time: a validator too busy to answer may
                // still lead its slots. wait-for-restart-window fails then (its RPC
                // calls end it with an error: not a time to restart).
                (_, None) if obs.unanswered.is_some() => Verdict::Wait(format!(
                    "the validator's RPC did not answer ({}), so its leader slots cannot be read",
                    obs.unanswered.as_deref().unwrap_or_default()
                )),
                // Not serving its RPC (no pod running, loading its snapshot,
                // crash-looping: the connection is refused): it leads no slot, so
                // there is no window to wait for.
                (_, None) => Verdict::Open(
                    "the validator does not answer its RPC: no leader slot to miss, restarting now"
                        .into(),
                ),
                (Some(Err(e)), Some(_)) => Verdict::Wait(format!(
                    "the restart window's figures cannot be read from the validator's RPC: {e}"
                )),
                (None, Some(_)) => {
                    Verdict::Wait("the restart window's figures are not read yet".into())
                }
            }
        }
    };
    (verdict, None)
}

/// Says what the rollout decided; false when the pass ends here (the pod is replaced).
pub(super) fn apply(pass: &mut Pass<'_>, rollout: Rollout, pod: &PodState) -> bool {
    match rollout {
        Rollout::UpToDate => {
            pass.set(
                "RestartPending",
                false,
                "UpToDate",
                "the pod runs what is rendered",
            );
            true
        }
        Rollout::Restart {
            change,
            why,
            forced,
        } => {
            pass.act(Act::DeletePod);
            pass.out.phase = ValidatorPhase::Restarting;
            pass.out.pending_change = None;
            pass.set(
                "RestartPending",
                true,
                "Restarting",
                format!("{change}: {why}"),
            );
            pass.set("Ready", false, "Restarting", "the pod is replaced");
            pass.event(
                forced,
                if forced {
                    "ForcedRestart"
                } else {
                    "Restarting"
                },
                format!(
                    "{change}: {why}; deleting pod {} to start the new one",
                    pod.name
                ),
            );
            pass.requeue = Duration::from_secs(2);
            false
        }
        Rollout::Wait(pending) => {
            pass.set(
                "RestartPending",
                true,
                "WaitingForWindow",
                pending.waiting_for.clone(),
            );
            pass.out.pending_change = Some(pending);
            // The window is a matter of slots (400 ms each): look again soon.
            pass.requeue = Duration::from_secs(2);
            true
        }
    }
}
