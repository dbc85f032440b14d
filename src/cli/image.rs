//! `r2e image`: the `docker` sandbox backend's images.

use std::process::ExitCode;

use clap::Subcommand;
use r2e_core::error::Result;

use super::Global;
use super::args::{PipelineFile, help_of};

/// Docker images for the `docker` sandbox backend.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the docker backend's base image unless the daemon has it; print its tag
    ///
    /// Build the base image (the configured interpreter and the pinned coverage.py, from this
    /// machine's interpreter folder), unless the Docker daemon has it; print its tag.
    #[command(mut_args(help_of("pipeline", "The pipeline file (its `[env] python` and cache)")))]
    Base {
        #[command(flatten)]
        pipeline: PipelineFile,
    },
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let Command::Base { pipeline } = args.command;
    let cfg = pipeline.load()?;
    let services = global.services(&cfg);
    let (tag, built) = r2e_exec::image::base(&cfg, services.sandbox.as_ref())?;
    eprintln!(
        "{}",
        if built {
            "base image built"
        } else {
            "base image present"
        }
    );
    println!("{tag}");
    Ok(ExitCode::SUCCESS)
}
