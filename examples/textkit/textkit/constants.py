"""Constants shared by the textkit modules."""

import re

DEFAULT_WIDTH = 70
ELLIPSIS = "..."
SLUG_SEPARATOR = "-"
MAX_SLUG_LENGTH = 80

# A word is a run of letters/digits, optionally with an apostrophe suffix ("don't").
WORD_PATTERN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
# A token is a word or a single punctuation character.
TOKEN_PATTERN = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]|_")
SENTENCE_END = ".!?"

# Words left in lower case by title_case unless they start or end the title.
SMALL_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on", "or", "the", "to", "with"}
)

# Lower-case accented Latin letters and their plain ASCII spelling.
TRANSLITERATION = {
    "à": "a", "á": "a", "â": "a", "ã": "a", "ä": "a", "å": "a", "æ": "ae",
    "ç": "c", "è": "e", "é": "e", "ê": "e", "ë": "e", "ì": "i", "í": "i",
    "î": "i", "ï": "i", "ñ": "n", "ò": "o", "ó": "o", "ô": "o", "õ": "o",
    "ö": "o", "ø": "o", "œ": "oe", "ß": "ss", "ù": "u", "ú": "u", "û": "u",
    "ü": "u", "ý": "y", "ÿ": "y",
}

# Default costs of the three edit operations of levenshtein().
DEFAULT_COSTS = {"insert": 1, "delete": 1, "substitute": 1}
