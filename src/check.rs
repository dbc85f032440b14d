//! `r2e check ID --candidate FILE` and `r2e check --candidates FILE`: candidates checked against
//! a built dataset through the build's [`Bench`], and the reports they print.

use std::path::Path;

use serde::{Deserialize, Serialize};

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::{CheckOutcome, FailureClass, read_jsonl};
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
