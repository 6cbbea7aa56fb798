//! The reconcilers. Each follows the same pipeline: observe what exists, decide (pure),
//! act (server-side apply of children, deletes, events), write status. Every deadline
//! lives in status as a timestamp, so a restarted operator resumes exactly where the
//! last one stopped.

pub mod apply;
pub mod error;
pub mod events;
pub mod experiment;
pub mod leader;
pub mod pod_monitor;
pub mod preflight;
pub mod status;
pub mod step;
pub mod trial;
pub mod validator;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::api::{Validator, ValidatorExperiment, ValidatorTrial, labels};
use crate::operator_metrics::OperatorMetrics;
use crate::results::prometheus::Prometheus;
pub use error::Error;

/// An API error that retrying cannot fix: the object itself is refused.
pub fn is_permanent(e: &kube::Error) -> Option<&str> {
    match e {
        kube::Error::Api(s) if matches!(s.code, 400 | 413 | 422) => Some(&s.message),
        // Forbidden by an admission plugin (a RuntimeClass that does not exist, a pod
        // security level): the object is refused. Not RBAC (`User "..." cannot patch
        // resource`), which an admin fixes without touching the trial, nor a quota, which
        // may free up: those are errors, retried and counted.
        kube::Error::Api(s)
            if s.code == 403
                && !s.message.contains("exceeded quota")
                && !s.message.contains(" cannot ") =>
        {
            Some(&s.message)
        }
        _ => None,
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub struct Context {
    pub client: Client,
    /// Prometheus to read results from, unless an experiment names its own.
    pub prometheus_url: Option<String>,
    /// One HTTP client (and its connection pool) for every Prometheus query.
    pub http: reqwest::Client,
    pub events: events::Events,
    /// Whether prometheus-operator's PodMonitor kind is served (checked at start).
    pub pod_monitors: bool,
    /// What was last applied of each PodMonitor (namespace/name -> hash), so it is
    /// applied when it would change, not on every experiment reconcile.
    pub applied_monitors: Mutex<HashMap<String, u64>>,
    /// Warnings already published (deduplicated notes), so a condition that persists
    /// is reported once, not on every pass.
    pub reported: Mutex<HashSet<String>>,
    /// Consecutive failed reconciles per object, for backoff.
    pub failures: Mutex<HashMap<String, u32>>,
    /// Remote-write receiver probes, by URL (preflight.rs).
    pub preflight: preflight::Cache,
    pub metrics: Arc<OperatorMetrics>,
    /// The managed pods, as the trial controller's watch of them last saw them (updated
    /// before the trial it wakes is reconciled); trial/observe.rs reads a trial's pod here.
    pub pods: Store<Pod>,
    /// True once `pods` holds its watch's first list (trial/act.rs reads a trial's pods
    /// there from then on; before, an empty store is not "no pods").
    pub pods_ready: tokio::sync::watch::Receiver<bool>,
    /// The nodes, as a watch of them last saw them (their image lists dropped): whether a
    /// trial's node still exists, and what it offers.
    pub nodes: Store<Node>,
    /// When this process last wrote each experiment's status, by uid (a change of the
    /// node-hours alone waits: experiment/act.rs `CLOCK_EVERY`).
    pub status_written: Mutex<HashMap<String, Instant>>,
    /// The resourceVersion each trial's and experiment's last status write was decided
    /// from, by uid ([`Context::already_written`]).
    written_from: Mutex<HashMap<String, String>>,
    /// Every trial, as the one watch of trials last saw it: the trial controller's store,
    /// which also wakes their experiments (the store is updated before the wake-up, so a
    /// pass sees the change that woke it).
    pub trials: Store<ValidatorTrial>,
    /// True once `trials` holds the watch's first list ([`listed`]). Passes wait on this,
    /// not on `Store::wait_until_ready`: that waits on one oneshot receiver, which keeps
    /// only the last waiter's waker (kube-runtime 5.0.0 src/utils/delayed_init.rs
    /// `Get::poll`), so of two experiments reconciled before the first list, one pass
    /// never woke and the experiment was never reconciled again; a watch channel wakes
    /// every pass.
    pub trials_ready: tokio::sync::watch::Receiver<bool>,
    /// Trials this process created that the watch may not have delivered yet, by
    /// experiment uid (read-your-writes for the next pass; experiment/observe.rs).
    pub created: Mutex<HashMap<String, Vec<(Instant, ValidatorTrial)>>>,
}

impl Context {
    /// The Prometheus a trial reads from, if any.
    pub fn prometheus(&self, url: Option<&str>) -> Option<Prometheus> {
        url.or(self.prometheus_url.as_deref()).map(|u| {
            Prometheus::with_client(self.http.clone(), u, self.metrics.prometheus_queries())
        })
    }

    /// Publishes an event on `obj`; with `once`, only the first time this process sees
    /// that (object, reason, text).
    pub async fn publish<K>(&self, obj: &K, warning: bool, reason: &str, text: &str, once: bool)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish_related(obj, None, warning, reason, text, once)
            .await
    }

    /// [`Context::publish`] with the event's related object (events.k8s.io/v1
    /// `related`), e.g. the first trial a pass created.
    pub async fn publish_related<K>(
        &self,
        obj: &K,
        related: Option<k8s_openapi::api::core::v1::ObjectReference>,
        warning: bool,
        reason: &str,
        text: &str,
        once: bool,
    ) where
        K: Resource<DynamicType = ()>,
    {
        if once {
            let key = format!(
                "{}/{reason}/{text}",
                obj.meta().uid.clone().unwrap_or_default()
            );
            if !self.reported.lock().expect("lock").insert(key) {
                return;
            }
        }
        let note: String = text.chars().take(1000).collect();
        if let Err(e) = self
            .events
            .publish(obj.object_ref(&()), related, warning, reason, &note)
            .await
        {
            warn!(error = %e, "publishing an event");
        }
    }

    /// Writes `obj`'s status ([`status::apply_status`]) and remembers which copy it was
    /// decided from.
    pub async fn write_status<K, S>(&self, api: &Api<K>, obj: &K, st: &S) -> kube::Result<()>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
        S: serde::Serialize,
    {
        let after = status::apply_status(api, obj, st).await?;
        // A write that changed nothing keeps the resourceVersion: no watch event follows.
        if let (Some(uid), Some(rv)) = (&obj.meta().uid, &obj.meta().resource_version)
            && after.as_ref() != Some(rv)
        {
            self.written_from
                .lock()
                .expect("lock")
                .insert(uid.clone(), rv.clone());
        }
        Ok(())
    }

    /// Whether `obj` is the very copy this process last wrote a status from: the watch
    /// has not delivered that write yet (a requeue came first, on a busy API server), so
    /// a pass would decide again from a status already replaced, redo its acts, and have
    /// its write refused as a conflict (the write is conditional on this copy's
    /// resourceVersion), each a request for nothing. The watch's delivery of the write
    /// wakes the object again. Forgets the copy once a newer one is seen.
    pub fn already_written<K: Resource>(&self, obj: &K) -> bool {
        let (Some(uid), Some(rv)) = (&obj.meta().uid, &obj.meta().resource_version) else {
            return false;
        };
        let mut from = self.written_from.lock().expect("lock");
        match from.get(uid) {
            Some(written) if written == rv => true,
            Some(_) => {
                from.remove(uid);
                false
            }
            None => false,
        }
    }

    /// The requeue after a failed reconcile: doubling from 5 s to 5 min per object, so a
    /// persistent failure neither spins nor goes quiet (each is logged and counted).
    pub fn backoff(&self, key: &str) -> Duration {
        let mut f = self.failures.lock().expect("lock");
        let n = f.entry(key.to_string()).or_insert(0);
        *n = (*n + 1).min(7);
        Duration::from_secs(5 << (*n - 1)).min(Duration::from_secs(300))
    }

    pub fn succeeded(&self, key: &str) {
        self.failures.lock().expect("lock").remove(key);
    }
}

/// When a pass skipped as [`Context::already_written`] looks again if the watch has not
/// woken it by then.
pub const STALE_RECHECK: Duration = Duration::from_secs(5);

/// Now, in whole seconds: the precision Kubernetes keeps in timestamps, so that what is
/// computed from a timestamp before it is written equals what is read back after.
pub fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).expect("now is a valid timestamp")
}

