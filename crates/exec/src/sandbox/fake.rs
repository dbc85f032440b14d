//! A sandbox that runs nothing: each job is answered by a script (a closure), which may also
//! write files into the job's scratch folder as a real program would (an answer file, say).
//! Tests of the stages use it to produce any outcome (a timeout, a memory kill, a runner's
//! answer) without starting a Python process.

use std::sync::Mutex;
use std::time::Duration;

use super::{Exit, Job, Outcome, Sandbox};
use r2e_core::error::Result;

type Script = dyn Fn(&Job) -> Outcome + Send + Sync;

/// Answers every job with its script, and keeps the jobs it was given.
pub struct FakeSandbox {
    script: Box<Script>,
    jobs: Mutex<Vec<Job>>,
}

impl FakeSandbox {
    pub fn new(script: impl Fn(&Job) -> Outcome + Send + Sync + 'static) -> FakeSandbox {
        FakeSandbox {
            script: Box::new(script),
            jobs: Mutex::default(),
        }
    }

    /// The jobs run so far.
    pub fn jobs(&self) -> Vec<Job> {
        self.jobs.lock().unwrap().clone()
    }
}

/// An outcome with this exit and no output.
pub fn outcome(exit: Exit) -> Outcome {
    Outcome {
        exit,
        stdout: Vec::new(),
        stderr: Vec::new(),
        duration: Duration::from_millis(1),
        limit_hit: None,
    }
}

impl Sandbox for FakeSandbox {
    fn run(&self, job: &Job) -> Result<Outcome> {
        self.jobs.lock().unwrap().push(job.clone());
        Ok((self.script)(job))
    }

    fn describe(&self) -> String {
        "fake (runs nothing)".into()
    }

    fn backend(&self) -> r2e_core::keys::SandboxBackend {
        r2e_core::keys::SandboxBackend::Fake
    }

    fn isolated(&self) -> bool {
        true
    }
}
