//! Stage `evaluate` (paper §5): every configured model writes `samples` candidates for every
//! instance, from the instance's `problem` (never its solution); each candidate is taken out of
//! the answer (`stages::answer::extract`, the extraction cache) and checked through the one
//! check path (`check::Bench`, the check cache). Failing samples get up to `repair_rounds` self-repair rounds with the failing
//! tests' calls and outcomes.
//!
//! The work goes in rounds so that checks batch: ask every request of the round (the response
//! cache, in a pool as wide as the providers allow), then check every candidate of the round in
//! warm workers. Requests, extractions and checks are each an action keyed by what shapes it,
//! so adding a model or samples asks only the new requests, the same answer text is taken apart
//! once whichever model wrote it, and a new harness re-checks only its own candidates with the
//! answers from the cache.
//!
//! A request whose prompt the server refuses as longer than the model's context window is a
//! failed sample (`prompt_too_long`, stored like an answer, no repair round); any other failed
//! request is no sample at all: the build exits 1 and the next one asks again.
//!
//! Two pseudo-models need no server: `builtin/reference` answers with the original function
//! (it must pass everything) and `builtin/mutants` answers sample i with the i-th mutant.
//!
//! With `[bugfix]` (and `[evaluate] bugfix`, the default), the models are evaluated on the
//! bug-fix tasks too, as single-file fixes: the prompt (`bugfix_fix`) shows the statement and
//! the broken file and names the function the bug is in; the answer's `def` of it replaces the
//! broken one, and the module is checked through the same path and judged as `r2e check TASK
//! --patch` judges (`stages::bugfix::judge`: every FAIL_TO_PASS and PASS_TO_PASS test must
//! pass). One round each, no repair. A task of several bugs (`[bugfix] combine`) is left
//! out: its fix is more than one function. On a task, `builtin/reference` answers with the gold
//! function and `builtin/mutants` with the broken one (a fix that changes nothing).

use r2e_core::config::Template;
use r2e_core::records::{CheckOutcome, ModelUse};
use std::collections::BTreeMap;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::bench::Bench;
use crate::stages::answer;
use crate::stages::mutation;
use r2e_core::cache::Cache;
use r2e_core::config::{Api, Config, EvalModel, PromptStyle, ProviderConfig};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::model::{Message, Request};
use r2e_core::records::{
    BugfixTask, EvalResult, EvalRound, EvalTables, FailureClass, Instance, PassRow, RepairCurve,
    Spent, StageCounts,
};
use r2e_exec::checkpath::Verdict;
use r2e_exec::llm::Llm;
use r2e_exec::llm::prompts::Templates;

/// The system message of chat requests.
const SYSTEM: &str = "You are an expert Python programmer. You write correct, complete code.";
/// Failing tests shown in a repair prompt, and the feedback's length.
const FEEDBACK_TESTS: usize = 3;
const FEEDBACK_CHARS: usize = 4000;

/// What the stage needs.
pub struct Evaluator<'a> {
    pub cfg: &'a Config,
    pub bench: &'a Bench,
    pub llm: &'a Llm,
    pub templates: &'a Templates,
    pub cache: &'a Cache,
    /// A pool as wide as the providers allow (its threads mostly wait for answers).
    pub pool: &'a rayon::ThreadPool,
    /// Per instance: its reference, computed once, when first asked for.
    references: Vec<OnceLock<Reference>>,
    /// The bug-fix tasks evaluated after the instances (a sample's problem `p` is instance
    /// `p`, or task `p - instances`).
    tasks: Vec<TaskRef<'a>>,
}

/// A bug-fix task evaluated: the task, its instance's place in the bench, its broken file's
/// text, and the function as the gold fix and the broken state have it (what the built-in
/// models answer); `None` when they cannot be made: the task's samples are checks that cannot
/// judge.
struct TaskRef<'a> {
    task: &'a BugfixTask,
    instance: usize,
    broken: Option<(String, (String, String))>,
}

/// What every sample of an instance shares: its module's name and the reference answer (both
/// `None` when the instance can no longer be checked), and the reference's mutants (what
/// `builtin/mutants` answers), made when first asked for.
struct Reference {
    original: Option<(String, String)>,
    mutants: OnceLock<Vec<String>>,
}

impl Reference {
    /// The module's name, empty when the instance can no longer be checked.
    fn module(&self) -> &str {
        self.original.as_ref().map_or("", |(module, _)| module)
    }

    fn definition(&self) -> Option<&str> {
        self.original.as_ref().map(|(_, def)| def.as_str())
    }

    fn mutants(&self) -> &[String] {
        self.mutants.get_or_init(|| {
            self.definition()
                .map(|def| mutation::of(def).into_iter().map(|m| m.text).collect())
                .unwrap_or_default()
        })
    }
}

