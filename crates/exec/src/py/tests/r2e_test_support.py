"""Shared fixtures for the tests of r2e's Python helpers: a small sample package written to a
temporary folder, and helpers that run the explorer and the runner as the Rust side does (as
scripts, in subprocesses, with JSON files)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPLORE = os.path.join(PY_DIR, "r2e_explore.py")
RUNNER = os.path.join(PY_DIR, "r2e_runner.py")
BATCH = os.path.join(PY_DIR, "r2e_batch.py")

if PY_DIR not in sys.path:
    sys.path.insert(0, PY_DIR)

UTIL_SOURCE = textwrap.dedent("""
    def clamp(x, lo, hi):
        return max(lo, min(hi, x))
    """)

CORE_SOURCE = textwrap.dedent('''
    """A sample module for the explorer and runner tests."""

    import datetime as dt
    import math

    from .util import clamp


    def classify(n):
        """Classify an integer.

        >>> classify(5)
        'small'
        """
        if n < 0:
            raise ValueError("negative: %d" % n)
        elif n == 0:
            return "zero"
        elif n < 10:
            return "small"
        else:
            return "large"


    def total(values):
        s = 0
        for v in values:
            if v > 0:
                s += clamp(v, 0, 100)
        return s


    def shout(text):
        return text.upper() + "!"


    def spin(n):
        while n != 0:
            n -= 2
        return "done"


    def flat(x):
        y = x * 2
        return y + 1


    class Buffer:
        def __init__(self, capacity):
            if capacity <= 0:
                raise ValueError("capacity must be positive")
            self.capacity = capacity
            self.items = []

        def fill(self, values):
            for v in values:
                if len(self.items) >= self.capacity:
                    return False
                self.items.append(v)
            return True


    class Interval:
        def __init__(self, lo: int, hi: int):
            if lo > hi:
                raise ValueError("empty interval")
            self.lo = lo
            self.hi = hi

        def overlaps(self, other: "Interval") -> bool:
            if not isinstance(other, Interval):
                raise TypeError("not an interval")
            return self.lo <= other.hi and other.lo <= self.hi


    class Broken:
        def __init__(self, x):
            raise RuntimeError("never")

        def method(self):
            return 1


    def first_of(words):
        # Depends on the iteration order of a set of strings, i.e. on the hash seed.
        for w in set(words):
            if w.startswith("a"):
                return "a-first"
            return "other-first"
        return "empty"


    def make_scaler(factor: int):
        def scale(x):
            if x is None:
                return 0
            return x * factor
        return scale


    def season(day: dt.date) -> str:
        if day.month in (12, 1, 2):
            return "winter"
        return "not winter"


    def finite(x: float) -> str:
        if math.isinf(x):
            return "infinite"
        return "finite"


    def label(text: str) -> str:
        if not isinstance(text, str):
            return "not text"
        return text.strip()


    class Span:
        def __init__(self, interval: Interval, name: str):
            self.interval = interval
            self.name = name

        def width(self):
            if self.interval.hi == self.interval.lo:
                return 0
            return self.interval.hi - self.interval.lo


    class Labelled:
        def __init__(self, span: Span):
            self.span = span

        def describe(self):
            if self.span.width() > 0:
                return self.span.name + " (wide)"
            return self.span.name


    def depth(items):
        if not isinstance(items, list):
            return 0
        return 1 + max([depth(x) for x in items], default=0)


    def scaled(x, factor=None):
        # Leaving `factor` out is deprecated: it warns, then scales by 2.
        import warnings

        if factor is None:
            warnings.warn("factor will be required", DeprecationWarning, stacklevel=2)
            factor = 2
        return x * factor


    class Counted:
        # A parser that hands the words of a text to its action.
        def __init__(self, action):
            self.action = action

        def parse(self, text):
            return self.action(text.split())


    def counted(item):
        # A parser of a count, then that many items: its behaviour is its action's, seen only
        # by parsing with it.
        def action(words):
            return [item] * int(words[0])

        return Counted(action)


    def roll(sides):
        # Draws: a throw of a die with `sides` sides, 0 for none, "top" for its highest face.
        import random

        if sides < 1:
            return 0
        face = random.randint(1, sides)
        if face == sides:
            return "top"
        return face
    ''')


class SampleRepo:
    """A temporary repository holding `samplepkg` (core.py, util.py)."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="r2e-py-test-")
        self.root = self._tmp.name
        self.repo = os.path.join(self.root, "repo")
        pkg = os.path.join(self.repo, "samplepkg")
        os.makedirs(pkg)
        self.write(os.path.join(pkg, "__init__.py"), "")
        self.write(os.path.join(pkg, "util.py"), UTIL_SOURCE)
        self.core = os.path.join(pkg, "core.py")
        self.write(self.core, CORE_SOURCE)

    @staticmethod
    def write(path: str, text: str):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def cleanup(self):
        self._tmp.cleanup()

    def function_range(self, qualname: str) -> tuple[int, int]:
        """(def line, last line) of a function or method of core.py."""
        tree = ast.parse(CORE_SOURCE)
        scope = tree.body
        parts = qualname.split(".")
        for part in parts[:-1]:
            scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == part).body
        node = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == parts[-1])
        return node.lineno, node.end_lineno

    # -- running the scripts ------------------------------------------------------------------

    def scratch(self, name: str) -> str:
        """A folder holding copies of the scripts, the snapshot module and the explorer's
        package, like the Rust side's scratch folders."""
        folder = self.path(name)
        os.makedirs(folder, exist_ok=True)
        for script in ("r2e_equiv.py", "r2e_explore.py", "r2e_limit.py", "r2e_reexec.py", "r2e_runner.py", "r2e_snapshot.py"):
            shutil.copy(os.path.join(PY_DIR, script), folder)
        package = os.path.join(folder, "r2e_explorer")
        os.makedirs(package, exist_ok=True)
        for module in os.listdir(os.path.join(PY_DIR, "r2e_explorer")):
            if module.endswith(".py"):
                shutil.copy(os.path.join(PY_DIR, "r2e_explorer", module), package)
        return folder

    def _run_script(
        self, script: str, request: dict, name: str, timeout: float, python_args=(), env=None
    ) -> dict:
        req_path = self.path(name + ".request.json")
        out_path = self.path(name + ".out.json")
        with open(req_path, "w", encoding="utf-8") as f:
            json.dump(request, f)
        if os.path.exists(out_path):
            os.remove(out_path)
        env = dict(os.environ if env is None else env, PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run(
            [sys.executable, *python_args, script, req_path, out_path],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.root,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"{os.path.basename(script)} exited {proc.returncode}:\n{proc.stderr}"
            )
        with open(out_path, encoding="utf-8") as f:
            return json.load(f)

    def explore(
        self,
        qualname: str,
        kind: str = "function",
        name: str = "explore",
        timeout: float = 120,
        script: str | None = None,
        python_args=(),
        env=None,
        **overrides,
    ) -> dict:
        request = {
            "repo_root": self.repo,
            "module": "samplepkg.core",
            "qualname": qualname,
            "kind": kind,
            "call_sites": [],
            "budget": 400,
            "seed": 0,
            "max_tests": 12,
            "per_call_timeout": 1.0,
            "time_limit": 60,
        }
        request.update(overrides)
        return self._run_script(
            script or EXPLORE, request, name, timeout, python_args=python_args, env=env
        )

    def runner_request(
        self,
        harness_source: str,
        qualname: str,
        candidate_source: str | None = None,
        coverage: bool = True,
        name: str = "run",
        **overrides,
    ) -> dict:
        harness_file = self.path(name + "_harness.py")
        self.write(harness_file, harness_source)
        candidate_file = None
        if candidate_source is not None:
            candidate_file = self.path(name + "_candidate.py")
            self.write(candidate_file, candidate_source)
        start, end = self.function_range(qualname)
        request = {
            "repo_root": self.repo,
            "module": "samplepkg.core",
            "qualname": qualname,
            "harness_file": harness_file,
            "source_file": self.core,
            "start_line": start,
            "end_line": end,
            "candidate_file": candidate_file,
            "coverage": coverage,
        }
        request.update(overrides)
        return request

    def run_harness(self, harness_source: str, qualname: str, name: str = "run", **kwargs) -> dict:
        request = self.runner_request(harness_source, qualname, name=name, **kwargs)
        return self._run_script(RUNNER, request, name, 120)

    def run_batch(self, requests: list[dict], runs: int = 2, name: str = "batch") -> list[list[dict]]:
        """Runs runner requests through the warm worker; one list of runs per request."""
        out = self._run_script(BATCH, {"jobs": requests, "runs": runs, "timeout": 60}, name, 120)
        return out["results"]


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


class TempModules:
    """Modules written to a temporary folder and imported by name (the folder is first on
    sys.path until `cleanup`, which also forgets the modules): real files, so that inspect and
    the tracer find their source."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="r2e-py-mod-")
        self.root = self._tmp.name
        self.names: list[str] = []
        sys.path.insert(0, self.root)

    def add(self, name: str, source: str):
        """Writes `name.py` (dedented) and imports it."""
        import importlib

        path = os.path.join(self.root, name + ".py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(source))
        importlib.invalidate_caches()
        self.names.append(name)
        return importlib.import_module(name)

    def cleanup(self):
        for name in self.names:
            sys.modules.pop(name, None)
        if self.root in sys.path:
            sys.path.remove(self.root)
        self._tmp.cleanup()
