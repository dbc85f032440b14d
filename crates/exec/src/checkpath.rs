//! The one check path: a candidate module runs against an instance's harness in candidate mode
//! (its own process, the original module absent and its file hidden), and its calls are judged
//! against the calls the reference made when the harness was validated. `check`, validation (the
//! original spliced in as the candidate), `evaluate` and `serve` all go through here, so no two
//! of them can disagree.

use serde::{Deserialize, Serialize};

use super::jobs::{Exec, Runtime};
use super::runs::{self, Item, RawRun};
use crate::py::{self, AnswerStatus, Mode, TestOutcome};
use crate::target::Target;
use r2e_core::cache::ActionKey;
use r2e_core::error::Result;
use r2e_core::hash::Hash;
use r2e_core::keys::{CheckKey, SandboxKey};
use r2e_core::records::{CheckOutcome, ExpectedTest, FailureClass};
use r2e_core::verdict::{self, Policy};

/// One test's verdict, with what a person (or an agent) needs to see why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestVerdict {
    pub name: String,
    pub passed: bool,
    /// The calls the test makes, as Python text.
    pub inputs: Vec<String>,
    /// What the reference did on each, and what the candidate did.
    pub expected: Vec<String>,
    pub actual: Vec<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The verdict on a candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `pass`, `fail` (the candidate's doing) or `error` (the check's: the candidate was not
    /// judged, and nothing of it is cached).
    pub outcome: CheckOutcome,
    /// `outcome == pass`.
    pub passed: bool,
    /// Why no test could run (the candidate did not import, the process died, a limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_class: Option<FailureClass>,
    pub tests: Vec<TestVerdict>,
}

impl Verdict {
    fn broken(class: FailureClass, error: String) -> Verdict {
        Verdict {
            outcome: if class == FailureClass::Infrastructure {
                CheckOutcome::Error
            } else {
                CheckOutcome::Fail
            },
            passed: false,
            error: Some(error),
            failure_class: Some(class),
            tests: Vec::new(),
        }
    }

    /// A candidate that cannot run at all, for this reason.
    pub fn unrunnable(error: String) -> Verdict {
        Verdict::broken(FailureClass::Unrunnable, error)
    }

    /// A candidate the check could not judge, for a reason not its own (outcome `error`).
    pub fn error(error: String) -> Verdict {
        Verdict::broken(FailureClass::Infrastructure, error)
    }

    /// How many tests passed.
    pub fn passed_tests(&self) -> usize {
        self.tests.iter().filter(|t| t.passed).count()
    }
}

/// A candidate for an instance: the instance's function and harness, the reference's calls,
/// the candidate module's whole text (the original's with the candidate spliced in), and the
/// function's code key (hashed), which with the rest keys the check.
pub struct Candidate<'a> {
    pub target: &'a Target,
    pub harness: &'a str,
    pub expected: &'a [ExpectedTest],
    pub module: &'a str,
    pub policy: Policy,
    pub code: &'a str,
}

/// A checked candidate: its verdict, and whether its run ran now (not from the cache).
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub verdict: Verdict,
    pub fresh: bool,
}

/// The check cache's key of a candidate.
fn key<'a>(c: &'a Candidate, exec: &Exec, sandbox: &'a SandboxKey) -> CheckKey<'a> {
    CheckKey {
        scripts: py::files_hash(py::RUNNER),
        code: c.code,
        harness: Hash::of_bytes(c.harness.as_bytes()),
        module: Hash::of_bytes(c.module.as_bytes()),
        run_timeout_seconds: exec.settings.run_timeout_seconds,
        sandbox,
    }
}

