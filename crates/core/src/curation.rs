//! Curation from a search: a `[[source]]`'s GitHub query (its qualifiers and dates, checked
//! when the pipeline is read), the calendar dates the search's `created:` windows are cut
//! with, and `repos.lock`, the answer `r2e curate` pins beside the pipeline and `r2e build`
//! reads instead of searching.
//!
//! Pure: no network, no environment. The search itself is `r2e_pipeline::curate`'s.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dates::Date;

/// The search qualifiers a `github` query may use (GitHub's repository search). Anything else
/// before a `:` is refused: a misspelt qualifier would silently widen the search.
pub const QUALIFIERS: &[&str] = &[
    "language",
    "created",
    "pushed",
    "stars",
    "forks",
    "fork",
    "archived",
    "topic",
    "topics",
    "license",
    "size",
    "is",
    "user",
    "org",
    "in",
    "repo",
    "mirror",
    "template",
    "followers",
    "good-first-issues",
    "help-wanted-issues",
    "sort",
];

/// Qualifiers whose value is a date or a range of dates.
const DATE_QUALIFIERS: &[&str] = &["created", "pushed"];
/// Qualifiers whose value is a number or a range of numbers.
const NUMBER_QUALIFIERS: &[&str] = &[
    "stars",
    "forks",
    "size",
    "topics",
    "followers",
    "good-first-issues",
    "help-wanted-issues",
];

/// A `created:` range: either end open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateRange {
    pub from: Option<Date>,
    pub to: Option<Date>,
}

/// A checked `github` query: its terms as written, and its `created:` range (the one the search
/// cuts into windows to get past the 1,000-result cap), apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GithubQuery {
    /// Every term but `created:`, in order.
    pub terms: Vec<String>,
    pub created: Option<DateRange>,
    /// The query admits forks (`fork:true` or `fork:only`): they are not left out afterwards.
    pub forks: bool,
    /// The query admits archived repositories (`archived:true`).
    pub archived: bool,
}

impl GithubQuery {
    /// The query with its `created:` range replaced by `from..to` (both days included).
    pub fn window(&self, from: Date, to: Date) -> String {
        let mut terms = self.terms.clone();
        terms.push(format!("created:{from}..{to}"));
        terms.join(" ")
    }

    /// The query as GitHub is sent it.
    pub fn text(&self) -> String {
        let mut terms = self.terms.clone();
        if let Some(r) = self.created {
            terms.push(match (r.from, r.to) {
                (Some(a), Some(b)) => format!("created:{a}..{b}"),
                (Some(a), None) => format!("created:>={a}"),
                (None, Some(b)) => format!("created:<={b}"),
                (None, None) => String::new(),
            });
        }
        terms.retain(|t| !t.is_empty());
        terms.join(" ")
    }
}

/// A query that GitHub would not read as meant: the byte offset of the bad term in the query,
/// and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryError {
    pub offset: usize,
    pub message: String,
}

