"""Tests of r2e_explorer.render: the harness's text."""

from __future__ import annotations

import ast
import unittest

from r2e_test_support import PY_DIR  # noqa: F401 - puts the explorer's folder on sys.path

from r2e_explorer.render import harness_class_name, local_name, render_harness
from r2e_explorer.search import Entry
from r2e_explorer.specs import THEN_CALLS, New, render


def entry(call, ctor_call=None, then=False):
    return Entry(None, "", ctor_call, call, frozenset(), "return:int", True, "", 0, then=then)


class NamesTest(unittest.TestCase):
    def test_local_names_avoid_the_harness_names(self):
        self.assertEqual(local_name("slugify", "target"), "slugify")
        for name in ("args", "reference", "self", "unittest", "class", "TestThing", "not-a-name"):
            with self.subTest(name=name):
                self.assertEqual(local_name(name, "target"), "target")

    def test_harness_class_names(self):
        self.assertEqual(harness_class_name("slugify"), "TestSlugify")
        self.assertEqual(harness_class_name("word_count"), "TestWordCount")
        self.assertEqual(harness_class_name("Interval.overlaps"), "TestIntervalOverlaps")
        self.assertEqual(harness_class_name("Trie.__init__"), "TestTrieInit")
        self.assertEqual(harness_class_name("a-b"), "TestTarget")


class RenderHarnessTest(unittest.TestCase):
    def test_function_harness(self):
        harness = render_harness(
            "textkit.slug", "slugify", False, [entry((("Hello World",), {})), entry(((), {"n": 2}))]
        )
        self.assertEqual(
            harness,
            '"""Equivalence tests for textkit.slug.slugify (written by r2e_explore)."""\n'
            "\n"
            "import unittest\n"
            "\n"
            "import r2e_equiv\n"
            "\n"
            "candidate, reference = r2e_equiv.harness_modules()\n"
            "slugify = candidate.slugify\n"
            "reference_slugify = reference.slugify\n"
            "\n"
            "\n"
            "class TestSlugify(unittest.TestCase):\n"
            "    def test_0(self):\n"
            "        args = ('Hello World',)\n"
            "        kwargs = {}\n"
            "        r2e_equiv.check_function(self, slugify, reference_slugify, args, kwargs)\n"
            "\n"
            "    def test_1(self):\n"
            "        args = ()\n"
            "        kwargs = {'n': 2}\n"
            "        r2e_equiv.check_function(self, slugify, reference_slugify, args, kwargs)\n"
            "\n"
            "\n"
            'if __name__ == "__main__":\n'
            "    unittest.main()\n",
        )

    def test_a_returned_function_is_called_too(self):
        harness = render_harness("m", "make", False, [entry(((2,), {}), then=True)])
        self.assertIn(f"        then = {render(THEN_CALLS)}\n", harness)
        self.assertIn(
            "r2e_equiv.check_function(self, make, reference_make, args, kwargs, then)", harness
        )
        compile(harness, "<harness>", "exec")

    def test_method_harness(self):
        entries = [
            entry(((New("Interval", (1, 2)),), {}), ctor_call=((0,), {"hi": 3})),
            entry(((), {})),
        ]
        harness = render_harness("pkg.shapes", "Interval.overlaps", True, entries)
        tree = ast.parse(harness)
        self.assertIn("Interval = candidate.Interval\n", harness)
        self.assertIn("reference_Interval = reference.Interval\n", harness)
        test_0, test_1 = tree.body[-2].body
        lines = [ast.unparse(stmt) for stmt in test_0.body]
        self.assertEqual(
            lines,
            [
                "ctor_args = (0,)",
                "ctor_kwargs = {'hi': 3}",
                "args = (reference.Interval(1, 2),)",
                "kwargs = {}",
                "r2e_equiv.check_method(self, Interval, reference_Interval, ctor_args, "
                "ctor_kwargs, 'overlaps', args, kwargs)",
            ],
        )
        # Without a construction (static and class methods, __init__): empty constructor args.
        self.assertEqual(ast.unparse(test_1.body[0]), "ctor_args = ()")

    def test_set_up_calls_of_a_construction_are_written_and_passed(self):
        setup = (("__setitem__", ("a", 1)),)
        entries = [entry(((), {}), ctor_call=((2,), {}, setup), then=True)]
        harness = render_harness("m", "Cache.expire", True, entries)
        (test_0,) = ast.parse(harness).body[-2].body
        lines = [ast.unparse(stmt) for stmt in test_0.body]
        self.assertEqual(lines[2], "setup = (('__setitem__', ('a', 1)),)")
        self.assertEqual(
            lines[-1],
            "r2e_equiv.check_method(self, Cache, reference_Cache, ctor_args, ctor_kwargs, "
            "'expire', args, kwargs, then, setup=setup)",
        )

    def test_clashing_names_are_replaced(self):
        harness = render_harness("m", "args", False, [entry(((), {}))])
        self.assertIn("target = candidate.args\nreference_target = reference.args\n", harness)
        harness = render_harness("m", "TestCase.run", True, [entry(((), {}))])
        self.assertIn("TargetClass = candidate.TestCase\n", harness)
        self.assertIn("class TestTestCaseRun(unittest.TestCase):", harness)
        harness = render_harness("m", "Outer.Inner.method", True, [entry(((), {}))])
        self.assertIn("Inner = candidate.Outer.Inner\n", harness)


if __name__ == "__main__":
    unittest.main()
