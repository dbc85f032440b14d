"""Tests of r2e_explorer.mutants: mutants of a function's syntax tree, compiled to code that can
stand in for the reference's, and which inputs kill them."""

from __future__ import annotations

import ast
import textwrap
import unittest

from r2e_test_support import TempModules

from r2e_explorer.mutants import (
    KINDS,
    PER_PARAMETER_KIND,
    MutantMaker,
    MutationAnalysis,
    bounded,
    caches_of,
    find_sites,
    installed,
    mutant_trees,
    same_code,
)
from r2e_explorer.static import function_node
from r2e_explorer.tracing import Stop

DEF = '''
@decorator
def clip(items, lo=0, hi=10, strict=False):
    """Keep the items in [lo, hi]."""
    out = []
    for x in items[1:]:
        if x < lo or x >= hi:
            continue
        elif strict and x == hi - 1:
            out.append(x * 2)
        total = x + 3
        total -= 1.5
        while total > 100:
            total = total / 2
    return sorted(out[:hi])
'''

SOURCE = '''
from __future__ import annotations

import functools
import os


def classify(n: int, limit: int = 10) -> str:
    """A number's size."""
    if n < 0:
        raise ValueError("negative")
    if n < limit:
        return "small"
    return os.path.join("big", str(n * 2))


def decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@decorate
def double(x):
    return x * 2


@functools.lru_cache(maxsize=None)
def cached(x):
    return x + 1


def make_adder(k):
    def add(x):
        return x + k
    return add


class Base:
    def size(self):
        return 1


def depth(items):
    if isinstance(items, list):
        return 1 + max([depth(x) for x in items], default=0)
    return 0


class Node:
    def __init__(self, children=()):
        self.children = list(children)

    @classmethod
    def chain(cls, n):
        if n <= 0:
            return Node()
        return Node([Node.chain(n - 1)])


class Box(Base):
    def __init__(self, n):
        self.__n = n

    def size(self):
        if self.__n > 3:
            return super().size() + self.__n
        return 0
'''


def definition(source: str = DEF) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


def descriptions(mutants) -> list[str]:
    return [m.describe() for m in mutants]


