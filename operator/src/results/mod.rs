//! Trial results from Prometheus: the HTTP client, the analysis (the paper's
//! definitions) and abort rules.

pub mod abort;
pub mod analysis;
pub mod prometheus;
