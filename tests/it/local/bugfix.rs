//! Bug-fix tasks (`[bugfix]`, docs/bugfix.md): made from the instances' harnesses and the
//! dataset's mutants, judged through the one check path, written to `bugfix.jsonl`; added to a
//! built pipeline, they run nothing but their own actions.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Project, jsonl};
use serde_json::Value;

const OFFLINE: &str = "[env]\ninstaller = \"pip\"\n";

const FILES: &str = r#"
//- shop/__init__.py
//- shop/prices.py
def _round(cents):
    return (cents + 50) // 100


def discounted(prices, percent, floor):
    """Each price lowered by `percent` percent (whole units), never below `floor`.

    >>> discounted([100, 250], 10, 0)
    [90, 225]
    """
    out = []
    for price in prices:
        cut = _round(price * percent)
        value = price - cut
        if value < floor:
            value = floor
        out.append(value)
    return out
"#;

/// `git apply` of `patch` in `dir` (a copy of the repository), which must succeed.
fn apply(dir: &Path, patch: &str) {
    let file = dir.join("change.patch");
    std::fs::write(&file, patch).unwrap();
    let out = Command::new("git")
        .args(["apply", "--unsafe-paths", "-p1"])
        .arg(&file)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git apply: {}\n{patch}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&file).unwrap();
}

/// `shop/prices.py` as `original` with `bug_patch` applied (through `git apply`).
fn broken_of(original: &str, bug_patch: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("shop")).unwrap();
    std::fs::write(dir.path().join("shop/prices.py"), original).unwrap();
    apply(dir.path(), bug_patch);
    std::fs::read_to_string(dir.path().join("shop/prices.py")).unwrap()
}

/// A diff of `shop/prices.py` from `from` to `to`, as a fix is submitted.
fn prices_diff(from: &str, to: &str) -> String {
    diffy::DiffOptions::new()
        .set_original_filename("a/shop/prices.py")
        .set_modified_filename("b/shop/prices.py")
        .create_patch(from, to)
        .to_string()
}

/// The function's definition in a module's text, from `def` to the end of its body.
fn def_text(src: &str, name: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let def = lines
        .iter()
        .position(|l| l.starts_with(&format!("def {name}(")))
        .unwrap();
    let end = (def + 1..lines.len())
        .find(|&i| !lines[i].is_empty() && !lines[i].starts_with(' '))
        .unwrap_or(lines.len());
    lines[def..end].join("\n") + "\n"
}

