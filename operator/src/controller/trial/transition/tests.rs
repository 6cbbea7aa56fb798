//! Table tests of the trial's state machine: every phase, every outcome, and the
//! deadlines computed from status timestamps.

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const T0: &str = "2026-01-01T00:00:00Z";

fn at(secs: i64) -> Timestamp {
    t(T0) + SignedDuration::from_secs(secs)
}

fn settings() -> Settings {
    Settings {
        step: Duration::from_secs(15),
        scheduling_timeout: (SignedDuration::from_mins(10), "10m".into()),
        warmup_timeout: (SignedDuration::from_hours(4), "4h".into()),
        measurement: SignedDuration::from_hours(12),
        retries: 2,
        max_lag: 100.0,
        lag_unit: LagUnit::Slots,
        ttl_seconds: 0,
        prometheus: true,
        abort_rules: 0,
        summary: crate::clients::profile::ram_summary,
        from: WindowStart::CaughtUp,
        prometheus_url: "http://prometheus:9090".into(),
        pod_monitor: Some("validators/agave-ram".into()),
        collection_deadline: (SignedDuration::from_hours(24), "24h".into()),
        recollect: None,
        headline: [
            "replay_slot_stats_total_transactions",
            "solana_node_num_slots_behind",
        ]
        .map(String::from)
        .into(),
        remote_written: vec!["replay_slot_stats_"],
        early: None,
    }
}

fn status(phase: TrialPhase) -> ValidatorTrialStatus {
    ValidatorTrialStatus {
        phase,
        attempts: if phase == TrialPhase::Pending { 0 } else { 1 },
        ..Default::default()
    }
}

fn running(started: i64) -> PodState {
    PodState::Running {
        node: "bm-01".into(),
        started_at: at(started),
    }
}

fn exited(reason: &str, code: i32, secs: i64) -> PodState {
    PodState::Exited {
        node: Some("bm-01".into()),
        reason: reason.into(),
        exit_code: code,
        finished_at: at(secs),
        message: None,
    }
}

fn with_pod(pod: PodState) -> Observed {
    Observed {
        pod: Some(pod),
        ..Default::default()
    }
}

fn warming(started: i64) -> ValidatorTrialStatus {
    ValidatorTrialStatus {
        node_name: Some("bm-01".into()),
        started_at: Some(Time(at(started))),
        ..status(TrialPhase::WarmingUp)
    }
}

fn measuring(start: i64, end: i64) -> ValidatorTrialStatus {
    ValidatorTrialStatus {
        caught_up_at: Some(Time(at(start))),
        window_start: Some(Time(at(start))),
        window_end: Some(Time(at(end))),
        ..warming(0)
    }
    .with_phase(TrialPhase::Measuring)
}

fn collecting(start: i64, end: i64, outcome: Option<TrialOutcome>) -> ValidatorTrialStatus {
    ValidatorTrialStatus {
        outcome,
        ..measuring(start, end)
    }
    .with_phase(TrialPhase::Collecting)
}

trait WithPhase {
    fn with_phase(self, p: TrialPhase) -> Self;
}

impl WithPhase for ValidatorTrialStatus {
    fn with_phase(mut self, p: TrialPhase) -> Self {
        self.phase = p;
        self
    }
}

fn results(final_lag: f64, kept_up: bool) -> TrialResults {
    TrialResults {
        avg_tps: Some(4600.0),
        final_lag: Some(final_lag),
        kept_up: Some(kept_up),
        ..Default::default()
    }
}

// ---- Pending ----------------------------------------------------------------------

#[test]
fn pending_applies_the_first_attempt() {
    let obs = Observed {
        render: Some(Ok("t-1".into())),
        ..Default::default()
    };
    let st = status(TrialPhase::Pending);
    assert_eq!(needs(&st, &settings(), at(0)), Needs::Render);
    let step = transition(&st, &obs, &settings(), at(0));
    assert_eq!(step.status.phase, TrialPhase::Scheduling);
    assert_eq!(step.status.attempts, 1);
    assert_eq!(step.status.scheduling_since, Some(Time(at(0))));
    assert_eq!(
        step.acts,
        vec![Act::StartAttempt {
            attempt: 1,
            avoid_nodes: vec![]
        }]
    );
}

#[test]
fn a_retry_avoids_the_lost_nodes() {
    let st = ValidatorTrialStatus {
        attempts: 2,
        lost_nodes: vec!["bm-01".into()],
        ..status(TrialPhase::Pending)
    };
    let obs = Observed {
        render: Some(Ok("t-2".into())),
        ..Default::default()
    };
    let step = transition(&st, &obs, &settings(), at(0));
    assert_eq!(
        step.acts,
        vec![Act::StartAttempt {
            attempt: 2,
            avoid_nodes: vec!["bm-01".into()]
        }]
    );
}

#[test]
fn a_pod_that_cannot_be_rendered_fails_the_trial() {
    let obs = Observed {
        render: Some(Err("no image has entries=2048".into())),
        ..Default::default()
    };
    let step = transition(&status(TrialPhase::Pending), &obs, &settings(), at(0));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    assert_eq!(step.status.outcome, Some(TrialOutcome::Invalid));
    assert!(
        step.status
            .message
            .unwrap()
            .contains("cannot render the pod")
    );
    assert!(step.acts.is_empty());
}

#[test]
fn without_a_prometheus_nothing_starts() {
    let s = Settings {
        prometheus: false,
        ..settings()
    };
    let st = status(TrialPhase::Pending);
    assert_eq!(needs(&st, &s, at(0)), Needs::Nothing);
    let step = transition(&st, &Observed::default(), &s, at(0));
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    assert!(step.status.message.unwrap().contains("--prometheus-url"));
    assert!(step.acts.is_empty());
}

// ---- Scheduling -------------------------------------------------------------------

fn scheduling(since: i64) -> ValidatorTrialStatus {
    ValidatorTrialStatus {
        scheduling_since: Some(Time(at(since))),
        ..status(TrialPhase::Scheduling)
    }
}

#[test]
fn scheduling_waits_quoting_the_scheduler_until_its_deadline() {
    let obs = with_pod(PodState::Waiting {
        unschedulable: Some("0/4 nodes are available".into()),
    });
    // A passing reason (the pod's volumes being made) is not written.
    let brief = transition(&scheduling(0), &obs, &settings(), at(30));
    assert_eq!(brief.status, scheduling(0));
    let step = transition(&scheduling(0), &obs, &settings(), at(90));
    assert_eq!(step.status.phase, TrialPhase::Scheduling);
    assert_eq!(
        step.status.message.as_deref(),
        Some("waiting for a node: 0/4 nodes are available")
    );
    assert_eq!(step.requeue, Some(Duration::from_secs(10)));

    // Past the deadline: a retry, then (no retries left) Unschedulable.
    let step = transition(&scheduling(0), &obs, &settings(), at(600));
    assert_eq!(step.status.phase, TrialPhase::Pending);
    assert_eq!(step.status.attempts, 2);
    assert_eq!(step.acts, vec![Act::DeletePods]);
    assert_eq!(
        step.status.previous_attempts[0].outcome,
        TrialOutcome::Unschedulable
    );
    let last = ValidatorTrialStatus {
        attempts: 3,
        ..scheduling(0)
    };
    let step = transition(&last, &obs, &settings(), at(600));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    assert_eq!(step.status.outcome, Some(TrialOutcome::Unschedulable));
    assert!(step.status.message.unwrap().contains(
        "no node could run the pod within 10m: 0/4 nodes are available; no retries left (2)"
    ));
}

