#!/usr/bin/env python3
"""CPython `ast` reference for r2e's function extraction (correctness check and speed baseline).

Scope: module-level defs ("function") and defs directly in a module-level class ("method").

  ast_extract.py ROOT --jsonl OUT.jsonl                  one JSON object per function; summary on stderr
  ast_extract.py ROOT --time                             one JSON timing object on stdout
  ast_extract.py ROOT --compare FUNCTIONS_JSONL [--repo NAME]
                                                         compare with r2e's functions.jsonl; exit 1 on differences
"""
import argparse
import ast
import json
import os
import sys
import time
from collections import Counter

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def python_files(root):
    """Relative '/'-separated paths of regular *.py files under root, in sorted order.

    Like r2e's walker, names starting with '.' below root are skipped (folders and files),
    and symlinks (to folders or files) are not followed."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if name.endswith(".py") and not name.startswith(".") and not os.path.islink(full) and os.path.isfile(full):
                yield os.path.relpath(full, root).replace(os.sep, "/"), full


def functions(tree):
    """(qualname, kind, start_line, end_line, docstring) for every def in R2E's scope."""
    out = []
    for node in tree.body:
        if isinstance(node, DEFS):
            out.append((node.name, "function", node.lineno, node.end_lineno, ast.get_docstring(node)))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, DEFS):
                    out.append((f"{node.name}.{sub.name}", "method", sub.lineno, sub.end_lineno, ast.get_docstring(sub)))
    return out


def extract(root):
    """Returns ({path: [function tuples]} for parsed files, {path: error} for failures, stats dict)."""
    parsed, failed, nbytes = {}, {}, 0
    start = time.perf_counter()
    for rel, full in python_files(root):
        try:
            with open(full, "rb") as f:
                data = f.read()
            nbytes += len(data)
            parsed[rel] = functions(ast.parse(data, filename=rel))
        except Exception as e:  # SyntaxError, ValueError (null bytes), UnicodeDecodeError, OSError, RecursionError...
            failed[rel] = f"{type(e).__name__}: {e}"
    seconds = time.perf_counter() - start
    stats = {
        "files": len(parsed) + len(failed),
        "failed": len(failed),
        "functions": sum(map(len, parsed.values())),
        "bytes": nbytes,
        "seconds": round(seconds, 4),
        "mb_per_s": round(nbytes / 1e6 / seconds, 2) if seconds else None,
    }
    return parsed, failed, stats


FIELDS = ("qualname", "kind", "start_line", "end_line", "docstring")


def function_path(row):
    """A `functions.jsonl` row's file: its id is `REPO:path:qualname` (a qualname has no `:`)."""
    return row["id"][len(row["repo"]) + 1:].rsplit(":", 1)[0]


def compare(parsed, failed, functions_jsonl, repo):
    r2e = {}  # path -> Counter of function tuples
    with open(functions_jsonl, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if repo is None or row.get("repo") == repo:
                r2e.setdefault(function_path(row), Counter())[tuple(row[k] for k in FIELDS)] += 1
    report = {"files_compared": len(parsed), "files_equal": 0, "files_different": 0,
              "functions_cpython": sum(map(len, parsed.values())),
              "functions_r2e": sum(sum(c.values()) for p, c in r2e.items() if p in parsed),
              "cpython_failed_files": sum(1 for p in failed if p in r2e),
              # r2e paths CPython never saw (hidden/symlinked/outside ROOT): a sign of a path mismatch.
              "r2e_files_not_scanned": sum(1 for p in r2e if p not in parsed and p not in failed),
              "differences": []}
    for path, funcs in parsed.items():
        ours, theirs = Counter(funcs), r2e.get(path, Counter())
        if ours == theirs:
            report["files_equal"] += 1
            continue
        report["files_different"] += 1
        if len(report["differences"]) < 30:
            show = lambda c: [list(t) for t in sorted(c.elements(), key=repr)[:5]]
            report["differences"].append({"path": path, "only_cpython": show(ours - theirs),
                                          "only_r2e": show(theirs - ours)})
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--jsonl", metavar="OUT")
    mode.add_argument("--time", action="store_true")
    mode.add_argument("--compare", metavar="FUNCTIONS_JSONL")
    ap.add_argument("--repo", help="with --compare: only use r2e rows of this repo")
    args = ap.parse_args()

    parsed, failed, stats = extract(args.root)
    if args.time:
        print(json.dumps(stats))
    elif args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as out:
            for path, funcs in parsed.items():
                for func in funcs:
                    out.write(json.dumps({"path": path, **dict(zip(FIELDS, func))}, ensure_ascii=False) + "\n")
        print(f"files={stats['files']} failed={stats['failed']} functions={stats['functions']} "
              f"bytes={stats['bytes']} seconds={stats['seconds']} MB/s={stats['mb_per_s']}", file=sys.stderr)
    else:
        report = compare(parsed, failed, args.compare, args.repo)
        print(json.dumps(report, indent=1, ensure_ascii=False))
        sys.exit(1 if report["files_different"] else 0)


if __name__ == "__main__":
    main()
