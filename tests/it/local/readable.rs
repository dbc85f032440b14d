//! Readable results, on the real binary and whole builds (offline: environments install the
//! pinned coverage.py from the tests' wheelhouse): per-repository rows in the build summary and
//! in `r2e report`, a failing check's inputs and both outcomes, `r2e explain`'s harness verdict,
//! `r2e dataset diff`'s changed fields and commit-only moves, and the README's commands (with
//! `docs/commands.md`'s table).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
use common::Project;
use serde_json::{Value, json};

/// `r2e` offline, in `dir`.
fn r2e(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("r2e").unwrap();
    c.envs(common::offline_env())
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(900));
    c
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

use common::jsonl;

/// Repo `r`: two instances to be, a function whose harness cannot be valid, and functions the
/// filters exclude. Repo `bare`: one function, without a docstring.
const CALC: &str = r#"
//- calc.py
K = 2

def helper(x):
    """Adds K."""
    y = x + K
    return y

def scale(x, factor):
    """Scales x after the helper."""
    if factor > 1:
        return helper(x) * factor
    return helper(x) - factor

def always_fails(x):
    """Raises on every input."""
    if helper(x) is not None:
        raise ValueError("never returns")
    return x

def nodoc(x):
    y = helper(x)
    return y

def test_thing(x):
    """A test by its name."""
    y = helper(x)
    return y
"#;

const BARE: &str = r#"
//- util.py
def inc(x):
    y = x + 1
    return y
"#;

fn calc_project() -> Project {
    let p = Project::new(
        CALC,
        "[[repo]]\npath = \"bare\"\nname = \"bare\"\n\n[env]\ninstaller = \"pip\"\n",
    );
    common::write_fixture(&p.path().join("bare"), BARE);
    p
}

/// The per-repository numbers the output's files give, computed here from them.
fn repo_numbers(out: &Path) -> BTreeMap<String, (u64, u64, u64, u64, u64)> {
    let functions = jsonl(&out.join("functions.jsonl"));
    let repo_of: BTreeMap<String, String> = functions
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().into(),
                f["repo"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut rows: BTreeMap<String, (u64, u64, u64, u64, u64)> = BTreeMap::new();
    for name in ["r", "bare"] {
        rows.insert(name.into(), Default::default());
    }
    for f in &functions {
        let r = rows.get_mut(f["repo"].as_str().unwrap()).unwrap();
        r.0 += 1;
        if f["excluded_by"].is_null() {
            r.1 += 1;
        } else {
            r.2 += 1;
        }
    }
    for h in jsonl(&out.join("harnesses.jsonl")) {
        if h["valid"] == true {
            rows.get_mut(&repo_of[h["id"].as_str().unwrap()]).unwrap().3 += 1;
        }
    }
    for i in jsonl(&out.join("dataset.jsonl")) {
        rows.get_mut(i["repo"].as_str().unwrap()).unwrap().4 += 1;
    }
    rows
}

fn row_numbers(row: &Value) -> (u64, u64, u64, u64, u64) {
    let n = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("{k} in {row}"));
    (
        n("functions"),
        n("candidates"),
        n("excluded"),
        n("harnesses_valid"),
        n("instances"),
    )
}

