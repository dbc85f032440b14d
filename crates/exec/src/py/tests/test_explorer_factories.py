"""Tests of r2e_explorer.factories (the project's factories of its own classes), of
static.attribute_names, of specs under the package root (`reference_package.path_graph(4)`)
and of the explorer using them end to end."""

from __future__ import annotations

import ast
import importlib
import os
import sys
import textwrap
import unittest

from r2e_test_support import SampleRepo

from r2e_explorer.factories import Factories, _args_for
from r2e_explorer.render import render_harness
from r2e_explorer.search import Entry
from r2e_explorer.specs import UNKNOWN, New, build, render, resolve_factory, spec_from_node
from r2e_explorer.static import attribute_names, docstring_calls

PACKAGE = "r2egraphpkg"

FILES = {
    "__init__.py": """
        from r2egraphpkg.core import Graph, Marker, cycle_graph, path_graph, star, summary
        from r2egraphpkg.algorithms import Walker, degree_sum
    """,
    "core.py": '''
        _TOKEN = object()


        class Graph:
            """An undirected graph: build one with path_graph or cycle_graph."""

            def __init__(self, token):
                if token is not _TOKEN:
                    raise TypeError("use a factory")
                self.adj = {}

            def add_edge(self, u, v):
                self.adj.setdefault(u, set()).add(v)
                self.adj.setdefault(v, set()).add(u)

            @property
            def nodes(self):
                return sorted(self.adj)

            def neighbors(self, n):
                return sorted(self.adj[n])


        class Marker:
            def __init__(self, label=""):
                self.label = label


        def path_graph(n):
            """Returns the path graph on n nodes."""
            g = Graph(_TOKEN)
            for i in range(n - 1):
                g.add_edge(i, i + 1)
            return g


        def cycle_graph(n) -> "Graph":
            g = path_graph(n)
            g.add_edge(n - 1, 0)
            return g


        def star(n):
            """A Graph shaped like a star (named by its docstring only)."""
            g = Graph(_TOKEN)
            for i in range(1, n):
                g.add_edge(0, i)
            return g


        def summary(G) -> str:
            """Describes a Graph (returns a str: not a factory)."""
            return str(G.nodes)


        def broken_graph(n):
            raise ValueError("never builds")
    ''',
    "algorithms.py": """
        def degree_sum(G):
            return sum(len(G.neighbors(n)) for n in G.nodes)


        class Walker:
            def __init__(self, G):
                self.G = G

            def first(self):
                return self.G.nodes[0]
    """,
}


def write_package(root: str):
    folder = os.path.join(root, PACKAGE)
    os.makedirs(folder, exist_ok=True)
    for name, text in FILES.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text).lstrip())


class FactoriesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.repo = SampleRepo()
        write_package(cls.repo.repo)
        sys.path.insert(0, cls.repo.repo)
        cls.algorithms = importlib.import_module(f"{PACKAGE}.algorithms")
        cls.core = importlib.import_module(f"{PACKAGE}.core")

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.repo.repo)
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        cls.repo.cleanup()

    def factories(self, hint=""):
        probes = []

        def probe(spec):
            probes.append(render(spec))
            return build(spec, self.algorithms)

        return Factories(self.algorithms, probe, hint), probes

    def test_factories_of_a_class_the_module_does_not_name(self):
        factories, probes = self.factories()
        found = factories.for_class(self.core.Graph)
        # The return annotation first, then names containing the class's, then docstrings;
        # a function annotated with another return type is no candidate (never probed).
        self.assertEqual(
            [render(s) for s in found],
            [
                "reference_package.cycle_graph(4)",
                "reference_package.path_graph(4)",
                "reference_package.star(4)",
            ],
        )
        self.assertFalse(any("summary" in p for p in probes), probes)
        # broken_graph is private to core (not exported): never tried.
        self.assertFalse(any("broken_graph" in p for p in probes), probes)
        # Cached: the second call probes nothing.
        before = len(probes)
        self.assertEqual(factories.for_class(self.core.Graph), found)
        self.assertEqual(len(probes), before)

    def test_the_targets_docstring_names_the_factories_to_try_first(self):
        factories, _ = self.factories(">>> degree_sum(star(5))")
        found = factories.for_class(self.core.Graph)
        self.assertEqual(render(found[0]), "reference_package.star(4)")

    def test_specs_build_instances_in_the_package(self):
        spec = New("path_graph", (3,), (), "package")
        self.assertEqual(render(spec), "reference_package.path_graph(3)")
        graph = build(spec, self.algorithms)
        self.assertIsInstance(graph, self.core.Graph)
        self.assertEqual(graph.nodes, [0, 1, 2])
        # Fresh values every time; a spec under the reference module differs from it.
        self.assertIsNot(build(spec, self.algorithms), graph)
        self.assertNotEqual(spec, New("path_graph", (3,)))

    def test_factory_calls_in_source_become_specs(self):
        def spec(text):
            return render(spec_from_node(ast.parse(text, mode="eval").body, self.algorithms))

        # Exported by the package (the module does not name it), or named through the module.
        self.assertEqual(spec("path_graph(3)"), "reference_package.path_graph(3)")
        self.assertEqual(spec("r2egraphpkg.path_graph(3)"), "reference_package.path_graph(3)")
        self.assertEqual(resolve_factory(self.core, "path_graph"), ("path_graph", "reference"))
        # Private functions, functions the package does not export and other packages' are not.
        self.assertEqual(resolve_factory(self.algorithms, "broken_graph"), (None, None))
        self.assertEqual(resolve_factory(self.algorithms, "_TOKEN"), (None, None))
        self.assertEqual(resolve_factory(self.algorithms, "os.getcwd"), (None, None))
        with self.assertRaises(ValueError):
            spec_from_node(ast.parse("getcwd()", mode="eval").body, self.algorithms)

    def test_the_target_is_no_factory_of_its_own_inputs(self):
        # A check runs the candidate in the target's place: a value the target built would be
        # the candidate's own output. With path_graph the target, it builds nothing.
        from r2e_explorer import specs

        specs.NOT_FACTORIES[:] = [self.core.path_graph]
        try:
            factories, probes = self.factories()
            found = [render(s) for s in factories.for_class(self.core.Graph)]
            self.assertNotIn("reference_package.path_graph(4)", found)
            self.assertIn("reference_package.cycle_graph(4)", found)
            self.assertFalse(any("path_graph" in p for p in probes), probes)
            self.assertEqual(resolve_factory(self.core, "path_graph"), (None, None))
            with self.assertRaises(ValueError):
                spec_from_node(ast.parse("path_graph(3)", mode="eval").body, self.algorithms)
        finally:
            specs.NOT_FACTORIES[:] = []

    def test_a_doctest_sessions_values_reach_the_calls(self):
        doc = """
            >>> G = path_graph(4)
            >>> degree_sum(G)
            6
            >>> H = G
            >>> degree_sum(H, 2)
        """
        calls, _ = docstring_calls([textwrap.dedent(doc)], {"degree_sum"}, None, self.algorithms)
        self.assertEqual(len(calls), 2)
        self.assertEqual(render(calls[0][1][0][0]), "reference_package.path_graph(4)")
        # `H = G` is no rebuildable value: the argument is unknown (it takes the base value).
        self.assertIs(calls[1][1][0][0], UNKNOWN)
        self.assertEqual(calls[1][1][0][1], 2)

    def test_classes_with_the_attributes_a_parameter_uses(self):
        factories, _ = self.factories()
        self.assertEqual(factories.classes_with(["neighbors", "nodes"]), [self.core.Graph])
        # `adj` is set in the constructor only: it counts.
        self.assertEqual(factories.classes_with(["adj"]), [self.core.Graph])
        self.assertEqual(factories.classes_with(["label"]), [self.core.Marker])
        self.assertEqual(factories.classes_with(["nodes", "label"]), [])
        self.assertEqual(factories.classes_with([]), [])

    def test_probe_arguments_fit_the_signature(self):
        def none():
            pass

        def one(n, m=2):
            pass

        def three(a, b, c):
            pass

        def many(*args):
            pass

        self.assertEqual(_args_for(none), [()])
        self.assertEqual(_args_for(one), [(4,), (3, 3)])
        self.assertEqual(_args_for(three), [(3, 2, 2)])
        self.assertEqual(_args_for(many), [(), (4,)])


