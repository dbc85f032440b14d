"""Choosing the tests of the harness among the executed inputs.

An entry (search.Entry) is an executed input; `select` reads its `arcs`, `kind` (the outcome
kind), `returned` (the reference returned normally), `value_key` (a text identifying the
outcome) and `seq` (discovery order), and re-runs entries through the explorer's `execute` and
`is_deterministic`.
"""

from __future__ import annotations

from .tracing import Stop


class Selection:
    """The choice of at most `max_tests` entries: a greedy cover of the arcs and outcome kinds
    of the kept inputs (`corpus`), then (preferably) at least 3 tests and one normal return,
    topped up from the inputs tried but not kept (`tried_log`), which are re-run to make sure
    they are deterministic: `execute(ctor_call, call, traced=False)` gives (status, observation,
    arcs) and `is_deterministic(ctor_call, call, observation)` runs it again; both may raise
    Stop when the budget is exhausted."""

    def __init__(self, corpus, tried_log, max_tests: int, execute, is_deterministic):
        self.corpus = corpus
        self.tried_log = tried_log
        self.max_tests = max_tests
        self.execute = execute
        self.is_deterministic = is_deterministic

    def choose(self) -> list:
        """The chosen entries, in discovery order."""
        chosen = self.cover()
        wanted = min(3, self.max_tests)
        for e in self.corpus:
            if len(chosen) >= wanted:
                break
            if e not in chosen:
                chosen.append(e)
        # At least one test where the reference returns normally, if any input did.
        if not any(e.returned for e in chosen):
            normal = next((e for e in self.corpus if e.returned), None)
            if normal is None:
                normal = self.top_up(lambda e: e.returned, 1, chosen)
                normal = normal[0] if normal else None
            if normal is not None and normal not in chosen:
                if len(chosen) >= self.max_tests:
                    chosen.pop()
                chosen.append(normal)
        # Top up: normal returns with distinct values, other distinct outcomes, then any.
        for accept, distinct in (
            (lambda e: e.returned, True),
            (lambda e: True, True),
            (lambda e: True, False),
        ):
            if len(chosen) < wanted:
                chosen += self.top_up(accept, wanted - len(chosen), chosen, distinct)
        chosen.sort(key=lambda e: e.seq)
        return chosen

    def cover(self) -> list:
        """A greedy cover of the corpus: repeatedly the entry adding the most arcs not yet
        covered (plus one for an outcome kind not yet seen), the earliest on ties, up to
        `max_tests`."""
        chosen: list = []
        arcs: set = set()
        kinds: set = set()
        while len(chosen) < self.max_tests:
            best, best_gain = None, 0
            for e in self.corpus:
                if e in chosen:
                    continue
                gain = len(e.arcs - arcs) + (1 if e.kind not in kinds else 0)
                if gain > best_gain:
                    best, best_gain = e, gain
            if best is None:
                break
            chosen.append(best)
            arcs |= best.arcs
            kinds.add(best.kind)
        return chosen

    def top_up(self, accept, count: int, chosen: list, distinct: bool = True) -> list:
        """Up to `count` tried inputs that `accept` takes (with outcomes distinct from those
        chosen, if `distinct`), re-run twice to make sure they are deterministic."""
        out = []
        seen = {e.value_key for e in chosen}
        for e in self.tried_log:
            if len(out) >= count:
                break
            if not accept(e) or e in chosen or (distinct and e.value_key in seen):
                continue
            try:
                status, obs, _ = self.execute(e.ctor_call, e.call, traced=False)
                if status != "ok" or not self.is_deterministic(e.ctor_call, e.call, obs):
                    continue
            except Stop:
                break
            seen.add(e.value_key)
            out.append(e)
        return out
