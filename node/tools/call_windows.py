"""The call_windows tool: the CallWindowRows filed for a caller's calls (docs/time-windows.md
§Reading rows).  What files them is the window guard, ``node.tools.windows``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.tools.args import check_names, integer, text
from node.tools.context import ToolContext
from node.views.call_windows import select_call_windows

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "call_windows"]

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50

_ARGUMENTS = frozenset({"tool", "turn", "tool_call_id", "latest", "page", "page_size"})


async def call_windows(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """The rows filed for the caller's calls (admins: the workspace's), oldest first, with
    the CallWindowRow's field names."""
    reader, moment = ctx.reader(), ctx.now_ms()
    check_names("call_windows", args, _ARGUMENTS)
    caller.require("read:workspace")
    text(args, "tool", 128)
    text(args, "tool_call_id", 256)
    if args.get("turn") is not None:
        integer(args, "turn", 0, (1 << 53) - 1, 0)
    latest = args.get("latest", False)
    if type(latest) is not bool:
        raise Refusal("invalid latest: must be true or false")
    page = integer(args, "page", 1, 100_000, 1)
    size = integer(args, "page_size", 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE)
    rows = await select_call_windows(
        reader,
        caller,
        moment,
        tool=args.get("tool"),
        turn=args.get("turn"),
        call_id=args.get("tool_call_id"),
        latest=latest,
        limit=size + 1,
        offset=(page - 1) * size,
    )
    found = [json.loads(r) for r in rows]
    return {"rows": found[:size], "page": page, "page_size": size, "has_more": len(found) > size}
