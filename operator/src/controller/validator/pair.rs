//! A failover pair member's pass (an Agave Validator with `spareIdentity`, or a standby
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

use super::failover::{self, Memory, PodSide, Side, Step, Tower};
use crate::api::validator::FailoverStatus;
use crate::clients::agave::pair::AGENT_PORT;

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
                        "take require-tower tower=http://{ip}:{AGENT_PORT}/tower-1_9-{}.bin",
                        view.staked
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
}
