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
//! last before the window (within a window's length; its first in the window when the
//! pod's first scrape is in it), so no rate is extrapolated and one scrape in each is
//! enough (a slow exporter's failed scrapes leave gaps: the lab's busy
//! machines showed windows of a single sample). The three gauges come from one
//! `getEpochInfo` and one scrape, so their growths span the same slots. The exporter
//! starts its gauges at 0 until its first poll: a 0 before the window gives no figure,
//! or a restarted exporter would count everything since genesis.
//!
//! Full Firedancer runs no exporter (no Agave RPC): its replay tile has the same figures
//! (firedancer-io/firedancer src/disco/metrics/metrics.xml @v1.0.1 L786, L815, L840,
//! L850; @v1.1.4 L1229, L1254, L1275; names in src/disco/metrics/generated/
//! fd_metrics_replay.h), [`replay_figures`]:
//! - blocks: `SchedBlockReplayed` (`replay_sched_block_replayed`, `_total` from v1.1.0),
//!   the blocks its scheduler fully replayed (src/discof/replay/fd_sched.c
//!   `block_removed_cnt`, L1824 @v1.1.4): a minority fork's block counts too, a
//!   fraction of a percent of mainnet's;
//! - slots: the gauge `RootSlot` (`replay_root_slot`, the consensus root,
//!   fd_replay_tile.c L144 @v1.1.4, L138 @v1.0.1; 0 before there is one), which passes
//!   over the skipped slots;
//! - transactions: from v1.1.0 `TxnProcessed` (`replay_txn_processed_total`), which replay
//!   sets on each completed block to its fork's count since genesis (fd_replay_tile.c
//!   L337 @v1.1.4, a0d71d66a7): its growth is the transactions of the blocks between, as
//!   `transactionCount`'s is; at v1.0.x `TransactionsTotal` (`replay_transactions_total`)
//!   holds the last completed block's own count (L358 @v1.0.1), so its mean over the
//!   window's scrapes is the transactions per block, sampled.

use crate::clients::profile::{Column, Figure};

/// Transactions per slot that produced a block, in the window.
pub const TX_PER_SLOT: &str = "txPerSlot";
/// Slots without a block, in percent of the slots in the window.
pub const SKIP_RATE_PCT: &str = "skipRatePct";

pub const TRANSACTIONS: &str = "solana_node_transactions_total";
pub const SLOTS: &str = "solana_node_slot_height";
pub const BLOCKS: &str = "solana_node_block_height";

/// How much a gauge that only grows grew over the window: from its last sample before
/// the window to its last in it, or, when the pod's first scrape is in the window (a
/// follower caught up by its first samples: a busy lab's, whose catch-up is seconds),
/// from its first in it; none from 0 (an exporter that had not polled yet).
fn grown(series: &str) -> String {
    format!(
        "(max(last_over_time({series}{{$selector}}[$window])) - ((max(last_over_time({series}{{$selector}}[$window] offset $window)) > 0) or (max(min_over_time({series}{{$selector}}[$window])) > 0)))"
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

/// The figures of a full Firedancer follower's chain load, from its replay tile (module
/// docs); `renamed`: the names from v1.1.0 (c7473a8d80).
pub fn replay_figures(renamed: bool) -> Vec<Figure> {
    let blocks = if renamed {
        "replay_sched_block_replayed_total"
    } else {
        "replay_sched_block_replayed"
    };
    let per_block = if renamed {
        format!(
            "{} / {}",
            grown("replay_txn_processed_total"),
            grown(blocks)
        )
    } else {
        "max(avg_over_time(replay_transactions_total{$selector}[$window]))".to_string()
    };
    vec![
        Figure {
            name: TX_PER_SLOT,
            query: per_block,
            scale: 1.0,
        },
        Figure {
            name: SKIP_RATE_PCT,
            query: format!("1 - {} / {}", grown(blocks), grown(ROOT_SLOT)),
            scale: 100.0,
        },
    ]
}

/// Full Firedancer's consensus root (a gauge of the replay tile).
pub const ROOT_SLOT: &str = "replay_root_slot";

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
            "(max(last_over_time(solana_node_transactions_total{$selector}[$window])) - ((max(last_over_time(solana_node_transactions_total{$selector}[$window] offset $window)) > 0) or (max(min_over_time(solana_node_transactions_total{$selector}[$window])) > 0))) / (max(last_over_time(solana_node_block_height{$selector}[$window])) - ((max(last_over_time(solana_node_block_height{$selector}[$window] offset $window)) > 0) or (max(min_over_time(solana_node_block_height{$selector}[$window])) > 0)))"
        );
        let skip = f.iter().find(|f| f.name == SKIP_RATE_PCT).unwrap();
        assert!(
            skip.query
                .starts_with("1 - (max(last_over_time(solana_node_block_height{")
        );
        assert!(
            skip.query.ends_with(
                "(max(min_over_time(solana_node_slot_height{$selector}[$window])) > 0)))"
            )
        );
        assert_eq!(skip.scale, 100.0);
        // Only names the exporter serves (slots.go at v3.0.2).
        for f in &f {
            for s in series_of(&f.query) {
                assert!([TRANSACTIONS, SLOTS, BLOCKS].contains(&s.as_str()), "{s}");
            }
        }
    }

    /// Full Firedancer's replay tile by version: the fork's running count from v1.1.0,
    /// the last block's own count before; the blocks and the root either way.
    #[test]
    fn full_firedancer_reads_the_load_from_its_replay_tile() {
        let query = |f: &[Figure], name| f.iter().find(|f| f.name == name).unwrap().query.clone();
        let new = replay_figures(true);
        let grown = |s: &str| {
            format!(
                "(max(last_over_time({s}{{$selector}}[$window])) - ((max(last_over_time({s}{{$selector}}[$window] offset $window)) > 0) or (max(min_over_time({s}{{$selector}}[$window])) > 0)))"
            )
        };
        let blocks = grown("replay_sched_block_replayed_total");
        assert_eq!(
            query(&new, TX_PER_SLOT),
            format!("{} / {blocks}", grown("replay_txn_processed_total"))
        );
        assert_eq!(
            query(&new, SKIP_RATE_PCT),
            format!("1 - {blocks} / {}", grown("replay_root_slot"))
        );
        let old = replay_figures(false);
        assert_eq!(
            query(&old, TX_PER_SLOT),
            "max(avg_over_time(replay_transactions_total{$selector}[$window]))"
        );
        let skip = query(&old, SKIP_RATE_PCT);
        assert!(
            skip.contains("replay_sched_block_replayed{") && skip.contains("replay_root_slot{")
        );
        assert!(!skip.contains("_total"), "{skip}");
        for f in [&new, &old] {
            assert_eq!(
                f.iter().find(|f| f.name == SKIP_RATE_PCT).unwrap().scale,
                100.0
            );
        }
    }
}
