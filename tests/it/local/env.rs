//! Stage `env` against a package index on loopback that the test serves itself (never the
//! internet): declared and imported dependencies are installed, a missing one is recorded, the
//! environment is cached, and editing a function never rebuilds it.

use crate::common;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::Project;
use common::index::{Index, wheel};

/// An index on loopback ([`common::index::Index`]) listing the wheels at `paths`, each under
/// the project its file name starts with.
fn index_of(paths: &[PathBuf]) -> Index {
    let index = Index::start();
    for path in paths {
        list(&index, path);
    }
    index
}

/// Lists the wheel at `path` on `index`.
fn list(index: &Index, path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let project = name.split('-').next().unwrap();
    index.add(project, path, "2024-01-01T00:00:00Z");
}

/// `r2e build --json` with pip pointed at `index`; the build must succeed.
fn build_with_index(pipeline: &Path, index: &Index, timeout: &str) -> serde_json::Value {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(pipeline)
        .arg("--json")
        .env("PIP_INDEX_URL", index.url())
        .env("PIP_RETRIES", "0")
        .env("PIP_TIMEOUT", timeout)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
}

/// A package index on loopback serving a stand-in for the pinned coverage.py and `tinydep`
/// 1.0: the folder of its files (kept while the test runs) and the index.
fn tinydep_index() -> (tempfile::TempDir, Index) {
    let files = tempfile::tempdir().unwrap();
    // A stand-in for the pinned coverage.py: the index serves what the pin names.
    let pinned = r2e_exec::py::COVERAGE.split("==").nth(1).unwrap();
    let index = index_of(&[
        wheel(files.path(), "coverage", pinned, &[]),
        wheel(files.path(), "tinydep", "1.0", &[]),
    ]);
    (files, index)
}

const REPO: &str = r#"
//- requirements.txt
tinydep
//- pkg/__init__.py
//- pkg/core.py
import tinydep
import missingdep

def version_of(x):
    """The dependency's version, with x."""
    v = tinydep.VERSION
    return v + str(x)
"#;

#[test]
fn environments_install_from_the_configured_index_and_are_cached() {
    let (_files, index) = tinydep_index();
    let p = Project::new(REPO, "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n");
    let build = || build_with_index(&p.pipeline(), &index, "5");
    let first = build();
    assert_eq!(first["stages"]["env"]["executed"], 1, "{first}");
    let envs = std::fs::read_to_string(p.path().join("out/envs.jsonl")).unwrap();
    let env: serde_json::Value = serde_json::from_str(envs.lines().next().unwrap()).unwrap();
    let log =
        std::fs::read_to_string(p.path().join("out").join(env["log"].as_str().unwrap())).unwrap();
    assert_eq!(env["outcome"], "partial", "{env}\n{log}");
    assert_eq!(env["declared"], serde_json::json!(["tinydep"]));
    assert_eq!(
        env["inferred"],
        serde_json::json!(["missingdep", "tinydep"])
    );
    assert_eq!(env["failed_packages"], serde_json::json!(["missingdep"]));
    let lock: Vec<&str> = env["lock"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        lock.contains(&r2e_exec::py::COVERAGE) && lock.contains(&"tinydep==1.0"),
        "{lock:?}"
    );

    // Editing a function body changes the repository, never its environment.
    p.write("pkg/core.py", "import tinydep\nimport missingdep\n\ndef version_of(x):\n    \"\"\"Changed.\"\"\"\n    v = tinydep.VERSION * 2\n    return v + str(x)\n");
    let second = build();
    assert_eq!(second["stages"]["env"]["executed"], 0, "{second}");
    assert_eq!(second["stages"]["env"]["cached"], 1);
    assert_eq!(second["stages"]["parse"]["executed"], 1);

    // An environment removed from the cache is rebuilt, even when nothing else changed.
    std::fs::remove_dir_all(
        p.path()
            .join("cache")
            .join(r2e_core::cache::Bucket::Envs.folder()),
    )
    .unwrap();
    let third = build();
    assert_eq!(third["stages"]["env"]["executed"], 1, "{third}");
}

