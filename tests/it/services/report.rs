//! `r2e report`'s page, card and numbers, on a build with two variants and `[evaluate]` (a
//! scripted model on loopback, the built-in models): the numbers `report.html` draws are those
//! of `report.json`; in a real browser (Debian's headless Chromium, driven over the DevTools
//! protocol by `tests/support/browser_check.py`) the page logs no error, asks for nothing
//! outside the file, draws every chart with a size, one bar per model and k, one point per
//! repair round, a row per repository that sorts when its header is clicked; the dataset card's
//! front matter parses as YAML and names files that exist, which Hugging Face's `datasets`
//! reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common;

use common::calc::{calc_add_small, calc_clamp, calc_scale};

const FIXTURE: &str = concat!(
    "\n//- calc/__init__.py\n//- calc/ops.py\n",
    calc_clamp!(),
    "\n",
    calc_add_small!(),
    "\n",
    calc_scale!(),
    r#"

def describe(a, b):
    """The distance from a to b, or 100 when they are equal."""
    if a < b:
        return b - a
    if a == b:
        return 100
    return a - b
"#
);

fn block(code: &str) -> String {
    format!("Here you go.\n\n```python\n{code}```\n")
}

/// The script: `clamp` right, `add_small` wrong for good, `scale` wrong and right at the
/// second repair, `describe` prose.
fn answer(prompt: &str) -> String {
    let repair = prompt.contains("fails its tests");
    if prompt.contains("function `clamp`") {
        block(
            "def clamp(x, lo, hi):\n    if lo > x:\n        return lo\n    return hi if hi < x else x\n",
        )
    } else if prompt.contains("function `add_small`") {
        block("def add_small(a, b):\n    return a - b\n")
    } else if prompt.contains("function `scale`") {
        if !repair {
            block("def scale(a, b):\n    return a * b + a\n")
        } else if !prompt.contains("# attempt 2") {
            block("def scale(a, b):\n    # attempt 2\n    return abs(a * b) + a + 1\n")
        } else {
            block(
                "def scale(a, b):\n    result = a * b\n    if result < 0:\n        result = -result\n    return result + a\n",
            )
        }
    } else {
        "I would compare the two numbers.".into()
    }
}

/// Models, k and repair rounds of the pipeline.
const MODELS: [&str; 3] = ["local/scripted", "builtin/reference", "builtin/mutants"];
const KS: [&str; 2] = ["pass@1", "pass@2"];
const ROUNDS: usize = 2;
const VARIANTS: [&str; 2] = ["sliced", "naive"];

/// The project, built and reported once per test run (`common::seed`): this test process's own
/// copy of it (by hard links), for every test of this file.
fn built() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // The scripted model's address is left out of the seed's key: it is this process's,
        // and decides nothing the tests read (a model is named by its provider and name).
        let seed = common::seed::seeded("report", &pipeline_text("MODEL"), |dir| {
            let dir = dir.to_path_buf();
            let (url, _, _) = common::server::serve(std::time::Duration::ZERO, |prompt, _| {
                (200, "", answer(prompt))
            });
            std::fs::write(dir.join("pipeline.toml"), pipeline_text(&url)).unwrap();
            common::write_fixture(&dir.join("repo"), FIXTURE);
            // A second repository without a function: a row of its own, with nothing in it.
            std::fs::create_dir_all(dir.join("empty")).unwrap();
            std::fs::write(dir.join("empty/README.md"), "nothing here\n").unwrap();
            std::fs::write(
                dir.join("repo/LICENSE"),
                "MIT License\n\nPermission is hereby granted, free of charge, to any person\n",
            )
            .unwrap();
            common::offline_build(&dir);
            assert_cmd::Command::cargo_bin("r2e")
                .unwrap()
                .args(["report", "--json"])
                .current_dir(&dir)
                .assert()
                .success();
        });
        let dir = tempfile::Builder::new()
            .prefix("report-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap()
            .keep();
        common::seed::copy_into(&seed, &dir);
        dir
    })
}

