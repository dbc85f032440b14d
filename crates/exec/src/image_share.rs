//! The Docker backend's base image between hosts, through the remote store (`[cache] remote`):
//! a host whose daemon lacks the image takes the one another host built instead of building it.
//!
//! The entry of a base image is a blob of the bucket `images-v1` under [`key`] (its tag, and the
//! registry it travels through, if any): `MAGIC` (8 bytes), the length of a header (4 bytes,
//! little-endian), the header (a sealed entry, [`entry::seal`], under the scope
//! `images-v1/archive` and the key: the tag, the image's ID, where it was pushed, and the length
//! and blake3 hash of the payload), then the payload:
//!
//! - without a registry, the image's `docker save` archive compressed with zstd (level 3, with
//!   zstd's own frame checksum), kept whole in a file of the cache as it is read and checked
//!   against the header's length and hash before it is decompressed and given to
//!   `docker load`;
//! - with `[sandbox] registry = "HOST/PREFIX"`, nothing: the header names the digest the image
//!   was pushed under (`HOST/PREFIX/r2e-base@sha256:…`), which the daemon pulls and tags with
//!   the base image's tag.
//!
//! Either way the image is used only when the daemon then has the tag with the ID the header
//! records. Anything else is a damaged entry: named on stderr, a miss (the image is built here)
//! and repaired (the image built here replaces it). A failure of the daemon, the disk or the
//! registry is no damage: the image is built here and the entry left as it is. The host that
//! builds an image holds the store's lease on it meanwhile, so that hosts that start together
//! build it once.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::sandbox::docker::{self, Docker};
use r2e_core::cache::remote::{Event, Remote};
use r2e_core::cache::{Bucket, entry};
use r2e_core::error::{Error, Result};
use r2e_core::hash::{Hash, Hashing};

const MAGIC: &[u8; 8] = b"r2e-img1";

/// The largest header a reader accepts.
const MAX_HEADER: u32 = 1 << 16;

/// The repository (under a registry's prefix) base images are pushed to.
const PUSHED_REPO: &str = "r2e-base";

/// What the header of an image's entry holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The base image's tag (`r2e-base:…`).
    pub tag: String,
    /// Its ID (`sha256:…`, the digest of its configuration) where it was built.
    pub id: String,
    /// The reference it was pushed under (`HOST/PREFIX/r2e-base@sha256:…`), with a registry.
    pub pushed: Option<String>,
    /// The payload's length and blake3 hash.
    pub payload_len: u64,
    pub payload_blake3: [u8; 32],
}

/// The key of the entry of the base image `tag` travelling through `registry` (none: as an
/// archive).
pub fn key(tag: &str, registry: Option<&str>) -> Hash {
    Hash::of_key(&(Bucket::Images.folder(), tag, registry))
}

fn scope() -> String {
    format!("{}/archive", Bucket::Images.folder())
}

/// Where base images travel between hosts: the remote store, and the registry if one is
/// configured.
pub struct Share {
    /// The remote store.
    pub remote: Arc<Remote>,
    /// `[sandbox] registry`.
    pub registry: Option<String>,
    /// A folder of this host's cache for archives being packed or unpacked (the cache's
    /// scratch: their names carry the pid, so a dead process's are removed).
    pub scratch: PathBuf,
}

/// What looking for an image in the store found.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// Loaded (or pulled) onto the daemon, its ID checked.
    Loaded,
    /// The store has none.
    Miss,
    /// The entry is damaged, as stderr says: build the image and replace it.
    Damaged,
    /// The daemon, the disk or the registry failed, as stderr says: build the image, and leave
    /// the entry.
    Failed,
}

/// Why an entry could not be used.
enum Bad {
    /// The entry's fault.
    Damaged(String),
    /// This host's, the daemon's or the registry's.
    Failed(Error),
}

impl From<Error> for Bad {
    fn from(e: Error) -> Self {
        Bad::Failed(e)
    }
}

impl From<std::io::Error> for Bad {
    fn from(e: std::io::Error) -> Self {
        Bad::Failed(e.into())
    }
}

