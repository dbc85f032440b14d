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
//! A project whose `requires-python` excludes the interpreter gets a failed environment with
//! that reason, decided by every build and never stored; nothing is installed for it.
//!
//! A failed installation is data: its log is kept and the build goes on. A failure that may pass
//! (the index unreachable, a timeout, a full disk) is never stored: the build goes on with the
//! other repositories and then exits 1 naming the cause, and the next build tries again. Before
//! its functions run, an environment from the cache is checked (its interpreter runs, imports
//! coverage and reports the packages it was built with); a broken one is rebuilt.

mod archive;
mod build;
mod declared;
pub mod project;
pub mod test_deps;

use r2e_core::records::EnvOutcome;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use build::{EnvBuilder, Installer, UV, find_or_install_uv};
use declared::normalize_requirement;
pub use declared::{
    Declared, declared_dependencies, distribution_for, optional_provider, provider,
};

/// How inferred modules become installed distributions (`EnvKey::inference`): bump it when the
/// check after installing (`Building::install_inferred`) or what follows it changes.
pub const INFERENCE: u32 = 1;

use crate::db::ExternalImports;
use crate::stages::checkout::Checkout;
use r2e_core::cache::{ActionKey, Bucket, Cache, write_atomic, write_if_changed};
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::{
    CaptureEnvLine, EnvLine, FailureRecord, ProjectLine, RejectedDistribution, SkippedImport,
    StageCounts, StageTime,
};
pub use r2e_exec::interpreter::Interpreter;
use r2e_exec::jobs::Runtime;
use r2e_exec::sandbox::{Job, Limits, Sandbox};

/// A built environment, as sealed in its folder in the cache: what the builder writes and a
/// later build (on any host) reads back. Not `records::EnvLine`, the dataset's line made from
/// it: that line names the repository and holds what is decided per repository and per build
/// (the imports skipped, the project layer, the log's path in the dataset), while this record
/// is shared by every repository with the same `EnvKey` and holds the log itself and what the
/// interpreter reported (`installed`), which `check` compares before reuse.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SealedEnv {
    pub key: String,
    pub outcome: EnvOutcome,
    pub installer: String,
    pub python_version: String,
    pub declared: Vec<String>,
    pub inferred: Vec<String>,
    pub failed_packages: Vec<String>,
    /// Distributions installed for an inferred module that did not provide it, uninstalled.
    pub rejected: Vec<RejectedDistribution>,
    /// `pip freeze` of the environment: its lock.
    pub lock: Vec<String>,
    pub lock_hash: String,
    /// What the environment's interpreter reported of itself when it was built (its
    /// distributions): checked again before a build uses it.
    pub installed: Vec<String>,
    pub log: String,
}

/// An environment ready for use.
#[derive(Clone, Debug)]
pub struct Env {
    pub record: SealedEnv,
    /// The environment's interpreter.
    pub python: PathBuf,
    /// The environment's folder in the cache.
    pub dir: PathBuf,
    /// What its interpreter needs to see besides it (the base installation).
    pub mounts: Vec<PathBuf>,
    /// Whether it came from the cache (the local one, or the remote store's archive).
    pub cached: bool,
    /// Whether it was unpacked from the remote store's archive by this build.
    pub fetched: bool,
    /// The repository's project layer on it (`project`): none when it is not a buildable
    /// project or `[env] install_project` is off.
    pub project: Option<project::ProjectLayer>,
    /// The environment the capture runs the repository's own tests in (`capture_env`): none
    /// when nothing is captured (no test files, or `[generate] capture_tests` off).
    pub capture: Option<Box<CaptureEnv>>,
}

/// The capture's environment of a repository: its own environment with what its test suite
/// needs (`test_deps`), so that its tests import and run; the functions' own environment stays
/// what the project installs for its users.
#[derive(Clone, Debug)]
pub struct CaptureEnv {
    pub line: CaptureEnvLine,
    /// `None` when it could not be made (`line.reason`): the capture runs in the repository's
    /// own environment.
    pub env: Option<Env>,
}

impl Env {
    /// How to run code in this environment for a repository checked out at `root`.
    pub fn runtime(&self, root: &Path) -> Runtime {
        Runtime {
            python: self.python.clone(),
            env: self.dir.clone(),
            repo: root.to_path_buf(),
            interpreter: self.mounts.clone(),
            project: self.project.as_ref().map(|p| p.site.clone()),
            image: None,
        }
    }

