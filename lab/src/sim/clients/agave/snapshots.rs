//! Agave's snapshot archives as the lab plays them: what the validator finds in its
//! archive directories at start, whether it reuses a local snapshot or downloads one,
//! and the archives it writes as it runs.
//!
//! From anza-xyz/agave (validator/src/bootstrap.rs `download_snapshots` and
//! `should_use_local_snapshot`, read at 0623227a; snapshot archive names and
//! retention from runtime/src/snapshot_utils.rs): the highest local snapshot (the
//! highest incremental archive on the highest full one, else that full one) is used when
//! its slot is at least the cluster's newest snapshot slot less
//! `--maximum-local-snapshot-age` (default 2,500); otherwise the newest full and
//! incremental archives are downloaded into `remote/` under the archive directories. A
//! running validator makes a full archive every 25,000 slots and an incremental one every
//! 100 on top of it, keeping the newest 2 full and 4 incremental.

use std::path::{Path, PathBuf};

use super::identity;
use crate::sim::clients::{flag_values, mix};

pub const FULL_INTERVAL: u64 = 25_000;
pub const INCREMENTAL_INTERVAL: u64 = 100;
const FULL_RETAIN: usize = 2;
const INCREMENTAL_RETAIN: usize = 4;
/// `--maximum-local-snapshot-age`'s default (DefaultArgs, validator/src/commands/run/args.rs).
pub const DEFAULT_MAX_AGE: u64 = 2_500;
/// Downloaded archives go to this subdirectory (snapshot_utils `SNAPSHOT_ARCHIVE_DOWNLOAD_DIR`).
const REMOTE: &str = "remote";

/// A snapshot archive, by its file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive {
    Full { slot: u64 },
    Incremental { base: u64, slot: u64 },
}

impl Archive {
    /// `snapshot-<slot>-<hash>.tar.zst`, `incremental-snapshot-<base>-<slot>-<hash>.tar.zst`.
    pub fn parse(name: &str) -> Option<Archive> {
        let (stem, _) = name.split_once(".tar")?;
        if let Some(rest) = stem.strip_prefix("incremental-snapshot-") {
            let mut it = rest.splitn(3, '-');
            let base = it.next()?.parse().ok()?;
            let slot = it.next()?.parse().ok()?;
            it.next().filter(|h| !h.is_empty())?;
            return Some(Archive::Incremental { base, slot });
        }
        let rest = stem.strip_prefix("snapshot-")?;
        let (slot, hash) = rest.split_once('-')?;
        (!hash.is_empty()).then_some(())?;
        Some(Archive::Full {
            slot: slot.parse().ok()?,
        })
    }

    pub fn slot(self) -> u64 {
        match self {
            Archive::Full { slot } | Archive::Incremental { slot, .. } => slot,
        }
    }

    /// Its file name (the hash is the lab's, from the slots).
    pub fn name(self) -> String {
        let hash = |s: u64| {
            let mut bytes = [0u8; 32];
            for (i, chunk) in bytes.chunks_mut(8).enumerate() {
                chunk.copy_from_slice(&mix(s ^ (i as u64) << 56).to_le_bytes());
            }
            identity::base58(&bytes)
        };
        match self {
            Archive::Full { slot } => format!("snapshot-{slot}-{}.tar.zst", hash(slot)),
            Archive::Incremental { base, slot } => format!(
                "incremental-snapshot-{base}-{slot}-{}.tar.zst",
                hash(base ^ slot.rotate_left(17))
            ),
        }
    }
}

/// The archives in a directory and its `remote/`.
pub fn archives(dir: &Path) -> Vec<Archive> {
    [dir.to_path_buf(), dir.join(REMOTE)]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter_map(|e| Archive::parse(&e.file_name().to_string_lossy()))
        .collect()
}

/// The slot of the highest local snapshot: the highest incremental on the highest full,
/// else that full (bootstrap.rs `get_highest_local_snapshot_hash`).
pub fn highest_local(found: &[Archive]) -> Option<u64> {
    let full = found
        .iter()
        .filter_map(|a| match a {
            Archive::Full { slot } => Some(*slot),
            _ => None,
        })
        .max()?;
    let incremental = found
        .iter()
        .filter_map(|a| match a {
            Archive::Incremental { base, slot } if *base == full => Some(*slot),
            _ => None,
        })
        .max();
    Some(incremental.unwrap_or(full))
}

/// The highest full archive.
pub fn highest_full(found: &[Archive]) -> Option<u64> {
    found
        .iter()
        .filter_map(|a| match a {
            Archive::Full { slot } => Some(*slot),
            _ => None,
        })
        .max()
}

