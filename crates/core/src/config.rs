//! `pipeline.toml`, format version 1: parsed strictly (unknown keys, wrong types and bad values
//! are errors naming the file, line and column) and resolved into a [`Config`].
//!
//! Each stage owns one table (`[extract]`, `[context]`, and later `[env]`, `[generate]`,
//! `[validate]`, `[select]`, `[refine]`, `[providers.NAME]`, `[[variant]]`), so that later stages
//! add tables and keys without changing the meaning of a version-1 file.
//!
//! This is the only module that reads environment variables.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::curation::{LOCK_VERSION, Lock};
use crate::error::{Error, Result};

/// The whole file, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    version: Option<Spanned<i64>>,
    project: Option<ProjectOptions>,
    #[serde(default)]
    repo: Vec<RepoOptions>,
    #[serde(default)]
    source: Vec<SourceOptions>,
    #[serde(default)]
    extract: ExtractConfig,
    #[serde(default)]
    context: ContextConfig,
    #[serde(default)]
    env: EnvOptions,
    #[serde(default)]
    generate: GenerateConfig,
    #[serde(default)]
    validate: ValidateConfig,
    #[serde(default)]
    select: SelectConfig,
    #[serde(default)]
    providers: std::collections::BTreeMap<String, ProviderOptions>,
    #[serde(default)]
    prompts: std::collections::BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    refine: RefineConfig,
    #[serde(default)]
    evaluate: EvaluateConfig,
    #[serde(default)]
    sandbox: SandboxConfig,
    #[serde(default)]
    serve: ServeConfig,
    #[serde(default)]
    variant: Vec<Spanned<VariantOptions>>,
    cache: Option<CacheOptions>,
}

/// `[cache]`: the store shared between machines.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheOptions {
    remote: Option<Spanned<String>>,
    lease_seconds: Option<Spanned<u64>>,
    remote_mode: Option<Spanned<String>>,
    signing_key_env: Option<Spanned<String>>,
}

/// The schemes of a remote cache's URL ([`crate::cache::Scheme`], their one list): object stores
/// (`s3://BUCKET/PREFIX`, `gs://`, `az://`), a WebDAV server (`http://`, `https://`), a folder
/// every host mounts (`file:///PATH`).
pub const REMOTE_SCHEMES: [&str; 6] = crate::cache::Scheme::NAMES;

/// One shard of a build spread over hosts (`--shard I/N`): the repositories whose name hashes
/// to `index` modulo `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (I counts from 0 and is less than N).
    pub fn parse(text: &str) -> std::result::Result<Shard, String> {
        let bad = || {
            format!("`{text}` is not a shard: give `I/N`, with I counting from 0 (`0/2` and `1/2`)")
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 {
            return Err(format!("`{text}`: a build has at least one shard"));
        }
        if index >= count {
            return Err(format!(
                "`{text}`: shard {index} of {count} does not exist (shards count from 0 to {})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard a repository falls in: a stable hash of its name (the same on every host and
    /// every run), modulo the count.
    pub fn of(name: &str, count: u32) -> u32 {
        let h = crate::hash::Hash::of_bytes(name.as_bytes());
        let n = u64::from_le_bytes(h.0[..8].try_into().expect("8 bytes"));
        (n % u64::from(count)) as u32
    }

    /// Whether the repository named `name` is this shard's.
    pub fn holds(&self, name: &str) -> bool {
        Shard::of(name, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `[cache] remote` (or `--remote-cache`): a store shared by every host that builds the
/// pipeline, read after the local cache and written create-only (`docs/caching.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteCache {
    /// The store's URL as given (it holds no credentials: those come from the environment).
    pub url: String,
    /// How long a lease on an action another host may need lasts without renewal.
    pub lease_seconds: u64,
    /// Whether this host writes to the store (`[cache] remote_mode`).
    pub mode: RemoteMode,
    /// `[cache] signing_key_env`: the variable holding the key remote entries are signed and
    /// checked with (the name only: the key is read when the store is opened, and never kept
    /// here), and where the file names it (`file:line:col`, for messages).
    pub signing_key_env: Option<(String, String)>,
}

/// `[cache] remote_mode`: whether this host writes to the remote store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteMode {
    /// Reads it, and stores what it computes there (the default).
    #[default]
    ReadWrite,
    /// Reads it and never writes to it: no results, no leases, no repairs.
    Read,
}

impl RemoteMode {
    /// Parses `read` or `read-write`.
    pub fn parse(text: &str) -> std::result::Result<RemoteMode, String> {
        match text {
            "read-write" => Ok(RemoteMode::ReadWrite),
            "read" => Ok(RemoteMode::Read),
            other => Err(format!(
                "`{other}` is not a remote mode: give `read` (never write to the store) or `read-write`"
            )),
        }
    }
}

impl RemoteCache {
    pub const DEFAULT_LEASE_SECONDS: u64 = 60;

    /// Checks a remote cache's URL: its scheme must be one r2e reads (the message lists them),
    /// with something after it.
    pub fn parse(url: &str) -> std::result::Result<RemoteCache, String> {
        let scheme = url.split_once("://").map(|(s, _)| s);
        let rest = url.split_once("://").map_or("", |(_, r)| r);
        match scheme {
            Some(s) if REMOTE_SCHEMES.contains(&s) && !rest.trim_matches('/').is_empty() => {
                if url.contains('@') && s != "file" {
                    return Err(format!(
                        "the remote cache `{url}` names credentials in its URL; give them in the environment instead (`AWS_ACCESS_KEY_ID`, ...)"
                    ));
                }
                Ok(RemoteCache {
                    url: url.to_owned(),
                    lease_seconds: Self::DEFAULT_LEASE_SECONDS,
                    mode: RemoteMode::default(),
                    signing_key_env: None,
                })
            }
            _ => Err(format!(
                "`{url}` is not a remote cache r2e can use; give a URL starting with {}",
                REMOTE_SCHEMES.map(|s| format!("`{s}://`")).join(", ")
            )),
        }
    }
}

/// Which sandbox runs untrusted code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// This machine: bubblewrap, rlimits, cgroups.
    #[default]
    Local,
    /// Containers of the base image (`r2e image base`, made when missing) on the local Docker
    /// daemon (`sandbox::docker`).
    Docker,
}

/// `[sandbox]`: where code from repositories and models runs, and the limits of one job (the
/// explorer on one function, one validation or check run). Shared by every variant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    pub backend: Backend,
    /// Memory of one job, in MiB.
    pub memory_mib: u64,
    /// Processes and threads of one job at once.
    pub processes: u64,
    /// The largest file a job may write, in MiB.
    pub file_size_mib: u64,
    /// Seconds one run of a harness may take.
    pub run_timeout_seconds: u64,
    /// With `backend = "docker"`: the image whose root filesystem the base image starts from
    /// (its shell, tools and system files), under the configured interpreter and coverage.py.
    /// Taken from the daemon, else pulled from its registry; a `debian:SUITE[-slim]` no
    /// registry serves is made from Debian's packages (`debootstrap`). None: the base image
    /// holds only what it needs of this machine (`sandbox::docker`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    /// With `backend = "docker"` and a remote cache: the registry (`HOST[:PORT]/PREFIX`) the
    /// base image travels through between hosts, pushed as `HOST/PREFIX/r2e-base:TAG` and
    /// pulled by its digest. None: it travels as a `docker save` archive in the remote cache.
    /// How it travels changes nothing a build makes (no key holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: Backend::Local,
            memory_mib: 2048,
            processes: 64,
            file_size_mib: 64,
            run_timeout_seconds: 60,
            base_image: None,
            registry: None,
        }
    }
}

/// `[serve]`: what `r2e serve` shows an agent, and its limits per request. Shared by every
/// variant; read by `serve` only (no build stage reads it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// How much of a test run an agent sees: each failing test's inputs and both outcomes
    /// (`full`), each test's name and outcome (`summary`), or the counts only (`none`).
    pub feedback: Feedback,
    /// The fraction of each instance's tests kept for the reward: never run by `test`, never
    /// shown, counted by `submit`. Which tests is fixed per instance (a hash of its id and the
    /// test's name).
    pub holdout: f64,
    /// The longest `exec` an agent may ask for, in seconds (its `timeout_s` is capped to it).
    pub max_exec_seconds: u64,
    /// The largest file an agent may read or write through the API, in bytes.
    pub max_file_bytes: u64,
    /// The most output of an `exec` returned per stream, in bytes (the rest is cut, and said).
    pub max_output_bytes: u64,
    /// The most bytes a session may add to its workspace beyond the repository's copy it
    /// starts with (files it writes, and what its commands write): a write past it is refused
    /// with 413, and the session goes on.
    pub workspace_limit: u64,
    /// The most files and folders a session may add to its workspace beyond the copy.
    pub workspace_files: u64,
    /// The most bytes one command may add to the workspace (and the largest file it may
    /// write); a command past it is stopped, what it added is taken back, and it is refused
    /// with 413.
    pub command_write_limit: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            feedback: Feedback::Full,
            holdout: 0.0,
            max_exec_seconds: 120,
            max_file_bytes: 1 << 20,
            max_output_bytes: 64 << 10,
            workspace_limit: 64 << 20,
            workspace_files: 10_000,
            command_write_limit: 32 << 20,
        }
    }
}

/// `[[variant]]` as written: a name and overrides of stage settings, merged key by key over the
/// pipeline's own tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantOptions {
    name: Spanned<String>,
    extract: Option<Spanned<toml::Table>>,
    context: Option<Spanned<toml::Table>>,
    generate: Option<Spanned<toml::Table>>,
    select: Option<Spanned<toml::Table>>,
    refine: Option<Spanned<toml::Table>>,
    evaluate: Option<Spanned<toml::Table>>,
    prompts: Option<Spanned<toml::Table>>,
}

/// `[refine]`: docstring refinement by a model (stage `refine`), for selected instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RefineConfig {
    pub enabled: bool,
    /// The `[providers.NAME]` asked, and the model.
    pub provider: Option<String>,
    pub model: Option<String>,
    pub temperature: f64,
    pub max_completion_tokens: u32,
    /// Input/output examples (captured while validating) shown to the model.
    pub max_examples: u32,
}

impl Default for RefineConfig {
    fn default() -> Self {
        RefineConfig {
            enabled: false,
            provider: None,
            model: None,
            temperature: 0.0,
            max_completion_tokens: 1024,
            max_examples: 5,
        }
    }
}

/// `[evaluate]`: code generation by models on the instances (stage `evaluate`), checked
/// through the one check path; pass@k and self-repair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluateConfig {
    pub enabled: bool,
    /// Candidates per instance and model.
    pub samples: u32,
    /// The pass@k reported, each at most `samples`.
    pub k: Vec<u32>,
    pub prompt: PromptStyle,
    pub temperature: f64,
    pub max_completion_tokens: u32,
    /// Self-repair rounds for failing samples.
    pub repair_rounds: u32,
    /// A build that would ask more requests than this refuses to start asking.
    pub max_requests: u64,
    /// The models evaluated. A variant's list replaces the pipeline's.
    pub model: Vec<EvalModel>,
}

impl Default for EvaluateConfig {
    fn default() -> Self {
        EvaluateConfig {
            enabled: false,
            samples: 5,
            k: vec![1, 5],
            prompt: PromptStyle::Direct,
            temperature: 0.2,
            max_completion_tokens: 2048,
            repair_rounds: 0,
            max_requests: 100_000,
            model: Vec::new(),
        }
    }
}

/// How the code-generation prompt asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// The code, at once (`codegen_direct`).
    #[default]
    Direct,
    /// A plan first, then the code (`codegen_cot`): chain of thought.
    Cot,
}

/// One `[[evaluate.model]]`: a `[providers.NAME]` table and its model, or the provider
/// `builtin` with `reference` (the original function) or `mutants` (the i-th mutant).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalModel {
    pub provider: String,
    pub model: String,
    /// The model's training cutoff (a month, a day or an RFC 3339 timestamp): the instances
    /// created after it are its unseen split, reported beside all of them. It splits the
    /// tables only; no key holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff: Option<crate::dates::DateBound>,
}

/// The built-in pseudo-models of `[[evaluate.model]] provider = "builtin"`.
pub const BUILTIN_MODELS: &[&str] = &["reference", "mutants"];

impl EvalModel {
    /// `PROVIDER/MODEL`, as results name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }

    pub fn is_builtin(&self) -> bool {
        self.provider == "builtin"
    }
}

