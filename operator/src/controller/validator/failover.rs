//! Moving a voting identity from the Validator that holds it (the active) to a standby,
//! with the client's own commands, as agave's guide does it by hand (anza-xyz/agave
//! docs/src/operations/guides/validator-failover.md, "Manual Identity Transition", read
//! at commit 2359a8b3): the active switches to its junk identity (`agave-validator -l
//! LEDGER set-identity JUNK`) or is stopped and confirmed gone; the staked identity's
//! tower file (`tower-1_9-<pubkey>.bin`) is copied to the standby's ledger; then the
//! standby takes the identity (`set-identity --require-tower STAKED`), which the client
//! refuses without that tower ("Unable to load tower file for identity ...": validator/
//! src/admin_rpc_service.rs `set_identity_keypair`, `Tower::restore`, read at commit
//! 00d4497d). Without the tower the guide's alternative is to wait ~200 slots after the
//! active's last vote and take the identity without `--require-tower`.
//!
//! This module only decides the next step of one failover from what both validators say
//! about themselves (their `getIdentity`, their health, their pods and nodes): pure, so
//! the rule that matters is a row of a table test. The rule: the standby is never asked
//! to take the identity while the active may still sign with it: its own RPC says it
//! switched, or its pod is confirmed gone (the object deleted, which the API server
//! does once the kubelet confirms the containers stopped or an operator forces it).
//! Anything else waits and says why.

/// Slots the guide says to wait after the active's last vote when its tower file cannot
/// be copied ("you need to wait ~200 slots (2 minutes) from the last vote").
pub const NO_TOWER_WAIT_SLOTS: u64 = 200;

/// One side of the pair, as observed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Side {
    /// The Validator's name.
    pub name: String,
    /// Its pod, if one exists (terminating included).
    pub pod: Option<PodSide>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodSide {
    pub name: String,
    pub terminating: bool,
    /// Whether its node reports Ready (None: not bound yet).
    pub node_ready: Option<bool>,
    /// The identity its own RPC reports (`getIdentity`); None: no answer.
    pub identity: Option<String>,
    /// Its `getHealth` said `ok`.
    pub healthy: bool,
    /// Its slot (`getEpochInfo`'s `absoluteSlot`), if it answered.
    pub slot: Option<u64>,
}

/// Where the staked identity's tower file is.
#[derive(Debug, Clone, PartialEq)]
pub enum Tower {
    /// On the standby's ledger, copied from the active's after it let go.
    Copied,
    /// Readable on the active's ledger: to be copied.
    Readable,
    /// It cannot be read (the active's node does not answer, its volume is gone): why.
    Unreadable(String),
}

/// What one failover has seen so far (kept in the active's status between passes).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Memory {
    /// The standby's slot when the active was first seen to have let go.
    pub released_at_slot: Option<u64>,
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing can be done safely now: why.
    Wait(String),
    /// Ask the active to switch to its own junk identity (`set-identity JUNK`).
    SwitchActive,
    /// The active must be stopped before the standby may take the identity: it has no
    /// junk identity, or does not answer getIdentity (pod present, process hung). The
    /// operator never does it (pair.rs waits, saying so): a hung validator may still
    /// sign, and only someone who knows the machine can stop it for sure.
    StopActive,
    /// Copy the staked identity's tower file from the active's ledger to the standby's.
    CopyTower,
    /// The standby takes the identity: `set-identity [--require-tower] STAKED`.
    StandbyTakes { require_tower: bool },
    /// The standby signs with the identity and the active does not: the Lease moves to
    /// the standby.
    MoveLease,
    /// Both say they sign with the identity: the failover stops and says so loudly.
    TwoSigners(String),
}

/// Whether the active has let go of the identity, as far as can be known.
#[derive(Debug, Clone, PartialEq)]
enum Active {
    /// Its RPC reports another identity, or its pod is gone.
    LetGo,
    /// Its RPC reports the identity.
    Signs,
    /// It may still sign and nothing can be asked of it now: why.
    Unknown(String),
    /// It does not answer getIdentity, on a node that answers: it can be stopped.
    Silent,
}

fn active_state(active: &Side, staked: &str) -> Active {
    let Some(p) = &active.pod else {
        return Active::LetGo;
    };
    match p.identity.as_deref() {
        Some(id) if id != staked => Active::LetGo,
        _ if p.node_ready == Some(false) => Active::Unknown(format!(
            "the active's pod {} is on a node that does not answer: it may still sign as {staked}, and no command reaches it; no standby takes the identity until that pod is confirmed gone (kubectl delete pod {} --force --grace-period=0 once the machine is known to be off)",
            p.name, p.name
        )),
        Some(_) => Active::Signs,
        None if p.terminating => Active::Unknown(format!(
            "the active's pod {} is stopping: waiting until it is gone",
            p.name
        )),
        None => Active::Silent,
    }
}

