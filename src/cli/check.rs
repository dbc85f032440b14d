//! `r2e check`.

use std::path::PathBuf;
use std::process::ExitCode;

use r2e_core::error::{Error, Result};

use super::args::{PipelineFile, help_of, one_dataset};
use super::{Global, print_json, print_text};

/// Check a candidate (or, with `--patch`, a bug fix) against its tests
///
/// Run an instance's harness on a candidate implementation; or, with `--patch`, apply a unified
/// diff to a bug-fix task's broken state (`bugfix.jsonl`) and run its FAIL_TO_PASS and
/// PASS_TO_PASS tests. Its `outcome` is `pass`, `fail`
/// (the candidate's doing) or `error` (not judged: the sandbox, a worker, the disk).
/// Exit 0: pass; 1: fail (a test fails, or the candidate does not compile); 2: bad input;
/// 3: error.
#[derive(clap::Args)]
#[command(mut_args(help_of(
    "pipeline",
    "The pipeline file whose built dataset holds the instance"
)))]
pub struct Args {
    /// An instance id from `dataset.jsonl` (with `--candidate`), or a task id from
    /// `bugfix.jsonl` (with `--patch`).
    #[arg(required_unless_present = "candidates")]
    id: Option<String>,
    /// A Python file defining the candidate function (or, for a method, the method or its class).
    #[arg(long, requires = "id", required_unless_present_any = ["candidates", "patch"], conflicts_with = "patch")]
    candidate: Option<PathBuf>,
    /// A unified diff (as `git diff` writes it) that fixes bug-fix task ID: applied to its
    /// broken state, which passes when every FAIL_TO_PASS and PASS_TO_PASS test passes. A diff
    /// that is not one is bad input (exit 2, its line named); a path outside the repository,
    /// or another file than the task's, is refused (exit 2).
    #[arg(long, requires = "id")]
    patch: Option<PathBuf>,
    /// Many candidates at once: a JSON-lines file of `{"id", "candidate" (the source text),
    /// "label" (optional)}`. Prints one JSON verdict per line, in order; exit 0 when all pass,
    /// 3 when one is `error`, else 1.
    #[arg(long, conflicts_with_all = ["id", "candidate", "patch"])]
    candidates: Option<PathBuf>,
    #[command(flatten)]
    pipeline: PipelineFile,
    /// The variant whose dataset holds the instance (pipelines with `[[variant]]` tables).
    #[arg(long)]
    variant: Option<String>,
    /// Print the verdict as JSON: per test its inputs, the expected and the actual outcomes.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let cfg = args.pipeline.load()?;
    let cfg = one_dataset(&cfg, args.variant.as_deref())?;
    let services = global.services(cfg);
    if let Some(file) = args.candidates {
        let reports = crate::check::check_file(cfg, &file, &services)?;
        let mut out = String::new();
        for r in &reports {
            out.push_str(&serde_json::to_string(r).map_err(Error::internal)?);
            out.push('\n');
        }
        print_text(&out)?;
        return Ok(ExitCode::from(crate::check::exit_status(&reports)));
    }
    if let Some(patch) = args.patch {
        let id = args.id.expect("clap requires it");
        let report = crate::check::check_patch(cfg, &id, &patch, &services)?;
        if args.json {
            print_json(&report)?;
        } else {
            print_text(&crate::check::patch_text(&report))?;
        }
        return Ok(ExitCode::from(crate::check::exit_status([&report.check])));
    }
    let (id, candidate) = (
        args.id.expect("clap requires it"),
        args.candidate.expect("clap requires it"),
    );
    let report = crate::check::check_with(cfg, &id, &candidate, &services)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_text(&crate::check::report_text(&report))?;
    }
    Ok(ExitCode::from(crate::check::exit_status([&report])))
}
