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

use crate::cache::{Cache, write_atomic};
use crate::config::{EnvConfig, Installer};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::sandbox::{Exit, Job, Limits, Outcome, Sandbox};
use crate::stages::checkout::Checkout;

/// Bump when the key or the way environments are built changes (see `docs/caching.md`).
const ENV_VERSION: u32 = 1;

/// What determines an environment.
#[derive(Serialize, Debug)]
pub struct EnvKey<'a> {
    pub version: u32,
    pub python_version: &'a str,
    pub declared: &'a [String],
    pub inferred: &'a [String],
    pub extra: &'a [String],
    pub installer: Installer,
    pub system_site_packages: bool,
    pub passthrough: &'a [(String, String)],
}

/// The result of building an environment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EnvOutcome {
    /// Everything installed.
    Ok,
    /// The environment works, but some packages did not install (listed in `failed_packages`).
    Partial,
    /// No usable environment.
    Failed,
}

/// A built environment, as stored next to it in the cache.
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
}

impl Interpreter {
    /// Asks the configured interpreter (the machine's own, trusted) for its version and its
    /// standard library's module names.
    pub fn probe(python: &str) -> Result<Interpreter> {
        let script = "import sys; print(sys.executable); print(sys.version.split()[0]); print(' '.join(sorted(sys.stdlib_module_names)))";
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
        Ok(Interpreter {
            executable,
            version,
            stdlib_modules,
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

/// Where environments live.
fn env_dir(cache: &Cache, key: &Hash) -> Result<PathBuf> {
    Ok(cache
        .dir(&format!("envs-v{ENV_VERSION}"))?
        .join(key.to_hex()))
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

/// Builds, or takes from the cache, the environment of one repository.
pub struct EnvBuilder<'a> {
    pub cache: &'a Cache,
    pub sandbox: &'a dyn Sandbox,
    pub cfg: &'a EnvConfig,
    pub interpreter: &'a Interpreter,
    /// The `uv` binary, when one is usable.
    pub uv: Option<PathBuf>,
}

/// Finds `uv` on the PATH or in the cache, or installs it into the cache from the package index.
pub fn find_or_install_uv(
    cache: &Cache,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
    cfg: &EnvConfig,
) -> Option<PathBuf> {
    if cfg.installer == Installer::Pip {
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
    let tools = cache.dir("tools-v1").ok()?;
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

impl EnvBuilder<'_> {
    /// The environment for a repository with these declared and inferred dependencies.
    pub fn build(&self, declared: &[String], inferred: &[String]) -> Result<Env> {
        let installer_name = if self.uv.is_some() { "uv" } else { "pip" };
        let key = Hash::of_key(&EnvKey {
            version: ENV_VERSION,
            python_version: &self.interpreter.version,
            declared,
            inferred,
            extra: &self.cfg.extra_packages,
            installer: self.cfg.installer,
            system_site_packages: self.cfg.system_site_packages,
            // Index settings decide what gets installed; certificates, proxies and timeouts do not.
            passthrough: &self
                .cfg
                .passthrough
                .iter()
                .filter(|(k, _)| k.contains("INDEX"))
                .cloned()
                .collect::<Vec<_>>(),
        });
        let dir = env_dir(self.cache, &key)?;
        let python = dir.join("venv").join("bin").join("python");
        if let Ok(bytes) = std::fs::read(dir.join("env.json"))
            && let Ok(record) = serde_json::from_slice::<EnvRecord>(&bytes)
        {
            return Ok(Env {
                record,
                python,
                cached: true,
            });
        }
        let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&tmp);
        fs_err::create_dir_all(tmp.join("scratch"))?;
        let venv = tmp.join("venv");
        let venv_python = venv.join("bin").join("python");
        let mut log = String::new();
        let mut failed = Vec::new();

        let run = |program: &Path, args: Vec<String>, log: &mut String| -> Result<Outcome> {
            let mut env = self.cfg.passthrough.clone();
            env.push(("UV_PYTHON_DOWNLOADS".into(), "never".into()));
            env.push(("UV_LINK_MODE".into(), "copy".into()));
            env.push(("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into()));
            env.push((
                "UV_CACHE_DIR".into(),
                self.cache.dir("uv-cache")?.to_string_lossy().into_owned(),
            ));
            env.push((
                "PIP_CACHE_DIR".into(),
                self.cache.dir("pip-cache")?.to_string_lossy().into_owned(),
            ));
            env.push(("VIRTUAL_ENV".into(), venv.to_string_lossy().into_owned()));
            let job = Job {
                program: program.to_path_buf(),
                args: args.clone(),
                env,
                scratch: tmp.join("scratch"),
                writable: vec![
                    tmp.clone(),
                    self.cache.dir("uv-cache")?,
                    self.cache.dir("pip-cache")?,
                ],
                network: true,
                limits: Limits {
                    wall_seconds: self.cfg.timeout_seconds,
                    cpu_seconds: self.cfg.timeout_seconds * 2,
                    memory_mib: 4096,
                    processes: 512,
                    file_size_mib: 2048,
                },
            };
            let out = self.sandbox.run(&job)?;
            log.push_str(&format!("$ {} {}\n", program.display(), args.join(" ")));
            log.push_str(&String::from_utf8_lossy(&out.stdout));
            log.push_str(&String::from_utf8_lossy(&out.stderr));
            log.push_str(&format!(
                "[{:?} in {:.1}s]\n",
                out.exit,
                out.duration.as_secs_f64()
            ));
            Ok(out)
        };
        let install = |packages: &[String], log: &mut String| -> Result<Outcome> {
            match &self.uv {
                Some(uv) => {
                    let mut args = vec![
                        "pip".into(),
                        "install".into(),
                        "--python".into(),
                        venv_python.to_string_lossy().into_owned(),
                    ];
                    args.extend(packages.iter().cloned());
                    run(uv, args, log)
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
                    run(&venv_python, args, log)
                }
            }
        };

        // 1. The environment itself.
        let created = match &self.uv {
            Some(uv) => {
                let mut args = vec![
                    "venv".to_string(),
                    "--no-python-downloads".into(),
                    "--python".into(),
                    self.interpreter.executable.to_string_lossy().into_owned(),
                ];
                if self.cfg.system_site_packages {
                    args.push("--system-site-packages".into());
                }
                args.push(venv.to_string_lossy().into_owned());
                run(uv, args, &mut log)?
            }
            None => {
                let mut args = vec!["-m".to_string(), "venv".into()];
                if self.cfg.system_site_packages {
                    args.push("--system-site-packages".into());
                }
                args.push(venv.to_string_lossy().into_owned());
                run(&self.interpreter.executable, args, &mut log)?
            }
        };
        let finish = |outcome: EnvOutcome,
                      failed: Vec<String>,
                      lock: Vec<String>,
                      log: String|
         -> Result<Env> {
            let record = EnvRecord {
                key: key.to_hex(),
                outcome,
                installer: installer_name.into(),
                python_version: self.interpreter.version.clone(),
                declared: declared.to_vec(),
                inferred: inferred.to_vec(),
                failed_packages: failed,
                lock_hash: Hash::of_bytes(lock.join("\n").as_bytes()).to_hex(),
                lock,
                log,
            };
            write_atomic(
                &tmp.join("env.json"),
                &serde_json::to_vec_pretty(&record).map_err(|e| Error::Internal(e.to_string()))?,
            )?;
            let _ = fs_err::remove_dir_all(tmp.join("scratch"));
            if dir.exists() {
                // Another build finished it first; use theirs.
                let _ = fs_err::remove_dir_all(&tmp);
            } else {
                fs_err::rename(&tmp, &dir)?;
            }
            Ok(Env {
                record,
                python: dir.join("venv").join("bin").join("python"),
                cached: false,
            })
        };
        if !created.success() {
            if transient(&created) {
                let _ = fs_err::remove_dir_all(&tmp);
                return Err(Error::env(format!(
                    "creating an environment failed for a reason that may pass:\n{log}"
                )));
            }
            return finish(EnvOutcome::Failed, vec![], vec![], log);
        }

        // 2. coverage, the extra packages, and the declared dependencies; one by one on failure.
        let mut wanted: Vec<String> = vec!["coverage".into()];
        wanted.extend(self.cfg.extra_packages.iter().cloned());
        wanted.extend(declared.iter().cloned());
        // Whether the package index answers at all: a failure while it does not may pass.
        let index_down = |log: &mut String| -> Result<bool> {
            if self
                .cfg
                .passthrough
                .iter()
                .any(|(k, _)| k == "PIP_NO_INDEX" || k == "UV_OFFLINE")
            {
                return Ok(false);
            }
            let url = self
                .cfg
                .passthrough
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
            let out = run(
                &self.interpreter.executable,
                vec!["-I".into(), "-c".into(), probe.into(), url],
                log,
            )?;
            Ok(out.exit == Exit::Code(3) || out.exit == Exit::Timeout)
        };
        let all = install(&wanted, &mut log)?;
        if !all.success() {
            if transient(&all) || index_down(&mut log)? {
                let _ = fs_err::remove_dir_all(&tmp);
                return Err(Error::env(format!(
                    "installing packages failed for a reason that may pass:\n{log}"
                )));
            }
            for package in &wanted {
                let one = install(std::slice::from_ref(package), &mut log)?;
                if !one.success() {
                    if transient(&one) {
                        let _ = fs_err::remove_dir_all(&tmp);
                        return Err(Error::env(format!(
                            "installing `{package}` failed for a reason that may pass:\n{log}"
                        )));
                    }
                    failed.push(package.clone());
                }
            }
        }

        // 3. Imported but undeclared third-party modules, as pipreqs would.
        if !inferred.is_empty() {
            let probe = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    try:\n        if importlib.util.find_spec(m) is None: print(m)\n    except Exception: print(m)";
            let mut args = vec!["-I".to_string(), "-c".into(), probe.into()];
            args.extend(inferred.iter().cloned());
            let missing = run(&venv_python, args, &mut log)?;
            for module in String::from_utf8_lossy(&missing.stdout).lines() {
                let dist = distribution_for(module)
                    .map(str::to_owned)
                    .unwrap_or_else(|| module.replace('_', "-"));
                if dist.is_empty() {
                    continue;
                }
                let one = install(std::slice::from_ref(&dist), &mut log)?;
                if !one.success() {
                    if transient(&one) {
                        let _ = fs_err::remove_dir_all(&tmp);
                        return Err(Error::env(format!(
                            "installing `{dist}` failed for a reason that may pass:\n{log}"
                        )));
                    }
                    failed.push(dist);
                }
            }
        }

        // 4. The lock.
        let freeze = match &self.uv {
            Some(uv) => run(
                uv,
                vec![
                    "pip".into(),
                    "freeze".into(),
                    "--python".into(),
                    venv_python.to_string_lossy().into_owned(),
                ],
                &mut log,
            )?,
            None => run(
                &venv_python,
                vec![
                    "-m".into(),
                    "pip".into(),
                    "freeze".into(),
                    "--disable-pip-version-check".into(),
                ],
                &mut log,
            )?,
        };
        let lock: Vec<String> = String::from_utf8_lossy(&freeze.stdout)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect();
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
        finish(outcome, failed, lock, log)
    }
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
