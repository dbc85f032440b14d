//! Running the embedded Python in the sandbox: a scratch folder per job with the scripts, the
//! files the job needs and its JSON request; the job's JSON answer read back, typed. What every
//! action that runs code needs (the cache, the sandbox and its settings) travels as one [`Exec`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{Bucket, Cache, write_atomic};
use crate::config::SandboxConfig;
use crate::error::{Error, Result};
use crate::keys::SandboxKey;
use crate::sandbox::{Job, Limits, Outcome, Sandbox};

/// What running an action needs: the cache (for its entries and scratch folders), the sandbox
/// and the configured limits of one job.
#[derive(Clone, Copy)]
pub struct Exec<'a> {
    pub cache: &'a Cache,
    pub sandbox: &'a dyn Sandbox,
    pub settings: &'a SandboxConfig,
}

impl Exec<'_> {
    /// The sandbox settings that shape what code run in it does, for action keys.
    pub fn sandbox_key(&self) -> SandboxKey {
        SandboxKey {
            backend: self.sandbox.backend(),
            isolated: self.sandbox.isolated(),
            memory_mib: self.settings.memory_mib,
            processes: self.settings.processes,
            file_size_mib: self.settings.file_size_mib,
        }
    }

    /// The limits of a job that may take `seconds` of wall-clock and CPU time.
    pub fn limits(&self, seconds: u64) -> Limits {
        Limits {
            wall_seconds: seconds,
            cpu_seconds: seconds,
            memory_mib: self.settings.memory_mib,
            processes: self.settings.processes,
            file_size_mib: self.settings.file_size_mib,
        }
    }

    /// A new scratch folder for one job (removed by [`Scratch`]'s drop).
    pub fn scratch(&self) -> Result<Scratch> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = self.cache.dir(Bucket::Scratch)?.join(format!(
            "job-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs_err::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
}

/// A job's scratch folder, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes files into the folder (names may hold `/`: subfolders are made).
    pub fn write(&self, files: &[(&str, &str)]) -> Result<()> {
        for (name, text) in files {
            let path = self.0.join(name);
            if let Some(parent) = path.parent() {
                fs_err::create_dir_all(parent)?;
            }
            write_atomic(&path, text.as_bytes())?;
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Runs `scripts[0]` (with the other scripts and `files` beside it) under `python` in the
/// sandbox, with `request` as its JSON request; returns how it ended and its JSON answer, or
/// `None` when it wrote none. `Err` only when the sandbox itself failed (never cached).
pub fn run_script<Q: Serialize, A: DeserializeOwned>(
    exec: &Exec,
    python: &Path,
    scripts: &[(&str, &str)],
    files: &[(&str, &str)],
    request: &Q,
    limits: Limits,
) -> Result<(Outcome, Option<A>)> {
    let scratch = exec.scratch()?;
    let dir = scratch.path();
    scratch.write(scripts)?;
    scratch.write(files)?;
    write_atomic(
        &dir.join("request.json"),
        &serde_json::to_vec(request).map_err(Error::internal)?,
    )?;
    let path_arg = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let job = Job {
        program: python.to_path_buf(),
        args: vec![
            "-I".into(),
            path_arg(scripts[0].0),
            path_arg("request.json"),
            path_arg("out.json"),
        ],
        env: vec![],
        scratch: dir.to_path_buf(),
        writable: vec![],
        network: false,
        limits,
    };
    let outcome = exec.sandbox.run(&job)?;
    let answer = std::fs::read(dir.join("out.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Ok((outcome, answer))
}
