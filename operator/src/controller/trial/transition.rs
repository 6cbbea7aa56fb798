//! The trial's state machine, pure: from (status, what was observed, settings, now) to the
//! next status, what to do, and when to look again. Pending -> Scheduling -> WarmingUp
//! -> Measuring -> Collecting -> Succeeded | Failed.
//!
//! [`needs`] says what a pass must observe; the reconciler observes exactly that, then
//! [`transition`] decides. Every deadline is computed from status timestamps, so the
//! same inputs give the same step whether or not the operator restarted in between.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::observe::PodState;
use crate::api::settings::{WindowStart, parse_duration};
use crate::api::trial::{
    AttemptRecord, LagReading, TrialOutcome, TrialPhase, TrialResults, ValidatorTrial,
    ValidatorTrialStatus,
};
use crate::clients::profile::{LagUnit, MetricProfile};
use crate::results::abort::Verdict;
use crate::results::early_abort;

mod collect;
mod retry;
mod window;

use collect::{cleanup, collect, collect_again, collect_needs, recollect_requested};
use retry::{lost, retry_or_fail};
use window::{blind, measure, unscraped, warm_up};

/// Collection attempts that find no data before the trial is MetricsUnavailable.
pub const MAX_COLLECT_ATTEMPTS: i32 = 10;

/// The trial's settings, parsed once per pass.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The scrape interval: one sample per step.
    pub step: Duration,
    pub scheduling_timeout: (SignedDuration, String),
    pub warmup_timeout: (SignedDuration, String),
    pub measurement: SignedDuration,
    pub retries: i32,
    /// Caught up (and kept up) at or below this lag.
    pub max_lag: f64,
    pub lag_unit: LagUnit,
    pub ttl_seconds: i64,
    /// Whether a Prometheus is configured to read results from.
    pub prometheus: bool,
    pub abort_rules: usize,
    /// The client's one-line summary of results.
    pub summary: fn(&TrialResults) -> String,
    /// Where the window starts.
    pub from: WindowStart,
    /// For messages: the Prometheus read from, and the PodMonitor that should make it
    /// scrape the trial's pod (namespace/name), if valtune creates one.
    pub prometheus_url: String,
    pub pod_monitor: Option<String>,
    /// How long to wait for an unreachable Prometheus.
    pub collection_deadline: (SignedDuration, String),
    /// The `valtune.dev/collect` annotation's value, if set.
    pub recollect: Option<String>,
    /// The series without which the trial has no result (its throughput, its lag), and
    /// the prefixes of those that arrive by remote write (from the client's profile).
    pub headline: std::collections::BTreeSet<String>,
    pub remote_written: Vec<&'static str>,
    /// trial.earlyAbort when enabled, and its interval as written (for messages).
    pub early: Option<(early_abort::Rule, String)>,
}

impl Settings {
    /// The settings of a trial whose client has `profile`. An error means the object
    /// bypassed the schema (durations are validated at admission).
    pub fn of(
        trial: &ValidatorTrial,
        profile: &MetricProfile,
        summary: fn(&TrialResults) -> String,
        prometheus_url: Option<&str>,
        pod_monitor: Option<String>,
    ) -> Result<Settings, String> {
        let s = &trial.spec.settings;
        let parse = |field: &str, v: &str| -> Result<(SignedDuration, String), String> {
            let d = parse_duration(v).map_err(|e| format!("{field}: {e}"))?;
            let d = SignedDuration::try_from(d).map_err(|e| format!("{field}: {e}"))?;
            Ok((d, v.to_string()))
        };
        Ok(Settings {
            step: parse_duration(&trial.spec.metrics.scrape_interval)
                .map_err(|e| format!("metrics.scrapeInterval: {e}"))?,
            scheduling_timeout: parse("trial.schedulingTimeout", &s.scheduling_timeout)?,
            warmup_timeout: parse("trial.warmup.timeout", &s.warmup.timeout)?,
            measurement: parse("trial.measurement.duration", &s.measurement.duration)?.0,
            retries: s.retries,
            max_lag: s.warmup.max_lag.unwrap_or(profile.default_max_lag) as f64,
            lag_unit: profile.lag_unit,
            ttl_seconds: s.ttl_seconds_after_finished.unwrap_or(0) as i64,
            prometheus: prometheus_url.is_some(),
            abort_rules: s.abort_when.len(),
            summary,
            from: s.measurement.from,
            prometheus_url: prometheus_url.unwrap_or_default().to_string(),
            pod_monitor,
            collection_deadline: parse("trial.collectionDeadline", &s.collection_deadline)?,
            recollect: trial
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::api::labels::COLLECT).cloned()),
            headline: profile.headline_series(),
            remote_written: profile.remote_written.clone(),
            early: early_rule(&s.early_abort)?,
        })
    }

    /// Whether a pass at `now` judges early abort: measuring, caught up, and past the
    /// first moment the rule may judge (before the window's end).
    fn judges_early(&self, st: &ValidatorTrialStatus, now: Timestamp) -> bool {
        let (Some((rule, _)), Some(_), Some(start), Some(end)) = (
            &self.early,
            &st.caught_up_at,
            &st.window_start,
            &st.window_end,
        ) else {
            return false;
        };
        let secs = |t: Timestamp| t.as_millisecond() as f64 / 1000.0;
        let now = secs(now);
        now < secs(end.0) && now >= rule.first_judged(secs(start.0), secs(end.0))
    }

    fn step_signed(&self) -> SignedDuration {
        SignedDuration::try_from(self.step).unwrap_or_default()
    }

    /// How often the lag reading in status is refreshed while warming up: often enough
    /// to follow a catch-up of hours, rarely enough to cost few writes.
    fn progress_every(&self) -> SignedDuration {
        (self.step_signed() * 10).max(SignedDuration::from_secs(300))
    }

    /// How long to wait before asking an unreachable Prometheus again: longer the longer
    /// it has been away (restart-safe: computed from status), from two scrapes to 5 min.
    fn blind_backoff(&self, blind_for: SignedDuration) -> Duration {
        (secs(blind_for) / 4)
            .max(self.step * 2)
            .max(Duration::from_secs(2))
            .min(Duration::from_secs(300))
    }

    /// How long after the pod starts Prometheus must have scraped it: a few reloads of
    /// its configuration and service discovery, 20 scrape intervals.
    pub fn scrape_deadline(&self) -> SignedDuration {
        self.step_signed() * 20
    }
}

