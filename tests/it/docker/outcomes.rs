//! Three outcomes wherever a candidate is judged (`r2e check --json`, `results.jsonl`, `serve`'s
//! test and submit): `pass`, `fail` (the candidate's own doing) and `error` (not its doing),
//! with real faults made on this machine: a sandbox that cannot start (a `bwrap` on the `PATH`
//! that fails every job running harnesses while a flag file exists), a candidate's worker killed from outside
//! (every `r2e_batch.py` process under the r2e process under test, killed as it appears), and a
//! full scratch disk (a 4 KiB tmpfs on the cache's scratch folder; root only). Each fault gives
//! `error`, and nothing of it is cached: the same check without the fault is judged. A
//! candidate's own crash, endless loop and memory blow-up give `fail`, and so does a candidate
//! that kills its worker (stored: judged again while the sandbox cannot start).
//!
//! And the stability of tests: a function that reads a random number drawn when its module is
//! imported gives tests whose runs disagree (each worker is a fresh interpreter), which are
//! dropped from its harness and counted in `stability`.
//!
//! One dataset is built once per test run (offline, `common::seed`), each test process working
//! on its own copy of it; the faults are made one test at a time (a lock), since the copy's
//! scratch folder and the workers are shared.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;

use common::calc::{calc_clamp, calc_scale};
use common::hogs::Hogs;
use common::serve::Server;
use common::verdict::split_cached;

const FIXTURE: &str = concat!(
    "\n//- calc/__init__.py\n//- calc/ops.py\n",
    calc_clamp!(),
    "\n",
    calc_scale!(),
    r#"
//- calc/tags.py
import random

# Drawn when the module is imported: the same in every call of one process, another in the
# next process.
_SALT = random.randrange(1 << 30)


def tag(name, salted=False):
    """The name as a tag: stripped and lowercased; with a salt of this process when salted."""
    if not isinstance(name, str):
        raise TypeError("the name must be a string")
    base = name.strip().lower()
    if salted:
        return f"{base}-{_SALT}"
    return base
"#
);

const CLAMP: &str = "calc:calc/ops.py:clamp";

/// A right `clamp`, told apart from every other candidate by `nonce` (a new check each time).
fn right(nonce: &str) -> String {
    format!(
        "def clamp(x, lo, hi):\n    # {nonce}\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
    )
}

/// A right `clamp` that first waits a second (once per process): long enough for a worker to
/// be seen and killed.
fn slow(nonce: &str) -> String {
    format!(
        "def clamp(x, lo, hi):\n    # {nonce}\n    import time\n    if not getattr(clamp, 'slept', False):\n        time.sleep(1)\n        clamp.slept = True\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
    )
}

/// The folder with the repository, the shared cache, a `bwrap` that fails while `broken`
/// exists, and the dataset built once: this test process's own copy (by hard links) of the
/// seed a run builds once.
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let real = r2e_core::fsutil::find_program("bwrap");
        let base = pipeline_text("base", "");
        let seed = common::seed::seeded(
            "outcomes",
            &format!("{FIXTURE}\n{real:?}\n{base}"),
            |dir| {
                common::write_fixture(&dir.join("repo"), FIXTURE);
                let bin = dir.join("bin");
                std::fs::create_dir_all(&bin).unwrap();
                if let Some(real) = real {
                    // Only the jobs that run harnesses (the warm worker `r2e_batch.py`) fail, as
                    // a sandbox that cannot create its namespaces does: bubblewrap's probe
                    // passes, so that r2e starts, and so does the interpreter's probe of a cached
                    // environment. The flag is `broken` beside `bin/`, wherever the copy is.
                    let script = format!(
                        "#!/bin/sh\ncase \"$*\" in *r2e_batch*)\n  if [ -e \"$(dirname \"$0\")/../broken\" ]; then\n    echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2\n    exit 1\n  fi\nesac\nexec '{real}' \"$@\"\n",
                        real = real.display()
                    );
                    let fake = bin.join("bwrap");
                    std::fs::write(&fake, script).unwrap();
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
                std::fs::write(dir.join("base.toml"), &base).unwrap();
                build(dir, "base", true);
            },
        );
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("outcomes-{}", std::process::id()));
        common::seed::remove(&dir);
        common::seed::copy_into(&seed, &dir);
        dir
    })
}

/// One fault at a time: they share the cache's scratch folder and the machine's workers.
/// A lock between processes, held while the file is open: `cargo nextest` runs each test in a
/// process of its own, `cargo test` all of them on threads of one (each open file is locked
/// apart).
fn one_at_a_time() -> std::fs::File {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("outcomes-faults.lock");
    let lock = std::fs::File::create(path).unwrap();
    lock.lock().unwrap();
    lock
}

/// `NAME.toml` over the shared repository and cache, with `more` tables.
fn pipeline(dir: &Path, name: &str, more: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, pipeline_text(name, more)).unwrap();
    path
}

