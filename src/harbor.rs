//! `r2e export --format harbor DIR`: the export (`export.rs`: the environment images, the
//! dataset) with one **Harbor task folder** per instance under `DIR/tasks/`, and
//! `DIR/registry.json` naming them as one dataset. Harbor's task format is its `task.toml`
//! schema 1.4 (`harbor.models.task.config.TaskConfig`, harbor 0.25.0).
//!
//! A task folder:
//! - `task.toml`: `[task]` (an `r2e/…` name), `[metadata]` (r2e's provenance: the dataset's
//!   version, the instance, its harness hash, `env_lock`, dates, licence), `[verifier]` and
//!   `[agent]` timeouts, `[environment]` (the instance's own limits, no network);
//! - `instruction.md`: the function to write, where, and its specification;
//! - `environment/Dockerfile`: the repository's environment image with the function stubbed
//!   out (`Bench::stub_module`), the module at `environment/module.py`;
//! - `solution/solve.sh`: writes the reference (the module as the commit has it);
//! - `tests/test.sh`: the verifier (`r2e_verify.py`, with the sha256 of each file it reads);
//!   `tests/r2e/`: the harness, the runner's files, `task.json` (`VerifierTask`: the
//!   original module and the reference's recorded calls) and `r2e-verdict`, the check path's
//!   splice and verdict as a program. Harbor copies `tests/` into the container only after
//!   the agent is done.
//!
//! The images are the export's: `r2e import DIR` loads them, and the Dockerfiles start from
//! their tags, which the export's archives hold (no name that exists only on the building
//! machine).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::Digest;

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::records::{Instance, Manifest};
use r2e_exec::image::IMAGE_REPO;
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

/// Writes `tasks/` and `registry.json` into `dir` (an export being written): one task per
/// instance of `bench`, its image the tag `tags` gives its repository. The names of the
/// tasks written.
pub fn write_tasks(
    cfg: &Config,
    bench: &Bench,
    dir: &Path,
    tags: &BTreeMap<String, String>,
    manifest: &Manifest,
) -> Result<Vec<String>> {
    let verdict = verdict_program()?;
    let licenses: BTreeMap<&str, &str> = manifest
        .repos
        .iter()
        .filter_map(|r| Some((r.name.as_str(), r.license.as_deref()?)))
        .collect();
    let mut names = Vec::new();
    for (ix, instance) in bench.instances().iter().enumerate() {
        let Some(tag) = tags.get(&instance.repo) else {
            continue;
        };
        let name = task_name(&instance.id);
        let task = bench
            .verifier_task(ix, cfg.sandbox.run_timeout_seconds)
            .map_err(|e| {
                Error::input(format!(
                    "instance `{}` cannot be exported: {e}",
                    instance.id
                ))
            })?;
        let stub = bench.stub_module(ix).ok_or_else(|| {
            Error::internal(format!("the module of `{}` cannot be stubbed", instance.id))
        })?;
        let folder = dir.join("tasks").join(&name);
        let toml = task_toml(
            cfg,
            instance,
            &name,
            manifest,
            licenses.get(instance.repo.as_str()),
        );
        write(&folder.join("task.toml"), toml.as_bytes())?;
        write(
            &folder.join("instruction.md"),
            instruction(instance).as_bytes(),
        )?;
        write(
            &folder.join("environment/Dockerfile"),
            dockerfile(tag, instance).as_bytes(),
        )?;
        write(&folder.join("environment/module.py"), stub.as_bytes())?;
        write(
            &folder.join("solution/reference.py"),
            task.original.as_bytes(),
        )?;
        write_script(&folder.join("solution/solve.sh"), &solve(instance))?;
        // The verifier's files, each with its sha256 in test.sh.
        let task_json = serde_json::to_vec_pretty(&task).map_err(Error::internal)?;
        let mut files: Vec<(String, Vec<u8>)> = vec![
            ("task.json".into(), task_json),
            ("harness.py".into(), instance.harness.as_bytes().to_vec()),
        ];
        files.extend(
            r2e_exec::py::RUNNER
                .iter()
                .map(|(n, text)| ((*n).to_owned(), text.as_bytes().to_vec())),
        );
        let tests = folder.join("tests/r2e");
        let mut hashes = BTreeMap::new();
        for (file, bytes) in &files {
            write(&tests.join(file), bytes)?;
            hashes.insert(file.clone(), hex_sha256(bytes));
        }
        // The verdict program: one file on disk for every task (a hard link each).
        let program = tests.join("r2e-verdict");
        if std::fs::hard_link(&verdict.0, &program).is_err() {
            fs_err::copy(&verdict.0, &program)?;
        }
        hashes.insert("r2e-verdict".into(), verdict.1.clone());
        write_script(
            &folder.join("tests/test.sh"),
            &test_sh(&instance.id, &hashes),
        )?;
        names.push(name);
    }
    let registry = vec![DatasetSpec {
        name: cfg.name.clone(),
        version: manifest.version.clone(),
        description: format!(
            "r2e dataset `{}` ({} instances): write a function from its specification; each \
             task is checked by its equivalence harness",
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
    write(&dir.join("README.md"), readme(names.len()).as_bytes())?;
    Ok(names)
}

/// The verdict program beside this executable (`r2e-verdict`, built with it), stripped of
/// nothing: its path and its sha256.
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
    instance: &Instance,
    name: &str,
    manifest: &Manifest,
    license: Option<&&str>,
) -> String {
    let mut metadata = BTreeMap::from([
        ("r2e_kind", "implementation".to_owned()),
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
            name: format!("r2e/{name}"),
            description: format!(
                "Write `{}` in `{}` of {} from its specification",
                instance.qualname, instance.path, instance.repo
            ),
            keywords: vec!["r2e".into(), "python".into(), "implementation".into()],
        },
        metadata,
        verifier: Timeout {
            timeout_sec: verifier as f64,
        },
        agent: Timeout {
            timeout_sec: AGENT_TIMEOUT_SECONDS as f64,
        },
        environment: Environment {
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

fn dockerfile(tag: &str, instance: &Instance) -> String {
    format!(
        "# r2e instance {id}: its repository's environment image (load it with `r2e import` \
         from the export that holds this task), with `{q}` stubbed out.\nFROM {tag}\nCOPY \
         module.py {IMAGE_REPO}/{path}\nENV PATH=/r2e/env/bin:/usr/local/bin:/usr/bin:/bin\n\
         WORKDIR {IMAGE_REPO}\n# The agent edits the repository, and the verifier needs root to keep the \
         original from the candidate\n# (the base image's user is the sandbox's unprivileged \
         one).\nUSER root\n",
        id = instance.id.replace('\n', " "),
        q = instance.qualname,
        path = instance.path,
    )
}

fn solve(instance: &Instance) -> String {
    format!(
        "#!/usr/bin/env bash\n# The reference: `{path}` as the repository's commit has it.\nset \
         -eu\ncp /solution/reference.py {IMAGE_REPO}/{path}\n",
        path = instance.path
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

fn readme(tasks: usize) -> String {
    format!(
        "# r2e tasks for Harbor\n\n{tasks} task folders under `tasks/`, named in \
         `registry.json`, each following Harbor's `task.toml` schema {HARBOR_SCHEMA}.\n\nTheir \
         environments are this export's images (`images/`): **load them first**, on the \
         machine that runs the tasks:\n\n    r2e import .\n\nThen, for example:\n\n    harbor \
         run -p tasks/NAME --agent oracle\n"
    )
}
