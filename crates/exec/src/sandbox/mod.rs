//! Where untrusted code runs: everything from the repositories and everything a model writes.
//!
//! [`Sandbox`] is the seam: the stages describe a [`Job`] (a program, its arguments and
//! environment, a writable scratch folder, resource limits, and whether it may use the network)
//! and get back an [`Outcome`]. [`local::LocalSandbox`] runs jobs on this machine (bubblewrap,
//! rlimits, cgroups, a wall-clock timeout that kills the whole process tree); [`fake::FakeSandbox`]
//! answers from a script, for tests that start no process. The engine builds one sandbox per
//! build from the configuration and hands it to the stages.

pub mod docker;
pub mod fake;
pub mod local;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Resource limits of one job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Limits {
    /// CPU seconds (RLIMIT_CPU).
    pub cpu_seconds: u64,
    /// Memory in MiB (a cgroup memory limit where available).
    pub memory_mib: u64,
    /// Processes and threads at once (a cgroup `pids.max` where available).
    pub processes: u64,
    /// Largest file the job may write, in MiB (RLIMIT_FSIZE).
    pub file_size_mib: u64,
    /// Wall-clock time before the whole process tree is killed.
    pub wall_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 60,
            memory_mib: 2048,
            processes: 64,
            file_size_mib: 64,
            wall_seconds: 120,
        }
    }
}

/// One program run in the sandbox.
#[derive(Clone, Debug)]
pub struct Job {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The only environment the job sees (plus the determinism settings the sandbox adds).
    pub env: Vec<(String, String)>,
    /// The working directory; also the only writable folder.
    pub scratch: PathBuf,
    /// More folders the job may write (an environment being installed).
    pub writable: Vec<PathBuf>,
    /// Folders (or files) the job may read, shown at their own paths: the interpreter, the one
    /// environment, the repository. Nothing else of the machine is visible but its system
    /// software and a minimal `/etc`.
    pub readonly: Vec<PathBuf>,
    /// Files and folders inside those the job must not see: a file reads as empty, a folder
    /// as empty (the original module a candidate replaces, compiled caches, version control).
    pub hidden: Vec<PathBuf>,
    /// Whether the job may reach the network (only environment installation may).
    pub network: bool,
    pub limits: Limits,
    /// The environment image the job runs in (the docker backend only): it holds the job's
    /// read-only folders, which are then not mounted from this machine.
    pub image: Option<ImageRun>,
}

/// A job's environment image (`r2e export`'s): its tag, and for each folder of the image that a
/// job may name in `hidden`, the folder of this machine with the same files, which tells
/// whether a hidden path is a file or a folder.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageRun {
    pub tag: String,
    pub same_files: Vec<(PathBuf, PathBuf)>,
}

impl ImageRun {
    /// The path of this machine that holds what `path` (in the image) holds, if any.
    pub fn on_host(&self, path: &Path) -> Option<PathBuf> {
        self.same_files.iter().find_map(|(inside, host)| {
            let rel = path.strip_prefix(inside).ok()?;
            Some(host.join(rel))
        })
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal (from a limit, or a crash).
    Signal(i32),
    /// Killed by the wall-clock timeout.
    Timeout,
}

/// What a job did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub duration: Duration,
    /// Whether a memory or process limit was hit (from the cgroup's counters).
    pub limit_hit: Option<&'static str>,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }
}

/// Runs jobs in isolation.
pub trait Sandbox: Send + Sync {
    /// Runs a job to completion (or to its limits). `Err` only when the sandbox itself fails
    /// (cannot start the program); what the job does is in the [`Outcome`].
    fn run(&self, job: &Job) -> r2e_core::error::Result<Outcome>;
    /// [`Sandbox::run`], ending the job early (killed, as by its wall clock, but reported as
    /// `Exit::Signal(9)` with `limit_hit` "`stopped`") once `stop` is set: `r2e serve`'s
    /// watch on a command's writes. A backend that cannot stop a job early runs it to its
    /// limits (the docker backend; the caller still judges what it did afterwards).
    fn run_until(
        &self,
        job: &Job,
        _stop: &std::sync::atomic::AtomicBool,
    ) -> r2e_core::error::Result<Outcome> {
        self.run(job)
    }
    /// A one-line description for logs and `r2e explain`.
    fn describe(&self) -> String;
    /// The backend's name, for action keys (`local`, `docker`, `fake`).
    fn backend(&self) -> r2e_core::keys::SandboxBackend;
    /// Whether code runs isolated from the machine (it shapes what code can do).
    fn isolated(&self) -> bool;
    /// Whether a job's forked children can each hide files of their own (a mount namespace
    /// in a user namespace per child, `r2e_batch.py`), so that one worker serves candidates of
    /// several modules. A backend that cannot (Docker's default seccomp profile refuses
    /// unprivileged namespaces) runs a worker per module instead, each job hiding its module.
    fn hides_per_child(&self) -> bool {
        false
    }
    /// Removes what jobs of builds that died left behind (cgroups, containers); returns how many.
    fn remove_leftovers(&self) -> usize {
        0
    }
    /// Gives the sandbox the store shared between hosts (`[cache] remote`), before its first
    /// job: the docker backend takes its base image from there, or puts it there
    /// (`image_share`). Other backends have nothing to share.
    fn share_through(&self, _remote: std::sync::Arc<r2e_core::cache::remote::Remote>) {}
}
