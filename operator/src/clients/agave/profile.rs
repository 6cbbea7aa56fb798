//! How an Agave trial's results are read. The choices, and why (docs/clients.md):
//! - TPS from Agave's own `replay-slot-stats` datapoints (`total_transactions` per
//!   replayed slot; ledger/src/blockstore_processor.rs `ReplaySlotStats::report_stats`),
//!   every point kept by the vmagent sidecar: the transactions replayed in each step over
//!   the step. A trial never votes or leads, so every slot it processes is replayed. A
//!   step with no datapoint counts as zero TPS while Prometheus scrapes the pod, and as a
//!   gap (no sample) while it does not.
//! - Slot lag from solana-exporter v3.0.2's `solana_node_num_slots_behind` (getHealth: 0
//!   within 128 slots, else the distance), read as unknown while the node is unhealthy
//!   without a distance (starting up: `numSlotsBehind` null, utils.go L245-292).
//! - The chain's load in a follower's window (transactions per slot, skip rate) from
//!   solana-exporter's slot watcher ([`crate::clients::solana_load`]); a bench leads its
//!   own cluster, whose load is the benchmark's.
//! - RSS, VSZ and page faults from process-exporter 0.8.7's named group (comm
//!   `agave-validator`, collector/process_collector.go).
//! - Datapoints the metrics agent dropped above its budget (its own `metrics` point,
//!   `points_lost`): the pod sets the budget for its banking workers (points.rs), and a
//!   trial says when points were lost anyway.
//! - The program cache (the paper's Figures 11 and 12) from the per-bank
//!   `loaded-programs-cache-stats` datapoints (runtime/src/bank/metrics.rs
//!   `report_loaded_programs_stats`, every counter reset per point) and the
//!   `program_cache_us` of `replay-slot-stats` (timings/src/lib.rs
//!   `report_execute_timings!`). The paper's means "per execution batch" are per data
//!   point (Figure 12: 86,841 misses at a mean of 0.85 are about 102,000 points in 12 hours,
//!   one per slot), and so are valtune's.

use std::collections::BTreeMap;

use super::PROCESS_NAME;
use super::render::{PROCESS_EXPORTER_PORT_NAME, RPC_EXPORTER_PORT_NAME};
use crate::api::agave::AgaveWorkload;
use crate::api::settings::QueryKey;
use crate::clients::profile::{Column, Endpoint, Figure, LagUnit, Layout, MetricProfile};

/// Sums over the window, and means per data point, of a datapoint series.
fn sum(series: &str) -> String {
    format!("sum(sum_over_time({series}{{$selector}}[$window]))")
}

fn mean(series: &str) -> String {
    format!(
        "sum(sum_over_time({series}{{$selector}}[$window])) / sum(count_over_time({series}{{$selector}}[$window]))"
    )
}

const LPCS: &str = "loaded_programs_cache_stats";
const GIB: f64 = 1.0 / (1u64 << 30) as f64;

/// The program cache's figures (names in `results.figures`), and Figure 6's minimums.
fn figures(proc: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    for (field, name) in [
        ("hits", "programCacheHits"),
        ("misses", "programCacheMisses"),
        ("evictions", "programCacheEvictions"),
        ("insertions", "programCacheInsertions"),
        ("reloads", "programCacheReloads"),
    ] {
        out.push(Figure {
            name,
            query: sum(&format!("{LPCS}_{field}")),
            scale: 1.0,
        });
    }
    for (field, name) in [
        ("misses", "programCacheMissesPerBatch"),
        ("evictions", "programCacheEvictionsPerBatch"),
    ] {
        out.push(Figure {
            name,
            query: mean(&format!("{LPCS}_{field}")),
            scale: 1.0,
        });
    }
    out.push(Figure {
        name: "programCacheTimeUs",
        query: sum("replay_slot_stats_program_cache_us"),
        scale: 1.0,
    });
    out.push(Figure {
        name: "programCacheTimeUsPerBatch",
        query: mean("replay_slot_stats_program_cache_us"),
        scale: 1.0,
    });
    for (memtype, name) in [("resident", "minRssGiB"), ("virtual", "minVszGiB")] {
        out.push(Figure {
            name,
            query: format!(
                "min_over_time(sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"{memtype}\"}})$range)"
            ),
            scale: GIB,
        });
    }
    out
}

/// What the validator reported of its start: `rpc_bootstrap`'s `bootstrap-snapshot-
/// download` datapoint (validator/src/bootstrap.rs, anza-xyz/agave at 0623227a),
/// `snapshot_download_time_secs`: the time spent getting the genesis and the snapshot,
/// seconds when a local snapshot is reused (`should_use_local_snapshot`).
pub fn snapshot_figure() -> Figure {
    Figure {
        name: crate::clients::profile::SNAPSHOT_DOWNLOAD_FIGURE,
        query: "max(max_over_time(bootstrap_snapshot_download_snapshot_download_time_secs{$selector}[$life]))".into(),
        scale: 1.0,
    }
}

/// The paper's Figure 12 (and Figure 6's memory), for a program cache sweep.
pub fn program_cache_layout() -> Layout {
    Layout {
        numbers: vec![
            Column {
                header: "MISSES",
                value: |r| r.figure("programCacheMisses"),
            },
            Column {
                header: "MISSES/BATCH",
                value: |r| r.figure("programCacheMissesPerBatch"),
            },
            Column {
                header: "EVICTIONS",
                value: |r| r.figure("programCacheEvictions"),
            },
            Column {
                header: "EVICTIONS/BATCH",
                value: |r| r.figure("programCacheEvictionsPerBatch"),
            },
            Column {
                header: "PC TIME s",
                value: |r| {
                    r.figure("programCacheTimeUs")
                        .map(|us| (us / 1e4).round() / 100.0)
                },
            },
            Column {
                header: "PC µs/BATCH",
                value: |r| r.figure("programCacheTimeUsPerBatch"),
            },
            Column {
                header: "MEAN RSS GiB",
                value: |r| r.mean_rss_gib,
            },
            Column {
                header: "MAX RSS GiB",
                value: |r| r.max_rss_gib,
            },
        ],
        saved: vec![Column {
            header: "PC SAVED %",
            value: |r| r.figure("programCacheTimeUsPerBatch"),
        }],
        text: Vec::new(),
    }
}

