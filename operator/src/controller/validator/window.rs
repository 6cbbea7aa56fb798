//! Agave's restart window, as `agave-validator wait-for-restart-window` judges it
//! (agave-validator 4.0.0 src/commands/wait_for_restart_window/mod.rs, crates.io, tag
//! v4.0.0, 2a165e7a; the 4.0 line publishes no later one), from the same RPC answers, but one look per pass of the operator instead
//! of a loop in the pod: what that loop keeps between looks (the snapshot seen when the
//! window first opened, whether an incremental snapshot was seen) is kept in
//! `status.pendingChange`. Pure: each rule is a row of the table test.

use crate::api::validator::{
    DEFAULT_MAX_DELINQUENT_STAKE_PERCENT, DEFAULT_MIN_IDLE_TIME_MINUTES, RestartWindowSpec,
};

/// `DEFAULT_S_PER_SLOT` (sdk clock.rs): 400 ms.
const SECONDS_PER_SLOT: f64 = 0.4;

/// The options, resolved with the command's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub min_idle_slots: u64,
    pub skip_new_snapshot_check: bool,
    /// The bound as a fraction (5% -> 0.05).
    pub max_delinquent: f64,
}

impl Settings {
    pub fn of(spec: Option<&RestartWindowSpec>) -> Settings {
        let minutes = spec
            .and_then(|s| s.min_idle_time)
            .unwrap_or(DEFAULT_MIN_IDLE_TIME_MINUTES);
        Settings {
            // `min_idle_time_in_minutes as f64 * 60. / DEFAULT_S_PER_SLOT) as Slot`.
            min_idle_slots: (f64::from(minutes) * 60.0 / SECONDS_PER_SLOT) as u64,
            skip_new_snapshot_check: spec.and_then(|s| s.skip_new_snapshot_check) == Some(true),
            max_delinquent: f64::from(
                spec.and_then(|s| s.max_delinquent_stake)
                    .unwrap_or(DEFAULT_MAX_DELINQUENT_STAKE_PERCENT),
            ) / 100.0,
        }
    }
}

/// What the validator's RPC said on one look.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Look {
    /// `getHealth` answered `ok`.
    pub healthy: bool,
    /// `getEpochInfo` (processed): absoluteSlot, slotIndex, slotsInEpoch, epoch.
    pub slot: u64,
    pub slot_index: u64,
    pub slots_in_epoch: u64,
    pub epoch: u64,
    /// `getLeaderSchedule(first slot of the epoch, {identity})`: this identity's slots,
    /// absolute, of the current epoch.
    pub leader_slots: Vec<u64>,
    /// `getHighestSnapshotSlot`: (full, incremental), if it answered.
    pub snapshot: Option<(u64, Option<u64>)>,
    /// `getVoteAccounts`: activated stake of current and of delinquent accounts.
    pub current_stake: u64,
    pub delinquent_stake: u64,
}

/// What the loop keeps between looks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Memory {
    /// `restart_snapshot`: the snapshot slot when the window was first seen open.
    pub snapshot_slot: Option<u64>,
    /// `seen_incremential_snapshot`.
    pub incremental_seen: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// "Ready to restart".
    Open(String),
    /// Not now, and why (the command's own status line where it has one).
    Wait(String),
}

