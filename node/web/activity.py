"""The activity page (docs/web.md §Pages): the look ``activity``'s counts of the versions
the token may read, per hour or per day of a window, as a bar chart drawn on the server and a
table of the slots that hold writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.web.chart import Bar, bar_chart
from node.web.pages import instant_text, render, status_of

__all__ = ["activity"]

# The look's arguments the page passes on from its query string.
_ARGS = ("by", "start_date", "end_date")


async def activity(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    """The counts of the window asked (the last 48 hours by default), or the look's refusal
    with status 400 (403 for a token that may not read)."""
    sent: dict[str, Any] = {k: query[k] for k in _ARGS if query.get(k)}
    try:
        shown = await node.look("activity", caller, **sent)
    except Refusal as exc:
        status = status_of(exc)
        return render(
            "activity.html",
            status,
            caller=caller,
            sent=sent,
            problem=str(exc),
            shown=None,
            chart=None,
        )
    return render(
        "activity.html", caller=caller, sent=sent, problem=None, shown=shown, chart=_chart(shown)
    )


def _chart(shown: dict[str, Any]) -> Any:
    """The look's slots as bars: an hour labelled by its time, a day by its date (UTC)."""
    cut = slice(11, 16) if shown["by"] == "hour" else slice(5, 10)
    bars = [Bar(s["at"][cut], instant_text(s["at"]), s["count"]) for s in shown["slots"]]
    window = f"{instant_text(shown['start'])} to {instant_text(shown['end'])}"
    caption = f"versions written in each {shown['by']}, {window}"
    return bar_chart(bars, caption=caption)
