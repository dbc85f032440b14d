//! The local folder as a [`Store`]: each entry or blob one file, `<bucket>/<2 hex>/<hex>` under
//! the cache's root (the layout `docs/caching.md` describes), written atomically (a temporary
//! name carrying the writer's pid, then a rename), with its modification time as its last use.
//!
//! Create-only and conditional writes need no lock: a create-only write links its complete
//! temporary file to the entry's name (`link` fails when the name exists); a conditional one
//! first takes the stored file away from its name in one rename, compares its bytes with the
//! version expected (their blake3 hash), and then links the new file in, or links the old one
//! back when it was not the expected one. Meanwhile a reader sees a miss, never a mix.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Bucket;
use super::store::{Created, Fetched, Listed, Listing, Store, Version, entry_name};
use crate::error::{Error, Result};
use crate::fsutil::{temp_beside, write_atomic_parts, write_atomic_with, write_temp};
use crate::hash::Hash;

/// The cache's own folder as a store of entries and blobs.
#[derive(Clone, Debug)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// The store of the cache at `root` (nothing is created until something is stored).
    pub fn new(root: &Path) -> LocalStore {
        LocalStore {
            root: root.to_path_buf(),
        }
    }

    /// Where the entry (or blob) of `key` in `bucket` lives: `<bucket>/<2 hex>/<hex>`. (A
    /// folder shared by hosts as their remote store, `file://`, also keeps the archives of
    /// environments and the leases this way.)
    pub fn path(&self, bucket: Bucket, key: Hash) -> PathBuf {
        self.root.join(entry_name(bucket, key))
    }

    /// The entry's path, its folder created if needed.
    fn path_for_writing(&self, bucket: Bucket, key: Hash) -> Result<PathBuf> {
        let path = self.path(bucket, key);
        let parent = path.parent().expect("entries have a parent");
        if !parent.is_dir() {
            fs_err::create_dir_all(parent)?;
        }
        Ok(path)
    }
}

/// The version of the file `meta` describes: which file it is (device and inode), its length
/// and its modification time. Entries are never written in place (a new one is a new file, put
/// in by a rename or a link, which keep its inode), so this names the bytes without hashing
/// them again: the entry's own checksum is what verifies them.
fn version_of(meta: &std::fs::Metadata) -> Version {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Version::new(format!(
        "{}:{}:{}:{mtime}",
        meta.dev(),
        meta.ino(),
        meta.len()
    ))
}

/// The bytes at `path`, with their version; `None` when there is nothing.
fn read(path: &Path) -> Result<Option<Fetched>> {
    let mut file = match fs_err::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let version = version_of(&file.metadata()?);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(Some(Fetched { version, bytes }))
}

/// A temporary file beside `path` holding `parts`.
fn temp_of(path: &Path, parts: &[&[u8]]) -> Result<PathBuf> {
    // Entries verify themselves instead of an fsync: a torn write after a crash is a miss.
    write_temp(path, false, |file| {
        for part in parts {
            file.write_all(part)?;
        }
        Ok(())
    })
}

/// Moves the temporary file `tmp` to `path` unless something is there already; says whether it
/// did. `tmp` is gone afterwards either way.
fn place(tmp: &Path, path: &Path) -> Result<bool> {
    let placed = match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        // A file system without hard links: a check, then a rename (not atomic as a link is).
        Err(_) => match path.try_exists() {
            Ok(true) => Ok(false),
            Ok(false) => fs_err::rename(tmp, path).map(|()| true),
            Err(e) => Err(e),
        },
    };
    let _ = std::fs::remove_file(tmp);
    placed.map_err(Error::from)
}

/// Takes the file at `path` away from its name, in one rename, when it holds the bytes of
/// `current`: returns its temporary name (the caller removes it). A file that holds other bytes
/// is put back (unless another writer put something there meanwhile, which stays); a missing
/// one is `None`.
fn take(path: &Path, current: &Version) -> Result<Option<PathBuf>> {
    let taken = temp_beside(path);
    match std::fs::rename(path, &taken) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::env(format!(
                "cannot move `{}` aside: {e}",
                path.display()
            )));
        }
    }
    match fs_err::metadata(&taken) {
        Ok(meta) if version_of(&meta) == *current => Ok(Some(taken)),
        Ok(_) => {
            place(&taken, path)?;
            Ok(None)
        }
        Err(e) => {
            let _ = place(&taken, path);
            Err(e.into())
        }
    }
}

impl Store for LocalStore {
    fn describe(&self, bucket: Bucket, key: Hash) -> String {
        self.path(bucket, key).display().to_string()
    }