    /// How the capture runs the repository's tests, checked out at `root`: in its capture
    /// environment with this environment's project layer, or in this environment when there
    /// is none; and that environment's lock hash (`CaptureKey::env_lock`).
    pub fn capture_runtime(&self, root: &Path) -> (Runtime, &str) {
        match self.capture.as_ref().and_then(|c| c.env.as_ref()) {
            Some(env) => {
                let mut runtime = env.runtime(root);
                runtime.project = self.project.as_ref().map(|p| p.site.clone());
                (runtime, &env.record.lock_hash)
            }
            None => (self.runtime(root), &self.record.lock_hash),
        }
    }

    /// The project layer's key, empty without one (`CodeKey::project`).
    pub fn project_key(&self) -> String {
        self.project
            .as_ref()
            .map(|p| p.record.key.clone())
            .unwrap_or_default()
    }
}

/// What stage `env` made of every repository.
pub struct EnvStage {
    pub lines: Vec<EnvLine>,
    pub counts: StageCounts,
    pub envs: Envs,
    pub failures: Vec<FailureRecord>,
    /// Environments that could not be built for a reason that may pass (the network, a full
    /// disk): the build reports them and exits 1 after writing what it could.
    pub transient: Vec<String>,
    /// Each repository's time in the stage, in the order of the repositories.
    pub times: Vec<(String, StageTime)>,
}

/// With a remote store: this host's interpreter and installer (inputs of every `EnvKey`) are
/// those of the first host that built the pipeline with it, or the build stops (exit 2) naming
/// the difference. Hosts that differ would build other environments, and other results.
fn same_as_first_host(
    cfg: &Config,
    cache: &Cache,
    interpreter: &Interpreter,
    installer: &Installer,
) -> Result<()> {
    let Some(remote) = cache.remote() else {
        return Ok(());
    };
    let facts = (
        interpreter.version.clone(),
        installer.id.name.clone(),
        installer.id.version.clone(),
    );
    let key = r2e_core::hash::Hash::of_key(&("env-host", &cfg.name, &cfg.env.python));
    let Some(first) = remote.agree(key, &facts) else {
        return Ok(());
    };
    Err(Error::input(format!(
        "this host builds environments with Python {} and {} {}, but the first host that built `{}` with the remote cache `{}` used Python {} and {} {}: give every host the same interpreter (`[env] python`) and installer",
        facts.0,
        facts.1,
        facts.2,
        cfg.name,
        remote.url(),
        first.0,
        first.1,
        first.2
    )))
}

