//! `r2e export --format harbor DIR`: the export (`export.rs`: the environment images, the
//! dataset) with one **Harbor task folder** per instance and per bug-fix task under
//! `DIR/tasks/`, and
//! `DIR/registry.json` naming them as one dataset. Harbor's task format is its `task.toml`
//! schema 1.4 (`harbor.models.task.config.TaskConfig`, harbor 0.25.0).
//!
//! A task folder:
//! - `task.toml`: `[task]` (an `r2e/…` name), `[metadata]` (r2e's provenance: the dataset's
//!   version, the instance, its harness hash, `env_lock`, dates, licence), `[verifier]` and
//!   `[agent]` timeouts, `[environment]` (the instance's own limits, no network);
//! - `instruction.md`: the function to write, where, and its specification; or the bug-fix
//!   task's problem statement;
//! - `environment/Dockerfile`: the repository's environment image with the function stubbed
//!   out (`Bench::stub_module`) or the task's broken state (`Bench::broken_module`), the module
//!   at `environment/module.py`;
//! - `solution/solve.sh`: writes the reference, the gold fix (the module as the commit has it);
//! - `tests/test.sh`: the verifier (`r2e_verify.py`, with the sha256 of each file it reads);
//!   `tests/r2e/`: the harness, the runner's files, `task.json` (`VerifierTask`: the
//!   original module and the reference's recorded calls) and `r2e-verdict`, the check path's
//!   splice and verdict as a program. Harbor copies `tests/` into the container only after
//!   the agent is done.
//!
//! **Images.** Without a registry, the images are the export's: `r2e import DIR` loads them,
//! and the Dockerfiles start from their tags, which the export's archives hold (no name that
//! exists only on the building machine). With one (`--registry HOST[:PORT]/PREFIX`, or
//! `[sandbox] registry`), each repository's environment image is pushed as
//! `HOST/PREFIX/r2e-env`, each task's image (its Dockerfile, built from the environment image
//! by digest) as `HOST/PREFIX/r2e-task:NAME`, and `task.toml` names the task's image by
//! digest (`[environment] docker_image`): it pulls on any machine that reaches the registry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::Digest;

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::{
    BugOrigin, BugfixTask, Instance, Manifest, OutputFile, read_jsonl, resolve_output,
};
use r2e_exec::image::IMAGE_REPO;
use r2e_exec::sandbox::docker::{self, Docker};
use r2e_exec::verifier::VerifierTask;
use r2e_pipeline::bench::Bench;

/// The version of Harbor's `task.toml` schema the tasks follow (harbor 0.25.0).
pub const HARBOR_SCHEMA: &str = "1.4";
/// What an agent may take on a task, in seconds.
const AGENT_TIMEOUT_SECONDS: u64 = 1800;
/// The task's disk, in MB: the image's own files and the agent's and tests' scratch.
const STORAGE_MB: u64 = 10240;

/// `task.toml`.
#[derive(Serialize)]
struct TaskToml<'a> {
    schema_version: &'a str,
    task: TaskInfo,
    metadata: BTreeMap<&'a str, String>,
    verifier: Timeout,
    agent: Timeout,
    environment: Environment,
}

#[derive(Serialize)]
struct TaskInfo {
    name: String,
    description: String,
    keywords: Vec<String>,
}

#[derive(Serialize)]
struct Timeout {
    timeout_sec: f64,
}

#[derive(Serialize)]
struct Environment {
    /// The task's image by digest, when pushed to a registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    docker_image: Option<String>,
    cpus: u32,
    memory_mb: u64,
    storage_mb: u64,
    network_mode: &'static str,
    workdir: &'static str,
}

/// One dataset of `registry.json` (Harbor's `DatasetSpec`).
#[derive(Serialize)]
struct DatasetSpec {
    name: String,
    version: String,
    description: String,
    tasks: Vec<RegistryTask>,
}

#[derive(Serialize)]
struct RegistryTask {
    name: String,
    path: String,
}

/// A name fit for a folder and for Harbor's `org/name` (letters, digits, `.`, `_`, `-`; no
/// `..`), unique by the blake3 of `id`.
pub fn task_name(id: &str) -> String {
    let mut slug: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    while slug.contains("..") {
        slug = slug.replace("..", ".-");
    }
    let slug = slug.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let slug: String = slug.chars().take(80).collect();
    let hash = blake3::hash(id.as_bytes()).to_hex();
    format!("{slug}-{}", &hash[..8])
}

