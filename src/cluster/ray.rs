//! `r2e cluster ray`: a pipeline built in shards on a Ray cluster, through Ray's Job Submission
//! REST API (`POST /api/jobs/`, `GET /api/jobs/{id}`, `GET /api/jobs/{id}/logs`,
//! `POST /api/jobs/{id}/stop`), with plain HTTP: the submitting host needs no Ray.
//!
//! Each shard is one job whose entry point is `r2e build PIPELINE --shard I/N --cache LOCAL`,
//! the results going to the remote cache. The command follows every job to its end, printing
//! the new text of its logs on stderr as it arrives, and submits a job that failed or was
//! stopped again under a fresh submission id, up to `--retries` times. Once every shard
//! succeeded it submits the assemble (`r2e build PIPELINE --cache LOCAL`, no shard), follows it
//! the same way, and returns what happened to each job.
//!
//! Nothing secret goes to Ray: the jobs carry no `runtime_env` and only the shard's name in
//! their metadata (Ray keeps both in its control store and shows them on its dashboard). The
//! store's credentials come from the environment the workers' `ray start` ran in, as on Slurm
//! nodes; a remote cache URL with credentials in it is refused before anything is sent.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::signal::unix::{Signal, SignalKind, signal};

use r2e_core::config::{Backend, RemoteCache, Shard};
use r2e_core::error::{Error, Result};
use r2e_pipeline::cluster::{
    self, Engine, Follow, Job, JobReport, JobStatus, Jobs, Plan, Poll, check_template, quote,
    quote_path,
};

/// What `r2e cluster ray` was asked.
#[derive(Default)]
pub struct RayOptions {
    /// The pipeline file; the workers read it at the same path (a shared file system).
    pub pipeline: PathBuf,
    /// The Ray dashboard's address (`http://HEAD:8265`).
    pub address: String,
    /// Shards, one job each (at least 1).
    pub shards: u32,
    /// The remote cache's URL; default: the pipeline's `[cache] remote` (one is needed).
    pub remote_cache: Option<RemoteCache>,
    /// The local cache's folder on a worker, expanded by the worker's shell inside double
    /// quotes.
    pub local_cache: String,
    /// CPUs reserved for each job's entry point (`entrypoint_num_cpus`).
    pub cpus: f64,
    /// Memory reserved for each job's entry point, in bytes (`entrypoint_memory`).
    pub memory: Option<u64>,
    /// The shard plan the shards follow (`r2e status --plan N --json`), at the same path on
    /// every worker.
    pub plan: Option<PathBuf>,
    /// Custom resources each job's entry point needs (`entrypoint_resources`).
    pub resources: BTreeMap<String, f64>,
    /// How many times a failed or stopped job is submitted again.
    pub retries: u32,
    /// The r2e executable the workers run (default: this one's path).
    pub r2e: Option<PathBuf>,
    /// How often the jobs are asked for their status and logs.
    pub poll: Duration,
}

/// The outcome of `r2e cluster ray`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The Ray dashboard's address.
    pub address: String,
    /// The Ray version the cluster runs.
    pub ray_version: String,
    /// The remote cache the shards stored their results in.
    pub remote_cache: String,
    /// The shards' jobs, in order, then the assemble's.
    pub jobs: Vec<JobReport>,
    /// Whether the assemble succeeded (every shard did before it).
    pub succeeded: bool,
}

impl Report {
    /// A line per job: its name, attempts, final status and last submission id.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for job in &self.jobs {
            text.push_str(&format!(
                "{:<12} attempts {}  {:<9}  {}\n",
                job.name,
                job.attempts,
                job.status.map_or("-".to_owned(), |s| s.to_string()),
                job.submission_ids.last().map_or("-", String::as_str),
            ));
        }
        text
    }
}

/// The Ray engine: its options, and once the jobs are made, their entry points and the client
/// of the job server.
#[derive(Default)]
pub struct Ray {
    pub opts: RayOptions,
    /// The remote cache the shards store their results in.
    remote: Option<RemoteCache>,
    /// Each job's name and entry point, the shards' then the assemble's.
    entrypoints: Vec<(String, String)>,
    /// A name for this run, which the submission ids carry (unique per attempt).
    run: String,
    client: Option<Client>,
    /// The Ray version the cluster runs, once asked.
    ray_version: Option<String>,
    /// What was printed of each attempt's log and the last status seen of it, by its id.
    attempts: HashMap<String, Attempt>,
    /// Since when the job server does not answer.
    unanswered: Option<Instant>,
}

