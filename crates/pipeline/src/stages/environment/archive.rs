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
//!
//! An archive is data, never a say over the host: whoever can write an unsigned store can forge
//! one, so what it unpacks is checked before it is used. Every entry of the unpacked folder is a
//! folder, a regular file or a link; a link resolves (following every link, for real) inside the
//! folder, or to a regular file inside one of the folders the caller names (an environment's
//! `bin/python` leads to the base interpreter's installation). Anything else is a damaged
//! archive, refused and named. The rewrite then works only on regular files inside the
//! unpacked folder: a place whose path passes through a link is refused, and a file is replaced
//! by a new one beside it (a rename), never written through a link.

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
/// small text files may name them; `links_out`: the folders of this host a link in the archive
/// may lead to (a regular file in one of them), besides the archive's own folder. A damaged
/// archive is named on stderr.
#[allow(clippy::too_many_arguments)]
pub fn fetch(
    remote: &Remote,
    bucket: Bucket,
    key: Hash,
    dir: &Path,
    now_at: &[PathBuf],
    rewrite: &[&str],
    links_out: &[PathBuf],
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
        (rewrite, links_out),
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
    (rewrite, links_out): (&[&str], &[PathBuf]),
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
    let root = contained(tmp, links_out)?;
    record_ok(&root)?;
    let pairs: Vec<(String, String)> = header
        .built_at
        .iter()
        .zip(now_at)
        .map(|(old, new)| (old.clone(), new.to_string_lossy().into_owned()))
        .collect();
    for place in rewrite {
        relocate(&root, place, &pairs)?;
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

/// The unpacked folder `tmp`, resolved, when everything in it stays in it: each entry is a
/// folder, a regular file or a link, and each link resolves (for real, through every link)
/// inside the folder or to a regular file inside one of `links_out`. Otherwise why not.
fn contained(tmp: &Path, links_out: &[PathBuf]) -> std::result::Result<PathBuf, String> {
    let root = std::fs::canonicalize(tmp).map_err(|e| e.to_string())?;
    let outside: Vec<PathBuf> = links_out
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    for entry in walkdir::WalkDir::new(&root).follow_links(false) {
        let entry = entry.map_err(|e| e.to_string())?;
        let kind = entry.file_type();
        let name = || {
            let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            format!("`{}`", rel.display())
        };
        if kind.is_dir() || kind.is_file() {
            continue;
        }
        if !kind.is_symlink() {
            return Err(format!("{} is neither a file, a folder nor a link", name()));
        }
        let to = std::fs::canonicalize(entry.path())
            .map_err(|_| format!("its link {} leads nowhere", name()))?;
        let inside = to.starts_with(&root);
        let allowed = || outside.iter().any(|o| to.starts_with(o)) && to.is_file();
        if !inside && !allowed() {
            return Err(format!(
                "its link {} leads out of the archive, to `{}`",
                name(),
                to.display()
            ));
        }
    }
    Ok(root)
}

/// Rewrites the paths in `pairs` (old, new; longest first wins) in `place` (relative to
/// `root`, the resolved unpacked folder): a file, or the regular files right under a folder.
/// Only small text files (no NUL byte), only regular files inside `root`: a `place` whose path
/// passes through a link is refused, links in it are left alone, and a file is replaced by a
/// new one (a rename), never written through a link.
fn relocate(
    root: &Path,
    place: &str,
    pairs: &[(String, String)],
) -> std::result::Result<(), String> {
    let path = root.join(place);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(());
    };
    // Every component below `root` is itself, not a link: resolved, the path is unchanged.
    let resolved = std::fs::canonicalize(&path).map_err(|e| e.to_string())?;
    if resolved != path || !resolved.starts_with(root) {
        return Err(format!("`{place}` passes through a link"));
    }
    let files: Vec<PathBuf> = if meta.is_dir() {
        std::fs::read_dir(&path)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect()
    } else if meta.is_file() {
        vec![path]
    } else {
        return Ok(());
    };
    let mut pairs: Vec<&(String, String)> = pairs.iter().filter(|(old, new)| old != new).collect();
    pairs.sort_by_key(|(old, _)| std::cmp::Reverse(old.len()));
    for file in files {
        rewrite_file(&file, &pairs).map_err(|e| format!("`{}`: {e}", file.display()))?;
    }
    Ok(())
}

/// [`relocate`] of one regular file (checked again: not a link).
fn rewrite_file(file: &Path, pairs: &[&(String, String)]) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(file)?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return Ok(());
    }
    let bytes = std::fs::read(file)?;
    if bytes.contains(&0) {
        return Ok(());
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(());
    };
    let mut out = text.clone();
    for (old, new) in pairs {
        out = out.replace(old.as_str(), new);
    }
    if out != text {
        // A new file beside it, renamed over it: the rename replaces the entry itself, so
        // nothing is written through a link; the file's mode (a script's executable bit) stays.
        let mut name = file.as_os_str().to_owned();
        name.push(".relocate");
        let new = PathBuf::from(name);
        // A new entry (never one the archive brought, nor a link).
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&new)?;
        w.write_all(out.as_bytes())?;
        drop(w);
        std::fs::set_permissions(&new, meta.permissions())?;
        std::fs::rename(&new, file)?;
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
            &[PathBuf::from("/usr")],
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
                &[],
                &ok,
            );
            assert!(matches!(got, Fetched::Damaged), "byte {at}: {got:?}");
            assert!(!other.exists());
            let leftovers = std::fs::read_dir(b.path()).unwrap().count();
            assert_eq!(leftovers, 1, "only the first unpacked folder");
        }
    }

    /// The files of `dir` (relative path, bytes), walked without following links.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        walkdir::WalkDir::new(dir)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                (rel, std::fs::read(e.path()).unwrap())
            })
            .collect()
    }

    /// A folder outside the cache holding a script that names the archive's old path, and the
    /// old path itself.
    fn victim(old: &Path) -> tempfile::TempDir {
        let victim = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(victim.path().join("bin")).unwrap();
        let script = format!("#!{}/venv/bin/python\nimport x\n", old.display());
        std::fs::write(victim.path().join("bin/tool"), &script).unwrap();
        std::fs::write(
            victim.path().join("pyvenv.cfg"),
            format!("home = {}\n", old.display()),
        )
        .unwrap();
        victim
    }

    #[test]
    fn a_forged_archive_whose_venv_leads_out_is_refused_and_changes_nothing_outside() {
        let (a, b, shared) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let cache = Cache::open(a.path()).unwrap();
        let built = a.path().join("k.tmp1");
        let victim = victim(&built);
        let before = snapshot(victim.path());
        // The forger: `venv` is a link to the victim, the record is sealed as a real one is
        // (an unsigned store checks no more than that), and the store takes it.
        let src = a.path().join("k");
        std::fs::create_dir_all(&src).unwrap();
        std::os::unix::fs::symlink(victim.path(), src.join("venv")).unwrap();
        let key = Hash::of_bytes(b"env");
        std::fs::write(src.join("record"), entry::seal("envs", key, "record")).unwrap();
        let r = remote(shared.path());
        upload(
            &cache,
            &r,
            Bucket::Envs,
            key,
            &src,
            &["venv", "record"],
            std::slice::from_ref(&built),
        )
        .unwrap();
        let dest = b.path().join("k");
        let record_ok = |tmp: &Path| {
            entry::unseal::<String>("envs", key, &std::fs::read(tmp.join("record")).unwrap())
                .map(drop)
                .map_err(|e| e.to_string())
        };
        let got = fetch(
            &r,
            Bucket::Envs,
            key,
            &dest,
            std::slice::from_ref(&dest),
            &["venv/bin", "venv/pyvenv.cfg"],
            &[PathBuf::from("/usr")],
            &record_ok,
        );
        assert!(matches!(got, Fetched::Damaged), "{got:?}");
        assert_eq!(
            snapshot(victim.path()),
            before,
            "the victim's files changed"
        );
        assert!(!dest.exists());
        assert_eq!(std::fs::read_dir(b.path()).unwrap().count(), 0, "leftovers");
    }

    #[test]
    fn relocate_refuses_a_place_through_a_link_and_leaves_linked_files_alone() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let old = root.join("old");
        let victim = victim(&old);
        let before = snapshot(victim.path());
        let pairs = [(old.to_string_lossy().into_owned(), "/new".to_owned())];
        // A place whose path passes through a link.
        std::os::unix::fs::symlink(victim.path(), root.join("venv")).unwrap();
        let why = relocate(&root, "venv/bin", &pairs).unwrap_err();
        assert!(why.contains("passes through a link"), "{why}");
        assert!(relocate(&root, "venv/pyvenv.cfg", &pairs).is_err());
        // Links right in a place: left alone; a regular file beside them: rewritten; a place
        // that is a link: refused.
        std::fs::create_dir_all(root.join("env/bin")).unwrap();
        std::os::unix::fs::symlink(victim.path().join("bin/tool"), root.join("env/bin/tool"))
            .unwrap();
        std::os::unix::fs::symlink(victim.path().join("pyvenv.cfg"), root.join("env/cfg")).unwrap();
        std::fs::write(
            root.join("env/bin/own"),
            format!("#!{}/python", old.display()),
        )
        .unwrap();
        relocate(&root, "env/bin", &pairs).unwrap();
        assert!(
            relocate(&root, "env/cfg", &pairs).is_err(),
            "a place that is a link"
        );
        assert_eq!(
            snapshot(victim.path()),
            before,
            "the victim's files changed"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("env/bin/own")).unwrap(),
            "#!/new/python"
        );
    }
}
