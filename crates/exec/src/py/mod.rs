//! The Python that runs in the sandbox, embedded in the binary, and the typed protocol of its
//! JSON files (requests in, answers out). The scripts themselves are real, tested code in this
//! folder (`src/py/*.py`, tested by `src/py/tests`); each action that runs them hashes the
//! exact files it writes into its key.

use r2e_core::records::CallSiteArgs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use r2e_core::hash::Hash;

/// The pinned coverage.py every environment (and the docker backend's base image) gets, so
/// that coverage means the same everywhere.
pub const COVERAGE: &str = "coverage==7.17.3";

/// The equivalence helper every harness imports.
pub const EQUIV: (&str, &str) = ("r2e_equiv.py", include_str!("r2e_equiv.py"));
/// The structural snapshots of values (the runner records them; the explorer identifies
/// outcomes by them).
pub const SNAPSHOT: (&str, &str) = ("r2e_snapshot.py", include_str!("r2e_snapshot.py"));
/// The one rule for the limit of a call of code under test (CPU time or idle-machine time,
/// whichever is larger) and the end of every process it started: the explorer, the capture
/// and the runner each use it.
pub const LIMIT: (&str, &str) = ("r2e_limit.py", include_str!("r2e_limit.py"));
/// The re-execution under a fixed hash seed that the explorer and the capture start with.
pub const REEXEC: (&str, &str) = ("r2e_reexec.py", include_str!("r2e_reexec.py"));

/// The built-in explorer: its entry script first, then its package (`r2e_explorer/`, one module
/// per concern), the equivalence helper and the snapshots.
pub const EXPLORER: &[(&str, &str)] = &[
    ("r2e_explore.py", include_str!("r2e_explore.py")),
    (
        "r2e_explorer/__init__.py",
        include_str!("r2e_explorer/__init__.py"),
    ),
    (
        "r2e_explorer/specs.py",
        include_str!("r2e_explorer/specs.py"),
    ),
    (
        "r2e_explorer/tracing.py",
        include_str!("r2e_explorer/tracing.py"),
    ),
    (
        "r2e_explorer/regexgen.py",
        include_str!("r2e_explorer/regexgen.py"),
    ),
    (
        "r2e_explorer/static.py",
        include_str!("r2e_explorer/static.py"),
    ),
    (
        "r2e_explorer/pools.py",
        include_str!("r2e_explorer/pools.py"),
    ),
    (
        "r2e_explorer/factories.py",
        include_str!("r2e_explorer/factories.py"),
    ),
    (
        "r2e_explorer/inputs.py",
        include_str!("r2e_explorer/inputs.py"),
    ),
    (
        "r2e_explorer/search.py",
        include_str!("r2e_explorer/search.py"),
    ),
    (
        "r2e_explorer/mutants.py",
        include_str!("r2e_explorer/mutants.py"),
    ),
    (
        "r2e_explorer/select.py",
        include_str!("r2e_explorer/select.py"),
    ),
    (
        "r2e_explorer/render.py",
        include_str!("r2e_explorer/render.py"),
    ),
    EQUIV,
    SNAPSHOT,
    LIMIT,
    REEXEC,
];

/// The capture of the arguments a repository's own tests pass to its candidates: the script
/// first, then the equivalence helper (whose `loads` and `rebuild_match` captured values name)
/// and the snapshots it imports.
pub const CAPTURE: &[(&str, &str)] = &[
    ("r2e_capture.py", include_str!("r2e_capture.py")),
    EQUIV,
    SNAPSHOT,
    LIMIT,
    REEXEC,
];

/// The harness runner and the warm worker that runs it many times.
pub const RUNNER: &[(&str, &str)] = &[
    ("r2e_runner.py", include_str!("r2e_runner.py")),
    ("r2e_batch.py", include_str!("r2e_batch.py")),
    EQUIV,
    SNAPSHOT,
    LIMIT,
    REEXEC,
];

