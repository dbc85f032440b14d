#!/usr/bin/env bash
# Verdict benchmark: harness validity and coverage, originals passing `check`, mutants killed,
# equivalent rewrites rejected, on six PyPI source releases, with every r2e default.
#
#   bash bench/verdicts/run.sh [R2E]        (or R2E=/path/to/r2e bash bench/verdicts/run.sh)
#
# R2E defaults to /work/main/target/release/r2e (it is not built here). Working data goes to
# $R2E_VERDICT_DIR (default /tmp/verdict-bench): the downloads (kept and reused), pipeline.toml,
# the build's cache and output, the candidate files and verdicts, the oracle's venv and copies.
# Results: stdout, $R2E_VERDICT_DIR/results.json and bench/verdicts/results.json.
# Set R2E_VERDICT_ORACLE=0 to skip running the projects' own tests on surviving mutants.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r2e="${1:-${R2E:-/work/main/target/release/r2e}}"
work="${R2E_VERDICT_DIR:-/tmp/verdict-bench}"
[ -x "$r2e" ] || { echo "no r2e binary at $r2e (give its path as the first argument or R2E)" >&2; exit 2; }
r2e="$(cd "$(dirname "$r2e")" && pwd)/$(basename "$r2e")"
projects=(more-itertools==10.5.0 python-slugify==8.0.4 cachetools==5.5.0 tabulate==0.9.0 isodate==0.7.2 pyparsing==3.1.4)
mkdir -p "$work/src"

{
  echo 'version = 1'
  echo '[project]'
  echo 'name = "verdict-bench"'
  echo 'output = "out"'
  echo 'cache = "cache"'
  # Nothing else: the capture's environment brings pytest and each project's declared test
  # dependencies by default (`stages::environment::test_deps`).
} > "$work/pipeline.toml.new"
for spec in "${projects[@]}"; do
  name="${spec%%==*}"
  version="${spec##*==}"
  dir=$(find "$work/src" -maxdepth 1 -type d -iname "${name}-${version}" | head -1)
  if [ -z "$dir" ]; then
    archive=$(find "$work/src" -maxdepth 1 -type f -iname "${name}-${version}.*" | head -1)
    if [ -z "$archive" ]; then
      python3 -m pip download --quiet --no-binary :all: --no-deps "$spec" -d "$work/src"
      archive=$(find "$work/src" -maxdepth 1 -type f \( -iname "${name}-${version}.*" -o -iname "${name//-/_}-${version}.*" \) | head -1)
    fi
    tar -xf "$archive" -C "$work/src"
    dir=$(find "$work/src" -maxdepth 1 -type d \( -iname "${name}-${version}" -o -iname "${name//-/_}-${version}" \) | head -1)
  fi
  printf '\n[[repo]]\npath = "%s"\nname = "%s"\n' "$dir" "$name" >> "$work/pipeline.toml.new"
done
# Stage evaluate with the built-in models: `reference` (the original, must score pass@1 = 1.0)
# and `mutants` (r2e's own mutants as samples). R2E_VERDICT_EVALUATE=0 leaves it out.
if [ "${R2E_VERDICT_EVALUATE:-1}" != 0 ]; then
  printf '\n[evaluate]\nenabled = true\n\n[[evaluate.model]]\nprovider = "builtin"\nmodel = "reference"\n\n[[evaluate.model]]\nprovider = "builtin"\nmodel = "mutants"\n' >> "$work/pipeline.toml.new"
fi
# Rewritten only when it changes, so a rerun is a no-op build.
cmp -s "$work/pipeline.toml.new" "$work/pipeline.toml" 2>/dev/null || mv "$work/pipeline.toml.new" "$work/pipeline.toml"
rm -f "$work/pipeline.toml.new"

commit=$(git -C "$(dirname "$r2e")" rev-parse --short HEAD 2>/dev/null || echo '?')
echo "r2e: $r2e ($commit; binary of $(date -r "$r2e" '+%Y-%m-%d %H:%M'))" >&2
start=$(date +%s)
"$r2e" build "$work/pipeline.toml" --json > "$work/build.json"
echo "build: $(( $(date +%s) - start )) s" >&2
if [ "${R2E_VERDICT_EVALUATE:-1}" != 0 ]; then
  # pass@k of the built-in models and the mean mutation score, per project and pooled.
  "$r2e" report -p "$work/pipeline.toml" > "$work/report-r2e.md"
  echo "r2e report: $work/report-r2e.md" >&2
fi

oracle=()
if [ "${R2E_VERDICT_ORACLE:-1}" != 0 ]; then
  if [ ! -x "$work/oracle-venv/bin/python" ] || ! "$work/oracle-venv/bin/python" -c 'import pytest' 2>/dev/null; then
    python3 -m venv "$work/oracle-venv"
    "$work/oracle-venv/bin/python" -m pip install --quiet pytest
  fi
  oracle=(--oracle-python "$work/oracle-venv/bin/python")
fi

start=$(date +%s)
python3 "$here/verdicts.py" --r2e "$r2e" --pipeline "$work/pipeline.toml" --work "$work" \
  --results "$work/results.json" --results "$here/results.json" --r2e-commit "$commit" "${oracle[@]}" | tee "$work/report.md"
echo "verdicts: $(( $(date +%s) - start )) s" >&2
