//! Typed records: one serde struct for every line r2e writes and reads back (`functions.jsonl`
//! and the dependency graphs of its slices, `slices/REPO.jsonl`, `envs.jsonl`, `harnesses.jsonl`, `dataset.jsonl`, `manifest.json`, `failures.jsonl`, the build
//! summary), and the vocabulary they share (function kinds, filters, generators, failure
//! classes). Writers and readers (`assemble`, `check`, `report`, `dataset diff`, `status`,
//! `explain`) go through these types: no reader indexes untyped JSON by string.
//!
//! Field order is the order of the JSON objects written; the dataset's version is a hash of
//! these bytes, so a field is only ever added, never reordered.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod summary;
pub use summary::*;

/// A function, or a method of a module-level class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionKind {
    Function,
    Method,
}

impl FunctionKind {
    pub fn is_method(self) -> bool {
        self == FunctionKind::Method
    }
    pub fn as_str(self) -> &'static str {
        match self {
            FunctionKind::Function => "function",
            FunctionKind::Method => "method",
        }
    }
}

/// The curation filters of stage `extract`, in the order they are tried; the first that
/// excludes a function names it in `excluded_by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// The file is outside the repository's scope (`[[repo]] include` / `exclude`).
    Scope,
    /// The file's path is not a module name under any of the repository's import roots
    /// (`bin/update-tables.py`): nothing can import it (`[extract] not_module`).
    NotModule,
    /// The module is for another platform: importing it on Linux fails (an unguarded
    /// module-level import of a Windows-only module, or a module-level platform check that
    /// raises) (`[extract] platform`).
    Platform,
    NoDocstring,
    Dunder,
    NamePrefix,
    Decorator,
    NoParams,
    NoReturn,
    OneStatement,
    TooLong,
    LiteralReturns,
    Keywords,
    Connectivity,
    /// Another candidate, earlier in the pipeline's order (repository, file, definition), has
    /// the same qualified name and the same code (tokens without comments or formatting): this
    /// one is a copy (a vendored module) and is left out (`[select] dedup`).
    Duplicate,
}

impl Filter {
    pub const ALL: [Filter; 15] = [
        Filter::Scope,
        Filter::NotModule,
        Filter::Platform,
        Filter::NoDocstring,
        Filter::Dunder,
        Filter::NamePrefix,
        Filter::Decorator,
        Filter::NoParams,
        Filter::NoReturn,
        Filter::OneStatement,
        Filter::TooLong,
        Filter::LiteralReturns,
        Filter::Keywords,
        Filter::Connectivity,
        Filter::Duplicate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Filter::Scope => "scope",
            Filter::NotModule => "not_module",
            Filter::Platform => "platform",
            Filter::NoDocstring => "no_docstring",
            Filter::Dunder => "dunder",
            Filter::NamePrefix => "name_prefix",
            Filter::Decorator => "decorator",
            Filter::NoParams => "no_params",
            Filter::NoReturn => "no_return",
            Filter::OneStatement => "one_statement",
            Filter::TooLong => "too_long",
            Filter::LiteralReturns => "literal_returns",
            Filter::Keywords => "keywords",
            Filter::Connectivity => "connectivity",
            Filter::Duplicate => "duplicate",
        }
    }
}

/// Which harness generator runs.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    /// The built-in coverage-guided explorer: no model needed.
    #[default]
    Builtin,
    /// A language model writes the harness from the function's context, then repairs it.
    Llm,
    /// The built-in generator first; the model only where it falls short of the thresholds,
    /// with the built-in harness's tests kept beside the model's.
    Hybrid,
}

impl Generator {
    /// Whether this generator asks a model.
    pub fn uses_model(self) -> bool {
        matches!(self, Generator::Llm | Generator::Hybrid)
    }
}

/// Why a harness is not valid (or a candidate has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    TypeValueError,
    Assertion,
    ImportEnv,
    Timeout,
    ResourceLimit,
    OsError,
    Nondeterministic,
    TooFewTests,
    NoNormalReturn,
    /// The process died (a signal, `os._exit`) without a limit killing it.
    Crash,
    /// A candidate that does not compile, import or define its function.
    Unrunnable,
    /// A model's answer that holds no `def` of the function.
    NoCode,
    /// A model request its server refused as longer than the model's context window: the
    /// sample has no answer, and no repair round (its prompt would be longer still).
    PromptTooLong,
    /// Not the candidate's doing (outcome `error`): the sandbox could not start, a worker was
    /// killed or gave no answer, the disk filled up, the daemon went away. Never cached.
    Infrastructure,
    Other,
}

impl FailureClass {
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::TypeValueError => "type_value_error",
            FailureClass::Assertion => "assertion",
            FailureClass::ImportEnv => "import_env",
            FailureClass::Timeout => "timeout",
            FailureClass::ResourceLimit => "resource_limit",
            FailureClass::OsError => "os_error",
            FailureClass::Nondeterministic => "nondeterministic",
            FailureClass::TooFewTests => "too_few_tests",
            FailureClass::NoNormalReturn => "no_normal_return",
            FailureClass::Crash => "crash",
            FailureClass::Unrunnable => "unrunnable",
            FailureClass::NoCode => "no_code",
            FailureClass::PromptTooLong => "prompt_too_long",
            FailureClass::Infrastructure => "infrastructure",
            FailureClass::Other => "other",
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a candidate's check came out, wherever one is judged (`check`, `evaluate`, `serve`,
/// validation): it passed; it failed by its own doing (a wrong value or exception, its own
/// timeout or memory blow-up, code that does not compile or import); or the check could not
/// judge it (`error`: [`FailureClass::Infrastructure`], never cached, tried again next time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckOutcome {
    Pass,
    Fail,
    Error,
}

