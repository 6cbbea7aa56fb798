//! Health, from the client's own answer at its health endpoint: Ready and CaughtUp, the
//! phase of a pod that runs what is rendered, the answer verbatim in status.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Pass;
use crate::api::validator::{ValidatorPhase, ValidatorRole};
use crate::clients::health::Health as Said;
use crate::controller::validator::observe::{Answer, Observed};

/// What the health step decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    /// The phase of a pod that runs what is rendered.
    pub phase: ValidatorPhase,
    /// Ready and CaughtUp: (true, reason, message).
    pub ready: (bool, &'static str, String),
    pub caught_up: (bool, &'static str, String),
    /// The answer as the client gave it ([`verbatim`]).
    pub said: Option<String>,
}

/// `restarts` is the kubelet's account of the client's container restarting, if it is.
pub fn judge(role: ValidatorRole, answer: Option<&Answer>, restarts: Option<&str>) -> Health {
    let Some(a) = answer else {
        // A container the kubelet restarts says so, in the kubelet's words.
        let ready = match restarts {
            Some(r) => (
                false,
                "ContainerRestarted",
                format!("the client does not answer its health endpoint: its {r}"),
            ),
            None => (
                false,
                "NoAnswer",
                "the client does not answer its health endpoint yet".into(),
            ),
        };
        return Health {
            phase: ValidatorPhase::Starting,
            ready,
            caught_up: (false, "NoAnswer", "no health answer yet".into()),
            said: None,
        };
    };
    let said = verbatim(a);
    let says = format!("the client says: {said}");
    let (phase, ready, caught_up) = match a.health {
        Said::Healthy => (
            if role == ValidatorRole::Standby {
                ValidatorPhase::Standby
            } else {
                ValidatorPhase::Running
            },
            (true, "Healthy", says),
            (
                true,
                "Healthy",
                "in sync with the chain, as the client says".to_string(),
            ),
        ),
        Said::Behind => (
            ValidatorPhase::CatchingUp,
            (false, "Behind", says),
            (false, "Behind", "catching up with the chain".to_string()),
        ),
        Said::Unknown => (
            ValidatorPhase::Starting,
            (false, "Unknown", says),
            (false, "Unknown", "the client cannot tell yet".to_string()),
        ),
    };
    Health {
        phase,
        ready,
        caught_up,
        said: Some(said),
    }
}

/// The answer as the client gave it: the HTTP status and the body on one line, its
/// first 512 characters (nodeos' get_info is longer than a status column needs).
pub fn verbatim(a: &Answer) -> String {
    let body: String = a.body.split_whitespace().collect::<Vec<_>>().join(" ");
    let body: String = body.chars().take(512).collect();
    format!("HTTP {}: {body}", a.code)
}

/// The status of a pod that runs: its health, head and lag; RestartPending while a
/// change waits.
pub(super) fn apply(pass: &mut Pass<'_>, health: Health, obs: &Observed) {
    pass.out.last_probe_time = Some(Time(pass.now));
    if let Some((head, lag)) = obs.position {
        pass.out.head = Some(head);
        pass.out.lag = Some(lag);
    }
    if health.said.is_some() {
        pass.out.health = health.said;
    }
    let (ok, reason, message) = health.ready;
    pass.set("Ready", ok, reason, message);
    let (ok, reason, message) = health.caught_up;
    pass.set("CaughtUp", ok, reason, message);
    pass.out.phase = if pass.out.pending_change.is_some() {
        ValidatorPhase::RestartPending
    } else {
        health.phase
    };
    if health.phase != ValidatorPhase::Running && health.phase != ValidatorPhase::Standby {
        pass.requeue = Some(Duration::from_secs(3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::validator::observed;
    use crate::fixtures::yaml;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Row {
        what: String,
        role: ValidatorRole,
        /// What the pass observed ([`observed`]): the answer.
        observed: serde_json::Value,
        expect: Expect,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Expect {
        phase: ValidatorPhase,
        /// Ready's and CaughtUp's (status, reason).
        ready: (bool, String),
        caught_up: (bool, String),
        /// The answer in status.
        said: Option<String>,
    }

    #[test]
    fn the_table() {
        let rows: Vec<Row> = yaml(
            r#"
            - what: no answer yet
              role: voting
              observed: {}
              expect: {phase: Starting, ready: [false, NoAnswer], caughtUp: [false, NoAnswer]}
            - what: Besu says UP
              role: nonVoting
              observed:
                answer: {code: 200, body: "{\n  \"status\" : \"UP\"\n}", health: healthy}
              expect:
                phase: Running
                ready: [true, Healthy]
                caughtUp: [true, Healthy]
                said: 'HTTP 200: { "status" : "UP" }'
            - what: a healthy standby is a standby
              role: standby
              observed:
                answer: {code: 200, body: '{"jsonrpc":"2.0","result":"ok","id":1}', health: healthy}
              expect:
                phase: Standby
                ready: [true, Healthy]
                caughtUp: [true, Healthy]
                said: 'HTTP 200: {"jsonrpc":"2.0","result":"ok","id":1}'
            - what: Agave behind catches up
              role: voting
              observed:
                answer:
                  code: 200
                  body: '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind by 42 slots","data":{"numSlotsBehind":42}},"id":1}'
                  health: behind
              expect:
                phase: CatchingUp
                ready: [false, Behind]
                caughtUp: [false, Behind]
                said: 'HTTP 200: {"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind by 42 slots","data":{"numSlotsBehind":42}},"id":1}'
            - what: Besu not ready, for a reason it does not give
              role: nonVoting
              observed:
                answer: {code: 503, body: "{\n  \"status\" : \"DOWN\"\n}", health: unknown}
              expect:
                phase: Starting
                ready: [false, Unknown]
                caughtUp: [false, Unknown]
                said: 'HTTP 503: { "status" : "DOWN" }'
            "#,
        );
        for row in rows {
            let what = &row.what;
            let obs = observed(&serde_json::to_string(&row.observed).unwrap());
            let h = judge(row.role, obs.answer.as_ref(), None);
            assert_eq!(h.phase, row.expect.phase, "{what}");
            assert_eq!(
                (h.ready.0, h.ready.1),
                (row.expect.ready.0, row.expect.ready.1.as_str()),
                "{what}"
            );
            assert_eq!(
                (h.caught_up.0, h.caught_up.1),
                (row.expect.caught_up.0, row.expect.caught_up.1.as_str()),
                "{what}"
            );
            assert_eq!(h.said, row.expect.said, "{what}");
        }
    }

    /// A long answer keeps its first 512 characters, on one line.
    #[test]
    fn a_long_answer_is_cut_to_one_line() {
        let body = format!(
            "{{\n \"head_block_num\": 1,\n \"x\": \"{}\"\n}}",
            "a".repeat(600)
        );
        let a = Answer {
            code: 200,
            body,
            health: Said::Healthy,
        };
        let said = verbatim(&a);
        assert!(
            said.starts_with("HTTP 200: { \"head_block_num\": 1, \"x\": \"aaa"),
            "{said}"
        );
        assert_eq!(said.chars().count(), "HTTP 200: ".len() + 512);
        assert!(!said.contains('\n'));
    }

    /// While a change waits the phase says so, and a pod that is not yet Running or
    /// Standby is looked at again sooner.
    #[test]
    fn a_pending_change_shows_in_the_phase() {
        let previous = Default::default();
        let mut pass = Pass::new(&previous, Some(1), "2026-11-27T22:00:00Z".parse().unwrap());
        pass.out.pending_change = Some(crate::api::validator::PendingChange {
            hash: "h1".into(),
            waiting_for: "waiting: the window".into(),
            snapshot_slot: None,
            incremental_seen: false,
        });
        let obs = observed("position: [100, 3]");
        apply(&mut pass, judge(ValidatorRole::Voting, None, None), &obs);
        let step = pass.done();
        assert_eq!(step.status.phase, ValidatorPhase::RestartPending);
        assert_eq!((step.status.head, step.status.lag), (Some(100), Some(3)));
        assert_eq!(step.requeue, Some(Duration::from_secs(3)));
    }
}
