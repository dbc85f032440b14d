"""Unit tables and the registry that converts between units of one dimension."""

# Factors to the base unit of each dimension: metre, kilogram, litre.
LENGTH_UNITS = {
    "m": 1.0, "km": 1000.0, "cm": 0.01, "mm": 0.001, "um": 1e-6,
    "in": 0.0254, "ft": 0.3048, "yd": 0.9144, "mi": 1609.344, "nmi": 1852.0,
}
MASS_UNITS = {
    "kg": 1.0, "g": 0.001, "mg": 1e-6, "t": 1000.0,
    "lb": 0.45359237, "oz": 0.028349523125, "st": 6.35029318,
}
VOLUME_UNITS = {"l": 1.0, "ml": 0.001, "m3": 1000.0, "gal": 3.785411784, "cup": 0.2365882365}

DEFAULT_TABLES = {"length": LENGTH_UNITS, "mass": MASS_UNITS, "volume": VOLUME_UNITS}

UNIT_ALIASES = {
    "meter": "m", "meters": "m", "metre": "m", "metres": "m",
    "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "inch": "in", "inches": "in", "foot": "ft", "feet": "ft", "yard": "yd", "yards": "yd",
    "mile": "mi", "miles": "mi", "gram": "g", "grams": "g", "kilogram": "kg", "kilograms": "kg",
    "pound": "lb", "pounds": "lb", "lbs": "lb", "ounce": "oz", "ounces": "oz", "tonne": "t",
    "liter": "l", "liters": "l", "litre": "l", "litres": "l", "gallon": "gal", "gallons": "gal",
}


class UnitError(ValueError):
    """An unknown unit, or units of different dimensions."""


class UnitRegistry:
    """Units grouped by dimension, each with a factor to its dimension's base unit.

    >>> registry = UnitRegistry({"time": {"s": 1, "min": 60, "h": 3600}}, aliases={})
    >>> registry.convert(90, "min", "h")
    1.5
    >>> registry.dimension_of("s")
    'time'
    """

    def __init__(self, tables=None, aliases=None):
        self._units = {}
        self._aliases = {}
        for dimension, table in (DEFAULT_TABLES if tables is None else tables).items():
            for unit, factor in table.items():
                self.register(unit, factor, dimension)
        for alias, unit in (UNIT_ALIASES if aliases is None else aliases).items():
            self.add_alias(alias, unit)

    def __contains__(self, unit):
        try:
            self.canonical(unit)
        except UnitError:
            return False
        return True

    def __repr__(self):
        return f"UnitRegistry({len(self._units)} units, {len(self._aliases)} aliases)"

    def register(self, unit, factor, dimension):
        """Add ``unit`` worth ``factor`` base units of ``dimension``; return its name."""
        name = unit.strip()
        if not name:
            raise UnitError("unit names must not be empty")
        if factor <= 0:
            raise UnitError(f"factor of {name!r} must be positive, got {factor}")
        if name in self._units and self._units[name] != (dimension, factor):
            raise UnitError(f"unit {name!r} is already registered differently")
        self._units[name] = (dimension, factor)
        return name

    def add_alias(self, alias, unit):
        """Make ``alias`` (case-insensitive) another name of ``unit``; return the unit."""
        target = self.canonical(unit)
        key = alias.strip().lower()
        if key in self._units and key != target:
            raise UnitError(f"alias {alias!r} would shadow a unit")
        self._aliases[key] = target
        return target

    def canonical(self, unit):
        """Return the registered name of ``unit``, resolving aliases and case.

        >>> DEFAULT_REGISTRY.canonical(" Miles ")
        'mi'
        """
        name = unit.strip()
        if name in self._units:
            return name
        lowered = name.lower()
        if lowered in self._units:
            return lowered
        if lowered in self._aliases:
            return self._aliases[lowered]
        raise UnitError(f"unknown unit {unit!r}")

    def dimension_of(self, unit):
        """The dimension (``"length"``, ``"mass"``...) of ``unit``."""
        dimension, _ = self._units[self.canonical(unit)]
        return dimension

    def factor(self, unit):
        """How many base units one ``unit`` is."""
        _, factor = self._units[self.canonical(unit)]
        return factor

    def convert(self, value, source, target):
        """Convert ``value`` from unit ``source`` to unit ``target`` of the same dimension."""
        source_dim, target_dim = self.dimension_of(source), self.dimension_of(target)
        if source_dim != target_dim:
            raise UnitError(f"cannot convert {source_dim} ({source}) to {target_dim} ({target})")
        return value * self.factor(source) / self.factor(target)

    def units(self, dimension):
        """Registered units of ``dimension``, smallest first."""
        found = [(factor, name) for name, (dim, factor) in self._units.items() if dim == dimension]
        if not found:
            raise UnitError(f"unknown dimension {dimension!r}")
        return [name for _, name in sorted(found)]


DEFAULT_REGISTRY = UnitRegistry()
