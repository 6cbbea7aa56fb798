//! What a Validator's pass does, from what it observed: pure, in small steps, each with
//! its own table test. [`identity`]: may this Validator sign with its identity (the
//! Lease, other pods of the identity); [`pod`]: the pod's life (none, stopping, on a node
//! that does not answer, ended); [`rollout`]: a change of the rendered pod, and the
//! client's restart window; [`health`]: the client's own answer; [`applied`]: the
//! experiment's point the pod runs. A failover pair member's pass then goes through
//! [`super::pair`]. Each step says what it decided; [`decide`] puts that into one
//! [`Step`] for [`super::act`].

mod applied;
mod health;
mod identity;
mod pod;
mod rollout;

use std::time::Duration;

use jiff::Timestamp;

use super::observe::Observed;
use crate::api::validator::{ValidatorPhase, ValidatorSpec, ValidatorStatus};
use crate::controller::status::condition;
pub use crate::controller::step::Note;

/// Something [`super::act`] does, in the order of [`Act::rank`].
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Create the identity's Lease, held by this Validator (a pass that loses the race
    /// stops there and runs again).
    TakeLease(String),
    /// Create the Validator's PodDisruptionBudget unless it exists (every pass).
    EnsureBudget,
    /// Create the claims, generated Secrets, ConfigMaps and the pod.
    CreatePod,
    /// Delete the running pod (with its own, long, grace period).
    DeletePod,
    /// An identity request for a failover pair member's identity agent.
    Annotate { pod: String, request: String },
    /// The staked identity's Lease moves to the standby that signs.
    MoveLease { lease: String, to: String },
    /// An event on the Validator, published once.
    Event(Note),
}

impl Act {
    /// The order of a pass's acts: the Lease first (a pass that loses it stops there),
    /// the pod, the pair's requests, the Lease's move, then events.
    fn rank(&self) -> u8 {
        match self {
            Act::TakeLease(_) => 0,
            Act::EnsureBudget => 1,
            Act::CreatePod => 2,
            Act::DeletePod => 3,
            Act::Annotate { .. } => 4,
            Act::MoveLease { .. } => 5,
            Act::Event(_) => 6,
        }
    }
}

/// A Validator's pass.
pub type Step = crate::controller::step::Step<ValidatorStatus, Act>;

/// A pass being decided: the status being built, the acts, the requeue.
pub(super) struct Pass<'a> {
    previous: &'a ValidatorStatus,
    generation: Option<i64>,
    now: Timestamp,
    out: ValidatorStatus,
    acts: Vec<Act>,
    /// None waits for a change.
    requeue: Option<Duration>,
}

impl<'a> Pass<'a> {
    fn new(previous: &'a ValidatorStatus, generation: Option<i64>, now: Timestamp) -> Self {
        Pass {
            previous,
            generation,
            now,
            out: ValidatorStatus {
                observed_generation: generation,
                conditions: previous.conditions.clone(),
                ..Default::default()
            },
            acts: vec![Act::EnsureBudget],
            requeue: Some(Duration::from_secs(10)),
        }
    }

    /// Sets a condition (moved to the end of the list).
    fn set(&mut self, type_: &str, ok: bool, reason: &str, message: impl Into<String>) {
        let c = condition(
            &self.previous.conditions,
            type_,
            ok,
            reason,
            message,
            self.generation,
            self.now,
        );
        self.out.conditions.retain(|x| x.type_ != type_);
        self.out.conditions.push(c);
    }

    fn act(&mut self, a: Act) {
        self.acts.push(a);
    }

    fn event(&mut self, warning: bool, reason: &str, text: impl Into<String>) {
        self.acts.push(Act::Event(Note {
            warning,
            reason: reason.into(),
            text: text.into(),
        }));
    }

    fn done(mut self) -> Step {
        self.acts.sort_by_key(Act::rank);
        Step {
            status: self.out,
            acts: self.acts,
            requeue: self.requeue,
        }
    }
}

pub fn decide(
    spec: &ValidatorSpec,
    generation: Option<i64>,
    previous: &ValidatorStatus,
    obs: &Observed,
    now: Timestamp,
) -> Step {
    let mut pass = Pass::new(previous, generation, now);
    steps(&mut pass, spec, obs);
    if let Some(view) = &obs.pair {
        pair(&mut pass, view);
    }
    pass.done()
}

/// The steps of every Validator, each of which may end the pass.
fn steps(pass: &mut Pass<'_>, spec: &ValidatorSpec, obs: &Observed) {
    pass.out.pod = obs.pod.as_ref().map(|p| p.name.clone());
    pass.out.version = obs.pod.as_ref().and_then(|p| p.image.clone());
    applied::report(pass, obs);
    let rendered = match &obs.rendered {
        Ok(r) => r,
        Err(why) => return cannot_render(pass, why),
    };
    let identity = spec.identity.as_ref().map(|i| i.secret_name.as_str());
    match identity::judge(identity, &obs.lease, obs.pair.is_some(), &obs.others) {
        identity::Identity::HeldBack(why) => return identity::held_back(pass, why),
        clear => identity::apply(pass, clear),
    }
    let pod = match pod::judge(obs.pod.as_ref()) {
        pod::Life::Runs(p) => p,
        other => return pod::apply(pass, other),
    };
    let verdict = rollout::judge(spec, pass.previous, obs, pod, rendered, pass.now);
    if !rollout::apply(pass, verdict, pod) {
        return;
    }
    let restarts = obs.pod.as_ref().and_then(|p| p.restarts.as_deref());
    health::apply(
        pass,
        health::judge(spec.role, obs.answer.as_ref(), restarts),
        obs,
    );
}

/// Admission refuses what it can judge; what only rendering can (a config key of the
/// version's table, no Prometheus for Besu's block times) ends here, and waits for a
/// change of the Validator (or of the experiment it takes its tuning from, which wakes
/// it too): rendering again cannot help.
fn cannot_render(pass: &mut Pass<'_>, why: &str) {
    pass.out.phase = ValidatorPhase::Failed;
    pass.set(
        "Ready",
        false,
        "CannotRender",
        format!("the pod cannot be rendered: {why}"),
    );
    pass.event(true, "CannotRender", why);
    pass.requeue = None;
}

/// A failover pair member: who signs with the staked identity, the failover's step.
fn pair(pass: &mut Pass<'_>, view: &super::pair::View) {
    let out = super::pair::decide(view, pass.previous.failover.as_ref(), pass.now.as_second());
    let (holds, reason, message) = out.held;
    pass.set("IdentityHeld", holds, reason, message);
    pass.out.phase = match pass.out.phase {
        ValidatorPhase::Running if !holds => ValidatorPhase::Standby,
        ValidatorPhase::Standby if holds => ValidatorPhase::Running,
        p => p,
    };
    if out.failover.as_ref().is_some_and(|f| !f.done) {
        let soon = Duration::from_secs(2);
        pass.requeue = Some(pass.requeue.map_or(soon, |r| r.min(soon)));
    }
    pass.out.failover = out.failover;
    for (pod, request) in out.annotate {
        pass.act(Act::Annotate { pod, request });
    }
    if let Some(to) = out.move_lease_to {
        pass.act(Act::MoveLease {
            lease: view.lease.clone(),
            to,
        });
    }
    for (warning, reason, text) in out.events {
        pass.event(warning, reason, text);
    }
}

#[cfg(test)]
mod tests;
