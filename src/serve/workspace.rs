//! A session's workspace: a copy of the repository at the instance's commit with the target's
//! body stubbed out, the files an agent reads and writes (confined to the folder), and the
//! commands it runs there in the sandbox.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use r2e_exec::jobs::{Runtime, redact};
use r2e_exec::sandbox::{Exit, Job, Limits, Sandbox};
use r2e_exec::target::Target;

use super::ApiError;

/// Copies the repository at `root` into `dir` (a new folder) without what would show the
/// reference: version control, compiled caches, and the other copies of the module's code
/// (`hide`); then writes the stubbed module at `path`.
pub fn create(
    root: &Path,
    hide: &[PathBuf],
    dir: &Path,
    path: &str,
    stub: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let skip = |p: &Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        matches!(name, ".git" | ".hg" | ".svn" | "__pycache__")
            || name.ends_with(".pyc")
            || hide.iter().any(|h| p.starts_with(h))
    };
    let mut walk = walkdir::WalkDir::new(root).min_depth(1).into_iter();
    while let Some(entry) = walk.next() {
        let entry = entry.map_err(std::io::Error::other)?;
        if skip(entry.path()) {
            if entry.file_type().is_dir() {
                walk.skip_current_dir();
            }
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(root)
            .map_err(std::io::Error::other)?;
        let to = dir.join(rel);
        let kind = entry.file_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&to)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &to)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    let target = dir.join(path);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let _ = std::fs::remove_file(&target);
    std::fs::write(&target, stub)
}

/// The file `rel` names in the workspace `dir`, when it stays there: a relative path, no `..`,
/// and no symbolic link on the way (a command may have planted one).
pub fn confined(dir: &Path, rel: &str) -> Result<PathBuf, ApiError> {
    if rel.is_empty() {
        return Err(ApiError::bad("the path is empty"));
    }
    if rel.contains('\0') {
        return Err(ApiError::bad("the path holds a NUL byte"));
    }
    let path = Path::new(rel);
    if path.is_absolute() {
        return Err(ApiError::bad(format!(
            "`{rel}` is an absolute path: paths are relative to the workspace"
        )));
    }
    let mut out = dir.to_path_buf();
    for part in path.components() {
        match part {
            Component::Normal(name) => {
                out.push(name);
                if let Ok(meta) = std::fs::symlink_metadata(&out)
                    && meta.file_type().is_symlink()
                {
                    return Err(ApiError::bad(format!(
                        "`{rel}` goes through a symbolic link: links are not followed"
                    )));
                }
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ApiError::bad(format!(
                    "`{rel}` holds `..`: paths stay inside the workspace"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ApiError::bad(format!("`{rel}` is not a relative path")));
            }
        }
    }
    if out == dir {
        return Err(ApiError::bad("the path names the workspace itself"));
    }
    Ok(out)
}

/// A file's text, at most `max` bytes; never through a symbolic link.
pub fn read(dir: &Path, rel: &str, max: u64) -> Result<String, ApiError> {
    let path = confined(dir, rel)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ApiError::not_found(format!("the workspace has no file `{rel}`"))
            }
            _ => ApiError::bad(format!("cannot read `{rel}`: {e}")),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| ApiError::internal(format!("cannot read `{rel}`: {e}")))?;
    if !meta.is_file() {
        return Err(ApiError::bad(format!("`{rel}` is not a file")));
    }
    if meta.len() > max {
        return Err(ApiError::too_large(format!(
            "`{rel}` has {} bytes; files read through the API have at most {max}",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut file)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ApiError::internal(format!("cannot read `{rel}`: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(ApiError::too_large(format!(
            "`{rel}` grew past {max} bytes while it was read"
        )));
    }
    String::from_utf8(bytes).map_err(|_| ApiError::bad(format!("`{rel}` is not UTF-8 text")))
}

/// What a workspace holds: its bytes (a file's size, or the disk blocks it takes when more:
/// a sparse file counts whole) and its entries (files, folders and links).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub entries: u64,
}

/// A file's bytes as [`Usage`] counts them.
fn bytes_of(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    if meta.is_file() {
        meta.len().max(meta.blocks() * 512)
    } else {
        0
    }
}

/// What `dir` holds (never following a link).
pub fn usage(dir: &Path) -> Usage {
    let mut u = Usage::default();
    for entry in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        u.entries += 1;
        if let Ok(meta) = entry.metadata() {
            u.bytes += bytes_of(&meta);
        }
    }
    u
}

/// A session's quota: the most its workspace may hold (its copy's usage plus
/// `[serve] workspace_limit` and `workspace_files`), and what one command may add.
#[derive(Clone, Copy, Debug)]
pub struct Quota {
    pub bytes: u64,
    pub entries: u64,
    pub command_bytes: u64,
    /// The setting that sets `bytes`: named when it is past.
    bytes_setting: &'static str,
}

