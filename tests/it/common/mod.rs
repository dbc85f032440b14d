//! Test fixtures: small multi-file Python packages written from one string, and helpers to build
//! them with r2e and read the outputs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use r2e_pipeline::engine::{self, BuildOptions};

use r2e_pipeline::stages::Stage;

pub mod calc;
pub mod cluster;
pub mod github;
pub mod hogs;
pub mod index;
pub mod registry;
pub mod seed;
pub mod serve;
pub mod server;
pub mod verdict;

/// Runs `cmd`, which must succeed; its stdout, which must be exactly one JSON object.
pub fn stdout_json(cmd: &mut assert_cmd::Command) -> serde_json::Value {
    let out = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("stdout is exactly one JSON object")
}

/// `r2e build PIPELINE --until slice --json`, which must succeed: its summary.
pub fn build_until_slice(pipeline: &Path) -> serde_json::Value {
    stdout_json(
        assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .arg("build")
            .arg(pipeline)
            .args(["--until", "slice", "--json"]),
    )
}

/// The records of a JSON-lines file (the file must exist).
pub fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes a fixture: `//- path` lines start files; the rest is their text (dedented).
pub fn write_fixture(root: &Path, spec: &str) {
    let mut current: Option<(String, String)> = None;
    let mut files = Vec::new();
    for line in spec.lines() {
        if let Some(path) = line.trim_start().strip_prefix("//- ") {
            files.extend(current.take());
            current = Some((path.trim().to_owned(), String::new()));
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    files.extend(current);
    for (path, text) in files {
        let full = root.join(&path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        // Dedented whole, string literals' lines too: they were indented with the fixture.
        std::fs::write(full, r2e_python::dedent(&text, &[])).unwrap();
    }
}

/// A temporary project: a repo folder `repo/` and a `pipeline.toml` beside it.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    pub fn new(spec: &str, extra_toml: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        write_fixture(&dir.path().join("repo"), spec);
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!(
                "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n{extra_toml}"
            ),
        )
        .unwrap();
        Project { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn pipeline(&self) -> PathBuf {
        self.dir.path().join("pipeline.toml")
    }

    pub fn write(&self, rel: &str, text: &str) {
        std::fs::write(
            self.dir.path().join("repo").join(rel),
            r2e_python::dedent(text, &[]),
        )
        .unwrap();
    }

    pub fn build(&self) -> r2e_core::records::Summary {
        let cfg = r2e_core::config::load(&self.pipeline()).unwrap();
        engine::build(
            &cfg,
            &BuildOptions {
                until: Stage::Slice,
                jobs: Some(2),
            },
        )
        .unwrap()
    }

    /// `functions.jsonl`, by id, each candidate's slice in full (see [`functions_in`]).
    pub fn functions(&self) -> BTreeMap<String, serde_json::Value> {
        functions_in(&self.path().join("out"))
    }
}

/// A dataset folder's `functions.jsonl`, by id, with each candidate's slice in full as the
/// dependency graph (`slices/REPO.jsonl`, read through `records::SliceGraph`) gives it:
/// `slice.functions`, `slice.globals` and `slice.unresolved` added to what the line holds.
pub fn functions_in(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let mut graphs: BTreeMap<String, r2e_core::records::SliceGraph> = BTreeMap::new();
    jsonl(&dir.join("functions.jsonl"))
        .into_iter()
        .map(|mut v| {
            if let Some(node) = v.pointer("/slice/node").and_then(|n| n.as_u64()) {
                let repo = v["repo"].as_str().unwrap().to_owned();
                let graph = graphs
                    .entry(repo.clone())
                    .or_insert_with(|| r2e_core::records::SliceGraph::read(dir, &repo).unwrap());
                let full = graph.slice(node as u32);
                let slice = v["slice"].as_object_mut().unwrap();
                slice.insert("functions".into(), full.functions.into());
                slice.insert("globals".into(), full.globals.into());
                slice.insert("unresolved".into(), full.unresolved.into());
            }
            (v["id"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

/// The `slice.functions` of a candidate (from [`functions_in`]), or panics with what there is.
pub fn slice_functions(f: &BTreeMap<String, serde_json::Value>, id: &str) -> Vec<String> {
    let row = f
        .get(id)
        .unwrap_or_else(|| panic!("no {id}; have {:?}", f.keys().collect::<Vec<_>>()));
    let slice = row
        .get("slice")
        .unwrap_or_else(|| panic!("{id} is not a candidate: {row}"));
    slice["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

pub fn slice_globals(f: &BTreeMap<String, serde_json::Value>, id: &str) -> Vec<String> {
    f[id]["slice"]["globals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Whether tests run strictly (`R2E_TEST_STRICT=1`, as `.ci/run` sets it): then a test that
/// cannot run here fails instead of skipping.
pub fn strict() -> bool {
    std::env::var("R2E_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Says in one line why a test cannot run here and how to make it run; returns whether it may
/// go on. Under `R2E_TEST_STRICT=1` a skip is a failure.
pub fn require(available: bool, missing: &str, how: &str) -> bool {
    if !available {
        if strict() {
            panic!(
                "cannot run: {missing} ({how}); R2E_TEST_STRICT=1 turns this skip into a failure"
            );
        }
        eprintln!("SKIPPED: {missing} ({how})");
    }
    available
}

/// A folder of wheels the offline tests install from instead of the package index: the pinned
/// coverage.py, downloaded once per machine from the package index (as r2e's own builds do)
/// into the target folder.
pub fn wheelhouse() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    // The pinned coverage.py every environment gets, and the build backend of the examples
    // (the project layer builds them as wheels).
    DIR.get_or_init(|| wheels("wheelhouse", &[r2e_exec::py::COVERAGE, SETUPTOOLS]))
}

/// The folder `name` in the target folder holding the wheels of `pins` (`NAME==VERSION`),
/// each downloaded once per machine from the package index.
pub fn wheels(name: &str, pins: &[&str]) -> PathBuf {
    provisioned(name, |dir| {
        for pin in pins {
            let (dist, version) = pin.split_once("==").unwrap();
            let have = std::fs::read_dir(dir).unwrap().flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(&format!("{dist}-{version}-")) && name.ends_with(".whl")
            });
            if !have {
                pip("download", &["--only-binary=:all:", "--dest"], dir, pin);
            }
        }
    })
}

/// The folder `name` in the target folder, made and held locked (against other test
/// processes) while `fill` provisions it.
pub fn provisioned(name: &str, fill: impl FnOnce(&Path)) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    fill(&dir);
    dir
}

/// `python3 -m pip COMMAND --quiet --no-deps OPTIONS… DIR PIN` (the last option names `dir`),
/// which must provision `pin` from the package index into `dir`.
pub fn pip(command: &str, options: &[&str], dir: &Path, pin: &str) {
    let out = std::process::Command::new("python3")
        .args(["-m", "pip", command, "--quiet", "--no-deps"])
        .args(options)
        .arg(dir)
        .arg(pin)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "cannot provision `{pin}` for the tests: `python3 -m pip {command}` failed \
         (install pip for python3, e.g. `apt-get install python3-pip`, and reach the package index): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The setuptools the offline tests' wheelhouse holds, for projects built with it.
pub const SETUPTOOLS: &str = "setuptools==80.9.0";

/// Hypothesis and what it needs, for the property test of r2e's value code
/// (`crates/exec/src/py/tests/test_values.py`): only in [`test_python`], never in an
/// environment r2e builds.
pub const HYPOTHESIS: [&str; 2] = ["hypothesis==6.170.27", "sortedcontainers==2.4.0"];

/// An interpreter with the pinned coverage.py (from the [`wheelhouse`]) and [`HYPOTHESIS`],
/// for tests that run r2e's Python directly: a virtualenv made once per machine from `python3`.
pub fn test_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let wheels = wheelhouse();
        let hypothesis = self::wheels("hypothesis", &HYPOTHESIS);
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-venv");
        let python = venv.join("bin").join("python");
        let lock = std::fs::File::create(wheels.join(".lock")).unwrap();
        lock.lock().unwrap();
        // The marker names what was installed: a venv from before a pin changed is made again.
        let ready = venv.join(".ready");
        let pins = format!("{} {}", r2e_exec::py::COVERAGE, HYPOTHESIS.join(" "));
        if std::fs::read_to_string(&ready).ok().as_deref() != Some(pins.as_str()) {
            let _ = std::fs::remove_dir_all(&venv);
            let run = |cmd: &mut std::process::Command| {
                let out = cmd.output().expect("runs");
                assert!(
                    out.status.success(),
                    "cannot make the test interpreter (needs python3 with venv and pip): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            };
            run(std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv));
            run(std::process::Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-index",
                    "--find-links",
                ])
                .arg(wheels)
                .arg("--find-links")
                .arg(&hypothesis)
                .arg(r2e_exec::py::COVERAGE)
                .args(HYPOTHESIS));
            std::fs::write(&ready, &pins).unwrap();
        }
        python
    })
}

/// The environment variables that make r2e's pip install from the [`wheelhouse`] only.
pub fn offline_env() -> [(&'static str, String); 2] {
    offline_env_with(&[])
}

/// Like [`offline_env`], with more folders of wheels beside the [`wheelhouse`].
pub fn offline_env_with(more: &[&Path]) -> [(&'static str, String); 2] {
    let mut links = wheelhouse().to_string_lossy().into_owned();
    for dir in more {
        links = format!("{links} {}", dir.display());
    }
    [("PIP_NO_INDEX", "1".to_owned()), ("PIP_FIND_LINKS", links)]
}

/// `r2e build --json` in `dir`, offline (environments from the [`wheelhouse`], with the
/// pipelines' `installer = "pip"`), which must succeed: its summary.
pub fn offline_build(dir: &Path) -> serde_json::Value {
    offline_build_logged(dir).0
}

/// Like [`offline_build`], with what the build said on stderr.
pub fn offline_build_logged(dir: &Path) -> (serde_json::Value, String) {
    offline_build_with(dir, &[])
}

/// Like [`offline_build_logged`], with more folders of wheels beside the [`wheelhouse`].
pub fn offline_build_with(dir: &Path, wheels: &[&Path]) -> (serde_json::Value, String) {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json"])
        .current_dir(dir)
        .envs(offline_env_with(wheels))
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success()
        .get_output()
        .clone();
    (
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How many tests a Python `unittest` run reports on its stderr (`Ran N tests`); 0 when none.
pub fn unittest_ran(stderr: &str) -> u32 {
    stderr
        .lines()
        .find(|l| l.starts_with("Ran "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Whether the tests run as root (some probes need it: files in `/root`, a tmpfs).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A small tmpfs mounted on a folder for the length of a test (root only): a disk that fills up.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(ok.success(), "cannot mount a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Whether `needle` occurs in any file under `dir` (symlinks not followed).
pub fn found_under(dir: &Path, needle: &[u8]) -> Option<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .find(|e| {
            std::fs::read(e.path()).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        })
        .map(|e| e.into_path())
}

/// A marker file with a unique secret in it, removed when dropped.
pub struct Marker {
    pub path: PathBuf,
    pub secret: String,
}

impl Marker {
    /// The secret names the process, a count of the markers it made (its tests share it: two
    /// of them may write into `/root` in the same nanosecond) and the time.
    pub fn new(dir: &Path) -> Marker {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let secret = format!(
            "r2e-secret-{}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        std::fs::create_dir_all(dir).unwrap();
        // The file's name is not the secret: error messages may name the file.
        let path = dir.join(format!("{}.txt", secret.replace("secret", "marker")));
        std::fs::write(&path, &secret).unwrap();
        Marker { path, secret }
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The data files of a build's output, by name, for comparing two builds.
pub fn data_files(out: &Path) -> BTreeMap<String, String> {
    let graphs = std::fs::read_dir(out.join("slices"))
        .into_iter()
        .flatten()
        .map(|e| format!("slices/{}", e.unwrap().file_name().to_string_lossy()));
    [
        "functions.jsonl",
        "harnesses.jsonl",
        "dataset.jsonl",
        "manifest.json",
    ]
    .map(String::from)
    .into_iter()
    .chain(graphs)
    .map(|name| {
        let text = std::fs::read_to_string(out.join(&name)).unwrap_or_default();
        (name, text)
    })
    .collect()
}

/// The machine's Docker daemon, or `None` with a line saying why (a failure under
/// `R2E_TEST_STRICT=1`, as `.ci/run` sets it, which starts a daemon where none runs).
pub fn docker() -> Option<r2e_exec::sandbox::docker::Docker> {
    let found = r2e_exec::sandbox::docker::connect();
    let why = found
        .as_ref()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    require(
        found.is_ok(),
        &format!("a Docker daemon ({why})"),
        "install Docker Engine and start it; `.ci/run` does",
    )
    .then(|| found.unwrap())
}

/// `git -C REPO ARGS…` as author and committer `t`, at `date` (both dates) when given, which
/// must succeed: its stdout, trimmed.
pub fn git(repo: &Path, date: Option<&str>, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t");
    if let Some(date) = date {
        cmd.env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The arguments of `python3` that run moto's S3 server on `host:port` one request at a time.
/// Its threaded server (`python3 -m moto.server`) checks `If-None-Match: *` and stores the
/// object in two steps with no lock between them, so two racing create-only writes could both
/// succeed there; S3 decides them atomically, and serving one request at a time does too.
pub fn moto_server_args(host: &str, port: u16) -> Vec<String> {
    let script = "import sys\n\
        from werkzeug.serving import run_simple\n\
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app\n\
        run_simple(sys.argv[1], int(sys.argv[2]), DomainDispatcherApplication(create_backend_app), threaded=False)\n";
    vec![
        "-c".to_owned(),
        script.to_owned(),
        host.to_owned(),
        port.to_string(),
    ]
}

/// Creates `bucket` on moto's server at `addr` (`HOST:PORT`; it takes an unsigned
/// `PUT /BUCKET`).
pub fn moto_create_bucket(addr: &str, bucket: &str) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.split_whitespace().nth(1) == Some("200"),
        "moto did not create the bucket `{bucket}`: {answer}"
    );
}

/// The expensive actions (environments, generation, validation, checks) a build's trace in `dir`
/// (its `build.*` file) says it started: none, when every result came from a store.
pub fn expensive_actions_started(dir: &Path) -> Vec<serde_json::Value> {
    let trace = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("build."))
        .map(|e| jsonl(&e.path()))
        .unwrap();
    let expensive = [
        "envs-",
        "actions/generate-",
        "actions/validate-",
        "actions/check-",
    ];
    trace
        .into_iter()
        .filter(|l| l["event"] == "started")
        .filter(|l| {
            let b = l["bucket"].as_str().unwrap();
            expensive.iter().any(|p| b.starts_with(p))
        })
        .collect()
}
