"""Values of the project's own classes built by the project's public factories.

A parameter that takes one of the project's classes (annotated with it, or unannotated but used
through attributes only such classes have: `G.nodes`, `G.add_edge`) is often built by a
function rather than by its constructor, whose arguments the explorer cannot guess (networkx's
`path_graph(4)` for a `Graph`). `Factories` finds such functions among the public module-level
functions of the reference module and of its top-level package: those whose return annotation
or docstring names the class, or whose name contains it, are called with small arguments
(`()`, `(4,)`, `(3, 3)`...) in the sandboxed explorer, and the calls that return an instance of
the class become specs (`reference.path_graph(4)`, or `reference_package.path_graph(4)` for a
function the package exports). The order is deterministic: the functions the target's own
docstring calls first, then by the kind of evidence, the number of required parameters (one
first: a value of a given size, `path_graph(4)`; then none, then more) and the name.

`classes_with(attributes)`: the project's classes (reachable from the reference module and its
package) that have every attribute a parameter's uses name, most general first.
"""

from __future__ import annotations

import inspect
import re
import sys

from .specs import New, class_path, not_a_factory, writable

# Calls probed per class at most, and factory specs kept per class (distinct functions).
MAX_PROBES = 24
MAX_FACTORIES = 4
# Arguments tried for a factory, by the number of positional arguments it takes.
PROBE_ARGS = ((), (4,), (3, 3), (3, 2, 2))
# Strings the project itself uses (`strings`: its docstrings' and call sites' literals, the
# target's), tried as a one-argument factory's text (`parse(text)`), at most.
MAX_PROBE_STRINGS = 3
# The rank of a function nothing names the class in (probed with those strings only).
NO_EVIDENCE = 4
# Classes returned for a set of attributes at most.
MAX_CLASSES = 2
CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
WORD = re.compile(r"\s*[A-Za-z_0-9.]*")
BUILTIN_NAMES = {"None", "bool", "int", "float", "str", "bytes", "list", "dict", "tuple", "set"}


def _in_package(obj, top: str) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == top or module.startswith(top + ".")


