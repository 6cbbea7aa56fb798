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
//! - RSS, VSZ and page faults from process-exporter 0.8.7's named group (comm
//!   `agave-validator`, collector/process_collector.go).

use std::collections::BTreeMap;

use super::PROCESS_NAME;
use super::render::{PROCESS_EXPORTER_PORT_NAME, RPC_EXPORTER_PORT_NAME};
use crate::api::settings::QueryKey;
use crate::clients::profile::{Endpoint, LagUnit, MetricProfile};

pub fn profile() -> MetricProfile {
    let proc = format!("$selector,groupname=\"{PROCESS_NAME}\"");
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
        figures: Vec::new(),
    }
}
