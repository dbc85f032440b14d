//! `r2e gc` on the real binary: it brings a cache under a size (buckets of other versions first,
//! then the least recently used entries), keeps what the last build used unless `--all`, a
//! build started while it holds the cache's lock waits for it and then succeeds, and what it
//! cannot remove is named while it goes on with the rest.

use crate::common;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use assert_cmd::Command;
use common::Project;
use r2e_core::cache::Bucket;

fn r2e() -> Command {
    Command::cargo_bin("r2e").unwrap()
}

const SMALL: &str = r#"
//- m.py
def helper(x):
    """Helper."""
    return x + 2

def user(x):
    """Uses helper."""
    return helper(x) * 2
"#;

/// `r2e gc -p PIPELINE ARGS --json`, which must succeed: its report.
fn gc(pipeline: &Path, args: &[&str]) -> serde_json::Value {
    common::stdout_json(r2e().args(["gc", "--json", "-p"]).arg(pipeline).args(args))
}

/// What a folder takes on the disk, as `du` counts it (allocated blocks, links not followed,
/// a file with several links once).
fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(path: &Path, seen: &mut std::collections::HashSet<(u64, u64)>) -> u64 {
        let Ok(m) = std::fs::symlink_metadata(path) else {
            return 0;
        };
        let mut bytes = if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
            0
        } else {
            m.blocks() * 512
        };
        if m.is_dir() {
            for e in std::fs::read_dir(path).unwrap().flatten() {
                bytes += walk(&e.path(), seen);
            }
        }
        bytes
    }
    walk(path, &mut Default::default())
}

/// Writes `kib` KiB at `path`, last modified `age` ago.
fn file(path: &Path, kib: usize, age: Duration) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, vec![b'x'; kib << 10]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_owned();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn max_size_brings_the_cache_under_it_least_recently_used_first() {
    let p = Project::new(SMALL, "");
    let cache = p.path().join("cache");
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(v["stages"]["parse"]["executed"], 1);
    let built = files(&cache);
    let parse = Bucket::Parse.folder();
    assert!(built.iter().any(|f| f.starts_with(&parse)), "{built:?}");

    // Buckets of older versions, and ten entries used an hour apart, the first the oldest.
    file(
        &cache.join("actions/parse-v1/ab/ab01"),
        64,
        Duration::from_secs(60),
    );
    file(
        &cache.join("envs-v2/k/venv/bin/python"),
        64,
        Duration::from_secs(60),
    );
    let check = cache.join(Bucket::Check.folder()).join("cd");
    let entries: Vec<PathBuf> = (0..10).map(|i| check.join(format!("cd{i:02}"))).collect();
    for (i, e) in entries.iter().enumerate() {
        file(e, 32, Duration::from_secs(3600 * (20 - i as u64)));
    }
    let before = disk_usage(&cache);
    let max = before / 2;

    let r = gc(&p.pipeline(), &["--max-size", &max.to_string()]);
    assert_eq!(r["before"]["bytes"], before, "{r}");
    let after = disk_usage(&cache);
    assert!(after <= max, "{after} > {max}: {r}");
    assert_eq!(r["after"]["bytes"], after, "{r}");
    assert_eq!(r["fits"], true);
    let old: Vec<&str> = r["old_buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert_eq!(old, ["actions/parse-v1", "envs-v2"]);
    assert!(!cache.join("actions/parse-v1").exists() && !cache.join("envs-v2").exists());
    // The least recently used went first: what is left is the newest few.
    let left: Vec<bool> = entries.iter().map(|e| e.exists()).collect();
    let kept = left.iter().filter(|&&k| k).count();
    assert!(kept > 0 && kept < 10, "{left:?}: {r}");
    assert!(left[10 - kept..].iter().all(|&k| k), "{left:?}");
    assert_eq!(r["evicted"]["entries"], 10 - kept as u64);
    // Everything the build used is still there.
    for f in &built {
        assert!(cache.join(f).exists(), "{f} was used by the last build");
    }

    // Nothing fits in 0 bytes but what the last build used, which stays without `--all`.
    let out = r2e()
        .args(["gc", "--max-size", "0", "-p"])
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("does NOT fit in 0 B") && text.contains("--all"),
        "{text}"
    );
    assert!(err.contains("warning: the cache takes"), "{err}");
    assert!(entries.iter().all(|e| !e.exists()));
    for f in &built {
        assert!(cache.join(f).exists(), "{f} was used by the last build");
    }
    // So the next build, its output gone, takes its parse from the cache.
    std::fs::remove_file(p.path().join("out")).unwrap();
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(v["stages"]["parse"]["cached"], 1, "{v}");
    assert_eq!(v["stages"]["parse"]["executed"], 0, "{v}");
}

