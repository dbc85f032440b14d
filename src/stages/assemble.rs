//! Stages `generate`, `validate` and `assemble` over every candidate: harnesses from the built-in
//! generator, their validation, and the benchmark instances with the dataset's manifest.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;
use serde_json::json;

use super::StageCounts;
use super::checkout::Checkout;
use super::env::{Env, EnvOutcome, Envs};
use super::harness::{self, CodeKey, GenerateSettings, Target, Validation};
use crate::cache::Cache;
use crate::config::{Config, Generator};
use crate::db::{self, Database, FunctionRow, ItemId, Repo, Settings, SourceFile};
use crate::engine::Stage;
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::llm::Spent;
use crate::python::resolve::Item;
use crate::python::summary::DefKind;
use crate::sandbox::Sandbox;
use crate::stages::llmgen::{LlmGenerator, LlmOutcome, coverage};
use crate::stages::refine::{RefineFailure, Refined};

/// What these stages produce.
#[derive(Default)]
pub struct HarnessOutputs {
    pub generate: StageCounts,
    pub validate: StageCounts,
    pub refine: StageCounts,
    pub assemble: StageCounts,
    pub valid: u64,
    /// `generator = "hybrid"`: candidates the built-in generator covered well enough alone (no
    /// model request was needed for them).
    pub builtin_sufficient: u64,
    /// Instances whose `spec` is a refined docstring.
    pub refined: u64,
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
    /// Whether the function's slice stays within its own file.
    in_file: bool,
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
        in_file: slice.in_file(file.ix(db)),
    })
}

