//! `r2e cluster`: builds in shards on Slurm, Kubernetes or Ray. The arguments are turned into
//! each engine's options; the work is `crate::cluster`'s.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use r2e_core::config::RemoteCache;
use r2e_core::error::Result;

use crate::cluster::{k8s, ray};

use super::args::{PipelinePath, help_of};
use super::{failed, print_json, print_text};

/// Run builds on a cluster.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Slurm(SlurmArgs),
    K8s(K8sCommand),
    Ray(RayArgs),
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Slurm(args) => run_slurm(args),
        Command::K8s(args) => run_k8s(args),
        Command::Ray(args) => run_ray(args),
    }
}

/// Write Slurm batch scripts that build a pipeline in shards, then assemble it.
///
/// Writes `shards.sbatch`, a job array whose task I runs `r2e build PIPELINE --shard I/N`
/// with the node's local cache (the results go to the remote cache), and `assemble.sbatch`,
/// which builds the whole dataset from the shards' stored results. Prints their paths and
/// how to submit them, or with `--submit` submits them (the assembly once every shard
/// succeeded) and prints the two job ids. The nodes run the local (bubblewrap) sandbox.
#[derive(clap::Args)]
struct SlurmArgs {
    #[command(flatten)]
    pipeline: PipelinePath,
    /// The shard plan the shards follow (`r2e status --plan N --json`), instead of the
    /// repositories' name hashes; at the same path on every host.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Shards: the job array's tasks, one shard each.
    #[arg(long, value_name = "N")]
    shards: u32,
    /// The partition the jobs run in (`#SBATCH --partition`).
    #[arg(long)]
    partition: Option<String>,
    /// Each job's time limit (`#SBATCH --time`, e.g. `4:00:00`).
    #[arg(long)]
    time: Option<String>,
    /// Each job's memory (`#SBATCH --mem`, e.g. `8G`).
    #[arg(long)]
    mem: Option<String>,
    /// Each job's CPUs (`#SBATCH --cpus-per-task`).
    #[arg(long, value_name = "C")]
    cpus: Option<u32>,
    /// The local cache's folder on a node, expanded there by the shell (inside double
    /// quotes), e.g. `/scratch/$USER/r2e-$SLURMD_NODENAME`.
    #[arg(long, value_name = "TEMPLATE", default_value = r2e_pipeline::cluster::DEFAULT_LOCAL_CACHE)]
    local_cache: String,
    /// The remote cache the shards store their results in and the assembly reads
    /// (`s3://BUCKET/PREFIX` or `http://...`); default: the pipeline's `[cache] remote`.
    #[arg(long, value_name = "URL")]
    remote_cache: Option<String>,
    /// The folder the scripts are written into (default: `<pipeline's folder>/slurm`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Submit the scripts with `sbatch` and print the job ids.
    #[arg(long)]
    submit: bool,
    /// The r2e executable the nodes run (default: this one).
    #[arg(long, value_name = "PATH")]
    r2e: Option<PathBuf>,
}

fn run_slurm(args: SlurmArgs) -> Result<ExitCode> {
    let opts = crate::cluster::slurm::SlurmOptions {
        pipeline: args.pipeline.path()?,
        shards: args.shards,
        partition: args.partition,
        time: args.time,
        mem: args.mem,
        cpus: args.cpus,
        local_cache: Some(args.local_cache),
        remote_cache: args.remote_cache,
        out: args.out,
        r2e: args.r2e,
        plan: args.plan,
    };
    print_text(&crate::cluster::slurm::run(opts, args.submit)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Print, or apply and follow, the Kubernetes manifests of a sharded build
///
/// Print the Kubernetes manifests of a sharded build (an Indexed Job of N shards, a
/// suspended assemble Job, a ConfigMap of the pipeline), or apply and follow them.
#[derive(clap::Args)]
#[command(
    mut_args(help_of("pipeline", "The pipeline file (default `pipeline.toml`)")),
    mut_args(help_of(
        "pipeline_flag",
        "The pipeline file; the same as the positional PIPELINE"
    ))
)]
struct K8sCommand {
    #[command(flatten)]
    args: K8sArgs,
    /// Apply the manifests with `kubectl`, follow the shards, then resume and follow the
    /// assemble.
    #[arg(long)]
    apply: bool,
}

