//! The `valtune` subcommands other than `operator`, one module each; main.rs parses the
//! command line and dispatches here.

pub mod analyze;
pub mod check;
pub mod collect;
pub mod crd;
pub mod plan;
pub mod report;

use std::path::{Path, PathBuf};

use anyhow::Context;
use valtune::api::ValidatorExperiment;

/// The ValidatorExperiments of YAML files (every document of that kind, others skipped),
/// with the file each came from.
pub fn read_experiments(files: &[PathBuf]) -> anyhow::Result<Vec<(&Path, ValidatorExperiment)>> {
    let mut out = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("parsing {}", file.display()))?;
        for doc in docs
            .into_iter()
            .filter(|d| d.get("kind").and_then(|k| k.as_str()) == Some("ValidatorExperiment"))
        {
            let vx: ValidatorExperiment = serde_json::from_value(doc)
                .with_context(|| format!("{}: not a ValidatorExperiment", file.display()))?;
            out.push((file.as_path(), vx));
        }
    }
    Ok(out)
}

/// A client of the cluster the kubeconfig (or the pod's ServiceAccount) names.
pub async fn kube_client() -> anyhow::Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("connecting to Kubernetes")
}
