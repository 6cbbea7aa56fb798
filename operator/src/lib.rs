//! valtune: a Kubernetes operator that deploys blockchain validators on bare-metal nodes
//! and runs tuning experiments on them.

pub mod api;