pub struct RunOptions {
    /// Watch one namespace only (None: all).
    pub namespace: Option<String>,
    pub prometheus_url: Option<String>,
    /// This replica's name, for events and the lease.
    pub instance: String,
}

fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What a failed pass does next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Retry {
    /// At once: a status decided from a stale copy runs again on the fresh object.
    Soon,
    /// The object cannot be reconciled as it is: retrying cannot fix it, a change of it
    /// (which wakes its controller) can.
    AwaitChange,
    /// Later, longer each time ([`Context::backoff`]): an API server that refused or did
    /// not answer may answer later (an RBAC rule restored, a quota freed).
    BackOff,
}

fn retry(err: &Error) -> Retry {
    match err {
        Error::InvalidObject(_) => Retry::AwaitChange,
        _ if err.kind() == "conflict" => Retry::Soon,
        _ => Retry::BackOff,
    }
}

/// The common error policy: log, count, then [`retry`].
fn on_error<K: Resource<DynamicType = ()>>(
    controller: &'static str,
    obj: &K,
    err: &Error,
    ctx: &Context,
) -> Action {
    ctx.metrics
        .reconcile_error(controller, err.step(), err.kind());
    let name = name_of_meta(obj.meta());
    match retry(err) {
        Retry::Soon => {
            debug!(%controller, %name, "decided from a stale copy; again on the fresh object");
            Action::requeue(std::time::Duration::from_millis(200))
        }
        Retry::AwaitChange => {
            warn!(%controller, %name, error = %err, "cannot be reconciled as it is: waiting for a change of it");
            Action::await_change()
        }
        Retry::BackOff => {
            let key = obj.meta().uid.clone().unwrap_or_default();
            let wait = ctx.backoff(&key);
            warn!(%controller, %name, error = %err, retry_in = ?wait, "reconcile failed");
            Action::requeue(wait)
        }
    }
}

