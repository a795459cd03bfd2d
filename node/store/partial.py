"""Partial replication's part of the log (docs/partial.md): where each entry's payload is
placed, the headers held without their payload, and the payloads a peer asks for by id.

Every entry's header is held everywhere; its payload only by the nodes whose grant holds its
*place* — the workspace it writes into (``protocol.kinds.place_of``; None for the entries
every node keeps whole).  ``headers.workspace`` records each entry's place: read from its
payload, or from the workspace tag a peer sent with a header-only entry.  ``missing`` lists
the entries held without their payload (and not erased), with their place, for the fetch
(node/mesh/fetch.py); the fill path of the receive (node/store/ingest.py) takes them off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.errors import ProtocolError
from protocol.kinds import decode_payload, is_known, place_of
from protocol.payloads import Answer

__all__ = [
    "PARTIAL_STEP",
    "PLACES_DUE",
    "WITHHOLD_DUE",
    "Wanted",
    "answer_wants",
    "not_held",
    "select_wanted",
    "unplaced",
    "withhold",
]

# The log's step for partial replication (a step of node/store/schema.py).  Entries held
# before it have no place recorded: those with a payload are placed at the first open after
# it (``PLACES_DUE``), those without one are missing with their place unknown.
PARTIAL_STEP = """
ALTER TABLE headers ADD COLUMN workspace TEXT;
ALTER TABLE pending ADD COLUMN workspace TEXT;
CREATE INDEX headers_id ON headers (substr(id, 1, 8));
CREATE TABLE missing (pos INTEGER PRIMARY KEY, workspace TEXT);
CREATE INDEX missing_place ON missing (workspace, pos);
INSERT INTO missing (pos) SELECT h.pos FROM headers h
    WHERE NOT EXISTS (SELECT 1 FROM payloads p WHERE p.pos = h.pos)
    AND NOT EXISTS (SELECT 1 FROM erased e WHERE e.pos = h.pos);
INSERT OR REPLACE INTO state (key, value) VALUES ('places_due', x'01');
"""
PLACES_DUE = "places_due"
# This node's grant narrowed: the payloads it no longer holds are withheld (``withhold``) at
# the next chance, and at the next open if it stopped first.
WITHHOLD_DUE = "withhold_due"
MISSING_INSERT = "INSERT OR REPLACE INTO missing (pos, workspace) VALUES (?, ?)"
MISSING_DELETE = "DELETE FROM missing WHERE pos = ?"

_UNPLACED = (
    "SELECT h.pos, h.kind, p.data FROM headers h JOIN payloads p ON p.pos = h.pos "
    "WHERE h.workspace IS NULL AND h.pos > ? ORDER BY h.pos LIMIT ?"
)
PLACE = "UPDATE headers SET workspace = ? WHERE pos = ?"
# The statements below are completed with placeholders only.
_WANTED = "SELECT m.pos, h.id, h.raw, m.workspace FROM missing m JOIN headers h ON h.pos = m.pos"
_ANSWERS = (
    "SELECT h.id, h.workspace, p.data, e.pos IS NOT NULL FROM headers h "
    "LEFT JOIN payloads p ON p.pos = h.pos LEFT JOIN erased e ON e.pos = h.pos"
)

Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]


def not_held(workspace: str | None) -> str:
    """The refusal of a token or a write for a workspace this node's grant does not hold."""
    return (
        f"this node does not hold workspace {workspace!r}: its mesh grant holds other "
        "workspaces (memlane mesh members)"
    )


async def unplaced(fetchall: Fetch, add: Callable[[str, Sequence[Any]], None]) -> int:
    """Record the place of every entry held with its payload and no place yet (those held
    from before ``PARTIAL_STEP``); how many were placed."""
    after, placed = 0, 0
    while rows := await fetchall(_UNPLACED, (after, 10_000)):
        for pos, kind, data in rows:
            after = pos
            if not is_known(kind):
                continue
            try:
                place = place_of(kind, decode_payload(kind, bytes(data)))
            except ProtocolError:
                continue
            if place is not None:
                add(PLACE, (place, pos))
                placed += 1
    return placed


@dataclass(frozen=True, slots=True)
class Wanted:
    """An entry held without its payload that this node may hold: position, id, raw header,
    and its place (None: not known here)."""

    pos: int
    id: bytes
    raw: bytes
    workspace: str | None


def _where(places: frozenset[str] | None) -> tuple[str, list[Any]]:
    if places is None:
        return "", []
    marks = ", ".join("?" * len(places))
    return f" AND (m.workspace IS NULL OR m.workspace IN ({marks}))", sorted(places)


async def select_wanted(
    fetchall: Fetch, *, after: int, limit: int, places: frozenset[str] | None
) -> list[Wanted]:
    """Up to ``limit`` missing entries past position ``after``, in position order, whose
    place is unknown or among ``places`` (None: any)."""
    where, args = _where(places)
    sql = f"{_WANTED} WHERE m.pos > ?{where} ORDER BY m.pos LIMIT ?"
    rows = await fetchall(sql, (after, *args, limit))
    return [Wanted(r[0], bytes(r[1]), bytes(r[2]), r[3]) for r in rows]


async def answer_wants(
    fetchall: Fetch, ids: Sequence[bytes], may_hold: Callable[[str | None], bool]
) -> list[tuple[bytes, bytes | int]]:
    """The answer to a peer's request for ``ids`` (ascending): each id's payload, or why not —
    ``ERASED``, ``WITHHELD`` (the peer's grant does not hold its place: ``may_hold``), or
    ``ABSENT`` (not held here, or no such entry)."""
    marks = ", ".join("?" * len(ids))
    sql = f"{_ANSWERS} WHERE substr(h.id, 1, 8) IN ({marks})"
    rows = await fetchall(sql, [i[:8] for i in ids])
    found = {bytes(r[0]): r for r in rows}
    out: list[tuple[bytes, bytes | int]] = []
    for entry_id in ids:
        row = found.get(entry_id)
        if row is None or (row[2] is None and not row[3]):
            out.append((entry_id, int(Answer.ABSENT)))
        elif row[3]:
            out.append((entry_id, int(Answer.ERASED)))
        elif not may_hold(row[1]):
            out.append((entry_id, int(Answer.WITHHELD)))
        else:
            out.append((entry_id, bytes(row[2])))
    return out


# Withholding, with ``{out}`` the test that a row's workspace is outside the grant: the
# entries held whole there become missing, unapplied and without their payload; the pending
# area and the audit feed lose what they hold of those workspaces.
_WITHHOLD = (
    "INSERT OR REPLACE INTO missing (pos, workspace) SELECT h.pos, h.workspace FROM headers h "
    "JOIN payloads p ON p.pos = h.pos WHERE {out}",
    "UPDATE headers SET applied = 0 WHERE pos IN (SELECT pos FROM missing WHERE {out})",
    "DELETE FROM payloads WHERE pos IN (SELECT pos FROM missing WHERE {out})",
    "UPDATE pending SET payload = NULL, size = length(raw) WHERE payload IS NOT NULL AND {out}",
    "DELETE FROM audit WHERE {out}",
)


def withhold(add: Callable[[str, Sequence[Any]], None], held: frozenset[str]) -> None:
    """Withhold every payload placed outside ``held`` (docs/partial.md §Shrinking a grant);
    the views are then rebuilt from what stays (``Store.withhold``)."""
    names = sorted(held)
    out = f"workspace IS NOT NULL AND workspace NOT IN ({', '.join('?' * len(names))})"
    for sql in _WITHHOLD:
        add(sql.format(out=out), names)
