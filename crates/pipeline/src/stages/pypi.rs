//! `[[repo]] pypi = "NAME==VERSION"`: a source release from a package index, as a repository.
//!
//! The index is asked for the project's files (`r2e_exec::pypi`), the sdist of exactly that
//! version is picked (`.tar.gz`, else an old `.zip`), its published sha256 checked to be one (64
//! hex digits) before any path is made of it, downloaded and checked: against the sha256 the
//! index publishes, then against the pipeline's `sha256` when written. It is unpacked (regular
//! files and folders only, every path inside the root, its single top folder `NAME-VERSION/`
//! stripped, at most [`MAX_UNPACKED`] bytes however its headers size its entries) into
//! `pypi-v1/<sha256>`, which the checkout then reads as a folder, and what it is the release
//! of (project, version, index, archive) is written beside it (`<sha256>.release`). With
//! `sha256` written and the release unpacked already as the release of this project, version and
//! index, nothing is asked of the network; a folder that is another's release (a version bumped,
//! `sha256` not) is not taken: the index is asked, and the archive downloaded and checked, as on
//! a machine without it. Without `sha256`, the index is asked each build, and a folder whose
//! record is this release's is taken for the hash the index publishes.
//!
//! A differing archive is refused as bad input (exit 2): the repository the pipeline names
//! cannot be had as named, and nothing of it is kept, so a rerun asks again. An index that does
//! not answer is environmental (exit 1), never stored.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use r2e_core::cache::{Bucket, Cache};
use r2e_core::config::{PypiRelease, RepoConfig, normalize_project};
use r2e_core::error::{Error, Result};
use r2e_exec::pypi::{IndexFile, download, project_files};
use serde::{Deserialize, Serialize};

/// What an archive may unpack to at most: a larger one is refused, not written.
const MAX_UNPACKED: u64 = 2 << 30;

/// What an unpacked release is the release of: written beside its folder as
/// `<sha256>.release`, read before the folder is taken for a pinned `sha256` without asking
/// the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ReleaseOf {
    /// The project's PEP 503 name.
    project: String,
    /// The version, lowercase (versions are compared as PEP 440 does case).
    version: String,
    /// The simple index's URL.
    index_url: String,
    /// The archive's name, as the index lists it.
    filename: String,
}

impl ReleaseOf {
    /// Whether it is the release the pipeline names (the archive's name is not known before
    /// the index is asked, and follows from the rest).
    fn is(&self, release: &PypiRelease) -> bool {
        self.project == release.normalized()
            && self.version == release.version.to_ascii_lowercase()
            && self.index_url == release.index_url
    }
}

/// The record beside the unpacked folder named `hex`.
fn record_path(bucket: &Path, hex: &str) -> PathBuf {
    bucket.join(format!("{hex}.release"))
}

