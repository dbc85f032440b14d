//! The cluster engines' one interface, [`Engine`], and the driver written once against it,
//! [`drive`]: a pipeline built in shards on a cluster (each host with its own local cache, the
//! results in the remote cache), then assembled from the shards' stored results.
//!
//! An engine says which shard a process is from the environment it gave the process
//! ([`Engine::shard_from_env`]), makes the jobs (scripts, manifests or entry points:
//! [`Engine::render`]), submits them ([`Engine::submit`]) and answers how each is going
//! ([`Engine::poll`]). The driver plans the shards, has the jobs made, and either shows them or
//! submits the shards, follows them (submitting a failed attempt again while the engine's
//! retries last), then submits and follows the assemble, and collects what happened to every
//! job. The engines themselves (`r2e cluster slurm`, `ray`, `k8s`) live in the binary's
//! `src/cluster/`, whose `mod.rs` registers them; this interface is here, below the binary, so
//! that a test can add an engine of its own and drive it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use r2e_core::config::{self, Config, RemoteMode, Shard};
use r2e_core::error::{Error, Result};

/// The local cache of a node when none is given: shell-expanded on the node.
pub const DEFAULT_LOCAL_CACHE: &str = "${TMPDIR:-/tmp}/r2e-cache-$USER";

/// A cluster engine: how its jobs learn their shard, how they are made, submitted and followed.
pub trait Engine {
    /// Its name, as in `r2e cluster NAME`.
    fn name(&self) -> &'static str;

    /// The shard this process builds, from the variables the engine sets in its jobs (`var`
    /// reads one), and `r2e build --shards N` (`shards`); `None` when this process is not one of
    /// its shards (or its jobs say `--shard I/N` themselves).
    fn shard_from_env(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
        shards: Option<u32>,
    ) -> Option<Result<Shard>>;

    /// Checks the engine's own options, before the pipeline is read.
    fn check(&self) -> Result<()>;

    /// Checks the options against the pipeline and makes the jobs (writing what it writes):
    /// the shards' jobs, then the assemble's.
    fn render(&mut self, plan: &Plan) -> Result<Jobs>;

    /// What is printed when the jobs are made but not submitted: the scripts and how to submit
    /// them by hand, or the manifests.
    fn show(&self) -> String;

    /// Who starts the assemble once the shards succeeded.
    fn follow(&self) -> Follow;

    /// How many times the driver submits a failed attempt of a job again (an engine that
    /// retries by itself says 0).
    fn retries(&self) -> u32;

    /// Submits attempt `attempt` (from 1) of `job`, once `after` (the ids of the jobs it
    /// waits for, with [`Follow::Engine`]) succeeded; the attempt's id.
    fn submit(&mut self, job: &Job, attempt: u32, after: &[String]) -> Result<String>;

    /// How attempt `id` of `job` is going (saying its progress on stderr as the engine does);
    /// `None` when it cannot be told now. An error ends the run.
    fn poll(&mut self, job: &Job, id: &str) -> Result<Option<Poll>>;

    /// Waits before the next look at the jobs (each is looked at once right after it is
    /// submitted); an error (the run interrupted) ends it.
    fn pause(&mut self) -> Result<()>;

    /// Stops attempt `id`, still running when the run ends on an error; `None` when the engine
    /// leaves its jobs be (they can be followed, or deleted, with the engine's own tools).
    fn stop(&mut self, job: &Job, id: &str) -> Option<std::result::Result<(), String>>;
}

/// Who starts the assemble.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Follow {
    /// The engine: both are submitted at once, the assemble depending on the shards (Slurm's
    /// `--dependency=afterok`), and the driver returns without following them.
    Engine,
    /// The driver: it follows the shards to their end, then submits and follows the assemble.
    Driver,
}

/// The shards of a run: the pipeline, read and checked.
pub struct Plan {
    pub cfg: Config,
    /// Shards (at least 1).
    pub shards: u32,
    /// The plan file that assigns the repositories to the shards by cost (`r2e status --plan
    /// N --json`), checked against the pipeline: each shard's build follows it (`--plan`).
    pub cost: Option<CostPlan>,
}

/// A shard plan file a run's shards follow.
pub struct CostPlan {
    /// Its absolute path on this host.
    pub path: std::path::PathBuf,
    /// Its text (for an engine that ships it to its hosts).
    pub text: String,
}

