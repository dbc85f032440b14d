//! Stage `env`: one isolated Python environment per (repository dependencies, environment
//! settings), shared by every function of the repository.
//!
//! An environment is keyed on what determines it: the interpreter's version, the dependencies the
//! repository declares (`requirements*.txt`, `pyproject.toml`, `setup.cfg`, `setup.py`), the
//! third-party modules its code imports, and the `[env]` settings (including index and
//! certificate variables). Never on the repository's source: the repository's own code is made
//! importable from its checkout at run time, so editing a function never rebuilds an
//! environment. Installation runs in the sandbox, with the network allowed there and only there.
//! It uses `uv` when available (installing it from the package index into the cache if need be),
//! else `python -m venv` and pip; `uv` is never allowed to download a Python.
//!
//! A failed installation is data: its log is kept and the build goes on. A transient failure
//! (the index unreachable, a timeout) is never stored, so the next build tries again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cache::{ActionKey, Bucket, Cache, entry, write_atomic, write_if_changed};
use crate::config::{Config, EnvConfig, Installer as ConfiguredInstaller};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::keys::{EnvKey, InstallerId};
pub use crate::records::EnvOutcome;
use crate::records::{EnvLine, FailureRecord, StageCounts};
use crate::sandbox::{Exit, Job, Limits, Outcome, Sandbox};
use crate::stages::checkout::Checkout;

/// A built environment, as sealed in its folder in the cache.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnvRecord {
    pub key: String,
    pub outcome: EnvOutcome,
    pub installer: String,
    pub python_version: String,
    pub declared: Vec<String>,
    pub inferred: Vec<String>,
    pub failed_packages: Vec<String>,
    /// `pip freeze` of the environment: its lock.
    pub lock: Vec<String>,
    pub lock_hash: String,
    pub log: String,
}

