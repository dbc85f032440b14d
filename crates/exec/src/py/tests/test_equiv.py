"""Tests of r2e_equiv: structural equality, observations, check_function/check_method and
loading a candidate module next to the reference."""

from __future__ import annotations

import collections
import math
import os
import sys
import textwrap
import types
import unittest

from r2e_test_support import SampleRepo, read_text  # also puts r2e_equiv on sys.path

import r2e_equiv
from r2e_equiv import equivalent


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


def make_twin():
    """A class with the same module and qualified name as Point, but a different object (what
    a candidate module's copy of a reference class is)."""

    class Point:  # noqa: F811 - deliberately the same name
        def __init__(self, x, y):
            self.x = x
            self.y = y

    Point.__qualname__ = globals()["Point"].__qualname__
    return Point


class EquivalentTest(unittest.TestCase):
    def test_floats_use_a_tolerance_and_nan_equals_nan(self):
        self.assertTrue(equivalent(0.1 + 0.2, 0.3))
        self.assertTrue(equivalent(1e-13, 0.0))
        self.assertFalse(equivalent(1.0, 1.0001))
        self.assertTrue(equivalent(math.nan, float("nan")))
        self.assertFalse(equivalent(math.nan, 0.0))
        self.assertTrue(equivalent(math.inf, math.inf))
        self.assertFalse(equivalent(math.inf, -math.inf))
        self.assertTrue(equivalent(complex(1, 2), complex(1, 2 + 1e-15)))

    def test_types_must_match_and_bool_is_not_int(self):
        self.assertTrue(equivalent(1, 1))
        self.assertFalse(equivalent(True, 1))
        self.assertFalse(equivalent(1, 1.0))
        self.assertFalse(equivalent("1", 1))
        self.assertFalse(equivalent([1, 2], (1, 2)))
        self.assertTrue(equivalent(None, None))
        self.assertFalse(equivalent(None, 0))
        self.assertTrue(equivalent(b"ab", b"ab"))
        self.assertFalse(equivalent(b"ab", "ab"))

    def test_containers(self):
        self.assertTrue(equivalent([1, [2.0, "x"]], [1, [2.0 + 1e-12, "x"]]))
        self.assertFalse(equivalent([1, 2], [1, 2, 3]))
        self.assertFalse(equivalent([1, 2], [2, 1]))
        self.assertTrue(equivalent((1, (2, 3)), (1, (2, 3))))
        self.assertTrue(equivalent({"a": 1, "b": [2]}, {"b": [2], "a": 1}))
        self.assertFalse(equivalent({"a": 1}, {"a": 2}))
        self.assertFalse(equivalent({"a": [1]}, {"a": [2]}))
        self.assertFalse(equivalent({"a": 1}, {"b": 1}))
        self.assertTrue(equivalent(collections.OrderedDict(a=1), collections.OrderedDict(a=1)))
        self.assertFalse(equivalent(collections.OrderedDict(a=1), {"a": 1}))
        self.assertTrue(equivalent(collections.deque([1, 2]), collections.deque([1, 2])))

    def test_sets(self):
        self.assertTrue(equivalent({1, 2, 3}, {3, 2, 1}))
        self.assertFalse(equivalent({1, 2}, {1, 3}))
        self.assertTrue(equivalent({0.1 + 0.2}, {0.3}))  # equal within tolerance, not ==
        self.assertTrue(equivalent(frozenset({"a"}), frozenset({"a"})))
        self.assertFalse(equivalent({1}, frozenset({1})))

    def test_objects_by_state(self):
        self.assertTrue(equivalent(Point(1, [2]), Point(1, [2])))
        self.assertFalse(equivalent(Point(1, 2), Point(1, 3)))
        self.assertTrue(equivalent(Slotted(1, 2), Slotted(1, 2)))
        self.assertFalse(equivalent(Slotted(1, 2), Slotted(1, 3)))
        half = Slotted(1, 2)
        del half.b
        self.assertFalse(equivalent(half, Slotted(1, 2)))

    def test_twin_classes_compare_by_name_and_state(self):
        Twin = make_twin()
        self.assertIsNot(Twin, Point)
        self.assertTrue(equivalent(Twin(1, 2), Point(1, 2)))
        self.assertFalse(equivalent(Twin(1, 2), Point(1, 5)))

    def test_cycles_terminate(self):
        a, b = [1], [1]
        a.append(a)
        b.append(b)
        self.assertTrue(equivalent(a, b))
        c = [2]
        c.append(c)
        self.assertFalse(equivalent(a, c))
        p, q = Point(1, None), Point(1, None)
        p.y, q.y = p, q
        self.assertTrue(equivalent(p, q))
        d1, d2 = {}, {}
        d1["self"], d2["self"] = d1, d2
        self.assertTrue(equivalent(d1, d2))

    def test_iterators_and_exceptions_and_functions(self):
        self.assertTrue(equivalent(iter([1, 2]), (x for x in [1, 2])) is False)  # different types
        self.assertTrue(equivalent((x for x in [1, 2]), (x for x in [1, 2])))
        self.assertFalse(equivalent((x for x in [1, 2]), (x for x in [1, 3])))
        self.assertTrue(equivalent(ValueError("x"), ValueError("x")))
        self.assertFalse(equivalent(ValueError("x"), ValueError("y")))
        self.assertTrue(equivalent(len, len))
        self.assertTrue(equivalent(Point, make_twin()))

    def test_iterators_inside_a_returned_tuple_are_drained_in_the_call(self):
        # more-itertools' unzip returns a tuple of lazy iterators: their items are the outcome.
        # Drained inside the call, they are compared (and shown) as items, and comparing the
        # same observation twice sees them twice.
        def unzip(pairs, shift=0):
            return tuple(map(lambda p, i=i: p[i] + shift, pairs) for i in range(2))

        ref = r2e_equiv.observe_function(unzip, ([(1, 2), (3, 4)],), {})
        same = r2e_equiv.observe_function(unzip, ([(1, 2), (3, 4)],), {})
        other = r2e_equiv.observe_function(unzip, ([(1, 2), (3, 4)],), {"shift": 1})
        self.assertEqual(r2e_equiv.differences(same, ref), [])
        self.assertEqual(r2e_equiv.differences(same, ref), [])  # not consumed
        self.assertTrue(r2e_equiv.differences(other, ref))
        import r2e_snapshot

        snap = r2e_snapshot.snapshot(ref.outcome[1])
        self.assertEqual(
            [[i["int"] for i in x["iter"]["items"]] for x in snap["seq"]["items"]],
            [["1", "3"], ["2", "4"]],
        )

    def test_standard_library_values_use_eq(self):
        import datetime
        import decimal
        import fractions

        self.assertTrue(equivalent(datetime.date(2020, 1, 2), datetime.date(2020, 1, 2)))
        self.assertFalse(equivalent(datetime.date(2020, 1, 2), datetime.date(2020, 1, 3)))
        self.assertTrue(equivalent(decimal.Decimal("1.10"), decimal.Decimal("1.10")))
        self.assertTrue(equivalent(fractions.Fraction(1, 3), fractions.Fraction(2, 6)))

    def test_short_repr_is_bounded(self):
        text = r2e_equiv.short_repr("x" * 10_000)
        self.assertLessEqual(len(text), 300)
        text = r2e_equiv.short_repr([list(range(100))] * 100)
        self.assertLessEqual(len(text), 300)


