#!/usr/bin/env python3
"""Coverage-guided input explorer: writes an equivalence test harness for one function.

    python r2e_explore.py REQUEST.json OUT.json

REQUEST.json names a function or method of a repository module (see README.md for the full
contract). The explorer imports the module, generates candidate inputs (doctest examples, literal
arguments from the function's call sites, defaults and type annotations, literals of the body and
their neighbours, small common values, then mutations of inputs already kept), runs each on deep
copies under a line tracer and a per-call timer, keeps the inputs that reach new arcs of the
function or produce a new kind of outcome (and behave deterministically), and writes a readable
`unittest` module that compares a candidate implementation with the reference on those inputs
(through r2e_equiv). The search is bounded by a number of executions and deterministic for a
given seed; `time_limit` is only a safety stop.

OUT.json is {"status": "ok", "harness", "tests", "executions", "arcs", "outcomes",
"time_limit_hit"} or {"status": "error", "error"}; the exit code is 0 in both cases.
"""

from __future__ import annotations

import ast
import collections.abc
import contextlib
import enum
import importlib
import inspect
import io
import itertools
import json
import keyword
import math
import os
import random
import re
import signal
import sys
import textwrap
import time
import tokenize
import types
import typing

HERE = os.path.dirname(os.path.abspath(__file__))

# How many constructions of a method's class are kept to explore the method on.
MAX_CONSTRUCTIONS = 6
# Values per parameter pool, and elements drawn from pools to build containers.
POOL_MAX = 48
# Consecutive already-tried inputs after which the mutation phase gives up (space exhausted).
MAX_DUPLICATE_STREAK = 2000
# Inputs that were executed but not kept, remembered to fill the harness up at the end.
MAX_TRIED_LOG = 500

COMMON_VALUES = [
    0, 1, -1, 2, 10, 0.5, -2.5, "", "a", "hello world", "Hello, World!",
    [], [1, 2, 3], [3, 1, 2], {}, {"a": 1}, None, True, False, (1, 2),
]  # fmt: skip

COMMON_ATOMS = {
    int: [0, 1, -1, 2, 10, 100, -7],
    float: [0.0, 0.5, -2.5, 1.0, 3.25, 100.0, -1.0, math.inf, -math.inf, math.nan],
    str: ["", "a", "hello world", "Hello, World!", "abc", "  padded  ", "A1 b2-c3"],
    bytes: [b"", b"a", b"hello world"],
    bool: [True, False],
    complex: [0j, (1 + 2j)],
}

MUTATION_CHARS = " a1,.-_A#/:\n"
MAX_MUTATED_INT = 10**6

STR_METHODS = {
    "capitalize", "casefold", "center", "encode", "endswith", "expandtabs", "find", "format",
    "isalnum", "isalpha", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
    "isspace", "istitle", "isupper", "ljust", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "rfind", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill",
}  # fmt: skip
DICT_METHODS = {"items", "keys", "values", "get", "setdefault", "update", "popitem"}
LIST_METHODS = {"append", "extend", "insert", "sort", "remove", "reverse"}
SEQUENCE_FUNCTIONS = {
    "len",
    "sorted",
    "sum",
    "min",
    "max",
    "enumerate",
    "reversed",
    "zip",
    "any",
    "all",
}


# --------------------------------------------------------------------------------------------
# Input values ("specs") and how they are written in a harness
# --------------------------------------------------------------------------------------------
#
# A spec is plain data: None, bool, int, float, complex, str, bytes, and list/tuple/dict/set of
# specs, plus two markers for values that are not literals: `New` (an instance of a class of the
# reference module, written `reference.Class(args...)`) and `Member` (an attribute of the
# reference module such as an enum member, written `reference.Color.RED`). `render` writes a
# spec as Python source (its text is also the spec's identity); `build` makes the value.


class Unwritable(Exception):
    """A value that cannot be written in a harness."""


class New:
    """reference.<path>(*args, **kwargs) — args: tuple of specs, kwargs: tuple of (name, spec)."""

    __slots__ = ("path", "args", "kwargs")

    def __init__(self, path: str, args=(), kwargs=()):
        self.path = path
        self.args = tuple(args)
        self.kwargs = tuple(kwargs)

    def __eq__(self, other):
        return isinstance(other, New) and render(self) == render(other)

    def __hash__(self):
        return hash(render(self))

    def __repr__(self):
        return render(self)


class Helper:
    """r2e_equiv.<name>: a function of the equivalence helper, such as `sample_function`, to
    hand to decorators and higher-order functions."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Helper) and self.name == other.name

    def __hash__(self):
        return hash(("r2e_equiv", self.name))

    def __repr__(self):
        return render(self)


class Member:
    """reference.<path>, e.g. an enum member."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __eq__(self, other):
        return isinstance(other, Member) and self.path == other.path

    def __hash__(self):
        return hash(self.path)

    def __repr__(self):
        return render(self)


def render(v) -> str:
    """Python source for a spec; raises Unwritable for anything that is not a round-tripping
    literal (NaN and infinities included) or a marker."""
    t = type(v)
    if v is None or t in (bool, int, str, bytes):
        return repr(v)
    if t is float:
        if not math.isfinite(v):
            # float("inf"), float("-inf"), float("nan"): the literal forms do not exist.
            return f"float({repr(v)!r})"
        return repr(v)
    if t is complex:
        if not (math.isfinite(v.real) and math.isfinite(v.imag)):
            raise Unwritable("non-finite complex")
        return repr(v)
    if t is list:
        return "[" + ", ".join(render(x) for x in v) + "]"
    if t is tuple:
        if len(v) == 1:
            return "(" + render(v[0]) + ",)"
        return "(" + ", ".join(render(x) for x in v) + ")"
    if t is dict:
        return "{" + ", ".join(f"{render(k)}: {render(x)}" for k, x in v.items()) + "}"
    if t is set:
        if not v:
            return "set()"
        # Sorted by text so that the harness does not depend on hash order.
        return "{" + ", ".join(sorted(render(x) for x in v)) + "}"
    if t is New:
        parts = [render(a) for a in v.args] + [f"{k}={render(x)}" for k, x in v.kwargs]
        return f"reference.{v.path}(" + ", ".join(parts) + ")"
    if t is Member:
        return f"reference.{v.path}"
    if t is Helper:
        return f"r2e_equiv.{v.name}"
    raise Unwritable(f"cannot write a {t.__name__}")


def writable(v) -> bool:
    try:
        render(v)
        return True
    except (Unwritable, RecursionError):
        return False


def resolve(root, path: str):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def build(v, reference):
    """The value a spec stands for (fresh objects every time)."""
    t = type(v)
    if t is list:
        return [build(x, reference) for x in v]
    if t is tuple:
        return tuple(build(x, reference) for x in v)
    if t is dict:
        return {build(k, reference): build(x, reference) for k, x in v.items()}
    if t is set:
        # Insert in the order the harness's literal will use.
        return {build(x, reference) for x in sorted(v, key=render)}
    if t is New:
        cls = resolve(reference, v.path)
        return cls(
            *[build(a, reference) for a in v.args], **{k: build(x, reference) for k, x in v.kwargs}
        )
    if t is Member:
        return resolve(reference, v.path)
    if t is Helper:
        return getattr(sys.modules["r2e_equiv"], v.name)
    return v


# Values tried last for an annotated parameter, whatever its annotation says.
OFF_TYPE_VALUES = [None, 0, "", 1.5, [], Helper("sample_function")]
_OFF_TYPE_KEYS = {render(v) for v in OFF_TYPE_VALUES}

# The calls made of a function the target returns (a closure, a decorator's wrapper), so that
# the returned function's code is exercised and compared too.
THEN_CALLS = (
    ((), {}),
    ((Helper("sample_function"),), {}),
    ((0,), {}),
    (("a",), {}),
    ((1, 2), {}),
    (([1, 2, 3],), {}),
    (({"a": 1},), {}),
    ((None,), {}),
    (("hello world",), {}),
    ((-2.5,), {}),
)


