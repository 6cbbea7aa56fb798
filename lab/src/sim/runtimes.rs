//! The lab's runtimes beneath its kubelet (crate::kubelet): what runs each container of
//! a pod on a lab node, chosen from what a kubelet sees (the pod spec):
//! - the validator container of a client the lab models: its simulated process
//!   ([`super::workloads::SimProcess`]);
//! - an image the lab has a local build of (valtune's): a local program
//!   ([`super::local_pods::Local`]);
//! - an exporter or script image of a pod's sidecars: the real program or the one played
//!   ([`super::sidecars::Sidecar`]);
//! - an init step that is a shell script: run against the node's settings
//!   ([`super::init_steps`]);
//! - anything else: a container that runs until stopped (an init container: one that is
//!   done at once), as kwok plays every container.
//!
//! A pod whose client the lab models runs on the lab's simulated clock, every other pod
//! on the wall clock (crate::kubelet).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::{Client, ResourceExt};

use super::clients::{self, SimClient};
use super::clock::Clock;
use super::pod_view::PodView;
use super::{init_steps, local_pods, procfs, sidecars, workloads};
use crate::kubelet::firewall::Firewall;
use crate::kubelet::runtime::{End, Nodes, PodRuntime, Run, Runtime, Runtimes};
use crate::state::LabState;

/// Where a pod's programs keep their files.
#[derive(Debug, Clone)]
pub struct PodDirs {
    /// The pod's process namespace, as /proc.
    pub proc: PathBuf,
    /// Scratch space per container (its working directory).
    pub root: PathBuf,
    pub logs: PathBuf,
}

