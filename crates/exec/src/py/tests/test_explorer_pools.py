"""Tests of r2e_explorer.pools: the candidate values of parameters."""

from __future__ import annotations

import collections.abc
import datetime
import enum
import inspect
import os
import sys
import tempfile
import types
import typing
import unittest

from r2e_test_support import PY_DIR  # noqa: F401 - puts the explorer's folder on sys.path

from r2e_explorer.pools import (
    COMMON_VALUES,
    POOL_MAX,
    STANDARD_SAMPLES,
    PoolMaker,
    eval_annotation,
    hashable,
    literal_variants,
    make_dicts,
    make_lists,
    make_rows,
    make_sets,
)
from r2e_explorer.specs import OFF_TYPE_VALUES, Helper, Member, New, render


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Widget:
    def __init__(self, size: int):
        self.size = size


def reference_module():
    module = types.ModuleType("refmod")
    module.Color = Color
    module.Widget = Widget
    module.dt = datetime
    return module


def texts(values) -> list[str]:
    return [render(v) for v in values]


class LiteralVariantsTest(unittest.TestCase):
    def test_neighbours_by_type(self):
        self.assertEqual(literal_variants(5), [5, 4, 6, 0, -5])
        self.assertEqual(literal_variants(2.5), [2.5, 1.5, 3.5, 0.0, -2.5])
        self.assertEqual(literal_variants("ab"), ["ab", "", " ab ", "AB"])
        self.assertEqual(literal_variants(b"x"), [b"x", b"", b"X"])
        self.assertEqual(literal_variants(None), [None])


