//! `r2e serve` driven over HTTP on loopback, for the tests of the server and of its Python
//! client: a started server (killed when dropped), a one-request HTTP/1.1 client, the fixture
//! dataset they serve (built once per test run, [`seed`]; each test process works on its own
//! copy, and each test serves its own output of it) and `python` running the client's scripts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::calc::{calc_clamp, calc_scale};

/// A running `r2e serve`, killed when dropped.
pub struct Server {
    child: Child,
    pub addr: String,
    pub log: Arc<Mutex<String>>,
    pub output: PathBuf,
}

impl Server {
    /// Starts `r2e serve -p PIPELINE --addr 127.0.0.1:0 ARGS` whose output is `output`; waits
    /// until it listens.
    pub fn start_with(
        pipeline: &Path,
        output: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_r2e"))
            .args(["serve", "-p"])
            .arg(pipeline)
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let seen = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
                }
                seen.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the server did not start: {}", log.lock().unwrap()));
        Server {
            child,
            addr,
            log,
            output: output.to_path_buf(),
        }
    }

    /// Stops the server as a user would (SIGTERM) and waits for it: all it said.
    pub fn stop(&mut self) -> String {
        // SAFETY: signals the server this test started, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        // The reader thread takes the last lines.
        std::thread::sleep(Duration::from_millis(200));
        self.log.lock().unwrap().clone()
    }

    pub fn call(&self, method: &str, path: &str, body: Option<&[u8]>) -> Reply {
        self.call_with(method, path, None, body)
    }

    /// A request; a server that no longer answers fails the test with its log.
    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&[u8]>,
    ) -> Reply {
        try_http(&self.addr, method, path, token, body).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: the server does not answer ({e}); its log:\n{}",
                self.log.lock().unwrap()
            )
        })
    }

    pub fn json(&self, method: &str, path: &str, body: Value) -> Reply {
        self.call(method, path, Some(body.to_string().as_bytes()))
    }

    pub fn open(&self, instance: &str) -> String {
        let r = self.json("POST", "/v1/sessions", json!({ "instance": instance }));
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["session"].as_str().unwrap().to_owned()
    }

    pub fn trace(&self, sid: &str) -> Vec<Value> {
        super::jsonl(&self.output.join("traces").join(format!("{sid}.jsonl")))
    }

    pub fn workspaces(&self) -> Vec<String> {
        let store = self.output.with_file_name(format!(
            ".{}.r2e",
            self.output.file_name().unwrap().to_string_lossy()
        ));
        std::fs::read_dir(store.join("sessions"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// One HTTP/1.1 request on a new connection.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> Reply {
    try_http(addr, method, path, token, body).unwrap()
}

pub fn try_http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(300)))?;
    let body = body.unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(Reply {
        status,
        headers: head.to_owned(),
        body: body.to_owned(),
    })
}

// ---------------------------------------------------------------------------------------------
// The served fixture dataset
// ---------------------------------------------------------------------------------------------

/// The repository served: `calc/ops.py` with `clamp` and `scale`.
pub const FIXTURE: &str = concat!(
    "\n//- calc/__init__.py\n//- calc/ops.py\n",
    calc_clamp!(),
    "\n",
    calc_scale!()
);

/// The instance of `clamp`.
pub const CLAMP: &str = "calc:calc/ops.py:clamp";

/// The folder holding the repository and the shared cache: each test process's own copy (by
/// hard links) of the [`seed`], which a run builds once. The tests of `serve` and `gym` share
/// it; each names its own pipelines.
pub fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{}", std::process::id()));
        super::seed::remove(&dir);
        super::seed::copy_into(&seed(), &dir);
        dir
    })
}

/// The repository, the pipeline `base.toml`, its cache and its output `out-base`, built once
/// per test run ([`super::seed::seeded`]).
pub fn seed() -> PathBuf {
    super::seed::seeded(
        "serve",
        &format!("{FIXTURE}\n{}", pipeline_text("base", "")),
        |dir| {
            super::write_fixture(&dir.join("repo"), FIXTURE);
            write_pipeline(dir, "base", "");
            build(dir, "base");
        },
    )
}

/// A pipeline `NAME.toml` over the shared repository and cache; `serve` is more tables (a
/// `[sandbox]` of its own replaces the default one).
pub fn write_pipeline(dir: &Path, name: &str, serve: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, pipeline_text(name, serve)).unwrap();
    path
}

