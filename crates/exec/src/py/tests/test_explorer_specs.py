"""Tests of r2e_explorer.specs: writing, building and recognizing input values."""

from __future__ import annotations

import ast
import datetime
import enum
import math
import types
import unittest

from r2e_test_support import PY_DIR  # noqa: F401 - puts the explorer's folder on sys.path

from r2e_explorer.specs import (
    OFF_TYPE_KEYS,
    OFF_TYPE_VALUES,
    THEN_CALLS,
    Helper,
    Member,
    New,
    Unwritable,
    build,
    class_path,
    dedupe,
    render,
    sort_key,
    spec_from_node,
    writable,
)


class Interval:
    def __init__(self, lo, hi=0):
        self.lo, self.hi = lo, hi


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def reference_module():
    """A stand-in for a reference module: classes, an enum and an imported module."""
    module = types.ModuleType("refmod")
    module.Interval = Interval
    module.Color = Color
    module.dt = datetime
    module.Alias = Interval
    return module


class RenderTest(unittest.TestCase):
    def test_literals_are_written_as_python_source(self):
        self.assertEqual(render(None), "None")
        self.assertEqual(render(True), "True")
        self.assertEqual(render(-3), "-3")
        self.assertEqual(render(2.5), "2.5")
        self.assertEqual(render("it's"), '"it\'s"')
        self.assertEqual(render(b"\x00a"), "b'\\x00a'")
        self.assertEqual(render(1 + 2j), "(1+2j)")
        self.assertEqual(render([1, "a"]), "[1, 'a']")
        self.assertEqual(render({"k": (1,)}), "{'k': (1,)}")
        self.assertEqual(render(()), "()")
        self.assertEqual(render((1, 2)), "(1, 2)")

    def test_non_finite_floats_are_written_as_calls(self):
        self.assertEqual(render(math.inf), "float('inf')")
        self.assertEqual(render(-math.inf), "float('-inf')")
        self.assertEqual(render(math.nan), "float('nan')")
        self.assertTrue(math.isinf(eval(render(-math.inf))))

    def test_sets_are_written_sorted_by_text(self):
        self.assertEqual(render(set()), "set()")
        self.assertEqual(render({"b", "a", "c"}), "{'a', 'b', 'c'}")
        self.assertEqual(render({10, 9}), "{10, 9}")  # by text, not by value

    def test_markers_are_written_as_reference_expressions(self):
        spec = New("Interval", [1], [("hi", 3)])
        self.assertEqual(render(spec), "reference.Interval(1, hi=3)")
        self.assertEqual(render(Member("Color.RED")), "reference.Color.RED")
        self.assertEqual(render(Helper("sample_function")), "r2e_equiv.sample_function")
        self.assertEqual(
            render([New("dt.date", (2020, 1, 31))]), "[reference.dt.date(2020, 1, 31)]"
        )

    def test_unwritable_values(self):
        for value in (object(), complex(math.inf, 0), frozenset({1}), Interval(1)):
            with self.subTest(value=value):
                self.assertRaises(Unwritable, render, value)
                self.assertFalse(writable(value))
        cyclic: list = []
        cyclic.append(cyclic)
        self.assertFalse(writable(cyclic))
        self.assertTrue(writable([1, {"a": (None,)}]))

    def test_markers_compare_and_hash_by_their_text(self):
        self.assertEqual(New("A", [1]), New("A", (1,)))
        self.assertNotEqual(New("A", [1]), New("A", [2]))
        self.assertEqual(len({New("A", [1]), New("A", (1,)), Member("A"), Member("A")}), 2)
        self.assertEqual(Helper("f"), Helper("f"))
        self.assertNotEqual(Member("A.B"), New("A.B"))
        self.assertEqual(repr(New("A", [], [("x", 1)])), "reference.A(x=1)")

    def test_sort_key_falls_back_to_repr(self):
        self.assertEqual(sort_key((1, "a")), "(1, 'a')")
        self.assertTrue(sort_key(object()).startswith("<object object"))

    def test_then_calls_and_off_type_values_are_writable(self):
        self.assertTrue(writable(THEN_CALLS))
        self.assertEqual(OFF_TYPE_KEYS, {render(v) for v in OFF_TYPE_VALUES})
        self.assertIn("r2e_equiv.sample_function", OFF_TYPE_KEYS)