/// Checks candidates: each one's run comes from the check cache, or runs now (the missing
/// ones many to a warm worker) and is stored, unless the run says nothing about the candidate
/// (the worker gave no answer at all). Per candidate, its verdict, judged when read.
pub fn check(exec: &Exec, runtime: &Runtime, candidates: &[Candidate]) -> Result<Vec<Checked>> {
    let sandbox = exec.sandbox_key();
    let keys: Vec<CheckKey> = candidates.iter().map(|c| key(c, exec, &sandbox)).collect();
    let mut got: Vec<Option<(RawRun, bool)>> = keys
        .iter()
        .map(|k| exec.cache.get_action::<_, RawRun>(k).map(|r| (r, false)))
        .collect();
    // The same code for the same harness runs once, however many candidates are it.
    let hashes: Vec<Hash> = keys.iter().map(ActionKey::hash).collect();
    let mut first: std::collections::HashMap<Hash, usize> = Default::default();
    let mut misses: Vec<usize> = Vec::new();
    for i in (0..candidates.len()).filter(|&i| got[i].is_none()) {
        if let std::collections::hash_map::Entry::Vacant(e) = first.entry(hashes[i]) {
            e.insert(i);
            misses.push(i);
        }
    }
    if !misses.is_empty() {
        let runs = runs::run_batch(
            exec,
            runtime,
            &items(candidates, &misses),
            Mode::Candidate,
            1,
        )?;
        for (&i, mut runs) in misses.iter().zip(runs) {
            let run = runs.remove(0);
            if !run.is_error() {
                exec.cache.put_action(&keys[i], &run)?;
            }
            got[i] = Some((run, true));
        }
        for i in 0..candidates.len() {
            if got[i].is_none() {
                let (run, _) = got[first[&hashes[i]]].clone().expect("its twin ran");
                got[i] = Some((run, false));
            }
        }
    }
    Ok(candidates
        .iter()
        .zip(got)
        .map(|(c, run)| {
            let (run, fresh) = run.expect("every candidate ran");
            Checked {
                verdict: judge(c.expected, &run, c.policy),
                fresh,
            }
        })
        .collect())
}

/// Checks candidates `runs` times each, every run in a fresh process (run 0 in the tests'
/// natural order, the others shuffled): what a bug-fix task's broken state is judged on. The
/// runs of a candidate are one action (`keys::RepeatKey`), stored unless one of them says
/// nothing about the candidate (an `error` run). Run 0 is [`check`]'s run, taken from the check
/// cache when it holds it. Per candidate, a verdict per run, judged when read, and whether the
/// runs ran now.
pub fn check_repeated(
    exec: &Exec,
    runtime: &Runtime,
    candidates: &[Candidate],
    runs: u32,
) -> Result<Vec<(Vec<Verdict>, bool)>> {
    use r2e_core::keys::RepeatKey;
    let sandbox = exec.sandbox_key();
    let checks: Vec<CheckKey> = candidates.iter().map(|c| key(c, exec, &sandbox)).collect();
    let keys: Vec<RepeatKey> = checks
        .iter()
        .map(|check| RepeatKey { check, runs })
        .collect();
    let mut got: Vec<Option<(Vec<RawRun>, bool)>> = keys
        .iter()
        .map(|k| {
            exec.cache
                .get_action::<_, Vec<RawRun>>(k)
                .map(|r| (r, false))
        })
        .collect();
    // Run 0 is the one `check` makes (the same run: a fresh process, the tests in their
    // natural order): when the check cache holds it, only the later runs are made.
    let mut first: Vec<Option<RawRun>> = vec![None; candidates.len()];
    let (mut whole, mut later): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for i in (0..candidates.len()).filter(|&i| got[i].is_none()) {
        first[i] = (runs > 1)
            .then(|| exec.cache.get_action::<_, RawRun>(&checks[i]))
            .flatten()
            .filter(|r| !r.is_error());
        if first[i].is_some() {
            later.push(i);
        } else {
            whole.push(i);
        }
    }
    for (misses, from) in [(whole, 0), (later, 1)] {
        if misses.is_empty() {
            continue;
        }
        let ran = runs::run_batch_from(
            exec,
            runtime,
            &items(candidates, &misses),
            Mode::Candidate,
            runs::Runs {
                first: from,
                count: runs - from,
            },
        )?;
        for (&i, ran) in misses.iter().zip(ran) {
            let ran: Vec<RawRun> = first[i].take().into_iter().chain(ran).collect();
            if !ran.iter().any(RawRun::is_error) {
                exec.cache.put_action(&keys[i], &ran)?;
            }
            got[i] = Some((ran, true));
        }
    }
    Ok(candidates
        .iter()
        .zip(got)
        .map(|(c, ran)| {
            let (ran, fresh) = ran.expect("every candidate ran");
            let verdicts = ran.iter().map(|r| judge(c.expected, r, c.policy)).collect();
            (verdicts, fresh)
        })
        .collect())
}

