//! Agave's restart window, as `agave-validator wait-for-restart-window` judges it
//! (agave-validator 4.0.0 src/commands/wait_for_restart_window/mod.rs, crates.io, tag
//! v4.0.0, 2a165e7a; the 4.0 line publishes no later one), from the same RPC answers, but
//! one look per pass of the operator instead of a loop in the pod: what that loop keeps
//! between looks (the snapshot seen when the window first opened, whether an incremental
//! snapshot was seen) is kept in `status.pendingChange`. Frankendancer's Agave child
//! serves the same RPC, so Frankendancer uses this window too. [`judge`] is pure: each
//! rule is a row of the table test.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::api::validator::{
    DEFAULT_MAX_DELINQUENT_STAKE_PERCENT, DEFAULT_MIN_IDLE_TIME_MINUTES, RestartWindowSpec,
};
use crate::clients::health::Health;
use crate::clients::window::{self, Judging, Kept, Reach, Read, Reading, RestartWindow, Verdict};

/// The window of a validator answering Solana's JSON-RPC on `rpc_port`: its leader
/// schedule, snapshots and the cluster's delinquent stake.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaderSchedule {
    pub rpc_port: i32,
}

impl RestartWindow for LeaderSchedule {
    /// The epoch info every pass (head and lag for status); the rest of the figures
    /// while a change is pending.
    fn read<'a>(&'a self, at: Reach<'a>) -> BoxFuture<'a, Read> {
        Box::pin(async move {
            let url = format!("http://{}:{}/", at.ip, self.rpc_port);
            match look(at.endpoints, &url, at.health, at.pending).await {
                Ok((l, behind)) => Read {
                    position: Some((l.slot as i64, behind)),
                    reading: at.pending.then(|| Ok(Reading::new(l))),
                },
                Err(e) => Read {
                    position: None,
                    reading: at.pending.then_some(Err(e)),
                },
            }
        })
    }

    fn judge(&self, j: &Judging) -> (Verdict, Option<Kept>) {
        let memory = Memory {
            snapshot_slot: j.kept.snapshot_slot.map(|x| x as u64),
            incremental_seen: j.kept.incremental_seen,
        };
        let verdict = match (j.reading, j.answered) {
            (Some(Ok(r)), _) => {
                let Some(l) = r.get::<Look>() else {
                    return (
                        Verdict::Wait("the figures read are not Solana's".into()),
                        None,
                    );
                };
                let (v, m) = judge(l, Settings::of(j.spec.restart_window.as_ref()), memory);
                let kept = Kept {
                    snapshot_slot: m.snapshot_slot.map(|x| x as i64),
                    incremental_seen: m.incremental_seen,
                };
                return (v, Some(kept));
            }
            // Asked, and no answer in time: a validator too busy to answer may still
            // lead its slots. wait-for-restart-window fails then (its RPC calls end it
            // with an error: not a time to restart).
            (_, false) if j.unanswered.is_some() => Verdict::Wait(format!(
                "the validator's RPC did not answer ({}), so its leader slots cannot be read",
                j.unanswered.unwrap_or_default()
            )),
            // Not serving its RPC (no pod running, loading its snapshot, crash-looping:
            // the connection is refused): it leads no slot, so there is no window to wait
            // for.
            (_, false) => Verdict::Open(
                "the validator does not answer its RPC: no leader slot to miss, restarting now"
                    .into(),
            ),
            (Some(Err(e)), true) => Verdict::Wait(format!(
                "the restart window's figures cannot be read from the validator's RPC: {e}"
            )),
            (None, true) => Verdict::Wait("the restart window's figures are not read yet".into()),
        };
        (verdict, None)
    }
}