/// What the stage produced.
#[derive(Default)]
pub struct EvalOutputs {
    /// Lines of `results.jsonl`, in instance, model, sample order.
    pub results: Vec<EvalResult>,
    /// Samples: executed (a request, an extraction or a check ran now), cached, failed (a
    /// request failed: no sample).
    pub samples: StageCounts,
    /// Candidate extractions run now and taken from the extraction cache.
    pub extractions: StageCounts,
    /// Checks run now and taken from the check cache.
    pub checks: StageCounts,
    /// Requests that failed, with why: the build exits 1, and the next build asks again.
    pub failed_requests: Vec<String>,
    /// Samples a check could not judge (outcome `error`), with why: in `results.jsonl`, left
    /// out of the tables, and checked again by the next build.
    pub errors: Vec<String>,
    /// Lines of `bugfix_results.jsonl` (the samples on bug-fix tasks), in task, model, sample
    /// order; `id` is the task's.
    pub bugfix_results: Vec<EvalResult>,
}

/// One sample while it is evaluated.
struct Unit {
    instance: usize,
    model: usize,
    sample: u32,
    rounds: Vec<EvalRound>,
    /// The last round's code and verdict.
    last: Option<(Option<String>, Verdict)>,
    spent: Spent,
    prompt_hash: String,
    candidate_hash: Option<String>,
    failed: Option<String>,
    fresh: bool,
}

impl Unit {
    fn new(instance: usize, model: usize, sample: u32) -> Unit {
        Unit {
            instance,
            model,
            sample,
            rounds: Vec::new(),
            last: None,
            spent: Spent::default(),
            prompt_hash: String::new(),
            candidate_hash: None,
            failed: None,
            fresh: false,
        }
    }
}

/// What a sample's request gave in a round.
enum Answered {
    /// A model's answer, its candidate still to be taken out.
    Text(String),
    /// A built-in model's candidate (none: it has none for this instance).
    Code(Option<String>),
    /// The server refused the prompt as longer than the model's context window: a failed
    /// sample (`prompt_too_long`).
    TooLong(String),
    /// The request failed: no sample (the build exits 1, and the next build asks again).
    Failed(String),
    /// Nothing could be asked or checked (a bug-fix task whose broken state cannot be made
    /// here): a sample no check could judge (`error`).
    Unjudged(String),
}

/// A planned request.
struct Planned<'a> {
    request: Request,
    provider: &'a ProviderConfig,
}

/// What `evaluate` would ask of one model in its first round: requests, those in the response
/// cache, and an estimate of the prompt tokens of the others (`cl100k_base`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ModelPlan {
    pub model: String,
    pub requests: u64,
    pub cached: u64,
    pub would_ask: u64,
    pub prompt_tokens: u64,
    /// Repair rounds may ask up to this many more (`repair_rounds` per failing sample).
    pub repair_requests_at_most: u64,
}

