//! How a Firedancer trial's results are read, by workload and version.
//! - Native metrics (firedancer-io/firedancer `src/disco/metrics/metrics.xml`, served at
//!   `/metrics` of `[tiles.metric]`, labels `kind` and `kind_id`). From c7473a8d80 (v0.1101,
//!   [`super::versions::renamed_metrics`]) names were normalised and every counter is
//!   exported with `_total` (src/disco/metrics/fd_prometheus.c `metric_export_name`).
//! - Bench TPS: the bank tiles' executed transactions (`bank_successful_transactions` +
//!   `bank_executed_failed_transactions` before, `bank_txn_executed_total{txn_execute_result}`
//!   after; metrics.xml L690-701 @v0.1006.40100, L1068-1078 @v0.1106.40201): `fddev bench`
//!   prints no TPS since b297342930 (v0.801), and a single-node bench leads every slot.
//! - Per tile kind, the shares of time `monitor` shows (shared/commands/monitor/monitor.c
//!   L344-359 @v0.1106): `% finish` = regimes caught_up_prefrag + processing_prefrag +
//!   processing_postfrag, `% backp` = backpressure_prefrag, of
//!   `tile_regime_duration_nanos{tile_regime}` (every release from v0.501).
//! - A Frankendancer follower like Agave: TPS from its Agave child's `replay-slot-stats`
//!   datapoints (`[reporting] solana_metrics_config`, every point kept by vmagent) and slot
//!   lag from solana-exporter v3.0.2 (getHealth) on the Agave RPC, and the chain's load
//!   (transactions per slot, skip rate) from the same exporter's slot watcher
//!   ([`crate::clients::solana_load`]).
//! - Full Firedancer from its own metric tile: bench TPS from its execle tiles, a
//!   follower's from its replay scheduler's finished transactions (a counter; the
//!   replay tile's `txn_processed` is the fork's running total, not one) and its slot
//!   lag from repair and replay ([`full_follower`]); its chain's load from the replay
//!   tile's blocks, root and transaction counts
//!   ([`crate::clients::solana_load::replay_figures`]).
//! - The bench leads its own cluster and cannot fall behind: its "lag" is the number of
//!   tiles not yet running (`tile_status`, 1 = running), 0 once it is up.

use std::collections::BTreeMap;

use super::versions::renamed_metrics;
use crate::api::firedancer::{FiredancerSpec, FiredancerWorkload};
use crate::api::settings::QueryKey;
use crate::api::trial::TrialResults;
use crate::api::version::Version;
use crate::clients::profile::{
    Column, Endpoint, Figure, LagUnit, MetricProfile, Objective, TextColumn,
};

pub const METRICS_PORT_NAME: &str = "metrics-fd";
pub const RPC_EXPORTER_PORT_NAME: &str = "metrics-rpc";

/// Tile kinds whose busy share is a figure: (figure prefix, `kind` regex). Kinds renamed
/// at v0.901 match both names; `net` is `sock` with the socket provider.
/// Full Firedancer's execle is the bank tile renamed (ff7fcf99c2); execrp and replay
/// are its own (replaying other leaders' blocks), and it has no store tile.
pub const KINDS: [(&str, &str); 14] = [
    ("net", "net|sock"),
    ("quic", "quic"),
    ("verify", "verify"),
    ("dedup", "dedup"),
    ("resolv", "resolv|resolh"),
    ("pack", "pack"),
    ("bank", "bank|execle"),
    ("poh", "poh|pohh"),
    ("shred", "shred"),
    ("store", "store"),
    ("replay", "replay"),
    ("execrp", "execrp"),
    ("benchg", "benchg"),
    ("benchs", "benchs"),
];

/// Kinds whose backpressure share is a figure too (the seed reads poh and shred waiting
/// on the blockstore).
const BACKPRESSURED: [&str; 4] = ["pack", "bank", "poh", "shred"];

const BUSY_REGIMES: &str = "caught_up_prefrag|processing_prefrag|processing_postfrag";

fn regime_metric(v: Version) -> &'static str {
    if renamed_metrics(v) {
        "tile_regime_duration_nanos_total"
    } else {
        "tile_regime_duration_nanos"
    }
}

fn share(v: Version, kind: &str, regimes: &str) -> String {
    let m = regime_metric(v);
    format!(
        "sum(increase({m}{{$selector,kind=~\"{kind}\",tile_regime=~\"{regimes}\"}}[$window])) / sum(increase({m}{{$selector,kind=~\"{kind}\"}}[$window]))"
    )
}