/// A registry the tasks' images are pushed to, and the daemon that holds them.
pub struct Push<'a> {
    pub docker: &'a Docker,
    /// `HOST[:PORT]/PREFIX`.
    pub registry: &'a str,
}

/// Harbor's Docker environment enforcing `no-network` with Harbor's own Compose file where
/// its egress control cannot run (its images are on Docker Hub): `--env
/// r2e_harbor_env:NoNetworkDocker`, with `harbor/` on `PYTHONPATH`.
const HARBOR_ENV: &str = include_str!("harbor_env.py");
/// Where the export holds it.
const HARBOR_ENV_FILE: &str = "harbor/r2e_harbor_env.py";

/// The repository (under a registry's prefix) environment images are pushed to.
const ENV_REPO: &str = "r2e-env";
/// The repository (under a registry's prefix) task images are pushed to, each tagged with its
/// task's name.
const TASK_REPO: &str = "r2e-task";

/// One task to write: what the agent starts from and what checks it.
struct Planned<'a> {
    name: String,
    instance: &'a Instance,
    /// `implementation` or `bugfix`.
    kind: &'static str,
    /// The module the agent is given (the function stubbed out, or the broken state).
    given: String,
    verifier: VerifierTask,
    instruction: String,
    description: String,
    /// `[metadata]` besides the instance's.
    metadata: Vec<(&'static str, String)>,
}

