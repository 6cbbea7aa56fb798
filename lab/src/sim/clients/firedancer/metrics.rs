//! The metric tile's `/metrics` page, in the names of the version
//! (firedancer-io/firedancer `src/disco/metrics/metrics.xml` and `fd_prometheus.c`): before
//! c7473a8d80 (v0.1101) counters have no suffix; from it every counter ends in `_total`
//! and several were renamed (metrics.xml @v0.1006.40100 vs @v0.1106.40201).

use super::keys::V;
use super::topology::Tile;

/// The `tile_regime` values, in metrics.xml's order (enum TileRegime).
pub const REGIMES: [&str; 8] = [
    "caught_up_housekeeping",
    "processing_housekeeping",
    "backpressure_housekeeping",
    "caught_up_prefrag",
    "processing_prefrag",
    "backpressure_prefrag",
    "caught_up_postfrag",
    "processing_postfrag",
];

/// Whether the version exports the renamed metrics (`git tag --contains c7473a8d80`).
pub fn renamed(v: V) -> bool {
    if v.0 >= 1 {
        v >= (1, 1, 0)
    } else {
        v >= (0, 1101, 0)
    }
}

/// What a tile reports at a moment (counters in lab units).
pub struct TileFigures {
    pub status: u64,
    pub regime_nanos: [u64; 8],
    pub in_backpressure: u64,
    pub backpressure_count: u64,
    /// A bank (Frankendancer) or execle (full Firedancer) tile's executed transactions:
    /// (succeeded, failed).
    pub executed: Option<(u64, u64)>,
    /// The store tile's inserted transactions.
    pub inserted: Option<u64>,
    /// Full Firedancer's replay tile.
    pub replay: Option<Replay>,
    /// Full Firedancer's repair tile: the highest slot turbine has shown.
    pub turbine_slot: Option<u64>,
    /// Full Firedancer's snapct tile: its state (src/discof/restore/fd_snapct_tile.h)
    /// and the bytes of a downloaded full snapshot it has written out.
    pub snapct: Option<(u64, u64)>,
}

/// What full Firedancer's replay tile reports (counters in lab units).
pub struct Replay {
    /// `TxnProcessed` (`TransactionsTotal` before the rename): set per completed block,
    /// not counted (super::full_follow).
    pub processed: u64,
    /// `SchedTxnDone`: transactions fully replayed, a counter.
    pub done: u64,
    pub slots: u64,
    pub reset_slot: u64,
    /// `SchedBlockReplayed`: blocks fully replayed, every fork's (simulated count).
    pub blocks: u64,
    /// `RootSlot`: the consensus root.
    pub root_slot: u64,
}

struct Page {
    out: String,
}

impl Page {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }

    fn line(&mut self, name: &str, t: &Tile, extra: &str, value: u64) {
        self.out.push_str(&format!(
            "{name}{{kind=\"{}\",kind_id=\"{}\"{extra}}} {value}\n",
            t.kind, t.id
        ));
    }
}

