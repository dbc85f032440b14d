//! A loopback GitHub REST API for `r2e curate`'s tests (axum on a tokio runtime of its own):
//! repository search with GitHub's shapes and headers (`total_count`, `items`, `Link` pages of
//! `per_page`, at most 1,000 results a query, `ETag` and 304 on `If-None-Match`), a
//! repository's root listing (`contents/`) and a branch's head (`branches/B`). It can refuse
//! one request with the primary rate limit (`X-RateLimit-Remaining: 0` and a reset a few
//! seconds ahead) and one with a secondary limit (`Retry-After`), and counts what it saw.
//! The repositories' git contents are served apart, by `git daemon` ([`GitDaemon`]).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// A repository the fake API knows.
#[derive(Clone, Debug)]
pub struct FakeRepo {
    pub full_name: String,
    pub fork: bool,
    pub archived: bool,
    pub license: Option<String>,
    pub size: u64,
    pub stars: u64,
    /// `YYYY-MM-DDT..Z`.
    pub created_at: String,
    pub pushed_at: String,
    pub clone_url: String,
    pub default_branch: String,
    /// The root's file names.
    pub files: Vec<String>,
    /// The default branch's head.
    pub commit: String,
    /// The status `contents/` answers instead of the listing (404: gone; 409: empty).
    pub contents_status: Option<u16>,
}

impl FakeRepo {
    /// A repository created on `day` (`YYYY-MM-DD`) with `stars`, a `pyproject.toml`, MIT.
    pub fn new(full_name: &str, day: &str, stars: u64) -> FakeRepo {
        FakeRepo {
            full_name: full_name.to_owned(),
            fork: false,
            archived: false,
            license: Some("MIT".into()),
            size: 10,
            stars,
            created_at: format!("{day}T10:00:00Z"),
            pushed_at: format!("{day}T12:00:00Z"),
            clone_url: format!("https://github.invalid/{full_name}.git"),
            default_branch: "main".into(),
            files: vec!["pyproject.toml".into(), "README.md".into()],
            commit: format!("{:040x}", stars),
            contents_status: None,
        }
    }
}

/// What the server saw.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub requests: u64,
    /// Requests that carried `If-None-Match`.
    pub conditional: u64,
    /// Requests answered 304.
    pub not_modified: u64,
    /// Each search request's `q` and `page`, with the `total_count` answered (none when refused).
    pub searches: Vec<(String, u64, Option<u64>)>,
    /// Every `Authorization` header value, once each.
    pub authorizations: Vec<String>,
    /// Requests refused by the primary limit, and by a secondary one.
    pub primary_limited: u64,
    pub secondary_limited: u64,
    /// Requests sent before the reset an answer announced (`X-RateLimit-Remaining: 0`).
    pub before_reset: u64,
}

struct Shared {
    repos: Mutex<Vec<FakeRepo>>,
    seen: Mutex<Seen>,
    /// Refuse the first `contents/` request with the primary limit, resetting this many
    /// seconds ahead.
    primary_reset_in: Mutex<Option<u64>>,
    /// Refuse the second search request with a secondary limit, `Retry-After` this many seconds.
    secondary_retry_after: Mutex<Option<u64>>,
    /// Announce the limit used up, resetting this many seconds ahead, on the first branch's
    /// answer (a 200).
    announce_reset_in: Mutex<Option<u64>>,
    /// The reset announced.
    announced_reset: Mutex<Option<u64>>,
    /// How many search answers from now on say `incomplete_results: true` (and carry
    /// [`INCOMPLETE_MARK`]).
    incomplete: Mutex<u64>,
    /// The origin the `Link` headers point at, when not this server's.
    link_base: Mutex<Option<String>>,
    base: String,
}

/// The running fake API; stopped when dropped (its runtime ends).
pub struct FakeGithub {
    pub url: String,
    shared: Arc<Shared>,
    _runtime: tokio::runtime::Runtime,
}

