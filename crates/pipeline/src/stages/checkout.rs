//! Stage `checkout`: a repository's `.py` files, each with a content hash and a way to read it.
//!
//! A `path` repo is walked in its working tree; a stat memo (path, size, mtime, ctime, inode →
//! content hash) in the cache spares rehashing unchanged files, as cargo and DVC do. A `git` repo
//! is mirrored into the cache, its revision resolved to a commit (once per build), and its files
//! listed from the commit's tree; a git blob id is already a content hash. A `pypi` release is
//! unpacked into the cache (`stages::pypi`) and walked as a folder; its identity is its
//! archive's `sha256:<hex>`. Hidden folders (names starting with `.`) below the repository root
//! are skipped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::db::ReadError;
use r2e_core::cache::{Bucket, Cache};
use r2e_core::config::{RepoConfig, RepoSource};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;

/// Files at a repository's root that declare its dependencies.
pub const DECLARATIONS: &[&str] = &[
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "requirements/base.txt",
];

/// Requirement files of a test suite, at the repository's root or in its usual folders.
pub const TEST_FILES: &[&str] = &[
    "requirements-test.txt",
    "requirements-tests.txt",
    "requirements-testing.txt",
    "requirements_test.txt",
    "requirements_tests.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "tests-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "requirements/dev.txt",
    "tests/requirements.txt",
    "tox.ini",
];

/// Whether a repository's file is one of its tests: a `.py` file under a `test`, `tests` or
/// `testing` folder, or named `test_*.py` or `*_test.py`; never a `conftest.py` (pytest reads
/// those itself) or an `__init__.py`.
pub fn is_test_file(path: &str) -> bool {
    let Some(stem) = path.strip_suffix(".py") else {
        return false;
    };
    let mut parts: Vec<&str> = stem.split('/').collect();
    let name = parts.pop().unwrap_or_default();
    if name == "conftest" || name == "__init__" {
        return false;
    }
    name.starts_with("test_")
        || name.ends_with("_test")
        || parts
            .iter()
            .any(|p| matches!(*p, "test" | "tests" | "testing"))
}

/// One source file of a repository.
#[derive(Clone, Debug)]
pub struct SourceEntry {
    /// Relative to the repository root, `/`-separated.
    pub path: String,
    pub hash: Hash,
}

/// A checked-out repository.
pub struct Checkout {
    pub name: String,
    /// The commit sha for a git repo; `tree:<blake3>` of the file list for a folder;
    /// `sha256:<hex>` of the archive for a `pypi` release.
    pub identity: String,
    /// A hash of exactly the files read (for a git repo, its commit): what decides a rebuild.
    pub tree: String,
    /// For a git repo: the revision as written, when it differs from the commit.
    pub rev: Option<String>,
    pub files: Vec<SourceEntry>,
    /// Files that could not be read, with the reason.
    pub unreadable: Vec<(String, String)>,
    /// How many files had to be hashed afresh.
    pub hashed: usize,
    /// Folders a candidate's process must not see, relative to the root: other copies of the
    /// code (compiled caches, version control, build outputs, local environments).
    pub masked: Vec<String>,
    reader: Reader,
}

enum Reader {
    Dir(PathBuf),
    /// The `cat-file` process, the mirror, blob ids by path, and the paths that are symlinks.
    Git(
        Mutex<Option<CatFile>>,
        PathBuf,
        HashMap<String, String>,
        std::collections::HashSet<String>,
    ),
}

/// Reads a file of a folder only when it is a regular file inside the folder: a symlink (or a
/// path through one) that leads outside is refused. `Ok(None)` when there is no such file.
pub fn read_inside(root: &Path, rel: &str) -> std::result::Result<Option<Vec<u8>>, String> {
    let path = root.join(rel);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let (Ok(real_root), Ok(real)) = (std::fs::canonicalize(root), std::fs::canonicalize(&path))
    else {
        return Err(format!("`{rel}` is a symlink that leads nowhere; not read"));
    };
    if !real.starts_with(&real_root) {
        return Err(format!(
            "`{rel}` is a symlink that leads outside the repository; not read"
        ));
    }
    if !real.is_file() {
        return Err(format!("`{rel}` is not a regular file; not read"));
    }
    std::fs::read(&real)
        .map(Some)
        .map_err(|e| format!("`{rel}` cannot be read: {e}"))
}

