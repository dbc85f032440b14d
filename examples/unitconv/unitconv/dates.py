"""Proleptic Gregorian calendar arithmetic, written out by hand.

Day ordinals follow ``datetime.date.toordinal``: 0001-01-01 is day 1.
"""

import re

MIN_YEAR = 1
MAX_YEAR = 9999
DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
DAYS_IN_400_YEARS = 146097
DAYS_IN_100_YEARS = 36524
DAYS_IN_4_YEARS = 1461
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


class DateError(ValueError):
    """A date outside the supported calendar."""


def is_leap_year(year):
    """Whether ``year`` has 366 days in the Gregorian calendar.

    >>> [is_leap_year(y) for y in (1900, 2000, 2023, 2024)]
    [False, True, False, True]
    """
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise DateError(f"year {year} is out of range {MIN_YEAR}..{MAX_YEAR}")
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    """Number of days of ``month`` (1-12) in ``year``.

    >>> days_in_month(2024, 2), days_in_month(2023, 2), days_in_month(2023, 11)
    (29, 28, 30)
    """
    if not 1 <= month <= 12:
        raise DateError(f"month {month} is not between 1 and 12")
    extra = 1 if month == 2 and is_leap_year(year) else 0
    return DAYS_IN_MONTH[month - 1] + extra


def validate_date(year, month, day):
    """Return ``(year, month, day)`` unchanged if it names a real date."""
    last = days_in_month(year, month)
    if not 1 <= day <= last:
        raise DateError(f"day {day} is not between 1 and {last} for {year}-{month:02d}")
    return year, month, day


def day_of_year(year, month, day):
    """Position of the date within its year, from 1.

    >>> day_of_year(2024, 3, 1), day_of_year(2023, 12, 31)
    (61, 365)
    """
    validate_date(year, month, day)
    leap_day = 1 if month > 2 and is_leap_year(year) else 0
    return DAYS_BEFORE_MONTH[month - 1] + leap_day + day


def to_ordinal(year, month, day):
    """Days since 0000-12-31, so that 0001-01-01 is day 1.

    >>> to_ordinal(1, 1, 1), to_ordinal(2000, 1, 1)
    (1, 730120)
    """
    previous = year - 1
    leap_days = previous // 4 - previous // 100 + previous // 400
    return previous * 365 + leap_days + day_of_year(year, month, day)


def from_ordinal(ordinal):
    """Inverse of ``to_ordinal``: the ``(year, month, day)`` of a day number.

    >>> from_ordinal(730120)
    (2000, 1, 1)
    """
    if ordinal < 1:
        raise DateError("ordinals start at 1")
    n400, rest = divmod(ordinal - 1, DAYS_IN_400_YEARS)
    n100, rest = divmod(rest, DAYS_IN_100_YEARS)
    n4, rest = divmod(rest, DAYS_IN_4_YEARS)
    n1, rest = divmod(rest, 365)
    year = n400 * 400 + n100 * 100 + n4 * 4 + n1 + 1
    if n1 == 4 or n100 == 4:
        return year - 1, 12, 31
    month = 1
    while rest >= days_in_month(year, month):
        rest -= days_in_month(year, month)
        month += 1
    return year, month, rest + 1


def day_of_week(year, month, day):
    """ISO weekday: 1 for Monday through 7 for Sunday.

    >>> day_of_week(2024, 1, 1), WEEKDAY_NAMES[day_of_week(2000, 1, 1) - 1]
    (1, 'Saturday')
    """
    ordinal = to_ordinal(year, month, day)
    return (ordinal - 1) % 7 + 1


def iso_week(year, month, day):
    """ISO 8601 ``(iso_year, week, weekday)``; week 1 holds the year's first Thursday.

    >>> iso_week(2021, 1, 3), iso_week(2020, 12, 31), iso_week(2019, 12, 30)
    ((2020, 53, 7), (2020, 53, 4), (2020, 1, 1))
    """
    weekday = day_of_week(year, month, day)
    thursday = to_ordinal(year, month, day) + 4 - weekday
    iso_year = from_ordinal(thursday)[0]
    january_4 = to_ordinal(iso_year, 1, 4)
    first_monday = january_4 - day_of_week(iso_year, 1, 4) + 1
    return iso_year, (thursday - first_monday) // 7 + 1, weekday


def weeks_in_year(year):
    """Number of ISO weeks (52 or 53) of ``year``.

    >>> weeks_in_year(2020), weeks_in_year(2021)
    (53, 52)
    """
    _, week, _ = iso_week(year, 12, 28)
    return week


def days_between(start, end):
    """Signed number of days from date tuple ``start`` to date tuple ``end``."""
    first = to_ordinal(*start)
    second = to_ordinal(*end)
    return second - first


def add_days(year, month, day, days):
    """The date ``days`` days after the given one (before it, if negative).

    >>> add_days(2024, 2, 28, 2), add_days(2024, 1, 1, -1)
    ((2024, 3, 1), (2023, 12, 31))
    """
    ordinal = to_ordinal(year, month, day) + days
    return from_ordinal(ordinal)


def parse_iso_date(text):
    """Read a ``YYYY-MM-DD`` string into a validated ``(year, month, day)``."""
    match = ISO_DATE.match(text.strip())
    if match is None:
        raise DateError(f"not an ISO date: {text!r}")
    return validate_date(*(int(part) for part in match.groups()))


class SimpleDate:
    """An immutable calendar date built from plain integers."""

    __slots__ = ("year", "month", "day")

    def __init__(self, year, month, day):
        validate_date(year, month, day)
        object.__setattr__(self, "year", year)
        object.__setattr__(self, "month", month)
        object.__setattr__(self, "day", day)

    def __setattr__(self, name, value):
        raise AttributeError("SimpleDate is immutable")

    def __repr__(self):
        return f"SimpleDate({self.year}, {self.month}, {self.day})"

    def __str__(self):
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    def __eq__(self, other):
        return isinstance(other, SimpleDate) and self.as_tuple() == other.as_tuple()

    def __hash__(self):
        return hash(self.as_tuple())

    def as_tuple(self):
        return (self.year, self.month, self.day)

    @property
    def weekday_name(self):
        return WEEKDAY_NAMES[day_of_week(*self.as_tuple()) - 1]

    @classmethod
    def from_iso(cls, text):
        """Build a date from ``YYYY-MM-DD``.

        >>> SimpleDate.from_iso("2024-02-29").weekday_name
        'Thursday'
        """
        year, month, day = parse_iso_date(text)
        return cls(year, month, day)

    def shifted(self, days):
        """A new date ``days`` days later (earlier when negative).

        >>> SimpleDate(2023, 12, 25).shifted(10)
        SimpleDate(2024, 1, 4)
        """
        year, month, day = add_days(*self.as_tuple(), days)
        return SimpleDate(year, month, day)

    def days_until(self, other):
        """Signed number of days from this date to ``other``."""
        if not isinstance(other, SimpleDate):
            raise TypeError("days_until expects a SimpleDate")
        return days_between(self.as_tuple(), other.as_tuple())
