#!/usr/bin/env python3
"""Captures the arguments a repository's own test suite passes to the candidate functions.

    python r2e_capture.py REQUEST.json OUT.json

REQUEST.json: {"repo_root", "extra_roots", "tests": [test files, relative to repo_root],
"targets": [{"module", "qualname", "kind"}], "per_target", "max_bytes", "time_limit"}.

The script imports the targets, installs a trace function that traces their frames only, and
runs the test files: with pytest when the environment has it, else with unittest (and the
files' plain `test*` functions without parameters). At each entry it encodes the arguments as
they are before the function runs, as source texts the explorer reads like a call site's
(`static.call_site_specs`): a builtin class by its name, a literal where `repr` round-trips
(`ast.literal_eval(repr(v)) == v`), else `r2e_equiv.loads(b"...")`, a pickle the harness loads
(a `re.Match` is pickled as the search or match that rebuilds it). A value that neither
rebuilds is not used, and neither is the call; nor is one that holds a folder of this machine
anywhere (`names_machine`: a `Path` of the tests' folder, the temporary folder in a string). A method's
receiver is encoded the same way, as it was when the method was called (`receiver`; left out
when it does not rebuild: the explorer constructs one, as for any call site). Which calls are kept (`per_target` of them): the first ones,
until the slots are full; then a call that ran arcs of the target no kept call ran takes the
place of the latest kept call that ran none new (a test suite's first calls are often alike:
its later ones reach the other branches).

What the tests did with a value a kept call returned is kept too (`Capture.use`): the calls
of the value's methods made from outside its own methods (a returned parser's `parse_string`,
its `_parse` called by the parser it is part of), their arguments encoded the same way, at
most USES per target (distinct), as the call's "then": [{"method", "args", "kwargs"}]. The
explorer makes them of what its inputs return (`r2e_equiv`'s named `then` calls).

OUT.json is {"status": "ok", "runner", "calls": [[{"args", "kwargs"[, "receiver"][, "then"]}...]
per target], "reached": [[pytest node ids] per target],
"time_limit_hit", "tests_failed_to_import"} or {"status": "error", "error"}; the exit code is 0
in both cases. The test suite's own failures do not matter: only the calls it made, and under
pytest which tests reached each target (`reached`, at most `REACHED` each, sorted).

The second mode (the request has "states"): the project's tests on states of one module, for a
bug-fix task's `project_tests_fail`. REQUEST.json: {"repo_root", "extra_roots", "module",
"states": [{"text": a module text, or null for the file as it is, "tests": [pytest node ids]}],
"time_limit"}. Each state runs in a child forked from this process (pytest imported once): the
module's import is served from the state's text (a finder first on `sys.meta_path`; the
file's own path stays its `__file__`), and the state's tests run under pytest. When the first
state is the file as it is (null), with the tests of all the others, those are broken states of
it: each may take at most
BROKEN_FLOOR seconds more than BROKEN_FACTOR times what the tests took on it (and never more
than "time_limit"), since a broken state that runs far longer than the module is stuck, and
waiting out the whole limit on it is what made these runs slow. OUT.json is {"status": "ok",
"runner": "pytest", "failed": [[node ids that failed] or null per state], "limits": [seconds
per state]} (null: the state's run did not finish, its time limit or a crash) or {"status":
"error", "error"}; "runner": "none" when the environment has no pytest.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dis
import importlib
import inspect
import io
import json
import os
import pickle
import signal
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))

# Test ids kept per target in `reached`.
REACHED = 200
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
# Calls of a target whose arguments are encoded, per slot of `per_target`: the first calls fill
# the slots, later ones may take a slot for arcs the kept calls did not reach.
TRIES_PER_SLOT = 64


class Deadline(KeyboardInterrupt):
    """The capture's time is up (raised by the timer into the running test; an interrupt, which
    pytest and unittest end their run on instead of counting a failed test)."""


# Method calls on what the targets returned (`Capture.use`): at most USES per target are kept,
# and at most WATCHED returned values are watched at once (the latest).
USES = 4
WATCHED = 16
# A value is watched for this many calls of its class's methods (on any instance) at most: a
# test uses what it got soon, and each such call costs a look at the frame's locals.
WINDOW = 4096
# The items of a returned tuple or list that are watched, at most.
ITEMS = 4
# The instructions before a call that are read for the attribute it loaded (`spelled`).
SPELLED = 32
# Values whose methods are not watched: atoms, and what a method call does not apply to.
UNWATCHED = (
    type(None), bool, int, float, complex, str, bytes, type, types.FunctionType,
    types.BuiltinFunctionType, types.MethodType, types.ModuleType,
)  # fmt: skip

# What a target's first argument is (`resolve`).
RECEIVER, CLASS = "receiver", "class"


def resolve(module: str, qualname: str, kind: str):
    """(code object, what its first argument is) of a target, or None: RECEIVER (a method's
    instance), CLASS (a class method's class) or None (no receiver)."""
    try:
        obj = importlib.import_module(module)
    except BaseException:
        return None
    parts = qualname.split(".")
    owner = None
    for part in parts:
        owner = obj
        raw = owner.__dict__.get(part) if isinstance(owner, type) else None
        try:
            obj = raw if raw is not None else getattr(owner, part)
        except BaseException:
            return None
    receiver = None
    if kind == "method":
        if isinstance(obj, staticmethod):
            obj = obj.__func__
        elif isinstance(obj, classmethod):
            obj, receiver = obj.__func__, CLASS
        elif isinstance(obj, property):
            obj, receiver = obj.fget, RECEIVER
        else:
            receiver = RECEIVER
    try:
        obj = inspect.unwrap(obj)
    except BaseException:
        return None
    code = getattr(obj, "__code__", None)
    return (code, receiver) if code is not None else None


class Encoder:
    """Source texts for values, as a call site would write them; None when a value does not
    rebuild."""

    def __init__(self, max_bytes: int, packages=(), machine=()):
        self.max_bytes = max_bytes
        self.globals = PackageGlobals(packages)
        self.machine = tuple(machine)

    def text(self, value):
        """Never raises, whatever the value's own code does (`tests/test_values.py`)."""
        try:
            if issubclass(type(value), type) and getattr(builtins, value.__name__, None) is value:
                return value.__name__  # a builtin class by its name (`int`)
        except Exception:  # noqa: BLE001 - a metaclass's own code may raise anything
            return None
        try:
            text = repr(value)
            if len(text) <= self.max_bytes:
                back = ast.literal_eval(text)
                if type(back) is type(value) and back == value:
                    return None if names_machine(value, b"", self.machine) else text
        except BaseException:
            pass
        try:
            data = self.dumps(value)
            if len(data) > self.max_bytes:
                return None
            import r2e_equiv

            back = r2e_equiv.loads(data)
            if type(back) is not type(value):
                return None
            if names_machine(back, data, self.machine):
                return None
        except BaseException:
            return None
        return f"r2e_equiv.loads({data!r})"

    def dumps(self, value) -> bytes:
        out = io.BytesIO()
        pickler = CapturePickler(out, protocol=4)
        pickler.globals = self.globals.index()
        pickler.dump(value)
        return out.getvalue()


def machine_folders(roots=()) -> tuple:
    """This machine's folders as the capture sees them, which no captured value may hold: its
    scratch (the job's home and temporary folder), the repository's roots, the environment,
    the working folder, and the usual temporary and home folders; each also resolved."""
    import tempfile

    found = [HERE, os.getcwd(), tempfile.gettempdir(), os.path.expanduser("~"), sys.prefix,
             sys.exec_prefix, os.path.dirname(sys.executable), "/tmp", "/var/tmp", "/root", "/home"]
    found += [os.environ.get(k) for k in ("HOME", "TMPDIR", "TEMP", "TMP", "XDG_CACHE_HOME", "PWD")]
    found += list(roots)
    # The interpreter's own installation only when it is not the system's (`/usr`).
    found += [p for p in (sys.base_prefix, sys.base_exec_prefix) if p not in ("/usr", "/usr/local", "/")]
    out = set()
    for path in found:
        if not path or not isinstance(path, str):
            continue
        for p in (os.path.abspath(path), os.path.realpath(path)):
            p = p.rstrip(os.sep)
            if len(p) > 1:
                out.add(p)
    return tuple(sorted(out))


def names_machine(value, data: bytes, machine: tuple) -> bool:
    """Whether a value (as rebuilt), or its pickle `data`, holds one of the `machine` folders:
    in a string or bytes anywhere in it (its containers, its objects' attributes and slots, a
    path object's text), or in the pickle's strings, also where a run of them is a path's parts
    (a `PurePath` pickles as `('/', 'tmp', ...)`)."""
    if not machine:
        return False

    def holds(text) -> bool:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", "surrogateescape")
        return isinstance(text, str) and any(m in text for m in machine)

    if data:
        import pickletools

        run = None
        for op, arg, _ in pickletools.genops(data):
            if isinstance(arg, (str, bytes, bytearray)) and not isinstance(arg, bool):
                if holds(arg):
                    return True
                part = arg if isinstance(arg, str) else bytes(arg).decode("utf-8", "surrogateescape")
                if run is None and part.startswith(os.sep):
                    run = part
                elif run is not None:
                    run = run.rstrip(os.sep) + os.sep + part
                    if holds(run):
                        return True
            elif op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT", "FRAME", "MARK"):
                run = None
    seen = set()
    todo = [(value, 0)]
    steps = 0
    while todo:
        item, depth = todo.pop()
        steps += 1
        if steps > 100000 or depth > 50:
            return True  # too deep to tell: refused
        if isinstance(item, (str, bytes, bytearray)):
            if holds(item):
                return True
            continue
        if item is None or isinstance(item, (bool, int, float, complex)):
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, os.PathLike):
            try:
                if holds(os.fspath(item)):
                    return True
            except BaseException:
                pass
        if isinstance(item, dict):
            todo += [(x, depth + 1) for pair in item.items() for x in pair]
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo += [(x, depth + 1) for x in item]
        attrs = getattr(item, "__dict__", None)
        if isinstance(attrs, dict) and not isinstance(item, type):
            todo += [(x, depth + 1) for x in attrs.values()]
        for cls in type(item).__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                try:
                    todo.append((getattr(item, name), depth + 1))
                except BaseException:
                    pass
    return False


