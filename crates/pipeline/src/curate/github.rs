//! GitHub's REST API as `r2e curate` uses it, behaving as GitHub asks
//! (<https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api>),
//! over the HTTP layer shared with the model clients (`r2e_exec::http`):
//!
//! - the token from the source's environment variable, sent as `Authorization: Bearer`; it is
//!   held in memory only (this type's `Debug` hides it, the cache keys and entries never hold
//!   it, messages never show a request's headers); anonymous when the variable is unset;
//! - pagination through `Link: <…>; rel="next"`, 100 per page;
//! - the search API's 1,000-result cap: a query that matches more is cut into `created:`
//!   windows, halved until each holds at most 1,000, and each window paged through;
//! - the primary rate limit waited out until `X-RateLimit-Reset`, with a progress bar on
//!   stderr: before the next request when an answer says it is used up
//!   (`X-RateLimit-Remaining: 0`), and after a 403 or 429 that says so; a secondary limit (403 or 429 with
//!   `Retry-After`) waited as long as it asks (a minute when it names no wait); in all at most
//!   [`MAX_WAIT`], then an environmental failure (exit 1; nothing is written);
//! - conditional requests: each URL's last `ETag` and body are kept in the cache
//!   (`Bucket::Github`, `keys::GithubKey`) and sent back as `If-None-Match`; a 304 reuses the
//!   stored body (and its `Link`), and GitHub does not count it against the rate limit.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use r2e_core::cache::{ActionKey, Bucket, Cache};
use r2e_core::curation::{GithubQuery, Origin};
use r2e_core::dates::{Date, now_seconds};
use r2e_core::error::{Error, Result};
use r2e_core::keys::GithubKey;
use r2e_exec::http::{Http, Reply, backoff, snippet};

/// The most a curation waits for rate limits in all before it gives up.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// The wait after a secondary rate limit that gives no `Retry-After` (GitHub: "wait for at
/// least one minute").
const SECONDARY_DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Transport failures and server errors retried per request.
const RETRIES: u32 = 4;
/// Searches GitHub says are incomplete (`incomplete_results`: it timed out) asked again.
const INCOMPLETE_RETRIES: u32 = 2;
/// How many results GitHub's search gives for one query, whatever its `total_count`.
pub const SEARCH_CAP: u64 = 1000;
/// The first day a `created:` range without a start is cut from (GitHub opened in 2008).
const FIRST_DAY: Date = Date::ymd(2007, 10, 1);

/// What a client did: requests sent, how many were answered 304, rate limits met and waited.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub requests: u64,
    pub not_modified: u64,
    pub rate_limited: u64,
    pub waited_seconds: f64,
    /// The search windows (`created:A..B`) a query over the cap was cut into.
    pub windows: Vec<String>,
}

/// A repository as the search gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub full_name: String,
    pub fork: bool,
    pub archived: bool,
    /// The SPDX id, `None` when GitHub names no licence.
    pub license: Option<String>,
    pub size_kb: u64,
    pub stars: u64,
    pub created_at: String,
    pub pushed_at: String,
    pub clone_url: String,
    pub default_branch: String,
}

#[derive(Deserialize)]
struct SearchPage {
    total_count: u64,
    #[serde(default)]
    incomplete_results: bool,
    items: Vec<RawItem>,
}

#[derive(Deserialize)]
struct RawItem {
    full_name: String,
    fork: bool,
    #[serde(default)]
    archived: bool,
    license: Option<RawLicense>,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    stargazers_count: u64,
    created_at: String,
    pushed_at: Option<String>,
    clone_url: String,
    default_branch: String,
}

#[derive(Deserialize)]
struct RawLicense {
    spdx_id: Option<String>,
}

#[derive(Deserialize)]
struct Branch {
    commit: BranchCommit,
}

#[derive(Deserialize)]
struct BranchCommit {
    sha: String,
}

#[derive(Deserialize)]
struct ContentEntry {
    name: String,
}

/// A stored answer: its `ETag`, its `Link` header and its body.
#[derive(Serialize, Deserialize)]
struct Stored {
    etag: String,
    link: Option<String>,
    body: String,
}

/// A page of an answer and the URL of the next one; `fresh`, a new answer (not a 304) to keep
/// for the next conditional request, once the caller has found it whole.
struct Page {
    body: String,
    next: Option<String>,
    fresh: Option<Stored>,
}

/// What a GET found: a page, or none (404, 409).
enum Got {
    Page(Page),
    Absent(u16),
}

