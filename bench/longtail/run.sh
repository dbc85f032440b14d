#!/usr/bin/env bash
# The long-tail benchmark: r2e with every default (built-in explorer, local sandbox, no model) on
# the 30 source releases of projects.txt. Prints, per project and pooled: candidates, valid
# harnesses, instances, the failure classes, and where the time went (env, generate, validate,
# mutate); then instances per machine-hour and seconds per candidate by stage.
#
#   bash bench/longtail/run.sh [R2E]        (or R2E=/path/to/r2e bash bench/longtail/run.sh)
#
# R2E_LONGTAIL_PROJECTS names another list of projects (default: projects.txt beside this
# script); R2E_LONGTAIL_TOML is appended to the pipeline (bench/bugfix/ adds `[bugfix]`).
#
# R2E defaults to /work/main/target/release/r2e (it is not built here). Working data goes to
# $R2E_LONGTAIL_DIR (default /tmp/longtail): the downloads (kept and reused), pipeline.toml,
# the build's cache and output. The build starts from an empty cache unless R2E_LONGTAIL_KEEP=1
# (environments are then reused, as on a second build). Results: stdout (Markdown) and
# $R2E_LONGTAIL_DIR/results.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r2e="${1:-${R2E:-/work/main/target/release/r2e}}"
work="${R2E_LONGTAIL_DIR:-/tmp/longtail}"
[ -x "$r2e" ] || { echo "no r2e binary at $r2e (give its path as the first argument or R2E)" >&2; exit 2; }
r2e="$(cd "$(dirname "$r2e")" && pwd)/$(basename "$r2e")"
mkdir -p "$work/src"

{
  echo 'version = 1'
  echo '[project]'
  echo 'name = "longtail-bench"'
  echo 'output = "out"'
  echo 'cache = "cache"'
  # Nothing else: the bench measures what a user's pipeline gets (the capture's environment
  # brings pytest and each project's declared test dependencies by default).
  [ -z "${R2E_LONGTAIL_TOML:-}" ] || printf '\n%s\n' "$R2E_LONGTAIL_TOML"
} > "$work/pipeline.toml"
grep -v '^#' "${R2E_LONGTAIL_PROJECTS:-$here/projects.txt}" | grep -v '^$' | while read -r spec; do
  name="${spec%%==*}"
  version="${spec##*==}"
  # sdists name their folder with the project's name as given, lower-cased, or with underscores.
  find_dir() { find -H "$work/src" -maxdepth 1 -type d \( -iname "${name}-${version}" -o -iname "${name//-/_}-${version}" \) | head -1; }
  dir=$(find_dir)
  if [ -z "$dir" ]; then
    archive=$(find -H "$work/src" -maxdepth 1 -type f \( -iname "${name}-${version}.*" -o -iname "${name//-/_}-${version}.*" \) | head -1)
    if [ -z "$archive" ]; then
      python3 -m pip download --quiet --no-binary :all: --no-deps "$spec" -d "$work/src"
      archive=$(find -H "$work/src" -maxdepth 1 -type f \( -iname "${name}-${version}.*" -o -iname "${name//-/_}-${version}.*" \) | head -1)
    fi
    tar -xf "$archive" -C "$work/src"
    dir=$(find_dir)
  fi
  printf '\n[[repo]]\npath = "%s"\nname = "%s"\n' "$dir" "$(echo "$name" | tr 'A-Z' 'a-z')" >> "$work/pipeline.toml"
done

[ "${R2E_LONGTAIL_KEEP:-0}" = 1 ] || rm -rf "$work/cache" "$work/out"
commit=$(git -C "$(dirname "$r2e")" rev-parse --short HEAD 2>/dev/null || echo '?')
echo "r2e: $r2e ($commit; binary of $(date -r "$r2e" '+%Y-%m-%d %H:%M'))" >&2
start=$(date +%s.%N)
/usr/bin/time -f '%e s wall, %U s user, %S s system, %M KiB peak' -o "$work/time.txt" \
  "$r2e" build "$work/pipeline.toml" --json > "$work/build.json" || echo "build exited $?" >&2
end=$(date +%s.%N)
echo "build: $(cat "$work/time.txt")" >&2
python3 "$here/summarize.py" --work "$work" --wall "$(echo "$end - $start" | bc)" \
  --cores "$(nproc)" --r2e-commit "$commit" --results "$work/results.json" | tee "$work/report.md"
