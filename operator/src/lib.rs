//! valtune: a Kubernetes operator that deploys blockchain validators on bare-metal nodes
//! and runs tuning experiments on them.

pub mod api;
pub mod check;
pub mod clients;
pub mod controller;
pub mod cost;
pub mod crd;
pub mod finding;
#[cfg(test)]
pub mod fixtures;
#[cfg(test)]
mod module_cycles;
pub mod operator_metrics;
pub mod readiness;
pub mod report;
pub mod results;
pub mod runtime;
pub mod strategies;
