"""The changes page (docs/web.md §Pages): e_timeline's ``changes`` between two moments, each
SR's change (new, updated with the fields that changed, deleted, undeleted) newest first, a
page at a time.

The moments are UTC.  The form's pickers are ``datetime-local``, which send a moment without
an offset (``2026-12-01T10:00``); the page reads it as UTC and adds the ``Z`` the tool's strict
instants need.  A date, or an instant with its offset (what the page links pass on), goes to
the tool as sent.  With no ``since`` the window is the last 24 hours of this node's clock;
``as_of`` not sent is the tool's own default, now.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.web.pages import FLAGS, field_text, page_number, render, status_of
from protocol.timefmt import format_instant

__all__ = ["DEFAULT_WINDOW_MS", "PAGE_SIZE", "changes", "moment", "picked"]

PAGE_SIZE = 50
DEFAULT_WINDOW_MS = 24 * 3600 * 1000
# What a datetime-local picker sends: a moment on the wall, without an offset (HTML §2.3.5.5).
_LOCAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?")


def moment(value: str) -> str:
    """``value`` as the tool takes it: a picker's offset-less moment read as UTC, anything
    else as sent (the tool refuses what it cannot read)."""
    return value + "Z" if _LOCAL.fullmatch(value) else value


def picked(instant: str) -> str:
    """An instant of the tool's answer (``…Z``) as a datetime-local picker shows it; what is
    not one of those is shown as sent."""
    bare = instant.removesuffix("Z")
    return bare if _LOCAL.fullmatch(bare) else instant


def _sent(node: Node, query: Mapping[str, str]) -> dict[str, Any]:
    since = query.get("since") or format_instant(node.store.now_ms() - DEFAULT_WINDOW_MS)
    sent: dict[str, Any] = {"action": "changes", "since": moment(since)}
    if query.get("as_of"):
        sent["as_of"] = moment(query["as_of"])
    return sent | {"page": page_number(query)}


async def changes(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    """The changes of the window asked, or the tool's refusal with status 400 (403 for a
    token that may not read); the links to other pages pass back the answer's ``as_of``."""
    sent = _sent(node, query)
    shown: dict[str, Any] = {"caller": caller, "picked": picked, "flags": FLAGS}
    try:
        answer = await node.call("e_timeline", caller, page_size=PAGE_SIZE, **sent)
    except Refusal as exc:
        status = status_of(exc)
        return render(
            "changes.html", status, **shown, sent=sent, problem=str(exc), changes=[], more=False
        )
    window = {"since": answer["since"], "as_of": answer["as_of"], "page": answer["page"]}
    titles, diffs = await _diffs(node, caller, answer)
    return render(
        "changes.html",
        **shown,
        sent=window,
        problem=None,
        diffs=diffs,
        titles=titles,
        changes=answer["changes"],
        more=answer["has_more"],
    )


async def _diffs(
    node: Node, caller: Caller, answer: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, list[tuple[str, str, str]]]]:
    """Each changed SR's title at as_of, and each updated one's diff per field: (field, its
    value at since, at as_of), as text."""
    if not answer["changes"]:
        return {}, {}
    found = await node.look(
        "changed_values",
        caller,
        since=answer["since"],
        as_of=answer["as_of"],
        sr_ids=[c["sr_id"] for c in answer["changes"]],
    )
    diffs = {
        sr_id: [
            (f, field_text(f, a), field_text(f, b))
            for f, (a, b) in fields.items()
            if f not in FLAGS
        ]
        for sr_id, fields in found["srs"].items()
    }
    return found["titles"], diffs
