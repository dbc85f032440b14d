//! Stages `generate`, `validate` and `assemble` over every candidate: harnesses from the built-in
//! generator, their validation, and the benchmark instances with the dataset's manifest.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde_json::json;

use super::StageCounts;
use super::checkout::Checkout;
use super::env::{Env, EnvOutcome, Envs};
use super::harness::{self, CodeKey, GenerateSettings, Target, Validation};
use crate::cache::Cache;
use crate::config::Config;
use crate::db::{self, Database, FunctionRow, ItemId, Repo, Settings, SourceFile};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::python::resolve::Item;
use crate::python::summary::DefKind;
use crate::sandbox::Sandbox;

/// What these stages produce.
#[derive(Default)]
pub struct HarnessOutputs {
    pub generate: StageCounts,
    pub validate: StageCounts,
    pub assemble: StageCounts,
    pub valid: u64,
    /// Lines of `harnesses.jsonl`, one per candidate.
    pub harness_lines: Vec<Vec<u8>>,
    /// Lines of `dataset.jsonl` with their ids and content hashes.
    pub instances: Vec<(String, Vec<u8>)>,
    /// Model usage by stage and model.
    pub llm:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, crate::llm::Usage>>,
    /// Something failed that a later build may get (a model request, a sandbox timeout): the
    /// build must not be taken for up to date.
    pub retry_later: bool,
}

/// Everything one candidate needs, gathered from the database.
struct Prepared {
    id: String,
    repo: String,
    commit: String,
    path: String,
    qualname: String,
    docstring: Option<String>,
    context: String,
    target: Target,
    code: CodeKey,
    env: Option<Arc<Env>>,
}

/// The folder to put on `sys.path` so that `module` imports from `path` (relative to `root`).
pub fn import_root(root: &std::path::Path, path: &str, module: &str) -> PathBuf {
    let stem = path.strip_suffix(".py").unwrap_or(path);
    let mut parts: Vec<&str> = stem.split('/').collect();
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    let depth = module.split('.').count();
    let keep = parts.len().saturating_sub(depth);
    parts[..keep]
        .iter()
        .fold(root.to_path_buf(), |p, s| p.join(s))
}

