"""The look ``changed_values`` (docs/web.md §Pages): for the SRs e_timeline's ``changes``
reported between ``since`` and ``as_of`` (the instants its answer names), each one's title at
``as_of``, and for those updated the values of the fields the caller sees changed, at each
moment — the diff per field the changes page shows.  Read as ``changes`` reads
(``node.views.changes``): an SR the caller cannot read at both moments has no diff, one it
cannot read at ``as_of`` no title, a link to one it cannot read is not shown, private fields
only to their owner or an admin.  At most ``MAX_SRS`` ids (a page of changes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.access.callers import Caller
from node.tools.args import check_names, invalid, optional_time, sr_ids
from node.tools.context import ToolContext
from node.views.changes import changed_values, titles_at

__all__ = ["MAX_SRS", "look_changed_values"]

MAX_SRS = 100
_ARGS = frozenset({"sr_ids", "since", "as_of"})


async def look_changed_values(
    ctx: ToolContext, caller: Caller, args: Mapping[str, Any]
) -> dict[str, Any]:
    check_names("changed_values", args, _ARGS)
    ids = sr_ids(args, MAX_SRS)
    since, as_of = optional_time(args, "since"), optional_time(args, "as_of")
    if since is None or as_of is None or since >= as_of:
        raise invalid("since", "and as_of are both needed, since before as_of")
    caller.require("read:workspace")
    ids = sorted(set(ids))
    found = await changed_values(ctx.reader(), caller, ids, since, as_of)
    return {
        "srs": {i: {f: list(v) for f, v in fields.items()} for i, fields in found.items()},
        "titles": await titles_at(ctx.reader(), caller, ids, as_of),
    }
