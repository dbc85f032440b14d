#!/usr/bin/env bash
# Compile times from a fresh clone, two commits side by side: `cargo build --release` and the
# build of every test executable, each into an empty target folder (the crates' sources come
# from cargo's download cache, as on any machine that built once). Usage:
#   bash bench/compile.sh OLD NEW     (e.g. 428632b HEAD)
# Prints, per commit: the release build's and the tests' build wall time, and how many test
# executables the tests' build linked. ROUNDS=N repeats the pair N times (A B A B ...).
# BUILD=1 also runs each commit's README build (the default pipeline, in its clone, with its
# own cache) and prints its dataset version and counts, to show both build the same dataset.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
old=${1:?usage: compile.sh OLD NEW}
new=${2:?usage: compile.sh OLD NEW}
rounds=${ROUNDS:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The test command of each commit's README (`cargo test --workspace` once the workspace came).
tests_of() {
  if grep -q 'cargo test --workspace' "$1/README.md"; then
    echo "cargo test --workspace --locked --no-run"
  else
    echo "cargo test --locked --no-run"
  fi
}

seconds() { # COMMAND...: wall seconds of the command, its output kept in $work/log
  local start end
  start=$(date +%s.%N)
  "$@" >"$work/log" 2>&1
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.1f}')"
}

for round in $(seq "$rounds"); do
  for rev in "$old" "$new"; do
    dir="$work/$rev-$round"
    git clone --quiet "$repo" "$dir"
    git -C "$dir" checkout --quiet "$rev"
    release=$(cd "$dir" && CARGO_TARGET_DIR="$dir/target" seconds cargo build --release --locked)
    if [ "${BUILD:-0}" = 1 ]; then
      (cd "$dir" && ./target/release/r2e build >/dev/null 2>"$work/build.err")
      echo "round $round $rev: $(grep -E '^ +(counts|version):' "$work/build.err" | tr -s ' ' | tr '\n' ';')"
    fi
    # The tests' build starts from an empty target folder too.
    rm -rf "$dir/target"
    read -r -a test_cmd <<<"$(tests_of "$dir")"
    tests=$(cd "$dir" && CARGO_TARGET_DIR="$dir/target" seconds "${test_cmd[@]}")
    executables=$(grep -c 'Executable' "$work/log" || true)
    echo "round $round $rev: release build ${release} s; tests' build ${tests} s (${test_cmd[*]}); ${executables} test executables"
    rm -rf "$dir"
  done
done
