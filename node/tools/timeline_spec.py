"""e_timeline's arguments: defaults, the specified refusals verbatim, and the fixed order in
which checks run (docs/tools/e_timeline.md §Refusals):

1. the action;
2. ``since`` / ``as_of`` outside ``changes``;
3. the changes rules, in the specification's order (arguments it does not take; a later page
   without ``as_of``; ``since`` not before ``as_of``; unreadable values; ``since`` missing);
4. each action's required argument;
5. every other value.

An argument equal to its documented default counts as not sent (MCP clients send defaults).
A call run at the turn's clock (the window guard's) has its open ends closed at it by
``closed_at``, as the tool's period declares them (``node.tools.periods``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from node.errors import Refusal
from protocol.timefmt import TimeFormatError, parse_date, parse_instant

__all__ = [
    "ACTIONS",
    "DEFAULTS",
    "MAX_PAGE",
    "MAX_PAGE_SIZE",
    "ORDERS",
    "SINCE_BEFORE_AS_OF",
    "Profile",
    "TimelineSpec",
    "closed_at",
    "invalid",
    "parse_spec",
]

ACTIONS = ("list", "find", "intersect", "traverse", "changes")
ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")
ARGUMENTS = (
    "action",
    "query",
    "match",
    "sr_id",
    "start_date",
    "end_date",
    "order_by",
    "shed_idf_noise",
    "page",
    "page_size",
    "is_conversational_only",
    "as_of",
    "since",
    "agent_profile",
)
DEFAULTS: dict[str, Any] = {
    "order_by": "ingest_time_desc",
    "shed_idf_noise": True,
    "page": 1,
    "is_conversational_only": False,
}
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_PAGE = 10_000
MAX_QUERY = 1_000
MAX_MATCH = 16
_CHANGES_TAKES = frozenset({"action", "since", "as_of", "page", "page_size"})
_BARE_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z", re.ASCII)
_DAY_MS = 86_400_000

SINCE_BEFORE_AS_OF = "'since' must be before 'as_of'"
PAGE_NEEDS_AS_OF = (
    "a page after the first needs as_of: pass back the as_of page 1 returned, "
    "so every page reads the same window"
)


def invalid(detail: str) -> Refusal:
    return Refusal(f"Invalid timeline spec: {detail}")


@dataclass(frozen=True, slots=True)
class Profile:
    """A named preset from the node's config: what applies when the call does not say."""

    page_size: int | None = None
    order_by: str | None = None
    lanes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TimelineSpec:
    action: str
    query: str | None = None
    match: tuple[str, ...] = ()
    sr_id: str | None = None
    start_ms: int | None = None  # inclusive
    end_ms: int | None = None  # exclusive
    order_by: str = "ingest_time_desc"
    shed_idf_noise: bool = True
    page: int = 1
    page_size: int = DEFAULT_PAGE_SIZE
    conversational_only: bool = False
    since_ms: int | None = None  # exclusive
    as_of_ms: int | None = None  # inclusive
    lanes: tuple[str, ...] = ()
    sent: frozenset[str] = field(default_factory=frozenset)


