//! `r2e export` and `r2e import`: a built dataset with its environments' Docker images, out to
//! a folder and back into a daemon.

use std::path::PathBuf;
use std::process::ExitCode;

use r2e_core::error::{Error, Result};

use super::args::{PipelineFile, help_of};
use super::{print_json, print_text};

/// Write the built dataset with its environments as Docker images into a folder
///
/// Write the built dataset with its environments as Docker images into DIR, a new folder:
/// one `docker save` archive per repository's environment image, the repositories' files
/// at their commits, `export.json` (each image's tag, ID, archive hash and sizes) and a
/// `pipeline.toml` that checks candidates in those images (`r2e check -p DIR/pipeline.toml`).
#[derive(clap::Args)]
#[command(mut_args(help_of("pipeline", "The pipeline whose built dataset is exported")))]
pub struct ExportArgs {
    /// The folder to write (it must not exist, or be empty).
    dir: PathBuf,
    /// What the export holds besides the images and the dataset: `harbor` adds one Harbor
    /// task folder per instance and per bug-fix task (`tasks/`, `registry.json`).
    #[arg(long, value_enum, default_value = "r2e")]
    format: crate::export::Format,
    /// With `--format harbor`: push each task's image to this registry (`HOST[:PORT]/PREFIX`;
    /// default: `[sandbox] registry`), and name it by digest in its `task.toml`.
    #[arg(long, value_name = "HOST[:PORT]/PREFIX")]
    registry: Option<String>,
    #[command(flatten)]
    pipeline: PipelineFile,
    /// Print `export.json` on stdout instead of a summary.
    #[arg(long)]
    json: bool,
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    let cfg = args.pipeline.load()?;
    if let Some(registry) = &args.registry {
        r2e_core::config::check_registry(registry).map_err(|why| {
            Error::input(format!(
                "`--registry {registry}` is not a registry and prefix: {why}"
            ))
        })?;
        if args.format != crate::export::Format::Harbor {
            return Err(Error::input(
                "`--registry` is for `--format harbor`: it pushes the tasks' images",
            ));
        }
    }
    let registry = match args.format {
        crate::export::Format::Harbor => args.registry.or(cfg.sandbox.registry.clone()),
        crate::export::Format::R2e => None,
    };
    let exported = crate::export::export(&cfg, &args.dir, args.format, registry.as_deref())?;
    if args.json {
        print_json(&exported)?;
    } else {
        let mut text = String::new();
        for i in &exported.images {
            text.push_str(&format!(
                "{}\t{}\t{} instances\t{} ({:.1} MB)\n",
                i.repo,
                i.tag,
                i.instances,
                i.archive,
                i.archive_bytes as f64 / 1e6
            ));
        }
        print_text(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Load an export's images into the Docker daemon
///
/// Load an export's images into the Docker daemon, each archive checked against its hash
/// and each image against the ID the export recorded.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// The export folder (`r2e export`'s).
    dir: PathBuf,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
}

pub fn import(args: ImportArgs) -> Result<ExitCode> {
    let loaded = crate::export::import(&args.dir)?;
    if args.json {
        let images: Vec<serde_json::Value> = loaded
            .iter()
            .map(|(tag, id)| serde_json::json!({"tag": tag, "id": id}))
            .collect();
        print_json(&serde_json::json!({ "images": images }))?;
    } else {
        let text: String = loaded
            .iter()
            .map(|(tag, id)| format!("{tag}\t{id}\n"))
            .collect();
        print_text(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}
