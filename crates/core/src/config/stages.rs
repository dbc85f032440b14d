//! The tables of the build stages that take no model server: `[extract]` (the curation
//! filters), `[context]`, `[generate]`, `[validate]` and `[select]`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::records::Generator;

/// The curation filters of the `extract` stage (R2E's rules). Each is switchable; an excluded
/// function records the first filter that excluded it, by the name of its switch
/// (`excluded_by`), in this order: `scope` (the repository's scope), then the switches below in
/// their order, then `duplicate` (`[select] dedup`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractConfig {
    /// Exclude the functions of a file whose path is not a module name under the repository's
    /// import roots (a folder or file name that is not an identifier, as
    /// `bin/update-tables.py`): nothing can import it.
    pub not_module: bool,
    /// Exclude the functions of a module for another platform: one that imports a Windows-only
    /// module at module level, unguarded (`winreg`, `msvcrt`, `_winapi`, pywin32's, `from
    /// six.moves import winreg`), or raises (or fails an `assert`) at module level under a
    /// platform check that holds on Linux (`sys.platform`, `os.name`, `platform.system()`).
    pub platform: bool,
    /// Exclude functions without a docstring.
    pub no_docstring: bool,
    /// Exclude `__dunder__` names, and class-private methods (`__name` in a class, which
    /// Python binds as `_Class__name`).
    pub dunder: bool,
    /// Exclude names starting with one of `prefixes` (case-insensitive, leading `_` ignored).
    pub name_prefix: bool,
    /// The prefixes of `name_prefix`.
    pub prefixes: Vec<String>,
    /// Exclude functions with decorators other than `allowed_decorators`.
    pub decorator: bool,
    /// The decorators `decorator` allows.
    pub allowed_decorators: Vec<String>,
    /// Exclude functions without parameters (a method's `self`/`cls` does not count).
    pub no_params: bool,
    /// Exclude functions with no `return <value>` of their own.
    pub no_return: bool,
    /// Exclude functions whose body is a single statement (the docstring does not count).
    pub one_statement: bool,
    /// Exclude functions with more than `max_lines` lines of code (not counting blank lines,
    /// comment lines and the docstring).
    pub too_long: bool,
    /// The most lines of code of `too_long`.
    pub max_lines: u32,
    /// Exclude functions where more than half of the `return`s return a literal.
    pub literal_returns: bool,
    /// Exclude functions whose docstring or code mentions a blocked keyword (GPU, cloud,
    /// network, plotting, command line, ...).
    pub keywords: bool,
    /// The words of `keywords` blocked in a docstring.
    pub docstring_keywords: Vec<String>,
    /// The words of `keywords` blocked in the code.
    pub body_keywords: Vec<String>,
    /// Exclude functions that call or read no other definition of their repository.
    pub connectivity: bool,
}

impl Default for ExtractConfig {
    fn default() -> Self {
        let strings = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
        ExtractConfig {
            not_module: true,
            platform: true,
            no_docstring: true,
            dunder: true,
            name_prefix: true,
            prefixes: strings(&[
                "test",
                "main",
                "demo",
                "example",
                "setup",
                "teardown",
                "benchmark",
                "bench",
            ]),
            decorator: true,
            allowed_decorators: strings(&["staticmethod", "classmethod"]),
            no_params: true,
            no_return: true,
            one_statement: true,
            too_long: true,
            max_lines: 100,
            literal_returns: true,
            keywords: true,
            docstring_keywords: strings(&[
                "gpu",
                "cuda",
                "cloud",
                "aws",
                "s3",
                "gcs",
                "azure",
                "download",
                "upload",
                "network",
                "socket",
                "training",
                "plot",
                "plotting",
                "matplotlib",
                "argparse",
                "command-line",
            ]),
            body_keywords: strings(&[
                "cuda",
                "gpu",
                "boto3",
                "botocore",
                "requests",
                "urllib",
                "urlopen",
                "socket",
                "httpx",
                "aiohttp",
                "subprocess",
                "popen",
                "matplotlib",
                "plt",
                "seaborn",
                "plotly",
                "argparse",
                "click",
                "getpass",
                "webbrowser",
                "smtplib",
                "ftplib",
                "paramiko",
            ]),
            connectivity: true,
        }
    }
}

