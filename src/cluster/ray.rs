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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use r2e_core::config::{self, Backend, RemoteCache};
use r2e_core::error::{Error, Result};

/// What `r2e cluster ray` was asked.
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
    /// Custom resources each job's entry point needs (`entrypoint_resources`).
    pub resources: BTreeMap<String, f64>,
    /// How many times a failed or stopped job is submitted again.
    pub retries: u32,
    /// The r2e executable the workers run (default: this one's path).
    pub r2e: Option<PathBuf>,
    /// How often the jobs are asked for their status and logs.
    pub poll: Duration,
}

/// A job's status, as Ray's Job Submission API names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum JobStatus {
    /// Waiting for resources (or its runtime environment) to start.
    Pending,
    /// Its entry point is running.
    Running,
    /// Stopped through the API.
    Stopped,
    /// Its entry point exited 0.
    Succeeded,
    /// Its entry point exited non-zero, or its host or supervisor died.
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

/// What happened to one job (a shard or the assemble), over its attempts.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    /// `shard 0/4`, or `assemble`.
    pub name: String,
    /// The shard's index, `None` for the assemble.
    pub shard: Option<u32>,
    /// Submissions made (1 plus the retries used); 0 when it was never submitted.
    pub attempts: u32,
    /// The last attempt's status; `None` when it was never submitted.
    pub status: Option<JobStatus>,
    /// Ray's message about the last attempt.
    pub message: String,
    /// The submission id of each attempt, in order.
    pub submission_ids: Vec<String>,
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

/// One job to run: its name and entry point.
struct Spec {
    name: String,
    shard: Option<u32>,
    entrypoint: String,
}

/// Checks the options and the pipeline and makes the jobs' entry points: the shards', then the
/// assemble's. Nothing is sent.
fn plan(opts: &RayOptions) -> Result<(Url, RemoteCache, Vec<Spec>, Spec)> {
    if opts.shards == 0 {
        return Err(Error::input("`--shards` must be at least 1"));
    }
    let address = parse_address(&opts.address)?;
    if !(opts.cpus.is_finite() && opts.cpus >= 0.0) {
        return Err(Error::input(format!(
            "`--cpus {}`: give a number of CPUs, 0 or more",
            opts.cpus
        )));
    }
    super::check_template(&opts.local_cache)?;
    let cfg = config::load(&opts.pipeline)?;
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
    super::refuse_read_only(&cfg)?;
    if cfg.sandbox.backend == Backend::Docker {
        eprintln!(
            "warning: `{}` selects the docker sandbox (`[sandbox] backend = \"docker\"`); the \
             builds on the Ray workers need a Docker daemon there, or `backend = \"local\"` \
             (bubblewrap)",
            cfg.file.display()
        );
    }
    let r2e = match &opts.r2e {
        Some(path) => std::path::absolute(path)
            .map_err(|e| Error::input(format!("`--r2e {}`: {e}", path.display())))?,
        None => std::env::current_exe()
            .map_err(|e| Error::env(format!("cannot tell this executable's path: {e}")))?,
    };
    let build = format!(
        "{} build {}",
        super::quote_path(&r2e),
        super::quote_path(&cfg.file)
    );
    let cache = format!("--cache \"{}\"", opts.local_cache);
    let given = match &opts.remote_cache {
        Some(r) => format!(" --remote-cache {}", super::quote(&r.url)),
        None => String::new(),
    };
    let n = opts.shards;
    let shards = (0..n)
        .map(|i| Spec {
            name: format!("shard {i}/{n}"),
            shard: Some(i),
            entrypoint: format!("{build} --shard {i}/{n} {cache}{given}"),
        })
        .collect();
    let assemble = Spec {
        name: "assemble".to_owned(),
        shard: None,
        entrypoint: format!("{build} {cache}{given}"),
    };
    Ok((address, remote, shards, assemble))
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

/// A job being followed: its current attempt and how much of its log was printed.
struct Follow {
    report: JobReport,
    entrypoint: String,
    /// The current attempt's submission id.
    id: String,
    /// Bytes of the current attempt's log already printed.
    printed: usize,
    /// The last status seen of the current attempt.
    seen: Option<JobStatus>,
    done: bool,
}

/// How long the job server may fail to answer before the command gives up on it.
const LOST_AFTER: Duration = Duration::from_secs(120);

/// Runs the shards, then the assemble, following each to its end. An error is returned only
/// when the cluster cannot be used (bad input, the job server gone); a job that failed for
/// good is in the report, with `succeeded` false.
pub fn run(opts: &RayOptions) -> Result<Report> {
    let (base, remote, shards, assemble) = plan(opts)?;
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| Error::env(format!("cannot make an HTTP client: {e}")))?;
    let api = Api { base, http };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::env(format!("cannot start an async runtime: {e}")))?;
    runtime.block_on(async {
        let ray_version = api.version().await?;
        eprintln!(
            "ray {ray_version} at {}: {} shard(s), remote cache {}",
            opts.address, opts.shards, remote.url
        );
        let mut report = Report {
            address: opts.address.clone(),
            ray_version,
            remote_cache: remote.url.clone(),
            jobs: Vec::new(),
            succeeded: false,
        };
        // A name for this run, which the submission ids carry (unique per attempt).
        let run = {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            format!("{:x}{:05x}", now.as_secs(), std::process::id() & 0xfffff)
        };
        let mut jobs = follow_all(&api, opts, &run, shards).await?;
        let shards_ok = jobs.iter().all(|j| j.status == Some(JobStatus::Succeeded));
        report.jobs.append(&mut jobs);
        if !shards_ok {
            report.jobs.push(JobReport {
                name: assemble.name,
                shard: None,
                attempts: 0,
                status: None,
                message: "not submitted: a shard failed".to_owned(),
                submission_ids: Vec::new(),
            });
            return Ok(report);
        }
        let mut jobs = follow_all(&api, opts, &run, vec![assemble]).await?;
        report.succeeded = jobs[0].status == Some(JobStatus::Succeeded);
        report.jobs.append(&mut jobs);
        Ok(report)
    })
}

