//! The `valtune` subcommands other than `operator`, one module each; main.rs parses the
//! command line and dispatches here.

pub mod analyze;
pub mod check;
pub mod collect;
pub mod crd;
pub mod plan;
pub mod report;

use anyhow::Context;

/// A client of the cluster the kubeconfig (or the pod's ServiceAccount) names.
pub async fn kube_client() -> anyhow::Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("connecting to Kubernetes")
}
