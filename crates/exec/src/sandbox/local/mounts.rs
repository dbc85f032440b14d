//! The mounts of a job under bubblewrap: an allow-list on an empty root. The system's software
//! (`/usr`, and `/bin`, `/sbin`, `/lib*` as they are: folders or merged-`/usr` symlinks), a
//! minimal `/etc` made for the sandbox (users, hosts, name service; and for jobs with network the
//! resolver and certificates), fresh `/dev`, `/proc` and `/tmp`, the folders the job may read and
//! those it may write. Nothing else: not `/root`, `/home`, the cache or the output.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::super::Job;

/// Folders of the system's software, shown read-only.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files of the real `/etc` a job with network needs (name resolution, certificates).
const NETWORK_ETC: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/gai.conf",
];

/// Files of the real `/etc` that are not secret and that programs read to start.
const PLAIN_ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/mime.types",
];

/// The files of the sandbox's own `/etc`.
const ETC_FILES: [&str; 5] = ["passwd", "group", "hosts", "nsswitch.conf", "hostname"];

/// A minimal `/etc` in a temporary folder, removed when dropped.
pub struct Etc(tempfile::TempDir);

impl Etc {
    pub fn create() -> std::io::Result<Etc> {
        // Those of r2e processes that died go first.
        if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix("r2e-etc-")
                    .and_then(|r| r.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|p| !r2e_core::fsutil::pid_alive(p)) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = tempfile::Builder::new()
            .prefix(&format!("r2e-etc-{}-", std::process::id()))
            .tempdir()?;
        let files: [(&str, &str); ETC_FILES.len()] = [
            (
                "passwd",
                "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            ),
            ("group", "root:x:0:\nnogroup:x:65534:\n"),
            ("hosts", "127.0.0.1 localhost\n::1 localhost\n"),
            (
                "nsswitch.conf",
                "passwd: files\ngroup: files\nhosts: files dns\n",
            ),
            ("hostname", "sandbox\n"),
        ];
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text)?;
        }
        std::fs::write(dir.path().join(EMPTY), "")?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        Ok(Etc(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// An empty regular file: what a hidden file shows. (Not `/dev/null`: Python's importer
    /// finds modules only in regular files, and a hidden module must stay importable when the
    /// candidate is loaded in its place.)
    pub fn empty(&self) -> PathBuf {
        self.path().join(EMPTY)
    }
}

/// The name of the empty file in the sandbox's `/etc` folder (never mounted under `/etc`).
const EMPTY: &str = ".empty";

/// bubblewrap's arguments for a job's file system.
pub fn args(job: &Job, etc: &Etc) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |parts: &[&dyn AsRef<std::ffi::OsStr>]| {
        a.extend(parts.iter().map(|p| p.as_ref().to_os_string()));
    };
    // Folders of the sandbox's own root first, traversable (bubblewrap would make the folders
    // leading to a mount 0700, which the unprivileged user cannot enter). None of them shows
    // anything of the machine.
    push(&[&"--perms", &"0755", &"--dir", &"/etc"]);
    push(&[&"--tmpfs", &"/tmp"]);
    let mounts: Vec<&PathBuf> = job
        .readonly
        .iter()
        .chain(std::iter::once(&job.scratch))
        .chain(&job.writable)
        .collect();
    let mut leading: Vec<&Path> = mounts
        .iter()
        .flat_map(|m| m.ancestors().skip(1))
        .filter(|d| {
            !matches!(d.to_str(), Some("/" | "/etc" | "/tmp"))
                && !SYSTEM
                    .iter()
                    .chain(["/etc"].iter())
                    .any(|s| d.starts_with(s))
        })
        .filter(|d| !mounts.iter().any(|m| d.starts_with(m)))
        .collect();
    leading.sort_by_key(|d| (d.components().count(), d.to_path_buf()));
    leading.dedup();
    for dir in leading {
        push(&[&"--perms", &"0755", &"--dir", &dir]);
    }
    for dir in SYSTEM {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => push(&[&"--symlink", &target, &path]),
            Err(_) if path.is_dir() => push(&[&"--ro-bind", &path, &path]),
            Err(_) => {}
        }
    }
    // `/etc` holds only these files.
    for name in ETC_FILES {
        let (file, dest) = (etc.path().join(name), Path::new("/etc").join(name));
        push(&[&"--ro-bind", &file, &dest]);
    }
    for file in PLAIN_ETC
        .iter()
        .chain(if job.network { NETWORK_ETC } else { &[] })
    {
        push(&[&"--ro-bind-try", file, file]);
    }
    push(&[&"--dev", &"/dev", &"--proc", &"/proc"]);
    for path in &job.readonly {
        push(&[&"--ro-bind", path, path]);
    }
    for dir in std::iter::once(&job.scratch).chain(&job.writable) {
        push(&[&"--bind", dir, dir]);
    }
    for path in &job.hidden {
        if path.is_dir() {
            push(&[&"--tmpfs", path]);
        } else if path.exists() {
            push(&[&"--ro-bind", &etc.empty(), path]);
        }
    }
    a
}

/// Makes a folder the job writes owned by `uid`, unless it is already (its contents made
/// since by that user are too).
pub fn give_to(dir: &Path, uid: u32) {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(dir).is_ok_and(|m| m.uid() == uid) {
        return;
    }
    chown_tree(dir, uid);
}

fn chown_tree(dir: &Path, uid: u32) {
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if let Ok(c) = std::ffi::CString::new(entry.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::lchown(c.as_ptr(), uid, uid) };
        }
    }
}

/// The folder holding an interpreter's installation (`sys.base_prefix`), which jobs running it
/// must see; `None` when the system's software already holds it.
pub fn outside_system(prefix: &Path) -> Option<PathBuf> {
    (!SYSTEM.iter().any(|s| prefix.starts_with(s))).then(|| prefix.to_path_buf())
}