#[test]
fn a_scheduled_pod_starts_the_warm_up() {
    let step = transition(&scheduling(0), &with_pod(running(5)), &settings(), at(7));
    assert_eq!(step.status.phase, TrialPhase::WarmingUp);
    assert_eq!(step.status.node_name.as_deref(), Some("bm-01"));
    assert_eq!(step.status.started_at, Some(Time(at(5))));
    assert!(
        step.status
            .message
            .unwrap()
            .contains("warming up until at most 100 slots behind")
    );
}

#[test]
fn a_lost_node_is_retried_elsewhere() {
    let obs = with_pod(PodState::Lost {
        node: Some("bm-02".into()),
        reason: "node bm-02 no longer exists".into(),
    });
    let step = transition(&warming(0), &obs, &settings(), at(100));
    assert_eq!(step.status.phase, TrialPhase::Pending);
    assert_eq!(step.status.lost_nodes, vec!["bm-02".to_string()]);
    assert_eq!(step.status.started_at, None);
    assert!(
        step.status
            .message
            .clone()
            .unwrap()
            .contains("retrying (attempt 2 of 3)")
    );
    let note = announcement(&warming(0), &step.status).unwrap();
    assert_eq!(note.reason, "NodeLost");
    assert!(note.warning);
}

#[test]
fn a_node_that_is_not_prepared_ends_the_trial_with_what_it_lacks() {
    let obs = with_pod(PodState::NotPrepared {
        node: Some("bm-03".into()),
        message: "the node is not prepared for Agave: vm.max_map_count is 65530 (needs 1000000);"
            .into(),
    });
    let step = transition(&scheduling(0), &obs, &settings(), at(5));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    assert_eq!(step.status.outcome, Some(TrialOutcome::NodeNotPrepared));
    assert_eq!(
        step.status.message.as_deref(),
        Some(
            "node bm-03: the node is not prepared for Agave: vm.max_map_count is 65530 (needs 1000000);"
        )
    );
    assert_eq!(step.acts, vec![Act::DeletePods]);
}

#[test]
fn a_node_short_of_what_the_trial_needs_ends_it_before_measuring() {
    let running = PodState::Running {
        node: "big-01".into(),
        started_at: at(3),
    };
    let obs = Observed {
        node_shortfall: Some((
            "big-01".into(),
            "the kubelet grants nodeos 1.5 GiB of swap".into(),
        )),
        ..with_pod(running)
    };
    for st in [scheduling(0), warming(3)] {
        let step = transition(&st, &obs, &settings(), at(5));
        assert_eq!(step.status.phase, TrialPhase::Failed);
        assert_eq!(step.status.outcome, Some(TrialOutcome::NodeNotPrepared));
        assert_eq!(
            step.status.message.as_deref(),
            Some("node big-01: the kubelet grants nodeos 1.5 GiB of swap")
        );
        assert_eq!(step.status.node_name.as_deref(), Some("big-01"));
        assert_eq!(step.acts, vec![Act::DeletePods]);
    }
    // Once measuring, what was measured stands.
    let step = transition(&measuring(10, 100), &obs, &settings(), at(50));
    assert_ne!(step.status.outcome, Some(TrialOutcome::NodeNotPrepared));
}

#[test]
fn a_pod_that_disappears_is_lost_too() {
    let step = transition(
        &measuring(10, 100),
        &with_pod(PodState::Missing),
        &settings(),
        at(50),
    );
    assert_eq!(
        step.status.previous_attempts[0].outcome,
        TrialOutcome::NodeLost
    );
    assert!(
        step.status.previous_attempts[0]
            .message
            .contains("the pod disappeared")
    );
}

// ---- WarmingUp --------------------------------------------------------------------

fn lag(v: Reading<f64>) -> Observed {
    Observed {
        lag: Some(v),
        ..with_pod(running(0))
    }
}

#[test]
fn catching_up_opens_the_window() {
    let step = transition(&warming(0), &lag(Ok(Some(40.0))), &settings(), at(3600));
    let st = step.status;
    assert_eq!(st.phase, TrialPhase::Measuring);
    assert_eq!(st.caught_up_at, Some(Time(at(3600))));
    assert_eq!(st.window_start, Some(Time(at(3600))));
    assert_eq!(st.window_end, Some(Time(at(3600 + 12 * 3600))));
    assert_eq!(step.requeue, Some(Duration::from_secs(30)));
}

#[test]
fn behind_the_chain_the_warm_up_goes_on_and_reports_progress_now_and_then() {
    let step = transition(&warming(0), &lag(Ok(Some(5000.0))), &settings(), at(600));
    assert_eq!(step.status.phase, TrialPhase::WarmingUp);
    let reading = step.status.lag.clone().unwrap();
    assert_eq!((reading.value, reading.unit.as_str()), (5000.0, "slots"));
    // A minute later the reading is not refreshed (no status write for it)...
    let later = transition(&step.status, &lag(Ok(Some(4000.0))), &settings(), at(660));
    assert_eq!(later.status.lag, step.status.lag);
    // ...five minutes later it is.
    let later = transition(&step.status, &lag(Ok(Some(3000.0))), &settings(), at(901));
    assert_eq!(later.status.lag.unwrap().value, 3000.0);
}

#[test]
fn an_unreadable_lag_is_no_verdict() {
    for reading in [Ok(None), Err("Prometheus is unreachable".to_string())] {
        let step = transition(&warming(0), &lag(reading), &settings(), at(600));
        assert_eq!(step.status.phase, TrialPhase::WarmingUp);
        assert_eq!(step.status.lag, None);
    }
}

#[test]
fn not_caught_up_by_the_deadline_times_out_and_measures_the_warm_up() {
    let step = transition(
        &warming(0),
        &lag(Ok(Some(5000.0))),
        &settings(),
        at(4 * 3600),
    );
    let st = step.status;
    assert_eq!(st.phase, TrialPhase::Collecting);
    assert_eq!(st.outcome, Some(TrialOutcome::TimedOut));
    assert_eq!(st.window_start, Some(Time(at(0))));
    assert_eq!(st.window_end, Some(Time(at(4 * 3600))));
    assert!(
        st.message
            .unwrap()
            .contains("did not catch up within the warm-up limit of 4h (5000 slots behind)")
    );
}

