//! Collecting: reading the window's results once Prometheus has scraped past its end,
//! reading them again on request, and releasing the node.

use super::*;
use crate::api::trial::{Arrivals, SnapshotStart};
use crate::clients::profile::{
    SNAPSHOT_DOWNLOAD_FIGURE, SNAPSHOT_FULL_HTTP_FIGURE, SNAPSHOT_FULL_WRITTEN_FIGURE,
};

/// Whether the user asked for a finished trial's window to be collected again.
pub(super) fn recollect_requested(st: &ValidatorTrialStatus, s: &Settings) -> bool {
    st.phase.is_finished() && s.recollect.is_some() && s.recollect != st.collected_for
}

pub(super) fn collect_needs(st: &ValidatorTrialStatus, s: &Settings, now: Timestamp) -> Needs {
    let Some(end) = st.window_end.as_ref().map(|t| t.0) else {
        return Needs::Nothing;
    };
    if st.window_start.is_none() || !s.prometheus {
        return Needs::Nothing;
    }
    // Prometheus scrapes a live pod past the window's end within a step or two; a pod
    // whose validator died is not scraped any more, so its data is complete already.
    let grace = s.step_signed() * 2;
    if now < end + grace {
        return Needs::Wait(until(end + grace, now).max(Duration::from_millis(500)));
    }
    let died = died_early(st);
    // Attempts are spaced in time from the window's end (restart-safe: both in status),
    // however often the trial is reconciled.
    let retry =
        SignedDuration::try_from((s.step * 2).max(Duration::from_secs(2))).unwrap_or_default();
    let next_attempt = end + grace + retry * st.collect_attempts;
    if now < next_attempt {
        return Needs::Wait(until(next_attempt, now).max(Duration::from_millis(500)));
    }
    // A live pod's pushed samples may trail its scrapes by a flush interval and a
    // remote-write queue: wait for them up to half a minute (or ten steps) past the
    // window's end, and on while they keep arriving (a metrics agent re-sending its
    // backlog after an outage), up to the collection deadline.
    let patience = patience(s);
    let arriving = match &st.arrivals {
        None => true,
        Some(a) => now < a.advanced_at.0 + patience,
    };
    // A window read again on request ended long ago: read what is there.
    let again = s.recollect.is_some() && s.recollect == st.collected_for;
    Needs::Collect {
        check_scraped: !died
            && !again
            && now < end + s.collection_deadline.0
            && (now < end + patience || arriving),
    }
}

/// The validator died in its window: it is not scraped any more, so its data is complete.
fn died_early(st: &ValidatorTrialStatus) -> bool {
    matches!(
        st.outcome,
        Some(TrialOutcome::OOMKilled | TrialOutcome::Crashed)
    )
}

fn patience(s: &Settings) -> SignedDuration {
    (s.step_signed() * 10).max(SignedDuration::from_secs(30))
}

/// Prometheus does not have the window's samples yet: wait. Past the first patience,
/// remember the newest sample and when it last moved, so that the wait goes on only
/// while samples keep arriving (restart-safe: in status).
fn not_arrived_yet(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    step.requeue = Some(s.step);
    let Some(end) = st.window_end.as_ref().map(|t| t.0) else {
        return;
    };
    if now < end + patience(s) {
        return;
    }
    let newest = obs.newest_sample;
    // Moved: forward, or back when the check passed from scraped samples to pushed ones.
    let advanced = match &st.arrivals {
        None => true,
        Some(a) => newest != a.newest.as_ref().map(|t| t.0),
    };
    if advanced {
        st.arrivals = Some(Arrivals {
            newest: newest.map(Time),
            advanced_at: Time(now),
        });
        st.message = Some(format!(
            "waiting for Prometheus to receive the window's samples (it has them up to {}, the window ends at {end}); waiting while they keep arriving, at most until trial.collectionDeadline ({})",
            newest.map_or("none".to_string(), |t| t.to_string()),
            s.collection_deadline.1
        ));
    }
}

