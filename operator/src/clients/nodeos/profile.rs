//! How a nodeos trial's results are read (docs/clients/nodeos.md, "Metrics"):
//! - block lag from valtune's chain exporter: the wall clock minus `head_block_time` of
//!   `/v1/chain/get_info`, in 0.5 s blocks (`block_interval_ms = 500`, spring v1.2.2
//!   libraries/chain/include/eosio/chain/config.hpp). nodeos' own prometheus_plugin has no
//!   head-block-time metric, and spring v1.2.2 updates its block metrics only every 1000th
//!   block while more than 5 minutes behind (libraries/chain/controller.cpp `log_applied`);
//!   get_info is always current;
//! - transactions per second from the plugin's `nodeos_trxs_incoming_total` (registered
//!   with that name; prometheus-cpp adds no suffix: plugins/prometheus_plugin/metrics.hpp);
//! - the chain's load in the window, transactions per block: the plugin's
//!   `nodeos_trxs_incoming_total` over `nodeos_blocks_incoming`, both added to once per
//!   block received from the network, the first by its transaction count
//!   (`chain_head.block()->transactions.size()`: libraries/chain/controller.cpp
//!   `log_applied` L3622-3631 and plugins/prometheus_plugin/metrics.hpp L272-274 at spring
//!   v1.2.2; the same names in spring v1.0.0 and v1.1.5, and in leap 5, whose
//!   producer_plugin reports every block received);
//! - RSS, VSZ, page faults and bytes written of the `nodeos` process from process-exporter
//!   0.8.7 (collector/process_collector.go);
//! - swap from the chain exporter: `Swap` of /proc/<pid>/smaps_rollup, which counts the
//!   pages of a tmpfs state in swap (VmSwap, process-exporter's "swapped", does not).

use std::collections::BTreeMap;

use super::render::{CHAIN_PORT_NAME, HTTP_PORT_NAME, PROCESS_PORT_NAME};
use super::{PROCESS_NAME, VALIDATOR_CONTAINER};
use crate::api::settings::QueryKey;
use crate::clients::profile::{Endpoint, Figure, LagUnit, MetricProfile};

/// Blocks per second of an Antelope chain (block_interval_ms = 500).
pub const BLOCKS_PER_SECOND: f64 = 2.0;
/// The default warm-up bound: a minute behind.
pub const DEFAULT_MAX_LAG_BLOCKS: i64 = 120;
const GIB: f64 = (1u64 << 30) as f64;
/// The chain's load in the window: transactions per block received (issue 19).
pub const TX_PER_BLOCK: &str = "txPerBlock";

/// Pages the kernel writes back, per byte a process dirties (4 KiB pages).
const PAGE: f64 = 4096.0;

pub fn profile() -> MetricProfile {
    let proc = format!("$selector,groupname=\"{PROCESS_NAME}\"");
    MetricProfile {
        queries: BTreeMap::from([
            (
                QueryKey::BlockLag,
                format!(
                    "max(valtune_nodeos_head_block_lag_seconds{{$selector}}) * {BLOCKS_PER_SECOND}"
                ),
            ),
            (
                QueryKey::Tps,
                "sum(irate(nodeos_trxs_incoming_total{$selector}[$rate]))".into(),
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
        lag: QueryKey::BlockLag,
        lag_unit: LagUnit::Blocks,
        default_max_lag: DEFAULT_MAX_LAG_BLOCKS,
        endpoints: vec![
            Endpoint {
                port: HTTP_PORT_NAME,
                path: "/v1/prometheus/metrics",
            },
            Endpoint {
                port: CHAIN_PORT_NAME,
                path: "/metrics",
            },
            Endpoint {
                port: PROCESS_PORT_NAME,
                path: "/metrics",
            },
        ],
        validator_container: VALIDATOR_CONTAINER,
        figures: vec![
            // Blocks applied per second while catching up after start, until the first
            // time it was caught up (the exporter's counters, frozen from then on).
            Figure {
                name: "catchUpBlocksPerSecond",
                query: "max(valtune_nodeos_catch_up_blocks{$selector}) / max(valtune_nodeos_catch_up_seconds{$selector} > 0)".into(),
                scale: 1.0,
            },
            // Blocks applied per second in the window (2 when in sync).
            Figure {
                name: "blocksPerSecond",
                query: "max(deriv(valtune_nodeos_head_block_num{$selector}[$window]))".into(),
                scale: 1.0,
            },
            // The chain's load: transactions per block received in the window.
            Figure {
                name: TX_PER_BLOCK,
                query: "sum(increase(nodeos_trxs_incoming_total{$selector}[$window])) / sum(increase(nodeos_blocks_incoming{$selector}[$window]))".into(),
                scale: 1.0,
            },
            Figure {
                name: "maxSwapGiB",
                query: "max_over_time((max(valtune_nodeos_swap_bytes{$selector}))$range)".into(),
                scale: 1.0 / GIB,
            },
            // 4 KiB pages the process dirtied per second (written back by the kernel):
            // the seed's "writes per second" of a state mapped on an SSD.
            Figure {
                name: "diskWritesPerSecond",
                query: format!(
                    "avg_over_time((sum(rate(namedprocess_namegroup_write_bytes_total{{{proc}}}[$rate])))$range)"
                ),
                scale: 1.0 / PAGE,
            },
        ],
        // Everything is scraped.
        remote_written: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain's load: the transactions of the blocks received over those blocks, both
    /// counted by the plugin per block (spring v1.2.2 metrics.hpp L272-274).
    #[test]
    fn transactions_per_block_are_the_plugins_two_counters_over_the_window() {
        let p = profile();
        let f = p.figures.iter().find(|f| f.name == TX_PER_BLOCK).unwrap();
        assert_eq!(
            f.query,
            "sum(increase(nodeos_trxs_incoming_total{$selector}[$window])) / sum(increase(nodeos_blocks_incoming{$selector}[$window]))"
        );
        assert_eq!(f.scale, 1.0);
    }
}
