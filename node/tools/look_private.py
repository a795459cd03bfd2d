"""The look ``private_srs`` (docs/web.md §Pages): which of the SRs a page shows are private —
the badge the web view puts on them, since e_timeline's results, whose fields the specification
fixes, do not say.  Only SRs the caller may read now are named; at most ``MAX_SRS`` ids (a page
of results).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.tools.args import check_names, sr_ids
from node.tools.context import ToolContext
from node.views.sr_queries import select_readable

__all__ = ["MAX_SRS", "look_private_srs"]

MAX_SRS = 200
_ARGS = frozenset({"sr_ids"})


async def look_private_srs(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    check_names("private_srs", args, _ARGS)
    ids = sr_ids(args, MAX_SRS)
    caller.require("read:workspace")
    return {
        "private": sorted(
            await select_readable(ctx.reader(), caller, sorted(set(ids)), private=True)
        )
    }
