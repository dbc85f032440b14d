//! `generator = "llm"` against a scripted OpenAI-compatible server on loopback (never the
//! internet): harnesses written, shaped, validated and repaired; 429 with `Retry-After` and 500s
//! retried; prose recorded as a failure; a second build asks nothing; editing one template
//! re-issues only the requests rendered from it; bad provider settings are clear errors.
//!
//! Environments are built offline on the machine's own packages (`system_site_packages`,
//! `PIP_NO_INDEX=1`), as in `tests/dataset.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use assert_cmd::Command;
use serde_json::Value;

mod common;

/// What the scripted server saw: one entry per HTTP request (the user message).
type Log = Arc<Mutex<Vec<String>>>;

/// Starts the server; returns its base URL and the request log. The script answers by what the
/// prompt asks about (functions of the fixture below).
fn serve() -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let log: Log = Arc::default();
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let prompt = request["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let n_same = {
                let mut log = seen.lock().unwrap();
                log.push(prompt.clone());
                log.iter().filter(|p| **p == prompt).count()
            };
            let (status, extra, content) = answer(&prompt, n_same);
            let payload = serde_json::json!({
                "choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": content.len() / 4},
            })
            .to_string();
            let payload = if status == 200 {
                payload
            } else {
                "{\"error\": \"busy\"}".into()
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            );
        }
    });
    (url, log)
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
    match local.as_str() {
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

impl Build {
    fn new(url: &str, provider_extra: &str) -> Build {
        let dir = tempfile::tempdir().unwrap();
        common::write_fixture(&dir.path().join("repo"), FIXTURE);
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!(
                "version = 1\n[project]\nname = \"llm-test\"\n\n[[repo]]\npath = \"repo\"\n\n\
                 [env]\ninstaller = \"pip\"\nsystem_site_packages = true\n\n\
                 [generate]\ngenerator = \"llm\"\nprovider = \"local\"\nmodel = \"scripted\"\n\n\
                 [providers.local]\nbase_url = \"{url}\"\nmax_concurrency = 4\n{provider_extra}"
            ),
        )
        .unwrap();
        Build { dir }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("r2e").unwrap();
        c.env("PIP_NO_INDEX", "1").current_dir(self.dir.path());
        c
    }

    fn build(&self) -> Value {
        let out = self.cmd().args(["build", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn harnesses(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("out/harnesses.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
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
