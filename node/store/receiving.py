"""The receive entry points (``receive``, ``receive_in``; the receive path itself is
node/store/ingest.py), what they check of an entry before it, the pending area's sweep and
clearing, and a log hidden from a fork on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from node.store.audit import AuditEvent
from node.store.heads import LogHead
from node.store.ingest import Ingest, precheck
from node.store.pending import SWEEP_EVERY_MS, SourceRow, delete_pending, expire_pending
from node.store.pending import select_sources as _select_sources
from node.store.received import Checked, Received, Report
from node.store.sealing import _Sealing
from node.store.txn import Txn
from node.store.views import Hidden
from protocol.entry import Entry
from protocol.kinds import decode_payload, is_known

__all__ = []

_EXPIRED = "it waited in the pending area longer than pending_expiry"


class _Receiving(_Sealing):
    """The receive entry points (``Store``)."""

    # -- receiving -------------------------------------------------------------------------------

    def admit(self, entry: Entry) -> str | None:
        """Why ``entry`` may not enter this store, or None: the mesh must match.  The
        membership rule (``membership``) is applied log by log on the receive path."""
        if self.mesh is not None and entry.header.mesh != self.mesh:
            return "entry belongs to another mesh"
        return None

    async def receive(
        self,
        entries: Sequence[Received | Checked],
        *,
        source: str,
        event: AuditEvent | None = AuditEvent.SR_SYNCED,
    ) -> Report:
        """The append path for entries from elsewhere (sync, bundles, tests).

        Authenticate (one rule, chain-amortised), check membership and mesh, detect forks,
        insert idempotently and audit — all in one transaction.  Entries that cannot attach
        or be authenticated yet wait in the pending area.  ``event`` is written once per
        newly stored entry (``None`` for paths that audit once per batch).
        """

        async def op(txn: Txn) -> Report:
            return await self.receive_in(txn, entries, source=source, event=event)

        report: Report = await self.run(op)
        return report

    async def receive_in(
        self,
        txn: Txn,
        entries: Sequence[Received | Checked],
        *,
        source: str,
        event: AuditEvent | None,
    ) -> Report:
        """``receive`` inside a transaction the caller runs: a bundle import feeds it a chunk
        at a time, pre-checked (``precheck``) before the transaction."""
        await self._expire_pending(txn)
        return await Ingest(self, txn, source, event).run(entries)

    def precheck(self, entries: Sequence[Received]) -> list[Checked]:
        """The receive path's pre-checks (node/store/ingest.py, step 1), which read nothing
        of the store: done before a transaction, they are not done in it."""
        return [precheck(self, entry) for entry in entries]

    def decode_known(self, entry: Entry) -> dict[str, Any] | None:
        """The validated payload of a known kind, or None (unknown kind or payload absent)."""
        if entry.payload is None or not is_known(entry.header.kind):
            return None
        return decode_payload(entry.header.kind, entry.payload)

    # -- the pending area (node/store/pending.py) ----------------------------------------------

    async def _expire_pending(self, txn: Txn) -> None:
        """Drop rows that waited beyond ``pending_expiry``: at the first receive after the
        store opens, then at most once a ``SWEEP_EVERY_MS``; each audited as rejected."""
        now = self.wall()
        if self._swept is not None and now - self._swept < SWEEP_EVERY_MS:
            return
        self._swept = now
        gone = await expire_pending(txn, before=now - self.options.pending_expiry_ms)
        if not gone:
            return
        await self.logs.pending_left(txn.fetchall)
        for row in gone:
            self.audit_rejection(txn, row.source, AuditEvent.ENTRY_REJECTED, _EXPIRED, row.id)

    async def select_pending(self) -> list[SourceRow]:
        """What each source holds in the pending area."""
        assert self.reader is not None
        return await _select_sources(self.reader.fetchall)

    async def clear_pending(self, *, source: str | None = None, before: int | None = None) -> int:
        """Delete the waiting entries of ``source`` (every source when None) that arrived
        before ``before`` (ms by this node's wall clock; any time when None), in one
        transaction; how many."""

        async def op(txn: Txn) -> int:
            cleared = await delete_pending(txn, source=source, before=before)
            await self.logs.pending_left(txn.fetchall)
            return cleared

        count: int = await self.run(op)
        return count

    async def hide_log(self, txn: Txn, head: LogHead, from_seq: int) -> None:
        """Hide a log's entries from ``from_seq`` on (a fork): views withdraw them."""
        if head.forked_at is not None and head.forked_at <= from_seq:
            return
        head.forked_at = from_seq
        txn.wide = True
        for view in self.views:
            await view.hide(txn, Hidden(head.log_id, from_seq))
        txn.add(
            "UPDATE headers SET applied = 0 WHERE log_id = ? AND seq >= ?", (head.log_id, from_seq)
        )
