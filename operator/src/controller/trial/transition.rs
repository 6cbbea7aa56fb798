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
        })
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
    /// Whether Prometheus has any sample of the pod's `up`.
    pub up: Option<Result<bool, String>>,
    pub lag: Option<Reading<f64>>,
    pub tps: Option<Reading<f64>>,
    /// One verdict per abort rule, in order.
    pub aborts: Vec<Verdict>,
    pub scraped: Option<Result<bool, String>>,
    /// At the window's end: scrapes of the pod in the last three steps before it, and
    /// since it.
    pub end_scrapes: Option<Result<(f64, f64), String>>,
    pub results: Option<Reading<TrialResults>>,
    /// Prometheus could not be read this pass (unreachable, restarting, failing): why.
    /// Nothing is judged on such a pass.
    pub blind: Option<String>,
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

#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub warning: bool,
    pub reason: String,
    pub text: String,
}

/// The outcome of a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub status: ValidatorTrialStatus,
    pub acts: Vec<Act>,
    /// When to look again; None waits for a change of the trial or its pod.
    pub requeue: Option<Duration>,
}

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
        },
        TrialPhase::WarmingUp => Needs::Follow {
            // Until the validator's first answer (which came through a scrape).
            scraped: st.answering_at.is_none(),
            lag: true,
            tps: s.from == WindowStart::FirstExecution,
            aborts: false,
            end: false,
        },
        TrialPhase::Measuring => Needs::Follow {
            scraped: false,
            lag: st.caught_up_at.is_none(),
            tps: false,
            aborts: s.abort_rules > 0,
            end: st.window_end.as_ref().is_some_and(|e| now >= e.0),
        },
        TrialPhase::Collecting => collect_needs(st, s, now),
        TrialPhase::Succeeded | TrialPhase::Failed => Needs::Finished,
    }
}

/// Whether the user asked for a finished trial's window to be collected again.
fn recollect_requested(st: &ValidatorTrialStatus, s: &Settings) -> bool {
    st.phase.is_finished() && s.recollect.is_some() && s.recollect != st.collected_for
}