/// trial.earlyAbort, parsed; None when disabled.
fn early_rule(
    e: &crate::api::settings::EarlyAbortSettings,
) -> Result<Option<(early_abort::Rule, String)>, String> {
    if !e.enabled {
        return Ok(None);
    }
    let secs = |field: &str, v: &str| {
        parse_duration(v)
            .map(|d| d.as_secs_f64())
            .map_err(|err| format!("trial.earlyAbort.{field}: {err}"))
    };
    Ok(Some((
        early_abort::Rule {
            checks: e.checks.max(1) as u32,
            interval: secs("interval", &e.interval)?,
            window: secs("window", &e.window)?,
            min_window_fraction: e.min_window_fraction,
            max_lag: e.max_lag.map(|m| m as f64),
        },
        e.interval.clone(),
    )))
}

/// A Prometheus answer: a value, no data, or Prometheus could not be asked.
pub type Reading<T> = Result<Option<T>, String>;

/// What a pass must observe.
#[derive(Debug, Clone, PartialEq)]
pub enum Needs {
    /// Nothing (the transition needs only status and settings).
    Nothing,
    /// Pending: whether the attempt renders.
    Render,
    /// Scheduling, WarmingUp, Measuring: the pod and its node; whether Prometheus has
    /// scraped it (until it has); the lag while warming up (and while measuring until
    /// caught up); the TPS while waiting for the first execution; the abort rules while
    /// measuring.
    Follow {
        scraped: bool,
        lag: bool,
        tps: bool,
        aborts: bool,
        /// The window has ended: was its end observed (scrapes just before it)?
        end: bool,
        /// The lag series early abort judges from.
        early: bool,
    },
    /// Collecting, when due: whether Prometheus scraped past the window (if asked), then
    /// the results.
    Collect { check_scraped: bool },
    /// Collecting, not due yet.
    Wait(Duration),
    /// Finished: nothing to read; cleanup acts.
    Finished,
}

