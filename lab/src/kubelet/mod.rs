//! The lab's kubelet: what a kubelet does with the pods bound to its node, for every lab
//! node, in one place (kwok plays the rest: the Node objects, their Leases and
//! heartbeats, the pods' IPs and their Running phase, and the deletion of a pod with no
//! preStop hook; kwok.rs).
//!
//! - one pod watcher ([`run`]) and one worker per pod (worker.rs);
//! - the containers' lifecycle, pure and table-tested: [`lifecycle`] (what runs when,
//!   restart policies, native sidecars, CrashLoopBackOff, image pulls, preStop and the
//!   grace period, activeDeadlineSeconds), [`backoff`], [`probe`], and the status a
//!   kubelet writes from it, [`status`];
//! - beneath it the [`runtime::Runtime`] trait, what runs a container's process; the
//!   lab's runtimes are in sim/runtimes.rs;
//! - the node's images and the registry ([`images`]), the nodes' firewalls
//!   ([`firewall`]), and the faults a test injects ([`faults`]);
//! - what a container may do ([`privileges`]).
//!
//! Clocks: a pod whose client the lab plays runs on simulated time (the lab's time
//! scale), its containers' back-offs, probe periods, grace periods and hooks included,
//! with floors in real seconds where the lab's own steps are not compressed (a hook gets
//! at least 5 s, a probe runs at most once a second); a pod the lab runs as local
//! programs (valtune's operator) runs on the wall clock. activeDeadlineSeconds and probe
//! timeouts are real seconds for every pod.

pub mod backoff;
pub mod faults;
pub mod firewall;
pub mod images;
pub mod lifecycle;
pub mod privileges;
pub mod probe;
pub mod prober;
pub mod runtime;
pub mod status;
pub mod worker;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::warn;

use crate::topology::{KUBELET_LABEL, LAB_LABEL};
use runtime::{Nodes, Runtimes, Signal};

/// The kubelet of every lab node.
pub struct Kubelet {
    pub client: Client,
    pub runtimes: Arc<dyn Runtimes>,
    pub images: Arc<images::Images>,
    pub firewall: firewall::Firewall,
    pub nodes: Nodes,
    /// The lab's directory (its control socket, what it keeps); None in tests.
    pub dir: Option<PathBuf>,
    /// Each node's kubelet.
    answers: Mutex<HashMap<String, watch::Sender<NodeState>>>,
    workers: Mutex<HashMap<String, Worker>>,
}

struct Worker {
    namespace: String,
    name: String,
    updates: watch::Sender<Option<Pod>>,
    orders: mpsc::UnboundedSender<worker::Order>,
    task: tokio::task::JoinHandle<()>,
}

/// A node's kubelet, as its label `valtune.dev/lab-kubelet` says (kwok plays only the
/// nodes whose kubelet answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// `answers`.
    Answers,
    /// Any other value: the kubelet does not answer (cut off from the API server, or
    /// dead); the machine runs on, its pods' processes with it.
    Stopped,
    /// `off`: the machine is off; its processes are gone, its disks stay. Back on, its
    /// kubelet starts the pods still bound to it afresh.
    Off,
}

/// The value of the node label that powers a machine off.
pub const OFF: &str = "off";

impl NodeState {
    pub fn of(labels: &BTreeMap<String, String>) -> NodeState {
        match labels.get(KUBELET_LABEL.0).map(String::as_str) {
            Some(v) if v == KUBELET_LABEL.1 => NodeState::Answers,
            Some(OFF) => NodeState::Off,
            _ => NodeState::Stopped,
        }
    }
}

