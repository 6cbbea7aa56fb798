//! Pods whose image the lab has a local build of, run as a kubelet runs their containers:
//! the image `<registry>/valtune/valtune:<tag>` is the valtune binary (the operator a
//! `helm install` of charts/valtune deploys). For such a pod on one of the lab's nodes,
//! the lab
//! - projects its ServiceAccount's token as the kubelet does (a TokenRequest bound to the
//!   pod, refreshed at 80% of its life: [`credentials`]), and hands the process a
//!   kubeconfig with that token and the lab's CA, so it talks to the API server as that
//!   ServiceAccount and a missing RBAC rule fails here as on a cluster;
//! - runs the container's command line with its env (ConfigMap, Secret and downward-API
//!   references resolved), its pod-local listen addresses on the pod's IP (what a network
//!   namespace does to `0.0.0.0`), logging to logs/pods/<namespace>_<pod>_<container>.log;
//! - probes it: readiness sets the container's and the pod's Ready status, a failing
//!   liveness probe restarts it, an exit restarts it with the kubelet's back-off
//!   ([`container`]);
//! - stops it when the pod goes (SIGTERM, then SIGKILL after the grace period).
//!
//! The simulator reads only what a kubelet reads: the pod, its ServiceAccount, ConfigMaps
//! and Secrets.

pub mod container;
pub mod credentials;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

use super::pod_view::PodView;
use crate::state::LabState;

/// A program the lab runs for an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalProgram {
    /// valtune's image: its entrypoint is the valtune binary (Dockerfile, hack/image.sh).
    Valtune,
}

impl LocalProgram {
    /// The path the image's entrypoint has (a command naming it is the program itself).
    pub fn entrypoint(self) -> &'static str {
        match self {
            LocalProgram::Valtune => "/usr/local/bin/valtune",
        }
    }

    pub fn binary(self, state: &LabState) -> PathBuf {
        match self {
            LocalProgram::Valtune => state.valtune.clone(),
        }
    }
}

/// The program an image runs, if the lab has a local build of it: valtune's image from
/// any registry, at any tag (the lab runs the build at hand, whatever the tag says).
pub fn program_of(image: &str) -> Option<LocalProgram> {
    let (repo, _tag) = super::sidecars::repository(image);
    (repo == "valtune/valtune" || repo.ends_with("/valtune/valtune"))
        .then_some(LocalProgram::Valtune)
}

fn runs_here(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    spec.and_then(|s| s.node_name.as_ref()).is_some()
        && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status.and_then(|s| s.pod_ip.as_ref()).is_some()
        && pod.metadata.deletion_timestamp.is_none()
        && spec.is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| program_of(c.image.as_deref().unwrap_or("")).is_some())
        })
}

pub async fn run(client: Client, state: LabState) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::all(client.clone());
    // Per pod uid: the pod as last seen (None once it is gone), and its task.
    let mut running: HashMap<String, (watch::Sender<Option<Pod>>, tokio::task::JoinHandle<()>)> =
        HashMap::new();
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(ev) = stream.next().await {
        let (pod, gone) = match ev {
            Ok(Event::Apply(p) | Event::InitApply(p)) => (p, false),
            Ok(Event::Delete(p)) => (p, true),
            Ok(_) => continue,
            Err(e) => {
                warn!(error = %e, "watching pods");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let keep = !gone && runs_here(&pod);
        running.retain(|_, (_, task)| !task.is_finished());
        match (running.get(&uid), keep) {
            (Some((tx, _)), true) => {
                let _ = tx.send(Some(pod));
            }
            (Some(_), false) => {
                // The task stops its processes (gracefully) and ends by itself.
                if let Some((tx, _)) = running.remove(&uid) {
                    let _ = tx.send(None);
                }
            }
            (None, true) => {
                let (tx, rx) = watch::channel(Some(pod));
                let task = tokio::spawn(run_pod(client.clone(), state.clone(), rx));
                running.insert(uid, (tx, task));
            }
            (None, false) => {}
        }
    }
    Ok(())
}

/// Runs one pod's containers until the pod goes.
async fn run_pod(client: Client, state: LabState, mut rx: watch::Receiver<Option<Pod>>) {
    let Some(pod) = rx.borrow().clone() else {
        return;
    };
    let name = pod.name_any();
    let ns = pod.namespace().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let view = match PodView::load(&client, &pod).await {
        Ok(v) => v,
        Err(e) => {
            warn!(pod = %name, error = %e, "reading what the pod references");
            return;
        }
    };
    let dir = state.dir.join("pods").join(&uid);
    let creds = match credentials::Projected::new(&client, &state, &pod, &dir).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            warn!(pod = %name, error = %e, "projecting the pod's service account token");
            return;
        }
    };
    let logs = state.dir.join("logs").join("pods");
    let _ = std::fs::create_dir_all(&logs);
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let status_lock = Arc::new(tokio::sync::Mutex::new(()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0) as u64;
    let mut containers = Vec::new();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let Some(program) = program_of(c.image.as_deref().unwrap_or("")) else {
            warn!(pod = %name, container = %c.name, "the lab has no program for this container's image; it does not run");
            continue;
        };
        let run = container::Run {
            api: api.clone(),
            pod: name.clone(),
            container: c.clone(),
            program: program.binary(&state),
            argv: container::argv(program, &view, c),
            env: container::env(&view, c, &state, &creds),
            workdir: dir.join("containers").join(&c.name),
            log: logs.join(format!("{ns}_{name}_{}.log", c.name)),
            ip: view.ip,
            grace: Duration::from_secs(grace),
            status_lock: status_lock.clone(),
        };
        info!(pod = %format!("{ns}/{name}"), container = %c.name, program = %run.program.display(), "starting a local container");
        containers.push(tokio::spawn(container::run(run, stop_rx.clone())));
    }
    let refresh = tokio::spawn(creds.clone().keep_fresh(client.clone()));
    // Until the pod goes.
    loop {
        if rx.changed().await.is_err() || rx.borrow().is_none() {
            break;
        }
    }
    refresh.abort();
    let _ = stop_tx.send(true);
    for c in containers {
        let _ = c.await;
    }
    info!(pod = %format!("{ns}/{name}"), "local containers stopped");
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valtunes_image_is_the_local_valtune_binary_from_any_registry() {
        for image in [
            "ghcr.io/valtune/valtune:0.1.0",
            "valtune/valtune",
            "registry.local:5000/valtune/valtune@sha256:0123",
            "ghcr.io/acme/mirror/valtune/valtune:dev",
        ] {
            assert_eq!(program_of(image), Some(LocalProgram::Valtune), "{image}");
        }
        for image in [
            "anzaxyz/agave:v2.0.5",
            "ghcr.io/valtune/other:1",
            "valtune:1",
        ] {
            assert_eq!(program_of(image), None, "{image}");
        }
    }
}