/// Stage `env`: an environment per repository (its declared dependencies, and the third-party
/// modules its code imports), its log under `<output>/logs/`.
pub fn run(
    cfg: &Config,
    cache: &Cache,
    sandbox: &dyn Sandbox,
    repos: &[(Arc<Checkout>, ExternalImports)],
    output: &Path,
    progress: impl Fn(u64, &str) -> indicatif::ProgressBar,
) -> Result<EnvStage> {
    let interpreter = Interpreter::probe(&cfg.env.python)?;
    let installer = Installer::find(cache, sandbox, &interpreter, &cfg.env)?;
    same_as_first_host(cfg, cache, &interpreter, &installer)?;
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
        transient: Vec::new(),
        times: Vec::new(),
    };
    let bar = progress(repos.len() as u64, "env");
    for (checkout, imports) in repos {
        let started = std::time::Instant::now();
        let timed = |stage: &mut EnvStage, fresh: bool| {
            let mut t = StageTime::default();
            t.add(started.elapsed().as_secs_f64(), fresh);
            stage.times.push((checkout.name.clone(), t));
        };
        bar.set_message(checkout.name.clone());
        let (declared, inferred, skipped) =
            dependencies(cfg, cache, sandbox, &interpreter, checkout, imports);
        for (file, why) in &declared.refused {
            stage.failures.push(FailureRecord {
                repo: checkout.name.clone(),
                path: Some(file.clone()),
                stage: "env".into(),
                reason: why.clone(),
                log: None,
            });
        }
        // A project that does not support the interpreter is a recorded failure, decided
        // again by every build (it costs nothing): nothing is installed, nothing cached.
        if let Some(why) = declared.python_unmet(&interpreter.version) {
            let unmet = builder.unsupported(&declared, &inferred, why.clone());
            stage.record(&checkout.name, unmet, &skipped, output, why)?;
            timed(&mut stage, true);
            bar.inc(1);
            continue;
        }
        // Whether this build made something (an environment, a project layer) rather than
        // taking it from the cache.
        let fresh = match working_env(&builder, &declared, &inferred) {
            Ok(mut built) => {
                if built.record.outcome != EnvOutcome::Failed {
                    bar.set_message(format!("{} (the project)", checkout.name));
                    let root = checkout.materialize(cache)?;
                    match builder.project(&built, &root, &checkout.masked) {
                        Ok(layer) => built.project = layer,
                        // The functions run without the layer (another code key).
                        Err(e) => stage.may_pass(&checkout.name, &e),
                    }
                    if captures(cfg, checkout) {
                        bar.set_message(format!("{} (its tests' environment)", checkout.name));
                        let capture = capture_env(&builder, checkout, &declared, &inferred);
                        if let Some(e) = &capture.transient {
                            stage.may_pass(&checkout.name, e);
                        }
                        built.capture = Some(Box::new(capture.env));
                    }
                }
                let fresh = !built.cached || built.project.as_ref().is_some_and(|p| !p.cached);
                stage.record(
                    &checkout.name,
                    built,
                    &skipped,
                    output,
                    "the environment could not be created".into(),
                )?;
                fresh
            }
            Err(e) => {
                stage.counts.failed += 1;
                stage.may_pass(&checkout.name, &e);
                true
            }
        };
        timed(&mut stage, fresh);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(stage)
}

/// Whether the capture runs a repository's tests: `[generate] capture_tests` is on for a
/// generator that uses it, and the repository has test files (`checkout::is_test_file`).
fn captures(cfg: &Config, checkout: &Checkout) -> bool {
    cfg.generate.capture_tests
        && cfg.generate.generator != r2e_core::config::Generator::Llm
        && checkout
            .files
            .iter()
            .any(|f| crate::stages::checkout::is_test_file(&f.path))
}

/// A capture environment as made, and the failure that may pass (the index, a full disk) that
/// kept it from being made, which the build reports (exit 1) and the next build tries again.
struct MadeCapture {
    env: CaptureEnv,
    transient: Option<Error>,
}

/// The capture's environment of a repository: its environment's inputs, with the requirements
/// its test suite declares (`test_deps`) as extra packages, built (or taken from the cache) as
/// any environment is. One that cannot be made leaves the capture in the repository's own
/// environment, with the reason recorded; a requirement that fails to install is recorded in
/// `failed_packages` and the others are kept.
fn capture_env(
    builder: &EnvBuilder,
    checkout: &Checkout,
    declared: &Declared,
    inferred: &[String],
) -> MadeCapture {
    let requirements = test_deps::test_requirements(checkout);
    let mut cfg = builder.cfg.clone();
    cfg.extra_packages
        .extend(requirements.iter().map(|r| r.requirement.clone()));
    let tests = EnvBuilder {
        cfg: &cfg,
        ..*builder
    };
    let failed = |reason: String| CaptureEnv {
        line: CaptureEnvLine {
            env_key: String::new(),
            outcome: EnvOutcome::Failed,
            requirements: requirements.clone(),
            failed_packages: Vec::new(),
            reason: Some(reason),
            lock_hash: String::new(),
        },
        env: None,
    };
    match working_env(&tests, declared, inferred) {
        Ok(env) if env.record.outcome != EnvOutcome::Failed => {
            let r = &env.record;
            let line = CaptureEnvLine {
                env_key: r.key.clone(),
                outcome: if r.failed_packages.is_empty() {
                    EnvOutcome::Ok
                } else {
                    EnvOutcome::Partial
                },
                requirements: requirements.clone(),
                failed_packages: r.failed_packages.clone(),
                reason: None,
                lock_hash: r.lock_hash.clone(),
            };
            MadeCapture {
                env: CaptureEnv {
                    line,
                    env: Some(env),
                },
                transient: None,
            }
        }
        Ok(env) => MadeCapture {
            env: failed(format!(
                "the capture's environment `{}` could not be created; the capture ran in the repository's own",
                env.record.key
            )),
            transient: None,
        },
        Err(e) => MadeCapture {
            env: failed(format!("the capture's environment could not be made: {e}")),
            transient: Some(e),
        },
    }
}

