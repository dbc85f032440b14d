//! `r2e gc`: removes the cache's buckets of other versions, then its least recently used
//! entries until it fits a size, under the cache's lock (a build started meanwhile waits).
//!
//! What one entry is comes from [`Bucket::layout`]: an action's file, or a whole environment,
//! tree, mirror or tool, or a whole installer cache. Its last use is its modification time,
//! which [`Cache::note_use`] renews (see `docs/caching.md`). What the last build of an output
//! used (`<output>/.r2e/uses`, found through [`Bucket::Roots`]) is kept unless asked.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::local::{names, size};
use super::store::Store;
use super::{Bucket, Cache, Layout, leftover_owner, read_uses};
use crate::error::{Error, Result};

/// What `r2e gc` is asked to do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Remove least recently used entries until the cache takes at most this many bytes.
    pub max_size: Option<u64>,
    /// Also remove what the last builds use, when that is needed to fit `max_size`.
    pub all: bool,
    /// Say what would be removed, removing nothing.
    pub dry_run: bool,
    /// Outputs whose last build's entries are kept, besides those registered in the cache.
    pub outputs: Vec<PathBuf>,
    /// For tests: once the lock is taken, wait until this file no longer exists.
    pub hold: Option<PathBuf>,
}

/// Bytes on the disk and entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub bytes: u64,
    pub entries: u64,
}

/// A folder removed whole: a bucket of another version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// Relative to the cache's root.
    pub path: String,
    pub bytes: u64,
}

/// What `r2e gc` did (or, with `dry_run`, would do).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub cache: PathBuf,
    pub dry_run: bool,
    pub max_size: Option<u64>,
    pub before: Usage,
    /// Measured again after the removal (estimated with `dry_run`).
    pub after: Usage,
    /// Whether `after` is within `max_size` (true without one).
    pub fits: bool,
    /// Buckets of other versions (and of kinds this r2e no longer has), removed whole.
    pub old_buckets: Vec<Removed>,
    /// Least recently used entries removed.
    pub evicted: Usage,
    /// Of them, entries the last builds used (only with `all`).
    pub evicted_in_use: Usage,
    /// Entries the last builds use, still there.
    pub kept_in_use: Usage,
    /// The outputs whose last build's entries are kept.
    pub outputs: Vec<PathBuf>,
    /// Outputs registered in the cache that no longer exist (their registration is removed).
    pub outputs_gone: Vec<PathBuf>,
    /// What dead processes left (temporary files, half-built folders, scratch).
    pub leftovers: u64,
    /// Folders and files of the cache that are not r2e's buckets: left alone.
    pub unknown: Vec<String>,
    /// Buckets (and `actions/`) that are symbolic links: not followed, left alone.
    pub links: Vec<String>,
    /// What could not be removed (each named in a warning): left as it was, and `gc` went on.
    pub not_removed: Vec<String>,
}

/// One unit of removal.
#[derive(Debug)]
struct Unit {
    /// Relative to the cache's root, as [`Cache::note_use`] records it.
    rel: String,
    bytes: u64,
    used: SystemTime,
    in_use: bool,
}

/// What a walk of the cache found.
#[derive(Default)]
struct Walk {
    units: Vec<Unit>,
    old: Vec<Removed>,
    unknown: Vec<String>,
    links: Vec<String>,
    /// Dead processes' temporary files and folders.
    leftovers: Vec<PathBuf>,
    /// Bytes of everything (units, old buckets, folders, the lock...).
    total: u64,
}

