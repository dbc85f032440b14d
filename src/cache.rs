//! The on-disk, content-addressed action cache under `cache/`.
//!
//! An action is looked up by its kind (a name and a version, bumped whenever the inputs or the
//! format of that kind change; see `docs/caching.md`) and the blake3 hash of its key struct.
//! Entries live at `cache/actions/<kind>-v<N>/<2 hex>/<hash>`. Writes are atomic (a temporary
//! file, then a rename), so a killed build never leaves a torn entry; a build holds an exclusive
//! lock on `cache/.lock`, so concurrent builds on one cache take turns. Callers store only
//! results that are final: a transient failure is never put here.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::hash::Hash;

/// An action kind: a name and a version.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    pub name: &'static str,
    pub version: u32,
}

/// Parse results: a module summary per source content hash.
pub const PARSE: Kind = Kind {
    name: "parse",
    version: 1,
};

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
        let lock_path = root.join(".lock");
        let lock = fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?
            .into_parts()
            .0;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "waiting for the lock on `{}`: another build is using this cache",
                    root.display()
                );
                lock.lock().map_err(|e| {
                    Error::env(format!("cannot lock `{}`: {e}", lock_path.display()))
                })?;
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::env(format!(
                    "cannot lock `{}`: {e}",
                    lock_path.display()
                )));
            }
        }
        Ok(Cache {
            root: root.to_path_buf(),
            _lock: lock,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry(&self, kind: Kind, key: Hash) -> PathBuf {
        let hex = key.to_hex();
        self.root
            .join("actions")
            .join(format!("{}-v{}", kind.name, kind.version))
            .join(&hex[..2])
            .join(hex)
    }

    /// Whether an entry exists, without reading it.
    pub fn contains(&self, kind: Kind, key: Hash) -> bool {
        self.entry(kind, key).exists()
    }

    /// The stored value, or `None` on a miss. An unreadable or corrupt entry (its checksum does
    /// not match) counts as a miss.
    pub fn get<T: DeserializeOwned>(&self, kind: Kind, key: Hash) -> Option<T> {
        let bytes = std::fs::read(self.entry(kind, key)).ok()?;
        let (sum, payload) = bytes.split_at_checked(32)?;
        if blake3::hash(payload).as_bytes() != sum {
            return None;
        }
        postcard::from_bytes(payload).ok()
    }

    /// Stores a final result.
    pub fn put<T: Serialize>(&self, kind: Kind, key: Hash, value: &T) -> Result<()> {
        let payload = postcard::to_stdvec(value)
            .map_err(|e| Error::Internal(format!("cannot encode a `{}` entry: {e}", kind.name)))?;
        let mut bytes = Vec::with_capacity(payload.len() + 32);
        bytes.extend_from_slice(blake3::hash(&payload).as_bytes());
        bytes.extend_from_slice(&payload);
        let path = self.entry(kind, key);
        let parent = path.parent().expect("entries have a parent");
        if !parent.is_dir() {
            fs_err::create_dir_all(parent)?;
        }
        // Entries carry a checksum instead of an fsync: a torn write after a crash reads as a miss.
        write_atomic_with(&path, &bytes, false)
    }

    /// A folder of the cache for state that is not an action (stat memos, git mirrors).
    pub fn dir(&self, name: &str) -> Result<PathBuf> {
        let dir = self.root.join(name);
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, synced, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, bytes, true)
}

fn write_atomic_with(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> std::io::Result<()> {
        let mut file = fs_err::File::create(&tmp)?;
        file.write_all(bytes)?;
        if sync {
            file.sync_data()?;
        }
        fs_err::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(Error::from)
}

/// Writes `bytes` to `path` unless it already holds exactly them; says whether it wrote.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool> {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() == bytes.len() as u64
        && std::fs::read(path).is_ok_and(|old| old == bytes)
    {
        return Ok(false);
    }
    write_atomic(path, bytes)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_and_corrupt_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = Hash::of_bytes(b"k");
        assert_eq!(cache.get::<String>(PARSE, key), None);
        cache.put(PARSE, key, &"value".to_string()).unwrap();
        assert_eq!(cache.get::<String>(PARSE, key).as_deref(), Some("value"));
        let mut torn = std::fs::read(cache.entry(PARSE, key)).unwrap();
        torn.truncate(torn.len() - 1);
        fs_err::write(cache.entry(PARSE, key), &torn).unwrap();
        assert_eq!(cache.get::<Vec<String>>(PARSE, key), None);
        assert!(dir.path().join("CACHEDIR.TAG").exists());
    }
}
