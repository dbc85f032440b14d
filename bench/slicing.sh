#!/usr/bin/env bash
# Slicing at scale: generated repositories (bench/gen_repo.py) of 10k, 40k and 200k candidates,
# each built cold with `r2e build --until slice`. Prints, per size: the build's wall time, the
# slice stage's own time (R2E_LOG=timings), the candidates, the total slice size as closure
# entries (the sum of every candidate's `slice.size`), and the time per closure entry, then
# the ratio of the largest size's time per entry to the smallest's (the aim: within 2x).
#
#   bash bench/slicing.sh [R2E] [N ...]     (R2E default: target/release/r2e, built here)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r2e="${1:-}"
if [ -z "$r2e" ]; then
  cargo build --release --quiet --manifest-path "$here/../Cargo.toml"
  r2e="$here/../target/release/r2e"
fi
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 40000 200000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "r2e: $r2e" >&2
for n in "${sizes[@]}"; do
  dir="$work/n$n"
  mkdir -p "$dir"
  python3 "$here/gen_repo.py" "$dir/repo" "$n"
  printf '[project]\nname = "slicing"\n\n[[repo]]\npath = "repo"\nname = "gen"\n' > "$dir/pipeline.toml"
  python3 - "$r2e" "$dir" "$n" <<'PY'
import json, os, re, subprocess, sys, time
r2e, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.perf_counter()
with open(f"{d}/build.json", "wb") as out, open(f"{d}/build.err", "wb") as err:
    subprocess.run([r2e, "build", f"{d}/pipeline.toml", "--until", "slice", "--json"], cwd=d,
                   stdout=out, stderr=err, check=True, env={**os.environ, "R2E_LOG": "timings"})
wall = time.perf_counter() - start
summary = json.load(open(f"{d}/build.json"))
entries = candidates = 0
with open(f"{d}/out/functions.jsonl") as f:
    for line in f:
        row = json.loads(line)
        s = row.get("slice")
        if s is not None:
            candidates += 1
            entries += s["size"]
slice_s = None
for line in open(f"{d}/build.err"):
    m = re.search(r"\bslice\b[^0-9]*([0-9.]+)\s*s", line)
    if "timing" in line and m:
        slice_s = float(m.group(1))
per = wall / entries * 1e9 if entries else float("nan")
row = {"n": n, "candidates": candidates, "closure_entries": entries, "wall_s": round(wall, 2),
       "slice_stage_s": slice_s, "ns_per_entry": round(per, 1)}
print(json.dumps(row))
with open(os.path.join(os.path.dirname(d), "rows.jsonl"), "a") as f:
    f.write(json.dumps(row) + "\n")
PY
  rm -rf "$dir"
done
python3 - "$work/rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| candidates | closure entries | wall s | slice stage s | ns per entry |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['candidates']:,} | {r['closure_entries']:,} | {r['wall_s']} | {r['slice_stage_s']} | {r['ns_per_entry']} |")
if len(rows) > 1:
    print(f"time per entry, largest / smallest: {rows[-1]['ns_per_entry'] / rows[0]['ns_per_entry']:.2f}x (aim: within 2x)")
PY
