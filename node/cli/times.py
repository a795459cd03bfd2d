"""The time flags of ``memlane`` (docs/cli.md §Conventions): one form for a moment, one for an
expiry, each refused as a usage error that says what is wrong with it.

A moment is what the tools read: a strict ISO-8601 instant with an offset, or a bare date
(``protocol.timefmt``).  The flag's text is checked here and sent unchanged, so the tool
reads it as it reads the same text over MCP.  An expiry (``--expires``) is that, or a
duration from now in the grammar of the time windows and the configuration (``30m``,
``12h``, ``7d``, ``2w``; docs/time-windows.md §Declaring period forms).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from node.errors import Refusal
from node.windows.spans import parse_duration
from protocol.timefmt import TimeFormatError, parse_instant, parse_time

__all__ = ["MISSING_OFFSET", "Expiry", "expiry", "moment"]

MISSING_OFFSET = "missing offset: add Z or ±HH:MM"
_LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last instant a time can spell
_FORMS = "a date (2026-11-30) or an instant with an offset (2026-11-30T09:00:00Z)"


def _why(text: str, exc: TimeFormatError) -> str:
    """What is wrong with ``text``, which is not a strict moment, beginning with the text."""
    try:
        parse_instant(text + "Z")
    except TimeFormatError:
        pass
    else:
        return f"{text!r}: {MISSING_OFFSET}"
    said = str(exc)
    if "is not an ISO-8601 instant" in said or "is not a date" in said:
        return f"{text!r} is not a time: give {_FORMS}"
    return said if said.startswith(repr(text)) else f"{text!r}: {said}"


def moment(text: str) -> str:
    """An argparse type: ``text`` when it is a strict instant or bare date."""
    try:
        parse_time(text)
    except TimeFormatError as exc:
        raise argparse.ArgumentTypeError(_why(text, exc)) from exc
    return text


@dataclass(frozen=True, slots=True)
class Expiry:
    """When something stops being valid: ``after_ms`` from now, or at ``at_ms``."""

    after_ms: int | None = None
    at_ms: int | None = None

    def at(self, now: int) -> int:
        """The instant (ms), refused unless it is after ``now`` and one a time can spell."""
        ms = now + self.after_ms if self.after_ms is not None else self.at_ms
        assert ms is not None
        if ms <= now:
            raise Refusal("expires must be in the future")
        if ms > _LAST_MS:
            raise Refusal("expires must not be after 9999-12-31")
        return ms


def expiry(text: str) -> Expiry:
    """An argparse type: a duration from now (``7d``) or a moment (``2026-12-01``)."""
    after = parse_duration(text)
    if after is not None:
        return Expiry(after_ms=after)
    try:
        return Expiry(at_ms=parse_time(text))
    except TimeFormatError as exc:
        why = _why(text, exc)
        if MISSING_OFFSET not in why:
            why = f"{text!r} is not a duration (30m, 12h, 7d, 2w) or a time: give {_FORMS}"
        raise argparse.ArgumentTypeError(why) from exc