/// The archive directory the validator reads and writes: `--full-snapshot-archive-path`,
/// else `--snapshots`, else `--ledger` (execute.rs). The lab keeps full and incremental
/// archives together, as valtune renders them.
pub fn archive_path(args: &[String]) -> Option<&str> {
    ["--full-snapshot-archive-path", "--snapshots", "--ledger"]
        .iter()
        .find_map(|f| flag_values(args, f).first().copied())
}

pub fn max_age(args: &[String]) -> u64 {
    flag_values(args, "--maximum-local-snapshot-age")
        .first()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_AGE)
}

/// The cluster's newest snapshot at chain slot `tip`: a full one and an incremental one
/// on it.
pub fn cluster_newest(tip: u64) -> (u64, u64) {
    (
        tip / FULL_INTERVAL * FULL_INTERVAL,
        tip / INCREMENTAL_INTERVAL * INCREMENTAL_INTERVAL,
    )
}

/// `should_use_local_snapshot`: the local slot to start from, if fresh enough.
pub fn reuse(found: &[Archive], tip: u64, max_age: u64) -> Option<u64> {
    let local = highest_local(found)?;
    let (_, cluster) = cluster_newest(tip);
    (local >= cluster.saturating_sub(max_age)).then_some(local)
}

/// The archives a validator keeps by the time it has rooted `slot`, having started from
/// `start` (downloaded into `remote/` when `downloaded`): in the directory, the newest
/// 2 full archives at multiples of 25,000 above its start and the newest 4 incremental
/// ones at multiples of 100 on the newest full (its own, or the one it started from).
pub fn kept(start: (u64, u64), downloaded: bool, slot: u64) -> (Vec<Archive>, Vec<Archive>) {
    let (start_full, start_slot) = start;
    let mut own = Vec::new();
    let first_full = start_slot / FULL_INTERVAL + 1;
    let last_full = slot / FULL_INTERVAL;
    for i in (first_full..=last_full).rev().take(FULL_RETAIN) {
        own.push(Archive::Full {
            slot: i * FULL_INTERVAL,
        });
    }
    let base = own.first().map(|a| a.slot()).unwrap_or(start_full);
    let from = base.max(start_slot) / INCREMENTAL_INTERVAL + 1;
    let to = slot / INCREMENTAL_INTERVAL;
    for i in (from..=to).rev().take(INCREMENTAL_RETAIN) {
        own.push(Archive::Incremental {
            base,
            slot: i * INCREMENTAL_INTERVAL,
        });
    }
    let remote = if downloaded {
        let mut r = vec![Archive::Full { slot: start_full }];
        if start_slot > start_full {
            r.push(Archive::Incremental {
                base: start_full,
                slot: start_slot,
            });
        }
        r
    } else {
        Vec::new()
    };
    (own, remote)
}

