"""Input values ("specs") and how they are written in a harness.

A spec is plain data: None, bool, int, float, complex, str, bytes, and list/tuple/dict/set of
specs, plus markers for values that are not literals: `New` (an instance of a class of the
reference module, written `reference.Class(args...)`), `Member` (an attribute of the reference
module such as an enum member, written `reference.Color.RED`), `Helper` (a function of the
equivalence helper, written `r2e_equiv.sample_function`), `Code` (a builtin or a lambda,
written as it is: `len`, `lambda x: -x`) and `Loaded` (a value captured while the project's own
tests ran that no literal writes, written `r2e_equiv.loads(b"...")`). `render` writes a spec as Python source
(its text is also the spec's identity); `build` makes the value.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import math
import sys
import types


class Unwritable(Exception):
    """A value that cannot be written in a harness."""


class New:
    """reference.<path>(*args, **kwargs) — args: tuple of specs, kwargs: tuple of (name, spec).
    With `root="package"` the path is under the reference module's top-level package instead,
    written `reference_package.<path>(...)` (a factory the package exports, such as
    `reference_package.path_graph(4)`; the harness imports the package under that name)."""

    __slots__ = ("path", "args", "kwargs", "root")

    def __init__(self, path: str, args=(), kwargs=(), root: str = "reference"):
        self.path = path
        self.args = tuple(args)
        self.kwargs = tuple(kwargs)
        self.root = root

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


class Code:
    """A Python expression written as it is: a builtin's name (`len`) or a lambda
    (`lambda x: -x`), to hand to parameters that are called (key functions, callbacks,
    predicates). Only the explorer's own fixed texts are Code (never text read from a
    repository); `build` evaluates it with the builtins only, a fresh function every time."""

    __slots__ = ("source",)

    def __init__(self, source: str):
        self.source = source

    def __eq__(self, other):
        return isinstance(other, Code) and self.source == other.source

    def __hash__(self):
        return hash(("code", self.source))

    def __repr__(self):
        return render(self)


class Loaded:
    """r2e_equiv.loads(<pickle>): an argument captured while the project's own tests ran
    (`r2e_capture.py`) that no literal writes, such as an instance of the project's own class
    in the state the tests gave it; a fresh value every time it is built."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __eq__(self, other):
        return isinstance(other, Loaded) and self.data == other.data

    def __hash__(self):
        return hash(("loaded", self.data))

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
        prefix = PACKAGE_NAME if v.root == "package" else "reference"
        return f"{prefix}.{v.path}(" + ", ".join(parts) + ")"
    if t is Member:
        return f"reference.{v.path}"
    if t is Helper:
        return f"r2e_equiv.{v.name}"
    if t is Code:
        return v.source
    if t is Loaded:
        return f"r2e_equiv.loads({v.data!r})"
    raise Unwritable(f"cannot write a {t.__name__}")


# The harness's name of the reference module's top-level package (see New).
PACKAGE_NAME = "reference_package"


def package_of(reference):
    """The top-level package of the reference module (the module itself when it is one)."""
    return importlib.import_module(reference.__name__.partition(".")[0])


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
        cls = resolve(package_of(reference) if v.root == "package" else reference, v.path)
        return cls(
            *[build(a, reference) for a in v.args], **{k: build(x, reference) for k, x in v.kwargs}
        )
    if t is Member:
        return resolve(reference, v.path)
    if t is Helper:
        return getattr(sys.modules["r2e_equiv"], v.name)
    if t is Code:
        return eval(v.source, {"__builtins__": builtins})  # noqa: S307 - the explorer's own texts
    if t is Loaded:
        return sys.modules["r2e_equiv"].loads(v.data)
    return v


# Values tried last for an annotated parameter, whatever its annotation says.
OFF_TYPE_VALUES = [None, 0, "", 1.5, [], Helper("sample_function")]
OFF_TYPE_KEYS = {render(v) for v in OFF_TYPE_VALUES}

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

