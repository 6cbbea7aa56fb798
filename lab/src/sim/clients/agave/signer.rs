//! Who a simulated agave-validator signs as, and the commands that change it, as the
//! real one serves them on its admin RPC (JSON-RPC over the Unix socket `admin.rpc` in
//! its ledger directory: anza-xyz/agave validator/src/admin_rpc_service.rs, read at
//! commit 00d4497d; `agave-validator -l LEDGER set-identity` is a client of it):
//!
//! - `setIdentity(keypair_file, require_tower)` and `setIdentityFromBytes(bytes,
//!   require_tower)`: with `require_tower`, the identity's tower must load from the tower
//!   storage (the ledger directory, `tower-1_9-<pubkey>.bin`), else "Unable to load tower
//!   file for identity <pubkey>: ..." and nothing changes (`set_identity_keypair`);
//!   otherwise the validator signs as the new identity from then on.
//! - A validator votes only while its identity is its vote account's node identity; with
//!   another (a junk identity beside `--authorized-voter`) it is a hot spare and votes
//!   nothing ("Vote account node_pubkey mismatch ... Unable to vote",
//!   `GenerateVoteTxResult::HotSpare`).
//! - While it votes it keeps its tower in its ledger directory, per identity.

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::super::Rpc;
use super::identity::{base58, pubkey_of_keypair};
use crate::sim::signing::{Recorder, Votes};

/// Reads a file as the validator's container sees it (its mounted Secrets).
pub type Files = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

pub struct Signer {
    identity: Mutex<String>,
    /// The vote account's node identity (the staked identity): `--authorized-voter`'s
    /// key, else the identity it starts with when it votes; None: it does not vote.
    vote_node: Option<String>,
    /// Its ledger directory on the node's volume (tower files, `admin.rpc`).
    ledger_dir: Option<PathBuf>,
    files: Files,
    /// The tower it holds (its last vote), loaded at start and with each new identity.
    tower: Mutex<Option<u64>>,
    /// What it has signed, and where that is recorded ([`crate::sim::signing`]).
    votes: Mutex<Votes>,
    recorder: Recorder,
}

/// The tower file of an identity (core/src/consensus/tower_storage.rs
/// `FileTowerStorage::filename`: `tower-1_9-{pubkey}.bin`).
pub fn tower_file(pubkey: &str) -> String {
    format!("tower-1_9-{pubkey}.bin")
}

impl Signer {
    pub fn new(
        identity: String,
        vote_node: Option<String>,
        ledger_dir: Option<PathBuf>,
        files: Files,
        recorder: Recorder,
    ) -> Signer {
        // At start it restores the tower of its identity from the ledger, else builds one
        // from the bank (core/src/replay_stage.rs `load_tower` at v4.0.0): the lab takes
        // the latter as holding no vote.
        let tower = ledger_dir
            .as_ref()
            .and_then(|d| read_tower(&d.join(tower_file(&identity))));
        Signer {
            identity: Mutex::new(identity),
            vote_node,
            ledger_dir,
            files,
            tower: Mutex::new(tower),
            votes: Mutex::new(Votes::default()),
            recorder,
        }
    }

    pub fn identity(&self) -> String {
        self.identity.lock().expect("identity lock").clone()
    }

    /// It votes (and leads its slots) as the vote account's node identity.
    pub fn votes(&self) -> bool {
        self.vote_node.as_deref() == Some(self.identity().as_str())
    }

    /// Reads a file as the validator's container sees it.
    pub fn read(&self, path: &str) -> Option<String> {
        (self.files)(path)
    }

    /// Where its admin RPC listens, if its ledger is on a volume the lab keeps.
    pub fn admin_socket(&self) -> Option<PathBuf> {
        self.ledger_dir.as_ref().map(|d| d.join("admin.rpc"))
    }

    /// It has replayed to `slot` (its first slot to vote on: `start`): while it votes it
    /// votes every slot since its last pass, saving its tower first (replay_stage.rs
    /// `handle_votable_bank`: `tower.save` before the vote is sent), and records what
    /// it signed; a hot spare only passes the slots.
    pub fn advance(&self, start: u64, slot: u64) -> std::io::Result<()> {
        let mut votes = self.votes.lock().expect("votes lock");
        if !self.votes() {
            votes.pass_to(slot);
            return Ok(());
        }
        let identity = self.identity();
        let mut tower = self.tower.lock().expect("tower lock");
        let held = (tower.map(|t| t.saturating_sub(TOWER_DEPTH)), *tower);
        // Its tower locks it out of every slot up to its last vote: a restarted process
        // replaying from behind votes again only past it (core/src/consensus.rs
        // `Tower::is_locked_out`, `has_voted`).
        let start = start.max(tower.map_or(0, |t| t + 1));
        let Some(stretch) = votes.vote_to(&identity, start, slot, held) else {
            return Ok(());
        };
        *tower = Some(slot);
        if let Some(dir) = self.ledger_dir.as_ref() {
            std::fs::create_dir_all(dir)?;
            let path = dir.join(tower_file(&identity));
            let tmp = path.with_extension("tmp");
            std::fs::write(
                &tmp,
                json!({"lastVotedSlot": slot, "root": slot.saturating_sub(TOWER_DEPTH)})
                    .to_string(),
            )?;
            std::fs::rename(&tmp, path)?;
        }
        self.recorder.write(stretch);
        Ok(())
    }

