#!/usr/bin/env python3
"""Runs an equivalence test harness, records every test, and measures the function's coverage.

    python r2e_runner.py REQUEST.json OUT.json

REQUEST.json: {"repo_root", "extra_roots" (optional), "module", "qualname", "harness_file", "source_file", "start_line",
"end_line", "candidate_file": null | path, "coverage": bool, "mode": "record" | "candidate" |
null, "order_seed": null | int}. The harness is imported as a module (with coverage.py already
measuring `source_file` when coverage is requested, so that module-level lines count) and its
tests run with a recording `unittest` result, in natural order, or shuffled with `order_seed`.

In "record" mode the process holds the original module only, and each check records the
original's observation; in "candidate" mode the candidate file is imported under the module's
name instead (the original is not in the process), and each check records the candidate's. The
comparison happens outside (r2e's verdict). Without a mode both sides run here ("pair"). OUT.json:

    {"status": "ok" | "error", "error": null | "harness import failed: <Type>: <msg>",
     "tests": [{"name", "outcome": "pass" | "fail" | "error", "message", "returned_normally",
                "records": [<observation snapshot>, ...]}],
     "coverage": {"lines_total", "lines_covered", "branches_total", "branches_covered"} | null,
     "examples": [{"call", "outcome"}, ...], "types": {"args": {param: [type]}, "returns": [type]}}

Coverage counts only the statements and branches of `source_file` within [start_line,
end_line]; branches are counted as coverage.py counts them, one per destination of each line
with more than one exit. `examples` and `types` describe the calls of the reference's `qualname`
(r2e_equiv.recording). The exit code is 0 unless the runner itself crashes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _natural_key(name: str):
    """test_2 before test_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _natural_cmp(a: str, b: str) -> int:
    ka, kb = _natural_key(a), _natural_key(b)
    try:
        return (ka > kb) - (ka < kb)
    except TypeError:
        return (a > b) - (a < b)


class RecordingResult(unittest.TestResult):
    """Records one entry per test: its outcome, a message, and whether the reference returned
    normally in every check the test made (read from r2e_equiv.CALLS)."""

    def __init__(self, equiv):
        super().__init__()
        self.equiv = equiv
        self.records: list[dict] = []
        self._current: dict | None = None

    @staticmethod
    def _name(test) -> str:
        """`Class.test_method`: unique in a harness that holds several test classes (a merged
        one), stable, and free of the harness module's name."""
        method = getattr(test, "_testMethodName", None)
        return f"{type(test).__name__}.{method}" if method else test.id()

    def startTest(self, test):
        super().startTest(test)
        self.equiv.CALLS.clear()
        self.equiv.RECORDS.clear()
        self._current = {
            "name": self._name(test),
            "outcome": "pass",
            "message": None,
            "returned_normally": False,
            "records": [],
        }

    def stopTest(self, test):
        super().stopTest(test)
        if self._current is not None:
            calls = list(self.equiv.CALLS)
            self._current["returned_normally"] = bool(calls) and all(
                c.get("returned_normally") for c in calls
            )
            self._current["records"] = list(self.equiv.RECORDS)
            self.records.append(self._current)
        self._current = None

    def _record(self, test, outcome: str, message: str):
        if self._current is None:
            # An error outside any test (setUpClass, setUpModule): a record of its own.
            self.records.append(
                {
                    "name": self._name(test),
                    "outcome": outcome,
                    "message": message,
                    "returned_normally": False,
                    "records": [],
                }
            )
        elif self._current["outcome"] == "pass":
            self._current["outcome"] = outcome
            self._current["message"] = message

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", _failure_text(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", _error_text(err))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._record(
                test,
                "fail" if failed else "error",
                _failure_text(err) if failed else _error_text(err),
            )

    def addSkip(self, test, reason):
        # Harnesses do not skip; a skipped test validated nothing.
        super().addSkip(test, reason)
        self._record(test, "error", f"skipped: {reason}")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


def _failure_text(err) -> str:
    return str(err[1])


def _error_text(err) -> str:
    """'<Type>: <message>' and where it was raised."""
    exc_type, exc, tb = err
    text = "".join(traceback.format_exception_only(exc_type, exc)).strip()
    frames = traceback.extract_tb(tb)
    if frames:
        last = frames[-1]
        text += f"\n  at {last.filename}:{last.lineno} in {last.name}"
    return text


