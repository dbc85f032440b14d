//! What each stage's actions are keyed by besides the function they are about: the settings
//! part of the stages' key structs, made here once. `generate` makes its `GenerateKey`s from
//! [`explorer`] and its model requests from [`harness_request`] and [`harness_prompts`];
//! `validate` its `ValidateKey`s from [`validation`]; `refine` its requests from
//! [`spec_request`]; `extract` and `slice` are keyed by `[extract]` and `[context]` as
//! `keys::AnalysisKey` holds them. The build records the same values per stage
//! ([`of_pipeline`]) in its state, and `r2e status` compares the last build's with the
//! pipeline's, field by field: one source for why an action runs again.

use r2e_exec::llm::prompts::TemplateSets;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use r2e_core::config::{
    Api, BugfixConfig, Config, GenerateConfig, HarnessMode, RefineConfig, SandboxConfig, Template,
};
use r2e_core::keys::{ExplorerSettings, GenerateSettings, ValidateSettings};
use r2e_core::model::RequestSettings;
use r2e_core::records::Generator;
use r2e_core::verdict::Policy;
use r2e_exec::jobs::sandbox_key;
use r2e_exec::py;
use r2e_exec::sandbox::Sandbox;

/// The built-in generator's settings, as its `GenerateKey`s hold them.
pub fn explorer(
    generate: &GenerateConfig,
    sandbox: &dyn Sandbox,
    settings: &SandboxConfig,
) -> GenerateSettings {
    GenerateSettings {
        scripts: py::files_hash(py::EXPLORER),
        explorer: explorer_settings(generate),
        sandbox: sandbox_key(sandbox, settings),
    }
}

/// The explorer's own settings (`[generate]`), the `settings` of its `GenerateKey`s.
pub fn explorer_settings(generate: &GenerateConfig) -> ExplorerSettings {
    ExplorerSettings {
        budget: generate.budget,
        plateau: generate.plateau,
        seed: generate.seed,
        max_tests: generate.max_tests,
        per_call_timeout_ms: generate.per_call_timeout_ms,
        time_limit_seconds: generate.time_limit_seconds,
    }
}

/// Runs of the original checked as a candidate (natural order, then shuffled) in a validation.
pub const RUNS: u32 = 2;

/// A validation's settings, as its `ValidateKey`s hold them: `repeats` records of the
/// reference (`[validate] repeats`).
pub fn validation(
    sandbox: &dyn Sandbox,
    settings: &SandboxConfig,
    repeats: u32,
) -> ValidateSettings {
    ValidateSettings {
        scripts: py::files_hash(py::RUNNER),
        runs: repeats,
        run_timeout_seconds: settings.run_timeout_seconds,
        sandbox: sandbox_key(sandbox, settings),
    }
}

/// The settings of the model requests that write harnesses (`[generate]`, the provider's API
/// kind).
pub fn harness_request(api: Api, generate: &GenerateConfig) -> RequestSettings {
    RequestSettings {
        api,
        model: generate.model.clone().unwrap_or_default(),
        temperature: generate.temperature,
        max_tokens: generate.max_completion_tokens,
    }
}

/// The settings of the model requests that refine docstrings (`[refine]`, the provider's API
/// kind).
pub fn spec_request(api: Api, refine: &RefineConfig) -> RequestSettings {
    RequestSettings {
        api,
        model: refine.model.clone().unwrap_or_default(),
        temperature: refine.temperature,
        max_tokens: refine.max_completion_tokens,
    }
}

/// The template of a harness's first request, by mode.
pub fn first_prompt(mode: HarnessMode) -> Template {
    match mode {
        HarnessMode::Equivalence => Template::TestgenEquivalence,
        HarnessMode::OutputPrediction => Template::TestgenOutputPrediction,
    }
}

/// The template of a repair round for a harness that failed, and for one that passed under the
/// coverage threshold.
pub const FIX_ERROR: Template = Template::TestgenFixError;
pub const IMPROVE_COVERAGE: Template = Template::TestgenImproveCoverage;

/// The templates a model-written harness's requests are rendered from: the mode's first, and
/// the repair rounds' when there are any.
pub fn harness_prompts(generate: &GenerateConfig) -> Vec<Template> {
    let mut out = vec![first_prompt(generate.mode)];
    if generate.repair_rounds > 0 {
        out.extend([FIX_ERROR, IMPROVE_COVERAGE]);
    }
    out
}

