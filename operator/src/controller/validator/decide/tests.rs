//! Whole passes of the Validator's decision: each rule as the steps together apply it.

use super::*;
use crate::api::validator::{KeyRef, PendingChange, ValidatorRole};
use crate::clients::Rendered;
use std::sync::Arc;

use crate::clients::agave::window::LeaderSchedule;
use crate::clients::health::Health;
use crate::clients::window::{Immediate, NotComputed, Reading};
use crate::controller::validator::observe::{Answer, LeaseState, PodState};
use crate::controller::validator::tuning::Tuned;
use k8s_openapi::api::core::v1::Pod;

fn spec(yaml: &str) -> ValidatorSpec {
    serde_saphyr::from_str(yaml).unwrap()
}

const SPEC: &str = r#"
nodeName: bm-01
role: nonVoting
identity:
  secretName: node-key
template:
  besu:
    image: hyperledger/besu:25.12.0
"#;

fn pod(hash: &str) -> PodState {
    PodState {
        name: "v".into(),
        hash: Some(hash.into()),
        terminating: false,
        phase: "Running".into(),
        node: Some("bm-01".into()),
        node_ready: Some(true),
        image: Some("hyperledger/besu:25.12.0".into()),
        restarts: None,
    }
}

fn observed(
    lease: LeaseState,
    p: Option<PodState>,
    answer: Option<(u16, &str, Health)>,
) -> Observed {
    Observed {
        rendered: Ok(Rendered {
            pod: Pod::default(),
            config_maps: Vec::new(),
            secrets: Vec::new(),
            claims: Vec::new(),
        }),
        hash: "h1".into(),
        lease,
        pod: p,
        others: Vec::new(),
        answer: answer.map(|(code, body, health)| Answer {
            code,
            body: body.into(),
            health,
        }),
        unanswered: None,
        position: Some((100, 3)),
        window: Arc::new(Immediate),
        look: None,
        tuning: Tuned::NotAsked,
        pair: None,
    }
}

fn ours() -> LeaseState {
    LeaseState::Ours {
        name: "valtune-identity-node-key".into(),
    }
}

/// A pass as these tests read it: the status, and the acts as flags.
struct Decision {
    status: ValidatorStatus,
    take_lease: Option<String>,
    create_pod: bool,
    delete_pod: bool,
    annotate: Vec<(String, String)>,
    move_lease: Option<(String, String)>,
    events: Vec<(bool, String, String)>,
}

fn decide(
    spec: &ValidatorSpec,
    generation: Option<i64>,
    previous: &ValidatorStatus,
    obs: &Observed,
    now: Timestamp,
) -> Decision {
    let step = super::decide(spec, generation, previous, obs, now);
    let mut d = Decision {
        status: step.status,
        take_lease: None,
        create_pod: false,
        delete_pod: false,
        annotate: Vec::new(),
        move_lease: None,
        events: Vec::new(),
    };
    for a in step.acts {
        match a {
            Act::TakeLease(l) => d.take_lease = Some(l),
            Act::EnsureBudget => {}
            Act::CreatePod => d.create_pod = true,
            Act::DeletePod => d.delete_pod = true,
            Act::Annotate { pod, request } => d.annotate.push((pod, request)),
            Act::MoveLease { lease, to } => d.move_lease = Some((lease, to)),
            Act::Event(n) => d.events.push((n.warning, n.reason, n.text)),
        }
    }
    d
}

