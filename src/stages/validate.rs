//! Stage `validate`: a harness runs in self-equivalence mode (the original as the candidate)
//! twice, each run in a fresh process, with the function's own branch and line coverage
//! measured in the first. The runs are the cached action (`keys::ValidateKey`), stored raw; the
//! verdict ([`Validation`]) is derived from them when they are read ([`classify`]), so a change
//! to the classification needs no new key.
//!
//! Many harnesses of one environment run in one sandboxed warm worker (`src/py/r2e_batch.py`)
//! that imports the targets and prepares coverage once and forks a child per run.

use serde::{Deserialize, Serialize};

use super::candidate::Target;
use super::jobs::{Exec, MESSAGE_CAP, Runtime, redact, run_script};
use crate::error::Result;
use crate::hash::Hash;
use crate::keys::{CodeKey, ValidateKey};
use crate::py::{self, BatchAnswer, BatchRequest, RunAnswer, RunRequest};
use crate::records::FailureClass;
use crate::sandbox::{Exit, Outcome};

/// Runs of a harness per validation.
pub const RUNS: u32 = 2;

/// How one run of a harness ended, as stored. Coverage lines are relative to the function's
/// `def` line (1 is the line after it), so that moving the function changes nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RawRun {
    /// The runner answered.
    Answered(RunAnswer),
    /// It ran past its time limit (seconds).
    TimedOut(u64),
    /// It died without answering: how, and the limit that killed it (`memory limit (2048
    /// MiB)`), when one did.
    Died { how: String, limit: Option<String> },
}

/// What a run's output may hold of this machine: its paths, named; and how long its messages may
/// be. Applied before a run is stored.
struct Clean<'a> {
    start_line: u32,
    names: &'a [(std::path::PathBuf, &'static str)],
}

impl Clean<'_> {
    fn text(&self, text: &str) -> String {
        redact(text, self.names, MESSAGE_CAP)
    }

    /// Coverage lines relative to the `def` line, messages redacted.
    fn answer(&self, mut answer: RunAnswer) -> RunAnswer {
        if let Some(c) = &mut answer.coverage {
            for line in c.missing_lines.iter_mut().chain(c.partial_lines.iter_mut()) {
                *line = line.saturating_sub(self.start_line);
            }
        }
        answer.error = answer.error.map(|e| self.text(&e));
        for t in &mut answer.tests {
            t.message = t.message.as_ref().map(|m| self.text(m));
        }
        for e in &mut answer.examples {
            e.outcome = redact(&e.outcome, self.names, 400);
            e.call = redact(&e.call, self.names, 400);
        }
        answer
    }
}

/// How a job's memory limit reads in a failure message.
fn memory_limit(exec: &Exec) -> String {
    format!("memory limit ({} MiB)", exec.settings.memory_mib)
}

impl RawRun {
    fn timed_out(&self) -> bool {
        matches!(self, RawRun::TimedOut(_))
    }

    /// A run of the standalone runner: its outcome and answer.
    fn of_job(exec: &Exec, outcome: &Outcome, answer: Option<RunAnswer>, clean: &Clean) -> RawRun {
        match (answer, &outcome.exit) {
            (_, Exit::Timeout) => RawRun::TimedOut(outcome.duration.as_secs()),
            (Some(a), _) => RawRun::Answered(clean.answer(a)),
            (None, _) => RawRun::Died {
                how: clean.text(&describe_crash(exec, outcome)),
                limit: limit_of(exec, outcome.limit_hit),
            },
        }
    }

    /// A run as the warm worker reports it; `limit` is the limit the worker's job hit, which a
    /// run killed by a signal is taken to have met.
    fn of_worker(answer: RunAnswer, timeout: u64, clean: &Clean, limit: Option<&String>) -> RawRun {
        match answer.status.as_str() {
            "timeout" => RawRun::TimedOut(timeout),
            "crash" => {
                let how = answer
                    .error
                    .unwrap_or_else(|| "the harness process died".into());
                RawRun::Died {
                    limit: limit.filter(|_| how.contains("signal 9")).cloned(),
                    how: clean.text(&how),
                }
            }
            _ => RawRun::Answered(clean.answer(answer)),
        }
    }
}