impl<'a> Evaluator<'a> {
    pub fn new(
        cfg: &'a Config,
        bench: &'a Bench,
        llm: &'a Llm,
        templates: &'a Templates,
        cache: &'a Cache,
        pool: &'a rayon::ThreadPool,
        tasks: &'a [BugfixTask],
    ) -> Evaluator<'a> {
        let tasks = tasks
            .iter()
            // A task of several bugs (`[bugfix] combine`) needs more than one function fixed.
            .filter(|task| task.locations.len() == 1)
            .filter_map(|task| {
                let instance = bench.index(&task.instance).ok()?;
                let broken = bench.broken_module(instance, task).ok().and_then(|text| {
                    let definitions = bench.task_definitions(instance, task, &text)?;
                    Some((text, definitions))
                });
                Some(TaskRef {
                    task,
                    instance,
                    broken,
                })
            })
            .collect();
        Evaluator {
            cfg,
            bench,
            llm,
            templates,
            cache,
            pool,
            references: (0..bench.instances().len())
                .map(|_| OnceLock::new())
                .collect(),
            tasks,
        }
    }

    /// The problems a sample may be of: the instances, then the bug-fix tasks.
    fn problems(&self) -> usize {
        self.bench.instances().len() + self.tasks.len()
    }

    /// Problem `p`'s bug-fix task, when it is one.
    fn task(&self, p: usize) -> Option<&TaskRef<'a>> {
        p.checked_sub(self.bench.instances().len())
            .and_then(|t| self.tasks.get(t))
    }

    /// The instance whose harness judges problem `p`, and `p`'s id.
    fn problem(&self, p: usize) -> (&Instance, &str) {
        match self.task(p) {
            Some(t) => (&self.bench.instances()[t.instance], &t.task.instance_id),
            None => {
                let instance = &self.bench.instances()[p];
                (instance, &instance.id)
            }
        }
    }

    /// An instance's reference, computed once.
    fn reference(&self, instance: usize) -> &Reference {
        self.references[instance].get_or_init(|| Reference {
            original: self
                .bench
                .original(instance)
                .map(|(module, def)| (module.to_owned(), def)),
            mutants: OnceLock::new(),
        })
    }

    /// The first round's requests per model, against the response cache.
    pub fn estimate(&self) -> Result<Vec<ModelPlan>> {
        let ev = &self.cfg.evaluate;
        let mut out = Vec::new();
        for (model, m) in self.models().iter().enumerate() {
            let mut plan = ModelPlan {
                model: m.label(),
                requests: 0,
                cached: 0,
                would_ask: 0,
                prompt_tokens: 0,
                repair_requests_at_most: 0,
            };
            if !m.is_builtin() {
                for instance in 0..self.problems() {
                    for sample in 0..ev.samples {
                        let unit = Unit::new(instance, model, sample);
                        let Some(p) = self.plan(&unit, 0)? else {
                            continue;
                        };
                        plan.requests += 1;
                        if Llm::is_cached(self.cache, &p.request) {
                            plan.cached += 1;
                        } else {
                            plan.would_ask += 1;
                            plan.prompt_tokens +=
                                u64::from(r2e_python::tokens::count(&p.request.prompt_text()));
                        }
                    }
                }
                plan.repair_requests_at_most = plan.requests * u64::from(ev.repair_rounds);
            }
            out.push(plan);
        }
        Ok(out)
    }

    fn models(&self) -> &[EvalModel] {
        &self.cfg.evaluate.model
    }

    fn provider(&self, m: &EvalModel) -> Result<&ProviderConfig> {
        self.cfg
            .providers
            .iter()
            .find(|p| p.name == m.provider)
            .ok_or_else(|| Error::input(format!("unknown provider `{}`", m.provider)))
    }

    /// Evaluates every model on every instance.
    pub fn run(&self, progress: &indicatif::ProgressBar) -> Result<EvalOutputs> {
        let ev = &self.cfg.evaluate;
        let mut units: Vec<Unit> = Vec::new();
        for instance in 0..self.problems() {
            for model in 0..self.models().len() {
                for sample in 0..ev.samples {
                    units.push(Unit::new(instance, model, sample));
                }
            }
        }
        progress.set_length(units.len() as u64);
        let mut out = EvalOutputs::default();
        let mut asked = 0u64;
        for round in 0..=ev.repair_rounds {
            let active: Vec<usize> = (0..units.len())
                .filter(|&u| {
                    let unit = &units[u];
                    if round == 0 {
                        return true;
                    }
                    // A prompt too long for the model has no repair: its prompt is longer. A
                    // bug-fix task has none either.
                    unit.failed.is_none()
                        && self.task(unit.instance).is_none()
                        && !self.models()[unit.model].is_builtin()
                        && unit.last.as_ref().is_some_and(|(_, v)| {
                            v.outcome == CheckOutcome::Fail
                                && v.failure_class != Some(FailureClass::PromptTooLong)
                        })
                })
                .collect();
            if active.is_empty() {
                break;
            }
            self.round(&mut units, &active, round, &mut asked, &mut out)?;
            if round == 0 {
                progress.inc(units.len() as u64);
            }
        }
        for unit in units {
            let eval_model = &self.models()[unit.model];
            let model = eval_model.label();
            let (instance, id) = self.problem(unit.instance);
            if let Some(why) = unit.failed {
                out.samples.failed += 1;
                out.failed_requests
                    .push(format!("{model}, sample {} of `{id}`: {why}", unit.sample));
                continue;
            }
            if unit.fresh {
                out.samples.executed += 1;
            } else {
                out.samples.cached += 1;
            }
            let errored = unit.last.as_ref().and_then(|(_, v)| {
                (v.outcome == CheckOutcome::Error).then(|| v.error.clone().unwrap_or_default())
            });
            let outcome = match (&errored, unit.rounds.first()) {
                (Some(why), _) => {
                    out.errors
                        .push(format!("{model}, sample {} of `{id}`: {why}", unit.sample));
                    CheckOutcome::Error
                }
                (None, Some(r)) if r.passed => CheckOutcome::Pass,
                (None, _) => CheckOutcome::Fail,
            };
            let task = self.task(unit.instance).map(|t| t.task);
            let created_at = match task {
                Some(t) => t.created_at.as_deref(),
                None => instance.created_at.as_deref(),
            };
            let result = EvalResult {
                id: id.to_owned(),
                model,
                sample: unit.sample,
                outcome,
                passed: unit.rounds.first().is_some_and(|r| r.passed),
                repaired_at: unit
                    .rounds
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find(|(_, r)| r.passed)
                    .map(|(n, _)| n as u32),
                candidate_hash: unit.candidate_hash,
                harness_hash: instance.harness_hash.clone(),
                env_lock: instance.env_lock.clone(),
                prompt_hash: unit.prompt_hash,
                llm: unit.spent,
                rounds: unit.rounds,
                unseen: eval_model.cutoff.as_ref().map(|c| c.admits(created_at)),
            };
            match task {
                Some(_) => out.bugfix_results.push(result),
                None => out.results.push(result),
            }
        }
        Ok(out)
    }

    /// One round: ask, take the code out, check.
    fn round(
        &self,
        units: &mut [Unit],
        active: &[usize],
        round: u32,
        asked: &mut u64,
        out: &mut EvalOutputs,
    ) -> Result<()> {
        let planned: Vec<Option<Planned>> = active
            .iter()
            .map(|&u| self.plan(&units[u], round))
            .collect::<Result<_>>()?;
        let new = planned
            .iter()
            .flatten()
            .filter(|p| !Llm::is_cached(self.cache, &p.request))
            .count() as u64;
        let max = self.cfg.evaluate.max_requests;
        if *asked + new > max {
            return Err(Error::input(format!(
                "`[evaluate]` would ask {} model requests (round {round}), more than `max_requests = {max}` allows; raise it, or evaluate fewer models, samples or instances",
                *asked + new
            )));
        }
        *asked += new;
        // Ask (or answer, for the built-in models), in the pool.
        let answers: Vec<(Answered, Spent, bool)> = self.pool.install(|| {
            active
                .par_iter()
                .zip(&planned)
                .map(|(&u, plan)| self.answer(&units[u], plan.as_ref()))
                .collect()
        });
        // Check every candidate of the round together.
        let mut prepared = Vec::new();
        let mut slots = Vec::new();
        let mut verdicts: Vec<Option<Verdict>> = vec![None; active.len()];
        for (n, ((&u, plan), (answered, spent, fresh))) in
            active.iter().zip(&planned).zip(answers).enumerate()
        {
            let unit = &mut units[u];
            unit.spent.add(&spent);
            unit.fresh |= fresh;
            if round == 0 {
                unit.prompt_hash = plan
                    .as_ref()
                    .map_or_else(String::new, |p| Hash::of_key(&p.request.messages).to_hex());
            }
            let task = self.task(unit.instance);
            let (instance, _) = self.problem(unit.instance);
            // The function the candidate is: the instance's, or the one a task's bug is in.
            let qualname = task.map_or(instance.qualname.as_str(), |t| {
                t.task.locations[0].function.as_str()
            });
            let code = match answered {
                Answered::Failed(why) => {
                    unit.failed = Some(why);
                    continue;
                }
                Answered::Unjudged(why) => {
                    verdicts[n] = Some(Verdict::error(why));
                    None
                }
                Answered::TooLong(why) => {
                    verdicts[n] = Some(Verdict {
                        outcome: CheckOutcome::Fail,
                        passed: false,
                        error: Some(why),
                        failure_class: Some(FailureClass::PromptTooLong),
                        tests: Vec::new(),
                    });
                    None
                }
                // Taken out here, one after the other, so that the same text twice in a round
                // (two models' equal answers) is taken apart once.
                Answered::Text(text) => {
                    let (code, fresh) = answer::extract(self.cache, &text, qualname);
                    if fresh {
                        out.extractions.executed += 1;
                        unit.fresh = true;
                    } else {
                        out.extractions.cached += 1;
                    }
                    code
                }
                Answered::Code(code) => code,
            };
            if verdicts[n].is_none() {
                match &code {
                    None => {
                        verdicts[n] = Some(Verdict {
                            outcome: CheckOutcome::Fail,
                            passed: false,
                            error: Some("the answer holds no `def` of the function".into()),
                            failure_class: Some(FailureClass::NoCode),
                            tests: Vec::new(),
                        });
                    }
                    Some(code) => match match task {
                        Some(t) => self.bench.prepare_fix(t.instance, t.task, code)?,
                        None => self.bench.prepare(&instance.id, code)?,
                    } {
                        Ok(p) => {
                            prepared.push(p);
                            slots.push(n);
                        }
                        Err(v) => verdicts[n] = Some(v),
                    },
                }
            }
            unit.last = Some((code, Verdict::unrunnable(String::new())));
        }
        for (n, checked) in slots.into_iter().zip(self.bench.check(&prepared)?) {
            if checked.fresh {
                out.checks.executed += 1;
                units[active[n]].fresh = true;
            } else {
                out.checks.cached += 1;
            }
            // A bug-fix task's fix is judged as the task's (FAIL_TO_PASS and PASS_TO_PASS).
            verdicts[n] = Some(match self.task(units[active[n]].instance) {
                Some(t) => crate::stages::bugfix::judge(t.task, checked.verdict).verdict,
                None => checked.verdict,
            });
        }
        for (n, &u) in active.iter().enumerate() {
            let unit = &mut units[u];
            let Some(verdict) = verdicts[n].take() else {
                continue;
            };
            let code = unit.last.take().and_then(|(c, _)| c);
            let hash = code
                .as_deref()
                .map(|c| Hash::of_bytes(c.as_bytes()).to_hex());
            if round == 0 {
                unit.candidate_hash = hash.clone();
            }
            unit.rounds.push(EvalRound {
                outcome: verdict.outcome,
                passed: verdict.passed,
                failure_class: verdict.failure_class,
                failed_tests: verdict
                    .tests
                    .iter()
                    .filter(|t| !t.passed)
                    .map(|t| t.name.clone())
                    .collect(),
                candidate_hash: hash,
                error: (verdict.outcome == CheckOutcome::Error)
                    .then(|| verdict.error.clone())
                    .flatten(),
            });
            unit.last = Some((code, verdict));
        }
        Ok(())
    }

    /// The request of a sample in a round (none for a built-in model).
    fn plan(&self, unit: &Unit, round: u32) -> Result<Option<Planned<'_>>> {
        let ev = &self.cfg.evaluate;
        let m = &self.models()[unit.model];
        if m.is_builtin() {
            return Ok(None);
        }
        let provider = self.provider(m)?;
        let completions = provider.api == Api::Completions;
        let messages = |prompt: String| {
            if completions {
                vec![Message::user(prompt)]
            } else {
                vec![Message::system(SYSTEM), Message::user(prompt)]
            }
        };
        let request = |messages| Request {
            api: provider.api,
            model: m.model.clone(),
            temperature: ev.temperature,
            max_tokens: ev.max_completion_tokens,
            messages,
            sample: unit.sample,
        };
        if let Some(t) = self.task(unit.instance) {
            let Some((broken, _)) = &t.broken else {
                return Ok(None);
            };
            let function = &t.task.locations[0].function;
            let vars = serde_json::json!({
                "repo": t.task.repo,
                "statement": t.task.problem_statement,
                "path": t.task.locations[0].file,
                "file": broken,
                "function": function,
                "name": function.rsplit('.').next().unwrap_or_default(),
                "kind": if function.contains('.') { "method" } else { "function" },
            });
            let prompt = self.templates.render(Template::BugfixFix, &vars)?;
            return Ok(Some(Planned {
                request: request(messages(prompt)),
                provider,
            }));
        }
        let instance = &self.bench.instances()[unit.instance];
        let module = self.reference(unit.instance).module();
        let name = match (round, completions, ev.prompt) {
            (0, true, _) => Template::CodegenDirectCompletion,
            (0, false, PromptStyle::Direct) => Template::CodegenDirect,
            (0, false, PromptStyle::Cot) => Template::CodegenCot,
            (_, true, _) => Template::CodegenRepairCompletion,
            (_, false, _) => Template::CodegenRepair,
        };
        let (before, stub) = split_problem(instance);
        let (code, class, feedback) = match &unit.last {
            Some((code, verdict)) => (
                code.clone().unwrap_or_else(|| "# (no code)".into()),
                verdict
                    .failure_class
                    .map_or_else(|| "assertion".into(), |c| c.name().to_owned()),
                feedback(verdict),
            ),
            None => Default::default(),
        };
        let vars = serde_json::json!({
            "qualname": instance.qualname,
            "name": instance.qualname.rsplit('.').next().unwrap_or_default(),
            "module": module,
            "path": instance.path,
            "kind": if instance.qualname.contains('.') { "method" } else { "function" },
            "problem": instance.problem,
            "spec": instance.spec.clone().unwrap_or_default(),
            "problem_before": before,
            "stub": stub,
            "code": code,
            "failure_class": class,
            "feedback": feedback,
            "round": round,
            "rounds": ev.repair_rounds,
            "feedback_comment": feedback.lines().map(|l| format!("# {l}")).collect::<Vec<_>>().join("\n"),
        });
        let prompt = self.templates.render(name, &vars)?;
        Ok(Some(Planned {
            request: request(messages(prompt)),
            provider,
        }))
    }

    /// A sample's answer in a round, what it cost, and whether it was asked now.
    fn answer(&self, unit: &Unit, plan: Option<&Planned>) -> (Answered, Spent, bool) {
        let m = &self.models()[unit.model];
        if let Some(t) = self.task(unit.instance) {
            let Some((_, (gold, broken))) = &t.broken else {
                let why = format!(
                    "task `{}`'s broken state cannot be made from the dataset's commit",
                    t.task.instance_id
                );
                return (Answered::Unjudged(why), Spent::default(), false);
            };
            if plan.is_none() {
                // The gold function, or the broken one (a fix that changes nothing).
                let code = match m.model.as_str() {
                    "reference" => gold,
                    _ => broken,
                };
                return (Answered::Code(Some(code.clone())), Spent::default(), false);
            }
        }
        let Some(plan) = plan else {
            let reference = self.reference(unit.instance);
            let code = match m.model.as_str() {
                "reference" => reference.definition().map(str::to_owned),
                _ => {
                    let mutants = reference.mutants();
                    (!mutants.is_empty())
                        .then(|| mutants[unit.sample as usize % mutants.len()].clone())
                }
            };
            return (Answered::Code(code), Spent::default(), false);
        };
        match self
            .llm
            .ask(self.cache, ModelUse::Evaluate, plan.provider, &plan.request)
        {
            Ok((response, fresh)) => {
                let spent = if fresh {
                    response.spent()
                } else {
                    Spent::default()
                };
                (Answered::Text(response.text), spent, fresh)
            }
            Err(failure) if failure.prompt_too_long() => {
                let fresh = !failure.cached;
                let spent = Spent {
                    requests: u64::from(fresh),
                    ..Spent::default()
                };
                (Answered::TooLong(failure.message), spent, fresh)
            }
            Err(failure) => (Answered::Failed(failure.message), Spent::default(), false),
        }
    }
}