fn collect_needs(st: &ValidatorTrialStatus, s: &Settings, now: Timestamp) -> Needs {
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
    let died = matches!(
        st.outcome,
        Some(TrialOutcome::OOMKilled | TrialOutcome::Crashed)
    );
    // Attempts are spaced in time from the window's end (restart-safe: both in status),
    // however often the trial is reconciled.
    let retry =
        SignedDuration::try_from((s.step * 2).max(Duration::from_secs(2))).unwrap_or_default();
    let next_attempt = end + grace + retry * st.collect_attempts;
    if now < next_attempt {
        return Needs::Wait(until(next_attempt, now).max(Duration::from_millis(500)));
    }
    Needs::Collect {
        check_scraped: !died && now < end + grace * 5,
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
        Some(Err(e)) => finish(st, None, format!("cannot render the pod: {e}"), now),
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

/// While Prometheus cannot be read nothing is judged (no warm-up verdict, no abort rule,
/// no window end): the trial waits, up to trial.collectionDeadline, and then ends
/// Unobserved. When Prometheus answers again, the warm-up deadline and the window's end
/// move by the time it was away. True while blind.
fn blind(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) -> bool {
    let st = &mut step.status;
    match (&obs.blind, st.blind_since.clone()) {
        (None, None) => false,
        (None, Some(since)) => {
            let away = now.duration_since(since.0);
            st.blind_seconds += away.as_secs_f64();
            st.blind_since = None;
            st.message = Some(format!(
                "Prometheus answers again after {}s away{}",
                away.as_secs(),
                if st.phase == TrialPhase::WarmingUp {
                    "; the warm-up deadline moved by as much"
                } else {
                    ""
                }
            ));
            false
        }
        (Some(why), since) => {
            let since = since.map(|t| t.0).unwrap_or(now);
            if st.blind_since.is_none() {
                st.blind_since = Some(Time(now));
                step.acts.push(Act::Event(Note {
                    warning: true,
                    reason: "PrometheusUnreachable".into(),
                    text: format!(
                        "cannot read Prometheus at {}; warm-up, abort rules and the window are paused until it answers (at most {}): {why}",
                        s.prometheus_url, s.collection_deadline.1
                    ),
                }));
            }
            let away = now.duration_since(since);
            if away >= s.collection_deadline.0 {
                let phase = format!("{:?}", st.phase);
                finish(
                    st,
                    Some(TrialOutcome::Unobserved),
                    format!(
                        "Prometheus at {} was unreachable for {}s (since {since}) while the trial was {phase}, past trial.collectionDeadline ({}): nothing could be judged; last error: {why}",
                        s.prometheus_url,
                        away.as_secs(),
                        s.collection_deadline.1
                    ),
                    now,
                );
                step.acts.push(Act::DeletePods);
                step.requeue = Some(Duration::from_secs(1));
            } else {
                // No ticking figures here: the status is written when this changes.
                st.message = Some(format!(
                    "waiting for Prometheus at {} (unreachable since {since}); warm-up, abort rules and the window are paused: {why}",
                    s.prometheus_url
                ));
                step.requeue = Some(s.blind_backoff(away));
            }
            true
        }
    }
}

/// Ends the trial if Prometheus never scraped the pod in time (a PodMonitor its
/// Prometheus does not select is silently never scraped). True when it ended the trial.
fn unscraped(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) -> bool {
    let st = &mut step.status;
    if st.answering_at.is_some() || matches!(obs.up, Some(Ok(true))) {
        return false;
    }
    let started = st.started_at.as_ref().map(|t| t.0).unwrap_or(now);
    if now < started + s.scrape_deadline() || !matches!(obs.up, Some(Ok(false))) {
        return false;
    }
    let monitor = match &s.pod_monitor {
        Some(pm) => format!(
            "is PodMonitor {pm} selected by that Prometheus? (kube-prometheus-stack selects only PodMonitors labelled release=<its release>: set spec.metrics.podMonitorLabels)"
        ),
        None => "valtune creates no PodMonitor for it (spec.metrics.podMonitor is false, or the cluster has no PodMonitor kind): make that Prometheus scrape the trial's pods".into(),
    };
    finish(
        st,
        Some(TrialOutcome::MetricsUnavailable),
        format!(
            "Prometheus at {} has not scraped the trial's pod in the {}s since it started: {monitor}",
            s.prometheus_url,
            now.duration_since(started).as_secs()
        ),
        now,
    );
    step.acts.push(Act::DeletePods);
    step.requeue = Some(Duration::from_secs(1));
    true
}

/// The validator's first answer (its RPC, after the snapshot), from the first lag reading.
fn note_answering(st: &mut ValidatorTrialStatus, obs: &Observed, now: Timestamp) {
    if st.answering_at.is_none() && matches!(obs.lag, Some(Ok(Some(_)))) {
        st.answering_at = Some(Time(now));
    }
}

fn warm_up(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    note_answering(st, obs, now);
    let started = st.started_at.as_ref().map(|t| t.0).unwrap_or(now);
    // The time Prometheus could not be read is not held against the validator.
    let deadline = started + s.warmup_timeout.0 + SignedDuration::from_secs_f64(st.blind_seconds);
    let lag = obs.lag.clone().and_then(|r| r.ok()).flatten();
    let unit = s.lag_unit.as_str();
    // The paper's window: from the first transaction processed, catch-up included.
    if s.from == WindowStart::FirstExecution
        && let Some(Ok(Some(tps))) = &obs.tps
        && *tps > 0.0
    {
        let end = now + s.measurement;
        st.first_execution_at = Some(Time(now));
        st.window_start = Some(Time(now));
        st.window_end = Some(Time(end));
        if lag.is_some_and(|l| l <= s.max_lag) {
            st.caught_up_at = Some(Time(now));
        }
        st.phase = TrialPhase::Measuring;
        st.lag = None;
        st.message = Some(format!(
            "processing transactions ({} {unit} behind); measuring from the first execution until {end}",
            lag.map(|l| l.to_string())
                .unwrap_or_else(|| "unknown".into())
        ));
        step.requeue = Some(until(end, now).min(s.step * 2));
        return;
    }
    if s.from == WindowStart::CaughtUp
        && let Some(lag) = lag
        && lag <= s.max_lag
    {
        let end = now + s.measurement;
        st.caught_up_at = Some(Time(now));
        st.window_start = Some(Time(now));
        st.window_end = Some(Time(end));
        st.phase = TrialPhase::Measuring;
        st.lag = None;
        st.message = Some(format!(
            "caught up after {}s ({lag} {unit} behind); measuring until {end}",
            now.duration_since(started).as_secs()
        ));
        step.requeue = Some(until(end, now).min(s.step * 2));
        return;
    }
    if now >= deadline {
        let what = match s.from {
            WindowStart::CaughtUp => "catch up",
            WindowStart::FirstExecution => "process a transaction",
        };
        st.outcome = Some(TrialOutcome::TimedOut);
        st.window_start = Some(Time(started));
        st.window_end = Some(Time(now));
        st.phase = TrialPhase::Collecting;
        st.message = Some(format!(
            "did not {what} within the warm-up limit of {} ({} {unit} behind)",
            s.warmup_timeout.1,
            lag.map(|l| l.to_string())
                .unwrap_or_else(|| "unknown".into())
        ));
        step.requeue = Some(Duration::from_secs(1));
        return;
    }
    // Progress for `kubectl describe`, refreshed now and then rather than every pass
    // (first a while after the start: a quick catch-up costs no write for it).
    if let Some(lag) = lag {
        let last = st.lag.as_ref().map(|r| r.at.0).unwrap_or(started);
        let due = now >= last + s.progress_every();
        if due {
            st.lag = Some(LagReading {
                value: lag,
                unit: unit.into(),
                at: Time(now),
            });
        }
    }
    step.requeue = Some(
        s.step
            .min(until(deadline, now))
            .max(Duration::from_millis(500)),
    );
}

fn measure(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    note_answering(st, obs, now);
    // Measuring from the first execution: catching up happens inside the window.
    if st.caught_up_at.is_none()
        && let Some(Ok(Some(lag))) = &obs.lag
        && *lag <= s.max_lag
    {
        st.caught_up_at = Some(Time(now));
    }
    let end = st.window_end.as_ref().map(|t| t.0).unwrap_or(now);
    for (i, verdict) in obs.aborts.iter().enumerate() {
        match verdict {
            Verdict::Fired(why) => {
                st.outcome = Some(TrialOutcome::Aborted);
                st.window_end = Some(Time(now));
                st.phase = TrialPhase::Collecting;
                st.message = Some(why.clone());
                step.requeue = Some(Duration::from_secs(1));
                return;
            }
            Verdict::Unknown(why) => step.acts.push(Act::Event(Note {
                warning: true,
                reason: "AbortRuleUnavailable".into(),
                text: format!("abort rule {} cannot be judged: {why}", i + 1),
            })),
            Verdict::Holds | Verdict::TooEarly | Verdict::Blind(_) => {}
        }
    }
    if now >= end {
        // The verdict needs the window's end observed: if Prometheus scraped nothing just
        // before it (it was away), the window ends at its first scrape since, when the
        // validator's state is seen again (the pod runs on until the trial is collected).
        match &obs.end_scrapes {
            Some(Ok((at_end, _))) if *at_end > 0.0 => {
                st.phase = TrialPhase::Collecting;
                st.message = Some("window ended; waiting for Prometheus to scrape past it".into());
                step.requeue = Some(s.step);
            }
            Some(Ok((_, since))) if *since > 0.0 => {
                st.window_end = Some(Time(now));
                st.phase = TrialPhase::Collecting;
                st.message = Some(format!(
                    "Prometheus did not scrape the pod at the window's end ({end}); the window ends at {now}, when it scraped the pod again"
                ));
                step.requeue = Some(s.step);
            }
            Some(Ok(_)) if now >= end + s.collection_deadline.0 => {
                finish(
                    st,
                    Some(TrialOutcome::Unobserved),
                    format!(
                        "Prometheus at {} has not scraped the pod since before the window's end ({end}), past trial.collectionDeadline ({}): the end of the window cannot be judged",
                        s.prometheus_url, s.collection_deadline.1
                    ),
                    now,
                );
                step.acts.push(Act::DeletePods);
                step.requeue = Some(Duration::from_secs(1));
            }
            _ => step.requeue = Some(s.blind_backoff(now.duration_since(end))),
        }
        return;
    }
    let next = if s.abort_rules == 0 {
        until(end, now)
    } else {
        until(end, now).min(s.step * 2)
    };
    step.requeue = Some(next.max(Duration::from_millis(500)));
}

/// The pod is gone or its node is: retry on another node, or end NodeLost.
fn lost(step: &mut Step, s: &Settings, node: Option<String>, reason: String, now: Timestamp) {
    let node = node.or(step.status.node_name.clone());
    retry_or_fail(
        step,
        s,
        TrialOutcome::NodeLost,
        format!(
            "lost the validator on node {}: {reason}",
            node.clone().unwrap_or_else(|| "?".into())
        ),
        node,
        now,
    )
}

/// Starts the next attempt if retries are left; otherwise the trial fails with `outcome`.
fn retry_or_fail(
    step: &mut Step,
    s: &Settings,
    outcome: TrialOutcome,
    message: String,
    avoid: Option<String>,
    now: Timestamp,
) {
    step.acts.push(Act::DeletePods);
    step.requeue = Some(Duration::from_secs(1));
    let st = &mut step.status;
    if st.attempts <= s.retries {
        st.previous_attempts.push(AttemptRecord {
            attempt: st.attempts,
            outcome,
            node: avoid.clone().or(st.node_name.clone()),
            message: message.clone(),
            ended_at: Time(now),
        });
        if let Some(node) = avoid
            && !st.lost_nodes.contains(&node)
        {
            st.lost_nodes.push(node);
        }
        st.attempts += 1;
        st.phase = TrialPhase::Pending;
        st.node_name = None;
        st.scheduling_since = None;
        st.started_at = None;
        st.caught_up_at = None;
        st.answering_at = None;
        st.first_execution_at = None;
        st.window_start = None;
        st.window_end = None;
        st.outcome = None;
        st.lag = None;
        st.message = Some(format!(
            "{message}; retrying (attempt {} of {})",
            st.attempts,
            s.retries + 1
        ));
        return;
    }
    finish(
        st,
        Some(outcome),
        format!("{message}; no retries left ({})", s.retries),
        now,
    );
}

/// Collecting, when due: read the results.
fn collect(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
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
    if let Some(Ok(false) | Err(_)) = &obs.scraped {
        step.requeue = Some(s.step);
        return;
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
    let outcome = st.outcome.unwrap_or(match results.kept_up {
        Some(true) => TrialOutcome::KeptUp,
        _ => TrialOutcome::FellBehind,
    });
    let summary = format!("{}: {}", outcome.as_str(), (s.summary)(&results));
    let text = with_reason(st, summary);
    st.results = Some(results);
    finish(st, Some(outcome), text, now);
    step.requeue = Some(Duration::from_secs(1));
}

/// A finished trial whose window is read again (its `valtune.dev/collect` annotation
/// changed): results and a verdict missing for want of data are cleared, an outcome the
/// pod itself gave (an OOM kill, a crash, a timeout, an abort) stays.
fn collect_again(step: &mut Step, s: &Settings) {
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
fn with_reason(st: &ValidatorTrialStatus, found: String) -> String {
    match (&st.outcome, &st.message) {
        (Some(_), Some(why)) => format!("{found} ({why})"),
        _ => found,
    }
}

/// A finished trial releases its node at once (pod stopped, its volumes with it); the
/// stopped pod goes after ttlSecondsAfterFinished. Results stay in the trial.
fn cleanup(step: &mut Step, s: &Settings, now: Timestamp) {
    let finished = step.status.finished_at.as_ref().map(|t| t.0).unwrap_or(now);
    let delete_at = finished + SignedDuration::from_secs(s.ttl_seconds);
    if s.ttl_seconds > 0 && now < delete_at {
        step.acts.push(Act::StopPods);
        step.requeue = Some(until(delete_at, now).max(Duration::from_secs(1)));
    } else {
        step.acts.push(Act::DeletePods);
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