impl Checkout {
    /// The bytes of the file at `path` (as listed in `files`).
    pub fn read(&self, path: &str) -> Result<Vec<u8>> {
        match &self.reader {
            Reader::Dir(root) => Ok(fs_err::read(root.join(path))?),
            Reader::Git(batch, git_dir, oids, _) => {
                let oid = oids
                    .get(path)
                    .ok_or_else(|| Error::Internal(format!("`{path}` is not in the tree")))?;
                let mut guard = batch.lock().unwrap_or_else(|e| e.into_inner());
                if guard.is_none() {
                    *guard = Some(CatFile::spawn(git_dir)?);
                }
                guard
                    .as_mut()
                    .expect("spawned")
                    .read(oid)?
                    .ok_or_else(|| Error::env(format!("git: blob `{oid}` is missing")))
            }
        }
    }

    /// The bytes of the file at `path`, checked against the content hash it was listed under:
    /// a file that changed since the walk is refused, never read as the listed content.
    pub fn read_verified(&self, path: &str, hash: Hash) -> std::result::Result<Vec<u8>, ReadError> {
        let bytes = self.read(path).map_err(|e| ReadError::Io(e.to_string()))?;
        // A git blob is addressed by its id, which git checks; a working tree file by its bytes.
        if matches!(self.reader, Reader::Dir(_)) && Hash::of_bytes(&bytes) != hash {
            return Err(ReadError::Changed(format!("{}:{path}", self.name)));
        }
        Ok(bytes)
    }

    /// A file of the repository that is not a source file (a dependency declaration), by its
    /// relative path: `Ok(None)` when there is none, `Err` with the reason when it is refused (a
    /// symlink: it could lead anywhere on this machine).
    pub fn read_declaration(&self, path: &str) -> std::result::Result<Option<Vec<u8>>, String> {
        match &self.reader {
            Reader::Dir(root) => read_inside(root, path),
            Reader::Git(batch, git_dir, _, symlinks) => {
                if symlinks.contains(path) {
                    return Err(format!("`{path}` is a symlink; not read"));
                }
                let mut guard = batch.lock().unwrap_or_else(|e| e.into_inner());
                if guard.is_none() {
                    *guard = Some(CatFile::spawn(git_dir).map_err(|e| e.to_string())?);
                }
                let blob = guard
                    .as_mut()
                    .expect("spawned")
                    .read(&format!("{}:{path}", self.identity))
                    .map_err(|e| e.to_string())?;
                Ok(blob)
            }
        }
    }

    /// Where the history of the checkout's commit (its `identity`) is: the mirror of a `git`
    /// repo, or a `path` repo that is a clean git work tree; `None` for a folder without one
    /// (`stages::dating`).
    pub fn history(&self) -> Option<PathBuf> {
        match &self.reader {
            Reader::Git(_, git_dir, _, _) => Some(git_dir.clone()),
            // A folder is dated only when its identity is the commit of its own `.git` (not,
            // say, an unpacked release's hash, nor a folder inside another repository).
            Reader::Dir(root) => {
                let sha = matches!(self.identity.len(), 40 | 64)
                    && self.identity.bytes().all(|b| b.is_ascii_hexdigit());
                (sha && root.join(".git").exists()).then(|| root.clone())
            }
        }
    }

    /// The folder [`Checkout::materialize`] gives, when it exists already (nothing checked out:
    /// for `r2e status`).
    pub fn root_if_present(&self, cache: &Cache) -> Option<PathBuf> {
        let dir = match &self.reader {
            Reader::Dir(root) => root.clone(),
            Reader::Git(..) => cache.path(Bucket::Trees).join(&self.identity),
        };
        dir.is_dir().then_some(dir)
    }