fn cond<'a>(d: &'a Decision, t: &str) -> (&'a str, &'a str, &'a str) {
    let c = d.status.conditions.iter().find(|c| c.type_ == t).unwrap();
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

fn at() -> Timestamp {
    "2026-11-27T22:00:00Z".parse().unwrap()
}

/// What a pass should do and say.
struct Expect {
    lease: bool,
    create: bool,
    delete: bool,
    phase: ValidatorPhase,
    /// Ready's status and reason.
    ready: &'static str,
    reason: &'static str,
}

/// (what, observed, expected)
#[test]
fn the_table() {
    let up = Some((200, "{\n  \"status\" : \"UP\"\n}", Health::Healthy));
    let down = Some((503, "{\n  \"status\" : \"DOWN\"\n}", Health::Behind));
    let mut terminating = pod("h1");
    terminating.terminating = true;
    let mut lost = pod("h1");
    lost.node_ready = Some(false);
    let mut lost_terminating = lost.clone();
    lost_terminating.terminating = true;
    let mut evicted = pod("h1");
    evicted.phase = "Failed".into();
    let free = LeaseState::Free {
        name: "valtune-identity-node-key".into(),
    };
    let held = LeaseState::HeldBy {
        name: "valtune-identity-node-key".into(),
        holder: "first".into(),
    };
    let rows: Vec<(&str, Observed, Expect)> = vec![
        (
            "a free identity is taken and the pod created",
            observed(free, None, None),
            Expect {
                lease: true,
                create: true,
                delete: false,
                phase: ValidatorPhase::Starting,
                ready: "False",
                reason: "PodCreated",
            },
        ),
        (
            "an identity held by another: no pod",
            observed(held.clone(), None, None),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Starting,
                ready: "False",
                reason: "IdentityHeldElsewhere",
            },
        ),
        (
            "no answer yet",
            observed(ours(), Some(pod("h1")), None),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Starting,
                ready: "False",
                reason: "NoAnswer",
            },
        ),
        (
            "behind: catching up",
            observed(ours(), Some(pod("h1")), down),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::CatchingUp,
                ready: "False",
                reason: "Behind",
            },
        ),
        (
            "healthy: running",
            observed(ours(), Some(pod("h1")), up),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Running,
                ready: "True",
                reason: "Healthy",
            },
        ),
        (
            "a changed rendering restarts Besu at once",
            observed(ours(), Some(pod("h0")), up),
            Expect {
                lease: false,
                create: false,
                delete: true,
                phase: ValidatorPhase::Restarting,
                ready: "False",
                reason: "Restarting",
            },
        ),
        (
            "the old pod terminating: nothing new",
            observed(ours(), Some(terminating), None),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Restarting,
                ready: "False",
                reason: "Restarting",
            },
        ),
        (
            "its node does not answer: no second pod",
            observed(ours(), Some(lost), up),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Starting,
                ready: "False",
                reason: "NodeNotAnswering",
            },
        ),
        (
            "terminating on a silent node: still none",
            observed(ours(), Some(lost_terminating), None),
            Expect {
                lease: false,
                create: false,
                delete: false,
                phase: ValidatorPhase::Restarting,
                ready: "False",
                reason: "Restarting",
            },
        ),
        (
            "an evicted pod frees the name",
            observed(ours(), Some(evicted), None),
            Expect {
                lease: false,
                create: false,
                delete: true,
                phase: ValidatorPhase::Restarting,
                ready: "False",
                reason: "PodEnded",
            },
        ),
    ];
    let s = spec(SPEC);
    for (what, obs, e) in rows {
        let d = decide(&s, Some(1), &ValidatorStatus::default(), &obs, at());
        assert_eq!(d.take_lease.is_some(), e.lease, "{what}");
        assert_eq!(d.create_pod, e.create, "{what}");
        assert_eq!(d.delete_pod, e.delete, "{what}");
        assert_eq!(d.status.phase, e.phase, "{what}");
        let (status, why, _) = cond(&d, "Ready");
        assert_eq!((status, why), (e.ready, e.reason), "{what}");
    }
}

#[test]
fn a_second_validator_says_who_holds_the_identity() {
    let held = LeaseState::HeldBy {
        name: "valtune-identity-node-key".into(),
        holder: "first".into(),
    };
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &observed(held, None, None),
        at(),
    );
    let (status, reason, message) = cond(&d, "IdentityHeld");
    assert_eq!((status, reason), ("False", "HeldElsewhere"));
    assert!(
        message.contains("held by Validator first") && message.contains("node-key"),
        "{message}"
    );
    let mut other = observed(ours(), None, None);
    other.others = vec!["first".into()];
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &other,
        at(),
    );
    assert!(!d.create_pod);
    assert!(cond(&d, "IdentityHeld").2.contains("pod first still runs"));
}

