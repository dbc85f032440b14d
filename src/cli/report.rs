//! `r2e report`.

use std::process::ExitCode;

use r2e_core::error::Result;

use super::args::PipelineFile;
use super::{print_json, print_text};

/// Report the built datasets: tables, charts and a dataset card
///
/// A table with a row per variant (or one for the pipeline): candidates, valid harnesses,
/// coverage, the in-file / out-of-file split, failure classes, model requests and tokens;
/// and a table with a row per repository: functions, candidates, what the filters excluded,
/// valid harnesses, instances; with `results.jsonl`, pass@k and the self-repair curves.
/// Prints Markdown (or JSON) and writes `report.md`, `report.json`, `report.html` (the
/// same numbers as charts, one self-contained file) and the dataset card `README.md` (with
/// `LICENSES.md`) into the output.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pipeline: PipelineFile,
    /// Print JSON on stdout instead of Markdown.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let cfg = args.pipeline.load()?;
    let rows = crate::report::report(&cfg)?;
    let md = crate::report::write(&cfg, &rows)?;
    if args.json {
        print_json(&rows)?;
    } else {
        print_text(&md)?;
    }
    Ok(ExitCode::SUCCESS)
}
