//! The trial reconciler: one attempt at a time, Pending -> Scheduling -> WarmingUp ->
//! Measuring -> Collecting -> Succeeded | Failed.
//!
//! Each pass reads the pod from the API server (not a cache: deciding that a pod is gone
//! on a stale read would start a needless retry), classifies it (pure), and moves the
//! phase on. Deadlines are computed from status timestamps, never kept in memory.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::status::{apply_status, condition};
use super::{Context, Error, MANAGER, Result, now};
use crate::api::labels;
use crate::api::settings::{AbortMetric, parse_duration};
use crate::api::trial::{
    AttemptRecord, TrialOutcome, TrialPhase, ValidatorTrial, ValidatorTrialStatus,
};
use crate::clients::{self, pod::pod_name};
use crate::metrics::analysis::{self, Series, Window};
use crate::metrics::prometheus::Prometheus;

/// Collection attempts that find no data before the trial is MetricsUnavailable.
pub const MAX_COLLECT_ATTEMPTS: i32 = 10;

/// What the validator's pod is doing, as far as the trial cares.
#[derive(Debug, Clone, PartialEq)]
pub enum PodState {
    /// No pod (never created, or deleted).
    Missing,
    /// The pod is being deleted, was garbage-collected, or its node is gone.
    Lost {
        node: Option<String>,
        reason: String,
    },
    /// Not running yet; `unschedulable` quotes the scheduler when it cannot place it.
    Waiting {
        unschedulable: Option<String>,
    },
    Running {
        node: String,
        started_at: Timestamp,
    },
    /// The validator container exited (OOMKilled, Error, ...).
    Exited {
        node: Option<String>,
        reason: String,
        exit_code: i32,
        finished_at: Timestamp,
    },
}

/// Classifies a pod. `node_exists` is whether the pod's node still exists (None if the
/// pod has no node yet or it was not checked).
pub fn classify(pod: Option<&Pod>, validator: &str, node_exists: Option<bool>) -> PodState {
    let Some(pod) = pod else {
        return PodState::Missing;
    };
    let spec_node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.clone().unwrap_or_default();
    if let Some(c) = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    {
        return PodState::Lost {
            node: spec_node,
            reason: format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            ),
        };
    }
    if node_exists == Some(false) {
        return PodState::Lost {
            reason: format!(
                "node {} no longer exists",
                spec_node.clone().unwrap_or_default()
            ),
            node: spec_node,
        };
    }
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == validator);
    if let Some(state) = container.and_then(|c| c.state.as_ref()) {
        if let Some(t) = &state.terminated {
            return PodState::Exited {
                node: spec_node,
                reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
                exit_code: t.exit_code,
                finished_at: t.finished_at.as_ref().map(|t| t.0).unwrap_or_else(now),
            };
        }
        if let (Some(r), Some(node)) = (&state.running, &spec_node) {
            return PodState::Running {
                node: node.clone(),
                started_at: r.started_at.as_ref().map(|t| t.0).unwrap_or_else(now),
            };
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Lost {
            node: spec_node,
            reason: "the pod was deleted".into(),
        };
    }
    if matches!(status.phase.as_deref(), Some("Failed") | Some("Succeeded")) {
        return PodState::Exited {
            node: spec_node,
            reason: status.reason.unwrap_or_else(|| "Error".into()),
            exit_code: -1,
            finished_at: now(),
        };
    }
    let unschedulable = conditions
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| c.message.clone().unwrap_or_default());
    PodState::Waiting { unschedulable }
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

