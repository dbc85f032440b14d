//! A cluster engine added through the `Engine` interface alone (`r2e_pipeline::cluster`): this
//! file, and its line in `main.rs`. `Local` runs each job as a process on this machine, each
//! shard with a local cache of its own, the shards' results in a `file://` store; its hosts
//! "die" once (shard 1's first attempt exits 3). The shared driver makes the jobs, submits
//! them, follows them, submits the failed one again, then the assemble, and collects what
//! happened: every shard ran (each left its summary), and the assemble built the dataset from
//! their stored results alone.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use r2e_core::config::Shard;
use r2e_core::error::{Error, Result};
use r2e_pipeline::cluster::{
    self, Engine, Follow, Job, JobStatus, Jobs, Outcome, Plan, Poll, shard_from_env,
};

use crate::common;

/// Jobs as processes of this machine.
struct Local {
    work: PathBuf,
    pipeline: PathBuf,
    shards: u32,
    /// The attempts running or ended, by id.
    running: HashMap<String, Child>,
    /// Every command submitted, in order.
    submitted: Vec<String>,
}

impl Local {
    fn store(&self) -> PathBuf {
        self.work.join("store")
    }

    fn output(&self) -> PathBuf {
        self.work.join("out/dataset")
    }

    /// `r2e build PIPELINE [--shard I/N]`, with a local cache of the job's own.
    fn command(&self, job: &Job) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("r2e"));
        let cache = match job.shard {
            Some(i) => format!("cache-{i}"),
            None => "cache-assemble".to_owned(),
        };
        c.arg("build")
            .arg(&self.pipeline)
            .arg("--json")
            .arg("--cache")
            .arg(self.work.join(cache))
            .arg("--output")
            .arg(self.output())
            .arg("--remote-cache")
            .arg(format!("file://{}", self.store().display()));
        if let Some(i) = job.shard {
            c.args(["--shard", &format!("{i}/{}", self.shards)]);
        }
        c.envs(common::offline_env());
        c
    }
}

impl Engine for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn shard_from_env(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
        _shards: Option<u32>,
    ) -> Option<Result<Shard>> {
        let text = var("LOCAL_SHARD")?;
        Some(Shard::parse(&text).map_err(Error::input))
    }

    fn check(&self) -> Result<()> {
        Ok(())
    }

    fn render(&mut self, plan: &Plan) -> Result<Jobs> {
        self.pipeline = plan.cfg.file.clone();
        self.shards = plan.shards;
        Ok(Jobs {
            shards: (0..plan.shards)
                .map(|i| Job {
                    name: format!("shard {i}/{}", plan.shards),
                    shard: Some(i),
                })
                .collect(),
            assemble: Job {
                name: "assemble".to_owned(),
                shard: None,
            },
        })
    }

    fn show(&self) -> String {
        format!("{} shard(s) of {}\n", self.shards, self.pipeline.display())
    }

    fn follow(&self) -> Follow {
        Follow::Driver
    }

    fn retries(&self) -> u32 {
        1
    }

    fn submit(&mut self, job: &Job, attempt: u32, _after: &[String]) -> Result<String> {
        let id = format!("{}-a{attempt}", job.name.replace([' ', '/'], "-"));
        let mut command = if job.shard == Some(1) && attempt == 1 {
            // Its host dies.
            let mut c = Command::new("sh");
            c.args(["-c", "exit 3"]);
            c
        } else {
            self.command(job)
        };
        self.submitted.push(format!("{id}: {command:?}"));
        let logs = self.work.join("logs");
        std::fs::create_dir_all(&logs)?;
        let child = command
            .stdout(std::fs::File::create(logs.join(format!("{id}.out")))?)
            .stderr(std::fs::File::create(logs.join(format!("{id}.err")))?)
            .stdin(Stdio::null())
            .spawn()?;
        self.running.insert(id.clone(), child);
        Ok(id)
    }

    fn poll(&mut self, _job: &Job, id: &str) -> Result<Option<Poll>> {
        let child = self.running.get_mut(id).expect("submitted");
        Ok(Some(match child.try_wait()? {
            None => Poll {
                status: JobStatus::Running,
                message: String::new(),
            },
            Some(s) if s.success() => Poll {
                status: JobStatus::Succeeded,
                message: String::new(),
            },
            Some(s) => Poll {
                status: JobStatus::Failed,
                message: format!("exited {s}"),
            },
        }))
    }

    fn pause(&mut self) -> Result<()> {
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    }

    fn stop(&mut self, _job: &Job, id: &str) -> Option<std::result::Result<(), String>> {
        let child = self.running.get_mut(id)?;
        Some(child.kill().map_err(|e| e.to_string()))
    }
}