impl FakeGithub {
    /// Serves `repos`; with `primary_reset_in`, the first root listing is refused by the
    /// primary rate limit resetting that many seconds ahead, and the first branch's answer
    /// says the limit is used up until as many seconds ahead; with `secondary_retry_after`, the
    /// second search request is refused by a secondary limit.
    pub fn start(
        repos: Vec<FakeRepo>,
        primary_reset_in: Option<u64>,
        secondary_retry_after: Option<u64>,
    ) -> FakeGithub {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            repos: Mutex::new(repos),
            seen: Mutex::default(),
            primary_reset_in: Mutex::new(primary_reset_in),
            secondary_retry_after: Mutex::new(secondary_retry_after),
            announce_reset_in: Mutex::new(primary_reset_in),
            announced_reset: Mutex::new(None),
            incomplete: Mutex::new(0),
            link_base: Mutex::new(None),
            base: url.clone(),
        });
        let app = axum::Router::new()
            .route("/search/repositories", get(search))
            .route("/repos/{owner}/{name}/contents/", get(contents))
            .route("/repos/{owner}/{name}/branches/{branch}", get(branch))
            .with_state(shared.clone());
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
        FakeGithub {
            url,
            shared,
            _runtime: runtime,
        }
    }

    pub fn seen(&self) -> Seen {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Moves a repository's default branch to another commit.
    pub fn set_commit(&self, full_name: &str, commit: &str) {
        let mut repos = self.shared.repos.lock().unwrap();
        let r = repos.iter_mut().find(|r| r.full_name == full_name).unwrap();
        r.commit = commit.to_owned();
    }

    /// Changes a repository's star count.
    pub fn set_stars(&self, full_name: &str, stars: u64) {
        let mut repos = self.shared.repos.lock().unwrap();
        let r = repos.iter_mut().find(|r| r.full_name == full_name).unwrap();
        r.stars = stars;
    }

    /// The next `count` search answers say their results are incomplete (a timed-out search).
    pub fn set_incomplete(&self, count: u64) {
        *self.shared.incomplete.lock().unwrap() = count;
    }

    /// `Link` headers point at `base` (another origin) instead of this server.
    pub fn set_link_base(&self, base: Option<&str>) {
        *self.shared.link_base.lock().unwrap() = base.map(str::to_owned);
    }

    /// Clears the counters (between two runs).
    pub fn reset_seen(&self) {
        *self.shared.seen.lock().unwrap() = Seen::default();
    }
}

/// A text only an incomplete search answer holds.
pub const INCOMPLETE_MARK: &str = "incomplete-answer-mark";

/// Counts a request: its conditional header and its token.
fn note(s: &Shared, headers: &HeaderMap) {
    let early = s.announced_reset.lock().unwrap().is_some_and(|r| now() < r);
    let mut seen = s.seen.lock().unwrap();
    seen.requests += 1;
    if early {
        seen.before_reset += 1;
    }
    if headers.contains_key("if-none-match") {
        seen.conditional += 1;
    }
    if let Some(a) = headers.get("authorization").and_then(|v| v.to_str().ok())
        && !seen.authorizations.iter().any(|x| x == a)
    {
        seen.authorizations.push(a.to_owned());
    }
}

/// A JSON answer with an `ETag` of its body and `Link`, or 304 when the request's
/// `If-None-Match` names it.
fn answer(s: &Shared, headers: &HeaderMap, body: Value, link: Option<String>) -> Response {
    let text = body.to_string();
    let etag = format!(
        "\"{}\"",
        blake3::hash(format!("{text}\n{link:?}").as_bytes()).to_hex()
    );
    let mut out = if headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag)
    {
        s.seen.lock().unwrap().not_modified += 1;
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = (StatusCode::OK, text).into_response();
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
        if let Some(link) = &link {
            r.headers_mut()
                .insert("link", HeaderValue::from_str(link).unwrap());
        }
        r
    };
    let h = out.headers_mut();
    h.insert("etag", HeaderValue::from_str(&etag).unwrap());
    h.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
    h.insert("x-ratelimit-remaining", HeaderValue::from_static("4999"));
    out
}

