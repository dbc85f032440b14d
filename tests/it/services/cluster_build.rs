//! Real builds spread over hosts: six repositories, the scripted model, a Slurm cluster of
//! network namespaces (`common::cluster`) and an S3 server (moto) on the controller's host, each
//! host with its own local cache. The sharded build gives the one-machine build's dataset
//! version, every expensive action runs once across the hosts (from their action traces), the
//! assemble runs none; damaged remote entries are named, recomputed alone and repaired; a
//! stopped store leaves a plain build to its local work and fails a shard; no credential reaches
//! a file. Then the same with a WebDAV server (nginx) as the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    self,
    cluster::{Cluster, Network},
};

pub(crate) const SECRET: &str = "r2e-cluster-secret-9f2c";

/// Six repositories of two functions each, every one distinct.
pub(crate) fn write_repos(root: &Path) -> Vec<String> {
    (0..6)
        .map(|i| {
            let name = format!("repo{i}");
            let limit = 50 + 10 * i;
            common::write_fixture(
                &root.join(&name),
                &format!(
                    "//- pkg{i}/__init__.py\n//- pkg{i}/ops.py\nLIMIT = {limit}\n\n\
                     def add_small(a, b):\n    \"\"\"Add two numbers, capping the result at LIMIT.\"\"\"\n    total = a + b\n    if total > LIMIT:\n        return LIMIT\n    return total\n\n\
                     def sub_small(a, b):\n    \"\"\"Subtract b from a, never below zero.\"\"\"\n    total = a - b\n    if total < {i}:\n        return {i}\n    return total\n"
                ),
            );
            name
        })
        .collect()
}

/// The pipeline: the six repositories, offline environments, the built-in generator, specs
/// refined by the scripted model at `model_url`, and `remote` (if any) as the remote cache.
pub(crate) fn pipeline(
    dir: &Path,
    repos: &[String],
    model_url: &str,
    remote: Option<&str>,
) -> PathBuf {
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, pipeline_text(repos, model_url, remote)).unwrap();
    path
}

/// The text of [`pipeline`]'s `pipeline.toml`.
fn pipeline_text(repos: &[String], model_url: &str, remote: Option<&str>) -> String {
    let mut text = String::from("version = 1\n[project]\nname = \"cluster\"\n\n");
    for r in repos {
        text.push_str(&format!("[[repo]]\npath = \"repos/{r}\"\n\n"));
    }
    text.push_str(&format!(
        "[env]\ninstaller = \"pip\"\n\n[providers.local]\nbase_url = \"{model_url}\"\nmax_concurrency = 2\n\n\
         [refine]\nenabled = true\nprovider = \"local\"\nmodel = \"scripted\"\n\n"
    ));
    if let Some(remote) = remote {
        text.push_str(&format!(
            "[cache]\nremote = \"{remote}\"\nlease_seconds = 10\n"
        ));
    }
    text
}

/// The six repositories, written for a shared build (`shared/repos`), and the one-machine
/// build's summary (no remote store): its version is V. The one-machine build is the same for
/// every test here and in `cluster_ray`: built once per test run (`common::seed`), with a
/// scripted model of its own (its answers, and so V, do not depend on where it listens or how
/// fast it answers).
pub(crate) fn one_machine(w: &Path) -> (Vec<String>, Value) {
    let repos = write_repos(&w.join("shared/repos"));
    let seed = common::seed::seeded(
        "cluster-reference",
        &pipeline_text(&repos, "MODEL", None),
        |dir| {
            let repos = write_repos(&dir.join("one/repos"));
            let (model_url, _, _) = common::server::serve(Duration::ZERO, refine);
            let one = pipeline(&dir.join("one"), &repos, &model_url, None);
            let env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
            let (code, summary, stderr) = build(&one, &dir.join("cache-one"), &env, &[]);
            assert_eq!(code, 0, "{stderr}");
            std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
        },
    );
    let summary = serde_json::from_slice(&std::fs::read(seed.join("summary.json")).unwrap())
        .expect("the one-machine build's summary");
    (repos, summary)
}