impl CheckOutcome {
    pub fn name(self) -> &'static str {
        match self {
            CheckOutcome::Pass => "pass",
            CheckOutcome::Fail => "fail",
            CheckOutcome::Error => "error",
        }
    }
}

impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How an environment came out.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EnvOutcome {
    /// Everything installed.
    Ok,
    /// The environment works, but some packages did not install (listed in `failed_packages`).
    Partial,
    /// No usable environment.
    Failed,
}

/// `hybrid`: which harness won.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HarnessFrom {
    Builtin,
    Model,
    Merged,
}

/// What refinement did for an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefineStatus {
    Refined,
    Malformed,
    Failed,
}

/// Where an instance's `spec` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecSource {
    Refined,
    Docstring,
}

/// What one function's model requests cost, cached or not: the requests its result needs, and
/// their tokens. Recorded per function, so that a dataset's cost can be read from its files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Spent {
    pub fn add(&mut self, other: &Spent) {
        self.requests += other.requests;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// Requests executed, cached and failed, and tokens, for one (stage, model) of a build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub executed: u64,
    pub cached: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.executed += other.executed;
        self.cached += other.cached;
        self.failed += other.failed;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// What a model request was for: the stage (and for a harness's repair rounds, `repair`) that
/// the usage table counts it under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelUse {
    /// A harness's first round (stage `generate`).
    Generate,
    /// A harness's repair rounds.
    Repair,
    /// A docstring rewritten into a spec (stage `refine`).
    Refine,
    /// A candidate asked of a model under evaluation (stage `evaluate`).
    Evaluate,
    /// A bug-fix task's report rewritten as an issue (stage `statement`).
    Statement,
}

impl ModelUse {
    /// The name the usage table (`UsageTable`) gives it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ModelUse::Generate => "generate",
            ModelUse::Repair => "repair",
            ModelUse::Refine => "refine",
            ModelUse::Evaluate => "evaluate",
            ModelUse::Statement => "statement",
        }
    }
}

/// Model usage of a build, by stage and model.
pub type UsageTable = BTreeMap<String, BTreeMap<String, Usage>>;

/// One line of `functions.jsonl`. Borrowed when written (the file can be large), owned when read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionRecord<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub repo: Cow<'a, str>,
    /// The name as Python qualifies it in its module (the id's last part, without a `#n`).
    /// The file's path is not written: it is the id's middle part ([`FunctionRecord::path`]).
    #[serde(borrow)]
    pub qualname: Cow<'a, str>,
    pub kind: FunctionKind,
    /// The `def` line (1-based), not a decorator's.
    pub start_line: u32,
    pub end_line: u32,
    #[serde(borrow)]
    pub docstring: Option<Cow<'a, str>>,
    pub excluded_by: Option<Filter>,
    /// When its body was first introduced: the committer date (RFC 3339 UTC) of that commit
    /// (`stages::dating`); `null` without history.
    #[serde(default)]
    pub created_at: Option<String>,
    /// When its body last changed (a move to another file or a renamed file is no change).
    #[serde(default)]
    pub changed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceRecord>,
}

impl FunctionRecord<'_> {
    /// The function's file, relative to its repository: the part of the id (`REPO:path:qualname`)
    /// between the repository's name and the last `:` (a qualified name holds no `:`, a path
    /// may).
    pub fn path(&self) -> &str {
        function_path(&self.id, &self.repo)
    }
}

/// The file of the function with this id in repository `repo` (see [`FunctionRecord::path`]).
pub fn function_path<'i>(id: &'i str, repo: &str) -> &'i str {
    let rest = id
        .strip_prefix(repo)
        .and_then(|r| r.strip_prefix(':'))
        .unwrap_or(id);
    rest.rsplit_once(':').map_or(rest, |(path, _)| path)
}

/// The fields of a `functions.jsonl` line that counting needs (a reader of the whole file that
/// does not need slices or docstrings reads these).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionHead {
    pub id: String,
    pub repo: String,
    pub excluded_by: Option<Filter>,
}

/// The `slice` of a candidate in `functions.jsonl`. The slice itself is not written out: it is
/// every node that `node` reaches in its repository's dependency graph, `slices/REPO.jsonl`
/// ([`SliceNode`], read back with [`SliceGraph`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceRecord {
    /// The function's node: its line (0-based) in `slices/REPO.jsonl`.
    pub node: u32,
    /// How many items the slice holds: definitions and globals (qualified names, once each).
    pub size: usize,
    /// The context's length in `cl100k_base` tokens.
    pub tokens: u32,
    pub truncated: bool,
    /// Whether the whole slice is in the function's own file.
    pub in_file: bool,
}

