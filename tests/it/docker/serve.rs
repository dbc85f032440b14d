//! `r2e serve`, driven over HTTP on loopback as an agent would: the full loop (open, read, edit,
//! run, test, submit) with the reference and with a wrong answer; paths confined to the
//! workspace; tokens; the session limit; an endless command; idle sessions reaped; held-out
//! tests and less feedback; a killed server that loses no submission; the Python client's gym
//! wrapper and the example agent loop against a scripted model.
//!
//! One dataset is built once (offline, as in `tests/it/evaluate.rs`) into a shared cache; each
//! test serves its own output of it (a build that only reads the cache), so that servers never
//! share traces or workspaces.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

use common::serve::{
    CLAMP, FIXTURE, build, built, dataset, http, original, python, start, write_pipeline,
};

/// The module with `clamp`'s body made wrong (lo and hi swapped in the first test).
fn wrong_clamp() -> String {
    original("calc/ops.py").replace(
        "    if x < lo:\n        return lo",
        "    if x < lo:\n        return hi",
    )
}

#[test]
fn the_full_loop_rewards_the_reference_and_not_a_wrong_answer() {
    let pipeline = dataset("loop", "");
    let server = start(&pipeline, &[], &[]);
    let instances = server.call("GET", "/v1/instances", None).json();
    let list = instances["instances"].as_array().unwrap();
    let clamp = list
        .iter()
        .find(|i| i["id"] == CLAMP)
        .expect("clamp is served");
    assert_eq!(clamp["path"], "calc/ops.py");
    assert!(clamp["tests"].as_u64().unwrap() >= 2, "{clamp}");
    assert!(clamp["problem"].as_str().unwrap().contains("def clamp"));
    // The dataset's `reference` (the solution) is not among what agents are shown.
    assert!(clamp.get("reference").is_none(), "{clamp}");
    assert!(!instances.to_string().contains("return lo"), "{instances}");
    let doc = server.call("GET", "/openapi.json", None).json();
    assert!(doc["paths"]["/v1/sessions/{sid}/submit"]["post"].is_object());

    // A wrong answer: the workspace holds the stub, the edit runs, the tests say what differs.
    let sid = server.open(CLAMP);
    let file = server.call(
        "GET",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        None,
    );
    assert_eq!(file.status, 200);
    assert!(
        file.body.contains("raise NotImplementedError"),
        "{}",
        file.body
    );
    assert!(
        !file.body.contains("return lo"),
        "the reference leaks: {}",
        file.body
    );
    assert!(
        file.body.contains("result = a * b"),
        "the rest of the module is there"
    );
    let put = server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(wrong_clamp().as_bytes()),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let ran = server
        .json(
            "POST",
            &format!("/v1/sessions/{sid}/exec"),
            json!({"command": "python -c 'from calc.ops import clamp; print(clamp(-5, 0, 3))'"}),
        )
        .json();
    assert_eq!(ran["exit_code"], 0, "{ran}");
    assert!(ran["stdout"].as_str().unwrap().starts_with("3\n"), "{ran}");
    let tested = server
        .call("POST", &format!("/v1/sessions/{sid}/test"), None)
        .json();
    let total = tested["total"].as_u64().unwrap();
    assert!(tested["passed"].as_u64().unwrap() < total, "{tested}");
    let failing = tested["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["outcome"] == "fail")
        .expect("a test fails");
    assert!(
        !failing["inputs"].as_array().unwrap().is_empty(),
        "{failing}"
    );
    assert_ne!(failing["expected"], failing["actual"], "{failing}");
    let submitted = server
        .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
        .json();
    assert!(submitted["reward"].as_f64().unwrap() < 1.0, "{submitted}");
    assert_eq!(submitted["passed_all"], false);
    // The session is over.
    assert_eq!(
        server
            .call("POST", &format!("/v1/sessions/{sid}/test"), None)
            .status,
        404
    );
    let trace = server.trace(&sid);
    assert_eq!(trace[0]["event"], "open");
    assert_eq!(trace[0]["instance"], CLAMP);
    assert!(trace[0]["harness"].as_str().is_some_and(|h| !h.is_empty()));
    assert!(trace[0]["env_lock"].as_str().is_some());
    let ops: Vec<&str> = trace.iter().filter_map(|l| l["op"].as_str()).collect();
    assert_eq!(ops, ["read", "write", "exec", "test", "submit"]);
    assert_eq!(trace.last().unwrap()["reason"], "submitted");
    assert_eq!(trace[5]["observation"]["reward"], submitted["reward"]);

    // The reference: every test passes, the reward is 1.
    let sid = server.open(CLAMP);
    let put = server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(original("calc/ops.py").as_bytes()),
    );
    assert_eq!(put.status, 200);
    let tested = server
        .call("POST", &format!("/v1/sessions/{sid}/test"), None)
        .json();
    assert_eq!(tested["passed"], tested["total"], "{tested}");
    let submitted = server
        .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
        .json();
    assert_eq!(submitted["reward"], 1.0, "{submitted}");
    assert_eq!(submitted["passed_all"], true);
    // A candidate that only reaches for the reference does not get it.
    let sid = server.open(CLAMP);
    let peek = original("calc/ops.py").replace(
        "    if x < lo:\n        return lo",
        "    import calc.ops\n    try:\n        src = open(calc.ops.__file__).read()\n    except Exception:\n        src = ''\n    if 'return lo' in src:\n        return 'leaked'\n    if x < lo:\n        return lo",
    );
    server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(peek.as_bytes()),
    );
    let submitted = server
        .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
        .json();
    assert_eq!(
        submitted["reward"], 1.0,
        "the candidate must not see the original file: {submitted}"
    );
    assert!(server.workspaces().is_empty(), "{:?}", server.workspaces());
    assert_eq!(
        server.call("GET", "/v1/sessions", None).json()["sessions"],
        json!([])
    );
}