#[test]
fn an_unreachable_index_is_reported_and_not_cached() {
    // Nothing listens on this port: a failure that may pass.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = Project::new(REPO, "[env]\ninstaller = \"pip\"\ntimeout_seconds = 120\n");
    let run = || {
        Command::cargo_bin("r2e")
            .unwrap()
            .arg("build")
            .arg(p.pipeline())
            .env("PIP_INDEX_URL", format!("http://127.0.0.1:{port}/simple/"))
            .env("PIP_RETRIES", "0")
            .env("PIP_TIMEOUT", "2")
            .output()
            .unwrap()
    };
    // The build writes what it can, then exits 1 naming the cause.
    let first = run();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("could not be built for a reason that may pass")
            && stderr.contains("cannot be reached"),
        "{stderr}"
    );
    let failures = std::fs::read_to_string(p.path().join("out/failures.jsonl")).unwrap();
    assert!(
        failures.contains("\"stage\":\"env\"") && failures.contains("cannot be reached"),
        "{failures}"
    );
    // Not cached: the next build tries again, and says so again.
    let second = run();
    assert_eq!(second.status.code(), Some(1));
    let envs = p
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Envs.folder());
    let records = walkdir::WalkDir::new(&envs)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == "record")
        .count();
    assert_eq!(records, 0, "nothing is stored for a failure that may pass");
}

const TAGGED: &str = r#"
//- requirements.txt
tinydep
//- pkg/__init__.py
//- pkg/core.py
import tinydep


def _version():
    return tinydep.VERSION


def tagged(x):
    """x tagged with the dependency's version."""
    v = _version()
    return str(x) + "@" + v
"#;

#[test]
fn an_environment_rebuilt_with_a_new_package_version_reruns_what_ran_in_it() {
    let files = tempfile::tempdir().unwrap();
    // The real pinned coverage.py, from the tests' wheelhouse, and a dependency at 1.0.
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(common::wheelhouse())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".whl"))
        .collect();
    wheels.push(wheel(files.path(), "tinydep", "1.0", &[]));
    let index = index_of(&wheels);
    let p = Project::new(
        TAGGED,
        "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let build = || build_with_index(&p.pipeline(), &index, "5");
    let first = build();
    assert_eq!(first["stages"]["generate"]["executed"], 1, "{first}");
    assert_eq!(first["stages"]["validate"]["executed"], 1, "{first}");
    assert_eq!(first["counts"]["instances"], 1, "{first}");
    let lock_of = || {
        let envs = std::fs::read_to_string(p.path().join("out/envs.jsonl")).unwrap();
        let env: serde_json::Value = serde_json::from_str(envs.lines().next().unwrap()).unwrap();
        env["lock_hash"].as_str().unwrap().to_owned()
    };
    let old_lock = lock_of();

    // The index now has tinydep 1.1, and the environment is rebuilt (it left the cache): its
    // key is the same, its packages are not. What ran in the old one runs again.
    list(&index, &wheel(files.path(), "tinydep", "1.1", &[]));
    std::fs::remove_dir_all(
        p.path()
            .join("cache")
            .join(r2e_core::cache::Bucket::Envs.folder()),
    )
    .unwrap();
    let second = build();
    assert_eq!(second["stages"]["env"]["executed"], 1, "{second}");
    assert_ne!(lock_of(), old_lock);
    assert_eq!(second["stages"]["generate"]["executed"], 1, "{second}");
    assert_eq!(second["stages"]["validate"]["executed"], 1, "{second}");
    assert_eq!(second["stages"]["parse"]["executed"], 0, "{second}");
}