/// A candidate's harness record and, when selected, its instance.
struct Done {
    harness_line: serde_json::Value,
    instance: Option<(String, serde_json::Value)>,
    valid: bool,
    /// A selected candidate and its validation, for refinement.
    selected: Option<Box<(Prepared, Validation)>>,
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

/// The model client, the templates and a pool as wide as the providers allow (its threads
/// mostly wait for answers), when a model-driven stage runs.
struct Model {
    llm: crate::llm::Llm,
    templates: crate::llm::prompts::Templates,
    pool: rayon::ThreadPool,
}

impl Model {
    fn new(cfg: &Config, generate: bool, refine: bool) -> Result<Option<Model>> {
        let mut width = 0;
        if generate {
            width = width.max(Self::provider(cfg.generate_provider())?.max_concurrency);
        }
        if refine {
            width = width.max(Self::provider(cfg.refine_provider())?.max_concurrency);
        }
        if !generate && !refine {
            return Ok(None);
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads((width as usize).max(rayon::current_num_threads()))
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        Ok(Some(Model {
            llm: crate::llm::Llm::new()?,
            templates: crate::llm::prompts::Templates::load(cfg)?,
            pool,
        }))
    }

    fn provider(
        p: Option<&crate::config::ProviderConfig>,
    ) -> Result<&crate::config::ProviderConfig> {
        p.ok_or_else(|| Error::input("a model-driven stage names no known provider"))
    }

    fn generator<'a>(&'a self, cfg: &'a Config) -> Result<LlmGenerator<'a>> {
        Ok(LlmGenerator {
            llm: &self.llm,
            templates: &self.templates,
            provider: Self::provider(cfg.generate_provider())?,
            settings: &cfg.generate,
            min_coverage: cfg.select.min_branch_coverage,
        })
    }
}

/// Counters of the stages: generate (executed, cached, failed), validate, refine.
type Counters = [AtomicU64; 9];

/// Runs `generate` (and `validate`, `refine` and `assemble`, as far as `until` goes) over the
/// candidates.
pub fn run(
    inputs: &Inputs,
    candidates: &[(SourceFile, FunctionRow)],
    until: Stage,
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
    let validate = until >= Stage::Validate;
    let refine = until >= Stage::Refine && cfg.refine.enabled;
    let sandbox = crate::sandbox::local::LocalSandbox::new();
    let gen_settings = GenerateSettings {
        budget: cfg.generate.budget,
        seed: cfg.generate.seed,
        max_tests: cfg.generate.max_tests,
        per_call_timeout_ms: cfg.generate.per_call_timeout_ms,
        time_limit_seconds: cfg.generate.time_limit_seconds,
    };
    let counters: Counters = Default::default();
    let retry_later = AtomicBool::new(false);
    let generator = cfg.generate.generator;
    let model = Model::new(cfg, generator.uses_model() && validate, refine)?;
    let prepare_at = |db: &Database, (file, row): &(SourceFile, FunctionRow)| {
        prepare(db, cache, checkouts, repos, settings, envs, *file, row)
    };
    // Generate, in parallel.
    let generated: Vec<Result<Step>> = match (&model, generator) {
        (Some(m), Generator::Llm) => {
            let llm_gen = m.generator(cfg)?;
            // Prepare on this thread (the database is not shared across pools), ask in the pool.
            let prepared: Vec<Prepared> = candidates
                .iter()
                .map(|c| prepare_at(db, c))
                .collect::<Result<_>>()?;
            m.pool.install(|| {
                prepared
                    .into_par_iter()
                    .map(|p| {
                        let step = llm_one(&sandbox, cache, &llm_gen, p, &counters, &retry_later);
                        progress.inc(1);
                        step
                    })
                    .collect()
            })
        }
        _ => candidates
            .par_iter()
            .map_with(db.clone(), |db, c| {
                let step = generate_one(
                    &sandbox,
                    cache,
                    &gen_settings,
                    prepare_at(db, c)?,
                    &counters,
                    &retry_later,
                );
                progress.inc(1);
                step
            })
            .collect(),
    };
    let steps: Vec<Step> = generated.into_iter().collect::<Result<_>>()?;
    let mut steps = if validate {
        validate_builtin(&sandbox, cache, steps, &retry_later)?
    } else {
        steps
    };
    // Hybrid: the model for the candidates the built-in generator left short.
    let mut builtin_sufficient = 0;
    if let (Some(m), Generator::Hybrid) = (&model, generator) {
        let min = cfg.select.min_branch_coverage;
        let mut short = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Validated(_, _, g)
                    if g.validation.valid && coverage(&g.validation) >= min =>
                {
                    builtin_sufficient += 1;
                }
                Step::Done(d) if d.harness_line["failure_class"] == "import_env" => {}
                _ => short.push(i),
            }
        }
        let llm_gen = m.generator(cfg)?;
        let prepared: Vec<(usize, Prepared)> = short
            .iter()
            .map(|&i| Ok((i, prepare_at(db, &candidates[i])?)))
            .collect::<Result<_>>()?;
        let replaced: Vec<(usize, Result<Step>)> = m.pool.install(|| {
            prepared
                .into_par_iter()
                .map(|(i, p)| {
                    let step = hybrid_one(
                        &sandbox,
                        cache,
                        &llm_gen,
                        p,
                        &steps[i],
                        &counters,
                        &retry_later,
                    );
                    (i, step)
                })
                .collect()
        });
        for (i, step) in replaced {
            steps[i] = step?;
        }
    }
    let mut dones: Vec<Done> = steps
        .into_iter()
        .map(|step| finish_one(cfg, step, validate, &counters))
        .collect::<Result<_>>()?;
    let mut refined = 0;
    if let (Some(m), true) = (&model, refine) {
        let refiner = crate::stages::refine::Refiner {
            llm: &m.llm,
            templates: &m.templates,
            provider: Model::provider(cfg.refine_provider())?,
            settings: &cfg.refine,
        };
        let answers: Vec<(usize, Result<Refined>)> = m.pool.install(|| {
            dones
                .par_iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    let (p, v) = &**d.selected.as_ref()?;
                    let harness = d.instance.as_ref()?.1["harness"]
                        .as_str()
                        .unwrap_or_default();
                    let subject = crate::stages::refine::Subject {
                        qualname: &p.qualname,
                        module: &p.target.module,
                        kind: p.target.kind,
                        docstring: p.docstring.as_deref().unwrap_or_default(),
                        context: &p.context,
                        harness,
                    };
                    Some((i, refiner.run(cache, &subject, v)))
                })
                .collect()
        });
        for (i, answer) in answers {
            let answer = answer?;
            let bump = |k: usize| counters[k].fetch_add(1, Ordering::Relaxed);
            bump(if answer.fresh { 6 } else { 7 });
            let done = &mut dones[i];
            let record = match answer.spec {
                Ok(spec) => {
                    refined += 1;
                    if let Some((_, instance)) = &mut done.instance {
                        instance["spec"] = json!(spec);
                        instance["spec_source"] = json!("refined");
                    }
                    json!({"status": "refined"})
                }
                Err(RefineFailure::Malformed(message)) => {
                    bump(8);
                    json!({"status": "malformed", "message": message})
                }
                Err(RefineFailure::Request(message)) => {
                    bump(8);
                    retry_later.store(true, Ordering::Relaxed);
                    json!({"status": "failed", "message": message})
                }
            };
            let mut record = record;
            record["llm"] = json!(answer.spent);
            done.harness_line["refine"] = record;
        }
    }
    let mut out = HarnessOutputs::default();
    let mut instances = Vec::new();
    for done in dones {
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
    let counts = |i: usize| StageCounts {
        executed: c(i),
        cached: c(i + 1),
        failed: c(i + 2),
    };
    out.generate = counts(0);
    out.validate = counts(3);
    out.refine = counts(6);
    out.assemble = StageCounts {
        executed: instances.len() as u64,
        cached: 0,
        failed: 0,
    };
    out.instances = instances;
    out.builtin_sufficient = builtin_sufficient;
    out.refined = refined;
    if let Some(m) = &model {
        for ((stage, model), usage) in m.llm.usage() {
            out.llm.entry(stage).or_default().insert(model, usage);
        }
    }
    out.retry_later = retry_later.load(Ordering::Relaxed);
    Ok(out)
}

