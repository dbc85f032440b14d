//! The build: check out the repositories, decide whether anything changed since the last build
//! of this output, feed the salsa database, run the stages in parallel, write the outputs, and
//! report what ran. The services (sandbox, model client) are built once here, from the
//! configuration, and handed down.
//!
//! A no-op build is decided before any parsing: the build fingerprint (settings, stage limit, and
//! every repository's identity, itself a hash of its files' content hashes) is compared with the
//! one recorded in `<output>/.r2e/state`, and the outputs are checked against their recorded
//! hashes. Then nothing is parsed, read or rewritten.

pub mod cluster;
mod dataset;
pub mod memo;
pub mod outputs;
pub mod shard_plan;

use crate::session::{Session, progress};
use crate::stages::Stage;
use r2e_core::records::OutputFile;
use r2e_exec::llm::prompts::TemplateSets;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rayon::prelude::*;
use serde::Serialize;

use crate::db::{self, Db, Repo, Settings, SourceFile};
use crate::stages::checkout::Checkout;
use outputs::{Output, Recorded, State, read_state, stat};
use r2e_core::cache::Cache;
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::log;
use r2e_core::records::{Counts, EnvLine, FailureRecord, StageCounts, Summary, read_jsonl};
use r2e_exec::services::Services;

/// Options of one build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub until: Stage,
    pub jobs: Option<usize>,
}

/// What identifies this build of r2e for the no-op check: its version and its executable's size
/// and modification time, so that a rebuilt r2e (new analysis, new embedded scripts) never
/// mistakes an output of the previous one for up to date. The action caches carry their own
/// recipe versions; this decides whether the build may skip everything, and which persisted
/// analysis it may reuse (`memo`: results of this very program only).
pub(crate) fn build_identity() -> String {
    let exe = std::env::current_exe()
        .and_then(|p| p.metadata())
        .ok()
        .map(|m| {
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            format!("{}:{mtime}", m.len())
        })
        .unwrap_or_default();
    format!("{}+{exe}", env!("CARGO_PKG_VERSION"))
}

/// The fingerprint of a build: everything that decides its outputs.
pub fn fingerprint(
    cfg: &Config,
    opts: &BuildOptions,
    checkouts: &[Arc<Checkout>],
    templates: &TemplateSets,
) -> Hash {
    /// What one dataset (the pipeline's own, or a variant's) is made from.
    #[derive(Serialize)]
    struct Stages<'a> {
        name: Option<&'a str>,
        extract: &'a r2e_core::config::ExtractConfig,
        context: &'a r2e_core::config::ContextConfig,
        generate: &'a r2e_core::config::GenerateConfig,
        validate: &'a r2e_core::config::ValidateConfig,
        select: &'a r2e_core::config::SelectConfig,
        refine: &'a r2e_core::config::RefineConfig,
        evaluate: &'a r2e_core::config::EvaluateConfig,
        bugfix: &'a Option<r2e_core::config::BugfixConfig>,
        /// The prompt templates in use (their texts' hashes).
        prompts: Vec<(r2e_core::config::Template, String, Hash)>,
    }
    #[derive(Serialize)]
    struct Key<'a> {
        version: &'a str,
        env: &'a r2e_core::config::EnvConfig,
        sandbox: &'a r2e_core::config::SandboxConfig,
        until: Stage,
        /// Each repository's name, tree, identity (a clean work tree's commit, which its
        /// instances and its functions' dates come from, as well as its files), revision and
        /// scope.
        repos: Vec<(
            &'a str,
            &'a str,
            &'a str,
            Option<&'a str>,
            &'a r2e_core::config::Scope,
        )>,
        /// The providers asked.
        providers: Vec<(&'a str, &'a str, r2e_core::config::Api)>,
        /// The interpreter `[env] python` names, as this machine resolves it now.
        interpreter: Option<(PathBuf, u64, u128)>,
        builds: Vec<Stages<'a>>,
    }
    let builds = cfg
        .builds()
        .into_iter()
        .map(|(name, c)| Stages {
            name,
            extract: &c.extract,
            context: &c.context,
            generate: &c.generate,
            validate: &c.validate,
            select: &c.select,
            refine: &c.refine,
            evaluate: &c.evaluate,
            bugfix: &c.bugfix,
            prompts: if c.renders_prompts() {
                templates
                    .get(c)
                    .map(|t| t.sources.clone())
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
        })
        .collect();
    Hash::of_key(&Key {
        providers: cfg
            .providers
            .iter()
            .map(|p| (p.name.as_str(), p.base_url.as_str(), p.api))
            .collect(),
        version: &build_identity(),
        interpreter: interpreter_identity(&cfg.env.python),
        env: &cfg.env,
        sandbox: &cfg.sandbox,
        until: opts.until,
        repos: checkouts
            .iter()
            .zip(&cfg.repos)
            .map(|(c, r)| {
                (
                    c.name.as_str(),
                    c.tree.as_str(),
                    c.identity.as_str(),
                    c.rev.as_deref(),
                    &r.scope,
                )
            })
            .collect(),
        builds,
    })
}