/// The submission id of a job's attempt: `r2e-RUN-shard-I-of-N-aK` or `r2e-RUN-assemble-aK`.
fn submission_id(run: &str, spec: &JobReport, opts: &RayOptions, attempt: u32) -> String {
    match spec.shard {
        Some(i) => format!("r2e-{run}-shard-{i}-of-{}-a{attempt}", opts.shards),
        None => format!("r2e-{run}-assemble-a{attempt}"),
    }
}

/// The request body of a job's submission: no `runtime_env`, only its name as metadata.
fn request(opts: &RayOptions, follow: &Follow) -> Value {
    let mut body = json!({
        "entrypoint": follow.entrypoint,
        "submission_id": follow.id,
        "entrypoint_num_cpus": opts.cpus,
        "metadata": {"r2e": follow.report.name},
    });
    if let Some(m) = opts.memory {
        body["entrypoint_memory"] = json!(m);
    }
    if !opts.resources.is_empty() {
        body["entrypoint_resources"] = json!(opts.resources);
    }
    body
}

/// Submits `specs` and follows them until each succeeded or failed `1 + retries` times. On an
/// error, or when this process is interrupted (`SIGINT`, `SIGTERM`), it stops the attempts
/// still running before it returns.
async fn follow_all(
    api: &Api,
    opts: &RayOptions,
    run: &str,
    specs: Vec<Spec>,
) -> Result<Vec<JobReport>> {
    let mut jobs: Vec<Follow> = specs
        .into_iter()
        .map(|s| Follow {
            report: JobReport {
                name: s.name,
                shard: s.shard,
                attempts: 0,
                status: None,
                message: String::new(),
                submission_ids: Vec::new(),
            },
            entrypoint: s.entrypoint,
            id: String::new(),
            printed: 0,
            seen: None,
            done: false,
        })
        .collect();
    if let Err(e) = drive(api, opts, run, &mut jobs).await {
        for job in jobs.iter().filter(|j| !j.done && !j.id.is_empty()) {
            match api.stop(&job.id).await {
                Ok(()) => eprintln!("[{}] stopped ({})", job.report.name, job.id),
                Err(why) => eprintln!(
                    "[{}] could not be stopped ({}): {why}",
                    job.report.name, job.id
                ),
            }
        }
        return Err(e);
    }
    Ok(jobs.into_iter().map(|j| j.report).collect())
}

