#!/usr/bin/env bash
# Harness validity and coverage of the built-in generator on real PyPI projects, per project.
#
#   bash bench/harnesses.sh [NAME==VERSION ...]
#
# Downloads each project's source release (`pip download --no-binary :all: --no-deps`) into
# $R2E_BENCH_DIR (default /tmp/r2e-bench), builds them all in one pipeline with every default
# setting, and prints one row per project: candidates, valid harnesses, the mean branch coverage
# of the valid harnesses (line coverage for functions without branches, as in R2E's Table 1),
# and instances. The cache under $R2E_BENCH_DIR is kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
projects=("$@")
if [ ${#projects[@]} -eq 0 ]; then
  projects=(toolz==1.0.0 inflection==0.5.1 humanize==4.11.0 requests==2.32.3 click==8.1.7 attrs==24.2.0)
fi
work="${R2E_BENCH_DIR:-/tmp/r2e-bench}"
mkdir -p "$work/src"
cargo build --release --quiet
{
  echo 'version = 1'
  echo '[project]'
  echo 'name = "pypi-bench"'
  echo 'output = "out"'
  echo 'cache = "cache"'
} > "$work/pipeline.toml"
for spec in "${projects[@]}"; do
  name="${spec%%==*}"
  version="${spec##*==}"
  dir=$(find "$work/src" -maxdepth 1 -type d -iname "${name}-${version}" | head -1)
  if [ -z "$dir" ]; then
    python3 -m pip download --quiet --no-binary :all: --no-deps "$spec" -d "$work/src"
    archive=$(find "$work/src" -maxdepth 1 -type f -iname "${name}-${version}.*" | head -1)
    tar -xf "$archive" -C "$work/src"
    dir=$(find "$work/src" -maxdepth 1 -type d -iname "${name}-${version}" | head -1)
  fi
  printf '[[repo]]\npath = "%s"\nname = "%s"\n' "$dir" "$name" >> "$work/pipeline.toml"
done
start=$(date +%s)
./target/release/r2e build "$work/pipeline.toml" --json > "$work/summary.json"
echo "build: $(( $(date +%s) - start )) s" >&2
python3 - "$work/out" <<'PY'
import collections, json, os, sys

out = sys.argv[1]
rows = collections.OrderedDict()
for line in open(os.path.join(out, "harnesses.jsonl")):
    h = json.loads(line)
    repo = h["id"].split(":", 1)[0]
    r = rows.setdefault(repo, {"candidates": 0, "valid": 0, "cov": [], "instances": 0, "classes": collections.Counter()})
    r["candidates"] += 1
    if h["valid"]:
        r["valid"] += 1
        cov = h["branch_coverage"] if h["branch_coverage"] is not None else h["line_coverage"]
        r["cov"].append(cov or 0.0)
    else:
        r["classes"][h["failure_class"]] += 1
for line in open(os.path.join(out, "dataset.jsonl")):
    rows[json.loads(line)["repo"]]["instances"] += 1

def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")

print("| repository | candidates | valid harnesses | coverage of valid | instances | failures |")
print("|---|---|---|---|---|---|")
total = {"candidates": 0, "valid": 0, "cov": [], "instances": 0}
for repo, r in rows.items():
    fails = ", ".join(f"{k} {v}" for k, v in r["classes"].most_common())
    print(f"| {repo} | {r['candidates']} | {r['valid']} ({100 * r['valid'] / r['candidates']:.0f}%) | {mean(r['cov']):.3f} | {r['instances']} | {fails} |")
    for k in ("candidates", "valid", "instances"):
        total[k] += r[k]
    total["cov"] += r["cov"]
print(f"| all | {total['candidates']} | {total['valid']} ({100 * total['valid'] / max(total['candidates'], 1):.0f}%) | {mean(total['cov']):.3f} | {total['instances']} | |")
print(f"| mean of projects | | {mean([100 * r['valid'] / r['candidates'] for r in rows.values()]):.0f}% | {mean([mean(r['cov']) for r in rows.values()]):.3f} | | |")
PY