/// The file an interpreter command resolves to (on the `PATH` for a bare name), with its size
/// and modification time: another interpreter put first on the `PATH`, or an upgrade in place,
/// changes the environments' keys, so a build is not a no-op.
fn interpreter_identity(python: &str) -> Option<(PathBuf, u64, u128)> {
    let path = Path::new(python);
    let found = if path.components().count() > 1 {
        Some(path.to_path_buf())
    } else {
        r2e_core::fsutil::find_program(python)
    }?;
    let real = std::fs::canonicalize(&found).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    Some((real, meta.len(), mtime))
}

/// Whether every environment the outputs name is still in the cache (`r2e check` runs in them).
fn envs_present(output: &Path, cache: &Cache) -> bool {
    let Ok(Some(lines)) = read_jsonl::<EnvLine>(&output.join(OutputFile::Envs.name())) else {
        return true;
    };
    lines
        .iter()
        .all(|e| crate::stages::environment::runtime_of(cache, e, Path::new("/")).is_some())
}

/// The analysis settings of every dataset the pipeline builds (its own, or each variant's).
pub fn settings_hash(cfg: &Config) -> Hash {
    let builds: Vec<_> = cfg
        .builds()
        .into_iter()
        .map(|(name, c)| (name, &c.extract, &c.context))
        .collect();
    Hash::of_key(&builds)
}

/// The state of the last build of an output, when there is one that verifies.
pub fn last_build(output: &Path) -> Option<State> {
    read_state(output)
}

/// Runs a build with the services the configuration names (code runs only under bubblewrap),
/// and returns its summary.
pub fn build(cfg: &Config, opts: &BuildOptions) -> Result<Summary> {
    build_with(cfg, opts, &Services::for_config(cfg, false))
}

/// Runs a build with these services.
pub fn build_with(cfg: &Config, opts: &BuildOptions, services: &Services) -> Result<Summary> {
    let started = std::time::Instant::now();
    let remote = cluster::open_remote(cfg, &cluster::trace_path(&cfg.output, None)?, false)?;
    let session = Session::open_remote(cfg, remote)?;
    log::timing("checkout", started.elapsed());
    let remote = session.cache.remote().cloned();
    let summary = build_session(session, opts, services)?;
    if let Some(r) = remote
        && r.lost() > 0
    {
        eprintln!(
            "warning: {} result(s) of this build are in the local cache only: the remote cache `{}` did not take them",
            r.lost(),
            r.url()
        );
    }
    Ok(summary)
}

/// What a shard's build did.
pub struct ShardOutcome {
    /// Its build's summary (`None`: the shard holds no repository).
    pub summary: Option<Summary>,
    /// Where its summary is, beside the output.
    pub summary_file: PathBuf,
    /// Results it could not store in the remote store: the shard failed (exit 1).
    pub lost: u64,
}

