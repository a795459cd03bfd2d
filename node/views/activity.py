"""Writes over time, as one caller sees them (docs/web.md §Pages): the versions of SRs in
``sr_versions`` counted per slot of a window (an hour or a day, from the window's start).

A version is counted when the caller may read it as that version has it — its workspace, owner
and privacy (the read rule's ``readable_scopes``, over the version's own columns) — the SR
exists in it (``present``) and its time has come (``wall <= now``), so a version the caller
cannot read changes no count.  One range scan of the wall index.
"""

from __future__ import annotations

from node.access.callers import Caller
from node.store import Reader
from node.views.read_rule import readable_scopes

__all__ = ["select_activity"]

_COUNTS = (
    "SELECT (wall - ?) / ?, count(*) FROM sr_versions "
    "WHERE wall >= ? AND wall < ? AND wall <= ? AND present = 1 AND {rule} GROUP BY 1"
)


async def select_activity(
    reader: Reader, caller: Caller, *, gte: int, lt: int, width: int, now: int
) -> list[int]:
    """The count of each ``width``-ms slot of ``[gte, lt)`` (``lt - gte`` a multiple of
    ``width``), oldest first, of the versions ``caller`` may read written by ``now``."""
    rule, params = readable_scopes(caller)
    sql = _COUNTS.format(rule=rule)  # the rule's text is ours; its values are parameters
    rows = await reader.fetchall(sql, (gte, width, gte, lt, now, *params))
    counts = [0] * ((lt - gte) // width)
    for slot, count in rows:
        counts[slot] = count
    return counts
