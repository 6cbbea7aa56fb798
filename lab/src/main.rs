use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use valtune_lab::compress::Compression;
use valtune_lab::control_plane::{self, UpOptions};
use valtune_lab::kubelet::faults::{self, Fault};
use valtune_lab::state::LabState;

/// valtune's local lab: a real control plane with simulated bare-metal nodes.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a lab (or report the one running in --dir).
    Up {
        /// Where the lab keeps its state, kubeconfig and logs.
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        /// Directory with the control-plane binaries (hack/tools/build.sh prints it).
        #[arg(long, env = "VALTUNE_TOOLS_BIN")]
        tools: PathBuf,
        /// Nodes to simulate.
        #[arg(long, default_value = "lab/topology.yaml")]
        topology: PathBuf,
        /// Simulated seconds per real second for validator workloads.
        #[arg(long, default_value_t = 720.0)]
        time_scale: f64,
        /// How often Prometheus scrapes pods.
        #[arg(long, default_value = "1s")]
        scrape_interval: String,
        /// The valtune binary to run for pods of valtune's image (default: the one
        /// beside this program, e.g. target/debug/valtune).
        #[arg(long, env = "VALTUNE_EXE")]
        valtune: Option<PathBuf>,
        /// Also run Argo CD (repo-server, application-controller, Redis, git
        /// repositories); added to the lab if it runs already.
        #[arg(long)]
        argocd: bool,
        /// Directory with Argo CD's build (hack/tools/build-argocd.sh prints it).
        #[arg(long, env = "VALTUNE_ARGOCD_DIR")]
        argocd_dir: Option<PathBuf>,
    },
    /// Stop the lab's processes and remove its state.
    Down {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        /// Keep logs, etcd and Prometheus data.
        #[arg(long)]
        keep: bool,
    },
    /// Print shell exports for using the lab (KUBECONFIG, PROMETHEUS_URL, ...).
    Env {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
    },
    /// Start a process as part of the lab (detached, logged to logs/NAME.log), so that
    /// `down` stops it too; e.g. the operator `make demo` runs against the lab.
    Spawn {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        #[arg(long)]
        name: String,
        /// The program and its arguments (after --).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Stop or start the lab's Prometheus (its data stays), to see how valtune rides out
    /// an outage.
    Prometheus {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        #[arg(value_parser = ["stop", "start"])]
        action: String,
    },
    /// Print experiments as the lab runs them: durations divided by its time scale (with
    /// floors for its real-time steps) and its scrape interval (lab/src/compress.rs). For
    /// `kubectl apply -f -`; the files stay as written for a real cluster.
    Compress {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        /// Simulated seconds per real second (default: the lab's in --dir).
        #[arg(long)]
        time_scale: Option<f64>,
        /// The lab Prometheus' scrape interval (default: the lab's in --dir).
        #[arg(long)]
        scrape_interval: Option<String>,
        /// Experiment files (YAML, one or more documents each).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Inject a fault into the lab's nodes through its kubelet (docs/lab.md, "Faults"):
    /// a node that stops answering, a blocked port, an image the registry refuses, a
    /// container's process killed or OOM-killed.
    Fault {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        #[command(subcommand)]
        fault: FaultCommand,
    },
    /// Check the lab's signing record (every signature its validators made) for two
    /// signers of one identity and broken lockouts; exit 1 on any violation.
    Signing {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
        /// Only stretches of these identities (all when none given).
        #[arg(long)]
        identity: Vec<String>,
    },
    /// Print a keypair file as solana-keygen writes it (64 bytes, a JSON array), made up
    /// from NAME (the same name, the same key), for the Secrets of the lab's validators:
    /// `kubectl create secret generic NAME --from-literal=keypair="$(valtune-lab keypair
    /// NAME)"`. The lab's validators read the public key from its last 32 bytes; it is not
    /// an ed25519 key a real validator could sign with.
    Keypair {
        name: String,
        /// Print its public key (base58) instead.
        #[arg(long)]
        pubkey: bool,
    },
    /// Run the simulator in the foreground (`up` starts it).
    Sim {
        #[arg(long, env = "VALTUNE_LAB_DIR", default_value = ".lab")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum FaultCommand {
    /// The node's kubelet stops answering: no status, no Lease, no heartbeats; its pods
    /// run on, as on a machine cut off from the API server.
    StopNode {
        node: String,
        /// The machine is off: its processes are gone too (its disks stay).
        #[arg(long)]
        off: bool,
    },
    /// The node's kubelet answers again.
    StartNode { node: String },
    /// Drop connections to PORT on NODE (its address and its pods'), or refuse them.
    Block {
        node: String,
        port: u16,
        /// Refuse (connection refused) rather than drop.
        #[arg(long)]
        reject: bool,
    },
    /// Open PORT on NODE again.
    Unblock { node: String, port: u16 },
    /// The registry refuses IMAGE: its pulls fail (ErrImagePull, then ImagePullBackOff).
    FailImage { image: String },
    /// The registry serves IMAGE again.
    FixImage { image: String },
    /// SIGKILL of a container's process (exit 137); the kubelet restarts it as its
    /// pod's policy says.
    Kill {
        /// NAMESPACE/POD
        pod: String,
        container: String,
    },
    /// The kernel's OOM kill of a container's process (OOMKilled, 137).
    Oom {
        /// NAMESPACE/POD
        pod: String,
        container: String,
    },
}

impl FaultCommand {
    fn fault(self) -> anyhow::Result<Fault> {
        let pod = |p: String| -> anyhow::Result<(String, String)> {
            let (ns, name) = p
                .split_once('/')
                .with_context(|| format!("{p}: give the pod as NAMESPACE/POD"))?;
            Ok((ns.to_string(), name.to_string()))
        };
        Ok(match self {
            FaultCommand::StopNode { node, off } => Fault::StopNode { node, off },
            FaultCommand::StartNode { node } => Fault::StartNode { node },
            FaultCommand::Block { node, port, reject } => Fault::Block { node, port, reject },
            FaultCommand::Unblock { node, port } => Fault::Unblock { node, port },
            FaultCommand::FailImage { image } => Fault::FailImage { image },
            FaultCommand::FixImage { image } => Fault::FixImage { image },
            FaultCommand::Kill { pod: p, container } => {
                let (namespace, pod) = pod(p)?;
                Fault::Kill {
                    namespace,
                    pod,
                    container,
                }
            }
            FaultCommand::Oom { pod: p, container } => {
                let (namespace, pod) = pod(p)?;
                Fault::Oom {
                    namespace,
                    pod,
                    container,
                }
            }
        })
    }
}

// More workers than cores: the simulator replays its validators' slots on the runtime (the
// Agave program cache, tens of milliseconds per pod and datapoint), and a kubelet's or an
// exporter's answer must not wait behind that for a free worker, as on a busy machine
// two workers would make it (a real validator's RPC does not wait on another's replay).
#[tokio::main(worker_threads = 8)]
async fn main() -> anyhow::Result<()> {
    // A sidecar's `nsenter` (sim/nsenter.rs): busybox's arguments, not this CLI's.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(valtune_lab::sim::nsenter::SUBCOMMAND) {
        std::process::exit(valtune_lab::sim::nsenter::main(&args[2..]));
    }
    let cli = Cli::parse();
    valtune_lab::init_crypto();
    match cli.command {
        Command::Up {
            dir,
            tools,
            topology,
            time_scale,
            scrape_interval,
            valtune,
            argocd,
            argocd_dir,
        } => {
            let argocd_dir = match (argocd, argocd_dir) {
                (false, _) => None,
                (true, Some(d)) => Some(d),
                (true, None) => anyhow::bail!(
                    "--argocd needs Argo CD's build: pass --argocd-dir (or VALTUNE_ARGOCD_DIR) \
                     with the directory hack/tools/build-argocd.sh prints"
                ),
            };
            let state = control_plane::up(&UpOptions {
                dir,
                tools,
                topology,
                time_scale,
                scrape_interval,
                lab_exe: std::env::current_exe()?,
                valtune,
            })
            .await?;
            if let Some(argocd_dir) = argocd_dir {
                valtune_lab::argocd::up(&state.dir, &argocd_dir).await?;
            }
            print_env(&state);
            Ok(())
        }
        Command::Down { dir, keep } => control_plane::down(&dir, keep),
        Command::Spawn { dir, name, command } => {
            let pid = control_plane::spawn_into(&dir, &name, &command)?;
            eprintln!(
                "[lab] started {name} (pid {pid}); logs in {}/logs/{name}.log",
                dir.display()
            );
            Ok(())
        }
        Command::Prometheus { dir, action } => {
            if action == "stop" {
                control_plane::stop_one(&dir, "prometheus")?;
                eprintln!("[lab] Prometheus stopped (its data is kept)");
            } else {
                control_plane::start_again(&dir, "prometheus")?;
                eprintln!("[lab] Prometheus started again");
            }
            Ok(())
        }
        Command::Compress {
            dir,
            time_scale,
            scrape_interval,
            files,
        } => {
            let c = compression(&dir, time_scale, scrape_interval)?;
            for file in files {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                print!(
                    "{}",
                    c.yaml(&text)
                        .with_context(|| format!("compressing {}", file.display()))?
                );
            }
            Ok(())
        }
        Command::Signing { dir, identity } => {
            use valtune_lab::sim::signing;
            let path = signing::path_in(&dir);
            let mut record = signing::read(&path)?;
            if !identity.is_empty() {
                record.retain(|s| identity.contains(&s.identity));
            }
            let violations = signing::check::check(&record);
            eprintln!(
                "[lab] {}: {} stretches, {} violations",
                path.display(),
                record.len(),
                violations.len()
            );
            for v in &violations {
                println!("{v}");
            }
            if !violations.is_empty() {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Keypair { name, pubkey } => {
            use valtune_lab::sim::clients::{agave::identity::base58, mix, seed};
            let s = seed(&name);
            let bytes: Vec<u8> = (0..64u64).map(|i| mix(s ^ i) as u8).collect();
            if pubkey {
                println!("{}", base58(&bytes[32..]));
            } else {
                println!("{}", serde_json::to_string(&bytes)?);
            }
            Ok(())
        }
        Command::Env { dir } => {
            print_env(&LabState::load(&dir)?);
            Ok(())
        }
        Command::Fault { dir, fault } => {
            let said = faults::send(&dir, &fault.fault()?).await?;
            eprintln!("[lab] {said}");
            Ok(())
        }
        Command::Sim { dir } => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .init();
            let state = LabState::load(&dir)?;
            valtune_lab::sim::run(state).await
        }
    }
}

/// The lab's compression, with the flags given in place of its settings.
fn compression(
    dir: &std::path::Path,
    time_scale: Option<f64>,
    scrape_interval: Option<String>,
) -> anyhow::Result<Compression> {
    let lab = match (time_scale, &scrape_interval) {
        (Some(_), Some(_)) => None,
        _ => Some(LabState::load(dir).with_context(|| {
            "pass --time-scale and --scrape-interval, or --dir of a running lab".to_string()
        })?),
    };
    let mut c = match &lab {
        Some(state) => Compression::of(state)?,
        None => Compression {
            time_scale: 1.0,
            scrape_interval: std::time::Duration::from_secs(1),
        },
    };
    if let Some(t) = time_scale {
        anyhow::ensure!(t >= 1.0, "--time-scale must be at least 1");
        c.time_scale = t;
    }
    if let Some(s) = scrape_interval {
        c.scrape_interval = valtune_lab::compress::parse(&s).context("--scrape-interval")?;
    }
    Ok(c)
}

fn print_env(state: &LabState) {
    println!("export KUBECONFIG={}", state.kubeconfig.display());
    println!("export VALTUNE_LAB_DIR={}", state.dir.display());
    println!("export PROMETHEUS_URL={}", state.prometheus_url);
    if !state.prometheus_no_receiver_url.is_empty() {
        // The lab's second Prometheus, without the remote-write receiver.
        println!(
            "export PROMETHEUS_NO_RECEIVER_URL={}",
            state.prometheus_no_receiver_url
        );
    }
    if !state.prometheus_outage_url.is_empty() {
        // The lab's third Prometheus, which outage tests stop.
        println!(
            "export PROMETHEUS_OUTAGE_URL={}",
            state.prometheus_outage_url
        );
    }
}
