//! TuningApplied, and the experiment's point in status once the pod runs what is rendered
//! with it. A refusal runs the template as written, and says why (an event too).

use super::Pass;
use crate::controller::validator::observe::Observed;
use crate::controller::validator::tuning::Tuned;

pub(super) fn report(pass: &mut Pass<'_>, obs: &Observed) {
    let pod = obs.pod.as_ref();
    let runs_rendered =
        pod.is_some_and(|p| !p.terminating && p.hash.as_deref() == Some(obs.hash.as_str()));
    // What the running pod was rendered with, while it is not yet the rendered one.
    let before = pod.and_then(|_| pass.previous.applied_tuning.clone());
    match &obs.tuning {
        Tuned::NotAsked => {
            pass.out.conditions.retain(|c| c.type_ != "TuningApplied");
        }
        Tuned::Resolved { applied, .. } => {
            let what = format!(
                "{} recommended by experiment {} (trial {})",
                applied.summary, applied.experiment, applied.trial
            );
            if runs_rendered {
                pass.out.applied_tuning = Some(applied.clone());
                pass.set(
                    "TuningApplied",
                    true,
                    "Applied",
                    format!("the pod runs {what}"),
                );
            } else {
                pass.out.applied_tuning = before;
                pass.set(
                    "TuningApplied",
                    false,
                    "WaitingForRestart",
                    format!("{what} is rendered; the pod runs it once it is (re)started in the client's restart window"),
                );
            }
        }
        Tuned::Refused(reason, message) => {
            pass.out.applied_tuning = if runs_rendered { None } else { before };
            pass.set(
                "TuningApplied",
                false,
                reason,
                format!("{message}; the template runs as written"),
            );
            pass.event(true, "TuningRefused", message.clone());
        }
    }
}