/// A repository's dependencies as its environment's key holds them: those it declares, and
/// the third-party modules its code imports (`imports`) that its environment installs (none
/// unless `[env] infer_imports`); and the third-party modules it imports only where it runs
/// without them, which are not installed (`imports.skipped`, with `infer_imports`). One reading
/// for the stage and for `plan`.
fn dependencies(
    cfg: &Config,
    cache: &Cache,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
    checkout: &Checkout,
    imports: &ExternalImports,
) -> (Declared, Vec<String>, Vec<SkippedImport>) {
    let declared = declared_dependencies(checkout, |text| {
        setup_py_requires(text, cache, sandbox, interpreter)
    });
    if !cfg.env.infer_imports {
        return (declared, Vec::new(), Vec::new());
    }
    let third_party = |m: &str| !interpreter.stdlib_modules.contains(m) && !m.starts_with('_');
    let inferred = imports
        .required
        .iter()
        .filter(|m| third_party(m))
        .cloned()
        .collect();
    let skipped = imports
        .skipped
        .iter()
        .filter(|s| third_party(&s.module))
        .cloned()
        .collect();
    (declared, inferred, skipped)
}

/// What a build would do of one repository's environment (`r2e status`).
#[derive(Clone, Debug, Serialize)]
pub struct EnvPlan {
    pub repo: String,
    /// Whether a build would install it: the cache has no environment for its key.
    pub would_build: bool,
    /// The environment key's hash.
    pub key: String,
    /// What changed since the last build's environment of the repository (its `envs.jsonl`
    /// line): the inputs of the key that differ, each named, or that there was none.
    pub changed: Vec<String>,
    /// Its project layer, when it is a buildable project (`project`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<ProjectPlan>,
}

/// What a build would do of a repository's project layer (`r2e status`).
#[derive(Clone, Debug, Serialize)]
pub struct ProjectPlan {
    /// Whether a build would build it: the cache has no layer for its key.
    pub would_build: bool,
    /// The layer key's hash.
    pub key: String,
    /// Why it would be built, when it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
}

/// The project layer a build would use for a repository whose environment has the key
/// `env_key`: `None` when it has none, or its files are not checked out yet (nothing is
/// checked out for a plan).
fn project_plan(
    cfg: &Config,
    cache: &Cache,
    checkout: &Checkout,
    env_key: &str,
    last: Option<&EnvLine>,
) -> Option<ProjectPlan> {
    if !cfg.env.install_project {
        return None;
    }
    let root = checkout.root_if_present(cache)?;
    let inputs = project::build_inputs(&root, &checkout.masked)?;
    let key = r2e_core::keys::ProjectKey {
        format: project::FORMAT,
        env: env_key.to_owned(),
        inputs,
    }
    .hash()
    .to_hex();
    let would_build = !cache
        .path(Bucket::Projects)
        .join(&key)
        .join("record")
        .is_file();
    let changed = would_build.then(|| match last.and_then(|l| l.project.as_ref()) {
        Some(p) if p.key != key => {
            "what its build reads (its build declarations, extension sources) or its environment changed".to_owned()
        }
        Some(_) => "its key is the same, but the cache has no layer for it".to_owned(),
        None => "the last build has no project layer for it".to_owned(),
    });
    Some(ProjectPlan {
        would_build,
        key,
        changed,
    })
}

