//! Hostile code, as a new user's repository might hold it: each is stopped or contained, its
//! outcome says how, and nothing outside the job's scratch folder changes.

use crate::common;

use std::path::Path;

use r2e_exec::sandbox::local::LocalSandbox;
use r2e_exec::sandbox::{Exit, Job, Limits, Sandbox};

fn python_job(scratch: &Path, code: &str, limits: Limits) -> Job {
    Job {
        program: "/usr/bin/env".into(),
        args: vec!["python3".into(), "-c".into(), code.into()],
        env: vec![],
        scratch: scratch.to_path_buf(),
        writable: vec![],
        readonly: vec![],
        hidden: vec![],
        network: false,
        limits,
        image: None,
    }
}

fn quick() -> Limits {
    Limits {
        cpu_seconds: 5,
        memory_mib: 256,
        processes: 32,
        file_size_mib: 8,
        wall_seconds: 10,
    }
}

#[test]
fn exit_codes_and_output_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let sb = LocalSandbox::new(false);
    let out = sb
        .run(&python_job(
            dir.path(),
            "import os, sys; print('hi'); sys.stdout.flush(); os._exit(3)",
            quick(),
        ))
        .unwrap();
    assert_eq!(
        out.exit,
        Exit::Code(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    let out = sb
        .run(&python_job(
            dir.path(),
            "import os, time; print(os.environ['PYTHONHASHSEED'], os.environ['TZ'])",
            quick(),
        ))
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0 UTC\n");
}

#[test]
fn an_endless_loop_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        wall_seconds: 2,
        ..quick()
    };
    let out = LocalSandbox::new(false)
        .run(&python_job(dir.path(), "while True: pass", limits.clone()))
        .unwrap();
    assert!(
        matches!(out.exit, Exit::Timeout | Exit::Signal(_)),
        "{:?}",
        out.exit
    );
    assert!(out.duration.as_secs() < 8);
    // A sleeping child that outlives its parent is killed with the tree.
    let code = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); import time; time.sleep(60)";
    let out = LocalSandbox::new(false)
        .run(&python_job(dir.path(), code, limits))
        .unwrap();
    assert_eq!(out.exit, Exit::Timeout);
}

#[test]
fn unbounded_allocation_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = LocalSandbox::new(false)
        .run(&python_job(
            dir.path(),
            "x = []\nwhile True: x.append(bytearray(10**7))",
            quick(),
        ))
        .unwrap();
    assert!(!out.success(), "{:?}", out.exit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.limit_hit == Some("memory")
            || stderr.contains("MemoryError")
            || matches!(out.exit, Exit::Signal(9)),
        "{:?} {stderr}",
        out.exit
    );
}

#[test]
fn a_fork_bomb_is_contained() {
    let dir = tempfile::tempdir().unwrap();
    let code = "import os, time\nfor _ in range(10000):\n    try:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n    except OSError:\n        print('refused'); break\n";
    let limits = Limits {
        wall_seconds: 5,
        ..quick()
    };
    let out = LocalSandbox::new(false)
        .run(&python_job(dir.path(), code, limits))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("refused") || out.limit_hit == Some("processes"),
        "{:?} {stdout}",
        out.exit
    );
}

#[test]
fn writes_outside_the_scratch_folder_fail() {
    let sb = LocalSandbox::new(false);
    if !common::require(
        sb.isolated(),
        "bubblewrap is not installed",
        "apt-get install bubblewrap",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("owned.txt");
    let code = format!("open({:?}, 'w').write('x')", target.to_string_lossy());
    let out = sb.run(&python_job(dir.path(), &code, quick())).unwrap();
    assert!(!out.success());
    // The folder is not even there: nothing outside the allow-list is shown.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No such file or directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!target.exists());
    // The scratch folder itself is writable.
    let out = sb
        .run(&python_job(
            dir.path(),
            "open('mine.txt', 'w').write('x')",
            quick(),
        ))
        .unwrap();
    assert!(out.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("mine.txt").exists());
}

#[test]
fn the_network_is_unreachable() {
    let sb = LocalSandbox::new(false);
    if !common::require(
        sb.isolated(),
        "bubblewrap is not installed",
        "apt-get install bubblewrap",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A server on this machine's loopback, outside the sandbox.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\ns = socket.socket()\ns.settimeout(2)\ntry:\n    s.connect(('127.0.0.1', {port})); print('connected')\nexcept OSError as e:\n    print('refused', e)"
    );
    let out = sb.run(&python_job(dir.path(), &code, quick())).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("refused"), "{stdout}");
}