/// Writes `tasks/` and `registry.json` into `dir` (an export being written): one task per
/// instance of `bench` and one per bug-fix task of the build (`bugfix.jsonl`), each over the
/// image `tags` gives its repository; with `push`, each task's image is pushed to its registry.
/// The names of the tasks written.
pub fn write_tasks(
    cfg: &Config,
    bench: &Bench,
    dir: &Path,
    tags: &BTreeMap<String, String>,
    manifest: &Manifest,
    push: Option<&Push>,
) -> Result<Vec<String>> {
    let verdict = verdict_program()?;
    // The runner's files and their hashes: the same in every task.
    let runner: Vec<(&str, &[u8], String)> = r2e_exec::py::RUNNER
        .iter()
        .map(|(n, text)| (*n, text.as_bytes(), hex_sha256(text.as_bytes())))
        .collect();
    let licenses: BTreeMap<&str, &str> = manifest
        .repos
        .iter()
        .filter_map(|r| Some((r.name.as_str(), r.license.as_deref()?)))
        .collect();
    let timeout = cfg.sandbox.run_timeout_seconds;
    let cannot = |id: &str, e: String| Error::input(format!("`{id}` cannot be exported: {e}"));
    let mut planned: Vec<Planned> = Vec::new();
    for (ix, instance) in bench.instances().iter().enumerate() {
        let verifier = bench
            .verifier_task(ix, timeout)
            .map_err(|e| cannot(&instance.id, e))?;
        let given = bench
            .stub_module(ix)
            .ok_or_else(|| cannot(&instance.id, "its module cannot be stubbed".into()))?;
        planned.push(Planned {
            name: task_name(&instance.id),
            instance,
            kind: "implementation",
            given,
            verifier,
            instruction: instruction(instance),
            description: format!(
                "Write `{}` in `{}` of {} from its specification",
                instance.qualname, instance.path, instance.repo
            ),
            metadata: Vec::new(),
        });
    }
    let tasks_file = resolve_output(&cfg.output).join(OutputFile::Bugfix.name());
    let tasks: Vec<BugfixTask> = read_jsonl(&tasks_file)?.unwrap_or_default();
    for task in &tasks {
        let ix = bench.index(&task.instance)?;
        let instance = &bench.instances()[ix];
        let mut verifier = bench
            .verifier_task(ix, timeout)
            .map_err(|e| cannot(&task.instance_id, e))?;
        let given = bench
            .broken_module(ix, task)
            .map_err(|e| cannot(&task.instance_id, e.to_string()))?;
        verifier.instance_id = task.instance_id.clone();
        verifier.bugfix = Some(task.clone());
        let origin = match task.origin {
            BugOrigin::Mutant => "mutant",
            BugOrigin::History => "history",
        };
        planned.push(Planned {
            name: task_name(&task.instance_id),
            instance,
            kind: "bugfix",
            given,
            verifier,
            instruction: bugfix_instruction(instance, task),
            description: format!("Fix a bug in {} from an issue's report", instance.repo),
            metadata: vec![
                ("r2e_task_id", task.instance_id.clone()),
                ("origin", origin.into()),
                ("depth", task.depth.to_string()),
                ("fail_to_pass", task.fail_to_pass.len().to_string()),
                ("pass_to_pass", task.pass_to_pass.len().to_string()),
            ],
        });
    }
    let mut names = Vec::new();
    // Each environment image by digest, once pushed.
    let mut pushed: BTreeMap<&str, String> = BTreeMap::new();
    for p in &planned {
        let repo = p.instance.repo.as_str();
        let Some(tag) = tags.get(repo) else {
            continue;
        };
        let from = match push {
            Some(push) => match pushed.get(repo) {
                Some(reference) => reference.clone(),
                None => {
                    let short = tag.rsplit(':').next().unwrap_or(tag);
                    let env_repo = format!("{}/{ENV_REPO}", push.registry);
                    let reference = docker::push_by_digest(push.docker, tag, &env_repo, short)?;
                    pushed.insert(repo, reference.clone());
                    reference
                }
            },
            None => tag.clone(),
        };
        let folder = dir.join("tasks").join(&p.name);
        let path = &p.verifier.path;
        let recipe = dockerfile(&from, push.is_some(), &p.verifier.instance_id, path);
        write(&folder.join("environment/Dockerfile"), recipe.as_bytes())?;
        write(&folder.join("environment/module.py"), p.given.as_bytes())?;
        let image = match push {
            Some(push) => Some(push_task_image(push, &p.name, &recipe, &p.given)?),
            None => None,
        };
        let toml = task_toml(cfg, p, manifest, licenses.get(repo), image);
        write(&folder.join("task.toml"), toml.as_bytes())?;
        write(&folder.join("instruction.md"), p.instruction.as_bytes())?;
        write(
            &folder.join("solution/reference.py"),
            p.verifier.original.as_bytes(),
        )?;
        write_script(&folder.join("solution/solve.sh"), &solve(path))?;
        // The verifier's files, each with its sha256 in test.sh.
        let task_json = serde_json::to_vec_pretty(&p.verifier).map_err(Error::internal)?;
        let tests = folder.join("tests/r2e");
        let mut hashes = BTreeMap::new();
        for (file, bytes) in [
            ("task.json", task_json.as_slice()),
            ("harness.py", p.instance.harness.as_bytes()),
        ] {
            write(&tests.join(file), bytes)?;
            hashes.insert(file.to_owned(), hex_sha256(bytes));
        }
        for (file, bytes, hash) in &runner {
            write(&tests.join(file), bytes)?;
            hashes.insert((*file).to_owned(), hash.clone());
        }
        // The verdict program: one file on disk for every task (a hard link each).
        let program = tests.join("r2e-verdict");
        if std::fs::hard_link(&verdict.0, &program).is_err() {
            fs_err::copy(&verdict.0, &program)?;
        }
        hashes.insert("r2e-verdict".into(), verdict.1.clone());
        write_script(
            &folder.join("tests/test.sh"),
            &test_sh(&p.verifier.instance_id, &hashes),
        )?;
        names.push(p.name.clone());
    }
    let registry = vec![DatasetSpec {
        name: cfg.name.clone(),
        version: manifest.version.clone(),
        description: format!(
            "r2e dataset `{}`: {} tasks, each checked by its instance's equivalence harness \
             (write a function from its specification, or fix a bug from an issue's report)",
            cfg.name,
            names.len()
        ),
        tasks: names
            .iter()
            .map(|n| RegistryTask {
                name: format!("r2e/{n}"),
                path: format!("tasks/{n}"),
            })
            .collect(),
    }];
    let json = serde_json::to_vec_pretty(&registry).map_err(Error::internal)?;
    write(&dir.join("registry.json"), &json)?;
    write(&dir.join(HARBOR_ENV_FILE), HARBOR_ENV.as_bytes())?;
    write(
        &dir.join("README.md"),
        readme(&cfg.name, names.len(), push.map(|p| p.registry)).as_bytes(),
    )?;
    Ok(names)
}