fn refuse(status: StatusCode, headers: &[(&str, String)], message: &str) -> Response {
    let mut r = (
        status,
        json!({"message": message, "documentation_url": "https://docs.github.com/rest"})
            .to_string(),
    )
        .into_response();
    for (k, v) in headers {
        r.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    r
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The query string's parameters, decoded.
fn params(raw: &str) -> BTreeMap<String, String> {
    raw.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), decode(v)))
        .collect()
}

fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// Whether a repository created at `created_at` is in the query's `created:` range (the
/// forms `A..B`, `>=A`, `<=B`, `A`); other qualifiers are not applied.
fn matches(q: &str, created_at: &str) -> bool {
    let day = &created_at[..10];
    q.split(' ')
        .filter_map(|t| t.strip_prefix("created:"))
        .all(|v| {
            if let Some((a, b)) = v.split_once("..") {
                (a == "*" || day >= a) && (b == "*" || day <= b)
            } else if let Some(a) = v.strip_prefix(">=") {
                day >= a
            } else if let Some(b) = v.strip_prefix("<=") {
                day <= b
            } else {
                day == v
            }
        })
}

async fn search(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    note(&s, &headers);
    let raw = raw.unwrap_or_default();
    let p = params(&raw);
    let q = p.get("q").cloned().unwrap_or_default();
    let per_page: u64 = p.get("per_page").and_then(|v| v.parse().ok()).unwrap_or(30);
    let page: u64 = p.get("page").and_then(|v| v.parse().ok()).unwrap_or(1);
    let searches = s.seen.lock().unwrap().searches.len();
    if searches == 1
        && let Some(after) = s.secondary_retry_after.lock().unwrap().take()
    {
        let mut seen = s.seen.lock().unwrap();
        seen.secondary_limited += 1;
        seen.searches.push((q, page, None));
        return refuse(
            StatusCode::FORBIDDEN,
            &[("retry-after", after.to_string())],
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        );
    }
    let mut found: Vec<FakeRepo> = s
        .repos
        .lock()
        .unwrap()
        .iter()
        .filter(|r| matches(&q, &r.created_at))
        .cloned()
        .collect();
    found.sort_by(|a, b| a.full_name.cmp(&b.full_name));
    let total = found.len() as u64;
    s.seen
        .lock()
        .unwrap()
        .searches
        .push((q.clone(), page, Some(total)));
    let reachable = total.min(1000);
    if (page - 1) * per_page >= 1000 {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            &[],
            "Only the first 1000 search results are available",
        );
    }
    let items: Vec<Value> = found
        .iter()
        .skip(((page - 1) * per_page) as usize)
        .take(per_page as usize)
        .map(|r| {
            json!({
                "id": 1, "name": r.full_name.split('/').nth(1), "full_name": r.full_name,
                "owner": {"login": r.full_name.split('/').next()},
                "fork": r.fork, "archived": r.archived,
                "license": r.license.as_ref().map(|l| json!({"key": l.to_lowercase(), "spdx_id": l})),
                "size": r.size, "stargazers_count": r.stars,
                "created_at": r.created_at, "pushed_at": r.pushed_at,
                "clone_url": r.clone_url, "default_branch": r.default_branch,
                "language": "Python", "score": 1.0,
            })
        })
        .collect();
    let base: String = raw
        .split('&')
        .filter(|p| !p.starts_with("page="))
        .collect::<Vec<_>>()
        .join("&");
    let last = reachable.div_ceil(per_page).max(1);
    let origin = s
        .link_base
        .lock()
        .unwrap()
        .clone()
        .unwrap_or(s.base.clone());
    let link = (page < last).then(|| {
        format!(
            "<{0}/search/repositories?{base}&page={1}>; rel=\"next\", <{0}/search/repositories?{base}&page={last}>; rel=\"last\"",
            origin,
            page + 1
        )
    });
    let incomplete = {
        let mut left = s.incomplete.lock().unwrap();
        let now = *left > 0;
        *left = left.saturating_sub(1);
        now
    };
    let mut body = json!({"total_count": total, "incomplete_results": incomplete, "items": items});
    if incomplete {
        body["note"] = json!(INCOMPLETE_MARK);
    }
    answer(&s, &headers, body, link)
}