/// The env stage planned, nothing built or installed: each repository's environment key (its
/// declarations read as a build reads them), whether the cache holds it, and the inputs that
/// changed since `last` (the last build's `envs.jsonl`), named the way a build would see them.
pub fn plan(
    cfg: &Config,
    cache: &Cache,
    sandbox: &dyn Sandbox,
    repos: &[(Arc<Checkout>, ExternalImports)],
    last: &[EnvLine],
) -> Result<Vec<EnvPlan>> {
    let interpreter = Interpreter::probe(&cfg.env.python)?;
    let Some(installer) = Installer::find_installed(cache, &interpreter, &cfg.env) else {
        return Ok(repos
            .iter()
            .map(|(c, _)| EnvPlan {
                repo: c.name.clone(),
                would_build: true,
                project: None,
                key: String::new(),
                changed: vec![
                    "`uv` is not installed yet: a build installs it into the cache first".into(),
                ],
            })
            .collect());
    };
    let installer = installer?;
    let builder = EnvBuilder {
        cache,
        sandbox,
        cfg: &cfg.env,
        interpreter: &interpreter,
        installer: &installer,
    };
    let mut out = Vec::new();
    for (checkout, imports) in repos {
        let (declared, inferred, _) =
            dependencies(cfg, cache, sandbox, &interpreter, checkout, imports);
        let key = builder
            .key(&declared.requirements, &inferred, &declared.optional)
            .hash()
            .to_hex();
        if let Some(why) = declared.python_unmet(&interpreter.version) {
            out.push(EnvPlan {
                repo: checkout.name.clone(),
                would_build: false,
                key,
                changed: vec![why],
                project: None,
            });
            continue;
        }
        let last_line = last.iter().find(|l| l.repo == checkout.name);
        let project = project_plan(cfg, cache, checkout, &key, last_line);
        let would_build = !cache
            .path(Bucket::Envs)
            .join(&key)
            .join(build::RECORD)
            .is_file();
        let mut changed = Vec::new();
        match last.iter().find(|l| l.repo == checkout.name) {
            None => changed.push("the last build has no environment for it".into()),
            Some(l) if l.env_key == key => {}
            Some(l) => {
                list_change(
                    "declared",
                    &l.declared,
                    &declared.requirements,
                    &mut changed,
                );
                list_change("inferred", &l.inferred, &inferred, &mut changed);
                if l.python_version != interpreter.version {
                    changed.push(format!(
                        "`python_version`: {} -> {}",
                        l.python_version, interpreter.version
                    ));
                }
                if l.installer != installer.id.name {
                    changed.push(format!(
                        "`installer`: {} -> {}",
                        l.installer, installer.id.name
                    ));
                }
                if changed.is_empty() {
                    changed.push(
                        "another input of its key: the installer's version, `[env] extra_packages`, \
                         `system_site_packages` or the index settings"
                            .into(),
                    );
                }
            }
        }
        if would_build && changed.is_empty() {
            changed.push("its key is the same, but the cache has no environment for it".into());
        }
        out.push(EnvPlan {
            repo: checkout.name.clone(),
            would_build,
            key,
            changed,
            project,
        });
    }
    Ok(out)
}

/// "`name`: -removed, +added", when the two lists differ.
fn list_change(name: &str, before: &[String], now: &[String], out: &mut Vec<String>) {
    let (before_set, now_set): (BTreeSet<&String>, BTreeSet<&String>) =
        (before.iter().collect(), now.iter().collect());
    let mut parts: Vec<String> = before_set
        .difference(&now_set)
        .map(|r| format!("-{r}"))
        .collect();
    parts.extend(now_set.difference(&before_set).map(|a| format!("+{a}")));
    if !parts.is_empty() {
        out.push(format!("`{name}`: {}", parts.join(", ")));
    }
}

/// The environment for these dependencies, checked to work when it comes from the cache or
/// from the remote store's archive (a broken one is rebuilt once, here).
fn working_env(builder: &EnvBuilder, declared: &Declared, inferred: &[String]) -> Result<Env> {
    let (optional, declared) = (&declared.optional, &declared.requirements);
    let env = builder.build(declared, inferred, optional)?;
    if !env.cached || env.record.outcome == EnvOutcome::Failed {
        return Ok(env);
    }
    match builder.check(&env)? {
        Ok(()) => Ok(env),
        Err(why) => {
            if env.fetched {
                eprintln!(
                    "environment `{}` from the remote cache does not work on this host ({why}); it is built here",
                    env.record.key
                );
            } else {
                eprintln!(
                    "environment `{}` is broken ({why}); it is rebuilt",
                    env.record.key
                );
            }
            fs_err::remove_dir_all(&env.dir)?;
            // Not from the remote store again: its archive is the one that does not work.
            let rebuilt = builder.build_from(declared, inferred, optional, false)?;
            if rebuilt.record.outcome != EnvOutcome::Failed
                && let Err(why) = builder.check(&rebuilt)?
            {
                return Err(Error::env(format!(
                    "the rebuilt environment `{}` does not work either: {why}",
                    rebuilt.record.key
                )));
            }
            Ok(rebuilt)
        }
    }
}

