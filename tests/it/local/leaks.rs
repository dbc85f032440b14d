//! Nothing of the building machine leaks: the probes an attacker's repository would try, each
//! run through the real binary (or the real sandbox), each shown to fail, and the secrets shown
//! to be absent from every output, log and cache file.

use crate::common;

use std::path::Path;

use assert_cmd::Command;
use common::{Marker, found_under};
use serde_json::Value;

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A symlinked `requirements.txt` that leads to a secret outside the repository: refused and
/// recorded, never read, never sent to an installer, never written anywhere.
#[test]
fn a_symlinked_dependency_file_is_refused_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let secret = Marker::new(&dir.path().join("elsewhere"));
    let repo = dir.path().join("repo");
    common::write_fixture(
        &repo,
        "//- pkg/__init__.py\n//- pkg/ops.py\ndef _twice(x):\n    return x * 2\n\n\ndef quad(x):\n    \"\"\"Four times x.\"\"\"\n    y = _twice(x)\n    return _twice(y)\n",
    );
    std::os::unix::fs::symlink(&secret.path, repo.join("requirements.txt")).unwrap();
    std::fs::write(
        repo.join("setup.cfg"),
        "[options]\ninstall_requires =\n    not a requirement!!\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[[repo]]\npath = \"repo\"\n\n[env]\ninstaller = \"pip\"\n",
    )
    .unwrap();
    let summary = common::offline_build(dir.path());
    assert_eq!(summary["counts"]["instances"], 1, "{summary}");
    let out = dir.path().join("out");
    let env = &jsonl(&out.join("envs.jsonl"))[0];
    assert_eq!(env["declared"], serde_json::json!([]), "{env}");
    let failures = std::fs::read_to_string(out.join("failures.jsonl")).unwrap();
    assert!(
        failures.contains("`requirements.txt` is a symlink that leads outside the repository"),
        "{failures}"
    );
    assert!(
        failures.contains("not a PEP 508 requirement, not installed: `not a requirement!!`"),
        "{failures}"
    );
    let needle = secret.secret.as_bytes();
    assert_eq!(
        found_under(&out, needle),
        None,
        "the secret is in the output"
    );
    assert_eq!(
        found_under(&dir.path().join("cache"), needle),
        None,
        "the secret is in the cache"
    );
}

/// A module that reads secret files on import and raises with what it read: inside the sandbox
/// every read fails (`/etc/shadow`, a file in `/root`, one in `/home`), and the failure message
/// says so, with no path of this machine.
#[test]
fn secrets_read_on_import_fail_and_never_reach_the_outputs_or_the_cache() {
    if !common::require(
        common::is_root(),
        "the probe writes marker files into /root and /home",
        "run the tests as root, as CI does",
    ) {
        return;
    }
    let root_marker = Marker::new(Path::new("/root"));
    let home_marker = Marker::new(Path::new("/home"));
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "PATHS = [{:?}, {:?}, {:?}]\n\n\ndef _probe():\n    found = []\n    for p in PATHS:\n        try:\n            with open(p) as f:\n                found.append('READ ' + f.read())\n        except OSError as e:\n            found.append(type(e).__name__)\n    return found\n\n\nraise RuntimeError('probed: ' + ' '.join(_probe()))\n\n\ndef clamp(n):\n    \"\"\"n, at most 3.\"\"\"\n    found = _probe()\n    return min(n, 3) + len(found)\n",
        "/etc/shadow",
        root_marker.path.to_string_lossy(),
        home_marker.path.to_string_lossy(),
    );
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    std::fs::write(dir.path().join("repo/probe.py"), source).unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[[repo]]\npath = \"repo\"\n\n[env]\ninstaller = \"pip\"\n",
    )
    .unwrap();
    common::offline_build(dir.path());
    let out = dir.path().join("out");
    let harness = &jsonl(&out.join("harnesses.jsonl"))[0];
    let message = harness["failure_message"].as_str().unwrap();
    assert!(
        message.contains("probed: FileNotFoundError FileNotFoundError FileNotFoundError"),
        "every read failed inside the sandbox: {message}"
    );
    for secret in [&root_marker.secret, &home_marker.secret] {
        assert_eq!(found_under(&out, secret.as_bytes()), None);
        assert_eq!(
            found_under(&dir.path().join("cache"), secret.as_bytes()),
            None
        );
    }
    let shadow_root = std::fs::read_to_string("/etc/shadow")
        .ok()
        .and_then(|t| t.lines().next().map(str::to_owned));
    if let Some(line) = shadow_root {
        assert_eq!(found_under(&out, line.as_bytes()), None);
    }
    // No path of this machine in a failure message.
    let tmp = dir.path().to_string_lossy().into_owned();
    let harnesses = std::fs::read_to_string(out.join("harnesses.jsonl")).unwrap();
    assert!(!harnesses.contains(&tmp), "{harnesses}");
}

/// A function that returns a secret's contents, and a candidate that tries to: under `check`,
/// the reads fail and nothing secret is printed.
#[test]
fn check_prints_nothing_a_function_could_read_of_the_machine() {
    if !common::require(
        common::is_root(),
        "the probe writes a marker file into /root",
        "run the tests as root, as CI does",
    ) {
        return;
    }
    let marker = Marker::new(Path::new("/root"));
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "NOTE = {:?}\n\n\ndef _greet(n):\n    return 'hello ' * n\n\n\ndef reveal(n):\n    \"\"\"A greeting, or the note for n > 1.\"\"\"\n    if n > 1:\n        with open(NOTE) as f:\n            return f.read()\n    return _greet(n + 1)\n",
        marker.path.to_string_lossy()
    );
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    std::fs::write(dir.path().join("repo/notes.py"), source).unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[[repo]]\npath = \"repo\"\n\n[env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.5\n",
    )
    .unwrap();
    let summary = common::offline_build(dir.path());
    assert_eq!(summary["counts"]["instances"], 1, "{summary}");
    let candidate = dir.path().join("candidate.py");
    std::fs::write(
        &candidate,
        "def reveal(n):\n    with open('/etc/shadow') as f:\n        return f.read()\n",
    )
    .unwrap();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["check", "repo:notes.py:reveal", "--json", "--candidate"])
        .arg(&candidate)
        .current_dir(dir.path())
        .envs(common::offline_env())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FileNotFoundError"), "{stdout}");
    assert!(!stdout.contains(&marker.secret), "{stdout}");
    assert!(!stdout.contains("root:"), "{stdout}");
}
