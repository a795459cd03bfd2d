"""The turn's context a call carries (docs/time-windows.md §Passing the turn's context): over
MCP the request's ``_meta["memlane/turn"]``, in Python the ``turn`` keyword argument.

memlane parses no natural language: the harness sends the person's windows already resolved
(``source`` answered / derived-from-reading / control, the range, its zone, the mention, the
quote, a look-back) and the ranges of each still-open mention.  ``parse_turn`` checks it all
and raises ``WindowError`` (nothing is filed, nothing runs) on anything malformed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from node.windows.errors import WindowError
from node.windows.spans import TimeSpan, lookback_range, parse_duration, parse_span
from node.windows.zones import zone_named
from protocol.kinds import MAX_MENTION
from protocol.timefmt import TimeFormatError, parse_instant

__all__ = ["META_KEY", "Turn", "Window", "parse_turn"]

META_KEY = "memlane/turn"
MAX_ITEMS = 64
MAX_QUOTE = 2000
_KEYS = {"turn", "iteration", "toolCallId", "now", "zone", "windows", "open", "mentions", "quotes"}
_WINDOW_KEYS = {"source", "mention", "quote", "range", "lookback", "zone", "answer"}
_SOURCES = ("answered", "derived-from-reading", "control")
_SAFE = (1 << 53) - 1
_LAST_MS = 253_402_128_000_000  # 9999-12-30T00:00:00Z


@dataclass(frozen=True, slots=True)
class Window:
    """One window of the person's (an item of the turn's ``windows``)."""

    source: str
    span: TimeSpan
    zone: ZoneInfo
    mention: int | None = None
    quote: str | None = None
    lookback: int | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    turn: int
    iteration: int
    tool_call_id: str
    now: int
    now_offset: int
    zone: ZoneInfo
    windows: tuple[Window, ...] = ()
    open: tuple[tuple[TimeSpan, ...], ...] = ()
    mentions: int = 0
    quotes: Mapping[str, str] | None = None


def _count(raw: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = raw.get(name, default)
    if type(value) is not int or not 0 <= value <= _SAFE:
        raise WindowError(f"{name} must be a non-negative integer")
    return value


def _zone(value: Any, what: str) -> ZoneInfo:
    zone = zone_named(value) if isinstance(value, str) else None
    if zone is None:
        raise WindowError(f"{what} {value!r} is not an IANA zone name (Area/Location, or UTC)")
    return zone


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise WindowError(f"{what} must be a list of at most {MAX_ITEMS} items")
    return value


def _span(value: Any, what: str) -> TimeSpan:
    try:
        span = parse_span(value, what)
    except ValueError as exc:
        raise WindowError(str(exc)) from exc
    return _since_1970(span, what)


def _since_1970(span: TimeSpan, what: str) -> TimeSpan:
    """Windows of a memory node's data: none starts before the Unix epoch (the tools refuse
    such times too) or ends after 9999-12-30, so every instant and the day after it have a
    wall time in every zone."""
    if span.start < 0:
        raise WindowError(f"{what} must not start before 1970-01-01")
    if span.end > _LAST_MS:
        raise WindowError(f"{what} must end by 9999-12-30")
    return span


def _text(value: Any, what: str, max_len: int) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > max_len):
        raise WindowError(f"{what} must be a string of at most {max_len} characters")
    return value


def _source(raw: Mapping[str, Any], what: str) -> tuple[str, int | None]:
    source, mention = raw.get("source"), raw.get("mention")
    if source not in _SOURCES:
        raise WindowError(f"{what}.source must be one of {', '.join(_SOURCES)}")
    if (source == "control") != (mention is None):
        raise WindowError(f"{what}.mention is required, except on a control window")
    if mention is not None and (type(mention) is not int or not 0 <= mention <= MAX_MENTION):
        raise WindowError(f"{what}.mention must be an integer from 0 to {MAX_MENTION}")
    return str(source), mention


def _window(raw: Any, i: int, now: tuple[int, int], zone: ZoneInfo) -> Window:
    what = f"windows[{i}]"
    if not isinstance(raw, Mapping) or set(raw) - _WINDOW_KEYS:
        raise WindowError(f"{what} must be an object with only {', '.join(sorted(_WINDOW_KEYS))}")
    source, mention = _source(raw, what)
    lookback = parse_duration(raw["lookback"]) if "lookback" in raw else None
    if "lookback" in raw and lookback is None:
        raise WindowError(f"{what}.lookback must be a duration like 40m, 2h or 1d")
    if "range" not in raw and lookback is None:
        raise WindowError(f"{what} needs a range (or a lookback)")
    span = _span(raw["range"], f"{what}.range") if "range" in raw else None
    drawn = _since_1970(lookback_range(now[0], lookback or 0, now[1]), f"{what}.lookback")
    span = span or drawn
    answer = raw.get("answer")
    if answer not in (None, "confirmed", "edited"):
        raise WindowError(f"{what}.answer must be confirmed or edited")
    wzone = _zone(raw["zone"], f"{what}.zone") if "zone" in raw else zone
    return Window(
        source,
        span,
        wzone,
        mention,
        _text(raw.get("quote"), f"{what}.quote", MAX_QUOTE),
        lookback,
        answer,
    )


def _open(value: Any) -> tuple[tuple[TimeSpan, ...], ...]:
    lists = _list(value, "open")
    return tuple(
        tuple(_span(r, f"open[{i}][{j}]") for j, r in enumerate(_list(ranges, f"open[{i}]")))
        for i, ranges in enumerate(lists)
    )


def _quotes(value: Any) -> Mapping[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or len(value) > MAX_ITEMS:
        raise WindowError("quotes must be an object: period argument → the person's words")
    for name, quote in value.items():
        if not isinstance(name, str):
            raise WindowError("quotes must be an object: period argument → the person's words")
        _text(quote, f"quotes.{name}", MAX_QUOTE)
    return dict(value)


def _now(raw: Mapping[str, Any], clock: int) -> tuple[int, int]:
    if "now" not in raw:
        return clock, 0
    try:
        parsed = parse_instant(raw["now"])
    except TimeFormatError as exc:
        raise WindowError(f"now: {exc}") from exc
    if parsed.sub_ms or parsed.ms < 0:
        raise WindowError("now must be a millisecond instant after 1970-01-01")
    return parsed.ms, parsed.offset_minutes


def parse_turn(raw: Any, *, clock: int, zone: str = "UTC") -> Turn:
    """The turn's context; ``now`` defaults to ``clock`` and ``zone`` to the node's zone."""
    if not isinstance(raw, Mapping):
        raise WindowError("the turn's context must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise WindowError(f"unknown key {', '.join(unknown)}")
    call_id = raw.get("toolCallId")
    if not isinstance(call_id, str) or not 1 <= len(call_id) <= 256:
        raise WindowError("toolCallId must be a string of 1 to 256 characters")
    now = _now(raw, clock)
    tz = _zone(raw.get("zone", zone), "zone")
    windows = tuple(
        _window(w, i, now, tz) for i, w in enumerate(_list(raw.get("windows", []), "windows"))
    )
    open_ = _open(raw.get("open", []))
    least = len(windows) + len(open_)
    mentions = _count(raw, "mentions", least)
    if mentions < least:
        raise WindowError(f"mentions must be at least {least} (the windows and open mentions)")
    return Turn(
        _count(raw, "turn"),
        _count(raw, "iteration", 0),
        call_id,
        now[0],
        now[1],
        tz,
        windows,
        open_,
        mentions,
        _quotes(raw.get("quotes")),
    )
