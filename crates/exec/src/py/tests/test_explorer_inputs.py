"""Tests of r2e_explorer.inputs: input spaces, calls to and from inputs, variations and mutations."""

from __future__ import annotations

import inspect
import random
import types
import textwrap
import unittest

from r2e_test_support import PY_DIR  # noqa: F401 - puts the explorer's folder on sys.path

from r2e_explorer.inputs import Input, InputSpace, Param, mutate_value, shape
from r2e_explorer.pools import PoolMaker
from r2e_explorer.specs import OMIT, UNKNOWN, Member, New, render

OPAQUE = object()


def target(a, b: int, /, c="x", *rest, d: bool = False, **options):
    return a


def positional_only(a, b=1, /):
    return a


def opaque_default(a, b=OPAQUE, *rest):
    return a


def two_plain(p, q, r: int):
    return p


def text(value) -> str:
    """A value's text; OMIT for an omitted parameter."""
    return "OMIT" if value is OMIT else render(value)


def space_of(func, literals=()) -> InputSpace:
    pools = PoolMaker(types.ModuleType("refmod"), list(literals))
    annotations = {k: v for k, v in func.__annotations__.items() if k != "return"}
    return InputSpace(inspect.signature(func), pools, annotations, {}, None)


def flagged(a, *, strict=False, **options):
    if options.get("verbose"):
        return "v" if options["verbose"] is True else "w"
    if "quiet" in options:
        return "q"
    return a


class KeywordsTest(unittest.TestCase):
    """A **kwargs parameter: dicts of extra keyword arguments, keyed by what the body reads."""

    def space(self):
        import ast

        node = ast.parse(textwrap.dedent(inspect.getsource(flagged))).body[0]
        pools = PoolMaker(types.ModuleType("refmod"), [])
        return InputSpace(inspect.signature(flagged), pools, {}, {}, node)

    def test_the_pool_holds_the_keys_the_body_reads(self):
        space = self.space()
        options = space.params[-1]
        self.assertEqual(options.name, "options")
        self.assertEqual(options.pool[0], {})
        keys = {k for d in options.pool for k in d}
        self.assertEqual(keys, {"verbose", "quiet"})
        self.assertIn({"verbose": True}, options.pool)
        self.assertIn({"verbose": True, "quiet": True}, options.pool)

    def test_extra_keywords_join_the_call(self):
        space = self.space()
        base = space.base()
        self.assertEqual(base.values[-1], {})
        self.assertEqual(space.to_call(base), ((space.params[0].pool[0],), {}))
        inp = base.replace(len(space.params) - 1, {"verbose": 1})
        self.assertEqual(space.to_call(inp)[1], {"verbose": 1})
        # A named keyword is never overridden by an extra one of the same name.
        inp = base.replace(1, True).replace(len(space.params) - 1, {"quiet": 0})
        self.assertEqual(space.to_call(inp)[1], {"strict": True, "quiet": 0})
        # A call with keywords the signature does not name: they go to **options.
        found = space.from_call(((3,), {"verbose": True, "strict": True}))
        self.assertEqual(found.values, (3, True, {"verbose": True}))

    def test_mutations_keep_string_keys(self):
        space = self.space()
        rng = random.Random(3)
        inp = space.base()
        for _ in range(200):
            inp = space.mutate(inp, rng, 1)
            extra = inp.values[-1]
            self.assertIsInstance(extra, dict)
            self.assertTrue(all(isinstance(k, str) for k in extra))
            space.to_call(inp)