# Functions compared by the check tests.
def add_one(x):
    return x + 1


def add_two(x):
    return x + 2


def parse_value_error(text):
    raise ValueError(f"bad: {text}")


def parse_key_error(text):
    raise KeyError(text)


def append_one(xs):
    xs.append(1)
    return len(xs)


def append_one_twice(xs):
    xs.append(1)
    xs.append(1)
    return len(xs) - 1


def sorts_copy(xs):
    return sorted(xs)


def sorts_in_place(xs):
    xs.sort()
    return list(xs)


class Bag(dict):
    def total(self):
        return sum(self.values())


def _sloppy_bag():
    class Bag(dict):  # the candidate's Bag: the same name, wrong with two items or more
        def total(self):
            return sum(self.values()) if len(self) < 2 else 0

    Bag.__qualname__ = "Bag"
    return Bag


SloppyBag = _sloppy_bag()


class Counter:
    def __init__(self, start=0):
        self.count = start

    def add(self, n):
        if n < 0:
            raise ValueError("negative")
        self.count += n
        return self.count

    @staticmethod
    def double(x):
        return 2 * x

    @classmethod
    def make(cls, start):
        return cls(start).count

    @property
    def positive(self):
        return self.count > 0


class Scalers:
    @staticmethod
    def by(k):
        return lambda x: x * k

    def times(self, k):
        return lambda x: x * k


class SloppyScalers(Scalers):
    @staticmethod
    def by(k):
        return lambda x: x * k + (x > 2)

    def times(self, k):
        return lambda x: x * k + (x > 2)


class SloppyCounter(Counter):
    def add(self, n):
        self.count += n + 1  # wrong state, right return value
        return self.count - 1


def _module(name: str, source: str) -> types.ModuleType:
    """A module made from source and registered under `name`, as the module under test is."""
    module = types.ModuleType(name)
    exec(compile(textwrap.dedent(source), f"{name}.py", "exec"), module.__dict__)
    sys.modules[name] = module
    return module