def construction_parts(ctor_call) -> tuple:
    """(args, kwargs, setup, receiver) of a construction of a method's class: (args, kwargs)
    specs; optionally the set-up calls made on the instance before the method, a tuple of
    (method name, args) pairs such as `("__setitem__", ("a", 1))`; and optionally the receiver,
    a spec of the instance itself (a receiver the project's tests called the method on, a
    factory's call), in which case args and kwargs are empty (see `r2e_equiv.check_method`)."""
    if ctor_call is None:
        return (), {}, (), None
    return (
        ctor_call[0],
        ctor_call[1],
        (ctor_call[2] if len(ctor_call) > 2 else ()),
        (ctor_call[3] if len(ctor_call) > 3 else None),
    )


def receiver_construction(spec) -> tuple:
    """A construction that calls the method on the instance `spec` builds."""
    return ((), {}, (), spec)


# Markers of an input's parameter values (see inputs.py).
UNKNOWN = object()  # an argument whose value could not be recovered (filled from the base)
OMIT = object()  # an optional parameter left to its default


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
    if isinstance(node, ast.Name) and isinstance(getattr(builtins, node.id, None), type):
        # A builtin class as a value (`str`, `int`: a converter, a type to check against).
        return Code(node.id)
    if isinstance(node, ast.Call) and dotted_name(node.func) == "r2e_equiv.loads":
        # A captured argument (`r2e_capture.py`).
        if len(node.args) == 1 and not node.keywords:
            data = node.args[0]
            if isinstance(data, ast.Constant) and isinstance(data.value, bytes):
                return Loaded(data.value)
        raise ValueError("not a captured value")
    if isinstance(node, ast.Call) and depth < 2 and reference is not None:
        path = dotted_name(node.func)
        if path is not None:
            class_at, root = resolve_class(reference, path), "reference"
            if class_at is None:
                # A function of the project that builds the value (`nx.path_graph(4)`).
                class_at, root = resolve_factory(reference, path)
            if class_at is not None and not any(isinstance(a, ast.Starred) for a in node.args):
                if any(k.arg is None for k in node.keywords):
                    raise ValueError("** arguments")
                args = [spec_from_node(a, reference, depth + 1) for a in node.args]
                kwargs = [
                    (k.arg, spec_from_node(k.value, reference, depth + 1)) for k in node.keywords
                ]
                return New(class_at, args, kwargs, root)
    raise ValueError("not a literal")


def dotted_name(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def resolve_class(reference, path: str):
    """The path of a class under the reference module for a name used in source, or None."""
    for candidate in (path, path.split(".")[-1]):
        try:
            obj = resolve(reference, candidate)
        except AttributeError:
            continue
        if isinstance(obj, type):
            return class_path(reference, obj)
    return None


# Functions never used as a value's factory: the target of the explorer's current run (`Explorer`
# sets it). A check runs the candidate in the target's place, so a value the target built would
# be the candidate's own output, and a wrong candidate could agree with itself.
NOT_FACTORIES: list = []


def not_a_factory(obj) -> bool:
    """Whether `obj` is (or wraps) a function of NOT_FACTORIES."""
    seen = 0
    while obj is not None and seen < 8:
        if any(obj is f for f in NOT_FACTORIES):
            return True
        obj, seen = getattr(obj, "__wrapped__", None), seen + 1
    return False


def resolve_factory(reference, path: str) -> tuple:
    """(path, root) of a public function of the reference module's own package named as
    `path` in source (`nx.path_graph`, `path_graph`): reachable under the reference module as
    written, else exported by the top-level package under its last name; (None, None)
    otherwise (functions of other packages or builtins are not rebuilt)."""
    top = reference.__name__.partition(".")[0]

    def ours(obj) -> bool:
        if isinstance(obj, types.MethodType) and isinstance(obj.__self__, type):
            # A class's alternate constructor (`Parser.from_text`): a classmethod.
            obj = obj.__func__
        module = getattr(obj, "__module__", None) or ""
        return (
            isinstance(obj, types.FunctionType)
            and (module == top or module.startswith(top + "."))
            and not not_a_factory(obj)
        )

    name = path.split(".")[-1]
    if name.startswith("_"):
        return None, None
    try:
        if ours(resolve(reference, path)):
            return path, "reference"
    except AttributeError:
        pass
    package = sys.modules.get(top)
    if package is not None and package is not reference and ours(getattr(package, name, None)):
        return name, "package"
    return None, None


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
