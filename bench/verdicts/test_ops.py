"""Self-tests of the benchmark's operators: every rewrite of sample functions computes what the
original computes on sample inputs; mutants compile and differ from the original.

    python3 bench/verdicts/test_ops.py
"""

import ast
import os
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mutants  # noqa: E402
import rewrites  # noqa: E402
from source import dedent  # noqa: E402

SAMPLES = [
    (
        '''
        def clamp(x, lo=0, hi=10):
            """Clamp x."""
            total = 0
            if x < lo:
                return lo
            elif x > hi:
                return hi
            else:
                total += 1
            result = x if x != 5 else -5
            for k in range(3):
                total += k
            if total >= 4:
                extra = 1
            else:
                extra = 2
            if x is not None and x not in (7, 8):
                total = total * 2
            return result + extra + total  # comment
        ''',
        [((-3,), {}), ((3,), {}), ((5,), {}), ((7,), {}), ((30,), {}), ((4,), {"hi": 2})],
    ),
    (
        '''
        @staticmethod
        def chunks(seq, n):
            """Chunks."""
            out = []
            i = 0
            while i < len(seq):
                out.append(seq[i:i + n])
                i += n
            def inner(v, n=n):
                return [w for w in v if len(w) == n]
            try:
                first = out[0]
            except IndexError as exc:
                first = None
            return out, inner(out), first
        ''',
        [(("abcdefg", 2), {}), (([1, 2, 3], 5), {}), (("", 1), {})],
    ),
    (
        '''
        def gen(items, stop=None):
            """A generator."""
            seen = set()
            for it in items:
                if it == stop:
                    return
                if it in seen:
                    continue
                seen.add(it)
                yield (it, len(seen))
        ''',
        [(([1, 2, 2, 3],), {}), (([1, 2, 3], 2), {})],
    ),
    (
        '''
        def scaled(values: list, k: int = 2) -> list:
            """Scaled."""
            if k < 0:
                raise ValueError(f"negative {k}")
            doubled = [v * 2 for v in values if v]
            pairs = [(a, b) for a, b in zip(values, doubled)]
            sep = "\\n,\\t\\"'x"
            pairs.append(sep)
            return [k * 2 + d for d in doubled] + pairs
        ''',
        [(([1, 0, 3],), {}), (([1, 2], -1), {}), (([], 5), {})],
    ),
]


def run(text, args, kwargs):
    env = {}
    exec(compile(text, "<t>", "exec"), env)
    fn = [v for k, v in env.items() if not k.startswith("__") and (callable(v) or isinstance(v, staticmethod))][0]
    if isinstance(fn, staticmethod):
        fn = fn.__func__
    try:
        r = fn(*args, **kwargs)
        if hasattr(r, "__next__"):
            r = list(r)
        return ("ok", r)
    except Exception as e:
        return ("raise", type(e))


class Ops(unittest.TestCase):
    def test_rewrites_are_equivalent(self):
        seen = set()
        for src, calls in SAMPLES:
            text = dedent(textwrap.dedent(src).lstrip("\n"))
            tree = ast.parse(text)
            for rw in rewrites.rewrites(text, tree):
                seen.add(rw["kind"])
                for args, kwargs in calls:
                    self.assertEqual(run(rw["text"], args, kwargs), run(text, args, kwargs), (rw["kind"], rw["text"]))
        missing = set(rewrites.KINDS) - seen - {"whole_class", "method_multiline_literal"}
        self.assertFalse(missing, f"kinds never exercised: {missing}")

    def test_mutants_compile_and_differ(self):
        kinds = set()
        for src, _ in SAMPLES:
            text = dedent(textwrap.dedent(src).lstrip("\n"))
            tree = ast.parse(text)
            ms = mutants.mutants("t", tree, 3)
            texts = [m["text"] for m in ms]
            self.assertEqual(len(texts), len(set(texts)))
            for m in ms:
                kinds.add(m["kind"])
                compile(m["text"], "<m>", "exec")
                self.assertNotEqual(ast.unparse(ast.parse(m["text"])), ast.unparse(tree))
            per = {}
            for m in ms:
                per[m["kind"]] = per.get(m["kind"], 0) + 1
            self.assertTrue(all(v <= 3 for v in per.values()))
        self.assertEqual(kinds, set(mutants.KINDS))

    def test_docstring_is_not_mutated(self):
        tree = ast.parse('def f(x):\n    "Doc 1."\n    return x\n')
        for m in mutants.mutants("t", tree, 3):
            self.assertIn("Doc 1.", m["text"])


if __name__ == "__main__":
    unittest.main()
