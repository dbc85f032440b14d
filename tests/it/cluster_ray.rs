//! `r2e cluster ray` against a real Ray cluster (Ray from the package index): a head on `h1`
//! with no CPUs, so that every job's entry point runs on a worker, and one worker of one CPU on
//! each of `h2` and `h3`, each host in its own network, UTS and mount namespaces
//! (`common::cluster::Network`), with moto's S3 server on `h1` as the remote cache. The
//! workers' `ray start` holds the store's credentials in its environment; the submitting
//! command has none. The build of `cluster_build`'s six repositories in three shards (one
//! queued) gives the one-machine dataset version, each expensive action run once; then, in
//! two shards with fresh caches, a worker host killed while its shard asks the model: the
//! shard is submitted again, runs on the other worker, and the result is still that version.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster_build::{
    SECRET, host_asking_the_model, one_machine, only_unstored_work_ran_again, pipeline, refine,
    start_s3, started, traces, version,
};
use crate::common::{self, cluster::Network};

/// The Ray release `.ci/run` installs.
const RAY_VERSION: &str = "2.60.0";

fn r2e() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("r2e").unwrap()
}

/// Whether `python3` has Ray with its job server (`ray[default]`): a skip, or under
/// `R2E_TEST_STRICT=1` a failure, when it has not.
fn have_ray() -> bool {
    let ok = Command::new("python3")
        .args([
            "-c",
            "import ray, aiohttp, ray.dashboard.modules.job.job_head as _; print(ray.__version__)",
        ])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    common::require(
        ok,
        "Ray with its job server (`ray[default]`) for python3",
        &format!("`python3 -m pip install 'ray[default]=={RAY_VERSION}'`; `.ci/run` does"),
    )
}

/// `GET path` on `addr` over plain HTTP/1.1: the status code and the body (`None` when
/// nothing answers).
fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let code = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_owned()))
}

/// A Ray cluster on the hosts: its dashboard's address (`10.77.X.11:8265`).
struct Ray {
    dashboard: String,
    /// Each host's own Ray folder (and its `ray start` output), bound over `DIRS/ray` in its
    /// mount namespace.
    dirs: PathBuf,
}