/// namespace/name of an object's metadata.
fn name_of_meta(m: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default()
    )
}

/// Runs the three controllers until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run(
    client: Client,
    opts: &RunOptions,
    metrics: Arc<OperatorMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let pod_monitors = pod_monitor::served(&client).await;
    if !pod_monitors {
        warn!(
            "the PodMonitor kind (prometheus-operator) is not served: trials will not be scraped unless Prometheus finds them otherwise"
        );
    }
    let managed =
        watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGER));
    // The trial controller's watch of its pods fills a store (kube-runtime 5.0.0
    // Controller::owns_stream, unstable-runtime-stream-control): a trial following its
    // pod reads it there, not with a GET per pass (issue 23: 85 pod GETs per trial).
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (pods_listed, pods_ready) = tokio::sync::watch::channel(false);
    let pod_events = watcher(api::<Pod>(&client, &opts.namespace), managed)
        .default_backoff()
        .modify(|p| p.managed_fields_mut().clear())
        .reflect(pod_writer)
        .inspect(move |e| listed(e, &pods_listed))
        .touched_objects();
    let (nodes, node_writer) = reflector::store::<Node>();
    let node_watch = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(slim_node)
        .reflect(node_writer)
        .for_each(|r| {
            // Without `watch` on nodes (an older chart's RBAC) the store stays empty and a
            // trial reads its node with a GET instead (trial/observe.rs).
            if let Err(e) = r {
                warn!(error = %e, "watching nodes");
            }
            futures::future::ready(())
        });
    // One watch of the trials, shared by both controllers (issue 23: each had its own,
    // the trial controller's store a second copy of every trial, managedFields and all).
    // It fills one store, then wakes the trial that changed (the trial controller's
    // trigger, as Controller::new's own watch did: applied objects) and the experiment
    // that owns it (a channel of the event's metadata; touched objects, deletes
    // included). The store is updated before either wake-up, so a pass reads the change
    // that woke it. kube-runtime 5.0.0 src/controller/mod.rs Controller::for_stream,
    // owns_stream (unstable-runtime-stream-control); its shared streams
    // (reflector::store_shared) pass no deletes to a subscriber (src/reflector/store.rs
    // `dispatch_event`), which the experiment needs.
    let (trial_store, trial_writer) = reflector::store::<ValidatorTrial>();
    let (owner_tx, owner_rx) = futures::channel::mpsc::unbounded();
    let (trials_listed, trials_ready) = tokio::sync::watch::channel(false);
    let trial_events = watcher(
        api::<ValidatorTrial>(&client, &opts.namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(|t| t.managed_fields_mut().clear())
    .reflect(trial_writer)
    .inspect(move |e| {
        listed(e, &trials_listed);
        if let Ok(e) = e {
            let _ = owner_tx.unbounded_send(Ok(metadata_of(e)));
        }
    })
    .applied_objects();
    let trial_owners = owner_rx.touched_objects();
    let ctx = Arc::new(Context {
        client: client.clone(),
        prometheus_url: opts.prometheus_url.clone(),
        http: crate::results::prometheus::http_client(),
        events: events::Events::new(client.clone(), "valtune", &opts.instance),
        pod_monitors,
        applied_monitors: Mutex::default(),
        reported: Mutex::default(),
        failures: Mutex::default(),
        preflight: preflight::Cache::default(),
        metrics,
        pods,
        pods_ready,
        nodes,
        status_written: Mutex::default(),
        written_from: Mutex::default(),
        trials: trial_store,
        trials_ready,
        created: Mutex::default(),
    });
    let (tx, rx) = tokio::sync::watch::channel(false);
    let stop = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let experiment_controller = Controller::new(
        api::<ValidatorExperiment>(&client, &opts.namespace),
        watcher::Config::default(),
    );
    ctx.metrics.watch_experiments(experiment_controller.store());
    let experiments = experiment_controller
        .owns_stream(trial_owners)
        .graceful_shutdown_on(stop(rx.clone()))
        .run(
            experiment::reconcile,
            |vx, err, ctx| on_error("experiment", vx.as_ref(), err, &ctx),
            ctx.clone(),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "experiment reconcile");
            }
        });

    let trial_controller = Controller::for_stream(trial_events, ctx.trials.clone());
    ctx.metrics.watch_trials(trial_controller.store());
    let trials = trial_controller
        .owns_stream(pod_events)
        .graceful_shutdown_on(stop(rx.clone()))
        .run(
            trial::reconcile,
            |t, err, ctx| on_error("trial", t.as_ref(), err, &ctx),
            ctx.clone(),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "trial reconcile");
            }
        });

    let validators = validator::watching(
        Controller::new(
            api::<Validator>(&client, &opts.namespace),
            watcher::Config::default(),
        ),
        api::<ValidatorExperiment>(&client, &opts.namespace),
        &ctx.metrics,
    )
    .owns(
        api::<Pod>(&client, &opts.namespace),
        watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGER)),
    )
    .graceful_shutdown_on(stop(rx.clone()))
    .run(
        validator::reconcile,
        |v, err, ctx| on_error("validator", v.as_ref(), err, &ctx),
        ctx.clone(),
    )
    .for_each(|r| async move {
        if let Err(e) = r {
            tracing::debug!(error = %e, "validator reconcile");
        }
    });

    info!(namespace = ?opts.namespace, "controllers started");
    // The node store is filled by a task of its own (no controller drives it).
    let node_task = tokio::spawn(node_watch);
    let controllers = futures::future::join3(experiments, trials, validators);
    tokio::pin!(controllers);
    tokio::select! {
        _ = &mut controllers => {}
        _ = shutdown => {
            info!("shutting down: letting in-flight reconciles finish");
            let _ = tx.send(true);
            let _ = tokio::time::timeout(Duration::from_secs(30), controllers).await;
        }
    }
    node_task.abort();
    Ok(())
}

