//! The check path for a verifier that runs where r2e does not: inside an instance's
//! environment image, after an agent edited the repository there (a Harbor task's
//! `tests/test.sh`, written by `r2e export --format harbor`). The verifier program
//! (`r2e-verdict`) reads a [`VerifierTask`] and does the check path's two steps around one run
//! of the one runner (`r2e_runner.py`, candidate mode):
//!
//! - [`prepare`]: the candidate module, made as `r2e check` and `r2e serve` make it (only the
//!   instance's function is taken from the agent's file and spliced into the module as the
//!   dataset's commit has it), and the runner's request;
//! - [`crate::checkpath::judge`]: the verdict on the run against the reference's recorded calls,
//!   under the instance's policy.
//!
//! Nothing here runs code: the image is the sandbox, and the verifier runs the runner itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkpath::Verdict;
use crate::py::{Mode, RunRequest};
use r2e_core::records::{BugfixTask, ExpectedTest};
use r2e_core::verdict::Policy;

/// [`VerifierTask::format`].
pub const VERIFIER_FORMAT: &str = "r2e-verifier/1";

/// What the in-image verifier reads: one instance's check, self-contained. Written by the
/// export, read by `r2e-verdict`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierTask {
    pub format: String,
    pub instance_id: String,
    /// The module's file, relative to the repository's root, and its import name.
    pub path: String,
    pub module: String,
    pub qualname: String,
    /// The function's definition: its index in the module's summary, and its lines.
    pub def: usize,
    pub start_line: u32,
    pub end_line: u32,
    /// The module as the dataset's commit has it: what the candidate is spliced into.
    pub original: String,
    /// The import roots, relative to the repository's root (`""`: the root itself).
    pub import_root: String,
    pub extra_roots: Vec<String>,
    /// The reference's calls in each test, and how a candidate's are compared with them.
    pub expected: Vec<ExpectedTest>,
    pub policy: Policy,
    /// Seconds the harness may run on the candidate (`[sandbox] run_timeout_seconds`).
    pub timeout_seconds: u64,
    /// A bug-fix task: the agent's file is the candidate module whole, and the verdict is the
    /// task's (its FAIL_TO_PASS and PASS_TO_PASS tests). `None`: an implementation instance.
    #[serde(default)]
    pub bugfix: Option<BugfixTask>,
}

/// The candidate module for `task` from the agent's file (`agent`): for an implementation
/// instance, the module as the dataset's commit has it with the function taken from `agent`
/// (the verdict instead when it cannot run at all: it does not compile, it defines no such
/// function); for a bug-fix task, the agent's file whole, as `r2e serve` checks a bug-fix
/// session's file.
pub fn prepare(task: &VerifierTask, agent: &str) -> std::result::Result<String, Verdict> {
    if task.bugfix.is_some() {
        return Ok(agent.to_owned());
    }
    let summary = r2e_python::extract::summarize(&task.original).map_err(|e| {
        Verdict::error(format!(
            "the instance's module does not parse any more: {e:?}"
        ))
    })?;
    if summary
        .interface
        .defs
        .get(task.def)
        .is_none_or(|d| d.qualname != task.qualname)
    {
        return Err(Verdict::error(format!(
            "`{}` is not definition {} of its module",
            task.qualname, task.def
        )));
    }
    crate::splice::splice(&task.original, &summary, task.def, agent, &task.qualname)
        .map_err(Verdict::unrunnable)
}

/// The runner's request for the candidate at `candidate` (its file) and the harness at
/// `harness`, the repository being at `repo`.
pub fn request(
    task: &VerifierTask,
    repo: &Path,
    harness: &Path,
    candidate: &Path,
) -> serde_json::Value {
    let under = |rel: &str| -> PathBuf {
        if rel.is_empty() {
            repo.to_path_buf()
        } else {
            repo.join(rel)
        }
    };
    let extra: Vec<PathBuf> = task.extra_roots.iter().map(|r| under(r)).collect();
    let source = repo.join(&task.path);
    let root = under(&task.import_root);
    let harness = harness.to_string_lossy().into_owned();
    let candidate = candidate.to_string_lossy().into_owned();
    let request = RunRequest {
        repo_root: &root,
        extra_roots: &extra,
        module: &task.module,
        qualname: &task.qualname,
        harness_file: &harness,
        source_file: &source,
        start_line: task.start_line,
        end_line: task.end_line,
        candidate_file: Some(&candidate),
        coverage: false,
        hide: &[],
        mode: Mode::Candidate,
    };
    serde_json::to_value(&request).expect("a request serializes")
}

/// `path` relative to `root` as a verifier task names it (`""` for the root itself).
pub fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}