impl Share {
    fn key(&self, tag: &str) -> Hash {
        key(tag, self.registry.as_deref())
    }

    /// The base image `tag` on the daemon: already there, loaded from the store, or made by
    /// `make` (which builds and checks it, and says whether it built it), then stored for the
    /// other hosts. Returns whether this host built it.
    pub fn obtain(
        &self,
        docker: &Docker,
        tag: &str,
        make: &dyn Fn() -> Result<bool>,
    ) -> Result<bool> {
        let key = self.key(tag);
        if docker::has_image(docker, tag) {
            // A host that has the image gives it to a store that lacks it.
            if !self.remote.is_down()
                && self.remote.store().contains(Bucket::Images, key).ok() == Some(false)
            {
                self.store(docker, tag);
            }
            return Ok(false);
        }
        let build = |store: bool| -> Result<bool> {
            self.remote.trace(Event::Started, Bucket::Images, key);
            let built = make()?;
            if store {
                self.store(docker, tag);
            }
            Ok(built)
        };
        match self.fetch(docker, tag) {
            Found::Loaded => return Ok(false),
            Found::Damaged => return build(true),
            Found::Failed => return build(false),
            Found::Miss => {}
        }
        let present = || {
            self.remote
                .store()
                .contains(Bucket::Images, key)
                .unwrap_or(false)
        };
        match self.remote.lease(Bucket::Images, key, &present) {
            Some(guard) => {
                let built = build(true);
                drop(guard);
                built
            }
            // Another host stored it meanwhile.
            None => match self.fetch(docker, tag) {
                Found::Loaded => Ok(false),
                Found::Damaged => build(true),
                Found::Failed | Found::Miss => build(false),
            },
        }
    }

    /// Loads (or pulls) the image of `tag` from the store onto the daemon.
    fn fetch(&self, docker: &Docker, tag: &str) -> Found {
        let key = self.key(tag);
        let Some(blob) = self.remote.get_blob(Bucket::Images, key) else {
            return Found::Miss;
        };
        let name = self.remote.store().describe(Bucket::Images, key);
        let blob = match blob {
            Ok(blob) => blob,
            Err(why) => {
                eprintln!(
                    "warning: remote image `{name}` is not trusted ({why}); the base image {tag} is built here{}",
                    self.remote.stored_again()
                );
                self.remote.trace(Event::Damaged, Bucket::Images, key);
                return Found::Damaged;
            }
        };
        let started = Instant::now();
        let tmp = self.scratch.join(format!(
            "env-{}-image-{}.tar",
            std::process::id(),
            &key.to_hex()[..16]
        ));
        let got = fs_err::create_dir_all(&self.scratch)
            .map_err(Bad::from)
            .and_then(|()| receive(docker, blob, key, tag, self.registry.as_deref(), &tmp));
        let _ = fs_err::remove_file(&tmp);
        match got {
            Ok(header) => {
                let how = match &header.pushed {
                    Some(reference) => format!("pulled `{reference}`"),
                    None => "its archive".to_owned(),
                };
                r2e_core::log::timing(
                    &format!("fetch the base image {tag} ({how})"),
                    started.elapsed(),
                );
                eprintln!("loaded the base image {tag} from the remote cache ({how})");
                self.remote.trace(Event::Hit, Bucket::Images, key);
                Found::Loaded
            }
            Err(Bad::Damaged(why)) => {
                eprintln!(
                    "warning: remote image `{name}` is damaged ({why}); the base image {tag} is built here{}",
                    self.remote.stored_again()
                );
                self.remote.trace(Event::Damaged, Bucket::Images, key);
                Found::Damaged
            }
            Err(Bad::Failed(e)) => {
                eprintln!(
                    "warning: the base image {tag} cannot be taken from `{name}` ({e}); it is built here"
                );
                Found::Failed
            }
        }
    }

