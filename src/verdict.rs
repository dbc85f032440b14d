//! `r2e-verdict`: the check path's two steps for a verifier inside an environment image (a
//! Harbor task's `tests/test.sh`), around one run of the runner that the script makes itself.
//!
//!     r2e-verdict prepare TASK.json AGENT_FILE HARNESS WORK
//!     r2e-verdict judge TASK.json (RUN.json | --timed-out SECONDS | --died HOW)
//!     r2e-verdict reward VERDICT.json
//!
//! `prepare` writes WORK/candidate.py (the module with the function from AGENT_FILE spliced
//! in, or for a bug-fix task AGENT_FILE whole: `r2e_exec::verifier::prepare`) and WORK/request.json (the runner's request, candidate
//! mode), exit 0; or, when the candidate cannot run at all, prints its verdict, exit 1.
//! `judge` prints the verdict on the runner's answer (`r2e_exec::checkpath::judge`; a bug-fix
//! task's judged on its FAIL_TO_PASS and PASS_TO_PASS lists): exit 0 `pass`, 1 `fail`, 3
//! `error`. `reward` prints Harbor's `reward.json` of a verdict: numbers
//! only (`reward`, `tests`, `tests_passed`). Bad usage or an unreadable file: exit 2.

use std::path::Path;
use std::process::ExitCode;

use r2e_core::records::CheckOutcome;
use r2e_exec::checkpath::{Verdict, judge};
use r2e_exec::runs::RawRun;
use r2e_exec::verifier::{VERIFIER_FORMAT, VerifierTask, prepare, request};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("r2e-verdict: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[&str]) -> Result<ExitCode, String> {
    match args {
        ["prepare", task, agent, harness, work] => {
            let task = read_task(task)?;
            let agent = std::fs::read_to_string(agent).unwrap_or_default();
            match prepare(&task, &agent) {
                Ok(module) => {
                    let work = Path::new(work);
                    let candidate = work.join("candidate.py");
                    write(&candidate, module.as_bytes())?;
                    let repo = Path::new(r2e_exec::image::IMAGE_REPO);
                    let req = request(&task, repo, Path::new(harness), &candidate);
                    write(&work.join("request.json"), req.to_string().as_bytes())?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(verdict) => print_verdict(&verdict),
            }
        }
        ["judge", task, "--timed-out", seconds] => {
            let task = read_task(task)?;
            let seconds = seconds
                .parse()
                .map_err(|_| format!("`{seconds}` is not a number of seconds"))?;
            judged(&task, &RawRun::TimedOut(seconds))
        }
        ["judge", task, "--died", how] => {
            let task = read_task(task)?;
            let run = RawRun::Died {
                how: (*how).to_owned(),
                limit: None,
            };
            judged(&task, &run)
        }
        ["judge", task, answer] => {
            let task = read_task(task)?;
            let run = match std::fs::read(answer) {
                Ok(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(answer) => RawRun::Answered(answer),
                    Err(e) => RawRun::Error(format!("the runner's answer does not read: {e}")),
                },
                Err(e) => RawRun::Error(format!("the runner wrote no answer: {e}")),
            };
            judged(&task, &run)
        }
        ["reward", verdict] => {
            let bytes = std::fs::read(verdict).map_err(|e| format!("{verdict}: {e}"))?;
            let v: Verdict =
                serde_json::from_slice(&bytes).map_err(|e| format!("{verdict}: {e}"))?;
            let reward = serde_json::json!({
                "reward": u8::from(v.passed),
                "tests": v.tests.len(),
                "tests_passed": v.passed_tests(),
            });
            println!("{reward}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(
            "usage: r2e-verdict prepare TASK AGENT_FILE HARNESS WORK | judge TASK (RUN | \
             --timed-out SECONDS | --died HOW) | reward VERDICT"
                .into(),
        ),
    }
}

fn read_task(path: &str) -> Result<VerifierTask, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let task: VerifierTask = serde_json::from_slice(&bytes).map_err(|e| format!("{path}: {e}"))?;
    if task.format != VERIFIER_FORMAT {
        return Err(format!(
            "{path}: format `{}`, not `{VERIFIER_FORMAT}`",
            task.format
        ));
    }
    Ok(task)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Prints the verdict; its exit code says its outcome.
fn print_verdict(v: &Verdict) -> Result<ExitCode, String> {
    println!("{}", serde_json::to_string(v).map_err(|e| e.to_string())?);
    Ok(exit_of(v))
}

/// The verdict on `run` (`checkpath::judge`), a bug-fix task's judged on its lists
/// (`stages::bugfix::judge`, as `r2e check --patch` and `r2e serve` judge it), printed.
fn judged(task: &VerifierTask, run: &RawRun) -> Result<ExitCode, String> {
    let verdict = judge(&task.expected, run, task.policy);
    let Some(bugfix) = &task.bugfix else {
        return print_verdict(&verdict);
    };
    let fixed = r2e_pipeline::stages::bugfix::judge(bugfix, verdict);
    let mut json = serde_json::to_value(&fixed.verdict).map_err(|e| e.to_string())?;
    json["fail_to_pass_failing"] = fixed.fail_to_pass_failing.into();
    json["pass_to_pass_failing"] = fixed.pass_to_pass_failing.into();
    println!("{json}");
    Ok(exit_of(&fixed.verdict))
}

fn exit_of(v: &Verdict) -> ExitCode {
    ExitCode::from(match v.outcome {
        CheckOutcome::Pass => 0,
        CheckOutcome::Fail => 1,
        CheckOutcome::Error => 3,
    })
}