/// What a pass observed (only what [`needs`] asked for is set).
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Pending: the attempt's pod name, or why it cannot be rendered.
    pub render: Option<Result<String, String>>,
    pub pod: Option<PodState>,
    /// Whether Prometheus has any sample of the pod's `up` since the pod started.
    pub up: Option<Result<bool, String>>,
    /// When Prometheus first scraped the pod (its first `up` sample since the pod started).
    pub first_scrape: Option<Timestamp>,
    /// When the lag series first had a sample since the pod started: the validator's
    /// first answer, dated by the data like the catch-up it is compared with.
    pub first_answer: Option<Timestamp>,
    pub lag: Option<Reading<f64>>,
    /// The first moment since the pod started that Prometheus' samples show the lag within
    /// `max_lag`: the catch-up is dated by the data, not by when the operator looked.
    pub caught_up: Option<Reading<Timestamp>>,
    /// The first moment since the pod started that it processed a transaction (TPS > 0).
    pub first_execution: Option<Reading<Timestamp>>,
    /// A paired trial's partner, while this one has no window yet: both measure one
    /// window, from the later catch-up. None: not paired.
    pub partner: Option<Partner>,
    /// One verdict per abort rule, in order.
    pub aborts: Vec<Verdict>,
    /// The lag series early abort judges from, or why it could not be read.
    pub early: Option<Result<early_abort::LagSeries, ReadError>>,
    /// Collecting: whether Prometheus has the pod's samples (scraped, then pushed) past
    /// the window's end, and the newest one it has.
    pub scraped: Option<Result<bool, String>>,
    pub newest_sample: Option<Timestamp>,
    /// At the window's end: scrapes of the pod in the last three steps before it, and
    /// since it.
    pub end_scrapes: Option<Result<(f64, f64), String>>,
    pub results: Option<Reading<TrialResults>>,
    /// Prometheus could not be read this pass (unreachable, restarting, failing): why.
    /// Nothing is judged on such a pass.
    pub blind: Option<String>,
    /// Before measuring: the node the pod is bound to, and why it cannot run the trial as
    /// measured (the client's [`crate::clients::ValidatorClient::node_shortfall`]).
    pub node_shortfall: Option<(String, String)>,
    /// At collection: the mean download seconds of the experiment's trials that
    /// downloaded their snapshot (what one started from a local snapshot saved).
    pub snapshot_reference: Option<f64>,
}

/// Where a paired trial's partner is, as this one decides its window.
#[derive(Debug, Clone, PartialEq)]
pub enum Partner {
    /// Still warming up: wait for it.
    Waiting(String),
    /// It caught up at this moment (dated by its samples).
    CaughtUp(Timestamp),
    /// It caught up and chose the pair's window, which starts at this moment: take it
    /// as it is (this side's catch-up, read again on a later pass, may have moved).
    Measuring(Timestamp),
    /// Gone, or ended without catching up: measure alone.
    Gone,
}

/// Something the reconciler does after the transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Render the attempt and apply its ConfigMaps and pod.
    StartAttempt {
        attempt: i32,
        avoid_nodes: Vec<String>,
    },
    /// Delete the trial's pods (their volumes go with them).
    DeletePods,
    /// Stop running pods without deleting them (kept for their logs until the TTL).
    StopPods,
    /// An event on the trial.
    Event(Note),
}

/// Why a Prometheus reading failed: a transient failure (Prometheus unreachable, a
/// timeout) waits for the next pass; any other (a query it refuses) is said.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadError {
    pub message: String,
    pub transient: bool,
}

pub use crate::controller::step::Note;

/// The outcome of a pass; None as its requeue waits for a change of the trial or its pod.
pub type Step = crate::controller::step::Step<ValidatorTrialStatus, Act>;

fn secs(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}

fn until(deadline: Timestamp, now: Timestamp) -> Duration {
    secs(deadline.duration_since(now))
}

/// What a pass in this status must observe. Pure.
pub fn needs(st: &ValidatorTrialStatus, s: &Settings, now: Timestamp) -> Needs {
    match st.phase {
        TrialPhase::Pending if s.prometheus => Needs::Render,
        TrialPhase::Pending => Needs::Nothing,
        TrialPhase::Scheduling => Needs::Follow {
            scraped: false,
            lag: false,
            tps: false,
            aborts: false,
            end: false,
            early: false,
        },
        TrialPhase::WarmingUp => Needs::Follow {
            // Until the validator's first answer (which came through a scrape).
            scraped: st.answering_at.is_none(),
            lag: true,
            tps: s.from == WindowStart::FirstExecution,
            aborts: false,
            end: false,
            early: false,
        },
        TrialPhase::Measuring => Needs::Follow {
            scraped: false,
            lag: st.caught_up_at.is_none(),
            tps: false,
            aborts: s.abort_rules > 0,
            end: st.window_end.as_ref().is_some_and(|e| now >= e.0),
            early: s.judges_early(st, now),
        },
        TrialPhase::Collecting => collect_needs(st, s, now),
        TrialPhase::Succeeded | TrialPhase::Failed => Needs::Finished,
    }
}