#[test]
fn the_health_answer_is_kept_verbatim_with_head_and_lag() {
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &observed(
            ours(),
            Some(pod("h1")),
            Some((200, "{\n  \"status\" : \"UP\"\n}", Health::Healthy)),
        ),
        at(),
    );
    assert_eq!(
        d.status.health.as_deref(),
        Some("HTTP 200: { \"status\" : \"UP\" }")
    );
    assert_eq!((d.status.head, d.status.lag), (Some(100), Some(3)));
    assert_eq!(cond(&d, "CaughtUp").0, "True");
    assert_eq!(
        d.status.version.as_deref(),
        Some("hyperledger/besu:25.12.0")
    );
}

#[test]
fn a_change_without_a_window_waits_and_says_why() {
    let mut obs = observed(ours(), Some(pod("h0")), Some((200, "UP", Health::Healthy)));
    obs.window = Arc::new(NotComputed("valtune does not compute Agave's window yet"));
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &obs,
        at(),
    );
    assert!(!d.delete_pod);
    assert_eq!(d.status.phase, ValidatorPhase::RestartPending);
    let p = d.status.pending_change.clone().unwrap();
    assert_eq!(p.hash, "h1");
    assert!(
        p.waiting_for.contains("Agave's window"),
        "{}",
        p.waiting_for
    );
    assert_eq!(cond(&d, "RestartPending").0, "True");
}

/// An Agave change: (what, the window's look, force, delete?, reason of RestartPending).
#[test]
fn an_agave_change_waits_for_its_window() {
    use crate::api::validator::RestartWindowSpec;
    use crate::clients::agave::window::Look;
    let open = Look {
        healthy: true,
        slot: 1_000_000,
        slot_index: 100_000,
        slots_in_epoch: 432_000,
        epoch: 2,
        leader_slots: vec![1_010_000],
        snapshot: Some((990_000, Some(999_900))),
        current_stake: 98,
        delinquent_stake: 2,
    };
    let near = Look {
        leader_slots: vec![1_000_100, 1_010_000],
        ..open.clone()
    };
    let ok = r#"{"jsonrpc":"2.0","result":"ok","id":1}"#;
    let seen = ValidatorStatus {
        pending_change: Some(PendingChange {
            hash: "h1".into(),
            waiting_for: String::new(),
            snapshot_slot: Some(999_800),
            incremental_seen: true,
        }),
        ..Default::default()
    };
    type Row<'a> = (&'a str, Option<Result<Look, String>>, bool, bool, &'a str);
    let rows: Vec<Row> = vec![
        ("open", Some(Ok(open.clone())), false, true, "Restarting"),
        (
            "a leader slot near",
            Some(Ok(near.clone())),
            false,
            false,
            "WaitingForWindow",
        ),
        (
            "a leader slot near, forced",
            Some(Ok(near)),
            true,
            true,
            "Restarting",
        ),
        (
            "the figures unreadable",
            Some(Err("getVoteAccounts: no answer".into())),
            false,
            false,
            "WaitingForWindow",
        ),
    ];
    for (what, look, force, delete, reason) in rows {
        let mut s = spec(SPEC);
        s.restart_window = Some(RestartWindowSpec {
            force,
            ..Default::default()
        });
        let mut obs = observed(ours(), Some(pod("h0")), Some((200, ok, Health::Healthy)));
        obs.window = Arc::new(LeaderSchedule { rpc_port: 8899 });
        obs.look = look.map(|r| r.map(Reading::new));
        let d = decide(&s, Some(1), &seen, &obs, at());
        assert_eq!(d.delete_pod, delete, "{what}");
        assert_eq!(cond(&d, "RestartPending").1, reason, "{what}");
        if delete {
            assert_eq!(d.status.phase, ValidatorPhase::Restarting, "{what}");
            let forced = d
                .events
                .iter()
                .any(|e| e.1 == "ForcedRestart" && e.2.contains("force"));
            assert_eq!(forced, force, "{what}: {:?}", d.events);
        } else {
            assert_eq!(d.status.phase, ValidatorPhase::RestartPending, "{what}");
            let p = d.status.pending_change.clone().unwrap();
            assert!(
                p.waiting_for.contains("waiting:"),
                "{what}: {}",
                p.waiting_for
            );
        }
    }
    // Not answering its RPC at all: nothing to wait for.
    let mut obs = observed(ours(), Some(pod("h0")), None);
    obs.window = Arc::new(LeaderSchedule { rpc_port: 8899 });
    let d = decide(&spec(SPEC), Some(1), &seen, &obs, at());
    assert!(d.delete_pod);
    // Asked and not answering in time (busy, not stopped): it waits, as the command
    // would not say "Ready to restart".
    obs.unanswered = Some("http://10.0.0.7:8899/: operation timed out".into());
    let d = decide(&spec(SPEC), Some(1), &seen, &obs, at());
    assert!(!d.delete_pod);
    assert_eq!(cond(&d, "RestartPending").1, "WaitingForWindow");
    assert!(
        d.status
            .pending_change
            .as_ref()
            .unwrap()
            .waiting_for
            .contains("did not answer (http://10.0.0.7:8899/: operation timed out)"),
        "{:?}",
        d.status.pending_change
    );
    // The snapshot seen when the window opened is kept while it waits for a new one.
    let mut obs = observed(ours(), Some(pod("h0")), Some((200, ok, Health::Healthy)));
    obs.window = Arc::new(LeaderSchedule { rpc_port: 8899 });
    obs.look = Some(Ok(Reading::new(open)));
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &obs,
        at(),
    );
    assert!(!d.delete_pod);
    let p = d.status.pending_change.unwrap();
    assert_eq!(p.snapshot_slot, Some(999_900));
    assert!(
        p.waiting_for.contains("Waiting for a new snapshot"),
        "{}",
        p.waiting_for
    );
}

