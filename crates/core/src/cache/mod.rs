//! The on-disk cache under `cache/`: content-addressed action results and the machine-local
//! state of builds (environments, git mirrors, checked-out trees, stat memos, tools, scratch).
//!
//! Every folder of the cache is a [`Bucket`], named with its version (`actions/validate-v4`,
//! `envs-v4`), as uv's `CacheBucket` does: a path into the cache is never spelled out anywhere
//! else. An action is looked up by its key struct ([`ActionKey`], defined in `keys.rs`): its
//! bucket and the blake3 hash of its canonical form. Entries verify themselves ([`entry`]): a
//! swapped, truncated or bit-flipped entry is a miss, with a warning naming the file, and is
//! recomputed. Entries (and blobs) are kept in a [`Store`] ([`store`]), which every read of an
//! entry goes through; the cache's own folder ([`local::LocalStore`]) is the only one so far.
//! Writes are atomic, and a build holds an exclusive lock on `cache/.lock`, so concurrent builds
//! (and `r2e gc`, [`gc`]) on one cache take turns. Callers store only results that are final: a
//! transient failure is never put here.
//!
//! An open cache notes what it is asked for ([`Cache::note_use`]): every entry read or written,
//! every environment, tree, mirror and tool used. A build writes that list beside its outputs
//! ([`write_uses`]) and registers its output under [`Bucket::Roots`], so that `r2e gc` keeps what
//! the last builds use. A use also renews the entry's modification time (at most once an hour),
//! which is how `gc` knows the least recently used.

pub mod entry;
pub mod gc;
pub mod local;
pub mod remote;
pub mod scheme;
pub mod sign;
pub mod store;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
pub use crate::fsutil::{write_atomic, write_if_changed};
use crate::hash::Hash;
pub use local::LocalStore;
pub use scheme::Scheme;
pub use store::Store;

/// Every folder of the cache, with its version. Bump a bucket's version whenever the inputs of
/// its key or the format of its entries change (see `docs/caching.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Bucket {
    /// Action: a module summary per source content (`keys::ParseKey`).
    Parse,
    /// Action: the module summaries of many files in one entry, for a build that parses many
    /// (`keys::ParsePackKey`, `packs`).
    ParsePack,
    /// Action: the built-in explorer's harness for a function (`keys::GenerateKey`).
    Generate,
    /// Action: the arguments a repository's own tests pass to its candidates
    /// (`keys::CaptureKey`).
    Capture,
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
    /// Action: a candidate's raw runs against an instance's harness, repeated, each in a fresh
    /// process (`keys::RepeatKey`): a bug-fix task's broken state.
    Repeat,
    /// Action: the project's own tests that fail on one state of a module (`keys::
    /// ProjectTestsKey`): a bug-fix task's broken state, or the module as it is.
    ProjectTests,
    /// Environments: `<key>/venv` and its sealed record (`keys::EnvKey`).
    Envs,
    /// Project layers: a repository built as a wheel and installed into `<key>/site`, with
    /// its sealed record (`keys::ProjectKey`, `stages::environment::project`).
    Projects,
    /// Commits of git repositories checked out to run code from.
    Trees,
    /// Git mirrors, by URL.
    Git,
    /// Source releases from a package index (`[[repo]] pypi`), each unpacked into a folder
    /// named by its archive's sha256.
    Pypi,
    /// GitHub API answers of the last curation, by URL (`keys::GithubKey`): each one's `ETag`
    /// and body, sent back as `If-None-Match` so that an unchanged answer is a 304, which
    /// GitHub does not count against the rate limit. Never the token.
    Github,
    /// Stat memos of path repositories (path, size, mtime, ctime, inode → content hash).
    Stat,
    /// The analysis stages' results of a repository, with the inputs they read
    /// (`keys::AnalysisKey`, `engine::memo`): reused by the next build, a new process, where
    /// those inputs still hash the same.
    Analysis,
    /// A repository's function dates at a commit (`keys::DatingKey`, `stages::dating`): when
    /// each function's body was first introduced and last changed.
    Dates,
    /// Tools r2e installs for itself (`uv`).
    Tools,
    /// The installers' own download caches.
    UvCache,
    PipCache,
    /// Scratch folders of running jobs (removed when the job ends, or by the next build when
    /// its process died).
    Scratch,
    /// The outputs built with this cache: one symlink per output, to its absolute path, so that
    /// `r2e gc` finds what every output's last build uses (as Nix's `gcroots`).
    Roots,
    /// Leases on actions several hosts may need at once: in a remote store only
    /// (`remote::Remote::lease`).
    Leases,
    /// What the first host of a build spread over machines built environments with (its
    /// interpreter and installer), which every other host must match: in a remote store only
    /// (`remote::Remote::agree`).
    Facts,
    /// The Docker backend's base images, by tag: each one `docker save` archive (or, with
    /// `[sandbox] registry`, the digest it was pushed under), in a remote store only
    /// (`r2e_exec::image_share`).
    Images,
}