/// The text of [`pipeline`]'s `NAME.toml`.
fn pipeline_text(name: &str, more: &str) -> String {
    format!(
        "version = 1\n[project]\nname = \"outcomes\"\noutput = \"out-{name}\"\ncache = \"cache\"\n\n\
         [[repo]]\npath = \"repo\"\nname = \"calc\"\n\n[env]\ninstaller = \"pip\"\n\n\
         [select]\nmin_branch_coverage = 0.0\n\n[extract]\nconnectivity = false\n\n\
         [sandbox]\nrun_timeout_seconds = 5\nmemory_mib = 512\n\n{more}"
    )
}

/// `PATH` with the flag-driven `bwrap` first.
fn path_env(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Builds `NAME.toml` (its summary); `ok`: the build must succeed.
fn build(dir: &Path, name: &str, ok: bool) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["build", "--json", "-p"])
        .arg(dir.join(format!("{name}.toml")))
        .envs(common::offline_env())
        .env("PATH", path_env(dir))
        .output()
        .unwrap();
    assert!(
        !ok || out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no summary: {}", String::from_utf8_lossy(&out.stderr)))
}

/// `r2e check ID --candidate FILE --json` on `text`, with `more` done while it runs.
fn check_with(text: &str, during: impl FnOnce(u32) -> Box<dyn FnOnce()>) -> (Option<i32>, Value) {
    let dir = built();
    let file = dir.join(format!(
        "candidate-{}.py",
        blake3::hash(text.as_bytes()).to_hex()
    ));
    std::fs::write(&file, text).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["check", CLAMP, "--json", "--candidate"])
        .arg(&file)
        .arg("-p")
        .arg(dir.join("base.toml"))
        .envs(common::offline_env())
        .env("PATH", path_env(dir))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stop = during(child.id());
    let out: Output = child.wait_with_output().unwrap();
    stop();
    let verdict = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "no verdict: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), verdict)
}

fn check(text: &str) -> (Option<i32>, Value) {
    check_with(text, |_| Box::new(|| {}))
}

