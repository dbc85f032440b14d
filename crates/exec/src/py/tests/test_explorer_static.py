"""Tests of r2e_explorer.static: syntax trees, literals, usage hints, doctest and call-site calls,
annotations."""

from __future__ import annotations

import unittest

from r2e_test_support import TempModules

from r2e_explorer.specs import UNKNOWN, New, render
from r2e_explorer.static import (
    body_literals,
    call_site_specs,
    docstring_calls,
    doctest_sources,
    example_programs,
    call_arity,
    function_node,
    global_literals,
    regex_samples,
    type_hints,
    compared_names,
    keyword_names,
    usage_hints,
)

SOURCE = '''
import functools

RATES = {"eur": 1.0, "usd": 1.08}
LIMITS = (3, 7)
UNUSED = {"never": 99}


def convert(amount: float, currency: str = "eur") -> float:
    """Converts an amount; the docstring's "text" is no literal."""
    label: str = f"in {currency}"
    if currency not in RATES:
        raise KeyError(-2)
    return amount * RATES[currency] + 0.5 - 1e3 + LIMITS[0]


def wrap(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@wrap
def decorated(x):
    return x + 41


class Acc:
    """An accumulator.

    >>> obj = Acc(3)
    >>> obj.add(2)
    5
    >>> Acc(1).add(-4, strict=flag)
    -3
    >>> add(
    ...     7)
    """

    def __init__(self, start: int):
        self.total = start

    def add(self, n: "int", strict: "Missing" = False) -> int:
        self.total += n
        return self.total
'''


class StaticTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = TempModules()
        cls.mod = cls.modules.add("r2e_static_sample", SOURCE)

    @classmethod
    def tearDownClass(cls):
        cls.modules.cleanup()

    def test_function_node_finds_the_definition(self):
        node = function_node(self.mod.convert)
        self.assertEqual((node.name, node.lineno), ("convert", 9))
        self.assertEqual(function_node(self.mod.Acc.add).name, "add")
        # A decorated function: its own definition, not the wrapper's.
        unwrapped = self.mod.decorated.__wrapped__
        self.assertEqual(function_node(unwrapped).name, "decorated")
        self.assertIsNone(function_node(len))

    def test_body_literals(self):
        literals = body_literals(function_node(self.mod.convert))
        # Source order, unary minus folded in; no docstring, f-string pieces or annotations.
        self.assertEqual(literals, [-2, 0.5, 1e3, 0])
        self.assertEqual(body_literals(None), [])

    def test_global_literals_of_the_tables_the_body_names(self):
        node = function_node(self.mod.convert)
        found = global_literals(node, vars(self.mod))
        self.assertEqual(found, ["eur", 1.0, "usd", 1.08, 3, 7])
        self.assertNotIn("never", found)
        self.assertEqual(global_literals(node, vars(self.mod), limit=2), ["eur", 1.0])
        self.assertEqual(global_literals(node, None), [])

    def test_global_literals_go_two_levels_deep_into_objects(self):
        class Config:
            def __init__(self):
                self.mode = "fast"
                self.levels = [1, 2]
                self.nested = {"a": {"b": {"c": "too deep"}}}

        import ast

        node = ast.parse("def f():\n    return CONFIG.mode\n").body[0]
        found = global_literals(node, {"CONFIG": Config()})
        # Scalars are taken at any level reached; containers below the second level are not
        # opened.
        self.assertEqual(found, ["fast", 1, 2, "a", "b"])

    def test_compared_names(self):
        import ast

        node = ast.parse(
            "def f(p, q):\n"
            "    if p is MISSING or p == int:\n"
            "        return 1\n"
            "    if p in (str, bytes) and q is not None:\n"
            "        return 2\n"
            "    return p < LIMIT\n"
        ).body[0]
        self.assertEqual(compared_names(node, "p"), ["MISSING", "int", "str", "bytes"])
        self.assertEqual(compared_names(node, "q"), [])
        self.assertEqual(compared_names(None, "p"), [])

    def test_keyword_names(self):
        import ast

        node = ast.parse(
            "def f(a, **kw):\n"
            "    x = kw.get('alpha', kw.get('beta'))\n"
            "    if 'gamma' in kw or kw['delta'] or kw.pop('alpha'):\n"
            "        return other.get('nope')\n"
            "    return kw.get(name), kw.get('not an identifier')\n"
        ).body[0]
        self.assertEqual(keyword_names(node, "kw"), ["alpha", "beta", "gamma", "delta"])
        self.assertEqual(keyword_names(node, "a"), [])
        self.assertEqual(keyword_names(None, "kw"), [])

    def test_usage_hints(self):
        import ast

        def hints(body: str, name: str = "p"):
            return usage_hints(ast.parse(f"def f(p, q):\n{body}").body[0], name)

        self.assertEqual(hints("    return p.split()"), [str])
        self.assertEqual(hints("    for k, v in p.items():\n        pass"), [dict])
        self.assertEqual(hints("    for x in p:\n        pass"), ["seq"])
        self.assertEqual(hints("    return p < 10"), [int])
        self.assertEqual(hints("    return p * 2.5 + q"), [float])
        self.assertEqual(hints("    return '%s' % p"), [])
        self.assertEqual(hints("    return len(p) + p[0]"), ["seq"])
        self.assertEqual(hints("    return range(p)"), [int])
        # Another class: by name, for the pools to construct.
        self.assertEqual(
            hints("    return isinstance(p, (list, tuple, Foo))"), [list, ("class", "Foo"), tuple]
        )
        # Methods of a type say more than comparisons: they come first.
        self.assertEqual(hints("    if p == 3:\n        p.append(1)"), [list, int])
        self.assertEqual(hints("    return q.upper()"), [])
        self.assertEqual(usage_hints(None, "p"), [])
        # A type checked of an item: a sequence of such values.
        self.assertEqual(hints("    if p and isinstance(p[0], dict):\n        pass"), [("items", dict), "seq"])
        # Unpacked into a call's arguments: its items are arguments.
        self.assertEqual(hints("    return list(zip(*p))"), ["unpacked"])
        self.assertEqual(hints("    return g(q, *p)"), ["unpacked"])
        self.assertEqual(hints("    return g(*q)"), [])
        # Being called says the most.
        self.assertEqual(hints("    return sorted(q, key=lambda x: p(x)) + p[0]"), ["callable", "seq"])

    def test_call_arity(self):
        import ast

        def arity(body: str):
            return call_arity(ast.parse(f"def f(p, q):\n{body}").body[0], "p")

        self.assertEqual(arity("    return p(q, 1)"), 2)
        self.assertEqual(arity("    return p(*q) + p(q)"), 1)
        self.assertEqual(arity("    return p()"), 0)
        self.assertIsNone(arity("    return p(*q)"))
        self.assertIsNone(arity("    return q(p)"))
        self.assertIsNone(call_arity(None, "p"))

    def test_regex_samples(self):
        import re

        # The first choices first (fewest repeats, first alternative, first class member),
        # then the last ones, then others; each one a string the pattern finds.
        self.assertEqual(regex_samples(r"&#x([\da-fA-F]+);"), ["&#x0;", "&#xBBB;", "&#x11;"])
        self.assertEqual(regex_samples(r"(?<=\d),(?=\d)"), ["0,0", "2,2", "1,1"])
        self.assertEqual(regex_samples(r"[^-a-zA-Z0-9]+"), [" ", "   ", "  "])
        self.assertEqual(regex_samples(re.compile(r"&(amp|lt);")), ["&amp;", "&lt;"])
        self.assertEqual(regex_samples(r"-{2,}"), ["--", "----", "---"])
        self.assertEqual(regex_samples(r"(a)\1"), ["aa"])  # a back reference repeats its group
        self.assertEqual(regex_samples(r"(unbalanced"), [])
        self.assertEqual(regex_samples(re.compile(rb"byt[e]s?")), [b"byte", b"bytes"])
        # Nested repeats are abandoned as soon as the string passes 80 characters.
        self.assertEqual(regex_samples(r"(?:(?:a{100}){100}){100}"), [])
        self.assertEqual(regex_samples(r"[^\x00-\x7f]"), [])
        iso = re.compile(r"\AT?(?P<h>[0-9]{2}):(?P<m>[0-9]{2})(?P<tz>Z|[+-][0-9]{2})?\Z")
        made = regex_samples(iso, count=6)
        self.assertEqual(len(made), 6)
        self.assertTrue(all(iso.match(s) for s in made), made)
        # Optional parts are both left out and taken.
        self.assertTrue(any(s[-3] in "+-" for s in made), made)
        self.assertTrue(any(s[-3] == ":" for s in made), made)

    def test_regular_expressions_give_literals(self):
        import ast
        import re

        node = ast.parse(
            "def f(s):\n    return re.sub(r'\\d+', '', PATTERN.sub('', s))\n"
        ).body[0]
        self.assertEqual(body_literals(node), ["\\d+", "", "0", "222", "11"])
        found = global_literals(node, {"PATTERN": re.compile(r"&(amp|lt);"), "re": re})
        self.assertEqual(found, ["&amp;", "&lt;"])

    def test_date_formats_give_the_dates_they_write(self):
        import ast

        node = ast.parse(
            "def f(s, fmt='%d/%m/%Y'):\n    return parse(s, '%H:%M'), '100%', 3\n"
        ).body[0]
        # The default's date first, each body format's right after it; '100%' has no directive.
        self.assertEqual(body_literals(node), ["02/01/2024", "%H:%M", "03:04", "100%", 3])

    def test_examples_are_whole_programs_from_sessions_literal_blocks_and_fences(self):
        doc = "\n".join(
            [
                "Registers an action.",
                "",
                ">>> r = Registry()",
                ">>> register(r)",
                ">>> r.fire(",
                "...     4)",
                "[8]",
                "",
                "Example::",
                "",
                "    r = Registry()",
                "    register(r, twice=True)",
                "",
                "    print(r.fire(2))",
                "",
                "prints::",
                "",
                "    [8] and some words",
                "",
                "A block that does not call it::",
                "",
                "    r = Registry()",
                "",
                "An import is left out::",
                "",
                "    import os",
                "    register(os)",
                "",
                "```python",
                "register(Registry(), twice=False)",
                "```",
            ]
        )
        self.assertEqual(
            example_programs([doc], "register", method=False),
            [
                "r = Registry()\nregister(r)\nr.fire(\n    4)",
                "r = Registry()\nregister(r, twice=True)\n\nprint(r.fire(2))",
                "register(Registry(), twice=False)",
            ],
        )
        # A method's examples call it as an attribute.
        self.assertEqual(example_programs([doc], "fire", method=True)[:1], [
            "r = Registry()\nregister(r)\nr.fire(\n    4)"
        ])
        self.assertEqual(example_programs([doc], "Registry", method=True), [])
        self.assertEqual(example_programs([None, ""], "register", method=False), [])

    def test_doctest_sources_join_continuation_lines(self):
        doc = ">>> a = 1\n>>> f(\n...     a)\n2\ntext\n>>> g()"
        self.assertEqual(list(doctest_sources(doc)), ["a = 1", "f(\n    a)", "g()"])

    def test_docstring_calls_of_a_method_with_its_constructions(self):
        calls, ctors = docstring_calls([self.mod.Acc.__doc__], {"add"}, "Acc", self.mod)
        self.assertEqual(ctors, [([3], {}), ([1], {})])
        (ctor1, call1), (ctor2, call2), (ctor3, call3) = calls
        self.assertEqual((ctor1, call1), (([3], {}), ([2], {})))
        self.assertEqual(ctor2, ([1], {}))
        self.assertEqual(call2[0], [-4])
        self.assertIs(call2[1]["strict"], UNKNOWN)
        self.assertEqual((ctor3, call3), (None, ([7], {})))

    def test_docstring_calls_of_a_function(self):
        doc = ">>> convert(10, 'usd')\n>>> other(1)\n>>> convert(*xs)\n>>> convert(Acc(2))"
        calls, ctors = docstring_calls([doc, None, ""], {"convert"}, None, self.mod)
        self.assertEqual(ctors, [])
        self.assertEqual(calls[0], (None, ([10, "usd"], {})))
        # A constructor call of a reference class is a spec too.
        self.assertEqual(render(calls[1][1][0][0]), "reference.Acc(2)")
        self.assertIsInstance(calls[1][1][0][0], New)
        self.assertEqual(len(calls), 2)

    def test_call_site_specs(self):
        args, kwargs = call_site_specs(
            {"args": ["'a b'", " 3 ", "some_variable"], "kwargs": {"width": "10"}}, self.mod
        )
        self.assertEqual(args[:2], ["a b", 3])
        self.assertIs(args[2], UNKNOWN)
        self.assertEqual(kwargs, {"width": 10})
        self.assertEqual(call_site_specs({}, self.mod), ([], {}))
        self.assertIs(call_site_specs({"args": ["(("]}, self.mod)[0][0], UNKNOWN)
        self.assertIsNone(call_site_specs({"kwargs": ["not", "a", "dict"]}, self.mod))

    def test_type_hints(self):
        self.assertEqual(
            type_hints(self.mod.convert), {"amount": float, "currency": str, "return": float}
        )
        # An annotation naming something unknown: all of them as written.
        self.assertEqual(
            type_hints(self.mod.Acc.add), {"n": "int", "strict": "Missing", "return": int}
        )
        self.assertEqual(type_hints(len), {})


if __name__ == "__main__":
    unittest.main()