/// A repository's import roots other than a module's own: its root, and `src/` when present.
pub fn extra_roots(root: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if root.join("src").is_dir() {
        out.push(root.join("src"));
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn prepare(
    db: &Database,
    cache: &Cache,
    checkouts: &[Arc<Checkout>],
    repos: &[Repo],
    settings: Settings,
    envs: &Envs,
    file: SourceFile,
    row: &FunctionRow,
) -> Result<Prepared> {
    let repo = file.repo(db);
    let ix = repos
        .iter()
        .position(|r| *r == repo)
        .expect("the file's repo is in the session");
    let checkout = &checkouts[ix];
    let root = checkout.materialize(cache)?;
    let index = db::module_index(db, repo);
    let module = index.module_name(file.ix(db)).to_owned();
    let path = file.path(db).clone();
    let summary = db::parse_file(db, file).clone().map_err(Error::Internal)?;
    let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
    let slice = db::slice_of(db, item);
    let files = repo.files(db);
    let mut slice_hashes = Vec::new();
    for &(it, _) in &slice.items {
        match it {
            Item::Def(f, d) => {
                if let Ok(s) = db::parse_file(db, files[f as usize]) {
                    slice_hashes.push(Hash(s.layout.defs[d as usize].code_hash));
                }
            }
            Item::Global(f, g) => {
                let sf = files[f as usize];
                if let (Ok(s), Ok(text)) = (db::parse_file(db, sf), db::source_text(db, sf)) {
                    let c = s.layout.globals[g as usize];
                    slice_hashes.push(Hash::of_bytes(
                        text.get(c.start as usize..c.end as usize)
                            .unwrap_or_default()
                            .as_bytes(),
                    ));
                }
            }
        }
    }
    slice_hashes.sort_unstable();
    let layout = &summary.layout.defs[row.def as usize];
    let kind = if row.kind == DefKind::Method {
        "method"
    } else {
        "function"
    };
    let env = envs.get(&checkout.name).cloned();
    let code = CodeKey {
        module: module.clone(),
        qualname: row.qualname.clone(),
        kind,
        code: Hash(layout.code_hash),
        slice: slice_hashes,
        imports: Hash::of_key(&summary.interface.imports),
        env: env
            .as_ref()
            .map(|e| e.record.key.clone())
            .unwrap_or_default(),
    };
    let ctx = db::context_of(db, item, settings);
    Ok(Prepared {
        id: row.id.clone(),
        repo: checkout.name.clone(),
        commit: checkout.identity.clone(),
        qualname: row.qualname.clone(),
        docstring: row.docstring.clone(),
        context: db::render(db, repo, ctx),
        target: Target {
            import_root: import_root(&root, &path, &module),
            extra_roots: extra_roots(&root),
            module,
            qualname: row.qualname.clone(),
            kind,
            source_file: root.join(&path),
            start_line: layout.start_line,
            end_line: layout.end_line,
            call_sites: db::call_sites_for(db, file, &row.qualname, kind == "method")
                .into_iter()
                .map(|site| {
                    let kwargs: serde_json::Map<String, serde_json::Value> = site
                        .kwargs
                        .into_iter()
                        .map(|(k, v)| (k, serde_json::Value::String(v)))
                        .collect();
                    serde_json::json!({"args": site.args, "kwargs": kwargs})
                })
                .collect(),
        },
        path,
        code,
        env,
    })
}

/// A candidate's harness record and, when selected, its instance.
struct Done {
    harness_line: serde_json::Value,
    instance: Option<(String, serde_json::Value)>,
    valid: bool,
}

/// What the harness stages read from the build.
pub struct Inputs<'a> {
    pub cfg: &'a Config,
    pub db: &'a Database,
    pub cache: &'a Cache,
    pub checkouts: &'a [Arc<Checkout>],
    pub repos: &'a [Repo],
    pub settings: Settings,
    pub envs: &'a Envs,
}

/// Runs `generate` (and `validate` and `assemble` when `validate`) over the candidates.
pub fn run(
    inputs: &Inputs,
    candidates: &[(SourceFile, FunctionRow)],
    validate: bool,
    progress: &indicatif::ProgressBar,
) -> Result<HarnessOutputs> {
    let Inputs {
        cfg,
        db,
        cache,
        checkouts,
        repos,
        settings,
        envs,
    } = *inputs;
    let sandbox = crate::sandbox::local::LocalSandbox::new();
    let gen_settings = GenerateSettings {
        budget: cfg.generate.budget,
        seed: cfg.generate.seed,
        max_tests: cfg.generate.max_tests,
        per_call_timeout_ms: cfg.generate.per_call_timeout_ms,
        time_limit_seconds: cfg.generate.time_limit_seconds,
    };
    let counters: [AtomicU64; 6] = Default::default();
    let retry_later = std::sync::atomic::AtomicBool::new(false);
    // The model-driven generator, when configured: its own pool, as wide as the provider allows
    // (its threads mostly wait for answers).
    let llm_parts = match cfg.generate.generator {
        crate::config::Generator::Llm if validate => {
            let provider = cfg
                .generate_provider()
                .ok_or_else(|| Error::input("`generator = \"llm\"` names no known provider"))?;
            let templates = crate::llm::prompts::Templates::load(cfg)?;
            let threads = (provider.max_concurrency as usize).max(rayon::current_num_threads());
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| Error::Internal(e.to_string()))?;
            Some((crate::llm::Llm::new()?, templates, provider, pool))
        }
        _ => None,
    };
    // Generate, in parallel.
    let generated: Vec<Result<Step>> = match &llm_parts {
        None => candidates
            .par_iter()
            .map_with(db.clone(), |db, (file, row)| {
                let prepared = prepare(db, cache, checkouts, repos, settings, envs, *file, row)?;
                let step = generate_one(&sandbox, cache, &gen_settings, prepared, &counters);
                progress.inc(1);
                step
            })
            .collect(),
        Some((llm, templates, provider, pool)) => {
            let generator = crate::stages::llmgen::LlmGenerator {
                llm,
                templates,
                provider,
                settings: &cfg.generate,
                min_coverage: cfg.select.min_branch_coverage,
            };
            // Prepare on this thread (the database is not shared across pools), ask in the pool.
            let prepared: Vec<Prepared> = candidates
                .iter()
                .map(|(file, row)| prepare(db, cache, checkouts, repos, settings, envs, *file, row))
                .collect::<Result<_>>()?;
            pool.install(|| {
                prepared
                    .into_par_iter()
                    .map(|p| {
                        let step = llm_one(&sandbox, cache, &generator, p, &counters, &retry_later);
                        progress.inc(1);
                        step
                    })
                    .collect()
            })
        }
    };
    let steps: Vec<Step> = generated.into_iter().collect::<Result<_>>()?;
    // Validate: the harnesses of each environment in a few warm workers.
    let mut validations: Vec<Option<(Validation, bool)>> = vec![None; steps.len()];
    if validate {
        let mut by_env: std::collections::BTreeMap<PathBuf, Vec<usize>> = Default::default();
        for (i, step) in steps.iter().enumerate() {
            if let Step::Harness(_, env, _) = step {
                by_env.entry(env.python.clone()).or_default().push(i);
            }
        }
        let workers = rayon::current_num_threads().max(1);
        let mut chunks: Vec<(PathBuf, Vec<usize>)> = Vec::new();
        for (python, idx) in by_env {
            let size = idx.len().div_ceil(workers).max(1);
            chunks.extend(idx.chunks(size).map(|c| (python.clone(), c.to_vec())));
        }
        let done: Vec<Result<Vec<Validated>>> = chunks
            .par_iter()
            .map(|(python, idx)| {
                let items: Vec<(&Target, &CodeKey, &str)> = idx
                    .iter()
                    .map(|&i| match &steps[i] {
                        Step::Harness(p, _, h) => (&p.target, &p.code, h.as_str()),
                        Step::Done(_) | Step::Validated(..) => {
                            unreachable!("only harnesses are validated")
                        }
                    })
                    .collect();
                let results = harness::validate_batch(&sandbox, cache, python, &items)?;
                Ok(idx.iter().copied().zip(results).collect())
            })
            .collect();
        for chunk in done {
            for (i, v) in chunk? {
                validations[i] = Some(v);
            }
        }
    }
    let results: Vec<Result<Done>> = steps
        .into_iter()
        .zip(validations)
        .map(|(step, validation)| finish_one(cfg, step, validation, validate, &counters))
        .collect();
    let mut out = HarnessOutputs::default();
    let mut instances = Vec::new();
    for r in results {
        let done = r?;
        out.valid += u64::from(done.valid);
        out.harness_lines.push(
            serde_json::to_vec(&done.harness_line).map_err(|e| Error::Internal(e.to_string()))?,
        );
        if let Some((id, v)) = done.instance {
            instances.push((
                id,
                serde_json::to_vec(&v).map_err(|e| Error::Internal(e.to_string()))?,
            ));
        }
    }
    let c = |i: usize| counters[i].load(Ordering::Relaxed);
    out.generate = StageCounts {
        executed: c(0),
        cached: c(1),
        failed: c(2),
    };
    out.validate = StageCounts {
        executed: c(3),
        cached: c(4),
        failed: c(5),
    };
    out.assemble = StageCounts {
        executed: instances.len() as u64,
        cached: 0,
        failed: 0,
    };
    out.instances = instances;
    if let Some((llm, ..)) = &llm_parts {
        for ((stage, model), usage) in llm.usage() {
            out.llm.entry(stage).or_default().insert(model, usage);
        }
    }
    out.retry_later = retry_later.load(Ordering::Relaxed);
    Ok(out)
}