    fn get(&self, bucket: Bucket, key: Hash) -> Result<Option<Fetched>> {
        read(&self.path(bucket, key))
    }

    fn contains(&self, bucket: Bucket, key: Hash) -> Result<bool> {
        let path = self.path(bucket, key);
        path.try_exists()
            .map_err(|e| Error::env(format!("cannot look at `{}`: {e}", path.display())))
    }

    fn put(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<()> {
        // Entries verify themselves instead of an fsync: a torn write after a crash is a miss.
        write_atomic_parts(&self.path_for_writing(bucket, key)?, entry, false)
    }

    fn put_if_absent(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<Created> {
        let path = self.path_for_writing(bucket, key)?;
        // Lost: the winner's bytes, unless they were removed since (then it tries again).
        for _ in 0..8 {
            if place(&temp_of(&path, entry)?, &path)? {
                return Ok(Created::Stored);
            }
            if let Some(winner) = read(&path)? {
                return Ok(Created::Exists(winner));
            }
        }
        Err(Error::env(format!(
            "cannot store `{}`: other writers keep adding and removing it",
            path.display()
        )))
    }

    fn replace(
        &self,
        bucket: Bucket,
        key: Hash,
        current: &Version,
        entry: &[&[u8]],
    ) -> Result<bool> {
        let path = self.path(bucket, key);
        if !path.parent().is_some_and(Path::is_dir) {
            return Ok(false);
        }
        // Written first, so that the entry is away from its name for as short a time as can be.
        let new = temp_of(&path, entry)?;
        let taken = match take(&path, current) {
            Ok(Some(taken)) => taken,
            other => {
                let _ = std::fs::remove_file(&new);
                return other.map(|_| false);
            }
        };
        let _ = std::fs::remove_file(&taken);
        place(&new, &path)
    }

    fn remove(&self, bucket: Bucket, key: Hash, current: &Version) -> Result<bool> {
        let Some(taken) = take(&self.path(bucket, key), current)? else {
            return Ok(false);
        };
        let _ = std::fs::remove_file(&taken);
        Ok(true)
    }

    fn touch(&self, bucket: Bucket, key: Hash) {
        super::touch(&self.path(bucket, key));
    }

    fn get_blob(&self, bucket: Bucket, key: Hash) -> Result<Option<Box<dyn Read + Send>>> {
        match fs_err::File::open(self.path(bucket, key)) {
            Ok(file) => Ok(Some(Box::new(std::io::BufReader::new(file)))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn put_blob(&self, bucket: Bucket, key: Hash, blob: &mut dyn Read) -> Result<()> {
        // A blob does not verify itself as an entry does: it is on the disk before its name.
        write_atomic_with(&self.path_for_writing(bucket, key)?, true, |file| {
            std::io::copy(blob, file).map(drop)
        })
    }

    fn list(&self, bucket: Bucket) -> Result<Listing> {
        let dir = self.root.join(bucket.folder());
        let mut listing = Listing {
            items: Vec::new(),
            overhead: size(&dir, &mut HashSet::new(), false),
        };
        let item = |name: String| {
            let path = dir.join(&name);
            let meta = std::fs::symlink_metadata(&path).ok();
            let used = meta
                .as_ref()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let (bytes, linked) = match &meta {
                Some(m) if m.is_dir() => (size(&path, &mut HashSet::new(), true), None),
                Some(m) => (
                    m.blocks() * 512,
                    (m.nlink() > 1).then(|| (m.dev(), m.ino())),
                ),
                None => (0, None),
            };
            Listed {
                name,
                bytes,
                used,
                linked,
            }
        };
        for shard in names(&dir)? {
            let shard_path = dir.join(&shard);
            if !shard_path.is_dir() || shard_path.is_symlink() {
                listing.items.push(item(shard));
                continue;
            }
            listing.overhead += size(&shard_path, &mut HashSet::new(), false);
            for name in names(&shard_path)? {
                listing.items.push(item(format!("{shard}/{name}")));
            }
        }
        Ok(listing)
    }
}

/// The names in a folder, sorted (none when it does not exist). It follows `dir` when it is a
/// symlink: callers check that it is not (but for the cache's root).
pub(crate) fn names(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::env(format!("cannot read `{}`: {e}", dir.display()))),
    };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    Ok(out)
}

/// The bytes `path` takes on the disk (`du`'s: allocated blocks), and with `deep` everything
/// under it; symlinks are not followed (not even `path` itself), and a file with several links
/// counts once (`seen`).
pub(crate) fn size(path: &Path, seen: &mut HashSet<(u64, u64)>, deep: bool) -> u64 {
    let one = |m: &std::fs::Metadata, seen: &mut HashSet<(u64, u64)>| -> u64 {
        if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
            return 0;
        }
        m.blocks() * 512
    };
    if !deep {
        return std::fs::symlink_metadata(path)
            .map(|m| one(&m, seen))
            .unwrap_or(0);
    }
    walkdir::WalkDir::new(path)
        .follow_links(false)
        .follow_root_links(false)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| one(&m, seen))
        .sum()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::super::entry;
    use super::super::store::Verified;
    use super::*;

    const B: Bucket = Bucket::Llm;

    fn sealed(key: Hash, value: &str) -> Vec<u8> {
        entry::seal(&B.folder(), key, value)
    }

    fn value(v: &Verified) -> String {
        postcard::from_bytes(v.payload()).unwrap()
    }

    #[test]
    fn what_is_put_is_got_back_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let key = Hash::of_bytes(b"k");
        assert_eq!(store.get(B, key).unwrap(), None);
        assert!(!store.contains(B, key).unwrap());
        assert_eq!(store.verify(B, key).unwrap(), None);
        let bytes = sealed(key, "answer");
        store.put(B, key, &[&bytes[..10], &bytes[10..]]).unwrap();
        assert!(store.contains(B, key).unwrap());
        let got = store.get(B, key).unwrap().unwrap();
        assert_eq!(got.bytes, bytes);
        // The layout: `<bucket>/<2 hex>/<hex>` under the root.
        let hex = key.to_hex();
        let path = dir.path().join(B.folder()).join(&hex[..2]).join(&hex);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert_eq!(store.describe(B, key), path.display().to_string());
        let verified = store.verify(B, key).unwrap().unwrap();
        assert_eq!(value(&verified), "answer");
        assert_eq!(verified.version, got.version);
        assert_eq!(
            postcard::from_bytes::<String>(&verified.into_payload()).unwrap(),
            "answer"
        );
        // A plain put replaces; the version follows the bytes.
        let again = sealed(key, "another");
        store.put(B, key, &[&again]).unwrap();
        let now = store.get(B, key).unwrap().unwrap();
        assert_eq!(now.bytes, again);
        assert_ne!(now.version, got.version);
    }