/// Builds shard `shard` of the pipeline (its repositories by their names' hash, or as `plan`
/// assigns them): every stage of its repositories, its results stored in
/// the remote store (`cluster`), its summary beside the output; the output itself is not
/// written.
pub fn build_shard(
    cfg: &Config,
    opts: &BuildOptions,
    services: &Services,
    shard: r2e_core::config::Shard,
    plan: Option<&shard_plan::ShardPlan>,
) -> Result<ShardOutcome> {
    if cfg.remote.is_none() {
        return Err(Error::input(format!(
            "`--shard {shard}` needs a remote cache to store its results in: give `[cache] remote = \"URL\"` in `{}` or `--remote-cache URL`",
            cfg.file.display()
        )));
    }
    let mine = cluster::shard_config(cfg, shard, plan);
    let names: Vec<&str> = mine.repos.iter().map(|r| r.name.as_str()).collect();
    eprintln!(
        "shard {shard}: {} of {} repositories{}",
        names.len(),
        cfg.repos.len(),
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({})", names.join(", "))
        }
    );
    let (summary, lost) = if names.is_empty() {
        (None, 0)
    } else {
        let scratch = cluster::scratch_output(cfg);
        let work = mine.clone().with_output(&scratch);
        let remote =
            cluster::open_remote(&work, &cluster::trace_path(&cfg.output, Some(shard))?, true)?;
        let session = Session::open_remote(&work, remote)?;
        let remote = session.cache.remote().cloned();
        let built = build_session(session, opts, services);
        let _ = fs_err::remove_dir_all(scratch.parent().unwrap_or(&scratch));
        (Some(built?), remote.as_ref().map_or(0, |r| r.lost()))
    };
    let summary_file = cluster::write_shard_summary(
        &cfg.output,
        &cluster::ShardSummary {
            shard,
            host: r2e_core::cache::remote::host_name(),
            repos: names,
            lost,
            summary: summary.as_ref(),
        },
    )?;
    Ok(ShardOutcome {
        summary,
        summary_file,
        lost,
    })
}

/// Runs a build on an open session (its repositories checked out).
pub fn build_session(
    session: Session,
    opts: &BuildOptions,
    services: &Services,
) -> Result<Summary> {
    let started = std::time::Instant::now();
    let cfg = &session.cfg;
    if let Some(remote) = session.cache.remote() {
        services.sandbox.share_through(Arc::clone(remote));
    }
    let fp = fingerprint(cfg, opts, &session.checkouts, &session.templates);
    // The output's lock is held from here; its files change only at the commit.
    let out = Output::open(&cfg.output)?;
    let output = out.path.clone();
    let previous = read_state(&output);
    if let Some(summary) = up_to_date(cfg, &session, &output, fp, previous.as_ref()) {
        eprintln!(
            "up to date: nothing changed since the last build ({:.0} ms)",
            started.elapsed().as_secs_f64() * 1000.0
        );
        return Ok(summary);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.unwrap_or(0))
        .build()
        .map_err(|e| Error::env(format!("cannot start worker threads: {e}")))?;
    pool.install(move || run(session, services, opts, out, fp, previous))
}

/// The summary of the last build, all of it cached, when nothing changed since: the same
/// fingerprint, every output as it was written, every environment still there.
fn up_to_date(
    cfg: &Config,
    session: &Session,
    output: &Path,
    fp: Hash,
    previous: Option<&State>,
) -> Option<Summary> {
    let state = previous?;
    let same = state.fingerprint == fp
        && state
            .outputs
            .iter()
            .all(|(name, _, size, mtime)| stat(&output.join(name)) == Some((*size, *mtime)))
        && cfg
            .builds()
            .iter()
            .all(|(_, c)| envs_present(&c.output, &session.cache));
    if !same {
        return None;
    }
    let mut summary = serde_json::from_str::<Summary>(&state.summary_json).ok()?;
    let all_cached = |s: &mut Summary| {
        s.stages.all_cached();
        if let Some(ev) = &mut s.evaluate {
            for counts in [&mut ev.extractions, &mut ev.checks] {
                counts.cached += counts.executed;
                counts.executed = 0;
            }
        }
        for usage in s.llm.values_mut().flat_map(|m| m.values_mut()) {
            usage.cached += usage.executed;
            usage.executed = 0;
        }
        for t in &mut s.time {
            t.all_cached();
        }
    };
    all_cached(&mut summary);
    for (name, v) in summary.variants.0.iter_mut() {
        all_cached(v);
        if let Ok(c) = cfg.variant(name) {
            v.output = c.output.clone();
        }
    }
    summary.output = output.to_path_buf();
    Some(summary)
}

/// Stage timings on stderr (`R2E_LOG=timings`).
struct Lap(std::time::Instant);

