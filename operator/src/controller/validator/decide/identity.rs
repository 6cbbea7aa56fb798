//! One signer per identity: whether this Validator may run a pod with its identity. It
//! holds the identity's Lease (or takes it when nobody does), and no other pod of the
//! identity exists; a failover pair member runs on its spare identity while another
//! holds the staked one ([`super::super::pair`] decides who signs).

use std::time::Duration;

use super::{Act, Pass};
use crate::api::validator::ValidatorPhase;
use crate::controller::validator::observe::LeaseState;

/// What the identity step decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Identity {
    /// The pass goes on: the Lease to take, if any, and the IdentityHeld condition
    /// (holds, reason, message).
    Clear {
        take: Option<String>,
        held: (bool, &'static str, String),
    },
    /// Another Validator or pod has the identity: no pod starts for this one, and why.
    HeldBack(String),
}

/// `identity`: the identity Secret's name (None: no identity given); `lease`: its Lease
/// as read; `pair`: a failover pair member; `others`: pods of the identity that are not
/// this Validator's.
pub fn judge(
    identity: Option<&str>,
    lease: &LeaseState,
    pair: bool,
    others: &[String],
) -> Identity {
    let clear = |take: Option<&String>, holds, reason, message: String| Identity::Clear {
        take: take.cloned(),
        held: (holds, reason, message),
    };
    let judged = match (lease, identity) {
        // A failover pair member runs its pod on its spare identity while another holds
        // the staked one (its pod starts with the spare one; super::super::pair).
        (LeaseState::HeldBy { name, holder }, Some(_)) if pair => clear(
            None,
            false,
            "Spare",
            format!("Lease {name} is held by Validator {holder}"),
        ),
        (LeaseState::HeldBy { name, holder }, Some(secret)) => {
            return Identity::HeldBack(format!(
                "identity Secret {secret} is held by Validator {holder} (Lease {name}): no pod starts for this Validator while that one holds it"
            ));
        }
        (LeaseState::Free { name }, _) => clear(
            Some(name),
            true,
            "Taken",
            format!("this Validator holds Lease {name}"),
        ),
        (LeaseState::Ours { name }, _) => clear(
            None,
            true,
            "Held",
            format!("this Validator holds Lease {name}"),
        ),
        _ => clear(
            None,
            true,
            "NoIdentity",
            "no identity given: nothing to hold".into(),
        ),
    };
    if let (Some(other), Some(secret)) = (others.first(), identity) {
        return Identity::HeldBack(format!(
            "pod {other} still runs with identity Secret {secret}: no second pod starts until it is gone"
        ));
    }
    judged
}

/// The pass goes on: the Lease taken if free, IdentityHeld said.
pub(super) fn apply(pass: &mut Pass<'_>, judged: Identity) {
    if let Identity::Clear {
        take,
        held: (holds, reason, message),
    } = judged
    {
        if let Some(lease) = take {
            pass.act(Act::TakeLease(lease));
        }
        pass.set("IdentityHeld", holds, reason, message);
    }
}

/// The pass ends: no Lease, no pod, said loudly.
pub(super) fn held_back(pass: &mut Pass<'_>, why: String) {
    pass.out.phase = ValidatorPhase::Starting;
    pass.out.pod = None;
    pass.out.version = None;
    pass.set("IdentityHeld", false, "HeldElsewhere", why.clone());
    pass.set("Ready", false, "IdentityHeldElsewhere", why.clone());
    pass.event(true, "IdentityHeldElsewhere", why);
    pass.requeue = Duration::from_secs(15);
}
