//! `r2e cluster k8s`: the manifests it prints pass Kubernetes' published schema
//! (`kubernetes-validate`, strict: no property the API does not know), say what a demanding
//! user needs (an Indexed Job whose index is the shard, retries per index, the store's
//! credentials from a Secret by name, a suspended assemble), and the shards and assemble run
//! exactly as the Jobs' containers would (their commands and `JOB_COMPLETION_INDEX`) give the
//! one-machine dataset version. Bad input is exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common;

/// The version of the Kubernetes schema package the tests validate against (`.ci/run`
/// installs it), and the Kubernetes version checked: the first where `backoffLimitPerIndex`
/// is generally available.
const VALIDATE: &str = "1.37.0";
const KUBERNETES: &str = "1.33.0";

fn have_validator() -> bool {
    let ok = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import kubernetes_validate, yaml; assert kubernetes_validate.__version__ == '{VALIDATE}', kubernetes_validate.__version__"
            ),
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    common::require(
        ok,
        &format!("kubernetes-validate {VALIDATE} (with PyYAML)"),
        &format!("`python3 -m pip install kubernetes-validate=={VALIDATE}`; `.ci/run` does"),
    )
}

/// Whether python3 has PyYAML, which reads the manifests ([`documents`]).
fn have_yaml() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import yaml"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    common::require(
        ok,
        "PyYAML for python3",
        "`python3 -m pip install pyyaml` (kubernetes-validate brings it); `.ci/run` does",
    )
}

/// Three small repositories and a pipeline naming them (no model), in `dir`.
pub(crate) fn project(dir: &Path, remote: Option<&str>) -> PathBuf {
    let mut text = String::from("version = 1\n[project]\nname = \"Kube Demo\"\n\n");
    for i in 0..3 {
        // A constant the function reads: a candidate has a dependency to slice.
        common::write_fixture(
            &dir.join(format!("repos/r{i}")),
            &format!(
                "//- m{i}/__init__.py\n//- m{i}/ops.py\nLIMIT = {limit}\n\n\
                 def add_small(a, b):\n    \"\"\"Add two numbers, capping the result at LIMIT.\"\"\"\n    total = a + b\n    if total > LIMIT:\n        return LIMIT\n    return total\n",
                limit = 40 + 7 * i
            ),
        );
        text.push_str(&format!("[[repo]]\npath = \"repos/r{i}\"\n\n"));
    }
    text.push_str("[env]\ninstaller = \"pip\"\n\n");
    if let Some(url) = remote {
        text.push_str(&format!("[cache]\nremote = \"{url}\"\n"));
    }
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) fn r2e() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("r2e"))
}

/// `r2e cluster k8s ARGS`: exit code, stdout, stderr.
fn k8s(pipeline: &Path, args: &[&str]) -> (i32, String, String) {
    let out = r2e()
        .args(["cluster", "k8s"])
        .arg(pipeline)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The YAML documents, read by PyYAML, as JSON.
fn documents(yaml: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import sys, json, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin.read()) if d]))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(yaml.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{yaml}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `kubernetes-validate --strict` of a file: whether it passed, and what it said.
fn validate(file: &Path) -> (bool, String) {
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "-k", KUBERNETES])
        .arg(file)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn job<'a>(docs: &'a [Value], component: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == component)
        .unwrap_or_else(|| panic!("no {component} document in {docs:?}"))
}

