//! Running the embedded Python in the sandbox: a scratch folder per job with the scripts, the
//! files the job needs and its JSON request; the job's JSON answer read back, typed. What every
//! action that runs code needs (the cache, the sandbox and its settings) travels as one [`Exec`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::py::{BatchAnswer, BatchRequest};
use crate::sandbox::{Job, Limits, Outcome, Sandbox};
use r2e_core::cache::{Bucket, Cache};
use r2e_core::config::SandboxConfig;
use r2e_core::error::{Error, Result};
use r2e_core::keys::SandboxKey;

/// What running an action needs: the cache (for its entries and scratch folders), the sandbox
/// and the configured limits of one job.
#[derive(Clone, Copy)]
pub struct Exec<'a> {
    pub cache: &'a Cache,
    pub sandbox: &'a dyn Sandbox,
    pub settings: &'a SandboxConfig,
    /// Workers that live across requests (`r2e serve`), which a candidate's check tries first.
    pub warm: Option<&'a dyn Warm>,
}

/// Workers kept across requests (`warm::WarmPool`), as a batch of candidates' runs asks them:
/// defined here, below the pool, so that an [`Exec`] can carry one and the pool can run its
/// workers through an `Exec`.
pub trait Warm: Sync {
    /// The batch worker's answer to `request` from a warm worker for `runtime` and `hidden`, with
    /// `files` written beside it, and the worker's scratch folder (for redacting); `None` when
    /// none could answer within `wall` (the caller then runs a worker of its own).
    fn answer(
        &self,
        exec: &Exec,
        runtime: &Runtime,
        files: &[(&str, &str)],
        request: &BatchRequest,
        hidden: &[PathBuf],
        wall: std::time::Duration,
    ) -> Option<(BatchAnswer, PathBuf)>;
}

impl Exec<'_> {
    /// The sandbox settings that shape what code run in it does, for action keys.
    pub fn sandbox_key(&self) -> SandboxKey {
        sandbox_key(self.sandbox, self.settings)
    }

    /// The limits of a job that may take `seconds` of wall-clock and CPU time.
    pub fn limits(&self, seconds: u64) -> Limits {
        limits(self.settings, seconds)
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

/// The settings of `sandbox` under `settings` (`[sandbox]`) that shape what code run in it does,
/// as every action key that runs code holds them: the one place they are gathered, for the
/// stages and for `r2e status`.
pub fn sandbox_key(sandbox: &dyn Sandbox, settings: &SandboxConfig) -> SandboxKey {
    SandboxKey {
        backend: sandbox.backend(),
        isolated: sandbox.isolated(),
        memory_mib: settings.memory_mib,
        processes: settings.processes,
        file_size_mib: settings.file_size_mib,
        base_image: settings.base_image.clone(),
    }
}

/// The limits of one job under `settings` (`[sandbox]`) that may take `seconds` of wall-clock and
/// CPU time.
pub fn limits(settings: &SandboxConfig, seconds: u64) -> Limits {
    Limits {
        wall_seconds: seconds,
        cpu_seconds: seconds,
        memory_mib: settings.memory_mib,
        processes: settings.processes,
        file_size_mib: settings.file_size_mib,
    }
}

/// How to run code in an environment for a repository: the environment's interpreter, and what
/// a job must see to run it, read-only (the environment, the repository, the interpreter's
/// installation).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Runtime {
    pub python: PathBuf,
    /// The environment's folder.
    pub env: PathBuf,
    /// The repository's checkout.
    pub repo: PathBuf,
    /// The interpreter's installation, when the system's software does not hold it.
    pub interpreter: Vec<PathBuf>,
    /// The project layer's folder (`stages::environment::project`), put on `sys.path` after the
    /// environment's packages.
    pub project: Option<PathBuf>,
    /// The environment image holding all of the above (an imported export's), when jobs run in
    /// it instead of mounting them.
    pub image: Option<crate::sandbox::ImageRun>,
}

impl Runtime {
    /// What a job in this runtime may read.
    pub fn readonly(&self) -> Vec<PathBuf> {
        let mut out = vec![self.env.clone(), self.repo.clone()];
        out.extend(self.interpreter.iter().cloned());
        out.extend(self.project.iter().cloned());
        out
    }

    /// The job that runs `script` (a file in `scratch`) with `args` and the runtime's
    /// interpreter, seeing what the runtime shows and not `hidden`, without the network.
    pub fn script_job(
        &self,
        scratch: &Path,
        script: &str,
        args: Vec<String>,
        hidden: &[PathBuf],
        limits: Limits,
    ) -> Job {
        let script = scratch.join(script).to_string_lossy().into_owned();
        Job {
            program: self.python.clone(),
            args: ["-I".to_owned(), script].into_iter().chain(args).collect(),
            // The project layer, for `r2e_equiv.use_project_layer` (which `-I` leaves to read).
            env: self
                .project
                .iter()
                .map(|p| ("R2E_PROJECT".to_owned(), p.to_string_lossy().into_owned()))
                .collect(),
            scratch: scratch.to_path_buf(),
            writable: vec![],
            readonly: self.readonly(),
            hidden: hidden.to_vec(),
            network: false,
            limits,
            image: self.image.clone(),
        }
    }

