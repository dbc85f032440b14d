"""Equivalence helper imported by r2e's generated test harnesses.

A harness compares a *candidate* implementation of one function (or method) with the
*reference*, the repository's original. This module

- loads both versions of the target module (`load_pair`, `harness_modules`);
- runs one call on each side on deep copies of the same inputs and records what happened
  (`observe_function`, `observe_method`): the outcome (a return value or an exception), the
  arguments' states after the call, for methods the instance's state, and the warnings the
  module under test's own code issued;
- compares two observations structurally (`equivalent`, `differences`) and fails a
  `unittest.TestCase` with a readable message (`check_function`, `check_method`);
- records a few calls of the reference (call, outcome, argument and return types) while a
  harness runs (`recording`), as examples for the docstring refinement.

Standard library only (numpy and pandas values are compared specially when those libraries are
already imported by the code under test). The explorer (r2e_explore.py) reuses the observation
and comparison functions so that what it keeps is exactly what a harness will accept.
"""

from __future__ import annotations

import ast
import collections.abc
import contextlib
import copy
import enum
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import io
import itertools
import math
import os
import re
import reprlib
import sys
import types
import warnings

# The snapshot's readers of a value, which trust none of its own code (`r2e_snapshot` travels
# with this module in every job): an attribute whose reading raises, and the builtin
# containers read through their builtin types' methods.
import r2e_snapshot
from r2e_snapshot import _SEQUENCES, _SETS, _base, _items_of, _Raised, _read

__all__ = [
    "CALLS",
    "CallRecorder",
    "Observation",
    "Timeout",
    "call_outcome",
    "check_function",
    "compare",
    "decided",
    "check_method",
    "describe_outcome",
    "differences",
    "equivalent",
    "harness_modules",
    "load_file_as_module",
    "load_pair",
    "method_kind",
    "observe_function",
    "observe_method",
    "outcome_kind",
    "recording",
    "short_repr",
]

# One record per check_function/check_method call: {"returned_normally": bool}, where
# "returned normally" means the *reference* call returned instead of raising. The runner clears
# this list before each test and reads it afterwards.
CALLS: list[dict] = []

# The part of `differences` where two values could not be compared (`compare` is None).
NOT_COMPARABLE = "not comparable"

# How many items of an iterator/generator are compared.
MAX_ITEMS = 1000
# Bound on each side's representation in failure messages.
REPR_LIMIT = 300


class Timeout(BaseException):
    """Raised by a caller's timer (the explorer's SIGALRM handler) to abandon a call.

    It derives from BaseException so that `except Exception` in the code under test does not
    swallow it, and the observers below let it propagate instead of recording it as an outcome.
    """


# --------------------------------------------------------------------------------------------
# Loading the reference and the candidate
# --------------------------------------------------------------------------------------------


class FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles the file every time and never touches `__pycache__`.

    Candidate files and harnesses are rewritten in place, possibly within the same second and
    with the same size, which would fool the mtime/size check of cached bytecode.
    """

    def get_code(self, fullname):
        source = self.get_data(self.path)
        return self.source_to_code(source, self.path)


def load_file_as_module(name: str, path: str, *, package_paths=None) -> types.ModuleType:
    """Executes the Python file `path` as a new module called `name` (not put in sys.modules)."""
    loader = FreshSourceLoader(name, path)
    spec = importlib.util.spec_from_file_location(
        name, path, loader=loader, submodule_search_locations=package_paths
    )
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# module name -> (candidate module, reference module), filled by load_pair. Used to hand the
# candidate side its own twins of the reference module's classes (see _twin_memo).
_PAIRS: dict[str, tuple[types.ModuleType, types.ModuleType]] = {}
_TWIN_MEMOS: dict[str, dict[int, object]] = {}


def load_pair(module: str, candidate_file: str | None):
    """Returns (candidate_module, reference_module) for the dotted module name `module`.

    The reference is imported normally. Without a candidate file the candidate *is* the
    reference module object. Otherwise the candidate file (a full copy of the module's source
    with one definition replaced) is executed as a separate module object with the same name
    and package, so relative imports resolve exactly as in the original, while
    `sys.modules[module]` keeps pointing at the reference.
    """
    reference = importlib.import_module(module)
    if candidate_file is None:
        candidate = reference
    else:
        # A package's __init__ is its own package: give the candidate the same search path so
        # that its spec's parent (hence __package__) is the package itself.
        package_paths = list(reference.__path__) if hasattr(reference, "__path__") else None
        loader = FreshSourceLoader(module, candidate_file)
        spec = importlib.util.spec_from_file_location(
            module, candidate_file, loader=loader, submodule_search_locations=package_paths
        )
        candidate = importlib.util.module_from_spec(spec)
        candidate.__package__ = reference.__package__
        # Module-level code often locates data files relative to __file__: let the candidate
        # see the original's location (its code objects still name the candidate file).
        if getattr(reference, "__file__", None):
            candidate.__file__ = reference.__file__
        with _submodules_visible(module):
            loader.exec_module(candidate)
    _PAIRS[module] = (candidate, reference)
    _TWIN_MEMOS.pop(module, None)
    _KEPT_MEMOS.pop(module, None)
    return candidate, reference


_MISSING = object()


@contextlib.contextmanager
def _submodules_visible(module: str):
    """While the candidate module runs, let every package attribute named like one of its loaded
    submodules refer to that submodule, as it did when the original first ran during its
    package's import. (A package that re-exports a function named like a submodule, as in
    ``from .wrap import wrap``, would otherwise turn ``import pkg.wrap as m`` into the function.)
    """
    root = module.split(".")[0]
    saved = []
    for name, sub in list(sys.modules.items()):
        if sub is None or not name.startswith(root + "."):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None:
            continue
        current = parent.__dict__.get(attr, _MISSING)
        if current is not sub:
            saved.append((parent, attr, current))
            setattr(parent, attr, sub)
    try:
        yield
    finally:
        for parent, attr, current in reversed(saved):
            if current is _MISSING:
                delattr(parent, attr)
            else:
                setattr(parent, attr, current)


# How harnesses run (set by the runner through R2E_MODE):
# - "record": the process holds the original module only; each check records the original's
#   observation (RECORDS) and passes.
# - "candidate": the process holds the candidate only (installed under the module's name in
#   place of the original, whose file the sandbox hides); each check records the candidate's
#   observation. r2e compares both sides' records outside these processes.
# - "pair" (no R2E_MODE: the explorer, tests): both modules in one process, compared here.
MODE_RECORD, MODE_CANDIDATE, MODE_PAIR = "record", "candidate", "pair"

# One list of observation snapshots per check made in the current test (record and candidate
# modes); the runner clears it before each test and reads it afterwards.
RECORDS: list[dict] = []


def mode() -> str:
    return os.environ.get("R2E_MODE") or MODE_PAIR


class CandidateLoader(FreshSourceLoader):
    """Executes the candidate file in place of the module's own file: the module keeps the
    original's `__file__` (code that finds data files next to it still does), and its source
    is the candidate's."""

    def __init__(self, fullname, origin, candidate):
        super().__init__(fullname, origin)
        self.candidate = candidate

    def get_data(self, path):
        if path == self.path:
            with open(self.candidate, "rb") as f:
                data = f.read()
            _source_is(self.path, data)
            return data
        return super().get_data(path)


def _source_is(path: str, data: bytes) -> None:
    """Makes `data` the source `inspect` and `traceback` read for `path` (the original's file,
    which the sandbox hides from a candidate's process): code that reads its module's or its
    functions' source at import time (typeguard's `@typechecked` instruments a function from
    its module's source) finds the candidate's, whose lines are those of its code objects. An
    entry without a modification time is never checked against the file (`linecache`)."""
    import linecache

    try:
        lines = importlib.util.decode_source(data).splitlines(keepends=True)
    except (SyntaxError, UnicodeDecodeError):
        return
    linecache.cache[path] = (len(data), None, lines, path)


