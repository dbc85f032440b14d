#!/usr/bin/env bash
# The bug-fix benchmark (issue 53): the long-tail bench's build (bench/longtail/run.sh, every
# default, from an empty cache) with `[bugfix]` added as a user writes it (`per_function = 3`:
# the aim is 2 tasks per instance, which the default of 2 could only reach if every instance
# gave its full 2), then what the tasks
# are: per repository, per instance, per origin and depth, their FAIL_TO_PASS counts, the share
# of synthetic tasks no project test catches, and the bug-fix stage's time against the build's.
#
#   bash bench/bugfix/run.sh [R2E]
#
# Working data goes to $R2E_BUGFIX_DIR (default /tmp/bugfix-bench); the projects are the
# long-tail bench's unless R2E_LONGTAIL_PROJECTS names another list. Results: stdout (Markdown)
# and $R2E_BUGFIX_DIR/bugfix-results.json (the long-tail summary beside it, results.json).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${R2E_BUGFIX_DIR:-/tmp/bugfix-bench}"
R2E_LONGTAIL_DIR="$work" R2E_LONGTAIL_TOML=$'[bugfix]\nper_function = 3' \
  bash "$here/../longtail/run.sh" "$@"
python3 "$here/summarize.py" --work "$work" --results "$work/bugfix-results.json"