/// `[providers.NAME]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderOptions {
    base_url: Spanned<String>,
    api_key_env: Option<Spanned<String>>,
    api: Option<Api>,
    max_concurrency: Option<u32>,
    timeout_seconds: Option<u64>,
    max_retries: Option<u32>,
}

/// Which OpenAI-compatible endpoint a provider is asked through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `POST {base_url}/chat/completions` with messages.
    #[default]
    Chat,
    /// `POST {base_url}/completions` with one prompt (base models).
    Completions,
}

/// A model server. The API key is read from the environment variable `api_key_env` names, at
/// load time; it is held in memory only and never written anywhere (not even in `Debug`).
#[derive(Clone)]
pub struct ProviderConfig {
    pub name: String,
    pub base_url: String,
    pub api_key_env: Option<String>,
    pub api_key: Option<String>,
    pub api: Api,
    pub max_concurrency: u32,
    pub timeout_seconds: u64,
    pub max_retries: u32,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api", &self.api)
            .finish()
    }
}

/// A prompt template, named as its file is (`prompts/NAME.j2`) and as `[prompts]` names it
/// (serialized as that name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    TestgenEquivalence,
    TestgenOutputPrediction,
    TestgenFixError,
    TestgenImproveCoverage,
    Specgen,
    CodegenDirect,
    CodegenCot,
    CodegenRepair,
    CodegenDirectCompletion,
    CodegenRepairCompletion,
}

impl Template {
    /// Every template, in the order r2e loads them.
    pub const ALL: [Template; 10] = [
        Template::TestgenEquivalence,
        Template::TestgenOutputPrediction,
        Template::TestgenFixError,
        Template::TestgenImproveCoverage,
        Template::Specgen,
        Template::CodegenDirect,
        Template::CodegenCot,
        Template::CodegenRepair,
        Template::CodegenDirectCompletion,
        Template::CodegenRepairCompletion,
    ];

    /// The template's name: its file's stem, and its key in `[prompts]`.
    pub const fn name(self) -> &'static str {
        match self {
            Template::TestgenEquivalence => "testgen_equivalence",
            Template::TestgenOutputPrediction => "testgen_output_prediction",
            Template::TestgenFixError => "testgen_fix_error",
            Template::TestgenImproveCoverage => "testgen_improve_coverage",
            Template::Specgen => "specgen",
            Template::CodegenDirect => "codegen_direct",
            Template::CodegenCot => "codegen_cot",
            Template::CodegenRepair => "codegen_repair",
            Template::CodegenDirectCompletion => "codegen_direct_completion",
            Template::CodegenRepairCompletion => "codegen_repair_completion",
        }
    }

    /// The template of that name, if there is one.
    pub fn from_name(name: &str) -> Option<Template> {
        Template::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Ordered by name, as `[prompts]` lists them.
impl Ord for Template {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for Template {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectOptions {
    name: Option<String>,
    output: Option<Spanned<String>>,
    cache: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepoOptions {
    name: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    git: Option<Spanned<String>>,
    rev: Option<Spanned<String>>,
    /// A source release on a package index: `NAME==VERSION`.
    pypi: Option<Spanned<String>>,
    /// The release's archive's sha256 (with `pypi`).
    sha256: Option<Spanned<String>>,
    /// The simple index (PEP 503/691) the release is asked of (with `pypi`).
    index_url: Option<Spanned<String>>,
    include: Option<Vec<Spanned<String>>>,
    exclude: Option<Vec<Spanned<String>>>,
    default_exclude: Option<bool>,
}

/// A `[[source]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceOptions {
    github: Spanned<String>,
    limit: Option<Spanned<i64>>,
    require_files: Option<Vec<Spanned<String>>>,
    licenses: Option<Vec<Spanned<String>>>,
    max_size_kb: Option<u64>,
    min_stars: Option<u64>,
    api_url: Option<Spanned<String>>,
    token_env: Option<Spanned<String>>,
}

/// Where repositories come from besides `[[repo]]`: a GitHub search (`github = "QUERY"`), its
/// candidates filtered after the search. `r2e curate` resolves the sources into `repos.lock`;
/// the build reads the lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceConfig {
    /// The search query as written.
    pub github: String,
    /// The same, checked and parsed (`curation::parse_query`); the fingerprint holds `github`.
    #[serde(skip)]
    pub query: crate::curation::GithubQuery,
    /// At most this many repositories kept (the most starred first).
    pub limit: u64,
    /// A repository is kept when its root holds any of these files.
    pub require_files: Vec<String>,
    /// SPDX ids of the licences allowed; empty: any licence, or none.
    pub licenses: Vec<String>,
    /// Repositories larger than this (GitHub's `size`, KB) are left out.
    pub max_size_kb: Option<u64>,
    /// Repositories with fewer stars are left out.
    pub min_stars: Option<u64>,
    /// The API's base URL (`https://api.github.com`; GitHub Enterprise's `https://HOST/api/v3`;
    /// `http://` only to this machine).
    pub api_url: String,
    /// The environment variable holding the token (read when searching, never stored); not
    /// part of the fingerprint: the same search with another token finds the same.
    #[serde(skip)]
    pub token_env: String,
}

/// The packaging files a source's candidates must have one of, unless `require_files` says.
pub const PACKAGING_FILES: &[&str] = &["pyproject.toml", "setup.py", "setup.cfg"];

impl SourceConfig {
    /// What the lock records of this source to tell when it changed: a hash of every setting
    /// but the token's variable.
    pub fn fingerprint(&self) -> String {
        crate::hash::Hash::of_key(self).to_hex()
    }
}

/// The fingerprint of a pipeline's sources, in order.
pub fn sources_fingerprint(sources: &[SourceConfig]) -> String {
    crate::hash::Hash::of_key(
        &sources
            .iter()
            .map(SourceConfig::fingerprint)
            .collect::<Vec<_>>(),
    )
    .to_hex()
}

/// The curation filters of the `extract` stage (R2E's rules). Each is switchable; an excluded
/// function records the first filter that excluded it, by the name of its switch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractConfig {
    /// Exclude the functions of a file whose path is not a module name (a folder or file name
    /// that is not an identifier, as `bin/update-tables.py`): nothing can import it.
    pub not_module: bool,
    /// Exclude the functions of a module for another platform: one that imports a Windows-only
    /// module at module level, unguarded, or raises at module level under a platform check
    /// that holds on Linux.
    pub platform: bool,
    /// Exclude functions without a docstring.
    pub no_docstring: bool,
    /// Exclude `__dunder__` names.
    pub dunder: bool,
    /// Exclude names starting with one of `prefixes` (case-insensitive, leading `_` ignored).
    pub name_prefix: bool,
    pub prefixes: Vec<String>,
    /// Exclude functions with decorators other than `allowed_decorators`.
    pub decorator: bool,
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
    pub max_lines: u32,
    /// Exclude functions where more than half of the `return`s return a literal.
    pub literal_returns: bool,
    /// Exclude functions whose docstring or code mentions a blocked keyword.
    pub keywords: bool,
    pub docstring_keywords: Vec<String>,
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

/// How the context of a function is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The function alone.
    Naive,
    /// Its file and the repository files it imports.
    Full,
    /// Its dependency slice, grouped by file, in dependency order.
    #[default]
    Sliced,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
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

use crate::records::Feedback;
pub use crate::records::Generator;

/// What a model-written harness asserts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HarnessMode {
    /// The function under test and the reference are called on the same inputs and compared.
    #[default]
    Equivalence,
    /// The model predicts expected outputs and the harness asserts them.
    OutputPrediction,
}

/// `[generate]`: the harness generator and its budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenerateConfig {
    pub generator: Generator,
    /// For `llm`: the `[providers.NAME]` asked, and the model.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `equivalence` (R2E's harness) or `output_prediction` (the paper's baseline).
    pub mode: HarnessMode,
    /// Repair rounds after the first answer (fix-error, improve-coverage).
    pub repair_rounds: u32,
    /// Sampling: the temperature (0 = greedy) and the answer's token limit.
    pub temperature: f64,
    pub max_completion_tokens: u32,
    /// Executions of the function the explorer may spend; this, not time, decides what is kept.
    pub budget: u32,
    pub seed: u64,
    pub max_tests: u32,
    /// Milliseconds one call may take.
    pub per_call_timeout_ms: u64,
    /// A safety stop for one exploration, recorded when it fires.
    pub time_limit_seconds: u64,
    /// Run each repository's own test files once (pytest where the environment has it, else
    /// unittest) and hand the arguments they pass to the candidates to the explorer, as call
    /// sites (`r2e_capture.py`).
    pub capture_tests: bool,
    /// Seconds a repository's test suite may run for that; the calls recorded until then count.
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
/// [`Policy`](crate::verdict::Policy)), and the reference's repeated runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValidateConfig {
    /// Compare exception messages too (by default only their types).
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unstable {
    /// The test is dropped from the harness; the rest must still make a valid harness.
    #[default]
    Drop,
    /// The harness is invalid (`nondeterministic`).
    Invalid,
}

/// `[select]`: which validated harnesses make benchmark instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectConfig {
    /// The branch coverage (line coverage, for a function without branches) an instance needs.
    pub min_branch_coverage: f64,
    /// The share of the built-in mutants of the reference its harness must kill.
    pub min_mutation_score: f64,
    /// Only functions written after this date (a month, a day or an RFC 3339 timestamp; after
    /// a month or a day: from the next one on) by their `created_at`; a function without a
    /// date is never kept. The others get no harness at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_after: Option<crate::dates::DateBound>,
    /// Keep one candidate of each function whose qualified name, code (its tokens, without
    /// comments or formatting) and slice (the code of what it reaches) are the same: the first
    /// in the pipeline's order (repository, file, definition); the others are excluded as
    /// `duplicate` and get no harness. A sharded build's assemble decides it over every
    /// repository, as one machine does.
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

/// `[env]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EnvOptions {
    python: Option<String>,
    installer: Option<Installer>,
    extra_packages: Option<Vec<String>>,
    infer_imports: Option<bool>,
    timeout_seconds: Option<u64>,
    system_site_packages: Option<bool>,
    install_project: Option<bool>,
    exclude_newer: Option<Spanned<String>>,
}

/// How environments are created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// `uv` when it is available or can be installed from the package index, else `venv` + pip.
    #[default]
    Auto,
    Uv,
    Pip,
}

/// The settings of the `env` stage, with what it takes from the environment variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnvConfig {
    /// The interpreter environments are made from (never downloaded).
    pub python: String,
    pub installer: Installer,
    /// Installed into every environment besides the repository's dependencies and `coverage`.
    pub extra_packages: Vec<String>,
    /// Install third-party modules the code imports but no declaration names (as pipreqs does).
    pub infer_imports: bool,
    pub timeout_seconds: u64,
    /// Let environments see the interpreter's own packages (for offline machines that have
    /// `coverage` and the dependencies installed already).
    pub system_site_packages: bool,
    /// Build the repository as a wheel with its own build backend and install it on top of
    /// its environment (its metadata, entry points and built extensions), as its users get it.
    pub install_project: bool,
    /// Resolve as the index was at this instant (RFC 3339 UTC, `2025-06-01T00:00:00Z`): files
    /// uploaded later are ignored (uv's `--exclude-newer`), so that a rebuild months later
    /// installs the same versions. `[env] exclude_newer`, or the curation date of the
    /// `repos.lock` the repositories come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_newer: Option<String>,
    /// Index and certificate settings passed to installers (`PIP_INDEX_URL`, `UV_INDEX_URL`,
    /// `PIP_EXTRA_INDEX_URL`, `UV_EXTRA_INDEX_URL`, `SSL_CERT_FILE`, proxies), by name.
    pub passthrough: Vec<(String, String)>,
}

/// Environment variables that installers honour and that change what they install or reach.
const PASSTHROUGH: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "PIP_CERT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "PIP_RETRIES",
    "PIP_NO_INDEX",
    "PIP_FIND_LINKS",
    "UV_FIND_LINKS",
    "UV_OFFLINE",
    "PIP_TIMEOUT",
    "UV_HTTP_TIMEOUT",
];

impl EnvConfig {
    /// The local paths the index settings name (a folder of wheels, certificates): what an
    /// installation must see of this machine to use them.
    pub fn index_mounts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (key, value) in &self.passthrough {
            if key.contains("FIND_LINKS") || key.contains("CERT") {
                out.extend(
                    value
                        .split([' ', ','])
                        .map(std::path::Path::new)
                        .filter(|p| p.is_absolute() && p.exists())
                        .map(std::path::Path::to_path_buf),
                );
            }
        }
        out
    }
}