    /// A folder holding the repository's files, to run its code from: the folder itself for a
    /// `path` repo; for a `git` repo, its commit checked out once into the cache.
    pub fn materialize(&self, cache: &Cache) -> Result<PathBuf> {
        match &self.reader {
            Reader::Dir(root) => Ok(root.clone()),
            Reader::Git(_, git_dir, _, _) => {
                let dir = cache.dir(Bucket::Trees)?.join(&self.identity);
                if dir.is_dir() {
                    cache.note_use(&dir);
                    return Ok(dir);
                }
                // Candidates are prepared in parallel: one thread of a process checks out at a
                // time (they share the scratch names), and each checkout has its own index, so
                // that neither threads nor another build fight over the repository's.
                static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
                let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
                if dir.is_dir() {
                    cache.note_use(&dir);
                    return Ok(dir);
                }
                let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
                let index = dir.with_extension(format!("index{}", std::process::id()));
                let _ = fs_err::remove_dir_all(&tmp);
                let _ = fs_err::remove_file(&index);
                fs_err::create_dir_all(&tmp)?;
                let out = Command::new("git")
                    .arg("--git-dir")
                    .arg(git_dir)
                    .arg("--work-tree")
                    .arg(&tmp)
                    .args(["checkout", "-f", &self.identity, "--", "."])
                    .env("GIT_INDEX_FILE", &index)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| Error::env(format!("cannot run `git`: {e}")))?;
                let _ = fs_err::remove_file(&index);
                if !out.status.success() {
                    let _ = fs_err::remove_dir_all(&tmp);
                    return Err(Error::env(format!(
                        "repo `{}`: cannot check out {}: {}",
                        self.name,
                        self.identity,
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
                if let Err(e) = fs_err::rename(&tmp, &dir) {
                    let _ = fs_err::remove_dir_all(&tmp);
                    // Another build checked the same commit out meanwhile.
                    if !dir.is_dir() {
                        return Err(e.into());
                    }
                }
                cache.note_use(&dir);
                Ok(dir)
            }
        }
    }
}

/// Checks out one repository.
pub fn checkout(repo: &RepoConfig, cache: &Cache) -> Result<Checkout> {
    match &repo.source {
        RepoSource::Path(root) => walk(repo, root, cache),
        RepoSource::Git { url, rev } => git(repo, url, rev, cache),
        RepoSource::Pypi(release) => {
            // The unpacked release is read as a folder; it is named by its archive's hash.
            let (root, sha256) = super::pypi::fetch(repo, release, cache)?;
            let mut checkout = walk(repo, &root, cache)?;
            checkout.identity = format!("sha256:{sha256}");
            checkout.tree = checkout.identity.clone();
            Ok(checkout)
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct StatMemo {
    entries: HashMap<String, (u64, i64, i64, u64, Hash)>,
}

fn walk(repo: &RepoConfig, root: &Path, cache: &Cache) -> Result<Checkout> {
    // The memo is this machine's: keyed by the folder's absolute path (never an action key).
    let memo_key = Hash::of_bytes(root.as_os_str().as_encoded_bytes());
    let old: StatMemo = cache.get(Bucket::Stat, memo_key).unwrap_or_default();
    let mut memo = StatMemo::default();
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    let mut hashed = 0;
    let mut masked = copies_at_root(root);
    let walker = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().as_encoded_bytes().starts_with(b"."));
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let path = e
                    .path()
                    .and_then(|p| p.strip_prefix(root).ok())
                    .map(|p| p.to_string_lossy().into_owned());
                unreadable.push((path.unwrap_or_default(), e.to_string()));
                continue;
            }
        };
        if entry.file_type().is_dir() && entry.file_name() == "__pycache__" {
            if let Ok(rel) = entry.path().strip_prefix(root) {
                masked.push(rel.to_string_lossy().into_owned());
            }
            continue;
        }
        if !entry.file_type().is_file() || !entry.file_name().as_encoded_bytes().ends_with(b".py") {
            continue;
        }
        let Some(rel) = entry
            .path()
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
        else {
            unreadable.push((
                entry.path().to_string_lossy().into_owned(),
                "the path is not valid UTF-8".into(),
            ));
            continue;
        };
        let rel = rel.replace('\\', "/");
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) => {
                unreadable.push((rel, e.to_string()));
                continue;
            }
        };
        let stat = (
            meta.len(),
            meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            meta.ino(),
        );
        let hash = match old.entries.get(&rel) {
            Some(&(size, mtime, ctime, ino, hash)) if (size, mtime, ctime, ino) == stat => hash,
            _ => match std::fs::read(entry.path()) {
                Ok(bytes) => {
                    hashed += 1;
                    Hash::of_bytes(&bytes)
                }
                Err(e) => {
                    unreadable.push((rel, format!("cannot read: {e}")));
                    continue;
                }
            },
        };
        memo.entries
            .insert(rel.clone(), (stat.0, stat.1, stat.2, stat.3, hash));
        files.push(SourceEntry { path: rel, hash });
    }
    if hashed > 0 || memo.entries.len() != old.entries.len() {
        cache.put(Bucket::Stat, memo_key, &memo)?;
    }
    let mut tree = blake3::Hasher::new();
    for f in &files {
        tree.update(f.path.as_bytes());
        tree.update(&[0]);
        tree.update(&f.hash.0);
    }
    // The dependency declarations are part of the repository too (the `env` stage reads them,
    // and those of its test suite for the capture's environment).
    for name in DECLARATIONS.iter().chain(TEST_FILES) {
        if let Ok(Some(bytes)) = read_inside(root, name) {
            tree.update(name.as_bytes());
            tree.update(&[0]);
            tree.update(blake3::hash(&bytes).as_bytes());
        }
    }
    // A clean git checkout is identified by its commit.
    let tree = format!("tree:{}", tree.finalize().to_hex());
    let identity = clean_git_commit(root).unwrap_or_else(|| tree.clone());
    Ok(Checkout {
        name: repo.name.clone(),
        identity,
        tree,
        rev: None,
        files,
        unreadable,
        hashed,
        masked,
        reader: Reader::Dir(root.to_path_buf()),
    })
}