/// Checks a `github` query: every `name:value` term names a known qualifier ([`QUALIFIERS`]),
/// dates are `YYYY-MM-DD` days that exist (alone, after `>=`, `<=`, `>`, `<`, or in a `A..B`
/// range with `*` for an open end), numbers likewise; `created:` may appear once.
pub fn parse_query(query: &str) -> Result<GithubQuery, QueryError> {
    let mut out = GithubQuery {
        terms: Vec::new(),
        created: None,
        forks: false,
        archived: false,
    };
    let mut offset = 0;
    for term in query.split(' ') {
        let at = offset;
        offset += term.len() + 1;
        if term.is_empty() {
            continue;
        }
        let err = |message: String| QueryError {
            offset: at,
            message,
        };
        let bare = term.strip_prefix('-').unwrap_or(term);
        let Some((name, value)) = bare.split_once(':') else {
            out.terms.push(term.to_owned());
            continue;
        };
        let name_lc = name.to_ascii_lowercase();
        if !QUALIFIERS.contains(&name_lc.as_str()) {
            return Err(err(format!(
                "`{name}:` is not a GitHub repository search qualifier (known: {})",
                QUALIFIERS.join(", ")
            )));
        }
        if value.is_empty() {
            return Err(err(format!("`{name}:` has no value")));
        }
        if DATE_QUALIFIERS.contains(&name_lc.as_str()) {
            let range = range(value, Date::parse).ok_or_else(|| {
                err(format!(
                    "`{term}`: a date is `YYYY-MM-DD` (a day that exists), alone or as `>=D`, `<=D`, `>D`, `<D`, `A..B`, `A..*`, `*..B`"
                ))
            })?;
            if name_lc == "created" && !term.starts_with('-') {
                if out.created.is_some() {
                    return Err(err("`created:` is given twice".into()));
                }
                if let (Some(a), Some(b)) = (range.from, range.to)
                    && a > b
                {
                    return Err(err(format!("`{term}`: the range ends before it starts")));
                }
                out.created = Some(range.into());
                continue;
            }
        } else if NUMBER_QUALIFIERS.contains(&name_lc.as_str()) {
            range(value, |s| s.parse::<u64>().ok()).ok_or_else(|| {
                err(format!(
                    "`{term}`: a number, alone or as `>=N`, `<=N`, `>N`, `<N`, `A..B`, `A..*`, `*..B`"
                ))
            })?;
        }
        let flag = |allowed: &[&str]| -> Result<bool, QueryError> {
            if allowed.contains(&value) {
                Ok(value != "false")
            } else {
                Err(err(format!(
                    "`{term}`: `{name}:` takes {}",
                    allowed.join(" or ")
                )))
            }
        };
        match name_lc.as_str() {
            "fork" => out.forks |= flag(&["true", "false", "only"])? && !term.starts_with('-'),
            "archived" => out.archived |= flag(&["true", "false"])? && !term.starts_with('-'),
            _ => {}
        }
        out.terms.push(term.to_owned());
    }
    Ok(out)
}

/// A value alone (`V`, read as `V..V`), bounded (`>=V`, `<=V`, `>V`, `<V`) or a range (`A..B`,
/// `*` an open end). Strict bounds on dates are moved by a day; on numbers they are kept as
/// written (only their syntax matters).
fn range<T: Copy + RangeStep>(
    value: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<GenericRange<T>> {
    let end = |s: &str| -> Option<Option<T>> {
        if s == "*" {
            Some(None)
        } else {
            parse(s).map(Some)
        }
    };
    if let Some((a, b)) = value.split_once("..") {
        let (from, to) = (end(a)?, end(b)?);
        return Some(GenericRange { from, to });
    }
    for (op, lower, strict) in [
        (">=", true, false),
        ("<=", false, false),
        (">", true, true),
        ("<", false, true),
    ] {
        if let Some(rest) = value.strip_prefix(op) {
            let v = parse(rest)?;
            let v = if strict { v.step(lower) } else { v };
            return Some(if lower {
                GenericRange {
                    from: Some(v),
                    to: None,
                }
            } else {
                GenericRange {
                    from: None,
                    to: Some(v),
                }
            });
        }
    }
    let v = parse(value)?;
    Some(GenericRange {
        from: Some(v),
        to: Some(v),
    })
}

/// A range of dates or numbers, either end open.
pub struct GenericRange<T> {
    pub from: Option<T>,
    pub to: Option<T>,
}

impl From<GenericRange<Date>> for DateRange {
    fn from(r: GenericRange<Date>) -> DateRange {
        DateRange {
            from: r.from,
            to: r.to,
        }
    }
}

/// The next value up (or down) from a strict bound.
trait RangeStep {
    fn step(self, up: bool) -> Self;
}

impl RangeStep for Date {
    fn step(self, up: bool) -> Date {
        Date::from_days(self.days() + if up { 1 } else { -1 })
    }
}

impl RangeStep for u64 {
    fn step(self, _up: bool) -> u64 {
        self
    }
}

/// The file name of the lock, beside the pipeline.
pub const LOCK_FILE: &str = "repos.lock";

/// The format version of `repos.lock`.
pub const LOCK_VERSION: u32 = 1;

/// The comment `repos.lock` starts with.
pub const LOCK_HEADER: &str = "# This file is generated by `r2e curate` from the pipeline's [[source]] tables; do not edit it.\n# `r2e build` reads it and never searches; `r2e curate --update` searches again.\n\n";

/// `repos.lock`: what the pipeline's sources found, pinned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    /// When the search ran, RFC 3339 UTC: the `exclude_newer` of every environment built from
    /// this lock (unless the pipeline sets its own). Kept as it was when a new search finds
    /// exactly the same, so that such a lock is byte-identical.
    pub curated_at: String,
    /// The fingerprint of the pipeline's sources (`SourceConfig::fingerprint` of each, in
    /// order): a lock whose sources differ is stale.
    pub sources: String,
    #[serde(default)]
    pub source: Vec<LockedSource>,
    #[serde(default)]
    pub repo: Vec<LockedRepo>,
    #[serde(default)]
    pub left_out: Vec<LeftOut>,
}

