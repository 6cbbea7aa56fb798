//! The `valtune` command line: the operator, CRDs, reports, and offline analysis. Each
//! subcommand lives in its own module under cli/; this file parses and dispatches.

mod cli;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use valtune::runtime::{self, OperatorArgs};

/// valtune: deploy validators on Kubernetes and find out, with numbers, what they need.
#[derive(Parser)]
#[command(name = "valtune", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line, for log collectors.
    Json,
}

/// The name kubectl runs the binary under as its plugin `kubectl valtune`: kubectl
/// executes `kubectl-<name>` from the PATH, with the path it found as argv[0]
/// (kubernetes v1.34.2, staging/src/k8s.io/kubectl/pkg/cmd/cmd.go, DefaultPluginHandler).
const PLUGIN_NAME: &str = "kubectl-valtune";

/// The command line, named as invoked: `kubectl valtune` in help and errors when run
/// as kubectl's plugin, `valtune` otherwise. Parsing is the same either way.
fn command(argv0: Option<&std::ffi::OsStr>) -> clap::Command {
    let cmd = Cli::command();
    let plugin = argv0
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == PLUGIN_NAME);
    if plugin {
        cmd.bin_name("kubectl valtune")
    } else {
        cmd.bin_name("valtune")
    }
}

/// Parses the arguments (argv[0] first), exiting with clap's message on an error.
fn parse(args: Vec<std::ffi::OsString>) -> Cli {
    let matches = command(args.first().map(|a| a.as_os_str())).get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers (in a cluster, or against a kubeconfig).
    Operator(OperatorCommand),
    /// Print the CRDs as YAML, or write one file per kind into a directory.
    Crd(cli::crd::Args),
    /// List the experiments: phase, trials done of expected, recommendation.
    List(cli::list::Args),
    /// Print an experiment's trials and results.
    Report(cli::report::Args),
    /// Print the recommended point as a merge patch of the experiment's spec.template,
    /// with the evidence; exits non-zero when there is none (yet).
    Recommend(cli::recommend::Args),
    /// Move a voting Agave or Frankendancer identity from the pair member that signs with
    /// it (the holder of its Lease) to the other member, either way (annotates the holder with
    /// valtune.dev/failover-to; the operator does the rest, step by step).
    Failover(cli::failover::Args),
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
    /// Print the shell completion script (e.g. `valtune completion bash >
    /// /etc/bash_completion.d/valtune`).
    Completion(cli::completion::Args),
}

#[derive(clap::Args)]
struct OperatorCommand {
    #[command(flatten)]
    args: OperatorArgs,
    /// How the operator logs.
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
    match parse(std::env::args_os().collect()).command {
        Command::Operator(cmd) => {
            init_logging(cmd.log_format);
            runtime::operator(cmd.args).await
        }
        Command::Crd(args) => cli::crd::run(args),
        Command::List(args) => cli::list::run(args).await,
        Command::Report(args) => cli::report::run(args).await,
        Command::Recommend(args) => cli::recommend::run(args).await,
        Command::Collect(args) => cli::collect::run(args).await,
        Command::Failover(args) => cli::failover::run(args).await,
        Command::Analyze(args) => cli::analyze::run(args).await,
        Command::Plan(args) => cli::plan::run(args),
        Command::Check(args) => cli::check::run(args).await,
        Command::Completion(args) => cli::completion::run::<Cli>(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<std::ffi::OsString> {
        line.split_whitespace().map(Into::into).collect()
    }

    #[test]
    fn the_cli_is_well_formed_and_every_argument_has_help() {
        let cmd = command(None);
        cmd.clone().debug_assert();
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && a.get_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {} (no about)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&cmd, "valtune", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn it_parses_the_same_as_kubectls_plugin_and_says_so_in_its_help() {
        for argv0 in ["valtune", "/home/me/.cargo/bin/kubectl-valtune"] {
            let cli = parse(args(&format!(
                "{argv0} recommend agave-ram -n validators --context lab -o json"
            )));
            let Command::Recommend(_) = cli.command else {
                panic!("{argv0}: not parsed as recommend");
            };
        }
        let usage = |argv0: &str| {
            command(Some(std::ffi::OsStr::new(argv0)))
                .try_get_matches_from(args(&format!("{argv0} report --help")))
                .unwrap_err()
                .to_string()
        };
        let plugin = usage("/usr/local/bin/kubectl-valtune");
        assert!(
            // The experiment is optional only with --from.
            plugin.contains("Usage: kubectl valtune report [OPTIONS] [EXPERIMENT]"),
            "{plugin}"
        );
        assert!(usage("valtune").contains("Usage: valtune report"));
        // A binary renamed otherwise (valtune-dev) stays valtune.
        assert!(usage("./valtune-dev").contains("Usage: valtune report"));
    }

    #[test]
    fn output_is_o_with_format_as_its_alias() {
        let parses = |line: &str| command(None).try_get_matches_from(args(line)).is_ok();
        assert!(parses("valtune report x -o wide"));
        assert!(parses("valtune report x --format csv"));
        assert!(parses("valtune report x --output yaml"));
        assert!(!parses("valtune report x -o pie"));
        assert!(parses("valtune list -A -o wide"));
        assert!(parses("valtune recommend x --format json"));
        assert!(!parses("valtune recommend x -o table"));
    }

    #[test]
    fn report_writes_a_directory_redraws_one_or_watches() {
        let parses = |line: &str| command(None).try_get_matches_from(args(line)).is_ok();
        assert!(parses(
            "valtune report x --out dir --prometheus-url http://p:9090"
        ));
        assert!(parses("valtune report --from dir"));
        // --from redraws a directory: no experiment, nothing else to write.
        assert!(!parses("valtune report x --from dir"));
        assert!(!parses("valtune report --from dir --out other"));
        assert!(!parses("valtune report"));
        assert!(parses("valtune report x -w --interval 5s --out dir"));
        assert!(!parses("valtune report x --interval 5s"));
        assert!(!parses("valtune report --from dir --watch"));
    }

    #[test]
    fn completion_scripts_name_the_subcommands() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "valtune", &mut out);
            let text = String::from_utf8(out).unwrap();
            for sub in ["recommend", "report", "list", "completion"] {
                assert!(text.contains(sub), "{shell:?}: {sub}");
            }
        }
    }
}
