//! `[[source]]`: the GitHub searches `r2e curate` pins in `repos.lock`, and the repositories
//! that lock gives the build.

use std::ops::Range;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::env::{EnvConfig, env_var_name};
use super::locate::{Source, line_col};
use super::repos::{RepoConfig, RepoSource, Scope, check_repo_name, same_source};
use crate::curation::{LOCK_VERSION, Lock};
use crate::error::{Error, Result};

/// `[[source]]`: repositories found by a GitHub search, which `r2e curate` runs and pins in
/// `repos.lock` beside the pipeline; the build reads the lock and never searches. A pipeline
/// with sources and no lock, or a lock of other sources (another query, limit or filter), is
/// refused (exit 2), saying to run `r2e curate` or `r2e curate --update`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SourceOptions {
    /// The search query, as `language:python created:>=2025-06-01 stars:>=40 fork:false
    /// archived:false`. Its qualifiers are checked when the pipeline is read (`language:`,
    /// `created:`, `pushed:`, `stars:`, `fork:`, `archived:`, `topic:`, `license:`, `size:`,
    /// `is:`, `user:`, `org:`, `in:`, ...; dates `YYYY-MM-DD`, alone, after `>=`, `<=`, `>`,
    /// `<`, or as `A..B`): an unknown qualifier or a day that does not exist is an error at its
    /// line and column.
    #[schemars(with = "String")]
    github: Spanned<String>,
    /// At most this many repositories kept, the most starred first; at least 1.
    #[schemars(with = "Option<i64>", extend("default" = DEFAULT_LIMIT))]
    limit: Option<Spanned<i64>>,
    /// A repository is kept when its root holds any of these files.
    #[schemars(with = "Option<Vec<String>>", extend("default" = PACKAGING_FILES))]
    require_files: Option<Vec<Spanned<String>>>,
    /// An allow-list of SPDX licence ids (as `["MIT", "Apache-2.0"]`). Default: any licence, or
    /// none.
    #[schemars(with = "Option<Vec<String>>")]
    licenses: Option<Vec<Spanned<String>>>,
    /// Repositories larger than this (GitHub's `size`, KB) are left out.
    max_size_kb: Option<u64>,
    /// Repositories with fewer stars are left out.
    min_stars: Option<u64>,
    /// The API's base URL; GitHub Enterprise's is `https://HOST/api/v3`. It is `https://`:
    /// `http://` is allowed only to this machine (`localhost`, `127.0.0.1`, `::1`), since the
    /// token would travel unencrypted.
    #[schemars(with = "Option<String>", extend("default" = DEFAULT_API_URL))]
    api_url: Option<Spanned<String>>,
    /// The environment variable holding the token (unset: anonymous), read when searching and
    /// never written. A name in capitals: anything shaped like a token is refused, and not
    /// shown.
    #[schemars(with = "Option<String>", extend("default" = DEFAULT_TOKEN_ENV))]
    token_env: Option<Spanned<String>>,
}

/// `[[source]] limit` when none is written.
const DEFAULT_LIMIT: u64 = 100;

/// `[[source]] api_url` when none is written.
const DEFAULT_API_URL: &str = "https://api.github.com";

/// `[[source]] token_env` when none is written.
const DEFAULT_TOKEN_ENV: &str = "GITHUB_TOKEN";

/// Where repositories come from besides `[[repo]]`: a GitHub search (`github = "QUERY"`), its
/// candidates filtered after the search. `r2e curate` resolves the sources into `repos.lock`;
/// the build reads the lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceConfig {
    /// The search query as written.
    pub github: String,
    /// The same, checked and parsed (`curation::parse_query`); the fingerprint holds `github`.
    #[serde(skip)]
    pub query: crate::curation::GithubQuery,
    /// At most this many repositories kept (the most starred first).
    pub limit: u64,
    /// A repository is kept when its root holds any of these files.
    pub require_files: Vec<String>,
    /// SPDX ids of the licences allowed; empty: any licence, or none.
    pub licenses: Vec<String>,
    /// Repositories larger than this (GitHub's `size`, KB) are left out.
    pub max_size_kb: Option<u64>,
    /// Repositories with fewer stars are left out.
    pub min_stars: Option<u64>,
    /// The API's base URL (`https://api.github.com`; GitHub Enterprise's `https://HOST/api/v3`;
    /// `http://` only to this machine).
    pub api_url: String,
    /// The environment variable holding the token (read when searching, never stored); not
    /// part of the fingerprint: the same search with another token finds the same.
    #[serde(skip)]
    pub token_env: String,
}

