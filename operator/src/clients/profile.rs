//! A client's metric profile: the PromQL of each series its results are computed from,
//! what "behind the chain" means for it, and the endpoints Prometheus scrapes.

use std::collections::BTreeMap;

use crate::api::settings::QueryKey;

/// The unit a client is behind the chain in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LagUnit {
    Slots,
    Blocks,
}

impl LagUnit {
    pub fn as_str(self) -> &'static str {
        match self {
            LagUnit::Slots => "slots",
            LagUnit::Blocks => "blocks",
        }
    }
}

/// A container port Prometheus scrapes, and the path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The container port's name.
    pub port: &'static str,
    pub path: &'static str,
}

/// A client-specific result: one PromQL expression evaluated at the window's end, stored
/// in `results.figures` under its name.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// camelCase, e.g. `blockProcessingP95Ms`.
    pub name: &'static str,
    /// Besides the profile's placeholders: `$window` (the window's length), `$range`
    /// (the subquery `[W:S]` over the window) and `$life` (from the pod's start to the
    /// window's end).
    pub query: String,
    /// Applied to the value (e.g. 1000 for seconds to milliseconds).
    pub scale: f64,
}

/// The figure of the seconds a validator reported spending on downloading its snapshot
/// at start (read over the pod's life, `$life`): what `results.snapshot` is judged from.
pub const SNAPSHOT_DOWNLOAD_FIGURE: &str = "snapshotDownloadSeconds";

/// The figure of the seconds a validator spent reading its full snapshot over HTTP (full
/// Firedancer's snapct state, as scraped over the pod's life: a download shorter than the
/// time to the first scrape is not seen).
pub const SNAPSHOT_FULL_HTTP_FIGURE: &str = "snapshotFullHttpSeconds";

/// The figure of the bytes of a full snapshot a validator downloaded and wrote to disk
/// (full Firedancer's snapct tile, the most over the pod's life): 0 when it read a local
/// one. What full Firedancer's `results.snapshot.source` is judged from.
pub const SNAPSHOT_FULL_WRITTEN_FIGURE: &str = "snapshotFullBytesWritten";

/// A column of `valtune report`'s table for a client.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    pub value: fn(&crate::api::trial::TrialResults) -> Option<f64>,
}

/// A column of text (e.g. the name of the tile that limited the trial).
#[derive(Debug, Clone, Copy)]
pub struct TextColumn {
    pub header: &'static str,
    pub value: fn(&crate::api::trial::TrialResults) -> Option<String>,
}

/// The columns of `valtune report`'s table for one experiment, after the fixed ones.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub numbers: Vec<Column>,
    /// Figures where less is better, shown as the percentage saved against the sweep's
    /// first point (the mean of its repetitions): e.g. the time in the program cache.
    pub saved: Vec<Column>,
    /// Names rather than figures (e.g. the tile that limited the trial).
    pub text: Vec<TextColumn>,
}

impl Layout {
    /// The paper's Figure 3, the default.
    pub fn ram() -> Layout {
        Layout {
            numbers: RAM_COLUMNS.to_vec(),
            ..Default::default()
        }
    }
}

/// The columns of the paper's Figure 3, the default.
pub const RAM_COLUMNS: [Column; 5] = [
    Column {
        header: "AVG TPS",
        value: |r| r.avg_tps,
    },
    Column {
        header: "0 TPS s",
        value: |r| r.zero_tps_seconds,
    },
    Column {
        header: "MAX TPS",
        value: |r| r.max_tps,
    },
    Column {
        header: "MAX RSS GiB",
        value: |r| r.max_rss_gib,
    },
    Column {
        header: "MAX VSZ GiB",
        value: |r| r.max_vsz_gib,
    },
];

/// What makes one point better than another when no memory is swept.
#[derive(Debug, Clone, Copy)]
pub struct Objective {
    /// e.g. "average TPS".
    pub name: &'static str,
    pub value: fn(&crate::api::trial::TrialResults) -> Option<f64>,
    pub higher_is_better: bool,
}

impl Default for Objective {
    fn default() -> Self {
        Objective {
            name: "average TPS",
            value: |r| r.avg_tps,
            higher_is_better: true,
        }
    }
}

/// The paper's figures in one line.
pub fn ram_summary(r: &crate::api::trial::TrialResults) -> String {
    let f = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    format!(
        "avg {} TPS, max {} TPS, {}s at zero TPS, max RSS {} GiB",
        f(r.avg_tps),
        f(r.max_tps),
        f(r.zero_tps_seconds),
        f(r.max_rss_gib)
    )
}

