//! `r2e image base`: the Docker backend's base image (`sandbox::docker`), made from the
//! configured interpreter and the pinned coverage.py (`stages::environment::COVERAGE`), which it
//! installs from the package index into the cache once (`tools-v1/coverage-…`), in the local
//! sandbox, with the network.

use std::path::{Path, PathBuf};

use crate::interpreter::Interpreter;
use crate::jobs::Runtime;
use crate::py::COVERAGE;
use crate::sandbox::docker::{self, BaseSpec};
use crate::sandbox::{ImageRun, Job, Limits, Sandbox};
use r2e_core::cache::{Bucket, Cache};
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::EnvLine;

/// The base image's tag, and whether it was built now (else the daemon had it).
pub fn base(cfg: &Config, sandbox: &dyn Sandbox) -> Result<(String, bool)> {
    let cache = Cache::open(&cfg.cache)?;
    let tools = cache.dir(Bucket::Tools)?;
    let found = base_in(cfg, &tools, sandbox, None);
    if let Ok((_, dir)) = &found {
        cache.note_use(dir);
    }
    found.map(|(built, _)| built)
}

/// [`base`] with coverage.py in `tools` (the cache's tools folder, whose lock the caller
/// holds): the tag, whether it was built, and coverage.py's folder. With `share` (a remote
/// store), an image the daemon lacks is taken from the store when another host put it there,
/// and one built here is put there (`image_share`).
pub fn base_in(
    cfg: &Config,
    tools: &std::path::Path,
    sandbox: &dyn Sandbox,
    share: Option<&crate::image_share::Share>,
) -> Result<((String, bool), PathBuf)> {
    let interpreter = Interpreter::probe(&cfg.env.python)?;
    let minor: Vec<&str> = interpreter.version.split('.').take(2).collect();
    let lib = format!("python{}", minor.join("."));
    let coverage_dir = coverage_for(tools, sandbox, &interpreter, cfg)?;
    let daemon = docker::connect()?;
    let userland = match &cfg.sandbox.base_image {
        Some(name) => Some(docker::userland(&daemon, name, tools)?),
        None => None,
    };
    let spec = BaseSpec {
        site: interpreter.site.clone(),
        prefix: interpreter.base_prefix.clone(),
        lib,
        python_version: interpreter.version.clone(),
        coverage: COVERAGE.into(),
        coverage_dir,
        userland,
        wheels: interpreter.wheels.clone(),
    };
    let files = docker::base_files(&spec)?;
    let tag = docker::base_tag(&spec, &files.0, &tools.join("base-tag.memo"))?;
    let make = || -> Result<bool> {
        let built = docker::build_base(&daemon, &spec, &files, &tag)?;
        if built && let Err(e) = runs_in(&daemon, &tag, &interpreter, &spec, tools) {
            // An image whose interpreter cannot run is no base: the next build makes it again.
            let _ = docker::remove_image(&daemon, &tag);
            return Err(e);
        }
        Ok(built)
    };
    let built = match share {
        Some(share) => share.obtain(&daemon, &tag, &make)?,
        None => make()?,
    };
    Ok(((tag, built), spec.coverage_dir))
}

/// Checks a base image just built: its interpreter starts as a job does and imports
/// coverage.py, and over an image's system, that system's shell still runs (it now loads the
/// interpreter's libraries).
fn runs_in(
    daemon: &docker::Docker,
    tag: &str,
    interpreter: &Interpreter,
    spec: &BaseSpec,
    tools: &std::path::Path,
) -> Result<()> {
    let image = docker::DockerSandbox::new(daemon.clone(), tag.to_owned());
    let scratch = tools.join(format!("scratch-check{}", std::process::id()));
    fs_err::create_dir_all(&scratch)?;
    let script = format!(
        "import sys, coverage\nassert sys.version.split()[0] == {:?}, sys.version\nprint(coverage.__version__)",
        interpreter.version
    );
    let mut checks = vec![(
        interpreter.executable.clone(),
        vec!["-I".to_owned(), "-c".into(), script],
    )];
    if spec.userland.is_some() {
        checks.push((
            "/bin/sh".into(),
            vec!["-c".into(), "ls / >/dev/null".into()],
        ));
    }
    let checked = checks.into_iter().try_for_each(|(program, args)| {
        let job = Job {
            program: program.clone(),
            args,
            env: vec![],
            scratch: scratch.clone(),
            writable: vec![],
            readonly: vec![],
            hidden: vec![],
            network: false,
            limits: Limits {
                wall_seconds: 120,
                cpu_seconds: 120,
                memory_mib: 1024,
                processes: 64,
                file_size_mib: 64,
            },
            image: None,
        };
        match image.run(&job) {
            Ok(o) if o.success() => Ok(()),
            Ok(o) => Err((
                program,
                String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            )),
            Err(e) => Err((program, e.to_string())),
        }
    });
    let _ = fs_err::remove_dir_all(&scratch);
    checked.map_err(|(program, said)| {
        Error::env(format!(
            "the base image `{tag}`{} cannot run `{}`: {said}{}",
            spec.userland
                .as_ref()
                .map(|u| format!(" (made on `{}`)", u.name))
                .unwrap_or_default(),
            program.display(),
            if spec.userland.is_some() {
                " (`base_image` must be a glibc system with merged /usr, where `/lib64` and `/lib` lead into `/usr`, as Debian 12 and Ubuntu 22.04 and later are)"
            } else {
                ""
            }
        ))
    })
}

