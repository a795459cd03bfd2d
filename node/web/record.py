"""The record page (docs/web.md §Pages): one SR as the token reads it now — its current state,
every version it may see with who wrote it, when and on which node, and which fields each
changed, its corrections and adjustments among them (the look ``sr_history``) — and the SRs
linked to it or from it (e_timeline's ``traverse``).  An id it cannot read is shown as one
never written: the same refusal, status 404; any other refusal (no id, a malformed one) 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.web.pages import PAGE_SIZE, private_of, render, status_of

__all__ = ["record"]


async def record(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    sr_id = query.get("sr_id", "")
    shown: dict[str, Any] = {"caller": caller, "sr_id": sr_id}
    try:
        history = await node.look("sr_history", caller, sr_id=sr_id)
        linked = await node.call(
            "e_timeline", caller, action="traverse", sr_id=sr_id, page_size=PAGE_SIZE
        )
    except Refusal as exc:
        unknown = str(exc) == f"unknown sr_id: {sr_id}"  # or hidden: the same
        status = 404 if unknown else status_of(exc)
        return render("record.html", status, **shown, problem=str(exc))
    versions = history["versions"]
    out = set(versions[-1]["state"]["links"]) if versions else set()
    private = await private_of(node, caller, [history["current"], *linked["results"]])
    return render(
        "record.html",
        **shown,
        problem=None,
        private=private,
        current=history["current"],
        versions=versions[::-1],
        earlier=history["earlier"],
        links_out=[r for r in linked["results"] if r["sr_id"] in out],
        links_in=[r for r in linked["results"] if r["sr_id"] not in out],
        more_links=linked.get("has_more", False),
    )
