"""IANA zones and wall times (docs/time-windows.md §Declaring period forms), through
``zoneinfo`` and the ``tzdata`` package only: ``Area/Location`` names or ``UTC``/``GMT``; ``PST``
and ``+05:30`` are refused.

Reading a wall time gives every instant that shows it: one (*unique*), two (*overlap*, the
fall-back hour) or none (*gap*, the spring-forward hour).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["date_of", "midnights", "read_wall", "wall_of", "zone_named"]

_NAME = re.compile(r"(?:UTC|GMT|[A-Z][A-Za-z_-]*(?:/[A-Za-z0-9_+-]+)+)\Z", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=256)
def zone_named(name: str) -> ZoneInfo | None:
    """The zone an IANA name names, or None (not a name of the form, or not in the database)."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _ms(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def wall_of(ms: int, zone: ZoneInfo) -> datetime:
    """The naive wall time the zone shows at ``ms``."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.astimezone(zone).replace(tzinfo=None)


def read_wall(wall: datetime, zone: ZoneInfo) -> tuple[int, ...]:
    """Every instant at which the zone shows ``wall``, earliest first."""
    found = set()
    for fold in (0, 1):
        ms = _ms(wall.replace(tzinfo=zone, fold=fold))
        if wall_of(ms, zone) == wall:
            found.add(ms)
    return tuple(sorted(found))


def date_of(ms: int, zone: ZoneInfo) -> date:
    return wall_of(ms, zone).date()


def midnights(day: date, zone: ZoneInfo) -> tuple[int, ...]:
    """The instants showing 00:00 of ``day`` (none where the zone skips midnight)."""
    return read_wall(datetime(day.year, day.month, day.day), zone)
