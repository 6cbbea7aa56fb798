//! Agave's metrics agent, as it drops datapoints (anza-xyz/agave metrics/src/metrics.rs,
//! the same budget and truncation from the 1.x-2.0 `write` to today's agent): every `write_frequency` (10 s) it writes the points
//! submitted since the last write, in submission order, truncated to
//! `10 x SOLANA_METRICS_MAX_POINTS_PER_SECOND - 1` (default 4,000 a second), then its own
//! `metrics` point (`points_written`, `num_points`, `points_lost`): `combine_points`,
//! `MetricsAgent::default`. Points above the budget are the last of each window, from
//! every source alike (they are submitted interleaved), so each loses the same share.
//!
//! What a configuration submits a second (the lab's view of it):
//! - each banking worker with work reports three points every 20 ms
//!   (`banking_stage_worker_counts`, `_timing`, `_error_metrics`:
//!   core/src/banking_stage/consume_worker.rs `maybe_report_and_reset`, v2.1.14): 150;
//! - the rest of the validator: [`OTHER_POINTS_PER_SECOND`] (the lab's assumption; the
//!   agent's own `num_points` on a real node says).

/// The agent's budget when `SOLANA_METRICS_MAX_POINTS_PER_SECOND` is unset.
pub const DEFAULT_BUDGET: f64 = 4000.0;
/// Seconds between writes (`MetricsAgent::default`: `Duration::from_secs(10)`).
pub const WRITE_S: f64 = 10.0;
/// Points a busy banking worker submits a second: 3 every 20 ms.
pub const POINTS_PER_WORKER: f64 = 150.0;
/// Points the rest of a validator submits a second (assumption).
pub const OTHER_POINTS_PER_SECOND: f64 = 300.0;

/// The budget the environment gives the agent (points a second). Agave panics on a
/// value it cannot parse ("Failed to parse SOLANA_METRICS_MAX_POINTS_PER_SECOND").
pub fn budget(value: Option<&str>) -> Result<f64, String> {
    match value {
        None => Ok(DEFAULT_BUDGET),
        Some(v) => v
            .parse::<usize>()
            .map(|n| n as f64)
            .map_err(|e| format!("Failed to parse SOLANA_METRICS_MAX_POINTS_PER_SECOND: {e:?}")),
    }
}

/// One write of a window in which `per_second` points a second were submitted: (points
/// written, points lost), its own `metrics` point aside.
pub fn write(per_second: f64, budget: f64) -> (f64, f64) {
    let submitted = per_second * WRITE_S;
    let max = (WRITE_S * budget - 1.0).max(0.0);
    let written = submitted.min(max);
    (written, submitted - written)
}

/// The share of every source's points that reaches the sink.
pub fn kept(per_second: f64, budget: f64) -> f64 {
    if per_second <= 0.0 {
        return 1.0;
    }
    let (written, _) = write(per_second, budget);
    written / (per_second * WRITE_S)
}

/// Points a second a validator submits with `workers` busy banking workers.
pub fn submitted(workers: u32) -> f64 {
    f64::from(workers) * POINTS_PER_WORKER + OTHER_POINTS_PER_SECOND
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_two_workers_outrun_the_default_budget_and_four_do_not() {
        assert_eq!(kept(submitted(4), DEFAULT_BUDGET), 1.0);
        // 32 x 150 + 300 = 5,100 a second; 39,999 of 51,000 a window are written.
        let k = kept(submitted(32), DEFAULT_BUDGET);
        assert!((0.78..0.79).contains(&k), "{k}");
        assert_eq!(write(5100.0, 4000.0), (39_999.0, 11_001.0));
        assert_eq!(kept(submitted(32), 4000.0 + 32.0 * 150.0), 1.0);
    }

    #[test]
    fn the_budget_is_read_as_agave_reads_it() {
        assert_eq!(budget(None), Ok(4000.0));
        assert_eq!(budget(Some("8800")), Ok(8800.0));
        assert!(
            budget(Some("lots"))
                .unwrap_err()
                .starts_with("Failed to parse")
        );
    }
}
