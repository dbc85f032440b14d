"""Argument checks shared by the containers."""

from .errors import CapacityError

MIN_CAPACITY = 1


def require_capacity(value, name="capacity"):
    """Return ``value`` if it is an integer of at least ``MIN_CAPACITY``.

    >>> require_capacity(3)
    3
    >>> require_capacity(0)
    Traceback (most recent call last):
    ...
    shapes_ds.errors.CapacityError: capacity must be at least 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise CapacityError(f"{name} must be an integer, got {type(value).__name__}")
    if value < MIN_CAPACITY:
        raise CapacityError(f"{name} must be at least {MIN_CAPACITY}, got {value}")
    return value


def require_non_negative(value, name):
    """Return ``value`` if it is a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CapacityError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise CapacityError(f"{name} must be non-negative, got {value}")
    return value