/// The pipeline, its model served at `url`.
fn pipeline_text(url: &str) -> String {
    format!(
        "version = 1\n[project]\nname = \"report-test\"\n\n[[repo]]\npath = \"repo\"\nname = \"calc\"\n\n\
             [[repo]]\npath = \"empty\"\n\n\
             [env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.0\n\n[extract]\nconnectivity = false\n\n\
             [sandbox]\nrun_timeout_seconds = 5\n\n\
             [providers.local]\nbase_url = \"{url}\"\nmax_concurrency = 4\n\n\
             [evaluate]\nenabled = true\nsamples = 2\nk = [1, 2]\nrepair_rounds = {ROUNDS}\n\n\
             [[evaluate.model]]\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
             [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n\n\
             [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"mutants\"\n\n\
             [[variant]]\nname = \"sliced\"\n\n\
             [[variant]]\nname = \"naive\"\ncontext.strategy = \"naive\"\nbugfix.per_function = 1\n"
    )
}

fn out(name: &str) -> PathBuf {
    built().join("out").join(name)
}

/// The value of attribute `name` in the tag text `tag`, unescaped.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let raw = &tag[start..start + tag[start..].find('"')?];
    Some(
        raw.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// The marks (`rect.bar` or `circle.point`) of the chart `id`: (series, category, value).
fn marks(html: &str, id: &str) -> Vec<(String, String, f64)> {
    let start = html
        .find(&format!("<svg class=\"chart bars\" id=\"{id}\""))
        .or_else(|| html.find(&format!("<svg class=\"chart lines\" id=\"{id}\"")))
        .unwrap_or_else(|| panic!("no chart `{id}`"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.split('<')
        .filter(|t| t.starts_with("rect class=\"bar\"") || t.starts_with("circle class=\"point\""))
        .map(|t| {
            (
                attr(t, "data-series").unwrap(),
                attr(t, "data-category").unwrap(),
                attr(t, "data-value").unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn report_html_draws_the_numbers_of_report_json() {
    let html = std::fs::read_to_string(out("report.html")).unwrap();
    let rows: Vec<Value> =
        serde_json::from_slice(&std::fs::read(out("report.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 2);
    // Self-contained: nothing to fetch, and a policy that forbids fetching.
    for outside in ["http://", "https://", "src=", "<link", "@import", "url("] {
        let allowed = outside == "http://"
            && html.matches(outside).count() == html.matches("http://www.w3.org/2000/svg").count();
        assert!(
            allowed || !html.contains(outside),
            "the page holds `{outside}`"
        );
    }
    assert!(html.contains("default-src 'none'"));

    // Table 1: validity and coverage per variant.
    let validity = marks(&html, "validity");
    for row in &rows {
        let variant = row["variant"].as_str().unwrap();
        let find = |series: &str| {
            validity
                .iter()
                .find(|(s, c, _)| s == series && c == variant)
                .map(|m| m.2)
        };
        assert_eq!(
            find("valid"),
            row["all"]["valid_percent"].as_f64().map(|p| p / 100.0),
            "{variant}"
        );
        assert_eq!(
            find("mean coverage of valid"),
            row["all"]["mean_coverage"].as_f64()
        );
        // The coverage and mutation histograms, bin by bin.
        let bins = |chart: &str, key: &Value| {
            let drawn: Vec<f64> = marks(&html, chart)
                .into_iter()
                .filter(|(s, ..)| s == variant)
                .map(|m| m.2)
                .collect();
            let json: Vec<f64> = key
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(drawn, json, "{chart} of {variant}");
        };
        bins("coverage", &row["coverage_bins"]);
        bins("mutation", &row["mutation"]["score_bins"]);
        // The bug-fix tasks by origin and depth: the naive dataset's, none for the other.
        let tasks: Vec<f64> = marks(&html, "bugfix")
            .into_iter()
            .filter(|(s, ..)| s == variant)
            .map(|m| m.2)
            .collect();
        if row["bugfix"].is_null() {
            assert!(tasks.is_empty(), "{variant}: {tasks:?}");
        } else {
            let by = &row["bugfix"]["per_origin_depth"];
            let count = |k: &str| by[k].as_f64().unwrap_or(0.0);
            assert_eq!(
                tasks,
                [
                    count("mutant 0"),
                    count("mutant 1"),
                    count("history 0"),
                    count("history 1")
                ],
                "{variant}"
            );
            assert!(tasks[0] > 0.0, "{variant}: {tasks:?}");
        }

        // pass@k: one bar per model and k, each the table's number.
        let t = &row["evaluation"];
        let passk = marks(&html, &format!("passk-{variant}"));
        let mut seen = BTreeMap::new();
        for p in t["overall"].as_array().unwrap() {
            for (k, v) in p["pass"].as_object().unwrap() {
                let model = p["model"].as_str().unwrap();
                let bar: Vec<_> = passk
                    .iter()
                    .filter(|(s, c, _)| s == k && c == model)
                    .collect();
                assert_eq!(bar.len(), 1, "{variant} {model} {k}: {passk:?}");
                assert_eq!(bar[0].2, v.as_f64().unwrap(), "{variant} {model} {k}");
                seen.insert((model.to_owned(), k.clone()), ());
            }
        }
        assert_eq!(seen.len(), MODELS.len() * KS.len(), "{seen:?}");
        assert_eq!(passk.len(), seen.len());
        // pass@1 by dependencies, tokens and files.
        for (chart, table) in [
            ("deps", "by_deps"),
            ("tokens", "by_tokens"),
            ("files", "by_file"),
        ] {
            let drawn = marks(&html, &format!("{chart}-{variant}"));
            let rows = t[table].as_array().unwrap();
            assert_eq!(
                drawn.len(),
                rows.iter()
                    .filter(|p| p["pass"]["pass@1"].is_number())
                    .count()
            );
            for p in rows {
                let d = drawn
                    .iter()
                    .find(|(s, c, _)| {
                        s == p["model"].as_str().unwrap() && c == p["group"].as_str().unwrap()
                    })
                    .unwrap_or_else(|| panic!("{chart} {p}"));
                assert_eq!(d.2, p["pass"]["pass@1"].as_f64().unwrap());
            }
        }
        // Self-repair: a point per round, the curve's numbers.
        let repair = marks(&html, &format!("repair-{variant}"));
        let curves = t["repair"].as_array().unwrap();
        assert!(!curves.is_empty());
        for c in curves {
            let model = c["model"].as_str().unwrap();
            let drawn: Vec<f64> = repair
                .iter()
                .filter(|(s, ..)| s == model)
                .map(|m| m.2)
                .collect();
            let json: Vec<f64> = c["fixed_by_round"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(json.len(), ROUNDS);
            assert_eq!(drawn, json, "{model}");
        }
    }
    // Each environment's size, drawn in MiB: `calc`'s holds at least coverage.py.
    for row in &rows {
        let variant = row["variant"].as_str().unwrap();
        let sizes = row["env_bytes"].as_object().unwrap();
        assert!(sizes["calc"].as_u64() > Some(1 << 20), "{sizes:?}");
        let drawn = marks(&html, &format!("envsize-{variant}"));
        assert_eq!(drawn.len(), sizes.len());
        for (repo, bytes) in sizes {
            let d = drawn.iter().find(|(_, c, _)| c == repo).unwrap();
            assert_eq!(d.2, bytes.as_u64().unwrap() as f64 / f64::from(1u32 << 20));
        }
        // And each repository's seconds per stage, from `.r2e/timings.json`.
        let times = row["times"].as_array().unwrap();
        let drawn = marks(&html, &format!("time-{variant}"));
        for t in times {
            for stage in ["env", "generate", "validate", "mutate"] {
                let d = drawn
                    .iter()
                    .find(|(s, c, _)| s == stage && c == t["repo"].as_str().unwrap())
                    .unwrap();
                assert_eq!(d.2, t[stage]["seconds"].as_f64().unwrap());
            }
        }
    }
    // The scripted model's curve: `scale` is fixed at round 2 of 2.
    let sliced = &rows[0]["evaluation"]["repair"];
    let scripted = sliced
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["model"] == "local/scripted")
        .unwrap();
    let fixed = scripted["fixed_by_round"].as_array().unwrap();
    assert!(fixed[0].as_f64() < fixed[1].as_f64(), "{scripted}");

    // The per-repository table: a row per repository and dataset, with the report's counts.
    let body = &html[html.find("<table id=\"repos\"").unwrap()..];
    let body = &body[..body.find("</table>").unwrap()];
    let lines: Vec<&str> = body.split("<tr>").skip(2).collect();
    let repos: usize = rows
        .iter()
        .map(|r| r["repos"].as_array().unwrap().len())
        .sum();
    assert_eq!(lines.len(), repos);
    assert_eq!(repos, 4, "two repositories in each of two datasets");
    for row in &rows {
        for repo in row["repos"].as_array().unwrap() {
            let cells = format!(
                "<td class=\"text\">{}</td><td class=\"text\">{}</td><td data-value=\"{}\">",
                row["variant"].as_str().unwrap(),
                repo["repo"].as_str().unwrap(),
                repo["functions"]
            );
            let line = lines
                .iter()
                .find(|l| l.starts_with(&cells))
                .unwrap_or_else(|| panic!("{cells}"));
            assert!(
                line.contains(&format!("<td data-value=\"{}\">", repo["candidates"])),
                "{line}"
            );
        }
    }
}

#[test]
fn the_dataset_card_is_front_matter_the_hub_and_datasets_read() {
    let card = std::fs::read_to_string(out("README.md")).unwrap();
    let rows: Vec<Value> =
        serde_json::from_slice(&std::fs::read(out("report.json")).unwrap()).unwrap();
    assert!(card.starts_with("---\n"), "{card}");
    let front = &card[4..card[4..].find("\n---\n").unwrap() + 4];
    // YAML, read by PyYAML (which `.ci/run` installs with kubernetes-validate). Its absence is
    // a skip (a failure under `R2E_TEST_STRICT=1`); a front matter it cannot read is a failure.
    let have_yaml = std::process::Command::new("python3")
        .args(["-c", "import yaml"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !common::require(
        have_yaml,
        "PyYAML for python3",
        "`python3 -m pip install pyyaml`; `.ci/run` does",
    ) {
        return;
    }
    let parsed = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(front.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        parsed.status.success(),
        "the front matter is not YAML: {}\n{front}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let meta: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    // Two repositories: one MIT, one whose files say nothing: `other`, listed per repository.
    assert_eq!(meta["license"], "other", "{meta}");
    assert!(card.contains("| calc | MIT |"), "{card}");
    assert!(card.contains("| empty | unknown |"), "{card}");
    assert_eq!(meta["task_categories"][0], "text-generation");
    assert_eq!(meta["size_categories"][0], "n<1K");
    let configs = meta["configs"].as_array().unwrap();
    let names: Vec<&str> = configs
        .iter()
        .map(|c| c["config_name"].as_str().unwrap())
        .collect();
    // Each dataset, then the bug-fix tasks of the one built with `[bugfix]`.
    assert_eq!(names, [VARIANTS[0], VARIANTS[1], "naive-bugfix"]);
    let naive = rows.iter().find(|r| r["variant"] == "naive").unwrap();
    let tasks = std::fs::read_to_string(out("variants/naive/bugfix.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(tasks > 0);
    assert_eq!(naive["bugfix"]["tasks"], tasks, "{naive:#}");
    assert_eq!(naive["bugfix"]["per_depth"]["0"], tasks, "{naive:#}");
    assert_eq!(naive["bugfix"]["project_tests_not_run"], tasks, "{naive:#}");
    assert!(rows.iter().find(|r| r["variant"] == "sliced").unwrap()["bugfix"].is_null());
    let md = std::fs::read_to_string(out("report.md")).unwrap();
    assert!(
        md.contains(&format!("| naive | {tasks} | ")) && md.contains("bug-fix tasks"),
        "{md}"
    );
    for c in configs {
        for f in c["data_files"].as_array().unwrap() {
            let path = out(f["path"].as_str().unwrap());
            assert!(path.is_file(), "{f} names no file");
        }
    }
    for row in &rows {
        assert!(
            card.contains(row["dataset_version"].as_str().unwrap()),
            "{card}"
        );
    }

    // Hugging Face's `datasets` reads each config's file (from the package index, into a
    // virtualenv of the target folder).
    let Some(python) = datasets_python() else {
        return;
    };
    for c in configs {
        let file = out(c["data_files"][0]["path"].as_str().unwrap());
        // An implementation dataset has its problems and references; a bug-fix config, every
        // field of its records.
        let columns = if c["config_name"].as_str().unwrap().ends_with("-bugfix") {
            "['instance_id', 'repo', 'base_commit', 'created_at', 'problem_statement', \
             'statement_source', 'patch', \
             'test_patch', 'FAIL_TO_PASS', 'PASS_TO_PASS', 'version', 'environment_setup_commit', \
             'instance', 'bug_patch', 'origin', 'depth', 'locations', 'mutant_kind', 'mutant', \
             'history_commit', 'project_tests_fail', 'caught_by_project_tests', 'env_lock', 'stability']"
        } else {
            "['reference', 'problem']"
        };
        let run = std::process::Command::new(&python)
            .args([
                "-c",
                "import sys, datasets\n\
                 d = datasets.load_dataset('json', data_files=sys.argv[1], split='train')\n\
                 missing = [c for c in eval(sys.argv[2]) if c not in d.column_names]\n\
                 print(len(d), missing == [], missing)",
            ])
            .arg(&file)
            .arg(columns)
            .env("HF_DATASETS_OFFLINE", "1")
            .env("HF_HOME", built().join("hf-home"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert_eq!(said.trim(), format!("{lines} True []"));
    }
}

/// The `datasets` the card is checked with.
const DATASETS: &str = "datasets==5.2.0";

/// A virtualenv (in the target folder, made once) with [`DATASETS`] from the package index:
/// its interpreter, or `None` with a line saying why (a failure under `R2E_TEST_STRICT=1`).
fn datasets_python() -> Option<PathBuf> {
    let mut why = String::new();
    let dir = common::provisioned("venv-datasets", |dir| {
        let python = dir.join("venv/bin/python");
        let ready = std::process::Command::new(&python)
            .args([
                "-c",
                &format!(
                    "import datasets; assert datasets.__version__ == {:?}",
                    &DATASETS[10..]
                ),
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ready {
            return;
        }
        let made = std::process::Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(dir.join("venv"))
            .output();
        match made {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                why = format!(
                    "`python3 -m venv` failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                return;
            }
            Err(e) => {
                why = format!("python3 does not run: {e}");
                return;
            }
        }
        let pip = std::process::Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                DATASETS,
            ])
            .output()
            .expect("the virtualenv's python runs");
        if !pip.status.success() {
            why = format!(
                "`pip install {DATASETS}` failed: {}",
                String::from_utf8_lossy(&pip.stderr).trim()
            );
        }
    });
    if !common::require(
        why.is_empty(),
        &format!("{DATASETS} in a virtualenv ({why})"),
        "python3 with venv and pip, and the package index reachable; `.ci/run` has both",
    ) {
        return None;
    }
    Some(dir.join("venv/bin/python"))
}

/// The checks the browser runs in the page, after it loaded: every chart's size, the marks of
/// the pass@k and repair charts, and the repository table before and after clicks.
const CHECKS: &str = r#"(() => {
  const out = {charts: [], marks: {}};
  for (const svg of document.querySelectorAll("svg.chart")) {
    const box = svg.getBoundingClientRect();
    out.charts.push([svg.id, box.width, box.height]);
    out.marks[svg.id] = Array.from(svg.querySelectorAll(".bar, .point")).map((m) => {
      const b = m.getBoundingClientRect();
      return [m.dataset.series, m.dataset.category, b.width, b.height];
    });
  }
  const table = document.getElementById("repos");
  const column = (i) => Array.from(table.tBodies[0].rows).map((r) => r.cells[i].textContent);
  out.rows = table.tBodies[0].rows.length;
  const heads = table.tHead.rows[0].cells;
  out.before = column(3);
  heads[3].click();
  out.ascending = column(3);
  heads[3].click();
  out.descending = column(3);
  heads[1].click();
  out.by_name = column(1);
  return out;
})()"#;

#[test]
fn report_html_in_a_real_browser() {
    // Debian's real binary (its `/usr/bin/chromium` is a wrapper that adds flags of its own).
    let chromium = Some(PathBuf::from("/usr/lib/chromium/chromium"))
        .filter(|p| p.is_file())
        .or_else(|| r2e_core::fsutil::find_program("chromium"));
    if !common::require(
        chromium.is_some(),
        "Debian's chromium",
        "apt-get install chromium",
    ) {
        return;
    }
    let shot = built().join("report.png");
    let checks = built().join("checks.js");
    std::fs::write(&checks, CHECKS).unwrap();
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/browser_check.py");
    // The system's interpreter itself (not a shim that would outlive a kill): the script needs
    // only the standard library.
    let python = if Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let run = std::process::Command::new(python)
        .arg(&support)
        .arg(chromium.unwrap())
        .arg(out("report.html"))
        .arg(&checks)
        .arg(&shot)
        .output()
        .unwrap();
    let said: Value = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
    });
    assert!(run.status.success(), "{said}");
    assert_eq!(said["console_errors"], serde_json::json!([]), "{said}");
    assert_eq!(said["requests"], serde_json::json!([]), "{said}");
    // Nothing reached the loopback proxy the browser was given (Chromium's own start-up calls
    // aside, which the script counts apart).
    assert_eq!(said["proxy"], serde_json::json!([]), "{said}");
    assert_eq!(said["check_error"], Value::Null, "{said}");
    let r = &said["result"];
    let charts = r["charts"].as_array().unwrap();
    // Five harness charts (validity, failures or not, coverage, mutation, stability), five
    // evaluation charts per variant, a timing chart per variant.
    assert!(charts.len() >= 2 * 6 + 3, "{charts:?}");
    for c in charts {
        assert!(
            c[1].as_f64() > Some(100.0) && c[2].as_f64() > Some(50.0),
            "{c}"
        );
    }
    for variant in VARIANTS {
        let bars = r["marks"][format!("passk-{variant}")].as_array().unwrap();
        let mut pairs: Vec<(String, String)> = bars
            .iter()
            .map(|b| {
                (
                    b[1].as_str().unwrap().to_owned(),
                    b[0].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        pairs.sort();
        let mut expected: Vec<(String, String)> = MODELS
            .iter()
            .flat_map(|m| KS.iter().map(|k| ((*m).to_owned(), (*k).to_owned())))
            .collect();
        expected.sort();
        assert_eq!(pairs, expected, "one bar per model and k: {bars:?}");
        for b in bars {
            assert!(b[2].as_f64() > Some(0.0), "a bar with no width: {b}");
        }
        let points = r["marks"][format!("repair-{variant}")].as_array().unwrap();
        let mut per_model: BTreeMap<&str, usize> = BTreeMap::new();
        for p in points {
            *per_model.entry(p[0].as_str().unwrap()).or_default() += 1;
        }
        assert!(!per_model.is_empty());
        for (model, n) in per_model {
            assert_eq!(n, ROUNDS, "{model}: one point per round");
        }
    }
    assert_eq!(r["rows"], 4);
    let numbers = |key: &str| -> Vec<f64> {
        r[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect()
    };
    let mut sorted = numbers("before");
    sorted.sort_by(f64::total_cmp);
    assert_eq!(numbers("ascending"), sorted);
    sorted.reverse();
    assert_eq!(numbers("descending"), sorted);
    let names: Vec<&str> = r["by_name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut by_name = names.clone();
    by_name.sort();
    assert_eq!(names, by_name);
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("R2E_TEST_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
