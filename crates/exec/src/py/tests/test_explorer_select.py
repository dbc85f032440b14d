"""Tests of r2e_explorer.select: choosing the harness's tests among executed inputs."""

from __future__ import annotations

import unittest

from r2e_test_support import PY_DIR  # noqa: F401 - puts the explorer's folder on sys.path

from r2e_explorer.search import Entry
from r2e_explorer.select import Selection
from r2e_explorer.tracing import Stop


def entry(
    seq,
    arcs=(),
    kind="return:int",
    returned=True,
    value_key=None,
    kills=(),
    ill_typed=False,
    example=False,
    obs=None,
):
    e = Entry(
        inp=None,
        key=f"input {seq}",
        ctor_call=None,
        call=((seq,), {}),
        arcs=frozenset(arcs),
        kind=kind,
        returned=returned,
        value_key=value_key or f"return {seq}",
        seq=seq,
        obs=obs,
        ill_typed=ill_typed,
        example=example,
    )
    e.kills = frozenset(kills)
    return e


class Runs:
    """A stand-in for the explorer's execute / is_deterministic: records the re-runs; inputs in
    `flaky` are not deterministic; after `budget` executions, Stop."""

    def __init__(self, flaky=(), budget=100):
        self.flaky = set(flaky)
        self.budget = budget
        self.calls: list = []

    def execute(self, ctor_call, call, traced=True):
        self.check()
        self.calls.append(("execute", call[0][0], traced))
        return "ok", f"observation {call[0][0]}", frozenset()

    def is_deterministic(self, ctor_call, call, first_obs):
        self.check()
        self.calls.append(("again", call[0][0]))
        return call[0][0] not in self.flaky

    def check(self):
        if len(self.calls) >= self.budget:
            raise Stop()


def choose(corpus, tried=(), max_tests=12, runs=None, candidates=(), verify=None):
    runs = runs or Runs()
    return Selection(
        corpus,
        list(tried),
        max_tests,
        runs.execute,
        runs.is_deterministic,
        candidates=candidates,
        verify=verify,
    ).choose()


def seqs(entries) -> list[int]:
    return [e.seq for e in entries]


class CoverTest(unittest.TestCase):
    def test_greedy_cover_of_arcs_and_kinds(self):
        corpus = [
            entry(1, {1, 2}),
            entry(2, {1, 2, 3, 4}),
            entry(3, {5}),
            entry(4, {1}, kind="raise:ValueError", returned=False),
            entry(5, {2, 3}),  # nothing new once 2 is chosen
        ]
        selection = Selection(corpus, [], 12, None, None)
        # The most new arcs first; then a new arc ties a new kind, the earliest wins.
        self.assertEqual(seqs(selection.cover()), [2, 3, 4])

    def test_max_tests_bounds_the_cover(self):
        corpus = [entry(i, {i}) for i in range(1, 8)]
        self.assertEqual(seqs(choose(corpus, max_tests=2)), [1, 2])


class KillsTest(unittest.TestCase):
    def test_the_cover_values_killed_mutants(self):
        corpus = [
            entry(1, {1, 2, 3}, kills={0}),
            entry(2, {1, 2}, kills={1, 2}),  # no new arc, two mutants: 4 > 3 arcs
            entry(3, {1, 2, 4}, kills={0}),
        ]
        self.assertEqual(seqs(Selection(corpus, [], 12, None, None).cover()), [2, 1, 3])

    def test_candidates_that_kill_are_verified_before_they_are_taken(self):
        corpus = [entry(1, {1}, kills={0})]
        candidates = [entry(2, {1}, kills={1}), entry(3, {1}, kills={1, 2})]
        checked = []

        def verify(e):
            checked.append(e.seq)
            return e.seq != 3  # 3 is not deterministic

        chosen = choose(corpus, candidates=candidates, verify=verify)
        self.assertEqual(seqs(chosen), [1, 2])
        self.assertEqual(checked, [3, 2])
        self.assertTrue(candidates[0].verified)

    def test_a_verification_stopped_by_the_budget_leaves_the_entry_out(self):
        def verify(e):
            raise Stop()

        chosen = choose([entry(1, {1})], candidates=[entry(2, {1}, kills={0})], verify=verify)
        self.assertEqual(seqs(chosen), [1])

    def test_at_most_one_ill_typed_test(self):
        corpus = [
            entry(1, {1}),
            entry(2, {2}, kind="raise:TypeError", returned=False, ill_typed=True, kills={0}),
            entry(3, {3}, kind="raise:AttributeError", returned=False, ill_typed=True),
            entry(4, {4}, kind="raise:TypeError", returned=False, ill_typed=True, kills={1}),
        ]
        chosen = choose(corpus)
        self.assertEqual(sum(e.ill_typed for e in chosen), 1)
        self.assertEqual(seqs(chosen), [1, 2])
        # An explicit `raise TypeError` of the repository is a test like any other.
        for e in corpus:
            e.ill_typed = False
        self.assertEqual(seqs(choose(corpus)), [1, 2, 3, 4])

    def test_ill_typed_inputs_only_as_a_last_resort_to_reach_three_tests(self):
        corpus = [entry(1, {1})]
        tried = [
            entry(2, kind="raise:TypeError", returned=False, ill_typed=True, value_key="t2"),
            entry(3, kind="raise:TypeError", returned=False, ill_typed=True, value_key="t3"),
        ]
        self.assertEqual(seqs(choose(corpus, tried)), [1, 2, 3])

    def test_normal_returns_and_examples_win_ties(self):
        corpus = [
            entry(1, {1}, kind="raise:ValueError", returned=False),
            entry(2, {1}),
            entry(3, {1}, example=True),
        ]
        self.assertEqual(seqs(Selection(corpus, [], 12, None, None).cover()), [3, 1])
        corpus[2].example = False
        self.assertEqual(seqs(Selection(corpus, [], 12, None, None).cover()), [2, 1])

    def test_near_duplicates_are_not_taken_to_reach_three_tests(self):
        corpus = [
            entry(1, {1, 2}, kills={0}),
            entry(2, {1, 2}, kills={0}),  # the same arcs, kind and kills as 1
            entry(3, {1}),
            entry(4, {1, 2}, kills={0}),
        ]
        # The cover takes 1 alone; the fill prefers 3 (different arcs), then any.
        self.assertEqual(seqs(choose(corpus)), [1, 2, 3])
        self.assertEqual(seqs(choose(corpus, max_tests=2)), [1, 3])

    def test_tried_inputs_with_an_observation_are_re_run_once(self):
        corpus = [entry(1, {1})]
        tried = [entry(2, value_key="a", obs="observation 2"), entry(3, value_key="b")]
        runs = Runs()
        self.assertEqual(seqs(choose(corpus, tried, runs=runs)), [1, 2, 3])
        self.assertEqual(runs.calls, [("again", 2), ("execute", 3, False), ("again", 3)])