/// The job server's client, on a small runtime of its own, and the signals that interrupt a
/// run.
struct Client {
    api: Api,
    runtime: tokio::runtime::Runtime,
    interrupt: Signal,
    terminate: Signal,
}

/// An attempt being followed: how much of its log was printed, the last status seen.
#[derive(Default)]
struct Attempt {
    printed: usize,
    seen: Option<JobStatus>,
}

/// How long the job server may fail to answer before the command gives up on it.
const LOST_AFTER: Duration = Duration::from_secs(120);

/// Runs the shards, then the assemble, following each to its end. An error is returned only
/// when the cluster cannot be used (bad input, the job server gone); a job that failed for
/// good is in the report, with `succeeded` false.
pub fn run(opts: RayOptions) -> Result<Report> {
    let (pipeline, shards, cost) = (opts.pipeline.clone(), opts.shards, opts.plan.clone());
    let mut ray = Ray {
        opts,
        ..Ray::default()
    };
    let cluster::Outcome::Ran { jobs, succeeded } =
        cluster::drive(&mut ray, &pipeline, shards, cost.as_deref(), true)?
    else {
        unreachable!("submitted")
    };
    Ok(Report {
        address: ray.opts.address.clone(),
        ray_version: ray.ray_version.unwrap_or_default(),
        remote_cache: ray.remote.map(|r| r.url).unwrap_or_default(),
        jobs,
        succeeded,
    })
}

