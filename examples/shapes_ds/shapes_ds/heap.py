"""A priority queue that keeps only its highest-priority items."""

import bisect

from . import validate

DEFAULT_CAPACITY = 16


class BoundedPriorityQueue:
    """Holds at most ``capacity`` items; when full, the lowest priority is dropped.

    Items of equal priority leave in insertion order.

    >>> queue = BoundedPriorityQueue(2)
    >>> queue.push("low", 1)
    >>> queue.push("high", 5)
    >>> queue.push("mid", 3)
    'low'
    >>> queue.pop(), queue.pop()
    ('high', 'mid')
    """

    def __init__(self, capacity=DEFAULT_CAPACITY, items=()):
        self.capacity = validate.require_capacity(capacity)
        self._entries = []  # ascending (priority, -sequence, item)
        self._sequence = 0
        for item, priority in items:
            self.push(item, priority)

    def __len__(self):
        return len(self._entries)

    def __repr__(self):
        return f"BoundedPriorityQueue(capacity={self.capacity}, size={len(self)})"

    @property
    def is_full(self):
        return len(self._entries) >= self.capacity

    def _index_of(self, item):
        for index, entry in enumerate(self._entries):
            if entry[2] == item:
                return index
        raise KeyError(item)

    def push(self, item, priority):
        """Add ``item`` and return what fell out: the evicted item, ``item`` itself, or ``None``.

        When the queue is full, an item that does not beat the current lowest
        priority is rejected and returned unchanged.
        """
        entry = (priority, -self._sequence, item)
        self._sequence += 1
        if not self.is_full:
            bisect.insort(self._entries, entry)
            return None
        lowest = self._entries[0]
        if entry[:2] < lowest[:2]:
            return item
        self._entries.pop(0)
        bisect.insort(self._entries, entry)
        return lowest[2]

    def pop(self):
        if not self._entries:
            raise IndexError("pop from an empty priority queue")
        return self._entries.pop()[2]

    def peek(self):
        if not self._entries:
            raise IndexError("peek at an empty priority queue")
        return self._entries[-1][2]

    def pop_many(self, count):
        """Remove and return up to ``count`` items, highest priority first."""
        validate.require_non_negative(count, "count")
        taken = []
        while self._entries and len(taken) < count:
            taken.append(self.pop())
        return taken

    def priority_of(self, item):
        """Return the priority of ``item``; raise ``KeyError`` if it is not queued.

        >>> BoundedPriorityQueue(3, [("a", 2), ("b", 7)]).priority_of("b")
        7
        """
        index = self._index_of(item)
        return self._entries[index][0]

    def remove(self, item):
        """Remove ``item`` from the queue and return its priority."""
        index = self._index_of(item)
        priority, _, _ = self._entries.pop(index)
        return priority

    def update_priority(self, item, priority):
        """Give ``item`` a new priority and return the old one.

        >>> queue = BoundedPriorityQueue(3, [("a", 1), ("b", 2)])
        >>> queue.update_priority("a", 9)
        1
        >>> queue.peek()
        'a'
        """
        old = self.remove(item)
        self.push(item, priority)
        return old

    def merged(self, other):
        """Return a new queue holding the best items of ``self`` and ``other``.

        The new capacity is the larger of the two.
        """
        capacity = max(self.capacity, other.capacity)
        result = BoundedPriorityQueue(capacity)
        for priority, _, item in self._entries + other._entries:
            result.push(item, priority)
        return result


def top_k(values, k, key=None):
    """Return the ``k`` largest ``values`` (by ``key``), largest first, stable on ties.

    >>> top_k([5, 1, 9, 3, 9], 3)
    [9, 9, 5]
    >>> top_k(["pear", "fig", "banana"], 2, key=len)
    ['banana', 'pear']
    """
    queue = BoundedPriorityQueue(validate.require_capacity(k, "k"))
    for value in values:
        queue.push(value, value if key is None else key(value))
    return queue.pop_many(k)