fn answering(labels: &BTreeMap<String, String>) -> bool {
    NodeState::of(labels) == NodeState::Answers
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// Pods the lab's kubelet leaves to kwok: a Job's (kwok completes them at once).
fn kwoks(pod: &Pod) -> bool {
    pod.owner_references().iter().any(|o| o.kind == "Job")
}

impl Kubelet {
    pub fn new(
        client: Client,
        runtimes: Arc<dyn Runtimes>,
        nodes: Nodes,
        firewall: firewall::Firewall,
        dir: Option<PathBuf>,
    ) -> Kubelet {
        Kubelet {
            client,
            runtimes,
            images: Arc::new(images::Images::new(dir.clone())),
            firewall,
            nodes,
            dir,
            answers: Mutex::default(),
            workers: Mutex::default(),
        }
    }

    fn answers(&self, node: &str) -> watch::Receiver<NodeState> {
        let mut a = self.answers.lock().expect("lock");
        a.entry(node.into())
            .or_insert_with(|| {
                let state = self
                    .nodes
                    .read()
                    .expect("lock")
                    .get(node)
                    .map(NodeState::of)
                    .unwrap_or(NodeState::Stopped);
                watch::Sender::new(state)
            })
            .subscribe()
    }

    fn node_labels(&self, node: &str, labels: Option<BTreeMap<String, String>>) {
        let on = labels.as_ref().map(NodeState::of).unwrap_or(NodeState::Off);
        match labels {
            Some(l) => self.nodes.write().expect("lock").insert(node.into(), l),
            None => self.nodes.write().expect("lock").remove(node),
        };
        if let Some(tx) = self.answers.lock().expect("lock").get(node) {
            tx.send_if_modified(|v| std::mem::replace(v, on) != on);
        }
    }

    /// A pod as the watch saw it (None: deleted).
    fn dispatch(self: &Arc<Self>, pod: Pod, gone: bool) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut workers = self.workers.lock().expect("lock");
        workers.retain(|_, w| !w.task.is_finished());
        if let Some(w) = workers.get(&uid) {
            let _ = w.updates.send(if gone { None } else { Some(pod) });
            return;
        }
        let Some(node) = node_of(&pod) else { return };
        let lab_node = self.nodes.read().expect("lock").get(node).map(answering);
        let has_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_ref())
            .is_some();
        let deleting = pod.metadata.deletion_timestamp.is_some();
        // A pod of a lab node whose kubelet answers, once kwok gave it its IP (or being
        // deleted before it had one).
        if gone || lab_node != Some(true) || kwoks(&pod) || !(has_ip || deleting) {
            return;
        }
        let (updates, rx) = watch::channel(Some(pod.clone()));
        let (orders, orders_rx) = mpsc::unbounded_channel();
        let answers = self.answers(node);
        let task = tokio::spawn(worker::run(
            self.clone(),
            pod.clone(),
            rx,
            orders_rx,
            answers,
        ));
        workers.insert(
            uid,
            Worker {
                namespace: pod.namespace().unwrap_or_default(),
                name: pod.name_any(),
                updates,
                orders,
                task,
            },
        );
    }

    /// Signals a container of a pod this kubelet runs.
    pub async fn order(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        signal: Signal,
    ) -> anyhow::Result<()> {
        let orders = self
            .workers
            .lock()
            .expect("lock")
            .values()
            .find(|w| w.namespace == namespace && w.name == pod && !w.task.is_finished())
            .map(|w| w.orders.clone());
        let Some(orders) = orders else {
            anyhow::bail!("the lab's kubelet runs no pod {namespace}/{pod}");
        };
        let (done, answer) = oneshot::channel();
        orders
            .send(worker::Order {
                container: container.into(),
                signal,
                done,
            })
            .map_err(|_| anyhow::anyhow!("pod {namespace}/{pod} has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("pod {namespace}/{pod} has stopped"))?
            .map_err(anyhow::Error::msg)
    }
}

/// Runs the lab's kubelet for the lab `lab` (its nodes' label) until the simulator stops.
pub async fn run(kubelet: Arc<Kubelet>, lab: String) -> anyhow::Result<()> {
    kubelet.restore();
    let client = kubelet.client.clone();
    // The latest of every pod bound to a lab node, to catch up on once its node answers
    // again (a pod deleted or created meanwhile).
    let latest: Arc<Mutex<HashMap<String, Pod>>> = Arc::default();
    let k = kubelet.clone();
    let seen = latest.clone();
    let nodes = async move {
        let api: Api<Node> = Api::all(client.clone());
        let cfg = watcher::Config::default().labels(&format!("{LAB_LABEL}={lab}"));
        let mut stream = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(n) | Event::InitApply(n)) => {
                    let node = n.name_any();
                    let back = answering(n.labels())
                        && !k
                            .nodes
                            .read()
                            .expect("lock")
                            .get(&node)
                            .is_some_and(answering);
                    k.node_labels(&node, Some(n.labels().clone()));
                    if back {
                        let pods: Vec<Pod> = seen
                            .lock()
                            .expect("lock")
                            .values()
                            .filter(|p| node_of(p) == Some(node.as_str()))
                            .cloned()
                            .collect();
                        for p in pods {
                            k.dispatch(p, false);
                        }
                    }
                }
                Ok(Event::Delete(n)) => k.node_labels(&n.name_any(), None),
                Ok(_) => {}
                Err(e) => {
                    warn!(error = %e, "watching nodes");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    };
    let k = kubelet.clone();
    let pods = async move {
        let api: Api<Pod> = Api::all(k.client.clone());
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
            if gone {
                latest.lock().expect("lock").remove(&uid);
            } else if node_of(&pod).is_some() {
                latest.lock().expect("lock").insert(uid, pod.clone());
            }
            k.dispatch(pod, gone);
        }
    };
    tokio::join!(nodes, pods, kubelet.clone().serve_faults());
    Ok(())
}
