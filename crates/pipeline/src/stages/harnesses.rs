//! The harness stages over every candidate: `generate` (the built-in explorer, a model, or
//! both), `validate`, `refine` and `assemble`, in parallel. The model-driven ones run in a pool
//! as wide as the provider allows; the built-in harnesses of an environment are validated in a
//! few warm workers.

use r2e_core::records::StageCounts;
use r2e_exec::llm::prompts::{TemplateSets, Templates};
use r2e_exec::py::AnswerStatus;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use super::assemble::{self, Done, ExplorerNotes, Written};
use super::candidate::{Candidate, Inputs, prepare};
use super::capture;
use super::environment::Env;
use super::generate;
use super::hybrid::merge_harnesses;
use super::llmgen::{LlmGenerator, LlmOutcome};
use super::mutation;
use super::refine::{RefineFailure, Refiner, Subject};
use super::validate::{self};
use super::{Stage, Tally};
use crate::db::{Database, FunctionRow, SourceFile};
use r2e_core::config::{Config, Generator, ProviderConfig, ValidateConfig};
use r2e_core::error::{Error, Result};
use r2e_core::keys::GenerateSettings;
use r2e_core::records::{
    FailureClass, HarnessFrom, HarnessRecord, Instance, MutantCount, RefineRecord, RefineStatus,
    RepoTime, SpecSource, UsageTable,
};
use r2e_core::verdict::Policy;
use r2e_exec::jobs::Exec;
use r2e_exec::llm::{Llm, ModelClient};
use r2e_exec::runs;
use r2e_exec::services::Services;

/// What these stages produce.
#[derive(Default)]
pub struct HarnessOutputs {
    pub generate: StageCounts,
    pub validate: StageCounts,
    pub mutate: StageCounts,
    pub refine: StageCounts,
    pub assemble: StageCounts,
    pub valid: u64,
    /// `generator = "hybrid"`: candidates the built-in generator covered well enough alone (no
    /// model request was needed for them).
    pub builtin_sufficient: u64,
    /// Instances whose `spec` is a refined docstring.
    pub refined: u64,
    /// Lines of `harnesses.jsonl`, one per candidate.
    pub harnesses: Vec<HarnessRecord>,
    /// Lines of `dataset.jsonl`.
    pub instances: Vec<Instance>,
    /// Model usage by stage and model.
    pub llm: UsageTable,
    /// Something failed that a later build may get (a model request, a sandbox timeout): the
    /// build must not be taken for up to date.
    pub retry_later: bool,
    /// Each repository's time in `generate`, `validate` and `mutate` (`env` is not theirs).
    pub times: HashMap<String, RepoTime>,
    /// With `[bugfix]`: the tasks (lines of `bugfix.jsonl`), and the broken states left out.
    pub bugfix: Option<super::bugfix::Made>,
    /// With `[bugfix] statement = "model"`: the statement requests (`failed`: answers not
    /// used).
    pub statement: StageCounts,
}

/// The counts of the harness stages, and whether something must run again next build.
#[derive(Default)]
struct Tallies {
    generate: Tally,
    validate: Tally,
    mutate: Tally,
    refine: Tally,
    retry_later: AtomicBool,
    times: Mutex<HashMap<String, RepoTime>>,
}

/// The harness stages a repository's time is counted in.
#[derive(Clone, Copy)]
enum Timed {
    Generate,
    Validate,
    Mutate,
    Bugfix,
    BugfixTests,
}

impl Tallies {
    fn retry_later(&self) {
        self.retry_later.store(true, Ordering::Relaxed);
    }

    /// Counts `seconds` of `repo`'s work in `stage`: a unit of work, computed (`Some(true)`) or
    /// taken from the cache (`Some(false)`), or time outside any unit (`None`).
    fn time(&self, repo: &str, stage: Timed, seconds: f64, fresh: Option<bool>) {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        let t = times.entry(repo.to_owned()).or_insert_with(|| RepoTime {
            repo: repo.to_owned(),
            ..RepoTime::default()
        });
        let t = match stage {
            Timed::Generate => &mut t.generate,
            Timed::Validate => &mut t.validate,
            Timed::Mutate => &mut t.mutate,
            Timed::Bugfix => &mut t.bugfix,
            Timed::BugfixTests => &mut t.bugfix_tests,
        };
        match fresh {
            Some(fresh) => t.add(seconds, fresh),
            None => t.seconds += seconds,
        }
    }
}

