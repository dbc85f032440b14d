//! Fixtures built once per test run, across test processes: a built folder (a repository, its
//! pipelines, a cache and outputs) made the first time a test asks for it, under a file lock
//! (against the other test processes: cargo-nextest runs each test in a process of its own),
//! into `CARGO_TARGET_TMPDIR/seed-NAME-KEY`. The key hashes everything the folder depends on:
//! the `r2e` binary and this test binary (each by its size and modification time: a rebuilt
//! binary is a new seed) and the fixture's own inputs (its files, its pipeline text), so a stale
//! seed is never reused; seeds of an older key are removed.
//!
//! A sealed seed is read-only: its files lose their write bits, and its manifest
//! (`.seed`) holds each file's length, modification time and hash. A test that builds or serves
//! from it works on its own copy ([`Copy`], [`copy_into`]): the cache's files hard-linked (the
//! bulk of it: environments), the rest (repository, pipelines, outputs) copied. The links are
//! safe because r2e never writes into an existing file of a cache: an entry verifies itself and
//! is written by an atomic rename, which replaces the copy's link and leaves the seed's file
//! alone. The files r2e does open for writing in place there, its lock files and the traces it
//! appends to, are copied instead. An in-place write all the same fails at once where the write
//! bits count (not root), and is found by [`verify`] where they do not: each copy made checks
//! the seed first, and a [`Copy`] checks it again when dropped.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The name of a seed's manifest, written last: a seed without it is unfinished.
const MANIFEST: &str = ".seed";

/// The sealed seed `name`, made by `make` (given an empty folder to fill) the first time a test
/// of this run asks for it. `inputs` is everything `make` depends on besides the binaries (the
/// fixture's files, the pipeline's text): another input is another seed. What `make` leaves of
/// this process (the port of a model server it starts) must be nothing the tests read.
pub fn seeded(name: &str, inputs: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).unwrap();
    let mut h = blake3::Hasher::new();
    for part in [
        name,
        &identity(Path::new(env!("CARGO_BIN_EXE_r2e"))),
        &identity(&std::env::current_exe().unwrap()),
        inputs,
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let key = &h.finalize().to_hex()[..16];
    let dir = tmp.join(format!("seed-{name}-{key}"));
    let lock = std::fs::File::create(tmp.join(format!("seed-{name}.lock"))).unwrap();
    lock.lock().unwrap();
    if dir.join(MANIFEST).exists() {
        verify(&dir);
        return dir;
    }
    // Older seeds of this name (and an unfinished one of this key): the lock is held, so no
    // process of this run reads them.
    let prefix = format!("seed-{name}-");
    for entry in std::fs::read_dir(tmp).unwrap().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.strip_prefix(&prefix).is_some_and(|k| k.len() == 16) {
            remove(&entry.path());
        }
    }
    std::fs::create_dir_all(&dir).unwrap();
    make(&dir);
    seal(&dir);
    dir
}

/// Size and modification time of a file, the identity of a binary.
fn identity(path: &Path) -> String {
    let m =
        std::fs::metadata(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    format!(
        "{}:{}:{}",
        path.display(),
        m.len(),
        m.mtime_nsec() + m.mtime() * 1_000_000_000
    )
}

/// Removes a folder, seed or copy, if it exists.
pub fn remove(dir: &Path) {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot remove {}: {e}", dir.display()));
    }
}

/// One regular file of a seed, as its manifest records it.
#[derive(PartialEq)]
struct Recorded {
    len: u64,
    mtime: (i64, i64),
    hash: String,
}

fn record(path: &Path, hash: bool) -> Recorded {
    let m = std::fs::symlink_metadata(path).unwrap();
    Recorded {
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        hash: if hash {
            blake3::hash(&std::fs::read(path).unwrap())
                .to_hex()
                .to_string()
        } else {
            String::new()
        },
    }
}

/// The regular files under `dir` (the manifest left out), by path relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_path_buf())
        .filter(|rel| rel != Path::new(MANIFEST))
        .collect()
}

