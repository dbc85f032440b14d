//! The prompt templates: files named after the template (`prompts/testgen_equivalence.j2`, any
//! extension), rendered with minijinja. A pipeline takes a template from `[prompts]`, else from
//! the `prompts/` folder beside it, else r2e's built-in copy of `prompts/` (so a pipeline
//! anywhere works). Rendering is deterministic; the rendered text is part of every request key,
//! so editing one template re-issues exactly the requests rendered from it.

use std::path::Path;

use r2e_core::config::{Config, Template};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;

/// r2e's own copy of a template, from `prompts/`.
fn builtin(template: Template) -> &'static str {
    match template {
        Template::TestgenEquivalence => include_str!("../../../../prompts/testgen_equivalence.j2"),
        Template::TestgenOutputPrediction => {
            include_str!("../../../../prompts/testgen_output_prediction.j2")
        }
        Template::TestgenFixError => include_str!("../../../../prompts/testgen_fix_error.j2"),
        Template::TestgenImproveCoverage => {
            include_str!("../../../../prompts/testgen_improve_coverage.j2")
        }
        Template::Specgen => include_str!("../../../../prompts/specgen.j2"),
        Template::CodegenDirect => include_str!("../../../../prompts/codegen_direct.j2"),
        Template::CodegenCot => include_str!("../../../../prompts/codegen_cot.j2"),
        Template::CodegenRepair => include_str!("../../../../prompts/codegen_repair.j2"),
        Template::CodegenDirectCompletion => {
            include_str!("../../../../prompts/codegen_direct_completion.j2")
        }
        Template::CodegenRepairCompletion => {
            include_str!("../../../../prompts/codegen_repair_completion.j2")
        }
    }
}

/// The loaded templates.
pub struct Templates {
    env: minijinja::Environment<'static>,
    /// (template, where it came from, hash of its text).
    pub sources: Vec<(Template, String, Hash)>,
}

impl Templates {
    pub fn load(cfg: &Config) -> Result<Templates> {
        let folder = cfg.file.parent().unwrap_or(Path::new("/")).join("prompts");
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        let mut sources = Vec::new();
        for template in Template::ALL {
            let name = template.name();
            let configured = cfg
                .prompts
                .iter()
                .find(|(t, _)| *t == template)
                .map(|(_, p)| p.clone());
            let found = configured.or_else(|| find_in(&folder, name));
            let (origin, text) = match found {
                Some(path) => {
                    let text = fs_err::read_to_string(&path)
                        .map_err(|e| Error::input(format!("prompt `{name}`: {e}")))?;
                    (path.display().to_string(), text)
                }
                None => ("built-in".to_owned(), builtin(template).to_owned()),
            };
            sources.push((template, origin.clone(), Hash::of_bytes(text.as_bytes())));
            env.add_template_owned(name.to_owned(), text)
                .map_err(|e| Error::input(format!("{origin}: {e}")))?;
        }
        Ok(Templates { env, sources })
    }

    /// Renders `template` with `vars` (a serializable map).
    pub fn render(&self, template: Template, vars: &serde_json::Value) -> Result<String> {
        let name = template.name();
        let template = self
            .env
            .get_template(name)
            .map_err(|e| Error::Internal(e.to_string()))?;
        template
            .render(vars)
            .map_err(|e| Error::input(format!("prompt template `{name}`: {e}")))
    }
}

/// `<folder>/<name>.*` (the first in name order), if any.
fn find_in(folder: &Path, name: &str) -> Option<std::path::PathBuf> {
    let mut hits: Vec<_> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_stem().and_then(|s| s.to_str()) == Some(name)
                && p.extension().is_some()
        })
        .collect();
    hits.sort();
    hits.into_iter().next()
}
