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
    extract: ExtractConfig,
    #[serde(default)]
    context: ContextConfig,
    #[serde(default)]
    env: EnvOptions,
    #[serde(default)]
    generate: GenerateConfig,
    #[serde(default)]
    select: SelectConfig,
    #[serde(default)]
    providers: std::collections::BTreeMap<String, ProviderOptions>,
    #[serde(default)]
    prompts: std::collections::BTreeMap<String, Spanned<String>>,
}

/// `[providers.NAME]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderOptions {
    base_url: Spanned<String>,
    api_key_env: Option<String>,
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

/// The prompt templates (`prompts/`), by name.
pub const TEMPLATE_NAMES: &[&str] = &[
    "testgen_equivalence",
    "testgen_output_prediction",
    "testgen_fix_error",
    "testgen_improve_coverage",
    "specgen",
];

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
}

/// The curation filters of the `extract` stage (R2E's rules). Each is switchable; an excluded
/// function records the first filter that excluded it, by the name of its switch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractConfig {
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
    /// Exclude functions longer than `max_lines` lines.
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

/// Which harness generator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    /// The built-in coverage-guided explorer: no model needed.
    #[default]
    Builtin,
    /// A language model writes the harness from the function's context, then repairs it.
    Llm,
}

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
            max_tests: 12,
            per_call_timeout_ms: 1000,
            time_limit_seconds: 60,
        }
    }
}

/// `[select]`: which validated harnesses make benchmark instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelectConfig {
    /// The branch coverage (line coverage, for a function without branches) an instance needs.
    pub min_branch_coverage: f64,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            min_branch_coverage: 0.8,
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
    "UV_OFFLINE",
    "PIP_TIMEOUT",
    "UV_HTTP_TIMEOUT",
];

impl EnvOptions {
    fn resolve(self) -> EnvConfig {
        EnvConfig {
            python: self.python.unwrap_or_else(|| "python3".into()),
            installer: self.installer.unwrap_or_default(),
            extra_packages: self.extra_packages.unwrap_or_default(),
            infer_imports: self.infer_imports.unwrap_or(true),
            timeout_seconds: self.timeout_seconds.unwrap_or(900),
            system_site_packages: self.system_site_packages.unwrap_or(false),
            passthrough: PASSTHROUGH
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
        }
    }
}

