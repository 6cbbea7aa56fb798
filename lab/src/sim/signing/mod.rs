//! The signing record: every signature a validator process in the lab makes with a key,
//! appended to a file the lab keeps outside the cluster (`<lab>/signing/record.jsonl`),
//! which the operator never reads. [`check`] reads it back and names every way one
//! identity was used by two signers, as Jepsen's checkers judge a recorded history.
//!
//! What is recorded is a *stretch*: one process signing with one identity over
//! consecutive slots (a voting validator votes every slot it replays; a producer signs
//! the blocks of its rounds), with the tower that process held when the stretch began.
//! A stretch is written when the process next records, changes identity or ends, so a
//! record is at most one simulator pass behind the process.

pub mod check;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

/// What was signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A vote on each slot of the stretch (Tower BFT).
    Vote,
    /// A block (a Solana leader's slot, a nodeos producer's block number).
    Block,
}

/// One process signing with one identity over the slots `first..=last`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stretch {
    pub identity: String,
    pub kind: Kind,
    pub first: u64,
    pub last: u64,
    /// The tower the process held before `first`: its root and the slot of its last vote
    /// (None: an empty tower, e.g. taken without `--require-tower`). Votes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tower_root: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tower_last_vote: Option<u64>,
    /// The process: unique per container start (`ns/pod/container@started`).
    pub process: String,
    /// Which of the process's signing periods this stretch belongs to: a period is one
    /// process holding one identity without letting go (it starts at 1 and grows each
    /// time the process starts signing with an identity again).
    #[serde(default)]
    pub period: u32,
    pub node: String,
    /// When it was recorded (wall clock, RFC 3339), for the reader of a violation.
    #[serde(default)]
    pub at: String,
}

/// Where a process's signatures go: the lab's record, or nowhere (a unit test's process,
/// a simulator started without a lab directory).
#[derive(Clone)]
pub struct Recorder {
    sink: Option<&'static Record>,
    pub process: String,
    pub node: String,
}

impl Recorder {
    /// A recorder for a process on `node`, writing to the simulator's record if it has one.
    pub fn for_process(process: impl Into<String>, node: impl Into<String>) -> Recorder {
        Recorder {
            sink: RECORD.get(),
            process: process.into(),
            node: node.into(),
        }
    }

    /// A recorder for container `container` of `pod`, started at `started`: a process id
    /// unique per container start, as a restart makes a new process.
    pub fn for_container(
        pod: &crate::sim::pod_view::PodView,
        container: &str,
        started: jiff::Timestamp,
    ) -> Recorder {
        Recorder::for_process(
            format!("{}/{}/{container}@{started}", pod.namespace, pod.name),
            pod.node.clone(),
        )
    }

    /// One that records nothing.
    pub fn none() -> Recorder {
        Recorder {
            sink: None,
            process: String::new(),
            node: String::new(),
        }
    }

    /// Writes to `record` (tests).
    pub fn to(record: &'static Record, process: &str, node: &str) -> Recorder {
        Recorder {
            sink: Some(record),
            process: process.into(),
            node: node.into(),
        }
    }

    pub fn write(&self, mut s: Stretch) {
        let Some(record) = self.sink else {
            return;
        };
        s.process.clone_from(&self.process);
        s.node.clone_from(&self.node);
        if s.at.is_empty() {
            s.at = jiff::Timestamp::now().to_string();
        }
        record.append(&s);
    }
}