/// A repository's root, as `contents/` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Root {
    /// Its file and folder names.
    Files(Vec<String>),
    /// 409: a repository without a commit.
    Empty,
    /// 404: deleted, renamed or private since the search.
    NotFound,
}

/// A client of one API (`api_url`) with one token (or none).
pub struct Client<'a> {
    http: Http,
    api: String,
    token: Option<String>,
    token_env: String,
    cache: &'a Cache,
    waited: Duration,
    /// The reset of a primary limit an answer said is used up (`X-RateLimit-Remaining: 0`):
    /// no request is sent before it.
    exhausted_until: Option<i64>,
    pub stats: Stats,
}

impl fmt::Debug for Client<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("api", &self.api)
            .field(
                "token",
                &if self.token.is_some() {
                    format!("(from ${})", self.token_env)
                } else {
                    "none".into()
                },
            )
            .field("stats", &self.stats)
            .finish()
    }
}

impl<'a> Client<'a> {
    /// A client of `api` (no trailing `/`); `token` read by the caller from `token_env`.
    pub fn new(api: &str, token: Option<String>, token_env: &str, cache: &'a Cache) -> Self {
        Client {
            http: Http::new(),
            api: api.trim_end_matches('/').to_owned(),
            token,
            token_env: token_env.to_owned(),
            cache,
            waited: Duration::ZERO,
            exhausted_until: None,
            stats: Stats::default(),
        }
    }

    /// Every repository the query matches (at most [`SEARCH_CAP`] per window), each once, and
    /// the `total_count` of the query as written. A query over the cap is cut into `created:`
    /// windows (its own range, else from 2007-10-01 to `today`).
    pub fn search(&mut self, query: &GithubQuery, today: Date) -> Result<(u64, Vec<Item>)> {
        let mut found: BTreeMap<String, Item> = BTreeMap::new();
        let first = self.search_url(&query.text());
        let (total, page, next) = self.search_page(&first)?;
        if total <= SEARCH_CAP {
            self.collect(page, next, &mut found)?;
            return Ok((total, found.into_values().collect()));
        }
        let range = query.created.unwrap_or(r2e_core::curation::DateRange {
            from: None,
            to: None,
        });
        let from = range.from.unwrap_or(FIRST_DAY);
        let to = range.to.unwrap_or(today);
        let mut windows = vec![(from, to)];
        while let Some((a, b)) = windows.pop() {
            let url = self.search_url(&query.window(a, b));
            let (count, page, next) = self.search_page(&url)?;
            if count > SEARCH_CAP && a < b {
                let mid = Date::from_days(a.days() + (b.days() - a.days()) / 2);
                let after = Date::from_days(mid.days() + 1);
                // Popped last first: the earlier half is searched first.
                windows.push((after, b));
                windows.push((a, mid));
                continue;
            }
            if count > SEARCH_CAP {
                eprintln!(
                    "warning: curate: {count} repositories were created on {a}, more than the {SEARCH_CAP} a GitHub search gives: only {SEARCH_CAP} of them are seen"
                );
            }
            self.stats
                .windows
                .push(format!("created:{a}..{b} ({count})"));
            self.collect(page, next, &mut found)?;
        }
        Ok((total, found.into_values().collect()))
    }

    /// The root's file names; GitHub answers 409 for an empty repository, 404 for one that is
    /// not there (any more) or not visible.
    pub fn root_files(&mut self, full_name: &str) -> Result<Root> {
        let url = format!("{}/repos/{}/contents/", self.api, full_name);
        let page = match self.get_kept(&url)? {
            Got::Page(p) => p,
            Got::Absent(409) => return Ok(Root::Empty),
            Got::Absent(_) => return Ok(Root::NotFound),
        };
        let entries: Vec<ContentEntry> = parse(&url, &page.body)?;
        Ok(Root::Files(entries.into_iter().map(|e| e.name).collect()))
    }

    /// The head commit of `branch`, `None` when there is no such branch.
    pub fn head(&mut self, full_name: &str, branch: &str) -> Result<Option<String>> {
        let url = format!(
            "{}/repos/{}/branches/{}",
            self.api,
            full_name,
            encode(branch, true)
        );
        let Got::Page(page) = self.get_kept(&url)? else {
            return Ok(None);
        };
        let b: Branch = parse(&url, &page.body)?;
        Ok(Some(b.commit.sha))
    }