    /// Stores the image of `tag` (on the daemon) for the other hosts: its archive, or with a
    /// registry, pushed there and its digest. A failure is named on stderr (or, the store's,
    /// counted as a lost write) and does not stop the build.
    pub fn store(&self, docker: &Docker, tag: &str) {
        if !self.remote.writes() {
            return;
        }
        let key = self.key(tag);
        let started = Instant::now();
        let tmp = self.scratch.join(format!(
            "env-{}-image-pack-{}.tar.zst",
            std::process::id(),
            &key.to_hex()[..16]
        ));
        let packed = (|| -> Result<(Vec<u8>, Option<PathBuf>)> {
            fs_err::create_dir_all(&self.scratch)?;
            let (id, _) = docker::image_id(docker, tag)?;
            let (pushed, len, hash, file) = match &self.registry {
                Some(registry) => {
                    let reference = push(docker, registry, tag)?;
                    (Some(reference), 0, *blake3::hash(b"").as_bytes(), None)
                }
                None => {
                    let (len, hash) = save(docker, tag, &tmp)?;
                    (None, len, hash, Some(tmp.clone()))
                }
            };
            let header = Header {
                tag: tag.to_owned(),
                id,
                pushed,
                payload_len: len,
                payload_blake3: hash,
            };
            let head = head(key, &header);
            r2e_core::log::timing(&format!("pack the base image {tag}"), started.elapsed());
            r2e_core::log::size(
                &format!("the base image {tag}'s entry"),
                (head.len() as u64 + len) as usize,
            );
            Ok((head, file))
        })();
        match packed {
            Ok((head, file)) => {
                // The head (magic, length, sealed header naming the payload's hash) is what a
                // signature covers.
                let mut rest: Box<dyn Read> = match file {
                    Some(path) => match fs_err::File::open(&path) {
                        Ok(f) => Box::new(std::io::BufReader::new(f)),
                        Err(e) => {
                            eprintln!(
                                "warning: cannot store the base image {tag} in the remote cache ({e}); other hosts build it themselves"
                            );
                            let _ = fs_err::remove_file(&tmp);
                            return;
                        }
                    },
                    None => Box::new(std::io::empty()),
                };
                let sending = Instant::now();
                self.remote.put_blob(Bucket::Images, key, &head, &mut rest);
                r2e_core::log::timing(&format!("store the base image {tag}"), sending.elapsed());
            }
            Err(e) => eprintln!(
                "warning: cannot store the base image {tag} in the remote cache ({e}); other hosts build it themselves"
            ),
        }
        let _ = fs_err::remove_file(&tmp);
    }
}

/// The bytes of an entry before its payload: the magic, the header's length and the sealed
/// header.
fn head(key: Hash, header: &Header) -> Vec<u8> {
    let sealed = entry::seal(&scope(), key, header);
    let mut head = MAGIC.to_vec();
    head.extend_from_slice(&(sealed.len() as u32).to_le_bytes());
    head.extend_from_slice(&sealed);
    head
}

/// Pushes the image `tag` to `registry` (`HOST/PREFIX`) as `HOST/PREFIX/r2e-base:<its tag's
/// hash>`; the reference by digest it is held under there.
fn push(docker: &Docker, registry: &str, tag: &str) -> Result<String> {
    let short = tag.rsplit(':').next().unwrap_or(tag);
    docker::push_by_digest(docker, tag, &format!("{registry}/{PUSHED_REPO}"), short)
}

/// `docker save` of `tag` compressed into `to`: the compressed stream's length and hash.
fn save(docker: &Docker, tag: &str, to: &Path) -> Result<(u64, [u8; 32])> {
    let file = fs_err::File::create(to)?;
    let mut hashing = Hashing::new(std::io::BufWriter::new(file));
    {
        let mut encoder = zstd::Encoder::new(&mut hashing, 3)?;
        encoder.include_checksum(true)?;
        docker::save_image_to(docker, tag, &mut encoder)?;
        encoder.finish()?;
    }
    hashing.flush()?;
    Ok((hashing.len(), hashing.hash()))
}