/// `r2e status` with pip pointed at `index` (the same settings as the build's): its JSON and
/// its text.
fn status_with_index(pipeline: &Path, index: &Index) -> (serde_json::Value, String) {
    let run = |json: bool| {
        let mut cmd = Command::cargo_bin("r2e").unwrap();
        cmd.arg("status").arg("-p").arg(pipeline);
        if json {
            cmd.arg("--json");
        }
        cmd.env("PIP_INDEX_URL", index.url())
            .env("PIP_RETRIES", "0")
            .env("PIP_TIMEOUT", "5")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    (
        serde_json::from_slice(&run(true)).unwrap(),
        String::from_utf8(run(false)).unwrap(),
    )
}

#[test]
fn status_names_the_package_version_that_changed() {
    let (_files, index) = tinydep_index();
    let p = Project::new(
        &REPO.replace("tinydep\n//- pkg", "tinydep==1.0\n//- pkg"),
        "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let built = build_with_index(&p.pipeline(), &index, "5");
    assert_eq!(built["stages"]["env"]["executed"], 1, "{built}");
    let (status, _) = status_with_index(&p.pipeline(), &index);
    let env = &status["env"][0];
    assert_eq!(env["repo"], "r", "{status}");
    assert_eq!(env["would_build"], false, "{status}");
    assert_eq!(env["changed"], serde_json::json!([]), "{status}");

    // The same key, its environment gone from the cache (`r2e gc`, say).
    let envs = p
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Envs.folder());
    let kept = p.path().join("envs-kept");
    std::fs::rename(&envs, &kept).unwrap();
    let (status, _) = status_with_index(&p.pipeline(), &index);
    assert_eq!(status["env"][0]["would_build"], true, "{status}");
    assert_eq!(
        status["env"][0]["changed"],
        serde_json::json!(["its key is the same, but the cache has no environment for it"]),
        "{status}"
    );
    std::fs::rename(&kept, &envs).unwrap();

    // A new version of a declared package: a new environment, and status says which input.
    p.write("requirements.txt", "tinydep==1.1\n");
    let (status, text) = status_with_index(&p.pipeline(), &index);
    let env = &status["env"][0];
    assert_eq!(env["would_build"], true, "{status}");
    assert_eq!(
        env["changed"],
        serde_json::json!(["`declared`: -tinydep==1.0, +tinydep==1.1"]),
        "{status}"
    );
    assert!(
        text.contains(
            "env, repo `r`: would be installed (changed: `declared`: -tinydep==1.0, +tinydep==1.1)"
        ),
        "{text}"
    );
}

/// With `[[variant]]` tables the environments are listed in each variant's folder: `status`
/// reads them there, and finds nothing changed right after a build.
#[test]
fn status_reads_the_environments_of_variants() {
    let (_files, index) = tinydep_index();
    let p = Project::new(
        REPO,
        "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n\n\
         [[variant]]\nname = \"naive\"\ncontext.strategy = \"naive\"\n\n\
         [[variant]]\nname = \"sliced\"\ncontext.strategy = \"sliced\"\n",
    );
    let built = build_with_index(&p.pipeline(), &index, "5");
    assert_eq!(built["stages"]["env"]["executed"], 1, "{built}");
    let (status, text) = status_with_index(&p.pipeline(), &index);
    let env = &status["env"][0];
    assert_eq!(env["would_build"], false, "{status}");
    assert_eq!(env["changed"], serde_json::json!([]), "{status}");
    assert!(text.contains("env, repo `r`: is in the cache\n"), "{text}");
}

/// A project whose `requires-python` excludes the interpreter gets a failed environment with
/// that reason, in `envs.jsonl` and `failures.jsonl`, and its functions fail as `import_env`;
/// nothing is installed or cached, so a project that then supports the interpreter is built.
#[test]
fn a_project_that_does_not_support_the_interpreter_is_a_recorded_failure() {
    let (_files, index) = tinydep_index();
    let repo = |spec: &str| {
        REPO.replace(
            "//- pkg/__init__.py",
            &format!("//- pyproject.toml\n[project]\nname = \"pkg\"\nrequires-python = \"{spec}\"\n//- pkg/__init__.py"),
        )
    };
    let p = Project::new(
        &repo(">=3.99"),
        "[extract]\nconnectivity = false\n\n[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let first = build_with_index(&p.pipeline(), &index, "5");
    assert_eq!(first["stages"]["env"]["executed"], 0, "{first}");
    assert_eq!(first["stages"]["env"]["failed"], 1, "{first}");
    let out = p.path().join("out");
    let envs = std::fs::read_to_string(out.join("envs.jsonl")).unwrap();
    let env: serde_json::Value = serde_json::from_str(envs.lines().next().unwrap()).unwrap();
    assert_eq!(env["outcome"], "failed", "{env}");
    let log = std::fs::read_to_string(out.join(env["log"].as_str().unwrap())).unwrap();
    assert!(
        log.contains("requires Python `>=3.99` (pyproject.toml)"),
        "{log}"
    );
    let failures = std::fs::read_to_string(out.join("failures.jsonl")).unwrap();
    assert!(
        failures
            .lines()
            .any(|l| l.contains("\"stage\":\"env\"") && l.contains("requires Python `>=3.99`")),
        "{failures}"
    );
    let harnesses = std::fs::read_to_string(out.join("harnesses.jsonl")).unwrap();
    assert!(
        harnesses.lines().count() > 0
            && harnesses
                .lines()
                .all(|l| l.contains("\"failure_class\":\"import_env\"")),
        "{harnesses}"
    );
    let envs_dir = p
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Envs.folder());
    assert!(
        !envs_dir.exists() || std::fs::read_dir(&envs_dir).unwrap().next().is_none(),
        "nothing installed or cached"
    );

    // The project now supports the interpreter: its environment is built.
    p.write(
        "pyproject.toml",
        "[project]\nname = \"pkg\"\nrequires-python = \">=3.8\"\n",
    );
    let second = build_with_index(&p.pipeline(), &index, "5");
    assert_eq!(second["stages"]["env"]["executed"], 1, "{second}");
    assert_eq!(second["stages"]["env"]["failed"], 0, "{second}");
}

/// A project built by its own PEP 517 backend (in the tree: `backend-path`), which makes one
/// module itself (`pkg/_generated.py`) and declares an entry point.
const INSTALLED_PROJECT: &str = r#"
//- pyproject.toml
[build-system]
requires = []
build-backend = "tinybackend"
backend-path = ["_backend"]

[project]
name = "pkg"
version = "1.5"
//- _backend/tinybackend.py
import os, zipfile

NAME, VERSION = "pkg", "1.5"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if os.path.exists("BREAK_THE_BUILD"):
        raise RuntimeError("this backend is broken on purpose")
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    files = {}
    for folder, _, names in os.walk("pkg"):
        for n in names:
            if n.endswith(".py"):
                path = os.path.join(folder, n)
                files[path] = open(path, "rb").read()
    files["pkg/_generated.py"] = b"BUILT = 'by the backend'\n"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tiny\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = b"[console_scripts]\npkg-tool = pkg.core:describe\n"
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", record)
    return wheel
//- pkg/__init__.py
//- pkg/core.py
import importlib.metadata


def describe(word):
    """The word, with the installed version of this project and what its build made."""
    from pkg import _generated

    tools = [e.name for e in importlib.metadata.entry_points(group="console_scripts") if e.value.startswith("pkg.")]
    return f"{word} {importlib.metadata.version('pkg')} {_generated.BUILT} {tools}"
"#;

/// The lines of an output file, as JSON.
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The project is built as a wheel by its own backend and installed on top of its environment:
/// its functions see its metadata, entry points and what its build made; its own modules are
/// left to the checkout (a candidate never finds the original there); a body edit rebuilds
/// nothing; a build that fails falls back to generated metadata, recorded as `partial`.
#[test]
fn the_project_is_installed_as_a_wheel_with_its_metadata_and_what_its_build_made() {
    let p = Project::new(
        INSTALLED_PROJECT,
        "[extract]\nconnectivity = false\n\n[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let build = || common::offline_build(p.path());
    let first = build();
    assert_eq!(first["stages"]["env"]["failed"], 0, "{first}");
    let out = p.path().join("out");
    let env = &json_lines(&out.join("envs.jsonl"))[0];
    let project = &env["project"];
    let log = std::fs::read_to_string(out.join(project["log"].as_str().unwrap())).unwrap();
    assert_eq!(project["outcome"], "installed", "{env}\n{log}");
    assert_eq!(env["outcome"], "ok", "{env}");
    assert_eq!(project["name"], "pkg");
    assert_eq!(project["version"], "1.5");
    assert_eq!(
        project["overlaid"], 2,
        "pkg/__init__.py and pkg/core.py: {env}"
    );

    // The layer holds the metadata and the generated module, never the checkout's modules.
    let site = p
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Projects.folder())
        .join(project["key"].as_str().unwrap())
        .join("site");
    assert!(site.join("pkg-1.5.dist-info/METADATA").is_file());
    assert!(site.join("pkg/_generated.py").is_file());
    assert!(
        !site.join("pkg/core.py").exists() && !site.join("pkg/__init__.py").exists(),
        "the original's source must not be reachable through the layer"
    );

    // The function ran with the installed metadata: its recorded outcomes hold the version,
    // the generated module's text and the entry point.
    let harnesses = json_lines(&out.join("harnesses.jsonl"));
    let h = harnesses
        .iter()
        .find(|h| h["id"].as_str().unwrap().ends_with("describe"))
        .unwrap();
    assert_eq!(h["valid"], true, "{h}");
    let dataset = std::fs::read_to_string(out.join("dataset.jsonl")).unwrap();
    assert!(
        dataset.contains("1.5 by the backend ['pkg-tool']"),
        "the reference saw the installed project: {dataset}"
    );

    // A body edit: the same layer (no rebuild), the candidate validated again.
    let record = site.parent().unwrap().join("record");
    let built_at = std::fs::metadata(&record).unwrap().modified().unwrap();
    let core = std::fs::read_to_string(p.path().join("repo/pkg/core.py")).unwrap();
    p.write(
        "pkg/core.py",
        &core.replace("return f\"{word} ", "return f\"{word}! "),
    );
    let second = build();
    let env2 = &json_lines(&out.join("envs.jsonl"))[0];
    assert_eq!(env2["project"]["key"], project["key"], "{second}");
    assert_eq!(
        std::fs::metadata(&record).unwrap().modified().unwrap(),
        built_at,
        "the layer was not rebuilt"
    );
    assert_eq!(second["stages"]["validate"]["executed"], 1, "{second}");

    // `status` sees the layer; then, with what the build reads changed, that it would build.
    let status = || {
        let out = Command::cargo_bin("r2e")
            .unwrap()
            .args(["status", "--json"])
            .current_dir(p.path())
            .envs(common::offline_env())
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()
    };
    let before = status();
    assert_eq!(
        before["env"][0]["project"]["would_build"], false,
        "{before}"
    );
    assert_eq!(before["env"][0]["project"]["key"], project["key"]);

    // A build that fails: the source with generated metadata, `partial`, with the reason.
    p.write("BREAK_THE_BUILD", "");
    p.write(
        "pyproject.toml",
        &std::fs::read_to_string(p.path().join("repo/pyproject.toml"))
            .unwrap()
            .replace("version = \"1.5\"", "version = \"2.0\""),
    );
    let after = status();
    assert_eq!(after["env"][0]["project"]["would_build"], true, "{after}");
    assert!(
        after["env"][0]["project"]["changed"]
            .as_str()
            .unwrap()
            .contains("what its build reads"),
        "{after}"
    );
    build();
    let env3 = &json_lines(&out.join("envs.jsonl"))[0];
    assert_eq!(env3["project"]["outcome"], "partial", "{env3}");
    assert_eq!(env3["outcome"], "partial", "{env3}");
    let reason = env3["project"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("could not be built") && reason.contains("broken on purpose"),
        "{reason}"
    );
    assert_eq!(env3["project"]["version"], "2.0", "{env3}");
}

/// A source release (in-tree backend, no build requirements) both repositories depend on:
/// pip builds it once and keeps the wheel in its cache.
const SHARED_SDIST: &str = r#"
//- pyproject.toml
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "shared"
version = "1.0"
//- backend.py
import os, zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = "shared-1.0.dist-info"
    files = {
        "shared/__init__.py": b"VALUE = 1\n",
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: shared\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, "shared-1.0-py3-none-any.whl"), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", record)
    return "shared-1.0-py3-none-any.whl"
"#;

/// Repository A: its build backend (run when its project layer is built, after its
/// environment) writes a marker into every folder it can write, rewrites every wheel it can
/// write (each module gets `POISONED = True`) and appends garbage to every other file it can
/// write on a path that looks like a cache. What it reached is in its own wheel.
const ATTACKER: &str = r#"
//- requirements.txt
shared>=1.0
//- pyproject.toml
[build-system]
requires = []
build-backend = "evil"
backend-path = ["_backend"]

[project]
name = "evil"
version = "1.0"
//- _backend/evil.py
import os, zipfile


def poison_wheel(path):
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data + b"\nPOISONED = True\n" if n.endswith(".py") else data)


