//! Dating: when each function's body was first introduced (`created_at`) and last changed
//! (`changed_at`), from the repository's history, as committer dates.
//!
//! A function's *body* is its definition's syntax tree as the summary hashes it
//! (`DefLayout::code_hash`: decorators, signature, docstring and statements; blind to
//! positions, formatting and comments). So a comment or a reformatting is not a change, and
//! nothing done to another function changes this one's dates.
//!
//! The history walked is the first-parent line up to the commit (`git log --reverse
//! --first-parent`, merges diffed against their first parent: work merged from a branch is
//! dated by its merge), only `.py` files, with git's rename detection (`-M`). At each commit
//! the files it changed are parsed (their blobs read through one `git cat-file --batch`) and
//! their definitions matched with the file's previous ones by qualified name (the n-th
//! definition of a name with the n-th): the same body keeps its dates, another one keeps
//! `created` and takes the commit's date as `changed`. A renamed file carries its definitions
//! along. A definition that matches none (a new name, or a new file) and whose body equals that
//! of one that disappeared in the same commit, from any file, was moved: it keeps that one's
//! dates. Anything else is new: both dates are the commit's. A version of a file that does not
//! parse leaves the file's definitions as they were.
//!
//! Sources: a `git` repository (its mirror holds the history) and a `path` repository that
//! is a clean git work tree (its identity is a commit, its `.git` the history). A folder with
//! changes, or without git, and a shallow clone (its history cut short) have no history: their
//! functions' dates are `null`. A history that cannot be read (a missing object, a failing
//! `git`) is no result: that repository's dates are `null` in the build's outputs, nothing is
//! stored, and the build exits 1 (`engine`), so that the next one dates it again.
//!
//! The walk's state at a commit (each file's definitions with their bodies and dates) is one
//! cache entry (`keys::DatingKey`, bucket `dates-v1`): the same commit is never walked again,
//! and a later commit walks only the commits after its nearest first-parent ancestor that was
//! dated before (a new commit that edits a comment walks one commit).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::checkout::{CatFile, Checkout, fetch_missing_blobs};
use r2e_core::cache::{ActionKey, Cache};
use r2e_core::dates::{Dated, Dates};
use r2e_core::error::{Error, Result};
use r2e_core::keys::DatingKey;
use r2e_python::summary::{DefKind, numbered_places};

/// One definition of a file as the walk tracks it.
#[derive(Clone, Serialize, Deserialize)]
struct Def {
    qualname: String,
    kind: DefKind,
    body: [u8; 32],
    dated: Dated,
}

/// The walk's state at a commit: each `.py` file's definitions, in source order, with their
/// bodies and dates. What the cache keeps of a commit (`keys::DatingKey`), so that a later
/// commit walks only the commits after it.
#[derive(Default, Serialize, Deserialize)]
struct Walked {
    files: BTreeMap<String, Vec<Def>>,
}

impl Walked {
    /// The functions' and methods' dates by place (`path:qualname`, `#n` for the n-th
    /// definition of a name in a file, as ids have it).
    fn dates(&self) -> Dates {
        let mut dates = Dates::default();
        for (path, defs) in &self.files {
            let places = numbered_places(defs.iter().map(|d| d.qualname.as_str()));
            for (d, place) in defs.iter().zip(places) {
                if d.kind != DefKind::Class {
                    dates.by_place.insert(format!("{path}:{place}"), d.dated);
                }
            }
        }
        dates
    }
}

/// How far back along the first-parent line a commit whose walk is cached is looked for.
const ANCESTORS: usize = 1000;

/// A file's definitions at a commit: each one's qualname, kind and body hash, in source order.
type Parsed = Vec<(String, DefKind, [u8; 32])>;

/// One changed file of a commit, from `git log --raw`.
struct Change {
    status: u8,
    old: String,
    new: String,
    blob: String,
}

/// The dates of a repository's functions at its checkout's commit, from the cache or the
/// history; `None` when the checkout has no history (a folder that is not a clean git work
/// tree). Returns whether they were computed now.
pub fn dates(checkout: &Checkout, cache: &Cache) -> Result<(Option<Arc<Dates>>, bool)> {
    let Some(dir) = checkout.history() else {
        return Ok((None, false));
    };
    let commit = checkout.identity.as_str();
    let key = DatingKey::new(commit);
    if let Some(walked) = cache.get_action::<_, Walked>(&key) {
        return Ok((Some(Arc::new(walked.dates())), false));
    }
    // A shallow clone's history starts at its boundary: every date would be that commit's.
    if is_shallow(&dir) {
        eprintln!(
            "warning: repo `{}` is a shallow clone: its functions are not dated (fetch its whole history with `git fetch --unshallow`)",
            checkout.name
        );
        return Ok((None, false));
    }
    let fail = |e: String| {
        Error::env(format!(
            "repo `{}`: cannot date its functions from the history of {commit}: {e}",
            checkout.name
        ))
    };
    // The nearest first-parent ancestor dated before: only the commits after it are walked.
    let (range, walked) = match cached_ancestor(&dir, commit, cache).map_err(fail)? {
        Some((base, walked)) => (format!("{base}..{commit}"), walked),
        None => (commit.to_owned(), Walked::default()),
    };
    let label = format!("repo `{}`, dating", checkout.name);
    let (walked, commits) = walk(&dir, &range, walked, &label).map_err(fail)?;
    r2e_core::log::count(
        &format!("dating {}: commits walked", checkout.name),
        commits,
    );
    cache.put_action(&key, &walked)?;
    Ok((Some(Arc::new(walked.dates())), true))
}

