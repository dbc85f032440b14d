"""r2e's own value code never raises, whatever a repository's code hands it: the comparison
(`r2e_equiv.compare`, `equivalent`, `differences`, `short_repr`), the snapshot
(`r2e_snapshot.snapshot`, and its JSON) and the capture's encoding of call sites
(`r2e_capture.Encoder.text`, which pickles). A property test runs them over generated nested
values with hostile objects inside; each hostile kind also has a case of its own. Where the
comparison cannot decide, `compare` answers None ("not comparable"): never a verdict, so the
explorer keeps no test on it.

Needs Hypothesis (`common::test_python` installs it with coverage.py)."""

from __future__ import annotations

import json
import os
import unittest

import r2e_test_support  # noqa: F401 - puts r2e's scripts on sys.path

import r2e_capture
import r2e_equiv
import r2e_snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# How many generated values the property test runs (reported by docs/testing.md).
EXAMPLES = int(os.environ.get("R2E_VALUE_EXAMPLES", "400"))


class Boom(Exception):
    """What every hostile method raises."""


class RaisingEq:
    def __init__(self, n=0):
        self.n = n

    def __eq__(self, other):
        raise Boom("__eq__")

    __hash__ = object.__hash__


class RaisingHash:
    def __init__(self, n=0):
        self.n = n

    def __hash__(self):
        raise Boom("__hash__")


class RaisingRepr:
    def __init__(self, n=0):
        self.n = n

    def __repr__(self):
        raise Boom("__repr__")

    __str__ = __repr__


class RaisingGetattr:
    def __getattr__(self, name):
        raise Boom(name)


class RaisingGetattribute:
    def __getattribute__(self, name):
        raise Boom(name)


class RaisingClassAttr:
    """`__class__` raises: `isinstance` asks for it when the type itself does not match."""

    @property
    def __class__(self):
        raise Boom("__class__")


class RaisingDictAttr:
    @property
    def __dict__(self):
        raise Boom("__dict__")


class RaisingSlot:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1

    def __getattribute__(self, name):
        if name == "a":
            raise Boom("a")
        return object.__getattribute__(self, name)


class RaisingLen(list):
    def __len__(self):
        raise Boom("__len__")


class RaisingIter(list):
    def __iter__(self):
        raise Boom("__iter__")


class RaisingGetitemDict(dict):
    def __getitem__(self, key):
        raise Boom("__getitem__")


class LyingKeysDict(dict):
    """Iterates over keys it does not hold."""

    def __iter__(self):
        return iter(["not a key", object()])


class RaisingItemsDict(dict):
    def items(self):
        raise Boom("items")


class NoOrder(str):
    """A str whose ordering raises: keys that do not sort."""

    def __lt__(self, other):
        raise Boom("__lt__")

    __gt__ = __le__ = __ge__ = __lt__
    __hash__ = str.__hash__


class Truthless:
    """What a numpy-like `==` returns: its truth raises."""

    def __bool__(self):
        raise Boom("__bool__")


class ArrayLikeEq:
    def __init__(self, n=0):
        self.n = n

    def __eq__(self, other):
        return Truthless()

    __hash__ = object.__hash__


class Proxy:
    """Forwards everything to its target, and claims its class (as wrapt's and
    lazy-object-proxy's proxies do)."""

    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    @property
    def __class__(self):
        return type(object.__getattribute__(self, "_target"))

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_target"), name)

    def __eq__(self, other):
        return object.__getattribute__(self, "_target") == other

    def __hash__(self):
        return hash(object.__getattribute__(self, "_target"))

    def __repr__(self):
        return repr(object.__getattribute__(self, "_target"))

    def __len__(self):
        return len(object.__getattribute__(self, "_target"))

    def __iter__(self):
        return iter(object.__getattribute__(self, "_target"))