/// The pinned coverage.py installed for this interpreter (`pip install --target`), from the
/// cache, or from the package index into it.
fn coverage_for(
    tools: &std::path::Path,
    sandbox: &dyn Sandbox,
    interpreter: &Interpreter,
    cfg: &Config,
) -> Result<PathBuf> {
    fs_err::create_dir_all(tools)?;
    let tools = tools.to_path_buf();
    let dir = tools.join(format!(
        "{}-py{}",
        COVERAGE.replace("==", "-"),
        interpreter.version
    ));
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&tmp);
    let scratch = tools.join(format!("scratch{}", std::process::id()));
    fs_err::create_dir_all(&scratch)?;
    let job = Job {
        program: interpreter.executable.clone(),
        args: vec![
            "-m".into(),
            "pip".into(),
            "install".into(),
            "--quiet".into(),
            "--disable-pip-version-check".into(),
            "--no-deps".into(),
            "--no-compile".into(),
            "--target".into(),
            tmp.to_string_lossy().into_owned(),
            COVERAGE.into(),
        ],
        env: cfg.env.passthrough.clone(),
        scratch: scratch.clone(),
        writable: vec![tools.clone()],
        readonly: interpreter
            .mounts()
            .into_iter()
            .chain(cfg.env.index_mounts())
            .collect(),
        hidden: vec![],
        network: true,
        limits: Limits {
            wall_seconds: 300,
            cpu_seconds: 600,
            memory_mib: 2048,
            processes: 256,
            file_size_mib: 512,
        },
        image: None,
    };
    let out = sandbox.run(&job);
    let _ = fs_err::remove_dir_all(&scratch);
    match out {
        Ok(o) if o.success() => {}
        Ok(o) => {
            let _ = fs_err::remove_dir_all(&tmp);
            return Err(Error::env(format!(
                "installing `{COVERAGE}` for the base image failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Err(e) => {
            let _ = fs_err::remove_dir_all(&tmp);
            return Err(e);
        }
    }
    fs_err::write(tmp.join(".complete"), "")?;
    if dir.exists() {
        let _ = fs_err::remove_dir_all(&tmp);
    } else {
        fs_err::rename(&tmp, &dir)?;
    }
    Ok(dir)
}

/// Where an environment image holds the environment (a virtual environment's folder).
pub const IMAGE_ENV: &str = "/r2e/env";
/// Where it holds the project layer.
pub const IMAGE_PROJECT: &str = "/r2e/project";
/// Where it holds the repository's files.
pub const IMAGE_REPO: &str = "/r2e/repo";

/// The runtime of an environment image: everything at its place in the image, and the
/// repository's files also at `root` on this machine (to tell a hidden path's kind).
pub fn image_runtime(tag: &str, line: &EnvLine, root: &Path) -> Runtime {
    Runtime {
        python: Path::new(IMAGE_ENV).join("bin").join("python"),
        env: IMAGE_ENV.into(),
        repo: IMAGE_REPO.into(),
        interpreter: Vec::new(),
        project: line.project.as_ref().map(|_| PathBuf::from(IMAGE_PROJECT)),
        image: Some(ImageRun {
            tag: tag.to_owned(),
            same_files: vec![(IMAGE_REPO.into(), root.to_path_buf())],
        }),
    }
}