// What a Kubernetes build is made of: the pipeline, and the engine's options, declared once
// in `k8s::K8sOptions` (no doc comment: a flattened struct's would become the command's `about`).
#[derive(clap::Args)]
pub struct K8sArgs {
    #[command(flatten)]
    pipeline: PipelinePath,
    #[command(flatten)]
    options: k8s::K8sOptions,
}

impl K8sArgs {
    /// The engine's options, with the pipeline's path resolved.
    pub fn options(self) -> Result<k8s::K8sOptions> {
        Ok(k8s::K8sOptions {
            pipeline: self.pipeline.path()?,
            ..self.options
        })
    }
}

fn run_k8s(command: K8sCommand) -> Result<ExitCode> {
    print_text(&k8s::run(command.args.options()?, command.apply)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Build a pipeline in shards on a Ray cluster, then assemble it
///
/// Build a pipeline in shards on a Ray cluster, then assemble it, through Ray's Job
/// Submission REST API (no Ray needed here).
///
/// Submits one job per shard, `r2e build PIPELINE --shard I/N --cache LOCAL`, follows them
/// (their logs on stderr), submits a failed or stopped one again up to `--retries` times,
/// then submits and follows the assemble, `r2e build PIPELINE --cache LOCAL`. Prints a line
/// per job (attempts, final status) on stdout; exit 0 when the assemble succeeded, 1 when a
/// job failed for good. The workers read the pipeline and run r2e at the same paths as here
/// (a shared file system); the remote cache's credentials come from the environment their
/// `ray start` ran in, never from this command (Ray would store and show them).
#[derive(clap::Args)]
struct RayArgs {
    #[command(flatten)]
    pipeline: PipelinePath,
    /// The shard plan the shards follow (`r2e status --plan N --json`), instead of the
    /// repositories' name hashes; at the same path on every host.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// The Ray dashboard's address, where its job server answers (`http://HEAD:8265`).
    #[arg(long, value_name = "URL")]
    address: String,
    /// Shards: one job each.
    #[arg(long, value_name = "N")]
    shards: u32,
    /// The remote cache the shards store their results in and the assemble reads; default:
    /// the pipeline's `[cache] remote` (one of them is needed). No credentials in it.
    #[arg(long, value_name = "URL", value_parser = RemoteCache::parse)]
    remote_cache: Option<RemoteCache>,
    /// The local cache's folder on a worker, expanded there by the shell (inside double
    /// quotes).
    #[arg(long, value_name = "TEMPLATE", default_value = r2e_pipeline::cluster::DEFAULT_LOCAL_CACHE)]
    local_cache: String,
    /// CPUs Ray reserves for each job (`entrypoint_num_cpus`); the build itself uses every
    /// core of its worker.
    #[arg(long, value_name = "C", default_value_t = 1.0)]
    cpus: f64,
    /// Memory Ray reserves for each job (`entrypoint_memory`): bytes, or with K, M, G, T.
    #[arg(long, value_name = "BYTES", value_parser = ray::parse_memory)]
    memory: Option<u64>,
    /// Custom resources each job needs (`entrypoint_resources`): a JSON object, or
    /// `KEY=VALUE`; repeat the option for more.
    #[arg(long, value_name = "JSON|KEY=VALUE")]
    resources: Vec<String>,
    /// How many times a failed or stopped job is submitted again.
    #[arg(long, value_name = "K", default_value_t = 2)]
    retries: u32,
    /// The r2e executable the workers run (default: this one).
    #[arg(long, value_name = "PATH")]
    r2e: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

fn run_ray(args: RayArgs) -> Result<ExitCode> {
    let opts = ray::RayOptions {
        pipeline: args.pipeline.path()?,
        address: args.address,
        shards: args.shards,
        remote_cache: args.remote_cache,
        local_cache: args.local_cache,
        cpus: args.cpus,
        memory: args.memory,
        resources: ray::parse_resources(&args.resources)?,
        retries: args.retries,
        r2e: args.r2e,
        poll: std::time::Duration::from_secs(1),
        plan: args.plan,
    };
    let report = ray::run(opts)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_text(&report.text())?;
    }
    if report.succeeded {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: a job failed after its retries; the dataset was not assembled");
        Ok(failed())
    }
}