def attack():
    reached = []
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        if os.access(root, os.W_OK):
            try:
                with open(os.path.join(root, "r2e-poison-marker"), "w") as f:
                    f.write("garbage")
                reached.append(root)
            except OSError:
                pass
        for n in files:
            p = os.path.join(root, n)
            if os.path.islink(p) or not os.path.isfile(p) or not os.access(p, os.W_OK):
                continue
            try:
                if n.endswith(".whl"):
                    poison_wheel(p)
                    reached.append(p)
                elif "cache" in p.lower() and n != "r2e-poison-marker":
                    with open(p, "ab") as f:
                        f.write(b"garbage")
                    reached.append(p)
            except Exception:
                pass
    return reached


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    reached = attack()
    info = "evil-1.0.dist-info"
    files = {
        "evil_reached.py": f"REACHED = {reached!r}\n".encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, "evil-1.0-py3-none-any.whl"), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", record)
    return "evil-1.0-py3-none-any.whl"
//- evil/__init__.py
def double(x):
    """Twice x."""
    return x * 2
"#;

/// Repository B: it depends on the same source release.
const VICTIM: &str = r#"
//- requirements.txt
shared
//- pkg/__init__.py
//- pkg/core.py
import shared

def scaled(x):
    """x times the dependency's value."""
    return shared.VALUE * x