#[test]
fn the_manifests_pass_kubernetes_schema_and_say_what_the_cluster_needs() {
    if !have_validator() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let pipeline = project(work.path(), Some("s3://lab-bucket/r2e"));
    // Characters YAML reads as line breaks or refuses raw, which the ConfigMap must keep.
    let mut text = std::fs::read_to_string(&pipeline).unwrap();
    text.push_str("# notes:\u{85}next \u{2028}line\u{2029} \u{9f}\u{feff} end\n");
    std::fs::write(&pipeline, text).unwrap();
    let cases: [&[&str]; 3] = [
        &[
            "--shards",
            "4",
            "--image",
            "registry.lab/r2e:0.9",
            "--secret",
            "r2e-store",
            "--cpus",
            "2",
            "--memory",
            "8Gi",
            "--output-claim",
            "r2e-datasets",
            "--namespace",
            "research",
            "--pipeline-in-image",
            "/work/pipeline.toml",
        ],
        &[
            "--shards",
            "2",
            "--image",
            "r2e:dev",
            "--remote-cache",
            "file:///mnt/r2e-store",
            "--store-claim",
            "shared-store",
            "--privileged",
            "--parallelism",
            "1",
            "--backoff-limit-per-index",
            "5",
            "--name",
            "nightly",
        ],
        &["--shards", "1", "--image", "r2e"],
    ];
    for (i, args) in cases.iter().enumerate() {
        let (code, yaml, stderr) = k8s(&pipeline, args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        let file = work.path().join(format!("m{i}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let (ok, said) = validate(&file);
        assert!(ok, "{args:?}: {said}\n{yaml}");
        let docs = documents(&yaml);
        let shards = job(&docs, "shards");
        let spec = &shards["spec"];
        let n: u64 = args[1].parse().unwrap();
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"], n);
        assert!(spec["backoffLimitPerIndex"].is_u64());
        let pod = &spec["template"]["spec"];
        assert_eq!(
            pod["restartPolicy"], "Never",
            "backoffLimitPerIndex needs it"
        );
        let c = &pod["containers"][0];
        let cmd: Vec<&str> = c["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let at = cmd.iter().position(|a| *a == "--shards").unwrap();
        assert_eq!(cmd[at + 1], n.to_string());
        assert!(
            !cmd.contains(&"--shard"),
            "the index comes from the pod: {cmd:?}"
        );
        assert_eq!(c["env"][0]["name"], "JOB_COMPLETION_INDEX");
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        let assemble = job(&docs, "assemble");
        assert_eq!(assemble["spec"]["suspend"], true);
        // No credential and no variable's value in a manifest: only the Secret's name.
        assert!(!yaml.contains("AWS_SECRET"), "{yaml}");
        match i {
            0 => {
                assert_eq!(c["envFrom"][0]["secretRef"]["name"], "r2e-store");
                assert_eq!(c["resources"]["limits"]["memory"], "8Gi");
                assert_eq!(shards["metadata"]["namespace"], "research");
                assert!(cmd.contains(&"/work/pipeline.toml"));
                assert!(docs.iter().all(|d| d["kind"] != "ConfigMap"));
                let vols = assemble["spec"]["template"]["spec"]["volumes"].to_string();
                assert!(vols.contains("r2e-datasets"), "{vols}");
            }
            1 => {
                assert_eq!(spec["parallelism"], 1);
                assert_eq!(spec["backoffLimitPerIndex"], 5);
                assert_eq!(shards["metadata"]["name"], "nightly-shards");
                assert_eq!(c["securityContext"]["privileged"], true);
                let mounts = c["volumeMounts"].to_string();
                assert!(mounts.contains("/mnt/r2e-store"), "{mounts}");
            }
            _ => {
                // The pipeline travels in a ConfigMap, whose text is the file's.
                let cm = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
                assert_eq!(
                    cm["data"]["pipeline.toml"].as_str().unwrap(),
                    std::fs::read_to_string(&pipeline).unwrap()
                );
                assert!(
                    stderr.contains("repos/") || stderr.contains("r0"),
                    "{stderr}"
                );
            }
        }
    }
    // The default names: the same manifests keep them, another image makes new Jobs.
    let name_of = |args: &[&str]| {
        let (code, yaml, stderr) = k8s(&pipeline, args);
        assert_eq!(code, 0, "{stderr}");
        job(&documents(&yaml), "shards")["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let a = name_of(&["--shards", "3", "--image", "r2e:1"]);
    assert_eq!(a, name_of(&["--shards", "3", "--image", "r2e:1"]));
    assert_ne!(a, name_of(&["--shards", "3", "--image", "r2e:2"]));
    assert!(
        a.starts_with("r2e-kube-demo-") && a.ends_with("-shards"),
        "{a}"
    );

    // The validator is real: a property the API does not know fails it.
    let (_, yaml, _) = k8s(&pipeline, cases[2]);
    let planted = yaml.replace(
        "completionMode: Indexed",
        "completionMode: Indexed\n  backoffLimitPerIndexes: 3",
    );
    assert_ne!(planted, yaml);
    let file = work.path().join("planted.yaml");
    std::fs::write(&file, planted).unwrap();
    let (ok, said) = validate(&file);
    assert!(!ok, "{said}");
}

#[test]
fn bad_k8s_input_is_exit_2_and_says_why() {
    let work = tempfile::tempdir().unwrap();
    let with_remote = project(&work.path().join("a"), Some("s3://b/p"));
    let without = project(&work.path().join("b"), None);
    for (pipeline, args, says) in [
        (
            &with_remote,
            &["--shards", "0", "--image", "x"][..],
            "at least 1",
        ),
        (&with_remote, &["--shards", "2", "--image", " "], "--image"),
        (
            &with_remote,
            &["--shards", "2", "--image", "x", "--name", "Bad_Name"],
            "not a Kubernetes name",
        ),
        (
            &with_remote,
            &["--shards", "2", "--image", "x", "--memory", "8GB"],
            "quantity",
        ),
        (
            &with_remote,
            &[
                "--shards",
                "2",
                "--image",
                "x",
                "--remote-cache",
                "file:///s",
            ],
            "--store-claim",
        ),
        (
            &with_remote,
            &[
                "--shards",
                "2",
                "--image",
                "x",
                "--remote-cache",
                "s3://k:s@b/p",
            ],
            "credentials",
        ),
        (&without, &["--shards", "2", "--image", "x"], "remote cache"),
        (
            &with_remote,
            &["--shards", "2", "--image", "x", "--name", "a.b"],
            "not a Kubernetes name",
        ),
        (
            &with_remote,
            &["--shards", "2", "--image", "x", "-n", "lab.team"],
            "not a Kubernetes name",
        ),
        (
            &with_remote,
            &["--shards", "100", "--image", "x", "--name", &"n".repeat(54)],
            "at most 53 characters",
        ),
    ] {
        let (code, out, stderr) = k8s(pipeline, args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(out.is_empty(), "{out}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // `--shards` of a build outside an Indexed Job: no index to take.
    let out = r2e()
        .args(["build", "--shards", "2"])
        .arg(&with_remote)
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("JOB_COMPLETION_INDEX"));
    let out = r2e()
        .args(["build", "--shards", "2"])
        .arg(&with_remote)
        .env("JOB_COMPLETION_INDEX", "2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[test]
fn shards_run_as_the_indexed_jobs_pods_would_give_the_one_machine_dataset() {
    // It reads the manifests (PyYAML) and validates none of them.
    if !have_yaml() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
    // One machine, no remote store: V.
    let one = project(&w.join("one"), None);
    let (code, summary, stderr) =
        crate::cluster_build::build(&one, &w.join("cache-one"), &env, &[]);
    assert_eq!(code, 0, "{stderr}");
    let v = summary["dataset_version"].as_str().unwrap().to_owned();
    assert_eq!(summary["counts"]["instances"], 3, "{summary}");

    // The manifests for a cluster whose pods mount their folders under `root` and the store
    // (a folder) from a claim; the pipeline is in the "image" (this machine).
    let shared = project(&w.join("shared"), None);
    let root = w.join("pod");
    let store = w.join("store");
    let (code, yaml, stderr) = k8s(
        &shared,
        &[
            "--shards",
            "2",
            "--image",
            "r2e:test",
            "--r2e",
            assert_cmd::cargo::cargo_bin("r2e").to_str().unwrap(),
            "--remote-cache",
            &format!("file://{}", store.display()),
            "--store-claim",
            "store",
            "--mount-root",
            root.to_str().unwrap(),
            "--pipeline-in-image",
            shared.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let docs = documents(&yaml);
    let command = |component: &str| -> Vec<String> {
        job(&docs, component)["spec"]["template"]["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    // Each pod has its own emptyDir folders: a fresh `root` per pod.
    let run = |cmd: &[String], index: Option<u32>| {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let mut c = Command::new(&cmd[0]);
        c.args(&cmd[1..])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = index {
            c.env("JOB_COMPLETION_INDEX", i.to_string());
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{cmd:?} (index {index:?}): {stderr}");
        stderr
    };
    let shard = command("shards");
    for i in 0..2 {
        let said = run(&shard, Some(i));
        assert!(said.contains(&format!("shard {i}/2")), "{said}");
    }
    let said = run(&command("assemble"), None);
    let output = root.join("out/dataset");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(output.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["version"].as_str(), Some(v.as_str()), "{said}");
    // The assemble ran no expensive action: every result came from the shards' store.
    let started = common::expensive_actions_started(&root.join("out/.dataset.r2e/shards"));
    assert!(started.is_empty(), "{started:?}");
}

/// A `kubectl` that plays a cluster's part for `--apply` (namespace `lab`, Jobs `nightly-*`).
/// It takes only the calls a real `kubectl` would be given, each argument checked: `apply -f -`
/// with the manifests `r2e cluster k8s` prints (`$FAKE/expected.yaml`) on its stdin, `get
/// job/NAME -o json` of the two Jobs, and the merge patch that resumes the assemble (its body
/// read as JSON). Anything else is written to `$FAKE/wrong` and ends the `r2e` that ran it (which
/// would otherwise wait out failed reads), so the test fails naming it. It records its calls,
/// keeps what was applied, reports the shards' Job active and then (`SHARDS`) complete or
/// failed, and the assemble complete once resumed.
const KUBECTL: &str = r#"#!/usr/bin/env python3
import json, os, signal, sys

fake = os.environ["FAKE"]
args = sys.argv[1:]

def path(name):
    return os.path.join(fake, name)

def wrong(why):
    with open(path("wrong"), "a") as f:
        f.write(f"{why}: {args!r}\n")
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(1)

with open(path("calls"), "a") as f:
    f.write(" ".join(args) + "\n")
if args[:2] != ["-n", "lab"]:
    wrong("not in the namespace `lab`")
call = args[2:]
if call == ["apply", "-f", "-"]:
    body = sys.stdin.read()
    with open(path("applied.yaml"), "w") as f:
        f.write(body)
    with open(path("expected.yaml")) as f:
        if body != f.read():
            wrong("applied other manifests than `r2e cluster k8s` prints")
elif call == ["get", "job/nightly-shards", "-o", "json"]:
    n = int(open(path("polls")).read()) + 1 if os.path.exists(path("polls")) else 1
    with open(path("polls"), "w") as f:
        f.write(str(n))
    if n < 2:
        status = {"active": 2}
    elif os.environ["SHARDS"] == "failed":
        status = {"succeeded": 1, "failed": 3, "failedIndexes": "1",
                  "conditions": [{"type": "Failed", "status": "True"}]}
    else:
        status = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
    print(json.dumps({"status": status}))
elif call[:4] == ["patch", "job/nightly-assemble", "--type=merge", "-p"] and len(call) == 5:
    try:
        body = json.loads(call[4])
    except ValueError as e:
        wrong(f"a patch body that is not JSON ({e})")
    if body != {"spec": {"suspend": False}}:
        wrong("a patch other than resuming the Job")
    open(path("resumed"), "w").close()
elif call == ["get", "job/nightly-assemble", "-o", "json"]:
    if os.path.exists(path("resumed")):
        status = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    else:
        status = {}
    print(json.dumps({"status": status}))
else:
    wrong("unexpected")
"#;

#[test]
fn apply_follows_the_shards_then_resumes_and_follows_the_assemble() {
    let work = tempfile::tempdir().unwrap();
    let pipeline = project(&work.path().join("p"), Some("s3://b/p"));
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(&kubectl, KUBECTL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // What was applied must be what is printed.
    let (code, printed, stderr) = k8s(
        &pipeline,
        &[
            "--shards", "2", "--image", "r2e:1", "-n", "lab", "--name", "nightly",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    for outcome in ["complete", "failed"] {
        let fake = work.path().join(outcome);
        std::fs::create_dir_all(&fake).unwrap();
        std::fs::write(fake.join("expected.yaml"), &printed).unwrap();
        let out = r2e()
            .args([
                "cluster", "k8s", "--shards", "2", "--image", "r2e:1", "-n", "lab", "--name",
                "nightly", "--apply",
            ])
            .arg(&pipeline)
            .env("PATH", &path)
            .env("FAKE", &fake)
            .env("SHARDS", outcome)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let calls = std::fs::read_to_string(fake.join("calls")).unwrap();
        // Every call was one a real `kubectl` takes, as the stand-in checked.
        let wrong = std::fs::read_to_string(fake.join("wrong")).unwrap_or_default();
        assert!(wrong.is_empty(), "{wrong}calls:\n{calls}{stderr}");
        let applied = std::fs::read_to_string(fake.join("applied.yaml")).unwrap();
        assert_eq!(applied, printed);
        assert!(calls.lines().all(|l| l.starts_with("-n lab ")), "{calls}");
        if outcome == "complete" {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            let order: Vec<&str> = calls
                .lines()
                .map(|l| l.split_whitespace().nth(2).unwrap())
                .collect();
            assert_eq!(order[0], "apply", "{calls}");
            let patched = order.iter().position(|c| *c == "patch").unwrap();
            assert!(
                calls
                    .lines()
                    .take(patched + 1)
                    .filter(|l| l.contains("get job/nightly-shards"))
                    .count()
                    >= 2,
                "{calls}"
            );
            assert!(
                calls
                    .lines()
                    .skip(patched)
                    .any(|l| l.contains("get job/nightly-assemble")),
                "{calls}"
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("job/nightly-assemble complete"));
        } else {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains("failed indexes 1"), "{stderr}");
            assert!(
                !calls.contains("patch"),
                "the assemble was resumed: {calls}"
            );
        }
    }
}