/// The packaging files a source's candidates must have one of, unless `require_files` says.
pub const PACKAGING_FILES: &[&str] = &["pyproject.toml", "setup.py", "setup.cfg"];

impl SourceConfig {
    /// What the lock records of this source to tell when it changed: a hash of every setting
    /// but the token's variable.
    pub fn fingerprint(&self) -> String {
        crate::hash::Hash::of_key(self).to_hex()
    }
}

/// The fingerprint of a pipeline's sources, in order.
pub fn sources_fingerprint(sources: &[SourceConfig]) -> String {
    crate::hash::Hash::of_key(
        &sources
            .iter()
            .map(SourceConfig::fingerprint)
            .collect::<Vec<_>>(),
    )
    .to_hex()
}

/// Reads a `repos.lock` (`curation::Lock`); `Ok(None)` when there is none. A lock that does not parse is an error naming
/// its file, line and column.
pub fn read_lock(path: &Path) -> Result<Option<Lock>> {
    let text = match fs_err::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::input(e.to_string())),
    };
    let lock: Lock = toml::from_str(&text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |s| line_col(&text, s.start));
        Error::input(format!(
            "{}:{line}:{col}: {} (run `r2e curate --update` to write it again)",
            path.display(),
            e.message()
        ))
    })?;
    if lock.version != LOCK_VERSION {
        return Err(Error::input(format!(
            "{}: lock format version {}; this r2e reads version {LOCK_VERSION} (run `r2e curate --update`)",
            path.display(),
            lock.version
        )));
    }
    Ok(Some(lock))
}

/// The `[[source]]` tables, checked, with the span of each one's query (where messages about
/// the source and its lock point).
pub(super) fn sources(
    src: &Source,
    options: &[SourceOptions],
) -> Result<(Vec<SourceConfig>, Vec<Range<usize>>)> {
    let mut out = Vec::new();
    let mut spans = Vec::new();
    for o in options {
        let query = o.github.get_ref();
        let span = o.github.span();
        // Inside a basic string without escapes, a term's offset in the query is its place in
        // the file; otherwise the message points at the string.
        let raw = &src.text[span.clone()];
        let inner = raw.len() >= 2 && &raw[1..raw.len() - 1] == query.as_str();
        let parsed = crate::curation::parse_query(query).map_err(|e| {
            let at = if inner {
                span.start + 1 + e.offset
            } else {
                span.start
            };
            src.at(Some(at..at), &e.message)
        })?;
        if query.trim().is_empty() {
            return Err(src.at(Some(span), "the `github` query is empty"));
        }
        let limit = match &o.limit {
            Some(l) if *l.get_ref() < 1 => {
                return Err(src.at(Some(l.span()), "`limit` must be at least 1"));
            }
            Some(l) => *l.get_ref() as u64,
            None => DEFAULT_LIMIT,
        };
        let names =
            |list: &Option<Vec<Spanned<String>>>, what: &str| -> Result<Option<Vec<String>>> {
                let Some(list) = list else { return Ok(None) };
                let mut out = Vec::new();
                for n in list {
                    let v = n.get_ref().trim();
                    if v.is_empty() || v.contains('/') {
                        return Err(src.at(
                            Some(n.span()),
                            &format!("`{what}` holds names, non-empty and without `/`"),
                        ));
                    }
                    out.push(v.to_owned());
                }
                Ok(Some(out))
            };
        let require_files = names(&o.require_files, "require_files")?
            .unwrap_or_else(|| PACKAGING_FILES.iter().map(|f| f.to_string()).collect());
        let licenses = names(&o.licenses, "licenses")?.unwrap_or_default();
        let api_url = match &o.api_url {
            Some(u) => {
                let url = u.get_ref().trim_end_matches('/');
                let origin = crate::curation::Origin::of(url)
                    .filter(|o| o.scheme == "https" || o.scheme == "http");
                let Some(origin) = origin else {
                    return Err(src.at(
                        Some(u.span()),
                        "`api_url` is an `https://` (or `http://`) URL",
                    ));
                };
                // The token goes to this URL: never in clear text over a network.
                if origin.scheme == "http" && !origin.is_loopback() {
                    return Err(src.at(
                        Some(u.span()),
                        "`api_url` is `https://`: `http://` is allowed only to this machine (`localhost`, `127.0.0.1`, `::1`), since the token would travel unencrypted",
                    ));
                }
                url.to_owned()
            }
            None => DEFAULT_API_URL.to_owned(),
        };
        let token_env = match &o.token_env {
            Some(var) => env_var_name(src, var, "token_env", "token")?.clone(),
            None => DEFAULT_TOKEN_ENV.to_owned(),
        };
        out.push(SourceConfig {
            github: query.clone(),
            query: parsed,
            limit,
            require_files,
            licenses,
            max_size_kb: o.max_size_kb,
            min_stars: o.min_stars,
            api_url,
            token_env,
        });
        spans.push(span);
    }
    Ok((out, spans))
}