/// Per-repository rows, in the build's human summary and `--json` summary and in `r2e report`
/// (Markdown and JSON), agree with the output's files; a repository that gives no instance
/// has its row of numbers. `r2e explain` shows a harness's verdict, failure class and message;
/// a failing `r2e check` shows each failing test's inputs and both outcomes.
#[test]
fn a_built_dataset_reads_per_repository_and_per_verdict() {
    let p = calc_project();
    let dir = p.path();

    // The human summary (stderr) of a whole build.
    let out = r2e(dir).arg("build").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(" excluded: 3 by the filters: no_docstring 2, name_prefix 1\n"),
        "{err}"
    );
    let numbers = repo_numbers(&dir.join("out"));
    let (f, c, x, v, i) = numbers["r"];
    assert_eq!((f, c, x), (5, 3, 2), "{numbers:?}");
    assert!(
        i >= 1 && v >= i && v < c,
        "an instance and an invalid harness: {numbers:?}"
    );
    assert!(
        err.contains(&format!(
            "     repo r: 5 functions, 3 candidates, 2 excluded (no_docstring 1, name_prefix 1), {v} valid harnesses, {i} instances\n"
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "     repo bare: 1 functions, 0 candidates, 1 excluded (no_docstring 1), 0 valid harnesses, 0 instances\n"
        ),
        "{err}"
    );

    // The `--json` summary (of the same, now up-to-date, build).
    let summary = common::offline_build(dir);
    let repos = summary["repos"].as_array().unwrap();
    assert_eq!(
        repos.iter().map(|r| r["repo"].clone()).collect::<Vec<_>>(),
        [json!("r"), json!("bare")],
        "every repository, in the pipeline's order"
    );
    for row in repos {
        assert_eq!(
            row_numbers(row),
            numbers[row["repo"].as_str().unwrap()],
            "{row}"
        );
    }
    assert_eq!(repos[1]["excluded_by"]["no_docstring"], 1);
    assert_eq!(
        repos[1]["excluded_by"]["dunder"], 0,
        "every filter is listed"
    );
    assert_eq!(repos[0]["excluded_by"]["name_prefix"], 1);

    // `r2e report`: the same rows, as JSON and as a Markdown table.
    let out = r2e(dir).args(["report", "--json"]).output().unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report[0]["repos"], summary["repos"], "{report}");
    let out = r2e(dir).arg("report").output().unwrap();
    let md = stdout(&out);
    assert!(
        md.contains("| variant | repo | functions | candidates | excluded | excluded by | valid harnesses | instances |"),
        "{md}"
    );
    assert!(
        md.contains("| t | bare | 1 | 0 | 1 | no_docstring 1 | 0 | 0 |"),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "| t | r | 5 | 3 | 2 | no_docstring 1, name_prefix 1 | {v} | {i} |"
        )),
        "{md}"
    );

    // `r2e explain`: a valid harness, and an invalid one with its failure class and message.
    let harnesses: BTreeMap<String, Value> = jsonl(&dir.join("out/harnesses.jsonl"))
        .into_iter()
        .map(|h| (h["id"].as_str().unwrap().to_owned(), h))
        .collect();
    let dataset = jsonl(&dir.join("out/dataset.jsonl"));
    assert!(
        dataset.iter().any(|i| i["id"] == "r:calc.py:scale"),
        "scale is an instance: {harnesses:#?}"
    );
    let out = r2e(dir)
        .args(["explain", "r:calc.py:scale", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["harness"][0]["verdict"], "valid", "{v}");
    assert_eq!(v["harness"][0]["instance"], true, "{v}");
    let out = r2e(dir)
        .args(["explain", "r:calc.py:scale"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("  harness: valid, generator builtin, "),
        "{text}"
    );
    assert!(text.contains("; an instance of the dataset"), "{text}");

    let failing = &harnesses["r:calc.py:always_fails"];
    assert_eq!(failing["valid"], false, "{failing}");
    let class = failing["failure_class"].as_str().unwrap();
    let message = failing["failure_message"].as_str().unwrap();
    let out = r2e(dir)
        .args(["explain", "r:calc.py:always_fails", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &v["harness"][0];
    assert_eq!(
        (
            &h["verdict"],
            &h["valid"],
            &h["failure_class"],
            &h["failure_message"]
        ),
        (&json!(class), &json!(false), &json!(class), &json!(message)),
        "{v}"
    );
    let out = r2e(dir)
        .args(["explain", "r:calc.py:always_fails"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains(&format!("  harness: invalid ({class})")),
        "{text}"
    );
    assert!(
        text.contains(&format!("    failure class: {class}\n")),
        "{text}"
    );
    for line in message.lines().filter(|l| !l.trim().is_empty()) {
        assert!(text.contains(line), "message line `{line}` in {text}");
    }
    // An excluded function has no harness; explain says which filter.
    let out = r2e(dir)
        .args(["explain", "r:calc.py:nodoc", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["excluded_by"], "no_docstring");
    assert_eq!(v["harness"], json!([]));

    // `r2e check` on a wrong candidate: the failing tests, each call's inputs, what the
    // reference did and what the candidate did, in JSON and in the text.
    let candidate = dir.join("wrong.py");
    std::fs::write(
        &candidate,
        "def scale(x, factor):\n    \"\"\"Wrong below 2.\"\"\"\n    if factor > 1:\n        return helper(x) * factor\n    return helper(x) + factor + 1\n",
    )
    .unwrap();
    let out = r2e(dir)
        .args(["check", "r:calc.py:scale", "--json", "--candidate"])
        .arg(&candidate)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdict["passed"], false);
    let failed: Vec<&Value> = verdict["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["passed"] == false)
        .collect();
    assert!(!failed.is_empty(), "{verdict}");
    let out = r2e(dir)
        .args(["check", "r:calc.py:scale", "--candidate"])
        .arg(&candidate)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "FAIL r:calc.py:scale: {} of {} tests fail\n",
            failed.len(),
            verdict["tests"].as_array().unwrap().len()
        )),
        "{text}"
    );
    let mut differ = 0;
    for t in failed {
        assert!(
            text.contains(&format!("- {}:\n", t["name"].as_str().unwrap())),
            "{text}"
        );
        let (inputs, expected, actual) = (
            t["inputs"].as_array().unwrap(),
            t["expected"].as_array().unwrap(),
            t["actual"].as_array().unwrap(),
        );
        assert!(!inputs.is_empty(), "{t}");
        for (k, call) in inputs.iter().enumerate() {
            let want = expected[k].as_str().unwrap();
            let got = actual.get(k).and_then(|a| a.as_str()).unwrap_or("-");
            let block = format!(
                "    call      {}\n    expected  {want}\n    actual    {got}\n",
                call.as_str().unwrap()
            );
            assert!(text.contains(&block), "{block} in {text}");
            differ += usize::from(want != got);
        }
    }
    assert!(
        differ > 0,
        "a failing call shows two different outcomes: {text}"
    );

    // The original passes.
    std::fs::write(
        &candidate,
        "def scale(x, factor):\n    \"\"\"Scales x after the helper.\"\"\"\n    if factor > 1:\n        return helper(x) * factor\n    return helper(x) - factor\n",
    )
    .unwrap();
    let out = r2e(dir)
        .args(["check", "r:calc.py:scale", "--candidate"])
        .arg(&candidate)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("PASS r:calc.py:scale: all "));
}

fn git(repo: &Path, args: &[&str]) -> String {
    common::git(repo, None, args)
}

const TWO_FILES: &str = r#"
//- a.py
def base(x):
    """Triples."""
    y = x * 3
    return y

def use_a(x):
    """Uses base."""
    if x > 0:
        return base(x) + 1
    return base(x) - 1

//- b.py
def bhelp(s):
    """Doubles."""
    t = s + s
    return t

def use_b(s):
    """Uses bhelp."""
    if s > 2:
        return bhelp(s)
    return s - 1
"#;

/// `r2e dataset diff` names the fields that changed for each changed instance, and lists apart
/// the instances whose repository's commit moved while their function, harness and spec stayed.
#[test]
fn dataset_diff_names_changed_fields_and_commit_only_moves() {
    let p = Project::new(TWO_FILES, "");
    let dir = p.path();
    let repo = dir.join("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "one"]);
    std::fs::write(
        p.pipeline(),
        "[project]\nname = \"t\"\n\n[[repo]]\ngit = \"repo\"\nrev = \"main\"\nname = \"g\"\n\n[env]\ninstaller = \"pip\"\n",
    )
    .unwrap();
    common::offline_build(dir);
    let old = dir.join("old");
    std::fs::create_dir(&old).unwrap();
    for f in ["manifest.json", "dataset.jsonl"] {
        std::fs::copy(dir.join("out").join(f), old.join(f)).unwrap();
    }
    let before: Vec<String> = jsonl(&old.join("dataset.jsonl"))
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let in_a: Vec<&String> = before.iter().filter(|i| i.starts_with("g:a.py:")).collect();
    let in_b: Vec<&String> = before.iter().filter(|i| i.starts_with("g:b.py:")).collect();
    assert!(!in_a.is_empty() && !in_b.is_empty(), "{before:?}");

    // A commit that changes a.py's code and leaves b.py as it was.
    let a = std::fs::read_to_string(repo.join("a.py")).unwrap();
    std::fs::write(repo.join("a.py"), a.replace("x * 3", "x * 4")).unwrap();
    std::fs::write(repo.join("NOTES.txt"), "notes\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "two"]);
    common::offline_build(dir);

    // NEW defaults to the manifest of the pipeline's output (`-p`).
    let out = r2e(dir)
        .args(["dataset", "diff", "old/manifest.json", "--json", "-p"])
        .arg(p.pipeline())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed: BTreeMap<&str, Vec<&str>> = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap(),
                c["fields"]
                    .as_array()
                    .unwrap_or_else(|| panic!("fields known: {c}"))
                    .iter()
                    .map(|f| f.as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    let moved: Vec<&str> = d["commit_only"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    for id in &in_a {
        let fields = changed
            .get(id.as_str())
            .unwrap_or_else(|| panic!("{id} changed: {d}"));
        assert!(fields.contains(&"commit"), "{id}: {fields:?}");
        assert!(
            fields.len() > 1,
            "more than the commit changed: {id}: {fields:?}"
        );
        assert!(
            !fields.contains(&"id") && !fields.contains(&"repo"),
            "{fields:?}"
        );
    }
    let use_a = &changed["g:a.py:use_a"];
    assert!(
        use_a.contains(&"expected"),
        "use_a's outcomes changed: {use_a:?}"
    );
    for id in &in_b {
        assert!(moved.contains(&id.as_str()), "{id} moved only: {d}");
    }
    assert_eq!(moved.len(), in_b.len(), "{d}");
    let m = &d["commit_only"][0];
    assert_ne!(m["old_commit"], m["new_commit"]);
    assert_eq!(m["new_commit"], git(&repo, &["rev-parse", "HEAD"]));
    assert_eq!(d["unchanged"], 0);

    // The text, between output folders.
    let out = r2e(dir)
        .args(["dataset", "diff", "old", "out"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    let use_a_line = format!("~ g:a.py:use_a changed: {}\n", use_a.join(", "));
    assert!(text.contains(&use_a_line), "{use_a_line} in {text}");
    for id in &in_b {
        assert!(
            text.contains(&format!("> {id} commit only: ")),
            "{id} in {text}"
        );
    }
    assert!(
        text.ends_with(&format!(
            "0 added, 0 removed, {} changed, {} commit only, 0 unchanged\n",
            changed.len(),
            moved.len()
        )),
        "{text}"
    );

    // Without the dataset beside the old manifest, which fields changed is unknown, and said.
    std::fs::remove_file(old.join("dataset.jsonl")).unwrap();
    let out = r2e(dir)
        .args(["dataset", "diff", "old", "out", "--json"])
        .output()
        .unwrap();
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["commit_only"], json!([]));
    assert!(
        d["changed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["fields"].is_null()),
        "{d}"
    );
}

/// The README gives exactly two commands, says outside them where the binary is and how to put
/// it on the PATH, and links to `docs/commands.md`, whose table of commands names every command
/// the binary has.
#[test]
fn readme_names_the_binary_and_every_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains("](docs/commands.md)"), "{readme}");
    let commands_doc = std::fs::read_to_string(root.join("docs/commands.md")).unwrap();
    let section = readme
        .split("\n## Two commands\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a `## Two commands` section");
    let commands: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("    ") && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release -- build", "cargo test --workspace"]
    );
    let outside = section
        .lines()
        .filter(|l| !l.starts_with("    "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(outside.contains("`target/release/r2e`"), "{outside}");
    assert!(outside.contains("PATH"), "{outside}");

    let help = Command::cargo_bin("r2e")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let help = stdout(&help);
    let names: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .collect();
    assert!(names.len() >= 6, "{help}");
    let table = commands_doc
        .split("\n## Commands\n")
        .nth(1)
        .expect("a `## Commands` section in docs/commands.md");
    for name in names {
        assert!(
            table.contains(&format!("| `r2e {name}")),
            "docs/commands.md's table of commands has no `r2e {name}`"
        );
    }
}

/// The summary of a build that stops before the harnesses: per-repository rows without harness
/// and instance numbers, in JSON and in the human summary, which shows what the filters excluded.
#[test]
fn an_early_summary_has_per_repository_rows_and_the_filters() {
    let p = calc_project();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--until", "slice", "--json", "-p"])
        .arg(p.pipeline())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["repos"][0]["repo"], "r");
    assert_eq!(v["repos"][0]["functions"], 5);
    assert_eq!(v["repos"][0]["candidates"], 3);
    assert_eq!(v["repos"][0]["excluded"], 2);
    assert_eq!(v["repos"][1]["repo"], "bare");
    assert_eq!(v["repos"][1]["candidates"], 0);
    assert!(v["repos"][1].get("instances").is_none(), "{v}");
    assert_eq!(v["excluded_by"]["no_docstring"], 2);

    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--until", "slice", "--pipeline"])
        .arg(p.pipeline())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(" excluded: 3 by the filters: no_docstring 2, name_prefix 1\n"),
        "{err}"
    );
    assert!(
        err.contains(
            "     repo r: 5 functions, 3 candidates, 2 excluded (no_docstring 1, name_prefix 1)\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("     repo bare: 1 functions, 0 candidates, 1 excluded (no_docstring 1)\n"),
        "{err}"
    );
}

/// Every command takes `-p PIPELINE` / `--pipeline PIPELINE`; `build` also takes it as its
/// positional argument, and refuses two different ones.
#[test]
fn every_command_takes_its_pipeline_with_p() {
    let p = Project::new(CALC, "");
    let bin = || Command::cargo_bin("r2e").unwrap();
    for cmd in [
        &["build"][..],
        &["status"],
        &["check"],
        &["report"],
        &["explain"],
        &["dataset", "diff"],
    ] {
        let out = bin().args(cmd).arg("--help").output().unwrap();
        let help = stdout(&out);
        assert!(
            help.contains("-p, --pipeline <PIPELINE>"),
            "r2e {}: {help}",
            cmd.join(" ")
        );
    }
    let pipeline = p.pipeline();
    let slice = ["--until", "slice", "--json"];
    let summary = |args: &[&std::ffi::OsStr]| -> Value {
        let out = bin().args(args).args(slice).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let first = summary(&[&os("build"), pipeline.as_os_str()]);
    assert_eq!(first["counts"]["candidates"], 3);
    for args in [
        vec![os("build"), os("-p"), pipeline.clone().into()],
        vec![os("build"), os("--pipeline"), pipeline.clone().into()],
        vec![
            os("build"),
            pipeline.clone().into(),
            os("-p"),
            pipeline.clone().into(),
        ],
    ] {
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let v = summary(&refs);
        assert_eq!(v["output"], first["output"], "{args:?}");
        assert_eq!(
            v["stages"]["parse"]["executed"], 0,
            "the same pipeline: {args:?}"
        );
    }
    let out = bin()
        .arg("build")
        .arg(&pipeline)
        .args(["-p", "other.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("two pipelines given"), "{err}");

    // The other commands read the pipeline `-p` names (here a build without a dataset).
    let out = bin()
        .args(["status", "--json", "--until", "slice", "--pipeline"])
        .arg(&pipeline)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["up_to_date"], true, "{v}");
    let out = bin()
        .args(["explain", "r:calc.py:scale", "--json", "--pipeline"])
        .arg(&pipeline)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["harness"], json!([]), "not built that far: {v}");
    let project = std::fs::canonicalize(p.path()).unwrap();
    std::fs::write(
        p.path().join("x.py"),
        "def scale(x, factor):\n    return x\n",
    )
    .unwrap();
    for cmd in [
        &["report", "-p"][..],
        &["check", "r:calc.py:scale", "--candidate", "x.py", "-p"],
    ] {
        let out = bin()
            .args(cmd)
            .arg(&pipeline)
            .current_dir(p.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains(&project.display().to_string()) && err.contains("run `r2e build` first"),
            "{cmd:?} reads the output of the pipeline `-p` names: {err}"
        );
    }
    // `dataset diff OLD`: NEW is the manifest of the output of the pipeline `-p` names.
    let out = bin()
        .args([
            "dataset",
            "diff",
            "old.json",
            "-p",
            "/no/such/pipeline.toml",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/no/such/pipeline.toml` does not exist"),
        "{err}"
    );
}
