//! `r2e dataset`: built datasets compared.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use r2e_core::config;
use r2e_core::error::{Error, Result};
use r2e_core::records::OutputFile;
use r2e_pipeline::engine;

use super::args::{PipelineFile, help_of};
use super::{print_json, print_text};

/// Work with built datasets.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the instances added, removed and changed between two manifests
    ///
    /// List the instances added, removed and changed between two manifests (`manifest.json`),
    /// the fields that changed for each, and apart the instances where only the commit moved.
    #[command(mut_args(help_of(
        "pipeline",
        "The pipeline whose output's manifest is NEW when NEW is not given"
    )))]
    Diff {
        /// The older manifest: a `manifest.json`, or the output folder holding it.
        old: PathBuf,
        /// The newer manifest (or its folder); default: the manifest of the pipeline's output.
        new: Option<PathBuf>,
        #[command(flatten)]
        pipeline: PipelineFile,
        /// Print JSON on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Command::Diff {
        old,
        new,
        pipeline,
        json,
    } = args.command;
    let new = match new {
        Some(new) => new,
        None => built_manifest(&pipeline.pipeline)?,
    };
    let diff = crate::diff::diff_manifests(&old, &new)?;
    if json {
        print_json(&diff)?;
    } else {
        print_text(&crate::diff::diff_text(&diff))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The manifest of the dataset a pipeline builds (its committed output).
fn built_manifest(pipeline: &Path) -> Result<PathBuf> {
    let cfg = config::load(pipeline)?;
    if !cfg.variants.is_empty() {
        return Err(Error::input(format!(
            "`{}` builds variants; give NEW, e.g. `{}`",
            cfg.file.display(),
            cfg.variants[0]
                .cfg
                .output
                .join(OutputFile::Manifest.name())
                .display()
        )));
    }
    Ok(engine::outputs::resolve(&cfg.output).join(OutputFile::Manifest.name()))
}
