//! The command line: argument definitions, dispatch, and printing. A command's product goes to
//! stdout; progress and messages go to stderr. Errors are printed once and mapped to an exit code
//! (2 for bad input, 1 for the environment or a bug).

use r2e_core::records::OutputFile;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use r2e_core::config::{self, RemoteCache, RemoteMode, Shard};
use r2e_core::error::{Error, Result};
use r2e_core::records::Summary;
use r2e_pipeline::engine::{self, BuildOptions};
use r2e_pipeline::stages::Stage;

#[derive(Parser)]
#[command(
    name = "r2e",
    version,
    about = "Turn Python repositories into executable coding-benchmark environments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Run untrusted code without bubblewrap: NO isolation from this machine
    ///
    /// Run repositories' and models' code even without bubblewrap, with NO isolation from this
    /// machine (only resource limits). Never on a machine with anything to protect.
    #[arg(long, global = true)]
    unsafe_no_sandbox: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Write a commented `pipeline.toml` for folders, git URLs or PyPI releases
    ///
    /// Write a commented `pipeline.toml` with a `[[repo]]` per argument: a folder (`path`), a
    /// git URL (`git`: `https://`, `ssh://`, `git@host:path`, `file://`, or ending in `.git`)
    /// or `pypi:NAME==VERSION` (`pypi`), with the main settings and their defaults. The file is
    /// checked as `r2e build` reads it before it is written, and an existing one is never
    /// overwritten (exit 2).
    Init {
        /// The repositories: folders, git URLs, `pypi:NAME==VERSION`.
        #[arg(value_name = "PATH|URL|pypi:NAME==VERSION", required = true)]
        repos: Vec<String>,
        /// The pipeline file to write.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
    },
    /// Build a pipeline's datasets; only what changed is recomputed
    ///
    /// Build a pipeline (`r2e build [PIPELINE]` or `r2e build -p PIPELINE`): every stage,
    /// memoized; only what changed is recomputed.
    Build {
        /// The pipeline file (default `pipeline.toml`); the same as `-p PIPELINE`.
        #[arg(value_name = "PIPELINE")]
        pipeline: Option<PathBuf>,
        /// The pipeline file (default `pipeline.toml`); the same as the positional PIPELINE.
        #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
        pipeline_flag: Option<PathBuf>,
        /// Stop after this stage.
        #[arg(long, value_enum, default_value = "evaluate")]
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
        #[arg(long, value_name = "I/N", value_parser = parse_shard)]
        shard: Option<Shard>,
        /// The number of shards, whose index comes from `JOB_COMPLETION_INDEX` (a Kubernetes
        /// Indexed Job's pod).
        #[arg(long, value_name = "N", conflicts_with = "shard")]
        shards: Option<u32>,
        /// The remote cache shared between hosts (`s3://BUCKET/PREFIX`, `gs://`, `az://`,
        /// `http(s)://` WebDAV, `file:///PATH`); wins over `[cache] remote`.
        #[arg(long, value_name = "URL", value_parser = parse_remote)]
        remote_cache: Option<RemoteCache>,
        /// `read`: read the remote cache and never write to it (a host that may not publish);
        /// wins over `[cache] remote_mode`.
        #[arg(long, value_name = "MODE", value_parser = parse_remote_mode)]
        remote_mode: Option<RemoteMode>,
        /// This host's local cache folder, instead of the pipeline's `cache`.
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// The output folder, instead of the pipeline's `output`.
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
    },
    /// Resolve the pipeline's `[[source]]` searches into `repos.lock`
    ///
    /// Resolve the pipeline's `[[source]]` searches into `repos.lock` beside it: the
    /// repositories kept (URL, the default branch's head, dates, stars, licence, why) and the
    /// candidates left out with their reason. A lock that matches the sources is kept as it is.
    Curate {
        /// The pipeline file (default `pipeline.toml`); the same as `-p PIPELINE`.
        #[arg(value_name = "PIPELINE")]
        pipeline: Option<PathBuf>,
        /// The pipeline file (default `pipeline.toml`); the same as the positional PIPELINE.
        #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
        pipeline_flag: Option<PathBuf>,
        /// Search again even when the lock matches the sources, and print the repositories
        /// added, removed and moved (another commit); the lock is not rewritten when nothing
        /// changed.
        #[arg(long)]
        update: bool,
        /// Print what was done as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Say what a build would run and why, without running it.
    Status {
        /// The pipeline file.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// The stage a build would stop after.
        #[arg(long, value_enum, default_value = "evaluate")]
        until: Stage,
        /// Print JSON on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a candidate implementation against an instance's harness
    ///
    /// Run an instance's harness on a candidate implementation. Its `outcome` is `pass`, `fail`
    /// (the candidate's doing) or `error` (not judged: the sandbox, a worker, the disk).
    /// Exit 0: pass; 1: fail (a test fails, or the candidate does not compile); 2: bad input;
    /// 3: error.
    Check {
        /// An instance id from `dataset.jsonl` (with `--candidate`).
        #[arg(required_unless_present = "candidates")]
        id: Option<String>,
        /// A Python file defining the candidate function (or, for a method, the method or its class).
        #[arg(long, requires = "id", required_unless_present = "candidates")]
        candidate: Option<PathBuf>,
        /// Many candidates at once: a JSON-lines file of `{"id", "candidate" (the source text),
        /// "label" (optional)}`. Prints one JSON verdict per line, in order; exit 0 when all pass,
        /// 3 when one is `error`, else 1.
        #[arg(long, conflicts_with_all = ["id", "candidate"])]
        candidates: Option<PathBuf>,
        /// The pipeline file whose built dataset holds the instance.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// The variant whose dataset holds the instance (pipelines with `[[variant]]` tables).
        #[arg(long)]
        variant: Option<String>,
        /// Print the verdict as JSON: per test its inputs, the expected and the actual outcomes.
        #[arg(long)]
        json: bool,
    },
    /// Report the built datasets: tables, charts and a dataset card
    ///
    /// A table with a row per variant (or one for the pipeline): candidates, valid harnesses,
    /// coverage, the in-file / out-of-file split, failure classes, model requests and tokens;
    /// and a table with a row per repository: functions, candidates, what the filters excluded,
    /// valid harnesses, instances; with `results.jsonl`, pass@k and the self-repair curves.
    /// Prints Markdown (or JSON) and writes `report.md`, `report.json`, `report.html` (the
    /// same numbers as charts, one self-contained file) and the dataset card `README.md` (with
    /// `LICENSES.md`) into the output.
    Report {
        /// The pipeline file.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// Print JSON on stdout instead of Markdown.
        #[arg(long)]
        json: bool,
    },
    /// Shrink the cache to what recent builds use, or to a size
    ///
    /// Shrink the cache: remove its buckets of other versions, then its least recently used
    /// entries until it fits `--max-size`. What the last builds use is kept unless `--all`.
    /// Takes the cache's lock: a build started meanwhile waits for it.
    Gc {
        /// The pipeline file whose cache is collected (every output built with that cache keeps
        /// what its last build used).
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// Remove least recently used entries until the cache takes at most SIZE on the disk:
        /// bytes, or a number with a unit: `500M`, `2G`, `1.5GiB` (powers of 1024), `800MB`
        /// (powers of 1000).
        #[arg(long, value_name = "SIZE", value_parser = r2e_core::cache::gc::parse_size)]
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
    },
    /// Write the built dataset with its environments as Docker images into a folder
    ///
    /// Write the built dataset with its environments as Docker images into DIR, a new folder:
    /// one `docker save` archive per repository's environment image, the repositories' files
    /// at their commits, `export.json` (each image's tag, ID, archive hash and sizes) and a
    /// `pipeline.toml` that checks candidates in those images (`r2e check -p DIR/pipeline.toml`).
    Export {
        /// The folder to write (it must not exist, or be empty).
        dir: PathBuf,
        /// The pipeline whose built dataset is exported.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// Print `export.json` on stdout instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Load an export's images into the Docker daemon
    ///
    /// Load an export's images into the Docker daemon, each archive checked against its hash
    /// and each image against the ID the export recorded.
    Import {
        /// The export folder (`r2e export`'s).
        dir: PathBuf,
        /// Print JSON on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Docker images for the `docker` sandbox backend.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Work with built datasets.
    Dataset {
        #[command(subcommand)]
        command: DatasetCommand,
    },
    /// Serve the built dataset to programming agents over HTTP/JSON
    ///
    /// Serve the built dataset to programming agents over HTTP/JSON: sessions on instances with
    /// a workspace (the repository, the function stubbed), files, commands in the sandbox, test
    /// feedback and a reward on submission; every action traced to `<output>/traces/`. Stops on
    /// SIGINT or SIGTERM. The API is at `/openapi.json` (and in the README).
    Serve {
        /// The pipeline whose built dataset is served.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// The variant whose dataset is served (pipelines with `[[variant]]` tables).
        #[arg(long)]
        variant: Option<String>,
        /// The address to listen on (port 0: any free port; the one taken is printed). An
        /// address other than loopback needs `--token-env`.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// The environment variable holding the bearer token every request must carry.
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
        /// Sessions open at once; beyond, opening one answers 429 with `Retry-After`.
        #[arg(long, default_value_t = 64)]
        max_sessions: usize,
        /// Seconds without a request after which a session is closed.
        #[arg(long, default_value_t = 600, value_name = "SECONDS")]
        idle_timeout: u64,
    },
    /// Run builds on a cluster.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Print a shell's completion script: bash, zsh, fish, elvish or powershell
    ///
    /// Print the completion script of a shell on stdout: bash (save it as
    /// `~/.local/share/bash-completion/completions/r2e`), zsh (as `_r2e` in a folder of
    /// `$fpath`), fish (as `~/.config/fish/completions/r2e.fish`), elvish or powershell.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Show the inputs behind one function's results and whether each is cached
    ///
    /// Show the inputs behind one function's results, whether each is cached, and its harness's
    /// verdict in the last build (valid, or the failure class and message).
    Explain {
        /// A function id, `REPO:path.py:Qual.name`.
        id: String,
        /// The pipeline file.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// Print JSON on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one program in the sandbox, as r2e runs untrusted code (for the benches)
    ///
    /// Run PROGRAM in the sandbox (bubblewrap, no network, r2e's fixed environment and the
    /// `--env` variables only, nothing of this machine but its system software, the `--read`
    /// folders and the working folder, which is the only one it may write). Its output is
    /// printed as it was captured (stdout, then stderr); the exit code is its own, 124 when the
    /// wall-clock limit stopped it, 128 + N when signal N killed it.
    #[command(hide = true)]
    Sandboxed {
        /// Folders (or files) it may read, at their own paths.
        #[arg(long = "read", value_name = "PATH")]
        read: Vec<PathBuf>,
        /// The working folder: the only one it may write, and its `$HOME`.
        #[arg(long, value_name = "DIR")]
        workdir: PathBuf,
        /// A variable it sees, `NAME=VALUE` (none of this process's are passed).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Wall-clock limit in seconds (also its CPU-time limit).
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// The program and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Build the docker backend's base image unless the daemon has it; print its tag
    ///
    /// Build the base image (the configured interpreter and the pinned coverage.py, from this
    /// machine's interpreter folder), unless the Docker daemon has it; print its tag.
    Base {
        /// The pipeline file (its `[env] python` and cache).
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Write Slurm batch scripts that build a pipeline in shards, then assemble it.
    ///
    /// Writes `shards.sbatch`, a job array whose task I runs `r2e build PIPELINE --shard I/N`
    /// with the node's local cache (the results go to the remote cache), and `assemble.sbatch`,
    /// which builds the whole dataset from the shards' stored results. Prints their paths and
    /// how to submit them, or with `--submit` submits them (the assembly once every shard
    /// succeeded) and prints the two job ids. The nodes run the local (bubblewrap) sandbox.
    Slurm {
        /// The pipeline file (default `pipeline.toml`); the same as `-p PIPELINE`.
        #[arg(value_name = "PIPELINE")]
        pipeline: Option<PathBuf>,
        /// The pipeline file (default `pipeline.toml`); the same as the positional PIPELINE.
        #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
        pipeline_flag: Option<PathBuf>,
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
    },
    /// Print, or apply and follow, the Kubernetes manifests of a sharded build
    ///
    /// Print the Kubernetes manifests of a sharded build (an Indexed Job of N shards, a
    /// suspended assemble Job, a ConfigMap of the pipeline), or apply and follow them.
    K8s {
        /// The pipeline file (default `pipeline.toml`).
        pipeline: Option<PathBuf>,
        /// The pipeline file; the same as the positional PIPELINE.
        #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
        pipeline_flag: Option<PathBuf>,
        /// How many shards (the Indexed Job's completions).
        #[arg(long, value_name = "N")]
        shards: u32,
        /// The container image that holds r2e, Python and bubblewrap.
        #[arg(long)]
        image: String,
        /// The r2e program in the image.
        #[arg(long, value_name = "PATH", default_value = "r2e")]
        r2e: String,
        /// The Secret whose keys become the pods' environment: the remote store's credentials
        /// (`AWS_ACCESS_KEY_ID`, ...) and the signing key's variable, if any.
        #[arg(long, value_name = "NAME")]
        secret: Option<String>,
        /// The remote cache (default: the pipeline's `[cache] remote`).
        #[arg(long, value_name = "URL")]
        remote_cache: Option<String>,
        /// For a `file://` remote cache: the PersistentVolumeClaim every pod mounts at its path.
        #[arg(long, value_name = "CLAIM")]
        store_claim: Option<String>,
        /// The PersistentVolumeClaim the assemble writes the dataset into.
        #[arg(long, value_name = "CLAIM")]
        output_claim: Option<String>,
        /// The Jobs' name prefix (default: `r2e-<project>-<hash of the manifests>`).
        #[arg(long)]
        name: Option<String>,
        /// The namespace of the Jobs and the ConfigMap (default: `kubectl`'s).
        #[arg(long, short = 'n')]
        namespace: Option<String>,
        /// Each pod's CPU request (`2`, `500m`).
        #[arg(long, value_name = "QUANTITY")]
        cpus: Option<String>,
        /// Each pod's memory request and limit (`8Gi`).
        #[arg(long, value_name = "QUANTITY")]
        memory: Option<String>,
        /// Retries of a failed shard before it counts as failed.
        #[arg(long, value_name = "K", default_value_t = 2)]
        backoff_limit_per_index: u32,
        /// Pods at once (default: every shard).
        #[arg(long, value_name = "P")]
        parallelism: Option<u32>,
        /// Where the pods' folders (pipeline, cache, output) are mounted.
        #[arg(long, value_name = "DIR", default_value = "/r2e")]
        mount_root: PathBuf,
        /// The pipeline's path inside the image, instead of a ConfigMap of the file (for a
        /// pipeline whose repositories are folders built into the image).
        #[arg(long, value_name = "PATH")]
        pipeline_in_image: Option<PathBuf>,
        /// Run the pods privileged (bubblewrap needs user namespaces).
        #[arg(long)]
        privileged: bool,
        /// Apply the manifests with `kubectl`, follow the shards, then resume and follow the
        /// assemble.
        #[arg(long)]
        apply: bool,
    },
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
    Ray {
        /// The pipeline file (default `pipeline.toml`); the same as `-p PIPELINE`.
        #[arg(value_name = "PIPELINE")]
        pipeline: Option<PathBuf>,
        /// The pipeline file (default `pipeline.toml`); the same as the positional PIPELINE.
        #[arg(short = 'p', long = "pipeline", value_name = "PIPELINE")]
        pipeline_flag: Option<PathBuf>,
        /// The Ray dashboard's address, where its job server answers (`http://HEAD:8265`).
        #[arg(long, value_name = "URL")]
        address: String,
        /// Shards: one job each.
        #[arg(long, value_name = "N")]
        shards: u32,
        /// The remote cache the shards store their results in and the assemble reads; default:
        /// the pipeline's `[cache] remote` (one of them is needed). No credentials in it.
        #[arg(long, value_name = "URL", value_parser = parse_remote)]
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
        #[arg(long, value_name = "BYTES", value_parser = crate::cluster::ray::parse_memory)]
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
    },
}

#[derive(Subcommand)]
enum DatasetCommand {
    /// List the instances added, removed and changed between two manifests
    ///
    /// List the instances added, removed and changed between two manifests (`manifest.json`),
    /// the fields that changed for each, and apart the instances where only the commit moved.
    Diff {
        /// The older manifest: a `manifest.json`, or the output folder holding it.
        old: PathBuf,
        /// The newer manifest (or its folder); default: the manifest of the pipeline's output.
        new: Option<PathBuf>,
        /// The pipeline whose output's manifest is NEW when NEW is not given.
        #[arg(short, long, default_value = "pipeline.toml")]
        pipeline: PathBuf,
        /// Print JSON on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `--shard I/N`.
fn parse_shard(text: &str) -> std::result::Result<Shard, String> {
    Shard::parse(text)
}

/// `--remote-mode MODE`.
fn parse_remote_mode(text: &str) -> std::result::Result<RemoteMode, String> {
    RemoteMode::parse(text)
}

/// `--remote-cache URL`.
fn parse_remote(text: &str) -> std::result::Result<RemoteCache, String> {
    RemoteCache::parse(text)
}

/// Runs the command line and returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let unsafe_no_sandbox = cli.unsafe_no_sandbox;
    let services =
        |cfg: &config::Config| r2e_exec::services::Services::for_config(cfg, unsafe_no_sandbox);
    match cli.command {
        Command::Export {
            dir,
            pipeline,
            json,
        } => {
            let cfg = config::load(&pipeline)?;
            let exported = crate::export::export(&cfg, &dir)?;
            if json {
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
        Command::Import { dir, json } => {
            let loaded = crate::export::import(&dir)?;
            if json {
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
        Command::Image {
            command: ImageCommand::Base { pipeline },
        } => {
            let cfg = config::load(&pipeline)?;
            let services = services(&cfg);
            let (tag, built) = r2e_exec::image::base(&cfg, services.sandbox.as_ref())?;
            eprintln!(
                "{}",
                if built {
                    "base image built"
                } else {
                    "base image present"
                }
            );
            println!("{tag}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Dataset {
            command:
                DatasetCommand::Diff {
                    old,
                    new,
                    pipeline,
                    json,
                },
        } => {
            let new = match new {
                Some(new) => new,
                None => built_manifest(&pipeline)?,
            };
            let diff = crate::diff::diff_manifests(&old, &new)?;
            if json {
                print_json(&diff)?;
            } else {
                print_text(&crate::diff::diff_text(&diff))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            id,
            candidate,
            candidates,
            pipeline,
            variant,
            json,
        } => {
            let cfg = config::load(&pipeline)?;
            let cfg = one_dataset(&cfg, variant.as_deref())?;
            if let Some(file) = candidates {
                let reports = crate::check::check_file(cfg, &file, &services(cfg))?;
                let mut out = String::new();
                for r in &reports {
                    out.push_str(&serde_json::to_string(r).map_err(Error::internal)?);
                    out.push('\n');
                }
                print_text(&out)?;
                return Ok(ExitCode::from(crate::check::exit_status(&reports)));
            }
            let (id, candidate) = (
                id.expect("clap requires it"),
                candidate.expect("clap requires it"),
            );
            let report = crate::check::check_with(cfg, &id, &candidate, &services(cfg))?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&crate::check::report_text(&report))?;
            }
            Ok(ExitCode::from(crate::check::exit_status([&report])))
        }
        Command::Curate {
            pipeline,
            pipeline_flag,
            update,
            json,
        } => {
            let pipeline = one_pipeline(pipeline, pipeline_flag)?;
            let cfg = config::load_unlocked(&pipeline)?;
            let outcome = r2e_pipeline::curate::curate(&cfg, update)?;
            if json {
                print_json(&outcome)?;
            } else {
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
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Build {
            pipeline,
            pipeline_flag,
            until,
            jobs,
            json,
            shard,
            shards,
            remote_cache,
            remote_mode,
            cache,
            output,
        } => {
            let pipeline = one_pipeline(pipeline, pipeline_flag)?;
            let mut cfg = config::load(&pipeline)?;
            if let Some(dir) = cache {
                cfg = cfg.with_cache(
                    &std::path::absolute(&dir)
                        .map_err(|e| Error::input(format!("--cache {}: {e}", dir.display())))?,
                );
            }
            if let Some(dir) = output {
                cfg = cfg.with_output(
                    &std::path::absolute(&dir)
                        .map_err(|e| Error::input(format!("--output {}: {e}", dir.display())))?,
                );
            }
            if let Some(remote) = remote_cache {
                cfg = cfg.with_remote(remote);
            }
            if let Some(mode) = remote_mode {
                cfg = cfg.with_remote_mode(mode).ok_or_else(|| {
                    Error::input("`--remote-mode` needs a remote cache (`--remote-cache URL` or `[cache] remote`)")
                })?;
            }
            let opts = BuildOptions { until, jobs };
            let shard = match shard {
                Some(s) => Some(s),
                None => crate::cluster::shard_from_env(shards).transpose()?,
            };
            if let Some(shard) = shard {
                let outcome = engine::build_shard(&cfg, &opts, &services(&cfg), shard)?;
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
                return Ok(if retry.is_empty() && outcome.lost == 0 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(Error::env("").exit_code())
                });
            }
            let summary = engine::build_with(&cfg, &opts, &services(&cfg))?;
            if json {
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
                ExitCode::from(Error::env("").exit_code())
            })
        }
        Command::Init { repos, pipeline } => {
            crate::init::init(&pipeline, &repos)?;
            eprintln!(
                "wrote {}; build it with `r2e build {}`",
                pipeline.display(),
                pipeline.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "r2e",
                &mut out,
            );
            print_text(&String::from_utf8_lossy(&out))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status {
            pipeline,
            until,
            json,
        } => {
            let cfg = config::load(&pipeline)?;
            let report = r2e_pipeline::inspect::status(&cfg, until)?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&r2e_pipeline::inspect::status_text(&report))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { pipeline, json } => {
            let cfg = config::load(&pipeline)?;
            let rows = crate::report::report(&cfg)?;
            let md = crate::report::write(&cfg, &rows)?;
            if json {
                print_json(&rows)?;
            } else {
                print_text(&md)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Gc {
            pipeline,
            max_size,
            all,
            dry_run,
            json,
            hold_lock_while,
            images_older_than,
        } => {
            let cfg = config::load(&pipeline)?;
            let images = match images_older_than {
                Some(age) => Some(crate::export::gc_images(&cfg, age, dry_run)?),
                None => None,
            };
            if let Some(images) = &images {
                for i in images {
                    eprintln!(
                        "{} image {} ({}, {:.1} MB, {} days old)",
                        if dry_run { "would remove" } else { "removed" },
                        i.tags.first().map(String::as_str).unwrap_or(&i.id),
                        &i.id[..i.id.len().min(19)],
                        i.size as f64 / 1e6,
                        i.age_seconds / 86_400
                    );
                }
            }
            let report = r2e_core::cache::gc::gc(
                &cfg.cache,
                &r2e_core::cache::gc::Options {
                    max_size,
                    all,
                    dry_run,
                    outputs: vec![cfg.output.clone()],
                    hold: hold_lock_while,
                },
            )?;
            if !report.fits {
                eprintln!(
                    "warning: the cache takes {}, more than {}",
                    r2e_core::cache::gc::human(report.after.bytes),
                    r2e_core::cache::gc::human(report.max_size.unwrap_or_default())
                );
            }
            if json {
                let mut value = serde_json::to_value(&report).map_err(Error::internal)?;
                if let (Some(images), Some(object)) = (&images, value.as_object_mut()) {
                    object.insert(
                        "images".into(),
                        serde_json::to_value(images).map_err(Error::internal)?,
                    );
                }
                print_json(&value)?;
            } else {
                print_text(&r2e_core::cache::gc::report_text(&report))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            pipeline,
            variant,
            addr,
            token_env,
            max_sessions,
            idle_timeout,
        } => {
            let cfg = config::load(&pipeline)?;
            let cfg = one_dataset(&cfg, variant.as_deref())?;
            let opts = crate::serve::Options {
                addr,
                token_env,
                max_sessions,
                idle_timeout: std::time::Duration::from_secs(idle_timeout),
            };
            crate::serve::serve(cfg, &services(cfg), opts)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster {
            command:
                ClusterCommand::Slurm {
                    pipeline,
                    pipeline_flag,
                    shards,
                    partition,
                    time,
                    mem,
                    cpus,
                    local_cache,
                    remote_cache,
                    out,
                    submit,
                    r2e,
                },
        } => {
            let opts = crate::cluster::slurm::SlurmOptions {
                pipeline: one_pipeline(pipeline, pipeline_flag)?,
                shards,
                partition,
                time,
                mem,
                cpus,
                local_cache: Some(local_cache),
                remote_cache,
                out,
                r2e,
            };
            print_text(&crate::cluster::slurm::run(opts, submit)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster {
            command:
                ClusterCommand::K8s {
                    pipeline,
                    pipeline_flag,
                    shards,
                    image,
                    r2e,
                    secret,
                    remote_cache,
                    store_claim,
                    output_claim,
                    name,
                    namespace,
                    cpus,
                    memory,
                    backoff_limit_per_index,
                    parallelism,
                    mount_root,
                    pipeline_in_image,
                    privileged,
                    apply,
                },
        } => {
            let opts = crate::cluster::k8s::K8sOptions {
                pipeline: one_pipeline(pipeline, pipeline_flag)?,
                shards,
                image,
                r2e,
                secret,
                remote_cache,
                store_claim,
                output_claim,
                name,
                namespace,
                cpus,
                memory,
                backoff_limit_per_index,
                parallelism,
                mount_root,
                pipeline_in_image,
                privileged,
            };
            print_text(&crate::cluster::k8s::run(opts, apply)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Cluster {
            command:
                ClusterCommand::Ray {
                    pipeline,
                    pipeline_flag,
                    address,
                    shards,
                    remote_cache,
                    local_cache,
                    cpus,
                    memory,
                    resources,
                    retries,
                    r2e,
                    json,
                },
        } => {
            let opts = crate::cluster::ray::RayOptions {
                pipeline: one_pipeline(pipeline, pipeline_flag)?,
                address,
                shards,
                remote_cache,
                local_cache,
                cpus,
                memory,
                resources: crate::cluster::ray::parse_resources(&resources)?,
                retries,
                r2e,
                poll: std::time::Duration::from_secs(1),
            };
            let report = crate::cluster::ray::run(opts)?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&report.text())?;
            }
            if report.succeeded {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("error: a job failed after its retries; the dataset was not assembled");
                Ok(ExitCode::from(Error::env("").exit_code()))
            }
        }
        Command::Sandboxed {
            read,
            workdir,
            env,
            timeout,
            command,
        } => sandboxed(read, workdir, env, timeout, command, unsafe_no_sandbox),
        Command::Explain { id, pipeline, json } => {
            let cfg = config::load(&pipeline)?;
            let report = r2e_pipeline::inspect::explain(&cfg, &id)?;
            if json {
                print_json(&report)?;
            } else {
                print_text(&r2e_pipeline::inspect::explain_text(&report))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `r2e sandboxed`: one program in the local sandbox; its captured output printed, its exit
/// code returned (124 for the wall-clock limit, 128 + N for signal N).
fn sandboxed(
    read: Vec<PathBuf>,
    workdir: PathBuf,
    env: Vec<String>,
    timeout: u64,
    command: Vec<String>,
    unsafe_no_sandbox: bool,
) -> Result<ExitCode> {
    use r2e_exec::sandbox::{Exit, Job, Limits, Sandbox};
    let env = env
        .iter()
        .map(|v| match v.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(Error::input(format!("`--env {v}` is not `NAME=VALUE`"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let workdir = std::fs::canonicalize(&workdir)
        .map_err(|e| Error::input(format!("`{}`: {e}", workdir.display())))?;
    let (program, args) = command.split_first().expect("clap requires a command");
    let job = Job {
        program: PathBuf::from(program),
        args: args.to_vec(),
        env,
        scratch: workdir,
        writable: vec![],
        readonly: read,
        hidden: vec![],
        network: false,
        limits: Limits {
            cpu_seconds: timeout,
            memory_mib: 4096,
            processes: 256,
            file_size_mib: 512,
            wall_seconds: timeout,
        },
        image: None,
    };
    let sandbox = r2e_exec::sandbox::local::LocalSandbox::new(unsafe_no_sandbox);
    let out = sandbox.run(&job)?;
    std::io::stdout().write_all(&out.stdout)?;
    std::io::stderr().write_all(&out.stderr)?;
    let code = match out.exit {
        Exit::Code(c) => c,
        Exit::Signal(s) => 128 + s,
        Exit::Timeout => 124,
    };
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The configuration whose dataset a command reads: the variant named, or the pipeline's own
/// when it has no variants (a pipeline with variants needs one named).
fn one_dataset<'c>(cfg: &'c config::Config, variant: Option<&str>) -> Result<&'c config::Config> {
    match variant {
        Some(name) => cfg.variant(name),
        None if !cfg.variants.is_empty() => Err(Error::input(format!(
            "`{}` builds variants; name one with `--variant NAME` ({})",
            cfg.file.display(),
            cfg.variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(cfg),
    }
}

/// The pipeline of `build`, given as its positional argument or as `-p` (the same file twice is
/// fine; two different files are bad input).
fn one_pipeline(positional: Option<PathBuf>, flag: Option<PathBuf>) -> Result<PathBuf> {
    match (positional, flag) {
        (Some(a), Some(b)) => {
            let same = |p: &PathBuf| std::fs::canonicalize(p).or_else(|_| std::path::absolute(p));
            if a == b || matches!((same(&a), same(&b)), (Ok(x), Ok(y)) if x == y) {
                Ok(a)
            } else {
                Err(Error::input(format!(
                    "two pipelines given: `{}` and `-p {}`; give one",
                    a.display(),
                    b.display()
                )))
            }
        }
        (a, b) => Ok(a.or(b).unwrap_or_else(|| PathBuf::from("pipeline.toml"))),
    }
}

/// The manifest of the dataset a pipeline builds (its committed output).
fn built_manifest(pipeline: &std::path::Path) -> Result<PathBuf> {
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

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    print_text(&format!(
        "{}\n",
        serde_json::to_string_pretty(v).map_err(Error::internal)?
    ))
}

/// Prints a command's product; a closed pipe is not an error.
fn print_text(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::env(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}