/// The page for `tiles` and what each reports.
pub fn render(v: V, tiles: &[(Tile, TileFigures)]) -> String {
    let new = renamed(v);
    let counter = |old: &str, renamed: &str| {
        if new {
            format!("{renamed}_total")
        } else {
            old.to_string()
        }
    };
    let mut p = Page { out: String::new() };
    p.header("tile_status", "gauge", "0=booting, 1=running, 2=shutdown");
    for (t, f) in tiles {
        p.line("tile_status", t, "", f.status);
    }
    p.header(
        "tile_in_backpressure",
        "gauge",
        "Whether the tile is currently backpressured, 1 or 0",
    );
    for (t, f) in tiles {
        p.line("tile_in_backpressure", t, "", f.in_backpressure);
    }
    let name = counter("tile_backpressure_count", "tile_backpressure");
    p.header(
        &name,
        "counter",
        "Times the tile waited for one or more consumers to catch up to resume publishing",
    );
    for (t, f) in tiles {
        p.line(&name, t, "", f.backpressure_count);
    }
    let name = counter("tile_regime_duration_nanos", "tile_regime_duration_nanos");
    p.header(
        &name,
        "counter",
        "Mutually exclusive and exhaustive duration the tile spent in each regime, in nanoseconds",
    );
    for (t, f) in tiles {
        for (r, ns) in REGIMES.iter().zip(f.regime_nanos) {
            p.line(&name, t, &format!(",tile_regime=\"{r}\""), ns);
        }
    }
    let banks: Vec<_> = tiles
        .iter()
        .filter_map(|(t, f)| f.executed.map(|e| (t, e)))
        .collect();
    if v.0 >= 1 {
        full(&mut p, new, &banks, tiles);
        return p.out;
    }
    if !banks.is_empty() {
        if new {
            let name = "bank_txn_executed_total";
            p.header(
                name,
                "counter",
                "Transactions that execute on chain, by outcome",
            );
            for (t, (ok, failed)) in &banks {
                p.line(name, t, ",txn_execute_result=\"success\"", *ok);
                p.line(name, t, ",txn_execute_result=\"failed\"", *failed);
            }
        } else {
            p.header(
                "bank_executed_failed_transactions",
                "counter",
                "Count of transactions that execute on chain but failed",
            );
            for (t, (_, failed)) in &banks {
                p.line("bank_executed_failed_transactions", t, "", *failed);
            }
            p.header(
                "bank_successful_transactions",
                "counter",
                "Count of transactions that execute on chain and succeed",
            );
            for (t, (ok, _)) in &banks {
                p.line("bank_successful_transactions", t, "", *ok);
            }
        }
    }
    let name = counter("store_transactions_inserted", "store_txn_inserted");
    for (t, f) in tiles {
        if let Some(n) = f.inserted {
            p.header(&name, "counter", "Transactions produced while we were leader in the shreds that have been inserted so far");
            p.line(&name, t, "", n);
        }
    }
    p.out
}