    fn search_url(&self, q: &str) -> String {
        format!(
            "{}/search/repositories?q={}&per_page=100",
            self.api,
            encode(q, false)
        )
    }

    /// A search page, asked again while GitHub says it is incomplete (its search timed out),
    /// [`INCOMPLETE_RETRIES`] times, then an environmental failure: an incomplete answer would
    /// leave repositories out of the lock for no reason of theirs. Such an answer is never
    /// kept for the next conditional request.
    fn search_page(&mut self, url: &str) -> Result<(u64, Vec<Item>, Option<String>)> {
        let mut attempt = 0u32;
        let (page, p) = loop {
            let page = match self.get(url)? {
                Got::Page(p) => p,
                Got::Absent(status) => {
                    return Err(Error::env(format!(
                        "GitHub API: `{url}` is not found ({status})"
                    )));
                }
            };
            let p: SearchPage = parse(url, &page.body)?;
            if !p.incomplete_results {
                break (page, p);
            }
            if attempt >= INCOMPLETE_RETRIES {
                return Err(Error::env(format!(
                    "GitHub API: the results of `{url}` are incomplete (its search timed out) after {} attempts: nothing is written; run `r2e curate --update` again later",
                    attempt + 1
                )));
            }
            eprintln!(
                "curate: GitHub says the results of `{url}` are incomplete (its search timed out); asking again"
            );
            std::thread::sleep(backoff(attempt, None));
            attempt += 1;
        };
        if let Some(fresh) = &page.fresh {
            self.keep(url, fresh)?;
        }
        let items = p
            .items
            .into_iter()
            .map(|r| Item {
                full_name: r.full_name,
                fork: r.fork,
                archived: r.archived,
                license: r.license.and_then(|l| l.spdx_id),
                size_kb: r.size,
                stars: r.stargazers_count,
                created_at: r.created_at,
                pushed_at: r.pushed_at.unwrap_or_default(),
                clone_url: r.clone_url,
                default_branch: r.default_branch,
            })
            .collect();
        Ok((p.total_count, items, page.next))
    }

    /// A first page's items and every following page's.
    fn collect(
        &mut self,
        items: Vec<Item>,
        mut next: Option<String>,
        found: &mut BTreeMap<String, Item>,
    ) -> Result<()> {
        for i in items {
            found.entry(i.full_name.clone()).or_insert(i);
        }
        while let Some(url) = next {
            if !same_origin(&url, &self.api) {
                return Err(Error::env(format!(
                    "GitHub API: the next page's link `{}` is not on `{}`: r2e follows links only to the API it was given, with its token",
                    snippet(&url),
                    self.api
                )));
            }
            let (_, items, n) = self.search_page(&url)?;
            for i in items {
                found.entry(i.full_name.clone()).or_insert(i);
            }
            next = n;
        }
        Ok(())
    }

    /// A GET whose new answer is kept at once (see [`Client::get`]).
    fn get_kept(&mut self, url: &str) -> Result<Got> {
        let got = self.get(url)?;
        if let Got::Page(Page {
            fresh: Some(fresh), ..
        }) = &got
        {
            self.keep(url, fresh)?;
        }
        Ok(got)
    }

    /// Keeps an answer's `ETag`, `Link` and body for the next conditional request of `url`.
    fn keep(&self, url: &str, stored: &Stored) -> Result<()> {
        self.cache
            .put(Bucket::Github, GithubKey { url }.hash(), stored)
    }