fn figures(v: Version, bench: bool, full: bool) -> Vec<Figure> {
    let mut out = Vec::new();
    for (name, kind) in KINDS {
        let skip = match name {
            "benchg" | "benchs" => !bench,
            "store" => full,
            "replay" | "execrp" => !full,
            _ => false,
        };
        if skip {
            continue;
        }
        out.push(Figure {
            name: busy_name(name),
            query: share(v, kind, BUSY_REGIMES),
            scale: 100.0,
        });
        if BACKPRESSURED.contains(&name) {
            out.push(Figure {
                name: backpressure_name(name),
                query: share(v, kind, "backpressure_prefrag"),
                scale: 100.0,
            });
        }
    }
    out
}

fn busy_name(kind: &str) -> &'static str {
    match kind {
        "net" => "netBusyPct",
        "quic" => "quicBusyPct",
        "verify" => "verifyBusyPct",
        "dedup" => "dedupBusyPct",
        "resolv" => "resolvBusyPct",
        "pack" => "packBusyPct",
        "bank" => "bankBusyPct",
        "poh" => "pohBusyPct",
        "shred" => "shredBusyPct",
        "store" => "storeBusyPct",
        "replay" => "replayBusyPct",
        "execrp" => "execrpBusyPct",
        "benchg" => "benchgBusyPct",
        _ => "benchsBusyPct",
    }
}

fn backpressure_name(kind: &str) -> &'static str {
    match kind {
        "pack" => "packBackpressurePct",
        "bank" => "bankBackpressurePct",
        "poh" => "pohBackpressurePct",
        _ => "shredBackpressurePct",
    }
}

/// The leader's executed transactions per second: Frankendancer's bank tiles, or full
/// Firedancer's execle tiles' transactions that landed in a block (succeeded, failed, or
/// fees only; metrics.xml `TransactionLanded` @v1.0.1 L673, @v1.1.4 L1015).
fn bench_tps(v: Version, full: bool) -> String {
    if full {
        let name = if renamed_metrics(v) {
            "execle_txn_landed_total"
        } else {
            "execle_transaction_landed"
        };
        return format!(
            "sum(rate({name}{{$selector,transaction_landed=~\"landed_success|landed_failed|landed_fees_only\"}}[$rate]))"
        );
    }
    if renamed_metrics(v) {
        "sum(rate(bank_txn_executed_total{$selector}[$rate]))".into()
    } else {
        "sum(rate(bank_successful_transactions{$selector}[$rate])) + sum(rate(bank_executed_failed_transactions{$selector}[$rate]))".into()
    }
}

/// A full Firedancer follower, from its own metrics: transactions its replay tile fully
/// replayed, `SchedTxnDone` (`replay_sched_txn_done`, `_total` after the rename;
/// metrics.xml @v1.0.1 L840, @v1.1.4 L1275), a counter from the tile's start
/// (src/discof/replay/fd_sched.c `txn_done_cnt`, one per transaction, L1441-1463 and
/// L2626 @v1.1.4). Not `TransactionsTotal`/`TxnProcessed`, declared a counter but set,
/// not added to (fd_replay_tile.c `publish_slot_completed`): at v1.0.x the last replayed
/// slot's own count (`bank->f.txn_count`, L358 @v1.0.1), from v1.1.0 (a0d71d66a7) the
/// fork's count since genesis (`parent_txn_count + txn_count`, L337 @v1.1.4), the
/// snapshot manifest's total once it loads (src/discof/restore/utils/fd_ssload.c L399):
/// 0, then hundreds of billions, lower whenever replay completes a block of a lighter
/// fork. `rate()` reads the jump as that many transactions and each drop as a reset.
/// Slots behind as its `watch` command computes them: the turbine slot (repair's
/// `current_slot`, renamed `slot_current`) minus replay's `reset_slot`
/// (src/app/shared/commands/watch/watch.c L1039-1078 @v1.1.4). Before replay starts
/// (snapshot loading) the reset slot is 0 and there is no lag to read.
fn full_follower(v: Version) -> (String, String) {
    let (done, current) = if renamed_metrics(v) {
        ("replay_sched_txn_done_total", "repair_slot_current")
    } else {
        ("replay_sched_txn_done", "repair_current_slot")
    };
    (
        format!("sum(rate({done}{{$selector}}[$rate]))"),
        format!(
            "clamp_min(max({current}{{$selector}}) - max(replay_reset_slot{{$selector}}), 0) and on() (max(replay_reset_slot{{$selector}}) > 0)"
        ),
    )
}