/// The processes under `pid` (its children, theirs, ...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so read after its last `)`.
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
        {
            parent_of.push((p, ppid));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// Kills every warm worker (`r2e_batch.py`) under `pid` as soon as it appears, until the
/// returned function is called: how many it killed, then.
fn kill_workers_under(pid: u32) -> (Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    let killer = std::thread::spawn(move || {
        let mut killed = 0;
        while !done.load(Ordering::Relaxed) {
            for p in descendants(pid) {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains("r2e_batch") {
                    // SAFETY: a process of this test's r2e, found just now.
                    if unsafe { libc::kill(p as i32, libc::SIGKILL) } == 0 {
                        killed += 1;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        killed
    });
    (stop, killer)
}

/// The verdict's parts every test reads.
fn outcome(v: &Value) -> (&str, &str) {
    (
        v["outcome"].as_str().unwrap_or("?"),
        v["failure_class"].as_str().unwrap_or(""),
    )
}

#[test]
fn a_candidates_own_crash_endless_loop_and_memory_blow_up_fail() {
    let _one = one_at_a_time();
    let (code, v) = check(&right("own"));
    assert_eq!((code, outcome(&v).0), (Some(0), "pass"), "{v}");
    for (what, body, class) in [
        (
            "crash",
            "import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)",
            "crash",
        ),
        ("loop", "while True:\n        pass", "timeout"),
        (
            "memory",
            "hog = []\n    while True:\n        hog.append(bytearray(64 * 2**20))",
            "",
        ),
    ] {
        let text = format!("def clamp(x, lo, hi):\n    {body}\n");
        let (code, v) = check(&text);
        let (got, got_class) = outcome(&v);
        assert_eq!((code, got), (Some(1), "fail"), "{what}: {v}");
        if !class.is_empty() {
            assert_eq!(got_class, class, "{what}: {v}");
        } else {
            // Its own limit, or the MemoryError it raised: either way its doing.
            assert!(
                ["resource_limit", "assertion", "crash"].contains(&got_class),
                "{what}: {v}"
            );
        }
        assert_ne!(got_class, "infrastructure", "{what}: {v}");
    }
}

/// `r2e check --json` says which checks ran now and which came from the cache (`cached`), as
/// `bench/checks.sh` counts them: one process and a `--candidates` file, where a second line
/// with the same module text is answered by the first's run, and a candidate that does not
/// splice needs no run.
#[test]
fn check_json_says_whether_each_check_ran_now_or_came_from_the_cache() {
    let _one = one_at_a_time();
    let dir = built();
    let (code, v) = check(&right("counted once"));
    assert_eq!((code, &v["cached"]), (Some(0), &json!(false)), "{v}");
    let (code, v) = check(&right("counted once"));
    assert_eq!((code, &v["cached"]), (Some(0), &json!(true)), "{v}");
    let file = dir.join("counted.jsonl");
    let lines: Vec<String> = [
        right("counted in a batch"),
        right("counted in a batch"),
        right("counted once"),
        "def clamp(x, lo, hi:\n    return x\n".to_owned(),
    ]
    .iter()
    .map(|c| json!({"id": CLAMP, "candidate": c}).to_string() + "\n")
    .collect();
    std::fs::write(&file, lines.concat()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["check", "--json", "--candidates"])
        .arg(&file)
        .arg("-p")
        .arg(dir.join("base.toml"))
        .envs(common::offline_env())
        .env("PATH", path_env(dir))
        .output()
        .unwrap();
    let reports: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, Option<bool>)> = reports
        .iter()
        .map(|r| (outcome(r).0, r.get("cached").map(|c| c.as_bool().unwrap())))
        .collect();
    assert_eq!(
        got,
        [
            ("pass", Some(false)),
            ("pass", Some(true)),
            ("pass", Some(true)),
            ("fail", None)
        ],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A right `clamp` that first does `what` (once per process, indented for the function body).
fn first_doing(nonce: &str, what: &str) -> String {
    format!(
        "def clamp(x, lo, hi):\n    # {nonce}\n    if not getattr(clamp, 'done', False):\n        clamp.done = True\n{what}\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
    )
}

/// Spins `seconds` of this process's CPU time.
fn spin(seconds: f64) -> String {
    format!(
        "        import time\n        t = time.process_time()\n        while time.process_time() - t < {seconds}:\n            pass"
    )
}

/// `r2e check --json` on `text` with a limit of one second a run (the shared build, read
/// through a pipeline that differs from `base.toml` only in that limit), and how long it took.
fn check_with_a_one_second_limit(text: &str) -> (Value, Duration) {
    let dir = built();
    let toml = dir.join("limit.toml");
    let base = std::fs::read_to_string(dir.join("base.toml")).unwrap();
    std::fs::write(
        &toml,
        base.replace("run_timeout_seconds = 5", "run_timeout_seconds = 1"),
    )
    .unwrap();
    let file = dir.join(format!(
        "candidate-{}.py",
        blake3::hash(text.as_bytes()).to_hex()
    ));
    std::fs::write(&file, text).unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["check", CLAMP, "--json", "--candidate"])
        .arg(&file)
        .arg("-p")
        .arg(&toml)
        .envs(common::offline_env())
        .env("PATH", path_env(dir))
        .output()
        .unwrap();
    let took = started.elapsed();
    let verdict = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "no verdict: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (verdict, took)
}

/// The processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(line) = std::fs::read(entry.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            if line.contains(marker) {
                found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn a_runs_limit_counts_what_it_did_not_a_busy_machines_wall_clock_and_a_wait_ends_at_it() {
    let _one = one_at_a_time();
    built();
    // Under a limit of 1 s: 0.6 s of CPU time while every core is kept busy four times over
    // (its wall time far past the limit) is within it; 1.5 s of CPU time on an idle machine is
    // not.
    let (v, took) = {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let _hogs = Hogs::start(4 * cores);
        check_with_a_one_second_limit(&first_doing("spin-busy", &spin(0.6)))
    };
    assert_eq!(outcome(&v), ("pass", ""), "{v} ({took:?})");
    let (v, _) = check_with_a_one_second_limit(&first_doing("spin-long", &spin(1.5)));
    assert_eq!(outcome(&v), ("fail", "timeout"), "{v}");

    // A run that waits ends at its limit (idle-machine time) as a timeout, with every process it
    // started: a sleep, a child that sleeps, an editor that waits for its input (with a helper
    // of its own in a session of its own).
    let marker = format!("1000.{}", std::process::id());
    for (what, body) in [
        (
            "sleep",
            "        import time\n        time.sleep(1.5)".to_string(),
        ),
        (
            "child",
            format!(
                "        import subprocess\n        subprocess.Popen(['sleep', '{marker}']).wait()"
            ),
        ),
        (
            "editor",
            format!(
                "        import subprocess\n        subprocess.Popen(['sh', '-c', 'setsid sleep {marker} & exec cat'], stdin=subprocess.PIPE).wait()"
            ),
        ),
    ] {
        let (v, took) = check_with_a_one_second_limit(&first_doing(what, &body));
        assert_eq!(outcome(&v), ("fail", "timeout"), "{what}: {v}");
        assert!(took < Duration::from_secs(30), "{what}: {took:?}");
        assert_eq!(processes_with(&marker), Vec::<String>::new(), "{what}");
    }
    // The same where the worker lives on after the check (`serve`'s): nothing the run started
    // outlives it inside the worker's sandbox either.
    let server = server("serve-limit");
    let marker = format!("1001.{}", std::process::id());
    let sid = session_with(
        &server,
        &first_doing(
            "serve-editor",
            &format!(
                "        import subprocess\n        subprocess.Popen(['sh', '-c', 'setsid sleep {marker} & exec cat'], stdin=subprocess.PIPE).wait()"
            ),
        ),
    );
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    assert_eq!(submit["outcome"], "fail", "{submit}");
    assert_eq!(processes_with(&marker), Vec::<String>::new(), "{submit}");
}

#[test]
fn a_sandbox_that_cannot_start_is_an_error_in_check_and_evaluate_and_is_not_cached() {
    let dir = built();
    if !common::require(
        dir.join("bin/bwrap").exists(),
        "bubblewrap (bwrap)",
        "apt-get install bubblewrap",
    ) {
        return;
    }
    let _one = one_at_a_time();
    let flag = dir.join("broken");
    // check --json: error, exit 3; then, the sandbox mended, the same candidate is judged.
    std::fs::write(&flag, "").unwrap();
    let (code, v) = check(&right("no-sandbox"));
    std::fs::remove_file(&flag).unwrap();
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(outcome(&v), ("error", "infrastructure"), "{v}");
    let why = v["error"].as_str().unwrap();
    assert!(why.contains("namespace"), "the reason is told: {v}");
    assert!(
        !why.contains(dir.to_str().unwrap()),
        "no path of this machine: {v}"
    );
    let (code, v) = check(&right("no-sandbox"));
    assert_eq!((code, outcome(&v).0), (Some(0), "pass"), "not cached: {v}");

    // evaluate: the sample is `error` in results.jsonl, out of pass@k, and the next build
    // (mended) checks it again.
    evaluate_pipeline(
        dir,
        "eval-sandbox",
        &model_answering(right("evaluate-no-sandbox")),
    );
    std::fs::write(&flag, "").unwrap();
    let summary = build(dir, "eval-sandbox", false);
    std::fs::remove_file(&flag).unwrap();
    let line = clamp_result(dir, "eval-sandbox");
    assert_eq!(line["outcome"], "error", "{line}");
    assert_eq!(line["rounds"][0]["outcome"], "error", "{line}");
    assert_eq!(
        line["rounds"][0]["failure_class"], "infrastructure",
        "{line}"
    );
    assert!(
        summary["evaluate"]["errors"].as_u64() >= Some(1),
        "{summary}"
    );
    // The other instances are answered with no `def` of theirs (plain fails); `clamp`'s
    // sample is left out.
    let instances = common::jsonl(&dir.join("out-eval-sandbox/dataset.jsonl")).len();
    assert_eq!(
        summary["evaluate"]["pass"][0]["instances"],
        instances - 1,
        "an errored sample is left out of pass@k: {summary}"
    );
    assert!(
        summary["retry"]
            .to_string()
            .contains("could not be checked"),
        "{summary}"
    );
    let summary = build(dir, "eval-sandbox", true);
    let line = clamp_result(dir, "eval-sandbox");
    assert_eq!(line["outcome"], "pass", "checked again: {line}");
    assert_eq!(summary["evaluate"]["errors"], 0, "{summary}");
}

/// A model server answering every prompt with `code` in a fenced block: its URL.
fn model_answering(code: String) -> String {
    let (url, _, _) = common::server::serve(Duration::ZERO, move |_, _| {
        (200, "", format!("```python\n{code}```\n"))
    });
    url
}

/// `clamp`'s line of `results.jsonl` in the output of `NAME.toml`.
fn clamp_result(dir: &Path, name: &str) -> Value {
    let results = common::jsonl(&dir.join(format!("out-{name}/results.jsonl")));
    results
        .into_iter()
        .find(|r| r["id"] == CLAMP)
        .unwrap_or_else(|| panic!("no result of clamp in out-{name}"))
}

/// An `[evaluate]` pipeline `NAME.toml` asking the model at `url`, named `NAME` (model answers
/// are cached by model and prompt: each test's model has a name of its own).
fn evaluate_pipeline(dir: &Path, name: &str, url: &str) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir.join(format!("out-{name}")));
    pipeline(
        dir,
        name,
        &format!(
            "[providers.local]\nbase_url = \"{url}\"\n\n\
             [evaluate]\nenabled = true\nsamples = 1\nk = [1]\nrepair_rounds = 0\n\n\
             [[evaluate.model]]\nprovider = \"local\"\nmodel = \"{name}\"\n"
        ),
    )
}

#[test]
fn a_killed_worker_is_an_error_in_check_and_evaluate_and_is_not_cached() {
    let dir = built();
    let _one = one_at_a_time();
    let text = slow("killed");
    let (code, v) = check_with(&text, |pid| {
        let (stop, killer) = kill_workers_under(pid);
        Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            assert!(killer.join().unwrap() > 0, "a worker was killed");
        })
    });
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(outcome(&v), ("error", "infrastructure"), "{v}");
    let (code, v) = check(&text);
    assert_eq!((code, outcome(&v).0), (Some(0), "pass"), "not cached: {v}");

    // evaluate, its workers killed while it builds.
    evaluate_pipeline(
        dir,
        "eval-killed",
        &model_answering(slow("evaluate-killed")),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["build", "--json", "-p"])
        .arg(dir.join("eval-killed.toml"))
        .envs(common::offline_env())
        .env("PATH", path_env(dir))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (stop, killer) = kill_workers_under(child.id());
    let out = child.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    assert!(killer.join().unwrap() > 0, "a worker was killed");
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let line = clamp_result(dir, "eval-killed");
    assert_eq!(line["outcome"], "error", "{line}");
    assert!(
        summary["evaluate"]["errors"].as_u64() >= Some(1),
        "{summary}"
    );
    build(dir, "eval-killed", true);
    let line = clamp_result(dir, "eval-killed");
    assert_eq!(line["outcome"], "pass", "checked again: {line}");
}

/// A `clamp` that kills the worker it sees (its parent, `os.getppid()`), then answers right.
fn killer(nonce: &str) -> String {
    format!(
        "def clamp(x, lo, hi):\n    # {nonce}\n    import os\n    os.kill(os.getppid(), 9)\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n"
    )
}

/// A candidate that kills its worker (from its own code, or from a child of its own that kills
/// every process it may) did it itself: `fail` in `check --json`, `results.jsonl` and `serve`,
/// and stored like any verdict, which the next check reads with the sandbox unable to start.
#[test]
fn a_candidate_that_kills_its_worker_fails_everywhere_and_is_cached() {
    let dir = built();
    if !common::require(
        dir.join("bin/bwrap").exists(),
        "bubblewrap (bwrap)",
        "apt-get install bubblewrap",
    ) {
        return;
    }
    let _one = one_at_a_time();
    let flag = dir.join("broken");
    let every = "def clamp(x, lo, hi):\n    import os, time\n    if os.fork() == 0:\n        os.kill(-1, 9)\n        os._exit(0)\n    time.sleep(1)\n    return min(max(x, lo), hi)\n";
    for (what, text) in [
        ("its parent", killer("check")),
        ("every process", every.into()),
    ] {
        let (code, v) = check(&text);
        assert_eq!(
            (code, outcome(&v)),
            (Some(1), ("fail", "crash")),
            "{what}: {v}"
        );
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("the candidate killed its worker"),
            "{what}: {v}"
        );
        // Cached: judged again with no sandbox at all.
        std::fs::write(&flag, "").unwrap();
        let (code, again) = check(&text);
        std::fs::remove_file(&flag).unwrap();
        let ((v, ran), (again, cached)) = (split_cached(&v), split_cached(&again));
        assert_eq!(
            (ran, cached),
            (json!(false), json!(true)),
            "{what}: ran, then from the cache"
        );
        assert_eq!((code, &again), (Some(1), &v), "{what}: cached");
    }

    // evaluate: `fail` in results.jsonl, out of no count; a build with no sandbox reads it.
    evaluate_pipeline(dir, "eval-killer", &model_answering(killer("evaluate")));
    let summary = build(dir, "eval-killer", true);
    let line = clamp_result(dir, "eval-killer");
    assert_eq!(line["outcome"], "fail", "{line}");
    assert_eq!(line["rounds"][0]["failure_class"], "crash", "{line}");
    assert_eq!(summary["evaluate"]["errors"], 0, "{summary}");
    let _ = std::fs::remove_dir_all(dir.join("out-eval-killer"));
    std::fs::write(&flag, "").unwrap();
    build(dir, "eval-killer", false);
    std::fs::remove_file(&flag).unwrap();
    let line = clamp_result(dir, "eval-killer");
    assert_eq!(line["outcome"], "fail", "cached: {line}");

    // serve: a test and a submission fail, with a reward; a new session submitting the same
    // is answered with no sandbox.
    let server = server("serve-killer");
    let sid = session_with(&server, &killer("serve"));
    let test = server
        .json("POST", &format!("/v1/sessions/{sid}/test"), json!({}))
        .json();
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    assert_eq!(test["outcome"], "fail", "{test}");
    assert_eq!(submit["outcome"], "fail", "{submit}");
    assert_eq!(submit["reward"].as_f64(), Some(0.0), "{submit}");
    let sid = session_with(&server, &killer("serve"));
    std::fs::write(&flag, "").unwrap();
    let again = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    std::fs::remove_file(&flag).unwrap();
    assert_eq!(again["outcome"], "fail", "cached: {again}");
}