/// Prometheus saw the pod only a while after it started (service discovery, a new
/// PodMonitor's configuration reload: a minute on a real cluster, hours at the lab's
/// 720x on a busy machine). The warm-up limit counts from that first scrape, so a catch-up
/// first seen then is not TimedOut; a pod never scraped gets no warm-up verdict at all.
#[test]
fn the_warm_up_limit_counts_from_prometheus_first_scrape() {
    let seen = |caught: Option<i64>, lag_now: f64| Observed {
        up: Some(Ok(true)),
        first_scrape: Some(at(1800)),
        caught_up: Some(Ok(caught.map(at))),
        ..lag(Ok(Some(lag_now)))
    };
    // First scraped 30 minutes in, caught up at 4h10m: within 4h of the first scrape.
    let step = transition(
        &warming(0),
        &seen(Some(4 * 3600 + 600), 0.0),
        &settings(),
        at(4 * 3600 + 900),
    );
    assert_eq!(step.status.phase, TrialPhase::Measuring);
    assert_eq!(step.status.first_scraped_at, Some(Time(at(1800))));
    assert_eq!(step.status.window_start, Some(Time(at(4 * 3600 + 600))));
    // Still behind at 4h1m: not yet due.
    let step = transition(
        &warming(0),
        &seen(None, 5000.0),
        &settings(),
        at(4 * 3600 + 60),
    );
    assert_eq!(step.status.phase, TrialPhase::WarmingUp);
    // Behind at 4h30m: TimedOut, saying from when the limit counted.
    let step = transition(
        &step.status,
        &lag(Ok(Some(5000.0))),
        &settings(),
        at(4 * 3600 + 1800),
    );
    assert_eq!(step.status.outcome, Some(TrialOutcome::TimedOut));
    let msg = step.status.message.unwrap();
    assert!(msg.contains("within the warm-up limit of 4h from Prometheus' first scrape of the pod, 1800s after it started (5000 slots behind)"), "{msg}");
    // Never scraped: no TimedOut; the scrape check ends it for what it is.
    let unseen = Observed {
        up: Some(Ok(false)),
        ..with_pod(running(0))
    };
    let step = transition(&warming(0), &unseen, &settings(), at(4 * 3600 + 60));
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
}

/// The first answer is dated by the data too, so the catch-up between them does not
/// shrink when the operator looks late.
#[test]
fn the_first_answer_is_dated_by_the_data() {
    let late = Observed {
        first_answer: Some(at(600)),
        caught_up: Some(Ok(Some(at(3600)))),
        ..lag(Ok(Some(0.0)))
    };
    let step = transition(&warming(0), &late, &settings(), at(4000));
    assert_eq!(step.status.answering_at, Some(Time(at(600))));
    assert_eq!(step.status.caught_up_at, Some(Time(at(3600))));
    let undated = transition(&warming(0), &lag(Ok(Some(900.0))), &settings(), at(700));
    assert_eq!(undated.status.answering_at, Some(Time(at(700))));
}

/// The catch-up is dated by Prometheus' samples, not by when the operator looked: a pass
/// that comes late (a busy or restarted operator) opens the same window.
#[test]
fn the_catch_up_is_dated_by_the_data_not_by_the_look() {
    let dated = |caught: i64, lag_now: f64| Observed {
        caught_up: Some(Ok(Some(at(caught)))),
        ..lag(Ok(Some(lag_now)))
    };
    // Caught up at 1h, seen at 1h10m while already behind again (a hog took its memory).
    let step = transition(&warming(0), &dated(3600, 900.0), &settings(), at(4200));
    let st = step.status;
    assert_eq!(st.phase, TrialPhase::Measuring);
    assert_eq!(st.caught_up_at, Some(Time(at(3600))));
    assert_eq!(st.window_start, Some(Time(at(3600))));
    assert_eq!(st.window_end, Some(Time(at(3600 + 12 * 3600))));
    // Seen only past the deadline, a catch-up before it still counts...
    let late = transition(
        &warming(0),
        &dated(4 * 3600 - 60, 900.0),
        &settings(),
        at(4 * 3600 + 600),
    );
    assert_eq!(late.status.phase, TrialPhase::Measuring);
    assert_eq!(late.status.caught_up_at, Some(Time(at(4 * 3600 - 60))));
    // ...and one after it does not.
    let after = transition(
        &warming(0),
        &dated(4 * 3600 + 60, 0.0),
        &settings(),
        at(4 * 3600 + 600),
    );
    assert_eq!(after.status.outcome, Some(TrialOutcome::TimedOut));
}

#[test]
fn an_oom_kill_while_warming_up_is_measured_from_the_start() {
    let step = transition(
        &warming(10),
        &with_pod(exited("OOMKilled", 137, 900)),
        &settings(),
        at(901),
    );
    let st = step.status;
    assert_eq!(st.phase, TrialPhase::Collecting);
    assert_eq!(st.outcome, Some(TrialOutcome::OOMKilled));
    assert_eq!(st.window_start, Some(Time(at(10))));
    assert_eq!(st.window_end, Some(Time(at(900))));
}

// ---- Measuring --------------------------------------------------------------------

fn ended(at_end: f64, since: f64) -> Observed {
    Observed {
        end_scrapes: Some(Ok((at_end, since))),
        ..with_pod(running(0))
    }
}

#[test]
fn the_window_ends_in_collection() {
    assert!(matches!(
        needs(&measuring(0, 100), &settings(), at(100)),
        Needs::Follow { end: true, .. }
    ));
    let step = transition(&measuring(0, 100), &ended(3.0, 0.0), &settings(), at(100));
    assert_eq!(step.status.phase, TrialPhase::Collecting);
    assert_eq!(step.status.outcome, None);
    let step = transition(
        &measuring(0, 100),
        &with_pod(running(0)),
        &settings(),
        at(40),
    );
    assert_eq!(step.status.phase, TrialPhase::Measuring);
    assert_eq!(step.requeue, Some(Duration::from_secs(60)));
}

#[test]
fn a_crash_while_measuring_is_measured_up_to_the_exit() {
    let step = transition(
        &measuring(10, 1000),
        &with_pod(exited("Error", 1, 500)),
        &settings(),
        at(501),
    );
    let st = step.status;
    assert_eq!(st.outcome, Some(TrialOutcome::Crashed));
    assert_eq!(st.window_start, Some(Time(at(10))));
    assert_eq!(st.window_end, Some(Time(at(500))));
    assert!(st.message.unwrap().contains("exit code 1"));
}

