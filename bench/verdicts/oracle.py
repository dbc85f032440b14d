"""A second opinion on surviving mutants: the project's own test suite.

A mutant that r2e's harness lets pass but the project's tests fail is certainly not equivalent
(the harness misses it). One that the project's tests pass too is plausibly equivalent, or
untested by both: these are the ones to read by hand.

For each project with survivors: a copy of its source tree, its tests run once on the original
(the tests that fail there are deselected from then on), then per survivor: the mutant's text
replaces the function's lines (re-indented as in the file), the tests run with `-x`, and the
file is restored. Needs a Python with pytest (run.sh makes a venv for it); tests that need
packages the venv lacks are ignored by collection errors, not counted.

The tests are the projects' code, so they run in r2e's sandbox (`r2e sandboxed`: bubblewrap, no
network, nothing of this machine but its system software, the Python's folders and the copy,
which is the only folder they may write and their $HOME), with r2e's fixed environment and
PYTHONPATH only: none of this process's variables reach them.
"""

import os
import re
import shutil
import subprocess
import sys
import time

# Per project (by the sdist's folder name prefix): test paths and extra pytest arguments.
# pyparsing runs its unit tests once (not again under each packrat/left-recursion setting) and
# skips the diagram tests (they need railroad-diagrams and jinja2).
SUITES = {
    "pyparsing": (["tests/test_simple_unit.py", "tests/test_unit.py", "tests/test_examples.py"],
                  ["-k", "not Test04 and not Test06 and not Test08 and not Test09 and not Test10"]),
}


def suite(root):
    name = os.path.basename(os.path.normpath(root))
    for prefix, s in SUITES.items():
        if name.startswith(prefix):
            return s
    for d in ("tests", "test"):
        if os.path.isdir(os.path.join(root, d)):
            return [d], []
    for f in ("test.py", "tests.py"):
        if os.path.isfile(os.path.join(root, f)):
            return [f], []
    return None


def python_folders(python):
    """What the sandbox must show of `python`: its environment and its base installation."""
    out = subprocess.run([python, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
                         stdout=subprocess.PIPE, text=True, check=True, env={"PATH": os.defpath})
    return sorted(set(out.stdout.split()))


def sandboxed(r2e, python, copy, env, args, timeout):
    """`r2e sandboxed`: `python args` in the sandbox, in `copy` (its only writable folder),
    seeing the variables of `env` and none of this process's."""
    cmd = [r2e, "sandboxed", "--workdir", copy, "--timeout", str(timeout)]
    for folder in python_folders(python):
        cmd += ["--read", folder]
    for k, v in env.items():
        cmd += ["--env", f"{k}={v}"]
    cmd += ["--", python, *args]
    # r2e itself reads nothing of this process's environment that the tests could see.
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout + 60, env={"PATH": os.environ.get("PATH", os.defpath)})


def pytest(r2e, python, copy, import_root, paths, extra, deselect, timeout):
    args = ["-m", "pytest", *paths, "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
            "--continue-on-collection-errors", *extra]
    for d in deselect:
        args += ["--deselect", d]
    try:
        p = sandboxed(r2e, python, copy, {"PYTHONPATH": import_root}, args, timeout)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    if p.returncode == 124:
        return "timeout", p.stdout
    return p.returncode, p.stdout


def failing(output):
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$", output, re.M)))


def indent_text(text, indent):
    return "".join((indent + l if l.strip() else "\n") for l in text.splitlines(keepends=True))


def run(r2e, python, roots, originals, survivors, workdir, max_per_project, controls=None, budget=3600, timeout=600):
    """Per survivor record (keyed by id(record)): "killed", "survived", "timeout" (the tests
    ran past the limit: a loop), "no_tests", "baseline_broken", "control_failed" (the
    instance's unparsed original, patched in the same way, already fails the tests: the patch,
    not the mutant, would be judged), or "skipped" (over budget).

    `r2e`: the r2e binary whose sandbox runs the tests. `controls`: per instance id, the control
    text (the original through ast.unparse)."""
    controls = controls or {}
    verdicts = {}
    workdir = os.path.abspath(workdir)
    start = time.time()
    by_repo = {}
    for s in survivors:
        by_repo.setdefault(s["repo"], []).append(s)
    for repo, recs in by_repo.items():
        root = roots[repo]
        found = suite(root)
        if found is None:
            for r in recs:
                verdicts[id(r)] = "no_tests"
            continue
        paths, extra = found
        copy = os.path.join(workdir, repo)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # Baseline: the tests that fail on the original are left out.
        first = originals[recs[0]["id"]]
        import_root = os.path.join(copy, "src") if first.path.startswith("src/") else copy
        t0 = time.time()
        deselect = []
        code, out = None, ""
        for _ in range(5):
            code, out = pytest(r2e, python, copy, import_root, paths, extra, deselect, timeout)
            if code in (0, 5) or code == "timeout":
                break
            new = [f for f in failing(out) if f not in deselect and "::" in f]
            if not new:
                break
            deselect += new
        base_s = time.time() - t0
        print(f"[oracle] {repo}: baseline exit {code} in {base_s:.0f} s, {len(deselect)} failing tests left out", file=sys.stderr, flush=True)
        if code != 0:
            for r in recs:
                verdicts[id(r)] = "baseline_broken"
            continue
        step = max(1, len(recs) // max_per_project)
        chosen = recs[::step][:max_per_project]
        for r in recs:
            verdicts[id(r)] = "skipped"

        def patched_run(o, text):
            path = os.path.join(copy, o.path)
            with open(path, encoding="utf-8") as f:
                original = f.read()
            lines = original.splitlines(keepends=True)
            patched = "".join(lines[: o.first_line - 1]) + indent_text(text, o.indent) + "".join(lines[o.end_line :])
            with open(path, "w", encoding="utf-8") as f:
                f.write(patched)
            try:
                return pytest(r2e, python, copy, import_root, paths, extra, deselect, timeout)[0]
            finally:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(original)

        control_ok = {}
        for r in chosen:
            if time.time() - start > budget:
                break
            o = originals[r["id"]]
            if r["id"] not in control_ok:
                control_ok[r["id"]] = r["id"] not in controls or patched_run(o, controls[r["id"]]) == 0
            if not control_ok[r["id"]]:
                verdicts[id(r)] = "control_failed"
                continue
            code = patched_run(o, r["text"])
            verdicts[id(r)] = "survived" if code == 0 else ("timeout" if code == "timeout" else "killed")
        print(f"[oracle] {repo}: {len(chosen)} survivors run", file=sys.stderr, flush=True)
    return verdicts
