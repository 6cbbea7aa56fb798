//! What the lifecycle reads of a pod's spec: its containers in the order the kubelet
//! starts them, each with its role, restart policy, image pull policy, probes and
//! preStop hook, and the pod's grace period.

use k8s_openapi::api::core::v1::Pod;

use super::super::probe::{self, Kind};

/// Where a container sits in the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An init container that runs to completion.
    Init,
    /// A native sidecar: an init container with `restartPolicy: Always`.
    Sidecar,
    Main,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    Never,
    OnFailure,
    Always,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pull {
    Always,
    IfNotPresent,
    Never,
}

/// What the lifecycle needs of a container's spec.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    pub name: String,
    pub image: String,
    pub role: Role,
    pub restart: Restart,
    pub pull: Pull,
    pub probes: Vec<(Kind, probe::Spec)>,
    pub pre_stop: Option<Vec<String>>,
}

/// What the lifecycle needs of a pod's spec.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSpec {
    /// `name_namespace(uid)`, as the kubelet names a pod in its messages.
    pub id: String,
    /// Init containers in order (sidecars among them), then the others.
    pub containers: Vec<ContainerSpec>,
    /// `terminationGracePeriodSeconds`.
    pub grace: f64,
}

impl PodSpec {
    pub fn of(pod: &Pod) -> PodSpec {
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_restart = match spec.restart_policy.as_deref() {
            Some("Never") => Restart::Never,
            Some("OnFailure") => Restart::OnFailure,
            _ => Restart::Always,
        };
        let of = |c: &k8s_openapi::api::core::v1::Container, role: Role| {
            let restart = match role {
                Role::Sidecar => Restart::Always,
                Role::Init if pod_restart == Restart::Never => Restart::Never,
                Role::Init => Restart::OnFailure,
                Role::Main => pod_restart,
            };
            let image = c.image.clone().unwrap_or_default();
            let pull = match c.image_pull_policy.as_deref() {
                Some("Always") => Pull::Always,
                Some("Never") => Pull::Never,
                Some(_) => Pull::IfNotPresent,
                // The API server's default: Always for `:latest` or no tag.
                None if image.ends_with(":latest") || !tagged(&image) => Pull::Always,
                None => Pull::IfNotPresent,
            };
            let probes = [
                (Kind::Startup, &c.startup_probe),
                (Kind::Readiness, &c.readiness_probe),
                (Kind::Liveness, &c.liveness_probe),
            ]
            .into_iter()
            .filter_map(|(k, p)| Some((k, probe::Spec::of(p.as_ref()?, c))))
            .collect();
            ContainerSpec {
                name: c.name.clone(),
                image,
                role,
                restart,
                pull,
                probes,
                pre_stop: c
                    .lifecycle
                    .as_ref()
                    .and_then(|l| l.pre_stop.as_ref()?.exec.as_ref()?.command.clone()),
            }
        };
        let init = spec.init_containers.iter().flatten().map(|c| {
            let role = if c.restart_policy.as_deref() == Some("Always") {
                Role::Sidecar
            } else {
                Role::Init
            };
            of(c, role)
        });
        let main = spec.containers.iter().map(|c| of(c, Role::Main));
        let meta = &pod.metadata;
        PodSpec {
            id: format!(
                "{}_{}({})",
                meta.name.as_deref().unwrap_or(""),
                meta.namespace.as_deref().unwrap_or(""),
                meta.uid.as_deref().unwrap_or("")
            ),
            containers: init.chain(main).collect(),
            grace: spec.termination_grace_period_seconds.unwrap_or(30).max(0) as f64,
        }
    }
}

/// Whether an image reference names a tag or a digest.
fn tagged(image: &str) -> bool {
    let last = image.rsplit('/').next().unwrap_or(image);
    last.contains(':') || image.contains('@')
}