/// A producing nodeos waits for its round to end; a non-producer and one that does not
/// answer restart at once; an unreadable schedule waits.
#[test]
fn a_producers_change_waits_for_its_round() {
    use crate::clients::nodeos::window::{BLOCK_MS, ProducerRound, REPETITIONS, Schedule};
    let producers: Vec<String> = (1..=21).map(|i| format!("bp{i}")).collect();
    // at() is slot 1,698,264,000, 216 into a 252-slot cycle: bp1's round starts 36
    // slots later.
    let t =
        |slot_offset: i64| at() + jiff::SignedDuration::from_millis((36 + slot_offset) * BLOCK_MS);
    let up = Some((200, r#"{"head_block_num":1}"#, Health::Healthy));
    type Row<'a> = (
        &'a str,
        Option<&'a str>,
        Option<Result<Vec<String>, String>>,
        bool,
        i64,
        bool,
    );
    let rows: Vec<Row> = vec![
        (
            "in its round",
            Some("bp1"),
            Some(Ok(producers.clone())),
            true,
            3,
            false,
        ),
        (
            "just after its round",
            Some("bp1"),
            Some(Ok(producers.clone())),
            true,
            REPETITIONS as i64,
            true,
        ),
        ("a non-producer", None, None, true, 3, true),
        (
            "the schedule unreadable",
            Some("bp1"),
            Some(Err("HTTP 500".into())),
            true,
            20,
            false,
        ),
        ("not answering at all", Some("bp1"), None, false, 3, true),
    ];
    for (what, producer, schedule, answers, offset, delete) in rows {
        let mut obs = observed(ours(), Some(pod("h0")), if answers { up } else { None });
        obs.window = Arc::new(ProducerRound { http_port: 8888 });
        obs.look = schedule.map(|r| r.map(|p| Reading::new(Schedule(p))));
        let mut s = spec(SPEC);
        s.producer_name = producer.map(String::from);
        let d = decide(&s, Some(1), &ValidatorStatus::default(), &obs, t(offset));
        assert_eq!(
            d.delete_pod, delete,
            "{what}: {:?}",
            d.status.pending_change
        );
        if !delete {
            let p = d.status.pending_change.unwrap();
            assert!(
                p.waiting_for.contains("waiting:"),
                "{what}: {}",
                p.waiting_for
            );
        }
    }
}

#[test]
fn a_healthy_standby_is_standby() {
    let mut s = spec(SPEC);
    s.role = ValidatorRole::Standby;
    s.identity = Some(KeyRef {
        secret_name: "spare".into(),
        key: "keypair".into(),
        public_key: None,
    });
    let d = decide(
        &s,
        Some(1),
        &ValidatorStatus::default(),
        &observed(ours(), Some(pod("h1")), Some((200, "UP", Health::Healthy))),
        at(),
    );
    assert_eq!(d.status.phase, ValidatorPhase::Standby);
}

#[test]
fn what_cannot_render_fails_with_the_reason() {
    let mut obs = observed(ours(), None, None);
    obs.rendered = Err("no Prometheus is configured".into());
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &obs,
        at(),
    );
    assert_eq!(d.status.phase, ValidatorPhase::Failed);
    assert!(!d.create_pod && d.take_lease.is_none());
    assert!(cond(&d, "Ready").2.contains("no Prometheus"));
}

