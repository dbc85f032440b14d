//! Stages `generate` and `validate`: the built-in harness generator (a coverage-guided input
//! explorer shipped in the binary, run in the sandbox) and harness validation (self-equivalence
//! twice, in fresh processes, with the function's own branch and line coverage).
//!
//! The Python files that run in the sandbox live in `src/py/` and are embedded here. Each run is
//! an action: its key holds everything that decides its result (the embedded scripts, the
//! environment, the code of the function and of its slice, the settings), never a path or a time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::cache::{self, Cache, write_atomic};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::sandbox::{Exit, Job, Limits, Outcome, Sandbox};

pub const EQUIV_PY: &str = include_str!("../py/r2e_equiv.py");
pub const EXPLORE_PY: &str = include_str!("../py/r2e_explore.py");
pub const RUNNER_PY: &str = include_str!("../py/r2e_runner.py");
pub const BATCH_PY: &str = include_str!("../py/r2e_batch.py");

pub const GENERATE: cache::Kind = cache::Kind {
    name: "generate",
    version: 1,
};
pub const VALIDATE: cache::Kind = cache::Kind {
    name: "validate",
    version: 3,
};

/// The settings of the built-in generator.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GenerateSettings {
    /// Executions of the function the explorer may spend; decides what is kept.
    pub budget: u32,
    pub seed: u64,
    pub max_tests: u32,
    /// Milliseconds one call may take before it is abandoned.
    pub per_call_timeout_ms: u64,
    /// A safety stop for one exploration, recorded when it fires.
    pub time_limit_seconds: u64,
}

impl Default for GenerateSettings {
    fn default() -> Self {
        GenerateSettings {
            budget: 1500,
            seed: 0,
            max_tests: 12,
            per_call_timeout_ms: 1000,
            time_limit_seconds: 60,
        }
    }
}

/// What one function needs for generation and validation.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// The folder put first on `sys.path` (the package root of the module).
    pub import_root: PathBuf,
    /// The repository's other import roots (its root, and `src/` when there is one), put last
    /// on `sys.path`.
    pub extra_roots: Vec<PathBuf>,
    pub module: String,
    pub qualname: String,
    /// `function` or `method`.
    pub kind: &'static str,
    /// The module's file, absolute, and the function's lines in it.
    pub source_file: PathBuf,
    pub start_line: u32,
    pub end_line: u32,
    /// Literal arguments at the function's call sites in the repository.
    pub call_sites: Vec<serde_json::Value>,
}

/// The key of a function's code for actions: its own code and its slice's code, and the
/// environment it runs in. Positions, comments and unrelated functions do not count.
#[derive(Clone, Debug, Serialize)]
pub struct CodeKey {
    pub module: String,
    pub qualname: String,
    pub kind: &'static str,
    pub code: Hash,
    pub slice: Vec<Hash>,
    pub imports: Hash,
    pub env: String,
}

/// The explorer's answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Generated {
    pub status: String,
    pub harness: Option<String>,
    pub tests: u32,
    pub executions: u32,
    pub arcs: u32,
    pub time_limit_hit: bool,
    pub error: Option<String>,
    /// The sandbox's wall clock fired (a loaded machine, perhaps): not stored, so the next build
    /// runs it again and must not be taken for up to date.
    #[serde(skip)]
    pub transient: bool,
}

/// A harness's validation.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Validation {
    pub valid: bool,
    pub tests: u32,
    pub branches: u32,
    pub branch_coverage: Option<f64>,
    pub line_coverage: Option<f64>,
    pub failure_class: Option<String>,
    pub failure_message: Option<String>,
    /// Tests whose reference call returned normally (the last run).
    pub normal_returns: u32,
    /// Lines of the function no test ran, and branch lines an exit of which no test took.
    pub missing_lines: Vec<u32>,
    pub partial_lines: Vec<u32>,
    /// A few calls of the reference seen while validating: (call, outcome), as text.
    pub examples: Vec<(String, String)>,
    /// Observed type names: per parameter, and of the values returned.
    pub arg_types: Vec<(String, Vec<String>)>,
    pub return_types: Vec<String>,
    /// A run hit the sandbox's wall clock: not stored (see [`Generated::transient`]).
    #[serde(skip)]
    pub transient: bool,
}