class AnnotationTest(unittest.TestCase):
    def setUp(self):
        self.ref = reference_module()
        self.pools = PoolMaker(self.ref, [42, "key"])

    def values(self, annotation, globalns=None):
        return self.pools.for_annotation(annotation, globalns or {})

    def test_atoms_start_with_the_literals_and_their_neighbours(self):
        self.assertEqual(self.pools.atoms[int], [42, 41, 43, 0, -42, 1, -1, 2, 10, 100, -7])
        # Strings: the literals, the common strings, then the literals' neighbours.
        strings = self.pools.atoms[str]
        self.assertEqual(strings[:4], ["key", "", "a", "hello world"])
        self.assertLess(strings.index("Héllo Wörld"), strings.index(" key "))
        self.assertEqual(strings[-2:], [" key ", "KEY"])
        # Integral literals are float boundaries too.
        self.assertEqual(self.pools.atoms[float][:3], [42.0, 41.0, 43.0])

    def test_scalars(self):
        self.assertEqual(self.values(int), self.pools.atoms[int])
        self.assertEqual(self.values(bool), [True, False])
        self.assertEqual(self.values(float), self.pools.atoms[float] + [42, 41, 43])
        self.assertEqual(self.values(bytes), [b"", b"a", b"hello world"])
        self.assertEqual(self.values(type(None)), [None])
        self.assertEqual(self.values(None), [None])

    def test_unions_literals_and_typing_forms(self):
        optional = self.values(typing.Optional[int])
        self.assertEqual(optional[-1], None)
        self.assertEqual(optional[:-1], self.pools.atoms[int][:16])
        self.assertEqual(self.values(int | str)[:2], [42, 41])
        self.assertEqual(self.values(typing.Literal["a", 3]), ["a", 3])
        self.assertEqual(self.values(typing.Annotated[bool, "doc"]), [True, False])
        self.assertEqual(self.values(typing.TypeVar("N", bound=bool)), [True, False])
        # Callables: working functions of the arity the annotation says, then the helper.
        one = texts(self.values(typing.Callable[[int], int]))
        self.assertEqual(one[:3], ["lambda x: x", "str", "lambda x: -x"])
        self.assertEqual(one[-1], "r2e_equiv.sample_function")
        two = texts(self.values(typing.Callable[[int, int], int]))
        self.assertEqual(two[:2], ["lambda x, y: x + y", "max"])
        self.assertIn("lambda *args: args", texts(self.values(collections.abc.Callable)))
        self.assertEqual(self.values(collections.abc.Callable)[-1], Helper("sample_function"))
        # Nothing usable.
        for annotation in (typing.Any, object, inspect.Parameter.empty, typing.TypeVar("T")):
            self.assertIsNone(self.values(annotation))
        self.assertIsNone(self.values(typing.Union[int, typing.Any]))

    def test_containers(self):
        self.assertEqual(
            self.values(list[int]),
            [[], [42], [42, 41, 43], [43, 42, 41], [41, 41], [42, 41, 43, 0, -42, 1]],
        )
        self.assertEqual(self.values(collections.abc.Sequence[int]), self.values(list[int]))
        self.assertEqual(self.values(tuple[int, ...])[1], (42,))
        self.assertEqual(
            self.values(tuple[int, bool]),
            [(42, True), (41, False), (43, True), (0, False), (-42, True), (1, False)],
        )
        self.assertEqual(self.values(tuple), [(), (1, 2), (1, 2, 3), ("a", 1)])
        self.assertEqual(self.values(set[bool]), [set(), {True}, {True, False}])
        self.assertEqual(self.values(dict[str, bool])[:2], [{}, {"key": True}])
        # An element annotation without values: ints and strings.
        self.assertEqual(self.values(list[typing.Any])[1], [42])

    def test_string_annotations_are_evaluated(self):
        self.assertEqual(self.values("list[int]"), self.values(list[int]))
        self.assertEqual(
            self.values("Optional[bool]", {"Optional": typing.Optional}), [True, False, None]
        )
        self.assertIsNone(self.values("Unknown"))

    def test_names_bound_only_for_type_checkers_are_the_packages(self):
        # markdown's processors: `from . import blockparser` and `from markdown import Markdown`
        # under `if TYPE_CHECKING:`, annotations `blockparser.BlockParser` and `Markdown | None`.
        with tempfile.TemporaryDirectory() as root:
            files = {
                "tcpkg/__init__.py": "from .core import Engine\n",
                "tcpkg/core.py": "class Engine:\n    pass\n",
                "tcpkg/parsing.py": "class Parser:\n    pass\n",
                "tcpkg/procs.py": (
                    "from __future__ import annotations\n"
                    "from typing import TYPE_CHECKING, Optional\n"
                    "if TYPE_CHECKING:\n"
                    "    from . import parsing\n"
                    "    from tcpkg import Engine\n"
                    "Parser = 'the module own Parser'\n"
                ),
            }
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            sys.path.insert(0, root)
            try:
                import tcpkg.parsing
                import tcpkg.procs

                ns = vars(tcpkg.procs)
                engine = tcpkg.core.Engine
                self.assertIs(eval_annotation("parsing.Parser", ns), tcpkg.parsing.Parser)
                self.assertEqual(eval_annotation("Engine | None", ns), engine | None)
                self.assertEqual(eval_annotation("Optional[Engine]", ns), typing.Optional[engine])
                # The module's own names come first, then the builtins.
                self.assertEqual(eval_annotation("Parser", ns), "the module own Parser")
                self.assertIs(eval_annotation("list", ns), list)
                # A name the package does not have stays text.
                self.assertEqual(eval_annotation("Missing | None", ns), "Missing | None")
                # Outside a package, nothing is looked for.
                self.assertEqual(eval_annotation("Engine", {}), "Engine")
            finally:
                sys.path.remove(root)
                for name in [m for m in sys.modules if m == "tcpkg" or m.startswith("tcpkg.")]:
                    del sys.modules[name]

    def test_enums_standard_values_and_classes_of_the_reference(self):
        self.assertEqual(self.values(Color), [Member("Color.RED"), Member("Color.GREEN")])
        dates = self.values(datetime.date)
        self.assertEqual(render(dates[0]), "reference.dt.date(2020, 1, 31)")
        self.assertEqual(len(dates), len(STANDARD_SAMPLES[datetime.date]))
        # A class: asked of the instance finder (top level only), None when it finds nothing.
        asked = []
        finder = PoolMaker(
            self.ref, [], instance_finder=lambda cls: asked.append(cls) or [New("Widget", (1,))]
        )
        self.assertEqual(finder.for_annotation(Widget, {}), [New("Widget", (1,))])
        # Not for elements of containers: those are ints and strings.
        self.assertEqual(finder.for_annotation(list[Widget], {})[1], [0])
        self.assertEqual(asked, [Widget])
        self.assertIsNone(
            PoolMaker(self.ref, [], instance_finder=lambda cls: []).for_annotation(Widget, {})
        )
        self.assertIsNone(self.values(Widget))


