//! Dating functions from their history (`stages::dating`), `[select] created_after`, and the
//! evaluation split at each model's cutoff, on repositories whose commits have set dates: a
//! function added, one edited later, one moved to another file, one whose file was renamed,
//! a comment-only edit of another; a `git` source, a `path` source that is a clean work tree
//! of the same history, and a folder without history; a new commit walked on from the cached
//! walk of its parent; pass@k on the unseen split against a hand count, in `results.jsonl`,
//! the summary and `r2e report`, and a cutoff changed without asking or checking anything.

use std::path::Path;

use serde_json::Value;

use crate::common;
use common::calc::{calc_add_small, calc_clamp, calc_peek, calc_scale};
use common::jsonl;

/// Runs git in `repo` with fixed names; commits get `date` as author and committer date.
fn git(repo: &Path, date: &str, args: &[&str]) -> String {
    common::git(repo, Some(date), args)
}

/// Writes `files` (path, text) into `repo` and commits everything at `date`.
fn commit(repo: &Path, date: &str, files: &[(&str, &str)]) {
    for (path, text) in files {
        let full = repo.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, r2e_python::dedent(text, &[])).unwrap();
    }
    git(repo, date, &["add", "-A"]);
    git(repo, date, &["commit", "-q", "-m", date]);
}

fn init(repo: &Path) {
    std::fs::create_dir_all(repo).unwrap();
    git(
        repo,
        "2024-01-01T00:00:00+0000",
        &["init", "-q", "-b", "main"],
    );
}

const C1: &str = "2024-01-10T10:00:00Z";
const C2: &str = "2024-03-05T12:00:00Z";
const C3: &str = "2024-06-01T08:00:00Z";
const C4: &str = "2024-09-01T16:30:00Z";
const C5: &str = "2024-10-02T07:00:00Z";

const ADDED: &str = "
    def added(x):
        \"\"\"Twice x.\"\"\"
        if x > 0:
            return 2 * x
        return 0
";

const ADDED_COMMENTED: &str = "
    def added(x):
        \"\"\"Twice x.\"\"\"
        # positive only
        if x > 0:
            return 2 * x
        return 0
";

const EDITED: &str = "
    def edited(a, b):
        \"\"\"The larger of a and b.\"\"\"
        if a > b:
            return a
        return b
";

const EDITED_LATER: &str = "
    def edited(a, b):
        \"\"\"The larger of a and b.\"\"\"
        if a >= b:
            return a
        return b
";

const MOVED: &str = "
    def moved(s):
        \"\"\"s without blanks.\"\"\"
        return s.replace(' ', '')
";

const RENAMED: &str = "
    def in_renamed_file(n):
        \"\"\"The numbers below n.\"\"\"
        return list(range(n))
";

const FRESH: &str = "
    def fresh(n):
        \"\"\"n squared.\"\"\"
        return n * n
";

fn cat(parts: &[&str]) -> String {
    parts.concat()
}

/// The dated repository: `added` (c1), `edited` (c1, its body changed at c2, where `added`
/// got a comment), `moved` (c1, moved from `pkg/a.py` to `pkg/b.py` at c3), `in_renamed_file`
/// (c1, `pkg/old.py` renamed to `pkg/new.py` at c3), `fresh` (c4).
fn dated_repo(repo: &Path) {
    init(repo);
    commit(
        repo,
        C1,
        &[
            ("pkg/__init__.py", ""),
            ("pkg/a.py", &cat(&[ADDED, EDITED, MOVED])),
            ("pkg/old.py", RENAMED),
        ],
    );
    commit(
        repo,
        C2,
        &[("pkg/a.py", &cat(&[ADDED_COMMENTED, EDITED_LATER, MOVED]))],
    );
    git(repo, C3, &["mv", "pkg/old.py", "pkg/new.py"]);
    commit(
        repo,
        C3,
        &[
            ("pkg/a.py", &cat(&[ADDED_COMMENTED, EDITED_LATER])),
            ("pkg/b.py", MOVED),
        ],
    );
    commit(repo, C4, &[("pkg/b.py", &cat(&[MOVED, FRESH]))]);
}

