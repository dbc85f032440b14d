//! `r2e curate`: the pipeline's `[[source]]` searches resolved into `repos.lock` beside it
//! (`r2e_core::curation::Lock`), which `r2e build` reads instead of searching.
//!
//! Per source: the search ([`github::Client::search`]), its candidates ordered by stars (most
//! first) then name; the filters that need nothing more than the search's answer (forks,
//! archived repositories, licence, size, stars), then `limit`, then the ones that cost a
//! request each (a packaging file at the root, the default branch's head). Every candidate
//! left out is recorded with its reason, every repository kept with the filters it passed.
//!
//! A lock whose sources are unchanged is kept as it is without `--update` (no request at all).
//! With `--update` the search runs again; when it pins the same repositories (each kept one's
//! name, URL and commit) the lock keeps its `curated_at`, and with it every environment's
//! `exclude_newer`, even when volatile metadata (stars, counts, reasons) changed: the file is
//! rewritten with the new metadata and the old date, and byte-identical when nothing changed.
//!
//! What the API says reaches the build only checked (`r2e_core::curation`): a candidate whose
//! `full_name`, clone URL or head commit is malformed is left out, with the reason.

pub mod github;

use serde::Serialize;

use r2e_core::cache::Cache;
use r2e_core::config::{Config, SourceConfig, read_lock, secret_from_env, sources_fingerprint};
use r2e_core::curation::{
    LOCK_VERSION, LeftOut, Lock, LockedRepo, LockedSource, check_clone_url, check_commit,
    check_full_name, lock_path,
};
use r2e_core::dates::{Date, now_seconds, rfc3339};
use r2e_core::error::{Error, Result};

/// What `r2e curate` did.
#[derive(Debug, Serialize)]
pub struct Outcome {
    /// The lock's path.
    pub lock: String,
    /// Whether a search ran (`false`: the lock matched the sources and `--update` was not given).
    pub searched: bool,
    /// Whether the file was written (`false`: it already held exactly this lock).
    pub written: bool,
    pub curated_at: String,
    pub repos: usize,
    pub left_out: usize,
    /// What changed against the lock there was before, if any.
    pub changes: Option<LockDiff>,
    /// Each source's client: requests, 304s, rate limits, search windows.
    pub requests: Vec<github::Stats>,
}

/// The repositories added, removed and moved (another commit) between two locks.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LockDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub moved: Vec<Moved>,
    pub unchanged: usize,
}

/// A repository whose pinned commit changed.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Moved {
    pub name: String,
    pub old_commit: String,
    pub new_commit: String,
}

/// Curates `cfg`'s sources (a configuration read without its lock, `config::load_unlocked`).
pub fn curate(cfg: &Config, update: bool) -> Result<Outcome> {
    if cfg.sources.is_empty() {
        return Err(Error::input(format!(
            "{}: no `[[source]]` table: there is nothing to curate",
            cfg.file.display()
        )));
    }
    let path = lock_path(&cfg.file);
    let old = match read_lock(&path) {
        Ok(old) => old,
        // A lock that cannot be read is replaced by an update.
        Err(e) if update => {
            eprintln!("warning: curate: {e}; writing it again");
            None
        }
        Err(e) => return Err(e),
    };
    let fingerprint = sources_fingerprint(&cfg.sources);
    if !update
        && let Some(old) = &old
        && old.sources == fingerprint
    {
        eprintln!(
            "curate: `{}` matches the sources (curated at {}); `r2e curate --update` searches again",
            path.display(),
            old.curated_at
        );
        return Ok(Outcome {
            lock: path.display().to_string(),
            searched: false,
            written: false,
            curated_at: old.curated_at.clone(),
            repos: old.repo.len(),
            left_out: old.left_out.len(),
            changes: None,
            requests: Vec::new(),
        });
    }
    let cache = Cache::open(&cfg.cache)?;
    let now = now_seconds();
    let today = Date::from_days(now.div_euclid(86_400));
    let mut lock = Lock {
        version: LOCK_VERSION,
        curated_at: rfc3339(now),
        sources: fingerprint,
        source: Vec::new(),
        repo: Vec::new(),
        left_out: Vec::new(),
    };
    let mut requests = Vec::new();
    for (i, source) in cfg.sources.iter().enumerate() {
        let stats = search_source(i, source, today, &cache, &mut lock)?;
        requests.push(stats);
    }
    // The same pins (names, URLs, commits) keep the date, however stars and counts moved: a
    // new date would be a new `exclude_newer`, and every environment built again.
    if let Some(old) = &old
        && old.same_pins(&lock)
    {
        lock.curated_at = old.curated_at.clone();
    }
    let written = r2e_core::fsutil::write_if_changed(&path, lock.render().as_bytes())?;
    cache.unlock();
    Ok(Outcome {
        lock: path.display().to_string(),
        searched: true,
        written,
        curated_at: lock.curated_at.clone(),
        repos: lock.repo.len(),
        left_out: lock.left_out.len(),
        changes: old.as_ref().map(|o| diff(o, &lock)),
        requests,
    })
}