#[test]
fn a_full_scratch_disk_is_an_error_and_is_not_cached() {
    if !common::require(
        common::is_root(),
        "root (to mount a tmpfs)",
        "run the tests as root",
    ) {
        return;
    }
    let dir = built();
    let _one = one_at_a_time();
    let scratch = dir.join("cache").join("scratch");
    let text = right("full-disk");
    let (code, v) = {
        let _disk = common::Tmpfs::mount(&scratch, "4k");
        check(&text)
    };
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(outcome(&v), ("error", "infrastructure"), "{v}");
    assert!(v["error"].as_str().unwrap().contains("disk is full"), "{v}");
    let (code, v) = check(&text);
    assert_eq!((code, outcome(&v).0), (Some(0), "pass"), "not cached: {v}");

    // evaluate: the sample is `error` in results.jsonl, and the next build checks it again.
    evaluate_pipeline(
        dir,
        "eval-full-disk",
        &model_answering(right("evaluate-full-disk")),
    );
    let summary = {
        let _disk = common::Tmpfs::mount(&scratch, "4k");
        build(dir, "eval-full-disk", false)
    };
    let line = clamp_result(dir, "eval-full-disk");
    assert_eq!(line["outcome"], "error", "{line}");
    assert_eq!(
        line["rounds"][0]["failure_class"], "infrastructure",
        "{line}"
    );
    assert!(
        line["rounds"][0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("disk is full")),
        "the reason is told: {line}"
    );
    assert!(
        summary["evaluate"]["errors"].as_u64() >= Some(1),
        "{summary}"
    );
    build(dir, "eval-full-disk", true);
    let line = clamp_result(dir, "eval-full-disk");
    assert_eq!(line["outcome"], "pass", "checked again: {line}");
}