/// The next step of moving `staked` (the public key the active reported while holding
/// it) from `active` to `standby`. `spare`: the active has a junk identity to switch to.
pub fn next(
    active: &Side,
    standby: &Side,
    staked: &str,
    spare: bool,
    tower: &Tower,
    memory: &Memory,
) -> Step {
    let takes = standby
        .pod
        .as_ref()
        .is_some_and(|p| p.identity.as_deref() == Some(staked));
    if takes {
        return match active_state(active, staked) {
            Active::LetGo => Step::MoveLease,
            Active::Signs => Step::TwoSigners(format!(
                "both {} and {} report identity {staked}: stop one now",
                active.name, standby.name
            )),
            Active::Unknown(why) => Step::TwoSigners(format!(
                "{} reports identity {staked} while {why}",
                standby.name
            )),
            Active::Silent => Step::TwoSigners(format!(
                "{} reports identity {staked} while the active's pod does not answer getIdentity",
                standby.name
            )),
        };
    }

    // The standby must be able to take over before the active lets go.
    let Some(sb) = &standby.pod else {
        return Step::Wait(format!("standby {} has no pod", standby.name));
    };
    if sb.terminating || sb.node_ready == Some(false) || !sb.healthy || sb.identity.is_none() {
        return Step::Wait(format!(
            "standby {} is not ready to take over (its pod {} must run, answer getIdentity and be caught up: getHealth ok)",
            standby.name, sb.name
        ));
    }

    match active_state(active, staked) {
        Active::Signs if spare => Step::SwitchActive,
        // No junk identity to switch to, or no answer to the command: stop it (its grace
        // period lets the client write its tower), then see its pod gone.
        Active::Signs | Active::Silent => Step::StopActive,
        Active::Unknown(why) => Step::Wait(why),
        Active::LetGo => match tower {
            Tower::Copied => Step::StandbyTakes {
                require_tower: true,
            },
            Tower::Readable => Step::CopyTower,
            Tower::Unreadable(why) => {
                let since = match (memory.released_at_slot, sb.slot) {
                    (Some(at), Some(now)) => now.saturating_sub(at),
                    _ => 0,
                };
                if since >= NO_TOWER_WAIT_SLOTS {
                    Step::StandbyTakes {
                        require_tower: false,
                    }
                } else {
                    Step::Wait(format!(
                        "the tower file of {staked} cannot be copied ({why}): waiting {NO_TOWER_WAIT_SLOTS} slots after the active let go ({since} so far) before the standby takes the identity without it"
                    ))
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAKED: &str = "Stake11111111111111111111111111111111111111";

    fn pod(name: &str, identity: Option<&str>) -> Option<PodSide> {
        Some(PodSide {
            name: name.into(),
            terminating: false,
            node_ready: Some(true),
            identity: identity.map(String::from),
            healthy: true,
            slot: Some(1_000),
        })
    }

    fn side(name: &str, p: Option<PodSide>) -> Side {
        Side {
            name: name.into(),
            pod: p,
        }
    }

    /// (what, active, standby, spare, tower, released at, expected step or the start of
    /// the reason it waits)
    #[test]
    fn the_table() {
        let active = |id: Option<&str>| side("a", pod("a", id));
        let ready = side("b", pod("b", Some("JunkB")));
        let mut behind = ready.clone();
        behind.pod.as_mut().unwrap().healthy = false;
        let mut lost = active(None);
        lost.pod.as_mut().unwrap().node_ready = Some(false);
        let mut lost_signing = active(Some(STAKED));
        lost_signing.pod.as_mut().unwrap().node_ready = Some(false);
        let mut stopping = active(None);
        stopping.pod.as_mut().unwrap().terminating = true;
        let mut late = ready.clone();
        late.pod.as_mut().unwrap().slot = Some(1_250);
        let gone = side("a", None);
        let unreadable = Tower::Unreadable("node vv-1 does not answer".into());
        type Row<'a> = (
            &'a str,
            Side,
            Side,
            bool,
            Tower,
            Option<u64>,
            Result<Step, &'a str>,
        );
        let rows: Vec<Row> = vec![
            (
                "the standby has no pod",
                active(Some(STAKED)),
                side("b", None),
                true,
                Tower::Readable,
                None,
                Err("standby b has no pod"),
            ),
            (
                "the standby is behind",
                active(Some(STAKED)),
                behind,
                true,
                Tower::Readable,
                None,
                Err("standby b is not ready"),
            ),
            (
                "the active signs, with a junk identity",
                active(Some(STAKED)),
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Ok(Step::SwitchActive),
            ),
            (
                "the active signs, without one",
                active(Some(STAKED)),
                ready.clone(),
                false,
                Tower::Readable,
                None,
                Ok(Step::StopActive),
            ),
            (
                "the active answers nothing",
                active(None),
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Ok(Step::StopActive),
            ),
            (
                "the active is stopping",
                stopping,
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Err("the active's pod a is stopping"),
            ),
            (
                "the active's node is silent",
                lost,
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Err("the active's pod a is on a node that does not answer"),
            ),
            (
                "the active's node is silent, its RPC answers the identity",
                lost_signing,
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Err("the active's pod a is on a node that does not answer"),
            ),
            (
                "the active switched: copy the tower",
                active(Some("JunkA")),
                ready.clone(),
                true,
                Tower::Readable,
                None,
                Ok(Step::CopyTower),
            ),
            (
                "the tower is there: take it",
                active(Some("JunkA")),
                ready.clone(),
                true,
                Tower::Copied,
                None,
                Ok(Step::StandbyTakes {
                    require_tower: true,
                }),
            ),
            (
                "the active is gone: take it",
                gone.clone(),
                ready.clone(),
                false,
                Tower::Copied,
                None,
                Ok(Step::StandbyTakes {
                    require_tower: true,
                }),
            ),
            (
                "no tower: wait 200 slots",
                gone.clone(),
                ready.clone(),
                false,
                unreadable.clone(),
                Some(900),
                Err("the tower file of"),
            ),
            (
                "no tower, 250 slots on",
                gone.clone(),
                late,
                false,
                unreadable,
                Some(1_000),
                Ok(Step::StandbyTakes {
                    require_tower: false,
                }),
            ),
            (
                "the standby took it: the Lease moves",
                active(Some("JunkA")),
                side("b", pod("b", Some(STAKED))),
                true,
                Tower::Copied,
                None,
                Ok(Step::MoveLease),
            ),
            (
                "both sign",
                active(Some(STAKED)),
                side("b", pod("b", Some(STAKED))),
                true,
                Tower::Copied,
                None,
                Err("both a and b report"),
            ),
        ];
        for (what, a, b, spare, tower, at, want) in rows {
            let memory = Memory {
                released_at_slot: at,
            };
            let got = next(&a, &b, STAKED, spare, &tower, &memory);
            match (want, &got) {
                (Ok(step), _) => assert_eq!(got, step, "{what}"),
                (Err(start), Step::Wait(why) | Step::TwoSigners(why)) => {
                    assert!(why.starts_with(start), "{what}: {why}")
                }
                (Err(start), other) => panic!("{what}: {other:?}, expected {start}"),
            }
        }
    }

    /// Whatever both sides say, the standby is asked to take the identity only when the
    /// active reports another identity or has no pod.
    #[test]
    fn the_standby_never_takes_an_identity_the_active_may_still_sign_with() {
        let ids = [None, Some(STAKED), Some("JunkA")];
        let bools = [false, true];
        for id in ids {
            for terminating in bools {
                for node in [None, Some(true), Some(false)] {
                    for spare in bools {
                        for tower in [
                            Tower::Copied,
                            Tower::Readable,
                            Tower::Unreadable("x".into()),
                        ] {
                            let a = side(
                                "a",
                                Some(PodSide {
                                    name: "a".into(),
                                    terminating,
                                    node_ready: node,
                                    identity: id.map(String::from),
                                    healthy: true,
                                    slot: None,
                                }),
                            );
                            let b = side("b", pod("b", Some("JunkB")));
                            let memory = Memory {
                                released_at_slot: Some(0),
                            };
                            let mut late = b.clone();
                            late.pod.as_mut().unwrap().slot = Some(10_000);
                            for b in [b, late] {
                                let step = next(&a, &b, STAKED, spare, &tower, &memory);
                                if matches!(step, Step::StandbyTakes { .. }) {
                                    assert_eq!(id, Some("JunkA"), "{a:?} {step:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
        // Only a pod that is gone lets the standby take it otherwise.
        let step = next(
            &side("a", None),
            &side("b", pod("b", Some("JunkB"))),
            STAKED,
            false,
            &Tower::Copied,
            &Memory::default(),
        );
        assert_eq!(
            step,
            Step::StandbyTakes {
                require_tower: true
            }
        );
    }
}
