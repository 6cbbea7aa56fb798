//! `valtune operator`: the process around the controllers: health, readiness and
//! metrics server, waiting for the CRDs, the leader Lease, signals.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use kube::Client;
use kube::api::{Api, ListParams};
use tracing::{error, info, warn};

use crate::api::ValidatorExperiment;
use crate::controller::{self, RunOptions, leader::LeaderElection};
use crate::operator_metrics::OperatorMetrics;

/// The operator's settings (flags and env).
#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, env = "VALTUNE_NAMESPACE")]
    pub namespace: Option<String>,
    /// Prometheus to read results from (experiments may name their own).
    #[arg(long, env = "VALTUNE_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "VALTUNE_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Namespace of the leader Lease (default: --namespace, else POD_NAMESPACE, else default).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Name of the leader Lease (replicas sharing it elect one leader).
    #[arg(long, default_value = "valtune-operator")]
    pub lease_name: String,
    /// How long a lease lasts without renewal.
    #[arg(long, default_value = "15s")]
    pub lease_duration: String,
    /// Reconcile without a lease (only when one replica runs).
    #[arg(long)]
    pub no_leader_election: bool,
}

pub async fn operator(args: OperatorArgs) -> anyhow::Result<()> {
    let lease_duration =
        crate::api::settings::parse_duration(&args.lease_duration).context("--lease-duration")?;
    let lease_namespace = args
        .namespace
        .clone()
        .or(args.lease_namespace.clone())
        .unwrap_or_else(|| "default".into());
    let client = Client::try_default()
        .await
        .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?;
    let metrics = Arc::new(OperatorMetrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });

    let server = serve(args.listen, metrics.clone(), ready.clone()).await?;
    tokio::spawn(server);

    let election = (!args.no_leader_election).then(|| {
        LeaderElection::new(
            client.clone(),
            &lease_namespace,
            &args.lease_name,
            &identity,
            lease_duration,
        )
    });
    let signal = shutdown_signal();
    tokio::pin!(signal);
    // Nothing to reconcile (and watches would fail) until valtune's kinds are served.
    tokio::select! {
        _ = wait_for_crds(client.clone(), args.namespace.clone(), ready.clone()) => {}
        _ = &mut signal => return Ok(()),
    }
    if let Some(url) = &args.prometheus_url {
        startup_checks(url, &metrics).await;
    }
    if let Some(e) = &election {
        tokio::select! {
            r = e.acquire() => r?,
            _ = &mut signal => return Ok(()),
        }
    }
    let opts = RunOptions {
        namespace: args.namespace,
        prometheus_url: args.prometheus_url,
        instance: identity,
    };
    let lost = async {
        match &election {
            Some(e) => e.hold().await,
            None => std::future::pending().await,
        }
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let run = controller::run(client.clone(), &opts, metrics, async move {
        let _ = stop_rx.await;
    });
    tokio::pin!(run);
    let mut lost_lease = false;
    tokio::select! {
        r = &mut run => r?,
        _ = &mut signal => {
            let _ = stop_tx.send(());
            run.await?;
        }
        _ = lost => {
            lost_lease = true;
            let _ = stop_tx.send(());
            run.await?;
        }
    }
    if let Some(e) = &election
        && !lost_lease
    {
        e.release().await;
    }
    if lost_lease {
        anyhow::bail!("lost the leader lease; exiting so a fresh process can compete for it");
    }
    info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    info!("shutdown requested");
}

/// What `valtune check` asks of the default Prometheus: does it answer, is its
/// remote-write receiver on? Logged with the fix and kept in `valtune_check_failing`;
/// experiments whose client needs the receiver also wait with a condition
/// (controller/preflight.rs). Never fatal: a Prometheus may come up after the operator.
async fn startup_checks(url: &str, metrics: &OperatorMetrics) {
    use crate::check::{Status, prometheus::Reach};
    let reach = Reach::direct(crate::results::prometheus::http_client(), url);
    for f in crate::check::prometheus_findings(&reach, Some((&reach, "/api/v1/write"))).await {
        metrics.check_result(f.check, f.status == Status::Fail);
        let fix = f.fix.clone().unwrap_or_default();
        match f.status {
            Status::Pass => info!(check = f.check, "{}", f.detail),
            Status::Warn => warn!(check = f.check, fix = %fix, "{}", f.detail),
            Status::Fail => error!(check = f.check, fix = %fix, "{}", f.detail),
        }
    }
}

/// Ready once the API server serves valtune's kinds.
async fn wait_for_crds(client: Client, namespace: Option<String>, ready: Arc<AtomicBool>) {
    let lp = ListParams::default().limit(1);
    loop {
        let api: Api<ValidatorExperiment> = match &namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        match api.list(&lp).await {
            Ok(_) => {
                ready.store(true, Ordering::SeqCst);
                info!("valtune's CRDs are served; ready");
                return;
            }
            Err(e) => {
                error!(error = %e, "valtune's CRDs are not served yet: install them with `kubectl apply --server-side -f crds/`; waiting")
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}

async fn serve(
    addr: SocketAddr,
    metrics: Arc<OperatorMetrics>,
    ready: Arc<AtomicBool>,
) -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready.load(Ordering::SeqCst) {
                        (StatusCode::OK, "ok")
                    } else {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "valtune's CRDs are not served yet",
                        )
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            "content-type",
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.encode(),
                    )
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr} (--listen)"))?;
    info!(%addr, "serving /healthz, /readyz and /metrics");
    Ok(async move {
        if let Err(e) = axum::serve(listener, app).await {
            error!(error = %e, "health server stopped");
        }
    })
}