/// A server of `base.toml`'s dataset, its own output, with the flag-driven `bwrap` first on its
/// `PATH`.
fn server(name: &str) -> Server {
    let dir = built();
    let pipeline = pipeline(dir, name, "");
    let _ = std::fs::remove_dir_all(dir.join(format!("out-{name}")));
    build(dir, name, true);
    let path = path_env(dir);
    let mut env: Vec<(&str, String)> = common::offline_env().into_iter().collect();
    env.push(("PATH", path));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Server::start_with(&pipeline, &dir.join(format!("out-{name}")), &[], &env)
}

/// A session on `clamp` whose function file holds `text` as clamp's definition.
fn session_with(server: &Server, text: &str) -> String {
    let sid = server.open(CLAMP);
    let file = std::fs::read_to_string(built().join("repo/calc/ops.py")).unwrap();
    let start = file.find("def clamp").unwrap();
    let end = file.find("def scale").unwrap();
    let edited = format!("{}{}\n\n{}", &file[..start], text, &file[end..]);
    let put = server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(edited.as_bytes()),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    sid
}

#[test]
fn serves_answers_say_error_with_a_null_reward_and_the_session_stays_open() {
    let dir = built();
    let _one = one_at_a_time();
    let server = server("serve-faults");
    let flag = dir.join("broken");
    let has_bwrap = dir.join("bin/bwrap").exists();

    // A sandbox that cannot start (the local backend's bwrap).
    if common::require(
        has_bwrap,
        "bubblewrap (bwrap)",
        "apt-get install bubblewrap",
    ) {
        let sid = session_with(&server, &right("serve-no-sandbox"));
        std::fs::write(&flag, "").unwrap();
        let test = server.json("POST", &format!("/v1/sessions/{sid}/test"), json!({}));
        let submit = server.json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}));
        std::fs::remove_file(&flag).unwrap();
        let (test, submit) = (test.json(), submit.json());
        assert_eq!(test["outcome"], "error", "{test}");
        assert_eq!(test["failure_class"], "infrastructure", "{test}");
        assert_eq!(submit["outcome"], "error", "{submit}");
        assert_eq!(submit["reward"], Value::Null, "{submit}");
        assert!(
            submit["error"].as_str().unwrap().contains("namespace"),
            "{submit}"
        );
        // The session is still open: mended, its submission is judged.
        let submit = server
            .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
            .json();
        assert_eq!(
            (submit["outcome"].as_str(), submit["reward"].as_f64()),
            (Some("pass"), Some(1.0)),
            "{submit}"
        );
        let trace = server.trace(&sid);
        let submits: Vec<&Value> = trace.iter().filter(|l| l["op"] == "submit").collect();
        assert_eq!(submits.len(), 2, "both submissions are traced: {trace:?}");
    }

    // Its workers killed as they appear, while a test and a submission run.
    let sid = session_with(&server, &slow("serve-killed"));
    let (stop, killer) = kill_workers_under(server.pid());
    let test = server
        .json("POST", &format!("/v1/sessions/{sid}/test"), json!({}))
        .json();
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    stop.store(true, Ordering::Relaxed);
    assert!(killer.join().unwrap() > 0, "a worker was killed");
    assert_eq!(test["outcome"], "error", "{test}");
    assert_eq!(submit["outcome"], "error", "{submit}");
    assert_eq!(submit["reward"], Value::Null, "{submit}");
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    assert_eq!(submit["outcome"], "pass", "not cached: {submit}");

    // A full scratch disk.
    if common::require(
        common::is_root(),
        "root (to mount a tmpfs as the scratch disk)",
        "run the tests as root, as `.ci/run` does",
    ) {
        let sid = session_with(&server, &right("serve-full-disk"));
        let (test, submit) = {
            let _disk = common::Tmpfs::mount(&dir.join("cache").join("scratch"), "4k");
            (
                server
                    .json("POST", &format!("/v1/sessions/{sid}/test"), json!({}))
                    .json(),
                server
                    .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
                    .json(),
            )
        };
        assert_eq!(test["outcome"], "error", "{test}");
        assert_eq!(submit["outcome"], "error", "{submit}");
        assert_eq!(submit["reward"], Value::Null, "{submit}");
        let submit = server
            .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
            .json();
        assert_eq!(submit["outcome"], "pass", "not cached: {submit}");
    }

    // And a wrong answer is a plain `fail`.
    let sid = session_with(&server, "def clamp(x, lo, hi):\n    return lo\n");
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    assert_eq!(submit["outcome"], "fail", "{submit}");
    assert!(submit["reward"].as_f64().unwrap() < 1.0, "{submit}");
}