#[test]
fn paths_stay_inside_the_workspace() {
    let pipeline = dataset("paths", "[serve]\nmax_file_bytes = 20000\n");
    let server = start(&pipeline, &[], &[]);
    let sid = server.open(CLAMP);
    let file = |p: &str| format!("/v1/sessions/{sid}/files/{p}");
    for bad in [
        "../out-paths/dataset.jsonl",
        "calc/../../repo/calc/ops.py",
        "%2e%2e/%2e%2e/etc/passwd",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
    ] {
        let r = server.call("GET", &file(bad), None);
        assert!(
            r.status == 400 || r.status == 404,
            "{bad}: {} {}",
            r.status,
            r.body
        );
        assert!(!r.body.contains("root:"), "{bad}: {}", r.body);
        assert!(r.json()["error"].is_string(), "{bad}: {}", r.body);
        let w = server.call("PUT", &file(bad), Some(b"x"));
        assert!(
            w.status == 400 || w.status == 404,
            "{bad}: {} {}",
            w.status,
            w.body
        );
    }
    // Links a command plants are never followed, for a file or a folder on the way.
    let outside = built().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    let planted = server
        .json("POST", &format!("/v1/sessions/{sid}/exec"), json!({"command": format!("ln -s {0}/secret.txt leak && ln -s {0} dir && ln -s /etc etc", outside.display())}))
        .json();
    assert_eq!(planted["exit_code"], 0, "{planted}");
    for link in ["leak", "dir/secret.txt", "etc/passwd"] {
        let r = server.call("GET", &file(link), None);
        assert_eq!(r.status, 400, "{link}: {}", r.body);
        assert!(
            !r.body.contains("secret") || r.body.contains("symbolic link"),
            "{}",
            r.body
        );
    }
    let w = server.call("PUT", &file("dir/planted.txt"), Some(b"x"));
    assert_eq!(w.status, 400, "{}", w.body);
    assert!(!outside.join("planted.txt").exists());
    // The sandbox shows a command nothing of this machine but its software.
    let peek = server
        .json("POST", &format!("/v1/sessions/{sid}/exec"), json!({"command": format!("cat {}/secret.txt; cat {}/repo/calc/ops.py", outside.display(), built().display())}))
        .json();
    assert!(
        !peek["stdout"].as_str().unwrap().contains("secret"),
        "{peek}"
    );
    assert!(
        !peek["stdout"].as_str().unwrap().contains("return lo"),
        "{peek}"
    );
    // Size limits: a body over the limit is refused whole.
    let big = vec![b'#'; 30000];
    let r = server.call("PUT", &file("big.py"), Some(&big));
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.json()["error"].is_string());
    server.json(
        "POST",
        &format!("/v1/sessions/{sid}/exec"),
        json!({"command": "head -c 30000 /dev/zero > big.bin"}),
    );
    assert_eq!(server.call("GET", &file("big.bin"), None).status, 413);
    // Bad requests are JSON errors with their status.
    let r = server.call(
        "POST",
        &format!("/v1/sessions/{sid}/exec"),
        Some(b"{not json"),
    );
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("JSON"));
    assert_eq!(server.call("GET", "/v1/nothing", None).status, 404);
    assert_eq!(
        server
            .json("POST", "/v1/sessions", json!({"instance": "nope"}))
            .status,
        404
    );
    assert_eq!(
        server
            .call("GET", "/v1/sessions/deadbeef/files/x.py", None)
            .status,
        404
    );
}

