//! One cgroup per job, for memory and process limits (root ignores `RLIMIT_NPROC`, and an
//! address-space limit breaks numpy's threads): v1 (separate `pids` and `memory` hierarchies) or
//! v2, under this process's own cgroup. Named `r2e-<pid>-...`, so that the next build can remove
//! those a killed build left behind.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where this process's cgroups are, for one child cgroup per job.
#[derive(Clone, Debug)]
pub enum Cgroups {
    /// cgroup v1: separate `pids` and `memory` hierarchies.
    V1 {
        pids: PathBuf,
        memory: Option<PathBuf>,
    },
    /// cgroup v2: one unified hierarchy.
    V2 { base: PathBuf },
}

impl Cgroups {
    pub fn probe() -> Option<Cgroups> {
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

    pub fn create(&self, tag: &str) -> std::io::Result<JobCgroup> {
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
pub struct JobCgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl JobCgroup {
    pub fn limit(&self, processes: u64, memory_bytes: u64) -> std::io::Result<()> {
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

    pub fn has_memory(&self) -> bool {
        self.v2 || self.dirs.len() > 1
    }

    /// The `cgroup.procs` files a child writes its pid to.
    pub fn procs_files(&self) -> Vec<CString> {
        self.dirs
            .iter()
            .map(|d| {
                CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .expect("no NUL in paths")
            })
            .collect()
    }

    /// Kills every process in the cgroup.
    pub fn kill_all(&self) {
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
    pub fn limit_hit(&self) -> Option<&'static str> {
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
            // Newer kernels keep `oom_kill` in `memory.oom_control` and may leave `failcnt` at 0.
            if let Some(mem) = self.dirs.get(1)
                && (read(mem.join("memory.failcnt"))
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
                    > 0
                    || count(&read(mem.join("memory.oom_control")), "oom_kill ") > 0)
            {
                return Some("memory");
            }
            if count(&read(self.dirs[0].join("pids.events")), "max ") > 0 {
                return Some("processes");
            }
        }
        None
    }

    pub fn remove(self) {
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

impl Cgroups {
    /// The folders job cgroups are made in.
    fn bases(&self) -> Vec<PathBuf> {
        match self {
            Cgroups::V1 { pids, memory } => std::iter::once(pids.clone())
                .chain(memory.clone())
                .collect(),
            Cgroups::V2 { base } => vec![base.clone()],
        }
    }

    /// Removes the job cgroups of r2e processes that are gone (a killed build leaves them),
    /// killing what still runs in them. Returns how many it removed.
    pub fn remove_orphans(&self) -> usize {
        let mut removed = 0;
        for base in self.bases() {
            let Ok(entries) = std::fs::read_dir(&base) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix("r2e-")
                    .and_then(|r| r.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok())
                else {
                    continue;
                };
                if r2e_core::fsutil::pid_alive(pid) {
                    continue;
                }
                let group = JobCgroup {
                    dirs: vec![e.path()],
                    v2: matches!(self, Cgroups::V2 { .. }),
                };
                group.kill_all();
                if std::fs::remove_dir(e.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// The cgroup of a path as `/proc/self/cgroup` names it, for tests that look for leftovers.
pub fn leftovers() -> Vec<PathBuf> {
    let Some(groups) = Cgroups::probe() else {
        return Vec::new();
    };
    groups
        .bases()
        .iter()
        .filter_map(|b| std::fs::read_dir(b).ok())
        .flat_map(|d| d.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("r2e-"))
        .map(|e| e.path())
        .filter(|p: &PathBuf| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            name.split('-')
                .nth(1)
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !r2e_core::fsutil::pid_alive(pid))
        })
        .collect::<Vec<PathBuf>>()
        .into_iter()
        .filter(|p| Path::new(p).exists())
        .collect()
}
