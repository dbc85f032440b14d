#!/usr/bin/env bash
# The bundled examples (examples/: textkit, shapes_ds, unitconv) built with `[bugfix]` and
# exported as Harbor task folders (`r2e export --format harbor`), then every task checked the
# way Harbor runs it (check.py): Harbor's own models (harbor 0.25.0 from the package index)
# load each task.toml and registry.json, and in each task's image `tests/test.sh` writes reward
# 1 after `solution/solve.sh` and 0 after no change.
# Usage: bash bench/harbor/run.sh  (R2E_BIN=path: that r2e, with r2e-verdict beside it;
# R2E_KEEP=1 keeps the work folder; JOBS=N trials at once, default 2).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(readlink -f "$here/../..")"
if [ -z "${R2E_BIN:-}" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
fi
r2e="$(readlink -f "${R2E_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/r2e}")"
work=$(mktemp -d)
[ -n "${R2E_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
{
  printf 'version = 1\n\n[project]\nname = "r2e-examples"\noutput = "out"\ncache = "cache"\n'
  for d in textkit shapes_ds unitconv; do
    printf '\n[[repo]]\npath = "%s"\n' "$root/examples/$d"
  done
  printf '\n[context]\nstrategy = "sliced"\nmax_tokens = 6000\n\n[bugfix]\nper_function = 1\n'
} > "$work/pipeline.toml"
t0=$(date +%s)
"$r2e" build "$work/pipeline.toml" --json > "$work/build.json"
t1=$(date +%s)
"$r2e" export --format harbor -p "$work/pipeline.toml" "$work/export" > /dev/null
t2=$(date +%s)
echo "build $((t1 - t0)) s, export $((t2 - t1)) s"
python3 "$here/check.py" "$work/export" "$work/venv" "${JOBS:-2}"