/// Marks `ready` once a watch's first list is in its store: the reflector has swapped
/// the list in when its InitDone passes (kube-runtime 5.0.0 src/reflector/store.rs
/// `apply_watcher_event`). Not `Store::wait_until_ready`: its oneshot keeps only the last
/// waiter's waker (src/utils/delayed_init.rs `Get::poll`), and a controller's runner
/// already waits there on its own store (src/controller/mod.rs `applier`,
/// `delay_tasks_until`), so a second waiter on that store leaves one of the two asleep.
fn listed<K>(e: &watcher::Result<watcher::Event<K>>, ready: &tokio::sync::watch::Sender<bool>) {
    if matches!(e, Ok(watcher::Event::InitDone)) {
        let _ = ready.send(true);
    }
}

/// A watch event of trials as the experiments' trigger reads it: who owns the trial
/// (kube-runtime's `trigger_owners` reads the namespace and owner references), not its
/// spec and status.
fn metadata_of(
    e: &watcher::Event<ValidatorTrial>,
) -> watcher::Event<PartialObjectMeta<ValidatorTrial>> {
    let meta = |t: &ValidatorTrial| PartialObjectMeta {
        types: None,
        metadata: t.metadata.clone(),
        _phantom: Default::default(),
    };
    match e {
        watcher::Event::Apply(t) => watcher::Event::Apply(meta(t)),
        watcher::Event::Delete(t) => watcher::Event::Delete(meta(t)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(t) => watcher::Event::InitApply(meta(t)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// A node as the store keeps it: what a trial reads of it (that it exists, its labels,
/// capacity and system info) without the fields that make a node large on a real
/// cluster (status.images lists every image on it; managedFields every writer).
fn slim_node(n: &mut Node) {
    n.managed_fields_mut().clear();
    if let Some(status) = n.status.as_mut() {
        status.images = None;
    }
}

/// The name of an object for messages: namespace/name.
pub fn name_of<K: ResourceExt>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                message: message.into(),
                ..Default::default()
            }
            .boxed(),
        )
    }

    /// An object that cannot be reconciled as it is waits for a change of it; a stale
    /// copy runs again at once; anything else backs off.
    #[test]
    fn an_invalid_object_waits_for_a_change_and_other_errors_retry() {
        assert_eq!(
            retry(&Error::InvalidObject(
                "trial ns/t: spec.repetition: invalid value".into()
            )),
            Retry::AwaitChange
        );
        assert_eq!(
            retry(&Error::WriteStatus(
                "writing the status".into(),
                api(409, "conflict")
            )),
            Retry::Soon
        );
        assert_eq!(
            retry(&Error::ApplyRendered(
                "applying pod".into(),
                api(403, "forbidden")
            )),
            Retry::BackOff
        );
        assert_eq!(retry(&Error::WatchStopped("trials")), Retry::BackOff);
    }

    /// What retrying cannot fix ends the trial; what an admin or time can fix is retried.
    #[test]
    fn refusals_of_the_object_are_permanent_and_rbac_is_not() {
        assert!(is_permanent(&api(422, "spec.containers[0].image: Required value")).is_some());
        assert!(
            is_permanent(&api(
                403,
                r#"pods "t-1" is forbidden: pod rejected: RuntimeClass "nvidia" not found"#
            ))
            .is_some()
        );
        assert!(
            is_permanent(&api(
                403,
                r#"pods "t-1" is forbidden: User "system:serviceaccount:v:valtune" cannot patch resource "pods" in API group "" in the namespace "v""#
            ))
            .is_none()
        );
        assert!(
            is_permanent(&api(
                403,
                r#"pods "t-1" is forbidden: exceeded quota: compute, requested: cpu=64"#
            ))
            .is_none()
        );
        assert!(is_permanent(&api(409, "conflict")).is_none());
        assert!(is_permanent(&api(500, "etcd timeout")).is_none());
    }
}