/// Runs one embedded script in the sandbox with a JSON request; returns the JSON answer, or why
/// there is none. `Err` only when the sandbox itself failed (never cached).
fn run_script(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    python: &Path,
    script: (&str, &str),
    files: &[(&str, &str)],
    request: &serde_json::Value,
    limits: Limits,
) -> Result<(Outcome, Option<serde_json::Value>)> {
    static N: AtomicU64 = AtomicU64::new(0);
    let scratch = cache.dir("scratch")?.join(format!(
        "job-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs_err::create_dir_all(&scratch)?;
    let result = (|| {
        write_atomic(&scratch.join(script.0), script.1.as_bytes())?;
        write_atomic(&scratch.join("r2e_equiv.py"), EQUIV_PY.as_bytes())?;
        for (name, text) in files {
            write_atomic(&scratch.join(name), text.as_bytes())?;
        }
        write_atomic(
            &scratch.join("request.json"),
            &serde_json::to_vec(request).map_err(|e| Error::Internal(e.to_string()))?,
        )?;
        let job = Job {
            program: python.to_path_buf(),
            args: vec![
                "-I".into(),
                scratch.join(script.0).to_string_lossy().into_owned(),
                scratch.join("request.json").to_string_lossy().into_owned(),
                scratch.join("out.json").to_string_lossy().into_owned(),
            ],
            env: vec![],
            scratch: scratch.clone(),
            writable: vec![],
            network: false,
            limits,
        };
        let outcome = sandbox.run(&job)?;
        let answer = std::fs::read(scratch.join("out.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        Ok((outcome, answer))
    })();
    let _ = fs_err::remove_dir_all(&scratch);
    result
}

fn job_limits(seconds: u64) -> Limits {
    Limits {
        wall_seconds: seconds,
        cpu_seconds: seconds,
        ..Limits::default()
    }
}

/// Stage `generate` for one function: from the action cache, or by running the explorer.
/// Returns the result and whether it was executed now.
pub fn generate(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    python: &Path,
    target: &Target,
    code: &CodeKey,
    settings: &GenerateSettings,
) -> Result<(Generated, bool)> {
    let key = Hash::of_key(&(
        "builtin",
        Hash::of_bytes(EXPLORE_PY.as_bytes()),
        Hash::of_bytes(EQUIV_PY.as_bytes()),
        code,
        settings,
        &target.call_sites,
    ));
    if let Some(hit) = cache.get::<Generated>(GENERATE, key) {
        return Ok((hit, false));
    }
    let request = serde_json::json!({
        "repo_root": target.import_root,
        "extra_roots": target.extra_roots,
        "module": target.module,
        "qualname": target.qualname,
        "kind": target.kind,
        "call_sites": target.call_sites,
        "budget": settings.budget,
        "seed": settings.seed,
        "max_tests": settings.max_tests,
        "per_call_timeout": settings.per_call_timeout_ms as f64 / 1000.0,
        "time_limit": settings.time_limit_seconds,
    });
    let limits = job_limits(settings.time_limit_seconds + 30);
    let (outcome, answer) = run_script(
        sandbox,
        cache,
        python,
        ("r2e_explore.py", EXPLORE_PY),
        &[],
        &request,
        limits,
    )?;
    let generated = match answer {
        Some(v) => Generated {
            status: v["status"].as_str().unwrap_or("error").to_owned(),
            harness: v["harness"].as_str().map(str::to_owned),
            tests: v["tests"].as_u64().unwrap_or(0) as u32,
            executions: v["executions"].as_u64().unwrap_or(0) as u32,
            arcs: v["arcs"].as_u64().unwrap_or(0) as u32,
            time_limit_hit: v["time_limit_hit"].as_bool().unwrap_or(false),
            error: v["error"].as_str().map(str::to_owned),
            transient: false,
        },
        None => Generated {
            status: "error".into(),
            harness: None,
            tests: 0,
            executions: 0,
            arcs: 0,
            time_limit_hit: outcome.exit == Exit::Timeout,
            error: Some(describe_crash(&outcome)),
            transient: false,
        },
    };
    let mut generated = generated;
    // A sandbox timeout may come from a loaded machine: report it, do not store it.
    if outcome.exit != Exit::Timeout {
        cache.put(GENERATE, key, &generated)?;
    } else {
        generated.transient = true;
    }
    Ok((generated, true))
}

fn describe_crash(outcome: &Outcome) -> String {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    match (&outcome.exit, outcome.limit_hit) {
        (_, Some(limit)) => format!("the {limit} limit was hit ({:?})", outcome.exit),
        (Exit::Timeout, _) => format!("timed out after {:.0}s", outcome.duration.as_secs_f64()),
        (exit, _) => format!("exited with {exit:?}: {}", tail.join("\n")),
    }
}

/// The action key of validating `harness` for `target`.
fn validate_key(target: &Target, code: &CodeKey, harness: &str) -> Hash {
    Hash::of_key(&(
        Hash::of_bytes(RUNNER_PY.as_bytes()),
        Hash::of_bytes(BATCH_PY.as_bytes()),
        Hash::of_bytes(EQUIV_PY.as_bytes()),
        code,
        Hash::of_bytes(harness.as_bytes()),
        // Lines decide what coverage counts.
        target.start_line,
        target.end_line,
    ))
}

/// Seconds one run of a harness may take.
const RUN_TIMEOUT: u64 = 60;

/// Stage `validate` for many harnesses of one environment: the cache first, then every miss in
/// one sandboxed warm worker (`r2e_batch.py`) that imports the targets once and forks a fresh
/// child per run. Falls back to one job per harness when the worker itself fails.
pub fn validate_batch(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    python: &Path,
    items: &[(&Target, &CodeKey, &str)],
) -> Result<Vec<(Validation, bool)>> {
    let keys: Vec<Hash> = items
        .iter()
        .map(|(t, c, h)| validate_key(t, c, h))
        .collect();
    let mut out: Vec<Option<(Validation, bool)>> = keys
        .iter()
        .map(|k| cache.get::<Validation>(VALIDATE, *k).map(|v| (v, false)))
        .collect();
    let misses: Vec<usize> = (0..items.len()).filter(|&i| out[i].is_none()).collect();
    if !misses.is_empty() {
        let names: Vec<String> = misses.iter().map(|i| format!("harness_{i}.py")).collect();
        let jobs: Vec<serde_json::Value> = misses
            .iter()
            .zip(&names)
            .map(|(&i, name)| runner_request(items[i].0, name, None))
            .collect();
        let request = serde_json::json!({"runs": 2, "timeout": RUN_TIMEOUT, "jobs": jobs});
        let mut files: Vec<(&str, &str)> = vec![("r2e_runner.py", RUNNER_PY)];
        files.extend(
            misses
                .iter()
                .zip(&names)
                .map(|(&i, name)| (name.as_str(), items[i].2)),
        );
        let wall = RUN_TIMEOUT * 2 * misses.len() as u64 + 60;
        let (_, answer) = run_script(
            sandbox,
            cache,
            python,
            ("r2e_batch.py", BATCH_PY),
            &files,
            &request,
            job_limits(wall),
        )?;
        let results = answer
            .as_ref()
            .and_then(|a| a["results"].as_array())
            .cloned()
            .unwrap_or_default();
        for (n, &i) in misses.iter().enumerate() {
            let Some(runs) = results.get(n).and_then(|r| r.as_array()) else {
                // The worker failed as a whole: this harness gets a job of its own.
                out[i] = Some(validate(
                    sandbox, cache, python, items[i].0, items[i].1, items[i].2,
                )?);
                continue;
            };
            let runs: Vec<Run> = runs.iter().map(run_from_worker).collect();
            let mut validation = classify(&runs);
            if runs.iter().all(|r| r.outcome.exit != Exit::Timeout) {
                cache.put(VALIDATE, keys[i], &validation)?;
            } else {
                validation.transient = true;
            }
            out[i] = Some((validation, true));
        }
    }
    Ok(out
        .into_iter()
        .map(|v| v.expect("every item is validated"))
        .collect())
}

/// A run as the warm worker reports it, in the shape `classify` reads.
fn run_from_worker(result: &serde_json::Value) -> Run {
    let status = result["status"].as_str().unwrap_or("crash");
    let exit = match status {
        "timeout" => Exit::Timeout,
        "crash" => Exit::Code(-1),
        _ => Exit::Code(0),
    };
    let outcome = Outcome {
        exit,
        stdout: Vec::new(),
        stderr: result["error"]
            .as_str()
            .unwrap_or_default()
            .as_bytes()
            .to_vec(),
        duration: std::time::Duration::from_secs(if status == "timeout" { RUN_TIMEOUT } else { 0 }),
        limit_hit: None,
    };
    let answer = matches!(status, "ok" | "error").then(|| result.clone());
    Run { outcome, answer }
}

fn runner_request(
    target: &Target,
    harness_file: &str,
    candidate: Option<&str>,
) -> serde_json::Value {
    serde_json::json!({
        "repo_root": target.import_root,
        "extra_roots": target.extra_roots,
        "module": target.module,
        "qualname": target.qualname,
        "harness_file": harness_file,
        "source_file": target.source_file,
        "start_line": target.start_line,
        "end_line": target.end_line,
        "candidate_file": candidate,
        "coverage": candidate.is_none(),
    })
}

/// One run of the runner.
struct Run {
    outcome: Outcome,
    answer: Option<serde_json::Value>,
}

/// Stage `validate` for one harness: self-equivalence twice in fresh processes, coverage of the
/// function's own lines. Returns the validation and whether it was executed now.
pub fn validate(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    python: &Path,
    target: &Target,
    code: &CodeKey,
    harness: &str,
) -> Result<(Validation, bool)> {
    let key = validate_key(target, code, harness);
    if let Some(hit) = cache.get::<Validation>(VALIDATE, key) {
        return Ok((hit, false));
    }
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (outcome, answer) = run_harness(sandbox, cache, python, target, harness, None)?;
        runs.push(Run { outcome, answer });
    }
    let mut validation = classify(&runs);
    if runs.iter().all(|r| r.outcome.exit != Exit::Timeout) {
        cache.put(VALIDATE, key, &validation)?;
    } else {
        validation.transient = true;
    }
    Ok((validation, true))
}

/// Runs a harness once (with a candidate module file, or in self-equivalence mode).
pub fn run_harness(
    sandbox: &dyn Sandbox,
    cache: &Cache,
    python: &Path,
    target: &Target,
    harness: &str,
    candidate: Option<&str>,
) -> Result<(Outcome, Option<serde_json::Value>)> {
    // The scratch folder's path is only known inside `run_script`; files are named relative to it
    // through the request, which the runner resolves against its own folder.
    let mut files: Vec<(&str, &str)> = vec![("harness.py", harness)];
    if let Some(c) = candidate {
        files.push(("candidate.py", c));
    }
    let request = runner_request(target, "harness.py", candidate.map(|_| "candidate.py"));
    run_script(
        sandbox,
        cache,
        python,
        ("r2e_runner.py", RUNNER_PY),
        &files,
        &request,
        job_limits(120),
    )
}

fn classify(runs: &[Run]) -> Validation {
    let mut v = Validation::default();
    let fail = |v: &mut Validation, class: &str, message: String| {
        if v.failure_class.is_none() {
            v.failure_class = Some(class.into());
            v.failure_message = Some(message);
        }
    };
    for run in runs {
        if run.outcome.exit == Exit::Timeout {
            fail(
                &mut v,
                "timeout",
                format!(
                    "the harness ran past {:.0}s",
                    run.outcome.duration.as_secs_f64()
                ),
            );
        }
        if let Some(limit) = run.outcome.limit_hit {
            fail(
                &mut v,
                "resource_limit",
                format!("the {limit} limit was hit"),
            );
        }
    }
    let answers: Vec<&serde_json::Value> = runs.iter().filter_map(|r| r.answer.as_ref()).collect();
    if answers.len() < runs.len() {
        let crashed = runs
            .iter()
            .find(|r| r.answer.is_none())
            .expect("one has no answer");
        fail(&mut v, "other", describe_crash(&crashed.outcome));
    }
    // Coverage comes from the run that measured it (the warm worker measures the first).
    if let Some(cov) = answers
        .iter()
        .filter_map(|a| a.get("coverage").filter(|c| !c.is_null()))
        .next()
    {
        let n = |k: &str| cov[k].as_u64().unwrap_or(0);
        v.branches = n("branches_total") as u32;
        v.branch_coverage = (n("branches_total") > 0)
            .then(|| n("branches_covered") as f64 / n("branches_total") as f64);
        v.line_coverage =
            (n("lines_total") > 0).then(|| n("lines_covered") as f64 / n("lines_total") as f64);
        let lines = |k: &str| -> Vec<u32> {
            cov[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|l| l.as_u64())
                        .map(|l| l as u32)
                        .collect()
                })
                .unwrap_or_default()
        };
        v.missing_lines = lines("missing_lines");
        v.partial_lines = lines("partial_lines");
    }
    // Examples and types come from the first run that recorded any.
    if let Some(first) = answers.iter().find(|a| {
        a.get("examples")
            .and_then(|e| e.as_array())
            .is_some_and(|e| !e.is_empty())
    }) {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        let names = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().map(text).collect())
                .unwrap_or_default()
        };
        v.examples = first["examples"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| (text(&e["call"]), text(&e["outcome"])))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(args) = first["types"]["args"].as_object() {
            v.arg_types = args.iter().map(|(k, t)| (k.clone(), names(t))).collect();
        }
        v.return_types = names(&first["types"]["returns"]);
    }
    if let Some(last) = answers.last() {
        let tests = last["tests"].as_array().cloned().unwrap_or_default();
        v.tests = tests.len() as u32;
        v.normal_returns = tests
            .iter()
            .filter(|t| t["returned_normally"] == true)
            .count() as u32;
    }
    for a in &answers {
        if a["status"] != "ok" {
            let message = a["error"]
                .as_str()
                .unwrap_or("the runner failed")
                .to_owned();
            let class = if ["ModuleNotFoundError", "ImportError"]
                .iter()
                .any(|e| message.contains(e))
            {
                "import_env"
            } else {
                classify_message(&message)
            };
            fail(&mut v, class, message);
        }
    }
    // Every test must pass in both runs; a test that passes in one and fails in the other is
    // nondeterministic.
    if answers.len() == 2 {
        let outcomes = |a: &serde_json::Value| -> Vec<(String, String, String)> {
            a["tests"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap_or_default().to_owned(),
                        t["outcome"].as_str().unwrap_or_default().to_owned(),
                        t["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        };
        let (first, second) = (outcomes(answers[0]), outcomes(answers[1]));
        for (a, b) in first.iter().zip(&second) {
            if a.1 != b.1 {
                fail(
                    &mut v,
                    "nondeterministic",
                    format!("{} was `{}` then `{}`: {}{}", a.0, a.1, b.1, a.2, b.2),
                );
            }
        }
        for t in first.iter().chain(&second) {
            if t.1 != "pass" {
                fail(&mut v, classify_message(&t.2), format!("{}: {}", t.0, t.2));
            }
        }
    }
    if v.failure_class.is_none() && v.tests < 3 {
        let message = format!("{} tests; at least 3 are needed", v.tests);
        fail(&mut v, "too_few_tests", message);
    }
    if v.failure_class.is_none() && v.normal_returns == 0 {
        fail(
            &mut v,
            "no_normal_return",
            "no test calls the function without an exception".into(),
        );
    }
    v.valid = v.failure_class.is_none();
    v
}

/// The failure class of a test's message.
pub fn classify_message(message: &str) -> &'static str {
    let has = |names: &[&str]| names.iter().any(|n| message.contains(n));
    if has(&["Timeout", "timed out"]) {
        "timeout"
    } else if has(&["MemoryError", "RecursionError"]) {
        "resource_limit"
    } else if has(&["ModuleNotFoundError", "ImportError"]) {
        "import_env"
    } else if has(&[
        "OSError",
        "FileNotFoundError",
        "PermissionError",
        "IsADirectoryError",
        "NotADirectoryError",
    ]) {
        "os_error"
    } else if has(&[
        "TypeError",
        "ValueError",
        "KeyError",
        "AttributeError",
        "IndexError",
    ]) {
        "type_value_error"
    } else if has(&["AssertionError", "differ", "not equivalent", "mismatch"]) {
        "assertion"
    } else {
        "other"
    }
}
