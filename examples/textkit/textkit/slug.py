"""URL slugs."""

import re

from . import case
from .constants import MAX_SLUG_LENGTH, SLUG_SEPARATOR, TRANSLITERATION
from .errors import TextkitError

_SLUG_PART = re.compile(r"[a-z0-9]+")


def transliterate(text):
    """Replace accented Latin letters with plain ASCII approximations.

    >>> transliterate("Crème Brûlée à la Ærø")
    'Creme Brulee a la AEro'
    """
    out = []
    for char in text:
        lower = char.lower()
        plain = TRANSLITERATION.get(lower)
        if plain is None:
            out.append(char)
        elif char != lower:
            out.append(plain.upper())
        else:
            out.append(plain)
    return "".join(out)


def _fit_parts(parts, separator, max_length):
    """Keep the leading ``parts`` whose joined length fits in ``max_length``.

    A first part that is too long on its own is cut rather than dropped, so a
    non-empty slug never becomes empty.
    """
    if max_length < 1:
        raise TextkitError("max_length must be at least 1")
    kept = []
    length = 0
    for part in parts:
        extra = len(part) + (len(separator) if kept else 0)
        if length + extra > max_length:
            break
        kept.append(part)
        length += extra
    if not kept and parts:
        kept = [parts[0][:max_length]]
    return kept


def slugify(text, separator=SLUG_SEPARATOR, max_length=MAX_SLUG_LENGTH):
    """Turn ``text`` into a lower-case ASCII slug.

    Runs of anything but letters and digits become one ``separator``. The slug
    is cut at a word boundary so that it is at most ``max_length`` long
    (``None`` for no limit).

    >>> slugify("  Hello, Wörld! -- 2024 edition ")
    'hello-world-2024-edition'
    >>> slugify("Hello World", separator="_", max_length=8)
    'hello'
    """
    if not separator:
        raise TextkitError("separator must not be empty")
    parts = _SLUG_PART.findall(transliterate(text).lower())
    if max_length is not None:
        parts = _fit_parts(parts, separator, max_length)
    return separator.join(parts)


def unique_slug(text, existing, separator=SLUG_SEPARATOR):
    """Return a slug for ``text`` that is not in ``existing``, adding ``-2``, ``-3``...

    >>> unique_slug("Hello World", {"hello-world", "hello-world-2"})
    'hello-world-3'
    """
    base = slugify(text, separator=separator)
    if base not in existing:
        return base
    counter = 2
    while f"{base}{separator}{counter}" in existing:
        counter += 1
    return f"{base}{separator}{counter}"


def identifier_to_slug(name, separator=SLUG_SEPARATOR):
    """Slug for a code identifier, splitting camelCase and snake_case words."""
    parts = case.split_identifier(name)
    return slugify(" ".join(parts), separator=separator, max_length=None)
