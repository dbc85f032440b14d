"""Durations such as ``"1h30m"`` and byte sizes such as ``"1.5 MiB"``."""

import re

import unitconv.dates as dates

DURATION_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|[wdhms])")
DECIMAL_PREFIXES = ("B", "kB", "MB", "GB", "TB", "PB")
BINARY_PREFIXES = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
BYTE_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_duration(text):
    """Total seconds of a duration such as ``"1h30m"``, ``"2d 4h"`` or ``"-90s"``.

    A bare number counts as seconds.

    >>> parse_duration("1h30m"), parse_duration("2d 4h"), parse_duration("-1.5m")
    (5400, 187200, -90)
    >>> parse_duration("45")
    45
    """
    stripped = text.strip().lower()
    sign = -1 if stripped.startswith("-") else 1
    body = stripped[1:].strip() if stripped.startswith(("+", "-")) else stripped
    if re.fullmatch(r"\d+(?:\.\d+)?", body):
        return sign * _number(float(body))
    if not body or DURATION_PART.sub("", body).strip():
        raise ValueError(f"invalid duration {text!r}")
    total = sum(float(amount) * DURATION_UNITS[unit] for amount, unit in DURATION_PART.findall(body))
    return sign * _number(total)


def _number(value):
    return int(value) if float(value).is_integer() else value


def format_duration(seconds, max_units=None):
    """Render seconds as ``"1h 30m"``, largest units first.

    ``max_units`` keeps only that many leading units (the rest is dropped).

    >>> format_duration(5400), format_duration(90061, max_units=2), format_duration(0)
    ('1h 30m', '1d 1h', '0s')
    """
    if max_units is not None and max_units < 1:
        raise ValueError("max_units must be at least 1")
    sign = "-" if seconds < 0 else ""
    remaining = abs(int(seconds))
    parts = []
    for unit, size in DURATION_UNITS.items():
        if size < 1 or remaining < size:
            continue
        count, remaining = divmod(remaining, size)
        parts.append(f"{count}{unit}")
    if max_units is not None:
        parts = parts[:max_units]
    return sign + (" ".join(parts) or "0s")


def human_bytes(size, binary=False, precision=1):
    """Readable byte size with decimal (``kB``) or binary (``KiB``) prefixes.

    >>> human_bytes(999), human_bytes(1_000_000), human_bytes(1536, binary=True)
    ('999 B', '1.0 MB', '1.5 KiB')
    """
    if size < 0:
        raise ValueError("size must be non-negative")
    base = 1024 if binary else 1000
    prefixes = BINARY_PREFIXES if binary else DECIMAL_PREFIXES
    value, index = float(size), 0
    while index < len(prefixes) - 1 and round(value, precision) >= base:
        value /= base
        index += 1
    if index == 0:
        return f"{int(size)} {prefixes[0]}"
    return f"{value:.{precision}f} {prefixes[index]}"


def parse_bytes(text):
    """Number of bytes in a size such as ``"1.5 KiB"``, ``"2MB"`` or ``"512"``.

    >>> parse_bytes("1.5 KiB"), parse_bytes("2MB"), parse_bytes("512")
    (1536, 2000000, 512)
    """
    match = BYTE_SIZE.match(text)
    if match is None:
        raise ValueError(f"invalid byte size {text!r}")
    amount, unit = float(match.group(1)), match.group(2) or "B"
    for prefixes, base in ((DECIMAL_PREFIXES, 1000), (BINARY_PREFIXES, 1024)):
        lowered = [prefix.lower() for prefix in prefixes]
        if unit.lower() in lowered:
            return round(amount * base ** lowered.index(unit.lower()))
    raise ValueError(f"unknown byte unit {unit!r}")


class Duration:
    """A length of time held as a number of seconds."""

    def __init__(self, seconds=0):
        self.seconds = seconds

    def __repr__(self):
        return f"Duration({self.seconds!r})"

    def __str__(self):
        return format_duration(self.seconds)

    def __eq__(self, other):
        return isinstance(other, Duration) and self.seconds == other.seconds

    @property
    def minutes(self):
        return self.seconds / DURATION_UNITS["m"]

    @classmethod
    def from_string(cls, text):
        """Parse text such as ``"1h30m"`` into a ``Duration``.

        >>> str(Duration.from_string("90m"))
        '1h 30m'
        """
        seconds = parse_duration(text)
        return cls(seconds)

    @classmethod
    def between(cls, start, end):
        """The time from midnight of ISO date ``start`` to midnight of ISO date ``end``.

        >>> Duration.between("2024-02-28", "2024-03-01").in_units("d")
        2.0
        """
        days = dates.days_between(dates.parse_iso_date(start), dates.parse_iso_date(end))
        return cls(days * DURATION_UNITS["d"])

    def plus(self, other):
        """Sum with another duration, or with a duration string."""
        if isinstance(other, str):
            other = Duration.from_string(other)
        return Duration(self.seconds + other.seconds)

    def in_units(self, unit):
        """The duration expressed in ``unit`` (one of ``DURATION_UNITS``).

        >>> Duration(5400).in_units("h")
        1.5
        """
        if unit not in DURATION_UNITS:
            raise ValueError(f"unknown duration unit {unit!r}")
        return self.seconds / DURATION_UNITS[unit]