def spec_from_node(node: ast.AST, reference, depth: int = 0):
    """A spec for an argument expression: a literal, or a call of a class of the reference
    module with convertible arguments. Raises ValueError otherwise."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        if writable(value):
            return value
        raise ValueError("literal cannot be written back")
    if isinstance(node, ast.Call) and depth < 2 and reference is not None:
        path = _dotted_name(node.func)
        if path is not None:
            class_at = _resolve_class(reference, path)
            if class_at is not None and not any(isinstance(a, ast.Starred) for a in node.args):
                if any(k.arg is None for k in node.keywords):
                    raise ValueError("** arguments")
                args = [spec_from_node(a, reference, depth + 1) for a in node.args]
                kwargs = [
                    (k.arg, spec_from_node(k.value, reference, depth + 1)) for k in node.keywords
                ]
                return New(class_at, args, kwargs)
    raise ValueError("not a literal")


def _dotted_name(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _resolve_class(reference, path: str):
    """The path of a class under the reference module for a name used in source, or None."""
    for candidate in (path, path.split(".")[-1]):
        try:
            obj = resolve(reference, candidate)
        except AttributeError:
            continue
        if isinstance(obj, type):
            return class_path(reference, obj)
    return None


def class_path(reference, cls) -> str | None:
    """The attribute path under which `cls` is reachable from the reference module."""
    qualname = getattr(cls, "__qualname__", "")
    if "<locals>" not in qualname:
        try:
            if resolve(reference, qualname) is cls:
                return qualname
        except AttributeError:
            pass
    for name, value in vars(reference).items():
        if value is cls:
            return name
    # A class of a module the reference imports: `import datetime as dt` gives `dt.date`.
    simple = getattr(cls, "__name__", "")
    for name, value in sorted(vars(reference).items()):
        if isinstance(value, types.ModuleType) and getattr(value, simple, None) is cls:
            return f"{name}.{simple}"
    return None


def _standard_samples():
    """Constructor arguments for standard-library value types an annotation may name."""
    import datetime
    import decimal
    import fractions
    import pathlib

    dates = [(2020, 1, 31), (1999, 12, 31), (2024, 2, 29), (1970, 1, 1)]
    return {
        datetime.date: dates,
        datetime.datetime: [d + (12, 30, 15) for d in dates[:3]] + [(1970, 1, 1)],
        datetime.time: [(0, 0), (12, 30, 15), (23, 59, 59)],
        datetime.timedelta: [(), (1,), (0, 90), (0, 3600), (-1,), (400,)],
        decimal.Decimal: [("0",), ("1.5",), ("-2.25",), ("1000000",)],
        fractions.Fraction: [(1, 3), (-5, 2), (4,)],
        pathlib.Path: [("a/b.txt",), ("/tmp",), (".",)],
        pathlib.PurePath: [("a/b.txt",), ("/tmp",)],
        pathlib.PurePosixPath: [("a/b.txt",), ("/tmp",)],
    }


STANDARD_SAMPLES = _standard_samples()


def sort_key(v) -> str:
    try:
        return render(v)
    except Unwritable:
        return repr(v)


def dedupe(values, limit=None):
    """Writable values in order, without repeats (by their source text)."""
    seen, out = set(), []
    for v in values:
        try:
            key = render(v)
        except (Unwritable, RecursionError):
            continue
        if key not in seen:
            seen.add(key)
            out.append(v)
            if limit is not None and len(out) >= limit:
                break
    return out


# --------------------------------------------------------------------------------------------
# Tracing arcs and running calls safely
# --------------------------------------------------------------------------------------------


class ArcTracer:
    """Records arcs (previous line, line) of the code objects of one function, like coverage.py:
    entering a frame is the arc (-firstlineno, line) and leaving it (line, -firstlineno).

    Only code objects from the function's file whose first line lies within the function's
    lines are traced, so nested functions, lambdas and comprehensions count too.
    """

    def __init__(self, filename: str | None, first: int, last: int):
        self.filename, self.first, self.last = filename, first, last
        self.arcs: set = set()
        self._wanted: dict = {}

    def _is_wanted(self, code) -> bool:
        wanted = self._wanted.get(code)
        if wanted is None:
            wanted = (
                code.co_filename == self.filename and self.first <= code.co_firstlineno <= self.last
            )
            self._wanted[code] = wanted
        return wanted

    def _global(self, frame, event, arg):
        if event != "call" or not self._is_wanted(frame.f_code):
            return None
        arcs = self.arcs
        entry = frame.f_code.co_firstlineno
        last = -entry

        def local(frame, event, arg):
            nonlocal last
            if event == "line":
                line = frame.f_lineno
                arcs.add((last, line))
                last = line
            elif event == "return":
                arcs.add((last, -entry))
            return local

        return local

    def start(self):
        self.arcs = set()
        if self.filename is not None:
            sys.settrace(self._global)

    def stop(self) -> frozenset:
        sys.settrace(None)
        return frozenset(self.arcs)


class _NullWriter(io.TextIOBase):
    def write(self, s):
        return len(s)

    def writable(self):
        return True


class Executor:
    """Runs calls with a per-call timer (SIGALRM raising r2e_equiv.Timeout), output suppressed,
    an empty stdin, and the working directory restored; counts executions."""

    def __init__(self, equiv, timeout: float):
        self.equiv = equiv
        self.timeout = max(float(timeout), 0.001)
        self.executions = 0
        self.timeouts = 0
        self._armed = False
        signal.signal(signal.SIGALRM, self._on_alarm)

    def _on_alarm(self, signum, frame):
        if self._armed:
            raise self.equiv.Timeout()

    def run(self, prepare, action, tracer=None):
        """Returns ("ok", result, arcs), ("invalid", exception, None) when `prepare` (building
        the inputs) raised, or ("timeout", None, None)."""
        self.executions += 1
        # Reinstalled every time: the code under test may have replaced it.
        signal.signal(signal.SIGALRM, self._on_alarm)
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        null = _NullWriter()
        saved_stdin = sys.stdin
        arcs = frozenset()
        try:
            with contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                sys.stdin = io.StringIO("")
                self._armed = True
                # Re-fires every 50 ms so that code swallowing the first Timeout (a bare
                # `except:`) is interrupted again.
                signal.setitimer(signal.ITIMER_REAL, self.timeout, min(self.timeout, 0.05))
                try:
                    try:
                        prepared = prepare()
                    except (self.equiv.Timeout, KeyboardInterrupt):
                        raise
                    except BaseException as exc:  # noqa: BLE001 - invalid input
                        return ("invalid", exc, None)
                    if tracer is not None:
                        tracer.start()
                    try:
                        result = action(prepared)
                    finally:
                        if tracer is not None:
                            arcs = tracer.stop()
                finally:
                    self._armed = False
                    signal.setitimer(signal.ITIMER_REAL, 0, 0)
            return ("ok", result, arcs)
        except self.equiv.Timeout:
            self.timeouts += 1
            return ("timeout", None, None)
        finally:
            sys.settrace(None)
            sys.stdin = saved_stdin
            with contextlib.suppress(OSError):
                if cwd is not None and os.getcwd() != cwd:
                    os.chdir(cwd)


# --------------------------------------------------------------------------------------------
# Static information about a function: source, literals, hints, doctests
# --------------------------------------------------------------------------------------------


def function_node(func):
    """The ast node of a function's definition (searched in its whole file), or None."""
    try:
        lines, first = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func)
    except (OSError, TypeError):
        return None
    last = first + len(lines) - 1
    tree = None
    if filename and os.path.exists(filename):
        try:
            with tokenize.open(filename) as f:
                tree = ast.parse(f.read())
        except (SyntaxError, ValueError, OSError):
            tree = None
    if tree is not None:
        best = None
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == func.__name__
                and first <= node.lineno <= last
                and (best is None or node.lineno < best.lineno)
            ):
                best = node
        if best is not None:
            return best
    try:
        module = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def body_literals(node) -> list:
    """Constants of the function body (not its docstring, f-string pieces or annotations), in
    source order, with unary minus folded in."""
    if node is None:
        return []
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    skip: set = set()
    found = []

    def visit(n):
        if id(n) in skip:
            return
        if isinstance(n, ast.JoinedStr):
            return
        if isinstance(n, (ast.arg, ast.AnnAssign)) and getattr(n, "annotation", None) is not None:
            skip.add(id(n.annotation))
        if (
            isinstance(n, ast.UnaryOp)
            and isinstance(n.op, ast.USub)
            and isinstance(n.operand, ast.Constant)
        ):
            value = n.operand.value
            if type(value) in (int, float):
                found.append(-value)
                skip.add(id(n.operand))
        elif isinstance(n, ast.Constant):
            value = n.value
            if type(value) in (int, float, complex, bytes) or (
                type(value) is str and len(value) <= 100
            ):
                found.append(value)
        for child in ast.iter_child_nodes(n):
            visit(child)

    for stmt in body:
        visit(stmt)
    return dedupe(found, limit=40)


def global_literals(node, globalns, limit: int = 30) -> list:
    """Scalars held by the module-level values a function body names (constant tables,
    registries): dict keys and values, elements, and attributes of objects, two levels deep.
    Keys of a lookup table are often the only inputs that reach a function's main path."""
    if node is None or not isinstance(globalns, dict):
        return []
    found: list = []
    seen_ids: set = set()

    def collect(value, depth):
        if len(found) >= limit or id(value) in seen_ids:
            return
        t = type(value)
        if t in (int, float, str, bytes) and not (t is str and len(value) > 100):
            found.append(value)
            return
        if (
            depth > 2
            or isinstance(
                value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
            )
            or callable(value)
            and not hasattr(value, "__dict__")
        ):
            return
        seen_ids.add(id(value))
        if isinstance(value, dict):
            for k, v in list(value.items())[:50]:
                collect(k, depth + 1)
                collect(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value[:50]:
                collect(v, depth + 1)
        elif isinstance(value, (set, frozenset)):
            for v in sorted(value, key=repr)[:50]:
                collect(v, depth + 1)
        elif isinstance(value, enum.Enum):
            return
        elif not callable(value) and isinstance(getattr(value, "__dict__", None), dict):
            for v in list(vars(value).values())[:50]:
                collect(v, depth + 1)

    names = []
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and n.id in globalns
            and n.id not in names
        ):
            names.append(n.id)
    for name in names:
        if not name.startswith("__"):
            collect(globalns[name], 0)
    return dedupe(found, limit=limit)