class BuildTest(unittest.TestCase):
    def test_build_gives_fresh_values(self):
        spec = {"a": [1, 2], "b": (3, [4])}
        first, second = build(spec, None), build(spec, None)
        self.assertEqual(first, spec)
        self.assertIsNot(first["a"], second["a"])
        self.assertIsNot(first["b"][1], spec["b"][1])

    def test_build_makes_instances_members_and_helpers(self):
        import r2e_equiv

        ref = reference_module()
        value = build(New("Interval", [1], [("hi", New("dt.date", (2020, 1, 31)))]), ref)
        self.assertIsInstance(value, Interval)
        self.assertEqual((value.lo, value.hi), (1, datetime.date(2020, 1, 31)))
        self.assertIs(build(Member("Color.GREEN"), ref), Color.GREEN)
        self.assertIs(build(Helper("sample_function"), ref), r2e_equiv.sample_function)

    def test_sets_are_built_in_the_order_they_are_written(self):
        built = build({"b", "a"}, None)
        self.assertEqual(built, {"a", "b"})
        self.assertIsInstance(built, set)


class SpecFromNodeTest(unittest.TestCase):
    def spec(self, text: str):
        return spec_from_node(ast.parse(text, mode="eval").body, reference_module())

    def test_literals(self):
        self.assertEqual(self.spec("[1, -2, 'x']"), [1, -2, "x"])
        self.assertEqual(self.spec("{'a': (1, 2)}"), {"a": (1, 2)})

    def test_calls_of_reference_classes_become_constructor_specs(self):
        self.assertEqual(render(self.spec("Interval(1, hi=2)")), "reference.Interval(1, hi=2)")
        # A dotted name is tried whole, then by its last part.
        self.assertEqual(render(self.spec("shapes.Interval(0)")), "reference.Interval(0)")
        self.assertEqual(
            render(self.spec("Interval(Interval(1))")), "reference.Interval(reference.Interval(1))"
        )

    def test_what_cannot_be_converted(self):
        for text in ("x", "f(1)", "Interval(*args)", "Interval(**kw)", "Interval(y)", "1 + x"):
            with self.subTest(text=text):
                self.assertRaises(ValueError, self.spec, text)
        # Two levels of constructor calls at most.
        self.assertRaises(ValueError, self.spec, "Interval(Interval(Interval(1)))")


class ClassPathTest(unittest.TestCase):
    def test_paths_under_the_reference_module(self):
        ref = reference_module()
        self.assertEqual(class_path(ref, Interval), "Interval")
        self.assertEqual(class_path(ref, Color), "Color")
        # A class of a module the reference imports.
        self.assertEqual(class_path(ref, datetime.date), "dt.date")
        self.assertIsNone(class_path(ref, ClassPathTest))

    def test_a_class_known_only_by_another_name(self):
        ref = types.ModuleType("refmod")
        ref.Renamed = Interval
        self.assertEqual(class_path(ref, Interval), "Renamed")


class DedupeTest(unittest.TestCase):
    def test_keeps_the_first_of_each_text_and_skips_unwritable_values(self):
        values = [1, 1.0, True, 1, "1", object(), [1], [1], New("A"), New("A")]
        self.assertEqual(dedupe(values), [1, 1.0, True, "1", [1], New("A")])

    def test_limit(self):
        self.assertEqual(dedupe(range(10), limit=3), [0, 1, 2])


if __name__ == "__main__":
    unittest.main()