class ParameterTest(unittest.TestCase):
    def param(self, source: str) -> inspect.Parameter:
        namespace: dict = {}
        exec(f"def f({source}): pass", namespace)
        return next(iter(inspect.signature(namespace["f"]).parameters.values()))

    def test_annotated_parameter(self):
        pools = PoolMaker(reference_module(), [])
        pool, typed = pools.for_parameter(self.param("n: int = 5"), int, {}, None)
        self.assertTrue(typed)
        self.assertEqual(pool[:3], [5, 0, 1])
        # Values of other types come last.
        self.assertEqual(texts(pool[-5:]), ["None", "''", "1.5", "[]", "r2e_equiv.sample_function"])
        self.assertEqual(len(pool), len(set(texts(pool))))

    def test_unannotated_parameter_follows_its_uses(self):
        import ast

        node = ast.parse("def f(text):\n    return text.split(',')\n").body[0]
        pools = PoolMaker(reference_module(), [","], own_instances=[New("Widget", (1,))])
        pool, typed = pools.for_parameter(self.param("text"), inspect.Parameter.empty, {}, node)
        self.assertFalse(typed)
        self.assertEqual(pool[:3], [",", "", "a"])
        self.assertIn(" , ", pool)
        self.assertIn(Helper("sample_function"), pool)
        self.assertLessEqual(len(pool), POOL_MAX)
        for value in (0, [1, 2, 3], None, (1, 2)):
            self.assertIn(render(value), texts(pool))

    def test_an_unpacked_parameter_gets_columns(self):
        # `zip(*iterables)`: the items are columns whose orders differ, so that sorting by one
        # column (or a key of it, or in reverse) shows.
        import ast

        node = ast.parse("def f(iterables):\n    return list(zip(*iterables))\n").body[0]
        pools = PoolMaker(reference_module(), [])
        pool, typed = pools.for_parameter(self.param("iterables"), inspect.Parameter.empty, {}, node)
        self.assertFalse(typed)
        self.assertEqual(pool[0], [[1, -1, 0], ["a", "hello world", ""]])
        self.assertIn([[1, -1, 0]], pool)

    def test_values_a_parameter_is_compared_with_join_its_pool(self):
        # tabulate's `_format(val, valtype, ...)`: `valtype is int`, `valtype in (str, bytes)`.
        import ast

        node = ast.parse(
            "def f(valtype):\n"
            "    if valtype is int:\n"
            "        return 1\n"
            "    if valtype in (str, bytes) or valtype is SENTINEL or valtype == LIMIT:\n"
            "        return 2\n"
        ).body[0]
        module = reference_module()
        module.SENTINEL = object()
        globalns = {"SENTINEL": module.SENTINEL, "LIMIT": 7, "os": types}
        pools = PoolMaker(module, [])
        pool, _ = pools.for_parameter(self.param("valtype"), inspect.Parameter.empty, globalns, node)
        for expected in ("int", "str", "bytes", "reference.SENTINEL", "7"):
            self.assertIn(expected, texts(pool))
        del module.SENTINEL

    def test_a_parameter_whose_items_are_checked_gets_lists_of_them(self):
        # `isinstance(data[0], dict)` (boltons' Table.from_data): lists of dicts, first.
        import ast

        node = ast.parse("def f(data):\n    if isinstance(data[0], dict):\n        return 1\n").body[0]
        pools = PoolMaker(reference_module(), [])
        pool, _ = pools.for_parameter(self.param("data"), inspect.Parameter.empty, {}, node)
        lists_of_dicts = [v for v in pool if isinstance(v, list) and v and isinstance(v[0], dict)]
        self.assertGreaterEqual(len(lists_of_dicts), 3)
        self.assertTrue(any(len(v) == 2 and all(isinstance(d, dict) for d in v) for v in lists_of_dicts))
        self.assertIs(pool[0], lists_of_dicts[0])

    def test_a_parameter_tested_against_a_class_gets_its_values(self):
        # isodate's `_strfduration(tdt, ...)`: `isinstance(tdt, Duration)`, and a standard
        # class (`timedelta`) by its samples.
        import ast
        import datetime

        node = ast.parse(
            "def f(tdt, other):\n"
            "    if isinstance(tdt, Widget):\n"
            "        return 1\n"
            "    if isinstance(other, (timedelta, Missing)):\n"
            "        return 2\n"
        ).body[0]
        module = reference_module()
        found = []

        def finder(cls):
            found.append(cls)
            return [New("Widget", (1,)), New("Widget", (2,))]

        class Widget:
            pass

        globalns = {"Widget": Widget, "timedelta": datetime.timedelta}
        pools = PoolMaker(module, [], instance_finder=finder)
        pool, _ = pools.for_parameter(self.param("tdt"), inspect.Parameter.empty, globalns, node)
        self.assertEqual(found, [Widget])
        self.assertEqual(pool[:2], [New("Widget", (1,)), New("Widget", (2,))])
        module.timedelta = datetime.timedelta
        pool, _ = pools.for_parameter(self.param("other"), inspect.Parameter.empty, globalns, node)
        del module.timedelta
        self.assertTrue(any("timedelta(" in t for t in texts(pool[:6])), texts(pool[:6]))

    def test_the_type_of_the_default_leads(self):
        pools = PoolMaker(reference_module(), [])
        pool, typed = pools.for_parameter(
            self.param("ratio=0.5"), inspect.Parameter.empty, {}, None
        )
        self.assertFalse(typed)
        self.assertEqual(pool[:7], [0.5, 0.0, -2.5, 1.0, 3.25, 100.0, -1.0])
        self.assertEqual(texts(pool[7:10]), ["float('inf')", "float('-inf')", "float('nan')"])
        self.assertEqual(pool[10:12], [0, 1])

    def test_a_function_as_the_default_gets_working_functions_first(self):
        import time

        pools = PoolMaker(reference_module(), [])
        namespace = {"time": time, "joined": lambda a, b="": a + b}
        exec("def f(timer=time.monotonic, join=joined): pass", namespace)
        timer, join = inspect.signature(namespace["f"]).parameters.values()
        # A builtin without a signature: first a function of any arguments giving a constant
        # (a clock that does not move), then the others of any arity.
        pool, _ = pools.for_parameter(timer, inspect.Parameter.empty, {}, None)
        self.assertEqual(texts(pool[:3]), ["lambda *args: 0", "lambda *args: args", "lambda *args: str(args)"])
        # A function requiring one argument: functions of one argument.
        pool, _ = pools.for_parameter(join, inspect.Parameter.empty, {}, None)
        self.assertEqual(texts(pool[:3]), ["lambda x: x", "str", "lambda x: -x"])
        # A default that is a value, not a function, gets no functions first.
        pool, _ = pools.for_parameter(self.param("ratio=0.5"), inspect.Parameter.empty, {}, None)
        self.assertEqual(pool[0], 0.5)

    def test_own_instances_come_last(self):
        pools = PoolMaker(reference_module(), [], own_instances=[New("Widget", (7,))])
        pool, _ = pools.for_parameter(self.param("w"), inspect.Parameter.empty, {}, None)
        self.assertEqual(pool[-1], New("Widget", (7,)))
        self.assertEqual(texts(pool[: len(COMMON_VALUES)]), texts(COMMON_VALUES))

    def test_var_positional(self):
        pools = PoolMaker(reference_module(), [])
        self.assertEqual(pools.for_var_positional(), [(), (0,), (0, 1), ("",), (0, 1, -1)])


