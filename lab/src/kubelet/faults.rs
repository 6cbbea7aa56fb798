//! Faults a test (or `valtune-lab fault ...`) injects into the lab's nodes, through the
//! kubelet's control socket (`<lab>/kubelet.sock`, one JSON request a connection, one JSON
//! answer): a node whose kubelet stops answering and comes back, a port blocked on a
//! node, an image the registry refuses, a container's process killed (SIGKILL, exit 137)
//! or OOM-killed (OOMKilled, 137), each then restarted as its pod's policy says.
//!
//! A stopped node is the lab's node label `valtune.dev/lab-kubelet` set to `stopped`, or
//! `off` for a machine that is off (kwok then lets its Lease and heartbeats go; the lab's
//! kubelet stops writing and hearing, and for `off` kills the node's processes:
//! kubelet/worker.rs); blocked ports and refused images are kept in
//! `<lab>/faults.json`, so a restarted simulator keeps them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

use super::Kubelet;
use super::firewall::Block;
use super::runtime::Signal;
use crate::topology::KUBELET_LABEL;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The node's kubelet stops answering: no status, no Lease, no heartbeats; its pods
    /// go on running as on a machine cut off from the API server. With `off`, the
    /// machine is off: its processes are gone too (its disks stay).
    StopNode {
        node: String,
        #[serde(default)]
        off: bool,
    },
    /// The node's kubelet answers again.
    StartNode {
        node: String,
    },
    /// Connections to `port` on the node (its address and its pods') are dropped, or
    /// refused with `reject`.
    Block {
        node: String,
        port: u16,
        #[serde(default)]
        reject: bool,
    },
    Unblock {
        node: String,
        port: u16,
    },
    /// The registry refuses the image: pulls fail with containerd's "not found".
    FailImage {
        image: String,
    },
    FixImage {
        image: String,
    },
    /// SIGKILL of the container's process.
    Kill {
        namespace: String,
        pod: String,
        container: String,
    },
    /// The kernel's OOM kill of the container's process.
    Oom {
        namespace: String,
        pod: String,
        container: String,
    },
}

/// The kubelet's control socket.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("kubelet.sock")
}

/// What survives a restart of the simulator.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Kept {
    blocked: Vec<(String, u16, Block)>,
    refused: Vec<String>,
}

fn kept_file(dir: &Path) -> PathBuf {
    dir.join("faults.json")
}

/// Sends a fault to the lab in `dir`; what the lab says it did.
pub async fn send(dir: &Path, fault: &Fault) -> anyhow::Result<String> {
    let path = socket(dir);
    let mut s = tokio::net::UnixStream::connect(&path)
        .await
        .with_context(|| format!("connecting to the lab's kubelet at {}", path.display()))?;
    s.write_all(serde_json::to_string(fault)?.as_bytes())
        .await?;
    s.shutdown().await?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).await?;
    let v: serde_json::Value = serde_json::from_str(&answer)
        .with_context(|| format!("the lab's kubelet answered {answer:?}"))?;
    match v.get("error").and_then(|e| e.as_str()) {
        Some(e) => anyhow::bail!("{e}"),
        None => Ok(v["ok"].as_str().unwrap_or_default().to_string()),
    }
}

impl Kubelet {
    /// Restores the faults kept in the lab's directory.
    pub(super) fn restore(&self) {
        let Some(dir) = &self.dir else { return };
        let Ok(text) = std::fs::read_to_string(kept_file(dir)) else {
            return;
        };
        let kept: Kept = serde_json::from_str(&text).unwrap_or_default();
        for (node, port, block) in kept.blocked {
            self.firewall.set(&node, port, Some(block));
        }
        for image in kept.refused {
            self.images.refuse(&image, true);
        }
    }

    fn keep(&self) {
        let Some(dir) = &self.dir else { return };
        let kept = Kept {
            blocked: self
                .firewall
                .rules()
                .into_iter()
                .map(|((n, p), b)| (n, p, b))
                .collect(),
            refused: self.images.refused().into_iter().collect(),
        };
        if let Ok(text) = serde_json::to_string_pretty(&kept)
            && let Err(e) = std::fs::write(kept_file(dir), text)
        {
            warn!(error = %e, "keeping the lab's faults");
        }
    }

