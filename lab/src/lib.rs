//! valtune's lab: a real Kubernetes control plane on one machine (etcd, kube-apiserver,
//! kube-scheduler, kube-controller-manager, Prometheus) with kwok's simulated kubelets for
//! bare-metal nodes, and a simulator that plays the validator workloads on those nodes.
//! Only the kubelet and the validator processes are simulated.

pub mod allocatable;
pub mod argocd;
pub mod compress;
pub mod control_plane;
pub mod kubelet;
pub mod kwok;
pub mod net;
pub mod process;
pub mod prometheus;
pub mod sim;
pub mod state;
pub mod topology;

pub use state::LabState;

/// rustls needs one process-wide crypto provider; the workspace builds only ring.
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