/// Validates the built-in harnesses: those of each environment in a few warm workers.
fn validate_builtin(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    steps: Vec<Step>,
    retry_later: &AtomicBool,
) -> Result<Vec<Step>> {
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
            let results = harness::validate_batch(sandbox, cache, python, &items)?;
            Ok(idx.iter().copied().zip(results).collect())
        })
        .collect();
    let mut validations: Vec<Option<(Validation, bool)>> = vec![None; steps.len()];
    for chunk in done {
        for (i, v) in chunk? {
            if v.0.transient {
                retry_later.store(true, Ordering::Relaxed);
            }
            validations[i] = Some(v);
        }
    }
    Ok(steps
        .into_iter()
        .zip(validations)
        .map(|(step, v)| match (step, v) {
            (Step::Harness(p, env, harness), Some((validation, fresh))) => Step::Validated(
                p,
                env,
                Box::new(Generated {
                    harness,
                    validation,
                    fresh,
                    generator: GENERATOR_BUILTIN,
                    from: None,
                    spent: None,
                }),
            ),
            (step, _) => step,
        })
        .collect())
}

/// A validation for the candidate at an index, and whether it ran now.
type Validated = (usize, (Validation, bool));

/// A harness with its validation, from whichever generator wrote it.
struct Generated {
    harness: String,
    validation: Validation,
    /// Whether the validation (or a request) ran now.
    fresh: bool,
    generator: &'static str,
    /// `hybrid`: which harness won (`builtin`, `model` or `merged`).
    from: Option<&'static str>,
    /// The model requests the harness needed, for the model-driven generators.
    spent: Option<Spent>,
}

/// A candidate after `generate`: finished (no harness), a built-in harness to validate, or a
/// validated harness.
enum Step {
    Done(Done),
    Harness(Box<Prepared>, Arc<Env>, String),
    Validated(Box<Prepared>, Arc<Env>, Box<Generated>),
}

/// The model-driven generator for one candidate.
fn llm_one(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    generator: &LlmGenerator,
    p: Prepared,
    counters: &Counters,
    retry_later: &AtomicBool,
) -> Result<Step> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let (env, outcome) = match ask_model(
        sandbox,
        cache,
        generator,
        &p,
        GENERATOR_LLM,
        counters,
        retry_later,
    )? {
        Ok(asked) => asked,
        Err(done) => return Ok(Step::Done(done)),
    };
    match outcome.harness {
        Some(harness) => Ok(Step::Validated(
            Box::new(p),
            env,
            Box::new(Generated {
                harness,
                validation: outcome.validation,
                fresh: outcome.fresh,
                generator: GENERATOR_LLM,
                from: None,
                spent: Some(outcome.spent),
            }),
        )),
        None => {
            bump(2);
            Ok(Step::Done(model_failure(
                &p,
                GENERATOR_LLM,
                outcome.validation,
                outcome.spent,
            )))
        }
    }
}

/// Runs the model-driven generator for a candidate in its environment (or records why it has
/// none), counting the action and noting a failed request.
fn ask_model(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    generator: &LlmGenerator,
    p: &Prepared,
    label: &str,
    counters: &Counters,
    retry_later: &AtomicBool,
) -> Result<std::result::Result<(Arc<Env>, LlmOutcome), Done>> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let env = match usable_env(p) {
        Ok(env) => env,
        Err(message) => {
            bump(2);
            return Ok(Err(invalid(p, label, "import_env", message)));
        }
    };
    let outcome = generator.run(sandbox, cache, &env.python, &p.target, &p.code, &p.context)?;
    // A hybrid candidate was counted once already, by the built-in generator.
    if label != GENERATOR_HYBRID {
        bump(if outcome.fresh { 0 } else { 1 });
    }
    if outcome.request_failed {
        retry_later.store(true, Ordering::Relaxed);
    }
    Ok(Ok((env, outcome)))
}