/// Runs `r2e gc` on the cache at `root`.
pub fn gc(root: &Path, opts: &Options) -> Result<Report> {
    if !root.join("CACHEDIR.TAG").is_file() {
        if root.exists() {
            return Err(Error::input(format!(
                "`{}` is not an r2e cache (it has no `CACHEDIR.TAG`); nothing removed",
                root.display()
            )));
        }
        eprintln!("no cache at `{}`: nothing to do", root.display());
        return Ok(empty_report(root, opts));
    }
    let cache = Cache::open_locked(root)?;
    if let Some(hold) = &opts.hold {
        eprintln!(
            "holding the lock on `{}` until `{}` is removed",
            root.display(),
            hold.display()
        );
        while hold.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let mut leftovers = 0;
    if !opts.dry_run {
        leftovers += cache.remove_leftovers() as u64;
    }
    let (in_use, outputs, outputs_gone) = in_use(&cache, opts)?;
    let found = walk(root, cache.store(), &in_use)?;
    let before = Usage {
        bytes: found.total,
        entries: found.units.len() as u64,
    };
    let mut trash = Trash::new(root);
    for path in &found.leftovers {
        if opts.dry_run || trash.remove(path) {
            leftovers += 1;
        }
    }
    for rel in &found.unknown {
        eprintln!(
            "warning: `{}` is not a bucket of r2e's cache; it is left alone",
            root.join(rel).display()
        );
    }
    for rel in &found.links {
        eprintln!(
            "warning: `{}` is a symbolic link; `r2e gc` does not follow it and leaves it alone",
            root.join(rel).display()
        );
    }
    let mut bytes = found.total;
    let mut old_buckets = Vec::new();
    for old in found.old {
        eprintln!(
            "{} `{}` ({}): a bucket of another version",
            if opts.dry_run {
                "would remove"
            } else {
                "removing"
            },
            old.path,
            human(old.bytes)
        );
        if opts.dry_run || trash.remove(&root.join(&old.path)) {
            bytes = bytes.saturating_sub(old.bytes);
            old_buckets.push(old);
        }
    }
    let mut evicted = Usage::default();
    let mut evicted_in_use = Usage::default();
    let mut kept_in_use = Usage::default();
    let mut units = found.units;
    // Least recently used first; what the last builds use last, and only when asked.
    units.sort_by(|a, b| (a.in_use, a.used, &a.rel).cmp(&(b.in_use, b.used, &b.rel)));
    let mut remaining = units.len() as u64;
    for unit in &units {
        let over = opts.max_size.is_some_and(|max| bytes > max);
        if over
            && (!unit.in_use || opts.all)
            && (opts.dry_run || trash.remove(&root.join(&unit.rel)))
        {
            bytes = bytes.saturating_sub(unit.bytes);
            remaining -= 1;
            evicted.bytes += unit.bytes;
            evicted.entries += 1;
            if unit.in_use {
                evicted_in_use.bytes += unit.bytes;
                evicted_in_use.entries += 1;
            }
        } else if unit.in_use {
            kept_in_use.bytes += unit.bytes;
            kept_in_use.entries += 1;
        }
    }
    let after = if opts.dry_run {
        Usage {
            bytes,
            entries: remaining,
        }
    } else {
        if evicted.entries > 0 {
            remove_empty_folders(root);
        }
        trash.finish();
        let again = walk(root, cache.store(), &in_use)?;
        Usage {
            bytes: again.total,
            entries: again.units.len() as u64,
        }
    };
    let fits = opts.max_size.is_none_or(|max| after.bytes <= max);
    Ok(Report {
        cache: root.to_path_buf(),
        dry_run: opts.dry_run,
        max_size: opts.max_size,
        before,
        after,
        fits,
        old_buckets,
        evicted,
        evicted_in_use,
        kept_in_use,
        outputs,
        outputs_gone,
        leftovers,
        unknown: found.unknown,
        links: found.links,
        not_removed: trash.failed,
    })
}

fn empty_report(root: &Path, opts: &Options) -> Report {
    Report {
        cache: root.to_path_buf(),
        dry_run: opts.dry_run,
        max_size: opts.max_size,
        before: Usage::default(),
        after: Usage::default(),
        fits: true,
        old_buckets: Vec::new(),
        evicted: Usage::default(),
        evicted_in_use: Usage::default(),
        kept_in_use: Usage::default(),
        outputs: Vec::new(),
        outputs_gone: Vec::new(),
        leftovers: 0,
        unknown: Vec::new(),
        links: Vec::new(),
        not_removed: Vec::new(),
    }
}

/// What the last builds use: the union of the `uses` of every output registered in the cache
/// and of `opts.outputs`; the outputs read; the registered outputs that are gone (their
/// registrations are removed, unless `dry_run`).
fn in_use(cache: &Cache, opts: &Options) -> Result<(HashSet<String>, Vec<PathBuf>, Vec<PathBuf>)> {
    let mut outputs = BTreeSet::new();
    let mut gone = Vec::new();
    let roots = cache.path(Bucket::Roots);
    // Read through a symlinked `roots-v1` (what it registers is kept), but not written to.
    let roots_linked = is_link(&roots);
    for e in std::fs::read_dir(&roots).into_iter().flatten().flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        match std::fs::symlink_metadata(&target) {
            Ok(_) => {
                outputs.insert(target);
            }
            // Only a path that does not exist is gone (ENOENT, or ENOTDIR: a folder on its way
            // is a file); any other error may pass (a permission, an unmounted disk, ...).
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                if !opts.dry_run && !roots_linked {
                    let _ = std::fs::remove_file(e.path());
                }
                gone.push(target);
            }
            Err(err) => eprintln!(
                "warning: cannot tell whether the output `{}` still exists ({err}); it stays registered, but what its last build used is not kept by this run",
                target.display()
            ),
        }
    }
    for o in &opts.outputs {
        let abs =
            std::path::absolute(o).map_err(|e| Error::env(format!("{}: {e}", o.display())))?;
        if std::fs::symlink_metadata(&abs).is_ok() {
            outputs.insert(abs);
        }
    }
    let mut uses = HashSet::new();
    for o in &outputs {
        match read_uses(o) {
            Some(list) => uses.extend(list),
            None => eprintln!(
                "warning: the output `{}` does not record what its last build used (none yet, or built by an older r2e); nothing is kept for it: build it again",
                o.display()
            ),
        }
    }
    Ok((uses, outputs.into_iter().collect(), gone))
}

