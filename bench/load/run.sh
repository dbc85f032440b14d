#!/usr/bin/env bash
# Results that do not depend on the machine's load (issues 37, 50): two cold builds of the same
# real projects, one on an idle machine and one with every core kept busy by other processes
# (two spinning `python3` per core, at the same priority, each in a session of its own), each
# from an empty cache, then `r2e dataset diff` between their outputs, which must show nothing,
# and their versions, which must be equal.
#
#   bash bench/load/run.sh [R2E]        (default: /work/main/target/release/r2e)
#
# The projects are PROJECTS below, or R2E_LOAD_PROJECTS (source releases from PyPI, downloaded once into
# $R2E_LOAD_DIR/src; default /tmp/r2e-load). Prints the two builds' times and counts, the
# versions and the diff; exits 1 when the versions differ.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
r2e="${1:-${R2E:-/work/main/target/release/r2e}}"
work="${R2E_LOAD_DIR:-/tmp/r2e-load}"
PROJECTS="${R2E_LOAD_PROJECTS:-toolz==1.0.0 inflection==0.5.1 semver==3.0.2 humanize==4.11.0 jmespath==1.0.1 parse==1.20.2}"
mkdir -p "$work/src"
repos=""
for spec in $PROJECTS; do
  name="${spec%%==*}"; version="${spec##*==}"
  find_dir() { find "$work/src" -maxdepth 1 -type d \( -iname "${name}-${version}" -o -iname "${name//-/_}-${version}" \) | head -1; }
  dir=$(find_dir)
  if [ -z "$dir" ]; then
    python3 -m pip download --quiet --no-binary :all: --no-deps "$spec" -d "$work/src"
    archive=$(find "$work/src" -maxdepth 1 -type f \( -iname "${name}-${version}.*" -o -iname "${name//-/_}-${version}.*" \) | head -1)
    tar -xf "$archive" -C "$work/src"
    dir=$(find_dir)
  fi
  repos+=$(printf '\n[[repo]]\npath = "%s"\nname = "%s"\n' "$dir" "$name")
done
build() { # NAME [busy]
  local d="$work/$1"
  rm -rf "$d"; mkdir -p "$d"
  printf 'version = 1\n[project]\nname = "load-bench"\noutput = "out"\ncache = "cache"\n[env]\nextra_packages = ["pytest==8.3.5"]\n%s\n' "$repos" > "$d/pipeline.toml"
  local hogs=()
  if [ "${2:-}" = busy ]; then
    # Each in a session of its own (as another build is): with the kernel's autogroups, loops
    # sharing this script's session would share one share of the CPUs and hardly slow the
    # sandbox's jobs, each in a session of its own.
    for _ in $(seq "$((2 * $(nproc)))"); do setsid python3 -c 'while True: pass' & hogs+=($!); done
  fi
  local start end
  start=$(date +%s.%N)
  "$r2e" build -p "$d/pipeline.toml" --json > "$d/build.json" 2> "$d/build.log" || echo "build $1 exited $?" >&2
  end=$(date +%s.%N)
  for h in "${hogs[@]}"; do kill "$h"; done
  python3 - "$d/build.json" "$1" "$(echo "$end - $start" | bc)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("counts", s)
print(f"{sys.argv[2]}: {float(sys.argv[3]):.0f} s; candidates {c.get('candidates')}, valid {c.get('harnesses_valid')}, instances {c.get('instances')}; version {s.get('dataset_version')}")
PY
}
echo "r2e: $r2e" >&2
build idle
build busy busy
"$r2e" dataset diff "$work/idle/out" "$work/busy/out" -p "$work/busy/pipeline.toml"
a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$work/idle/out/manifest.json")
b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$work/busy/out/manifest.json")
echo "versions: idle $a, busy $b"
[ "$a" = "$b" ]