impl EnvStage {
    /// A failure that may pass (the index, a timeout, a full disk): reported, never cached;
    /// the build exits 1 after writing what it could, and the next build tries again.
    fn may_pass(&mut self, repo: &str, e: &Error) {
        self.transient.push(format!("repo `{repo}`: {e}"));
        self.failures.push(FailureRecord {
            repo: repo.to_owned(),
            path: None,
            stage: "env".into(),
            reason: e.to_string(),
            log: None,
        });
    }

    /// Records a repository's environment: its line, its log (with the imports not installed,
    /// `skipped`, and why), its failure; `failed`: the reason a failed one is recorded with.
    fn record(
        &mut self,
        repo: &str,
        built: Env,
        skipped: &[SkippedImport],
        output: &Path,
        failed: String,
    ) -> Result<()> {
        // An environment without a folder (`EnvBuilder::unsupported`) was neither built nor
        // read: it is only failed.
        let installed = !built.dir.as_os_str().is_empty();
        self.counts.executed += u64::from(!built.cached && installed);
        self.counts.cached += u64::from(built.cached);
        let log = format!("logs/env-{repo}.log");
        // The environment's log is shared by the repositories of its key; what was not
        // installed, and why, is this repository's.
        let mut text = built.record.log.clone();
        for s in skipped {
            text.push_str(&format!(
                "not installed: `{}` ({}): {}\n",
                s.module, s.path, s.reason
            ));
        }
        write_if_changed(&output.join(&log), text.as_bytes())?;
        if built.record.outcome == EnvOutcome::Failed {
            self.counts.failed += 1;
            self.failures.push(FailureRecord {
                repo: repo.to_owned(),
                path: None,
                stage: "env".into(),
                reason: failed,
                log: Some(log.clone()),
            });
        }
        let project = match &built.project {
            Some(layer) => {
                let log = format!("logs/project-{repo}.log");
                write_if_changed(&output.join(&log), layer.record.log.as_bytes())?;
                Some(ProjectLine {
                    key: layer.record.key.clone(),
                    outcome: layer.record.outcome,
                    name: layer.record.name.clone(),
                    version: layer.record.version.clone(),
                    reason: layer.record.reason.clone(),
                    overlaid: layer.record.overlaid,
                    log,
                })
            }
            None => None,
        };
        let r = &built.record;
        // A project that could not be built leaves its environment only partial.
        let outcome = match (&project, r.outcome) {
            (Some(p), EnvOutcome::Ok)
                if p.outcome == r2e_core::records::ProjectOutcome::Partial =>
            {
                EnvOutcome::Partial
            }
            (_, outcome) => outcome,
        };
        self.lines.push(EnvLine {
            repo: repo.to_owned(),
            env_key: r.key.clone(),
            outcome,
            installer: r.installer.clone(),
            python_version: r.python_version.clone(),
            declared: r.declared.clone(),
            inferred: r.inferred.clone(),
            failed_packages: r.failed_packages.clone(),
            skipped_imports: skipped.to_vec(),
            rejected: r.rejected.clone(),
            lock_hash: r.lock_hash.clone(),
            lock: r.lock.clone(),
            log,
            project,
            image: None,
            image_files: None,
            capture: built.capture.as_ref().map(|c| c.line.clone()),
        });
        self.envs.insert(repo.to_owned(), Arc::new(built));
        Ok(())
    }
}

/// `install_requires=[...]` of a `setup.py`, read with Python's `ast` in the sandbox (the file is
/// parsed, never run).
fn setup_py_requires(
    text: &[u8],
    cache: &Cache,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
) -> Vec<String> {
    let Ok(scratch) = cache
        .dir(Bucket::Scratch)
        .map(|d| d.join(format!("env-{}", std::process::id())))
    else {
        return Vec::new();
    };
    let found = setup_py_in(text, sandbox, interpreter, &scratch);
    let _ = fs_err::remove_dir_all(&scratch);
    found
}