impl Quota {
    /// The quota of a workspace whose copy holds `copy`.
    pub fn over(copy: Usage, settings: &r2e_core::config::ServeConfig) -> Quota {
        Quota {
            bytes: copy.bytes.saturating_add(settings.workspace_limit),
            entries: copy.entries.saturating_add(settings.workspace_files),
            command_bytes: settings.command_write_limit,
            bytes_setting: "`[serve] workspace_limit` beyond the repository's copy",
        }
    }

    /// Why a workspace holding `now` is past the quota, if it is.
    fn exceeded(&self, now: Usage) -> Option<String> {
        if now.bytes > self.bytes {
            Some(format!(
                "the workspace would hold {} bytes; its quota is {} ({})",
                now.bytes, self.bytes, self.bytes_setting
            ))
        } else if now.entries > self.entries {
            Some(format!(
                "the workspace would hold {} files and folders; the session's quota is {} (`[serve] workspace_files` beyond the repository's copy)",
                now.entries, self.entries
            ))
        } else {
            None
        }
    }
}

/// Writes a file (its folders made as needed), at most `max` bytes, within the session's
/// `quota` (refused with 413, nothing written, past it); never through a link.
pub fn write(
    dir: &Path,
    rel: &str,
    text: &[u8],
    max: u64,
    quota: &Quota,
) -> Result<usize, ApiError> {
    if text.len() as u64 > max {
        return Err(ApiError::too_large(format!(
            "the body has {} bytes; files written through the API have at most {max}",
            text.len()
        )));
    }
    let path = confined(dir, rel)?;
    // What the workspace holds after the write: this file's bytes in place of the old ones,
    // and the file and the folders made for it if new.
    let mut after = usage(dir);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) => after.bytes = after.bytes.saturating_sub(bytes_of(&meta)),
        Err(_) => {
            let mut missing = path.as_path();
            while !missing.exists() && missing != dir {
                after.entries += 1;
                missing = missing.parent().unwrap_or(dir);
            }
        }
    }
    after.bytes += text.len() as u64;
    if let Some(why) = quota.exceeded(after) {
        return Err(ApiError::too_large(format!(
            "`{rel}` is not written: {why}"
        )));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ApiError::bad(format!("cannot make the folder of `{rel}`: {e}")))?;
        // What was just made is no link; what was there was checked by `confined`.
        confined(dir, rel)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| ApiError::bad(format!("cannot write `{rel}`: {e}")))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(ApiError::bad(format!("`{rel}` is not a file")));
    }
    file.write_all(text)
        .map_err(|e| ApiError::internal(format!("cannot write `{rel}`: {e}")))?;
    Ok(text.len())
}

/// What a command did, as the API answers it.
#[derive(serde::Serialize)]
pub struct ExecResult {
    pub stdout: String,
    pub stderr: String,
    /// `None` when a signal or the timeout ended it.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The limit that killed it, when one did (`memory limit`, `process limit`, `workspace
    /// quota`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'static str>,
    /// Why what it wrote was taken back (it went past the session's quota or the command's
    /// write limit); the API then answers 413.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// The folders a session's commands import from: the workspace's copies of the target's import
/// roots.
fn import_roots(dir: &Path, target: &Target) -> Vec<PathBuf> {
    std::iter::once(&target.import_root)
        .chain(&target.extra_roots)
        .filter_map(|p| p.strip_prefix(&target.root).ok())
        .map(|rel| dir.join(rel))
        .collect()
}

/// How often a running command's writes are measured.
const WATCH: std::time::Duration = std::time::Duration::from_millis(50);

/// What a workspace held before a command: per entry, whether a folder, and a file's size; and
/// its [`Usage`], from the same walk.
fn snapshot(dir: &Path) -> (std::collections::HashMap<PathBuf, (bool, u64)>, Usage) {
    let mut usage = Usage::default();
    let mut entries = std::collections::HashMap::new();
    for e in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        usage.entries += 1;
        if let Ok(meta) = e.metadata() {
            usage.bytes += bytes_of(&meta);
            entries.insert(e.path().to_path_buf(), (meta.is_dir(), meta.len()));
        }
    }
    (entries, usage)
}

