//! The build: check out the repositories, decide whether anything changed since the last build
//! of this output, feed the salsa database, run the stages in parallel, write the outputs, and
//! report what ran.
//!
//! A no-op build is decided before any parsing: the build fingerprint (settings, stage limit, and
//! every repository's identity, itself a hash of its files' content hashes) is compared with the
//! one recorded in `<output>/.r2e/state`, and the outputs are checked against their recorded
//! hashes. Then nothing is parsed, read or rewritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::cache::{self, Cache, write_if_changed};
use crate::config::Config;
use crate::db::{
    self, Database, Db, FunctionRow, ItemId, Repo, Settings, SourceFile, SourceReader,
};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::log;
use crate::python::resolve::Item;
use crate::python::summary::DefKind;
use crate::stages::checkout::{self, Checkout};
use crate::stages::extract::FILTERS;

/// The stages, in order.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Checkout,
    Parse,
    Extract,
    Slice,
    Env,
    Generate,
    Validate,
    Refine,
    Assemble,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Checkout,
        Stage::Parse,
        Stage::Extract,
        Stage::Slice,
        Stage::Env,
        Stage::Generate,
        Stage::Validate,
        Stage::Refine,
        Stage::Assemble,
    ];
    /// The last stage.
    pub const LAST: Stage = Stage::Assemble;
    pub fn name(self) -> &'static str {
        match self {
            Stage::Checkout => "checkout",
            Stage::Parse => "parse",
            Stage::Extract => "extract",
            Stage::Slice => "slice",
            Stage::Env => "env",
            Stage::Generate => "generate",
            Stage::Validate => "validate",
            Stage::Refine => "refine",
            Stage::Assemble => "assemble",
        }
    }
}

pub use crate::stages::StageCounts;

/// What `r2e build --json` prints.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub dataset_version: Option<String>,
    pub output: PathBuf,
    pub stages: indexmap_like::OrderedMap<StageCounts>,
    pub counts: indexmap_like::OrderedMap<u64>,
    pub excluded_by: indexmap_like::OrderedMap<u64>,
    /// Model requests executed, cached and failed, and tokens, by stage and model.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub llm:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, crate::llm::Usage>>,
    /// With `[[variant]]` tables: each variant's own summary (its output is
    /// `<output>/variants/NAME`). The top-level stages then count the shared stages once and
    /// sum the others over the variants.
    #[serde(default, skip_serializing_if = "indexmap_like::OrderedMap::is_empty")]
    pub variants: indexmap_like::OrderedMap<Summary>,
}

/// A tiny insertion-ordered map that serializes as a JSON object.
pub mod indexmap_like {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Clone, Debug, PartialEq)]
    pub struct OrderedMap<V>(pub Vec<(String, V)>);

    impl<V> Default for OrderedMap<V> {
        fn default() -> Self {
            OrderedMap(Vec::new())
        }
    }

    impl<V> OrderedMap<V> {
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
        pub fn get(&self, key: &str) -> Option<&V> {
            self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
        }
        pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
            self.0.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
        }
        pub fn insert(&mut self, key: &str, value: V) {
            match self.get_mut(key) {
                Some(v) => *v = value,
                None => self.0.push((key.to_owned(), value)),
            }
        }
    }

    impl<V: Serialize> Serialize for OrderedMap<V> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(self.0.len()))?;
            for (k, v) in &self.0 {
                map.serialize_entry(k, v)?;
            }
            map.end()
        }
    }

    impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let pairs: serde_json::Map<String, serde_json::Value> = Deserialize::deserialize(d)?;
            pairs
                .into_iter()
                .map(|(k, v)| {
                    V::deserialize(v)
                        .map(|v| (k, v))
                        .map_err(serde::de::Error::custom)
                })
                .collect::<Result<Vec<_>, _>>()
                .map(OrderedMap)
        }
    }
}

/// Options of one build.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub until: Stage,
    pub jobs: Option<usize>,
}

/// What the last build of an output recorded.
#[derive(Serialize, Deserialize)]
struct State {
    fingerprint: Hash,
    summary_json: String,
    /// Output files with their content hashes, sizes and modification times.
    outputs: Vec<(String, Hash, u64, i64)>,
    /// Repo name → identity.
    repos: Vec<(String, String)>,
    /// The hash of the stage settings.
    settings: Hash,
}

