#!/usr/bin/env bash
# Determinism of a whole build (issue 55): two cold builds of the long-tail projects by one
# binary, the first on an idle machine, the second with every core kept busy by as many busy
# loops (each in a session of its own, at the build's own priority). Prints both dataset
# versions and, if they differ, the instances and harnesses that differ and in what.
#
#   bash bench/longtail/determinism.sh [R2E]
#
# Working data: $R2E_LONGTAIL_DIR (default /tmp/longtail-determinism)/{idle,busy}, the downloads
# shared in its src/. Each build's own report (bench/longtail/run.sh) goes to its folder's
# report.md; this script prints the comparison.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${R2E_LONGTAIL_DIR:-/tmp/longtail-determinism}"
mkdir -p "$base/src"
for side in idle busy; do
  mkdir -p "$base/$side"
  [ -e "$base/$side/src" ] || ln -s "$base/src" "$base/$side/src"
done

R2E_LONGTAIL_DIR="$base/idle" bash "$here/run.sh" "$@" > /dev/null

loops=()
stop_loops() { [ ${#loops[@]} -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true; }
trap stop_loops EXIT
for _ in $(seq "$(nproc)"); do
  setsid python3 -c 'while True: pass' &
  loops+=($!)
done
R2E_LONGTAIL_DIR="$base/busy" bash "$here/run.sh" "$@" > /dev/null
stop_loops
loops=()

python3 - "$base" <<'EOF'
import json
import os
import sys

base = sys.argv[1]


def load(side, name):
    path = os.path.join(base, side, "out", name)
    with open(path, encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, f)}


versions = {}
for side in ("idle", "busy"):
    with open(os.path.join(base, side, "out", "manifest.json"), encoding="utf-8") as f:
        versions[side] = json.load(f)["version"]
    with open(os.path.join(base, side, "time.txt"), encoding="utf-8") as f:
        print(f"{side}: version {versions[side]} ({f.read().strip()})")
print("same version" if versions["idle"] == versions["busy"] else "VERSIONS DIFFER")
for name in ("dataset.jsonl", "harnesses.jsonl"):
    idle, busy = load("idle", name), load("busy", name)
    diffs = []
    for key in sorted(set(idle) | set(busy)):
        a, b = idle.get(key), busy.get(key)
        if a is None or b is None:
            diffs.append(f"{key}: only in {'busy' if a is None else 'idle'}")
        elif a != b:
            fields = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            diffs.append(f"{key}: {', '.join(fields)}")
    print(f"{name}: {len(idle)} idle, {len(busy)} busy, {len(diffs)} differ")
    for line in diffs:
        print("  " + line)
EOF