/// A validation for the candidate at an index, and whether it ran now.
type Validated = (usize, (Validation, bool));

/// A candidate after `generate`: finished (no harness, or not validating), or a harness to validate.
enum Step {
    Done(Done),
    Harness(Box<Prepared>, Arc<Env>, String),
    /// Generated and validated together (the model-driven generator validates every round).
    Validated(Box<Prepared>, Arc<Env>, String, (Validation, bool)),
}

/// The model-driven generator for one candidate.
fn llm_one(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    generator: &crate::stages::llmgen::LlmGenerator,
    p: Prepared,
    counters: &[AtomicU64; 6],
    retry_later: &std::sync::atomic::AtomicBool,
) -> Result<Step> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let env = match usable_env(&p) {
        Ok(env) => env,
        Err(message) => {
            bump(2);
            return Ok(Step::Done(invalid(
                &p,
                GENERATOR_LLM,
                "import_env",
                message,
            )));
        }
    };
    let outcome = generator.run(sandbox, cache, &env.python, &p.target, &p.code, &p.context)?;
    bump(if outcome.fresh { 0 } else { 1 });
    if outcome.request_failed {
        retry_later.store(true, Ordering::Relaxed);
    }
    match outcome.harness {
        Some(h) => Ok(Step::Validated(
            Box::new(p),
            env,
            h,
            (outcome.validation, outcome.fresh),
        )),
        None => {
            bump(2);
            let v = outcome.validation;
            Ok(Step::Done(invalid(
                &p,
                GENERATOR_LLM,
                v.failure_class.as_deref().unwrap_or("other"),
                v.failure_message.unwrap_or_default(),
            )))
        }
    }
}

