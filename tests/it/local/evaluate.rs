//! Stage `evaluate` against a scripted OpenAI-compatible server on loopback: the exact pass@1
//! and self-repair curve for a script of answers (correct code, a mutant, prose, a wrong answer
//! that its repair fixes at round 2, an endless loop, one that reaches for the reference, one
//! that does not compile, one that deletes its working folder); no request holds a reference
//! body; the built-in models; what each change re-asks and re-checks; an unreachable server; a
//! prompt the server refuses as longer than the model's context window.
//!
//! Environments are built offline from the tests' wheelhouse, as in `tests/it/dataset.rs`.

use std::net::TcpListener;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

use crate::common;

use common::calc::{calc_add_small, calc_clamp, calc_peek, calc_scale};
use common::server::Log;

const FIXTURE: &str = concat!(
    "\n//- calc/__init__.py\n//- calc/ops.py\n",
    calc_clamp!(),
    "\n",
    calc_add_small!(),
    r#"
def describe(a, b):
    """The distance from a to b, or LIMIT when they are equal."""
    if a < b:
        return b - a
    if a == b:
        return LIMIT
    return a - b

"#,
    calc_scale!(),
    r#"
def spin(n):
    """Count down from n to zero (at most 50 steps); the steps taken."""
    steps = 0
    while n > 0 and steps < 50:
        n -= 1
        steps += 1
    return steps

"#,
    calc_peek!(),
    r#"
def syntax(a, b):
    """a minus b, or zero when that is negative."""
    d = a - b
    if d < 0:
        return 0
    return d

def wipe(a, b):
    """a modulo b, or a when b is zero."""
    if b == 0:
        return a
    return a % b
"#
);

/// Bodies of the references that no request may hold.
const BODIES: &[&str] = &[
    "if x < lo:\n        return lo",
    "total = a + b\n    if total > LIMIT",
    "if a == b:\n        return LIMIT",
    "result = a * b\n    if result < 0",
    "while n > 0 and steps < 50",
    "if a > b:\n        return 2 * a",
    "d = a - b\n    if d < 0",
    "if b == 0:\n        return a\n    return a % b",
];

/// The function a prompt is about.
fn about(prompt: &str) -> String {
    for name in [
        "clamp",
        "add_small",
        "describe",
        "scale",
        "spin",
        "peek",
        "syntax",
        "wipe",
    ] {
        if prompt.contains(&format!("function `{name}`")) {
            return name.to_owned();
        }
    }
    String::new()
}

fn block(code: &str) -> String {
    format!("Here you go.\n\n```python\n{code}```\n")
}

/// The script: the answer to a prompt.
fn answer(prompt: &str) -> String {
    let repair = prompt.contains("fails its tests");
    match about(prompt).as_str() {
        "clamp" => block(
            "def clamp(x, lo, hi):\n    \"\"\"Clamp.\"\"\"\n    if lo > x:\n        return lo\n    return hi if hi < x else x\n",
        ),
        "add_small" => block(
            "def add_small(a, b):\n    total = a - b\n    if total > 100:\n        return 100\n    return total\n",
        ),
        "describe" => "I would compare the two numbers and return their distance.".into(),
        // Wrong, wrong again at the first repair, right at the second.
        "scale" if !repair => block("def scale(a, b):\n    return a * b + a\n"),
        "scale" if !prompt.contains("# attempt 2") => {
            block("def scale(a, b):\n    # attempt 2\n    return abs(a * b) + a + 1\n")
        }
        "scale" => block(
            "def scale(a, b):\n    result = a * b\n    if result < 0:\n        result = -result\n    return result + a\n",
        ),
        "spin" => block("def spin(n):\n    while True:\n        pass\n"),
        "peek" => block(
            "import gc\nimport inspect\nimport sys\n\ndef peek(a, b):\n    for m in list(sys.modules.values()):\n        f = getattr(m, 'reference_peek', None)\n        if f is not None:\n            return f(a, b)\n    for o in gc.get_objects():\n        if inspect.isfunction(o) and o.__name__ == 'peek' and o is not peek:\n            return o(a, b)\n    return None\n",
        ),
        "syntax" => block("def syntax(a, b):\n    return a - b if a > b else 0 +\n"),
        "wipe" => block(
            "import os\nimport shutil\n\ndef wipe(a, b):\n    for n in os.listdir('.'):\n        try:\n            (shutil.rmtree if os.path.isdir(n) else os.remove)(n)\n        except OSError:\n            pass\n    return a + b\n",
        ),
        _ => "?".into(),
    }
}