/// The next status, what to do, and when to look again. Pure.
pub fn transition(
    old: &ValidatorTrialStatus,
    obs: &Observed,
    s: &Settings,
    now: Timestamp,
) -> Step {
    let mut step = Step {
        status: old.clone(),
        acts: Vec::new(),
        requeue: None,
    };
    match needs(old, s, now) {
        Needs::Nothing if old.phase == TrialPhase::Pending => {
            finish(
                &mut step.status,
                Some(TrialOutcome::MetricsUnavailable),
                "no Prometheus to read results from: start the operator with --prometheus-url or set spec.metrics.prometheusUrl".into(),
                now,
            );
            step.requeue = Some(Duration::from_secs(1));
        }
        Needs::Render => start(&mut step, obs, now),
        Needs::Follow { .. } => follow(&mut step, obs, s, now),
        Needs::Nothing => {
            // Collecting without a window or a Prometheus: nothing can be read.
            let why = if s.prometheus {
                "no measurement window was recorded"
            } else {
                "no Prometheus URL"
            };
            finish(
                &mut step.status,
                Some(TrialOutcome::MetricsUnavailable),
                why.into(),
                now,
            );
            step.requeue = Some(Duration::from_secs(1));
        }
        Needs::Wait(d) => step.requeue = Some(d),
        Needs::Collect { .. } => collect(&mut step, obs, s, now),
        Needs::Finished if recollect_requested(old, s) => collect_again(&mut step, s),
        Needs::Finished => cleanup(&mut step, s, now),
    }
    step
}

/// Pending: apply the attempt's pod.
fn start(step: &mut Step, obs: &Observed, now: Timestamp) {
    let st = &mut step.status;
    let attempt = st.attempts.max(1);
    match &obs.render {
        Some(Ok(pod)) => {
            st.attempts = attempt;
            st.phase = TrialPhase::Scheduling;
            st.scheduling_since = Some(Time(now));
            st.message = Some(format!("attempt {attempt}: pod {pod} created"));
            step.acts.push(Act::StartAttempt {
                attempt,
                avoid_nodes: st.lost_nodes.clone(),
            });
            step.requeue = Some(Duration::from_secs(1));
        }
        // Rendering again cannot fix it: the trial cannot run as written.
        Some(Err(e)) => finish(
            st,
            Some(TrialOutcome::Invalid),
            format!("cannot render the pod: {e}"),
            now,
        ),
        None => step.requeue = Some(Duration::from_secs(1)),
    }
}

/// Ends the trial: a measured outcome succeeds, anything else fails.
pub fn finish(
    st: &mut ValidatorTrialStatus,
    outcome: Option<TrialOutcome>,
    message: String,
    now: Timestamp,
) {
    st.outcome = outcome;
    st.phase = match outcome {
        Some(o) if o.is_result() => TrialPhase::Succeeded,
        _ => TrialPhase::Failed,
    };
    st.message = Some(message);
    st.finished_at = Some(Time(now));
}

/// How a validator's exit ends its trial: an OOM kill is a measurement, any other exit
/// (an error, a signal, a deadline) is a crash.
pub fn exit_outcome(reason: &str) -> TrialOutcome {
    if reason == "OOMKilled" {
        TrialOutcome::OOMKilled
    } else {
        TrialOutcome::Crashed
    }
}

