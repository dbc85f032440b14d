"""Wrapping, justifying and truncating text."""

from .constants import DEFAULT_WIDTH, ELLIPSIS
from .errors import TextkitError


def _chop(word, width):
    return [word[i:i + width] for i in range(0, len(word), width)]


def wrap(text, width=DEFAULT_WIDTH, break_long_words=True):
    """Wrap ``text`` into lines of at most ``width`` characters.

    Whitespace is collapsed. Words longer than ``width`` are split unless
    ``break_long_words`` is false, in which case they get a line of their own.

    >>> wrap("The quick brown fox jumps over the lazy dog", 10)
    ['The quick', 'brown fox', 'jumps over', 'the lazy', 'dog']
    >>> wrap("abcdefgh ij", 3)
    ['abc', 'def', 'gh', 'ij']
    >>> wrap("   ", 5)
    []
    """
    if width < 1:
        raise TextkitError("width must be at least 1")
    lines = []
    current = ""
    for word in text.split():
        pieces = _chop(word, width) if break_long_words else [word]
        for piece in pieces:
            if not current:
                current = piece
            elif len(current) + 1 + len(piece) <= width:
                current += " " + piece
            else:
                lines.append(current)
                current = piece
    if current:
        lines.append(current)
    return lines


def fill(text, width=DEFAULT_WIDTH, indent=""):
    """Wrap each blank-line separated paragraph of ``text`` and join the result.

    Every line is prefixed with ``indent``, which counts towards ``width``.
    """
    if len(indent) >= width:
        raise TextkitError("indent leaves no room for text")
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    blocks = []
    for paragraph in paragraphs:
        lines = wrap(paragraph, width - len(indent))
        blocks.append("\n".join(indent + line for line in lines))
    return "\n\n".join(blocks)


def hanging_indent(text, width=DEFAULT_WIDTH, indent="    "):
    """Wrap ``text`` with every line but the first indented by ``indent``.

    >>> print(hanging_indent("usage: tool [options] file ...", 16, "  "))
    usage: tool
      [options] file
      ...
    """
    first, *rest = wrap(text, width) or [""]
    if not rest:
        return first
    remainder = " ".join(rest)
    lines = [first] + [indent + line for line in wrap(remainder, width - len(indent))]
    return "\n".join(lines)


def truncate(text, width, ellipsis=ELLIPSIS, whole_words=True):
    """Shorten ``text`` to at most ``width`` characters, ending with ``ellipsis``.

    With ``whole_words`` the cut happens at the last space that fits.

    >>> truncate("Hello world, how are you?", 15)
    'Hello world,...'
    >>> truncate("Hello world, how are you?", 14)
    'Hello...'
    >>> truncate("Hello world, how are you?", 14, whole_words=False)
    'Hello world...'
    >>> truncate("Supercalifragilistic", 8, ellipsis="~")
    'Superca~'
    >>> truncate("short", 10)
    'short'
    """
    if width < 0:
        raise TextkitError("width must be non-negative")
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return ellipsis[:width]
    budget = width - len(ellipsis)
    cut = text[:budget]
    if whole_words and not text[budget].isspace() and not cut[-1].isspace():
        space = cut.rfind(" ")
        if space > 0:
            cut = cut[:space]
    return cut.rstrip() + ellipsis


def justify_line(line, width=DEFAULT_WIDTH):
    """Pad the gaps between the words of ``line`` so that it is exactly ``width`` long.

    Extra spaces go to the leftmost gaps. A single word is left-aligned.

    >>> justify_line("a bb ccc", 12)
    'a   bb   ccc'
    >>> justify_line("one two three", 16)
    'one   two  three'
    """
    parts = line.split()
    if len(parts) < 2:
        return line.strip().ljust(width)
    gaps = len(parts) - 1
    spaces = width - sum(len(part) for part in parts)
    if spaces < gaps:
        raise TextkitError(f"line is longer than {width} characters")
    base, extra = divmod(spaces, gaps)
    out = [part + " " * (base + (1 if i < extra else 0)) for i, part in enumerate(parts[:-1])]
    out.append(parts[-1])
    return "".join(out)


def justify(text, width=DEFAULT_WIDTH):
    """Wrap ``text`` and fully justify every line except the last one."""
    lines = wrap(text, width)
    if not lines:
        return ""
    body = [justify_line(line, width) for line in lines[:-1]]
    return "\n".join(body + [lines[-1]])