class WarningsTest(unittest.TestCase):
    """What the module under test warns is observed: a candidate that drops a deprecation
    warning fails; warnings of other code, the process's filters and a reworded message do not
    change a verdict (messages count only as exception messages do)."""

    HELPER = """
        import warnings

        def old_api(x):
            warnings.warn("old_api is deprecated", DeprecationWarning, stacklevel=2)
            return x
    """
    REFERENCE = """
        import warnings

        def scale(x, n=None):
            if n is None:
                warnings.warn("pass n; 128 is deprecated", DeprecationWarning, stacklevel=2)
                n = 128
            return x * n
    """

    def setUp(self):
        r2e_equiv.CALLS.clear()
        self.helper = _module("warn_helper_mod", self.HELPER)
        self.ref = _module("warn_ref_mod", self.REFERENCE)

    def tearDown(self):
        for name in [n for n in sys.modules if n.startswith("warn_")]:
            del sys.modules[name]

    def test_a_candidate_that_drops_the_warning_fails(self):
        dropped = _module(
            "warn_dropped_mod",
            """
            def scale(x, n=None):
                return x * (128 if n is None else n)
            """,
        )
        with self.assertRaises(self.failureException) as cm:
            r2e_equiv.check_function(self, dropped.scale, self.ref.scale, (2,), {})
        self.assertIn("warnings", str(cm.exception))
        self.assertIn("DeprecationWarning", str(cm.exception))
        # Where it does not warn, the same code passes.
        r2e_equiv.check_function(self, dropped.scale, self.ref.scale, (2, 3), {})

    def test_another_category_or_another_count_fails(self):
        for name, warns in [
            ("warn_user_mod", ['"pass n; 128 is deprecated"']),
            ("warn_twice_mod", ['"a", DeprecationWarning', '"b", DeprecationWarning']),
        ]:
            lines = ["import warnings", "def scale(x, n=None):", "    if n is None:"]
            lines += [f"        warnings.warn({w})" for w in warns]
            lines += ["        n = 128", "    return x * n"]
            cand = _module(name, "\n".join(lines) + "\n")
            with self.subTest(name), self.assertRaises(self.failureException):
                r2e_equiv.check_function(self, cand.scale, self.ref.scale, (2,), {})

    def test_a_reworded_warning_and_other_codes_warnings_pass(self):
        cand = _module(
            "warn_rewrite_mod",
            """
            from warnings import warn
            import warn_helper_mod

            def scale(x, n=None):
                if n is None:
                    warn(DeprecationWarning("n defaults to 128 (deprecated)"), stacklevel=2)
                    n = 128
                return warn_helper_mod.old_api(x) * n
            """,
        )
        obs = r2e_equiv.observe_function(cand.scale, (2,), {})
        # The helper's own warning is not the module's: only the reworded one is logged.
        self.assertEqual(
            obs.warned, (("DeprecationWarning", "n defaults to 128 (deprecated)"),)
        )
        ref = r2e_equiv.observe_function(self.ref.scale, (2,), {})
        # The verdict's default (and the explorer's) compares categories; a policy that compares
        # exception messages compares the warnings' too.
        self.assertEqual(r2e_equiv.differences(obs, ref, messages=False), [])
        self.assertEqual(
            [part for part, _ in r2e_equiv.differences(obs, ref, messages=True)], ["warnings"]
        )

    def test_the_filters_do_not_change_what_is_observed_nor_where_it_points(self):
        import warnings

        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("ignore")
            ignored = r2e_equiv.observe_function(self.ref.scale, (2,), {})
            warnings.simplefilter("always")
            caller = sys._getframe().f_lineno + 1
            seen = r2e_equiv.observe_function(self.ref.scale, (2,), {})
        self.assertEqual(ignored.warned, seen.warned)
        self.assertEqual(len(seen.warned), 1)
        # stacklevel=2 still points at the module's caller: r2e_equiv's call, not its wrapper.
        self.assertEqual(len(shown), 1)
        self.assertEqual(os.path.basename(shown[0].filename), "r2e_equiv.py")

    def test_a_warn_bound_before_r2e_equiv_was_imported_is_observed(self):
        # A module imported before the harness holds the original `warn` under its own name.
        module = _module(
            "warn_early_mod",
            """
            def scale(x):
                early_warn("early")
                return x
            """,
        )
        module.early_warn = r2e_equiv._ORIGINAL_WARN
        obs = r2e_equiv.observe_function(module.scale, (2,), {})
        self.assertEqual(obs.warned, (("UserWarning", "early"),))
        # Rebound for good: outside an observation the wrapper passes the call on, logging
        # nothing.
        self.assertIs(module.early_warn, r2e_equiv._observed_warn)
        import warnings

        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            self.assertEqual(module.scale(3), 3)
        self.assertEqual([str(w.message) for w in shown], ["early"])
        self.assertIsNone(r2e_equiv._WARNING_LOG.items)

    def test_an_example_observes_the_warnings_of_its_module(self):
        # The example runs in r2e_equiv's function; the module under test is the example's.
        obs = r2e_equiv.observe_example(self.ref, "scale(2)")
        self.assertEqual(obs.warned, (("DeprecationWarning", "pass n; 128 is deprecated"),))
        self.assertEqual(r2e_equiv.observe_example(self.ref, "scale(2, 3)").warned, ())

    def test_the_record_holds_the_warnings(self):
        obs = r2e_equiv.observe_function(self.ref.scale, (2,), {})
        record = r2e_equiv.record_observation(obs, "scale(2)")
        self.assertEqual(
            record["warnings"],
            [{"type": "DeprecationWarning", "message": "pass n; 128 is deprecated"}],
        )
        method = _module(
            "warn_method_mod",
            """
            import warnings

            class Cache:
                def get(self, key):
                    warnings.warn("get is slow", RuntimeWarning)
                    return key
            """,
        )
        obs = r2e_equiv.observe_method(method.Cache, (), {}, "get", (1,), {})
        self.assertEqual(obs.warned, (("RuntimeWarning", "get is slow"),))