/// The limit a job's cgroup saw hit, as a failure message names it.
fn limit_of(exec: &Exec, hit: Option<&'static str>) -> Option<String> {
    hit.map(|limit| match limit {
        "memory" => memory_limit(exec),
        "processes" => format!("process limit ({})", exec.settings.processes),
        other => format!("{other} limit"),
    })
}

/// A harness's validation: the verdict and what it measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Validation {
    pub valid: bool,
    pub tests: u32,
    pub branches: u32,
    pub branch_coverage: Option<f64>,
    pub line_coverage: Option<f64>,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    /// Tests whose reference call returned normally (the last run).
    pub normal_returns: u32,
    /// Lines of the function no test ran, and branch lines an exit of which no test took,
    /// relative to its `def` line.
    pub missing_lines: Vec<u32>,
    pub partial_lines: Vec<u32>,
    /// A few calls of the reference seen while validating: (call, outcome), as text.
    pub examples: Vec<(String, String)>,
    /// Observed type names: per parameter, and of the values returned.
    pub arg_types: Vec<(String, Vec<String>)>,
    pub return_types: Vec<String>,
}

impl Validation {
    /// A validation that failed before any run, for this reason.
    pub fn failed(class: FailureClass, message: String) -> Validation {
        Validation {
            failure_class: Some(class),
            failure_message: Some(message),
            ..Validation::default()
        }
    }

    /// The coverage selection uses: branch coverage, or line coverage without branches.
    pub fn coverage(&self) -> f64 {
        if self.branches > 0 {
            self.branch_coverage
        } else {
            self.line_coverage
        }
        .unwrap_or(0.0)
    }
}

/// A validation, whether it ran now, and whether it must run again next build (a run hit the
/// sandbox's wall clock: not stored).
#[derive(Clone, Debug)]
pub struct Checked {
    pub validation: Validation,
    pub fresh: bool,
    pub transient: bool,
}

fn key<'a>(
    exec: &Exec,
    sandbox: &'a crate::keys::SandboxKey,
    code: &'a CodeKey,
    harness: &str,
) -> ValidateKey<'a> {
    ValidateKey {
        scripts: py::files_hash(py::RUNNER),
        code,
        harness: Hash::of_bytes(harness.as_bytes()),
        runs: RUNS,
        run_timeout_seconds: exec.settings.run_timeout_seconds,
        sandbox,
    }
}

/// Stores the runs unless one timed out; returns the validation.
fn record(exec: &Exec, key: &ValidateKey, runs: &[RawRun]) -> Result<Checked> {
    let transient = runs.iter().any(RawRun::timed_out);
    if !transient {
        exec.cache.put_action(key, runs)?;
    }
    Ok(Checked {
        validation: classify(runs),
        fresh: true,
        transient,
    })
}

