//! The local sandbox: bubblewrap on an empty root with an allow-list of mounts, as Flatpak uses it
//! (`mounts`); an unprivileged user with no capabilities; rlimits for CPU time and file size; a
//! cgroup per job for memory and process counts (`cgroup`); and a wall-clock timeout that kills
//! the whole process tree.
//!
//! A job sees the system's software (`/usr` and the `/lib*`, `/bin` folders), a minimal `/etc`
//! (no `shadow`, no `ssh`), the folders its job names read-only (the interpreter, the one
//! environment, the repository), its scratch folder and the folders it may write. Nothing else of
//! the machine: not `/root`, `/home`, the cache or the output.
//!
//! When r2e runs as root, the job's code runs as the unprivileged user 65534: bubblewrap sets up
//! the mounts as root, then `setpriv` drops the user, its groups and every capability before the
//! program starts (bubblewrap's own user namespace would still map to uid 0). Otherwise
//! bubblewrap runs it in a user namespace as the calling user, with every capability dropped.
//!
//! Without bubblewrap, r2e refuses to run code unless the user allows it
//! (`--unsafe-no-sandbox`); then only the limits apply.

mod cgroup;
mod mounts;

use std::ffi::CString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use cgroup::{Cgroups, JobCgroup};

use super::{Exit, Job, Outcome, Sandbox};
use r2e_core::error::{Error, Result};

pub use cgroup::leftovers as leftover_cgroups;
pub use mounts::{Etc, give_to, outside_system};

/// Output kept per stream; the rest is dropped.
const OUTPUT_CAP: usize = 4 << 20;
/// The unprivileged user code runs as when r2e runs as root.
pub const NOBODY: u32 = 65534;