"#;

/// `text` with every `<dir>.tmp<pid>` and `<dir>` read as `<env>`.
fn as_env(text: &str, dir: &str) -> String {
    let tmp = format!("{dir}.tmp");
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&tmp) {
        out.push_str(&rest[..at]);
        out.push_str("<env>");
        rest = rest[at + tmp.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out.replace(dir, "<env>")
}

/// The files of an environment's `venv` (path → blake3 of the contents, the target of a link),
/// with its folder read as `<env>`: the folder it was built in (`<env dir>.tmp<pid>`, holding
/// the building r2e's process id, under another cache) is named in the scripts' shebangs,
/// `pyvenv.cfg` and `activate`, so the `RECORD`s' hashes of those scripts are left out too. Left out:
/// `__pycache__` (the bytecode pip compiles holds the times the sources were installed at).
fn venv_files(venv: &Path) -> std::collections::BTreeMap<String, String> {
    let dir = venv.parent().unwrap().to_string_lossy().into_owned();
    walkdir::WalkDir::new(venv)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.file_name() != "__pycache__")
        .map(|e| e.unwrap())
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let rel = e.path().strip_prefix(venv).unwrap().display().to_string();
            let what = if e.file_type().is_symlink() {
                std::fs::read_link(e.path()).unwrap().display().to_string()
            } else {
                let bytes = std::fs::read(e.path()).unwrap();
                let mut text = as_env(&String::from_utf8_lossy(&bytes), &dir);
                if e.file_name() == "RECORD" {
                    // The hashes of the scripts in `bin/`, whose shebangs name the folder.
                    text = text
                        .lines()
                        .map(|l| match l.split_once(',') {
                            Some((path, _)) if path.starts_with("../../../bin/") => path,
                            _ => l,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                }
                blake3::hash(text.as_bytes()).to_hex().to_string()
            };
            (rel, what)
        })
        .collect()
}