/// What cannot render waits for a change of the Validator: rendering again cannot help.
#[test]
fn what_cannot_render_waits_for_a_change() {
    let mut obs = observed(ours(), None, None);
    obs.rendered = Err("no Prometheus is configured".into());
    let step = super::decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &obs,
        at(),
    );
    assert_eq!(step.status.phase, ValidatorPhase::Failed);
    assert_eq!(step.requeue, None);
}

/// The experiment's point shows in status once the pod runs it; before, the
/// condition says it waits; a refusal says why and keeps nothing applied.
#[test]
fn an_experiments_point_shows_once_the_pod_runs_it() {
    use crate::api::validator::AppliedTuning;
    let applied = AppliedTuning {
        experiment: "heap".into(),
        summary: "allocator=jemalloc heap=8Gi".into(),
        point: Default::default(),
        trial: "heap-1".into(),
    };
    let resolved = Tuned::Resolved {
        applied: applied.clone(),
        template: Box::new(serde_saphyr::from_str("besu: {image: b}\n").unwrap()),
    };
    let up = Some((200, "UP", Health::Healthy));
    let mut waiting = observed(ours(), Some(pod("h0")), up);
    waiting.window = Arc::new(NotComputed("no window yet"));
    waiting.tuning = resolved.clone();
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &waiting,
        at(),
    );
    assert_eq!(cond(&d, "TuningApplied").1, "WaitingForRestart");
    assert_eq!(d.status.applied_tuning, None);

    let mut running = observed(ours(), Some(pod("h1")), up);
    running.tuning = resolved;
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &running,
        at(),
    );
    let (status, reason, message) = cond(&d, "TuningApplied");
    assert_eq!((status, reason), ("True", "Applied"));
    assert!(message.contains("experiment heap"), "{message}");
    assert_eq!(d.status.applied_tuning.as_ref(), Some(&applied));

    // A refusal: the template as written runs (the pod has the rendered hash).
    let mut refused = observed(ours(), Some(pod("h1")), up);
    refused.tuning = Tuned::Refused("VersionDiffers", "experiment heap measured 26.2.0".into());
    let d = decide(&spec(SPEC), Some(1), &d.status, &refused, at());
    assert_eq!(cond(&d, "TuningApplied").1, "VersionDiffers");
    assert_eq!(d.status.applied_tuning, None);
    assert!(d.events.iter().any(|e| e.1 == "TuningRefused"));

    // Without fromExperiment the condition goes.
    let d = decide(
        &spec(SPEC),
        Some(1),
        &d.status,
        &observed(ours(), Some(pod("h1")), up),
        at(),
    );
    assert!(
        d.status
            .conditions
            .iter()
            .all(|c| c.type_ != "TuningApplied")
    );
}

