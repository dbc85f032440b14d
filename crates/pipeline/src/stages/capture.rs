//! Stage `generate`'s capture, for the built-in generator: one run of a repository's own test
//! files that records the arguments they pass to its candidates (`src/py/r2e_capture.py`), as
//! a cached action (`keys::CaptureKey`). The calls recorded join each candidate's call sites,
//! first: the explorer tries them as it tries the literal calls found in the source, and a
//! value no literal writes reaches the harness as the pickle it was captured as.

use std::collections::BTreeMap;

use r2e_core::config::GenerateConfig;
use r2e_core::error::Result;
use r2e_core::keys::{CaptureKey, CaptureSettings, ProjectTestsKey};
use r2e_core::records::{CallSiteArgs, CallUse, CaptureTarget};
use r2e_exec::jobs::{Exec, MESSAGE_CAP, redact, run_script};
use r2e_exec::py::{
    self, AnswerStatus, CaptureAnswer, CaptureRequest, ProjectTestsAnswer, ProjectTestsRequest,
    TestedState,
};
use r2e_exec::runs::describe_crash;
use r2e_exec::sandbox::Exit;

use super::candidate::Candidate;
pub use super::checkout::is_test_file;

/// Calls kept per function (the first ones, then calls that reach arcs the kept ones do not).
pub const PER_TARGET: u32 = 8;
/// The longest argument text kept, in bytes (a literal's text, or a pickle).
pub const MAX_BYTES: u32 = 8192;

/// The capture's settings under `[generate]`.
pub fn settings(generate: &GenerateConfig) -> CaptureSettings {
    CaptureSettings {
        per_target: PER_TARGET,
        max_bytes: MAX_BYTES,
        time_limit_seconds: generate.capture_time_limit_seconds,
    }
}

/// The function a candidate's captured calls are recorded under.
pub fn target_of(c: &Candidate) -> CaptureTarget {
    CaptureTarget {
        module: c.target.module.clone(),
        qualname: c.target.qualname.clone(),
        kind: c.target.kind,
    }
}

/// What one repository's capture gave: the calls per target, and the time it took.
pub struct Captured {
    pub calls: BTreeMap<CaptureTarget, Vec<CallSiteArgs>>,
    /// Under pytest (`None` otherwise): per target, the project's tests that called it.
    pub reached: Option<BTreeMap<CaptureTarget, Vec<String>>>,
    pub seconds: f64,
    pub fresh: bool,
}