impl Engine for Ray {
    fn name(&self) -> &'static str {
        "ray"
    }

    /// Ray's jobs say `--shard I/N` themselves.
    fn shard_from_env(
        &self,
        _var: &dyn Fn(&str) -> Option<String>,
        _shards: Option<u32>,
    ) -> Option<Result<Shard>> {
        None
    }

    fn check(&self) -> Result<()> {
        parse_address(&self.opts.address)?;
        if !(self.opts.cpus.is_finite() && self.opts.cpus >= 0.0) {
            return Err(Error::input(format!(
                "`--cpus {}`: give a number of CPUs, 0 or more",
                self.opts.cpus
            )));
        }
        check_template(&self.opts.local_cache)
    }

    /// The jobs' entry points: `r2e build PIPELINE --shard I/N --cache LOCAL` for each shard,
    /// the same without `--shard` for the assemble. Nothing is sent.
    fn render(&mut self, plan: &Plan) -> Result<Jobs> {
        let (opts, cfg) = (&self.opts, &plan.cfg);
        let remote = match opts.remote_cache.clone().or_else(|| cfg.remote.clone()) {
            Some(remote) => remote,
            None => {
                return Err(Error::input(format!(
                    "`r2e cluster ray` needs a remote cache: the shards run on other hosts and share \
                     their results through it; give `--remote-cache URL` or `[cache] remote` in `{}`",
                    cfg.file.display()
                )));
            }
        };
        if cfg.sandbox.backend == Backend::Docker {
            eprintln!(
                "warning: `{}` selects the docker sandbox (`[sandbox] backend = \"docker\"`); the \
                 builds on the Ray workers need a Docker daemon there, or `backend = \"local\"` \
                 (bubblewrap)",
                cfg.file.display()
            );
        }
        let r2e = cluster::executable(opts.r2e.as_deref())?;
        let build = format!("{} build {}", quote_path(&r2e), quote_path(&cfg.file));
        let cache = format!("--cache \"{}\"", opts.local_cache);
        let given = match &opts.remote_cache {
            Some(r) => format!(" --remote-cache {}", quote(&r.url)),
            None => String::new(),
        };
        let n = plan.shards;
        let cost = match &plan.cost {
            Some(c) => format!(" --plan {}", quote_path(&c.path)),
            None => String::new(),
        };
        let mut shards = Vec::new();
        for i in 0..n {
            let name = format!("shard {i}/{n}");
            let entrypoint = format!("{build} --shard {i}/{n} {cache}{given}{cost}");
            self.entrypoints.push((name.clone(), entrypoint));
            shards.push(Job {
                name,
                shard: Some(i),
            });
        }
        let assemble = Job {
            name: "assemble".to_owned(),
            shard: None,
        };
        self.entrypoints
            .push((assemble.name.clone(), format!("{build} {cache}{given}")));
        self.remote = Some(remote);
        self.client = Some(Client::new(parse_address(&self.opts.address)?)?);
        self.run = {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            format!("{:x}{:05x}", now.as_secs(), std::process::id() & 0xfffff)
        };
        Ok(Jobs { shards, assemble })
    }

    /// The jobs' entry points (`r2e cluster ray` always submits them).
    fn show(&self) -> String {
        self.entrypoints
            .iter()
            .map(|(name, e)| format!("{name}: {e}\n"))
            .collect()
    }

    fn follow(&self) -> Follow {
        Follow::Driver
    }

    fn retries(&self) -> u32 {
        self.opts.retries
    }

    /// Submits the attempt under a fresh submission id, asking the job server for its Ray
    /// version first.
    fn submit(&mut self, job: &Job, attempt: u32, _after: &[String]) -> Result<String> {
        let client = self.client.as_ref().expect("rendered");
        if self.ray_version.is_none() {
            let version = client.runtime.block_on(client.api.version())?;
            eprintln!(
                "ray {version} at {}: {} shard(s), remote cache {}",
                self.opts.address,
                self.opts.shards,
                self.remote.as_ref().map_or("", |r| r.url.as_str())
            );
            self.ray_version = Some(version);
        }
        let id = match job.shard {
            Some(i) => format!(
                "r2e-{}-shard-{i}-of-{}-a{attempt}",
                self.run, self.opts.shards
            ),
            None => format!("r2e-{}-assemble-a{attempt}", self.run),
        };
        let (_, entrypoint) = self
            .entrypoints
            .iter()
            .find(|(name, _)| *name == job.name)
            .expect("a job rendered");
        client.runtime.block_on(
            client
                .api
                .submit(&request(&self.opts, job, entrypoint, &id)),
        )?;
        eprintln!("[{}] submitted ({id}): {entrypoint}", job.name);
        self.attempts.insert(id.clone(), Attempt::default());
        Ok(id)
    }

    /// Asks the job server how the attempt goes; prints its new log text, and its status when
    /// it changed.
    fn poll(&mut self, job: &Job, id: &str) -> Result<Option<Poll>> {
        let client = self.client.as_ref().expect("rendered");
        let info = match client.runtime.block_on(client.api.info(id)) {
            Ok(info) => {
                self.unanswered = None;
                info
            }
            Err(why) => {
                let since = *self.unanswered.get_or_insert_with(Instant::now);
                if since.elapsed() > LOST_AFTER {
                    return Err(Error::env(format!(
                        "the Ray job server at {} has not answered for {}s: {why}",
                        self.opts.address,
                        LOST_AFTER.as_secs()
                    )));
                }
                return Ok(None);
            }
        };
        let attempt = self.attempts.entry(id.to_owned()).or_default();
        client.runtime.block_on(print_logs(
            &client.api,
            &job.name,
            id,
            attempt,
            info.status.is_terminal(),
        ));
        if attempt.seen != Some(info.status) {
            eprintln!("[{}] {} ({id})", job.name, info.status);
            attempt.seen = Some(info.status);
        }
        Ok(Some(Poll {
            status: info.status,
            message: info.message.unwrap_or_default(),
        }))
    }

    /// Waits `--poll`, unless this process is interrupted (`SIGINT`, `SIGTERM`): an error,
    /// after which the driver stops the attempts still running.
    fn pause(&mut self) -> Result<()> {
        let poll = self.opts.poll;
        let Client {
            runtime,
            interrupt,
            terminate,
            ..
        } = self.client.as_mut().expect("rendered");
        runtime.block_on(async {
            tokio::select! {
                _ = tokio::time::sleep(poll) => Ok(()),
                _ = interrupt.recv() => Err(Error::env("interrupted")),
                _ = terminate.recv() => Err(Error::env("terminated")),
            }
        })
    }

    fn stop(&mut self, _job: &Job, id: &str) -> Option<std::result::Result<(), String>> {
        let client = self.client.as_ref().expect("rendered");
        Some(client.runtime.block_on(client.api.stop(id)))
    }
}