/// One source as it was searched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSource {
    pub github: String,
    pub fingerprint: String,
    /// What the search reported (`total_count` of the query as written).
    pub matched: u64,
    /// How many of its repositories the lock holds.
    pub kept: u64,
}

/// A repository the lock keeps, with why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedRepo {
    /// The repository's name in the pipeline: `OWNER__NAME`.
    pub name: String,
    /// `OWNER/NAME` on GitHub.
    pub full_name: String,
    /// The clone URL.
    pub url: String,
    /// The default branch's head at curation time, which the build checks out.
    pub commit: String,
    pub branch: String,
    pub created_at: String,
    pub pushed_at: String,
    pub stars: u64,
    /// The SPDX id of its licence, `""` when GitHub names none.
    pub license: String,
    pub size_kb: u64,
    /// The source (0-based, the order of the pipeline's `[[source]]` tables) that found it.
    pub source: usize,
    /// The filters it passed.
    pub kept_because: Vec<String>,
}

/// A candidate the search found and a filter left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeftOut {
    pub full_name: String,
    pub source: usize,
    pub reason: String,
}

impl Lock {
    /// The file's text: the header comment, then the lock (repositories by name, left-out
    /// candidates by name).
    pub fn render(&self) -> String {
        let mut sorted = self.clone();
        sorted.repo.sort_by(|a, b| a.name.cmp(&b.name));
        sorted
            .left_out
            .sort_by(|a, b| (&a.full_name, a.source).cmp(&(&b.full_name, b.source)));
        let body = toml::to_string(&sorted).expect("a lock serializes");
        format!("{LOCK_HEADER}{body}")
    }

    /// Whether two locks pin the same repositories: each kept repository's name, URL and
    /// commit, whatever the volatile rest (stars, sizes, counts, reasons) says. A new search
    /// that pins the same keeps the old `curated_at`, and with it the environments'
    /// `exclude_newer` and every build's cache keys.
    pub fn same_pins(&self, other: &Lock) -> bool {
        let pins = |l: &Lock| {
            let mut p: Vec<(String, String, String)> = l
                .repo
                .iter()
                .map(|r| (r.name.clone(), r.url.clone(), r.commit.clone()))
                .collect();
            p.sort();
            p
        };
        pins(self) == pins(other)
    }
}