impl Plan {
    /// Reads the pipeline and checks that it can be built in `shards` shards, following the
    /// shard plan `cost` when given (which must be one of `shards` shards for its repositories).
    pub fn new(
        pipeline: &std::path::Path,
        shards: u32,
        cost: Option<&std::path::Path>,
    ) -> Result<Plan> {
        let cfg = config::load(pipeline)?;
        refuse_read_only(&cfg)?;
        let cost = match cost {
            Some(path) => {
                let plan = crate::engine::shard_plan::ShardPlan::read(path)?;
                plan.check(&cfg, shards, path)?;
                Some(CostPlan {
                    path: std::path::absolute(path).map_err(|e| Error::env(e.to_string()))?,
                    text: fs_err::read_to_string(path)?,
                })
            }
            None => None,
        };
        Ok(Plan { cfg, shards, cost })
    }
}

/// One job: a shard's (or every shard's, as one array or Indexed Job), or the assemble's.
#[derive(Clone, Debug)]
pub struct Job {
    /// `shard 0/4`, `shards`, `assemble`.
    pub name: String,
    /// The shard's index, when the job is one shard.
    pub shard: Option<u32>,
}

/// The jobs a run submits: the shards', then the assemble's.
#[derive(Clone, Debug)]
pub struct Jobs {
    pub shards: Vec<Job>,
    pub assemble: Job,
}

/// A job's status (Ray's Job Submission API names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobStatus {
    /// Waiting for resources to start.
    Pending,
    /// Running.
    Running,
    /// Stopped by someone.
    Stopped,
    /// Ended well.
    Succeeded,
    /// Ended badly, or its host died.
    Failed,
}

impl JobStatus {
    /// Whether the job has ended (it never changes again).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed
        )
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobStatus::Pending => "PENDING",
            JobStatus::Running => "RUNNING",
            JobStatus::Stopped => "STOPPED",
            JobStatus::Succeeded => "SUCCEEDED",
            JobStatus::Failed => "FAILED",
        })
    }
}

/// One look at an attempt.
#[derive(Clone, Debug)]
pub struct Poll {
    pub status: JobStatus,
    /// What the engine says about it.
    pub message: String,
}

/// What happened to one job, over its attempts.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    /// `shard 0/4`, `shards`, or `assemble`.
    pub name: String,
    /// The shard's index, `None` for the assemble (or a job of every shard).
    pub shard: Option<u32>,
    /// Submissions made (1 plus the retries used); 0 when it was never submitted.
    pub attempts: u32,
    /// The last attempt's status; `None` when it was never submitted or not followed.
    pub status: Option<JobStatus>,
    /// The engine's message about the last attempt.
    pub message: String,
    /// The id of each attempt, in order.
    pub submission_ids: Vec<String>,
}

/// What a run did.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The jobs were made, not submitted: what [`Engine::show`] says.
    Shown(String),
    /// The jobs were submitted: the shards' reports, then the assemble's.
    Ran {
        jobs: Vec<JobReport>,
        /// Whether the assemble succeeded (every shard did before it); with
        /// [`Follow::Engine`], whether both were submitted.
        succeeded: bool,
    },
}

/// Which shard of how many this process builds, from the first of `engines` that ran it.
pub fn shard_from_env(
    engines: &[Box<dyn Engine>],
    var: &dyn Fn(&str) -> Option<String>,
    shards: Option<u32>,
) -> Option<Result<Shard>> {
    engines.iter().find_map(|e| e.shard_from_env(var, shards))
}

/// Runs `engine` on the pipeline in `shards` shards: the jobs made and shown, or (`submit`)
/// submitted, followed and collected. An error is returned only when the cluster cannot be
/// used (bad input, the engine gone, the run interrupted); a job that failed for good is in
/// the outcome.
pub fn drive(
    engine: &mut dyn Engine,
    pipeline: &std::path::Path,
    shards: u32,
    cost: Option<&std::path::Path>,
    submit: bool,
) -> Result<Outcome> {
    if shards == 0 {
        return Err(Error::input("`--shards` must be at least 1"));
    }
    engine.check()?;
    let plan = Plan::new(pipeline, shards, cost)?;
    let jobs = engine.render(&plan)?;
    if !submit {
        return Ok(Outcome::Shown(engine.show()));
    }
    if engine.follow() == Follow::Engine {
        let mut reports = Vec::new();
        let mut after = Vec::new();
        for job in &jobs.shards {
            let id = engine.submit(job, 1, &[])?;
            after.push(id.clone());
            reports.push(submitted(job, id));
        }
        let id = engine.submit(&jobs.assemble, 1, &after)?;
        reports.push(submitted(&jobs.assemble, id));
        return Ok(Outcome::Ran {
            jobs: reports,
            succeeded: true,
        });
    }
    let mut reports = follow_all(engine, jobs.shards)?;
    if !reports
        .iter()
        .all(|j| j.status == Some(JobStatus::Succeeded))
    {
        reports.push(JobReport {
            name: jobs.assemble.name,
            shard: jobs.assemble.shard,
            attempts: 0,
            status: None,
            message: "not submitted: a shard failed".to_owned(),
            submission_ids: Vec::new(),
        });
        return Ok(Outcome::Ran {
            jobs: reports,
            succeeded: false,
        });
    }
    let mut assemble = follow_all(engine, vec![jobs.assemble])?;
    let succeeded = assemble[0].status == Some(JobStatus::Succeeded);
    reports.append(&mut assemble);
    Ok(Outcome::Ran {
        jobs: reports,
        succeeded,
    })
}

