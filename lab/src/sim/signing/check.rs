//! The checker of a signing record: the invariant "never two signers" over a history.
//!
//! Three violations, each over the stretches of one identity and kind:
//! - **two signers in one slot**: two processes signed the same slot (a duplicate block,
//!   or two votes on one slot);
//! - **overlapping periods**: one process signed at a slot between another's first and
//!   last signature of one of its signing periods (for votes, which are contiguous, this
//!   is the same event as the first; for blocks, which are sparse, it is not);
//! - **lockout broken**: a process began voting with the identity holding a tower whose
//!   last vote is older than a vote the identity had already cast (the tower handed over
//!   was stale, or none was), so it honours none of that vote's lockouts; or it voted a
//!   slot at or below one the identity had voted before.
//!
//! The record's order is the order its stretches were written, which for one simulator is
//! the order in time (a process writes what it signed before anything that follows it).

use std::collections::BTreeMap;
use std::fmt;

use super::{Kind, Stretch};

#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    TwoSignersInSlot {
        identity: String,
        kind: Kind,
        slot: u64,
        a: Stretch,
        b: Stretch,
    },
    OverlappingPeriods {
        identity: String,
        kind: Kind,
        /// (process, first, last) of the period signed into.
        period: (String, u64, u64),
        b: Stretch,
    },
    LockoutBroken {
        identity: String,
        /// The earlier vote (its stretch) whose lockouts were not honoured.
        earlier: Stretch,
        later: Stretch,
        why: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = |s: &Stretch| {
            format!(
                "{} on {} (slots {}..={})",
                s.process, s.node, s.first, s.last
            )
        };
        match self {
            Violation::TwoSignersInSlot {
                identity,
                kind,
                slot,
                a,
                b,
            } => write!(
                f,
                "two signers: identity {identity} signed {kind:?} at slot {slot} from {} and from {}",
                who(a),
                who(b)
            ),
            Violation::OverlappingPeriods {
                identity,
                kind,
                period,
                b,
            } => write!(
                f,
                "overlapping periods: identity {identity} signed {kind:?} from {} inside the period {}..={} of {}",
                who(b),
                period.1,
                period.2,
                period.0
            ),
            Violation::LockoutBroken {
                identity,
                earlier,
                later,
                why,
            } => write!(
                f,
                "lockout broken: identity {identity}: {} after the vote of {}: {why}",
                who(later),
                who(earlier)
            ),
        }
    }
}

/// A signing period: one process holding one identity, its stretches in order.
struct Period<'a> {
    process: &'a str,
    first: u64,
    last: u64,
    stretches: Vec<&'a Stretch>,
}

/// An identity's periods of one kind, by (process, period number).
type Periods<'a> = BTreeMap<(&'a str, u32), Period<'a>>;

/// Every violation in a record, in the order found (at most one per pair of periods, and
/// one lockout per stretch).
pub fn check(record: &[Stretch]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut by_key: BTreeMap<(&str, Kind), Periods> = BTreeMap::new();
    for s in record {
        let periods = by_key.entry((&s.identity, s.kind)).or_default();
        let p = periods.entry((&s.process, s.period)).or_insert(Period {
            process: &s.process,
            first: s.first,
            last: s.last,
            stretches: Vec::new(),
        });
        p.first = p.first.min(s.first);
        p.last = p.last.max(s.last);
        p.stretches.push(s);
    }
    for ((identity, kind), periods) in &by_key {
        let periods: Vec<&Period> = periods.values().collect();
        for (i, a) in periods.iter().enumerate() {
            for b in &periods[i + 1..] {
                if a.process == b.process || a.last < b.first || b.last < a.first {
                    continue;
                }
                out.push(overlap(identity, *kind, a, b));
            }
        }
    }
    out.extend(lockouts(record));
    out
}

/// The violation two intersecting periods of different processes make: a slot both
/// signed if there is one, else the first of `b`'s signatures inside `a`'s span (or
/// `a`'s inside `b`'s).
fn overlap(identity: &str, kind: Kind, a: &Period, b: &Period) -> Violation {
    for x in &a.stretches {
        for y in &b.stretches {
            let lo = x.first.max(y.first);
            if lo <= x.last.min(y.last) {
                return Violation::TwoSignersInSlot {
                    identity: identity.to_string(),
                    kind,
                    slot: lo,
                    a: (*x).clone(),
                    b: (*y).clone(),
                };
            }
        }
    }
    let (outer, inner) = match b
        .stretches
        .iter()
        .find(|y| y.last >= a.first && y.first <= a.last)
    {
        Some(_) => (a, b),
        None => (b, a),
    };
    let inside = inner
        .stretches
        .iter()
        .find(|y| y.last >= outer.first && y.first <= outer.last)
        .expect("intersecting periods have a stretch inside the other's span");
    Violation::OverlappingPeriods {
        identity: identity.to_string(),
        kind,
        period: (outer.process.to_string(), outer.first, outer.last),
        b: (*inside).clone(),
    }
}

