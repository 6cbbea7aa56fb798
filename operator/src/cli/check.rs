//! `valtune check`: is this cluster ready for valtune's experiments? Each failed check
//! says what to run (operator/src/check/ does the work; docs/prepare-cluster.md explains).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use valtune::api::ValidatorExperiment;
use valtune::check::{self, Options};

#[derive(clap::Args)]
pub struct Args {
    /// Experiment files to check the cluster against: their nodes, sizes, volumes,
    /// Prometheus and Pod Security needs (default: what the examples need).
    #[arg(short = 'f', long = "filename")]
    files: Vec<PathBuf>,
    /// Where: the namespace experiments run in (-n), the kubeconfig and its context.
    #[command(flatten)]
    kube: super::KubeArgs,
    /// The Prometheus valtune reads (default: the experiments' spec.metrics.prometheusUrl,
    /// else the installed operator's --prometheus-url).
    #[arg(long, env = "PROMETHEUS_URL")]
    prometheus_url: Option<String>,
    /// Where pods remote-write (default: the Prometheus' /api/v1/write).
    #[arg(long)]
    remote_write_url: Option<String>,
    /// The labels of valtune's PodMonitors, key=value[,key=value] (default: the
    /// experiments' spec.metrics.podMonitorLabels).
    #[arg(long, value_parser = parse_labels)]
    pod_monitor_labels: Option<BTreeMap<String, String>>,
}

fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("{p:?} is not key=value"))
        })
        .collect()
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let (client, namespace) = args.kube.connect().await?;
    let experiments: Vec<ValidatorExperiment> = super::read_experiments(&args.files)?
        .into_iter()
        .map(|(_, vx)| vx)
        .collect();
    let mut prometheus_url = args.prometheus_url.clone();
    let named = experiments
        .iter()
        .any(|vx| vx.spec.metrics.prometheus_url.is_some());
    if prometheus_url.is_none()
        && !named
        && let Some((url, from)) = installed_prometheus_url(&client).await
    {
        eprintln!("checking the Prometheus of {from}: {url}");
        prometheus_url = Some(url);
    }
    let opts = Options {
        namespace,
        prometheus_url,
        remote_write_url: args.remote_write_url,
        pod_monitor_labels: args.pod_monitor_labels,
        experiments,
    };
    let findings = check::run(&client, &opts).await;
    print!("{}", check::render(&findings));
    anyhow::ensure!(
        !check::failed(&findings),
        "the cluster is not ready: fix the checks marked FAIL (docs/prepare-cluster.md, docs/troubleshooting.md)"
    );
    Ok(())
}

/// The `--prometheus-url` of an installed valtune operator (the chart's Deployment).
async fn installed_prometheus_url(client: &kube::Client) -> Option<(String, String)> {
    let api: Api<Deployment> = Api::all(client.clone());
    let lp = ListParams::default().labels("app.kubernetes.io/name=valtune");
    for d in api.list(&lp).await.ok()?.items {
        let containers = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        for c in containers {
            for a in c.args.iter().flatten() {
                if let Some(url) = a.strip_prefix("--prometheus-url=") {
                    let from = format!(
                        "deployment {}/{}",
                        d.metadata.namespace.clone().unwrap_or_default(),
                        d.metadata.name.clone().unwrap_or_default()
                    );
                    return Some((url.to_string(), from));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_comma_separated_pairs() {
        let l = parse_labels("release=kps, team=chain").unwrap();
        assert_eq!(l["release"], "kps");
        assert_eq!(l["team"], "chain");
        assert!(parse_labels("release").is_err());
    }
}
