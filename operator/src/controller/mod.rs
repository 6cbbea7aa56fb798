//! The reconcilers. Each follows the same pipeline: fetch what exists, decide (pure),
//! apply children with server-side apply, write status. Every deadline lives in status
//! as a timestamp, so a restarted operator resumes exactly where the last one stopped.

pub mod experiment;
pub mod leader;
pub mod status;
pub mod trial;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource};
use tracing::{info, warn};

use crate::api::{ValidatorExperiment, ValidatorTrial, labels};
use crate::clients::RenderError;
use crate::metrics::prometheus::PromError;
use crate::telemetry::OperatorMetrics;

/// The field manager of everything valtune applies.
pub const MANAGER: &str = "valtune";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Prometheus(#[from] PromError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// A short label for the errors-by-kind metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "kube",
            Error::Prometheus(_) => "prometheus",
            Error::Render(_) => "render",
            Error::Invalid(_) => "invalid",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub struct Context {
    pub client: Client,
    /// Prometheus to read results from, unless an experiment names its own.
    pub prometheus_url: Option<String>,
    pub recorder: Recorder,
    /// Whether prometheus-operator's PodMonitor kind is served (checked at start).
    pub pod_monitors: bool,
    pub metrics: Arc<OperatorMetrics>,
}

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

/// Runs both controllers until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run(
    client: Client,
    opts: &RunOptions,
    metrics: Arc<OperatorMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let pod_monitors = crate::monitoring::pod_monitor_served(&client).await;
    if !pod_monitors {
        warn!(
            "the PodMonitor kind (prometheus-operator) is not served: trials will not be scraped unless Prometheus finds them otherwise"
        );
    }
    let ctx = Arc::new(Context {
        client: client.clone(),
        prometheus_url: opts.prometheus_url.clone(),
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "valtune".into(),
                instance: Some(opts.instance.clone()),
            },
        ),
        pod_monitors,
        metrics,
    });
    let managed =
        watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGER));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let stop = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let experiments = Controller::new(
        api::<ValidatorExperiment>(&client, &opts.namespace),
        watcher::Config::default(),
    )
    .owns(
        api::<ValidatorTrial>(&client, &opts.namespace),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(stop(rx.clone()))
    .run(experiment::reconcile, experiment::error_policy, ctx.clone())
    .for_each(|r| async move {
        if let Err(e) = r {
            tracing::debug!(error = %e, "experiment reconcile");
        }
    });

    let trial_controller = Controller::new(
        api::<ValidatorTrial>(&client, &opts.namespace),
        watcher::Config::default(),
    );
    ctx.metrics.watch_trials(trial_controller.store());
    let trials = trial_controller
        .owns(api::<Pod>(&client, &opts.namespace), managed.clone())
        .owns(
            api::<PersistentVolumeClaim>(&client, &opts.namespace),
            managed,
        )
        .graceful_shutdown_on(stop(rx.clone()))
        .run(trial::reconcile, trial::error_policy, ctx.clone())
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "trial reconcile");
            }
        });

    info!(namespace = ?opts.namespace, "controllers started");
    let controllers = futures::future::join(experiments, trials);
    tokio::pin!(controllers);
    tokio::select! {
        _ = &mut controllers => {}
        _ = shutdown => {
            info!("shutting down: letting in-flight reconciles finish");
            let _ = tx.send(true);
            let _ = tokio::time::timeout(Duration::from_secs(30), controllers).await;
        }
    }
    Ok(())
}
