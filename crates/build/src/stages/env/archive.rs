//! Environments and project layers as archives in the remote store (`[cache] remote`), so that
//! a folder one host built is unpacked by the others instead of built again.
//!
//! A blob is `MAGIC` (8 bytes), the length of a header (4 bytes, little-endian), the header (a
//! sealed entry, [`entry::seal`], under the scope `<bucket>/archive` and the folder's key: what
//! the folder's paths were where it was built, and the length and blake3 hash of the payload),
//! then the payload: a tar stream of the folder's parts, compressed with zstd. An archive is
//! packed into a file of the cache's scratch, then stored; read back, its compressed payload is
//! kept whole in a temporary file beside its place and checked (its length and hash, which the
//! header names and a signature covers, and that nothing follows) before a byte of it is
//! decompressed and unpacked into a temporary folder. A header that does not unseal, a payload
//! of another length or hash, or a folder whose own sealed record does not verify is a damaged
//! archive, named on stderr, and the folder is built here.
//!
//! A folder built on one host holds that host's absolute paths: the scripts `pip` writes into
//! `bin/` name the environment's interpreter by its path in their shebang, and `pyvenv.cfg` and
//! `activate` name the environment's folder. Python finds its environment from where its
//! `bin/python` is (a link to the base interpreter, the same on every host, whose version is in
//! the key) and from the `pyvenv.cfg` beside it, never from those paths; runs are
//! `python -I ...`. Still, the unpacking host rewrites the paths the header lists in the small
//! text files of `bin/` and in `pyvenv.cfg` to its own, so that the folder is as if built there.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use r2e_core::cache::remote::Remote;
use r2e_core::cache::{Bucket, Cache, entry};
use r2e_core::error::Result;
use r2e_core::hash::{Hash, Hashing};

const MAGIC: &[u8; 8] = b"r2e-arc1";

/// The largest header a reader accepts.
const MAX_HEADER: u32 = 1 << 20;

/// What the header of an archive holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Header {
    /// The absolute paths the folder's files may name where it was built, in the order the
    /// packer and the unpacker agree on (see [`pack`]).
    built_at: Vec<String>,
    payload_len: u64,
    payload_blake3: [u8; 32],
}

fn scope(bucket: Bucket) -> String {
    format!("{}/archive", bucket.folder())
}

/// Packs the `parts` of `dir` (names relative to it) as the archive of `key` in `bucket`, and
/// stores it in the remote store. `built_at`: the absolute paths its files may name (the
/// folder it was built in first). A failure to pack is named on stderr; a failure to store is
/// counted by the remote store. Neither stops the build. Returns the archive's size.
pub fn upload(
    cache: &Cache,
    remote: &Remote,
    bucket: Bucket,
    key: Hash,
    dir: &Path,
    parts: &[&str],
    built_at: &[PathBuf],
) -> Option<u64> {
    if !remote.writes() {
        return None;
    }
    let tmp = match cache.dir(Bucket::Scratch) {
        Ok(s) => s.join(format!(
            "env-{}-pack-{}",
            std::process::id(),
            &key.to_hex()[..16]
        )),
        Err(e) => {
            eprintln!(
                "warning: cannot pack `{}` for the remote cache ({e})",
                dir.display()
            );
            return None;
        }
    };
    let started = Instant::now();
    let packed = pack(dir, parts, &tmp).and_then(|(len, hash)| {
        let header = Header {
            built_at: built_at
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            payload_len: len,
            payload_blake3: hash,
        };
        let sealed = entry::seal(&scope(bucket), key, &header);
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&(sealed.len() as u32).to_le_bytes());
        head.extend_from_slice(&sealed);
        let what = format!("archive of {} {}", bucket.folder(), &key.to_hex()[..16]);
        r2e_core::log::timing(&format!("pack the {what}"), started.elapsed());
        r2e_core::log::size(&format!("the {what}"), (head.len() as u64 + len) as usize);
        let mut file = std::io::BufReader::new(fs_err::File::open(&tmp)?);
        // The head (magic, length, sealed header) is what a signature covers: the header names
        // the payload's length and hash.
        remote.put_blob(bucket, key, &head, &mut file);
        Ok(head.len() as u64 + len)
    });
    let _ = fs_err::remove_file(&tmp);
    match packed {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!(
                "warning: cannot pack `{}` for the remote cache ({e}); other hosts build it themselves",
                dir.display()
            );
            None
        }
    }
}