/// A job sees its allow-list and nothing else of the machine: `/etc/shadow`, a file in `/root`,
/// one in `/home`, a file of the cache beside the environment it runs in, and a file of the
/// output: every read fails. What it may read, it reads; it runs as an unprivileged user with no
/// capabilities.
#[test]
fn a_job_sees_only_its_allow_list() {
    let sb = LocalSandbox::new(false);
    if !common::require(
        sb.isolated(),
        "bubblewrap is not installed",
        "apt-get install bubblewrap",
    ) {
        return;
    }
    // Markers in `/root` and `/home`, and a job's own user, need root.
    let root = common::require(
        common::is_root(),
        "root (to plant markers in /root and /home)",
        "run the tests as root, as `.ci/run` does",
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let env = cache.join("envs-v9/abc");
    std::fs::create_dir_all(&env).unwrap();
    std::fs::write(env.join("ok.txt"), "env").unwrap();
    let in_cache = common::Marker::new(&cache.join("actions/validate-v10"));
    let in_output = common::Marker::new(&dir.path().join("out"));
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("mod.py"), "x = 1\n").unwrap();
    // What a candidate's job must not see of the original: its module file (an empty regular
    // file in its place, so that the module stays importable) and compiled copies.
    std::fs::write(repo.join("original.py"), "SECRET = 1\n").unwrap();
    std::fs::create_dir_all(repo.join("__pycache__")).unwrap();
    std::fs::write(repo.join("__pycache__/original.pyc"), "compiled").unwrap();
    let mut probes = vec![
        (
            "compiled",
            repo.join("__pycache__/original.pyc")
                .to_string_lossy()
                .into_owned(),
        ),
        ("shadow", "/etc/shadow".to_owned()),
        ("cache", in_cache.path.to_string_lossy().into_owned()),
        ("output", in_output.path.to_string_lossy().into_owned()),
    ];
    let markers = root.then(|| {
        (
            common::Marker::new(Path::new("/root")),
            common::Marker::new(Path::new("/home")),
        )
    });
    if let Some((in_root, in_home)) = &markers {
        probes.push(("root", in_root.path.to_string_lossy().into_owned()));
        probes.push(("home", in_home.path.to_string_lossy().into_owned()));
    }
    let allowed = [
        ("env", env.join("ok.txt").to_string_lossy().into_owned()),
        ("repo", repo.join("mod.py").to_string_lossy().into_owned()),
        (
            "hidden",
            repo.join("original.py").to_string_lossy().into_owned(),
        ),
    ];
    let code = format!(
        "import json, os\nprobes = {}\nout = {{}}\nfor name, path in probes:\n    try:\n        with open(path) as f:\n            out[name] = 'READ ' + f.read()\n    except OSError as e:\n        out[name] = type(e).__name__\nstatus = open('/proc/self/status').read()\nout['uid'] = os.getuid()\nimport stat\nout['hidden_regular'] = stat.S_ISREG(os.stat(probes[-1][1]).st_mode)\nout['caps'] = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]\nprint(json.dumps(out))",
        serde_json::to_string(
            &probes
                .iter()
                .chain(allowed.iter())
                .map(|(n, p)| vec![n.to_string(), p.clone()])
                .collect::<Vec<_>>()
        )
        .unwrap()
    );
    let scratch = cache.join("scratch/job-1");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut job = python_job(&scratch, &code, quick());
    job.readonly = vec![env.clone(), repo.clone()];
    job.hidden = vec![repo.join("original.py"), repo.join("__pycache__")];
    let out = sb.run(&job).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("{stdout} {}", String::from_utf8_lossy(&out.stderr)));
    for (name, _) in &probes {
        let got = seen[*name].as_str().unwrap();
        assert!(
            !got.starts_with("READ"),
            "{name} was readable inside the sandbox: {got}"
        );
    }
    assert_eq!(seen["env"], "READ env");
    assert_eq!(seen["repo"], "READ x = 1\n");
    assert_eq!(seen["hidden"], "READ ", "a hidden file reads empty");
    assert_eq!(seen["hidden_regular"], true, "and is a regular file");
    if root {
        assert_ne!(seen["uid"], 0, "code runs as an unprivileged user");
    }
    assert_eq!(seen["caps"], "0000000000000000", "no capabilities");
}

/// `r2e sandboxed` (what `bench/verdicts/oracle.py` runs the projects' own tests with): the
/// program sees the `--env` variables and r2e's fixed ones, none of the caller's (a secret),
/// nothing of the caller's home, its working folder as `$HOME`; its output and exit code come
/// back as they were, and the wall-clock limit reads as 124.
#[test]
fn sandboxed_runs_a_program_with_none_of_the_callers_environment() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("credentials"), "hunter2").unwrap();
    let script = format!(
        "import os, sys\n\
         print(os.environ.get('ORACLE_SECRET'), os.environ.get('GIVEN'), os.environ['HOME'] == os.getcwd())\n\
         print(os.path.exists({:?}), os.path.exists({:?}))\n\
         sys.exit(3)",
        home.path().join("credentials"),
        home.path(),
    );
    let run = |args: &[&str]| {
        assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .arg("sandboxed")
            .arg("--workdir")
            .arg(work.path())
            .args(args)
            .env("ORACLE_SECRET", "hunter2")
            .env("HOME", home.path())
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let out = run(&["--env", "GIVEN=yes", "--", "python3", "-c", &script]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "None yes True\nFalse False\n");
    let out = run(&["--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(124));
}
