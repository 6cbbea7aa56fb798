//! What a step asks for, done against the API server: the experiment's PodMonitor,
//! deleting trials that left the sweep, creating trials (an event for those a pass
//! created), and the status.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use tracing::info;

use super::decide::{Act, Step};
use super::kube_err;
use crate::api::experiment::{
    ExperimentPhase, NodeHours, ValidatorExperiment, ValidatorExperimentStatus,
};
use crate::api::trial::ValidatorTrial;
use crate::clients;
use crate::controller::{Context, Error, Result, pod_monitor};

/// Does the step's acts, in order; returns the trials a create found existing, as read
/// back (decide.rs `decide_with` counts them so). A pass that fails to create a trial
/// creates no more: the rest is left to the next pass, whose strategy sees the part that
/// exists.
pub async fn act(
    vx: &ValidatorExperiment,
    ctx: &Context,
    step: &Step,
) -> Result<Vec<(String, Option<ValidatorTrial>)>> {
    let api: Api<ValidatorTrial> =
        Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    let mut created: Vec<ValidatorTrial> = Vec::new();
    let mut found = Vec::new();
    let mut failed = None;
    for a in &step.acts {
        match a {
            Act::EnsurePodMonitor => {
                let client = clients::client_for(&vx.spec.template)
                    .map_err(|e| Error::InvalidObject(e.to_string()))?;
                let endpoints = client.profile(&vx.spec.template).endpoints;
                pod_monitor::ensure(ctx, vx, &endpoints).await?;
            }
            Act::DeleteTrial(name) => {
                info!(trial = %name, "removing a trial whose point left the sweep");
                match api.delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        return Err(kube_err(
                            vx,
                            Error::DeleteTrial,
                            "deleting a trial that left the sweep",
                        )(e));
                    }
                }
            }
            Act::CreateTrials(_) if failed.is_some() => {}
            Act::CreateTrials(group) => {
                for trial in group {
                    let name = trial.name_any();
                    match api.create(&PostParams::default(), trial).await {
                        Ok(t) => created.push(t),
                        // Created by an earlier pass whose store did not hold it yet: fine.
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            let read = api.get_opt(&name).await.map_err(kube_err(
                                vx,
                                Error::CreateTrial,
                                "reading a trial",
                            ))?;
                            found.push((name, read));
                        }
                        Err(e) => {
                            failed = Some(kube_err(vx, Error::CreateTrial, "creating a trial")(e));
                            break;
                        }
                    }
                }
            }
            // Only a pass that creates nothing has one (decide.rs: while it waits for
            // its pipeline).
            Act::Event(note) => {
                ctx.publish(vx, note.warning, &note.reason, &note.text, true)
                    .await
            }
        }
    }
    finish_creating(vx, ctx, &created, &found).await;
    match failed {
        Some(e) => Err(e),
        None => Ok(found),
    }
}

/// One event for the trials a pass created (not one each: the Recorder would patch the
/// first one's count and drop the others' notes, a write per trial); what it created or
/// found counts for the next pass before the watch delivers it.
async fn finish_creating(
    vx: &ValidatorExperiment,
    ctx: &Context,
    created: &[ValidatorTrial],
    found: &[(String, Option<ValidatorTrial>)],
) {
    if let Some(first) = created.first() {
        ctx.publish_related(
            vx,
            Some(first.object_ref(&())),
            false,
            "TrialCreated",
            &created_note(created),
            false,
        )
        .await;
    }
    let mut made: Vec<ValidatorTrial> = created.to_vec();
    made.extend(found.iter().filter_map(|(_, t)| t.clone()));
    super::observe::remember(vx, ctx, &made);
}

/// What an event says of the trials a pass created: each one's name, point and
/// repetition, as many as an event note holds (the rest counted).
fn created_note(created: &[ValidatorTrial]) -> String {
    let one = |t: &ValidatorTrial| {
        format!(
            "trial {}: {} (repetition {})",
            t.name_any(),
            t.spec.point.describe(),
            t.spec.repetition
        )
    };
    if let [t] = created {
        return one(t);
    }
    let mut note = format!("{} trials created", created.len());
    for (i, t) in created.iter().enumerate() {
        let next = format!("; {}", one(t));
        let rest = format!("; and {} more", created.len() - i);
        if note.len() + next.len() + rest.len() > NOTE_CHARS {
            note.push_str(&rest);
            break;
        }
        note.push_str(&next);
    }
    note
}

/// What [`Context::publish`] keeps of a note (events.k8s.io/v1 notes hold at most 1 KiB).
const NOTE_CHARS: usize = 1000;