/// The candidate's environment, or why it cannot run (an `import_env` failure).
fn usable_env(p: &Prepared) -> std::result::Result<Arc<Env>, String> {
    let env = p
        .env
        .as_ref()
        .filter(|env| env.record.outcome != EnvOutcome::Failed)
        .ok_or_else(|| {
            format!(
                "no usable environment for repo `{}` (see envs.jsonl)",
                p.repo
            )
        })?;
    if p.target.module.is_empty() {
        return Err(format!(
            "`{}` is not importable: its path is not a module name",
            p.path
        ));
    }
    Ok(env.clone())
}

const GENERATOR_BUILTIN: &str = "builtin";
const GENERATOR_LLM: &str = "llm";

fn invalid(p: &Prepared, generator: &str, class: &str, message: String) -> Done {
    Done {
        harness_line: json!({
            "id": p.id, "generator": generator, "valid": false, "tests": 0, "branches": 0,
            "branch_coverage": null, "line_coverage": null, "failure_class": class, "failure_message": message,
        }),
        instance: None,
        valid: false,
    }
}

fn generate_one(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    gen_settings: &GenerateSettings,
    p: Prepared,
    counters: &[AtomicU64; 6],
) -> Result<Step> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let env = match usable_env(&p) {
        Ok(env) => env,
        Err(message) => {
            bump(2);
            return Ok(Step::Done(invalid(
                &p,
                GENERATOR_BUILTIN,
                "import_env",
                message,
            )));
        }
    };
    let (generated, fresh) = harness::generate(
        sandbox,
        cache,
        &env.python,
        &p.target,
        &p.code,
        gen_settings,
    )?;
    bump(if fresh { 0 } else { 1 });
    match (&generated.status[..], generated.harness) {
        ("ok", Some(h)) => Ok(Step::Harness(Box::new(p), env, h)),
        _ => {
            bump(2);
            let message = generated
                .error
                .clone()
                .unwrap_or_else(|| "the explorer wrote no harness".into());
            Ok(Step::Done(invalid(
                &p,
                GENERATOR_BUILTIN,
                harness::classify_message(&message),
                message,
            )))
        }
    }
}

