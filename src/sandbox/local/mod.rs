//! The local sandbox: bubblewrap for isolation (no network, a read-only view of the machine but
//! for the job's scratch folder, its own PID namespace), rlimits for CPU time and file size, a
//! cgroup for memory and process counts (root ignores `RLIMIT_NPROC`, and an address-space limit
//! breaks numpy's threads), and a wall-clock timeout that kills the whole process tree.
//!
//! Without bubblewrap it says so once, loudly, and still applies the limits. Without a usable
//! cgroup it bounds memory with `RLIMIT_DATA` and, when running as root, drops the job to the
//! unprivileged user `nobody` so that `RLIMIT_NPROC` holds.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Exit, Job, Outcome, Sandbox};
use crate::error::{Error, Result};

/// Output kept per stream; the rest is dropped.
const OUTPUT_CAP: usize = 4 << 20;
/// The unprivileged user a job runs as when neither a cgroup nor a non-root user bounds it.
const NOBODY: u32 = 65534;

/// Runs jobs on this machine.
pub struct LocalSandbox {
    bwrap: Option<PathBuf>,
    cgroups: Option<Cgroups>,
}

/// Where this process's cgroups are, for one child cgroup per job.
#[derive(Clone, Debug)]
enum Cgroups {
    /// cgroup v1: separate `pids` and `memory` hierarchies.
    V1 {
        pids: PathBuf,
        memory: Option<PathBuf>,
    },
    /// cgroup v2: one unified hierarchy.
    V2 { base: PathBuf },
}