class PackageGlobals:
    """The values the targets' packages hold at module level (a table of rules, a default
    configuration), by identity: a captured value that holds one of them refers to it by name
    (`r2e_equiv.loads` looks it up) instead of copying it, smaller and the same object."""

    def __init__(self, packages):
        self.packages = sorted(set(packages))
        self.by_id = {}
        self.modules = -1

    def index(self) -> dict:
        if len(sys.modules) != self.modules:
            self.modules = len(sys.modules)
            by_id = {}
            for name in sorted(sys.modules):
                if not any(name == p or name.startswith(p + ".") for p in self.packages):
                    continue
                module = sys.modules.get(name)
                for attr, value in sorted(getattr(module, "__dict__", {}).items()):
                    if attr.startswith("__") or isinstance(value, SCALARS):
                        continue
                    by_id.setdefault(id(value), (("global", name, attr), value))
                    # One level in: the entries of a table (a dict of compiled rules).
                    items = ()
                    if type(value) is dict:
                        items = [(k, v) for k, v in value.items() if type(k) in (str, int)]
                    elif type(value) in (list, tuple):
                        items = enumerate(value)
                    for key, item in items:
                        if not isinstance(item, SCALARS):
                            by_id.setdefault(id(item), (("item", name, attr, key), item))
            self.by_id = by_id
        return self.by_id