/// The repositories of the `repos.lock` beside the pipeline, added to `repos` as git
/// repositories at their pinned commits; the lock's curation date becomes the environments'
/// `exclude_newer` unless `[env]` sets one. No lock, or a lock of other sources, is bad input.
pub(super) fn locked_repos(
    src: &Source,
    sources: &[SourceConfig],
    spans: &[Range<usize>],
    repos: &mut Vec<RepoConfig>,
    env: &mut EnvConfig,
) -> Result<()> {
    let path = crate::curation::lock_path(src.file);
    let at = spans.first().cloned();
    let Some(lock) = read_lock(&path)? else {
        return Err(src.at(
            at,
            &format!(
                "the pipeline has `[[source]]` tables but no lock `{}`: run `r2e curate` to search and pin their repositories",
                path.display()
            ),
        ));
    };
    if lock.sources != sources_fingerprint(sources) {
        let changed: Vec<String> = sources
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                lock.source
                    .get(*i)
                    .is_none_or(|l| l.fingerprint != s.fingerprint())
            })
            .map(|(i, _)| format!("source {}", i + 1))
            .collect();
        let at = sources
            .iter()
            .zip(spans)
            .enumerate()
            .find(|(i, (s, _))| {
                lock.source
                    .get(*i)
                    .is_none_or(|l| l.fingerprint != s.fingerprint())
            })
            .map(|(_, (_, span))| span.clone())
            .or(at);
        return Err(src.at(
            at,
            &format!(
                "`{}` was curated from other `[[source]]` settings than the pipeline's ({} changed, or sources were added or removed): run `r2e curate --update` to search again",
                path.display(),
                if changed.is_empty() { "their number".to_owned() } else { changed.join(", ") }
            ),
        ));
    }
    // The lock's text, to place a message at the key it is about (the lock holds no spans).
    let text = fs_err::read_to_string(&path).unwrap_or_default();
    let place = |table: Option<usize>, key: &str| lock_place(&path, &text, table, key);
    let bad = |i: usize, key: &str, r: &crate::curation::LockedRepo, why: &str| {
        Error::input(format!(
            "{}: repository `{}` (`{}`): {why} (run `r2e curate --update` to write the lock again)",
            place(Some(i), key),
            r.name,
            r.full_name
        ))
    };
    let Some(curated_at) = crate::dates::utc_instant(&lock.curated_at) else {
        return Err(Error::input(format!(
            "{}: `curated_at = {:?}` is not an RFC 3339 UTC instant (run `r2e curate --update` to write the lock again)",
            place(None, "curated_at"),
            lock.curated_at
        )));
    };
    for (i, r) in lock.repo.iter().enumerate() {
        let Some(source) = sources.get(r.source) else {
            return Err(bad(
                i,
                "source",
                r,
                &format!("`source = {}` names no `[[source]]`", r.source),
            ));
        };
        check_repo_name(&r.name).map_err(|why| bad(i, "name", r, &why))?;
        crate::curation::check_full_name(&r.full_name)
            .map_err(|why| bad(i, "full_name", r, &why))?;
        crate::curation::check_clone_url(&r.url, &source.api_url)
            .map_err(|why| bad(i, "url", r, &why))?;
        crate::curation::check_commit(&r.commit).map_err(|why| bad(i, "commit", r, &why))?;
        let git = RepoSource::Git {
            url: r.url.clone(),
            rev: r.commit.clone(),
        };
        if let Some(other) = repos.iter().find(|o| same_source(&o.source, &git)) {
            return Err(bad(
                i,
                "url",
                r,
                &format!(
                    "it is repo `{}` again (the same URL and commit): every instance would be there twice; remove one",
                    other.name
                ),
            ));
        }
        if let Some(other) = repos.iter().find(|o| o.name == r.name) {
            return Err(Error::input(format!(
                "{}: repository `{}` has the name of repo `{}` of the pipeline; give the pipeline's one another `name`",
                path.display(),
                r.full_name,
                other.name
            )));
        }
        repos.push(RepoConfig {
            name: r.name.clone(),
            source: RepoSource::Git {
                url: r.url.clone(),
                rev: r.commit.clone(),
            },
            scope: Scope::default(),
        });
    }
    if env.exclude_newer.is_none() {
        env.exclude_newer = Some(curated_at);
    }
    Ok(())
}