/// Where full Firedancer's snapshot came from, from its snapct tile over the pod's life:
/// - the bytes of the full snapshot it downloaded and wrote out to `[paths] snapshots`
///   (`snapct_full_bytes_written`, a gauge at v1.0.1 and v1.1.4, added to only for data
///   read over HTTP, `!file`, src/discof/restore/fd_snapct_tile.c L1650-1668 @v1.1.4):
///   0 when it read a local full snapshot, and it stays set once loaded;
/// - the seconds it spent reading the full snapshot over HTTP: `snapct_state` at 13 to
///   16 (READING_FULL_HTTP .. FLUSHING_FULL_HTTP_RESET, fd_snapct_tile.h, the same
///   numbers at both tags; download and load are streamed, so it spans both), scrape by
///   scrape.
fn full_snapshot_figures() -> Vec<Figure> {
    vec![
        Figure {
            name: crate::clients::profile::SNAPSHOT_FULL_WRITTEN_FIGURE,
            query: "max(max_over_time(snapct_full_bytes_written{$selector}[$life]))".into(),
            scale: 1.0,
        },
        Figure {
            name: crate::clients::profile::SNAPSHOT_FULL_HTTP_FIGURE,
            query: "sum_over_time(((max(snapct_state{$selector}) >= bool 13) * (max(snapct_state{$selector}) <= bool 16))[$life:$step]) * $stepSeconds".into(),
            scale: 1.0,
        },
    ]
}

pub fn profile(spec: &FiredancerSpec, v: Version) -> MetricProfile {
    let native = Endpoint {
        port: METRICS_PORT_NAME,
        path: "/metrics",
    };
    let full = super::layout::full(spec);
    match spec.workload {
        FiredancerWorkload::Bench => MetricProfile {
            queries: BTreeMap::from([
                (QueryKey::Tps, bench_tps(v, full)),
                (
                    QueryKey::SlotLag,
                    "sum(tile_status{$selector} != bool 1)".into(),
                ),
            ]),
            lag: QueryKey::SlotLag,
            lag_unit: LagUnit::Slots,
            default_max_lag: 0,
            endpoints: vec![native],
            validator_container: super::VALIDATOR_CONTAINER,
            figures: figures(v, true, full),
            remote_written: Vec::new(),
        },
        FiredancerWorkload::Follow if full => {
            let (tps, lag) = full_follower(v);
            MetricProfile {
                queries: BTreeMap::from([(QueryKey::Tps, tps), (QueryKey::SlotLag, lag)]),
                lag: QueryKey::SlotLag,
                lag_unit: LagUnit::Slots,
                default_max_lag: 100,
                endpoints: vec![native],
                validator_container: super::VALIDATOR_CONTAINER,
                // The chain's load from its replay tile (no solana-exporter).
                figures: [
                    figures(v, false, true),
                    crate::clients::solana_load::replay_figures(renamed_metrics(v)),
                    full_snapshot_figures(),
                ]
                .concat(),
                remote_written: Vec::new(),
            }
        }
        FiredancerWorkload::Follow => {
            let behind = "max(solana_node_num_slots_behind{$selector})";
            MetricProfile {
                queries: BTreeMap::from([
                    (
                        QueryKey::Tps,
                        "(sum(sum_over_time(replay_slot_stats_total_transactions{$selector}[$step])) or vector(0)) / $stepSeconds and on() (max(max_over_time(up{$selector}[$rate])) == 1)".into(),
                    ),
                    (
                        QueryKey::SlotLag,
                        format!(
                            "{behind} unless on() (max(solana_node_is_healthy{{$selector}}) == 0 and on() {behind} == 0)"
                        ),
                    ),
                ]),
                lag: QueryKey::SlotLag,
                lag_unit: LagUnit::Slots,
                default_max_lag: 100,
                endpoints: vec![
                    native,
                    Endpoint {
                        port: RPC_EXPORTER_PORT_NAME,
                        path: "/metrics",
                    },
                ],
                validator_container: super::VALIDATOR_CONTAINER,
                // Its Agave child's `bootstrap-snapshot-download` point, as Agave's.
                figures: [
                    figures(v, false, false),
                    crate::clients::solana_load::figures(),
                    vec![crate::clients::agave::snapshot_figure()],
                ]
                .concat(),
                // The Agave child's replay datapoints, through vmagent (as Agave's).
                remote_written: vec!["replay_slot_stats_"],
            }
        }
    }
}

