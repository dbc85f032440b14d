//! `generator = "llm"` against a scripted OpenAI-compatible server on loopback (never the
//! internet): harnesses written, shaped, validated and repaired; 429 with `Retry-After` and 500s
//! retried; prose recorded as a failure; a second build asks nothing; editing one template
//! re-issues only the requests rendered from it; bad provider settings are clear errors; the
//! HTTP client tells a prompt too long for the model's context (stored, never asked again)
//! from other refusals and from transient failures.
//!
//! Environments are built offline from the tests' wheelhouse, as in `tests/it/dataset.rs`.

use std::net::TcpListener;

use assert_cmd::Command;
use serde_json::Value;

use crate::common;
use r2e_core::records::ModelUse;

use common::server::Log;

/// Starts the server; returns its base URL and the request log. The script answers by what the
/// prompt asks about (functions of the fixture below).
fn serve() -> (String, Log) {
    let (url, log, _) = serve_slowly(std::time::Duration::ZERO);
    (url, log)
}

/// Like [`serve`], answering each request after `delay`, one at a time; the third value logs
/// the prompts whose answers were sent in full.
fn serve_slowly(delay: std::time::Duration) -> (String, Log, Log) {
    common::server::serve(delay, answer)
}

fn harness_for(local: &str) -> String {
    let tests: String = [(1, 2), (100, 2), (-5, 2), (3, 50)]
        .iter()
        .enumerate()
        .map(|(i, (a, b))| {
            format!(
                "    def test_{i}(self):\n        r2e_equiv.check_function(self, {local}, reference_{local}, ({a}, {b}), {{}})\n\n"
            )
        })
        .collect();
    format!(
        "Here are the tests.\n\n```python\nimport unittest\n\nclass TestIt(unittest.TestCase):\n{tests}```\n"
    )
}

/// (status, extra headers, content) for the `n`th identical request about a prompt.
fn answer(prompt: &str, n: usize) -> (u16, &'static str, String) {
    let local = prompt
        .lines()
        .find_map(|l| {
            l.split_once(" = candidate.")
                .map(|(a, _)| a.trim().to_owned())
        })
        .unwrap_or_default();
    let repair = prompt.contains("fails when it checks");
    if prompt.contains("Improve the docstring") {
        return match local.as_str() {
            "sub_small" => (
                200,
                "",
                "```python\ndef sub_small(a, b):\n    return a - b\n```".into(),
            ),
            _ => (
                200,
                "",
                format!("```text\nRefined: {local} of two integers.\n```"),
            ),
        };
    }
    match local.as_str() {
        // The first connection is cut.
        "sub_small" if n == 1 && !repair => (0, "", String::new()),
        // Rate-limited once, then a server error, then a good harness.
        "add_small" if n == 1 => (429, "Retry-After: 0\r\n", String::new()),
        "add_small" if n == 2 => (500, "", String::new()),
        // Prose first; the fix-error round gets code.
        "describe" if !repair => (200, "", "I think this function describes numbers.".into()),
        // Never any code.
        "broken" => (200, "", "Sorry, I cannot write tests.".into()),
        _ => (200, "", harness_for(&local)),
    }
}

const FIXTURE: &str = r#"
//- calc/__init__.py
//- calc/ops.py
LIMIT = 100

def add_small(a, b):
    """Add two numbers, capping the result at LIMIT."""
    total = a + b
    if total > LIMIT:
        return LIMIT
    return total

def describe(a, b):
    """Describe how a compares with b, up to LIMIT."""
    if a < b:
        return b - a
    if a == b or a > LIMIT:
        return LIMIT
    return a - b

def broken(a, b):
    """Multiply unless a is negative, then cap at LIMIT."""
    if a < 0:
        raise ValueError("negative")
    return min(a * b, LIMIT)
"#;

struct Build {
    dir: tempfile::TempDir,
}

/// The model-driven generator, asking the scripted server.
const LLM: &str = "[generate]\ngenerator = \"llm\"\nprovider = \"local\"\nmodel = \"scripted\"\n";

impl Build {
    /// FIXTURE, built with `generator = "llm"`; `provider_extra` goes into `[providers.local]`.
    fn new(url: &str, provider_extra: &str) -> Build {
        Build::on(FIXTURE, url, provider_extra, LLM)
    }

