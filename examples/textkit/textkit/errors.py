"""Exceptions raised by textkit."""


class TextkitError(ValueError):
    """Base class for invalid arguments passed to textkit functions."""


class TemplateError(TextkitError):
    """Raised when a template cannot be rendered."""