fn setup_py_in(
    text: &[u8],
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
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
        program: interpreter.executable.clone(),
        args: vec![
            "-I".into(),
            "-c".into(),
            script.into(),
            "setup_probe.py".into(),
        ],
        env: vec![],
        scratch: scratch.to_path_buf(),
        writable: vec![],
        readonly: interpreter.mounts(),
        hidden: vec![],
        network: false,
        limits: Limits {
            wall_seconds: 30,
            ..Limits::default()
        },
        image: None,
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

/// The environment of a repository as a build recorded it in `envs.jsonl`, when it is still in
/// the cache, and how to run code in it for a repository checked out at `root`.
pub fn runtime_of(cache: &Cache, line: &EnvLine, root: &Path) -> Option<Runtime> {
    if let Some(tag) = &line.image {
        return Some(r2e_exec::image::image_runtime(tag, line, root));
    }
    let dir = cache.path(Bucket::Envs).join(&line.env_key);
    let python = dir.join("venv").join("bin").join("python");
    if !(dir.join("record").exists() && python.exists()) {
        return None;
    }
    cache.note_use(&dir);
    // Its interpreter's installation: where the environment's `python` leads.
    let base = std::fs::canonicalize(&python)
        .ok()
        .and_then(|real| real.parent()?.parent().map(Path::to_path_buf));
    // Its project layer, when the build made one and the cache still holds it.
    let project = match &line.project {
        Some(p) => {
            let site = project::layer_site(cache, &p.key);
            if !site.is_dir() {
                return None;
            }
            cache.note_use(site.parent().expect("a layer's site is in its folder"));
            Some(site)
        }
        None => None,
    };
    Some(Runtime {
        python,
        env: dir,
        repo: root.to_path_buf(),
        interpreter: base
            .and_then(|b| r2e_exec::sandbox::local::outside_system(&b))
            .into_iter()
            .collect(),
        project,
        image: None,
    })
}

/// Every environment of a build, by repository name.
pub type Envs = std::collections::BTreeMap<String, Arc<Env>>;

#[cfg(test)]
mod tests {
    use super::*;
    use r2e_core::cache::LocalStore;
    use r2e_core::cache::remote::Remote;
    use r2e_core::keys::InstallerId;

    #[test]
    fn a_host_with_another_interpreter_or_installer_than_the_first_is_bad_input() {
        let shared = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("repo")).unwrap();
        std::fs::write(
            dir.path().join("pipeline.toml"),
            "[[repo]]\npath = \"repo\"\n",
        )
        .unwrap();
        let cfg = r2e_core::config::load(&dir.path().join("pipeline.toml")).unwrap();
        let host = |python: &str, uv: &str| {
            let root = tempfile::tempdir().unwrap();
            let mut cache = Cache::open(root.path()).unwrap();
            cache.set_remote(Remote::new(
                Arc::new(LocalStore::new(shared.path())),
                "file:///shared",
                std::time::Duration::from_secs(6),
            ));
            let interpreter = Interpreter {
                executable: PathBuf::from("/usr/bin/python3"),
                version: python.into(),
                stdlib_modules: BTreeSet::new(),
                bundled_pip: String::new(),
                base_prefix: PathBuf::from("/usr"),
                site: PathBuf::from("/usr/lib/python3/dist-packages"),
                wheels: None,
            };
            let installer = Installer {
                uv: None,
                id: InstallerId {
                    name: "uv".into(),
                    version: uv.into(),
                },
            };
            let checked = same_as_first_host(&cfg, &cache, &interpreter, &installer);
            drop(cache);
            drop(root);
            checked
        };
        assert!(host("3.11.7", "0.13.8").is_ok(), "the first host");
        assert!(host("3.11.7", "0.13.8").is_ok(), "a host like it");
        for (python, uv, says) in [
            ("3.12.1", "0.13.8", "Python 3.12.1 and uv 0.13.8"),
            ("3.11.7", "0.9.0", "uv 0.9.0"),
        ] {
            let e = host(python, uv).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let text = e.to_string();
            assert!(
                text.contains(says) && text.contains("used Python 3.11.7 and uv 0.13.8"),
                "{text}"
            );
        }
    }
}