/// The scripted model's answer: a refined docstring naming the request (stable for a prompt).
pub(crate) fn refine(prompt: &str, _: usize) -> (u16, &'static str, String) {
    let tag = &blake3::hash(prompt.as_bytes()).to_hex()[..8];
    (200, "", format!("```text\nRefined spec {tag}.\n```"))
}

/// The environment of every r2e process here: offline environments, the S3 server's settings.
pub(crate) fn s3_env(endpoint: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
    env.extend([
        ("AWS_ENDPOINT_URL", endpoint.to_owned()),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", "AKIDCLUSTER".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET.to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ]);
    env
}

/// `r2e build --json` of `pipeline` with the local cache `cache` and `args`: exit code, summary,
/// stderr.
pub(crate) fn build(
    pipeline: &Path,
    cache: &Path,
    env: &[(&'static str, String)],
    args: &[&str],
) -> (i32, Value, String) {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json", "--cache"])
        .arg(cache)
        .args(args)
        .arg(pipeline)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The action traces beside the output: per file, its lines.
pub(crate) fn traces(output: &Path) -> BTreeMap<String, Vec<Value>> {
    let dir = output.parent().unwrap().join(format!(
        ".{}.r2e/shards",
        output.file_name().unwrap().to_string_lossy()
    ));
    std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".trace.jsonl"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        common::jsonl(&e.path()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The expensive actions (environments, harnesses, validations, mutation and candidate checks,
/// model requests), by bucket's name.
pub(crate) fn expensive(bucket: &str) -> bool {
    [
        "envs-",
        "projects-",
        "generate-",
        "validate-",
        "check-",
        "llm-v",
    ]
    .iter()
    .any(|b| bucket.trim_start_matches("actions/").starts_with(b))
}

/// The host of the first shard seen asking the model (from the traces beside `output`), once
/// one does: a shard in the middle of its work.
pub(crate) fn host_asking_the_model(output: &Path) -> String {
    let mut victim = None;
    common::cluster::wait_for(Duration::from_secs(600), "a shard asking the model", || {
        victim = traces(output).into_iter().find_map(|(file, lines)| {
            let asking = lines.iter().any(|l| {
                l["event"] == "started" && l["bucket"].as_str().unwrap().contains("llm-v")
            });
            (file.starts_with("shard-") && asking)
                .then(|| file.split('.').nth(1).unwrap().to_owned())
        });
        victim.is_some()
    });
    victim.unwrap()
}

/// After `victim` died mid-shard and the build ended: checks that every expensive action run
/// twice is one the dead host started and never stored, and that the assemble ran none. The
/// expensive actions run, and how many of them twice.
pub(crate) fn only_unstored_work_ran_again(output: &Path, victim: &str) -> (usize, usize) {
    let t = traces(output);
    let unstored = unstored_by(&t, victim);
    let runs = started(&t, &|_| true);
    let twice: Vec<&String> = runs
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(
        twice.iter().all(|k| unstored.contains(*k)),
        "run twice but not left unstored by the dead host: {twice:?} (unstored: {unstored:?})"
    );
    assert!(started(&t, &|f| f.starts_with("build.")).is_empty());
    (runs.len(), twice.len())
}

/// How many times each expensive action key was started, over `files` of the traces.
pub(crate) fn started(
    traces: &BTreeMap<String, Vec<Value>>,
    files: &dyn Fn(&str) -> bool,
) -> BTreeMap<String, usize> {
    let mut count = BTreeMap::new();
    for (file, lines) in traces {
        if !files(file) {
            continue;
        }
        for l in lines {
            let bucket = l["bucket"].as_str().unwrap();
            if l["event"] == "started" && expensive(bucket) {
                *count
                    .entry(format!("{bucket}/{}", l["key"].as_str().unwrap()))
                    .or_default() += 1;
            }
        }
    }
    count
}

/// What the shards on `host` started and did not store (nor adopt): `bucket/key`, from the
/// traces.
pub(crate) fn unstored_by(
    traces: &BTreeMap<String, Vec<Value>>,
    host: &str,
) -> std::collections::BTreeSet<String> {
    let mut unstored = std::collections::BTreeSet::new();
    for (file, lines) in traces {
        if file.split('.').nth(1) != Some(host) || !file.starts_with("shard-") {
            continue;
        }
        let key = |l: &Value| {
            format!(
                "{}/{}",
                l["bucket"].as_str().unwrap(),
                l["key"].as_str().unwrap()
            )
        };
        let done: std::collections::BTreeSet<String> = lines
            .iter()
            .filter(|l| ["stored", "adopted"].contains(&l["event"].as_str().unwrap()))
            .map(key)
            .collect();
        for l in lines {
            if l["event"] == "started" && !done.contains(&key(l)) {
                unstored.insert(key(l));
            }
        }
    }
    unstored
}

pub(crate) fn version(output: &Path) -> String {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(output.join("manifest.json")).unwrap()).unwrap();
    manifest["version"].as_str().unwrap().to_owned()
}

/// moto's S3 server on the first host (`h1`), reached over the bridge, with the bucket
/// `r2e-cluster`: its pid, its address and the environment of r2e's processes.
pub(crate) fn start_s3(c: &Network, w: &Path) -> (u32, String, Vec<(&'static str, String)>) {
    let port = crate::remote::free_port();
    let s3 = format!("{}:{port}", c.addr("h1"));
    let log = std::fs::File::create(w.join("moto.log")).unwrap();
    let moto = c.spawn(
        "moto",
        c.command_in("h1", "python3")
            .args(common::moto_server_args(&c.addr("h1").to_string(), port))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    );
    common::cluster::wait_for(Duration::from_secs(60), "moto's S3 server", || {
        std::net::TcpStream::connect(&s3).is_ok()
    });
    common::moto_create_bucket(&s3, "r2e-cluster");
    let env = s3_env(&format!("http://{s3}"));
    (moto, s3, env)
}

/// Submits the two shards and the assemble with `r2e cluster slurm --submit`, each job with a
/// local cache of its own under `w`: the two job ids.
fn submit(c: &Cluster, w: &Path, pipeline: &Path, env: &[(&'static str, String)]) -> Vec<String> {
    let template = format!(
        "{}/cache-$SLURMD_NODENAME-${{SLURM_ARRAY_TASK_ID:-assemble}}",
        w.display()
    );
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["cluster", "slurm"])
        .arg(pipeline)
        .args(["--shards", "2", "--submit", "--local-cache", &template])
        .env("SLURM_CONF", &c.conf)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.to_owned())
        .collect()
}

/// The cluster's daemon logs and the jobs' logs, for a failure's message.
fn job_logs(c: &Cluster, project: &Path) -> String {
    let mut text = c.logs();
    for e in std::fs::read_dir(project.join("slurm/logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        text.push_str(&format!(
            "\n--- {}\n{}",
            e.path().display(),
            std::fs::read_to_string(e.path()).unwrap_or_default()
        ));
    }
    text
}

/// One host dies while its shard waits on a slow model: Slurm requeues the shard on the other
/// host, the result is still the one-machine version, and what ran twice is only what the dead
/// host had started and not stored.
#[test]
fn a_shard_whose_host_dies_is_requeued_and_only_its_unstored_work_runs_again() {
    if !crate::remote::have_moto() {
        return;
    }
    let Some(c) = Cluster::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let gateway = c.gateway().to_string();
    let (model_url, _, _) = common::server::serve_on(&gateway, Duration::from_millis(700), refine);
    let (_moto, _s3, env) = start_s3(&c, w);
    // One machine, no remote store: the version V.
    let (repos, summary) = one_machine(w);
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    let shared = pipeline(
        &w.join("shared"),
        &repos,
        &model_url,
        Some("s3://r2e-cluster/requeue"),
    );
    let ids = submit(&c, w, &shared, &env);
    let output = w.join("shared/out");
    // Kill the first host seen asking the model, while it waits for answers.
    let victim = host_asking_the_model(&output);
    c.kill_host(&victim);
    let states = c.wait_done(&[&ids[0], &ids[1]], Duration::from_secs(900));
    assert!(
        states.iter().all(|s| s == "COMPLETED"),
        "{states:?}\n{}",
        job_logs(&c, &w.join("shared"))
    );
    assert_eq!(version(&output), v, "{}", job_logs(&c, &w.join("shared")));
    requeued(&c, &ids[0], &output, &victim);
    let (runs, twice) = only_unstored_work_ran_again(&output, &victim);
    eprintln!("killed {victim}: {runs} expensive actions, {twice} run twice");
    c.spawn_daemon(&victim);
}

/// Asserts that the shard `victim` was running when it died was requeued: Slurm restarted its
/// array task once (`Restarts=1`, from `scontrol`) and it ended on the other node, where r2e's
/// trace shows the shard ran again after its start on `victim`; no other task restarted.
fn requeued(c: &Cluster, array: &str, output: &Path, victim: &str) {
    let other = if victim == "h2" { "h3" } else { "h2" };
    let names: Vec<String> = traces(output).into_keys().collect();
    let ran_on =
        |task: u32, host: &str| names.contains(&format!("shard-{task}-of-2.{host}.trace.jsonl"));
    let tasks = c.show_job(array);
    assert_eq!(tasks.lines().count(), 2, "{tasks}");
    let mut restarted = Vec::new();
    for line in tasks.lines() {
        let field = |name: &str| -> String {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .unwrap_or_else(|| panic!("no {name} in {line}"))
                .to_owned()
        };
        let task: u32 = field("ArrayTaskId").parse().unwrap();
        match field("Restarts").as_str() {
            "0" => {}
            "1" => {
                assert_eq!(field("NodeList"), other, "{line}");
                assert!(
                    ran_on(task, victim) && ran_on(task, other),
                    "shard {task} ran on {victim}, then on {other}: {names:?}"
                );
                restarted.push(task);
            }
            n => panic!("task {task} restarted {n} times: {line}"),
        }
    }
    assert_eq!(
        restarted.len(),
        1,
        "the shard of the dead host {victim} was requeued once: {tasks}"
    );
}

#[test]
fn a_sharded_build_on_slurm_with_an_s3_store_is_the_one_machine_build() {
    if !crate::remote::have_moto() {
        return;
    }
    let Some(c) = Cluster::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let gateway = c.gateway().to_string();
    let (model_url, _, _) = common::server::serve_on(&gateway, Duration::ZERO, refine);
    let (moto, s3, env) = start_s3(&c, w);

    // One machine, no remote store: the version V.
    let (repos, summary) = one_machine(w);
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    assert!(
        summary["counts"]["instances"].as_u64().unwrap() >= 6,
        "{summary}"
    );

    // Two shards on the cluster, then the assemble job, each with a cache of its own.
    let shared = pipeline(
        &w.join("shared"),
        &repos,
        &model_url,
        Some("s3://r2e-cluster/team"),
    );
    let ids = submit(&c, w, &shared, &env);
    let states = c.wait_done(&[&ids[0], &ids[1]], Duration::from_secs(900));
    let logs = || job_logs(&c, &w.join("shared"));
    assert!(
        states.iter().all(|s| s == "COMPLETED"),
        "{states:?}\n{}",
        logs()
    );
    let output = w.join("shared/out");
    assert_eq!(
        version(&output),
        v,
        "the assemble gives the one-machine version\n{}",
        logs()
    );
    let t = traces(&output);
    let shard_files: Vec<&String> = t.keys().filter(|f| f.starts_with("shard-")).collect();
    assert!(shard_files.len() >= 2, "{:?}", t.keys());
    let runs = started(&t, &|_| true);
    assert!(!runs.is_empty());
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "run on two hosts: {twice:?}\n{}", logs());
    for bucket in ["envs-", "generate-", "validate-", "check-", "llm-"] {
        assert!(
            runs.keys().any(|k| k.contains(bucket)),
            "no {bucket} action ran: {runs:?}"
        );
    }
    let mut per_bucket: BTreeMap<String, usize> = BTreeMap::new();
    for k in runs.keys() {
        *per_bucket
            .entry(k.rsplit_once('/').unwrap().0.to_owned())
            .or_default() += 1;
    }
    eprintln!(
        "version {v}, {} instances; expensive actions, each run once: {per_bucket:?}",
        summary["counts"]["instances"]
    );
    let assembled = started(&t, &|f| f.starts_with("build."));
    assert!(assembled.is_empty(), "the assemble ran {assembled:?}");
    assert!(t.keys().any(|f| f.starts_with("build.")), "{:?}", t.keys());

    // Damage: one remote validation flipped, one valid harness copied under another key.
    let store = {
        let opts = r2e_store::Options {
            connect_timeout: Duration::from_secs(2),
            settings: env[2..]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            ..r2e_store::Options::default()
        };
        r2e_store::open_with(&r2e_store::parse("s3://r2e-cluster/team").unwrap(), &opts).unwrap()
    };
    let key_of = |bucket: &str| -> Vec<r2e_core::hash::Hash> {
        runs.keys()
            .filter(|k| k.contains(bucket))
            .map(|k| r2e_core::hash::Hash::from_hex(k.rsplit('/').next().unwrap()).unwrap())
            .collect()
    };
    use r2e_core::cache::Bucket;
    let validations = key_of("validate-");
    let harnesses = key_of("generate-");
    let flipped = validations[0];
    let mut bytes = store.get(Bucket::Validate, flipped).unwrap().unwrap().bytes;
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    store.put(Bucket::Validate, flipped, &[&bytes]).unwrap();
    let (from, to) = (harnesses[0], harnesses[1]);
    let theirs = store.get(Bucket::Generate, from).unwrap().unwrap().bytes;
    store.put(Bucket::Generate, to, &[&theirs]).unwrap();
    let (code, summary, stderr) = build(&shared, &w.join("cache-damaged"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["dataset_version"].as_str(), Some(v.as_str()));
    for key in [flipped, to] {
        assert!(
            stderr.contains(&key.to_hex()) && stderr.contains("damaged"),
            "{key:?} named: {stderr}"
        );
    }
    let t2 = traces(&output);
    let again = started(&t2, &|f| f.starts_with("build."));
    let expected: BTreeMap<String, usize> = [
        (format!("actions/validate-v10/{}", flipped.to_hex()), 1),
        (format!("actions/generate-v5/{}", to.to_hex()), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(again, expected, "only the damaged actions ran again");
    // Repaired: a third host reads both, and runs nothing.
    let (code, summary, stderr) = build(&shared, &w.join("cache-third"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["dataset_version"].as_str(), Some(v.as_str()));
    assert!(!stderr.contains("damaged"), "{stderr}");
    assert_eq!(
        started(&traces(&output), &|f| f.starts_with("build.")),
        expected
    );

    // The store stops: a plain build finishes from its local work and says so once; a shard
    // exits 1.
    let _ = std::process::Command::new("kill")
        .args(["-9", &moto.to_string()])
        .status();
    common::cluster::wait_for(Duration::from_secs(30), "moto's end", || {
        std::net::TcpStream::connect(&s3).is_err()
    });
    let (code, summary, stderr) = build(&shared, &w.join("cache-third"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["dataset_version"].as_str(), Some(v.as_str()));
    assert_eq!(
        stderr
            .matches("remote cache `s3://r2e-cluster/team` failed")
            .count(),
        1,
        "{stderr}"
    );
    let (code, _, stderr) = build(&shared, &w.join("cache-third"), &env, &["--shard", "0/2"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("could not store"), "{stderr}");

    // No credential on the disk: outputs, caches, logs, scripts.
    assert_eq!(common::found_under(w, SECRET.as_bytes()), None);
}

#[test]
fn a_sharded_build_with_a_webdav_store_is_the_one_machine_build() {
    let Some(nginx) = crate::remote::nginx_program() else {
        return;
    };
    let server = crate::remote::nginx(&nginx);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (model_url, _, _) = common::server::serve(Duration::ZERO, refine);
    let env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
    // One machine, no remote store: the version V.
    let (repos, summary) = one_machine(w);
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    let url = format!("http://127.0.0.1:{}/r2e/cache", server.port);
    let shared = pipeline(&w.join("shared"), &repos, &model_url, Some(&url));
    // Two hosts' shards at once, then the assemble on a third cache.
    let shards: Vec<_> = (0..2)
        .map(|i| {
            let (shared, cache, env) = (shared.clone(), w.join(format!("cache-{i}")), env.clone());
            std::thread::spawn(move || {
                build(&shared, &cache, &env, &["--shard", &format!("{i}/2")])
            })
        })
        .collect();
    for s in shards {
        let (code, _, stderr) = s.join().unwrap();
        assert_eq!(code, 0, "{stderr}");
    }
    let (code, summary, stderr) = build(&shared, &w.join("cache-assemble"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["dataset_version"].as_str(), Some(v.as_str()));
    let t = traces(&w.join("shared/out"));
    let twice: Vec<_> = started(&t, &|_| true)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "run twice: {twice:?}");
    assert!(started(&t, &|f| f.starts_with("build.")).is_empty());
}

#[test]
fn bad_cluster_input_is_exit_2_with_its_place() {
    let p = common::Project::new("//- m.py\ndef f(x):\n    return x + 1\n", "");
    let file = p.pipeline();
    let text = std::fs::read_to_string(&file).unwrap();
    let bad = format!("{text}\n[cache]\nremote = \"ftp://host/x\"\n");
    std::fs::write(&file, &bad).unwrap();
    let line = bad.lines().position(|l| l.starts_with("remote =")).unwrap() + 1;
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build"])
        .arg(&file)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:{line}:10:", file.display())) && stderr.contains("s3://"),
        "{stderr}"
    );
    std::fs::write(&file, &text).unwrap();
    for (args, says) in [
        (&["--shard", "3/2"][..], "does not exist"),
        (&["--shard", "x"][..], "not a shard"),
        (&["--remote-cache", "ftp://h/x"][..], "not a remote cache"),
        (&["--shard", "0/2"][..], "needs a remote cache"),
    ] {
        let out = assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .arg("build")
            .arg(&file)
            .args(args)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// `r2e status --plan N --json` of `pipeline`: exit code, the plan, stderr.
fn shard_plan(pipeline: &Path, env: &[(&'static str, String)], n: u32) -> Value {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["status", "--json", "--plan", &n.to_string(), "-p"])
        .arg(pipeline)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}"))
}

/// The repositories a plan gives each shard.
fn planned(plan: &Value, n: usize) -> Vec<Vec<String>> {
    let mut shards = vec![Vec::new(); n];
    for r in plan["repos"].as_array().unwrap() {
        shards[r["shard"].as_u64().unwrap() as usize].push(r["repo"].as_str().unwrap().to_owned());
    }
    for s in &mut shards {
        s.sort();
    }
    shards
}

/// Shards that follow a cost plan (`r2e status --plan 2`, `r2e build --shard I/2 --plan FILE`)
/// build exactly the repositories it gives them, balanced (six repositories of the same size:
/// three each, where their names' hashes need not split them evenly), and the assemble gives
/// the one-machine build's version with nothing run twice. A second plan stands on the timings
/// the shards measured. A plan of another shard count, one that lacks a repository, one that
/// is not JSON, or `--plan` without a shard: exit 2, the file named.
#[test]
fn shards_that_follow_a_cost_plan_build_what_it_gives_them_and_the_one_machine_build() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (model_url, _, _) = common::server::serve(Duration::ZERO, refine);
    let env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
    let (repos, summary) = one_machine(w);
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    let store = w.join("store");
    std::fs::create_dir_all(&store).unwrap();
    let shared = pipeline(
        &w.join("shared"),
        &repos,
        &model_url,
        Some(&format!("file://{}", store.display())),
    );
    let plan = shard_plan(&shared, &env, 2);
    assert_eq!(plan["shards"], 2, "{plan:#}");
    let given = planned(&plan, 2);
    assert_eq!((given[0].len(), given[1].len()), (3, 3), "{plan:#}");
    // Nothing measured yet: each estimate stands on the repository's candidates, as many as
    // the one-machine build had.
    for r in plan["repos"].as_array().unwrap() {
        let built = summary["repos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["repo"] == r["repo"])
            .unwrap();
        assert_eq!(r["basis"], "candidates", "{plan:#}");
        assert_eq!(r["candidates"], built["candidates"], "{plan:#}\n{built:#}");
    }
    let file = w.join("plan.json");
    std::fs::write(&file, plan.to_string()).unwrap();
    let plan_arg = file.to_string_lossy().into_owned();
    for (i, given) in given.iter().enumerate() {
        let (code, _, stderr) = build(
            &shared,
            &w.join(format!("cache-{i}")),
            &env,
            &["--shard", &format!("{i}/2"), "--plan", &plan_arg],
        );
        assert_eq!(code, 0, "{stderr}");
        let summary: Value = serde_json::from_slice(
            &std::fs::read(w.join(format!("shared/.out.r2e/shards/shard-{i}-of-2.json"))).unwrap(),
        )
        .unwrap();
        let mut built: Vec<String> = summary["repos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect();
        built.sort();
        assert_eq!(&built, given, "{summary:#}");
    }
    let (code, summary, stderr) = build(&shared, &w.join("cache-assemble"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(summary["dataset_version"].as_str(), Some(v.as_str()));
    let twice: Vec<_> = started(&traces(&w.join("shared/out")), &|_| true)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "run twice: {twice:?}");
    // The shards measured their repositories: the next plan stands on that.
    let again = shard_plan(&shared, &env, 2);
    assert!(
        again["repos"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["basis"] == "timings" && r["seconds"].as_f64().unwrap() > 0.0),
        "{again:#}"
    );

    // Bad plans: exit 2, the file named.
    let three = w.join("three.json");
    std::fs::write(&three, shard_plan(&shared, &env, 3).to_string()).unwrap();
    let mut lacking = plan.clone();
    lacking["repos"].as_array_mut().unwrap().pop();
    let short = w.join("short.json");
    std::fs::write(&short, lacking.to_string()).unwrap();
    let broken = w.join("broken.json");
    std::fs::write(
        &broken,
        "{\n  \"format\": \"r2e-shard-plan/1\",\n  oops\n}\n",
    )
    .unwrap();
    for (file, args, says) in [
        (
            &three,
            &["--shard", "0/2"][..],
            "for 3 shards, not 2".to_owned(),
        ),
        (
            &short,
            &["--shard", "0/2"][..],
            "the plan has no repo".to_owned(),
        ),
        (
            &broken,
            &["--shard", "0/2"][..],
            format!("{}:3:", broken.display()),
        ),
        (&file, &[][..], "give `--shard I/N`".to_owned()),
    ] {
        let mut all = args.to_vec();
        let plan_file = file.to_string_lossy().into_owned();
        all.extend(["--plan", plan_file.as_str()]);
        let (code, _, stderr) = build(&shared, &w.join("cache-bad"), &env, &all);
        assert_eq!(code, 2, "{all:?}: {stderr}");
        assert!(stderr.contains(&says), "{all:?}: {stderr}");
    }
}