    #[test]
    fn racing_create_only_writers_end_with_the_winners_bytes() {
        for round in 0..20u8 {
            let dir = tempfile::tempdir().unwrap();
            let store = Arc::new(LocalStore::new(dir.path()));
            let key = Hash::of_bytes(&[round]);
            let start = Arc::new(Barrier::new(2));
            let writers: Vec<_> = ["left", "right"]
                .into_iter()
                .map(|name| {
                    let (store, start) = (store.clone(), start.clone());
                    std::thread::spawn(move || {
                        let mine = sealed(key, name);
                        start.wait();
                        match store.put_if_absent(B, key, &[&mine]).unwrap() {
                            Created::Stored => (true, mine),
                            Created::Exists(winner) => (false, winner.bytes),
                        }
                    })
                })
                .collect();
            let ends: Vec<(bool, Vec<u8>)> =
                writers.into_iter().map(|w| w.join().unwrap()).collect();
            assert_eq!(ends.iter().filter(|(won, _)| *won).count(), 1, "one winner");
            assert_eq!(ends[0].1, ends[1].1, "both end with the same bytes");
            assert_eq!(store.get(B, key).unwrap().unwrap().bytes, ends[0].1);
            // No temporary file is left beside it.
            let listed = store.list(B).unwrap();
            assert_eq!(listed.items.len(), 1, "{listed:?}");
        }
    }

