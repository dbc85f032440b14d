"""Tests of r2e_snapshot.py: what a snapshot keeps of a value, and what it leaves out."""

from __future__ import annotations

import collections
import copy
import decimal
import enum
import json
import unittest

import r2e_test_support  # noqa: F401  (puts the scripts on sys.path)
import r2e_snapshot
from r2e_snapshot import snapshot


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 1


class Color(enum.Enum):
    RED = 1


class Named(list):
    pass


class SnapshotTest(unittest.TestCase):
    def test_scalars_keep_their_exact_type(self):
        self.assertEqual(snapshot(True), {"bool": True})
        self.assertEqual(snapshot(1), {"int": "1"})
        self.assertEqual(snapshot(1.0), {"float": 1.0})
        self.assertEqual(snapshot(2**100), {"int": str(2**100)})
        self.assertEqual(snapshot(float("nan")), {"float": "nan"})
        self.assertEqual(snapshot(float("-inf")), {"float": "-inf"})
        self.assertEqual(snapshot(None), "none")
        self.assertEqual(snapshot(b"\x01"), {"bytes": "01"})
        self.assertEqual(snapshot(Color.RED), {"enum": {"type": f"{__name__}.Color", "name": "RED"}})

    def test_a_plain_dicts_order_is_left_to_the_comparison_an_ordered_dicts_is_kept(self):
        plain = snapshot({"a": 1, "b": 2})["dict"]
        self.assertFalse(plain["ordered"])
        self.assertEqual(plain["len"], 2)
        ordered = snapshot(collections.OrderedDict(a=1))["dict"]
        self.assertTrue(ordered["ordered"])
        self.assertEqual(ordered["type"], "collections.OrderedDict")

    def test_objects_by_state_never_by_identity(self):
        shared = Point(1, 2)
        # One object reached twice is written out twice: identity is not part of the value.
        twice = snapshot([shared, shared])["seq"]["items"]
        self.assertEqual(twice[0], twice[1])
        self.assertEqual(twice[0], snapshot([Point(1, 2)])["seq"]["items"][0])
        self.assertEqual(
            twice[0],
            {"object": {"type": f"{__name__}.Point", "state": {"x": {"int": "1"}, "y": {"int": "2"}}}},
        )

    def test_slots_count_and_copying_leaves_no_trace(self):
        s = Slotted()
        before = snapshot(s)
        copy.deepcopy(s)  # adds __slotnames__ to the class
        self.assertEqual(snapshot(s), before)
        self.assertEqual(before["object"]["state"], {"a": {"int": "1"}})

    def test_a_cycle_is_a_back_reference(self):
        loop = []
        loop.append(loop)
        self.assertEqual(snapshot(loop), {"seq": {"type": "list", "items": [{"ref": 1}]}})

    def test_container_subclasses_keep_their_type_and_attributes(self):
        n = Named([1])
        n.label = "x"
        seq = snapshot(n)["seq"]
        self.assertEqual(seq["type"], f"{__name__}.Named")
        self.assertEqual(seq["state"], {"label": {"str": "x"}})

    def test_standard_library_values_by_canonical_text(self):
        one = snapshot(decimal.Decimal("1.0"))
        self.assertEqual(one, snapshot(decimal.Decimal("1.00")))
        self.assertEqual(one["value"]["type"], "decimal.Decimal")

    def test_source_positions_by_function_name_only(self):
        # pyparsing keeps a FrameSummary of where an element was made: its line moves with
        # any rewrite above it, and its text is read lazily from a file a candidate cannot see.
        import traceback

        a = traceback.FrameSummary("/repo/m.py", 10, "make", line="x = 1")
        b = traceback.FrameSummary("/elsewhere/m.py", 42, "make", lookup_line=False)
        self.assertEqual(snapshot(a), snapshot(b))
        self.assertEqual(
            snapshot(a), {"value": {"type": "traceback.FrameSummary", "text": "make"}}
        )
        c = traceback.FrameSummary("/repo/m.py", 10, "other", line="x = 1")
        self.assertNotEqual(snapshot(a), snapshot(c))
        self.assertEqual(snapshot(a.__class__), {"class": "traceback.FrameSummary"})
        code = snapshot((lambda: 0).__code__)
        self.assertEqual(code, {"value": {"type": "code", "text": "<lambda>"}})

    def test_exceptions_as_values_by_type_and_arguments(self):
        e = snapshot(KeyError("k"))
        self.assertEqual(e, {"exception": {"type": "KeyError", "args": [{"str": "k"}], "state": {}}})

    def test_a_sets_items_are_recorded_in_an_order_no_process_changes(self):
        # Processes with other hash seeds order the same set differently (as runs under -I,
        # which ignores PYTHONHASHSEED, do); the snapshots must not differ.
        import os
        import subprocess
        import sys

        code = (
            "import enum, json, r2e_snapshot\n"
            "Unit = enum.Enum('Unit', 'SECONDS MINUTES HOURS DAYS MONTHS YEARS')\n"
            "print(json.dumps(r2e_snapshot.snapshot({'hello-world', 'hello-world-2', 'b', 'zz', 3, (1, 'x')})))\n"
            "print(json.dumps(r2e_snapshot.snapshot(set(Unit))))\n"
            "print(json.dumps(r2e_snapshot.snapshot({Unit.DAYS, 'days', (Unit.HOURS, 1)})))"
        )
        here = os.path.dirname(os.path.dirname(os.path.abspath(r2e_snapshot.__file__)))
        outs = {
            subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                check=True,
                cwd=os.path.dirname(os.path.abspath(r2e_snapshot.__file__)),
                env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": here},
            ).stdout
            for seed in range(1, 9)
        }
        self.assertEqual(len(outs), 1, outs)
        items = snapshot(frozenset({"b", "a"}))["set"]["items"]
        self.assertEqual(items, [snapshot("a"), snapshot("b")])

    def test_big_values_are_cut_and_stay_json(self):
        big = snapshot(list(range(r2e_snapshot.MAX_ITEMS + 5)))["seq"]["items"]
        self.assertEqual(len(big), r2e_snapshot.MAX_ITEMS + 1)
        self.assertEqual(big[-1], "cut")
        deep = []
        for _ in range(r2e_snapshot.MAX_DEPTH + 5):
            deep = [deep]
        self.assertIn('"cut"', json.dumps(snapshot(deep)))

    def test_the_deepest_snapshot_fits_the_readers_nesting_limit(self):
        # A chain of objects holding dicts holding objects: the deepest JSON per level.
        node = None
        for _ in range(200):
            node = Point({"next": node}, 0)
        self.assertLessEqual(nesting(json.dumps(snapshot(node))), 128 - 12)


def nesting(text: str) -> int:
    """The deepest nesting of JSON arrays and objects in `text`."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


if __name__ == "__main__":
    unittest.main()