fn dates(functions: &[Value], id: &str) -> (Value, Value) {
    let f = functions
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {functions:#?}"));
    (f["created_at"].clone(), f["changed_at"].clone())
}

fn pair(created: &str, changed: &str) -> (Value, Value) {
    (Value::from(created), Value::from(changed))
}

/// `r2e build --until slice --json` with timings and counts on stderr: the summary and stderr.
fn build_logged(pipeline: &Path) -> (Value, String) {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(pipeline)
        .args(["--until", "slice", "--json"])
        .env("R2E_LOG", "timings")
        .assert()
        .success()
        .get_output()
        .clone();
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn functions_get_the_dates_of_their_bodies_first_and_last_commits() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    dated_repo(&src);
    // The same files without their history.
    let plain = dir.path().join("plain");
    for f in ["pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/new.py"] {
        std::fs::create_dir_all(plain.join(f).parent().unwrap()).unwrap();
        std::fs::copy(src.join(f), plain.join(f)).unwrap();
    }
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[project]\nname = \"t\"\n\n[[repo]]\nname = \"g\"\ngit = \"file://{}\"\nrev = \"main\"\n\n\
             [[repo]]\nname = \"w\"\npath = \"src\"\n\n[[repo]]\nname = \"p\"\npath = \"plain\"\n",
            src.display()
        ),
    )
    .unwrap();
    let (summary, log) = build_logged(&pipeline);
    assert!(log.contains("commits walked: 4"), "{log}");
    let date = &summary["stages"]["date"];
    // Both sources with history are dated (the same commit: one may take the other's entry);
    // the folder without history is not.
    assert_eq!(
        date["executed"].as_u64().unwrap() + date["cached"].as_u64().unwrap(),
        2,
        "{summary}"
    );
    let out = dir.path().join("out");
    let functions = jsonl(&out.join("functions.jsonl"));
    for repo in ["g", "w"] {
        let at = |id: &str| dates(&functions, &format!("{repo}:{id}"));
        assert_eq!(at("pkg/a.py:added"), pair(C1, C1), "a comment is no change");
        assert_eq!(at("pkg/a.py:edited"), pair(C1, C2));
        assert_eq!(at("pkg/b.py:moved"), pair(C1, C1), "a move is no change");
        assert_eq!(at("pkg/new.py:in_renamed_file"), pair(C1, C1));
        assert_eq!(at("pkg/b.py:fresh"), pair(C4, C4));
    }
    for id in ["p:pkg/a.py:added", "p:pkg/b.py:fresh"] {
        assert_eq!(dates(&functions, id), (Value::Null, Value::Null), "{id}");
    }
    let text = std::fs::read_to_string(out.join("functions.jsonl")).unwrap();
    assert!(
        text.contains(r#""created_at":null,"changed_at":null"#),
        "{text}"
    );

    // A comment-only commit is a new commit (dated again), and changes no date.
    commit(
        &src,
        C5,
        &[("pkg/b.py", &cat(&[MOVED, "    # squares\n", FRESH]))],
    );
    let (again, log) = build_logged(&pipeline);
    let date = &again["stages"]["date"];
    // Only the new commit is walked, from the state of its parent, which the cache kept.
    let walked: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("[count] dating "))
        .collect();
    assert!(
        !walked.is_empty() && walked.iter().all(|l| l.ends_with("commits walked: 1")),
        "{log}"
    );
    assert_eq!(
        date["executed"].as_u64().unwrap() + date["cached"].as_u64().unwrap(),
        2,
        "{again}"
    );
    let only_dates = |fs: &[Value]| -> Vec<(Value, Value, Value)> {
        fs.iter()
            .map(|f| {
                (
                    f["id"].clone(),
                    f["created_at"].clone(),
                    f["changed_at"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        only_dates(&jsonl(&out.join("functions.jsonl"))),
        only_dates(&functions)
    );

    // A build with nothing changed dates nothing again; one whose settings changed takes
    // the dates from the cache by commit.
    let noop = common::build_until_slice(&pipeline);
    assert_eq!(noop["stages"]["date"]["executed"], 0, "{noop}");
    let text = std::fs::read_to_string(&pipeline).unwrap();
    std::fs::write(
        &pipeline,
        format!("{text}\n[extract]\nconnectivity = false\n"),
    )
    .unwrap();
    let settings = common::build_until_slice(&pipeline);
    assert_eq!(settings["stages"]["date"]["executed"], 0, "{settings}");
    assert_eq!(settings["stages"]["date"]["cached"], 2, "{settings}");
    let after = jsonl(&out.join("functions.jsonl"));
    assert_eq!(
        dates(&after, "g:pkg/a.py:edited"),
        pair(C1, C2),
        "{settings}"
    );
}

#[test]
fn bad_dates_in_the_pipeline_name_their_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    for (table, line, col, needle) in [
        (
            "[select]\ncreated_after = \"2024-02-30\"\n",
            8,
            17,
            "`2024-02-30` is not a date",
        ),
        (
            "[evaluate]\nenabled = true\n[[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\ncutoff = \"last year\"\n",
            12,
            10,
            "`last year` is not a date",
        ),
    ] {
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!("[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\n\n{table}"),
        )
        .unwrap();
        let out = assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .args(["build", "--until", "slice"])
            .current_dir(dir.path())
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("pipeline.toml:{line}:{col}")) && err.contains(needle),
            "{err}"
        );
    }
}