/// A candidate after `generate`: finished (no harness), a built-in harness to validate, or a
/// validated harness.
pub enum Step {
    Done(Box<Done>),
    Harness(Box<Candidate>, Arc<Env>, String, ExplorerNotes),
    Validated(Box<Candidate>, Arc<Env>, Box<Written>),
}

/// The model client, the templates and a pool as wide as the providers allow (its threads
/// mostly wait for answers), when a model-driven stage runs.
struct Model {
    llm: Llm,
    templates: Arc<Templates>,
    pool: rayon::ThreadPool,
}

impl Model {
    fn new(
        cfg: &Config,
        templates: &TemplateSets,
        client: &Arc<dyn ModelClient>,
        generate: bool,
        refine: bool,
        statement: bool,
    ) -> Result<Option<Model>> {
        if !generate && !refine && !statement {
            return Ok(None);
        }
        let mut width = 0;
        if generate {
            width = width.max(provider(cfg.generate_provider())?.max_concurrency);
        }
        if refine {
            width = width.max(provider(cfg.refine_provider())?.max_concurrency);
        }
        if statement {
            width = width.max(provider(cfg.statement_provider())?.max_concurrency);
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads((width as usize).max(rayon::current_num_threads()))
            .build()
            .map_err(Error::internal)?;
        Ok(Some(Model {
            llm: Llm::new(client.clone()),
            templates: templates.get(cfg)?,
            pool,
        }))
    }

    fn generator<'a>(&'a self, cfg: &'a Config) -> Result<LlmGenerator<'a>> {
        let provider = provider(cfg.generate_provider())?;
        Ok(LlmGenerator {
            llm: &self.llm,
            templates: &self.templates,
            provider,
            settings: &cfg.generate,
            request: super::keyed::harness_request(provider.api, &cfg.generate),
            min_coverage: cfg.select.min_branch_coverage,
            validate: cfg.validate.clone(),
        })
    }
}

fn provider(p: Option<&ProviderConfig>) -> Result<&ProviderConfig> {
    p.ok_or_else(|| Error::input("a model-driven stage names no known provider"))
}

/// Runs `generate` (and `validate`, `refine` and `assemble`, as far as `until` goes) over the
/// candidates.
pub fn run(
    inputs: &Inputs,
    db: &Database,
    services: &Services,
    templates: &TemplateSets,
    candidates: &[(SourceFile, FunctionRow)],
    until: Stage,
    progress: &indicatif::ProgressBar,
) -> Result<HarnessOutputs> {
    let cfg = inputs.cfg;
    let exec = Exec {
        cache: inputs.cache,
        sandbox: services.sandbox.as_ref(),
        settings: &cfg.sandbox,
        warm: None,
    };
    let validate = until >= Stage::Validate;
    let refine = until >= Stage::Refine && cfg.refine.enabled;
    let statement = until >= Stage::Assemble && cfg.statement_provider().is_some();
    let tallies = Tallies::default();
    let generator = cfg.generate.generator;
    let model = Model::new(
        cfg,
        templates,
        &services.models,
        generator.uses_model() && validate,
        refine,
        statement,
    )?;
    let steps = generate_all(
        inputs,
        db,
        &exec,
        model.as_ref(),
        candidates,
        &tallies,
        progress,
    )?;
    let mut steps = if validate {
        validate_builtin(&exec, steps, &cfg.validate, &tallies)?
    } else {
        steps
    };
    let mut builtin_sufficient = 0;
    if let (Some(m), Generator::Hybrid) = (&model, generator) {
        builtin_sufficient = hybrid_all(inputs, db, &exec, m, candidates, &mut steps, &tallies)?;
    }
    // A mutant that loops forever is killed by the clock: a short one, so that it costs
    // seconds, not the minute a harness run may take (stages `mutate` and `bugfix`).
    let mutant_settings = r2e_core::config::SandboxConfig {
        run_timeout_seconds: cfg
            .sandbox
            .run_timeout_seconds
            .min(mutation::RUN_TIMEOUT_SECONDS),
        ..cfg.sandbox.clone()
    };
    let mutant_exec = Exec {
        settings: &mutant_settings,
        ..exec
    };
    if until >= Stage::Mutate {
        mutate_all(&mutant_exec, &mut steps, cfg.validate.policy(), &tallies)?;
    }
    let mut dones: Vec<Done> = steps
        .into_iter()
        .map(|step| finish(cfg, step, validate, &tallies))
        .collect();
    let mut refined = 0;
    if let (Some(m), true) = (&model, refine) {
        refined = refine_all(cfg, &exec, m, &mut dones, &tallies)?;
    }
    let mut out = HarnessOutputs::default();
    if let (Some(b), true) = (&cfg.bugfix, until >= Stage::Assemble) {
        let repos: super::bugfix::Repos = inputs
            .checkouts
            .iter()
            .map(|c| {
                let facts = super::bugfix::RepoFacts {
                    history: c.history().map(|dir| (dir, c.identity.clone())),
                    tree: c.tree.clone(),
                };
                (c.name.clone(), facts)
            })
            .collect();
        let made = super::bugfix::make(
            &mutant_exec,
            &super::bugfix::Settings {
                bugfix: b,
                repeats: cfg.validate.repeats,
                tests_time_limit: cfg.generate.capture_time_limit_seconds,
            },
            &dones,
            &repos,
        )?;
        if made.errors > 0 {
            tallies.retry_later();
        }
        for t in &made.times {
            tallies.time(&t.repo, Timed::Bugfix, t.checks, Some(t.fresh));
            tallies.time(&t.repo, Timed::BugfixTests, t.tests, Some(t.fresh));
        }
        let mut made = made;
        if let (Some(m), true) = (&model, statement) {
            out.statement = statements_all(cfg, &exec, m, &mut made.tasks, &dones, &tallies)?;
        }
        out.bugfix = Some(made);
    }
    for done in dones {
        out.valid += u64::from(done.record.valid == Some(true));
        out.harnesses.push(done.record);
        out.instances.extend(done.instance);
    }
    out.generate = tallies.generate.counts();
    out.validate = tallies.validate.counts();
    out.mutate = tallies.mutate.counts();
    out.refine = tallies.refine.counts();
    out.assemble = StageCounts {
        executed: out.instances.len() as u64,
        cached: 0,
        failed: 0,
    };
    out.builtin_sufficient = builtin_sufficient;
    out.refined = refined;
    if let Some(m) = &model {
        for ((stage, model), usage) in m.llm.usage() {
            out.llm.entry(stage).or_default().insert(model, usage);
        }
    }
    out.retry_later = tallies.retry_later.load(Ordering::Relaxed);
    out.times = tallies
        .times
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    Ok(out)
}

/// Stage `generate` for every candidate: a model writes (and validates) the harness for
/// `generator = "llm"`; otherwise the built-in explorer, in parallel.
fn generate_all(
    inputs: &Inputs,
    db: &Database,
    exec: &Exec,
    model: Option<&Model>,
    candidates: &[(SourceFile, FunctionRow)],
    tallies: &Tallies,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Step>> {
    let cfg = inputs.cfg;
    let generated: Vec<Result<Step>> = match (model, cfg.generate.generator) {
        (Some(m), Generator::Llm) => {
            let llm_gen = m.generator(cfg)?;
            // Prepare on this thread (the database is not shared across pools), ask in the pool.
            let prepared: Vec<Candidate> = candidates
                .iter()
                .map(|(f, row)| prepare(inputs, db, *f, row))
                .collect::<Result<_>>()?;
            m.pool.install(|| {
                prepared
                    .into_par_iter()
                    .map(|c| {
                        let step = llm_one(exec, &llm_gen, c, tallies, Instant::now());
                        progress.inc(1);
                        step
                    })
                    .collect()
            })
        }
        _ => {
            let settings = super::keyed::explorer(&cfg.generate, exec.sandbox, exec.settings);
            let prepared: Vec<(Candidate, f64)> = candidates
                .par_iter()
                .map_with(db.clone(), |db: &mut Database, (f, row)| {
                    let started = Instant::now();
                    let c = prepare(inputs, db, *f, row)?;
                    Ok((c, started.elapsed().as_secs_f64()))
                })
                .collect::<Result<_>>()?;
            // By repository (in the candidates' order): each one's capture, then its
            // explorations, while other repositories capture or explore.
            let mut groups: Vec<Vec<(usize, Candidate, f64)>> = Vec::new();
            let mut group_of: HashMap<String, usize> = HashMap::new();
            for (i, (c, prepared_in)) in prepared.into_iter().enumerate() {
                let g = *group_of.entry(c.repo.clone()).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push((i, c, prepared_in));
            }
            // Each repository's test files, read here (the database stays on this thread), when
            // the capture is on.
            let capture_on = cfg.generate.capture_tests;
            let tests: HashMap<&str, Vec<String>> = inputs
                .checkouts
                .iter()
                .zip(inputs.repos)
                .filter(|(c, _)| capture_on && group_of.contains_key(&c.name))
                .map(|(c, repo)| {
                    let files = repo.files(db).iter().map(|f| f.path(db));
                    let tests = files.filter(|p| capture::is_test_file(p)).cloned();
                    (c.name.as_str(), tests.collect())
                })
                .collect();
            let mut steps: Vec<(usize, Result<Step>)> = groups
                .into_par_iter()
                .flat_map(|mut group| {
                    if capture_on
                        && let Err(e) = capture_group(inputs, &tests, exec, &mut group, tallies)
                    {
                        return vec![(group[0].0, Err(e))];
                    }
                    group
                        .into_par_iter()
                        .map(|(i, c, prepared_in)| {
                            let started = Instant::now()
                                .checked_sub(std::time::Duration::from_secs_f64(prepared_in))
                                .unwrap_or_else(Instant::now);
                            let step = generate_one(exec, &settings, c, tallies, started);
                            progress.inc(1);
                            (i, step)
                        })
                        .collect()
                })
                .collect();
            steps.sort_by_key(|(i, _)| *i);
            steps.into_iter().map(|(_, step)| step).collect()
        }
    };
    generated.into_iter().collect()
}

/// The capture of one repository's test files (`capture`) for its candidates (`group`, all of
/// one repository): its calls go first among each candidate's call sites, its time to the
/// repository's `generate`.
fn capture_group(
    inputs: &Inputs,
    tests: &HashMap<&str, Vec<String>>,
    exec: &Exec,
    group: &mut [(usize, Candidate, f64)],
    tallies: &Tallies,
) -> Result<()> {
    let Some(name) = group.first().map(|(_, c, _)| c.repo.clone()) else {
        return Ok(());
    };
    let Some(checkout) = inputs.checkouts.iter().find(|c| c.name == name) else {
        return Ok(());
    };
    let tests = tests.get(name.as_str()).map_or(&[][..], |t| t.as_slice());
    let settings = capture::settings(&inputs.cfg.generate);
    let members: Vec<&Candidate> = group.iter().map(|(_, c, _)| c).collect();
    let Some(captured) = capture::capture_repo(exec, &settings, tests, &checkout.tree, &members)?
    else {
        return Ok(());
    };
    tallies.time(&name, Timed::Generate, captured.seconds, None);
    let recorded: usize = captured.calls.values().map(Vec::len).sum();
    let from = if captured.fresh { "run" } else { "cached" };
    r2e_core::log::count(
        &format!("capture {name} ({from}): calls recorded"),
        recorded,
    );
    for (_, c, _) in group.iter_mut() {
        let target = capture::target_of(c);
        if let Some(calls) = captured.calls.get(&target) {
            capture::merge(calls, &mut c.target.call_sites);
        }
        if let Some(reached) = &captured.reached {
            c.project_tests = Some(reached.get(&target).cloned().unwrap_or_default());
        }
    }
    Ok(())
}

/// The built-in generator for one candidate.
fn generate_one(
    exec: &Exec,
    settings: &GenerateSettings,
    c: Candidate,
    tallies: &Tallies,
    started: Instant,
) -> Result<Step> {
    let env = match c.usable_env() {
        Ok(env) => env,
        Err(message) => {
            tallies.time(
                &c.repo,
                Timed::Generate,
                started.elapsed().as_secs_f64(),
                None,
            );
            tallies.generate.failed();
            return Ok(Step::Done(Box::new(Done::invalid(
                &c,
                Generator::Builtin,
                FailureClass::ImportEnv,
                message,
            ))));
        }
    };
    let runtime = env.runtime(&c.target.root);
    let explored = generate::generate(exec, &runtime, &c.target, &c.code, settings)?;
    tallies.generate.ran(explored.fresh);
    tallies.time(
        &c.repo,
        Timed::Generate,
        started.elapsed().as_secs_f64(),
        Some(explored.fresh),
    );
    if explored.transient {
        tallies.retry_later();
    }
    let answer = explored.answer;
    let notes = ExplorerNotes {
        mutants: answer.mutants.map(|m| MutantCount {
            total: m.total,
            killed: m.killed,
        }),
        time_limit_hit: answer.time_limit_hit,
    };
    match (answer.status, answer.harness) {
        (AnswerStatus::Ok, Some(h)) => Ok(Step::Harness(Box::new(c), env, h, notes)),
        _ => {
            tallies.generate.failed();
            let message = answer
                .error
                .unwrap_or_else(|| "the explorer wrote no harness".into());
            Ok(Step::Done(Box::new(Done::invalid(
                &c,
                Generator::Builtin,
                validate::classify_message(&message),
                message,
            ))))
        }
    }
}

/// Validates the built-in harnesses: those of each environment in a few warm workers.
fn validate_builtin(
    exec: &Exec,
    steps: Vec<Step>,
    validate: &ValidateConfig,
    tallies: &Tallies,
) -> Result<Vec<Step>> {
    let chunks = runs::chunks_by_env(
        steps.iter().enumerate().filter_map(|(i, step)| match step {
            Step::Harness(c, env, ..) => Some((i, env.runtime(&c.target.root))),
            _ => None,
        }),
        runs::workers(),
    );
    let done: Vec<Result<Vec<(usize, validate::Checked, f64)>>> = chunks
        .par_iter()
        .flat_map_iter(|bin| {
            bin.iter().map(|(runtime, idx)| {
                let items: Vec<_> = idx
                    .iter()
                    .map(|&i| match &steps[i] {
                        Step::Harness(c, _, h, _) => (&c.target, &c.code, h.as_str()),
                        Step::Done(_) | Step::Validated(..) => {
                            unreachable!("only harnesses are validated")
                        }
                    })
                    .collect();
                let started = Instant::now();
                let results = validate::validate_batch(exec, runtime, &items, validate)?;
                let each = started.elapsed().as_secs_f64() / idx.len().max(1) as f64;
                Ok(idx
                    .iter()
                    .copied()
                    .zip(results)
                    .map(|(i, v)| (i, v, each))
                    .collect())
            })
        })
        .collect();
    let mut checked: Vec<Option<validate::Checked>> = vec![None; steps.len()];
    for chunk in done {
        for (i, v, seconds) in chunk? {
            if v.transient {
                tallies.retry_later();
            }
            if let Step::Harness(c, ..) = &steps[i] {
                tallies.time(&c.repo, Timed::Validate, seconds, Some(v.fresh));
            }
            checked[i] = Some(v);
        }
    }
    Ok(steps
        .into_iter()
        .zip(checked)
        .map(|(step, v)| match (step, v) {
            (Step::Harness(c, env, harness, explorer), Some(v)) => Step::Validated(
                c,
                env,
                Box::new(Written {
                    harness,
                    validation: v.validation,
                    fresh: v.fresh,
                    generator: Generator::Builtin,
                    from: None,
                    spent: None,
                    explorer,
                    mutants: None,
                }),
            ),
            (step, _) => step,
        })
        .collect())
}

/// Stage `mutate`: the mutation score of every valid harness, the harnesses of an environment
/// checked together.
fn mutate_all(exec: &Exec, steps: &mut [Step], policy: Policy, tallies: &Tallies) -> Result<()> {
    // A chunk is one environment's, and one module's where a worker's children cannot each
    // hide their own module's file (`runs::worker_module`).
    let chunks = runs::chunks_by_env(
        steps.iter().enumerate().filter_map(|(i, step)| match step {
            Step::Validated(c, env, w) if w.validation.valid => Some((
                i,
                (
                    env.runtime(&c.target.root),
                    runs::worker_module(exec, &c.target).map(std::path::Path::to_path_buf),
                ),
            )),
            _ => None,
        }),
        runs::workers(),
    );
    let codes: Vec<String> = steps
        .iter()
        .map(|s| match s {
            Step::Validated(c, ..) => r2e_core::hash::Hash::of_key(&c.code).to_hex(),
            _ => String::new(),
        })
        .collect();
    let definitions: Vec<String> = steps
        .iter()
        .map(|s| match s {
            Step::Validated(c, ..) => c.problem.reference(),
            _ => String::new(),
        })
        .collect();
    type Scored = Vec<(usize, mutation::Scored, f64)>;
    let scored: Vec<Result<Scored>> = chunks
        .par_iter()
        .flat_map_iter(|bin| {
            bin.iter().map(|((runtime, _), idx)| {
                let subjects: Vec<mutation::Subject> = idx
                    .iter()
                    .map(|&i| match &steps[i] {
                        Step::Validated(c, _, w) => mutation::Subject {
                            target: &c.target,
                            harness: &w.harness,
                            expected: &w.validation.expected,
                            code: &codes[i],
                            source: &c.source,
                            summary: &c.summary,
                            def: c.def,
                            definition: &definitions[i],
                        },
                        _ => unreachable!("only validated harnesses are scored"),
                    })
                    .collect();
                let started = Instant::now();
                let scores = mutation::score(exec, runtime, &subjects, policy)?;
                let each = started.elapsed().as_secs_f64() / idx.len().max(1) as f64;
                Ok(idx
                    .iter()
                    .copied()
                    .zip(scores)
                    .map(|(i, s)| (i, s, each))
                    .collect())
            })
        })
        .collect();
    for chunk in scored {
        for (
            i,
            mutation::Scored {
                score,
                fresh,
                errors,
            },
            seconds,
        ) in chunk?
        {
            tallies.mutate.ran(fresh);
            if errors > 0 {
                tallies.retry_later();
            }
            if let Step::Validated(c, _, w) = &mut steps[i] {
                tallies.time(&c.repo, Timed::Mutate, seconds, Some(fresh));
                w.mutants = Some(score);
            }
        }
    }
    Ok(())
}

/// Runs the model-driven generator for a candidate in its environment (or records why it has
/// none), counting the action and noting a failed request.
fn ask_model(
    exec: &Exec,
    generator: &LlmGenerator,
    c: &Candidate,
    label: Generator,
    tallies: &Tallies,
) -> Result<std::result::Result<(Arc<Env>, LlmOutcome), Done>> {
    let env = match c.usable_env() {
        Ok(env) => env,
        Err(message) => {
            tallies.generate.failed();
            return Ok(Err(Done::invalid(
                c,
                label,
                FailureClass::ImportEnv,
                message,
            )));
        }
    };
    let outcome = generator.run(
        exec,
        &env.runtime(&c.target.root),
        &c.target,
        &c.code,
        &c.context,
    )?;
    // A hybrid candidate was counted once already, by the built-in generator.
    if label != Generator::Hybrid {
        tallies.generate.ran(outcome.fresh);
    }
    if outcome.request_failed {
        tallies.retry_later();
    }
    Ok(Ok((env, outcome)))
}

/// The model-driven generator for one candidate.
fn llm_one(
    exec: &Exec,
    generator: &LlmGenerator,
    c: Candidate,
    tallies: &Tallies,
    started: Instant,
) -> Result<Step> {
    let asked = ask_model(exec, generator, &c, Generator::Llm, tallies)?;
    let seconds = started.elapsed().as_secs_f64();
    let (env, outcome) = match asked {
        Ok(asked) => asked,
        Err(done) => {
            tallies.time(&c.repo, Timed::Generate, seconds, None);
            return Ok(Step::Done(Box::new(done)));
        }
    };
    tallies.time(&c.repo, Timed::Generate, seconds, Some(outcome.fresh));
    match outcome.harness {
        Some(harness) => Ok(Step::Validated(
            Box::new(c),
            env,
            Box::new(Written {
                harness,
                validation: outcome.validation,
                fresh: outcome.fresh,
                generator: Generator::Llm,
                from: None,
                spent: Some(outcome.spent),
                explorer: ExplorerNotes::default(),
                mutants: None,
            }),
        )),
        None => {
            tallies.generate.failed();
            Ok(Step::Done(Box::new(Done::model_failure(
                &c,
                Generator::Llm,
                outcome.validation,
                outcome.spent,
            ))))
        }
    }
}

/// Hybrid: the model for the candidates the built-in generator left short. Returns how many it
/// covered well enough alone.
fn hybrid_all(
    inputs: &Inputs,
    db: &Database,
    exec: &Exec,
    m: &Model,
    candidates: &[(SourceFile, FunctionRow)],
    steps: &mut [Step],
    tallies: &Tallies,
) -> Result<u64> {
    let min = inputs.cfg.select.min_branch_coverage;
    let mut sufficient = 0;
    let mut short = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Validated(_, _, w) if w.validation.valid && w.validation.coverage() >= min => {
                sufficient += 1;
            }
            Step::Done(d) if d.record.failure_class == Some(FailureClass::ImportEnv) => {}
            _ => short.push(i),
        }
    }
    let llm_gen = m.generator(inputs.cfg)?;
    let prepared: Vec<(usize, Candidate)> = short
        .iter()
        .map(|&i| {
            let (f, row) = &candidates[i];
            Ok((i, prepare(inputs, db, *f, row)?))
        })
        .collect::<Result<_>>()?;
    let replaced: Vec<(usize, Result<Step>)> = m.pool.install(|| {
        prepared
            .into_par_iter()
            .map(|(i, c)| {
                let (started, repo) = (Instant::now(), c.repo.clone());
                let step = hybrid_one(exec, &llm_gen, c, &steps[i], tallies);
                // The model's part of a candidate the built-in generator counted already.
                tallies.time(
                    &repo,
                    Timed::Generate,
                    started.elapsed().as_secs_f64(),
                    None,
                );
                (i, step)
            })
            .collect()
    });
    for (i, step) in replaced {
        steps[i] = step?;
    }
    Ok(sufficient)
}

