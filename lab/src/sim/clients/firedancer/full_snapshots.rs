//! Full Firedancer's start from a snapshot, as the lab plays it: what its snapct tile
//! finds in `[paths] snapshots`, whether it reads the local full (and incremental)
//! snapshot or downloads, the state it reports while loading, and the archives it keeps.
//!
//! From firedancer-io/firedancer `src/discof/restore/fd_snapct_tile.c` (the
//! COLLECTING_PEERS and COLLECTING_PEERS_INCREMENTAL states, the same at v1.0.1 and
//! v1.1.4) and `src/app/firedancer/config/default.toml` `[snapshots]`: the local full
//! snapshot's effective slot is its local incremental's when that is at most
//! `max_local_incremental_age` (50) behind the cluster's newest incremental, else a
//! peer's incremental on that full (peers serve incrementals on the cluster's newest full
//! only), else none; the local full is read when its effective slot is at most
//! `max_local_full_effective_age` (1,000) behind, else the cluster's newest is downloaded.
//! With incremental snapshots off the full's own slot is compared with the cluster's
//! newest full. It makes no snapshots itself and, on boot, deletes all but the newest
//! `max_full_snapshots_to_keep` / `max_incremental_snapshots_to_keep` (1 and 1 to v1.1.x,
//! 2 and 2 at v26.08) of what it downloaded. The state gauge's numbers are
//! `src/discof/restore/fd_snapct_tile.h`'s.
//!
//! The lab's assumptions (upstream states no timings): downloading and loading a mainnet
//! snapshot takes 1,200 simulated seconds (full_follow's `SNAPSHOT_S`), 900 of them the
//! full one; reading a local full one, which is decompressed and inserted all the same,
//! 360; a local incremental 60; a downloaded snapshot is 500 slots behind the cluster.

use std::path::{Path, PathBuf};

use super::super::agave::snapshots::{
    Archive, FULL_INTERVAL, INCREMENTAL_INTERVAL, archives, cluster_newest,
};
use super::topology::Cfg;

pub const FULL_HTTP_S: f64 = 900.0;
pub const INCR_HTTP_S: f64 = 300.0;
pub const FULL_FILE_S: f64 = 360.0;
pub const INCR_FILE_S: f64 = 60.0;
/// The size of a mainnet full snapshot archive (about 100 GB; assumption).
pub const FULL_BYTES: f64 = 100e9;
/// How old a downloaded snapshot is when its download starts, in slots.
pub const DOWNLOADED_AGE: u64 = 500;

const READING_FULL_FILE: u64 = 5;
const READING_INCREMENTAL_FILE: u64 = 9;
const READING_FULL_HTTP: u64 = 13;
const READING_INCREMENTAL_HTTP: u64 = 17;
const SHUTDOWN: u64 = 21;

/// `[snapshots]` and `[snapshots.sources]` as the config sets them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sources {
    pub incremental: bool,
    pub max_full_age: u64,
    pub max_incremental_age: u64,
    pub keep_full: usize,
    pub keep_incremental: usize,
}

impl Sources {
    /// From the config, with default.toml's defaults of the version (`newer`: v26.08 on).
    pub fn of(cfg: &Cfg, newer: bool) -> Sources {
        let keep = if newer { 2 } else { 1 };
        Sources {
            incremental: cfg.bool("snapshots.incremental_snapshots", true),
            max_full_age: cfg.int("snapshots.sources.max_local_full_effective_age", 1_000) as u64,
            max_incremental_age: cfg.int("snapshots.sources.max_local_incremental_age", 50) as u64,
            keep_full: cfg.int("snapshots.max_full_snapshots_to_keep", keep) as usize,
            keep_incremental: cfg.int("snapshots.max_incremental_snapshots_to_keep", keep) as usize,
        }
    }
}

/// Where each part of the snapshot comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    File(Archive),
    Http(Archive),
}

/// How it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub dir: Option<PathBuf>,
    pub full: Source,
    pub incremental: Option<Source>,
    /// Slots the snapshot is behind the cluster when loading starts.
    pub age: u64,
}

fn highest(found: &[Archive]) -> (Option<u64>, Option<u64>) {
    let full = found
        .iter()
        .filter_map(|a| match a {
            Archive::Full { slot } => Some(*slot),
            _ => None,
        })
        .max();
    let incremental = found
        .iter()
        .filter_map(|a| match a {
            Archive::Incremental { base, slot } if Some(*base) == full => Some(*slot),
            _ => None,
        })
        .max();
    (full, incremental)
}

