//! The model-driven stages and what they ask: `[refine]`, `[evaluate]` and its
//! `[[evaluate.model]]`, the `[providers.NAME]` servers (their API keys read from the
//! environment), and the prompt templates `[prompts]` names.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::env::env_var_name;
use super::locate::{Source, find_key};
use crate::error::Result;

/// `[refine]`: docstring refinement by a model (stage `refine`): a model rewrites each selected
/// instance's docstring into its `spec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RefineConfig {
    /// Run the stage (it needs `provider` and `model`).
    pub enabled: bool,
    /// The `[providers.NAME]` asked.
    pub provider: Option<String>,
    /// The model asked.
    pub model: Option<String>,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// The answer's token limit.
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

/// `[evaluate]`: code generation by models on the instances (stage `evaluate`, the paper's
/// §5), checked through the one check path; pass@k and self-repair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluateConfig {
    /// Run the stage (it needs at least one `[[evaluate.model]]`).
    pub enabled: bool,
    /// Candidates per instance and model.
    pub samples: u32,
    /// The pass@k reported (the unbiased estimator), each at least 1 and at most `samples`.
    pub k: Vec<u32>,
    /// How the code-generation prompt asks.
    pub prompt: PromptStyle,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// The answer's token limit.
    pub max_completion_tokens: u32,
    /// Self-repair rounds for failing samples, with the failing tests' calls and outcomes.
    pub repair_rounds: u32,
    /// A build that would ask more requests than this refuses before asking.
    pub max_requests: u64,
    /// The models evaluated. A variant's list replaces the pipeline's.
    pub model: Vec<EvalModel>,
    /// With `[bugfix]`: evaluate the models on the bug-fix tasks too, as single-file fixes
    /// (the model sees the statement and the broken function's file and writes the fixed
    /// function; `bugfix_results.jsonl`, pass@k per origin and depth). One round each: no
    /// repair.
    pub bugfix: bool,
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
            bugfix: true,
        }
    }
}

/// How the code-generation prompt asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// The code, at once (`codegen_direct`).
    #[default]
    Direct,
    /// A plan first, then the code (`codegen_cot`): chain of thought; chat models only.
    Cot,
}

/// One `[[evaluate.model]]`: a `[providers.NAME]` table and its model, or the provider
/// `builtin` with `reference` (the original function; it must score 1.0) or `mutants` (sample
/// i is the i-th built-in mutant).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalModel {
    /// A `[providers.NAME]`, or `builtin`.
    pub provider: String,
    /// The model asked (with `builtin`: `reference` or `mutants`).
    pub model: String,
    /// The model's training cutoff (a month, a day or an RFC 3339 timestamp, as `2024-10`):
    /// the instances created after it (here from 2024-11-01 on) are its unseen split, whose
    /// pass@k is reported beside that of all of them. It splits the tables only; no key holds
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
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

/// `[providers.NAME]`: a model server, any OpenAI-compatible one (OpenAI, vLLM, llama.cpp,
/// Ollama, ...), named `NAME` by the stages that ask it.
///
/// The API key is read from the named environment variable and never written to a file, the
/// cache, a log or the dataset. Model answers are cached by the request (model, sampling
/// settings, the rendered prompt); a failed request is never cached, and the next build asks
/// again, except a prompt the server refuses (400) as longer than the model's context window
/// (OpenAI's `context_length_exceeded`, llama-cpp-python's "exceed context window", llama.cpp's
/// `exceed_context_size_error`): that refusal is the request's answer (`prompt_too_long`),
/// stored and never asked again. The `--json` summary's `llm` section counts requests executed
/// (such refusals included), cached and failed, and tokens, per stage (`generate`, `repair`,
/// `refine`) and model. With `temperature > 0`, a repair prompt that renders the same as an
/// earlier round's asks for a new sample.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderOptions {
    /// The server's URL, `http://` or `https://` (as `http://127.0.0.1:8000/v1`).
    #[schemars(with = "String")]
    base_url: Spanned<String>,
    /// The name of the environment variable holding the API key (as `OPENAI_API_KEY`); none for
    /// servers that need no key. A name in capitals: anything shaped like a key is refused, and
    /// not shown.
    #[schemars(with = "Option<String>")]
    api_key_env: Option<Spanned<String>>,
    /// Which endpoint is asked.
    #[schemars(extend("default" = Api::default()))]
    api: Option<Api>,
    /// Requests to the server at once; at least 1.
    #[schemars(extend("default" = DEFAULT_MAX_CONCURRENCY))]
    max_concurrency: Option<u32>,
    /// Seconds one request may take; at least 1.
    #[schemars(extend("default" = DEFAULT_TIMEOUT_SECONDS))]
    timeout_seconds: Option<u64>,
    /// Retries of a request after a 429, a 5xx, a timeout or a dropped connection (honouring
    /// `Retry-After`).
    #[schemars(extend("default" = DEFAULT_MAX_RETRIES))]
    max_retries: Option<u32>,
}

const DEFAULT_MAX_CONCURRENCY: u32 = 8;
const DEFAULT_TIMEOUT_SECONDS: u64 = 120;
const DEFAULT_MAX_RETRIES: u32 = 6;

/// Which OpenAI-compatible endpoint a provider is asked through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `POST {base_url}/chat/completions` with messages.
    #[default]
    Chat,
    /// `POST {base_url}/completions` with one prompt, for base models: a prompt that ends inside
    /// an open code block is continued (`examples/prompts-completions/`).
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
    BugfixIssue,
    BugfixFix,
}

impl Template {
    /// Every template, in the order r2e loads them.
    pub const ALL: [Template; 12] = [
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
        Template::BugfixIssue,
        Template::BugfixFix,
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
            Template::BugfixIssue => "bugfix_issue",
            Template::BugfixFix => "bugfix_fix",
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

/// The `[providers.NAME]` tables, with their API keys read from the environment.
pub(super) fn providers(
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
            max_concurrency: p.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
            timeout_seconds: p.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            max_retries: p.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        });
    }
    Ok(providers)
}

/// A `[prompts]` entry: a known template name and an existing file, relative to `base`.
pub(super) fn prompt_file(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