/// Builds the image of the task `name` (its `Dockerfile`, with `module` as `module.py`), pushes
/// it to the registry as `r2e-task:NAME` (the daemon keeps it under that tag): the reference
/// by digest the registry holds it under.
fn push_task_image(push: &Push, name: &str, dockerfile: &str, module: &str) -> Result<String> {
    let repo = format!("{}/{TASK_REPO}", push.registry);
    // A tag starts with a letter, a digit or `_` (a name's slug may be empty: `-HASH`).
    let tag = if name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.to_owned()
    } else {
        format!("_{name}")
    };
    let local = format!("{repo}:{tag}");
    use std::io::Write;
    docker::build_image(push.docker, &local, |out| {
        let mut context = tar::Builder::new(out);
        for (file, text) in [("Dockerfile", dockerfile), ("module.py", module)] {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            h.set_size(text.len() as u64);
            h.set_mtime(0);
            context.append_data(&mut h, file, text.as_bytes())?;
        }
        context.into_inner()?.flush()
    })?;
    docker::push_by_digest(push.docker, &local, &repo, &tag)
}

/// The verdict program beside this executable (`r2e-verdict`, built with it): its path and its
/// sha256.
fn verdict_program() -> Result<(PathBuf, String)> {
    let exe = std::env::current_exe().map_err(|e| Error::env(format!("cannot find r2e: {e}")))?;
    let path = exe.with_file_name("r2e-verdict");
    let bytes = fs_err::read(&path).map_err(|e| {
        Error::env(format!(
            "the verdict program `r2e-verdict` is not beside r2e ({e}): install both"
        ))
    })?;
    Ok((path, hex_sha256(&bytes)))
}

fn hex_sha256(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    fs_err::create_dir_all(path.parent().expect("a file is in a folder"))?;
    fs_err::write(path, bytes)?;
    Ok(())
}