    async fn label_node(&self, node: &str, value: &str) -> anyhow::Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"metadata": {"labels": {KUBELET_LABEL.0: value}}});
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("labelling node {node}"))?;
        Ok(())
    }

    /// Applies a fault; what was done.
    pub async fn inject(&self, fault: Fault) -> anyhow::Result<String> {
        info!(?fault, "fault");
        match fault {
            Fault::StopNode { node, off } => {
                if off {
                    self.label_node(&node, super::OFF).await?;
                    Ok(format!("node {node} is off"))
                } else {
                    self.label_node(&node, "stopped").await?;
                    Ok(format!("node {node}'s kubelet no longer answers"))
                }
            }
            Fault::StartNode { node } => {
                self.label_node(&node, KUBELET_LABEL.1).await?;
                Ok(format!("node {node}'s kubelet answers"))
            }
            Fault::Block { node, port, reject } => {
                let block = if reject { Block::Reject } else { Block::Drop };
                self.firewall.set(&node, port, Some(block));
                self.keep();
                Ok(format!("port {port} on node {node}: {block:?}"))
            }
            Fault::Unblock { node, port } => {
                self.firewall.set(&node, port, None);
                self.keep();
                Ok(format!("port {port} on node {node}: open"))
            }
            Fault::FailImage { image } => {
                self.images.refuse(&image, true);
                self.keep();
                Ok(format!("the registry refuses {image}"))
            }
            Fault::FixImage { image } => {
                self.images.refuse(&image, false);
                self.keep();
                Ok(format!("the registry serves {image}"))
            }
            Fault::Kill {
                namespace,
                pod,
                container,
            } => {
                self.order(&namespace, &pod, &container, Signal::Kill)
                    .await?;
                Ok(format!("{namespace}/{pod}:{container} killed"))
            }
            Fault::Oom {
                namespace,
                pod,
                container,
            } => {
                self.order(&namespace, &pod, &container, Signal::Oom)
                    .await?;
                Ok(format!("{namespace}/{pod}:{container} OOM-killed"))
            }
        }
    }

    /// Serves the control socket until the simulator stops.
    pub(super) async fn serve_faults(self: std::sync::Arc<Self>) {
        let Some(dir) = self.dir.clone() else { return };
        let path = socket(&dir);
        let _ = std::fs::remove_file(&path);
        let l = match tokio::net::UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "the kubelet's control socket");
                return;
            }
        };
        loop {
            let Ok((mut conn, _)) = l.accept().await else {
                continue;
            };
            let k = self.clone();
            tokio::spawn(async move {
                let mut text = String::new();
                let answer = match conn.read_to_string(&mut text).await {
                    Err(e) => json!({"error": e.to_string()}),
                    Ok(_) => match serde_json::from_str::<Fault>(&text) {
                        Err(e) => json!({"error": format!("not a fault the lab knows: {e}")}),
                        Ok(f) => match k.inject(f).await {
                            Ok(done) => json!({"ok": done}),
                            Err(e) => json!({"error": format!("{e:#}")}),
                        },
                    },
                };
                let _ = conn.write_all(answer.to_string().as_bytes()).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_read_as_the_cli_writes_them() {
        let f: Fault = serde_json::from_str(
            r#"{"fault": "block", "node": "vv-standby", "port": 8901, "reject": true}"#,
        )
        .unwrap();
        assert_eq!(
            f,
            Fault::Block {
                node: "vv-standby".into(),
                port: 8901,
                reject: true
            }
        );
        let kill = Fault::Kill {
            namespace: "ns".into(),
            pod: "agave-a".into(),
            container: "validator".into(),
        };
        assert_eq!(
            serde_json::to_value(&kill).unwrap(),
            json!({"fault": "kill", "namespace": "ns", "pod": "agave-a", "container": "validator"})
        );
        assert!(serde_json::from_str::<Fault>(r#"{"fault": "kill", "pod": "x"}"#).is_err());
    }
}