    #[test]
    fn a_conditional_replace_needs_the_version_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let key = Hash::of_bytes(b"k");
        let (first, second, third) = (
            sealed(key, "first"),
            sealed(key, "second"),
            sealed(key, "third"),
        );
        // Nothing stored: nothing to replace (and no folder is made for it).
        let nothing = Version::new("none");
        assert!(!store.replace(B, key, &nothing, &[&first]).unwrap());
        assert!(!store.contains(B, key).unwrap());
        store.put(B, key, &[&first]).unwrap();
        let seen = store.get(B, key).unwrap().unwrap().version;
        // Another writer changes it: a replace with the old version is refused.
        store.put(B, key, &[&second]).unwrap();
        assert!(!store.replace(B, key, &seen, &[&third]).unwrap());
        assert_eq!(store.get(B, key).unwrap().unwrap().bytes, second);
        assert!(!store.remove(B, key, &seen).unwrap());
        assert_eq!(store.get(B, key).unwrap().unwrap().bytes, second);
        // With the version it holds, it is replaced, then removed.
        let now = store.get(B, key).unwrap().unwrap().version;
        assert!(store.replace(B, key, &now, &[&third]).unwrap());
        let after = store.get(B, key).unwrap().unwrap();
        assert_eq!(after.bytes, third);
        assert!(
            !store.replace(B, key, &now, &[&first]).unwrap(),
            "used once"
        );
        assert!(store.remove(B, key, &after.version).unwrap());
        assert!(!store.contains(B, key).unwrap());
        assert_eq!(store.list(B).unwrap().items, Vec::new());
    }

    #[test]
    fn every_kind_of_damage_is_a_miss_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let (key, other) = (Hash::of_bytes(b"k"), Hash::of_bytes(b"other"));
        let good = sealed(key, "value");
        let mut flipped = good.clone();
        let n = flipped.len() - 2;
        flipped[n] ^= 0x01;
        let damages = [
            ("truncated", good[..good.len() - 1].to_vec()),
            ("short", good[..5].to_vec()),
            ("a flipped byte", flipped),
            ("another key's entry", sealed(other, "value")),
            (
                "another bucket's entry",
                entry::seal(&Bucket::Check.folder(), key, "value"),
            ),
        ];
        for (what, bytes) in damages {
            store.put(B, key, &[&bytes]).unwrap();
            assert_eq!(store.verify(B, key).unwrap(), None, "{what}");
            assert!(!store.contains(B, key).unwrap(), "{what} is removed");
        }
        // A damaged entry repaired by another writer before the removal stays.
        store.put(B, key, &[&good[..9]]).unwrap();
        let damaged = store.get(B, key).unwrap().unwrap().version;
        store.put(B, key, &[&good]).unwrap();
        assert!(!store.remove(B, key, &damaged).unwrap());
        assert_eq!(value(&store.verify(B, key).unwrap().unwrap()), "value");
    }

    #[test]
    fn a_folder_archive_streams_in_and_out() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("env");
        std::fs::create_dir_all(folder.join("bin")).unwrap();
        std::fs::write(folder.join("bin/python"), vec![7u8; 300 << 10]).unwrap();
        std::fs::write(folder.join("record"), b"sealed").unwrap();
        let mut archive = tar::Builder::new(Vec::new());
        archive.append_dir_all("env", &folder).unwrap();
        let archive = archive.into_inner().unwrap();

        let store = LocalStore::new(&dir.path().join("cache"));
        let key = Hash::of_bytes(b"env");
        assert!(store.get_blob(Bucket::Analysis, key).unwrap().is_none());
        store
            .put_blob(Bucket::Analysis, key, &mut std::io::Cursor::new(&archive))
            .unwrap();
        let mut back = Vec::new();
        store
            .get_blob(Bucket::Analysis, key)
            .unwrap()
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, archive);
        let out = dir.path().join("out");
        tar::Archive::new(store.get_blob(Bucket::Analysis, key).unwrap().unwrap())
            .unpack(&out)
            .unwrap();
        assert_eq!(
            std::fs::read(out.join("env/bin/python")).unwrap(),
            vec![7u8; 300 << 10]
        );
        assert_eq!(std::fs::read(out.join("env/record")).unwrap(), b"sealed");
    }

    #[test]
    fn a_listing_sees_what_was_put() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        assert_eq!(store.list(B).unwrap(), Listing::default());
        let keys: Vec<Hash> = (0..5u8).map(|i| Hash::of_bytes(&[i])).collect();
        for (i, &key) in keys.iter().enumerate() {
            store
                .put(B, key, &[&sealed(key, &"x".repeat(i * 5000))])
                .unwrap();
        }
        store
            .put_blob(B, keys[0], &mut std::io::Cursor::new(vec![1u8; 9000]))
            .unwrap();
        store
            .put(Bucket::Check, keys[1], &[&sealed(keys[1], "elsewhere")])
            .unwrap();
        let listing = store.list(B).unwrap();
        let mut names: Vec<&str> = listing.items.iter().map(|l| l.name.as_str()).collect();
        names.sort();
        let mut expected: Vec<String> = keys
            .iter()
            .map(|k| {
                let hex = k.to_hex();
                format!("{}/{hex}", &hex[..2])
            })
            .collect();
        expected.sort();
        assert_eq!(names, expected);
        assert!(listing.overhead > 0, "the bucket's folders");
        for l in &listing.items {
            let path = dir.path().join(B.folder()).join(&l.name);
            let meta = std::fs::metadata(&path).unwrap();
            assert_eq!(l.bytes, meta.blocks() * 512, "{}", l.name);
            assert_eq!(l.used, meta.modified().unwrap());
            assert_eq!(l.linked, None);
        }
        assert_eq!(store.list(Bucket::Check).unwrap().items.len(), 1);
    }
}
