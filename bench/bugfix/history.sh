#!/usr/bin/env bash
# The history bench (issue 53): bug-fix tasks from real changes. For each project of
# history-projects.txt, a git repository whose commits are its consecutive source releases
# (PyPI sdists, oldest first, one commit each, a day apart: the maintainers' own changes between
# releases), built by r2e with every default and `[bugfix] sources = ["history"]`, from an empty
# cache. Reports the history tasks per project and 10 of them drawn at random (seeded), each with
# its function, its change (the gold patch) and a failing hidden test, for a reader to judge by
# hand whether it is a real behaviour change.
#
#   bash bench/bugfix/history.sh [R2E]
#
# Working data goes to $R2E_HISTORY_DIR (default /tmp/history-bench): the downloads (kept), the
# repositories, pipeline.toml, the build's cache and output. Results: stdout (Markdown) and
# $R2E_HISTORY_DIR/history-results.json.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r2e="${1:-${R2E:-/work/main/target/release/r2e}}"
work="${R2E_HISTORY_DIR:-/tmp/history-bench}"
[ -x "$r2e" ] || { echo "no r2e binary at $r2e" >&2; exit 2; }
mkdir -p "$work/dl"
rm -rf "$work/repos" "$work/cache" "$work/out"
mkdir -p "$work/repos"
{
  echo 'version = 1'
  echo '[project]'
  echo 'name = "history-bench"'
  echo 'output = "out"'
  echo 'cache = "cache"'
  printf '\n[bugfix]\nsources = ["history"]\nper_function = 2\n'
} > "$work/pipeline.toml"
grep -v '^#' "$here/history-projects.txt" | grep -v '^$' | while read -r name versions; do
  repo="$work/repos/$name"
  git init -q -b main "$repo"
  day=1
  for v in $versions; do
    archive=$(find "$work/dl" -maxdepth 1 -type f \( -iname "${name}-${v}.*" -o -iname "${name//-/_}-${v}.*" \) | head -1)
    if [ -z "$archive" ]; then
      python3 -m pip download --quiet --no-binary :all: --no-deps "$name==$v" -d "$work/dl"
      archive=$(find "$work/dl" -maxdepth 1 -type f \( -iname "${name}-${v}.*" -o -iname "${name//-/_}-${v}.*" \) | head -1)
    fi
    tmp=$(mktemp -d)
    tar --no-same-owner -xf "$archive" -C "$tmp"
    # The release's files replace the previous release's (the history keeps only `.git`).
    find "$repo" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
    cp -R "$tmp"/*/. "$repo/"
    rm -rf "$tmp"
    date=$(printf '2024-01-%02dT12:00:00Z' "$day")
    day=$((day + 1))
    git -C "$repo" add -A
    GIT_AUTHOR_NAME=r GIT_AUTHOR_EMAIL=r@r GIT_COMMITTER_NAME=r GIT_COMMITTER_EMAIL=r@r \
      GIT_AUTHOR_DATE="$date" GIT_COMMITTER_DATE="$date" \
      git -C "$repo" commit -q -m "$name $v"
  done
  printf '\n[[repo]]\npath = "repos/%s"\nname = "%s"\n' "$name" "$name" >> "$work/pipeline.toml"
done
echo "r2e: $r2e" >&2
/usr/bin/time -f '%e s wall, %U s user, %S s system, %M KiB peak' -o "$work/time.txt" \
  "$r2e" build "$work/pipeline.toml" --json > "$work/build.json" || echo "build exited $?" >&2
echo "build: $(cat "$work/time.txt")" >&2
python3 "$here/history_summary.py" --work "$work" --results "$work/history-results.json"
