#!/usr/bin/env python3
"""Incremental rebuilds, measured: what an edit makes r2e run again, and how long it takes.

    python3 bench/incremental.py [--r2e BIN] [--work DIR] [--project SRC]

1. On a copy of this machine's Python standard library (`--until slice`, no environments):
   a cold build, a no-op, a comment-only edit outside any definition (a line appended to
   `textwrap.py`), and a body edit of one helper that changes none of its references (`pass`
   put before its last `return`; the helper is the definition that the most candidates' slices
   hold, among those ending in a `return` line). For each: wall time and the `executed` counts
   of the stages, and for the body edit the number of candidates whose slice holds the helper,
   computed here from `functions.jsonl` and `slices/REPO.jsonl`.
2. With `--project SRC` (an unpacked PyPI source release): the same edits through `validate`
   (environments and harnesses), with the counts of `generate` and `validate` that ran again,
   next to the number of candidates whose code key the body edit changes (the helper itself
   and the candidates whose slice holds it).

The targets (issue 13): the comment edit parses 1 file, extracts at most 1 and slices and
renders no context, in under 1 s; the body edit slices nothing and re-renders the contexts of
exactly the candidates whose slice holds the helper; the no-op stays under 0.3 s. Through
`validate`, the comment edit validates nothing again and the body edit re-validates only the
functions whose code key it changes. This script prints what is, next to those.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))


def build(r2e: str, pipeline: str, until: str | None) -> tuple[float, dict]:
    cmd = [r2e, "build", pipeline, "--json"]
    if until:
        cmd += ["--until", until]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"r2e build exited {done.returncode}")
    return seconds, json.loads(done.stdout)


def executed(summary: dict, stages) -> str:
    table = summary["stages"]
    return ", ".join(f"{s} {table[s]['executed']}" for s in stages)


def read_lines(path: str):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


class Slices:
    """A repository's dependency graph and its candidates, from the build's output."""

    def __init__(self, out: str, repo: str):
        self.nodes = list(read_lines(os.path.join(out, "slices", f"{repo}.jsonl")))
        self.functions = [f for f in read_lines(os.path.join(out, "functions.jsonl")) if f["repo"] == repo]
        self.node_of = {n["name"]: i for i, n in enumerate(self.nodes)}

    def candidates(self):
        return [f for f in self.functions if f["excluded_by"] is None and f.get("slice")]

    def holders(self) -> dict[int, int]:
        """For each node, how many candidates' slices hold it (the candidate itself excluded)."""
        counts: dict[int, int] = {}
        for f in self.candidates():
            start = f["slice"]["node"]
            seen = {start}
            todo = deque([start])
            while todo:
                n = todo.popleft()
                for d in self.nodes[n]["deps"]:
                    if d not in seen:
                        seen.add(d)
                        todo.append(d)
            seen.discard(start)
            for n in seen:
                counts[n] = counts.get(n, 0) + 1
        return counts


def function_path(f) -> str:
    """A `functions.jsonl` row's file: its id is `REPO:path:qualname` (a qualname has no `:`)."""
    return f["id"][len(f["repo"]) + 1:].rsplit(":", 1)[0]


def pick_helper(root: str, slices: Slices):
    """The function most candidates' slices hold whose last line is a `return` at its body's
    indentation: (function record, count)."""
    counts = slices.holders()
    by_id = {f["id"]: f for f in slices.functions}
    ranked = sorted(
        ((counts.get(slices.node_of.get(i, -1), 0), i) for i in by_id), reverse=True
    )
    for count, ident in ranked:
        f = by_id[ident]
        path = os.path.join(root, function_path(f))
        try:
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        first, last = lines[f["start_line"] - 1], lines[f["end_line"] - 1]
        head = len(first) - len(first.lstrip())
        body = len(last) - len(last.lstrip())
        if re.match(r"\s*return\b", last) and body > head and not last.rstrip().endswith(("\\", "(", ",")):
            return f, count
    raise SystemExit("no helper to edit")


def body_edit(root: str, f) -> None:
    path = os.path.join(root, function_path(f))
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    last = lines[f["end_line"] - 1]
    indent = last[: len(last) - len(last.lstrip())]
    lines.insert(f["end_line"] - 1, indent + "pass  # r2e incremental benchmark")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))