/// What a node of the dependency graph is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A definition (function, method or class), named by its id.
    Def,
    /// A module-level global, named by its qualified name.
    Global,
    /// A dotted name bound to nothing in the repository (third-party or dynamic), which the
    /// nodes that use it list among their dependencies. It has none.
    Unresolved,
}

/// One line of `slices/REPO.jsonl`: a definition or global that some candidate of the
/// repository reaches (the candidates included), or a name bound to nothing that one of those
/// uses, and its direct dependencies, as the lines (0-based) of their nodes in the same file.
/// Nodes are in the repository's order (definitions, then globals, each by file path, then
/// source order; then the unresolved names, sorted), and every dependency of a node is a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceNode<'a> {
    pub kind: NodeKind,
    /// Borrowed when written, owned when read.
    pub name: Cow<'a, str>,
    pub deps: Vec<u32>,
}

/// The full slice of a candidate, as the dependency graph gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FullSlice {
    /// Every definition and global reached (the function's own excluded) with its distance
    /// from the function, nearest first, in the repository's order at one distance: the order
    /// of `r2e explain`.
    pub items: Vec<(u32, u32)>,
    /// The ids of the definitions reached, in the repository's order.
    pub functions: Vec<String>,
    /// The qualified names of the globals reached, sorted, once each.
    pub globals: Vec<String>,
    /// The names bound to nothing in the repository that the function or its slice uses,
    /// sorted.
    pub unresolved: Vec<String>,
}

/// A repository's dependency graph, read back from `slices/REPO.jsonl`.
#[derive(Clone, Debug, Default)]
pub struct SliceGraph {
    pub nodes: Vec<SliceNode<'static>>,
}

impl SliceGraph {
    /// The graph file of repository `repo` in a dataset's folder.
    pub fn path(dataset: &Path, repo: &str) -> PathBuf {
        dataset.join("slices").join(format!("{repo}.jsonl"))
    }

    /// Reads the graph of `repo` from a dataset's folder (a built one: a missing file is bad
    /// input). A dependency that names no node is bad input too.
    pub fn read(dataset: &Path, repo: &str) -> Result<SliceGraph> {
        let path = Self::path(dataset, repo);
        let nodes: Vec<SliceNode<'static>> = read_built(&path)?;
        let n = nodes.len() as u32;
        if let Some(i) = nodes.iter().position(|x| x.deps.iter().any(|&d| d >= n)) {
            return Err(Error::input(format!(
                "{}:{}: a dependency names no node ({n} nodes)",
                path.display(),
                i + 1
            )));
        }
        Ok(SliceGraph { nodes })
    }

    /// The slice of node `start`: every node it reaches, with its breadth-first distance.
    pub fn slice(&self, start: u32) -> FullSlice {
        let mut dist = vec![u32::MAX; self.nodes.len()];
        let mut out = FullSlice::default();
        if let Some(d) = dist.get_mut(start as usize) {
            *d = 0;
        } else {
            return out;
        }
        let mut frontier = vec![start];
        let mut d = 0;
        while !frontier.is_empty() {
            d += 1;
            let mut next = Vec::new();
            for node in frontier {
                for &dep in &self.nodes[node as usize].deps {
                    if dist[dep as usize] == u32::MAX {
                        dist[dep as usize] = d;
                        next.push(dep);
                    }
                }
            }
            next.sort_unstable();
            for &n in &next {
                match self.nodes[n as usize].kind {
                    NodeKind::Unresolved => {}
                    _ => out.items.push((n, d)),
                }
            }
            frontier = next;
        }
        for (n, node) in self.nodes.iter().enumerate() {
            if dist[n] == 0 || dist[n] == u32::MAX {
                continue;
            }
            let name = node.name.to_string();
            match node.kind {
                NodeKind::Def => out.functions.push(name),
                NodeKind::Global => out.globals.push(name),
                NodeKind::Unresolved => out.unresolved.push(name),
            }
        }
        out.globals.sort_unstable();
        out.globals.dedup();
        out.unresolved.sort_unstable();
        out.unresolved.dedup();
        out
    }
}

/// One line of `envs.jsonl`: a repository's environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvLine {
    pub repo: String,
    pub env_key: String,
    pub outcome: EnvOutcome,
    pub installer: String,
    pub python_version: String,
    pub declared: Vec<String>,
    pub inferred: Vec<String>,
    pub failed_packages: Vec<String>,
    /// Imported third-party modules not installed because the code runs without them here
    /// (optional imports, other platforms' code, type checkers' imports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_imports: Vec<SkippedImport>,
    /// Distributions installed for an imported module that did not provide it, uninstalled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedDistribution>,
    pub lock_hash: String,
    pub lock: Vec<String>,
    /// The installation log, relative to the folder of this file.
    pub log: String,
    /// The project itself, built and installed on top (`stages::environment::project`); absent when
    /// it is not a buildable project or `[env] install_project` is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectLine>,
    /// The environment image that holds it all (an export's `envs.jsonl`: `r2e export`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// In an export, the identity of the folder holding the repository's files (their tree
    /// hash), which stands for the instances' `commit` (a git commit's files copied into a
    /// folder are no longer a checkout of that commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_files: Option<String>,
    /// The environment the capture ran the repository's own tests in: this one with what its
    /// test suite needs (`stages::environment::test_deps`); absent when nothing was captured
    /// (no test files, or `[generate] capture_tests` off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureEnvLine>,
}