class CheckTest(unittest.TestCase):
    def setUp(self):
        r2e_equiv.CALLS.clear()

    def assertFailsWith(self, *fragments):
        """A context manager: the block must fail the test with a message containing every
        fragment."""
        test = self

        class _Ctx:
            def __enter__(self):
                self.cm = test.assertRaises(test.failureException)
                return self.cm.__enter__()

            def __exit__(self, *exc):
                result = self.cm.__exit__(*exc)
                message = str(self.cm.exception)
                for fragment in fragments:
                    test.assertIn(fragment, message)
                return result

        return _Ctx()

    def test_same_function_passes_and_records_normal_return(self):
        r2e_equiv.check_function(self, add_one, add_one, (1,), {})
        r2e_equiv.check_function(self, parse_value_error, parse_value_error, ("x",), {})
        self.assertEqual(
            r2e_equiv.CALLS, [{"returned_normally": True}, {"returned_normally": False}]
        )

    def test_empty_keyword_arguments_may_be_left_out(self):
        r2e_equiv.check_function(self, add_one, add_one, (1,))
        with self.assertFailsWith("return value"):
            r2e_equiv.check_function(self, add_two, add_one, (1,))

    def test_different_return_value_fails_with_both_outcomes(self):
        with self.assertFailsWith("return value", "candidate: return 3", "reference: return 2"):
            r2e_equiv.check_function(self, add_two, add_one, (1,), {})

    def test_different_exception_fails(self):
        with self.assertFailsWith("exception", "raise KeyError", "raise ValueError: bad: x"):
            r2e_equiv.check_function(self, parse_key_error, parse_value_error, ("x",), {})
        with self.assertFailsWith("outcome", "candidate: return 2", "reference: raise ValueError"):
            r2e_equiv.check_function(self, add_one, parse_value_error, (1,), {})

    def test_argument_mutation_is_compared(self):
        with self.assertFailsWith("argument 0 mutation", "[1, 1] / [1]"):
            r2e_equiv.check_function(self, append_one_twice, append_one, ([],), {})
        with self.assertFailsWith("argument 'xs' mutation"):
            r2e_equiv.check_function(self, sorts_in_place, sorts_copy, (), {"xs": [3, 1, 2]})
        # The inputs themselves are never touched: each side gets deep copies.
        xs = [3, 1, 2]
        r2e_equiv.check_function(self, sorts_in_place, sorts_in_place, (xs,), {})
        self.assertEqual(xs, [3, 1, 2])

    def test_check_method(self):
        r2e_equiv.check_method(self, Counter, Counter, (1,), {}, "add", (2,), {})
        r2e_equiv.check_method(self, Counter, Counter, (), {}, "add", (-1,), {})
        r2e_equiv.check_method(self, Counter, Counter, (), {}, "double", (4,), {})
        r2e_equiv.check_method(self, Counter, Counter, (), {}, "make", (4,), {})
        r2e_equiv.check_method(self, Counter, Counter, (5,), {}, "positive", (), {})
        r2e_equiv.check_method(self, Counter, Counter, (), {}, "__init__", (3,), {})
        self.assertEqual(
            [c["returned_normally"] for c in r2e_equiv.CALLS], [True, False, True, True, True, True]
        )
        with self.assertFailsWith("instance state", "'count': 4", "'count': 3"):
            r2e_equiv.check_method(self, SloppyCounter, Counter, (1,), {}, "add", (2,), {})

    def test_set_up_calls_run_on_the_instance_before_the_method(self):
        one = (("__setitem__", ("a", 1)),)
        two = one + (("__setitem__", ("b", 2)),)
        # Empty or with one item the two agree; filled with two they do not.
        r2e_equiv.check_method(self, SloppyBag, Bag, (), {}, "total", (), {})
        r2e_equiv.check_method(self, SloppyBag, Bag, (), {}, "total", (), {}, setup=one)
        with self.assertFailsWith("return value", "candidate: return 0", "reference: return 3"):
            r2e_equiv.check_method(self, SloppyBag, Bag, (), {}, "total", (), {}, setup=two)
        # A set-up call that raises is the outcome, compared like any other.
        bad = (("__setitem__", ([], 1)),)
        r2e_equiv.check_method(self, Bag, Bag, (), {}, "total", (), {}, setup=bad)
        obs = r2e_equiv.observe_method(Bag, (), {}, "total", (), {}, setup=bad)
        self.assertEqual(obs.outcome[:2], ("raise", "TypeError"))
        # The set-up's arguments are deep copies: the harness's values stay as they were.
        item = [1]
        r2e_equiv.check_method(self, Bag, Bag, (), {}, "copy", (), {}, setup=(("__setitem__", ("k", item)),))
        obs = r2e_equiv.observe_method(Bag, (), {}, "copy", (), {}, setup=(("__setitem__", ("k", item)),))
        self.assertIsNot(obs.outcome[1]["k"], item)
        # In record mode the call's text shows the set-up.
        os.environ["R2E_MODE"] = r2e_equiv.MODE_RECORD
        try:
            del r2e_equiv.RECORDS[:]
            r2e_equiv.check_method(self, Bag, Bag, (), {}, "total", (), {}, setup=two)
        finally:
            del os.environ["R2E_MODE"]
        self.assertEqual(
            r2e_equiv.RECORDS[-1]["call"], "x = Bag(); x['a'] = 1; x['b'] = 2; x.total()"
        )

    def test_a_function_a_method_returns_is_called_on_the_then_calls(self):
        then = (((1,), {}), ((3,), {}))
        for name in ("by", "times"):
            r2e_equiv.check_method(self, Scalers, Scalers, (), {}, name, (2,), {}, then)
            # The closures differ on 3 only.
            with self.assertFailsWith("returned function call 1", "return 7 / return 6"):
                r2e_equiv.check_method(self, SloppyScalers, Scalers, (), {}, name, (2,), {}, then)

    def test_what_a_function_returns_is_used_the_way_the_tests_used_it(self):
        # A returned object's state is alike on both sides; only parsing with it tells them
        # apart: its method `parse`, called as the project's tests called it (a named `then`).
        def counted(sloppy):
            class Counted:
                def __init__(self, item):
                    self.item = item

                def parse(self, text, start=0):
                    words = text.split()[start:]
                    n = int(words[0]) - (1 if sloppy and int(words[0]) > 2 else 0)
                    return [self.item] * n

            return lambda item: Counted(item)

        then = (((), {}), (("3 a b c",), {}, "parse"), (("1 a",), {"start": 0}, "parse"))
        r2e_equiv.check_function(self, counted(False), counted(False), ("x",), {}, then)
        with self.assertFailsWith("returned function's parse()", "return ['x', 'x']"):
            r2e_equiv.check_function(self, counted(True), counted(False), ("x",), {}, then)
        obs = r2e_equiv.observe_function(counted(False), ("x",), {}, then=then)
        # The unnamed call is for a returned function only; a method the value lacks is not
        # called; an atom gets no named calls.
        self.assertEqual([n for _, _, n in obs.then], ["parse", "parse"])
        missing = ((("1",), {}, "absent"),)
        self.assertEqual(r2e_equiv.observe_function(counted(False), ("x",), {}, then=missing).then, ())
        self.assertEqual(r2e_equiv.observe_function(len, ("ab",), {}, then=then[1:]).then, ())
        # An item of a returned pair, by its place.
        pair = lambda item: (counted(False)(item), counted(True)(item))  # noqa: E731
        items = ((("3 a b c",), {}, "[0].parse"), (("3 a b c",), {}, "[1].parse"), ((), {}, "[2].parse"))
        paired = r2e_equiv.observe_function(pair, ("x",), {}, then=items)
        self.assertEqual(
            [(n, o[1]) for o, _, n in paired.then],
            [("[0].parse", ["x"] * 3), ("[1].parse", ["x"] * 2)],
        )
        # Recorded with the method's name, which r2e's verdict compares too.
        self.assertEqual(r2e_equiv._then_snapshot(obs.then)[0]["name"], "parse")
        self.assertEqual(
            r2e_equiv._then_snapshot(obs.then)[0]["outcome"]["return"],
            r2e_equiv._then_snapshot(obs.then)[0]["outcome"]["return"],
        )

    def test_a_returned_wrappers_own_functions_are_called_after_its_calls(self):
        # A cache decorator whose size is seen only through the wrapper's `cache_info()`.
        def cache(maxsize):
            def decorate(fn):
                def wrapper(*args):
                    return fn(*args)

                wrapper.cache_info = lambda: {"maxsize": maxsize}
                wrapper.cache_clear = lambda: None
                wrapper.needs_an_argument = lambda key: key
                wrapper.__wrapped__ = fn
                return wrapper

            return decorate

        def cache_128(maxsize=128):
            return cache(maxsize)

        def cache_127(maxsize=127):
            return cache(maxsize)

        then = ((
            (r2e_equiv.sample_function,), {}),)
        r2e_equiv.check_function(self, cache_128, cache_128, (), {}, then)
        with self.assertFailsWith("cache_info()", "{'maxsize': 127}", "{'maxsize': 128}"):
            r2e_equiv.check_function(self, cache_127, cache_128, (), {}, then)
        obs = r2e_equiv.observe_function(cache_128, (), {}, then=then)
        # The decorator is called; its wrapper's zero-argument functions are, in name order
        # (not `needs_an_argument`, not `__wrapped__`).
        ((_, nested, name),) = obs.then
        self.assertIsNone(name)
        self.assertEqual(
            [n for _, _, n in nested][-2:], ["cache_clear", "cache_info"]
        )

    def example_modules(self):
        """The reference module, and one whose registered action doubles odd values too."""

        def module(action):
            mod = types.ModuleType("exmod")
            source = """
                class Registry:
                    def __init__(self):
                        self.actions = []

                    def fire(self, value):
                        return [a(value) for a in self.actions]

                def doubling(registry):
                    registry.actions.append(ACTION)
                """
            exec(textwrap.dedent(source).replace("ACTION", action), vars(mod))
            return mod

        return module("lambda v: v * 2 if v % 2 == 0 else v"), module("lambda v: v * 2")

    def test_an_example_runs_as_a_program_on_each_module(self):
        ref, wrong = self.example_modules()
        source = "r = Registry()\ndoubling(r)\nprint(r.fire(4))\nr.fire(3)\nr.fire(5) == [5]"
        self.assertEqual(
            r2e_equiv.run_example(ref, source), {"printed": "[8]\n", "values": [[3], True]}
        )
        # The example's names do not leak into the module.
        self.assertFalse(hasattr(ref, "r"))
        r2e_equiv.check_example(self, ref, ref, source)
        # The wrong function shows only through a value the example gives, not what it prints.
        with self.assertFailsWith("return value", "[6]", "[3]"):
            r2e_equiv.check_example(self, wrong, ref, source)
        with self.assertFailsWith("return value", "[6]", "[3]"):
            r2e_equiv.check_example(self, wrong, ref, "r = Registry()\ndoubling(r)\nprint(r.fire(3))")
        # An exception ends the example: it is its outcome.
        asserting = "r = Registry()\ndoubling(r)\nassert r.fire(3) == [3]"
        r2e_equiv.check_example(self, ref, ref, asserting)
        with self.assertFailsWith("outcome", "raise AssertionError", "reference: return"):
            r2e_equiv.check_example(self, wrong, ref, asserting)

    def test_observations(self):
        obs = r2e_equiv.observe_function(add_one, (1,), {})
        self.assertEqual(obs.outcome, ("return", 2))
        obs = r2e_equiv.observe_function(parse_value_error, ("z",), {})
        self.assertEqual(obs.outcome, ("raise", "ValueError", "bad: z"))
        self.assertEqual(r2e_equiv.outcome_kind(obs.outcome), "raise:ValueError")

        def gen(n):
            yield from range(n)
            raise RuntimeError("late")

        # A returned generator is drained inside the call: its late exception is the outcome.
        obs = r2e_equiv.observe_function(gen, (2,), {})
        self.assertEqual(obs.outcome[:2], ("raise", "RuntimeError"))

        async def coro(x):
            return x * 3

        self.assertEqual(r2e_equiv.observe_function(coro, (2,), {}).outcome, ("return", 6))
        obs = r2e_equiv.observe_method(Counter, (1,), {}, "add", (2,), {})
        self.assertEqual(obs.outcome, ("return", 3))
        self.assertEqual(obs.instance.count, 3)