class SpaceTest(unittest.TestCase):
    def setUp(self):
        self.space = space_of(target)
        self.a, self.b, self.c, self.rest, self.d, self.options = self.space.params

    def test_parameters(self):
        self.assertEqual([p.name for p in self.space.params], ["a", "b", "c", "rest", "d", "options"])
        self.assertEqual(
            [p.required for p in self.space.params], [True, True, False, False, False, False]
        )
        self.assertEqual((self.c.default, self.d.default), ("x", False))
        # Annotated parameters keep to their types when mutated; the others do not.
        self.assertEqual(self.b.shapes, {"int"})
        self.assertEqual(self.d.shapes, {"bool"})
        self.assertIsNone(self.a.shapes)
        self.assertEqual(self.c.pool[0], "x")
        self.assertEqual(self.rest.pool[0], ())

    def test_base_and_its_call(self):
        base = self.space.base()
        self.assertEqual(base.values, (self.a.pool[0], self.b.pool[0], OMIT, (), OMIT, {}))
        self.assertIsNone(base.ctor)
        self.assertEqual(self.space.to_call(base), ((self.a.pool[0], 0), {}))
        self.assertEqual(self.space.base(ctor=2).ctor, 2)

    def test_optional_parameters_by_keyword_unless_extras_follow(self):
        base = self.space.base()
        inp = base.replace(2, "y").replace(4, True)
        self.assertEqual(self.space.to_call(inp), ((0, 0), {"c": "y", "d": True}))
        extras = base.replace(3, (7, 8))
        # *args are reached positionally: the omitted `c` is written as its default.
        self.assertEqual(self.space.to_call(extras), ((0, 0, "x", 7, 8), {}))

    def test_optional_positional_only_parameters_are_positional(self):
        space = space_of(positional_only)
        self.assertEqual(space.to_call(space.base().replace(1, 5)), ((0, 5), {}))
        self.assertEqual(space.to_call(space.base()), ((0,), {}))

    def test_an_unwritable_default_that_must_be_written(self):
        space = space_of(opaque_default)
        b = space.params[1]
        self.assertIs(b.default, UNKNOWN)
        self.assertEqual(space.to_call(space.base()), ((0,), {}))
        self.assertIsNone(space.to_call(space.base().replace(2, (1,))))

    def test_from_call(self):
        inp = self.space.from_call(([1, 2, "y", 9, 10], {"d": True}), ctor=1)
        self.assertEqual(inp.values, (1, 2, "y", (9, 10), True, {}))
        self.assertEqual(inp.ctor, 1)
        # Arguments that could not be recovered keep their base values.
        partial = self.space.from_call(([UNKNOWN, 5], {"c": UNKNOWN}))
        self.assertEqual(partial.values, (self.a.pool[0], 5, OMIT, (), OMIT, {}))
        for call in (
            ([1, 2], {"nope": UNKNOWN}),  # an unknown value for **options
            ([1, 2, 3, UNKNOWN], {}),
        ):
            with self.subTest(call=call):
                self.assertIsNone(self.space.from_call(call))
        self.assertIsNone(space_of(positional_only).from_call(([1, 2, 3], {})))
        # A keyword the signature does not name (a positional-only one's name too) is **options'.
        self.assertEqual(self.space.from_call(([1, 2], {"nope": 3, "a": 4})).values[-1], {"nope": 3, "a": 4})

    def test_variations_go_round_robin_and_skip_defaults(self):
        base = self.space.base()
        outputs = [[text(v) for v in inp.values] for inp in self.space.variations(base)][:8]
        params = self.space.params
        # k = 0: a, b and rest at their first values (the base itself); c and d are skipped,
        # their first values being their defaults (the same as omitting them).
        self.assertEqual(outputs[:3], [[text(v) for v in base.values]] * 3)
        # k = 1: each dimension's second value in turn.
        expected = [[text(v) for v in base.replace(i, params[i].pool[1]).values] for i in range(5)]
        self.assertEqual(outputs[3:8], expected)
        self.assertEqual(outputs[7][4], "True")
        with_ctors = list(self.space.variations(self.space.base(ctor=0), ctor_count=3))
        # The construction is one more dimension, first in each round.
        self.assertEqual([inp.ctor for inp in with_ctors[:5]], [0, 0, 0, 1, 0])
        self.assertEqual(with_ctors[3].values, self.space.base().values)

    def test_homogeneous_inputs_change_unannotated_required_parameters(self):
        space = space_of(two_plain)
        inputs = list(space.homogeneous(space.base()))
        self.assertEqual(inputs[0].values[:2], (0, 0))
        by_type = {type(inp.values[0]) for inp in inputs}
        self.assertTrue({int, str, float, list, dict, bool} <= by_type)
        for inp in inputs:
            self.assertIs(type(inp.values[0]), type(inp.values[1]))
            self.assertEqual(inp.values[2], 0)  # annotated: unchanged

    def test_random_inputs_follow_the_seed(self):
        first = [self.space.random_input(random.Random(3), 4) for _ in range(5)]
        again = [self.space.random_input(random.Random(3), 4) for _ in range(5)]
        self.assertEqual(
            [render((i.ctor, i.values)) for i in first], [render((i.ctor, i.values)) for i in again]
        )
        rng = random.Random(1)
        for _ in range(50):
            inp = self.space.random_input(rng, 3)
            self.assertIn(inp.ctor, (0, 1, 2))
            self.assertIsNot(inp.values[0], OMIT)  # required
        self.assertIsNone(self.space.random_input(rng, 1).ctor)

    def test_mutate_changes_one_dimension(self):
        rng = random.Random(0)
        base = self.space.base(ctor=0)
        ctor_changes = 0
        for _ in range(300):
            inp = self.space.mutate(base, rng, ctor_count=2)
            changed = [
                i for i, (x, y) in enumerate(zip(inp.values, base.values)) if text(x) != text(y)
            ]
            self.assertLessEqual(len(changed), 1)
            if inp.ctor != base.ctor:
                ctor_changes += 1
                self.assertEqual(changed, [])
            if changed == [3]:
                self.assertIsInstance(inp.values[3], tuple)
        self.assertGreater(ctor_changes, 0)

    def test_input_replace(self):
        inp = Input(1, [1, 2])
        other = inp.replace(0, 9)
        self.assertEqual((other.ctor, other.values, inp.values), (1, (9, 2), (1, 2)))

    def test_param_shapes_leave_out_the_off_type_values(self):
        param = Param(
            "x", Param.POSITIONAL_OR_KEYWORD, True, UNKNOWN, [1, None, "", 1.5], typed=True
        )
        self.assertEqual(param.shapes, {"int"})