/// How a client's results are read.
#[derive(Debug, Clone)]
pub struct MetricProfile {
    /// Instant-vector PromQL per series: `$selector` is the trial pod's label matchers,
    /// `$rate` the window of per-second rates.
    pub queries: BTreeMap<QueryKey, String>,
    /// The series that says how far behind the chain the validator is.
    pub lag: QueryKey,
    pub lag_unit: LagUnit,
    /// The default for `trial.warmup.maxLag`.
    pub default_max_lag: i64,
    /// What Prometheus scrapes on the trial's pod.
    pub endpoints: Vec<Endpoint>,
    /// The container whose exit ends the trial.
    pub validator_container: &'static str,
    /// Results only this client has.
    pub figures: Vec<Figure>,
    /// Series that reach Prometheus by remote write from the pod's vmagent sidecar, not
    /// by scraping: without Prometheus' remote-write receiver they never arrive, and the
    /// experiment waits for it (controller/preflight.rs; docs/prepare-cluster.md).
    pub remote_written: Vec<&'static str>,
}

impl MetricProfile {
    /// The profile with the experiment's own queries in place of the client's.
    pub fn with_overrides(mut self, queries: &BTreeMap<QueryKey, String>) -> Self {
        for (k, q) in queries {
            self.queries.insert(*k, q.clone());
        }
        self
    }

    pub fn query(&self, key: QueryKey) -> Option<&str> {
        self.queries.get(&key).map(String::as_str)
    }

    /// Whether the client's pod needs Prometheus' remote-write receiver.
    pub fn needs_remote_write(&self) -> bool {
        !self.remote_written.is_empty()
    }

    /// Whether `series` reaches Prometheus by remote write.
    pub fn is_remote_written(&self, series: &str) -> bool {
        self.remote_written.iter().any(|p| series.starts_with(p))
    }

    /// The series whose absence leaves the trial without the figures it ran for: its
    /// throughput (the TPS query's series) and its remote-written figures (Besu's block
    /// times), and how far behind it was (without which kept-up cannot be told).
    pub fn headline_series(&self) -> std::collections::BTreeSet<String> {
        let mut out: std::collections::BTreeSet<String> = [QueryKey::Tps, self.lag]
            .iter()
            .filter_map(|k| self.query(*k))
            .flat_map(series_of)
            .collect();
        out.extend(self.remote_written_figure_series());
        out
    }

    /// The remote-written series the client's own figures read (Besu's block times).
    pub fn remote_written_figure_series(&self) -> std::collections::BTreeSet<String> {
        self.figures
            .iter()
            .flat_map(|f| series_of(&f.query))
            .filter(|s| self.is_remote_written(s))
            .collect()
    }
}

/// Why each missing series is likely missing, and what to check, one sentence each:
/// `remote_written` are the profile's remote-written prefixes.
pub fn explain_missing(missing: &[String], remote_written: &[&str]) -> String {
    missing
        .iter()
        .map(|s| {
            if remote_written.iter().any(|p| s.starts_with(p)) {
                format!(
                    "{s} is remote-written by the pod's vmagent sidecar: is Prometheus' remote-write receiver on? (`valtune check` tells; kube-prometheus-stack: --set prometheus.prometheusSpec.enableRemoteWriteReceiver=true)"
                )
            } else {
                format!(
                    "{s} is scraped from the pod: is the experiment's PodMonitor selected by your Prometheus, and does the exporter serve it? (`valtune check` tells)"
                )
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The metric names a PromQL expression selects with `$selector` (a name directly before
/// `{`), `up` aside: what a figure needs datapoints of.
pub fn series_of(query: &str) -> std::collections::BTreeSet<String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = std::collections::BTreeSet::new();
    for (i, _) in query.match_indices('{') {
        let before = &query[..i];
        let start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_name(*c))
            .last()
            .map(|(j, _)| j);
        if let Some(j) = start {
            let name = &before[j..];
            if !name.starts_with(|c: char| c.is_ascii_digit()) && name != "up" {
                out.insert(name.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_a_query_needs_are_the_names_before_its_selectors() {
        let q = "(sum(sum_over_time(replay_slot_stats_total_transactions{$selector}[$step])) or vector(0)) / $stepSeconds and on() (max(max_over_time(up{$selector}[$rate])) == 1)";
        assert_eq!(
            series_of(q).into_iter().collect::<Vec<_>>(),
            vec!["replay_slot_stats_total_transactions"]
        );
        let q = "sum(rate(bank_successful_transactions{$selector}[$rate])) + sum(rate(bank_executed_failed_transactions{$selector}[$rate]))";
        assert_eq!(series_of(q).len(), 2);
        assert!(series_of("vector(0)").is_empty());
    }
}
