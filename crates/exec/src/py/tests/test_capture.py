"""Tests of r2e_capture.py, run as a script (as the Rust side runs it) on a small package with its
own unittest tests; the values it captures are read back as the explorer reads them."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from r2e_test_support import PY_DIR

CAPTURE = os.path.join(PY_DIR, "r2e_capture.py")

FILES = {
    "shop/__init__.py": "",
    "shop/core.py": '''
        import re

        RULES = {"word": re.compile(r"[a-z]+"), "num": re.compile(r"[0-9]+")}
        WORD = re.compile(r"(\\w+)@(\\w+)")


        class Cart:
            def __init__(self, owner, *, rules):
                self.owner = owner
                self.rules = rules
                self.items = []

            def add(self, name, count=1):
                """Adds an item."""
                self.items.append((name, count))
                return len(self.items)


        def total(cart, *extra, scale=1, **named):
            """The number of items in a cart."""
            return scale * (sum(c for _, c in cart.items) + sum(extra) + sum(named.values()))


        def host(m, data):
            """The host of a match."""
            return m.group(2) + data[m.end():]


        def callback(fn):
            """Calls fn."""
            return fn()


        def sign(n):
            """The sign of n."""
            if n < 0:
                return -1
            if n == 0:
                return 0
            return 1


        def spin(n):
            """Loops."""
            while n:
                pass
            return n


        def short(u):
            """The first eight digits of an id."""
            return u.hex[:8]
    ''',
    "tests/test_shop.py": '''
        import unittest

        from shop.core import RULES, WORD, Cart, callback, host, total


        class TestShop(unittest.TestCase):
            def test_total(self):
                cart = Cart("ann", rules=RULES)
                cart.add("pear", 2)
                cart.add("fig")
                self.assertEqual(total(cart, 1, scale=2, bonus=3), 14)

            def test_host(self):
                data = "mail bob@host rest"
                self.assertEqual(host(WORD.search(data), data), "host rest")
                for m in WORD.finditer("a@b c@d e"):
                    host(m, "a@b c@d e")

            def test_callback(self):
                self.assertEqual(callback(lambda: 3), 3)


        def test_plain():
            total(Cart("bo", rules=RULES))
    ''',
    "tests/test_signs.py": '''
        from shop.core import sign


        def test_signs():
            for n in range(1, 12):
                assert sign(n) == 1
            assert sign(0) == 0
            for n in range(-7, 0):
                assert sign(n) == -1
    ''',
    "tests/test_words.py": '''
        from shop.core import sign


        WORDS = {"sheep", "fish", "rice", "jeans", "money", "series", "species", "news"}


        def test_words():
            for word in WORDS:
                sign(len(word) - 5)
    ''',
    "tests/test_ids.py": '''
        import random
        import secrets
        import uuid

        from shop.core import short, sign


        def test_ids():
            short(uuid.uuid4())
            short(uuid.UUID(secrets.token_hex(16)))
            short(uuid.uuid4())
            sign(random.random() - 0.5)
            sign(random.SystemRandom().random() - 0.5)
    ''',
    "shop/parse.py": '''
        def _replaced(name):
            def inner(self, *args, **kwargs):
                return getattr(self, name)(*args, **kwargs)

            return inner


        class Counted:
            def __init__(self, item):
                self.item = item

            def parse(self, text, start=0):
                return [self.item] * self._count(text.split()[start:])

            def _count(self, words):
                return int(words[0])

            parseString = _replaced("parse")
            scanString = _replaced("parse")
            read = parse


        def counted(item):
            """A parser of a count and that many items."""
            return Counted(item)


        def group(*parts):
            """The parts, in a list."""
            return list(parts)


        def pair(a, b):
            """Two parsers."""
            return counted(a), counted(b)
    ''',
    "tests/test_parse.py": '''
        from shop.parse import counted, group, pair


        def test_counted():
            assert counted("x").parse("2 a b") == ["x", "x"]
            words = counted("w")
            assert words.parseString("1 a") == ["w"]
            assert words.parse("a 0", start=1) == []
            for text in ("3 a b c", "4 a b c d", "5", "6", "7"):
                words.parse(text)
            assert group(counted("y")) is not None
            counted(lambda: 1).parse("1 z")
            first, second = pair("p", "q")
            assert second.parse("1 b") == ["q"]
            assert first.read("1 b") == ["p"]
    ''',
    "tests/test_zzz_spin.py": '''
        from shop.core import spin


        def test_spin():
            spin(1)
    ''',
}


def run_capture(scratch, request):
    """`r2e_capture.py` (copied into `scratch`) on `request`, in a child: its answer."""
    req = os.path.join(scratch, "request.json")
    out = os.path.join(scratch, "out.json")
    with open(req, "w", encoding="utf-8") as f:
        json.dump(request, f)
    subprocess.run(
        [sys.executable, "-I", os.path.join(scratch, "r2e_capture.py"), req, out],
        check=True,
        timeout=120,
        stdout=subprocess.DEVNULL,
    )
    with open(out, encoding="utf-8") as f:
        return json.load(f)


class CaptureTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="r2e-capture-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        for rel, text in FILES.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text).lstrip())
        self.scratch = tempfile.mkdtemp(prefix="r2e-capture-scratch-")
        self.addCleanup(shutil.rmtree, self.scratch, ignore_errors=True)
        for name in ("r2e_capture.py", "r2e_equiv.py", "r2e_limit.py", "r2e_reexec.py", "r2e_snapshot.py"):
            shutil.copy(os.path.join(PY_DIR, name), self.scratch)

    def capture(self, targets, tests, time_limit=20, per_target=8):
        request = {
            "repo_root": self.root,
            "extra_roots": [],
            "tests": [os.path.join(self.root, t) for t in tests],
            "targets": [{"module": m, "qualname": q, "kind": k} for m, q, k in targets],
            "per_target": per_target,
            "max_bytes": 8192,
            "time_limit": time_limit,
        }
        return run_capture(self.scratch, request)

    def load(self, text):
        """The value of a captured text, in a fresh interpreter that imports the package (as a
        harness does), described by `describe`."""
        script = textwrap.dedent("""
            import sys
            sys.path[0:0] = [sys.argv[1], sys.argv[2]]
            import r2e_equiv, shop.core
            value = eval(sys.argv[3], {"r2e_equiv": r2e_equiv})
            if isinstance(value, shop.core.Cart):
                print(repr(("cart", value.owner, value.items, value.rules is shop.core.RULES)))
            elif type(value).__name__ == "Match":
                print(repr(("match", value.span(), value.groups(), value.string)))
            else:
                print(repr(value))
        """)
        out = subprocess.run(
            [sys.executable, "-I", "-c", script, self.root, self.scratch, text],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return ast.literal_eval(out.stdout.strip())

    def test_arguments_are_captured_as_they_were_on_entry(self):
        out = self.capture(
            [
                ("shop.core", "total", "function"),
                ("shop.core", "Cart.add", "method"),
                ("shop.core", "host", "function"),
                ("shop.core", "callback", "function"),
            ],
            ["tests/test_shop.py"],
        )
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["runner"], "unittest")
        totals, adds, hosts, callbacks = out["calls"]
        # total(cart, 1, scale=2, bonus=3): the cart as it was, *extra spread, **named by name.
        call = totals[0]
        self.assertEqual(len(call["args"]), 2, call)
        self.assertIn("r2e_equiv.loads(", call["args"][0])
        self.assertEqual(call["args"][1], "1")
        self.assertEqual(call["kwargs"], {"scale": "2", "bonus": "3"})
        # The cart's rules are the module's table, by name, not a copy.
        self.assertEqual(
            self.load(call["args"][0]), ("cart", "ann", [("pear", 2), ("fig", 1)], True)
        )
        # The plain test function ran too (a cart with nothing in it).
        self.assertEqual(self.load(totals[1]["args"][0]), ("cart", "bo", [], True))
        # A method's receiver is recorded apart, as it was when the method was called (empty,
        # then with the pear); literals are written as literals.
        self.assertEqual(
            [(c["args"], c["kwargs"]) for c in adds], [(["'pear'", "2"], {}), (["'fig'", "1"], {})]
        )
        self.assertEqual(
            [self.load(c["receiver"]) for c in adds],
            [("cart", "ann", [], True), ("cart", "ann", [("pear", 2)], True)],
        )
        # A match is rebuilt by the search or match that finds it again.
        self.assertEqual(
            [self.load(c["args"][0]) for c in hosts],
            [
                ("match", (5, 13), ("bob", "host"), "mail bob@host rest"),
                ("match", (0, 3), ("a", "b"), "a@b c@d e"),
                ("match", (4, 7), ("c", "d"), "a@b c@d e"),
            ],
        )
        # A lambda does not rebuild: that call is not kept.
        self.assertEqual(callbacks, [])

    def test_what_the_tests_did_with_a_returned_value_is_kept(self):
        out = self.capture(
            [
                ("shop.parse", "counted", "function"),
                ("shop.parse", "group", "function"),
                ("shop.parse", "pair", "function"),
            ],
            ["tests/test_parse.py"],
        )
        self.assertEqual(out["status"], "ok", out)
        counted, groups, pairs = out["calls"]
        # An item of a returned pair is watched too, its use named by its place; a method of
        # two names by the one the caller spelled.
        self.assertEqual(
            pairs[0]["then"],
            [
                {"method": "[1].parse", "args": ["'1 b'", "0"], "kwargs": {}},
                {"method": "[0].read", "args": ["'1 b'", "0"], "kwargs": {}},
            ],
            out,
        )
        self.assertEqual([c["args"] for c in counted][:3], [["'x'"], ["'w'"], ["'y'"]], out)
        # The calls of the returned parser's methods, as the call's "then": not `_count`, which
        # `parse` makes; `parseString`, an alias that two names share, is known by the method
        # it calls. At most USES per target, distinct.
        self.assertEqual(
            counted[0]["then"], [{"method": "parse", "args": ["'2 a b'", "0"], "kwargs": {}}]
        )
        self.assertEqual(
            counted[1]["then"],
            [
                {"method": "parse", "args": ["'1 a'", "0"], "kwargs": {}},
                {"method": "parse", "args": ["'a 0'", "1"], "kwargs": {}},
                {"method": "parse", "args": ["'3 a b c'", "0"], "kwargs": {}},
            ],
        )
        # The fourth use was the last kept; `y` was never parsed; a lambda's call is not kept,
        # nor what was done with its value. A list's methods are not watched.
        self.assertNotIn("then", counted[2])
        self.assertNotIn("then", groups[0])

    def test_calls_that_reach_other_branches_take_the_slots_of_alike_ones(self):
        out = self.capture([("shop.core", "sign", "function")], ["tests/test_signs.py"], per_target=4)
        self.assertEqual(out["status"], "ok", out)
        # The first four calls fill the slots; 0 and the first negative number reach arcs no
        # kept call reached and replace the latest alike ones; later negatives reach none new.
        self.assertEqual([c["args"] for c in out["calls"][0]], [["1"], ["2"], ["0"], ["-7"]])

    def test_a_set_iterates_in_one_order_whatever_the_hash_seed(self):
        # `-I` ignores PYTHONHASHSEED: the capture re-executes itself with a fixed one, so a
        # test that loops over a set of strings passes its values in one order on every run.
        runs = []
        for seed in ("1", "2", "3", "random"):
            os.environ["PYTHONHASHSEED"] = seed
            try:
                out = self.capture([("shop.core", "sign", "function")], ["tests/test_words.py"])
            finally:
                del os.environ["PYTHONHASHSEED"]
            self.assertEqual(out["status"], "ok", out)
            runs.append([c["args"] for c in out["calls"][0]])
        self.assertEqual(runs[1:], runs[:1] * 3, runs)

    def test_the_tests_random_values_are_the_same_on_every_run(self):
        # uuid4 and secrets read os.urandom, SystemRandom too: the capture serves them, and
        # random's own generator, from seeded generators, so the calls it keeps (and the
        # harnesses written from them) are the same on every build.
        runs = []
        for _ in range(3):
            out = self.capture(
                [("shop.core", "short", "function"), ("shop.core", "sign", "function")],
                ["tests/test_ids.py"],
            )
            self.assertEqual(out["status"], "ok", out)
            runs.append(out["calls"])
        self.assertEqual(runs[1:], runs[:1] * 2, runs)
        shorts, signs = runs[0]
        self.assertEqual(len(shorts), 3, shorts)
        self.assertEqual(len(signs), 2, signs)
        # Still draws: no two ids alike.
        self.assertEqual(len({c["args"][0] for c in shorts}), 3, shorts)

    def test_the_time_limit_keeps_what_was_recorded(self):
        out = self.capture(
            [("shop.core", "total", "function"), ("shop.core", "spin", "function")],
            ["tests/test_shop.py", "tests/test_zzz_spin.py"],
            time_limit=3,
        )
        self.assertEqual(out["status"], "ok", out)
        self.assertTrue(out["time_limit_hit"], out)
        self.assertEqual(len(out["calls"][0]), 2, out)
        self.assertEqual(out["calls"][1], [{"args": ["1"], "kwargs": {}}])

    def test_no_target_imports_no_tests_run(self):
        out = self.capture([("shop.missing", "f", "function")], ["tests/test_shop.py"])
        self.assertEqual(out, {**out, "status": "ok", "runner": "none", "calls": [[]]})


class ExplorerReadsCapturedValues(unittest.TestCase):
    def test_a_loaded_text_is_a_spec_that_renders_and_builds(self):
        sys.path.insert(0, PY_DIR)
        import pickle

        import r2e_equiv  # noqa: F401 - specs.build finds it in sys.modules
        from r2e_explorer import specs, static

        data = pickle.dumps({"a": [1, 2]}, protocol=4)
        site = {"args": [f"r2e_equiv.loads({data!r})", "3"], "kwargs": {}}
        args, kwargs = static.call_site_specs(site, None)
        self.assertIsInstance(args[0], specs.Loaded)
        self.assertEqual(args[1], 3)
        self.assertEqual(specs.render(args[0]), f"r2e_equiv.loads({data!r})")
        built = specs.build(args[0], None)
        self.assertEqual(built, {"a": [1, 2]})
        self.assertIsNot(built, specs.build(args[0], None))
        # Anything else spelled like it is not a captured value.
        bad = {"args": ["r2e_equiv.loads('text')"], "kwargs": {}}
        self.assertIs(static.call_site_specs(bad, None)[0][0], specs.UNKNOWN)

    def test_a_builtin_class_is_written_by_its_name(self):
        sys.path.insert(0, PY_DIR)
        import r2e_capture
        from r2e_explorer import specs, static

        encoder = r2e_capture.Encoder(8192)
        self.assertEqual([encoder.text(t) for t in (int, str, bytes)], ["int", "str", "bytes"])
        (arg, name), _ = static.call_site_specs({"args": ["int", "print"], "kwargs": {}}, None)
        self.assertEqual((specs.render(arg), specs.build(arg, None)), ("int", int))
        # Only a class: a builtin function is not a value a call site is read as.
        self.assertIs(name, specs.UNKNOWN)

    def test_a_value_holding_a_folder_of_this_machine_is_not_written(self):
        sys.path.insert(0, PY_DIR)
        import pathlib

        import r2e_capture

        machine = r2e_capture.machine_folders(["/srv/repo"])
        encoder = r2e_capture.Encoder(8192, (), machine)
        here = "/srv/repo/tests/data.txt"

        class Box:
            def __init__(self, inner):
                self.inner = inner

        class Slotted:
            __slots__ = ("where",)

            def __init__(self, where):
                self.where = where

        tmp = tempfile.gettempdir()
        for value in (
            pathlib.Path(here),
            pathlib.PurePosixPath(tmp),
            f"copied to {tmp}/x",
            os.fsencode(here),
            {"files": [(1, pathlib.Path(here))]},
            Box(Box(pathlib.PurePath(os.path.expanduser("~")))),
            Slotted(here),
        ):
            with self.subTest(value=repr(value)):
                self.assertIsNone(encoder.text(value))
        # A relative path, or a folder of no machine, is written (a pickle, a literal).
        self.assertIn("r2e_equiv.loads(", encoder.text(pathlib.PurePosixPath("docs/readme.md")))
        self.assertEqual(encoder.text({"root": "tmp"}), "{'root': 'tmp'}")


if __name__ == "__main__":
    unittest.main()


# A stand-in for pytest in the project's folder (first on the import path), for the second
# mode: it runs each `path::function` given, reports each test to the plugin as pytest does,
# and ends its session on an interrupt as pytest does.
FAKE_PYTEST = '''
import importlib.util, os, types

def main(args, plugins=None):
    plugin = (plugins or [None])[0]
    root = os.path.dirname(os.path.abspath(__file__))
    try:
        for arg in args:
            if "::" not in arg:
                continue
            path, name = arg.split("::", 1)
            spec = importlib.util.spec_from_file_location("t_" + name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            try:
                getattr(module, name)()
                failed = False
            except Exception:
                failed = True
            nodeid = os.path.relpath(path, root) + "::" + name
            plugin.pytest_runtest_logreport(types.SimpleNamespace(failed=failed, nodeid=nodeid))
    except KeyboardInterrupt:
        return 2
    return 0
'''


class ProjectTestsTest(unittest.TestCase):
    """The second mode: the given tests on states of one module, each state served as the
    module's import."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="r2e-projtests-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        files = {
            "pytest.py": FAKE_PYTEST,
            "calc.py": "def double(x):\n    return 2 * x\n",
            "tests/test_calc.py": (
                "import calc\n\n\ndef test_double():\n    assert calc.double(2) == 4\n\n\n"
                "def test_other():\n    assert 1 + 1 == 2\n"
            ),
        }
        for rel, text in files.items():
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        self.scratch = tempfile.mkdtemp(prefix="r2e-projtests-scratch-")
        self.addCleanup(shutil.rmtree, self.scratch, ignore_errors=True)
        for name in ("r2e_capture.py", "r2e_equiv.py", "r2e_limit.py", "r2e_reexec.py", "r2e_snapshot.py"):
            shutil.copy(os.path.join(PY_DIR, name), self.scratch)

    def test_each_state_is_the_modules_import_and_a_stopped_one_has_no_answer(self):
        both = ["tests/test_calc.py::test_double", "tests/test_calc.py::test_other"]
        request = {
            "repo_root": self.root,
            "extra_roots": [],
            "module": "calc",
            "states": [
                {"text": None, "tests": both},
                {"text": "def double(x):\n    return x + x + 1\n", "tests": both},
                {"text": "def double(x):\n    while True:\n        pass\n", "tests": both},
                # Each state runs its own tests: this one, only the test the bug cannot reach.
                {"text": "def double(x):\n    return 0\n", "tests": both[1:]},
            ],
            "time_limit": 2,
        }
        answer = run_capture(self.scratch, request)
        self.assertEqual(answer["status"], "ok", answer)
        self.assertEqual(answer["runner"], "pytest")
        # The file as it is passes; the broken state fails the test that calls it; the state
        # whose test the limit stopped has no answer, not the tests that got to run; the last
        # state's one test passes.
        self.assertEqual(answer["failed"], [[], ["tests/test_calc.py::test_double"], None, []])

    def test_a_broken_state_may_run_a_few_times_as_long_as_the_module(self):
        stuck = "def double(x):\n    while True:\n        pass\n"
        request = {
            "repo_root": self.root,
            "extra_roots": [],
            "module": "calc",
            "states": [
                {"text": None, "tests": ["tests/test_calc.py::test_double"]},
                {"text": stuck, "tests": ["tests/test_calc.py::test_double"]},
            ],
            "time_limit": 300,
        }
        answer = run_capture(self.scratch, request)
        self.assertEqual(answer["failed"], [[], None], answer)
        whole, broken = answer["limits"]
        self.assertEqual(whole, 300)
        # The module's own run took well under a minute here: the stuck state was stopped
        # after a few times that (5 s more than 3 times it), not after the whole limit.
        self.assertLess(broken, 300)
        self.assertGreaterEqual(broken, 5)
        # Without the module's own run first, a state gets the whole limit.
        request["states"] = [
            {"text": "def double(x):\n    return x + x\n", "tests": ["tests/test_calc.py::test_double"]}
        ]
        request["time_limit"] = 7
        self.assertEqual(run_capture(self.scratch, request)["limits"], [7])