/// One source's search and filters, into `lock`.
fn search_source(
    index: usize,
    source: &SourceConfig,
    today: Date,
    cache: &Cache,
    lock: &mut Lock,
) -> Result<github::Stats> {
    let query = &source.query;
    let token = secret_from_env(&source.token_env);
    if token.is_none() {
        eprintln!(
            "curate: `{}` is not set: searching GitHub anonymously, with its lower rate limits",
            source.token_env
        );
    }
    let mut client = github::Client::new(&source.api_url, token, &source.token_env, cache);
    let (matched, mut items) = client.search(query, today)?;
    items.sort_by(|a, b| b.stars.cmp(&a.stars).then(a.full_name.cmp(&b.full_name)));
    let found = items.len();
    let mut kept = 0u64;
    for item in items {
        if lock.repo.iter().any(|r| r.full_name == item.full_name) {
            continue;
        }
        let mut because = vec!["matched the search".to_owned()];
        // What reaches the build (a folder name, `git clone`'s argument) is checked first.
        let reason = check_full_name(&item.full_name)
            .and_then(|()| check_clone_url(&item.clone_url, &source.api_url))
            .err()
            .or_else(|| cheap_filters(source, query.forks, query.archived, &item, &mut because));
        let left_out = |reason: String| LeftOut {
            full_name: item.full_name.clone(),
            source: index,
            reason,
        };
        if let Some(reason) = reason {
            lock.left_out.push(left_out(reason));
            continue;
        }
        if kept >= source.limit {
            lock.left_out
                .push(left_out(format!("over the limit of {}", source.limit)));
            continue;
        }
        let files = match client.root_files(&item.full_name)? {
            github::Root::Files(files) => files,
            github::Root::Empty => {
                lock.left_out.push(left_out("empty repository".into()));
                continue;
            }
            github::Root::NotFound => {
                lock.left_out
                    .push(left_out("not found (deleted, renamed or private)".into()));
                continue;
            }
        };
        let Some(packaging) = source.require_files.iter().find(|f| files.contains(f)) else {
            lock.left_out.push(left_out(format!(
                "no packaging file (none of {})",
                source.require_files.join(", ")
            )));
            continue;
        };
        because.push(format!("has {packaging}"));
        let Some(commit) = client.head(&item.full_name, &item.default_branch)? else {
            lock.left_out.push(left_out(format!(
                "its default branch `{}` is not found",
                item.default_branch
            )));
            continue;
        };
        if let Err(why) = check_commit(&commit) {
            lock.left_out.push(left_out(why));
            continue;
        }
        kept += 1;
        lock.repo.push(LockedRepo {
            name: item.full_name.replacen('/', "__", 1),
            full_name: item.full_name.clone(),
            url: item.clone_url.clone(),
            commit,
            branch: item.default_branch.clone(),
            created_at: item.created_at.clone(),
            pushed_at: item.pushed_at.clone(),
            stars: item.stars,
            license: item.license.clone().unwrap_or_default(),
            size_kb: item.size_kb,
            source: index,
            kept_because: because,
        });
    }
    eprintln!(
        "curate: source {}: {matched} matched, {found} seen, {kept} kept ({} requests, {} answered 304)",
        index + 1,
        client.stats.requests,
        client.stats.not_modified
    );
    lock.source.push(LockedSource {
        github: source.github.clone(),
        fingerprint: source.fingerprint(),
        matched,
        kept,
    });
    Ok(client.stats)
}

