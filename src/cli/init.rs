//! `r2e init`.

use std::process::ExitCode;

use r2e_core::error::Result;

use super::args::{PipelineFile, help_of};

/// Write a commented `pipeline.toml` for folders, git URLs or PyPI releases
///
/// Write a commented `pipeline.toml` with a `[[repo]]` per argument: a folder (`path`), a
/// git URL (`git`: `https://`, `ssh://`, `git@host:path`, `file://`, or ending in `.git`)
/// or `pypi:NAME==VERSION` (`pypi`), with the main settings and their defaults. The file is
/// checked as `r2e build` reads it before it is written, and an existing one is never
/// overwritten (exit 2).
#[derive(clap::Args)]
#[command(mut_args(help_of("pipeline", "The pipeline file to write")))]
pub struct Args {
    /// The repositories: folders, git URLs, `pypi:NAME==VERSION`.
    #[arg(value_name = "PATH|URL|pypi:NAME==VERSION", required = true)]
    repos: Vec<String>,
    #[command(flatten)]
    pipeline: PipelineFile,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let pipeline = &args.pipeline.pipeline;
    crate::init::init(pipeline, &args.repos)?;
    eprintln!(
        "wrote {}; build it with `r2e build {}`",
        pipeline.display(),
        pipeline.display()
    );
    Ok(ExitCode::SUCCESS)
}
