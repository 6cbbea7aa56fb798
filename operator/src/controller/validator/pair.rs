//! A failover pair member's pass (an Agave or Frankendancer Validator with `spareIdentity`, or a standby
//! with `standbyFor`): who signs with the staked identity, and the failover's next step.
//! Pure: what it asks is done by [`super::act`] (the pod's identity-request annotation,
//! which the pod's identity agent follows; the Lease moved to the standby).
//!
//! - The holder of the staked identity's Lease signs with it: its pod starts with its
//!   spare identity (the link's first target) and is asked to take the staked one.
//! - A member that does not hold the Lease and reports the staked identity is asked to
//!   let go of it, loudly.
//! - The holder with `valtune.dev/failover-to` moves it to the standby in the order
//!   [`super::failover::next`] decides: the standby takes it only once the active reports
//!   another identity (its own `getIdentity`) or its pod is gone; the Lease moves only
//!   once the standby reports it and the active does not.

use kube::ResourceExt;

use super::failover::{self, Memory, PodSide, Side, Step, Tower};
use super::observe::{lease_name, staked_of};
use crate::api::Validator;
use crate::api::validator::{FAILOVER_REQUESTED, FAILOVER_TO, FailoverStatus};

/// A member's pod as seen: what it says, its address, the request on it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Member {
    pub side: PodSide,
    pub ip: Option<String>,
    /// Its `valtune.dev/identity-request` annotation.
    pub request: Option<String>,
}

/// Who holds the staked identity's Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Holder {
    /// This Validator.
    Us,
    /// Another Validator (its name), or nobody yet.
    Other(Option<String>),
}

/// A failover asked of this Validator.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub to: String,
    /// The `valtune.dev/failover-requested` annotation.
    pub requested: Option<String>,
    /// The standby's pod, or why the standby cannot take the identity.
    pub standby: Result<Option<Member>, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub name: String,
    /// This member's identity agent port (`identityAgentPort`): where it serves its
    /// tower files when it hands the identity over.
    pub agent_port: i32,
    /// The staked identity's public key (`identity.publicKey` / `standbyFor.publicKey`).
    pub staked: String,
    pub lease: String,
    pub holder: Holder,
    pub own: Option<Member>,
    pub failover: Option<Asked>,
    /// The holder asks a failover to this Validator (its `valtune.dev/failover-to`):
    /// between the moment this one takes the identity and the Lease's move, it reports
    /// the identity without holding the Lease, as it should.
    pub incoming: bool,
}

