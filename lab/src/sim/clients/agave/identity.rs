//! A simulated validator's place in its cluster: its identity from its keypair file, its
//! leader slots, the cluster's vote accounts, and where the chain is when it starts.
//! What the operator's restart window reads (getIdentity, getLeaderSchedule,
//! getVoteAccounts, getEpochInfo) comes from here.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::model::SLOTS_PER_SECOND;
use crate::sim::clock::Clock;

/// Mainnet's epoch (genesis `EpochSchedule`, 432,000 slots).
pub const SLOTS_PER_EPOCH: u64 = 432_000;
/// `NUM_CONSECUTIVE_LEADER_SLOTS`: a leader leads 4 slots in a row.
const CONSECUTIVE: u64 = 4;
/// A staked lab identity leads one group of 4 slots every this many slots (about
/// 0.07% of the stake): windows of 10 minutes (1,500 slots) open and close several
/// times a real minute at the lab's time scale, and no window of an hour (9,000) exists.
pub const LEADER_EVERY: u64 = 6_000;
/// The lab chain's slot 0 (a fixed moment, so every process of a cluster agrees).
const GENESIS: &str = "2026-01-01T00:00:00Z";

/// The public key (base58) of a keypair file's content: a JSON array of 64 bytes whose
/// last 32 are the public key (solana-keypair `read_keypair`).
pub fn pubkey_of_keypair(text: &str) -> Option<String> {
    let bytes: Vec<u8> = serde_json::from_str(text.trim()).ok()?;
    (bytes.len() == 64).then(|| base58(&bytes[32..]))
}

/// Bitcoin-alphabet base58, as Solana prints public keys.
pub fn base58(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    let mut digits: Vec<u8> = Vec::new();
    for &b in bytes {
        let mut carry = u32::from(b);
        for d in digits.iter_mut() {
            carry += u32::from(*d) << 8;
            *d = (carry % 58) as u8;
            carry /= 58;
        }
        while carry > 0 {
            digits.push((carry % 58) as u8);
            carry /= 58;
        }
    }
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    std::iter::repeat_n('1', zeros)
        .chain(digits.iter().rev().map(|d| ALPHABET[*d as usize] as char))
        .collect()
}

/// Slot indexes of `identity`'s leader slots in `epoch`: a group of 4 every
/// [`LEADER_EVERY`] slots, at an offset drawn from the identity and the epoch (the
/// real schedule is drawn from the stakes with the epoch as seed).
pub fn leader_slots(identity: &str, epoch: u64) -> Vec<u64> {
    let phase = super::super::seed(&format!("{identity}/{epoch}")) % (LEADER_EVERY / CONSECUTIVE);
    let first = phase * CONSECUTIVE;
    (0..)
        .map(|i| first + i * LEADER_EVERY)
        .take_while(|s| *s + CONSECUTIVE <= SLOTS_PER_EPOCH)
        .flat_map(|s| s..s + CONSECUTIVE)
        .collect()
}

/// The cluster's vote accounts as `getVoteAccounts` lists them: this validator's if it
/// votes, and the rest of the cluster's stake, 1% of it delinquent.
pub fn vote_accounts(identity: &str, staked: bool) -> Value {
    const LAMPORTS: u64 = 1_000_000_000;
    let mut current = vec![json!({
        "nodePubkey": "dv1ZAGvdsz5hHLwWXsVnM94hWf1pjbKVau1QVkaMJ92",
        "votePubkey": "Vote111111111111111111111111111111111111111",
        "activatedStake": 380_000_000 * LAMPORTS,
        "commission": 0,
        "epochVoteAccount": true,
    })];
    if staked {
        current.push(json!({
            "nodePubkey": identity,
            "votePubkey": "Va1tune1ab1Vote1111111111111111111111111111",
            "activatedStake": 250_000 * LAMPORTS,
            "commission": 5,
            "epochVoteAccount": true,
        }));
    }
    json!({
        "current": current,
        "delinquent": [{
            "nodePubkey": "dv2eQHeP4RFrJZ6UeiZWoc3XTtmtZCUKxxCApCDcRNV",
            "votePubkey": "Vote111111111111111111111111111111111111112",
            "activatedStake": 3_800_000 * LAMPORTS,
            "commission": 0,
            "epochVoteAccount": true,
        }],
    })
}