impl EnvOptions {
    fn resolve(self, src: &Source) -> Result<EnvConfig> {
        let exclude_newer = match &self.exclude_newer {
            Some(v) => Some(crate::dates::utc_instant(v.get_ref()).ok_or_else(|| {
                src.at(
                    Some(v.span()),
                    &format!(
                        "`{}` is not an instant in UTC: write `2025-06-01T00:00:00Z` (RFC 3339, `Z`) or a date `2025-06-01` (its midnight UTC)",
                        v.get_ref()
                    ),
                )
            })?),
            None => None,
        };
        Ok(EnvConfig {
            python: self.python.unwrap_or_else(|| "python3".into()),
            installer: self.installer.unwrap_or_default(),
            extra_packages: self.extra_packages.unwrap_or_default(),
            infer_imports: self.infer_imports.unwrap_or(true),
            timeout_seconds: self.timeout_seconds.unwrap_or(900),
            system_site_packages: self.system_site_packages.unwrap_or(false),
            install_project: self.install_project.unwrap_or(true),
            passthrough: PASSTHROUGH
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
            exclude_newer,
        })
    }
}

/// Where a repository's files come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepoSource {
    /// A local folder, read from its working tree.
    Path(PathBuf),
    /// A git repository (URL or path) at a revision.
    Git { url: String, rev: String },
    /// A source release on a package index (`pypi = "NAME==VERSION"`).
    Pypi(PypiRelease),
}

/// A source release (sdist) on a package index: its archive, checked against the hash the
/// index publishes and the one the pipeline writes, is unpacked as the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PypiRelease {
    /// The project's name as written.
    pub project: String,
    /// The version as written (`==` pins exactly one).
    pub version: String,
    /// The simple index's URL, ending in `/` (`https://pypi.org/simple/` unless `index_url`).
    pub index_url: String,
    /// `sha256 = "..."`, lowercase, when written.
    pub sha256: Option<PinnedHash>,
}

/// A hash the pipeline writes, with where it is written: a download that differs is refused
/// at that place (`file:line:col`), as bad input is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinnedHash {
    /// Lowercase hex.
    pub hex: String,
    /// `file:line:col` of the value in the pipeline.
    pub at: String,
}

/// The default package index of `[[repo]] pypi`.
pub const PYPI_INDEX: &str = "https://pypi.org/simple/";

impl PypiRelease {
    /// The project's name normalized as PEP 503 does (runs of `-`, `_`, `.` become one `-`,
    /// lowercase): how the index names its page and how archive names are compared.
    pub fn normalized(&self) -> String {
        normalize_project(&self.project)
    }
}

/// A project name normalized as PEP 503 does.
pub fn normalize_project(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoConfig {
    pub name: String,
    pub source: RepoSource,
    /// Which of its files give candidates.
    pub scope: Scope,
}

/// The files of a repository whose functions become candidates (`include` and `exclude` globs
/// over paths relative to its root, `/`-separated). Every file is still parsed and sliced:
/// out-of-scope code is context and call sites, never a candidate, and its imports are
/// installed only when in-scope code imports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Scope {
    /// Empty: every file.
    pub include: Vec<String>,
    /// [`DEFAULT_EXCLUDE`] (unless `default_exclude = false`), then the repo's own.
    pub exclude: Vec<String>,
}

/// What a repository's scope leaves out unless `default_exclude = false`: tests, docs,
/// examples, benchmarks, packaging scripts and vendored helpers.
pub const DEFAULT_EXCLUDE: &[&str] = &[
    "**/test/**",
    "**/tests/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/docs/**",
    "**/doc/**",
    "**/examples/**",
    "**/example/**",
    "**/benchmarks/**",
    "**/benchmark/**",
    "**/setup.py",
    "**/versioneer.py",
    "**/_version.py",
    "**/six.py",
];

impl Default for Scope {
    fn default() -> Self {
        Scope {
            include: Vec::new(),
            exclude: DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl Scope {
    /// The compiled globs (checked when the pipeline was read).
    pub fn matcher(&self) -> ScopeMatcher {
        let set = |globs: &[String]| {
            let mut b = globset::GlobSetBuilder::new();
            for g in globs {
                b.add(glob(g).expect("globs are checked when the pipeline is read"));
            }
            b.build().expect("checked globs build")
        };
        ScopeMatcher {
            include: (!self.include.is_empty()).then(|| set(&self.include)),
            exclude: set(&self.exclude),
        }
    }
}

/// A glob over repository paths: `*` stays within a folder, `**/` matches any folders (none
/// included).
fn glob(text: &str) -> std::result::Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(text)
        .literal_separator(true)
        .build()
}

/// [`Scope`], compiled.
pub struct ScopeMatcher {
    include: Option<globset::GlobSet>,
    exclude: globset::GlobSet,
}

impl ScopeMatcher {
    /// Whether the file at `path` (relative to the repository's root) gives candidates.
    pub fn contains(&self, path: &str) -> bool {
        self.include.as_ref().is_none_or(|i| i.is_match(path)) && !self.exclude.is_match(path)
    }
}

/// A resolved pipeline.
#[derive(Clone, Debug)]
pub struct Config {
    /// The pipeline file, absolute.
    pub file: PathBuf,
    pub name: String,
    pub output: PathBuf,
    pub cache: PathBuf,
    pub repos: Vec<RepoConfig>,
    /// `[[source]]` tables: searches `r2e curate` pins in `repos.lock`, whose repositories
    /// `repos` holds (after the `[[repo]]` ones) when the lock was read.
    pub sources: Vec<SourceConfig>,
    pub extract: ExtractConfig,
    pub context: ContextConfig,
    pub env: EnvConfig,
    pub generate: GenerateConfig,
    /// `[validate]`: what a correct candidate may change and still pass (`docs/harness.md`),
    /// how many times the reference runs, and what becomes of a test whose runs disagree.
    pub validate: ValidateConfig,
    pub select: SelectConfig,
    pub providers: Vec<ProviderConfig>,
    /// Prompt template files named in `[prompts]`, absolute; the others come from the
    /// pipeline's `prompts/` folder or, failing that, r2e's built-in templates.
    pub prompts: Vec<(Template, PathBuf)>,
    pub refine: RefineConfig,
    pub evaluate: EvaluateConfig,
    pub sandbox: SandboxConfig,
    /// `[serve]`: what `r2e serve` shows agents.
    pub serve: ServeConfig,
    /// `[cache] remote`: the store shared between hosts, if any.
    pub remote: Option<RemoteCache>,
    /// `[[variant]]` tables, each resolved into a whole configuration whose output is
    /// `<output>/variants/NAME`. Empty: the pipeline builds its own configuration into `<output>`.
    pub variants: Vec<Variant>,
}

/// One `[[variant]]`: its name and its resolved configuration.
#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub cfg: Config,
}

impl Config {
    /// The provider the `[generate]` stage asks, when its generator needs one.
    pub fn generate_provider(&self) -> Option<&ProviderConfig> {
        let name = self.generate.provider.as_deref()?;
        self.providers.iter().find(|p| p.name == name)
    }

    /// The provider the `[refine]` stage asks, when it is enabled.
    pub fn refine_provider(&self) -> Option<&ProviderConfig> {
        if !self.refine.enabled {
            return None;
        }
        let name = self.refine.provider.as_deref()?;
        self.providers.iter().find(|p| p.name == name)
    }

    /// What one build computes: every variant, or this configuration alone (named `None`).
    pub fn builds(&self) -> Vec<(Option<&str>, &Config)> {
        if self.variants.is_empty() {
            vec![(None, self)]
        } else {
            self.variants
                .iter()
                .map(|v| (Some(v.name.as_str()), &v.cfg))
                .collect()
        }
    }

    /// This configuration, and its variants', with the local cache at `cache` (`--cache`).
    pub fn with_cache(mut self, cache: &Path) -> Config {
        self.cache = cache.to_path_buf();
        for v in &mut self.variants {
            v.cfg.cache = cache.to_path_buf();
        }
        self
    }

    /// This configuration, and its variants', with `remote` as the shared store
    /// (`--remote-cache`, which wins over `[cache] remote`). The lease term, the mode and the
    /// signing key's variable stay the file's.
    pub fn with_remote(mut self, mut remote: RemoteCache) -> Config {
        if let Some(r) = &self.remote {
            remote.lease_seconds = r.lease_seconds;
            remote.mode = r.mode;
            remote.signing_key_env.clone_from(&r.signing_key_env);
        }
        for v in &mut self.variants {
            v.cfg.remote = Some(remote.clone());
        }
        self.remote = Some(remote);
        self
    }

    /// This configuration, and its variants', with the remote store in `mode` (`--remote-mode`);
    /// `None` when there is no remote store.
    pub fn with_remote_mode(mut self, mode: RemoteMode) -> Option<Config> {
        self.remote.as_mut()?.mode = mode;
        for v in &mut self.variants {
            if let Some(r) = &mut v.cfg.remote {
                r.mode = mode;
            }
        }
        Some(self)
    }

    /// This configuration with its output at `output` (its variants' under it, as the file
    /// lays them out).
    pub fn with_output(mut self, output: &Path) -> Config {
        self.output = output.to_path_buf();
        for v in &mut self.variants {
            v.cfg.output = output.join("variants").join(&v.name);
        }
        self
    }

    /// This configuration, and its variants', with only the repositories `keep` accepts.
    pub fn with_repos(mut self, keep: &dyn Fn(&RepoConfig) -> bool) -> Config {
        self.repos.retain(|r| keep(r));
        for v in &mut self.variants {
            v.cfg.repos.retain(|r| keep(r));
        }
        self
    }

    /// The configuration of the variant `name` (exit 2 when there is none).
    pub fn variant(&self, name: &str) -> Result<&Config> {
        self.variants
            .iter()
            .find(|v| v.name == name)
            .map(|v| &v.cfg)
            .ok_or_else(|| {
                let known: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
                Error::input(format!(
                    "`{}` defines no variant `{name}`{}",
                    self.file.display(),
                    if known.is_empty() {
                        " (it has no `[[variant]]` tables)".to_owned()
                    } else {
                        format!("; its variants are `{}`", known.join("`, `"))
                    }
                ))
            })
    }
}

/// Reads and resolves the pipeline at `path`.
pub fn load(path: &Path) -> Result<Config> {
    let text = match fs_err::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|_| Error::input(format!("{}: not valid UTF-8 text", path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::input(format!(
                "pipeline file `{}` does not exist (pass another with `-p PATH`, or run where a `pipeline.toml` is)",
                path.display()
            )));
        }
        Err(e) => return Err(Error::input(e.to_string())),
    };
    let file =
        std::path::absolute(path).map_err(|e| Error::env(format!("{}: {e}", path.display())))?;
    parse(&text, &file)
}

/// The text of a pipeline and its file: where errors point.
struct Source<'a> {
    text: &'a str,
    file: &'a Path,
}

impl Source<'_> {
    /// Bad input at `span` (the start of the file when unknown), as `file:line:col: msg`.
    fn at(&self, span: Option<Range<usize>>, msg: &str) -> Error {
        Error::input(format!("{}: {msg}", self.place(span)))
    }

    /// `file:line:col` of `span` (the start of the file when unknown).
    fn place(&self, span: Option<Range<usize>>) -> String {
        let (line, col) = span.map_or((1, 1), |s| line_col(self.text, s.start));
        format!("{}:{line}:{col}", self.file.display())
    }
}

/// Reads and resolves the pipeline at `path` without its `repos.lock`: what `r2e curate`
/// reads (its sources, to search); `repos` holds only the `[[repo]]` tables.
pub fn load_unlocked(path: &Path) -> Result<Config> {
    let text = fs_err::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::input(format!(
                "pipeline file `{}` does not exist (pass another, or run where a `pipeline.toml` is)",
                path.display()
            ))
        } else {
            Error::input(e.to_string())
        }
    })?;
    let file =
        std::path::absolute(path).map_err(|e| Error::env(format!("{}: {e}", path.display())))?;
    parse_with(&text, &file, false)
}

/// Parses pipeline text; `file` is its absolute path (for messages and relative paths). A
/// pipeline with `[[source]]` tables takes their repositories from the `repos.lock` beside it.
pub fn parse(text: &str, file: &Path) -> Result<Config> {
    parse_with(text, file, true)
}

