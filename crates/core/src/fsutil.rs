//! Atomic file writes: a temporary file in the same folder, then a rename, so that a reader
//! never sees half a file. Temporary names carry the writer's pid, so that a later build can
//! tell the leftovers of a dead writer from those of a live one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The marker in every temporary file name this module makes: `.<name>.r2e-tmp.<pid>.<n>`.
pub const TMP_MARKER: &str = ".r2e-tmp.";

/// The first file named `name` in a folder of the `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, synced, then a
/// rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_parts(path, &[bytes], true)
}

/// Like [`write_atomic`], of the concatenation of `parts` (without making it); `sync` decides
/// whether the data is flushed to the disk before the rename (entries that verify themselves
/// on read need not be).
pub fn write_atomic_parts(path: &Path, parts: &[&[u8]], sync: bool) -> Result<()> {
    write_atomic_with(path, sync, |file| {
        for part in parts {
            file.write_all(part)?;
        }
        Ok(())
    })
}

/// Like [`write_atomic`], of what `write` writes into the file (a stream copied in, say).
pub fn write_atomic_with(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut fs_err::File) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = write_temp(path, sync, write)?;
    fs_err::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::from(e)
    })
}

/// Writes a temporary file beside `path` (named as [`write_atomic`]'s are) with `write`, synced
/// when `sync`, and returns its name: the caller renames or links it into place, and removes
/// it. On a failure nothing is left.
pub fn write_temp(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut fs_err::File) -> std::io::Result<()>,
) -> Result<PathBuf> {
    let tmp = temp_beside(path);
    let result = (|| -> std::io::Result<()> {
        let mut file = fs_err::File::create(&tmp)?;
        write(&mut file)?;
        if sync {
            file.sync_data()?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e.into())
        }
    }
}

/// A name beside `path` for a temporary file of this process: `.<name>.r2e-tmp.<pid>.<n>`.
pub fn temp_beside(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(
        ".{name}{TMP_MARKER}{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
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

/// The pid of the process that made a temporary file, from its name, when it is one of ours.
pub fn tmp_owner(name: &str) -> Option<u32> {
    let (_, rest) = name.split_once(TMP_MARKER)?;
    rest.split('.').next()?.parse().ok()
}

/// The bytes free for an unprivileged user on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path and a zeroed struct for the kernel to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0).then(|| st.f_bavail * st.f_frsize)
}

/// Whether the disk holding `path` is (nearly) full: less than 16 MiB free.
pub fn disk_full(path: &Path) -> bool {
    free_bytes(path).is_some_and(|free| free < 16 << 20)
}

/// Sets the modification time of `path` (a file or a folder, not followed when a symlink) to
/// now, leaving its access time; returns whether it could.
pub fn set_mtime_now(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
    ];
    // SAFETY: a valid NUL-terminated path and two timespecs, as utimensat(2) takes them.
    unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        ) == 0
    }
}

/// Whether a process with this pid is alive on this machine.
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid == std::process::id() || unsafe { libc::kill(pid as i32, 0) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_carry_their_owner() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        write_atomic(&path, b"1").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"1");
        assert!(!write_if_changed(&path, b"1").unwrap());
        assert!(write_if_changed(&path, b"2").unwrap());
        assert_eq!(tmp_owner(".x.json.r2e-tmp.42.7"), Some(42));
        assert_eq!(tmp_owner("x.json"), None);
        assert!(pid_alive(std::process::id()));
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(set_mtime_now(&path));
        let now = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(now > old + std::time::Duration::from_secs(1 << 29));
    }
}
