//! The Python client's `R2EEnv` as a Gymnasium environment against `r2e serve`: Gymnasium's own
//! `check_env` passes on it (spaces, seeded resets, step determinism, render, close), the
//! vectorized example solves 16 environments at once with the reference in one process, a wrong
//! answer ends the episode with outcome `fail` and no reward (the server's: the fraction of tests
//! passed), and the step limit truncates.
//!
//! Gymnasium is installed from the package index (pinned) into a virtualenv made once in the
//! target folder (`common::serve::pinned_venv`); where it cannot be, the test is skipped, and
//! under `R2E_TEST_STRICT=1` (`.ci/run`) it fails.

use std::time::Instant;

use serde_json::Value;

use crate::common;

use common::serve::{CLAMP, built, dataset, pinned_venv, python_with, run_json, start};

/// The Gymnasium the client is checked against.
const GYMNASIUM: &str = "gymnasium==1.4.0";

/// `check_env` on the environment `gymnasium.make` builds (its spec lets the checker also make
/// it with each render mode and close it twice), every warning recorded: none may come.
const CHECK: &str = r#"
import json, sys, warnings
sys.path.insert(0, "clients/python")
import gymnasium
from gymnasium.utils.env_checker import check_env
import r2e_gym
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    env = gymnasium.make(r2e_gym.ENV_ID, client=sys.argv[1], render_mode="ansi")
    check_env(env.unwrapped)
    # The same seed draws the same instance and observation; the reference is contained.
    a, _ = env.unwrapped.reset(seed=5)
    b, _ = env.unwrapped.reset(seed=5)
    assert a == b and a in env.observation_space, (a, b)
    assert "raise NotImplementedError" in a["output"], a
    env.close()
print(json.dumps({"warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
                  "gymnasium": gymnasium.__version__, "rendered": env.unwrapped.render()}))
"#;

/// A wrong answer submitted, then an episode cut by the step limit.
const WRONG: &str = r#"
import json, sys
sys.path.insert(0, "clients/python")
from r2e_client import R2EEnv
env = R2EEnv(sys.argv[1])
obs, info = env.reset(options={"instance": sys.argv[2]})
wrong = "def clamp(x, lo, hi):\n    return None\n"  # every test fails
obs, reward, terminated, truncated, info = env.step({"op": "write_function", "code": wrong})
assert not obs["error"] and not terminated and not truncated, obs
obs, reward, terminated, truncated, info = env.step({"op": "test"})
tested = {"outcome": info["outcome"], "reward": reward, "terminated": terminated}
obs, reward, terminated, truncated, info = env.step({"op": "submit"})
submitted = {"outcome": info["outcome"], "reward": reward, "terminated": terminated,
             "truncated": truncated, "answer": info["answer"]}
limited = R2EEnv(sys.argv[1], max_steps=2)
limited.reset(seed=1)
first = limited.step({"op": "read", "path": "nope.py"})
second = limited.step({"op": "read", "path": "calc/ops.py"})
limit = {"first": [first[2], first[3], first[0]["error"] != ""],
         "second": [second[2], second[3], second[4].get("limit")]}
print(json.dumps({"tested": tested, "submitted": submitted, "limit": limit}))
"#;

#[test]
fn gymnasium_s_check_env_passes_and_16_threaded_envs_solve_with_the_reference() {
    let t = Instant::now();
    let Some(python) = pinned_venv("gymnasium", GYMNASIUM) else {
        return;
    };
    eprintln!("gymnasium installed in {:.1}s", t.elapsed().as_secs_f64());
    let pipeline = dataset("gymnasium", "");
    let server = start(&pipeline, &[], &[]);
    let url = format!("http://{}", server.addr);

    // (1) Gymnasium's own checker.
    let t = Instant::now();
    let checked = run_json(&python, CHECK, &[&url]);
    eprintln!("check_env took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(checked["gymnasium"], "1.4.0");
    assert_eq!(checked["warnings"], Value::Array(vec![]), "{checked}");
    assert!(
        checked["rendered"]
            .as_str()
            .is_some_and(|r| r.contains("calc/ops.py")),
        "{checked}"
    );

    // (2) The vectorized example: 16 environments, one thread each, all rewarded in full.
    let t = Instant::now();
    let reference = built().join("repo");
    let (code, stdout, stderr) = python_with(
        &python,
        &[
            "examples/gym_vector.py",
            "--server",
            &url,
            "--envs",
            "16",
            "--reference-dir",
            reference.to_str().unwrap(),
        ],
    );
    eprintln!("16 environments took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 17, "{stdout}");
    for line in &lines[..16] {
        assert_eq!(line["reward"], 1.0, "{line}");
        assert_eq!(line["terminated"], true, "{line}");
        assert_eq!(line["truncated"], false, "{line}");
        assert_eq!(line["outcome"], "pass", "{line}");
    }
    let summary = &lines[16];
    assert_eq!(summary["envs"], 16);
    assert_eq!(summary["mean_reward"], 1.0, "{summary}");
    // The seeds drew both instances of the fixture.
    let drawn: std::collections::BTreeSet<&str> = lines[..16]
        .iter()
        .map(|l| l["instance"].as_str().unwrap())
        .collect();
    assert!(drawn.len() > 1 && drawn.contains(CLAMP), "{drawn:?}");

    // (3) A wrong answer: terminated, no reward, outcome `fail`; and the step limit.
    let got = run_json(&python, WRONG, &[&url, CLAMP]);
    assert_eq!(got["tested"]["outcome"], "fail", "{got}");
    assert_eq!(got["tested"]["terminated"], false, "{got}");
    let submitted = &got["submitted"];
    assert_eq!(submitted["outcome"], "fail", "{got}");
    assert_eq!(submitted["reward"], 0.0, "{got}");
    assert_eq!(submitted["terminated"], true, "{got}");
    assert_eq!(submitted["truncated"], false, "{got}");
    assert_eq!(submitted["answer"]["passed_all"], false, "{got}");
    // A missing file is the agent's mistake (the episode goes on); the second step is the last.
    assert_eq!(
        got["limit"]["first"],
        serde_json::json!([false, false, true])
    );
    assert_eq!(
        got["limit"]["second"],
        serde_json::json!([false, true, "steps"])
    );
    assert!(server.workspaces().is_empty(), "every session was closed");
}
