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
