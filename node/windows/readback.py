"""Reading a sent value back into the range the call asks for (docs/time-windows.md
§What the node decides, *Sent*).

``read_back`` gives the range spelled in UTC, or None when the form does not read the call
(a missing argument without a default, a value of the wrong shape, a wall time in a gap or an
overlap, a skipped midnight, ``from ≥ to``).  ``wall_gap_argument`` names the argument whose
wall time the zone skips (the ``dst-gap`` refusal).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from node.windows.forms import Bound, Form
from node.windows.spans import TimeSpan, lookback_range, parse_duration
from node.windows.zones import midnights, read_wall, zone_named
from protocol.timefmt import TimeFormatError, parse_date, parse_instant

__all__ = [
    "form_zone",
    "is_missing",
    "parse_day",
    "parse_wall",
    "read_back",
    "read_bound",
    "wall_gap_argument",
]

_WALL = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?\Z", re.ASCII
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z", re.ASCII)
_EPOCH_TEXT = re.compile(r"-?(0|[1-9][0-9]*)\Z", re.ASCII)
_SAFE = (1 << 53) - 1
_STEP = {"minute": 60_000, "second": 1000, "fraction": 1}
_FIRST_MS, _END_MS = -62_135_596_800_000, 253_402_300_800_000  # 0001-01-01, 10000-01-01


def is_missing(args: Mapping[str, Any], name: str) -> bool:
    """No key, None, or a blank string."""
    value = args.get(name)
    return value is None or (isinstance(value, str) and not value.strip())


def form_zone(form: Form, args: Mapping[str, Any], app_zone: ZoneInfo | None) -> ZoneInfo | None:
    """The zone argument's sent value when it names an IANA zone; the app zone when the form
    has no zone argument."""
    if form.zone_argument is None:
        return app_zone
    value = args.get(form.zone_argument)
    return zone_named(value) if isinstance(value, str) else None


def parse_wall(text: Any) -> tuple[datetime, int] | None:
    """``YYYY-MM-DDTHH:MM[:SS[.fff]]`` → (wall time, its precision step in ms)."""
    m = _WALL.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    frac = m[7] or ""
    try:
        wall = datetime(
            int(m[1]),
            int(m[2]),
            int(m[3]),
            int(m[4]),
            int(m[5]),
            int(m[6] or 0),
            int((frac + "000")[:3]) * 1000,
        )
    except ValueError:
        return None
    return wall, 1 if frac else 1000 if m[6] else 60_000


def parse_day(text: Any) -> date | None:
    if not isinstance(text, str) or not _DATE.match(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _unique(found: tuple[int, ...]) -> int | None:
    return found[0] if len(found) == 1 else None


def _iso(bound: Bound, value: Any) -> tuple[int, int] | None:
    if bound.dates and isinstance(value, str) and _DATE.match(value):
        try:
            return parse_date(value), 1 if bound.ms_step else 86_400_000
        except TimeFormatError:
            return None
    try:
        parsed = parse_instant(value)
    except TimeFormatError:
        return None
    if parsed.sub_ms:
        return None
    return parsed.ms, 1 if bound.ms_step else _STEP[parsed.precision]


def _epoch(value: Any, in_text: bool) -> int | None:
    if in_text:
        return int(value) if isinstance(value, str) and _EPOCH_TEXT.match(value) else None
    if type(value) is float and value.is_integer():
        value = int(value)  # a JSON number: 1.0 is the safe integer 1
    if type(value) is not int or abs(value) > _SAFE:
        return None
    return value


def _instant(
    bound: Bound, value: Any, zone: ZoneInfo | None, in_text: bool
) -> tuple[int, int] | None:
    """(the instant a bound's value names, the step its inclusive end moves by)."""
    if bound.encoding == "iso":
        return _iso(bound, value)
    if bound.encoding in ("epoch-ms", "epoch-s"):
        v = _epoch(value, in_text)
        scale = 1 if bound.encoding == "epoch-ms" else 1000
        return None if v is None else (v * scale, scale)
    if zone is None:
        return None
    if bound.encoding == "wall":
        wall = parse_wall(value)
        ms = None if wall is None else _unique(read_wall(wall[0], zone))
        return None if ms is None or wall is None else (ms, wall[1])
    day = parse_day(value)
    return None if day is None else _day_bounds(day, zone)


def _day_bounds(day: date, zone: ZoneInfo) -> tuple[int, int] | None:
    start = _unique(midnights(day, zone))
    end = _unique(midnights(day + timedelta(days=1), zone)) if day < date.max else None
    return None if start is None or end is None else (start, end - start)


def read_bound(
    bound: Bound, value: Any, zone: ZoneInfo | None, *, upper: bool, in_text: bool = False
) -> int | None:
    """The instant one end reads as: ``from`` inclusive (or after an exclusive from), ``to``
    per its edge."""
    try:
        read = _instant(bound, value, zone, in_text)
    except (OverflowError, ValueError):
        return None
    if read is None:
        return None
    ms, step = read
    if bound.encoding == "date" and not (upper and bound.edge == "inclusive"):
        return ms  # from: midnight D; an exclusive to: midnight D
    moves = bound.edge == ("inclusive" if upper else "exclusive")
    return ms + step if moves else ms


def _default(bound: Bound, now: int, *, upper: bool) -> int:
    """memlane's open ends: an omitted bound with a default reads as it (``to``: inclusive)."""
    assert bound.default is not None
    ms = now if bound.default == "now" else parse_instant(bound.default).ms
    return ms + 1 if upper else ms


def _halves(form: Form, value: Any) -> tuple[Any, Any] | None:
    if form.kind == "joined":
        parts = value.split(form.joiner) if isinstance(value, str) else []
        return (parts[0], parts[1]) if len(parts) == 2 else None
    if not isinstance(value, dict) or not all(k in value for k in form.keys):
        return None
    return value[form.keys[0]], value[form.keys[1]]


def _span(start: int | None, end: int | None) -> TimeSpan | None:
    """A range strict instants can spell (years 1 to 9999), with ``from < to``."""
    if start is None or end is None or not _FIRST_MS <= start < end <= _END_MS:
        return None
    return TimeSpan(start, end)


def _bounds(
    form: Form, args: Mapping[str, Any], zone: ZoneInfo | None, now: int
) -> TimeSpan | None:
    ends: list[int | None] = []
    for bound, upper in ((form.lower, False), (form.upper, True)):
        assert bound is not None
        name = str(bound.argument)
        if is_missing(args, name):
            if bound.default is None:
                return None
            ends.append(_default(bound, now, upper=upper))
        else:
            ends.append(read_bound(bound, args[name], zone, upper=upper))
    return _span(ends[0], ends[1])


def _lookback(form: Form, value: Any, now: int) -> TimeSpan | None:
    if not isinstance(value, str):
        return None
    if form.signed != value.startswith("-"):
        return None
    length = parse_duration(value.removeprefix("-"), form.units)
    return None if length is None else lookback_range(now, length).utc()


def read_back(
    form: Form, args: Mapping[str, Any], now: int, app_zone: ZoneInfo | None
) -> TimeSpan | None:
    """The half-open range the call's values ask for under ``form``, spelled in UTC."""
    try:
        return _read_back(form, args, now, app_zone)
    except (OverflowError, ValueError):  # a wall time past year 9999 in the zone: no range
        return None


def _read_back(
    form: Form, args: Mapping[str, Any], now: int, app_zone: ZoneInfo | None
) -> TimeSpan | None:
    zone = form_zone(form, args, app_zone)
    if form.kind == "bounds":
        return _bounds(form, args, zone, now)
    value = args.get(str(form.argument))
    if form.kind == "lookback":
        return _lookback(form, value, now)
    if form.kind == "day":
        day = parse_day(value)
        found = None if day is None or zone is None else _day_bounds(day, zone)
        return None if found is None else TimeSpan(found[0], found[0] + found[1])
    halves = _halves(form, value)
    if halves is None:
        return None
    assert form.lower is not None
    assert form.upper is not None
    in_text = form.kind == "joined"
    return _span(
        read_bound(form.lower, halves[0], zone, upper=False, in_text=in_text),
        read_bound(form.upper, halves[1], zone, upper=True, in_text=in_text),
    )


def _in_gap(bound: Bound, value: Any, zone: ZoneInfo) -> bool:
    wall = parse_wall(value) if bound.encoding == "wall" else None
    try:
        return wall is not None and not read_wall(wall[0], zone)
    except (OverflowError, ValueError):  # past year 9999 in the zone: not a gap
        return False


def wall_gap_argument(form: Form, args: Mapping[str, Any], app_zone: ZoneInfo | None) -> str | None:
    """The argument of a sent ``wall`` value that reads as a gap in the form's zone."""
    zone = form_zone(form, args, app_zone)
    if zone is None or form.lower is None or form.upper is None:
        return None
    if form.kind == "bounds":
        for bound in (form.lower, form.upper):
            if _in_gap(bound, args.get(str(bound.argument)), zone):
                return str(bound.argument)
        return None
    halves = _halves(form, args.get(str(form.argument)))
    pairs = zip((form.lower, form.upper), halves or (), strict=False)
    return str(form.argument) if any(_in_gap(b, v, zone) for b, v in pairs) else None