/// The capture's environment of an `envs.jsonl` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaptureEnvLine {
    /// Its key (`keys::EnvKey`'s hash): its folder in the cache.
    pub env_key: String,
    /// `ok` or `partial` (some requirements failed: `failed_packages`); `failed` when it could
    /// not be made, and the capture ran in the repository's own environment (`reason`).
    pub outcome: EnvOutcome,
    /// What the test suite needs, each with what declared it.
    pub requirements: Vec<TestRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_packages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub lock_hash: String,
}

/// One requirement of a project's test suite, and what declared it (`pyproject.toml
/// [dependency-groups] test`, `tox.ini [testenv] deps`; `r2e` for the pytest the capture runs
/// a suite with where none is declared).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TestRequirement {
    pub requirement: String,
    pub source: String,
}

/// A third-party module the code imports that its environment does not install: the code runs
/// without it here (`python::guard`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SkippedImport {
    pub module: String,
    /// The first file (in the repository's order) that imports it, relative to the repository.
    pub path: String,
    /// Why it is not needed: optional, for another platform, for type checkers only.
    pub reason: String,
}

/// A distribution installed for an imported module and uninstalled again, because it does not
/// provide that module (`stages::environment`'s check after installing).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RejectedDistribution {
    pub module: String,
    pub distribution: String,
    pub reason: String,
}

/// The project layer of an `envs.jsonl` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectLine {
    /// Its key (`keys::ProjectKey`'s hash): its folder in the cache.
    pub key: String,
    /// `installed`, or `partial` (not built: the source with generated metadata; `reason`).
    pub outcome: ProjectOutcome,
    pub name: Option<String>,
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How many of its modules come from the checkout at run time.
    pub overlaid: u32,
    /// The build's log, relative to the folder of this file.
    pub log: String,
}

/// A failure of a refinement, as `harnesses.jsonl` records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefineRecord {
    pub status: RefineStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub llm: Spent,
}

/// One line of `harnesses.jsonl`: a candidate's harness and its validation. `valid` and the
/// numbers are null when the build stopped before `validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HarnessRecord {
    pub id: String,
    pub generator: Generator,
    pub valid: Option<bool>,
    pub tests: Option<u32>,
    pub branches: Option<u32>,
    pub branch_coverage: Option<f64>,
    pub line_coverage: Option<f64>,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    pub in_file: bool,
    /// `hybrid`: which harness won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_from: Option<HarnessFrom>,
    /// The model requests the harness needed (model-driven generators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<Spent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine: Option<RefineRecord>,
    /// How many of the explorer's own mutants the kept tests kill (built-in harnesses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explorer_mutants: Option<MutantCount>,
    /// The explorer stopped at `[generate] time_limit_seconds` (built-in harnesses; written
    /// only when it did): its tests are those found by then, which depends on the machine's
    /// speed, so another machine may write another harness.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explorer_time_limit_hit: bool,
    /// Why the candidate has no test at all (`tests` is 0), when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tests: Option<NoTests>,
}

/// Why a candidate's harness has no test (`harnesses.jsonl`'s `no_tests`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoTests {
    /// Tests were written, and every one was dropped as unstable: the reference did otherwise
    /// in another run, in a fresh process, in more than parts of its values.
    Unstable,
    /// The function was called, and no call ended in a way a test can keep: each crashed its
    /// process, did not do the same twice, or returned what holds a memory address.
    NoCallReturned,
    /// Every call ran out of its limit (time, memory, processes).
    EveryCallHitItsLimit,
    /// The module (or the harness) did not import.
    ImportFailed,
    /// No input could be built: an instance to call the method on, or an argument.
    NoInput,
    /// The explorer itself failed (r2e's own code: a defect to report, with its message).
    ExplorerFailed,
}

impl NoTests {
    pub fn name(self) -> &'static str {
        match self {
            NoTests::Unstable => "unstable",
            NoTests::NoCallReturned => "no_call_returned",
            NoTests::EveryCallHitItsLimit => "every_call_hit_its_limit",
            NoTests::ImportFailed => "import_failed",
            NoTests::NoInput => "no_input",
            NoTests::ExplorerFailed => "explorer_failed",
        }
    }
}

/// Mutants made and mutants killed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantCount {
    pub total: u32,
    pub killed: u32,
}

impl HarnessRecord {
    /// The coverage selection uses: branch coverage, or line coverage for a function without
    /// branches.
    pub fn coverage(&self) -> f64 {
        if self.branches.unwrap_or(0) > 0 {
            self.branch_coverage
        } else {
            self.line_coverage
        }
        .unwrap_or(0.0)
    }

    /// The model requests this candidate needed, for its harness and its refinement.
    pub fn spent(&self) -> Spent {
        let mut total = self.llm.unwrap_or_default();
        if let Some(r) = &self.refine {
            total.add(&r.llm);
        }
        total
    }
}

/// What the reference did in one test of a harness, recorded when it was validated: a candidate
/// passes the test when its calls match these (`verdict`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpectedTest {
    pub name: String,
    pub records: Vec<crate::verdict::Record>,
    pub returned_normally: bool,
}