fn parse_with(text: &str, file: &Path, read_lock: bool) -> Result<Config> {
    let src = Source { text, file };
    let options: Options = toml::from_str(text).map_err(|e| src.at(e.span(), e.message()))?;
    if let Some(v) = &options.version
        && *v.get_ref() != 1
    {
        return Err(src.at(
            Some(v.span()),
            &format!(
                "unsupported format version {}; this r2e reads version 1",
                v.get_ref()
            ),
        ));
    }
    let base = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let project = options.project.unwrap_or(ProjectOptions {
        name: None,
        output: None,
        cache: None,
    });
    let rel = |p: &Option<Spanned<String>>, default: &str| -> PathBuf {
        let s = p.as_ref().map_or(default, |s| s.get_ref().as_str());
        base.join(s)
    };
    let mut prompts = Vec::new();
    for (pname, path) in &options.prompts {
        prompts.push(
            prompt_file(&base, pname, path.get_ref()).map_err(|m| src.at(Some(path.span()), &m))?,
        );
    }
    let (sources, source_spans) = sources(&src, &options.source)?;
    let mut repos = repos(&src, &base, options.repo, !sources.is_empty())?;
    let mut env = options.env.resolve(&src)?;
    if read_lock && !sources.is_empty() {
        locked_repos(&src, &sources, &source_spans, &mut repos, &mut env)?;
    }
    let cfg = Config {
        file: file.to_path_buf(),
        name: project.name.clone().unwrap_or_else(|| {
            base.file_name()
                .map_or_else(|| "r2e".into(), |n| n.to_string_lossy().into_owned())
        }),
        output: rel(&project.output, "out"),
        cache: rel(&project.cache, "cache"),
        repos,
        sources,
        extract: options.extract,
        context: options.context,
        env,
        generate: options.generate,
        validate: options.validate,
        select: options.select,
        providers: providers(&src, options.providers)?,
        prompts,
        refine: options.refine,
        evaluate: options.evaluate,
        sandbox: options.sandbox,
        serve: options.serve,
        remote: remote_cache(&src, options.cache)?,
        variants: Vec::new(),
    };
    check_stages(&cfg, &|section, key, msg| {
        src.at(find_section_key(text, section, key), msg)
    })?;
    check_places(&src, &cfg, &project)?;
    if options.variant.is_empty() {
        return Ok(cfg);
    }
    let variants = variants(&src, &base, &cfg, options.variant)?;
    Ok(Config { variants, ..cfg })
}

/// The `[cache]` table's remote store.
fn remote_cache(src: &Source, options: Option<CacheOptions>) -> Result<Option<RemoteCache>> {
    let Some(options) = options else {
        return Ok(None);
    };
    let Some(url) = options.remote else {
        let spans = [
            ("lease_seconds", options.lease_seconds.map(|l| l.span())),
            ("remote_mode", options.remote_mode.map(|m| m.span())),
            ("signing_key_env", options.signing_key_env.map(|k| k.span())),
        ];
        if let Some((name, span)) = spans.into_iter().find(|(_, s)| s.is_some()) {
            return Err(src.at(
                span,
                &format!("`{name}` needs a `remote` store in `[cache]`"),
            ));
        }
        return Ok(None);
    };
    let mut remote = RemoteCache::parse(url.get_ref()).map_err(|m| src.at(Some(url.span()), &m))?;
    if let Some(l) = options.lease_seconds {
        if *l.get_ref() < 5 {
            return Err(src.at(
                Some(l.span()),
                "`lease_seconds` must be at least 5: a lease is renewed every third of it",
            ));
        }
        remote.lease_seconds = *l.get_ref();
    }
    if let Some(m) = options.remote_mode {
        remote.mode = RemoteMode::parse(m.get_ref()).map_err(|e| src.at(Some(m.span()), &e))?;
    }
    if let Some(var) = options.signing_key_env {
        let name = env_var_name(src, &var, "signing_key_env", "key")?;
        let (line, col) = line_col(src.text, var.span().start);
        remote.signing_key_env =
            Some((name.clone(), format!("{}:{line}:{col}", src.file.display())));
    }
    Ok(Some(remote))
}

/// The `[[repo]]` tables: each a folder that exists or a git URL, with a unique name.
fn repos(
    src: &Source,
    base: &Path,
    options: Vec<RepoOptions>,
    has_sources: bool,
) -> Result<Vec<RepoConfig>> {
    if options.is_empty() && !has_sources {
        return Err(src.at(
            None,
            "no `[[repo]]` or `[[source]]` table: name at least one repository to build, or a search to curate",
        ));
    }
    let mut repos: Vec<RepoConfig> = Vec::new();
    for r in options {
        let source = repo_source(src, base, &r)?;
        if let Some(other) = repos.iter().find(|o| same_source(&o.source, &source)) {
            let span = r
                .path
                .as_ref()
                .or(r.git.as_ref())
                .or(r.pypi.as_ref())
                .map(|s| s.span());
            return Err(src.at(
                span,
                &format!(
                    "this repo is repo `{}` again (the same folder, or the same URL and revision): every instance would be there twice",
                    other.name
                ),
            ));
        }
        let name = match &r.name {
            Some(n) => {
                let n_ref = n.get_ref();
                if let Err(why) = check_repo_name(n_ref) {
                    return Err(src.at(Some(n.span()), &why));
                }
                n_ref.clone()
            }
            None => default_repo_name(&source),
        };
        if repos.iter().any(|other| other.name == name) {
            let span = r
                .name
                .as_ref()
                .or(r.path.as_ref())
                .or(r.git.as_ref())
                .or(r.pypi.as_ref())
                .map(|s| s.span());
            return Err(src.at(
                span,
                &format!("two repos are named `{name}`; give one a `name = \"...\"`"),
            ));
        }
        let scope = scope(src, &r)?;
        repos.push(RepoConfig {
            name,
            source,
            scope,
        });
    }
    Ok(repos)
}

/// Checks a repo's name (a `[[repo]] name`, or one a lock gives): non-empty, without `:`, `/`
/// or `\\`.
pub fn check_repo_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() || name.contains([':', '/', '\\']) {
        return Err("a repo name must be non-empty and hold no `:`, `/` or `\\`".into());
    }
    Ok(())
}

/// Reads a `repos.lock` (`curation::Lock`); `Ok(None)` when there is none. A lock that does not parse is an error naming
/// its file, line and column.
pub fn read_lock(path: &Path) -> Result<Option<Lock>> {
    let text = match fs_err::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::input(e.to_string())),
    };
    let lock: Lock = toml::from_str(&text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |s| line_col(&text, s.start));
        Error::input(format!(
            "{}:{line}:{col}: {} (run `r2e curate --update` to write it again)",
            path.display(),
            e.message()
        ))
    })?;
    if lock.version != LOCK_VERSION {
        return Err(Error::input(format!(
            "{}: lock format version {}; this r2e reads version {LOCK_VERSION} (run `r2e curate --update`)",
            path.display(),
            lock.version
        )));
    }
    Ok(Some(lock))
}

/// The `[[source]]` tables, checked, with the span of each one's query (where messages about
/// the source and its lock point).
fn sources(
    src: &Source,
    options: &[SourceOptions],
) -> Result<(Vec<SourceConfig>, Vec<Range<usize>>)> {
    let mut out = Vec::new();
    let mut spans = Vec::new();
    for o in options {
        let query = o.github.get_ref();
        let span = o.github.span();
        // Inside a basic string without escapes, a term's offset in the query is its place in
        // the file; otherwise the message points at the string.
        let raw = &src.text[span.clone()];
        let inner = raw.len() >= 2 && &raw[1..raw.len() - 1] == query.as_str();
        let parsed = crate::curation::parse_query(query).map_err(|e| {
            let at = if inner {
                span.start + 1 + e.offset
            } else {
                span.start
            };
            src.at(Some(at..at), &e.message)
        })?;
        if query.trim().is_empty() {
            return Err(src.at(Some(span), "the `github` query is empty"));
        }
        let limit = match &o.limit {
            Some(l) if *l.get_ref() < 1 => {
                return Err(src.at(Some(l.span()), "`limit` must be at least 1"));
            }
            Some(l) => *l.get_ref() as u64,
            None => 100,
        };
        let names =
            |list: &Option<Vec<Spanned<String>>>, what: &str| -> Result<Option<Vec<String>>> {
                let Some(list) = list else { return Ok(None) };
                let mut out = Vec::new();
                for n in list {
                    let v = n.get_ref().trim();
                    if v.is_empty() || v.contains('/') {
                        return Err(src.at(
                            Some(n.span()),
                            &format!("`{what}` holds names, non-empty and without `/`"),
                        ));
                    }
                    out.push(v.to_owned());
                }
                Ok(Some(out))
            };
        let require_files = names(&o.require_files, "require_files")?
            .unwrap_or_else(|| PACKAGING_FILES.iter().map(|f| f.to_string()).collect());
        let licenses = names(&o.licenses, "licenses")?.unwrap_or_default();
        let api_url = match &o.api_url {
            Some(u) => {
                let url = u.get_ref().trim_end_matches('/');
                let origin = crate::curation::Origin::of(url)
                    .filter(|o| o.scheme == "https" || o.scheme == "http");
                let Some(origin) = origin else {
                    return Err(src.at(
                        Some(u.span()),
                        "`api_url` is an `https://` (or `http://`) URL",
                    ));
                };
                // The token goes to this URL: never in clear text over a network.
                if origin.scheme == "http" && !origin.is_loopback() {
                    return Err(src.at(
                        Some(u.span()),
                        "`api_url` is `https://`: `http://` is allowed only to this machine (`localhost`, `127.0.0.1`, `::1`), since the token would travel unencrypted",
                    ));
                }
                url.to_owned()
            }
            None => "https://api.github.com".to_owned(),
        };
        let token_env = match &o.token_env {
            Some(var) => env_var_name(src, var, "token_env", "token")?.clone(),
            None => "GITHUB_TOKEN".to_owned(),
        };
        out.push(SourceConfig {
            github: query.clone(),
            query: parsed,
            limit,
            require_files,
            licenses,
            max_size_kb: o.max_size_kb,
            min_stars: o.min_stars,
            api_url,
            token_env,
        });
        spans.push(span);
    }
    Ok((out, spans))
}

/// The repositories of the `repos.lock` beside the pipeline, added to `repos` as git
/// repositories at their pinned commits; the lock's curation date becomes the environments'
/// `exclude_newer` unless `[env]` sets one. No lock, or a lock of other sources, is bad input.
fn locked_repos(
    src: &Source,
    sources: &[SourceConfig],
    spans: &[Range<usize>],
    repos: &mut Vec<RepoConfig>,
    env: &mut EnvConfig,
) -> Result<()> {
    let path = crate::curation::lock_path(src.file);
    let at = spans.first().cloned();
    let Some(lock) = read_lock(&path)? else {
        return Err(src.at(
            at,
            &format!(
                "the pipeline has `[[source]]` tables but no lock `{}`: run `r2e curate` to search and pin their repositories",
                path.display()
            ),
        ));
    };
    if lock.sources != sources_fingerprint(sources) {
        let changed: Vec<String> = sources
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                lock.source
                    .get(*i)
                    .is_none_or(|l| l.fingerprint != s.fingerprint())
            })
            .map(|(i, _)| format!("source {}", i + 1))
            .collect();
        let at = sources
            .iter()
            .zip(spans)
            .enumerate()
            .find(|(i, (s, _))| {
                lock.source
                    .get(*i)
                    .is_none_or(|l| l.fingerprint != s.fingerprint())
            })
            .map(|(_, (_, span))| span.clone())
            .or(at);
        return Err(src.at(
            at,
            &format!(
                "`{}` was curated from other `[[source]]` settings than the pipeline's ({} changed, or sources were added or removed): run `r2e curate --update` to search again",
                path.display(),
                if changed.is_empty() { "their number".to_owned() } else { changed.join(", ") }
            ),
        ));
    }
    // The lock's text, to place a message at the key it is about (the lock holds no spans).
    let text = fs_err::read_to_string(&path).unwrap_or_default();
    let place = |table: Option<usize>, key: &str| lock_place(&path, &text, table, key);
    let bad = |i: usize, key: &str, r: &crate::curation::LockedRepo, why: &str| {
        Error::input(format!(
            "{}: repository `{}` (`{}`): {why} (run `r2e curate --update` to write the lock again)",
            place(Some(i), key),
            r.name,
            r.full_name
        ))
    };
    let Some(curated_at) = crate::dates::utc_instant(&lock.curated_at) else {
        return Err(Error::input(format!(
            "{}: `curated_at = {:?}` is not an RFC 3339 UTC instant (run `r2e curate --update` to write the lock again)",
            place(None, "curated_at"),
            lock.curated_at
        )));
    };
    for (i, r) in lock.repo.iter().enumerate() {
        let Some(source) = sources.get(r.source) else {
            return Err(bad(
                i,
                "source",
                r,
                &format!("`source = {}` names no `[[source]]`", r.source),
            ));
        };
        check_repo_name(&r.name).map_err(|why| bad(i, "name", r, &why))?;
        crate::curation::check_full_name(&r.full_name)
            .map_err(|why| bad(i, "full_name", r, &why))?;
        crate::curation::check_clone_url(&r.url, &source.api_url)
            .map_err(|why| bad(i, "url", r, &why))?;
        crate::curation::check_commit(&r.commit).map_err(|why| bad(i, "commit", r, &why))?;
        let git = RepoSource::Git {
            url: r.url.clone(),
            rev: r.commit.clone(),
        };
        if let Some(other) = repos.iter().find(|o| same_source(&o.source, &git)) {
            return Err(bad(
                i,
                "url",
                r,
                &format!(
                    "it is repo `{}` again (the same URL and commit): every instance would be there twice; remove one",
                    other.name
                ),
            ));
        }
        if let Some(other) = repos.iter().find(|o| o.name == r.name) {
            return Err(Error::input(format!(
                "{}: repository `{}` has the name of repo `{}` of the pipeline; give the pipeline's one another `name`",
                path.display(),
                r.full_name,
                other.name
            )));
        }
        repos.push(RepoConfig {
            name: r.name.clone(),
            source: RepoSource::Git {
                url: r.url.clone(),
                rev: r.commit.clone(),
            },
            scope: Scope::default(),
        });
    }
    if env.exclude_newer.is_none() {
        env.exclude_newer = Some(curated_at);
    }
    Ok(())
}