def comment_edit(path: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n# r2e incremental benchmark: a comment outside any definition\n")


def pipeline(work: str, root: str, name: str) -> str:
    path = os.path.join(work, "pipeline.toml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            f'version = 1\n[project]\nname = "incremental"\noutput = "out"\ncache = "cache"\n\n'
            f'[[repo]]\npath = "{root}"\nname = "{name}"\n'
        )
    return path


def stdlib_cases(r2e: str, work: str) -> dict:
    src = sysconfig.get_path("stdlib")
    root = os.path.join(work, "std")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    p = pipeline(work, root, "std")
    stages = ("parse", "extract", "slice", "context")
    rows = []
    seconds, s = build(r2e, p, "slice")
    rows.append(("cold", seconds, executed(s, stages), ""))
    seconds, s = build(r2e, p, "slice")
    rows.append(("no-op", seconds, executed(s, stages), ""))
    comment_edit(os.path.join(root, "textwrap.py"))
    seconds, s = build(r2e, p, "slice")
    rows.append(("comment edit (textwrap.py)", seconds, executed(s, stages), ""))
    slices = Slices(os.path.join(work, "out"), "std")
    helper, holders = pick_helper(root, slices)
    body_edit(root, helper)
    seconds, s = build(r2e, p, "slice")
    rows.append(
        (
            f"body edit ({helper['id']})",
            seconds,
            executed(s, stages),
            f"{holders} candidates' slices hold it",
        )
    )
    candidates = len(slices.candidates())
    print(f"\n### Standard library, `--until slice` ({candidates} candidates)\n")
    print("| build | wall (s) | executed | note |\n|---|---|---|---|")
    for name, sec, ex, note in rows:
        print(f"| {name} | {sec:.2f} | {ex} | {note} |")
    return {"candidates": candidates, "rows": rows}


def project_cases(r2e: str, work: str, project: str) -> dict:
    name = os.path.basename(project.rstrip("/")).lower()
    root = os.path.join(work, name)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(project, root, ignore=shutil.ignore_patterns("__pycache__"))
    p = pipeline(work, root, name)
    stages = ("parse", "extract", "slice", "context", "generate", "validate")
    rows = []
    seconds, s = build(r2e, p, "validate")
    rows.append(("cold", seconds, executed(s, stages), ""))
    seconds, s = build(r2e, p, "validate")
    rows.append(("no-op", seconds, executed(s, stages), ""))
    slices = Slices(os.path.join(work, "out"), name)
    first = next(f for f in slices.candidates())
    comment_edit(os.path.join(root, function_path(first)))
    seconds, s = build(r2e, p, "validate")
    rows.append((f"comment edit ({function_path(first)})", seconds, executed(s, stages), ""))
    slices = Slices(os.path.join(work, "out"), name)
    helper, holders = pick_helper(root, slices)
    own = 1 if helper["excluded_by"] is None else 0
    body_edit(root, helper)
    seconds, s = build(r2e, p, "validate")
    rows.append(
        (
            f"body edit ({helper['id']})",
            seconds,
            executed(s, stages),
            f"its code key changes for {holders + own} candidates ({holders} slices hold it"
            + (", and itself)" if own else ")"),
        )
    )
    print(f"\n### {name}, through `validate` ({len(slices.candidates())} candidates)\n")
    print("| build | wall (s) | executed | note |\n|---|---|---|---|")
    for row_name, sec, ex, note in rows:
        print(f"| {row_name} | {sec:.2f} | {ex} | {note} |")
    return {"rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--r2e", default=os.environ.get("R2E_BIN", os.path.join(HERE, "..", "target", "release", "r2e")))
    parser.add_argument("--work", default=os.environ.get("R2E_INCREMENTAL_DIR", "/tmp/r2e-incremental"))
    parser.add_argument("--project", help="an unpacked source release, built through validate")
    parser.add_argument("--skip-stdlib", action="store_true")
    args = parser.parse_args()
    r2e = os.path.abspath(args.r2e)
    if not os.access(r2e, os.X_OK):
        print(f"no r2e binary at {r2e}", file=sys.stderr)
        return 2
    if not args.skip_stdlib:
        stdlib_cases(r2e, os.path.join(args.work, "stdlib"))
    if args.project:
        project_cases(r2e, os.path.join(args.work, "project"), os.path.abspath(args.project))
    return 0


if __name__ == "__main__":
    sys.exit(main())
