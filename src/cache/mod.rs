//! The on-disk cache under `cache/`: content-addressed action results and the machine-local
//! state of builds (environments, git mirrors, checked-out trees, stat memos, tools, scratch).
//!
//! Every folder of the cache is a [`Bucket`], named with its version (`actions/validate-v4`,
//! `envs-v3`), as uv's `CacheBucket` does: a path into the cache is never spelled out anywhere
//! else. An action is looked up by its key struct ([`ActionKey`], defined in `keys.rs`): its
//! bucket and the blake3 hash of its canonical form. Entries verify themselves ([`entry`]): a
//! swapped, truncated or bit-flipped entry is a miss, with a warning naming the file, and is
//! recomputed. Writes are atomic, and a build holds an exclusive lock on `cache/.lock`, so
//! concurrent builds on one cache take turns. Callers store only results that are final: a
//! transient failure is never put here.

pub mod entry;

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::fsutil::write_atomic_with;
pub use crate::fsutil::{write_atomic, write_if_changed};
use crate::hash::Hash;

/// Every folder of the cache, with its version. Bump a bucket's version whenever the inputs of
/// its key or the format of its entries change (see `docs/caching.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// Action: a module summary per source content (`keys::ParseKey`).
    Parse,
    /// Action: the built-in explorer's harness for a function (`keys::GenerateKey`).
    Generate,
    /// Action: the raw runs of a harness's validation (`keys::ValidateKey`).
    Validate,
    /// Action: a model's answer to a request (`keys::LlmKey`).
    Llm,
    /// Action: a request whose prompt the server refused as longer than the model's context
    /// window (`keys::RefusalKey`).
    Refusal,
    /// Action: a candidate's raw run against an instance's harness (`keys::CheckKey`).
    Check,
    /// Action: the candidate taken out of a model's answer (`keys::AnswerKey`).
    Answer,
    /// Environments: `<key>/venv` and its sealed record (`keys::EnvKey`).
    Envs,
    /// Commits of git repositories checked out to run code from.
    Trees,
    /// Git mirrors, by URL.
    Git,
    /// Stat memos of path repositories (path, size, mtime, ctime, inode → content hash).
    Stat,
    /// Tools r2e installs for itself (`uv`).
    Tools,
    /// The installers' own download caches.
    UvCache,
    PipCache,
    /// Scratch folders of running jobs (removed when the job ends, or by the next build when
    /// its process died).
    Scratch,
}

impl Bucket {
    pub const ALL: [Bucket; 15] = [
        Bucket::Parse,
        Bucket::Generate,
        Bucket::Validate,
        Bucket::Llm,
        Bucket::Refusal,
        Bucket::Check,
        Bucket::Answer,
        Bucket::Envs,
        Bucket::Trees,
        Bucket::Git,
        Bucket::Stat,
        Bucket::Tools,
        Bucket::UvCache,
        Bucket::PipCache,
        Bucket::Scratch,
    ];

    /// The bucket's name and version (`None`: the folder is managed by another tool, or holds
    /// nothing that outlives a build).
    pub const fn name_version(self) -> (&'static str, Option<u32>) {
        match self {
            Bucket::Parse => ("parse", Some(3)),
            Bucket::Generate => ("generate", Some(2)),
            Bucket::Validate => ("validate", Some(7)),
            Bucket::Llm => ("llm", Some(2)),
            Bucket::Refusal => ("llm-refused", Some(1)),
            Bucket::Check => ("check", Some(2)),
            Bucket::Answer => ("answer", Some(1)),
            Bucket::Envs => ("envs", Some(3)),
            Bucket::Trees => ("trees", Some(1)),
            Bucket::Git => ("git", Some(1)),
            Bucket::Stat => ("stat", Some(2)),
            Bucket::Tools => ("tools", Some(1)),
            Bucket::UvCache => ("uv-cache", None),
            Bucket::PipCache => ("pip-cache", None),
            Bucket::Scratch => ("scratch", None),
        }
    }