/// A candidate the model wrote no harness for.
fn model_failure(p: &Prepared, generator: &str, v: Validation, spent: Spent) -> Done {
    let mut done = invalid(
        p,
        generator,
        v.failure_class.as_deref().unwrap_or("other"),
        v.failure_message.unwrap_or_default(),
    );
    done.harness_line["llm"] = json!(spent);
    done
}

/// `generator = "hybrid"` for a candidate the built-in generator left short: the model writes
/// and repairs a harness; when both are valid, the model's tests join the built-in ones (one
/// harness, validated again), else the better harness wins.
fn hybrid_one(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    generator: &LlmGenerator,
    p: Prepared,
    builtin: &Step,
    counters: &Counters,
    retry_later: &AtomicBool,
) -> Result<Step> {
    let (env, outcome) = match ask_model(
        sandbox,
        cache,
        generator,
        &p,
        GENERATOR_HYBRID,
        counters,
        retry_later,
    )? {
        Ok(asked) => asked,
        Err(done) => return Ok(Step::Done(done)),
    };
    let built = match builtin {
        Step::Validated(_, _, g) => Some(g),
        _ => None,
    };
    let builtin_kept =
        |b: &Generated| (b.harness.clone(), b.validation.clone(), b.fresh, "builtin");
    let model_valid = outcome.validation.valid;
    let chosen = match (built, outcome.harness) {
        (Some(b), Some(m)) if b.validation.valid && model_valid => {
            let merged = merge_harnesses(&b.harness, &m, &p.target);
            let (v, fresh) =
                harness::validate(sandbox, cache, &env.python, &p.target, &p.code, &merged)?;
            let best = coverage(&b.validation).max(coverage(&outcome.validation));
            if v.valid && coverage(&v) >= best {
                (merged, v, fresh || outcome.fresh, "merged")
            } else if coverage(&outcome.validation) > coverage(&b.validation) {
                (m, outcome.validation, outcome.fresh, "model")
            } else {
                builtin_kept(b)
            }
        }
        (Some(b), _) if b.validation.valid && !model_valid => builtin_kept(b),
        (_, Some(m)) => (m, outcome.validation, outcome.fresh, "model"),
        (Some(b), None) => builtin_kept(b),
        // The built-in generator's failure was counted already.
        (None, None) => {
            return Ok(Step::Done(model_failure(
                &p,
                GENERATOR_HYBRID,
                outcome.validation,
                outcome.spent,
            )));
        }
    };
    let (harness, validation, fresh, from) = chosen;
    Ok(Step::Validated(
        Box::new(p),
        env,
        Box::new(Generated {
            harness,
            validation,
            fresh,
            generator: GENERATOR_HYBRID,
            from: Some(from),
            spent: Some(outcome.spent),
        }),
    ))
}

/// One harness with the built-in tests and the model's: the model's top-level classes and
/// functions are renamed (`Model<Name>`, `model_<name>`, and every use of them in its code) so
/// that none replaces a built-in one, and its code is bound to the implementation under test and
/// the reference again.
pub fn merge_harnesses(builtin: &str, model: &str, target: &Target) -> String {
    let (head, _) = crate::stages::llmgen::header(target);
    let main = "if __name__ == \"__main__\":";
    let builtin = builtin
        .find(main)
        .map_or(builtin, |at| &builtin[..at])
        .trim_end();
    let body = model.strip_prefix(head.as_str()).unwrap_or(model);
    let body = body.find(main).map_or(body, |at| &body[..at]).trim();
    let bindings: Vec<&str> = head.lines().rev().take(2).collect();
    let defined: Vec<(String, String)> = body
        .lines()
        .filter_map(|l| {
            let (kind, rest) = l
                .strip_prefix("class ")
                .map(|r| ("class", r))
                .or_else(|| l.strip_prefix("def ").map(|r| ("def", r)))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then(|| {
                let new = if kind == "class" {
                    format!("Model{name}")
                } else {
                    format!("model_{name}")
                };
                (name, new)
            })
        })
        .collect();
    let mut body = body.to_owned();
    for (old, new) in &defined {
        body = rename_identifier(&body, old, new);
    }
    format!(
        "{builtin}\n\n\n# Tests written by the model.\n{}\n{}\n\n{body}\n\n\n{main}\n    unittest.main()\n",
        bindings[1], bindings[0]
    )
}

