//! `r2e check ID --candidate FILE` and `r2e check --candidates FILE`: candidates checked against
//! a built dataset through the build's [`Bench`], and the reports they print; `r2e check TASK
//! --patch FILE`: a fix of a bug-fix task, applied to its broken state and checked the same way.

use std::path::Path;

use serde::{Deserialize, Serialize};

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::{BugfixTask, CheckOutcome, FailureClass, OutputFile, read_jsonl};
use r2e_exec::checkpath::{TestVerdict, Verdict};
use r2e_exec::services::Services;
use r2e_pipeline::bench::Bench;

/// What `check` found, as `--json` prints it: the verdict, and per test the calls, what the
/// reference did and what the candidate did.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub id: String,
    /// The candidate's label, from a `--candidates` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Whether the candidate's run came from the check cache (or from an identical candidate
    /// run earlier in the same `--candidates` file): `false` when it ran now; absent when no
    /// run was needed (the candidate did not splice, the instance cannot be checked here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<bool>,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// One line of a `--candidates` file: an instance, a candidate's text, and an optional label
/// that its verdict line repeats.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CandidateLine {
    pub id: String,
    pub candidate: String,
    #[serde(default)]
    pub label: Option<String>,
}

/// Checks a candidate file for one instance.
pub fn check_with(cfg: &Config, id: &str, candidate: &Path, services: &Services) -> Result<Report> {
    let text = std::fs::read_to_string(candidate).map_err(|e| {
        Error::input(format!(
            "cannot read the candidate `{}`: {e}",
            candidate.display()
        ))
    })?;
    let bench = Bench::open(cfg, services)?;
    let checked = match bench.prepare(id, &text) {
        Ok(Ok(p)) => bench.check(&[p]).map(|mut c| {
            let c = c.remove(0);
            (c.verdict, Some(!c.fresh))
        }),
        // The candidate did not splice: judged without a run.
        Ok(Err(verdict)) => Ok((verdict, None)),
        Err(e) => Err(e),
    };
    let (verdict, cached) = match checked {
        Ok(v) => v,
        // The instance cannot be checked here (its environment is gone, its repository
        // changed): not the candidate's doing.
        Err(Error::Unrunnable(why)) => (Verdict::error(why), None),
        Err(e) => return Err(e),
    };
    Ok(Report {
        id: id.to_owned(),
        label: None,
        cached,
        verdict,
    })
}

/// The exit status of checked candidates: 0 when all pass, 3 when a check could not judge one
/// (outcome `error`), else 1 (one failed).
pub fn exit_status<'a>(reports: impl IntoIterator<Item = &'a Report>) -> u8 {
    let mut status = 0;
    for r in reports {
        match r.verdict.outcome {
            CheckOutcome::Pass => {}
            CheckOutcome::Fail => status = status.max(1),
            CheckOutcome::Error => status = 3,
        }
    }
    status
}

/// Checks every candidate of a `--candidates` file (JSON lines of [`CandidateLine`]), all in
/// one bench: per line, its report, in the file's order.
pub fn check_file(cfg: &Config, file: &Path, services: &Services) -> Result<Vec<Report>> {
    let lines: Vec<CandidateLine> = read_jsonl(file)?.ok_or_else(|| {
        Error::input(format!(
            "the candidates file `{}` does not exist",
            file.display()
        ))
    })?;
    let bench = Bench::open(cfg, services)?;
    let mut verdicts: Vec<Option<(Verdict, Option<bool>)>> = vec![None; lines.len()];
    let mut ready = Vec::new();
    let mut slots = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match bench.prepare(&line.id, &line.candidate) {
            Ok(Ok(p)) => {
                ready.push(p);
                slots.push(i);
            }
            Ok(Err(v)) => verdicts[i] = Some((v, None)),
            Err(Error::Input(m)) => {
                return Err(Error::input(format!("{}:{}: {m}", file.display(), i + 1)));
            }
            Err(Error::Unrunnable(why)) => verdicts[i] = Some((Verdict::error(why), None)),
            Err(e) => return Err(e),
        }
    }
    for (i, c) in slots.into_iter().zip(bench.check(&ready)?) {
        verdicts[i] = Some((c.verdict, Some(!c.fresh)));
    }
    Ok(lines
        .into_iter()
        .zip(verdicts)
        .map(|(line, v)| {
            let (verdict, cached) = v.expect("every candidate has a verdict");
            Report {
                id: line.id,
                label: line.label,
                cached,
                verdict,
            }
        })
        .collect())
}

