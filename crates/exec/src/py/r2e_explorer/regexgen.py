"""Strings that a regular expression finds: inputs for code that parses its argument with one.

Made from the pattern's parse tree, a walk of which makes one string: literals as they are, a
member of each class, a number of repeats, an alternative of each branch, the contents of
lookarounds (a back reference repeats its group's text). The first walk takes every first
choice (the fewest repeats, the first alternative), the next the last ones, then the k-th, then
random ones; only strings the pattern finds are kept.

Two callers: the static pools (patterns a function body writes, or module-level patterns it
names; `static.regex_samples`), and the explorer's pattern watch (the compiled patterns the
calls actually used, at any depth: isodate's `parse_time` tries one ISO 8601 pattern after
another from a cache its body never names).
"""

from __future__ import annotations

import random
import re

try:  # Python 3.11+
    from re import _constants as sre_c
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - older interpreters
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

# Strings per pattern, repeats beyond a repeat's minimum, and characters tried for a class.
PER_PATTERN = 6
EXTRA_REPEATS = 2
MAX_LENGTH = 80
CLASS_CANDIDATES = "a0Z9 _-.:+,/Tzx"
CATEGORY_CHARS = {
    sre_c.CATEGORY_DIGIT: "0123456789",
    sre_c.CATEGORY_NOT_DIGIT: "aZ -_.",
    sre_c.CATEGORY_SPACE: " \t",
    sre_c.CATEGORY_NOT_SPACE: "aZ09_-.",
    sre_c.CATEGORY_WORD: "aZ09_",
    sre_c.CATEGORY_NOT_WORD: " -.:,",
}


class _TooLong(Exception):
    """A walk's string passed MAX_LENGTH: it is abandoned as soon as it does, so that nested
    repeats (`(?:a{1000}){1000}`) cost no more than a short string."""


class _Walk:
    """One string from a parse tree. `choice(n)` picks among n alternatives (a branch, a
    repeat count, a character)."""

    def __init__(self, choice):
        self.choice = choice
        self.groups: dict = {}

    def seq(self, items) -> str:
        parts, length = [], 0
        for op, av in items:
            part = self.node(op, av)
            length += len(part)
            if length > MAX_LENGTH:
                raise _TooLong
            parts.append(part)
        return "".join(parts)

    def node(self, op, av) -> str:
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.NOT_LITERAL:
            return next(c for c in CLASS_CANDIDATES if ord(c) != av)
        if op is sre_c.ANY:
            return CLASS_CANDIDATES[self.choice(3)]
        if op is sre_c.IN:
            return self.in_class(av)
        if op is sre_c.BRANCH:
            branches = av[1]
            return self.seq(branches[self.choice(len(branches))])
        if op is sre_c.SUBPATTERN:
            group, _, _, items = av
            text = self.seq(items)
            if group is not None:
                self.groups[group] = text
            return text
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) or op is getattr(
            sre_c, "POSSESSIVE_REPEAT", None
        ):
            low, high, items = av
            high = low + EXTRA_REPEATS if high is sre_c.MAXREPEAT else min(high, low + EXTRA_REPEATS)
            count = low + self.choice(high - low + 1)
            parts, length = [], 0
            for _ in range(count):
                part = self.seq(items)
                length += len(part)
                if length > MAX_LENGTH:
                    raise _TooLong
                parts.append(part)
            return "".join(parts)
        if op is getattr(sre_c, "ATOMIC_GROUP", None):
            return self.seq(av)
        if op is sre_c.GROUPREF:
            return self.groups.get(av, "")
        if op is sre_c.ASSERT:
            # A lookahead's or lookbehind's text, in place: the string then has it.
            return self.seq(av[1])
        if op is sre_c.GROUPREF_EXISTS:
            group, yes, no = av
            if group in self.groups:
                return self.seq(yes)
            return self.seq(no) if no is not None else ""
        if op is sre_c.CATEGORY:
            chars = CATEGORY_CHARS.get(av, "a")
            return chars[self.choice(len(chars))]
        # Anchors and negative lookarounds match no text of their own.
        return ""

    def in_class(self, items) -> str:
        negate = any(op is sre_c.NEGATE for op, _ in items)
        if negate:
            for c in CLASS_CANDIDATES:
                if not _in(items, ord(c)):
                    return c
            raise ValueError("no candidate character is outside the class")
        options = []
        for op, av in items:
            if op is sre_c.LITERAL:
                options.append(chr(av))
            elif op is sre_c.RANGE:
                low, high = av
                options += [chr(low), chr(high), chr((low + high) // 2), chr(min(low + 1, high))]
            elif op is sre_c.CATEGORY:
                options += CATEGORY_CHARS.get(av, "a")[:3]
        if not options:
            return "a"
        return options[self.choice(len(options))]


def _in(items, code: int) -> bool:
    for op, av in items:
        if op is sre_c.LITERAL and av == code:
            return True
        if op is sre_c.RANGE and av[0] <= code <= av[1]:
            return True
        if op is sre_c.CATEGORY:
            chars = CATEGORY_CHARS.get(av, "")
            if chr(code) in chars:
                return True
    return False


def examples(pattern, seed: int = 0, count: int = PER_PATTERN) -> list:
    """Up to `count` distinct strings (bytes for a bytes pattern) in which `pattern` (compiled
    or text) finds a match, in the order the walks made them; none when it cannot be read."""
    try:
        compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        tree = list(sre_parse.parse(compiled.pattern, compiled.flags))
    except Exception:  # noqa: BLE001 - a pattern this module cannot read gives nothing
        return []
    source = compiled.pattern
    rng = random.Random(f"{seed}:{source!r}")
    walks = [lambda n: 0, lambda n: n - 1]
    walks += [lambda n, k=k: k % n for k in range(1, count)]
    walks += [lambda n: rng.randrange(n)] * (count * 3)
    out: list = []
    for choice in walks:
        try:
            text = _Walk(choice).seq(tree)
        except (_TooLong, RecursionError, MemoryError, StopIteration, ValueError):
            continue
        try:
            value = text.encode("latin-1") if isinstance(source, bytes) else text
            if compiled.search(value) is None:
                continue
        except Exception:  # noqa: BLE001 - a character bytes cannot hold, say
            continue
        if value not in out:
            out.append(value)
            if len(out) >= count:
                break
    return out
