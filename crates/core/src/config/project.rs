//! `[project]`: the pipeline's name, output and cache, and the refusal of places that harm the
//! user (an output or cache inside a repository, or inside each other).

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::Config;
use super::locate::Source;
use super::repos::{RepoSource, resolved};
use crate::error::Result;

/// `[project]`: the pipeline's name and where it writes. An output inside a repository (r2e
/// would write into it) or inside the cache (the cache's `.gitignore` and `CACHEDIR.TAG` would
/// hide the dataset from git and backups), and a cache inside a repository or inside the output,
/// are refused.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ProjectOptions {
    /// The dataset's name. Default: the name of the pipeline's folder.
    pub(super) name: Option<String>,
    /// The folder the dataset is written to.
    #[schemars(with = "Option<String>", extend("default" = DEFAULT_OUTPUT))]
    pub(super) output: Option<Spanned<String>>,
    /// The local cache's folder.
    #[schemars(with = "Option<String>", extend("default" = DEFAULT_CACHE))]
    pub(super) cache: Option<Spanned<String>>,
}

/// `[project] output` when the file names none, relative to the file.
pub(super) const DEFAULT_OUTPUT: &str = "out";

/// `[project] cache` when the file names none, relative to the file.
pub(super) const DEFAULT_CACHE: &str = "cache";

/// Refuses setups that harm the user: an output inside a repository (r2e would write into it)
/// or inside the cache (the cache's `.gitignore` and `CACHEDIR.TAG` would hide the dataset
/// from git and backups), a cache inside a repository or inside the output.
pub(super) fn check_places(src: &Source, cfg: &Config, project: &ProjectOptions) -> Result<()> {
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