def hostile_objects():
    """One of each hostile kind, fresh."""
    return [
        RaisingEq(),
        RaisingHash(),
        RaisingRepr(),
        RaisingGetattr(),
        RaisingGetattribute(),
        RaisingClassAttr(),
        RaisingDictAttr(),
        RaisingSlot(),
        RaisingLen([1, 2]),
        RaisingIter([1, 2]),
        RaisingGetitemDict(a=1, b=2),
        LyingKeysDict(a=1),
        RaisingItemsDict(a=1),
        {NoOrder("b"): 1, NoOrder("a"): 2},
        ArrayLikeEq(),
        Proxy([1, 2, 3]),
        Proxy({"k": RaisingEq()}),
        Proxy(RaisingRepr()),
    ]


HOSTILE = st.integers(min_value=0, max_value=len(hostile_objects()) - 1).map(
    lambda i: hostile_objects()[i]
)
HASHABLE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.text(max_size=3).map(NoOrder),
    st.tuples(st.integers(), st.text(max_size=3)),
)
LEAVES = st.one_of(HASHABLE, HOSTILE, st.complex_numbers(allow_nan=True))


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(HASHABLE, children, max_size=5),
        st.sets(HASHABLE, max_size=5),
        st.frozensets(HASHABLE, max_size=5),
        st.lists(children, max_size=3).map(_an_object),
    )


class Plain:
    """An ordinary object of a repository's class."""


def _an_object(items):
    obj = Plain()
    for n, item in enumerate(items):
        setattr(obj, f"f{n}", item)
    return obj


VALUES = st.recursive(LEAVES, _containers, max_leaves=20)


def _with_cycle(value):
    """The value inside a list that holds itself, and, for lists and objects, pointing back."""
    outer = [value]
    outer.append(outer)
    if isinstance(value, list):
        value.append(outer)
    elif isinstance(value, Plain):
        value.back = outer
    return outer


def never_raises(case, value, other):
    """Runs every function of r2e's value code on `value` (and `other`); fails the test case
    when one raises."""
    for a, b in ((value, value), (value, other), (other, value)):
        verdict = r2e_equiv.compare(a, b)
        case.assertIn(verdict, (True, False, None))
        case.assertIs(r2e_equiv.equivalent(a, b), verdict is True)
        obs_a = r2e_equiv.Observation(("return", a), [a], {"k": b})
        obs_b = r2e_equiv.Observation(("return", b), [b], {"k": a})
        diffs = r2e_equiv.differences(obs_a, obs_b)
        case.assertIsInstance(diffs, list)
    case.assertIsInstance(r2e_equiv.short_repr(value), str)
    snap = r2e_snapshot.snapshot(value)
    json.dumps(snap, allow_nan=False)
    text = r2e_capture.Encoder(8192).text(value)
    case.assertTrue(text is None or isinstance(text, str))


class PropertyTest(unittest.TestCase):
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(VALUES, VALUES, st.booleans())
    def test_value_code_never_raises_on_generated_values(self, value, other, cyclic):
        if cyclic:
            value = _with_cycle(value)
        never_raises(self, value, other)