const STATE_VERSION: &str = "r2e-state-1";

fn state_path(output: &Path) -> PathBuf {
    output.join(".r2e").join("state")
}

/// (fingerprint, repo identities, settings hash) of the last build of an output.
pub(crate) type LastBuild = (Hash, Vec<(String, String)>, Hash);

pub(crate) fn read_state_public(output: &Path) -> Option<LastBuild> {
    read_state(output).map(|s| (s.fingerprint, s.repos, s.settings))
}

fn read_state(output: &Path) -> Option<State> {
    let bytes = std::fs::read(state_path(output)).ok()?;
    let (version, state): (String, State) = postcard::from_bytes(&bytes).ok()?;
    (version == STATE_VERSION).then_some(state)
}

/// What identifies this build of r2e for the no-op check: its version and its executable's size
/// and modification time, so that a rebuilt r2e (new analysis, new embedded scripts) never
/// mistakes an output of the previous one for up to date. The action caches carry their own
/// recipe versions; this only decides whether the build may skip everything.
fn build_identity() -> String {
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

pub(crate) fn fingerprint(cfg: &Config, opts: &BuildOptions, checkouts: &[Arc<Checkout>]) -> Hash {
    /// What one dataset (the pipeline's own, or a variant's) is made from.
    #[derive(Serialize)]
    struct Stages<'a> {
        name: Option<&'a str>,
        extract: &'a crate::config::ExtractConfig,
        context: &'a crate::config::ContextConfig,
        generate: &'a crate::config::GenerateConfig,
        select: &'a crate::config::SelectConfig,
        refine: &'a crate::config::RefineConfig,
        /// The prompt templates in use (their texts' hashes).
        prompts: Vec<(String, String, Hash)>,
    }
    #[derive(Serialize)]
    struct Key<'a> {
        version: &'a str,
        env: &'a crate::config::EnvConfig,
        until: Stage,
        repos: Vec<(&'a str, &'a str, Option<&'a str>)>,
        /// The providers asked.
        providers: Vec<(&'a str, &'a str, crate::config::Api)>,
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
            select: &c.select,
            refine: &c.refine,
            prompts: if c.generate.generator.uses_model() || c.refine.enabled {
                crate::llm::prompts::Templates::load(c)
                    .map(|t| t.sources)
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
        env: &cfg.env,
        until: opts.until,
        repos: checkouts
            .iter()
            .map(|c| (c.name.as_str(), c.tree.as_str(), c.rev.as_deref()))
            .collect(),
        builds,
    })
}

/// Whether every environment the outputs name is still in the cache (`r2e check` runs in them).
fn envs_present(output: &Path, cache: &Cache) -> bool {
    let Ok(text) = std::fs::read_to_string(output.join("envs.jsonl")) else {
        return true;
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .all(|e| {
            e["env_key"].as_str().is_none_or(|key| {
                cache
                    .root()
                    .join("envs-v1")
                    .join(key)
                    .join("env.json")
                    .exists()
            })
        })
}

/// Size and modification time (ns) of a file.
fn stat(path: &Path) -> Option<(u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()))
}

/// The analysis settings of every dataset the pipeline builds (its own, or each variant's).
pub(crate) fn settings_hash(cfg: &Config) -> Hash {
    let builds: Vec<_> = cfg
        .builds()
        .into_iter()
        .map(|(name, c)| (name, &c.extract, &c.context))
        .collect();
    Hash::of_key(&builds)
}

struct CheckoutReader(Arc<Checkout>);

impl SourceReader for CheckoutReader {
    fn read(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
        self.0.read(path).map_err(|e| e.to_string())
    }
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_owned());
    bar
}

/// The in-process state of a build: checkouts, the database and its inputs.
pub struct Session {
    pub cfg: Config,
    pub cache: Arc<Cache>,
    pub checkouts: Vec<Arc<Checkout>>,
    pub db: Database,
    pub repos: Vec<Repo>,
    pub settings: Settings,
}

impl Session {
    /// Checks out every repository and sets up the database inputs.
    pub fn open(cfg: &Config) -> Result<Session> {
        Self::open_with(cfg, false)
    }