/// `generator = "hybrid"` for a candidate the built-in generator left short: the model writes
/// and repairs a harness; when both are valid, the model's tests join the built-in ones (one
/// harness, validated again), else the better harness wins.
fn hybrid_one(
    exec: &Exec,
    generator: &LlmGenerator,
    c: Candidate,
    builtin: &Step,
    tallies: &Tallies,
) -> Result<Step> {
    let (env, outcome) = match ask_model(exec, generator, &c, Generator::Hybrid, tallies)? {
        Ok(asked) => asked,
        Err(done) => return Ok(Step::Done(Box::new(done))),
    };
    let built = match builtin {
        Step::Validated(_, _, w) => Some(w),
        _ => None,
    };
    let builtin_kept = |b: &Written| {
        (
            b.harness.clone(),
            b.validation.clone(),
            b.fresh,
            HarnessFrom::Builtin,
        )
    };
    let model_valid = outcome.validation.valid;
    let chosen = match (built, outcome.harness) {
        (Some(b), Some(m)) if b.validation.valid && model_valid => {
            let merged = merge_harnesses(&b.harness, &m, &c.target);
            let runtime = env.runtime(&c.target.root);
            let checked = validate::validate(
                exec,
                &runtime,
                &c.target,
                &c.code,
                &merged,
                &generator.validate,
            )?;
            let v = checked.validation;
            let best = b.validation.coverage().max(outcome.validation.coverage());
            if v.valid && v.coverage() >= best {
                (
                    merged,
                    v,
                    checked.fresh || outcome.fresh,
                    HarnessFrom::Merged,
                )
            } else if outcome.validation.coverage() > b.validation.coverage() {
                (m, outcome.validation, outcome.fresh, HarnessFrom::Model)
            } else {
                builtin_kept(b)
            }
        }
        (Some(b), _) if b.validation.valid && !model_valid => builtin_kept(b),
        (_, Some(m)) => (m, outcome.validation, outcome.fresh, HarnessFrom::Model),
        (Some(b), None) => builtin_kept(b),
        // The built-in generator's failure was counted already.
        (None, None) => {
            return Ok(Step::Done(Box::new(Done::model_failure(
                &c,
                Generator::Hybrid,
                outcome.validation,
                outcome.spent,
            ))));
        }
    };
    let (harness, validation, fresh, from) = chosen;
    // What the explorer said holds for its own tests, which a model-only harness lacks.
    let explorer = built
        .filter(|_| from != HarnessFrom::Model)
        .map(|b| b.explorer)
        .unwrap_or_default();
    Ok(Step::Validated(
        Box::new(c),
        env,
        Box::new(Written {
            harness,
            validation,
            fresh,
            generator: Generator::Hybrid,
            from: Some(from),
            spent: Some(outcome.spent),
            explorer,
            mutants: None,
        }),
    ))
}