/// The nearest first-parent ancestor of `commit` whose walk the cache holds, with that walk.
fn cached_ancestor(
    dir: &Path,
    commit: &str,
    cache: &Cache,
) -> std::result::Result<Option<(String, Walked)>, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "rev-list",
            "--first-parent",
            &format!("--max-count={ANCESTORS}"),
            commit,
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `git rev-list`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git rev-list` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let listed = String::from_utf8_lossy(&out.stdout);
    for sha in listed.lines().skip(1) {
        let key = DatingKey::new(sha);
        if cache.contains(DatingKey::BUCKET, key.hash())
            && let Some(walked) = cache.get_action::<_, Walked>(&key)
        {
            return Ok(Some((sha.to_owned(), walked)));
        }
    }
    Ok(None)
}

/// Whether the repository at `dir` is a shallow clone.
fn is_shallow(dir: &Path) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--is-shallow-repository"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true")
}

/// Walks the first-parent history `range` (a commit, or `BASE..COMMIT`) in the repository at
/// `dir` (a bare mirror or a work tree), from `walked`, the state at its start. Returns the
/// state at its end and how many commits that changed a `.py` file it walked.
fn walk(
    dir: &Path,
    range: &str,
    walked: Walked,
    label: &str,
) -> std::result::Result<(Walked, usize), String> {
    // The history first (its changes are small), then its blobs in batches of commits, each
    // batch's parsed in parallel.
    let commits = history(dir, range)?;
    // A partial mirror (`--filter=blob:none`) has the history's commits and trees but not its
    // old files: those the walk reads are fetched in one request, not one per blob as
    // `cat-file` would.
    let mut every: Vec<String> = commits
        .iter()
        .flat_map(|(_, changes)| changes)
        .filter(|c| c.status != b'D')
        .map(|c| c.blob.clone())
        .collect();
    every.sort_unstable();
    every.dedup();
    fetch_missing_blobs(label, dir, &every).map_err(|e| e.to_string())?;
    let mut blobs = CatFile::spawn(dir).map_err(|e| e.to_string())?;
    let mut state = walked.files;
    for batch in commits.chunks(BATCH) {
        let mut wanted: Vec<&str> = batch
            .iter()
            .flat_map(|(_, changes)| changes)
            .filter(|c| c.status != b'D')
            .map(|c| c.blob.as_str())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut read = Vec::with_capacity(wanted.len());
        for oid in wanted {
            let bytes = blobs
                .read(oid)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("blob `{oid}` is missing"))?;
            read.push((oid, bytes));
        }
        let parsed: HashMap<&str, Option<Parsed>> = read
            .par_iter()
            .map(|(oid, bytes)| (*oid, parse(bytes)))
            .collect();
        for (t, changes) in batch {
            apply(&mut state, &parsed, changes, *t);
        }
    }
    Ok((Walked { files: state }, commits.len()))
}

/// The first-parent history `range` of the repository at `dir`, oldest first: each commit's
/// time and its changes to `.py` files (`git log --raw`).
fn history(dir: &Path, range: &str) -> std::result::Result<Vec<(i64, Vec<Change>)>, String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.quotePath=false",
            // The root commit's files are its additions, whatever the user's configuration.
            "-c",
            "log.showRoot=true",
            "log",
            "--no-color",
            "--no-show-signature",
            "--reverse",
            "--first-parent",
            "--diff-merges=first-parent",
            "--raw",
            "-z",
            "--no-abbrev",
            "-M",
            "--format=%x01%H %ct",
            range,
            "--",
            "*.py",
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `git log`: {e}"))?;
    let mut commits: Vec<(i64, Vec<Change>)> = Vec::new();
    // Its stderr is read aside, so that warnings (one per commit too large for rename
    // detection) never fill the pipe while its stdout is read.
    let mut stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
        err
    });
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut token = Vec::new();
    let mut pending_meta: Option<(u8, String)> = None;
    let mut paths: Vec<String> = Vec::new();
    loop {
        token.clear();
        let n = out
            .read_until(0, &mut token)
            .map_err(|e| format!("reading `git log`: {e}"))?;
        if n == 0 {
            break;
        }
        if token.last() == Some(&0) {
            token.pop();
        }
        let text = String::from_utf8_lossy(&token);
        let text = text.trim_start_matches('\n');
        if let Some(header) = text.strip_prefix('\u{1}') {
            let secs = header
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("unexpected `git log` header `{header}`"))?;
            commits.push((secs, Vec::new()));
            continue;
        }
        if let Some(meta) = text.strip_prefix(':') {
            // `:old_mode new_mode old_blob new_blob STATUS`, then one path (two for a rename
            // or a copy).
            let fields: Vec<&str> = meta.split_whitespace().collect();
            let (Some(blob), Some(status)) = (fields.get(3), fields.get(4)) else {
                return Err(format!("unexpected `git log` line `{text}`"));
            };
            pending_meta = Some((status.as_bytes()[0], (*blob).to_owned()));
            paths.clear();
            continue;
        }
        let Some((status, blob)) = &pending_meta else {
            continue;
        };
        paths.push(text.to_owned());
        let wanted = if matches!(status, b'R' | b'C') { 2 } else { 1 };
        if paths.len() == wanted {
            let new = paths.pop().expect("one path");
            let old = paths.pop().unwrap_or_else(|| new.clone());
            let Some((_, changes)) = commits.last_mut() else {
                return Err("`git log` listed a change before a commit".into());
            };
            changes.push(Change {
                status: *status,
                old,
                new,
                blob: blob.clone(),
            });
            pending_meta = None;
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `git log`: {e}"))?;
    let err = errors.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("`git log` failed: {}", err.trim()));
    }
    Ok(commits)
}

/// The definitions of a version of a file, or `None` when it does not decode or parse.
fn parse(bytes: &[u8]) -> Option<Parsed> {
    let text = r2e_python::decode::decode_source(bytes).ok()?;
    let summary = r2e_python::extract::summarize(&text).ok()?;
    Some(
        summary
            .interface
            .defs
            .into_iter()
            .zip(summary.layout.defs)
            .map(|(d, l)| (d.qualname, d.kind, l.code_hash))
            .collect(),
    )
}

/// How many commits' blobs are read and parsed at a time.
const BATCH: usize = 256;

/// One commit's changes, at committer time `t`; `parsed` holds the definitions of each blob
/// they name.
fn apply(
    state: &mut BTreeMap<String, Vec<Def>>,
    parsed: &HashMap<&str, Option<Parsed>>,
    changes: &[Change],
    t: i64,
) {
    // Definitions that left their file in this commit (a deleted file, or a name no longer
    // in a changed one): what a new definition with the same body was moved from.
    let mut gone: Vec<Def> = Vec::new();
    let mut changed: Vec<(String, Vec<Def>, Option<&Parsed>)> = Vec::new();
    for c in changes {
        match c.status {
            b'D' => gone.extend(state.remove(&c.old).unwrap_or_default()),
            _ => {
                let prior = if c.status == b'A' || c.status == b'C' {
                    Vec::new()
                } else {
                    state.remove(&c.old).unwrap_or_default()
                };
                let defs = parsed.get(c.blob.as_str()).and_then(Option::as_ref);
                changed.push((c.new.clone(), prior, defs));
            }
        }
    }
    // (path, index in its new definitions) of those that matched no previous one.
    let mut unmatched: Vec<(String, usize)> = Vec::new();
    for (path, prior, defs) in changed {
        let Some(defs) = defs else {
            if !prior.is_empty() {
                state.insert(path, prior);
            }
            continue;
        };
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, d) in prior.iter().enumerate().rev() {
            by_name.entry(d.qualname.as_str()).or_default().push(i);
        }
        let mut taken = vec![false; prior.len()];
        let mut next: Vec<Def> = Vec::with_capacity(defs.len());
        for (i, (qualname, kind, body)) in defs.iter().cloned().enumerate() {
            let dated = match by_name.get_mut(qualname.as_str()).and_then(Vec::pop) {
                Some(j) => {
                    taken[j] = true;
                    let was = prior[j].dated;
                    if prior[j].body == body {
                        was
                    } else {
                        Dated {
                            created: was.created,
                            changed: t,
                        }
                    }
                }
                None => {
                    unmatched.push((path.clone(), i));
                    Dated {
                        created: t,
                        changed: t,
                    }
                }
            };
            next.push(Def {
                qualname,
                kind,
                body,
                dated,
            });
        }
        gone.extend(
            prior
                .into_iter()
                .zip(taken)
                .filter(|(_, t)| !t)
                .map(|(d, _)| d),
        );
        state.insert(path, next);
    }
    // A new definition whose body left another place in this commit was moved from there.
    for (path, i) in unmatched {
        let Some(def) = state.get_mut(&path).and_then(|defs| defs.get_mut(i)) else {
            continue;
        };
        let same = |g: &Def| g.body == def.body && g.kind == def.kind;
        let found = gone
            .iter()
            .position(|g| same(g) && g.qualname == def.qualname)
            .or_else(|| gone.iter().position(same));
        if let Some(at) = found {
            def.dated = gone.swap_remove(at).dated;
        }
    }
}
