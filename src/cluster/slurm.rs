//! `r2e cluster`: a pipeline built in shards on a cluster, each host with its own local cache
//! and the results in the remote cache, then assembled from the shards' stored results.
//!
//! This file is `r2e cluster slurm`: batch scripts, a job array that builds one shard per task
//! (`r2e build --shard I/N`) and a job that depends on the whole array and assembles the
//! dataset. Optionally submitted with `sbatch`. [`ray`] is `r2e cluster ray`: the same jobs
//! submitted to a Ray cluster over its Job Submission REST API and followed to their end.
//! [`k8s`] is `r2e cluster k8s`: the same as Kubernetes manifests (an Indexed Job of the
//! shards, a suspended assemble Job), printed or applied with `kubectl` and followed.

pub mod k8s;
pub mod ray;

use std::path::{Path, PathBuf};
use std::process::Command;

use r2e_core::config::{self, Backend, RemoteMode};
use r2e_core::error::{Error, Result};

/// The local cache of a node when none is given: shell-expanded on the node.
pub const DEFAULT_LOCAL_CACHE: &str = "${TMPDIR:-/tmp}/r2e-cache-$USER";

/// What `r2e cluster slurm` was asked.
pub struct SlurmOptions {
    /// The pipeline file.
    pub pipeline: PathBuf,
    /// Shards, one array task each (at least 1).
    pub shards: u32,
    pub partition: Option<String>,
    pub time: Option<String>,
    pub mem: Option<String>,
    pub cpus: Option<u32>,
    /// The local cache's folder on a node, expanded by the node's shell inside double quotes.
    pub local_cache: Option<String>,
    /// The remote cache's URL (`s3://BUCKET/PREFIX`, `http://...`).
    pub remote_cache: Option<String>,
    /// The folder the scripts are written into (default: `<pipeline's folder>/slurm`).
    pub out: Option<PathBuf>,
    /// The r2e executable the nodes run (default: this one).
    pub r2e: Option<PathBuf>,
}

/// The scripts written.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub shards: PathBuf,
    pub assemble: PathBuf,
}

/// Job ids of a submission.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub shards: String,
    pub assemble: String,
}

/// Checks the options and the pipeline, and writes `shards.sbatch` and `assemble.sbatch`
/// (each atomically) and the folder `logs/` their jobs write into.
pub fn write_scripts(opts: &SlurmOptions) -> Result<Scripts> {
    if opts.shards == 0 {
        return Err(Error::input("`--shards` must be at least 1"));
    }
    let cfg = config::load(&opts.pipeline)?;
    refuse_read_only(&cfg)?;
    if cfg.sandbox.backend == Backend::Docker {
        eprintln!(
            "warning: `{}` selects the docker sandbox (`[sandbox] backend = \"docker\"`); Slurm nodes \
             seldom run a Docker daemon: the builds there need one, or `backend = \"local\"` \
             (bubblewrap)",
            cfg.file.display()
        );
    }
    for (what, value) in [
        ("--partition", &opts.partition),
        ("--time", &opts.time),
        ("--mem", &opts.mem),
    ] {
        if value
            .as_deref()
            .is_some_and(|v| v.is_empty() || v.contains(char::is_whitespace))
        {
            return Err(Error::input(format!(
                "`{what}` must be one word, without spaces"
            )));
        }
    }
    let local_cache = opts.local_cache.as_deref().unwrap_or(DEFAULT_LOCAL_CACHE);
    check_template(local_cache)?;
    let pipeline = cfg.file.clone();
    let out = match &opts.out {
        Some(dir) => absolute(dir)?,
        None => pipeline.parent().unwrap_or(Path::new("/")).join("slurm"),
    };
    let r2e = match &opts.r2e {
        Some(path) => absolute(path)?,
        None => std::env::current_exe()
            .map_err(|e| Error::env(format!("cannot tell this executable's path: {e}")))?,
    };
    let logs = out.join("logs");
    let shard_log = sbatch_word(&logs.join("%A_%a.out"))?;
    let assemble_log = sbatch_word(&logs.join("assemble-%j.out"))?;
    std::fs::create_dir_all(&logs)
        .map_err(|e| Error::env(format!("cannot make `{}`: {e}", logs.display())))?;

    let mut resources = String::new();
    let mut line = |name: &str, value: &str| {
        resources.push_str(&format!("#SBATCH --{name}={value}\n"));
    };
    if let Some(p) = &opts.partition {
        line("partition", p);
    }
    if let Some(t) = &opts.time {
        line("time", t);
    }
    if let Some(m) = &opts.mem {
        line("mem", m);
    }
    if let Some(c) = opts.cpus {
        line("cpus-per-task", &c.to_string());
    }
    let remote = match &opts.remote_cache {
        Some(url) => format!(" --remote-cache {}", quote(url)),
        None => String::new(),
    };
    let build = format!("exec {} build {}", quote_path(&r2e), quote_path(&pipeline));
    let cache = format!("--cache \"{local_cache}\"");
    let n = opts.shards;
    let shards = format!(
        "#!/bin/bash\n\
         #SBATCH --job-name=r2e-shards\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --requeue\n\
         #SBATCH --output={shard_log}\n\
         {resources}\
         # Written by `r2e cluster slurm`: task I of this array builds shard I of {n} of the\n\
         # pipeline with this host's local cache, and stores its results in the remote cache.\n\
         {build} --shard \"$SLURM_ARRAY_TASK_ID/{n}\" {cache}{remote}\n",
        last = n - 1,
    );
    let assemble = format!(
        "#!/bin/bash\n\
         #SBATCH --job-name=r2e-assemble\n\
         #SBATCH --requeue\n\
         #SBATCH --output={assemble_log}\n\
         {resources}\
         # Written by `r2e cluster slurm`: once every shard succeeded (submitted with\n\
         # `--dependency=afterok:SHARDS_JOB`), assembles the dataset from their stored results.\n\
         {build} {cache}{remote}\n",
    );
    let scripts = Scripts {
        shards: out.join("shards.sbatch"),
        assemble: out.join("assemble.sbatch"),
    };
    for (path, text) in [(&scripts.shards, shards), (&scripts.assemble, assemble)] {
        r2e_core::fsutil::write_atomic_with(path, true, |file| {
            use std::io::Write;
            use std::os::unix::fs::PermissionsExt;
            file.write_all(text.as_bytes())?;
            file.file()
                .set_permissions(std::fs::Permissions::from_mode(0o755))
        })?;
    }
    Ok(scripts)
}

