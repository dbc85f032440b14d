//! Hostile code, as a new user's repository might hold it: each is stopped or contained, its
//! outcome says how, and nothing outside the job's scratch folder changes.

mod common;

use std::path::Path;

use r2e::sandbox::local::LocalSandbox;
use r2e::sandbox::{Exit, Job, Limits, Sandbox};

fn python_job(scratch: &Path, code: &str, limits: Limits) -> Job {
    Job {
        program: "/usr/bin/env".into(),
        args: vec!["python3".into(), "-c".into(), code.into()],
        env: vec![],
        scratch: scratch.to_path_buf(),
        writable: vec![],
        network: false,
        limits,
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
    let sb = LocalSandbox::new();
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
    let out = LocalSandbox::new()
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
    let out = LocalSandbox::new()
        .run(&python_job(dir.path(), code, limits))
        .unwrap();
    assert_eq!(out.exit, Exit::Timeout);
}

#[test]
fn unbounded_allocation_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = LocalSandbox::new()
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
    let out = LocalSandbox::new()
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
    let sb = LocalSandbox::new();
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
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Read-only file system"),
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
    let sb = LocalSandbox::new();
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
