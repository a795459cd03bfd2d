"""The look ``sr_history`` (docs/web.md §Pages): a record as the caller may read it now — its
current state as e_timeline's results show it — and its versions, oldest first, each with when,
which kind of entry made it (written, corrected, adjusted), by whom, on which node, and the
fields it changed (``node.views.sr_history``).  An id the caller cannot read now — never
written, deleted here, private to another, in another workspace — is refused with one text,
``unknown sr_id: <id>``, whichever it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.tools.args import check_names, invalid
from node.tools.context import ToolContext
from node.views.sr_history import select_history

__all__ = ["look_sr_history"]

_ARGS = frozenset({"sr_id"})


async def look_sr_history(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    check_names("sr_history", args, _ARGS)
    sr_id = args.get("sr_id")
    if not isinstance(sr_id, str) or not 0 < len(sr_id) <= 64:
        raise invalid("sr_id", "must be an SR id")
    await ctx.store.catch_up_views()  # a version whose time has just come is shown
    found = await select_history(ctx.reader(), caller, sr_id, ctx.now_ms())
    if found is None:
        raise Refusal(f"unknown sr_id: {sr_id}")
    return {
        "sr_id": sr_id,
        "current": found.current,
        "versions": found.versions,
        "earlier": found.earlier,
    }
