"""Tests of r2e_explorer.search, in process: loading targets, instances and constructions of
classes, the search and its answer. (test_explore.py runs the explorer as a script.)"""

from __future__ import annotations

import ast
import signal
import sys
import unittest

from r2e_test_support import TempModules

import r2e_equiv
from r2e_explorer import search
from r2e_explorer.search import (
    shows_address,
    ExploreError,
    Explorer,
    InstanceFinder,
    Target,
    state_signature,
    value_key,
)
from r2e_explorer.specs import render
from r2e_explorer.tracing import Executor

MODULE = "r2e_search_sample"

SOURCE = '''
import datetime as dt


class Counter:
    """
    >>> c = Counter(5)
    >>> c.bump(2)
    7
    """

    def __init__(self, start: int):
        if start < 0:
            raise ValueError("negative")
        self.value = start

    def bump(self, by=1):
        if by > 10:
            raise ValueError("too much")
        self.value += by
        return self.value

    @staticmethod
    def parse(text):
        return int(text)

    @classmethod
    def zero(cls):
        return cls(0)

    @property
    def doubled(self):
        return self.value * 2


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 1


class Failure(Exception):
    pass


class Holder:
    def __init__(self, counter: Counter, when: dt.date):
        self.counter = counter
        self.when = when


class Never:
    def __init__(self, x):
        raise RuntimeError("never")

    def method(self):
        return 1


def sign(n):
    """
    >>> sign(-4)
    -1
    """
    if n < 0:
        return -1
    return 1


NOT_CALLABLE = 3


def slug(text: str, lowercase: bool = True) -> str:
    words = text.split()
    if lowercase:
        return "-".join(w.lower() for w in words)
    return "-".join(words)


def order(items: list, key=None, reverse: bool = False) -> list:
    if key is None:
        return sorted(items, reverse=reverse)
    return sorted(items, key=lambda x: key(x), reverse=reverse)


def size(items):
    return len(items) + 1


def checked(n):
    if not isinstance(n, int):
        raise TypeError("not an int")
    return n * 2


def both(flag: bool, text: str) -> str:
    if flag:
        text = text.upper()
    return text.strip()


class Node:
    # Every kill of `total`'s mutants that keeps child=None is ill-typed: the hunt varies the
    # construction, and keeps the ill-typed killers as kill candidates.
    def __init__(self, value: int, child=None):
        self.value = value
        self.child = child

    def total(self, extra: int = 0):
        return self.value + self.child.value + extra


class Tag:
    def __init__(self, **attrs):
        self.css = attrs.get("class", "")
        self.name = attrs.get("name", "")


def render_tag(tag: Tag) -> str:
    return tag.name + "." + tag.css


def configured(value: int, **options) -> int:
    if options.get("double"):
        return value * 2
    return value


class Located:
    # The text is kept only with a message (as pyparsing's ParseBaseException keeps it): the
    # constructions chosen for __init__'s arcs have a text or a message, never both.
    def __init__(self, text: str, at: int = 0, message=None):
        self.at = at
        if message is None:
            self.text = ""
        else:
            self.text = text

    def marked(self, marker: str = ">") -> str:
        column = self.at + 1
        line = self.text
        return line[: column - 1] + marker + line[column - 1 :]


import abc


class Shape(abc.ABC):
    def __init__(self, size: int):
        self.size = size

    @abc.abstractmethod
    def name(self) -> str: ...

    def describe(self, times: int) -> str:
        if times > 2:
            return self.name() * 2
        return f"{self.name()}:{self.size * times}"


class Square(Shape):
    def name(self):
        return "square"


class Odd(Shape):
    def name(self):
        return "odd"

    def describe(self, times):
        return "overridden"


class Sub(Square):
    pass


def area_of(shape: Shape) -> int:
    return shape.size * shape.size


class Registry:
    def __init__(self):
        self.actions = []

    def fire(self, value):
        return [action(value) for action in self.actions]


def doubling(registry):
    """Registers an action that doubles even values.

    Example::

        r = Registry()
        doubling(r)
        print(r.fire(4), r.fire(3))
    """
    def action(value):
        if value % 2 == 0:
            return value * 2
        return value
    registry.actions.append(action)


SETTINGS = {"factor": 1}


def by_factor(x):
    """Scales by the module's factor.

    Example::

        SETTINGS["factor"] = 3
        print(by_factor(2))
    """
    if SETTINGS["factor"] > 2:
        return "scaled up"
    return x * SETTINGS["factor"]


class Converters:
    @staticmethod
    def to_date(fmt="%Y-%m-%d"):
        def convert(text, where, tokens):
            try:
                return dt.datetime.strptime(tokens[0], fmt).date()
            except ValueError as exc:
                return "bad: " + str(exc)
        return convert


def remembering(limit):
    def decorator(fn):
        def wrapper(key, value):
            if key in SEEN_KEYS:
                return "again"
            if len(SEEN_KEYS) < limit:
                SEEN_KEYS.append(key)
            return fn(value)
        return wrapper
    return decorator


SEEN_KEYS = []


def at_least(n):
    def check(text, count, items):
        if count < n:
            return "few"
        return len(items) >= n
    return check


def identify(x):
    if x is None:
        return "none"
    if callable(x):
        return "function " + str(x)
    return str(x)


class Lazy:
    """Its name is computed on first `repr` and kept (as pyparsing's elements do)."""

    def __init__(self):
        self.name = None
        self.flag = False

    def __repr__(self):
        if self.name is None:
            self.name = "lazy"
        return self.name

    def set_flag(self, flag=True):
        self.flag = flag
        return self


import random as _random


def pick(items, k):
    if k <= 0:
        return []
    if k >= len(items):
        return list(items)
    return [items[_random.randrange(len(items))] for _ in range(k)]


import re as _re

_PATTERNS = {}


def _stamp_pattern():
    if "stamp" not in _PATTERNS:
        _PATTERNS["stamp"] = _re.compile(
            "(?P<h>[01][0-9])h" + "(?P<m>[0-5][0-9])" + "(m(?P<s>[0-5][0-9])s)?$"
        )
    return _PATTERNS["stamp"]


def scaled(factor: int, text: str):
    match = _stamp_pattern().match(text)
    if not match:
        raise ValueError("not a stamp")
    if factor < 0:
        return -int(match.group("h"))
    return factor * int(match.group("m"))


def unpacked(*items):
    """The items, or the items of a single list or tuple given alone."""
    if len(items) == 1 and isinstance(items[0], (list, tuple)):
        items = tuple(items[0])
    return items


def stamp_seconds(text):
    match = _stamp_pattern().match(text)
    if not match:
        raise ValueError("not a stamp")
    seconds = int(match.group("h")) * 3600 + int(match.group("m")) * 60
    if match.group("s"):
        seconds += int(match.group("s"))
    return seconds


import time as _time


class Expiring(dict):
    """A dict whose items expire: each is stamped with the timer's time when it is set."""

    def __init__(self, ttl, timer=_time.monotonic):
        super().__init__()
        self.ttl = ttl
        self.timer = timer
        self.stamps = {}

    def __setitem__(self, key, value):
        if len(self) >= 2:
            raise ValueError("full")
        super().__setitem__(key, value)
        self.stamps[key] = self.timer() + self.ttl

    def expire(self, now=None):
        """Removes the expired items and returns their keys."""
        if now is None:
            now = self.timer()
        gone = []
        for key, stamp in list(self.stamps.items()):
            if stamp <= now:
                del self[key]
                del self.stamps[key]
                gone.append(key)
        return gone


class Until(dict):
    """A dict whose items live until a time `ttu(key)` gives, at a clock that stays at 0."""

    def __init__(self, ttu):
        super().__init__()
        self.ttu = ttu
        self.until = {}

    def __setitem__(self, key, value):
        until = self.ttu(key)
        if until <= 0:
            return
        super().__setitem__(key, value)
        self.until[key] = until

    def expire(self, now):
        gone = [key for key, until in self.until.items() if until <= now]
        for key in gone:
            del self[key]
            del self.until[key]
        return gone


def stall(n):
    """Waits: every call runs past its limit."""
    import time

    if n:
        time.sleep(1)
    time.sleep(1)
    return n
'''


class SearchCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = TempModules()
        cls.mod = cls.modules.add(MODULE, SOURCE)

    @classmethod
    def tearDownClass(cls):
        cls.modules.cleanup()

    def setUp(self):
        self.saved_handler = signal.getsignal(signal.SIGALRM)

    def tearDown(self):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, self.saved_handler)


class TargetTest(SearchCase):
    def target(self, qualname, kind="method"):
        return Target(self.mod, MODULE, qualname, kind, r2e_equiv)

    def test_a_function(self):
        t = self.target("sign", "function")
        self.assertIs(t.callable, self.mod.sign)
        self.assertIsNone(t.cls)
        self.assertEqual(t.method_kind, "function")
        self.assertEqual(list(t.signature.parameters), ["n"])
        self.assertEqual(t.tracer.filename, self.mod.__file__)
        self.assertEqual(t.node.name, "sign")
        self.assertEqual(t.literals, [0, -1, 1])
        self.assertIs(t.globalns, vars(self.mod))

    def test_methods_of_each_kind(self):
        cases = {
            "Counter.bump": ("instance", ["by"]),
            "Counter.parse": ("static", ["text"]),
            "Counter.zero": ("class", []),
            "Counter.doubled": ("property", []),
            "Counter.__init__": ("init", ["start"]),
        }
        for qualname, (kind, params) in cases.items():
            with self.subTest(qualname=qualname):
                t = self.target(qualname)
                self.assertIs(t.cls, self.mod.Counter)
                self.assertEqual(t.method_name, qualname.split(".")[1])
                self.assertEqual(t.method_kind, kind)
                self.assertEqual(list(t.signature.parameters), params)
        self.assertEqual(self.target("Counter.bump").annotations, {})
        self.assertEqual(self.target("Counter.__init__").annotations, {"start": int})

    def test_what_cannot_be_explored(self):
        cases = {
            ("sign", "method"): "'sign' is not Class.method",
            ("sign.x", "method"): "sign is not a class",
            ("Counter.nothing", "method"): f"{MODULE} has no Counter.nothing",
            ("nothing", "function"): f"{MODULE} has no nothing",
            ("NOT_CALLABLE", "function"): f"{MODULE}.NOT_CALLABLE is not callable",
        }
        for (qualname, kind), message in cases.items():
            with self.subTest(qualname=qualname):
                with self.assertRaises(ExploreError) as caught:
                    self.target(qualname, kind)
                self.assertIn(message, str(caught.exception))


