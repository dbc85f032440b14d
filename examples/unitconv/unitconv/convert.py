"""Convenience converters for lengths, masses, volumes and temperatures."""

import re

from . import durations
from .units import DEFAULT_REGISTRY, UnitError

ABSOLUTE_ZERO_C = -273.15
TEMPERATURE_ALIASES = {
    "c": "C", "celsius": "C", "°c": "C",
    "f": "F", "fahrenheit": "F", "°f": "F",
    "k": "K", "kelvin": "K",
}
SPEED_ALIASES = {"mph": "mi/h", "kph": "km/h", "kmh": "km/h", "knot": "nmi/h", "knots": "nmi/h"}
QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*?)\s*$")


def _convert_within(value, source, target, dimension):
    if DEFAULT_REGISTRY.dimension_of(source) != dimension:
        raise UnitError(f"{source!r} is not a unit of {dimension}")
    return DEFAULT_REGISTRY.convert(value, source, target)


def convert_length(value, source, target, digits=None):
    """Convert a length, optionally rounded to ``digits`` decimals.

    >>> convert_length(5, "ft", "cm", digits=2)
    152.4
    >>> convert_length(1, "mile", "km", digits=3)
    1.609
    """
    result = _convert_within(value, source, target, "length")
    return result if digits is None else round(result, digits)


def convert_mass(value, source, target, digits=None):
    """Convert a mass, optionally rounded to ``digits`` decimals."""
    result = _convert_within(value, source, target, "mass")
    return result if digits is None else round(result, digits)


def _speed_parts(unit):
    """Split a speed unit such as ``"km/h"`` into its length unit and seconds per time unit."""
    name = unit.strip()
    name = SPEED_ALIASES.get(name.lower(), name)
    length, slash, time = name.partition("/")
    if not slash or time not in durations.DURATION_UNITS:
        raise UnitError(f"unknown speed unit {unit!r}")
    return length, durations.DURATION_UNITS[time]


def convert_speed(value, source, target, digits=None):
    """Convert a speed between units written as ``length/time`` or ``mph``/``knots``.

    >>> convert_speed(36, "km/h", "m/s")
    10.0
    >>> convert_speed(10, "knots", "km/h", digits=2)
    18.52
    """
    source_length, source_seconds = _speed_parts(source)
    target_length, target_seconds = _speed_parts(target)
    per_second = _convert_within(value, source_length, target_length, "length") / source_seconds
    result = per_second * target_seconds
    return result if digits is None else round(result, digits)


def temperature_unit(name):
    """Normalise a temperature unit name to ``"C"``, ``"F"`` or ``"K"``.

    >>> temperature_unit("Fahrenheit")
    'F'
    """
    key = name.strip().lower()
    if key not in TEMPERATURE_ALIASES:
        raise UnitError(f"unknown temperature unit {name!r}")
    return TEMPERATURE_ALIASES[key]


def to_celsius(value, unit):
    """Convert a temperature in ``unit`` to degrees Celsius."""
    unit = temperature_unit(unit)
    if unit == "F":
        return (value - 32) * 5 / 9
    if unit == "K":
        return value + ABSOLUTE_ZERO_C
    return value


def from_celsius(celsius, unit):
    """Convert degrees Celsius to ``unit``."""
    unit = temperature_unit(unit)
    if unit == "F":
        return celsius * 9 / 5 + 32
    if unit == "K":
        return celsius - ABSOLUTE_ZERO_C
    return celsius


def convert_temperature(value, source, target, digits=2):
    """Convert a temperature; refuse values below absolute zero.

    >>> convert_temperature(100, "C", "F")
    212.0
    >>> convert_temperature(0, "K", "celsius")
    -273.15
    >>> convert_temperature(-500, "F", "K")
    Traceback (most recent call last):
    ...
    unitconv.units.UnitError: -500 F is below absolute zero
    """
    celsius = to_celsius(value, source)
    if celsius < ABSOLUTE_ZERO_C - 1e-9:
        raise UnitError(f"{value} {source} is below absolute zero")
    result = from_celsius(celsius, target)
    return result if digits is None else round(result, digits)


def parse_quantity(text):
    """Split ``"12.5 km"`` into the value and the canonical unit.

    >>> parse_quantity("12.5 kilometres")
    (12.5, 'km')
    >>> parse_quantity("3lb")
    (3.0, 'lb')
    """
    match = QUANTITY.match(text)
    if match is None:
        raise UnitError(f"cannot read a quantity from {text!r}")
    value, unit = match.groups()
    return float(value), DEFAULT_REGISTRY.canonical(unit)


def convert_quantity(text, target, digits=3):
    """Convert a quantity written as text and format the result with its unit.

    >>> convert_quantity("10 km", "mi")
    '6.214 mi'
    >>> convert_quantity("2 lbs", "g", digits=0)
    '907 g'
    """
    value, unit = parse_quantity(text)
    result = DEFAULT_REGISTRY.convert(value, unit, target)
    number = f"{result:.{digits}f}" if digits > 0 else str(round(result))
    return f"{number} {DEFAULT_REGISTRY.canonical(target)}"