class MutateValueTest(unittest.TestCase):
    def mutations(self, value, pool=(), n=200, seed=0):
        rng = random.Random(seed)
        return [mutate_value(value, rng, list(pool)) for _ in range(n)]

    def test_numbers(self):
        self.assertEqual(self.mutations(True, n=1), [False])
        ints = self.mutations(10)
        self.assertTrue(all(type(v) is int for v in ints))
        self.assertTrue({11, 9, -10, 20, 5, 0} <= set(ints))
        # Huge values are halved rather than doubled.
        self.assertNotIn(2 * 10**6, self.mutations(10**6))
        self.assertTrue(all(type(v) is float for v in self.mutations(2.5)))

    def test_strings_and_bytes(self):
        strings = self.mutations("ab", pool=["zz"])
        self.assertTrue(all(type(v) is str for v in strings))
        self.assertTrue({"", "a", "b", "AB", "ba", "abab", " ab ", "abzz"} <= set(strings))
        self.assertTrue(all(type(v) is bytes for v in self.mutations(b"ab")))

    def test_containers_keep_their_type_and_bounds(self):
        for value in ([1, 2, 3], (1, 2, 3), {"a": 1}, {1, 2}, []):
            for mutated in self.mutations(value, pool=[5, "s"]):
                self.assertIs(type(mutated), type(value))
        self.assertTrue(all(len(v) <= 50 for v in self.mutations(list(range(50)))))
        # An empty container gets an element.
        self.assertTrue(all(len(v) == 1 for v in self.mutations([], pool=[5], n=20)))

    def test_constructor_arguments_are_mutated(self):
        spec = New("Interval", (1,), (("hi", 3),))
        for mutated in self.mutations(spec, n=50):
            self.assertIsInstance(mutated, New)
            self.assertEqual(mutated.path, "Interval")
        self.assertTrue(any(render(m) != render(spec) for m in self.mutations(spec, n=50)))

    def test_other_values_are_replaced_from_the_pool(self):
        self.assertTrue(set(self.mutations(None, pool=[7, 8])) <= {7, 8})
        self.assertEqual(self.mutations(None, n=3), [None] * 3)
        self.assertEqual(
            self.mutations(Member("Color.RED"), pool=[Member("Color.GREEN")], n=1),
            [Member("Color.GREEN")],
        )

    def test_the_seed_decides(self):
        self.assertEqual(
            [render(v) for v in self.mutations([1, "a", {"k": (2,)}], seed=5)],
            [render(v) for v in self.mutations([1, "a", {"k": (2,)}], seed=5)],
        )


class ShapeTest(unittest.TestCase):
    def test_shapes(self):
        self.assertEqual(shape(3), "int")
        self.assertEqual(shape(None), "NoneType")
        self.assertEqual(shape(New("pkg.Interval", (1,))), "new:pkg.Interval")
        self.assertEqual(shape(Member("Color.RED")), "member:Color")


if __name__ == "__main__":
    unittest.main()