/// Full Firedancer's leader, replay and repair metrics (metrics.xml `execle`, `replay`,
/// `repair` @v1.0.1 and @v1.1.4; generated names in src/disco/metrics/generated/).
fn full(p: &mut Page, new: bool, execle: &[(&Tile, (u64, u64))], tiles: &[(Tile, TileFigures)]) {
    if !execle.is_empty() {
        let (name, label) = if new {
            ("execle_txn_landed_total", "transaction_landed")
        } else {
            ("execle_transaction_landed", "transaction_landed")
        };
        p.header(
            name,
            "counter",
            "Whether a transaction landed in the block or not",
        );
        for (t, (ok, failed)) in execle {
            for (value, n) in [
                ("landed_success", *ok),
                ("landed_fees_only", 0),
                ("landed_failed", *failed),
                ("unlanded", 0),
            ] {
                p.line(name, t, &format!(",{label}=\"{value}\""), n);
            }
        }
    }
    for (t, f) in tiles {
        if let Some(r) = &f.replay {
            let (slots, txns, done, blocks) = if new {
                (
                    "replay_slot_replayed_total",
                    "replay_txn_processed_total",
                    "replay_sched_txn_done_total",
                    "replay_sched_block_replayed_total",
                )
            } else {
                (
                    "replay_slots_total",
                    "replay_transactions_total",
                    "replay_sched_txn_done",
                    "replay_sched_block_replayed",
                )
            };
            for (name, kind, help, value) in [
                (
                    "replay_root_slot",
                    "gauge",
                    "Slot at which our node has most recently rooted",
                    r.root_slot,
                ),
                (
                    blocks,
                    "counter",
                    "Blocks the replay scheduler considers fully replayed",
                    r.blocks,
                ),
                (
                    "replay_reset_slot",
                    "gauge",
                    "Slot at which we last reset the replay stage, or 0 if unknown",
                    r.reset_slot,
                ),
                (
                    slots,
                    "counter",
                    "Slots replayed successfully or leader slots packed and shredded successfully",
                    r.slots,
                ),
                (
                    txns,
                    "counter",
                    "Transactions processed overall on the current fork",
                    r.processed,
                ),
                (
                    done,
                    "counter",
                    "Transactions that were fully replayed",
                    r.done,
                ),
            ] {
                p.header(name, kind, help);
                p.line(name, t, "", value);
            }
        }
        if let Some((state, written)) = f.snapct {
            // The same names at v1.0.1 and v1.1.4 (generated/fd_metrics_snapct.h).
            p.header("snapct_state", "gauge", "State of the tile");
            p.line("snapct_state", t, "", state);
            p.header(
                "snapct_full_bytes_written",
                "gauge",
                "Bytes written so far from the full snapshot. Might decrease if snapshot load is aborted and restarted",
            );
            p.line("snapct_full_bytes_written", t, "", written);
        }
        if let Some(slot) = f.turbine_slot {
            let name = if new {
                "repair_slot_current"
            } else {
                "repair_current_slot"
            };
            p.header(
                name,
                "gauge",
                "Our view of the current cluster slot, max slot received",
            );
            p.line(name, t, "", slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bank() -> Vec<(Tile, TileFigures)> {
        vec![(
            Tile {
                kind: "bank",
                id: 0,
            },
            TileFigures {
                status: 1,
                regime_nanos: [1, 2, 3, 4, 5, 6, 7, 8],
                in_backpressure: 0,
                backpressure_count: 0,
                executed: Some((100, 1)),
                inserted: None,
                replay: None,
                turbine_slot: None,
                snapct: None,
            },
        )]
    }

    fn full_tiles() -> Vec<(Tile, TileFigures)> {
        let mut t = bank();
        t[0].0.kind = "execle";
        t.push((
            Tile {
                kind: "replay",
                id: 0,
            },
            TileFigures {
                replay: Some(Replay {
                    processed: 5,
                    done: 4,
                    slots: 2,
                    reset_slot: 9,
                    blocks: 3,
                    root_slot: 7,
                }),
                executed: None,
                ..bank().remove(0).1
            },
        ));
        t
    }

    #[test]
    fn full_firedancer_serves_the_names_of_its_version() {
        let old = render((1, 0, 1), &full_tiles());
        assert!(old.contains("execle_transaction_landed{kind=\"execle\",kind_id=\"0\",transaction_landed=\"landed_success\"} 100\n"));
        assert!(old.contains("replay_transactions_total{kind=\"replay\",kind_id=\"0\"} 5\n"));
        assert!(old.contains("replay_sched_txn_done{kind=\"replay\",kind_id=\"0\"} 4\n"));
        assert!(old.contains("replay_sched_block_replayed{kind=\"replay\",kind_id=\"0\"} 3\n"));
        assert!(old.contains("replay_root_slot{kind=\"replay\",kind_id=\"0\"} 7\n"));
        assert!(old.contains("tile_regime_duration_nanos{"));
        assert!(!old.contains("bank_"));
        let new = render((1, 1, 4), &full_tiles());
        assert!(new.contains("execle_txn_landed_total{kind=\"execle\",kind_id=\"0\",transaction_landed=\"landed_failed\"} 1\n"));
        assert!(new.contains("replay_txn_processed_total{kind=\"replay\",kind_id=\"0\"} 5\n"));
        assert!(new.contains("# TYPE replay_sched_txn_done_total counter\nreplay_sched_txn_done_total{kind=\"replay\",kind_id=\"0\"} 4\n"));
        assert!(new.contains("replay_reset_slot{kind=\"replay\",kind_id=\"0\"} 9\n"));
        assert!(new.contains("# TYPE replay_sched_block_replayed_total counter\nreplay_sched_block_replayed_total{kind=\"replay\",kind_id=\"0\"} 3\n"));
        assert!(new.contains("replay_root_slot{kind=\"replay\",kind_id=\"0\"} 7\n"));
        assert_eq!(render((26, 8, 1), &full_tiles()), new);
    }

    #[test]
    fn names_follow_the_version() {
        let old = render((0, 1006, 40100), &bank());
        assert!(old.contains("bank_successful_transactions{kind=\"bank\",kind_id=\"0\"} 100\n"));
        assert!(old.contains("tile_regime_duration_nanos{kind=\"bank\",kind_id=\"0\",tile_regime=\"processing_postfrag\"} 8\n"));
        assert!(!old.contains("_total"));
        let new = render((0, 1106, 40201), &bank());
        assert!(new.contains("bank_txn_executed_total{kind=\"bank\",kind_id=\"0\",txn_execute_result=\"success\"} 100\n"));
        assert!(new.contains("# TYPE tile_regime_duration_nanos_total counter\n"));
        assert!(new.contains("tile_backpressure_total{"));
        assert!(!new.contains("bank_successful_transactions"));
        assert!(renamed((1, 1, 4)) && !renamed((1, 0, 1)));
    }
}