/// Writes the tar + zstd stream of `parts` of `dir` to `to`: its length and blake3 hash.
fn pack(dir: &Path, parts: &[&str], to: &Path) -> Result<(u64, [u8; 32])> {
    let file = fs_err::File::create(to)?;
    let mut hashing = Hashing::new(std::io::BufWriter::new(file));
    {
        let mut encoder = zstd::Encoder::new(&mut hashing, 3)?;
        encoder.include_checksum(true)?;
        let mut tar = tar::Builder::new(encoder);
        // Links stay links (`bin/python` leads to the base interpreter).
        tar.follow_symlinks(false);
        tar.mode(tar::HeaderMode::Complete);
        for part in parts {
            let path = dir.join(part);
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            if meta.is_dir() {
                tar.append_dir_all(part, &path)?;
            } else {
                tar.append_path_with_name(&path, part)?;
            }
        }
        tar.into_inner()?.finish()?;
    }
    hashing.flush()?;
    Ok((hashing.len(), hashing.hash()))
}

/// What looking for an archive found.
#[derive(Debug)]
pub enum Fetched {
    /// Unpacked into its place (or another process of this host put it there first).
    Unpacked,
    /// The store has none.
    Miss,
    /// The archive is there but cannot be used (damaged, or unpacking failed), as stderr says.
    Damaged,
}

/// Unpacks the archive of `key` in `bucket` into `dir` (its place in the local cache), when the
/// remote store has one that verifies: its header, its payload's length and hash, and the
/// folder's own sealed record (`record_ok`). `now_at`: this host's paths for the archive's
/// `built_at`, in the same order; `rewrite`: the files and folders (relative to `dir`) whose
/// small text files may name them. A damaged archive is named on stderr.
pub fn fetch(
    remote: &Remote,
    bucket: Bucket,
    key: Hash,
    dir: &Path,
    now_at: &[PathBuf],
    rewrite: &[&str],
    record_ok: &dyn Fn(&Path) -> std::result::Result<(), String>,
) -> Fetched {
    let Some(blob) = remote.get_blob(bucket, key) else {
        return Fetched::Miss;
    };
    let name = remote.store().describe(bucket, key);
    let blob = match blob {
        Ok(blob) => blob,
        Err(why) => {
            eprintln!(
                "warning: remote archive `{name}` is not trusted ({why}); it is built here{}",
                remote.stored_again()
            );
            return Fetched::Damaged;
        }
    };
    let started = Instant::now();
    let tmp = PathBuf::from(format!(
        "{}.fetch.tmp{}",
        dir.to_string_lossy(),
        std::process::id()
    ));
    let _ = fs_err::remove_dir_all(&tmp);
    // The compressed payload, kept whole until it is checked.
    let packed = PathBuf::from(format!(
        "{}.payload.tmp{}",
        dir.to_string_lossy(),
        std::process::id()
    ));
    let unpacked = unpack(
        blob,
        bucket,
        key,
        (&tmp, &packed),
        now_at,
        rewrite,
        record_ok,
    );
    let unpacked = unpacked.and_then(|bytes| {
        if dir.exists() {
            let _ = fs_err::remove_dir_all(&tmp);
        } else {
            fs_err::rename(&tmp, dir).map_err(|e| e.to_string())?;
        }
        Ok(bytes)
    });
    match unpacked {
        Ok(bytes) => {
            let what = format!("archive of {} {}", bucket.folder(), &key.to_hex()[..16]);
            r2e_core::log::timing(&format!("fetch and unpack the {what}"), started.elapsed());
            r2e_core::log::size(&format!("the {what}"), bytes as usize);
            Fetched::Unpacked
        }
        Err(why) => {
            let _ = fs_err::remove_dir_all(&tmp);
            eprintln!(
                "warning: remote archive `{name}` is damaged ({why}); it is built here{}",
                remote.stored_again()
            );
            Fetched::Damaged
        }
    }
}