/// The runs to make of the candidates at `which`.
fn items<'a>(candidates: &[Candidate<'a>], which: &[usize]) -> Vec<Item<'a>> {
    which
        .iter()
        .map(|&i| Item {
            target: candidates[i].target,
            harness: candidates[i].harness,
            candidate: Some(candidates[i].module),
        })
        .collect()
}

/// The verdict on one candidate run against the reference's calls.
pub fn judge(expected: &[ExpectedTest], run: &RawRun, policy: Policy) -> Verdict {
    let answer = match run {
        RawRun::TimedOut(seconds) => {
            return Verdict::broken(
                FailureClass::Timeout,
                format!("the candidate ran past {seconds}s"),
            );
        }
        RawRun::Died {
            how,
            limit: Some(limit),
        } => {
            return Verdict::broken(
                FailureClass::ResourceLimit,
                format!("the {limit} was hit: {how}"),
            );
        }
        RawRun::Died { how, limit: None } => {
            return Verdict::broken(
                FailureClass::Crash,
                format!("the candidate's process died: {how}"),
            );
        }
        RawRun::Error(why) => return Verdict::error(why.clone()),
        RawRun::Answered(a) => a,
    };
    if answer.status != AnswerStatus::Ok {
        let message = answer
            .error
            .clone()
            .unwrap_or_else(|| "the harness could not run".into());
        return Verdict::unrunnable(format!("the candidate does not import: {message}"));
    }
    let render = |records: &[verdict::Record]| -> Vec<String> {
        records
            .iter()
            .map(|r| verdict::render_outcome(&r.outcome, 300))
            .collect()
    };
    let tests: Vec<TestVerdict> = expected
        .iter()
        .map(|want| {
            let got = answer.tests.iter().find(|t| t.name == want.name);
            let message = match got {
                None => Some("the test did not run".to_owned()),
                Some(t) if t.outcome != TestOutcome::Pass => Some(
                    t.message
                        .clone()
                        .unwrap_or_else(|| format!("the test ended with `{}`", t.outcome)),
                ),
                Some(t) => verdict::test_differs(&want.records, &t.records, policy),
            };
            TestVerdict {
                name: want.name.clone(),
                passed: message.is_none(),
                inputs: want.records.iter().map(|r| r.call.clone()).collect(),
                expected: render(&want.records),
                actual: got.map(|t| render(&t.records)).unwrap_or_default(),
                message,
            }
        })
        .collect();
    let passed = !tests.is_empty() && tests.iter().all(|t| t.passed);
    Verdict {
        outcome: if passed {
            CheckOutcome::Pass
        } else {
            CheckOutcome::Fail
        },
        passed,
        error: None,
        failure_class: (!passed).then_some(FailureClass::Assertion),
        tests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_says_nothing_of_the_candidate_is_an_error_and_its_own_death_a_fail() {
        let v = judge(
            &[],
            &RawRun::Error("the candidate's worker died".into()),
            Policy::default(),
        );
        assert_eq!(v.outcome, CheckOutcome::Error);
        assert!(!v.passed);
        assert_eq!(v.failure_class, Some(FailureClass::Infrastructure));
        for (run, class) in [
            (RawRun::TimedOut(5), FailureClass::Timeout),
            (
                RawRun::Died {
                    how: "signal 9".into(),
                    limit: Some("memory limit (512 MiB)".into()),
                },
                FailureClass::ResourceLimit,
            ),
            (
                RawRun::Died {
                    how: "signal 11".into(),
                    limit: None,
                },
                FailureClass::Crash,
            ),
        ] {
            let v = judge(&[], &run, Policy::default());
            assert_eq!(
                (v.outcome, v.failure_class),
                (CheckOutcome::Fail, Some(class))
            );
        }
        let json = serde_json::to_value(Verdict::error("gone".into())).unwrap();
        assert_eq!(json["outcome"], "error");
        assert_eq!(json["failure_class"], "infrastructure");
    }
}
