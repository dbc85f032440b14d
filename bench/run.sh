#!/usr/bin/env bash
# Cold throughput of r2e (parse + extract + slice) next to CPython's ast on the same files, the
# no-op rebuild time, and the extraction cross-check. Usage: bash bench/run.sh [ROOT ...]
# (default ROOT: this machine's Python standard library). R2E_BIN=path measures that binary;
# ROUNDS=N adds N paired rounds and their median ratio.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# R2E_BIN picks another binary (to measure two builds on the same machine in one sitting).
if [ -z "${R2E_BIN:-}" ]; then
  cargo build --release --quiet --manifest-path "$here/../Cargo.toml"
fi
r2e="${R2E_BIN:-${CARGO_TARGET_DIR:-$here/../target}/release/r2e}"
roots=("$@")
[ ${#roots[@]} -gt 0 ] || roots=("$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')")

for root in "${roots[@]}"; do
  work=$(mktemp -d)
  printf '[project]\nname = "bench"\n\n[[repo]]\npath = "%s"\nname = "bench"\n' "$root" > "$work/pipeline.toml"
  echo "== $root"
  ast_json=$(python3 "$here/ast_extract.py" "$root" --time)
  bytes=$(echo "$ast_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bytes"])')
  ast_s=$(echo "$ast_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
  # Time each build from one Python process, so no interpreter start-up is counted.
  read -r cold_s noop_s < <(python3 - "$r2e" "$work" <<'PY'
import os, subprocess, sys, time
r2e, work = sys.argv[1], sys.argv[2]
times = []
for name in ("cold", "noop"):
    with open(f"{work}/{name}.json", "wb") as out, open(f"{work}/{name}.err", "wb") as err:
        start = time.perf_counter()
        subprocess.run([r2e, "build", f"{work}/pipeline.toml", "--until", "slice", "--json"], stdout=out, stderr=err, check=True,
                       env={**os.environ, "R2E_LOG": "timings"})
        times.append(time.perf_counter() - start)
print(*times)
PY
)
  python3 - "$bytes" "$ast_s" "$cold_s" "$noop_s" "$work/cold.json" "$work/noop.json" <<'PY'
import json, sys
b, ast_s, cold_s, noop_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cold, noop = json.load(open(sys.argv[5])), json.load(open(sys.argv[6]))
mb = b / 1e6
print(f"files: {cold['counts']['files']}, {mb:.1f} MB; functions {cold['counts'].get('functions')}, candidates {cold['counts'].get('candidates')}")
print(f"CPython ast extractor: {ast_s:.2f} s, {mb/ast_s:.1f} MB/s (one core)")
print(f"r2e cold build:        {cold_s:.2f} s, {mb/cold_s:.1f} MB/s (parse+extract+slice+write, empty cache)")
print(f"ratio (ast time / r2e time): {ast_s/cold_s:.2f}x")
executed = {k: v['executed'] for k, v in noop['stages'].items()}
print(f"no-op rebuild:         {noop_s*1000:.0f} ms, executed {executed}")
PY
  grep timing "$work/cold.err" || true
  # The output's size: the folder (a generation; the symlink resolved) and its largest files.
  gen=$(readlink -f "$work/out")
  echo "output: $(du -sb "$gen" | cut -f1) bytes ($(du -sh "$gen" | cut -f1))"
  (cd "$gen" && find . -type f -printf '%s %P\n' | sort -rn | head -4 | sed 's/^/  /')
  echo "cache: $(du -sh "$work/cache" | cut -f1):" $(cd "$work/cache" && du -sh -- */* 2>/dev/null | awk '{print $2 "=" $1}')
  python3 "$here/ast_extract.py" "$root" --compare "$work/out/functions.jsonl" > "$work/compare.json" || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("differences"); print("cross-check:", json.dumps(d))' "$work/compare.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["differences"][:3]; [print("  differs:", json.dumps(x)[:400]) for x in d]' "$work/compare.json"
  # ROUNDS=N: N more cold builds, each right after a run of CPython's extractor, so that both
  # sides see the same machine; prints each round's ratio and their median (this machine's
  # speed varies from minute to minute, and one ratio can be off by a fourth).
  if [ "${ROUNDS:-1}" -gt 1 ]; then
    ratios=()
    for i in $(seq "$ROUNDS"); do
      a=$(python3 "$here/ast_extract.py" "$root" --time | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
      round=$(mktemp -d)
      cp "$work/pipeline.toml" "$round/"
      r=$(python3 - "$r2e" "$round" <<'PY'
import subprocess, sys, time
r2e, work = sys.argv[1], sys.argv[2]
start = time.perf_counter()
subprocess.run([r2e, "build", f"{work}/pipeline.toml", "--until", "slice", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(time.perf_counter() - start)
PY
)
      rm -rf "$round"
      ratio=$(python3 -c "print(f'{$a / $r:.2f}')")
      ratios+=("$ratio")
      printf 'round %d: CPython ast %.2f s, r2e %.2f s, %sx\n' "$i" "$a" "$r" "$ratio"
    done
    python3 -c 'import statistics,sys; r=sorted(map(float, sys.argv[1:])); print(f"median ratio over {len(r)} rounds: {statistics.median(r):.2f}x (min {r[0]:.2f}x, max {r[-1]:.2f}x)")' "${ratios[@]}"
  fi
  [ -n "${R2E_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
done
