"""Converting identifiers and titles between letter cases."""

import re

from .constants import SLUG_SEPARATOR, SMALL_WORDS
from .errors import TextkitError

# Acronyms ("HTTP" in "parseHTTPResponse"), capitalised or lower-case words, digit runs.
IDENTIFIER_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_identifier(name):
    """Split an identifier in any common case into lower-case parts.

    >>> split_identifier("parseHTTPResponse2")
    ['parse', 'http', 'response', '2']
    >>> split_identifier("__snake_case__ and-kebab")
    ['snake', 'case', 'and', 'kebab']
    """
    parts = IDENTIFIER_PART.findall(name)
    return [part.lower() for part in parts]


def to_snake_case(name):
    """Convert ``name`` to ``snake_case``.

    >>> to_snake_case("parseHTTPResponse")
    'parse_http_response'
    """
    parts = split_identifier(name)
    return "_".join(parts)


def to_kebab_case(name):
    """Convert ``name`` to ``kebab-case``."""
    parts = split_identifier(name)
    return SLUG_SEPARATOR.join(parts)


def to_camel_case(name):
    """Convert ``name`` to ``camelCase``; an empty name stays empty.

    >>> to_camel_case("user_id_list")
    'userIdList'
    """
    parts = split_identifier(name)
    if not parts:
        return ""
    return parts[0] + "".join(part.capitalize() for part in parts[1:])


def to_pascal_case(name):
    """Convert ``name`` to ``PascalCase``."""
    parts = split_identifier(name)
    return "".join(part.capitalize() for part in parts)


def title_case(text):
    """Capitalise the words of a title, keeping short function words lower case.

    The first and last words are always capitalised.

    >>> title_case("the lord OF the rings")
    'The Lord of the Rings'
    >>> title_case("what it is for")
    'What It Is For'
    """
    pieces = text.split()
    last = len(pieces) - 1
    result = []
    for index, piece in enumerate(pieces):
        lower = piece.lower()
        if 0 < index < last and lower in SMALL_WORDS:
            result.append(lower)
        else:
            result.append(lower[:1].upper() + lower[1:])
    return " ".join(result)


def convert_case(name, style):
    """Convert ``name`` to the case ``style`` named in ``CASE_STYLES``.

    >>> convert_case("max retry count", "pascal")
    'MaxRetryCount'
    """
    try:
        converter = CASE_STYLES[style]
    except KeyError:
        known = ", ".join(sorted(CASE_STYLES))
        raise TextkitError(f"unknown case style {style!r} (expected one of {known})") from None
    return converter(name)


def _upper_snake(name):
    return to_snake_case(name).upper()


CASE_STYLES = {
    "snake": to_snake_case,
    "kebab": to_kebab_case,
    "camel": to_camel_case,
    "pascal": to_pascal_case,
    "constant": _upper_snake,
    "title": title_case,
}