class LoadPairTest(unittest.TestCase):
    """load_pair on a real package: relative imports in the candidate, sys.modules untouched,
    and reference-class inputs handed to the candidate as its own classes."""

    @classmethod
    def setUpClass(cls):
        cls.sample = SampleRepo()
        sys.path.insert(0, cls.sample.repo)

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.sample.repo)
        for name in [n for n in sys.modules if n == "samplepkg" or n.startswith("samplepkg.")]:
            del sys.modules[name]
        cls.sample.cleanup()

    def test_without_candidate_the_candidate_is_the_reference(self):
        cand, ref = r2e_equiv.load_pair("samplepkg.core", None)
        self.assertIs(cand, ref)
        self.assertIs(ref, sys.modules["samplepkg.core"])

    def test_candidate_file_is_a_separate_module_of_the_same_package(self):
        path = self.sample.path("cand_core.py")
        source = read_text(self.sample.core).replace('return "zero"', 'return "ZERO"')
        self.sample.write(path, source)
        cand, ref = r2e_equiv.load_pair("samplepkg.core", path)
        self.assertIsNot(cand, ref)
        self.assertIs(sys.modules["samplepkg.core"], ref)
        self.assertEqual(cand.__name__, "samplepkg.core")
        self.assertEqual(cand.__package__, "samplepkg")
        self.assertEqual(cand.total([5, 200]), 105)  # uses `from .util import clamp`
        self.assertEqual(cand.classify(0), "ZERO")
        self.assertEqual(ref.classify(0), "zero")
        with self.assertRaises(self.failureException):
            r2e_equiv.check_function(self, cand.classify, ref.classify, (0,), {})

    def test_reference_instances_become_candidate_instances(self):
        path = self.sample.path("cand_same.py")
        self.sample.write(path, read_text(self.sample.core))
        cand, ref = r2e_equiv.load_pair("samplepkg.core", path)
        self.assertIsNot(cand.Interval, ref.Interval)
        # The method checks isinstance(other, Interval) against its own module's class.
        r2e_equiv.check_method(
            self, cand.Interval, ref.Interval, (0, 5), {}, "overlaps", (ref.Interval(3, 9),), {}
        )
        obs = r2e_equiv.observe_method(
            cand.Interval,
            (0, 5),
            {},
            "overlaps",
            (ref.Interval(3, 9),),
            {},
            copy_memo=r2e_equiv._twin_memo("samplepkg.core"),
        )
        self.assertEqual(obs.outcome, ("return", True))
        self.assertIs(type(obs.args[0]), cand.Interval)

    def test_sentinels_keep_their_identity_and_a_receiver_is_each_sides_own(self):
        source = textwrap.dedent("""
            _KEY = object()


            class Box:
                def __init__(self, items, key=None):
                    if key is not _KEY:
                        raise TypeError("boxes are made by pack")
                    self.items = list(items)

                def first(self, default):
                    if not isinstance(self, Box):
                        raise TypeError("not a box of this module")
                    return self.items[0] if self.items else default


            def pack(*items):
                return Box(items, key=_KEY)
        """)
        ref_path = os.path.join(self.sample.repo, "samplepkg", "sealed.py")
        self.sample.write(ref_path, source)
        cand_path = self.sample.path("cand_sealed.py")
        self.sample.write(cand_path, source)
        wrong_path = self.sample.path("wrong_sealed.py")
        self.sample.write(wrong_path, source.replace("else default", "else None"))
        cand, ref = r2e_equiv.load_pair("samplepkg.sealed", cand_path)
        # The sentinel passed as an argument is each side's own: both construct.
        r2e_equiv.check_method(
            self, cand.Box, ref.Box, ([1],), {"key": ref._KEY}, "first", (0,), {}
        )
        obs = r2e_equiv.observe_method(ref.Box, ([],), {"key": ref._KEY}, "first", (7,), {})
        self.assertEqual(obs.outcome, ("return", 7))
        # A receiver the project built: the candidate calls its own method on its own class.
        for items in ([], [3]):
            r2e_equiv.check_method(
                self, cand.Box, ref.Box, (), {}, "first", (9,), {}, receiver=ref.pack(*items)
            )
        wrong, ref = r2e_equiv.load_pair("samplepkg.sealed", wrong_path)
        with self.assertRaises(self.failureException):
            r2e_equiv.check_method(
                self, wrong.Box, ref.Box, (), {}, "first", (9,), {}, receiver=ref.pack()
            )

    def test_harness_modules_reads_the_environment(self):
        saved = {k: os.environ.get(k) for k in ("R2E_MODULE", "R2E_CANDIDATE_FILE")}
        try:
            os.environ["R2E_MODULE"] = "samplepkg.core"
            os.environ["R2E_CANDIDATE_FILE"] = ""
            cand, ref = r2e_equiv.harness_modules()
            self.assertIs(cand, ref)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v



