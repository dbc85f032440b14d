#!/usr/bin/env python3
"""An example agent on `r2e serve`: a model writes the function, reads the failing tests, repairs.

    python3 examples/agent_loop.py --server http://127.0.0.1:8080 \\
        --model-url http://127.0.0.1:8000/v1 --model NAME --instance ID [--repairs 1] [--api completions]
    python3 examples/agent_loop.py --server URL --token-env R2E_TOKEN \\
        --model-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY --all

For each instance: open a session (`R2EEnvBase.reset`, Gymnasium's API without gymnasium), ask the model (an OpenAI-compatible
`/chat/completions`) for the complete function given its spec and its file, write it in place
of the stub (`write_function`), run the tests; while some fail and repairs are left, ask again
in a fresh conversation with the previous code and the failing tests (`format_feedback`); then
submit. One JSON line per instance on stdout: `{"instance", "reward", "passed_all",
"attempts"}` (`attempts`: the model's answers written), with `"error"` when it stopped early.
Progress goes to stderr. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))

from r2e_client import Client, R2EEnvBase, R2EError, extract_code, format_feedback  # noqa: E402

SYSTEM = (
    "You are an expert Python programmer. You implement one function of a repository so that it "
    "meets its specification. Answer with the complete function (its decorators, def line, "
    "docstring and body) in a single ```python code block."
)


def first_prompt(task: dict, with_context: bool) -> str:
    """The first request: the spec, the function's file (the stub in place), the task. `task` is
    the reset's `info` (its `file` is the file's exact text)."""
    parts = [
        f"Implement the function `{task['qualname']}` in the file `{task['path']}`.",
        "",
        "Specification:",
        task.get("spec") or "(none: see the docstring in the file)",
        "",
        f"The file `{task['path']}`, where the function's body is `raise NotImplementedError`:",
        "```python",
        task["file"].rstrip("\n"),
        "```",
    ]
    if with_context and task.get("problem"):
        parts += ["", "The code it depends on:", "```python", task["problem"].rstrip("\n"), "```"]
    parts += [
        "",
        f"Reply with the complete function `{task['qualname'].split('.')[-1]}` in one ```python "
        "block. Do not change its signature.",
    ]
    return "\n".join(parts)


def repair_prompt(task: dict, code: str, feedback: str) -> str:
    """A repair request (a fresh conversation): the spec, the file, the previous code and what
    its failing tests observed."""
    return "\n".join(
        [
            f"Your implementation of `{task['qualname']}` in `{task['path']}` fails some tests.",
            "",
            "Specification:",
            task.get("spec") or "(none: see the docstring in the file)",
            "",
            f"The file `{task['path']}` (the function stubbed):",
            "```python",
            task["file"].rstrip("\n"),
            "```",
            "",
            "Your previous code:",
            "```python",
            code.rstrip("\n"),
            "```",
            "",
            "The failing tests:",
            feedback.rstrip("\n"),
            "",
            "Reply with the corrected complete function in one ```python block.",
        ]
    )


def ask_model(args: argparse.Namespace, prompt: str) -> str:
    """One chat completion: `[system, user]` (the user's content is `messages[1]`), the
    answer's `choices[0].message.content`. With `--api completions` (a base model), one text
    completion of the system text, the request and an opened ```python block, stopped at the
    block's end; the answer is that block."""
    chat = args.api == "chat"
    body = {"model": args.model, "temperature": args.temperature}
    if chat:
        body["messages"] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt},
        ]
    else:
        body["prompt"] = f"{SYSTEM}\n\n{prompt}\n\n```python\n"
        body["stop"] = ["```"]
    if args.max_tokens:
        body["max_tokens"] = args.max_tokens
    headers = {"Content-Type": "application/json"}
    if args.api_key_env:
        headers["Authorization"] = f"Bearer {os.environ[args.api_key_env]}"
    req = urllib.request.Request(
        args.model_url.rstrip("/") + ("/chat/completions" if chat else "/completions"),
        data=json.dumps(body).encode("utf-8"),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=args.model_timeout) as resp:
            answer = json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")[:500]
        raise RuntimeError(f"the model server answered {e.code}: {detail}") from None
    except urllib.error.URLError as e:
        raise RuntimeError(f"the model server could not be reached: {e.reason}") from None
    try:
        if chat:
            return answer["choices"][0]["message"]["content"] or ""
        return "```python\n" + (answer["choices"][0]["text"] or "") + "\n```"
    except (KeyError, IndexError, TypeError):
        raise RuntimeError(f"unexpected model answer: {json.dumps(answer)[:500]}") from None


def failing(result: dict) -> bool:
    """Whether a test run leaves something to repair: a test failed, or nothing ran."""
    return bool(result.get("error")) or result.get("passed", 0) < result.get("total", 0)


def run_instance(env: R2EEnvBase, args: argparse.Namespace, instance: str) -> dict:
    """The loop on one instance; its JSON line (with `error` when it stopped early)."""
    line = {"instance": instance, "reward": 0.0, "passed_all": False, "attempts": 0}
    try:
        _, task = env.reset(options={"instance": instance})
        code = extract_code(ask_model(args, first_prompt(task, args.context)))
        line["attempts"] += 1
        while True:
            written, _, _, truncated, info = env.step({"op": "write_function", "code": code})
            if truncated:
                raise RuntimeError(f"the episode ended: {written['error'] or info.get('limit')}")
            if written["error"]:
                # Nothing usable was written (no such function in the answer, a path refused):
                # the stub stays, and the model is told why.
                result = {"passed": 0, "total": 0, "error": written["error"], "tests": []}
            else:
                tested, _, _, truncated, info = env.step({"op": "test"})
                if truncated:
                    raise RuntimeError(f"the episode ended: {tested['error'] or info.get('limit')}")
                result = info["answer"]
            log(f"{instance}: attempt {line['attempts']}: "
                f"{result.get('passed')}/{result.get('total')} tests passed")
            if not failing(result) or line["attempts"] > args.repairs:
                break
            prompt = repair_prompt(task, code, format_feedback(result))
            code = extract_code(ask_model(args, prompt))
            line["attempts"] += 1
        final, reward, _, truncated, info = env.step({"op": "submit"})
        if truncated:
            raise RuntimeError(f"the submission was not judged: {final['error']}")
        line["reward"] = reward
        line["passed_all"] = bool(info["answer"].get("passed_all"))
    except (R2EError, RuntimeError, ValueError) as e:
        log(f"{instance}: {e}")
        line["error"] = str(e)
    finally:
        try:
            env.close()  # nothing is open after a submit; after an error, nothing is left behind
        except R2EError:
            pass
    return line


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="the r2e server, e.g. http://127.0.0.1:8080")
    p.add_argument("--token-env", help="the variable holding the server's token")
    p.add_argument("--model-url", required=True, help="an OpenAI-compatible base URL ending in /v1")
    p.add_argument("--model", required=True, help="the model's name")
    p.add_argument("--api-key-env", help="the variable holding the model server's API key")
    p.add_argument(
        "--api",
        choices=["chat", "completions"],
        default="chat",
        help="`/chat/completions` (default), or `/completions` for a base model",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--instance", action="append", help="an instance id (repeatable)")
    which.add_argument("--all", action="store_true", help="every instance served")
    p.add_argument("--repairs", type=int, default=1, help="repair rounds after the first answer")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-tokens", type=int, default=0, help="the answer's limit (0: the server's)")
    p.add_argument("--model-timeout", type=float, default=600, help="seconds per model request")
    p.add_argument("--context", action="store_true", help="show the model the instance's context")
    args = p.parse_args(argv)

    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            p.error(f"--token-env {args.token_env}: the variable is not set")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        p.error(f"--api-key-env {args.api_key_env}: the variable is not set")
    client = Client(args.server, token=token, retries_on_429=10)
    # One step per model answer and test run, and the submission.
    env = R2EEnvBase(client, max_steps=2 * (args.repairs + 1) + 1)
    instances = [i["id"] for i in client.instances()] if args.all else args.instance

    errors = 0
    for instance in instances:
        line = run_instance(env, args, instance)
        errors += "error" in line
        print(json.dumps(line), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