#[test]
fn a_test_of_a_value_drawn_at_import_is_unstable_and_dropped() {
    let dir = built();
    let instances = common::jsonl(&dir.join("out-base/dataset.jsonl"));
    let tag = instances
        .iter()
        .find(|i| i["id"] == "calc:calc/tags.py:tag")
        .unwrap_or_else(|| panic!("tag is an instance: {instances:#?}"));
    let stability = &tag["stability"];
    assert_eq!(stability["runs"], 5, "3 records and 2 checks: {stability}");
    let tests = stability["tests"].as_array().unwrap();
    let dropped: Vec<&str> = stability["dropped"]
        .as_array()
        .map(|d| d.iter().map(|t| t.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(
        !dropped.is_empty(),
        "a salted test is unstable: {stability}"
    );
    for t in tests {
        let name = t["name"].as_str().unwrap();
        let stable = t["agreed"] == 5;
        assert_eq!(stable, !dropped.contains(&name), "{stability}");
    }
    // The expectations hold the stable tests only.
    let expected: Vec<&str> = tag["expected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(expected.iter().all(|n| !dropped.contains(n)), "{tag}");
    assert_eq!(tag["tests"], expected.len());
    // Every instance says how stable its tests were; clamp's are all stable.
    for i in &instances {
        assert_eq!(i["stability"]["runs"], 5, "{}", i["id"]);
    }
    let clamp = instances.iter().find(|i| i["id"] == CLAMP).unwrap();
    assert!(clamp["stability"].get("dropped").is_none(), "{clamp}");
}

/// A proxy of the Docker daemon's socket at `path`, forwarding every connection to `daemon`;
/// with `cut_at`, the daemon goes away (every connection closed, the socket removed) the
/// moment a request holding those bytes comes: a daemon gone during a check, without touching
/// the machine's own.
struct DaemonProxy {
    gone: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl DaemonProxy {
    fn start(path: &Path, daemon: PathBuf, cut_at: Option<&'static [u8]>) -> DaemonProxy {
        use std::io::{Read, Write};
        use std::os::unix::net::{UnixListener, UnixStream};
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let gone = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<UnixStream>>> = Arc::default();
        let (flag, path) = (gone.clone(), path.to_path_buf());
        let accept = std::thread::spawn(move || {
            let cut = |open: &Mutex<Vec<UnixStream>>, flag: &AtomicBool| {
                flag.store(true, Ordering::SeqCst);
                for s in open.lock().unwrap().iter() {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            };
            while !flag.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = UnixStream::connect(&daemon) else {
                    continue;
                };
                open.lock()
                    .unwrap()
                    .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                let (mut from_client, mut to_server) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (open_up, flag_up) = (open.clone(), flag.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 1 << 16];
                    while let Ok(n) = from_client.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        if let Some(needle) = cut_at
                            && buf[..n].windows(needle.len()).any(|w| w == needle)
                        {
                            cut(&open_up, &flag_up);
                            break;
                        }
                        if to_server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown(std::net::Shutdown::Write);
                });
                let (mut from_server, mut to_client) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_server, &mut to_client);
                    let _ = to_client.shutdown(std::net::Shutdown::Write);
                });
            }
            drop(listener);
            let _ = std::fs::remove_file(&path);
        });
        DaemonProxy {
            gone,
            accept: Some(accept),
        }
    }

    /// Whether the daemon went away.
    fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
}