#[test]
fn tokens_the_session_limit_timeouts_and_idle_sessions() {
    let pipeline = dataset("limits", "");
    let token = "t0ken-for-the-test";
    let server = start(
        &pipeline,
        &[
            "--token-env",
            "R2E_TEST_TOKEN",
            "--max-sessions",
            "2",
            "--idle-timeout",
            "3",
        ],
        &[("R2E_TEST_TOKEN", token)],
    );
    let with = |method: &str, path: &str, body: Option<Value>| {
        http(
            &server.addr,
            method,
            path,
            Some(token),
            body.map(|b| b.to_string().into_bytes()).as_deref(),
        )
    };
    // No token, a wrong one: 401 on every route.
    for (method, path) in [
        ("GET", "/v1/instances"),
        ("POST", "/v1/sessions"),
        ("GET", "/openapi.json"),
    ] {
        let r = server.call(method, path, None);
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
        assert!(r.json()["error"].is_string());
        let r = http(&server.addr, method, path, Some("t0ken-for-the-tesT"), None);
        assert_eq!(r.status, 401);
    }
    assert_eq!(with("GET", "/v1/instances", None).status, 200);
    // The session limit: 429 with Retry-After, never a wait.
    let open = |instance: &str| with("POST", "/v1/sessions", Some(json!({"instance": instance})));
    let a = open(CLAMP).json()["session"].as_str().unwrap().to_owned();
    let b = open(CLAMP).json()["session"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let third = open(CLAMP);
    assert_eq!(third.status, 429, "{}", third.body);
    assert!(third.header("retry-after").is_some(), "{}", third.headers);
    assert!(started.elapsed() < Duration::from_secs(5));
    // An endless command times out; the session stays usable.
    let started = Instant::now();
    let endless = with(
        "POST",
        &format!("/v1/sessions/{a}/exec"),
        Some(json!({"command": "while true; do :; done", "timeout_s": 2})),
    )
    .json();
    assert_eq!(endless["timed_out"], true, "{endless}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let after = with(
        "POST",
        &format!("/v1/sessions/{a}/exec"),
        Some(json!({"command": "echo still here"})),
    )
    .json();
    assert_eq!(after["stdout"], "still here\n", "{after}");
    assert_eq!(after["timed_out"], false);
    // Closing one makes room.
    assert_eq!(
        with("DELETE", &format!("/v1/sessions/{a}"), None).status,
        200
    );
    assert_eq!(
        with("DELETE", &format!("/v1/sessions/{a}"), None).status,
        404
    );
    let c = open(CLAMP);
    assert_eq!(c.status, 201, "{}", c.body);
    // Idle sessions are reaped: their workspaces go, their traces say why.
    std::thread::sleep(Duration::from_secs(6));
    let listed = with("GET", "/v1/sessions", None).json();
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert!(server.workspaces().is_empty(), "{:?}", server.workspaces());
    assert_eq!(server.trace(&b).last().unwrap()["reason"], "idle");
    assert_eq!(server.trace(&a).last().unwrap()["reason"], "closed");
    assert_eq!(
        with("POST", &format!("/v1/sessions/{b}/test"), None).status,
        404
    );
}

#[test]
fn held_out_tests_count_for_the_reward_and_are_never_shown() {
    let pipeline = dataset(
        "holdout",
        "[serve]\nfeedback = \"summary\"\nholdout = 0.5\n",
    );
    let server = start(&pipeline, &[], &[]);
    let sid = server.open(CLAMP);
    server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(original("calc/ops.py").as_bytes()),
    );
    let tested = server
        .call("POST", &format!("/v1/sessions/{sid}/test"), None)
        .json();
    let shown = tested["total"].as_u64().unwrap();
    let submitted = server
        .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
        .json();
    let all = submitted["total"].as_u64().unwrap();
    assert!(
        shown < all,
        "half the tests are held out: {tested} {submitted}"
    );
    assert_eq!(submitted["reward"], 1.0);
    for t in tested["tests"].as_array().unwrap() {
        assert!(
            t.get("inputs").is_none() && t.get("expected").is_none(),
            "summary feedback: {t}"
        );
        assert!(t["outcome"].is_string());
    }
}

