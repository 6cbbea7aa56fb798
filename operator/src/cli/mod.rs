//! The `valtune` subcommands other than `operator`, one module each; main.rs parses the
//! command line and dispatches here.

pub mod analyze;
pub mod check;
pub mod collect;
pub mod completion;
pub mod crd;
pub mod failover;
pub mod list;
pub mod output;
pub mod plan;
pub mod recommend;
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

/// Which cluster and namespace, chosen as kubectl chooses them: the kubeconfig's current
/// context (or `--context`) and its namespace unless `-n` says otherwise.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KubeArgs {
    /// The namespace (default: the namespace of the kubeconfig context, else `default`;
    /// in a pod, its own).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod without
    /// one, its ServiceAccount).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl KubeArgs {
    /// A client of the chosen cluster, and the namespace to work in.
    pub async fn connect(&self) -> anyhow::Result<(kube::Client, String)> {
        let config = self.config().await?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).context("connecting to Kubernetes")?;
        Ok((client, namespace))
    }

    /// A client, the namespace, and the experiment `name` in it (an error naming both
    /// when there is none).
    pub async fn experiment(
        &self,
        name: &str,
    ) -> anyhow::Result<(kube::Client, String, valtune::api::ValidatorExperiment)> {
        let (client, namespace) = self.connect().await?;
        let api: kube::Api<valtune::api::ValidatorExperiment> =
            kube::Api::namespaced(client.clone(), &namespace);
        let vx = api
            .get_opt(name)
            .await?
            .with_context(|| format!("no ValidatorExperiment {name} in namespace {namespace}"))?;
        Ok((client, namespace, vx))
    }

    async fn config(&self) -> anyhow::Result<kube::Config> {
        use kube::config::{KubeConfigOptions, Kubeconfig};
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let mut config = match (&self.kubeconfig, &self.context) {
            // kubectl's order: the kubeconfig, else (in a pod) the ServiceAccount.
            (None, None) => return kube::Config::infer().await.context(
                "no Kubernetes configuration: set KUBECONFIG, pass --kubeconfig, or run in a pod",
            ),
            (Some(path), _) => {
                let file = Kubeconfig::read_from(path)
                    .with_context(|| format!("--kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(file, &options).await
            }
            (None, Some(_)) => kube::Config::from_kubeconfig(&options).await,
        }
        .with_context(|| match &self.context {
            Some(c) => {
                format!("--context {c}: no such context in the kubeconfig, or it is incomplete")
            }
            None => "reading the kubeconfig".into(),
        })?;
        config.apply_debug_overrides();
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster: {server: 'https://127.0.0.1:6443'}
users:
- name: admin
  user: {token: t}
contexts:
- name: lab
  context: {cluster: lab, user: admin, namespace: validators}
- name: bare
  context: {cluster: lab, user: admin}
";

    /// The namespace is the context's, as kubectl's; `-n` wins; a context without one
    /// means `default`.
    #[tokio::test]
    async fn the_namespace_comes_from_the_kubeconfig_context_unless_given() {
        let dir = std::env::temp_dir().join(format!("valtune-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config");
        std::fs::write(&file, KUBECONFIG).unwrap();
        let args = |namespace: Option<&str>, context: Option<&str>| KubeArgs {
            namespace: namespace.map(Into::into),
            context: context.map(Into::into),
            kubeconfig: Some(file.clone()),
        };
        let ns = |a: KubeArgs| async move { a.connect().await.unwrap().1 };
        assert_eq!(ns(args(None, None)).await, "validators");
        assert_eq!(ns(args(Some("other"), None)).await, "other");
        assert_eq!(ns(args(None, Some("bare"))).await, "default");
        let err = args(None, Some("nope")).connect().await.err().unwrap();
        assert!(format!("{err:#}").contains("--context nope"), "{err:#}");
        let missing = KubeArgs {
            kubeconfig: Some(dir.join("absent")),
            ..Default::default()
        };
        let err = missing.connect().await.err().unwrap();
        assert!(format!("{err:#}").contains("--kubeconfig"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