/// One look, as one iteration of the command's loop: the verdict and what to keep.
pub fn judge(look: &Look, s: Settings, memory: Memory) -> (Verdict, Memory) {
    let mut memory = memory;
    let has_incremental = look.snapshot.is_some_and(|(_, i)| i.is_some());
    memory.incremental_seen |= has_incremental;
    let total = look.current_stake + look.delinquent_stake;
    // `delinquent_stake as f64 / total_stake as f64`: NaN with no stake at all, which
    // is never at or above the bound.
    let delinquent = look.delinquent_stake as f64 / total as f64;
    if !look.healthy {
        return (Verdict::Wait("Node is unhealthy".into()), memory);
    }
    if look.slot_index + s.min_idle_slots > look.slots_in_epoch {
        return (
            Verdict::Wait(format!(
                "Current epoch is almost complete (slot {} of {} in epoch {}; the next epoch's leader schedule decides)",
                look.slot_index, look.slots_in_epoch, look.epoch
            )),
            memory,
        );
    }
    let upcoming: Vec<u64> = {
        let mut v: Vec<u64> = look
            .leader_slots
            .iter()
            .copied()
            .filter(|x| *x >= look.slot)
            .collect();
        v.sort_unstable();
        v
    };
    if let Some(&next) = upcoming.first() {
        let idle = next.saturating_sub(look.slot);
        if idle < s.min_idle_slots {
            return (Verdict::Wait(leader_soon(look, s, &upcoming)), memory);
        }
    }
    let why_open = match upcoming.first() {
        None => format!(
            "no leader slot of this identity in the rest of epoch {}",
            look.epoch
        ),
        Some(next) => format!(
            "next leader slot {next} is {} slots away (at least {} idle)",
            next - look.slot,
            s.min_idle_slots
        ),
    };
    if s.skip_new_snapshot_check {
        return (
            Verdict::Open(format!("{why_open}; snapshot check skipped")),
            memory,
        );
    }
    let snapshot_slot = look.snapshot.map(|(full, inc)| inc.unwrap_or(full));
    if memory.snapshot_slot.is_none() {
        memory.snapshot_slot = snapshot_slot;
    }
    if memory.snapshot_slot == snapshot_slot {
        let at = snapshot_slot.map_or("none yet".to_string(), |s| s.to_string());
        return (
            Verdict::Wait(format!(
                "Waiting for a new snapshot (highest snapshot slot: {at})"
            )),
            memory,
        );
    }
    if delinquent >= s.max_delinquent {
        return (
            Verdict::Wait(format!(
                "Delinquency too high: {:.2}% of the stake is delinquent (bound {:.0}%)",
                delinquent * 100.0,
                s.max_delinquent * 100.0
            )),
            memory,
        );
    }
    if memory.incremental_seen && !has_incremental {
        return (
            Verdict::Wait("Waiting for incremental snapshot".into()),
            memory,
        );
    }
    (
        Verdict::Open(format!(
            "{why_open}; snapshot slot {}; {:.2}% delinquent stake",
            snapshot_slot.unwrap_or_default(),
            delinquent.max(0.0) * 100.0
        )),
        memory,
    )
}