fn finish_one(
    cfg: &Config,
    step: Step,
    validation: Option<(Validation, bool)>,
    validate: bool,
    counters: &[AtomicU64; 6],
) -> Result<Done> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let (p, env, harness_text, validation, generator) = match step {
        Step::Done(done) => return Ok(done),
        Step::Harness(p, env, h) => (p, env, h, validation, GENERATOR_BUILTIN),
        Step::Validated(p, env, h, v) => (p, env, h, Some(v), GENERATOR_LLM),
    };
    let (v, fresh) = match (validate, validation) {
        (true, Some(v)) => v,
        _ => {
            return Ok(Done {
                harness_line: json!({
                    "id": p.id, "generator": generator, "valid": null, "tests": null, "branches": null,
                    "branch_coverage": null, "line_coverage": null, "failure_class": null, "failure_message": null,
                }),
                instance: None,
                valid: false,
            });
        }
    };
    bump(if fresh { 3 } else { 4 });
    if !v.valid {
        bump(5);
    }
    let harness_line = json!({
        "id": p.id, "generator": generator, "valid": v.valid, "tests": v.tests, "branches": v.branches,
        "branch_coverage": v.branch_coverage, "line_coverage": v.line_coverage,
        "failure_class": v.failure_class, "failure_message": v.failure_message,
    });
    let coverage = if v.branches > 0 {
        v.branch_coverage
    } else {
        v.line_coverage
    };
    let selected = v.valid && coverage.unwrap_or(0.0) >= cfg.select.min_branch_coverage;
    let instance = selected.then(|| {
        (
            p.id.clone(),
            json!({
                "id": p.id,
                "repo": p.repo,
                "commit": p.commit,
                "path": p.path,
                "qualname": p.qualname,
                "docstring": p.docstring,
                "spec": p.docstring,
                "context": p.context,
                "harness": harness_text,
                "tests": v.tests,
                "branch_coverage": v.branch_coverage,
                "line_coverage": v.line_coverage,
                "harness_hash": Hash::of_bytes(harness_text.as_bytes()).to_hex(),
                "env_lock": env.record.lock_hash,
            }),
        )
    });
    Ok(Done {
        harness_line,
        instance,
        valid: v.valid,
    })
}

/// `manifest.json`: the dataset version (blake3 over the instances and the settings that made
/// them), the repos with their commits, and each instance's hash. No times, no absolute paths.
pub fn manifest(
    cfg: &Config,
    checkouts: &[Arc<Checkout>],
    instances: &[(String, Vec<u8>)],
) -> Result<(String, Vec<u8>)> {
    let settings = Hash::of_key(&(
        &cfg.extract,
        &cfg.context,
        &cfg.generate,
        &cfg.select,
        env!("CARGO_PKG_VERSION"),
    ));
    let mut listed: Vec<(String, String)> = instances
        .iter()
        .map(|(id, line)| (id.clone(), Hash::of_bytes(line).to_hex()))
        .collect();
    listed.sort();
    let mut h = blake3::Hasher::new();
    h.update(&settings.0);
    for (id, hash) in &listed {
        h.update(id.as_bytes());
        h.update(&[0]);
        h.update(hash.as_bytes());
    }
    let version = h.finalize().to_hex().to_string();
    let manifest = json!({
        "format": "r2e-dataset-1",
        "version": version,
        "r2e": env!("CARGO_PKG_VERSION"),
        "settings_hash": settings.to_hex(),
        "repos": checkouts.iter().map(|c| json!({"name": c.name, "commit": c.identity, "rev": c.rev})).collect::<Vec<_>>(),
        "instances": listed.iter().map(|(id, hash)| json!({"id": id, "hash": hash})).collect::<Vec<_>>(),
    });
    let mut bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(e.to_string()))?;
    bytes.push(b'\n');
    Ok((version, bytes))
}