/// Reads an entry's header, checks the key and tag it names.
fn read_header(blob: &mut impl Read, key: Hash, tag: &str) -> std::result::Result<Header, Bad> {
    let mut magic = [0u8; 12];
    blob.read_exact(&mut magic)
        .map_err(|e| short(e, "an entry's header"))?;
    if &magic[..8] != MAGIC {
        return Err(Bad::Damaged("it is not an r2e image entry".into()));
    }
    let head_len = u32::from_le_bytes(magic[8..].try_into().expect("4 bytes"));
    if head_len > MAX_HEADER {
        return Err(Bad::Damaged("its header is too long".into()));
    }
    let mut head = vec![0u8; head_len as usize];
    blob.read_exact(&mut head)
        .map_err(|e| short(e, "its header"))?;
    let header: Header = entry::unseal(&scope(), key, &head)
        .map_err(|why| Bad::Damaged(format!("its header: {why}")))?;
    if header.tag != tag {
        return Err(Bad::Damaged(format!("it holds `{}`", header.tag)));
    }
    Ok(header)
}

/// An end of the blob where more was due is damage; another read error is the store's.
fn short(e: std::io::Error, what: &str) -> Bad {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        Bad::Damaged(format!("it is cut short in {what}"))
    } else {
        Bad::Failed(Error::env(format!("reading it failed: {e}")))
    }
}

/// Reads the payload after `header` and checks its length and hash and that nothing follows;
/// then, checked, decompresses it into `to` (none with a pushed image). The compressed payload
/// is kept whole beside `to` until it is checked: nothing unchecked reaches the decoder.
fn read_payload(
    blob: &mut impl Read,
    header: &Header,
    to: Option<&Path>,
) -> std::result::Result<(), Bad> {
    let mut payload = Hashing::new(Read::take(&mut *blob, header.payload_len));
    let packed = to.map(|to| to.with_extension("tar.zst"));
    let kept = (|| {
        match &packed {
            Some(path) => {
                let mut out = std::io::BufWriter::new(fs_err::File::create(path)?);
                std::io::copy(&mut payload, &mut out).map_err(|e| short(e, "its payload"))?;
                out.into_inner()
                    .map_err(|e| Bad::Failed(e.into_error().into()))?
                    .sync_all()?;
            }
            None => {
                std::io::copy(&mut payload, &mut std::io::sink())
                    .map_err(|e| short(e, "its payload"))?;
            }
        }
        let mut rest = [0u8; 1];
        let trailing = payload
            .get_mut()
            .get_mut()
            .read(&mut rest)
            .map_err(|e| short(e, "its end"))?;
        if payload.len() != header.payload_len
            || payload.hash() != header.payload_blake3
            || trailing != 0
        {
            return Err(Bad::Damaged(
                "its contents do not match its checksum".into(),
            ));
        }
        if let (Some(to), Some(packed)) = (to, &packed) {
            let input = fs_err::File::open(packed)?;
            let mut out = std::io::BufWriter::new(fs_err::File::create(to)?);
            zstd::stream::copy_decode(input, &mut out)
                .map_err(|e| Bad::Damaged(format!("it does not decompress: {e}")))?;
            out.into_inner()
                .map_err(|e| Bad::Failed(e.into_error().into()))?
                .sync_all()?;
        }
        Ok(())
    })();
    if let Some(packed) = &packed {
        let _ = fs_err::remove_file(packed);
    }
    kept
}

/// Takes the image of the entry `blob` onto the daemon: loaded from its archive (unpacked into
/// `tmp`) or pulled by its digest, then its tag's ID checked against the header's.
fn receive(
    docker: &Docker,
    blob: Box<dyn Read + Send>,
    key: Hash,
    tag: &str,
    registry: Option<&str>,
    tmp: &Path,
) -> std::result::Result<Header, Bad> {
    let mut blob = std::io::BufReader::with_capacity(1 << 16, blob);
    let header = read_header(&mut blob, key, tag)?;
    match &header.pushed {
        Some(reference) => {
            read_payload(&mut blob, &header, None)?;
            // Only from the registry this host is configured with: an entry naming another
            // (whoever wrote it) is not pulled, with this host's credentials or without.
            let repo = reference.split('@').next().unwrap_or(reference);
            let ours = registry.is_some_and(|r| repo == format!("{r}/{PUSHED_REPO}"));
            if !ours || r2e_core::config::check_reference(reference).is_err() {
                return Err(Bad::Damaged(format!(
                    "`{reference}` is no pushed base image"
                )));
            }
            docker::pull_image(docker, reference)?;
            let (name, short) = tag.rsplit_once(':').unwrap_or((tag, "latest"));
            docker::tag_image(docker, reference, name, short)?;
        }
        None => {
            read_payload(&mut blob, &header, Some(tmp))?;
            docker::load_image(docker, tmp)?;
        }
    }
    let found = match docker::image_id(docker, tag) {
        Ok((id, _)) => id,
        Err(_) => return Err(Bad::Damaged(format!("it gave the daemon no image {tag}"))),
    };
    if found != header.id {
        // Not the image the entry names: it goes.
        let _ = docker::remove_image(docker, tag);
        return Err(Bad::Damaged(format!(
            "it gave the image {found}, not {}",
            header.id
        )));
    }
    Ok(header)
}

