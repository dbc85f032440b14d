//! The filters of files that are not modules (`not_module`), of modules for another platform
//! (`platform`) and of copies of other candidates (`duplicate`), and where a build's time goes
//! per repository (the `--json` summary's `time`, `.r2e/timings.json`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{self, Project};

/// A documented function with two statements and a non-literal return: a candidate wherever
/// its file is a module for this platform.
fn documented(name: &str) -> String {
    format!("def {name}(x, k):\n    \"\"\"Scales x by k.\"\"\"\n    y = x * k\n    return y + 1\n")
}

fn excluded_by(p: &Project) -> BTreeMap<String, Value> {
    common::jsonl(&p.path().join("out/functions.jsonl"))
        .into_iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_owned(),
                f["excluded_by"].clone(),
            )
        })
        .collect()
}

/// A script whose name is not an identifier, and modules that cannot be imported on Linux, give
/// no candidates: their functions are counted under `not_module` and `platform`, in the
/// summary, per repository and in `functions.jsonl`. A Windows import guarded by
/// `try`/`except ImportError` or by a platform check leaves its module's functions in.
#[test]
fn scripts_and_modules_for_another_platform_give_no_candidates() {
    let spec = format!(
        "//- pkg/__init__.py\n\
         //- pkg/core.py\n{core}\
         //- bin/update-tables.py\nimport sys\n\n{script}\
         //- pkg/tzwin.py\nimport datetime\nfrom six.moves import winreg\n\n{win}\
         //- pkg/nt_only.py\nimport sys\n\nif sys.platform != \"win32\":\n    raise ImportError(\"Windows only\")\n\n{nt}\
         //- pkg/optional.py\ntry:\n    import winreg\nexcept ImportError:\n    winreg = None\n\nimport sys\nif sys.platform == \"win32\":\n    import msvcrt\n\n{optional}",
        core = documented("scale"),
        script = documented("update"),
        win = documented("tz_scale"),
        nt = documented("nt_scale"),
        optional = documented("opt_scale"),
    );
    let p = Project::new(&spec, "[extract]\nconnectivity = false\n");
    let summary = p.build();
    let by = excluded_by(&p);
    assert_eq!(by["r:pkg/core.py:scale"], Value::Null, "{by:?}");
    assert_eq!(by["r:pkg/optional.py:opt_scale"], Value::Null, "{by:?}");
    assert_eq!(by["r:bin/update-tables.py:update"], "not_module", "{by:?}");
    assert_eq!(by["r:pkg/tzwin.py:tz_scale"], "platform", "{by:?}");
    assert_eq!(by["r:pkg/nt_only.py:nt_scale"], "platform", "{by:?}");
    assert_eq!(summary.counts.candidates, Some(2));
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["excluded_by"]["not_module"], 1, "{json}");
    assert_eq!(json["excluded_by"]["platform"], 2, "{json}");
    assert_eq!(json["excluded_by"]["duplicate"], 0, "{json}");
    assert_eq!(json["repos"][0]["excluded_by"]["platform"], 2, "{json}");
    assert_eq!(json["repos"][0]["excluded_by"]["not_module"], 1, "{json}");

    // Each filter is a switch: off, the script's function is a candidate again (the import
    // step then tells why it cannot run).
    std::fs::write(
        p.pipeline(),
        "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n[extract]\nconnectivity = false\nnot_module = false\nplatform = false\n",
    )
    .unwrap();
    let summary = p.build();
    assert_eq!(summary.counts.candidates, Some(5));
    let by = excluded_by(&p);
    assert_eq!(by["r:bin/update-tables.py:update"], Value::Null, "{by:?}");
}

/// Removing an `__init__.py` changes which paths are module names, though no file that holds a
/// function changed: a build with the persisted analysis decides `not_module` as a cold build
/// does.
#[test]
fn a_removed_package_marker_changes_which_files_are_modules() {
    let spec = format!(
        "//- tools/__init__.py\n//- tools/my-scripts/__init__.py\n//- tools/my-scripts/helper.py\n{}",
        documented("help_scale")
    );
    let p = Project::new(&spec, "[extract]\nconnectivity = false\n");
    p.build();
    // `tools.my-scripts.helper` is no dotted name.
    let id = "r:tools/my-scripts/helper.py:help_scale";
    assert_eq!(excluded_by(&p)[id], "not_module");
    std::fs::remove_file(p.path().join("repo/tools/my-scripts/__init__.py")).unwrap();
    let again = p.build();
    assert_eq!(again.stages.parse.executed, 0, "no file was parsed again");
    // Now `tools/my-scripts/` is an import root of its own, and `helper` a module in it.
    assert_eq!(excluded_by(&p)[id], Value::Null);
}