/// Stage `validate` for many harnesses of one environment: the cache first, then every miss in
/// one warm worker. Falls back to one job per harness when the worker itself fails.
pub fn validate_batch(
    exec: &Exec,
    runtime: &Runtime,
    items: &[(&Target, &CodeKey, &str)],
) -> Result<Vec<Checked>> {
    let sandbox = exec.sandbox_key();
    let keys: Vec<ValidateKey> = items
        .iter()
        .map(|(_, c, h)| key(exec, &sandbox, c, h))
        .collect();
    let mut out: Vec<Option<Checked>> = keys
        .iter()
        .map(|k| {
            exec.cache
                .get_action::<_, Vec<RawRun>>(k)
                .map(|runs| Checked {
                    validation: classify(&runs),
                    fresh: false,
                    transient: false,
                })
        })
        .collect();
    let misses: Vec<usize> = (0..items.len()).filter(|&i| out[i].is_none()).collect();
    if misses.is_empty() {
        return Ok(out.into_iter().flatten().collect());
    }
    let names: Vec<String> = misses.iter().map(|i| format!("harness_{i}.py")).collect();
    let timeout = exec.settings.run_timeout_seconds;
    let request = BatchRequest {
        runs: RUNS,
        timeout,
        memory_mib: exec.settings.memory_mib,
        jobs: misses
            .iter()
            .zip(&names)
            .map(|(&i, name)| run_request(items[i].0, name, None))
            .collect(),
    };
    let files: Vec<(&str, &str)> = misses
        .iter()
        .zip(&names)
        .map(|(&i, name)| (name.as_str(), items[i].2))
        .collect();
    let wall = timeout * u64::from(RUNS) * misses.len() as u64 + 60;
    let mut batch = py::RUNNER.to_vec();
    batch.rotate_left(1); // the warm worker is the entry script
    let (outcome, answer, scratch) =
        run_script::<_, BatchAnswer>(exec, runtime, &batch, &files, &request, exec.limits(wall))?;
    let names = runtime.names(&scratch, exec.cache.root());
    let limit = limit_of(exec, outcome.limit_hit);
    let mut results = answer.map(|a| a.results).unwrap_or_default().into_iter();
    for &i in &misses {
        let (target, code, harness) = items[i];
        let clean = Clean {
            start_line: target.start_line,
            names: &names,
        };
        out[i] = Some(match results.next() {
            Some(runs) if runs.len() == RUNS as usize => {
                let runs: Vec<RawRun> = runs
                    .into_iter()
                    .map(|r| RawRun::of_worker(r, timeout, &clean, limit.as_ref()))
                    .collect();
                record(exec, &keys[i], &runs)?
            }
            // The worker failed as a whole: this harness gets jobs of its own.
            _ => validate(exec, runtime, target, code, harness)?,
        });
    }
    Ok(out.into_iter().flatten().collect())
}

/// Stage `validate` for one harness, with a fresh process per run.
pub fn validate(
    exec: &Exec,
    runtime: &Runtime,
    target: &Target,
    code: &CodeKey,
    harness: &str,
) -> Result<Checked> {
    let sandbox = exec.sandbox_key();
    let key = key(exec, &sandbox, code, harness);
    if let Some(runs) = exec.cache.get_action::<_, Vec<RawRun>>(&key) {
        return Ok(Checked {
            validation: classify(&runs),
            fresh: false,
            transient: false,
        });
    }
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let (outcome, answer, scratch) = run_harness(exec, runtime, target, harness, None)?;
        let names = runtime.names(&scratch, exec.cache.root());
        let clean = Clean {
            start_line: target.start_line,
            names: &names,
        };
        runs.push(RawRun::of_job(exec, &outcome, answer, &clean));
    }
    record(exec, &key, &runs)
}

fn run_request<'a>(
    target: &'a Target,
    harness_file: &'a str,
    candidate: Option<&'a str>,
) -> RunRequest<'a> {
    RunRequest {
        repo_root: &target.import_root,
        extra_roots: &target.extra_roots,
        module: &target.module,
        qualname: &target.qualname,
        harness_file,
        source_file: &target.source_file,
        start_line: target.start_line,
        end_line: target.end_line,
        candidate_file: candidate,
        coverage: candidate.is_none(),
    }
}

/// Runs a harness once (with a candidate module's text, or in self-equivalence mode); returns
/// how it ended, the runner's answer, and the job's scratch folder (gone: for redaction).
pub fn run_harness(
    exec: &Exec,
    runtime: &Runtime,
    target: &Target,
    harness: &str,
    candidate: Option<&str>,
) -> Result<(Outcome, Option<RunAnswer>, std::path::PathBuf)> {
    let mut files: Vec<(&str, &str)> = vec![("harness.py", harness)];
    if let Some(c) = candidate {
        files.push(("candidate.py", c));
    }
    let request = run_request(target, "harness.py", candidate.map(|_| "candidate.py"));
    let wall = exec.settings.run_timeout_seconds * 2;
    run_script(
        exec,
        runtime,
        py::RUNNER,
        &files,
        &request,
        exec.limits(wall),
    )
}

/// What a job that wrote no answer did.
pub fn describe_crash(exec: &Exec, outcome: &Outcome) -> String {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    match (&outcome.exit, limit_of(exec, outcome.limit_hit)) {
        (exit, Some(limit)) => format!("the {limit} was hit (killed: {exit:?})"),
        (Exit::Timeout, _) => format!("timed out after {:.0}s", outcome.duration.as_secs_f64()),
        (exit, _) => format!("exited with {exit:?}: {}", tail.join("\n")),
    }
}