impl Lap {
    fn lap(&mut self, what: &str) {
        log::timing(what, self.0.elapsed());
        self.0 = std::time::Instant::now();
    }
}

/// What every dataset of a build shares: failures of the shared stages, environments, and the
/// outputs recorded by the previous build (in the current generation).
struct Shared<'a> {
    failures: &'a [FailureRecord],
    env_lines: &'a [EnvLine],
    envs: &'a crate::stages::environment::Envs,
    previous: Vec<Recorded>,
    current: Option<PathBuf>,
    /// Each repository's parse (its interface fingerprint), in `Session::repos` order; empty
    /// before the parse stage.
    parses: &'a [memo::RepoParse],
    /// Each repository's function dates (`stages::dating`), in `Session::repos` order; `None`
    /// without history; empty before the extract stage.
    dates: &'a [Option<Arc<r2e_core::dates::Dates>>],
    /// Each repository's time in stage `env`, when the build reached it.
    env_times: Option<&'a Vec<(String, r2e_core::records::StageTime)>>,
    /// Slices computed in this build, by repository, extract settings and candidates (the
    /// datasets with the same ones share them).
    slices: std::sync::Mutex<std::collections::HashMap<SlicesKey, Arc<dataset::ComputedSlices>>>,
}

/// What computed slices are shared by: a repository, extract settings and candidates.
type SlicesKey = (Repo, Settings, Vec<r2e_python::resolve::Item>);

/// The shared stages (checkout, parse, env), then every dataset, then the state.
fn run(
    session: Session,
    services: &Services,
    opts: &BuildOptions,
    out: Output,
    fp: Hash,
    previous: Option<State>,
) -> Result<Summary> {
    let started = std::time::Instant::now();
    let s = &session;
    let output = &out.path;
    let staging = out.staging().to_path_buf();
    services.sandbox.remove_leftovers();
    let db = &s.db;
    let files = s.all_files();
    let mut shared = Summary {
        dataset_version: None,
        output: output.to_path_buf(),
        stages: Default::default(),
        counts: Counts {
            repos: s.checkouts.len() as u64,
            files: files.len() as u64,
            ..Counts::default()
        },
        excluded_by: Default::default(),
        llm: Default::default(),
        variants: Default::default(),
        evaluate: None,
        repos: Vec::new(),
        time: Vec::new(),
        retry: Vec::new(),
    };
    let mut failures: Vec<FailureRecord> = Vec::new();
    shared.stages.checkout = checkout_stage(s, previous.as_ref(), &mut failures);
    let mut clock = Lap(std::time::Instant::now());
    let mut parses = Vec::new();
    if opts.until >= Stage::Parse {
        (shared.stages.parse, parses) = parse(s, &files, &mut failures);
        clock.lap("parse");
    }
    let (mut dates, mut date_transient) = (Vec::new(), Vec::new());
    if opts.until >= Stage::Extract {
        (shared.stages.date, dates, date_transient) = date_stage(s);
        clock.lap("date");
    }
    // Environments are per repository, shared by every variant.
    let mut env_lines: Vec<EnvLine> = Vec::new();
    let mut env_transient: Vec<String> = Vec::new();
    let mut envs = crate::stages::environment::Envs::new();
    let mut env_times = Vec::new();
    if opts.until >= Stage::Env {
        let repos: Vec<_> = s
            .checkouts
            .iter()
            .zip(&s.repos)
            .map(|(c, &repo)| (c.clone(), db::external_imports(db, repo).as_ref().clone()))
            .collect();
        let stage = crate::stages::environment::run(
            &s.cfg,
            &s.cache,
            services.sandbox.as_ref(),
            &repos,
            &staging,
            progress,
        )?;
        env_transient = stage.transient;
        shared.stages.env = stage.counts;
        failures.extend(stage.failures);
        env_lines = stage.lines;
        envs = stage.envs;
        env_times = stage.times;
        clock.lap("env");
    }
    let shared_outputs = Shared {
        failures: &failures,
        env_lines: &env_lines,
        envs: &envs,
        previous: previous.map(|p| p.outputs).unwrap_or_default(),
        current: out.current(),
        parses: &parses,
        dates: &dates,
        env_times: (opts.until >= Stage::Env).then_some(&env_times),
        slices: Default::default(),
    };
    let mut failed_requests = Vec::new();
    let (mut summary, recorded, retry_later) = dataset::run_all(
        s,
        services,
        opts,
        &staging,
        &files,
        &shared_outputs,
        shared,
        &mut clock,
        &mut failed_requests,
    )?;
    clock.lap("write");
    // A file whose parse outcome came from the persisted analysis may still be parsed later in
    // the build (a later stage needed its summary and the action cache had none, or a damaged
    // one): that is parse work too.
    let parse = &mut summary.stages.parse;
    let later = db
        .env()
        .counters
        .parsed
        .load(Ordering::Relaxed)
        .saturating_sub(parse.executed);
    parse.executed += later;
    parse.cached = parse.cached.saturating_sub(later);
    let transient = retry_later || db.env().counters.transient.load(Ordering::Relaxed);
    if !transient && env_transient.is_empty() && date_transient.is_empty() {
        // Without this, the next build runs: something may succeed next time (a model request
        // failed, a file changed while it was read, an environment could not be built).
        outputs::write_state(&staging, &state_of(s, services, fp, &summary, recorded)?)?;
    }
    // Where the time went, beside the state (never in a dataset file).
    outputs::write_timings(&staging, &summary, started.elapsed().as_secs_f64())?;
    // What `r2e gc` keeps: every entry this build read or wrote, beside its outputs, and the
    // output registered in the cache. The parse pack written while the build went on is one.
    db.env().packs.wait();
    r2e_core::cache::write_uses(&staging, &s.cache.uses())?;
    s.cache.add_root(output)?;
    out.commit()?;
    retry_notes(
        &mut summary,
        &failed_requests,
        &env_transient,
        &date_transient,
    );
    free_in_background(session.db);
    Ok(summary)
}

