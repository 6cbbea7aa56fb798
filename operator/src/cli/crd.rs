//! `valtune crd`: the CRDs as YAML, printed or one file per kind.

use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// Write `<plural>.yaml` files here instead of printing.
    #[arg(long)]
    out_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    for (stem, crd) in valtune::crd::crds() {
        let yaml = valtune::crd::crd_yaml(&crd);
        match &args.out_dir {
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
