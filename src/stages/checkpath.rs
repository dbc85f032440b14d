//! The one check path: a candidate module runs against an instance's harness in candidate mode
//! (its own process, the original module absent and its file hidden), and its calls are judged
//! against the calls the reference made when the harness was validated. `check`, validation (the
//! original spliced in as the candidate), `evaluate` and `serve` all go through here, so no two
//! of them can disagree.

use serde::{Deserialize, Serialize};

use super::candidate::Target;
use super::jobs::{Exec, Runtime};
use super::runs::{self, Item, RawRun};
use crate::error::Result;
use crate::py::Mode;
use crate::records::{ExpectedTest, FailureClass};
use crate::verdict::{self, Policy};

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

    /// How many tests passed.
    pub fn passed_tests(&self) -> usize {
        self.tests.iter().filter(|t| t.passed).count()
    }
}

/// A candidate for an instance: the instance's function and harness, the reference's calls,
/// and the candidate module's whole text (the original's with the candidate spliced in).
pub struct Candidate<'a> {
    pub target: &'a Target,
    pub harness: &'a str,
    pub expected: &'a [ExpectedTest],
    pub module: &'a str,
    pub policy: Policy,
}

/// Checks candidates, many in one warm worker: per candidate, its verdict.
pub fn check(exec: &Exec, runtime: &Runtime, candidates: &[Candidate]) -> Result<Vec<Verdict>> {
    let items: Vec<Item> = candidates
        .iter()
        .map(|c| Item {
            target: c.target,
            harness: c.harness,
            candidate: Some(c.module),
        })
        .collect();
    let runs = runs::run_batch(exec, runtime, &items, Mode::Candidate, 1)?;
    Ok(candidates
        .iter()
        .zip(runs)
        .map(|(c, runs)| judge(c.expected, &runs[0], c.policy))
        .collect())
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
        RawRun::Answered(a) => a,
    };
    if answer.status != "ok" {
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
                Some(t) if t.outcome != "pass" => Some(
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
        passed,
        error: None,
        failure_class: (!passed).then_some(FailureClass::Assertion),
        tests,
    }
}
