//! The store shared between hosts (`[cache] remote`), under the local one: what a build reads
//! is looked up locally first, then remotely; what it computes is stored locally, then remotely
//! with a create-only write. The store itself is any [`Store`] (an object store, a WebDAV
//! server, a shared folder: `r2e-store` opens one from its URL); this module is the policy, the
//! same for every store:
//!
//! - **Verified before use.** A remote entry is unsealed (key, bucket, checksum) before it is
//!   used or copied into the local cache. One that does not verify is a miss, named on stderr,
//!   and remembered: the recomputed value replaces it with a conditional write on the version
//!   the read saw (S3's `If-Match` on its ETag), so that a good entry another host wrote
//!   meanwhile is never clobbered.
//! - **The first writer wins.** A write that finds an entry there already adopts it (the local
//!   cache takes the winner's bytes), so that a nondeterministic result (a model's answer) is
//!   the same on every host.
//! - **A failing store is not a result.** The first failure is named on stderr once; from then
//!   on the build reads and writes the local cache only. The writes the store missed are
//!   counted ([`Remote::lost`]): a shard build, whose results only the store carries to the
//!   assemble, exits 1 on any.
//! - **Only actions travel.** The buckets of action results are shared; machine-local state
//!   (stat memos, the persisted analysis, scratch) never is. Folders (environments) travel as
//!   blobs, by their own stage.
//! - **A trace.** Every host writes what it did to each action key (JSON lines: `started` on a
//!   miss, `stored`, `adopted`, `hit`, `damaged`, `repaired`, `lost`, leases), so that a cluster
//!   build can be checked for work done twice.
//!
//! - **Trust.** A host in read mode ([`Remote::read_only`], `[cache] remote_mode = "read"`)
//!   never writes: no results, no leases, no repairs. With a signing key ([`Remote::signing`],
//!   `[cache] signing_key_env`) every write carries an HMAC of its envelope (`cache::sign`), and
//!   a read takes only what verifies: an unsigned or wrongly signed entry is a miss, named on
//!   stderr, recomputed and (by a writer) replaced.
//!
//! Leases ([`Remote::lease`]): an action that several hosts may need at once (an environment
//! that repositories without dependencies share) is run by the host that creates its lease
//! object (create-only); the others wait for its result. The holder renews the lease while it
//! runs; a lease not renewed within its term (its host died) is taken over by creating the
//! next **generation** of the lease, create-only too (a fencing token): of the hosts that race
//! for an expired lease exactly one creates the next generation, on every store whose
//! create-only write is atomic, even one whose conditional replace is not (WebDAV's). A holder
//! renews its own generation only while no next one exists.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::Bucket;
use super::entry::Corrupt;
use super::sign::{self, SigningKey};
use super::store::{Created, Fetched, Placed, Store, Version};
use crate::error::Result;
use crate::hash::Hash;

/// What happened to an action key on this host, as the trace records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// A miss here and remotely: this host computes it.
    Started,
    /// This host's result is in the remote store (it won the create-only write).
    Stored,
    /// Another host's result was there first; this host adopted it.
    Adopted,
    /// Read from the remote store (and copied into the local cache).
    Hit,
    /// The remote entry did not verify: a miss, repaired when recomputed.
    Damaged,
    /// A damaged remote entry replaced with the recomputed one.
    Repaired,
    /// The result could not be written to the remote store.
    Lost,
    /// This host took the action's lease (and runs it).
    LeaseTaken,
    /// Another host holds the action's lease: this host waits for its result.
    LeaseWaited,
    /// A lease whose holder stopped renewing it, taken over.
    LeaseTakenOver,
}

/// One line of a host's action trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub host: String,
    pub pid: u32,
    pub event: Event,
    /// The bucket's folder (`actions/validate-v10`, `envs-v4`).
    pub bucket: String,
    pub key: String,
}

/// A host's action trace: JSON lines appended to a file.
pub struct Trace {
    file: Mutex<std::fs::File>,
    host: String,
}

impl Trace {
    /// Appends to the trace at `path` (created, with its folder, if need be).
    pub fn create(path: &std::path::Path) -> Result<Trace> {
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent)?;
        }
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .into_parts()
            .0;
        Ok(Trace {
            file: Mutex::new(file),
            host: host_name(),
        })
    }

    pub fn record(&self, event: Event, bucket: Bucket, key: Hash) {
        let line = TraceRecord {
            time_ms: now_ms(),
            host: self.host.clone(),
            pid: std::process::id(),
            event,
            bucket: bucket.folder(),
            key: key.to_hex(),
        };
        let mut text = serde_json::to_string(&line).expect("trace lines serialize");
        text.push('\n');
        // One write per line on a file opened for appending: lines of several processes do not
        // interleave. A trace that cannot be written only loses a line.
        let _ = self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(text.as_bytes());
    }
}

/// This host's name (the kernel's node name), for traces and lease holders.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The remote store of a cache and how it has fared in this process.
pub struct Remote {
    store: Arc<dyn Store>,
    url: String,
    lease_term: Duration,
    /// Set at the store's first failure: from then on this process uses the local cache only.
    down: AtomicBool,
    /// Writes the store did not get (while down, or failing).
    lost: AtomicU64,
    /// Remote entries that did not verify, with the version the read saw: the recomputed value
    /// replaces exactly those bytes.
    damaged: Mutex<std::collections::HashMap<(Bucket, Hash), Version>>,
    /// Whether "this store takes no leases" was said.
    said_no_leases: AtomicBool,
    trace: Option<Trace>,
    /// Whether entries found locally are written to the store when it lacks them (a shard
    /// build, whose results the store must carry to the assemble).
    publish: bool,
    /// What a lease names as its holder: host and process.
    holder: String,
    /// Signs what this host writes and checks what it reads.
    signer: Option<SigningKey>,
    /// Never writes to the store.
    read_only: bool,
}