/// One line of `dataset.jsonl`: a benchmark instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub id: String,
    pub repo: String,
    /// A commit sha; `tree:` + blake3 of the files for a folder that is not a clean checkout;
    /// `sha256:` + the archive's hash for a `pypi` source release.
    pub commit: String,
    pub path: String,
    pub qualname: String,
    /// The original docstring.
    pub docstring: Option<String>,
    /// The refined docstring, or the original.
    pub spec: Option<String>,
    pub spec_source: SpecSource,
    pub context: String,
    /// The problem statement: the context with the target's body removed, its signature and
    /// `spec` in its place. What a model or agent is shown; never the solution.
    #[serde(default)]
    pub problem: String,
    /// The reference solution: the function's source as it stands in the commit, from its
    /// first decorator to its last line (a method's dedented to column 0), as `r2e check
    /// --candidate` takes it. For people and for training on solutions; never in `problem`, a
    /// prompt, `serve`'s answers or a session's workspace.
    #[serde(default)]
    pub reference: String,
    pub harness: String,
    pub tests: u32,
    pub branch_coverage: Option<f64>,
    pub line_coverage: Option<f64>,
    pub harness_hash: String,
    pub env_lock: String,
    /// The reference's calls in each test, as a candidate's are compared with them.
    pub expected: Vec<ExpectedTest>,
    /// How they are compared.
    #[serde(default)]
    pub policy: crate::verdict::Policy,
    /// The function's code key (hashed): what its checks are keyed on besides the harness and
    /// the candidate.
    #[serde(default)]
    pub code_hash: String,
    /// The reference's dependencies: its slice's size.
    #[serde(default)]
    pub deps: u32,
    /// The reference's own length in tokens.
    #[serde(default)]
    pub tokens: u32,
    /// Whether its slice stays within its own file.
    #[serde(default)]
    pub in_file: bool,
    /// The harness's strength: built-in mutants of the reference that it kills.
    #[serde(default)]
    pub mutants: Option<MutationScore>,
    /// How stable its tests were when it was validated: the reference's runs, and per test how
    /// many agreed (a test dropped as unstable is in `dropped`, not in `expected`).
    #[serde(default)]
    pub stability: Option<Stability>,
    /// The environment image it runs in (an export's dataset: `r2e export`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// When the reference's body was first introduced and last changed (RFC 3339 UTC, from the
    /// repository's history; `null` without one): what splits an evaluation at a model's
    /// cutoff.
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub changed_at: Option<String>,
}

/// A bug-fix task (`bugfix.jsonl`, `docs/bugfix.md`): a repository in a broken state, a problem
/// statement, and the hidden tests that tell the fix. SWE-bench's instance fields first, then
/// r2e's own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BugfixTask {
    /// `<instance id>:bug-<12 hex>` (a mutant) or `<instance id>:hist-<12 hex>` (a change from
    /// the history): the instance whose harness catches the bug, and the broken module's hash.
    pub instance_id: String,
    pub repo: String,
    /// The commit the broken state is made from (as `Instance::commit`).
    pub base_commit: String,
    /// When the function's body last changed (`Instance::changed_at`, else `created_at`); for
    /// a history task, the date of the commit whose change it is.
    pub created_at: Option<String>,
    /// What the agent is told: a user's report of the failing behaviour. Never the broken
    /// file's path, a line, the patch or the tests' code.
    pub problem_statement: String,
    /// Who wrote `problem_statement`: r2e's report, or a model's rewrite of it.
    #[serde(default)]
    pub statement_source: StatementSource,
    /// The gold fix: a unified diff (`a/`, `b/` paths from the repository's root) from the
    /// broken state back to `base_commit`.
    pub patch: String,
    /// The hidden tests, as a diff that adds them: the instance's harness at `tests_path`. It
    /// runs through r2e's runner, which holds the reference's recorded calls (`r2e check ID
    /// --patch FILE`).
    pub test_patch: String,
    /// The hidden tests the broken state fails and the fix must pass
    /// (`<tests_path>::<Class>::<test>`).
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    /// The hidden tests the broken state passes and the fix must keep passing.
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    /// The environment's lock hash: which environment the task runs in.
    pub version: String,
    /// The commit the environment is built from (`base_commit`: the bug changes no
    /// dependency).
    pub environment_setup_commit: String,
    /// The implementation instance (`dataset.jsonl`'s `id`) whose harness catches the bug.
    pub instance: String,
    /// From `base_commit` to the broken state: `patch` reversed.
    pub bug_patch: String,
    pub origin: BugOrigin,
    /// 0: the bug is in the function whose tests catch it.
    pub depth: u32,
    /// Where the bug is.
    pub locations: Vec<BugLocation>,
    /// The mutant's kind (`flip_comparison`, `constant`, …) and what it changed, for `origin =
    /// "mutant"`.
    pub mutant_kind: Option<String>,
    pub mutant: Option<String>,
    /// For `origin = "history"`: the commit whose change to the function is the gold patch
    /// (`created_at` is its committer date).
    pub history_commit: Option<String>,
    /// The project's own tests (pytest node ids) that fail on the broken state and pass on the
    /// module as it is, of those the capture saw call the function; `null`: not known (the
    /// tests did not run under pytest, or a run did not finish). `[]`: none caught it.
    pub project_tests_fail: Option<Vec<String>>,
    /// Whether any project test catches the bug; `null` when they were not run.
    pub caught_by_project_tests: Option<bool>,
    pub env_lock: String,
    /// The broken state's runs: how many, and per hidden test how many it failed.
    pub stability: BugStability,
}