/// Where a repository's files come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepoSource {
    /// A local folder, read from its working tree.
    Path(PathBuf),
    /// A git repository (URL or path) at a revision.
    Git { url: String, rev: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoConfig {
    pub name: String,
    pub source: RepoSource,
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
    pub extract: ExtractConfig,
    pub context: ContextConfig,
    pub env: EnvConfig,
    pub generate: GenerateConfig,
    pub select: SelectConfig,
    pub providers: Vec<ProviderConfig>,
    /// Prompt template files named in `[prompts]`, absolute; the others come from the
    /// pipeline's `prompts/` folder or, failing that, r2e's built-in templates.
    pub prompts: Vec<(String, PathBuf)>,
}

impl Config {
    /// The provider the `[generate]` stage asks, when its generator needs one.
    pub fn generate_provider(&self) -> Option<&ProviderConfig> {
        let name = self.generate.provider.as_deref()?;
        self.providers.iter().find(|p| p.name == name)
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

/// Parses pipeline text; `file` is its absolute path (for messages and relative paths).
pub fn parse(text: &str, file: &Path) -> Result<Config> {
    let at = |span: Option<Range<usize>>, msg: &str| -> Error {
        let (line, col) = span.map_or((1, 1), |s| line_col(text, s.start));
        Error::input(format!("{}:{line}:{col}: {msg}", file.display()))
    };
    let options: Options = toml::from_str(text).map_err(|e| at(e.span(), e.message()))?;
    if let Some(v) = &options.version
        && *v.get_ref() != 1
    {
        return Err(at(
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
    let output = rel(&project.output, "out");
    let cache = rel(&project.cache, "cache");
    let name = project.name.unwrap_or_else(|| {
        base.file_name()
            .map_or_else(|| "r2e".into(), |n| n.to_string_lossy().into_owned())
    });

    if options.repo.is_empty() {
        return Err(at(
            None,
            "no `[[repo]]` table: name at least one repository to build",
        ));
    }
    let mut repos: Vec<RepoConfig> = Vec::new();
    for r in options.repo {
        let source = match (&r.path, &r.git) {
            (Some(p), None) => {
                if let Some(rev) = &r.rev {
                    return Err(at(
                        Some(rev.span()),
                        "`rev` goes with `git`, not with `path`",
                    ));
                }
                let dir = base.join(p.get_ref());
                if !dir.is_dir() {
                    let what = if dir.exists() {
                        "is not a folder"
                    } else {
                        "does not exist"
                    };
                    return Err(at(
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
                return Err(at(Some(p.span()), "a repo takes `path` or `git`, not both"));
            }
            (None, None) => {
                let span = r.name.as_ref().map(|n| n.span());
                return Err(at(
                    span,
                    "a `[[repo]]` needs `path = \"...\"` or `git = \"...\"`",
                ));
            }
        };
        let name = match &r.name {
            Some(n) => {
                let n_ref = n.get_ref();
                if n_ref.is_empty() || n_ref.contains([':', '/', '\\']) {
                    return Err(at(
                        Some(n.span()),
                        "a repo name must be non-empty and hold no `:`, `/` or `\\`",
                    ));
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
                .map(|s| s.span());
            return Err(at(
                span,
                &format!("two repos are named `{name}`; give one a `name = \"...\"`"),
            ));
        }
        repos.push(RepoConfig { name, source });
    }
    if !(0.0..=1.0).contains(&options.select.min_branch_coverage) {
        return Err(at(
            find_key(text, "min_branch_coverage"),
            "`min_branch_coverage` must be between 0 and 1",
        ));
    }
    if options.generate.budget == 0 || options.generate.max_tests == 0 {
        return Err(at(
            find_key(text, "budget").or(find_key(text, "max_tests")),
            "`budget` and `max_tests` must be at least 1",
        ));
    }
    if options.context.max_tokens == 0 {
        let span = find_key(text, "max_tokens");
        return Err(at(span, "`max_tokens` must be at least 1"));
    }
    let mut providers = Vec::new();
    for (pname, p) in options.providers {
        let url = p.base_url.get_ref().trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(at(
                Some(p.base_url.span()),
                "`base_url` must start with http:// or https://",
            ));
        }
        if p.max_concurrency == Some(0) || p.timeout_seconds == Some(0) {
            return Err(at(
                find_key(text, "max_concurrency").or(find_key(text, "timeout_seconds")),
                "`max_concurrency` and `timeout_seconds` must be at least 1",
            ));
        }
        let api_key = p
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        providers.push(ProviderConfig {
            name: pname,
            base_url: url,
            api_key_env: p.api_key_env,
            api_key,
            api: p.api.unwrap_or_default(),
            max_concurrency: p.max_concurrency.unwrap_or(8),
            timeout_seconds: p.timeout_seconds.unwrap_or(120),
            max_retries: p.max_retries.unwrap_or(6),
        });
    }
    if options.generate.generator == Generator::Llm {
        let span = find_key(text, "generator");
        let Some(name) = &options.generate.provider else {
            return Err(at(
                span,
                "`generator = \"llm\"` needs `provider = \"NAME\"` naming a `[providers.NAME]` table",
            ));
        };
        let Some(provider) = providers.iter().find(|p| &p.name == name) else {
            let known: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            return Err(at(
                find_key(text, "provider").or(span),
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
        if options.generate.model.as_deref().is_none_or(str::is_empty) {
            return Err(at(span, "`generator = \"llm\"` needs `model = \"...\"`"));
        }
        if let Some(var) = &provider.api_key_env
            && provider.api_key.is_none()
        {
            return Err(at(
                find_key(text, "api_key_env"),
                &format!(
                    "provider `{name}` reads its API key from the environment variable `{var}`, which is not set"
                ),
            ));
        }
    }
    let mut prompts = Vec::new();
    for (pname, path) in options.prompts {
        if !TEMPLATE_NAMES.contains(&pname.as_str()) {
            return Err(at(
                Some(path.span()),
                &format!(
                    "unknown prompt `{pname}`; the templates are {}",
                    TEMPLATE_NAMES.join(", ")
                ),
            ));
        }
        let full = base.join(path.get_ref());
        if !full.is_file() {
            return Err(at(
                Some(path.span()),
                &format!("prompt file `{}` does not exist", full.display()),
            ));
        }
        prompts.push((pname, full));
    }
    Ok(Config {
        file: file.to_path_buf(),
        name,
        output,
        cache,
        repos,
        extract: options.extract,
        context: options.context,
        env: options.env.resolve(),
        generate: options.generate,
        select: options.select,
        providers,
        prompts,
    })
}

fn default_repo_name(source: &RepoSource) -> String {
    let raw = match source {
        RepoSource::Path(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
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

/// Whether `R2E_LOG` asks for stage timings on stderr.
pub fn log_timings() -> bool {
    std::env::var("R2E_LOG").is_ok_and(|v| v.split(',').any(|p| p.trim() == "timings"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn missing_repo_path_is_named() {
        let e = err("[[repo]]\npath = \"nope\"\n");
        assert!(
            e.starts_with("P:2:8: repo path") && e.contains("nope` does not exist"),
            "{e}"
        );
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