const CALC_1: &str = concat!("\n", calc_clamp!(), "\n", calc_add_small!());

const CALC_2: &str = concat!("\n", calc_scale!(), "\n", calc_peek!());

const CALC_3: &str = r#"
def wrap(a, b):
    """a modulo b, or a when b is zero."""
    if b == 0:
        return a
    return a % b
"#;

fn block(code: &str) -> String {
    format!("Here you go.\n\n```python\n{code}```\n")
}

/// The script: right for `clamp`, `scale` and `wrap`, wrong for `add_small` and `peek`.
fn answer(prompt: &str) -> String {
    let about = |name: &str| prompt.contains(&format!("function `{name}`"));
    if about("clamp") {
        block(
            "def clamp(x, lo, hi):\n    if lo > x:\n        return lo\n    return hi if hi < x else x\n",
        )
    } else if about("add_small") {
        block(
            "def add_small(a, b):\n    total = a - b\n    if total > 100:\n        return 100\n    return total\n",
        )
    } else if about("scale") {
        block("def scale(a, b):\n    return abs(a * b) + a\n")
    } else if about("peek") {
        block("def peek(a, b):\n    return 2 * min(a, b)\n")
    } else if about("wrap") {
        block("def wrap(a, b):\n    return a if b == 0 else a % b\n")
    } else {
        "?".into()
    }
}

/// pass@1 and the count of the `by_cutoff` row of `model` and `group` in `rows`.
fn row(rows: &Value, model: &str, group: &str) -> (u64, Option<f64>) {
    let r = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == model && r["group"] == group)
        .unwrap_or_else(|| panic!("no {model} {group} row in {rows:#}"));
    (
        r["instances"].as_u64().unwrap(),
        r["pass"]["pass@1"].as_f64(),
    )
}