#[test]
fn a_fired_rule_aborts_and_a_rule_that_cannot_be_judged_is_reported_alone() {
    let s = Settings {
        abort_rules: 3,
        ..settings()
    };
    let obs = Observed {
        aborts: vec![
            Verdict::Unknown("the client's metric profile has no vszBytes series".into()),
            Verdict::Holds,
            Verdict::Fired("aborted: slotLag stayed above 1000 for 5s (abortWhen)".into()),
        ],
        ..with_pod(running(0))
    };
    let step = transition(&measuring(0, 1000), &obs, &s, at(300));
    assert_eq!(step.status.outcome, Some(TrialOutcome::Aborted));
    assert_eq!(step.status.window_end, Some(Time(at(300))));
    assert_eq!(step.status.phase, TrialPhase::Collecting);
    assert_eq!(
        step.acts.len(),
        1,
        "the rule that could not be judged says why"
    );
    let Act::Event(note) = &step.acts[0] else {
        panic!("{:?}", step.acts)
    };
    assert_eq!(note.reason, "AbortRuleUnavailable");
    assert!(note.text.starts_with("abort rule 1 cannot be judged"));

    // With nothing fired, measuring goes on, looking every two scrapes.
    let obs = Observed {
        aborts: vec![Verdict::Holds, Verdict::TooEarly, Verdict::Holds],
        ..with_pod(running(0))
    };
    let step = transition(&measuring(0, 1000), &obs, &s, at(300));
    assert_eq!(step.status.phase, TrialPhase::Measuring);
    assert_eq!(step.requeue, Some(Duration::from_secs(30)));
}

/// trial.earlyAbort's defaults (a 12-hour window): 3 checks 20m apart over 1h of lag,
/// from 10% of the window.
fn early() -> Settings {
    Settings {
        early: Some((
            early_abort::Rule {
                checks: 3,
                interval: 1200.0,
                window: 3600.0,
                min_window_fraction: 0.1,
                max_lag: None,
            },
            "20m".into(),
        )),
        ..settings()
    }
}

/// The lag from the window's start (at(0)) to `to` seconds, one sample a scrape.
fn lag_series(to: i64, f: impl Fn(f64) -> f64) -> Observed {
    let secs = |t: i64| at(t).as_millisecond() as f64 / 1000.0;
    let recent = (0..=to / 15)
        .map(|i| (secs(i * 15), f((i * 15) as f64)))
        .collect();
    Observed {
        early: Some(Ok(early_abort::LagSeries {
            recent,
            warmup: Vec::new(),
        })),
        ..with_pod(running(0))
    }
}

#[test]
fn early_abort_is_judged_once_caught_up_from_its_first_moment_to_the_windows_end() {
    let twelve = 12 * 3600;
    let judged = |st: &ValidatorTrialStatus, s: &Settings, now: i64| {
        matches!(needs(st, s, at(now)), Needs::Follow { early: true, .. })
    };
    // 10% of 12h, then two intervals of checks before it: 6,720 s.
    assert!(!judged(&measuring(0, twelve), &early(), 6_700));
    assert!(judged(&measuring(0, twelve), &early(), 6_720));
    assert!(!judged(&measuring(0, twelve), &early(), twelve));
    assert!(
        !judged(&measuring(0, twelve), &settings(), 7_000),
        "disabled"
    );
    let not_caught_up = ValidatorTrialStatus {
        caught_up_at: None,
        ..measuring(0, twelve)
    };
    assert!(
        !judged(&not_caught_up, &early(), 7_000),
        "not caught up yet"
    );
    // It looks again at the first moment, then every interval.
    let step = transition(
        &measuring(0, twelve),
        &with_pod(running(0)),
        &early(),
        at(100),
    );
    assert_eq!(step.requeue, Some(Duration::from_secs(6_620)));
    // Sooner than an interval before it: at the first moment still.
    let step = transition(
        &measuring(0, twelve),
        &with_pod(running(0)),
        &early(),
        at(6_000),
    );
    assert_eq!(step.requeue, Some(Duration::from_secs(720)));
    let step = transition(
        &measuring(0, twelve),
        &with_pod(running(0)),
        &early(),
        at(7_000),
    );
    assert_eq!(step.requeue, Some(Duration::from_secs(1_200)));
}

