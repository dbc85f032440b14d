"""Structural snapshots of Python values, for comparing outcomes across processes.

The reference and a candidate never run in the same process: each side's calls are observed
in its own process and turned into snapshots (plain JSON), which r2e compares outside both
(`src/verdict.rs`, under the policy of `docs/harness.md`). A snapshot keeps what a correct
rewrite must preserve and nothing it may change:

- the kind and exact type of every value (by module and qualified name; `bool` is not `int`,
  `int` is not `float`); floats as numbers (compared with a tolerance, NaN equal to NaN);
- the items of sequences in order, of dicts as key/value pairs (plain dicts compared without
  order), of sets as elements (compared without order);
- objects of repository and third-party classes by their state (`vars()` and `__slots__`),
  standard-library values (datetime, Decimal, Path...) by a canonical text, functions and
  classes by name, exceptions (as values) by type and arguments, iterators by their first items;
- never identity: an object reached twice is written out twice (cycles become back-references);
- what a value's own code does is never trusted: types are read with `type()` (a proxy's
  `__class__` may lie), builtin containers through their builtin types' methods (a subclass's
  may raise or lie), and an attribute whose reading raises is recorded by the exception's type
  (`{"value": {"type": "raises", ...}}`: both sides behave alike when it is read). Nothing
  here raises, whatever the value (`tests/test_values.py`).

Standard library only.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import fractions
import ipaddress
import json
import math
import pathlib
import re
import sys
import traceback
import types
import uuid

# A bound on the nodes of one snapshot and on its depth: beyond them the value is cut. A level
# of a value is at most 4 levels of JSON, and r2e reads answers with serde_json's nesting limit
# (128, under which the answer's own envelope takes about 10): 24 levels fit.
MAX_NODES = 20000
MAX_DEPTH = 24
# Items of a sequence, mapping or set kept.
MAX_ITEMS = 1000

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__main__"}

# Standard-library value types compared by a canonical text.
_VALUES = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    decimal.Decimal,
    fractions.Fraction,
    uuid.UUID,
    pathlib.PurePath,
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
    re.Pattern,
    range,
    slice,
)

# Source positions: compared by the name of their function only.
_POSITIONS = (traceback.FrameSummary, types.FrameType, types.TracebackType, types.CodeType)

# Attributes of classes and instances that record how they were used, not what they are
# (`copy` adds `__slotnames__` to a class the first time it copies an instance).
_BOOKKEEPING = frozenset({"__slotnames__", "__weakref__", "__dict__"})


def type_name(t: type) -> str:
    """`module.qualname`; builtins without their module."""
    module = getattr(t, "__module__", None) or ""
    qualname = getattr(t, "__qualname__", None) or getattr(t, "__name__", "?")
    return qualname if module == "builtins" else f"{module}.{qualname}"


def _number(x: float):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _slot_names(t: type) -> list[str]:
    names = []
    for klass in t.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        if isinstance(slots, str):
            slots = (slots,)
        for name in slots:
            if name not in _BOOKKEEPING and name not in names:
                names.append(name)
    return names


_MISSING = object()


class _Raised:
    """An attribute whose reading raised: recorded by the exception's type, and equal to
    another whose reading raised the same type (both sides behave alike when it is read)."""

    __slots__ = ("type",)

    def __init__(self, exc: BaseException):
        self.type = type_name(type(exc))

    def __eq__(self, other):
        return type(other) is _Raised and other.type == self.type

    __hash__ = None


def _read(value, name: str, default):
    """`getattr(value, name, default)`, or a `_Raised` when reading it raises anything but
    AttributeError (a property, a hostile `__getattribute__`)."""
    try:
        return getattr(value, name, default)
    except Exception as exc:  # noqa: BLE001 - a value's own code may raise anything
        return _Raised(exc)


# The builtin containers, each read with its builtin type's own methods.
_SEQUENCES = (list, tuple, collections.deque)
_SETS = (set, frozenset)


def _base(t: type, bases):
    for base in bases:
        if issubclass(t, base):
            return base
    return None


def _items_of(value, base) -> list:
    """A builtin container's items (a dict's pairs), as its builtin type holds them."""
    if base is dict:
        return list(dict.items(value))
    return list(base.__iter__(value))


class _Snapshotter:
    def __init__(self, max_nodes: int = MAX_NODES):
        self.max_nodes = max_nodes
        self.nodes = 0
        # The objects on the current path (id -> position on the path), for cycles.
        self.path: dict[int, int] = {}

    def take(self, value, depth: int = 0):
        self.nodes += 1
        if self.nodes > self.max_nodes or depth > MAX_DEPTH:
            return "cut"
        if value is None:
            return "none"
        t = type(value)
        if t is bool:
            return {"bool": value}
        if t is _Raised:
            return {"value": {"type": "raises", "text": value.type}}
        if issubclass(t, enum.Enum):
            return {"enum": {"type": type_name(t), "name": value.name}}
        if t is int:
            try:
                return {"int": str(value)}
            except ValueError:
                # Past the interpreter's digit limit for decimal text (4300 digits): hex has none
                # and is as exact.
                return {"int": hex(value)}
        if t is float:
            return {"float": _number(value)}
        if t is complex:
            return {"complex": [_number(value.real), _number(value.imag)]}
        if t is str:
            return {"str": value}
        if t in (bytes, bytearray):
            return {t.__name__: value.hex()}
        numpy = sys.modules.get("numpy")
        if numpy is not None and issubclass(t, (numpy.ndarray, numpy.generic)):
            return self._guarded(self._numpy, numpy, value, depth)
        pandas = sys.modules.get("pandas")
        if pandas is not None and issubclass(t, (pandas.DataFrame, pandas.Series)):
            return self._guarded(self._pandas, value, depth)
        if issubclass(t, _VALUES) and str(t.__module__).partition(".")[0] in _STDLIB:
            return {"value": {"type": type_name(t), "text": _canonical(value)}}
        if issubclass(t, _POSITIONS):
            # Where code was: its function's name. Files and line numbers are layout (a correct
            # rewrite moves the lines below it), and a line's text is read from a file the
            # candidate's process does not see.
            if isinstance(value, traceback.FrameSummary):
                name = value.name
            else:
                frame = value.tb_frame if isinstance(value, types.TracebackType) else value
                code = frame.f_code if isinstance(frame, types.FrameType) else frame
                name = code.co_name
            return {"value": {"type": type_name(t), "text": str(name)}}
        if issubclass(t, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            owner = _read(value, "__module__", None) or ""
            return {"function": f"{owner}.{_read(value, '__qualname__', '?')}"}
        if issubclass(t, type):
            return {"class": type_name(value)}
        if issubclass(t, types.ModuleType):
            return {"module": str(_read(value, "__name__", "?"))}
        key = id(value)
        if key in self.path:
            return {"ref": len(self.path) - self.path[key]}
        self.path[key] = len(self.path)
        try:
            return self._composite(value, t, depth)
        finally:
            del self.path[key]

    def _guarded(self, take, *args):
        """A library's value (numpy, pandas) whose own methods raised: written as cut."""
        try:
            return take(*args)
        except Exception:  # noqa: BLE001 - a value's own code may raise anything
            return "cut"

    def _composite(self, value, t, depth):
        name = type_name(t)
        sequence = _base(t, _SEQUENCES)
        if sequence is not None or _is_iterated(value):
            iterated = sequence is None
            items = _read(value, "items", ()) if iterated else _items_of(value, sequence)
            kind = "iter" if iterated else "seq"
            out = {"type": name, "items": self._items(items, depth)}
            if kind == "seq":
                out.update(self._extra(value, depth))
            return {kind: out}
        if issubclass(t, dict):
            held = _items_of(value, dict)
            pairs = []
            for n, (k, v) in enumerate(held):
                if n >= MAX_ITEMS:
                    break
                pairs.append([self.take(k, depth + 1), self.take(v, depth + 1)])
            out = {
                "type": name,
                # The order of a plain dict is not part of its value; an OrderedDict's is.
                "ordered": issubclass(t, collections.OrderedDict),
                "items": pairs,
                "len": len(held),
            }
            out.update(self._extra(value, depth))
            return {"dict": out}
        kind = _base(t, _SETS)
        if kind is not None:
            held = _items_of(value, kind)
            items = _set_order(held)
            if items is held and len(held) <= MAX_ITEMS:
                # Items that are not plain values (enum members, objects): sorted by their
                # snapshots' texts, which no process changes either.
                taken = sorted((self.take(x, depth + 1) for x in held), key=_snapshot_text)
                return {"set": {"type": name, "items": taken, "len": len(held)}}
            return {"set": {"type": name, "items": self._items(items, depth), "len": len(held)}}
        if issubclass(t, BaseException):
            args = _read(value, "args", ())
            return {
                "exception": {
                    "type": name,
                    "args": self._items(args if type(args) is tuple else (args,), depth),
                    "state": self._state(value, depth),
                }
            }
        return {"object": {"type": name, "state": self._state(value, depth)}}

    def _items(self, items, depth) -> list:
        out = []
        for n, item in enumerate(items):
            if n >= MAX_ITEMS:
                out.append("cut")
                break
            out.append(self.take(item, depth + 1))
        return out

    def _extra(self, value, depth) -> dict:
        """Attributes of a container subclass (a list subclass with a `name`)."""
        attrs = _read(value, "__dict__", None)
        if not (isinstance(attrs, dict) and attrs) and type(attrs) is not _Raised:
            return {}
        return {"state": self._state(value, depth)}

    def _state(self, value, depth) -> dict:
        """An object's attributes (`vars()` and `__slots__`), by name (as plain strings, which
        sort whatever a `str` subclass's ordering does), sorted."""
        state = {}
        attrs = _read(value, "__dict__", None)
        if type(attrs) is _Raised:
            state["__dict__"] = attrs
        elif isinstance(attrs, dict):
            for k, v in dict.items(attrs):
                if isinstance(k, str) and k not in _BOOKKEEPING:
                    state[str.__str__(k)] = v
        for slot in _slot_names(type(value)):
            v = _read(value, slot, _MISSING)
            if v is not _MISSING:
                state[slot] = v
        return {k: self.take(state[k], depth + 1) for k in sorted(state)}

    def _numpy(self, numpy, value, depth):
        if isinstance(value, numpy.generic):
            return {"typed": {"type": type_name(type(value)), "value": self.take(value.item(), depth + 1)}}
        return {
            "array": {
                "dtype": value.dtype.kind,
                "shape": list(value.shape),
                "items": self._items(value.ravel().tolist(), depth),
            }
        }

    def _pandas(self, value, depth):
        out = {"type": type_name(type(value)), "index": self._items(list(value.index), depth)}
        if hasattr(value, "columns"):
            out["columns"] = self._items(list(value.columns), depth)
            out["values"] = self._items(value.values.tolist(), depth)
        else:
            out["values"] = self._items(value.tolist(), depth)
        return {"frame": out}


