"""String distances and fuzzy matching."""

from .constants import DEFAULT_COSTS
from .errors import TextkitError


def levenshtein(a, b, costs=None):
    """Weighted edit distance between ``a`` and ``b``.

    ``costs`` may override the ``insert``, ``delete`` and ``substitute`` costs
    of ``DEFAULT_COSTS``.

    >>> levenshtein("kitten", "sitting")
    3
    >>> levenshtein("", "abc")
    3
    >>> levenshtein("abc", "abd", costs={"substitute": 5})
    2
    """
    weights = dict(DEFAULT_COSTS, **(costs or {}))
    insert, delete, substitute = weights["insert"], weights["delete"], weights["substitute"]
    previous = [j * insert for j in range(len(b) + 1)]
    for i, char_a in enumerate(a, start=1):
        current = [i * delete]
        for j, char_b in enumerate(b, start=1):
            replace = previous[j - 1] + (0 if char_a == char_b else substitute)
            current.append(min(previous[j] + delete, current[j - 1] + insert, replace))
        previous = current
    return previous[-1]


def similarity(a, b):
    """Similarity ratio in ``[0, 1]`` derived from the edit distance.

    >>> similarity("hello", "hallo")
    0.8
    >>> similarity("", "")
    1.0
    """
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - levenshtein(a, b) / longest


def hamming_distance(a, b):
    """Number of positions at which two equally long strings differ."""
    if len(a) != len(b):
        raise TextkitError("hamming distance needs strings of equal length")
    return sum(1 for x, y in zip(a, b) if x != y)


def closest_match(word, candidates, cutoff=0.6):
    """Return the candidate most similar to ``word``, or ``None`` below ``cutoff``.

    Comparison ignores case; on a tie the earliest candidate wins.

    >>> closest_match("appel", ["apple", "ape", "maple"])
    'apple'
    >>> closest_match("xyz", ["apple"]) is None
    True
    """
    if not 0.0 <= cutoff <= 1.0:
        raise TextkitError("cutoff must be between 0 and 1")
    best, best_score = None, cutoff
    for candidate in candidates:
        score = similarity(word.lower(), candidate.lower())
        if score > best_score or (score == best_score and best is None):
            best, best_score = candidate, score
    return best


def suggest(word, vocabulary, limit=3, cutoff=0.5):
    """Return up to ``limit`` words of ``vocabulary`` close to ``word``, best first."""
    if limit < 0:
        raise TextkitError("limit must be non-negative")
    scored = [(similarity(word, entry), entry) for entry in set(vocabulary)]
    ranked = sorted((pair for pair in scored if pair[0] >= cutoff), key=lambda pair: (-pair[0], pair[1]))
    return [entry for _, entry in ranked[:limit]]