/// The verifier a Harbor task's `tests/test.sh` holds (`r2e_verify.py`): it runs `RUNNER`'s
/// runner inside an environment image, between `r2e-verdict`'s steps.
pub const VERIFY: &str = include_str!("r2e_verify.py");

/// The runner's files with the warm worker (`r2e_batch.py`) first: what a worker job writes
/// into its scratch folder and runs.
pub fn batch_worker() -> Vec<(&'static str, &'static str)> {
    let mut files = RUNNER.to_vec();
    files.rotate_left(1);
    files
}

/// A hash of a set of embedded files (names and texts), for action keys.
pub fn files_hash(files: &[(&str, &str)]) -> Hash {
    let mut h = blake3::Hasher::new();
    for (name, text) in files {
        h.update(name.as_bytes());
        h.update(&[0]);
        h.update(&(text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    Hash(*h.finalize().as_bytes())
}

/// What `r2e_explore.py` reads.
#[derive(Clone, Debug, Serialize)]
pub struct ExploreRequest<'a> {
    pub repo_root: &'a std::path::Path,
    pub extra_roots: &'a [PathBuf],
    pub module: &'a str,
    pub qualname: &'a str,
    pub kind: r2e_core::records::FunctionKind,
    pub call_sites: &'a [CallSiteArgs],
    pub budget: u32,
    /// The stopping rule (`[generate] plateau`).
    pub plateau: u32,
    pub seed: u64,
    pub max_tests: u32,
    /// Seconds one call may take.
    pub per_call_timeout: f64,
    pub time_limit: u64,
}

/// What became of a script's run, as the embedded Python says in `status`. Read and written as
/// its name (in JSON and in the cache's entries alike, as when it was a string); a name the
/// protocol does not know reads as `error`, as any status but `ok` always counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AnswerStatus {
    /// The script did its work.
    Ok,
    /// It could not (the harness did not import, the explorer failed); an absent status too.
    #[default]
    Error,
    /// The warm worker's child ran past its time limit.
    Timeout,
    /// The warm worker's child died without answering.
    Crash,
    /// The warm worker's child could not hide the files it was to hide, and ran nothing.
    Unhidden,
}

impl AnswerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerStatus::Ok => "ok",
            AnswerStatus::Error => "error",
            AnswerStatus::Timeout => "timeout",
            AnswerStatus::Crash => "crash",
            AnswerStatus::Unhidden => "unhidden",
        }
    }
}

impl From<String> for AnswerStatus {
    fn from(name: String) -> Self {
        match name.as_str() {
            "ok" => AnswerStatus::Ok,
            "timeout" => AnswerStatus::Timeout,
            "crash" => AnswerStatus::Crash,
            "unhidden" => AnswerStatus::Unhidden,
            _ => AnswerStatus::Error,
        }
    }
}

impl From<AnswerStatus> for String {
    fn from(status: AnswerStatus) -> String {
        status.as_str().to_owned()
    }
}

/// How one test of a harness ended, as the runner says in `outcome`; read and written as its
/// name. A name the protocol does not know reads as `error`, as any outcome but `pass` always
/// counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum TestOutcome {
    /// Its assertions held.
    Pass,
    /// An assertion failed.
    Fail,
    /// The harness's own code raised; an absent outcome too.
    #[default]
    Error,
}

impl TestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TestOutcome::Pass => "pass",
            TestOutcome::Fail => "fail",
            TestOutcome::Error => "error",
        }
    }
}

impl std::fmt::Display for TestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for TestOutcome {
    fn from(name: String) -> Self {
        match name.as_str() {
            "pass" => TestOutcome::Pass,
            "fail" => TestOutcome::Fail,
            _ => TestOutcome::Error,
        }
    }
}

impl From<TestOutcome> for String {
    fn from(outcome: TestOutcome) -> String {
        outcome.as_str().to_owned()
    }
}

