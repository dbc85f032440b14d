//! `pipeline.toml`, format version 1: parsed strictly (unknown keys, wrong types and bad values
//! are errors naming the file, line and column) and resolved into a [`Config`].
//!
//! Each stage owns one table (`[extract]`, `[context]`, and later `[env]`, `[generate]`,
//! `[validate]`, `[select]`, `[refine]`, `[providers.NAME]`, `[[variant]]`), so that later stages
//! add tables and keys without changing the meaning of a version-1 file.
//!
//! One module per concern: `locate` (where a message points), `project`, `repos`, `sources`
//! (`[[source]]` and `repos.lock`), `env`, `stages` (the tables of the stages without a model),
//! `models` (the stages that ask models, their providers and prompts), `sandbox`, `serve`,
//! `remote` (`[cache]` and shards), `variants`, and `checks` (what types cannot express). This
//! module holds the file as written and the resolved [`Config`]; `reference` renders the
//! structs' doc comments as `docs/pipeline-toml.md`.
//!
//! What configuration takes from environment variables is read here: installer settings and
//! `R2E_LOG` (`env`), the secrets `*_env` settings name (`models`, `env`), `DOCKER_CONFIG`
//! (`sandbox`).

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, Result};

mod checks;
mod env;
mod locate;
mod models;
mod project;
pub mod reference;
mod remote;
mod repos;
mod sandbox;
mod serve;
mod sources;
mod stages;
mod variants;

#[cfg(test)]
mod tests;

pub use env::{EnvConfig, Installer, log_timings, secret_from_env};
pub use locate::line_col;
pub use models::{
    Api, BUILTIN_MODELS, EvalModel, EvaluateConfig, PromptStyle, ProviderConfig, RefineConfig,
    Template,
};
pub use remote::{REMOTE_SCHEMES, RemoteCache, RemoteMode, Shard};
pub use repos::{
    DEFAULT_EXCLUDE, PYPI_INDEX, PinnedHash, PypiRelease, RepoConfig, RepoSource, Scope,
    ScopeMatcher, check_repo_name, normalize_project,
};
pub use sandbox::{Backend, SandboxConfig, check_reference, check_registry, docker_config_dir};
pub use serve::ServeConfig;
pub use sources::{PACKAGING_FILES, SourceConfig, read_lock, sources_fingerprint};
pub use stages::{
    BugSource, BugfixConfig, ContextConfig, ExtractConfig, GenerateConfig, HarnessMode,
    SelectConfig, Statement, Strategy, Unstable, ValidateConfig,
};

pub use crate::records::Generator;

use checks::check_stages;
use env::EnvOptions;
use locate::{Source, find_section_key};
use models::{ProviderOptions, prompt_file, providers};
use project::{ProjectOptions, check_places};
use remote::{CacheOptions, remote_cache};
use repos::{RepoOptions, repos};
use sources::{SourceOptions, locked_repos, sources};
use variants::{VariantOptions, variants};

/// `pipeline.toml`, format version 1, as written. Unknown keys, wrong types and
/// bad values are errors naming the file, line and column (exit 2). Relative paths are relative
/// to the file. Each stage owns one table; a table left out takes every default.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The format version; this r2e reads version 1 (another is refused).
    #[serde(default)]
    #[schemars(with = "Option<i64>", extend("default" = 1))]
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
    /// Optional: bug-fix tasks from the valid harnesses (off when absent).
    bugfix: Option<BugfixConfig>,
    #[serde(default)]
    providers: std::collections::BTreeMap<String, ProviderOptions>,
    /// Optional: another file for a prompt template, by the template's name (see
    /// `prompts/README.md`), relative to the pipeline. The others come from the pipeline's
    /// `prompts/` folder or, failing that, r2e's built-in templates. An unknown name, or a file
    /// that does not exist, is refused.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
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
    #[schemars(with = "Vec<VariantOptions>")]
    variant: Vec<Spanned<VariantOptions>>,
    cache: Option<CacheOptions>,
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
    /// `[bugfix]`, when present: bug-fix tasks from the valid harnesses (`bugfix.jsonl`).
    pub bugfix: Option<BugfixConfig>,
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

    /// The provider `[bugfix] statement = "model"` asks, when statements are a model's.
    pub fn statement_provider(&self) -> Option<&ProviderConfig> {
        let b = self.bugfix.as_ref()?;
        if b.statement != Statement::Model {
            return None;
        }
        let name = b.provider.as_deref()?;
        self.providers.iter().find(|p| p.name == name)
    }

    /// Whether a stage of this dataset renders prompt templates: a model writes harnesses,
    /// refines docstrings, writes bug-fix statements, or is evaluated. The fingerprint, the
    /// recorded settings and the build read the templates only then.
    pub fn renders_prompts(&self) -> bool {
        self.generate.generator.uses_model()
            || self.refine.enabled
            || self.evaluate.enabled
            || self.statement_provider().is_some()
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
        output: rel(&project.output, project::DEFAULT_OUTPUT),
        cache: rel(&project.cache, project::DEFAULT_CACHE),
        repos,
        sources,
        extract: options.extract,
        context: options.context,
        env,
        generate: options.generate,
        validate: options.validate,
        select: options.select,
        bugfix: options.bugfix,
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
