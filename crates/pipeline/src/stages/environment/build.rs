//! Building one environment: the installer (`uv`, found or installed from the package index,
//! or pip), the steps (create, install the pinned coverage.py and the declarations, then the
//! inferred imports, then the lock), each in the sandbox with the network and nothing of the
//! machine but the interpreter, the build's own installer caches and the folder being built. A failure
//! that may pass (the network, the index, a full disk, no memory) is never stored.

use r2e_core::records::EnvOutcome;
use std::path::{Path, PathBuf};

use super::{Env, Interpreter, SealedEnv, archive, provider};
use r2e_core::cache::remote::{Event, Remote};
use r2e_core::cache::{ActionKey, Bucket, Cache, entry, write_atomic};
use r2e_core::config::{EnvConfig, Installer as ConfiguredInstaller};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::keys::{EnvKey, InstallerId};
use r2e_core::records::RejectedDistribution;
use r2e_exec::jobs::redact;
use r2e_exec::sandbox::{Exit, Job, Limits, Outcome, Sandbox};

/// Why an installer's failure may pass (the network, the index, a timeout, a full disk, no
/// memory), from its output; `None` when it is the repository's.
pub(super) fn transient(outcome: &Outcome) -> Option<&'static str> {
    if outcome.exit == Exit::Timeout {
        return Some("the installation timed out");
    }
    let text = String::from_utf8_lossy(&outcome.stderr).to_lowercase()
        + &String::from_utf8_lossy(&outcome.stdout).to_lowercase();
    const CAUSES: &[(&str, &str)] = &[
        ("no space left on device", "the disk is full"),
        ("[errno 28]", "the disk is full"),
        ("disk quota exceeded", "the disk quota is exceeded"),
        ("cannot allocate memory", "the machine is out of memory"),
        ("out of memory", "the machine is out of memory"),
        ("failed to connect", "the package index cannot be reached"),
        ("connection refused", "the package index cannot be reached"),
        ("connection reset", "the package index cannot be reached"),
        ("network is unreachable", "the network is unreachable"),
        (
            "temporary failure in name resolution",
            "names cannot be resolved",
        ),
        ("name or service not known", "names cannot be resolved"),
        ("dns error", "names cannot be resolved"),
        ("timed out", "the package index timed out"),
        // As an HTTP status only: a bare "429" is also in ports and versions.
        (
            "429 too many requests",
            "the package index refuses too many requests (429)",
        ),
        (
            "http error 429",
            "the package index refuses too many requests (429)",
        ),
        (
            "status code 429",
            "the package index refuses too many requests (429)",
        ),
        (
            "too many requests",
            "the package index refuses too many requests (429)",
        ),
        (
            "503 service unavailable",
            "the package index is unavailable (503)",
        ),
        ("502 bad gateway", "the package index is unavailable (502)"),
        (
            "max retries exceeded",
            "the package index cannot be reached",
        ),
        ("failed to fetch", "the package index cannot be reached"),
    ];
    CAUSES
        .iter()
        .find(|(needle, _)| text.contains(needle))
        .map(|(_, cause)| *cause)
}

