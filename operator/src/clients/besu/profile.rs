//! How a Besu trial's results are read (docs/clients/besu.md says why each source):
//! - block processing time from every "Imported #" log line of AbstractEngineNewPayload
//!   (`rememberBlock`'s wall time, logged once per block: engine/AbstractEngineNewPayload.java
//!   @25.12.0 L371-377, L688-732), posted by log4j2 to vmagent and remote-written with
//!   its own timestamp as `besu_block_import_exec_ms`; percentiles are
//!   `quantile_over_time` over those raw samples, so every block counts once. (The gauge
//!   `besu_block_processing_execution_time_head` holds only the last block, so scrapes
//!   miss or repeat blocks; the `besu_rpc_request_time` summary's quantiles are over a
//!   5-minute sliding window and cannot be combined into a window's percentiles.)
//! - blocks behind the head: the head block's age in 12-second slots,
//!   `besu_blockchain_chain_head_timestamp` (DefaultBlockchain.java L225-229): it needs no
//!   peer's height estimate, which devp2p no longer refreshes after the Merge; a missed
//!   slot adds one. The age is taken when the sample was scraped (`timestamp()`), not
//!   when the query runs (`time()`): a query between scrapes would add the sample's own
//!   staleness, up to a scrape interval (a 15 s scrape alone is more than one slot).
//! - RSS and VSZ from Besu's own `process_*` gauges (prometheus client_java 1.3.5
//!   ProcessMetrics: /proc/self/status), peers from `ethereum_peer_count`
//!   (EthPeers.java L154-158).
//! - the chain's load: transactions per block, from the counter DefaultBlockchain adds
//!   each block's transactions to (`chain_head_transaction_count_counter`,
//!   ethereum/core/.../chain/DefaultBlockchain.java @25.12.0 L193-197, L796; client_java
//!   1.x, PrometheusCounter.java, exposes it with `_total`) over the blocks imported, so
//!   two windows can be seen to have followed the same chain (issue 19).

use std::collections::BTreeMap;

use super::{METRICS_PORT_NAME, VALIDATOR_CONTAINER};
use crate::api::settings::QueryKey;
use crate::api::trial::TrialResults;
use crate::clients::profile::{Column, Endpoint, Figure, LagUnit, MetricProfile, Objective};

/// Every network valtune runs Besu on has 12-second slots.
pub const SECONDS_PER_SLOT: u32 = 12;

/// The series vmagent makes of the log lines (measurement `besu_block_import`, field
/// `exec_ms`, `-usePromCompatibleNaming`).
pub const BLOCK_TIME_SERIES: &str = "besu_block_import_exec_ms";

pub const P50: &str = "blockProcessingP50Ms";
pub const P95: &str = "blockProcessingP95Ms";
pub const P99: &str = "blockProcessingP99Ms";
pub const BLOCKS: &str = "blocksImported";
pub const PEERS: &str = "peers";
pub const TX_PER_BLOCK: &str = "txPerBlock";
/// DefaultBlockchain's counter of the transactions in the blocks it imported.
pub const TX_COUNTER: &str = "besu_blockchain_chain_head_transaction_count_counter_total";

pub fn profile() -> MetricProfile {
    let quantile = |name, q| Figure {
        name,
        query: format!("max(quantile_over_time({q}, {BLOCK_TIME_SERIES}{{$selector}}[$window]))"),
        scale: 1.0,
    };
    MetricProfile {
        queries: BTreeMap::from([
            (
                QueryKey::BlockLag,
                format!(
                    "floor((max(timestamp(besu_blockchain_chain_head_timestamp{{$selector}})) - max(besu_blockchain_chain_head_timestamp{{$selector}})) / {SECONDS_PER_SLOT})"
                ),
            ),
            (
                QueryKey::RssBytes,
                "sum(process_resident_memory_bytes{$selector})".into(),
            ),
            (
                QueryKey::VszBytes,
                "sum(process_virtual_memory_bytes{$selector})".into(),
            ),
        ]),
        lag: QueryKey::BlockLag,
        lag_unit: LagUnit::Blocks,
        // Besu's own readiness default (maxBlocksBehind=2, health/ReadinessCheck.java L27):
        // one missed slot still counts as kept up.
        default_max_lag: 2,
        endpoints: vec![Endpoint {
            port: METRICS_PORT_NAME,
            path: "/metrics",
        }],
        validator_container: VALIDATOR_CONTAINER,
        figures: vec![
            quantile(P50, "0.5"),
            quantile(P95, "0.95"),
            quantile(P99, "0.99"),
            Figure {
                name: BLOCKS,
                query: format!("sum(count_over_time({BLOCK_TIME_SERIES}{{$selector}}[$window]))"),
                scale: 1.0,
            },
            Figure {
                name: PEERS,
                query: "avg_over_time((sum(ethereum_peer_count{$selector}))$range)".into(),
                scale: 1.0,
            },
            Figure {
                name: TX_PER_BLOCK,
                query: format!(
                    "sum(increase({TX_COUNTER}{{$selector}}[$window])) / sum(count_over_time({BLOCK_TIME_SERIES}{{$selector}}[$window]))"
                ),
                scale: 1.0,
            },
        ],
        // Each block's log line, posted to vmagent and remote-written (see above).
        remote_written: vec![BLOCK_TIME_SERIES],
    }
}

/// The seed's table: configuration (the point), block processing percentiles, memory.
pub fn columns() -> Vec<Column> {
    vec![
        Column {
            header: "P50 ms",
            value: |r| r.figure(P50),
        },
        Column {
            header: "P95 ms",
            value: |r| r.figure(P95),
        },
        Column {
            header: "P99 ms",
            value: |r| r.figure(P99),
        },
        Column {
            header: "MAX RSS GiB",
            value: |r| r.max_rss_gib,
        },
        Column {
            header: "MEAN RSS GiB",
            value: |r| r.mean_rss_gib,
        },
        Column {
            header: "BLOCKS",
            value: |r| r.figure(BLOCKS),
        },
        Column {
            header: "PEERS",
            value: |r| r.figure(PEERS),
        },
        // The chain's load in the window, beside the results it explains.
        Column {
            header: "TX/BLOCK",
            value: |r| r.figure(TX_PER_BLOCK),
        },
    ]
}

/// The seed's headline figure: the 95th percentile of block processing time.
pub fn objective() -> Objective {
    Objective {
        name: "block processing p95 (ms)",
        value: |r| r.figure(P95),
        higher_is_better: false,
    }
}

pub fn summary(r: &TrialResults) -> String {
    let f = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    format!(
        "block processing p50 {} ms, p95 {} ms, p99 {} ms over {} blocks; max RSS {} GiB (mean {}); {} peers",
        f(r.figure(P50)),
        f(r.figure(P95)),
        f(r.figure(P99)),
        f(r.figure(BLOCKS)),
        f(r.max_rss_gib),
        f(r.mean_rss_gib),
        f(r.figure(PEERS))
    )
}
