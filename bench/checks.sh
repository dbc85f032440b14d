#!/usr/bin/env bash
# Candidate checks per second on the examples, from an empty check cache, two ways side by side
# in one run: batched (one `r2e check --candidates FILE` for all of them: warm workers, the
# candidates of an environment together, what `evaluate` does) and one `r2e check ID --candidate
# FILE` process per candidate (a sample of them, for time). The candidates are each instance's
# original and the original with a local assignment of its own as the first statement of its
# body (after the docstring): a correct candidate whose spliced module differs from the
# original's, so a distinct check. Each side counts, from `r2e check --json`'s `cached`, the
# checks it ran now and those it answered from the cache (or from an identical candidate), and
# the ratio is printed only when both ran every check now, none `error`.
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
import ast, json, os, shutil, subprocess, sys, tempfile, textwrap, time

root = os.getcwd()
r2e = os.environ["R2E"]
sample = int(os.environ["SAMPLE"])
instances = [json.loads(l) for l in open("out/dataset.jsonl")]
funcs = {f["id"]: f for f in map(json.loads, open("out/functions.jsonl"))}


def with_assignment(text):
    """The candidate `text` (one `def`) with `_r2e_bench_variant = 1` as the first statement of
    its body, after its docstring: the same behaviour, another module once spliced."""
    (node,) = ast.parse(text).body
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), text
    body = node.body
    doc = (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    lines = text.splitlines(True)
    if doc and len(body) == 1:
        at, col = body[0].end_lineno, body[0].col_offset
    else:
        first = body[1] if doc else body[0]
        at, col = first.lineno - 1, first.col_offset
    assert at >= node.lineno, f"a body on the line of its `def`:\n{text}"
    variant = "".join(lines[:at] + [" " * col + "_r2e_bench_variant = 1\n"] + lines[at:])
    assert ast.dump(ast.parse(variant)) != ast.dump(ast.parse(text))
    return variant


lines = []
for inst in instances:
    f = funcs[inst["id"]]
    src = open(os.path.join(root, "examples", inst["repo"], inst["path"])).read().splitlines(True)
    start = f["start_line"] - 1
    while start > 0 and src[start - 1].lstrip().startswith("@"):
        start -= 1
    text = textwrap.dedent("".join(src[start:f["end_line"]]))
    lines.append({"id": inst["id"], "candidate": text, "label": "original"})
    lines.append({"id": inst["id"], "candidate": with_assignment(text), "label": "assigned"})
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


def tally(reports):
    """(passed, ran now, from the cache, error, no run) over `r2e check --json` reports."""
    cached = [r.get("cached") for r in reports]
    return (
        sum(1 for r in reports if r.get("passed")),
        cached.count(False),
        cached.count(True),
        sum(1 for r in reports if r.get("outcome") == "error"),
        cached.count(None),
    )


empty_check_cache()
start = time.perf_counter()
out = subprocess.run([r2e, "check", "--candidates", batch, "--json"], capture_output=True)
batched_s = time.perf_counter() - start
reports = [json.loads(l) for l in out.stdout.decode().splitlines() if l.strip()]
if len(reports) != len(lines):
    sys.exit(f"batched: {len(reports)} reports for {len(lines)} candidates: {out.stderr.decode()}")
batched = tally(reports)

empty_check_cache()
one = lines[:sample]
one_reports = []
start = time.perf_counter()
for i, l in enumerate(one):
    path = os.path.join(work, f"c{i}.py")
    with open(path, "w") as f:
        f.write(l["candidate"])
    r = subprocess.run([r2e, "check", l["id"], "--json", "--candidate", path], capture_output=True)
    try:
        one_reports.append(json.loads(r.stdout))
    except ValueError:
        sys.exit(f"per process: no report for {l['id']}: {r.stderr.decode()}")
single_s = time.perf_counter() - start
shutil.rmtree(work)
single = tally(one_reports)
b_rate = len(lines) / batched_s
s_rate = len(one) / single_s
for name, n, secs, rate, (passed, ran, cached, error, none) in [
    ("batched:    ", len(lines), batched_s, b_rate, batched),
    ("per process:", len(one), single_s, s_rate, single),
]:
    print(
        f"{name} {n} checks in {secs:.1f} s = {rate:.2f} checks/s ({passed} passed;"
        f" ran {ran}, from the cache {cached}, error {error}, no run {none})"
    )
refused = [
    name
    for name, n, (_, ran, _, error, _) in [
        ("batched", len(lines), batched),
        ("per process", len(one), single),
    ]
    if ran != n or error
]
if refused:
    sys.exit(f"no ratio: {' and '.join(refused)} did not run every check now without error")
print(f"ratio: {b_rate / s_rate:.1f}x")
PY
