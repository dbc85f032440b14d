//! `r2e build`: the whole pipeline, or one shard of it.

use std::path::PathBuf;
use std::process::ExitCode;

use r2e_core::config::{self, Config, RemoteCache, RemoteMode, Shard};
use r2e_core::error::{Error, Result};
use r2e_core::records::Summary;
use r2e_pipeline::engine::{self, BuildOptions};
use r2e_pipeline::stages::Stage;

use super::args::{PipelinePath, stage_parser};
use super::{Global, failed, print_json};

/// Build a pipeline's datasets; only what changed is recomputed
///
/// Build a pipeline (`r2e build [PIPELINE]` or `r2e build -p PIPELINE`): every stage,
/// memoized; only what changed is recomputed.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pipeline: PipelinePath,
    /// Stop after this stage.
    #[arg(long, value_parser = stage_parser(), default_value = "evaluate")]
    until: Stage,
    /// Worker threads (default: one per core).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Print a JSON summary on stdout.
    #[arg(long)]
    json: bool,
    /// Build only shard I of N (counting from 0: `0/2` and `1/2`): the repositories whose
    /// name hashes to I, stored in the remote cache, with a summary beside the output
    /// instead of the output. Defaults from `SLURM_ARRAY_TASK_ID` and
    /// `SLURM_ARRAY_TASK_COUNT` in a Slurm job array, and from `JOB_COMPLETION_INDEX` of
    /// `--shards N` in a Kubernetes Indexed Job.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// The number of shards, whose index comes from `JOB_COMPLETION_INDEX` (a Kubernetes
    /// Indexed Job's pod).
    #[arg(long, value_name = "N", conflicts_with = "shard")]
    shards: Option<u32>,
    /// With a shard: build the repositories this plan gives it (`r2e status --plan N --json`),
    /// not those whose name hashes to it.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// The remote cache shared between hosts (`s3://BUCKET/PREFIX`, `gs://`, `az://`,
    /// `http(s)://` WebDAV, `file:///PATH`); wins over `[cache] remote`.
    #[arg(long, value_name = "URL", value_parser = RemoteCache::parse)]
    remote_cache: Option<RemoteCache>,
    /// `read`: read the remote cache and never write to it (a host that may not publish);
    /// wins over `[cache] remote_mode`.
    #[arg(long, value_name = "MODE", value_parser = RemoteMode::parse)]
    remote_mode: Option<RemoteMode>,
    /// This host's local cache folder, instead of the pipeline's `cache`.
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// The output folder, instead of the pipeline's `output`.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let cfg = configure(&args)?;
    let opts = BuildOptions {
        until: args.until,
        jobs: args.jobs,
    };
    let shard = match args.shard {
        Some(s) => Some(s),
        None => crate::cluster::shard_from_env(args.shards).transpose()?,
    };
    if let Some(shard) = shard {
        let plan = match &args.plan {
            Some(path) => {
                let plan = engine::shard_plan::ShardPlan::read(path)?;
                plan.check(&cfg, shard.count, path)?;
                Some(plan)
            }
            None => None,
        };
        return build_shard(&cfg, &opts, global, shard, plan.as_ref(), args.json);
    }
    if args.plan.is_some() {
        return Err(Error::input(
            "`--plan` is for a shard's build: give `--shard I/N` (or `--shards N`)",
        ));
    }
    let summary = engine::build_with(&cfg, &opts, &global.services(&cfg))?;
    if args.json {
        print_json(&summary)?;
    } else {
        eprintln!("{}", human_summary(&summary));
    }
    // Outputs written, but something may pass next time: said, and exit 1.
    for why in &summary.retry {
        eprintln!("error: {why}");
    }
    Ok(if summary.retry.is_empty() {
        ExitCode::SUCCESS
    } else {
        failed()
    })
}

