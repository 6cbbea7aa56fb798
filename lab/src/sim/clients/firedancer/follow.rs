//! A Frankendancer follower's Agave side: it joins the cluster, replays and serves RPC
//! through its Agave child, so the lab plays that side with Agave's calibrated model
//! (a non-voting validator on mainnet-beta by memory, `super::super::agave::model`): its
//! JSON-RPC (`[rpc] port`, the full API with `[rpc] full_api`) and the datapoints it pushes
//! to `[reporting] solana_metrics_config` (passed to Agave as SOLANA_METRICS_CONFIG).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::super::agave::identity;
use super::super::agave::model::{AgaveModel, HEALTH_SLOT_DISTANCE};
use super::super::agave::signer::{Files, Signer};
use super::super::{Datapoint, MetricsSink, Rpc};
use super::topology::Cfg;
use crate::sim::signing::Recorder;

/// The identity of a follower whose keypair the lab cannot read (a trial's, made by
/// `fdctl keys new` in the container).
const LAB_IDENTITY: &str = "Va1tune1ab1dentity11111111111111111111111111";

/// A follower's place in its cluster: who its Agave child signs as ([`Signer`]: the
/// keypair file `[consensus] identity_path` names, as the start script left it, through
/// a link on a volume as a failover pair member has it), and whether it votes
/// (`vote_account_path` set: "If no voting account is provided, voting will be
/// disabled"), which the lab takes as staked, so it leads slots (as for Agave), while its
/// identity is the vote account's node identity: the first of `authorized_voter_paths`
/// (passed as `--authorized-voter`, src/app/fdctl/commands/run_agave.c @v0.1106.40201)
/// when given, else its own identity. `files` reads a path as the validator container
/// sees it; the Agave child keeps its tower in `ledger` (fdctl passes `--ledger` and no
/// `--tower`, run_agave.c).
pub struct Cluster {
    pub signer: Signer,
}

impl Cluster {
    pub fn of(
        cfg: &Cfg,
        files: Files,
        ledger: Option<PathBuf>,
        recorder: Recorder,
    ) -> Result<Cluster, String> {
        let path = cfg.str("consensus.identity_path", "");
        let key = |path: &str| {
            files(path)
                .map(|text| {
                    identity::pubkey_of_keypair(&text).ok_or_else(|| {
                        format!(
                            "ERR     failed to read identity keypair `{path}`: not a keypair file"
                        )
                    })
                })
                .transpose()
        };
        let identity = key(path)?.unwrap_or_else(|| LAB_IDENTITY.to_string());
        let votes = !cfg.str("consensus.vote_account_path", "").is_empty();
        let voter = match cfg.strs("consensus.authorized_voter_paths").first() {
            Some(p) => key(p)?,
            None => None,
        };
        let vote_node = votes.then(|| voter.unwrap_or_else(|| identity.clone()));
        Ok(Cluster {
            signer: Signer::new(identity, vote_node, ledger, files, recorder),
        })
    }

    pub fn identity(&self) -> String {
        self.signer.identity()
    }

    /// It votes and leads its slots as the vote account's node identity.
    pub fn staked(&self) -> bool {
        self.signer.votes()
    }
}

/// Methods Agave serves without `--full-rpc-api` (rpc/src/rpc.rs `rpc_minimal`), and the
/// full-API ones solana-exporter calls.
const MINIMAL: &[&str] = &[
    "getEpochInfo",
    "getGenesisHash",
    "getHealth",
    "getIdentity",
    "getSlot",
    "getTransactionCount",
    "getVersion",
    "getVoteAccounts",
    "getLeaderSchedule",
    "getHighestSnapshotSlot",
];
const FULL: &[&str] = &["minimumLedgerSlot", "getFirstAvailableBlock"];

/// `host=..,db=..,u=..,p=..`, all four, as Agave's metrics/src/metrics.rs reads it.
pub fn sink(value: &str) -> Result<Option<MetricsSink>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    let mut parts = std::collections::BTreeMap::new();
    for pair in value.split(',') {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("SOLANA_METRICS_CONFIG is invalid: '{pair}'"))?;
        parts.insert(k, v.to_string());
    }
    let get = |k: &str| parts.get(k).filter(|v| !v.is_empty()).cloned();
    match (get("host"), get("db"), get("u"), get("p")) {
        (Some(host), Some(db), Some(user), Some(password)) => Ok(Some(MetricsSink {
            host,
            db,
            user,
            password,
        })),
        _ => Err("SOLANA_METRICS_CONFIG is incomplete".into()),
    }
}

/// Counters read through RPC grow `scale` times slower, so rates read in simulated units.
fn lab(simulated: f64, scale: f64) -> u64 {
    (simulated / scale).max(0.0) as u64
}

