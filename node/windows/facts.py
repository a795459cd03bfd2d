"""The tool's facts against a range (docs/time-windows.md §What the node decides, *Facts*):
the first problem, in the order listed there, and ``partlyBeyondRetention``."""

from __future__ import annotations

from node.windows.forms import Facts
from node.windows.spans import TimeSpan

__all__ = ["REFUSALS", "fact_problem", "partly_beyond_retention"]

REFUSALS = (
    "time-future",
    "time-past",
    "beyond-retention",
    "over-max-range",
    "multi-day",
    "dst-gap",
    "no-form-holds",
)


def fact_problem(span: TimeSpan, facts: Facts, now: int) -> str | None:
    if facts.direction == "past" and span.start > now:
        return "time-future"
    if facts.direction == "future" and span.end <= now:
        return "time-past"
    if facts.retention is not None and span.end <= now - facts.retention:
        return "beyond-retention"
    if facts.max_range is not None and span.reach > facts.max_range:
        return "over-max-range"
    return None


def partly_beyond_retention(span: TimeSpan, facts: Facts, now: int) -> bool:
    """``from < now − retention < to``: the call still runs, and is marked."""
    return facts.retention is not None and span.start < now - facts.retention < span.end