/// Walks the cache: its units, buckets of other versions, what is not r2e's, leftovers, and
/// the total size. A bucket's folder (or `actions/`) that is a symlink is not entered: what it
/// points to is not the cache's. The entries of a bucket of entries are listed by `store`.
fn walk(root: &Path, store: &dyn Store, in_use: &HashSet<String>) -> Result<Walk> {
    let current: Vec<(String, Bucket)> = Bucket::ALL.iter().map(|&b| (b.folder(), b)).collect();
    let mut w = Walk::default();
    let mut seen = HashSet::new();
    w.total += size(root, &mut seen, false);
    let mut top = Vec::new();
    for name in names(root)? {
        if name == "actions" && !is_link(&root.join("actions")) {
            w.total += size(&root.join("actions"), &mut seen, false);
            for inner in names(&root.join("actions"))? {
                top.push(format!("actions/{inner}"));
            }
        } else {
            top.push(name);
        }
    }
    for rel in top {
        let path = root.join(&rel);
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        let known = current.iter().find(|(f, _)| *f == rel);
        if (known.is_some() || rel == "actions" || versioned(name)) && is_link(&path) {
            w.total += size(&path, &mut seen, false);
            w.links.push(rel);
        } else if let Some(&(_, bucket)) = known {
            units_of(root, store, bucket, in_use, &mut seen, &mut w)?;
        } else if matches!(name, "CACHEDIR.TAG" | ".gitignore" | ".lock") && !rel.contains('/') {
            w.total += size(&path, &mut seen, true);
        } else if leftover_owner(name).is_some_and(|pid| !crate::fsutil::pid_alive(pid)) {
            w.total += size(&path, &mut seen, true);
            w.leftovers.push(path);
        } else if versioned(name) {
            let bytes = size(&path, &mut seen, true);
            w.total += bytes;
            w.old.push(Removed { path: rel, bytes });
        } else {
            w.total += size(&path, &mut seen, true);
            w.unknown.push(rel);
        }
    }
    Ok(w)
}

/// The units of one current bucket.
fn units_of(
    root: &Path,
    store: &dyn Store,
    bucket: Bucket,
    in_use: &HashSet<String>,
    seen: &mut HashSet<(u64, u64)>,
    w: &mut Walk,
) -> Result<()> {
    let rel = bucket.folder();
    let path = root.join(&rel);
    // One unit at `rel`, of `bytes`, last used at `used` (a dead process's leftover is none).
    let unit = |w: &mut Walk, rel: String, bytes: u64, used: SystemTime| {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        w.total += bytes;
        if let Some(pid) = leftover_owner(name) {
            if !crate::fsutil::pid_alive(pid) {
                w.leftovers.push(root.join(&rel));
            }
            return;
        }
        w.units.push(Unit {
            in_use: in_use.contains(&rel),
            rel,
            bytes,
            used,
        });
    };
    let on_disk = |w: &mut Walk, rel: String, seen: &mut HashSet<(u64, u64)>| {
        let p = root.join(&rel);
        let bytes = size(&p, seen, true);
        let used = std::fs::symlink_metadata(&p)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        unit(w, rel, bytes, used);
    };
    match bucket.layout() {
        Layout::Kept => w.total += size(&path, seen, true),
        Layout::Whole => on_disk(w, rel, seen),
        Layout::Folders => {
            w.total += size(&path, seen, false);
            for name in names(&path)? {
                on_disk(w, format!("{rel}/{name}"), seen);
            }
        }
        Layout::Entries => {
            let listing = store.list(bucket)?;
            w.total += listing.overhead;
            for item in listing.items {
                let counted = item.linked.is_none_or(|id| seen.insert(id));
                let bytes = if counted { item.bytes } else { 0 };
                unit(w, format!("{rel}/{}", item.name), bytes, item.used);
            }
        }
    }
    Ok(())
}

