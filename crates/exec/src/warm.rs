//! Warm workers that live across requests, for `r2e serve`'s checks: a candidate's check is one
//! forked child of a worker that is already running, not a new sandbox job.
//!
//! A worker is the batch worker (`r2e_batch.py --serve`) started as a sandbox job like any
//! other: the same runtime, limits and hidden files as a one-shot worker for the same requests
//! (the hidden files are fixed when it starts, so a worker serves one runtime and one set of
//! hidden files: every module's candidates when each child hides its own module's file,
//! `runs::per_child`, otherwise one module's). It reads requests from a FIFO in its scratch folder
//! and answers each into a file there, as a one-shot worker answers its one request, so an
//! answer is the same either way (`r2e_batch`'s tests compare them).
//!
//! The pool only speeds up: whenever a worker cannot answer (it did not start, it died, it was
//! slow, a run of it crashed, which only a one-shot job's limit counters can tell apart from a
//! limit hit), the caller runs the one-shot worker instead, the only path whose answers are
//! stored as they are. A worker idle for `idle` seconds stops by itself; one that has lived
//! [`LIFE`] is retired; the sandbox's wall-clock limit stops one that hangs.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::jobs::{Exec, Runtime, Scratch, Warm};
use crate::py::{self, BatchAnswer, BatchRequest};
use crate::sandbox::Sandbox;
use r2e_core::error::{Error, Result};

/// How long a worker serves before it is retired (its job's wall-clock limit is a little more).
pub const LIFE: Duration = Duration::from_secs(600);

/// The most idle workers kept (each a process holding an interpreter); beyond it, the one
/// idle longest stops.
const MAX_IDLE: usize = 16;

/// How long a new worker may take to start.
const START: Duration = Duration::from_secs(60);

/// What a worker is for: its runtime and the files it hides.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    runtime: Runtime,
    hidden: Vec<PathBuf>,
}

/// The idle workers, by what they are for (a worker in use is out of the pool).
pub struct WarmPool {
    sandbox: Arc<dyn Sandbox>,
    idle: Duration,
    workers: Mutex<HashMap<Key, Vec<Worker>>>,
    /// Workers started, and requests they answered.
    started: AtomicUsize,
    answered: AtomicUsize,
}

struct Worker {
    scratch: Scratch,
    to: File,
    from: File,
    /// Set when its job has ended.
    ended: Arc<AtomicBool>,
    born: Instant,
    used: Instant,
}

impl Worker {
    /// Ends its input, so that it stops, and waits (a little) for its job to end: its
    /// container or processes gone before its scratch folder is.
    fn stop(self) {
        let Worker {
            scratch, to, ended, ..
        } = self;
        drop(to);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ended.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(scratch);
    }

    fn fit(&self, idle: Duration) -> bool {
        !self.ended.load(Ordering::SeqCst)
            && self.born.elapsed() < LIFE
            && self.used.elapsed() + Duration::from_secs(1) < idle
    }

    /// The next line the worker writes, waiting at most until `deadline`; `None` when it wrote
    /// none by then, or its job ended.
    fn line(&mut self, deadline: Instant) -> Option<String> {
        let mut got = Vec::new();
        loop {
            if let Some(end) = got.iter().position(|&b| b == b'\n') {
                got.truncate(end);
                return String::from_utf8(got).ok();
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if self.ended.load(Ordering::SeqCst) && !readable(&self.from, Duration::ZERO) {
                return None;
            }
            if !readable(&self.from, left.min(Duration::from_millis(200))) {
                continue;
            }
            let mut byte = [0u8; 1];
            match self.from.read(&mut byte) {
                Ok(1) => got.push(byte[0]),
                _ => return None,
            }
        }
    }
}

/// Takes out the worker idle longest when more than `max` are idle.
fn evict_beyond(workers: &mut HashMap<Key, Vec<Worker>>, max: usize) -> Option<Worker> {
    if workers.values().map(Vec::len).sum::<usize>() <= max {
        return None;
    }
    let (key, at) = workers
        .iter()
        .flat_map(|(k, list)| list.iter().enumerate().map(move |(i, w)| (k, i, w.used)))
        .min_by_key(|(_, _, used)| *used)
        .map(|(k, i, _)| (k.clone(), i))?;
    let list = workers.get_mut(&key)?;
    let worker = list.remove(at);
    if list.is_empty() {
        workers.remove(&key);
    }
    Some(worker)
}

/// Whether `file` has something to read within `wait`.
fn readable(file: &File, wait: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the length of the call.
    let n = unsafe { libc::poll(&mut fd, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
    n > 0 && fd.revents & libc::POLLIN != 0
}

/// A FIFO at `path` that the job's user may open.
fn fifo(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::internal("a NUL in a scratch path"))?;
    // SAFETY: a valid C string for the length of the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o666) } != 0 {
        return Err(Error::from(std::io::Error::last_os_error()));
    }
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(())
}

fn open_both_ways(path: &Path) -> Result<File> {
    // Read and write: opening never waits for the other side, and the worker sees the end of
    // its input only when this side closes it.
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?)
}