/// Who wrote a bug-fix task's problem statement (`[bugfix] statement`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementSource {
    /// `report`: r2e's, from the failing evidence; `model`: `model`'s rewrite of that report.
    pub by: StatementBy,
    /// The model asked, when one was (`by = "model"`, or a model whose answer was not used).
    pub model: Option<String>,
    /// Why a model's answer is not the statement (the task keeps the report): the answer
    /// named the broken file or a hidden test, or the request failed.
    pub refused: Option<String>,
}

/// `StatementSource::by`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatementBy {
    #[default]
    Report,
    Model,
}

/// Where a bug-fix task's bug comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BugOrigin {
    /// One of the dataset's mutants of the function (`python::mutate`).
    Mutant,
    /// A real change from the repository's history.
    History,
}

/// A bug's place: the file (from the repository's root), the function, and the lines the
/// broken state changed (1-based, inclusive, in the broken file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BugLocation {
    pub file: String,
    pub function: String,
    pub lines: [u32; 2],
}

/// A broken state's runs against the hidden tests (`[validate] repeats`, each in a process of
/// its own): per test, how many of the runs it failed. A FAIL_TO_PASS test failed every run, a
/// PASS_TO_PASS test none; a test that did either is in neither list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BugStability {
    pub runs: u32,
    pub tests: Vec<TestFailed>,
}

/// A hidden test of a bug-fix task: how many of the broken state's runs it failed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestFailed {
    pub name: String,
    pub failed: u32,
}

/// How stable a harness's tests are: the reference ran it `runs` times (`[validate] repeats`
/// recorded in fresh processes, the first in natural order, the others shuffled; then twice
/// checked as a candidate), and each test's runs that agreed with the first. A test that ever
/// disagreed is unstable: dropped from the harness (`dropped`) or the harness is invalid, as
/// `[validate] unstable` says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stability {
    pub runs: u32,
    /// Per test (by name, in the harness's order), how many of the runs agreed.
    pub tests: Vec<TestStability>,
    /// The unstable tests dropped from the harness: their calls are not compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// The tests kept with parts of their expected values masked: parts the reference did not
    /// reproduce in another run, in a fresh process (`verdict::mask_test`), which match
    /// anything; the rest of each is compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestStability {
    pub name: String,
    pub agreed: u32,
}

impl Stability {
    /// Whether every test agreed in every run.
    pub fn all_stable(&self) -> bool {
        self.tests.iter().all(|t| t.agreed == self.runs)
    }

    /// The tests whose runs disagreed.
    pub fn unstable(&self) -> impl Iterator<Item = &TestStability> {
        self.tests.iter().filter(|t| t.agreed < self.runs)
    }
}

/// Mutants of the reference, how many the harness kills, and the ones that survive (a person
/// may look: some are equivalent to the reference).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MutationScore {
    pub total: u32,
    pub killed: u32,
    pub survivors: Vec<String>,
}

impl MutationScore {
    /// Killed over total; 1 when there are no mutants.
    pub fn score(&self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            f64::from(self.killed) / f64::from(self.total)
        }
    }
}

/// One round of a sample in `results.jsonl`: round 0 is the first answer, round N its N-th
/// repair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalRound {
    /// `pass`, `fail`, or `error` (the check could not judge the candidate).
    pub outcome: CheckOutcome,
    pub passed: bool,
    pub failure_class: Option<FailureClass>,
    /// Names of the tests that failed.
    pub failed_tests: Vec<String>,
    /// The hash of the candidate's code checked in this round (none: no code).
    pub candidate_hash: Option<String>,
    /// Why the check could not judge the candidate (outcome `error` only; this machine's paths
    /// named, as every message a run gives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One row of a pass@k table: a model, a group of instances, how many, and pass@k per k.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassRow {
    pub model: String,
    pub group: String,
    pub instances: u32,
    /// `pass@K` → the mean over the group's instances.
    pub pass: BTreeMap<String, f64>,
}

/// The self-repair curve of a model: of the samples that failed at first, the share that
/// passes by each repair round (cumulative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepairCurve {
    pub model: String,
    pub failing: u32,
    pub fixed_by_round: Vec<f64>,
}

/// The evaluation's tables, as `report` shows them and `--json` gives them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalTables {
    pub overall: Vec<PassRow>,
    pub by_repo: Vec<PassRow>,
    pub by_deps: Vec<PassRow>,
    pub by_tokens: Vec<PassRow>,
    pub by_file: Vec<PassRow>,
    /// For each model with a `cutoff`: a row over all its instances (`all`) and one over those
    /// created after its cutoff (`unseen`), each with its count, as SWE-rebench and
    /// LiveCodeBench report.
    #[serde(default)]
    pub by_cutoff: Vec<PassRow>,
    pub repair: Vec<RepairCurve>,
}