_PLAIN = (str, bytes, int, float, complex, bool, type(None))


def _plain(x) -> bool:
    return type(x) in _PLAIN or (type(x) is tuple and all(_plain(i) for i in x))


def _set_order(value):
    """A set's items in an order that does not depend on the process: sorted by type and text
    when they are plain values (strings, numbers, tuples of them), whose texts do not vary.
    Python runs with -I, which ignores PYTHONHASHSEED, so a set's own order changes from one
    process to the next; the comparison is unordered anyway, but what a dataset records must
    be the same in every build. Other items keep the set's order here; the snapshotter sorts
    their snapshots instead."""
    if len(value) > 100_000 or not all(_plain(x) for x in value):
        return value
    return sorted(value, key=lambda x: (type(x).__name__, repr(x)))


def _snapshot_text(snap) -> str:
    """A snapshot's text, to order a set's items by."""
    return json.dumps(snap, sort_keys=True, default=str)


def _is_iterated(value) -> bool:
    """The drained items of a returned iterator (r2e_equiv.Iterated)."""
    attrs = _read(value, "__dict__", None)
    return type(value).__name__ == "Iterated" and isinstance(attrs, dict) and {
        "items",
        "type_name",
    } <= set(dict.keys(attrs))


def _canonical(value) -> str:
    """The text a standard-library value is compared by: equal values, equal texts."""
    if isinstance(value, decimal.Decimal) and value.is_finite():
        normal = value.normalize()
        return str(normal if normal != 0 else decimal.Decimal(0))
    if isinstance(value, re.Pattern):
        return repr((value.pattern, value.flags))
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return f"<unrepresentable {type_name(type(value))}>"


def snapshot(value, max_nodes: int = MAX_NODES):
    """The snapshot of one value (cut after `max_nodes` nodes)."""
    return _Snapshotter(max_nodes).take(value)


def exception(exc: BaseException, message: str) -> dict:
    """The snapshot of a raised exception: its exact type and its message."""
    return {"type": type_name(type(exc)), "message": message}
