"""Splitting text into tokens, words and sentences."""

from collections import Counter

from .constants import SENTENCE_END, TOKEN_PATTERN, WORD_PATTERN


def tokenize(text, lowercase=False):
    """Split ``text`` into word and punctuation tokens.

    >>> tokenize("Hello, world!")
    ['Hello', ',', 'world', '!']
    >>> tokenize("Don't PANIC", lowercase=True)
    ["don't", 'panic']
    >>> tokenize("")
    []
    """
    tokens = TOKEN_PATTERN.findall(text or "")
    if lowercase:
        tokens = [token.lower() for token in tokens]
    return tokens


def words(text, lowercase=True):
    """Return the words of ``text``, dropping punctuation and whitespace.

    >>> words("It's 9 o'clock -- time to go!")
    ["it's", '9', "o'clock", 'time', 'to', 'go']
    """
    found = WORD_PATTERN.findall(text or "")
    if lowercase:
        return [word.lower() for word in found]
    return found


def word_count(text):
    """Count the words of ``text``; punctuation does not count.

    >>> word_count("one, two... three!")
    3
    """
    found = words(text, lowercase=False)
    return len(found)


def word_frequencies(text, top=None):
    """Return ``(word, count)`` pairs, most frequent first, ties in alphabetical order.

    Words are compared case-insensitively. ``top`` limits the number of pairs.
    """
    if top is not None and top < 0:
        raise ValueError("top must be non-negative")
    counts = Counter(words(text))
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return ranked if top is None else ranked[:top]


def split_sentences(text):
    """Split ``text`` into sentences ending with ``.``, ``!`` or ``?``.

    A terminator only ends a sentence when followed by whitespace or the end of
    the text, so ``"3.14"`` stays in one piece.

    >>> split_sentences("It works. Does it?  Yes!! Pi is 3.14")
    ['It works.', 'Does it?', 'Yes!!', 'Pi is 3.14']
    """
    sentences = []
    current = []
    for index, char in enumerate(text):
        current.append(char)
        at_boundary = index + 1 == len(text) or text[index + 1].isspace()
        if char in SENTENCE_END and at_boundary:
            sentence = "".join(current).strip()
            if sentence:
                sentences.append(sentence)
            current = []
    tail = "".join(current).strip()
    if tail:
        sentences.append(tail)
    return sentences


def word_ngrams(text, n=2):
    """Return the consecutive ``n``-word tuples of ``text``.

    >>> word_ngrams("the cat sat down", 3)
    [('the', 'cat', 'sat'), ('cat', 'sat', 'down')]
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    found = words(text)
    return [tuple(found[i:i + n]) for i in range(len(found) - n + 1)]