# Values written as they are, never by reference.
SCALARS = (type(None), bool, int, float, complex, str, bytes, type, types.ModuleType,
           types.FunctionType, types.BuiltinFunctionType)


class CapturePickler(pickle.Pickler):
    """A pickler that writes a `re.Match` as the search or match that rebuilds it, and a value
    of a module of the package by its name (`PackageGlobals`)."""

    globals: dict = {}

    def persistent_id(self, obj):
        found = self.globals.get(id(obj))
        if found is not None and found[1] is obj:
            return found[0]
        return None

    def reducer_override(self, obj):
        import r2e_equiv

        if type(obj).__name__ == "Match" and type(obj).__module__ == "re":
            for how, pos in (("search", obj.pos), ("match", obj.start())):
                again = r2e_equiv.rebuild_match(obj.re, obj.string, pos, obj.endpos, how)
                if again is not None and again.span() == obj.span() and (
                    again.groups() == obj.groups()
                ):
                    return (r2e_equiv.rebuild_match, (obj.re, obj.string, pos, obj.endpos, how))
            raise pickle.PicklingError("a match that does not rebuild")
        return NotImplemented


class Capture:
    def __init__(self, request: dict):
        self.per_target = int(request.get("per_target") or 8)
        self.targets = request.get("targets") or []
        packages = [str(t.get("module", "")).partition(".")[0] for t in self.targets]
        roots = [os.path.join(HERE, r) for r in [request.get("repo_root")] + list(request.get("extra_roots") or []) if r]
        self.encoder = Encoder(int(request.get("max_bytes") or 8192), packages, machine_folders(roots))
        self.calls = [[] for _ in self.targets]
        # Per kept call, whether it reached arcs that the calls before it had not.
        self.adds = [[] for _ in self.targets]
        self.covered = [set() for _ in self.targets]
        # Calls under way, outermost first.
        self.live: list = []
        self.seen = [set() for _ in self.targets]
        self.tries = [0 for _ in self.targets]
        self.codes = {}
        self.busy = False
        # The pytest node id of the test running (`NodeIds`), and per target the ones that
        # reached it.
        self.test = None
        self.reached = [set() for _ in self.targets]
        # The values kept calls returned, watched for method calls (`use`): id -> `Watched`;
        # the watched values' methods' code objects -> their names (`methods_of`); per type,
        # those of its methods; the ids of the values with a method call under way; per
        # target, the uses kept.
        self.watched: dict = {}
        self.checks = 0
        self.watched_codes: dict = {}
        self.type_codes: dict = {}
        self.using: set = set()
        # Per code object of a use's caller, its instructions (`spelled`).
        self.instructions: dict = {}
        self.uses = [0 for _ in self.targets]
        self.use_keys = [set() for _ in self.targets]

    def resolve_all(self):
        for i, t in enumerate(self.targets):
            found = resolve(t.get("module", ""), t.get("qualname", ""), t.get("kind", ""))
            if found is not None and found[0] not in self.codes:
                self.codes[found[0]] = (i, found[1])

    def trace(self, frame, event, arg):
        """The global trace function: a call of a target whose arguments encode gets a local
        tracer of its own (`Pending`), which sees its arcs; every other frame runs untraced."""
        if event != "call" or self.busy:
            return None
        entry = self.codes.get(frame.f_code)
        if entry is None:
            if frame.f_code in self.watched_codes:
                self.busy = True
                try:
                    return self.use(frame)
                except BaseException:
                    return None
                finally:
                    self.busy = False
            return None
        if self.test is not None:
            reached = self.reached[entry[0]]
            if len(reached) < REACHED:
                reached.add(self.test)
        self.busy = True
        try:
            pending = self.enter(entry, frame)
        except BaseException:
            pending = None
        finally:
            self.busy = False
        return pending.event if pending is not None else None

    def enter(self, entry, frame):
        """The call's arguments as texts, pending until it returns (None when they do not
        encode, the call was recorded before, or the target's tries are spent)."""
        index, receiver = entry
        if self.tries[index] >= TRIES_PER_SLOT * self.per_target:
            return None
        self.tries[index] += 1
        code = frame.f_code
        values = frame.f_locals
        instance = None
        if receiver is RECEIVER and code.co_argcount:
            # The instance as the tests called the method on it (None when it does not
            # rebuild: the explorer constructs one then, as for any call site).
            instance = self.encoder.text(values[code.co_varnames[0]])
        encoded = self.arguments(code, values, skip=0 if receiver is None else 1)
        if encoded is None:
            return None
        args, kwargs = encoded
        key = (tuple(args), tuple(sorted(kwargs.items())), instance)
        if key in self.seen[index]:
            return None
        self.seen[index].add(key)
        call = {"args": args, "kwargs": kwargs}
        if instance is not None:
            call["receiver"] = instance
        pending = Pending(self, index, call, frame.f_lineno)
        self.live.append(pending)
        return pending

    def flush(self):
        """Keeps the calls still under way (the time limit stopped them: an exception raised
        inside the trace function ends the tracing without their return)."""
        live, self.live = self.live, []
        for pending in live:
            self.finish(pending.index, pending.call, pending.arcs)

    def finish(self, index: int, call: dict, arcs: set):
        """Keeps a call that returned (or raised): while the target has free slots, any; then
        one that reaches arcs no kept call reached, in place of the latest kept call that
        reached none new. The kept calls stay in the order they were made."""
        covered = self.covered[index]
        new = bool(arcs - covered)
        covered |= arcs
        kept, adds = self.calls[index], self.adds[index]
        if len(kept) < self.per_target:
            kept.append(call)
            adds.append(new)
        elif new and not all(adds):
            at = len(adds) - 1 - adds[::-1].index(False)
            del kept[at], adds[at]
            kept.append(call)
            adds.append(new)
        else:
            return False
        return True

    # -- what the tests did with what a target returned ----------------------------------------

    def watch(self, index: int, call: dict, value, path: str = ""):
        """Watches a value a kept call of target `index` returned for the method calls made on
        it (`use`), while the target's uses are not all kept; the first ITEMS items of a
        returned tuple or list too (a pair of parsers), their uses' names prefixed with their
        place (`[0].parse_string`)."""
        if self.uses[index] >= USES or isinstance(value, UNWATCHED):
            return
        if isinstance(value, (tuple, list)):
            if not path:
                for i, item in enumerate(value[:ITEMS]):
                    self.watch(index, call, item, f"[{i}].")
            return
        codes = self.methods_of(type(value))
        if not codes:
            return
        self.watched.pop(id(value), None)
        self.watched[id(value)] = Watched(value, index, call, self.checks, path)
        while len(self.watched) > WATCHED:
            del self.watched[next(iter(self.watched))]
        self.watch_codes()

    def watch_codes(self):
        self.watched_codes = {}
        for w in self.watched.values():
            self.watched_codes.update(self.methods_of(type(w.value)))

    def methods_of(self, t: type) -> dict:
        """The code objects of a class's methods (as its instances resolve them, not dunder
        names, not static or class methods nor properties) -> the names that resolve to that
        method (`_parse` and `_parseNoCache`: one function under two names), or None where
        one code object serves two functions (alias wrappers, each calling another method)."""
        found = self.type_codes.get(t)
        if found is not None:
            return found
        found = {}
        functions = {}
        names = []
        for klass in getattr(t, "__mro__", ()):
            if getattr(klass, "__module__", None) == "builtins":
                continue
            names.extend(n for n in vars(klass) if isinstance(n, str) and not n.startswith("__"))
        for name in dict.fromkeys(names):
            try:
                raw = inspect.getattr_static(t, name)
            except AttributeError:
                continue
            code = getattr(raw, "__code__", None) if isinstance(raw, types.FunctionType) else None
            if code is None:
                continue
            if code not in found:
                found[code], functions[code] = (name,), raw
            elif functions[code] is not raw:
                found[code] = None
            elif found[code] is not None:
                found[code] += (name,)
        self.type_codes[t] = found
        return found

    def spelled(self, code, names: tuple, caller) -> str:
        """Which of the names of one method a use calls it by: the one the caller's call loads
        (`self.expr._parse(...)`, while `_parse` is `_parseCache` because the tests turned
        packrat on: a fresh process has `_parse` but no cache), else the one its code names,
        else the function's own."""
        if len(names) == 1:
            return names[0]
        if caller is not None:
            instructions = self.instructions.get(caller.f_code)
            if instructions is None:
                instructions = self.instructions[caller.f_code] = list(
                    dis.get_instructions(caller.f_code)
                )
            before = [i for i in instructions if i.offset <= caller.f_lasti][-SPELLED:]
            for ins in reversed(before):
                if ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval in names:
                    return ins.argval
            used = [n for n in names if n in caller.f_code.co_names]
            if len(used) == 1:
                return used[0]
        return code.co_name if code.co_name in names else names[0]

    def use(self, frame):
        """A call of a watched value's method (the value its first argument): kept, with its
        arguments encoded, for the call that returned the value (its "then"), unless a call of
        one of the value's methods is under way (this one is part of that one), the method's
        name is not known, or its arguments do not rebuild. Its frame gets a tracer of its
        own that ends the "under way" at its return."""
        code = frame.f_code
        names = self.watched_codes.get(code)
        if names is None or not code.co_argcount:
            return None
        self.checks += 1
        if not self.checks % 256:
            old = [k for k, w in self.watched.items() if self.checks - w.since > WINDOW]
            for k in old:
                del self.watched[k]
            if old:
                self.watch_codes()
        values = frame.f_locals
        first = values.get(code.co_varnames[0])
        entry = self.watched.get(id(first))
        if entry is None or entry.value is not first or id(first) in self.using:
            return None
        index, call = entry.index, entry.call
        name = entry.path + self.spelled(code, names, frame.f_back)
        encoded = self.arguments(code, values, skip=1)
        if encoded is None:
            return None
        args, kwargs = encoded
        key = (name, tuple(args), tuple(sorted(kwargs.items())))
        if key not in self.use_keys[index] and self.uses[index] < USES:
            self.use_keys[index].add(key)
            self.uses[index] += 1
            call.setdefault("then", []).append({"method": name, "args": args, "kwargs": kwargs})
            if self.uses[index] >= USES:
                for k in [k for k, w in self.watched.items() if w.index == index]:
                    del self.watched[k]
                self.watch_codes()
        watched = id(first)
        self.using.add(watched)
        frame.f_trace_lines = False

        def under_way(frame, event, arg):
            if event == "return":
                self.using.discard(watched)
                return None
            return under_way

        return under_way

    def arguments(self, code, values, skip: int = 0):
        """The encoded (args, kwargs) of a frame's call, the first `skip` positional ones left
        out; None when one does not rebuild."""
        names = code.co_varnames
        n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
        positional = [values[name] for name in names[:n_pos]]
        keyword = [(name, values[name]) for name in names[n_pos : n_pos + n_kw]]
        at = n_pos + n_kw
        if code.co_flags & CO_VARARGS:
            positional.extend(values[names[at]])
            at += 1
        if code.co_flags & CO_VARKEYWORDS:
            keyword.extend(values[names[at]].items())
        args = []
        for value in positional[skip:]:
            text = self.encoder.text(value)
            if text is None:
                return None
            args.append(text)
        kwargs = {}
        for name, value in keyword:
            text = self.encoder.text(value)
            if text is None:
                return None
            kwargs[str(name)] = text
        return args, kwargs