/// Writes the status when it changed, with an event when the phase changed.
pub async fn write_status(
    vx: &ValidatorExperiment,
    ctx: &Context,
    old: &ValidatorExperimentStatus,
    st: &ValidatorExperimentStatus,
) -> Result<()> {
    if st == old {
        return Ok(());
    }
    let uid = vx.metadata.uid.clone().unwrap_or_default();
    let last = ctx.status_written.lock().expect("lock").get(&uid).copied();
    if only_the_clock(old, st) && last.is_some_and(|at| at.elapsed() < CLOCK_EVERY) {
        return Ok(());
    }
    let api: Api<ValidatorExperiment> =
        Api::namespaced(ctx.client.clone(), &vx.namespace().unwrap_or_default());
    ctx.write_status(&api, vx, st).await.map_err(kube_err(
        vx,
        Error::WriteStatus,
        "writing the status",
    ))?;
    ctx.status_written
        .lock()
        .expect("lock")
        .insert(uid, Instant::now());
    if st.phase != old.phase {
        let (warning, note) = match st.phase {
            ExperimentPhase::Failed => (true, condition_message(st, "Ready")),
            _ => (false, condition_message(st, "Progressing")),
        };
        ctx.publish(vx, warning, &format!("{:?}", st.phase), &note, false)
            .await;
    }
    Ok(())
}

/// How long a status whose only change is `nodeHours.spent` waits for its write: the
/// running trials' hours grow with the clock, and every trial change wakes the
/// experiment, so written each time they would cost a write per wake-up that says only
/// that time passed (a third of the experiments' status writes at 100 trials). The pass
/// after this long (the 300 s safety requeue at the latest) writes it.
pub const CLOCK_EVERY: Duration = Duration::from_secs(300);

/// Whether `new` differs from `old` only in the node-hours spent. Pure.
pub fn only_the_clock(old: &ValidatorExperimentStatus, new: &ValidatorExperimentStatus) -> bool {
    match (&old.node_hours, &new.node_hours) {
        (Some(o), Some(n)) if o != n => {
            let mut same = new.clone();
            same.node_hours = Some(NodeHours {
                spent: o.spent,
                grid: n.grid,
            });
            same == *old
        }
        _ => false,
    }
}

fn condition_message(st: &ValidatorExperimentStatus, type_: &str) -> String {
    st.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::experiment::NodeHours;

    fn trials(n: usize) -> Vec<ValidatorTrial> {
        let vx: ValidatorExperiment = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: ram, namespace: ns, uid: u1}\nspec:\n  template:\n    agave: {image: agave}\n    storage: [{role: ledger, size: 1Ti}]\n  sweep: {memory: [128Gi, 256Gi, 384Gi]}\n  trial: {repetitions: 16}\n",
        )
        .unwrap();
        crate::strategies::plan::plan(&vx.spec.sweep, 16)
            .iter()
            .take(n)
            .map(|p| crate::strategies::build::build_trial(&vx, p).unwrap())
            .collect()
    }

    /// One trial reads as before; many are each named until the note is full, the rest
    /// counted, within what an event note keeps.
    #[test]
    fn one_event_names_the_trials_a_pass_created() {
        let one = trials(1);
        assert_eq!(
            created_note(&one),
            format!("trial {}: memory=128Gi (repetition 1)", one[0].name_any())
        );
        let two = trials(2);
        assert_eq!(
            created_note(&two),
            format!(
                "2 trials created; trial {}: memory=128Gi (repetition 1); trial {}: {} (repetition {})",
                two[0].name_any(),
                two[1].name_any(),
                two[1].spec.point.describe(),
                two[1].spec.repetition
            )
        );
        let many = trials(48);
        let note = created_note(&many);
        assert!(note.len() <= NOTE_CHARS, "{}", note.len());
        assert!(note.starts_with("48 trials created; trial "), "{note}");
        let named = note.matches("; trial ").count();
        assert!(
            note.ends_with(&format!("; and {} more", 48 - named)),
            "{note}"
        );
    }

    /// A status that differs only in the node-hours spent says only that time passed;
    /// any other change (the grid's estimate included) is news.
    #[test]
    fn a_change_of_the_node_hours_alone_is_the_clock() {
        let old = ValidatorExperimentStatus {
            node_hours: Some(NodeHours {
                spent: 0.05,
                grid: Some(0.97),
            }),
            ..Default::default()
        };
        let mut new = old.clone();
        new.node_hours.as_mut().unwrap().spent = 0.06;
        assert!(only_the_clock(&old, &new));
        assert!(!only_the_clock(&old, &old));
        new.node_hours.as_mut().unwrap().grid = Some(0.28);
        assert!(!only_the_clock(&old, &new));
        let mut new = old.clone();
        new.node_hours.as_mut().unwrap().spent = 0.06;
        new.phase = ExperimentPhase::Succeeded;
        assert!(!only_the_clock(&old, &new));
    }
}