/// What a build's `--json` summary says of its evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Candidate extractions (the `def` out of a model's answer) run now and taken from the
    /// extraction cache.
    #[serde(default)]
    pub extractions: StageCounts,
    /// Checks run now and taken from the check cache.
    pub checks: StageCounts,
    /// Requests that failed (not samples; the next build asks again).
    pub failed_requests: u64,
    /// Samples whose check could not judge them (outcome `error`): left out of pass@k and the
    /// repair curves; the next build checks them again.
    #[serde(default)]
    pub errors: u64,
    /// pass@k per model, over every instance.
    pub pass: Vec<PassRow>,
    /// For the models with a `cutoff`: pass@k over all instances and over the unseen split
    /// (`EvalTables::by_cutoff`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<PassRow>,
    pub repair: Vec<RepairCurve>,
    /// pass@k on the bug-fix tasks (`evaluate::bugfix_table`): per model over every task,
    /// per origin and per depth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bugfix: Vec<PassRow>,
}

/// One line of `results.jsonl`: one sample of one model on one instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    pub id: String,
    /// `PROVIDER/MODEL`, e.g. `builtin/reference`.
    pub model: String,
    pub sample: u32,
    /// `error` when a round's check could not judge its candidate (the sample is left out of
    /// pass@k and the repair curve, and the next build checks it again); else round 0's
    /// verdict, `pass` or `fail`.
    pub outcome: CheckOutcome,
    /// Round 0's verdict: the one pass@k uses.
    pub passed: bool,
    /// The first repair round that passed.
    pub repaired_at: Option<u32>,
    pub rounds: Vec<EvalRound>,
    /// Round 0's candidate code (none: the answer held no code).
    pub candidate_hash: Option<String>,
    pub harness_hash: String,
    pub env_lock: String,
    /// The hash of round 0's prompt.
    pub prompt_hash: String,
    /// What the sample's requests cost.
    pub llm: Spent,
    /// With the model's `cutoff`: whether the instance was created after it (its unseen
    /// split). An instance without a date never is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen: Option<bool>,
}

/// `manifest.json`: the dataset's version, its repositories and each instance's hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: String,
    pub r2e: String,
    pub settings_hash: String,
    pub repos: Vec<ManifestRepo>,
    pub instances: Vec<ManifestInstance>,
}

/// The manifest's format tag.
pub const MANIFEST_FORMAT: &str = "r2e-dataset-1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestRepo {
    pub name: String,
    pub commit: String,
    pub rev: Option<String>,
    /// Its licence, an SPDX id from its own files (`license::detect`); absent when they do
    /// not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestInstance {
    pub id: String,
    pub hash: String,
}

/// One line of `failures.jsonl`: a file, environment or action that failed, with the reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureRecord {
    pub repo: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub stage: String,
    pub reason: String,
    /// A log with the details, relative to the folder of this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// The generation an output path shows now (its symlink resolved once), so that a reader's
/// files all come from one build.
pub fn resolve_output(output: &Path) -> PathBuf {
    std::fs::canonicalize(output).unwrap_or_else(|_| output.to_path_buf())
}

/// One JSON line of a record, with its newline.
pub fn to_line<T: Serialize>(record: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(record).expect("records serialize");
    bytes.push(b'\n');
    bytes
}

/// Reads a JSON-lines file of records. A missing file is `Ok(None)`; a line that is not a
/// record is bad input, named by file, line and column.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<Vec<T>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::env(format!("cannot read `{}`: {e}", path.display()))),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::input(format!("{}:{}:{}: {e}", path.display(), i + 1, e.column()))
            })
        })
        .collect::<Result<Vec<T>>>()
        .map(Some)
}

/// Like [`read_jsonl`], for a file that a build must have written: a missing file is bad input
/// that says to build first.
pub fn read_built<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    read_jsonl(path)?
        .ok_or_else(|| Error::input(format!("no `{}`: run `r2e build` first", path.display())))
}

/// Reads a manifest; anything that is not one is bad input.
pub fn read_manifest(path: &Path) -> Result<Manifest> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::input(format!("cannot read manifest `{}`: {e}", path.display())))?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        Error::input(format!(
            "{}:{}:{}: not an r2e manifest: {e}",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    if m.format != MANIFEST_FORMAT {
        return Err(Error::input(format!(
            "`{}` is not an r2e manifest (its format is `{}`, not `{MANIFEST_FORMAT}`)",
            path.display(),
            m.format
        )));
    }
    Ok(m)
}

/// How the project got into its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectOutcome {
    /// Built as a wheel and installed.
    Installed,
    /// Not built: its source on `sys.path` plus generated metadata (see `reason`).
    Partial,
}

/// A function whose calls the capture of a repository's test suite records (`CaptureKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CaptureTarget {
    pub module: String,
    pub qualname: String,
    pub kind: FunctionKind,
}

/// A literal call of a function found in the repository: its arguments' source texts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallSiteArgs {
    pub args: Vec<String>,
    /// Keyword arguments in source order.
    #[serde(with = "ordered_pairs")]
    pub kwargs: Vec<(String, String)>,
    /// A method's instance as the project's tests called it on (the capture's encoding,
    /// `r2e_equiv.loads(b"...")`); none for a call site read from source, or an instance that
    /// does not rebuild.
    #[serde(default)]
    pub receiver: Option<String>,
    /// What the project's tests did with the value this call returned: the calls they made of
    /// its methods (`r2e_capture.py`'s uses; none for a call site read from source). The
    /// explorer makes them of what its inputs return.
    #[serde(default)]
    pub then: Vec<CallUse>,
}