/// Reads a child's stderr line by line on a thread.
fn stderr_lines(child: &mut Child) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle` (at most a minute); returns the lines seen.
fn wait_for(lines: &Receiver<String>, needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(needle);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                panic!("no line with `{needle}` on stderr; saw: {seen:#?}")
            }
        }
    }
}

#[test]
fn a_build_started_during_gc_waits_and_then_succeeds() {
    let p = Project::new(SMALL, "");
    common::build_until_slice(&p.pipeline());
    let bin = assert_cmd::cargo::cargo_bin("r2e");
    // `gc` holds the cache's lock until `hold` is removed.
    let hold = p.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let mut gc = std::process::Command::new(&bin)
        .args(["gc", "--max-size", "0", "--all", "--json", "-p"])
        .arg(p.pipeline())
        .arg("--hold-lock-while")
        .arg(&hold)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let gc_err = stderr_lines(&mut gc);
    wait_for(&gc_err, "holding the lock");

    // A build with something new to parse starts meanwhile, and waits.
    p.write(
        "n.py",
        "def more(x):\n    \"\"\"More.\"\"\"\n    return x\n",
    );
    let mut b = std::process::Command::new(&bin)
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "slice", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let build_err = stderr_lines(&mut b);
    wait_for(&build_err, "waiting for the lock on");
    assert!(gc.try_wait().unwrap().is_none(), "gc still holds the lock");
    assert!(b.try_wait().unwrap().is_none(), "the build waits");

    std::fs::remove_file(&hold).unwrap();
    let gc_out = gc.wait_with_output().unwrap();
    assert!(gc_out.status.success(), "{gc_out:?}");
    let r: serde_json::Value = serde_json::from_slice(&gc_out.stdout).unwrap();
    assert!(r["evicted_in_use"]["entries"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["after"]["entries"], 0, "{r}");

    // The build ran after gc: both files are parsed (gc removed the first one's summary).
    let b_out = b.wait_with_output().unwrap();
    let rest: Vec<String> = build_err.try_iter().collect();
    assert!(b_out.status.success(), "{b_out:?} {rest:#?}");
    let v: serde_json::Value = serde_json::from_slice(&b_out.stdout).unwrap();
    assert_eq!(v["stages"]["parse"]["executed"], 2, "{v}");
    assert_eq!(v["stages"]["parse"]["cached"], 0, "{v}");
    assert_eq!(v["counts"]["functions"], 3, "{v}");
}

#[test]
fn bad_sizes_and_flags_are_bad_input() {
    let p = Project::new(SMALL, "");
    for (args, says) in [
        (&["--max-size", "2X"][..], "`2X` is not a size"),
        (&["--max-size=-1G"][..], "is not a size"),
        (&["--max-size", ""][..], "is not a size"),
        (&["--all"][..], "--max-size"),
    ] {
        let out = r2e()
            .arg("gc")
            .args(args)
            .arg("-p")
            .arg(p.pipeline())
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // No cache yet: nothing to do, and none is made.
    let r = gc(&p.pipeline(), &["--max-size", "1G"]);
    assert_eq!(r["before"]["bytes"], 0);
    assert!(!p.path().join("cache").exists());
}

/// Runs a command quietly; whether it succeeded.
fn run(program: &str, args: &[&str], path: &Path) -> bool {
    std::process::Command::new(program)
        .args(args)
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes `unit` impossible to rename (or remove): immutable as root (who ignores permissions),
/// else its folder read-only.
fn freeze_name(unit: &Path) -> bool {
    if common::is_root() {
        run("chattr", &["+i"], unit)
    } else {
        run("chmod", &["a-w"], unit.parent().unwrap())
    }
}

/// Makes what is in the folder `dir` impossible to delete (`dir` itself can still move).
fn freeze_contents(dir: &Path) -> bool {
    if common::is_root() {
        run("chattr", &["+i"], dir)
    } else {
        run("chmod", &["a-w"], dir)
    }
}

/// Undoes the freezing of everything under a folder when dropped.
struct Thaw(PathBuf);

impl Drop for Thaw {
    fn drop(&mut self) {
        if common::is_root() {
            run("chattr", &["-R", "-f", "-i"], &self.0);
        } else {
            run("chmod", &["-R", "u+w"], &self.0);
        }
    }
}

#[test]
fn what_cannot_be_removed_is_named_and_gc_goes_on() {
    let p = Project::new(SMALL, "");
    common::build_until_slice(&p.pipeline());
    let cache = p.path().join("cache");
    let hour = Duration::from_secs(3600);
    let env = cache.join(Bucket::Envs.folder()).join("kk");
    file(&env.join("venv/bin/python"), 8, 3 * hour);
    file(&env.join("record"), 1, 3 * hour);
    let tree = cache.join(Bucket::Trees.folder()).join("c1");
    file(&tree.join("sub/m.py"), 8, 2 * hour);
    let check = cache.join(Bucket::Check.folder()).join("cd/cd01");
    file(&check, 8, hour);
    let thaw = Thaw(cache.clone());
    // The environment cannot be moved; the tree can, but not all of it deleted.
    if !common::require(
        freeze_name(&env) && freeze_contents(&tree.join("sub")),
        "`chattr +i` (as root) or `chmod` on the test's folders",
        "run on a file system that supports them",
    ) {
        return;
    }

    let out = r2e()
        .args(["gc", "--max-size", "0", "--json", "-p"])
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .clone();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let env_rel = format!("{}/kk", Bucket::Envs.folder());
    assert_eq!(r["not_removed"], serde_json::json!([env_rel]), "{r}");
    assert!(
        err.contains(&format!("cannot remove `{}`", env.display())),
        "{err}"
    );
    // The environment is whole; the tree is out of its name, whatever of it is left.
    assert!(env.join("record").exists() && env.join("venv/bin/python").exists());
    assert!(!tree.exists(), "{err}");
    assert!(err.contains("not all of it could be deleted"), "{err}");
    // And the rest went.
    assert!(!check.exists());
    assert_eq!(r["evicted"]["entries"], 2, "{r}");

    // What is left of the tree, in the scratch folder of a gc that ended, goes with the next.
    drop(thaw);
    let scratch = cache.join(Bucket::Scratch.folder());
    let gc_folders = || {
        std::fs::read_dir(&scratch)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("gc-"))
            .count()
    };
    assert_eq!(gc_folders(), 1);
    let r = gc(&p.pipeline(), &["--max-size", "0"]);
    assert_eq!(gc_folders(), 0, "{r}");
    assert!(!env.exists(), "{r}");
    assert_eq!(r["not_removed"], serde_json::json!([]), "{r}");
}