#[test]
fn evaluation_splits_at_each_models_cutoff_and_selection_at_a_date() {
    let (url, _log, _) = common::server::serve(std::time::Duration::ZERO, |prompt, _| {
        (200, "", answer(prompt))
    });
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    init(&src);
    // clamp, add_small at c1; scale, peek at c2 (2024-04-02); wrap at c3 (2024-07-20).
    commit(
        &src,
        "2024-01-10T10:00:00Z",
        &[("calc/__init__.py", ""), ("calc/ops.py", CALC_1)],
    );
    commit(
        &src,
        "2024-04-02T09:00:00Z",
        &[("calc/ops.py", &cat(&[CALC_1, CALC_2]))],
    );
    commit(&src, "2024-07-20T15:30:00Z", &[("calc/more.py", CALC_3)]);
    // The same `wrap` in a folder without history: undated, so in no model's unseen split.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(plain.join("calc")).unwrap();
    std::fs::write(plain.join("calc/__init__.py"), "").unwrap();
    std::fs::copy(src.join("calc/more.py"), plain.join("calc/more.py")).unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        format!(
            "version = 1\n[project]\nname = \"cutoff\"\n\n[[repo]]\nname = \"calc\"\ngit = \"file://{}\"\n\n\
             [[repo]]\nname = \"undated\"\npath = \"plain\"\n\n\
             [env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.0\n# The undated copy of `wrap` is kept, not a duplicate of the dated one.\ndedup = false\n\n[extract]\nconnectivity = false\n\n\
             [sandbox]\nrun_timeout_seconds = 5\n\n\
             [providers.local]\nbase_url = \"{url}\"\nmax_concurrency = 4\n\n\
             [evaluate]\nenabled = true\nsamples = 1\nk = [1]\n\n\
             [[evaluate.model]]\nprovider = \"local\"\nmodel = \"scripted\"\ncutoff = \"2024-02\"\n\n\
             [[evaluate.model]]\nprovider = \"local\"\nmodel = \"other\"\ncutoff = \"2024-07-19\"\n\n\
             [[variant]]\nname = \"all\"\n\n[[variant]]\nname = \"recent\"\n[variant.select]\nmin_branch_coverage = 0.0\ndedup = false\ncreated_after = \"2024-03-15\"\n",
            src.display()
        ),
    )
    .unwrap();
    let summary = common::offline_build(dir.path());
    let out = dir.path().join("out");
    let instances = jsonl(&out.join("variants/all/dataset.jsonl"));
    assert_eq!(instances.len(), 6, "{summary:#}");
    let created = |name: &str| -> Value {
        instances
            .iter()
            .find(|i| i["repo"] == "calc" && i["qualname"] == name)
            .unwrap_or_else(|| panic!("no {name}: {summary:#}"))["created_at"]
            .clone()
    };
    assert_eq!(created("clamp"), "2024-01-10T10:00:00Z");
    assert_eq!(created("peek"), "2024-04-02T09:00:00Z");
    assert_eq!(created("wrap"), "2024-07-20T15:30:00Z");
    let undated = instances
        .iter()
        .find(|i| i["repo"] == "undated")
        .unwrap_or_else(|| panic!("no undated instance: {summary:#}"));
    assert_eq!(undated["created_at"], Value::Null);

    // By hand: the scripted model passes clamp, scale and both wraps of the six (4/6); after
    // 2024-02 come scale, peek and wrap (2 of 3 pass); after 2024-07-19 only wrap (passes).
    // The undated wrap passes but is in neither unseen split. `other` answers the same.
    let report = common::stdout_json(
        assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .args(["report", "--json"])
            .current_dir(dir.path()),
    );
    let base = report
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["variant"] == "all")
        .unwrap_or_else(|| panic!("{report:#}"));
    let by_cutoff = &base["evaluation"]["by_cutoff"];
    assert_eq!(
        row(by_cutoff, "local/scripted", "all"),
        (6, Some(4.0 / 6.0))
    );
    assert_eq!(
        row(by_cutoff, "local/scripted", "unseen"),
        (3, Some(2.0 / 3.0))
    );
    assert_eq!(row(by_cutoff, "local/other", "all"), (6, Some(4.0 / 6.0)));
    assert_eq!(row(by_cutoff, "local/other", "unseen"), (1, Some(1.0)));
    // The build's summary has the same split, and each results line says its side.
    let unseen = &summary["variants"]["all"]["evaluate"]["unseen"];
    assert_eq!(
        row(unseen, "local/scripted", "unseen"),
        (3, Some(2.0 / 3.0)),
        "{summary:#}"
    );
    let results = jsonl(&out.join("variants/all/results.jsonl"));
    let side = |model: &str, name: &str| {
        results
            .iter()
            .find(|r| {
                r["model"] == model
                    && r["id"].as_str().unwrap().starts_with("calc:")
                    && r["id"].as_str().unwrap().ends_with(&format!(":{name}"))
            })
            .unwrap()["unseen"]
            .clone()
    };
    assert_eq!(side("local/scripted", "peek"), true);
    assert_eq!(side("local/other", "peek"), false);
    assert_eq!(side("local/other", "wrap"), true);
    let undated_side = results
        .iter()
        .find(|r| r["model"] == "local/other" && r["id"].as_str().unwrap().starts_with("undated:"))
        .unwrap();
    assert_eq!(
        undated_side["unseen"], false,
        "an undated instance is never unseen"
    );
    // `r2e report` shows both splits.
    let md = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .arg("report")
        .current_dir(dir.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let md = String::from_utf8_lossy(&md);
    for line in [
        "| local/scripted | all | 6 | 0.667 |",
        "| local/scripted | unseen | 3 | 0.667 |",
        "| local/other | all | 6 | 0.667 |",
        "| local/other | unseen | 1 | 1.000 |",
    ] {
        assert!(md.contains(line), "no `{line}` in:\n{md}");
    }
    assert!(md.contains("`local/scripted` 2024-02"), "{md}");

    // The variant keeps the functions written after 2024-03-15: scale, peek and wrap; the two
    // older ones and the undated wrap get no harness and are counted as left out.
    assert_eq!(
        jsonl(&out.join("variants/recent/harnesses.jsonl")).len(),
        3,
        "{summary:#}"
    );
    let recent = jsonl(&out.join("variants/recent/dataset.jsonl"));
    let mut names: Vec<&str> = recent
        .iter()
        .map(|i| i["qualname"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["peek", "scale", "wrap"]);
    assert_eq!(
        summary["variants"]["recent"]["counts"]["created_before"], 3,
        "{summary:#}"
    );

    // Another cutoff splits the same samples again: nothing is asked or checked anew.
    let pipeline = dir.path().join("pipeline.toml");
    let text = std::fs::read_to_string(&pipeline).unwrap();
    std::fs::write(
        &pipeline,
        text.replace("cutoff = \"2024-07-19\"", "cutoff = \"2024-03\""),
    )
    .unwrap();
    let moved = common::offline_build(dir.path());
    let all = &moved["variants"]["all"];
    assert_eq!(all["stages"]["evaluate"]["executed"], 0, "{moved:#}");
    assert_eq!(all["evaluate"]["checks"]["executed"], 0, "{moved:#}");
    assert_eq!(
        moved["llm"]["evaluate"]["other"]["executed"]
            .as_u64()
            .unwrap_or(0),
        0,
        "{moved:#}"
    );
    // After 2024-03: scale, peek and wrap.
    assert_eq!(
        row(&all["evaluate"]["unseen"], "local/other", "unseen"),
        (3, Some(2.0 / 3.0)),
        "{moved:#}"
    );
}

#[test]
fn a_history_that_cannot_be_read_is_no_result_and_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    init(&src);
    commit(&src, C1, &[("a.py", ADDED)]);
    let first = git(&src, C1, &["rev-parse", "HEAD:a.py"]);
    commit(&src, C2, &[("a.py", ADDED_COMMENTED)]);
    // The first version's blob is lost: the work tree is clean, its history unreadable.
    std::fs::remove_file(src.join(".git/objects").join(&first[..2]).join(&first[2..])).unwrap();
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        "[project]\nname = \"t\"\n\n[[repo]]\nname = \"w\"\npath = \"src\"\n",
    )
    .unwrap();
    for _ in 0..2 {
        let out = assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .arg("build")
            .arg(&pipeline)
            .args(["--until", "slice", "--json"])
            .assert()
            .code(1)
            .get_output()
            .clone();
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["stages"]["date"]["failed"], 1, "{summary:#}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("could not be read") && err.contains(&first),
            "{err}"
        );
        let functions = jsonl(&dir.path().join("out/functions.jsonl"));
        assert_eq!(
            dates(&functions, "w:a.py:added"),
            (Value::Null, Value::Null)
        );
    }
}

