//! The trial reconciler: observe (the pod, its node, what Prometheus says) -> a pure
//! [`transition::transition`] -> act (apply or delete the pod, events) -> status. One
//! attempt at a time; see [`transition`] for the phases.

pub mod act;
pub mod observe;
pub mod transition;

use std::sync::Arc;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use tracing::info;

use super::status::condition;
use super::{Context, Error, Result, name_of, now};
use crate::api::trial::{TrialOutcome, TrialPhase, ValidatorTrial, ValidatorTrialStatus};
use crate::clients;
use transition::{Settings, Step};

pub async fn reconcile(trial: Arc<ValidatorTrial>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("trial");
    if trial.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if ctx.already_written(trial.as_ref()) {
        return Ok(Action::requeue(super::STALE_RECHECK));
    }
    let old = trial.status.clone().unwrap_or_default();
    let now = now();
    let prom = ctx.prometheus(trial.spec.metrics.prometheus_url.as_deref());
    let planned = clients::client_for(&trial.spec.template)
        .and_then(|c| Ok((c, clients::profile(&trial)?)))
        .map_err(|e| e.to_string())
        .and_then(|(c, p)| {
            let monitor = (ctx.pod_monitors && trial.spec.metrics.pod_monitor).then(|| {
                format!(
                    "{}/{}",
                    trial.namespace().unwrap_or_default(),
                    trial.spec.experiment
                )
            });
            Settings::of(
                &trial,
                &p,
                c.summary(),
                prom.as_ref().map(|p| p.url()),
                monitor,
            )
            .map(|s| (p, s))
        });
    let mut step = match planned {
        Ok((profile, settings)) => {
            let needs = transition::needs(&old, &settings, now);
            let obs = observe::observe(
                &trial,
                &ctx,
                &old,
                &needs,
                &settings,
                &profile,
                prom.as_ref(),
            )
            .await?;
            transition::transition(&old, &obs, &settings, now)
        }
        // Only an object that bypassed the schema gets here; it can never run.
        Err(why) if !old.phase.is_finished() => {
            let mut status = old.clone();
            transition::finish(
                &mut status,
                Some(TrialOutcome::Invalid),
                format!("the trial cannot run: {why}"),
                now,
            );
            Step {
                status,
                acts: vec![transition::Act::DeletePods],
                requeue: None,
            }
        }
        Err(_) => Step {
            status: old.clone(),
            acts: vec![transition::Act::DeletePods],
            requeue: None,
        },
    };
    act::act(&trial, &ctx, &mut step, now).await?;

    let action = step.action();
    let mut st = step.status;
    st.observed_generation = trial.metadata.generation;
    st.point = Some(trial.spec.point.describe());
    st.conditions = conditions(&trial, &st, now);
    if st != old {
        let api: Api<ValidatorTrial> =
            Api::namespaced(ctx.client.clone(), &trial.namespace().unwrap_or_default());
        ctx.write_status(&api, trial.as_ref(), &st)
            .await
            .map_err(|e| {
                Error::WriteStatus(
                    format!("writing the status of trial {}", name_of(trial.as_ref())),
                    e,
                )
            })?;
        if let Some(note) = transition::announcement(&old, &st) {
            ctx.metrics.trial_transition(&format!("{:?}", st.phase));
            info!(trial = %trial.name_any(), phase = ?st.phase, outcome = ?st.outcome, "{}", note.text);
            ctx.publish(
                trial.as_ref(),
                note.warning,
                &note.reason,
                &note.text,
                false,
            )
            .await;
        }
    }
    ctx.succeeded(&trial.metadata.uid.clone().unwrap_or_default());
    Ok(action)
}

/// Ready (finished with a measurement), Progressing, Degraded (finished without one),
/// MetricsReadable (Prometheus answers), and Complete once there are results (every
/// series of the client's profile had datapoints, and Prometheus scraped at least
/// metrics.minCoverage of the window).
fn conditions(
    trial: &ValidatorTrial,
    st: &ValidatorTrialStatus,
    now: Timestamp,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let g = trial.metadata.generation;
    let prev = &st.conditions;
    let phase = format!("{:?}", st.phase);
    let reason = st
        .outcome
        .map(|o| o.as_str().to_string())
        .unwrap_or(phase.clone());
    let message = st.message.clone().unwrap_or_default();
    let finished = st.phase.is_finished();
    let mut out = vec![
        condition(
            prev,
            "Ready",
            st.phase == TrialPhase::Succeeded,
            &reason,
            message.clone(),
            g,
            now,
        ),
        condition(
            prev,
            "Progressing",
            !finished,
            &phase,
            message.clone(),
            g,
            now,
        ),
        condition(
            prev,
            "Degraded",
            st.phase == TrialPhase::Failed,
            &reason,
            message.clone(),
            g,
            now,
        ),
    ];
    let readable = st.blind_since.is_none();
    out.push(condition(
        prev,
        "MetricsReadable",
        readable,
        if readable {
            "PrometheusAnswers"
        } else {
            "PrometheusUnreachable"
        },
        if readable { String::new() } else { message },
        g,
        now,
    ));
    if let Some(results) = &st.results {
        out.extend(completeness(trial, results, prev, g, now));
    }
    out
}

/// Complete: False with SeriesMissing when a series had no datapoint (naming it and the
/// likely cause), False with LowCoverage below metrics.minCoverage, True otherwise.
fn completeness(
    trial: &ValidatorTrial,
    results: &crate::api::trial::TrialResults,
    prev: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    g: Option<i64>,
    now: Timestamp,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    if !results.missing.is_empty() {
        let remote = clients::profile(trial)
            .map(|p| p.remote_written)
            .unwrap_or_default();
        return Some(condition(
            prev,
            "Complete",
            false,
            "SeriesMissing",
            format!(
                "no datapoint in the window of {}: the figures they back are missing, not zero. {}",
                results.missing.join(", "),
                crate::clients::profile::explain_missing(&results.missing, &remote)
            ),
            g,
            now,
        ));
    }
    let coverage = results.coverage?;
    let min = trial.spec.metrics.min_coverage;
    let complete = coverage >= min;
    Some(condition(
        prev,
        "Complete",
        complete,
        if complete { "Covered" } else { "LowCoverage" },
        format!(
            "Prometheus scraped {:.0}% of the window{}",
            coverage * 100.0,
            if complete {
                String::new()
            } else {
                format!(
                    ", below metrics.minCoverage ({:.0}%): the figures describe the scraped part only",
                    min * 100.0
                )
            }
        ),
        g,
        now,
    ))
}