/// A call of a method of the value a captured call returned, as the project's tests made it:
/// the method's name and its arguments' texts (the capture's encoding).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallUse {
    pub method: String,
    pub args: Vec<String>,
    /// Keyword arguments in the order the method takes them.
    #[serde(with = "ordered_pairs")]
    pub kwargs: Vec<(String, String)>,
}

/// A map read and written as pairs in their order (in JSON an object; in the cache's binary
/// format a sequence of pairs, which needs no self-describing reads).
pub mod ordered_pairs {
    use serde::de::{DeserializeOwned, MapAccess, Visitor};
    use serde::{Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, V: Serialize>(
        pairs: &[(String, V)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, V: DeserializeOwned>(
        d: D,
    ) -> Result<Vec<(String, V)>, D::Error> {
        struct Pairs<V>(std::marker::PhantomData<V>);
        impl<'de, V: DeserializeOwned> Visitor<'de> for Pairs<V> {
            type Value = Vec<(String, V)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = map.next_entry::<String, V>()? {
                    out.push(pair);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Pairs(std::marker::PhantomData))
    }
}

/// `[serve] feedback`: what a test or a submission shows an agent of the failing tests (and
/// what a session's trace records it was shown).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Feedback {
    /// Each failing test's inputs and both outcomes.
    #[default]
    Full,
    /// Each test's name and outcome.
    Summary,
    /// The counts only.
    None,
}

/// Why a session closed, as its last trace line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloseReason {
    /// The agent submitted.
    Submitted,
    /// The agent closed it.
    Closed,
    /// Nothing came for the idle timeout.
    Idle,
    /// The server stopped (a signal) with the session open.
    Shutdown,
    /// The server died with the session open; found at the next start.
    Restart,
}

/// One line of a session's trace (`<output>/traces/SESSION.jsonl`, written by `r2e serve`): the
/// session's opening, each action with what the agent observed, and its close.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum TraceLine {
    /// The first line: the instance, its harness and its environment's lock.
    Open {
        session: String,
        instance: String,
        repo: String,
        commit: String,
        path: String,
        qualname: String,
        harness: String,
        env_lock: String,
        feedback: Feedback,
        holdout: f64,
        /// A bug-fix session's task (`bugfix.jsonl`'s `instance_id`); `instance` is then the
        /// instance whose harness judges it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        time: f64,
    },
    /// An operation (`op`), its request, and what the agent observed.
    Action {
        seq: usize,
        op: String,
        request: serde_json::Value,
        observation: serde_json::Value,
        ms: f64,
        time: f64,
    },
    /// The last line: why the session closed.
    Close { reason: CloseReason, time: f64 },
}

/// The files of a build's output, named in one place (as `cache::Bucket` names the cache's
/// folders): what the build writes and every front door reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputFile {
    /// Every function of the repositories, with its filters and slice (`FunctionRecord`).
    Functions,
    /// Files and functions that failed, with their reasons (`FailureRecord`).
    Failures,
    /// Each repository's environment (`EnvLine`).
    Envs,
    /// Each candidate's harness and its validation (`HarnessRecord`).
    Harnesses,
    /// The instances (`Instance`).
    Dataset,
    /// The dataset's version and its instances' hashes (`Manifest`).
    Manifest,
    /// Stage `evaluate`'s samples and verdicts.
    Results,
    /// Stage `bugfix`'s tasks (`BugfixTask`), with `[bugfix]`.
    Bugfix,
    /// Stage `evaluate`'s samples on the bug-fix tasks (`EvalResult`, `id` the task's), with
    /// `[bugfix]` and `[evaluate] bugfix`.
    BugfixResults,
    /// `r2e report`'s tables, as Markdown and as JSON, and as one page of charts.
    ReportMd,
    ReportJson,
    ReportHtml,
    /// `r2e report`'s dataset card (the Hugging Face Hub's `README.md`) and the repositories'
    /// licences it links to.
    Card,
    Licenses,
}

impl OutputFile {
    /// The file's name in the output folder.
    pub const fn name(self) -> &'static str {
        match self {
            OutputFile::Functions => "functions.jsonl",
            OutputFile::Failures => "failures.jsonl",
            OutputFile::Envs => "envs.jsonl",
            OutputFile::Harnesses => "harnesses.jsonl",
            OutputFile::Dataset => "dataset.jsonl",
            OutputFile::Manifest => "manifest.json",
            OutputFile::Results => "results.jsonl",
            OutputFile::Bugfix => "bugfix.jsonl",
            OutputFile::BugfixResults => "bugfix_results.jsonl",
            OutputFile::ReportMd => "report.md",
            OutputFile::ReportJson => "report.json",
            OutputFile::ReportHtml => "report.html",
            OutputFile::Card => "README.md",
            OutputFile::Licenses => "LICENSES.md",
        }
    }
}

#[cfg(test)]
mod tests;
