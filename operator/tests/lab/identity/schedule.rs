//! Random fault schedules for a failover pair, from a seed: pure, so a seed always gives
//! the same schedule (the interleaving with the operator may differ when it replays).

use std::fmt;

/// One of the pair: `A` starts as the active (`spareIdentity`), `B` as the standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Member {
    A,
    B,
}

impl Member {
    pub fn other(self) -> Member {
        match self {
            Member::A => Member::B,
            Member::B => Member::A,
        }
    }
}

/// A step of a schedule: a fault, a lift of one, or a user's action.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `valtune failover` from the member that holds the Lease to the other, followed to
    /// its end (or the CLI's time-out).
    Failover,
    /// A failover asked (the annotation), then abandoned after `after_ms`: the request
    /// withdrawn, as a user does who gives up on it.
    AbandonedFailover {
        after_ms: u64,
    },
    /// A failover asked of the member that does not hold the Lease (a re-run in the
    /// wrong direction, or a stale script), not waited for.
    WrongWayFailover,
    DeleteValidator(Member),
    RecreateValidator(Member),
    /// `kubectl delete lease` of the staked identity.
    DeleteLease,
    /// SIGKILL of the operator replica that leads; the other takes over.
    KillLeader,
    /// A second replica started again (the schedule keeps at most two).
    StartReplica,
    /// The member's machine stops answering (its kubelet and node Lease stop; its
    /// processes run on).
    NodeStops(Member),
    NodeBack(Member),
    Cordon(Member),
    Uncordon(Member),
    /// A trial of an experiment waits for the member's machine (it fits only once the
    /// Validator's pod is gone).
    TrialWaits(Member),
    /// A change of the member's spec that restarts its pod (in its window).
    Change(Member),
    /// The member's image changed to one that cannot be pulled.
    BadImage(Member),
    /// Its image fixed again.
    GoodImage(Member),
    /// SIGKILL of the member's validator process (the kubelet restarts it).
    KillValidator(Member),
    /// SIGKILL (or an OOM kill) of the member's identity agent (the kubelet restarts it).
    KillAgent {
        member: Member,
        oom: bool,
    },
    /// The identity agent's port blocked between the machines, and open again.
    BlockAgentPort,
    UnblockAgentPort,
    /// Nothing happens for a while.
    Wait {
        ms: u64,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// What a schedule may draw on: the faults the lab can play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Menu {
    /// The kubelet's faults (a killed container, a failed image pull, a blocked port).
    pub kubelet: bool,
}

/// A schedule: its seed and steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub seed: u64,
    pub steps: Vec<Step>,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "schedule of seed {}:", self.seed)?;
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "  {i:2}. {s}")?;
        }
        Ok(())
    }
}

/// splitmix64, as the lab's models draw.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn member(&mut self) -> Member {
        if self.below(2) == 0 {
            Member::A
        } else {
            Member::B
        }
    }
}

/// The state a schedule has brought the pair to, so each step is one that can happen
/// (a Validator deleted is re-created, not deleted again).
#[derive(Default)]
struct Faults {
    deleted: [bool; 2],
    stopped: [bool; 2],
    cordoned: [bool; 2],
    bad_image: [bool; 2],
    blocked: bool,
    replicas: u8,
}

fn ix(m: Member) -> usize {
    match m {
        Member::A => 0,
        Member::B => 1,
    }
}

