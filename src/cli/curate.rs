//! `r2e curate`.

use std::process::ExitCode;

use r2e_core::config;
use r2e_core::error::Result;

use super::args::PipelinePath;
use super::{print_json, print_text};

/// Resolve the pipeline's `[[source]]` searches into `repos.lock`
///
/// Resolve the pipeline's `[[source]]` searches into `repos.lock` beside it: the
/// repositories kept (URL, the default branch's head, dates, stars, licence, why) and the
/// candidates left out with their reason. A lock that matches the sources is kept as it is.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pipeline: PipelinePath,
    /// Search again even when the lock matches the sources, and print the repositories
    /// added, removed and moved (another commit); the lock is not rewritten when nothing
    /// changed.
    #[arg(long)]
    update: bool,
    /// Print what was done as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let cfg = config::load_unlocked(&args.pipeline.path()?)?;
    let outcome = r2e_pipeline::curate::curate(&cfg, args.update)?;
    if args.json {
        print_json(&outcome)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    if let Some(changes) = &outcome.changes {
        text.push_str(&r2e_pipeline::curate::diff_text(changes));
    }
    text.push_str(&format!(
        "{}: {} repositories, {} left out, curated at {}{}\n",
        outcome.lock,
        outcome.repos,
        outcome.left_out,
        outcome.curated_at,
        if !outcome.searched {
            " (kept: it matches the sources)"
        } else if outcome.written {
            ""
        } else {
            " (unchanged)"
        }
    ));
    print_text(&text)?;
    Ok(ExitCode::SUCCESS)
}