/// `FILE:LINE:COL` of `key` in a lock's text: in its `table`-th `[[repo]]` table (0-based), or
/// before any table; `FILE` alone when it is not found.
fn lock_place(path: &Path, text: &str, table: Option<usize>, key: &str) -> String {
    let mut tables = 0usize;
    let mut here = table.is_none();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            here = t.trim_end() == "[[repo]]" && {
                tables += 1;
                Some(tables - 1) == table
            };
            continue;
        }
        if here
            && t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            return format!("{}:{}:{}", path.display(), n + 1, line.len() - t.len() + 1);
        }
    }
    path.display().to_string()
}

/// A repo's `include`, `exclude` and `default_exclude`, every glob checked.
fn scope(src: &Source, r: &RepoOptions) -> Result<Scope> {
    let globs = |list: &Option<Vec<Spanned<String>>>| -> Result<Vec<String>> {
        let mut out = Vec::new();
        for g in list.iter().flatten() {
            glob(g.get_ref()).map_err(|e| {
                src.at(
                    Some(g.span()),
                    &format!("`{}` is not a glob: {}", g.get_ref(), e.kind()),
                )
            })?;
            out.push(g.get_ref().clone());
        }
        Ok(out)
    };
    let mut exclude: Vec<String> = if r.default_exclude.unwrap_or(true) {
        DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    exclude.extend(globs(&r.exclude)?);
    Ok(Scope {
        include: globs(&r.include)?,
        exclude,
    })
}

/// Whether two repo sources are the same files: one folder, or one URL at one revision.
fn same_source(a: &RepoSource, b: &RepoSource) -> bool {
    match (a, b) {
        (RepoSource::Path(x), RepoSource::Path(y)) => resolved(x) == resolved(y),
        (RepoSource::Git { url: u1, rev: r1 }, RepoSource::Git { url: u2, rev: r2 }) => {
            let norm = |u: &str| u.trim_end_matches('/').trim_end_matches(".git").to_owned();
            norm(u1) == norm(u2) && r1 == r2
        }
        (RepoSource::Pypi(x), RepoSource::Pypi(y)) => {
            x.normalized() == y.normalized() && x.version == y.version && x.index_url == y.index_url
        }
        _ => false,
    }
}

/// A path with its symlinks resolved, for the part of it that exists.
fn resolved(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Refuses setups that harm the user: an output inside a repository (r2e would write into it)
/// or inside the cache (the cache's `.gitignore` and `CACHEDIR.TAG` would hide the dataset
/// from git and backups), a cache inside a repository or inside the output.
fn check_places(src: &Source, cfg: &Config, project: &ProjectOptions) -> Result<()> {
    let output = resolved(&cfg.output);
    let cache = resolved(&cfg.cache);
    // A default (no key written) is located at the `[project]` table, or the file's start.
    let section = src.text.find("[project]").map(|i| i + 1..i + 8);
    let at_key = |key: &Option<Spanned<String>>| key.as_ref().map(|k| k.span()).or(section.clone());
    for repo in &cfg.repos {
        let RepoSource::Path(root) = &repo.source else {
            continue;
        };
        let root = resolved(root);
        if output.starts_with(&root) {
            return Err(src.at(
                at_key(&project.output),
                &format!(
                    "the output `{}` is inside repo `{}`: r2e would write into the repository; put `output` outside it",
                    cfg.output.display(),
                    repo.name
                ),
            ));
        }
        if cache.starts_with(&root) {
            return Err(src.at(
                at_key(&project.cache),
                &format!(
                    "the cache `{}` is inside repo `{}`: its files would become the repository's; put `cache` outside it",
                    cfg.cache.display(),
                    repo.name
                ),
            ));
        }
    }
    if output.starts_with(&cache) {
        return Err(src.at(
            at_key(&project.output),
            &format!(
                "the output `{}` is inside the cache `{}`, which git and backups skip; put `output` outside it",
                cfg.output.display(),
                cfg.cache.display()
            ),
        ));
    }
    if cache.starts_with(&output) {
        return Err(src.at(
            at_key(&project.cache),
            &format!(
                "the cache `{}` is inside the output `{}`; put `cache` outside it",
                cfg.cache.display(),
                cfg.output.display()
            ),
        ));
    }
    Ok(())
}

/// Where one `[[repo]]`'s files come from.
fn repo_source(src: &Source, base: &Path, r: &RepoOptions) -> Result<RepoSource> {
    if let Some(spec) = &r.pypi {
        return pypi_source(src, r, spec);
    }
    for (key, value) in [("sha256", &r.sha256), ("index_url", &r.index_url)] {
        if let Some(v) = value {
            return Err(src.at(
                Some(v.span()),
                &format!("`{key}` goes with `pypi`, not with `path` or `git`"),
            ));
        }
    }
    Ok(match (&r.path, &r.git) {
        (Some(p), None) => {
            if let Some(rev) = &r.rev {
                return Err(src.at(Some(rev.span()), "`rev` goes with `git`, not with `path`"));
            }
            let dir = base.join(p.get_ref());
            if !dir.is_dir() {
                let what = if dir.exists() {
                    "is not a folder"
                } else {
                    "does not exist"
                };
                return Err(src.at(
                    Some(p.span()),
                    &format!("repo path `{}` {what}", dir.display()),
                ));
            }
            RepoSource::Path(dir)
        }
        (None, Some(g)) => {
            let url = g.get_ref().clone();
            // A local path (relative to the pipeline) or a URL.
            let url = if url.contains("://") || url.contains('@') {
                url
            } else {
                base.join(&url).to_string_lossy().into_owned()
            };
            let rev = r
                .rev
                .as_ref()
                .map_or_else(|| "HEAD".to_string(), |r| r.get_ref().clone());
            RepoSource::Git { url, rev }
        }
        (Some(p), Some(_)) => {
            return Err(src.at(Some(p.span()), "a repo takes `path` or `git`, not both"));
        }
        (None, None) => {
            let span = r.name.as_ref().map(|n| n.span());
            return Err(src.at(
                span,
                "a `[[repo]]` needs `path = \"...\"`, `git = \"...\"` or `pypi = \"NAME==VERSION\"`",
            ));
        }
    })
}

/// A `[[repo]]` with `pypi = "NAME==VERSION"`: one exact release, alone (no `path`, `git` or
/// `rev`), with an optional `sha256` and `index_url`.
fn pypi_source(src: &Source, r: &RepoOptions, spec: &Spanned<String>) -> Result<RepoSource> {
    for (key, value) in [("path", &r.path), ("git", &r.git), ("rev", &r.rev)] {
        if let Some(v) = value {
            return Err(src.at(
                Some(v.span()),
                &format!("a repo takes `pypi` or `{key}`, not both"),
            ));
        }
    }
    let bad = |why: &str| {
        src.at(
            Some(spec.span()),
            &format!(
                "`{}` is not a release: {why} (write `pypi = \"NAME==VERSION\"`, e.g. `isodate==0.6.1`)",
                spec.get_ref()
            ),
        )
    };
    let Some((name, version)) = spec.get_ref().split_once("==") else {
        return Err(bad("it needs `==` and one exact version"));
    };
    let (name, version) = (name.trim(), version.trim());
    // PEP 508's project names: letters and digits, with `.`, `_`, `-` inside.
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !name_ok {
        return Err(bad(&format!("`{name}` is not a project name")));
    }
    // One version, as PEP 440 spells them (no wildcard, range or second clause).
    let version_ok = !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '!'))
        && version.starts_with(|c: char| c.is_ascii_alphanumeric());
    if !version_ok {
        return Err(bad(&format!("`{version}` is not one exact version")));
    }
    let sha256 = match &r.sha256 {
        Some(h) => {
            let hex = h.get_ref().trim().to_ascii_lowercase();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(src.at(
                    Some(h.span()),
                    "`sha256` is the archive's SHA-256: 64 hexadecimal digits",
                ));
            }
            Some(PinnedHash {
                hex,
                at: src.place(Some(h.span())),
            })
        }
        None => None,
    };
    let index_url = match &r.index_url {
        Some(u) => {
            let url = u.get_ref().trim();
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.len() <= "https://".len()
            {
                return Err(src.at(
                    Some(u.span()),
                    "`index_url` is a simple index's URL (`https://...` or `http://...`)",
                ));
            }
            format!("{}/", url.trim_end_matches('/'))
        }
        None => PYPI_INDEX.to_owned(),
    };
    Ok(RepoSource::Pypi(PypiRelease {
        project: name.to_owned(),
        version: version.to_owned(),
        index_url,
        sha256,
    }))
}

/// The `[providers.NAME]` tables, with their API keys read from the environment.
fn providers(
    src: &Source,
    options: std::collections::BTreeMap<String, ProviderOptions>,
) -> Result<Vec<ProviderConfig>> {
    let mut providers = Vec::new();
    for (pname, p) in options {
        let url = p.base_url.get_ref().trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(src.at(
                Some(p.base_url.span()),
                "`base_url` must start with http:// or https://",
            ));
        }
        if p.max_concurrency == Some(0) || p.timeout_seconds == Some(0) {
            return Err(src.at(
                find_key(src.text, "max_concurrency").or(find_key(src.text, "timeout_seconds")),
                "`max_concurrency` and `timeout_seconds` must be at least 1",
            ));
        }
        let api_key_env = match &p.api_key_env {
            Some(var) => Some(env_var_name(src, var, "api_key_env", "API key")?.clone()),
            None => None,
        };
        let api_key = api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        providers.push(ProviderConfig {
            name: pname,
            base_url: url,
            api_key_env,
            api_key,
            api: p.api.unwrap_or_default(),
            max_concurrency: p.max_concurrency.unwrap_or(8),
            timeout_seconds: p.timeout_seconds.unwrap_or(120),
            max_retries: p.max_retries.unwrap_or(6),
        });
    }
    Ok(providers)
}

/// The `[[variant]]` tables: each the pipeline's tables with the variant's keys merged over
/// them.
fn variants(
    src: &Source,
    base: &Path,
    cfg: &Config,
    options: Vec<Spanned<VariantOptions>>,
) -> Result<Vec<Variant>> {
    let doc: toml::Table = src
        .text
        .parse()
        .map_err(|e: toml::de::Error| src.at(e.span(), e.message()))?;
    let mut variants: Vec<Variant> = Vec::new();
    for v in options {
        let span = v.span();
        let v = v.into_inner();
        let vname = v.name.get_ref().clone();
        let valid_name = !vname.is_empty()
            && vname
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !vname.starts_with('.');
        if !valid_name {
            return Err(src.at(
                Some(v.name.span()),
                "a variant name must be non-empty and hold only letters, digits, `_`, `-` and `.` (it names a folder)",
            ));
        }
        if variants.iter().any(|o| o.name == vname) {
            return Err(src.at(
                Some(v.name.span()),
                &format!("two variants are named `{vname}`"),
            ));
        }
        let located = InVariant {
            src,
            name: &vname,
            span: variant_span(src.text, span),
        };
        let vcfg = variant_config(&located, base, cfg, &doc, &v)?;
        variants.push(Variant {
            name: vname,
            cfg: vcfg,
        });
    }
    Ok(variants)
}

