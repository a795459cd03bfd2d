"""What the membership view (node/members/membership.py) loads from the log at open: the
authority's key and every applied member entry of its logs (docs/mesh.md §The authority).

A view is handed one scalar query at a time (``View.load``), so the entries come back as one
``group_concat`` string and are split here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["select_authority", "select_member_entries"]

Scalar = Callable[[str], Awaitable[Any]]

# Every applied member entry of the authority's logs, as "log_id:header hex:payload hex"
# joined by commas.
_LOAD = (
    "SELECT group_concat(h.log_id || ':' || hex(h.raw) || ':' || hex(p.data), ',') "
    "FROM headers h JOIN payloads p ON p.pos = h.pos "
    "WHERE h.applied = 1 AND h.kind IN ('member.add', 'member.revoke') AND h.log_id IN "
    "(SELECT log_id FROM logs WHERE writer = (SELECT value FROM state WHERE key = 'authority'))"
)
_AUTHORITY = "SELECT value FROM state WHERE key = 'authority'"


async def select_authority(scalar: Scalar) -> bytes | None:
    """The mesh authority's key, as ``state`` holds it; None when there is none."""
    value = await scalar(_AUTHORITY)
    return bytes(value) if value else None


async def select_member_entries(scalar: Scalar) -> list[tuple[int, bytes, bytes]]:
    """Every applied ``member.*`` entry of the authority's logs: its log id, raw header and
    payload."""
    found = []
    for item in str(await scalar(_LOAD) or "").split(","):
        if item:
            log_id, raw, data = item.split(":")
            found.append((int(log_id), bytes.fromhex(raw), bytes.fromhex(data)))
    return found