#[test]
fn an_engine_added_through_the_interface_runs_every_shard_then_the_assemble() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let pipeline = crate::k8s::project(&w.join("project"), None);
    let mut local = Local {
        work: w.to_path_buf(),
        pipeline: PathBuf::new(),
        shards: 0,
        running: HashMap::new(),
        submitted: Vec::new(),
    };

    // Its shard identity, through the registry's lookup.
    let var = |name: &str| (name == "LOCAL_SHARD").then(|| "2/3".to_owned());
    let engines: Vec<Box<dyn Engine>> = vec![Box::new(Local {
        work: w.to_path_buf(),
        pipeline: PathBuf::new(),
        shards: 0,
        running: HashMap::new(),
        submitted: Vec::new(),
    })];
    let shard = shard_from_env(&engines, &var, None).unwrap().unwrap();
    assert_eq!((shard.index, shard.count), (2, 3));
    assert!(shard_from_env(&engines, &|_: &str| None, None).is_none());

    // Made and shown, nothing run.
    match cluster::drive(&mut local, &pipeline, 3, None, false).unwrap() {
        Outcome::Shown(text) => assert!(text.starts_with("3 shard(s) of "), "{text}"),
        other => panic!("{other:?}"),
    }
    assert!(local.submitted.is_empty());

    let outcome = cluster::drive(&mut local, &pipeline, 3, None, true).unwrap();
    let logs = || {
        let mut text = local.submitted.join("\n");
        for e in std::fs::read_dir(w.join("logs")).unwrap().flatten() {
            text.push_str(&format!(
                "\n--- {}\n{}",
                e.file_name().to_string_lossy(),
                std::fs::read_to_string(e.path()).unwrap()
            ));
        }
        text
    };
    let Outcome::Ran { jobs, succeeded } = outcome else {
        panic!("not run: {outcome:?}");
    };
    assert!(succeeded, "{jobs:?}\n{}", logs());
    let seen: Vec<_> = jobs
        .iter()
        .map(|j| {
            (
                j.name.as_str(),
                j.shard,
                j.attempts,
                j.status,
                j.submission_ids.len(),
            )
        })
        .collect();
    let ok = Some(JobStatus::Succeeded);
    assert_eq!(
        seen,
        [
            ("shard 0/3", Some(0), 1, ok, 1),
            ("shard 1/3", Some(1), 2, ok, 2),
            ("shard 2/3", Some(2), 1, ok, 1),
            ("assemble", None, 1, ok, 1),
        ],
        "{}",
        logs()
    );
    assert_eq!(jobs[1].submission_ids, ["shard-1-3-a1", "shard-1-3-a2"]);

    // Every shard ran: each left its summary beside the output.
    let shards_dir = w.join("out/.dataset.r2e/shards");
    for i in 0..3 {
        let summary = shards_dir.join(format!("shard-{i}-of-3.json"));
        let text = std::fs::read_to_string(&summary)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", summary.display(), logs()));
        let s: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(s["shard"]["index"], i, "{s}");
        assert_eq!(s["lost"], 0, "{s}");
    }
    // The assemble collected their results: the whole dataset, with no expensive action run.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.join("logs/assemble-a1.out")).unwrap())
            .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_eq!(summary["counts"]["instances"], 3, "{summary}");
    assert!(w.join("out/dataset/manifest.json").is_file());
    let started = common::expensive_actions_started(&shards_dir);
    assert!(started.is_empty(), "{started:?}");
}
