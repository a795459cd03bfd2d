"""The receive path's part of the pending area (docs/entries.md §The pending area): a log's
waiting entries taken up again, entries parked within the area's bounds
(``node.store.pending``) and the rows a log's head has passed dropped.
"""

from __future__ import annotations

from node.store.received import _Candidate, _Receive
from protocol.entry import Entry, LogId
from protocol.kinds import place_of

__all__: list[str] = []

_PENDING_INSERT = (
    "INSERT OR IGNORE INTO pending (id, writer, epoch, seq, raw, payload, source, size, arrived, "
    "workspace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_PENDING_FILL = "UPDATE pending SET payload = ?, size = ? WHERE id = ?"


class _Waiting(_Receive):
    # -- the pending area ----------------------------------------------------------------------

    async def _pending_of(
        self, log: LogId, above: int, received: list[_Candidate]
    ) -> list[_Candidate]:
        """The log's waiting entries above ``above``.  A received entry that is already
        waiting is marked as such, so it is not parked (and counted) a second time."""
        rows = await self.txn.fetchall(
            "SELECT id, seq, raw, payload, workspace FROM pending WHERE writer = ? AND epoch = ?",
            (log[0], log[1]),
        )
        waiting = {bytes(r[0]): r for r in rows}
        for cand in received:
            row = waiting.get(cand.entry.id)
            if row is not None:
                cand.from_pending = True
                if row[3] is None and cand.entry.payload is not None:  # it waits more whole
                    self.txn.add(
                        _PENDING_FILL, (cand.entry.payload, _size(cand.entry), cand.entry.id)
                    )
                    waiting[cand.entry.id] = (*row[:3], cand.entry.payload, cand.place)
                    self.store.logs.pending_tally.stale = True
        skip = {c.entry.id for c in received}
        out = []
        for pid, seq, raw, payload, place in waiting.values():
            if seq <= above or pid in skip:
                continue
            entry = Entry.decode(bytes(raw), None if payload is None else bytes(payload))
            decoded = self.store.decode_known(entry)
            if decoded is not None:
                place = place_of(entry.header.kind, decoded)
            out.append(_Candidate(entry, decoded, True, place))
        return out

    async def _park(self, cands: list[_Candidate]) -> None:
        """Let ``cands`` wait, each within the area's bounds (``node.store.pending``)."""
        logs, options = self.store.logs, self.store.options
        for cand in cands:
            if cand.from_pending:
                continue
            entry = cand.entry
            if self.store.erasures.covers(entry.header.kind, cand.payload) is not None:
                entry = entry.without_payload()  # about an erased SR: waits without it
            size = _size(entry)
            why = await logs.pending_tally.refusal(self.txn.fetchall, options, self.source, size)
            if why is not None:
                self._reject(why, entry.id)
                continue
            h = entry.header
            row = (entry.id, h.writer, h.epoch, h.seq, entry.raw, entry.payload, self.source)
            self.txn.add(_PENDING_INSERT, (*row, size, self.store.wall(), cand.place))
            logs.pending_logs.add(h.log)
            logs.pending_tally.add(self.source, size)
            self.report.pending += 1

    async def _drop_stale_pending(self, log: LogId, head_seq: int) -> None:
        self.txn.add(
            "DELETE FROM pending WHERE writer = ? AND epoch = ? AND seq <= ?",
            (log[0], log[1], head_seq),
        )
        self.store.logs.pending_tally.stale = True
        has = await self.txn.fetchone(
            "SELECT 1 FROM pending WHERE writer = ? AND epoch = ? LIMIT 1", (log[0], log[1])
        )
        if not has:
            self.store.logs.pending_logs.discard(log)


def _size(entry: Entry) -> int:
    """What an entry takes in the pending area: its header and payload bytes."""
    return len(entry.raw) + len(entry.payload or b"")