class Watched:
    """A value a kept call of target `index` returned (`call`, its record), watched since
    `since` (`Capture.checks`); `path`: its place in the returned value (`[0].`, or empty)."""

    __slots__ = ("value", "index", "call", "since", "path")

    def __init__(self, value, index: int, call: dict, since: int, path: str):
        self.value, self.index, self.call, self.since, self.path = value, index, call, since, path


class Pending:
    """A target's call under way: its encoded arguments and the arcs (pairs of lines) it
    runs, until it returns."""

    __slots__ = ("capture", "index", "call", "arcs", "last")

    def __init__(self, capture: Capture, index: int, call: dict, line: int):
        self.capture, self.index, self.call = capture, index, call
        self.arcs: set = set()
        self.last = -line

    def event(self, frame, event, arg):
        if event == "line":
            line = frame.f_lineno
            self.arcs.add((self.last, line))
            self.last = line
        elif event == "return":
            self.arcs.add((self.last, -frame.f_code.co_firstlineno))
            with contextlib.suppress(ValueError):  # flushed already
                self.capture.live.remove(self)
            if self.capture.finish(self.index, self.call, self.arcs):
                self.capture.busy = True
                try:
                    self.capture.watch(self.index, self.call, arg)
                finally:
                    self.capture.busy = False
            return None
        return self.event