#[test]
fn a_killed_server_loses_no_submission_and_restarts_clean() {
    let pipeline = dataset("kill", "");
    let mut server = start(&pipeline, &[], &[]);
    let done = server.open(CLAMP);
    server.call(
        "PUT",
        &format!("/v1/sessions/{done}/files/calc/ops.py"),
        Some(original("calc/ops.py").as_bytes()),
    );
    let reward = server
        .call("POST", &format!("/v1/sessions/{done}/submit"), None)
        .json();
    let open: Vec<String> = (0..3).map(|_| server.open(CLAMP)).collect();
    server.call(
        "PUT",
        &format!("/v1/sessions/{}/files/notes.txt", open[0]),
        Some(b"half done"),
    );
    server.kill();
    let submit = server
        .trace(&done)
        .into_iter()
        .find(|l| l["op"] == "submit")
        .expect("the submission is on disk");
    assert_eq!(submit["observation"]["reward"], reward["reward"]);
    assert_eq!(
        server.workspaces().len(),
        3,
        "the killed server left its workspaces"
    );
    // A restart closes what was left open and serves again.
    let server = start(&pipeline, &[], &[]);
    assert!(server.workspaces().is_empty(), "{:?}", server.workspaces());
    for sid in &open {
        assert_eq!(
            server.trace(sid).last().unwrap()["reason"],
            "restart",
            "{sid}"
        );
    }
    assert_eq!(server.trace(&done).last().unwrap()["reason"], "submitted");
    assert!(server.log.lock().unwrap().contains("closed 3 session(s)"));
    let again = server.open(CLAMP);
    assert_eq!(
        server
            .call("POST", &format!("/v1/sessions/{again}/test"), None)
            .status,
        200
    );
    // One server per output: a second one says so.
    let second = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["serve", "--addr", "127.0.0.1:0", "-p"])
        .arg(&pipeline)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another `r2e serve`"));
    drop(server);
    // Traces outlive the builds that replace the dataset's generations.
    for coverage in ["0.01", "0.02"] {
        let text = std::fs::read_to_string(&pipeline).unwrap();
        let at = text.find("min_branch_coverage = ").unwrap();
        let end = at + text[at..].find('\n').unwrap();
        std::fs::write(
            &pipeline,
            format!(
                "{}min_branch_coverage = {coverage}{}",
                &text[..at],
                &text[end..]
            ),
        )
        .unwrap();
        build(built(), "kill");
    }
    let traces = built().join("out-kill").join("traces");
    let submitted = common::jsonl(&traces.join(format!("{done}.jsonl")));
    assert_eq!(submitted.last().unwrap()["reason"], "submitted");
}

