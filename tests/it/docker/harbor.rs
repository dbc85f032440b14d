//! `r2e export --format harbor`: Harbor task folders whose `task.toml` Harbor's own models load,
//! and whose `tests/test.sh`, run in the task's image the way Harbor runs it (the tests copied
//! in after the agent, as root), scores the reference 1, no change 0, and every cheat 0.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::prelude::*;

use crate::common;
use crate::docker::TEXT_PY;

/// `docker ARGS…`, which must succeed: its stdout.
fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A container of `image` that stays up, removed when dropped.
struct Container(String);

impl Container {
    fn start(image: &str) -> Container {
        Container(docker(&[
            "run",
            "-d",
            "--network",
            "none",
            image,
            "sleep",
            "infinity",
        ]))
    }

    /// `bash -c SCRIPT` in the container, as root: its exit code and output.
    fn sh(&self, script: &str) -> (i32, String) {
        let out = Command::new("docker")
            .args(["exec", &self.0, "bash", "-c", script])
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Copies the folder `from`'s contents to `to` in the container.
    fn copy(&self, from: &Path, to: &str) {
        self.sh(&format!("mkdir -p {to}"));
        docker(&[
            "cp",
            &format!("{}/.", from.display()),
            &format!("{}:{to}", self.0),
        ]);
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// One trial of `task` as Harbor runs it: the agent's `script` (with the task's solution at
/// `/solution` when `oracle`), the task's `tests/` copied to `/tests`, `after` (what else
/// happens to the verifier's files), then `tests/test.sh`. The reward file's text (`None`: no
/// reward, an error) and the verdict the verifier wrote.
fn trial(
    image: &str,
    task: &Path,
    oracle: bool,
    script: &str,
    after: &str,
) -> (Option<String>, serde_json::Value, String) {
    let c = Container::start(image);
    if oracle {
        c.copy(&task.join("solution"), "/solution");
    }
    let (code, out) = c.sh(script);
    assert_eq!(code, 0, "the agent's script: {out}");
    c.copy(&task.join("tests"), "/tests");
    let (code, out) = c.sh(after);
    assert_eq!(code, 0, "{out}");
    let (_, log) = c.sh("chmod +x /tests/test.sh && /tests/test.sh");
    let (code, reward) = c.sh("cat /logs/verifier/reward.txt");
    let reward = (code == 0).then(|| reward.trim().to_owned());
    let (_, verdict) = c.sh("cat /logs/verifier/r2e-verdict.json");
    let verdict = serde_json::from_str(&verdict).unwrap_or(serde_json::Value::Null);
    if reward.is_some() {
        let (code, json) = c.sh("cat /logs/verifier/reward.json");
        assert_eq!(code, 0, "{json}");
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        // Harbor reads numbers only.
        assert!(
            json.as_object().unwrap().values().all(|v| v.is_number()),
            "{json}"
        );
        assert_eq!(
            json["reward"].to_string(),
            reward.clone().unwrap(),
            "{json}"
        );
    }
    (reward, verdict, log)
}

/// The task folders of an export of the export test's fixture (two instances and their bug-fix
/// tasks), Harbor's own models loading each, and each task's verifier in its image: the
/// reference (the gold fix) 1, no change 0,
/// a wrong body 0; a candidate that reads the original module from the verifier's files, an
/// agent that writes the reward itself or plants a harness where the verifier's go, and a
/// verifier file changed after it was copied in, all 0; a verifier that cannot run gives no
/// reward (an error, not a 0).
#[test]
fn harbor_tasks_score_the_reference_one_and_every_cheat_zero() {
    let Some(_daemon) = common::docker() else {
        return;
    };
    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        "[env]\ninstaller = \"pip\"\n\n[bugfix]\nper_function = 1\n",
    );
    // A commit of its own date: the export test builds the same files, and removes its
    // environment image, whose tag names the commit; the two must never share one.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "."],
        &["commit", "-qm", "one"],
    ] {
        common::git(&p.path().join("repo"), Some("2024-02-29T12:00:00Z"), args);
    }
    common::offline_build(p.path());
    let instances = common::jsonl(&p.path().join("out/dataset.jsonl"));
    assert_eq!(instances.len(), 2, "{instances:?}");

    let dir = p.path().join("harbor");
    let out = export(p.path(), &dir, None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without a registry, it says plainly that the images must be loaded first.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("load them with `r2e import`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let registry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("registry.json")).unwrap()).unwrap();
    let listed: Vec<String> = registry[0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap().to_owned())
        .collect();
    // A task per instance and per bug-fix task.
    let bugfix = common::jsonl(&p.path().join("out/bugfix.jsonl"));
    assert!(!bugfix.is_empty());
    assert_eq!(listed.len(), 2 + bugfix.len(), "{registry:#}");
    let is_bugfix = |task: &str| task.contains("-bug-");
    assert_eq!(listed.iter().filter(|t| is_bugfix(t)).count(), bugfix.len());
    // The export's card carries the Hub's tags for Harbor task sets.
    let card = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let front = card.split("---\n").nth(1).unwrap();
    assert!(
        front.contains("- environment\n") && front.contains("- harbor\n"),
        "{card}"
    );
    let host = p.path().to_string_lossy().into_owned();
    assert_eq!(
        common::found_under(&dir.join("tasks"), host.as_bytes()),
        None,
        "a task names a path of the building machine"
    );

    let images = harbor_loads(&dir, &listed);
    assert!(images.iter().all(|i| i == "None"), "{images:?}");

    // The images the tasks start from are the export's; each task's own adds the stub.
    let shout = listed
        .iter()
        .find(|t| t.contains("shout") && !is_bugfix(t))
        .expect("a task of `shout`");
    for task in &listed {
        let folder = dir.join(task);
        let image = format!(
            "r2e-harbor-test:{}-{}",
            std::process::id(),
            task.rsplit('-').next().unwrap()
        );
        docker(&[
            "build",
            "-q",
            "-t",
            &image,
            &folder.join("environment").to_string_lossy(),
        ]);
        let _removed = Removed(image.clone());
        // The agent sees the function stubbed out, or the bug.
        let c = Container::start(&image);
        let (_, stub) = c.sh("cat pkg/text.py; echo; pwd; command -v tar gzip bash find timeout");
        assert_eq!(
            stub.contains("raise NotImplementedError"),
            !is_bugfix(task),
            "{stub}"
        );
        assert!(!stub.contains(TEXT_PY), "{stub}");
        assert!(stub.contains("/r2e/repo"), "{stub}");
        for tool in ["tar", "gzip", "bash", "find", "timeout"] {
            assert!(stub.contains(&format!("/{tool}\n")), "{tool}: {stub}");
        }
        drop(c);

        let (reward, verdict, log) = trial(&image, &folder, true, "/solution/solve.sh", "true");
        assert_eq!(reward.as_deref(), Some("1"), "{verdict:#} {log}");
        assert_eq!(verdict["outcome"], "pass", "{verdict:#}");
        let (reward, verdict, log) = trial(&image, &folder, false, "true", "true");
        assert_eq!(reward.as_deref(), Some("0"), "{verdict:#} {log}");
        assert_eq!(verdict["outcome"], "fail", "{verdict:#}");
        if is_bugfix(task) {
            // The broken state fails the task's FAIL_TO_PASS tests, named.
            assert!(
                !verdict["fail_to_pass_failing"]
                    .as_array()
                    .unwrap()
                    .is_empty(),
                "{verdict:#}"
            );
        }
        if task != shout {
            continue;
        }
        // A wrong body, and a candidate that executes the original module it finds in the
        // verifier's files: 0, each with the failing tests named.
        let wrong = "def shout(text, times):\n    return text.upper()\n";
        let cheat = "def shout(text, times):\n    import glob, json\n    for path in glob.glob('/tests/**/task.json', recursive=True) + glob.glob('/tmp/**/task.json', recursive=True):\n        ns = {}\n        exec(json.load(open(path))['original'], ns)\n        return ns['shout'](text, times)\n    raise RuntimeError('no original')\n";
        for body in [wrong, cheat] {
            let script = format!(
                "python - <<'EOF'\nimport re\np = 'pkg/text.py'\ns = open(p).read()\nstart = s.index('def shout')\nend = s.index('def count_vowels')\nopen(p, 'w').write(s[:start] + {body:?} + '\\n\\n' + s[end:])\nEOF"
            );
            let (reward, verdict, log) = trial(&image, &folder, false, &script, "true");
            assert_eq!(reward.as_deref(), Some("0"), "{verdict:#} {log}");
            let failing = verdict["tests"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["passed"] == false)
                .count();
            assert!(failing > 0, "{verdict:#}");
        }
        // An agent that writes the reward itself, or plants a harness that passes where the
        // verifier's go: 0.
        let (reward, _, log) = trial(
            &image,
            &folder,
            false,
            "mkdir -p /logs/verifier /tests/r2e && echo 1 > /logs/verifier/reward.txt && echo '{\"reward\": 1}' > /logs/verifier/reward.json && printf 'import unittest\\nclass T(unittest.TestCase):\\n    def test_ok(self):\\n        pass\\n' > /tests/r2e/harness.py",
            "true",
        );
        assert_eq!(reward.as_deref(), Some("0"), "{log}");
        // A verifier file changed after it was copied in, even under the reference: 0, and why.
        let (reward, verdict, log) = trial(
            &image,
            &folder,
            true,
            "/solution/solve.sh",
            "echo '# changed' >> /tests/r2e/harness.py",
        );
        assert_eq!(reward.as_deref(), Some("0"), "{verdict:#} {log}");
        assert!(
            verdict["error"].as_str().unwrap().contains("harness.py"),
            "{verdict:#}"
        );
        // A verdict program that is missing: 0 (a file is not the one exported).
        let (reward, _, log) = trial(
            &image,
            &folder,
            true,
            "/solution/solve.sh",
            "rm /tests/r2e/r2e-verdict",
        );
        assert_eq!(reward.as_deref(), Some("0"), "{log}");
        // No interpreter: no reward at all (Harbor's RewardFileNotFoundError), never 1 or 0.
        let (reward, _, log) = trial(
            &image,
            &folder,
            true,
            "/solution/solve.sh && rm /r2e/env/bin/python",
            "true",
        );
        assert_eq!(reward, None, "{log}");
        assert!(log.contains("no interpreter"), "{log}");
    }

    // Bad input: an unknown format is refused at its flag, and leaves nothing.
    let again = p.path().join("again");
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["export", "--format", "swebench"])
        .arg(&again)
        .current_dir(p.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--format"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!again.exists());

    with_a_registry(&p, &listed);
}

/// `r2e export --format harbor DIR` of the project in `at` (with `--registry REGISTRY`): what it
/// did.
fn export(at: &Path, dir: &Path, registry: Option<&str>) -> std::process::Output {
    let mut command = assert_cmd::Command::cargo_bin("r2e").unwrap();
    command.args(["export", "--format", "harbor"]);
    if let Some(registry) = registry {
        command.args(["--registry", registry]);
    }
    command
        .arg(dir)
        .current_dir(at)
        .envs(common::offline_env())
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap()
}

/// With a registry on loopback: each task's `task.toml` names its image by digest there. After
/// the local images are removed (the tasks' and the environment's), a pull by that digest gives
/// the same image, and the reference scores 1 in it (one task of each kind). A registry that refuses the push: exit 1,
/// and nothing written.
fn with_a_registry(p: &common::Project, listed: &[String]) {
    if !common::registry::available() {
        return;
    }
    let w = tempfile::tempdir().unwrap();
    let registry = common::registry::Registry::start(&w.path().join("open"), false);
    let prefix = format!("127.0.0.1:{}/r2e-test", registry.port);
    let dir = p.path().join("pushed");
    let out = export(p.path(), &dir, Some(&prefix));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("pushed to `{prefix}`")), "{said}");
    let images = harbor_loads(&dir, listed);
    let by_digest = format!("{prefix}/r2e-task@sha256:");
    assert!(
        images.iter().all(|i| i.starts_with(&by_digest)),
        "{images:?}"
    );
    // The Dockerfile starts from the environment image by digest too.
    let recipe =
        std::fs::read_to_string(dir.join(&listed[0]).join("environment/Dockerfile")).unwrap();
    assert!(
        recipe.contains(&format!("FROM {prefix}/r2e-env@sha256:")),
        "{recipe}"
    );
    let id = |reference: &str| docker(&["image", "inspect", "--format", "{{.Id}}", reference]);
    let ids: Vec<String> = images.iter().map(|i| id(i)).collect();
    // By ID: every tag of each goes with it.
    let _removed: Vec<Removed> = ids.iter().cloned().map(Removed).collect();
    // Every local image of the tasks goes, then the environment's (by ID: all its tags).
    let exported: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("export.json")).unwrap()).unwrap();
    let env_ids: Vec<String> = exported["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    for image in ids.iter().chain(&env_ids) {
        docker(&["rmi", "-f", image]);
    }
    for reference in &images {
        let gone = Command::new("docker")
            .args(["image", "inspect", reference])
            .output()
            .unwrap();
        assert!(!gone.status.success(), "{reference} is still here");
    }
    // Each pulled by its digest is the image it was; the reference scores 1 in the first
    // implementation task's and the first bug-fix task's.
    let mut tried = std::collections::BTreeSet::new();
    for ((reference, before), task) in images.iter().zip(&ids).zip(listed) {
        docker(&["pull", "-q", reference]);
        assert_eq!(&id(reference), before, "{reference}");
        if !tried.insert(task.contains("-bug-")) {
            continue;
        }
        let (reward, verdict, log) = trial(
            reference,
            &dir.join(task),
            true,
            "/solution/solve.sh",
            "true",
        );
        assert_eq!(reward.as_deref(), Some("1"), "{verdict:#} {log}");
    }

    // A registry that refuses every push: exit 1, the push named, nothing left.
    let refusing = common::registry::Registry::start(&w.path().join("read-only"), true);
    let dir = p.path().join("refused");
    let out = export(
        p.path(),
        &dir,
        Some(&format!("127.0.0.1:{}/r2e-test", refusing.port)),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("docker push"), "{said}");
    assert!(!dir.exists());
    let left: Vec<_> = std::fs::read_dir(p.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("refused"))
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Removes the image when dropped.
struct Removed(String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// Harbor's own task and registry models (harbor 0.25.0, from the package index, with what
/// they import) load every task folder and `registry.json`. Harbor needs Python 3.12 for
/// `typing.override`, a decorator that does nothing when it runs: on an older Python it is
/// given as that. Each task's `[environment] docker_image` as Harbor reads it (`None` without).
fn harbor_loads(dir: &Path, tasks: &[String]) -> Vec<String> {
    let venv = harbor_models();
    let script = r#"
import json, sys, typing
typing.override = getattr(typing, "override", lambda f: f)
from pathlib import Path
from harbor.models.task.task import Task
from harbor.models.registry import Registry
root = Path(sys.argv[1])
registry = Registry.from_path(root / "registry.json")
for spec in registry.datasets[0].tasks:
    task = Task(root / spec.path)
    assert task.config.task.name == spec.name, (task.config.task.name, spec.name)
    assert task.config.schema_version == "1.4"
    assert task.paths.discovered_test_path.name == "test.sh"
    assert task.paths.discovered_solve_path.name == "solve.sh"
    assert task.config.environment.network_mode.value == "no-network"
    assert task.config.metadata["r2e_instance_id"]
    assert "raise NotImplementedError" not in task.instruction
    print(task.config.environment.docker_image)
"#;
    let out = Command::new(venv.join("bin/python"))
        .args(["-c", script])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Harbor's models: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let images: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(images.len(), tasks.len());
    images
}

/// A virtual environment with Harbor's task models: harbor 0.25.0's wheel and the packages
/// its models import, downloaded once per machine.
fn harbor_models() -> PathBuf {
    const DEPS: [&str; 8] = [
        "pydantic==2.14.4",
        "pydantic_core==2.50.5",
        "annotated-types==0.8.0",
        "typing-inspection==0.4.5",
        "typing_extensions==4.16.0",
        "toml==0.10.2",
        "pathspec==1.1.1",
        "shortuuid==1.0.13",
    ];
    let wheels = common::wheels("harbor-deps", &DEPS);
    let harbor = common::provisioned("harbor-wheel", |dir| {
        let have = std::fs::read_dir(dir).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("harbor-0.25.0-")
        });
        if !have {
            common::pip(
                "download",
                &["--only-binary=:all:", "--python-version", "3.12", "--dest"],
                dir,
                "harbor==0.25.0",
            );
        }
    });
    let dir = common::provisioned("harbor-venv", |dir| {
        let venv = dir.join("env");
        let made = format!("{DEPS:?}");
        if std::fs::read_to_string(venv.join("done")).ok().as_deref() == Some(made.as_str()) {
            return;
        }
        let run = |cmd: &mut Command| {
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv));
        let whl = |dir: &Path| -> Vec<PathBuf> {
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "whl"))
                .collect()
        };
        run(Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--ignore-requires-python",
            ])
            .args(whl(&wheels))
            .args(whl(&harbor)));
        std::fs::write(venv.join("done"), made).unwrap();
    });
    dir.join("env")
}
