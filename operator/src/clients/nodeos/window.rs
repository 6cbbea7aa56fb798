//! A nodeos producer's restart window: after its round. Antelope schedules blocks in
//! 500 ms slots counted from 2000-01-01 (`block_interval_ms`, `block_timestamp_epoch`),
//! each producer of the active schedule producing `producer_repetitions` = 12 in a row,
//! in the schedule's order: slot `s` is `producers[(s % (n * 12)) / 12]`'s
//! (AntelopeIO/spring v1.2.2 libraries/chain/include/eosio/chain/config.hpp L38, L131,
//! block_timestamp.hpp, block_header_state_utils.hpp `get_scheduled_producer` L42-46; the
//! same in leap v5.0.3 producer_schedule.hpp). So from the active schedule
//! (`/v1/chain/get_producer_schedule`) and the time, the next round of a producer and
//! its end are known exactly.
//!
//! The rule: never while its round runs; then in the first half of the gap before its
//! next round, so the new nodeos has at least half the gap (60 s of a 21-producer
//! schedule's 126 s cycle) to start before it is due. [`judge`] is pure: each case is a
//! row of the table test. A Validator without a producer name restarts at once.

use futures::future::BoxFuture;
use jiff::Timestamp;

use crate::clients::window::{Judging, Kept, Reach, Read, Reading, RestartWindow, Verdict};

/// A nodeos producer's window, from the active schedule nodeos serves on `http_port`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProducerRound {
    pub http_port: i32,
}

/// The active schedule's producer names, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule(pub Vec<String>);

impl RestartWindow for ProducerRound {
    /// `/v1/chain/get_producer_schedule`, while a producer's change is pending.
    fn read<'a>(&'a self, at: Reach<'a>) -> BoxFuture<'a, Read> {
        Box::pin(async move {
            if at.spec.producer_name.is_none() || !at.pending {
                return Read::default();
            }
            let url = format!(
                "http://{}:{}/v1/chain/get_producer_schedule",
                at.ip, self.http_port
            );
            let schedule = match at.endpoints.get(&url).await {
                Some((200, body)) => active_producers(&body).map(|p| Reading::new(Schedule(p))),
                Some((code, body)) => Err(format!(
                    "get_producer_schedule: HTTP {code}: {}",
                    body.chars().take(200).collect::<String>()
                )),
                None => Err(format!("get_producer_schedule: no answer from {url}")),
            };
            Read {
                position: None,
                reading: Some(schedule),
            }
        })
    }

    fn judge(&self, j: &Judging) -> (Verdict, Option<Kept>) {
        let verdict = match (&j.spec.producer_name, j.reading) {
            (None, _) => {
                Verdict::Open("a non-producing nodeos misses no round: restarting now".into())
            }
            (Some(p), Some(Ok(r))) => match r.get::<Schedule>() {
                Some(Schedule(producers)) => judge(producers, p, j.now),
                None => Verdict::Wait("the figures read are not a producer schedule".into()),
            },
            (Some(_), Some(Err(e))) => Verdict::Wait(format!(
                "the producer schedule cannot be read from nodeos: {e}"
            )),
            // Not serving its API (starting, replaying): it produces nothing.
            (Some(_), None) if !j.answered => Verdict::Open(
                "nodeos does not answer its API: it produces no block, restarting now".into(),
            ),
            (Some(_), None) => Verdict::Wait("the producer schedule is not read yet".into()),
        };
        (verdict, None)
    }
}

/// `config::block_interval_ms`.
pub const BLOCK_MS: i64 = 500;
/// `config::producer_repetitions`.
pub const REPETITIONS: u64 = 12;
/// `config::block_timestamp_epoch`: 2000-01-01T00:00:00Z in ms.
const EPOCH_MS: i64 = 946_684_800_000;

/// The block slot of a moment.
pub fn slot_at(t: Timestamp) -> u64 {
    ((t.as_millisecond() - EPOCH_MS) / BLOCK_MS).max(0) as u64
}

/// The producer names of `get_producer_schedule`'s `active.producers` (each
/// `{producer_name, authority}`).
pub fn active_producers(body: &str) -> Result<Vec<String>, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("get_producer_schedule: {e}: {body}"))?;
    let list = v["active"]["producers"]
        .as_array()
        .ok_or_else(|| format!("get_producer_schedule: no active.producers in {body}"))?;
    list.iter()
        .map(|p| {
            p["producer_name"]
                .as_str()
                .map(String::from)
                .ok_or_else(|| format!("get_producer_schedule: a producer without a name: {p}"))
        })
        .collect()
}