/// Takes back what a command added to the workspace: the entries it made are removed, and the
/// files it grew are cut back to their size before it (what it changed in place stays).
fn take_back(dir: &Path, before: &std::collections::HashMap<PathBuf, (bool, u64)>) {
    let mut added: Vec<PathBuf> = Vec::new();
    let mut walk = walkdir::WalkDir::new(dir).min_depth(1).into_iter();
    while let Some(Ok(entry)) = walk.next() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        match before.get(path) {
            Some((true, _)) if meta.is_dir() => {}
            Some((false, len)) if meta.is_file() => {
                if meta.len() > *len
                    && let Ok(f) = std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                        .open(path)
                {
                    let _ = f.set_len(*len);
                }
            }
            _ => {
                added.push(path.to_path_buf());
                if meta.is_dir() {
                    walk.skip_current_dir();
                }
            }
        }
    }
    for path in added {
        // What cannot be removed stays; the quota still counts it.
        let _ = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// Runs `sh -c command` in the workspace, in the sandbox: no network, the workspace its only
/// writable folder, the environment and interpreter readable, the repository's own checkout
/// not (the workspace stands for it), the sandbox's limits with `seconds` of wall-clock time.
/// Its writes are held to the session's `quota`: no file grows past what is left of it (nor
/// past what one command may add), the workspace is measured every [`WATCH`] while it runs and
/// the command stopped once past either limit; then what it added is taken back, and the
/// result says why (`refused`).
#[allow(clippy::too_many_arguments)]
pub fn exec(
    sandbox: &dyn Sandbox,
    mut limits: Limits,
    dir: &Path,
    target: &Target,
    runtime: &Runtime,
    command: &str,
    max_output: usize,
    quota: &Quota,
) -> r2e_core::error::Result<ExecResult> {
    let (before, start) = snapshot(dir);
    let room = quota
        .bytes
        .saturating_sub(start.bytes)
        .min(quota.command_bytes);
    // RLIMIT_FSIZE counts MiB here: at least one (a limit of 0 would refuse every write),
    // the rest is the watch's.
    limits.file_size_mib = limits.file_size_mib.min((room >> 20).max(1));
    let by_command = start.bytes.saturating_add(quota.command_bytes);
    let command_quota = Quota {
        bytes: quota.bytes.min(by_command),
        entries: quota.entries,
        command_bytes: quota.command_bytes,
        bytes_setting: if by_command < quota.bytes {
            "what one command may add, `[serve] command_write_limit`"
        } else {
            quota.bytes_setting
        },
    };
    // What a run reads but the repository's checkout: the workspace stands for it.
    let readonly: Vec<PathBuf> = runtime
        .readonly()
        .into_iter()
        .filter(|p| p != &runtime.repo)
        .collect();
    let mut roots = import_roots(dir, target);
    roots.extend(runtime.project.iter().cloned());
    let mut pythonpath: Vec<String> = Vec::new();
    for (i, root) in roots.iter().enumerate() {
        if !roots[..i].contains(root) {
            pythonpath.push(root.to_string_lossy().into_owned());
        }
    }
    let bin = runtime
        .python
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let job = Job {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), command.to_owned()],
        // Over the sandbox's fixed variables (HOME is the workspace, no bytecode, UTF-8).
        env: vec![
            ("PATH".into(), format!("{bin}:/usr/local/bin:/usr/bin:/bin")),
            ("PYTHONPATH".into(), pythonpath.join(":")),
        ],
        scratch: dir.to_path_buf(),
        writable: Vec::new(),
        readonly,
        // In an image, the repository's checkout is there to read: hide it (the reference).
        hidden: if runtime.image.is_some() {
            vec![runtime.repo.clone()]
        } else {
            Vec::new()
        },
        network: false,
        limits,
        image: runtime.image.clone(),
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (outcome, past) = std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Some(why) = command_quota.exceeded(usage(dir)) {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    return Some(why);
                }
                std::thread::sleep(WATCH);
            }
            None
        });
        let outcome = sandbox.run_until(&job, &stop);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let past = watch.join().unwrap_or(None);
        (outcome, past)
    });
    let outcome = outcome?;
    // Measured once more when it has ended: what it wrote after the last look counts too.
    let refused = past.or_else(|| command_quota.exceeded(usage(dir)));
    if refused.is_some() {
        take_back(dir, &before);
    }
    let mut names: Vec<(PathBuf, &str)> = vec![(dir.to_path_buf(), "<workspace>")];
    names.extend(runtime.own_names());
    let text = |bytes: &[u8]| redact(&String::from_utf8_lossy(bytes), &names, max_output);
    let (exit_code, signal, timed_out) = match outcome.exit {
        Exit::Code(c) => (Some(c), None, false),
        Exit::Signal(s) => (None, Some(s), false),
        Exit::Timeout => (None, None, true),
    };
    let stopped = outcome.limit_hit == Some("stopped");
    Ok(ExecResult {
        stdout: text(&outcome.stdout),
        stderr: text(&outcome.stderr),
        exit_code,
        timed_out,
        limit: if stopped {
            Some("workspace quota")
        } else {
            outcome.limit_hit
        },
        signal,
        refused: refused.map(|why| {
            format!(
                "what the command wrote is taken back: {why} (one command adds at most {} bytes)",
                quota.command_bytes
            )
        }),
    })
}