fn submitted(job: &Job, id: String) -> JobReport {
    JobReport {
        name: job.name.clone(),
        shard: job.shard,
        attempts: 1,
        status: None,
        message: String::new(),
        submission_ids: vec![id],
    }
}

/// A job being followed.
struct Followed {
    job: Job,
    report: JobReport,
    done: bool,
}

impl Followed {
    fn id(&self) -> Option<&str> {
        self.report.submission_ids.last().map(String::as_str)
    }
}

/// Submits `jobs` and follows them until each succeeded, or failed `1 + retries` times. On an
/// error it stops the attempts still running before it returns.
fn follow_all(engine: &mut dyn Engine, jobs: Vec<Job>) -> Result<Vec<JobReport>> {
    let mut followed: Vec<Followed> = jobs
        .into_iter()
        .map(|job| Followed {
            report: JobReport {
                name: job.name.clone(),
                shard: job.shard,
                attempts: 0,
                status: None,
                message: String::new(),
                submission_ids: Vec::new(),
            },
            job,
            done: false,
        })
        .collect();
    if let Err(e) = follow_each(engine, &mut followed) {
        for f in followed.iter().filter(|f| !f.done) {
            if let Some(id) = f.id() {
                match engine.stop(&f.job, id) {
                    Some(Ok(())) => eprintln!("[{}] stopped ({id})", f.report.name),
                    Some(Err(why)) => {
                        eprintln!("[{}] could not be stopped ({id}): {why}", f.report.name)
                    }
                    None => {}
                }
            }
        }
        return Err(e);
    }
    Ok(followed.into_iter().map(|f| f.report).collect())
}

fn follow_each(engine: &mut dyn Engine, jobs: &mut [Followed]) -> Result<()> {
    for f in jobs.iter_mut() {
        submit_next(engine, f)?;
    }
    loop {
        for f in jobs.iter_mut().filter(|f| !f.done) {
            let id = f.id().expect("submitted").to_owned();
            let Some(poll) = engine.poll(&f.job, &id)? else {
                continue;
            };
            if !poll.status.is_terminal() {
                continue;
            }
            f.report.status = Some(poll.status);
            f.report.message = poll.message.clone();
            if poll.status == JobStatus::Succeeded {
                f.done = true;
                continue;
            }
            let again = f.report.attempts <= engine.retries();
            eprintln!(
                "[{}] attempt {} {}: {}; {}",
                f.report.name,
                f.report.attempts,
                poll.status,
                poll.message.lines().next().unwrap_or("").trim(),
                if again {
                    "submitting it again"
                } else {
                    "no retries left"
                }
            );
            if again {
                submit_next(engine, f)?;
            } else {
                f.done = true;
            }
        }
        if jobs.iter().all(|f| f.done) {
            return Ok(());
        }
        engine.pause()?;
    }
}

/// Submits the job's next attempt.
fn submit_next(engine: &mut dyn Engine, f: &mut Followed) -> Result<()> {
    f.report.attempts += 1;
    let id = engine.submit(&f.job, f.report.attempts, &[])?;
    f.report.submission_ids.push(id);
    Ok(())
}

/// A pipeline whose hosts only read the remote store cannot be built in shards: a shard's
/// results reach the assemble only through the store.
pub fn refuse_read_only(cfg: &Config) -> Result<()> {
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
pub fn check_template(template: &str) -> Result<()> {
    if template.is_empty() || template.contains(['"', '\n', '\0']) || template.ends_with('\\') {
        return Err(Error::input(format!(
            "`--local-cache {template:?}`: the template is expanded by the node's shell inside \
             double quotes; it must be non-empty and hold no `\"`, newline or trailing `\\`"
        )));
    }
    Ok(())
}

/// The r2e executable the jobs run: `given`, made absolute, or this one.
pub fn executable(given: Option<&std::path::Path>) -> Result<PathBuf> {
    match given {
        Some(path) => std::path::absolute(path)
            .map_err(|e| Error::input(format!("`--r2e {}`: {e}", path.display()))),
        None => std::env::current_exe()
            .map_err(|e| Error::env(format!("cannot tell this executable's path: {e}"))),
    }
}

/// `s` as one literal shell word: single quotes (a `'` inside as `'\''`).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A path as one literal shell word.
pub fn quote_path(path: &std::path::Path) -> String {
    quote(&path.to_string_lossy())
}