/// `FILE:LINE:COL` of `key` in a lock's text: in its `table`-th `[[repo]]` table (0-based), or
/// before any table; `FILE` alone when it is not found.
fn lock_place(path: &Path, text: &str, table: Option<usize>, key: &str) -> String {
    let mut tables = 0usize;
    let mut here = table.is_none();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[') {
            here = t.trim_end() == "[[repo]]" && {
                tables += 1;
                Some(tables - 1) == table
            };
            continue;
        }
        if here
            && t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        {
            return format!("{}:{}:{}", path.display(), n + 1, line.len() - t.len() + 1);
        }
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;

    #[test]
    fn a_lock_gives_git_repos_at_their_commits_and_pins_resolution_to_its_date() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        let text = |env: &str| {
            format!(
                "[[source]]\ngithub = \"language:python created:>=2025-06-01\"\nlimit = 5\n{env}"
            )
        };
        let sources = parse_with(&text(""), &file, false).unwrap().sources;
        assert_eq!(sources[0].require_files, PACKAGING_FILES);
        assert_eq!(sources[0].api_url, "https://api.github.com");
        assert_eq!(sources[0].token_env, "GITHUB_TOKEN");
        let lock = crate::curation::Lock {
            version: LOCK_VERSION,
            curated_at: "2025-07-01T08:00:00Z".into(),
            sources: sources_fingerprint(&sources),
            source: Vec::new(),
            repo: vec![crate::curation::LockedRepo {
                name: "o__r".into(),
                full_name: "o/r".into(),
                url: "https://github.com/o/r.git".into(),
                commit: "c".repeat(40),
                branch: "main".into(),
                created_at: "2025-06-02T00:00:00Z".into(),
                pushed_at: "2025-06-03T00:00:00Z".into(),
                stars: 41,
                license: "MIT".into(),
                size_kb: 12,
                source: 0,
                kept_because: vec!["matched the search".into()],
            }],
            left_out: Vec::new(),
        };
        std::fs::write(dir.path().join("repos.lock"), lock.render()).unwrap();
        let cfg = parse(&text(""), &file).unwrap();
        assert_eq!(
            cfg.repos[0].source,
            RepoSource::Git {
                url: "https://github.com/o/r.git".into(),
                rev: "c".repeat(40)
            }
        );
        assert_eq!(cfg.repos[0].name, "o__r");
        assert_eq!(
            cfg.env.exclude_newer.as_deref(),
            Some("2025-07-01T08:00:00Z")
        );
        // The pipeline's own date wins.
        let cfg = parse(
            &text("[env]\nexclude_newer = \"2025-01-01T00:00:00Z\"\n"),
            &file,
        )
        .unwrap();
        assert_eq!(
            cfg.env.exclude_newer.as_deref(),
            Some("2025-01-01T00:00:00Z")
        );
        // Another limit is another search: the lock is stale.
        let stale = text("").replace("limit = 5", "limit = 6");
        let err = parse(&stale, &file).unwrap_err().to_string();
        assert!(
            err.contains("source 1 changed") && err.contains("--update"),
            "{err}"
        );
        // The token's variable is no part of what was searched.
        let other_token = format!("{}token_env = \"OTHER\"\n", text(""));
        assert!(parse(&other_token, &file).is_ok());
    }

    #[test]
    fn a_lock_from_disk_is_checked_as_the_api_answers_are() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.toml");
        let text = "[[source]]\ngithub = \"language:python\"\n";
        let sources = parse_with(text, &file, false).unwrap().sources;
        let good = crate::curation::LockedRepo {
            name: "o__r".into(),
            full_name: "o/r".into(),
            url: "https://github.com/o/r.git".into(),
            commit: "c".repeat(40),
            branch: "main".into(),
            created_at: "2025-06-02T00:00:00Z".into(),
            pushed_at: "2025-06-03T00:00:00Z".into(),
            stars: 41,
            license: "MIT".into(),
            size_kb: 12,
            source: 0,
            kept_because: Vec::new(),
        };
        let lock = |repo: crate::curation::LockedRepo, curated_at: &str| crate::curation::Lock {
            version: LOCK_VERSION,
            curated_at: curated_at.into(),
            sources: sources_fingerprint(&sources),
            source: Vec::new(),
            repo: vec![repo],
            left_out: Vec::new(),
        };
        let refused = |repo: crate::curation::LockedRepo, curated_at: &str, pipeline: &str| {
            std::fs::write(
                dir.path().join("repos.lock"),
                lock(repo, curated_at).render(),
            )
            .unwrap();
            let e = parse(pipeline, &file).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        };
        std::fs::write(
            dir.path().join("repos.lock"),
            lock(good.clone(), "2025-07-01T08:00:00Z").render(),
        )
        .unwrap();
        assert!(parse(text, &file).is_ok());
        // Where a key is in the lock's text (the same for every lock below: one line each).
        let rendered = lock(good.clone(), "2025-07-01T08:00:00Z").render();
        let at = |key: &str| {
            let line = rendered
                .lines()
                .position(|l| l.starts_with(&format!("{key} = ")))
                .unwrap();
            format!("repos.lock:{}:1: ", line + 1)
        };
        let with = |f: &dyn Fn(&mut crate::curation::LockedRepo)| {
            let mut r = good.clone();
            f(&mut r);
            r
        };
        let e = refused(
            with(&|r| r.name = "../o".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&format!("{}repository `../o`", at("name"))) && e.contains("no `:`, `/`"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.full_name = "o/..".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("full_name")) && e.contains("`o/..` is not a GitHub"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.url = "--upload-pack=touch x".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("url")) && e.contains("starts with `-`"),
            "{e}"
        );
        let e = refused(
            with(&|r| r.url = "file:///etc/repo".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(e.contains("clone URL `file:///etc/repo`"), "{e}");
        let e = refused(
            with(&|r| r.url = "git://evil.example/o/r".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(e.contains("only from this machine"), "{e}");
        let e = refused(
            with(&|r| r.commit = "HEAD".into()),
            "2025-07-01T00:00:00Z",
            text,
        );
        assert!(
            e.contains(&at("commit")) && e.contains("the commit `HEAD`"),
            "{e}"
        );
        let e = refused(with(&|r| r.source = 3), "2025-07-01T00:00:00Z", text);
        assert!(e.contains("`source = 3` names no"), "{e}");
        let e = refused(good.clone(), "yesterday", text);
        assert!(
            e.contains(&format!("{}`curated_at = \"yesterday\"`", at("curated_at"))),
            "{e}"
        );
        // A lock repository that a `[[repo]]` already names, at the same commit.
        let twice = format!(
            "{text}[[repo]]\nname = \"mine\"\ngit = \"https://github.com/o/r\"\nrev = \"{}\"\n",
            "c".repeat(40)
        );
        let e = refused(good.clone(), "2025-07-01T00:00:00Z", &twice);
        assert!(e.contains("it is repo `mine` again"), "{e}");
    }

    #[test]
    fn an_api_url_without_tls_is_for_this_machine_only() {
        let file = Path::new("/nonexistent/P");
        let src =
            |url: &str| format!("[[source]]\ngithub = \"language:python\"\napi_url = \"{url}\"\n");
        for ok in [
            "https://ghe.corp/api/v3",
            "http://127.0.0.1:8080",
            "http://localhost",
        ] {
            assert!(parse_with(&src(ok), file, false).is_ok(), "{ok}");
        }
        for bad in [
            "http://example.com",
            "ftp://example.com",
            "https://",
            "https://u:p@h",
        ] {
            let e = parse_with(&src(bad), file, false).unwrap_err();
            assert!(e.to_string().contains("P:3:11: `api_url`"), "{bad}: {e}");
        }
    }
}