fn unpack(
    blob: Box<dyn Read + Send>,
    bucket: Bucket,
    key: Hash,
    (tmp, packed): (&Path, &Path),
    now_at: &[PathBuf],
    rewrite: &[&str],
    record_ok: &dyn Fn(&Path) -> std::result::Result<(), String>,
) -> std::result::Result<u64, String> {
    let mut blob = std::io::BufReader::new(blob);
    let mut magic = [0u8; 12];
    blob.read_exact(&mut magic)
        .map_err(|_| "it is shorter than an archive's header".to_owned())?;
    if &magic[..8] != MAGIC {
        return Err("it is not an r2e archive".into());
    }
    let head_len = u32::from_le_bytes(magic[8..].try_into().expect("4 bytes"));
    if head_len > MAX_HEADER {
        return Err("its header is too long".into());
    }
    let mut head = vec![0u8; head_len as usize];
    blob.read_exact(&mut head)
        .map_err(|_| "its header is cut short".to_owned())?;
    let header: Header =
        entry::unseal(&scope(bucket), key, &head).map_err(|why| format!("its header: {why}"))?;
    if header.built_at.len() != now_at.len() {
        return Err("its header names other paths than this r2e's archives".into());
    }
    // The compressed payload is kept whole and checked (its length and hash, which the header
    // names and a signature covers, and that nothing follows) before a byte of it is
    // decompressed or unpacked: nothing unchecked reaches the decoder or the disk.
    let checked = (|| {
        let mut payload = Hashing::new((&mut blob).take(header.payload_len));
        let mut file = std::io::BufWriter::new(fs_err::File::create(packed)?);
        std::io::copy(&mut payload, &mut file)?;
        file.flush()?;
        let (len, hash) = (payload.len(), payload.hash());
        let mut rest = [0u8; 1];
        let trailing = blob.read(&mut rest)?;
        Ok::<_, std::io::Error>(
            len == header.payload_len && hash == header.payload_blake3 && trailing == 0,
        )
    })();
    let unpacked = match checked {
        Ok(true) => unpack_payload(packed, tmp),
        Ok(false) => Err("its contents do not match its checksum".to_owned()),
        Err(e) => Err(e.to_string()),
    };
    let _ = fs_err::remove_file(packed);
    unpacked?;
    record_ok(tmp)?;
    let pairs: Vec<(String, String)> = header
        .built_at
        .iter()
        .zip(now_at)
        .map(|(old, new)| (old.clone(), new.to_string_lossy().into_owned()))
        .collect();
    for place in rewrite {
        relocate(&tmp.join(place), &pairs).map_err(|e| e.to_string())?;
    }
    Ok(12 + u64::from(head_len) + header.payload_len)
}

/// Unpacks a checked payload (zstd over tar) into `tmp`.
fn unpack_payload(packed: &Path, tmp: &Path) -> std::result::Result<(), String> {
    fs_err::create_dir_all(tmp).map_err(|e| e.to_string())?;
    let file = fs_err::File::open(packed).map_err(|e| e.to_string())?;
    let decoder = zstd::Decoder::new(file).map_err(|e| e.to_string())?;
    let mut archive = tar::Archive::new(decoder);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(false);
    archive
        .unpack(tmp)
        .map_err(|e| format!("it does not unpack: {e}"))
}