impl Start {
    /// At the lab chain's slot `tip`, with `found` in its directory.
    pub fn decide(dir: Option<PathBuf>, found: &[Archive], tip: u64, s: &Sources) -> Start {
        let (cluster_full, _) = cluster_newest(tip);
        let served = tip.saturating_sub(DOWNLOADED_AGE);
        let served_incr = served / INCREMENTAL_INTERVAL * INCREMENTAL_INTERVAL;
        let cluster_slot = if s.incremental {
            served_incr
        } else {
            cluster_full
        };
        let (local_full, local_incr) = highest(found);
        let fresh_incr =
            local_incr.filter(|i| *i >= cluster_slot.saturating_sub(s.max_incremental_age));
        let effective = match (local_full, s.incremental) {
            (None, _) => None,
            (Some(f), false) => Some(f),
            (Some(f), true) => fresh_incr.or((f == cluster_full).then_some(served_incr)),
        };
        match (local_full, effective) {
            (Some(f), Some(e)) if e >= cluster_slot.saturating_sub(s.max_full_age) => {
                let incremental = s.incremental.then_some(match fresh_incr {
                    Some(i) => Source::File(Archive::Incremental { base: f, slot: i }),
                    None => Source::Http(Archive::Incremental {
                        base: f,
                        slot: served_incr,
                    }),
                });
                Start {
                    dir,
                    full: Source::File(Archive::Full { slot: f }),
                    incremental,
                    age: tip.saturating_sub(e),
                }
            }
            _ => {
                let full = served / FULL_INTERVAL * FULL_INTERVAL;
                Start {
                    dir,
                    full: Source::Http(Archive::Full { slot: full }),
                    incremental: (s.incremental && served_incr > full).then_some(Source::Http(
                        Archive::Incremental {
                            base: full,
                            slot: served_incr,
                        },
                    )),
                    age: tip - if s.incremental { served_incr } else { full },
                }
            }
        }
    }

    /// Seconds reading the full snapshot, and the incremental one.
    fn phases(&self) -> (f64, f64) {
        let full = match self.full {
            Source::File(_) => FULL_FILE_S,
            Source::Http(_) => FULL_HTTP_S,
        };
        let incremental = match self.incremental {
            None => 0.0,
            Some(Source::File(_)) => INCR_FILE_S,
            Some(Source::Http(_)) => INCR_HTTP_S,
        };
        (full, incremental)
    }

    /// Seconds from running tiles to a loaded snapshot.
    pub fn load_s(&self) -> f64 {
        let (f, i) = self.phases();
        f + i
    }

    /// snapct's state `since` seconds after its tiles run (0 before).
    pub fn state(&self, since: f64) -> u64 {
        let (f, i) = self.phases();
        if since < 0.0 {
            0
        } else if since < f {
            match self.full {
                Source::File(_) => READING_FULL_FILE,
                Source::Http(_) => READING_FULL_HTTP,
            }
        } else if since < f + i {
            match self.incremental {
                Some(Source::File(_)) => READING_INCREMENTAL_FILE,
                _ => READING_INCREMENTAL_HTTP,
            }
        } else {
            SHUTDOWN
        }
    }

    /// `snapct_full_bytes_written` `since` seconds after its tiles run: what it has
    /// downloaded of the full snapshot and written out (nothing when it reads a file).
    pub fn full_bytes_written(&self, since: f64) -> u64 {
        match self.full {
            Source::File(_) => 0,
            Source::Http(_) => (FULL_BYTES * (since / FULL_HTTP_S).clamp(0.0, 1.0)) as u64,
        }
    }

    /// The archives it has downloaded by `since` seconds after its tiles run, into its
    /// directory (empty files: only their names matter).
    pub fn write(&self, since: f64) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let (f, i) = self.phases();
        let mut done = Vec::new();
        if let Source::Http(a) = self.full
            && since >= f
        {
            done.push(a);
        }
        if let Some(Source::Http(a)) = self.incremental
            && since >= f + i
        {
            done.push(a);
        }
        for a in done {
            let p = dir.join(a.name());
            if !p.exists() {
                std::fs::write(p, b"")?;
            }
        }
        Ok(())
    }
}