/// `getLeaderSchedule` at `slot` (rpc.rs get_leader_schedule): the epoch of the slot
/// given (the current one by default), null for an epoch whose schedule is not known yet;
/// with `identity`, only that identity's entry, as slot indexes in the epoch. The lab
/// knows its own identity's slots only (none when unstaked).
pub fn leader_schedule_answer(identity: &str, staked: bool, slot: u64, params: &Value) -> Value {
    let p = params.as_array();
    let at = p
        .and_then(|a| a.first())
        .and_then(Value::as_u64)
        .unwrap_or(slot);
    let wanted = p
        .and_then(|a| a.iter().find_map(|c| c.get("identity")))
        .and_then(Value::as_str);
    let epoch = at / SLOTS_PER_EPOCH;
    if epoch > slot / SLOTS_PER_EPOCH + 1 {
        return Value::Null;
    }
    let mut out = serde_json::Map::new();
    let mine = if staked {
        leader_slots(identity, epoch)
    } else {
        Vec::new()
    };
    if wanted.is_none_or(|w| w == identity) && !mine.is_empty() {
        out.insert(identity.to_string(), json!(mine));
    }
    Value::Object(out)
}

/// `getHighestSnapshotSlot` of a validator at `slot`: snapshots of its own processed
/// slots at the default intervals (snapshot_utils.rs DEFAULT_FULL_/DEFAULT_INCREMENTAL_
/// SNAPSHOT_ARCHIVE_INTERVAL_SLOTS: 25,000 and 100; Frankendancer's default.toml
/// `[snapshots]` the same).
pub fn highest_snapshot_answer(slot: u64) -> Value {
    let full = slot / 25_000 * 25_000;
    let incremental = slot / 100 * 100;
    if incremental > full {
        json!({"full": full, "incremental": incremental})
    } else {
        json!({"full": full})
    }
}

/// Slots of the lab chain before `started`, in simulated time: a validator that
/// restarts finds the chain where it went on without it.
pub fn chain_offset(clock: &Clock, started: Timestamp) -> f64 {
    let genesis: Timestamp = GENESIS.parse().expect("GENESIS is a timestamp");
    (clock.since(genesis, started) * SLOTS_PER_SECOND).floor()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keypair_file_gives_its_public_key() {
        // The all-zero secret's public key under ed25519 is not needed: the file's second
        // half is the public key as written.
        let mut bytes = vec![7u8; 32];
        bytes.extend([0u8; 31]);
        bytes.push(1);
        let text = serde_json::to_string(&bytes).unwrap();
        assert_eq!(
            pubkey_of_keypair(&text).unwrap(),
            "11111111111111111111111111111112"
        );
        assert_eq!(
            base58(&[0xff; 32]),
            "JEKNVnkbo3jma5nREBBJCDoXFVeKkD56V3xKrvRmWxFG"
        );
        assert!(pubkey_of_keypair("[1,2,3]").is_none());
        assert!(pubkey_of_keypair("not json").is_none());
    }

    #[test]
    fn leader_slots_come_in_fours_with_idle_windows_between() {
        let s = leader_slots("Va1tune", 3);
        assert_eq!(s.len() as u64 % CONSECUTIVE, 0);
        assert!(s.windows(2).all(|w| w[1] > w[0]));
        let gaps: Vec<u64> = s
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|g| *g > 1)
            .collect();
        assert!(
            gaps.iter().all(|g| *g == LEADER_EVERY - CONSECUTIVE + 1),
            "{gaps:?}"
        );
        assert!(*s.last().unwrap() < SLOTS_PER_EPOCH);
    }
}
