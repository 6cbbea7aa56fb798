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

pub fn judge(role: ValidatorRole, answer: Option<&Answer>) -> Health {
    let Some(a) = answer else {
        return Health {
            phase: ValidatorPhase::Starting,
            ready: (
                false,
                "NoAnswer",
                "the client does not answer its health endpoint yet".into(),
            ),
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
        pass.requeue = Duration::from_secs(3);
    }
}