/// What the pass asks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Out {
    /// (pod, request) annotations to write.
    pub annotate: Vec<(String, String)>,
    /// Move the Lease to this Validator.
    pub move_lease_to: Option<String>,
    pub events: Vec<(bool, &'static str, String)>,
    pub failover: Option<FailoverStatus>,
    /// IdentityHeld: (holds, reason, message).
    pub held: (bool, &'static str, String),
}

fn verb(request: Option<&str>) -> Option<&str> {
    request.and_then(|r| r.split_whitespace().nth(1))
}

/// A request without its nonce: what was asked.
fn wanted(request: Option<&str>) -> Option<&str> {
    request
        .and_then(|r| r.split_once(' '))
        .map(|(_, rest)| rest)
}

fn reports(m: Option<&Member>) -> String {
    m.and_then(|m| m.side.identity.clone())
        .map(|i| format!("its pod reports identity {i}"))
        .unwrap_or_else(|| "its pod reports no identity yet".into())
}

/// The pass's decision; `nonce` makes each new request differ from the last (the time).
pub fn decide(view: &View, previous: Option<&FailoverStatus>, nonce: i64) -> Out {
    let mut out = Out::default();
    let own = view.own.as_ref();
    let own_signs = own.is_some_and(|m| m.side.identity.as_deref() == Some(view.staked.as_str()));
    let ask = |out: &mut Out, m: &Member, what: &str| {
        out.annotate
            .push((m.side.name.clone(), format!("{nonce} {what}")));
    };

    if let Holder::Other(holder) = &view.holder {
        let by = holder
            .as_deref()
            .map(|h| format!("held by Validator {h}"))
            .unwrap_or_else(|| "not held yet".into());
        out.held = (
            false,
            "Spare",
            format!(
                "Lease {} of the staked identity {} is {by}: this Validator runs its spare identity ({})",
                view.lease,
                view.staked,
                reports(own)
            ),
        );
        if let Some(m) = own.filter(|_| own_signs && !view.incoming)
            && verb(m.request.as_deref()) != Some("release")
        {
            ask(&mut out, m, "release");
            out.events.push((
                true,
                "ReleasingIdentity",
                format!(
                    "pod {} reports the staked identity {} while Lease {} is {by}: asking it to switch to its spare identity",
                    m.side.name, view.staked, view.lease
                ),
            ));
        }
        // A failover this Validator recorded stays in its status once done.
        out.failover = previous.filter(|f| f.done).cloned();
        return out;
    }

    out.held = (
        true,
        "Signs",
        format!(
            "this Validator holds Lease {} of the staked identity {} ({})",
            view.lease,
            view.staked,
            reports(own)
        ),
    );
    let Some(asked) = view.failover.as_ref().filter(|a| {
        !previous.is_some_and(|f| f.done && f.to == a.to && f.requested == a.requested)
    }) else {
        // The holder signs: a pod that runs its spare identity (a first start, the link's
        // first target) is asked to take the staked one.
        // Not a pod this Validator released in a failover it recorded as done (a Lease
        // read before its move).
        let released = previous.is_some_and(|f| f.done);
        if let Some(m) = own.filter(|m| m.side.identity.is_some() && !own_signs)
            && verb(m.request.as_deref()) != Some("take")
            && !(released && verb(m.request.as_deref()) == Some("release"))
        {
            ask(&mut out, m, "take");
            out.events.push((
                false,
                "TakingIdentity",
                format!(
                    "this Validator holds Lease {}: asking pod {} (identity {}) to take the staked identity {}",
                    view.lease,
                    m.side.name,
                    m.side.identity.as_deref().unwrap_or_default(),
                    view.staked
                ),
            ));
        }
        out.failover = previous.cloned();
        return out;
    };

    let same = |f: &&FailoverStatus| f.to == asked.to && f.requested == asked.requested;
    let mut status = FailoverStatus {
        to: asked.to.clone(),
        requested: asked.requested.clone(),
        identity: previous.filter(same).and_then(|f| f.identity.clone()),
        step: String::new(),
        released_at_slot: previous.filter(same).and_then(|f| f.released_at_slot),
        done: false,
    };
    let wait = |out: &mut Out, status: &mut FailoverStatus, why: String| {
        status.step = format!("waiting: {why}");
        out.failover = Some(status.clone());
    };
    let standby = match &asked.standby {
        Ok(Some(m)) => m,
        Ok(None) => {
            wait(
                &mut out,
                &mut status,
                format!("standby {} has no pod", asked.to),
            );
            return out;
        }
        Err(why) => {
            wait(&mut out, &mut status, why.clone());
            return out;
        }
    };
    // The failover starts only from an active seen signing with the identity named in
    // the spec: a wrong publicKey would otherwise read as "it let go".
    if status.identity.is_none() {
        if own_signs {
            status.identity = Some(view.staked.clone());
        } else {
            wait(
                &mut out,
                &mut status,
                format!(
                    "this Validator has not been seen signing with identity.publicKey {} ({}): a failover starts from the active that signs",
                    view.staked,
                    reports(own)
                ),
            );
            return out;
        }
    }
    let active = Side {
        name: view.name.clone(),
        pod: own.map(|m| m.side.clone()),
    };
    let sb = Side {
        name: asked.to.clone(),
        pod: Some(standby.side.clone()),
    };
    let tower = match own {
        Some(m) if !m.side.terminating && m.side.node_ready != Some(false) && m.ip.is_some() => {
            Tower::Readable
        }
        Some(m) => Tower::Unreadable(format!("the active's pod {} cannot serve it", m.side.name)),
        None => Tower::Unreadable("the active's pod is gone".into()),
    };
    let let_go = own.is_none_or(|m| m.side.identity.as_deref().is_some_and(|i| i != view.staked));
    if let_go && status.released_at_slot.is_none() {
        status.released_at_slot = standby.side.slot.map(|s| s as i64);
    }
    let memory = Memory {
        released_at_slot: status.released_at_slot.map(|s| s as u64),
    };
    let step = failover::next(&active, &sb, &view.staked, true, &tower, &memory);
    // The same request is not written again; another one is (the tower copy given up
    // for the no-tower path once the active's pod is gone, say).
    let standby_asked = |what: &str| wanted(standby.request.as_deref()) == Some(what);
    match step {
        Step::Wait(why) => wait(&mut out, &mut status, why),
        Step::StopActive => wait(
            &mut out,
            &mut status,
            "the active's pod does not answer getIdentity: it may still sign, and valtune does not stop it for you; once it is stopped (kubectl delete pod), the failover goes on"
                .into(),
        ),
        Step::SwitchActive => {
            status.step = "the active switches to its spare identity (set-identity)".into();
            if let Some(m) = own
                && verb(m.request.as_deref()) != Some("release")
            {
                ask(&mut out, m, "release");
                out.events.push((
                    false,
                    "FailoverSwitchActive",
                    format!(
                        "failover to {}: asking pod {} to switch to its spare identity (set-identity SPARE)",
                        asked.to, m.side.name
                    ),
                ));
            }
        }
        Step::CopyTower | Step::StandbyTakes { .. } => {
            let (what, how) = match (&step, own.and_then(|m| m.ip.as_deref())) {
                (Step::CopyTower, Some(ip)) => (
                    format!(
                        "take require-tower tower=http://{ip}:{}/tower-1_9-{}.bin",
                        view.agent_port, view.staked
                    ),
                    format!("with the tower file copied from {ip}"),
                ),
                (Step::StandbyTakes { require_tower: true }, _) => (
                    "take require-tower".into(),
                    "with its tower file".to_string(),
                ),
                _ => (
                    "take".into(),
                    format!(
                        "without the tower file, {} slots after the active let go",
                        failover::NO_TOWER_WAIT_SLOTS
                    ),
                ),
            };
            status.step = format!("the standby takes the identity {how} (set-identity)");
            if !standby_asked(&what) {
                ask(&mut out, standby, &what);
                out.events.push((
                    false,
                    "FailoverStandbyTakes",
                    format!(
                        "failover to {}: pod {} of this Validator reports {}; asking pod {} to take identity {} {how}",
                        asked.to,
                        view.name,
                        own.and_then(|m| m.side.identity.as_deref())
                            .unwrap_or("nothing (gone)"),
                        standby.side.name,
                        view.staked
                    ),
                ));
            }
        }
        Step::MoveLease => {
            status.step = format!("{} signs with identity {}", asked.to, view.staked);
            status.done = true;
            out.move_lease_to = Some(asked.to.clone());
            out.events.push((
                false,
                "FailoverDone",
                format!(
                    "failover to {}: its pod reports identity {} and this one {}; Lease {} moves to {}",
                    asked.to,
                    view.staked,
                    own.and_then(|m| m.side.identity.as_deref())
                        .unwrap_or("nothing (gone)"),
                    view.lease,
                    asked.to
                ),
            ));
        }
        Step::TwoSigners(why) => {
            status.step = format!("stopped: {why}");
            out.events.push((true, "TwoSigners", why));
            if let Some(m) = own {
                ask(&mut out, m, "release");
            }
        }
    }
    out.failover = Some(status);
    out
}

/// Whether `from` may hand the staked identity to `to`: both members of one pair (the
/// same staked Secret and public key, whichever field names it), and `from` the holder
/// of its Lease (`holder`: the Lease's holder, None when nobody holds it). The Lease
/// decides, not the manifests' roles: after a failover the standby signs, and moving
/// the identity back starts from it without editing `spec`.
pub fn hand_over(from: &Validator, to: &Validator, holder: Option<&str>) -> Result<(), String> {
    let (a, b) = (from.name_any(), to.name_any());
    let Some(staked) = staked_of(from) else {
        return Err(format!(
            "Validator {a} is not a failover pair member: a voting Agave or Frankendancer with spec.spareIdentity, or a standby with spec.standbyFor (see docs/validators.md, failover)"
        ));
    };
    if a == b {
        return Err(format!("--to {b} is Validator {a} itself"));
    }
    let same = staked_of(to)
        .is_some_and(|k| k.secret_name == staked.secret_name && k.public_key == staked.public_key);
    if !same {
        return Err(format!(
            "Validator {b} is not the other member of {a}'s pair: its staked identity (spec.identity with spec.spareIdentity, or spec.standbyFor) must name Secret {} and publicKey {}",
            staked.secret_name,
            staked.public_key.as_deref().unwrap_or("(none)")
        ));
    }
    let lease = lease_name(&staked.secret_name);
    match holder {
        Some(h) if h == a => Ok(()),
        Some(h) if h == b => Err(format!(
            "{b} already signs with the identity (it holds Lease {lease}): nothing to move"
        )),
        Some(h) => Err(format!(
            "Validator {h} holds Lease {lease}, not {a}: only the holder hands the identity over (valtune failover {h} --to ...)"
        )),
        None => Err(format!(
            "nobody holds Lease {lease} yet: the operator gives it to the voting member first; wait until it signs"
        )),
    }
}

/// How a holder's failover annotation concerns the Validator `name`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Incoming {
    /// It names another Validator, or none.
    No,
    /// It moves the identity to `name`, not recorded done: `name` may report the
    /// identity before the Lease is its own.
    Moving,
    /// It moved the identity to `name` and recorded that done: the Lease is `name`'s,
    /// unless it was read before the holder moved it, or was moved back since (the
    /// annotation stays on the Validator that handed it over).
    Done,
}