    /// Like [`Session::open`]; `track_executions` counts salsa query executions (for tests).
    pub fn open_with(cfg: &Config, track_executions: bool) -> Result<Session> {
        let cache = Arc::new(Cache::open(&cfg.cache)?);
        let mut checkouts = Vec::new();
        for repo in &cfg.repos {
            checkouts.push(Arc::new(checkout::checkout(repo, &cache)?));
        }
        let db = Database::new(Some(cache.clone()), track_executions);
        let mut repos = Vec::new();
        for c in &checkouts {
            let reader = db.add_reader(Arc::new(CheckoutReader(c.clone())));
            let repo = Repo::new(&db, c.name.clone(), reader, Vec::new());
            repos.push(repo);
        }
        let mut db = db;
        for (c, &repo) in checkouts.iter().zip(&repos) {
            let files: Vec<SourceFile> = c
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| SourceFile::new(&db, repo, i as u32, f.path.clone(), f.hash))
                .collect();
            use salsa::Setter;
            repo.set_files(&mut db).to(files);
        }
        let settings = Settings::new(&db, cfg.extract.clone(), cfg.context.clone());
        Ok(Session {
            cfg: cfg.clone(),
            cache,
            checkouts,
            db,
            repos,
            settings,
        })
    }

    pub fn all_files(&self) -> Vec<SourceFile> {
        self.repos
            .iter()
            .flat_map(|r| r.files(&self.db).iter().copied())
            .collect()
    }
}