/// The command's message for a closed window: the next idle window long enough, or
/// that none is left in the epoch.
fn leader_soon(look: &Look, s: Settings, upcoming: &[u64]) -> String {
    let mut start = look.slot;
    let mut longest = 0;
    for &slot in upcoming {
        let idle = slot - start;
        longest = longest.max(idle);
        if idle > s.min_idle_slots {
            return format!(
                "Validator will be leader soon (next leader slot {}, {} slots away; at least {} idle needed). Next idle window in {} slots, for {} slots",
                upcoming[0],
                upcoming[0] - look.slot,
                s.min_idle_slots,
                start - look.slot,
                idle
            );
        }
        start = slot;
    }
    let tail = (look.slot - look.slot_index + look.slots_in_epoch).saturating_sub(start);
    if tail > s.min_idle_slots {
        return format!(
            "Validator will be leader soon (next leader slot {}, {} slots away; at least {} idle needed). Next idle window in {} slots, after its last leader slot of epoch {}",
            upcoming[0],
            upcoming[0] - look.slot,
            s.min_idle_slots,
            start - look.slot,
            look.epoch
        );
    }
    format!(
        "Validator has no idle window of at least {} slots. Largest idle window for epoch {} is {} slots",
        s.min_idle_slots,
        look.epoch,
        longest.max(tail)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look() -> Look {
        Look {
            healthy: true,
            slot: 1_000_000,
            slot_index: 100_000,
            slots_in_epoch: 432_000,
            epoch: 2,
            leader_slots: vec![1_010_000, 1_010_001, 1_010_002, 1_010_003],
            snapshot: Some((990_000, Some(999_900))),
            current_stake: 98,
            delinquent_stake: 2,
        }
    }

    fn defaults() -> Settings {
        Settings::of(None)
    }

    /// A memory that has seen an older snapshot when the window opened.
    fn seen() -> Memory {
        Memory {
            snapshot_slot: Some(999_800),
            incremental_seen: true,
        }
    }

    #[test]
    fn the_defaults_are_the_commands() {
        let s = defaults();
        assert_eq!(s.min_idle_slots, 1500);
        assert!(!s.skip_new_snapshot_check);
        assert!((s.max_delinquent - 0.05).abs() < 1e-9);
    }

    #[test]
    fn the_table() {
        let near = |mut l: Look| {
            l.leader_slots = vec![1_000_400, 1_000_401, 1_000_402, 1_000_403, 1_010_000];
            l
        };
        type Row<'a> = (&'a str, Look, Settings, Memory, Result<(), &'a str>);
        let rows: Vec<Row> = vec![
            (
                "open: leader far, a new snapshot, little delinquency",
                look(),
                defaults(),
                seen(),
                Ok(()),
            ),
            (
                "unhealthy",
                Look {
                    healthy: false,
                    ..look()
                },
                defaults(),
                seen(),
                Err("Node is unhealthy"),
            ),
            (
                "a leader slot within the idle time",
                near(look()),
                defaults(),
                seen(),
                Err("Validator will be leader soon"),
            ),
            (
                "a leader slot near, but a shorter idle time",
                near(look()),
                Settings {
                    min_idle_slots: 300,
                    ..defaults()
                },
                seen(),
                Ok(()),
            ),
            (
                "no idle window long enough in the epoch",
                Look {
                    leader_slots: (0..277).map(|i| 1_000_100 + i * 1_200).collect(),
                    ..look()
                },
                defaults(),
                seen(),
                Err("no idle window of at least 1500 slots"),
            ),
            (
                "the epoch almost over",
                Look {
                    slot_index: 431_000,
                    ..look()
                },
                defaults(),
                seen(),
                Err("Current epoch is almost complete"),
            ),
            (
                "no leader slots at all: open",
                Look {
                    leader_slots: vec![],
                    ..look()
                },
                defaults(),
                seen(),
                Ok(()),
            ),
            (
                "the first look in the window: waits for a new snapshot",
                look(),
                defaults(),
                Memory::default(),
                Err("Waiting for a new snapshot"),
            ),
            (
                "the snapshot check skipped",
                look(),
                Settings {
                    skip_new_snapshot_check: true,
                    ..defaults()
                },
                Memory::default(),
                Ok(()),
            ),
            (
                "delinquency at the bound",
                Look {
                    current_stake: 95,
                    delinquent_stake: 5,
                    ..look()
                },
                defaults(),
                seen(),
                Err("Delinquency too high"),
            ),
            (
                "a new full snapshot without its incremental yet",
                Look {
                    snapshot: Some((1_000_000, None)),
                    ..look()
                },
                defaults(),
                seen(),
                Err("Waiting for incremental snapshot"),
            ),
            (
                "no stake known: not delinquent",
                Look {
                    current_stake: 0,
                    delinquent_stake: 0,
                    ..look()
                },
                defaults(),
                seen(),
                Ok(()),
            ),
        ];
        for (what, l, s, m, want) in rows {
            let (v, _) = judge(&l, s, m);
            match (&v, want) {
                (Verdict::Open(_), Ok(())) => {}
                (Verdict::Wait(why), Err(part)) => assert!(why.contains(part), "{what}: {why}"),
                _ => panic!("{what}: {v:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn the_snapshot_seen_when_the_window_opened_is_kept_and_a_newer_one_opens_it() {
        let (v, m) = judge(&look(), defaults(), Memory::default());
        assert!(matches!(v, Verdict::Wait(_)));
        assert_eq!(m.snapshot_slot, Some(999_900));
        assert!(m.incremental_seen);
        let mut later = look();
        later.slot += 200;
        later.snapshot = Some((990_000, Some(1_000_000)));
        let (v, m2) = judge(&later, defaults(), m);
        assert!(matches!(v, Verdict::Open(_)), "{v:?}");
        assert_eq!(m2.snapshot_slot, Some(999_900));
    }

    #[test]
    fn a_closed_window_names_the_next_one() {
        let mut l = look();
        l.leader_slots = vec![1_000_400, 1_000_401, 1_000_402, 1_000_403, 1_010_000];
        let (v, _) = judge(&l, defaults(), seen());
        let Verdict::Wait(why) = v else { panic!() };
        assert!(
            why.contains("next leader slot 1000400, 400 slots away"),
            "{why}"
        );
        assert!(
            why.contains("Next idle window in 403 slots, for 9597 slots"),
            "{why}"
        );
    }
}