/// The state a build leaves for the next one to compare with (`fp`: its fingerprint), with
/// the outputs it `recorded`.
fn state_of(
    s: &Session,
    services: &Services,
    fp: Hash,
    summary: &Summary,
    recorded: Vec<Recorded>,
) -> Result<State> {
    Ok(State {
        fingerprint: fp,
        summary_json: serde_json::to_string(summary).map_err(Error::internal)?,
        outputs: recorded,
        repos: s
            .checkouts
            .iter()
            .map(|c| (c.name.clone(), c.tree.clone()))
            .collect(),
        settings: settings_hash(&s.cfg),
        keyed: outputs::keyed_text(&crate::stages::keyed::of_pipeline(
            &s.cfg,
            services.sandbox.as_ref(),
            &s.templates,
        )),
    })
}

/// Stage `checkout`'s counts (a repository whose tree the previous build had is cached), with
/// the files it could not read pushed into `failures`.
fn checkout_stage(
    s: &Session,
    previous: Option<&State>,
    failures: &mut Vec<FailureRecord>,
) -> StageCounts {
    let changed = s
        .checkouts
        .iter()
        .filter(|c| {
            previous.is_none_or(|p| !p.repos.iter().any(|(n, t)| *n == c.name && *t == c.tree))
        })
        .count() as u64;
    let counts = StageCounts {
        executed: changed,
        cached: s.checkouts.len() as u64 - changed,
        failed: 0,
    };
    for c in &s.checkouts {
        for (path, reason) in &c.unreadable {
            failures.push(FailureRecord {
                repo: c.name.clone(),
                path: Some(path.clone()),
                stage: "checkout".into(),
                reason: reason.clone(),
                log: None,
            });
        }
    }
    counts
}

/// Each repository's function dates at its commit (from the cache when it was dated before),
/// with the stage's counts. A history that cannot be read leaves that repository's dates
/// `null` in this build's outputs, and is named in the returned reasons: the build exits 1 and
/// the next one dates it again.
fn date_stage(
    s: &Session,
) -> (
    StageCounts,
    Vec<Option<Arc<r2e_core::dates::Dates>>>,
    Vec<String>,
) {
    let mut counts = StageCounts::default();
    let mut dates = Vec::new();
    let mut date_transient = Vec::new();
    let cache = &s.cache;
    let dated: Vec<Result<(Option<Arc<r2e_core::dates::Dates>>, bool)>> = s
        .checkouts
        .par_iter()
        .map(|c| crate::stages::dating::dates(c, cache))
        .collect();
    for d in dated {
        let counts = &mut counts;
        match d {
            Ok((Some(d), fresh)) => {
                if fresh {
                    counts.executed += 1;
                } else {
                    counts.cached += 1;
                }
                dates.push(Some(d));
            }
            Ok((None, _)) => dates.push(None),
            Err(e) => {
                counts.failed += 1;
                date_transient.push(e.to_string());
                dates.push(None);
            }
        }
    }
    (counts, dates, date_transient)
}