/// Whether a folder's name is a bucket's (`<name>-v<digits>`).
fn versioned(name: &str) -> bool {
    name.rsplit_once("-v").is_some_and(|(base, v)| {
        !base.is_empty() && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Whether `path` is a symlink (not followed).
fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Removes files and folders of the cache so that none is ever found half removed under its
/// name (a tree, an environment whose `record` survived, a mirror: a build would take it as
/// whole). Each is first renamed, in one step, into `scratch/gc-<pid>/<n>` (or, when that
/// cannot be, next to itself as `.<name>.r2e-tmp.<pid>.gc<n>`), then deleted. A `gc` that fails
/// or is killed midway leaves only names of a dead process, which the next build or `gc`
/// removes (`Cache::remove_leftovers`, [`walk`]'s leftovers).
struct Trash {
    root: PathBuf,
    /// `scratch/gc-<pid>`, once made (`Some(None)`: it cannot be).
    dir: Option<Option<PathBuf>>,
    /// Whether `scratch/` was made for it (then removed with it).
    made_scratch: bool,
    next: u64,
    /// What could not be removed, relative to the root.
    failed: Vec<String>,
}

#[cfg(test)]
thread_local! {
    /// For tests: stop after the rename, as a `gc` killed there would.
    static STOP_AFTER_RENAME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Trash {
    fn new(root: &Path) -> Trash {
        Trash {
            root: root.to_path_buf(),
            dir: None,
            made_scratch: false,
            next: 0,
            failed: Vec::new(),
        }
    }

    fn dir(&mut self) -> Option<PathBuf> {
        let root = &self.root;
        let made_scratch = &mut self.made_scratch;
        self.dir
            .get_or_insert_with(|| {
                let scratch = root.join(Bucket::Scratch.folder());
                if is_link(&scratch) {
                    return None;
                }
                *made_scratch = !scratch.exists();
                let dir = scratch.join(format!("gc-{}", std::process::id()));
                std::fs::create_dir_all(&dir).ok().map(|()| dir)
            })
            .clone()
    }

    /// Removes `path` (a file or a folder, not followed when a symlink). Returns whether it is
    /// gone from under its name; when it cannot even be renamed it stays whole and a warning
    /// says so. Bytes that cannot be deleted once it is renamed are only warned about.
    fn remove(&mut self, path: &Path) -> bool {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(e) => return self.fail(path, e),
        };
        let n = self.next;
        self.next += 1;
        let into_scratch = self.dir().and_then(|dir| {
            let to = dir.join(n.to_string());
            std::fs::rename(path, &to).ok().map(|()| to)
        });
        let moved = match into_scratch {
            Some(to) => to,
            // Another file system (a bucket mounted apart), or no scratch: next to itself.
            None => {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                let to = path.with_file_name(format!(
                    ".{name}{}{}.gc{n}",
                    crate::fsutil::TMP_MARKER,
                    std::process::id()
                ));
                match std::fs::rename(path, &to) {
                    Ok(()) => to,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
                    Err(e) => return self.fail(path, e),
                }
            }
        };
        #[cfg(test)]
        if STOP_AFTER_RENAME.get() {
            return true;
        }
        let deleted = if meta.is_dir() {
            std::fs::remove_dir_all(&moved)
        } else {
            std::fs::remove_file(&moved)
        };
        if let Err(e) = deleted {
            eprintln!(
                "warning: `{}` is out of the cache, but not all of it could be deleted from `{}` ({e}); a later build or `r2e gc` deletes the rest",
                path.display(),
                moved.display()
            );
        }
        true
    }

    fn fail(&mut self, path: &Path, e: std::io::Error) -> bool {
        eprintln!(
            "warning: cannot remove `{}` ({e}); it is left as it was",
            path.display()
        );
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        self.failed.push(rel.to_string_lossy().into_owned());
        false
    }

    /// Removes `scratch/gc-<pid>` when everything moved there was deleted (and `scratch/`,
    /// when it was made for it and is empty).
    fn finish(&mut self) {
        if let Some(Some(dir)) = self.dir.take()
            && std::fs::remove_dir(&dir).is_ok()
            && self.made_scratch
            && let Some(scratch) = dir.parent()
        {
            let _ = std::fs::remove_dir(scratch);
        }
    }
}

/// Removes the shard folders (`<bucket>/<2 hex>`) that removals left empty.
fn remove_empty_folders(root: &Path) {
    for bucket in Bucket::ALL {
        if bucket.layout() == Layout::Entries {
            let dir = root.join(bucket.folder());
            if is_link(&dir) || is_link(&root.join("actions")) {
                continue;
            }
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                // Fails, as wanted, when it is not empty.
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
}

/// Parses a size: bytes (`1000`), or a number (fractions too) with a unit: `K`, `M`, `G`, `T`
/// and `KiB`, `MiB`, `GiB`, `TiB` are powers of 1024 (as `du` and sccache read them), `kB`,
/// `MB`, `GB`, `TB` powers of 1000, `B` bytes. Case is ignored.
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let bad = || {
        format!(
            "`{text}` is not a size: give bytes or a number with a unit, e.g. `500M`, `2G`, `1.5GiB`, `800MB`"
        )
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let factor: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = value * factor;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large a size"));
    }
    Ok(bytes.floor() as u64)
}

/// A size for people: `512 B`, `1.5 KiB`, `12.0 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The report as text (the command's product, for stdout).
pub fn report_text(r: &Report) -> String {
    let mut out = String::new();
    let would = if r.dry_run { "would remove" } else { "removed" };
    let entries = |u: &Usage| format!("{} in {} entries", human(u.bytes), u.entries);
    out.push_str(&format!(
        "cache `{}`: {} before, {} after{}{}\n",
        r.cache.display(),
        entries(&r.before),
        entries(&r.after),
        if r.dry_run { " (estimated)" } else { "" },
        match r.max_size {
            Some(max) => format!(
                "; {} {}",
                if r.fits { "fits in" } else { "does NOT fit in" },
                human(max)
            ),
            None => String::new(),
        }
    ));
    if !r.old_buckets.is_empty() {
        let bytes: u64 = r.old_buckets.iter().map(|o| o.bytes).sum();
        let names: Vec<&str> = r.old_buckets.iter().map(|o| o.path.as_str()).collect();
        out.push_str(&format!(
            "{would} {} bucket(s) of other versions ({}): {}\n",
            r.old_buckets.len(),
            human(bytes),
            names.join(", ")
        ));
    }
    if r.evicted.entries > 0 {
        out.push_str(&format!(
            "{would} {} least recently used entries ({}){}\n",
            r.evicted.entries,
            human(r.evicted.bytes),
            if r.evicted_in_use.entries > 0 {
                format!(
                    ", {} of them used by the last builds",
                    r.evicted_in_use.entries
                )
            } else {
                String::new()
            }
        ));
    }
    if !r.not_removed.is_empty() {
        out.push_str(&format!(
            "could NOT remove {}: {} (see the warnings)\n",
            r.not_removed.len(),
            r.not_removed.join(", ")
        ));
    }
    if r.leftovers > 0 {
        out.push_str(&format!(
            "{would} {} leftover(s) of dead processes\n",
            r.leftovers
        ));
    }
    out.push_str(&format!(
        "kept {} entries ({}) that the last builds of {} output(s) use\n",
        r.kept_in_use.entries,
        human(r.kept_in_use.bytes),
        r.outputs.len()
    ));
    if !r.fits && r.evicted_in_use.entries == 0 && r.kept_in_use.entries > 0 {
        out.push_str("to fit, `--all` also removes what the last builds use\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// `gc` to a size of zero, the entries in use let go with `all`.
    fn gc_to_zero(root: &Path, all: bool) -> Result<Report> {
        gc(
            root,
            &Options {
                max_size: Some(0),
                all,
                ..Options::default()
            },
        )
    }

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("800MB"), Ok(800_000_000));
        assert_eq!(parse_size("10kB"), Ok(10_000));
        assert_eq!(parse_size("10K"), Ok(10_240));
        assert_eq!(parse_size("7B"), Ok(7));
        for bad in ["", "M", "-1G", "2X", "1.2.3M", "1e3", "GiB2", ".", "two"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("is not a size"), "{bad}: {err}");
        }
        assert!(
            parse_size("99999999999T")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
    }

    #[test]
    fn a_symlink_counts_as_itself_not_as_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("big"), vec![1u8; 256 << 10]).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let link_bytes = std::fs::symlink_metadata(&link).unwrap().blocks() * 512;
        assert_eq!(size(&link, &mut HashSet::new(), true), link_bytes);
        assert!(size(&target, &mut HashSet::new(), true) >= 256 << 10);
    }

    #[test]
    fn symlinked_buckets_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let elsewhere = dir.path().join("elsewhere");
        Cache::open(&root).unwrap();
        let llm = Bucket::Llm.folder();
        let envs = Bucket::Envs.folder();
        let check = Bucket::Check.folder();
        // An old entry in a real bucket, and symlinked buckets holding older ones.
        entry(&root, &format!("{check}/cc/cc01"), 8, 100);
        for (link, inside) in [
            (llm.clone(), "aa/aa01"),
            (envs.clone(), "k1/venv/bin/python"),
            ("envs-v1".to_owned(), "k0/record"),
        ] {
            let target = elsewhere.join(link.replace('/', "_"));
            entry(&target, inside, 8, 9000);
            std::os::unix::fs::symlink(&target, root.join(&link)).unwrap();
        }
        let r = gc_to_zero(&root, true).unwrap();
        assert_eq!(r.links, ["actions/llm-v2", "envs-v1", "envs-v4"], "{r:?}");
        assert!(r.old_buckets.is_empty(), "{r:?}");
        assert_eq!(r.evicted.entries, 1, "{r:?}");
        assert!(!root.join(format!("{check}/cc/cc01")).exists());
        for (link, inside) in [
            (&llm, "aa/aa01"),
            (&envs, "k1/venv/bin/python"),
            (&"envs-v1".to_owned(), "k0/record"),
        ] {
            assert!(root.join(link).join(inside).exists(), "{link}/{inside}");
        }
        // A symlinked `actions/` is not entered either.
        std::fs::rename(root.join("actions"), elsewhere.join("actions")).unwrap();
        entry(&elsewhere, &format!("{check}/cc/cc02"), 8, 100);
        std::os::unix::fs::symlink(elsewhere.join("actions"), root.join("actions")).unwrap();
        let r = gc_to_zero(&root, true).unwrap();
        assert_eq!(r.links, ["actions", "envs-v1", "envs-v4"], "{r:?}");
        assert!(elsewhere.join(format!("{check}/cc/cc02")).exists());
        assert!(elsewhere.join("actions/llm-v2").exists());
    }

    #[test]
    fn an_output_that_cannot_be_looked_at_stays_registered() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let cache = Cache::open(&root).unwrap();
        // `loop/out` cannot be resolved (ELOOP), which does not mean that it is gone.
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        let unreadable = dir.path().join("loop/out");
        cache.add_root(&unreadable).unwrap();
        let gone = dir.path().join("gone/out");
        cache.add_root(&gone).unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let under_a_file = file.join("out");
        cache.add_root(&under_a_file).unwrap();
        drop(cache);
        let registered = || {
            let mut targets: Vec<PathBuf> = std::fs::read_dir(root.join(Bucket::Roots.folder()))
                .unwrap()
                .map(|e| std::fs::read_link(e.unwrap().path()).unwrap())
                .collect();
            targets.sort();
            targets
        };
        let r = gc(&root, &Options::default()).unwrap();
        let mut gone_now = r.outputs_gone.clone();
        gone_now.sort();
        assert_eq!(gone_now, [under_a_file, gone], "{r:?}");
        assert!(r.outputs.is_empty(), "{r:?}");
        assert_eq!(registered(), [unreadable]);
    }

    #[test]
    fn what_is_removed_leaves_its_name_before_it_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        Cache::open(&root).unwrap();
        let envs = Bucket::Envs.folder();
        let trees = Bucket::Trees.folder();
        let check = Bucket::Check.folder();
        entry(&root, &format!("{envs}/k1/venv/bin/python"), 8, 1);
        entry(&root, &format!("{envs}/k1/record"), 1, 1);
        entry(&root, &format!("{trees}/c1/m.py"), 8, 1);
        entry(&root, &format!("{check}/cc/cc01"), 8, 1);
        entry(&root, "envs-v1/k0/record", 8, 1);
        // A gc stopped (killed) right after its renames: no half-deleted unit under its name.
        STOP_AFTER_RENAME.set(true);
        let r = gc_to_zero(&root, false);
        STOP_AFTER_RENAME.set(false);
        let r = r.unwrap();
        assert_eq!(r.evicted.entries, 3, "{r:?}");
        assert_eq!(r.old_buckets.len(), 1, "{r:?}");
        for gone in [
            format!("{envs}/k1"),
            format!("{trees}/c1"),
            format!("{check}/cc/cc01"),
            "envs-v1".to_owned(),
        ] {
            assert!(!root.join(&gone).exists(), "{gone}");
        }
        let scratch = root.join(Bucket::Scratch.folder());
        let mine = scratch.join(format!("gc-{}", std::process::id()));
        let mut moved = names(&mine).unwrap();
        moved.sort_by_key(|n| n.parse::<u32>().unwrap());
        assert_eq!(moved, ["0", "1", "2", "3"]);
        assert!(mine.join("0/k0/record").exists(), "the old bucket first");
        // Its process gone, the next build removes what it left.
        let dead = 999_999_999;
        assert!(!crate::fsutil::pid_alive(dead));
        std::fs::rename(&mine, scratch.join(format!("gc-{dead}"))).unwrap();
        drop(Cache::open(&root).unwrap());
        assert_eq!(names(&scratch).unwrap(), Vec::<String>::new());

        // Without a scratch folder of its own (a symlink), a unit is renamed next to itself.
        std::fs::remove_dir(&scratch).unwrap();
        std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &scratch).unwrap();
        entry(&root, &format!("{check}/cc/cc02"), 8, 1);
        STOP_AFTER_RENAME.set(true);
        let r = gc_to_zero(&root, false);
        STOP_AFTER_RENAME.set(false);
        assert_eq!(r.unwrap().evicted.entries, 1);
        let left = names(&root.join(format!("{check}/cc"))).unwrap();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(
            leftover_owner(&left[0]),
            Some(std::process::id()),
            "{left:?}"
        );
        assert_eq!(names(&dir.path().join("elsewhere")).unwrap().len(), 0);
    }

    #[test]
    fn bucket_names_of_other_versions() {
        assert!(versioned("parse-v2"));
        assert!(versioned("llm-refused-v7"));
        assert!(!versioned("uv-cache"));
        assert!(!versioned("-v2"));
        assert!(!versioned("notes-vx"));
    }

    /// A file of `kib` KiB at `rel`, last used `age` seconds ago.
    fn entry(root: &Path, rel: &str, kib: usize, age: u64) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, vec![7u8; kib << 10]).unwrap();
        let when = SystemTime::now() - std::time::Duration::from_secs(age);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn old_buckets_then_the_least_recently_used_go_and_entries_in_use_stay() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let cache = Cache::open(&root).unwrap();
        let parse = Bucket::Parse.folder();
        let check = Bucket::Check.folder();
        entry(&root, &format!("{parse}/aa/aa01"), 8, 5000);
        entry(&root, &format!("{parse}/aa/aa02"), 8, 4000);
        entry(&root, &format!("{check}/bb/bb01"), 8, 3000);
        entry(&root, &format!("{check}/bb/bb02"), 8, 10);
        entry(&root, "actions/parse-v1/cc/cc01", 16, 1);
        entry(&root, "envs-v1/k/venv/bin/python", 16, 1);
        entry(&root, "mine/notes.txt", 1, 1);
        // The oldest entry is what an output's last build used.
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        cache.add_root(&out).unwrap();
        super::super::write_uses(&out, &[format!("{parse}/aa/aa01")]).unwrap();
        drop(cache);

        let opts = |max: u64| Options {
            max_size: Some(max),
            ..Options::default()
        };
        let measure = |root: &Path| {
            walk(root, &super::super::LocalStore::new(root), &HashSet::new())
                .unwrap()
                .total
        };
        let size_of = |rel: &str| size(&root.join(rel), &mut HashSet::new(), true);
        let before = measure(&root);
        // Dry run: nothing moves.
        let dry = gc(
            &root,
            &Options {
                dry_run: true,
                ..opts(0)
            },
        )
        .unwrap();
        assert_eq!(measure(&root), before);
        assert_eq!(dry.old_buckets.len(), 2);
        assert_eq!(dry.evicted.entries, 3, "all but the entry in use");
        let old: u64 = dry.old_buckets.iter().map(|o| o.bytes).sum();

        // Room for all but the two least recently used entries not in use.
        let max = before
            - old
            - size_of(&format!("{parse}/aa/aa02"))
            - size_of(&format!("{check}/bb/bb01"));
        let r = gc(&root, &opts(max)).unwrap();
        assert_eq!(r.before.bytes, before);
        let old: Vec<&str> = r.old_buckets.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(old, ["actions/parse-v1", "envs-v1"]);
        assert_eq!(r.unknown, ["mine"]);
        assert!(r.fits, "{r:?}");
        assert_eq!(r.after.bytes, measure(&root));
        assert!(r.after.bytes <= max);
        assert!(root.join(format!("{parse}/aa/aa01")).exists(), "in use");
        assert!(!root.join(format!("{parse}/aa/aa02")).exists(), "oldest");
        assert!(!root.join(format!("{check}/bb/bb01")).exists());
        assert!(root.join(format!("{check}/bb/bb02")).exists(), "newest");
        assert_eq!(r.evicted.entries, 2);
        assert!(root.join("mine/notes.txt").exists());
        assert_eq!(r.outputs, std::slice::from_ref(&out));

        // Without `--all`, what is in use stays even when it does not fit.
        let r = gc(&root, &opts(0)).unwrap();
        assert!(!r.fits);
        assert!(root.join(format!("{parse}/aa/aa01")).exists());
        assert!(!root.join(&check).read_dir().unwrap().any(|_| true));
        assert_eq!(r.kept_in_use.entries, 1);
        let r = gc(
            &root,
            &Options {
                all: true,
                ..opts(0)
            },
        )
        .unwrap();
        assert_eq!(r.evicted_in_use.entries, 1);
        assert!(!root.join(format!("{parse}/aa/aa01")).exists());
        assert_eq!(r.after.entries, 0);

        // An output that is gone no longer counts.
        std::fs::remove_dir_all(&out).unwrap();
        let r = gc(&root, &Options::default()).unwrap();
        assert_eq!(r.outputs_gone, [out]);
        assert!(r.outputs.is_empty());
    }

    #[test]
    fn an_environment_or_an_installer_cache_is_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let cache = Cache::open(&root).unwrap();
        let envs = Bucket::Envs.folder();
        let uv = Bucket::UvCache.folder();
        for (key, age) in [("k1", 9000), ("k2", 8000), ("k3", 10)] {
            entry(&root, &format!("{envs}/{key}/venv/bin/python"), 8, 1);
            entry(&root, &format!("{envs}/{key}/record"), 1, 1);
            let when = SystemTime::now() - std::time::Duration::from_secs(age);
            std::fs::File::open(root.join(format!("{envs}/{key}")))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        entry(&root, &format!("{uv}/wheels/a.whl"), 8, 1);
        std::fs::File::open(root.join(&uv))
            .unwrap()
            .set_modified(SystemTime::now() - std::time::Duration::from_secs(7000))
            .unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        cache.add_root(&out).unwrap();
        super::super::write_uses(&out, &[format!("{envs}/k1")]).unwrap();
        drop(cache);
        let before = walk(
            &root,
            &super::super::LocalStore::new(&root),
            &HashSet::new(),
        )
        .unwrap();
        assert_eq!(before.units.len(), 4, "{:?}", before.units);
        let k2 = size(&root.join(format!("{envs}/k2")), &mut HashSet::new(), true);
        let r = gc(
            &root,
            &Options {
                max_size: Some(before.total - k2),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(r.evicted.entries, 1, "{r:?}");
        assert!(
            !root.join(format!("{envs}/k2")).exists(),
            "the oldest not in use"
        );
        assert!(root.join(format!("{envs}/k1/record")).exists(), "in use");
        assert!(root.join(format!("{envs}/k3/record")).exists());
        assert!(root.join(&uv).exists());
        let r = gc_to_zero(&root, false).unwrap();
        assert_eq!(r.evicted.entries, 2, "{r:?}");
        assert!(!root.join(&uv).exists(), "a whole installer cache");
        assert!(root.join(format!("{envs}/k1/venv/bin/python")).exists());
    }
}