/// The problem statement up to the function, and the function's signature and spec.
fn split_problem(instance: &Instance) -> (String, String) {
    // The statement is `before + stub + after`; the stub starts at the function's `def` (or
    // its first decorator), found from the end of what comes before it.
    let name = instance.qualname.rsplit('.').next().unwrap_or_default();
    let p = &instance.problem;
    let def_at = p.rfind(&format!("def {name}("));
    let Some(def_at) = def_at else {
        return (p.clone(), String::new());
    };
    let mut start = p[..def_at].rfind('\n').map_or(0, |i| i + 1);
    // Its decorators, the lines just above it that start with `@`.
    while start > 0 {
        let prev = p[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        if p[prev..start].trim_start().starts_with('@') {
            start = prev;
        } else {
            break;
        }
    }
    let body = &p[def_at..];
    let header_end = r2e_python::def_header_end(body).map_or(body.len(), |e| e);
    // The stub is the header and the docstring that follows it.
    let rest = &body[header_end..];
    let doc_end = rest
        .find("\"\"\"")
        .and_then(|open| {
            rest[open + 3..]
                .find("\"\"\"")
                .map(|close| open + 3 + close + 3)
        })
        .map_or(0, |e| e + rest[e..].find('\n').map_or(0, |n| n + 1));
    (
        p[..start].to_owned(),
        p[start..def_at + header_end + doc_end].to_owned(),
    )
}

/// What a failing sample is told: the failure, and the failing tests' calls with the expected
/// and the actual outcomes.
fn feedback(v: &Verdict) -> String {
    let mut out = String::new();
    if let Some(e) = &v.error {
        out.push_str(e);
        out.push('\n');
    }
    for t in v.tests.iter().filter(|t| !t.passed).take(FEEDBACK_TESTS) {
        out.push_str(&format!("Test {}:\n", t.name));
        for (i, call) in t.inputs.iter().enumerate() {
            out.push_str(&format!("  call:     {call}\n"));
            if let Some(e) = t.expected.get(i) {
                out.push_str(&format!("  expected: {e}\n"));
            }
            if let Some(a) = t.actual.get(i) {
                out.push_str(&format!("  actual:   {a}\n"));
            }
        }
        if let Some(m) = &t.message {
            out.push_str(&format!("  {m}\n"));
        }
    }
    if out.len() > FEEDBACK_CHARS {
        let mut cut = FEEDBACK_CHARS;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n[...]\n");
    }
    out
}

/// The unbiased pass@k estimator (Chen et al. 2021) for one instance with `n` samples of which
/// `c` pass: 1 - C(n-c, k) / C(n, k), computed as a stable product. `None` when n < k.
pub fn pass_at_k(n: u32, c: u32, k: u32) -> Option<f64> {
    if n < k || k == 0 {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let mut fail = 1.0;
    for i in (n - c + 1)..=n {
        fail *= 1.0 - f64::from(k) / f64::from(i);
    }
    Some(1.0 - fail)
}

/// The dependency bucket of an instance (its slice's size).
pub fn deps_bucket(deps: u32) -> &'static str {
    match deps {
        0 => "0",
        1..=2 => "1-2",
        3..=5 => "3-5",
        6..=10 => "6-10",
        _ => ">10",
    }
}

/// The token bucket of an instance (its reference's length).
pub fn tokens_bucket(tokens: u32) -> &'static str {
    match tokens {
        0..=99 => "<100",
        100..=299 => "100-299",
        300..=999 => "300-999",
        _ => ">=1000",
    }
}