/// The pipeline's configuration with the command line's overrides.
fn configure(args: &Args) -> Result<Config> {
    let mut cfg = config::load(&args.pipeline.path()?)?;
    if let Some(dir) = &args.cache {
        cfg = cfg.with_cache(
            &std::path::absolute(dir)
                .map_err(|e| Error::input(format!("--cache {}: {e}", dir.display())))?,
        );
    }
    if let Some(dir) = &args.output {
        cfg = cfg.with_output(
            &std::path::absolute(dir)
                .map_err(|e| Error::input(format!("--output {}: {e}", dir.display())))?,
        );
    }
    if let Some(remote) = &args.remote_cache {
        cfg = cfg.with_remote(remote.clone());
    }
    if let Some(mode) = args.remote_mode {
        cfg = cfg.with_remote_mode(mode).ok_or_else(|| {
            Error::input(
                "`--remote-mode` needs a remote cache (`--remote-cache URL` or `[cache] remote`)",
            )
        })?;
    }
    Ok(cfg)
}

/// Builds one shard: its results stored in the remote cache, its summary beside the output.
fn build_shard(
    cfg: &Config,
    opts: &BuildOptions,
    global: &Global,
    shard: Shard,
    plan: Option<&engine::shard_plan::ShardPlan>,
    json: bool,
) -> Result<ExitCode> {
    let outcome = engine::build_shard(cfg, opts, &global.services(cfg), shard, plan)?;
    if json {
        print_json(&outcome.summary)?;
    } else if let Some(summary) = &outcome.summary {
        eprintln!("{}", human_summary(summary));
    }
    eprintln!(
        "shard {shard}: summary in {}",
        outcome.summary_file.display()
    );
    let retry = outcome.summary.as_ref().map_or(&[][..], |s| &s.retry[..]);
    for why in retry {
        eprintln!("error: {why}");
    }
    if outcome.lost > 0 {
        eprintln!(
            "error: shard {shard} could not store {} result(s) in the remote cache; the assemble would miss them, so this shard failed (run it again)",
            outcome.lost
        );
    }
    Ok(if retry.is_empty() && outcome.lost == 0 {
        ExitCode::SUCCESS
    } else {
        failed()
    })
}

/// The build summary as text, for stderr.
fn human_summary(s: &Summary) -> String {
    let mut out = String::new();
    for (name, v) in &s.variants.0 {
        out.push_str(&format!("variant {name}:\n"));
        for line in human_summary(v).lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if !s.variants.is_empty() {
        out.push_str("all variants:\n");
    }
    for (stage, c) in s.stages.rows() {
        out.push_str(&format!(
            "{stage:>9}: {} executed, {} cached, {} failed\n",
            c.executed, c.cached, c.failed
        ));
    }
    let counts = serde_json::to_value(&s.counts).unwrap_or_default();
    let counts: Vec<String> = counts
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    out.push_str(&format!("   counts: {}\n", counts.join(", ")));
    if s.counts.functions.is_some() {
        let by = s.excluded_by.text();
        out.push_str(&format!(
            " excluded: {} by the filters{}\n",
            s.excluded_by.total(),
            if by.is_empty() {
                String::new()
            } else {
                format!(": {by}")
            }
        ));
    }
    for r in &s.repos {
        out.push_str(&format!("     repo {}: {}\n", r.repo, r.text()));
    }
    for t in &s.time {
        out.push_str(&format!("     time {}: {}\n", t.repo, t.text()));
    }
    for (stage, models) in &s.llm {
        for (model, u) in models {
            out.push_str(&format!(
                "      llm: {stage} {model}: {} executed, {} cached, {} failed; {} prompt + {} completion tokens\n",
                u.executed, u.cached, u.failed, u.prompt_tokens, u.completion_tokens
            ));
        }
    }
    out.push_str(&format!("   output: {}", s.output.display()));
    if let Some(v) = &s.dataset_version {
        out.push_str(&format!("\n  version: {v}"));
    }
    out
}