/// Whether `producer` may be restarted at `now`, and why.
pub fn judge(producers: &[String], producer: &str, now: Timestamp) -> Verdict {
    let n = producers.len() as u64;
    let Some(index) = producers.iter().position(|p| p == producer) else {
        return Verdict::Open(format!(
            "producer {producer} is not in the active schedule ({n} producers): it has no round to miss"
        ));
    };
    if n == 1 {
        return Verdict::Wait(format!(
            "producer {producer} is the only producer of the active schedule: every block is its own, so there is no gap to restart in (spec.restartWindow.force restarts it anyway)"
        ));
    }
    let cycle = n * REPETITIONS;
    let slot = slot_at(now);
    let at = slot % cycle;
    let start = index as u64 * REPETITIONS;
    let secs = |slots: u64| slots as f64 * BLOCK_MS as f64 / 1000.0;
    let gap = cycle - REPETITIONS;
    if (start..start + REPETITIONS).contains(&at) {
        let left = start + REPETITIONS - at;
        return Verdict::Wait(format!(
            "producer {producer} is producing its round (block {} of {REPETITIONS}; it ends in {:.1} s, at slot {})",
            at - start + 1,
            secs(left),
            slot + left
        ));
    }
    let until = (start + cycle - at) % cycle;
    if 2 * until >= gap {
        Verdict::Open(format!(
            "producer {producer}'s round is over and its next starts in {:.1} s (slot {}; {n} producers, a round every {:.0} s)",
            secs(until),
            slot + until,
            secs(cycle)
        ))
    } else {
        Verdict::Wait(format!(
            "producer {producer}'s next round starts in {:.1} s (slot {}): the restart waits for that round to end, then goes in the first half of the {:.0} s between its rounds",
            secs(until),
            slot + until,
            secs(gap)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("bp{}", i + 1)).collect()
    }

    /// The moment of slot `cycles * n * 12 + offset`.
    fn at_slot(slot: u64) -> Timestamp {
        Timestamp::from_millisecond(EPOCH_MS + slot as i64 * BLOCK_MS).unwrap()
    }

    #[test]
    fn slots_count_half_seconds_from_2000() {
        let t: Timestamp = "2000-01-01T00:00:01.2Z".parse().unwrap();
        assert_eq!(slot_at(t), 2);
        assert_eq!(slot_at(at_slot(1_700_000_123)), 1_700_000_123);
    }

    #[test]
    fn the_table() {
        // 21 producers: a cycle of 252 slots (126 s); bp3 (index 2) owns slots 24..36 of it.
        let base = 21 * 12 * 1_000_000;
        // (what, producers, who, slot in the cycle, open or a part of the reason).
        type Row<'a> = (&'a str, usize, &'a str, u64, Result<(), &'a str>);
        let rows: Vec<Row> = vec![
            (
                "in its round, first block",
                21,
                "bp3",
                24,
                Err("producing its round (block 1 of 12"),
            ),
            (
                "in its round, last block",
                21,
                "bp3",
                35,
                Err("block 12 of 12; it ends in 0.5 s"),
            ),
            (
                "just after its round: the whole gap ahead",
                21,
                "bp3",
                36,
                Ok(()),
            ),
            (
                "half the gap ahead: still open",
                21,
                "bp3",
                36 + 120,
                Ok(()),
            ),
            (
                "less than half the gap ahead",
                21,
                "bp3",
                36 + 121,
                Err("next round starts in 59.5 s"),
            ),
            (
                "just before its round",
                21,
                "bp3",
                23,
                Err("next round starts in 0.5 s"),
            ),
            (
                "first in the schedule, after the wrap",
                21,
                "bp1",
                251,
                Err("next round starts in 0.5 s"),
            ),
            (
                "first in the schedule, just after its round",
                21,
                "bp1",
                12,
                Ok(()),
            ),
            ("not in the schedule", 21, "standby1", 30, Ok(())),
            ("the only producer", 1, "bp1", 5, Err("the only producer")),
            ("two producers: in the other's round", 2, "bp1", 12, Ok(())),
            (
                "two producers: the other's round, late",
                2,
                "bp1",
                20,
                Err("next round starts in 2.0 s"),
            ),
        ];
        for (what, n, who, offset, want) in rows {
            let v = judge(&schedule(n), who, at_slot(base + offset));
            match (&v, want) {
                (Verdict::Open(_), Ok(())) => {}
                (Verdict::Wait(why), Err(part)) => assert!(why.contains(part), "{what}: {why}"),
                _ => panic!("{what}: {v:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn the_schedule_is_read_from_get_producer_schedule() {
        let body = r#"{"active":{"version":12,"producers":[{"producer_name":"bp1","authority":[0,{"threshold":1,"keys":[]}]},{"producer_name":"bp2","authority":[0,{"threshold":1,"keys":[]}]}]},"pending":null,"proposed":null}"#;
        assert_eq!(active_producers(body).unwrap(), vec!["bp1", "bp2"]);
        assert!(active_producers("{}").is_err());
        assert!(active_producers("not json").is_err());
    }

    /// A producer's pending change reads the schedule; a non-producer's reads nothing.
    #[tokio::test]
    async fn the_schedule_is_read_for_a_producer_only() {
        let mut a = crate::clients::window::fixtures::Answers::default();
        let url = "http://10.0.0.9:8888/v1/chain/get_producer_schedule";
        a.get.insert(
            url.into(),
            (200, r#"{"active":{"version":1,"producers":[{"producer_name":"bp1","authority":[0,{"threshold":1,"keys":[]}]}]},"pending":null,"proposed":null}"#.into()),
        );
        let w = ProducerRound { http_port: 8888 };
        let mut spec: crate::api::validator::ValidatorSpec =
            serde_saphyr::from_str("template: {nodeos: {image: nodeos}}\nnodeName: node-1\n")
                .unwrap();
        async fn read(
            w: &ProducerRound,
            a: &crate::clients::window::fixtures::Answers,
            spec: &crate::api::validator::ValidatorSpec,
        ) -> Read {
            w.read(Reach {
                endpoints: a,
                ip: "10.0.0.9",
                spec,
                health: None,
                pending: true,
            })
            .await
        }
        assert!(read(&w, &a, &spec).await.reading.is_none());
        spec.producer_name = Some("bp1".into());
        let got = read(&w, &a, &spec).await.reading.unwrap().unwrap();
        assert_eq!(got.get::<Schedule>(), Some(&Schedule(vec!["bp1".into()])));
        a.get.insert(url.into(), (503, "starting".into()));
        let got = read(&w, &a, &spec).await;
        assert_eq!(
            got.reading.unwrap().unwrap_err(),
            "get_producer_schedule: HTTP 503: starting"
        );
    }
}
