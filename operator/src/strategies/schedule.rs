//! What a strategy will run, before anything runs: its trials in stages, each stage's
//! trials sharing a window and running in waves of `parallelism`, one stage after the
//! other. The strategy says how many trials and waves (expected, and at most); cost.rs
//! prices them (warm-ups, windows, node-hours, wall-clock) for `valtune plan` and the
//! examples' headers.

use std::time::Duration;

/// An expected and a worst value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds<T> {
    pub expected: T,
    pub worst: T,
}

impl<T: Copy> Bounds<T> {
    /// The same value for both.
    pub fn exactly(v: T) -> Bounds<T> {
        Bounds {
            expected: v,
            worst: v,
        }
    }
}

/// Trials that share a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub trials: Bounds<u32>,
    /// Waves of trials run one after the other (with enough nodes): a search's rounds.
    pub waves: Bounds<u32>,
    /// Its trials' measurement window.
    pub window: Duration,
}

/// What a strategy will run.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Its stages, one after the other.
    pub stages: Vec<Stage>,
    /// What a stage is called where each has a window of its own ("rung"); None: every
    /// trial runs the experiment's window.
    pub stage: Option<&'static str>,
    /// Whether it searches: a grid of the same points is priced beside it.
    pub searches: bool,
}

impl Schedule {
    /// `n` trials at `window`, `parallelism` at a time, none of them skipped.
    pub fn all(n: u32, parallelism: u32, window: Duration) -> Schedule {
        Schedule {
            stages: vec![Stage {
                trials: Bounds::exactly(n),
                waves: Bounds::exactly(n.div_ceil(parallelism.max(1))),
                window,
            }],
            stage: None,
            searches: false,
        }
    }

    /// Its trials in all, expected and at most.
    pub fn trials(&self) -> Bounds<u32> {
        Bounds {
            expected: self.stages.iter().map(|s| s.trials.expected).sum(),
            worst: self.stages.iter().map(|s| s.trials.worst).sum(),
        }
    }
}