/// A lease object, as stored (an entry of [`Bucket::Leases`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct LeaseRecord {
    holder: String,
    /// Milliseconds since the epoch after which the lease may be taken over.
    expires_ms: u64,
}

impl Remote {
    pub fn new(store: Arc<dyn Store>, url: &str, lease_term: Duration) -> Remote {
        Remote {
            store,
            url: url.to_owned(),
            lease_term,
            down: AtomicBool::new(false),
            lost: AtomicU64::new(0),
            damaged: Mutex::default(),
            said_no_leases: AtomicBool::new(false),
            trace: None,
            publish: false,
            holder: format!("{}:{}", host_name(), std::process::id()),
            signer: None,
            read_only: false,
        }
    }

    /// Signs every write with `key`, and takes from the store only what verifies with it.
    pub fn signing(mut self, key: SigningKey) -> Remote {
        self.signer = Some(key);
        self
    }

    /// Never writes to the store: what this host computes stays in its local cache.
    pub fn read_only(mut self) -> Remote {
        self.read_only = true;
        self
    }

    /// Whether this host writes to the store.
    pub fn writes(&self) -> bool {
        !self.read_only
    }

    /// The end of a message about a remote thing built here instead: " and stored again" when
    /// this host writes to the store.
    pub fn stored_again(&self) -> &'static str {
        if self.read_only {
            ""
        } else {
            " and stored again"
        }
    }

    /// The parts of an entry as stored: with a signing key, its envelope first (the entry's
    /// header, the first part's first bytes, is what it signs).
    fn enveloped<'a>(
        &self,
        bucket: Bucket,
        key: Hash,
        parts: &[&'a [u8]],
        envelope: &'a mut Vec<u8>,
    ) -> Vec<&'a [u8]> {
        let Some(signer) = &self.signer else {
            return parts.to_vec();
        };
        let mut head = Vec::with_capacity(super::entry::HEADER);
        for part in parts {
            let want = super::entry::HEADER - head.len();
            head.extend_from_slice(&part[..want.min(part.len())]);
            if head.len() == super::entry::HEADER {
                break;
            }
        }
        *envelope = signer.envelope(&bucket.folder(), key, &head).to_vec();
        let mut out: Vec<&'a [u8]> = vec![envelope.as_slice()];
        out.extend_from_slice(parts);
        out
    }

    /// The entry in stored bytes: its envelope checked (with a signing key) and taken off.
    fn opened<'b>(
        &self,
        bucket: Bucket,
        key: Hash,
        bytes: &'b [u8],
    ) -> std::result::Result<&'b [u8], Corrupt> {
        sign::open(self.signer.as_ref(), &bucket.folder(), key, bytes)
    }

    /// Records this host's actions in `trace`.
    pub fn with_trace(mut self, trace: Trace) -> Remote {
        self.trace = Some(trace);
        self
    }

    /// Makes entries found in the local cache reach the store too, when it lacks them.
    pub fn publishing(mut self) -> Remote {
        self.publish = true;
        self
    }

    /// An entry found locally: written to the store when publishing and the store lacks it.
    pub(super) fn publish(&self, bucket: Bucket, key: Hash, bytes: &[u8]) {
        if !self.publish || self.read_only {
            return;
        }
        if !self.up() {
            self.lost.fetch_add(1, Ordering::Relaxed);
            self.trace(Event::Lost, bucket, key);
            return;
        }
        match self.store.contains(bucket, key) {
            Ok(true) => {}
            Ok(false) => drop(self.put(bucket, key, &[bytes])),
            Err(e) => {
                self.failed("a read", &e);
                self.lost.fetch_add(1, Ordering::Relaxed);
                self.trace(Event::Lost, bucket, key);
            }
        }
    }

    /// Makes this host agree with the first one on `facts` (what must be the same on every
    /// host, under a name `key`): the first host to ask stores its own; a later one gets back
    /// the stored facts when they differ from its own (`Ok(None)` when they match, or when the
    /// store cannot say).
    pub fn agree<T>(&self, key: Hash, facts: &T) -> Option<T>
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq,
    {
        if !self.up() {
            return None;
        }
        let payload = postcard::to_stdvec(facts).expect("facts serialize");
        let header = super::entry::header(&Bucket::Facts.folder(), key, &payload);
        let theirs = |bytes: &[u8]| {
            self.opened(Bucket::Facts, key, bytes)
                .and_then(|entry| super::entry::unseal::<T>(&Bucket::Facts.folder(), key, entry))
        };
        if self.read_only {
            return match self.store.get(Bucket::Facts, key) {
                Ok(found) => found
                    .and_then(|f| theirs(&f.bytes).ok())
                    .filter(|first| first != facts),
                Err(e) => {
                    self.failed("a read", &e);
                    None
                }
            };
        }
        let mut envelope = Vec::new();
        let parts = self.enveloped(Bucket::Facts, key, &[&header, &payload], &mut envelope);
        match self.store.put_if_absent(Bucket::Facts, key, &parts) {
            Ok(Created::Stored) => None,
            Ok(Created::Exists(found)) => match theirs(&found.bytes) {
                Ok(first) => (first != *facts).then_some(first),
                Err(why) => {
                    // Facts this host cannot trust (damaged, or not signed with its key) give
                    // way to its own, so that the hosts after it compare with them.
                    self.damaged_entry(Bucket::Facts, key, found.version.clone(), why);
                    match self
                        .store
                        .replace(Bucket::Facts, key, &found.version, &parts)
                    {
                        Ok(true) => self.trace(Event::Repaired, Bucket::Facts, key),
                        Ok(false) => {}
                        Err(e) => self.failed("a write", &e),
                    }
                    None
                }
            },
            Err(e) => {
                self.failed("a write", &e);
                None
            }
        }
    }

    /// Asks the store for one object, so that a store that cannot be reached is said at the
    /// start of a build (once), whatever the build then needs of it.
    pub fn probe(&self) {
        if let Err(e) = self
            .store
            .contains(Bucket::Leases, Hash::of_bytes(b"r2e-probe"))
        {
            self.failed("a first read", &e);
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// How many results this process could not write to the store.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Whether the store failed in this process (it is not used any more).
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Whether the bucket's entries are shared through the store.
    pub fn shares(bucket: Bucket) -> bool {
        bucket.is_action()
    }

    /// Records what this host did to `key` of `bucket` in its trace (when it keeps one).
    pub fn trace(&self, event: Event, bucket: Bucket, key: Hash) {
        if let Some(t) = &self.trace {
            t.record(event, bucket, key);
        }
    }

    /// Notes a failure of the store: the first is named on stderr, and the store is not used
    /// again by this process.
    pub(super) fn failed(&self, what: &str, e: &dyn std::fmt::Display) {
        if !self.down.swap(true, Ordering::Relaxed) {
            eprintln!(
                "warning: the remote cache `{}` failed ({what}: {e}); this build goes on from local work and stores its results locally only",
                self.url
            );
        }
    }

    fn up(&self) -> bool {
        !self.down.load(Ordering::Relaxed)
    }

    /// The remote entry of `key`, verified; `None` on a miss, a damaged entry (named and
    /// remembered for repair) or a failing store.
    pub(super) fn get(&self, bucket: Bucket, key: Hash) -> Option<Fetched> {
        if !self.up() {
            return None;
        }
        let fetched = match self.store.get(bucket, key) {
            Ok(Some(f)) => f,
            Ok(None) => return None,
            Err(e) => {
                self.failed("a read", &e);
                return None;
            }
        };
        let opened = self.opened(bucket, key, &fetched.bytes).and_then(|entry| {
            super::entry::unseal_bytes(&bucket.folder(), key, entry).map(|_| entry)
        });
        match opened {
            Ok(entry) => Some(Fetched {
                bytes: if entry.len() == fetched.bytes.len() {
                    fetched.bytes
                } else {
                    entry.to_vec()
                },
                version: fetched.version,
            }),
            Err(why) => {
                self.damaged_entry(bucket, key, fetched.version, why);
                None
            }
        }
    }

    /// Names a remote entry that does not verify (or decode) and remembers its version, so
    /// that the recomputed value replaces it.
    pub(super) fn damaged_entry(
        &self,
        bucket: Bucket,
        key: Hash,
        version: Version,
        why: super::entry::Corrupt,
    ) {
        let what = match why {
            Corrupt::Unsigned | Corrupt::Signature => "is not trusted",
            _ => "is damaged",
        };
        let then = if self.read_only {
            "it is recomputed here (this host does not write to the store)"
        } else {
            "it is recomputed and replaced"
        };
        eprintln!(
            "warning: remote cache entry `{}` {what} ({why}); {then}",
            self.store.describe(bucket, key)
        );
        self.trace(Event::Damaged, bucket, key);
        self.damaged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((bucket, key), version);
    }

    /// Writes a computed entry: replaces a damaged one this process saw, or creates it. Returns
    /// the winner's verified bytes when another writer's entry was there first.
    pub(super) fn put(&self, bucket: Bucket, key: Hash, parts: &[&[u8]]) -> Option<Vec<u8>> {
        if self.read_only {
            return None;
        }
        if !self.up() {
            self.lost.fetch_add(1, Ordering::Relaxed);
            self.trace(Event::Lost, bucket, key);
            return None;
        }
        let damaged = self
            .damaged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(bucket, key));
        match self.write(bucket, key, parts, damaged) {
            Ok(winner) => winner,
            Err(e) => {
                self.failed("a write", &e);
                self.lost.fetch_add(1, Ordering::Relaxed);
                self.trace(Event::Lost, bucket, key);
                None
            }
        }
    }

    fn write(
        &self,
        bucket: Bucket,
        key: Hash,
        parts: &[&[u8]],
        damaged: Option<Version>,
    ) -> Result<Option<Vec<u8>>> {
        let mut envelope = Vec::new();
        let parts = self.enveloped(bucket, key, parts, &mut envelope);
        let placed = super::store::write_first(
            &*self.store,
            bucket,
            key,
            &parts,
            damaged,
            self.signer.as_ref(),
            &|_| Ok(()),
        )?;
        Ok(match placed {
            Placed::Stored => {
                self.trace(Event::Stored, bucket, key);
                None
            }
            Placed::Repaired => {
                self.trace(Event::Repaired, bucket, key);
                None
            }
            Placed::Adopted(winner) => {
                self.trace(Event::Adopted, bucket, key);
                Some(winner.bytes)
            }
        })
    }

    /// A blob from the store (an archive of a folder), or `None` (a miss, or a failing store).
    /// Its bytes are read as they were given to [`Remote::put_blob`], head first. With a
    /// signing key, a blob whose head is not signed with it is `Some(Err(why))`: the caller
    /// names it and builds the thing here (its head must authenticate the rest, which the
    /// caller checks as it reads).
    pub fn get_blob(
        &self,
        bucket: Bucket,
        key: Hash,
    ) -> Option<std::result::Result<Box<dyn std::io::Read + Send>, Corrupt>> {
        if !self.up() {
            return None;
        }
        let blob = match self.store.get_blob(bucket, key) {
            Ok(blob) => blob?,
            Err(e) => {
                self.failed("a read", &e);
                return None;
            }
        };
        match self.open_blob(bucket, key, blob) {
            Ok(opened) => Some(Ok(opened)),
            // A read that failed is the store's failure, not a damaged blob.
            Err(Opened::Failed(e)) => {
                self.failed("a read", &e);
                None
            }
            Err(Opened::Bad(why)) => Some(Err(why)),
        }
    }

    /// A blob's reader past its envelope (checked with a signing key).
    fn open_blob(
        &self,
        bucket: Bucket,
        key: Hash,
        mut blob: Box<dyn std::io::Read + Send>,
    ) -> std::result::Result<Box<dyn std::io::Read + Send>, Opened> {
        use std::io::Read;
        let mut start = [0u8; sign::ENVELOPE];
        let got = read_up_to(&mut blob, &mut start).map_err(Opened::Failed)?;
        let Some(envelope) = sign::envelope_of(&start[..got]) else {
            if self.signer.is_some() {
                return Err(Opened::Bad(Corrupt::Unsigned));
            }
            return Ok(Box::new(
                std::io::Cursor::new(start[..got].to_vec()).chain(blob),
            ));
        };
        if envelope.head_len > MAX_SIGNED_HEAD {
            return Err(Opened::Bad(Corrupt::Magic));
        }
        let mut head = vec![0u8; envelope.head_len];
        blob.read_exact(&mut head).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Opened::Bad(Corrupt::Short)
            } else {
                Opened::Failed(e)
            }
        })?;
        if let Some(signer) = &self.signer {
            sign::check(signer, &bucket.folder(), key, &envelope, &head).map_err(Opened::Bad)?;
        }
        Ok(Box::new(std::io::Cursor::new(head).chain(blob)))
    }

    /// Stores a blob: `head`, then `rest` to its end. With a signing key, `head` is what the
    /// signature covers: it must authenticate `rest` (an archive's sealed header names the
    /// rest's length and hash). A failure is counted as a lost write.
    pub fn put_blob(&self, bucket: Bucket, key: Hash, head: &[u8], rest: &mut dyn std::io::Read) {
        use std::io::Read;
        if self.read_only {
            return;
        }
        if self.up() {
            let envelope = match &self.signer {
                Some(signer) => signer.envelope(&bucket.folder(), key, head).to_vec(),
                None => Vec::new(),
            };
            let mut blob = std::io::Cursor::new(envelope)
                .chain(std::io::Cursor::new(head))
                .chain(rest);
            match self.store.put_blob(bucket, key, &mut blob) {
                Ok(()) => {
                    self.trace(Event::Stored, bucket, key);
                    return;
                }
                Err(e) => self.failed("a write", &e),
            }
        }
        self.lost.fetch_add(1, Ordering::Relaxed);
        self.trace(Event::Lost, bucket, key);
    }

    /// Takes the lease on the action `key` of `bucket`, or waits while another host holds it,
    /// until `done()` says its result is there. Returns a guard while this host is to run the
    /// action (renewed until dropped), `None` once the result is there. A store that cannot
    /// write conditionally, or that fails, takes no leases: the action runs here (and may run
    /// twice).
    pub fn lease(
        self: &Arc<Self>,
        bucket: Bucket,
        key: Hash,
        done: &dyn Fn() -> bool,
    ) -> Option<LeaseGuard> {
        let free = || Some(LeaseGuard::none());
        if !self.up() || self.read_only {
            return free();
        }
        if !self.store.conditional_writes() {
            if !self.said_no_leases.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "warning: the remote cache `{}` cannot write conditionally: it takes no leases, and an action two hosts need at once may run on both",
                    self.url
                );
            }
            return free();
        }
        let mut generation = 0;
        let mut waited = false;
        loop {
            if done() {
                return None;
            }
            let lease = LeaseAt::of(bucket, key, generation);
            let mine = self.lease_parts(lease.key, now_ms() + self.lease_term.as_millis() as u64);
            let parts: [&[u8]; 2] = [&mine.0, &mine.1];
            let taken = match self.store.put_if_absent(Bucket::Leases, lease.key, &parts) {
                Ok(Created::Stored) if generation == 0 => Some(Event::LeaseTaken),
                Ok(Created::Stored) => Some(Event::LeaseTakenOver),
                Ok(Created::Exists(theirs)) => {
                    // A lease that does not verify (or, with a signing key, is not signed
                    // with it) holds nothing.
                    let expired = self
                        .lease_of(lease.key, &theirs.bytes)
                        .is_none_or(|l| l.expires_ms < now_ms());
                    if expired {
                        // Its successor, if no other host has created it first.
                        generation += 1;
                        continue;
                    }
                    None
                }
                Err(e) => {
                    self.failed("a lease", &e);
                    return free();
                }
            };
            if let Some(event) = taken {
                self.trace(event, bucket, key);
                // The action may have finished between the check and the lease.
                if done() {
                    self.release(lease);
                    return None;
                }
                return Some(LeaseGuard::renewing(Arc::clone(self), lease));
            }
            if !waited {
                waited = true;
                self.trace(Event::LeaseWaited, bucket, key);
                eprintln!(
                    "waiting for another host to finish `{}`",
                    self.store.describe(bucket, key)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The entry of a lease naming this holder, valid until `expires_ms`: its head (the
    /// envelope, if signing, and the header) and payload.
    fn lease_parts(&self, lease_key: Hash, expires_ms: u64) -> (Vec<u8>, Vec<u8>) {
        let payload = postcard::to_stdvec(&LeaseRecord {
            holder: self.holder.clone(),
            expires_ms,
        })
        .expect("leases serialize");
        let header = super::entry::header(&Bucket::Leases.folder(), lease_key, &payload);
        let mut head = match &self.signer {
            Some(signer) => signer
                .envelope(&Bucket::Leases.folder(), lease_key, &header)
                .to_vec(),
            None => Vec::new(),
        };
        head.extend_from_slice(&header);
        (head, payload)
    }

    /// The lease stored in `bytes`, when it verifies.
    fn lease_of(&self, lease_key: Hash, bytes: &[u8]) -> Option<LeaseRecord> {
        let entry = self.opened(Bucket::Leases, lease_key, bytes).ok()?;
        super::entry::unseal::<LeaseRecord>(&Bucket::Leases.folder(), lease_key, entry).ok()
    }

    /// Renews (or, with `until` in the past, releases) this holder's lease: only while the store
    /// still holds this holder's lease and no host has taken it over (its next generation does
    /// not exist). Says whether it still holds it. Only the holder writes its generation after
    /// creating it, so a store's replace need not be atomic here.
    fn renew(&self, lease: LeaseAt, until: u64) -> bool {
        let Ok(Some(current)) = self.store.get(Bucket::Leases, lease.key) else {
            return false;
        };
        let ours = self
            .lease_of(lease.key, &current.bytes)
            .is_some_and(|l| l.holder == self.holder);
        if !ours || !matches!(self.store.contains(Bucket::Leases, lease.next), Ok(false)) {
            return false;
        }
        let (header, payload) = self.lease_parts(lease.key, until);
        self.store
            .replace(
                Bucket::Leases,
                lease.key,
                &current.version,
                &[&header, &payload],
            )
            .unwrap_or(false)
    }

    fn release(&self, lease: LeaseAt) {
        self.renew(lease, 0);
    }
}

/// Why a blob could not be opened: its bytes, or the read.
enum Opened {
    Bad(Corrupt),
    Failed(std::io::Error),
}

/// The longest signed head of a blob a reader accepts.
const MAX_SIGNED_HEAD: usize = 2 << 20;

/// Reads into `buf` until it is full or the reader ends: how many bytes it got.
fn read_up_to(r: &mut dyn std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// One generation of an action's lease: its entry's key, and its successor's (which exists
/// once another host took the lease over).
#[derive(Clone, Copy, Debug)]
struct LeaseAt {
    key: Hash,
    next: Hash,
}

impl LeaseAt {
    /// Generation `generation` of the lease on the action `key` of `bucket`: the blake3 of
    /// (the bucket's folder, the key, the generation).
    fn of(bucket: Bucket, key: Hash, generation: u64) -> LeaseAt {
        let at = |g: u64| Hash::of_key(&(bucket.folder(), key, g));
        LeaseAt {
            key: at(generation),
            next: at(generation + 1),
        }
    }
}

/// While alive, this host holds an action's lease: a thread renews it every third of its term;
/// dropping it releases the lease (the action's result is stored by then, or it failed and
/// another host may try).
pub struct LeaseGuard {
    inner: Option<(Arc<Remote>, LeaseAt, std::sync::mpsc::Sender<()>)>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl LeaseGuard {
    /// A guard that holds nothing (no store, or one without leases).
    pub fn none() -> LeaseGuard {
        LeaseGuard {
            inner: None,
            renewer: None,
        }
    }

    fn renewing(remote: Arc<Remote>, lease: LeaseAt) -> LeaseGuard {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let r = Arc::clone(&remote);
        let every = remote.lease_term / 3;
        let renewer = std::thread::Builder::new()
            .name("r2e-lease".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    let until = now_ms() + r.lease_term.as_millis() as u64;
                    if !r.renew(lease, until) {
                        break;
                    }
                }
            })
            .ok();
        LeaseGuard {
            inner: Some((remote, lease, stop)),
            renewer,
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some((remote, lease, stop)) = self.inner.take() {
            drop(stop);
            if let Some(r) = self.renewer.take() {
                let _ = r.join();
            }
            remote.release(lease);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Cache, LocalStore};

    /// Two hosts' caches over one shared folder as their remote store, each with a trace.
    fn hosts(shared: &std::path::Path, n: usize) -> (Vec<Cache>, Vec<tempfile::TempDir>) {
        let mut caches = Vec::new();
        let mut dirs = Vec::new();
        for i in 0..n {
            let dir = tempfile::tempdir().unwrap();
            let mut cache = Cache::open(dir.path()).unwrap();
            let remote = Remote::new(
                Arc::new(LocalStore::new(shared)),
                "file:///shared",
                Duration::from_secs(6),
            )
            .with_trace(Trace::create(&dir.path().join(format!("trace-{i}.jsonl"))).unwrap());
            cache.set_remote(remote);
            caches.push(cache);
            dirs.push(dir);
        }
        (caches, dirs)
    }

    /// A host's cache over the shared folder, set up by `setup` (signing, read only).
    fn host(
        shared: &std::path::Path,
        setup: impl FnOnce(Remote) -> Remote,
    ) -> (Cache, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = Cache::open(dir.path()).unwrap();
        let remote = Remote::new(
            Arc::new(LocalStore::new(shared)),
            "file:///shared",
            Duration::from_secs(6),
        )
        .with_trace(Trace::create(&dir.path().join("trace-0.jsonl")).unwrap());
        cache.set_remote(setup(remote));
        (cache, dir)
    }

    /// Every file under `dir`, with its bytes.
    fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
            .collect()
    }

    const KEY: &[u8] = b"the signing key of the lab's CI";

    #[test]
    fn a_read_only_host_reads_the_store_and_never_writes_to_it() {
        let shared = tempfile::tempdir().unwrap();
        let (writer, _w) = host(shared.path(), |r| r);
        let (reader, rdir) = host(shared.path(), |r| r.read_only().publishing());
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        writer.put(Bucket::Validate, a, "stored").unwrap();
        let before = files(shared.path());
        // A hit; a result of its own, a model's answer, a blob, a lease, facts: none written.
        assert_eq!(
            reader.get::<String>(Bucket::Validate, a).as_deref(),
            Some("stored")
        );
        reader.put(Bucket::Validate, b, "mine").unwrap();
        assert_eq!(
            reader
                .put_first(Bucket::Llm, b, "answer".to_string())
                .unwrap(),
            "answer"
        );
        let remote = Arc::clone(reader.remote().unwrap());
        remote.put_blob(Bucket::Envs, b, b"head", &mut &b"rest"[..]);
        let guard = remote.lease(Bucket::Envs, b, &|| false);
        assert!(guard.is_some_and(|g| g.inner.is_none()), "no lease taken");
        assert_eq!(remote.agree(b, &"facts".to_string()), None);
        assert_eq!(files(shared.path()), before);
        assert_eq!(remote.lost(), 0, "a write it does not make is not lost");
        // Its own results stay in its local cache.
        assert_eq!(
            reader.get::<String>(Bucket::Validate, b).as_deref(),
            Some("mine")
        );
        assert!(!events(rdir.path(), 0).contains(&Event::Stored));
    }

    /// A store shared by a host that signs its entries (`signed`) and one that does not
    /// (`unsigned`), each with an entry of its own: `a` signed, `b` unsigned ("forged").
    struct Signing {
        shared: tempfile::TempDir,
        signed: Cache,
        unsigned: Cache,
        a: Hash,
        b: Hash,
        _dirs: Vec<tempfile::TempDir>,
    }

    fn signing_key() -> SigningKey {
        SigningKey::new("K", KEY)
    }

    fn signing() -> Signing {
        let shared = tempfile::tempdir().unwrap();
        let (signed, s) = host(shared.path(), |r| r.signing(signing_key()));
        let (unsigned, u) = host(shared.path(), |r| r);
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        signed.put(Bucket::Validate, a, "signed").unwrap();
        unsigned.put(Bucket::Validate, b, "forged").unwrap();
        Signing {
            shared,
            signed,
            unsigned,
            a,
            b,
            _dirs: vec![s, u],
        }
    }

    impl Signing {
        /// Another host on the store, with the key or (`signs` false) without.
        fn host(&mut self, signs: bool) -> Cache {
            let (cache, dir) = host(self.shared.path(), |r| {
                if signs { r.signing(signing_key()) } else { r }
            });
            self._dirs.push(dir);
            cache
        }

        /// No file of the store holds the key.
        fn assert_no_key_stored(&self) {
            for (path, bytes) in files(self.shared.path()) {
                assert!(
                    !bytes.windows(KEY.len()).any(|w| w == KEY),
                    "{}",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn with_a_signing_key_only_what_its_holders_wrote_is_taken() {
        let mut s = signing();
        let (a, b) = (s.a, s.b);
        // A reader with the key: the signed entry is a hit, the unsigned one a miss.
        let (checker, cdir) = host(s.shared.path(), |r| r.signing(signing_key()));
        assert_eq!(
            checker.get::<String>(Bucket::Validate, a).as_deref(),
            Some("signed")
        );
        assert_eq!(checker.get::<String>(Bucket::Validate, b), None);
        assert!(events(cdir.path(), 0).contains(&Event::Damaged));
        // Its recomputed value replaces the unsigned one, signed.
        checker.put(Bucket::Validate, b, "recomputed").unwrap();
        assert!(events(cdir.path(), 0).contains(&Event::Repaired));
        let later = s.host(true);
        assert_eq!(
            later.get::<String>(Bucket::Validate, b).as_deref(),
            Some("recomputed")
        );
        // A reader without the key takes signed entries (it checks nothing).
        let plain = s.host(false);
        assert_eq!(
            plain.get::<String>(Bucket::Validate, a).as_deref(),
            Some("signed")
        );

        // A signed entry whose payload was changed, its checksum made good again: a miss.
        let store = LocalStore::new(s.shared.path());
        let stored = store.get(Bucket::Validate, a).unwrap().unwrap().bytes;
        let mut forged = stored[..sign::ENVELOPE].to_vec();
        forged.extend_from_slice(&super::super::entry::seal(
            &Bucket::Validate.folder(),
            a,
            "poisoned",
        ));
        store.put(Bucket::Validate, a, &[&forged]).unwrap();
        let fresh = s.host(true);
        assert_eq!(fresh.get::<String>(Bucket::Validate, a), None);
        assert_eq!(
            plain.get::<String>(Bucket::Validate, a).as_deref(),
            Some("signed"),
            "from its local cache"
        );
        s.assert_no_key_stored();
    }

    #[test]
    fn with_a_signing_key_the_first_signed_answer_wins() {
        let mut s = signing();
        // A model's answer: the first signed one wins; an unsigned winner is replaced.
        let c = Hash::of_bytes(b"c");
        assert_eq!(
            s.unsigned
                .put_first(Bucket::Llm, c, "theirs".to_string())
                .unwrap(),
            "theirs"
        );
        assert_eq!(
            s.signed
                .put_first(Bucket::Llm, c, "ours".to_string())
                .unwrap(),
            "ours"
        );
        let other = s.host(true);
        assert_eq!(
            other.put_first(Bucket::Llm, c, "late".to_string()).unwrap(),
            "ours"
        );
        s.assert_no_key_stored();
    }

    #[test]
    fn with_a_signing_key_only_its_holders_blobs_are_trusted() {
        let mut s = signing();
        let (a, b, c) = (s.a, s.b, Hash::of_bytes(b"c"));
        // Blobs: the head is signed; an unsigned blob or one signed with another key is not
        // trusted; read back as given.
        let remote = Arc::clone(s.signed.remote().unwrap());
        remote.put_blob(Bucket::Envs, a, b"head", &mut &b"rest"[..]);
        let mut back = Vec::new();
        std::io::Read::read_to_end(
            &mut remote.get_blob(Bucket::Envs, a).unwrap().unwrap(),
            &mut back,
        )
        .unwrap();
        assert_eq!(back, b"headrest");
        Arc::clone(s.unsigned.remote().unwrap()).put_blob(
            Bucket::Envs,
            b,
            b"head",
            &mut &b"rest"[..],
        );
        assert_eq!(
            remote.get_blob(Bucket::Envs, b).unwrap().err(),
            Some(Corrupt::Unsigned)
        );
        let (stranger, _t) = host(s.shared.path(), |r| {
            r.signing(SigningKey::new("K", b"a stranger's key, thirty-two bytes"))
        });
        Arc::clone(stranger.remote().unwrap()).put_blob(
            Bucket::Envs,
            c,
            b"head",
            &mut &b"rest"[..],
        );
        assert_eq!(
            remote.get_blob(Bucket::Envs, c).unwrap().err(),
            Some(Corrupt::Signature)
        );
        let plain = s.host(false);
        let mut plain_back = Vec::new();
        std::io::Read::read_to_end(
            &mut plain
                .remote()
                .unwrap()
                .get_blob(Bucket::Envs, a)
                .unwrap()
                .unwrap(),
            &mut plain_back,
        )
        .unwrap();
        assert_eq!(plain_back, b"headrest");
        s.assert_no_key_stored();
    }

    #[test]
    fn with_a_signing_key_unsigned_leases_and_facts_give_way() {
        let mut s = signing();
        let remote = Arc::clone(s.signed.remote().unwrap());
        let store = LocalStore::new(s.shared.path());
        // Leases: an unsigned lease holds nothing for a signing host.
        let d = Hash::of_bytes(b"d");
        let lease_key = LeaseAt::of(Bucket::Envs, d, 0).key;
        let (_, payload) =
            Arc::clone(s.unsigned.remote().unwrap()).lease_parts(lease_key, now_ms() + 600_000);
        let header = super::super::entry::header(&Bucket::Leases.folder(), lease_key, &payload);
        store
            .put(Bucket::Leases, lease_key, &[&header, &payload])
            .unwrap();
        let guard = remote.lease(Bucket::Envs, d, &|| false).unwrap();
        assert!(guard.inner.is_some(), "the unsigned lease was taken over");
        drop(guard);

        // Facts: unsigned ones give way to a signing host's, which the next signing host
        // compares with.
        let f = Hash::of_bytes(b"facts");
        assert_eq!(
            s.unsigned
                .remote()
                .unwrap()
                .agree(f, &"python 3.9".to_string()),
            None
        );
        assert_eq!(
            remote.agree(f, &"python 3.11".to_string()),
            None,
            "unsigned: ignored"
        );
        let other = s.host(true);
        assert_eq!(
            other
                .remote()
                .unwrap()
                .agree(f, &"python 3.12".to_string())
                .as_deref(),
            Some("python 3.11"),
            "the signed facts replaced the unsigned ones"
        );
        s.assert_no_key_stored();
    }

    fn events(dir: &std::path::Path, i: usize) -> Vec<Event> {
        std::fs::read_to_string(dir.join(format!("trace-{i}.jsonl")))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<TraceRecord>(l).unwrap().event)
            .collect()
    }

    #[test]
    fn a_result_one_host_stored_is_a_hit_on_another() {
        let shared = tempfile::tempdir().unwrap();
        let (caches, dirs) = hosts(shared.path(), 2);
        let key = Hash::of_bytes(b"k");
        assert_eq!(caches[0].get::<String>(Bucket::Validate, key), None);
        caches[0].put(Bucket::Validate, key, "runs").unwrap();
        assert_eq!(
            caches[1].get::<String>(Bucket::Validate, key).as_deref(),
            Some("runs")
        );
        // Copied into the second host's local cache: read there without the store now.
        assert!(
            LocalStore::new(dirs[1].path())
                .contains(Bucket::Validate, key)
                .unwrap()
        );
        assert_eq!(events(dirs[0].path(), 0), [Event::Started, Event::Stored]);
        assert_eq!(events(dirs[1].path(), 1), [Event::Hit]);
        // Machine-local buckets never travel.
        caches[0].put(Bucket::Stat, key, "memo").unwrap();
        assert_eq!(caches[1].get::<String>(Bucket::Stat, key), None);
    }

    #[test]
    fn a_damaged_remote_entry_is_a_miss_and_is_repaired() {
        let shared = tempfile::tempdir().unwrap();
        let (caches, dirs) = hosts(shared.path(), 3);
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        caches[0].put(Bucket::Generate, a, "harness a").unwrap();
        caches[0].put(Bucket::Generate, b, "harness b").unwrap();
        let store = LocalStore::new(shared.path());
        // One flipped byte in a; b's valid entry copied under a third key.
        let pa = store.path(Bucket::Generate, a);
        let mut bytes = std::fs::read(&pa).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&pa, &bytes).unwrap();
        let c = Hash::of_bytes(b"c");
        let pc = store.path(Bucket::Generate, c);
        std::fs::create_dir_all(pc.parent().unwrap()).unwrap();
        std::fs::copy(store.path(Bucket::Generate, b), &pc).unwrap();
        assert_eq!(caches[1].get::<String>(Bucket::Generate, a), None);
        assert_eq!(caches[1].get::<String>(Bucket::Generate, c), None);
        assert_eq!(
            events(dirs[1].path(), 1),
            [
                Event::Damaged,
                Event::Started,
                Event::Damaged,
                Event::Started
            ]
        );
        // Recomputed: the damaged copies are replaced, and a third host reads the new values.
        caches[1].put(Bucket::Generate, a, "harness a").unwrap();
        caches[1].put(Bucket::Generate, c, "harness c").unwrap();
        assert_eq!(
            caches[2].get::<String>(Bucket::Generate, a).as_deref(),
            Some("harness a")
        );
        assert_eq!(
            caches[2].get::<String>(Bucket::Generate, c).as_deref(),
            Some("harness c")
        );
        let e = events(dirs[1].path(), 1);
        assert_eq!(e[4..], [Event::Repaired, Event::Repaired]);
    }

    #[test]
    fn the_first_answer_stored_is_the_answer_on_every_host() {
        let shared = tempfile::tempdir().unwrap();
        let (caches, dirs) = hosts(shared.path(), 2);
        let key = Hash::of_bytes(b"request");
        let first = caches[0]
            .put_first(Bucket::Llm, key, "answer one".to_owned())
            .unwrap();
        let second = caches[1]
            .put_first(Bucket::Llm, key, "answer two".to_owned())
            .unwrap();
        assert_eq!(
            (first.as_str(), second.as_str()),
            ("answer one", "answer one")
        );
        assert_eq!(events(dirs[1].path(), 1), [Event::Adopted]);
        // The loser's local cache holds the winner's answer.
        let local = LocalStore::new(dirs[1].path()).verify(Bucket::Llm, key);
        let payload = local.unwrap().unwrap().into_payload();
        assert_eq!(
            postcard::from_bytes::<String>(&payload).unwrap(),
            "answer one"
        );
        // A deterministic result's write that loses also leaves the winner's bytes locally.
        caches[0].put(Bucket::Check, key, "x").unwrap();
        caches[1].put(Bucket::Check, key, "y").unwrap();
        assert_eq!(
            caches[1].get::<String>(Bucket::Check, key).as_deref(),
            Some("x")
        );
    }

    /// A store whose every call fails, as an unreachable server's would.
    struct Down;

    impl Store for Down {
        fn describe(&self, _: Bucket, key: Hash) -> String {
            format!("down/{}", key.to_hex())
        }
        fn get(&self, _: Bucket, _: Hash) -> Result<Option<super::super::store::Fetched>> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn contains(&self, _: Bucket, _: Hash) -> Result<bool> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn put(&self, _: Bucket, _: Hash, _: &[&[u8]]) -> Result<()> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn put_if_absent(&self, _: Bucket, _: Hash, _: &[&[u8]]) -> Result<Created> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn replace(&self, _: Bucket, _: Hash, _: &Version, _: &[&[u8]]) -> Result<bool> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn remove(&self, _: Bucket, _: Hash, _: &Version) -> Result<bool> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn touch(&self, _: Bucket, _: Hash) {}
        fn get_blob(&self, _: Bucket, _: Hash) -> Result<Option<Box<dyn std::io::Read + Send>>> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn put_blob(&self, _: Bucket, _: Hash, _: &mut dyn std::io::Read) -> Result<()> {
            Err(crate::error::Error::env("connection refused"))
        }
        fn list(&self, _: Bucket) -> Result<super::super::store::Listing> {
            Err(crate::error::Error::env("connection refused"))
        }
    }

    #[test]
    fn a_failing_store_leaves_the_local_cache_and_counts_what_it_missed() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = Cache::open(dir.path()).unwrap();
        cache.set_remote(Remote::new(
            Arc::new(Down),
            "s3://down",
            Duration::from_secs(6),
        ));
        let key = Hash::of_bytes(b"k");
        assert_eq!(cache.get::<String>(Bucket::Validate, key), None);
        cache.put(Bucket::Validate, key, "runs").unwrap();
        cache
            .put(Bucket::Validate, Hash::of_bytes(b"j"), "more")
            .unwrap();
        assert_eq!(
            cache.get::<String>(Bucket::Validate, key).as_deref(),
            Some("runs")
        );
        let remote = cache.remote().unwrap();
        assert!(remote.is_down());
        assert_eq!(remote.lost(), 2);
        // A lease on a failing store is no lease: the action runs here.
        assert!(remote.lease(Bucket::Envs, key, &|| false).is_some());
    }

    #[test]
    fn one_host_runs_a_leased_action_and_a_dead_holders_lease_is_taken_over() {
        let shared = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(LocalStore::new(shared.path()));
        let remote = |term| Arc::new(Remote::new(Arc::clone(&store), "file:///shared", term));
        let (a, b) = (
            remote(Duration::from_secs(6)),
            remote(Duration::from_secs(6)),
        );
        let key = Hash::of_bytes(b"env");
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let guard = a.lease(Bucket::Envs, key, &|| d.load(Ordering::Relaxed));
        assert!(guard.is_some(), "the first host takes the lease");
        let waiter = {
            let (b, done) = (Arc::clone(&b), Arc::clone(&done));
            std::thread::spawn(move || {
                b.lease(Bucket::Envs, key, &|| done.load(Ordering::Relaxed))
                    .is_some()
            })
        };
        std::thread::sleep(Duration::from_millis(1500));
        done.store(true, Ordering::Relaxed);
        drop(guard);
        assert!(
            !waiter.join().unwrap(),
            "the waiter finds the result, and runs nothing"
        );
        // A holder that dies without releasing: its lease expires, and is taken over.
        let dead = remote(Duration::from_secs(1));
        let other = Hash::of_bytes(b"other env");
        let lease = LeaseAt::of(Bucket::Envs, other, 0);
        let (header, payload) = dead.lease_parts(lease.key, now_ms() + 1000);
        assert_eq!(
            store
                .put_if_absent(Bucket::Leases, lease.key, &[&header, &payload])
                .unwrap(),
            Created::Stored
        );
        let started = std::time::Instant::now();
        assert!(b.lease(Bucket::Envs, other, &|| false).is_some());
        assert!(started.elapsed() >= Duration::from_millis(500));
    }
}