/// Whether `hex` is a sha256 as r2e names folders by: 64 lowercase hexadecimal digits (nothing
/// else is ever joined to a path).
fn is_sha256(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The release's files, unpacked (fetched first when not in the cache), and its archive's
/// sha256 (lowercase hex).
pub fn fetch(repo: &RepoConfig, release: &PypiRelease, cache: &Cache) -> Result<(PathBuf, String)> {
    let bucket = cache.dir(Bucket::Pypi)?;
    // The folder of an archive whose hash is `hex`, when unpacked already.
    let unpacked = |hex: &str| {
        if !is_sha256(hex) {
            return None;
        }
        let dir = bucket.join(hex);
        dir.is_dir().then(|| (dir, hex.to_owned()))
    };
    // What the folder of `hex` is the release of, as written beside it.
    let recorded = |hex: &str| -> Option<ReleaseOf> {
        let text = std::fs::read(record_path(&bucket, hex)).ok()?;
        serde_json::from_slice(&text).ok()
    };
    let used = |(dir, hex): (PathBuf, String)| {
        cache.note_use(&dir);
        cache.note_use(&record_path(&bucket, &hex));
        (dir, hex)
    };
    if let Some(pinned) = &release.sha256
        && let Some(done) = unpacked(&pinned.hex)
        && recorded(&pinned.hex).is_some_and(|of| of.is(release))
    {
        return Ok(used(done));
    }
    let files =
        project_files(&release.index_url, &release.normalized()).map_err(|e| in_repo(repo, e))?;
    let file = pick_sdist(&files, release).ok_or_else(|| {
        // The versions it has sources of, the last ones listed (an index lists oldest first).
        let mut versions: Vec<&str> = files
            .iter()
            .filter_map(|f| {
                let stem = f
                    .filename
                    .strip_suffix(".tar.gz")
                    .or_else(|| f.filename.strip_suffix(".zip"))?;
                let (name, version) = stem.rsplit_once('-')?;
                (normalize_project(name) == release.normalized()).then_some(version)
            })
            .collect();
        versions.dedup();
        let shown = if versions.is_empty() {
            "none".to_owned()
        } else if versions.len() > 12 {
            format!("..., {}", versions[versions.len() - 12..].join(", "))
        } else {
            versions.join(", ")
        };
        Error::input(format!(
            "repo `{}`: the index `{}` lists no source release (`.tar.gz` or `.zip`) of `{}` {}; \
             versions with one: {shown}",
            repo.name, release.index_url, release.project, release.version,
        ))
    })?;
    let published = match (&file.sha256, &release.sha256) {
        (Some(h), _) => {
            let lower = h.to_ascii_lowercase();
            if !is_sha256(&lower) {
                return Err(Error::input(format!(
                    "repo `{}`: refused `{}`: the index `{}` publishes {} as its sha256, which is \
                     not 64 hexadecimal digits (nothing was downloaded or kept)",
                    repo.name,
                    file.filename,
                    release.index_url,
                    shown(h)
                )));
            }
            lower
        }
        (None, Some(pinned)) => pinned.hex.clone(),
        (None, None) => {
            return Err(Error::input(format!(
                "repo `{}`: the index `{}` publishes no sha256 for `{}`, so its download cannot be \
                 checked: write the archive's `sha256 = \"...\"` beside `pypi`",
                repo.name, release.index_url, file.filename
            )));
        }
    };
    let of = ReleaseOf {
        project: release.normalized(),
        version: release.version.to_ascii_lowercase(),
        index_url: release.index_url.clone(),
        filename: file.filename.clone(),
    };
    // The folder is taken without a download only when the index vouches for its hash and it
    // is already this release's: else the archive is downloaded and checked, as on a machine
    // without it (the unpacking is what a folder there saves).
    let bytes = match unpacked(&published) {
        Some(done)
            if file.sha256.is_some()
                && release.sha256.as_ref().is_none_or(|p| p.hex == published)
                && recorded(&published).is_some_and(|had| had == of) =>
        {
            return Ok(used(done));
        }
        _ => download(file).map_err(|e| in_repo(repo, e))?,
    };
    let actual = sha256_hex(&bytes);
    if file.sha256.is_some() && published != actual {
        return Err(Error::input(format!(
            "repo `{}`: refused `{}`: its sha256 is {actual}, but the index `{}` publishes \
             {published}; the archive is not the release the index names (nothing was kept)",
            repo.name, file.filename, release.index_url
        )));
    }
    if let Some(pinned) = &release.sha256
        && pinned.hex != actual
    {
        return Err(Error::input(format!(
            "{}: repo `{}`: refused `{}`: its sha256 is {actual}, not the `sha256` written here \
             ({}) (nothing was kept)",
            pinned.at, repo.name, file.filename, pinned.hex
        )));
    }
    let dir = bucket.join(&actual);
    if !dir.is_dir() {
        let tmp = bucket.join(format!("{actual}.tmp{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&tmp);
        fs_err::create_dir_all(&tmp)?;
        let unpacked = if file.filename.ends_with(".zip") {
            unpack_zip(&bytes, &tmp, MAX_UNPACKED)
        } else {
            unpack_tar_gz(&bytes, &tmp, MAX_UNPACKED)
        };
        let done = unpacked
            .map_err(|why| {
                Error::input(format!(
                    "repo `{}`: refused `{}`: {why}",
                    repo.name, file.filename
                ))
            })
            .and_then(|()| Ok(fs_err::rename(release_root(&tmp)?, &dir)?));
        let _ = fs_err::remove_dir_all(&tmp);
        if let Err(e) = done
            && !dir.is_dir()
        {
            return Err(e);
        }
    }
    // After the folder (a record without its folder is never read): the archive was checked,
    // so the folder is this release's.
    let json = serde_json::to_vec(&of).map_err(|e| Error::Internal(e.to_string()))?;
    r2e_core::fsutil::write_if_changed(&record_path(&bucket, &actual), &json)?;
    Ok(used((dir, actual)))
}

/// A value an index sent, for a message: quoted and escaped, and cut when long.
fn shown(value: &str) -> String {
    let cut: String = value.chars().take(80).collect();
    if cut.len() < value.len() {
        format!("{cut:?}...")
    } else {
        format!("{cut:?}")
    }
}

/// The sdist of exactly the release's version: `NAME-VERSION.tar.gz` (else `.zip`), its name compared as
/// PEP 503 normalizes names and its version as PEP 440 does case.
fn pick_sdist<'a>(files: &'a [IndexFile], release: &PypiRelease) -> Option<&'a IndexFile> {
    let want = release.normalized();
    let of_release = |f: &&IndexFile, suffix: &str| {
        let Some(stem) = f.filename.strip_suffix(suffix) else {
            return false;
        };
        // The version follows the last `-` (a name's own `-` were `_` since PEP 625; older
        // archives may keep them).
        let Some((name, version)) = stem.rsplit_once('-') else {
            return false;
        };
        normalize_project(name) == want && version.eq_ignore_ascii_case(&release.version)
    };
    // A `.tar.gz` (PEP 625's one format) before an old `.zip` of the same release.
    files
        .iter()
        .find(|f| of_release(f, ".tar.gz"))
        .or_else(|| files.iter().find(|f| of_release(f, ".zip")))
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The folder that holds the release: the single folder at the top of what was unpacked (an
/// sdist's `NAME-VERSION/`), else the top itself.
fn release_root(top: &Path) -> Result<PathBuf> {
    let entries: Vec<_> = fs_err::read_dir(top)?.flatten().collect();
    Ok(match entries.as_slice() {
        [only] if only.file_type().is_ok_and(|t| t.is_dir()) => only.path(),
        _ => top.to_path_buf(),
    })
}

/// An error of the repository's, named.
fn in_repo(repo: &RepoConfig, e: Error) -> Error {
    match e {
        Error::Input(m) => Error::Input(format!("repo `{}`: {m}", repo.name)),
        Error::Env(m) => Error::Env(format!("repo `{}`: {m}", repo.name)),
        other => other,
    }
}

/// Unpacks a gzipped tar into `dest`: regular files and folders only (links, devices and
/// FIFOs are left out: none can then lead outside), every path relative and without `..`, at
/// most `cap` bytes in all ([`MAX_UNPACKED`] for a release): what is written is counted as it is
/// read, so the cap holds whatever sizes the headers (or PAX records) give.
pub fn unpack_tar_gz(bytes: &[u8], dest: &Path, cap: u64) -> std::result::Result<(), String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut total: u64 = 0;
    let entries = archive
        .entries()
        .map_err(|e| format!("not a gzipped tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("a damaged archive: {e}"))?;
        let path = entry
            .path()
            .map_err(|e| format!("a path that is not valid: {e}"))?
            .into_owned();
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir()) {
            continue;
        }
        inside(&path)?;
        let to = dest.join(&path);
        if kind.is_dir() {
            fs_err::create_dir_all(&to).map_err(|e| e.to_string())?;
            continue;
        }
        // The entry's size with its PAX `size` record, refused before anything is read when it
        // is too large; the read is bounded too.
        let remaining = cap - total;
        if entry.size() > remaining {
            return Err(too_large(cap));
        }
        if let Some(parent) = to.parent() {
            fs_err::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
        let mut out = fs_err::File::create(&to).map_err(|e| e.to_string())?;
        let written = std::io::copy(&mut (&mut entry).take(remaining + 1), &mut out)
            .map_err(|e| format!("`{}`: {e}", path.display()))?;
        if written > remaining {
            return Err(too_large(cap));
        }
        total += written;
        if executable {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755));
        }
    }
    Ok(())
}

/// Why an archive larger than `cap` is refused.
fn too_large(cap: u64) -> String {
    if cap >= 1 << 20 {
        format!("it unpacks to more than {} MiB", cap >> 20)
    } else {
        format!("it unpacks to more than {cap} bytes")
    }
}

/// The path of an archive's entry, checked: relative, without `..`, so that it stays in the
/// release's folder.
fn inside(path: &Path) -> std::result::Result<(), String> {
    if path.as_os_str().is_empty()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "the entry `{}` would be written outside the release's folder",
            path.display()
        ));
    }
    Ok(())
}