class AttributeNamesTest(unittest.TestCase):
    def names(self, source, param):
        return attribute_names(ast.parse(textwrap.dedent(source)).body[0], param)

    def test_attributes_no_builtin_value_has(self):
        src = """
            def f(G, s):
                G.add_edge(1, 2)
                for n in G.nodes:
                    s.split()
                return G.copy(), G.adj[0]
        """
        self.assertEqual(self.names(src, "G"), ["add_edge", "adj", "nodes"])
        self.assertEqual(self.names(src, "s"), [])

    def test_a_parameter_the_constructor_keeps(self):
        owner = ast.parse(textwrap.dedent("""
            class Walker:
                def __init__(self, G, n):
                    self.G = G
                    self.n = n

                def first(self):
                    return self.G.nodes[0], self.n.bit_length(), self.other.adj
        """)).body[0]
        init = owner.body[0]
        self.assertEqual(attribute_names(init, "G", owner), ["nodes"])
        self.assertEqual(attribute_names(init, "n", owner), [])
        self.assertEqual(attribute_names(init, "G"), [])

    def test_a_reassigned_parameter_says_nothing(self):
        src = """
            def f(G):
                G = G.graph
                return G.nodes
        """
        self.assertEqual(self.names(src, "G"), [])


class RenderTest(unittest.TestCase):
    def test_the_harness_imports_the_package_when_a_spec_needs_it(self):
        entry = Entry(None, None, None, ((New("path_graph", (4,), (), "package"),), {}), (),
                      "return:int", True, "", 0)  # fmt: skip
        text = render_harness("mygraph.algorithms", "degree_sum", False, [entry])
        self.assertIn("import mygraph as reference_package\n", text)
        self.assertIn("args = (reference_package.path_graph(4),)", text)
        plain = Entry(None, None, None, ((4,), {}), (), "return:int", True, "", 0)
        text = render_harness("mygraph.algorithms", "degree_sum", False, [plain])
        self.assertNotIn("reference_package", text)
        compile(text, "harness.py", "exec")

    def test_a_target_named_package_does_not_clash(self):
        plain = Entry(None, None, None, ((4,), {}), (), "return:int", True, "", 0)
        text = render_harness("m", "package", False, [plain])
        self.assertIn("target = candidate.package", text)


class ExploreTest(unittest.TestCase):
    """The explorer as a script on the package: graphs come from its factories."""

    @classmethod
    def setUpClass(cls):
        cls.repo = SampleRepo()
        write_package(cls.repo.repo)

    @classmethod
    def tearDownClass(cls):
        cls.repo.cleanup()

    def test_a_parameter_used_as_a_graph_gets_factory_graphs(self):
        out = self.repo.explore("degree_sum", module=f"{PACKAGE}.algorithms")
        self.assertEqual(out["status"], "ok", out)
        self.assertIn(f"import {PACKAGE} as reference_package", out["harness"])
        self.assertRegex(out["harness"], r"reference_package\.(cycle_graph|path_graph|star)\(")
        self.assertIn("return:int", out["outcomes"])
        again = self.repo.explore("degree_sum", module=f"{PACKAGE}.algorithms", name="again")
        self.assertEqual(again["harness"], out["harness"])

    def test_a_method_whose_class_takes_a_graph(self):
        out = self.repo.explore("Walker.first", kind="method", module=f"{PACKAGE}.algorithms")
        self.assertEqual(out["status"], "ok", out)
        self.assertIn("ctor_args = (reference_package.", out["harness"])
        self.assertIn("return:int", out["outcomes"])