/// Runs a build and returns its summary.
pub fn build(cfg: &Config, opts: &BuildOptions) -> Result<Summary> {
    let started = std::time::Instant::now();
    let session = Session::open(cfg)?;
    log::timing("checkout", started.elapsed());
    let fp = fingerprint(cfg, opts, &session.checkouts);
    let output = std::path::absolute(&cfg.output)
        .map_err(|e| Error::env(format!("{}: {e}", cfg.output.display())))?;
    let previous = read_state(&output);
    if let Some(state) = &previous
        && state.fingerprint == fp
        && state
            .outputs
            .iter()
            .all(|(name, _, size, mtime)| stat(&output.join(name)) == Some((*size, *mtime)))
        && cfg
            .builds()
            .iter()
            .all(|(_, c)| envs_present(&c.output, &session.cache))
        && let Ok(mut summary) = serde_json::from_str::<Summary>(&state.summary_json)
    {
        let all_cached = |s: &mut Summary| {
            for (_, counts) in s.stages.0.iter_mut() {
                counts.cached += counts.executed;
                counts.executed = 0;
            }
            for usage in s.llm.values_mut().flat_map(|m| m.values_mut()) {
                usage.cached += usage.executed;
                usage.executed = 0;
            }
        };
        all_cached(&mut summary);
        for (name, v) in summary.variants.0.iter_mut() {
            all_cached(v);
            if let Ok(c) = cfg.variant(name) {
                v.output = c.output.clone();
            }
        }
        summary.output = output;
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
    pool.install(move || run(session, opts, &output, fp, previous))
}

fn run(
    session: Session,
    opts: &BuildOptions,
    output: &Path,
    fp: Hash,
    previous: Option<State>,
) -> Result<Summary> {
    let s = &session;
    let db = &s.db;
    let files = s.all_files();
    let mut shared = Summary {
        dataset_version: None,
        output: output.to_path_buf(),
        stages: Default::default(),
        counts: Default::default(),
        excluded_by: Default::default(),
        llm: Default::default(),
        variants: Default::default(),
    };
    for stage in Stage::ALL {
        shared.stages.insert(stage.name(), StageCounts::default());
    }
    let prev_repos: BTreeMap<&str, &str> = previous
        .as_ref()
        .map(|p| {
            p.repos
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let changed = s
        .checkouts
        .iter()
        .filter(|c| prev_repos.get(c.name.as_str()) != Some(&c.tree.as_str()))
        .count() as u64;
    *shared.stages.get_mut("checkout").unwrap() = StageCounts {
        executed: changed,
        cached: s.checkouts.len() as u64 - changed,
        failed: 0,
    };
    shared.counts.insert("repos", s.checkouts.len() as u64);
    shared.counts.insert("files", files.len() as u64);

    let mut failures: Vec<serde_json::Value> = Vec::new();
    for c in &s.checkouts {
        for (path, reason) in &c.unreadable {
            failures.push(serde_json::json!({"repo": c.name, "path": path, "stage": "checkout", "reason": reason}));
        }
    }
    let mut clock = Lap(std::time::Instant::now());
    if opts.until >= Stage::Parse {
        let bar = progress(files.len() as u64, "parse");
        files.par_iter().for_each_with(db.clone(), |db, &f| {
            let _ = db::parse_file(db, f);
            bar.inc(1);
        });
        bar.finish_and_clear();
        clock.lap("parse");
        let c = &db.env().counters;
        *shared.stages.get_mut("parse").unwrap() = StageCounts {
            executed: c.parsed.load(Ordering::Relaxed),
            cached: c.parse_cached.load(Ordering::Relaxed),
            failed: c.parse_failed.load(Ordering::Relaxed),
        };
        for &f in &files {
            if let Err(reason) = db::parse_file(db, f) {
                let repo = f.repo(db);
                failures.push(serde_json::json!({"repo": repo.name(db), "path": f.path(db), "stage": "parse", "reason": reason}));
            }
        }
    }
    // Environments are per repository, shared by every variant.
    let mut env_lines: Vec<Vec<u8>> = Vec::new();
    let mut envs = crate::stages::env::Envs::new();
    if opts.until >= Stage::Env {
        let (lines, env_counts, built) = run_env_stage(s, &mut failures, output)?;
        env_lines = lines;
        envs = built;
        *shared.stages.get_mut("env").unwrap() = env_counts;
        clock.lap("env");
    }
    let shared_outputs = SharedOutputs {
        failures: &failures,
        env_lines: &env_lines,
        envs: &envs,
        previous: previous.map(|p| p.outputs).unwrap_or_default(),
    };
    fs_err::create_dir_all(output.join(".r2e"))?;
    // Each dataset: the pipeline's own, or one per variant. Extraction reads only the extract
    // settings and contexts only the context settings, so a variant uses the first salsa input
    // whose extract (for extraction) or context (for contexts) equals its own: variants that
    // differ in one share every query of the other.
    let mut inputs: Vec<Settings> = vec![s.settings];
    let mut recorded = Vec::new();
    let mut retry_later = false;
    let builds = s.cfg.builds();
    let mut summary = shared.clone();
    for (name, cfg) in &builds {
        let find = |inputs: &[Settings]| {
            let extract = inputs
                .iter()
                .find(|i| *i.extract(db) == cfg.extract)
                .copied();
            let context = inputs
                .iter()
                .find(|i| *i.context(db) == cfg.context)
                .copied();
            extract.zip(context)
        };
        let settings = match find(&inputs) {
            Some(found) => found,
            None => {
                inputs.push(Settings::new(db, cfg.extract.clone(), cfg.context.clone()));
                find(&inputs).expect("the new input matches")
            }
        };
        if let Some(name) = name {
            eprintln!("variant {name}");
        }
        let rel = name.map(|n| format!("variants/{n}/")).unwrap_or_default();
        let mut one = shared.clone();
        let built = run_dataset(
            s,
            cfg,
            settings,
            opts,
            output,
            &rel,
            &files,
            &shared_outputs,
            &mut one,
            &mut clock,
        )?;
        recorded.extend(built.recorded);
        retry_later |= built.retry_later;
        match name {
            None => summary = one,
            Some(name) => {
                for (stage, c) in &one.stages.0 {
                    if matches!(stage.as_str(), "checkout" | "parse" | "env") {
                        continue;
                    }
                    let total = summary
                        .stages
                        .get_mut(stage)
                        .expect("every stage is listed");
                    total.executed += c.executed;
                    total.cached += c.cached;
                    total.failed += c.failed;
                }
                for (stage, models) in &one.llm {
                    for (model, u) in models {
                        summary
                            .llm
                            .entry(stage.clone())
                            .or_default()
                            .entry(model.clone())
                            .or_default()
                            .add(u);
                    }
                }
                one.output = cfg.output.clone();
                summary.variants.insert(name, one);
            }
        }
    }
    if !summary.variants.is_empty() {
        summary
            .counts
            .insert("variants", summary.variants.0.len() as u64);
        summary.counts.insert("failures", failures.len() as u64);
    }
    clock.lap("write");
    let state = State {
        fingerprint: fp,
        summary_json: serde_json::to_string(&summary)
            .map_err(|e| Error::Internal(e.to_string()))?,
        outputs: recorded,
        repos: s
            .checkouts
            .iter()
            .map(|c| (c.name.clone(), c.tree.clone()))
            .collect(),
        settings: settings_hash(&s.cfg),
    };
    let bytes = postcard::to_stdvec(&(STATE_VERSION, &state))
        .map_err(|e| Error::Internal(e.to_string()))?;
    if retry_later {
        // Something may succeed next time (a model request failed): the next build must run.
        let _ = std::fs::remove_file(state_path(output));
    } else {
        write_if_changed(&state_path(output), &bytes)?;
    }
    Ok(summary)
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
/// outputs recorded by the previous build.
struct SharedOutputs<'a> {
    failures: &'a [serde_json::Value],
    env_lines: &'a [Vec<u8>],
    envs: &'a crate::stages::env::Envs,
    previous: Vec<(String, Hash, u64, i64)>,
}

/// What one dataset's build recorded.
struct Built {
    recorded: Vec<(String, Hash, u64, i64)>,
    retry_later: bool,
}

/// Extract, slice, generate, validate, refine and assemble one dataset (the pipeline's own or a
/// variant's) into `<output>/<rel>`, filling `summary`.
#[allow(clippy::too_many_arguments)]
fn run_dataset(
    s: &Session,
    cfg: &Config,
    (extract_settings, settings): (Settings, Settings),
    opts: &BuildOptions,
    output: &Path,
    rel: &str,
    files: &[SourceFile],
    shared: &SharedOutputs,
    summary: &mut Summary,
    clock: &mut Lap,
) -> Result<Built> {
    let db = &s.db;
    let stages = &mut summary.stages;
    let counts = &mut summary.counts;
    let mut rows: Vec<(SourceFile, FunctionRow)> = Vec::new();
    if opts.until >= Stage::Extract {
        let before = db.env().counters.extracted.load(Ordering::Relaxed);
        let bar = progress(files.len() as u64, "extract");
        let per_file: Vec<Arc<Vec<FunctionRow>>> = files
            .par_iter()
            .map_with(db.clone(), |db, &f| {
                let r = db::file_functions(db, f, extract_settings).clone();
                bar.inc(1);
                r
            })
            .collect();
        bar.finish_and_clear();
        clock.lap("extract");
        for (f, list) in files.iter().zip(per_file) {
            rows.extend(list.iter().map(|r| (*f, r.clone())));
        }
        let executed = db.env().counters.extracted.load(Ordering::Relaxed) - before;
        *stages.get_mut("extract").unwrap() = StageCounts {
            executed,
            cached: files.len() as u64 - executed,
            failed: 0,
        };
        counts.insert("functions", rows.len() as u64);
        counts.insert(
            "candidates",
            rows.iter().filter(|(_, r)| r.excluded_by.is_none()).count() as u64,
        );
    }
    for name in FILTERS {
        summary.excluded_by.insert(
            name,
            rows.iter()
                .filter(|(_, r)| r.excluded_by == Some(name))
                .count() as u64,
        );
    }
    let candidates: Vec<(SourceFile, FunctionRow)> = rows
        .iter()
        .filter(|(_, r)| r.excluded_by.is_none())
        .cloned()
        .collect();
    if opts.until >= Stage::Slice {
        let before = db.env().counters.sliced.load(Ordering::Relaxed);
        let bar = progress(candidates.len() as u64, "slice");
        candidates
            .par_iter()
            .for_each_with(db.clone(), |db, (f, row)| {
                let item = ItemId::new(db, f.repo(db), Item::Def(f.ix(db), row.def));
                let _ = db::slice_of(db, item);
                let _ = db::context_of(db, item, settings);
                bar.inc(1);
            });
        bar.finish_and_clear();
        clock.lap("slice");
        let executed = (db.env().counters.sliced.load(Ordering::Relaxed) - before)
            .min(candidates.len() as u64);
        *stages.get_mut("slice").unwrap() = StageCounts {
            executed,
            cached: candidates.len() as u64 - executed,
            failed: 0,
        };
    }
    let mut harness_out = crate::stages::assemble::HarnessOutputs::default();
    if opts.until >= Stage::Generate {
        let bar = progress(candidates.len() as u64, "harness");
        let inputs = crate::stages::assemble::Inputs {
            cfg,
            db,
            cache: &s.cache,
            checkouts: &s.checkouts,
            repos: &s.repos,
            settings,
            envs: shared.envs,
        };
        harness_out = crate::stages::assemble::run(&inputs, &candidates, opts.until, &bar)?;
        bar.finish_and_clear();
        for (stage, c) in [
            ("generate", harness_out.generate),
            ("validate", harness_out.validate),
            ("refine", harness_out.refine),
            ("assemble", harness_out.assemble),
        ] {
            *stages.get_mut(stage).unwrap() = c;
        }
        counts.insert("harnesses_valid", harness_out.valid);
        if cfg.generate.generator == crate::config::Generator::Hybrid {
            counts.insert("hybrid_builtin_sufficient", harness_out.builtin_sufficient);
        }
        if cfg.refine.enabled {
            counts.insert("specs_refined", harness_out.refined);
        }
        counts.insert("instances", harness_out.instances.len() as u64);
        clock.lap("harnesses");
    }
    counts.insert("failures", shared.failures.len() as u64);
    summary.llm = harness_out.llm.clone();

    // Outputs.
    let dir = output.join(rel);
    fs_err::create_dir_all(&dir)?;
    let previous = &shared.previous;
    let mut recorded = Vec::new();
    let open = |name: &str| JsonlWriter::create(output, &format!("{rel}{name}"));
    if opts.until >= Stage::Extract {
        let mut out = open("functions.jsonl")?;
        let with_slices = opts.until >= Stage::Slice;
        for chunk in rows.chunks(4096) {
            let lines: Vec<Vec<u8>> = chunk
                .par_iter()
                .map_with(db.clone(), |db, (f, row)| {
                    function_line(db, *f, row, settings, with_slices)
                })
                .collect();
            for line in lines {
                out.write_line(&line)?;
            }
        }
        recorded.push(out.finish(previous)?);
    }
    // Log paths are relative to the output; a variant's folder is two levels down.
    let relocated = |line: &[u8]| -> Vec<u8> {
        if rel.is_empty() {
            return line.to_vec();
        }
        let text =
            String::from_utf8_lossy(line).replace("\"log\":\"logs/", "\"log\":\"../../logs/");
        text.into_bytes()
    };
    if opts.until >= Stage::Env {
        let mut out = open("envs.jsonl")?;
        for line in shared.env_lines {
            out.write_line(&relocated(line))?;
        }
        recorded.push(out.finish(previous)?);
    }
    if opts.until >= Stage::Generate {
        let mut out = open("harnesses.jsonl")?;
        for line in &harness_out.harness_lines {
            out.write_line(line)?;
        }
        recorded.push(out.finish(previous)?);
    }
    if opts.until >= Stage::Assemble {
        let mut out = open("dataset.jsonl")?;
        for (_, line) in &harness_out.instances {
            out.write_line(line)?;
        }
        recorded.push(out.finish(previous)?);
        let (version, manifest) =
            crate::stages::assemble::manifest(cfg, &s.checkouts, &harness_out.instances)?;
        let mut out = open("manifest.json")?;
        out.write_line(&manifest)?;
        recorded.push(out.finish(previous)?);
        summary.dataset_version = Some(version);
    }
    let mut out = open("failures.jsonl")?;
    for f in shared.failures {
        out.write_line(&relocated(
            &serde_json::to_vec(f).map_err(|e| Error::Internal(e.to_string()))?,
        ))?;
    }
    recorded.push(out.finish(previous)?);
    Ok(Built {
        recorded,
        retry_later: harness_out.retry_later,
    })
}

/// Stage `env`: an environment per repository. Returns the lines of `envs.jsonl` and the counts.
fn run_env_stage(
    s: &Session,
    failures: &mut Vec<serde_json::Value>,
    output: &Path,
) -> Result<(Vec<Vec<u8>>, StageCounts, crate::stages::env::Envs)> {
    use crate::stages::env::{self, EnvBuilder, EnvOutcome, Interpreter};
    let sandbox = crate::sandbox::local::LocalSandbox::new();
    let interpreter = Interpreter::probe(&s.cfg.env.python)?;
    let uv = env::find_or_install_uv(&s.cache, &sandbox, &interpreter, &s.cfg.env);
    if uv.is_none() && s.cfg.env.installer == crate::config::Installer::Uv {
        return Err(Error::env(
            "`installer = \"uv\"` but `uv` is neither on the PATH nor installable from the package index",
        ));
    }
    let builder = EnvBuilder {
        cache: &s.cache,
        sandbox: &sandbox,
        cfg: &s.cfg.env,
        interpreter: &interpreter,
        uv,
    };
    let logs = output.join("logs");
    fs_err::create_dir_all(&logs)?;
    let mut counts = StageCounts::default();
    let mut lines = Vec::new();
    let mut envs = crate::stages::env::Envs::new();
    let bar = progress(s.checkouts.len() as u64, "env");
    for (checkout, &repo) in s.checkouts.iter().zip(&s.repos) {
        bar.set_message(checkout.name.clone());
        let scratch = s
            .cache
            .dir("scratch")?
            .join(format!("env-{}", std::process::id()));
        let declared =
            env::declared_dependencies(checkout, &sandbox, &interpreter.executable, &scratch);
        let _ = fs_err::remove_dir_all(&scratch);
        let inferred: Vec<String> = if s.cfg.env.infer_imports {
            db::external_imports(&s.db, repo)
                .iter()
                .filter(|m| !interpreter.stdlib_modules.contains(*m) && !m.starts_with('_'))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        match builder.build(&declared, &inferred) {
            Ok(built) => {
                if built.cached {
                    counts.cached += 1;
                } else {
                    counts.executed += 1;
                }
                let log_name = format!("env-{}.log", checkout.name);
                cache::write_if_changed(&logs.join(&log_name), built.record.log.as_bytes())?;
                if built.record.outcome == EnvOutcome::Failed {
                    counts.failed += 1;
                    failures.push(serde_json::json!({"repo": checkout.name, "stage": "env", "reason": "the environment could not be created", "log": format!("logs/{log_name}")}));
                }
                let r = &built.record;
                let line = serde_json::json!({
                    "repo": checkout.name,
                    "env_key": r.key,
                    "outcome": r.outcome,
                    "installer": r.installer,
                    "python_version": r.python_version,
                    "declared": r.declared,
                    "inferred": r.inferred,
                    "failed_packages": r.failed_packages,
                    "lock_hash": r.lock_hash,
                    "lock": r.lock,
                    "log": format!("logs/{log_name}"),
                });
                lines.push(serde_json::to_vec(&line).map_err(|e| Error::Internal(e.to_string()))?);
                envs.insert(checkout.name.clone(), Arc::new(built));
            }
            Err(e) => {
                // Transient: reported, never cached; the next build tries again.
                counts.failed += 1;
                failures.push(serde_json::json!({"repo": checkout.name, "stage": "env", "reason": e.to_string()}));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((lines, counts, envs))
}

/// One line of `functions.jsonl`.
#[derive(Serialize)]
struct FunctionLine<'a> {
    id: &'a str,
    repo: &'a str,
    path: &'a str,
    qualname: &'a str,
    kind: &'static str,
    start_line: u32,
    end_line: u32,
    docstring: Option<&'a str>,
    excluded_by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slice: Option<SliceLine<'a>>,
}

/// The `slice` object of a candidate.
#[derive(Serialize)]
struct SliceLine<'a> {
    functions: Vec<&'a str>,
    globals: Vec<String>,
    size: usize,
    tokens: u32,
    truncated: bool,
    in_file: bool,
    unresolved: &'a [String],
}

fn function_line(
    db: &Database,
    file: SourceFile,
    row: &FunctionRow,
    settings: Settings,
    with_slice: bool,
) -> Vec<u8> {
    let repo = file.repo(db);
    let slice = (with_slice && row.excluded_by.is_none()).then(|| {
        let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
        let slice = db::slice_of(db, item);
        let ctx = db::context_of(db, item, settings);
        let files = repo.files(db);
        let index = db::module_index(db, repo);
        let mut items: Vec<Item> = slice.items.iter().map(|&(it, _)| it).collect();
        // Files are in path order and definitions in source order: ids come out sorted by path.
        items.sort_unstable();
        let mut functions = Vec::new();
        let mut globals = Vec::new();
        for &it in &items {
            match it {
                Item::Def(f, ix) => {
                    functions.push(db::def_ids(db, files[f as usize])[ix as usize].as_str())
                }
                Item::Global(f, ix) => {
                    let name = &db::file_interface(db, files[f as usize]).globals[ix as usize].name;
                    let module = index.module_name(f);
                    globals.push(if module.is_empty() {
                        name.clone()
                    } else {
                        format!("{module}.{name}")
                    });
                }
            }
        }
        globals.sort_unstable();
        globals.dedup();
        let own = file.ix(db);
        SliceLine {
            size: functions.len() + globals.len(),
            functions,
            globals,
            tokens: ctx.tokens,
            truncated: ctx.truncated,
            in_file: slice.in_file(own),
            unresolved: &slice.unresolved,
        }
    });
    let line = FunctionLine {
        id: &row.id,
        repo: repo.name(db),
        path: file.path(db),
        qualname: &row.qualname,
        kind: if row.kind == DefKind::Method {
            "method"
        } else {
            "function"
        },
        start_line: row.start_line,
        end_line: row.end_line,
        docstring: row.docstring.as_deref(),
        excluded_by: row.excluded_by,
        slice,
    };
    let mut bytes = serde_json::to_vec(&line).expect("lines serialize");
    bytes.push(b'\n');
    bytes
}

/// Streams a JSON-lines output to a temporary file, hashing it; on `finish`, replaces the old
/// file only if the content changed, so unchanged outputs keep their bytes and mtime.
struct JsonlWriter {
    name: String,
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<fs_err::File>,
    hasher: blake3::Hasher,
}

impl JsonlWriter {
    /// A writer of `root/name`; `name` (relative to the output) is what the state records.
    fn create(root: &Path, name: &str) -> Result<JsonlWriter> {
        let path = root.join(name);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let file = fs_err::File::create(&tmp)?;
        Ok(JsonlWriter {
            name: name.to_owned(),
            path,
            tmp,
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: blake3::Hasher::new(),
        })
    }

    fn write_line(&mut self, line: &[u8]) -> Result<()> {
        use std::io::Write;
        self.hasher.update(line);
        if !line.ends_with(b"\n") {
            self.hasher.update(b"\n");
        }
        self.out
            .write_all(line)
            .map_err(|e| Error::env(format!("cannot write `{}`: {e}", self.tmp.display())))?;
        if !line.ends_with(b"\n") {
            self.out
                .write_all(b"\n")
                .map_err(|e| Error::env(format!("cannot write `{}`: {e}", self.tmp.display())))?;
        }
        Ok(())
    }

    /// Returns (name, content hash, size, mtime) as recorded in the build state.
    fn finish(self, previous: &[(String, Hash, u64, i64)]) -> Result<(String, Hash, u64, i64)> {
        let name = self.name.clone();
        let hash = Hash(*self.hasher.finalize().as_bytes());
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::env(format!("cannot write `{}`: {e}", self.tmp.display())))?;
        let unchanged = previous.iter().any(|(n, h, size, mtime)| {
            n == &name && *h == hash && stat(&self.path) == Some((*size, *mtime))
        });
        if unchanged {
            drop(file);
            fs_err::remove_file(&self.tmp)?;
        } else {
            file.sync_data()
                .map_err(|e| Error::env(format!("cannot write `{}`: {e}", self.tmp.display())))?;
            drop(file);
            fs_err::rename(&self.tmp, &self.path)?;
        }
        let (size, mtime) = stat(&self.path)
            .ok_or_else(|| Error::env(format!("cannot stat `{}`", self.path.display())))?;
        Ok((name, hash, size, mtime))
    }
}