/// How `r2e gc` sees a bucket's folder: what one unit of removal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Entries are files two levels down: `<bucket>/<2 hex>/<hex>`.
    Entries,
    /// Every child of the folder is one unit: an environment, a tree, a mirror, a tool.
    Folders,
    /// The whole folder is one unit (another tool's cache).
    Whole,
    /// Not collected: scratch of running jobs (a dead one's is a leftover), the roots.
    Kept,
}

impl Bucket {
    pub const ALL: [Bucket; 28] = [
        Bucket::Parse,
        Bucket::ParsePack,
        Bucket::Generate,
        Bucket::Capture,
        Bucket::Validate,
        Bucket::Llm,
        Bucket::Refusal,
        Bucket::Check,
        Bucket::Answer,
        Bucket::Repeat,
        Bucket::ProjectTests,
        Bucket::Envs,
        Bucket::Projects,
        Bucket::Trees,
        Bucket::Git,
        Bucket::Pypi,
        Bucket::Github,
        Bucket::Stat,
        Bucket::Analysis,
        Bucket::Dates,
        Bucket::Tools,
        Bucket::UvCache,
        Bucket::PipCache,
        Bucket::Scratch,
        Bucket::Roots,
        Bucket::Leases,
        Bucket::Facts,
        Bucket::Images,
    ];

    /// The bucket's name and version (`None`: the folder is managed by another tool, or holds
    /// nothing that outlives a build).
    pub const fn name_version(self) -> (&'static str, Option<u32>) {
        match self {
            Bucket::Parse => ("parse", Some(3)),
            Bucket::ParsePack => ("parse-pack", Some(1)),
            Bucket::Generate => ("generate", Some(5)),
            Bucket::Capture => ("capture", Some(3)),
            Bucket::Validate => ("validate", Some(10)),
            Bucket::Llm => ("llm", Some(2)),
            Bucket::Refusal => ("llm-refused", Some(1)),
            Bucket::Check => ("check", Some(5)),
            Bucket::Answer => ("answer", Some(1)),
            Bucket::Repeat => ("check-repeat", Some(3)),
            Bucket::ProjectTests => ("project-tests", Some(1)),
            Bucket::Envs => ("envs", Some(4)),
            Bucket::Projects => ("projects", Some(1)),
            Bucket::Trees => ("trees", Some(1)),
            Bucket::Git => ("git", Some(1)),
            Bucket::Pypi => ("pypi", Some(1)),
            Bucket::Github => ("github", Some(1)),
            Bucket::Stat => ("stat", Some(2)),
            Bucket::Analysis => ("analysis", Some(1)),
            Bucket::Dates => ("dates", Some(1)),
            Bucket::Tools => ("tools", Some(1)),
            Bucket::UvCache => ("uv-cache", None),
            Bucket::PipCache => ("pip-cache", None),
            Bucket::Scratch => ("scratch", None),
            Bucket::Roots => ("roots", Some(1)),
            Bucket::Leases => ("leases", Some(1)),
            Bucket::Facts => ("facts", Some(1)),
            Bucket::Images => ("images", Some(1)),
        }
    }