/// The verdict on a harness from its runs: every test passes in every run, the same way; at
/// least 3 tests; one of them returns normally.
pub fn classify(runs: &[RawRun]) -> Validation {
    let mut v = Validation::default();
    let fail = |v: &mut Validation, class: FailureClass, message: String| {
        if v.failure_class.is_none() {
            v.failure_class = Some(class);
            v.failure_message = Some(message);
        }
    };
    for run in runs {
        match run {
            RawRun::TimedOut(seconds) => fail(
                &mut v,
                FailureClass::Timeout,
                format!("the harness ran past {seconds}s"),
            ),
            RawRun::Died {
                limit: Some(limit),
                how,
            } => fail(
                &mut v,
                FailureClass::ResourceLimit,
                format!("the {limit} was hit: {how}"),
            ),
            _ => {}
        }
    }
    let answers: Vec<&RunAnswer> = runs
        .iter()
        .filter_map(|r| match r {
            RawRun::Answered(a) => Some(a),
            _ => None,
        })
        .collect();
    if let Some(RawRun::Died { how, .. }) = runs.iter().find(|r| matches!(r, RawRun::Died { .. })) {
        fail(&mut v, FailureClass::Other, how.clone());
    }
    // Coverage comes from the run that measured it (the warm worker measures the first).
    if let Some(cov) = answers.iter().find_map(|a| a.coverage.as_ref()) {
        v.branches = cov.branches_total;
        v.branch_coverage = (cov.branches_total > 0)
            .then(|| f64::from(cov.branches_covered) / f64::from(cov.branches_total));
        v.line_coverage = (cov.lines_total > 0)
            .then(|| f64::from(cov.lines_covered) / f64::from(cov.lines_total));
        v.missing_lines = cov.missing_lines.clone();
        v.partial_lines = cov.partial_lines.clone();
    }
    // Examples and types come from the first run that recorded any.
    if let Some(first) = answers.iter().find(|a| !a.examples.is_empty()) {
        v.examples = first
            .examples
            .iter()
            .map(|e| (e.call.clone(), e.outcome.clone()))
            .collect();
        v.arg_types = first.types.args.clone();
        v.return_types = first.types.returns.clone();
    }
    if let Some(last) = answers.last() {
        v.tests = last.tests.len() as u32;
        v.normal_returns = last.tests.iter().filter(|t| t.returned_normally).count() as u32;
    }
    for a in &answers {
        if a.status != "ok" {
            let message = a
                .error
                .clone()
                .unwrap_or_else(|| "the runner failed".to_owned());
            let class = if ["ModuleNotFoundError", "ImportError"]
                .iter()
                .any(|e| message.contains(e))
            {
                FailureClass::ImportEnv
            } else {
                classify_message(&message)
            };
            fail(&mut v, class, message);
        }
    }
    // Every test must pass in both runs; a test that passes in one and fails in the other is
    // nondeterministic.
    if let [first, second] = answers[..] {
        for (a, b) in first.tests.iter().zip(&second.tests) {
            if a.outcome != b.outcome {
                fail(
                    &mut v,
                    FailureClass::Nondeterministic,
                    format!(
                        "{} was `{}` then `{}`: {}{}",
                        a.name,
                        a.outcome,
                        b.outcome,
                        a.message.as_deref().unwrap_or_default(),
                        b.message.as_deref().unwrap_or_default()
                    ),
                );
            }
        }
        for t in first.tests.iter().chain(&second.tests) {
            if t.outcome != "pass" {
                let message = t.message.as_deref().unwrap_or_default();
                fail(
                    &mut v,
                    classify_message(message),
                    format!("{}: {message}", t.name),
                );
            }
        }
    }
    if v.failure_class.is_none() && v.tests < 3 {
        let message = format!("{} tests; at least 3 are needed", v.tests);
        fail(&mut v, FailureClass::TooFewTests, message);
    }
    if v.failure_class.is_none() && v.normal_returns == 0 {
        fail(
            &mut v,
            FailureClass::NoNormalReturn,
            "no test calls the function without an exception".into(),
        );
    }
    v.valid = v.failure_class.is_none();
    v
}