    /// A runtime of made-up paths, for tests with a fake sandbox.
    pub fn for_tests() -> Runtime {
        Runtime {
            python: "/env/bin/python".into(),
            env: "/env".into(),
            repo: "/repo".into(),
            interpreter: Vec::new(),
            project: None,
            image: None,
        }
    }

    /// This machine's paths a job in this runtime may print, with the names outputs show
    /// instead (see [`redact`]).
    pub fn names(&self, scratch: &Path, cache: &Path) -> Vec<(PathBuf, &'static str)> {
        let mut out = vec![
            (scratch.to_path_buf(), "<scratch>"),
            (cache.to_path_buf(), "<cache>"),
        ];
        out.extend(self.own_names());
        out
    }

    /// The runtime's own folders, with the names outputs show instead: `<env>`, `<repo>`,
    /// `<python>`, `<project>`.
    pub fn own_names(&self) -> Vec<(PathBuf, &'static str)> {
        let mut out = vec![(self.env.clone(), "<env>"), (self.repo.clone(), "<repo>")];
        out.extend(self.interpreter.iter().map(|p| (p.clone(), "<python>")));
        out.extend(self.project.iter().map(|p| (p.clone(), "<project>")));
        out
    }
}

/// Text that untrusted code wrote, fit for an output: this machine's paths replaced by names
/// (`<scratch>`, `<repo>`, ...), and cut to `cap` characters.
pub fn redact(text: &str, paths: &[(PathBuf, &str)], cap: usize) -> String {
    let mut out = text.to_owned();
    // Longer paths first, so that a path inside another gets its own name.
    let mut paths: Vec<&(PathBuf, &str)> = paths.iter().collect();
    paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
    for (path, name) in paths {
        let p = path.to_string_lossy();
        if p.len() > 1 {
            out = out.replace(p.as_ref(), name);
        }
    }
    let count = out.chars().count();
    if count > cap {
        let kept: String = out.chars().take(cap).collect();
        out = format!("{kept}… ({} more characters)", count - cap);
    }
    out
}

/// The longest message of untrusted code an output keeps.
pub const MESSAGE_CAP: usize = 2000;

/// A job's scratch folder, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes files into the folder (names may hold `/`: subfolders are made). Not synced:
    /// the folder is the job's alone, read while this process lives and removed after.
    pub fn write(&self, files: &[(&str, &str)]) -> Result<()> {
        for (name, text) in files {
            let path = self.0.join(name);
            if let Some(parent) = path.parent() {
                fs_err::create_dir_all(parent)?;
            }
            fs_err::write(&path, text.as_bytes())?;
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Why a job has no answer.
#[derive(Clone, Debug, PartialEq)]
pub enum NoAnswer {
    /// It wrote none.
    Missing,
    /// What it wrote is not an answer (too deep, cut short, not JSON): why.
    Unreadable(String),
}

/// Runs `scripts[0]` (with the other scripts and `files` beside it) in the runtime, in the
/// sandbox, with `request` as its JSON request, `hidden` hidden from it; returns how it ended,
/// its JSON answer (or why there is none), and the scratch folder's path (gone by then: for
/// redacting messages). `Err` only when the sandbox itself failed (never cached).
pub fn run_script<Q: Serialize, A: DeserializeOwned>(
    exec: &Exec,
    runtime: &Runtime,
    scripts: &[(&str, &str)],
    files: &[(&str, &str)],
    request: &Q,
    limits: Limits,
    hidden: &[PathBuf],
) -> Result<(Outcome, std::result::Result<A, NoAnswer>, PathBuf)> {
    let scratch = exec.scratch()?;
    let dir = scratch.path();
    scratch.write(scripts)?;
    scratch.write(files)?;
    fs_err::write(
        dir.join("request.json"),
        serde_json::to_vec(request).map_err(Error::internal)?,
    )?;
    let path_arg = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let job = runtime.script_job(
        dir,
        scripts[0].0,
        vec![path_arg("request.json"), path_arg("out.json")],
        hidden,
        limits,
    );
    let outcome = exec.sandbox.run(&job)?;
    // The answer is untrusted too: serde_json's nesting limit keeps a deep one from
    // exhausting the stack; it is then unreadable.
    let answer = match std::fs::read(dir.join("out.json")) {
        Err(_) => Err(NoAnswer::Missing),
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map_err(|e| NoAnswer::Unreadable(e.to_string()))
        }
    };
    Ok((outcome, answer, dir.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_text_names_paths_and_is_capped() {
        let paths = vec![
            (PathBuf::from("/tmp/cache/scratch/job-1"), "<scratch>"),
            (PathBuf::from("/tmp/cache"), "<cache>"),
            (PathBuf::from("/home/me/repo"), "<repo>"),
        ];
        let text =
            "File \"/home/me/repo/m.py\", line 3; /tmp/cache/scratch/job-1/h.py; /tmp/cache/x";
        assert_eq!(
            redact(text, &paths, 1000),
            "File \"<repo>/m.py\", line 3; <scratch>/h.py; <cache>/x"
        );
        let long = "x".repeat(50);
        assert_eq!(
            redact(&long, &paths, 10),
            "xxxxxxxxxx… (40 more characters)"
        );
    }
}
