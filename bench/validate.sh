#!/usr/bin/env bash
# Harness validations per second on the examples: r2e's validate stage (two runs per harness,
# with coverage, in the sandbox, through warm workers) next to the naive way (one fresh
# `python -m unittest` process per harness, same environment, no coverage, no sandbox), in the
# same run. Usage: bash bench/validate.sh   (from the repository root; builds the examples first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
./target/release/r2e build > /dev/null 2>&1   # everything cached but what follows
python3 - <<'PY'
import json, os, shutil, subprocess, sys, tempfile, time

root = os.getcwd()
r2e = os.path.join(root, "target/release/r2e")
import glob
for stale in glob.glob(os.path.join(root, "cache/actions/validate-v*")):
    shutil.rmtree(stale)
os.remove(os.path.join(root, "out/.r2e/state"))  # or the build is a no-op
start = time.perf_counter()
out = subprocess.run([r2e, "build", "--json"], capture_output=True, check=True)
r2e_s = time.perf_counter() - start
summary = json.loads(out.stdout)
validated = summary["stages"]["validate"]["executed"]

envs = {e["repo"]: e["env_key"] for e in map(json.loads, open("out/envs.jsonl"))}
instances = [json.loads(l) for l in open("out/dataset.jsonl")]
work = tempfile.mkdtemp()
shutil.copy(os.path.join(root, "crates/exec/src/py/r2e_equiv.py"), work)
start = time.perf_counter()
passed = 0
for i, inst in enumerate(instances):
    python = os.path.join(root, "cache/envs-v1", envs[inst["repo"]], "venv/bin/python")
    name = f"harness_{i}"
    with open(os.path.join(work, name + ".py"), "w") as f:
        f.write(inst["harness"])
    module = inst["path"][:-3].replace("/", ".").removesuffix(".__init__")
    env = dict(os.environ, PYTHONPATH=f"{os.path.join(root, 'examples', inst['repo'])}:{work}", R2E_MODULE=module)
    r = subprocess.run([python, "-m", "unittest", name], cwd=work, env=env, capture_output=True)
    passed += r.returncode == 0
naive_s = time.perf_counter() - start
shutil.rmtree(work)
r2e_rate = validated / r2e_s
naive_rate = len(instances) / naive_s
print(f"r2e validate: {validated} harnesses in {r2e_s:.1f} s = {r2e_rate:.2f} validations/s (2 runs each, coverage, sandboxed)")
print(f"naive:        {len(instances)} harnesses in {naive_s:.1f} s = {naive_rate:.2f} harnesses/s (1 run each, {passed} passed)")
print(f"ratio: {r2e_rate / naive_rate:.2f}x")
PY