class NodeIds:
    """A pytest plugin that tells the capture which test runs (`Capture.test`), and keeps the
    ids of the tests that failed, in any phase."""

    def __init__(self, capture=None):
        self.capture = capture
        self.failed = set()

    def pytest_runtest_logstart(self, nodeid, location):
        if self.capture is not None:
            self.capture.test = nodeid

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed.add(report.nodeid)


def run_pytest(pytest, root: str, tests: list, scratch: str, plugin=None) -> str:
    ini = os.path.join(scratch, "r2e_capture.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write("[pytest]\n")
    args = [
        *tests,
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        ini,
        "--rootdir",
        root,
        "-W",
        "ignore",
        "--no-header",
        "-rN",
        # A test file that does not import (a missing test dependency) costs its own tests only.
        "--continue-on-collection-errors",
    ]
    with open(os.devnull, "w", encoding="utf-8") as null:
        saved = sys.stdout
        sys.stdout = null
        try:
            pytest.main(args, plugins=[plugin] if plugin is not None else None)
        finally:
            sys.stdout = saved
    return "pytest"


def run_unittest(tests: list) -> tuple:
    """Runs each file's unittest cases and its parameterless `test*` functions; the number of
    files that did not import."""
    import importlib.util
    import unittest

    failed = 0
    for n, path in enumerate(tests):
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(1, folder)
        name = f"r2e_capture_test_{n}"
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except Deadline:
            raise
        except BaseException:
            failed += 1
            continue
        suite = unittest.defaultTestLoader.loadTestsFromModule(module)
        suite.run(unittest.TestResult())
        for attr, fn in list(vars(module).items()):
            if not attr.startswith("test") or not inspect.isfunction(fn):
                continue
            try:
                if inspect.signature(fn).parameters:
                    continue
                fn()
            except Deadline:
                raise
            except BaseException:
                pass
    return "unittest", failed


def set_paths(request: dict) -> str:
    """The import path as the tests see it; the repository's root."""
    repo_root = os.path.join(HERE, request["repo_root"])
    sys.path[0:0] = [repo_root]
    for extra in request.get("extra_roots") or []:
        extra = os.path.join(HERE, extra)
        if extra not in sys.path:
            sys.path.append(extra)
    sys.path.append(HERE)
    sys.dont_write_bytecode = True
    return repo_root


class StateFinder:
    """Serves one module's import from a given text (a bug-fix task's broken state), with the
    file's own path as its origin, so that the package around it is as it was."""

    def __init__(self, module: str, text: str):
        self.module, self.text = module, text

    def find_spec(self, name, path=None, target=None):
        if name != self.module:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.origin:
            return None
        spec.loader = StateLoader(self.text, spec.origin)
        spec.cached = None
        return spec


class StateLoader:
    def __init__(self, text: str, origin: str):
        self.text, self.origin = text, origin

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = self.origin
        exec(compile(self.text, self.origin, "exec", dont_inherit=True), module.__dict__)


# A broken state's time limit: BROKEN_FLOOR + BROKEN_FACTOR x the module's own run (seconds).
BROKEN_FLOOR = 5.0
BROKEN_FACTOR = 3.0


def project_tests(request: dict, scratch: str) -> dict:
    """The given tests on each state of one module (the module's docstring, second mode)."""
    repo_root = set_paths(request)
    import r2e_limit

    try:
        import pytest
    except BaseException:
        return {"status": "ok", "runner": "none", "failed": []}
    whole = max(float(request.get("time_limit") or 60), 1.0)
    states = request.get("states") or []
    failed = []
    limits = []
    # The module's own run, when the first state is it (wall seconds, which a busy machine only
    # makes longer).
    own = None
    for n, state in enumerate(states):
        text = state.get("text")
        tests = [os.path.join(repo_root, t) for t in state.get("tests") or []]
        limit = whole
        if n > 0 and own is not None:
            limit = min(whole, BROKEN_FLOOR + BROKEN_FACTOR * own)
        limits.append(limit)
        if not tests:
            failed.append([])
            continue
        started = time.monotonic()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            code = 1
            try:
                if text is not None:
                    sys.meta_path.insert(0, StateFinder(request["module"], text))

                def expire(signum, frame):
                    raise Deadline()

                signal.signal(signal.SIGALRM, expire)
                meter = r2e_limit.watch().start(limit, 1.0)
                plugin = NodeIds()
                state_scratch = os.path.join(scratch, f"state-{n}")
                os.makedirs(state_scratch, exist_ok=True)
                try:
                    run_pytest(pytest, repo_root, tests, state_scratch, plugin)
                finally:
                    r2e_limit.watch().stop(meter)
                # pytest ends its session on the limit's interrupt as if it were done: a state
                # whose tests the limit stopped has no answer (the caller stores none).
                if not meter.over:
                    with os.fdopen(write, "w", encoding="utf-8") as f:
                        json.dump(sorted(plugin.failed), f)
                    code = 0
            except BaseException:
                pass
            os._exit(code)
        os.close(write)
        with os.fdopen(read, encoding="utf-8") as f:
            said = f.read()
        _, status = os.waitpid(pid, 0)
        try:
            failed.append(json.loads(said) if os.waitstatus_to_exitcode(status) == 0 else None)
        except ValueError:
            failed.append(None)
        if n == 0 and text is None and failed[0] is not None:
            own = time.monotonic() - started
    return {"status": "ok", "runner": "pytest", "failed": failed, "limits": limits}


def capture(request: dict, scratch: str) -> dict:
    repo_root = set_paths(request)
    import r2e_equiv
    import r2e_limit
    import r2e_reexec

    r2e_equiv.use_project_layer()
    # The tests' random values (a `uuid.uuid4()` passed to a target) are the same on every run.
    r2e_reexec.seed_randomness(0)
    cap = Capture(request)
    cap.resolve_all()
    tests = [os.path.join(repo_root, t) for t in request.get("tests") or []]
    out = {"status": "ok", "runner": "none", "time_limit_hit": False, "tests_failed_to_import": 0}
    if cap.codes and tests:

        armed = [True]

        def expire(signum, frame):
            if armed[0]:
                raise Deadline()

        # The limit follows r2e_limit's one rule (CPU time or idle-machine time, whichever is
        # larger), again every second should a test swallow the first; what the tests started
        # ends with them.
        signal.signal(signal.SIGALRM, expire)
        limit = max(float(request.get("time_limit") or 60), 1.0)
        meter = r2e_limit.watch().start(limit, 1.0)
        threading.settrace(cap.trace)
        sys.settrace(cap.trace)
        try:
            try:
                import pytest
            except BaseException:
                pytest = None
            if pytest is not None:
                out["runner"] = run_pytest(pytest, repo_root, tests, scratch, NodeIds(cap))
            else:
                out["runner"], out["tests_failed_to_import"] = run_unittest(tests)
        except (Deadline, KeyboardInterrupt):
            out["time_limit_hit"] = True
        except BaseException:
            pass
        finally:
            sys.settrace(None)
            threading.settrace(None)
            armed[0] = False
            r2e_limit.watch().stop(meter)
            out["time_limit_hit"] = out["time_limit_hit"] or meter.over
            cap.flush()
    out["calls"] = cap.calls
    out["reached"] = [sorted(r) for r in cap.reached]
    return out


def _ensure_hash_seed():
    """Runs this script under PYTHONHASHSEED=0 (`r2e_reexec.py`)."""
    sys.path.insert(0, HERE)
    try:
        import r2e_reexec
    finally:
        del sys.path[0]
    r2e_reexec.ensure_hash_seed("R2E_CAPTURE_REEXECUTED")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: r2e_capture.py REQUEST.json OUT.json", file=sys.stderr)
        return 2
    _ensure_hash_seed()
    out_path = os.path.abspath(argv[2])
    with open(argv[1], encoding="utf-8") as f:
        request = json.load(f)
    started = time.monotonic()
    try:
        if "states" in request:
            result = project_tests(request, os.path.dirname(out_path))
        else:
            result = capture(request, os.path.dirname(out_path))
    except BaseException as exc:  # the answer is written whatever the tests did
        result = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    result["seconds"] = round(time.monotonic() - started, 3)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    sys.stdout.flush()
    # The tests may have left threads or handlers behind: end here.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