/// The template a refined docstring's request is rendered from.
pub const SPECGEN: Template = Template::Specgen;

/// The settings of the model requests that write bug-fix statements (`[bugfix]`, the
/// provider's API kind).
pub fn statement_request(api: Api, bugfix: &BugfixConfig) -> RequestSettings {
    RequestSettings {
        api,
        model: bugfix.model.clone().unwrap_or_default(),
        temperature: bugfix.temperature,
        max_tokens: bugfix.max_completion_tokens,
    }
}

/// The template a bug-fix task's statement request is rendered from.
pub const ISSUE: Template = Template::BugfixIssue;

/// What stage `bugfix` is keyed by: `[bugfix]`, and with `statement = "model"` the statement
/// requests' settings and template (stage `statement`).
#[derive(Serialize)]
struct Bugfix<'a> {
    #[serde(flatten)]
    config: &'a BugfixConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    statement: Option<Asked>,
}

/// What `generate`'s actions are keyed by: the explorer's key settings (built-in and hybrid),
/// the model's request settings and prompts (llm and hybrid).
#[derive(Serialize)]
struct Generate {
    generator: Generator,
    #[serde(flatten)]
    explorer: Option<GenerateSettings>,
    #[serde(flatten)]
    model: Option<Asked>,
    /// The capture of the repositories' own tests (`[generate] capture_tests`), when on.
    #[serde(skip_serializing_if = "Option::is_none")]
    capture: Option<r2e_core::keys::CaptureSettings>,
}

/// A model-driven stage's requests: their settings, the hashes of the templates their messages
/// are rendered from (the messages' part of the key that a pipeline sets), and what else
/// shapes the rendered prompts or how many are asked.
#[derive(Serialize)]
struct Asked {
    request: RequestSettings,
    prompt: BTreeMap<&'static str, String>,
    /// `generate`: how many repair rounds may follow the first request.
    #[serde(skip_serializing_if = "Option::is_none")]
    repair_rounds: Option<u32>,
    /// `refine`: how many observed calls the prompt shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_examples: Option<u32>,
}

/// What `validate` is keyed by, and the verdict policy its stored runs are judged under when
/// read (in no key: a change of it judges again and runs nothing).
#[derive(Serialize)]
struct Validate {
    #[serde(flatten)]
    runs: ValidateSettings,
    policy: Policy,
    unstable: r2e_core::config::Unstable,
}

/// Each stage's settings, as the stages key their actions with them, for every dataset the
/// pipeline builds (a variant's stages are named `VARIANT: stage`): `extract`, `slice`,
/// `generate`, `validate` and `refine` (null when disabled), each a JSON object whose fields
/// are the key structs' (nested objects stand for nested structs). `sandbox` is the sandbox
/// the build runs code in (its backend's name and whether it isolates are in the keys).
/// Nothing secret is among them: of `[providers]` only the API kind, nothing of `[env]`.
pub fn of_pipeline(
    cfg: &Config,
    sandbox: &dyn Sandbox,
    templates: &TemplateSets,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (name, c) in cfg.builds() {
        let stage = |s: &str| match name {
            Some(n) => format!("{n}: {s}"),
            None => s.to_owned(),
        };
        // Read only when a stage of this dataset asks a model (as the fingerprint does).
        let asks = c.renders_prompts();
        let templates: BTreeMap<Template, String> = asks
            .then(|| templates.get(c).ok())
            .flatten()
            .map(|t| t.sources.iter().map(|(n, _, h)| (*n, h.to_hex())).collect())
            .unwrap_or_default();
        let prompts = |names: &[Template]| -> BTreeMap<&'static str, String> {
            names
                .iter()
                .map(|&n| (n.name(), templates.get(&n).cloned().unwrap_or_default()))
                .collect()
        };
        let g = &c.generate;
        let generate = Generate {
            generator: g.generator,
            explorer: (g.generator != Generator::Llm).then(|| explorer(g, sandbox, &c.sandbox)),
            model: g.generator.uses_model().then(|| Asked {
                request: harness_request(
                    c.generate_provider().map(|p| p.api).unwrap_or_default(),
                    g,
                ),
                prompt: prompts(&harness_prompts(g)),
                repair_rounds: Some(g.repair_rounds),
                max_examples: None,
            }),
            capture: (g.generator != Generator::Llm && g.capture_tests)
                .then(|| super::capture::settings(g)),
        };
        let validate = Validate {
            runs: validation(sandbox, &c.sandbox, c.validate.repeats),
            policy: c.validate.policy(),
            unstable: c.validate.unstable,
        };
        let refine = c.refine.enabled.then(|| Asked {
            request: spec_request(
                c.refine_provider().map(|p| p.api).unwrap_or_default(),
                &c.refine,
            ),
            prompt: prompts(&[SPECGEN]),
            repair_rounds: None,
            max_examples: Some(c.refine.max_examples),
        });
        let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
        out.insert(stage("extract"), value(serde_json::to_value(&c.extract)));
        out.insert(stage("slice"), value(serde_json::to_value(&c.context)));
        out.insert(stage("generate"), value(serde_json::to_value(&generate)));
        out.insert(stage("validate"), value(serde_json::to_value(&validate)));
        out.insert(stage("refine"), value(serde_json::to_value(&refine)));
        let bugfix = c.bugfix.as_ref().map(|b| Bugfix {
            config: b,
            statement: c.statement_provider().map(|p| Asked {
                request: statement_request(p.api, b),
                prompt: prompts(&[ISSUE]),
                repair_rounds: None,
                max_examples: None,
            }),
        });
        out.insert(stage("bugfix"), value(serde_json::to_value(&bugfix)));
    }
    out
}

