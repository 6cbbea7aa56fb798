//! Reading results from Prometheus: the HTTP client and the trial analysis.

pub mod analysis;
pub mod prometheus;