    /// A project on `fixture`, offline environments, the scripted server as provider `local`
    /// (with `provider_extra`), and the rest of the pipeline.
    fn on(fixture: &str, url: &str, provider_extra: &str, rest: &str) -> Build {
        let dir = tempfile::tempdir().unwrap();
        common::write_fixture(&dir.path().join("repo"), fixture);
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!(
                "version = 1\n[project]\nname = \"llm-test\"\n\n[[repo]]\npath = \"repo\"\n\n\
                 [env]\ninstaller = \"pip\"\n\n\
                 [providers.local]\nbase_url = \"{url}\"\nmax_concurrency = 4\n{provider_extra}\n{rest}"
            ),
        )
        .unwrap();
        Build { dir }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("r2e").unwrap();
        c.envs(common::offline_env()).current_dir(self.dir.path());
        c
    }

    fn build(&self) -> Value {
        common::offline_build(self.dir.path())
    }

    fn harnesses(&self) -> Vec<Value> {
        jsonl(&self.dir.path().join("out/harnesses.jsonl"))
    }
}

fn usage(summary: &Value, stage: &str, what: &str) -> u64 {
    summary["llm"][stage]["scripted"][what]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn model_written_harnesses_are_validated_repaired_and_cached() {
    let (url, log) = serve();
    let b = Build::new(&url, "");
    let first = b.build();
    let by_id: std::collections::BTreeMap<String, Value> = b
        .harnesses()
        .into_iter()
        .map(|h| (h["id"].as_str().unwrap().to_owned(), h))
        .collect();
    let add = &by_id["repo:calc/ops.py:add_small"];
    assert_eq!(add["generator"], "llm");
    assert_eq!(add["valid"], true, "{add}");
    assert_eq!(add["tests"], 4);
    assert_eq!(add["branch_coverage"], 1.0);
    // Prose first, then repaired through the fix-error prompt.
    let describe = &by_id["repo:calc/ops.py:describe"];
    assert_eq!(describe["valid"], true, "{describe}");
    assert_eq!(first["counts"]["harnesses_valid"], 2);
    // Prose in every round: a recorded failure, and the build went on.
    let broken = &by_id["repo:calc/ops.py:broken"];
    assert_eq!(broken["valid"], false);
    assert_eq!(broken["failure_class"], "other");
    assert!(
        broken["failure_message"]
            .as_str()
            .unwrap()
            .contains("no Python code"),
        "{broken}"
    );
    // 429 and 500 were retried; the failures were not cached.
    let asked = log.lock().unwrap().clone();
    let add_prompts = asked
        .iter()
        .filter(|p| p.contains("add_small = candidate"))
        .count();
    assert_eq!(add_prompts, 3, "429, 500, then the answer");
    // Requests: the 3 first rounds and the 2 retried add_small failures; describe's fix-error
    // round and its improve-coverage round (its harness never makes `a == b`); broken's
    // fix-error round. broken's later rounds (and describe's last) render the very same prompt
    // again, so they take the answer already given (sampling is greedy).
    assert_eq!(asked.len(), 3 + 2 + 2 + 1);
    assert_eq!(usage(&first, "generate", "executed"), 3);
    assert_eq!(usage(&first, "repair", "executed"), 3);
    assert_eq!(usage(&first, "repair", "cached"), 3);
    assert!(describe["branch_coverage"].as_f64().unwrap() < 0.8);
    assert!(usage(&first, "generate", "prompt_tokens") > 0);
    // describe stays under the coverage threshold: one instance.
    assert_eq!(first["counts"]["instances"], 1);

    // A second build asks nothing (even with the no-op shortcut removed).
    let again = b.build();
    assert_eq!(again["stages"]["generate"]["executed"], 0);
    std::fs::remove_file(b.dir.path().join("out/.r2e/state")).unwrap();
    let rebuilt = b.build();
    assert_eq!(log.lock().unwrap().len(), asked.len(), "no new request");
    assert_eq!(usage(&rebuilt, "generate", "executed"), 0);
    assert_eq!(usage(&rebuilt, "generate", "cached"), 3);
    assert_eq!(usage(&rebuilt, "repair", "cached"), 6);
    assert!(
        !std::fs::read(b.dir.path().join("out/dataset.jsonl"))
            .unwrap()
            .is_empty()
    );

    // Editing the fix-error template re-issues exactly the repair requests rendered from it.
    let prompts = b.dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let builtin = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/testgen_fix_error.j2"),
    )
    .unwrap();
    std::fs::write(
        prompts.join("testgen_fix_error.txt"),
        format!("Please be careful.\n{builtin}"),
    )
    .unwrap();
    let edited = b.build();
    assert_eq!(usage(&edited, "generate", "executed"), 0);
    assert_eq!(usage(&edited, "generate", "cached"), 3);
    // The two fix-error prompts (describe's and broken's); describe's improve-coverage prompt
    // is unchanged (the fixed harness is the same) and comes from the cache.
    assert_eq!(usage(&edited, "repair", "executed"), 2);
    assert_eq!(log.lock().unwrap().len(), asked.len() + 2);
}

