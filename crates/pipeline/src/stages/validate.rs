//! Stage `validate`: a harness is recorded on the original twice (in its tests' natural order,
//! with the function's own branch and line coverage, then shuffled), and the original is then
//! checked against that record through the one check path, as a candidate (its own process, the
//! original file hidden, its function's lines moved apart), twice (natural, then shuffled). The
//! harness is valid when every test of every run comes out the same: a verdict that depends on
//! the order of the tests, on state left by an earlier one, on sharing a process with the
//! reference, or on where the function's lines are is `nondeterministic`.
//!
//! The runs are the cached action (`keys::ValidateKey`), stored raw; the verdict
//! ([`Validation`]) is derived from them when they are read ([`classify`]), so a change to the
//! classification or the verdict policy needs no new key. Many harnesses of one environment run
//! in one warm worker per side (`stages::runs`).

use r2e_exec::py::{AnswerStatus, TestOutcome};
use serde::{Deserialize, Serialize};

use super::keyed;
use r2e_core::config::{Unstable, ValidateConfig};
use r2e_core::error::Result;
use r2e_core::hash::Hash;
use r2e_core::keys::{CodeKey, ValidateKey};
use r2e_core::records::{ExpectedTest, FailureClass, NoTests, Stability, TestStability};
use r2e_core::verdict;
use r2e_exec::checkpath;
use r2e_exec::jobs::{Exec, Runtime};
use r2e_exec::py::{Mode, RunAnswer};
use r2e_exec::runs::{self, Item, RawRun};
use r2e_exec::target::Target;

/// The stored runs of a validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Runs {
    /// The original recorded `[validate] repeats` times: natural order (with coverage) in one
    /// worker, then shuffled in another.
    pub record: Vec<RawRun>,
    /// The original checked as a candidate: natural order, then shuffled.
    pub candidate: Vec<RawRun>,
}