/// Collecting, when due: read the results.
pub(super) fn collect(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    // Unreachable is not "no data": its samples may well be there. Wait, with a longer
    // pause each time, up to the collection deadline; attempts count only answers.
    if let Some(why) = &obs.blind {
        let since = st.blind_since.as_ref().map(|t| t.0).unwrap_or(now);
        if st.blind_since.is_none() {
            st.blind_since = Some(Time(now));
            step.acts.push(Act::Event(Note {
                warning: true,
                reason: "PrometheusUnreachable".into(),
                text: format!(
                    "cannot read Prometheus at {} to collect the results; trying again until it answers (at most {}): {why}",
                    s.prometheus_url, s.collection_deadline.1
                ),
            }));
        }
        let away = now.duration_since(since);
        if away >= s.collection_deadline.0 {
            let outcome = match st.outcome {
                Some(o) if !o.is_result() => o,
                _ => TrialOutcome::MetricsUnavailable,
            };
            let text = with_reason(
                st,
                format!(
                    "Prometheus at {} was unreachable for {}s (since {since}), past trial.collectionDeadline ({}): no results read; its samples may still be there (`valtune collect` reads the window again); last error: {why}",
                    s.prometheus_url,
                    away.as_secs(),
                    s.collection_deadline.1
                ),
            );
            finish(st, Some(outcome), text, now);
            step.requeue = Some(Duration::from_secs(1));
        } else {
            step.requeue = Some(s.blind_backoff(away));
        }
        return;
    }
    st.blind_since = None;
    match &obs.scraped {
        Some(Ok(false)) => return not_arrived_yet(step, obs, s, now),
        Some(Err(_)) => {
            step.requeue = Some(s.step);
            return;
        }
        _ => {}
    }
    let (results, error) = match &obs.results {
        Some(Ok(r)) => (r.clone(), None),
        Some(Err(e)) => (None, Some(e.clone())),
        None => {
            step.requeue = Some(s.step);
            return;
        }
    };
    let Some(mut results) = results else {
        st.collect_attempts += 1;
        if st.collect_attempts >= MAX_COLLECT_ATTEMPTS {
            // A failure outcome already known (TimedOut, Crashed) stands; a measured one
            // (OOMKilled, Aborted) without data becomes MetricsUnavailable.
            let outcome = match st.outcome {
                Some(o) if !o.is_result() => o,
                _ => TrialOutcome::MetricsUnavailable,
            };
            let found = match error {
                Some(e) => format!("the last attempt failed: {e}"),
                None => "Prometheus had no samples".to_string(),
            };
            let (from, to) = (
                st.window_start.as_ref().map(|t| t.0.to_string()),
                st.window_end.as_ref().map(|t| t.0.to_string()),
            );
            let text = with_reason(
                st,
                format!(
                    "no results for the trial's pod in [{}, {}] after {MAX_COLLECT_ATTEMPTS} attempts: {found}",
                    from.unwrap_or_default(),
                    to.unwrap_or_default()
                ),
            );
            finish(st, Some(outcome), text, now);
            step.requeue = Some(Duration::from_secs(1));
        } else {
            step.requeue = Some((s.step * 2).max(Duration::from_secs(2)));
        }
        return;
    };
    // Catching up runs from the validator's first answer (its snapshot loaded) to caught
    // up; starting up, from the pod's start to that answer.
    let answering = st.answering_at.as_ref().or(st.started_at.as_ref());
    if let (Some(caught), Some(from)) = (&st.caught_up_at, answering) {
        results.catch_up_seconds = Some(caught.0.duration_since(from.0).as_secs_f64());
    }
    if let (Some(answered), Some(started)) = (&st.answering_at, &st.started_at) {
        results.startup_seconds = Some(answered.0.duration_since(started.0).as_secs_f64());
    }
    if let Some(secs) = results.figure(SNAPSHOT_DOWNLOAD_FIGURE) {
        results.snapshot = Some(SnapshotStart::judge(
            secs,
            obs.snapshot_reference,
            SnapshotStart::LOCAL_MAX_S,
        ));
    } else if let Some(bytes) = results.figure(SNAPSHOT_FULL_WRITTEN_FIGURE) {
        // Full Firedancer writes out only a full snapshot it downloads; the seconds are
        // what the scrapes saw of the download.
        let secs = results.figure(SNAPSHOT_FULL_HTTP_FIGURE).unwrap_or(0.0);
        results.snapshot = Some(SnapshotStart::of(
            bytes <= 0.0,
            secs,
            obs.snapshot_reference,
        ));
    }
    // The figures the trial ran for, missing (never zero: results/analysis.rs): no
    // verdict from what is not there.
    let void: Vec<String> = results
        .missing
        .iter()
        .filter(|m| s.headline.contains(*m))
        .cloned()
        .collect();
    // Ended early as bound to fall behind: not kept up, whatever the lag at its end.
    if st.early_abort.is_some() {
        results.kept_up = Some(false);
    }
    let outcome = st.outcome.unwrap_or(match results.kept_up {
        _ if !void.is_empty() => TrialOutcome::MetricsUnavailable,
        Some(true) => TrialOutcome::KeptUp,
        Some(false) => TrialOutcome::FellBehind,
        None => TrialOutcome::MetricsUnavailable,
    });
    let summary = if void.is_empty() {
        format!("{}: {}", outcome.as_str(), (s.summary)(&results))
    } else {
        format!(
            "{}: no datapoint of {} in the window, so its figures are missing, not zero: {}",
            outcome.as_str(),
            void.join(", "),
            crate::clients::profile::explain_missing(&void, &s.remote_written)
        )
    };
    // Collected after samples stopped arriving short of the window's end: say so.
    let summary = match st.arrivals.take() {
        Some(a) if obs.scraped.is_none() && !died_early(st) => {
            let newest = a.newest.map_or("none".to_string(), |t| t.0.to_string());
            step.acts.push(Act::Event(Note {
                warning: true,
                reason: "SamplesIncomplete".into(),
                text: format!(
                    "collected with Prometheus' samples of the pod ending at {newest}, before the window's end: none arrived after {}",
                    a.advanced_at.0
                ),
            }));
            format!("{summary}; the samples end at {newest}, before the window's end")
        }
        _ => summary,
    };
    let text = with_reason(st, summary);
    st.results = Some(results);
    finish(st, Some(outcome), text, now);
    step.requeue = Some(Duration::from_secs(1));
}

