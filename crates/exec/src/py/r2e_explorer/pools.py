"""Value pools: the candidate values of a parameter, from its annotation (evaluated when it is a
string), its default, how the body uses it, the body's literals and their neighbours, and common
values; standard-library samples; lists, sets and dicts built from element values."""

from __future__ import annotations

import builtins
import collections.abc
import enum
import functools
import inspect
import math
import re
import sys
import types
import typing

from .specs import OFF_TYPE_VALUES, Code, Helper, Member, New, class_path, dedupe, writable
from .static import attribute_names, call_arity, compared_names, keyword_names, usage_hints

# Values per parameter pool, and elements drawn from pools to build containers.
POOL_MAX = 48
# Keys of a **kwargs parameter tried (those the body reads).
MAX_KEYWORDS = 6
# Values of a class a parameter is tested against with `isinstance` (an unannotated one).
CLASS_HINT_VALUES = 6

COMMON_VALUES = [
    0, 1, -1, 2, 10, 0.5, -2.5, "", "a", "hello world", "Hello, World!", "Héllo Wörld",
    [], [1, 2, 3], [3, 1, 2], {}, {"a": 1}, None, True, False, (1, 2),
]  # fmt: skip

# Strings tell code apart when they have upper and lower case, accents and other non-ASCII
# letters, punctuation, repeated and surrounding spaces, digits and several lines.
COMMON_ATOMS = {
    int: [0, 1, -1, 2, 10, 100, -7],
    float: [0.0, 0.5, -2.5, 1.0, 3.25, 100.0, -1.0, math.inf, -math.inf, math.nan],
    str: [
        "", "a", "hello world", "Hello, World!", "Héllo Wörld", "abc", "  multiple   spaces  ",
        "ÀÉÎ ñ", "A1 b2-c3", "  padded  ", "CamelCase_and-dash", "two\nlines", "123",
    ],
    bytes: [b"", b"a", b"hello world"],
    bool: [True, False],
    complex: [0j, (1 + 2j)],
}
# Literal variants (string literals) that come before the common atoms (the rest come after
# them), and atoms per type at most.
LEADING_VARIANTS = 16
MAX_ATOMS = 32
MAX_STR_ATOMS = 40

# Working functions for parameters that are called (key functions, callbacks, predicates), by
# the number of arguments they are called with (None: any number).
CALLABLES = {
    0: ["lambda: 0", "list", "lambda: 'value'"],
    1: ["lambda x: x", "str", "lambda x: -x", "len", "abs", "bool", "repr"],
    2: ["lambda x, y: x + y", "max", "lambda x, y: (y, x)", "min"],
    None: ["lambda *args: args", "lambda *args: str(args)"],
}
PREDICATES = ["bool", "lambda x: not x", "lambda x: x is None"]
# Parameter names that say "a function": key, func, callback, pred... (whole names, or a
# `_func`/`_key`/... suffix).
CALLABLE_NAME = re.compile(
    r"^(key|keyfunc|func|function|fn|f|callback|cb|pred|predicate|condition|cond|transform|"
    r"mapper|getter|factory|hook|handler)$|_(func|function|fn|key|callback|cb|pred|predicate)$"
)
PREDICATE_NAME = re.compile(r"pred|cond|filter|test|check")


def is_function(value) -> bool:
    """A function, builtin or method (not a class): a parameter's default that is called."""
    return isinstance(
        value,
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            functools.partial,
        ),
    )


def callables_like(fn) -> list:
    """Working functions to stand in for the function `fn` (a parameter's default): those
    taking as many arguments; for a builtin without a signature (`time.monotonic`), first one
    taking any arguments and giving a constant (a clock that does not move)."""
    arity = required_arity(fn)
    if arity is None:
        return dedupe([Code("lambda *args: 0")] + callables_for(None))
    return callables_for(arity)


