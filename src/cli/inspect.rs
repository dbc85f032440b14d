//! `r2e status` and `r2e explain`: what a build would run, and what one function's results
//! come from.

use std::process::ExitCode;

use r2e_core::error::Result;
use r2e_pipeline::inspect;
use r2e_pipeline::stages::Stage;

use super::args::{PipelineFile, stage_parser};
use super::{print_json, print_text};

/// Say what a build would run and why, without running it.
#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pipeline: PipelineFile,
    /// The stage a build would stop after.
    #[arg(long, value_parser = stage_parser(), default_value = "evaluate")]
    until: Stage,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Instead: a plan that assigns the repositories to N shards by their estimated cost
    /// (candidates, and the timings of earlier builds), for `r2e build --shard I/N --plan
    /// FILE` (`--json` writes the file).
    #[arg(long, value_name = "N")]
    plan: Option<u32>,
}

pub fn status(args: StatusArgs) -> Result<ExitCode> {
    if let Some(shards) = args.plan {
        let plan = inspect::shard_plan(&args.pipeline.load()?, shards)?;
        if args.json {
            print_json(&plan)?;
        } else {
            print_text(&plan.text())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = inspect::status(&args.pipeline.load()?, args.until)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_text(&inspect::status_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Show the inputs behind one function's results and whether each is cached
///
/// Show the inputs behind one function's results, whether each is cached, and its harness's
/// verdict in the last build (valid, or the failure class and message).
#[derive(clap::Args)]
pub struct ExplainArgs {
    /// A function id, `REPO:path.py:Qual.name`.
    id: String,
    #[command(flatten)]
    pipeline: PipelineFile,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    json: bool,
}

pub fn explain(args: ExplainArgs) -> Result<ExitCode> {
    let report = inspect::explain(&args.pipeline.load()?, &args.id)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_text(&inspect::explain_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}
