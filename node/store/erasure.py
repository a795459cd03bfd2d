"""Erasure (docs/erasure.md): an ``sr.erase`` entry removes, on every node that holds or later
receives it, the payloads of every entry about its SR and every row derived from them; the
headers stay, so every log still verifies.

``Erasures`` is the store's record of what was erased: ``erased_srs`` (the SR, its workspace,
and who could read it, for the ``sr_erased`` event) and ``erased`` (each entry whose payload
was taken, and by which erase), with the erased SRs held in memory so that a payload about one
is dropped as it arrives — by sync, a bundle, or the pending area — and never stored.

An erase takes effect when it is appended, whatever its clock: the bytes go at once, so a view
of an earlier moment does not bring them back.  It applies only to an SR of the erase's own
workspace (whose grant the membership rule checked); a second erase of the same SR changes
nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from node.store.audit import AuditEvent, audit
from node.store.connection import Connection
from node.store.views import AppliedEntry, View
from node.store.writer import Txn
from protocol.entry import decode_header
from protocol.errors import ProtocolError
from protocol.kinds import decode_payload

__all__ = [
    "ERASE",
    "ERASE_STEP",
    "HELD",
    "HELD_ERASES",
    "SCRUB",
    "SCRUB_INTERVAL",
    "Erasures",
    "scrub_step",
]

ERASE = "sr.erase"
_SR_KINDS = frozenset({"sr.put", "sr.correct", "sr.adjust"})

# The log's tables of what was erased (a step of node/store/schema.py).
ERASE_STEP = """
CREATE TABLE erased_srs (
    sr_id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    private INTEGER NOT NULL,
    pos INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE erased (pos INTEGER PRIMARY KEY, by_pos INTEGER NOT NULL);
INSERT OR REPLACE INTO state (key, value) VALUES ('erase_held', x'01');
"""
# Erases stored before this node knew the kind (relayed, not applied): applied once, at the
# first open after the step above (``Store.erase_held``).
HELD = "erase_held"
HELD_ERASES = (
    "SELECT h.pos, h.log_id, h.raw, p.data FROM headers h JOIN payloads p ON p.pos = h.pos "
    "WHERE h.kind = 'sr.erase' AND h.applied = 0 ORDER BY h.pos"
)

_TOMBSTONE = (
    "INSERT OR IGNORE INTO erased_srs (sr_id, workspace, owner, private, pos) "
    "VALUES (?, ?, ?, ?, ?)"
)
_MARK = "INSERT OR REPLACE INTO erased (pos, by_pos) VALUES (?, ?)"
_PURGE = (
    "DELETE FROM payloads WHERE pos = ?",
    "UPDATE headers SET applied = 0 WHERE pos = ?",
)
# Rows that name the SR beyond the views: its events (all but the erasure's own), and what
# bundle imports brought of it.  (Its vector goes by the vector index's trigger on ``srs``.)
# The entries the erase names that are held here without their payload (their place is the
# erase's workspace, or unknown): marked erased, and missing no more (docs/partial.md).
_NAMED = (
    "INSERT OR REPLACE INTO erased (pos, by_pos) SELECT m.pos, ? FROM missing m "
    "JOIN headers h ON h.pos = m.pos WHERE substr(h.id, 1, 8) = ? AND h.id = ? "
    "AND (m.workspace IS NULL OR m.workspace = ?)"
)
_FOUND = "DELETE FROM missing WHERE pos IN (SELECT pos FROM erased WHERE by_pos = ?)"
_EVENTS = "DELETE FROM audit WHERE subject = ? AND workspace = ? AND event != 'sr_erased'"
_SUBJECTS = "DELETE FROM bundle_subjects WHERE subject = ?"

# An erase leaves its SR's terms in the search index's older segments, and its bytes in the
# WAL: the scrub that follows merges the index (``View.scrub``) and truncates the WAL.
SCRUB = "erase_scrub"
SCRUB_INTERVAL = 60.0  # seconds: the least time from one scrub to the next (erases between wait)
_SCRUB_DUE = "INSERT OR REPLACE INTO state (key, value) VALUES ('erase_scrub', x'01')"
_PENDING = "SELECT id, raw, payload FROM pending WHERE payload IS NOT NULL"
_PENDING_DROP = "UPDATE pending SET payload = NULL, size = length(raw) WHERE id = ?"


class Erasures:
    """The SRs erased here, by id: the workspace each belonged to and its erase's position."""

    def __init__(self) -> None:
        self.srs: dict[str, tuple[str, int]] = {}
        self.erased = asyncio.Event()  # set by an erase: a scrub is due

    async def load(self, conn: Connection) -> None:
        rows = await conn.execute_fetchall("SELECT sr_id, workspace, pos FROM erased_srs")
        self.srs = {str(sr_id): (str(workspace), int(pos)) for sr_id, workspace, pos in rows}

    def covers(self, kind: str, payload: dict[str, Any] | None) -> str | None:
        """The erased SR an entry's payload is about, if it is one (None: keep it)."""
        if payload is None or kind not in _SR_KINDS:
            return None
        sr_id = payload.get("sr_id")
        erased = self.srs.get(sr_id) if isinstance(sr_id, str) else None
        return sr_id if erased is not None and erased[0] == payload.get("workspace") else None

    def dropped(self, txn: Txn, pos: int, sr_id: str) -> None:
        """Record that the entry at ``pos`` is kept without the payload it arrived with."""
        txn.add(_MARK, (pos, self.srs[sr_id][1]))

    async def erase(self, txn: Txn, views: Sequence[View], item: AppliedEntry, at: int) -> None:
        """Apply the erase ``item``: purge its SR's payloads and derived rows, record it;
        ``at`` stamps its ``sr_erased`` event."""
        sr_id, workspace = item.payload["sr_id"], item.payload["workspace"]
        if sr_id in self.srs:
            return
        erased = [await view.erase(txn, sr_id, workspace) for view in views]
        if None in erased:  # another workspace's SR: this erase's writer holds no grant for it
            return
        # Who could read it, by its last state; an SR not held here: its eraser and admins.
        readers = next((d.readers for d in erased if d and d.readers), None)
        owner, private = readers or (item.payload["principal"], True)
        txn.add(_TOMBSTONE, (sr_id, workspace, owner, int(private), item.pos))
        for done in erased:
            assert done is not None
            for pos in done.positions:
                for sql in _PURGE:
                    txn.add(sql, (pos,))
                txn.add(_MARK, (pos, item.pos))
        txn.reserve(_NAMED, _FOUND)
        for named in map(bytes.fromhex, item.payload["entries"]):
            txn.add(_NAMED, (item.pos, named[:8], named, workspace))
        txn.add(_FOUND, (item.pos,))
        txn.add(_EVENTS, (sr_id, workspace))
        txn.add(_SUBJECTS, (sr_id,))
        self.srs[sr_id] = (workspace, item.pos)
        txn.add(_SCRUB_DUE, ())
        self.erased.set()
        await self._drop_pending(txn)
        audit(
            txn,
            AuditEvent.SR_ERASED,
            at,
            workspace=workspace,
            subject=sr_id,
            principal=item.payload["principal"],
            entry_pos=item.pos,
        )

    async def _drop_pending(self, txn: Txn) -> None:
        """Take the payloads about an erased SR out of the pending area (bounded)."""
        for entry_id, raw, data in await txn.fetchall(_PENDING, ()):
            try:
                kind = decode_header(bytes(raw)).kind
                payload = decode_payload(kind, bytes(data)) if kind in _SR_KINDS else None
            except ProtocolError:
                continue
            if self.covers(kind, payload):
                txn.add(_PENDING_DROP, (entry_id,))


async def scrub_step(txn: Txn, views: Sequence[View]) -> bool:
    """The scrub, in one transaction: each view's search index merged whole (``View.scrub``)
    and the request cleared; False when none was due.  Whole, because FTS5's incremental
    merge, interleaved with the writes of other transactions, adds a level to the index each
    step and ends by corrupting it (docs/erasure.md §The bytes on disk)."""
    if await txn.fetchone("SELECT 1 FROM state WHERE key = ?", (SCRUB,)) is None:
        return False
    for view in views:
        for sql in view.scrub:
            txn.add(sql, ())
    txn.add("DELETE FROM state WHERE key = ?", (SCRUB,))
    return True
