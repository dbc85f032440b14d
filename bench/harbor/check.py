"""Checks every task of a Harbor export (bench/harbor/run.sh): Harbor's own models load it, and
in its image (`environment/`, built) `tests/test.sh` writes reward 1 after `solution/solve.sh`
and 0 after no change, as Harbor runs a trial: the agent's step, then `tests/` copied to
`/tests` and `test.sh` run as root. Usage: check.py EXPORT VENV JOBS. Prints each failure and a
summary; exits 1 if any task fails."""

import concurrent.futures
import json
import os
import subprocess
import sys
import time
import uuid

export, venv, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])

# Harbor's models: harbor 0.25.0's wheel and what they import (as tests/it/docker/harbor.rs pins
# them); Harbor asks Python 3.12 for `typing.override` alone, given here on an older Python.
DEPS = ["pydantic==2.14.4", "pydantic_core==2.50.5", "annotated-types==0.8.0",
        "typing-inspection==0.4.5", "typing_extensions==4.16.0", "toml==0.10.2",
        "pathspec==1.1.1", "shortuuid==1.0.13"]
if not os.path.exists(f"{venv}/bin/python"):
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    wheels = f"{venv}/wheels"
    pip = [f"{venv}/bin/python", "-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels]
    subprocess.run([*pip, *DEPS], check=True)
    subprocess.run([*pip, "--only-binary=:all:", "--python-version", "3.12", "harbor==0.25.0"],
                   check=True)
    subprocess.run([f"{venv}/bin/python", "-m", "pip", "install", "--quiet", "--no-index",
                    "--no-deps", "--ignore-requires-python",
                    *[os.path.join(wheels, w) for w in os.listdir(wheels)]], check=True)
LOAD = r"""
import sys, typing
typing.override = getattr(typing, "override", lambda f: f)
from pathlib import Path
from harbor.models.task.task import Task
from harbor.models.registry import Registry
root = Path(sys.argv[1])
registry = Registry.from_path(root / "registry.json")
for spec in registry.datasets[0].tasks:
    task = Task(root / spec.path)
    assert task.config.task.name == spec.name, (task.config.task.name, spec.name)
    assert task.config.environment.network_mode.value == "no-network"
    print(spec.path)
"""
loaded = subprocess.run([f"{venv}/bin/python", "-c", LOAD, export], capture_output=True, text=True)
if loaded.returncode != 0:
    sys.exit(f"Harbor's models refused the export:\n{loaded.stderr}")
tasks = loaded.stdout.split()
print(f"Harbor's models loaded {len(tasks)} tasks and registry.json")


def sh(*args, check=True):
    p = subprocess.run(args, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{args}: {p.stderr}")
    return p


def trial(image, folder, oracle):
    c = sh("docker", "run", "-d", "--network", "none", image, "sleep", "infinity").stdout.strip()
    try:
        if oracle:
            sh("docker", "cp", f"{folder}/solution/.", f"{c}:/solution")
            sh("docker", "exec", c, "bash", "/solution/solve.sh")
        sh("docker", "exec", c, "mkdir", "-p", "/tests")
        sh("docker", "cp", f"{folder}/tests/.", f"{c}:/tests")
        sh("docker", "exec", c, "bash", "-c", "chmod +x /tests/test.sh && /tests/test.sh", check=False)
        r = sh("docker", "exec", c, "cat", "/logs/verifier/reward.txt", check=False)
        return r.stdout.strip() if r.returncode == 0 else None
    finally:
        sh("docker", "rm", "-f", c, check=False)


def check(task):
    folder = os.path.join(export, task)
    image = f"r2e-harbor-bench:{uuid.uuid4().hex[:12]}"
    sh("docker", "build", "-q", "-t", image, f"{folder}/environment")
    try:
        return task, trial(image, folder, True), trial(image, folder, False)
    finally:
        sh("docker", "rmi", "-f", image, check=False)


started = time.time()
bad = []
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    for task, solved, unchanged in pool.map(check, tasks):
        if (solved, unchanged) != ("1", "0"):
            bad.append(f"{task}: solve.sh -> {solved}, no change -> {unchanged}")
kinds = {"implementation": 0, "bugfix": 0}
for t in tasks:
    kinds["bugfix" if "-bug-" in t else "implementation"] += 1
print(f"{len(tasks)} tasks ({kinds['implementation']} implementation, {kinds['bugfix']} bug-fix) "
      f"in {time.time() - started:.0f} s: {len(tasks) - len(bad)} scored 1 after solve.sh and 0 "
      f"after no change, {len(bad)} not")
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
