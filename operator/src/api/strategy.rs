//! How an experiment chooses its trials: every point of the sweep (the grid, the
//! default), or a search that finds the answer in fewer (docs/concepts.md, "Strategies").

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The search strategy. Unset (or `{}`): the grid, every point of the sweep.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategySpec {
    /// Search one ordered swept parameter for its boundary value: the least memory or
    /// program cache that keeps up, the most memory pressure that still does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bisection: Option<BisectionSpec>,
    /// Find the best point of a categorical or multi-parameter sweep by the client's
    /// objective: every point runs a short window, the best 1/eta run again with a
    /// longer one, until one is left, which runs the full window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successive_halving: Option<SuccessiveHalvingSpec>,
    /// Tests only: the toy strategy (strategies/toy.rs).
    #[cfg(test)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toy: Option<crate::strategies::toy::ToySpec>,
}

/// Successive halving: rungs of windows growing by `eta` up to `trial.measurement.duration`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessiveHalvingSpec {
    /// The fraction kept from one rung to the next is 1/eta, and each window is eta times
    /// the one before. Unset: 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 8))]
    pub eta: Option<i32>,
}

impl SuccessiveHalvingSpec {
    pub fn eta(&self) -> usize {
        self.eta.unwrap_or(3).clamp(2, 8) as usize
    }
}

/// A bisection (rounds of up to `parallelism` points, placed low where failures end early,
/// never more rounds than an even k-section) over the one swept parameter, assuming a point passes (keeps up) on one side of a boundary and fails on
/// the other; a result that says otherwise is reported as non-monotone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BisectionSpec {
    /// Which end of the passing values is the answer: `least` (memory, program cache,
    /// threads, heap) or `most` (memory pressure). Unset: `most` for memoryPressure,
    /// `least` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seek: Option<Seek>,
    /// Run the answer and the value next to it again, side by side, before ending.
    #[serde(default = "default_true")]
    pub confirm: bool,
    /// Trials of one point that may fail without a measurement (Crashed, Unschedulable,
    /// TimedOut, NodeLost, ...) before the point is Inconclusive and the search goes
    /// around it.
    #[serde(default = "default_retries")]
    #[schemars(range(min = 0, max = 5))]
    pub retries: i32,
}

fn default_true() -> bool {
    true
}

fn default_retries() -> i32 {
    1
}

impl Default for BisectionSpec {
    fn default() -> Self {
        BisectionSpec {
            seek: None,
            confirm: true,
            retries: default_retries(),
        }
    }
}

/// The end of the passing values a bisection answers with.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Seek {
    Least,
    Most,
}

impl BisectionSpec {
    /// The end it seeks, for a sweep of `field`.
    pub fn seek_for(&self, field: &str) -> Seek {
        self.seek.unwrap_or(if field == "memoryPressure" {
            Seek::Most
        } else {
            Seek::Least
        })
    }
}