/// Writes the archives kept (empty files: only their names matter) and purges the rest
/// of the directory's archives past the retention, oldest first, as Agave does.
pub fn sync(dir: &Path, own: &[Archive], remote: &[Archive]) -> std::io::Result<()> {
    let write = |d: PathBuf, wanted: &[Archive]| -> std::io::Result<()> {
        std::fs::create_dir_all(&d)?;
        for a in wanted {
            let p = d.join(a.name());
            if !p.exists() {
                std::fs::write(&p, b"")?;
            }
        }
        Ok(())
    };
    write(dir.to_path_buf(), own)?;
    if !remote.is_empty() {
        write(dir.join(REMOTE), remote)?;
    }
    // Purge: the newest FULL_RETAIN full archives and INCREMENTAL_RETAIN incremental
    // ones stay, whoever made them.
    let mut present: Vec<(Archive, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| Some((Archive::parse(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    present.sort_by_key(|(a, _)| std::cmp::Reverse(a.slot()));
    let (mut fulls, mut incs) = (0, 0);
    for (a, path) in present {
        let keep = match a {
            Archive::Full { .. } => {
                fulls += 1;
                fulls <= FULL_RETAIN
            }
            Archive::Incremental { .. } => {
                incs += 1;
                incs <= INCREMENTAL_RETAIN
            }
        };
        if !keep {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// Of the model's start (snapshot downloaded and loaded), the share that is downloading
/// (a mainnet full snapshot and an incremental one); the rest is loading it.
pub const DOWNLOAD_SHARE: f64 = 0.5;
/// Reusing a local snapshot, bootstrap still fetches the genesis (it checks it against
/// `--expected-genesis-hash`) and asks one RPC node for its slot.
pub const GENESIS_FETCH_S: f64 = 5.0;
/// `get_rpc_nodes_time_secs`: finding RPC peers in gossip.
const RPC_NODES_S: f64 = 2.0;

/// How a follower got its snapshot (validator/src/bootstrap.rs `rpc_bootstrap`).
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// Its archive directory, when it is on the node (a hostPath).
    pub dir: Option<PathBuf>,
    /// The (full, highest) slots it started from.
    pub from: (u64, u64),
    pub downloaded: bool,
    /// Simulated seconds getting genesis and snapshot (`snapshot_download_time_secs`).
    pub fetch_s: f64,
    /// Seconds earlier its RPC answers than after a download.
    pub saved_s: f64,
}

impl Start {
    /// At chain slot `tip`, with the archives in `dir`: reuse the highest local snapshot
    /// fresh enough for `max_age`, or download the cluster's newest. `rpc_start_s` is
    /// the model's start after a download (downloading is [`DOWNLOAD_SHARE`] of it).
    pub fn decide(dir: Option<PathBuf>, tip: u64, max_age: u64, rpc_start_s: f64) -> Start {
        let found = dir.as_deref().map(archives).unwrap_or_default();
        let download_s = DOWNLOAD_SHARE * rpc_start_s;
        match reuse(&found, tip, max_age) {
            Some(slot) => Start {
                dir,
                from: (highest_full(&found).unwrap_or(slot), slot),
                downloaded: false,
                fetch_s: GENESIS_FETCH_S,
                saved_s: (download_s - GENESIS_FETCH_S).max(0.0),
            },
            None => Start {
                dir,
                from: cluster_newest(tip),
                downloaded: true,
                fetch_s: download_s.max(GENESIS_FETCH_S),
                saved_s: 0.0,
            },
        }
    }

    /// rpc_bootstrap's `bootstrap-snapshot-download` point, once the fetch is done.
    pub fn bootstrap_point(&self, t0: f64, t1: f64) -> Option<super::super::Datapoint> {
        let at = RPC_NODES_S + self.fetch_s;
        (t0 < at && at <= t1).then(|| super::super::Datapoint {
            measurement: "bootstrap-snapshot-download",
            tags: Vec::new(),
            fields: vec![
                ("total_time_secs", at as i64),
                ("get_rpc_nodes_time_secs", RPC_NODES_S as i64),
                ("snapshot_download_time_secs", self.fetch_s as i64),
                ("download_abort_count", 0),
                ("blacklisted_nodes_count", 0),
            ],
            at,
        })
    }

    /// Its archives on the node once it has rooted `slot` (after its snapshot loaded):
    /// the ones it downloaded and the ones it made.
    pub fn write(&self, slot: u64) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let (own, remote) = kept(self.from, self.downloaded, slot);
        sync(dir, &own, &remote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in [
            Archive::Full { slot: 300_025_000 },
            Archive::Incremental {
                base: 300_025_000,
                slot: 300_031_400,
            },
        ] {
            assert_eq!(Archive::parse(&a.name()), Some(a), "{}", a.name());
        }
        assert_eq!(Archive::parse("snapshot-12.tar.zst"), None);
        assert_eq!(Archive::parse("genesis.tar.bz2"), None);
    }

    #[test]
    fn a_fresh_enough_local_snapshot_is_reused_and_an_old_one_is_not() {
        let found = [
            Archive::Full { slot: 1_000_000 },
            Archive::Incremental {
                base: 1_000_000,
                slot: 1_010_000,
            },
            // On another full: not counted.
            Archive::Incremental {
                base: 975_000,
                slot: 1_011_000,
            },
        ];
        assert_eq!(highest_local(&found), Some(1_010_000));
        assert_eq!(reuse(&found, 1_012_450, 2_500), Some(1_010_000));
        assert_eq!(reuse(&found, 1_012_600, 2_500), None);
        assert_eq!(reuse(&found, 1_100_000, 100_000), Some(1_010_000));
        assert_eq!(reuse(&[], 1_000_000, 100_000), None);
    }

    #[test]
    fn a_running_validator_keeps_two_full_and_four_incremental() {
        let (own, remote) = kept((1_000_000, 1_012_300), true, 1_060_450);
        assert_eq!(
            own,
            vec![
                Archive::Full { slot: 1_050_000 },
                Archive::Full { slot: 1_025_000 },
                Archive::Incremental {
                    base: 1_050_000,
                    slot: 1_060_400
                },
                Archive::Incremental {
                    base: 1_050_000,
                    slot: 1_060_300
                },
                Archive::Incremental {
                    base: 1_050_000,
                    slot: 1_060_200
                },
                Archive::Incremental {
                    base: 1_050_000,
                    slot: 1_060_100
                },
            ]
        );
        assert_eq!(remote.len(), 2);
        let dir = std::env::temp_dir().join(format!("valtune-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        sync(&dir, &own, &remote).unwrap();
        let (later, _) = kept((1_000_000, 1_012_300), true, 1_075_050);
        sync(&dir, &later, &[]).unwrap();
        let found = archives(&dir);
        assert_eq!(highest_local(&found), Some(1_075_000));
        assert_eq!(
            found
                .iter()
                .filter(|a| matches!(a, Archive::Full { .. }))
                .count(),
            2 + 1,
            "two of its own, one downloaded: {found:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