#[test]
fn the_python_clients_own_tests_pass() {
    let (code, stdout, stderr) =
        python(&["-m", "unittest", "discover", "-s", "clients/python/tests"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let count = common::unittest_ran(&stderr);
    assert!(count >= 20, "only {count} tests ran: {stderr}");
    // The scripts beside the client at least start: the load test and the agent loop.
    for script in ["bench/serve_load.py", "examples/agent_loop.py"] {
        let (code, stdout, stderr) = python(&[script, "--help"]);
        assert_eq!(code, 0, "{script}: {stdout}\n{stderr}");
        assert!(stdout.contains("usage"), "{script}: {stdout}");
    }
}

/// A lone session's tests are forked children of one warm worker that lives across requests,
/// and their verdicts are right both ways: each edit is new code (a statement in the body), the
/// reference passes and a wrong body fails.
#[test]
fn a_lone_sessions_tests_are_answered_by_one_warm_worker_right_both_ways() {
    let pipeline = dataset("warm", "");
    let mut server = start(&pipeline, &[], &[]);
    let sid = server.open(CLAMP);
    let docstring = "    \"\"\"Clamp x to the range from lo to hi.\"\"\"\n";
    for step in 0..6 {
        let module = if step % 2 == 0 {
            original("calc/ops.py")
        } else {
            wrong_clamp()
        };
        let edited = module.replacen(docstring, &format!("{docstring}    tag = {step}\n"), 1);
        assert_ne!(edited, module);
        let put = server.call(
            "PUT",
            &format!("/v1/sessions/{sid}/files/calc/ops.py"),
            Some(edited.as_bytes()),
        );
        assert_eq!(put.status, 200, "{}", put.body);
        let tested = server.call("POST", &format!("/v1/sessions/{sid}/test"), None);
        assert_eq!(tested.status, 200, "{}", tested.body);
        let got = tested.json();
        let (passed, total) = (
            got["passed"].as_u64().unwrap(),
            got["total"].as_u64().unwrap(),
        );
        assert!(total >= 2, "{got}");
        if step % 2 == 0 {
            assert_eq!(passed, total, "the reference, step {step}: {got}");
        } else {
            assert!(passed < total, "a wrong body, step {step}: {got}");
        }
    }
    let said = server.stop();
    assert!(
        said.contains("1 warm workers answered 6 requests"),
        "{said}"
    );
}

/// A server holds the shared cache only while it opens its dataset: a build of another
/// output on the same cache runs to its end while it serves (it used to wait for the server to
/// stop), and the server goes on checking. The cache is this test's own (a copy of the seed):
/// on the cache the other tests share, their builds and servers may hold the lock a moment
/// while this build runs, which is no server holding it.
#[test]
fn a_build_on_the_same_cache_runs_while_the_server_serves() {
    let own = common::seed::Copy::of(&common::serve::seed());
    let dir = own.path();
    let pipeline = write_pipeline(dir, "shared", "");
    build(dir, "shared");
    let server = start(&pipeline, &[], &[]);
    let sid = server.open(CLAMP);
    let other = write_pipeline(dir, "shared-next", "");
    let _ = std::fs::remove_dir_all(dir.join("out-shared-next"));
    let started = Instant::now();
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json", "-p"])
        .arg(&other)
        .envs(common::offline_env())
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(!said.contains("waiting for the lock"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(300));
    // The server still checks (a test of the reference, new code for the check cache).
    let edited =
        original("calc/ops.py").replacen("    if x < lo:\n", "    shared = 1\n    if x < lo:\n", 1);
    let put = server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(edited.as_bytes()),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let tested = server
        .call("POST", &format!("/v1/sessions/{sid}/test"), None)
        .json();
    assert_eq!(tested["passed"], tested["total"], "{tested}");
}

/// `/openapi.json` is what the server does: schemathesis (from PyPI, pinned) runs every check
/// against a live server with a token, its stateful phase following the document's links from
/// a new session to every operation on it (`bench/serve_schema.sh`).
#[test]
fn every_response_matches_the_openapi_document() {
    let pipeline = dataset("schema", "");
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/serve_schema.sh"))
        .arg(&pipeline)
        .env("R2E", assert_cmd::cargo::cargo_bin("r2e"))
        .env(
            "ST_VENV",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis"),
        )
        .env("ST_EXAMPLES", "100")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("No issues found"), "{stdout}");
    // Every operation was tested, and the stateful phase reached every linked one.
    assert!(stdout.contains("9 selected / 9 total"), "{stdout}");
    assert!(stdout.contains("7 covered / 7 selected"), "{stdout}");
}

#[test]
fn serving_beyond_loopback_needs_a_token_and_bad_settings_say_where() {
    let dir = tempfile::tempdir().unwrap();
    common::write_fixture(&dir.path().join("repo"), FIXTURE);
    let pipeline = write_pipeline(dir.path(), "bad", "[serve]\nholdout = 1.5\n");
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["serve", "-p"])
        .arg(&pipeline)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:") && err.contains("holdout"),
        "{err}"
    );
    let pipeline = write_pipeline(dir.path(), "open", "");
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["serve", "--addr", "0.0.0.0:0", "-p"])
        .arg(&pipeline)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-env"));
    let out = Command::new(env!("CARGO_BIN_EXE_r2e"))
        .args(["serve", "--token-env", "R2E_UNSET_TOKEN_VAR", "-p"])
        .arg(&pipeline)
        .env_remove("R2E_UNSET_TOKEN_VAR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("R2E_UNSET_TOKEN_VAR"));
}

