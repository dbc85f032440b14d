"""A tiny ``{{ placeholder|filter }}`` template engine."""

import re

import textkit.wrap as wrap_mod

from . import case
from .errors import TemplateError
from .slug import slugify

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*((?:\|\s*\w+(?::-?\d+)?\s*)*)\}\}")

FILTERS = {
    "upper": str.upper,
    "lower": str.lower,
    "strip": str.strip,
    "title": case.title_case,
    "snake": case.to_snake_case,
    "camel": case.to_camel_case,
    "slug": slugify,
    "truncate": wrap_mod.truncate,
    "fill": wrap_mod.fill,
}


def parse_filter(spec):
    """Split a filter spec such as ``"truncate:20"`` into its name and arguments.

    >>> parse_filter("truncate:20")
    ('truncate', [20])
    >>> parse_filter(" upper ")
    ('upper', [])
    """
    name, _, argument = spec.strip().partition(":")
    if name not in FILTERS:
        raise TemplateError(f"unknown filter {name!r}")
    args = [int(argument)] if argument else []
    return name, args


class Template:
    """A template whose ``{{ name }}`` fields are filled from a context mapping.

    Dotted names (``user.name``) look up nested mappings or attributes, and
    ``|filter`` pipes transform the value, e.g. ``{{ title|truncate:10 }}``.
    """

    def __init__(self, source, strict=True, missing=""):
        self.source = source
        self.strict = strict
        self.missing_value = missing

    def __repr__(self):
        return f"Template({self.source!r}, strict={self.strict})"

    @property
    def fields(self):
        names = []
        for match in PLACEHOLDER.finditer(self.source):
            if match.group(1) not in names:
                names.append(match.group(1))
        return names

    def _lookup(self, context, dotted, strict=None):
        """Resolve ``a.b.c`` in ``context`` through keys first, then attributes.

        ``strict`` overrides the template's own setting for this lookup.
        """
        strict = self.strict if strict is None else strict
        value = context
        for part in dotted.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif hasattr(value, part):
                value = getattr(value, part)
            elif strict:
                raise TemplateError(f"undefined variable {dotted!r}")
            else:
                return self.missing_value
        return value

    def apply_filters(self, value, pipeline):
        """Apply a ``|``-separated filter ``pipeline`` to ``value`` from left to right."""
        result = str(value)
        for spec in pipeline.split("|"):
            if not spec.strip():
                continue
            name, args = parse_filter(spec)
            result = FILTERS[name](result, *args)
        return result

    def render(self, context):
        """Return the source with every placeholder replaced from ``context``.

        >>> Template("Hi {{ user.name|upper }}, you have {{ count }} messages").render(
        ...     {"user": {"name": "ada"}, "count": 3})
        'Hi ADA, you have 3 messages'
        >>> Template("{{ nope }}!", strict=False, missing="?").render({})
        '?!'
        """
        def substitute(match):
            value = self._lookup(context, match.group(1))
            return self.apply_filters(value, match.group(2))

        return PLACEHOLDER.sub(substitute, self.source)

    def undefined(self, context):
        """Return the field names that ``context`` does not define, in source order."""
        absent = []
        for name in self.fields:
            try:
                self._lookup(context, name, strict=True)
            except TemplateError:
                absent.append(name)
        return absent


def render(source, context, strict=True):
    """Render the template ``source`` with ``context`` in one call.

    >>> render("{{ title|title|truncate:12 }}", {"title": "the name of the wind"})
    'The Name...'
    """
    template = Template(source, strict=strict)
    return template.render(context)
