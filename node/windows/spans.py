"""Ranges, durations and look-backs (docs/time-windows.md).

A ``TimeSpan`` is a half-open range ``[start, end)`` in integer milliseconds, remembering the
offset each end was written in so that it is spelled back the same way.  Two spans are the
same range when they hold the same instants, whatever their offsets (``same``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.timefmt import TimeFormatError, format_instant, parse_instant

__all__ = [
    "UNIT_MS",
    "TimeSpan",
    "ceil_to",
    "lookback_as_bounds",
    "lookback_range",
    "parse_duration",
    "parse_span",
    "spell_duration",
]

UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"([1-9][0-9]*)([smhdw])\Z", re.ASCII)


@dataclass(frozen=True, slots=True)
class TimeSpan:
    start: int
    end: int
    start_offset: int = 0  # minutes east of UTC, as written
    end_offset: int = 0

    @property
    def reach(self) -> int:
        """``to − 1ms − from``: what ``maxRange`` is an inclusive ceiling on."""
        return self.end - 1 - self.start

    def same(self, other: TimeSpan) -> bool:
        return self.start == other.start and self.end == other.end

    def utc(self) -> TimeSpan:
        return TimeSpan(self.start, self.end)

    def wire(self) -> dict[str, str]:
        return {
            "from": format_instant(self.start, self.start_offset),
            "to": format_instant(self.end, self.end_offset),
        }


def parse_span(value: Any, what: str) -> TimeSpan:
    """``{"from", "to"}`` strict instants with ``from < to``; ``ValueError`` says why."""
    if not isinstance(value, Mapping) or set(value) != {"from", "to"}:
        raise ValueError(f"{what} must be an object with exactly from and to")
    ends = []
    for key in ("from", "to"):
        try:
            parsed = parse_instant(value[key])
        except TimeFormatError as exc:
            raise ValueError(f"{what}.{key}: {exc}") from exc
        if parsed.sub_ms:
            raise ValueError(f"{what}.{key} is finer than a millisecond")
        ends.append(parsed)
    if ends[0].ms >= ends[1].ms:
        raise ValueError(f"{what}: from must be before to")
    return TimeSpan(ends[0].ms, ends[1].ms, ends[0].offset_minutes, ends[1].offset_minutes)


def parse_duration(text: Any, units: str = "smhdw") -> int | None:
    """``^[1-9][0-9]*[smhdw]$`` with its unit in ``units`` → ms, else None."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    if m is None or m[2] not in units:
        return None
    return int(m[1]) * UNIT_MS[m[2]]


def spell_duration(ms: int, units: str) -> str | None:
    """The largest unit of ``units`` that divides ``ms`` exactly, else None."""
    for unit in sorted(units, key=UNIT_MS.__getitem__, reverse=True):
        if ms > 0 and ms % UNIT_MS[unit] == 0:
            return f"{ms // UNIT_MS[unit]}{unit}"
    return None


def ceil_to(ms: int, step: int) -> int:
    return -(-ms // step) * step


def lookback_range(now: int, length: int, now_offset: int = 0) -> TimeSpan:
    """``[now − L, now + 1ms)``: a look-back holds both ends; ``from`` in now's offset."""
    return TimeSpan(now - length, now + 1, now_offset, now_offset)


def lookback_as_bounds(now: int, length: int) -> TimeSpan:
    """``[now − L, now)``, spelled in UTC."""
    return TimeSpan(now - length, now)