/// A variant's text: from its header to the next table that is not one of its own.
fn variant_span(text: &str, span: Range<usize>) -> Range<usize> {
    let body_start = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i + 1);
    let mut end = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') && !t.starts_with("[variant.") {
            break;
        }
        end += line.len();
    }
    span.start..end
}

/// Locates errors inside one variant's text.
struct InVariant<'a> {
    src: &'a Source<'a>,
    name: &'a str,
    span: Range<usize>,
}

impl InVariant<'_> {
    /// A key is looked for as `section.key`, under `[variant.section]`, then by itself; a whole
    /// section (an empty key) as `section.` or its `[variant.section]` header.
    fn at(&self, section: &str, key: &str, msg: &str) -> Error {
        let span = &self.span;
        let body = &self.src.text[span.clone()];
        let header = format!("[variant.{section}]");
        let local = if key.is_empty() {
            find_dotted_key(body, section)
                .or_else(|| body.find(&header).map(|at| at + 1..at + header.len() - 1))
        } else {
            find_dotted_key(body, &format!("{section}.{key}"))
                .map(|r| r.end - key.len()..r.end)
                .or_else(|| {
                    body.contains(&header)
                        .then(|| find_section_key(body, &format!("variant.{section}"), key))
                        .flatten()
                })
                .or_else(|| find_dotted_key(body, key))
        };
        let local = local.map(|r| r.start + span.start..r.end + span.start);
        self.src.at(
            local.or(Some(span.clone())),
            &format!("variant `{}`: {msg}", self.name),
        )
    }
}

/// One variant's whole configuration.
fn variant_config(
    located: &InVariant,
    base: &Path,
    cfg: &Config,
    doc: &toml::Table,
    v: &VariantOptions,
) -> Result<Config> {
    let bad = |section: &str, e: toml::de::Error| {
        located.at(section, "", &format!("`{section}`: {}", e.message()))
    };
    let mut vcfg = cfg.clone();
    vcfg.output = cfg.output.join("variants").join(located.name);
    if let Some(t) = merged(doc, "extract", &v.extract) {
        vcfg.extract = t.try_into().map_err(|e| bad("extract", e))?;
    }
    if let Some(t) = merged(doc, "context", &v.context) {
        vcfg.context = t.try_into().map_err(|e| bad("context", e))?;
    }
    if let Some(t) = merged(doc, "generate", &v.generate) {
        vcfg.generate = t.try_into().map_err(|e| bad("generate", e))?;
    }
    if let Some(t) = merged(doc, "select", &v.select) {
        vcfg.select = t.try_into().map_err(|e| bad("select", e))?;
    }
    if let Some(t) = merged(doc, "refine", &v.refine) {
        vcfg.refine = t.try_into().map_err(|e| bad("refine", e))?;
    }
    if let Some(t) = merged(doc, "evaluate", &v.evaluate) {
        vcfg.evaluate = t.try_into().map_err(|e| bad("evaluate", e))?;
    }
    if let Some(over) = &v.prompts {
        for (pname, path) in over.get_ref() {
            let Some(path) = path.as_str() else {
                return Err(located.at("prompts", pname, "a prompt is the path of a file"));
            };
            let entry =
                prompt_file(base, pname, path).map_err(|m| located.at("prompts", pname, &m))?;
            vcfg.prompts.retain(|(n, _)| n.name() != pname);
            vcfg.prompts.push(entry);
        }
        vcfg.prompts.sort();
    }
    check_stages(&vcfg, &|section, key, msg| located.at(section, key, msg))?;
    Ok(vcfg)
}

/// The pipeline's `section` table with a variant's keys put over it, when the variant has any.
fn merged(
    doc: &toml::Table,
    section: &str,
    over: &Option<Spanned<toml::Table>>,
) -> Option<toml::Value> {
    let over = over.as_ref()?;
    let mut table = doc
        .get(section)
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    for (k, v) in over.get_ref() {
        table.insert(k.clone(), v.clone());
    }
    Some(toml::Value::Table(table))
}

/// A `[prompts]` entry: a known template name and an existing file, relative to `base`.
fn prompt_file(
    base: &Path,
    name: &str,
    path: &str,
) -> std::result::Result<(Template, PathBuf), String> {
    let Some(template) = Template::from_name(name) else {
        return Err(format!(
            "unknown prompt `{name}`; the templates are {}",
            Template::ALL.map(Template::name).join(", ")
        ));
    };
    let full = base.join(path);
    if !full.is_file() {
        return Err(format!("prompt file `{}` does not exist", full.display()));
    }
    Ok((template, full))
}

/// Locates a key for a message: `(section, key)`.
type Locate<'a> = dyn Fn(&str, &str, &str) -> Error + 'a;

/// The checks of stage settings that types cannot express, for the pipeline and each variant.
fn check_stages(cfg: &Config, at: &Locate) -> Result<()> {
    let sb = &cfg.sandbox;
    for (key, value) in [
        ("memory_mib", sb.memory_mib),
        ("processes", sb.processes),
        ("file_size_mib", sb.file_size_mib),
        ("run_timeout_seconds", sb.run_timeout_seconds),
    ] {
        if value == 0 {
            return Err(at("sandbox", key, &format!("`{key}` must be at least 1")));
        }
    }
    if let Some(name) = &sb.base_image {
        if let Err(why) = check_reference(name) {
            return Err(at(
                "sandbox",
                "base_image",
                &format!("`base_image = \"{name}\"` is not an image name: {why}"),
            ));
        }
        if sb.backend != Backend::Docker {
            return Err(at(
                "sandbox",
                "base_image",
                "`base_image` is for `backend = \"docker\"`; the local backend runs on this machine's system",
            ));
        }
    }
    if let Some(registry) = &sb.registry {
        if let Err(why) = check_registry(registry) {
            return Err(at(
                "sandbox",
                "registry",
                &format!("`registry = \"{registry}\"` is not a registry and prefix: {why}"),
            ));
        }
        if sb.backend != Backend::Docker {
            return Err(at(
                "sandbox",
                "registry",
                "`registry` is for `backend = \"docker\"`: the local backend has no image to share",
            ));
        }
    }
    if !(0.0..=1.0).contains(&cfg.select.min_branch_coverage) {
        return Err(at(
            "select",
            "min_branch_coverage",
            "`min_branch_coverage` must be between 0 and 1",
        ));
    }
    if !(0.0..=1.0).contains(&cfg.select.min_mutation_score) {
        return Err(at(
            "select",
            "min_mutation_score",
            "`min_mutation_score` must be between 0 and 1",
        ));
    }
    if cfg.generate.budget == 0 || cfg.generate.max_tests == 0 {
        let key = if cfg.generate.budget == 0 {
            "budget"
        } else {
            "max_tests"
        };
        return Err(at(
            "generate",
            key,
            "`budget` and `max_tests` must be at least 1",
        ));
    }
    if cfg.validate.repeats < 2 {
        return Err(at(
            "validate",
            "repeats",
            "`repeats` must be at least 2: a test's stability is its runs agreeing",
        ));
    }
    if cfg.context.max_tokens == 0 {
        return Err(at(
            "context",
            "max_tokens",
            "`max_tokens` must be at least 1",
        ));
    }
    if cfg.generate.generator.uses_model() {
        let what = match cfg.generate.generator {
            Generator::Hybrid => "`generator = \"hybrid\"`",
            _ => "`generator = \"llm\"`",
        };
        check_model(
            cfg,
            "generate",
            "generator",
            what,
            cfg.generate.provider.as_deref(),
            cfg.generate.model.as_deref(),
            at,
        )?;
    }
    check_evaluate(cfg, at)?;
    let serve = &cfg.serve;
    if !(0.0..1.0).contains(&serve.holdout) {
        return Err(at(
            "serve",
            "holdout",
            "`holdout` is a fraction of the tests, at least 0 and below 1",
        ));
    }
    for (key, value) in [
        ("max_exec_seconds", serve.max_exec_seconds),
        ("max_file_bytes", serve.max_file_bytes),
        ("max_output_bytes", serve.max_output_bytes),
        ("workspace_limit", serve.workspace_limit),
        ("workspace_files", serve.workspace_files),
        ("command_write_limit", serve.command_write_limit),
    ] {
        if value == 0 {
            return Err(at("serve", key, &format!("`{key}` must be at least 1")));
        }
    }
    if cfg.refine.enabled {
        check_model(
            cfg,
            "refine",
            "enabled",
            "`[refine] enabled = true`",
            cfg.refine.provider.as_deref(),
            cfg.refine.model.as_deref(),
            at,
        )?;
    }
    Ok(())
}

/// `[evaluate]`: every `k` at most `samples`, known models, and no chain of thought asked of a
/// base model.
fn check_evaluate(cfg: &Config, at: &Locate) -> Result<()> {
    let ev = &cfg.evaluate;
    if !ev.enabled {
        return Ok(());
    }
    if ev.samples == 0 {
        return Err(at("evaluate", "samples", "`samples` must be at least 1"));
    }
    if ev.k.is_empty() {
        return Err(at("evaluate", "k", "`k` lists at least one value"));
    }
    if let Some(k) = ev.k.iter().find(|&&k| k == 0 || k > ev.samples) {
        return Err(at(
            "evaluate",
            "k",
            &format!(
                "pass@{k} needs 1 <= k <= samples, and `samples` is {}",
                ev.samples
            ),
        ));
    }
    if ev.model.is_empty() {
        return Err(at(
            "evaluate",
            "enabled",
            "`[evaluate]` needs at least one `[[evaluate.model]]` (provider and model; provider \"builtin\" with model \"reference\" needs no server)",
        ));
    }
    for (n, m) in ev.model.iter().enumerate() {
        if m.is_builtin() {
            if !BUILTIN_MODELS.contains(&m.model.as_str()) {
                return Err(at(
                    "evaluate.model",
                    &format!("model@{n}"),
                    &format!(
                        "`builtin` has no model `{}`; it has `{}`",
                        m.model,
                        BUILTIN_MODELS.join("`, `")
                    ),
                ));
            }
            continue;
        }
        let Some(p) = cfg.providers.iter().find(|p| p.name == m.provider) else {
            let known: Vec<&str> = cfg.providers.iter().map(|p| p.name.as_str()).collect();
            return Err(at(
                "evaluate.model",
                &format!("provider@{n}"),
                &format!(
                    "unknown provider `{}`; the pipeline defines {}, and `builtin`",
                    m.provider,
                    if known.is_empty() {
                        "no `[providers.NAME]` table".to_owned()
                    } else {
                        format!("`{}`", known.join("`, `"))
                    }
                ),
            ));
        };
        if m.model.trim().is_empty() {
            return Err(at(
                "evaluate.model",
                &format!("model@{n}"),
                "`model` names the model",
            ));
        }
        if ev.prompt == PromptStyle::Cot && p.api == Api::Completions {
            return Err(at(
                "evaluate",
                "prompt",
                &format!(
                    "`prompt = \"cot\"` is a chat prompt, and provider `{}` is a base model (`api = \"completions\"`); use `prompt = \"direct\"`",
                    p.name
                ),
            ));
        }
        if let Some(var) = &p.api_key_env
            && p.api_key.is_none()
        {
            return Err(at(
                &format!("providers.{}", p.name),
                "api_key_env",
                &format!(
                    "provider `{}` reads its API key from the environment variable `{var}`, which is not set",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

/// A model-driven stage names a known provider, whose key (if it needs one) is set, and a model.
fn check_model(
    cfg: &Config,
    section: &str,
    key: &str,
    what: &str,
    provider: Option<&str>,
    model: Option<&str>,
    at: &Locate,
) -> Result<()> {
    let Some(name) = provider else {
        return Err(at(
            section,
            key,
            &format!("{what} needs `provider = \"NAME\"` naming a `[providers.NAME]` table"),
        ));
    };
    let Some(p) = cfg.providers.iter().find(|p| p.name == name) else {
        let known: Vec<&str> = cfg.providers.iter().map(|p| p.name.as_str()).collect();
        return Err(at(
            section,
            "provider",
            &format!(
                "unknown provider `{name}`; the pipeline defines {}",
                if known.is_empty() {
                    "no `[providers.NAME]` table".to_owned()
                } else {
                    format!("`{}`", known.join("`, `"))
                }
            ),
        ));
    };
    if model.is_none_or(str::is_empty) {
        return Err(at(section, key, &format!("{what} needs `model = \"...\"`")));
    }
    if let Some(var) = &p.api_key_env
        && p.api_key.is_none()
    {
        return Err(at(
            &format!("providers.{name}"),
            "api_key_env",
            &format!(
                "provider `{name}` reads its API key from the environment variable `{var}`, which is not set"
            ),
        ));
    }
    Ok(())
}

fn default_repo_name(source: &RepoSource) -> String {
    let raw = match source {
        RepoSource::Path(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        RepoSource::Pypi(release) => release.project.clone(),
        RepoSource::Git { url, .. } => {
            let last = url
                .trim_end_matches('/')
                .rsplit(['/', ':'])
                .next()
                .unwrap_or_default();
            last.trim_end_matches(".git").to_owned()
        }
    };
    if raw.is_empty() {
        "repo".into()
    } else {
        raw.replace(':', "_")
    }
}

/// 1-based line and column (in characters) of byte `offset`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The span of the first `key =` in the text, for values checked after parsing.
fn find_key(text: &str, key: &str) -> Option<Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with(key) && trimmed[key.len()..].trim_start().starts_with('=') {
            let start = offset + (line.len() - trimmed.len());
            return Some(start..start + key.len());
        }
        offset += line.len();
    }
    None
}

/// The span of the first `key` written as `key = `, `a.b.key = ` or `key.x = `.
fn find_dotted_key(text: &str, key: &str) -> Option<Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let mut rest = line.trim_start();
        loop {
            if let Some(after) = rest.strip_prefix(key)
                && (after.trim_start().starts_with('=') || after.starts_with('.'))
            {
                let start = offset + (line.len() - rest.len());
                return Some(start..start + key.len());
            }
            match rest.split_once('.') {
                Some((head, tail))
                    if !head.is_empty()
                        && head
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    rest = tail;
                }
                _ => break,
            }
        }
        offset += line.len();
    }
    None
}

/// The span of `key =` inside the `[section]` table (or as `section.key =`), else anywhere.
fn find_section_key(text: &str, section: &str, key: &str) -> Option<Range<usize>> {
    // `key@N`: its N-th occurrence (0-based), as in the N-th table of an array of tables.
    let (key, mut skip) = match key.split_once('@') {
        Some((k, n)) => (k, n.parse::<usize>().unwrap_or(0)),
        None => (key, 0),
    };
    let (header, array_header) = (format!("[{section}]"), format!("[[{section}]]"));
    let mut offset = 0;
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            let t = trimmed.trim_end();
            inside = t.starts_with(&header) || t.starts_with(&array_header);
        } else if inside || trimmed.starts_with(&format!("{section}.")) {
            let rest = trimmed
                .strip_prefix(&format!("{section}."))
                .unwrap_or(trimmed);
            if rest.starts_with(key) && rest[key.len()..].trim_start().starts_with('=') {
                if skip == 0 {
                    let start = offset + (line.len() - rest.len());
                    return Some(start..start + key.len());
                }
                skip -= 1;
            }
        }
        offset += line.len();
    }
    find_key(text, key)
}

