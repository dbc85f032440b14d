#!/usr/bin/env python3
"""Many Gymnasium environments of `r2e serve` stepped together in one process, one thread each.

    python3 examples/gym_vector.py --server http://127.0.0.1:8080 --envs 16 \\
        --reference-dir path/to/the/repository [--instance ID] [--seed 0]

Each of the `--envs` environments (`r2e_gym.R2EEnv`, a `gymnasium.Env`) is reset with its own
seed (`--seed` plus its number; the instance is drawn from those served, or is `--instance`),
then all of them step in lockstep, one thread per environment: write the reference (the
instance's file as it is in `--reference-dir`, the repository's folder), test, submit. A
trainer steps its policy's actions the same way; Gymnasium's own vector environments run their
environments one after another or in processes, and an environment here mostly waits on the
server, so threads are what keeps 16 of them busy in one process.

One JSON line per environment on stdout: `{"env", "instance", "reward", "terminated",
"truncated", "outcome"}`, then a summary `{"envs", "mean_reward", "outcomes", "seconds"}`. Exits
1 when an environment's outcome is `error`. Needs gymnasium (`pip install gymnasium`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))

from r2e_client import Client  # noqa: E402
from r2e_gym import R2EEnv  # noqa: E402


def reference_action(reference_dir: str, info: dict) -> dict:
    """The action that writes the instance's file as it is in the repository."""
    with open(os.path.join(reference_dir, info["path"]), encoding="utf-8") as f:
        return {"op": "write", "path": info["path"], "text": f.read()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="the r2e server, e.g. http://127.0.0.1:8080")
    p.add_argument("--token-env", help="the variable holding the server's token")
    p.add_argument("--envs", type=int, default=16, help="how many environments (threads)")
    p.add_argument("--reference-dir", required=True, help="the repository the instances come from")
    p.add_argument("--instance", help="this instance in every environment (else drawn by seed)")
    p.add_argument("--seed", type=int, default=0, help="environment i is reset with seed + i")
    args = p.parse_args(argv)

    token = os.environ.get(args.token_env) if args.token_env else None
    client = Client(args.server, token=token, retries_on_429=10)
    envs = [R2EEnv(client, max_steps=10) for _ in range(args.envs)]
    started = time.monotonic()
    options = {"instance": args.instance} if args.instance else None
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:

        def each(fn, items):
            """`fn(env, item)` for every environment at once (a vector env's batched call)."""
            return list(pool.map(fn, envs, items))

        resets = each(lambda e, i: e.reset(seed=args.seed + i, options=options), range(len(envs)))
        infos = [info for _, info in resets]
        results = [None] * len(envs)
        done = [False] * len(envs)
        # The policy: the reference, then a test, then the submission.
        for step in ("write", "test", "submit"):
            actions = [
                reference_action(args.reference_dir, info) if step == "write" else {"op": step}
                for info in infos
            ]

            def act(env, i):
                if done[i]:
                    return results[i]
                return env.step(actions[i])

            stepped = each(act, range(len(envs)))
            for i, out in enumerate(stepped):
                results[i] = out
                done[i] = done[i] or out[2] or out[3]
        each(lambda e, _: e.close(), range(len(envs)))

    outcomes = {}
    rewards = []
    for i, (obs, reward, terminated, truncated, info) in enumerate(results):
        outcome = info["outcome"]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        rewards.append(reward)
        line = {"env": i, "instance": infos[i]["instance"], "reward": reward,
                "terminated": terminated, "truncated": truncated, "outcome": outcome}
        if obs["error"]:
            line["error"] = obs["error"]
        print(json.dumps(line), flush=True)
    print(json.dumps({"envs": len(envs), "mean_reward": sum(rewards) / len(rewards),
                      "outcomes": outcomes, "seconds": round(time.monotonic() - started, 2)}))
    return 1 if outcomes.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
