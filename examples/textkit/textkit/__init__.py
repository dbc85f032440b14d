"""textkit: small, dependency-free text utilities."""

from .case import convert_case, split_identifier, title_case, to_camel_case, to_kebab_case, to_pascal_case, to_snake_case
from .distance import closest_match, hamming_distance, levenshtein, similarity, suggest
from .errors import TemplateError, TextkitError
from .slug import identifier_to_slug, slugify, transliterate, unique_slug
from .template import Template, render
from .tokenize import split_sentences, tokenize, word_count, word_frequencies, word_ngrams, words
from .wrap import fill, hanging_indent, justify, justify_line, truncate, wrap

__version__ = "0.1.0"