/// The filters the search's answer decides: the reason to leave `item` out, or `None` with the
/// filters it passed added to `because`.
fn cheap_filters(
    source: &SourceConfig,
    forks: bool,
    archived: bool,
    item: &github::Item,
    because: &mut Vec<String>,
) -> Option<String> {
    if item.fork && !forks {
        return Some("fork".into());
    }
    if !item.fork {
        because.push("not a fork".into());
    }
    if item.archived && !archived {
        return Some("archived".into());
    }
    if !item.archived {
        because.push("not archived".into());
    }
    if !source.licenses.is_empty() {
        match &item.license {
            Some(l) if source.licenses.iter().any(|a| a.eq_ignore_ascii_case(l)) => {
                because.push(format!("licence {l} allowed"));
            }
            Some(l) => {
                return Some(format!(
                    "licence {l} is not allowed (allowed: {})",
                    source.licenses.join(", ")
                ));
            }
            None => {
                return Some(format!(
                    "no licence (allowed: {})",
                    source.licenses.join(", ")
                ));
            }
        }
    }
    if let Some(max) = source.max_size_kb {
        if item.size_kb > max {
            return Some(format!("{} KB, over max_size_kb = {max}", item.size_kb));
        }
        because.push(format!("{} KB <= {max}", item.size_kb));
    }
    if let Some(min) = source.min_stars {
        if item.stars < min {
            return Some(format!("{} stars, under min_stars = {min}", item.stars));
        }
        because.push(format!("{} stars >= {min}", item.stars));
    }
    None
}

/// What changed from `old` to `new`, by repository name.
pub fn diff(old: &Lock, new: &Lock) -> LockDiff {
    let mut d = LockDiff::default();
    for r in &new.repo {
        match old.repo.iter().find(|o| o.name == r.name) {
            None => d.added.push(r.name.clone()),
            Some(o) if o.commit != r.commit || o.url != r.url => d.moved.push(Moved {
                name: r.name.clone(),
                old_commit: o.commit.clone(),
                new_commit: r.commit.clone(),
            }),
            Some(_) => d.unchanged += 1,
        }
    }
    for o in &old.repo {
        if !new.repo.iter().any(|r| r.name == o.name) {
            d.removed.push(o.name.clone());
        }
    }
    d.added.sort();
    d.removed.sort();
    d.moved.sort_by(|a, b| a.name.cmp(&b.name));
    d
}

/// A lock diff as `r2e dataset diff` writes one: `+` added, `-` removed, `>` moved, then counts.
pub fn diff_text(d: &LockDiff) -> String {
    let short = |v: &str| v.get(..12).unwrap_or(v).to_owned();
    let mut out = String::new();
    for (names, sign) in [(&d.added, "+"), (&d.removed, "-")] {
        for n in names {
            out.push_str(&format!("{sign} {n}\n"));
        }
    }
    for m in &d.moved {
        out.push_str(&format!(
            "> {} moved: {} -> {}\n",
            m.name,
            short(&m.old_commit),
            short(&m.new_commit)
        ));
    }
    out.push_str(&format!(
        "{} added, {} removed, {} moved, {} unchanged\n",
        d.added.len(),
        d.removed.len(),
        d.moved.len(),
        d.unchanged
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str, commit: &str) -> LockedRepo {
        LockedRepo {
            name: name.into(),
            full_name: name.replacen("__", "/", 1),
            url: format!("https://github.com/{}.git", name.replacen("__", "/", 1)),
            commit: commit.into(),
            branch: "main".into(),
            created_at: "2025-06-02T00:00:00Z".into(),
            pushed_at: "2025-06-03T00:00:00Z".into(),
            stars: 40,
            license: "MIT".into(),
            size_kb: 1,
            source: 0,
            kept_because: Vec::new(),
        }
    }

    fn lock(repos: Vec<LockedRepo>) -> Lock {
        Lock {
            version: LOCK_VERSION,
            curated_at: "2025-07-01T00:00:00Z".into(),
            sources: "s".into(),
            source: Vec::new(),
            repo: repos,
            left_out: Vec::new(),
        }
    }

    #[test]
    fn a_diff_names_the_added_removed_and_moved() {
        let old = lock(vec![
            repo("a__x", "1111"),
            repo("b__y", "2222"),
            repo("c__z", "3333"),
        ]);
        let new = lock(vec![
            repo("a__x", "1111"),
            repo("b__y", "9999"),
            repo("d__w", "4444"),
        ]);
        let d = diff(&old, &new);
        assert_eq!(d.added, ["d__w"]);
        assert_eq!(d.removed, ["c__z"]);
        assert_eq!(d.moved.len(), 1);
        assert_eq!((d.moved[0].name.as_str(), d.unchanged), ("b__y", 1));
        assert_eq!(
            diff_text(&d),
            "+ d__w\n- c__z\n> b__y moved: 2222 -> 9999\n1 added, 1 removed, 1 moved, 1 unchanged\n"
        );
        // Only the date differs: the same pins.
        let mut later = old.clone();
        later.curated_at = "2026-01-01T00:00:00Z".into();
        assert!(later.same_pins(&old));
        assert!(!new.same_pins(&old));
    }
}