impl WarmPool {
    /// A pool running workers in `sandbox`; each stops after `idle` without a request.
    pub fn new(sandbox: Arc<dyn Sandbox>, idle: Duration) -> WarmPool {
        WarmPool {
            sandbox,
            idle,
            workers: Mutex::new(HashMap::new()),
            started: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
        }
    }

    /// Workers started, and requests they answered, so far.
    pub fn stats(&self) -> (usize, usize) {
        (
            self.started.load(Ordering::Relaxed),
            self.answered.load(Ordering::Relaxed),
        )
    }

    /// Stops every idle worker, waiting for their jobs to end.
    pub fn stop(&self) {
        let all: Vec<Worker> = self
            .workers
            .lock()
            .expect("pool lock")
            .drain()
            .flat_map(|(_, list)| list)
            .collect();
        for worker in all {
            worker.stop();
        }
    }

    fn start(&self, exec: &Exec, runtime: &Runtime, hidden: &[PathBuf]) -> Result<Worker> {
        let scratch = exec.scratch()?;
        let dir = scratch.path().to_path_buf();
        let scripts = py::batch_worker();
        scratch.write(&scripts)?;
        fifo(&dir.join("in.fifo"))?;
        fifo(&dir.join("out.fifo"))?;
        let to = open_both_ways(&dir.join("in.fifo"))?;
        let from = open_both_ways(&dir.join("out.fifo"))?;
        let path_arg = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let job = runtime.script_job(
            &dir,
            scripts[0].0,
            vec![
                "--serve".into(),
                path_arg("in.fifo"),
                path_arg("out.fifo"),
                self.idle.as_secs().max(1).to_string(),
            ],
            hidden,
            exec.limits(LIFE.as_secs() + 60),
        );
        let ended = Arc::new(AtomicBool::new(false));
        let (sandbox, flag) = (self.sandbox.clone(), ended.clone());
        std::thread::Builder::new()
            .name("r2e-warm-worker".into())
            .spawn(move || {
                let _ = sandbox.run(&job);
                flag.store(true, Ordering::SeqCst);
            })
            .map_err(|e| Error::env(format!("cannot start a worker thread: {e}")))?;
        self.started.fetch_add(1, Ordering::Relaxed);
        let mut worker = Worker {
            scratch,
            to,
            from,
            ended,
            born: Instant::now(),
            used: Instant::now(),
        };
        match worker.line(Instant::now() + START) {
            Some(line) if line == "ready" => Ok(worker),
            _ => {
                worker.stop();
                Err(Error::env("a warm worker did not start"))
            }
        }
    }
}

impl Warm for WarmPool {
    /// A warm worker for `runtime` and `hidden` is started if none is idle.
    fn answer(
        &self,
        exec: &Exec,
        runtime: &Runtime,
        files: &[(&str, &str)],
        request: &BatchRequest,
        hidden: &[PathBuf],
        wall: Duration,
    ) -> Option<(BatchAnswer, PathBuf)> {
        let key = Key {
            runtime: runtime.clone(),
            hidden: hidden.to_vec(),
        };
        let idle = {
            let mut workers = self.workers.lock().expect("pool lock");
            let list = workers.entry(key.clone()).or_default();
            let (fit, unfit): (Vec<Worker>, Vec<Worker>) =
                list.drain(..).partition(|w| w.fit(self.idle));
            *list = fit;
            let next = list.pop();
            drop(workers);
            for worker in unfit {
                worker.stop();
            }
            next
        };
        let mut worker = match idle {
            Some(w) => w,
            None => self.start(exec, runtime, hidden).ok()?,
        };
        let answer = ask(&mut worker, files, request, wall);
        if answer.is_some() {
            worker.used = Instant::now();
            self.answered.fetch_add(1, Ordering::Relaxed);
            let path = worker.scratch.path().to_path_buf();
            let evicted = {
                let mut workers = self.workers.lock().expect("pool lock");
                workers.entry(key).or_default().push(worker);
                evict_beyond(&mut workers, MAX_IDLE)
            };
            if let Some(w) = evicted {
                w.stop();
            }
            answer.map(|a| (a, path))
        } else {
            // Its input ends, so it stops (or its wall-clock limit stops it).
            worker.stop();
            None
        }
    }
}

/// Sends one request to `worker` and reads its answer.
fn ask<Q: Serialize>(
    worker: &mut Worker,
    files: &[(&str, &str)],
    request: &Q,
    wall: Duration,
) -> Option<BatchAnswer> {
    let dir = worker.scratch.path().to_path_buf();
    let out = dir.join("out.json");
    let _ = std::fs::remove_file(&out);
    worker.scratch.write(files).ok()?;
    let request_path = dir.join("request.json");
    fs_err::write(&request_path, serde_json::to_vec(request).ok()?).ok()?;
    let line = format!("{} {}\n", request_path.display(), out.display());
    worker.to.write_all(line.as_bytes()).ok()?;
    match worker.line(Instant::now() + wall) {
        Some(l) if l == "done" => {}
        _ => return None,
    }
    let bytes = std::fs::read(&out).ok()?;
    serde_json::from_slice(&bytes).ok()
}