    /// What `r2e gc` removes of the bucket at a time.
    pub const fn layout(self) -> Layout {
        match self {
            Bucket::Parse
            | Bucket::ParsePack
            | Bucket::Generate
            | Bucket::Capture
            | Bucket::Validate
            | Bucket::Llm
            | Bucket::Refusal
            | Bucket::Check
            | Bucket::Answer
            | Bucket::Repeat
            | Bucket::ProjectTests
            | Bucket::Stat
            | Bucket::Github
            | Bucket::Analysis
            | Bucket::Dates => Layout::Entries,
            Bucket::Envs
            | Bucket::Projects
            | Bucket::Trees
            | Bucket::Git
            | Bucket::Pypi
            | Bucket::Tools => Layout::Folders,
            Bucket::UvCache | Bucket::PipCache => Layout::Whole,
            Bucket::Scratch | Bucket::Roots | Bucket::Leases | Bucket::Facts | Bucket::Images => {
                Layout::Kept
            }
        }
    }

    /// Whether the bucket holds action results (under `actions/`).
    pub const fn is_action(self) -> bool {
        matches!(
            self,
            Bucket::Parse
                | Bucket::ParsePack
                | Bucket::Generate
                | Bucket::Capture
                | Bucket::Validate
                | Bucket::Llm
                | Bucket::Refusal
                | Bucket::Check
                | Bucket::Answer
                | Bucket::Repeat
                | Bucket::ProjectTests
        )
    }

    /// The bucket's folder, relative to the cache root: `actions/validate-v4`, `envs-v4`.
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

/// An open cache, locked for this process (until [`Cache::unlock`]): its entries in a
/// [`Store`], its folders used in place (environments, trees, mirrors, tools, scratch) under
/// its root.
pub struct Cache {
    root: PathBuf,
    store: Arc<dyn Store>,
    /// The store shared between hosts, read after the local one (`[cache] remote`).
    remote: Option<Arc<remote::Remote>>,
    lock: Mutex<Option<File>>,
    /// What this process used, relative to the root (see [`Cache::note_use`]).
    uses: Mutex<BTreeSet<String>>,
}

/// How old a modification time must be for a use to renew it: the resolution of `gc`'s "least
/// recently used", traded for not writing an inode on every read.
const TOUCH_AFTER: Duration = Duration::from_secs(3600);

impl Cache {
    /// Opens (creating if needed) the cache at `root` and takes its lock, waiting for another
    /// build (or `r2e gc`) that holds it.
    pub fn open(root: &Path) -> Result<Cache> {
        let cache = Self::open_locked(root)?;
        cache.remove_leftovers();
        Ok(cache)
    }