class InstanceFinderTest(SearchCase):
    def finder(self, own_class=None, own_constructions=None):
        executor = Executor(r2e_equiv, 1.0)
        return executor, InstanceFinder(
            self.mod, executor, r2e_equiv, own_class, own_constructions or []
        )

    def test_constructor_expressions_that_work(self):
        executor, finder = self.finder()
        found = finder(self.mod.Counter)
        texts = [render(spec) for spec in found]
        self.assertEqual(texts[0], "reference.Counter(0)")
        self.assertTrue(1 <= len(found) <= 4)
        for spec in found:
            self.assertGreaterEqual(spec.args[0], 0)  # Counter(-1) raises: not kept
        # Helper constructions are not executions of the target.
        self.assertEqual(executor.executions, 0)
        self.assertIs(finder(self.mod.Counter), found)  # cached

    def test_arguments_that_are_instances_in_turn(self):
        _, finder = self.finder()
        texts = [render(spec) for spec in finder(self.mod.Holder)]
        self.assertTrue(texts)
        self.assertTrue(
            texts[0].startswith("reference.Holder(reference.Counter(0), reference.dt.date(")
        )

    def test_an_abstract_class_stands_for_its_simplest_subclasses(self):
        _, finder = self.finder()
        texts = [render(spec) for spec in finder(self.mod.Shape)]
        self.assertTrue(texts)
        self.assertTrue(all(t.startswith(("reference.Square(", "reference.Odd(", "reference.Sub(")) for t in texts), texts)

    def test_exceptions_unreachable_and_failing_classes(self):
        _, finder = self.finder()
        self.assertEqual(finder(self.mod.Failure), [])
        self.assertEqual(finder(SearchCase), [])
        self.assertEqual(finder(self.mod.Never), [])

    def test_the_method_s_own_class_uses_its_constructions(self):
        _, finder = self.finder(self.mod.Counter, [((3,), {}), ((), {"start": 4})])
        self.assertEqual(
            [render(spec) for spec in finder(self.mod.Counter)],
            ["reference.Counter(3)", "reference.Counter(start=4)"],
        )


class HelpersTest(SearchCase):
    def test_state_signature(self):
        self.assertEqual(state_signature(self.mod.Slotted()), (("a", "int"),))
        self.assertEqual(state_signature(self.mod.Counter(2)), (("value", "int"),))
        self.assertEqual(state_signature(3), ())

    def test_value_key(self):
        def key(obs):
            return value_key(r2e_equiv, obs)

        positive = r2e_equiv.observe_function(self.mod.sign, (5,), {})
        self.assertTrue(key(positive).startswith("return "))
        self.assertEqual(key(positive), key(r2e_equiv.observe_function(self.mod.sign, (7,), {})))
        self.assertNotEqual(key(positive), key(r2e_equiv.observe_function(self.mod.sign, (-7,), {})))
        raised = r2e_equiv.observe_function(self.mod.Counter, (-1,), {})
        self.assertTrue(key(raised).startswith("raise "))
        bump = r2e_equiv.observe_method(self.mod.Counter, (1,), {}, "bump", (2,), {})
        same = r2e_equiv.observe_method(self.mod.Counter, (2,), {}, "bump", (1,), {})
        other = r2e_equiv.observe_method(self.mod.Counter, (1,), {}, "bump", (3,), {})
        self.assertEqual(key(bump), key(same))
        self.assertNotEqual(key(bump), key(other))

    def test_an_outcome_that_shows_a_memory_address_is_told(self):
        def observe(*args):
            return r2e_equiv.observe_function(self.mod.identify, args, {})

        self.assertTrue(shows_address(r2e_equiv, observe(r2e_equiv.sample_function)))
        self.assertTrue(shows_address(r2e_equiv, observe(object())))
        self.assertFalse(shows_address(r2e_equiv, observe(3)))
        self.assertFalse(shows_address(r2e_equiv, observe("0x12")))
        # An exception's message is not compared: an address there is no matter.
        raised = r2e_equiv.observe_function(self.mod.Counter, (object(),), {})
        self.assertEqual(raised.outcome[0], "raise")
        self.assertFalse(shows_address(r2e_equiv, raised))

    def test_an_observation_is_never_shown_so_it_stays_as_observed(self):
        # Showing a value may change it: Lazy caches its name on first `repr`. Neither the
        # value key nor the explorer's comparisons may show it, or a second run of the same
        # input (on a Lazy never shown) would differ from the first.
        first = r2e_equiv.observe_method(self.mod.Lazy, (), {}, "set_flag", (), {})
        value_key(r2e_equiv, first)
        second = r2e_equiv.observe_method(self.mod.Lazy, (), {}, "set_flag", (), {})
        self.assertEqual(r2e_equiv.differences(second, first, detailed=False), [])
        changed = r2e_equiv.observe_method(self.mod.Lazy, (), {}, "set_flag", (False,), {})
        self.assertTrue(r2e_equiv.differences(changed, first, detailed=False))
        self.assertEqual(r2e_equiv.differences(second, first, detailed=False), [])
        self.assertIsNone(first.instance.name)


