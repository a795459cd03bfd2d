"""The writes the tests of the look ``activity`` count (docs/web.md §Pages): SRs written at set
moments of an afternoon by the node's clock, read back per hour by the look and by the web
view's activity page."""

from __future__ import annotations

from node.access.callers import Caller
from node.node import Node
from tests.node.helpers import Wall

__all__ = ["HOUR", "T0", "WINDOW", "writes"]


HOUR = 3_600_000
T0 = 1_789_999_200_000  # 2026-09-21T14:00:00Z, a whole hour
WINDOW = {"by": "hour", "start_date": "2026-09-21T14:00:00Z", "end_date": "2026-09-21T18:00:00Z"}


async def writes(node: Node, wall: Wall, who: Caller, *hidden: Caller) -> None:
    """Two SRs at 14:10, one at 16:05 and a correction of it at 16:59; with ``hidden``, each
    of those callers also writes a private SR at 14:15 and 15:20 (the clock only moves on)."""
    wall.now = T0 + 10 * 60_000
    await node.e_write(who, title="first", text="a")
    await node.e_write(who, title="second", text="b")
    for at in (T0 + 15 * 60_000, T0 + HOUR + 20 * 60_000) if hidden else ():
        wall.now = at
        for other in hidden:
            await node.e_write(
                other, title=f"{other.principal}'s own", text="x", visibility="private"
            )
    wall.now = T0 + 2 * HOUR + 5 * 60_000
    third = await node.e_write(who, title="third", text="c")
    wall.now = T0 + 2 * HOUR + 59 * 60_000
    await node.e_correct(who, sr_id=third["sr_id"], reason="typo", text="c, corrected")
    wall.now = T0 + 3 * HOUR + 30 * 60_000