impl Drop for DaemonProxy {
    fn drop(&mut self) {
        self.gone.store(true, Ordering::SeqCst);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

/// The machine's Docker daemon socket (`DOCKER_HOST`'s `unix://` path, else the default).
fn daemon_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"))
}

#[test]
fn a_docker_daemon_gone_is_an_error_in_check_evaluate_and_serve_and_is_not_cached() {
    if common::docker().is_none() {
        return;
    }
    let p = common::Project::new(
        &format!(
            "//- pkg/__init__.py\n//- pkg/text.py\n{}",
            crate::docker::TEXT_PY
        ),
        "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\n",
    );
    let socket = p.path().join("daemon.sock");
    let host = format!("unix://{}", socket.display());
    {
        let _proxy = DaemonProxy::start(&socket, daemon_socket(), None);
        let out = crate::docker::build_against(p.path(), Some(&host));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let candidate = p.path().join("candidate.py");
    std::fs::write(
        &candidate,
        "def count_vowels(text):\n    # checked while the daemon goes away\n    return sum(1 for c in text.lower() if c in VOWELS)\n",
    )
    .unwrap();
    let check = || {
        let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
            .args([
                "check",
                "r:pkg/text.py:count_vowels",
                "--json",
                "--candidate",
            ])
            .arg(&candidate)
            .current_dir(p.path())
            .env("DOCKER_HOST", &host)
            .output()
            .unwrap();
        let verdict: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("no verdict: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), verdict)
    };
    // The daemon goes away when the check asks it for the candidate's container.
    let (code, v) = {
        let proxy = DaemonProxy::start(&socket, daemon_socket(), Some(b"/containers/create"));
        let got = check();
        assert!(proxy.gone(), "the check asked for a container: {}", got.1);
        got
    };
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(outcome(&v), ("error", "infrastructure"), "{v}");
    // The daemon back: the same candidate is judged.
    {
        let _proxy = DaemonProxy::start(&socket, daemon_socket(), None);
        let (code, v) = check();
        assert_eq!((code, outcome(&v).0), (Some(0), "pass"), "not cached: {v}");
    }

    // evaluate: a model's sample checked while the daemon goes away (when it is asked for the
    // checking worker's container, after the environment's own) is `error` in results.jsonl;
    // the next build, the daemon back, checks it again.
    let url = model_answering(
        "def count_vowels(text):\n    # the model's, while the daemon goes away\n    return sum(1 for c in text.lower() if c in VOWELS)\n".into(),
    );
    let toml = p.path().join("pipeline.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        "\n[providers.local]\nbase_url = \"{url}\"\n\n\
         [evaluate]\nenabled = true\nsamples = 1\nk = [1]\nrepair_rounds = 0\n\n\
         [[evaluate.model]]\nprovider = \"local\"\nmodel = \"daemon-gone\"\n"
    ));
    std::fs::write(&toml, text).unwrap();
    let result = || {
        common::jsonl(&p.path().join("out/results.jsonl"))
            .into_iter()
            .find(|r| r["id"] == "r:pkg/text.py:count_vowels")
            .expect("a result of count_vowels")
    };
    {
        let proxy = DaemonProxy::start(&socket, daemon_socket(), Some(b"r2e_batch"));
        let out = crate::docker::build_against(p.path(), Some(&host));
        assert!(proxy.gone(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            !out.status.success(),
            "an error is retried, the build says so"
        );
    }
    let line = result();
    assert_eq!(line["outcome"], "error", "{line}");
    assert_eq!(
        line["rounds"][0]["failure_class"], "infrastructure",
        "{line}"
    );
    {
        let _proxy = DaemonProxy::start(&socket, daemon_socket(), None);
        let out = crate::docker::build_against(p.path(), Some(&host));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = result();
    assert_eq!(line["outcome"], "pass", "checked again: {line}");

    // serve: a test asked while the daemon goes away is `error`, a submission too, with a
    // null reward; the session stays open, and with the daemon back its submission is judged.
    let proxy = DaemonProxy::start(&socket, daemon_socket(), None);
    let env: Vec<(&str, &str)> = vec![("DOCKER_HOST", host.as_str())];
    let server = Server::start_with(&toml, &p.path().join("out"), &[], &env);
    let sid = server.open("r:pkg/text.py:count_vowels");
    let original = std::fs::read_to_string(p.path().join("repo/pkg/text.py")).unwrap();
    let put = server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/pkg/text.py"),
        Some(original.as_bytes()),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    drop(proxy);
    let (test, submit) = {
        let proxy = DaemonProxy::start(&socket, daemon_socket(), Some(b"r2e_batch"));
        let test = server
            .json("POST", &format!("/v1/sessions/{sid}/test"), json!({}))
            .json();
        let submit = server
            .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
            .json();
        assert!(proxy.gone(), "{test} {submit}");
        (test, submit)
    };
    assert_eq!(test["outcome"], "error", "{test}");
    assert_eq!(submit["outcome"], "error", "{submit}");
    assert_eq!(submit["reward"], Value::Null, "{submit}");
    let _proxy = DaemonProxy::start(&socket, daemon_socket(), None);
    let submit = server
        .json("POST", &format!("/v1/sessions/{sid}/submit"), json!({}))
        .json();
    assert_eq!(
        (submit["outcome"].as_str(), submit["reward"].as_f64()),
        (Some("pass"), Some(1.0)),
        "not cached: {submit}"
    );
}