/// Transactions a datapoint series counts, per second of each step; a step without a
/// point is zero while Prometheus scrapes the pod and a gap while it does not.
fn per_second(series: &str) -> String {
    format!(
        "(sum(sum_over_time({series}{{$selector}}[$step])) or vector(0)) / $stepSeconds and on() (max(max_over_time(up{{$selector}}[$rate])) == 1)"
    )
}

/// `bench` reads TPS where the leader counts it: banking_stage_worker_counts, per
/// worker at most every 20 ms, transactions executed without error (votes are not
/// banked by these workers; core/src/banking_stage/consume_worker.rs at v2.1.14). Replay
/// counts nothing of a leader's own slots, and so neither does `program_cache_us`.
pub fn profile(workload: AgaveWorkload) -> MetricProfile {
    let proc = format!("$selector,groupname=\"{PROCESS_NAME}\"");
    let behind = "max(solana_node_num_slots_behind{$selector})";
    let (tps, figures) = match workload {
        AgaveWorkload::Follow => (
            per_second("replay_slot_stats_total_transactions"),
            [
                figures(&proc),
                crate::clients::solana_load::figures(),
                vec![snapshot_figure()],
            ]
            .concat(),
        ),
        AgaveWorkload::Bench => (
            per_second("banking_stage_worker_counts_processed_with_successful_result_count"),
            Vec::new(),
        ),
    };
    let mut figures = figures;
    figures.push(Figure {
        name: POINTS_LOST,
        query: sum("metrics_points_lost"),
        scale: 1.0,
    });
    MetricProfile {
        queries: BTreeMap::from([
            (QueryKey::Tps, tps),
            (
                QueryKey::SlotLag,
                format!(
                    "{behind} unless on() (max(solana_node_is_healthy{{$selector}}) == 0 and on() {behind} == 0)"
                ),
            ),
            (
                QueryKey::RssBytes,
                format!("sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"resident\"}})"),
            ),
            (
                QueryKey::VszBytes,
                format!("sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"virtual\"}})"),
            ),
            (
                QueryKey::MajorFaultsPerSecond,
                format!(
                    "sum(irate(namedprocess_namegroup_major_page_faults_total{{{proc}}}[$rate]))"
                ),
            ),
            (
                QueryKey::MinorFaultsPerSecond,
                format!(
                    "sum(irate(namedprocess_namegroup_minor_page_faults_total{{{proc}}}[$rate]))"
                ),
            ),
        ]),
        lag: QueryKey::SlotLag,
        lag_unit: LagUnit::Slots,
        default_max_lag: 100,
        endpoints: [RPC_EXPORTER_PORT_NAME, PROCESS_EXPORTER_PORT_NAME]
            .into_iter()
            .map(|port| Endpoint {
                port,
                path: "/metrics",
            })
            .collect(),
        validator_container: super::VALIDATOR_CONTAINER,
        figures,
        // Agave's InfluxDB datapoints, through vmagent (render.rs `exporters`).
        remote_written: DATAPOINT_SERIES.to_vec(),
    }
}

/// The datapoints valtune reads, as vmagent names them (measurement_field): remote-written.
pub const DATAPOINT_SERIES: [&str; 4] = [
    "replay_slot_stats_",
    "loaded_programs_cache_stats_",
    "banking_stage_worker_counts_",
    "metrics_points_",
];

/// The points Agave's metrics agent dropped in the window: its own `metrics` point of
/// each write (`points_lost`, metrics/src/metrics.rs `combine_points`). Anything but 0
/// means the TPS and the figures read from datapoints are short (points.rs).
pub const POINTS_LOST: &str = "metricsPointsLost";

/// The paper's figures in one line, and the program cache's where Agave reported it.
pub fn summary(r: &crate::api::trial::TrialResults) -> String {
    let mut line = crate::clients::profile::ram_summary(r);
    if let (Some(m), Some(e), Some(t)) = (
        r.figure("programCacheMissesPerBatch"),
        r.figure("programCacheEvictionsPerBatch"),
        r.figure("programCacheTimeUsPerBatch"),
    ) {
        line.push_str(&format!(
            "; program cache per batch: {m} misses, {e} evictions, {t} µs"
        ));
    }
    if let Some(lost) = r.figure(POINTS_LOST).filter(|n| *n > 0.0) {
        line.push_str(&format!(
            "; Agave's metrics agent dropped {lost} datapoints (above SOLANA_METRICS_MAX_POINTS_PER_SECOND): TPS and figures are short"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::solana_load::{SKIP_RATE_PCT, TX_PER_SLOT};

    /// A follower records the chain's load of its window; a bench, whose load is the
    /// benchmark's, does not.
    #[test]
    fn a_follower_records_the_chains_load_and_a_bench_does_not() {
        let has = |w, name| profile(w).figures.iter().any(|f| f.name == name);
        assert!(has(AgaveWorkload::Follow, TX_PER_SLOT));
        assert!(has(AgaveWorkload::Follow, SKIP_RATE_PCT));
        assert!(!has(AgaveWorkload::Bench, TX_PER_SLOT));
        assert!(!has(AgaveWorkload::Bench, SKIP_RATE_PCT));
    }
}
