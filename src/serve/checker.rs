//! The checks of many sessions, batched: requests queue here, and each of a few threads takes
//! every request waiting (up to a batch) and checks them together through
//! [`Bench::check`](r2e_pipeline::bench::Bench::check), which runs those of one module in one warm
//! worker. Under load, one worker process serves many sessions' tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use r2e_core::error::{Error, Result};
use r2e_exec::checkpath::Checked;
use r2e_pipeline::bench::{Bench, Prepared};

/// The most candidates one batch takes.
const BATCH: usize = 32;

type Request = (Prepared, Sender<std::result::Result<Checked, String>>);

/// The queue of checks, and the threads that run them.
pub struct Checker {
    queue: Sender<Request>,
    stats: Arc<Stats>,
}

/// How many candidates were checked, in how many batches (a batch runs in one warm worker per
/// module it holds).
#[derive(Default)]
pub struct Stats {
    pub candidates: AtomicUsize,
    pub batches: AtomicUsize,
}

impl Checker {
    /// Starts `threads` threads checking against `bench`.
    pub fn start(bench: Arc<Bench>, threads: usize) -> Checker {
        let (tx, rx) = channel::<Request>();
        let rx = Arc::new(Mutex::new(rx));
        let stats = Arc::new(Stats::default());
        for n in 0..threads.max(1) {
            let (bench, rx, stats) = (bench.clone(), rx.clone(), stats.clone());
            std::thread::Builder::new()
                .name(format!("r2e-check-{n}"))
                .spawn(move || work(&bench, &rx, &stats))
                .expect("a checker thread starts");
        }
        Checker { queue: tx, stats }
    }

    /// Candidates checked and batches run so far.
    pub fn stats(&self) -> (usize, usize) {
        (
            self.stats.candidates.load(Ordering::Relaxed),
            self.stats.batches.load(Ordering::Relaxed),
        )
    }

    /// Checks one prepared candidate, waiting for its batch.
    pub fn check(&self, prepared: Prepared) -> Result<Checked> {
        let (tx, rx) = channel();
        self.queue
            .send((prepared, tx))
            .map_err(|_| Error::internal("the checker threads are gone"))?;
        rx.recv()
            .map_err(|_| Error::internal("a checker thread died"))?
            .map_err(Error::env)
    }
}

fn work(bench: &Bench, rx: &Mutex<Receiver<Request>>, stats: &Stats) {
    loop {
        let batch: Vec<Request> = {
            let rx = rx.lock().expect("queue lock");
            let Ok(first) = rx.recv() else { return };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            batch
        };
        let (prepared, replies): (Vec<Prepared>, Vec<_>) = batch.into_iter().unzip();
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats
            .candidates
            .fetch_add(prepared.len(), Ordering::Relaxed);
        match bench.check(&prepared) {
            Ok(checked) => {
                for (c, reply) in checked.into_iter().zip(replies) {
                    let _ = reply.send(Ok(c));
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.to_string()));
                }
            }
        }
    }
}
