//! `[[repo]]`: where each repository's files come from (a folder, a git URL at a revision, a
//! release on a package index), its name, and its scope (the files whose functions become
//! candidates).

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::locate::Source;
use crate::error::Result;

/// `[[repo]]`: a repository to build, from a folder, a git repository or a release on a package
/// index (one of `path`, `git` and `pypi`). Two repos with the same files (one folder, or one
/// URL at one revision) or the same name are refused.
///
/// Its scope: every `.py` file of a repository is parsed and sliced, and out-of-scope code is
/// still context and its call sites still seed the explorer, but its functions are never
/// candidates (`excluded_by: "scope"`), and third-party modules are installed for what in-scope
/// code imports (and what that imports in the repository), not for the rest. By default a
/// repository's scope leaves out `**/test/**`, `**/tests/**`, `**/test_*.py`, `**/*_test.py`,
/// `**/conftest.py`, `**/docs/**`, `**/doc/**`, `**/examples/**`, `**/example/**`,
/// `**/benchmarks/**`, `**/benchmark/**`, `**/setup.py`, `**/versioneer.py`, `**/_version.py`
/// and `**/six.py`. In globs, `*` stays within a folder and `**/` spans folders.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RepoOptions {
    /// The repo's name (non-empty, without `:`, `/` or `\`). Default: the folder's or the
    /// repository's name.
    #[schemars(with = "Option<String>")]
    name: Option<Spanned<String>>,
    /// A local folder, git or not.
    #[schemars(with = "Option<String>")]
    path: Option<Spanned<String>>,
    /// A git repository: a URL, or a path relative to the pipeline.
    #[schemars(with = "Option<String>")]
    git: Option<Spanned<String>>,
    /// With `git`: a commit, tag or branch, resolved to a commit once per build.
    #[schemars(with = "Option<String>", extend("default" = "HEAD"))]
    rev: Option<Spanned<String>>,
    /// A source release on a package index: `NAME==VERSION` (one exact version, as
    /// `isodate==0.6.1`), alone (no `path`, `git` or `rev`). Its archive is checked against the
    /// hash the index publishes.
    #[schemars(with = "Option<String>")]
    pypi: Option<Spanned<String>>,
    /// With `pypi`: the archive's SHA-256 (64 hexadecimal digits), which pins it: a download
    /// that differs is refused at this key's line and column.
    #[schemars(with = "Option<String>")]
    sha256: Option<Spanned<String>>,
    /// With `pypi`: the simple index (PEP 503/691) the release is asked of.
    #[schemars(with = "Option<String>", extend("default" = PYPI_INDEX))]
    index_url: Option<Spanned<String>>,
    /// Only the files matching one of these globs (from the repository's root) give candidates.
    /// Default: every file.
    #[schemars(with = "Option<Vec<String>>")]
    include: Option<Vec<Spanned<String>>>,
    /// Globs added to the default excludes.
    #[schemars(with = "Option<Vec<String>>")]
    exclude: Option<Vec<Spanned<String>>>,
    /// `false`: no default excludes.
    #[schemars(extend("default" = true))]
    default_exclude: Option<bool>,
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

/// The `[[repo]]` tables: each a folder that exists or a git URL, with a unique name.
pub(super) fn repos(
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

/// A repo's `include`, `exclude` and `default_exclude`, every glob checked.
pub(super) fn scope(src: &Source, r: &RepoOptions) -> Result<Scope> {
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
pub(super) fn same_source(a: &RepoSource, b: &RepoSource) -> bool {
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
pub(super) fn resolved(path: &Path) -> PathBuf {
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
