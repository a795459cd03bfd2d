"""Strict instant and date text, shared by everything that reads a time (docs/tools/e_timeline.md
§Arguments, *Times*).

Instants are ISO-8601 with an upper-case ``T`` and an offset (``Z`` or ``±HH:MM``), minutes,
seconds or a 1–9 digit fraction, every field range-checked (no 24:00, no leap seconds, no
2026-02-30).  A bare ``YYYY-MM-DD`` is midnight UTC where a caller allows dates.  Everything is
returned as integer milliseconds since the Unix epoch; nothing here reads a clock.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ParsedInstant",
    "TimeFormatError",
    "fixed_millis",
    "format_instant",
    "parse_date",
    "parse_instant",
    "parse_time",
]

Precision = Literal["minute", "second", "fraction"]

_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})\Z",
    re.ASCII,  # \d is 0-9 only: no full-width or Arabic-Indic digits
)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z", re.ASCII)
_MS_PER_DAY = 86_400_000


class TimeFormatError(ValueError):
    """Text is not a strict instant or date; the message says why."""


@dataclass(frozen=True, slots=True)
class ParsedInstant:
    """An instant as written: its time, its offset and how precisely it was spelled."""

    ms: int
    offset_minutes: int
    precision: Precision
    sub_ms: bool = False


def _days(year: int, month: int, day: int) -> int:
    if not 1 <= year <= 9999 or not 1 <= month <= 12:
        raise TimeFormatError("year or month out of range")
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise TimeFormatError("day out of range for its month")
    return _days_from_civil(year, month, day)


def _days_from_civil(y: int, m: int, d: int) -> int:
    # Howard Hinnant's days_from_civil: exact proleptic Gregorian day count.
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def parse_date(text: str) -> int:
    """``YYYY-MM-DD`` → midnight UTC of that day, in ms."""
    m = _DATE.match(text) if isinstance(text, str) else None
    if m is None:
        raise TimeFormatError(f"{text!r} is not a date (YYYY-MM-DD)")
    return _days(int(m[1]), int(m[2]), int(m[3])) * _MS_PER_DAY


def parse_instant(text: str) -> ParsedInstant:
    """A strict ISO-8601 instant with an offset."""
    m = _INSTANT.match(text) if isinstance(text, str) else None
    if m is None:
        raise TimeFormatError(f"{text!r} is not an ISO-8601 instant with an offset")
    hour, minute = int(m[4]), int(m[5])
    second = int(m[6] or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise TimeFormatError(f"{text!r} has a time of day out of range")
    frac = m[7] or ""
    ms = _days(int(m[1]), int(m[2]), int(m[3])) * _MS_PER_DAY
    ms += ((hour * 60 + minute) * 60 + second) * 1000 + int((frac + "000")[:3])
    offset = _offset_minutes(m[8], text)
    precision: Precision = "fraction" if frac else "second" if m[6] else "minute"
    return ParsedInstant(ms - offset * 60_000, offset, precision, sub_ms=frac[3:].strip("0") != "")


def _offset_minutes(spelled: str, text: str) -> int:
    if spelled == "Z":
        return 0
    hh, mm = int(spelled[1:3]), int(spelled[4:6])
    if hh > 23 or mm > 59:
        raise TimeFormatError(f"{text!r} has an offset out of range")
    return (hh * 60 + mm) * (-1 if spelled[0] == "-" else 1)


def parse_time(text: str) -> int:
    """A strict instant, or a bare date read as midnight UTC — in ms."""
    if isinstance(text, str) and _DATE.match(text):
        return parse_date(text)
    return parse_instant(text).ms


def format_instant(ms: int, offset_minutes: int = 0, *, fixed: bool = False) -> str:
    """Spell ``ms`` in the given offset: seconds always, a fraction only when non-zero — or,
    ``fixed``, always three digits of it, so instants in a column line up."""
    local = ms + offset_minutes * 60_000
    days, rem = divmod(local, _MS_PER_DAY)
    y, mo, d = _civil_from_days(days)
    secs, frac = divmod(rem, 1000)
    text = f"{y:04d}-{mo:02d}-{d:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if fixed:
        text += f".{frac:03d}"
    elif frac:
        text += "." + f"{frac:03d}".rstrip("0")
    if offset_minutes == 0:
        return text + "Z"
    sign = "+" if offset_minutes > 0 else "-"
    off = abs(offset_minutes)
    return f"{text}{sign}{off // 60:02d}:{off % 60:02d}"


def fixed_millis(text: str) -> str:
    """An instant as ``format_instant`` spells it, spelled again with three digits of
    millisecond (``11:01:24.66Z`` → ``11:01:24.660Z``, ``11:01:24Z`` → ``11:01:24.000Z``) for
    people reading a column; any other text — and an instant finer than a millisecond — as it
    is."""
    try:
        parsed = parse_instant(text)
    except TimeFormatError:
        return text
    if parsed.sub_ms or parsed.precision == "minute":
        return text
    return format_instant(parsed.ms, parsed.offset_minutes, fixed=True)


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d
