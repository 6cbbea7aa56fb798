//! The local static provisioner's part: a Released local PersistentVolume is wiped and
//! made Available again, so a node's NVMe drives serve trial after trial. A volume's
//! files (what the simulated validators keep on it, [`dir`]) go with the wipe: the next
//! claim finds an empty disk.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tracing::{info, warn};

use crate::topology::LAB_LABEL;

/// Where a node's local volumes keep their files, one directory per PersistentVolume.
pub fn root(lab_dir: &Path, node: &str) -> PathBuf {
    lab_dir.join("nodes").join(node).join("volumes")
}

/// Released volumes are wiped, then get their claim reference cleared, which makes them
/// Available.
pub async fn recycle_volumes(client: Client, lab: String, lab_dir: PathBuf) -> anyhow::Result<()> {
    let api: Api<PersistentVolume> = Api::all(client);
    let cfg = watcher::Config::default().labels(&format!("{LAB_LABEL}={lab}"));
    let mut stream = watcher(api.clone(), cfg).applied_objects().boxed();
    while let Some(pv) = stream.next().await {
        let pv = match pv {
            Ok(pv) => pv,
            Err(e) => {
                warn!(error = %e, "watching volumes");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        if released {
            if let Some(node) = pv.labels().get("valtune.dev/node") {
                let dir = root(&lab_dir, node).join(pv.name_any());
                if let Err(e) = std::fs::remove_dir_all(&dir)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    warn!(volume = %pv.name_any(), error = %e, "wiping the volume's files");
                    continue;
                }
            }
            let patch = serde_json::json!({"spec": {"claimRef": null}});
            match api
                .patch(
                    &pv.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => info!(volume = %pv.name_any(), "recycled released volume"),
                Err(e) => warn!(volume = %pv.name_any(), error = %e, "recycling volume"),
            }
        }
    }
    Ok(())
}