use r2e_exec::py::COVERAGE;

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
        let installer = Installer::of(uv, interpreter)?;
        if let Some(instant) = &cfg.exclude_newer
            && installer.uv.is_none()
            && !pip_excludes_newer(&installer.id.version)
            && !no_index(cfg)
        {
            // Resolving without the pin would install whatever the index holds today: the
            // environments would drift from the ones the pin names, silently.
            let why = if cfg.installer == ConfiguredInstaller::Pip {
                "`installer = \"pip\"`: use `auto` or `uv`".to_owned()
            } else {
                format!(
                    "`uv` is neither on the PATH nor installable: put uv {} on the PATH",
                    uv_version()
                )
            };
            return Err(Error::env(format!(
                "`[env] exclude_newer = \"{instant}\"` needs uv (`--exclude-newer`) or pip 26 or \
                 newer (`--uploaded-prior-to`), but environments would be built with pip {} \
                 ({why})",
                installer.id.version,
            )));
        }
        Ok(installer)
    }

    /// The installer a build would use, without installing anything (`r2e status`): `None`
    /// when `installer = "uv"` and the build would first install it into the cache.
    pub fn find_installed(
        cache: &Cache,
        interpreter: &Interpreter,
        cfg: &EnvConfig,
    ) -> Option<Result<Installer>> {
        match find_uv(cache, cfg) {
            Some(uv) => Some(Installer::of(Some(uv), interpreter)),
            None if cfg.installer == ConfiguredInstaller::Uv => None,
            // `pip`, or `auto` with no `uv` to hand: pip, as a build falls back to when it
            // cannot install `uv` (one that can would use `uv`, another key).
            None => Some(Installer::of(None, interpreter)),
        }
    }

    fn of(uv: Option<PathBuf>, interpreter: &Interpreter) -> Result<Installer> {
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

/// One step an installer takes in an environment, with what it needs. [`Installer::command`]
/// says how `uv` and pip each run it: the one place the two differ.
pub(super) enum Step<'a> {
    /// Creates the environment `venv` from the configured interpreter `interpreter`.
    Create {
        interpreter: &'a Path,
        venv: &'a Path,
        system_site_packages: bool,
    },
    /// Installs `packages`, resolved with `pin` (`EnvBuilder::exclude_newer_args`).
    Install {
        pin: Vec<String>,
        packages: &'a [String],
    },
    /// Uninstalls the distribution `dist`.
    Uninstall { dist: &'a str },
    /// Lists the installed distributions (`pip freeze`).
    Freeze,
    /// Builds the project in `src` as a wheel into `dist`, its backend resolved with `pin`.
    BuildWheel {
        pin: Vec<String>,
        src: &'a Path,
        dist: &'a Path,
    },
    /// Installs `wheel`, without its dependencies, into the folder `site`.
    InstallWheel { wheel: &'a Path, site: &'a Path },
}

impl Installer {
    /// The program and the arguments that take `step` in the environment whose interpreter is
    /// `python`.
    pub(super) fn command(&self, step: Step, python: &Path) -> (PathBuf, Vec<String>) {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let words = |w: &[&str]| w.iter().map(|w| (*w).to_owned()).collect::<Vec<String>>();
        let Some(uv) = &self.uv else {
            let mut args = words(&["-m", "pip"]);
            match step {
                Step::Create {
                    interpreter,
                    venv,
                    system_site_packages,
                } => {
                    let mut args = words(&["-m", "venv"]);
                    if system_site_packages {
                        args.push("--system-site-packages".into());
                    }
                    args.push(text(venv));
                    return (interpreter.to_path_buf(), args);
                }
                Step::Install { pin, packages } => {
                    args.extend(words(&[
                        "install",
                        "--disable-pip-version-check",
                        "--no-input",
                    ]));
                    args.extend(pin);
                    args.extend(packages.iter().cloned());
                }
                Step::Uninstall { dist } => {
                    args.extend(words(&[
                        "uninstall",
                        "--yes",
                        "--disable-pip-version-check",
                    ]));
                    args.push(dist.to_owned());
                }
                Step::Freeze => args.extend(words(&["freeze", "--disable-pip-version-check"])),
                Step::BuildWheel { pin, src, dist } => {
                    args.extend(words(&[
                        "wheel",
                        "--no-deps",
                        "--no-input",
                        "--disable-pip-version-check",
                    ]));
                    args.extend(pin);
                    args.extend(["--wheel-dir".into(), text(dist), text(src)]);
                }
                Step::InstallWheel { wheel, site } => {
                    args.extend(words(&[
                        "install",
                        "--no-deps",
                        "--no-compile",
                        "--no-input",
                        "--disable-pip-version-check",
                        "--target",
                    ]));
                    args.extend([text(site), text(wheel)]);
                }
            }
            return (python.to_path_buf(), args);
        };
        let python = text(python);
        let args = match step {
            Step::Create {
                interpreter,
                venv,
                system_site_packages,
            } => {
                let mut args = words(&["venv", "--no-python-downloads", "--python"]);
                args.push(text(interpreter));
                if system_site_packages {
                    args.push("--system-site-packages".into());
                }
                args.push(text(venv));
                args
            }
            Step::Install { pin, packages } => {
                let mut args = words(&["pip", "install", "--python"]);
                args.push(python);
                args.extend(pin);
                args.extend(packages.iter().cloned());
                args
            }
            Step::Uninstall { dist } => {
                let mut args = words(&["pip", "uninstall", "--python"]);
                args.extend([python, dist.to_owned()]);
                args
            }
            Step::Freeze => {
                let mut args = words(&["pip", "freeze", "--python"]);
                args.push(python);
                args
            }
            Step::BuildWheel { pin, src, dist } => {
                let mut args = words(&["build", "--wheel", "--no-python-downloads", "--python"]);
                args.push(python);
                args.extend(pin);
                args.extend(["--out-dir".into(), text(dist), text(src)]);
                args
            }
            Step::InstallWheel { wheel, site } => {
                let mut args = words(&["pip", "install", "--python"]);
                args.push(python);
                args.extend(words(&["--no-deps", "--target"]));
                args.extend([text(site), text(wheel)]);
                args
            }
        };
        (uv.clone(), args)
    }
}

/// Whether a pip of this version has `--uploaded-prior-to` (pip 26.0 and later).
fn pip_excludes_newer(version: &str) -> bool {
    version
        .split('.')
        .next()
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major >= 26)
}

/// The `uv` environments are built with, pinned as coverage.py is: every host of a build
/// spread over machines resolves with the same installer (its version is in every `EnvKey`).
pub const UV: &str = "uv==0.13.9";

/// The pinned version of `uv` ([`UV`]).
fn uv_version() -> &'static str {
    UV.split_once("==").map_or("", |(_, v)| v)
}

/// `uv` on the PATH at the pinned version, or already installed in the cache (none for
/// `installer = "pip"`). A `uv` of another version on the PATH is not used.
fn find_uv(cache: &Cache, cfg: &EnvConfig) -> Option<PathBuf> {
    if cfg.installer == ConfiguredInstaller::Pip {
        return None;
    }
    let pinned = |uv: &Path| {
        let version = std::process::Command::new(uv)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        version.split_whitespace().nth(1) == Some(uv_version())
    };
    if let Some(on_path) = r2e_core::fsutil::find_program("uv")
        && pinned(&on_path)
    {
        return Some(on_path);
    }
    let tools = cache.path(Bucket::Tools).join("uv");
    let uv = tools.join("bin").join("uv");
    if uv.is_file() && pinned(&uv) {
        cache.note_use(&tools);
        return Some(uv);
    }
    None
}

