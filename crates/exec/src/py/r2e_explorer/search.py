"""The search: loading the target, finding constructions of a method's class and instances of
classes named in annotations, observing calls, the coverage-guided loop (doctest examples,
call sites, the base input and its variations, then mutations of the inputs kept) and the
mutation analysis after it (mutants run on the inputs, a hunt for inputs that kill survivors).

Every call of code under test runs through `Executor.run` at the same stack depth as before the
explorer was split into modules (r2e_explore.py, 2,263 lines): the code under test sees the same
recursion headroom, so recursive functions behave the same near the recursion limit. Keep it so
when moving code: a helper between `Explorer.run` and `Executor.run` would change that depth.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import inspect
import itertools
import json
import linecache
import os
import random
import re
import signal
import sys
import time

import r2e_limit

from . import regexgen
from .factories import Factories
from .inputs import Input, InputSpace
from .mutants import MutantMaker, MutationAnalysis, caches_of, installed
from .pools import POOL_MAX, PoolMaker, callables_like, is_function
from .render import render_harness
from .select import Selection
from . import specs
from .specs import (
    THEN_CALLS,
    UNKNOWN,
    Code,
    New,
    OMIT,
    Unwritable,
    build,
    class_path,
    construction_parts,
    dedupe,
    receiver_construction,
    render,
    resolve,
    writable,
)
from .static import (
    body_literals,
    class_node,
    call_site_specs,
    docstring_calls,
    example_programs,
    function_node,
    global_literals,
    type_hints,
)
from .tracing import ArcTracer, Budget, Executor, NullWriter, Stop, tracer_for

# How many constructions of a method's class are kept to explore the method on.
MAX_CONSTRUCTIONS = 6
# Constructions the mutant hunt may add (a kept construction with one argument changed), and
# the share of the hunt's inputs that try one.
MAX_HUNT_CONSTRUCTIONS = 6
HUNT_CONSTRUCTION_SHARE = 0.25
# Concrete subclasses tried when a method's own class cannot be constructed.
MAX_SUBCLASSES = 4
# Instances taken as they are (receivers the project's own tests or docstrings called the
# method on, a factory's product when no constructor call works), at most, beside the
# constructions found.
MAX_RECEIVERS = 3
# Items put into an instance of a mapping class before the method is called (set-up calls):
# str keys and int keys, one item and three (a small cache evicts); tried on the first
# FILL_BASES constructions, at most MAX_FILLED kept.
FILLS = (
    (("a", 1),),
    (("a", 1), ("b", 2), ("c", 3)),
    ((0, "a"),),
    ((0, "a"), (1, "b"), (2, "c")),
)
FILL_BASES = 3
MAX_FILLED = 3
# Consecutive already-tried inputs after which the mutation phase gives up (space exhausted).
MAX_DUPLICATE_STREAK = 2000
# The search's stopping rule (the request's `plateau`, 0 for none): the mutation phase stops
# when the last max(plateau, G, PER_KEPT * K) executions kept no input, G being the execution
# that kept the last one (a search that found its last input late waits as long again) and K
# the inputs kept (a function of many behaviours is searched longer). A count, never a time: a
# loaded machine stops where an idle one does.
DEFAULT_PLATEAU = 300
PER_KEPT = 80
# Inputs that were executed but not kept, remembered to fill the harness up at the end and
# as candidates that kill mutants (one per outcome and arcs).
MAX_TRIED_LOG = 500
# Tried inputs remembered per outcome and arcs.
MAX_ALIKE = 3
# The mutation analysis after the search: at most ANALYSIS_EXECUTIONS times the budget in
# executions (a count, never a time, so that a loaded machine writes the same harness); its
# safety stop is ANALYSIS_SHARE of the time left, which counts as the time limit hit;
# VERIFY_RESERVE executions of it are kept back to re-run the inputs the selection takes.
ANALYSIS_EXECUTIONS = 4
ANALYSIS_SHARE = 0.8
VERIFY_RESERVE = 40
# A mutant's call may take MUTANT_SLOWDOWN times the reference's time (on r2e_limit's clock;
# at least MUTANT_MIN_TIMEOUT seconds, at most the per-call timeout) before it counts as a
# timeout, which kills it.
MUTANT_SLOWDOWN = 10.0
MUTANT_MIN_TIMEOUT = 0.1
# The search for inputs that kill surviving mutants gives up after this many inputs in a row
# that kill none (at most a fifth of the budget).
HUNT_PATIENCE = 300
# Surviving mutants described in the answer.
MAX_SURVIVORS = 5
# The named `then` calls taken from what the project's tests did with the target's return
# values (`Explorer.site_uses`), at most.
SITE_USES = 6

# Executions of the first inputs (doctest examples, call sites, the base input and its first
# variations) during which the compiled patterns the function uses are watched, and strings
# made to match them at most (tried on every string parameter, then in its pool).
PATTERN_WATCH = 24
MAX_PATTERN_STRINGS = 40
# A line that raises explicitly.
RAISE_LINE = re.compile(r"(^|:)\s*raise\b")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ILL_TYPED_KINDS = ("raise:TypeError", "raise:AttributeError")


class ExploreError(Exception):
    """The exploration failed; the message is the answer's `error`."""


class ExampleCall:
    """The "call" of an entry that is a docstring's example run as a program
    (r2e_equiv.run_example) rather than one call of the target with arguments."""

    __slots__ = ("source",)

    def __init__(self, source: str):
        self.source = source


class Entry:
    """An executed input: its call, arcs and outcome; the reference's observation (`obs`) and
    how long the call took; whether the outcome is an interpreter error on ill-typed input
    (`ill_typed`); the indices of the mutants it kills (`kills`); whether a second run gave the
    same observation (`verified`); whether it is a doctest example or a call site
    (`example`)."""

    __slots__ = (
        "inp", "key", "ctor_call", "call", "arcs", "kind", "returned", "value_key", "seq", "then",
        "obs", "seconds", "ill_typed", "kills", "verified", "example",
    )  # fmt: skip

    def __init__(
        self,
        inp,
        key,
        ctor_call,
        call,
        arcs,
        kind,
        returned,
        value_key,
        seq,
        then=False,
        obs=None,
        seconds=0.0,
        ill_typed=False,
        verified=False,
        example=False,
    ):
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
        self.obs, self.seconds, self.ill_typed, self.verified = obs, seconds, ill_typed, verified
        # Whether the input comes from a doctest example or a call site (a use the authors
        # wrote).
        self.example = example
        self.kills: frozenset = frozenset()

    def signature(self):
        """What makes two entries alike: the same arcs, outcome kind and mutants killed."""
        return (self.arcs, self.kind, self.kills)


# --------------------------------------------------------------------------------------------
# The target
# --------------------------------------------------------------------------------------------


class Target:
    """The function or method explored, resolved in the reference module: `callable` (what is
    called or read), `func` (its unwrapped function), `cls`, `method_name` and `method_kind`
    (r2e_equiv.method_kind) for methods, its signature (without self), tracer, syntax tree,
    literals (of its body and of the module-level tables it names), globals and annotations."""

    def __init__(self, reference, module_name: str, qualname: str, kind: str, equiv):
        self.reference = reference
        self.qualname = qualname
        self.cls = None
        # The class whose instances call the method: the method's own class, or a concrete
        # subclass when that class cannot be constructed (see `concrete_subclasses`).
        self.ctor_cls = None
        self.method_name = None
        self.method_kind = "function"
        try:
            func = self._resolve(module_name, kind, equiv)
        except AttributeError as exc:
            raise ExploreError(f"{module_name} has no {qualname}: {exc}") from None
        self.func = inspect.unwrap(func) if callable(func) else func
        self.signature = self._signature(func)
        self.tracer = tracer_for(self.func)
        self.node = function_node(self.func)
        self.literals = dedupe(
            body_literals(self.node)
            + global_literals(self.node, getattr(self.func, "__globals__", None)),
            limit=60,
        )
        self.globalns = getattr(self.func, "__globals__", vars(reference))
        self.annotations = type_hints(self.func)

    def _resolve(self, module_name: str, kind: str, equiv):
        """Sets `callable` (and the class and method for a method); returns the function."""
        parts = self.qualname.split(".")
        if kind == "method":
            if len(parts) < 2:
                raise ExploreError(f"{self.qualname!r} is not Class.method")
            self.cls = resolve(self.reference, ".".join(parts[:-1]))
            if not isinstance(self.cls, type):
                raise ExploreError(f"{'.'.join(parts[:-1])} is not a class")
            self.ctor_cls = self.cls
            self.method_name = parts[-1]
            raw = inspect.getattr_static(self.cls, self.method_name)
            self.method_kind = equiv.method_kind(self.cls, self.method_name)
            self.callable = (
                getattr(self.cls, self.method_name) if self.method_kind != "property" else raw
            )
            func = raw
            if isinstance(raw, (staticmethod, classmethod)):
                func = raw.__func__
            elif isinstance(raw, property):
                func = raw.fget
            return func
        self.callable = func = resolve(self.reference, self.qualname)
        if not callable(func):
            raise ExploreError(f"{module_name}.{self.qualname} is not callable")
        return func

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