class SitesTest(unittest.TestCase):
    def test_every_kind_has_sites_outside_the_docstring_decorators_and_defaults(self):
        node = definition()
        sites = find_sites(node)
        self.assertEqual({s.kind for s in sites}, set(KINDS))
        # The docstring (line 4) and the decorator are never mutated; the parameters' defaults
        # (line 3) only by `default`, its number and string defaults (not `strict=False`).
        self.assertTrue(
            all(s.line > 4 or s.kind == "default" for s in sites), [(s.kind, s.line) for s in sites]
        )
        self.assertEqual([s.detail for s in sites if s.kind == "default"], ["lo", "hi"])

    def test_mutant_descriptions(self):
        every = descriptions(mutant_trees(definition(), 0, per_kind=100))
        for expected in (
            "flip_comparison, line 7: `x < lo` -> `x >= lo`",
            "constant, line 11: `3` -> `2`",
            "add_sub, line 12: `total -= 1.5` -> `total += 1.5`",
            "mul_div, line 10: `x * 2` -> `x / 2`",
            "and_or, line 7: `x < lo or x >= hi` -> `x < lo and x >= hi`",
            "negate_if, line 7: `x < lo or x >= hi` -> `not (x < lo or x >= hi)`",
            "negate_if, line 13: `total > 100` -> `not (total > 100)`",
            "drop_return, line 15: `return sorted(out[:hi])` -> `return None`",
            "drop_call, line 15: `sorted(out[:hi])` -> `out[:hi]`",
            "remove_statement, line 10: `out.append(x * 2)` -> `pass`",
            "slice_bound, line 6: `1` -> `1 + 1`",
            "slice_bound, line 15: `hi` -> `hi + 1`",
        ):
            self.assertIn(expected, every)
        # A changed string, and an elif negated.
        strings = mutant_trees(definition("def f(s):\n    return s + 'ab'\n"), 0)
        self.assertIn("constant, line 2: `'ab'` -> `'abX'`", descriptions(strings))
        self.assertIn("negate_if, line 9: `strict and x == hi - 1` -> `not (strict and x == hi - 1)`", every)
        # An ignored parameter: its default assigned before the first statement (after the
        # docstring), one per parameter with a default; none for a default with a call.
        for name, default in (("lo", "0"), ("hi", "10"), ("strict", "False")):
            self.assertIn(f"ignore_param, line 5: `{name}` -> `{name} = {default}`", every)
        calls = mutant_trees(definition("def f(a, b=g(), *, c=(1, 2)):\n    return a, b, c\n"), 0)
        self.assertEqual(
            [d for d in descriptions(calls) if d.startswith("ignore_param")],
            ["ignore_param, line 2: `c` -> `c = (1, 2)`"],
        )

    def test_each_mutant_is_a_whole_valid_definition_that_differs(self):
        node = definition()
        original = ast.unparse(node)
        for m in mutant_trees(node, 0):
            text = ast.unparse(m.tree)
            self.assertNotEqual(text, original)
            head = "def clip(items, lo=0, hi=10, strict=False):"
            if m.kind == "default":
                head = "def clip(items, lo=1, hi=10, strict=False):" if m.was == "lo=0" else (
                    "def clip(items, lo=0, hi=11, strict=False):"
                )
            self.assertTrue(text.startswith("@decorator\n" + head), text)
            compile(text, "<mutant>", "exec")
        self.assertEqual(ast.unparse(node), original, "the definition itself is not changed")

    def test_sites_are_chosen_by_the_seed_and_bounded_per_kind(self):
        node = definition()
        a = descriptions(mutant_trees(node, 1, per_kind=2))
        self.assertEqual(a, descriptions(mutant_trees(node, 1, per_kind=2)), "deterministic")
        for kind in KINDS:
            # One site per parameter with a default, up to PER_PARAMETER_KIND.
            bound = PER_PARAMETER_KIND if kind == "ignore_param" else 2
            self.assertLessEqual(sum(d.startswith(kind + ",") for d in a), bound)
        others = [descriptions(mutant_trees(node, seed, per_kind=2)) for seed in range(2, 12)]
        self.assertTrue(any(o != a for o in others), "another seed picks other sites")

    def test_bounded_takes_kinds_round_robin(self):
        mutants = mutant_trees(definition(), 0, per_kind=3)
        kept = bounded(mutants, len(KINDS))
        self.assertEqual(len(kept), len(KINDS))
        self.assertEqual({m.kind for m in kept}, set(KINDS), "one of each kind first")
        self.assertEqual(bounded(mutants, 1000), mutants)
        self.assertEqual([m for m in mutants if m in kept], kept, "in their order")

    def test_accept_filters_mutants(self):
        only_returns = mutant_trees(definition(), 0, accept=lambda m: m.kind == "drop_return")
        self.assertEqual([m.kind for m in only_returns], ["drop_return"])


class MakerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = TempModules()
        cls.mod = cls.modules.add("r2e_mutants_sample", SOURCE)

    @classmethod
    def tearDownClass(cls):
        cls.modules.cleanup()

    def maker(self, func, class_name=None) -> MutantMaker:
        maker = MutantMaker(func, function_node(func), class_name)
        self.assertTrue(maker.usable)
        return maker

    def test_the_unmutated_definition_compiles_to_the_reference_s_code(self):
        # Future annotations, a method call on an imported module (compiled differently), a
        # method with a private name and super(), a closure.
        for func, class_name in (
            (self.mod.classify, None),
            (self.mod.Box.size, "Box"),
            (self.mod.make_adder, None),
            (self.mod.make_adder(1), None),
        ):
            with self.subTest(func=func.__qualname__):
                maker = MutantMaker(func, function_node(func), class_name)
                self.assertTrue(maker.usable)
                self.assertTrue(same_code(maker.compile(maker.node), func.__code__))

    def test_a_mutant_runs_in_place_of_the_function_and_is_put_back(self):
        classify = self.mod.classify
        mutants = self.maker(classify).make(0)
        self.assertTrue(mutants)
        self.assertLessEqual(len(mutants), 24)
        flipped = next(m for m in mutants if m.describe().endswith("`n < limit` -> `n >= limit`"))
        original = classify.__code__
        with installed(classify, flipped.code):
            self.assertEqual(classify(3), "big/6")
            self.assertEqual(classify(30, limit=40), "big/60")  # defaults and keywords work
        self.assertIs(classify.__code__, original)
        self.assertEqual(classify(3), "small")
        with self.assertRaises(RuntimeError):
            with installed(classify, flipped.code):
                raise RuntimeError("the block fails")
        self.assertIs(classify.__code__, original)

    def test_a_recursive_function_and_a_method_naming_its_class_have_mutants(self):
        # Their own name is a global of the reference: compiled in the factory it must not
        # become a free variable (before, neither got a single mutant).
        depth = self.mod.depth
        flipped = next(m for m in self.maker(depth).make(0) if m.kind == "add_sub")
        self.assertEqual(depth([[1], 2]), 2)
        with installed(depth, flipped.code):
            self.assertEqual(depth([[1], 2]), 0)  # the recursive calls run the mutant too
        self.assertEqual(depth([[1], 2]), 2)
        chain = self.mod.Node.chain.__func__
        dropped = [m for m in self.maker(chain, "Node").make(0) if m.kind == "drop_return"]
        self.assertTrue(dropped)
        with installed(chain, dropped[-1].code):
            self.assertIsNone(self.mod.Node.chain(2))

    def test_methods_keep_their_class_private_names_and_super(self):
        size = self.mod.Box.size
        mutants = self.maker(size, "Box").make(0)
        flipped = next(m for m in mutants if m.kind == "flip_comparison")
        box = self.mod.Box(5)
        self.assertEqual(box.size(), 6)
        with installed(size, flipped.code):
            self.assertEqual(box.size(), 0)
            self.assertEqual(self.mod.Box(2).size(), 3)  # super() and self.__n still work
        self.assertEqual(box.size(), 6)

    def test_a_decorated_function_runs_the_mutant_through_its_wrapper(self):
        double = self.mod.double
        func = double.__wrapped__
        mutant = next(m for m in self.maker(func).make(0) if m.kind == "mul_div")
        with installed(func, mutant.code):
            self.assertEqual(double(8), 4)
        self.assertEqual(double(8), 16)

    def test_a_changed_default_runs_the_reference_code_with_that_default(self):
        classify = self.mod.classify
        mutant = next(m for m in self.maker(classify).make(0) if m.kind == "default")
        self.assertEqual(mutant.describe(), "default, line 8: `limit=10` -> `limit=11`")
        self.assertIs(mutant.code, classify.__code__)
        self.assertEqual(classify(10), "big/20")
        with installed(classify, mutant.code, (), mutant.default):
            self.assertEqual(classify(10), "small")  # only a call that leaves `limit` out
            self.assertEqual(classify(10, 10), "big/20")  # tells them apart
        self.assertEqual(classify.__defaults__, (10,))
        # A keyword-only default, and one the function object no longer holds (no mutant).
        def f(a, *, b="x"):
            return a + b

        node = definition("def f(a, *, b='x'):\n    return a + b\n")
        kw = next(m for m in MutantMaker(f, node).make(0) if m.kind == "default")
        with installed(f, kw.code, (), kw.default):
            self.assertEqual(f("a"), "axX")
        self.assertEqual((f("a"), f.__kwdefaults__), ("ax", {"b": "x"}))
        f.__kwdefaults__ = {"b": "y"}
        self.assertFalse([m for m in MutantMaker(f, node).make(0) if m.kind == "default"])

    def test_caches_are_cleared_around_a_mutant(self):
        cached = self.mod.cached
        self.assertEqual(caches_of(cached), [cached])
        self.assertEqual(cached(1), 2)
        mutant = next(m for m in self.maker(cached.__wrapped__).make(0) if m.kind == "add_sub")
        with installed(cached.__wrapped__, mutant.code, caches_of(cached)):
            self.assertEqual(cached(1), 0)
        self.assertEqual(cached(1), 2)

    def test_no_mutants_without_source_or_code(self):
        self.assertFalse(MutantMaker(len, None).usable)
        self.assertEqual(MutantMaker(len, None).make(0), [])
        # A definition that is not the function's own.
        other = definition("def classify(n):\n    return n\n")
        self.assertFalse(MutantMaker(self.mod.classify, other).usable)

    def test_mutants_are_deterministic_and_bounded(self):
        maker = self.maker(self.mod.classify)
        self.assertEqual(descriptions(maker.make(3)), descriptions(maker.make(3)))
        self.assertEqual(len(maker.make(0, per_kind=1, limit=2)), 2)