/// `r2e check ID --json FLAG FILE` in the project, FILE holding `text` (`--candidate` a
/// function, `--patch` a diff): its exit code, its verdict (null when none) and its stderr.
fn r2e_check(p: &Project, id: &str, flag: &str, text: &str) -> (i32, Value, String) {
    let file = p.path().join("checked.txt");
    std::fs::write(&file, text).unwrap();
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .envs(common::offline_env())
        .current_dir(p.path())
        .args(["check", id, "--json", flag])
        .arg(&file)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A built pipeline gains `[bugfix]`: the second build runs no generate, validate or mutate
/// action, only the broken states' repeated checks, and writes tasks whose FAIL_TO_PASS the
/// broken state fails (through `r2e check`), whose gold patch takes the broken file back to the
/// original byte for byte, and whose statement shows the failing call and nothing of the
/// solution (no path, no line, no test code). A third build with another `per_function` runs
/// nothing new. Settings not built yet are refused, located (exit 2).
#[test]
fn tasks_from_the_harnesses_mutants_judged_by_the_check_path() {
    let p = Project::new(FILES, OFFLINE);
    let first = common::offline_build(p.path());
    assert_eq!(first["counts"]["instances"], 1, "{first}");
    assert!(!p.path().join("out/bugfix.jsonl").exists());

    let pipeline = p.path().join("pipeline.toml");
    let text = std::fs::read_to_string(&pipeline).unwrap();
    std::fs::write(&pipeline, format!("{text}\n[bugfix]\nper_function = 3\n")).unwrap();
    let second = common::offline_build(p.path());
    for stage in ["generate", "validate", "mutate"] {
        assert_eq!(second["stages"][stage]["executed"], 0, "{stage}: {second}");
    }
    let tasks = jsonl(&p.path().join("out/bugfix.jsonl"));
    assert_eq!(second["counts"]["bugfix_tasks"], tasks.len(), "{second}");
    // Where the stage's time went: its checks, and the project's tests on the broken states.
    for part in ["bugfix", "bugfix_tests"] {
        let t = &second["time"][0][part];
        assert!(t["seconds"].as_f64().is_some(), "{part}: {second}");
        assert_eq!(t["computed"], 1, "{part}: {second}");
    }
    assert!(second["time"][0]["bugfix"]["seconds"].as_f64().unwrap() > 0.0);
    // Each chosen broken state's repeated check ran, once: the tasks and the ones left out.
    let rejected = second["counts"]["bugfix_rejected"].as_u64().unwrap() as usize;
    assert_eq!(
        second["stages"]["bugfix"]["executed"],
        tasks.len() + rejected,
        "{second}"
    );
    assert!(
        (2..=3).contains(&tasks.len()),
        "up to per_function tasks: {tasks:#?}"
    );

    let id = "r:shop/prices.py:discounted";
    let original = std::fs::read_to_string(p.path().join("repo/shop/prices.py")).unwrap();
    let mut ids = Vec::new();
    for t in &tasks {
        let name = t["instance_id"].as_str().unwrap();
        ids.push(name.to_owned());
        assert!(name.starts_with(&format!("{id}:bug-")), "{t:#}");
        assert_eq!(t["instance"], id);
        assert_eq!(t["origin"], "mutant");
        assert_eq!(t["depth"], 0);
        assert_eq!(t["locations"][0]["file"], "shop/prices.py");
        assert_eq!(t["locations"][0]["function"], "discounted");
        let f2p: Vec<&str> = t["FAIL_TO_PASS"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(!f2p.is_empty(), "{t:#}");
        assert!(
            f2p.iter()
                .all(|n| n.starts_with("r2e_tests/test_shop_prices_discounted.py::")),
            "{f2p:?}"
        );
        let runs = t["stability"]["runs"].as_u64().unwrap();
        assert_eq!(runs, 3, "[validate] repeats");

        // The broken state: the repository with `bug_patch` applied.
        let work = tempfile::tempdir().unwrap();
        let copy = work.path().join("shop");
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::write(copy.join("prices.py"), &original).unwrap();
        apply(work.path(), t["bug_patch"].as_str().unwrap());
        let broken = std::fs::read_to_string(copy.join("prices.py")).unwrap();
        assert_ne!(broken, original);
        let [first_line, last_line] =
            [0, 1].map(|k| t["locations"][0]["lines"][k].as_u64().unwrap());
        let changed: Vec<usize> = broken
            .lines()
            .zip(original.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i + 1)
            .collect();
        if let (Some(&a), Some(&b)) = (changed.first(), changed.last()) {
            assert!(
                first_line <= a as u64 && b as u64 <= last_line,
                "{changed:?} within {first_line}..{last_line}"
            );
        }
        // Judged by the one check path: it fails, and exactly its FAIL_TO_PASS tests fail.
        let (code, verdict, _) = r2e_check(&p, id, "--candidate", &def_text(&broken, "discounted"));
        assert_eq!(code, 1, "the broken state fails: {verdict:#}");
        let failing: Vec<String> = verdict["tests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["passed"] == false)
            .map(|v| {
                format!(
                    "r2e_tests/test_shop_prices_discounted.py::{}",
                    v["name"].as_str().unwrap().replace('.', "::")
                )
            })
            .collect();
        assert_eq!(failing, f2p, "{verdict:#}");
        // The gold patch restores the original, byte for byte.
        apply(work.path(), t["patch"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(copy.join("prices.py")).unwrap(),
            original
        );
        // The hidden tests are the harness, added.
        let test_patch = t["test_patch"].as_str().unwrap();
        assert!(
            test_patch
                .starts_with("--- /dev/null\n+++ b/r2e_tests/test_shop_prices_discounted.py\n"),
            "{test_patch}"
        );
        // The statement: the failing call and what was expected, nothing of the solution.
        let statement = t["problem_statement"].as_str().unwrap();
        assert!(
            statement.contains("`discounted` does not behave"),
            "{statement}"
        );
        assert!(statement.contains("discounted("), "{statement}");
        assert!(statement.contains("but I expected it to"), "{statement}");
        for secret in ["prices.py", "r2e_equiv", "r2e_tests", "def ", "line "] {
            assert!(!statement.contains(secret), "{secret}: {statement}");
        }
    }
    // Judging a fix, `r2e check TASK --patch FILE`: the gold patch passes; an empty patch
    // fails with the FAIL_TO_PASS tests named; a fix that breaks what passed fails with those
    // PASS_TO_PASS tests named; a diff that is not one is bad input at its line; a path out of
    // the repository is refused.
    let patch_check = |task: &str, patch: &str| r2e_check(&p, task, "--patch", patch);
    let task = tasks
        .iter()
        .find(|t| !t["PASS_TO_PASS"].as_array().unwrap().is_empty())
        .unwrap_or_else(|| panic!("a task with PASS_TO_PASS tests: {tasks:#?}"));
    let task_id = task["instance_id"].as_str().unwrap();
    let (code, v, err) = patch_check(task_id, task["patch"].as_str().unwrap());
    assert_eq!(
        (code, &v["outcome"]),
        (0, &Value::from("pass")),
        "{v:#} {err}"
    );
    let (code, v, err) = patch_check(task_id, "");
    assert_eq!(
        (code, &v["outcome"]),
        (1, &Value::from("fail")),
        "{v:#} {err}"
    );
    assert_eq!(v["fail_to_pass_failing"], task["FAIL_TO_PASS"], "{v:#}");
    assert_eq!(v["pass_to_pass_failing"], Value::Array(vec![]), "{v:#}");
    // Broken otherwise: every price at its floor, whatever the floor is.
    let work_copy = original.replace("    out = []\n", "    return [floor for _ in prices]\n");
    assert_ne!(work_copy, original);
    let broken_task = broken_of(&original, task["bug_patch"].as_str().unwrap());
    let worse = prices_diff(&broken_task, &work_copy);
    let (code, v, err) = patch_check(task_id, &worse);
    assert_eq!(
        (code, &v["outcome"]),
        (1, &Value::from("fail")),
        "{v:#} {err}"
    );
    let p2p_failing = v["pass_to_pass_failing"].as_array().unwrap();
    assert!(!p2p_failing.is_empty(), "{v:#}");
    for t in p2p_failing {
        assert!(task["PASS_TO_PASS"].as_array().unwrap().contains(t), "{t}");
    }
    let gold = task["patch"].as_str().unwrap();
    let malformed = gold.replacen("\n-", "\n?", 1);
    let bad_line = malformed.lines().position(|l| l.starts_with('?')).unwrap() + 1;
    let (code, _, err) = patch_check(task_id, &malformed);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("checked.txt:{bad_line}:")), "{err}");
    let outside = gold.replace("a/shop/prices.py", "a/../../etc/passwd");
    let (code, _, err) = patch_check(task_id, &outside);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("refused") && err.contains("outside the repository"),
        "{err}"
    );

    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids, "one task per broken state");

    // Another `per_function`: the same tasks chosen first, and no check runs again.
    std::fs::write(&pipeline, format!("{text}\n[bugfix]\nper_function = 1\n")).unwrap();
    let third = common::offline_build(p.path());
    assert_eq!(third["stages"]["bugfix"]["executed"], 0, "{third}");
    let fewer = jsonl(&p.path().join("out/bugfix.jsonl"));
    assert_eq!(fewer.len(), 1);
    assert!(ids.contains(&fewer[0]["instance_id"].as_str().unwrap().to_owned()));

    // `statement = "model"`: a model rewrites each report as an issue (stage `statement`), and
    // nothing else runs again. The model is shown the report and the docstring, never the file,
    // the patch or the tests.
    let issue = "Discounted prices come out wrong\n\nI used `discounted` on my price list and \
                 the prices it gave back are not the ones the documentation promises.";
    // (The same server answers `[evaluate]`'s fix requests below with the gold function.)
    let gold_def = def_text(&original, "discounted");
    let (good, asked, _) = common::server::serve(Duration::ZERO, move |prompt, _| {
        if prompt.contains("Fix the bug") {
            (200, "", format!("Here:\n```python\n{gold_def}```\n"))
        } else {
            (200, "", issue.to_owned())
        }
    });
    let model = |url: &str, name: &str| {
        format!(
            "{text}\n[providers.local]\nbase_url = \"{url}\"\n\n[bugfix]\nper_function = 2\n\
             statement = \"model\"\nprovider = \"local\"\nmodel = \"{name}\"\n"
        )
    };
    std::fs::write(&pipeline, model(&good, "scripted")).unwrap();
    let fourth = common::offline_build(p.path());
    for stage in ["generate", "validate", "mutate", "bugfix"] {
        assert_eq!(fourth["stages"][stage]["executed"], 0, "{stage}: {fourth}");
    }
    let told = jsonl(&p.path().join("out/bugfix.jsonl"));
    assert_eq!(told.len(), 2, "{fourth}");
    assert_eq!(fourth["stages"]["statement"]["executed"], 2, "{fourth}");
    let prompts = asked.lock().unwrap().clone();
    assert_eq!(prompts.len(), 2, "one request per task");
    for (t, prompt) in told.iter().zip(&prompts) {
        assert_eq!(t["problem_statement"], issue, "{t:#}");
        assert_eq!(t["statement_source"]["by"], "model", "{t:#}");
        assert_eq!(t["statement_source"]["model"], "scripted", "{t:#}");
        assert!(prompt.contains("`discounted` does not behave"), "{prompt}");
        assert!(
            prompt.contains("Each price lowered by"),
            "the docstring: {prompt}"
        );
        for secret in ["prices.py", "r2e_tests", "_round", "def ", "@@"] {
            assert!(!prompt.contains(secret), "{secret}: {prompt}");
        }
    }
    // Another model, whose answer names the broken file: not used; the task keeps its report
    // and says why. Only the statements' requests run.
    let (leaky, _, _) = common::server::serve(Duration::ZERO, |_, _| {
        (
            200,
            "",
            "The bug is in shop/prices.py, please look.".to_owned(),
        )
    });
    std::fs::write(&pipeline, model(&leaky, "scripted-2")).unwrap();
    let fifth = common::offline_build(p.path());
    for stage in ["generate", "validate", "mutate", "bugfix"] {
        assert_eq!(fifth["stages"][stage]["executed"], 0, "{stage}: {fifth}");
    }
    assert_eq!(fifth["stages"]["statement"]["executed"], 2, "{fifth}");
    assert_eq!(fifth["stages"]["statement"]["failed"], 2, "{fifth}");
    for t in jsonl(&p.path().join("out/bugfix.jsonl")) {
        let statement = t["problem_statement"].as_str().unwrap();
        assert!(statement.contains("`discounted` does not behave"), "{t:#}");
        assert_eq!(t["statement_source"]["by"], "report", "{t:#}");
        assert_eq!(t["statement_source"]["model"], "scripted-2", "{t:#}");
        let why = t["statement_source"]["refused"].as_str().unwrap();
        assert!(why.contains("prices.py"), "{why}");
    }
    // The first model again: its answers come from the cache; nothing runs.
    std::fs::write(&pipeline, model(&good, "scripted")).unwrap();
    let sixth = common::offline_build(p.path());
    assert_eq!(sixth["stages"]["statement"]["executed"], 0, "{sixth}");
    assert_eq!(sixth["stages"]["statement"]["cached"], 2, "{sixth}");
    assert_eq!(asked.lock().unwrap().len(), 2, "no new request");

    // `[evaluate]` scores models on the tasks too, as single-file fixes, judged as `r2e check
    // TASK --patch` judges: the gold function passes, the broken one (a fix that changes
    // nothing) fails, and a model that writes the gold function passes. Its prompt shows the
    // statement and the broken file, never the hidden tests.
    let evaluate = "\n[evaluate]\nenabled = true\nsamples = 1\nk = [1]\n\
                    [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n\
                    [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"mutants\"\n\
                    [[evaluate.model]]\nprovider = \"local\"\nmodel = \"fixer\"\n";
    std::fs::write(&pipeline, format!("{}{evaluate}", model(&good, "scripted"))).unwrap();
    let seventh = common::offline_build(p.path());
    for stage in ["generate", "validate", "mutate", "bugfix", "statement"] {
        assert_eq!(
            seventh["stages"][stage]["executed"], 0,
            "{stage}: {seventh}"
        );
    }
    let results = jsonl(&p.path().join("out/bugfix_results.jsonl"));
    assert_eq!(
        results.len(),
        2 * 3,
        "two tasks, three models: {results:#?}"
    );
    for r in &results {
        assert!(
            told.iter().any(|t| t["instance_id"] == r["id"]),
            "a task's id: {r:#}"
        );
        let want = r["model"] != "builtin/mutants";
        assert_eq!(r["passed"], want, "{r:#}");
    }
    let rows = seventh["evaluate"]["bugfix"].as_array().unwrap();
    let pass = |model: &str, group: &str| {
        rows.iter()
            .find(|r| r["model"] == model && r["group"] == group)
            .unwrap_or_else(|| panic!("{model} {group}: {rows:#?}"))["pass"]["pass@1"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(pass("builtin/reference", "all"), 1.0);
    assert_eq!(pass("builtin/mutants", "origin: mutant"), 0.0);
    assert_eq!(pass("local/fixer", "depth: 0"), 1.0);
    let fix_prompts: Vec<String> = asked
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.contains("Fix the bug"))
        .cloned()
        .collect();
    assert_eq!(fix_prompts.len(), 2, "one per task");
    for prompt in &fix_prompts {
        assert!(prompt.contains(issue), "the statement: {prompt}");
        assert!(prompt.contains("shop/prices.py"), "{prompt}");
        assert!(prompt.contains("`discounted`"), "{prompt}");
        assert!(!prompt.contains("r2e_tests"), "{prompt}");
    }
    // `r2e report` shows the table.
    let report = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["report"])
        .current_dir(p.path())
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let md = std::fs::read_to_string(p.path().join("out/report.md")).unwrap();
    assert!(md.contains("on its bug-fix tasks"), "{md}");
    assert!(
        md.contains("| builtin/reference | all | 2 | 1.000 |"),
        "{md}"
    );

    // Depth 1: the bug is in `_round`, which `discounted` calls; `discounted`'s tests catch it,
    // and the report names `discounted`. The gold patch passes.
    std::fs::write(
        &pipeline,
        format!("{text}\n[bugfix]\ndepth = 1\nper_function = 2\n"),
    )
    .unwrap();
    common::offline_build(p.path());
    let deep = jsonl(&p.path().join("out/bugfix.jsonl"));
    assert!(!deep.is_empty(), "depth-1 tasks");
    for t in &deep {
        assert_eq!(t["depth"], 1, "{t:#}");
        assert_eq!(t["instance"], id);
        assert_eq!(t["locations"][0]["function"], "_round", "{t:#}");
        assert!(!t["FAIL_TO_PASS"].as_array().unwrap().is_empty(), "{t:#}");
        let statement = t["problem_statement"].as_str().unwrap();
        assert!(
            statement.contains("`discounted` does not behave"),
            "{statement}"
        );
        assert!(!statement.contains("_round"), "{statement}");
    }
    let task_id = deep[0]["instance_id"].as_str().unwrap();
    let (code, v, err) = patch_check(task_id, deep[0]["patch"].as_str().unwrap());
    assert_eq!(
        (code, &v["outcome"]),
        (0, &Value::from("pass")),
        "{v:#} {err}"
    );
    let (code, v, err) = patch_check(task_id, "");
    assert_eq!(
        (code, &v["outcome"]),
        (1, &Value::from("fail")),
        "{v:#} {err}"
    );

    // Two bugs in one task (`combine = 2`): one in `discounted`, one in `_round`, which it
    // calls; only bug-fix checks run. The gold patch passes, and a patch that fixes one of the
    // two fails: each must be fixed. `[evaluate]`, whose answer is one function, leaves them
    // out.
    let reference = "\n[evaluate]\nenabled = true\nsamples = 1\nk = [1]\n\
                     [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n";
    std::fs::write(
        &pipeline,
        format!("{text}\n[bugfix]\ncombine = 2\nper_function = 2\n{reference}"),
    )
    .unwrap();
    let combined = common::offline_build(p.path());
    for stage in ["generate", "validate", "mutate"] {
        assert_eq!(
            combined["stages"][stage]["executed"], 0,
            "{stage}: {combined}"
        );
    }
    assert_eq!(
        jsonl(&p.path().join("out/results.jsonl")).len(),
        1,
        "the instance is evaluated"
    );
    let results = p.path().join("out/bugfix_results.jsonl");
    assert!(
        !results.exists() || jsonl(&results).is_empty(),
        "no task of two bugs is evaluated: {:?}",
        std::fs::read_to_string(&results)
    );
    let tasks = jsonl(&p.path().join("out/bugfix.jsonl"));
    assert!(
        (1..=2).contains(&tasks.len()),
        "up to per_function tasks: {tasks:#?}"
    );
    for t in &tasks {
        let functions: Vec<&str> = t["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["function"].as_str().unwrap())
            .collect();
        assert_eq!(functions, ["discounted", "_round"], "{t:#}");
        assert!(
            t["instance_id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{id}:bugs-")),
            "{t:#}"
        );
        assert_eq!(t["mutant_kind"].as_str().unwrap().split('+').count(), 2);
        assert_eq!(t["depth"], 0);
        let task_id = t["instance_id"].as_str().unwrap();
        let (code, v, err) = patch_check(task_id, t["patch"].as_str().unwrap());
        assert_eq!(
            (code, &v["outcome"]),
            (0, &Value::from("pass")),
            "{v:#} {err}"
        );
        let broken = broken_of(&original, t["bug_patch"].as_str().unwrap());
        for fixed in ["discounted", "_round"] {
            let half = broken.replace(&def_text(&broken, fixed), &def_text(&original, fixed));
            assert_ne!(half, broken, "{fixed} is broken");
            assert_ne!(half, original, "the other one is broken");
            let (code, v, err) = patch_check(task_id, &prices_diff(&broken, &half));
            assert_eq!(
                (code, &v["outcome"]),
                (1, &Value::from("fail")),
                "only {fixed} fixed: {v:#} {err}"
            );
            assert!(
                !v["fail_to_pass_failing"].as_array().unwrap().is_empty(),
                "{v:#}"
            );
        }
    }

    // Not built yet, or incomplete: refused, located, exit 2.
    for (key, value) in [("depth", "2"), ("combine", "0"), ("statement", "\"model\"")] {
        std::fs::write(&pipeline, format!("{text}\n[bugfix]\n{key} = {value}\n")).unwrap();
        let out = assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .args(["build"])
            .current_dir(p.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{key}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = text.lines().count() + 3;
        assert!(
            stderr.contains(&format!("pipeline.toml:{line}:"))
                && match key {
                    "combine" => stderr.contains("at least 1"),
                    "statement" => stderr.contains("needs `provider"),
                    _ => true,
                },
            "{key}: {stderr}"
        );
    }
}

/// `r2e serve` opens bug-fix sessions: the workspace is the repository in the task's broken
/// state with no hidden test in it (no harness, no `r2e_tests`, no recorded call), the answer
/// to opening it is the report and not where the bug is, a scripted agent that applies the gold
/// patch is rewarded 1.0 and a no-op 0.0, and `/v1/instances` lists the tasks.
#[test]
fn a_bug_fix_session_rewards_the_gold_fix_and_shows_no_hidden_test() {
    use common::serve::{dataset, original, start};
    let pipeline = dataset("bugfix", "[bugfix]\nper_function = 1\n");
    let server = start(&pipeline, &[], &[]);
    let tasks = jsonl(&server.output.join("bugfix.jsonl"));
    assert!(!tasks.is_empty());
    let listed = server.call("GET", "/v1/instances", None).json();
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), tasks.len(), "{listed}");
    let task = &tasks[0];
    let id = task["instance_id"].as_str().unwrap();
    assert!(ids.contains(&id));
    let file = task["locations"][0]["file"].as_str().unwrap();
    let gold = original(file);
    let instance = jsonl(&server.output.join("dataset.jsonl"))
        .into_iter()
        .find(|i| i["id"] == task["instance"])
        .unwrap();

    for (fix, reward, outcome) in [(Some(&gold), 1.0, "pass"), (None, 0.0, "fail")] {
        let opened = server.json(
            "POST",
            "/v1/sessions",
            serde_json::json!({ "instance": id }),
        );
        assert_eq!(opened.status, 201, "{}", opened.body);
        let opened = opened.json();
        let sid = opened["session"].as_str().unwrap().to_owned();
        assert_eq!(opened["problem_statement"], task["problem_statement"]);
        assert!(opened.get("path").is_none(), "{opened}");
        // The workspace: the broken state, and nothing of the hidden tests.
        let broken = server
            .call("GET", &format!("/v1/sessions/{sid}/files/{file}"), None)
            .body;
        assert_ne!(broken, gold);
        let dir = server
            .output
            .with_file_name(".out-bugfix.r2e")
            .join("sessions")
            .join(&sid);
        assert!(dir.is_dir(), "{}", dir.display());
        for entry in walkdir::WalkDir::new(&dir) {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(&dir).unwrap().to_string_lossy();
            assert!(!rel.contains("r2e_tests"), "{rel}");
            if entry.file_type().is_file() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                for hidden in ["r2e_equiv", "harness_modules", "check_function"] {
                    assert!(!text.contains(hidden), "{rel} holds `{hidden}`");
                }
                assert!(
                    !text.contains(instance["harness"].as_str().unwrap()),
                    "{rel} holds the harness"
                );
            }
        }
        if let Some(fixed) = fix {
            let put = server.call(
                "PUT",
                &format!("/v1/sessions/{sid}/files/{file}"),
                Some(fixed.as_bytes()),
            );
            assert_eq!(put.status, 200, "{}", put.body);
        }
        let submitted = server
            .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
            .json();
        assert_eq!(submitted["reward"], reward, "{submitted}");
        assert_eq!(submitted["outcome"], outcome, "{submitted}");
        // The trace names the task, and the instance whose harness judged it.
        let trace = server.trace(&sid);
        assert_eq!(trace[0]["task"], id, "{:#}", trace[0]);
        assert_eq!(trace[0]["instance"], task["instance"], "{:#}", trace[0]);
    }

    // The Python client's environment takes the task too (`kind="bugfix"` draws among tasks).
    let gold_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(gold_file.path(), &gold).unwrap();
    let url = format!("http://{}", server.addr);
    let (code, stdout, stderr) = common::serve::python(&[
        "-c",
        r#"
import json, sys
sys.path.insert(0, "clients/python")
from r2e_client import R2EEnvBase
url, task, path, gold = sys.argv[1:5]
env = R2EEnvBase(url, kind="bugfix")
obs, info = env.reset(seed=1)
drawn = info["instance"]
obs, info = env.reset(options={"instance": task})
env.step({"op": "write", "path": path, "text": open(gold).read()})
_, reward, terminated, _, info = env.step({"op": "submit"})
print(json.dumps({"drawn": drawn, "problem": obs["problem"], "path": obs["path"],
                  "reward": reward, "terminated": terminated, "outcome": info["outcome"]}))
"#,
        &url,
        id,
        file,
        gold_file.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let got: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert!(ids.contains(&got["drawn"].as_str().unwrap()), "{got}");
    assert_eq!(got["problem"], task["problem_statement"], "{got}");
    assert_eq!(got["path"], "", "{got}");
    assert_eq!(
        (&got["reward"], &got["terminated"], &got["outcome"]),
        (&Value::from(1.0), &Value::from(true), &Value::from("pass")),
        "{got}"
    );
}

/// `total`, which the fixture with history adds to `FILES`' `prices.py`.
const TOTAL: &str = r#"

def total(prices):
    """The sum of the prices, in whole units."""
    s = 0
    for price in prices:
        s += _round(price)
    return s
"#;

/// `roots`, which the fixture with history adds too: its first version uses the module's
/// import of `isqrt`, which the third commit moves into it.
const ROOTS: &str = r#"

def roots(values):
    """The integer square roots of the values, in hundredths, rounded to whole units."""
    out = []
    for v in values:
        out.append(_round(isqrt(v) * 100))
    return out
"#;

/// The module-level import the fixture's first module has.
const IMPORT: &str = "from math import isqrt\n\n\n";

/// The floor `discounted` gets at the fixture's second commit.
const FLOOR: &str = "        if value < floor:\n            value = floor\n";

/// `prices.py` at the fixture's first commit: `FILES`' `discounted` without its floor, `total`
/// and `roots`, with `roots`' import at the top.
fn prices_v1() -> String {
    let today = FILES.split("//- shop/prices.py\n").nth(1).unwrap();
    assert!(today.contains(FLOOR));
    format!("{IMPORT}{}{TOTAL}{ROOTS}", today.replace(FLOOR, ""))
}

/// The project's own tests, added with the fix of `discounted`.
const PROJECT_TESTS: &str = r#"from shop.prices import discounted, roots


def test_roots():
    assert roots([400, 81]) == [20, 9]


def test_floor():
    assert discounted([100], 50, 60) == [60]


def test_plain():
    assert discounted([100, 250], 10, 0) == [90, 225]
"#;

/// pytest and what it needs on this interpreter, for the capture's environment.
const PYTEST: [&str; 4] = [
    "pytest==8.3.5",
    "iniconfig==2.1.0",
    "pluggy==1.6.0",
    "packaging==25.0",
];

/// Runs git in `repo` with fixed names, at `date`; its stdout.
fn git_at(repo: &Path, date: &str, args: &[&str]) -> String {
    common::git(repo, Some(date), args)
}

/// `[bugfix] sources = ["history", "mutants"]` on a repository whose history has, on its
/// first-parent line, a behaviour change of `discounted` (the floor, commit 2) and a pure
/// refactor of `total` (commit 3, a variable renamed, and a comment added to `_round`; `roots`
/// takes the module's import of `isqrt` into its body): the change is a task whose
/// gold patch is the maintainers' own change and whose date is its commit's, judged `pass` by
/// `r2e check --patch` and its empty patch `fail` with its FAIL_TO_PASS named; the refactor is
/// no task, and `failures.jsonl` says why, as does the earlier `roots`, which fails in today's
/// module only for the import it lacks; with one task per instance, the history's comes
/// before the mutants'. The project's own tests (pytest, the capture's environment) run on
/// each broken state: the test that came with the fix catches the change, and none catches
/// the mutant of `total`, which no project test calls. They run on the module as it is once,
/// with the tests of both instances some test calls (`discounted` and `roots`).
#[test]
fn a_change_from_the_history_is_a_task_and_a_refactor_is_not() {
    let p = Project::new("//- shop/__init__.py\n", OFFLINE);
    let repo = p.path().join("repo");
    let prices = repo.join("shop/prices.py");
    const C1: &str = "2024-01-10T10:00:00Z";
    const C2: &str = "2024-03-05T12:00:00Z";
    const C3: &str = "2024-06-01T08:00:00Z";
    git_at(&repo, C1, &["init", "-q", "-b", "main"]);
    let v1 = prices_v1();
    std::fs::write(&prices, &v1).unwrap();
    git_at(&repo, C1, &["add", "-A"]);
    git_at(&repo, C1, &["commit", "-q", "-m", "prices"]);
    let v2 = v1.replace(
        "        value = price - cut\n",
        &format!("        value = price - cut\n{FLOOR}"),
    );
    std::fs::write(&prices, &v2).unwrap();
    // The fix comes with a test of its own, as maintainers' fixes do.
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    std::fs::write(repo.join("tests/test_prices.py"), PROJECT_TESTS).unwrap();
    git_at(&repo, C2, &["add", "-A"]);
    git_at(&repo, C2, &["commit", "-q", "-m", "floor"]);
    let fix = git_at(&repo, C2, &["rev-parse", "HEAD"]);
    let maintainers = git_at(
        &repo,
        C2,
        &["diff", "HEAD~1", "HEAD", "--", "shop/prices.py"],
    );
    let v3 = v2
        .replace(
            "    s = 0\n    for price in prices:\n        s += _round(price)\n    return s\n",
            "    acc = 0\n    for price in prices:\n        acc += _round(price)\n    return acc\n",
        )
        .replace(
            "def _round(cents):\n",
            "def _round(cents):\n    # half up\n",
        )
        .replace(IMPORT, "")
        .replace(
            "whole units.\"\"\"\n    out = []\n",
            "whole units.\"\"\"\n    from math import isqrt\n\n    out = []\n",
        );
    assert!(v3.contains("    from math import isqrt\n") && !v3.starts_with(IMPORT));
    std::fs::write(&prices, &v3).unwrap();
    git_at(&repo, C3, &["commit", "-q", "-am", "refactor"]);

    let pipeline = p.pipeline();
    let text = std::fs::read_to_string(&pipeline).unwrap();
    std::fs::write(
        &pipeline,
        format!("{text}\n[bugfix]\nsources = [\"history\", \"mutants\"]\nper_function = 1\n"),
    )
    .unwrap();
    // pytest for the capture's environment, which runs the project's tests.
    let pytest = common::wheels("pytest", &PYTEST);
    let (built, _) = common::offline_build_with(p.path(), &[&pytest]);
    assert_eq!(built["counts"]["instances"], 3, "{built}");
    let tasks = jsonl(&p.path().join("out/bugfix.jsonl"));
    let discounted = "r:shop/prices.py:discounted";
    let total = "r:shop/prices.py:total";
    let of = |id: &str| -> Vec<&Value> { tasks.iter().filter(|t| t["instance"] == id).collect() };
    // One task per instance: `discounted`'s is its change from the history, `total`'s a mutant
    // (its refactor is none).
    let [change] = of(discounted)[..] else {
        panic!("one task of discounted: {tasks:#?}")
    };
    let [mutant] = of(total)[..] else {
        panic!("one task of total: {tasks:#?}")
    };
    assert_eq!(mutant["origin"], "mutant", "{mutant:#}");
    // The project's own tests: the ones that call the function, run on the broken state. The
    // maintainers' test of the floor catches the change; no project test calls `total`.
    assert_eq!(
        change["project_tests_fail"],
        serde_json::json!(["tests/test_prices.py::test_floor"]),
        "{change:#}"
    );
    assert_eq!(change["caught_by_project_tests"], true);
    assert_eq!(
        mutant["project_tests_fail"],
        serde_json::json!([]),
        "{mutant:#}"
    );
    assert_eq!(mutant["caught_by_project_tests"], false);
    // `roots`' task ran its one test. The stored runs: one per task whose function some test
    // calls, and one of the module as it is, shared by them.
    let [root] = of("r:shop/prices.py:roots")[..] else {
        panic!("one task of roots: {tasks:#?}")
    };
    assert!(root["project_tests_fail"].is_array(), "{root:#}");
    let stored = walkdir::WalkDir::new(p.path().join("cache/actions/project-tests-v1"))
        .into_iter()
        .filter(|e| e.as_ref().unwrap().file_type().is_file())
        .count();
    assert_eq!(stored, 2 + 1);
    assert_eq!(change["origin"], "history", "{change:#}");
    assert!(
        change["instance_id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{discounted}:hist-")),
        "{change:#}"
    );
    assert_eq!(change["history_commit"], fix.as_str());
    assert_eq!(change["created_at"], C2);
    assert_eq!(change["mutant_kind"], Value::Null);
    assert_eq!(change["depth"], 0);
    assert!(!change["FAIL_TO_PASS"].as_array().unwrap().is_empty());
    // The gold patch is the maintainers' change: the same lines taken out and put in.
    let changed = |diff: &str| -> Vec<String> {
        diff.lines()
            .filter(|l| {
                (l.starts_with('+') || l.starts_with('-'))
                    && !l.starts_with("+++")
                    && !l.starts_with("---")
            })
            .map(str::to_owned)
            .collect()
    };
    let gold = change["patch"].as_str().unwrap();
    assert_eq!(
        changed(gold),
        changed(&maintainers),
        "{gold}\n{maintainers}"
    );
    // The broken state is today's module with the body from before the change.
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("shop")).unwrap();
    std::fs::write(work.path().join("shop/prices.py"), &v3).unwrap();
    apply(work.path(), change["bug_patch"].as_str().unwrap());
    let broken = std::fs::read_to_string(work.path().join("shop/prices.py")).unwrap();
    assert_eq!(broken, v3.replace(FLOOR, ""));
    let statement = change["problem_statement"].as_str().unwrap();
    assert!(statement.contains("discounted("), "{statement}");
    for secret in ["prices.py", "floor:", "r2e_tests", &fix[..12]] {
        assert!(!statement.contains(secret), "{secret}: {statement}");
    }

    // Judged by the one check path.
    let id = change["instance_id"].as_str().unwrap();
    let (code, v, err) = r2e_check(&p, id, "--patch", gold);
    assert_eq!(
        (code, &v["outcome"]),
        (0, &Value::from("pass")),
        "{v:#} {err}"
    );
    let (code, v, err) = r2e_check(&p, id, "--patch", "");
    assert_eq!(
        (code, &v["outcome"]),
        (1, &Value::from("fail")),
        "{v:#} {err}"
    );
    assert_eq!(v["fail_to_pass_failing"], change["FAIL_TO_PASS"], "{v:#}");

    // The refactor: judged, and left out with why.
    let failures = jsonl(&p.path().join("out/failures.jsonl"));
    let refactor: Vec<&Value> = failures
        .iter()
        .filter(|f| {
            f["stage"] == "bugfix"
                && f["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{total}:hist-"))
        })
        .collect();
    assert_eq!(refactor.len(), 1, "{failures:#?}");
    let reason = refactor[0]["reason"].as_str().unwrap();
    assert!(reason.contains("refactor"), "{reason}");
    assert!(
        reason.contains(&git_at(&repo, C3, &["rev-parse", "--short=12", "HEAD"])),
        "{reason}"
    );
    // The earlier `roots`, spliced into today's module, lacks the import its module had: no
    // task, and why.
    let roots = "r:shop/prices.py:roots";
    assert!(
        of(roots).iter().all(|t| t["origin"] == "mutant"),
        "{tasks:#?}"
    );
    let moved: Vec<&str> = failures
        .iter()
        .filter_map(|f| f["reason"].as_str())
        .filter(|r| r.starts_with(&format!("{roots}:hist-")))
        .collect();
    assert_eq!(moved.len(), 1, "{failures:#?}");
    assert!(
        moved[0].contains("NameError") && moved[0].contains("no longer has"),
        "{}",
        moved[0]
    );
}