/// What `r2e_capture.py` reads: a repository's test files (relative to `repo_root`) to run and
/// the functions whose calls to record.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureRequest<'a> {
    pub repo_root: &'a std::path::Path,
    pub extra_roots: &'a [PathBuf],
    pub tests: &'a [String],
    pub targets: &'a [r2e_core::records::CaptureTarget],
    /// Calls kept per target (distinct argument texts).
    pub per_target: u32,
    /// The longest argument text kept, in bytes (a literal, or a pickle's bytes).
    pub max_bytes: u32,
    /// Seconds the test suite may run; the calls recorded until then are kept.
    pub time_limit: u64,
}

/// What `r2e_capture.py` reads in its second mode: the project's tests (pytest node ids) run on
/// states of one module, each state's text served as the module's import.
#[derive(Clone, Debug, Serialize)]
pub struct ProjectTestsRequest<'a> {
    pub repo_root: &'a std::path::Path,
    pub extra_roots: &'a [PathBuf],
    pub module: &'a str,
    pub states: Vec<TestedState<'a>>,
    /// Seconds one state's tests may run.
    pub time_limit: u64,
}

/// One state of a module and the tests run on it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TestedState<'a> {
    /// The module's text; `None`: the file as it is.
    pub text: Option<&'a str>,
    /// The tests (pytest node ids), in order.
    pub tests: &'a [String],
}

/// What `r2e_capture.py` answers in its second mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProjectTestsAnswer {
    pub status: AnswerStatus,
    /// `pytest`, or `none` when the environment has no pytest.
    pub runner: String,
    /// Per state, the node ids that failed; `None`: its run did not finish.
    pub failed: Vec<Option<Vec<String>>>,
    /// Per state, the seconds its run could take: the request's limit, or for a broken state
    /// after the module's own run, a few times that run (`r2e_capture.py`).
    pub limits: Vec<f64>,
    pub error: Option<String>,
}

/// What `r2e_capture.py` answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CaptureAnswer {
    /// `ok` or `error`.
    pub status: AnswerStatus,
    /// `pytest`, `unittest`, or `none` (no target imported, or no test files).
    pub runner: String,
    /// Per target of the request, in its order: the calls recorded, as call-site texts.
    pub calls: Vec<Vec<CallSiteArgs>>,
    /// Per target, under pytest: the node ids of the tests that called it (at most 200).
    pub reached: Vec<Vec<String>>,
    pub time_limit_hit: bool,
    pub tests_failed_to_import: u32,
    pub seconds: f64,
    pub error: Option<String>,
}

/// What `r2e_explore.py` answers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExploreAnswer {
    /// `ok` or `error`.
    pub status: AnswerStatus,
    pub harness: Option<String>,
    pub tests: u32,
    pub executions: u32,
    pub arcs: u32,
    pub time_limit_hit: bool,
    pub error: Option<String>,
    /// What the kept tests kill of the explorer's own mutants of the function.
    pub mutants: Option<ExplorerMutants>,
}

/// The explorer's mutants: how many it made, how many the kept tests kill, and a few that
/// survive (descriptions).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExplorerMutants {
    pub total: u32,
    pub killed: u32,
    pub survivors: Vec<String>,
    pub executions: u32,
}

/// What `r2e_runner.py` reads (one harness run). Paths are relative to the scratch folder or
/// absolute.
#[derive(Clone, Debug, Serialize)]
pub struct RunRequest<'a> {
    pub repo_root: &'a std::path::Path,
    pub extra_roots: &'a [PathBuf],
    pub module: &'a str,
    pub qualname: &'a str,
    pub harness_file: &'a str,
    pub source_file: &'a std::path::Path,
    pub start_line: u32,
    pub end_line: u32,
    pub candidate_file: Option<&'a str>,
    pub coverage: bool,
    /// Files the run's own child must not see (a candidate's module, when the worker serves
    /// candidates of several modules): `r2e_batch.py` hides them in a mount namespace of the
    /// child's own.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub hide: &'a [PathBuf],
    /// `record`: the process holds the original and records its calls; `candidate`: it holds
    /// the candidate only (imported under the module's name) and records its calls.
    pub mode: Mode,
}

/// How a harness runs (see `src/py/r2e_runner.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Record,
    Candidate,
}

