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
//! - leaves the rest to the lab's kubelet (crate::kubelet), as a kubelet's runtime would:
//!   its probes (readiness sets the container's and the pod's Ready status, a failing
//!   liveness probe restarts it), its restarts with the kubelet's back-off, its stop
//!   (SIGTERM, then SIGKILL after the grace period), all on the wall clock.
//!
//! The simulator reads only what a kubelet reads: the pod, its ServiceAccount, ConfigMaps
//! and Secrets.

pub mod container;
pub mod credentials;

use std::path::PathBuf;

pub use container::Local;

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