/// Two repositories vendor the same module (`vendored.py`, as a project ships `six.py`).
const VENDORED: &str = "\"\"\"A vendored helper module.\"\"\"\n\n\ndef ensure_text(value, encoding=\"utf-8\"):\n    \"\"\"Returns value as text, decoding bytes with encoding.\"\"\"\n    if isinstance(value, bytes):\n        return value.decode(encoding)\n    return str(value)\n\n\ndef clamp(value, low, high):\n    \"\"\"Clamps value into the range from low to high.\"\"\"\n    if value < low:\n        return low\n    if value > high:\n        return high\n    return value\n";

/// A module both repositories have with the same `cap` but another `LIMIT`: the same name and
/// code, another slice, so no copy.
fn limits(limit: u32) -> String {
    format!(
        "\"\"\"Limits.\"\"\"\n\nLIMIT = {limit}\n\n\ndef cap(x):\n    \"\"\"Caps x at LIMIT.\"\"\"\n    if x > LIMIT:\n        return LIMIT\n    return x\n"
    )
}

fn vendoring_repos(dir: &Path, dedup: bool) {
    common::write_fixture(
        &dir.join("a"),
        &format!(
            "//- alpha/__init__.py\n//- alpha/vendored.py\n{VENDORED}//- alpha/limits.py\n{}//- alpha/core.py\ndef double(x):\n    \"\"\"Doubles x, plus one.\"\"\"\n    y = x * 2\n    return y + 1\n",
            limits(10)
        ),
    );
    // The same module, reformatted and commented: the same tokens.
    let reformatted = VENDORED
        .replace(
            "def clamp(value, low, high):",
            "def clamp(value,  low, high):  # same",
        )
        .replace("    return value\n", "\n    return value\n");
    common::write_fixture(
        &dir.join("b"),
        &format!(
            "//- beta/__init__.py\n//- beta/vendored.py\n{reformatted}//- beta/limits.py\n{}//- beta/core.py\ndef triple(x):\n    \"\"\"Triples x, minus one.\"\"\"\n    y = x * 3\n    return y - 1\n",
            limits(20)
        ),
    );
    pipeline(dir, "pipeline.toml", "out", dedup);
}

fn pipeline(dir: &Path, file: &str, output: &str, dedup: bool) {
    std::fs::write(
        dir.join(file),
        format!(
            "[project]\nname = \"t\"\noutput = \"{output}\"\n\n[[repo]]\npath = \"a\"\n\n[[repo]]\npath = \"b\"\n\n\
             [env]\ninstaller = \"pip\"\n\n[extract]\nconnectivity = false\n\n[select]\ndedup = {dedup}\n"
        ),
    )
    .unwrap();
}

/// Stage `extract` alone: the second repository's copies are `duplicate`, the first's are
/// candidates, and `cap`, whose `LIMIT` differs, is a candidate in both; with
/// `[select] dedup = false`, every copy is a candidate. `r2e explain` says so
/// too.
#[test]
fn copies_of_earlier_candidates_are_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    vendoring_repos(dir.path(), true);
    let summary = common::build_until_slice(&dir.path().join("pipeline.toml"));
    let by: BTreeMap<String, Value> = common::jsonl(&dir.path().join("out/functions.jsonl"))
        .into_iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_owned(),
                f["excluded_by"].clone(),
            )
        })
        .collect();
    for name in ["ensure_text", "clamp"] {
        assert_eq!(
            by[&format!("a:alpha/vendored.py:{name}")],
            Value::Null,
            "{by:?}"
        );
        assert_eq!(
            by[&format!("b:beta/vendored.py:{name}")],
            "duplicate",
            "{by:?}"
        );
    }
    assert_eq!(summary["excluded_by"]["duplicate"], 2, "{summary}");
    assert_eq!(
        summary["repos"][0]["excluded_by"]["duplicate"], 0,
        "{summary}"
    );
    assert_eq!(
        summary["repos"][1]["excluded_by"]["duplicate"], 2,
        "{summary}"
    );
    for id in ["a:alpha/limits.py:cap", "b:beta/limits.py:cap"] {
        assert_eq!(by[id], Value::Null, "{by:?}");
    }
    assert_eq!(summary["counts"]["candidates"], 6, "{summary}");
    let explained = common::stdout_json(
        assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .current_dir(dir.path())
            .args(["explain", "b:beta/vendored.py:clamp", "--json"]),
    );
    assert_eq!(explained["excluded_by"], "duplicate", "{explained}");

    pipeline(dir.path(), "pipeline.toml", "out", false);
    let summary = common::build_until_slice(&dir.path().join("pipeline.toml"));
    assert_eq!(summary["excluded_by"]["duplicate"], 0, "{summary}");
    assert_eq!(summary["counts"]["candidates"], 8, "{summary}");
}

