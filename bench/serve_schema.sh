#!/usr/bin/env bash
# Checks that `r2e serve` answers as its /openapi.json says: a property-based run of
# schemathesis (from PyPI) against the live server on loopback, with every check, the stateful
# phase following the document's links (open a session, then read, write, exec, test, submit
# and close it). Exits with schemathesis's status (0: no response broke the schema).
#
# One check is left out: `ensure_resource_availability` takes a session found missing after it
# was opened as a defect, but `submit` closes its session by design (the API's contract), which
# OpenAPI cannot say (only a DELETE reads as a removal there). One health check of the
# generator is off: most strings it draws for the two path parameters of the file routes are
# not usable in a URL path, and it then stops generating (`filter_too_much`): that is about the
# generator, not about a response.
#
#   bash bench/serve_schema.sh [PIPELINE]      (default: pipeline.toml, already built)
#
# R2E: the r2e binary (default target/release/r2e). ST_VENV: where schemathesis is installed
# (default target/schemathesis). ST_MAX_TIME: seconds for the fuzzing and stateful phases
# (default 120).
set -euo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-pipeline.toml}
r2e=${R2E:-target/release/r2e}
venv=$(realpath -m "${ST_VENV:-target/schemathesis}")
max_time=${ST_MAX_TIME:-120}

if [ ! -x "$venv/bin/schemathesis" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'schemathesis==4.32.5'
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
R2E_SCHEMA_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export R2E_SCHEMA_TOKEN
"$r2e" serve -p "$pipeline" --addr "127.0.0.1:$port" --token-env R2E_SCHEMA_TOKEN \
    --idle-timeout 60 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT

for _ in $(seq 1 100); do
    curl -sf -o /dev/null -H "Authorization: Bearer $R2E_SCHEMA_TOKEN" \
        "http://127.0.0.1:$port/openapi.json" && break
    kill -0 $server 2>/dev/null || { echo "r2e serve stopped" >&2; exit 1; }
    sleep 0.2
done

# From the venv's folder: schemathesis keeps a cache in its working folder.
cd "$venv"
bin/schemathesis --no-color run "http://127.0.0.1:$port/openapi.json" \
    -H "Authorization: Bearer $R2E_SCHEMA_TOKEN" \
    --checks all \
    --exclude-checks ensure_resource_availability \
    --suppress-health-check filter_too_much \
    --max-time "$max_time" \
    --request-timeout 60 \
    --seed 1 \
    --generation-database none