fn write_script(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    write(path, text.as_bytes())?;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn task_toml(
    cfg: &Config,
    p: &Planned,
    manifest: &Manifest,
    license: Option<&&str>,
    docker_image: Option<String>,
) -> String {
    let instance = p.instance;
    let mut metadata = BTreeMap::from([
        ("r2e_kind", p.kind.to_owned()),
        ("r2e_dataset", cfg.name.clone()),
        ("r2e_dataset_version", manifest.version.clone()),
        ("r2e_instance_id", instance.id.clone()),
        ("r2e_harness_hash", instance.harness_hash.clone()),
        ("env_lock", instance.env_lock.clone()),
        ("repo", instance.repo.clone()),
        ("commit", instance.commit.clone()),
        ("path", instance.path.clone()),
        ("qualname", instance.qualname.clone()),
    ]);
    metadata.extend(p.metadata.iter().cloned());
    for (key, value) in [
        ("created_at", &instance.created_at),
        ("changed_at", &instance.changed_at),
    ] {
        if let Some(v) = value {
            metadata.insert(key, v.clone());
        }
    }
    if let Some(l) = license {
        metadata.insert("license", (**l).to_owned());
    }
    // The harness's runs: its limit, three times that as the backstop, and the verifier's own
    // start.
    let verifier = 3 * cfg.sandbox.run_timeout_seconds + 60;
    let toml = TaskToml {
        schema_version: HARBOR_SCHEMA,
        task: TaskInfo {
            name: format!("r2e/{}", p.name),
            description: p.description.clone(),
            keywords: vec!["r2e".into(), "python".into(), p.kind.into()],
        },
        metadata,
        verifier: Timeout {
            timeout_sec: verifier as f64,
        },
        agent: Timeout {
            timeout_sec: AGENT_TIMEOUT_SECONDS as f64,
        },
        environment: Environment {
            docker_image,
            cpus: 1,
            memory_mb: cfg.sandbox.memory_mib,
            storage_mb: STORAGE_MB,
            network_mode: "no-network",
            workdir: IMAGE_REPO,
        },
    };
    toml::to_string(&toml).expect("a task.toml serializes")
}

fn instruction(instance: &Instance) -> String {
    let spec = instance
        .spec
        .as_deref()
        .or(instance.docstring.as_deref())
        .unwrap_or("");
    format!(
        "# Write `{q}`\n\nThe repository of `{repo}` is at `{IMAGE_REPO}`. In `{path}`, \
         `{q}` has its signature and documentation but no body: it raises \
         `NotImplementedError`. Write its body so that it does what its documentation says, \
         in that file. Only `{q}` is taken from the file when it is checked; change nothing \
         else the check could need. The environment's Python is `/r2e/env/bin/python`.\n\n\
         ## Its documentation\n\n```\n{spec}\n```\n",
        q = instance.qualname,
        repo = instance.repo,
        path = instance.path,
        spec = spec.trim_end(),
    )
}

/// A bug-fix task's instruction: the issue's report, and where the repository is.
fn bugfix_instruction(instance: &Instance, task: &BugfixTask) -> String {
    format!(
        "# Fix the bug\n\nThe repository of `{repo}` is at `{IMAGE_REPO}`. This was reported:\n\n\
         {statement}\n\nFind the cause and fix it in the repository's code. Hidden tests check \
         the fix: those that fail now must pass, and the others must keep passing. The \
         environment's Python is `/r2e/env/bin/python`.\n",
        repo = instance.repo,
        statement = task.problem_statement.trim_end(),
    )
}

/// The task's Dockerfile: `from` (the environment image, by digest when `pushed`) with the module
/// the agent starts from.
fn dockerfile(from: &str, pushed: bool, id: &str, path: &str) -> String {
    let whence = if pushed {
        "by digest, from its registry"
    } else {
        "load it with `r2e import` from the export that holds this task"
    };
    format!(
        "# r2e task {id}: its repository's environment image ({whence}), with the module the \
         agent starts from.\nFROM {from}\nCOPY module.py {IMAGE_REPO}/{path}\nENV \
         PATH=/r2e/env/bin:/usr/local/bin:/usr/bin:/bin\nWORKDIR {IMAGE_REPO}\n# The agent edits \
         the repository, and the verifier needs root to keep the original from the \
         candidate\n# (the base image's user is the sandbox's unprivileged one).\nUSER root\n",
        id = id.replace('\n', " "),
    )
}

fn solve(path: &str) -> String {
    format!(
        "#!/usr/bin/env bash\n# The reference: `{path}` as the repository's commit has it.\nset \
         -eu\ncp /solution/reference.py {IMAGE_REPO}/{path}\n"
    )
}

fn test_sh(id: &str, hashes: &BTreeMap<String, String>) -> String {
    let hashes = serde_json::to_string(hashes).expect("hashes serialize");
    let verify = r2e_exec::py::VERIFY.replacen("HASHES = {}", &format!("HASHES = {hashes}"), 1);
    format!(
        "#!/usr/bin/env bash\n# r2e's verifier of instance {id} (r2e_verify.py): reward 1 when \
         the function passes its harness.\nPY=/r2e/env/bin/python\nif [ ! -x \"$PY\" ]; then\n  \
         echo \"r2e verifier: no interpreter at $PY\" >&2\n  exit 1\nfi\nexec \"$PY\" -I - \
         /tests <<'R2E_VERIFY_EOF'\n{verify}R2E_VERIFY_EOF\n",
        id = id.replace('\n', " "),
    )
}

/// The export's `README.md`: a dataset card whose front matter carries the Hugging Face Hub's
/// `environment` and `harbor` tags (how the Hub lists Harbor task sets), and how to run them.
fn readme(name: &str, tasks: usize, registry: Option<&str>) -> String {
    let images = match registry {
        Some(registry) => format!(
            "Each task's `task.toml` names its image by digest (`[environment] docker_image`), \
             in the registry `{registry}`: a machine that reaches it pulls them. Each \
             `environment/Dockerfile` rebuilds the same image from the environment image, also \
             by digest."
        ),
        None => "Their environments are this export's images (`images/`): **load them first**, \
                 on the machine that runs the tasks:\n\n    r2e import ."
            .to_owned(),
    };
    format!(
        "---\npretty_name: {name}\ntags:\n- environment\n- harbor\n- r2e\n- code\n- python\n---\n\n\
         # {name}: r2e tasks for Harbor\n\n{tasks} task folders under `tasks/`, named in \
         `registry.json`, each following Harbor's `task.toml` schema {HARBOR_SCHEMA}.\n\n\
         {images}\n\nThen, for example:\n\n    harbor run -p tasks/NAME --agent oracle\n\n\
         The tasks allow no network. Harbor's Docker environment enforces that with images it \
         pulls from Docker Hub; where Docker Hub cannot be reached it refuses the tasks. Then \
         run them with the environment in `harbor/`, which enforces it with Harbor's own \
         Compose file (no network but loopback) and checks it:\n\n    PYTHONPATH=harbor \
         harbor run -p tasks --agent oracle --env r2e_harbor_env:NoNetworkDocker\n",
        name = serde_json::Value::from(name),
    )
}
