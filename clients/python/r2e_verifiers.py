"""r2e as a Prime Intellect verifiers environment (verifiers 0.4, its `verifiers.v1` API).

Each r2e instance (a function of a repository, stubbed) is a single-turn task: the prompt
(`r2e_client.solve_prompt`, under `SOLVE_SYSTEM_PROMPT`) holds the function's path, name, spec
and the code around it with its body removed (the instance's `problem`); the model answers with
the function. Scoring (`r2e_client.check_answer`, which the Inspect task shares) takes the code
out of the reply (`extract_code`), opens an r2e session on the instance, writes the function in
place of the stub (`replace_function`) and submits it to `r2e serve`: the reward `r2e_pass` is
1.0 for outcome `pass`, 0.0 for `fail` (a reply without the function is a `fail` too).

    pip install verifiers==0.4.0                      # and put this folder on PYTHONPATH
    r2e serve -p pipeline.toml --addr 127.0.0.1:8080
    vf-eval r2e_verifiers --env.taskset.task.server http://127.0.0.1:8080 \\
        -m MODEL --client.base-url https://api.openai.com/v1 --client.api-key-var OPENAI_API_KEY \\
        --no-push -n 10

How verifiers 0.4.0 finds it (0.4 has no `load_environment(**kwargs) -> vf.Environment`, no
`SingleTurnEnv` and no `Rubric`: those were 0.3's API; 0.4 is `verifiers.v1`): a taskset id is an
importable module exporting, through `__all__`, exactly one `Taskset` subclass
(`verifiers/v1/utils/loaders.py:99`, `_plugin_class`; `taskset_class` at 141), and
`vf.load_environment(EnvConfig)` (`loaders.py:184`), which `vf-eval` calls, builds the `Env`
subclass the module exports, else `SingleAgentEnv` (`environment_class`, `loaders.py:168-181`). A
`Harness` subclass exported beside it is the taskset's default harness (`default_harness_id`,
`loaders.py:153-161`). This module exports:

- `R2ETaskset` (the instances, from the server's `GET /v1/instances` or from a `dataset.jsonl`),
  of `R2ETask`s: the reward `r2e_pass` (`@vf.reward`), and `@vf.stop single_turn` as verifiers'
  own single-turn example `reverse_text` has it (stops are asked before each model call,
  `verifiers/v1/session.py:589-607`, so the first call always goes through);
- `SingleTurnHarness`, the default harness: one chat completion, made in-process through the
  rollout's interception endpoint, which `Harness.launch`'s contract allows
  (`verifiers/v1/harness.py:295-316`: "a harness may run its loop in-process instead of
  launching a program, as long as every model call goes through `endpoint` + `secret`"). The
  built-in `null` chat program does the same in a subprocess, after installing uv and its own
  dependencies from the package index (`runtimes/base.py:279-319`); `--env.agent.harness.id null`
  picks it instead;
- `R2ESingleAgentEnv`, the single-agent env with the local `subprocess` runtime as its default
  (the agent runs no code: r2e's own sandbox runs it), where a plain taskset's default is a
  remote Prime sandbox (`configs/agent.py:34`, `runtime: RuntimeConfig = PrimeConfig()`).

Options (`--env.taskset.*`): `task.server` (the server's URL, or several separated by commas;
default `$R2E_SERVER`, else `http://127.0.0.1:8080`), `task.token_var` (the environment
variable holding its token, default `R2E_TOKEN`), `task.timeout` (seconds per request),
`dataset` (a `dataset.jsonl` to take the instances from instead of the server), `instances` (ids
to keep).

**A check that could not be made is an error, not a 0.** When the server cannot judge (a submit
of outcome `error`: the sandbox or a worker failed), cannot be reached, answers 5xx, 429 after
its retries, or refuses the request (401, 403, 404), the reward raises `vf.SandboxError`
(`verifiers/v1/errors.py:64-65`: "A runtime/sandbox operation failed"), its `status_code` the
HTTP status (None when no answer came). That is verifiers' own error path: scoring runs in
`boundary(TaskError, ...)` (`task.py:231`), which lets an already typed `RolloutError` through
unchanged (`errors.py:81-92`); `Rollout.close` catches it (`rollout.py:621-622`) and `Rollout.fail`
(`rollout.py:192-209`) records it with `Trace.record_error` (`trace.py:742-758`): appended to
`trace.errors` (type `SandboxError`, message, `status_code`), `trace.ok = False`; the reward stays
`None`, "scoring didn't run" (`trace.py:407-409`), not 0.0. The episode is then not `ok`
(`env.py:298`), which is what `Env.complete` redoes (`env.py:175-179`: `vf-eval --resume` runs it
again) and what a trainer masks; `--env.agent.retries.rules '[{"type": "SandboxError",
"max_retries": 2}]'` retries it at once (`configs/retries.py:15-28`). (The trace's
`stop_condition` keeps the rollout's own, e.g. `agent_completed`: scoring comes after the stop.)

The outcome goes with every scored trace: `trace.info["r2e"]` (serialized into `traces.jsonl`:
`instance`, `outcome` `pass`/`fail`/`error`, `passed`, `total`, `reward` (the server's: the
fraction of tests passed), `session`, `error`, `status`), the same in `trace.state` (an
`R2EState`, live only: verifiers does not serialize the state, `trace.py:416`) and, when the
check was made, the metrics `r2e_passed` and `r2e_total`.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Dict, Iterable, List, Optional

import verifiers.v1 as vf
from pydantic import Field

from r2e_client import (
    SOLVE_SYSTEM_PROMPT,
    Client,
    check_answer,
    instance_tests,
    solve_prompt,
)

__all__ = [
    "R2EData",
    "R2EState",
    "R2ETaskConfig",
    "R2ETask",
    "R2ETasksetConfig",
    "R2ETaskset",
    "SingleTurnHarness",
    "R2ESingleAgentEnvConfig",
    "R2ESingleAgentEnv",
    "SYSTEM_PROMPT",
    "prompt_of",
    "check",
]

DEFAULT_SERVER = "http://127.0.0.1:8080"

# The prompt and the check are r2e_client's (one code path, shared with `r2e_inspect`); this
# module's names for them, in `__all__`, are the same objects.
SYSTEM_PROMPT = SOLVE_SYSTEM_PROMPT
prompt_of = solve_prompt
check = check_answer


class R2EData(vf.TaskData):
    """One r2e instance: `id` is its id (the answer the reward checks against)."""

    path: str
    qualname: str
    repo: Optional[str] = None
    tests: Optional[int] = None


class R2EState(vf.State):
    """The check's outcome, live (verifiers does not serialize the state: `trace.info["r2e"]`
    holds the same)."""

    outcome: Optional[str] = None
    passed: Optional[int] = None
    total: Optional[int] = None
    reward: Optional[float] = None
    session: Optional[str] = None
    error: Optional[str] = None


class R2ETaskConfig(vf.TaskConfig):
    """What every task needs to be checked: the server (`--env.taskset.task.*`)."""

    server: str = Field(default_factory=lambda: os.environ.get("R2E_SERVER") or DEFAULT_SERVER)
    """`r2e serve`'s URL, or several separated by commas (default `$R2E_SERVER`)."""
    token_var: str = "R2E_TOKEN"
    """The environment variable holding the server's token (`r2e serve --token-env`)."""
    timeout: float = 600.0
    """Seconds to wait for each of the server's answers (a submit runs the tests)."""
    retries_on_429: int = 5
    """How many 429s (server full) to wait out before the check errs."""

    def client(self) -> Client:
        return Client(
            self.server,
            token=os.environ.get(self.token_var) or None,
            timeout=self.timeout,
            retries_on_429=self.retries_on_429,
        )