/// A repository whose build writes into every folder it can reach and poisons what looks like
/// an installer's cache leaves another repository's environment byte for byte what it is when
/// built without it: each build's installer caches are its own (see ARCHITECTURE, "installer
/// caches").
#[test]
fn one_repositorys_install_cannot_change_another_repositorys_environment() {
    let extra = tempfile::tempdir().unwrap();
    common::index::sdist(extra.path(), "shared", "1.0", SHARED_SDIST);
    let toml =
        "[extract]\nconnectivity = false\n\n[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n";
    let (attacker, victim) = (Project::new(ATTACKER, toml), Project::new(VICTIM, toml));
    let find_links = format!(
        "{} {}",
        common::wheelhouse().display(),
        extra.path().display()
    );
    let build = |p: &Project, cache: &Path| {
        let out = Command::cargo_bin("r2e")
            .unwrap()
            .args(["build", "--json", "--until", "env", "--cache"])
            .arg(cache)
            .current_dir(p.path())
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", &find_links)
            .timeout(std::time::Duration::from_secs(600))
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let summary: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(summary["stages"]["env"]["failed"], 0, "{summary}");
        json_lines(&p.path().join("out/envs.jsonl")).remove(0)
    };
    let venv = |cache: &Path, env: &serde_json::Value| {
        let dir = cache
            .join(r2e_core::cache::Bucket::Envs.folder())
            .join(env["env_key"].as_str().unwrap())
            .join("venv");
        venv_files(&dir)
    };
    let caches = tempfile::tempdir().unwrap();
    let (alone, shared) = (caches.path().join("alone"), caches.path().join("shared"));
    let env = build(&victim, &alone);
    let without = venv(&alone, &env);
    assert!(
        without.keys().any(|k| k.ends_with("shared/__init__.py")),
        "{without:?}"
    );

    let evil = build(&attacker, &shared);
    assert_eq!(evil["project"]["outcome"], "installed", "{evil}");
    let layer = shared
        .join(r2e_core::cache::Bucket::Projects.folder())
        .join(evil["project"]["key"].as_str().unwrap())
        .join("site/evil_reached.py");
    let reached = std::fs::read_to_string(&layer).unwrap();
    assert!(
        reached.contains("r2e-poison") || reached.contains("/"),
        "{reached}"
    );
    let env = build(&victim, &shared);
    let with = venv(&shared, &env);
    let differ: Vec<&String> = with
        .keys()
        .chain(without.keys())
        .filter(|k| with.get(*k) != without.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "B's environment differs in {differ:?}; what A reached: {reached}"
    );
}