def literal_variants(value) -> list:
    """A literal and its neighbours."""
    t = type(value)
    if t is int:
        return [value, value - 1, value + 1, 0, -value]
    if t is float:
        return [value, value - 1.0, value + 1.0, 0.0, -value]
    if t is str:
        return [value, "", f" {value} ", value.upper()]
    if t is bytes:
        return [value, b"", value.upper()]
    return [value]


def usage_hints(node, name: str) -> list:
    """Types suggested by how an unannotated parameter is used: 'str', 'dict', 'list', 'seq',
    int, float... (most telling first)."""
    if node is None:
        return []
    hints = []

    def is_param(n):
        return isinstance(n, ast.Name) and n.id == name

    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and is_param(n.value):
            if n.attr in STR_METHODS:
                hints.append(str)
            elif n.attr in DICT_METHODS:
                hints.append(dict)
            elif n.attr in LIST_METHODS:
                hints.append(list)
        elif isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            if any(is_param(o) for o in operands):
                for o in operands:
                    if isinstance(o, ast.Constant) and type(o.value) in (int, float, str, bytes):
                        hints.append(type(o.value))
        elif isinstance(n, ast.BinOp) and (is_param(n.left) or is_param(n.right)):
            other = n.right if is_param(n.left) else n.left
            if isinstance(other, ast.Constant) and type(other.value) in (int, float, str):
                if not (isinstance(n.op, ast.Mod) and type(other.value) is str):
                    hints.append(type(other.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in SEQUENCE_FUNCTIONS and any(is_param(a) for a in n.args):
                hints.append("seq")
            elif n.func.id == "range" and any(is_param(a) for a in n.args):
                hints.append(int)
            elif n.func.id == "isinstance" and len(n.args) == 2 and is_param(n.args[0]):
                names = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
                for t in names:
                    if isinstance(t, ast.Name) and t.id in (
                        "int",
                        "float",
                        "str",
                        "bytes",
                        "list",
                        "dict",
                        "tuple",
                        "bool",
                    ):
                        hints.append(
                            {
                                "int": int,
                                "float": float,
                                "str": str,
                                "bytes": bytes,
                                "list": list,
                                "dict": dict,
                                "tuple": tuple,
                                "bool": bool,
                            }[t.id]
                        )
        elif isinstance(n, (ast.For, ast.comprehension)) and is_param(n.iter):
            hints.append("seq")
        elif isinstance(n, ast.Subscript) and is_param(n.value):
            hints.append("seq")
    ordered = []
    for h in hints:
        if h not in ordered:
            ordered.append(h)
    # Methods of a specific type say more than comparisons or subscripts.
    ordered.sort(key=lambda h: 0 if h in (str, dict, list) else 1)
    return ordered


def docstring_calls(docs, target_names, class_name, reference):
    """Calls found in doctest examples: a list of (ctor_call or None, call), where a call is
    (args, kwargs) of specs, with None for arguments that could not be converted; and a list of
    constructor calls of `class_name`."""
    calls, ctors = [], []
    for doc in docs:
        if not doc:
            continue
        session_vars: dict = {}
        for source in _doctest_sources(doc):
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for stmt in tree.body:
                for node in ast.walk(stmt):
                    if not isinstance(node, ast.Call):
                        continue
                    func = node.func
                    if class_name and isinstance(func, ast.Name) and func.id == class_name:
                        ctor = _call_specs(node, reference)
                        if ctor is not None:
                            ctors.append(ctor)
                            if isinstance(stmt, ast.Assign) and stmt.value is node:
                                for t in stmt.targets:
                                    if isinstance(t, ast.Name):
                                        session_vars[t.id] = ctor
                        continue
                    name = (
                        func.id
                        if isinstance(func, ast.Name)
                        else func.attr if isinstance(func, ast.Attribute) else None
                    )
                    if name not in target_names:
                        continue
                    call = _call_specs(node, reference)
                    if call is None:
                        continue
                    ctor = None
                    if class_name and isinstance(func, ast.Attribute):
                        receiver = func.value
                        if (
                            isinstance(receiver, ast.Call)
                            and isinstance(receiver.func, ast.Name)
                            and receiver.func.id == class_name
                        ):
                            ctor = _call_specs(receiver, reference)
                        elif isinstance(receiver, ast.Name):
                            ctor = session_vars.get(receiver.id)
                    calls.append((ctor, call))
    return calls, ctors


def _doctest_sources(doc: str):
    """The source of each `>>>` example (with its `...` continuation lines)."""
    current = None
    for raw in doc.splitlines():
        line = raw.strip()
        if line.startswith(">>>"):
            if current is not None:
                yield "\n".join(current)
            current = [line[4:] if len(line) > 3 else ""]
        elif line.startswith("...") and current is not None:
            current.append(line[4:] if len(line) > 3 else "")
        else:
            if current is not None:
                yield "\n".join(current)
            current = None
    if current is not None:
        yield "\n".join(current)


def _call_specs(node: ast.Call, reference):
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return None
    args = []
    for a in node.args:
        try:
            args.append(spec_from_node(a, reference))
        except ValueError:
            args.append(_UNKNOWN)
    kwargs = {}
    for k in node.keywords:
        try:
            kwargs[k.arg] = spec_from_node(k.value, reference)
        except ValueError:
            kwargs[k.arg] = _UNKNOWN
    return (args, kwargs)


_UNKNOWN = object()  # an argument whose value could not be recovered (filled from the base)
OMIT = object()  # an optional parameter left to its default


# --------------------------------------------------------------------------------------------
# Value pools
# --------------------------------------------------------------------------------------------


class PoolMaker:
    """Builds the candidate values of parameters: from annotations, defaults, usage hints,
    body literals and common values, in that order of priority."""

    def __init__(self, reference, literals, own_instances=(), instance_finder=None):
        self.reference = reference
        self.literals = literals
        self.own_instances = list(own_instances)
        self.instance_finder = instance_finder
        self.atoms = {t: self._atoms(t) for t in COMMON_ATOMS}

    def _atoms(self, t):
        variants = [v for lit in self.literals for v in literal_variants(lit) if type(v) is t]
        if t is float:
            # Integral literals compared with floats are useful boundaries too.
            variants += [
                float(v) for lit in self.literals if type(lit) is int for v in literal_variants(lit)
            ]
        return dedupe(variants + COMMON_ATOMS[t], limit=24)

    # -- annotations ------------------------------------------------------------------------

    def for_annotation(self, ann, globalns, depth=0):
        """Values for a type annotation, or None when it says nothing usable."""
        if ann is inspect.Parameter.empty or ann is typing.Any or ann is object:
            return None
        if isinstance(ann, str):
            ann = _eval_annotation(ann, globalns)
            if isinstance(ann, str):
                return None
        if ann is None or ann is type(None):
            return [None]
        origin = typing.get_origin(ann)
        targs = typing.get_args(ann)
        if origin is typing.Union or (
            hasattr(types, "UnionType") and isinstance(ann, types.UnionType)
        ):
            out = []
            for a in targs:
                vals = self.for_annotation(a, globalns, depth)
                if vals is None:
                    return None
                out.extend(vals[:16])
            return dedupe(out)
        if origin is typing.Literal:
            return dedupe(targs)
        if isinstance(ann, typing.TypeVar):
            if ann.__bound__ is not None:
                return self.for_annotation(ann.__bound__, globalns, depth)
            return None
        if origin is collections.abc.Callable or ann is collections.abc.Callable or ann is callable:
            return [Helper("sample_function")]
        if origin is typing.Annotated or (
            hasattr(typing, "Annotated") and origin is getattr(typing, "Annotated")
        ):
            return self.for_annotation(targs[0], globalns, depth) if targs else None
        base = origin or ann
        if base is bool:
            return list(self.atoms[bool])
        if base is int:
            return list(self.atoms[int])
        if base is float:
            return self.atoms[float] + self.atoms[int][:3]
        if base is complex:
            return list(self.atoms[complex])
        if base is str:
            return list(self.atoms[str])
        if base is bytes:
            return list(self.atoms[bytes])
        if base in (
            list,
            collections.abc.Sequence,
            collections.abc.MutableSequence,
            collections.abc.Iterable,
            collections.abc.Collection,
            collections.abc.Iterator,
            collections.abc.Reversible,
        ):
            elems = self._elements(targs[0] if targs else None, globalns, depth)
            return make_lists(elems)
        if base is tuple:
            if not targs:
                return [(), (1, 2), (1, 2, 3), ("a", 1)]
            if len(targs) == 2 and targs[1] is Ellipsis:
                return [tuple(v) for v in make_lists(self._elements(targs[0], globalns, depth))]
            columns = [self.for_annotation(a, globalns, depth + 1) for a in targs]
            if any(not c for c in columns):
                return None
            return dedupe(tuple(c[j % len(c)] for c in columns) for j in range(6))
        if base in (set, collections.abc.Set, collections.abc.MutableSet):
            elems = self._elements(targs[0] if targs else None, globalns, depth)
            return make_sets(elems)
        if base in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
            keys = self._elements(targs[0] if targs else str, globalns, depth)
            values = self._elements(targs[1] if len(targs) > 1 else int, globalns, depth)
            return make_dicts(keys, values)
        if isinstance(base, type) and issubclass(base, enum.Enum):
            path = class_path(self.reference, base)
            if path is None:
                return None
            return [Member(f"{path}.{name}") for name in base.__members__][:POOL_MAX]
        if base in STANDARD_SAMPLES:
            path = class_path(self.reference, base)
            if path is not None:
                return [New(path, args) for args in STANDARD_SAMPLES[base]]
        if isinstance(base, type) and self.instance_finder is not None and depth == 0:
            found = self.instance_finder(base)
            return found or None
        return None

    def _elements(self, ann, globalns, depth):
        vals = self.for_annotation(ann, globalns, depth + 1) if ann is not None else None
        if not vals:
            vals = self.atoms[int][:4] + self.atoms[str][:3]
        return [v for v in vals if _hashable(v)][:8] or vals[:8]

    # -- parameters -------------------------------------------------------------------------

    def for_parameter(self, param: inspect.Parameter, annotation, globalns, node):
        """(pool, typed): the parameter's candidate values, and whether they come from its
        annotation (then mutations keep to the annotation's types)."""
        default = []
        if param.default is not inspect.Parameter.empty and writable(param.default):
            default = [param.default]
        typed = self.for_annotation(annotation, globalns)
        if typed:
            # Literals of the body of the annotated types come with the atoms already. A few
            # values of other types come last: annotations are often narrower than the code,
            # which checks types itself (`isinstance(x, str)`, `callable(x)`, `x is None`).
            typed = dedupe(default + typed, limit=POOL_MAX - len(OFF_TYPE_VALUES))
            return dedupe(typed + OFF_TYPE_VALUES), True
        hinted = []
        for h in usage_hints(node, param.name):
            if h in self.atoms:
                hinted += self.atoms[h][:10]
            elif h is dict:
                hinted += make_dicts(self.atoms[str][:4], self.atoms[int][:4])
            elif h in (list, "seq"):
                hinted += make_lists(self.atoms[int][:4]) + make_lists(self.atoms[str][:3])
                if h == "seq":
                    hinted += self.atoms[str][:4]
            elif h is tuple:
                hinted += [tuple(v) for v in make_lists(self.atoms[int][:4])]
        if default and type(default[0]) in self.atoms:
            hinted = self.atoms[type(default[0])][:10] + hinted
        literal_values = [v for lit in self.literals for v in literal_variants(lit)]
        containers = []
        strs = [lit for lit in self.literals if type(lit) is str and lit][:3]
        ints = [lit for lit in self.literals if type(lit) is int][:3]
        if strs:
            containers += [[strs[0]], strs[:], {s: 1 for s in strs}]
        if ints:
            containers += [ints[:], sorted(ints, reverse=True)]
        values = (
            default
            + hinted
            + literal_values
            + COMMON_VALUES
            + [Helper("sample_function")]
            + containers
            + self.own_instances
        )
        return dedupe(values, limit=POOL_MAX), False

    def for_var_positional(self) -> list:
        """Tuples of extra positional arguments for *args."""
        atoms = self.atoms[int][:3] + self.atoms[str][:2]
        return dedupe([(), (atoms[0],), (atoms[0], atoms[1]), (atoms[3],), tuple(atoms[:3])])


def _eval_annotation(text: str, globalns):
    try:
        return eval(text, dict(globalns or {}), {"typing": typing})  # noqa: S307 - annotations
    except Exception:
        builtin = {
            "int": int,
            "float": float,
            "str": str,
            "bool": bool,
            "bytes": bytes,
            "list": list,
            "dict": dict,
            "tuple": tuple,
            "set": set,
            "None": None,
        }
        return builtin.get(text.strip(), text)


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


def make_lists(elems) -> list:
    e = list(elems) or [1, 2, 3]
    while len(e) < 3:
        e.append(e[-1])
    return dedupe([[], [e[0]], [e[0], e[1], e[2]], [e[2], e[0], e[1]], [e[1], e[1]], list(e[:6])])


def make_sets(elems) -> list:
    e = [x for x in elems if _hashable(x)] or [1, 2, 3]
    return dedupe([set(), {e[0]}, set(e[:3]), set(e[:6])])


def make_dicts(keys, values) -> list:
    k = [x for x in keys if _hashable(x)] or ["a", "b"]
    v = list(values) or [1, 2]
    while len(k) < 2:
        k.append(k[-1])
    while len(v) < 3:
        v.append(v[-1])
    return dedupe([{}, {k[0]: v[0]}, {k[0]: v[0], k[1]: v[1]}, {k[1]: v[2]}])


# --------------------------------------------------------------------------------------------
# Input spaces: a signature with a pool per parameter
# --------------------------------------------------------------------------------------------


class Param:
    """A parameter of an input space: its pool of values and, when writable, its default."""

    __slots__ = ("name", "kind", "required", "default", "pool", "shapes")

    POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
    POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
    VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
    KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY

    def __init__(self, name, kind, required, default, pool, typed=False):
        self.name, self.kind, self.required, self.default, self.pool = (
            name,
            kind,
            required,
            default,
            pool,
        )
        # For an annotated parameter, the kinds of values its annotation allows (the values of
        # other types its pool ends with are tried as they are, never mutated into).
        self.shapes = (
            {shape(v) for v in pool if render(v) not in _OFF_TYPE_KEYS} if typed else None
        )


class Input:
    """One point of an input space: a construction index (methods) and a value (spec or OMIT)
    per parameter; for *args the value is a tuple of specs."""

    __slots__ = ("ctor", "values", "seq")

    def __init__(self, ctor, values):
        self.ctor = ctor
        self.values = tuple(values)
        self.seq = None

    def replace(self, index, value):
        values = list(self.values)
        values[index] = value
        return Input(self.ctor, values)


class InputSpace:
    def __init__(self, signature: inspect.Signature, pools: PoolMaker, annotations, globalns, node):
        self.params: list[Param] = []
        for p in signature.parameters.values():
            if p.kind is p.VAR_KEYWORD:
                continue
            if p.kind is p.VAR_POSITIONAL:
                self.params.append(Param(p.name, p.kind, False, (), pools.for_var_positional()))
                continue
            required = p.default is inspect.Parameter.empty
            default = p.default if not required and writable(p.default) else _UNKNOWN
            annotation = annotations.get(p.name, p.annotation)
            pool, typed = pools.for_parameter(p, annotation, globalns, node)
            if not pool:
                pool, typed = [None], False
            self.params.append(Param(p.name, p.kind, required, default, pool, typed))

    def base(self, ctor=None) -> Input:
        """Every required parameter at the first value of its pool, the others omitted."""
        return Input(
            ctor,
            [
                p.pool[0] if p.required else (() if p.kind is p.VAR_POSITIONAL else OMIT)
                for p in self.params
            ],
        )

    def from_call(self, call, ctor=None) -> Input | None:
        """An input from (args, kwargs) found in a doctest or at a call site; arguments that
        could not be recovered take their base value. None when the call does not fit."""
        args, kwargs = call
        base = self.base(ctor)
        values = list(base.values)
        positional = [
            i
            for i, p in enumerate(self.params)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        var_index = next((i for i, p in enumerate(self.params) if p.kind is p.VAR_POSITIONAL), None)
        if len(args) > len(positional) and var_index is None:
            return None
        for i, a in zip(positional, args):
            if a is not _UNKNOWN:
                values[i] = a
        if len(args) > len(positional):
            extras = args[len(positional) :]
            if any(a is _UNKNOWN for a in extras):
                return None
            values[var_index] = tuple(extras)
        by_name = {
            p.name: i
            for i, p in enumerate(self.params)
            if p.kind is not p.POSITIONAL_ONLY and p.kind is not p.VAR_POSITIONAL
        }
        for name, v in kwargs.items():
            if name not in by_name:
                return None
            if v is not _UNKNOWN:
                values[by_name[name]] = v
        return Input(ctor, values)

    def to_call(self, inp: Input):
        """(args, kwargs) specs for an input: required positional parameters positionally,
        optional ones by keyword (positionally when *args must be reached); None when an
        omitted default would have to be written and cannot be."""
        positional = [
            (i, p)
            for i, p in enumerate(self.params)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        extras = ()
        for i, p in enumerate(self.params):
            if p.kind is p.VAR_POSITIONAL:
                extras = inp.values[i]
        last = -1
        for j, (i, p) in enumerate(positional):
            if p.required or (p.kind is p.POSITIONAL_ONLY and inp.values[i] is not OMIT):
                last = j
        if extras:
            last = len(positional) - 1
        args, kwargs = [], {}
        for j, (i, p) in enumerate(positional):
            v = inp.values[i]
            if j <= last:
                if v is OMIT:
                    if p.default is _UNKNOWN:
                        return None
                    v = p.default
                args.append(v)
            elif v is not OMIT:
                kwargs[p.name] = v
        args.extend(extras)
        for i, p in enumerate(self.params):
            if p.kind is p.KEYWORD_ONLY and inp.values[i] is not OMIT:
                kwargs[p.name] = inp.values[i]
        return tuple(args), kwargs

    def variations(self, base: Input, ctor_count: int = 1):
        """Inputs that differ from `base` in one dimension, round-robin over the dimensions
        (construction, then each parameter) so that no single large pool eats the budget."""
        dims = []
        if ctor_count > 1:
            dims.append(("ctor", list(range(ctor_count))))
        for i, p in enumerate(self.params):
            dims.append((i, p.pool))
        longest = max((len(pool) for _, pool in dims), default=0)
        for k in range(longest):
            for dim, pool in dims:
                if k >= len(pool):
                    continue
                if dim == "ctor":
                    if k != base.ctor:
                        yield Input(k, base.values)
                    continue
                p = self.params[dim]
                value = pool[k]
                if (
                    p.kind is not p.VAR_POSITIONAL
                    and not p.required
                    and p.default is not _UNKNOWN
                    and sort_key(value) == sort_key(p.default)
                ):
                    continue  # the same as omitting it
                yield base.replace(dim, value)

    def homogeneous(self, base: Input):
        """Inputs where every unannotated required parameter takes one of the first values of
        the same type (all ints, all strings...): a plausible call when the first pool values
        of several parameters do not go together."""
        for t in (int, str, float, list, dict, bool):
            for k in range(3):
                values = list(base.values)
                changed = False
                for i, p in enumerate(self.params):
                    if p.shapes is not None or not p.required:
                        continue
                    of_type = [v for v in p.pool if type(v) is t]
                    if k < len(of_type):
                        values[i] = of_type[k]
                        changed = True
                if changed:
                    yield Input(base.ctor, values)

    def random_input(self, rng: random.Random, ctor_count: int) -> Input:
        values = []
        for p in self.params:
            if not p.required and p.kind is not p.VAR_POSITIONAL and rng.random() < 0.3:
                values.append(OMIT)
            else:
                values.append(rng.choice(p.pool))
        return Input(rng.randrange(ctor_count) if ctor_count > 1 else None, values)


# --------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------


def mutate_value(v, rng: random.Random, pool: list, depth: int = 0):
    """A neighbour of a spec: a changed number, a shorter/longer/changed string or container,
    swapped or sorted elements, a mutated constructor argument, or a pool value."""
    t = type(v)
    if t is bool:
        return not v
    if t is int:
        # Magnitudes stay moderate: sizes like 'x' * n must not exhaust memory.
        doubled = v * 2 if abs(v) <= MAX_MUTATED_INT // 2 else v // 2
        return rng.choice(
            [v + 1, v - 1, -v, doubled, v // 2, 0, rng.randint(-10, 10), rng.randint(-1000, 1000)]
        )
    if t is float:
        return rng.choice(
            [
                v + 1.0,
                v - 1.0,
                -v,
                v * 2.0 if abs(v) < 1e300 else v / 2,
                v / 2.0,
                0.0,
                round(rng.uniform(-10, 10), 3),
            ]
        )
    if t is str:
        c = rng.choice(MUTATION_CHARS)
        pos = rng.randint(0, len(v))
        options = [
            "",
            v[:-1],
            v[1:],
            v + c,
            c + v,
            v[:pos] + c + v[pos:],
            v.upper(),
            v.lower(),
            v.swapcase(),
            v.strip(),
            f" {v} ",
            v[::-1],
        ]
        if v:
            options.append(v[:pos] + v[pos + 1 :])
        if len(v) < 100:
            options.append(v * 2)
        strs = [p for p in pool if type(p) is str]
        if strs:
            options.append(v + rng.choice(strs))
        return rng.choice(options)
    if t is bytes:
        c = rng.choice(MUTATION_CHARS).encode()
        return rng.choice([b"", v[:-1], v[1:], v + c, c + v, v.upper(), v[::-1]])
    if t in (list, tuple):
        items = list(v)
        op = rng.randrange(8)
        if op == 0 or not items:
            items.append(
                mutate_value(rng.choice(items), rng, pool, depth + 1)
                if items and depth < 3
                else _atom_from(pool, rng)
            )
        elif op == 1:
            items.pop(rng.randrange(len(items)))
        elif op == 2 and len(items) > 1:
            i, j = rng.sample(range(len(items)), 2)
            items[i], items[j] = items[j], items[i]
        elif op == 3:
            items.reverse()
        elif op == 4:
            with contextlib.suppress(TypeError):
                items.sort()
        elif op == 5 and depth < 3:
            i = rng.randrange(len(items))
            items[i] = mutate_value(items[i], rng, pool, depth + 1)
        elif op == 6:
            items.insert(rng.randrange(len(items) + 1), rng.choice(items))
        else:
            items = []
        items = items[:50]
        return items if t is list else tuple(items)
    if t is dict:
        items = list(v.items())
        op = rng.randrange(4)
        if items and op == 0:
            items.pop(rng.randrange(len(items)))
        elif items and op == 1 and depth < 3:
            i = rng.randrange(len(items))
            items[i] = (items[i][0], mutate_value(items[i][1], rng, pool, depth + 1))
        elif items:
            # A new entry shaped like an existing one.
            key, value = rng.choice(items)
            items.append(
                (
                    mutate_value(key, rng, pool, 3),
                    mutate_value(value, rng, pool, depth + 1) if depth < 3 else value,
                )
            )
        else:
            items.append((rng.choice(["a", "b", "key", "x", ""]), _atom_from(pool, rng)))
        return dict(items[:30])
    if t is set:
        items = sorted(v, key=sort_key)
        if items and rng.random() < 0.4:
            items.pop(rng.randrange(len(items)))
        else:
            candidate = _atom_from(pool, rng)
            if _hashable(candidate):
                items.append(candidate)
        return set(items)
    if t is New and (v.args or v.kwargs) and depth < 3:
        args, kwargs = list(v.args), list(v.kwargs)
        i = rng.randrange(len(args) + len(kwargs))
        if i < len(args):
            args[i] = mutate_value(args[i], rng, [], depth + 1)
        else:
            name, value = kwargs[i - len(args)]
            kwargs[i - len(args)] = (name, mutate_value(value, rng, [], depth + 1))
        return New(v.path, args, kwargs)
    return rng.choice(pool) if pool else v


def _atom_from(pool, rng):
    """A scalar for a container: from the pool, else from the elements of its containers."""
    scalars = (int, float, str, bool, bytes, New, Member)
    atoms = [p for p in pool if type(p) in scalars]
    if not atoms:
        for p in pool:
            if type(p) in (list, tuple, set):
                atoms += (
                    [x for x in sorted(p, key=sort_key) if type(x) in scalars]
                    if type(p) is set
                    else [x for x in p if type(x) in scalars]
                )
            elif type(p) is dict:
                atoms += [x for x in p.values() if type(x) in scalars]
    return rng.choice(atoms or [0, 1, "a"])


def shape(v) -> str:
    """What kind of value a spec is, to keep replacements within an annotation's types."""
    if type(v) is New:
        return "new:" + v.path
    if type(v) is Member:
        return "member:" + v.path.rpartition(".")[0]
    return type(v).__name__


# --------------------------------------------------------------------------------------------
# The explorer
# --------------------------------------------------------------------------------------------


class Stop(Exception):
    """The execution budget or the time limit is exhausted."""


class Entry:
    """An executed input: its call, arcs and outcome."""

    __slots__ = (
        "inp", "key", "ctor_call", "call", "arcs", "kind", "returned", "value_key", "seq", "then",
    )  # fmt: skip

    def __init__(self, inp, key, ctor_call, call, arcs, kind, returned, value_key, seq, then=False):
        self.inp, self.key, self.ctor_call, self.call = inp, key, ctor_call, call
        # Whether the target returned a function that the THEN_CALLS were made of.
        self.then = then
        self.arcs, self.kind, self.returned, self.value_key, self.seq = (
            arcs,
            kind,
            returned,
            value_key,
            seq,
        )


class ExploreError(Exception):
    pass


class Explorer:
    def __init__(self, request: dict, equiv):
        self.req = request
        self.equiv = equiv
        self.module_name = request["module"]
        self.qualname = request["qualname"]
        self.kind = request.get("kind", "function")
        self.budget = max(1, int(request.get("budget", 1500)))
        self.max_tests = max(1, int(request.get("max_tests", 12)))
        self.time_limit = float(request.get("time_limit", 60))
        self.rng = random.Random(request.get("seed", 0))
        self.executor = Executor(equiv, request.get("per_call_timeout", 1.0))
        # A few executions are kept back to top the harness up at the end.
        self.reserve = min(8, self.budget // 4)
        self.started = time.monotonic()
        self.time_limit_hit = False
        self.seq = 0

    # -- budget -----------------------------------------------------------------------------

    def check_budget(self, final=False):
        if time.monotonic() - self.started > self.time_limit:
            self.time_limit_hit = True
            raise Stop()
        limit = self.budget if final else self.budget - self.reserve
        if self.executor.executions >= limit:
            raise Stop()

    # -- loading ----------------------------------------------------------------------------

    def load(self):
        null = _NullWriter()
        executor = self.executor
        try:
            with contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                # An import that hangs is stopped at the time limit.
                executor._armed = True
                signal.setitimer(signal.ITIMER_REAL, max(self.time_limit, 0.001), 0.05)
                try:
                    self.reference = importlib.import_module(self.module_name)
                finally:
                    executor._armed = False
                    signal.setitimer(signal.ITIMER_REAL, 0, 0)
        except self.equiv.Timeout:
            self.time_limit_hit = True
            raise ExploreError(
                f"the import failed: it took more than {self.time_limit} seconds"
            ) from None
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a failed import too
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ExploreError(f"the import failed: {type(exc).__qualname__}: {exc}") from None
        parts = self.qualname.split(".")
        self.cls = None
        self.method_name = None
        self.method_kind = "function"
        try:
            if self.kind == "method":
                if len(parts) < 2:
                    raise ExploreError(f"{self.qualname!r} is not Class.method")
                self.cls = resolve(self.reference, ".".join(parts[:-1]))
                if not isinstance(self.cls, type):
                    raise ExploreError(f"{'.'.join(parts[:-1])} is not a class")
                self.method_name = parts[-1]
                raw = inspect.getattr_static(self.cls, self.method_name)
                self.method_kind = self.equiv.method_kind(self.cls, self.method_name)
                self.callable = (
                    getattr(self.cls, self.method_name) if self.method_kind != "property" else raw
                )
                func = raw
                if isinstance(raw, (staticmethod, classmethod)):
                    func = raw.__func__
                elif isinstance(raw, property):
                    func = raw.fget
            else:
                self.callable = func = resolve(self.reference, self.qualname)
                if not callable(func):
                    raise ExploreError(f"{self.module_name}.{self.qualname} is not callable")
        except AttributeError as exc:
            raise ExploreError(f"{self.module_name} has no {self.qualname}: {exc}") from None
        self.func = inspect.unwrap(func) if callable(func) else func
        self.signature = self._signature(func)
        self.tracer = self._tracer_for(self.func)
        self.node = function_node(self.func)
        self.literals = dedupe(
            body_literals(self.node)
            + global_literals(self.node, getattr(self.func, "__globals__", None)),
            limit=60,
        )
        self.globalns = getattr(self.func, "__globals__", vars(self.reference))
        self.annotations = _annotations(self.func)

    def _signature(self, func) -> inspect.Signature:
        try:
            if self.method_kind == "property":
                return inspect.Signature()
            if self.method_kind == "class":
                return inspect.signature(self.callable)
            sig = inspect.signature(func)
        except (TypeError, ValueError) as exc:
            raise ExploreError(f"no signature for {self.qualname}: {exc}") from None
        if self.method_kind in ("instance", "init"):
            params = list(sig.parameters.values())
            if params and params[0].kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            ):
                params = params[1:]
            sig = sig.replace(parameters=params)
        return sig

    @staticmethod
    def _tracer_for(func) -> ArcTracer:
        code = getattr(func, "__code__", None)
        try:
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError):
            return ArcTracer(None, 0, -1)
        if code is None:
            return ArcTracer(None, 0, -1)
        return ArcTracer(code.co_filename, first, first + len(lines) - 1)

    # -- running ----------------------------------------------------------------------------

    def observe(self, ctor_call, call):
        """A thunk pair (prepare, action) observing one call of the target on fresh values."""
        reference, equiv = self.reference, self.equiv
        if self.cls is None:

            def prepare():
                return (
                    build(call[0], reference),
                    build(call[1], reference),
                    build(THEN_CALLS, reference),
                )

            def action(built):
                return equiv.observe_function(self.callable, built[0], built[1], then=built[2])

        else:
            ctor_args, ctor_kwargs = ctor_call if ctor_call is not None else ((), {})

            def prepare():
                return tuple(
                    build(x, reference) for x in (ctor_args, ctor_kwargs, call[0], call[1])
                )

            def action(built):
                return equiv.observe_method(
                    self.cls, built[0], built[1], self.method_name, built[2], built[3]
                )

        return prepare, action

    def execute(self, ctor_call, call, traced=True):
        self.check_budget(final=self.finalizing)
        prepare, action = self.observe(ctor_call, call)
        return self.executor.run(prepare, action, self.tracer if traced else None)

    def is_deterministic(self, ctor_call, call, first_obs) -> bool:
        status, obs, _ = self.execute(ctor_call, call, traced=False)
        return status == "ok" and not self.equiv.differences(obs, first_obs)

    # -- constructions (methods) ------------------------------------------------------------

    def find_constructions(self):
        """Constructor calls of the method's class that succeed deterministically."""
        self.constructions = []  # (args, kwargs) specs
        if self.cls is None or self.method_kind in ("static", "class", "init"):
            return
        cls, reference, equiv = self.cls, self.reference, self.equiv
        init = inspect.unwrap(getattr(cls, "__init__", None) or object.__init__)
        try:
            sig = inspect.signature(cls)
        except (TypeError, ValueError):
            sig = inspect.Signature()
        node = function_node(init) if inspect.isfunction(init) else None
        # The method's own literals (thresholds on the instance's state) help too.
        literals = dedupe(body_literals(node) + self.literals, limit=60)
        pools = PoolMaker(reference, literals, instance_finder=self.instances_of)
        space = InputSpace(
            sig, pools, _annotations(init), getattr(init, "__globals__", vars(reference)), node
        )
        self.ctor_space = space
        seeds = [space.from_call(c) for c in self.doc_ctors]
        seeds += [space.from_call(ctor) for ctor, _ in self.doc_calls if ctor is not None]
        tracer = self._tracer_for(init) if inspect.isfunction(init) else ArcTracer(None, 0, -1)
        attempts_left = max(20, self.budget // 5)
        covered: set = set()
        kept_instances = []
        tried = set()
        last_error = "no constructor call was tried"
        base = space.base()
        candidates = itertools.chain(
            [s for s in seeds if s is not None],
            [base],
            space.homogeneous(base),
            space.variations(base),
            # Random combinations of pool values when nothing simpler worked.
            (space.random_input(self.rng, 1) for _ in range(attempts_left * 4)),
        )
        signatures = set()
        for inp in candidates:
            if len(self.constructions) >= MAX_CONSTRUCTIONS or attempts_left <= 0:
                break
            call = space.to_call(inp)
            if call is None:
                continue
            try:
                key = render(call)
            except Unwritable:
                continue
            if key in tried:
                continue
            tried.add(key)
            attempts_left -= 1
            try:
                self.check_budget()
            except Stop:
                break

            def prepare(call=call):
                return (build(call[0], reference), build(call[1], reference))

            def construct(built):
                return equiv.call_outcome(cls, built[0], built[1])

            status, outcome, arcs = self.executor.run(prepare, construct, tracer)
            if status != "ok":
                last_error = (
                    "timed out"
                    if status == "timeout"
                    else f"{type(outcome).__qualname__}: {outcome}"
                )
                continue
            if outcome[0] != "return":
                last_error = equiv.describe_outcome(outcome)
                continue
            instance = outcome[1]
            new_arcs = arcs - covered
            # Keep constructions that reach new arcs of __init__, give the instance attributes
            # of new types (a str where others had an int), or a few distinct states.
            signature = _state_signature(instance)
            distinct = all(not equiv.equivalent(instance, other) for other in kept_instances)
            if (
                self.constructions
                and not new_arcs
                and signature in signatures
                and not (distinct and len(self.constructions) < 3)
            ):
                continue
            signatures.add(signature)
            status2, outcome2, _ = self.executor.run(prepare, construct)
            if (
                status2 != "ok"
                or outcome2[0] != "return"
                or not equiv.equivalent(outcome2[1], instance)
            ):
                last_error = "the construction is not deterministic"
                continue
            covered |= arcs
            kept_instances.append(instance)
            self.constructions.append(call)
        if not self.constructions:
            raise ExploreError(f"could not construct {cls.__qualname__}: {last_error}")

    def instances_of(self, cls) -> list:
        """A few constructor expressions for a class of the reference module used in an
        annotation (validated by building them; literal arguments only)."""
        path = class_path(self.reference, cls)
        if path is None or issubclass(cls, BaseException):
            return []
        if cls is self.cls and getattr(self, "constructions", None):
            # The method's own class: the constructions that worked.
            return [New(path, args, kwargs.items()) for args, kwargs in self.constructions]
        if not hasattr(self, "_instances"):
            self._instances = {}
        if cls in self._instances:
            return self._instances[cls]
        self._instances[cls] = []
        init = inspect.unwrap(getattr(cls, "__init__", object.__init__))
        try:
            sig = inspect.signature(cls)
        except (TypeError, ValueError):
            return []
        node = function_node(init) if inspect.isfunction(init) else None
        # A constructor parameter annotated with another class of the repository gets instances
        # of it in turn (a Context needs a Command), two levels deep at most.
        self._instance_depth = getattr(self, "_instance_depth", 0) + 1
        try:
            finder = self.instances_of if self._instance_depth < 3 else None
            pools = PoolMaker(self.reference, body_literals(node), instance_finder=finder)
            space = InputSpace(
                sig,
                pools,
                _annotations(init),
                getattr(init, "__globals__", vars(self.reference)),
                node,
            )
            found = []
            base = space.base()
            for n, inp in enumerate([base, *space.variations(base)]):
                if len(found) >= 4 or n >= 24:
                    break
                call = space.to_call(inp)
                if call is None:
                    continue
                spec = New(path, call[0], call[1].items())
                if not writable(spec):
                    continue
                status, outcome, _ = self.executor.run(
                    lambda spec=spec: spec,
                    lambda s: self.equiv.call_outcome(build, (s, self.reference), {}),
                )
                # Helper constructions are not executions of the target.
                self.executor.executions -= 1
                if status == "ok" and outcome[0] == "return" and spec not in found:
                    found.append(spec)
        finally:
            self._instance_depth -= 1
        self._instances[cls] = found
        return found

    # -- the search -------------------------------------------------------------------------

    def run(self) -> dict:
        self.finalizing = False
        self.load()
        target_names = {self.qualname.split(".")[-1]}
        class_name = self.cls.__name__ if self.cls is not None else None
        docs = [inspect.getdoc(self.func) if callable(self.func) else None]
        if self.cls is not None:
            docs += [inspect.getdoc(self.cls), inspect.getdoc(getattr(self.cls, "__init__", None))]
        self.doc_calls, self.doc_ctors = docstring_calls(
            docs, target_names, class_name, self.reference
        )
        try:
            self.find_constructions()
        except Stop:
            if (
                not getattr(self, "constructions", None)
                and self.cls is not None
                and self.method_kind not in ("static", "class", "init")
            ):
                raise ExploreError(
                    f"could not construct {self.cls.__qualname__} within the budget"
                ) from None

        own = []
        if self.cls is not None:
            own = self.instances_of(self.cls)
        pools = PoolMaker(
            self.reference, self.literals, own_instances=own, instance_finder=self.instances_of
        )
        self.space = InputSpace(self.signature, pools, self.annotations, self.globalns, self.node)
        ctor_count = len(self.constructions) if self.constructions else 1
        ctor0 = 0 if self.constructions else None

        self.corpus: list[Entry] = []
        self.tried_log: list[Entry] = []
        self.tried_keys: set = set()
        self.covered: set = set()
        self.kinds: set = set()

        try:
            # 1. Doctest examples and call sites, 2. the base input and its one-parameter
            # variations, 3. mutations of kept inputs.
            for ctor, call in self.doc_calls:
                index = self._construction_index(ctor)
                self.try_input(self.space.from_call(call, index if index is not None else ctor0))
            for site in self.req.get("call_sites") or []:
                call = _call_site_specs(site, self.reference)
                if call is not None:
                    self.try_input(self.space.from_call(call, ctor0))
            base = self.space.base(ctor0)
            self.try_input(base)
            for inp in itertools.chain(
                self.space.homogeneous(base), self.space.variations(base, ctor_count)
            ):
                self.try_input(inp)
            self.mutate_loop(ctor_count)
        except Stop:
            pass

        self.finalizing = True
        chosen = self.select()
        if not chosen:
            detail = f"{self.executor.executions} executions"
            if self.executor.timeouts:
                detail += f", {self.executor.timeouts} timed out"
            raise ExploreError(f"no input could be kept ({detail})")
        harness = self.render_harness(chosen)
        compile(harness, "<harness>", "exec")
        arcs = set()
        for e in chosen:
            arcs |= e.arcs
        return {
            "status": "ok",
            "harness": harness,
            "tests": len(chosen),
            "executions": self.executor.executions,
            "arcs": len(arcs),
            "outcomes": [e.kind for e in chosen],
            "time_limit_hit": self.time_limit_hit,
        }

    def _construction_index(self, ctor_call):
        if ctor_call is None or not self.constructions:
            return None
        inp = self.ctor_space.from_call(ctor_call)
        call = self.ctor_space.to_call(inp) if inp is not None else None
        try:
            key = render(tuple(call))
        except (Unwritable, TypeError):
            return None
        for i, c in enumerate(self.constructions):
            if render(tuple(c)) == key:
                return i
        return None

    def _calls_of(self, inp: Input):
        call = self.space.to_call(inp)
        if call is None:
            return None
        ctor_call = (
            self.constructions[inp.ctor] if self.constructions and inp.ctor is not None else None
        )
        return ctor_call, call

    def try_input(self, inp: Input | None) -> bool:
        """Runs an input once (if new) and keeps it when it reaches new arcs or a new kind of
        outcome and behaves deterministically. Returns False for an input already tried."""
        if inp is None:
            return True
        calls = self._calls_of(inp)
        if calls is None:
            return True
        ctor_call, call = calls
        try:
            key = render((ctor_call, call))
        except (Unwritable, RecursionError):
            return True
        if key in self.tried_keys:
            return False
        self.tried_keys.add(key)
        status, obs, arcs = self.execute(ctor_call, call)
        if status != "ok":
            return True
        self.seq += 1
        kind = self.equiv.outcome_kind(obs.outcome)
        entry = Entry(
            inp,
            key,
            ctor_call,
            call,
            arcs,
            kind,
            obs.returned,
            _value_key(self.equiv, obs),
            self.seq,
            then=bool(getattr(obs, "then", ())),
        )
        if (arcs - self.covered or kind not in self.kinds) and self.is_deterministic(
            ctor_call, call, obs
        ):
            self.corpus.append(entry)
            self.covered |= arcs
            self.kinds.add(kind)
        elif len(self.tried_log) < MAX_TRIED_LOG:
            self.tried_log.append(entry)
        return True

    def mutate_loop(self, ctor_count: int):
        rng = self.rng
        dims = len(self.space.params) + (1 if ctor_count > 1 else 0)
        streak = 0
        while streak < MAX_DUPLICATE_STREAK:
            if not self.corpus or rng.random() < 0.1 or dims == 0:
                inp = self.space.random_input(rng, ctor_count)
            else:
                inp = rng.choice(self.corpus).inp
                for _ in range(2 if rng.random() < 0.25 else 1):
                    inp = self.mutate(inp, rng, ctor_count)
            streak = 0 if self.try_input(inp) else streak + 1

    def mutate(self, inp: Input, rng, ctor_count: int) -> Input:
        params = self.space.params
        dim = rng.randrange(len(params) + (1 if ctor_count > 1 else 0))
        if dim == len(params):
            return Input(rng.randrange(ctor_count), inp.values)
        p = params[dim]
        current = inp.values[dim]
        r = rng.random()
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            value = (
                tuple(mutate_value(list(current), rng, params[0].pool if params else []))
                if r < 0.6
                else rng.choice(p.pool)
            )
        elif current is OMIT or r < 0.3:
            value = rng.choice(p.pool)
        elif r < 0.4:
            # A value of another source: any parameter's pool or the common values (within
            # the annotation's types for an annotated parameter).
            other = [v for q in params for v in q.pool] + COMMON_VALUES
            if p.shapes is not None:
                other = [v for v in other if shape(v) in p.shapes] or p.pool
            value = rng.choice(other)
        elif not p.required and r < 0.45:
            value = OMIT
        else:
            value = mutate_value(current, rng, p.pool)
        return inp.replace(dim, value)

    # -- choosing the tests -----------------------------------------------------------------

    def select(self) -> list[Entry]:
        """Up to max_tests inputs: a greedy cover of the arcs and outcome kinds of the corpus,
        then (preferably) at least 3 tests and one normal return, topped up from the inputs
        tried but not kept. Returned in discovery order."""
        chosen: list[Entry] = []
        arcs: set = set()
        kinds: set = set()
        while len(chosen) < self.max_tests:
            best, best_gain = None, 0
            for e in self.corpus:
                if e in chosen:
                    continue
                gain = len(e.arcs - arcs) + (1 if e.kind not in kinds else 0)
                if gain > best_gain:
                    best, best_gain = e, gain
            if best is None:
                break
            chosen.append(best)
            arcs |= best.arcs
            kinds.add(best.kind)
        wanted = min(3, self.max_tests)
        for e in self.corpus:
            if len(chosen) >= wanted:
                break
            if e not in chosen:
                chosen.append(e)
        # At least one test where the reference returns normally, if any input did.
        if not any(e.returned for e in chosen):
            normal = next((e for e in self.corpus if e.returned), None)
            if normal is None:
                normal = self._top_up(lambda e: e.returned, 1, chosen)
                normal = normal[0] if normal else None
            if normal is not None and normal not in chosen:
                if len(chosen) >= self.max_tests:
                    chosen.pop()
                chosen.append(normal)
        # Top up: normal returns with distinct values, other distinct outcomes, then any.
        for accept, distinct in (
            (lambda e: e.returned, True),
            (lambda e: True, True),
            (lambda e: True, False),
        ):
            if len(chosen) < wanted:
                chosen += self._top_up(accept, wanted - len(chosen), chosen, distinct)
        chosen.sort(key=lambda e: e.seq)
        return chosen

    def _top_up(self, accept, count, chosen, distinct=True) -> list[Entry]:
        """Up to `count` tried inputs (with outcomes distinct from those chosen, if
        `distinct`), re-run twice to make sure they are deterministic."""
        out = []
        seen = {e.value_key for e in chosen}
        for e in self.tried_log:
            if len(out) >= count:
                break
            if not accept(e) or e in chosen or (distinct and e.value_key in seen):
                continue
            try:
                status, obs, _ = self.execute(e.ctor_call, e.call, traced=False)
                if status != "ok" or not self.is_deterministic(e.ctor_call, e.call, obs):
                    continue
            except Stop:
                break
            seen.add(e.value_key)
            out.append(e)
        return out

    # -- writing the harness ----------------------------------------------------------------

    def render_harness(self, chosen: list[Entry]) -> str:
        parts = self.qualname.split(".")
        test_class = "Test" + "".join(
            p[:1].upper() + p[1:] for p in re.split(r"[_.]+", self.qualname) if p
        )
        if not test_class.isidentifier():
            test_class = "TestTarget"
        lines = [
            f'"""Equivalence tests for {self.module_name}.{self.qualname} (written by r2e_explore)."""',
            "",
            "import unittest",
            "",
            "import r2e_equiv",
            "",
            "candidate, reference = r2e_equiv.harness_modules()",
        ]
        if self.cls is None:
            local = _local_name(parts[-1], "target")
            lines += [
                f"{local} = candidate.{self.qualname}",
                f"reference_{local} = reference.{self.qualname}",
            ]
        else:
            class_qualname = ".".join(parts[:-1])
            local = _local_name(parts[-2], "TargetClass")
            lines += [
                f"{local} = candidate.{class_qualname}",
                f"reference_{local} = reference.{class_qualname}",
            ]
        lines += ["", "", f"class {test_class}(unittest.TestCase):"]
        for i, e in enumerate(chosen):
            args, kwargs = e.call
            lines.append(f"    def test_{i}(self):")
            if self.cls is None:
                lines += [
                    f"        args = {render(tuple(args))}",
                    f"        kwargs = {render(dict(kwargs))}",
                ]
                if e.then:
                    # The target returned a function: it is called too, on each of these.
                    lines += [
                        f"        then = {render(THEN_CALLS)}",
                        f"        r2e_equiv.check_function(self, {local}, reference_{local}, args, kwargs, then)",
                    ]
                else:
                    lines.append(
                        f"        r2e_equiv.check_function(self, {local}, reference_{local}, args, kwargs)"
                    )
            else:
                ctor_args, ctor_kwargs = e.ctor_call if e.ctor_call is not None else ((), {})
                lines += [
                    f"        ctor_args = {render(tuple(ctor_args))}",
                    f"        ctor_kwargs = {render(dict(ctor_kwargs))}",
                    f"        args = {render(tuple(args))}",
                    f"        kwargs = {render(dict(kwargs))}",
                    f"        r2e_equiv.check_method(self, {local}, reference_{local}, ctor_args, ctor_kwargs, {parts[-1]!r}, args, kwargs)",
                ]
            lines.append("")
        lines += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
        return "\n".join(lines)


_RESERVED = {
    "unittest",
    "r2e_equiv",
    "candidate",
    "reference",
    "args",
    "kwargs",
    "ctor_args",
    "ctor_kwargs",
    "self",
}


def _local_name(name: str, fallback: str) -> str:
    if (
        not name.isidentifier()
        or keyword.iskeyword(name)
        or name in _RESERVED
        or name.startswith("Test")
    ):
        return fallback
    return name


def _state_signature(instance):
    """The names and types of an instance's attributes."""
    state = getattr(instance, "__dict__", None)
    items = list(state.items()) if isinstance(state, dict) else []
    for klass in type(instance).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if hasattr(instance, name):
                items.append((name, getattr(instance, name)))
    return tuple(sorted((name, type(value).__name__) for name, value in items))


def _value_key(equiv, obs) -> str:
    """A short text identifying an outcome, to prefer distinct outcomes when topping up."""
    if obs.outcome[0] == "return":
        key = "return " + equiv.short_repr(obs.outcome[1], 120)
    else:
        key = f"raise {obs.outcome[1]}: {obs.outcome[2][:120]}"
    state = getattr(obs.instance, "__dict__", None)
    if isinstance(state, dict):
        key += " with " + equiv.short_repr(state, 120)
    return key


def _annotations(func) -> dict:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return dict(getattr(func, "__annotations__", None) or {})


def _call_site_specs(site: dict, reference):
    """(args, kwargs) specs from a call site's argument source texts; unconvertible arguments
    are _UNKNOWN (they take base values)."""

    def convert(text):
        try:
            return spec_from_node(ast.parse(str(text).strip(), mode="eval").body, reference)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return _UNKNOWN

    try:
        args = [convert(t) for t in site.get("args") or []]
        kwargs = {str(k): convert(t) for k, t in (site.get("kwargs") or {}).items()}
    except AttributeError:
        return None
    return (args, kwargs)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def explore(request: dict) -> dict:
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

    try:
        return Explorer(request, r2e_equiv).run()
    except ExploreError as exc:
        return {"status": "error", "error": str(exc)}


_REEXEC_MARKER = "R2E_EXPLORE_REEXECUTED"


def _ensure_hash_seed():
    """Re-executes the interpreter with PYTHONHASHSEED=0 so that hash-order-dependent code
    (set iteration in the code under test) explores the same way on every run.

    The Rust side runs the explorer with `-I`, which ignores PYTHON* environment variables: the
    re-executed command replaces `-I` by its other parts (`-s -P`) and drops PYTHON* variables
    itself, so it stays as isolated while honouring the seed. Tried once (a marker variable).
    """
    if sys.flags.hash_randomization == 0 or os.environ.get(_REEXEC_MARKER) or not sys.executable:
        return
    argv = _reexec_argv()
    if argv is None:
        return
    env = dict(os.environ)
    if sys.flags.ignore_environment:
        env = {k: v for k, v in env.items() if not k.startswith("PYTHON")}
    env.update({"PYTHONHASHSEED": "0", _REEXEC_MARKER: "1"})
    with contextlib.suppress(OSError):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, argv, env)


def _reexec_argv() -> list[str] | None:
    """The original command line with -I/-E taken out of the interpreter options."""
    orig = list(getattr(sys, "orig_argv", None) or [])
    script = sys.argv[0] if sys.argv else None
    if not orig or not script or script not in orig[1:]:
        return None
    index = orig.index(script, 1)
    options, rest = orig[1:index], orig[index:]
    kept, isolated = [], False
    i = 0
    while i < len(options):
        option = options[i]
        if option in ("-X", "-W", "-c", "-m"):
            kept += options[i : i + 2]
            i += 2
            continue
        if option.startswith(("-X", "-W")) or option.startswith("--") or not option.startswith("-"):
            kept.append(option)
        else:
            flags = option[1:]
            isolated = isolated or "I" in flags
            flags = flags.replace("I", "").replace("E", "")
            if flags:
                kept.append("-" + flags)
        i += 1
    if isolated:
        kept += ["-s", "-P"]
    return [sys.executable, *kept, *rest]


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
