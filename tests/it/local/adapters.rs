//! The Python client's adapters to two evaluation libraries, against `r2e serve`: the verifiers
//! environment (`clients/python/r2e_verifiers.py`) run by verifiers' own `vf-eval` with a
//! scripted model on loopback scores the reference 1.0 on every instance and a wrong body 0.0,
//! and a check that cannot be made (the server stopped; a server answering outcome `error` or
//! 503) is a `SandboxError` on a trace that is not `ok`, with no reward, which a trainer masks,
//! not a 0; the Inspect task (`clients/python/r2e_inspect.py`) with Inspect's `mockllm/model`
//! scores the reference 1.0 (accuracy) and a stub 0.0, and a check that cannot be made is the
//! sample's error, not INCORRECT.
//!
//! Each library is installed from the package index (pinned) into a virtualenv of its own, made
//! once under the target folder (`common::provisioned`) and marked complete, so that a second
//! run installs nothing; where it cannot be, the test is skipped, and under
//! `R2E_TEST_STRICT=1` (`.ci/run`) it fails.

use std::time::Instant;

use serde_json::{Value, json};

use crate::common;

use common::serve::{CLAMP, dataset, pinned_venv, run_json, start};

/// The verifiers the environment is checked against (0.4.0 is the only 0.4 release).
const VERIFIERS: &str = "verifiers==0.4.0";

/// The Inspect the task is checked against (the latest release).
const INSPECT: &str = "inspect-ai==0.3.285";

/// The fixture's second instance.
const SCALE: &str = "calc:calc/ops.py:scale";

/// `vf-eval r2e_verifiers` (verifiers' own command, in a process of its own) on the instances of
/// `DATASET`, checked by the server at `SERVER`, with a scripted model on loopback (an
/// OpenAI-compatible `/v1/chat/completions`) answering each prompt with the reference of the
/// function it names (`MODE` `reference`) or a body returning None (`wrong`). `FAULT`
/// `check-error`: the checks go to a stand-in r2e server on loopback whose submission of `clamp`
/// answers outcome `error` and whose session on `scale` cannot open (503). Prints the episodes
/// of `OUT/run/traces.jsonl`, the model's calls and the stand-in's requests.
const VERIFIERS_EVAL: &str = r#"
import json, os, subprocess, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

dataset, server, mode, fault, out = sys.argv[1:6]
reference = {}
for line in open(dataset):
    if line.strip():
        row = json.loads(line)
        reference[row["qualname"]] = row["reference"]
calls, faulty = [], []

def reply(handler, status, body, kind="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)

def body_of(handler):
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))

