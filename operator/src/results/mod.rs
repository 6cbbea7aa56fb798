//! Trial results from Prometheus: the HTTP client, the analysis (the paper's
//! definitions) and abort rules; and the dataset every reader of an experiment's results
//! shares.

pub mod abort;
pub mod analysis;
pub mod dataset;
pub mod prometheus;
pub mod stats;
