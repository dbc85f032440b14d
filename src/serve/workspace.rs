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

/// Writes a file (its folders made as needed), at most `max` bytes; never through a link.
pub fn write(dir: &Path, rel: &str, text: &[u8], max: u64) -> Result<usize, ApiError> {
    if text.len() as u64 > max {
        return Err(ApiError::too_large(format!(
            "the body has {} bytes; files written through the API have at most {max}",
            text.len()
        )));
    }
    let path = confined(dir, rel)?;
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
    /// The limit that killed it, when one did (`memory limit`, `process limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'static str>,
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

/// Runs `sh -c command` in the workspace, in the sandbox: no network, the workspace its only
/// writable folder, the environment and interpreter readable, the repository's own checkout
/// not (the workspace stands for it), the sandbox's limits with `seconds` of wall-clock time.
#[allow(clippy::too_many_arguments)]
pub fn exec(
    sandbox: &dyn Sandbox,
    limits: Limits,
    dir: &Path,
    target: &Target,
    runtime: &Runtime,
    command: &str,
    max_output: usize,
) -> r2e_core::error::Result<ExecResult> {
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
    let outcome = sandbox.run(&job)?;
    let mut names: Vec<(PathBuf, &str)> = vec![(dir.to_path_buf(), "<workspace>")];
    names.extend(runtime.own_names());
    let text = |bytes: &[u8]| redact(&String::from_utf8_lossy(bytes), &names, max_output);
    let (exit_code, signal, timed_out) = match outcome.exit {
        Exit::Code(c) => (Some(c), None, false),
        Exit::Signal(s) => (None, Some(s), false),
        Exit::Timeout => (None, None, true),
    };
    Ok(ExecResult {
        stdout: text(&outcome.stdout),
        stderr: text(&outcome.stderr),
        exit_code,
        timed_out,
        limit: outcome.limit_hit,
        signal,
    })
}
