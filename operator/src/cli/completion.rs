//! `valtune completion SHELL`: the shell's completion script for valtune (clap_complete).

use clap::CommandFactory;
use clap_complete::Shell;

#[derive(clap::Args)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

pub fn run<C: CommandFactory>(args: Args) -> anyhow::Result<()> {
    let mut cmd = C::command();
    clap_complete::generate(args.shell, &mut cmd, "valtune", &mut std::io::stdout());
    Ok(())
}
