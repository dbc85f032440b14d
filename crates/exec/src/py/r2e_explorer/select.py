"""Choosing the tests of the harness among the executed inputs.

An entry (search.Entry) is an executed input; `select` reads its `arcs`, `kind` (the outcome
kind), `returned` (the reference returned normally), `value_key` (a text identifying the
outcome), `seq` (discovery order), `kills` (the mutants it kills), `ill_typed` (its outcome is
an interpreter error on ill-typed input), `obs` (the reference's observation) and `verified`
(a second run gave the same observation), and re-runs entries through the explorer's `execute`,
`is_deterministic` and `verify`.

Tests should tell right code from wrong code, not only reach the function's branches: the cover
values the mutants an input kills as much as the arcs it reaches, prefers inputs on which the
reference returns normally, keeps at most one test whose outcome is an interpreter error on
ill-typed input (a `TypeError` or `AttributeError` the language raised, which says little about
the function), and avoids inputs that add nothing new.
"""

from __future__ import annotations

from .tracing import Stop

# The greedy cover's gain: new arcs, plus KILL_WEIGHT per mutant newly killed, plus KIND_BONUS
# for an outcome kind not seen yet. An ill-typed input's gain is scaled by ILL_TYPED_FACTOR; an
# input on which the reference returns normally gets RETURN_BONUS on top (ties go to it).
KILL_WEIGHT = 2
KIND_BONUS = 1
RETURN_BONUS = 0.5
ILL_TYPED_FACTOR = 0.5
# A doctest example or call site (a use the authors wrote) that adds anything gets this bonus.
EXAMPLE_BONUS = 4
# Among inputs that add as much, those that kill more mutants in all (already killed ones
# too) tell code apart better: KILLS_BONUS per mutant.
KILLS_BONUS = 0.1
# Tests whose outcome is an interpreter error on ill-typed input, at most (unless nothing else
# makes the 3 tests a harness needs).
MAX_ILL_TYPED = 1