/// A lag query Prometheus refuses is said in a warning event, and the trial measures on;
/// a transient failure waits for the next check without one.
#[test]
fn an_unreadable_lag_is_said_unless_the_failure_is_transient() {
    let twelve = 12 * 3600;
    let failed = |transient: bool| Observed {
        early: Some(Err(ReadError {
            message: "bad_data: parse error".into(),
            transient,
        })),
        ..with_pod(running(0))
    };
    let step = transition(
        &measuring(0, twelve),
        &failed(false),
        &early(),
        at(4 * 3600),
    );
    assert_eq!(step.status.phase, TrialPhase::Measuring);
    let notes: Vec<&Note> = step
        .acts
        .iter()
        .filter_map(|a| match a {
            Act::Event(n) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", step.acts);
    assert!(notes[0].warning);
    assert_eq!(notes[0].reason, "EarlyAbortUnavailable");
    assert!(
        notes[0].text.contains("bad_data: parse error"),
        "{}",
        notes[0].text
    );
    let step = transition(&measuring(0, twelve), &failed(true), &early(), at(4 * 3600));
    assert_eq!(step.status.phase, TrialPhase::Measuring);
    assert!(
        step.acts.iter().all(|a| !matches!(a, Act::Event(_))),
        "{:?}",
        step.acts
    );
}

#[test]
fn a_lag_growing_for_good_ends_the_window_early_as_fell_behind() {
    let twelve = 12 * 3600;
    // 360 slots an hour from the start, 4 hours in: 1,440 behind.
    let growing = lag_series(4 * 3600, |t| t / 10.0);
    let step = transition(&measuring(0, twelve), &growing, &early(), at(4 * 3600));
    let st = &step.status;
    assert_eq!(st.outcome, Some(TrialOutcome::FellBehind));
    assert_eq!(st.phase, TrialPhase::Collecting);
    assert_eq!(st.window_end, Some(Time(at(4 * 3600))));
    let a = st.early_abort.clone().unwrap();
    assert_eq!(a.rule, crate::api::trial::EarlyAbortRule::LagGrowing);
    assert_eq!(
        (a.lag, a.unit.as_str(), a.seconds_left),
        (1440.0, "slots", 28_800.0)
    );
    let message = st.message.clone().unwrap();
    assert!(
        message.starts_with("fell behind for good (earlyAbort LagGrowing)"),
        "{message}"
    );
    assert!(
        message.contains("instead of at 2026-01-01T12:00:00Z"),
        "{message}"
    );
    let note = announcement(&measuring(0, twelve), st).unwrap();
    assert_eq!((note.reason.as_str(), note.warning), ("EarlyAbort", true));

    // Collected: FellBehind stands and did not keep up, whatever the lag at its end.
    let collected = transition(
        st,
        &read(Ok(Some(results(50.0, true)))),
        &early(),
        at(4 * 3600 + 60),
    );
    assert_eq!(collected.status.outcome, Some(TrialOutcome::FellBehind));
    assert_eq!(collected.status.phase, TrialPhase::Succeeded);
    assert_eq!(collected.status.results.unwrap().kept_up, Some(false));
    assert!(
        collected
            .status
            .message
            .unwrap()
            .contains("(fell behind for good")
    );

    // A flat lag, or the same growth with early abort off, measures on.
    for (obs, s) in [
        (lag_series(4 * 3600, |_| 20.0), early()),
        (growing.clone(), settings()),
    ] {
        let step = transition(&measuring(0, twelve), &obs, &s, at(4 * 3600));
        assert_eq!(step.status.phase, TrialPhase::Measuring);
        assert_eq!(step.status.early_abort, None);
    }
}

// ---- Collecting -------------------------------------------------------------------

fn read(r: Reading<TrialResults>) -> Observed {
    Observed {
        results: Some(r),
        ..Default::default()
    }
}

#[test]
fn collection_waits_for_prometheus_to_scrape_past_the_window() {
    let st = collecting(0, 100, None);
    assert_eq!(
        needs(&st, &settings(), at(110)),
        Needs::Wait(Duration::from_secs(20))
    );
    assert_eq!(
        needs(&st, &settings(), at(130)),
        Needs::Collect {
            check_scraped: true
        }
    );
    let not_yet = Observed {
        scraped: Some(Ok(false)),
        ..Default::default()
    };
    let step = transition(&st, &not_yet, &settings(), at(130));
    assert_eq!(step.status, st);
    assert_eq!(step.requeue, Some(Duration::from_secs(15)));
    // Pushed samples may trail scrapes: with a 1 s scrape (the lab's) the check still
    // waits up to half a minute past the window, then collects what is there.
    let fast = Settings {
        step: Duration::from_secs(1),
        ..settings()
    };
    assert_eq!(
        needs(&st, &fast, at(125)),
        Needs::Collect {
            check_scraped: true
        }
    );
    // Past it, one more look records how far the samples have come (see below).
    assert_eq!(
        needs(&st, &fast, at(131)),
        Needs::Collect {
            check_scraped: true
        }
    );
    // A pod that died is not scraped any more: no need to wait for a scrape.
    let died = collecting(0, 100, Some(TrialOutcome::OOMKilled));
    assert_eq!(
        needs(&died, &settings(), at(130)),
        Needs::Collect {
            check_scraped: false
        }
    );
}

/// After a Prometheus outage a metrics agent re-sends its backlog, oldest first: the
/// window's samples arrive well after the half-minute. Collection waits while they keep
/// coming (counted from the last advance, so it resumes exactly after a restart), and
/// once they stop short of the window's end it collects what is there and says so.
#[test]
fn collection_waits_while_samples_keep_arriving_then_says_what_is_missing() {
    let s = Settings {
        step: Duration::from_secs(1),
        ..settings()
    };
    let st = collecting(0, 100, None);
    let arrived = |newest: i64, complete: bool| Observed {
        scraped: Some(Ok(complete)),
        newest_sample: Some(at(newest)),
        ..Default::default()
    };
    // Within the half-minute: waits, remembers nothing.
    let step = transition(&st, &arrived(60, false), &s, at(120));
    assert_eq!(step.status, st);
    // Past it: remembers the newest sample and when it moved.
    let step = transition(&st, &arrived(60, false), &s, at(131));
    let a = step.status.arrivals.clone().unwrap();
    assert_eq!(
        (a.newest, a.advanced_at),
        (Some(Time(at(60))), Time(at(131)))
    );
    assert!(
        step.status
            .message
            .clone()
            .unwrap()
            .contains("waiting for Prometheus"),
        "{:?}",
        step.status.message
    );
    // The backlog moves on: the wait goes on from the new advance.
    let st = step.status;
    let step = transition(&st, &arrived(80, false), &s, at(155));
    let st = step.status;
    assert_eq!(st.arrivals.clone().unwrap().advanced_at, Time(at(155)));
    assert_eq!(
        needs(&st, &s, at(184)),
        Needs::Collect {
            check_scraped: true
        }
    );
    // Unmoved: nothing written.
    let step = transition(&st, &arrived(80, false), &s, at(170));
    assert_eq!(step.status, st);
    // Past the window's end: collected as usual, no warning.
    let step = transition(
        &st,
        &Observed {
            results: Some(Ok(Some(results(0.0, true)))),
            ..arrived(101, true)
        },
        &s,
        at(175),
    );
    assert_eq!(step.status.outcome, Some(TrialOutcome::KeptUp));
    assert_eq!(step.status.arrivals, None);
    assert!(!format!("{:?}", step.acts).contains("SamplesIncomplete"));
    // Stopped short of it for half a minute: collected, with what is missing said.
    assert_eq!(
        needs(&st, &s, at(186)),
        Needs::Collect {
            check_scraped: false
        }
    );
    let step = transition(&st, &read(Ok(Some(results(0.0, true)))), &s, at(186));
    assert_eq!(step.status.phase, TrialPhase::Succeeded);
    let message = step.status.message.clone().unwrap();
    assert!(
        message.contains("the samples end at 2026-01-01T00:01:20Z, before the window's end"),
        "{message}"
    );
    assert!(format!("{:?}", step.acts).contains("SamplesIncomplete"));
    // However long they keep arriving, the collection deadline bounds the wait.
    let short = Settings {
        collection_deadline: (SignedDuration::from_secs(60), "1m".into()),
        ..s
    };
    assert_eq!(
        needs(&st, &short, at(160)),
        Needs::Collect {
            check_scraped: false
        }
    );
}

#[test]
fn results_decide_kept_up_or_fell_behind() {
    let st = collecting(100, 200, None);
    let step = transition(
        &st,
        &read(Ok(Some(results(0.0, true)))),
        &settings(),
        at(300),
    );
    assert_eq!(step.status.phase, TrialPhase::Succeeded);
    assert_eq!(step.status.outcome, Some(TrialOutcome::KeptUp));
    assert_eq!(
        step.status.results.clone().unwrap().catch_up_seconds,
        Some(100.0)
    );
    assert!(
        step.status
            .message
            .unwrap()
            .starts_with("KeptUp: avg 4600 TPS")
    );

    let step = transition(
        &st,
        &read(Ok(Some(results(9000.0, false)))),
        &settings(),
        at(300),
    );
    assert_eq!(step.status.outcome, Some(TrialOutcome::FellBehind));
    let note = announcement(&st, &step.status).unwrap();
    assert_eq!((note.reason.as_str(), note.warning), ("FellBehind", true));
}

#[test]
fn an_early_stop_keeps_its_outcome_and_reason() {
    let mut st = collecting(0, 100, Some(TrialOutcome::OOMKilled));
    st.message = Some("the validator exited (OOMKilled, exit code 137)".into());
    let step = transition(
        &st,
        &read(Ok(Some(results(50.0, true)))),
        &settings(),
        at(200),
    );
    assert_eq!(step.status.outcome, Some(TrialOutcome::OOMKilled));
    assert_eq!(
        step.status.phase,
        TrialPhase::Succeeded,
        "an OOM kill is a result"
    );
    assert!(
        step.status
            .message
            .unwrap()
            .ends_with("(the validator exited (OOMKilled, exit code 137))")
    );
}

#[test]
fn no_data_is_retried_then_ends_metrics_unavailable() {
    let mut st = collecting(0, 100, None);
    st.collect_attempts = 3;
    assert_eq!(
        needs(&st, &settings(), at(140)),
        Needs::Wait(Duration::from_secs(80))
    );
    let step = transition(&st, &read(Ok(None)), &settings(), at(220));
    assert_eq!(step.status.collect_attempts, 4);
    assert_eq!(step.status.phase, TrialPhase::Collecting);

    st.collect_attempts = MAX_COLLECT_ATTEMPTS - 1;
    let step = transition(
        &st,
        &read(Err("Prometheus is unreachable".into())),
        &settings(),
        at(1000),
    );
    assert_eq!(step.status.phase, TrialPhase::Failed);
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    assert!(
        step.status
            .message
            .unwrap()
            .contains("the last attempt failed: Prometheus is unreachable")
    );

    // A failure outcome known before collection (TimedOut) stands, with its reason.
    let mut timed_out = collecting(0, 100, Some(TrialOutcome::TimedOut));
    timed_out.collect_attempts = MAX_COLLECT_ATTEMPTS - 1;
    timed_out.message = Some("did not catch up within the warm-up limit of 4h".into());
    let step = transition(&timed_out, &read(Ok(None)), &settings(), at(1000));
    assert_eq!(step.status.outcome, Some(TrialOutcome::TimedOut));
    assert!(
        step.status
            .message
            .unwrap()
            .ends_with("(did not catch up within the warm-up limit of 4h)")
    );
}

/// No silent zeros: a window without a datapoint of the throughput series (Prometheus'
/// remote-write receiver off) is no KeptUp at 0 TPS: the trial says what is missing and
/// why; an outcome the pod gave (an OOM kill) stands, with the gap named.
#[test]
fn a_window_without_its_throughput_series_is_no_result() {
    let st = collecting(100, 200, None);
    let mut blind = results(0.0, true);
    blind.avg_tps = None;
    blind.missing = vec!["replay_slot_stats_total_transactions".into()];
    let step = transition(&st, &read(Ok(Some(blind.clone()))), &settings(), at(300));
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    let message = step.status.message.clone().unwrap();
    assert!(
        message.starts_with(
            "MetricsUnavailable: no datapoint of replay_slot_stats_total_transactions in the window"
        ),
        "{message}"
    );
    assert!(message.contains("remote-write receiver"), "{message}");
    // What was measured stays in the results, the gap listed.
    assert_eq!(step.status.results.unwrap().missing, blind.missing);

    // Without the lag nothing says whether it kept up.
    let mut no_lag = results(0.0, true);
    no_lag.kept_up = None;
    no_lag.missing = vec!["solana_node_num_slots_behind".into()];
    let step = transition(&st, &read(Ok(Some(no_lag))), &settings(), at(300));
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    assert!(
        step.status
            .message
            .unwrap()
            .contains("is scraped from the pod")
    );

    // A series outside the headline (page faults) leaves the verdict alone.
    let mut partial = results(0.0, true);
    partial.missing = vec!["namedprocess_namegroup_major_page_faults_total".into()];
    let step = transition(&st, &read(Ok(Some(partial))), &settings(), at(300));
    assert_eq!(step.status.outcome, Some(TrialOutcome::KeptUp));

    let died = collecting(100, 200, Some(TrialOutcome::OOMKilled));
    let step = transition(&died, &read(Ok(Some(blind))), &settings(), at(300));
    assert_eq!(step.status.outcome, Some(TrialOutcome::OOMKilled));
}

#[test]
fn collecting_without_a_window_cannot_read_anything() {
    let st = status(TrialPhase::Collecting);
    assert_eq!(needs(&st, &settings(), at(0)), Needs::Nothing);
    let step = transition(&st, &Observed::default(), &settings(), at(0));
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    assert_eq!(
        step.status.message.as_deref(),
        Some("no measurement window was recorded")
    );
}

// ---- Finished ---------------------------------------------------------------------

#[test]
fn a_finished_trial_releases_its_node_at_once_or_after_its_ttl() {
    let mut st = status(TrialPhase::Succeeded);
    st.finished_at = Some(Time(at(0)));
    let step = transition(&st, &Observed::default(), &settings(), at(5));
    assert_eq!(step.acts, vec![Act::DeletePods]);
    assert_eq!(step.requeue, None);
    let s = Settings {
        ttl_seconds: 60,
        ..settings()
    };
    let step = transition(&st, &Observed::default(), &s, at(5));
    assert_eq!(step.acts, vec![Act::StopPods]);
    assert_eq!(step.requeue, Some(Duration::from_secs(55)));
    let step = transition(&st, &Observed::default(), &s, at(61));
    assert_eq!(step.acts, vec![Act::DeletePods]);
    assert_eq!(step.status, st, "a finished trial's status never changes");
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
fn every_outcome_lands_in_the_right_phase() {
    for (outcome, phase) in [
        (TrialOutcome::KeptUp, TrialPhase::Succeeded),
        (TrialOutcome::FellBehind, TrialPhase::Succeeded),
        (TrialOutcome::OOMKilled, TrialPhase::Succeeded),
        (TrialOutcome::Aborted, TrialPhase::Succeeded),
        (TrialOutcome::Crashed, TrialPhase::Failed),
        (TrialOutcome::Unschedulable, TrialPhase::Failed),
        (TrialOutcome::TimedOut, TrialPhase::Failed),
        (TrialOutcome::NodeLost, TrialPhase::Failed),
        (TrialOutcome::NodeNotPrepared, TrialPhase::Failed),
        (TrialOutcome::MetricsUnavailable, TrialPhase::Failed),
        (TrialOutcome::Invalid, TrialPhase::Failed),
    ] {
        let mut st = ValidatorTrialStatus::default();
        finish(&mut st, Some(outcome), "x".into(), at(0));
        assert_eq!(st.phase, phase, "{outcome:?}");
        assert_eq!(st.finished_at, Some(Time(at(0))));
    }
}

#[test]
fn restarts_change_nothing_the_same_inputs_give_the_same_step() {
    let st = warming(0);
    let obs = lag(Ok(Some(5000.0)));
    assert_eq!(
        transition(&st, &obs, &settings(), at(1200)),
        transition(&st, &obs, &settings(), at(1200))
    );
}

// ---- Scraping, windows from the first execution --------------------------------------

#[test]
fn a_pod_prometheus_never_scrapes_ends_the_trial_naming_the_pod_monitor() {
    let not_scraped = Observed {
        up: Some(Ok(false)),
        ..lag(Ok(None))
    };
    // Within 20 scrape intervals of the start: keep waiting.
    let step = transition(&warming(0), &not_scraped, &settings(), at(299));
    assert_eq!(step.status.phase, TrialPhase::WarmingUp);
    let step = transition(&warming(0), &not_scraped, &settings(), at(300));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    assert_eq!(step.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    let message = step.status.message.unwrap();
    assert!(
        message.contains("Prometheus at http://prometheus:9090 has not scraped"),
        "{message}"
    );
    assert!(
        message.contains("PodMonitor validators/agave-ram"),
        "{message}"
    );
    assert!(message.contains("podMonitorLabels"), "{message}");
    assert_eq!(step.acts, vec![Act::DeletePods]);
    // Prometheus unreachable is no evidence either way.
    let unknown = Observed {
        up: Some(Err("unreachable".into())),
        ..lag(Ok(None))
    };
    assert_eq!(
        transition(&warming(0), &unknown, &settings(), at(600))
            .status
            .phase,
        TrialPhase::WarmingUp
    );
    // Once scraped, recorded (and not asked again).
    let scraped = Observed {
        up: Some(Ok(true)),
        ..lag(Ok(Some(5000.0)))
    };
    let step = transition(&warming(0), &scraped, &settings(), at(30));
    assert_eq!(step.status.answering_at, Some(Time(at(30))));
    assert!(matches!(
        needs(&step.status, &settings(), at(31)),
        Needs::Follow { scraped: false, .. }
    ));
}

#[test]
fn from_the_first_execution_the_window_includes_catching_up() {
    let s = Settings {
        from: WindowStart::FirstExecution,
        ..settings()
    };
    let mut st = warming(0);
    st.answering_at = Some(Time(at(600)));
    // Behind the chain but processing transactions: the window starts.
    let obs = Observed {
        first_execution: Some(Ok(Some(at(900)))),
        ..lag(Ok(Some(9000.0)))
    };
    let step = transition(&st, &obs, &s, at(900));
    let st = step.status;
    assert_eq!(st.phase, TrialPhase::Measuring);
    assert_eq!(st.first_execution_at, Some(Time(at(900))));
    assert_eq!(st.window_start, Some(Time(at(900))));
    assert_eq!(st.caught_up_at, None);
    // Catching up inside the window is recorded...
    assert!(matches!(
        needs(&st, &s, at(1000)),
        Needs::Follow { lag: true, .. }
    ));
    let step = transition(&st, &lag(Ok(Some(20.0))), &s, at(4500));
    assert_eq!(step.status.caught_up_at, Some(Time(at(4500))));
    // ...and timed from the validator's first answer; starting up is reported apart.
    let mut done = step.status.clone();
    done.phase = TrialPhase::Collecting;
    let end = done.window_end.clone().unwrap().0;
    let step = transition(
        &done,
        &read(Ok(Some(results(0.0, true)))),
        &s,
        end + SignedDuration::from_secs(60),
    );
    let r = step.status.results.unwrap();
    assert_eq!(r.catch_up_seconds, Some(3900.0));
    assert_eq!(r.startup_seconds, Some(600.0));
}

// ---- Prometheus away ------------------------------------------------------------------

fn blind_obs(base: Observed) -> Observed {
    Observed {
        blind: Some("Prometheus at http://prometheus:9090 is unreachable".into()),
        ..base
    }
}

#[test]
fn while_prometheus_is_away_the_warm_up_is_not_judged_and_its_deadline_moves() {
    let away_at = 3 * 3600 + 1800;
    // Blind, even past the warm-up deadline: no TimedOut on no evidence.
    let step = transition(
        &warming(0),
        &blind_obs(lag(Err("unreachable".into()))),
        &settings(),
        at(away_at),
    );
    assert_eq!(step.status.phase, TrialPhase::WarmingUp);
    assert_eq!(step.status.blind_since, Some(Time(at(away_at))));
    let Act::Event(note) = &step.acts[0] else {
        panic!("{:?}", step.acts)
    };
    assert_eq!(note.reason, "PrometheusUnreachable");
    assert_eq!(
        step.requeue,
        Some(Duration::from_secs(30)),
        "two scrapes at first"
    );
    let past_deadline = transition(
        &step.status,
        &blind_obs(lag(Err("x".into()))),
        &settings(),
        at(4 * 3600 + 10),
    );
    assert_eq!(past_deadline.status.phase, TrialPhase::WarmingUp);
    // Still away ten minutes on: waits longer between looks, reports nothing new.
    let later = transition(
        &step.status,
        &blind_obs(lag(Err("unreachable".into()))),
        &settings(),
        at(away_at + 600),
    );
    assert_eq!(later.status.blind_since, step.status.blind_since);
    assert!(later.acts.is_empty(), "reported once");
    assert_eq!(later.requeue, Some(Duration::from_secs(150)));
    // Back after 15 minutes, still behind: the deadline moved by the 15 minutes.
    let back = transition(
        &later.status,
        &lag(Ok(Some(5000.0))),
        &settings(),
        at(away_at + 900),
    );
    assert_eq!(
        back.status.phase,
        TrialPhase::WarmingUp,
        "{:?}",
        back.status.message
    );
    assert_eq!(back.status.blind_seconds, 900.0);
    assert_eq!(back.status.blind_since, None);
    let still = transition(
        &back.status,
        &lag(Ok(Some(5000.0))),
        &settings(),
        at(4 * 3600 + 899),
    );
    assert_eq!(still.status.phase, TrialPhase::WarmingUp);
    let timed_out = transition(
        &back.status,
        &lag(Ok(Some(5000.0))),
        &settings(),
        at(4 * 3600 + 900),
    );
    assert_eq!(timed_out.status.outcome, Some(TrialOutcome::TimedOut));
}

#[test]
fn a_window_whose_end_prometheus_did_not_see_ends_when_it_sees_the_pod_again() {
    let st = measuring(0, 1000);
    // Blind before and after the end: no verdict, still measuring.
    let away = transition(&st, &blind_obs(with_pod(running(0))), &settings(), at(900));
    let later = transition(
        &away.status,
        &blind_obs(with_pod(running(0))),
        &settings(),
        at(1100),
    );
    assert_eq!(later.status.phase, TrialPhase::Measuring);
    // Back, but nothing scraped near the end, nor since yet: keep waiting.
    let back = transition(&later.status, &ended(0.0, 0.0), &settings(), at(1150));
    assert_eq!(back.status.phase, TrialPhase::Measuring);
    // Scraped again: the window ends there, so the verdict rests on what was seen.
    let seen = transition(&back.status, &ended(0.0, 2.0), &settings(), at(1200));
    assert_eq!(seen.status.phase, TrialPhase::Collecting);
    assert_eq!(seen.status.window_end, Some(Time(at(1200))));
    assert!(
        seen.status
            .message
            .unwrap()
            .contains("did not scrape the pod at the window's end")
    );
    // Never seen again within the collection deadline: Unobserved, not a verdict.
    let gone = transition(
        &back.status,
        &ended(0.0, 0.0),
        &settings(),
        at(1000 + 24 * 3600),
    );
    assert_eq!(gone.status.outcome, Some(TrialOutcome::Unobserved));
}

#[test]
fn away_past_the_collection_deadline_the_trial_ends_unobserved() {
    let s = Settings {
        collection_deadline: (SignedDuration::from_mins(10), "10m".into()),
        ..settings()
    };
    let mut st = warming(0);
    st.blind_since = Some(Time(at(100)));
    let step = transition(&st, &blind_obs(lag(Err("x".into()))), &s, at(700));
    assert_eq!(step.status.outcome, Some(TrialOutcome::Unobserved));
    assert_eq!(step.status.phase, TrialPhase::Failed);
    let message = step.status.message.unwrap();
    assert!(
        message.contains("Prometheus at http://prometheus:9090 was unreachable for 600s"),
        "{message}"
    );
}

#[test]
fn collection_waits_out_an_outage_without_spending_attempts() {
    let st = collecting(0, 100, None);
    let step = transition(
        &st,
        &blind_obs(read(Err("unreachable".into()))),
        &settings(),
        at(200),
    );
    assert_eq!(
        step.status.collect_attempts, 0,
        "unreachable is not 'no data'"
    );
    assert_eq!(step.status.phase, TrialPhase::Collecting);
    assert_eq!(step.status.blind_since, Some(Time(at(200))));
    // Back: the results are read as if nothing happened.
    let back = transition(
        &step.status,
        &read(Ok(Some(results(0.0, true)))),
        &settings(),
        at(3000),
    );
    assert_eq!(back.status.outcome, Some(TrialOutcome::KeptUp));
    assert_eq!(back.status.blind_since, None);
    // Away for good: the message names Prometheus, how long, and how to collect later.
    let s = Settings {
        collection_deadline: (SignedDuration::from_mins(2), "2m".into()),
        ..settings()
    };
    let gone = transition(
        &step.status,
        &blind_obs(read(Err("unreachable".into()))),
        &s,
        at(320),
    );
    assert_eq!(gone.status.outcome, Some(TrialOutcome::MetricsUnavailable));
    let message = gone.status.message.unwrap();
    assert!(
        message.contains("http://prometheus:9090 was unreachable for 120s"),
        "{message}"
    );
    assert!(message.contains("valtune collect"), "{message}");
}

#[test]
fn a_finished_trial_is_collected_again_when_asked() {
    let mut st = collecting(0, 100, None);
    finish(
        &mut st,
        Some(TrialOutcome::MetricsUnavailable),
        "no results".into(),
        at(400),
    );
    let s = Settings {
        recollect: Some("2026-01-01T01:00:00Z".into()),
        ..settings()
    };
    let step = transition(&st, &Observed::default(), &s, at(3600));
    assert_eq!(step.status.phase, TrialPhase::Collecting);
    assert_eq!(step.status.outcome, None);
    assert_eq!(step.status.collected_for, s.recollect);
    assert_eq!(
        needs(&step.status, &s, at(3601)),
        Needs::Collect {
            check_scraped: false
        }
    );
    let done = transition(
        &step.status,
        &read(Ok(Some(results(0.0, true)))),
        &s,
        at(3602),
    );
    assert_eq!(done.status.outcome, Some(TrialOutcome::KeptUp));
    // Asked once: the next pass cleans up, it does not collect again.
    let next = transition(&done.status, &Observed::default(), &s, at(3603));
    assert_eq!(next.acts, vec![Act::DeletePods]);
    // An outcome the pod gave stays.
    let mut oom = collecting(0, 100, Some(TrialOutcome::OOMKilled));
    finish(&mut oom, Some(TrialOutcome::OOMKilled), "x".into(), at(400));
    let again = transition(&oom, &Observed::default(), &s, at(3600));
    assert_eq!(again.status.outcome, Some(TrialOutcome::OOMKilled));
}

/// A pair measures one window: the side that caught up first waits for its partner, and
/// both windows start a scrape (15 s) after the later catch-up, so the first sample of
/// neither holds catch-up replay; a partner gone leaves it to measure alone.
#[test]
fn a_pair_measures_one_window_from_the_later_catch_up() {
    let caught = |partner| Observed {
        caught_up: Some(Ok(Some(at(3600)))),
        partner: Some(partner),
        ..lag(Ok(Some(0.0)))
    };
    let waiting = transition(
        &warming(0),
        &caught(Partner::Waiting("t-b".into())),
        &settings(),
        at(3700),
    );
    assert_eq!(waiting.status.phase, TrialPhase::WarmingUp);
    assert_eq!(waiting.status.caught_up_at, Some(Time(at(3600))));
    assert_eq!(waiting.status.window_start, None);
    assert!(
        waiting
            .status
            .message
            .clone()
            .unwrap()
            .contains("waiting for its pair's t-b"),
        "{:?}",
        waiting.status.message
    );
    let later = transition(
        &waiting.status,
        &caught(Partner::CaughtUp(at(4000))),
        &settings(),
        at(4100),
    );
    assert_eq!(later.status.phase, TrialPhase::Measuring);
    assert_eq!(later.status.caught_up_at, Some(Time(at(3600))));
    assert_eq!(later.status.window_start, Some(Time(at(4015))));
    assert!(
        later
            .status
            .message
            .clone()
            .unwrap()
            .contains("a scrape after the later of its pair's catch-ups"),
        "{:?}",
        later.status.message
    );
    let earlier = transition(
        &warming(0),
        &caught(Partner::CaughtUp(at(3000))),
        &settings(),
        at(3700),
    );
    assert_eq!(earlier.status.window_start, Some(Time(at(3615))));
    // A catch-up within a second, as status keeps it (whole seconds) and the partner
    // reads it: both sides' windows start at one moment.
    let within = Observed {
        caught_up: Some(Ok(Some(at(4000) + SignedDuration::from_millis(700)))),
        partner: Some(Partner::CaughtUp(at(4000))),
        ..lag(Ok(Some(0.0)))
    };
    let same = transition(&warming(0), &within, &settings(), at(4100));
    assert_eq!(same.status.window_start, later.status.window_start);
    assert_eq!(same.status.window_end, later.status.window_end);
    // A side waiting for its partner keeps the catch-up it recorded, which its partner
    // read, though the samples now date it later: both choose one window.
    let recorded = ValidatorTrialStatus {
        caught_up_at: Some(Time(at(4000))),
        ..warming(0)
    };
    let moved = Observed {
        caught_up: Some(Ok(Some(at(4001)))),
        partner: Some(Partner::CaughtUp(at(3600))),
        ..lag(Ok(Some(0.0)))
    };
    let kept = transition(&recorded, &moved, &settings(), at(4100));
    assert_eq!(kept.status.caught_up_at, Some(Time(at(4000))));
    assert_eq!(kept.status.window_start, Some(Time(at(4015))));
    // A partner measuring already gives its window as it is.
    let taken = Observed {
        partner: Some(Partner::Measuring(at(4015))),
        ..caught(Partner::Gone)
    };
    let taken = transition(&warming(0), &taken, &settings(), at(4100));
    assert_eq!(taken.status.window_start, Some(Time(at(4015))));
    assert_eq!(taken.status.caught_up_at, Some(Time(at(3600))));
    let alone = transition(
        &waiting.status,
        &caught(Partner::Gone),
        &settings(),
        at(5000),
    );
    assert_eq!(alone.status.window_start, Some(Time(at(3600))));
}