if __name__ == "__main__":
    unittest.main()


class ProtocolClassesTest(unittest.TestCase):
    """Classes whose subclass checks raise (a Protocol that is not runtime-checkable, a
    TypedDict) among a project's classes: `classes_with` tells subclasses by their MRO and
    never asks them (issue 52: it raised, and the explorer failed)."""

    def test_classes_with_never_asks_a_protocol_or_typeddict(self):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="r2e-py-test-") as root:
            pkg = os.path.join(root, "r2eprotopkg")
            os.makedirs(pkg)
            SampleRepo.write(os.path.join(pkg, "__init__.py"), "from r2eprotopkg.core import *\n")
            SampleRepo.write(
                os.path.join(pkg, "core.py"),
                textwrap.dedent(
                    """
                    from typing import Protocol, TypedDict


                    class HasNodes(Protocol):
                        def nodes(self): ...

                        def items(self): ...


                    class Row(TypedDict):
                        name: str


                    class Graph:
                        def nodes(self):
                            return []

                        def items(self):
                            return []


                    class Tree(Graph):
                        pass
                    """
                ),
            )
            sys.path.insert(0, root)
            try:
                core = importlib.import_module("r2eprotopkg.core")
                factories = Factories(core, lambda spec: build(spec, core), "")
                found = factories.classes_with(["nodes"])
                # A TypedDict is a dict: it has `items`.
                with_items = [c.__name__ for c in factories.classes_with(["items"])]
            finally:
                sys.path.remove(root)
                for name in [m for m in sys.modules if m.startswith("r2eprotopkg")]:
                    del sys.modules[name]
        names = [c.__name__ for c in found]
        # The subclass adds nothing; the others are kept whatever their checks would say.
        self.assertIn("Graph", names)
        self.assertNotIn("Tree", names)
        self.assertIn("Row", with_items)
        self.assertNotIn("Tree", with_items)


class ReceiverFactoriesTest(unittest.TestCase):
    """Instances of a class whose constructor no argument the explorer writes will satisfy (it
    checks a checksum of its state): from the class's own alternate constructors, and from a
    public function that nothing ties to the class, given a text the project uses (issue 52,
    item 4)."""

    SOURCE = """
        import hashlib


        def _seal(data):
            return hashlib.sha256(repr(data).encode()).hexdigest()[:8]


        class Doc:
            def __init__(self, lines, seal):
                if seal != _seal(lines):
                    raise ValueError("unsealed")
                self.lines = lines

            @classmethod
            def empty(cls):
                return cls([], _seal([]))

            @staticmethod
            def count(n):
                return n


        class Page:
            def __init__(self, lines, seal):
                if seal != _seal(lines):
                    raise ValueError("unsealed")
                self.lines = lines


        def read(text):
            lines = text.splitlines()
            return Page(lines, _seal(lines))


        def echo(text):
            return text.upper()
    """

    def test_alternate_constructors_and_texts_of_the_project(self):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="r2e-py-test-") as root:
            SampleRepo.write(os.path.join(root, "r2esealmod.py"), textwrap.dedent(self.SOURCE))
            sys.path.insert(0, root)
            try:
                module = importlib.import_module("r2esealmod")

                def made(cls, strings):
                    probes = []

                    def probe(spec):
                        probes.append(render(spec))
                        return build(spec, module)

                    found = Factories(module, probe, "", strings=strings).for_class(cls)
                    return [render(s) for s in found], probes

                docs, doc_probes = made(module.Doc, ["a\nb"])
                pages, page_probes = made(module.Page, ["a\nb", "c"])
                none, _ = made(module.Page, [])
            finally:
                sys.path.remove(root)
                del sys.modules["r2esealmod"]
        # The class method builds a Doc; the static method (no annotation naming the class)
        # is no candidate; a factory was found, so no function is probed with a text.
        self.assertEqual(docs, ["reference.Doc.empty()"])
        self.assertNotIn("reference.Doc.count(4)", doc_probes)
        self.assertFalse([p for p in doc_probes if "a\\nb" in p], doc_probes)
        # A Page only comes from `read` given a text; `echo` returns a str: probed (first, by
        # name), not kept.
        self.assertEqual(pages, ["reference.read('a\\nb')"])
        self.assertIn("reference.echo('a\\nb')", page_probes)
        self.assertEqual(none, [])

    def test_a_class_that_refuses_instance_checks_has_no_factory(self):
        # A protocol that is not runtime-checkable, and `typing.Any`, in an annotation: the
        # factories are asked for them, and answer none instead of raising (cattrs, dacite).
        import tempfile
        import typing

        source = """
            import typing


            class Sized(typing.Protocol):
                def size(self) -> int: ...


            def make(n) -> Sized:
                return [n]


            def anything(n) -> typing.Any:
                return n
        """
        with tempfile.TemporaryDirectory(prefix="r2e-py-test-") as root:
            SampleRepo.write(os.path.join(root, "r2eprotomod.py"), textwrap.dedent(source))
            sys.path.insert(0, root)
            try:
                module = importlib.import_module("r2eprotomod")
                for cls in (module.Sized, typing.Any):
                    probes = []

                    def probe(spec):
                        probes.append(render(spec))
                        return build(spec, module)

                    with self.assertRaises(TypeError):
                        isinstance(1, cls)
                    self.assertEqual(Factories(module, probe, "", strings=["x"]).for_class(cls), [])
                    self.assertEqual(probes, [])
            finally:
                sys.path.remove(root)
                del sys.modules["r2eprotomod"]