/// The text of [`write_pipeline`]'s `NAME.toml`.
fn pipeline_text(name: &str, serve: &str) -> String {
    let sandbox = if serve.contains("[sandbox]") {
        ""
    } else {
        "[sandbox]\nrun_timeout_seconds = 5\n\n"
    };
    format!(
        "version = 1\n[project]\nname = \"serve-test\"\noutput = \"out-{name}\"\ncache = \"cache\"\n\n\
         [[repo]]\npath = \"repo\"\nname = \"calc\"\n\n[env]\ninstaller = \"pip\"\n\n\
         [select]\nmin_branch_coverage = 0.0\n\n[extract]\nconnectivity = false\n\n\
         {sandbox}{serve}"
    )
}

/// `r2e build` of the pipeline `NAME.toml` in `dir`, offline; it must succeed.
pub fn build(dir: &Path, name: &str) {
    assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json", "-p"])
        .arg(dir.join(format!("{name}.toml")))
        .envs(super::offline_env())
        .timeout(Duration::from_secs(900))
        .assert()
        .success();
}

/// A pipeline of its own for one test (its output built from the shared cache), with `serve`
/// as its `[serve]` table.
pub fn dataset(name: &str, serve: &str) -> PathBuf {
    let dir = built();
    let pipeline = write_pipeline(dir, name, serve);
    let _ = std::fs::remove_dir_all(dir.join(format!("out-{name}")));
    build(dir, name);
    pipeline
}

/// A server of a pipeline of [`dataset`] (its output `out-NAME` beside it).
pub fn start(pipeline: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    let name = pipeline.file_stem().unwrap().to_string_lossy().into_owned();
    let output = pipeline.parent().unwrap().join(format!("out-{name}"));
    Server::start_with(pipeline, &output, args, env)
}

/// The text of the repository's file `rel`: the reference.
pub fn original(rel: &str) -> String {
    std::fs::read_to_string(built().join("repo").join(rel)).unwrap()
}

/// `python3` runs a script of the repository's Python client against a server.
pub fn python(args: &[&str]) -> (i32, String, String) {
    python_with(Path::new("python3"), args)
}

/// The interpreter `interpreter` runs `args` in the repository's folder: its exit code, stdout
/// and stderr.
pub fn python_with(interpreter: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(interpreter)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", interpreter.display()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A virtualenv with `pin` (and its dependencies) from the package index, made once in the
/// target folder's `name` and marked complete with the pin: its interpreter, or `None` with a
/// line saying why (a failure under `R2E_TEST_STRICT=1`).
pub fn pinned_venv(name: &str, pin: &str) -> Option<PathBuf> {
    let started = Instant::now();
    let mut installed = false;
    let mut why = None;
    let dir = super::provisioned(name, |dir| {
        let ready = dir.join("ready");
        if std::fs::read_to_string(&ready).ok().as_deref() == Some(pin) {
            return;
        }
        installed = true;
        let _ = std::fs::remove_file(&ready);
        let _ = std::fs::remove_dir_all(dir.join("venv"));
        match install(&dir.join("venv"), pin) {
            Ok(()) => std::fs::write(&ready, pin).unwrap(),
            Err(e) => why = Some(e),
        }
    });
    if let Some(why) = why {
        super::require(
            false,
            &format!("{pin} in a virtualenv ({why})"),
            "python3 with venv and pip, and the package index reachable; `.ci/run` has both",
        );
        return None;
    }
    eprintln!(
        "{pin}: {} in {:.1}s",
        if installed { "installed" } else { "cached" },
        started.elapsed().as_secs_f64()
    );
    Some(dir.join("venv").join("bin").join("python"))
}

/// `python3 -m venv VENV` and `pip install PIN` into it.
fn install(venv: &Path, pin: &str) -> Result<(), String> {
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv)
        .output()
        .map_err(|e| format!("python3 does not run: {e}"))?;
    if !made.status.success() {
        return Err(format!(
            "`python3 -m venv` failed: {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    let pip = Command::new(venv.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            pin,
        ])
        .output()
        .map_err(|e| format!("the virtualenv's python does not run: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "`pip install {pin}` failed: {}",
            String::from_utf8_lossy(&pip.stderr).trim()
        ));
    }
    Ok(())
}

/// Runs `script` with `python` and the arguments; it must exit 0: its last line, as JSON.
pub fn run_json(python: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["-c", script];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = python_with(python, &all);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let last = stdout.trim().lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}