/// The folder of Docker's own client configuration (`$DOCKER_CONFIG`, else `~/.docker`), where
/// `docker login` keeps registry credentials, which a push or pull of `[sandbox] registry`
/// passes to the daemon as the `docker` command does.
pub fn docker_config_dir() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
}

/// Whether `R2E_LOG` asks for stage timings on stderr.
pub fn log_timings() -> bool {
    std::env::var("R2E_LOG").is_ok_and(|v| v.split(',').any(|p| p.trim() == "timings"))
}

/// A secret a command line names by its environment variable (`r2e serve --token-env VAR`),
/// trimmed; `None` when the variable is unset or blank. This module is the only reader of the
/// environment, so what r2e takes from it is all in one place.
pub fn secret_from_env(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The variable an `*_env` setting (`key`) names, checked to be an environment variable's name
/// (letters, digits and `_`, not first a digit): a `secret` written there itself is refused.
fn env_var_name<'a>(
    src: &Source,
    var: &'a Spanned<String>,
    key: &str,
    secret: &str,
) -> Result<&'a String> {
    let name = var.get_ref();
    if !is_variable_name(name) {
        // What is written is not repeated: it may be the secret itself.
        return Err(src.at(
            Some(var.span()),
            &format!(
                "`{key}` must name an environment variable (capitals, digits and `_`, as `GITHUB_TOKEN`), not hold the {secret}: the {secret} never goes in a file (what is written there is not shown)"
            ),
        ));
    }
    Ok(name)
}

/// Whether `name` is an environment variable's conventional name (`[A-Z_][A-Z0-9_]*`) that does
/// not look like a secret: every token shape in use (`ghp_...`, `github_pat_...`, `sk-...`, a hex
/// key) has lowercase letters or a `-`, and a long run of capitals and digits without `_` is
/// taken for a key written in the wrong place.
fn is_variable_name(name: &str) -> bool {
    let conventional = name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    conventional && (name.len() < 32 || name.contains('_'))
}

/// Checks that `registry` is `HOST[:PORT]/PREFIX`: a registry's host (a name with a dot or a
/// port, or `localhost`, which the daemon does not take for a Docker Hub account) and a path
/// under which `r2e-base:TAG` is an image reference.
pub fn check_registry(registry: &str) -> std::result::Result<(), String> {
    let Some((host, prefix)) = registry.split_once('/') else {
        return Err("it names no prefix after the host (`HOST[:PORT]/PREFIX`)".into());
    };
    if host.is_empty() || !(host.contains(['.', ':']) || host == "localhost") {
        return Err(format!(
            "`{host}` is no registry's host: give one with a dot or a port (`registry.example.org`, `127.0.0.1:5000`) or `localhost`"
        ));
    }
    if prefix.is_empty() || prefix.contains(['@', ':']) {
        return Err("its prefix is a path, without a tag or a digest".into());
    }
    check_reference(&format!("{registry}/r2e-base"))
}