class Coverage:
    """One coverage.py measurer, prepared once (in a warm worker, before it forks) for a set of
    source files: the object is initialised and every file's static analysis (its statements,
    possible arcs and exit counts) is parsed up front, so that a run only collects arcs."""

    def __init__(self, source_files):
        import coverage

        self.cov = coverage.Coverage(branch=True, include=list(source_files), data_file=None)
        # Starting once does the expensive set-up (sys.path matchers, the tracer); nothing of
        # the sources runs in between.
        self.cov.start()
        self.cov.stop()
        self.reporters = {}
        for path in source_files:
            self.reporter(path)

    def reporter(self, source_file):
        if source_file not in self.reporters:
            try:
                fr = self.cov._get_file_reporter(source_file)
                fr.lines(), fr.arcs(), fr.exit_counts(), fr.excluded_lines(), fr.no_branch_lines()
                self.reporters[source_file] = fr
            except Exception:  # noqa: BLE001 - measured the slow way instead
                self.reporters[source_file] = None
        return self.reporters[source_file]

    def analyze(self, source_file):
        fr = self.reporter(source_file)
        if fr is not None:
            try:
                from coverage.results import analysis_from_file_reporter

                data = self.cov.get_data()
                return analysis_from_file_reporter(data, 2, fr, fr.filename)
            except Exception:  # noqa: BLE001
                pass
        return self.cov._analyze(source_file)


def measure(cov: Coverage, source_file: str, start: int, end: int) -> dict | None:
    """Statement and branch coverage of source_file restricted to [start, end]."""
    try:
        analysis = cov.analyze(source_file)
    except Exception:
        return None

    # The `def` line itself runs when the module is imported, not when the function is called:
    # only the body's statements count.
    def inside(line):
        return start < line <= end

    statements = {line for line in analysis.statements if inside(line)}
    missing = {line for line in analysis.missing if inside(line)}
    branches_total = branches_covered = 0
    partial = []
    if getattr(analysis, "has_arcs", True):
        stats = analysis.branch_stats()  # {line: (exits, exits taken)}, lines with > 1 exit
        for line, (exits, taken) in stats.items():
            if inside(line):
                branches_total += exits
                branches_covered += taken
                if taken < exits and line not in missing:
                    partial.append(line)
    return {
        "lines_total": len(statements),
        "lines_covered": len(statements - missing),
        "branches_total": branches_total,
        "branches_covered": branches_covered,
        # For the improve-coverage prompt: lines no test ran, and branch lines an exit of which
        # no test took.
        "missing_lines": sorted(missing),
        "partial_lines": sorted(partial),
    }


def _flatten(suite) -> list:
    out = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out


def _runs_last(test) -> bool:
    """Whether a test's class asks to run after the others (`r2e_run_last = True`): the
    docstring examples the explorer writes, which may leave state behind (a shared default
    they use) that the calls' tests must not see."""
    return getattr(type(test), "r2e_run_last", False) is True


def _ordered(suite, seed):
    """The tests in natural order, or shuffled by `seed` (a test whose outcome depends on an
    earlier one shows it); either way the tests that run last (`_runs_last`) come after the
    others, in their natural order."""
    import random

    tests = _flatten(suite)
    first = [t for t in tests if not _runs_last(t)]
    last = [t for t in tests if _runs_last(t)]
    if seed:
        random.Random(seed).shuffle(first)
    return unittest.TestSuite(first + last)


def resolve(request: dict, key: str) -> str | None:
    """A path of the request. Relative paths are relative to this script's folder (the scratch
    folder the harness and the candidate are written to)."""
    value = request.get(key)
    return os.path.normpath(os.path.join(HERE, value)) if value else None


# In JSON text as `json.dumps` writes it (ASCII only): an escaped backslash, a UTF-16 pair, or
# a lone surrogate's escape.
_ESCAPES = re.compile(r"(\\\\)|\\u(d[89ab][0-9a-f]{2})(\\ud[c-f][0-9a-f]{2})?|\\u(d[c-f][0-9a-f]{2})", re.I)