/// What a pod's runtimes share: the pod as the kubelet sees it, its directories, its
/// clock, and the node's.
pub struct PodCtx {
    /// The pod, its references and what its running processes add (an RPC bound to the
    /// pod's loopback): a runtime reads it at each start.
    pub view: RwLock<PodView>,
    pub dirs: PodDirs,
    pub clock: Clock,
    pub state: LabState,
    pub nodes: Nodes,
    pub firewall: Firewall,
    /// The model of the pod's client and its container, if the lab plays one.
    pub played: Option<(&'static dyn SimClient, String)>,
    /// The ServiceAccount token of a pod the lab runs local programs for.
    pub creds: Option<Arc<local_pods::credentials::Projected>>,
    refresh: Option<tokio::task::JoinHandle<()>>,
}

impl PodCtx {
    pub fn view(&self) -> PodView {
        self.view.read().expect("lock").clone()
    }
}

impl Drop for PodCtx {
    fn drop(&mut self) {
        if let Some(t) = &self.refresh {
            t.abort();
            // A local program's pod keeps nothing (its token, its working directories).
            if let Some(dir) = self.dirs.proc.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

/// The lab's runtimes.
pub struct Lab {
    pub client: Client,
    pub state: LabState,
    pub nodes: Nodes,
    pub firewall: Firewall,
}

/// What the node's machine gives a pod (its topology entry).
fn machine(state: &LabState, node: &str) -> super::pod_view::Machine {
    crate::topology::Topology::load(&state.topology)
        .ok()
        .and_then(|t| t.nodes().ok())
        .and_then(|ns| ns.into_iter().find(|n| n.name == node))
        .map(|n| super::pod_view::Machine::of(&n))
        .unwrap_or_default()
}

fn containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

impl Lab {
    async fn setup(&self, pod: &Pod) -> anyhow::Result<PodCtx> {
        let state = &self.state;
        let mut view = PodView::load(&self.client, pod).await?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        view.registry = crate::topology::Topology::load(&state.topology)
            .map(|t| t.images)
            .unwrap_or_default();
        view.volumes_root = Some(super::volumes::root(&state.dir, &view.node));
        let pod_dir = state.dir.join("pods").join(&uid);
        let dirs = PodDirs {
            proc: pod_dir.join("proc"),
            root: pod_dir.join("containers"),
            logs: state.dir.join("logs").join("pods"),
        };
        let _ = std::fs::create_dir_all(&dirs.logs);
        view.pod_dir = Some(pod_dir.clone());
        if let Err(e) = view.write_downward() {
            tracing::warn!(pod = %view.name, error = %e, "writing the pod's downward API files");
        }
        // The pod's process namespace exists from its start (its boot time included).
        let started = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
            .unwrap_or_else(Timestamp::now);
        let boot = (started.as_second().max(3600) - 3600) as u64;
        if let Err(e) = procfs::namespace(&dirs.proc, boot) {
            tracing::warn!(pod = %view.name, error = %e, "creating the pod's /proc");
        }
        view.machine = machine(state, &view.node);
        view.node_root = Some(state.dir.join("nodes").join(&view.node).join("root"));
        let played = clients::recognise(pod).map(|(sim, c)| (sim, c.name.clone()));
        let scale = if played.is_some() {
            state.time_scale
        } else {
            1.0
        };
        let local = containers(pod)
            .any(|c| local_pods::program_of(c.image.as_deref().unwrap_or("")).is_some());
        let (creds, refresh) = if local {
            let creds = Arc::new(
                local_pods::credentials::Projected::new(&self.client, state, pod, &pod_dir).await?,
            );
            let refresh = tokio::spawn(creds.clone().keep_fresh(self.client.clone()));
            (Some(creds), Some(refresh))
        } else {
            (None, None)
        };
        Ok(PodCtx {
            view: RwLock::new(view),
            dirs,
            clock: Clock {
                scale,
                step: crate::state::parse_seconds(&state.scrape_interval).unwrap_or(15.0),
            },
            state: state.clone(),
            nodes: self.nodes.clone(),
            firewall: self.firewall.clone(),
            played,
            creds,
            refresh,
        })
    }
}

impl Runtimes for Lab {
    fn pod<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, anyhow::Result<Box<dyn PodRuntime>>> {
        Box::pin(async move {
            let ctx = Arc::new(self.setup(pod).await?);
            Ok(Box::new(LabPod { ctx }) as Box<dyn PodRuntime>)
        })
    }
}

struct LabPod {
    ctx: Arc<PodCtx>,
}

impl PodRuntime for LabPod {
    fn container(&self, name: &str) -> Arc<dyn Runtime> {
        let ctx = self.ctx.clone();
        let pod = ctx.view().pod;
        let Some(c) = containers(&pod).find(|c| c.name == name).cloned() else {
            return Arc::new(Pause);
        };
        let image = c.image.clone().unwrap_or_default();
        let init_step = pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .any(|i| i.name == name && i.restart_policy.as_deref() != Some("Always"));
        if let Some((sim, validator)) = &ctx.played
            && *validator == c.name
        {
            return Arc::new(workloads::SimProcess::new(ctx.clone(), *sim, c));
        }
        if let Some(program) = local_pods::program_of(&image) {
            return Arc::new(local_pods::Local::new(ctx, program, c));
        }
        if let Some(program) = sidecars::program_of(&image) {
            return Arc::new(sidecars::Sidecar::new(ctx, program, c));
        }
        if init_step {
            return Arc::new(InitStep { ctx, container: c });
        }
        Arc::new(Pause)
    }

    fn scale(&self) -> f64 {
        self.ctx.clock.scale
    }

    /// The kubelet's sync rewrites the downward API files (annotations).
    fn updated(&self, pod: &Pod) {
        let mut view = self.ctx.view.write().expect("lock");
        view.pod = pod.clone();
        if let Err(e) = view.write_downward() {
            tracing::warn!(pod = %pod.name_any(), error = %e, "writing the pod's downward API files");
        }
    }
}

/// A container the lab has nothing for: it runs until stopped, as kwok plays it.
struct Pause;

impl Runtime for Pause {
    fn start(&self, _start: Timestamp) -> BoxFuture<'_, Result<Run, String>> {
        Box::pin(async { Ok(Run::played(std::future::pending())) })
    }
}

/// An init step: its shell script run against the node's settings (init_steps.rs); one
/// that is not a script is done at once.
struct InitStep {
    ctx: Arc<PodCtx>,
    container: Container,
}

impl Runtime for InitStep {
    fn start(&self, _start: Timestamp) -> BoxFuture<'_, Result<Run, String>> {
        let view = self.ctx.view();
        let c = self.container.clone();
        let state = self.ctx.state.clone();
        Box::pin(async move {
            Ok(Run::played(async move {
                let node_dir = state.dir.join("nodes").join(&view.node);
                let sys = init_steps::sysctl_dir(&node_dir, view.host_network());
                let prepared = view.machine.prepared.clone();
                match init_steps::step(&view, &c, &sys, &prepared).await {
                    Ok(()) => End::exit(0, ""),
                    Err((code, message)) => {
                        tracing::info!(pod = %view.name, container = %c.name, code, %message, "init step failed");
                        End::exit(code, message)
                    }
                }
            }))
        })
    }
}
