use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// valtune: deploy validators on Kubernetes and find out, with numbers, what they need.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CRDs as YAML, or write one file per kind into a directory.
    Crd {
        /// Write `<plural>.yaml` files here instead of printing.
        #[arg(long)]
        out_dir: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { out_dir } => write_crds(out_dir),
    }
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
