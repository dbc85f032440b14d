//! What each stage's actions are keyed by besides the function they are about: the settings
//! part of the stages' key structs, made here once. `generate` makes its `GenerateKey`s from
//! [`explorer`] and its model requests from [`harness_request`] and [`harness_prompts`];
//! `validate` its `ValidateKey`s from [`validation`]; `refine` its requests from
//! [`spec_request`]; `extract` and `slice` are keyed by `[extract]` and `[context]` as
//! `keys::AnalysisKey` holds them.

use r2e_core::config::{Api, GenerateConfig, HarnessMode, RefineConfig, SandboxConfig, Template};
use r2e_core::keys::{ExplorerSettings, GenerateSettings, ValidateSettings};
use r2e_core::model::RequestSettings;
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
        seed: generate.seed,
        max_tests: generate.max_tests,
        per_call_timeout_ms: generate.per_call_timeout_ms,
        time_limit_seconds: generate.time_limit_seconds,
    }
}

/// Runs of a harness per side (the reference recorded, the original checked as a candidate).
pub const RUNS: u32 = 2;

/// A validation's settings, as its `ValidateKey`s hold them.
pub fn validation(sandbox: &dyn Sandbox, settings: &SandboxConfig) -> ValidateSettings {
    ValidateSettings {
        scripts: py::files_hash(py::RUNNER),
        runs: RUNS,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