    fn set(&self, pubkey: String, require_tower: bool) -> Rpc {
        if require_tower {
            let found = self
                .ledger_dir
                .as_ref()
                .is_some_and(|d| d.join(tower_file(&pubkey)).is_file());
            if !found {
                return invalid(format!(
                    "Unable to load tower file for identity {pubkey}: IO Error: No such file or directory (os error 2)"
                ));
            }
        }
        // Replay then loads the new identity's tower, or builds one from the bank
        // (replay_stage.rs: on `my_pubkey != cluster_info.id()`, `load_tower`).
        *self.tower.lock().expect("tower lock") = self
            .ledger_dir
            .as_ref()
            .and_then(|d| read_tower(&d.join(tower_file(&pubkey))));
        *self.identity.lock().expect("identity lock") = pubkey;
        Rpc::Result(Value::Null)
    }

    /// An admin RPC call; None: a method the lab does not play.
    pub fn admin_rpc(&self, method: &str, params: &Value) -> Option<Rpc> {
        let p = params.as_array().cloned().unwrap_or_default();
        let require_tower = p.get(1).and_then(Value::as_bool).unwrap_or(false);
        Some(match method {
            "setIdentity" => {
                let Some(path) = p.first().and_then(Value::as_str) else {
                    return Some(invalid("Invalid params: missing keypair_file".into()));
                };
                match (self.files)(path).as_deref().and_then(pubkey_of_keypair) {
                    Some(k) => self.set(k, require_tower),
                    // read_keypair_file's error, as the admin RPC reports it.
                    None => invalid(format!("Failed to read identity keypair from {path}")),
                }
            }
            "setIdentityFromBytes" => {
                let bytes: Option<Vec<u8>> = p
                    .first()
                    .and_then(|v| serde_json::from_value(v.clone()).ok());
                match bytes.filter(|b| b.len() == 64) {
                    Some(b) => self.set(base58(&b[32..]), require_tower),
                    None => {
                        invalid("Failed to read identity keypair from provided byte array".into())
                    }
                }
            }
            _ => return None,
        })
    }
}

/// Votes a full tower holds before its oldest is rooted (core/src/consensus.rs
/// `MAX_LOCKOUT_HISTORY` = 31): with a vote every slot, the root trails the last vote.
const TOWER_DEPTH: u64 = 31;

/// The last vote of a tower file the lab wrote.
fn read_tower(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<Value>(&text).ok()?["lastVotedSlot"].as_u64()
}

/// jsonrpc_core's `invalid_params` error.
fn invalid(message: String) -> Rpc {
    Rpc::Error {
        code: -32602,
        message,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keypair(last: u8) -> String {
        let mut bytes = vec![7u8; 63];
        bytes.push(last);
        serde_json::to_string(&bytes).unwrap()
    }

    fn signer(dir: &std::path::Path) -> (Signer, String, String) {
        let staked = pubkey_of_keypair(&keypair(1)).unwrap();
        let junk = pubkey_of_keypair(&keypair(2)).unwrap();
        let files: Files = Box::new(|path| match path {
            "/etc/valtune/authorized-voter/keypair" => Some(keypair(1)),
            "/etc/valtune/identity/keypair" => Some(keypair(2)),
            _ => None,
        });
        let s = Signer::new(
            junk.clone(),
            Some(staked.clone()),
            Some(dir.to_path_buf()),
            files,
            Recorder::none(),
        );
        (s, staked, junk)
    }

    /// A hot spare votes nothing; `--require-tower` refuses an identity without its
    /// tower and leaves it as it was; with the tower it signs as the identity.
    #[test]
    fn a_hot_spare_takes_the_identity_only_with_its_tower() {
        let dir = std::env::temp_dir().join(format!("vv-signer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (s, staked, junk) = signer(&dir);
        assert!(!s.votes());
        s.advance(10, 10).unwrap();
        assert!(
            !dir.join(tower_file(&junk)).exists(),
            "a hot spare keeps no tower"
        );

        let take = json!(["/etc/valtune/authorized-voter/keypair", true]);
        match s.admin_rpc("setIdentity", &take) {
            Some(Rpc::Error { code, message, .. }) => {
                assert_eq!(code, -32602);
                assert!(
                    message
                        .starts_with(&format!("Unable to load tower file for identity {staked}")),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.identity(), junk);

        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(tower_file(&staked)), "{}").unwrap();
        assert_eq!(
            s.admin_rpc("setIdentity", &take),
            Some(Rpc::Result(Value::Null))
        );
        assert_eq!(s.identity(), staked);
        assert!(s.votes());
        s.advance(10, 11).unwrap();
        assert!(
            std::fs::read_to_string(dir.join(tower_file(&staked)))
                .unwrap()
                .contains("11")
        );
        // And back to its junk identity, which needs no tower.
        let bytes: Vec<u8> = serde_json::from_str(&keypair(2)).unwrap();
        assert_eq!(
            s.admin_rpc("setIdentityFromBytes", &json!([bytes, false])),
            Some(Rpc::Result(Value::Null))
        );
        assert!(!s.votes());
        assert!(s.admin_rpc("exit", &Value::Null).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