/// Scheduling, WarmingUp, Measuring: follow the pod.
fn follow(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let Some(pod) = &obs.pod else {
        step.requeue = Some(Duration::from_secs(1));
        return;
    };
    let st = &mut step.status;
    // What the node cannot give the trial ends it before anything is measured (a node
    // the admin must prepare, as a failed preflight; docs/clients/nodeos.md).
    if let (TrialPhase::Scheduling | TrialPhase::WarmingUp, Some((node, why))) =
        (st.phase, &obs.node_shortfall)
    {
        st.node_name = Some(node.clone());
        finish(
            st,
            Some(TrialOutcome::NodeNotPrepared),
            format!("node {node}: {why}"),
            now,
        );
        step.acts.push(Act::DeletePods);
        step.requeue = Some(Duration::from_secs(1));
        return;
    }
    match (st.phase, pod) {
        (
            _,
            PodState::Exited {
                node,
                reason,
                exit_code,
                finished_at,
                message,
            },
        ) => {
            if st.node_name.is_none() {
                st.node_name = node.clone();
            }
            st.outcome = Some(exit_outcome(reason));
            // An OOM kill or a crash is a result: measure what ran, up to the exit.
            let start = st
                .window_start
                .as_ref()
                .or(st.started_at.as_ref())
                .map(|t| t.0)
                .unwrap_or(*finished_at);
            st.window_start = Some(Time(start));
            st.window_end = Some(Time((*finished_at).max(start)));
            st.phase = TrialPhase::Collecting;
            let said = message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            st.message = Some(format!(
                "the validator exited ({reason}, exit code {exit_code}) at {finished_at}{said}; collecting what was measured"
            ));
            step.requeue = Some(Duration::from_secs(1));
        }
        (_, PodState::NotPrepared { node, message }) => {
            // Retrying cannot prepare the node: the cluster's admin must (docs/clients.md).
            if st.node_name.is_none() {
                st.node_name = node.clone();
            }
            let node = node
                .clone()
                .or(st.node_name.clone())
                .unwrap_or_else(|| "?".into());
            finish(
                st,
                Some(TrialOutcome::NodeNotPrepared),
                format!("node {node}: {message}"),
                now,
            );
            step.acts.push(Act::DeletePods);
            step.requeue = Some(Duration::from_secs(1));
        }
        (_, PodState::Missing) => lost(step, s, None, "the pod disappeared".into(), now),
        (_, PodState::Lost { node, reason }) => lost(step, s, node.clone(), reason.clone(), now),
        (TrialPhase::Scheduling, PodState::Waiting { unschedulable }) => {
            let since = st.scheduling_since.as_ref().map(|t| t.0).unwrap_or(now);
            let deadline = since + s.scheduling_timeout.0;
            match unschedulable {
                Some(reason) if now >= deadline => retry_or_fail(
                    step,
                    s,
                    TrialOutcome::Unschedulable,
                    format!(
                        "no node could run the pod within {}: {reason}",
                        s.scheduling_timeout.1
                    ),
                    None,
                    now,
                ),
                // A reason the scheduler gives for a moment (the pod's volumes being made)
                // is not worth a status write; one that lasts is.
                Some(_) if now < since + s.step_signed() * 5 => {
                    step.requeue = Some(s.step.max(Duration::from_secs(1)));
                }
                Some(reason) => {
                    st.message = Some(format!("waiting for a node: {reason}"));
                    step.requeue = Some(
                        until(deadline, now).clamp(Duration::from_secs(1), Duration::from_secs(10)),
                    );
                }
                None => step.requeue = Some(Duration::from_secs(2)),
            }
        }
        (TrialPhase::Scheduling, PodState::Running { node, started_at }) => {
            st.node_name = Some(node.clone());
            st.started_at = Some(Time(*started_at));
            st.phase = TrialPhase::WarmingUp;
            st.message = Some(format!(
                "running on {node}; warming up until at most {} {} behind (limit {})",
                s.max_lag,
                s.lag_unit.as_str(),
                s.warmup_timeout.1
            ));
            step.requeue = Some(s.step);
        }
        (TrialPhase::WarmingUp | TrialPhase::Measuring, PodState::Running { .. })
            if blind(step, obs, s, now) => {}
        (TrialPhase::WarmingUp | TrialPhase::Measuring, PodState::Running { .. })
            if unscraped(step, obs, s, now) => {}
        (TrialPhase::WarmingUp, PodState::Running { .. }) => warm_up(step, obs, s, now),
        (TrialPhase::Measuring, PodState::Running { .. }) => measure(step, obs, s, now),
        // Waiting while warming up or measuring cannot happen without a restart of the
        // pod, which restartPolicy Never rules out; look again shortly.
        _ => step.requeue = Some(Duration::from_secs(2)),
    }
}

/// The event for a change of phase or outcome a user would look for, if any: running on
/// a node, measuring, the outcome, a retry (not the steps in between: each event is a
/// write).
pub fn announcement(old: &ValidatorTrialStatus, new: &ValidatorTrialStatus) -> Option<Note> {
    if new.phase == old.phase && new.outcome == old.outcome {
        return None;
    }
    if matches!(new.phase, TrialPhase::Scheduling | TrialPhase::Collecting)
        && new.outcome == old.outcome
    {
        return None;
    }
    let warning = new.phase == TrialPhase::Failed
        || matches!(
            new.outcome,
            Some(TrialOutcome::FellBehind | TrialOutcome::OOMKilled | TrialOutcome::Aborted)
        )
        || (new.phase == TrialPhase::Pending && old.phase != TrialPhase::Pending);
    let reason = match (new.phase, new.outcome) {
        (TrialPhase::Collecting, _) if new.early_abort.is_some() && old.early_abort.is_none() => {
            "EarlyAbort".to_string()
        }
        (TrialPhase::Succeeded | TrialPhase::Failed, Some(o)) => o.as_str().to_string(),
        // A retry: the event is named after what ended the attempt (NodeLost, ...).
        (TrialPhase::Pending, _) if new.attempts > old.attempts.max(1) => new
            .previous_attempts
            .last()
            .map(|a| a.outcome.as_str().to_string())
            .unwrap_or_else(|| "Retrying".into()),
        (p, _) => format!("{p:?}"),
    };
    Some(Note {
        warning,
        reason,
        text: new.message.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests;
