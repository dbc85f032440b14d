//! The prompt templates: files named after the template (`prompts/testgen_equivalence.j2`, any
//! extension), rendered with minijinja. A pipeline takes a template from `[prompts]`, else from
//! the `prompts/` folder beside it, else r2e's built-in copy of `prompts/` (so a pipeline
//! anywhere works). Rendering is deterministic; the rendered text is part of every request key,
//! so editing one template re-issues exactly the requests rendered from it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
        Template::BugfixIssue => include_str!("../../../../prompts/bugfix_issue.j2"),
        Template::BugfixFix => include_str!("../../../../prompts/bugfix_fix.j2"),
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
        let folder = prompts_folder(cfg);
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

/// Where a pipeline's templates come from: the folder beside it and its `[prompts]` files. Two
/// configurations (a pipeline and its variants) with the same sources load the same templates.
type Sources = (PathBuf, Vec<(Template, PathBuf)>);

/// The templates of a whole build, each set read once: every stage, the fingerprint and the
/// recorded settings ask this for a configuration's templates instead of reading the files
/// again, so all of them render and hash the very texts read once.
#[derive(Default)]
pub struct TemplateSets {
    loaded: Mutex<Vec<(Sources, Arc<Templates>)>>,
    loads: AtomicUsize,
}

impl TemplateSets {
    /// `cfg`'s templates, read at the first call for their sources. A failure is not kept (the
    /// build stops on it).
    pub fn get(&self, cfg: &Config) -> Result<Arc<Templates>> {
        let sources: Sources = (prompts_folder(cfg), cfg.prompts.clone());
        let mut loaded = self.loaded.lock().expect("templates lock");
        if let Some((_, t)) = loaded.iter().find(|(s, _)| *s == sources) {
            return Ok(t.clone());
        }
        let templates = Arc::new(Templates::load(cfg)?);
        self.loads.fetch_add(1, Ordering::Relaxed);
        loaded.push((sources, templates.clone()));
        Ok(templates)
    }

    /// How many sets were read (for tests).
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::Relaxed)
    }
}

/// The `prompts/` folder beside a pipeline.
fn prompts_folder(cfg: &Config) -> PathBuf {
    cfg.file.parent().unwrap_or(Path::new("/")).join("prompts")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipeline in `dir` (with a repository folder), with `extra` appended.
    fn pipeline(dir: &Path, name: &str, extra: &str) -> Config {
        fs_err::create_dir_all(dir.join("repo")).unwrap();
        let file = dir.join(name);
        fs_err::write(&file, format!("[[repo]]\npath = \"repo\"\n{extra}")).unwrap();
        r2e_core::config::load(&file).unwrap()
    }

    #[test]
    fn a_set_of_templates_is_read_once_per_build() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join("mine.j2"), "my spec prompt {{ x }}").unwrap();
        let plain = pipeline(dir.path(), "a.toml", "");
        let same = pipeline(dir.path(), "b.toml", "");
        let own = pipeline(dir.path(), "c.toml", "[prompts]\nspecgen = \"mine.j2\"\n");
        let sets = TemplateSets::default();
        let first = sets.get(&plain).unwrap();
        // The same sources (the same folder, no `[prompts]`): the same load.
        assert!(Arc::ptr_eq(&first, &sets.get(&plain).unwrap()));
        assert!(Arc::ptr_eq(&first, &sets.get(&same).unwrap()));
        assert_eq!(sets.loads(), 1);
        // Other sources: a load of their own, with the pipeline's file.
        let mine = sets.get(&own).unwrap();
        assert_eq!(sets.loads(), 2);
        let vars = serde_json::json!({"x": 1});
        assert_eq!(
            mine.render(Template::Specgen, &vars).unwrap(),
            "my spec prompt 1"
        );
        let origin = |t: &Templates| {
            t.sources
                .iter()
                .find(|(n, _, _)| *n == Template::Specgen)
                .map(|(_, o, _)| o.clone())
                .unwrap()
        };
        assert_eq!(origin(&first), "built-in");
        assert!(origin(&mine).ends_with("mine.j2"), "{}", origin(&mine));
        sets.get(&own).unwrap();
        assert_eq!(sets.loads(), 2);
    }
}