/// What `r2e_batch.py` reads: many runs, each `runs` times.
#[derive(Clone, Debug, Serialize)]
pub struct BatchRequest<'a> {
    pub runs: u32,
    /// The number of the first run: run 0 is in the tests' natural order (with coverage when
    /// asked), run n shuffled with seed n.
    pub first_run: u32,
    /// Seconds one run may take.
    pub timeout: u64,
    /// Memory one run may use, in MiB (each forked child's own limit, under the job's).
    pub memory_mib: u64,
    pub jobs: Vec<RunRequest<'a>>,
}

/// What `r2e_batch.py` answers: per job, its runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchAnswer {
    pub results: Vec<Vec<RunAnswer>>,
}

/// One run of a harness, as the runner reports it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunAnswer {
    /// `ok`; `error` (the harness did not import); from the warm worker also `timeout` and
    /// `crash`.
    pub status: AnswerStatus,
    pub error: Option<String>,
    pub tests: Vec<TestResult>,
    pub coverage: Option<CoverageCounts>,
    pub examples: Vec<Example>,
    pub types: ObservedTypes,
}

/// One test of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TestResult {
    pub name: String,
    /// `pass`, or `fail` / `error` when the harness's own code failed.
    pub outcome: TestOutcome,
    pub message: Option<String>,
    pub returned_normally: bool,
    /// The calls the test checked, observed on the side this process held.
    pub records: Vec<r2e_core::verdict::Record>,
}

/// Coverage of the function's own lines and branches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CoverageCounts {
    pub lines_total: u32,
    pub lines_covered: u32,
    pub branches_total: u32,
    pub branches_covered: u32,
    /// Absolute line numbers in the source file, as the runner saw it.
    pub missing_lines: Vec<u32>,
    pub partial_lines: Vec<u32>,
}

/// A recorded call of the reference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Example {
    pub call: String,
    pub outcome: String,
}

/// Type names seen in the reference's calls.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ObservedTypes {
    /// Per parameter, in signature order.
    #[serde(with = "r2e_core::records::ordered_pairs")]
    pub args: Vec<(String, Vec<String>)>,
    pub returns: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_explorer_is_the_whole_package() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/py");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir.join("r2e_explorer"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".py"))
            .map(|name| format!("r2e_explorer/{name}"))
            .chain(
                [
                    "r2e_explore.py",
                    "r2e_equiv.py",
                    "r2e_snapshot.py",
                    "r2e_limit.py",
                    "r2e_reexec.py",
                ]
                .map(str::to_owned),
            )
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = EXPLORER.iter().map(|(n, _)| n.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        assert_eq!(EXPLORER[0].0, "r2e_explore.py");
        for (name, text) in EXPLORER {
            assert_eq!(std::fs::read_to_string(dir.join(name)).unwrap(), *text);
        }
    }

    #[test]
    fn a_runner_answer_reads_into_the_typed_protocol() {
        let text = r#"{"status": "ok", "error": null, "tests": [{"name": "test_0", "outcome": "pass", "message": null, "returned_normally": true}],
            "coverage": {"lines_total": 3, "lines_covered": 2, "branches_total": 2, "branches_covered": 1, "missing_lines": [7], "partial_lines": [5]},
            "examples": [{"call": "f(1)", "outcome": "returns 2"}], "types": {"args": {"x": ["int"], "y": ["str"]}, "returns": ["int"]}}"#;
        let answer: RunAnswer = serde_json::from_str(text).unwrap();
        assert_eq!(answer.tests[0].name, "test_0");
        assert_eq!(answer.coverage.as_ref().unwrap().missing_lines, vec![7]);
        assert_eq!(
            answer.types.args,
            vec![
                ("x".into(), vec!["int".into()]),
                ("y".into(), vec!["str".into()])
            ]
        );
        assert_ne!(files_hash(EXPLORER), files_hash(RUNNER));
        // What the cache stores reads back.
        let bytes = postcard::to_stdvec(&answer).unwrap();
        assert_eq!(postcard::from_bytes::<RunAnswer>(&bytes).unwrap(), answer);
    }
}