/// Rewrites the paths in `pairs` (old, new; longest first wins) in `place` (a file) or in the
/// regular files right under it (a folder): only small text files (no NUL byte), never through
/// a link.
fn relocate(place: &Path, pairs: &[(String, String)]) -> std::io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(place) else {
        return Ok(());
    };
    let files: Vec<PathBuf> = if meta.is_dir() {
        std::fs::read_dir(place)?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect()
    } else if meta.is_file() {
        vec![place.to_path_buf()]
    } else {
        return Ok(());
    };
    let mut pairs: Vec<&(String, String)> = pairs.iter().filter(|(old, new)| old != new).collect();
    pairs.sort_by_key(|(old, _)| std::cmp::Reverse(old.len()));
    for file in files {
        if std::fs::metadata(&file)?.len() > 1 << 20 {
            continue;
        }
        let bytes = std::fs::read(&file)?;
        if bytes.contains(&0) {
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let mut out = text.clone();
        for (old, new) in &pairs {
            out = out.replace(old.as_str(), new);
        }
        if out != text {
            // In place: the file's mode (a script's executable bit) stays.
            std::fs::write(&file, out)?;
        }
    }
    Ok(())
}

/// Whether the remote store holds the archive of `key` (what a lease waits for).
pub fn present(remote: &Remote, bucket: Bucket, key: Hash) -> bool {
    remote.store().contains(bucket, key).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use r2e_core::cache::LocalStore;
    use std::sync::Arc;
    use std::time::Duration;

    fn remote(shared: &Path) -> Remote {
        Remote::new(
            Arc::new(LocalStore::new(shared)),
            "file:///shared",
            Duration::from_secs(6),
        )
    }

    #[test]
    fn an_archive_round_trips_relocated_and_a_flipped_byte_is_a_miss() {
        let (a, b, shared) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let cache = Cache::open(a.path()).unwrap();
        let built = a.path().join("k.tmp1");
        let src = a.path().join("k");
        std::fs::create_dir_all(src.join("venv/bin")).unwrap();
        std::fs::create_dir_all(src.join("scratch")).unwrap();
        let shebang = format!("#!{}/venv/bin/python\nimport x\n", built.display());
        std::fs::write(src.join("venv/bin/tool"), &shebang).unwrap();
        std::fs::write(src.join("venv/bin/blob"), b"\0binary k.tmp1").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", src.join("venv/bin/python")).unwrap();
        std::fs::write(src.join("record"), b"sealed").unwrap();
        let key = Hash::of_bytes(b"env");
        let r = remote(shared.path());
        let packed = upload(
            &cache,
            &r,
            Bucket::Envs,
            key,
            &src,
            &["venv", "record"],
            std::slice::from_ref(&built),
        )
        .unwrap();
        assert!(packed > 0);
        let dest = b.path().join("k");
        let ok = |_: &Path| Ok(());
        let got = fetch(
            &r,
            Bucket::Envs,
            key,
            &dest,
            std::slice::from_ref(&dest),
            &["venv/bin"],
            &ok,
        );
        assert!(matches!(got, Fetched::Unpacked), "{got:?}");
        assert_eq!(
            std::fs::read_to_string(dest.join("venv/bin/tool")).unwrap(),
            format!("#!{}/venv/bin/python\nimport x\n", dest.display())
        );
        assert_eq!(
            std::fs::read_link(dest.join("venv/bin/python")).unwrap(),
            Path::new("/usr/bin/python3")
        );
        assert!(!dest.join("scratch").exists());
        assert_eq!(std::fs::read(dest.join("record")).unwrap(), b"sealed");
        // Another key's archive, or a flipped byte anywhere: damaged, nothing left behind.
        let other = b.path().join("other");
        let wrong = fetch(
            &r,
            Bucket::Envs,
            Hash::of_bytes(b"x"),
            &other,
            std::slice::from_ref(&other),
            &[],
            &ok,
        );
        assert!(matches!(wrong, Fetched::Miss));
        let path = LocalStore::new(shared.path()).path(Bucket::Envs, key);
        let good = std::fs::read(&path).unwrap();
        for at in [10, 40, good.len() / 2, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            let got = fetch(
                &r,
                Bucket::Envs,
                key,
                &other,
                std::slice::from_ref(&other),
                &[],
                &ok,
            );
            assert!(matches!(got, Fetched::Damaged), "byte {at}: {got:?}");
            assert!(!other.exists());
            let leftovers = std::fs::read_dir(b.path()).unwrap().count();
            assert_eq!(leftovers, 1, "only the first unpacked folder");
        }
    }
}