def required_arity(fn) -> int | None:
    """How many arguments `fn` requires (None when its signature is unknown or has *args)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(
        1
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def callables_for(arity: int | None, predicate: bool = False) -> list:
    """Working functions (Code specs) for a parameter called with `arity` arguments (None:
    unknown), predicates first for a predicate."""
    if arity in CALLABLES:
        texts = CALLABLES[arity] + CALLABLES[None]
    else:
        texts = CALLABLES[1][:1] + CALLABLES[None][:1] + CALLABLES[1][1:] + CALLABLES[2][:2]
    if predicate and arity in (1, None):
        texts = PREDICATES + texts
    return dedupe(Code(t) for t in texts)


def standard_samples():
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


STANDARD_SAMPLES = standard_samples()


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


class PoolMaker:
    """Builds the candidate values of parameters: from annotations, defaults, usage hints,
    body literals and common values, in that order of priority."""

    def __init__(self, reference, literals, own_instances=(), instance_finder=None):
        self.reference = reference
        self.literals = literals
        self.own_instances = list(own_instances)
        self.instance_finder = instance_finder
        # The syntax tree of the class whose constructor's parameters these are (set by the
        # construction search): what its methods use on a kept parameter (`self.G.nodes`).
        self.owner_node = None
        self.atoms = {t: self._atoms(t) for t in COMMON_ATOMS}

    def _atoms(self, t):
        variants = [v for lit in self.literals for v in literal_variants(lit) if type(v) is t]
        if t is float:
            # Integral literals compared with floats are useful boundaries too.
            variants += [
                float(v) for lit in self.literals if type(lit) is int for v in literal_variants(lit)
            ]
        if t is str:
            # Strings: the literals themselves, the common strings, then the literals'
            # neighbours (many literals must not crowd the common strings out).
            literals = [lit for lit in self.literals if type(lit) is str]
            return dedupe(
                literals[:LEADING_VARIANTS] + COMMON_ATOMS[t] + variants, limit=MAX_STR_ATOMS
            )
        return dedupe(
            variants[:LEADING_VARIANTS] + COMMON_ATOMS[t] + variants[LEADING_VARIANTS:],
            limit=MAX_ATOMS,
        )

    # -- annotations ------------------------------------------------------------------------

    def for_annotation(self, ann, globalns, depth=0):
        """Values for a type annotation, or None when it says nothing usable."""
        if ann is inspect.Parameter.empty or ann is typing.Any or ann is object:
            return None
        if isinstance(ann, str):
            ann = eval_annotation(ann, globalns)
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
            arity = None
            if targs and isinstance(targs[0], (list, tuple)):
                arity = len(targs[0])
            return callables_for(arity) + [Helper("sample_function")]
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

    def compared_values(self, node, name: str, globalns) -> list:
        """The values the parameter is compared with (`valtype is int`, `x is MISSING`): a
        builtin type by its name, a module-level value of the reference as
        `reference.NAME` (literals as themselves)."""
        out = []
        for ident in compared_names(node, name):
            if ident in BUILTIN_TYPE_NAMES:
                out.append(Code(ident))
                continue
            value = globalns.get(ident, _ABSENT) if isinstance(globalns, dict) else _ABSENT
            if value is _ABSENT or isinstance(value, types.ModuleType):
                continue
            if type(value) in (int, float, str, bytes, bool) and writable(value):
                out.append(value)
            elif getattr(self.reference, ident, _ABSENT) is value:
                out.append(Member(ident))
        return out

    def _sequences_of(self, kind) -> list:
        """Lists of values of a builtin type (`isinstance(p[0], dict)`): one value, two, and
        the values with one of another type after them."""
        if kind is dict:
            values = make_dicts(self.atoms[str][:3], self.atoms[int][:3])
            values = [v for v in values if v] or values
        elif kind in (list, tuple):
            values = [kind(v) for v in make_lists(self.atoms[int][:3])]
        elif kind in self.atoms:
            values = self.atoms[kind][:4]
        else:
            return []
        if not values:
            return []
        lists = [[v] for v in values[:3]] + [values[:2], values[:3]]
        return lists + [values[:1] + [None]]

    def _elements(self, ann, globalns, depth):
        vals = self.for_annotation(ann, globalns, depth + 1) if ann is not None else None
        if not vals:
            vals = self.atoms[int][:4] + self.atoms[str][:3]
        return [v for v in vals if hashable(v)][:8] or vals[:8]

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
        hints = usage_hints(node, param.name)
        if "callable" in hints or CALLABLE_NAME.search(param.name):
            # Working functions: first for a parameter the body calls, after the values of
            # other hints for one whose name only suggests a function.
            called = callables_for(
                call_arity(node, param.name), bool(PREDICATE_NAME.search(param.name))
            )
            hinted += called if "callable" in hints else []
        for h in hints:
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
            elif h == "unpacked":
                hinted += make_rows(self.atoms[int][:4], self.atoms[str][:4])
            elif type(h) is tuple and h[0] == "items":
                hinted += self._sequences_of(h[1])
            elif type(h) is tuple and h[0] == "class":
                cls = globalns.get(h[1]) if isinstance(globalns, dict) else None
                if isinstance(cls, type):
                    hinted += (self.for_annotation(cls, globalns) or [])[:CLASS_HINT_VALUES]
        if CALLABLE_NAME.search(param.name) and "callable" not in hints:
            hinted += called
        attributes = attribute_names(node, param.name, self.owner_node)
        with_attributes = getattr(self.instance_finder, "with_attributes", None)
        if attributes and with_attributes is not None:
            # Used through attributes only the project's classes have (`G.nodes`): instances
            # of those classes, from the project's factories or constructors, first.
            hinted = with_attributes(attributes) + hinted
        if not default and is_function(param.default):
            # A function as the default (`timer=time.monotonic`): working functions taking as
            # many arguments, first (`lambda: 0`, a timer whose results repeat).
            hinted = callables_like(param.default) + hinted
        hinted += self.compared_values(node, param.name, globalns)
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

    def for_var_keyword(self, node, name: str, taken) -> list:
        """Dicts of extra keyword arguments for `**name`: none, then each key the body reads
        (`kwargs.get("call_during_try")`) or, when it reads none, a generic key, with a few
        values each (true values first: a key read is most often a flag), then all keys
        together. Names of the other parameters (`taken`) are left out."""
        keys = [k for k in keyword_names(node, name) if k not in taken][:MAX_KEYWORDS]
        if not keys:
            keys = [k for k in ("key", "extra") if k not in taken][:1]
        values = dedupe([True, 1, "a", False, None, 0] + self.atoms[str][:2])[:6]
        out: list = [{}]
        for k in keys:
            out += [{k: v} for v in values[:4]]
        for v in values[4:]:
            out.append({keys[0]: v})
        if len(keys) > 1:
            out.append({k: values[0] for k in keys})
        return dedupe(out, limit=POOL_MAX)

    def for_var_positional(self) -> list:
        """Tuples of extra positional arguments for *args."""
        atoms = self.atoms[int][:3] + self.atoms[str][:2]
        return dedupe([(), (atoms[0],), (atoms[0], atoms[1]), (atoms[3],), tuple(atoms[:3])])


# Builtin types a parameter may be compared with (`valtype is int`), written by their names.
BUILTIN_TYPE_NAMES = ("int", "float", "str", "bytes", "bool", "list", "dict", "tuple", "set")
_ABSENT = object()


class ProjectNames(dict):
    """The names an annotation of a module of package `top` may use beyond the module's globals
    (the locals of its evaluation): `typing`, and, for a name the module binds only under
    `if TYPE_CHECKING:` (`from . import blockparser`, `from markdown import Markdown`), the
    loaded module of the package of that last name, else a class of that name defined in a
    loaded module of the package (the first by module name)."""

    def __init__(self, top: str, globalns: dict):
        super().__init__(typing=typing)
        self.top = top
        self.globalns = globalns

    def __missing__(self, name):
        # Locals are read first: the module's own names and the builtins go on to be found
        # where they are.
        if not self.top or name in self.globalns or hasattr(builtins, name):
            raise KeyError(name)
        ours = sorted(
            (m, mod)
            for m, mod in list(sys.modules.items())
            if mod is not None and (m == self.top or m.startswith(self.top + "."))
        )
        for m, mod in ours:
            if m.rpartition(".")[2] == name:
                return mod
        for m, mod in ours:
            value = vars(mod).get(name)
            if isinstance(value, type) and getattr(value, "__module__", None) == m:
                return value
        raise KeyError(name)


def eval_annotation(text: str, globalns):
    """The annotation a string stands for in `globalns` (with `ProjectNames` for names it binds
    only for type checkers); a builtin type by name, or the text itself when it cannot be
    evaluated."""
    globalns = dict(globalns or {})
    top = str(globalns.get("__name__") or "").partition(".")[0]
    try:
        return eval(text, globalns, ProjectNames(top, globalns))  # noqa: S307 - annotations
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


def hashable(v) -> bool:
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


def make_rows(ints, strs) -> list:
    """Lists of lists, for a parameter whose items are passed as arguments (`zip(*rows)`):
    columns of one length whose orders differ (unsorted ints, unsorted strings, sorted ints),
    one column, and columns of different lengths."""
    i = (list(ints) or [1, 2, 3]) + [7, 8, 9]
    s = (list(strs) or ["a", "b", "c"]) + ["x", "y", "z"]
    ints_unsorted, strs_unsorted = [i[1], i[2], i[0]], [s[1], s[2], s[0]]
    ints_sorted = sorted(i[:3])
    return dedupe(
        [
            [ints_unsorted, strs_unsorted],
            [strs_unsorted, ints_unsorted, ints_sorted],
            [ints_unsorted],
            [ints_unsorted, strs_unsorted[:2]],
            [],
        ]
    )


def make_sets(elems) -> list:
    e = [x for x in elems if hashable(x)] or [1, 2, 3]
    return dedupe([set(), {e[0]}, set(e[:3]), set(e[:6])])


def make_dicts(keys, values) -> list:
    k = [x for x in keys if hashable(x)] or ["a", "b"]
    v = list(values) or [1, 2]
    while len(k) < 2:
        k.append(k[-1])
    while len(v) < 3:
        v.append(v[-1])
    return dedupe([{}, {k[0]: v[0]}, {k[0]: v[0], k[1]: v[1]}, {k[1]: v[2]}])