pub fn error_policy(trial: Arc<ValidatorTrial>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile_error("trial", err.kind());
    warn!(trial = %trial.name_any(), error = %err, "trial reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

fn secs(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}

fn until(deadline: Timestamp, now: Timestamp) -> Duration {
    secs(deadline.duration_since(now))
}

fn parse(d: &str) -> Result<SignedDuration> {
    let std = parse_duration(d).map_err(|e| Error::Invalid(e.to_string()))?;
    SignedDuration::try_from(std).map_err(|e| Error::Invalid(e.to_string()))
}

/// The step Prometheus samples at (the scrape interval).
fn step(trial: &ValidatorTrial) -> Result<Duration> {
    parse_duration(&trial.spec.metrics.scrape_interval).map_err(|e| Error::Invalid(e.to_string()))
}

fn prometheus(trial: &ValidatorTrial, ctx: &Context) -> Option<Prometheus> {
    trial
        .spec
        .metrics
        .prometheus_url
        .as_deref()
        .or(ctx.prometheus_url.as_deref())
        .map(Prometheus::new)
}

fn finish(
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

pub async fn reconcile(trial: Arc<ValidatorTrial>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started("trial");
    if trial.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = trial.namespace().unwrap_or_default();
    let api: Api<ValidatorTrial> = Api::namespaced(ctx.client.clone(), &ns);
    let old = trial.status.clone().unwrap_or_default();
    let mut st = old.clone();
    st.observed_generation = trial.metadata.generation;
    st.point = Some(trial.spec.point.describe());
    let now = now();

    let action = match old.phase {
        TrialPhase::Pending => start_attempt(&trial, &ctx, &mut st, now).await?,
        TrialPhase::Scheduling | TrialPhase::WarmingUp | TrialPhase::Measuring => {
            follow(&trial, &ctx, &mut st, now).await?
        }
        TrialPhase::Collecting => collect(&trial, &ctx, &mut st, now).await?,
        TrialPhase::Succeeded | TrialPhase::Failed => cleanup(&trial, &ctx, &st, now).await?,
    };

    st.conditions = conditions(&trial, &st, now);
    if st != old {
        apply_status(&api, &trial, &st).await?;
        if st.phase != old.phase || st.outcome != old.outcome {
            announce(&trial, &ctx, &old, &st).await;
        }
    }
    Ok(action)
}

/// Pending: render and apply the attempt's claims and pod.
async fn start_attempt(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &mut ValidatorTrialStatus,
    now: Timestamp,
) -> Result<Action> {
    if prometheus(trial, ctx).is_none() {
        finish(
            st,
            Some(TrialOutcome::MetricsUnavailable),
            "no Prometheus to read results from: start the operator with --prometheus-url or set spec.metrics.prometheusUrl".into(),
            now,
        );
        return Ok(Action::await_change());
    }
    let attempt = st.attempts.max(1);
    let rendered = match clients::render(trial, attempt, &st.lost_nodes) {
        Ok(r) => r,
        Err(e) => {
            finish(st, None, format!("cannot render the pod: {e}"), now);
            return Ok(Action::await_change());
        }
    };
    let ns = trial.namespace().unwrap_or_default();
    let pp = PatchParams::apply(MANAGER).force();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    for pvc in &rendered.pvcs {
        pvcs.patch(&pvc.name_any(), &pp, &Patch::Apply(pvc)).await?;
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    pods.patch(&rendered.pod.name_any(), &pp, &Patch::Apply(&rendered.pod))
        .await?;
    st.attempts = attempt;
    st.phase = TrialPhase::Scheduling;
    st.scheduling_since = Some(Time(now));
    st.message = Some(format!(
        "attempt {attempt}: pod {} created",
        rendered.pod.name_any()
    ));
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Scheduling, WarmingUp, Measuring: follow the pod.
async fn follow(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &mut ValidatorTrialStatus,
    now: Timestamp,
) -> Result<Action> {
    let ns = trial.namespace().unwrap_or_default();
    let name = trial.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = pods.get_opt(&pod_name(&name, st.attempts.max(1))).await?;
    let node_exists = match pod
        .as_ref()
        .and_then(|p| p.spec.as_ref()?.node_name.clone())
    {
        Some(node) => Some(
            Api::<Node>::all(ctx.client.clone())
                .get_opt(&node)
                .await?
                .is_some(),
        ),
        None => None,
    };
    let profile = clients::profile(trial)?;
    let state = classify(pod.as_ref(), profile.validator_container, node_exists);
    let step = step(trial)?;
    let settings = &trial.spec.settings;

    match (st.phase, state) {
        (
            _,
            PodState::Exited {
                node,
                reason,
                exit_code,
                finished_at,
            },
        ) => {
            let outcome = if reason == "OOMKilled" {
                TrialOutcome::OOMKilled
            } else {
                TrialOutcome::Crashed
            };
            if st.node_name.is_none() {
                st.node_name = node;
            }
            st.outcome = Some(outcome);
            // An OOM kill or crash is a result: measure what ran, up to the exit.
            let start = st
                .window_start
                .clone()
                .or(st.started_at.clone())
                .map(|t| t.0)
                .unwrap_or(finished_at);
            st.window_start = Some(Time(start));
            st.window_end = Some(Time(finished_at.max(start)));
            st.phase = TrialPhase::Collecting;
            st.message = Some(format!(
                "the validator exited ({reason}, exit code {exit_code}) at {finished_at}; collecting what was measured"
            ));
            Ok(Action::requeue(Duration::from_secs(1)))
        }
        (_, PodState::Missing) => {
            lost(trial, ctx, st, None, "the pod disappeared".into(), now).await
        }
        (_, PodState::Lost { node, reason }) => lost(trial, ctx, st, node, reason, now).await,
        (TrialPhase::Scheduling, PodState::Waiting { unschedulable }) => {
            let since = st.scheduling_since.clone().map(|t| t.0).unwrap_or(now);
            let deadline = since + parse(&settings.scheduling_timeout)?;
            match unschedulable {
                Some(reason) if now >= deadline => {
                    retry_or_fail(
                        trial,
                        ctx,
                        st,
                        TrialOutcome::Unschedulable,
                        format!(
                            "no node could run the pod within {}: {reason}",
                            settings.scheduling_timeout
                        ),
                        None,
                        now,
                    )
                    .await
                }
                Some(reason) => {
                    st.message = Some(format!("waiting for a node: {reason}"));
                    Ok(Action::requeue(
                        until(deadline, now).clamp(Duration::from_secs(1), Duration::from_secs(10)),
                    ))
                }
                None => Ok(Action::requeue(Duration::from_secs(2))),
            }
        }
        (TrialPhase::Scheduling, PodState::Running { node, started_at }) => {
            st.node_name = Some(node.clone());
            st.started_at = Some(Time(started_at));
            st.phase = TrialPhase::WarmingUp;
            st.message = Some(format!(
                "running on {node}; warming up until caught up with the chain"
            ));
            Ok(Action::requeue(step))
        }
        (TrialPhase::WarmingUp, PodState::Running { .. }) => {
            let started = st.started_at.clone().map(|t| t.0).unwrap_or(now);
            let deadline = started + parse(&settings.warmup.timeout)?;
            let lag = slot_lag(trial, ctx).await;
            if let Some(lag) = lag
                && lag <= settings.warmup.max_slot_lag as f64
            {
                let end = now + parse(&settings.measurement.duration)?;
                st.caught_up_at = Some(Time(now));
                st.window_start = Some(Time(now));
                st.window_end = Some(Time(end));
                st.phase = TrialPhase::Measuring;
                st.message = Some(format!(
                    "caught up after {}s (slot lag {lag}); measuring until {end}",
                    now.duration_since(started).as_secs()
                ));
                return Ok(Action::requeue(until(end, now).min(step * 2)));
            }
            if now >= deadline {
                st.outcome = Some(TrialOutcome::TimedOut);
                st.window_start = Some(Time(started));
                st.window_end = Some(Time(now));
                st.phase = TrialPhase::Collecting;
                st.message = Some(format!(
                    "did not catch up within the warm-up limit of {} (slot lag {})",
                    settings.warmup.timeout,
                    lag.map(|l| l.to_string())
                        .unwrap_or_else(|| "unknown".into())
                ));
                return Ok(Action::requeue(Duration::from_secs(1)));
            }
            st.message = Some(format!(
                "warming up: slot lag {}, limit {} at {deadline}",
                lag.map(|l| l.to_string())
                    .unwrap_or_else(|| "not reported yet".into()),
                settings.warmup.timeout
            ));
            Ok(Action::requeue(
                step.min(until(deadline, now))
                    .max(Duration::from_millis(500)),
            ))
        }
        (TrialPhase::Measuring, PodState::Running { .. }) => {
            let end = st.window_end.clone().map(|t| t.0).unwrap_or(now);
            if let Some(message) = abort_check(trial, ctx, st, now).await {
                st.outcome = Some(TrialOutcome::Aborted);
                st.window_end = Some(Time(now));
                st.phase = TrialPhase::Collecting;
                st.message = Some(message);
                return Ok(Action::requeue(Duration::from_secs(1)));
            }
            if now >= end {
                st.phase = TrialPhase::Collecting;
                st.message = Some("window ended; waiting for Prometheus to scrape past it".into());
                return Ok(Action::requeue(step));
            }
            let next = if settings.abort_when.is_empty() {
                until(end, now)
            } else {
                until(end, now).min(step * 2)
            };
            Ok(Action::requeue(next.max(Duration::from_millis(500))))
        }
        // Waiting while warming up or measuring cannot happen without a restart of the
        // pod, which restartPolicy Never rules out; look again shortly.
        _ => Ok(Action::requeue(Duration::from_secs(2))),
    }
}

async fn slot_lag(trial: &ValidatorTrial, ctx: &Context) -> Option<f64> {
    let prom = prometheus(trial, ctx)?;
    let profile = clients::profile(trial).ok()?;
    let sel = selector(trial);
    let q = analysis::expand(profile.queries.get("slotLag")?, &sel, step(trial).ok()?);
    match prom.value(&q, None).await {
        Ok(v) => v,
        Err(e) => {
            warn!(trial = %trial.name_any(), error = %e, "reading slot lag");
            None
        }
    }
}

fn selector(trial: &ValidatorTrial) -> String {
    let attempt = trial
        .status
        .as_ref()
        .map(|s| s.attempts)
        .unwrap_or(1)
        .max(1);
    analysis::selector(
        &trial.namespace().unwrap_or_default(),
        &pod_name(&trial.name_any(), attempt),
    )
}

/// Whether an abort rule fired: its metric stayed beyond the bound for the whole `for`.
async fn abort_check(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &ValidatorTrialStatus,
    now: Timestamp,
) -> Option<String> {
    let rules = &trial.spec.settings.abort_when;
    if rules.is_empty() {
        return None;
    }
    let prom = prometheus(trial, ctx)?;
    let profile = clients::profile(trial).ok()?;
    let step = step(trial).ok()?;
    let sel = selector(trial);
    let window_start = st.window_start.clone()?.0;
    for rule in rules {
        let hold = parse(&rule.for_).ok()?;
        // The bound must have held for the whole duration, inside the window.
        if now.duration_since(window_start) < hold {
            continue;
        }
        let name = match rule.metric {
            AbortMetric::SlotLag => "slotLag",
            AbortMetric::Tps => "tps",
            AbortMetric::RssBytes => "rssBytes",
            AbortMetric::MajorFaultsPerSecond => "majorFaultsPerSecond",
        };
        let series = analysis::expand(profile.queries.get(name)?, &sel, step);
        let range = format!(
            "[{}:{}]",
            analysis::promql_duration(secs(hold)),
            analysis::promql_duration(step)
        );
        let (query, bound, word) = match (rule.above, rule.below) {
            (Some(b), _) => (format!("min_over_time(({series}){range})"), b, "above"),
            (_, Some(b)) => (format!("max_over_time(({series}){range})"), b, "below"),
            _ => continue,
        };
        let samples = format!("count_over_time(({series}){range})");
        let want = (hold.as_secs_f64() / step.as_secs_f64()).floor() * 0.8;
        let (Ok(Some(v)), Ok(Some(n))) = (
            prom.value(&query, None).await,
            prom.value(&samples, None).await,
        ) else {
            continue;
        };
        // Require most of the samples: a gap in scraping is not evidence.
        let crossed = if word == "above" {
            v > bound
        } else {
            v < bound
        };
        if crossed && n >= want {
            return Some(format!(
                "aborted: {name} stayed {word} {bound} for {} (abortWhen)",
                rule.for_
            ));
        }
    }
    None
}

/// The pod is gone or its node is: retry on another node, or end NodeLost.
async fn lost(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &mut ValidatorTrialStatus,
    node: Option<String>,
    reason: String,
    now: Timestamp,
) -> Result<Action> {
    let node = node.or(st.node_name.clone());
    retry_or_fail(
        trial,
        ctx,
        st,
        TrialOutcome::NodeLost,
        format!(
            "lost the validator on node {}: {reason}",
            node.clone().unwrap_or_else(|| "?".into())
        ),
        node,
        now,
    )
    .await
}

/// Starts the next attempt if retries are left; otherwise the trial fails with `outcome`.
async fn retry_or_fail(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &mut ValidatorTrialStatus,
    outcome: TrialOutcome,
    message: String,
    avoid: Option<String>,
    now: Timestamp,
) -> Result<Action> {
    delete_children(trial, ctx, true).await?;
    let retries = trial.spec.settings.retries;
    if st.attempts <= retries {
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
        st.window_start = None;
        st.window_end = None;
        st.outcome = None;
        st.message = Some(format!(
            "{message}; retrying (attempt {} of {})",
            st.attempts,
            retries + 1
        ));
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    finish(
        st,
        Some(outcome),
        format!("{message}; no retries left ({retries})"),
        now,
    );
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Collecting: once Prometheus has scraped past the window, read the results.
async fn collect(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &mut ValidatorTrialStatus,
    now: Timestamp,
) -> Result<Action> {
    let step = step(trial)?;
    let (Some(start), Some(end)) = (st.window_start.clone(), st.window_end.clone()) else {
        finish(
            st,
            Some(TrialOutcome::MetricsUnavailable),
            "no measurement window was recorded".into(),
            now,
        );
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let Some(prom) = prometheus(trial, ctx) else {
        finish(
            st,
            Some(TrialOutcome::MetricsUnavailable),
            "no Prometheus URL".into(),
            now,
        );
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let sel = selector(trial);
    let window = Window {
        start: start.0,
        end: end.0,
        step,
    };
    // A pod that exited is not scraped any more: its last scrape is before the exit.
    // Otherwise wait (a while) for a scrape after the window's end.
    let died = matches!(
        st.outcome,
        Some(TrialOutcome::OOMKilled | TrialOutcome::Crashed)
    );
    let grace = SignedDuration::try_from(step * 2).unwrap_or_default();
    if now < window.end + grace {
        return Ok(Action::requeue(
            until(window.end + grace, now).max(Duration::from_millis(500)),
        ));
    }
    if !died
        && now < window.end + grace * 5
        && !analysis::scraped_since(&prom, &sel, window.end)
            .await
            .unwrap_or(false)
    {
        return Ok(Action::requeue(step));
    }
    // Attempts are spaced in time from the window's end (restart-safe: both in status),
    // however often the trial is reconciled.
    let retry =
        SignedDuration::try_from((step * 2).max(Duration::from_secs(2))).unwrap_or_default();
    let next_attempt = window.end + grace + retry * st.collect_attempts;
    if now < next_attempt {
        return Ok(Action::requeue(
            until(next_attempt, now).max(Duration::from_millis(500)),
        ));
    }
    let profile = clients::profile(trial)?;
    let series = Series::from_profile(&profile.queries, &sel, step).map_err(Error::Invalid)?;
    let max_lag = trial.spec.settings.warmup.max_slot_lag;
    // A failed attempt is retried; the message keeps saying why the trial stopped.
    let (results, error) = match analysis::collect(&prom, &series, &window, max_lag).await {
        Ok(r) => (r, None),
        Err(e) => {
            warn!(trial = %trial.name_any(), error = %e, "collecting results");
            (None, Some(e.to_string()))
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
                None => format!("Prometheus at {} had no samples", prom.url()),
            };
            let text = with_reason(
                st,
                format!(
                    "no results for pod {sel} in [{}, {}] after {MAX_COLLECT_ATTEMPTS} attempts: {found}",
                    window.start, window.end
                ),
            );
            finish(st, Some(outcome), text, now);
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        return Ok(Action::requeue(secs(retry)));
    };
    if let (Some(caught), Some(started)) = (&st.caught_up_at, &st.started_at) {
        results.catch_up_seconds = Some(caught.0.duration_since(started.0).as_secs_f64());
    }
    let outcome = st.outcome.unwrap_or(match results.kept_up {
        Some(true) => TrialOutcome::KeptUp,
        _ => TrialOutcome::FellBehind,
    });
    let summary = format!(
        "{}: avg {} TPS, max {} TPS, {}s at zero TPS, max RSS {} GiB",
        outcome.as_str(),
        fmt(results.avg_tps),
        fmt(results.max_tps),
        fmt(results.zero_tps_seconds),
        fmt(results.max_rss_gib)
    );
    let text = with_reason(st, summary);
    st.results = Some(results);
    finish(st, Some(outcome), text, now);
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// What collection found, with the reason the trial stopped when it stopped early (abort,
/// OOM kill, crash, timeout: the message set then).
fn with_reason(st: &ValidatorTrialStatus, found: String) -> String {
    match (&st.outcome, &st.message) {
        (Some(_), Some(why)) => format!("{found} ({why})"),
        _ => found,
    }
}

fn fmt(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// A finished trial releases its node at once (pod stopped, volumes deleted); the
/// stopped pod goes after ttlSecondsAfterFinished. Results stay in the trial.
async fn cleanup(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &ValidatorTrialStatus,
    now: Timestamp,
) -> Result<Action> {
    let ttl = trial.spec.settings.ttl_seconds_after_finished.unwrap_or(0);
    let finished = st.finished_at.clone().map(|t| t.0).unwrap_or(now);
    let delete_at = finished + SignedDuration::from_secs(ttl as i64);
    if ttl > 0 && now < delete_at {
        stop_pods(trial, ctx).await?;
        delete_children(trial, ctx, false).await?;
        return Ok(Action::requeue(
            until(delete_at, now).max(Duration::from_secs(1)),
        ));
    }
    delete_children(trial, ctx, true).await?;
    Ok(Action::await_change())
}

fn trial_selector(trial: &ValidatorTrial) -> ListParams {
    ListParams::default().labels(&format!("{}={}", labels::TRIAL, trial.name_any()))
}

/// Deletes the trial's volumes, and its pods too when `pods`.
async fn delete_children(trial: &ValidatorTrial, ctx: &Context, pods: bool) -> Result<()> {
    let ns = trial.namespace().unwrap_or_default();
    let lp = trial_selector(trial);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    for pvc in pvcs.list_metadata(&lp).await?.items {
        if pvc.metadata.deletion_timestamp.is_none() {
            ignore_gone(pvcs.delete(&pvc.name_any(), &DeleteParams::default()).await)?;
        }
    }
    if pods {
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        for pod in api.list_metadata(&lp).await?.items {
            if pod.metadata.deletion_timestamp.is_none() {
                ignore_gone(api.delete(&pod.name_any(), &DeleteParams::default()).await)?;
            }
        }
    }
    Ok(())
}

/// Stops running pods without deleting them (the kubelet kills a pod past its
/// activeDeadlineSeconds), so `kubectl logs` still works until the TTL.
async fn stop_pods(trial: &ValidatorTrial, ctx: &Context) -> Result<()> {
    let ns = trial.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for pod in api.list(&trial_selector(trial)).await?.items {
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let has_deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .is_some();
        if running && !has_deadline {
            let started = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.clone())
                .map(|t| t.0)
                .unwrap_or_else(now);
            let age = now().duration_since(started).as_secs().max(1);
            let patch = serde_json::json!({"spec": {"activeDeadlineSeconds": age}});
            ignore_gone(
                api.patch(
                    &pod.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map(|_| ()),
            )?;
        }
    }
    Ok(())
}

fn ignore_gone<T>(r: kube::Result<T>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

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
    vec![
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
            message,
            g,
            now,
        ),
    ]
}

/// An event for each phase change a user would look for.
async fn announce(
    trial: &ValidatorTrial,
    ctx: &Context,
    old: &ValidatorTrialStatus,
    new: &ValidatorTrialStatus,
) {
    ctx.metrics.trial_transition(&format!("{:?}", new.phase));
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
    info!(trial = %trial.name_any(), phase = ?new.phase, outcome = ?new.outcome, "{}", new.message.clone().unwrap_or_default());
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason,
        note: new.message.clone().map(|m| m.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &trial.object_ref(&())).await {
        warn!(error = %e, "publishing an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn no_pod_is_missing() {
        assert_eq!(classify(None, "validator", None), PodState::Missing);
    }

    #[test]
    fn an_oom_killed_validator_is_exited_with_the_reason() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: validator\n    image: x\n    imageID: ''\n    ready: false\n    restartCount: 0\n    state: {terminated: {reason: OOMKilled, exitCode: 137, finishedAt: '2026-01-01T00:00:09Z'}}\n  - name: rpc-exporter\n    image: x\n    imageID: ''\n    ready: true\n    restartCount: 0\n    state: {running: {startedAt: '2026-01-01T00:00:00Z'}}\n",
        );
        match classify(Some(&p), "validator", Some(true)) {
            PodState::Exited {
                reason,
                exit_code,
                finished_at,
                ..
            } => {
                assert_eq!(reason, "OOMKilled");
                assert_eq!(exit_code, 137);
                assert_eq!(finished_at, "2026-01-01T00:00:09Z".parse().unwrap());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn collection_keeps_the_reason_a_trial_stopped_early() {
        let mut st = ValidatorTrialStatus {
            outcome: Some(TrialOutcome::TimedOut),
            message: Some("did not catch up within the warm-up limit of 4h".into()),
            ..Default::default()
        };
        assert_eq!(
            with_reason(&st, "no results after 10 attempts".into()),
            "no results after 10 attempts (did not catch up within the warm-up limit of 4h)"
        );
        // A window that simply ended has no earlier reason to keep.
        st.outcome = None;
        assert_eq!(
            with_reason(&st, "KeptUp: avg 1 TPS".into()),
            "KeptUp: avg 1 TPS"
        );
    }

    #[test]
    fn only_an_oom_kill_is_a_measured_exit() {
        assert_eq!(exit_outcome("OOMKilled"), TrialOutcome::OOMKilled);
        assert!(exit_outcome("OOMKilled").is_result());
        for other in [
            "Error",
            "ContainerCannotRun",
            "DeadlineExceeded",
            "Completed",
        ] {
            assert_eq!(exit_outcome(other), TrialOutcome::Crashed);
            assert!(!exit_outcome(other).is_result());
        }
    }

    #[test]
    fn the_scheduler_reason_is_quoted() {
        let p = pod(
            "metadata: {name: p}\nspec: {containers: []}\nstatus:\n  phase: Pending\n  conditions:\n  - {type: PodScheduled, status: 'False', reason: Unschedulable, message: '0/4 nodes are available: 4 Insufficient hugepages-1Gi.'}\n",
        );
        assert_eq!(
            classify(Some(&p), "validator", None),
            PodState::Waiting {
                unschedulable: Some(
                    "0/4 nodes are available: 4 Insufficient hugepages-1Gi.".into()
                )
            }
        );
    }

    #[test]
    fn a_pod_whose_node_is_gone_is_lost() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: validator\n    image: x\n    imageID: ''\n    ready: true\n    restartCount: 0\n    state: {running: {startedAt: '2026-01-01T00:00:00Z'}}\n",
        );
        assert!(
            matches!(classify(Some(&p), "validator", Some(false)), PodState::Lost { node: Some(n), .. } if n == "n1")
        );
        assert_eq!(
            classify(Some(&p), "validator", Some(true)),
            PodState::Running {
                node: "n1".into(),
                started_at: "2026-01-01T00:00:00Z".parse().unwrap()
            }
        );
    }

    #[test]
    fn garbage_collected_pods_are_lost() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  conditions:\n  - {type: DisruptionTarget, status: 'True', reason: DeletionByPodGC, message: 'PodGC: node no longer exists'}\n",
        );
        assert!(matches!(
            classify(Some(&p), "validator", None),
            PodState::Lost { .. }
        ));
    }
}