impl Runs {
    fn all(&self) -> impl Iterator<Item = &RawRun> {
        self.record.iter().chain(&self.candidate)
    }
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
    /// The reference's calls in each test (the first record): what candidates are checked
    /// against. Tests dropped as unstable are not among them.
    pub expected: Vec<ExpectedTest>,
    /// How the tests agreed over the runs (none when a run failed before any test was judged).
    pub stability: Option<Stability>,
    /// Why the first unstable test was dropped (its name and what differed).
    pub unstable_why: Option<String>,
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

/// Stage `validate` for many harnesses of one environment: the cache first, then every miss in
/// one warm worker per side.
pub fn validate_batch(
    exec: &Exec,
    runtime: &Runtime,
    items: &[(&Target, &CodeKey, &str)],
    cfg: &ValidateConfig,
) -> Result<Vec<Checked>> {
    let settings = keyed::validation(exec.sandbox, exec.settings, cfg.repeats);
    let keys: Vec<ValidateKey> = items
        .iter()
        .map(|(_, c, h)| settings.key(c, Hash::of_bytes(h.as_bytes())))
        .collect();
    let mut out: Vec<Option<Checked>> = keys
        .iter()
        .map(|k| {
            exec.cache.get_action::<_, Runs>(k).map(|runs| Checked {
                validation: classify(&runs, cfg),
                fresh: false,
                transient: false,
            })
        })
        .collect();
    let misses: Vec<usize> = (0..items.len()).filter(|&i| out[i].is_none()).collect();
    if misses.is_empty() {
        return Ok(out.into_iter().flatten().collect());
    }
    // The original's own text is the candidate: it must pass its own harness through the
    // path every candidate takes, with its lines moved apart (`python::spread_lines`), since a
    // correct rewrite moves lines too.
    let originals: Vec<String> = misses
        .iter()
        .map(|&i| {
            let target = items[i].0;
            // Decoded as Python decodes it (PEP 263): a latin-1 module is no empty candidate.
            let text = std::fs::read(&target.source_file)
                .ok()
                .and_then(|bytes| r2e_python::decode::decode_source(&bytes).ok())
                .unwrap_or_default();
            let strings = r2e_python::strings_in(&text);
            r2e_python::spread_lines(&text, &strings, (target.start_line, target.end_line))
        })
        .collect();
    let recorded: Vec<Item> = misses
        .iter()
        .map(|&i| Item {
            target: items[i].0,
            harness: items[i].2,
            candidate: None,
        })
        .collect();
    let as_candidates: Vec<Item> = misses
        .iter()
        .zip(&originals)
        .map(|(&i, original)| Item {
            target: items[i].0,
            harness: items[i].2,
            candidate: Some(original),
        })
        .collect();
    // The first record (natural order, coverage) in one worker, the others in another: a
    // fresh interpreter, whose hash seed and import-time state are its own, as a candidate's
    // will be.
    let first = runs::run_batch(exec, runtime, &recorded, Mode::Record, 1)?;
    let again = runs::run_batch_from(
        exec,
        runtime,
        &recorded,
        Mode::Record,
        runs::Runs {
            first: 1,
            count: cfg.repeats - 1,
        },
    )?;
    let record: Vec<Vec<RawRun>> = first
        .into_iter()
        .zip(again)
        .map(|(mut first, again)| {
            first.extend(again);
            first
        })
        .collect();
    let candidate = runs::run_batch(exec, runtime, &as_candidates, Mode::Candidate, keyed::RUNS)?;
    for ((&i, record), candidate) in misses.iter().zip(record).zip(candidate) {
        let runs = Runs { record, candidate };
        // A wall-clock timeout may be the machine's load, an error the machine's failure:
        // neither is stored, and the next build runs the harness again.
        let transient = runs.all().any(|r| r.timed_out() || r.is_error());
        if !transient {
            exec.cache.put_action(&keys[i], &runs)?;
        }
        out[i] = Some(Checked {
            validation: classify(&runs, cfg),
            fresh: true,
            transient,
        });
    }
    Ok(out.into_iter().flatten().collect())
}

/// Stage `validate` for one harness.
pub fn validate(
    exec: &Exec,
    runtime: &Runtime,
    target: &Target,
    code: &CodeKey,
    harness: &str,
    cfg: &ValidateConfig,
) -> Result<Checked> {
    let mut one = validate_batch(exec, runtime, &[(target, code, harness)], cfg)?;
    Ok(one.remove(0))
}

/// The verdict on a harness from its runs: every test passes, the same way in every run (or,
/// with `unstable = "drop"`, the tests that do not are dropped); at least 3 tests; one of them
/// returns normally.
pub fn classify(runs: &Runs, cfg: &ValidateConfig) -> Validation {
    let mut v = Validation::default();
    let fail = |v: &mut Validation, class: FailureClass, message: String| {
        if v.failure_class.is_none() {
            v.failure_class = Some(class);
            v.failure_message = Some(message);
        }
    };
    for run in runs.all() {
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
            RawRun::Died { how, limit: None } => fail(&mut v, FailureClass::Crash, how.clone()),
            RawRun::Error(why) => fail(&mut v, FailureClass::Infrastructure, why.clone()),
            RawRun::Answered(_) => {}
        }
    }
    let recorded: Vec<&RunAnswer> = runs.record.iter().filter_map(RawRun::answer).collect();
    measured(&mut v, &recorded);
    for a in &recorded {
        if a.status != AnswerStatus::Ok {
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
    // A test that fails in the first run fails the harness; one that passes there is judged by
    // its agreement with the first run in every other.
    if let Some(first) = recorded.first() {
        for t in first
            .tests
            .iter()
            .filter(|t| t.outcome != TestOutcome::Pass)
        {
            let message = t.message.as_deref().unwrap_or_default();
            fail(
                &mut v,
                classify_message(message),
                format!("{}: {message}", t.name),
            );
        }
    }
    if v.failure_class.is_none() {
        stability(&mut v, runs, &recorded, cfg);
    }
    if v.failure_class.is_none() && v.tests < 3 {
        let dropped = v.stability.as_ref().map_or(&[][..], |s| &s.dropped[..]);
        let message = match (&v.unstable_why, dropped.len()) {
            (Some(why), n) if v.tests == 0 && n > 0 => {
                format!("0 tests: all {n} were dropped as unstable; {why}")
            }
            _ => format!("{} tests; at least 3 are needed", v.tests),
        };
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

/// Each test's agreement over the runs: the reference recorded again (in another order, in a
/// fresh process) does what it did in the first run, and the original, checked as any candidate
/// is (its lines moved apart), passes the test, once the parts of its values the reference does
/// not reproduce are masked (`agree_or_mask`). A test that ever disagrees is dropped (its
/// expectations removed, the harness measured without it) or makes the harness
/// `nondeterministic`, as `[validate] unstable` says. Fills `v.stability`.
fn stability(v: &mut Validation, runs: &Runs, recorded: &[&RunAnswer], cfg: &ValidateConfig) {
    let policy = cfg.policy();
    let names: Vec<String> = v.expected.iter().map(|t| t.name.clone()).collect();
    let mut agreed: Vec<u32> = vec![u32::from(!recorded.is_empty()); names.len()];
    // Why each test first disagreed.
    let mut why: Vec<Option<String>> = vec![None; names.len()];
    // Tests whose expected values hold parts the reference did not reproduce (`masked`).
    let mut masked: Vec<String> = Vec::new();
    for again in recorded.iter().skip(1) {
        for i in 0..v.expected.len() {
            let got = again.tests.iter().find(|u| u.name == v.expected[i].name);
            let differs = match got {
                None => Some("it did not run".to_owned()),
                Some(u) if u.outcome != TestOutcome::Pass => Some(
                    u.message
                        .clone()
                        .unwrap_or_else(|| format!("it ended with `{}`", u.outcome)),
                ),
                Some(u) => agree_or_mask(&mut v.expected[i], u, policy, &mut masked),
            };
            match differs {
                None => agreed[i] += 1,
                Some(d) => {
                    why[i].get_or_insert_with(|| {
                        format!("the reference does otherwise when the tests run in another order, in a fresh process: {d}")
                    });
                }
            }
        }
    }
    for run in &runs.candidate {
        let verdict = checkpath::judge(&v.expected, run, policy);
        if let Some(error) = verdict.error {
            // The whole run failed (the original does not import as a candidate): no test
            // ran, which says nothing of one test's stability.
            let class = verdict.failure_class.unwrap_or(FailureClass::Other);
            if v.failure_class.is_none() {
                v.failure_class = Some(class);
                v.failure_message = Some(format!(
                    "the original, checked as a candidate (its lines moved apart), fails: {error}"
                ));
            }
            return;
        }
        for (i, t) in verdict.tests.iter().enumerate() {
            // The original is the reference's own code: a part of a value it does not
            // reproduce as a candidate, where the runs agree otherwise, is masked as it is
            // between two records (a clock read when the instance was made, which two close
            // records may hold within the float tolerance and a later run does not).
            let got = run.answer().and_then(|a| {
                a.tests
                    .iter()
                    .find(|u| u.name == t.name && u.outcome == TestOutcome::Pass)
            });
            let differs = match got {
                Some(u) if !t.passed => agree_or_mask(&mut v.expected[i], u, policy, &mut masked),
                _ => t.message.clone().filter(|_| !t.passed),
            };
            if differs.is_none() {
                agreed[i] += 1;
            } else {
                why[i].get_or_insert_with(|| {
                    format!(
                        "the original, checked as a candidate (its lines moved apart), fails its own test: {}",
                        t.message.as_deref().unwrap_or_default()
                    )
                });
            }
        }
    }
    let total = (recorded.len() + runs.candidate.len()) as u32;
    let mut stability = Stability {
        runs: total,
        tests: names
            .iter()
            .zip(&agreed)
            .map(|(name, &agreed)| TestStability {
                name: name.clone(),
                agreed,
            })
            .collect(),
        dropped: Vec::new(),
        masked,
    };
    let unstable: Vec<usize> = (0..names.len()).filter(|&i| agreed[i] < total).collect();
    if let Some(&i) = unstable.first() {
        match cfg.unstable {
            Unstable::Invalid => {
                v.failure_class = Some(FailureClass::Nondeterministic);
                v.failure_message = Some(format!(
                    "{}: {}",
                    names[i],
                    why[i].clone().unwrap_or_default()
                ));
            }
            Unstable::Drop => {
                v.unstable_why = Some(format!(
                    "{}: {}",
                    names[i],
                    why[i].clone().unwrap_or_default()
                ));
                stability.dropped = unstable.iter().map(|&i| names[i].clone()).collect();
                v.expected.retain(|t| !stability.dropped.contains(&t.name));
                v.tests = v.expected.len() as u32;
                v.normal_returns = v.expected.iter().filter(|t| t.returned_normally).count() as u32;
            }
        }
    }
    v.stability = Some(stability);
}

/// Whether a later run of the reference's code (`got`: recorded again in a fresh process, or
/// the original checked as a candidate) agrees with the expected test. Parts of its values that
/// the reference does not reproduce (a cached hash of strings, which each process's hash seed
/// decides; a clock read) are masked in `want`, and the rest of the test is kept, when that is
/// all the difference (`verdict::mask_test`); the test is then named in `masked`. Otherwise the
/// difference.
fn agree_or_mask(
    want: &mut ExpectedTest,
    got: &r2e_exec::py::TestResult,
    policy: verdict::Policy,
    masked: &mut Vec<String>,
) -> Option<String> {
    let d = verdict::test_differs(&want.records, &got.records, policy)?;
    let mut records = want.records.clone();
    match verdict::mask_test(&mut records, &got.records, policy) {
        Some(n) if n > 0 && verdict::test_differs(&records, &got.records, policy).is_none() => {
            if !masked.contains(&want.name) {
                masked.push(want.name.clone());
            }
            want.records = records;
            None
        }
        _ => Some(d),
    }
}

/// Why a validation (or a failure before one: the explorer's) left no test, when it did: from
/// the drops of unstable tests, the explorer's message (`r2e_explorer.search`: "could not
/// construct", "no input could be kept (N executions, K timed out)") and the failure class.
pub fn no_tests(v: &Validation) -> Option<NoTests> {
    if v.valid || v.tests > 0 {
        return None;
    }
    let message = v.failure_message.as_deref().unwrap_or_default();
    if v.stability.as_ref().is_some_and(|s| !s.dropped.is_empty()) {
        return Some(NoTests::Unstable);
    }
    if message.contains("could not construct") {
        return Some(NoTests::NoInput);
    }
    if let Some(counts) = message
        .strip_prefix("no input could be kept (")
        .and_then(|r| r.split(')').next())
    {
        let number = |word: &str| -> Option<u64> {
            counts
                .split(", ")
                .find_map(|part| part.strip_suffix(word)?.trim().parse().ok())
        };
        let executions = number("executions").unwrap_or(0);
        let timed_out = number("timed out").unwrap_or(0);
        return Some(if executions == 0 {
            NoTests::NoInput
        } else if timed_out >= executions {
            NoTests::EveryCallHitItsLimit
        } else {
            NoTests::NoCallReturned
        });
    }
    Some(match v.failure_class {
        Some(FailureClass::ImportEnv) => NoTests::ImportFailed,
        Some(FailureClass::Timeout | FailureClass::ResourceLimit) => NoTests::EveryCallHitItsLimit,
        Some(FailureClass::NoNormalReturn | FailureClass::TooFewTests) => NoTests::NoCallReturned,
        _ => NoTests::ExplorerFailed,
    })
}

/// What the first record measured: coverage, tests, calls of the reference, expectations.
fn measured(v: &mut Validation, recorded: &[&RunAnswer]) {
    // Coverage comes from the run that measured it (the first).
    if let Some(cov) = recorded.iter().find_map(|a| a.coverage.as_ref()) {
        v.branches = cov.branches_total;
        v.branch_coverage = (cov.branches_total > 0)
            .then(|| f64::from(cov.branches_covered) / f64::from(cov.branches_total));
        v.line_coverage = (cov.lines_total > 0)
            .then(|| f64::from(cov.lines_covered) / f64::from(cov.lines_total));
        v.missing_lines = cov.missing_lines.clone();
        v.partial_lines = cov.partial_lines.clone();
    }
    // Examples and types come from the first run that recorded any.
    if let Some(first) = recorded.iter().find(|a| !a.examples.is_empty()) {
        v.examples = first
            .examples
            .iter()
            .map(|e| (e.call.clone(), e.outcome.clone()))
            .collect();
        v.arg_types = first.types.args.clone();
        v.return_types = first.types.returns.clone();
    }
    if let Some(first) = recorded.first() {
        v.tests = first.tests.len() as u32;
        v.normal_returns = first.tests.iter().filter(|t| t.returned_normally).count() as u32;
        v.expected = first
            .tests
            .iter()
            .map(|t| ExpectedTest {
                name: t.name.clone(),
                records: t.records.clone(),
                returned_normally: t.returned_normally,
            })
            .collect();
    }
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
    use r2e_core::cache::Cache;
    use r2e_core::config::SandboxConfig;
    use r2e_core::records::FunctionKind;
    use r2e_core::verdict::{Outcome, Record, Snap};
    use r2e_exec::py::{CoverageCounts, TestResult};
    use r2e_exec::runs::fake::warm_worker;
    use r2e_exec::sandbox::Exit;
    use r2e_exec::sandbox::fake::{FakeSandbox, outcome};
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
            project: String::new(),
        }
    }

    /// A test whose one call `f(n)` returned `value` (or raised, when `normal` is false).
    fn test(name: &str, value: i64, normal: bool) -> TestResult {
        let outcome = if normal {
            Outcome::Return(Snap::Int(value.to_string()))
        } else {
            Outcome::Raise {
                ty: "ValueError".into(),
                message: "no".into(),
            }
        };
        TestResult {
            name: name.into(),
            outcome: TestOutcome::Pass,
            message: None,
            returned_normally: normal,
            records: vec![Record {
                call: format!("f({value})"),
                outcome,
                args: Vec::new(),
                kwargs: Default::default(),
                instance: None,
                then: Vec::new(),
                warnings: Vec::new(),
            }],
        }
    }

    fn answer(tests: Vec<TestResult>, coverage: bool) -> RunAnswer {
        RunAnswer {
            status: AnswerStatus::Ok,
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

    fn with_exec<T>(sandbox: &FakeSandbox, f: impl FnOnce(&Exec) -> T) -> T {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let settings = SandboxConfig::default();
        f(&Exec {
            cache: &cache,
            sandbox,
            settings: &settings,
            warm: None,
        })
    }

    fn one(exec: &Exec) -> Checked {
        validate(
            exec,
            &r2e_exec::jobs::Runtime::for_tests(),
            &target(),
            &code(),
            "h",
            &ValidateConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_run_killed_by_the_memory_limit_is_a_resource_limit_and_is_cached() {
        let sandbox = FakeSandbox::new(|_| r2e_exec::sandbox::Outcome {
            limit_hit: Some("memory"),
            ..outcome(Exit::Signal(9))
        });
        with_exec(&sandbox, |exec| {
            let first = one(exec);
            let v = &first.validation;
            assert_eq!(v.failure_class, Some(FailureClass::ResourceLimit), "{v:?}");
            assert!(v.failure_message.as_deref().unwrap().contains("memory"));
            assert!(first.fresh && !first.transient && !v.valid);
            assert_eq!(
                sandbox.jobs().len(),
                3,
                "a worker for the first record, one for the others, one for the candidate"
            );
            // The runs were stored: the second time, nothing runs.
            let again = one(exec);
            assert!(!again.fresh);
            assert_eq!(again.validation, first.validation);
            assert_eq!(sandbox.jobs().len(), 3);
        });
    }

    #[test]
    fn a_wall_clock_timeout_is_reported_and_not_stored() {
        let sandbox = FakeSandbox::new(|_| outcome(Exit::Timeout));
        with_exec(&sandbox, |exec| {
            let first = one(exec);
            assert_eq!(first.validation.failure_class, Some(FailureClass::Timeout));
            assert!(first.transient);
            let again = one(exec);
            assert!(again.fresh, "a timeout is never a cached verdict");
        });
    }

    /// `[validate] unstable = "invalid"`: a test whose runs disagree makes the harness invalid.
    fn invalid() -> ValidateConfig {
        ValidateConfig {
            unstable: Unstable::Invalid,
            ..ValidateConfig::default()
        }
    }

    #[test]
    fn the_warm_workers_runs_are_classified() {
        // Harness `a`: the original, checked as a candidate, returns otherwise in its second
        // run: nondeterministic. Harness `b`: the same everywhere, with coverage from the first
        // record; its lines come back relative to the `def` line. Harness `c`: the reference
        // itself does otherwise when the tests are shuffled.
        let sandbox = warm_worker(|harness, mode, n| {
            let t1 = match (harness, mode, n) {
                ("a", "candidate", 1) | ("c", "record", 1) => 7,
                _ => 1,
            };
            let mut tests = vec![
                test("t0", 0, true),
                test("t1", t1, true),
                test("t2", 2, false),
            ];
            tests[0].records[0].outcome =
                Outcome::Return(r2e_core::verdict::sample_of_every_kind());
            answer(tests, mode == "record" && n == 0)
        });
        with_exec(&sandbox, |exec| {
            let (t, c) = (target(), code());
            let checked = validate_batch(
                exec,
                &r2e_exec::jobs::Runtime::for_tests(),
                &[(&t, &c, "a"), (&t, &c, "b"), (&t, &c, "c")],
                &invalid(),
            )
            .unwrap();
            let a = &checked[0].validation;
            assert_eq!(
                a.failure_class,
                Some(FailureClass::Nondeterministic),
                "{a:?}"
            );
            assert!(
                a.failure_message
                    .as_deref()
                    .unwrap()
                    .contains("checked as a candidate"),
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
            assert_eq!(b.expected.len(), 3);
            let shuffled = &checked[2].validation;
            assert_eq!(shuffled.failure_class, Some(FailureClass::Nondeterministic));
            assert!(
                shuffled
                    .failure_message
                    .as_deref()
                    .unwrap()
                    .contains("another order"),
                "{shuffled:?}"
            );
            assert_eq!(
                sandbox.jobs().len(),
                3,
                "three warm workers (two records, a candidate) for all three"
            );
            // Stored, snapshots of every kind of value included: the second time nothing runs.
            let again = validate_batch(
                exec,
                &r2e_exec::jobs::Runtime::for_tests(),
                &[(&t, &c, "a"), (&t, &c, "b"), (&t, &c, "c")],
                &invalid(),
            )
            .unwrap();
            assert!(again.iter().all(|c| !c.fresh));
            assert_eq!(again[1].validation, checked[1].validation);
            assert_eq!(sandbox.jobs().len(), 3);
        });
    }

    #[test]
    fn an_unstable_test_is_dropped_and_its_agreement_recorded() {
        // `t1` differs in the third record (a fresh worker's second run); `t3` fails in the
        // original's second check as a candidate. The others agree everywhere.
        let sandbox = warm_worker(|_, mode, n| {
            let t1 = if (mode, n) == ("record", 2) { 7 } else { 1 };
            let t3 = if (mode, n) == ("candidate", 1) { 9 } else { 3 };
            answer(
                vec![
                    test("t0", 0, true),
                    test("t1", t1, true),
                    test("t2", 2, false),
                    test("t3", t3, true),
                    test("t4", 4, true),
                ],
                mode == "record" && n == 0,
            )
        });
        with_exec(&sandbox, |exec| {
            let (t, c) = (target(), code());
            let runtime = r2e_exec::jobs::Runtime::for_tests();
            let v = validate(exec, &runtime, &t, &c, "h", &ValidateConfig::default())
                .unwrap()
                .validation;
            assert!(v.valid, "{v:?}");
            let stability = v.stability.clone().unwrap();
            assert_eq!(stability.runs, 5, "3 records and 2 checks as a candidate");
            let agreed: Vec<(&str, u32)> = stability
                .tests
                .iter()
                .map(|t| (t.name.as_str(), t.agreed))
                .collect();
            assert_eq!(
                agreed,
                [("t0", 5), ("t1", 4), ("t2", 5), ("t3", 4), ("t4", 5)]
            );
            assert_eq!(stability.dropped, ["t1", "t3"]);
            let kept: Vec<&str> = v.expected.iter().map(|t| t.name.as_str()).collect();
            assert_eq!(kept, ["t0", "t2", "t4"]);
            assert_eq!((v.tests, v.normal_returns), (3, 2));
            // By policy the same runs make the harness invalid.
            let v = validate(exec, &runtime, &t, &c, "h", &invalid())
                .unwrap()
                .validation;
            assert_eq!(
                v.failure_class,
                Some(FailureClass::Nondeterministic),
                "{v:?}"
            );
            assert!(v.failure_message.unwrap().starts_with("t1: "));
            // More repeats: another key, the runs made again.
            let jobs = sandbox.jobs().len();
            let five = ValidateConfig {
                repeats: 5,
                ..ValidateConfig::default()
            };
            let v = validate(exec, &runtime, &t, &c, "h", &five)
                .unwrap()
                .validation;
            assert!(sandbox.jobs().len() > jobs);
            assert_eq!(v.stability.unwrap().runs, 7);
        });
    }

    #[test]
    fn an_exception_message_is_wording_unless_the_policy_compares_it() {
        let raising = |message: &str| {
            let mut t = test("t1", 0, false);
            t.records[0].outcome = Outcome::Raise {
                ty: "ValueError".into(),
                message: message.into(),
            };
            t
        };
        let run = |message: &str| {
            RawRun::Answered(answer(
                vec![test("t0", 0, true), raising(message), test("t2", 2, true)],
                false,
            ))
        };
        let runs = Runs {
            record: vec![run("bad value 3"), run("bad value 3")],
            candidate: vec![run("value 3 is bad"), run("value 3 is bad")],
        };
        assert!(classify(&runs, &ValidateConfig::default()).valid);
        let strict = ValidateConfig {
            compare_exception_messages: true,
            ..invalid()
        };
        assert_eq!(
            classify(&runs, &strict).failure_class,
            Some(FailureClass::Nondeterministic)
        );
    }

    /// Issue 52: every harness with no test says why; a test whose runs differ only in a part
    /// of a value (a cached hash) is kept with that part masked.
    #[test]
    fn a_harness_with_no_test_says_why_and_a_hash_is_masked_not_dropped() {
        let hashed = |hash: &str| {
            let mut t = test("t", 0, true);
            t.records[0].outcome = Outcome::Return(
                serde_json::from_str(&format!(
                    r#"{{"object": {{"type": "m.Namespaces", "state": {{"_hash": {{"int": "{hash}"}}, "n": {{"int": "1"}}}}}}}}"#
                ))
                .unwrap(),
            );
            t
        };
        let named = |mut t: TestResult, name: &str| {
            t.name = name.into();
            t
        };
        let run = |hash: &str| {
            RawRun::Answered(answer(
                (0..3)
                    .map(|i| named(hashed(hash), &format!("t{i}")))
                    .collect(),
                false,
            ))
        };
        // Every process has its own hash seed, hence its own hash; the candidate checks too.
        let runs = Runs {
            record: vec![run("11"), run("22")],
            candidate: vec![run("33"), run("44")],
        };
        let v = classify(&runs, &ValidateConfig::default());
        assert!(v.valid, "{v:?}");
        assert_eq!(v.tests, 3);
        assert_eq!(v.stability.as_ref().unwrap().masked, ["t0", "t1", "t2"]);
        assert_eq!(no_tests(&v), None);

        // A clock read when the instance was made: the two records, a second apart, agree
        // within the float tolerance; the checks as a candidate, later, do not. The part is
        // masked from those checks as it is between records, and nothing else is: a candidate
        // whose other part differs still fails.
        let clocked = |at: &str, n: &str| {
            let mut t = test("t", 0, true);
            t.records[0].outcome = Outcome::Return(
                serde_json::from_str(&format!(
                    r#"{{"object": {{"type": "m.Interpreter", "state": {{"start_time": {{"float": {at}}}, "n": {{"int": "{n}"}}}}}}}}"#
                ))
                .unwrap(),
            );
            RawRun::Answered(answer(
                (0..3).map(|i| named(t.clone(), &format!("t{i}"))).collect(),
                false,
            ))
        };
        let runs = Runs {
            record: vec![clocked("1780000000.0", "1"), clocked("1780000000.5", "1")],
            candidate: vec![clocked("1780000090.0", "1"), clocked("1780000091.0", "1")],
        };
        let v = classify(&runs, &ValidateConfig::default());
        assert!(v.valid, "{v:?}");
        assert_eq!(v.stability.as_ref().unwrap().masked, ["t0", "t1", "t2"]);
        assert_eq!(v.stability.as_ref().unwrap().tests[0].agreed, 4);
        let policy = ValidateConfig::default().policy();
        let wrong = checkpath::judge(&v.expected, &clocked("1780000500.0", "2"), policy);
        assert!(!wrong.tests[0].passed, "{wrong:?}");
        let right = checkpath::judge(&v.expected, &clocked("1780000500.0", "1"), policy);
        assert!(right.tests[0].passed, "{right:?}");
        // Another outcome in a fresh process, for every test: all dropped, and said so.
        let raising = |name: &str| named(test("x", 0, false), name);
        let runs = Runs {
            record: vec![
                run("11"),
                RawRun::Answered(answer(
                    vec![raising("t0"), raising("t1"), raising("t2")],
                    false,
                )),
            ],
            candidate: vec![run("11"), run("11")],
        };
        let v = classify(&runs, &ValidateConfig::default());
        assert_eq!(v.failure_class, Some(FailureClass::TooFewTests), "{v:?}");
        let message = v.failure_message.clone().unwrap();
        assert!(
            message.starts_with("0 tests: all 3 were dropped as unstable; t0: "),
            "{message}"
        );
        assert_eq!(no_tests(&v), Some(NoTests::Unstable));

        // What the explorer said when it kept nothing.
        let said = |class, message: &str| no_tests(&Validation::failed(class, message.into()));
        let other = FailureClass::Other;
        assert_eq!(
            said(other, "no input could be kept (103 executions)"),
            Some(NoTests::NoCallReturned)
        );
        assert_eq!(
            said(
                FailureClass::Timeout,
                "no input could be kept (2 executions, 2 timed out)"
            ),
            Some(NoTests::EveryCallHitItsLimit)
        );
        assert_eq!(
            said(
                FailureClass::TypeValueError,
                "could not construct MoveOperation: raise AttributeError: 'int' object has no attribute"
            ),
            Some(NoTests::NoInput)
        );
        assert_eq!(
            said(
                FailureClass::ImportEnv,
                "ModuleNotFoundError: No module named 'x'"
            ),
            Some(NoTests::ImportFailed)
        );
        assert_eq!(
            said(
                other,
                "exited with Code(1): Traceback (most recent call last)"
            ),
            Some(NoTests::ExplorerFailed)
        );
    }

    #[test]
    fn failure_classes_come_from_the_messages() {
        let runs = |a: RunAnswer| Runs {
            record: vec![RawRun::Answered(a.clone()), RawRun::Answered(a.clone())],
            candidate: vec![RawRun::Answered(a.clone()), RawRun::Answered(a)],
        };
        let class = |a: RunAnswer| classify(&runs(a), &ValidateConfig::default()).failure_class;
        let import_error = RunAnswer {
            status: AnswerStatus::Error,
            error: Some("harness import failed: ModuleNotFoundError: No module named 'x'".into()),
            ..RunAnswer::default()
        };
        assert_eq!(class(import_error), Some(FailureClass::ImportEnv));
        let few = answer(vec![test("t0", 0, true)], false);
        assert_eq!(class(few), Some(FailureClass::TooFewTests));
        let raising = answer(
            vec![
                test("t0", 0, false),
                test("t1", 1, false),
                test("t2", 2, false),
            ],
            false,
        );
        assert_eq!(class(raising), Some(FailureClass::NoNormalReturn));
        let mut failing = answer(vec![test("t0", 0, true); 3], false);
        failing.tests[1].outcome = TestOutcome::Error;
        failing.tests[1].message = Some("TypeError: bad".into());
        assert_eq!(class(failing), Some(FailureClass::TypeValueError));
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
