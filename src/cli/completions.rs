//! `r2e completions`.

use std::process::ExitCode;

use r2e_core::error::Result;

use super::{Cli, print_text};

/// Print a shell's completion script: bash, zsh, fish, elvish or powershell
///
/// Print the completion script of a shell on stdout: bash (save it as
/// `~/.local/share/bash-completion/completions/r2e`), zsh (as `_r2e` in a folder of
/// `$fpath`), fish (as `~/.config/fish/completions/r2e.fish`), elvish or powershell.
#[derive(clap::Args)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut out = Vec::new();
    clap_complete::generate(
        args.shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "r2e",
        &mut out,
    );
    print_text(&String::from_utf8_lossy(&out))?;
    Ok(ExitCode::SUCCESS)
}
