#!/usr/bin/env bash
# Candidate checks per second on the examples, from an empty check cache, two ways side by side
# in one run: batched (one `r2e check --candidates FILE` for all of them: warm workers, the
# candidates of an environment together, what `evaluate` does) and one `r2e check ID --candidate
# FILE` process per candidate (a sample of them, for time). The candidates are each instance's
# original and the original with a comment added (a distinct module text: a distinct check).
# Usage: bash bench/checks.sh [PER_PROCESS_SAMPLE]   (aim: >= 20x). It builds the default
# pipeline in the repository root, or the pipeline.toml in $R2E_BENCH_DIR (a copy of the
# repository's pipeline.toml and examples/, say). The binary is $R2E_BIN when set (another
# build's, to compare), otherwise this repository's release build (under $CARGO_TARGET_DIR when
# set).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${R2E_BIN:-}" ]; then
    R2E="$R2E_BIN"
else
    cargo build --release --quiet
    R2E="${CARGO_TARGET_DIR:-$PWD/target}/release/r2e"
fi
cd "${R2E_BENCH_DIR:-.}"
"$R2E" build > /dev/null 2>&1
R2E="$R2E" SAMPLE="${1:-30}" python3 - <<'PY'
import json, os, shutil, subprocess, tempfile, textwrap, time

root = os.getcwd()
r2e = os.environ["R2E"]
sample = int(os.environ["SAMPLE"])
instances = [json.loads(l) for l in open("out/dataset.jsonl")]
funcs = {f["id"]: f for f in map(json.loads, open("out/functions.jsonl"))}
lines = []
for inst in instances:
    f = funcs[inst["id"]]
    src = open(os.path.join(root, "examples", inst["repo"], inst["path"])).read().splitlines(True)
    start = f["start_line"] - 1
    while start > 0 and src[start - 1].lstrip().startswith("@"):
        start -= 1
    text = textwrap.dedent("".join(src[start:f["end_line"]]))
    lines.append({"id": inst["id"], "candidate": text, "label": "original"})
    lines.append({"id": inst["id"], "candidate": "# a comment\n" + text, "label": "commented"})
work = tempfile.mkdtemp()
batch = os.path.join(work, "candidates.jsonl")
with open(batch, "w") as f:
    for l in lines:
        f.write(json.dumps(l) + "\n")

def empty_check_cache():
    # Every version of the check bucket (`check-v<N>`, docs/caching.md): a bucket left behind
    # by a version bump would let both ways answer from the cache.
    actions = os.path.join(root, "cache/actions")
    for name in os.listdir(actions):
        if name.startswith("check-v"):
            shutil.rmtree(os.path.join(actions, name))

empty_check_cache()
start = time.perf_counter()
out = subprocess.run([r2e, "check", "--candidates", batch, "--json"], capture_output=True)
batched_s = time.perf_counter() - start
reports = [json.loads(l) for l in out.stdout.decode().splitlines() if l.strip()]
passed = sum(1 for r in reports if r.get("passed"))

empty_check_cache()
one = lines[:sample]
start = time.perf_counter()
one_passed = 0
for i, l in enumerate(one):
    path = os.path.join(work, f"c{i}.py")
    with open(path, "w") as f:
        f.write(l["candidate"])
    r = subprocess.run([r2e, "check", l["id"], "--candidate", path], capture_output=True)
    one_passed += r.returncode == 0
single_s = time.perf_counter() - start
shutil.rmtree(work)
b_rate = len(lines) / batched_s
s_rate = len(one) / single_s
print(f"batched:     {len(lines)} checks in {batched_s:.1f} s = {b_rate:.2f} checks/s ({passed} passed)")
print(f"per process: {len(one)} checks in {single_s:.1f} s = {s_rate:.2f} checks/s ({one_passed} passed)")
print(f"ratio: {b_rate / s_rate:.1f}x")
PY