impl Ray {
    /// Starts the head on `h1` (no CPUs, the job server on every address) and a worker of one
    /// CPU on each of `h2` and `h3`, whose environment is `env`; returns once the job server
    /// answers (the workers may still be joining: [`Ray::wait_workers`]).
    ///
    /// Every node uses the same `--temp-dir` path, each host's own folder there (a mount
    /// namespace per host): a node reads some files at the head's temp-dir path, as on
    /// machines of their own. The head notices a dead node within seconds (health checks
    /// every second, dead after five missed), not within a minute as by default.
    fn start(net: &Network, dirs: &Path, env: &[(&'static str, String)]) -> Ray {
        let at = dirs.join("ray");
        std::fs::create_dir_all(&at).unwrap();
        let head = net.addr("h1");
        for host in common::cluster::HOSTS {
            let own = dirs.join(host);
            std::fs::create_dir_all(&own).unwrap();
            let role = if host == "h1" {
                "--head --port 6379 --dashboard-host 0.0.0.0 --dashboard-port 8265 --num-cpus 0"
                    .to_owned()
            } else {
                format!(
                    "--address {head}:6379 --num-cpus 1 --resources '{{\"r2e_pipelineer\": 1}}'"
                )
            };
            let script = format!(
                "exec python3 -m ray.scripts.scripts start {role} --node-ip-address {} \
                 --object-store-memory 100000000 --temp-dir '{}' --block",
                net.addr(host),
                at.display()
            );
            let log = std::fs::File::create(dirs.join(format!("{host}.log"))).unwrap();
            let mut cmd = net.host_shell(host, &[(&own, &at)], &script);
            cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .env("RAY_USAGE_STATS_ENABLED", "0")
                .env("RAY_health_check_period_ms", "1000")
                .env("RAY_health_check_timeout_ms", "3000")
                .env("RAY_health_check_failure_threshold", "5")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            net.spawn(&format!("ray-{host}"), &mut cmd);
        }
        let ray = Ray {
            dashboard: format!("{head}:8265"),
            dirs: dirs.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_get(&ray.dashboard, "/api/version").is_none_or(|(c, _)| c != 200) {
            assert!(
                Instant::now() < deadline,
                "Ray's job server does not answer\n{}",
                ray.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        ray
    }

    /// Waits until both workers are alive in the cluster.
    fn wait_workers(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let alive = http_get(&self.dashboard, "/api/v0/nodes")
                .map_or(0, |(_, body)| body.matches("\"state\": \"ALIVE\"").count());
            if alive >= 3 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{alive} of Ray's 3 nodes alive\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every job Ray knows, as its job server lists them.
    fn jobs(&self) -> String {
        http_get(&self.dashboard, "/api/jobs/")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// What each job's supervisor actor (which runs its entry point) reserved, by submission
    /// id, from Ray's state API.
    fn job_supervisors(&self) -> BTreeMap<String, Value> {
        let (_, body) = http_get(&self.dashboard, "/api/v0/actors?detail=true&limit=1000")
            .expect("Ray's state API answers");
        let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        body["data"]["result"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .filter_map(|a| {
                let id = a["name"]
                    .as_str()?
                    .strip_prefix("_ray_internal_job_actor_")?;
                Some((id.to_owned(), a["required_resources"].clone()))
            })
            .collect()
    }

    /// The nodes' `ray start` output, for failure messages.
    fn logs(&self) -> String {
        common::cluster::HOSTS
            .iter()
            .map(|h| {
                let text =
                    std::fs::read_to_string(self.dirs.join(format!("{h}.log"))).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!(
                    "--- ray on {h}\n{}\n",
                    lines[lines.len().saturating_sub(20)..].join("\n")
                )
            })
            .collect()
    }
}

/// `r2e cluster ray PIPELINE --shards N --json ARGS` against `ray`, each host's local cache
/// under `w` named after `tag` and the host, started as a child with its stdout and stderr in
/// files under `w`. No credential in its environment.
fn submit(
    ray: &Ray,
    w: &Path,
    pipeline: &Path,
    shards: u32,
    tag: &str,
    args: &[&str],
) -> (Child, PathBuf) {
    let template = format!("{}/cache-{tag}-$(hostname)", w.display());
    let out = w.join(format!("ray-{tag}.out"));
    let child = Command::new(assert_cmd::cargo::cargo_bin("r2e"))
        .args(["cluster", "ray"])
        .arg(pipeline)
        .args(["--address", &format!("http://{}", ray.dashboard)])
        .args(["--shards", &shards.to_string(), "--json"])
        .args(["--local-cache", &template])
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(w.join(format!("ray-{tag}.err"))).unwrap())
        .spawn()
        .unwrap();
    (child, out)
}

/// Waits for `child` (at most `timeout`); its exit code, its JSON report and its stderr.
fn finish(mut child: Child, out: &Path, timeout: Duration, ray: &Ray) -> (i32, Value, String) {
    let deadline = Instant::now() + timeout;
    let err = out.with_extension("err");
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`r2e cluster ray` still running after {timeout:?}\n{}\n{}",
                std::fs::read_to_string(&err).unwrap_or_default(),
                ray.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let report = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap_or(Value::Null);
    (code, report, std::fs::read_to_string(&err).unwrap())
}

/// The report's jobs by name: `(attempts, status)`.
fn jobs_of(report: &Value) -> BTreeMap<String, (u64, String)> {
    report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap().to_owned(),
                (
                    j["attempts"].as_u64().unwrap(),
                    j["status"].as_str().unwrap_or("-").to_owned(),
                ),
            )
        })
        .collect()
}

#[test]
fn a_sharded_build_on_ray_is_the_one_machine_build_even_when_a_worker_dies() {
    if !crate::remote::have_moto() || !have_ray() {
        return;
    }
    // Made before the hosts, so removed after them (and everything they ran) are gone.
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let ray_dirs = tempfile::Builder::new()
        .prefix("r2e-ray-")
        .tempdir()
        .unwrap();
    let Some(net) = Network::start("a Ray cluster") else {
        return;
    };
    let began = Instant::now();
    let gateway = net.gateway().to_string();
    // A slow model, so that a shard is caught while it asks.
    let (model_url, _, _) = common::server::serve_on(&gateway, Duration::from_millis(700), refine);
    let (_moto, _s3, env) = start_s3(&net, w);
    let ray = Ray::start(&net, ray_dirs.path(), &env);
    // One machine, no remote store: the version V (while Ray's workers join).
    let (repos, summary) = one_machine(w, &model_url, &env);
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    ray.wait_workers();
    eprintln!("one-machine build and Ray up: {:?}", began.elapsed());

    // A shard that fails on every attempt: tried `1 + --retries` times, no assemble, exit 1.
    let failing = pipeline(
        &w.join("shared"),
        &repos,
        &model_url,
        Some("s3://r2e-cluster/ray-failing"),
    );
    let (child, out) = submit(
        &ray,
        w,
        &failing,
        2,
        "failing",
        &["--r2e", "/bin/false", "--retries", "1"],
    );
    let (code, report, stderr) = finish(child, &out, Duration::from_secs(300), &ray);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["succeeded"], false, "{report}");
    let jobs = jobs_of(&report);
    for name in ["shard 0/2", "shard 1/2"] {
        assert_eq!(jobs.get(name), Some(&(2, "FAILED".to_owned())), "{report}");
    }
    assert_eq!(jobs.get("assemble"), Some(&(0, "-".to_owned())), "{report}");
    assert!(stderr.contains("no retries left"), "{stderr}");

    // Three shards on two workers (one waits for a CPU), then the assemble.
    let t0 = Instant::now();
    let shared = pipeline(
        &w.join("shared"),
        &repos,
        &model_url,
        Some("s3://r2e-cluster/ray"),
    );
    // Each job reserves a CPU, some memory and the workers' own resource.
    let (child, out) = submit(
        &ray,
        w,
        &shared,
        3,
        "all",
        &["--memory", "64M", "--resources", "r2e_pipelineer=1"],
    );
    let (code, report, stderr) = finish(child, &out, Duration::from_secs(900), &ray);
    assert_eq!(code, 0, "{stderr}\n{}", ray.logs());
    assert_eq!(report["succeeded"], true, "{report}");
    let jobs = jobs_of(&report);
    for name in ["shard 0/3", "shard 1/3", "shard 2/3", "assemble"] {
        assert_eq!(
            jobs.get(name),
            Some(&(1, "SUCCEEDED".to_owned())),
            "{report}"
        );
    }
    // The shards' logs came through, each line after its shard's name.
    assert!(stderr.contains("[shard 2/3] shard 2/3: "), "{stderr}");
    // Ray took each job as asked: the shard's name, no runtime environment, and (its
    // supervisor actor's) what it reserves.
    let ids: std::collections::BTreeSet<&str> = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|j| j["submission_ids"].as_array().unwrap())
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 4, "{report}");
    let listed: Value = serde_json::from_str(&ray.jobs()).unwrap();
    let ours: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["submission_id"].as_str().is_some_and(|i| ids.contains(i)))
        .collect();
    assert_eq!(ours.len(), 4, "{listed}");
    for job in &ours {
        assert!(job["runtime_env"].is_null(), "{job}");
        let name = job["metadata"]["r2e"].as_str().unwrap();
        assert!(jobs.contains_key(name), "{job}");
    }
    let mut actors = ray.job_supervisors();
    actors.retain(|id, _| ids.contains(id.as_str()));
    assert_eq!(actors.len(), 4, "{actors:?}");
    for reserved in actors.values() {
        assert_eq!(
            reserved,
            &serde_json::json!({"CPU": 1.0, "memory": (64u64 << 20) as f64, "r2e_pipelineer": 1.0}),
            "{actors:?}"
        );
    }
    let output = w.join("shared/out");
    assert_eq!(
        version(&output),
        v,
        "the assemble gives the one-machine version"
    );
    let t = traces(&output);
    let hosts: std::collections::BTreeSet<&str> = t
        .keys()
        .filter(|f| f.starts_with("shard-"))
        .filter_map(|f| f.split('.').nth(1))
        .collect();
    assert_eq!(
        hosts,
        ["h2", "h3"].into_iter().collect(),
        "the shards ran on both workers: {:?}",
        t.keys()
    );
    let runs = started(&t, &|_| true);
    assert!(!runs.is_empty());
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "run twice: {twice:?}");
    for bucket in ["envs-", "generate-", "validate-", "check-", "llm-"] {
        assert!(
            runs.keys().any(|k| k.contains(bucket)),
            "no {bucket} action ran: {runs:?}"
        );
    }
    assert!(started(&t, &|f| f.starts_with("build.")).is_empty());
    eprintln!(
        "3 shards and the assemble on Ray: {:?}, {} expensive actions, each run once",
        t0.elapsed(),
        runs.len()
    );

    // Two shards with fresh caches under a fresh prefix; the host of the first shard seen
    // asking the model dies.
    let t1 = Instant::now();
    crate::cluster_build::write_repos(&w.join("again/repos"));
    let again = pipeline(
        &w.join("again"),
        &repos,
        &model_url,
        Some("s3://r2e-cluster/ray-kill"),
    );
    let (child, out) = submit(&ray, w, &again, 2, "kill", &[]);
    let output = w.join("again/out");
    let victim = host_asking_the_model(&output);
    net.kill_host(&victim);
    let (code, report, stderr) = finish(child, &out, Duration::from_secs(900), &ray);
    assert_eq!(code, 0, "{stderr}\n{}", ray.logs());
    let jobs = jobs_of(&report);
    let retried: Vec<_> = jobs
        .iter()
        .filter(|(name, (attempts, _))| name.starts_with("shard") && *attempts == 2)
        .collect();
    assert_eq!(retried.len(), 1, "one shard submitted again: {report}");
    assert!(
        jobs.values().all(|(_, s)| s == "SUCCEEDED"),
        "{report}\n{stderr}"
    );
    assert!(stderr.contains("submitting it again"), "{stderr}");
    for line in stderr.lines().filter(|l| l.contains("] attempt ")) {
        eprintln!("r2e cluster ray said: {line}");
    }
    assert_eq!(
        version(&output),
        v,
        "still the one-machine version\n{stderr}"
    );
    let (runs, twice) = only_unstored_work_ran_again(&output, &victim);
    eprintln!(
        "killed {victim}: 2 shards and the assemble on Ray in {:?}, {runs} expensive actions, \
         {twice} run twice; whole test {:?}",
        t1.elapsed(),
        began.elapsed()
    );

    // No credential reached Ray's job records, nor a file of the build.
    let listed = ray.jobs();
    assert!(listed.contains("r2e-"), "{listed}");
    assert!(!listed.contains(SECRET), "{listed}");
    assert_eq!(common::found_under(w, SECRET.as_bytes()), None);
}