/// An environment ready for use.
#[derive(Clone, Debug)]
pub struct Env {
    pub record: EnvRecord,
    /// The environment's interpreter.
    pub python: PathBuf,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// Facts about the machine's interpreter, asked once per build.
#[derive(Clone, Debug)]
pub struct Interpreter {
    pub executable: PathBuf,
    pub version: String,
    pub stdlib_modules: BTreeSet<String>,
    /// The version of the pip its `venv` puts into new environments (empty without `ensurepip`).
    pub bundled_pip: String,
}

impl Interpreter {
    /// Asks the configured interpreter (the machine's own, trusted) for its version and its
    /// standard library's module names.
    pub fn probe(python: &str) -> Result<Interpreter> {
        let script = "import sys; print(sys.executable); print(sys.version.split()[0]); print(' '.join(sorted(sys.stdlib_module_names)))\ntry:\n    import ensurepip; print(ensurepip.version())\nexcept Exception:\n    print()";
        let out = std::process::Command::new(python)
            .args(["-I", "-c", script])
            .output()
            .map_err(|e| {
                Error::env(format!("cannot run the Python interpreter `{python}`: {e}"))
            })?;
        if !out.status.success() {
            return Err(Error::env(format!(
                "the Python interpreter `{python}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let executable = PathBuf::from(lines.next().unwrap_or_default());
        let version = lines.next().unwrap_or_default().to_owned();
        let mut stdlib_modules: BTreeSet<String> = lines
            .next()
            .unwrap_or_default()
            .split(' ')
            .map(str::to_owned)
            .collect();
        stdlib_modules.insert("__future__".into());
        let bundled_pip = lines.next().unwrap_or_default().trim().to_owned();
        Ok(Interpreter {
            executable,
            version,
            stdlib_modules,
            bundled_pip,
        })
    }
}

/// The dependencies a repository declares, normalized and sorted.
pub fn declared_dependencies(
    checkout: &Checkout,
    sandbox: &dyn Sandbox,
    python: &Path,
    scratch: &Path,
) -> Vec<String> {
    let mut deps = BTreeSet::new();
    for name in crate::stages::checkout::DECLARATIONS
        .iter()
        .filter(|n| n.ends_with(".txt"))
    {
        if let Some(text) = checkout.read_any(name) {
            deps.extend(requirement_lines(&String::from_utf8_lossy(&text)));
        }
    }
    if let Some(text) = checkout.read_any("pyproject.toml")
        && let Ok(doc) = String::from_utf8_lossy(&text).parse::<toml::Table>()
    {
        if let Some(list) = doc
            .get("project")
            .and_then(|p| p.get("dependencies"))
            .and_then(|d| d.as_array())
        {
            deps.extend(
                list.iter()
                    .filter_map(|v| v.as_str())
                    .map(normalize_requirement),
            );
        }
        if let Some(table) = doc
            .get("tool")
            .and_then(|t| t.get("poetry"))
            .and_then(|p| p.get("dependencies"))
            .and_then(|d| d.as_table())
        {
            deps.extend(
                table
                    .keys()
                    .filter(|k| k.as_str() != "python")
                    .map(|k| normalize_requirement(k)),
            );
        }
    }
    if let Some(text) = checkout.read_any("setup.cfg") {
        deps.extend(setup_cfg_requires(&String::from_utf8_lossy(&text)));
    }
    if let Some(text) = checkout.read_any("setup.py") {
        deps.extend(setup_py_requires(&text, sandbox, python, scratch));
    }
    deps.into_iter().filter(|d| !d.is_empty()).collect()
}

fn normalize_requirement(req: &str) -> String {
    req.split('#').next().unwrap_or_default().trim().to_owned()
}

fn requirement_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(normalize_requirement)
        .filter(|l| {
            !l.is_empty() && !l.starts_with('-') && !l.starts_with('.') && !l.contains("://")
        })
        .collect()
}

fn setup_cfg_requires(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_options = false;
    let mut in_key = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_options = trimmed == "[options]";
            in_key = false;
            continue;
        }
        if !in_options {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("install_requires") {
            in_key = true;
            let value = rest.trim_start().trim_start_matches(['=', ':']).trim();
            out.extend(
                value
                    .split(';')
                    .next()
                    .filter(|v| !v.is_empty())
                    .map(normalize_requirement),
            );
            continue;
        }
        if in_key {
            if line.starts_with([' ', '\t']) && !trimmed.is_empty() {
                out.push(normalize_requirement(trimmed));
            } else if !trimmed.is_empty() {
                in_key = false;
            }
        }
    }
    out
}

/// `install_requires=[...]` of a `setup.py`, read with Python's `ast` in the sandbox (the file is
/// parsed, never run).
fn setup_py_requires(
    text: &[u8],
    sandbox: &dyn Sandbox,
    python: &Path,
    scratch: &Path,
) -> Vec<String> {
    let script = r#"
import ast, json, sys
tree = ast.parse(open(sys.argv[1], 'rb').read())
found = []
for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == 'install_requires':
        try:
            found.extend(str(x) for x in ast.literal_eval(node.value))
        except Exception:
            pass
print(json.dumps(found))
"#;
    let _ = fs_err::create_dir_all(scratch);
    if write_atomic(&scratch.join("setup_probe.py"), text).is_err() {
        return Vec::new();
    }
    let job = Job {
        program: python.to_path_buf(),
        args: vec![
            "-I".into(),
            "-c".into(),
            script.into(),
            "setup_probe.py".into(),
        ],
        env: vec![],
        scratch: scratch.to_path_buf(),
        writable: vec![],
        network: false,
        limits: Limits {
            wall_seconds: 30,
            ..Limits::default()
        },
    };
    match sandbox.run(&job) {
        Ok(out) if out.success() => serde_json::from_slice::<Vec<String>>(&out.stdout)
            .unwrap_or_default()
            .iter()
            .map(|r| normalize_requirement(r))
            .collect(),
        _ => Vec::new(),
    }
}

/// The distribution that provides an import name, where it differs from the name.
pub fn distribution_for(module: &str) -> Option<&'static str> {
    const KNOWN: &[(&str, &str)] = &[
        ("yaml", "PyYAML"),
        ("sklearn", "scikit-learn"),
        ("skimage", "scikit-image"),
        ("PIL", "Pillow"),
        ("cv2", "opencv-python-headless"),
        ("bs4", "beautifulsoup4"),
        ("dateutil", "python-dateutil"),
        ("attr", "attrs"),
        ("Crypto", "pycryptodome"),
        ("OpenSSL", "pyOpenSSL"),
        ("jwt", "PyJWT"),
        ("dotenv", "python-dotenv"),
        ("serial", "pyserial"),
        ("git", "GitPython"),
        ("fitz", "PyMuPDF"),
        ("docx", "python-docx"),
        ("pptx", "python-pptx"),
        ("Levenshtein", "python-Levenshtein"),
        ("MySQLdb", "mysqlclient"),
        ("psycopg2", "psycopg2-binary"),
        ("zmq", "pyzmq"),
        ("magic", "python-magic"),
        ("pkg_resources", "setuptools"),
        ("google", "protobuf"),
        ("jose", "python-jose"),
        ("multipart", "python-multipart"),
        ("slugify", "python-slugify"),
        ("Bio", "biopython"),
        ("nacl", "PyNaCl"),
        ("win32api", ""),
        ("win32con", ""),
        ("_winreg", ""),
    ];
    KNOWN.iter().find(|(m, _)| *m == module).map(|(_, d)| *d)
}

/// Whether an installer's output says the failure may pass (network, index, timeouts).
fn transient(outcome: &Outcome) -> bool {
    if outcome.exit == Exit::Timeout {
        return true;
    }
    let text = String::from_utf8_lossy(&outcome.stderr).to_lowercase()
        + &String::from_utf8_lossy(&outcome.stdout).to_lowercase();
    [
        "failed to connect",
        "connection refused",
        "connection reset",
        "network is unreachable",
        "temporary failure in name resolution",
        "name or service not known",
        "timed out",
        "429",
        "503 service unavailable",
        "502 bad gateway",
        "max retries exceeded",
        "failed to fetch",
        "dns error",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// The pinned coverage.py every environment gets, so that coverage means the same everywhere.
pub const COVERAGE: &str = "coverage==7.17.3";

/// The installer that builds environments: `uv` (its binary) or the environment's own pip.
#[derive(Clone, Debug)]
pub struct Installer {
    pub uv: Option<PathBuf>,
    pub id: InstallerId,
}

impl Installer {
    /// The installer the configuration asks for and the machine has: `uv` on the `PATH` or
    /// installed into the cache from the package index (for `auto` and `uv`), else pip, with
    /// its version.
    pub fn find(
        cache: &Cache,
        sandbox: &dyn Sandbox,
        interpreter: &Interpreter,
        cfg: &EnvConfig,
    ) -> Result<Installer> {
        let uv = find_or_install_uv(cache, sandbox, interpreter, cfg);
        if uv.is_none() && cfg.installer == ConfiguredInstaller::Uv {
            return Err(Error::env(
                "`installer = \"uv\"` but `uv` is neither on the PATH nor installable from the package index",
            ));
        }
        let id = match &uv {
            Some(path) => {
                let out = std::process::Command::new(path)
                    .arg("--version")
                    .output()
                    .map_err(|e| Error::env(format!("cannot run `{}`: {e}", path.display())))?;
                let text = String::from_utf8_lossy(&out.stdout);
                InstallerId {
                    name: "uv".into(),
                    version: text
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or_default()
                        .to_owned(),
                }
            }
            None => InstallerId {
                name: "pip".into(),
                version: interpreter.bundled_pip.clone(),
            },
        };
        Ok(Installer { uv, id })
    }
}

/// Finds `uv` on the PATH or in the cache, or installs it into the cache from the package index.
pub fn find_or_install_uv(
    cache: &Cache,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
    cfg: &EnvConfig,
) -> Option<PathBuf> {
    if cfg.installer == ConfiguredInstaller::Pip {
        return None;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("uv"))
        .find(|p| p.is_file());
    if on_path.is_some() {
        return on_path;
    }
    let tools = cache.dir(Bucket::Tools).ok()?;
    let uv = tools.join("uv").join("bin").join("uv");
    if uv.is_file() {
        return Some(uv);
    }
    let tmp = tools.join(format!("uv.tmp{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&tmp);
    let scratch = tools.join(format!("scratch{}", std::process::id()));
    let _ = fs_err::create_dir_all(&scratch);
    let python = tmp.join("bin").join("python");
    let steps = [
        (
            interpreter.executable.clone(),
            vec![
                "-m".to_string(),
                "venv".into(),
                tmp.to_string_lossy().into_owned(),
            ],
        ),
        (
            python,
            vec![
                "-m".into(),
                "pip".into(),
                "install".into(),
                "--quiet".into(),
                "--disable-pip-version-check".into(),
                "uv".into(),
            ],
        ),
    ];
    for (program, args) in steps {
        let job = Job {
            program,
            args,
            env: cfg.passthrough.clone(),
            scratch: scratch.clone(),
            writable: vec![tools.clone()],
            network: true,
            limits: Limits {
                wall_seconds: 300,
                memory_mib: 2048,
                processes: 256,
                cpu_seconds: 600,
                file_size_mib: 512,
            },
        };
        match sandbox.run(&job) {
            Ok(o) if o.success() => {}
            _ => {
                let _ = fs_err::remove_dir_all(&tmp);
                let _ = fs_err::remove_dir_all(&scratch);
                return None;
            }
        }
    }
    let _ = fs_err::remove_dir_all(&scratch);
    fs_err::rename(&tmp, tools.join("uv")).ok()?;
    uv.is_file().then_some(uv)
}

/// The limits of an installation step.
fn install_limits(cfg: &EnvConfig) -> Limits {
    Limits {
        wall_seconds: cfg.timeout_seconds,
        cpu_seconds: cfg.timeout_seconds * 2,
        memory_mib: 4096,
        processes: 512,
        file_size_mib: 2048,
    }
}

/// Builds, or takes from the cache, the environment of one repository.
pub struct EnvBuilder<'a> {
    pub cache: &'a Cache,
    pub sandbox: &'a dyn Sandbox,
    pub cfg: &'a EnvConfig,
    pub interpreter: &'a Interpreter,
    pub installer: &'a Installer,
}

/// The record an environment's folder holds, sealed with its key.
const RECORD: &str = "record";

/// One environment being built in a temporary folder: its log and the steps run so far.
struct Building<'a> {
    builder: &'a EnvBuilder<'a>,
    tmp: PathBuf,
    venv: PathBuf,
    python: PathBuf,
    log: String,
}

/// Why a build stopped before its end: a failure that may pass (never stored), or a finished
/// environment (possibly failed, which is stored).
enum Stop {
    Transient(String),
    Error(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

impl Building<'_> {
    /// Runs one installation step in the sandbox (network on), appending to the log.
    fn run(&mut self, program: &Path, args: Vec<String>) -> Result<Outcome> {
        let b = self.builder;
        let mut env = b.cfg.passthrough.clone();
        env.push(("UV_PYTHON_DOWNLOADS".into(), "never".into()));
        env.push(("UV_LINK_MODE".into(), "copy".into()));
        env.push(("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into()));
        let uv_cache = b.cache.dir(Bucket::UvCache)?;
        let pip_cache = b.cache.dir(Bucket::PipCache)?;
        env.push((
            "UV_CACHE_DIR".into(),
            uv_cache.to_string_lossy().into_owned(),
        ));
        env.push((
            "PIP_CACHE_DIR".into(),
            pip_cache.to_string_lossy().into_owned(),
        ));
        env.push((
            "VIRTUAL_ENV".into(),
            self.venv.to_string_lossy().into_owned(),
        ));
        let job = Job {
            program: program.to_path_buf(),
            args: args.clone(),
            env,
            scratch: self.tmp.join("scratch"),
            writable: vec![self.tmp.clone(), uv_cache, pip_cache],
            network: true,
            limits: install_limits(b.cfg),
        };
        let out = b.sandbox.run(&job)?;
        self.log
            .push_str(&format!("$ {} {}\n", program.display(), args.join(" ")));
        self.log.push_str(&String::from_utf8_lossy(&out.stdout));
        self.log.push_str(&String::from_utf8_lossy(&out.stderr));
        self.log.push_str(&format!(
            "[{:?} in {:.1}s]\n",
            out.exit,
            out.duration.as_secs_f64()
        ));
        Ok(out)
    }

    /// Installs packages into the environment.
    fn install(&mut self, packages: &[String]) -> Result<Outcome> {
        let python = self.python.to_string_lossy().into_owned();
        match self.builder.installer.uv.clone() {
            Some(uv) => {
                let mut args = vec!["pip".into(), "install".into(), "--python".into(), python];
                args.extend(packages.iter().cloned());
                self.run(&uv, args)
            }
            None => {
                let mut args = vec![
                    "-m".into(),
                    "pip".into(),
                    "install".into(),
                    "--disable-pip-version-check".into(),
                    "--no-input".into(),
                ];
                args.extend(packages.iter().cloned());
                let venv_python = self.python.clone();
                self.run(&venv_python, args)
            }
        }
    }

    /// Creates the environment itself.
    fn create(&mut self) -> Result<Outcome> {
        let b = self.builder;
        let venv = self.venv.to_string_lossy().into_owned();
        match b.installer.uv.clone() {
            Some(uv) => {
                let mut args = vec![
                    "venv".to_string(),
                    "--no-python-downloads".into(),
                    "--python".into(),
                    b.interpreter.executable.to_string_lossy().into_owned(),
                ];
                if b.cfg.system_site_packages {
                    args.push("--system-site-packages".into());
                }
                args.push(venv);
                self.run(&uv, args)
            }
            None => {
                let mut args = vec!["-m".to_string(), "venv".into()];
                if b.cfg.system_site_packages {
                    args.push("--system-site-packages".into());
                }
                args.push(venv);
                let python = b.interpreter.executable.clone();
                self.run(&python, args)
            }
        }
    }

    /// Whether the package index answers at all: a failure while it does not may pass.
    fn index_down(&mut self) -> Result<bool> {
        let passthrough = &self.builder.cfg.passthrough;
        if passthrough
            .iter()
            .any(|(k, _)| k == "PIP_NO_INDEX" || k == "UV_OFFLINE")
        {
            return Ok(false);
        }
        let url = passthrough
            .iter()
            .find(|(k, _)| {
                matches!(
                    k.as_str(),
                    "UV_INDEX_URL" | "UV_DEFAULT_INDEX" | "PIP_INDEX_URL"
                )
            })
            .map_or_else(
                || "https://pypi.org/simple/".to_string(),
                |(_, v)| v.clone(),
            );
        let probe = "import sys, urllib.request\ntry:\n    urllib.request.urlopen(sys.argv[1], timeout=15).read(1)\nexcept urllib.error.HTTPError:\n    pass\nexcept Exception as e:\n    print('unreachable:', e); sys.exit(3)";
        let python = self.builder.interpreter.executable.clone();
        let out = self.run(&python, vec!["-I".into(), "-c".into(), probe.into(), url])?;
        Ok(out.exit == Exit::Code(3) || out.exit == Exit::Timeout)
    }

    /// Installs one package; returns whether it installed, or stops on a failure that may pass.
    fn install_one(&mut self, package: &str) -> std::result::Result<bool, Stop> {
        let one = self.install(&[package.to_owned()])?;
        if one.success() {
            return Ok(true);
        }
        if transient(&one) {
            return Err(Stop::Transient(format!(
                "installing `{package}` failed for a reason that may pass"
            )));
        }
        Ok(false)
    }

    /// coverage, the extra packages and the declared dependencies: all at once, or one by one
    /// when that fails. Returns those that failed.
    fn install_declared(&mut self, declared: &[String]) -> std::result::Result<Vec<String>, Stop> {
        let mut wanted: Vec<String> = vec![COVERAGE.into()];
        wanted.extend(self.builder.cfg.extra_packages.iter().cloned());
        wanted.extend(declared.iter().cloned());
        let all = self.install(&wanted)?;
        let mut failed = Vec::new();
        if !all.success() {
            if transient(&all) || self.index_down()? {
                return Err(Stop::Transient(
                    "installing packages failed for a reason that may pass".into(),
                ));
            }
            for package in &wanted {
                if !self.install_one(package)? {
                    failed.push(package.clone());
                }
            }
        }
        Ok(failed)
    }

    /// Imported but undeclared third-party modules, as pipreqs would. Returns those that failed.
    fn install_inferred(&mut self, inferred: &[String]) -> std::result::Result<Vec<String>, Stop> {
        let mut failed = Vec::new();
        if inferred.is_empty() {
            return Ok(failed);
        }
        let probe = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    try:\n        if importlib.util.find_spec(m) is None: print(m)\n    except Exception: print(m)";
        let mut args = vec!["-I".to_string(), "-c".into(), probe.into()];
        args.extend(inferred.iter().cloned());
        let python = self.python.clone();
        let missing = self.run(&python, args)?;
        for module in String::from_utf8_lossy(&missing.stdout).lines() {
            let dist = distribution_for(module)
                .map(str::to_owned)
                .unwrap_or_else(|| module.replace('_', "-"));
            if !dist.is_empty() && !self.install_one(&dist)? {
                failed.push(dist);
            }
        }
        Ok(failed)
    }

    /// The environment's lock: `pip freeze`.
    fn freeze(&mut self) -> Result<Vec<String>> {
        let python = self.python.to_string_lossy().into_owned();
        let out = match self.builder.installer.uv.clone() {
            Some(uv) => self.run(
                &uv,
                vec!["pip".into(), "freeze".into(), "--python".into(), python],
            )?,
            None => {
                let venv_python = self.python.clone();
                self.run(
                    &venv_python,
                    vec![
                        "-m".into(),
                        "pip".into(),
                        "freeze".into(),
                        "--disable-pip-version-check".into(),
                    ],
                )?
            }
        };
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect())
    }
}

impl EnvBuilder<'_> {
    /// What determines the environment of a repository with these dependencies.
    pub fn key(&self, declared: &[String], inferred: &[String]) -> EnvKey {
        EnvKey {
            python_version: self.interpreter.version.clone(),
            installer: self.installer.id.clone(),
            coverage: COVERAGE,
            declared: declared.to_vec(),
            inferred: inferred.to_vec(),
            extra: self.cfg.extra_packages.clone(),
            system_site_packages: self.cfg.system_site_packages,
            index: self
                .cfg
                .passthrough
                .iter()
                .filter(|(k, _)| k.contains("INDEX") || k.contains("FIND_LINKS"))
                .cloned()
                .collect(),
        }
    }

    /// The environment for a repository with these declared and inferred dependencies: from
    /// the cache when its sealed record verifies, else built in a temporary folder and moved in
    /// place whole.
    pub fn build(&self, declared: &[String], inferred: &[String]) -> Result<Env> {
        let key = self.key(declared, inferred);
        let hash = key.hash();
        let dir = self.cache.dir(Bucket::Envs)?.join(hash.to_hex());
        let python = dir.join("venv").join("bin").join("python");
        if let Ok(bytes) = std::fs::read(dir.join(RECORD)) {
            match entry::unseal::<EnvRecord>(&Bucket::Envs.folder(), hash, &bytes) {
                Ok(record) => {
                    return Ok(Env {
                        record,
                        python,
                        cached: true,
                    });
                }
                Err(why) => {
                    eprintln!(
                        "warning: environment `{}` has a damaged record ({why}); it is rebuilt",
                        dir.display()
                    );
                    fs_err::remove_dir_all(&dir)?;
                }
            }
        }
        let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&tmp);
        fs_err::create_dir_all(tmp.join("scratch"))?;
        let venv = tmp.join("venv");
        let mut b = Building {
            builder: self,
            python: venv.join("bin").join("python"),
            venv,
            tmp,
            log: String::new(),
        };
        let built = self.install_all(&mut b, declared, inferred);
        let (outcome, failed, lock) = match built {
            Ok(done) => done,
            Err(Stop::Error(e)) => {
                let _ = fs_err::remove_dir_all(&b.tmp);
                return Err(e);
            }
            Err(Stop::Transient(why)) => {
                let _ = fs_err::remove_dir_all(&b.tmp);
                return Err(Error::env(format!("{why}:\n{}", b.log)));
            }
        };
        let record = EnvRecord {
            key: hash.to_hex(),
            outcome,
            installer: self.installer.id.name.clone(),
            python_version: self.interpreter.version.clone(),
            declared: declared.to_vec(),
            inferred: inferred.to_vec(),
            failed_packages: failed,
            lock_hash: Hash::of_bytes(lock.join("\n").as_bytes()).to_hex(),
            lock,
            log: std::mem::take(&mut b.log),
        };
        write_atomic(
            &b.tmp.join(RECORD),
            &entry::seal(&Bucket::Envs.folder(), hash, &record),
        )?;
        let _ = fs_err::remove_dir_all(b.tmp.join("scratch"));
        if dir.exists() {
            // Another build finished it first; use theirs.
            let _ = fs_err::remove_dir_all(&b.tmp);
        } else {
            fs_err::rename(&b.tmp, &dir)?;
        }
        Ok(Env {
            record,
            python,
            cached: false,
        })
    }

    /// Every step of a build: the environment, its packages, its lock.
    fn install_all(
        &self,
        b: &mut Building,
        declared: &[String],
        inferred: &[String],
    ) -> std::result::Result<(EnvOutcome, Vec<String>, Vec<String>), Stop> {
        let created = b.create()?;
        if !created.success() {
            if transient(&created) {
                return Err(Stop::Transient(
                    "creating an environment failed for a reason that may pass".into(),
                ));
            }
            return Ok((EnvOutcome::Failed, Vec::new(), Vec::new()));
        }
        let mut failed = b.install_declared(declared)?;
        failed.extend(b.install_inferred(inferred)?);
        let lock = b.freeze()?;
        let coverage_ok = lock
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("coverage"));
        let outcome = if !coverage_ok {
            EnvOutcome::Failed
        } else if failed.is_empty() {
            EnvOutcome::Ok
        } else {
            EnvOutcome::Partial
        };
        Ok((outcome, failed, lock))
    }
}

/// What stage `env` made of every repository.
pub struct EnvStage {
    pub lines: Vec<EnvLine>,
    pub counts: StageCounts,
    pub envs: Envs,
    pub failures: Vec<FailureRecord>,
}

/// Stage `env`: an environment per repository, its log under `<output>/logs/`.
pub fn run(
    cfg: &Config,
    cache: &Cache,
    sandbox: &dyn Sandbox,
    repos: &[(Arc<Checkout>, Vec<String>)],
    output: &Path,
    progress: impl Fn(u64, &str) -> indicatif::ProgressBar,
) -> Result<EnvStage> {
    let interpreter = Interpreter::probe(&cfg.env.python)?;
    let installer = Installer::find(cache, sandbox, &interpreter, &cfg.env)?;
    let builder = EnvBuilder {
        cache,
        sandbox,
        cfg: &cfg.env,
        interpreter: &interpreter,
        installer: &installer,
    };
    let logs = output.join("logs");
    fs_err::create_dir_all(&logs)?;
    let mut stage = EnvStage {
        lines: Vec::new(),
        counts: StageCounts::default(),
        envs: Envs::new(),
        failures: Vec::new(),
    };
    let bar = progress(repos.len() as u64, "env");
    for (checkout, imports) in repos {
        bar.set_message(checkout.name.clone());
        let scratch = cache
            .dir(Bucket::Scratch)?
            .join(format!("env-{}", std::process::id()));
        let declared = declared_dependencies(checkout, sandbox, &interpreter.executable, &scratch);
        let _ = fs_err::remove_dir_all(&scratch);
        let inferred: Vec<String> = if cfg.env.infer_imports {
            imports
                .iter()
                .filter(|m| !interpreter.stdlib_modules.contains(*m) && !m.starts_with('_'))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        match builder.build(&declared, &inferred) {
            Ok(built) => {
                stage.counts.executed += u64::from(!built.cached);
                stage.counts.cached += u64::from(built.cached);
                let log = format!("logs/env-{}.log", checkout.name);
                write_if_changed(&output.join(&log), built.record.log.as_bytes())?;
                if built.record.outcome == EnvOutcome::Failed {
                    stage.counts.failed += 1;
                    stage.failures.push(FailureRecord {
                        repo: checkout.name.clone(),
                        path: None,
                        stage: "env".into(),
                        reason: "the environment could not be created".into(),
                        log: Some(log.clone()),
                    });
                }
                let r = &built.record;
                stage.lines.push(EnvLine {
                    repo: checkout.name.clone(),
                    env_key: r.key.clone(),
                    outcome: r.outcome,
                    installer: r.installer.clone(),
                    python_version: r.python_version.clone(),
                    declared: r.declared.clone(),
                    inferred: r.inferred.clone(),
                    failed_packages: r.failed_packages.clone(),
                    lock_hash: r.lock_hash.clone(),
                    lock: r.lock.clone(),
                    log,
                });
                stage.envs.insert(checkout.name.clone(), Arc::new(built));
            }
            Err(e) => {
                // Transient: reported, never cached; the next build tries again.
                stage.counts.failed += 1;
                stage.failures.push(FailureRecord {
                    repo: checkout.name.clone(),
                    path: None,
                    stage: "env".into(),
                    reason: e.to_string(),
                    log: None,
                });
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(stage)
}

/// The environment of a repository as a build recorded it in `envs.jsonl`, when it is still in
/// the cache: its interpreter.
pub fn python_of(cache: &Cache, line: &EnvLine) -> Option<PathBuf> {
    let python = cache
        .path(Bucket::Envs)
        .join(&line.env_key)
        .join("venv")
        .join("bin")
        .join("python");
    (cache
        .path(Bucket::Envs)
        .join(&line.env_key)
        .join(RECORD)
        .exists()
        && python.exists())
    .then_some(python)
}

/// Every environment of a build, by repository name.
pub type Envs = std::collections::BTreeMap<String, Arc<Env>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_read_without_running_code() {
        let cfg = "[metadata]\nname = x\n\n[options]\ninstall_requires =\n    requests>=2\n    numpy ; python_version > '3'\npackages = find:\n";
        assert_eq!(
            setup_cfg_requires(cfg),
            vec!["requests>=2", "numpy ; python_version > '3'"]
        );
        assert_eq!(
            requirement_lines("# c\nflask==2.0  # web\n-e .\n-r other.txt\n\nclick\n"),
            vec!["flask==2.0", "click"]
        );
        assert_eq!(distribution_for("yaml"), Some("PyYAML"));
        assert_eq!(distribution_for("numpy"), None);
    }
}