/// Text for people: the verdict, and for each failing test its message, then per call its
/// inputs, what the reference did (`expected`) and what the candidate did (`actual`).
pub fn report_text(r: &Report) -> String {
    let v = &r.verdict;
    if v.passed {
        return format!("PASS {}: all {} tests pass\n", r.id, v.tests.len());
    }
    if v.outcome == CheckOutcome::Error {
        return format!(
            "ERROR {}: not judged ({}): {}\n",
            r.id,
            FailureClass::Infrastructure,
            v.error.as_deref().unwrap_or("the check could not run")
        );
    }
    let mut out = format!("FAIL {}", r.id);
    if let Some(e) = &v.error {
        out.push_str(&format!(": {e}\n"));
        return out;
    }
    let failed: Vec<&TestVerdict> = v.tests.iter().filter(|t| !t.passed).collect();
    out.push_str(&format!(
        ": {} of {} tests fail\n",
        failed.len(),
        v.tests.len()
    ));
    for t in failed {
        out.push_str(&format!("- {}:\n", t.name));
        if let Some(m) = &t.message {
            for line in m.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
        // Per call: its inputs and both outcomes; `-` where the candidate made no such call.
        for (i, call) in t.inputs.iter().enumerate() {
            let outcome = |v: &[String]| v.get(i).map_or("-", |s| s.as_str()).to_owned();
            out.push_str(&format!("    call      {call}\n"));
            out.push_str(&format!("    expected  {}\n", outcome(&t.expected)));
            out.push_str(&format!("    actual    {}\n", outcome(&t.actual)));
        }
    }
    out
}

/// What `r2e check TASK --patch FILE` found, as `--json` prints it: the check of the patched
/// broken state (`outcome`, `passed`, `tests`), and the task's hidden tests that fail.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PatchReport {
    #[serde(flatten)]
    pub check: Report,
    /// FAIL_TO_PASS tests the patched state still fails.
    pub fail_to_pass_failing: Vec<String>,
    /// PASS_TO_PASS tests the patch broke.
    pub pass_to_pass_failing: Vec<String>,
}

/// Applies `patch` to bug-fix task `id`'s broken state and checks it: `pass` when every
/// FAIL_TO_PASS and PASS_TO_PASS test passes. The broken state is the instance's module with
/// the task's `bug_patch` applied; the patched module runs through the one check path, as any
/// candidate. An empty patch changes nothing. A diff that is not one, or that touches another
/// file or a path outside the repository, is bad input (the line named); one that does not
/// apply is the fix's failure.
pub fn check_patch(
    cfg: &Config,
    id: &str,
    patch: &Path,
    services: &Services,
) -> Result<PatchReport> {
    use r2e_pipeline::stages::bugfix::{self, PatchError};
    let tasks_file = r2e_core::records::resolve_output(&cfg.output).join(OutputFile::Bugfix.name());
    let tasks: Vec<BugfixTask> = read_jsonl(&tasks_file)?.ok_or_else(|| {
        Error::input(format!(
            "`{}` does not exist: build the pipeline with `[bugfix]` first",
            tasks_file.display()
        ))
    })?;
    let task = tasks
        .into_iter()
        .find(|t| t.instance_id == id)
        .ok_or_else(|| {
            Error::input(format!(
                "`{id}` is not a task of `{}`",
                tasks_file.display()
            ))
        })?;
    let text = std::fs::read_to_string(patch)
        .map_err(|e| Error::input(format!("cannot read the patch `{}`: {e}", patch.display())))?;
    let bench = Bench::open(cfg, services)?;
    let ix = bench.index(&task.instance)?;
    let file = &task.locations[0].file;
    let judged = bench.broken_module(ix, &task).and_then(|broken| {
        // An empty patch changes nothing: the broken state is judged as it is.
        let fixed = if text.trim().is_empty() {
            Ok(broken)
        } else {
            bugfix::apply_patch(file, &broken, &text)
        };
        match fixed {
            Ok(fixed) => {
                let prepared = bench.prepare_module(ix, fixed)?;
                let c = bench.check(&[prepared])?.remove(0);
                Ok((c.verdict, Some(!c.fresh)))
            }
            Err(PatchError::Malformed { line, why }) => Err(Error::input(format!(
                "{}:{line}: not a unified diff: {why}",
                patch.display()
            ))),
            Err(PatchError::Refused(why)) => {
                Err(Error::input(format!("{}: refused: {why}", patch.display())))
            }
            Err(PatchError::DoesNotApply(why)) => Ok((
                Verdict::unrunnable(format!(
                    "the patch does not apply to the broken state: {why}"
                )),
                None,
            )),
        }
    });
    let (verdict, cached) = match judged {
        Ok(v) => v,
        Err(Error::Unrunnable(why)) => (Verdict::error(why), None),
        Err(e) => return Err(e),
    };
    Ok(judge_task(&task, id, verdict, cached))
}

/// The task's verdict from the check of its patched state: the harness's tests by their task
/// ids; `pass` when no FAIL_TO_PASS or PASS_TO_PASS test fails (a test in neither list, flaky
/// on the broken state, does not count).
pub fn judge_task(
    task: &BugfixTask,
    id: &str,
    verdict: Verdict,
    cached: Option<bool>,
) -> PatchReport {
    let judged = r2e_pipeline::stages::bugfix::judge(task, verdict);
    PatchReport {
        check: Report {
            id: id.to_owned(),
            label: None,
            cached,
            verdict: judged.verdict,
        },
        fail_to_pass_failing: judged.fail_to_pass_failing,
        pass_to_pass_failing: judged.pass_to_pass_failing,
    }
}

/// Text for people: the check's report, then the task's hidden tests that fail, by list.
pub fn patch_text(r: &PatchReport) -> String {
    let mut out = report_text(&r.check);
    for (list, names) in [
        ("FAIL_TO_PASS", &r.fail_to_pass_failing),
        ("PASS_TO_PASS", &r.pass_to_pass_failing),
    ] {
        if !names.is_empty() {
            out.push_str(&format!("{list} failing:\n"));
            for n in names {
                out.push_str(&format!("  {n}\n"));
            }
        }
    }
    out
}
