//! The `valtune` command line: the operator, CRDs, reports, and offline analysis.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use kube::Client;
use kube::api::{Api, ListParams};
use valtune::api::{ValidatorExperiment, ValidatorTrial, labels};
use valtune::results::dataset::Dataset;
use valtune::runtime::{self, OperatorArgs};

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
    Operator(OperatorCommand),
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
    /// Read a finished trial's window from Prometheus again (after an outage, say), without
    /// running it again: sets its `valtune.dev/collect` annotation and waits for the result.
    Collect {
        trial: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// How long to wait for the new result (0: do not wait).
        #[arg(long, default_value = "10m")]
        wait: String,
    },
    /// Compute trial results from a Prometheus for one pod and time window (no cluster needed).
    Analyze {
        #[arg(long, env = "PROMETHEUS_URL")]
        prometheus_url: String,
        /// The client whose metric profile to read (agave, firedancer, besu, nodeos).
        #[arg(long, default_value = "agave")]
        client: String,
        /// The client version, where metric names depend on it.
        #[arg(long)]
        client_version: Option<String>,
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
        /// Kept up at or below this lag (default: the client's).
        #[arg(long)]
        max_lag: Option<i64>,
    },
}

#[derive(clap::Args)]
struct OperatorCommand {
    #[command(flatten)]
    args: OperatorArgs,
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
        Command::Operator(cmd) => {
            init_logging(cmd.log_format);
            runtime::operator(cmd.args).await
        }
        Command::Crd { out_dir } => write_crds(out_dir),
        Command::Report {
            experiment,
            namespace,
            format,
        } => report(&experiment, &namespace, format).await,
        Command::Collect {
            trial,
            namespace,
            wait,
        } => collect(&trial, &namespace, &wait).await,
        Command::Analyze {
            prometheus_url,
            client,
            client_version,
            namespace,
            pod,
            start,
            end,
            step,
            max_lag,
        } => {
            analyze(
                &prometheus_url,
                &client,
                client_version,
                &namespace,
                &pod,
                (start, end),
                &step,
                max_lag,
            )
            .await
        }
    }
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
    let list = valtune::report::sorted(trials.list(&lp).await?.items, &vx.spec.sweep);
    let data = Dataset::from_trials(&vx.spec.sweep, &list);
    let client = valtune::clients::client_for(&vx.spec.template)?;
    let layout = client.report(&vx.spec.template, &vx.spec.sweep);
    match format {
        ReportFormat::Table => {
            print!("{}", valtune::report::table(&data, &layout));
            print!("{}", valtune::report::coverage_notes(&list));
            println!();
            print!("{}", valtune::report::summary(&vx));
            for note in client.report_notes(&list) {
                println!("{note}");
            }
        }
        ReportFormat::Csv => print!("{}", valtune::report::csv(&data, &layout)),
        ReportFormat::Json => {
            let rows: Vec<_> = list
                .iter()
                .map(|t| serde_json::json!({"trial": t.metadata.name, "point": t.spec.point, "repetition": t.spec.repetition, "status": t.status}))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"experiment": vx.status, "trials": rows, "notes": client.report_notes(&list)})
                )?
            );
        }
    }
    Ok(())
}

async fn collect(trial: &str, namespace: &str, wait: &str) -> anyhow::Result<()> {
    use kube::api::{Patch, PatchParams};
    let wait = valtune::api::settings::parse_duration(wait).context("--wait")?;
    let client = Client::try_default()
        .await
        .context("connecting to Kubernetes")?;
    let api: Api<ValidatorTrial> = Api::namespaced(client, namespace);
    let t = api
        .get_opt(trial)
        .await?
        .with_context(|| format!("no ValidatorTrial {trial} in namespace {namespace}"))?;
    let st = t.status.clone().unwrap_or_default();
    anyhow::ensure!(
        st.phase.is_finished(),
        "trial {trial} is {:?}: only a finished trial is collected again",
        st.phase
    );
    let token = jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {labels::COLLECT: token}}});
    api.patch(trial, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("annotating trial {trial}"))?;
    eprintln!(
        "asked the operator to collect {namespace}/{trial} again ({}={token})",
        labels::COLLECT
    );
    if wait.is_zero() {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + wait;
    loop {
        let st = api.get(trial).await?.status.unwrap_or_default();
        if st.collected_for.as_deref() == Some(token.as_str()) && st.phase.is_finished() {
            println!(
                "{trial}: {} {}",
                st.outcome.map(|o| o.as_str()).unwrap_or("-"),
                st.message.unwrap_or_default()
            );
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "trial {trial} was not collected within {wait:?}: is the operator running? (kubectl describe vtrial {trial})"
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

#[allow(clippy::too_many_arguments)]
async fn analyze(
    url: &str,
    client: &str,
    version: Option<String>,
    namespace: &str,
    pod: &str,
    (start, end): (jiff::Timestamp, jiff::Timestamp),
    step: &str,
    max_lag: Option<i64>,
) -> anyhow::Result<()> {
    use valtune::results::analysis::{Window, collect, selector};
    anyhow::ensure!(end > start, "--end must be after --start");
    let step = valtune::api::settings::parse_duration(step).context("--step")?;
    let template: valtune::api::template::ValidatorTemplate = serde_json::from_value(
        serde_json::json!({client: {"image": "unknown", "version": version}}),
    )
    .with_context(|| format!("--client {client}: use agave, firedancer, besu or nodeos"))?;
    let profile = valtune::clients::client_for(&template)?.profile(&template);
    let prom = valtune::results::prometheus::Prometheus::new(url);
    let window = Window { start, end, step };
    let max_lag = max_lag.unwrap_or(profile.default_max_lag) as f64;
    match collect(&prom, &profile, &selector(namespace, pod), &window, max_lag).await? {
        Some(results) => println!("{}", serde_json::to_string_pretty(&results)?),
        None => anyhow::bail!(
            "Prometheus at {url} has no samples for {namespace}/{pod} in [{start}, {end}]"
        ),
    }
    Ok(())
}

fn write_crds(out_dir: Option<PathBuf>) -> anyhow::Result<()> {
    for (stem, crd) in valtune::crd::crds() {
        let yaml = valtune::crd::crd_yaml(&crd);
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