/// Finds `uv` on the PATH or in the cache, or installs it into the cache from the package index.
pub fn find_or_install_uv(
    cache: &Cache,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
    cfg: &EnvConfig,
) -> Option<PathBuf> {
    if let Some(uv) = find_uv(cache, cfg) {
        return Some(uv);
    }
    if cfg.installer == ConfiguredInstaller::Pip {
        return None;
    }
    let tools = cache.dir(Bucket::Tools).ok()?;
    // Another version, installed by an r2e that did not pin it: installed again.
    let _ = fs_err::remove_dir_all(tools.join("uv"));
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
                UV.into(),
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
            // The certificates and wheels the index settings name: a container's `/etc`
            // has no certificates of this machine.
            readonly: interpreter
                .mounts()
                .into_iter()
                .chain(cfg.index_mounts())
                .collect(),
            hidden: vec![],
            network: true,
            limits: Limits {
                wall_seconds: 300,
                memory_mib: 2048,
                processes: 256,
                cpu_seconds: 600,
                file_size_mib: 512,
            },
            image: None,
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
    let uv = tools.join("uv").join("bin").join("uv");
    uv.is_file().then_some(uv)
}

/// What a Python environment reports of itself, run by its own interpreter in the sandbox:
/// its distributions (`name==version`, sorted), after importing coverage. `Ok(Err(why))` when
/// it does not work; `Err` when the sandbox itself failed.
fn installed(
    sandbox: &dyn Sandbox,
    python: &Path,
    env: &[PathBuf],
    interpreter: &[PathBuf],
    scratch: &Path,
) -> Result<std::result::Result<Vec<String>, String>> {
    let probe = "import json, importlib.metadata as m\nimport coverage\nprint(json.dumps(sorted({f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions()})))";
    fs_err::create_dir_all(scratch)?;
    let job = Job {
        program: python.to_path_buf(),
        args: vec!["-I".into(), "-c".into(), probe.into()],
        env: vec![],
        scratch: scratch.to_path_buf(),
        writable: vec![],
        readonly: env.iter().chain(interpreter).cloned().collect(),
        hidden: vec![],
        network: false,
        limits: Limits {
            wall_seconds: 60,
            ..Limits::default()
        },
        image: None,
    };
    // The sandbox failing to run it is the build's failure, never the environment's.
    let out = sandbox.run(&job)?;
    if !out.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("it failed");
        return Ok(Err(format!("its interpreter fails: {last}")));
    }
    Ok(serde_json::from_slice::<Vec<String>>(&out.stdout)
        .map_err(|e| format!("its interpreter answers nonsense: {e}")))
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

impl EnvBuilder<'_> {
    /// The arguments that make the installer resolve as the index was at `[env]
    /// exclude_newer` (none when unset): uv's `--exclude-newer`, pip's `--uploaded-prior-to`
    /// (`Installer::find` refuses a pip without it).
    pub(super) fn exclude_newer_args(&self) -> Vec<String> {
        match (&self.cfg.exclude_newer, &self.installer.uv) {
            (None, _) => Vec::new(),
            (Some(t), Some(_)) => vec!["--exclude-newer".into(), t.clone()],
            // pip with no index (`PIP_NO_INDEX`, a wheelhouse): nothing uploaded to exclude.
            (Some(_), None) if no_index(self.cfg) => Vec::new(),
            (Some(t), None) => vec![format!("--uploaded-prior-to={t}")],
        }
    }
}

/// Whether pip is told to use no index at all (`PIP_NO_INDEX`, as an offline wheelhouse is
/// used): then the files it can install are the folder's, and no upload date can move them,
/// so `exclude_newer` asks nothing of it.
fn no_index(cfg: &EnvConfig) -> bool {
    cfg.passthrough.iter().any(|(k, v)| {
        k == "PIP_NO_INDEX"
            && !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "" | "0" | "false" | "no" | "off"
            )
    })
}

/// The record an environment's folder holds, sealed with its key.
pub(super) const RECORD: &str = "record";

/// What an environment's archive holds of its folder (never its scratch).
const ENV_PARTS: [&str; 2] = ["venv", RECORD];

/// Where an environment's files may name the folder it was built in: its scripts' shebangs,
/// `activate`, `pyvenv.cfg`.
const ENV_REWRITE: [&str; 2] = ["venv/bin", "venv/pyvenv.cfg"];

/// One environment being built in a temporary folder: its log and the steps run so far.
pub(super) struct Building<'a> {
    pub(super) builder: &'a EnvBuilder<'a>,
    pub(super) tmp: PathBuf,
    pub(super) venv: PathBuf,
    pub(super) python: PathBuf,
    pub(super) log: String,
    /// What its steps read besides the installer's mounts (the environment a project layer is
    /// built on).
    pub(super) readonly: Vec<PathBuf>,
    /// The name its log gives the folder it builds in (`<env>`, `<project>`).
    pub(super) label: &'static str,
    /// Its own installer caches (uv's, pip's): see [`installer_caches`].
    pub(super) caches: [PathBuf; 2],
}