/// The Agave child's JSON-RPC answer at `t`; None before `start` (its snapshot loaded).
pub fn rpc(
    (m, start): (&AgaveModel, f64),
    full: bool,
    agave: &str,
    cluster: &Cluster,
    t: f64,
    method: &str,
    params: &Value,
) -> Option<Rpc> {
    if t < start {
        return None;
    }
    if !(MINIMAL.contains(&method) || (full && FULL.contains(&method))) {
        return Some(Rpc::Error {
            code: -32601,
            message: "Method not found".into(),
            data: None,
        });
    }
    let slot = m.slot_height(t) as u64;
    Some(match method {
        "getHealth" => {
            let behind = m.slot_lag(t).round();
            if behind <= HEALTH_SLOT_DISTANCE {
                Rpc::Result(json!("ok"))
            } else {
                Rpc::Error {
                    code: -32005,
                    message: format!("Node is behind by {behind} slots"),
                    data: Some(json!({"numSlotsBehind": behind as u64})),
                }
            }
        }
        "getSlot" => Rpc::Result(json!(slot)),
        "getTransactionCount" => Rpc::Result(json!(m.chain_counts(t).1)),
        // The chain's blocks and transactions up to the node's slot (simulated counts,
        // like the slot), as the Agave model counts them.
        "getEpochInfo" => {
            let (blocks, txs) = m.chain_counts(t);
            Rpc::Result(json!({
                "absoluteSlot": slot,
                "blockHeight": blocks,
                "epoch": slot / 432_000,
                "slotIndex": slot % 432_000,
                "slotsInEpoch": 432_000,
                "transactionCount": txs,
            }))
        }
        "getVersion" => Rpc::Result(json!({"solana-core": agave, "feature-set": 3_294_202_862u64})),
        "getIdentity" => Rpc::Result(json!({"identity": cluster.identity()})),
        "getGenesisHash" => Rpc::Result(json!("5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d")),
        "getVoteAccounts" => Rpc::Result(identity::vote_accounts(
            &cluster.identity(),
            cluster.staked(),
        )),
        "getLeaderSchedule" => Rpc::Result(identity::leader_schedule_answer(
            &cluster.identity(),
            cluster.staked(),
            slot,
            params,
        )),
        "getHighestSnapshotSlot" => Rpc::Result(identity::highest_snapshot_answer(slot)),
        _ => Rpc::Result(json!(slot.saturating_sub(200_000))),
    })
}

/// `replay-slot-stats` points in (t0, t1], one per `step` (Agave's
/// ledger/src/blockstore_processor.rs reports one per replayed slot; the lab batches them
/// as the Agave model does).
pub fn datapoints(
    m: &AgaveModel,
    start: f64,
    scale: f64,
    step: f64,
    t0: f64,
    t1: f64,
) -> Vec<Datapoint> {
    let first = (t0 / step).floor() as u64 + 1;
    let last = (t1 / step).floor() as u64;
    (first..=last)
        .map(|i| i as f64 * step)
        .filter(|at| *at >= start)
        .map(|at| Datapoint {
            measurement: "replay-slot-stats",
            tags: Vec::new(),
            fields: vec![
                ("slot", m.slot_height(at) as i64),
                (
                    "total_transactions",
                    (lab(m.transactions(at), scale) - lab(m.transactions(at - step), scale)) as i64,
                ),
            ],
            at,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn files(written: BTreeMap<String, String>) -> Files {
        Box::new(move |p| written.get(p).cloned())
    }

    /// The identity is the keypair the start script copied to `identity_path`; a vote
    /// account makes it staked, so it leads slots; a trial's unreadable identity is the
    /// lab's.
    #[test]
    fn a_validators_identity_is_read_from_its_copied_keypair() {
        let keypair: Vec<u8> = (0..64u8).collect();
        let text = serde_json::to_string(&keypair).unwrap();
        let written =
            BTreeMap::from([("/run/valtune/keys/identity.json".to_string(), text.clone())]);
        let config = super::super::toml::parse(
            "[consensus]\nidentity_path = \"/run/valtune/keys/identity.json\"\nvote_account_path = \"/run/valtune/keys/vote-account.json\"\n",
        )
        .unwrap();
        let c = Cluster::of(
            &Cfg(&config),
            files(written.clone()),
            None,
            Recorder::none(),
        )
        .unwrap();
        assert_eq!(c.identity(), identity::pubkey_of_keypair(&text).unwrap());
        assert!(c.staked());
        let schedule =
            identity::leader_schedule_answer(&c.identity(), c.staked(), 1_000, &Value::Null);
        assert!(!schedule[&c.identity()].as_array().unwrap().is_empty());
        let trial = super::super::toml::parse(
            "[consensus]\nidentity_path = \"/var/lib/firedancer/identity.json\"\n",
        )
        .unwrap();
        let c = Cluster::of(&Cfg(&trial), files(written), None, Recorder::none()).unwrap();
        assert_eq!((c.identity().as_str(), c.staked()), (LAB_IDENTITY, false));
        let bad = BTreeMap::from([(
            "/run/valtune/keys/identity.json".to_string(),
            "x".to_string(),
        )]);
        assert!(Cluster::of(&Cfg(&config), files(bad), None, Recorder::none()).is_err());
    }

    /// A pair member running its spare identity beside the staked authorized voter is a
    /// hot spare: unstaked until it takes the staked identity.
    #[test]
    fn a_spare_identity_beside_the_staked_voter_is_a_hot_spare() {
        let key = |seed: u8| {
            serde_json::to_string(&(0..64u8).map(|i| i ^ seed).collect::<Vec<u8>>()).unwrap()
        };
        let written = BTreeMap::from([
            ("/mnt/ledger/valtune-identity.json".to_string(), key(2)),
            ("/run/valtune/keys/staked.json".to_string(), key(1)),
        ]);
        let config = super::super::toml::parse(
            "[consensus]\nidentity_path = \"/mnt/ledger/valtune-identity.json\"\nvote_account_path = \"/run/valtune/keys/vote-account.json\"\nauthorized_voter_paths = [\"/run/valtune/keys/staked.json\"]\n",
        )
        .unwrap();
        let c = Cluster::of(&Cfg(&config), files(written), None, Recorder::none()).unwrap();
        assert_eq!(c.identity(), identity::pubkey_of_keypair(&key(2)).unwrap());
        assert!(!c.staked());
    }

    #[test]
    fn the_reporting_config_needs_all_four_keys() {
        let s = sink("host=http://127.0.0.1:8429,db=frankendancer,u=valtune,p=valtune")
            .unwrap()
            .unwrap();
        assert_eq!(s.db, "frankendancer");
        assert_eq!(sink(""), Ok(None));
        assert!(sink("host=x,db=y").is_err());
    }
}