/// Folders at a repository's root that hold other copies of its code: hidden folders (version
/// control, local environments), build outputs, distributions. Not an `.egg-info` folder: it
/// holds the project's metadata, not its code, and code that reads its own version at import
/// (`importlib.metadata.version`) must find it in a candidate's process as in the reference's.
fn copies_at_root(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || matches!(n.as_str(), "build" | "dist"))
        .collect();
    out.sort();
    out
}

/// The commit of a folder that is the root of a git checkout with no changes, untracked files
/// included.
fn clean_git_commit(root: &Path) -> Option<String> {
    if !root.join(".git").exists() {
        return None;
    }
    let status = run_git(
        &["status", "--porcelain", "--untracked-files=normal"],
        Some(root),
    )
    .ok()?;
    if !status.status.success() || !status.stdout.is_empty() {
        return None;
    }
    let head = run_git(&["rev-parse", "--verify", "HEAD"], Some(root)).ok()?;
    head.status
        .success()
        .then(|| String::from_utf8_lossy(&head.stdout).trim().to_owned())
}

pub(crate) fn run_git(args: &[&str], dir: Option<&Path>) -> Result<std::process::Output> {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    cmd.output()
        .map_err(|e| Error::env(format!("cannot run `git`: {e} (is git installed?)")))
}