class CandidateFinder:
    """Imports the candidate file under the target module's name (candidate mode): the
    original module is not in the process at all (the sandbox hides its file). A meta path
    finder needs only `find_spec`; `importlib.abc` (and `asyncio`, imported when a coroutine is
    returned) are left out of the warm worker's imports, which every worker pays for."""

    def __init__(self, module: str, path: str):
        self.module = module
        self.path = path

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.module:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = spec.origin if spec is not None and spec.origin else self.path
        # A package's __init__ keeps its package's search path (the original folder).
        locations = spec.submodule_search_locations if spec is not None else None
        loader = CandidateLoader(fullname, origin, self.path)
        return importlib.util.spec_from_file_location(
            fullname, origin, loader=loader, submodule_search_locations=locations
        )


class ProjectOverlay:
    """The project layer (R2E_PROJECT: the repository built as a wheel and installed, its
    modules stripped) behind the checkout: a package the checkout holds also searches its folder
    in the layer, for what only the build made (built extensions, generated modules)."""

    def __init__(self, site_dir: str):
        self.site_dir = site_dir

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.submodule_search_locations is None:
            return spec
        extra = os.path.join(self.site_dir, *fullname.split("."))
        if os.path.isdir(extra) and extra not in list(spec.submodule_search_locations):
            spec.submodule_search_locations.append(extra)
        return spec


def loads(data: bytes):
    """A value a harness writes as a pickle (`r2e_equiv.loads(b"...")`): an argument captured
    while the project's own tests ran (`r2e_capture.py`) that no literal writes. A value it
    holds that a module of the project holds too (or an entry of a table one holds) is named in
    it and looked up."""
    import pickle

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            # ("global", module, name), or ("item", module, name, key): an entry of one.
            if isinstance(pid, tuple) and pid[0] in ("global", "item"):
                value = getattr(importlib.import_module(pid[1]), pid[2])
                return value[pid[3]] if pid[0] == "item" else value
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")

    return Unpickler(io.BytesIO(data)).load()


def rebuild_match(pattern, string, pos, endpos, how):
    """The `re.Match` a captured argument was: `pattern.search` or `pattern.match` of `string`
    from `pos` to `endpos`."""
    return getattr(pattern, how)(string, pos, endpos)


def use_project_layer() -> None:
    """Puts the project layer (if the job has one) on sys.path after the environment's packages,
    its .pth files read, and the overlay of its packages in place. Idempotent."""
    site_dir = os.environ.get("R2E_PROJECT")
    if not site_dir or any(isinstance(f, ProjectOverlay) for f in sys.meta_path):
        return
    import site

    site.addsitedir(site_dir)
    index = next(
        (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
        len(sys.meta_path),
    )
    sys.meta_path.insert(index, ProjectOverlay(site_dir))


def install_candidate(module: str, path: str) -> None:
    """From now on, importing `module` executes the candidate file `path`."""
    sys.meta_path.insert(0, CandidateFinder(module, path))


def harness_modules():
    """The modules a harness compares: in record and candidate modes, the one module the process
    holds (under R2E_MODULE), twice; in pair mode, `load_pair` driven by R2E_MODULE and
    (optional) R2E_CANDIDATE_FILE. Inside `recording(qualname)` the reference's target is
    wrapped to record its calls."""
    name = os.environ["R2E_MODULE"]
    if mode() in (MODE_RECORD, MODE_CANDIDATE):
        module = importlib.import_module(name)
        if _RECORDER is not None and mode() == MODE_RECORD:
            _RECORDER.install(module)
        return module, module
    candidate, reference = load_pair(name, os.environ.get("R2E_CANDIDATE_FILE") or None)
    if _RECORDER is not None:
        _RECORDER.install(reference)
    return candidate, reference


def _twin_memo(module_name: str | None) -> dict[int, object]:
    """A deepcopy memo mapping the reference module's classes, enum members and functions to
    the candidate module's objects of the same name.

    Harness inputs built from the reference module's classes (``reference.Interval(1, 3)``) are
    deep-copied for the candidate with this memo, so the candidate receives instances of *its
    own* classes (deepcopy reconstructs instances through their class, which the memo maps) and
    `isinstance` checks or identity comparisons with enum members inside the candidate behave as
    they do in the reference. Empty when the candidate is the reference module.
    """
    if module_name is None:
        return {}
    memo = _TWIN_MEMOS.get(module_name)
    if memo is not None:
        return memo
    memo = {}
    pair = _PAIRS.get(module_name)
    if pair is not None and pair[0] is not pair[1]:
        candidate, reference = pair

        def visit(ref_ns, cand_ns, depth):
            for name, ref_value in list(vars(ref_ns).items()):
                cand_value = getattr(cand_ns, name, None)
                if cand_value is None or cand_value is ref_value:
                    continue
                if isinstance(ref_value, type) and isinstance(cand_value, type):
                    if ref_value.__module__ != reference.__name__:
                        continue
                    memo[id(ref_value)] = cand_value
                    if issubclass(ref_value, enum.Enum) and issubclass(cand_value, enum.Enum):
                        for member_name, member in ref_value.__members__.items():
                            twin = cand_value.__members__.get(member_name)
                            if twin is not None:
                                memo[id(member)] = twin
                    elif depth < 3:
                        visit(ref_value, cand_value, depth + 1)
                elif (
                    depth == 0
                    and isinstance(ref_value, types.FunctionType)
                    and isinstance(cand_value, types.FunctionType)
                ):
                    memo[id(ref_value)] = cand_value
                elif type(ref_value) is object and type(cand_value) is object:
                    # A sentinel (`_KEY = object()`): the candidate's own of that name.
                    memo[id(ref_value)] = cand_value

        visit(reference, candidate, 0)
    _TWIN_MEMOS[module_name] = memo
    return memo


# --------------------------------------------------------------------------------------------
# Observing one call
# --------------------------------------------------------------------------------------------

_NO_INSTANCE = object()

# module name -> a deepcopy memo that keeps the module's sentinels (see _kept_memo).
_KEPT_MEMOS: dict[str, dict[int, object]] = {}


def _kept_memo(module_name: str | None) -> dict[int, object]:
    """A deepcopy memo that keeps the sentinels of a module (bare `object()` values at its top
    level or in its classes' namespaces) as they are: a copy of one is a new object, which an
    identity check (`if key is not _KEY: raise`) tells from the original, while a sentinel has
    no state a call could change. The memo each side's inputs are copied with when it is given
    none (the candidate's twin memo maps them to the candidate's own)."""
    module = sys.modules.get(module_name) if module_name is not None else None
    if module is None:
        return {}
    memo = _KEPT_MEMOS.get(module_name)
    if memo is None:
        memo = {}
        classes = [
            v for v in list(vars(module).values())
            if isinstance(v, type) and getattr(v, "__module__", None) == module_name
        ]
        for namespace in [module, *classes]:
            for value in list(vars(namespace).values()):
                if type(value) is object:
                    memo[id(value)] = value
        _KEPT_MEMOS[module_name] = memo
    return memo


class Iterated:
    """The first MAX_ITEMS items produced by an iterator or generator that a call returned."""

    def __init__(self, type_name: str, items: list):
        self.type_name = type_name
        self.items = items

    def __repr__(self):
        return f"<{self.type_name} yielding {reprlib.repr(self.items)}>"


class Observation:
    """What one side of a comparison did.

    outcome: ("return", value) or ("raise", exception type's qualified name, message).
    args, kwargs: the arguments' states after the call.
    instance: the instance's state after a method call (_NO_INSTANCE for functions, static and
    class methods, or when the constructor raised).
    warned: the warnings the module under test's own code issued during the observation
    (`Warned`, in order; `_warnings_of`).
    """

    __slots__ = ("outcome", "args", "kwargs", "instance", "then", "warned")

    def __init__(self, outcome, args, kwargs, instance=_NO_INSTANCE, then=(), warned=()):
        self.outcome = outcome
        self.args = args
        self.kwargs = kwargs
        self.instance = instance
        # The outcomes of the `then` calls of what the call returned (a closure, a decorator's
        # wrapper, a parser and its methods), in order, as (outcome, nested, name) triples;
        # () when nothing was called (`_call_returned`).
        self.then = then
        self.warned = tuple(warned)

    @property
    def returned(self) -> bool:
        return self.outcome[0] == "return"

    def __repr__(self):
        return f"Observation({describe_outcome(self.outcome)})"


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _normalize_message(text: str) -> str:
    """Drops memory addresses, which differ between two otherwise identical objects."""
    return _ADDRESS.sub(" at 0x?", text)


class Raised(tuple):
    """("raise", type's qualified name, message), which also knows the type's module
    (`module_type`: `module.qualname`, as snapshots name types)."""


def _exception_outcome(exc: BaseException):
    try:
        message = str(exc)
    except Exception:  # a broken __str__ is still an outcome
        message = f"<unprintable {type(exc).__qualname__}>"
    outcome = Raised(("raise", type(exc).__qualname__, _normalize_message(message)))
    module = type(exc).__module__
    outcome.module_type = (
        type(exc).__qualname__ if module == "builtins" else f"{module}.{type(exc).__qualname__}"
    )
    return outcome


# Values deepcopy gives back as they are (no memo maps them: it holds classes, functions,
# enum members and bare sentinels), so a call whose arguments are all such values, or tuples of
# them, needs no copy.
_ATOMS = frozenset({int, float, bool, str, bytes, complex, type(None)})


def _is_atomic(value, depth: int = 0) -> bool:
    t = type(value)
    if t in _ATOMS:
        return True
    return t is tuple and depth < 3 and len(value) <= 64 and all(
        _is_atomic(v, depth + 1) for v in value
    )


def _copy_call(args, kwargs, memo):
    """Deep copies of a call's (args, kwargs), as `_deep_copy` makes them; the arguments
    themselves when every one is atomic (the copy would be the same objects)."""
    args, kwargs = tuple(args), dict(kwargs)
    if all(_is_atomic(a) for a in args) and all(_is_atomic(v) for v in kwargs.values()):
        return args, kwargs
    return _deep_copy((args, kwargs), memo)


def _deep_copy(value, memo=None):
    """copy.deepcopy with a private copy of `memo`. Objects that refuse deepcopy (immutable
    classes whose ``__setattr__`` raises, for example) are rebuilt field by field; a value that
    cannot be copied at all is shared by both sides (then its mutations are not comparable)."""
    try:
        return copy.deepcopy(value, dict(memo) if memo else None)
    except Exception:
        try:
            return _rebuild(value, dict(memo) if memo else {})
        except Exception:
            return value


def _slot_names(cls):
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return [n for n in names if n not in ("__dict__", "__weakref__")]


def _rebuild(value, memo):
    """A deep copy that bypasses ``__setattr__``: containers element by element, objects of user
    classes through ``object.__new__`` of their (twin) class and ``object.__setattr__``."""
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, (int, float, complex, str, bytes, bool, type(None), type, types.FunctionType)):
        return value
    if isinstance(value, list):
        out = memo[key] = []
        out.extend(_rebuild(v, memo) for v in value)
        return out
    if isinstance(value, tuple):
        return type(value)(_rebuild(v, memo) for v in value) if type(value) is tuple else copy.deepcopy(value, memo)
    if isinstance(value, dict):
        out = memo[key] = type(value)()
        for k, v in value.items():
            out[_rebuild(k, memo)] = _rebuild(v, memo)
        return out
    if isinstance(value, (set, frozenset)):
        return type(value)(_rebuild(v, memo) for v in value)
    cls = memo.get(id(type(value)), type(value))
    out = object.__new__(cls)
    memo[key] = out
    for name in _slot_names(type(value)):
        if hasattr(value, name):
            object.__setattr__(out, name, _rebuild(getattr(value, name), memo))
    for name, v in getattr(value, "__dict__", {}).items():
        object.__setattr__(out, name, _rebuild(v, memo))
    return out


