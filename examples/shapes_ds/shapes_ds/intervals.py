"""Half-open numeric intervals ``[start, end)`` and sets of them."""

import bisect

from .errors import IntervalError


def normalize(interval):
    """Return ``interval`` as a ``(start, end)`` tuple with ``start <= end``.

    >>> normalize([5, 2])
    (2, 5)
    """
    if len(interval) != 2:
        raise IntervalError(f"an interval has two bounds, got {interval!r}")
    start, end = interval
    return (start, end) if start <= end else (end, start)


def merge_intervals(intervals, touching=True):
    """Merge overlapping intervals and return them sorted; empty intervals vanish.

    With ``touching`` the intervals ``(1, 2)`` and ``(2, 3)`` merge as well.

    >>> merge_intervals([(8, 10), (1, 3), (2, 6), (6, 7), (4, 4)])
    [(1, 7), (8, 10)]
    >>> merge_intervals([(1, 2), (2, 3)], touching=False)
    [(1, 2), (2, 3)]
    """
    cleaned = sorted(normalize(i) for i in intervals)
    merged = []
    for start, end in cleaned:
        if start == end:
            continue
        if merged and (start < merged[-1][1] or (touching and start == merged[-1][1])):
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlaps(a, b):
    """Whether two intervals share at least one point.

    >>> overlaps((1, 5), (4, 8)), overlaps((1, 5), (5, 8))
    (True, False)
    """
    a_start, a_end = normalize(a)
    b_start, b_end = normalize(b)
    return a_start < b_end and b_start < a_end


def intersect(first, second):
    """Return the intersection of two collections of intervals, merged and sorted.

    >>> intersect([(0, 5), (10, 15)], [(3, 12)])
    [(3, 5), (10, 12)]
    """
    left, right = merge_intervals(first), merge_intervals(second)
    result = []
    i = j = 0
    while i < len(left) and j < len(right):
        start = max(left[i][0], right[j][0])
        end = min(left[i][1], right[j][1])
        if start < end:
            result.append((start, end))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return result


def total_length(intervals):
    """Total length covered by ``intervals``, counting overlaps once.

    >>> total_length([(0, 4), (2, 6), (10, 11)])
    7
    """
    merged = merge_intervals(intervals)
    return sum(end - start for start, end in merged)


def gaps(intervals, bounds=None):
    """Return the uncovered stretches between ``intervals``, optionally within ``bounds``.

    >>> gaps([(1, 3), (5, 6)], bounds=(0, 10))
    [(0, 1), (3, 5), (6, 10)]
    """
    merged = merge_intervals(intervals)
    if bounds is None:
        if not merged:
            return []
        bounds = (merged[0][0], merged[-1][1])
    low, high = normalize(bounds)
    result = []
    cursor = low
    for start, end in merged:
        if start > cursor:
            result.append((cursor, min(start, high)))
        cursor = max(cursor, end)
        if cursor >= high:
            break
    if cursor < high:
        result.append((cursor, high))
    return [(s, e) for s, e in result if s < e]


class IntervalSet:
    """A set of numbers stored as sorted, disjoint half-open intervals.

    >>> hours = IntervalSet([(9, 12), (13, 17)])
    >>> hours.contains(12), hours.contains(16.5)
    (False, True)
    >>> hours.add(12, 13)
    (9, 17)
    """

    def __init__(self, intervals=()):
        self._intervals = merge_intervals(intervals)

    def __repr__(self):
        return f"IntervalSet({self._intervals!r})"

    def __iter__(self):
        return iter(self._intervals)

    def __eq__(self, other):
        return isinstance(other, IntervalSet) and self._intervals == other._intervals

    @property
    def span(self):
        if not self._intervals:
            return None
        return (self._intervals[0][0], self._intervals[-1][1])

    def _locate(self, point):
        index = bisect.bisect_right(self._intervals, (point, float("inf"))) - 1
        return index if index >= 0 and point < self._intervals[index][1] else None

    def contains(self, point):
        """Whether ``point`` lies inside one of the intervals."""
        index = self._locate(point)
        return index is not None

    def add(self, start, end):
        """Add ``[start, end)`` and return the merged interval that now holds it."""
        start, end = normalize((start, end))
        self._intervals = merge_intervals(self._intervals + [(start, end)])
        index = self._locate(start)
        return self._intervals[index] if index is not None else None

    def remove(self, start, end):
        """Remove ``[start, end)`` from the set and return the length actually removed.

        >>> day = IntervalSet([(0, 10), (20, 30)])
        >>> day.remove(5, 25)
        10
        >>> day
        IntervalSet([(0, 5), (25, 30)])
        """
        low, high = normalize((start, end))
        kept = []
        removed = 0
        for a, b in self._intervals:
            if b <= low or a >= high:
                kept.append((a, b))
                continue
            if a < low:
                kept.append((a, low))
            if b > high:
                kept.append((high, b))
            removed += min(b, high) - max(a, low)
        self._intervals = kept
        return removed

    def union(self, other):
        """Return a new set with the points of ``self`` or ``other``."""
        combined = list(self._intervals) + list(other)
        return IntervalSet(combined)

    def intersection(self, other):
        """Return a new set with the points in both ``self`` and ``other``.

        >>> IntervalSet([(0, 10)]).intersection(IntervalSet([(5, 20), (30, 40)]))
        IntervalSet([(5, 10)])
        """
        common = intersect(self._intervals, list(other))
        return IntervalSet(common)
