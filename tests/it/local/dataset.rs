//! The whole pipeline on the example repositories, offline: environments install the pinned
//! coverage.py from the tests' wheelhouse (`common::wheelhouse`, provisioned once from the
//! package index), harnesses are generated and validated, the dataset is assembled, and
//! `r2e check` passes the originals and fails mutants that behave differently on the harness's
//! own inputs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use crate::common;

fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from).into_iter().flatten() {
        let rel = entry.path().strip_prefix(from).unwrap();
        if rel.components().any(|c| c.as_os_str() == "__pycache__") {
            continue;
        }
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

struct Examples {
    dir: tempfile::TempDir,
}

impl Examples {
    fn new() -> Examples {
        let dir = tempfile::tempdir().unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        copy_tree(&examples, dir.path());
        std::fs::write(
            dir.path().join("pipeline.toml"),
            "[project]\nname = \"examples\"\n\n[[repo]]\npath = \"textkit\"\n\n[[repo]]\npath = \"shapes_ds\"\n\n\
             [[repo]]\npath = \"unitconv\"\n\n[env]\ninstaller = \"pip\"\n",
        )
        .unwrap();
        Examples { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn r2e(&self) -> Command {
        let mut c = Command::cargo_bin("r2e").unwrap();
        c.envs(common::offline_env()).current_dir(self.path());
        c
    }

    fn build(&self) -> Value {
        common::offline_build(self.path())
    }

    fn jsonl(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.path().join("out").join(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Mutants of a function's source: a flipped comparison, a dropped branch, a changed constant.
fn mutants(source: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (from, to) in [
        (" < ", " >= "),
        (" > ", " <= "),
        (" <= ", " > "),
        (" >= ", " < "),
        (" == ", " != "),
        (" != ", " == "),
    ] {
        if let Some(i) = source.find(from) {
            out.push((
                "flip",
                format!("{}{to}{}", &source[..i], &source[i + from.len()..]),
            ));
            break;
        }
    }
    if let Some(i) = source.find("\n    if ").map(|i| i + 1) {
        let end = source[i..].find(":\n").map(|e| i + e);
        if let Some(end) = end {
            out.push((
                "drop_branch",
                format!("{}    if False{}", &source[..i], &source[end..]),
            ));
        }
    }
    let bytes = source.as_bytes();
    // After the docstring: changing an example in it changes nothing.
    let after_header = source.find(":\n").unwrap_or(0);
    let body = match source[after_header..].find("\"\"\"") {
        Some(open) => {
            let open = after_header + open + 3;
            source[open..]
                .find("\"\"\"")
                .map_or(after_header, |close| open + close + 3)
        }
        None => after_header,
    };
    for i in body..bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b'.'));
        if starts {
            let end = (i..bytes.len())
                .find(|&j| !bytes[j].is_ascii_digit())
                .unwrap_or(bytes.len());
            if bytes
                .get(end)
                .is_some_and(|&b| b == b'.' || b.is_ascii_alphabetic())
            {
                continue;
            }
            let n: u64 = source[i..end].parse().unwrap_or(0);
            out.push((
                "constant",
                format!("{}{}{}", &source[..i], n + 1, &source[end..]),
            ));
            break;
        }
    }
    out
}

/// An exploration stopped by `[generate] time_limit_seconds` says so on its harness's line: its
/// tests are those found by then, which depends on the machine's speed.
#[test]
fn an_exploration_cut_by_its_time_limit_is_recorded_on_its_harness() {
    let p = common::Project::new(
        "//- m.py\nimport time\n\n\ndef slow(x):\n    \"\"\"x plus one, slowly.\"\"\"\n    time.sleep(0.05)\n    if x > 3:\n        return x + 1\n    return x - 1\n",
        "[env]\ninstaller = \"pip\"\n\n[extract]\nconnectivity = false\n\n[generate]\ntime_limit_seconds = 2\n",
    );
    common::offline_build(p.path());
    let lines = common::jsonl(&p.path().join("out/harnesses.jsonl"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    // 1,500 executions of 50 ms each do not fit in 2 s.
    assert_eq!(lines[0]["explorer_time_limit_hit"], true, "{lines:?}");
    assert_eq!(lines[0]["valid"], true, "{lines:?}");
}

#[test]
fn examples_build_into_a_checked_dataset() {
    let ex = Examples::new();
    let first = ex.build();
    let harnesses = ex.jsonl("harnesses.jsonl");
    // Every exploration finished within its 60 s: no line says it was cut.
    assert!(
        harnesses
            .iter()
            .all(|h| h.get("explorer_time_limit_hit").is_none()),
        "{harnesses:?}"
    );
    let valid = harnesses.iter().filter(|h| h["valid"] == true).count();
    let candidates = first["counts"]["candidates"].as_u64().unwrap() as usize;
    assert_eq!(harnesses.len(), candidates);
    assert!(candidates >= 40, "{candidates} candidates");
    assert!(
        valid * 10 >= candidates * 8,
        "{valid} of {candidates} valid: {:#?}",
        harnesses
            .iter()
            .filter(|h| h["valid"] != true)
            .collect::<Vec<_>>()
    );
    let dataset = ex.jsonl("dataset.jsonl");
    let coverage: Vec<f64> = dataset
        .iter()
        .map(|i| {
            i["branch_coverage"]
                .as_f64()
                .or(i["line_coverage"].as_f64())
                .unwrap()
        })
        .collect();
    let mean = coverage.iter().sum::<f64>() / coverage.len() as f64;
    assert!(mean >= 0.9, "mean coverage {mean}");
    for h in &harnesses {
        if h["valid"] == false {
            let class = h["failure_class"].as_str().unwrap();
            let known = [
                "type_value_error",
                "assertion",
                "import_env",
                "timeout",
                "resource_limit",
                "os_error",
                "nondeterministic",
                "too_few_tests",
                "no_normal_return",
                "other",
            ];
            assert!(known.contains(&class), "{h}");
        }
    }

    // Nothing changed: no env, generate or validate action runs, and the manifest is the same.
    let manifest = std::fs::read(ex.path().join("out/manifest.json")).unwrap();
    let second = ex.build();
    for stage in ["env", "generate", "validate"] {
        assert_eq!(second["stages"][stage]["executed"], 0, "{stage}: {second}");
    }
    assert_eq!(
        std::fs::read(ex.path().join("out/manifest.json")).unwrap(),
        manifest
    );
    assert_eq!(second["dataset_version"], first["dataset_version"]);

    // `r2e check`: the original passes; mutants that behave differently on the harness's own
    // inputs fail. Every candidate goes through one `r2e check --candidates` (the check path
    // `r2e check ID --candidate FILE` takes, one verdict a line, in order).
    let functions: BTreeMap<String, Value> = common::functions_in(&ex.path().join("out"));
    let scratch = tempfile::tempdir().unwrap();
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/same_on_inputs.py");
    // (instance, kind, mutant source, the module's text with the mutant in place); kind
    // "original" for the reference itself.
    let mut checks: Vec<(&Value, &'static str, String, String)> = Vec::new();
    for instance in &dataset {
        let id = instance["id"].as_str().unwrap();
        let f = &functions[id];
        let repo = instance["repo"].as_str().unwrap();
        let path = instance["path"].as_str().unwrap();
        let text = std::fs::read_to_string(ex.path().join(repo).join(path)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let (mut start, end) = (
            f["start_line"].as_u64().unwrap() as usize,
            f["end_line"].as_u64().unwrap() as usize,
        );
        // Decorators belong to the definition.
        while start > 1 && lines[start - 2].trim_start().starts_with('@') {
            start -= 1;
        }
        let def = lines[start - 1..end].join("\n") + "\n";
        let source = r2e_python::dedent(&def, &r2e_python::strings_in(&def));
        // The dataset's reference is that source, and it passes (below).
        assert_eq!(
            instance["reference"].as_str(),
            Some(source.as_str()),
            "{id}"
        );
        assert!(
            !instance["problem"]
                .as_str()
                .unwrap()
                .contains(source.trim_end()),
            "{id}: the problem holds the reference"
        );
        let original = lines[start - 1..end].join("\n");
        for (kind, mutant) in mutants(&source) {
            let module = text.replace(&original, mutant.trim_end());
            checks.push((instance, kind, mutant, module));
        }
        checks.push((instance, "original", source, text.clone()));
    }
    let batch = scratch.path().join("candidates.jsonl");
    let mut jsonl = String::new();
    for (i, (instance, kind, source, _)) in checks.iter().enumerate() {
        let line = serde_json::json!({
            "id": instance["id"],
            "candidate": source,
            "label": format!("{i} {kind}"),
        });
        jsonl.push_str(&format!("{line}\n"));
    }
    std::fs::write(&batch, jsonl).unwrap();
    let out = ex
        .r2e()
        .args(["check", "--candidates"])
        .arg(&batch)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{:?} {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), checks.len());
    let (mut killed, mut total, mut checked_differs) = (0, 0, 0);
    for (i, ((instance, kind, mutant, module_text), verdict)) in
        checks.iter().zip(&verdicts).enumerate()
    {
        let id = instance["id"].as_str().unwrap();
        assert_eq!(verdict["id"], *id);
        assert_eq!(verdict["label"], format!("{i} {kind}"));
        let outcome = verdict["outcome"].as_str().unwrap();
        if *kind == "original" {
            assert_eq!(
                outcome, "pass",
                "the original fails its own harness: {id}\n{verdict}"
            );
            continue;
        }
        total += 1;
        assert!(matches!(outcome, "pass" | "fail"), "{id} {kind}: {verdict}");
        if outcome == "fail" {
            killed += 1;
            continue;
        }
        if functions[id]["kind"] == "method" {
            continue;
        }
        // It passed: then it must behave like the original on every input of the harness.
        let repo = instance["repo"].as_str().unwrap();
        let path = instance["path"].as_str().unwrap();
        let module_file = scratch.path().join("mutant_module.py");
        std::fs::write(&module_file, module_text).unwrap();
        let harness = scratch.path().join("harness.py");
        std::fs::write(&harness, instance["harness"].as_str().unwrap()).unwrap();
        let module = path.trim_end_matches(".py").replace('/', ".");
        let module = module.trim_end_matches(".__init__").to_owned();
        let name = functions[id]["qualname"].as_str().unwrap();
        let verdict = std::process::Command::new(common::test_python())
            .arg(&support)
            .arg(ex.path().join(repo))
            .args([&module, name])
            .arg(&harness)
            .arg(&module_file)
            .output()
            .unwrap();
        let verdict = format!(
            "{}{}",
            String::from_utf8_lossy(&verdict.stdout),
            String::from_utf8_lossy(&verdict.stderr)
        );
        checked_differs += 1;
        assert!(
            verdict.starts_with("same"),
            "{id} {kind}: check passed a mutant that differs on the harness's inputs: {verdict}\n{mutant}"
        );
    }
    assert!(total >= 100, "{total} mutants");
    eprintln!(
        "mutants: {killed} of {total} killed; {checked_differs} survivors checked to be equivalent on the harness inputs"
    );
    assert!(killed * 2 >= total, "{killed} of {total} mutants killed");

    // Editing one function's body regenerates exactly the functions whose code or slice holds it.
    let target = "textkit:textkit/case.py:split_identifier";
    let holders: BTreeSet<String> = functions
        .values()
        .filter(|f| f["excluded_by"].is_null())
        .filter(|f| {
            f["id"] == target
                || f["slice"]["functions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == target)
        })
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .collect();
    let file: PathBuf = ex.path().join("textkit/textkit/case.py");
    let text = std::fs::read_to_string(&file).unwrap();
    let f = &functions[target];
    let lines: Vec<&str> = text.lines().collect();
    let end = f["end_line"].as_u64().unwrap() as usize;
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let indent: String = lines[end - 1]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    edited.insert(end - 1, format!("{indent}_unused = len(repr(0))"));
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let third = ex.build();
    let regenerated = third["stages"]["generate"]["executed"].as_u64().unwrap() as usize;
    assert_eq!(regenerated, holders.len(), "{holders:?}: {third}");
    assert_eq!(third["stages"]["env"]["executed"], 0);
    let diff = ex
        .r2e()
        .args(["dataset", "diff", "--json"])
        .arg(scratch.path().join("old.json"))
        .arg("out/manifest.json")
        .output()
        .unwrap();
    assert_eq!(
        diff.status.code(),
        Some(2),
        "a missing manifest is bad input"
    );
}