/// The figures `wait-for-restart-window` reads, over the same RPC methods: getIdentity,
/// getHighestSnapshotSlot, getEpochInfo (processed), getVoteAccounts and
/// getLeaderSchedule(first slot of the epoch, {identity}); with the slots behind from
/// getHealth. Only the epoch info when no change is pending (head and lag for status).
async fn look(
    endpoints: &dyn window::Endpoints,
    url: &str,
    health: Option<(Health, &str)>,
    pending: bool,
) -> Result<(Look, i64), String> {
    let call = |method: &'static str, params: Value| async move {
        let (_, body) = endpoints
            .rpc(url, method, params)
            .await
            .ok_or_else(|| format!("{method}: no answer from {url}"))?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{method}: {e}: {body}"))?;
        match v.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(format!("{method}: {}", v["error"])),
        }
    };
    let u = |v: &Value, k: &str| v[k].as_u64().ok_or_else(|| format!("no {k} in {v}"));
    let healthy = health.is_some_and(|(h, _)| h == Health::Healthy);
    // getHealth's numSlotsBehind (none when healthy: 0).
    let behind = health
        .and_then(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .and_then(|v| v["error"]["data"]["numSlotsBehind"].as_i64())
        .unwrap_or(0);
    let epoch = call("getEpochInfo", json!([{"commitment": "processed"}])).await?;
    let mut l = Look {
        healthy,
        slot: u(&epoch, "absoluteSlot")?,
        slot_index: u(&epoch, "slotIndex")?,
        slots_in_epoch: u(&epoch, "slotsInEpoch")?,
        epoch: u(&epoch, "epoch")?,
        ..Default::default()
    };
    if !pending {
        return Ok((l, behind));
    }
    let identity = call("getIdentity", Value::Null).await?["identity"]
        .as_str()
        .ok_or("getIdentity: no identity")?
        .to_string();
    // An error is no snapshot yet (`get_highest_snapshot_slot().ok()`).
    l.snapshot = call("getHighestSnapshotSlot", Value::Null)
        .await
        .ok()
        .and_then(|s| Some((s["full"].as_u64()?, s["incremental"].as_u64())));
    let votes = call("getVoteAccounts", Value::Null).await?;
    let stake = |k: &str| {
        votes[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["activatedStake"].as_u64())
            .sum::<u64>()
    };
    l.current_stake = stake("current");
    l.delinquent_stake = stake("delinquent");
    let first = l.slot - l.slot_index;
    let schedule = call("getLeaderSchedule", json!([first, {"identity": identity}])).await?;
    if schedule.is_null() {
        return Err(format!("getLeaderSchedule: no schedule from slot {first}"));
    }
    l.leader_slots = schedule[&identity]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|i| first + i)
        .collect();
    Ok((l, behind))
}

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

    /// The RPC answers of a validator 100,000 slots into epoch 2 (agave's JSON shapes:
    /// rpc-client-types `RpcEpochInfo`, `RpcSnapshotSlotInfo`, `RpcVoteAccountStatus`,
    /// `RpcLeaderSchedule`).
    fn answers() -> crate::clients::window::fixtures::Answers {
        let ok = |result: &str| {
            (
                200,
                format!(r#"{{"jsonrpc":"2.0","result":{result},"id":1}}"#),
            )
        };
        let mut a = crate::clients::window::fixtures::Answers::default();
        for (method, result) in [
            (
                "getEpochInfo",
                r#"{"absoluteSlot":1000000,"blockHeight":999000,"epoch":2,"slotIndex":100000,"slotsInEpoch":432000,"transactionCount":7}"#,
            ),
            ("getIdentity", r#"{"identity":"Va1idator111"}"#),
            (
                "getHighestSnapshotSlot",
                r#"{"full":990000,"incremental":999900}"#,
            ),
            (
                "getVoteAccounts",
                r#"{"current":[{"activatedStake":60},{"activatedStake":38}],"delinquent":[{"activatedStake":2}]}"#,
            ),
            ("getLeaderSchedule", r#"{"Va1idator111":[10000,10001]}"#),
        ] {
            a.rpc.insert(method.into(), ok(result));
        }
        a
    }

    fn spec() -> ValidatorSpec {
        serde_saphyr::from_str("template: {agave: {image: agave}}\nnodeName: node-1\n").unwrap()
    }

    use crate::api::validator::ValidatorSpec;

    #[tokio::test]
    async fn the_read_asks_what_the_command_asks_and_the_epoch_alone_when_nothing_is_pending() {
        let a = answers();
        let spec = spec();
        let behind = r#"{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind by 42 slots","data":{"numSlotsBehind":42}},"id":1}"#;
        let w = LeaderSchedule { rpc_port: 8899 };
        let at = |pending| Reach {
            endpoints: &a,
            ip: "10.0.0.7",
            spec: &spec,
            health: Some((Health::Behind, behind)),
            pending,
        };
        let read = w.read(at(false)).await;
        assert_eq!(read.position, Some((1_000_000, 42)));
        assert!(read.reading.is_none());
        assert_eq!(a.asked.lock().unwrap().len(), 1);
        let read = w.read(at(true)).await;
        let reading = read.reading.unwrap().unwrap();
        let l = reading.get::<Look>().unwrap();
        assert_eq!(
            *l,
            Look {
                healthy: false,
                slot: 1_000_000,
                slot_index: 100_000,
                slots_in_epoch: 432_000,
                epoch: 2,
                leader_slots: vec![910_000, 910_001],
                snapshot: Some((990_000, Some(999_900))),
                current_stake: 98,
                delinquent_stake: 2,
            }
        );
        let asked = a.asked.lock().unwrap();
        let (method, params) = asked.last().unwrap();
        assert_eq!(method, "getLeaderSchedule");
        assert_eq!(*params, json!([900_000, {"identity": "Va1idator111"}]));
    }

    #[tokio::test]
    async fn a_missing_schedule_is_an_error_the_judge_waits_on() {
        let mut a = answers();
        a.rpc.insert(
            "getLeaderSchedule".into(),
            (200, r#"{"jsonrpc":"2.0","result":null,"id":1}"#.into()),
        );
        let spec = spec();
        let w = LeaderSchedule { rpc_port: 8899 };
        let read = w
            .read(Reach {
                endpoints: &a,
                ip: "10.0.0.7",
                spec: &spec,
                health: None,
                pending: true,
            })
            .await;
        let reading = read.reading.unwrap();
        assert_eq!(
            reading.as_ref().unwrap_err(),
            "getLeaderSchedule: no schedule from slot 900000"
        );
        let (v, kept) = w.judge(&Judging {
            spec: &spec,
            reading: Some(&reading),
            answered: true,
            unanswered: None,
            kept: Kept::default(),
            now: jiff::Timestamp::UNIX_EPOCH,
        });
        assert!(
            matches!(&v, Verdict::Wait(why) if why.contains("no schedule from slot")),
            "{v:?}"
        );
        assert_eq!(kept, None);
    }
}