class HostileKindsTest(unittest.TestCase):
    """One case per hostile kind, with what the answer must be where it can be known."""

    def test_keys_that_do_not_sort(self):
        mixed = {1: "a", "b": 2, (3,): None, None: 1.5}
        self.assertTrue(r2e_equiv.equivalent(mixed, dict(mixed)))
        no_order = {NoOrder("b"): 1, NoOrder("a"): 2}
        self.assertTrue(r2e_equiv.equivalent(no_order, dict(no_order)))
        obj = Plain()
        obj.__dict__[NoOrder("z")] = 1
        obj.__dict__[NoOrder("y")] = 2
        snap = r2e_snapshot.snapshot(obj)
        self.assertEqual(list(snap["object"]["state"]), ["y", "z"])
        never_raises(self, mixed, no_order)
        never_raises(self, obj, {1, "a", (2,), None})

    def test_cycles(self):
        a, b = [], []
        a.append(a)
        b.append(b)
        self.assertTrue(r2e_equiv.equivalent(a, b))
        d = {}
        d["self"] = d
        o = Plain()
        o.me = o
        snap = r2e_snapshot.snapshot(o)
        self.assertEqual(snap["object"]["state"]["me"], {"ref": 1})
        for v in (a, d, o):
            never_raises(self, v, v)

    def test_raising_eq_hash_repr_and_getattr(self):
        for v in (RaisingEq(), RaisingHash(), RaisingRepr(), RaisingGetattr(),
                  RaisingGetattribute(), RaisingClassAttr(), RaisingDictAttr(), RaisingSlot(),
                  ArrayLikeEq()):
            never_raises(self, v, type(v).__new__(type(v)))
            never_raises(self, [v, {"k": v}], (v,))
        # Objects compared by their state: a raising `__eq__` is never asked.
        self.assertTrue(r2e_equiv.equivalent(RaisingEq(1), RaisingEq(1)))
        self.assertFalse(r2e_equiv.equivalent(RaisingEq(1), RaisingEq(2)))

    def test_containers_whose_methods_raise_or_lie(self):
        for v in (RaisingLen([1]), RaisingIter([1]), RaisingGetitemDict(a=1),
                  LyingKeysDict(a=1), RaisingItemsDict(a=1)):
            never_raises(self, v, v)
        # A dict is compared by what it holds, whatever its methods say of it.
        self.assertTrue(r2e_equiv.equivalent(RaisingGetitemDict(a=1), RaisingGetitemDict(a=1)))
        self.assertFalse(r2e_equiv.equivalent(RaisingGetitemDict(a=1), RaisingGetitemDict(a=2)))

    def test_proxies(self):
        for target in ([1, 2], {"a": 1}, RaisingEq(), RaisingRepr(), Plain()):
            p = Proxy(target)
            never_raises(self, p, target)
            never_raises(self, [p], {"p": p})

    def test_huge_containers(self):
        big = list(range(1_000_000))
        deep = []
        for _ in range(100_000):
            deep = [deep]
        wide = {n: str(n) for n in range(200_000)}
        for v in (big, deep, wide, set(range(100_000)), "x" * 10_000_000):
            never_raises(self, v, v)
        self.assertTrue(r2e_equiv.equivalent(big, list(range(1_000_000))))
        self.assertFalse(r2e_equiv.equivalent(big, list(range(1, 1_000_001))))

    def test_integers_past_the_decimal_digit_limit(self):
        # An exact power a function returns (`safe_pow(9, 9999)`): `str` of it raises past the
        # interpreter's 4300-digit limit; its snapshot is exact all the same.
        huge = 9 ** 9999
        never_raises(self, huge, huge + 1)
        never_raises(self, [huge, {"k": huge}], (huge,))
        self.assertTrue(r2e_equiv.equivalent(huge, 9 ** 9999))
        self.assertFalse(r2e_equiv.equivalent(huge, huge + 1))
        self.assertEqual(r2e_snapshot.snapshot(huge), r2e_snapshot.snapshot(9 ** 9999))
        self.assertNotEqual(r2e_snapshot.snapshot(huge), r2e_snapshot.snapshot(huge + 1))

    def test_not_comparable_is_no_verdict(self):
        deep_a, deep_b = [], []
        for _ in range(100_000):
            deep_a, deep_b = [deep_a], [deep_b]
        # Too deep to decide here: neither equal nor different.
        self.assertIsNone(r2e_equiv.compare(deep_a, deep_b))
        self.assertFalse(r2e_equiv.equivalent(deep_a, deep_b))
        obs_a = r2e_equiv.Observation(("return", deep_a), [], {})
        obs_b = r2e_equiv.Observation(("return", deep_b), [], {})
        self.assertEqual(
            [part for part, _ in r2e_equiv.differences(obs_a, obs_b)], ["not comparable"]
        )


if __name__ == "__main__":
    unittest.main()