fn repo(s: &Shared, owner: &str, name: &str) -> Option<FakeRepo> {
    let full = format!("{owner}/{name}");
    s.repos
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.full_name == full)
        .cloned()
}

async fn contents(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath((owner, name)): UrlPath<(String, String)>,
) -> Response {
    note(&s, &headers);
    if let Some(secs) = s.primary_reset_in.lock().unwrap().take() {
        s.seen.lock().unwrap().primary_limited += 1;
        return refuse(
            StatusCode::FORBIDDEN,
            &[
                ("x-ratelimit-limit", "5000".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset", (now() + secs).to_string()),
            ],
            "API rate limit exceeded for user.",
        );
    }
    let Some(r) = repo(&s, &owner, &name) else {
        return refuse(StatusCode::NOT_FOUND, &[], "Not Found");
    };
    match r.contents_status {
        Some(404) => return refuse(StatusCode::NOT_FOUND, &[], "Not Found"),
        Some(409) => return refuse(StatusCode::CONFLICT, &[], "This repository is empty."),
        Some(other) => panic!("contents_status {other}: 404 or 409"),
        None => {}
    }
    let listing: Vec<Value> = r
        .files
        .iter()
        .map(|f| json!({"name": f, "path": f, "type": "file", "size": 10}))
        .collect();
    answer(&s, &headers, Value::Array(listing), None)
}

async fn branch(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    UrlPath((owner, name, branch)): UrlPath<(String, String, String)>,
) -> Response {
    note(&s, &headers);
    match repo(&s, &owner, &name) {
        Some(r) if r.default_branch == branch => {
            let mut out = answer(
                &s,
                &headers,
                json!({"name": branch, "commit": {"sha": r.commit, "url": ""}, "protected": false}),
                None,
            );
            if let Some(secs) = s.announce_reset_in.lock().unwrap().take() {
                let reset = now() + secs;
                *s.announced_reset.lock().unwrap() = Some(reset);
                let h = out.headers_mut();
                h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
                h.insert(
                    "x-ratelimit-reset",
                    HeaderValue::from_str(&reset.to_string()).unwrap(),
                );
            }
            out
        }
        _ => refuse(StatusCode::NOT_FOUND, &[], "Branch not found"),
    }
}

/// `git daemon` serving the bare repositories under a folder (`--export-all`, filters
/// allowed), on a free loopback port; killed when dropped.
pub struct GitDaemon {
    child: Child,
    pub url: String,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new("git")
            .args([
                "-c",
                "uploadpack.allowFilter=true",
                "-c",
                "uploadpack.allowAnySHA1InWant=true",
                "daemon",
                "--export-all",
                "--reuseaddr",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon");
        // Until it listens.
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        GitDaemon {
            child,
            url: format!("git://127.0.0.1:{port}"),
        }
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare repository at `base/OWNER/NAME.git` holding `files` in one commit dated `date`
/// (`YYYY-MM-DDTHH:MM:SSZ`): its head commit.
pub fn bare_repo(base: &Path, full_name: &str, files: &[(&str, &str)], date: &str) -> String {
    let work = base.join("work").join(full_name);
    std::fs::create_dir_all(&work).unwrap();
    for (path, text) in files {
        let p = work.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let git = |args: &[&str], dir: &Path| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {:?}", out);
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    git(&["init", "-q", "-b", "main"], &work);
    git(&["add", "-A"], &work);
    git(&["commit", "-q", "-m", "first"], &work);
    let bare: PathBuf = base.join(format!("{full_name}.git"));
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(
        &[
            "clone",
            "-q",
            "--bare",
            &work.to_string_lossy(),
            &bare.to_string_lossy(),
        ],
        base,
    );
    git(&["rev-parse", "HEAD"], &work)
}
