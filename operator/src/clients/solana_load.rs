//! The chain's load in a Solana follower's window (issue 19): transactions per slot and
//! the skip rate, so a user sees whether two windows followed the same chain.
//!
//! Read from the three gauges solana-exporter's slot watcher sets from `getEpochInfo`
//! (finalized) every `-slot-pace`, in light mode too (asymmetric-research/solana-exporter
//! v3.0.2, cmd/solana-exporter/slots.go L58-136 and L184-198, started unconditionally by
//! main.go L31-34): `solana_node_transactions_total` (`transactionCount`, the bank's count
//! since genesis, votes included), `solana_node_slot_height` (`absoluteSlot`) and
//! `solana_node_block_height` (`blockHeight`: slots that produced a block). Over the window:
//! - `txPerSlot` = transactions / blocks: the transactions in a slot that produced a block,
//!   the work replaying it is (a skipped slot has none);
//! - `skipRatePct` = 1 - blocks / slots, in percent.
//!
//! Each is the growth of a gauge over the window: its last sample in the window less its
//! last before the window (within a window's length), so no rate is extrapolated and one
//! scrape in each is enough (a slow exporter's failed scrapes leave gaps: the lab's busy
//! machines showed windows of a single sample). The three gauges come from one
//! `getEpochInfo` and one scrape, so their growths span the same slots. The exporter
//! starts its gauges at 0 until its first poll: a 0 before the window gives no figure,
//! or a restarted exporter would count everything since genesis.

use crate::clients::profile::{Column, Figure};

/// Transactions per slot that produced a block, in the window.
pub const TX_PER_SLOT: &str = "txPerSlot";
/// Slots without a block, in percent of the slots in the window.
pub const SKIP_RATE_PCT: &str = "skipRatePct";

pub const TRANSACTIONS: &str = "solana_node_transactions_total";
pub const SLOTS: &str = "solana_node_slot_height";
pub const BLOCKS: &str = "solana_node_block_height";

/// How much a gauge that only grows grew over the window: from its last sample before
/// the window to its last in it; none when the first is 0 (an exporter that had not
/// polled yet).
fn grown(series: &str) -> String {
    format!(
        "(max(last_over_time({series}{{$selector}}[$window])) - (max(last_over_time({series}{{$selector}}[$window] offset $window)) > 0))"
    )
}

/// The figures of a follower's chain load, for a profile whose endpoints include
/// solana-exporter.
pub fn figures() -> Vec<Figure> {
    vec![
        Figure {
            name: TX_PER_SLOT,
            query: format!("{} / {}", grown(TRANSACTIONS), grown(BLOCKS)),
            scale: 1.0,
        },
        Figure {
            name: SKIP_RATE_PCT,
            query: format!("1 - {} / {}", grown(BLOCKS), grown(SLOTS)),
            scale: 100.0,
        },
    ]
}

/// The report's columns of the chain's load, beside the results it explains.
pub const COLUMNS: [Column; 2] = [
    Column {
        header: "TX/SLOT",
        value: |r| r.figure(TX_PER_SLOT),
    },
    Column {
        header: "SKIP %",
        value: |r| r.figure(SKIP_RATE_PCT),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::profile::series_of;

    #[test]
    fn the_load_is_the_growth_of_the_exporters_gauges_over_the_window() {
        let f = figures();
        let tx = &f.iter().find(|f| f.name == TX_PER_SLOT).unwrap().query;
        assert_eq!(
            tx,
            "(max(last_over_time(solana_node_transactions_total{$selector}[$window])) - (max(last_over_time(solana_node_transactions_total{$selector}[$window] offset $window)) > 0)) / (max(last_over_time(solana_node_block_height{$selector}[$window])) - (max(last_over_time(solana_node_block_height{$selector}[$window] offset $window)) > 0))"
        );
        let skip = f.iter().find(|f| f.name == SKIP_RATE_PCT).unwrap();
        assert!(
            skip.query
                .starts_with("1 - (max(last_over_time(solana_node_block_height{")
        );
        assert!(skip.query.ends_with(
            "(max(last_over_time(solana_node_slot_height{$selector}[$window] offset $window)) > 0))"
        ));
        assert_eq!(skip.scale, 100.0);
        // Only names the exporter serves (slots.go at v3.0.2).
        for f in &f {
            for s in series_of(&f.query) {
                assert!([TRANSACTIONS, SLOTS, BLOCKS].contains(&s.as_str()), "{s}");
            }
        }
    }
}