/// Runs (or reads from the cache) the capture of the repository `candidates` belong to (all of
/// one repository and one environment), over `tests` (its test files, relative to its root).
/// `None` when there is nothing to run: no test files, or no usable environment.
pub fn capture_repo(
    exec: &Exec,
    settings: &CaptureSettings,
    tests: &[String],
    tree: &str,
    candidates: &[&Candidate],
) -> Result<Option<Captured>> {
    let Some(first) = candidates.first() else {
        return Ok(None);
    };
    let Ok(env) = first.usable_env() else {
        return Ok(None);
    };
    if tests.is_empty() {
        return Ok(None);
    }
    let mut targets: Vec<CaptureTarget> = candidates
        .iter()
        .filter(|c| !c.target.module.is_empty())
        .map(|c| target_of(c))
        .collect();
    targets.sort();
    targets.dedup();
    if targets.is_empty() {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    // The tests run in the capture's environment (what they need besides the project's own
    // dependencies), with the project layer of the functions' environment.
    let (runtime, env_lock) = env.capture_runtime(&first.target.root);
    let key = CaptureKey {
        scripts: py::files_hash(py::CAPTURE),
        tree,
        env_lock,
        project: &first.code.project,
        tests,
        targets: &targets,
        settings,
        sandbox: &exec.sandbox_key(),
    };
    let cached: Option<CaptureAnswer> = exec.cache.get_action(&key);
    let (answer, fresh) = match cached {
        Some(answer) => (answer, false),
        None => {
            let target = &first.target;
            let paths: Vec<String> = tests
                .iter()
                .map(|t| target.root.join(t).to_string_lossy().into_owned())
                .collect();
            let request = CaptureRequest {
                repo_root: &target.import_root,
                extra_roots: &target.extra_roots,
                tests: &paths,
                targets: &targets,
                per_target: settings.per_target,
                max_bytes: settings.max_bytes,
                time_limit: settings.time_limit_seconds,
            };
            // The capture stops itself (`r2e_limit.py`: CPU or idle-machine time); the job's wall
            // clock, JOB_BACKSTOP times three times as long, only stops one that hangs on a
            // machine kept that busy.
            let limits =
                exec.limits(super::generate::JOB_BACKSTOP * (3 * settings.time_limit_seconds + 20));
            let (outcome, answer, scratch) = run_script::<_, CaptureAnswer>(
                exec,
                &runtime,
                py::CAPTURE,
                &[],
                &request,
                limits,
                &target.hide,
            )?;
            let mut answer = answer.unwrap_or_else(|why| CaptureAnswer {
                status: AnswerStatus::Error,
                time_limit_hit: outcome.exit == Exit::Timeout,
                error: Some(describe_crash(exec, &outcome, &why)),
                ..CaptureAnswer::default()
            });
            // What the tests passed is untrusted and may name this machine's folders (a path
            // made from `__file__`): such a call is dropped, never written into a harness.
            let names = runtime.names(&scratch, exec.cache.root());
            for calls in &mut answer.calls {
                calls.retain(|call| !names_machine(call, &names));
                for call in calls.iter_mut() {
                    call.then.retain(|used| !use_names_machine(used, &names));
                }
            }
            for tests in &mut answer.reached {
                tests.retain(|id| !names_path(id, &names));
            }
            answer.error = answer.error.map(|e| redact(&e, &names, MESSAGE_CAP));
            // A capture the sandbox's clock stopped is not stored (a loaded machine, perhaps):
            // the script stops the tests itself before that.
            if outcome.exit != Exit::Timeout {
                exec.cache.put_action(&key, &answer)?;
            }
            (answer, true)
        }
    };
    let mut calls = BTreeMap::new();
    let mut reached = None;
    if answer.status == AnswerStatus::Ok {
        if answer.runner == "pytest" {
            let mut by_target = BTreeMap::new();
            for (target, tests) in targets.iter().zip(&answer.reached) {
                by_target.insert(target.clone(), tests.clone());
            }
            reached = Some(by_target);
        }
        for (target, found) in targets.into_iter().zip(answer.calls) {
            if !found.is_empty() {
                calls.insert(target, found);
            }
        }
    }
    Ok(Some(Captured {
        calls,
        reached,
        seconds: started.elapsed().as_secs_f64(),
        fresh,
    }))
}

/// Whether a captured call's texts name one of this machine's folders.
fn names_machine(call: &CallSiteArgs, names: &[(std::path::PathBuf, &str)]) -> bool {
    let texts = (call.args.iter())
        .chain(call.kwargs.iter().map(|(_, t)| t))
        .chain(call.receiver.iter());
    texts_name_machine(texts, names)
}

/// Whether the texts of a use of a captured call's value name one of this machine's folders.
fn use_names_machine(used: &CallUse, names: &[(std::path::PathBuf, &str)]) -> bool {
    let texts = (used.args.iter()).chain(used.kwargs.iter().map(|(_, t)| t));
    texts_name_machine(texts, names)
}

fn texts_name_machine<'a>(
    mut texts: impl Iterator<Item = &'a String>,
    names: &[(std::path::PathBuf, &str)],
) -> bool {
    texts.any(|text| names_path(text, names))
}

/// Whether `text` names one of this machine's folders.
fn names_path(text: &str, names: &[(std::path::PathBuf, &str)]) -> bool {
    names.iter().any(|(path, _)| {
        let p = path.to_string_lossy();
        p.len() > 1 && text.contains(p.as_ref())
    })
}