/// Submits the jobs, then polls them every `opts.poll`: prints their new log text and status
/// changes, submits a failed or stopped attempt again while retries are left.
async fn drive(api: &Api, opts: &RayOptions, run: &str, jobs: &mut [Follow]) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = |kind| signal(kind).map_err(|e| Error::env(format!("cannot watch signals: {e}")));
    let (mut interrupt, mut terminate) = (
        signals(SignalKind::interrupt())?,
        signals(SignalKind::terminate())?,
    );
    for job in jobs.iter_mut() {
        submit(api, opts, run, job).await?;
    }
    let mut unanswered: Option<Instant> = None;
    while jobs.iter().any(|j| !j.done) {
        tokio::select! {
            _ = tokio::time::sleep(opts.poll) => {}
            _ = interrupt.recv() => return Err(Error::env("interrupted")),
            _ = terminate.recv() => return Err(Error::env("terminated")),
        }
        for job in jobs.iter_mut().filter(|j| !j.done) {
            let info = match api.info(&job.id).await {
                Ok(info) => {
                    unanswered = None;
                    info
                }
                Err(why) => {
                    let since = *unanswered.get_or_insert_with(Instant::now);
                    if since.elapsed() > LOST_AFTER {
                        return Err(Error::env(format!(
                            "the Ray job server at {} has not answered for {}s: {why}",
                            opts.address,
                            LOST_AFTER.as_secs()
                        )));
                    }
                    continue;
                }
            };
            print_logs(api, job, info.status.is_terminal()).await;
            if job.seen != Some(info.status) {
                eprintln!("[{}] {} ({})", job.report.name, info.status, job.id);
                job.seen = Some(info.status);
            }
            if !info.status.is_terminal() {
                continue;
            }
            let message = info.message.unwrap_or_default();
            job.report.status = Some(info.status);
            job.report.message = message.clone();
            if info.status == JobStatus::Succeeded {
                job.done = true;
                continue;
            }
            let again = job.report.attempts <= opts.retries;
            eprintln!(
                "[{}] attempt {} {}: {}; {}",
                job.report.name,
                job.report.attempts,
                info.status,
                first_line(&message),
                if again {
                    "submitting it again"
                } else {
                    "no retries left"
                }
            );
            if again {
                submit(api, opts, run, job).await?;
            } else {
                job.done = true;
            }
        }
    }
    Ok(())
}

/// Submits the job's next attempt under a fresh submission id.
async fn submit(api: &Api, opts: &RayOptions, run: &str, job: &mut Follow) -> Result<()> {
    job.report.attempts += 1;
    job.id = submission_id(run, &job.report, opts, job.report.attempts);
    job.printed = 0;
    job.seen = None;
    api.submit(&request(opts, job)).await?;
    job.report.submission_ids.push(job.id.clone());
    eprintln!(
        "[{}] submitted ({}): {}",
        job.report.name, job.id, job.entrypoint
    );
    Ok(())
}

/// Prints the text of the job's log that is new since the last call, a line at a time, each
/// after the job's name; a line still being written waits for its end, unless the attempt
/// has `ended`.
async fn print_logs(api: &Api, job: &mut Follow, ended: bool) {
    let Some(logs) = api.logs(&job.id).await else {
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
        text.push_str(&format!("[{}] {line}\n", job.report.name));
    }
    eprint!("{text}");
    job.printed += upto;
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}