def _is_lazy_iterator(value) -> bool:
    # By `type()`: a proxy's `__class__` may lie, or raise.
    t = type(value)
    return issubclass(t, collections.abc.Iterator) and not issubclass(
        t, (str, bytes, bytearray, collections.abc.Sequence, collections.abc.Mapping)
    )


def _finish(value):
    """Runs a returned coroutine to completion and drains a returned iterator (so that
    exceptions and mutations that happen while iterating belong to the call)."""
    if inspect.iscoroutine(value):
        import asyncio

        loop = asyncio.new_event_loop()
        try:
            value = loop.run_until_complete(value)
        finally:
            loop.close()
    return _drained(value)


def _drained(value):
    """The value with iterators drained into Iterated: the value itself when it is one, and the
    items of a short tuple or list it returned (unzip's tuple of iterators; at most
    DRAINED_ITEMS items are looked at, so a large returned list costs nothing). Drained inside
    the call, a lazy value's items are part of the outcome: compared by the verdict, shown in
    messages, and never consumed by the first comparison."""
    if _is_lazy_iterator(value):
        return Iterated(type(value).__name__, list(itertools.islice(value, MAX_ITEMS)))
    if type(value) in (tuple, list) and len(value) <= DRAINED_ITEMS:
        drained = [
            Iterated(type(v).__name__, list(itertools.islice(v, MAX_ITEMS)))
            if _is_lazy_iterator(v)
            else v
            for v in value
        ]
        if any(a is not b for a, b in zip(drained, value)):
            return type(value)(drained)
    return value


# The items of a returned tuple or list that are looked at for iterators to drain.
DRAINED_ITEMS = 64


# --------------------------------------------------------------------------------------------
# Warnings the code under test issues
# --------------------------------------------------------------------------------------------

# At most this many warnings are kept of one observation (a loop may warn on every turn).
MAX_WARNED = 16


class Warned(tuple):
    """(category's qualified name, message) of one warning, which also knows the category's
    module (`module_type`, as snapshots name types)."""


class _WarningLog:
    """The warnings being observed: `modules` (the names of the modules whose own calls of
    `warnings.warn` count) and `items` (None when nothing is observed)."""

    modules: frozenset = frozenset()
    items: list | None = None


# Kept on the installed wrapper, so that a second copy of this module (a reload, a harness's
# own import) shares the log and wraps the true original, never another copy's wrapper.
_ORIGINAL_WARN = getattr(warnings.warn, "r2e_original", warnings.warn)
_WARNING_LOG = getattr(warnings.warn, "r2e_log", None) or _WarningLog()


def _warned(message, category) -> Warned:
    if isinstance(message, Warning):
        category = type(message)
    elif not (isinstance(category, type) and issubclass(category, Warning)):
        category = UserWarning
    try:
        text = str(message)
    except Exception:  # a broken __str__ is still a warning
        text = f"<unprintable {category.__qualname__}>"
    warned = Warned((category.__qualname__, _normalize_message(text)[:REPR_LIMIT]))
    module = getattr(category, "__module__", "builtins")
    warned.module_type = (
        category.__qualname__ if module == "builtins" else f"{module}.{category.__qualname__}"
    )
    return warned


def _observed_warn(message, category=None, stacklevel=1, source=None, **kwargs):
    """`warnings.warn` while a harness runs: a call made by the module under test's own code
    (its caller's globals are that module's) is logged, then handed to the original warn,
    one frame further up, so that where the warning points is unchanged."""
    log = _WARNING_LOG
    if log.items is not None and len(log.items) < MAX_WARNED:
        try:
            caller = sys._getframe(1).f_globals.get("__name__")
        except (ValueError, AttributeError):
            caller = None
        if caller in log.modules:
            log.items.append(_warned(message, category))
    if isinstance(stacklevel, int):
        stacklevel += 1
    return _ORIGINAL_WARN(message, category, stacklevel, source, **kwargs)


# Installed when this module is imported, before the module under test is (a module that
# imported `warn` by name gets this one).
_observed_warn.r2e_original = _ORIGINAL_WARN
_observed_warn.r2e_log = _WARNING_LOG
warnings.warn = _observed_warn


# The modules whose names bound to the original `warnings.warn` were rebound (by id).
_REBOUND: set = set()