fn git(repo: &RepoConfig, url: &str, rev: &str, cache: &Cache) -> Result<Checkout> {
    let mirror = cache
        .dir(Bucket::Git)?
        .join(format!("{}.git", Hash::of_bytes(url.as_bytes()).to_hex()));
    if !mirror.join("HEAD").exists() {
        let tmp = mirror.with_extension(format!("tmp{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&tmp);
        let out = run_git(
            // Commits and trees, no file contents: a blob is fetched when it is first read (a
            // checkout's all at once, `fetch_missing_blobs`), and the history stays whole for
            // what dates code. A server that cannot filter sends everything, as does a path.
            &[
                "clone",
                "--quiet",
                "--mirror",
                "--filter=blob:none",
                // Neither the URL nor the folder is ever read as an option.
                "--",
                url,
                &tmp.to_string_lossy(),
            ],
            None,
        )?;
        if !out.status.success() {
            let _ = fs_err::remove_dir_all(&tmp);
            return Err(Error::input(format!(
                "repo `{}`: cannot clone `{url}`: {}",
                repo.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        fs_err::rename(&tmp, &mirror)?;
    }
    cache.note_use(&mirror);
    let resolve = |r: &str| -> Result<Option<String>> {
        let out = run_git(
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{r}^{{commit}}"),
            ],
            Some(&mirror),
        )?;
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()))
    };
    let is_full_sha = rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit());
    // A full commit sha that is present needs no fetch; a branch or tag is fetched once per build.
    let mut commit = if is_full_sha { resolve(rev)? } else { None };
    if commit.is_none() {
        let out = run_git(
            &["fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"],
            Some(&mirror),
        )?;
        if !out.status.success() {
            eprintln!(
                "warning: repo `{}`: cannot fetch `{url}`; using the mirror as it is: {}",
                repo.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        commit = resolve(rev)?;
        // A pinned commit no branch reaches any more (a branch force-pushed since a lock was
        // curated): asked for by its id, which GitHub and servers allowing it still give (a
        // partial mirror has asked already: a missing object is fetched lazily, by id).
        if commit.is_none() && is_full_sha {
            let out = run_git(&["fetch", "--quiet", "--", "origin", rev], Some(&mirror))?;
            if out.status.success() {
                commit = resolve(rev)?;
            }
        }
    }
    let commit = commit.ok_or_else(|| {
        Error::input(format!(
            "repo `{}`: git rev `{rev}` does not exist in `{url}`",
            repo.name
        ))
    })?;
    let out = run_git(
        &["ls-tree", "-r", "-z", "--full-tree", &commit],
        Some(&mirror),
    )?;
    if !out.status.success() {
        return Err(Error::env(format!(
            "repo `{}`: git ls-tree failed: {}",
            repo.name,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut files = Vec::new();
    let mut oids = HashMap::new();
    let mut symlinks = std::collections::HashSet::new();
    let mut blobs = Vec::new();
    for record in out.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let record = String::from_utf8_lossy(record);
        let Some((meta, path)) = record.split_once('\t') else {
            continue;
        };
        let mut parts = meta.split(' ');
        let (mode, kind, oid) = (parts.next(), parts.next(), parts.next().unwrap_or_default());
        if kind == Some("blob") {
            blobs.push(oid.to_owned());
        }
        // A symlink's blob is its target's path: never a source file or a declaration.
        if mode == Some("120000") {
            symlinks.insert(path.to_owned());
            continue;
        }
        if kind != Some("blob")
            || !path.ends_with(".py")
            || path.split('/').any(|seg| seg.starts_with('.'))
        {
            continue;
        }
        files.push(SourceEntry {
            path: path.to_owned(),
            hash: Hash::of_bytes(format!("git-blob {oid}").as_bytes()),
        });
        oids.insert(path.to_owned(), oid.to_owned());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    fetch_missing_blobs(&format!("repo `{}` (`{url}`)", repo.name), &mirror, &blobs)?;
    Ok(Checkout {
        name: repo.name.clone(),
        identity: commit.clone(),
        tree: commit.clone(),
        rev: (rev != commit).then(|| rev.to_owned()),
        files,
        unreadable: Vec::new(),
        hashed: 0,
        masked: Vec::new(),
        reader: Reader::Git(Mutex::new(None), mirror, oids, symlinks),
    })
}

/// In a partial mirror (cloned with `--filter=blob:none`), fetches the blobs of a commit's tree
/// that are not there yet in one request, as a checkout of a partial clone does, rather than
/// one request per blob as they are read. A failure is a warning: each blob is then fetched
/// when it is read.
pub(crate) fn fetch_missing_blobs(what: &str, mirror: &Path, blobs: &[String]) -> Result<()> {
    let promisor = run_git(&["config", "--get", "remote.origin.promisor"], Some(mirror))?;
    if blobs.is_empty() || String::from_utf8_lossy(&promisor.stdout).trim() != "true" {
        return Ok(());
    }
    let with_stdin =
        |args: &[&str], input: String, no_lazy: bool| -> Result<std::process::Output> {
            let mut cmd = Command::new("git");
            cmd.arg("-C")
                .arg(mirror)
                .args(args)
                .env("GIT_TERMINAL_PROMPT", "0")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if no_lazy {
                cmd.env("GIT_NO_LAZY_FETCH", "1");
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| Error::env(format!("cannot run `git`: {e} (is git installed?)")))?;
            let mut stdin = child.stdin.take().expect("piped");
            let writer = std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(input.as_bytes());
            });
            let out = child.wait_with_output()?;
            let _ = writer.join();
            Ok(out)
        };
    // Which are missing, asked without fetching them (`GIT_NO_LAZY_FETCH`, git 2.44 and
    // later). An older git would fetch each one it is asked about, one request apiece: it is
    // asked nothing, and every blob is fetched in the one request (those already here again).
    let check;
    let missing: Vec<&str> = if git_ignores_lazy_fetch_switch() {
        blobs.iter().map(String::as_str).collect()
    } else {
        check = with_stdin(
            &["cat-file", "--batch-check"],
            blobs.join("\n") + "\n",
            true,
        )?;
        std::str::from_utf8(&check.stdout)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_suffix(" missing"))
            .collect()
    };
    if missing.is_empty() {
        return Ok(());
    }
    let out = with_stdin(
        &[
            "-c",
            "fetch.negotiationAlgorithm=noop",
            "fetch",
            "--quiet",
            "origin",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--filter=blob:none",
            "--stdin",
        ],
        missing.join("\n") + "\n",
        false,
    )?;
    if !out.status.success() {
        eprintln!(
            "warning: {what}: cannot fetch {} files at once; each is fetched when read: {}",
            missing.len(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Whether this machine's git is older than 2.44, which added `GIT_NO_LAZY_FETCH`: asking it
/// whether a blob of a partial clone is there fetches the blob.
fn git_ignores_lazy_fetch_switch() -> bool {
    static OLD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OLD.get_or_init(|| {
        let out = Command::new("git").arg("--version").output();
        let text = out
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        git_version_below(&text, (2, 44))
    })
}

/// Whether `git --version`'s answer (`git version 2.47.3`, or with a vendor's suffix) names a
/// version below `(major, minor)`; an answer that names none counts as below.
fn git_version_below(answer: &str, (major, minor): (u32, u32)) -> bool {
    let version = answer.trim().trim_start_matches("git version ");
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    match (
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().and_then(|p| p.parse::<u32>().ok()),
    ) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => true,
    }
}

/// A long-lived `git cat-file --batch` process.
pub(crate) struct CatFile {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    pub(crate) fn spawn(git_dir: &Path) -> Result<CatFile> {
        let mut child = Command::new("git")
            .arg("-C")
            .arg(git_dir)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::env(format!("cannot run `git cat-file`: {e}")))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(CatFile {
            child,
            stdin,
            stdout,
        })
    }

    /// The object named `oid` (or `rev:path`), or `None` when it does not exist.
    pub(crate) fn read(&mut self, oid: &str) -> Result<Option<Vec<u8>>> {
        let fail = |e: std::io::Error| Error::env(format!("git cat-file: {e}"));
        writeln!(self.stdin, "{oid}").map_err(fail)?;
        self.stdin.flush().map_err(fail)?;
        let mut header = String::new();
        self.stdout.read_line(&mut header).map_err(fail)?;
        if header.trim_end().ends_with(" missing") || header.trim_end().ends_with(" ambiguous") {
            return Ok(None);
        }
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::env(format!(
                    "git cat-file: unexpected answer `{}`",
                    header.trim()
                ))
            })?;
        let mut buf = vec![0; size + 1];
        self.stdout.read_exact(&mut buf).map_err(fail)?;
        buf.pop();
        Ok(Some(buf))
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_versions_are_compared_by_major_and_minor() {
        assert!(!git_version_below("git version 2.47.3\n", (2, 44)));
        assert!(!git_version_below("git version 2.44.0", (2, 44)));
        assert!(git_version_below("git version 2.39.5", (2, 44)));
        assert!(git_version_below(
            "git version 2.34.1 (Apple Git-1)",
            (2, 44)
        ));
        assert!(!git_version_below("git version 3.0.0.windows.1", (2, 44)));
        assert!(git_version_below("not git", (2, 44)));
    }

    #[test]
    fn a_url_or_rev_is_never_read_by_git_as_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(&dir.path().join("cache")).unwrap();
        let marker = dir.path().join("ran");
        let repo = RepoConfig {
            name: "evil".into(),
            source: RepoSource::Git {
                url: format!("--upload-pack=touch {}", marker.display()),
                rev: "main".into(),
            },
            scope: Default::default(),
        };
        let RepoSource::Git { url, rev } = &repo.source else {
            unreachable!()
        };
        let Err(e) = git(&repo, url, rev, &cache) else {
            panic!("a URL that is an option cloned")
        };
        assert!(e.to_string().contains("cannot clone"), "{e}");
        assert!(!marker.exists(), "git ran the URL as an option");

        // A mirror that exists: a rev that looks like an option is a rev that does not exist.
        let origin = dir.path().join("origin");
        let run = |args: &[&str], at: &Path| {
            let out = Command::new("git")
                .args(args)
                .current_dir(at)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        fs_err::create_dir_all(&origin).unwrap();
        run(&["init", "-q"], &origin);
        run(
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
            &origin,
        );
        let url = origin.display().to_string();
        let Err(e) = git(&repo, &url, "--output=/tmp/x", &cache) else {
            panic!("a rev that is an option resolved")
        };
        assert!(e.to_string().contains("does not exist"), "{e}");
    }
}