/// pass@k rows from results and the problems (instances or tasks) they are of, by id: per
/// model and group, the mean over the group's problems. `group_of` puts a model's problem in a
/// group, or in none (it is not in the table). A sample no check could judge says nothing of
/// the model.
fn pass_rows<T>(
    results: &[EvalResult],
    problems: &BTreeMap<&str, &T>,
    ks: &[u32],
    group_of: &dyn Fn(&str, &T) -> Option<String>,
) -> Vec<PassRow> {
    // (model, id) → (n, c).
    let mut counts: BTreeMap<(&str, &str), (u32, u32)> = BTreeMap::new();
    for r in results.iter().filter(|r| r.outcome != CheckOutcome::Error) {
        let e = counts.entry((&r.model, &r.id)).or_default();
        e.0 += 1;
        e.1 += u32::from(r.passed);
    }
    let mut groups: BTreeMap<(&str, String), Vec<(u32, u32)>> = BTreeMap::new();
    for (&(model, id), &nc) in &counts {
        let Some(group) = problems.get(id).and_then(|p| group_of(model, p)) else {
            continue;
        };
        groups.entry((model, group)).or_default().push(nc);
    }
    groups
        .into_iter()
        .map(|((model, group), ncs)| PassRow {
            model: model.to_owned(),
            group,
            instances: ncs.len() as u32,
            pass: ks
                .iter()
                .filter_map(|&k| {
                    let vals: Vec<f64> = ncs
                        .iter()
                        .filter_map(|&(n, c)| pass_at_k(n, c, k))
                        .collect();
                    (!vals.is_empty()).then(|| {
                        (
                            format!("pass@{k}"),
                            vals.iter().sum::<f64>() / vals.len() as f64,
                        )
                    })
                })
                .collect(),
        })
        .collect()
}

