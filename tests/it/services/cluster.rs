//! `r2e cluster slurm`: the scripts it writes, its bad input, and (on a real Slurm cluster of
//! network namespaces, `common::cluster`) that real `sbatch` accepts them and runs one shard per
//! task with each host's own cache, the assembly after every shard. Also the cluster itself: a
//! job array spread over the nodes, a dependent job after it, and a task requeued when its node
//! dies.

use std::time::{Duration, Instant};

use crate::common::{self, cluster::Cluster};

fn r2e() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("r2e").unwrap()
}

fn project() -> common::Project {
    common::Project::new("//- m.py\ndef f(x):\n    return x + 1\n", "")
}

#[test]
fn slurm_writes_the_array_and_the_assembly() {
    let p = project();
    let out = r2e()
        .args(["cluster", "slurm"])
        .arg(p.pipeline())
        .args(["--shards", "4", "--partition", "cpu", "--time", "2:00:00"])
        .args([
            "--mem",
            "8G",
            "--cpus",
            "2",
            "--remote-cache",
            "s3://bucket/it's",
        ])
        .args(["--local-cache", "/scratch/$USER/r2e-$SLURMD_NODENAME"])
        .args(["--r2e", "/opt/r2e dir/r2e"])
        .assert()
        .success()
        .get_output()
        .clone();
    let dir = p.path().join("slurm");
    let shards = std::fs::read_to_string(dir.join("shards.sbatch")).unwrap();
    let assemble = std::fs::read_to_string(dir.join("assemble.sbatch")).unwrap();
    let pipeline = p.pipeline().display().to_string();
    let logs = dir.join("logs");
    assert!(logs.is_dir(), "the jobs' log folder is made");
    for line in [
        "#!/bin/bash",
        "#SBATCH --job-name=r2e-shards",
        "#SBATCH --array=0-3",
        "#SBATCH --requeue",
        &format!("#SBATCH --output={}/%A_%a.out", logs.display()),
        "#SBATCH --partition=cpu",
        "#SBATCH --time=2:00:00",
        "#SBATCH --mem=8G",
        "#SBATCH --cpus-per-task=2",
        &format!(
            "exec '/opt/r2e dir/r2e' build '{pipeline}' --shard \"$SLURM_ARRAY_TASK_ID/4\" \
             --cache \"/scratch/$USER/r2e-$SLURMD_NODENAME\" --remote-cache 's3://bucket/it'\\''s'"
        ),
    ] {
        assert!(
            shards.lines().any(|l| l == line),
            "no `{line}` in:\n{shards}"
        );
    }
    assert!(
        assemble.contains("#SBATCH --job-name=r2e-assemble\n"),
        "{assemble}"
    );
    assert!(!assemble.contains("--array"), "{assemble}");
    assert!(!assemble.contains("--shard"), "{assemble}");
    assert!(
        assemble.lines().any(|l| l
            == format!(
                "exec '/opt/r2e dir/r2e' build '{pipeline}' --cache \
                 \"/scratch/$USER/r2e-$SLURMD_NODENAME\" --remote-cache 's3://bucket/it'\\''s'"
            )),
        "{assemble}"
    );
    // Both are executable, and `bash -n` parses them.
    for script in ["shards.sbatch", "assemble.sbatch"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(script))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{script} is executable");
        let ok = std::process::Command::new("bash")
            .arg("-n")
            .arg(dir.join(script))
            .status()
            .unwrap();
        assert!(ok.success(), "bash -n {script}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&dir.join("shards.sbatch").display().to_string())
            && stdout.contains(&dir.join("assemble.sbatch").display().to_string())
            && stdout.contains("sbatch --parsable")
            && stdout.contains("--dependency=afterok:"),
        "{stdout}"
    );
}

#[test]
fn slurm_defaults_and_docker_warning() {
    let p = common::Project::new(
        "//- m.py\ndef f(x):\n    return x + 1\n",
        "[sandbox]\nbackend = \"docker\"\n",
    );
    let out_dir = p.path().join("elsewhere");
    let out = r2e()
        .current_dir(p.path())
        .args(["cluster", "slurm", "--shards", "1", "--out", "elsewhere"])
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("docker"),
        "a docker sandbox is warned about: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shards = std::fs::read_to_string(out_dir.join("shards.sbatch")).unwrap();
    assert!(shards.contains("#SBATCH --array=0-0\n"), "{shards}");
    assert!(!shards.contains("--partition"), "{shards}");
    assert!(!shards.contains("--remote-cache"), "{shards}");
    // This executable, the pipeline made absolute, the default local cache.
    let exe = assert_cmd::cargo::cargo_bin("r2e");
    let exe = std::fs::canonicalize(exe).unwrap();
    assert!(
        shards.contains(&format!(
            "exec '{}' build '{}' --shard \"$SLURM_ARRAY_TASK_ID/1\" --cache \"${{TMPDIR:-/tmp}}/r2e-cache-$USER\"\n",
            exe.display(),
            p.pipeline().display()
        )),
        "{shards}"
    );
}