    /// A GET, conditional on the stored `ETag` of the URL; 404 and 409 (GitHub's answer for
    /// an empty repository's contents) are `Absent`. A new answer is not kept: the caller keeps
    /// it (`keep`) once it has found it whole.
    fn get(&mut self, url: &str) -> Result<Got> {
        if self.token.is_some()
            && Origin::of(url).is_none_or(|o| o.scheme != "https" && !o.is_loopback())
        {
            return Err(Error::input(format!(
                "GitHub API: `{}` is not `https://` (nor on this machine): the token in `{}` is not sent over it",
                snippet(url),
                self.token_env
            )));
        }
        let key = GithubKey { url }.hash();
        let stored: Option<Stored> = self.cache.get(Bucket::Github, key);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut attempt = 0u32;
        loop {
            if let Some(reset) = self.exhausted_until.take() {
                let secs = reset.saturating_sub(now_seconds());
                if secs >= 0 {
                    self.wait(
                        Duration::from_secs(secs as u64 + 1),
                        &format!(
                            "GitHub's rate limit is used up; waiting {} s for its reset before the next request",
                            secs + 1
                        ),
                    )?;
                }
            }
            let mut headers = vec![
                ("accept", "application/vnd.github+json"),
                ("x-github-api-version", "2022-11-28"),
            ];
            if let Some(a) = &auth {
                headers.push(("authorization", a));
            }
            if let Some(s) = &stored {
                headers.push(("if-none-match", &s.etag));
            }
            self.stats.requests += 1;
            let reply = match self.http.get(url, &headers, Duration::from_secs(60)) {
                Ok(r) => r,
                Err(e) => {
                    if attempt >= RETRIES {
                        return Err(Error::env(format!(
                            "GitHub API `{url}`: {e} (after {} attempts)",
                            attempt + 1
                        )));
                    }
                    std::thread::sleep(backoff(attempt, None));
                    attempt += 1;
                    continue;
                }
            };
            if (200..400).contains(&reply.status)
                && reply.header("x-ratelimit-remaining") == Some("0")
            {
                self.exhausted_until = reply
                    .header("x-ratelimit-reset")
                    .and_then(|r| r.trim().parse::<i64>().ok());
            }
            match reply.status {
                304 if stored.is_some() => {
                    self.stats.not_modified += 1;
                    let s = stored.expect("checked");
                    let next = s.link.as_deref().and_then(next_link);
                    return Ok(Got::Page(Page {
                        body: s.body,
                        next,
                        fresh: None,
                    }));
                }
                200..=299 => {
                    let link = reply.header("link").map(str::to_owned);
                    let next = link.as_deref().and_then(next_link);
                    let fresh = reply.header("etag").map(|etag| Stored {
                        etag: etag.to_owned(),
                        link,
                        body: reply.body.clone(),
                    });
                    return Ok(Got::Page(Page {
                        body: reply.body,
                        next,
                        fresh,
                    }));
                }
                s @ (404 | 409) => return Ok(Got::Absent(s)),
                401 => {
                    return Err(Error::env(format!(
                        "GitHub API: the token in `{}` was refused (401 {}): set a valid token, or unset it to search anonymously",
                        self.token_env,
                        snippet(&reply.body)
                    )));
                }
                422 => {
                    return Err(Error::input(format!(
                        "GitHub refused the request `{url}` (422): {}",
                        snippet(&reply.body)
                    )));
                }
                403 | 429 => {
                    if let Some(wait) = self.rate_limit_wait(&reply)? {
                        self.stats.rate_limited += 1;
                        self.wait(wait.0, &wait.1)?;
                        continue;
                    }
                    if reply.status == 429 && attempt < RETRIES {
                        std::thread::sleep(backoff(attempt, None));
                        attempt += 1;
                        continue;
                    }
                    return Err(Error::env(format!(
                        "GitHub API refused `{url}` ({}): {}",
                        reply.status,
                        snippet(&reply.body)
                    )));
                }
                s if s >= 500 && attempt < RETRIES => {
                    std::thread::sleep(backoff(attempt, reply.retry_after()));
                    attempt += 1;
                }
                s => {
                    return Err(Error::env(format!(
                        "GitHub API `{url}` answered {s}: {}",
                        snippet(&reply.body)
                    )));
                }
            }
        }
    }

    /// How long a 403 or 429 asks to wait, and why: until the primary limit's reset, or a
    /// secondary limit's `Retry-After`; `None` when it is neither (a plain refusal).
    fn rate_limit_wait(&self, reply: &Reply) -> Result<Option<(Duration, String)>> {
        let anonymous = if self.token.is_none() {
            format!(
                " (anonymous: set `{}` to a token for a higher limit)",
                self.token_env
            )
        } else {
            String::new()
        };
        if reply.header("x-ratelimit-remaining") == Some("0")
            && let Some(reset) = reply
                .header("x-ratelimit-reset")
                .and_then(|r| r.trim().parse::<i64>().ok())
        {
            let secs = reset.saturating_sub(now_seconds()).max(0) as u64 + 1;
            return Ok(Some((
                Duration::from_secs(secs),
                format!(
                    "GitHub's rate limit is used up{anonymous}; waiting {secs} s for its reset"
                ),
            )));
        }
        if let Some(wait) = reply.retry_after() {
            return Ok(Some((
                wait,
                format!(
                    "GitHub's secondary rate limit{anonymous}; waiting {:.0} s as it asks",
                    wait.as_secs_f64()
                ),
            )));
        }
        // A secondary limit that names no wait: GitHub asks for at least a minute.
        if reply
            .body
            .to_ascii_lowercase()
            .contains("secondary rate limit")
        {
            return Ok(Some((
                SECONDARY_DEFAULT_WAIT,
                format!(
                    "GitHub's secondary rate limit{anonymous}, with no Retry-After; waiting {} s",
                    SECONDARY_DEFAULT_WAIT.as_secs()
                ),
            )));
        }
        Ok(None)
    }

