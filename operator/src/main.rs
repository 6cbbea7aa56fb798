//! The `valtune` command line: the operator, CRDs, reports, and offline analysis. Each
//! subcommand lives in its own module under cli/; this file parses and dispatches.

mod cli;

use clap::{Parser, Subcommand, ValueEnum};
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

#[derive(Subcommand)]
enum Command {
    /// Run the controllers (in a cluster, or against a kubeconfig).
    Operator(OperatorCommand),
    /// Print the CRDs as YAML, or write one file per kind into a directory.
    Crd(cli::crd::Args),
    /// Print an experiment's trials and results.
    Report(cli::report::Args),
    /// Read a finished trial's window from Prometheus again (after an outage, say), without
    /// running it again: sets its `valtune.dev/collect` annotation and waits for the result.
    Collect(cli::collect::Args),
    /// Compute trial results from a Prometheus for one pod and time window (no cluster needed).
    Analyze(cli::analyze::Args),
    /// Print an experiment's trials, node-hours and wall-clock before anything runs.
    Plan(cli::plan::Args),
    /// Check that the cluster is ready for valtune's experiments; each failure says what
    /// to run to fix it.
    Check(cli::check::Args),
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
    match Cli::parse().command {
        Command::Operator(cmd) => {
            init_logging(cmd.log_format);
            runtime::operator(cmd.args).await
        }
        Command::Crd(args) => cli::crd::run(args),
        Command::Report(args) => cli::report::run(args).await,
        Command::Collect(args) => cli::collect::run(args).await,
        Command::Analyze(args) => cli::analyze::run(args).await,
        Command::Plan(args) => cli::plan::run(args),
        Command::Check(args) => cli::check::run(args).await,
    }
}
