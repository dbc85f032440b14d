//! The checks of stage settings that types cannot express, run on the pipeline and on each
//! variant, each error located by the caller (the file's key, or the variant's).

use super::Config;
use super::models::{Api, BUILTIN_MODELS, PromptStyle};
use super::sandbox::{Backend, check_reference, check_registry};
use crate::error::{Error, Result};
use crate::records::Generator;

/// Locates a key for a message: `(section, key)`.
pub(super) type Locate<'a> = dyn Fn(&str, &str, &str) -> Error + 'a;

/// The checks of stage settings that types cannot express, for the pipeline and each variant.
pub(super) fn check_stages(cfg: &Config, at: &Locate) -> Result<()> {
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
    if let Some(b) = &cfg.bugfix {
        check_bugfix(cfg, b, at)?;
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

/// `[bugfix]`: the values this r2e builds; the others the issue names are refused as not built
/// yet, rather than silently ignored.
fn check_bugfix(cfg: &Config, b: &super::BugfixConfig, at: &Locate) -> Result<()> {
    use super::Statement;
    if b.sources.is_empty() {
        return Err(at(
            "bugfix",
            "sources",
            "`sources` names at least one source (`\"mutants\"`, `\"history\"`)",
        ));
    }
    if b.per_function == 0 {
        return Err(at(
            "bugfix",
            "per_function",
            "`per_function` must be at least 1",
        ));
    }
    if b.depth > 1 {
        return Err(at("bugfix", "depth", "`depth` is 0 or 1"));
    }
    if b.combine == 0 {
        return Err(at("bugfix", "combine", "`combine` must be at least 1"));
    }
    if b.statement == Statement::Model {
        check_model(
            cfg,
            "bugfix",
            "statement",
            "`statement = \"model\"`",
            b.provider.as_deref(),
            b.model.as_deref(),
            at,
        )?;
    }
    if !(0.0..=2.0).contains(&b.temperature) {
        return Err(at(
            "bugfix",
            "temperature",
            "`temperature` is at least 0 and at most 2",
        ));
    }
    if b.max_completion_tokens == 0 {
        return Err(at(
            "bugfix",
            "max_completion_tokens",
            "`max_completion_tokens` must be at least 1",
        ));
    }
    Ok(())
}