/// Whether bubblewrap can start a sandbox here: `bwrap --unshare-all true`, tried three times
/// before it is given up, because a machine under load can fail one start (a namespace or a
/// process it cannot create for a moment). The error is the last try's own message.
fn probe_bwrap(bwrap: &Path) -> std::result::Result<(), String> {
    let mut last = String::new();
    for pause in [
        Duration::ZERO,
        Duration::from_millis(200),
        Duration::from_secs(1),
    ] {
        std::thread::sleep(pause);
        let probe = Command::new(bwrap)
            .args([
                "--ro-bind",
                "/",
                "/",
                "--unshare-all",
                "--die-with-parent",
                "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match probe {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                last = if said.is_empty() {
                    format!("it exited with {}", out.status)
                } else {
                    said
                };
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// Runs jobs on this machine.
pub struct LocalSandbox {
    bwrap: Option<PathBuf>,
    /// Why a `bwrap` found on the `PATH` is not used: it failed its probe every time. Told
    /// apart from a missing one, so that the message says which.
    bwrap_failure: Option<String>,
    /// `setpriv`, to drop root inside the sandbox.
    setpriv: Option<PathBuf>,
    cgroups: Option<Cgroups>,
    /// The minimal `/etc` jobs see.
    etc: Option<Etc>,
    /// Whether running code without bubblewrap is allowed (`--unsafe-no-sandbox`).
    allow_unsandboxed: bool,
}

/// Whether this process runs as root (bubblewrap and the docker backend then drop to nobody).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl LocalSandbox {
    /// Probes the machine for bubblewrap, `setpriv` and a writable cgroup. Without bubblewrap,
    /// jobs are refused unless `allow_unsandboxed`.
    pub fn new(allow_unsandboxed: bool) -> LocalSandbox {
        let (bwrap, bwrap_failure) = match r2e_core::fsutil::find_program("bwrap") {
            None => (None, None),
            Some(b) => match probe_bwrap(&b) {
                Ok(()) => (Some(b), None),
                Err(why) => {
                    let failure = format!(
                        "`{}` is installed but cannot start a sandbox: {why}",
                        b.display()
                    );
                    (None, Some(failure))
                }
            },
        };
        static WARN: Once = Once::new();
        if bwrap.is_none() && allow_unsandboxed {
            WARN.call_once(|| {
                eprintln!(
                    "WARNING: bubblewrap (`bwrap`) is not available{} and --unsafe-no-sandbox was given: \
                     untrusted code runs WITHOUT isolation (it can read this machine's files and reach \
                     the network); only resource limits apply.",
                    bwrap_failure.as_deref().map(|f| format!(" ({f})")).unwrap_or_default()
                )
            });
        }
        LocalSandbox {
            setpriv: r2e_core::fsutil::find_program("setpriv").or_else(|| {
                ["/usr/bin/setpriv", "/bin/setpriv"]
                    .map(PathBuf::from)
                    .into_iter()
                    .find(|p| p.is_file())
            }),
            etc: bwrap.as_ref().and_then(|_| Etc::create().ok()),
            bwrap,
            bwrap_failure,
            cgroups: Cgroups::probe(),
            allow_unsandboxed,
        }
    }

    /// The command that runs a job: under bubblewrap, or bare.
    fn command(&self, job: &Job, env: &[(String, String)]) -> Result<Command> {
        let Some(bwrap) = &self.bwrap else {
            if let (Some(failure), false) = (&self.bwrap_failure, self.allow_unsandboxed) {
                return Err(Error::env(format!(
                    "bubblewrap {failure}, so r2e will not run a repository's code: check that \
                     unprivileged user namespaces are allowed, or pass `--unsafe-no-sandbox` to run \
                     the code without isolation"
                )));
            }
            if !self.allow_unsandboxed {
                return Err(Error::env(
                    "bubblewrap (`bwrap`) is not available, so r2e will not run a repository's code: \
                     install it (`apt-get install bubblewrap`), or pass `--unsafe-no-sandbox` to run \
                     the code without isolation",
                ));
            }
            let mut c = Command::new(&job.program);
            c.args(&job.args)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .current_dir(&job.scratch);
            return Ok(c);
        };
        let etc = self
            .etc
            .as_ref()
            .ok_or_else(|| Error::env("cannot prepare the sandbox's /etc"))?;
        let mut c = Command::new(bwrap);
        c.args(mounts::args(job, etc));
        let drop_root = is_root();
        if drop_root {
            // No user namespace (it would map only uid 0): `setpriv` drops to a real
            // unprivileged user once the mounts are made.
            c.args([
                "--unshare-ipc",
                "--unshare-pid",
                "--unshare-uts",
                "--unshare-cgroup-try",
            ]);
            if !job.network {
                c.arg("--unshare-net");
            }
        } else {
            c.args(["--unshare-all", "--cap-drop", "ALL"]);
            if job.network {
                c.arg("--share-net");
            }
        }
        c.args(["--die-with-parent", "--new-session"]);
        c.arg("--chdir").arg(&job.scratch).arg("--clearenv");
        for (k, v) in env {
            c.arg("--setenv").arg(k).arg(v);
        }
        c.arg("--");
        if drop_root {
            let setpriv = self.setpriv.as_ref().ok_or_else(|| {
                Error::env(
                    "`setpriv` (util-linux) is not available: r2e runs as root and needs it to run \
                     code as an unprivileged user (`apt-get install util-linux`)",
                )
            })?;
            c.arg(setpriv).args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]);
        }
        c.arg(&job.program).args(&job.args);
        Ok(c)
    }
}