class ReceiverExploreTest(unittest.TestCase):
    """The explorer as a script: a class whose constructor gives instances on which no call
    returns (its table is filled by its factory), and one no constructor call builds (sealed):
    the factories' instances become receivers (issue 52, item 4)."""

    SOURCE = """
        import hashlib


        class Lexer:
            _default = None

            def __init__(self):
                self.table = None

            @classmethod
            def default(cls):
                if cls._default is None:
                    cls._default = cls()
                    cls._default.load({"SELECT": "kw", "FROM": "kw"})
                return cls._default

            def load(self, table):
                self.table = dict(table)

            def kind(self, word):
                \"\"\"The kind of a word: a keyword's, else "name".\"\"\"
                key = word.upper()
                if key in self.table:
                    return self.table[key]
                return "name"


        def _seal(lines):
            return hashlib.sha256(repr(lines).encode()).hexdigest()[:8]


        class Doc:
            def __init__(self, lines, seal):
                if seal != _seal(lines):
                    raise ValueError("unsealed")
                self.lines = lines

            def first(self, default):
                if not self.lines:
                    return default
                return self.lines[0]


        def read(text):
            lines = text.splitlines()
            return Doc(lines, _seal(lines))
    """

    @classmethod
    def setUpClass(cls):
        cls.repo = SampleRepo()
        SampleRepo.write(
            os.path.join(cls.repo.repo, "r2elexmod.py"), textwrap.dedent(cls.SOURCE)
        )

    @classmethod
    def tearDownClass(cls):
        cls.repo.cleanup()

    def test_a_factorys_instance_when_no_call_on_a_constructed_one_returns(self):
        out = self.repo.explore("Lexer.kind", kind="method", module="r2elexmod")
        self.assertEqual(out["status"], "ok", out)
        self.assertIn("receiver = reference.Lexer.default()", out["harness"])
        self.assertIn("return:str", out["outcomes"])

    def test_a_text_the_call_sites_pass_parsed_into_a_receiver(self):
        sites = [{"args": ["'x'"], "kwargs": {}}]
        out = self.repo.explore("Doc.first", kind="method", module="r2elexmod", call_sites=sites)
        self.assertEqual(out["status"], "ok", out)
        self.assertIn("receiver = reference.read('x')", out["harness"])
        none = self.repo.explore("Doc.first", kind="method", module="r2elexmod", name="none")
        self.assertEqual(none["status"], "error", none)
        self.assertIn("could not construct Doc", none["error"])

