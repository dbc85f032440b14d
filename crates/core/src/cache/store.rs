//! Where cache entries are kept: the [`Store`] trait under [`super::Cache`], so that the cache's
//! logic (what a key is, how an entry verifies, what a build used) is written once and a store
//! elsewhere (an object store, a WebDAV server) is a second implementation, never a second code
//! path. The local folder ([`super::local::LocalStore`]) is today's only one.
//!
//! A store keeps **entries** (the self-verifying envelopes of [`super::entry`]: key and value
//! under one checksum) and **blobs** (archives of folders, streamed), both addressed by a
//! bucket and a key hash; it never interprets them. Every read of an entry verifies it
//! ([`Store::verify`]): a damaged entry is a miss, named on stderr, and removed only if it is
//! still the damaged bytes. A store's own failure (I/O, a network error) is an environment
//! error (exit 1), never a result and never a miss taken for one.
//!
//! Writes come in three kinds, as object stores offer them: a plain write ([`Store::put`], the
//! last writer wins: what a key's new value replaces, as the analysis memo does), a create-only
//! write ([`Store::put_if_absent`]: the first writer wins and a loser adopts the winner's bytes,
//! so that every host agrees on a nondeterministic result), and a conditional one
//! ([`Store::replace`], [`Store::remove`]: only when the stored bytes are still the version a
//! read saw, as S3's `If-Match` on an ETag; how a damaged entry is repaired without clobbering
//! a good one another writer put meanwhile).
//!
//! What is not here: the folders a job runs in place (environments, project layers, checked-out
//! trees, git mirrors, tools) need a local path and stay folders of [`super::Cache`]
//! ([`super::Cache::dir`]); a remote store holds environments as blobs (archives the env
//! stage packs and unpacks into a local folder before use).

use std::io::Read;
use std::time::SystemTime;

use super::Bucket;
use super::entry::{self, Corrupt};
use crate::error::Result;
use crate::hash::Hash;

/// An opaque token naming the bytes a store holds for a key at one moment, as a read saw them:
/// what a conditional write compares with. The local store's names the file (device, inode,
/// length, modification time: an entry is never rewritten in place), so a read hashes nothing;
/// an object store's would be its ETag.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version(String);

impl Version {
    /// A store's token (an ETag, a hash in hex, ...).
    pub fn new(token: impl Into<String>) -> Version {
        Version(token.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The bytes a store holds for a key (not verified), and their version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub version: Version,
}

/// An entry read and verified: whole, of the key and bucket asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The whole envelope (header and payload).
    bytes: Vec<u8>,
    pub version: Version,
}

impl Verified {
    /// The value's bytes (after the envelope's header).
    pub fn payload(&self) -> &[u8] {
        &self.bytes[entry::HEADER..]
    }

    /// The whole envelope, as stored.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The value's bytes, owned.
    pub fn into_payload(mut self) -> Vec<u8> {
        self.bytes.drain(..entry::HEADER);
        self.bytes
    }
}

/// What a create-only write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// The bytes given are stored: this writer won.
    Stored,
    /// Another writer's bytes were there first (not verified): this writer lost, and adopts
    /// them (or, when they do not verify, replaces them with [`Store::replace`]).
    Exists(Fetched),
}

/// One thing a store holds under a bucket, as [`Store::list`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Its name under the bucket: `<2 hex>/<hex>` for an entry or a blob. The local store also
    /// lists what else is there (a writer's temporary file, a stray file), by its relative
    /// path, so that `r2e gc` can tell leftovers.
    pub name: String,
    /// The bytes it takes in the store (the local store's: allocated blocks, as `du` counts).
    pub bytes: u64,
    /// Its last use: when it was written, or renewed by [`Store::touch`].
    pub used: SystemTime,
    /// For a local file with several hard links: its device and inode, so that a walk of the
    /// whole cache counts it once. `None` otherwise.
    pub linked: Option<(u64, u64)>,
}

/// What a store holds under a bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub items: Vec<Listed>,
    /// The bytes the bucket takes besides its items (the local store's folders).
    pub overhead: u64,
}

/// A place that keeps cache entries and blobs. Object-safe, shared by threads; it assumes no
/// file system in its signatures (a path is the local store's business).
///
/// Every method that can fail returns an environment error for a failure of the store itself
/// (the caller does not take it for a result); an absent key is `Ok(None)`.
pub trait Store: Send + Sync {
    /// Where the entry of `key` in `bucket` lives, for messages (a path, a URL).
    fn describe(&self, bucket: Bucket, key: Hash) -> String;

    /// The stored bytes of an entry, not verified (see [`Store::verify`]), with their version.
    fn get(&self, bucket: Bucket, key: Hash) -> Result<Option<Fetched>>;

    /// Whether the store holds something for `key`, without reading it.
    fn contains(&self, bucket: Bucket, key: Hash) -> Result<bool>;

