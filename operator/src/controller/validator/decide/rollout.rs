//! A change of the rendered pod reaches the running one only in the client's restart
//! window (or when `spec.restartWindow.force` says so): the running pod is deleted, and
//! the pod step creates the new one once it is gone.

use std::time::Duration;

use jiff::Timestamp;

use super::{Act, Pass};
use crate::api::validator::{PendingChange, ValidatorPhase, ValidatorSpec, ValidatorStatus};
use crate::clients::Rendered;
use crate::clients::window::{Judging, Kept, Verdict};
use crate::controller::validator::observe::{Observed, PodState};

/// What the rollout step decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollout {
    /// The pod runs what is rendered.
    UpToDate,
    /// The window is open (or forced): delete the running pod. `change` says what
    /// changed, `why` why now.
    Restart {
        change: String,
        why: String,
        forced: bool,
    },
    /// The change waits for the window: what the status keeps while it does (what
    /// changed and what it waits for in `waiting_for`).
    Wait(PendingChange),
}

pub fn judge(
    spec: &ValidatorSpec,
    previous: &ValidatorStatus,
    obs: &Observed,
    pod: &PodState,
    rendered: &Rendered,
    now: Timestamp,
) -> Rollout {
    if pod.hash.as_deref() == Some(obs.hash.as_str()) {
        return Rollout::UpToDate;
    }
    let new_image = rendered
        .pod
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone());
    let what = match (&pod.image, &new_image) {
        (Some(a), Some(b)) if a != b => format!("image {a} -> {b}"),
        _ => "its tuning, resources or arguments".to_string(),
    };
    let change = format!(
        "the rendered pod changed ({what}; hash {} -> {})",
        pod.hash.as_deref().unwrap_or("none"),
        obs.hash
    );
    let forced = spec.restart_window.as_ref().is_some_and(|r| r.force);
    let (verdict, kept) = window(spec, previous, obs, forced, now);
    match verdict {
        Verdict::Open(why) => Rollout::Restart {
            change,
            why,
            forced,
        },
        Verdict::Wait(why) => {
            let mut pending = kept.unwrap_or_else(|| PendingChange {
                hash: obs.hash.clone(),
                waiting_for: String::new(),
                snapshot_slot: None,
                incremental_seen: false,
            });
            pending.waiting_for = format!("{change}; waiting: {why}");
            Rollout::Wait(pending)
        }
    }
}

/// The client's restart window for a pending change, judged through its
/// [`RestartWindow`](crate::clients::window::RestartWindow): its verdict, and what the
/// window keeps between looks (in `status.pendingChange`), if anything.
fn window(
    spec: &ValidatorSpec,
    previous: &ValidatorStatus,
    obs: &Observed,
    forced: bool,
    now: Timestamp,
) -> (Verdict, Option<PendingChange>) {
    if forced {
        return (
            Verdict::Open(
                "spec.restartWindow.force is set: restarting outside the client's window".into(),
            ),
            None,
        );
    }
    let kept = previous
        .pending_change
        .as_ref()
        .filter(|p| p.hash == obs.hash);
    let (verdict, keep) = obs.window.judge(&Judging {
        spec,
        reading: obs.look.as_ref(),
        answered: obs.answer.is_some(),
        unanswered: obs.unanswered.as_deref(),
        kept: Kept {
            snapshot_slot: kept.and_then(|p| p.snapshot_slot),
            incremental_seen: kept.is_some_and(|p| p.incremental_seen),
        },
        now,
    });
    let pending = keep.map(|k| PendingChange {
        hash: obs.hash.clone(),
        waiting_for: String::new(),
        snapshot_slot: k.snapshot_slot,
        incremental_seen: k.incremental_seen,
    });
    (verdict, pending)
}