# --------------------------------------------------------------------------------------------
# Instances and constructions
# --------------------------------------------------------------------------------------------


class InstanceFinder:
    """Called with a class of the reference module used in an annotation: a few constructor
    expressions for it (validated by building them; literal arguments only), cached per class.
    For the method's own class (`own_class`) these are its constructions (`own_constructions`,
    a list the construction search fills) once there are any."""

    def __init__(self, reference, executor: Executor, equiv, own_class, own_constructions: list):
        self.reference = reference
        self.executor = executor
        self.equiv = equiv
        self.own_class = own_class
        self.own_constructions = own_constructions
        self.cache: dict = {}
        self.depth = 0
        # The project's factories (factories.Factories), once the explorer has set them.
        self.factories = None

    def with_attributes(self, attributes) -> list:
        """Instances of the project's classes that have all of `attributes` (an unannotated
        parameter used as `G.nodes`, `G.add_edge(...)`): built by factories or constructors."""
        if self.factories is None:
            return []
        out = []
        for cls in self.factories.classes_with(attributes):
            out += self(cls)
        return out

    def __call__(self, cls) -> list:
        path, root = class_path(self.reference, cls), "reference"
        if path is None and self.factories is not None and self.factories.package is not None:
            # A class the module does not name but its package exports (`mygraph.Graph`).
            path, root = class_path(self.factories.package, cls), "package"
        if path is None or issubclass(cls, BaseException):
            return []
        if cls is self.own_class and self.own_constructions:
            # The method's own class: the constructions that worked.
            found = []
            for c in self.own_constructions:
                args, kwargs, setup, receiver = construction_parts(c)
                if receiver is not None:
                    found.append(receiver)
                elif not setup:
                    found.append(New(path, args, kwargs.items()))
            return found
        if cls in self.cache:
            return self.cache[cls]
        self.cache[cls] = []
        # The project's own factories first (`path_graph(4)` for a Graph), then constructors.
        made = self.factories.for_class(cls) if self.factories is not None else []
        found = [] if inspect.isabstract(cls) else self._constructions(cls, path, root)
        if not found and not made and root == "reference":
            # An abstract class (or one that cannot be built from literals) in an annotation
            # stands for its subclasses: instances of the simplest that can be built.
            for sub in reachable_subclasses(self.reference, cls)[:MAX_SUBCLASSES]:
                found += self._constructions(sub, class_path(self.reference, sub))[:2]
                if len(found) >= 4:
                    break
        found = made + found
        self.cache[cls] = found
        return found

    def _constructions(self, cls, path, root="reference") -> list:
        """Up to 4 constructor expressions of `cls` (reachable as `path`) that build."""
        init = inspect.unwrap(getattr(cls, "__init__", object.__init__))
        try:
            sig = inspect.signature(cls)
        except (TypeError, ValueError):
            return []
        node = function_node(init) if inspect.isfunction(init) else None
        # A constructor parameter annotated with another class of the repository gets instances
        # of it in turn (a Context needs a Command), two levels deep at most.
        self.depth += 1
        try:
            finder = self if self.depth < 3 else None
            pools = PoolMaker(self.reference, body_literals(node), instance_finder=finder)
            space = InputSpace(
                sig,
                pools,
                type_hints(init),
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
                spec = New(path, call[0], call[1].items(), root)
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
            self.depth -= 1
        return found


class ConstructionFinder:
    """Constructor calls of the method's class that succeed deterministically: from doctest
    examples, the base input of `__init__`'s parameters, homogeneous inputs, variations, then
    random combinations. Those that reach new arcs of `__init__`, give attributes of new types
    or (for the first three) distinct states are kept, at most MAX_CONSTRUCTIONS, in `found`
    (the explorer's `constructions`: filled as they are found, so that the budget may stop the
    search and leave those found so far)."""

    def __init__(self, explorer: Explorer):
        self.explorer = explorer
        self.found: list = explorer.constructions  # (args, kwargs) specs
        self.space: InputSpace | None = None

    def candidates(self, space: InputSpace, attempts: int):
        """Constructor inputs, in the order they are tried."""
        explorer = self.explorer
        seeds = [space.from_call(c) for c in explorer.doc_ctors]
        seeds += [
            space.from_call(ctor)
            for ctor, _ in explorer.doc_calls
            if ctor is not None and construction_parts(ctor)[3] is None
        ]
        base = space.base()
        return itertools.chain(
            [s for s in seeds if s is not None],
            [base],
            space.homogeneous(base),
            space.variations(base),
            # Random combinations of pool values when nothing simpler worked.
            (space.random_input(explorer.rng, 1) for _ in range(attempts * 4)),
        )

    def find(self):
        """Fills `found` (stopping early, with those found so far, when the budget runs out);
        raises ExploreError when no construction works."""
        explorer = self.explorer
        target = explorer.target
        if target.cls is None or target.method_kind in ("static", "class", "init"):
            return
        cls, reference, equiv = target.ctor_cls, target.reference, explorer.equiv
        init = inspect.unwrap(getattr(cls, "__init__", None) or object.__init__)
        try:
            sig = inspect.signature(cls)
        except (TypeError, ValueError):
            sig = inspect.Signature()
        node = function_node(init) if inspect.isfunction(init) else None
        # The method's own literals (thresholds on the instance's state) help too.
        literals = dedupe(body_literals(node) + target.literals, limit=60)
        pools = PoolMaker(reference, literals, instance_finder=explorer.instances)
        pools.owner_node = class_node(cls)
        space = InputSpace(
            sig, pools, type_hints(init), getattr(init, "__globals__", vars(reference)), node
        )
        self.space = space
        tracer = tracer_for(init) if inspect.isfunction(init) else ArcTracer(None, 0, -1)
        attempts_left = max(20, explorer.budget // 5)
        covered: set = set()
        kept_instances: list = []
        tried: set = set()
        signatures: set = set()
        last_error = "no constructor call was tried"
        for inp in self.candidates(space, attempts_left):
            if len(self.found) >= MAX_CONSTRUCTIONS or attempts_left <= 0:
                break
            call = space.to_call(inp)
            key = _call_key(call)
            if key is None or key in tried:
                continue
            tried.add(key)
            attempts_left -= 1
            try:
                explorer.limits.check()
            except Stop:
                break

            def prepare(call=call):
                return (build(call[0], reference), build(call[1], reference))

            def construct(built):
                return equiv.call_outcome(cls, built[0], built[1])

            status, outcome, arcs = explorer.executor.run(prepare, construct, tracer)
            if status != "ok" or outcome[0] != "return":
                last_error = _failure(status, outcome, equiv)
                continue
            instance = outcome[1]
            # Keep constructions that reach new arcs of __init__, give the instance attributes
            # of new types (a str where others had an int), or a few distinct states.
            signature = state_signature(instance)
            distinct = all(not equiv.equivalent(instance, other) for other in kept_instances)
            if (
                self.found
                and not arcs - covered
                and signature in signatures
                and not (distinct and len(self.found) < 3)
            ):
                continue
            signatures.add(signature)
            status2, outcome2, _ = explorer.executor.run(prepare, construct)
            if (
                status2 != "ok"
                or outcome2[0] != "return"
                or not equiv.equivalent(outcome2[1], instance)
            ):
                last_error = "the construction is not deterministic"
                continue
            covered |= arcs
            kept_instances.append(instance)
            self.found.append(call)
        if not self.found:
            raise ExploreError(f"could not construct {cls.__qualname__}: {last_error}")
        if callable(getattr(cls, "__setitem__", None)):
            self.fill(cls, kept_instances)

    def fill(self, cls, kept_instances: list):
        """Adds constructions of a mapping class (one with `__setitem__`) with items put in
        before the method (set-up calls, see specs.construction_parts): a cache's `expire` or
        `popitem` does nothing on an empty cache. FILLS on the first FILL_BASES constructions;
        kept when the items go in, the state is new and a second run gives it again, at most
        MAX_FILLED."""
        bases = [(c[0], c[1]) for c in self.found[:FILL_BASES]]
        # A constructor parameter whose default is a function (`timer=time.monotonic`) gets a
        # working function taking as many arguments (`lambda: 0`) first: items stamped with
        # the clock's time would differ from run to run.
        try:
            params = inspect.signature(cls).parameters.values()
        except (TypeError, ValueError):
            params = ()
        called = {
            p.name: callables_like(p.default)[0]
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and is_function(p.default)
        }
        if called:
            bases = [(args, {**kwargs, **called}) for args, kwargs in bases] + bases
        added, not_callable = self._fill_bases(cls, bases, kept_instances)
        if added or not not_callable:
            return
        # An item went in only to find a constructor argument called (a cache's `ttu`, a
        # function of the key, value and time, that nothing marks as one): each positional
        # argument in turn becomes a function of any arguments giving a constant (1, then 0:
        # an item whose time to use is 0 at time 0 is never stored).
        varied = [
            ((*args[:j], Code(f"lambda *args: {constant}"), *args[j + 1 :]), kwargs)
            for constant in (1, 0)
            for args, kwargs in bases[:FILL_BASES]
            for j in range(len(args))
        ]
        self._fill_bases(cls, varied, kept_instances)

    def _fill_bases(self, cls, bases, kept_instances: list) -> tuple[int, bool]:
        """Tries FILLS on `bases` ((args, kwargs) specs), keeping at most MAX_FILLED in all.
        Returns how many were kept, and whether an attempt raised "... is not callable"."""
        explorer, equiv = self.explorer, self.explorer.equiv
        reference = explorer.target.reference
        added, not_callable = 0, False
        for base in bases:
            empty = None
            for items in FILLS:
                if added >= MAX_FILLED or len(self.found) >= MAX_CONSTRUCTIONS + MAX_FILLED:
                    return added, not_callable
                try:
                    explorer.limits.check()
                except Stop:
                    return added, not_callable
                setup = tuple(("__setitem__", item) for item in items)
                call = (base[0], base[1], setup)

                def prepare(call=call):
                    return tuple(build(x, reference) for x in call)

                def construct(built):
                    def filled():
                        instance = cls(*built[0], **built[1])
                        for name, args in built[2]:
                            getattr(instance, name)(*args)
                        return instance

                    return equiv.call_outcome(filled, (), {})

                status, outcome, _ = explorer.executor.run(prepare, construct)
                if status != "ok" or outcome[0] != "return":
                    if (
                        status == "ok"
                        and outcome[1] == "TypeError"
                        and "not callable" in str(outcome[2])
                    ):
                        not_callable = True
                    continue
                instance = outcome[1]
                if any(equiv.equivalent(instance, other) for other in kept_instances):
                    continue
                if empty is None:
                    # The same construction without items: a fill that changes nothing (an
                    # item the instance refuses silently) is not kept.
                    empty = explorer.executor.run(
                        lambda: tuple(build(x, reference) for x in (base[0], base[1], ())),
                        construct,
                    )
                if empty[0] == "ok" and empty[1][0] == "return" and equiv.equivalent(
                    empty[1][1], instance
                ):
                    continue
                status2, outcome2, _ = explorer.executor.run(prepare, construct)
                if (
                    status2 != "ok"
                    or outcome2[0] != "return"
                    or not equiv.equivalent(outcome2[1], instance)
                ):
                    continue
                kept_instances.append(instance)
                self.found.append(call)
                added += 1
        return added, not_callable


def concrete_subclasses(cls: type, method_name: str) -> list[type]:
    """The subclasses of `cls` (at any depth) defined in its module and reachable there by their
    qualified names, that are not abstract and inherit `method_name` from `cls` unchanged:
    instances of them call the very method under test. Simplest first (`subclasses`)."""
    module = sys.modules.get(cls.__module__)

    def accept(sub) -> bool:
        if sub.__module__ != cls.__module__ or module is None:
            return False
        try:
            if resolve(module, sub.__qualname__) is not sub:
                return False
        except AttributeError:
            return False
        owner = next((k for k in sub.__mro__ if method_name in vars(k)), None)
        return owner is cls

    return subclasses(cls, accept)


# Calls made of a returned closure, beyond THEN_CALLS, per function the target defines.
CLOSURE_CALLS = 16

# The longest a forked child may take to find out whether a docstring's example gives the same
# after the chosen calls (Explorer.same_after), on r2e_limit's clock (its CPU time or its
# idle-machine time, whichever is larger), so that a busy machine answers as an idle one.
EXAMPLE_CHILD_SECONDS = 30.0
# The runs of one example: three in the child, two here.
EXAMPLE_RUNS = 5


def closure_calls(node, pools: PoolMaker, globalns) -> tuple:
    """Calls for the functions the target defines and returns (a decorator's wrapper, a parse
    action, a key function): THEN_CALLS are guesses; these come from the returned function's
    own parameters and body, as the target's inputs do (its base call, one call of each type
    for all its parameters, then one parameter at a time through its pool), up to
    CLOSURE_CALLS for each of the first two such functions."""
    if node is None:
        return ()
    returned = {
        n.value.id
        for n in ast.walk(node)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)
    }
    inner = [
        n
        for n in ast.walk(node)
        if n is not node and isinstance(n, ast.FunctionDef) and n.name in returned
    ][:2]
    calls: list = []
    for definition in inner:
        try:
            signature = _signature_of(definition)
            space = InputSpace(signature, pools, {}, globalns, definition)
        except Exception:  # noqa: BLE001 - a closure that cannot be explored gets THEN_CALLS only
            continue
        made = []
        base = space.base()
        # The base call, then calls of one type for every parameter and calls that give one
        # parameter a value of another shape, in turn.
        alternated = itertools.chain.from_iterable(
            itertools.zip_longest(space.homogeneous(base, 1), shaped_variations(space, base))
        )
        for inp in itertools.chain([base], (i for i in alternated if i is not None)):
            if len(made) >= CLOSURE_CALLS:
                break
            call = space.to_call(inp)
            if call is None or not writable(call):
                continue
            call = (tuple(call[0]), dict(call[1]))
            if call not in made and call not in THEN_CALLS:
                made.append(call)
        calls += made
    return tuple(calls)


def _shape(param, value):
    """A value's type, and for a list or tuple its first element's type: `[0]` and `["a"]`
    are different shapes, for a parse action's tokens. For `*args`, the number of arguments
    and the first one's type."""
    if param.kind is param.VAR_POSITIONAL and type(value) is tuple:
        return (len(value), type(value[0]) if value else None)
    if type(value) in (list, tuple) and value:
        return (type(value), type(value[0]))
    return (type(value), None)


def shaped_variations(space, base):
    """Inputs differing from `base` in one parameter, whose value is the first of its pool of
    a shape the parameter has not had yet: round-robin over the parameters, so that a few calls
    try each parameter's kinds of values (a string, a list of strings) rather than many values
    of one parameter."""
    seen = [{_shape(p, v)} for p, v in zip(space.params, base.values)]
    queues = [list(p.pool) for p in space.params]
    while any(queues):
        for i, queue in enumerate(queues):
            while queue:
                value = queue.pop(0)
                shape = _shape(space.params[i], value)
                if shape not in seen[i]:
                    seen[i].add(shape)
                    yield base.replace(i, value)
                    break


def _signature_of(definition) -> inspect.Signature:
    """A signature with the parameters of a definition's syntax tree (defaults left unknown:
    a parameter with one is optional)."""
    args = definition.args
    params = []
    positional = args.posonlyargs + args.args
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if i < len(args.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        default = UNKNOWN if i >= first_default else inspect.Parameter.empty
        params.append(inspect.Parameter(a.arg, kind, default=default))
    if args.vararg is not None:
        params.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        default = inspect.Parameter.empty if d is None else UNKNOWN
        params.append(inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=default))
    if args.kwarg is not None:
        params.append(inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def reachable_subclasses(reference, cls: type) -> list[type]:
    """The subclasses of `cls` that the reference module reaches (`class_path`), simplest
    first (`subclasses`)."""
    return subclasses(cls, lambda sub: class_path(reference, sub) is not None)


def subclasses(cls: type, accept) -> list[type]:
    """The subclasses of `cls` (at any depth) that are not abstract and that `accept` takes,
    simplest first: fewest required constructor parameters, then the shallowest, then by
    name."""
    found, seen, stack = [], set(), [(sub, 1) for sub in type.__subclasses__(cls)]
    while stack:
        sub, depth = stack.pop()
        if sub in seen:
            continue
        seen.add(sub)
        stack += [(s, depth + 1) for s in type.__subclasses__(sub)]
        if inspect.isabstract(sub) or not accept(sub):
            continue
        found.append((_required_parameters(sub), depth, sub.__qualname__, sub))
    found.sort(key=lambda t: t[:3])
    return [t[3] for t in found]


def _required_parameters(cls: type) -> int:
    """How many parameters constructing `cls` requires (many when its signature is unknown)."""
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return 99
    return sum(
        1
        for p in sig.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )


def drawing(run):
    """`run()`'s result, and whether it drew from the global `random` generator (its state
    changed): each process seeds that generator anew, so what such a run observed may differ in
    the next process even when two runs here agree by chance."""
    state = random.getstate()
    result = run()
    return result, random.getstate() != state


def _call_key(call) -> str | None:
    """The text identifying a constructor call, or None when there is none or it cannot be
    written."""
    if call is None:
        return None
    try:
        return render(call)
    except Unwritable:
        return None


def _failure(status: str, outcome, equiv) -> str:
    """Why a construction failed: it timed out, its arguments could not be built, or it
    raised."""
    if status == "timeout":
        return "timed out"
    if status != "ok":
        return f"{type(outcome).__qualname__}: {outcome}"
    return equiv.describe_outcome(outcome)


def state_signature(instance):
    """The names and types of an instance's attributes."""
    state = getattr(instance, "__dict__", None)
    items = list(state.items()) if isinstance(state, dict) else []
    for klass in type(instance).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if hasattr(instance, name):
                items.append((name, getattr(instance, name)))
    return tuple(sorted((name, type(value).__name__) for name, value in items))


# A memory address in a value's text (`<object at 0x7f3a...>`, `str(args)` of a function): the
# same input shows another address in another process, so its outcome cannot be checked.
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def shows_address(equiv, obs) -> bool:
    """Whether the observation shows a memory address where a verdict compares it: in the value
    returned, the arguments' and the instance's states, or what the calls of a returned
    function gave (exception messages are not compared, and not looked at)."""
    return observation_key(equiv, obs)[1]


def value_key(equiv, obs) -> str:
    """A short text identifying an outcome, to prefer distinct outcomes when topping up: a
    digest of its structural snapshot (return value or exception, instance state, what the
    calls of a returned function gave). Never `repr`: showing a value may change it (a lazy
    name cached on first `repr`), and this observation is compared again later."""
    return observation_key(equiv, obs)[0]


# Nodes of an observation's part snapshotted for its key: the explorer runs thousands of
# inputs, some returning large values, and a key only tells outcomes apart.
KEY_NODES = 500


def observation_key(equiv, obs) -> tuple[str, bool]:
    """(value_key, shows_address) of an observation, from one bounded snapshot of each of its
    parts (KEY_NODES nodes)."""
    import r2e_snapshot

    def snap(value):
        return r2e_snapshot.snapshot(value, KEY_NODES)

    returned = obs.outcome[0] == "return"
    value = snap(obs.outcome[1]) if returned else None
    identity = ["return", value] if returned else ["raise", obs.outcome[1], obs.outcome[2][:120]]
    compared = [value]
    if getattr(obs.instance, "__dict__", None) is not None:
        instance = snap(obs.instance)
        identity.append(instance)
        compared.append(instance)
    then = getattr(obs, "then", ())
    if then:
        # A returned function: what the calls made of it gave.
        then_snapshot = equiv._then_snapshot(then)
        identity.append(then_snapshot)
        compared.append(_without_messages(then_snapshot))
    warned = getattr(obs, "warned", ())
    if warned:
        # What the module warned is an outcome too (a deprecated form of a call).
        identity.append([list(w) for w in warned])
    compared += [snap(a) for a in obs.args]
    compared += [snap(v) for v in obs.kwargs.values()]
    text = json.dumps(identity, sort_keys=True, default=str)
    key = f"{identity[0]} {hashlib.blake2b(text.encode(), digest_size=12).hexdigest()}"
    return key, bool(ADDRESS.search(json.dumps(compared, default=str)))


def _without_messages(value):
    """A snapshot with the exception messages left out."""
    if isinstance(value, dict):
        return {k: _without_messages(v) for k, v in value.items() if k != "message"}
    if isinstance(value, list):
        return [_without_messages(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# The explorer
# --------------------------------------------------------------------------------------------


class Explorer:
    """One exploration: `run()` gives the answer (see r2e_explore.py) or raises ExploreError."""

    def __init__(self, request: dict, equiv):
        self.req = request
        self.equiv = equiv
        self.module_name = request["module"]
        self.qualname = request["qualname"]
        self.kind = request.get("kind", "function")
        self.budget = max(1, int(request.get("budget", 1500)))
        self.max_tests = max(1, int(request.get("max_tests", 16)))
        self.time_limit = float(request.get("time_limit", 60))
        self.seed = request.get("seed", 0)
        self.rng = random.Random(self.seed)
        self.executor = Executor(equiv, request.get("per_call_timeout", 1.0))
        self.plateau = max(0, int(request.get("plateau", DEFAULT_PLATEAU)))
        # The execution count when the search last kept an input (the stopping rule's G).
        self.grown_at = 0
        # A few executions are kept back to top the harness up at the end.
        self.limits = Budget(self.executor, self.budget, min(8, self.budget // 4), self.time_limit)
        # The bounds in force: the search's, then the mutation analysis's.
        self.active = self.limits
        self.seq = 0
        # The entry of the last input try_input ran (None when it could not run).
        self.last_entry: Entry | None = None
        # Whether the inputs tried are doctest examples or call sites.
        self.examples = False
        # The mutation analysis: its executions, and the inputs not kept that kill mutants.
        self.analysis: MutationAnalysis | None = None
        self.analysis_executions = 0
        self.kill_candidates: list[Entry] = []
        # The analysis's bounds (None until it runs) and the cache wrappers of the function.
        self.phase: Budget | None = None
        self.caches: list = []
        self.finalizing = False
        # Constructor calls (args, kwargs) of a method's class, filled by the construction search,
        # and receivers (specs of instances) from the project's own uses (`receivers_from_uses`).
        self.constructions: list = []
        self.receivers: list = []
        self.factories_tried = False
        self.instances: InstanceFinder | None = None

    # -- loading ----------------------------------------------------------------------------

    def import_reference(self):
        """The reference module, imported with output suppressed and stopped at the time
        limit."""
        null = NullWriter()
        try:
            with contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                # An import that hangs is stopped at the time limit.
                self.executor.arm(max(self.time_limit, 0.001), 0.05)
                try:
                    return importlib.import_module(self.module_name)
                finally:
                    self.executor.disarm()
        except self.equiv.Timeout:
            self.limits.time_limit_hit = True
            raise ExploreError(
                f"the import failed: it took more than {self.time_limit} seconds"
            ) from None
        except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a failed import too
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ExploreError(f"the import failed: {type(exc).__qualname__}: {exc}") from None

    # -- running ----------------------------------------------------------------------------

    def observe(self, ctor_call, call):
        """A thunk pair (prepare, action) observing one call of the target on fresh values."""
        target, equiv = self.target, self.equiv
        reference = target.reference
        if isinstance(call, ExampleCall):

            def prepare():
                return None

            def action(_built):
                return equiv.observe_example(reference, call.source)

        elif target.cls is None:

            def prepare():
                return (
                    build(call[0], reference),
                    build(call[1], reference),
                    build(self.then_calls, reference),
                )

            def action(built):
                return equiv.observe_function(target.callable, built[0], built[1], then=built[2])

        else:
            ctor_args, ctor_kwargs, setup, receiver = construction_parts(ctor_call)

            def prepare():
                return tuple(
                    build(x, reference)
                    for x in (ctor_args, ctor_kwargs, call[0], call[1], self.then_calls, setup)
                ) + (() if receiver is None else (build(receiver, reference),))

            def action(built):
                return equiv.observe_method(
                    target.ctor_cls,
                    built[0],
                    built[1],
                    target.method_name,
                    built[2],
                    built[3],
                    then=built[4],
                    setup=built[5],
                    **({"receiver": built[6]} if len(built) > 6 else {}),
                )

        return prepare, action

    def probe(self, spec):
        """The value a spec builds (a factory's call), under the per-call timer; raises
        ValueError when building it failed or timed out. Not counted as an execution."""
        status, outcome, _ = self.executor.run(
            lambda: spec, lambda s: self.equiv.call_outcome(build, (s, self.reference), {})
        )
        self.executor.executions -= 1
        if status != "ok" or outcome[0] != "return":
            raise ValueError(f"{render(spec)} did not return")
        return outcome[1]

    def execute(self, ctor_call, call, traced=True):
        self.active.check(final=self.finalizing)
        prepare, action = self.observe(ctor_call, call)
        return self.executor.run(prepare, action, self.target.tracer if traced else None)

    def is_deterministic(self, ctor_call, call, first_obs) -> bool:
        """Whether a second run on fresh values observes what the first did, without drawing
        from the global `random` generator: each process seeds it anew, so an outcome that
        draws from it may differ in the next process even when two runs here agree by chance
        (more-itertools' `sample` of one item from two)."""
        (status, obs, _), drew = drawing(lambda: self.execute(ctor_call, call, traced=False))
        return not drew and status == "ok" and not self.equiv.differences(
            obs, first_obs, detailed=False, messages=False
        )

    # -- the search -------------------------------------------------------------------------

    def run(self) -> dict:
        self.finalizing = False
        self.reference = self.import_reference()
        target = self.target = Target(
            self.reference, self.module_name, self.qualname, self.kind, self.equiv
        )
        cls = target.cls
        self.instances = InstanceFinder(
            self.reference, self.executor, self.equiv, cls, self.constructions
        )
        docs = [inspect.getdoc(target.func) if callable(target.func) else None]
        if cls is not None:
            docs += [inspect.getdoc(cls), inspect.getdoc(getattr(cls, "__init__", None))]
        # The target builds no value of its own inputs (`specs.NOT_FACTORIES`).
        specs.NOT_FACTORIES[:] = [target.func] if callable(target.func) else []
        self.doc_calls, self.doc_ctors = docstring_calls(
            docs,
            {self.qualname.split(".")[-1]},
            cls.__name__ if cls is not None else None,
            self.reference,
        )
        self.instances.factories = Factories(
            self.reference,
            self.probe,
            "\n".join(d for d in docs if d),
            strings=self.project_strings(),
        )
        self.example_sources = example_programs(
            docs, self.qualname.split(".")[-1], method=cls is not None
        )
        self.receivers = self.receivers_from_uses()
        finder = self.construct()
        self.ctor_space = finder.space
        for spec in self.receivers:
            # The project's own receivers, beside the constructions found.
            self.constructions.append(receiver_construction(spec))
        own = self.instances(cls) if cls is not None else []
        pools = PoolMaker(
            self.reference, target.literals, own_instances=own, instance_finder=self.instances
        )
        self.space = InputSpace(
            target.signature, pools, target.annotations, target.globalns, target.node
        )
        self.then_calls = (
            THEN_CALLS + closure_calls(target.node, pools, target.globalns) + self.site_uses()
        )
        ctor_count = len(self.constructions) if self.constructions else 1
        ctor0 = 0 if self.constructions else None

        self.corpus: list[Entry] = []
        self.tried_log: list[Entry] = []
        self.tried_keys: set = set()
        # The keys of the inputs kept or remembered (corpus, tried log, kill candidates).
        self.remembered: set = set()
        self.tried_signatures: dict = {}
        self.covered: set = set()
        # Arcs reached by kept inputs that are not interpreter errors on ill-typed input.
        self.covered_typed: set = set()
        self.kinds: set = set()

        try:
            # 1. Doctest examples and call sites, 2. the base input and its one-parameter
            # variations, 3. mutations of kept inputs.
            self.examples = True
            target.tracer.watch_patterns = True
            for ctor, call in self.doc_calls:
                index = self._construction_index(ctor)
                self.try_input(self.space.from_call(call, index if index is not None else ctor0))
            for site in self.req.get("call_sites") or []:
                call = call_site_specs(site, self.reference)
                if call is None:
                    continue
                # On the receiver the tests called it on, when that one is usable.
                spec = self._site_receiver(site)
                found = self._receiver_index(spec) if spec is not None else None
                self.try_input(self.space.from_call(call, found if found is not None else ctor0))
            self.examples = False
            base = self.space.base(ctor0)
            self.try_input(base)
            for n, inp in enumerate(
                itertools.chain(
                    self.space.homogeneous(base), self.space.variations(base, ctor_count)
                )
            ):
                if n == PATTERN_WATCH:
                    self.try_pattern_strings(base)
                self.try_input(inp)
            self.try_pattern_strings(base)
            ctor_count = self.receivers_when_nothing_returns(ctor_count)
            self.mutate_loop(ctor_count)
        except Stop:
            pass
        target.tracer.watch_patterns = False

        self.analyse(ctor_count)
        self.finalizing = True
        chosen = Selection(
            self.corpus,
            self.tried_log,
            self.max_tests,
            self.execute,
            self.is_deterministic,
            candidates=self.kill_candidates,
            verify=self.verify if self.phase is not None else None,
        ).choose()
        return self.answer(chosen + self.examples_for(chosen))

    def try_pattern_strings(self, base: Input):
        """Ends the pattern watch (once): strings that the compiled patterns the function used
        find are tried for the first (required) string parameter of `base`, and join its
        pool."""
        tracer = self.target.tracer
        if not tracer.watch_patterns:
            return
        tracer.watch_patterns = False
        patterns = list(tracer.patterns.values())
        tracer.patterns = {}
        made = dedupe(
            (s for p in patterns for s in regexgen.examples(p, self.seed)),
            limit=MAX_PATTERN_STRINGS,
        )
        for kind in (str, bytes):
            strings = [s for s in made if type(s) is kind]
            if not strings:
                continue
            # Parameters of that kind: annotated with it, or (unannotated) whose pool starts
            # with it (a default, or what the body's use of it suggests); else any unannotated
            # one (isodate's `parse_date(datestring, ...)` says nothing of its text). Every pool
            # holds a few strings, so holding one says nothing, and an annotation of another
            # kind excludes a parameter.
            candidates = [
                (i, p)
                for i, p in enumerate(self.space.params)
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and (p.shapes is None or kind.__name__ in p.shapes)
            ]
            params = [
                i
                for i, p in candidates
                if p.shapes is not None or type(p.pool[0]) is kind
            ] or [i for i, _ in candidates]
            if not params:
                continue
            # The first required one: the text parsed, more often than a separator or a
            # pattern of the caller's (trying every string parameter costs python-slugify's
            # `slugify`, with seven of them, the budget its later mutations needed).
            i = next((i for i in params if self.space.params[i].required), params[0])
            p = self.space.params[i]
            p.pool = dedupe(p.pool[:1] + strings + p.pool[1:], limit=POOL_MAX + MAX_PATTERN_STRINGS)
            for s in strings:
                self.try_input(base.replace(i, s))

    def construct(self) -> ConstructionFinder:
        """Finds the constructions of a method's class. When the class itself cannot be
        constructed (an abstract class, say), its concrete subclasses in the same module that
        inherit the method unchanged are tried in turn, simplest first; the first that can be
        constructed becomes `target.ctor_cls`."""
        target = self.target
        cls = target.cls
        classes = [cls]
        if cls is not None and target.method_kind not in ("static", "class", "init"):
            classes += concrete_subclasses(cls, target.method_name)[:MAX_SUBCLASSES]
        first_error, first_finder = None, None
        for candidate in classes:
            target.ctor_cls = candidate
            finder = ConstructionFinder(self)
            first_finder = first_finder or finder
            try:
                finder.find()
            except Stop:
                if not self.constructions and self.calls_on_instances() and not self.receivers:
                    raise ExploreError(
                        f"could not construct {candidate.__qualname__} within the budget"
                    ) from None
            except ExploreError as exc:
                first_error = first_error or exc
                continue
            return finder
        target.ctor_cls = cls
        if self.receivers or self.factory_receivers():
            # No constructor call works, but instances the project itself makes do.
            return first_finder
        raise first_error

    # -- receivers from the project's own uses ------------------------------------------------

    def calls_on_instances(self) -> bool:
        """Whether the target is a method called on an instance (not a static or class method,
        nor `__init__`)."""
        target = self.target
        return target.cls is not None and target.method_kind not in ("static", "class", "init")

    def project_strings(self) -> list:
        """Strings the project itself passes the target, first to last: at its call sites (the
        tests' first), in its doctest examples, then the target's own literals. A factory's
        text to parse (`Factories`)."""
        found = []
        for site in self.req.get("call_sites") or []:
            for text in list(site.get("args") or []) + list((site.get("kwargs") or {}).values()):
                try:
                    value = ast.literal_eval(str(text))
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
                if isinstance(value, str):
                    found.append(value)
        for _ctor, call in self.doc_calls:
            found += [a for a in list(call[0]) + list(call[1].values()) if isinstance(a, str)]
        found += [v for v in self.target.literals if isinstance(v, str)]
        return [s for s in dict.fromkeys(found) if s.strip()]

    def usable_receiver(self, spec) -> bool:
        """Whether `spec` builds, twice alike, an instance that calls the target method itself
        (of its class, or of a subclass that inherits it unchanged)."""
        target = self.target
        name = target.method_name
        try:
            value = self.probe(spec)
            again = self.probe(spec)
        except (ValueError, Stop):
            return False
        try:
            if not isinstance(value, target.cls):
                return False
            mine = inspect.getattr_static(target.cls, name)
            if inspect.getattr_static(type(value), name) is not mine:
                return False
        except Exception:  # noqa: BLE001 - the project's own __instancecheck__ or MRO
            return False
        return self.equiv.equivalent(value, again)

    def receivers_from_uses(self) -> list:
        """Receivers the project's own uses called the method on: the call sites the capture
        recorded (`receiver`: the instance as it was when the tests called the method) and the
        doctest sessions' names (`md = create_markdown(); md.render(text)`), each usable one
        once, at most MAX_RECEIVERS."""
        if not self.calls_on_instances():
            return []
        specs_found = [self._site_receiver(site) for site in self.req.get("call_sites") or []]
        specs_found = [spec for spec in specs_found if spec is not None]
        for ctor, _call in self.doc_calls:
            receiver = construction_parts(ctor)[3]
            if receiver is not None:
                specs_found.append(receiver)
        return self._usable_receivers(specs_found)

    def factory_receivers(self) -> list:
        """Instances of the method's class that the project's factories build (its functions
        and its class's own alternate constructors, `Factories.for_class`), taken as receivers
        when no constructor call of the class works; kept in `receivers`."""
        factories = self.instances.factories if self.instances is not None else None
        if factories is None or self.target.cls is None or self.factories_tried:
            return []
        self.factories_tried = True
        found = self._usable_receivers(factories.for_class(self.target.cls))
        self.receivers += [r for r in found if r not in self.receivers][
            : max(0, MAX_RECEIVERS - len(self.receivers))
        ]
        return found

    def receivers_when_nothing_returns(self, ctor_count: int) -> int:
        """When the constructions found give instances on which no input returned normally
        (a lexer whose tables only its factory fills: `Lexer.get_default_instance()`), the
        factories' instances become constructions too, each tried with the base input and its
        variations. Returns the number of constructions."""
        if not self.calls_on_instances() or any(e.returned for e in self.corpus):
            return ctor_count
        before = len(self.receivers)
        self.factory_receivers()
        for spec in self.receivers[before:]:
            self.constructions.append(receiver_construction(spec))
            base = self.space.base(len(self.constructions) - 1)
            self.try_input(base)
            for inp in self.space.variations(base, 1):
                self.try_input(inp)
        return len(self.constructions) if self.constructions else ctor_count

    def _usable_receivers(self, found) -> list:
        kept, seen = [], set()
        for spec in found:
            if len(kept) >= MAX_RECEIVERS:
                break
            try:
                key = render(spec)
            except (Unwritable, TypeError, RecursionError):
                continue
            if key in seen:
                continue
            seen.add(key)
            try:
                self.limits.check()
            except Stop:
                break
            if self.usable_receiver(spec):
                kept.append(spec)
        return kept

    def site_uses(self) -> tuple:
        """What the project's tests did with the values the target returned (the captured call
        sites' `then`: calls of their methods), as named `then` calls (args, kwargs, name),
        made of what every input returns that has the method (`r2e_equiv._call_returned`):
        distinct, in order, at most SITE_USES; a use whose arguments do not convert is left
        out."""
        found, seen = [], set()
        for site in self.req.get("call_sites") or []:
            uses = site.get("then") if isinstance(site, dict) else None
            for use in uses if isinstance(uses, list) else []:
                name = use.get("method") if isinstance(use, dict) else None
                call = call_site_specs(use, self.reference) if isinstance(name, str) else None
                if call is None or any(
                    v is UNKNOWN for v in itertools.chain(call[0], call[1].values())
                ):
                    continue
                spec = (call[0], call[1], name)
                try:
                    key = render(spec)
                except (Unwritable, RecursionError):
                    continue
                if key not in seen and len(found) < SITE_USES:
                    seen.add(key)
                    found.append(spec)
        return tuple(found)

    def _site_receiver(self, site):
        """The spec of a captured call's receiver (`r2e_equiv.loads(...)`), or None."""
        text = site.get("receiver") if isinstance(site, dict) else None
        if not text:
            return None
        spec = call_site_specs({"args": [text]}, self.reference)
        return spec[0][0] if spec and spec[0] and spec[0][0] is not UNKNOWN else None

    def _receiver_index(self, spec) -> int | None:
        """The construction that calls the method on `spec`'s instance, or None."""
        for i, c in enumerate(self.constructions):
            if construction_parts(c)[3] == spec:
                return i
        return None

    def answer(self, chosen: list[Entry]) -> dict:
        """The answer for the chosen entries (ExploreError when there are none)."""
        if not chosen:
            detail = f"{self.executor.executions} executions"
            if self.executor.timeouts:
                detail += f", {self.executor.timeouts} timed out"
            raise ExploreError(f"no input could be kept ({detail})")
        target = self.target
        harness = render_harness(
            self.module_name,
            self.qualname,
            target.cls is not None,
            chosen,
            target.ctor_cls.__qualname__ if target.ctor_cls is not target.cls else None,
            self.then_calls,
        )
        compile(harness, "<harness>", "exec")
        arcs = set()
        killed: set = set()
        for e in chosen:
            arcs |= e.arcs
            killed |= e.kills
        mutants = self.analysis.mutants if self.analysis is not None else []
        return {
            "status": "ok",
            "harness": harness,
            "tests": len(chosen),
            "executions": self.executor.executions - self.analysis_executions,
            "arcs": len(arcs),
            "outcomes": [e.kind for e in chosen],
            "time_limit_hit": self.limits.time_limit_hit
            or (self.phase is not None and self.phase.time_limit_hit),
            "mutants": {
                "total": len(mutants),
                "killed": len(killed),
                "survivors": [
                    m.describe() for i, m in enumerate(mutants) if i not in killed
                ][:MAX_SURVIVORS],
                "executions": self.analysis_executions,
            },
        }

    def _construction_index(self, ctor_call):
        if ctor_call is None or not self.constructions:
            return None
        receiver = construction_parts(ctor_call)[3]
        if receiver is not None:
            return self._receiver_index(receiver)
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

    def try_input(self, inp: Input | None, again: bool = False) -> bool:
        """Runs an input once (if new) and keeps it when it reaches new arcs or a new kind of
        outcome (or, when it is not ill-typed, arcs only ill-typed inputs reached) and behaves
        deterministically. Returns False for an input already tried; with `again`, only for
        one still remembered (the hunt runs a forgotten one again: `n = 9` was tried, like
        `n = 5` and forgotten, and is what tells `n < 10` from `n < 9`)."""
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
        if key in self.tried_keys and (not again or key in self.remembered):
            return False
        self.tried_keys.add(key)
        self.last_entry = None
        status, obs, arcs = self.execute(ctor_call, call)
        seconds = self.executor.last_seconds
        if status != "ok":
            return True
        key_of_value, address = observation_key(self.equiv, obs)
        if address:
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
            key_of_value,
            self.seq,
            then=bool(getattr(obs, "then", ())),
            obs=obs,
            seconds=seconds,
            ill_typed=self.ill_typed(kind),
            example=self.examples,
        )
        self.last_entry = entry
        # New arcs, a new kind of outcome, or arcs so far reached only by ill-typed inputs
        # (a better witness of them).
        new = (
            arcs - self.covered
            or kind not in self.kinds
            or (not entry.ill_typed and arcs - self.covered_typed)
        )
        if new and self.is_deterministic(ctor_call, call, obs):
            entry.verified = True
            self.corpus.append(entry)
            self.grown_at = self.executor.executions
            self.remembered.add(key)
            self.covered |= arcs
            if not entry.ill_typed:
                self.covered_typed |= arcs
            self.kinds.add(kind)
        elif len(self.tried_log) < MAX_TRIED_LOG:
            # A few inputs per outcome and arcs: the others are near-duplicates.
            signature = (entry.value_key, arcs)
            seen = self.tried_signatures.get(signature, 0)
            if seen < MAX_ALIKE:
                self.tried_signatures[signature] = seen + 1
                self.tried_log.append(entry)
                self.remembered.add(key)
        return True

    def examples_for(self, chosen: list[Entry]) -> list[Entry]:
        """The docstring's examples that join the chosen tests: each one that reaches arcs
        they do not (nor an example before it), on executions of their own (the search has
        used its budget). They are tried last, as the harness runs them last (after the
        calls' tests, in this order: `r2e_run_last`), so that what one leaves behind here
        (a shared default it changed) reaches nothing the search observed."""
        if not self.example_sources or not chosen:
            return []
        covered = set().union(*(e.arcs for e in chosen))
        self.limits.executions = max(
            self.limits.executions, self.executor.executions
        ) + len(self.example_sources) * (EXAMPLE_RUNS + len(chosen))
        kept = []
        try:
            for source in self.example_sources:
                entry = self.try_example(source, chosen)
                if entry is not None and entry.arcs - covered:
                    kept.append(entry)
                    covered |= entry.arcs
        except Stop:
            pass
        return kept

    def try_example(self, source: str, entries: list[Entry]) -> Entry | None:
        """A docstring's example run as a program (ExampleCall), as an entry, when it reaches
        arcs of the target, returns normally, prints or gives a value, runs the same twice,
        shows no memory address, and gives the same after the calls of `entries` as before
        them (`same_after`)."""
        call = ExampleCall(source)
        if not self.same_after(call, entries):
            return None
        status, obs, arcs = self.execute(None, call)
        seconds = self.executor.last_seconds
        if status != "ok" or not obs.returned or not arcs:
            return None
        if not obs.outcome[1]["printed"] and not obs.outcome[1]["values"]:
            return None  # it shows nothing a candidate could get wrong but an exception
        key_of_value, address = observation_key(self.equiv, obs)
        if address or not self.is_deterministic(None, call, obs):
            return None
        self.seq += 1
        return Entry(
            None,
            "example:" + source,
            None,
            call,
            arcs,
            self.equiv.outcome_kind(obs.outcome),
            True,
            key_of_value,
            self.seq,
            obs=obs,
            seconds=seconds,
            verified=True,
            example=True,
        )

    def same_after(self, call, entries: list[Entry]) -> bool:
        """Whether an example gives the same twice, and the same again after the calls of
        `entries` (in the harness it runs after the calls' tests, in any order: what they
        leave behind must not change it). Observations are compared by their snapshots'
        digests (value_key). It is found out in a forked child, so that nothing the example
        or the calls leave behind reaches this process. Without fork, when it fails, or when
        the child takes longer than EXAMPLE_CHILD_SECONDS on r2e_limit's clock, the answer
        is no."""
        if not hasattr(os, "fork"):
            return False
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            return False
        if pid == 0:  # the child: answers through its exit status only
            code = 1
            try:
                code = 0 if self._example_is_stable(call, entries) else 1
            except BaseException:  # noqa: BLE001 - any failure in the child is a "no"
                code = 1
            os._exit(code)
        # On the child's idle-machine clock (the wall clock less the time it waited for a CPU):
        # a busy machine gives the same answer as an idle one.
        meter = r2e_limit.Meter(pid)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if meter.sample() > EXAMPLE_CHILD_SECONDS:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return False
            time.sleep(0.005)
        self.executor.executions += EXAMPLE_RUNS - 2 + len(entries)
        return os.waitstatus_to_exitcode(status) == 0

    def _example_is_stable(self, call, entries: list[Entry]) -> bool:
        """In the forked child (same_after): the example twice, the calls of `entries`, the
        example once more; the example's outcome the same each time."""

        def key_of(ctor_call, c):
            status, obs, _ = self.execute(ctor_call, c, traced=False)
            if status != "ok":
                return None
            return observation_key(self.equiv, obs)[0]

        first = key_of(None, call)
        if first is None or key_of(None, call) != first:
            return False
        for e in entries:
            key_of(e.ctor_call, e.call)
        return key_of(None, call) == first

    def ill_typed(self, kind: str) -> bool:
        """Whether an outcome is an interpreter error on ill-typed input: a TypeError or
        AttributeError that was not raised by a `raise` statement of the repository's code
        (where the traced call's exception was raised, see ArcTracer.raised_at)."""
        if kind not in ILL_TYPED_KINDS:
            return False
        site = self.target.tracer.raised_at
        if site is None or "raise:" + site[0] != kind:
            return True
        _, filename, line = site
        if is_library_file(filename):
            return True
        return not RAISE_LINE.search(linecache.getline(filename, line))

    def mutate_loop(self, ctor_count: int):
        """Mutations of kept inputs (one or two dimensions changed), with an occasional random
        input, until the budget runs out, MAX_DUPLICATE_STREAK inputs in a row were tried
        before, or the search reached its plateau (`plateaued`)."""
        rng = self.rng
        dims = len(self.space.params) + (1 if ctor_count > 1 else 0)
        streak = 0
        while streak < MAX_DUPLICATE_STREAK and not self.plateaued():
            if not self.corpus or rng.random() < 0.1 or dims == 0:
                inp = self.space.random_input(rng, ctor_count)
            else:
                inp = rng.choice(self.corpus).inp
                for _ in range(2 if rng.random() < 0.25 else 1):
                    inp = self.space.mutate(inp, rng, ctor_count)
            streak = 0 if self.try_input(inp) else streak + 1

    def plateaued(self) -> bool:
        """Whether the last max(plateau, G, PER_KEPT * K) executions kept no input (G: the
        execution that kept the last one, K: the inputs kept); never with a plateau of 0."""
        if not self.plateau:
            return False
        stretch = max(self.plateau, self.grown_at, PER_KEPT * len(self.corpus))
        return self.executor.executions - self.grown_at >= stretch

    # -- mutation analysis ------------------------------------------------------------------

    def analyse(self, ctor_count: int):
        """The mutation analysis after the search: mutants of the function (mutants.py), run on
        the kept inputs and on inputs tried but not kept (each entry's `kills`); then a search
        for inputs that kill the mutants that survive (`hunt`). Tried inputs that kill mutants
        become candidates of the selection (`kill_candidates`). Bounded by its own budget of
        executions; running out of it leaves fewer mutants, never an error. Its safety stop in
        time is reported as `time_limit_hit`: what it wrote then depends on the machine's
        speed."""
        target = self.target
        class_name = target.cls.__name__ if target.cls is not None else None
        try:
            maker = MutantMaker(target.func, target.node, class_name)
            mutants = maker.make(self.seed)
        except Exception:  # noqa: BLE001 - a function that cannot be mutated has no mutants
            mutants = []
        self.analysis = analysis = MutationAnalysis(mutants, self.run_mutant, self.differs)
        if not mutants:
            return
        self.caches = caches_of(target.callable)
        seconds = ANALYSIS_SHARE * (self.time_limit - self.limits.elapsed())
        started = self.executor.executions
        self.active = self.phase = Budget(
            self.executor,
            started + ANALYSIS_EXECUTIONS * self.budget + VERIFY_RESERVE,
            VERIFY_RESERVE,
            max(seconds, 0.0),
        )
        self.finalizing = False
        try:
            analysis.evaluate(self.corpus, self._tried_candidates())
            self.kill_candidates = [e for e in self.tried_log if e.kills]
            self.hunt(analysis, ctor_count)
        except Stop:
            pass
        finally:
            self.active = self.limits
            self._charge_analysis(self.executor.executions - started)
            if self.phase.time_limit_hit:
                self.limits.time_limit_hit = True

    def _charge_analysis(self, executions: int):
        """Counts executions as the analysis's: not the search's (its budget is moved on by as
        many, so that the selection keeps the reserve it had)."""
        self.analysis_executions += executions
        self.limits.executions += executions

    def _tried_candidates(self) -> list[Entry]:
        """The tried inputs, in the order the analysis runs them: one per outcome first (normal
        returns before exceptions), then the others, each in discovery order."""
        seen: set = set()
        first, rest = [], []
        for e in sorted(self.tried_log, key=lambda e: (not e.returned, e.seq)):
            if e.value_key in seen:
                rest.append(e)
            else:
                seen.add(e.value_key)
                first.append(e)
        return first + sorted(rest, key=lambda e: e.seq)

    def run_mutant(self, mutant, entry: Entry):
        """(status, observation) of the mutant on an entry's input, untraced, with a timeout
        scaled to the reference's time."""
        self.active.check(final=self.finalizing)
        timeout = min(
            self.executor.timeout, max(MUTANT_MIN_TIMEOUT, MUTANT_SLOWDOWN * entry.seconds)
        )
        prepare, action = self.observe(entry.ctor_call, entry.call)
        with installed(self.target.func, mutant.code, self.caches, mutant.default):
            status, obs, _ = self.executor.run(prepare, action, None, timeout)
        return status, obs

    def differs(self, obs, entry: Entry) -> bool:
        """Whether an observation differs from the reference's on that entry (as a harness
        compares them). Values that cannot be compared are no difference: a mutant is never
        counted killed by them."""
        try:
            diffs = self.equiv.differences(obs, entry.obs, detailed=False, messages=False)
            return bool(self.equiv.decided(diffs))
        except Exception:  # noqa: BLE001 - a comparison that fails is a difference
            return True

    def verify(self, entry: Entry) -> bool:
        """Re-runs an entry the selection takes (within the analysis's reserve): it must give
        the observation recorded, without drawing from the global `random` generator."""
        before = self.executor.executions
        try:
            self.phase.check(final=True)
            (status, obs, _), drew = drawing(
                lambda: self.executor.run(*self.observe(entry.ctor_call, entry.call))
            )
        finally:
            self._charge_analysis(self.executor.executions - before)
        return not drew and status == "ok" and not self.differs(obs, entry)

    def hunt(self, analysis: MutationAnalysis, ctor_count: int):
        """Inputs made to kill the mutants that survive the kept and tried inputs (that are
        not ill-typed): for each survivor in turn, a kept input reaching its line (any kept input when none does) with
        one parameter changed (a value of its pool, or a mutation); an input that kills
        survivors (and runs the same twice) becomes a candidate. Stops when none survives,
        after HUNT_PATIENCE inputs in a row that kill none (a fifth of the budget when that is
        less), or when the budget runs out."""
        rng = self.rng
        # A mutant that only ill-typed inputs kill is hunted too (that kill says little).
        survivors = analysis.survivors(
            [e for e in self.corpus + self.kill_candidates if not e.ill_typed]
        )
        params = len(self.space.params)
        # The parameters that take one value (not `*args` or `**kwargs`).
        singles = [
            i
            for i, p in enumerate(self.space.params)
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        misses = turn = 0
        patience = min(HUNT_PATIENCE, max(20, self.budget // 5))
        # The stopping rule of the search, on kills: the hunt's executions since it started
        # when it last killed a mutant (K), and it stops when max(plateau, K) more killed none.
        started = killed_at = self.executor.executions
        while (
            survivors
            and misses < patience
            and (self.corpus or params)
            and not (
                self.plateau
                and self.executor.executions - killed_at
                >= max(self.plateau, killed_at - started)
            )
        ):
            mutant = analysis.mutants[survivors[turn % len(survivors)]]
            turn += 1
            sources = self.corpus + self.kill_candidates
            typed = [e for e in sources if not e.ill_typed]
            sources = typed or sources
            reaching = [e for e in sources if any(mutant.line in arc for arc in e.arcs)]
            # A construction this step added (`varied_construction`), taken back when unused.
            added = None
            if not sources:
                inp = self.space.random_input(rng, ctor_count)
            else:
                inp = rng.choice(reaching or sources).inp
                # An ignored parameter is told apart only by a change of that parameter.
                named = [
                    i
                    for i, p in enumerate(self.space.params)
                    if mutant.kind == "ignore_param" and p.name == mutant.was and p.pool
                ]
                # A changed default is told apart only by leaving its parameter out.
                left_out = [
                    i
                    for i, p in enumerate(self.space.params)
                    if mutant.default is not None and p.name == mutant.default[0]
                ]
                # A changed number is told apart by its old or new value (`n < 10` -> `n < 9`
                # by 9), most often.
                bounds = _numbers(mutant) if mutant.kind == "constant" else []
                if named:
                    i = named[0]
                    inp = inp.replace(i, rng.choice(self.space.params[i].pool))
                elif left_out and inp.values[left_out[0]] is not OMIT:
                    inp = inp.replace(left_out[0], OMIT)
                elif bounds and singles and rng.random() < 0.5:
                    inp = inp.replace(rng.choice(singles), rng.choice(bounds))
                elif inp.ctor is not None and rng.random() < HUNT_CONSTRUCTION_SHARE:
                    inp, added = self.varied_construction(inp, rng)
                elif params and rng.random() < 0.5:
                    # Most often a parameter the mutated code names (`text` for a removed
                    # `text = QUOTE.sub('-', text)`): its value decides what that code does.
                    words = set(WORD.findall(mutant.was))
                    named_here = [
                        i
                        for i, p in enumerate(self.space.params)
                        if p.name in words and p.pool
                    ]
                    i = (
                        rng.choice(named_here)
                        if named_here and rng.random() < 0.7
                        else rng.randrange(params)
                    )
                    inp = inp.replace(i, rng.choice(self.space.params[i].pool))
                else:
                    inp = self.space.mutate(inp, rng, ctor_count)
            self.last_entry = None
            if not self.try_input(inp, again=True) or self.last_entry is None:
                self.drop_construction(added)
                misses += 1
                continue
            entry = self.last_entry
            killed = analysis.evaluate_entry(entry, survivors)
            if killed and (
                entry.verified or self.is_deterministic(entry.ctor_call, entry.call, entry.obs)
            ):
                entry.verified = True
                if entry not in self.corpus:
                    self.kill_candidates.append(entry)
                    self.remembered.add(entry.key)
                if not entry.ill_typed:
                    survivors = [i for i in survivors if i not in killed]
                    misses = 0
                    killed_at = self.executor.executions
                    continue
            elif killed:
                entry.kills = frozenset()
            if entry not in self.corpus and entry not in self.kill_candidates:
                self.drop_construction(added)
            misses += 1

    def varied_construction(self, inp: Input, rng) -> tuple[Input, int | None]:
        """`inp` on another construction of the method's class: a kept one with one constructor
        argument changed (a pool value or a mutation), which is added to the constructions
        (its index is returned with it, for `drop_construction`), or an existing one when
        that is the same call or MAX_HUNT_CONSTRUCTIONS were added already. The constructions
        the search keeps are chosen for the constructor's coverage; a mutant of the method
        may need a state none of them has (an exception with both a text and a location)."""
        space = self.ctor_space
        count = len(self.constructions)
        if space is None or not space.params or count >= MAX_CONSTRUCTIONS + MAX_HUNT_CONSTRUCTIONS:
            return Input(rng.randrange(count), inp.values), None
        source = self.constructions[rng.randrange(count)]
        if construction_parts(source)[3] is not None:
            # An instance given as it is (a receiver of the project's tests): not varied.
            return Input(self.constructions.index(source), inp.values), None
        base = space.from_call(source)
        if base is None:
            return inp, None
        varied = base
        # One argument changed, or two (a state may need both: a text and a location).
        for _ in range(2 if rng.random() < 0.25 else 1):
            i = rng.randrange(len(space.params))
            if space.params[i].pool and rng.random() < 0.5:
                varied = varied.replace(i, rng.choice(space.params[i].pool))
            else:
                varied = space.mutate(varied, rng, 1)
        call = space.to_call(varied)
        if call is not None and construction_parts(source)[2]:
            # The same set-up calls on the varied construction.
            call = (*call, construction_parts(source)[2])
        try:
            key = render(tuple(call)) if call is not None else None
            known = [render(tuple(c)) for c in self.constructions]
        except (Unwritable, TypeError, RecursionError):
            return inp, None
        if key is None:
            return inp, None
        if key in known:
            return Input(known.index(key), inp.values), None
        self.constructions.append(call)
        return Input(count, inp.values), count

    def drop_construction(self, index: int | None):
        """Takes back a construction `varied_construction` added, when no input kept (in the
        corpus or among the kill candidates, whose inputs the hunt varies again) uses it (it is
        the last one: the hunt adds one at a time)."""
        if index is not None and index == len(self.constructions) - 1:
            self.constructions.pop()


def _numbers(mutant) -> list:
    """The old and new values of a changed number (`10` -> `9`), [] for other constants."""
    try:
        values = [ast.literal_eval(mutant.was), ast.literal_eval(mutant.now)]
    except (ValueError, SyntaxError, TypeError):
        return []
    return values if all(type(v) in (int, float) for v in values) else []


def is_library_file(filename: str) -> bool:
    """Whether a file belongs to the standard library or to an installed package (not to the
    repository's own code)."""
    path = os.path.abspath(filename or "")
    if not os.path.isabs(filename or "") and not os.path.exists(path):
        return True  # <string>, <frozen ...>: not the repository's
    if "site-packages" in path or "dist-packages" in path:
        return True
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix and path.startswith(os.path.join(os.path.abspath(prefix), "lib")):
            return True
    return False