/// `text` with the identifier `old` (not an attribute, not part of a longer name) renamed.
fn rename_identifier(text: &str, old: &str, new: &str) -> String {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(old) {
        let before = text[..at].chars().next_back();
        let after = text[at + old.len()..].chars().next();
        if at >= last && !ident(before) && before != Some('.') && !ident(after) {
            out.push_str(&text[last..at]);
            out.push_str(new);
            last = at + old.len();
        }
    }
    out.push_str(&text[last..]);
    out
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
const GENERATOR_HYBRID: &str = "hybrid";

fn invalid(p: &Prepared, generator: &str, class: &str, message: String) -> Done {
    Done {
        harness_line: json!({
            "id": p.id, "generator": generator, "valid": false, "tests": 0, "branches": 0,
            "branch_coverage": null, "line_coverage": null, "failure_class": class, "failure_message": message,
            "in_file": p.in_file,
        }),
        instance: None,
        valid: false,
        selected: None,
    }
}

fn generate_one(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    gen_settings: &GenerateSettings,
    p: Prepared,
    counters: &Counters,
    retry_later: &AtomicBool,
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
    if generated.transient {
        retry_later.store(true, Ordering::Relaxed);
    }
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

fn finish_one(cfg: &Config, step: Step, validate: bool, counters: &Counters) -> Result<Done> {
    let bump = |i: usize| counters[i].fetch_add(1, Ordering::Relaxed);
    let (p, env, g) = match step {
        Step::Done(done) => return Ok(done),
        Step::Validated(p, env, g) if validate => (p, env, g),
        Step::Validated(p, ..) | Step::Harness(p, ..) => {
            return Ok(Done {
                harness_line: json!({
                    "id": p.id, "generator": GENERATOR_BUILTIN, "valid": null, "tests": null, "branches": null,
                    "branch_coverage": null, "line_coverage": null, "failure_class": null, "failure_message": null,
                    "in_file": p.in_file,
                }),
                instance: None,
                valid: false,
                selected: None,
            });
        }
    };
    let Generated {
        harness: harness_text,
        validation: v,
        fresh,
        generator,
        from,
        spent,
    } = *g;
    bump(if fresh { 3 } else { 4 });
    if !v.valid {
        bump(5);
    }
    let mut harness_line = json!({
        "id": p.id, "generator": generator, "valid": v.valid, "tests": v.tests, "branches": v.branches,
        "branch_coverage": v.branch_coverage, "line_coverage": v.line_coverage,
        "failure_class": v.failure_class, "failure_message": v.failure_message,
        "in_file": p.in_file,
    });
    if let Some(from) = from {
        harness_line["harness_from"] = json!(from);
    }
    if let Some(spent) = spent {
        harness_line["llm"] = json!(spent);
    }
    let selected = v.valid && coverage(&v) >= cfg.select.min_branch_coverage;
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
                "spec_source": "docstring",
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
        selected: selected.then(|| Box::new((*p, v))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_harnesses_keep_the_model_code_apart_from_the_builtin_code() {
        let target = Target {
            import_root: "/r".into(),
            extra_roots: Vec::new(),
            module: "m".into(),
            qualname: "f".into(),
            kind: "function",
            source_file: "/r/m.py".into(),
            start_line: 1,
            end_line: 2,
            call_sites: Vec::new(),
        };
        let builtin = "import unittest\n\ndef helper():\n    return 1\n\nclass TestF(unittest.TestCase):\n    def test_0(self):\n        helper()\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
        let (head, _) = crate::stages::llmgen::header(&target);
        let model = format!(
            "{head}\ndef helper():\n    return 2\n\nclass TestF(unittest.TestCase):\n    def test_0(self):\n        self.assertEqual(f(helper()), reference_f(helper()))\n        x.helper()\n"
        );
        let merged = merge_harnesses(builtin, &model, &target);
        assert!(merged.contains("def helper():\n    return 1"));
        assert!(merged.contains("def model_helper():\n    return 2"));
        assert!(merged.contains("class ModelTestF(unittest.TestCase)"));
        assert!(merged.contains("f(model_helper()), reference_f(model_helper())"));
        assert!(merged.contains("x.helper()"), "attributes keep their names");
        assert_eq!(merged.matches("unittest.main()").count(), 1);
        assert!(crate::python::extract::summarize(&merged).is_ok());
    }
}
