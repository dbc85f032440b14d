//! Nothing environmental is cached as a verdict, outputs are all-or-nothing, and what a dead
//! build leaves behind is cleaned: a broken environment, a full disk (during an environment build
//! and during the output write), two builds on one output, a killed build, a memory kill. After
//! each, the next build gives the same data as a clean build from an empty cache.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use common::{Tmpfs, data_files};
use serde_json::Value;

const REPO: &str = r#"
//- pkg/__init__.py
//- pkg/ops.py
def _double(x):
    return x * 2


def scale(x, k):
    """Scale x by k, doubled."""
    y = _double(x)
    if k < 0:
        return -y * k
    return y * k


def shift(x, d):
    """Shift x by d, doubled."""
    y = _double(x)
    return y + d
"#;

/// A project: the repository and a pipeline whose cache and output can be put elsewhere.
fn project(dir: &Path, cache: &str, output: &str) -> PathBuf {
    common::write_fixture(&dir.join("repo"), REPO);
    let pipeline = dir.join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[project]\nname = \"t\"\ncache = {cache:?}\noutput = {output:?}\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n[env]\ninstaller = \"pip\"\n"
        ),
    )
    .unwrap();
    pipeline
}

/// `r2e build --json` of a pipeline, offline: its exit code, summary (when it printed one) and
/// stderr.
fn build(pipeline: &Path) -> (Option<i32>, Value, String) {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(pipeline)
        .arg("--json")
        .envs(common::offline_env())
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The data files of a clean build of the same repository, from an empty cache.
fn clean_build() -> std::collections::BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = project(dir.path(), "cache", "out");
    let (code, summary, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{summary}\n{stderr}");
    data_files(&dir.path().join("out"))
}

#[test]
fn a_broken_environment_is_rebuilt_and_never_cached_as_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = project(dir.path(), "cache", "out");
    let (code, first, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(first["counts"]["instances"], 2, "{first}");
    // The environment's interpreter goes, and validation must run again.
    let envs = dir
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Envs.folder());
    let env = std::fs::read_dir(&envs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(env.join("venv/bin/python")).unwrap();
    std::fs::remove_dir_all(
        dir.path()
            .join("cache")
            .join(r2e_core::cache::Bucket::Validate.folder()),
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("out")).unwrap();
    let (code, second, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("is broken"), "{stderr}");
    assert_eq!(second["stages"]["env"]["executed"], 1, "{second}");
    assert_eq!(second["stages"]["validate"]["executed"], 2, "{second}");
    assert_eq!(second["counts"]["instances"], 2, "{second}");
    assert_eq!(data_files(&dir.path().join("out")), clean_build());
}

#[test]
fn a_disk_that_fills_up_during_an_environment_build_fails_the_build_and_is_not_cached() {
    if !common::require(
        common::is_root(),
        "a small tmpfs must be mounted",
        "run the tests as root, as CI does",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let disk = Tmpfs::mount(&cache, "3m");
    let pipeline = project(dir.path(), "cache", "out");
    let (code, summary, stderr) = build(&pipeline);
    assert_eq!(code, Some(1), "{summary}\n{stderr}");
    assert!(stderr.contains("the disk is full"), "{stderr}");
    // Nothing was stored as the environment's outcome.
    let envs = cache.join(r2e_core::cache::Bucket::Envs.folder());
    let records = walkdir::WalkDir::new(&envs)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == "record")
        .count();
    assert_eq!(records, 0);
    // With room again, the next build is a clean one.
    let ok = std::process::Command::new("mount")
        .args(["-o", "remount,size=400m"])
        .arg(&cache)
        .status()
        .unwrap();
    assert!(ok.success());
    let (code, again, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(again["stages"]["env"]["executed"], 1, "{again}");
    assert_eq!(data_files(&dir.path().join("out")), clean_build());
    drop(disk);
}

#[test]
fn a_disk_that_fills_up_during_the_output_write_keeps_the_old_set() {
    if !common::require(
        common::is_root(),
        "a small tmpfs must be mounted",
        "run the tests as root, as CI does",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let disk_dir = dir.path().join("disk");
    let disk = Tmpfs::mount(&disk_dir, "4m");
    let pipeline = project(dir.path(), "cache", "disk/out");
    let out = disk_dir.join("out");
    let (code, _, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    let before = data_files(&out);
    // The disk fills up, and a change makes every output new.
    let filler = disk_dir.join("filler");
    let free = {
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let c = std::ffi::CString::new(disk_dir.to_string_lossy().as_bytes()).unwrap();
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail * st.f_frsize
    };
    std::fs::write(&filler, vec![b'x'; free as usize - 2048]).unwrap();
    let ops = dir.path().join("repo/pkg/ops.py");
    let text = std::fs::read_to_string(&ops).unwrap();
    std::fs::write(&ops, text.replace("Scale x by k", "Scale x by k (edited)")).unwrap();
    let (code, _, stderr) = build(&pipeline);
    assert_eq!(code, Some(1), "{stderr}");
    // A reader still sees the whole old set, and no half-written generation is left.
    assert_eq!(data_files(&out), before);
    let store = disk_dir.join(".out.r2e");
    let staging: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("staging-"))
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
    // With room again (and the edit undone), the next build is a clean one.
    std::fs::remove_file(&filler).unwrap();
    std::fs::write(&ops, text).unwrap();
    let (code, _, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(data_files(&out), clean_build());
    drop(disk);
}

/// The instances of an output agree with its manifest: one build wrote them all.
fn consistent(out: &Path) -> bool {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let mut from_dataset: Vec<String> = std::fs::read_to_string(out.join("dataset.jsonl"))
        .unwrap()
        .lines()
        .map(|l| r2e_core::hash::Hash::of_bytes(l.as_bytes()).to_hex())
        .collect();
    let mut listed: Vec<String> = manifest["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["hash"].as_str().unwrap().to_owned())
        .collect();
    from_dataset.sort();
    listed.sort();
    from_dataset == listed
}

#[test]
fn two_builds_writing_one_output_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let a = project(dir.path(), "cache-a", "out");
    // The second pipeline: another cache and other settings, the same output.
    let b = dir.path().join("other.toml");
    std::fs::write(
        &b,
        std::fs::read_to_string(&a)
            .unwrap()
            .replace("cache-a", "cache-b")
            + "\n[select]\nmin_branch_coverage = 0.99\n",
    )
    .unwrap();
    for round in 0..3 {
        let spawn = |p: &Path| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("r2e"))
                .arg("build")
                .arg(p)
                .envs(common::offline_env())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (first, second) = (spawn(&a), spawn(&b));
        let (first, second) = (
            first.wait_with_output().unwrap(),
            second.wait_with_output().unwrap(),
        );
        assert!(
            first.status.success() && second.status.success(),
            "round {round}"
        );
        assert!(consistent(&dir.path().join("out")), "round {round}");
        if round == 0 {
            let said = String::from_utf8_lossy(&first.stderr).into_owned()
                + &String::from_utf8_lossy(&second.stderr);
            assert!(
                said.contains("another build is writing this output"),
                "{said}"
            );
        }
    }
}

#[test]
fn a_killed_build_leaves_nothing_that_the_next_build_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = project(dir.path(), "cache", "out");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("r2e"))
        .arg("build")
        .arg(&pipeline)
        .envs(common::offline_env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Killed while a job of the harness stages runs.
    let scratch = dir
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Scratch.folder());
    let until = Instant::now() + Duration::from_secs(300);
    let job = loop {
        let found = std::fs::read_dir(&scratch).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.starts_with(&format!("job-{pid}-")))
        });
        if let Some(job) = found {
            break job;
        }
        assert!(Instant::now() < until, "no job started");
        std::thread::sleep(Duration::from_millis(20));
    };
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let dead_cgroups = |pid: u32| {
        r2e_exec::sandbox::local::leftover_cgroups()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("r2e-{pid}-"))
            })
            .count()
    };
    assert!(scratch.join(&job).exists() || dead_cgroups(pid) > 0);
    let (code, _, stderr) = build(&pipeline);
    assert_eq!(code, Some(0), "{stderr}");
    let left: Vec<String> = std::fs::read_dir(&scratch)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&format!("-{pid}")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(dead_cgroups(pid), 0);
    assert!(!dir.path().join(format!(".out.r2e/staging-{pid}")).exists());
    assert_eq!(data_files(&dir.path().join("out")), clean_build());
}

#[test]
fn a_memory_kill_is_a_resource_limit_that_names_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    common::write_fixture(
        &dir.path().join("repo"),
        "//- hungry.py\nLIMIT = 2\n\n\ndef hungry(n):\n    \"\"\"A buffer for n > LIMIT, that fills its memory.\"\"\"\n    if n > LIMIT:\n        chunks = [b\"x\" * (64 * 2**20) for _ in range(64)]\n        return len(chunks)\n    return n + LIMIT\n",
    );
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[[repo]]\npath = \"repo\"\n\n[env]\ninstaller = \"pip\"\n\n[sandbox]\nmemory_mib = 256\n",
    )
    .unwrap();
    let summary = common::offline_build(dir.path());
    let harness: Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("out/harnesses.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        harness["failure_class"], "resource_limit",
        "{harness}\n{summary}"
    );
    assert!(
        harness["failure_message"]
            .as_str()
            .unwrap()
            .contains("memory limit (256 MiB)"),
        "{harness}"
    );
}