RECORDED_SOURCE = textwrap.dedent("""
    class Ugly:
        def __repr__(self):
            raise RuntimeError("no repr")


    def push(stack, item, *more, **options):
        stack.append(item)
        return len(stack)


    class Units:
        scale = 10

        def __init__(self, n=1):
            self.n = n

        def times(self, k):
            return self.n * k

        @staticmethod
        def parse(text):
            return int(text)

        @classmethod
        def scaled(cls, n):
            return cls(n * cls.scale)


    class Lazy:
        def __init__(self):
            self.name = None

        def __repr__(self):
            if self.name is None:
                self.name = "lazy"
            return self.name


    def wrap(item):
        return [item, Lazy()]
    """)


class RecordingTest(unittest.TestCase):
    """r2e_equiv.recording: the reference's target is wrapped by harness_modules, transparently,
    and put back afterwards."""

    def setUp(self):
        self.module = types.ModuleType("r2e_recorded")
        exec(RECORDED_SOURCE, self.module.__dict__)
        sys.modules[self.module.__name__] = self.module
        self.saved_env = {k: os.environ.get(k) for k in ("R2E_MODULE", "R2E_CANDIDATE_FILE")}
        os.environ["R2E_MODULE"] = self.module.__name__
        os.environ.pop("R2E_CANDIDATE_FILE", None)

    def tearDown(self):
        del sys.modules[self.module.__name__]
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def record(self, qualname, calls):
        with r2e_equiv.recording(qualname) as recorder:
            _, reference = r2e_equiv.harness_modules()
            r2e_equiv.harness_modules()  # a second load does not wrap twice
            calls(reference)
        return recorder.report()

    def test_functions_record_arguments_before_the_call_and_bounded_reprs(self):
        original = self.module.push

        def calls(ref):
            self.assertIsNot(ref.push, original)
            self.assertIs(ref.push.__wrapped__, original)
            stack = []
            self.assertEqual(ref.push(stack, 1), 1)
            self.assertEqual(ref.push(stack, ref.Ugly(), 2, 3, sep="x" * 500), 2)
            self.assertEqual(ref.push(stack, 1), 3)
            with self.assertRaises(AttributeError):
                ref.push(None, 1)

        report = self.record("push", calls)
        self.assertIs(self.module.push, original)
        examples = report["examples"]
        self.assertEqual(examples[0], {"call": "push([], 1)", "outcome": "returns 1"})
        self.assertTrue(examples[1]["call"].startswith("push([1], <Ugly instance at 0x?>, 2, 3, sep='xxx"))
        self.assertLess(len(examples[1]["call"]), 260)
        self.assertEqual(examples[2]["call"], "push([1, <Ugly instance at 0x?>], 1)")
        self.assertEqual(
            examples[3],
            {
                "call": "push(None, 1)",
                "outcome": "raises AttributeError: 'NoneType' object has no attribute 'append'",
            },
        )
        self.assertEqual(
            report["types"],
            {
                "args": {
                    "stack": ["NoneType", "list"],
                    "item": ["Ugly", "int"],
                    "*more": ["int"],
                    "**options": ["str"],
                },
                "returns": ["int"],
            },
        )

    def test_recording_leaves_values_as_a_run_that_records_nothing(self):
        # Lazy caches its name on first repr: the example shows it, but the argument and the
        # value returned must stay as they are in a candidate's run, which records nothing.
        seen = {}

        def calls(ref):
            item = ref.Lazy()
            seen["value"] = ref.wrap(item)
            seen["item"] = item

        report = self.record("wrap", calls)
        self.assertEqual(report["examples"][0], {"call": "wrap(lazy)", "outcome": "returns [lazy, lazy]"})
        self.assertIsNone(seen["item"].name)
        self.assertEqual([getattr(v, "name", None) for v in seen["value"][1:]], [None])
        self.assertIsNone(seen["value"][0].name)

    def test_at_most_five_distinct_examples(self):
        def calls(ref):
            for n in [1, 1, 2, 3, 2, 4, 5, 6, 7]:
                ref.push([], n)

        report = self.record("push", calls)
        self.assertEqual(
            [e["call"] for e in report["examples"]], [f"push([], {n})" for n in range(1, 6)]
        )

    def test_methods_of_every_kind(self):
        units = self.module.Units
        raw = dict(vars(units))
        cases = {
            "Units.times": (lambda ref: ref.Units(3).times(k=2), "self.times(k=2)", "returns 6"),
            "Units.parse": (lambda ref: ref.Units.parse("7"), "Units.parse('7')", "returns 7"),
            "Units.scaled": (lambda ref: ref.Units(1).scaled(2).n, "Units.scaled(2)", None),
            "Units.__init__": (lambda ref: ref.Units(n=4), "Units(n=4)", "returns None"),
        }
        for qualname, (call, text, outcome) in cases.items():
            with self.subTest(qualname):
                report = self.record(qualname, call)
                self.assertEqual(report["examples"][0]["call"], text)
                if outcome:
                    self.assertEqual(report["examples"][0]["outcome"], outcome)
                self.assertNotIn("self", report["types"]["args"])
                self.assertNotIn("cls", report["types"]["args"])
                # Put back (`__slotnames__` is the cache `copy` keeps on a class it copied an
                # instance of; a harness deep-copies every input anyway).
                self.assertEqual({k: v for k, v in vars(units).items() if k != "__slotnames__"}, raw)
        self.assertEqual(
            self.record("Units.scaled", lambda ref: ref.Units.scaled(2))["types"],
            {"args": {"n": ["int"]}, "returns": ["Units"]},
        )
        # check_method still sees the kinds it dispatches on, and the verdicts hold.
        with r2e_equiv.recording("Units.parse"):
            _, ref = r2e_equiv.harness_modules()
            self.assertEqual(r2e_equiv.method_kind(ref.Units, "parse"), "static")
            r2e_equiv.check_method(self, ref.Units, ref.Units, (), {}, "parse", ("8",), {})
        with r2e_equiv.recording("Units.scaled"):
            _, ref = r2e_equiv.harness_modules()
            self.assertEqual(r2e_equiv.method_kind(ref.Units, "scaled"), "class")
            r2e_equiv.check_method(self, ref.Units, ref.Units, (), {}, "scaled", (2,), {})

    def test_unknown_targets_record_nothing(self):
        for qualname in ("missing", "Units.missing", "Nope.times", "Units.scale"):
            report = self.record(qualname, lambda ref: ref.Units(2).times(3))
            self.assertEqual(report, {"examples": [], "types": {"args": {}, "returns": []}})


if __name__ == "__main__":
    unittest.main()