/// A kind this busy is saturated: it limits the pipeline (the seed reads 99.7% and
/// 99.973%; idle followers sit far below).
const SATURATED_PCT: f64 = 90.0;

/// The busiest tile kind of a trial and its busy percentage.
pub fn busiest(r: &TrialResults) -> Option<(&'static str, f64)> {
    KINDS
        .iter()
        .filter_map(|(kind, _)| Some((*kind, r.figure(busy_name(kind))?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The tile kind that limits a trial: its busiest, if saturated.
pub fn bottleneck(r: &TrialResults) -> Option<(&'static str, f64)> {
    busiest(r).filter(|(_, pct)| *pct >= SATURATED_PCT)
}

fn bottleneck_text(r: &TrialResults) -> Option<String> {
    match (bottleneck(r), busiest(r)) {
        (Some((kind, pct)), _) => Some(format!("{kind} ({pct:.2}% busy)")),
        (None, Some((kind, pct))) => Some(format!("none (busiest: {kind} {pct:.2}%)")),
        _ => None,
    }
}

/// The report's numbers: TPS, then the tiles seed 003 watched. Full Firedancer's bank
/// tiles are its execle tiles, and it has no store tile (no blockstore); its execrp tiles
/// (replaying other leaders' blocks) take that column.
pub fn columns(full: bool) -> Vec<Column> {
    let mut out = vec![
        Column {
            header: "AVG TPS",
            value: |r| r.avg_tps,
        },
        Column {
            header: "MAX TPS",
            value: |r| r.max_tps,
        },
        Column {
            header: "VERIFY BUSY %",
            value: |r| r.figure("verifyBusyPct"),
        },
    ];
    if full {
        out.extend([
            Column {
                header: "EXECLE BUSY %",
                value: |r| r.figure("bankBusyPct"),
            },
            Column {
                header: "EXECRP BUSY %",
                value: |r| r.figure("execrpBusyPct"),
            },
        ]);
    } else {
        out.extend([
            Column {
                header: "BANK BUSY %",
                value: |r| r.figure("bankBusyPct"),
            },
            Column {
                header: "STORE BUSY %",
                value: |r| r.figure("storeBusyPct"),
            },
        ]);
    }
    out
}

pub const TEXT_COLUMNS: [TextColumn; 1] = [TextColumn {
    header: "BOTTLENECK",
    value: bottleneck_text,
}];

pub const OBJECTIVE: Objective = Objective {
    name: "average TPS",
    value: |r| r.avg_tps,
    higher_is_better: true,
};

pub fn summary(r: &TrialResults) -> String {
    let f = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
    let mut s = format!("avg {} TPS, max {} TPS", f(r.avg_tps), f(r.max_tps));
    match (bottleneck(r), busiest(r)) {
        (Some((kind, pct)), _) => {
            s.push_str(&format!("; bottleneck: {kind} tiles ({pct:.2}% busy)"))
        }
        (None, Some((kind, pct))) => {
            s.push_str(&format!("; no tile saturated (busiest: {kind}, {pct:.2}%)"))
        }
        _ => {}
    }
    if let Some(lag) = r.final_lag {
        s.push_str(&format!("; {lag} slots behind at the end"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workload: &str) -> FiredancerSpec {
        serde_saphyr::from_str(&format!("image: x\nworkload: {workload}")).unwrap()
    }

    #[test]
    fn bench_tps_reads_the_names_of_the_version() {
        let old = profile(&spec("bench"), Version::new(0, 1006, 40100));
        let new = profile(&spec("bench"), Version::new(0, 1106, 40201));
        assert!(old.queries[&QueryKey::Tps].contains("bank_successful_transactions{"));
        assert!(!old.queries[&QueryKey::Tps].contains("_total"));
        assert!(new.queries[&QueryKey::Tps].contains("bank_txn_executed_total{"));
        let busy = |p: &MetricProfile| {
            p.figures
                .iter()
                .find(|f| f.name == "storeBusyPct")
                .unwrap()
                .query
                .clone()
        };
        assert!(busy(&old).contains("tile_regime_duration_nanos{"));
        assert!(busy(&new).contains("tile_regime_duration_nanos_total{"));
        assert!(new.figures.iter().any(|f| f.name == "benchgBusyPct"));
    }

    fn full(workload: &str) -> FiredancerSpec {
        serde_saphyr::from_str(&format!(
            "image: x\nflavor: firedancer\nworkload: {workload}"
        ))
        .unwrap()
    }

    #[test]
    fn full_firedancer_reads_its_own_names_by_version() {
        let old = profile(&full("bench"), Version::new(1, 0, 1));
        let new = profile(&full("bench"), Version::new(1, 1, 4));
        assert!(old.queries[&QueryKey::Tps].starts_with("sum(rate(execle_transaction_landed{"));
        assert!(new.queries[&QueryKey::Tps].starts_with("sum(rate(execle_txn_landed_total{"));
        assert!(new.queries[&QueryKey::Tps].contains("landed_fees_only"));
        assert!(!new.figures.iter().any(|f| f.name == "storeBusyPct"));
        assert!(new.figures.iter().any(|f| f.name == "execrpBusyPct"));
        let old = profile(&full("follow"), Version::new(1, 0, 1));
        let new = profile(&full("follow"), Version::new(26, 8, 1));
        assert_eq!(
            old.queries[&QueryKey::Tps],
            "sum(rate(replay_sched_txn_done{$selector}[$rate]))"
        );
        assert!(old.queries[&QueryKey::SlotLag].contains("max(repair_current_slot{"));
        assert_eq!(
            new.queries[&QueryKey::Tps],
            "sum(rate(replay_sched_txn_done_total{$selector}[$rate]))"
        );
        // Never the fork's running total: set, not counted (see full_follower).
        assert!(!new.queries.values().any(|q| q.contains("txn_processed")));
        assert!(new.queries[&QueryKey::SlotLag].contains("max(repair_slot_current{"));
        // Its own metric tile only: no Agave datapoints, no RPC exporter; the chain's
        // load from its replay tile, in the names of its version.
        assert_eq!(new.endpoints.len(), 1);
        assert!(!new.queries.values().any(|q| q.contains("solana_")));
        let load = |p: &MetricProfile| {
            p.figures
                .iter()
                .filter(|f| f.name == "txPerSlot" || f.name == "skipRatePct")
                .map(|f| f.query.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(load(&new).len(), 2);
        assert!(load(&new).iter().all(|q| !q.contains("solana_")));
        assert!(load(&new)[0].contains("replay_sched_block_replayed_total"));
        assert!(load(&old)[0].contains("replay_transactions_total"));
    }

    #[test]
    fn a_follower_is_measured_like_agave() {
        let p = profile(&spec("follow"), Version::new(0, 1106, 40201));
        assert!(p.queries[&QueryKey::Tps].contains("replay_slot_stats_total_transactions"));
        assert!(p.queries[&QueryKey::SlotLag].contains("solana_node_num_slots_behind"));
        assert_eq!(p.default_max_lag, 100);
        assert!(!p.figures.iter().any(|f| f.name.starts_with("bench")));
        // The chain's load from the same exporter; a bench's is the benchmark's.
        assert!(p.figures.iter().any(|f| f.name == "txPerSlot"));
        assert!(p.figures.iter().any(|f| f.name == "skipRatePct"));
        let bench = profile(&spec("bench"), Version::new(0, 1106, 40201));
        assert!(!bench.figures.iter().any(|f| f.name == "txPerSlot"));
    }

    #[test]
    fn the_bottleneck_is_the_busiest_kind() {
        let r = TrialResults {
            avg_tps: Some(89564.0),
            figures: [
                ("verifyBusyPct".to_string(), 31.2),
                ("storeBusyPct".to_string(), 99.97),
                ("shredBackpressurePct".to_string(), 95.86),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(bottleneck(&r), Some(("store", 99.97)));
        assert_eq!(
            (TEXT_COLUMNS[0].value)(&r).as_deref(),
            Some("store (99.97% busy)")
        );
        assert_eq!(
            summary(&r),
            "avg 89564 TPS, max - TPS; bottleneck: store tiles (99.97% busy)"
        );
        // A follower's tiles idle: nothing limits it.
        let idle = TrialResults {
            figures: [
                ("storeBusyPct".to_string(), 22.0),
                ("shredBusyPct".to_string(), 18.0),
            ]
            .into(),
            final_lag: Some(3.0),
            ..Default::default()
        };
        assert_eq!(bottleneck(&idle), None);
        assert_eq!(
            (TEXT_COLUMNS[0].value)(&idle).as_deref(),
            Some("none (busiest: store 22.00%)")
        );
        assert!(
            summary(&idle).ends_with(
                "; no tile saturated (busiest: store, 22.00%); 3 slots behind at the end"
            )
        );
    }
}