/// The whole pipeline on two repositories that vendor the same module: its functions are
/// instances once (the first repository's), and the second's copies get no harness. The
/// `--json` summary and `.r2e/timings.json` say per repository the seconds spent in `env`,
/// `generate`, `validate` and `mutate` with what was computed and what was cached; a second
/// build into another output over the same cache computes nothing, and its dataset files are
/// byte for byte those of the cold build.
#[test]
fn vendored_functions_are_instances_once_and_each_repository_has_its_time() {
    let dir = tempfile::tempdir().unwrap();
    vendoring_repos(dir.path(), true);
    let cold = common::offline_build(dir.path());
    let out = dir.path().join("out");
    let instances = common::jsonl(&out.join("dataset.jsonl"));
    let ids: Vec<&str> = instances
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    for name in ["ensure_text", "clamp"] {
        let copies: Vec<&&str> = ids
            .iter()
            .filter(|id| id.ends_with(&format!("vendored.py:{name}")))
            .collect();
        assert_eq!(
            copies,
            [&format!("a:alpha/vendored.py:{name}").as_str()],
            "{ids:?}"
        );
    }
    let harnessed: Vec<String> = common::jsonl(&out.join("harnesses.jsonl"))
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !harnessed
            .iter()
            .any(|id| id.starts_with("b:beta/vendored.py")),
        "a duplicate gets no harness: {harnessed:?}"
    );
    assert_eq!(cold["excluded_by"]["duplicate"], 2, "{cold}");

    // Time, per repository, in the pipeline's order.
    let time = cold["time"].as_array().expect("a `time` per repository");
    let repos: Vec<&str> = time.iter().map(|t| t["repo"].as_str().unwrap()).collect();
    assert_eq!(repos, ["a", "b"], "{cold}");
    for t in time {
        for stage in ["env", "generate", "validate", "mutate"] {
            let s = &t[stage];
            let seconds = s["seconds"].as_f64().unwrap();
            assert!(seconds > 0.0 && seconds < 900.0, "{stage}: {t}");
            if stage == "env" {
                // Both repositories need the same environment: `a` builds it, `b` finds it in
                // the cache.
                continue;
            }
            assert!(s["computed"].as_u64().unwrap() >= 1, "{stage}: {t}");
            assert_eq!(s["cached"], 0, "a cold build: {stage}: {t}");
        }
    }
    assert_eq!(time[0]["env"]["computed"], 1, "{cold}");
    assert_eq!(time[1]["env"]["cached"], 1, "{cold}");
    // Repository `a` has four candidates, `b` two: one generation each.
    assert_eq!(time[0]["generate"]["computed"], 4, "{cold}");
    assert_eq!(time[1]["generate"]["computed"], 2, "{cold}");
    let timings: Value =
        serde_json::from_slice(&std::fs::read(out.join(".r2e/timings.json")).unwrap()).unwrap();
    assert_eq!(timings["datasets"][0]["repos"], cold["time"], "{timings}");
    assert!(timings["seconds"].as_f64().unwrap() > 0.0, "{timings}");

    // The same dataset again into another output, over the same cache.
    pipeline(dir.path(), "again.toml", "out2", true);
    let out2 = dir.path().join("out2");
    let warm: Value = common::stdout_json(
        assert_cmd::Command::cargo_bin("r2e")
            .unwrap()
            .args(["build", "--json", "-p", "again.toml"])
            .current_dir(dir.path())
            .envs(common::offline_env()),
    );
    for t in warm["time"].as_array().unwrap() {
        for stage in ["env", "generate", "validate", "mutate"] {
            let s = &t[stage];
            assert_eq!(s["computed"], 0, "{stage}: {t}");
            assert!(s["cached"].as_u64().unwrap() >= 1, "{stage}: {t}");
            assert!(s["seconds"].as_f64().unwrap() >= 0.0, "{stage}: {t}");
        }
    }
    let mut files = vec![
        "functions.jsonl".to_owned(),
        "harnesses.jsonl".to_owned(),
        "dataset.jsonl".to_owned(),
        "manifest.json".to_owned(),
        "envs.jsonl".to_owned(),
        "failures.jsonl".to_owned(),
    ];
    for entry in std::fs::read_dir(out.join("slices")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        files.push(format!("slices/{name}"));
    }
    for f in &files {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(out2.join(f)).unwrap(),
            "{f} differs between the cold build and the cached one"
        );
    }
    assert_eq!(warm["dataset_version"], cold["dataset_version"]);
    let timings2: Value =
        serde_json::from_slice(&std::fs::read(out2.join(".r2e/timings.json")).unwrap()).unwrap();
    assert_eq!(timings2["datasets"][0]["repos"], warm["time"], "{timings2}");

    // A no-op build reports every unit as cached and no seconds.
    let noop = common::offline_build(dir.path());
    assert_eq!(noop["stages"]["generate"]["executed"], 0, "{noop}");
    for t in noop["time"].as_array().unwrap() {
        assert_eq!(t["generate"]["computed"], 0, "{t}");
        assert_eq!(t["generate"]["seconds"], 0.0, "{t}");
    }
}