class Factories:
    """The project's factories of a class (`for_class`) and classes with given attributes
    (`classes_with`), for the reference module; `hint_text` is text whose calls name the
    factories to try first (the target's docstrings). Calls run through `probe(spec)`, which
    returns the built value or raises (the explorer runs it under its per-call timer)."""

    def __init__(self, reference, probe, hint_text: str = "", strings=()):
        self.reference = reference
        self.probe = probe
        self.top = reference.__name__.partition(".")[0]
        self.package = sys.modules.get(self.top)
        self.hinted = {m.group(1) for m in CALLED.finditer(hint_text or "")}
        self.strings = [s for s in dict.fromkeys(strings) if isinstance(s, str) and s][
            :MAX_PROBE_STRINGS
        ]
        self.cache: dict = {}

    # -- where names come from ---------------------------------------------------------------

    def _namespaces(self):
        """(root, namespace) pairs: the reference module's, then its package's."""
        out = [("reference", vars(self.reference))]
        if self.package is not None and self.package is not self.reference:
            out.append(("package", vars(self.package)))
        return out

    def functions(self) -> list:
        """(root, name, function) for the public functions of the project reachable by name
        from the reference module or its package, each function once (the reference's name
        first)."""
        seen, out = set(), []
        for root, namespace in self._namespaces():
            for name in sorted(namespace):
                value = namespace[name]
                if name.startswith("_") or not inspect.isfunction(value):
                    continue
                if not _in_package(value, self.top) or id(value) in seen:
                    continue
                if not_a_factory(value):
                    continue
                seen.add(id(value))
                out.append((root, name, value))
        return out

    def classes(self) -> list:
        """(root, name, class) for the project's classes reachable by name (not exceptions)."""
        seen, out = set(), []
        for root, namespace in self._namespaces():
            for name in sorted(namespace):
                value = namespace[name]
                if name.startswith("_") or not isinstance(value, type):
                    continue
                if issubclass(value, BaseException) or not _in_package(value, self.top):
                    continue
                if id(value) in seen:
                    continue
                seen.add(id(value))
                out.append((root, name, value))
        return out

    # -- classes by attributes ---------------------------------------------------------------

    def classes_with(self, attributes) -> list[type]:
        """The project's classes that have every one of `attributes`, the most general first
        (fewest bases, then by name); at most MAX_CLASSES, none when `attributes` is empty."""
        attributes = sorted(set(attributes))
        if not attributes:
            return []
        key = ("attrs", tuple(attributes))
        if key not in self.cache:
            found = [
                cls
                for _root, _name, cls in self.classes()
                if all(_has_attribute(cls, a) for a in attributes)
            ]
            found.sort(key=lambda c: (len(c.__mro__), c.__qualname__))
            # A subclass of a class already found adds nothing (factories of the base class
            # return its subclasses' instances too). Subclasses by their MRO: `issubclass`
            # asks a Protocol, a TypedDict or an ABC's hook, which may raise.
            general = [
                c for c in found if not any(b is not c and b in c.__mro__ for b in found)
            ]
            self.cache[key] = general[:MAX_CLASSES]
        return self.cache[key]

    # -- factories ---------------------------------------------------------------------------

    def alternate_constructors(self, cls) -> list:
        """(root, "Class.name", method) for the public class methods of `cls` defined in the
        project (`Parser.from_text`), and its static methods whose return annotation names it."""
        path, root = class_path(self.reference, cls), "reference"
        if path is None and self.package is not None:
            path, root = class_path(self.package, cls), "package"
        if path is None:
            return []
        out = []
        for name in sorted(vars(cls)):
            raw = vars(cls)[name]
            if name.startswith("_") or not isinstance(raw, (classmethod, staticmethod)):
                continue
            fn = raw.__func__
            if not inspect.isfunction(fn) or not _in_package(fn, self.top) or not_a_factory(fn):
                continue
            if isinstance(raw, staticmethod) and not _names(_returns(fn), cls.__name__):
                continue
            try:
                bound = getattr(cls, name)
            except Exception:  # noqa: BLE001 - a descriptor of the project's may raise
                continue
            out.append((root, f"{path}.{name}", bound))
        return out

    def candidates(self, cls) -> list:
        """(root, name, function, evidence) of the functions that may return `cls`, best first: by the
        evidence (a return annotation naming it; the class's own alternate constructors; the
        name; the docstring; then, for functions of one text, none: `parse(text)` returns a
        document whose class no annotation names, probed with the project's own strings)."""
        word = cls.__name__
        word_re = re.compile(r"\b" + re.escape(word) + r"\b")
        lowered = word.lower()
        ranked = []
        own = [(root, name, fn, 1) for root, name, fn in self.alternate_constructors(cls)]
        for root, name, fn, own_evidence in own + [(*f, None) for f in self.functions()]:
            returns = _returns(fn)
            if returns is not None and _names(returns, word):
                evidence = 0
            elif returns is not None and (
                not isinstance(returns, str) or WORD.match(returns).group(0).strip() in BUILTIN_NAMES
            ):
                # A return annotation naming something else: not a factory of cls.
                continue
            elif own_evidence is not None:
                evidence = own_evidence
            elif lowered in name.lower():
                evidence = 2
            elif word_re.search(inspect.getdoc(fn) or ""):
                evidence = 3
            elif self.strings and _required(fn) == 1:
                evidence = NO_EVIDENCE
            else:
                continue
            required = _required(fn)
            if required is None or required > len(PROBE_ARGS[-1]):
                continue
            # One required argument first (`path_graph(4)`: a small value of a size), then none
            # (a fixed value), then more.
            size = (required != 1, required)
            ranked.append(((name not in self.hinted, evidence, size, name), root, name, fn))
        ranked.sort(key=lambda r: r[0])
        return [(root, name, fn, k[1]) for k, root, name, fn in ranked]

    def for_class(self, cls) -> list:
        """Specs of calls of the project's factories that return an instance of `cls`. A class
        that refuses instance checks (a protocol that is not runtime-checkable, `typing.Any`)
        has no instance to find: none."""
        key = ("class", cls)
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = []
        if _is_instance(None, cls) is None:
            return []
        found, probes = [], 0
        for root, name, fn, evidence in self.candidates(cls):
            if len(found) >= MAX_FACTORIES or probes >= MAX_PROBES:
                break
            tried = _args_for(fn, self.strings)
            if evidence == NO_EVIDENCE:
                if found:
                    break
                # Nothing names the class, and nothing that does built it: a text of the
                # project's own, to parse.
                tried = [a for a in tried if len(a) == 1 and isinstance(a[0], str)]
            for args in tried:
                if probes >= MAX_PROBES:
                    break
                spec = New(name, args, (), root)
                if not writable(spec):
                    continue
                probes += 1
                try:
                    value = self.probe(spec)
                except Exception:  # noqa: BLE001 - a factory that fails is not one
                    continue
                if _is_instance(value, cls):
                    found.append(spec)
                    break
        self.cache[key] = found
        return found


def _is_instance(value, cls):
    """`isinstance(value, cls)`, or None when `cls` refuses the check (a protocol that is not
    runtime-checkable, `typing.Any`, a metaclass whose `__instancecheck__` raises)."""
    try:
        return bool(isinstance(value, cls))
    except Exception:  # noqa: BLE001 - the class's own __instancecheck__
        return None


def _has_attribute(cls, name: str) -> bool:
    try:
        inspect.getattr_static(cls, name)
        return True
    except AttributeError:
        pass
    # An attribute set in __init__ (`self.adj = {}`): named in the constructor's source.
    init = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    return code is not None and name in code.co_names


def _required(fn) -> int | None:
    """How many positional arguments `fn` needs, or None when it needs a keyword-only one."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    required = 0
    for p in sig.parameters.values():
        if p.default is not inspect.Parameter.empty:
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            required += 1
        elif p.kind is p.KEYWORD_ONLY:
            return None
    return required


def _returns(fn):
    annotations = getattr(fn, "__annotations__", None)
    return annotations.get("return", None) if isinstance(annotations, dict) else None


def _names(returns, word: str) -> bool:
    """Whether a return annotation names the class `word` (or `Self`)."""
    text = returns if isinstance(returns, str) else getattr(returns, "__name__", "")
    return bool(text) and re.search(r"\b(" + re.escape(word) + r"|Self)\b", str(text)) is not None


def _args_for(fn, strings=()) -> list[tuple]:
    """The probe arguments that fit `fn`: at least its required positional arguments, at most
    the positional ones it takes (the fewest first); for one argument, the project's own
    strings too (a text to parse)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    params = list(sig.parameters.values())
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is inspect.Parameter.empty)
    fitting = [
        args
        for args in PROBE_ARGS
        if required <= len(args) and (varargs or len(args) <= len(positional))
    ][:2]
    if required == 1:
        fitting += [(s,) for s in strings]
    return fitting