/// The schedule of `seed`: `steps` steps, each followed by a wait.
pub fn schedule(seed: u64, steps: usize, menu: Menu) -> Schedule {
    let mut rng = Rng(seed ^ 0x005e_ed5a_1e0f_fa17);
    let mut s = Faults {
        replicas: 2,
        ..Default::default()
    };
    let mut out = Vec::new();
    while out.len() < 2 * steps {
        let m = rng.member();
        let i = ix(m);
        // Weights: failovers and the faults that broke the code before are the most
        // frequent; lifts come often enough that faults overlap but do not pile up.
        let step = match rng.below(22) {
            0..=3 => Step::Failover,
            4 => Step::AbandonedFailover {
                after_ms: 200 + rng.below(4000),
            },
            5 => Step::WrongWayFailover,
            6 if !s.deleted[i] => Step::DeleteValidator(m),
            6 => Step::RecreateValidator(m),
            7 => Step::DeleteLease,
            8 if s.replicas == 2 => Step::KillLeader,
            8 => Step::StartReplica,
            9 | 10 if !s.stopped[i] => Step::NodeStops(m),
            9 | 10 => Step::NodeBack(m),
            11 if !s.cordoned[i] => Step::Cordon(m),
            11 => Step::Uncordon(m),
            12 => Step::TrialWaits(m),
            13 => Step::Change(m),
            14 if menu.kubelet && !s.bad_image[i] => Step::BadImage(m),
            14 if menu.kubelet => Step::GoodImage(m),
            15 | 16 if menu.kubelet => Step::KillValidator(m),
            17 if menu.kubelet => Step::KillAgent {
                member: m,
                oom: rng.below(2) == 0,
            },
            18 if menu.kubelet && !s.blocked => Step::BlockAgentPort,
            18 if menu.kubelet => Step::UnblockAgentPort,
            _ => continue,
        };
        match &step {
            Step::DeleteValidator(m) => s.deleted[ix(*m)] = true,
            Step::RecreateValidator(m) => s.deleted[ix(*m)] = false,
            Step::KillLeader => s.replicas -= 1,
            Step::StartReplica => s.replicas += 1,
            Step::NodeStops(m) => s.stopped[ix(*m)] = true,
            Step::NodeBack(m) => s.stopped[ix(*m)] = false,
            Step::Cordon(m) => s.cordoned[ix(*m)] = true,
            Step::Uncordon(m) => s.cordoned[ix(*m)] = false,
            Step::BadImage(m) => s.bad_image[ix(*m)] = true,
            Step::GoodImage(m) => s.bad_image[ix(*m)] = false,
            Step::BlockAgentPort => s.blocked = true,
            Step::UnblockAgentPort => s.blocked = false,
            _ => {}
        }
        out.push(step);
        out.push(Step::Wait {
            ms: 500 + rng.below(6000),
        });
    }
    Schedule { seed, steps: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_gives_the_same_schedule_and_seeds_differ() {
        let menu = Menu { kubelet: true };
        assert_eq!(schedule(7, 8, menu), schedule(7, 8, menu));
        assert_ne!(schedule(7, 8, menu), schedule(8, 8, menu));
        let s = schedule(7, 8, menu);
        assert_eq!(s.steps.len(), 16);
        assert!(s.to_string().starts_with("schedule of seed 7:"));
    }

    #[test]
    fn steps_are_ones_that_can_happen() {
        for seed in 0..500 {
            let s = schedule(seed, 10, Menu { kubelet: false });
            let mut deleted = [false; 2];
            let mut replicas = 2;
            for step in &s.steps {
                match step {
                    Step::DeleteValidator(m) => {
                        assert!(!deleted[ix(*m)], "{s}");
                        deleted[ix(*m)] = true;
                    }
                    Step::RecreateValidator(m) => {
                        assert!(deleted[ix(*m)], "{s}");
                        deleted[ix(*m)] = false;
                    }
                    Step::KillLeader => {
                        assert_eq!(replicas, 2, "{s}");
                        replicas -= 1;
                    }
                    Step::StartReplica => replicas += 1,
                    Step::KillValidator(_) | Step::BadImage(_) | Step::BlockAgentPort => {
                        panic!("a kubelet fault without the kubelet's menu: {s}")
                    }
                    _ => {}
                }
            }
        }
    }

    /// Over many seeds every kind of step is drawn (a harness that never deletes the
    /// Lease cannot find what deleting it breaks).
    #[test]
    fn every_step_is_drawn_over_many_seeds() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            for step in schedule(seed, 10, Menu { kubelet: true }).steps {
                let name = format!("{step:?}");
                seen.insert(name.split(['(', ' ', '{']).next().unwrap().to_string());
            }
        }
        for want in [
            "Failover",
            "AbandonedFailover",
            "WrongWayFailover",
            "DeleteValidator",
            "RecreateValidator",
            "DeleteLease",
            "KillLeader",
            "StartReplica",
            "NodeStops",
            "NodeBack",
            "Cordon",
            "Uncordon",
            "TrialWaits",
            "Change",
            "BadImage",
            "GoodImage",
            "KillValidator",
            "KillAgent",
            "BlockAgentPort",
            "UnblockAgentPort",
            "Wait",
        ] {
            assert!(seen.contains(want), "{want} never drawn: {seen:?}");
        }
    }
}