class Model(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        request = json.loads(body_of(self))
        prompt = request["messages"][-1]["content"]
        name = next(q for q in reference if "`%s`" % q in prompt)
        calls.append({"route": self.path, "model": request["model"], "function": name,
                      "roles": [m["role"] for m in request["messages"]]})
        if mode == "reference":
            text = "Here it is:\n```python\n" + reference[name] + "```\n"
        else:
            text = "```python\ndef %s(*args):\n    return None\n```\n" % name
        reply(self, 200, {"id": "scripted", "object": "chat.completion", "created": 0,
                          "model": request["model"],
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": text}}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

class Faulty(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = body_of(self)
        faulty.append(["POST", self.path])
        if self.path == "/v1/sessions":
            instance = json.loads(body)["instance"]
            _, path, qualname = instance.split(":")
            if qualname == "scale":
                return reply(self, 503, {"error": "no sandbox can start"})
            return reply(self, 201, {"session": "s-" + qualname, "instance": instance,
                                     "path": path, "qualname": qualname})
        reply(self, 200, {"outcome": "error", "reward": None, "passed_all": False, "passed": 0,
                          "total": 0, "error": "the sandbox could not start"})

    def do_GET(self):
        faulty.append(["GET", self.path])
        qualname = self.path.split("/")[3][len("s-"):]
        stub = "def %s(*args):\n    raise NotImplementedError\n" % qualname
        reply(self, 200, stub.encode(), "text/plain; charset=utf-8")

    def do_PUT(self):
        size = len(body_of(self))
        faulty.append(["PUT", self.path])
        reply(self, 200, {"path": "calc/ops.py", "bytes": size})

    def do_DELETE(self):
        faulty.append(["DELETE", self.path])
        reply(self, 200, {})

def serve(handler):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d" % httpd.server_port

model = serve(Model)
if fault == "check-error":
    server = serve(Faulty)
vf_eval = os.path.join(os.path.dirname(sys.executable), "vf-eval")
env = dict(os.environ, PYTHONPATH=os.path.abspath("clients/python"), SCRIPTED_KEY="scripted",
           HOME=os.path.join(out, "home"))
done = subprocess.run(
    [vf_eval, "r2e_verifiers", "--env.taskset.dataset", dataset,
     "--env.taskset.task.server", server, "-m", "scripted",
     "--client.base-url", model + "/v1", "--client.api-key-var", "SCRIPTED_KEY",
     "--no-rich", "--no-push", "-o", out, "--run.name", "run"],
    env=env, capture_output=True, text=True)
assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
episodes = []
for line in open(os.path.join(out, "run", "traces.jsonl")):
    episode = json.loads(line)
    [trace] = episode["traces"]
    reward = trace["rewards"]["r2e_pass"]
    episodes.append({
        "instance": episode["task"]["data"]["id"],
        "ok": episode["ok"],
        "trace_ok": trace["ok"],
        "reward": None if reward is None else reward["score"],
        "r2e": trace["info"].get("r2e"),
        "metrics": trace["metrics"],
        "errors": [{"type": e["type"], "status_code": e.get("status_code"),
                    "message": e["message"]} for e in trace["errors"]],
        "harness": trace["agent"]["config"]["harness"]["id"],
        "runtime": trace["agent"]["config"]["runtime"]["type"],
    })
import verifiers
print(json.dumps({"verifiers": verifiers.__version__, "calls": calls, "faulty": faulty,
                  "episodes": sorted(episodes, key=lambda e: e["instance"])}))
"#;

/// The episode of `instance` in a [`VERIFIERS_EVAL`] answer.
fn episode<'a>(got: &'a Value, instance: &str) -> &'a Value {
    got["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["instance"] == instance)
        .unwrap_or_else(|| panic!("no episode of {instance}: {got}"))
}

#[test]
fn verifiers_scores_the_reference_1_a_wrong_body_0_and_a_check_not_made_is_a_maskable_error() {
    let Some(python) = pinned_venv("adapters-verifiers", VERIFIERS) else {
        return;
    };
    let pipeline = dataset("adapters-verifiers", "");
    let mut server = start(&pipeline, &[], &[]);
    let url = format!("http://{}", server.addr);
    let instances = server.output.join("dataset.jsonl");
    let instances = instances.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let eval = |mode: &str, fault: &str, url: &str| {
        let out = work.path().join(format!("{mode}-{fault}"));
        let t = Instant::now();
        let got = run_json(
            &python,
            VERIFIERS_EVAL,
            &[instances, url, mode, fault, out.to_str().unwrap()],
        );
        eprintln!(
            "vf-eval ({mode}, {fault}) took {:.1}s",
            t.elapsed().as_secs_f64()
        );
        assert_eq!(got["verifiers"], "0.4.0", "{got}");
        assert_eq!(got["episodes"].as_array().unwrap().len(), 2, "{got}");
        got
    };

    // (1) The reference: 1.0 on every instance, through verifiers' own rollout (the module's
    // env, harness and subprocess runtime, the model called through the interception server).
    let got = eval("reference", "none", &url);
    for instance in [CLAMP, SCALE] {
        let e = episode(&got, instance);
        assert_eq!(e["reward"], 1.0, "{e}");
        assert_eq!(e["ok"], true, "{e}");
        assert_eq!(e["trace_ok"], true, "{e}");
        assert_eq!(e["errors"], json!([]), "{e}");
        assert_eq!(e["harness"], "r2e_verifiers", "{e}");
        assert_eq!(e["runtime"], "subprocess", "{e}");
        assert_eq!(e["r2e"]["outcome"], "pass", "{e}");
        assert_eq!(e["r2e"]["instance"], instance, "{e}");
        let total = e["r2e"]["total"].as_u64().unwrap();
        assert!(total > 0, "{e}");
        assert_eq!(e["r2e"]["passed"], total, "{e}");
        assert_eq!(e["metrics"]["r2e_passed"], total as f64, "{e}");
    }
    let calls = got["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "one model call per instance: {got}");
    for call in calls {
        assert_eq!(call["route"], "/v1/chat/completions", "{call}");
        assert_eq!(call["model"], "scripted", "{call}");
        assert_eq!(call["roles"], json!(["system", "user"]), "{call}");
    }

    // (2) A wrong body: 0.0, outcome `fail`, the rollout fine (a real score, not an error).
    let got = eval("wrong", "none", &url);
    for instance in [CLAMP, SCALE] {
        let e = episode(&got, instance);
        assert_eq!(e["reward"], 0.0, "{e}");
        assert_eq!(e["ok"], true, "{e}");
        assert_eq!(e["errors"], json!([]), "{e}");
        assert_eq!(e["r2e"]["outcome"], "fail", "{e}");
        assert!(
            e["r2e"]["passed"].as_u64().unwrap() < e["r2e"]["total"].as_u64().unwrap(),
            "{e}"
        );
    }
    assert!(server.workspaces().is_empty(), "every session was closed");

    // (3) The server stopped: its URL refuses, so no check is made. Each rollout is an error
    // (`SandboxError`, no HTTP status, the trace and the episode not `ok`) with no reward,
    // what a trainer masks: not a 0.
    server.stop();
    let got = eval("reference", "stopped", &url);
    assert_eq!(got["calls"].as_array().unwrap().len(), 2, "{got}");
    for instance in [CLAMP, SCALE] {
        let e = episode(&got, instance);
        assert_eq!(e["reward"], Value::Null, "{e}");
        assert_eq!(e["ok"], false, "{e}");
        assert_eq!(e["trace_ok"], false, "{e}");
        assert_eq!(e["errors"].as_array().unwrap().len(), 1, "{e}");
        assert_eq!(e["errors"][0]["type"], "SandboxError", "{e}");
        assert_eq!(e["errors"][0]["status_code"], Value::Null, "{e}");
        assert!(
            e["errors"][0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("could not check") && m.contains("no answer")),
            "{e}"
        );
        assert_eq!(e["r2e"]["outcome"], "error", "{e}");
    }

    // (4) A server that answers but cannot judge: `clamp`'s submission has outcome `error` (its
    // session is closed all the same), `scale`'s session cannot open (503): both errors.
    let got = eval("reference", "check-error", "unused");
    let clamp = episode(&got, CLAMP);
    assert_eq!(clamp["reward"], Value::Null, "{clamp}");
    assert_eq!(clamp["ok"], false, "{clamp}");
    assert_eq!(clamp["errors"][0]["type"], "SandboxError", "{clamp}");
    assert_eq!(clamp["r2e"]["outcome"], "error", "{clamp}");
    assert_eq!(clamp["r2e"]["session"], "s-clamp", "{clamp}");
    assert_eq!(
        clamp["r2e"]["error"], "the sandbox could not start",
        "{clamp}"
    );
    let scale = episode(&got, SCALE);
    assert_eq!(scale["reward"], Value::Null, "{scale}");
    assert_eq!(scale["ok"], false, "{scale}");
    assert_eq!(scale["errors"][0]["type"], "SandboxError", "{scale}");
    assert_eq!(scale["errors"][0]["status_code"], 503, "{scale}");
    let faulty = &got["faulty"];
    for request in [
        json!(["POST", "/v1/sessions/s-clamp/submit"]),
        json!(["DELETE", "/v1/sessions/s-clamp"]),
    ] {
        assert!(
            faulty.as_array().unwrap().contains(&request),
            "{request}: {faulty}"
        );
    }
}

/// Inspect's `eval` on the task file `clients/python/r2e_inspect.py` (loaded by path, as
/// `inspect eval FILE` does) over `DATASET`'s instances, checked by the server at `SERVER`, with
/// `mockllm/model` answering each prompt with the reference of the function it names (`MODE`
/// `reference`) or a stub raising NotImplementedError (`stub`). `MODE` `stopped`: the reference,
/// twice: with Inspect's default `fail_on_error` and with `fail_on_error=False`.
const INSPECT_EVAL: &str = r#"
import json, sys
import inspect_ai
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

dataset, server, mode, logs = sys.argv[1:5]
reference = {}
for line in open(dataset):
    if line.strip():
        row = json.loads(line)
        reference[row["qualname"]] = row["reference"]

def answer(messages, tools, tool_choice, config):
    prompt = messages[-1].text
    name = next(q for q in reference if "`%s`" % q in prompt)
    if mode == "stub":
        text = "```python\ndef %s(*args):\n    raise NotImplementedError\n```\n" % name
    else:
        text = "```python\n" + reference[name] + "```\n"
    output = ModelOutput.from_content(model="mockllm/model", content=text)
    # Without usage, mockllm counts the tokens with tiktoken, which downloads its encodings.
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output

def summary(**options):
    [log] = inspect_eval("clients/python/r2e_inspect.py",
                         task_args={"server": server, "dataset": dataset},
                         model=get_model("mockllm/model", custom_outputs=answer),
                         log_dir=logs, display="none", **options)
    scores = log.results.scores if log.results else []
    return {
        "status": log.status,
        "metrics": {name: m.value for s in scores for name, m in s.metrics.items()},
        "samples": sorted(({
            "id": s.id,
            "scores": {k: v.value for k, v in (s.scores or {}).items()},
            "outcome": {k: v.metadata for k, v in (s.scores or {}).items()},
            "error": s.error.message if s.error else None,
        } for s in log.samples or []), key=lambda s: s["id"]),
    }

if mode == "stopped":
    print(json.dumps({"inspect": inspect_ai.__version__, "default": summary(),
                      "tolerant": summary(fail_on_error=False)}))
else:
    print(json.dumps({"inspect": inspect_ai.__version__, "run": summary()}))
"#;

#[test]
fn inspect_scores_the_reference_1_a_stub_0_and_a_check_not_made_is_a_sample_error() {
    let Some(python) = pinned_venv("adapters-inspect", INSPECT) else {
        return;
    };
    let pipeline = dataset("adapters-inspect", "");
    let mut server = start(&pipeline, &[], &[]);
    let url = format!("http://{}", server.addr);
    let instances = server.output.join("dataset.jsonl");
    let instances = instances.to_str().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let logs = logs.path().to_str().unwrap();
    let eval = |mode: &str| {
        let t = Instant::now();
        let got = run_json(&python, INSPECT_EVAL, &[instances, &url, mode, logs]);
        eprintln!(
            "inspect eval ({mode}) took {:.1}s",
            t.elapsed().as_secs_f64()
        );
        assert_eq!(got["inspect"], "0.3.285", "{got}");
        got
    };

    // (1) The reference: CORRECT on both instances, accuracy 1.0.
    let got = eval("reference");
    let result = &got["run"];
    assert_eq!(result["status"], "success", "{got}");
    assert_eq!(result["metrics"]["accuracy"], 1.0, "{got}");
    let samples = result["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{got}");
    for (sample, id) in samples.iter().zip([CLAMP, SCALE]) {
        assert_eq!(sample["id"], id, "{sample}");
        assert_eq!(sample["scores"]["r2e_check"], "C", "{sample}");
        let outcome = &sample["outcome"]["r2e_check"];
        assert_eq!(outcome["outcome"], "pass", "{sample}");
        assert_eq!(outcome["passed"], outcome["total"], "{sample}");
        assert_eq!(sample["error"], Value::Null, "{sample}");
    }

    // (2) A stub: INCORRECT on both, accuracy 0.0.
    let got = eval("stub");
    let result = &got["run"];
    assert_eq!(result["status"], "success", "{got}");
    assert_eq!(result["metrics"]["accuracy"], 0.0, "{got}");
    for sample in result["samples"].as_array().unwrap() {
        assert_eq!(sample["scores"]["r2e_check"], "I", "{sample}");
        assert_eq!(
            sample["outcome"]["r2e_check"]["outcome"], "fail",
            "{sample}"
        );
        assert_eq!(sample["error"], Value::Null, "{sample}");
    }
    assert!(server.workspaces().is_empty(), "every session was closed");

    // (3) The server stopped: no sample is scored INCORRECT; each is Inspect's sample error,
    // which fails the eval by default and is left out of the metrics when tolerated.
    server.stop();
    let got = eval("stopped");
    assert_eq!(got["default"]["status"], "error", "{got}");
    let tolerant = &got["tolerant"];
    assert_eq!(tolerant["status"], "success", "{got}");
    assert!(
        tolerant["metrics"].get("accuracy").is_none(),
        "no sample scored: {got}"
    );
    let samples = tolerant["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{got}");
    for sample in samples {
        assert_eq!(sample["scores"], json!({}), "{sample}");
        assert!(
            sample["error"]
                .as_str()
                .is_some_and(|e| e.contains("R2ECheckError") && e.contains("could not check")),
            "{sample}"
        );
    }
}
