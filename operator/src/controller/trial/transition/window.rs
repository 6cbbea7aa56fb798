//! Warming up and measuring: the lag, the window, abort rules, and what a Prometheus
//! that cannot be read (blind) or does not scrape the pod does to them.

use super::*;

/// While Prometheus cannot be read nothing is judged (no warm-up verdict, no abort rule,
/// no window end): the trial waits, up to trial.collectionDeadline, and then ends
/// Unobserved. When Prometheus answers again, the warm-up deadline and the window's end
/// move by the time it was away. True while blind.
pub(super) fn blind(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) -> bool {
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
pub(super) fn unscraped(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) -> bool {
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

/// The validator's first answer (its RPC, after the snapshot), from the first lag reading,
/// dated by Prometheus' first sample of it where there is one: the catch-up it is
/// compared with is dated so too, so a pass that came late measures the same catch-up.
fn note_answering(st: &mut ValidatorTrialStatus, obs: &Observed, now: Timestamp) {
    if st.answering_at.is_none() && matches!(obs.lag, Some(Ok(Some(_)))) {
        let at = obs.first_answer.filter(|t| *t <= now).unwrap_or(now);
        st.answering_at = Some(Time(at));
    }
}

pub(super) fn warm_up(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    note_answering(st, obs, now);
    let started = st.started_at.as_ref().map(|t| t.0).unwrap_or(now);
    if st.first_scraped_at.is_none() {
        st.first_scraped_at = obs.first_scrape.map(Time);
    }
    // The time Prometheus could not see the pod (before its first scrape: discovery, a
    // new PodMonitor's configuration reload) or could not be read is not held against
    // the validator. A minute on a real cluster; at the lab's 720x, hours.
    let unseen = match (&st.first_scraped_at, &st.answering_at) {
        (Some(first), _) => first.0.duration_since(started).max(SignedDuration::ZERO),
        // It answered, so it was seen (a trial older than first_scraped_at).
        (None, Some(_)) => SignedDuration::ZERO,
        // Not scraped yet: nothing to judge (`unscraped` ends a pod never scraped).
        (None, None) => now.duration_since(started).max(SignedDuration::ZERO),
    };
    let deadline =
        started + s.warmup_timeout.0 + unseen + SignedDuration::from_secs_f64(st.blind_seconds);
    let lag = obs.lag.clone().and_then(|r| r.ok()).flatten();
    let unit = s.lag_unit.as_str();
    // Moments are dated by Prometheus' samples where it has them, so a pass that came late
    // (a busy operator, a restart) measures the same window as one that came on time; a
    // moment past the deadline does not count.
    // A catch-up once recorded (a paired side waiting for its partner) stays as recorded:
    // the partner chooses the pair's window from it, and a later pass may date it a
    // scrape later from the samples (the lab's pairs then measured a second apart).
    let caught_up = st
        .caught_up_at
        .as_ref()
        .map(|t| t.0)
        .or_else(|| first(&obs.caught_up, lag.is_some_and(|l| l <= s.max_lag), now))
        .filter(|at| *at <= deadline);
    // The paper's window: from the first transaction processed, catch-up included.
    if s.from == WindowStart::FirstExecution
        && let Some(first) = first(&obs.first_execution, false, now).filter(|at| *at <= deadline)
    {
        let end = first + s.measurement;
        st.first_execution_at = Some(Time(first));
        st.window_start = Some(Time(first));
        st.window_end = Some(Time(end));
        st.caught_up_at = caught_up.map(Time);
        st.phase = TrialPhase::Measuring;
        st.lag = None;
        st.message = Some(format!(
            "processing transactions since {first} ({} {unit} behind); measuring from the first execution until {end}",
            lag.map(|l| l.to_string())
                .unwrap_or_else(|| "unknown".into())
        ));
        step.requeue = Some(until(end, now).min(s.step * 2));
        return;
    }
    if s.from == WindowStart::CaughtUp
        && let Some(own) = caught_up
    {
        // A pair measures one window, from the later of the two catch-ups, so both see
        // the same chain (the paired design's point); a partner gone or ended without
        // catching up leaves this one to measure alone. It starts a scrape after that
        // catch-up: a window's first sample is the rate over the step before it, which
        // from the later catch-up itself would hold that side's last catch-up replay
        // (faster than the chain) and not its partner's (the lab's A/A pairs differed
        // by up to 12%, a sample being a tenth of their window). Both sides take the
        // catch-ups in whole seconds, as status keeps them (metav1.Time) and so as each
        // reads the other's, or their windows would be a fraction of a second apart, and
        // so a sample apart; a partner that chose the window already gives it as is.
        let at = match &obs.partner {
            Some(Partner::Waiting(partner)) => {
                st.caught_up_at = Some(Time(own));
                st.lag = lag.map(|value| LagReading {
                    value,
                    unit: unit.to_string(),
                    at: Time(now),
                });
                st.message = Some(format!(
                    "caught up after {}s (within {} {unit}); waiting for its pair's {partner} to catch up, so both measure one window",
                    own.duration_since(started).as_secs(),
                    s.max_lag
                ));
                step.requeue = Some(s.step);
                return;
            }
            Some(Partner::CaughtUp(theirs)) => {
                let whole = |t: Timestamp| Timestamp::from_second(t.as_second()).unwrap_or(t);
                whole(own).max(whole(*theirs)) + s.step_signed()
            }
            // A window from before this side caught up is not the pair's (a side run
            // again beside one that measured long ago): measure alone.
            Some(Partner::Measuring(start)) if *start >= own => *start,
            Some(Partner::Measuring(_) | Partner::Gone) | None => own,
        };
        let end = at + s.measurement;
        st.caught_up_at = Some(Time(own));
        st.window_start = Some(Time(at));
        st.window_end = Some(Time(end));
        st.phase = TrialPhase::Measuring;
        st.lag = None;
        st.message = Some(format!(
            "caught up after {}s (within {} {unit}); measuring {}until {end}",
            own.duration_since(started).as_secs(),
            s.max_lag,
            if at > own {
                format!("from {at}, a scrape after the later of its pair's catch-ups, ")
            } else {
                String::new()
            }
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
            "did not {what} within the warm-up limit of {}{} ({} {unit} behind)",
            s.warmup_timeout.1,
            if unseen.as_secs() > 0 {
                format!(
                    " from Prometheus' first scrape of the pod, {}s after it started",
                    unseen.as_secs()
                )
            } else {
                String::new()
            },
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

pub(super) fn measure(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) {
    let st = &mut step.status;
    note_answering(st, obs, now);
    // Measuring from the first execution: catching up happens inside the window.
    if st.caught_up_at.is_none() {
        let within = matches!(&obs.lag, Some(Ok(Some(lag))) if *lag <= s.max_lag);
        st.caught_up_at = first(&obs.caught_up, within, now).map(Time);
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
    if now < end && early(step, obs, s, now) {
        return;
    }
    let st = &mut step.status;
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
    let mut next = if s.abort_rules == 0 {
        until(end, now)
    } else {
        until(end, now).min(s.step * 2)
    };
    // Early abort judges from the data at each pass, the checks' moments included: a pass
    // every interval is enough, and from the first moment it may judge.
    if let (Some((rule, _)), Some(start)) = (&s.early, &st.window_start) {
        let secs = |t: Timestamp| t.as_millisecond() as f64 / 1000.0;
        let first = rule.first_judged(secs(start.0), secs(end));
        let wait = if secs(now) < first {
            first - secs(now)
        } else {
            rule.interval
        };
        next = next.min(Duration::from_secs_f64(wait.max(0.0)));
    }
    step.requeue = Some(next.max(Duration::from_millis(500)));
}

/// Early abort (trial.earlyAbort, results/early_abort.rs): a trial bound to end its
/// window behind ends now as FellBehind, with the figures that decided it. True when it
/// ended the window.
fn early(step: &mut Step, obs: &Observed, s: &Settings, now: Timestamp) -> bool {
    // A query Prometheus refuses would fail at every check: the trial runs its whole
    // window, and says why (a transient failure waits for the next check).
    if let Some(Err(e)) = &obs.early
        && !e.transient
    {
        step.acts.push(Act::Event(Note {
            warning: true,
            reason: "EarlyAbortUnavailable".into(),
            text: format!(
                "early abort cannot read the lag: {}; the trial measures its whole window",
                e.message
            ),
        }));
    }
    let st = &mut step.status;
    let (Some((rule, interval)), Some(Ok(series))) = (&s.early, &obs.early) else {
        return false;
    };
    let (Some(start), Some(end), Some(caught_up)) = (
        &st.window_start,
        &st.window_end,
        st.caught_up_at.as_ref().or(st.window_start.as_ref()),
    ) else {
        return false;
    };
    let secs = |t: Timestamp| t.as_millisecond() as f64 / 1000.0;
    let inputs = early_abort::Inputs {
        recent: &series.recent,
        warmup: &series.warmup,
        start: secs(start.0),
        end: secs(end.0),
        caught_up: secs(caught_up.0).max(secs(start.0)),
        now: secs(now),
        kept_up: s.max_lag,
        step: s.step.as_secs_f64(),
    };
    let Some(figures) = early_abort::judge(rule, &inputs, s.lag_unit.as_str()) else {
        return false;
    };
    let planned = end.0;
    st.outcome = Some(TrialOutcome::FellBehind);
    st.window_end = Some(Time(now));
    st.phase = TrialPhase::Collecting;
    st.message = Some(format!(
        "{}; the window ends now instead of at {planned}",
        early_abort::describe(&figures, s.max_lag, interval)
    ));
    st.early_abort = Some(figures);
    step.requeue = Some(Duration::from_secs(1));
    true
}

/// The moment something first happened: Prometheus' date for it when it has one, else now
/// when this pass saw it (`seen_now`), else not yet.
fn first(dated: &Option<Reading<Timestamp>>, seen_now: bool, now: Timestamp) -> Option<Timestamp> {
    match dated {
        Some(Ok(Some(at))) => Some((*at).min(now)),
        _ => seen_now.then_some(now),
    }
}