class R2ETask(vf.Task[R2EData, R2EState, R2ETaskConfig]):
    """An r2e instance: one answer, checked by `r2e serve`."""

    @property
    def key(self) -> str:
        # The instance id is durable across runs; `idx` is not.
        return self.data.id or self.hash

    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def r2e_pass(self, trace: vf.Trace) -> float:
        """1.0 when every test passes, 0.0 when some fail; raises `vf.SandboxError` when the
        check could not be made (see the module's docstring)."""
        client = self.config.client()
        result = await asyncio.to_thread(
            check_answer, client, self.data.id or "", trace.last_reply, self.data.tests
        )
        trace.info["r2e"] = result
        for field in ("outcome", "passed", "total", "reward", "session", "error"):
            if hasattr(trace.state, field):
                setattr(trace.state, field, result[field])
        if result["outcome"] != "error":
            trace.record_metric("r2e_passed", result["passed"] or 0)
            if result["total"] is not None:
                trace.record_metric("r2e_total", result["total"])
        else:
            where = f"HTTP {result['status']}" if result["status"] is not None else "no answer"
            error = vf.SandboxError(
                f"r2e could not check {self.data.id} ({where}): {result['error']}"
            )
            error.status_code = result["status"]  # type: ignore[attr-defined]
            raise error
        return 1.0 if result["outcome"] == "pass" else 0.0