def json_text(value, **options) -> str:
    """`json.dumps(value)`, except that a lone surrogate in a string (a str Python holds and
    UTF-8 cannot: code under test may make one) is written as the text of its escape
    (backslash, `u`, four hex digits): r2e reads answers as UTF-8 and would refuse the whole
    answer. A string with a lone surrogate reads as that text on both sides of a comparison."""

    def fix(m):
        if m.group(1) or m.group(3):
            return m.group(0)
        return "\\\\u" + (m.group(2) or m.group(4))

    return _ESCAPES.sub(fix, json.dumps(value, **options))


def empty_result(status: str = "ok", error: str | None = None) -> dict:
    """A result without tests, coverage or recorded calls."""
    return {
        "status": status,
        "error": error,
        "tests": [],
        "coverage": None,
        "examples": [],
        "types": {"args": {}, "returns": []},
    }


def run(request: dict, prepared: Coverage | None = None) -> dict:
    """Runs one harness. `prepared` is a measurer made ahead of time for the request's source file
    (by a warm worker); without it, coverage is set up here when the request asks for it."""
    sys.dont_write_bytecode = True

    def path(key):
        return resolve(request, key)

    repo_root, harness_file = path("repo_root"), path("harness_file")
    source_file, candidate_file = path("source_file"), path("candidate_file")
    sys.path[0:0] = [repo_root, os.path.dirname(harness_file), HERE]
    # The repository's other import roots come last (see r2e_explore.explore).
    for extra in request.get("extra_roots") or []:
        extra = os.path.normpath(os.path.join(HERE, extra))
        if extra not in sys.path:
            sys.path.append(extra)
    os.environ["R2E_MODULE"] = request["module"]
    mode = request.get("mode")
    import r2e_equiv

    r2e_equiv.use_project_layer()

    if mode:
        os.environ["R2E_MODE"] = mode
        os.environ.pop("R2E_CANDIDATE_FILE", None)
        if mode == r2e_equiv.MODE_CANDIDATE:
            r2e_equiv.install_candidate(request["module"], candidate_file)
    elif candidate_file:
        os.environ["R2E_CANDIDATE_FILE"] = candidate_file
    else:
        os.environ.pop("R2E_CANDIDATE_FILE", None)

    result = empty_result()
    cov = None
    if request.get("coverage") and source_file:
        try:
            cov = prepared if prepared is not None else Coverage([source_file])
        except ImportError:
            result.update(status="error", error="coverage is not installed")
            return result
        cov.cov.start()
    saved_stdin = sys.stdin
    try:
        # Output of the code under test goes to stderr; nothing reads stdin. The reference's
        # calls are recorded (examples and types).
        with contextlib.redirect_stdout(sys.stderr), r2e_equiv.recording(
            request.get("qualname", "")
        ) as calls:
            sys.stdin = io.StringIO("")
            try:
                harness = r2e_equiv.load_file_as_module("r2e_harness", harness_file)
            except (KeyboardInterrupt, MemoryError):
                raise
            except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a failure too
                result.update(
                    status="error", error=f"harness import failed: {type(exc).__qualname__}: {exc}"
                )
            else:
                sys.modules["r2e_harness"] = harness
                loader = unittest.TestLoader()
                loader.sortTestMethodsUsing = _natural_cmp
                natural = loader.loadTestsFromModule(harness)
                place = {
                    RecordingResult._name(t): i for i, t in enumerate(_flatten(natural))
                }
                suite = _ordered(natural, request.get("order_seed"))
                recorder = RecordingResult(r2e_equiv)
                suite.run(recorder)
                # Reported in natural order, however they ran.
                result["tests"] = sorted(
                    recorder.records, key=lambda r: place.get(r["name"], len(place))
                )
                result.update(calls.report())
    finally:
        sys.stdin = saved_stdin
        if cov is not None:
            cov.cov.stop()
    if cov is not None and result["status"] == "ok":
        result["coverage"] = measure(
            cov, source_file, int(request["start_line"]), int(request["end_line"])
        )
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: r2e_runner.py REQUEST.json OUT.json", file=sys.stderr)
        return 2
    out_path = os.path.abspath(argv[2])
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    result = run(request)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(json_text(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