/// Checks that `name` is an image reference the daemon accepts: `[HOST[:PORT]/]PATH[:TAG]`
/// with an optional `@ALGORITHM:HEX` digest, the path in lowercase.
pub fn check_reference(name: &str) -> std::result::Result<(), String> {
    let (rest, digest) = match name.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (name, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(algo, hex)| {
            !algo.is_empty()
                && algo
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && hex.len() >= 32
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !ok {
            return Err(format!("`{d}` is not a digest (`sha256:` and its hex)"));
        }
    }
    let (path, tag) = match rest.rsplit_once(':') {
        Some((p, t)) if !t.contains('/') => (p, Some(t)),
        _ => (rest, None),
    };
    if let Some(t) = tag {
        let first = t.chars().next();
        if t.len() > 128
            || !first.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return Err(format!(
                "the tag `{t}` may hold letters, digits, `_`, `.` and `-`, and starts with a letter, a digit or `_`"
            ));
        }
    }
    if path.is_empty() {
        return Err("it names no image".into());
    }
    let parts: Vec<&str> = path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        // The first of several parts may be a registry's host, with a port.
        let host = i == 0 && parts.len() > 1 && (part.contains(['.', ':']) || *part == "localhost");
        let ok = if host {
            part.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        } else {
            !part.is_empty()
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !ok {
            return Err(format!(
                "`{part}` may hold lowercase letters, digits and `.`, `_` or `-` between them"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_gives_git_repos_at_their_commits_and_pins_resolution_to_its_date() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        let text = |env: &str| {
            format!(
                "[[source]]\ngithub = \"language:python created:>=2025-06-01\"\nlimit = 5\n{env}"
            )
        };
        let sources = parse_with(&text(""), &file, false).unwrap().sources;
        assert_eq!(sources[0].require_files, PACKAGING_FILES);
        assert_eq!(sources[0].api_url, "https://api.github.com");
        assert_eq!(sources[0].token_env, "GITHUB_TOKEN");
        let lock = crate::curation::Lock {
            version: LOCK_VERSION,
            curated_at: "2025-07-01T08:00:00Z".into(),
            sources: sources_fingerprint(&sources),
            source: Vec::new(),
            repo: vec![crate::curation::LockedRepo {
                name: "o__r".into(),
                full_name: "o/r".into(),
                url: "https://github.com/o/r.git".into(),
                commit: "c".repeat(40),
                branch: "main".into(),
                created_at: "2025-06-02T00:00:00Z".into(),
                pushed_at: "2025-06-03T00:00:00Z".into(),
                stars: 41,
                license: "MIT".into(),
                size_kb: 12,
                source: 0,
                kept_because: vec!["matched the search".into()],
            }],
            left_out: Vec::new(),
        };
        std::fs::write(dir.path().join("repos.lock"), lock.render()).unwrap();
        let cfg = parse(&text(""), &file).unwrap();
        assert_eq!(
            cfg.repos[0].source,
            RepoSource::Git {
                url: "https://github.com/o/r.git".into(),
                rev: "c".repeat(40)
            }
        );
        assert_eq!(cfg.repos[0].name, "o__r");
        assert_eq!(
            cfg.env.exclude_newer.as_deref(),
            Some("2025-07-01T08:00:00Z")
        );
        // The pipeline's own date wins.
        let cfg = parse(
            &text("[env]\nexclude_newer = \"2025-01-01T00:00:00Z\"\n"),
            &file,
        )
        .unwrap();
        assert_eq!(
            cfg.env.exclude_newer.as_deref(),
            Some("2025-01-01T00:00:00Z")
        );
        // Another limit is another search: the lock is stale.
        let stale = text("").replace("limit = 5", "limit = 6");
        let err = parse(&stale, &file).unwrap_err().to_string();
        assert!(
            err.contains("source 1 changed") && err.contains("--update"),
            "{err}"
        );
        // The token's variable is no part of what was searched.
        let other_token = format!("{}token_env = \"OTHER\"\n", text(""));
        assert!(parse(&other_token, &file).is_ok());
    }

    #[test]
    fn a_lock_from_disk_is_checked_as_the_api_answers_are() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        let text = "[[source]]\ngithub = \"language:python\"\n";
        let sources = parse_with(text, &file, false).unwrap().sources;
        let good = crate::curation::LockedRepo {
            name: "o__r".into(),
            full_name: "o/r".into(),
            url: "https://github.com/o/r.git".into(),
            commit: "c".repeat(40),
            branch: "main".into(),
            created_at: "2025-06-02T00:00:00Z".into(),
            pushed_at: "2025-06-03T00:00:00Z".into(),
            stars: 41,
            license: "MIT".into(),
            size_kb: 12,
            source: 0,
            kept_because: Vec::new(),
        };
        let lock = |repo: crate::curation::LockedRepo, curated_at: &str| crate::curation::Lock {
            version: LOCK_VERSION,
            curated_at: curated_at.into(),
            sources: sources_fingerprint(&sources),
            source: Vec::new(),
            repo: vec![repo],
            left_out: Vec::new(),
        };
        let refused = |repo: crate::curation::LockedRepo, curated_at: &str, pipeline: &str| {
            std::fs::write(
                dir.path().join("repos.lock"),
                lock(repo, curated_at).render(),
            )
            .unwrap();
            let e = parse(pipeline, &file).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        };
        std::fs::write(
            dir.path().join("repos.lock"),
            lock(good.clone(), "2025-07-01T08:00:00Z").render(),
        )
        .unwrap();
        assert!(parse(text, &file).is_ok());
        // Where a key is in the lock's text (the same for every lock below: one line each).
        let rendered = lock(good.clone(), "2025-07-01T08:00:00Z").render();
        let at = |key: &str| {
            let line = rendered
                .lines()
                .position(|l| l.starts_with(&format!("{key} = ")))
                .unwrap();
            format!("repos.lock:{}:1: ", line + 1)
        };
        let with = |f: &dyn Fn(&mut crate::curation::LockedRepo)| {
            let mut r = good.clone();
            f(&mut r);
            r
        };
        let e = refused(
            with(&|r| r.name = "../o".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&format!("{}repository `../o`", at("name"))) && e.contains("no `:`, `/`"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.full_name = "o/..".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("full_name")) && e.contains("`o/..` is not a GitHub"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.url = "--upload-pack=touch x".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("url")) && e.contains("starts with `-`"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.url = "file:///etc/repo".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(e.contains("clone URL `file:///etc/repo`"), "{e}");
        let e = refused(
            with(&|r| r.url = "git://evil.example/o/r".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(e.contains("only from this machine"), "{e}");
        let e = refused(
            with(&|r| r.commit = "HEAD".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("commit")) && e.contains("the commit `HEAD`"),
            "{e}"
        );
        let e = refused(with(&|r| r.source = 3), "2025-07-01T00:00:00Z", text);
        assert!(e.contains("`source = 3` names no"), "{e}");
        let e = refused(good.clone(), "yesterday", text);
        assert!(
            e.contains(&format!("{}`curated_at = \"yesterday\"`", at("curated_at"))),
            "{e}"
        );
        // A lock repository that a `[[repo]]` already names, at the same commit.
        let twice = format!(
            "{text}[[repo]]\nname = \"mine\"\ngit = \"https://github.com/o/r\"\nrev = \"{}\"\n",
            "c".repeat(40)
        );
        let e = refused(good.clone(), "2025-07-01T00:00:00Z", &twice);
        assert!(e.contains("it is repo `mine` again"), "{e}");
    }

    #[test]
    fn an_api_url_without_tls_is_for_this_machine_only() {
        let file = Path::new("/nonexistent/P");
        let src =
            |url: &str| format!("[[source]]\ngithub = \"language:python\"\napi_url = \"{url}\"\n");
        for ok in [
            "https://ghe.corp/api/v3",
            "http://127.0.0.1:8080",
            "http://localhost",
        ] {
            assert!(parse_with(&src(ok), file, false).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com",
            "ftp://example.com",
            "https://",
            "https://u:p@h",
        ] {
            let e = parse_with(&src(bad), file, false).unwrap_err();
            assert!(e.to_string().contains("P:3:11: `api_url`"), "{bad}: {e}");
        }
    }

    #[test]
    fn templates_are_named_as_their_files_and_serialized_so() {
        for t in Template::ALL {
            assert_eq!(Template::from_name(t.name()), Some(t));
            assert_eq!(
                serde_json::to_string(&t).unwrap(),
                format!("\"{}\"", t.name())
            );
        }
        assert_eq!(Template::from_name("nope"), None);
    }

    #[test]
    fn image_names_are_checked() {
        for good in [
            "debian:bookworm-slim",
            "python",
            "localhost:5000/team/python:3.11-slim",
            "registry.example.org/a_b/c-d.e:v1.2_3",
            "debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_reference(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Debian:bookworm",
            "debian:",
            "debian:-slim",
            "debian bookworm",
            "team//python",
            "-python",
            "debian@sha256:xyz",
        ] {
            assert!(check_reference(bad).is_err(), "{bad}");
        }
    }

    fn err(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir(dir.path().join("repo")).unwrap();
        let file = dir.path().join("pipeline.toml");
        match parse(text, &file) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => {
                assert_eq!(e.exit_code(), 2);
                e.to_string().replace(&file.display().to_string(), "P")
            }
        }
    }

    #[test]
    fn a_pypi_release_is_one_exact_version_alone_with_its_hash_and_index() {
        let e = err("[[repo]]\npypi = \"isodate>=0.6\"\n");
        assert!(
            e.starts_with("P:2:8: `isodate>=0.6` is not a release"),
            "{e}"
        );
        let e = err("[[repo]]\npypi = \"isodate==0.6.*\"\n");
        assert!(
            e.starts_with("P:2:8:") && e.contains("`0.6.*` is not one exact version"),
            "{e}"
        );
        let e = err("[[repo]]\npypi = \"-bad==1\"\n");
        assert!(
            e.starts_with("P:2:8:") && e.contains("not a project name"),
            "{e}"
        );
        let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\nsha256 = \"abc\"\n");
        assert!(
            e.starts_with("P:3:10: `sha256` is the archive's SHA-256"),
            "{e}"
        );
        let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\ngit = \"https://h/r\"\n");
        assert!(e.starts_with("P:3:7: a repo takes `pypi` or `git`"), "{e}");
        let e = err("[[repo]]\npath = \"repo\"\nsha256 = \"abc\"\n");
        assert!(e.starts_with("P:3:10: `sha256` goes with `pypi`"), "{e}");
        let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\nindex_url = \"ftp://x\"\n");
        assert!(
            e.starts_with("P:3:13: `index_url` is a simple index's URL"),
            "{e}"
        );

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        let hex = "AB".repeat(32);
        let text = format!(
            "[[repo]]\npypi = \"Iso.Date==0.6.1\"\nsha256 = \"{hex}\"\nindex_url = \"http://127.0.0.1:9/simple\"\n"
        );
        let c = parse(&text, &file).unwrap();
        assert_eq!(c.repos[0].name, "Iso.Date");
        let RepoSource::Pypi(r) = &c.repos[0].source else {
            panic!("{:?}", c.repos[0].source)
        };
        assert_eq!(r.normalized(), "iso-date");
        assert_eq!(r.version, "0.6.1");
        assert_eq!(r.index_url, "http://127.0.0.1:9/simple/");
        let pinned = r.sha256.as_ref().unwrap();
        assert_eq!(pinned.hex, "ab".repeat(32));
        assert_eq!(pinned.at, format!("{}:3:10", file.display()));
        let text = "[[repo]]\npypi = \"isodate==0.6.1\"\n[[repo]]\npypi = \"ISODATE==0.6.1\"\nname = \"again\"\n";
        let e = parse(text, &file).unwrap_err().to_string();
        assert!(e.contains(":4:8: this repo is repo `isodate` again"), "{e}");
    }

    #[test]
    fn a_secret_is_never_taken_for_a_variable_name() {
        for name in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "R2E_CACHE_KEY",
            "_X",
            "K2",
        ] {
            assert!(is_variable_name(name), "{name}");
        }
        for secret in [
            "ghp_0123456789abcdefABCDEF0123456789abcd",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "sk-proj-abc123",
            "3f2a9c0d4e5b6a7c8d9e0f1a2b3c4d5e",
            "3F2A9C0D4E5B6A7C8D9E0F1A2B3C4D5E",
            "my secret key",
            "github_token",
            "",
            "9LIVES",
        ] {
            assert!(!is_variable_name(secret), "{secret}");
        }
    }

    #[test]
    fn exclude_newer_is_an_instant_in_utc() {
        let e = err("[[repo]]\npath = \"repo\"\n[env]\nexclude_newer = \"2025-13-01\"\n");
        assert!(
            e.starts_with("P:4:17: `2025-13-01` is not an instant in UTC"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = err("[project]\nnmae = \"x\"\n");
        assert!(e.starts_with("P:2:1: unknown field `nmae`"), "{e}");
    }

    #[test]
    fn wrong_type_and_bad_value() {
        let e = err("[[repo]]\npath = \"repo\"\n[context]\nmax_tokens = \"many\"\n");
        assert!(e.starts_with("P:4:14:"), "{e}");
        let e = err("[[repo]]\npath = \"repo\"\n[context]\nstrategy = \"sliceed\"\n");
        assert!(e.starts_with("P:4:12:") && e.contains("sliceed"), "{e}");
    }

    #[test]
    fn a_base_image_that_is_no_image_name_or_without_docker_is_named() {
        let e = err(
            "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nbase_image = \"Debian:Bookworm\"\n",
        );
        assert!(
            e.starts_with("P:5:1: `base_image = \"Debian:Bookworm\"` is not an image name")
                && e.contains("`Debian` may hold lowercase letters"),
            "{e}"
        );
        let e = err("[[repo]]\npath = \"repo\"\n[sandbox]\nbase_image = \"debian:bookworm\"\n");
        assert!(
            e.starts_with("P:4:1: `base_image` is for `backend = \"docker\"`"),
            "{e}"
        );
    }

    #[test]
    fn a_registry_that_is_no_host_and_prefix_or_without_docker_is_named() {
        let e = err(
            "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"images\"\n",
        );
        assert!(
            e.starts_with("P:5:1: `registry = \"images\"` is not a registry and prefix")
                && e.contains("HOST[:PORT]/PREFIX"),
            "{e}"
        );
        let e = err(
            "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"team/r2e\"\n",
        );
        assert!(e.contains("`team` is no registry's host"), "{e}");
        let e = err(
            "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"127.0.0.1:5000/R2E\"\n",
        );
        assert!(e.contains("`R2E` may hold lowercase letters"), "{e}");
        let e = err("[[repo]]\npath = \"repo\"\n[sandbox]\nregistry = \"127.0.0.1:5000/r2e\"\n");
        assert!(
            e.starts_with("P:4:1: `registry` is for `backend = \"docker\"`"),
            "{e}"
        );
    }

    #[test]
    fn missing_repo_path_is_named() {
        let e = err("[[repo]]\npath = \"nope\"\n");
        assert!(
            e.starts_with("P:2:8: repo path") && e.contains("nope` does not exist"),
            "{e}"
        );
    }

    #[test]
    fn variants_merge_over_the_pipeline_and_bad_ones_are_located() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir(dir.path().join("repo")).unwrap();
        let text = "[[repo]]\npath = \"repo\"\n[context]\nmax_tokens = 500\n[select]\nmin_branch_coverage = 0.5\n\
                    [[variant]]\nname = \"naive\"\ncontext.strategy = \"naive\"\n\
                    [[variant]]\nname = \"strict\"\n[variant.select]\nmin_branch_coverage = 0.9\n";
        let c = parse(text, &dir.path().join("pipeline.toml")).unwrap();
        let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["naive", "strict"]);
        let naive = c.variant("naive").unwrap();
        // Only the named key changes; the pipeline's other keys of the table stay.
        assert_eq!(naive.context.strategy, Strategy::Naive);
        assert_eq!(naive.context.max_tokens, 500);
        assert_eq!(naive.select.min_branch_coverage, 0.5);
        assert_eq!(naive.output, dir.path().join("out/variants/naive"));
        let strict = c.variant("strict").unwrap();
        assert_eq!(strict.select.min_branch_coverage, 0.9);
        assert_eq!(strict.context.strategy, Strategy::Sliced);
        assert!(
            c.variant("other")
                .unwrap_err()
                .to_string()
                .contains("`naive`, `strict`")
        );

        // A bad value in a variant names the variant, its line and column.
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\ncontext.strategy = \"wide\"\n",
        );
        assert!(
            e.starts_with("P:5:1: variant `v`: `context`:") && e.contains("wide"),
            "{e}"
        );
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\nselect.min_branch_coverage = 2.0\n",
        );
        assert!(
            e.starts_with("P:5:8: variant `v`: `min_branch_coverage`"),
            "{e}"
        );
        // Under a `[variant.section]` header, and by section when two sections share a key.
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\n[variant.select]\nmin_branch_coverage = 2.0\n",
        );
        assert!(
            e.starts_with("P:6:1: variant `v`: `min_branch_coverage`"),
            "{e}"
        );
        let e = err(
            "[[repo]]\npath = \"repo\"\n[providers.p]\nbase_url = \"http://h\"\n[[variant]]\nname = \"v\"\n\
                     generate.generator = \"llm\"\ngenerate.provider = \"p\"\ngenerate.model = \"m\"\n\
                     refine.enabled = true\nrefine.provider = \"nowhere\"\nrefine.model = \"m\"\n",
        );
        assert!(
            e.starts_with("P:11:8: variant `v`: unknown provider `nowhere`"),
            "{e}"
        );
        // Settings a variant cannot change, duplicate and unsafe names.
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\nenv.python = \"python3.12\"\n",
        );
        assert!(e.starts_with("P:5:1: unknown field `env`"), "{e}");
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\n[[variant]]\nname = \"v\"\n",
        );
        assert!(e.starts_with("P:6:8: two variants are named `v`"), "{e}");
        let e = err("[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"../x\"\n");
        assert!(e.starts_with("P:4:8: a variant name"), "{e}");
        // A variant that asks a model checks its provider as the pipeline would.
        let e = err(
            "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"m\"\ngenerate.generator = \"hybrid\"\n",
        );
        assert!(
            e.starts_with("P:5:10: variant `m`: `generator = \"hybrid\"` needs `provider"),
            "{e}"
        );
        let e = err(
            "[[repo]]\npath = \"repo\"\n[refine]\nenabled = true\nprovider = \"nowhere\"\nmodel = \"m\"\n",
        );
        assert!(e.starts_with("P:5:1: unknown provider `nowhere`"), "{e}");
    }

    #[test]
    fn defaults() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir(dir.path().join("repo")).unwrap();
        let c = parse(
            "[[repo]]\npath = \"repo\"\n",
            &dir.path().join("pipeline.toml"),
        )
        .unwrap();
        assert_eq!(c.output, dir.path().join("out"));
        assert_eq!(c.cache, dir.path().join("cache"));
        assert_eq!(c.repos[0].name, "repo");
        assert_eq!(c.context, ContextConfig::default());
        assert!(c.extract.connectivity);
    }
}