class ChooseTest(unittest.TestCase):
    def test_at_least_three_tests_from_the_corpus_in_discovery_order(self):
        corpus = [entry(1, {1, 2, 3}), entry(2, {1}), entry(3, {2}), entry(4, {3})]
        self.assertEqual(seqs(choose(corpus)), [1, 2, 3])

    def test_one_normal_return_from_the_corpus(self):
        corpus = [
            entry(1, {1, 2}, kind="raise:ValueError", returned=False),
            entry(2, {3}, kind="raise:KeyError", returned=False),
            entry(3, {1}, returned=True),
        ]
        # The cover takes 1 and 2, neither returning normally: the last makes way for 3.
        chosen = choose(corpus, max_tests=2)
        self.assertEqual(seqs(chosen), [1, 3])
        self.assertTrue(any(e.returned for e in chosen))

    def test_one_normal_return_topped_up_from_the_tried_inputs(self):
        corpus = [entry(1, {1}, kind="raise:ValueError", returned=False)]
        tried = [
            entry(2, {1}, kind="raise:ValueError", returned=False, value_key="raise same"),
            entry(3, {1}, returned=True, value_key="return 3"),
            entry(4, {1}, returned=True, value_key="return 3"),  # the same outcome as 3
            entry(5, {1}, returned=True, value_key="return 5"),
        ]
        runs = Runs()
        chosen = choose(corpus, tried, runs=runs)
        # 3 is the normal return; then distinct normal returns (5), then the rest.
        self.assertEqual(seqs(chosen), [1, 3, 5])
        # Each one added was re-run twice, untraced.
        self.assertEqual(
            runs.calls, [("execute", 3, False), ("again", 3), ("execute", 5, False), ("again", 5)]
        )

    def test_top_up_skips_inputs_that_are_not_deterministic(self):
        corpus = [entry(1, {1})]
        tried = [entry(2, value_key="a"), entry(3, value_key="b"), entry(4, value_key="c")]
        chosen = choose(corpus, tried, runs=Runs(flaky={2}))
        self.assertEqual(seqs(chosen), [1, 3, 4])

    def test_top_up_takes_repeated_outcomes_last(self):
        corpus = [entry(1, {1}, value_key="return 1")]
        tried = [entry(2, value_key="return 1"), entry(3, value_key="return 1")]
        self.assertEqual(seqs(choose(corpus, tried)), [1, 2, 3])

    def test_the_budget_stops_the_top_up(self):
        corpus = [entry(1, {1})]
        tried = [entry(2, value_key="a"), entry(3, value_key="b")]
        self.assertEqual(seqs(choose(corpus, tried, runs=Runs(budget=2))), [1, 2])
        self.assertEqual(seqs(choose(corpus, tried, runs=Runs(budget=0))), [1])

    def test_nothing_to_choose(self):
        self.assertEqual(choose([]), [])

    def test_top_up_directly(self):
        runs = Runs()
        chosen = [entry(1, value_key="x")]
        tried = [
            entry(2, value_key="x"),
            entry(3, returned=False, value_key="y"),
            entry(4, value_key="z"),
        ]
        selection = Selection([], tried, 12, runs.execute, runs.is_deterministic)
        self.assertEqual(seqs(selection.top_up(lambda e: e.returned, 5, chosen)), [4])
        self.assertEqual(seqs(selection.top_up(lambda e: True, 1, chosen)), [3])
        self.assertEqual(
            seqs(selection.top_up(lambda e: True, 5, chosen, distinct=False)), [2, 3, 4]
        )


if __name__ == "__main__":
    unittest.main()