class ExplorerTest(SearchCase):
    def explore(self, qualname, kind="function", **overrides):
        request = {
            "module": MODULE,
            "qualname": qualname,
            "kind": kind,
            "budget": 120,
            "seed": 0,
            "max_tests": 6,
            "per_call_timeout": 1.0,
            "time_limit": 60,
        }
        request.update(overrides)
        return Explorer(request, r2e_equiv).run()

    def searched(self, qualname, **overrides):
        """The explorer after a run, with the executor's count when its search ended (the
        mutation analysis began) and when each input was kept (`kept_at`)."""
        explorer = Explorer(
            {
                "module": MODULE,
                "qualname": qualname,
                "seed": 0,
                "max_tests": 6,
                "per_call_timeout": 1.0,
                "time_limit": 60,
                **overrides,
            },
            r2e_equiv,
        )
        explorer.kept_at = []
        analyse, try_input = explorer.analyse, explorer.try_input

        def recording_analyse(ctor_count):
            explorer.search_ended = explorer.executor.executions
            return analyse(ctor_count)

        def recording_try(inp, again=False):
            kept = len(explorer.corpus)
            result = try_input(inp, again)
            if explorer.analysis is None and len(explorer.corpus) > kept:
                explorer.kept_at.append(explorer.executor.executions)
            return result

        explorer.analyse, explorer.try_input = recording_analyse, recording_try
        explorer.answer_ = explorer.run()
        return explorer

    def test_the_search_stops_at_its_plateau(self):
        # `sign` has four arcs and two kinds of outcome, found in its first inputs: with a
        # budget of 20,000 the search stops max(plateau, G, PER_KEPT * K) executions after the
        # last input it kept (the G-th execution; K inputs kept), and the harness is the same
        # on each run.
        for plateau in (50, 500):
            explorer = self.searched("sign", budget=20_000, plateau=plateau)
            out = explorer.answer_
            self.assertEqual(out["status"], "ok", out.get("error"))
            last, kept = explorer.kept_at[-1], len(explorer.kept_at)
            stretch = max(plateau, last, search.PER_KEPT * kept)
            self.assertEqual(explorer.search_ended, last + stretch)
            # The plateau decides when the search has kept little; what it kept, otherwise.
            self.assertEqual(stretch, search.PER_KEPT * kept if plateau == 50 else plateau)
            self.assertLess(explorer.search_ended, 1_000)
            again = self.searched("sign", budget=20_000, plateau=plateau)
            self.assertEqual(again.search_ended, explorer.search_ended)
            self.assertEqual(again.answer_["harness"], out["harness"])
        # Without a plateau the search runs to its budget (less the reserve kept for the end).
        explorer = self.searched("sign", budget=2_000, plateau=0)
        self.assertEqual(explorer.search_ended, 2_000 - 8)

    def test_a_search_that_keeps_finding_goes_on(self):
        # `scaled` keeps finding arcs for a while: each input kept moves the stopping point on,
        # and a late find (the G-th execution, past the plateau and PER_KEPT * K) is waited on
        # for G executions more.
        explorer = self.searched("scaled", budget=20_000, plateau=20)
        self.assertGreater(len(explorer.kept_at), 3)
        last = explorer.kept_at[-1]
        stretch = max(20, last, search.PER_KEPT * len(explorer.kept_at))
        self.assertEqual(explorer.search_ended, last + stretch)
        self.assertGreater(explorer.search_ended, last + 20)

    def test_the_hunt_stops_when_it_kills_no_more(self):
        # `checked` has a mutant no input kills: without a plateau the hunt looks for a killer
        # until its 300 misses; with one it stops after max(plateau, K) executions that killed
        # none, and kills what the long hunt kills.
        long = self.explore("checked", budget=3_000, plateau=0)
        short = self.explore("checked", budget=3_000, plateau=30)
        self.assertEqual(len(long["mutants"]["survivors"]), 1, long["mutants"])
        self.assertEqual(short["mutants"]["killed"], long["mutants"]["killed"])
        self.assertLess(short["mutants"]["executions"] * 3, long["mutants"]["executions"])

    def test_a_function(self):
        out = self.explore("sign")
        self.assertEqual(out["status"], "ok")
        # Ints return; a string (a value of another type) raises. -1 is the boundary that
        # kills the mutant `n < -1`.
        self.assertEqual(
            out["outcomes"], ["return:int", "return:int", "return:int", "raise:TypeError"]
        )
        self.assertIn("args = (-1,)\n", out["harness"])
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"])
        self.assertGreater(out["mutants"]["total"], 5)
        self.assertGreaterEqual(out["tests"], 2)
        # Entry, both branches and their exits, and the exit of the comparison that raises.
        self.assertEqual(out["arcs"], 6)
        self.assertLessEqual(out["executions"], 120)
        self.assertFalse(out["time_limit_hit"])
        # The doctest example comes first.
        self.assertIn("    def test_0(self):\n        args = (-4,)\n", out["harness"])
        self.assertEqual(self.explore("sign"), out)  # deterministic

    def test_a_method_on_constructions_of_its_class(self):
        out = self.explore("Counter.bump", kind="method", call_sites=[{"args": ["20"]}])
        self.assertEqual(out["status"], "ok")
        self.assertIn("raise:ValueError", out["outcomes"])
        self.assertIn("return:int", out["outcomes"])
        # The doctest's construction and call come first (the optional argument by keyword),
        # then the call site.
        tests = out["harness"].split("    def test_")
        self.assertIn("ctor_args = (5,)\n        ctor_kwargs = {}\n        args = ()\n", tests[1])
        self.assertIn("kwargs = {'by': 2}\n", tests[1])
        self.assertIn("kwargs = {'by': 20}\n", tests[2])

    def test_a_mapping_is_filled_before_its_method_runs(self):
        # `expire` does nothing on an empty mapping: set-up calls put items in first. Items
        # are stamped with the timer's time, so the default clock would make every filled
        # instance differ from run to run: the timer is a function that gives a constant.
        out = self.explore("Expiring.expire", kind="method", budget=300)
        self.assertEqual(out["status"], "ok")
        self.assertIn("ctor_kwargs = {'timer': lambda *args: 0}\n", out["harness"])
        self.assertIn("        setup = (('__setitem__', (", out["harness"])
        self.assertIn(", setup=setup)\n", out["harness"])
        # The loop's body and both of its branches are reached; every mutant of it is killed.
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"])
        self.assertGreater(out["mutants"]["total"], 4)
        # Fills that fail (a third item in a mapping that holds two) are not kept.
        self.assertNotIn("('__setitem__', ('c', 3))", out["harness"])

    def test_a_constructor_argument_found_to_be_called_becomes_a_function(self):
        # Nothing says `ttu` is a function until an item goes in ("'int' object is not
        # callable"): each argument in turn becomes a function giving a constant, 1 first (an
        # item whose time is 0 is never stored).
        out = self.explore("Until.expire", kind="method", budget=300)
        self.assertEqual(out["status"], "ok")
        self.assertIn("ctor_args = (lambda *args: 1,)\n", out["harness"])
        self.assertIn("setup = ", out["harness"])
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"])

    def test_a_method_of_an_abstract_class_runs_on_a_concrete_subclass(self):
        # Shape cannot be constructed; Square inherits `describe` unchanged (Odd overrides it,
        # and Sub is one level deeper), so the harness constructs Square.
        out = self.explore("Shape.describe", kind="method")
        self.assertEqual(out["status"], "ok")
        self.assertIn("Square = candidate.Square\n", out["harness"])
        self.assertIn("reference_Square = reference.Square\n", out["harness"])
        self.assertIn("check_method(self, Square, reference_Square,", out["harness"])
        self.assertIn("return:str", out["outcomes"])
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"])

    def test_a_method_returning_an_instance_with_a_lazy_name_keeps_its_inputs(self):
        # Before, the first run's value was shown (its name cached) before the second run was
        # compared with it: no input was ever deterministic ("no input could be kept").
        out = self.explore("Lazy.set_flag", kind="method")
        self.assertEqual(out["status"], "ok")
        self.assertIn("return:Lazy", out["outcomes"])
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"])

    def test_an_abstract_class_in_an_annotation_gets_instances_of_a_subclass(self):
        out = self.explore("area_of")
        self.assertEqual(out["status"], "ok")
        self.assertIn("return:int", out["outcomes"])
        self.assertRegex(out["harness"], r"args = \(reference\.(Square|Odd|Sub)\(")

    def test_inputs_whose_outcome_shows_a_memory_address_are_not_kept(self):
        # Another process shows another address: such a test would fail its own reference.
        out = self.explore("identify")
        self.assertEqual(out["status"], "ok")
        self.assertNotIn("sample_function", out["harness"])
        self.assertNotIn("reference.", out["harness"].split("class ", 1)[1])

    def test_a_returned_closure_is_called_on_inputs_of_its_own(self):
        # No call of THEN_CALLS has three arguments: the closure's own parameters give calls
        # that reach its branches, and kill the mutants of its body.
        out = self.explore("at_least", budget=300)
        self.assertEqual(out["status"], "ok")
        then = next(line for line in out["harness"].splitlines() if "then = " in line)
        calls = ast.literal_eval(then.split("then = ", 1)[1].replace("r2e_equiv.sample_function", "None"))
        three = [args for args, _ in calls if len(args) == 3]
        self.assertTrue(three, then)
        # Without them (THEN_CALLS only) the closure's body is never run: fewer arcs, fewer
        # mutants killed.
        saved = search.closure_calls
        search.closure_calls = lambda *_: ()
        try:
            guesses = self.explore("at_least", budget=300)
        finally:
            search.closure_calls = saved
        self.assertGreater(out["arcs"], guesses["arcs"])
        self.assertGreater(out["mutants"]["killed"], guesses["mutants"]["killed"])

    def test_a_docstring_example_runs_as_a_test(self):
        # The action is run only when the registry fires, which no call of `doubling` does:
        # the docstring's example does, reaching both of its branches and killing a mutant.
        out = self.explore("doubling", budget=200)
        self.assertEqual(out["status"], "ok")
        harness = out["harness"]
        self.assertIn("r2e_equiv.check_example(self, candidate, reference, example)", harness)
        self.assertIn("'print(r.fire(4), r.fire(3))',", harness)
        # In a class of its own, run after the calls' tests.
        examples = harness.index("class TestDoublingExamples(unittest.TestCase):")
        self.assertIn("    r2e_run_last = True", harness[examples:])
        self.assertLess(harness.index("class TestDoubling(unittest.TestCase):"), examples)
        saved = search.example_programs
        search.example_programs = lambda *_, **__: []
        try:
            without = self.explore("doubling", budget=200)
        finally:
            search.example_programs = saved
        self.assertNotIn("check_example", without["harness"])
        self.assertGreater(out["arcs"], without["arcs"])

    def test_an_example_that_leaves_state_behind_runs_after_the_calls(self):
        # The example changes a module-level setting, which the calls' tests read: it is kept
        # (it reaches a branch nothing else does), and the harness runs it after them.
        try:
            out = self.explore("by_factor", budget=200)
        finally:
            sys.modules[MODULE].SETTINGS["factor"] = 1  # what it left behind here
        self.assertEqual(out["status"], "ok")
        self.assertIn("check_example", out["harness"])
        self.assertIn("r2e_run_last = True", out["harness"])

    def test_without_a_fork_no_example_runs_and_the_search_goes_on(self):
        def no_fork():
            raise BlockingIOError(11, "Resource temporarily unavailable")

        saved = search.os.fork
        search.os.fork = no_fork
        try:
            out = self.explore("doubling", budget=200)
        finally:
            search.os.fork = saved
        self.assertEqual(out["status"], "ok")
        self.assertNotIn("check_example", out["harness"])

    def test_a_closure_a_static_method_returns_is_called_on_its_own_inputs(self):
        # A static method returning a parse action: the closure is called with tokens that
        # are a list holding a date its default format writes, so that both of its branches
        # run, and a mutant of its body is killed.
        out = self.explore("Converters.to_date", kind="method", budget=300)
        self.assertEqual(out["status"], "ok")
        self.assertIn("then = (", out["harness"])
        self.assertIn("['2024-01-02']", out["harness"])
        # `.date()` dropped, or the return's value, shows only on a date that parses. (One
        # mutant, `tokens[0]` -> `tokens[-1]`, is equivalent on a one-token list.)
        survivors = out["mutants"]["survivors"]
        self.assertFalse([m for m in survivors if "date()" in m or "drop_return" in m], survivors)
        # The parameter's kinds of values come before more values of one kind: without them
        # the calls never hold a list of strings.
        saved = search.shaped_variations
        search.shaped_variations = lambda *_: iter(())
        try:
            guesses = self.explore("Converters.to_date", kind="method", budget=300)
        finally:
            search.shaped_variations = saved
        self.assertNotIn("['2024-01-02']", guesses["harness"])
        self.assertGreater(out["arcs"], guesses["arcs"])
        self.assertGreater(out["mutants"]["killed"], guesses["mutants"]["killed"])

    def test_the_guesses_come_first_in_the_then_calls(self):
        from r2e_explorer.specs import THEN_CALLS

        self.assertEqual(r2e_equiv.THEN_GUESSES, len(THEN_CALLS))
        # Without calls of its own, a returned callable's returned callable gets 3 calls.
        self.assertEqual(r2e_equiv._nested_calls(THEN_CALLS), THEN_CALLS[:3])
        own = tuple(((i,), {}) for i in range(8))
        self.assertEqual(r2e_equiv._nested_calls(THEN_CALLS + own), THEN_CALLS[:3] + own[2:])

    def test_a_decorators_wrapper_is_called_on_inputs_of_its_own(self):
        # The wrapper takes two arguments: none of the first THEN_CALLS reaches its body; the
        # last calls (made for the innermost function) do.
        out = self.explore("remembering", budget=200)
        self.assertEqual(out["status"], "ok")
        saved = r2e_equiv._THEN_NESTED_LAST
        r2e_equiv._THEN_NESTED_LAST = 0
        try:
            first_only = self.explore("remembering", budget=200)
        finally:
            r2e_equiv._THEN_NESTED_LAST = saved
        self.assertGreater(out["arcs"], first_only["arcs"])

    def test_the_hunt_gives_a_changed_number_to_a_parameter_of_one_value(self):
        # `len(items) == 1` -> `== 2` survives until the hunt, which gives changed numbers to
        # the parameters of one value only: never in place of `*items` (that failed the
        # explorer: `to_call` extends the arguments with them).
        out = self.explore("unpacked", budget=2000, max_tests=8)
        self.assertEqual(out["status"], "ok", out)
        self.assertIn("return:tuple", out["outcomes"])

    def test_strings_matching_the_patterns_the_function_uses_are_tried(self):
        # No pool holds "12h30m15s", and the body names no pattern (a helper makes it): strings
        # made from the compiled pattern the calls used reach the branches behind the match.
        out = self.explore("stamp_seconds", budget=300)
        self.assertEqual(out["status"], "ok")
        self.assertIn("return:int", out["outcomes"])
        self.assertEqual(out["mutants"]["killed"], out["mutants"]["total"], out["mutants"])
        saved = search.regexgen.examples
        search.regexgen.examples = lambda *_: []
        try:
            guesses = self.explore("stamp_seconds", budget=300)
        finally:
            search.regexgen.examples = saved
        self.assertGreater(out["arcs"], guesses["arcs"])
        self.assertNotIn("return:int", guesses["outcomes"])

    def test_pattern_strings_go_to_a_string_parameter_and_never_to_others(self):
        # `factor: int` comes first, and every pool holds a few strings: the strings made from
        # the pattern go to `text`, and `factor` stays within its annotation.
        out = self.explore("scaled", budget=300)
        self.assertEqual(out["status"], "ok")
        self.assertIn("return:int", out["outcomes"])
        for line in out["harness"].splitlines():
            if line.strip().startswith("args = ("):
                args = eval(line.split("=", 1)[1])
                self.assertNotRegex(str(args[0]), r"h[0-9]", line)

    def test_the_pattern_watch_leaves_out_r2e_s_own_patterns(self):
        # r2e_equiv normalizes exception messages with a pattern of its own: not the code's.
        explorer = Explorer(
            {"module": MODULE, "qualname": "stamp_seconds", "budget": 40, "max_tests": 3},
            r2e_equiv,
        )
        seen = []
        saved = search.regexgen.examples

        def record(pattern, *args, **kwargs):
            seen.append(pattern.pattern)
            return saved(pattern, *args, **kwargs)

        search.regexgen.examples = record
        try:
            explorer.run()
        finally:
            search.regexgen.examples = saved
        self.assertTrue(seen)
        self.assertTrue(all("0x" not in p for p in seen), seen)

    def test_inputs_whose_call_draws_from_the_global_random_generator_are_not_kept(self):
        # Two runs here may agree by chance (one item of two, twice the same); another process
        # seeds `random` anew. Only calls that draw nothing are kept.
        out = self.explore("pick", budget=300)
        self.assertEqual(out["status"], "ok")
        for line in out["harness"].splitlines():
            if line.strip().startswith("args = ("):
                items, k = eval(line.split("=", 1)[1], {"r2e_equiv": r2e_equiv})[:2]
                drawn = type(k) is int and hasattr(items, "__len__") and 0 < k < len(items)
                self.assertFalse(drawn, line)

    def test_the_answer_says_what_the_kept_tests_kill(self):
        out = self.explore("sign")
        mutants = out["mutants"]
        self.assertEqual(set(mutants), {"total", "killed", "survivors", "executions"})
        self.assertGreater(mutants["total"], 0)
        self.assertEqual(mutants["killed"], mutants["total"])
        self.assertEqual(mutants["survivors"], [])
        self.assertGreater(mutants["executions"], 0)
        # The search's own executions stay within the budget.
        self.assertLessEqual(out["executions"], 120)

    def test_an_analysis_out_of_budget_leaves_fewer_mutants(self):
        from r2e_explorer import search

        full = self.explore("sign")["mutants"]["total"]
        saved = search.ANALYSIS_EXECUTIONS
        try:
            search.ANALYSIS_EXECUTIONS = 0  # only the reserve for re-checks is left
            out = self.explore("sign")
        finally:
            search.ANALYSIS_EXECUTIONS = saved
        self.assertEqual(out["status"], "ok")
        self.assertGreaterEqual(out["tests"], 3)
        self.assertEqual(out["mutants"]["total"], 0)
        self.assertGreater(full, 0)
        self.assertFalse(out["time_limit_hit"])

    def test_tests_that_tell_a_negated_flag_apart(self):
        out = self.explore("slug", max_tests=12, budget=300)
        self.assertEqual(out["mutants"]["survivors"], [], out["harness"])
        # Some test has upper-case text with the flag left on: `if not lowercase` fails it.
        self.assertRegex(out["harness"], r"args = \('[^']*[A-Z]")

    def test_called_parameters_get_working_functions(self):
        out = self.explore("order", max_tests=12, budget=300)
        self.assertEqual(out["mutants"]["survivors"], [], out["mutants"])
        # A key that changes the order of an unsorted list kills `key(x)` -> `x` and `sorted`
        # dropped; a harness whose only keys fail (TypeError) would not tell them apart.
        self.assertRegex(out["harness"], r"'key': (lambda x: |str|abs|len)")
        self.assertLessEqual(out["outcomes"].count("raise:TypeError"), 1)

    def test_at_most_one_interpreter_error_on_ill_typed_input(self):
        out = self.explore("size", max_tests=12)
        self.assertEqual(out["outcomes"].count("raise:TypeError"), 1, out["outcomes"])
        self.assertIn("return:int", out["outcomes"])

    def test_interpreter_errors_and_explicit_raises_are_told_apart(self):
        explorer = Explorer(
            {"module": MODULE, "qualname": "size", "budget": 60, "max_tests": 6},
            r2e_equiv,
        )
        explorer.run()
        kinds = {e.kind: e.ill_typed for e in explorer.corpus}
        self.assertTrue(kinds["raise:TypeError"])
        self.assertFalse(kinds["return:int"])
        explorer = Explorer(
            {"module": MODULE, "qualname": "checked", "budget": 60, "max_tests": 6},
            r2e_equiv,
        )
        out = explorer.run()
        explicit = [e for e in explorer.corpus if e.kind == "raise:TypeError"]
        self.assertTrue(explicit)
        self.assertFalse(any(e.ill_typed for e in explicit))
        self.assertIn("raise:TypeError", out["outcomes"])

    def test_the_hunt_combines_values_to_kill_survivors(self):
        out = self.explore("both", max_tests=12, budget=200)
        self.assertEqual(out["mutants"]["survivors"], [], out["harness"])
        self.assertEqual(self.explore("both", max_tests=12, budget=200), out)  # deterministic

    def test_the_hunt_varies_the_construction_to_kill_survivors(self):
        # `column - 1` -> `column + 1` differs only on an instance with a text and a message.
        out = self.explore("Located.marked", kind="method", max_tests=12, budget=1000)
        self.assertEqual(out["mutants"]["survivors"], [], out["harness"])
        self.assertIn("'message': ", out["harness"])
        self.assertEqual(self.explore("Located.marked", kind="method", max_tests=12, budget=1000), out)

    def test_extra_keyword_arguments_are_explored(self):
        # `**options` read with `options.get("double")`: a call with double=True kills the
        # mutants of that branch (before, **kwargs was never given anything).
        out = self.explore("configured", max_tests=8)
        self.assertEqual(out["mutants"]["survivors"], [], out["harness"])
        self.assertIn("'double': True", out["harness"])

    def test_a_construction_the_hunt_added_stays_while_an_input_uses_it(self):
        # A kill candidate's input points at its construction: dropping it left an index past
        # the end (an IndexError in the next hunt step).
        for seed in range(4):
            out = self.explore("Node.total", kind="method", max_tests=8, budget=300, seed=seed)
            self.assertEqual(out["status"], "ok")

    def test_the_hunt_with_no_input_kept_tries_inputs_of_its_own(self):
        # Every call of `stall` runs past its limit, so no input is kept: the hunt for its
        # mutants draws inputs of its own (it crashed on an unbound name doing so), and the
        # search ends with no input kept.
        with self.assertRaises(ExploreError) as caught:
            self.explore("stall", per_call_timeout=0.02, budget=40)
        self.assertIn("no input could be kept", str(caught.exception))

    def test_keyword_names_that_cannot_be_written_are_left_out(self):
        # `attrs.get("class")`: `Tag(class=True)` does not compile.
        out = self.explore("render_tag", max_tests=8)
        compile(out["harness"], "<harness>", "exec")
        self.assertNotIn("class=", out["harness"])

    def test_errors(self):
        with self.assertRaises(ExploreError) as caught:
            self.explore("Never.method", kind="method")
        self.assertEqual(
            str(caught.exception), "could not construct Never: raise RuntimeError: never"
        )
        with self.assertRaises(ExploreError) as caught:
            self.explore("f", module="r2e_no_such_module_here")
        self.assertIn("the import failed: ModuleNotFoundError", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