/// Votes in record order: each identity's highest vote so far, and who cast it.
fn lockouts(record: &[Stretch]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut highest: BTreeMap<&str, &Stretch> = BTreeMap::new();
    // The (process, period) pairs already seen: a period's first stretch carries the
    // tower the process began with.
    let mut seen: std::collections::BTreeSet<(&str, &str, u32)> = Default::default();
    for s in record.iter().filter(|s| s.kind == Kind::Vote) {
        let first_of_period = seen.insert((&s.identity, &s.process, s.period));
        if let Some(h) = highest.get(s.identity.as_str()) {
            let voted = h.last;
            let why = if s.process != h.process && s.first <= voted {
                // Two signers in a slot is reported by the overlap; this is a vote below
                // another process's earlier one, which no tower would allow.
                (s.last < h.first).then(|| {
                    format!(
                        "it voted slot {} below slot {voted}, already voted",
                        s.first
                    )
                })
            } else if first_of_period && s.tower_last_vote.is_none_or(|t| t < voted) {
                Some(format!(
                    "it began voting holding a tower whose last vote is {}, older than the identity's vote at slot {voted}",
                    s.tower_last_vote
                        .map_or_else(|| "none (an empty tower)".to_string(), |t| t.to_string())
                ))
            } else {
                None
            };
            if let Some(why) = why {
                out.push(Violation::LockoutBroken {
                    identity: s.identity.clone(),
                    earlier: (*h).clone(),
                    later: s.clone(),
                    why,
                });
            }
        }
        if highest
            .get(s.identity.as_str())
            .is_none_or(|h| s.last > h.last)
        {
            highest.insert(&s.identity, s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(
        identity: &str,
        process: &str,
        period: u32,
        slots: (u64, u64),
        tower: Option<u64>,
    ) -> Stretch {
        Stretch {
            identity: identity.into(),
            kind: Kind::Vote,
            first: slots.0,
            last: slots.1,
            tower_root: tower.map(|t| t.saturating_sub(31)),
            tower_last_vote: tower,
            process: process.into(),
            node: format!("node-of-{process}"),
            period,
            at: String::new(),
        }
    }

    fn block(identity: &str, process: &str, slots: (u64, u64)) -> Stretch {
        Stretch {
            kind: Kind::Block,
            tower_root: None,
            tower_last_vote: None,
            ..vote(identity, process, 1, slots, None)
        }
    }

    /// A clean handover: A votes to 120 and lets go; B takes A's tower (last vote 120)
    /// and votes from 121; then back to A with B's tower.
    #[test]
    fn a_handover_with_the_tower_is_clean() {
        let record = vec![
            vote("S", "a", 1, (100, 110), Some(99)),
            vote("S", "a", 1, (111, 120), Some(110)),
            vote("S", "b", 1, (125, 140), Some(120)),
            vote("S", "a", 2, (150, 160), Some(140)),
            vote("J", "b", 2, (141, 170), None),
        ];
        assert_eq!(check(&record), vec![]);
    }

    #[test]
    fn two_signers_in_one_slot_are_found() {
        let record = vec![
            vote("S", "a", 1, (100, 130), Some(99)),
            vote("S", "b", 1, (125, 140), Some(130)),
        ];
        let v = check(&record);
        assert_eq!(v.len(), 1, "{v:?}");
        match &v[0] {
            Violation::TwoSignersInSlot { slot, a, b, .. } => {
                assert_eq!(*slot, 125);
                assert_eq!((a.process.as_str(), b.process.as_str()), ("a", "b"));
            }
            other => panic!("{other}"),
        }
        assert!(v[0].to_string().contains("slot 125"), "{}", v[0]);
    }

    /// The tower handed over is older than A's last vote: B's first vote honours none of
    /// the lockouts of A's votes after 110.
    #[test]
    fn a_lockout_broken_after_a_tower_handover_is_found() {
        let record = vec![
            vote("S", "a", 1, (100, 120), Some(99)),
            vote("S", "b", 1, (121, 140), Some(110)),
        ];
        let v = check(&record);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            matches!(&v[0], Violation::LockoutBroken { earlier, later, .. }
            if earlier.process == "a" && later.process == "b"),
            "{v:?}"
        );
        assert!(
            v[0].to_string()
                .contains("older than the identity's vote at slot 120")
        );
        // And with no tower at all.
        let record = vec![
            vote("S", "a", 1, (100, 120), Some(99)),
            vote("S", "b", 1, (121, 140), None),
        ];
        assert!(check(&record)[0].to_string().contains("empty tower"));
    }

    /// A process restarted from a stale ledger tower, alone, breaks its own lockouts too.
    #[test]
    fn a_restart_with_a_stale_tower_breaks_its_own_lockouts() {
        let record = vec![
            vote("S", "a@1", 1, (100, 120), Some(99)),
            vote("S", "a@2", 1, (130, 140), Some(105)),
        ];
        assert_eq!(check(&record).len(), 1);
    }

    #[test]
    fn a_vote_below_an_earlier_one_is_found() {
        let record = vec![
            vote("S", "a", 1, (100, 120), Some(99)),
            vote("S", "b", 1, (90, 95), Some(120)),
        ];
        let v = check(&record);
        assert!(
            v.iter().any(|x| x.to_string().contains("below slot 120")),
            "{v:?}"
        );
    }

    /// Blocks are sparse: B producing inside A's span of blocks is a violation even
    /// where no block number is shared.
    #[test]
    fn a_producer_inside_another_producers_period_is_found() {
        let record = vec![
            block("prod", "a", (100, 111)),
            block("prod", "a", (352, 363)),
            block("prod", "b", (200, 211)),
        ];
        let v = check(&record);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            matches!(&v[0], Violation::OverlappingPeriods { period, b, .. }
            if period.0 == "a" && b.process == "b"),
            "{v:?}"
        );
        // Different identities never conflict.
        let record = vec![block("p1", "a", (100, 111)), block("p2", "b", (100, 111))];
        assert_eq!(check(&record), vec![]);
    }
}