    /// Sleeps `wait` with a progress bar on stderr, unless the waits would pass [`MAX_WAIT`].
    fn wait(&mut self, wait: Duration, why: &str) -> Result<()> {
        if self.waited + wait > MAX_WAIT {
            return Err(Error::env(format!(
                "curate: {why}, but that would make more than {} s of waiting in all: run `r2e curate --update` again later",
                MAX_WAIT.as_secs()
            )));
        }
        eprintln!("curate: {why}");
        let bar = crate::session::progress(wait.as_secs().max(1), "waiting");
        let start = Instant::now();
        while start.elapsed() < wait {
            std::thread::sleep((wait - start.elapsed()).min(Duration::from_millis(250)));
            bar.set_position(start.elapsed().as_secs());
        }
        bar.finish_and_clear();
        self.waited += wait;
        self.stats.waited_seconds += wait.as_secs_f64();
        Ok(())
    }
}

/// Whether `url` is on the API at `api`: the same scheme, host and port (where the token may
/// be sent).
fn same_origin(url: &str, api: &str) -> bool {
    match (Origin::of(url), Origin::of(api)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim();
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_owned()
            })
    })
}

/// Percent-encodes `text` for a URL's query (or, with `path`, a path whose `/` are kept).
fn encode(text: &str, path: bool) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (path && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse<T: serde::de::DeserializeOwned>(url: &str, body: &str) -> Result<T> {
    serde_json::from_str(body).map_err(|e| {
        Error::env(format!(
            "GitHub API `{url}`: an answer r2e cannot read ({e}): {}",
            snippet(body)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers_give_the_next_page() {
        let link = r#"<https://api.github.com/search/repositories?q=x&page=2>; rel="next", <https://api.github.com/search/repositories?q=x&page=10>; rel="last""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/search/repositories?q=x&page=2")
        );
        assert_eq!(
            next_link(r#"<https://x/?page=1>; rel="prev", <https://x/?page=1>; rel="first""#),
            None
        );
    }

    #[test]
    fn the_token_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let secret = "ghp_neverShownAnywhere";
        let client = Client::new(
            "https://api.github.com/",
            Some(secret.into()),
            "GH_TOKEN",
            &cache,
        );
        let shown = format!("{client:?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(shown.contains("$GH_TOKEN"), "{shown}");
        assert_eq!(client.api, "https://api.github.com");
    }

    #[test]
    fn links_are_followed_only_on_the_api() {
        let api = "https://api.github.com";
        assert!(same_origin(
            "https://api.github.com/search/repositories?page=2",
            api
        ));
        assert!(same_origin("https://API.github.com:443/x", api));
        for other in [
            "https://evil.example/search?page=2",
            "http://api.github.com/search?page=2",
            "https://api.github.com:8443/search",
            "https://api.github.com.evil.example/x",
            "https://api.github.com@evil.example/x",
            "/search?page=2",
        ] {
            assert!(!same_origin(other, api), "{other}");
        }
        assert!(same_origin(
            "http://127.0.0.1:4000/s?page=2",
            "http://127.0.0.1:4000"
        ));
        assert!(!same_origin(
            "http://127.0.0.1:4001/s",
            "http://127.0.0.1:4000"
        ));
    }

    #[test]
    fn a_token_is_never_sent_in_clear_text_over_a_network() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let secret = "ghp_neverInClearText";
        let mut client = Client::new(
            "http://example.com",
            Some(secret.into()),
            "GH_TOKEN",
            &cache,
        );
        let Err(e) = client.get("http://example.com/search/repositories?q=x") else {
            panic!("a token over http:// to another host")
        };
        assert_eq!(e.exit_code(), 2);
        assert!(
            !e.to_string().contains(secret) && e.to_string().contains("GH_TOKEN"),
            "{e}"
        );
        assert_eq!(client.stats.requests, 0);
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode("language:python created:>=2025-06-01", false),
            "language%3Apython%20created%3A%3E%3D2025-06-01"
        );
        assert_eq!(encode("feature/x y", true), "feature/x%20y");
    }
}