/// A voting pair member whose process hangs (its pod runs on a node that answers, its
/// RPC times out: no getIdentity, no health), asked to fail over: whatever else is
/// pending, the pass waits and says why. It never deletes the pod, never asks the
/// standby to take the identity, never moves the Lease: a hung validator may still
/// sign, and valtune does not stop it for you.
#[test]
fn a_silent_active_makes_a_failover_wait_never_force() {
    use super::super::failover::PodSide;
    use super::super::pair::{Asked, Holder, Member, View};
    use crate::api::validator::FailoverStatus;
    const STAKED: &str = "Stake11111111111111111111111111111111111111";
    let standby = |request: Option<&str>| Member {
        side: PodSide {
            name: "b".into(),
            terminating: false,
            node_ready: Some(true),
            identity: Some("JunkB".into()),
            healthy: true,
            slot: Some(10_000),
        },
        ip: Some("10.0.0.2".into()),
        request: request.map(String::from),
    };
    let mut s = spec(SPEC);
    s.role = ValidatorRole::Voting;
    for pending in [false, true] {
        for seen_signing in [false, true] {
            for asked in [None, Some("1 take"), Some("2 release")] {
                for standby_request in [None, Some("3 take require-tower")] {
                    let silent = Member {
                        side: PodSide {
                            name: "a".into(),
                            terminating: false,
                            node_ready: Some(true),
                            identity: None,
                            healthy: false,
                            slot: None,
                        },
                        ip: Some("10.0.0.1".into()),
                        request: asked.map(String::from),
                    };
                    let mut obs =
                        observed(ours(), Some(pod(if pending { "h0" } else { "h1" })), None);
                    obs.unanswered = Some("http://10.0.0.1:8899/: operation timed out".into());
                    obs.position = None;
                    obs.window = Arc::new(LeaderSchedule { rpc_port: 8899 });
                    obs.look = pending
                        .then(|| Err("getEpochInfo: no answer from http://10.0.0.1:8899/".into()));
                    obs.pair = Some(View {
                        name: "a".into(),
                        agent_port: 10910,
                        staked: STAKED.into(),
                        lease: "valtune-identity-staked".into(),
                        holder: Holder::Us,
                        own: Some(silent),
                        failover: Some(Asked {
                            to: "b".into(),
                            requested: Some("t1".into()),
                            standby: Ok(Some(standby(standby_request))),
                        }),
                        incoming: false,
                    });
                    let previous = ValidatorStatus {
                        failover: Some(FailoverStatus {
                            to: "b".into(),
                            requested: Some("t1".into()),
                            identity: seen_signing.then(|| STAKED.into()),
                            step: String::new(),
                            released_at_slot: None,
                            done: false,
                        }),
                        ..Default::default()
                    };
                    let d = decide(&s, Some(1), &previous, &obs, at());
                    let what = format!(
                        "pending {pending}, seen signing {seen_signing}, asked {asked:?}, standby {standby_request:?}"
                    );
                    assert!(!d.delete_pod, "{what}: deletes the pod");
                    assert!(d.move_lease.is_none(), "{what}: moves the Lease");
                    assert!(
                        !d.annotate
                            .iter()
                            .any(|(p, r)| p == "b" && r.contains("take")),
                        "{what}: {:?}",
                        d.annotate
                    );
                    let f = d.status.failover.clone().unwrap();
                    assert!(
                        f.step.starts_with("waiting: ") && !f.done,
                        "{what}: {}",
                        f.step
                    );
                    if seen_signing {
                        assert!(
                            f.step.contains("does not answer getIdentity"),
                            "{what}: {}",
                            f.step
                        );
                    }
                }
            }
        }
    }
}

/// A client whose container the kubelet restarts says so while it does not answer.
#[test]
fn a_restarting_container_is_reported() {
    let mut p = pod("h1");
    p.restarts = Some("container validator restarted 3 times".into());
    let d = decide(
        &spec(SPEC),
        Some(1),
        &ValidatorStatus::default(),
        &observed(ours(), Some(p), None),
        at(),
    );
    assert_eq!(
        cond(&d, "Ready"),
        (
            "False",
            "ContainerRestarted",
            "the client does not answer its health endpoint: its container validator restarted 3 times"
        )
    );
    assert_eq!(d.status.phase, ValidatorPhase::Starting);
}