    /// Like [`Cache::open`], without removing leftovers.
    fn open_locked(root: &Path) -> Result<Cache> {
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
                "waiting for the lock on `{}`: another r2e command (a build, `r2e gc`, ...) is using this cache",
                root.display()
            )
        })?;
        let cache = Cache {
            root: root.to_path_buf(),
            store: Arc::new(LocalStore::new(root)),
            remote: None,
            lock: Mutex::new(Some(lock)),
            uses: Mutex::new(BTreeSet::new()),
        };
        Ok(cache)
    }

    /// Lets other commands take the cache (a build, `r2e gc`) while this process goes on
    /// reading it and adding entries: `r2e serve`, once its dataset is open. What it adds is
    /// atomic, its scratch folders carry its pid (no one else's leftovers), and `r2e gc` keeps
    /// what the served output's last build uses.
    pub fn unlock(&self) {
        drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    /// Removes what builds that died left behind (they cannot have finished it): scratch
    /// folders of their jobs, environments and tools half built, temporary files. Returns how
    /// many it removed.
    pub fn remove_leftovers(&self) -> usize {
        let mut removed = 0;
        for bucket in [
            Bucket::Scratch,
            Bucket::Envs,
            Bucket::Projects,
            Bucket::Tools,
            Bucket::Pypi,
        ] {
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

    /// Reads after the local store, and writes after it, the store shared between hosts.
    pub fn set_remote(&mut self, remote: remote::Remote) {
        self.remote = Some(Arc::new(remote));
    }

    /// The store shared between hosts, when there is one.
    pub fn remote(&self) -> Option<&Arc<remote::Remote>> {
        self.remote.as_ref()
    }

    /// The remote store, for a bucket it shares.
    fn remote_for(&self, bucket: Bucket) -> Option<&remote::Remote> {
        self.remote
            .as_deref()
            .filter(|_| remote::Remote::shares(bucket))
    }

    /// Records an event of an action this host runs outside the entries (an environment) in
    /// the remote store's trace.
    pub fn trace(&self, event: remote::Event, bucket: Bucket, key: Hash) {
        if let Some(r) = &self.remote {
            r.trace(event, bucket, key);
        }
    }

    /// Where entries and blobs are kept: every read of an entry goes through it.
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// A bucket's folder, without creating it: for the buckets of folders used in place
    /// (environments, project layers, trees, mirrors, tools, scratch, roots), which need a local
    /// path. Entries are reached through [`Cache::store`], never by a path.
    pub fn path(&self, bucket: Bucket) -> PathBuf {
        self.root.join(bucket.folder())
    }

    /// A bucket's folder, created if needed (see [`Cache::path`]).
    pub fn dir(&self, bucket: Bucket) -> Result<PathBuf> {
        let dir = self.path(bucket);
        fs_err::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Whether an entry exists, without reading it (a store that cannot say: no).
    pub fn contains(&self, bucket: Bucket, key: Hash) -> bool {
        self.store.contains(bucket, key).unwrap_or(false)
    }

    /// Notes that this process used the entry of `key` (read or written): renewed in the store,
    /// listed in its `uses` by its name (`<bucket>/<2 hex>/<hex>`, as the local store lays it
    /// out under the root).
    fn used(&self, bucket: Bucket, key: Hash) {
        self.store.touch(bucket, key);
        self.uses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(store::entry_name(bucket, key));
    }

    /// Notes the entry of `key` as used without reading it (the parse packs a repository's
    /// pack list names, which `r2e gc` must keep), when the store holds it; says whether it
    /// does.
    pub fn note_entry_use(&self, bucket: Bucket, key: Hash) -> bool {
        let held = self.contains(bucket, key);
        if held {
            self.used(bucket, key);
        }
        held
    }

    /// Notes that this process used `path` (a folder such as an environment; an entry is noted
    /// when it is read or written through the store, or by [`Cache::note_entry_use`]), and
    /// renews its modification time when it is older than an hour: `r2e gc` keeps what the last
    /// build used and removes the least recently used first. A path outside the cache is
    /// ignored.
    pub fn note_use(&self, path: &Path) {
        let Ok(rel) = path.strip_prefix(&self.root) else {
            return;
        };
        touch(path);
        let rel = rel.to_string_lossy().into_owned();
        self.uses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(rel);
    }

    /// Everything this process used so far, relative to the root, sorted.
    pub fn uses(&self) -> Vec<String> {
        let uses = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        uses.iter().cloned().collect()
    }

    /// Registers `output` (an absolute path) as built with this cache, so that `r2e gc` reads
    /// what its last build uses.
    pub fn add_root(&self, output: &Path) -> Result<()> {
        let dir = self.dir(Bucket::Roots)?;
        let link = dir.join(Hash::of_bytes(output.as_os_str().as_encoded_bytes()).to_hex());
        if std::fs::read_link(&link).is_ok_and(|t| t == output) {
            return Ok(());
        }
        let tmp = dir.join(format!(
            ".root{}{}.0",
            crate::fsutil::TMP_MARKER,
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(output, &tmp)
            .map_err(|e| Error::env(format!("cannot make `{}`: {e}", tmp.display())))?;
        if let Err(e) = fs_err::rename(&tmp, &link) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        Ok(())
    }

    /// The stored value, or `None` on a miss, read through the store ([`Store::verify`]). An
    /// entry that does not verify (another key's entry, a torn or flipped one) is a miss: it is
    /// reported on stderr, naming the file, and removed (if it is still those bytes) so that the
    /// recomputed value takes its place. A store that fails to read is a miss too, with a
    /// warning: what is recomputed is stored again, or the store's failure stops the build.
    pub fn get<T: DeserializeOwned>(&self, bucket: Bucket, key: Hash) -> Option<T> {
        self.get_with(bucket, key, |payload| {
            postcard::from_bytes(payload).map_err(|_| entry::Corrupt::Decode)
        })
    }

    /// The stored payload's bytes, verified, without decoding (a value with a layout of its
    /// own: `packs::ParsePack`). Misses as [`Cache::get`] does.
    pub fn get_bytes(&self, bucket: Bucket, key: Hash) -> Option<Vec<u8>> {
        self.get_with(bucket, key, |payload| Ok(payload.to_vec()))
    }

    fn get_with<T>(
        &self,
        bucket: Bucket,
        key: Hash,
        decode: impl FnOnce(&[u8]) -> std::result::Result<T, entry::Corrupt>,
    ) -> Option<T> {
        let verified = match self.store.verify(bucket, key) {
            Ok(verified) => verified,
            Err(e) => {
                eprintln!(
                    "warning: cannot read cache entry `{}` ({e}); it is recomputed",
                    self.store.describe(bucket, key)
                );
                None
            }
        };
        let Some(verified) = verified else {
            return self.get_remote(bucket, key, decode);
        };
        match decode(verified.payload()) {
            Ok(value) => {
                self.used(bucket, key);
                if let Some(remote) = self.remote_for(bucket) {
                    remote.publish(bucket, key, verified.bytes());
                }
                Some(value)
            }
            Err(why) => {
                store::damaged(&*self.store, bucket, key, &verified.version, why);
                None
            }
        }
    }

    /// The remote store's entry of `key` (after a local miss): verified, decoded, copied into
    /// the local store. A miss there too is where this host starts computing it.
    fn get_remote<T>(
        &self,
        bucket: Bucket,
        key: Hash,
        decode: impl FnOnce(&[u8]) -> std::result::Result<T, entry::Corrupt>,
    ) -> Option<T> {
        let remote = self.remote_for(bucket)?;
        let Some(fetched) = remote.get(bucket, key) else {
            remote.trace(remote::Event::Started, bucket, key);
            return None;
        };
        match decode(&fetched.bytes[entry::HEADER..]) {
            Ok(value) => {
                remote.trace(remote::Event::Hit, bucket, key);
                if let Err(e) = self.store.put(bucket, key, &[&fetched.bytes]) {
                    eprintln!(
                        "warning: cannot copy `{}` into the local cache ({e})",
                        remote.store().describe(bucket, key)
                    );
                }
                self.used(bucket, key);
                Some(value)
            }
            Err(why) => {
                // Whole, but not a value of this r2e: recomputed, and replaced.
                remote.damaged_entry(bucket, key, fetched.version, why);
                remote.trace(remote::Event::Started, bucket, key);
                None
            }
        }
    }

    /// Stores a final result.
    pub fn put<T: Serialize + ?Sized>(&self, bucket: Bucket, key: Hash, value: &T) -> Result<()> {
        self.put_bytes(
            bucket,
            key,
            &postcard::to_stdvec(value).expect("cache values serialize"),
        )
    }

    /// Stores a final result given as its payload's bytes (read back with [`Cache::get_bytes`]).
    pub fn put_bytes(&self, bucket: Bucket, key: Hash, payload: &[u8]) -> Result<()> {
        let header = entry::header(&bucket.folder(), key, payload);
        self.store.put(bucket, key, &[&header, payload])?;
        self.used(bucket, key);
        if let Some(remote) = self.remote_for(bucket)
            && let Some(winner) = remote.put(bucket, key, &[&header, payload])
        {
            // Another host's result was there first: this cache takes it too, so that every
            // host reads the same value from now on.
            self.store.put(bucket, key, &[&winner])?;
        }
        Ok(())
    }

    /// Stores `value` unless a value is stored already, and returns the one that is stored
    /// then: the first writer's (a create-only write; a loser adopts the winner's value, so that
    /// every writer agrees on a nondeterministic result). A stored entry that does not verify
    /// is replaced, if it is still the damaged one.
    pub fn put_first<T: Serialize + DeserializeOwned>(
        &self,
        bucket: Bucket,
        key: Hash,
        value: T,
    ) -> Result<T> {
        let payload = postcard::to_stdvec(&value).expect("cache values serialize");
        let header = entry::header(&bucket.folder(), key, &payload);
        let parts: [&[u8]; 2] = [&header, &payload];
        if let Some(remote) = self.remote_for(bucket) {
            // The remote store decides who was first; the local cache follows it.
            if let Some(winner) = remote.put(bucket, key, &parts)
                && let Ok(theirs) = entry::unseal::<T>(&bucket.folder(), key, &winner)
            {
                self.store.put(bucket, key, &[&winner])?;
                self.used(bucket, key);
                return Ok(theirs);
            }
            if !remote.is_down() {
                self.store.put(bucket, key, &parts)?;
                self.used(bucket, key);
                return Ok(value);
            }
        }
        let decodes = |payload: &[u8]| {
            postcard::from_bytes::<T>(payload)
                .map(drop)
                .map_err(|_| entry::Corrupt::Decode)
        };
        let placed = store::write_first(&*self.store, bucket, key, &parts, None, None, &decodes)?;
        self.used(bucket, key);
        match placed {
            store::Placed::Stored | store::Placed::Repaired => Ok(value),
            store::Placed::Adopted(winner) => {
                Ok(entry::unseal::<T>(&bucket.folder(), key, &winner.bytes)
                    .expect("a winner is adopted only when it decodes"))
            }
        }
    }

    /// A stored blob (an archive), streamed, or `None`. Noted as used, as an entry read is.
    pub fn get_blob(&self, bucket: Bucket, key: Hash) -> Result<Option<Box<dyn Read + Send>>> {
        let blob = self.store.get_blob(bucket, key)?;
        if blob.is_some() {
            self.used(bucket, key);
        }
        Ok(blob)
    }

    /// Stores a blob read from `blob` to its end.
    pub fn put_blob(&self, bucket: Bucket, key: Hash, blob: &mut dyn Read) -> Result<()> {
        self.store.put_blob(bucket, key, blob)?;
        self.used(bucket, key);
        Ok(())
    }

    /// The stored result of an action.
    pub fn get_action<K: ActionKey, T: DeserializeOwned>(&self, key: &K) -> Option<T> {
        self.get(K::BUCKET, key.hash())
    }

    /// Stores the result of an action unless one is stored already (here or, first, in the
    /// remote store), and returns the one that is stored then: how a nondeterministic result (a
    /// model's answer) is the same on every host ([`Cache::put_first`]).
    pub fn put_action_first<K: ActionKey, T: Serialize + DeserializeOwned>(
        &self,
        key: &K,
        value: T,
    ) -> Result<T> {
        self.put_first(K::BUCKET, key.hash(), value)
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
/// folders (`job-<pid>-<n>`, `env-<pid>`, `env-check-<pid>-<key>`), what `r2e gc` is deleting
/// (`gc-<pid>`), environments and tools being built (`<key>.tmp<pid>`, `uv.tmp<pid>`,
/// `scratch<pid>`), atomic writes.
fn leftover_owner(name: &str) -> Option<u32> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    for prefix in ["job-", "env-check-", "env-", "gc-", "shard-", "scratch"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return digits(rest);
        }
    }
    if let Some((_, rest)) = name.rsplit_once(".tmp") {
        return digits(rest);
    }
    crate::fsutil::tmp_owner(name)
}

/// Sets the modification time of `path` (a file or a folder; a symlink's own, not followed) to
/// now, when it is older than [`TOUCH_AFTER`]: one `lstat`, and at most one `utimensat` an hour. Failures are ignored (a
/// use that is not recorded only makes the entry look older to `gc`).
pub fn touch(path: &Path) {
    let now = SystemTime::now();
    let old = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > TOUCH_AFTER));
    if old {
        crate::fsutil::set_mtime_now(path);
    }
}

/// The scope and key the list of what a build used is sealed under.
const USES_SCOPE: &str = "r2e-uses-1";

fn uses_path(output: &Path) -> PathBuf {
    output.join(".r2e").join("uses")
}

/// Writes what a build used (`uses`, relative to its cache's root) beside its outputs (into the
/// generation being written, `<output>/.r2e/uses`), sealed.
pub fn write_uses(output: &Path, uses: &[String]) -> Result<()> {
    fs_err::create_dir_all(output.join(".r2e"))?;
    write_atomic(
        &uses_path(output),
        &entry::seal(USES_SCOPE, Hash::of_bytes(USES_SCOPE.as_bytes()), uses),
    )
}

/// What the last build of `output` used, when it recorded it (a build of this r2e) and the
/// record verifies.
pub fn read_uses(output: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(uses_path(output)).ok()?;
    entry::unseal(USES_SCOPE, Hash::of_bytes(USES_SCOPE.as_bytes()), &bytes).ok()
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
        let local = LocalStore::new(dir.path());
        let (pa, pb) = (local.path(Bucket::Parse, a), local.path(Bucket::Parse, b));
        let (ea, eb) = (std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
        std::fs::write(&pa, &eb).unwrap();
        std::fs::write(&pb, &ea).unwrap();
        assert_eq!(cache.get::<String>(Bucket::Parse, a), None);
        assert!(!pa.exists(), "a damaged entry is removed");
        // The same bytes under another bucket do not verify either.
        let other = local.path(Bucket::Generate, b);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, &eb).unwrap();
        assert_eq!(cache.get::<String>(Bucket::Generate, b), None);
        assert!(dir.path().join("CACHEDIR.TAG").exists());
    }

    #[test]
    fn a_create_only_write_adopts_the_winner_and_replaces_a_damaged_one() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = Hash::of_bytes(b"k");
        let first = |v: &str| cache.put_first(Bucket::Llm, key, v.to_owned()).unwrap();
        assert_eq!(first("one"), "one");
        assert_eq!(first("two"), "one", "the loser adopts the winner's value");
        cache
            .store()
            .put(Bucket::Llm, key, &[b"r2e-ent1 torn"])
            .unwrap();
        assert_eq!(first("three"), "three", "a damaged winner is replaced");
        assert_eq!(
            cache.get::<String>(Bucket::Llm, key).as_deref(),
            Some("three")
        );
        // What it used is named as the entry lies under the root.
        let hex = key.to_hex();
        let rel = format!("{}/{}/{hex}", Bucket::Llm.folder(), &hex[..2]);
        assert!(dir.path().join(&rel).is_file());
        assert_eq!(cache.uses(), [rel]);
    }

    #[test]
    fn leftovers_name_their_owner() {
        assert_eq!(leftover_owner("job-123-4"), Some(123));
        assert_eq!(leftover_owner("env-check-77-abcdef"), Some(77));
        assert_eq!(leftover_owner("env-9"), Some(9));
        assert_eq!(leftover_owner("0a1b.tmp55"), Some(55));
        assert_eq!(leftover_owner("uv.tmp8"), Some(8));
        assert_eq!(leftover_owner("scratch31"), Some(31));
        assert_eq!(leftover_owner("gc-42"), Some(42));
        assert_eq!(leftover_owner("0a1b2c"), None);
        assert_eq!(leftover_owner("uv"), None);
    }

    #[test]
    fn a_use_renews_a_symlink_itself_not_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // The link's own time two hours ago, its target's now.
        let c = std::ffi::CString::new(link.as_os_str().as_encoded_bytes()).unwrap();
        let ago = libc::timespec {
            tv_sec: (SystemTime::now() - Duration::from_secs(7200))
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs() as libc::time_t,
            tv_nsec: 0,
        };
        // SAFETY: a valid NUL-terminated path and two timespecs.
        let set = unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                [ago, ago].as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        assert_eq!(set, 0);
        let own = |p: &Path| std::fs::symlink_metadata(p).unwrap().modified().unwrap();
        let target_before = own(&target);
        touch(&link);
        assert!(SystemTime::now().duration_since(own(&link)).unwrap() < TOUCH_AFTER);
        assert_eq!(own(&target), target_before);
    }

    #[test]
    fn a_registration_that_cannot_be_renamed_in_leaves_no_temporary_link() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(&dir.path().join("cache")).unwrap();
        let output = dir.path().join("out");
        // Its place is taken by a folder that is not empty: the rename fails.
        let roots = cache.dir(Bucket::Roots).unwrap();
        let link = roots.join(Hash::of_bytes(output.as_os_str().as_encoded_bytes()).to_hex());
        std::fs::create_dir_all(link.join("x")).unwrap();
        assert!(cache.add_root(&output).is_err());
        let names: Vec<String> = std::fs::read_dir(&roots)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn buckets_have_one_folder_each() {
        let folders: std::collections::BTreeSet<String> =
            Bucket::ALL.iter().map(|b| b.folder()).collect();
        assert_eq!(folders.len(), Bucket::ALL.len());
        assert_eq!(Bucket::Validate.folder(), "actions/validate-v10");
        assert_eq!(Bucket::Envs.folder(), "envs-v4");
    }
}