/// Environment every job gets, for determinism.
pub fn fixed_env(scratch: &Path) -> Vec<(String, String)> {
    let s = scratch.to_string_lossy().into_owned();
    vec![
        ("PYTHONHASHSEED".into(), "0".into()),
        ("TZ".into(), "UTC".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("PYTHONNOUSERSITE".into(), "1".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("HOME".into(), s.clone()),
        ("TMPDIR".into(), format!("{s}/.tmp")),
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        // Libraries that spawn a thread per core would meet the process limit.
        ("OMP_NUM_THREADS".into(), "1".into()),
        ("OPENBLAS_NUM_THREADS".into(), "1".into()),
        ("MKL_NUM_THREADS".into(), "1".into()),
    ]
}

/// The rlimits and the cgroup a job's first process sets up between fork and exec.
struct PreExec {
    cpu: u64,
    file_size: u64,
    /// Set when no cgroup bounds the processes.
    processes: Option<u64>,
    /// Set when no cgroup bounds memory.
    data: Option<u64>,
    procs_files: Vec<CString>,
    /// Without bubblewrap, as root: become this user (so that `RLIMIT_NPROC` holds).
    become_user: Option<u32>,
}

impl PreExec {
    /// Installs itself on the command.
    fn install(self, cmd: &mut Command) {
        // SAFETY: the closure runs between fork and exec and uses only async-signal-safe calls
        // (setsid, setrlimit, open, write, close, setgid, setuid) on data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                let set = |res, v: u64| {
                    let lim = libc::rlimit {
                        rlim_cur: v,
                        rlim_max: v,
                    };
                    libc::setrlimit(res, &lim);
                };
                set(libc::RLIMIT_CPU, self.cpu);
                set(libc::RLIMIT_FSIZE, self.file_size);
                set(libc::RLIMIT_CORE, 0);
                if let Some(data) = self.data {
                    set(libc::RLIMIT_DATA, data);
                }
                for file in &self.procs_files {
                    let fd = libc::open(file.as_ptr(), libc::O_WRONLY);
                    if fd >= 0 {
                        libc::write(fd, b"0".as_ptr().cast(), 1);
                        libc::close(fd);
                    }
                }
                // Root ignores RLIMIT_NPROC; the unprivileged user it becomes does not.
                if let Some(n) = self.processes {
                    set(libc::RLIMIT_NPROC, n);
                }
                if let Some(uid) = self.become_user
                    && (libc::setgid(uid) != 0 || libc::setuid(uid) != 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// How a started job ended: its status, or the wall clock.
/// Why a job was killed before it ended by itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    ByItself,
    Timeout,
    Stopped,
}

fn wait(
    child: &mut Child,
    pid: i32,
    deadline: Instant,
    cgroup: Option<&JobCgroup>,
    stop: &std::sync::atomic::AtomicBool,
) -> (Option<ExitStatus>, Ended) {
    loop {
        let why = if Instant::now() >= deadline {
            Ended::Timeout
        } else if stop.load(std::sync::atomic::Ordering::SeqCst) {
            Ended::Stopped
        } else {
            Ended::ByItself
        };
        match child.try_wait() {
            Ok(Some(status)) => return (Some(status), Ended::ByItself),
            Ok(None) if why != Ended::ByItself => {
                // SAFETY: kills the job's own process group (it called setsid).
                unsafe { libc::kill(-pid, libc::SIGKILL) };
                let _ = child.kill();
                if let Some(cg) = cgroup {
                    cg.kill_all();
                }
                return (child.wait().ok(), why);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => return (None, Ended::ByItself),
        }
    }
}

impl Sandbox for LocalSandbox {
    fn backend(&self) -> r2e_core::keys::SandboxBackend {
        r2e_core::keys::SandboxBackend::Local
    }

    /// Job cgroups of processes that are gone.
    fn remove_leftovers(&self) -> usize {
        self.cgroups.as_ref().map_or(0, Cgroups::remove_orphans)
    }

    fn isolated(&self) -> bool {
        self.bwrap.is_some()
    }

    fn hides_per_child(&self) -> bool {
        // Without bubblewrap nothing is hidden at all.
        self.bwrap.is_some()
    }

    fn describe(&self) -> String {
        format!(
            "local ({}, {})",
            if self.bwrap.is_some() {
                "bubblewrap"
            } else {
                "NO isolation"
            },
            match &self.cgroups {
                Some(Cgroups::V1 { .. }) => "cgroup v1 limits",
                Some(Cgroups::V2 { .. }) => "cgroup v2 limits",
                None => "rlimits only",
            }
        )
    }

    fn run(&self, job: &Job) -> Result<Outcome> {
        self.run_until(job, &std::sync::atomic::AtomicBool::new(false))
    }

    fn run_until(&self, job: &Job, stop: &std::sync::atomic::AtomicBool) -> Result<Outcome> {
        if let Some(image) = &job.image {
            return Err(Error::input(format!(
                "the environment image `{}` runs only in the docker sandbox: set `[sandbox] backend = \"docker\"`",
                image.tag
            )));
        }
        fs_err::create_dir_all(job.scratch.join(".tmp"))?;
        let mut env = fixed_env(&job.scratch);
        env.extend(job.env.iter().cloned());
        let mut cmd = self.command(job, &env)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());

        let limits = &job.limits;
        let cgroup = self.cgroups.as_ref().and_then(|c| c.create("job").ok());
        if let Some(cg) = &cgroup {
            cg.limit(limits.processes, limits.memory_mib << 20)
                .map_err(|e| Error::env(format!("cannot set cgroup limits: {e}")))?;
        }
        // Code that runs as the unprivileged user writes only where it may.
        let unprivileged = is_root();
        if unprivileged {
            for dir in std::iter::once(&job.scratch).chain(&job.writable) {
                mounts::give_to(dir, NOBODY);
            }
        }
        PreExec {
            cpu: limits.cpu_seconds,
            file_size: limits.file_size_mib << 20,
            data: (!cgroup.as_ref().is_some_and(JobCgroup::has_memory))
                .then_some(limits.memory_mib << 20),
            procs_files: cgroup.as_ref().map(|c| c.procs_files()).unwrap_or_default(),
            // A pids cgroup counts this job's processes alone; RLIMIT_NPROC counts the user's.
            processes: cgroup.is_none().then_some(limits.processes),
            become_user: (unprivileged && self.bwrap.is_none()).then_some(NOBODY),
        }
        .install(&mut cmd);

        let start = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(cg) = cgroup {
                    cg.remove();
                }
                return Err(Error::env(format!(
                    "cannot start `{}`: {e}",
                    job.program.display()
                )));
            }
        };
        let pid = child.id() as i32;
        let out = spawn_reader(child.stdout.take().expect("piped"));
        let err = spawn_reader(child.stderr.take().expect("piped"));
        let deadline = start + Duration::from_secs(limits.wall_seconds);
        let (status, ended) = wait(&mut child, pid, deadline, cgroup.as_ref(), stop);
        // Whatever the job left running dies with it.
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        if let Some(cg) = &cgroup {
            cg.kill_all();
        }
        let duration = start.elapsed();
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        let limit_hit = cgroup.as_ref().and_then(|c| c.limit_hit());
        if let Some(cg) = cgroup {
            cg.remove();
        }
        let (exit, limit_hit) = match ended {
            Ended::Timeout => (Exit::Timeout, limit_hit),
            Ended::Stopped => (Exit::Signal(libc::SIGKILL), Some("stopped")),
            Ended::ByItself => (self.exit_of(status), limit_hit),
        };
        if let Some(why) = self.setup_failure(&exit, &stderr) {
            return Err(Error::env(format!(
                "the sandbox could not start `{}`: {why}",
                job.program.display()
            )));
        }
        Ok(Outcome {
            exit,
            stdout,
            stderr,
            duration,
            limit_hit,
        })
    }
}

impl LocalSandbox {
    fn exit_of(&self, status: Option<ExitStatus>) -> Exit {
        match status {
            Some(s) => match (s.code(), s.signal()) {
                (_, Some(sig)) => Exit::Signal(sig),
                // bubblewrap reports a child killed by a signal as 128 + the signal.
                (Some(code), None) if self.bwrap.is_some() && code > 128 && code < 160 => {
                    Exit::Signal(code - 128)
                }
                (Some(code), None) => Exit::Code(code),
                (None, None) => Exit::Code(-1),
            },
            None => Exit::Code(-1),
        }
    }

    /// Why the sandbox itself failed (a program that cannot be started, a mount that is
    /// missing): an error of the build, never an outcome of the job's code.
    fn setup_failure(&self, exit: &Exit, stderr: &[u8]) -> Option<String> {
        if self.bwrap.is_none()
            || !matches!(exit, Exit::Code(1) | Exit::Code(126) | Exit::Code(127))
        {
            return None;
        }
        let text = String::from_utf8_lossy(stderr);
        let first = text.lines().next().unwrap_or_default();
        (first.starts_with("bwrap: ") || first.starts_with("setpriv: ")).then(|| first.to_owned())
    }
}

fn spawn_reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = OUTPUT_CAP.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        kept
    })
}