/// The installer caches (uv's, pip's) of the build of `hash` in `bucket`:
/// `uv-cache/<bucket>-<hash>/`, `pip-cache/<bucket>-<hash>/`. A build's code (a `setup.py`, a
/// build backend) runs beside its installer and can write whatever the installer can, so no
/// two builds share a cache: what one repository's install writes there, no other's reads.
/// The same key's next build (after a failure that may pass) reads what its first one
/// downloaded; a finished build removes its caches ([`Building::drop_caches`]).
pub(super) fn installer_caches(cache: &Cache, bucket: Bucket, hash: Hash) -> Result<[PathBuf; 2]> {
    let name = format!("{}-{}", bucket.folder(), hash.to_hex());
    Ok([
        cache.dir(Bucket::UvCache)?.join(&name),
        cache.dir(Bucket::PipCache)?.join(&name),
    ])
}

/// `text` with the values of the index and proxy settings among `passthrough` (URLs, which may
/// hold a token in their user, password or path) replaced by their names, and the credentials
/// of those URLs wherever they appear alone: what an installer prints of them never reaches a
/// log, an output or the cache.
pub(super) fn redact_settings(text: &str, passthrough: &[(String, String)]) -> String {
    let mut secrets: Vec<(String, String)> = Vec::new();
    for (name, value) in passthrough {
        for url in value.split([' ', ',']).filter(|v| v.contains("://")) {
            secrets.push((url.to_owned(), format!("<{name}>")));
            let rest = &url[url.find("://").map_or(0, |i| i + 3)..];
            let host_end = rest.find('/').unwrap_or(rest.len());
            if let Some(at) = rest[..host_end].rfind('@') {
                let userinfo = &rest[..at];
                secrets.push((userinfo.to_owned(), "<credentials>".into()));
                for part in userinfo.split(':').filter(|p| p.len() >= 4) {
                    secrets.push((part.to_owned(), "<credentials>".into()));
                }
            }
        }
    }
    // Longer first: a whole URL before the credentials inside it.
    secrets.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for (secret, name) in &secrets {
        if !secret.is_empty() {
            out = out.replace(secret.as_str(), name);
        }
    }
    out
}

/// What a finished build holds: its outcome, the packages that failed, its lock, what its
/// interpreter reported of itself, and the distributions rejected after installing.
type Installed = (
    EnvOutcome,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<RejectedDistribution>,
);

