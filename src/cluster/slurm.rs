//! `r2e cluster slurm`: batch scripts, a job array that builds one shard per task
//! (`r2e build --shard I/N`, the task's shard also from `SLURM_ARRAY_TASK_ID` of
//! `SLURM_ARRAY_TASK_COUNT`) and a job that depends on the whole array and assembles the
//! dataset. Optionally submitted with `sbatch`; Slurm runs the assemble once every task
//! succeeded (`--dependency=afterok`) and requeues a task whose node died (`--requeue`).

use std::path::{Path, PathBuf};
use std::process::Command;

use r2e_core::config::{Backend, Shard};
use r2e_core::error::{Error, Result};
use r2e_pipeline::cluster::{
    self, DEFAULT_LOCAL_CACHE, Engine, Follow, Job, Jobs, Plan, Poll, check_template, quote,
    quote_path,
};

/// What `r2e cluster slurm` was asked.
#[derive(Default)]
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
    /// The shard plan the shards follow (`r2e status --plan N --json`), at the same path on
    /// every node.
    pub plan: Option<PathBuf>,
}

/// The scripts written.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub shards: PathBuf,
    pub assemble: PathBuf,
}

/// The Slurm engine: its options, and the scripts once written.
#[derive(Default)]
pub struct Slurm {
    pub opts: SlurmOptions,
    scripts: Option<Scripts>,
}

/// `r2e cluster slurm`: writes the scripts, and prints their paths and how to submit them, or
/// (`submit`) submits them and prints the two job ids.
pub fn run(opts: SlurmOptions, submit: bool) -> Result<String> {
    let (pipeline, shards, cost) = (opts.pipeline.clone(), opts.shards, opts.plan.clone());
    let mut slurm = Slurm {
        opts,
        scripts: None,
    };
    Ok(
        match cluster::drive(&mut slurm, &pipeline, shards, cost.as_deref(), submit)? {
            cluster::Outcome::Shown(text) => text,
            cluster::Outcome::Ran { jobs, .. } => jobs
                .iter()
                .map(|j| format!("{} {}\n", j.name, j.submission_ids.join(" ")))
                .collect(),
        },
    )
}

impl Engine for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    /// A Slurm job array's task: `SLURM_ARRAY_TASK_ID` of `SLURM_ARRAY_TASK_COUNT`.
    fn shard_from_env(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
        _shards: Option<u32>,
    ) -> Option<Result<Shard>> {
        let id = var("SLURM_ARRAY_TASK_ID")?;
        let count = var("SLURM_ARRAY_TASK_COUNT")?;
        Some(Shard::parse(&format!("{id}/{count}")).map_err(|e| {
            Error::input(format!(
                "SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT: {e} (give `--shard I/N`)"
            ))
        }))
    }

    fn check(&self) -> Result<()> {
        for (what, value) in [
            ("--partition", &self.opts.partition),
            ("--time", &self.opts.time),
            ("--mem", &self.opts.mem),
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
        check_template(self.local_cache())
    }

    fn render(&mut self, plan: &Plan) -> Result<Jobs> {
        self.scripts = Some(write_scripts(&self.opts, plan)?);
        let job = |name: &str| Job {
            name: name.to_owned(),
            shard: None,
        };
        Ok(Jobs {
            shards: vec![job("shards")],
            assemble: job("assemble"),
        })
    }

    fn show(&self) -> String {
        how_to_submit(self.scripts.as_ref().expect("rendered"))
    }

    fn follow(&self) -> Follow {
        Follow::Engine
    }

    /// Slurm requeues a task itself (`--requeue`).
    fn retries(&self) -> u32 {
        0
    }

    /// The array (`after` empty), or the assemble once every task of it succeeded.
    fn submit(&mut self, job: &Job, _attempt: u32, after: &[String]) -> Result<String> {
        let scripts = self.scripts.as_ref().expect("rendered");
        if after.is_empty() {
            return sbatch(&[], &scripts.shards);
        }
        debug_assert_eq!(job.name, "assemble");
        sbatch(
            &[format!("--dependency=afterok:{}", after.join(":"))],
            &scripts.assemble,
        )
    }

    /// Never asked: Slurm starts the assemble itself ([`Follow::Engine`]).
    fn poll(&mut self, _job: &Job, _id: &str) -> Result<Option<Poll>> {
        Err(Error::internal("Slurm's jobs are not followed"))
    }

    fn pause(&mut self) -> Result<()> {
        Ok(())
    }

    fn stop(&mut self, _job: &Job, _id: &str) -> Option<std::result::Result<(), String>> {
        None
    }
}

impl Slurm {
    fn local_cache(&self) -> &str {
        self.opts
            .local_cache
            .as_deref()
            .unwrap_or(DEFAULT_LOCAL_CACHE)
    }
}

/// Writes `shards.sbatch` and `assemble.sbatch` (each atomically) and the folder `logs/` their
/// jobs write into.
fn write_scripts(opts: &SlurmOptions, plan: &Plan) -> Result<Scripts> {
    let cfg = &plan.cfg;
    if cfg.sandbox.backend == Backend::Docker {
        eprintln!(
            "warning: `{}` selects the docker sandbox (`[sandbox] backend = \"docker\"`); Slurm nodes \
             seldom run a Docker daemon: the builds there need one, or `backend = \"local\"` \
             (bubblewrap)",
            cfg.file.display()
        );
    }
    let local_cache = opts.local_cache.as_deref().unwrap_or(DEFAULT_LOCAL_CACHE);
    let pipeline = cfg.file.clone();
    let out = match &opts.out {
        Some(dir) => absolute(dir)?,
        None => pipeline.parent().unwrap_or(Path::new("/")).join("slurm"),
    };
    let r2e = cluster::executable(opts.r2e.as_deref())?;
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
    let cost = match &plan.cost {
        Some(c) => format!(" --plan {}", quote_path(&c.path)),
        None => String::new(),
    };
    let n = plan.shards;
    let shards = format!(
        "#!/bin/bash\n\
         #SBATCH --job-name=r2e-shards\n\
         #SBATCH --array=0-{last}\n\
         #SBATCH --requeue\n\
         #SBATCH --output={shard_log}\n\
         {resources}\
         # Written by `r2e cluster slurm`: task I of this array builds shard I of {n} of the\n\
         # pipeline with this host's local cache, and stores its results in the remote cache.\n\
         {build} --shard \"$SLURM_ARRAY_TASK_ID/{n}\" {cache}{remote}{cost}\n",
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

/// What to run to submit the scripts by hand.
fn how_to_submit(scripts: &Scripts) -> String {
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
