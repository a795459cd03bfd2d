"""Each page of the web view, rendered on the server from the tool layer's answers (so what a
page shows is what the tools show the same token), with templates that escape every value
(``autoescape``): a record's text is text, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Forbidden, Refusal
from node.node import Node
from node.web.highlight import highlighted
from protocol.timefmt import fixed_millis

__all__ = [
    "FLAGS",
    "PAGE_SIZE",
    "field_text",
    "instant_text",
    "page_number",
    "private_of",
    "render",
    "search",
    "sign_in",
    "status_of",
    "timeline",
    "value_text",
]

PAGE_SIZE = 50
# The flags a correction or an adjustment sets: the tools list them among the changed fields,
# the pages say "corrected" / "adjusted" instead.
FLAGS = ("has_correction", "has_adjustment")
_ENV = Environment(loader=PackageLoader("node.web"), autoescape=select_autoescape(default=True))
_ENV.filters["highlighted"] = highlighted


def value_text(value: Any) -> str:
    """A field's value as a page shows it: lists and maps item by item, none as a dash."""
    if value is None or value == [] or value == {}:
        return "—"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value).lower() if isinstance(value, bool) else str(value)


def instant_text(value: Any) -> str:
    """An instant as every page shows it: three digits of millisecond, so instants one above
    another line up (the tools' answers drop trailing zeros); nothing as a dash."""
    return "—" if value is None or value == "" else fixed_millis(str(value))


def field_text(field: str, value: Any) -> str:
    """A field's value in a diff: ``value_text``, an instant as ``instant_text``."""
    return instant_text(value) if field == "content_time" and value else value_text(value)


_ENV.filters["value_text"] = value_text
_ENV.filters["instant"] = instant_text
_ENV.globals["field_text"] = field_text
# The list's arguments a timeline page passes on from its query string, as the tool reads them.
_LIST_ARGS = ("start_date", "end_date", "order_by", "agent_profile")
# The orders the tool takes, as the menu names them (the values are the tool's).
_ORDERS = {
    "ingest_time_desc": "newest ingested first",
    "ingest_time_asc": "oldest ingested first",
    "content_time_desc": "newest content time first",
    "content_time_asc": "oldest content time first",
}


def render(template: str, status: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(template).render(**values), status_code=status)


def status_of(refused: Refusal) -> int:
    """The status a page answers a tool's refusal with: 403 for a token that may not, else
    400."""
    return 403 if isinstance(refused, Forbidden) else 400


def sign_in(problem: str | None = None, *, status: int = 200) -> HTMLResponse:
    return render("signin.html", status, problem=problem)


def page_number(query: Mapping[str, str]) -> int | str:
    page = query.get("page", "1")
    return int(page) if page.isdigit() else page  # the tool refuses what is not one


async def private_of(node: Node, caller: Caller, rows: list[dict[str, Any]]) -> set[str]:
    """Which of the SRs ``rows`` shows are private (the look ``private_srs``): their badge."""
    found = await node.look("private_srs", caller, sr_ids=[r["sr_id"] for r in rows])
    return set(found["private"])


async def _answered(
    template: str, node: Node, caller: Caller, sent: dict[str, Any], **values: Any
) -> HTMLResponse:
    """``template`` with e_timeline's answer to ``sent`` (a page of ``PAGE_SIZE``), or with
    its refusal and status 400; ``values`` too."""
    shown: dict[str, Any] = {"caller": caller, "sent": sent, "orders": _ORDERS, **values}
    try:
        answer = await node.call("e_timeline", caller, page_size=PAGE_SIZE, **sent)
    except Refusal as exc:
        shown |= {"problem": str(exc), "results": [], "private": set(), "more": False}
        return render(template, status_of(exc), **shown)
    return render(
        template,
        **shown,
        problem=None,
        results=answer["results"],
        private=await private_of(node, caller, answer["results"]),
        more=answer.get("has_more", False),
    )


async def timeline(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    """e_timeline's list, a page at a time, with its window, order and lanes from the query:
    the lanes are the tool's own filter, a profile of the node's config (``agent_profile``),
    offered with the lanes each names; "conversational only" is ``is_conversational_only``."""
    sent: dict[str, Any] = {k: query[k] for k in _LIST_ARGS if query.get(k)}
    if query.get("is_conversational_only"):
        sent["is_conversational_only"] = True
    lanes = {name: profile.lanes for name, profile in node.config.profiles.items()}
    return await _answered(
        "timeline.html",
        node,
        caller,
        {"action": "list", **sent, "page": page_number(query)},
        profiles=lanes,
    )


async def search(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    """e_timeline's find: the best first, each with its score and rank, the words the query
    matched marked."""
    sent = {"action": "find", "query": query.get("query", ""), "page": page_number(query)}
    if not sent["query"]:
        return render("search.html", caller=caller, sent=sent, problem=None, results=[])
    return await _answered("search.html", node, caller, sent)
