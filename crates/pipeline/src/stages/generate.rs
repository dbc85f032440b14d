//! Stage `generate` with the built-in generator: the coverage-guided input explorer
//! (`src/py/r2e_explore.py`), run in the sandbox for one function, as a cached action
//! (`keys::GenerateKey`).

use r2e_core::error::Result;
use r2e_core::keys::{CodeKey, GenerateSettings};
use r2e_exec::jobs::{Exec, MESSAGE_CAP, Runtime, redact, run_script};
use r2e_exec::py::AnswerStatus;
use r2e_exec::py::{self, ExploreAnswer, ExploreRequest};
use r2e_exec::runs::describe_crash;
use r2e_exec::sandbox::Exit;
use r2e_exec::target::Target;

/// How many times an in-sandbox script's own backstop (on its idle-machine clock) the job's
/// wall clock allows: a machine that many times oversubscribed still lets the script stop
/// itself, as an idle one would.
pub const JOB_BACKSTOP: u64 = 4;

/// The explorer's harness for one function, and whether it ran now. A sandbox timeout (a loaded
/// machine, perhaps) is not stored: `transient` says so, and the next build runs it again.
pub struct Explored {
    pub answer: ExploreAnswer,
    pub fresh: bool,
    pub transient: bool,
}

/// Stage `generate` for one function: from the action cache, or by running the explorer.
/// `keyed` holds the explorer's settings, for `exec`'s sandbox (`stages::keyed::explorer`).
pub fn generate(
    exec: &Exec,
    runtime: &Runtime,
    target: &Target,
    code: &CodeKey,
    keyed: &GenerateSettings,
) -> Result<Explored> {
    let key = keyed.key(code, &target.call_sites);
    let settings = &keyed.explorer;
    if let Some(answer) = exec.cache.get_action(&key) {
        return Ok(Explored {
            answer,
            fresh: false,
            transient: false,
        });
    }
    let request = ExploreRequest {
        repo_root: &target.import_root,
        extra_roots: &target.extra_roots,
        module: &target.module,
        qualname: &target.qualname,
        kind: target.kind,
        call_sites: &target.call_sites,
        budget: settings.budget,
        plateau: settings.plateau,
        seed: settings.seed,
        max_tests: settings.max_tests,
        per_call_timeout: settings.per_call_timeout_ms as f64 / 1000.0,
        time_limit: settings.time_limit_seconds,
    };
    // The explorer stops itself (`r2e_limit.py`: CPU or idle-machine time); the job's wall
    // clock, JOB_BACKSTOP times three times as long, only stops one that hangs on a machine
    // kept that busy.
    let limits = exec.limits(JOB_BACKSTOP * (3 * settings.time_limit_seconds + 10));
    let (outcome, answer, scratch) =
        run_script::<_, ExploreAnswer>(exec, runtime, py::EXPLORER, &[], &request, limits, &[])?;
    let mut answer = answer.unwrap_or_else(|why| ExploreAnswer {
        status: AnswerStatus::Error,
        time_limit_hit: outcome.exit == Exit::Timeout,
        error: Some(describe_crash(exec, &outcome, &why)),
        ..ExploreAnswer::default()
    });
    // What the code wrote is fit for an output: no path of this machine, a bounded length.
    let names = runtime.names(&scratch, exec.cache.root());
    answer.error = answer.error.map(|e| redact(&e, &names, MESSAGE_CAP));
    let transient = outcome.exit == Exit::Timeout;
    if !transient {
        exec.cache.put_action(&key, &answer)?;
    }
    Ok(Explored {
        answer,
        fresh: true,
        transient,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use r2e_core::cache::Cache;
    use r2e_core::config::SandboxConfig;
    use r2e_core::hash::Hash;
    use r2e_core::records::FunctionKind;
    use r2e_exec::sandbox::fake::{FakeSandbox, outcome};

    #[test]
    fn explorer_answers_are_cached_and_timeouts_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let settings = SandboxConfig::default();
        let target = Target::new(Path::new("/repo"), "m.py", "m".into(), "f", (1, 3));
        let code = CodeKey {
            module: "m".into(),
            qualname: "f".into(),
            kind: FunctionKind::Function,
            code: Hash::of_bytes(b"f"),
            slice: Vec::new(),
            import_time: Hash::of_bytes(b""),
            env_lock: String::new(),
            project: String::new(),
        };
        let explorer = |sandbox| GenerateSettings {
            explorer: r2e_core::keys::ExplorerSettings {
                budget: 10,
                plateau: 300,
                seed: 0,
                max_tests: 3,
                per_call_timeout_ms: 100,
                time_limit_seconds: 5,
            },
            ..crate::stages::keyed::explorer(&Default::default(), sandbox, &settings)
        };
        // An explorer that cannot import the module answers so.
        let failing = FakeSandbox::new(|job| {
            let answer = ExploreAnswer {
                status: AnswerStatus::Error,
                error: Some("ModuleNotFoundError: No module named 'm'".into()),
                ..ExploreAnswer::default()
            };
            std::fs::write(
                job.args.last().unwrap(),
                serde_json::to_vec(&answer).unwrap(),
            )
            .unwrap();
            outcome(Exit::Code(0))
        });
        let exec = Exec {
            cache: &cache,
            sandbox: &failing,
            settings: &settings,
            warm: None,
        };
        let first = generate(
            &exec,
            &r2e_exec::jobs::Runtime::for_tests(),
            &target,
            &code,
            &explorer(&failing),
        )
        .unwrap();
        assert!(first.fresh && !first.transient);
        assert_eq!(
            crate::stages::validate::classify_message(first.answer.error.as_deref().unwrap()),
            r2e_core::records::FailureClass::ImportEnv
        );
        let again = generate(
            &exec,
            &r2e_exec::jobs::Runtime::for_tests(),
            &target,
            &code,
            &explorer(&failing),
        )
        .unwrap();
        assert!(!again.fresh);
        assert_eq!(failing.jobs().len(), 1);
        // The sandbox's wall clock: a transient failure, run again next time.
        let slow = FakeSandbox::new(|_| outcome(Exit::Timeout));
        let exec = Exec {
            sandbox: &slow,
            ..exec
        };
        let other = CodeKey {
            code: Hash::of_bytes(b"g"),
            ..code
        };
        for _ in 0..2 {
            let t = generate(
                &exec,
                &r2e_exec::jobs::Runtime::for_tests(),
                &target,
                &other,
                &explorer(&slow),
            )
            .unwrap();
            assert!(t.fresh && t.transient && t.answer.time_limit_hit);
        }
        assert_eq!(slow.jobs().len(), 2);
    }
}