/// Checks a GitHub `OWNER/NAME` (`[A-Za-z0-9-]+/[A-Za-z0-9._-]+`, the owner not starting with
/// `-`, the name not `.` or `..`): the name `r2e curate` gives a repository comes from it, and
/// becomes a folder name.
pub fn check_full_name(full_name: &str) -> Result<(), String> {
    let ok = full_name.split_once('/').is_some_and(|(owner, name)| {
        !owner.is_empty()
            && !owner.starts_with('-')
            && owner
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{full_name}` is not a GitHub `OWNER/NAME` (letters, digits, `-`; then `.` and `_` too)"
        ))
    }
}

/// Checks a pinned commit: 40 (SHA-1) or 64 (SHA-256) lowercase hexadecimal digits.
pub fn check_commit(commit: &str) -> Result<(), String> {
    if matches!(commit.len(), 40 | 64)
        && commit
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        Ok(())
    } else {
        Err(format!(
            "the commit `{commit}` is not 40 (or 64) lowercase hexadecimal digits"
        ))
    }
}

/// A URL's scheme, host (lowercase; an IPv6 address without its brackets) and port (the
/// scheme's default when none is written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
}

impl Origin {
    /// `SCHEME://HOST[:PORT][/...]`, without user information; `None` for anything else.
    pub fn of(url: &str) -> Option<Origin> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_lowercase()) {
            return None;
        }
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if authority.contains('@') {
            return None;
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']')?;
            if host.is_empty() || !host.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
                return None;
            }
            (host, after)
        } else {
            match authority.split_once(':') {
                Some((h, _)) => (h, &authority[h.len()..]),
                None => (authority, ""),
            }
        };
        let port = match port {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse::<u16>().ok()?),
        };
        let host_ok = !host.is_empty()
            && (host.contains(':')
                || host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')));
        if !host_ok || host.starts_with(['-', '.']) {
            return None;
        }
        let port = port.or(match scheme.as_str() {
            "https" => Some(443),
            "http" => Some(80),
            "git" => Some(9418),
            _ => None,
        });
        Some(Origin {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether the host is this machine: `localhost`, `127.0.0.0/8` or `::1`.
    pub fn is_loopback(&self) -> bool {
        match self.host.parse::<std::net::IpAddr>() {
            Ok(ip) => ip.is_loopback(),
            Err(_) => self.host == "localhost",
        }
    }
}

/// Checks a clone URL the GitHub API (at `api_url`) gave: `https://` always; `http://` and
/// `git://` (no transport security) only to this machine or the API's own host; never a path,
/// `file://`, `ssh` or anything git would read as an option.
pub fn check_clone_url(url: &str, api_url: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("the clone URL `{url}` {why}"));
    if url.starts_with('-') {
        return bad("starts with `-`");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("holds a space or a control character");
    }
    let Some(origin) = Origin::of(url) else {
        return bad(
            "is not an `https://` URL with a host (nor `http://` or `git://` to this machine)",
        );
    };
    match origin.scheme.as_str() {
        "https" => Ok(()),
        "http" | "git" => {
            let api_host = Origin::of(api_url).map(|o| o.host);
            if origin.is_loopback() || api_host.as_deref() == Some(origin.host.as_str()) {
                Ok(())
            } else {
                bad(
                    "is not `https://`: `http://` and `git://` are taken only from this machine or the API's host",
                )
            }
        }
        _ => bad("is not an `https://` URL (nor `http://` or `git://` to this machine)"),
    }
}

/// Where the lock of the pipeline at `pipeline` is.
pub fn lock_path(pipeline: &Path) -> PathBuf {
    pipeline.parent().unwrap_or(Path::new(".")).join(LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_commits_and_clone_urls_from_the_api_are_checked() {
        for good in ["alice/kept-one", "A-1/x.y_z", "o/.github"] {
            assert_eq!(check_full_name(good), Ok(()), "{good}");
        }
        for bad in [
            "alice", "a/b/c", "../x", "a/..", "a/.", "-a/x", "/x", "a/", "a/x y", "a/x\\y",
            "al_ice/x",
        ] {
            assert!(check_full_name(bad).is_err(), "{bad}");
        }
        assert_eq!(check_commit(&"a1".repeat(20)), Ok(()));
        assert_eq!(check_commit(&"0f".repeat(32)), Ok(()));
        for bad in [
            "abc",
            &"A1".repeat(20),
            &"g1".repeat(20),
            &"a".repeat(41),
            "--upload-pack=x",
        ] {
            assert!(check_commit(bad).is_err(), "{bad}");
        }
        let api = "https://api.github.com";
        for good in [
            "https://github.com/a/b.git",
            "https://GitHub.com:8443/a/b.git",
            "git://127.0.0.1:9418/a/b.git",
            "http://localhost:3000/a/b.git",
            "http://[::1]:80/a/b",
        ] {
            assert_eq!(check_clone_url(good, api), Ok(()), "{good}");
        }
        // Without transport security only from the API's own host.
        assert!(check_clone_url("http://git.corp/a/b.git", api).is_err());
        assert_eq!(
            check_clone_url("http://git.corp/a/b.git", "http://git.corp/api/v3"),
            Ok(())
        );
        for bad in [
            "--upload-pack=touch /tmp/x",
            "-u",
            "file:///etc",
            "/etc/passwd",
            "../x",
            "ssh://git@github.com/a/b",
            "git@github.com:a/b.git",
            "git://evil.example/a/b",
            "http://evil.example/a/b",
            "https://user:pw@github.com/a/b",
            "https://-x/a",
            "https:///a",
            "https://github.com:99999/a",
            "ext::sh -c touch% /tmp/x",
        ] {
            assert!(check_clone_url(bad, api).is_err(), "{bad}");
        }
        let o = Origin::of("http://127.0.0.1:8080/x").unwrap();
        assert!(o.is_loopback() && o.port == Some(8080));
        assert_eq!(
            Origin::of("https://API.github.com").unwrap().port,
            Some(443)
        );
        assert!(!Origin::of("http://example.com").unwrap().is_loopback());
    }

    #[test]
    fn the_same_pins_keep_the_date_whatever_the_metadata() {
        let repo = |name: &str, commit: &str, stars: u64| LockedRepo {
            name: name.into(),
            full_name: name.replacen("__", "/", 1),
            url: format!("https://github.com/{}.git", name.replacen("__", "/", 1)),
            commit: commit.into(),
            branch: "main".into(),
            created_at: "2025-06-02T00:00:00Z".into(),
            pushed_at: "2025-06-03T00:00:00Z".into(),
            stars,
            license: "MIT".into(),
            size_kb: 1,
            source: 0,
            kept_because: vec![format!("{stars} stars >= 10")],
        };
        let lock = |repo: Vec<LockedRepo>, matched: u64| Lock {
            version: LOCK_VERSION,
            curated_at: "2025-07-01T00:00:00Z".into(),
            sources: "s".into(),
            source: vec![LockedSource {
                github: "language:python".into(),
                fingerprint: "f".into(),
                matched,
                kept: repo.len() as u64,
            }],
            repo,
            left_out: Vec::new(),
        };
        let old = lock(vec![repo("a__x", "11", 40), repo("b__y", "22", 50)], 9);
        // Stars, reasons and counts moved, in another order: the same pins.
        let new = lock(vec![repo("b__y", "22", 51), repo("a__x", "11", 39)], 12);
        assert!(new.same_pins(&old) && new.render() != old.render());
        let moved = lock(vec![repo("a__x", "11", 40), repo("b__y", "33", 50)], 9);
        assert!(!moved.same_pins(&old));
        let mut elsewhere = old.clone();
        elsewhere.repo[0].url = "https://example.org/a/x.git".into();
        assert!(!elsewhere.same_pins(&old));
        let fewer = lock(vec![repo("a__x", "11", 40)], 9);
        assert!(!fewer.same_pins(&old));
    }

    #[test]
    fn queries_are_checked_and_their_created_range_kept_apart() {
        let q = parse_query("language:python created:>=2025-06-01 stars:>=40 fork:false").unwrap();
        assert_eq!(q.terms, ["language:python", "stars:>=40", "fork:false"]);
        assert_eq!(
            q.created,
            Some(DateRange {
                from: Date::parse("2025-06-01"),
                to: None
            })
        );
        let q = parse_query("created:>2025-06-01").unwrap();
        assert_eq!(q.created.unwrap().from, Date::parse("2025-06-02"));
        let q = parse_query("created:2025-01-01..2025-03-31 pushed:*..2025-05-01").unwrap();
        assert_eq!(q.created.unwrap().to, Date::parse("2025-03-31"));
        let e = parse_query("language:python staars:>=40").unwrap_err();
        assert_eq!(e.offset, 16);
        assert!(e.message.contains("`staars:`"), "{}", e.message);
        let e = parse_query("created:>=2025-13-01").unwrap_err();
        assert!(e.message.contains("YYYY-MM-DD"), "{}", e.message);
        assert!(parse_query("stars:lots").is_err());
        assert!(parse_query("fork:maybe").is_err());
        assert!(parse_query("created:2025-03-01..2025-01-01").is_err());
        assert!(parse_query("fork:only").unwrap().forks);
    }
}
