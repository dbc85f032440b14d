//! `r2e gc`.

use std::path::PathBuf;
use std::process::ExitCode;

use r2e_core::cache::gc;
use r2e_core::error::{Error, Result};

use super::args::{PipelineFile, help_of};
use super::{print_json, print_text};

/// Shrink the cache to what recent builds use, or to a size
///
/// Shrink the cache: remove its buckets of other versions, then its least recently used
/// entries until it fits `--max-size`. What the last builds use is kept unless `--all`.
/// Takes the cache's lock: a build started meanwhile waits for it.
#[derive(clap::Args)]
#[command(mut_args(help_of(
    "pipeline",
    "The pipeline file whose cache is collected (every output built with that cache keeps what its last build used)"
)))]
pub struct Args {
    #[command(flatten)]
    pipeline: PipelineFile,
    /// Remove least recently used entries until the cache takes at most SIZE on the disk:
    /// bytes, or a number with a unit: `500M`, `2G`, `1.5GiB` (powers of 1024), `800MB`
    /// (powers of 1000).
    #[arg(long, value_name = "SIZE", value_parser = gc::parse_size)]
    max_size: Option<u64>,
    /// Also remove what the last builds use, when that is needed to fit `--max-size` (their
    /// next builds recompute it).
    #[arg(long, requires = "max_size")]
    all: bool,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// For tests: once the lock is held, wait until FILE no longer exists.
    #[arg(long, hide = true, value_name = "FILE")]
    hold_lock_while: Option<PathBuf>,
    /// Also remove r2e's Docker images older than AGE (`7d`, `12h`, `30m`, `0s`) that the
    /// pipeline's last build does not use: environment images of other environments or
    /// commits (`r2e export`'s), and base images but the newest. Needs the Docker daemon.
    #[arg(long, value_name = "AGE", value_parser = crate::export::parse_age)]
    images_older_than: Option<u64>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let cfg = args.pipeline.load()?;
    let images = match args.images_older_than {
        Some(age) => Some(crate::export::gc_images(&cfg, age, args.dry_run)?),
        None => None,
    };
    for i in images.iter().flatten() {
        eprintln!(
            "{} image {} ({}, {:.1} MB, {} days old)",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            i.tags.first().map(String::as_str).unwrap_or(&i.id),
            &i.id[..i.id.len().min(19)],
            i.size as f64 / 1e6,
            i.age_seconds / 86_400
        );
    }
    let report = gc::gc(
        &cfg.cache,
        &gc::Options {
            max_size: args.max_size,
            all: args.all,
            dry_run: args.dry_run,
            outputs: vec![cfg.output.clone()],
            hold: args.hold_lock_while,
        },
    )?;
    if !report.fits {
        eprintln!(
            "warning: the cache takes {}, more than {}",
            gc::human(report.after.bytes),
            gc::human(report.max_size.unwrap_or_default())
        );
    }
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(Error::internal)?;
        if let (Some(images), Some(object)) = (&images, value.as_object_mut()) {
            object.insert(
                "images".into(),
                serde_json::to_value(images).map_err(Error::internal)?,
            );
        }
        print_json(&value)?;
    } else {
        print_text(&gc::report_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}