/// The header of the entry of `tag` in the remote store, when the entry verifies (its header
/// and its payload's length and hash), without loading it: for tests and tools that check what
/// the store holds. `Err` says why it does not verify (or that there is none).
pub fn verify(
    remote: &Remote,
    tag: &str,
    registry: Option<&str>,
) -> std::result::Result<Header, String> {
    let key = key(tag, registry);
    let blob = remote
        .get_blob(Bucket::Images, key)
        .ok_or_else(|| "the store holds no entry".to_owned())?
        .map_err(|why| why.to_string())?;
    let mut blob = std::io::BufReader::new(blob);
    let checked = read_header(&mut blob, key, tag).and_then(|header| {
        // The payload's hash, not its decompression.
        read_payload(&mut blob, &header, None)?;
        Ok(header)
    });
    checked.map_err(|bad| match bad {
        Bad::Damaged(why) => why,
        Bad::Failed(e) => e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use r2e_core::cache::{LocalStore, Store};

    #[test]
    fn an_entry_verifies_and_a_flipped_cut_or_misplaced_one_does_not() {
        let shared = tempfile::tempdir().unwrap();
        let store = LocalStore::new(shared.path());
        let remote = Remote::new(
            Arc::new(LocalStore::new(shared.path())),
            "file:///shared",
            std::time::Duration::from_secs(6),
        );
        let tag = "r2e-base:0123456789abcdef";
        let key = key(tag, None);
        let payload = zstd::encode_all(&b"a docker save archive"[..], 3).unwrap();
        let header = Header {
            tag: tag.to_owned(),
            id: format!("sha256:{}", "a".repeat(64)),
            pushed: None,
            payload_len: payload.len() as u64,
            payload_blake3: *blake3::hash(&payload).as_bytes(),
        };
        let good = [head(key, &header), payload].concat();
        let put = |bytes: &[u8]| {
            store
                .put_blob(
                    Bucket::Images,
                    key,
                    &mut std::io::Cursor::new(bytes.to_vec()),
                )
                .unwrap()
        };
        put(&good);
        assert_eq!(verify(&remote, tag, None), Ok(header.clone()));
        // The entry of the same tag through a registry is another key: there is none.
        assert!(verify(&remote, tag, Some("localhost/r2e")).is_err());
        let last = good.len() - 1;
        let mut flipped = good.clone();
        flipped[last] ^= 1;
        put(&flipped);
        assert_eq!(
            verify(&remote, tag, None),
            Err("its contents do not match its checksum".to_owned())
        );
        put(&good[..last]);
        assert_eq!(
            verify(&remote, tag, None),
            Err("its contents do not match its checksum".to_owned())
        );
        put(&[good.as_slice(), b"more"].concat());
        assert_eq!(
            verify(&remote, tag, None),
            Err("its contents do not match its checksum".to_owned())
        );
        put(&good[..20]);
        assert_eq!(
            verify(&remote, tag, None),
            Err("it is cut short in its header".to_owned())
        );
        // A good entry under another key (another tag's, moved here).
        let other = [head(super::key("r2e-base:x", None), &header), vec![]].concat();
        put(&other);
        assert!(
            verify(&remote, tag, None).is_err_and(|why| why.starts_with("its header:")),
            "{:?}",
            verify(&remote, tag, None)
        );
    }
}