/// A finished trial whose window is read again (its `valtune.dev/collect` annotation
/// changed): results and a verdict missing for want of data are cleared, an outcome the
/// pod itself gave (an OOM kill, a crash, a timeout, an abort) stays.
pub(super) fn collect_again(step: &mut Step, s: &Settings) {
    let st = &mut step.status;
    st.collected_for = s.recollect.clone();
    step.requeue = Some(Duration::from_secs(1));
    if st.window_start.is_none() || st.window_end.is_none() {
        st.message = Some("nothing to collect again: the trial has no measurement window".into());
        return;
    }
    if matches!(
        st.outcome,
        Some(TrialOutcome::MetricsUnavailable | TrialOutcome::Unobserved) | None
    ) {
        st.outcome = None;
    }
    st.phase = TrialPhase::Collecting;
    st.collect_attempts = 0;
    st.blind_since = None;
    st.arrivals = None;
    st.finished_at = None;
    st.results = None;
    st.message = Some(format!(
        "collecting the window again ({}={})",
        crate::api::labels::COLLECT,
        s.recollect.clone().unwrap_or_default()
    ));
}

/// What collection found, with the reason the trial stopped when it stopped early (abort,
/// OOM kill, crash, timeout: the message set then).
pub(super) fn with_reason(st: &ValidatorTrialStatus, found: String) -> String {
    match (&st.outcome, &st.message) {
        (Some(_), Some(why)) => format!("{found} ({why})"),
        _ => found,
    }
}

/// A finished trial releases its node at once (pod stopped, its volumes with it); the
/// stopped pod goes after ttlSecondsAfterFinished. Results stay in the trial.
pub(super) fn cleanup(step: &mut Step, s: &Settings, now: Timestamp) {
    let finished = step.status.finished_at.as_ref().map(|t| t.0).unwrap_or(now);
    let delete_at = finished + SignedDuration::from_secs(s.ttl_seconds);
    if s.ttl_seconds > 0 && now < delete_at {
        step.acts.push(Act::StopPods);
        step.requeue = Some(until(delete_at, now).max(Duration::from_secs(1)));
    } else {
        step.acts.push(Act::DeletePods);
    }
}
