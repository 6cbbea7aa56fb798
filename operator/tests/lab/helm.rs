//! Helm against the lab, for the chart's tests: install, upgrade and uninstall
//! charts/valtune with the lab's helm (hack/tools) as the lab's admin, and what a test
//! reads of the operator pods the lab runs from it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::common::{Lab, repo_root, wait_for};

pub fn chart() -> PathBuf {
    repo_root().join("charts/valtune")
}

/// The objects' name for a release (the chart's valtune.fullname).
pub fn fullname(release: &str) -> String {
    if release.contains("valtune") {
        release.to_string()
    } else {
        format!("{release}-valtune")
    }
}

/// Runs helm with the lab's kubeconfig; its output, or a panic with its stderr.
pub fn helm(lab: &Lab, args: &[&str]) -> String {
    let out = std::process::Command::new(lab.state.tools.join("helm"))
        .args(args)
        .env("KUBECONFIG", &lab.state.kubeconfig)
        .env("HELM_CACHE_HOME", repo_root().join("target/helm/cache"))
        .env("HELM_CONFIG_HOME", repo_root().join("target/helm/config"))
        .env("HELM_DATA_HOME", repo_root().join("target/helm/data"))
        .output()
        .expect("running helm (make tools)");
    assert!(
        out.status.success(),
        "helm {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `helm upgrade --install` of `chart` as release `release` in `ns`, the operator
/// watching `ns` and reading the lab's Prometheus, waiting until it is Ready.
pub fn install(lab: &Lab, chart: &Path, release: &str, ns: &str, sets: &[&str]) -> String {
    let mut args: Vec<String> = [
        "upgrade",
        "--install",
        release,
        &chart.display().to_string(),
        "--namespace",
        ns,
        "--wait",
        "--timeout",
        "180s",
        "--set",
        "crds.enabled=false",
        "--set",
        &format!("operator.watchNamespace={ns}"),
        "--set",
        &format!("operator.prometheusUrl={}", lab.state.prometheus_url),
        // A killed leader's Lease must expire quickly in tests.
        "--set",
        "operator.leaseDuration=3s",
        "--set",
        "metrics.serviceMonitor.interval=1s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for s in sets {
        args.push("--set".into());
        args.push(s.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    helm(lab, &args)
}

pub fn uninstall(lab: &Lab, release: &str, ns: &str) {
    helm(lab, &["uninstall", release, "--namespace", ns, "--wait"]);
}

/// The release's operator pods, once `n` of them are Ready.
pub async fn ready_pods(lab: &Lab, ns: &str, release: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), ns);
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"));
    wait_for(
        &format!("{n} Ready operator pods"),
        Duration::from_secs(120),
        || async {
            let list = pods.list(&lp).await.map_err(|e| e.to_string())?.items;
            let ready: Vec<Pod> = list
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                })
                .collect();
            if ready.len() == n {
                Ok(ready)
            } else {
                Err(format!("{} Ready", ready.len()))
            }
        },
    )
    .await
}

/// The log the lab keeps of a pod's operator container.
pub fn log_of(lab: &Lab, pod: &Pod) -> String {
    let path = lab.state.dir.join("logs/pods").join(format!(
        "{}_{}_operator.log",
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default()
    ));
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The operator's /metrics, read where the pod serves it.
pub async fn metrics_of(pod: &Pod) -> Result<String, String> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or("no pod IP")?;
    reqwest::get(format!("http://{ip}:8080/metrics"))
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())
}

/// The value of one sample of a Prometheus text page.
pub fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// A name no other test of this run uses.
pub fn unique() -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}