/// Unpacks a zip archive (an old sdist) into `dest`, as [`unpack_tar_gz`] does, read by the
/// `zip` crate: regular files (stored or deflated) and folders only, every path inside, at most
/// `cap` bytes in all: an entry is refused when its size says more, and inflated no further
/// than its size says.
pub fn unpack_zip(bytes: &[u8], dest: &Path, cap: u64) -> std::result::Result<(), String> {
    let damaged = |e: zip::result::ZipError| format!("a damaged zip archive ({e})");
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|_| "not a zip archive")?;
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let entry = archive.by_index(i).map_err(damaged)?;
        let name = entry.name().map_err(damaged)?.into_owned();
        let path = PathBuf::from(&name);
        inside(&path)?;
        if entry.is_dir() {
            fs_err::create_dir_all(dest.join(&path)).map_err(|e| e.to_string())?;
            continue;
        }
        // Links and other special files are left out, as from a tar.
        let kind = entry.unix_mode().unwrap_or(0) & 0o170000;
        if kind != 0 && kind != 0o100000 {
            continue;
        }
        let size = entry.size();
        if size > cap - total {
            return Err(too_large(cap));
        }
        let to = dest.join(&path);
        if let Some(parent) = to.parent() {
            fs_err::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let mut out = fs_err::File::create(&to).map_err(|e| e.to_string())?;
        // Written as inflated, never more than a byte past the size the entry says (which then
        // refuses it): nothing is held in memory whatever the headers say.
        // (The reader itself refuses to go past the declared size: either way it is damaged.)
        let written = std::io::copy(&mut entry.take(size + 1), &mut out)
            .map_err(|_| "a damaged zip archive".to_owned())?;
        if written != size {
            return Err("a damaged zip archive".into());
        }
        total += written;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_gz(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (path, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                header.set_size(0);
                builder
                    .append_link(&mut header, path, std::str::from_utf8(data).unwrap())
                    .unwrap();
                continue;
            }
            // Written raw: `append_data` would refuse the `..` this test needs.
            let name = path.as_bytes();
            header.as_old_mut().name[..name.len()].copy_from_slice(name);
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_release_unpacks_without_links_and_nothing_leaves_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let good = tar_gz(&[
            ("pkg-1.0/", tar::EntryType::Directory, b""),
            (
                "pkg-1.0/pkg/__init__.py",
                tar::EntryType::Regular,
                b"X = 1\n",
            ),
            ("pkg-1.0/escape", tar::EntryType::Symlink, b"/etc/passwd"),
        ]);
        let dest = dir.path().join("a");
        fs_err::create_dir_all(&dest).unwrap();
        unpack_tar_gz(&good, &dest, MAX_UNPACKED).unwrap();
        assert_eq!(
            std::fs::read(dest.join("pkg-1.0/pkg/__init__.py")).unwrap(),
            b"X = 1\n"
        );
        assert!(std::fs::symlink_metadata(dest.join("pkg-1.0/escape")).is_err());
        let top = release_root(&dest).unwrap();
        assert!(top.join("pkg/__init__.py").is_file());

        let bad = tar_gz(&[("pkg-1.0/../../outside.py", tar::EntryType::Regular, b"x")]);
        let dest = dir.path().join("b");
        fs_err::create_dir_all(&dest).unwrap();
        let why = unpack_tar_gz(&bad, &dest, MAX_UNPACKED).unwrap_err();
        assert!(why.contains("outside the release's folder"), "{why}");
        assert!(!dir.path().join("outside.py").exists());
    }

    #[test]
    fn an_old_zip_release_unpacks_and_a_path_out_of_it_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, entries: &str| {
            let path = dir.path().join(name);
            let script = format!(
                "import zipfile\nz = zipfile.ZipFile({:?}, 'w')\n{entries}z.close()\n",
                path.to_string_lossy()
            );
            let ok = std::process::Command::new("python3")
                .args(["-c", &script])
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::read(path).unwrap()
        };
        let good = make(
            "good.zip",
            "z.writestr('pkg-1.0/pkg/__init__.py', 'X = 1\\n' * 100, zipfile.ZIP_DEFLATED)\n\
             z.writestr('pkg-1.0/setup.py', 'pass\\n', zipfile.ZIP_STORED)\n\
             z.writestr('pkg-1.0/empty/', '')\n",
        );
        let dest = dir.path().join("a");
        fs_err::create_dir_all(&dest).unwrap();
        unpack_zip(&good, &dest, MAX_UNPACKED).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("pkg-1.0/pkg/__init__.py")).unwrap(),
            "X = 1\n".repeat(100)
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("pkg-1.0/setup.py")).unwrap(),
            "pass\n"
        );
        assert!(dest.join("pkg-1.0/empty").is_dir());
        let bad = make("bad.zip", "z.writestr('../outside.py', 'x')\n");
        let dest = dir.path().join("b");
        fs_err::create_dir_all(&dest).unwrap();
        let why = unpack_zip(&bad, &dest, MAX_UNPACKED).unwrap_err();
        assert!(why.contains("outside the release's folder"), "{why}");
        assert!(!dir.path().join("outside.py").exists());
        assert!(
            unpack_zip(
                b"not a zip at all, just some text here",
                &dest,
                MAX_UNPACKED
            )
            .is_err()
        );
    }

    /// A gzipped tar whose one file's header says `said` bytes while a PAX `size` record says
    /// (and the archive holds) `real`.
    fn tar_gz_with_pax_size(said: u64, real: usize) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        let body = format!(" size={real}\n");
        // A PAX record's length counts its own digits.
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        let record = format!("{len}{body}");
        let mut pax = tar::Header::new_ustar();
        pax.set_entry_type(tar::EntryType::XHeader);
        pax.set_path("PaxHeaders/big.py").unwrap();
        pax.set_size(record.len() as u64);
        pax.set_mode(0o644);
        pax.set_cksum();
        builder.append(&pax, record.as_bytes()).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_path("pkg-1.0/big.py").unwrap();
        header.set_size(said);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, &vec![b'x'; real][..]).unwrap();
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_tar_is_capped_whatever_its_headers_say() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = |name: &str| {
            let dest = dir.path().join(name);
            fs_err::create_dir_all(&dest).unwrap();
            dest
        };
        // The header says 10 bytes, its PAX record 1000: the cap of 100 holds.
        let lying = tar_gz_with_pax_size(10, 1000);
        let dest = fresh("pax");
        let why = unpack_tar_gz(&lying, &dest, 100).unwrap_err();
        assert_eq!(why, "it unpacks to more than 100 bytes");
        let written = std::fs::metadata(dest.join("pkg-1.0/big.py")).map_or(0, |m| m.len());
        assert!(written <= 101, "{written} bytes written");
        // The same archive under a cap it fits: the PAX size is the file's.
        let dest = fresh("pax-fits");
        unpack_tar_gz(&lying, &dest, 1000).unwrap();
        assert_eq!(
            std::fs::read(dest.join("pkg-1.0/big.py")).unwrap(),
            vec![b'x'; 1000]
        );
        // The cap is over all the files: two of 60 exceed 100, one of 100 does not.
        let two = tar_gz(&[
            ("pkg-1.0/a.py", tar::EntryType::Regular, &[b'a'; 60]),
            ("pkg-1.0/b.py", tar::EntryType::Regular, &[b'b'; 60]),
        ]);
        let why = unpack_tar_gz(&two, &fresh("two"), 100).unwrap_err();
        assert_eq!(why, "it unpacks to more than 100 bytes");
        let one = tar_gz(&[("pkg-1.0/a.py", tar::EntryType::Regular, &[b'a'; 100])]);
        let dest = fresh("one");
        unpack_tar_gz(&one, &dest, 100).unwrap();
        assert_eq!(std::fs::read(dest.join("pkg-1.0/a.py")).unwrap().len(), 100);
        assert_eq!(too_large(MAX_UNPACKED), "it unpacks to more than 2048 MiB");
    }

    #[test]
    fn a_zip_is_capped_and_inflated_no_further_than_its_sizes_say() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.zip");
        let script = format!(
            "import zipfile\nz = zipfile.ZipFile({:?}, 'w')\n\
             z.writestr('pkg-1.0/big.py', 'x' * 5000, zipfile.ZIP_DEFLATED)\nz.close()\n",
            path.to_string_lossy()
        );
        let ok = std::process::Command::new("python3")
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(ok.success());
        let honest = std::fs::read(&path).unwrap();
        // The central directory's uncompressed size, made to say `size`.
        let saying = |size: u32| {
            let mut bytes = honest.clone();
            let at = bytes
                .windows(4)
                .position(|w| w == [0x50, 0x4b, 0x01, 0x02])
                .unwrap();
            bytes[at + 24..at + 28].copy_from_slice(&size.to_le_bytes());
            bytes
        };
        let fresh = |name: &str| {
            let dest = dir.path().join(name);
            fs_err::create_dir_all(&dest).unwrap();
            dest
        };
        // Larger than the cap as it says: refused before anything is inflated.
        let dest = fresh("honest");
        let why = unpack_zip(&honest, &dest, 100).unwrap_err();
        assert_eq!(why, "it unpacks to more than 100 bytes");
        assert!(!dest.join("pkg-1.0/big.py").exists());
        // Saying 4 GiB: refused, nothing reserved for it.
        let why = unpack_zip(&saying(u32::MAX - 1), &fresh("huge"), MAX_UNPACKED).unwrap_err();
        assert!(why.contains("more than 2048 MiB"), "{why}");
        // Saying 10 bytes of what inflates to 5000: inflated no further than 11, refused.
        let dest = fresh("small");
        let why = unpack_zip(&saying(10), &dest, 100).unwrap_err();
        assert_eq!(why, "a damaged zip archive");
        let written = std::fs::metadata(dest.join("pkg-1.0/big.py")).map_or(0, |m| m.len());
        assert!(written <= 11, "{written} bytes inflated");
        // Under a cap it fits, it unpacks.
        let dest = fresh("fits");
        unpack_zip(&honest, &dest, 5000).unwrap();
        assert_eq!(
            std::fs::read(dest.join("pkg-1.0/big.py")).unwrap(),
            vec![b'x'; 5000]
        );
    }

    #[test]
    fn only_64_lowercase_hex_digits_name_a_folder() {
        assert!(is_sha256(&"0a".repeat(32)));
        for bad in [
            String::new(),
            "../..".into(),
            "/home/alice/work".into(),
            "0A".repeat(32),
            "0a".repeat(31),
            "0a".repeat(33),
            format!("{}/x", "0".repeat(62)),
        ] {
            assert!(!is_sha256(&bad), "{bad}");
        }
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert_eq!(shown(&"y".repeat(100)), format!("{:?}...", "y".repeat(80)));
    }

    #[test]
    fn a_record_is_of_one_project_version_and_index() {
        let release = PypiRelease {
            project: "Iso.Date".into(),
            version: "0.7.2RC1".into(),
            index_url: "https://i/simple/".into(),
            sha256: None,
        };
        let of = ReleaseOf {
            project: "iso-date".into(),
            version: "0.7.2rc1".into(),
            index_url: "https://i/simple/".into(),
            filename: "iso_date-0.7.2rc1.tar.gz".into(),
        };
        assert!(of.is(&release));
        let other = |f: fn(&mut ReleaseOf)| {
            let mut o = of.clone();
            f(&mut o);
            o.is(&release)
        };
        assert!(!other(|o| o.version = "0.6.1".into()));
        assert!(!other(|o| o.project = "isodate".into()));
        assert!(!other(|o| o.index_url = "https://mirror/simple/".into()));
    }

    #[test]
    fn the_sdist_of_exactly_the_version_is_picked() {
        let release = PypiRelease {
            project: "Py.Date_Util".into(),
            version: "2.8.2".into(),
            index_url: "https://i/simple/".into(),
            sha256: None,
        };
        let file = |name: &str| IndexFile {
            filename: name.into(),
            url: format!("https://i/{name}"),
            sha256: None,
        };
        let files = [
            file("py-date-util-2.8.2-py3-none-any.whl"),
            file("py-date-util-2.8.20.tar.gz"),
            file("py-date-util-2.8.2.tar.gz"),
        ];
        assert_eq!(
            pick_sdist(&files, &release).unwrap().filename,
            "py-date-util-2.8.2.tar.gz"
        );
        assert!(pick_sdist(&files[..2], &release).is_none());
        let old = [
            file("py_date_util-2.8.2.zip"),
            file("py-date-util-2.8.2.tar.gz"),
        ];
        assert_eq!(
            pick_sdist(&old, &release).unwrap().filename,
            "py-date-util-2.8.2.tar.gz"
        );
        assert_eq!(
            pick_sdist(&old[..1], &release).unwrap().filename,
            "py_date_util-2.8.2.zip"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