/// Why a build stopped before its end: a failure that may pass (never stored), or a finished
/// environment (possibly failed, which is stored).
pub(super) enum Stop {
    Transient(String),
    Error(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

impl Building<'_> {
    /// The log, with this machine's paths replaced by names.
    pub(super) fn redacted_log(&self) -> String {
        let cache = self.builder.cache.root().to_path_buf();
        let mut paths = vec![(self.tmp.clone(), self.label), (cache, "<cache>")];
        paths.extend(
            self.builder
                .interpreter
                .mounts()
                .into_iter()
                .map(|p| (p, "<python>")),
        );
        let log = redact_settings(&self.log, &self.builder.cfg.passthrough);
        redact(&log, &paths, usize::MAX)
    }

    /// Removes this build's installer caches (a finished build: its environment holds copies).
    pub(super) fn drop_caches(&self) {
        for dir in &self.caches {
            let _ = fs_err::remove_dir_all(dir);
        }
    }

    /// Runs one installation step in the sandbox (network on), appending to the log.
    pub(super) fn run(&mut self, program: &Path, args: Vec<String>) -> Result<Outcome> {
        let b = self.builder;
        let mut env = b.cfg.passthrough.clone();
        env.push(("UV_PYTHON_DOWNLOADS".into(), "never".into()));
        env.push(("UV_LINK_MODE".into(), "copy".into()));
        env.push(("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into()));
        // This build's own caches (never another's: see `installer_caches`). Used, for `gc`'s
        // least recently used; a built environment holds copies (`UV_LINK_MODE=copy`), never
        // links into them.
        let [uv_cache, pip_cache] = self.caches.clone();
        for dir in [&uv_cache, &pip_cache] {
            fs_err::create_dir_all(dir)?;
            if let Some(bucket) = dir.parent() {
                r2e_core::cache::touch(bucket);
            }
        }
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
            readonly: b
                .installer_mounts()
                .into_iter()
                .chain(self.readonly.iter().cloned())
                .collect(),
            hidden: vec![],
            network: true,
            limits: install_limits(b.cfg),
            image: None,
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
        let pin = self.builder.exclude_newer_args();
        self.step(Step::Install { pin, packages })
    }

    /// Takes one installer step in the environment.
    pub(super) fn step(&mut self, step: Step) -> Result<Outcome> {
        let (program, args) = self.builder.installer.command(step, &self.python);
        self.run(&program, args)
    }

    /// Creates the environment itself.
    fn create(&mut self) -> Result<Outcome> {
        let b = self.builder;
        let venv = self.venv.clone();
        self.step(Step::Create {
            interpreter: &b.interpreter.executable,
            venv: &venv,
            system_site_packages: b.cfg.system_site_packages,
        })
    }

    /// Whether the package index answers at all: a failure while it does not may pass.
    pub(super) fn index_down(&mut self) -> Result<bool> {
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
        if let Some(cause) = transient(&one) {
            return Err(Stop::Transient(format!(
                "installing `{package}` failed: {cause}"
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
            if let Some(cause) = transient(&all) {
                return Err(Stop::Transient(format!(
                    "installing packages failed: {cause}"
                )));
            }
            if self.index_down()? {
                return Err(Stop::Transient(
                    "installing packages failed: the package index cannot be reached".into(),
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

    /// Imported but undeclared third-party modules, as pipreqs would: each module the
    /// environment lacks is installed from its distribution (`provider`: the table of known
    /// names, the repository's optional dependencies, else its own name). Then each distribution
    /// so installed is checked to provide its module (`provides`); one that provides none of
    /// the modules it was installed for is uninstalled. Returns the distributions that failed
    /// to install, and those rejected, with why.
    fn install_inferred(
        &mut self,
        inferred: &[String],
        optional: &[String],
    ) -> std::result::Result<(Vec<String>, Vec<RejectedDistribution>), Stop> {
        let mut failed = Vec::new();
        let mut rejected = Vec::new();
        if inferred.is_empty() {
            return Ok((failed, rejected));
        }
        let probe = "import importlib.util, sys\nfor m in sys.argv[1:]:\n    try:\n        if importlib.util.find_spec(m) is None: print(m)\n    except Exception: print(m)";
        let mut args = vec!["-I".to_string(), "-c".into(), probe.into()];
        args.extend(inferred.iter().cloned());
        let python = self.python.clone();
        let missing = self.run(&python, args)?;
        let mut installed: Vec<(String, String)> = Vec::new();
        for module in String::from_utf8_lossy(&missing.stdout).lines() {
            let dist = provider(module, optional);
            if dist.is_empty() {
                continue;
            }
            if installed.iter().any(|(_, d)| *d == dist) || self.install_one(&dist)? {
                installed.push((module.to_owned(), dist));
            } else if !failed.contains(&dist) {
                failed.push(dist);
            }
        }
        if installed.is_empty() {
            return Ok((failed, rejected));
        }
        // A check that could not run (a timeout, a sandbox that failed) may pass next time:
        // never stored, so a distribution that may not provide its module is not kept under
        // a key that says the check ran.
        let Some(verdicts) = self.provides(&installed)? else {
            return Err(Stop::Transient(
                "the check that each inferred distribution provides its module could not run"
                    .into(),
            ));
        };
        let mut dists: Vec<&String> = installed.iter().map(|(_, d)| d).collect();
        dists.sort();
        dists.dedup();
        for dist in dists {
            let of_dist: Vec<(&String, &Option<String>)> = installed
                .iter()
                .zip(&verdicts)
                .filter(|((_, d), _)| d == dist)
                .map(|((m, _), why)| (m, why))
                .collect();
            // A distribution that provides one of its modules stays.
            if of_dist.iter().any(|(_, why)| why.is_none()) {
                continue;
            }
            let removed = self.uninstall(dist)?;
            if !removed.success() {
                // Kept, it would stay under a key that says it was removed: never stored.
                return Err(Stop::Transient(format!(
                    "uninstalling `{dist}`, which does not provide its module, failed"
                )));
            }
            for (module, why) in of_dist {
                let why = why.clone().unwrap_or_default();
                rejected.push(RejectedDistribution {
                    module: module.clone(),
                    distribution: dist.clone(),
                    reason: format!("{why}: uninstalled"),
                });
            }
        }
        Ok((failed, rejected))
    }

    /// For each (module, distribution) installed for it, why the distribution does not provide
    /// the module (`None` when it does), asked of the environment's own interpreter: the
    /// module is a top-level name of the distribution's files (`RECORD`) or `top_level.txt`,
    /// or `importlib.util.find_spec` finds it among those files or those of a distribution it
    /// requires (a meta-distribution). `None` (no verdict, all kept)
    /// when the check itself fails.
    fn provides(&mut self, installed: &[(String, String)]) -> Result<Option<Vec<Option<String>>>> {
        let probe = r#"
import importlib.metadata as md, importlib.util, json, os, re, sys

def closure(d):
    seen, todo, out = set(), [d], []
    while todo:
        x = todo.pop()
        name = (x.metadata["Name"] or "").lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        out.append(x)
        for req in x.requires or []:
            if ";" in req and "extra" in req.split(";", 1)[1]:
                continue
            m = re.match(r"[A-Za-z0-9._-]+", req.strip())
            try:
                todo.append(md.distribution(m.group(0)))
            except Exception:
                pass
    return out

def why_not(module, dist):
    try:
        d = md.distribution(dist)
    except md.PackageNotFoundError:
        return f"`{dist}` is not installed under that name"
    tops = (d.read_text("top_level.txt") or "").split()
    files = d.files or []
    names = set(tops)
    for f in files:
        parts = f.parts
        if not parts or parts[0] == ".." or parts[0].endswith((".dist-info", ".data", ".egg-info")):
            continue
        names.add(parts[0] if len(parts) > 1 else parts[0].split(".")[0])
    if module in names:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except Exception:
        spec = None
    if spec is not None:
        # Its own files, or those of a distribution it requires (a meta-distribution).
        own = set()
        for dd in closure(d):
            own |= {os.path.realpath(dd.locate_file(f)) for f in dd.files or []}
        places = [spec.origin] if spec.origin else []
        places += list(spec.submodule_search_locations or [])
        for p in places:
            p = os.path.realpath(p)
            if p in own or any(o.startswith(p + os.sep) for o in own):
                return None
    if not files and not tops:
        if spec is not None:
            return None
        return f"`{dist}` {d.version} lists no files, and module `{module}` is not found"
    shown = sorted(n for n in names if n.isidentifier() and n != "__pycache__")
    shown = ", ".join(f"`{n}`" for n in shown[:8]) or "no module"
    return f"`{dist}` {d.version} does not provide module `{module}` (it provides {shown})"

pairs = json.loads(sys.argv[1])
print(json.dumps([why_not(m, d) for m, d in pairs]))
"#;
        let pairs = serde_json::to_string(installed).expect("strings serialize");
        let python = self.python.clone();
        let out = self.run(&python, vec!["-I".into(), "-c".into(), probe.into(), pairs])?;
        let verdicts = out
            .success()
            .then(|| serde_json::from_slice::<Vec<Option<String>>>(&out.stdout).ok())
            .flatten()
            .filter(|v| v.len() == installed.len());
        if verdicts.is_none() {
            self.log.push_str(
                "the check that each installed distribution provides its module could not run\n",
            );
        }
        Ok(verdicts)
    }

    /// Uninstalls a distribution from the environment.
    fn uninstall(&mut self, dist: &str) -> Result<Outcome> {
        self.step(Step::Uninstall { dist })
    }

    /// The environment's lock: `pip freeze`.
    fn freeze(&mut self) -> Result<Vec<String>> {
        let out = self.step(Step::Freeze)?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect())
    }
}

impl EnvBuilder<'_> {
    /// What an installation step must see besides the folder it builds: the interpreter, the
    /// installer, and local paths the index settings name (a folder of wheels, certificates).
    fn installer_mounts(&self) -> Vec<PathBuf> {
        let mut out = self.interpreter.mounts();
        if let Some(uv) = &self.installer.uv {
            out.push(uv.clone());
        }
        out.extend(self.cfg.index_mounts());
        out
    }

    /// Whether an environment the cache holds still works as built: its interpreter runs,
    /// imports coverage, and reports the packages it was built with. `Err(why)` when it does
    /// not. A failure of the sandbox itself is an error: it says nothing of the environment,
    /// which stays.
    pub fn check(&self, env: &Env) -> Result<std::result::Result<(), String>> {
        // Its interpreter (a link to the configured one) must be there: a sandbox cannot start
        // a program that is not, and would say so as its own failure.
        if !env.python.exists() {
            return Ok(Err(format!(
                "its interpreter `{}` is missing",
                env.python.display()
            )));
        }
        let scratch = self.cache.dir(Bucket::Scratch)?.join(format!(
            "env-check-{}-{}",
            std::process::id(),
            &env.record.key[..16]
        ));
        fs_err::create_dir_all(&scratch)?;
        let found = installed(
            self.sandbox,
            &env.python,
            std::slice::from_ref(&env.dir),
            &env.mounts,
            &scratch,
        );
        let _ = fs_err::remove_dir_all(&scratch);
        // A sandbox that cannot run the check (no daemon, no base image) says nothing of the
        // environment: the build's failure, and the entry stays.
        Ok(match found? {
            Ok(list) if list == env.record.installed => Ok(()),
            Ok(_) => Err("its packages are not the ones it was built with".into()),
            Err(why) => Err(why),
        })
    }

    /// What determines the environment of a repository with these dependencies.
    pub fn key(&self, declared: &[String], inferred: &[String], optional: &[String]) -> EnvKey {
        EnvKey {
            python_version: self.interpreter.version.clone(),
            installer: self.installer.id.clone(),
            coverage: COVERAGE,
            declared: declared.to_vec(),
            inferred: inferred.to_vec(),
            inference: super::INFERENCE,
            providers: inferred
                .iter()
                .map(|m| (m.clone(), provider(m, optional)))
                .collect(),
            optional: optional.to_vec(),
            extra: self.cfg.extra_packages.clone(),
            system_site_packages: self.cfg.system_site_packages,
            index: self
                .cfg
                .passthrough
                .iter()
                .filter(|(k, _)| k.contains("INDEX") || k.contains("FIND_LINKS"))
                .cloned()
                .collect(),
            exclude_newer: self.cfg.exclude_newer.clone(),
        }
    }

    /// The failed environment of a project that does not support the interpreter (`why`):
    /// nothing built, nothing stored; its key is the one it would have had.
    pub fn unsupported(&self, declared: &super::Declared, inferred: &[String], why: String) -> Env {
        let key = self.key(&declared.requirements, inferred, &declared.optional);
        Env {
            record: SealedEnv {
                key: key.hash().to_hex(),
                outcome: EnvOutcome::Failed,
                installer: self.installer.id.name.clone(),
                python_version: self.interpreter.version.clone(),
                declared: declared.requirements.clone(),
                inferred: inferred.to_vec(),
                failed_packages: Vec::new(),
                rejected: Vec::new(),
                lock: Vec::new(),
                lock_hash: String::new(),
                installed: Vec::new(),
                log: format!("{why}\n"),
            },
            python: self.interpreter.executable.clone(),
            dir: PathBuf::new(),
            mounts: Vec::new(),
            cached: false,
            fetched: false,
            project: None,
            capture: None,
        }
    }

    /// The environment for a repository with these declared and inferred dependencies: from
    /// the cache when its sealed record verifies, else from the remote store's archive when
    /// there is one (`[cache] remote`), else built in a temporary folder and moved in place
    /// whole (and, with a remote store, archived there for the other hosts).
    pub fn build(
        &self,
        declared: &[String],
        inferred: &[String],
        optional: &[String],
    ) -> Result<Env> {
        self.build_from(declared, inferred, optional, true)
    }

    /// [`EnvBuilder::build`]; `remote`: whether the remote store is used (not for an
    /// environment whose archive was unpacked and does not work on this host).
    pub(super) fn build_from(
        &self,
        declared: &[String],
        inferred: &[String],
        optional: &[String],
        remote: bool,
    ) -> Result<Env> {
        let key = self.key(declared, inferred, optional);
        let hash = key.hash();
        let dir = self.cache.dir(Bucket::Envs)?.join(hash.to_hex());
        if let Some(env) = self.cached_env(&dir, hash)? {
            return Ok(env);
        }
        let Some(store) = self.cache.remote().filter(|_| remote) else {
            return self.build_here(declared, inferred, optional, hash, &dir);
        };
        let share = |env: Env| {
            let built_at = [
                dir.with_extension(format!("tmp{}", std::process::id())),
                dir.clone(),
            ];
            if env.dir == dir {
                archive::upload(
                    self.cache,
                    store,
                    Bucket::Envs,
                    hash,
                    &dir,
                    &ENV_PARTS,
                    &built_at,
                );
            }
            env
        };
        match self.fetch(store, hash, &dir)? {
            Ok(env) => return Ok(env),
            // Damaged: built here, and stored again in its place.
            Err(true) => {
                return self
                    .build_here(declared, inferred, optional, hash, &dir)
                    .map(share);
            }
            Err(false) => {}
        }
        // Repositories without dependencies share one environment: one host builds it, the
        // others wait for its archive.
        let lease = store.lease(Bucket::Envs, hash, &|| {
            archive::present(store, Bucket::Envs, hash)
        });
        match lease {
            Some(guard) => {
                let env = self
                    .build_here(declared, inferred, optional, hash, &dir)
                    .map(share);
                drop(guard);
                env
            }
            None => match self.fetch(store, hash, &dir)? {
                Ok(env) => Ok(env),
                Err(_) => self
                    .build_here(declared, inferred, optional, hash, &dir)
                    .map(share),
            },
        }
    }

    /// The environment in its folder of the cache, when its sealed record verifies (a damaged
    /// one is removed).
    fn cached_env(&self, dir: &Path, hash: Hash) -> Result<Option<Env>> {
        let Ok(bytes) = std::fs::read(dir.join(RECORD)) else {
            return Ok(None);
        };
        match entry::unseal::<SealedEnv>(&Bucket::Envs.folder(), hash, &bytes) {
            Ok(record) => {
                self.cache.note_use(dir);
                Ok(Some(Env {
                    record,
                    python: dir.join("venv").join("bin").join("python"),
                    mounts: self.interpreter.mounts(),
                    dir: dir.to_path_buf(),
                    cached: true,
                    fetched: false,
                    project: None,
                    capture: None,
                }))
            }
            Err(why) => {
                eprintln!(
                    "warning: environment `{}` has a damaged record ({why}); it is rebuilt",
                    dir.display()
                );
                fs_err::remove_dir_all(dir)?;
                Ok(None)
            }
        }
    }

    /// The environment unpacked from the remote store's archive (a hit, traced); `Err(true)`
    /// when the archive is damaged (named on stderr), `Err(false)` when there is none.
    fn fetch(
        &self,
        remote: &Remote,
        hash: Hash,
        dir: &Path,
    ) -> Result<std::result::Result<Env, bool>> {
        let record_ok = |tmp: &Path| -> std::result::Result<(), String> {
            let bytes = std::fs::read(tmp.join(RECORD)).map_err(|e| format!("its record: {e}"))?;
            entry::unseal::<SealedEnv>(&Bucket::Envs.folder(), hash, &bytes)
                .map(drop)
                .map_err(|why| format!("its record: {why}"))
        };
        let now_at = [dir.to_path_buf(), dir.to_path_buf()];
        match archive::fetch(
            remote,
            Bucket::Envs,
            hash,
            dir,
            &now_at,
            &ENV_REWRITE,
            // `venv/bin/python` leads to the base interpreter.
            std::slice::from_ref(&self.interpreter.base_prefix),
            &record_ok,
        ) {
            archive::Fetched::Unpacked => match self.cached_env(dir, hash)? {
                Some(mut env) => {
                    self.cache.trace(Event::Hit, Bucket::Envs, hash);
                    env.fetched = true;
                    Ok(Ok(env))
                }
                None => Ok(Err(true)),
            },
            archive::Fetched::Miss => Ok(Err(false)),
            archive::Fetched::Damaged => {
                self.cache.trace(Event::Damaged, Bucket::Envs, hash);
                Ok(Err(true))
            }
        }
    }

    /// Builds the environment of `hash` on this host, into `dir`.
    fn build_here(
        &self,
        declared: &[String],
        inferred: &[String],
        optional: &[String],
        hash: Hash,
        dir: &Path,
    ) -> Result<Env> {
        self.cache.trace(Event::Started, Bucket::Envs, hash);
        let dir = dir.to_path_buf();
        let python = dir.join("venv").join("bin").join("python");
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
            readonly: Vec::new(),
            label: "<env>",
            caches: installer_caches(self.cache, Bucket::Envs, hash)?,
        };
        let built = self.install_all(&mut b, declared, inferred, optional);
        let (outcome, failed, lock, installed, rejected) = match built {
            Ok(done) => done,
            Err(Stop::Error(e)) => {
                let _ = fs_err::remove_dir_all(&b.tmp);
                b.drop_caches();
                return Err(e);
            }
            // The caches stay: the next try reads what this one downloaded.
            Err(Stop::Transient(why)) => {
                let _ = fs_err::remove_dir_all(&b.tmp);
                return Err(Error::env(why));
            }
        };
        let record = SealedEnv {
            key: hash.to_hex(),
            outcome,
            installer: self.installer.id.name.clone(),
            python_version: self.interpreter.version.clone(),
            declared: declared.to_vec(),
            inferred: inferred.to_vec(),
            failed_packages: failed,
            rejected,
            lock_hash: Hash::of_bytes(lock.join("\n").as_bytes()).to_hex(),
            lock,
            installed,
            log: b.redacted_log(),
        };
        write_atomic(
            &b.tmp.join(RECORD),
            &entry::seal(&Bucket::Envs.folder(), hash, &record),
        )?;
        let _ = fs_err::remove_dir_all(b.tmp.join("scratch"));
        b.drop_caches();
        if dir.exists() {
            // Another build finished it first; use theirs.
            let _ = fs_err::remove_dir_all(&b.tmp);
        } else {
            fs_err::rename(&b.tmp, &dir)?;
        }
        self.cache.note_use(&dir);
        Ok(Env {
            record,
            python,
            dir,
            mounts: self.interpreter.mounts(),
            cached: false,
            fetched: false,
            project: None,
            capture: None,
        })
    }

    /// Every step of a build: the environment, its packages, its lock.
    fn install_all(
        &self,
        b: &mut Building,
        declared: &[String],
        inferred: &[String],
        optional: &[String],
    ) -> std::result::Result<Installed, Stop> {
        let built = self.install_steps(b, declared, inferred, optional);
        // A step that failed on a full disk failed for the disk, whatever it printed.
        if r2e_core::fsutil::disk_full(&b.tmp) {
            return Err(Stop::Transient(format!(
                "the environment could not be built: the disk is full ({} MiB free where it is built)",
                r2e_core::fsutil::free_bytes(&b.tmp).unwrap_or(0) >> 20
            )));
        }
        built
    }

    /// The steps of a build, in order.
    fn install_steps(
        &self,
        b: &mut Building,
        declared: &[String],
        inferred: &[String],
        optional: &[String],
    ) -> std::result::Result<Installed, Stop> {
        let created = b.create()?;
        if !created.success() {
            if let Some(cause) = transient(&created) {
                return Err(Stop::Transient(format!(
                    "creating an environment failed: {cause}"
                )));
            }
            // Creating it reads nothing of the repository (the interpreter, the installer and
            // `system_site_packages` only): its failure is the machine's or the sandbox's (an
            // interpreter whose `venv` lacks what it needs there), never stored as the
            // environment of these dependencies, which another backend or a fixed machine
            // builds under the same key.
            let log = b.redacted_log();
            let said = log
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('['))
                .unwrap_or("it failed");
            return Err(Stop::Error(Error::env(format!(
                "creating an environment with `{}` failed in the {} sandbox: {said}",
                self.interpreter.executable.display(),
                self.sandbox.describe(),
            ))));
        }
        let mut failed = b.install_declared(declared)?;
        let (failed_inferred, rejected) = b.install_inferred(inferred, optional)?;
        failed.extend(failed_inferred);
        let lock = b.freeze()?;
        // What the environment reports of itself, by its own interpreter (which must import
        // coverage): checked again before each build uses it.
        let installed = installed(
            self.sandbox,
            &b.python,
            std::slice::from_ref(&b.tmp),
            &self.interpreter.mounts(),
            &b.tmp.join("scratch"),
        )?;
        let outcome = match &installed {
            Err(_) => EnvOutcome::Failed,
            Ok(_) if failed.is_empty() && rejected.is_empty() => EnvOutcome::Ok,
            Ok(_) => EnvOutcome::Partial,
        };
        if let Err(why) = &installed {
            b.log
                .push_str(&format!("the environment does not work: {why}\n"));
        }
        Ok((
            outcome,
            failed,
            lock,
            installed.unwrap_or_default(),
            rejected,
        ))
    }
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