/// On boot: all but the newest `keep_full` full and `keep_incremental` incremental
/// archives are deleted, oldest slot first; what is left is what it finds.
pub fn prune(dir: &Path, s: &Sources) -> Vec<Archive> {
    let mut found = archives(dir);
    found.sort_by_key(|a| std::cmp::Reverse(a.slot()));
    let (mut fulls, mut incs) = (0, 0);
    let mut kept = Vec::new();
    for a in found {
        let keep = match a {
            Archive::Full { .. } => {
                fulls += 1;
                fulls <= s.keep_full
            }
            Archive::Incremental { .. } => {
                incs += 1;
                incs <= s.keep_incremental
            }
        };
        if keep {
            kept.push(a);
        } else {
            let _ = std::fs::remove_file(dir.join(a.name()));
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Sources = Sources {
        incremental: true,
        max_full_age: 1_000,
        max_incremental_age: 50,
        keep_full: 1,
        keep_incremental: 1,
    };

    #[test]
    fn nothing_local_downloads_the_clusters_newest() {
        let s = Start::decide(None, &[], 1_060_550, &DEFAULTS);
        assert_eq!(s.full, Source::Http(Archive::Full { slot: 1_050_000 }));
        assert_eq!(
            s.incremental,
            Some(Source::Http(Archive::Incremental {
                base: 1_050_000,
                slot: 1_060_000
            }))
        );
        assert_eq!(s.age, 550);
        assert_eq!(s.load_s(), FULL_HTTP_S + INCR_HTTP_S);
        assert_eq!(s.state(10.0), READING_FULL_HTTP);
        assert_eq!(s.state(FULL_HTTP_S + 1.0), READING_INCREMENTAL_HTTP);
        assert_eq!(s.state(s.load_s()), SHUTDOWN);
        assert_eq!(
            s.full_bytes_written(FULL_HTTP_S / 2.0),
            (FULL_BYTES / 2.0) as u64
        );
        assert_eq!(s.full_bytes_written(1e6), FULL_BYTES as u64);
    }

    #[test]
    fn a_local_full_is_read_while_the_cluster_serves_incrementals_on_it_or_its_ages_allow() {
        let found = [
            Archive::Full { slot: 1_050_000 },
            Archive::Incremental {
                base: 1_050_000,
                slot: 1_052_000,
            },
        ];
        // The cluster's newest full is still ours: a peer's incremental on it, downloaded.
        let s = Start::decide(None, &found, 1_060_550, &DEFAULTS);
        assert_eq!(s.full, Source::File(Archive::Full { slot: 1_050_000 }));
        assert!(matches!(s.incremental, Some(Source::Http(_))));
        // Hours later the cluster has a newer full and our incremental is too old.
        let later = Start::decide(None, &found, 1_090_000, &DEFAULTS);
        assert!(matches!(later.full, Source::Http(_)), "{later:?}");
        // Unless both ages cover the time between: both files, replayed from ours.
        let raised = Sources {
            max_full_age: 100_000,
            max_incremental_age: 100_000,
            ..DEFAULTS
        };
        let s = Start::decide(None, &found, 1_090_000, &raised);
        assert_eq!(s.full, Source::File(Archive::Full { slot: 1_050_000 }));
        assert_eq!(
            s.incremental,
            Some(Source::File(Archive::Incremental {
                base: 1_050_000,
                slot: 1_052_000
            }))
        );
        assert_eq!(s.age, 38_000);
        assert_eq!(s.state(1.0), READING_FULL_FILE);
        assert_eq!(s.full_bytes_written(1e6), 0);
        assert_eq!(s.load_s(), FULL_FILE_S + INCR_FILE_S);
        // The full age alone is not enough: the incremental decides the effective slot.
        let full_only = Sources {
            max_full_age: 100_000,
            ..DEFAULTS
        };
        assert!(matches!(
            Start::decide(None, &found, 1_090_000, &full_only).full,
            Source::Http(_)
        ));
    }

    #[test]
    fn it_writes_what_it_downloaded_and_keeps_the_newest_on_boot() {
        let dir = std::env::temp_dir().join(format!("valtune-fdf-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = Start::decide(Some(dir.clone()), &[], 1_060_550, &DEFAULTS);
        s.write(FULL_HTTP_S - 1.0).unwrap();
        assert!(archives(&dir).is_empty());
        s.write(s.load_s()).unwrap();
        assert_eq!(archives(&dir).len(), 2);
        let next = Start::decide(Some(dir.clone()), &[], 1_160_550, &DEFAULTS);
        next.write(next.load_s()).unwrap();
        assert_eq!(archives(&dir).len(), 4);
        let kept = prune(&dir, &DEFAULTS);
        assert_eq!(kept.len(), 2);
        assert_eq!(highest(&kept).0, Some(1_150_000));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