/// The notes of a build whose outputs are written but that must run again: model requests
/// that failed, environments and histories that could not be had for a reason that may pass.
fn retry_notes(
    summary: &mut Summary,
    failed_requests: &[String],
    env_transient: &[String],
    date_transient: &[String],
) {
    if !failed_requests.is_empty() {
        let shown: Vec<&String> = failed_requests.iter().take(10).collect();
        summary.retry.push(format!(
            "the outputs are written, but {} model request(s) of `evaluate` failed; they are not samples, and the next build asks them again:\n  {}{}",
            failed_requests.len(),
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            if failed_requests.len() > shown.len() {
                "\n  ..."
            } else {
                ""
            }
        ));
    }
    if !env_transient.is_empty() {
        summary.retry.push(format!(
            "the outputs are written, but {} environment(s) could not be built for a reason that may pass; the next build tries again:\n  {}",
            env_transient.len(),
            env_transient.join("\n  ")
        ));
    }
    if !date_transient.is_empty() {
        summary.retry.push(format!(
            "the outputs are written, but the history of {} repository(ies) could not be read: their functions' dates are null, and the next build dates them again:\n  {}",
            date_transient.len(),
            date_transient.join("\n  ")
        ));
    }
}

/// Frees the database on a thread of its own. It holds every file's summary and every query's
/// memo, and freeing them one by one took 0.2 s, on one core, at the end of a cold build of the
/// standard library; the build's result need not wait for it. A process that exits first (the CLI) gives
/// the memory back at once; one that goes on (a test, a server) gets it back when the thread is
/// done. Nothing else is in it: the cache, its lock and the outputs are the session's.
fn free_in_background(db: crate::db::Database) {
    // When no thread can be made, `spawn` drops the closure, and the database with it, here.
    let _ = std::thread::Builder::new()
        .name("r2e-free".into())
        .spawn(move || drop(db));
}

/// Stage `parse`: every file's interface, from the persisted analysis (`memo`), the action
/// cache or parsed, in parallel; files that fail are recorded. Returns the counts and each
/// repository's parse (its interface fingerprint).
fn parse(
    s: &Session,
    files: &[SourceFile],
    failures: &mut Vec<FailureRecord>,
) -> (StageCounts, Vec<memo::RepoParse>) {
    let db = &s.db;
    let bar = progress(files.len() as u64, "parse");
    let parses: Vec<memo::RepoParse> = s
        .repos
        .iter()
        .zip(&s.cfg.repos)
        .map(|(&repo, rc)| memo::parse_repo(db, &s.cache, rc, repo, &bar, true))
        .collect();
    bar.finish_and_clear();
    let mut failed = 0;
    for (&repo, p) in s.repos.iter().zip(&parses) {
        for (&f, outcome) in repo.files(db).iter().zip(&p.outcomes) {
            if let Err(reason) = outcome {
                failed += 1;
                failures.push(FailureRecord {
                    repo: repo.name(db).clone(),
                    path: Some(f.path(db).clone()),
                    stage: "parse".into(),
                    reason: reason.clone(),
                    log: None,
                });
            }
        }
    }
    let c = &db.env().counters;
    let counts = StageCounts {
        executed: c.parsed.load(Ordering::Relaxed),
        cached: c.parse_cached.load(Ordering::Relaxed)
            + parses.iter().map(|p| p.reused).sum::<u64>(),
        failed,
    };
    (counts, parses)
}

/// The output folder of a dataset, relative to the build's output.
fn dataset_folder(name: Option<&str>) -> PathBuf {
    name.map(|n| Path::new("variants").join(n))
        .unwrap_or_default()
}