/// Starts the scripted server; returns its base URL and the log of user messages.
fn serve() -> (String, Log) {
    let (url, log, _) = common::server::serve(std::time::Duration::ZERO, |prompt, _| {
        (200, "", answer(prompt))
    });
    (url, log)
}

fn pipeline(dir: &Path, url: &str, evaluate: &str) {
    std::fs::write(dir.join("pipeline.toml"), pipeline_text(url, evaluate)).unwrap();
}

fn pipeline_text(url: &str, evaluate: &str) -> String {
    format!(
        "version = 1\n[project]\nname = \"eval-test\"\n\n[[repo]]\npath = \"repo\"\n\n\
         [env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.0\n\n[extract]\nconnectivity = false\n\n\
         [sandbox]\nrun_timeout_seconds = 5\n\n\
         [providers.local]\nbase_url = \"{url}\"\nmax_concurrency = 4\n\n{evaluate}"
    )
}

/// A project folder of this test's own with the fixture in `repo/` and a cache holding what a
/// build of it does before `evaluate` (its environment, harnesses and validations): a copy of
/// a seed built once per test run (no model asked, its pipeline and output left out). What
/// the tests count (model requests, candidate extractions and checks) is `evaluate`'s, which
/// the seed never ran.
fn project() -> common::seed::Copy {
    const NO_MODEL: &str = "http://127.0.0.1:9/v1";
    let seed = common::seed::seeded(
        "evaluate",
        &format!("{FIXTURE}\n{}", pipeline_text(NO_MODEL, "")),
        |dir| {
            common::write_fixture(&dir.join("repo"), FIXTURE);
            pipeline(dir, NO_MODEL, "");
            common::offline_build(dir);
            // Only the repository and the cache are kept.
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.ends_with("repo") || path.ends_with("cache") {
                    continue;
                }
                if path.is_dir() {
                    std::fs::remove_dir_all(&path).unwrap();
                } else {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        },
    );
    common::seed::Copy::of(&seed)
}

const EVALUATE: &str = "[evaluate]\nenabled = true\nsamples = 1\nk = [1]\nrepair_rounds = 3\n\n\
     [[evaluate.model]]\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
     [[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n";

use common::jsonl;

fn pass(summary: &Value, model: &str) -> f64 {
    summary["evaluate"]["pass"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model"] == model)
        .unwrap_or_else(|| panic!("no pass@k row for {model}: {summary}"))["pass"]["pass@1"]
        .as_f64()
        .unwrap()
}

fn requests(summary: &Value) -> (u64, u64) {
    let u = &summary["llm"]["evaluate"]["scripted"];
    (
        u["executed"].as_u64().unwrap_or(0),
        u["cached"].as_u64().unwrap_or(0),
    )
}

/// Candidate extractions executed and cached.
fn extractions(summary: &Value) -> (u64, u64) {
    let e = &summary["evaluate"]["extractions"];
    (
        e["executed"].as_u64().unwrap_or(0),
        e["cached"].as_u64().unwrap_or(0),
    )
}

#[test]
fn a_scripted_model_gets_its_exact_pass_at_1_and_repair_curve() {
    let (url, log) = serve();
    let dir = project();
    pipeline(dir.path(), &url, EVALUATE);
    let summary = common::offline_build(dir.path());
    let out = dir.path().join("out");
    let instances = jsonl(&out.join("dataset.jsonl"));
    assert_eq!(
        instances.len(),
        8,
        "every function is an instance: {summary}"
    );
    for i in &instances {
        let problem = i["problem"].as_str().unwrap();
        for body in BODIES {
            assert!(!problem.contains(body), "{problem}");
        }
    }
    let results = jsonl(&out.join("results.jsonl"));
    let scripted: Vec<&Value> = results
        .iter()
        .filter(|r| r["model"] == "local/scripted")
        .collect();
    assert_eq!(scripted.len(), 8);
    let of = |name: &str| -> &Value {
        scripted
            .iter()
            .find(|r| r["id"].as_str().unwrap().ends_with(&format!(":{name}")))
            .unwrap()
    };
    assert_eq!(of("clamp")["passed"], true, "{}", of("clamp"));
    for name in [
        "add_small",
        "describe",
        "scale",
        "spin",
        "peek",
        "syntax",
        "wipe",
    ] {
        assert_eq!(of(name)["passed"], false, "{name}: {}", of(name));
    }
    let first = |name: &str| of(name)["rounds"][0]["failure_class"].clone();
    assert_eq!(first("describe"), "no_code");
    assert_eq!(first("spin"), "timeout");
    assert_eq!(first("syntax"), "unrunnable");
    assert_eq!(first("add_small"), "assertion");
    assert_eq!(of("scale")["repaired_at"], 2, "{}", of("scale"));
    assert_eq!(of("scale")["rounds"].as_array().unwrap().len(), 3);
    assert_eq!(of("add_small")["rounds"].as_array().unwrap().len(), 4);
    assert!(of("peek")["repaired_at"].is_null());
    // pass@1 and the repair curve, exactly.
    assert_eq!(pass(&summary, "local/scripted"), 0.125);
    assert_eq!(pass(&summary, "builtin/reference"), 1.0);
    let curve = summary["evaluate"]["repair"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["model"] == "local/scripted")
        .unwrap()
        .clone();
    assert_eq!(curve["failing"], 7);
    let by_round: Vec<f64> = curve["fixed_by_round"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(by_round, vec![0.0, 1.0 / 7.0, 1.0 / 7.0]);
    // No request held a reference body; round 0 asked once per instance, repairs after.
    let asked = log.lock().unwrap().clone();
    for prompt in &asked {
        for body in BODIES {
            assert!(
                !prompt.contains(body),
                "a request holds `{body}`:\n{prompt}"
            );
        }
    }
    // 8 first answers; 7 failing get round 1, 7 round 2 (scale passes there), 6 round 3.
    assert_eq!(asked.len(), 8 + 7 + 7 + 6, "{asked:#?}");
    assert_eq!(requests(&summary), (28, 0));
    // 28 answers, 10 distinct texts (`scale` answers 3 ways; every other function's repairs
    // answer as its first round did): each text is taken apart once.
    assert_eq!(extractions(&summary), (10, 18), "{summary}");

    // A second build asks and checks nothing.
    let again = common::offline_build(dir.path());
    assert_eq!(log.lock().unwrap().len(), 28);
    assert_eq!(again["stages"]["evaluate"]["executed"], 0, "{again}");
    assert_eq!(again["evaluate"]["checks"]["executed"], 0, "{again}");
    assert_eq!(extractions(&again), (0, 28), "{again}");
    assert_eq!(pass(&again, "local/scripted"), 0.125);

    // Another model asks only its own requests; the same code is checked once.
    pipeline(
        dir.path(),
        &url,
        &format!("{EVALUATE}\n[[evaluate.model]]\nprovider = \"local\"\nmodel = \"other\"\n"),
    );
    let more = common::offline_build(dir.path());
    assert_eq!(log.lock().unwrap().len(), 28 * 2);
    assert_eq!(requests(&more), (0, 28), "{more}");
    assert_eq!(
        more["evaluate"]["checks"]["executed"], 0,
        "the other model wrote the same code: {more}"
    );
    assert_eq!(
        more["llm"]["evaluate"]["other"]["executed"].as_u64(),
        Some(28)
    );
    // Its answers are the same texts: every extraction, both models', comes from the cache.
    assert_eq!(extractions(&more), (0, 56), "{more}");

    // Editing `codegen_direct` re-asks exactly the first-round requests (the repairs' prompts
    // are rendered from the same answers: cached).
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/codegen_direct.j2"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("prompts/codegen_direct.j2"),
        format!("Please.\n{template}"),
    )
    .unwrap();
    pipeline(dir.path(), &url, EVALUATE);
    let edited = common::offline_build(dir.path());
    assert_eq!(requests(&edited), (8, 20), "{edited}");
    // New requests, the same answers: nothing to take apart again.
    assert_eq!(extractions(&edited).0, 0, "{edited}");

    // Raising `samples` to 2: `status` counts the new requests; `max_requests` under them stops
    // the build before it asks anything; then exactly the new samples' requests are asked.
    let two = EVALUATE.replace("samples = 1", "samples = 2");
    pipeline(dir.path(), &url, &two);
    let status = Command::cargo_bin("r2e")
        .unwrap()
        .current_dir(dir.path())
        .args(["status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let plan = status["evaluate"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["model"] == "local/scripted")
        .unwrap()
        .clone();
    assert_eq!(plan["requests"], 16, "{status}");
    assert_eq!(plan["would_ask"], 8, "{status}");
    assert!(plan["prompt_tokens"].as_u64().unwrap() > 100, "{status}");
    let before = log.lock().unwrap().len();
    pipeline(
        dir.path(),
        &url,
        &two.replace("repair_rounds = 3", "repair_rounds = 3\nmax_requests = 5"),
    );
    let refused = Command::cargo_bin("r2e")
        .unwrap()
        .envs(common::offline_env())
        .current_dir(dir.path())
        .args(["build", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("more than `max_requests = 5`"), "{err}");
    assert_eq!(log.lock().unwrap().len(), before, "nothing was asked");
    pipeline(dir.path(), &url, &two);
    let doubled = common::offline_build(dir.path());
    assert_eq!(requests(&doubled), (28, 28), "{doubled}");
    assert_eq!(pass(&doubled, "local/scripted"), 0.125);

    // One instance's harness changes (a new call site of `clamp` seeds its explorer): only its
    // candidates are checked again, with every answer from the cache.
    pipeline(dir.path(), &url, EVALUATE);
    let harnesses = |out: &Path| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = jsonl(&out.join("dataset.jsonl"))
            .iter()
            .map(|i| {
                (
                    i["id"].as_str().unwrap().to_owned(),
                    i["harness"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = harnesses(&out);
    std::fs::write(
        dir.path().join("repo/calc/demo.py"),
        "from calc.ops import clamp\n\n\ndef demo():\n    return clamp(-7, -3, 9)\n",
    )
    .unwrap();
    let asked_before = log.lock().unwrap().len();
    let moved = common::offline_build(dir.path());
    let after = harnesses(&out);
    let changed: Vec<&str> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, _)| b.0.as_str())
        .collect();
    assert!(
        changed.len() == 1 && changed[0].ends_with("calc/ops.py:clamp"),
        "only clamp's harness changes: {changed:?}"
    );
    assert_eq!(log.lock().unwrap().len(), asked_before, "nothing was asked");
    assert_eq!(requests(&moved), (0, 28), "{moved}");
    // `clamp`'s two candidates (the scripted answer and the reference), nothing else.
    assert_eq!(moved["evaluate"]["checks"]["executed"], 2, "{moved}");
    assert_eq!(pass(&moved, "local/scripted"), 0.125);
}

#[test]
fn a_build_killed_during_evaluate_resumes_without_asking_again() {
    // A slow server: the build is killed after a few answers have been sent in full.
    let (url, log, answered) =
        common::server::serve(std::time::Duration::from_millis(400), |prompt, _| {
            (200, "", answer(prompt))
        });
    let dir = project();
    pipeline(dir.path(), &url, EVALUATE);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("r2e"))
        .args(["build", "--json"])
        .current_dir(dir.path())
        .envs(common::offline_env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while answered.lock().unwrap().len() < 6 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(600),
            "the build never got its answers"
        );
        assert!(child.try_wait().unwrap().is_none(), "the build ended early");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The server still reads the dead build's queued connections: wait until it is quiet.
    loop {
        let seen = log.lock().unwrap().len();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        if log.lock().unwrap().len() == seen {
            break;
        }
    }
    let done: Vec<String> = answered.lock().unwrap().clone();
    let asked_before = log.lock().unwrap().len();
    assert!(done.len() < 28, "killed in the middle: {}", done.len());

    let resumed = common::offline_build(dir.path());
    let (executed, cached) = requests(&resumed);
    assert_eq!(executed + cached, 28, "{resumed}");
    // Every answer received in full before the kill is reused; at most the one the build was
    // storing when it died is asked again.
    assert!(
        cached + 1 >= done.len() as u64,
        "{cached} cached of {} answered",
        done.len()
    );
    let again: Vec<String> = log.lock().unwrap()[asked_before..].to_vec();
    assert_eq!(again.len() as u64, executed);
    let repeated = again.iter().filter(|p| done.contains(p)).count();
    assert!(repeated <= 1, "{repeated} finished requests asked again");
    assert_eq!(pass(&resumed, "local/scripted"), 0.125);
    assert_eq!(pass(&resumed, "builtin/reference"), 1.0);
}

#[test]
fn an_unreachable_server_records_no_sample_and_the_next_build_asks_again() {
    // A port nothing listens on.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let dir = project();
    let evaluate = "[evaluate]\nenabled = true\nsamples = 1\nk = [1]\n\n\
                    [[evaluate.model]]\nprovider = \"local\"\nmodel = \"scripted\"\n";
    pipeline(dir.path(), &dead, evaluate);
    let toml = std::fs::read_to_string(dir.path().join("pipeline.toml"))
        .unwrap()
        .replace(
            "max_concurrency = 4",
            "max_concurrency = 4\nmax_retries = 0\ntimeout_seconds = 2",
        );
    std::fs::write(dir.path().join("pipeline.toml"), toml).unwrap();
    let run = Command::cargo_bin("r2e")
        .unwrap()
        .envs(common::offline_env())
        .current_dir(dir.path())
        .args(["build", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("model request(s) of `evaluate` failed"),
        "{err}"
    );
    // `--json` still prints the summary, which names what the next build runs again.
    let summary: serde_json::Value =
        serde_json::from_slice(&run.stdout).expect("the summary, though the build exits 1");
    assert!(
        summary["retry"][0]
            .as_str()
            .unwrap()
            .contains("model request(s) of `evaluate` failed"),
        "{summary}"
    );
    assert!(
        summary["counts"]["instances"].as_u64().unwrap() > 0,
        "{summary}"
    );
    let results = jsonl(&dir.path().join("out/results.jsonl"));
    assert!(
        results.is_empty(),
        "a failed request is not a sample: {results:?}"
    );
    // With the server up, the next build asks them.
    let (url, log) = serve();
    let toml = std::fs::read_to_string(dir.path().join("pipeline.toml"))
        .unwrap()
        .replace(&dead, &url);
    std::fs::write(dir.path().join("pipeline.toml"), toml).unwrap();
    let summary = common::offline_build(dir.path());
    assert_eq!(log.lock().unwrap().len(), 8);
    assert_eq!(pass(&summary, "local/scripted"), 0.125);
}

/// OpenAI's 400 for a prompt longer than the model's context window.
const OPENAI_TOO_LONG: &str = r#"{"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5211 tokens (5011 in the messages, 200 in the completion). Please reduce the length of the messages or completion.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
/// llama-cpp-python's message for the same, as its server words a `ValueError`.
const LLAMA_TOO_LONG: &str = r#"{"error": {"message": "Requested tokens (5211) exceed context window of 4096", "type": "invalid_request_error", "param": null, "code": null}}"#;

#[test]
fn a_prompt_too_long_for_the_model_is_a_failed_sample_asked_once() {
    // `describe`'s prompt gets OpenAI's 400, `spin`'s llama-cpp-python's; the others the script.
    let (url, log, _) =
        common::server::serve(std::time::Duration::ZERO, |prompt, _| {
            match about(prompt).as_str() {
                "describe" => (400, "", OPENAI_TOO_LONG.to_owned()),
                "spin" => (400, "", LLAMA_TOO_LONG.to_owned()),
                _ => (200, "", answer(prompt)),
            }
        });
    let dir = project();
    let evaluate = EVALUATE.replace("repair_rounds = 3", "repair_rounds = 1");
    pipeline(dir.path(), &url, &evaluate);
    // The build succeeds: a refused prompt is a sample, not a failed request.
    let summary = common::offline_build(dir.path());
    assert_eq!(summary["evaluate"]["failed_requests"], 0, "{summary}");
    let results = jsonl(&dir.path().join("out/results.jsonl"));
    let scripted: Vec<&Value> = results
        .iter()
        .filter(|r| r["model"] == "local/scripted")
        .collect();
    assert_eq!(scripted.len(), 8, "{results:?}");
    for name in ["describe", "spin"] {
        let r = scripted
            .iter()
            .find(|r| r["id"].as_str().unwrap().ends_with(&format!(":{name}")))
            .unwrap();
        assert_eq!(r["passed"], false, "{r}");
        assert_eq!(r["candidate_hash"], Value::Null, "{r}");
        assert_eq!(r["llm"]["requests"], 1, "{r}");
        let rounds = r["rounds"].as_array().unwrap();
        assert_eq!(
            rounds.len(),
            1,
            "no repair round for a prompt too long: {r}"
        );
        assert_eq!(rounds[0]["failure_class"], "prompt_too_long", "{r}");
    }
    assert_eq!(pass(&summary, "local/scripted"), 0.125);
    assert_eq!(pass(&summary, "builtin/reference"), 1.0);
    // Each refused prompt was asked once (400 is not retried); 8 first requests, then a repair
    // round for the 5 other failing samples (`clamp` passes).
    let asked = log.lock().unwrap().clone();
    for name in ["describe", "spin"] {
        assert_eq!(asked.iter().filter(|p| about(p) == name).count(), 1);
    }
    assert_eq!(asked.len(), 8 + 5, "{asked:#?}");
    assert_eq!(requests(&summary), (13, 0), "{summary}");

    // The next build asks nothing; nor does one whose evaluate stage runs again (a setting that
    // changes no request), which takes the refusals from the cache.
    common::offline_build(dir.path());
    assert_eq!(log.lock().unwrap().len(), 13);
    pipeline(
        dir.path(),
        &url,
        &evaluate.replace(
            "repair_rounds = 1",
            "repair_rounds = 1\nmax_requests = 1000",
        ),
    );
    let again = common::offline_build(dir.path());
    assert_eq!(log.lock().unwrap().len(), 13, "nothing was asked");
    assert_eq!(requests(&again), (0, 13), "{again}");
    assert_eq!(again["stages"]["evaluate"]["executed"], 0, "{again}");
    assert_eq!(again["evaluate"]["failed_requests"], 0, "{again}");
    let results = jsonl(&dir.path().join("out/results.jsonl"));
    let too_long = results
        .iter()
        .filter(|r| r["rounds"][0]["failure_class"] == "prompt_too_long")
        .count();
    assert_eq!(too_long, 2, "{results:?}");
    assert_eq!(pass(&again, "local/scripted"), 0.125);
}

#[test]
fn bad_evaluate_settings_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    let cases = [
        (
            "[evaluate]\nenabled = true\nsamples = 2\nk = [1, 5]\n[[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n",
            "pass@5 needs 1 <= k <= samples",
            ":8:1:",
        ),
        (
            "[evaluate]\nenabled = true\n[[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"reference\"\n[[evaluate.model]]\nprovider = \"nowhere\"\nmodel = \"m\"\n",
            "unknown provider `nowhere`",
            ":11:1:",
        ),
        (
            "[evaluate]\nenabled = true\n[[evaluate.model]]\nprovider = \"builtin\"\nmodel = \"oracle\"\n",
            "`builtin` has no model `oracle`",
            ":9:1:",
        ),
        (
            "[providers.base]\nbase_url = \"http://127.0.0.1:9/v1\"\napi = \"completions\"\n[evaluate]\nenabled = true\nprompt = \"cot\"\n[[evaluate.model]]\nprovider = \"base\"\nmodel = \"m\"\n",
            "`prompt = \"cot\"` is a chat prompt",
            ":10:1:",
        ),
    ];
    for (toml, message, place) in cases {
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!("version = 1\n[[repo]]\npath = \"repo\"\n\n{toml}"),
        )
        .unwrap();
        let run = Command::cargo_bin("r2e")
            .unwrap()
            .current_dir(dir.path())
            .args(["build", "--json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{toml}: {err}");
        assert!(err.contains(message), "{toml}: {err}");
        assert!(
            err.contains(&format!("pipeline.toml{place}")),
            "{toml}: {err}"
        );
    }
}
