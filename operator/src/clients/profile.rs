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
    /// Besides the profile's placeholders: `$window` (the window's length) and `$range`
    /// (the subquery `[W:S]` over the window).
    pub query: String,
    /// Applied to the value (e.g. 1000 for seconds to milliseconds).
    pub scale: f64,
}

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
}