/// `examples/agent_loop.py` on `clamp` against the server at `url` and the model server at
/// `model`, with more arguments; it must exit 0: its last JSON line, and what it said.
fn agent_loop(url: &str, model: &str, more: &[&str]) -> (Value, String) {
    let mut args = vec![
        "examples/agent_loop.py",
        "--server",
        url,
        "--model-url",
        model,
        "--model",
        "scripted",
        "--instance",
        CLAMP,
    ];
    args.extend_from_slice(more);
    let (code, stdout, stderr) = python(&args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let got = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    (got, stderr)
}

#[test]
fn the_gym_wrapper_solves_an_instance_with_the_reference_and_with_a_repairing_model() {
    let pipeline = dataset("gym", "");
    let server = start(&pipeline, &[], &[]);
    let url = format!("http://{}", server.addr);
    // The reference, through reset and step.
    let reference = r#"
import json, sys
sys.path.insert(0, "clients/python")
from r2e_client import Client, R2EEnvBase
env = R2EEnvBase(Client(sys.argv[1]))
obs, info = env.reset(options={"instance": sys.argv[2]})
assert "raise NotImplementedError" in obs["output"] and obs["output"] == info["file"], obs
obs, reward, terminated, truncated, info = env.step({"op": "write", "path": obs["path"], "text": open(sys.argv[3]).read()})
assert reward == 0.0 and not terminated and not truncated and not obs["error"], obs
obs, reward, terminated, truncated, info = env.step({"op": "test"})
assert not terminated and not truncated and info["outcome"] == "pass", info
tests = info["answer"]
obs, reward, terminated, truncated, info = env.step({"op": "submit"})
print(json.dumps({"reward": reward, "done": terminated, "truncated": truncated, "outcome": info["outcome"], "tests": tests}))
"#;
    let ops = built().join("repo").join("calc").join("ops.py");
    let (code, stdout, stderr) = python(&["-c", reference, &url, CLAMP, ops.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let got: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(got["reward"], 1.0, "{got}");
    assert_eq!(got["done"], true);
    assert_eq!(got["truncated"], false);
    assert_eq!(got["outcome"], "pass");

    // A scripted model: wrong at first, right once it is shown the failing tests.
    let right = "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n";
    let wrong = "def clamp(x, lo, hi):\n    return max(lo, x)\n";
    let (model, log, _) = common::server::serve(Duration::ZERO, move |prompt, _| {
        let code = if prompt.contains("fails some tests") {
            right
        } else {
            wrong
        };
        (200, "", format!("Here it is.\n\n```python\n{code}```\n"))
    });
    let (got, stderr) = agent_loop(&url, &model, &["--repairs", "2"]);
    assert_eq!(got["reward"], 1.0, "{got}\n{stderr}");
    assert_eq!(got["attempts"], 2, "{got}");
    let prompts = log.lock().unwrap().clone();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert!(
        !prompts[0].contains("return hi\n    return x"),
        "the first prompt holds no reference"
    );
    // The repair prompt carries the failing test's inputs and both outcomes.
    assert!(prompts[1].contains("clamp("), "{}", prompts[1]);

    // A base model (`--api completions`): the prompt opens the code block, the model continues it.
    let (model, log, _) =
        common::server::serve(Duration::ZERO, move |_, _| (200, "", right.to_owned()));
    let (got, stderr) = agent_loop(&url, &model, &["--api", "completions"]);
    assert_eq!(got["reward"], 1.0, "{got}\n{stderr}");
    let prompts = log.lock().unwrap().clone();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert!(prompts[0].ends_with("```python\n"), "{}", prompts[0]);
    assert!(server.workspaces().is_empty());
}

#[test]
fn sessions_run_in_docker_when_the_pipeline_says_so() {
    if common::docker().is_none() {
        return;
    }
    let pipeline = dataset(
        "docker",
        "[sandbox]\nbackend = \"docker\"\nrun_timeout_seconds = 5\n",
    );
    let mut server = start(&pipeline, &[], &[]);
    let sid = server.open(CLAMP);
    let exec = |command: &str| {
        server
            .json(
                "POST",
                &format!("/v1/sessions/{sid}/exec"),
                json!({ "command": command, "timeout_s": 20 }),
            )
            .json()
    };
    // The container: the unprivileged user, the workspace, the environment, no network, and
    // nothing of this machine.
    let ran = exec(
        "id -u; python -c 'import calc.ops; print(calc.ops.__file__)'; python -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=3)' 2>&1 | tail -1; ls /root /work 2>&1 | head -2",
    );
    let stdout = ran["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("65534\n<workspace>/calc/ops.py\n"),
        "{ran}"
    );
    assert!(stdout.contains("Error"), "no network: {ran}");
    assert!(!stdout.contains("main"), "{ran}");
    let endless = exec("sleep 60");
    assert_eq!(endless["timed_out"], true, "{endless}");
    // Tests and the reward, through the one check path in containers.
    server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(wrong_clamp().as_bytes()),
    );
    let tested = server
        .call("POST", &format!("/v1/sessions/{sid}/test"), None)
        .json();
    assert!(
        tested["passed"].as_u64() < tested["total"].as_u64(),
        "{tested}"
    );
    server.call(
        "PUT",
        &format!("/v1/sessions/{sid}/files/calc/ops.py"),
        Some(original("calc/ops.py").as_bytes()),
    );
    let submitted = server
        .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
        .json();
    assert_eq!(submitted["reward"], 1.0, "{submitted}");
    assert!(server.workspaces().is_empty());
    // The test and the submission were answered by a warm worker in a container.
    let said = server.stop();
    assert!(
        said.contains("1 warm workers answered 2 requests"),
        "{said}"
    );
}

/// The bytes and entries under `dir` (a file's size, or its blocks when more), as the server
/// counts a workspace.
fn disk_use(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut bytes, mut entries) = (0, 0);
    for e in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .flatten()
    {
        entries += 1;
        if let Ok(m) = e.metadata()
            && m.is_file()
        {
            bytes += m.len().max(m.blocks() * 512);
        }
    }
    (bytes, entries)
}

/// A session that writes past its quota, through the API and by commands (one that writes a
/// big file, one that writes many small ones, one that makes files without end), is refused
/// with 413, what its commands added is taken back, and it goes on; another session's tests
/// run meanwhile; the server's disk holds no more than the copies and the quotas.
#[test]
fn a_session_past_its_quota_is_refused_and_the_others_go_on() {
    const LIMIT: u64 = 256 << 10;
    const FILES: u64 = 40;
    const COMMAND: u64 = 128 << 10;
    let pipeline = dataset(
        "quota",
        &format!(
            "[serve]\nworkspace_limit = {LIMIT}\nworkspace_files = {FILES}\ncommand_write_limit = {COMMAND}\n"
        ),
    );
    let server = start(&pipeline, &[], &[]);
    let (hog, calm) = (server.open(CLAMP), server.open(CLAMP));
    let store = server
        .output
        .with_file_name(".out-quota.r2e")
        .join("sessions");
    let copy = disk_use(&store.join(&calm));
    let put = |sid: &str, rel: &str, text: &[u8]| {
        server.call(
            "PUT",
            &format!("/v1/sessions/{sid}/files/{rel}"),
            Some(text),
        )
    };
    let exec = |sid: &str, command: &str| {
        server.json(
            "POST",
            &format!("/v1/sessions/{sid}/exec"),
            json!({"command": command, "timeout_s": 60}),
        )
    };
    // Through the API: 200 KiB fits, 100 KiB more does not (nothing of it is written).
    assert_eq!(put(&hog, "data/a.bin", &vec![b'a'; 200 << 10]).status, 200);
    let refused = put(&hog, "data/b.bin", &vec![b'b'; 100 << 10]);
    assert_eq!(refused.status, 413, "{}", refused.body);
    assert!(
        refused.json()["error"].as_str().unwrap().contains("quota"),
        "{}",
        refused.body
    );
    assert!(!store.join(&hog).join("data/b.bin").exists());
    // Rewriting a file counts its new size in place of the old one.
    assert_eq!(put(&hog, "data/a.bin", &vec![b'a'; 100 << 10]).status, 200);
    // A command that writes one file past what it may add (128 KiB): stopped, taken back.
    let big = exec(&hog, "head -c 1000000 /dev/zero > big.bin; echo done");
    assert_eq!(big.status, 413, "{}", big.body);
    assert!(
        big.body.contains("command_write_limit"),
        "the limit it hit is named: {}",
        big.body
    );
    assert!(!store.join(&hog).join("big.bin").exists());
    // Many small files, past what one command may add: taken back, every one.
    let many = exec(
        &hog,
        "mkdir -p out && for i in $(seq 1 30); do head -c 8192 /dev/zero > out/f$i; done",
    );
    assert_eq!(many.status, 413, "{}", many.body);
    assert!(!store.join(&hog).join("out").exists());
    // Files without end (past the session's 40 entries): stopped long before its 60 s.
    let started = Instant::now();
    let endless = exec(&hog, "i=0; while true; do i=$((i+1)); : > e$i; done");
    assert_eq!(endless.status, 413, "{}", endless.body);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(!store.join(&hog).join("e1").exists());
    // A command within the quota writes as always; the hog's session goes on.
    let fine = exec(
        &hog,
        "head -c 1000 /dev/zero > small.bin && wc -c < small.bin",
    );
    assert_eq!(fine.status, 200, "{}", fine.body);
    assert_eq!(fine.json()["stdout"].as_str().unwrap().trim(), "1000");
    // The trace holds the refused command, with why.
    let refusals = server
        .trace(&hog)
        .into_iter()
        .filter(|l| l["op"] == "exec" && l["observation"]["refused"].is_string())
        .count();
    assert_eq!(refusals, 3);
    // The other session's tests run, and the reference passes.
    assert_eq!(
        put(&calm, "calc/ops.py", original("calc/ops.py").as_bytes()).status,
        200
    );
    let tested = server
        .call("POST", &format!("/v1/sessions/{calm}/test"), None)
        .json();
    assert_eq!(tested["outcome"], "pass", "{tested}");
    let tested = server
        .call("POST", &format!("/v1/sessions/{hog}/test"), None)
        .json();
    assert_ne!(tested["outcome"], "error", "{tested}");
    // The disk holds no more than two copies and two quotas.
    let (bytes, entries) = disk_use(&store);
    assert!(
        bytes <= 2 * (copy.0 + LIMIT),
        "{bytes} bytes for 2 sessions of {} + {LIMIT}",
        copy.0
    );
    assert!(entries <= 2 * (copy.1 + FILES) + 2, "{entries} entries");
}
