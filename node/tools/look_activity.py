"""The look ``activity`` (docs/web.md §Pages): how many SR versions the caller may read were
written in each hour or day of a window — ``by`` ``hour`` (the default) or ``day``, the window
``start_date`` (inclusive) to ``end_date`` (exclusive as an instant, and a bare date inclusive
of that whole day, as e_timeline reads them; UTC).  Without a window, the last 48 hours or 30
days up to now.  Slots are whole UTC hours or days, so the first and last may reach outside
the window asked; at most ``MAX_SLOTS`` of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.tools.args import check_names, invalid, one_of, optional_time
from node.tools.context import ToolContext
from node.views.activity import select_activity
from protocol.timefmt import format_instant

__all__ = ["MAX_SLOTS", "look_activity"]

MAX_SLOTS = 1000
_HOUR = 3_600_000
_WIDTH = {"hour": _HOUR, "day": 24 * _HOUR}
_DEFAULT_SLOTS = {"hour": 48, "day": 30}
_BARE_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ARGS = frozenset({"by", "start_date", "end_date"})


async def look_activity(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    check_names("activity", args, _ARGS)
    by = one_of(args, "by", tuple(_WIDTH)) or "hour"
    caller.require("read:workspace")
    now = ctx.now_ms()
    start, end = _window(args, by, now)
    width = _WIDTH[by]
    counts = await select_activity(ctx.reader(), caller, gte=start, lt=end, width=width, now=now)
    slots = [{"at": format_instant(start + i * width), "count": n} for i, n in enumerate(counts)]
    return {
        "by": by,
        "start": format_instant(start),
        "end": format_instant(end),
        "total": sum(counts),
        "slots": slots,
    }


def _window(args: Mapping[str, Any], by: str, now: int) -> tuple[int, int]:
    """The window's slot bounds: its start rounded down, its end up, to whole slots."""
    width = _WIDTH[by]
    start, end = optional_time(args, "start_date"), optional_time(args, "end_date")
    if end is not None and _BARE_DATE.match(args["end_date"]):
        end += _WIDTH["day"]  # the whole of that day
    end = _up(now + 1 if end is None else end, width)
    start = end - _DEFAULT_SLOTS[by] * width if start is None else start - start % width
    if start >= end:
        raise invalid("start_date", "must be before end_date")
    if (end - start) // width > MAX_SLOTS:
        more = ", or count by day" if by == "hour" else ""
        raise Refusal(f"the window holds more than {MAX_SLOTS} {by}s: narrow it{more}")
    return start, end


def _up(ms: int, width: int) -> int:
    return -(-ms // width) * width