/// What `holder`'s `valtune.dev/failover-to` (and the status it records for it) says of
/// `name`. A done failover is not an incoming one: after a move back the old holder's
/// annotation still names the Validator that signs no more, which must then be asked
/// to let go if it reports the identity.
pub fn incoming(holder: &Validator, name: &str) -> Incoming {
    let annotations = holder.annotations();
    if annotations.get(FAILOVER_TO).map(String::as_str) != Some(name) {
        return Incoming::No;
    }
    let requested = annotations.get(FAILOVER_REQUESTED);
    let done = holder
        .status
        .as_ref()
        .and_then(|s| s.failover.as_ref())
        .is_some_and(|f| f.done && f.to == name && f.requested.as_ref() == requested);
    if done {
        Incoming::Done
    } else {
        Incoming::Moving
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAKED: &str = "Stake11111111111111111111111111111111111111";

    fn member(name: &str, id: &str, request: Option<&str>) -> Member {
        Member {
            side: PodSide {
                name: name.into(),
                terminating: false,
                node_ready: Some(true),
                identity: Some(id.into()),
                healthy: true,
                slot: Some(1_000),
            },
            ip: Some("10.0.0.1".into()),
            request: request.map(String::from),
        }
    }

    fn view(holder: Holder, own: Member, standby: Option<Member>) -> View {
        View {
            name: "a".into(),
            agent_port: 8910,
            staked: STAKED.into(),
            lease: "valtune-identity-staked".into(),
            holder,
            own: Some(own),
            incoming: false,
            failover: standby.map(|s| Asked {
                to: "b".into(),
                requested: Some("t1".into()),
                standby: Ok(Some(s)),
            }),
        }
    }

    /// The failover's walk, pass by pass: the active lets go, the standby takes the
    /// identity with the tower copied from the active's agent, the Lease moves; then
    /// neither member is asked anything more.
    #[test]
    fn a_failover_walks_its_steps() {
        // The holder's pod on its spare identity is asked to take the staked one.
        let out = decide(&view(Holder::Us, member("a", "JunkA", None), None), None, 1);
        assert_eq!(out.annotate, vec![("a".into(), "1 take".into())]);
        assert!(out.held.0);

        // A failover: the active switches first.
        let out = decide(
            &view(
                Holder::Us,
                member("a", STAKED, Some("1 take")),
                Some(member("b", "JunkB", None)),
            ),
            None,
            2,
        );
        assert_eq!(out.annotate, vec![("a".into(), "2 release".into())]);
        let f = out.failover.unwrap();
        assert_eq!(f.identity.as_deref(), Some(STAKED));
        // Asked already: not asked again, and the standby still is not.
        let out = decide(
            &view(
                Holder::Us,
                member("a", STAKED, Some("2 release")),
                Some(member("b", "JunkB", None)),
            ),
            Some(&f),
            3,
        );
        assert!(out.annotate.is_empty(), "{:?}", out.annotate);
        // The active reports its spare identity: the standby takes it, with the tower.
        let out = decide(
            &view(
                Holder::Us,
                member("a", "JunkA", Some("2 release")),
                Some(member("b", "JunkB", None)),
            ),
            Some(&f),
            4,
        );
        assert_eq!(
            out.annotate,
            vec![(
                "b".into(),
                format!("4 take require-tower tower=http://10.0.0.1:8910/tower-1_9-{STAKED}.bin")
            )]
        );
        let f = out.failover.unwrap();
        assert_eq!(f.released_at_slot, Some(1_000));
        // The standby reports it: the Lease moves.
        let out = decide(
            &view(
                Holder::Us,
                member("a", "JunkA", Some("2 release")),
                Some(member("b", STAKED, Some("4 take"))),
            ),
            Some(&f),
            5,
        );
        assert_eq!(out.move_lease_to.as_deref(), Some("b"));
        let f = out.failover.unwrap();
        assert!(f.done);
        // Afterwards the old active holds nothing and is asked nothing; the annotation
        // still there does not start the failover again.
        let out = decide(
            &view(
                Holder::Other(Some("b".into())),
                member("a", "JunkA", Some("2 release")),
                Some(member("b", STAKED, Some("4 take"))),
            ),
            Some(&f),
            6,
        );
        assert!(out.annotate.is_empty() && out.move_lease_to.is_none());
        assert!(!out.held.0 && out.failover.unwrap().done);
    }

    /// The active's pod gone after the standby was asked to copy its tower: once the
    /// guide's 200 slots have passed since it let go, the standby is asked again, to take
    /// the identity without the tower.
    #[test]
    fn a_tower_that_cannot_be_copied_any_more_gives_way_to_the_wait() {
        let f = FailoverStatus {
            to: "b".into(),
            requested: Some("t1".into()),
            identity: Some(STAKED.into()),
            step: String::new(),
            released_at_slot: Some(1_000),
            done: false,
        };
        let copying = Some("4 take require-tower tower=http://10.0.0.1:8910/tower-1_9-x.bin");
        let mut gone = view(
            Holder::Us,
            member("a", "JunkA", None),
            Some(member("b", "JunkB", copying)),
        );
        gone.own = None;
        let out = decide(&gone, Some(&f), 5);
        assert!(out.annotate.is_empty(), "{:?}", out.annotate);
        assert!(out.failover.unwrap().step.contains("200 slots"));
        let mut later = member("b", "JunkB", copying);
        later.side.slot = Some(1_250);
        gone.failover.as_mut().unwrap().standby = Ok(Some(later));
        let out = decide(&gone, Some(&f), 6);
        assert_eq!(out.annotate, vec![("b".into(), "6 take".into())]);
    }

    /// A member that does not hold the Lease and reports the staked identity is asked to
    /// let go; one whose spec names a public key it never reported starts no failover.
    #[test]
    fn a_signer_without_the_lease_lets_go_and_a_wrong_key_starts_nothing() {
        let out = decide(
            &view(
                Holder::Other(Some("b".into())),
                member("a", STAKED, None),
                None,
            ),
            None,
            7,
        );
        assert_eq!(out.annotate, vec![("a".into(), "7 release".into())]);
        assert!(out.events[0].0);
        // Unless the holder is moving the identity to it: it took it, the Lease follows.
        let mut incoming = view(
            Holder::Other(Some("b".into())),
            member("a", STAKED, None),
            None,
        );
        incoming.incoming = true;
        assert!(decide(&incoming, None, 7).annotate.is_empty());

        let out = decide(
            &view(
                Holder::Us,
                member("a", "SomethingElse", Some("1 take")),
                Some(member("b", "JunkB", None)),
            ),
            None,
            8,
        );
        assert!(out.annotate.is_empty());
        assert!(
            out.failover
                .unwrap()
                .step
                .contains("has not been seen signing")
        );
    }

    /// The move back: the standby that signs since a failover holds the Lease and hands
    /// the identity to the first member in the same steps (it switches to its own spare
    /// identity, the other copies the tower from this one's agent and takes it, the
    /// Lease moves); afterwards the member that let go is asked to let go again if it
    /// ever reports the identity, and the first member is asked nothing.
    #[test]
    fn a_move_back_walks_the_same_steps_from_the_standby() {
        let back = |own: Member, other: Member| {
            let mut v = view(Holder::Us, own, None);
            v.name = "b".into();
            v.failover = Some(Asked {
                to: "a".into(),
                requested: Some("t2".into()),
                standby: Ok(Some(other)),
            });
            v
        };
        let mut b = member("b", STAKED, Some("4 take require-tower"));
        b.ip = Some("10.0.0.2".into());
        let out = decide(
            &back(b.clone(), member("a", "JunkA", Some("2 release"))),
            None,
            7,
        );
        assert_eq!(out.annotate, vec![("b".into(), "7 release".into())]);
        let f = out.failover.unwrap();
        assert_eq!((f.to.as_str(), f.identity.as_deref()), ("a", Some(STAKED)));
        b.side.identity = Some("JunkB".into());
        b.request = Some("7 release".into());
        let out = decide(
            &back(b.clone(), member("a", "JunkA", Some("2 release"))),
            Some(&f),
            8,
        );
        assert_eq!(
            out.annotate,
            vec![(
                "a".into(),
                format!("8 take require-tower tower=http://10.0.0.2:8910/tower-1_9-{STAKED}.bin")
            )]
        );
        let f = out.failover.unwrap();
        let out = decide(
            &back(b.clone(), member("a", STAKED, Some("8 take"))),
            Some(&f),
            9,
        );
        assert_eq!(out.move_lease_to.as_deref(), Some("a"));
        let done = out.failover.unwrap();
        assert!(done.done);

        // a holds again; its own failover to b, recorded done, is not started again.
        let mut a = view(
            Holder::Us,
            member("a", STAKED, Some("8 take")),
            Some(member("b", "JunkB", Some("7 release"))),
        );
        let first = FailoverStatus {
            to: "b".into(),
            requested: Some("t1".into()),
            identity: Some(STAKED.into()),
            step: String::new(),
            released_at_slot: Some(1_000),
            done: true,
        };
        let out = decide(&a, Some(&first), 10);
        assert!(out.annotate.is_empty() && out.held.0, "{out:?}");
        assert_eq!(out.failover.as_ref(), Some(&first));
        // A new request to b from a is a new failover.
        a.failover.as_mut().unwrap().requested = Some("t3".into());
        let out = decide(&a, Some(&first), 11);
        assert_eq!(out.annotate, vec![("a".into(), "11 release".into())]);

        // b, the holder no more, reporting the identity again is asked to let go: a's
        // annotation still names b, but that failover is done (not incoming).
        let mut b_after = view(Holder::Other(Some("a".into())), b.clone(), None);
        b_after.name = "b".into();
        let own = b_after.own.as_mut().unwrap();
        own.side.identity = Some(STAKED.into());
        own.request = None;
        let out = decide(&b_after, Some(&done), 12);
        assert_eq!(out.annotate, vec![("b".into(), "12 release".into())]);
    }

    fn validator(name: &str, yaml: &str) -> Validator {
        let mut v: Validator = serde_saphyr::from_str(yaml).unwrap();
        v.metadata.name = Some(name.into());
        v
    }

    const ACTIVE: &str = "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {name: x}\nspec:\n  nodeName: n1\n  role: voting\n  identity: {secretName: staked, publicKey: Stake11111111111111111111111111111111111111}\n  spareIdentity: {secretName: spare-a}\n  voteAccount: {secretName: vote}\n  template: {agave: {image: 'anzaxyz/agave:v4.0.3'}, resources: {memory: 1Gi}}\n";
    const STANDBY: &str = "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {name: x}\nspec:\n  nodeName: n2\n  role: standby\n  identity: {secretName: spare-b}\n  standbyFor: {secretName: staked, publicKey: Stake11111111111111111111111111111111111111}\n  voteAccount: {secretName: vote}\n  template: {agave: {image: 'anzaxyz/agave:v4.0.3'}, resources: {memory: 1Gi}}\n";

    /// `valtune failover FROM --to TO`: the Lease's holder hands over, whichever field
    /// its manifest uses; anything else is refused saying why.
    #[test]
    fn the_leases_holder_hands_over_in_either_direction() {
        let a = validator("a", ACTIVE);
        let b = validator("b", STANDBY);
        let other_key = validator("c", &STANDBY.replace("Stake111", "Other111"));
        let lone = validator("d", &STANDBY.replace("  standbyFor: {secretName: staked, publicKey: Stake11111111111111111111111111111111111111}\n", ""));
        type Row<'a> = (
            &'a str,
            &'a Validator,
            &'a Validator,
            Option<&'a str>,
            Result<(), &'a str>,
        );
        let rows: Vec<Row> = vec![
            ("the first failover", &a, &b, Some("a"), Ok(())),
            ("the move back", &b, &a, Some("b"), Ok(())),
            (
                "from the one that does not hold it",
                &a,
                &b,
                Some("b"),
                Err("b already signs"),
            ),
            (
                "the standby asked while a holds",
                &b,
                &a,
                Some("a"),
                Err("a already signs"),
            ),
            (
                "a third holder",
                &a,
                &b,
                Some("z"),
                Err("Validator z holds Lease valtune-identity-staked"),
            ),
            ("nobody holds it", &a, &b, None, Err("nobody holds Lease")),
            (
                "to itself",
                &a,
                &a,
                Some("a"),
                Err("--to a is Validator a itself"),
            ),
            (
                "another key",
                &a,
                &other_key,
                Some("a"),
                Err("Validator c is not the other member"),
            ),
            (
                "not a pair member",
                &lone,
                &a,
                Some("d"),
                Err("Validator d is not a failover pair member"),
            ),
        ];
        for (what, from, to, holder, want) in rows {
            match (hand_over(from, to, holder), want) {
                (Ok(()), Ok(())) => {}
                (Err(got), Err(start)) => assert!(got.starts_with(start), "{what}: {got}"),
                (got, want) => panic!("{what}: {got:?}, expected {want:?}"),
            }
        }
    }

    /// A holder's annotation naming this Validator is a failover under way until the
    /// holder records it done for the same request.
    #[test]
    fn a_done_failover_is_not_an_incoming_one() {
        let mut a = validator("a", ACTIVE);
        assert_eq!(incoming(&a, "b"), Incoming::No);
        a.metadata.annotations = Some(
            [
                (FAILOVER_TO.to_string(), "b".to_string()),
                (FAILOVER_REQUESTED.to_string(), "t1".to_string()),
            ]
            .into(),
        );
        assert_eq!(incoming(&a, "b"), Incoming::Moving);
        assert_eq!(incoming(&a, "c"), Incoming::No);
        let mut f = FailoverStatus {
            to: "b".into(),
            requested: Some("t1".into()),
            identity: Some(STAKED.into()),
            step: String::new(),
            released_at_slot: None,
            done: false,
        };
        a.status = Some(crate::api::validator::ValidatorStatus {
            failover: Some(f.clone()),
            ..Default::default()
        });
        assert_eq!(incoming(&a, "b"), Incoming::Moving);
        f.done = true;
        a.status.as_mut().unwrap().failover = Some(f.clone());
        assert_eq!(incoming(&a, "b"), Incoming::Done);
        // Done for an earlier request: the new one is under way.
        f.requested = Some("t0".into());
        a.status.as_mut().unwrap().failover = Some(f);
        assert_eq!(incoming(&a, "b"), Incoming::Moving);
    }
}