impl Client {
    fn new(base: Url) -> Result<Client> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::env(format!("cannot make an HTTP client: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::env(format!("cannot start an async runtime: {e}")))?;
        let (interrupt, terminate) = {
            let _in_runtime = runtime.enter();
            let signals =
                |kind| signal(kind).map_err(|e| Error::env(format!("cannot watch signals: {e}")));
            (
                signals(SignalKind::interrupt())?,
                signals(SignalKind::terminate())?,
            )
        };
        Ok(Client {
            api: Api { base, http },
            runtime,
            interrupt,
            terminate,
        })
    }
}

/// The request body of a job's submission: no `runtime_env`, only its name as metadata.
fn request(opts: &RayOptions, job: &Job, entrypoint: &str, id: &str) -> Value {
    let mut body = json!({
        "entrypoint": entrypoint,
        "submission_id": id,
        "entrypoint_num_cpus": opts.cpus,
        "metadata": {"r2e": job.name},
    });
    if let Some(m) = opts.memory {
        body["entrypoint_memory"] = json!(m);
    }
    if !opts.resources.is_empty() {
        body["entrypoint_resources"] = json!(opts.resources);
    }
    body
}

/// The dashboard's address: `http(s)://HOST[:PORT][/PATH]`, without credentials.
fn parse_address(text: &str) -> Result<Url> {
    let bad = |why: &str| Error::input(format!("`--address {text}`: {why}"));
    let mut url = Url::parse(text).map_err(|e| {
        bad(&format!(
            "{e}; give the Ray dashboard's URL, e.g. http://HEAD:8265"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(bad(
            "give the Ray dashboard's http:// or https:// URL, e.g. http://HEAD:8265",
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("the address may not hold credentials"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("the address takes no query or fragment"));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// `--memory`: bytes, or a number with `K`, `M`, `G` or `T` (powers of 1024).
pub fn parse_memory(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "`{text}` is not a memory size (e.g. 4G, 512M, 1073741824)"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{text}` is not a memory size (e.g. 4G, 512M, 1073741824)"))
}

/// `--resources`: each a JSON object (`{"accel": 1}`) or `KEY=VALUE`, merged; every value a
/// number, 0 or more.
pub fn parse_resources(items: &[String]) -> Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    for item in items {
        let bad = |why: &str| {
            Error::input(format!(
                "`--resources {item}`: {why}; give a JSON object such as '{{\"accel\": 1}}' or KEY=VALUE"
            ))
        };
        let pairs: Vec<(String, Value)> = if item.trim_start().starts_with('{') {
            match serde_json::from_str::<Value>(item) {
                Ok(Value::Object(map)) => map.into_iter().collect(),
                _ => return Err(bad("not a JSON object")),
            }
        } else {
            let (k, v) = item.split_once('=').ok_or_else(|| bad("no `=`"))?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| bad("the value is not a number"))?;
            vec![(k.trim().to_owned(), json!(v))]
        };
        for (k, v) in pairs {
            let v = v
                .as_f64()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(&format!("`{k}` is not a number, 0 or more")))?;
            if k.is_empty() {
                return Err(bad("a resource without a name"));
            }
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// The job server's HTTP client: a base URL and reqwest.
struct Api {
    base: Url,
    http: reqwest::Client,
}

/// A job's status as `GET /api/jobs/{id}` answers it (only the fields read).
#[derive(Deserialize)]
struct JobInfo {
    status: JobStatus,
    #[serde(default)]
    message: Option<String>,
}

impl Api {
    fn url(&self, path: &str) -> Url {
        // `base` ends with `/`; `path` has none in front.
        self.base.join(path).expect("a relative path joins")
    }

    /// `GET /api/version`: the Ray version (an environmental error when nothing answers as a
    /// Ray job server does).
    async fn version(&self) -> Result<String> {
        let url = self.url("api/version");
        let answer =
            self.http.get(url.clone()).send().await.map_err(|e| {
                Error::env(format!("cannot reach the Ray job server at {url}: {e}"))
            })?;
        let status = answer.status();
        let body: Value = answer.json().await.map_err(|e| {
            Error::env(format!(
                "{url} answered {status}, not as a Ray job server does: {e}"
            ))
        })?;
        body["ray_version"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::env(format!("{url} answered without a Ray version: {body}")))
    }

    /// `POST /api/jobs/`. A transport failure or a 5xx is tried again (up to five times,
    /// waiting 1, 2, 4, 8 s) under the same submission id; when an earlier try may have been
    /// taken, Ray's "already exists" for that id means it was. Another 4xx is final.
    async fn submit(&self, body: &Value) -> Result<()> {
        let url = self.url("api/jobs/");
        let mut maybe_taken = false;
        let mut wait = Duration::from_secs(1);
        for attempt in 1..=5 {
            let last = attempt == 5;
            let answer = match self.http.post(url.clone()).json(body).send().await {
                Ok(answer) => answer,
                Err(e) if !last => {
                    eprintln!("warning: submitting a job to {url} failed ({e}); trying again");
                    maybe_taken = true;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    continue;
                }
                Err(e) => return Err(Error::env(format!("cannot submit a job to {url}: {e}"))),
            };
            let status = answer.status();
            let text = answer.text().await.unwrap_or_default();
            if status.is_success() {
                return Ok(());
            }
            if status.is_client_error() {
                if maybe_taken && text.contains("already exists") {
                    return Ok(());
                }
                return Err(Error::input(format!(
                    "Ray refused the job ({status}): {}",
                    last_line(&text)
                )));
            }
            if last {
                return Err(Error::env(format!(
                    "Ray could not take the job ({status}): {}",
                    last_line(&text)
                )));
            }
            eprintln!(
                "warning: Ray could not take a job ({status}: {}); trying again",
                last_line(&text)
            );
            maybe_taken = true;
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        unreachable!("the last try returns")
    }

    /// `GET /api/jobs/{id}`.
    async fn info(&self, id: &str) -> std::result::Result<JobInfo, String> {
        let answer = self
            .http
            .get(self.url(&format!("api/jobs/{id}")))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.status();
        if !status.is_success() {
            let text = answer.text().await.unwrap_or_default();
            return Err(format!("{status}: {}", last_line(&text)));
        }
        answer.json().await.map_err(|e| e.to_string())
    }

    /// `GET /api/jobs/{id}/logs`: the whole log so far (`None` when it cannot be had now, as
    /// while the host that runs the job is gone).
    async fn logs(&self, id: &str) -> Option<String> {
        let answer = self
            .http
            .get(self.url(&format!("api/jobs/{id}/logs")))
            .send()
            .await
            .ok()?;
        if !answer.status().is_success() {
            return None;
        }
        let body: Value = answer.json().await.ok()?;
        body["logs"].as_str().map(str::to_owned)
    }

    /// `POST /api/jobs/{id}/stop`.
    async fn stop(&self, id: &str) -> std::result::Result<(), String> {
        let answer = self
            .http
            .post(self.url(&format!("api/jobs/{id}/stop")))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if answer.status().is_success() {
            Ok(())
        } else {
            Err(answer.status().to_string())
        }
    }
}

/// The last non-empty line of a server's error text (Ray answers a traceback).
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// Prints the text of the job's log that is new since the last call, a line at a time, each
/// after the job's name; a line still being written waits for its end, unless the attempt
/// has `ended`.
async fn print_logs(api: &Api, name: &str, id: &str, job: &mut Attempt, ended: bool) {
    let Some(logs) = api.logs(id).await else {
        return;
    };
    if logs.len() < job.printed || !logs.is_char_boundary(job.printed) {
        // Not the log that was read before (shorter): print it anew.
        job.printed = 0;
    }
    let new = &logs[job.printed..];
    let upto = match new.rfind('\n') {
        _ if ended => new.len(),
        Some(end) => end + 1,
        None => 0,
    };
    if upto == 0 {
        return;
    }
    let mut text = String::new();
    for line in new[..upto].trim_end_matches('\n').split('\n') {
        text.push_str(&format!("[{}] {line}\n", name));
    }
    eprint!("{text}");
    job.printed += upto;
}