/// How the context of a function is built. Each is cut to `max_tokens` by dropping the
/// farthest definitions (or files) first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The function alone.
    Naive,
    /// Its file and the repository files it imports.
    Full,
    /// Its dependency slice, grouped by file (farthest files first, its own file last, source
    /// order within a file).
    #[default]
    Sliced,
}

/// `[context]`: what a model is shown of a function's repository.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// How the context is built.
    pub strategy: Strategy,
    /// Contexts are cut to this many `cl100k_base` tokens, farthest definitions first.
    pub max_tokens: u32,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            strategy: Strategy::Sliced,
            max_tokens: 6000,
        }
    }
}

/// What a model-written harness asserts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HarnessMode {
    /// The function under test and the reference are called on the same inputs and compared.
    #[default]
    Equivalence,
    /// The model predicts expected outputs and the harness asserts them.
    OutputPrediction,
}

/// `[generate]`: the harness generator and its budget. `provider`, `model`, `mode`,
/// `repair_rounds`, `temperature` and `max_completion_tokens` are for `generator = "llm"` or
/// `"hybrid"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateConfig {
    /// Which generator writes the harness.
    pub generator: Generator,
    /// The `[providers.NAME]` asked.
    pub provider: Option<String>,
    /// The model asked.
    pub model: Option<String>,
    /// `equivalence` (R2E's harness) or `output_prediction` (the paper's baseline).
    pub mode: HarnessMode,
    /// Repair rounds after the first answer (fix-error, improve-coverage).
    pub repair_rounds: u32,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// The answer's token limit.
    pub max_completion_tokens: u32,
    /// Executions of the function the explorer may spend; this, not time, decides what is kept
    /// (deterministic).
    pub budget: u32,
    /// The explorer's stopping rule: its search stops once the last `max(plateau, G, 80 K)`
    /// executions kept no new input (no new arc, no new kind of outcome), G being the
    /// execution that kept the last one and K the inputs kept; its hunt for inputs that kill
    /// its own mutants, once `max(plateau, H)` executions killed none (H: its executions up to
    /// its last kill); or at `budget`, whichever comes first. Counts, so deterministic. 0: the
    /// search runs to the budget.
    pub plateau: u32,
    /// The explorer's seed.
    pub seed: u64,
    /// At most this many tests per harness (R2E averaged 11.5).
    pub max_tests: u32,
    /// Milliseconds one call may take: its CPU or idle-machine time (wall time less the waits
    /// for a CPU).
    pub per_call_timeout_ms: u64,
    /// A safety stop for one exploration (the same clock), recorded when it fires.
    pub time_limit_seconds: u64,
    /// Run each repository's own test files once (with pytest) and hand the arguments they
    /// pass to the candidates to the explorer, as its first inputs (`r2e_capture.py`). They
    /// run in the capture's environment: the repository's, with what its test suite declares
    /// (test extras, dependency groups, hatch, poetry and pdm tables, test requirement files,
    /// tox) and pytest, recorded in `envs.jsonl`; the functions' environment stays without
    /// them.
    pub capture_tests: bool,
    /// Seconds a repository's test suite may run for that (the same clock); the calls recorded
    /// until then count.
    pub capture_time_limit_seconds: u64,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            generator: Generator::Builtin,
            provider: None,
            model: None,
            mode: HarnessMode::Equivalence,
            repair_rounds: 3,
            temperature: 0.0,
            max_completion_tokens: 2048,
            budget: 1500,
            plateau: 300,
            seed: 0,
            max_tests: 16,
            per_call_timeout_ms: 1000,
            time_limit_seconds: 60,
            capture_tests: true,
            capture_time_limit_seconds: 120,
        }
    }
}

/// `[validate]`: what a correct candidate may change and still pass (the instance's
/// [`Policy`](crate::verdict::Policy), `docs/harness.md`), and the reference's repeated runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ValidateConfig {
    /// Compare exception messages too (by default exceptions match by their exact type only).
    pub compare_exception_messages: bool,
    /// How many times the reference runs its harness, each in a fresh process (the first in
    /// the tests' natural order, the others shuffled); at least 2. Each test records how many
    /// of its runs (these, and the original's two checked as a candidate) agreed.
    pub repeats: u32,
    /// A test whose runs disagree: dropped from the harness (`drop`: its calls are no longer
    /// compared), or the harness is invalid (`invalid`: `nondeterministic`).
    pub unstable: Unstable,
}

impl Default for ValidateConfig {
    fn default() -> Self {
        ValidateConfig {
            compare_exception_messages: false,
            repeats: 3,
            unstable: Unstable::Drop,
        }
    }
}

