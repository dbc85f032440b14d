"""A least-recently-used cache."""

from collections import OrderedDict

from .validate import require_capacity

DEFAULT_CACHE_SIZE = 128
_MISSING = object()


class LRUCache:
    """A mapping of at most ``capacity`` entries that forgets the least recently used.

    >>> cache = LRUCache(2)
    >>> cache.put("a", 1)
    >>> cache.put("b", 2)
    >>> cache.get("a")
    1
    >>> cache.put("c", 3)
    'b'
    >>> cache.keys_by_recency()
    ['a', 'c']
    """

    def __init__(self, capacity=DEFAULT_CACHE_SIZE):
        self.capacity = require_capacity(capacity)
        self._data = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def __repr__(self):
        return f"LRUCache(capacity={self.capacity}, size={len(self._data)})"

    @property
    def hit_rate(self):
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0

    def keys_by_recency(self):
        return list(self._data)

    def _evict_overflow(self):
        evicted = []
        while len(self._data) > self.capacity:
            key, _ = self._data.popitem(last=False)
            evicted.append(key)
        return evicted

    def get(self, key, default=None):
        """Return the value for ``key`` and mark it as recently used, else ``default``."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        self._data.move_to_end(key)
        return value

    def put(self, key, value):
        """Store ``value`` under ``key``; return the evicted key, or ``None``."""
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        evicted = self._evict_overflow()
        return evicted[0] if evicted else None

    def peek(self, key, default=_MISSING):
        """Return the value for ``key`` without touching its recency.

        Raises ``KeyError`` when the key is absent and no ``default`` is given.
        """
        if key in self._data:
            return self._data[key]
        if default is _MISSING:
            raise KeyError(key)
        return default

    def pop(self, key, default=_MISSING):
        """Remove ``key`` and return its value (or ``default`` when absent)."""
        value = self._data.pop(key, _MISSING)
        if value is not _MISSING:
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def resize(self, capacity):
        """Change the capacity and return the keys evicted to fit, oldest first.

        >>> cache = LRUCache(3)
        >>> for key in "xyz":
        ...     _ = cache.put(key, key.upper())
        >>> cache.resize(1)
        ['x', 'y']
        """
        self.capacity = require_capacity(capacity)
        return self._evict_overflow()

    def get_or_compute(self, key, factory):
        """Return the cached value for ``key``, computing it with ``factory(key)`` on a miss."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = factory(key)
            self.put(key, value)
        return value


def cached_map(func, values, capacity=DEFAULT_CACHE_SIZE):
    """Apply ``func`` to ``values`` through an LRU cache; return ``(results, hit_rate)``.

    >>> cached_map(len, ["aa", "b", "aa", "aa"], capacity=1)
    ([2, 1, 2, 2], 0.25)
    """
    cache = LRUCache(capacity)
    results = [cache.get_or_compute(value, func) for value in values]
    return results, cache.hit_rate