class Selection:
    """The choice of at most `max_tests` entries: a greedy cover of the arcs, mutants killed and
    outcome kinds of the kept inputs (`corpus`) and of the `candidates` (inputs tried but not
    kept that kill mutants), then (preferably) at least 3 tests and one normal return, topped up
    from the inputs tried but not kept (`tried_log`).

    Entries chosen must be deterministic: corpus entries are (`verified`); others are re-run
    first, by `verify(entry) -> bool` when given (one run compared with the entry's `obs`), else
    by `execute(ctor_call, call, traced=False)` (status, observation, arcs) and
    `is_deterministic(ctor_call, call, observation)`; all of them may raise Stop when the budget
    is exhausted (the entry is then not taken)."""

    def __init__(
        self,
        corpus,
        tried_log,
        max_tests: int,
        execute,
        is_deterministic,
        candidates=(),
        verify=None,
    ):
        self.corpus = corpus
        self.tried_log = tried_log
        self.max_tests = max_tests
        self.execute = execute
        self.is_deterministic = is_deterministic
        self.verify = verify
        # The corpus holds inputs kept after a second run.
        for e in corpus:
            e.verified = True
        in_corpus = {id(e) for e in corpus}
        self.pool = list(corpus) + sorted(
            (c for c in candidates if id(c) not in in_corpus), key=lambda e: e.seq
        )
        # Entries found not to be deterministic (by id).
        self.rejected: set = set()

    def choose(self) -> list:
        """The chosen entries, in discovery order."""
        chosen = self.cover()
        wanted = min(3, self.max_tests)
        # At least 3 tests from the kept inputs: normal returns that add something first.
        for accept in (
            lambda e: e.returned and self.novel(e, chosen),
            lambda e: self.novel(e, chosen),
            lambda e: True,
        ):
            for e in self.pool:
                if len(chosen) >= wanted:
                    break
                if e not in chosen and self.allowed(e, chosen) and accept(e) and self.usable(e):
                    chosen.append(e)
        # At least one test where the reference returns normally, if any input did.
        if not any(e.returned for e in chosen):
            normal = next(
                (e for e in self.pool if e.returned and e not in chosen and self.usable(e)), None
            )
            if normal is None:
                normal = self.top_up(lambda e: e.returned, 1, chosen)
                normal = normal[0] if normal else None
            if normal is not None and normal not in chosen:
                if len(chosen) >= self.max_tests:
                    chosen.pop()
                chosen.append(normal)
        # Top up: normal returns with distinct values, other distinct outcomes, then any (an
        # ill-typed input beyond the first only as a last resort).
        for accept, distinct in (
            (lambda e: e.returned and self.allowed(e, chosen), True),
            (lambda e: self.allowed(e, chosen), True),
            (lambda e: True, False),
        ):
            if len(chosen) < wanted:
                chosen += self.top_up(accept, wanted - len(chosen), chosen, distinct)
        chosen.sort(key=lambda e: e.seq)
        return chosen

    def cover(self) -> list:
        """A greedy cover of the pool: repeatedly the entry with the best gain (new arcs, 2 per
        newly killed mutant, 1 for an outcome kind not yet seen unless ill-typed; halved for an
        ill-typed input, plus a half for a normal return, 4 for a doctest example or call site and a
        tenth per mutant it kills in all), the earliest on ties, up to `max_tests`.
        Entries that add nothing are never taken."""
        chosen: list = []
        arcs: set = set()
        kinds: set = set()
        killed: set = set()
        while len(chosen) < self.max_tests:
            best, best_score = None, 0.0
            for e in self.pool:
                if e in chosen or id(e) in self.rejected or not self.allowed(e, chosen):
                    continue
                # A new kind of outcome only counts for an input that is not ill-typed: an
                # interpreter error is taken for the arcs it reaches or the mutants it kills.
                gain = (
                    len(e.arcs - arcs)
                    + KILL_WEIGHT * len(e.kills - killed)
                    + (KIND_BONUS if e.kind not in kinds and not e.ill_typed else 0)
                )
                if gain <= 0:
                    continue
                score = gain * (ILL_TYPED_FACTOR if e.ill_typed else 1.0)
                score += RETURN_BONUS if e.returned else 0.0
                score += EXAMPLE_BONUS if e.example else 0.0
                score += KILLS_BONUS * len(e.kills)
                if score > best_score:
                    best, best_score = e, score
            if best is None:
                break
            if not self.usable(best):
                continue
            chosen.append(best)
            arcs |= best.arcs
            kinds.add(best.kind)
            killed |= best.kills
        return chosen

    @staticmethod
    def allowed(e, chosen) -> bool:
        """Whether `e` may join `chosen`: at most MAX_ILL_TYPED ill-typed inputs."""
        return not e.ill_typed or sum(1 for c in chosen if c.ill_typed) < MAX_ILL_TYPED

    @staticmethod
    def novel(e, chosen) -> bool:
        """Whether `e` differs from every chosen entry in its arcs, outcome kind or mutants
        killed (otherwise it is a near-duplicate)."""
        signature = e.signature()
        return all(c.signature() != signature for c in chosen)

    def usable(self, e) -> bool:
        """Whether an entry is deterministic: known, or found by re-running it (False when
        the budget stops the re-run)."""
        if e.verified:
            return True
        if id(e) in self.rejected:
            return False
        try:
            if self.verify is not None:
                ok = self.verify(e)
            else:
                status, obs, _ = self.execute(e.ctor_call, e.call, traced=False)
                ok = status == "ok" and self.is_deterministic(e.ctor_call, e.call, obs)
        except Stop:
            ok = False
        if ok:
            e.verified = True
        else:
            self.rejected.add(id(e))
        return ok

    def top_up(self, accept, count: int, chosen: list, distinct: bool = True) -> list:
        """Up to `count` tried inputs that `accept` takes (with outcomes distinct from those
        chosen, if `distinct`), re-run to make sure they are deterministic: once, compared with
        their recorded observation, or twice when there is none."""
        out = []
        seen = {e.value_key for e in chosen}
        for e in self.tried_log:
            if len(out) >= count:
                break
            if not accept(e) or e in chosen or e in out or (distinct and e.value_key in seen):
                continue
            if id(e) in self.rejected:
                continue
            try:
                if e.obs is not None:
                    ok = self.is_deterministic(e.ctor_call, e.call, e.obs)
                else:
                    status, obs, _ = self.execute(e.ctor_call, e.call, traced=False)
                    ok = status == "ok" and self.is_deterministic(e.ctor_call, e.call, obs)
            except Stop:
                break
            if not ok:
                self.rejected.add(id(e))
                continue
            e.verified = True
            seen.add(e.value_key)
            out.append(e)
        return out