/// A repository cloned partially (`--filter=blob:none`, as a curated one is, from a server
/// that filters: `git daemon` on loopback) has its history's commits and trees but not its old
/// files. Its dates are the same as a full clone's, and the old files the walk reads come in
/// one request, not in one per file as `git cat-file` would fetch them.
#[test]
fn a_partial_clone_is_dated_as_a_whole_one_fetching_old_files_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    dated_repo(&src);
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("o")).unwrap();
    let bare = served.join("o/dated.git");
    git(
        dir.path(),
        C1,
        &[
            "clone",
            "-q",
            "--bare",
            &src.to_string_lossy(),
            &bare.to_string_lossy(),
        ],
    );
    let daemon = common::github::GitDaemon::start(&served);
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[project]\nname = \"t\"\n\n[[repo]]\nname = \"g\"\ngit = \"{}/o/dated.git\"\nrev = \"main\"\n",
            daemon.url
        ),
    )
    .unwrap();
    let trace = dir.path().join("git-trace");
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(&pipeline)
        .args(["--until", "slice", "--json"])
        .env("GIT_TRACE", &trace)
        .assert()
        .success()
        .get_output()
        .clone();
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stages"]["date"]["executed"], 1, "{summary}");
    let mirror = std::fs::read_dir(dir.path().join("cache/git-v1"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let config = std::fs::read_to_string(mirror.join("config")).unwrap();
    assert!(
        config.contains("promisor = true"),
        "a partial clone: {config}"
    );
    let functions = jsonl(&dir.path().join("out/functions.jsonl"));
    let at = |id: &str| dates(&functions, &format!("g:{id}"));
    assert_eq!(at("pkg/a.py:added"), pair(C1, C1));
    assert_eq!(at("pkg/a.py:edited"), pair(C1, C2));
    assert_eq!(at("pkg/b.py:moved"), pair(C1, C1));
    assert_eq!(at("pkg/new.py:in_renamed_file"), pair(C1, C1));
    assert_eq!(at("pkg/b.py:fresh"), pair(C4, C4));
    // The fetches of files after the clone: the checkout's (the commit's own files) and the
    // walk's (the history's), whatever the number of old files.
    let trace = std::fs::read_to_string(&trace).unwrap();
    let fetches = trace
        .lines()
        .filter(|l| l.contains("built-in: git fetch") && l.contains("--stdin"))
        .count();
    let old_files = 4;
    assert!(
        fetches <= 2 && fetches < old_files,
        "{fetches} fetches:\n{trace}"
    );
}
