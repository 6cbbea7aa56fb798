use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use kube::Client;
use kube::api::{Api, ListParams};
use tracing::{error, info};
use valtune::api::{ValidatorExperiment, ValidatorTrial, labels};
use valtune::controller::{self, RunOptions, leader::LeaderElection};
use valtune::telemetry::OperatorMetrics;

/// valtune: deploy validators on Kubernetes and find out, with numbers, what they need.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Table,
    Csv,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers (in a cluster, or against a kubeconfig).
    Operator(OperatorArgs),
    /// Print the CRDs as YAML, or write one file per kind into a directory.
    Crd {
        /// Write `<plural>.yaml` files here instead of printing.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
    /// Print an experiment's trials and results.
    Report {
        experiment: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[arg(long, value_enum, default_value = "table")]
        format: ReportFormat,
    },
    /// Compute trial results from a Prometheus for one pod and time window (no cluster needed).
    Analyze {
        #[arg(long, env = "PROMETHEUS_URL")]
        prometheus_url: String,
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        pod: String,
        /// Window start and end, RFC 3339.
        #[arg(long)]
        start: jiff::Timestamp,
        #[arg(long)]
        end: jiff::Timestamp,
        /// The scrape interval (one sample per step).
        #[arg(long, default_value = "15s")]
        step: String,
        #[arg(long, default_value_t = 100)]
        max_slot_lag: i64,
    },
}

#[derive(clap::Args)]
struct OperatorArgs {
    /// Watch this namespace only (default: all namespaces).
    #[arg(long, env = "VALTUNE_NAMESPACE")]
    namespace: Option<String>,
    /// Prometheus to read results from (experiments may name their own).
    #[arg(long, env = "VALTUNE_PROMETHEUS_URL")]
    prometheus_url: Option<String>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "VALTUNE_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Namespace of the leader Lease (default: --namespace, else POD_NAMESPACE, else default).
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    #[arg(long, default_value = "valtune-operator")]
    lease_name: String,
    /// How long a lease lasts without renewal.
    #[arg(long, default_value = "15s")]
    lease_duration: String,
    /// Reconcile without a lease (only when one replica runs).
    #[arg(long)]
    no_leader_election: bool,
    #[arg(long, value_enum, default_value = "text", env = "VALTUNE_LOG_FORMAT")]
    log_format: LogFormat,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Operator(args) => {
            init_logging(args.log_format);
            operator(args).await
        }
        Command::Crd { out_dir } => write_crds(out_dir),
        Command::Report {
            experiment,
            namespace,
            format,
        } => report(&experiment, &namespace, format).await,
        Command::Analyze {
            prometheus_url,
            namespace,
            pod,
            start,
            end,
            step,
            max_slot_lag,
        } => {
            analyze(
                &prometheus_url,
                &namespace,
                &pod,
                start,
                end,
                &step,
                max_slot_lag,
            )
            .await
        }
    }
}

async fn operator(args: OperatorArgs) -> anyhow::Result<()> {
    let lease_duration =
        valtune::api::settings::parse_duration(&args.lease_duration).context("--lease-duration")?;
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

async fn report(experiment: &str, namespace: &str, format: ReportFormat) -> anyhow::Result<()> {
    let client = Client::try_default()
        .await
        .context("connecting to Kubernetes")?;
    let vxs: Api<ValidatorExperiment> = Api::namespaced(client.clone(), namespace);
    let vx = vxs
        .get_opt(experiment)
        .await?
        .with_context(|| format!("no ValidatorExperiment {experiment} in namespace {namespace}"))?;
    let trials: Api<ValidatorTrial> = Api::namespaced(client, namespace);
    let lp = ListParams::default().labels(&format!("{}={experiment}", labels::EXPERIMENT));
    let list = valtune::report::sorted(trials.list(&lp).await?.items);
    match format {
        ReportFormat::Table => {
            print!("{}", valtune::report::table(&list));
            println!();
            print!("{}", valtune::report::summary(&vx));
        }
        ReportFormat::Csv => print!("{}", valtune::report::csv(&list)),
        ReportFormat::Json => {
            let rows: Vec<_> = list
                .iter()
                .map(|t| serde_json::json!({"trial": t.metadata.name, "point": t.spec.point, "repetition": t.spec.repetition, "status": t.status}))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"experiment": vx.status, "trials": rows})
                )?
            );
        }
    }
    Ok(())
}

async fn analyze(
    url: &str,
    namespace: &str,
    pod: &str,
    start: jiff::Timestamp,
    end: jiff::Timestamp,
    step: &str,
    max_slot_lag: i64,
) -> anyhow::Result<()> {
    use valtune::metrics::analysis::{Series, Window, collect, selector};
    anyhow::ensure!(end > start, "--end must be after --start");
    let step = valtune::api::settings::parse_duration(step).context("--step")?;
    let prom = valtune::metrics::prometheus::Prometheus::new(url);
    let series = Series::from_profile(
        &valtune::clients::agave::profile().queries,
        &selector(namespace, pod),
        step,
    )
    .map_err(anyhow::Error::msg)?;
    let window = Window { start, end, step };
    match collect(&prom, &series, &window, max_slot_lag).await? {
        Some(results) => println!("{}", serde_json::to_string_pretty(&results)?),
        None => anyhow::bail!(
            "Prometheus at {url} has no TPS samples for {namespace}/{pod} in [{start}, {end}]"
        ),
    }
    Ok(())
}

fn write_crds(out_dir: Option<PathBuf>) -> anyhow::Result<()> {
    for (stem, crd) in valtune::api::crds() {
        let yaml = valtune::api::crd_yaml(&crd);
        match &out_dir {
            Some(dir) => {
                let path = dir.join(format!("{stem}.yaml"));
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => {
                use std::io::Write;
                // A closed pipe (`valtune crd | head`) is not an error worth a panic.
                if let Err(e) = std::io::stdout().write_all(yaml.as_bytes()) {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(());
                    }
                    return Err(e.into());
                }
            }
        }
    }
    Ok(())
}