impl ValidateConfig {
    /// What a correct candidate may change and still pass: recorded in every instance.
    pub fn policy(&self) -> crate::verdict::Policy {
        crate::verdict::Policy {
            compare_exception_messages: self.compare_exception_messages,
        }
    }
}

/// `[validate] unstable`: what becomes of a test whose runs disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Unstable {
    /// The test is dropped from the harness; the rest must still make a valid harness.
    #[default]
    Drop,
    /// The harness is invalid (`nondeterministic`).
    Invalid,
}

/// `[select]`: which validated harnesses make benchmark instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SelectConfig {
    /// The branch coverage (line coverage, for a function without branches) an instance needs
    /// (0 to 1).
    pub min_branch_coverage: f64,
    /// The share of the built-in mutants of the reference its harness must kill (0 to 1).
    pub min_mutation_score: f64,
    /// Only functions written after this date (a month, a day or an RFC 3339 timestamp; after
    /// a month or a day: from the next one on) by their `created_at`; a function without a
    /// date is never kept. The others get no harness at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub created_after: Option<crate::dates::DateBound>,
    /// Keep one candidate of each function whose qualified name, code (its tokens: comments and
    /// formatting aside, the docstring included) and slice (the code of every definition and
    /// global it reaches, so two copies reading different module constants are two candidates)
    /// are the same, as a vendored copy of a module has: the first in the pipeline's order
    /// (repository, file, definition); the others are excluded as `duplicate` and get no
    /// harness. A sharded build's assemble decides it over every repository, as one machine
    /// does.
    pub dedup: bool,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            min_branch_coverage: 0.8,
            min_mutation_score: 0.0,
            created_after: None,
            dedup: true,
        }
    }
}

/// `[bugfix]`: bug-fix tasks (SWE-style) from the valid harnesses. Present, the build writes
/// `bugfix.jsonl` beside `dataset.jsonl`; absent (the default), nothing of it runs. The tasks
/// are chosen from these keys alone, never from time or order (`docs/bugfix.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BugfixConfig {
    /// Where the bugs come from: `mutants` (the dataset's mutants of an instance's function
    /// that its harness kills on its stable tests) and `history` (the body a function had
    /// before the last commit that changed it, when its harness tells the two apart: the gold
    /// patch is the maintainers' own change).
    pub sources: Vec<BugSource>,
    /// At most this many tasks per instance: changes from the history first, then mutants.
    pub per_function: u32,
    /// Where the bug is: 0, in the function whose harness catches it; 1, in a function or
    /// method of the same module that it calls directly (its slice at distance 1), so that the
    /// agent sees a caller fail and must find the bug one hop away.
    pub depth: u32,
    /// Bugs per task: up to this many, each in another function of the instance's module and
    /// each caught by its harness alone, so that every one must be fixed. At depth 0, one is in
    /// the function whose harness catches them and the others in functions it calls; at depth
    /// 1, all are in functions it calls. A change from the history stays one task of its own;
    /// `[evaluate]` leaves tasks of several bugs out (its answer is one function).
    pub combine: u32,
    /// The problem statement: `report`, written like a user's bug report from the failing
    /// evidence (the call, what it did, what was expected), with no path, line, patch or test
    /// code; `model`, that report rewritten by `model` as an issue in the project's voice
    /// (template `bugfix_issue`; stage `statement`). A model's answer that names the broken
    /// file, the hidden tests or a changed line is not used: the task keeps its report and
    /// says why.
    pub statement: Statement,
    /// With `statement = "model"`: the `[providers.NAME]` asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// With `statement = "model"`: the model asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// With `statement = "model"`: sampling temperature (0: greedy).
    pub temperature: f64,
    /// With `statement = "model"`: the answer's token limit.
    pub max_completion_tokens: u32,
}

impl Default for BugfixConfig {
    fn default() -> Self {
        BugfixConfig {
            sources: vec![BugSource::Mutants],
            per_function: 2,
            depth: 0,
            combine: 1,
            statement: Statement::Report,
            provider: None,
            model: None,
            temperature: 0.0,
            max_completion_tokens: 1024,
        }
    }
}

/// `[bugfix] sources`: where a task's bug comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BugSource {
    Mutants,
    History,
}

/// `[bugfix] statement`: how a task's problem statement is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Statement {
    #[default]
    Report,
    Model,
}