/// A candidate's harness record and, when selected, its instance.
fn finish(cfg: &Config, step: Step, validate: bool, tallies: &Tallies) -> Done {
    match step {
        Step::Done(done) => *done,
        Step::Validated(c, env, w) if validate => {
            tallies.validate.ran(w.fresh);
            if !w.validation.valid {
                tallies.validate.failed();
            }
            assemble::select(cfg, *c, &env, *w)
        }
        Step::Validated(c, ..) | Step::Harness(c, ..) => Done::unvalidated(&c),
    }
}

/// Stage `refine` for the selected instances. Returns how many specs it refined.
fn refine_all(
    cfg: &Config,
    exec: &Exec,
    m: &Model,
    dones: &mut [Done],
    tallies: &Tallies,
) -> Result<u64> {
    let provider = provider(cfg.refine_provider())?;
    let refiner = Refiner {
        llm: &m.llm,
        templates: &m.templates,
        provider,
        settings: &cfg.refine,
        request: super::keyed::spec_request(provider.api, &cfg.refine),
    };
    let answers: Vec<(usize, Result<crate::stages::refine::Refined>)> = m.pool.install(|| {
        dones
            .par_iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let (c, v) = &**d.selected.as_ref()?;
                let instance = d.instance.as_ref()?;
                let subject = Subject {
                    qualname: &c.qualname,
                    module: &c.target.module,
                    kind: c.target.kind.as_str(),
                    docstring: c.docstring.as_deref().unwrap_or_default(),
                    context: &c.context,
                    harness: &instance.harness,
                };
                Some((i, refiner.run(exec.cache, &subject, v)))
            })
            .collect()
    });
    let mut refined = 0;
    for (i, answer) in answers {
        let answer = answer?;
        tallies.refine.ran(answer.fresh);
        let done = &mut dones[i];
        let (status, message) = match answer.spec {
            Ok(spec) => {
                refined += 1;
                if let Some(instance) = &mut done.instance {
                    instance.spec = Some(spec);
                    instance.spec_source = SpecSource::Refined;
                }
                (RefineStatus::Refined, None)
            }
            Err(RefineFailure::Malformed(message)) => {
                tallies.refine.failed();
                (RefineStatus::Malformed, Some(message))
            }
            Err(RefineFailure::PromptTooLong(message)) => {
                tallies.refine.failed();
                (RefineStatus::Failed, Some(message))
            }
            Err(RefineFailure::Request(message)) => {
                tallies.refine.failed();
                tallies.retry_later();
                (RefineStatus::Failed, Some(message))
            }
        };
        done.record.refine = Some(RefineRecord {
            status,
            message,
            llm: answer.spent,
        });
    }
    Ok(refined)
}