/// Says what the rollout decided; false when the pass ends here (the pod is replaced).
pub(super) fn apply(pass: &mut Pass<'_>, rollout: Rollout, pod: &PodState) -> bool {
    match rollout {
        Rollout::UpToDate => {
            pass.set(
                "RestartPending",
                false,
                "UpToDate",
                "the pod runs what is rendered",
            );
            true
        }
        Rollout::Restart {
            change,
            why,
            forced,
        } => {
            pass.act(Act::DeletePod);
            pass.out.phase = ValidatorPhase::Restarting;
            pass.out.pending_change = None;
            pass.set(
                "RestartPending",
                true,
                "Restarting",
                format!("{change}: {why}"),
            );
            pass.set("Ready", false, "Restarting", "the pod is replaced");
            pass.event(
                forced,
                if forced {
                    "ForcedRestart"
                } else {
                    "Restarting"
                },
                format!(
                    "{change}: {why}; deleting pod {} to start the new one",
                    pod.name
                ),
            );
            pass.requeue = Some(Duration::from_secs(2));
            false
        }
        Rollout::Wait(pending) => {
            pass.set(
                "RestartPending",
                true,
                "WaitingForWindow",
                pending.waiting_for.clone(),
            );
            pass.out.pending_change = Some(pending);
            // The window is a matter of slots (400 ms each): look again soon.
            pass.requeue = Some(Duration::from_secs(2));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::validator::observed;
    use crate::fixtures::yaml;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Row {
        what: String,
        /// The Validator's spec, over a Besu's (restartWindow, say).
        #[serde(default = "nothing")]
        spec: serde_json::Value,
        /// The status of the pass before (a pending change and what its window kept).
        #[serde(default)]
        previous: ValidatorStatus,
        /// What the pass observed ([`observed`]): the running pod's hash and image.
        observed: serde_json::Value,
        /// When, for a nodeos producer's round.
        at: Option<String>,
        expect: Expect,
    }

    fn nothing() -> serde_json::Value {
        serde_json::json!({})
    }

    /// The decision, with (part of) what it says.
    #[derive(serde::Deserialize)]
    #[serde(
        rename_all = "camelCase",
        rename_all_fields = "camelCase",
        deny_unknown_fields
    )]
    enum Expect {
        UpToDate,
        Restart {
            says: String,
            #[serde(default)]
            forced: bool,
        },
        Wait {
            says: String,
            snapshot_slot: Option<i64>,
        },
    }

    #[test]
    fn the_table() {
        let rows: Vec<Row> = yaml(TABLE);
        assert_eq!(rows.len(), 19);
        let base: serde_json::Value = yaml(
            "
            nodeName: bm-01
            role: nonVoting
            template: {besu: {image: 'hyperledger/besu:25.12.0'}}
            ",
        );
        for row in rows {
            let what = &row.what;
            let spec: ValidatorSpec =
                serde_json::from_value(crate::report::patch::merge_apply(&base, &row.spec))
                    .unwrap();
            let obs = observed(&serde_json::to_string(&row.observed).unwrap());
            let pod = obs.pod.clone().unwrap();
            let rendered = obs.rendered.clone().unwrap();
            let at = row
                .at
                .as_deref()
                .unwrap_or("2026-11-27T22:00:00Z")
                .parse()
                .unwrap();
            match (
                judge(&spec, &row.previous, &obs, &pod, &rendered, at),
                row.expect,
            ) {
                (Rollout::UpToDate, Expect::UpToDate) => {}
                (
                    Rollout::Restart {
                        change,
                        why,
                        forced,
                    },
                    Expect::Restart {
                        says,
                        forced: want_forced,
                    },
                ) => {
                    let text = format!("{change}: {why}");
                    assert!(text.contains(&says), "{what}: {text}");
                    assert_eq!(forced, want_forced, "{what}");
                }
                (
                    Rollout::Wait(pending),
                    Expect::Wait {
                        says,
                        snapshot_slot,
                    },
                ) => {
                    assert!(
                        pending.waiting_for.contains(&says),
                        "{what}: {}",
                        pending.waiting_for
                    );
                    assert_eq!(pending.hash, obs.hash, "{what}");
                    assert_eq!(pending.snapshot_slot, snapshot_slot, "{what}");
                }
                (got, _) => panic!("{what}: {got:?}"),
            }
        }
    }

    /// A running Besu's pod rendered from hash h0, the rendered one h1 (as the fixture
    /// has it); Agave's rows share `*agave` (the pod answers getHealth ok), nodeos's
    /// `*nodeos`. `at` 2026-11-27T22:00:00Z is block slot 1,698,264,000, 216 slots into a
    /// 21-producer schedule's 252-slot cycle: bp1's round starts 36 slots (18 s) later.
    const TABLE: &str = r#"
    - what: the pod runs what is rendered
      observed: {pod: {name: v, hash: h1, phase: Running}}
      expect: upToDate
    - what: a new image restarts Besu at once (it has no window)
      observed:
        image: hyperledger/besu:26.1.0
        pod: {name: v, hash: h0, phase: Running, image: 'hyperledger/besu:25.12.0'}
      expect:
        restart:
          says: >-
            the rendered pod changed (image hyperledger/besu:25.12.0 ->
            hyperledger/besu:26.1.0; hash h0 -> h1): the client has no restart window
    - what: a change of its arguments says so
      observed: {pod: {name: v, hash: h0, phase: Running}}
      expect: {restart: {says: "(its tuning, resources or arguments; hash h0 -> h1)"}}
    - what: a window valtune does not compute waits, saying so
      observed:
        window: {notImplemented: no window yet}
        pod: {name: v, hash: h0, phase: Running}
      expect:
        wait:
          says: >-
            hash h0 -> h1); waiting: the client's restart window: no window yet; the pod
            keeps running as it is
    - what: force restarts outside any window, named
      spec: {restartWindow: {force: true}}
      observed:
        window: {notImplemented: no window yet}
        pod: {name: v, hash: h0, phase: Running}
      expect:
        restart:
          says: "spec.restartWindow.force is set: restarting outside the client's window"
          forced: true
    - what: Agave's window open, with a newer snapshot than the one it first opened at
      previous:
        pendingChange: {hash: h1, waitingFor: '', snapshotSlot: 999800, incrementalSeen: true}
      observed: &agave
        window: leaderSchedule
        pod: {name: v, hash: h0, phase: Running, node: bm-01, nodeReady: true}
        answer: {code: 200, body: '{"jsonrpc":"2.0","result":"ok","id":1}', health: healthy}
        look:
          Ok: &open
            healthy: true
            slot: 1000000
            slotIndex: 100000
            slotsInEpoch: 432000
            epoch: 2
            leaderSlots: [1010000]
            snapshot: [990000, 999900]
            currentStake: 98
            delinquentStake: 2
      expect: {restart: {says: next leader slot 1010000 is 10000 slots away}}
    - what: Agave's window open for the first time waits for a new snapshot, keeping this one
      observed: *agave
      expect: {wait: {says: Waiting for a new snapshot, snapshotSlot: 999900}}
    - what: a kept snapshot of another change is not this one's
      previous:
        pendingChange: {hash: h7, waitingFor: '', snapshotSlot: 999800, incrementalSeen: true}
      observed: *agave
      expect: {wait: {says: Waiting for a new snapshot, snapshotSlot: 999900}}
    - what: Agave leading soon waits
      previous:
        pendingChange: {hash: h1, waitingFor: '', snapshotSlot: 999800, incrementalSeen: true}
      observed:
        <<: *agave
        look: {Ok: {<<: *open, leaderSlots: [1000100, 1010000]}}
      expect: {wait: {says: Validator will be leader soon, snapshotSlot: 999800}}
    - what: Agave leading soon, forced
      spec: {restartWindow: {force: true}}
      observed:
        <<: *agave
        look: {Ok: {<<: *open, leaderSlots: [1000100, 1010000]}}
      expect: {restart: {says: spec.restartWindow.force is set, forced: true}}
    - what: Agave's figures unreadable while it answers
      observed: {<<: *agave, look: {Err: "getVoteAccounts: no answer"}}
      expect:
        wait:
          says: >-
            the restart window's figures cannot be read from the validator's RPC:
            getVoteAccounts: no answer
    - what: Agave's figures not read yet
      observed: {<<: *agave, look: null}
      expect: {wait: {says: the restart window's figures are not read yet}}
    - what: Agave not serving its RPC leads no slot
      observed: {<<: *agave, look: null, answer: null}
      expect: {restart: {says: the validator does not answer its RPC}}
    - what: Agave asked and silent may be busy leading
      observed:
        <<: *agave
        look: null
        answer: null
        unanswered: "http://10.0.0.7:8899/: operation timed out"
      expect:
        wait:
          says: >-
            the validator's RPC did not answer (http://10.0.0.7:8899/: operation timed
            out), so its leader slots cannot be read
    - what: a nodeos that produces nothing misses no round
      observed: &nodeos
        window: producerRound
        pod: {name: v, hash: h0, phase: Running}
        answer: {code: 200, body: '{"head_block_num":1}', health: healthy}
      expect: {restart: {says: a non-producing nodeos misses no round}}
    - what: a producer in its round waits for its end
      at: "2026-11-27T22:00:19.500Z"
      spec: {producerName: bp1}
      observed:
        <<: *nodeos
        schedule: {Ok: [bp1, bp2, bp3, bp4, bp5, bp6, bp7, bp8, bp9, bp10, bp11, bp12, bp13, bp14, bp15, bp16, bp17, bp18, bp19, bp20, bp21]}
      expect: {wait: {says: producer bp1 is producing its round}}
    - what: a producer whose schedule cannot be read waits
      spec: {producerName: bp1}
      observed: {<<: *nodeos, schedule: {Err: "HTTP 500"}}
      expect: {wait: {says: "the producer schedule cannot be read from nodeos: HTTP 500"}}
    - what: a producer whose schedule is not read yet waits
      spec: {producerName: bp1}
      observed: *nodeos
      expect: {wait: {says: the producer schedule is not read yet}}
    - what: a producer that does not answer produces no block
      spec: {producerName: bp1}
      observed: {<<: *nodeos, answer: null}
      expect: {restart: {says: nodeos does not answer its API}}
    "#;
}