#[test]
fn bad_provider_settings_are_clear() {
    let (url, _log) = serve();
    // A key variable that is not set: exit 2, naming the variable.
    let b = Build::new(&url, "api_key_env = \"R2E_TEST_UNSET_KEY_VARIABLE\"\n");
    let out = b
        .cmd()
        .env_remove("R2E_TEST_UNSET_KEY_VARIABLE")
        .arg("build")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("R2E_TEST_UNSET_KEY_VARIABLE") && err.contains("pipeline.toml:"),
        "{err}"
    );

    // An unknown provider.
    let text = std::fs::read_to_string(b.dir.path().join("pipeline.toml"))
        .unwrap()
        .replace("provider = \"local\"", "provider = \"elsewhere\"");
    std::fs::write(b.dir.path().join("pipeline.toml"), text).unwrap();
    let out = b.cmd().arg("build").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown provider `elsewhere`") && err.contains("`local`"),
        "{err}"
    );
}

#[test]
fn an_unreachable_server_is_recorded_and_retried_by_the_next_build() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let b = Build::new(
        &format!("http://127.0.0.1:{port}/v1"),
        "max_retries = 1\ntimeout_seconds = 5\n",
    );
    let summary = b.build();
    for h in b.harnesses() {
        assert_eq!(h["valid"], false);
        let message = h["failure_message"].as_str().unwrap();
        assert!(
            message.contains("model request failed") && message.contains("connect"),
            "{message}"
        );
    }
    assert_eq!(usage(&summary, "generate", "failed"), 3);
    // Nothing was cached and the build is not taken for up to date: the next one asks again.
    let again = b.build();
    assert_eq!(usage(&again, "generate", "failed"), 3);
}

/// Functions the built-in generator covers fully (`add_small`, `sub_small`) and one it cannot
/// (`secret`: only the pair (3, 50), which the scripted model's tests use, takes its branch).
const FIXTURE2: &str = r#"
//- calc/__init__.py
//- calc/ops.py
import hashlib

LIMIT = 100

def add_small(a, b):
    """Add two numbers, capping the result at LIMIT."""
    total = a + b
    if total > LIMIT:
        return LIMIT
    return total

def sub_small(a, b):
    """Subtract b from a, never below zero and at most LIMIT."""
    total = a - b
    if total < 0:
        return 0
    return min(total, LIMIT)

def secret(a, b):
    """Return 1 for the one pair whose digest matches, else the sum capped at LIMIT."""
    if hashlib.sha256(f"{a}:{b}".encode()).hexdigest().startswith("9f5268f04488"):
        return 1
    return min(a + b, LIMIT)
"#;

use common::jsonl;

