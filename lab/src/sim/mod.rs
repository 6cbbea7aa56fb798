//! The simulator: the parts of the nodes kwok does not play. It runs beside the control
//! plane (`valtune-lab sim`, started by `up`) and
//! - runs the lab's kubelet (crate::kubelet) over the lab's runtimes ([`runtimes`]): the
//!   validator process of each pod whose client it models, played at its own interfaces
//!   from one model per client ([`clients`], [`workloads`]), the pod's exporter sidecars
//!   ([`sidecars`]), its init steps ([`init_steps`]), and the pods of images it has a
//!   local build of (valtune's own operator, installed by its chart) as local processes
//!   with their ServiceAccount's token ([`local_pods`]);
//! - records every signature a simulated validator makes, outside the cluster
//!   ([`signing`]), for the checker of "never two signers";
//! - recycles released local volumes ([`volumes`]);
//! - plays prometheus-operator's config reloader for the lab's Prometheus ([`reloader`]).

pub mod chain_load;
pub mod clients;
pub mod clock;
pub mod init_steps;
pub mod local_pods;
pub mod nsenter;
pub mod pod_view;
pub mod procfs;
pub mod reloader;
pub mod runtimes;
pub mod sidecars;
pub mod signing;
pub mod volumes;
pub mod workloads;

use std::sync::Arc;

use crate::kubelet::{self, Kubelet, firewall::Firewall, runtime::Nodes};
use crate::state::LabState;

pub async fn run(state: LabState) -> anyhow::Result<()> {
    let client = state.client().await?;
    // What every simulated validator signs, kept outside the cluster (signing/mod.rs).
    signing::init(&state.dir)?;
    let nodes = Nodes::default();
    let firewall = Firewall::default();
    let lab = runtimes::Lab {
        client: client.clone(),
        state: state.clone(),
        nodes: nodes.clone(),
        firewall: firewall.clone(),
    };
    let kubelet = Arc::new(Kubelet::new(
        client.clone(),
        Arc::new(lab),
        nodes,
        firewall,
        Some(state.dir.clone()),
    ));
    tokio::select! {
        r = volumes::recycle_volumes(client.clone(), state.name.clone(), state.dir.clone()) => r,
        r = reloader::run(client.clone(), state.clone()) => r,
        r = kubelet::run(kubelet, state.name.clone()) => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = sigterm() => Ok(()),
    }
}

async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