/// Submits the scripts: the array, then the assembly once every task of it succeeded.
pub fn submit(scripts: &Scripts) -> Result<Submitted> {
    let shards = sbatch(&[], &scripts.shards)?;
    let assemble = sbatch(
        &[format!("--dependency=afterok:{shards}")],
        &scripts.assemble,
    )?;
    Ok(Submitted { shards, assemble })
}

/// What to run to submit the scripts by hand.
pub fn how_to_submit(scripts: &Scripts) -> String {
    format!(
        "shards {}\nassemble {}\n# submit them with:\njob=$(sbatch --parsable {}) && \
         sbatch --dependency=afterok:\"${{job%%;*}}\" {}\n",
        scripts.shards.display(),
        scripts.assemble.display(),
        quote_path(&scripts.shards),
        quote_path(&scripts.assemble)
    )
}

/// `sbatch --parsable ARGS SCRIPT`: the job id.
fn sbatch(args: &[String], script: &Path) -> Result<String> {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .arg(script)
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::env("`sbatch` not found: run this on a Slurm submission host (or write the scripts without `--submit`)")
            } else {
                Error::env(format!("cannot run `sbatch`: {e}"))
            }
        })?;
    if !out.status.success() {
        return Err(Error::env(format!(
            "`sbatch {}` failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // `--parsable` prints `JOBID` or `JOBID;CLUSTER`.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout.trim().split(';').next().unwrap_or_default();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::env(format!(
            "`sbatch --parsable` printed no job id: {:?}",
            stdout.trim()
        )));
    }
    Ok(id.to_owned())
}

/// A pipeline whose hosts only read the remote store cannot be built in shards: a shard's
/// results reach the assemble only through the store.
pub fn refuse_read_only(cfg: &config::Config) -> Result<()> {
    if cfg
        .remote
        .as_ref()
        .is_some_and(|r| r.mode == RemoteMode::Read)
    {
        return Err(Error::input(format!(
            "`{}` says `[cache] remote_mode = \"read\"`: its shards could store nothing for the assemble; build a cluster's shards from a pipeline that writes to the store",
            cfg.file.display()
        )));
    }
    Ok(())
}

/// The local cache's template goes inside double quotes, where the node's shell expands it.
fn check_template(template: &str) -> Result<()> {
    if template.is_empty() || template.contains(['"', '\n', '\0']) || template.ends_with('\\') {
        return Err(Error::input(format!(
            "`--local-cache {template:?}`: the template is expanded by the node's shell inside \
             double quotes; it must be non-empty and hold no `\"`, newline or trailing `\\`"
        )));
    }
    Ok(())
}

/// A path as the value of an `#SBATCH` option: as it is, or in double quotes when it holds
/// whitespace (sbatch reads those as one word).
fn sbatch_word(path: &Path) -> Result<String> {
    let s = path.to_string_lossy();
    if s.contains(['"', '\n']) {
        return Err(Error::input(format!(
            "`{}`: a folder for the scripts may not hold `\"` or a newline",
            path.display()
        )));
    }
    Ok(if s.contains(char::is_whitespace) {
        format!("\"{s}\"")
    } else {
        s.into_owned()
    })
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::env(format!("{}: {e}", path.display())))
}

/// `s` as one literal shell word: single quotes (a `'` inside as `'\''`).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn quote_path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}