#[test]
fn variants_share_work_refine_specs_and_report_what_the_datasets_hold() {
    let (url, log) = serve();
    let b = Build::on(
        FIXTURE2,
        &url,
        "",
        "[generate]\ngenerator = \"llm\"\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
         [refine]\nenabled = true\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
         [[variant]]\nname = \"naive\"\ncontext.strategy = \"naive\"\n\n\
         [[variant]]\nname = \"full\"\ncontext.strategy = \"full\"\n\n\
         [[variant]]\nname = \"sliced\"\ncontext.strategy = \"sliced\"\n",
    );
    let first = b.build();
    let names: Vec<&str> = first["variants"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["naive", "full", "sliced"]);
    // Upstream stages ran once: files parsed once, extracted and sliced by the first variant only.
    assert_eq!(first["stages"]["parse"]["executed"], 2);
    assert_eq!(
        first["variants"]["naive"]["stages"]["extract"]["executed"],
        2
    );
    for later in ["full", "sliced"] {
        let stages = &first["variants"][later]["stages"];
        assert_eq!(stages["extract"]["executed"], 0, "{later}");
        assert_eq!(stages["slice"]["executed"], 0, "{later}");
    }
    let out = b.dir.path().join("out");
    assert!(
        !out.join("dataset.jsonl").exists(),
        "variants build into variants/NAME"
    );

    // Refinement: add_small's spec is the model's; sub_small's answer was code, so it keeps its
    // docstring and the harness record says why.
    for name in ["naive", "full", "sliced"] {
        let dir = out.join("variants").join(name);
        let instances = jsonl(&dir.join("dataset.jsonl"));
        let add = instances
            .iter()
            .find(|i| i["qualname"] == "add_small")
            .unwrap();
        assert_eq!(add["spec"], "Refined: add_small of two integers.");
        assert_eq!(add["spec_source"], "refined");
        assert_eq!(
            add["docstring"],
            "Add two numbers, capping the result at LIMIT."
        );
        let sub = instances
            .iter()
            .find(|i| i["qualname"] == "sub_small")
            .unwrap();
        assert_eq!(sub["spec"], sub["docstring"]);
        assert_eq!(sub["spec_source"], "docstring");
        let harnesses = jsonl(&dir.join("harnesses.jsonl"));
        let sub_h = harnesses
            .iter()
            .find(|h| h["id"] == "repo:calc/ops.py:sub_small")
            .unwrap();
        assert_eq!(sub_h["refine"]["status"], "malformed", "{sub_h}");
        // Log paths in a variant's copy of envs.jsonl lead to the output's logs.
        for env in jsonl(&dir.join("envs.jsonl")) {
            assert!(dir.join(env["log"].as_str().unwrap()).is_file(), "{env}");
        }
        assert!(
            sub_h["refine"]["message"]
                .as_str()
                .unwrap()
                .contains("code")
        );
    }
    // The refinement prompt shows examples captured while validating, and the observed types.
    let asked = log.lock().unwrap().clone();
    let spec_prompt = asked
        .iter()
        .find(|p| p.contains("Improve the docstring") && p.contains("add_small = candidate"))
        .unwrap();
    assert!(
        spec_prompt.contains("add_small(1, 2) -> returns 3"),
        "{spec_prompt}"
    );
    assert!(spec_prompt.contains("a: int"), "{spec_prompt}");
    assert_eq!(first["counts"]["failures"], 0);

    // The report: one row per variant, numbers as the datasets hold them.
    let report = b.cmd().args(["report", "--json"]).output().unwrap();
    assert!(report.status.success());
    let rows: Vec<Value> = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let dir = out.join("variants").join(row["variant"].as_str().unwrap());
        let harnesses = jsonl(&dir.join("harnesses.jsonl"));
        let valid: Vec<&Value> = harnesses.iter().filter(|h| h["valid"] == true).collect();
        assert_eq!(row["all"]["candidates"], harnesses.len() as u64);
        assert_eq!(row["all"]["valid"], valid.len() as u64);
        let mean = valid
            .iter()
            .map(|h| h["branch_coverage"].as_f64().unwrap())
            .sum::<f64>()
            / valid.len() as f64;
        assert!((row["all"]["mean_coverage"].as_f64().unwrap() - mean).abs() < 1e-9);
        let in_file = harnesses.iter().filter(|h| h["in_file"] == true).count() as u64;
        assert_eq!(row["in_file"]["candidates"], in_file);
        assert_eq!(
            row["out_of_file"]["candidates"],
            harnesses.len() as u64 - in_file
        );
        assert_eq!(
            row["instances"],
            jsonl(&dir.join("dataset.jsonl")).len() as u64
        );
        assert_eq!(row["specs_refined"], 2);
        let requests: u64 = harnesses
            .iter()
            .map(|h| {
                h["llm"]["requests"].as_u64().unwrap_or(0)
                    + h["refine"]["llm"]["requests"].as_u64().unwrap_or(0)
            })
            .sum();
        assert_eq!(row["model_requests"], requests);
        assert!(requests >= 3 + 3, "three harnesses and three refinements");
        assert!(row["prompt_tokens"].as_u64().unwrap() > 0);
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("| naive |") && markdown.contains("| sliced |"));
    let text = b.cmd().arg("report").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&text.stdout), markdown);

    // A second build asks nothing.
    let before = log.lock().unwrap().len();
    std::fs::remove_file(out.join(".r2e/state")).unwrap();
    let again = b.build();
    assert_eq!(log.lock().unwrap().len(), before);
    for (_, v) in again["variants"].as_object().unwrap() {
        for (_, models) in v["llm"].as_object().unwrap() {
            assert_eq!(models["scripted"]["executed"], 0, "{v}");
        }
    }

    // Switching one variant's model re-issues only that variant's requests.
    let naive_requests = rows.iter().find(|r| r["variant"] == "naive").unwrap()["model_requests"]
        .as_u64()
        .unwrap();
    let text = std::fs::read_to_string(b.dir.path().join("pipeline.toml"))
        .unwrap()
        .replace(
            "context.strategy = \"naive\"",
            "context.strategy = \"naive\"\ngenerate.model = \"scripted-2\"",
        );
    std::fs::write(b.dir.path().join("pipeline.toml"), text).unwrap();
    let switched = b.build();
    let executed = |v: &Value| -> u64 {
        v["llm"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|m| m.as_object().unwrap().values())
            .map(|u| u["executed"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(executed(&switched["variants"]["full"]), 0);
    assert_eq!(executed(&switched["variants"]["sliced"]), 0);
    // The naive variant's harness requests go to the new model (its refinement model is
    // unchanged, but refinement prompts hold the harness, which is the same, so they are cached).
    let new = log.lock().unwrap().len() - before;
    assert_eq!(new as u64, executed(&switched["variants"]["naive"]));
    assert!(
        new as u64 >= 3 && (new as u64) < naive_requests,
        "{new} of {naive_requests}"
    );
}

#[test]
fn hybrid_asks_the_model_only_where_the_builtin_generator_falls_short() {
    let (url, log) = serve();
    let b = Build::on(
        FIXTURE2,
        &url,
        "",
        "[generate]\ngenerator = \"hybrid\"\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
         [[variant]]\nname = \"hybrid\"\n\n\
         [[variant]]\nname = \"llm\"\ngenerate.generator = \"llm\"\n",
    );
    let summary = b.build();
    let hybrid = &summary["variants"]["hybrid"];
    assert_eq!(hybrid["counts"]["hybrid_builtin_sufficient"], 2, "{hybrid}");
    let out = b.dir.path().join("out/variants");
    let harnesses = jsonl(&out.join("hybrid/harnesses.jsonl"));
    let by_name = |name: &str| {
        harnesses
            .iter()
            .find(|h| h["id"] == format!("repo:calc/ops.py:{name}"))
            .unwrap()
            .clone()
    };
    // The built-in harnesses were enough for two functions: no request about them.
    for name in ["add_small", "sub_small"] {
        let h = by_name(name);
        assert_eq!(h["generator"], "builtin", "{h}");
        assert!(h.get("llm").is_none());
    }
    // secret: the model's tests reach the branch; they join the built-in ones.
    let secret = by_name("secret");
    assert_eq!(secret["generator"], "hybrid");
    assert_eq!(secret["harness_from"], "merged", "{secret}");
    assert_eq!(secret["branch_coverage"], 1.0);
    let instance = jsonl(&out.join("hybrid/dataset.jsonl"))
        .into_iter()
        .find(|i| i["qualname"] == "secret")
        .unwrap();
    let harness = instance["harness"].as_str().unwrap();
    assert!(harness.contains("class ModelTestIt(") && harness.contains("r2e_explore"));
    // Requests: hybrid asked about secret only; the llm variant about all three (sub_small's
    // first connection was cut and retried), so the report shows what hybrid saved.
    let asked = log.lock().unwrap().clone();
    assert!(asked.iter().any(|p| p.contains("secret = candidate")));
    let rows: Vec<Value> =
        serde_json::from_slice(&b.cmd().args(["report", "--json"]).output().unwrap().stdout)
            .unwrap();
    let requests = |name: &str| {
        rows.iter().find(|r| r["variant"] == name).unwrap()["model_requests"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(requests("hybrid"), 1);
    assert_eq!(requests("llm"), 3);
    let llm_sub = jsonl(&out.join("llm/harnesses.jsonl"))
        .into_iter()
        .find(|h| h["id"] == "repo:calc/ops.py:sub_small")
        .unwrap();
    assert_eq!(
        llm_sub["valid"], true,
        "a cut connection is retried: {llm_sub}"
    );
}

#[test]
fn a_build_killed_while_asking_resumes_without_asking_again() {
    let (url, log, answered) = serve_slowly(std::time::Duration::from_millis(400));
    let b = Build::on(
        FIXTURE2,
        &url,
        "",
        "[generate]\ngenerator = \"llm\"\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
         [refine]\nenabled = true\nprovider = \"local\"\nmodel = \"scripted\"\n",
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["build", "--json"])
        .current_dir(b.dir.path())
        .envs(common::offline_env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once two answers have been sent (the build needs six), a little later than the
    // second answer so that the build has stored it (the server takes 400 ms per answer, so no
    // third answer completes meanwhile).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while answered.lock().unwrap().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the build never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    let done_before: Vec<String> = answered.lock().unwrap().clone();
    let asked_before = log.lock().unwrap().len();
    assert!(done_before.len() < 6, "killed in the middle");

    let summary = b.build();
    let asked_after: Vec<String> = log.lock().unwrap()[asked_before..].to_vec();
    for prompt in &done_before {
        assert!(
            !asked_after.contains(prompt),
            "a request answered before the kill was asked again"
        );
    }
    // Nothing lost: the same outcome as an uninterrupted build.
    assert_eq!(summary["counts"]["harnesses_valid"], 3);
    assert_eq!(summary["counts"]["instances"], 3);
    assert_eq!(summary["counts"]["specs_refined"], 2);
    assert!(usage(&summary, "generate", "cached") >= 1);
}

#[test]
fn a_prompt_too_long_is_stored_other_refusals_and_transient_failures_are_not() {
    use r2e_core::config::{Api, ProviderConfig};
    use r2e_core::model::Request;
    use r2e_exec::llm::http::HttpClient;
    use r2e_exec::llm::{FailureKind, Llm};
    // The prompt names what the server answers.
    let (url, log, _) = common::server::serve(std::time::Duration::ZERO, |prompt, _| {
        match prompt {
            "openai" => (
                400,
                "",
                r#"{"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5211 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#.into(),
            ),
            "llama" => (
                400,
                "",
                r#"{"error": {"message": "Requested tokens (5211) exceed context window of 4096", "code": null}}"#.into(),
            ),
            "unknown model" => (
                400,
                "",
                r#"{"error": {"message": "The model `m` does not exist", "code": "model_not_found"}}"#.into(),
            ),
            "busy" => (503, "Retry-After: 0\r\n", String::new()),
            _ => (200, "", "fine".into()),
        }
    });
    let provider = ProviderConfig {
        name: "local".into(),
        base_url: url,
        api_key_env: None,
        api_key: None,
        api: Api::Chat,
        max_concurrency: 1,
        timeout_seconds: 10,
        max_retries: 1,
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = r2e_core::cache::Cache::open(dir.path()).unwrap();
    let llm = Llm::new(std::sync::Arc::new(HttpClient::new()));
    let request =
        |prompt: &str| Request::new(Api::Chat, Some("m"), (0.0, 10), "system", prompt.to_owned());
    let asked = |prompt: &str| log.lock().unwrap().iter().filter(|p| *p == prompt).count();
    for _ in 0..2 {
        for prompt in ["openai", "llama"] {
            let failure = llm
                .ask(&cache, ModelUse::Evaluate, &provider, &request(prompt))
                .unwrap_err();
            assert_eq!(failure.kind, FailureKind::PromptTooLong, "{failure}");
            assert!(failure.message.contains("context window"), "{failure}");
        }
        let refused = llm
            .ask(
                &cache,
                ModelUse::Evaluate,
                &provider,
                &request("unknown model"),
            )
            .unwrap_err();
        assert_eq!(refused.kind, FailureKind::Refused, "{refused}");
        assert!(!refused.cached);
        let busy = llm
            .ask(&cache, ModelUse::Evaluate, &provider, &request("busy"))
            .unwrap_err();
        assert_eq!(busy.kind, FailureKind::Transient, "{busy}");
        assert!(
            llm.ask(&cache, ModelUse::Evaluate, &provider, &request("ok"))
                .is_ok()
        );
    }
    // Too long: asked once, then from the cache. Another 400: asked each time, never retried.
    // 503: retried once (`max_retries = 1`) each time. An answer: asked once.
    assert_eq!(
        ["openai", "llama", "unknown model", "busy", "ok"].map(asked),
        [1, 1, 2, 4, 1]
    );
    assert!(Llm::is_cached(&cache, &request("openai")));
    assert!(!Llm::is_cached(&cache, &request("unknown model")));
    assert!(!Llm::is_cached(&cache, &request("busy")));
    let usage = &llm.usage()[&("evaluate".to_owned(), "m".to_owned())];
    // Executed: 2 refusals + 1 answer; cached: the same 3 the second time; failed: 2 x 2.
    assert_eq!(
        (usage.executed, usage.cached, usage.failed),
        (3, 3, 4),
        "{usage:?}"
    );
}
