"""A prefix tree of strings."""

from collections import Counter

import shapes_ds.heap as heap


class _Node:
    __slots__ = ("children", "terminal", "count")

    def __init__(self):
        self.children = {}
        self.terminal = False
        self.count = 0  # words at or below this node


class Trie:
    """A set of non-empty strings supporting prefix queries.

    >>> trie = Trie(["car", "cart", "care", "dog"])
    >>> trie.words_with_prefix("car")
    ['car', 'care', 'cart']
    >>> trie.count_prefix("ca"), len(trie)
    (3, 4)
    """

    def __init__(self, words=()):
        self._root = _Node()
        for word in words:
            self.insert(word)

    def __len__(self):
        return self._root.count

    def __repr__(self):
        return f"Trie({len(self)} words)"

    def _walk(self, text):
        node = self._root
        yield node
        for char in text:
            node = node.children.get(char)
            if node is None:
                return
            yield node

    def _path(self, text):
        nodes = list(self._walk(text))
        return nodes if len(nodes) == len(text) + 1 else None

    def insert(self, word):
        """Add ``word``; return whether it was new."""
        if not isinstance(word, str) or not word:
            raise ValueError("a trie holds non-empty strings")
        nodes = [self._root]
        for char in word:
            nodes.append(nodes[-1].children.setdefault(char, _Node()))
        added = not nodes[-1].terminal
        if added:
            nodes[-1].terminal = True
            for node in nodes:
                node.count += 1
        return added

    def contains(self, word):
        """Whether ``word`` itself (not merely a longer word) is stored."""
        path = self._path(word)
        return bool(word) and path is not None and path[-1].terminal

    def count_prefix(self, prefix):
        """Number of stored words starting with ``prefix``."""
        path = self._path(prefix)
        return path[-1].count if path else 0

    def words_with_prefix(self, prefix, limit=None):
        """Stored words starting with ``prefix`` in alphabetical order, at most ``limit``."""
        path = self._path(prefix)
        if path is None:
            return []
        found = []
        stack = [(path[-1], prefix)]
        while stack and (limit is None or len(found) < limit):
            node, text = stack.pop()
            if node.terminal:
                found.append(text)
            for char in sorted(node.children, reverse=True):
                stack.append((node.children[char], text + char))
        return found

    def longest_prefix_of(self, text):
        """Return the longest stored word that is a prefix of ``text`` (``""`` if none).

        >>> Trie(["a", "abc", "abcdef"]).longest_prefix_of("abcde")
        'abc'
        """
        best = 0
        for depth, node in enumerate(self._walk(text)):
            if node.terminal:
                best = depth
        return text[:best]

    def remove(self, word):
        """Remove ``word``, pruning empty branches; return the number of words left.

        Raises ``KeyError`` if the word is not stored.
        """
        path = self._path(word)
        if not word or path is None or not path[-1].terminal:
            raise KeyError(word)
        path[-1].terminal = False
        for node in path:
            node.count -= 1
        for parent, char in zip(reversed(path[:-1]), reversed(word)):
            if parent.children[char].count == 0:
                del parent.children[char]
        return len(self)


def longest_common_prefix(words):
    """Longest prefix shared by all ``words``.

    >>> longest_common_prefix(["flower", "flow", "flight"])
    'fl'
    >>> longest_common_prefix([])
    ''
    """
    if any(not word for word in words):
        return ""
    node, prefix = Trie(words)._root, []
    while len(node.children) == 1 and not node.terminal:
        (char, node), = node.children.items()
        prefix.append(char)
    return "".join(prefix)


def autocomplete(words, prefix, limit=5):
    """Complete ``prefix`` with the ``limit`` most frequent matching ``words``.

    Ties are broken alphabetically.

    >>> autocomplete(["tea", "ten", "tea", "tent", "to", "ten", "tea"], "te", 2)
    ['tea', 'ten']
    """
    frequencies = Counter(words)
    matches = Trie(frequencies).words_with_prefix(prefix)
    return heap.top_k(matches, limit, key=frequencies.__getitem__) if matches else []
