"""Exceptions raised by shapes_ds."""


class ShapesError(Exception):
    """Base class of the errors raised by shapes_ds."""


class CapacityError(ShapesError, ValueError):
    """A capacity or size argument is out of range."""


class IntervalError(ShapesError, ValueError):
    """An interval is malformed."""


class MatrixError(ShapesError, ValueError):
    """Matrices have incompatible or ragged shapes."""
