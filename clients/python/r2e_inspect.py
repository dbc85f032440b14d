"""r2e as an Inspect task (inspect-ai): the instances served by `r2e serve` (or listed in r2e's
`dataset.jsonl`), the model's answer from `generate()`, checked by the server.

    pip install inspect-ai==0.3.285
    r2e serve -p pipeline.toml --addr 127.0.0.1:8080
    inspect eval clients/python/r2e_inspect.py -T server=http://127.0.0.1:8080 --model openai/gpt-4o-mini

One sample per instance: its id is the instance's, its input a system message
(`r2e_client.SOLVE_SYSTEM_PROMPT`) and the prompt (`r2e_client.solve_prompt`: the function's
path and name, its spec, the code around it with the body removed: the instance's `problem`),
its target the instance id, its metadata `instance`, `path`, `qualname`, `repo`, `tests`. The
solver is `generate()` alone. The scorer `r2e_check` judges the answer with
`r2e_client.check_answer`, as the verifiers environment does: it takes the code out of the
answer (`extract_code`), opens an r2e session on the instance, writes the function in place of
the stub (`replace_function`), submits, and scores `CORRECT` when every test passes,
`INCORRECT` when some fail (or the answer holds no function), with the outcome (`outcome`,
`passed`, `total`, the server's `reward`, `session`) as the score's metadata; the metric is
`accuracy` (with `stderr`).

**A check that could not be made is an error, not INCORRECT.** When the server cannot judge (a
submit of outcome `error`), cannot be reached, answers 5xx, 429 after its retries, or refuses the
request (401, 403, 404), the scorer raises `R2ECheckError`. Inspect records an exception of a
scorer as the sample's error, not as a score (`inspect_ai/_eval/task/run.py`: the scorer is
awaited at 3094, inside a `try` whose `except Exception as ex` calls `handle_error(ex)` at
3166-3176; `handle_error` at 2536-2575): the sample has `error` set and no score,
`--retry-on-error N` runs it again, `--fail-on-error` (by default any error) fails the eval, and
with `--no-fail-on-error` the samples that erred are left out of `accuracy`.

**No Inspect sandbox.** Inspect's `docker` sandbox needs Docker Compose v2, which the machines
this was built on lack, and nothing here needs one: the model's code runs in r2e's own sandbox,
behind `r2e serve`. So the task declares none (`Task(sandbox=None)`, Inspect's default,
`inspect_ai/_eval/task/task.py:101`) and nothing of the model's runs beside Inspect (the `local`
sandbox would add nothing).

Task options (`-T NAME=VALUE`): `server` (the server's URL, or several separated by commas;
default `$R2E_SERVER`, else `http://127.0.0.1:8080`), `dataset` (a `dataset.jsonl` to take the
instances from instead of the server's `GET /v1/instances`), `instances` (ids to keep, separated
by commas), `token_env` (the environment variable holding the server's token, default
`R2E_TOKEN`), `timeout` (seconds per request).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import TaskState, generate

try:
    from r2e_client import (
        SOLVE_SYSTEM_PROMPT, Client, check_answer, extract_code, instance_tests, solve_prompt,
    )
except ImportError:  # run by path (`inspect eval clients/python/r2e_inspect.py`)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from r2e_client import (
        SOLVE_SYSTEM_PROMPT, Client, check_answer, extract_code, instance_tests, solve_prompt,
    )

__all__ = [
    "r2e", "r2e_check", "r2e_samples", "R2ECheckError", "SYSTEM_PROMPT", "prompt_of", "check",
]

DEFAULT_SERVER = "http://127.0.0.1:8080"

# The prompt and the check are r2e_client's (one code path, shared with `r2e_verifiers`); this
# module's names for them, in `__all__`, are the same objects.
SYSTEM_PROMPT = SOLVE_SYSTEM_PROMPT
prompt_of = solve_prompt
check = check_answer


class R2ECheckError(RuntimeError):
    """r2e could not check the answer (not the answer's doing): Inspect records it as the
    sample's error. `result` is the check's outcome (`r2e_client.check_answer`), `status` the
    HTTP status (None when no answer came)."""

    def __init__(self, message: str, result: Dict[str, Any]):
        super().__init__(message)
        self.result = result
        self.status = result.get("status")


def _client(server: Any, token_env: str, timeout: float) -> Client:
    return Client(
        server or os.environ.get("R2E_SERVER") or DEFAULT_SERVER,
        token=os.environ.get(token_env) or None,
        timeout=timeout,
        retries_on_429=5,
    )


def r2e_samples(
    server: Any = "", dataset: str = "", instances: Any = "", token_env: str = "R2E_TOKEN"
) -> List[Sample]:
    """The samples: the server's instances, or those of the `dataset.jsonl` file `dataset`;
    only the ids of `instances` (a list, or ids separated by commas) when given. (`-T
    instances=A,B` reaches the task as a list, `-T server=URL,URL` too: `Client` takes both.)"""
    if dataset:
        with open(dataset, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    else:
        rows = _client(server, token_env, 120).instances()
    if isinstance(instances, str):
        instances = instances.split(",")
    keep = {i.strip() for i in instances or [] if i.strip()}
    samples = []
    for row in rows:
        if keep and row["id"] not in keep:
            continue
        samples.append(
            Sample(
                id=row["id"],
                input=[
                    ChatMessageSystem(content=SOLVE_SYSTEM_PROMPT),
                    ChatMessageUser(content=solve_prompt(row)),
                ],
                target=row["id"],
                metadata={
                    "instance": row["id"],
                    "path": row["path"],
                    "qualname": row["qualname"],
                    "repo": row.get("repo"),
                    "tests": instance_tests(row),
                },
            )
        )
    return samples


@scorer(metrics=[accuracy(), stderr()])
def r2e_check(server: Any = "", token_env: str = "R2E_TOKEN", timeout: float = 600) -> Scorer:
    """`CORRECT` when `r2e serve` passes the answer's function on every test, `INCORRECT` when
    not; raises `R2ECheckError` when the check could not be made."""
    import anyio

    client = _client(server, token_env, timeout)

    async def score(state: TaskState, target: Target) -> Score:
        instance = state.metadata.get("instance") or target.text
        tests = state.metadata.get("tests")
        reply = state.output.completion if state.output else ""
        result = await anyio.to_thread.run_sync(check_answer, client, instance, reply, tests)
        if result["outcome"] == "error":
            where = f"HTTP {result['status']}" if result["status"] is not None else "no answer"
            message = f"r2e could not check {instance} ({where}): {result['error']}"
            raise R2ECheckError(message, result)
        return Score(
            value=CORRECT if result["outcome"] == "pass" else INCORRECT,
            answer=extract_code(reply or ""),
            explanation=f"{result['passed']} of {result['total']} tests passed"
            + (f" ({result['error']})" if result["error"] else ""),
            metadata=result,
        )

    return score


@task
def r2e(
    server: Any = "",
    dataset: str = "",
    instances: Any = "",
    token_env: str = "R2E_TOKEN",
    timeout: float = 600,
) -> Task:
    """The r2e benchmark: each instance's function written by the model in one answer, checked
    by `r2e serve` at `server` (see the module's docstring)."""
    return Task(
        dataset=MemoryDataset(r2e_samples(server, dataset, instances, token_env), name="r2e"),
        solver=generate(),
        scorer=r2e_check(server=server, token_env=token_env, timeout=timeout),
        sandbox=None,
    )