/// The fields of a JSON value, flattened: an object's members by their dotted paths
/// (`sandbox.base_image`), anything else (numbers, text, lists, null) a field of its own.
/// The whole value null is no field at all (a stage without settings).
pub fn fields(value: &Value) -> BTreeMap<String, &Value> {
    fn walk<'a>(path: String, v: &'a Value, out: &mut BTreeMap<String, &'a Value>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let at = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(at, v, out);
                }
            }
            _ => {
                out.insert(path, v);
            }
        }
    }
    let mut out = BTreeMap::new();
    if !value.is_null() {
        walk(String::new(), value, &mut out);
    }
    out
}

/// The fields that differ between two values, in path order, each `` `path`: before -> now ``
/// (JSON texts; `(none)` for a field one side lacks).
pub fn changes(before: &Value, now: &Value) -> Vec<String> {
    let (b, n) = (fields(before), fields(now));
    let mut paths: Vec<&String> = b.keys().chain(n.keys()).collect();
    paths.sort();
    paths.dedup();
    let show = |v: Option<&&Value>| v.map_or("(none)".to_owned(), |v| v.to_string());
    paths
        .into_iter()
        .filter(|p| b.get(*p) != n.get(*p))
        .map(|p| format!("`{p}`: {} -> {}", show(b.get(p)), show(n.get(p))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_are_the_differing_fields_by_dotted_path() {
        let before = json!({
            "explorer": {"budget": 1500, "seed": 0},
            "sandbox": {"backend": "docker-2"},
            "prompt": {"specgen": "aa"},
            "list": [1, 2],
        });
        let now = json!({
            "explorer": {"budget": 99, "seed": 0},
            "sandbox": {"backend": "docker-2", "base_image": "debian:trixie-slim"},
            "prompt": {"specgen": "bb"},
            "list": [1, 2],
        });
        assert_eq!(
            changes(&before, &now),
            [
                "`explorer.budget`: 1500 -> 99",
                "`prompt.specgen`: \"aa\" -> \"bb\"",
                "`sandbox.base_image`: (none) -> \"debian:trixie-slim\"",
            ]
        );
        assert!(changes(&now, &now).is_empty());
        // A stage turned on: each of its fields from nothing.
        assert_eq!(
            changes(&Value::Null, &json!({"request": {"model": "m"}})),
            ["`request.model`: (none) -> \"m\""]
        );
    }

    #[test]
    fn the_explorer_settings_are_the_pipelines() {
        let cfg = r2e_core::config::GenerateConfig::default();
        let sandbox = r2e_exec::sandbox::fake::FakeSandbox::new(|_| unreachable!());
        let settings = explorer(&cfg, &sandbox, &SandboxConfig::default());
        assert_eq!(settings.explorer.budget, cfg.budget);
        assert_eq!(
            settings.sandbox.backend,
            r2e_core::keys::SandboxBackend::Fake
        );
        let v = serde_json::to_value(&settings).unwrap();
        assert_eq!(v["scripts"], json!(py::files_hash(py::EXPLORER).to_hex()));
        assert_eq!(v["explorer"]["budget"], json!(cfg.budget));
    }
}
