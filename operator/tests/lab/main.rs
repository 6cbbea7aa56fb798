//! Tests against a real kube-apiserver (and Prometheus): the lab that `make test` starts.
//! They are ignored by a plain `cargo test`; `make test` runs them with --include-ignored.

mod admission;
mod agave;
mod agave_experiments;
mod analysis;
mod argocd;
mod besu;
mod chart;
mod chart_schemas;
mod check;
mod cli;
mod common;
mod e2e;
mod example_headers;
mod firedancer;
mod firedancer_full;
mod gitops;
mod helm;
mod identity;
mod kubelet;
mod lifecycle;
mod manifests;
mod nodeos;
mod outage;
mod paired;
mod report;
mod search;
mod validator;
