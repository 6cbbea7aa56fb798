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
    pass.requeue = Some(Duration::from_secs(15));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::yaml;

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Row {
        what: String,
        identity: Option<String>,
        lease: LeaseState,
        #[serde(default)]
        pair: bool,
        #[serde(default)]
        others: Vec<String>,
        expect: Expect,
    }

    /// The Lease taken, IdentityHeld's reason and (part of) its message; or (part of)
    /// why the pass is held back.
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    enum Expect {
        Clear {
            take: Option<String>,
            held: bool,
            reason: String,
            says: String,
        },
        HeldBack(String),
    }

    #[test]
    fn the_table() {
        let rows: Vec<Row> = yaml(
            r#"
            - what: no identity given, nothing to hold
              lease: noIdentity
              expect: {clear: {held: true, reason: NoIdentity, says: nothing to hold}}
            - what: a free Lease is taken
              identity: node-key
              lease: {free: {name: valtune-identity-node-key}}
              expect:
                clear:
                  take: valtune-identity-node-key
                  held: true
                  reason: Taken
                  says: this Validator holds Lease valtune-identity-node-key
            - what: its own Lease is held, not taken again
              identity: node-key
              lease: {ours: {name: valtune-identity-node-key}}
              expect: {clear: {held: true, reason: Held, says: holds Lease valtune-identity-node-key}}
            - what: a Lease another Validator holds keeps this one from starting a pod
              identity: node-key
              lease: {heldBy: {name: valtune-identity-node-key, holder: first}}
              expect:
                heldBack: >-
                  identity Secret node-key is held by Validator first (Lease
                  valtune-identity-node-key): no pod starts for this Validator while that
                  one holds it
            - what: a pair member runs its spare identity while another holds the staked one
              identity: spare-a
              lease: {heldBy: {name: valtune-identity-staked, holder: b}}
              pair: true
              expect: {clear: {held: false, reason: Spare, says: Lease valtune-identity-staked is held by Validator b}}
            - what: another pod of the identity holds back even a free Lease
              identity: node-key
              lease: {free: {name: valtune-identity-node-key}}
              others: [besu-old]
              expect:
                heldBack: >-
                  pod besu-old still runs with identity Secret node-key: no second pod
                  starts until it is gone
            - what: and a Lease of its own
              identity: node-key
              lease: {ours: {name: valtune-identity-node-key}}
              others: [besu-old]
              expect: {heldBack: pod besu-old still runs}
            "#,
        );
        for row in rows {
            let got = judge(row.identity.as_deref(), &row.lease, row.pair, &row.others);
            let what = &row.what;
            match (got, row.expect) {
                (
                    Identity::Clear {
                        take,
                        held: (held, reason, message),
                    },
                    Expect::Clear {
                        take: want_take,
                        held: want_held,
                        reason: want_reason,
                        says,
                    },
                ) => {
                    assert_eq!(take, want_take, "{what}");
                    assert_eq!((held, reason), (want_held, want_reason.as_str()), "{what}");
                    assert!(message.contains(&says), "{what}: {message}");
                }
                (Identity::HeldBack(why), Expect::HeldBack(want)) => {
                    assert!(why.contains(&want), "{what}: {why}")
                }
                (got, _) => panic!("{what}: {got:?}"),
            }
        }
    }

    /// Held back: no Lease taken, no pod, the reason in both conditions and an event.
    #[test]
    fn held_back_takes_nothing_and_says_why_twice() {
        let previous = Default::default();
        let mut pass = Pass::new(&previous, Some(1), "2026-11-27T22:00:00Z".parse().unwrap());
        pass.out.pod = Some("v".into());
        held_back(
            &mut pass,
            "identity Secret node-key is held by Validator first".into(),
        );
        let step = pass.done();
        assert_eq!(step.status.phase, ValidatorPhase::Starting);
        assert_eq!(step.status.pod, None);
        let reasons: Vec<(&str, &str)> = step
            .status
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("IdentityHeld", "HeldElsewhere"),
                ("Ready", "IdentityHeldElsewhere")
            ]
        );
        assert!(
            step.acts
                .iter()
                .all(|a| matches!(a, Act::EnsureBudget | Act::Event(_))),
            "{:?}",
            step.acts
        );
        assert_eq!(step.requeue, Some(Duration::from_secs(15)));
    }
}
