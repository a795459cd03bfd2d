"""The episodes page (docs/web.md §Pages): the caller's work episodes as a time line, newest
first (work_episodes, a page at a time, filtered by status and tool), and, opened with
``?id=…`` (the id work_episode_chain takes), that episode's chain along ``prev_id``.

Both tools answer under the work-memory reader contract (docs/tools/work_episode_chain.md):
a caller sees its own episodes, and a chain from an episode it may not see answers as one
from an id never written.  Times are the recording node's clock, shown in UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.web.pages import page_number, render, status_of
from protocol.timefmt import format_instant

__all__ = ["CHAIN_K", "PAGE_SIZE", "episodes"]

PAGE_SIZE = 20
CHAIN_K = 50
# The list's filters a page passes on from its query string, as work_episodes reads them.
_FILTERS = ("status", "tool")


def _timed(episode: dict[str, Any]) -> dict[str, Any]:
    """``episode`` with its ``ts`` and ``verdict_at`` (ms) spelled as UTC instants."""
    verdict = episode.get("verdict_at")
    return episode | {
        "at": format_instant(episode["ts"], fixed=True),
        "verdict": None if verdict is None else format_instant(verdict, fixed=True),
    }


async def _chain(node: Node, caller: Caller, episode_id: str) -> dict[str, Any]:
    answer = await node.call(
        "work_episode_chain", caller, id=episode_id, k=CHAIN_K, response_format="detailed"
    )
    return answer | {"chain": [_timed(e) for e in answer["chain"]]}


async def _listed(node: Node, caller: Caller, sent: dict[str, Any]) -> dict[str, Any]:
    answer = await node.call(
        "work_episodes", caller, page_size=PAGE_SIZE, response_format="detailed", **sent
    )
    return answer | {"episodes": [_timed(e) for e in answer["episodes"]]}


async def episodes(node: Node, caller: Caller, query: Mapping[str, str]) -> HTMLResponse:
    """The page of the caller's episodes asked, with the chain of the one opened; a refusal
    of either tool with status 400 (403 for a token that may not read)."""
    sent: dict[str, Any] = {k: query[k] for k in _FILTERS if query.get(k)}
    opened = query.get("id") or None
    shown: dict[str, Any] = {"caller": caller, "sent": sent | {"id": opened}}
    try:
        listed = await _listed(node, caller, sent | {"page": page_number(query)})
        chain = None if opened is None else await _chain(node, caller, opened)
    except Refusal as exc:
        status = status_of(exc)
        return render("episodes.html", status, **shown, problem=str(exc), listed=None, chain=None)
    shown["sent"]["page"] = listed["page"]
    return render("episodes.html", **shown, problem=None, listed=listed, chain=chain)