/// The failure class of a test's message.
pub fn classify_message(message: &str) -> FailureClass {
    let has = |names: &[&str]| names.iter().any(|n| message.contains(n));
    if has(&["Timeout", "timed out"]) {
        FailureClass::Timeout
    } else if has(&[
        "MemoryError",
        "RecursionError",
        "memory limit",
        "process limit",
    ]) {
        FailureClass::ResourceLimit
    } else if has(&["ModuleNotFoundError", "ImportError"]) {
        FailureClass::ImportEnv
    } else if has(&[
        "OSError",
        "FileNotFoundError",
        "PermissionError",
        "IsADirectoryError",
        "NotADirectoryError",
    ]) {
        FailureClass::OsError
    } else if has(&[
        "TypeError",
        "ValueError",
        "KeyError",
        "AttributeError",
        "IndexError",
    ]) {
        FailureClass::TypeValueError
    } else if has(&["AssertionError", "differ", "not equivalent", "mismatch"]) {
        FailureClass::Assertion
    } else {
        FailureClass::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::config::SandboxConfig;
    use crate::py::{CoverageCounts, TestResult};
    use crate::records::FunctionKind;
    use crate::sandbox::Job;
    use crate::sandbox::fake::{FakeSandbox, outcome};
    use std::path::Path;

    fn target() -> Target {
        Target::new(
            Path::new("/repo"),
            "pkg/m.py",
            "pkg.m".into(),
            "f",
            (10, 20),
        )
    }

    fn code() -> CodeKey {
        CodeKey {
            module: "pkg.m".into(),
            qualname: "f".into(),
            kind: FunctionKind::Function,
            code: Hash::of_bytes(b"def f(): ..."),
            slice: Vec::new(),
            import_time: Hash::of_bytes(b""),
            env_lock: "lock".into(),
        }
    }

    fn test(name: &str, outcome: &str, normal: bool) -> TestResult {
        TestResult {
            name: name.into(),
            outcome: outcome.into(),
            message: (outcome != "pass").then(|| "AssertionError: outcomes differ".into()),
            returned_normally: normal,
        }
    }

    fn answer(tests: Vec<TestResult>, coverage: bool) -> RunAnswer {
        RunAnswer {
            status: "ok".into(),
            tests,
            coverage: coverage.then(|| CoverageCounts {
                lines_total: 4,
                lines_covered: 3,
                branches_total: 2,
                branches_covered: 1,
                missing_lines: vec![14],
                partial_lines: vec![12],
            }),
            ..RunAnswer::default()
        }
    }

    /// Writes the job's answer file, as the real scripts do.
    fn reply(job: &Job, answer: &impl Serialize) {
        let out = job.args.last().expect("an answer path");
        std::fs::write(out, serde_json::to_vec(answer).unwrap()).unwrap();
    }

    fn with_exec<T>(sandbox: &FakeSandbox, f: impl FnOnce(&Exec) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let settings = SandboxConfig::default();
        f(&Exec {
            cache: &cache,
            sandbox,
            settings: &settings,
        })
    }

    #[test]
    fn a_run_killed_by_the_memory_limit_is_a_resource_limit_and_is_cached() {
        let sandbox = FakeSandbox::new(|_| crate::sandbox::Outcome {
            limit_hit: Some("memory"),
            ..outcome(Exit::Signal(9))
        });
        with_exec(&sandbox, |exec| {
            let first = validate(
                exec,
                &crate::stages::jobs::Runtime::for_tests(),
                &target(),
                &code(),
                "h",
            )
            .unwrap();
            let v = &first.validation;
            assert_eq!(v.failure_class, Some(FailureClass::ResourceLimit), "{v:?}");
            assert!(v.failure_message.as_deref().unwrap().contains("memory"));
            assert!(first.fresh && !first.transient && !v.valid);
            assert_eq!(sandbox.jobs().len(), RUNS as usize);
            // The runs were stored: the second time, nothing runs.
            let again = validate(
                exec,
                &crate::stages::jobs::Runtime::for_tests(),
                &target(),
                &code(),
                "h",
            )
            .unwrap();
            assert!(!again.fresh);
            assert_eq!(again.validation, first.validation);
            assert_eq!(sandbox.jobs().len(), RUNS as usize);
        });
    }

    #[test]
    fn a_wall_clock_timeout_is_reported_and_not_stored() {
        let sandbox = FakeSandbox::new(|_| outcome(Exit::Timeout));
        with_exec(&sandbox, |exec| {
            let first = validate(
                exec,
                &crate::stages::jobs::Runtime::for_tests(),
                &target(),
                &code(),
                "h",
            )
            .unwrap();
            assert_eq!(first.validation.failure_class, Some(FailureClass::Timeout));
            assert!(first.transient);
            let again = validate(
                exec,
                &crate::stages::jobs::Runtime::for_tests(),
                &target(),
                &code(),
                "h",
            )
            .unwrap();
            assert!(again.fresh, "a timeout is never a cached verdict");
        });
    }

    #[test]
    fn the_warm_workers_runs_are_classified() {
        // Harness `a` passes, then fails: nondeterministic. Harness `b` passes both times, with
        // coverage from the first run; its lines come back relative to the `def` line.
        let sandbox = FakeSandbox::new(|job| {
            let request: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&job.args[2]).unwrap()).unwrap();
            let jobs = request["jobs"].as_array().unwrap();
            let results: Vec<Vec<RunAnswer>> = jobs
                .iter()
                .map(|j| {
                    let file = j["harness_file"].as_str().unwrap();
                    let harness = std::fs::read_to_string(job.scratch.join(file)).unwrap();
                    let ok = |n| test(n, "pass", true);
                    if harness == "a" {
                        vec![
                            answer(vec![ok("t0"), ok("t1"), ok("t2")], true),
                            answer(vec![ok("t0"), test("t1", "fail", true), ok("t2")], false),
                        ]
                    } else {
                        vec![
                            answer(vec![ok("t0"), ok("t1"), test("t2", "pass", false)], true),
                            answer(vec![ok("t0"), ok("t1"), test("t2", "pass", false)], false),
                        ]
                    }
                })
                .collect();
            reply(job, &BatchAnswer { results });
            outcome(Exit::Code(0))
        });
        with_exec(&sandbox, |exec| {
            let (t, c) = (target(), code());
            let checked = validate_batch(
                exec,
                &crate::stages::jobs::Runtime::for_tests(),
                &[(&t, &c, "a"), (&t, &c, "b")],
            )
            .unwrap();
            let a = &checked[0].validation;
            assert_eq!(
                a.failure_class,
                Some(FailureClass::Nondeterministic),
                "{a:?}"
            );
            let b = &checked[1].validation;
            assert!(b.valid, "{b:?}");
            assert_eq!((b.tests, b.normal_returns, b.branches), (3, 2, 2));
            assert_eq!(b.branch_coverage, Some(0.5));
            assert_eq!(
                (b.missing_lines.clone(), b.partial_lines.clone()),
                (vec![4], vec![2])
            );
            assert_eq!(sandbox.jobs().len(), 1, "one warm worker for both");
        });
    }

    #[test]
    fn failure_classes_come_from_the_messages() {
        let runs = |a: RunAnswer| vec![RawRun::Answered(a.clone()), RawRun::Answered(a)];
        let import_error = RunAnswer {
            status: "error".into(),
            error: Some("harness import failed: ModuleNotFoundError: No module named 'x'".into()),
            ..RunAnswer::default()
        };
        assert_eq!(
            classify(&runs(import_error)).failure_class,
            Some(FailureClass::ImportEnv)
        );
        let few = answer(vec![test("t0", "pass", true)], false);
        assert_eq!(
            classify(&runs(few)).failure_class,
            Some(FailureClass::TooFewTests)
        );
        let raising = answer(
            vec![
                test("t0", "pass", false),
                test("t1", "pass", false),
                test("t2", "pass", false),
            ],
            false,
        );
        assert_eq!(
            classify(&runs(raising)).failure_class,
            Some(FailureClass::NoNormalReturn)
        );
        assert_eq!(
            classify_message("TypeError: bad"),
            FailureClass::TypeValueError
        );
        assert_eq!(
            classify_message("PermissionError: no"),
            FailureClass::OsError
        );
    }
}