/// pass@k on the bug-fix tasks (`bugfix_results.jsonl`): per model over every task (`all`),
/// per origin (`origin: mutant`, `origin: history`) and per depth (`depth: 0`, `depth: 1`).
pub fn bugfix_table(results: &[EvalResult], tasks: &[BugfixTask], ks: &[u32]) -> Vec<PassRow> {
    let by_id: BTreeMap<&str, &BugfixTask> =
        tasks.iter().map(|t| (t.instance_id.as_str(), t)).collect();
    let origin = |t: &BugfixTask| match t.origin {
        r2e_core::records::BugOrigin::Mutant => "mutant",
        r2e_core::records::BugOrigin::History => "history",
    };
    let mut out = pass_rows(results, &by_id, ks, &|_, _| Some("all".to_owned()));
    out.extend(pass_rows(results, &by_id, ks, &|_, t| {
        Some(format!("origin: {}", origin(t)))
    }));
    out.extend(pass_rows(results, &by_id, ks, &|_, t| {
        Some(format!("depth: {}", t.depth))
    }));
    out
}

/// pass@k tables from results and the instances they are of; `models` (the pipeline's) give
/// each model's cutoff, which splits `by_cutoff`.
pub fn tables(
    results: &[EvalResult],
    instances: &[Instance],
    ks: &[u32],
    repair_rounds: u32,
    models: &[EvalModel],
) -> EvalTables {
    let by_id: BTreeMap<&str, &Instance> = instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let judged = || results.iter().filter(|r| r.outcome != CheckOutcome::Error);
    let rows = |group_of: &dyn Fn(&str, &Instance) -> Option<String>| -> Vec<PassRow> {
        pass_rows(results, &by_id, ks, group_of)
    };
    let all = |group: fn(&Instance) -> String| move |_: &str, i: &Instance| Some(group(i));
    let cutoffs: BTreeMap<String, &r2e_core::dates::DateBound> = models
        .iter()
        .filter_map(|m| Some((m.label(), m.cutoff.as_ref()?)))
        .collect();
    // Each model with a cutoff: all its instances, then the unseen split (a row even when
    // it is empty, so that its count shows).
    let mut by_cutoff = Vec::new();
    for row in rows(&|model, _| cutoffs.contains_key(model).then(|| "all".to_owned())) {
        let unseen = rows(&|m, i| {
            (m == row.model && cutoffs[m].admits(i.created_at.as_deref()))
                .then(|| "unseen".to_owned())
        });
        let model = row.model.clone();
        by_cutoff.push(row);
        by_cutoff.extend(unseen.into_iter().next().or_else(|| {
            Some(PassRow {
                model,
                group: "unseen".to_owned(),
                instances: 0,
                pass: BTreeMap::new(),
            })
        }));
    }
    let mut repair: BTreeMap<&str, (u32, Vec<u32>)> = BTreeMap::new();
    for r in judged().filter(|r| !r.passed) {
        let e = repair
            .entry(&r.model)
            .or_insert_with(|| (0, vec![0; repair_rounds as usize]));
        e.0 += 1;
        if let Some(at) = r.repaired_at {
            for slot in e.1.iter_mut().skip(at as usize - 1) {
                *slot += 1;
            }
        }
    }
    EvalTables {
        overall: rows(&all(|_| "all".to_owned())),
        by_repo: rows(&all(|i| i.repo.clone())),
        by_deps: rows(&all(|i| deps_bucket(i.deps).to_owned())),
        by_tokens: rows(&all(|i| tokens_bucket(i.tokens).to_owned())),
        by_file: rows(&all(|i| {
            if i.in_file {
                "single-file".to_owned()
            } else {
                "multi-file".to_owned()
            }
        })),
        by_cutoff,
        repair: repair
            .into_iter()
            .map(|(model, (failing, fixed))| RepairCurve {
                model: model.to_owned(),
                failing,
                fixed_by_round: fixed
                    .iter()
                    .map(|&f| f64::from(f) / f64::from(failing.max(1)))
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        assert_eq!(pass_at_k(5, 0, 1), Some(0.0));
        assert_eq!(pass_at_k(5, 5, 5), Some(1.0));
        assert!((pass_at_k(5, 2, 1).unwrap() - 0.4).abs() < 1e-12);
        // 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!((pass_at_k(5, 2, 2).unwrap() - 0.7).abs() < 1e-12);
        assert_eq!(pass_at_k(3, 1, 5), None);
    }

    #[test]
    fn samples_no_check_could_judge_are_left_out_of_pass_at_k_and_repair() {
        let instance: Instance = serde_json::from_value(serde_json::json!({
            "id": "r:m.py:f", "repo": "r", "commit": "c", "path": "m.py", "qualname": "f",
            "docstring": "Doc.", "spec": "Doc.", "spec_source": "docstring", "context": "",
            "harness": "", "tests": 3, "branch_coverage": null, "line_coverage": null,
            "harness_hash": "", "env_lock": "", "expected": []
        }))
        .unwrap();
        let result = |sample: u32, outcome: CheckOutcome| EvalResult {
            id: instance.id.clone(),
            model: "m/x".into(),
            sample,
            outcome,
            passed: outcome == CheckOutcome::Pass,
            repaired_at: None,
            rounds: Vec::new(),
            candidate_hash: None,
            harness_hash: String::new(),
            env_lock: String::new(),
            prompt_hash: String::new(),
            llm: Default::default(),
            unseen: None,
        };
        let results = [
            result(0, CheckOutcome::Pass),
            result(1, CheckOutcome::Error),
            result(2, CheckOutcome::Fail),
            result(3, CheckOutcome::Error),
        ];
        let t = tables(&results, std::slice::from_ref(&instance), &[1], 1, &[]);
        // 2 judged samples, 1 correct: pass@1 = 1/2 (with the errors counted as failures it
        // would be 1/4).
        assert_eq!(t.overall.len(), 1);
        assert!(
            (t.overall[0].pass["pass@1"] - 0.5).abs() < 1e-12,
            "{:?}",
            t.overall
        );
        assert_eq!(
            t.repair[0].failing, 1,
            "only the judged failure awaits repair"
        );
    }

    #[test]
    fn buckets_follow_the_paper() {
        assert_eq!(
            [0, 1, 2, 3, 5, 6, 10, 11].map(deps_bucket),
            ["0", "1-2", "1-2", "3-5", "3-5", "6-10", "6-10", ">10"]
        );
        assert_eq!(
            [99, 100, 299, 300, 999, 1000].map(tokens_bucket),
            ["<100", "100-299", "100-299", "300-999", "300-999", ">=1000"]
        );
    }

    #[test]
    fn the_problem_splits_at_the_functions_stub() {
        let mut instance: Instance = serde_json::from_value(serde_json::json!({
            "id": "r:m.py:f", "repo": "r", "commit": "c", "path": "m.py", "qualname": "f",
            "docstring": "Doc.", "spec": "Doc.", "spec_source": "docstring", "context": "",
            "harness": "", "tests": 3, "branch_coverage": null, "line_coverage": null,
            "harness_hash": "", "env_lock": "", "expected": []
        }))
        .unwrap();
        instance.problem =
            "# file: m.py\nimport os\n\n@dec\ndef f(a,\n      b):\n    \"\"\"Doc.\"\"\"\n\nX = 1\n"
                .into();
        let (before, stub) = split_problem(&instance);
        assert_eq!(before, "# file: m.py\nimport os\n\n");
        assert_eq!(stub, "@dec\ndef f(a,\n      b):\n    \"\"\"Doc.\"\"\"\n");
    }
}