class R2ETasksetConfig(vf.TasksetConfig):
    """`--env.taskset.*`: where the instances come from, which to keep."""

    task: R2ETaskConfig = R2ETaskConfig()
    dataset: Optional[str] = None
    """A `dataset.jsonl` (r2e's output) to take the instances from; default: the server's."""
    instances: List[str] = Field(default_factory=list)
    """The instance ids to keep (default: all)."""


class R2ETaskset(vf.Taskset[R2ETask, R2ETasksetConfig]):
    """The r2e instances served by `r2e serve` (or listed in a `dataset.jsonl`), one task each."""

    def rows(self) -> Iterable[Dict[str, Any]]:
        if self.config.dataset:
            with open(self.config.dataset, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        return self.config.task.client().instances()

    def load(self) -> List[R2ETask]:
        keep = set(self.config.instances)
        tasks = []
        for row in self.rows():
            if keep and row["id"] not in keep:
                continue
            data = R2EData(
                id=row["id"],
                name=row["id"],
                prompt=solve_prompt(row),
                system_prompt=SOLVE_SYSTEM_PROMPT,
                path=row["path"],
                qualname=row["qualname"],
                repo=row.get("repo"),
                tests=instance_tests(row),
            )
            tasks.append(R2ETask(data, self.config.task))
        return tasks


class SingleTurnHarness(vf.Harness[vf.HarnessConfig]):
    """One chat completion, made in-process through the rollout's interception endpoint (so the
    trace records it as any harness's call): the system prompt and the prompt in, the reply is
    the answer. No program, no tools, no code run."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: Dict[str, str],
        data: vf.TaskData,
        tool_interception_url: Optional[str] = None,
    ) -> Any:
        from openai import AsyncOpenAI

        system, prompt = self.resolve_prompt(data)
        messages: List[Dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            from verifiers.v1.dialects.chat import message_to_wire

            messages.extend(message_to_wire(m) for m in prompt or [])
        # A failed call raises: the interception server keeps the provider's error, which the
        # rollout records in place of this one (`verifiers/v1/rollout.py:510-519`).
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class R2ESingleAgentEnvConfig(vf.SingleAgentEnvConfig):
    """The single agent, on the local `subprocess` runtime by default (it runs no code)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class R2ESingleAgentEnv(vf.Env[R2ESingleAgentEnvConfig]):
    """`SingleAgentEnv` with `R2ESingleAgentEnvConfig`: one agent plays each task."""

    async def run(self, task: vf.Task, agents: Any) -> None:
        await agents.agent.run(task)