/// Stage `statement` for the bug-fix tasks: each report rewritten by the model
/// (`[bugfix] statement = "model"`). Returns the stage's counts; `failed` counts the answers not
/// used (the task keeps its report).
fn statements_all(
    cfg: &Config,
    exec: &Exec,
    m: &Model,
    tasks: &mut [r2e_core::records::BugfixTask],
    dones: &[Done],
    tallies: &Tallies,
) -> Result<StageCounts> {
    let provider = provider(cfg.statement_provider())?;
    let settings = cfg
        .bugfix
        .as_ref()
        .expect("a statement provider is [bugfix]'s");
    let writer = super::statement::Writer {
        llm: &m.llm,
        templates: &m.templates,
        provider,
        request: super::keyed::statement_request(provider.api, settings),
    };
    let instances: HashMap<&str, &r2e_core::records::Instance> = dones
        .iter()
        .filter_map(|d| d.instance.as_ref())
        .map(|i| (i.id.as_str(), i))
        .collect();
    let written: Vec<Result<(super::statement::Written, bool)>> = m.pool.install(|| {
        tasks
            .par_iter_mut()
            .filter_map(|t| {
                let inst = instances.get(t.instance.as_str())?;
                Some(
                    writer
                        .run(exec.cache, t, inst)
                        .map(|w| (w, t.statement_source.refused.is_some())),
                )
            })
            .collect()
    });
    let tally = super::Tally::default();
    for w in written {
        let (w, refused) = w?;
        tally.ran(w.fresh);
        if refused {
            tally.failed();
        }
        if w.failed_request {
            tallies.retry_later();
        }
    }
    Ok(tally.counts())
}
