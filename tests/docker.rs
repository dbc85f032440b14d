//! The Docker backend's parts against the machine's Docker daemon: `r2e image base` makes the
//! base image (the configured interpreter and the pinned coverage.py) once, and jobs run in its
//! containers with no network, a read-only root, the unprivileged user, nothing of this machine
//! but their own folders, and their limits.

mod common;
use std::path::PathBuf;

use assert_cmd::Command;
use r2e::sandbox::docker::DockerSandbox;
use r2e::sandbox::{Exit, Job, Limits, Sandbox};

/// `r2e image base` for a pipeline in `dir`, offline (coverage.py from the wheelhouse): the tag
/// and what it said.
fn image_base(dir: &std::path::Path) -> (String, String) {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["image", "base"])
        .current_dir(dir)
        .envs(common::offline_env())
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .clone();
    (
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The interpreter `python3` is: the one the image holds, at its own path.
fn python() -> (PathBuf, String) {
    let out = std::process::Command::new("python3")
        .args([
            "-I",
            "-c",
            "import sys; print(sys.executable); print(sys.version.split()[0])",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    (
        PathBuf::from(lines.next().unwrap()),
        lines.next().unwrap().to_owned(),
    )
}

#[test]
fn the_base_image_is_built_once_and_its_containers_hold_jobs_in() {
    let Some(daemon) = common::docker() else {
        return;
    };
    let p = common::Project::new("//- m.py\nX = 1\n", "");
    let (tag, said) = image_base(p.path());
    assert!(tag.starts_with("r2e-base:"), "{tag}");
    assert!(
        said.contains("base image built") || said.contains("present"),
        "{said}"
    );
    // The same interpreter and coverage: the same tag, nothing built.
    let (again, said) = image_base(p.path());
    assert_eq!(again, tag);
    assert!(said.contains("base image present"), "{said}");

    let sandbox = DockerSandbox::new(daemon, tag);
    let scratch = tempfile::tempdir().unwrap();
    let (python, version) = python();
    let job = |code: &str, limits: Limits| Job {
        program: python.clone(),
        args: vec!["-I".into(), "-c".into(), code.into()],
        env: vec![("GIVEN".into(), "yes".into())],
        scratch: scratch.path().to_path_buf(),
        writable: vec![],
        readonly: vec![],
        hidden: vec![],
        network: false,
        limits,
    };
    let small = Limits {
        wall_seconds: 60,
        ..Limits::default()
    };

    // The same Python (its version) and the pinned coverage, as the unprivileged user; the
    // job's variables and none of this machine's.
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("R2E_HOST_SECRET", "leaked") };
    let out = sandbox
        .run(&job(
            "import coverage, os, sys; print(coverage.__version__, os.getuid(), sys.version.split()[0], os.environ.get('GIVEN'), os.environ.get('R2E_HOST_SECRET'))",
            small.clone(),
        ))
        .unwrap();
    let pinned = r2e::stages::env::COVERAGE.split("==").nth(1).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{pinned} 65534 {version} yes None"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // No network: only the loopback interface, and nothing reachable.
    let out = sandbox
        .run(&job(
            "import socket\nprint([n for _, n in socket.if_nameindex()])\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3); print('reached')\nexcept OSError as e:\n    print('unreachable')",
            small.clone(),
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "['lo']\nunreachable",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A read-only root, a writable scratch (the host sees what it wrote), and nothing of this
    // machine's folders: not the test's own, not the home folder's files.
    let here = std::env::current_dir().unwrap();
    let out = sandbox
        .run(&job(
            &format!(
                "import os\ntry:\n    open('/etc/x', 'w'); print('root writable')\nexcept OSError:\n    print('root read-only')\nopen('out.txt', 'w').write('from the job')\nprint(os.path.exists({here:?}), sorted(os.listdir('/root')) if os.path.isdir('/root') else [])",
                here = here.to_string_lossy()
            ),
            small.clone(),
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "root read-only\nFalse [{}]",
            root_entries(&python).join(", ")
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("out.txt")).unwrap(),
        "from the job"
    );

    // Limits: memory beyond the job's is the kernel's kill, classed `memory`; the wall clock
    // ends a job that sleeps.
    let out = sandbox
        .run(&job(
            "x = bytearray(600 << 20)\nx[::4096] = b'x' * len(x[::4096])\nprint('survived')",
            Limits {
                memory_mib: 128,
                ..small.clone()
            },
        ))
        .unwrap();
    assert_eq!(out.limit_hit, Some("memory"), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("survived"));
    let out = sandbox
        .run(&job(
            "import time; time.sleep(60)",
            Limits {
                wall_seconds: 2,
                ..small.clone()
            },
        ))
        .unwrap();
    assert_eq!(out.exit, Exit::Timeout, "{out:?}");
}

/// What `/root` holds in the image, as Python prints the names: the first folder of the
/// interpreter's path under it, or nothing when the interpreter is elsewhere.
fn root_entries(python: &std::path::Path) -> Vec<String> {
    let real = std::fs::canonicalize(python).unwrap();
    match real.strip_prefix("/root") {
        Ok(rest) => vec![
            rest.components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .into_owned(),
        ]
        .into_iter()
        .map(|n| format!("'{n}'"))
        .collect(),
        Err(_) => vec![],
    }
}

#[test]
fn a_build_without_a_daemon_says_so_stores_nothing_of_it_and_keeps_what_it_did() {
    // No daemon is needed: the socket named does not exist.
    let p = common::Project::new(
        "//- m.py\ndef twice(x):\n    \"\"\"Twice x.\"\"\"\n    y = x * 2\n    return y\n",
        "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\n",
    );
    let socket = p.path().join("no-daemon.sock");
    let run = || {
        Command::cargo_bin("r2e")
            .unwrap()
            .args(["build", "--json"])
            .current_dir(p.path())
            .envs(common::offline_env())
            .env("DOCKER_HOST", format!("unix://{}", socket.display()))
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    };
    let first = run();
    let said = String::from_utf8_lossy(&first.stderr);
    // An environmental failure: exit 1, the daemon named, and the outputs of what could run.
    assert_eq!(first.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot reach the Docker daemon"), "{said}");
    assert!(said.contains("next build tries again"), "{said}");
    let functions = common::jsonl(&p.path().join("out/functions.jsonl"));
    assert_eq!(functions.len(), 1, "the analysis's outputs are written");
    assert!(common::jsonl(&p.path().join("out/dataset.jsonl")).is_empty());
    // Nothing of the failure was stored: no environment, no harness; the build's failure
    // report names it.
    let cache = p.path().join("cache");
    for bucket in ["envs-v3", "actions/generate-v2", "actions/validate-v8"] {
        let stored = std::fs::read_dir(cache.join(bucket))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(
            stored, 0,
            "{bucket} holds an entry of a build without a daemon"
        );
    }
    let failures = common::jsonl(&p.path().join("out/failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["stage"], "env");
    assert!(
        failures[0]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot reach the Docker daemon"),
        "{failures:?}"
    );
    // What it did is kept: the next build would parse, extract and slice nothing again, and
    // would build the environment (nothing of it was stored).
    let status = common::stdout_json(
        Command::cargo_bin("r2e")
            .unwrap()
            .args(["status", "--json"])
            .current_dir(p.path()),
    );
    assert_eq!(status["parse"]["would_run"], 0, "{status}");
    for stage in ["extract", "slice", "context"] {
        assert_eq!(status["analysis"][stage], 0, "{stage}: {status}");
    }
    assert_eq!(status["env"][0]["would_build"], true, "{status}");
    let second = run();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("cannot reach the Docker daemon"));
}