class HelpersTest(unittest.TestCase):
    def test_eval_annotation(self):
        self.assertIs(eval_annotation("int", {}), int)
        self.assertEqual(eval_annotation("typing.Optional[int]", {}), typing.Optional[int])
        self.assertIs(eval_annotation("Color", {"Color": Color}), Color)
        self.assertIs(eval_annotation(" list ", {}), list)  # not an expression: by name
        self.assertEqual(eval_annotation("Nope", {}), "Nope")

    def test_hashable(self):
        self.assertTrue(hashable((1, "a")))
        self.assertFalse(hashable([1]))
        self.assertFalse(hashable((1, [2])))

    def test_made_containers(self):
        self.assertEqual(make_lists([]), [[], [1], [1, 2, 3], [3, 1, 2], [2, 2]])
        self.assertEqual(make_lists(["a"]), [[], ["a"], ["a", "a", "a"], ["a", "a"]])
        self.assertEqual(
            make_rows([1, 2, 3], ["a", "b", "c"]),
            [
                [[2, 3, 1], ["b", "c", "a"]],
                [["b", "c", "a"], [2, 3, 1], [1, 2, 3]],
                [[2, 3, 1]],
                [[2, 3, 1], ["b", "c"]],
                [],
            ],
        )
        self.assertEqual(make_rows([], [])[0], [[2, 3, 1], ["b", "c", "a"]])
        self.assertEqual(make_sets([[1], 2, 3]), [set(), {2}, {2, 3}])
        self.assertEqual(make_sets([]), [set(), {1}, {1, 2, 3}])
        self.assertEqual(make_dicts(["k"], [5]), [{}, {"k": 5}])
        self.assertEqual(make_dicts([], []), [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}])

    def test_off_type_values_are_distinct_texts(self):
        self.assertEqual(len(set(texts(OFF_TYPE_VALUES))), len(OFF_TYPE_VALUES))


if __name__ == "__main__":
    unittest.main()