def _rebind_warn(module_name) -> None:
    """Rebinds, once per module, the names of the module bound to the original `warnings.warn`
    (a module imported before this one, `from warnings import warn`) to the wrapper, which
    passes every call on as it was and only logs inside `_warnings_of`."""
    module = sys.modules.get(module_name) if module_name else None
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict) or namespace is globals() or id(module) in _REBOUND:
        return
    _REBOUND.add(id(module))
    for name, value in list(namespace.items()):
        if value is _ORIGINAL_WARN:
            namespace[name] = _observed_warn


@contextlib.contextmanager
def _warnings_of(module_name):
    """Logs the warnings `module_name`'s own code issues inside the block, into the list it
    gives: what the code warns is part of what it does, whatever the process's filters show
    (each warning is logged before the filters see it). Warnings of other code (the standard
    library's deprecations, a dependency's) are not: a correct rewrite may call other APIs."""
    _rebind_warn(module_name)
    log = _WARNING_LOG
    saved = (log.modules, log.items)
    items: list = []
    log.modules, log.items = frozenset([module_name]) if module_name else frozenset(), items
    try:
        yield items
    finally:
        log.modules, log.items = saved


def call_outcome(fn, args, kwargs):
    """Calls fn and returns its outcome. Timeout and KeyboardInterrupt propagate; any other
    exception (SystemExit included) is an outcome."""
    try:
        return ("return", _finish(fn(*args, **kwargs)))
    except (Timeout, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - every exception is a behaviour to compare
        return _exception_outcome(exc)


def returns_callable(outcome) -> bool:
    """Whether an outcome is the return of a function (not a class): a closure, a wrapper."""
    if outcome[0] != "return":
        return False
    value = outcome[1]
    return callable(value) and not isinstance(value, type)


def sample_function(*args, **kwargs):
    """A function to hand to decorators and higher-order functions under test: it returns
    what it was called with."""
    return ("sample_function", args, kwargs)


def observe_function(fn, args, kwargs, *, copy_memo=None, then=(), module=None) -> Observation:
    """Calls fn on deep copies of (args, kwargs) and records the outcome and the arguments'
    states afterwards. `copy_memo` maps reference objects to candidate twins (_twin_memo).

    `then`: a list of calls made, on deep copies of their arguments, of what fn returned:
    (args, kwargs) calls the function fn returned (when it returned one), so that the
    behaviour of a returned closure is compared too; (args, kwargs, name) calls the method
    `name` of the object fn returned (when it has one), the way the project's own tests used
    what the function returned (`r2e_capture.py`'s uses: a returned parser's `parse_string`).
    A returned function's own zero-argument functions (a cache wrapper's `cache_info`) are
    called after them (`_attribute_functions`).
    `module`: the name of the module under test, whose warnings are observed (by default fn's
    module)."""
    own = _module_of(fn)
    module = own if module is None else module
    if copy_memo is None:
        copy_memo = _kept_memo(own)
    args, kwargs = _copy_call(args, kwargs, copy_memo)
    with _warnings_of(module) as warned:
        outcome = call_outcome(fn, args, kwargs)
        returned = _call_returned(outcome, then, copy_memo)
    return Observation(outcome, args, kwargs, then=returned, warned=warned)


# A function returned by a `then` call (a decorator factory's decorator's wrapper) is called in
# turn with the first few `then` calls and the last few of those the explorer made for the
# functions the target defines (after the THEN_GUESSES guesses: the last are the innermost
# function's, the wrapper's), once more.
_THEN_DEPTH = 2
_THEN_NESTED = 3
_THEN_NESTED_LAST = 6
# How many `then` calls are the explorer's guesses (len(r2e_explorer.specs.THEN_CALLS)), which
# come first.
THEN_GUESSES = 10


def _nested_calls(then):
    """The calls made of a function a `then` call returned. A returned callable that the
    target does not define (a parser element, whose call gives another) gets the first few
    only: its calls are many already. Method calls (named) are for the target's own return."""
    then = tuple(call for call in then if len(call) < 3)
    own = then[THEN_GUESSES:]
    return then[:_THEN_NESTED] + own[len(own) - min(_THEN_NESTED_LAST, len(own)) :]


# The zero-argument functions a returned function carries as attributes that are called after
# its `then` calls: at most this many, in name order.
_ATTRIBUTE_CALLS = 4


def _attribute_functions(fn) -> list:
    """(name, function) for the functions a returned Python function carries as attributes of
    its own (`wrapper.cache_info = ...`, as cachetools' caches do; functools' C wrappers have
    theirs on their type, not seen here) that take no arguments: what a project's tests call
    on a wrapper. Not dunder names (`__wrapped__` is the wrapped function), not classes."""
    own = getattr(fn, "__dict__", None)
    if not isinstance(own, dict) or not isinstance(fn, types.FunctionType):
        return []
    found = []
    for name in sorted(k for k in own if isinstance(k, str) and not k.startswith("__")):
        value = own[name]
        if isinstance(value, type) or not callable(value):
            continue
        try:
            parameters = inspect.signature(value).parameters.values()
        except (TypeError, ValueError):
            continue
        if all(
            p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in parameters
        ):
            found.append((name, value))
            if len(found) == _ATTRIBUTE_CALLS:
                break
    return found


def _method_owner(value, name: str):
    """(the value whose attribute a named `then` call calls, the attribute's name), or None
    when it has none (looked up without running its code; never a class or an atom). A name
    `[i].attr` is the attribute of item i of a returned tuple or list (a pair of parsers)."""
    if name.startswith("[") and "]." in name and isinstance(value, (tuple, list)):
        index, _, name = name[1:].partition("].")
        if not index.isdigit() or int(index) >= len(value):
            return None
        value = value[int(index)]
    if isinstance(value, type) or type(value) in _ATOMS:
        return None
    try:
        inspect.getattr_static(value, name)
    except AttributeError:
        return None
    return value, name


def _method_call(owner, name: str):
    return lambda *a, **k: getattr(owner, name)(*a, **k)


def _call_returned(outcome, then, copy_memo, depth=1):
    """((outcome, nested, name), ...) for each `then` call of what `outcome` returned: name is
    None for a call of the returned function itself, else the attribute called."""
    if not then or outcome[0] != "return":
        return ()
    returned = outcome[1]
    is_function = returns_callable(outcome)
    out = []
    for a, k, *named in then:
        name = named[0] if named else None
        if name is None:
            if not is_function:
                continue
            result = call_outcome(returned, *_copy_call(a, k, copy_memo))
            nested = (
                _call_returned(result, _nested_calls(then), copy_memo, depth + 1)
                if depth < _THEN_DEPTH
                else ()
            )
        else:
            owner = _method_owner(returned, name)
            if owner is None:
                continue
            result = call_outcome(_method_call(*owner), *_copy_call(a, k, copy_memo))
            nested = ()
        out.append((result, nested, name))
    if is_function and out:
        for name, fn in _attribute_functions(returned):
            out.append((call_outcome(fn, (), {}), (), name))
    return tuple(out)


def _then_differences(cand, ref, prefix, diffs, detailed=True, messages=True):
    if len(cand) != len(ref):
        diffs.append((prefix, "one side made calls of what it returned that the other did not"))
    for i, ((co, cn, cname), (ro, rn, rname)) in enumerate(zip(cand, ref)):
        where = f"{prefix} call {i}" if rname is None else f"{prefix}'s {rname}()"
        if cname != rname:
            diffs.append((where, f"{cname}() / {rname}()" if detailed else ""))
            continue
        if co[0] == "return":
            same = compare(co[1], ro[1]) if co[0] == ro[0] else False
        else:
            same = (co[1:] if messages else co[:2]) == (ro[1:] if messages else ro[:2])
        if same is None:
            diffs.append((NOT_COMPARABLE, where))
        elif not same:
            detail = f"{describe_outcome(co)} / {describe_outcome(ro)}" if detailed else ""
            diffs.append((where, detail))
        _then_differences(cn, rn, where + ", its returned function", diffs, detailed, messages)


def method_kind(cls, method_name: str) -> str:
    """'static', 'class', 'property', 'init' or 'instance' for the attribute `method_name`."""
    if method_name == "__init__":
        return "init"
    try:
        raw = inspect.getattr_static(cls, method_name)
    except AttributeError:
        return "instance"
    if isinstance(raw, staticmethod):
        return "static"
    if isinstance(raw, classmethod):
        return "class"
    if isinstance(raw, property):
        return "property"
    return "instance"


# The default of `receiver`: the instance is constructed from the constructor's arguments.
_CONSTRUCTED = object()


def observe_method(
    cls,
    ctor_args,
    ctor_kwargs,
    method_name,
    args,
    kwargs,
    *,
    copy_memo=None,
    then=(),
    setup=(),
    receiver=_CONSTRUCTED,
) -> Observation:
    """Observes `cls(*ctor_args, **ctor_kwargs).method_name(*args, **kwargs)` on deep copies.

    Static and class methods are called through the class (no instance is built). For
    `__init__` the call under test is the construction itself, from args/kwargs (ctor_args and
    ctor_kwargs are ignored), and its outcome is ("return", None). For a property the "call" is
    reading the attribute. A constructor that raises is the outcome (with no instance state).
    `then`: as for observe_function, the calls made of a function the method returned.
    `setup`: (method name, args) pairs called on the instance, in order, before the method
    (`("__setitem__", ("a", 1))` fills a mapping); one that raises is the outcome.
    `receiver`: an instance to call the method on (a deep copy of it) instead of constructing
    one: a receiver the project's own tests called the method on, or one a factory of the
    project built. Copied with `copy_memo`, an instance of the reference's class becomes one of
    the candidate's twin class.
    """
    module = getattr(cls, "__module__", None)
    with _warnings_of(module) as warned:
        obs = _observe_method(
            cls,
            ctor_args,
            ctor_kwargs,
            method_name,
            args,
            kwargs,
            _kept_memo(module) if copy_memo is None else copy_memo,
            then,
            setup,
            receiver,
        )
    obs.warned = tuple(warned)
    return obs


def _observe_method(
    cls, ctor_args, ctor_kwargs, method_name, args, kwargs, copy_memo, then, setup, receiver
) -> Observation:
    # (The receiver in a list: the default marker is not copied.)
    ctor_args, ctor_kwargs, args, kwargs, setup, given = _deep_copy(
        (
            tuple(ctor_args),
            dict(ctor_kwargs),
            tuple(args),
            dict(kwargs),
            tuple(setup),
            [] if receiver is _CONSTRUCTED else [receiver],
        ),
        copy_memo,
    )
    kind = method_kind(cls, method_name)
    if kind in ("static", "class"):
        outcome = call_outcome(getattr(cls, method_name), args, kwargs)
        return Observation(
            outcome, args, kwargs, then=_call_returned(outcome, then, copy_memo)
        )
    if kind == "init":
        holder = []
        outcome = call_outcome(lambda *a, **k: holder.append(cls(*a, **k)), args, kwargs)
        instance = holder[0] if holder else _NO_INSTANCE
        return Observation(outcome, args, kwargs, instance)
    if given:
        instance = given[0]
    else:
        built = call_outcome(cls, ctor_args, ctor_kwargs)
        if built[0] != "return":
            return Observation(built, args, kwargs)
        instance = built[1]
    for name, setup_args in setup:
        done = call_outcome(lambda *a, name=name: getattr(instance, name)(*a), setup_args, {})
        if done[0] != "return":
            return Observation(done, args, kwargs, instance)
    if kind == "property":
        outcome = call_outcome(lambda: getattr(instance, method_name), (), {})
    else:
        outcome = call_outcome(
            lambda *a, **k: getattr(instance, method_name)(*a, **k), args, kwargs
        )
    return Observation(
        outcome, args, kwargs, instance, then=_call_returned(outcome, then, copy_memo)
    )


# --------------------------------------------------------------------------------------------
# Structural equality
# --------------------------------------------------------------------------------------------


def _type_key(t: type):
    """Types are compared by module and qualified name, so a candidate module's twin of a
    reference class counts as the same type."""
    return (getattr(t, "__module__", None), getattr(t, "__qualname__", t.__name__))


_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__main__"}


def _is_user_class(t: type) -> bool:
    """A class from the repository or a third-party library (not builtins/stdlib)."""
    module = (getattr(t, "__module__", None) or "").partition(".")[0]
    return module not in _STDLIB


def _slot_names(t: type):
    names = []
    for klass in t.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for name in slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


_MISSING = object()


def _state(obj):
    """(vars, slots) of an object, or None when it exposes neither."""
    attrs = _read(obj, "__dict__", _MISSING)
    slots = _slot_names(type(obj))
    if not isinstance(attrs, dict) and not slots:
        return None
    slot_values = {name: _read(obj, name, _MISSING) for name in slots}
    return (dict.copy(attrs) if isinstance(attrs, dict) else {}, slot_values)


def _floats_close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _safe_eq(a, b) -> bool | None:
    """a == b as a bool, or None when == raises or does not give a truth value."""
    try:
        result = a == b
        if isinstance(result, bool):
            return result
        return bool(result)
    except Exception:
        return None


def _safe_repr(value) -> str:
    try:
        return _normalize_message(repr(value))
    except Exception:
        return f"<unrepresentable {type(value).__qualname__}>"


def compare(a, b) -> bool | None:
    """Whether two values produced by the candidate and the reference are the same
    (`equivalent`), or None when that cannot be decided: the values are nested too deep for a
    comparison, or code of theirs that the comparison needs raised. "Not comparable" is no
    verdict: the explorer keeps no test on it, and counts no mutant killed by it. Never
    raises."""
    try:
        return bool(_equiv(a, b, {}))
    except RecursionError:
        return None
    except Exception:  # noqa: BLE001 - a value's own code may raise anything
        return None


def equivalent(a, b) -> bool:
    """Structural equality of two values produced by the candidate and the reference.

    Same type (by module and qualified name: `type()`, never a proxy's `__class__`); floats
    with a tolerance (NaN equals NaN); bool is not int; builtin containers elementwise, as
    their builtin types hold them (whatever a subclass's methods say); objects of
    repository/third-party classes by their state (vars and __slots__; an attribute whose
    reading raises by the exception's type), cycle-safe; iterators by their first MAX_ITEMS
    items; numpy arrays and pandas frames/series with their libraries' tolerant comparisons;
    anything else by ==, then by repr. False when it cannot be decided (`compare`).
    """
    return compare(a, b) is True


def _equiv(a, b, memo: dict) -> bool:
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is not tb and _type_key(ta) != _type_key(tb):
        return False

    # Scalars. Enum first: IntEnum members are ints, and twins from the candidate module are
    # distinct objects with the same name.
    if issubclass(ta, enum.Enum):
        return a.name == b.name and _equiv(a.value, b.value, memo)
    if issubclass(ta, float):
        return _floats_close(a, b)
    if issubclass(ta, complex):
        return _floats_close(a.real, b.real) and _floats_close(a.imag, b.imag)
    if a is None or issubclass(ta, (bool, int, str, bytes, bytearray, range)):
        return _safe_eq(a, b) is True
    if issubclass(ta, _Raised):
        return a == b
    if issubclass(ta, Iterated):
        return _equiv(a.items, b.items, memo)

    # Array libraries, only when the code under test already imported them.
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(ta, numpy.ndarray):
        return _numpy_equal(numpy, a, b)
    pandas = sys.modules.get("pandas")
    if pandas is not None and issubclass(ta, (pandas.DataFrame, pandas.Series)):
        return _pandas_equal(pandas, a, b)

    # Everything below may recurse: a visited pair is assumed equal (cycles). The memo keeps
    # the pair alive so that the ids of temporaries (state dicts) are not reused meanwhile.
    pair = (id(a), id(b))
    if pair in memo:
        return True
    memo[pair] = (a, b)

    sequence = _base(ta, _SEQUENCES)
    if sequence is not None:
        xs, ys = _items_of(a, sequence), _items_of(b, sequence)
        if len(xs) != len(ys) or not all(_equiv(x, y, memo) for x, y in zip(xs, ys)):
            return False
        return _equiv_extra_state(a, b, memo)
    if issubclass(ta, dict):
        return _equiv_dicts(a, b, memo) and _equiv_extra_state(a, b, memo)
    kind = _base(ta, _SETS)
    if kind is not None:
        return _equiv_sets(_items_of(a, kind), _items_of(b, kind), memo)
    if issubclass(ta, BaseException):
        return _equiv(a.args, b.args, memo) and _equiv_extra_state(a, b, memo)
    if issubclass(ta, (types.FunctionType, types.BuiltinFunctionType, type, types.MethodType)):
        return (
            _type_key(a) == _type_key(b)
            if issubclass(ta, type)
            else (
                getattr(a, "__module__", None) == getattr(b, "__module__", None)
                and getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
            )
        )
    if issubclass(ta, types.ModuleType):
        return a.__name__ == b.__name__
    if _is_lazy_iterator(a):
        return _equiv(
            list(itertools.islice(a, MAX_ITEMS)), list(itertools.islice(b, MAX_ITEMS)), memo
        )

    # Other objects: repository classes (and classes with identity-based ==) by their state;
    # standard-library values (datetime, Decimal, Path...) by their own ==.
    if _is_user_class(ta) or ta.__eq__ is object.__eq__:
        state_a, state_b = _state(a), _state(b)
        if state_a is not None and state_b is not None:
            return _equiv(state_a, state_b, memo)
    equal = _safe_eq(a, b)
    if equal:
        return True
    if equal is False and ta.__eq__ is not object.__eq__:
        return False
    return _safe_repr(a) == _safe_repr(b)


def _equiv_extra_state(a, b, memo) -> bool:
    """Attributes of container subclasses (e.g. a list subclass with a `name`)."""
    da, db = _read(a, "__dict__", None), _read(b, "__dict__", None)
    if not isinstance(da, dict) and not isinstance(db, dict):
        return _equiv(da, db, memo) if _Raised in (type(da), type(db)) else True
    return _equiv(da if isinstance(da, dict) else {}, db if isinstance(db, dict) else {}, memo)


def _equiv_dicts(a, b, memo) -> bool:
    pa, pb = _items_of(a, dict), _items_of(b, dict)
    if len(pa) != len(pb):
        return False
    # Keys are compared with fresh memos: they are hashable (no cycles in practice), and a
    # failed tentative comparison must not leave "visited" pairs behind.
    if all(_equiv(ka, kb, {}) for (ka, _), (kb, _) in zip(pa, pb)):
        # Same keys in the same insertion order: compare pairwise (this also handles keys
        # that hash by identity, such as twin objects).
        return all(_equiv(va, vb, memo) for (_, va), (_, vb) in zip(pa, pb))
    # Otherwise look each key up (dict equality ignores order).
    try:
        b_keys = {k: (k, v) for k, v in pb}
        for key, value in pa:
            if key not in b_keys:
                return False
            other, other_value = b_keys[key]
            if not _equiv(key, other, {}) or not _equiv(value, other_value, memo):
                return False
        return True
    except TypeError:
        return False


def _equiv_sets(a: list, b: list, memo) -> bool:
    """Two sets' items (as lists) compared without order."""
    if len(a) != len(b):
        return False
    if _safe_eq(set(a), set(b)):
        return True
    # Elements that are equivalent but not == (floats within tolerance, twin objects): match
    # them pairwise for small sets, else compare sorted reprs.
    if len(a) <= 64:
        remaining = sorted(b, key=_safe_repr)
        for x in sorted(a, key=_safe_repr):
            for i, y in enumerate(remaining):
                if _equiv(x, y, dict(memo)):
                    del remaining[i]
                    break
            else:
                return False
        return True
    return sorted(map(_safe_repr, a)) == sorted(map(_safe_repr, b))


def _numpy_equal(numpy, a, b) -> bool:
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False
    try:
        if a.dtype.kind in "fc":
            return bool(numpy.allclose(a, b, equal_nan=True))
        if a.dtype.kind == "O":
            return _equiv(a.tolist(), b.tolist(), {})
        return bool(numpy.array_equal(a, b))
    except Exception:
        return _safe_repr(a) == _safe_repr(b)


def _pandas_equal(pandas, a, b) -> bool:
    check = (
        pandas.testing.assert_frame_equal
        if isinstance(a, pandas.DataFrame)
        else pandas.testing.assert_series_equal
    )
    try:
        check(a, b, check_exact=False)
        return True
    except (AssertionError, TypeError, ValueError):
        return False


# --------------------------------------------------------------------------------------------
# Comparing observations and failing tests
# --------------------------------------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxlevel = 6
_REPR.maxstring = 160
_REPR.maxother = 160
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdeque = _REPR.maxarray = 30
_REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 20
_REPR.maxlong = 80


def short_repr(value, limit: int = REPR_LIMIT) -> str:
    """A bounded repr (at most `limit` characters)."""
    try:
        text = _REPR.repr(value)
    except Exception:
        text = f"<unrepresentable {type(value).__qualname__}>"
    text = _normalize_message(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def describe_outcome(outcome) -> str:
    if outcome[0] == "return":
        return "return " + short_repr(outcome[1])
    message = outcome[2]
    if len(message) > REPR_LIMIT:
        message = message[: REPR_LIMIT - 3] + "..."
    return f"raise {outcome[1]}: {message}" if message else f"raise {outcome[1]}"


def outcome_kind(outcome) -> str:
    """'return:<type name>' or 'raise:<exception type name>'."""
    if outcome[0] == "return":
        value = outcome[1]
        name = value.type_name if isinstance(value, Iterated) else type(value).__name__
        return "return:" + name
    return "raise:" + outcome[1]


def differences(
    cand: Observation, ref: Observation, detailed=True, messages=True
) -> list[tuple[str, str]]:
    """The parts in which two observations differ, as (part, detail) pairs; [] if none.

    Parts: "return value", "exception", "outcome" (one returned, the other raised),
    "argument N mutation", "argument 'name' mutation", "instance state", "warnings" (the
    categories the module under test warned, in order, and their messages with `messages`); and
    `NOT_COMPARABLE` (its detail names the part) where two values cannot be compared
    (`compare`), which is no difference: a caller that decides on the parts never takes it
    for one (the explorer keeps no test on it and counts no mutant killed by it).

    With `detailed=False` the details are empty and no value is shown (`repr`): showing a
    value may change it (a lazily computed name cached on first `repr`, as pyparsing's
    elements do), and the explorer compares the same observation many times. With
    `messages=False` exceptions are compared by type alone, as r2e's verdict does by default
    (docs/harness.md): the explorer must not count a mutant killed that the harness passes.
    """
    diffs = []

    def values(part, c, r, detail):
        same = compare(c, r)
        if same is None:
            diffs.append((NOT_COMPARABLE, part))
        elif not same:
            diffs.append((part, detail() if detailed else ""))

    co, ro = cand.outcome, ref.outcome
    if co[0] != ro[0]:
        diffs.append(("outcome", "one side returned and the other raised"))
    elif co[0] == "return":
        values("return value", co[1], ro[1], lambda: "")
    elif (co[1:] if messages else co[1]) != (ro[1:] if messages else ro[1]):
        diffs.append(("exception", ""))
    for i, (ca, ra) in enumerate(zip(cand.args, ref.args)):
        values(f"argument {i} mutation", ca, ra, lambda: f"{short_repr(ca)} / {short_repr(ra)}")
    for name in ref.kwargs:
        if name in cand.kwargs:
            c, r = cand.kwargs[name], ref.kwargs[name]
            values(
                f"argument {name!r} mutation", c, r, lambda: f"{short_repr(c)} / {short_repr(r)}"
            )
    _then_differences(cand.then, ref.then, "returned function", diffs, detailed, messages)
    if [w if messages else w[0] for w in cand.warned] != [
        w if messages else w[0] for w in ref.warned
    ]:
        detail = f"{_warned_text(cand.warned)} / {_warned_text(ref.warned)}" if detailed else ""
        diffs.append(("warnings", detail))
    ci, ri = cand.instance, ref.instance
    if (ci is _NO_INSTANCE) != (ri is _NO_INSTANCE):
        detail = f"{_state_repr(ci)} / {_state_repr(ri)}" if detailed else ""
        diffs.append(("instance state", detail))
    elif ci is not _NO_INSTANCE:
        values("instance state", ci, ri, lambda: f"{_state_repr(ci)} / {_state_repr(ri)}")
    return diffs


def _warned_text(warned) -> str:
    return "[" + ", ".join(f"{w[0]}({w[1]!r})" for w in warned) + "]"


def decided(diffs) -> list:
    """The parts of `differences` that are differences (without `NOT_COMPARABLE`)."""
    return [d for d in diffs if d[0] != NOT_COMPARABLE]


def _state_repr(instance) -> str:
    if instance is _NO_INSTANCE:
        return "<no instance>"
    state = _read(instance, "__dict__", None)
    return short_repr(state if isinstance(state, dict) else instance)


def failure_message(cand: Observation, ref: Observation, diffs) -> str:
    lines = ["candidate and reference differ in: " + "; ".join(part for part, _ in diffs)]
    lines.append("  candidate: " + describe_outcome(cand.outcome))
    lines.append("  reference: " + describe_outcome(ref.outcome))
    for part, detail in diffs:
        if detail and part != "outcome":
            lines.append(f"  {part} (candidate / reference): {detail}")
    return "\n".join(lines)


def _module_of(obj) -> str | None:
    module = getattr(obj, "__module__", None)
    if module is None and callable(obj):
        module = getattr(inspect.unwrap(obj), "__module__", None)
    return module


def _check(test, cand: Observation, ref: Observation):
    CALLS.append({"returned_normally": ref.returned})
    diffs = differences(cand, ref)
    if decided(diffs):
        test.fail(failure_message(cand, ref, decided(diffs)))
    if diffs:
        # Values this process cannot compare: no verdict either way.
        test.skipTest("not comparable: " + ", ".join(detail for _, detail in diffs))


def _call_text(label: str, args, kwargs) -> str:
    parts = [_shown(a) for a in args]
    parts += [f"{k}={_shown(v)}" for k, v in kwargs.items()]
    return f"{label}({', '.join(parts)})"


def _outcome_snapshot(outcome) -> dict:

    if outcome[0] == "return":
        return {"return": r2e_snapshot.snapshot(outcome[1])}
    return {
        "raise": {
            "type": getattr(outcome, "module_type", outcome[1]),
            "message": outcome[2],
        }
    }


def _then_snapshot(then) -> list:
    out = []
    for o, nested, name in then:
        snap = {"outcome": _outcome_snapshot(o), "then": _then_snapshot(nested)}
        if name is not None:
            snap["name"] = name
        out.append(snap)
    return out


def record_observation(obs: Observation, call: str) -> dict:
    """The snapshot of one observation (record and candidate modes): the call's text, its
    outcome, the arguments' states after it, the instance's state (methods), the calls of a
    returned function, and the warnings the module under test issued."""

    return {
        "call": call,
        "outcome": _outcome_snapshot(obs.outcome),
        "args": [r2e_snapshot.snapshot(a) for a in obs.args],
        "kwargs": {k: r2e_snapshot.snapshot(v) for k, v in obs.kwargs.items()},
        "instance": None if obs.instance is _NO_INSTANCE else r2e_snapshot.snapshot(obs.instance),
        "then": _then_snapshot(obs.then),
        "warnings": [
            {"type": getattr(w, "module_type", w[0]), "message": w[1]} for w in obs.warned
        ],
    }


def _record(obs: Observation, call: str) -> None:
    CALLS.append({"returned_normally": obs.returned})
    RECORDS.append(record_observation(obs, call))


def check_function(test, cand_fn, ref_fn, args=(), kwargs=None, then=()):
    """Fails `test` unless cand_fn and ref_fn behave the same on (deep copies of) args/kwargs;
    and unless what they return behaves the same on each of the `then` calls ((args, kwargs)
    calls of a returned function, (args, kwargs, name) calls of a returned object's method
    `name`: `observe_function`). Model-written harnesses often leave out empty kwargs.

    In record and candidate modes the one side this process holds is observed and recorded;
    the comparison happens outside (r2e's verdict)."""
    kwargs = {} if kwargs is None else kwargs
    if mode() != MODE_PAIR:
        label = getattr(cand_fn, "__qualname__", "f")
        call = _call_text(label, args, kwargs)
        _record(observe_function(cand_fn, args, kwargs, then=then), call)
        return
    memo = _twin_memo(_module_of(ref_fn)) if cand_fn is not ref_fn else None
    cand = observe_function(cand_fn, args, kwargs, copy_memo=memo, then=then)
    ref = observe_function(ref_fn, args, kwargs, then=then)
    _check(test, cand, ref)


def check_method(
    test,
    cand_cls,
    ref_cls,
    ctor_args,
    ctor_kwargs,
    method_name,
    args=(),
    kwargs=None,
    then=(),
    setup=(),
    receiver=_CONSTRUCTED,
):
    """Fails `test` unless the method behaves the same on instances of both classes built from
    (deep copies of) the same constructor arguments and given the same `setup` calls ((method
    name, args) pairs, such as `("__setitem__", ("a", 1))`): outcome, arguments and instance
    state; and, when it returns a function, unless that behaves the same on each of the `then`
    calls. With `receiver` (an instance of the reference's class, or of a subclass that inherits
    the method), each side calls the method on a deep copy of it instead (the candidate's on one
    of its own twin class); the constructor's arguments are then empty."""
    ctor_kwargs = {} if ctor_kwargs is None else ctor_kwargs
    kwargs = {} if kwargs is None else kwargs

    def observe(cls, memo=None):
        return observe_method(
            cls,
            ctor_args,
            ctor_kwargs,
            method_name,
            args,
            kwargs,
            copy_memo=memo,
            then=then,
            setup=setup,
            receiver=receiver,
        )

    if mode() != MODE_PAIR:
        if receiver is not _CONSTRUCTED:
            # x = <the receiver>; x.method(2)
            built = _shown(receiver)
        else:
            built = _call_text(getattr(cand_cls, "__qualname__", "C"), ctor_args, ctor_kwargs)
        if setup or receiver is not _CONSTRUCTED:
            # x = C(1); x['a'] = 1; x.method(2)
            steps = "".join(f"; {_setup_text(name, a)}" for name, a in setup)
            call = "x = " + built + steps + "; " + _call_text(f"x.{method_name}", args, kwargs)
        else:
            call = _call_text(f"{built}.{method_name}", args, kwargs)
        _record(observe(cand_cls), call)
        return
    memo = _twin_memo(getattr(ref_cls, "__module__", None)) if cand_cls is not ref_cls else None
    cand = observe(cand_cls, memo)
    ref = observe(ref_cls)
    _check(test, cand, ref)


def _setup_text(name: str, args) -> str:
    """A set-up call on the instance `x` as the call's text shows it: `x[k] = v` for
    `__setitem__`, `x.name(args)` otherwise."""
    if name == "__setitem__" and len(args) == 2:
        return f"x[{_shown(args[0])}] = {_shown(args[1])}"
    return _call_text(f"x.{name}", args, {})


def run_example(module, source: str):
    """Runs the code of a docstring's example in a copy of `module`'s namespace (so its names
    are the module's: the function under test, its classes, what the module imports; and its
    package's public names, `example_namespace`), as a
    doctest session would: {"printed": what it wrote to stdout and stderr, "values": the value
    of each expression statement that is not None}. An exception ends it as the outcome.
    Warnings are not shown."""
    tree = ast.parse(source)
    namespace = example_namespace(module)
    printed = io.StringIO()
    values = []
    # Warnings are not shown: whether one is shown depends on the process's state (each is
    # shown once per place), and it names a file and line.
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(
        printed
    ), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for stmt in tree.body:
            if isinstance(stmt, ast.Expr):
                code = compile(ast.Expression(stmt.value), "<example>", "eval")
                value = eval(code, namespace)  # noqa: S307 - the example runs in the sandbox
                if value is not None:
                    values.append(value)
            else:
                code = compile(ast.Module([stmt], []), "<example>", "exec")
                exec(code, namespace)  # noqa: S102 - the example runs in the sandbox
    return {"printed": printed.getvalue(), "values": values}


def example_namespace(module) -> dict:
    """The names an example sees: the public names of the module's top-level package (an
    example is written against the package's API: pyparsing's `infix_notation` examples use
    `pyparsing_common` from another module), then the module's own, which win."""
    namespace = {}
    root = sys.modules.get(module.__name__.partition(".")[0])
    if root is not None and root is not module:
        namespace.update((k, v) for k, v in vars(root).items() if not k.startswith("_"))
    namespace.update(vars(module))
    return namespace


def _example_runner(module, source: str):
    """A function of no arguments running the example on `module` (what is observed)."""

    def example():
        return run_example(module, source)

    example.__qualname__ = "example"
    return example


def observe_example(module, source: str) -> Observation:
    """Observes a docstring's example run on `module` (run_example)."""
    return observe_function(_example_runner(module, source), (), {}, module=module.__name__)


def check_example(test, cand_module, ref_module, source: str):
    """Fails `test` unless the code of a docstring's example prints and gives the same on the
    candidate module as on the reference (run_example): the function under test is reached
    through the calls the authors wrote, with the values those make (a parser element whose
    parse action is the function, say)."""
    if mode() != MODE_PAIR:
        first = source.strip().splitlines()[0] if source.strip() else ""
        _record(observe_example(cand_module, source), f"example: {first} ...")
        return
    cand = observe_example(cand_module, source)
    ref = observe_example(ref_module, source)
    _check(test, cand, ref)


# --------------------------------------------------------------------------------------------
# Recording the reference's calls (examples for the docstring refinement)
# --------------------------------------------------------------------------------------------

MAX_EXAMPLES = 5
EXAMPLE_REPR_LIMIT = 200

# The recorder of the current run, installed by harness_modules (see `recording`).
_RECORDER: CallRecorder | None = None


@contextlib.contextmanager
def recording(qualname: str):
    """Within the block, `harness_modules()` wraps the reference's `qualname` (a function, or a
    regular, static or class method) to record its calls; the original is put back on exit."""
    global _RECORDER
    recorder = _RECORDER = CallRecorder(qualname)
    try:
        yield recorder
    finally:
        _RECORDER = None
        recorder.uninstall()


def _type_name(value) -> str:
    return type(value).__qualname__


def _param_key(param: inspect.Parameter) -> str:
    """A parameter's name in "types": `*args` and `**kwargs` (their elements' types) marked."""
    prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
    return prefix + param.name


class CallRecorder:
    """Records the calls of one function or method of the reference module: the first
    MAX_EXAMPLES distinct calls (by call text) with their outcomes, and the type names of every
    call's arguments (self/cls excluded) and return value.

    Only the outermost call is recorded: while it runs the original is back in place, so that
    recursive calls neither add frames (the recursion limit is unchanged) nor get recorded.
    Recording never raises into the code under test.
    """

    def __init__(self, qualname: str):
        self.qualname = qualname
        self.examples: list[dict] = []
        self._params: list[str] = []
        self._arg_types: dict[str, set[str]] = {}
        self._return_types: set[str] = set()
        self._active = False
        self._undo = None

    def report(self) -> dict:
        """{"examples": [{"call", "outcome"}, ...], "types": {"args": {param: [type]}, "returns": [type]}}."""
        args = {p: sorted(self._arg_types[p]) for p in self._params if p in self._arg_types}
        return {
            "examples": list(self.examples),
            "types": {"args": args, "returns": sorted(self._return_types)},
        }

    def install(self, module) -> None:
        if self._undo is not None:
            return
        *path, name = self.qualname.split(".")
        owner = module
        for part in path:
            owner = getattr(owner, part, None)
        raw = inspect.getattr_static(owner, name, None)
        rewrap = None
        if isinstance(owner, types.ModuleType):
            fn, label, skip = raw, name, 0
        elif not isinstance(owner, type):
            return
        elif isinstance(raw, (staticmethod, classmethod)):
            fn, label, rewrap = raw.__func__, f"{owner.__name__}.{name}", type(raw)
            skip = 1 if rewrap is classmethod else 0
        else:
            fn, label, skip = raw, owner.__name__ if name == "__init__" else f"self.{name}", 1
        if not isinstance(fn, types.FunctionType) or inspect.iscoroutinefunction(fn):
            return
        saved = vars(owner).get(name, _MISSING)

        def put(value):
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)

        wrapper = self._wrap(fn, label, skip, lambda: put(saved), lambda: put(installed))
        installed = rewrap(wrapper) if rewrap else wrapper
        try:
            put(installed)
        except (AttributeError, TypeError):
            return
        self._undo = lambda: put(saved)

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def _wrap(self, fn, label, skip, unpatch, repatch):
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None
        else:
            self._params = [_param_key(p) for p in list(signature.parameters.values())[skip:]]

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            if self._active:
                return fn(*args, **kwargs)
            self._active = True
            try:
                call = self._before(signature, label, skip, args, kwargs)
                unpatch()
                try:
                    value = fn(*args, **kwargs)
                except (Timeout, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    self._after(call, exc, raised=True)
                    raise
                finally:
                    repatch()
                self._after(call, value, raised=False)
                return value
            finally:
                self._active = False

        return recorded

    def _before(self, signature, label, skip, args, kwargs) -> str | None:
        """Records the arguments' types; returns the call's text (taken before the call, which
        may mutate them) when it can still become an example."""
        try:
            if signature is not None:
                try:
                    bound = signature.bind(*args, **kwargs).arguments
                except TypeError:
                    bound = {}
                for param in list(signature.parameters.values())[skip:]:
                    if param.name not in bound:
                        continue
                    value = bound[param.name]
                    if param.kind == param.VAR_POSITIONAL:
                        values = value
                    elif param.kind == param.VAR_KEYWORD:
                        values = value.values()
                    else:
                        values = (value,)
                    types_seen = self._arg_types.setdefault(_param_key(param), set())
                    types_seen.update(map(_type_name, values))
            if len(self.examples) >= MAX_EXAMPLES:
                return None
            parts = [_shown(a) for a in args[skip:]]
            parts += [f"{k}={_shown(v)}" for k, v in kwargs.items()]
            call = f"{label}({', '.join(parts)})"
            if any(e["call"] == call for e in self.examples):
                return None
            return call
        except Exception:  # noqa: BLE001 - recording must not disturb the call
            return None

    def _after(self, call, result, raised) -> None:
        try:
            if not raised:
                self._return_types.add(_type_name(result))
            if call is None or len(self.examples) >= MAX_EXAMPLES:
                return
            if raised:
                _, exc_type, message = _exception_outcome(result)
                if len(message) > EXAMPLE_REPR_LIMIT:
                    message = message[: EXAMPLE_REPR_LIMIT - 3] + "..."
                outcome = f"raises {exc_type}: {message}" if message else f"raises {exc_type}"
            else:
                outcome = "returns " + _shown(result)
            self.examples.append({"call": call, "outcome": outcome})
        except Exception:  # noqa: BLE001
            pass


def _shown(value) -> str:
    """The bounded `repr` of a deep copy of `value`: showing a value may change it (a name
    computed and cached on first `repr`, as pyparsing's elements do), and the value itself is
    observed after this (its snapshot must be the same as in a run that records nothing). A
    value that cannot be copied is shown by its type only."""
    try:
        copied = copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - any failure to copy
        return f"<{_type_name(value)}>"
    return short_repr(copied, EXAMPLE_REPR_LIMIT)