/// Which of the project's own tests (pytest node ids: the ones the capture saw call a
/// function) fail on each of `states` of the candidate's module (`text` `None`: the module as
/// it is; `tree`: its checkout's), in the capture's environment, from the cache or in one
/// sandboxed run of those missing (`r2e_capture.py`'s second mode, `keys::ProjectTestsKey`).
/// Per state, the failing ids, or `None` when they are not known: no usable environment or
/// pytest, or a run that did not finish (not stored: the next build runs it again).
pub fn project_tests(
    exec: &Exec,
    c: &Candidate,
    tree: &str,
    states: &[TestedState],
    time_limit_seconds: u64,
) -> Result<(Vec<Option<Vec<String>>>, bool)> {
    let mut out: Vec<Option<Vec<String>>> = vec![None; states.len()];
    let Ok(env) = c.usable_env() else {
        return Ok((out, false));
    };
    let (runtime, env_lock) = env.capture_runtime(&c.target.root);
    let sandbox = exec.sandbox_key();
    let scripts = py::files_hash(py::CAPTURE);
    let keys: Vec<ProjectTestsKey> = states
        .iter()
        .map(|state| ProjectTestsKey {
            scripts,
            tree,
            env_lock,
            project: &c.code.project,
            module: &c.target.module,
            tests: state.tests,
            state: state
                .text
                .map(|s| r2e_core::hash::Hash::of_bytes(s.as_bytes())),
            time_limit_seconds,
            sandbox: &sandbox,
        })
        .collect();
    let mut missing = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match exec.cache.get_action::<_, Vec<String>>(key) {
            Some(failed) => out[i] = Some(failed),
            None => missing.push(i),
        }
    }
    if missing.is_empty() {
        return Ok((out, false));
    }
    // The module as it is runs first whenever a broken state runs, stored or not: its time
    // sets theirs (a broken state that runs far longer is stuck, not waited out).
    if states.first().is_some_and(|s| s.text.is_none()) && missing.first() != Some(&0) {
        missing.insert(0, 0);
    }
    let target = &c.target;
    let request = ProjectTestsRequest {
        repo_root: &target.import_root,
        extra_roots: &target.extra_roots,
        module: &target.module,
        states: missing.iter().map(|&i| states[i]).collect(),
        time_limit: time_limit_seconds,
    };
    let per_state = 3 * time_limit_seconds + 20;
    let limits = exec.limits(super::generate::JOB_BACKSTOP * per_state * missing.len() as u64);
    let (_, answer, scratch) = run_script::<_, ProjectTestsAnswer>(
        exec,
        &runtime,
        py::CAPTURE,
        &[],
        &request,
        limits,
        &target.hide,
    )?;
    let Ok(answer) = answer else {
        return Ok((out, true));
    };
    if answer.status != AnswerStatus::Ok || answer.runner != "pytest" {
        return Ok((out, true));
    }
    let names = runtime.names(&scratch, exec.cache.root());
    for (&i, failed) in missing.iter().zip(answer.failed) {
        let Some(mut failed) = failed else { continue };
        // Untrusted ids: one that names this machine's folders is not kept.
        failed.retain(|id| !names_path(id, &names));
        failed.sort();
        exec.cache.put_action(&keys[i], &failed)?;
        out[i] = Some(failed);
    }
    Ok((out, true))
}

/// The candidate's call sites with the captured calls first (without repeats).
pub fn merge(captured: &[CallSiteArgs], sites: &mut Vec<CallSiteArgs>) {
    let mut merged: Vec<CallSiteArgs> = captured.to_vec();
    for site in sites.drain(..) {
        if !merged.contains(&site) {
            merged.push(site);
        }
    }
    *sites = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_files_are_told_by_folder_and_name() {
        for path in [
            "tests/test_a.py",
            "test/helpers.py",
            "pkg/testing/util.py",
            "test_top.py",
            "pkg/thing_test.py",
        ] {
            assert!(is_test_file(path), "{path}");
        }
        for path in [
            "tests/conftest.py",
            "tests/__init__.py",
            "pkg/contest.py",
            "pkg/tests.txt",
            "pkg/attestation.py",
            "testsuite/a.py",
        ] {
            assert!(!is_test_file(path), "{path}");
        }
    }

    #[test]
    fn captured_calls_come_first_without_repeats() {
        let call = |a: &str| CallSiteArgs {
            args: vec![a.to_owned()],
            kwargs: Vec::new(),
            receiver: None,
            then: Vec::new(),
        };
        let mut sites = vec![call("1"), call("2")];
        merge(&[call("3"), call("1")], &mut sites);
        assert_eq!(sites, vec![call("3"), call("1"), call("2")]);
    }

    #[test]
    fn a_call_naming_a_folder_of_this_machine_is_told() {
        let names = vec![(std::path::PathBuf::from("/home/me/repo"), "<repo>")];
        let call = CallSiteArgs {
            args: vec!["'/home/me/repo/data.txt'".into()],
            kwargs: Vec::new(),
            receiver: None,
            then: Vec::new(),
        };
        assert!(names_machine(&call, &names));
        let call = CallSiteArgs {
            args: vec!["'data.txt'".into()],
            kwargs: Vec::new(),
            receiver: Some("r2e_equiv.loads(b'/home/me/repo/x')".into()),
            then: Vec::new(),
        };
        assert!(names_machine(&call, &names));
        let call = CallSiteArgs {
            args: vec!["'data.txt'".into()],
            kwargs: vec![("k".into(), "1".into())],
            receiver: Some("r2e_equiv.loads(b'x')".into()),
            then: vec![CallUse {
                method: "parse".into(),
                args: vec!["'/home/me/repo/data.txt'".into()],
                kwargs: Vec::new(),
            }],
        };
        assert!(!names_machine(&call, &names));
        // A use of the call's value that names one is told apart (`capture_repo` drops it alone).
        assert!(use_names_machine(&call.then[0], &names));
        let clean = CallUse {
            method: "parse".into(),
            args: vec!["'data.txt'".into()],
            kwargs: vec![("start".into(), "'/tmp/x'".into())],
        };
        assert!(!use_names_machine(&clean, &names));
    }
}