    /// Whether the bucket holds action results (under `actions/`).
    pub const fn is_action(self) -> bool {
        matches!(
            self,
            Bucket::Parse
                | Bucket::Generate
                | Bucket::Validate
                | Bucket::Llm
                | Bucket::Refusal
                | Bucket::Check
                | Bucket::Answer
        )
    }

    /// The bucket's folder, relative to the cache root: `actions/validate-v4`, `envs-v3`.
    pub fn folder(self) -> String {
        let (name, version) = self.name_version();
        let base = match version {
            Some(v) => format!("{name}-v{v}"),
            None => name.to_owned(),
        };
        if self.is_action() {
            format!("actions/{base}")
        } else {
            base
        }
    }
}

/// The key of an action: a serializable struct holding every input that shapes its result, in
/// one bucket. Its hash is blake3 over the bucket's folder and the key's canonical JSON form.
pub trait ActionKey: Serialize {
    const BUCKET: Bucket;

    fn hash(&self) -> Hash {
        Hash::of_key(&(Self::BUCKET.folder(), self))
    }
}

/// An open cache, locked for this process.
pub struct Cache {
    root: PathBuf,
    _lock: File,
}

impl Cache {
    /// Opens (creating if needed) the cache at `root` and takes its lock, waiting for another
    /// build that holds it.
    pub fn open(root: &Path) -> Result<Cache> {
        fs_err::create_dir_all(root)?;
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            write_atomic(
                &tag,
                b"Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by r2e.\n",
            )?;
            write_atomic(&root.join(".gitignore"), b"*\n")?;
        }
        let lock = lock_file(&root.join(".lock"), || {
            eprintln!(
                "waiting for the lock on `{}`: another build is using this cache",
                root.display()
            )
        })?;
        let cache = Cache {
            root: root.to_path_buf(),
            _lock: lock,
        };
        cache.remove_leftovers();
        Ok(cache)
    }

    /// Removes what builds that died left behind (they cannot have finished it): scratch
    /// folders of their jobs, environments and tools half built, temporary files. Returns how
    /// many it removed.
    pub fn remove_leftovers(&self) -> usize {
        let mut removed = 0;
        for bucket in [Bucket::Scratch, Bucket::Envs, Bucket::Tools] {
            let Ok(entries) = std::fs::read_dir(self.path(bucket)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = leftover_owner(&name) else {
                    continue;
                };
                if crate::fsutil::pid_alive(pid) {
                    continue;
                }
                let gone = if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(e.path())
                } else {
                    std::fs::remove_file(e.path())
                };
                removed += usize::from(gone.is_ok());
            }
        }
        removed
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A bucket's folder, without creating it.
    pub fn path(&self, bucket: Bucket) -> PathBuf {
        self.root.join(bucket.folder())
    }

    /// A bucket's folder, created if needed.
    pub fn dir(&self, bucket: Bucket) -> Result<PathBuf> {
        let dir = self.path(bucket);
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Where the entry of `key` in `bucket` lives: `<bucket>/<2 hex>/<hex>`.
    pub fn entry_path(&self, bucket: Bucket, key: Hash) -> PathBuf {
        let hex = key.to_hex();
        self.path(bucket).join(&hex[..2]).join(hex)
    }

    /// Whether an entry exists, without reading it.
    pub fn contains(&self, bucket: Bucket, key: Hash) -> bool {
        self.entry_path(bucket, key).exists()
    }

    /// The stored value, or `None` on a miss. An entry that does not verify (another key's
    /// entry, a torn or flipped one) is a miss: it is reported on stderr, naming the file, and
    /// removed so that the recomputed value takes its place.
    pub fn get<T: DeserializeOwned>(&self, bucket: Bucket, key: Hash) -> Option<T> {
        let path = self.entry_path(bucket, key);
        let bytes = std::fs::read(&path).ok()?;
        match entry::unseal(&bucket.folder(), key, &bytes) {
            Ok(value) => Some(value),
            Err(why) => {
                eprintln!(
                    "warning: cache entry `{}` is damaged ({why}); it is recomputed",
                    path.display()
                );
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores a final result.
    pub fn put<T: Serialize + ?Sized>(&self, bucket: Bucket, key: Hash, value: &T) -> Result<()> {
        let bytes = entry::seal(&bucket.folder(), key, value);
        let path = self.entry_path(bucket, key);
        let parent = path.parent().expect("entries have a parent");
        if !parent.is_dir() {
            fs_err::create_dir_all(parent)?;
        }
        // Entries verify themselves instead of an fsync: a torn write after a crash is a miss.
        write_atomic_with(&path, &bytes, false)
    }

    /// The stored result of an action.
    pub fn get_action<K: ActionKey, T: DeserializeOwned>(&self, key: &K) -> Option<T> {
        self.get(K::BUCKET, key.hash())
    }

    /// Stores the final result of an action.
    pub fn put_action<K: ActionKey, T: Serialize + ?Sized>(
        &self,
        key: &K,
        value: &T,
    ) -> Result<()> {
        self.put(K::BUCKET, key.hash(), value)
    }
}

/// The process that made a temporary folder or file of the cache, from its name: scratch
/// folders (`job-<pid>-<n>`, `env-<pid>`, `env-check-<pid>-<key>`), environments and tools
/// being built (`<key>.tmp<pid>`, `uv.tmp<pid>`, `scratch<pid>`), atomic writes.
fn leftover_owner(name: &str) -> Option<u32> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    for prefix in ["job-", "env-check-", "env-", "scratch"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return digits(rest);
        }
    }
    if let Some((_, rest)) = name.rsplit_once(".tmp") {
        return digits(rest);
    }
    crate::fsutil::tmp_owner(name)
}

/// Opens `path` and takes an exclusive lock on it, calling `waiting` once if another process
/// holds it.
pub fn lock_file(path: &Path, waiting: impl FnOnce()) -> Result<File> {
    let lock = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?
        .into_parts()
        .0;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            waiting();
            lock.lock()
                .map_err(|e| Error::env(format!("cannot lock `{}`: {e}", path.display())))?;
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(Error::env(format!("cannot lock `{}`: {e}", path.display())));
        }
    }
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_entries_are_misses_and_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        assert_eq!(cache.get::<String>(Bucket::Parse, a), None);
        cache.put(Bucket::Parse, a, "value a").unwrap();
        cache.put(Bucket::Parse, b, "value b").unwrap();
        assert_eq!(
            cache.get::<String>(Bucket::Parse, a).as_deref(),
            Some("value a")
        );
        // Swapped: each file holds the other's entry.
        let (pa, pb) = (
            cache.entry_path(Bucket::Parse, a),
            cache.entry_path(Bucket::Parse, b),
        );
        let (ea, eb) = (std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
        std::fs::write(&pa, &eb).unwrap();
        std::fs::write(&pb, &ea).unwrap();
        assert_eq!(cache.get::<String>(Bucket::Parse, a), None);
        assert!(!pa.exists(), "a damaged entry is removed");
        // The same bytes under another bucket do not verify either.
        let other = cache.entry_path(Bucket::Generate, b);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, &eb).unwrap();
        assert_eq!(cache.get::<String>(Bucket::Generate, b), None);
        assert!(dir.path().join("CACHEDIR.TAG").exists());
    }

    #[test]
    fn leftovers_name_their_owner() {
        assert_eq!(leftover_owner("job-123-4"), Some(123));
        assert_eq!(leftover_owner("env-check-77-abcdef"), Some(77));
        assert_eq!(leftover_owner("env-9"), Some(9));
        assert_eq!(leftover_owner("0a1b.tmp55"), Some(55));
        assert_eq!(leftover_owner("uv.tmp8"), Some(8));
        assert_eq!(leftover_owner("scratch31"), Some(31));
        assert_eq!(leftover_owner("0a1b2c"), None);
        assert_eq!(leftover_owner("uv"), None);
    }

    #[test]
    fn buckets_have_one_folder_each() {
        let folders: std::collections::BTreeSet<String> =
            Bucket::ALL.iter().map(|b| b.folder()).collect();
        assert_eq!(folders.len(), Bucket::ALL.len());
        assert_eq!(Bucket::Validate.folder(), "actions/validate-v7");
        assert_eq!(Bucket::Envs.folder(), "envs-v3");
    }
}
