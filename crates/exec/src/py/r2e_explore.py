#!/usr/bin/env python3
"""Coverage-guided input explorer: writes an equivalence test harness for one function.

    python r2e_explore.py REQUEST.json OUT.json

REQUEST.json names a function or method of a repository module (see README.md for the full
contract). The explorer imports the module, generates candidate inputs (doctest examples, literal
arguments from the function's call sites, defaults and type annotations, literals of the body and
their neighbours, small common values, then mutations of inputs already kept), runs each on deep
copies under a line tracer and a per-call timer, keeps the inputs that reach new arcs of the
function or produce a new kind of outcome (and behave deterministically), runs mutants of the
function (small mistakes made in its syntax tree) on them and hunts inputs that kill the
survivors, then writes a readable `unittest` module that compares a candidate implementation with
the reference (through r2e_equiv) on inputs chosen to reach the branches and to kill the most
mutants. The search is bounded by a number of executions and deterministic for a given seed;
`time_limit` is only a safety stop.

OUT.json is {"status": "ok", "harness", "tests", "executions", "arcs", "outcomes",
"time_limit_hit", "mutants": {"total", "killed", "survivors", "executions"}} or
{"status": "error", "error"}; the exit code is 0 in both cases.

The explorer itself is the package r2e_explorer/ next to this script (see its modules); this
script keeps the entry point: the hash-seed re-execution, the import paths and the answer file.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# No bytecode is written (the scratch folder stays as it was copied), as for every module
# imported later.
sys.dont_write_bytecode = True


def _load_explorer():
    """Imports the explorer's package (about 0.2 s of compiling: after the hash-seed
    re-execution, so that only one process pays it). It lies next to this script, but under
    `-I` (as the Rust side runs it) the script's folder is not on sys.path: it is put first only
    while the package is imported, so that explore() finds sys.path as the interpreter set it
    up, and the package's own imports are the standard library's, never a repository's module
    of the same name."""
    global ExploreError, Explorer
    sys.path.insert(0, HERE)
    try:
        from r2e_explorer.search import ExploreError, Explorer
    finally:
        del sys.path[0]


def explore(request: dict) -> dict:
    _load_explorer()
    # A relative path in the request is relative to this script's folder.
    repo_root = os.path.join(HERE, request["repo_root"])
    sys.path[0:0] = [repo_root, HERE]
    # The repository's other import roots (its root, `src/`) come last: a module of one root
    # may import the packages of another (an examples/ script importing the project itself).
    for extra in request.get("extra_roots") or []:
        extra = os.path.join(HERE, extra)
        if extra not in sys.path:
            sys.path.append(extra)
    sys.dont_write_bytecode = True
    import r2e_equiv
    import r2e_reexec

    r2e_equiv.use_project_layer()
    # Before the module under test is imported: what it draws, at import or when called, is
    # the same on every run (`r2e_reexec.seed_randomness`).
    r2e_reexec.seed_randomness(int(request.get("seed") or 0))

    try:
        return Explorer(request, r2e_equiv).run()
    except ExploreError as exc:
        return {"status": "error", "error": str(exc)}


def _ensure_hash_seed():
    """Runs this script under PYTHONHASHSEED=0 (`r2e_reexec.py`)."""
    sys.path.insert(0, HERE)
    try:
        import r2e_reexec
    finally:
        del sys.path[0]
    r2e_reexec.ensure_hash_seed("R2E_EXPLORE_REEXECUTED")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: r2e_explore.py REQUEST.json OUT.json", file=sys.stderr)
        return 2
    _ensure_hash_seed()
    out_path = os.path.abspath(argv[2])
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    try:
        result = explore(request)
    except RecursionError as exc:
        result = {"status": "error", "error": f"explorer recursion: {exc}"}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
