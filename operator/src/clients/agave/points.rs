//! The datapoints Agave's metrics agent may send a second
//! (`SOLANA_METRICS_MAX_POINTS_PER_SECOND`). The agent writes every 10 s and drops what
//! a write holds past `10 x budget - 1` points, the last of the window, from every source
//! alike: anza-xyz/agave metrics/src/metrics.rs `MetricsAgent::default` (default 4,000)
//! and `combine_points` (the same budget and truncation in the 1.x-2.0 `write`, the later
//! `combine_points` and the current influxdb_v1/v2 agent). Each busy banking
//! worker submits three points every 20 ms (`banking_stage_worker_counts`, `_timing`,
//! `_error_metrics`: core/src/banking_stage/consume_worker.rs `maybe_report_and_reset`,
//! v2.1.14), 150 a second: 32 workers alone submit 4,800, so with the default the leader's
//! TPS, read from those very points, would lose a fifth exactly where a banking-thread
//! sweep compares 32 with 4.

use crate::api::sweep::ThreadKnob;
use crate::api::template::Tuning;

/// The agent's default budget, kept for the rest of the validator.
pub const DEFAULT_BUDGET: u32 = 4000;
/// Points a busy banking worker submits a second: 3 every 20 ms.
pub const POINTS_PER_WORKER: u32 = 150;
/// Banking workers when none is set: 4 (2.x: `SOLANA_BANKING_THREADS` 6 less its two
/// vote threads; 3.x and 4.x: `BankingStage::default_num_workers`).
pub const DEFAULT_WORKERS: u32 = 4;

/// The budget a trial's pod sets: the default for the rest of the validator, plus what
/// its banking workers submit.
pub fn budget(tuning: &Tuning) -> u32 {
    let workers = tuning
        .threads
        .get(&ThreadKnob::BankingThreads)
        .map(|n| (*n).max(1) as u32)
        .unwrap_or(DEFAULT_WORKERS);
    DEFAULT_BUDGET + POINTS_PER_WORKER * workers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuning(workers: Option<i32>) -> Tuning {
        let mut t = Tuning::default();
        if let Some(n) = workers {
            t.threads.insert(ThreadKnob::BankingThreads, n);
        }
        t
    }

    #[test]
    fn thirty_two_workers_get_room_for_their_points() {
        // 32 x 150 = 4,800 a second: above the default on their own.
        assert_eq!(budget(&tuning(Some(32))), 8800);
        assert_eq!(budget(&tuning(Some(4))), 4600);
        assert_eq!(budget(&tuning(None)), 4600);
    }
}
