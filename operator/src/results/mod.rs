//! Trial results from Prometheus: the HTTP client, the analysis (the paper's
//! definitions), abort rules and the early abort of doomed trials; and the dataset every reader of an experiment's results
//! shares.

pub mod abort;
pub mod analysis;
pub mod comparison;
pub mod dataset;
pub mod early_abort;
pub mod prometheus;
pub mod stats;