/// Makes `dir`'s files read-only and writes its manifest. Its folders keep their write bits,
/// so that `cargo clean` removes the seed; a file added to it fails [`verify`].
fn seal(dir: &Path) {
    let mut manifest = String::new();
    for rel in files(dir) {
        let path = dir.join(&rel);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !0o222)).unwrap();
        let r = record(&path, true);
        manifest.push_str(&format!(
            "{} {} {} {} {}\n",
            r.len,
            r.mtime.0,
            r.mtime.1,
            r.hash,
            rel.display()
        ));
    }
    std::fs::write(dir.join(MANIFEST), manifest).unwrap();
}

/// Checks that the seed `dir` holds what it was sealed with: the same files, each of the same
/// length and, when its modification time moved (r2e marks a cache entry used when it is old),
/// the same bytes. A file written in place through a copy's link fails here.
pub fn verify(dir: &Path) {
    let text = std::fs::read_to_string(dir.join(MANIFEST)).unwrap();
    let mut sealed: BTreeMap<PathBuf, Recorded> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(5, ' ');
        let mut next = || parts.next().unwrap();
        let (len, secs, nanos, hash) = (next(), next(), next(), next());
        sealed.insert(
            PathBuf::from(next()),
            Recorded {
                len: len.parse().unwrap(),
                mtime: (secs.parse().unwrap(), nanos.parse().unwrap()),
                hash: hash.to_owned(),
            },
        );
    }
    let now = files(dir);
    let added: Vec<&PathBuf> = now.iter().filter(|p| !sealed.contains_key(*p)).collect();
    assert!(
        added.is_empty(),
        "files were added to the read-only seed {}: {added:?}",
        dir.display()
    );
    for (rel, was) in &sealed {
        let path = dir.join(rel);
        assert!(
            path.exists(),
            "{} was removed from the read-only seed",
            path.display()
        );
        let is = record(&path, false);
        if is.len == was.len && is.mtime == was.mtime {
            continue;
        }
        assert!(
            is.len == was.len && record(&path, true).hash == was.hash,
            "{} of the read-only seed was written in place (through a hard link of a copy)",
            path.display()
        );
    }
}

/// Whether a copy gets the seed's file at `rel` as a hard link: a file of a cache (under a
/// top-level folder whose name starts with `cache`), where r2e writes nothing in place, but
/// for its lock files (a cache's `.lock`) and the traces it appends to. Everything else (the
/// repository, the pipelines, the outputs: small, and tests write into them) is copied.
fn linked(rel: &Path) -> bool {
    let top = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    let name = rel.file_name().unwrap().to_string_lossy();
    top.starts_with("cache") && !name.ends_with("lock") && !name.ends_with(".trace.jsonl")
}

/// Fills `to` (made if need be; it must hold none of the seed's paths) with the seed `seed`:
/// its folders made, its cache's files hard-linked and its other files copied (writable), its
/// links made again. The seed is verified first.
pub fn copy_into(seed: &Path, to: &Path) {
    verify(seed);
    for entry in walkdir::WalkDir::new(seed).min_depth(1) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(seed).unwrap();
        if rel == Path::new(MANIFEST) {
            continue;
        }
        let dest = to.join(rel);
        let kind = entry.file_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &dest).unwrap();
        } else if linked(rel) {
            std::fs::hard_link(entry.path(), &dest).unwrap_or_else(|e| {
                panic!(
                    "cannot link {} to {}: {e}",
                    entry.path().display(),
                    dest.display()
                )
            });
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
            let mode = entry.metadata().unwrap().permissions().mode();
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode | 0o200)).unwrap();
        }
    }
}

/// A private copy of a seed in a temporary folder of its own in the target folder, removed when dropped (the seed
/// verified again then: what the test did wrote nothing into it).
pub struct Copy {
    pub dir: tempfile::TempDir,
    seed: PathBuf,
}

impl Copy {
    pub fn of(seed: &Path) -> Copy {
        // Beside the seed: hard links do not cross file systems.
        let dir = tempfile::Builder::new()
            .prefix("copy-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        copy_into(seed, dir.path());
        Copy {
            dir,
            seed: seed.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            verify(&self.seed);
        }
    }
}