def _sent(args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments actually sent: not None, and not equal to their documented default."""
    return {
        k: v
        for k, v in args.items()
        if v is not None
        and not (k in DEFAULTS and type(v) is type(DEFAULTS[k]) and v == DEFAULTS[k])
    }


def parse_spec(
    args: Mapping[str, Any], profiles: Mapping[str, Profile], zone: ZoneInfo | None = None
) -> TimelineSpec:
    """Check ``args`` in the documented order; return the spec or raise ``Refusal``."""
    sent = _sent(args)
    unknown = sorted(set(sent) - set(ARGUMENTS))
    action = sent.get("action")
    if action not in ACTIONS:
        raise invalid(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if unknown:
        raise invalid(f"unknown argument {', '.join(unknown)}")
    if action != "changes" and ("since" in sent or "as_of" in sent):
        raise Refusal("'since' and 'as_of' belong to the changes action")
    if action == "changes":
        return _changes(sent)
    return _reading(action, sent, profiles, zone)


def _changes(sent: dict[str, Any]) -> TimelineSpec:
    others = [k for k in ARGUMENTS if k in sent and k not in _CHANGES_TAKES]
    if others:
        raise Refusal(
            f"changes does not take {', '.join(others)}; it takes since, as_of, page and page_size"
        )
    later = sent.get("page", 1)  # its value is checked with the other values, below
    if type(later) is int and later > 1 and "as_of" not in sent:
        raise Refusal(PAGE_NEEDS_AS_OF)
    since = _moment(sent, "since", optional_parse=True)
    as_of = _moment(sent, "as_of", optional_parse=True)
    if since is not None and as_of is not None and since >= as_of:
        raise Refusal(SINCE_BEFORE_AS_OF)
    since = _moment(sent, "since")
    as_of = _moment(sent, "as_of")
    page = _page(sent)
    page_size = _page_size(sent, None)
    if since is None:
        raise Refusal("'since' is required for changes action")
    return TimelineSpec(
        "changes",
        since_ms=since,
        as_of_ms=as_of,
        page=page,
        page_size=page_size,
        sent=frozenset(sent),
    )


def _reading(
    action: str, sent: dict[str, Any], profiles: Mapping[str, Profile], zone: ZoneInfo | None
) -> TimelineSpec:
    required = {"find": "query", "intersect": "match", "traverse": "sr_id"}.get(action)
    if required and required not in sent:
        raise invalid(f"{action} needs {required}")
    profile = _profile(sent, profiles)
    if action == "find" and ("start_date" in sent or "end_date" in sent):
        raise invalid("find takes no window (start_date, end_date)")
    start, end = _window(sent, zone)
    return TimelineSpec(
        action,
        query=_query(sent) if action == "find" else None,
        match=_match(sent) if action == "intersect" else (),
        sr_id=_text(sent, "sr_id", 64) if action == "traverse" else None,
        start_ms=start,
        end_ms=end,
        order_by=_order(sent, profile),
        shed_idf_noise=_flag(sent, "shed_idf_noise", True),
        page=_page(sent),
        page_size=_page_size(sent, profile),
        conversational_only=_flag(sent, "is_conversational_only", False),
        lanes=profile.lanes if profile else (),
        sent=frozenset(sent),
    )


def closed_at(spec: TimelineSpec, now: int | None) -> TimelineSpec:
    """The spec as run at ``now`` (the turn's clock; None: the node's, as sent), its open ends
    closed where the period declaration reads them (docs/time-windows.md, decision 13): an
    omitted ``as_of`` is now; a window with one end sent gets the other — ``end_date`` now
    inclusive, ``start_date`` 1970-01-01.  A call that sends no window keeps none."""
    if now is None or spec.action == "find":
        return spec
    if spec.action == "changes":
        return spec if spec.as_of_ms is not None else replace(spec, as_of_ms=now)
    if spec.start_ms is None and spec.end_ms is None:
        return spec
    start = 0 if spec.start_ms is None else spec.start_ms
    return replace(spec, start_ms=start, end_ms=now + 1 if spec.end_ms is None else spec.end_ms)


# -- values ----------------------------------------------------------------------------------


def _profile(sent: dict[str, Any], profiles: Mapping[str, Profile]) -> Profile | None:
    name = sent.get("agent_profile")
    if name is None:
        return None
    if not isinstance(name, str) or name not in profiles:
        raise invalid(f"unknown agent_profile {name!r}")
    return profiles[name]


def _moment(sent: dict[str, Any], name: str, *, optional_parse: bool = False) -> int | None:
    """A date or ISO datetime; a bare date is midnight UTC."""
    value = sent.get(name)
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise TimeFormatError("must be a string")
        return parse_date(value) if _BARE_DATE.match(value) else parse_instant(value).ms
    except TimeFormatError as exc:
        if optional_parse:
            return None
        raise invalid(f"{name} {value!r} is not a date or ISO-8601 datetime") from exc


def _in_zone(utc_midnight: int, zone: ZoneInfo | None, days: int = 0) -> int:
    """A bare date's midnight in the node's zone (e_timeline's date form reads in it:
    docs/time-windows.md, decision 4), ``days`` later; UTC when the node has no zone."""
    if zone is None:
        return utc_midnight + days * _DAY_MS
    day = date(1970, 1, 1) + timedelta(days=utc_midnight // _DAY_MS + days)
    return int(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()) * 1000


def _window(sent: dict[str, Any], zone: ZoneInfo | None) -> tuple[int | None, int | None]:
    """``start_date`` inclusive; ``end_date`` exclusive as an instant, and as a bare date
    inclusive of that whole day (a bare date is midnight in the node's zone)."""
    start = _moment(sent, "start_date")
    end = _moment(sent, "end_date")
    if start is not None and _BARE_DATE.match(sent["start_date"]):
        start = _in_zone(start, zone)
    if end is not None and _BARE_DATE.match(sent["end_date"]):
        end = _in_zone(end, zone, 1)
    if start is not None and end is not None and start >= end:
        raise invalid("start_date must be before end_date")
    return start, end


def _order(sent: dict[str, Any], profile: Profile | None) -> str:
    value = sent.get("order_by", profile.order_by if profile and profile.order_by else None)
    if value is None:
        return str(DEFAULTS["order_by"])
    if value not in ORDERS:
        raise invalid(f"order_by must be one of {', '.join(ORDERS)}, not {value!r}")
    return str(value)


def _flag(sent: dict[str, Any], name: str, default: bool) -> bool:
    value = sent.get(name, default)
    if type(value) is not bool:
        raise invalid(f"{name} must be true or false")
    return value


def _int(sent: dict[str, Any], name: str, lo: int, hi: int, default: int) -> int:
    value = sent.get(name, default)
    if type(value) is not int or not lo <= value <= hi:
        raise invalid(f"{name} must be an integer from {lo} to {hi}")
    return value


def _page(sent: dict[str, Any]) -> int:
    return _int(sent, "page", 1, MAX_PAGE, 1)


def _page_size(sent: dict[str, Any], profile: Profile | None) -> int:
    default = profile.page_size if profile and profile.page_size else DEFAULT_PAGE_SIZE
    return _int(sent, "page_size", 1, MAX_PAGE_SIZE, default)


def _text(sent: dict[str, Any], name: str, max_len: int) -> str:
    value = sent.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > max_len:
        raise invalid(f"{name} must be a non-empty string of at most {max_len} characters")
    return value


def _query(sent: dict[str, Any]) -> str:
    return _text(sent, "query", MAX_QUERY)


def _match(sent: dict[str, Any]) -> tuple[str, ...]:
    value = sent.get("match")
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list | tuple)
        or not 1 <= len(value) <= MAX_MATCH
        or not all(isinstance(v, str) and v.strip() and len(v) <= 64 for v in value)
    ):
        raise invalid(f"match must be a list of 1 to {MAX_MATCH} non-empty strings")
    return tuple(dict.fromkeys(value))