class Entry:
    """What the analysis reads of an entry."""

    def __init__(self, name):
        self.name = name
        self.kills = frozenset()


class AnalysisTest(unittest.TestCase):
    def analysis(self, outcomes, budget=1000):
        """Mutants named 0, 1, 2...; `outcomes[(mutant, entry)]` is "kill", "timeout" or
        absent (the same as the reference); a Stop after `budget` runs."""
        runs = []

        def run(mutant, entry):
            if len(runs) >= budget:
                raise Stop()
            runs.append((mutant, entry.name))
            outcome = outcomes.get((mutant, entry.name))
            return ("timeout", None) if outcome == "timeout" else ("ok", outcome)

        def differs(obs, entry):
            return obs == "kill"

        count = 1 + max(m for m, _ in outcomes) if outcomes else 0
        return MutationAnalysis(list(range(count)), run, differs), runs

    def test_kills_are_recorded_per_entry(self):
        analysis, runs = self.analysis({(0, "a"): "kill", (1, "b"): "timeout", (2, "z"): None})
        a, b = Entry("a"), Entry("b")
        analysis.evaluate([a, b], [])
        self.assertEqual(a.kills, {0})
        self.assertEqual(b.kills, {1})
        self.assertEqual(analysis.survivors([a, b]), [2])
        self.assertEqual(analysis.survivors([a]), [1, 2])
        self.assertEqual(len(runs), 6)

    def test_tried_entries_until_enough_killers(self):
        outcomes = {(0, name): "kill" for name in "pqrst"}
        analysis, runs = self.analysis(outcomes)
        tried = [Entry(name) for name in "pqrst"]
        analysis.evaluate([], tried)
        self.assertEqual([e.name for e in tried if e.kills], ["p", "q", "r"])
        self.assertEqual(len(runs), MutationAnalysis.ENOUGH_KILLERS)

    def test_tried_entries_that_never_reach_the_mutants_line_are_skipped(self):
        # Mutant 0 changes line 7, mutant 1 a default (no line of the body shows it). A tried
        # input whose run reached line 7 is run on mutant 0; one that did not is not (its run
        # cannot differ), unless it recorded no arcs; every tried input is run on mutant 1.
        class Changed:
            def __init__(self, line, default=None):
                self.line, self.default = line, default

        runs = []

        def run(mutant, entry):
            runs.append((mutant.line, entry.name))
            return ("ok", None)

        analysis = MutationAnalysis([Changed(7), Changed(3, ("n", 2))], run, lambda o, e: False)
        tried = [Entry(name) for name in "abc"]
        tried[0].arcs = frozenset({(-1, 5), (5, 7), (7, -1)})
        tried[1].arcs = frozenset({(-1, 5), (5, -1)})
        tried[2].arcs = frozenset()
        analysis.evaluate([], tried)
        self.assertEqual(runs, [(7, "a"), (7, "c"), (3, "a"), (3, "b"), (3, "c")])

    def test_a_mutant_that_times_out_is_not_run_again(self):
        outcomes = {(0, name): "timeout" for name in "abcd"}
        analysis, runs = self.analysis(outcomes)
        entries = [Entry(name) for name in "abcd"]
        analysis.evaluate(entries, [])
        self.assertEqual(len(runs), MutationAnalysis.MAX_TIMEOUTS)
        self.assertEqual([e.name for e in entries if e.kills], ["a", "b"])

    def test_running_out_of_budget_drops_the_mutants_left(self):
        outcomes = {(0, "a"): "kill", (1, "a"): "kill", (2, "a"): "kill"}
        analysis, _ = self.analysis(outcomes, budget=3)
        a, b = Entry("a"), Entry("b")
        with self.assertRaises(Stop):
            analysis.evaluate([a, b], [])
        # Mutant 0 ran on both entries; mutant 1 was under way: dropped, with its kill.
        self.assertEqual(analysis.mutants, [0])
        self.assertEqual(a.kills, {0})

    def test_evaluate_one_entry(self):
        analysis, _ = self.analysis({(0, "a"): "kill", (2, "a"): "kill"})
        a = Entry("a")
        self.assertEqual(analysis.evaluate_entry(a, [1, 2]), {2})
        self.assertEqual(a.kills, {2})


if __name__ == "__main__":
    unittest.main()
