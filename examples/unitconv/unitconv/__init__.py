"""unitconv: unit, date and duration conversions using only the standard library."""

from .convert import convert_length, convert_mass, convert_quantity, convert_speed, convert_temperature, parse_quantity
from .dates import DateError, SimpleDate, add_days, day_of_week, day_of_year, is_leap_year, iso_week
from .durations import Duration, format_duration, human_bytes, parse_bytes, parse_duration
from .units import DEFAULT_REGISTRY, UnitError, UnitRegistry

__version__ = "0.1.0"