#[test]
fn ray_bad_input_is_exit_2_and_an_unreachable_head_exit_1() {
    let p = common::Project::new("//- m.py\ndef f(x):\n    return x + 1\n", "");
    let with_remote = common::Project::new(
        "//- m.py\ndef f(x):\n    return x + 1\n",
        "[cache]\nremote = \"s3://bucket/team\"\n",
    );
    let port = crate::remote::free_port();
    let nobody = format!("http://127.0.0.1:{port}");
    let run = |project: &common::Project, args: &[&str]| {
        let out = r2e()
            .args(["cluster", "ray"])
            .arg(project.pipeline())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.stdout,
        )
    };
    for (project, args, says) in [
        (
            &p,
            &["--address", &nobody, "--shards", "0"][..],
            "at least 1",
        ),
        (
            &p,
            &["--address", "ray-head:8265", "--shards", "2"][..],
            "--address",
        ),
        (
            &p,
            &["--address", "ftp://head", "--shards", "2"][..],
            "http://",
        ),
        (
            &p,
            &["--address", &nobody, "--shards", "2"][..],
            "needs a remote cache",
        ),
        (
            &p,
            &[
                "--address",
                &nobody,
                "--shards",
                "2",
                "--remote-cache",
                "s3://key:secret@bucket/x",
            ][..],
            "credentials",
        ),
        (
            &with_remote,
            &["--address", &nobody, "--shards", "2", "--memory", "lots"][..],
            "not a memory size",
        ),
        (
            &with_remote,
            &[
                "--address",
                &nobody,
                "--shards",
                "2",
                "--resources",
                "accel",
            ][..],
            "KEY=VALUE",
        ),
        (
            &with_remote,
            &[
                "--address",
                &nobody,
                "--shards",
                "2",
                "--local-cache",
                "/x/\"y",
            ][..],
            "double quotes",
        ),
    ] {
        let (code, stderr, stdout) = run(project, args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
    }
    // Well-formed, but no job server there: the environment's failure, exit 1.
    let (code, stderr, _) = run(&with_remote, &["--address", &nobody, "--shards", "2"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot reach the Ray job server") && stderr.contains(&nobody),
        "{stderr}"
    );
}