/// An append-only file of stretches, one JSON object a line.
pub struct Record {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl Record {
    pub fn open(path: &Path) -> std::io::Result<Record> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Record {
            path: path.to_path_buf(),
            file: Mutex::new(Some(file)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&self, s: &Stretch) {
        let mut line = serde_json::to_string(s).expect("a stretch serializes");
        line.push('\n');
        let mut guard = self.file.lock().expect("record lock");
        if let Some(f) = guard.as_mut() {
            // One write per line on an O_APPEND file: lines never interleave.
            if let Err(e) = f.write_all(line.as_bytes()) {
                tracing::error!(path = %self.path.display(), error = %e, "signing record write failed");
            }
        }
    }
}

static RECORD: OnceLock<Record> = OnceLock::new();

/// The record of a lab in `dir`.
pub fn path_in(lab_dir: &Path) -> PathBuf {
    lab_dir.join("signing").join("record.jsonl")
}

/// Opens the simulator's record in its lab directory (once per process).
pub fn init(lab_dir: &Path) -> std::io::Result<()> {
    if RECORD.get().is_none() {
        let r = Record::open(&path_in(lab_dir))?;
        let _ = RECORD.set(r);
    }
    Ok(())
}

/// Reads a record; a torn last line (a simulator killed mid-write) is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<Stretch>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// What a voting process has signed so far: the slot it has reached, so each pass signs
/// only the slots after it. Kept by the process's signer.
#[derive(Debug, Default)]
pub struct Votes {
    /// The last slot this process passed, voting or not (it never signs one twice).
    passed: Option<u64>,
    /// The identity of its current signing period, and the period's number.
    voting: Option<String>,
    period: u32,
}

impl Votes {
    /// The process votes as `identity` on every slot after the last it passed up to
    /// `slot`, none before `start`, holding `tower` (root, last vote) before the first of
    /// them: the stretch to record, if there are new slots.
    pub fn vote_to(
        &mut self,
        identity: &str,
        start: u64,
        slot: u64,
        tower: (Option<u64>, Option<u64>),
    ) -> Option<Stretch> {
        let first = self.passed.map_or(start, |s| s + 1).max(start);
        if first > slot {
            return None;
        }
        self.passed = Some(slot);
        if self.voting.as_deref() != Some(identity) {
            self.voting = Some(identity.to_string());
            self.period += 1;
        }
        Some(Stretch {
            identity: identity.to_string(),
            kind: Kind::Vote,
            first,
            last: slot,
            tower_root: tower.0,
            tower_last_vote: tower.1,
            process: String::new(),
            period: self.period,
            node: String::new(),
            at: String::new(),
        })
    }

    /// The process passes to `slot` without voting (a hot spare, a process still loading).
    pub fn pass_to(&mut self, slot: u64) {
        self.voting = None;
        self.passed = Some(self.passed.map_or(slot, |s| s.max(slot)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pass_signs_only_the_slots_after_the_last_one_passed() {
        let mut v = Votes::default();
        let a = v.vote_to("A", 8, 10, (None, Some(7))).unwrap();
        assert_eq!((a.first, a.last, a.tower_last_vote), (8, 10, Some(7)));
        let a = v.vote_to("A", 8, 15, (None, Some(10))).unwrap();
        assert_eq!((a.first, a.last), (11, 15));
        assert_eq!(v.vote_to("A", 8, 15, (None, Some(15))), None);
        // Never a slot before `start` (a tower's lockouts).
        let mut w = Votes::default();
        w.pass_to(5);
        assert_eq!(w.vote_to("A", 9, 8, (None, Some(8))), None);
        assert_eq!(
            w.vote_to("A", 9, 12, (None, Some(8))).map(|s| s.first),
            Some(9)
        );
        // A spare passes slots it never signs later.
        v.pass_to(25);
        let b = v.vote_to("B", 8, 30, (None, Some(3))).unwrap();
        assert_eq!((b.identity.as_str(), b.first, b.last), ("B", 26, 30));
        assert_eq!(
            (a.period, b.period),
            (1, 2),
            "a new identity is a new period"
        );
    }

    #[test]
    fn a_record_reads_back_what_was_written_and_skips_a_torn_line() {
        let dir = std::env::temp_dir().join(format!("vv-signing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let record: &'static Record = Box::leak(Box::new(Record::open(&path_in(&dir)).unwrap()));
        let r = Recorder::to(record, "ns/a/agave@1", "node-1");
        r.write(Stretch {
            identity: "A".into(),
            kind: Kind::Vote,
            first: 1,
            last: 5,
            tower_root: None,
            tower_last_vote: None,
            process: String::new(),
            period: 1,
            node: String::new(),
            at: String::new(),
        });
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(record.path())
            .unwrap();
        f.write_all(b"{\"identity\":\"A\",\"ki").unwrap();
        let back = read(record.path()).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].process, "ns/a/agave@1");
        assert_eq!(back[0].node, "node-1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
