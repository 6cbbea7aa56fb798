//! A running lab, as recorded in `<dir>/state.json`: where its endpoints are, which
//! processes it started, and its simulation settings. Tests and the demo attach to a lab
//! through this file.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::{Deserialize, Serialize};

use crate::process::ProcessRecord;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabState {
    /// Unique per lab; labels everything the lab creates.
    pub name: String,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub apiserver_url: String,
    pub prometheus_url: String,
    pub prometheus_config: PathBuf,
    /// A second Prometheus without the remote-write receiver (prometheus.rs
    /// `NO_RECEIVER_NAME`); empty in labs started before it existed.
    #[serde(default)]
    pub prometheus_no_receiver_url: String,
    /// A third Prometheus, for outage tests (prometheus.rs `OUTAGE_NAME`); empty in labs
    /// started before it existed.
    #[serde(default)]
    pub prometheus_outage_url: String,
    pub pod_cidr: String,
    pub pod_network_lock: PathBuf,
    /// Simulated seconds per real second: validator workloads run this much faster.
    pub time_scale: f64,
    /// How often the lab's Prometheus scrapes pods.
    pub scrape_interval: String,
    pub topology: PathBuf,
    /// The lab's tools (the exporters it runs for trial pods' sidecars among them).
    #[serde(default)]
    pub tools: PathBuf,
    /// The `valtune` binary run for pods of valtune's image (sim/local_pods/).
    #[serde(default)]
    pub valtune: PathBuf,
    pub processes: Vec<ProcessRecord>,
    /// Set once start-up completed; a lab without it is a failed or partial start.
    #[serde(default)]
    pub ready: bool,
}

impl LabState {
    pub const FILE: &'static str = "state.json";

    pub fn load(dir: &Path) -> anyhow::Result<LabState> {
        let path = dir.join(Self::FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "no lab in {} (missing {}); start one with `make lab-up`",
                dir.display(),
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// Written after every process start, so a failed `up` can still be torn down.
    pub fn save(&self) -> anyhow::Result<()> {
        let path = self.dir.join(Self::FILE);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }

    /// Whether the lab started completely and every process is still the one it started,
    /// but the Prometheus the outage tests stop and start again on purpose (a test that
    /// starts during an outage finds the lab running).
    pub fn all_running(&self) -> bool {
        self.ready
            && self
                .processes
                .iter()
                .filter(|p| !p.adopted && p.name != crate::prometheus::OUTAGE_PROCESS)
                .all(ProcessRecord::is_alive)
    }

    /// A kubeconfig for an operator of its own user (writes audited in logs/audit.log).
    pub fn operator_kubeconfig(&self) -> PathBuf {
        self.dir.join("operator.kubeconfig")
    }

    pub fn process(&self, name: &str) -> Option<&ProcessRecord> {
        self.processes.iter().find(|p| p.name == name)
    }

    /// A client for the lab's API server (as its admin).
    pub async fn client(&self) -> anyhow::Result<Client> {
        kube_client(&self.kubeconfig).await
    }
}

pub async fn kube_client(kubeconfig: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Seconds of a Go duration such as "1s", "500ms" or "3h" (kube's parser).
pub fn parse_seconds(d: &str) -> Option<f64> {
    let parsed: kube::core::Duration = d.parse().ok()?;
    (!parsed.is_negative()).then(|| std::time::Duration::from(parsed).as_secs_f64())
}