impl LocalSandbox {
    /// Probes the machine for bubblewrap and a writable cgroup.
    pub fn new() -> LocalSandbox {
        let bwrap = find_program("bwrap").filter(|b| {
            Command::new(b)
                .args([
                    "--ro-bind",
                    "/",
                    "/",
                    "--unshare-all",
                    "--die-with-parent",
                    "true",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        static WARN: Once = Once::new();
        if bwrap.is_none() {
            WARN.call_once(|| {
                eprintln!(
                    "WARNING: bubblewrap (`bwrap`) is not available: untrusted code runs WITHOUT isolation \
                     (it can reach the network and write outside its folder); only resource limits apply. \
                     Install it with `apt-get install bubblewrap`."
                )
            });
        }
        LocalSandbox {
            bwrap,
            cgroups: Cgroups::probe(),
        }
    }
}

impl Default for LocalSandbox {
    fn default() -> Self {
        Self::new()
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

impl Cgroups {
    fn probe() -> Option<Cgroups> {
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mut v1_pids = None;
        let mut v1_memory = None;
        let mut v2 = None;
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            for c in controllers.split(',') {
                match c {
                    "pids" => v1_pids = Some(Path::new("/sys/fs/cgroup/pids").join(path)),
                    "memory" => v1_memory = Some(Path::new("/sys/fs/cgroup/memory").join(path)),
                    "" => v2 = Some(Path::new("/sys/fs/cgroup").join(path)),
                    _ => {}
                }
            }
        }
        let candidate = match (v1_pids, v2) {
            (Some(pids), _) if pids.is_dir() => Cgroups::V1 {
                pids,
                memory: v1_memory.filter(|m| m.is_dir()),
            },
            (_, Some(base)) if base.join("cgroup.controllers").exists() => Cgroups::V2 { base },
            _ => return None,
        };
        // Can we make a child and set a limit there?
        let probe = candidate.create("probe").ok()?;
        let ok = probe.limit(16, 64 << 20).is_ok();
        probe.remove();
        ok.then_some(candidate)
    }

    fn create(&self, tag: &str) -> std::io::Result<JobCgroup> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "r2e-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dirs = match self {
            Cgroups::V1 { pids, memory } => {
                let mut dirs = vec![pids.join(&name)];
                if let Some(m) = memory {
                    dirs.push(m.join(&name));
                }
                dirs
            }
            Cgroups::V2 { base } => vec![base.join(&name)],
        };
        for d in &dirs {
            std::fs::create_dir(d)?;
        }
        Ok(JobCgroup {
            dirs,
            v2: matches!(self, Cgroups::V2 { .. }),
        })
    }
}

/// The cgroup(s) of one job.
struct JobCgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl JobCgroup {
    fn limit(&self, processes: u64, memory_bytes: u64) -> std::io::Result<()> {
        if self.v2 {
            std::fs::write(self.dirs[0].join("pids.max"), processes.to_string())?;
            std::fs::write(self.dirs[0].join("memory.max"), memory_bytes.to_string())?;
            let _ = std::fs::write(self.dirs[0].join("memory.swap.max"), "0");
        } else {
            std::fs::write(self.dirs[0].join("pids.max"), processes.to_string())?;
            if let Some(mem) = self.dirs.get(1) {
                std::fs::write(mem.join("memory.limit_in_bytes"), memory_bytes.to_string())?;
                let _ = std::fs::write(
                    mem.join("memory.memsw.limit_in_bytes"),
                    memory_bytes.to_string(),
                );
            }
        }
        Ok(())
    }

    fn has_memory(&self) -> bool {
        self.v2 || self.dirs.len() > 1
    }

    /// The `cgroup.procs` files a child writes its pid to.
    fn procs_files(&self) -> Vec<CString> {
        self.dirs
            .iter()
            .map(|d| {
                CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .expect("no NUL in paths")
            })
            .collect()
    }

    /// Kills every process in the cgroup.
    fn kill_all(&self) {
        if self.v2 && std::fs::write(self.dirs[0].join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for _ in 0..50 {
            let pids =
                std::fs::read_to_string(self.dirs[0].join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = pids.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: plain syscall on a pid read from our own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Which limit was hit, from the cgroup's event counters.
    fn limit_hit(&self) -> Option<&'static str> {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        let count = |text: &str, key: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(key)
                        .and_then(|v| v.trim().parse::<u64>().ok())
                })
                .unwrap_or(0)
        };
        if self.v2 {
            let mem = read(self.dirs[0].join("memory.events"));
            if count(&mem, "oom_kill ") > 0 || count(&mem, "max ") > 0 {
                return Some("memory");
            }
            if count(&read(self.dirs[0].join("pids.events")), "max ") > 0 {
                return Some("processes");
            }
        } else {
            if let Some(mem) = self.dirs.get(1)
                && read(mem.join("memory.failcnt"))
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
                    > 0
            {
                return Some("memory");
            }
            if count(&read(self.dirs[0].join("pids.events")), "max ") > 0 {
                return Some("processes");
            }
        }
        None
    }

    fn remove(self) {
        for d in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Environment every job gets, for determinism.
fn fixed_env(scratch: &Path) -> Vec<(String, String)> {
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

impl Sandbox for LocalSandbox {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn isolated(&self) -> bool {
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
        fs_err::create_dir_all(job.scratch.join(".tmp"))?;
        let mut env = fixed_env(&job.scratch);
        env.extend(job.env.iter().cloned());

        let mut cmd = match &self.bwrap {
            Some(bwrap) => {
                let mut c = Command::new(bwrap);
                c.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
                for dir in std::iter::once(&job.scratch).chain(&job.writable) {
                    c.arg("--bind").arg(dir).arg(dir);
                }
                c.args(["--unshare-all", "--die-with-parent", "--new-session"]);
                if job.network {
                    c.arg("--share-net");
                }
                c.arg("--chdir").arg(&job.scratch).arg("--clearenv");
                for (k, v) in &env {
                    c.arg("--setenv").arg(k).arg(v);
                }
                c.arg("--").arg(&job.program).args(&job.args);
                c
            }
            None => {
                let mut c = Command::new(&job.program);
                c.args(&job.args)
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(&job.scratch);
                c
            }
        };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());

        let limits = &job.limits;
        let cgroup = self.cgroups.as_ref().and_then(|c| c.create("job").ok());
        if let Some(cg) = &cgroup {
            cg.limit(limits.processes, limits.memory_mib << 20)
                .map_err(|e| Error::env(format!("cannot set cgroup limits: {e}")))?;
        }
        let procs_files = cgroup.as_ref().map(|c| c.procs_files()).unwrap_or_default();
        let memory_by_cgroup = cgroup.as_ref().is_some_and(|c| c.has_memory());
        // SAFETY: geteuid has no preconditions.
        let drop_to_nobody = cgroup.is_none() && unsafe { libc::geteuid() } == 0;
        if drop_to_nobody {
            chown_tree(&job.scratch, NOBODY);
            for w in &job.writable {
                chown_tree(w, NOBODY);
            }
        }
        let (cpu, fsize, nproc, mem) = (
            limits.cpu_seconds,
            limits.file_size_mib << 20,
            limits.processes,
            limits.memory_mib << 20,
        );
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
                set(libc::RLIMIT_CPU, cpu);
                set(libc::RLIMIT_FSIZE, fsize);
                set(libc::RLIMIT_CORE, 0);
                if !memory_by_cgroup {
                    set(libc::RLIMIT_DATA, mem);
                }
                for file in &procs_files {
                    let fd = libc::open(file.as_ptr(), libc::O_WRONLY);
                    if fd >= 0 {
                        libc::write(fd, b"0".as_ptr().cast(), 1);
                        libc::close(fd);
                    }
                }
                if drop_to_nobody {
                    set(libc::RLIMIT_NPROC, nproc);
                    if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }

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
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => {
                    timed_out = true;
                    // SAFETY: kills the job's own process group (it called setsid).
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = child.kill();
                    if let Some(cg) = &cgroup {
                        cg.kill_all();
                    }
                    break child.wait().ok();
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(_) => break None,
            }
        };
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
        let exit = if timed_out {
            Exit::Timeout
        } else {
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
        };
        Ok(Outcome {
            exit,
            stdout,
            stderr,
            duration,
            limit_hit,
        })
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

fn chown_tree(dir: &Path, uid: u32) {
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if let Ok(c) = CString::new(entry.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::lchown(c.as_ptr(), uid, uid) };
        }
    }
}