#[test]
fn slurm_bad_input_is_exit_2_and_missing_sbatch_exit_1() {
    let p = project();
    let code = |args: &[&str], path: Option<&str>| {
        let mut cmd = r2e();
        cmd.current_dir(p.path())
            .args(["cluster", "slurm"])
            .args(args);
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (c, e) = code(&["--shards", "0"], None);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("--shards"), "{e}");
    let (c, e) = code(&["missing.toml", "--shards", "2"], None);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("missing.toml"), "{e}");
    std::fs::write(p.path().join("bad.toml"), "[project\nname = 1\n").unwrap();
    let (c, e) = code(&["bad.toml", "--shards", "2"], None);
    assert_eq!(c, Some(2), "{e}");
    assert!(e.contains("bad.toml:1:"), "points into the file: {e}");
    let (c, e) = code(&["--shards", "2", "--local-cache", "/a\"b"], None);
    assert_eq!(c, Some(2), "{e}");
    assert!(
        !p.path().join("slurm").exists(),
        "nothing written on bad input"
    );
    let (c, e) = code(&["--shards", "2", "--submit"], Some("/nonexistent"));
    assert_eq!(c, Some(1), "{e}");
    assert!(e.contains("sbatch"), "names sbatch: {e}");
}

/// A two-task array spreads over h2 and h3, each task sees its host's address and reaches a
/// service on h1 over the bridge; a job depending on the array runs after both tasks.
#[test]
fn slurm_cluster_runs_an_array_then_its_dependent_job() {
    let started = Instant::now();
    let Some(c) = Cluster::start() else { return };
    eprintln!("cluster started in {:?}", started.elapsed());
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // A service on h1: an HTTP server of a folder.
    std::fs::create_dir_all(w.join("www")).unwrap();
    std::fs::write(w.join("www/hello"), "from h1").unwrap();
    let port = 8000;
    c.spawn(
        "http",
        c.command_in("h1", "python3")
            .args(["-m", "http.server", "--bind", &c.addr("h1").to_string()])
            .arg(port.to_string())
            .arg("--directory")
            .arg(w.join("www"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let url = format!("http://{}:{port}/hello", c.addr("h1"));
    common::cluster::wait_for(Duration::from_secs(20), "the HTTP server on h1", || {
        c.command_in("h2", "python3")
            .args([
                "-c",
                &format!("import urllib.request as u; u.urlopen('{url}')"),
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    std::fs::write(
        w.join("task.sh"),
        format!(
            "#!/bin/sh\n\
             ip=$(ip -4 -o addr show | awk '$2 != \"lo\" {{ print $4 }}' | cut -d/ -f1)\n\
             got=$(python3 -c \"import urllib.request as u; print(u.urlopen('{url}').read().decode())\")\n\
             sleep 1\n\
             echo \"$SLURM_ARRAY_TASK_ID $SLURMD_NODENAME $ip $(date +%s%N) $got\" > {w}/task-$SLURM_ARRAY_TASK_ID\n",
            w = w.display()
        ),
    )
    .unwrap();
    std::fs::write(
        w.join("after.sh"),
        format!(
            "#!/bin/sh\necho \"$SLURMD_NODENAME $(date +%s%N)\" > {}/after\n",
            w.display()
        ),
    )
    .unwrap();
    let submitted = Instant::now();
    let out = w.join("%A_%a.out").display().to_string();
    let array = c.sbatch(&[
        "--array=0-1",
        "--requeue",
        "-o",
        &out,
        w.join("task.sh").to_str().unwrap(),
    ]);
    let after = c.sbatch(&[
        &format!("--dependency=afterok:{array}"),
        "-o",
        &out,
        w.join("after.sh").to_str().unwrap(),
    ]);
    let states = c.wait_done(&[&array, &after], Duration::from_secs(120));
    eprintln!("array and dependent job done in {:?}", submitted.elapsed());
    assert!(states.iter().all(|s| s == "COMPLETED"), "{states:?}");
    let mut nodes = Vec::new();
    let mut ends = Vec::new();
    for task in ["0", "1"] {
        let line = std::fs::read_to_string(w.join(format!("task-{task}")))
            .unwrap_or_else(|_| panic!("task {task} ran\n{}", c.logs()));
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f[0], task, "{line}");
        assert!(common::cluster::NODES.contains(&f[1]), "{line}");
        assert_eq!(
            f[2],
            c.addr(f[1]).to_string(),
            "the task sees its host's address: {line}"
        );
        assert_eq!(
            f[4..].join(" "),
            "from h1",
            "the task reached h1's service: {line}"
        );
        nodes.push(f[1].to_owned());
        ends.push(f[3].parse::<u128>().unwrap());
    }
    nodes.sort();
    assert_eq!(
        nodes,
        ["h2", "h3"],
        "one task on each node (each has one CPU)"
    );
    let after_line = std::fs::read_to_string(w.join("after")).unwrap();
    let at: u128 = after_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        ends.iter().all(|e| *e < at),
        "the dependent job ran after the array"
    );
}

/// A task whose node dies (its slurmd and the task killed at once) is requeued by the
/// controller once the node stops answering, and finishes on the other node.
#[test]
fn slurm_cluster_requeues_a_task_of_a_dead_node() {
    let Some(c) = Cluster::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::write(
        w.join("long.sh"),
        format!(
            "#!/bin/sh\n\
             echo \"start $SLURMD_NODENAME ${{SLURM_RESTART_COUNT:-0}}\" >> {w}/log\n\
             sleep 4\n\
             echo \"done $SLURMD_NODENAME ${{SLURM_RESTART_COUNT:-0}}\" >> {w}/log\n",
            w = w.display()
        ),
    )
    .unwrap();
    let job = c.sbatch(&[
        "--array=0-0",
        "--requeue",
        "-o",
        "/dev/null",
        w.join("long.sh").to_str().unwrap(),
    ]);
    let log = w.join("log");
    common::cluster::wait_for(Duration::from_secs(60), "the task's start", || log.exists());
    let first = std::fs::read_to_string(&log).unwrap();
    let node = first.split_whitespace().nth(1).unwrap().to_owned();
    let killed = Instant::now();
    c.kill_host(&node);
    let states = c.wait_done(&[&job], Duration::from_secs(120));
    let requeued_in = killed.elapsed();
    eprintln!("the task of the dead node {node} finished elsewhere {requeued_in:?} after the kill");
    assert_eq!(states, ["COMPLETED"], "{}", c.logs());
    let text = std::fs::read_to_string(&log).unwrap();
    let other = if node == "h2" { "h3" } else { "h2" };
    assert!(
        text.lines().any(|l| l == format!("done {other} 1")),
        "the task restarted once on {other} and finished: {text}"
    );
    assert!(!text.contains(&format!("done {node}")), "{text}");
    assert_eq!(c.job_field(&job, "Restarts"), ["1"]);
    // The dead node's slurmd restarted: the node is back (`ReturnToService=2`).
    c.spawn_daemon(&node);
    c.wait_nodes(&[&node], &["idle"], Duration::from_secs(60));
}

/// `r2e cluster slurm --submit` on the real cluster, with `--r2e` a script that records how it
/// was run: one task per shard with `--shard I/2` and its own host's cache, the assembly after
/// both, without `--shard`.
#[test]
fn slurm_submit_runs_shards_then_the_assembly_on_a_real_cluster() {
    let Some(c) = Cluster::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    // Paths with spaces: the scripts quote them, `#SBATCH --output` too.
    let project = w.join("my project");
    common::write_fixture(
        &project.join("repo"),
        "//- m.py\ndef f(x):\n    return x + 1\n",
    );
    std::fs::write(
        project.join("pipeline.toml"),
        "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(w.join("bin dir")).unwrap();
    let fake = w.join("bin dir/r2e");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             sleep 1\n\
             ip=$(ip -4 -o addr show | awk '$2 != \"lo\" {{ print $4 }}' | cut -d/ -f1)\n\
             printf '%s\\n' \"${{SLURM_ARRAY_TASK_ID:--}} $SLURMD_NODENAME $ip $(date +%s%N)\" \"$@\" \
             > {w}/run-$SLURM_JOB_ID\n",
            w = w.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let template = format!("{}/cache-$SLURMD_NODENAME", w.display());
    let out = r2e()
        .args(["cluster", "slurm"])
        .arg(project.join("pipeline.toml"))
        .args(["--shards", "2", "--submit", "--remote-cache", "s3://b/p"])
        .args(["--local-cache", &template])
        .arg("--r2e")
        .arg(&fake)
        .env("SLURM_CONF", &c.conf)
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let ids: Vec<(String, String)> = stdout
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    assert_eq!(ids.len(), 2, "{stdout}");
    assert_eq!(
        (ids[0].0.as_str(), ids[1].0.as_str()),
        ("shards", "assemble")
    );
    let (shards, assemble) = (&ids[0].1, &ids[1].1);
    assert_eq!(
        c.job_field(assemble, "Dependency"),
        [format!("afterok:{shards}_*(unfulfilled)")],
        "the assembly waits for the array"
    );
    let states = c.wait_done(&[shards, assemble], Duration::from_secs(120));
    assert!(
        states.iter().all(|s| s == "COMPLETED"),
        "{states:?}\n{}",
        c.logs()
    );
    let runs: Vec<Vec<String>> = std::fs::read_dir(w)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .collect();
    assert_eq!(runs.len(), 3, "two shards and the assembly ran: {runs:?}");
    let pipeline = project.join("pipeline.toml").display().to_string();
    let mut shard_ends = Vec::new();
    let mut seen = Vec::new();
    let mut assembled_at = None;
    for run in &runs {
        let head: Vec<&str> = run[0].split_whitespace().collect();
        let (task, node, ip, at) = (head[0], head[1], head[2], head[3].parse::<u128>().unwrap());
        assert_eq!(ip, c.addr(node).to_string(), "{run:?}");
        let cache = format!("{}/cache-{node}", w.display());
        if task == "-" {
            assert_eq!(
                run[1..],
                [
                    "build",
                    &pipeline,
                    "--cache",
                    &cache,
                    "--remote-cache",
                    "s3://b/p"
                ],
                "the assembly"
            );
            assembled_at = Some(at);
        } else {
            let shard = format!("{task}/2");
            assert_eq!(
                run[1..],
                [
                    "build",
                    &pipeline,
                    "--shard",
                    &shard,
                    "--cache",
                    &cache,
                    "--remote-cache",
                    "s3://b/p"
                ],
                "shard {task}"
            );
            seen.push((task.to_owned(), node.to_owned()));
            shard_ends.push(at);
        }
    }
    seen.sort();
    assert_eq!(
        seen.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["0", "1"]
    );
    assert_ne!(
        seen[0].1, seen[1].1,
        "the shards ran on both nodes: {seen:?}"
    );
    let assembled_at = assembled_at.expect("the assembly ran");
    assert!(
        shard_ends.iter().all(|e| *e < assembled_at),
        "the assembly ran after the shards"
    );
    // The jobs' logs went where the script said.
    assert!(project.join("slurm/logs").read_dir().unwrap().count() >= 3);
}

/// A cost plan (`r2e status --plan 2 --json`) given to `r2e cluster`: Slurm's shards run
/// `--plan` with its absolute path (the assemble does not), Kubernetes ships it in the
/// pipeline's ConfigMap and its shards read it there; a plan of another shard count is refused
/// at once (exit 2, the file named).
#[test]
fn the_engines_pass_a_cost_plan_to_their_shards() {
    let p = project();
    let plan = r2e()
        .args(["status", "--json", "--plan", "2", "-p"])
        .arg(p.pipeline())
        .envs(common::offline_env())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let file = p.path().join("plan.json");
    std::fs::write(&file, &plan).unwrap();
    r2e()
        .args(["cluster", "slurm"])
        .arg(p.pipeline())
        .args(["--shards", "2", "--remote-cache", "s3://bucket/p", "--plan"])
        .arg(&file)
        .assert()
        .success();
    let dir = p.path().join("slurm");
    let shards = std::fs::read_to_string(dir.join("shards.sbatch")).unwrap();
    let assemble = std::fs::read_to_string(dir.join("assemble.sbatch")).unwrap();
    assert!(
        shards.contains(&format!("--plan '{}'\n", file.display())),
        "{shards}"
    );
    assert!(!assemble.contains("--plan"), "{assemble}");

    let yaml = r2e()
        .args(["cluster", "k8s", "--shards", "2", "--image", "r2e:1"])
        .args(["--remote-cache", "s3://bucket/p", "--plan"])
        .arg(&file)
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let yaml = String::from_utf8(yaml).unwrap();
    assert!(yaml.contains("plan.json:"), "{yaml}");
    assert!(yaml.contains("r2e-shard-plan/1"), "{yaml}");
    assert!(yaml.contains("/r2e/pipeline/plan.json"), "{yaml}");

    for engine in [
        &["cluster", "slurm", "--shards", "3"][..],
        &["cluster", "k8s", "--shards", "3", "--image", "r2e:1"],
    ] {
        let out = r2e()
            .args(engine)
            .args(["--remote-cache", "s3://bucket/p", "--plan"])
            .arg(&file)
            .arg(p.pipeline())
            .assert()
            .code(2)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains("for 2 shards, not 3"),
            "{engine:?}: {stderr}"
        );
    }
}