    /// Stores an entry given as its bytes in parts (a header and a large payload are written
    /// without being joined), replacing what was there. Readers see the old bytes or the new
    /// ones, never a mix.
    fn put(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<()>;

    /// Stores an entry only if the store holds nothing for `key` (a create-only write);
    /// otherwise gives back what it holds, the winner's bytes.
    fn put_if_absent(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<Created>;

    /// Replaces the entry with `entry` only if the store still holds the bytes of `current`
    /// (a version a read returned); says whether it did. An entry that changed or went away
    /// meanwhile is left as it is.
    fn replace(
        &self,
        bucket: Bucket,
        key: Hash,
        current: &Version,
        entry: &[&[u8]],
    ) -> Result<bool>;

    /// Removes the entry only if the store still holds the bytes of `current`; says whether it
    /// did (a damaged entry that another writer repaired meanwhile stays).
    fn remove(&self, bucket: Bucket, key: Hash, current: &Version) -> Result<bool>;

    /// Records a use of what `key` names, renewing the last use [`Store::list`] reports (the
    /// local store renews the modification time, at most once an hour). A failure is ignored:
    /// the entry only looks older to `r2e gc`.
    fn touch(&self, bucket: Bucket, key: Hash);

    /// A stored blob, read as a stream, or `None` when there is none. Blobs are not verified
    /// here: an archive carries its own check.
    fn get_blob(&self, bucket: Bucket, key: Hash) -> Result<Option<Box<dyn Read + Send>>>;

    /// Stores a blob read from `blob` to its end, replacing what was there; readers see the
    /// old blob or the new one, never a part of it.
    fn put_blob(&self, bucket: Bucket, key: Hash, blob: &mut dyn Read) -> Result<()>;

    /// Whether the store's create-only and conditional writes are atomic (a store that can only
    /// emulate them says no, and takes no leases).
    fn conditional_writes(&self) -> bool {
        true
    }

    /// Everything the store holds under `bucket`, with sizes and last uses (for `r2e gc`).
    fn list(&self, bucket: Bucket) -> Result<Listing>;

    /// The entry of `key`, read and verified. An entry that does not verify (another key's,
    /// another bucket's, torn, flipped) is a miss: it is named on stderr and removed, if it is
    /// still those bytes.
    fn verify(&self, bucket: Bucket, key: Hash) -> Result<Option<Verified>> {
        let Some(fetched) = self.get(bucket, key)? else {
            return Ok(None);
        };
        match entry::unseal_bytes(&bucket.folder(), key, &fetched.bytes) {
            Ok(_) => Ok(Some(Verified {
                bytes: fetched.bytes,
                version: fetched.version,
            })),
            Err(why) => {
                damaged(self, bucket, key, &fetched.version, why);
                Ok(None)
            }
        }
    }
}

/// What [`write_first`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// The bytes given are stored: this writer was first.
    Stored,
    /// A damaged entry (one this writer read, or one it found in its way) is replaced by them.
    Repaired,
    /// Another writer's entry was there first and verifies (key, bucket, checksum): its bytes,
    /// which this writer adopts.
    Adopted(Fetched),
}

/// The one create-only write of a cache entry, in any store: the entry `parts` is stored unless
/// a verified one is there already, which is given back instead; a damaged one in its way (or
/// `damaged`, a version a read found damaged) is replaced with a conditional write, so that a
/// good entry another writer put meanwhile is never clobbered. `adopt`: whether the winner is
/// usable beyond its envelope (its payload decodes); one that is not counts as damaged.
/// `signer`: a remote store's signing key, which a winner must be signed with (`cache::sign`);
/// an adopted winner's bytes come back without their signature's envelope.
pub fn write_first<S: Store + ?Sized>(
    store: &S,
    bucket: Bucket,
    key: Hash,
    parts: &[&[u8]],
    mut damaged: Option<Version>,
    signer: Option<&super::sign::SigningKey>,
    adopt: &dyn Fn(&[u8]) -> std::result::Result<(), Corrupt>,
) -> Result<Placed> {
    for _ in 0..8 {
        // A damaged entry replaced by another writer meanwhile is read as any winner's.
        if let Some(version) = damaged.take()
            && store.replace(bucket, key, &version, parts)?
        {
            return Ok(Placed::Repaired);
        }
        let winner = match store.put_if_absent(bucket, key, parts)? {
            Created::Stored => return Ok(Placed::Stored),
            Created::Exists(winner) => winner,
        };
        let checked =
            super::sign::open(signer, &bucket.folder(), key, &winner.bytes).and_then(|e| {
                entry::unseal_bytes(&bucket.folder(), key, e)
                    .and_then(adopt)
                    .map(|()| e.len())
            });
        match checked {
            Ok(len) => {
                let mut winner = winner;
                let skip = winner.bytes.len() - len;
                winner.bytes.drain(..skip);
                return Ok(Placed::Adopted(winner));
            }
            Err(why) => {
                eprintln!(
                    "warning: cache entry `{}` is damaged ({why}); it is replaced",
                    store.describe(bucket, key)
                );
                damaged = Some(winner.version);
            }
        }
    }
    Err(crate::error::Error::env(format!(
        "cannot store `{}`: other writers keep changing it",
        store.describe(bucket, key)
    )))
}

/// Names a damaged entry on stderr and removes it if the store still holds the bytes of
/// `version`, so that the recomputed value takes its place.
pub fn damaged<S: Store + ?Sized>(
    store: &S,
    bucket: Bucket,
    key: Hash,
    version: &Version,
    why: Corrupt,
) {
    eprintln!(
        "warning: cache entry `{}` is damaged ({why}); it is recomputed",
        store.describe(bucket, key)
    );
    let _ = store.remove(bucket, key, version);
}

/// An entry's name under the store's root, as a build's `uses` lists it and as a local store
/// lays it out: `<bucket's folder>/<2 hex>/<hex>`.
pub fn entry_name(bucket: Bucket, key: Hash) -> String {
    let hex = key.to_hex();
    format!("{}/{}/{hex}", bucket.folder(), &hex[..2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_an_object_shared_by_threads() {
        fn shared<T: Send + Sync + ?Sized>() {}
        shared::<dyn Store>();
        let _: Option<std::sync::Arc<dyn Store>> = None;
    }
}
