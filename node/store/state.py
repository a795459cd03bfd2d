"""Local state and the audit feed: the ``state`` table's rows, how far a writer's newest log is
accepted, a restore's new log, and the events written under the feed's rate limit
(``RejectionLimiter``, docs/tools/e_audit.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from node.store.audit import AuditEvent, audit
from node.store.core import _STATE_UPSERT, _StoreCore
from node.store.heads import LogHead
from node.store.txn import Txn
from protocol.entry import LogId

__all__ = []

_LAST_ACCEPTED = (
    "SELECT l.epoch, CASE WHEN l.forked_at IS NULL THEN l.head_seq "
    "ELSE min(l.head_seq, l.forked_at - 1) END "
    "FROM logs l JOIN headers h ON h.log_id = l.log_id AND h.seq = l.head_seq "
    "WHERE l.writer = ? ORDER BY h.hlc_wall DESC, h.hlc_counter DESC LIMIT 1"
)


class _StateAudit(_StoreCore):
    """Local state and audit events (``Store``)."""

    # -- audit -----------------------------------------------------------------------------------

    def admit_event(self, source: str, event: AuditEvent) -> int | None:
        """The audit feed's rate limit (``RejectionLimiter``, docs/tools/e_audit.md): how many
        ``event``s of ``source`` the one written now stands for, or None when it is only
        counted."""
        return self.limiter.admit(source, event, self.wall())

    def audit_rejection(
        self, txn: Txn, source: str, event: AuditEvent, reason: str, entry: bytes | None
    ) -> None:
        now = self.clock.last.wall
        count = self.admit_event(source, event)
        if count is not None:
            audit(
                txn,
                event,
                now,
                entry=entry,
                detail={"source": source, "reason": reason, "count": count},
            )

    async def audit_limited(
        self, event: AuditEvent, source: str, detail: Mapping[str, object]
    ) -> None:
        """Write ``event`` of ``source`` in a transaction of its own, stamped at this node's
        moment, unless the rate limit only counts it (``admit_event``): ``peer_connected`` /
        ``peer_disconnected``, at most one a peer and event a minute."""
        count = self.admit_event(source, event)
        if count is None:
            return

        async def op(txn: Txn) -> None:
            audit(txn, event, self.now_ms(), detail={"source": source, "count": count, **detail})

        await self.run(op)

    # -- state -----------------------------------------------------------------------------------

    async def get_state(self, key: str) -> bytes | None:
        assert self.reader is not None
        return await self.reader.state(key)

    def put_state(self, txn: Txn, key: str, value: bytes) -> None:
        txn.add(_STATE_UPSERT, (key, value))

    def delete_state(self, txn: Txn, key: str) -> None:
        txn.add("DELETE FROM state WHERE key = ?", (key,))

    async def select_state(self, txn: Txn, key: str) -> bytes | None:
        """A state value as ``txn`` sees it (under the write lock, unlike ``get_state``)."""
        row = await txn.fetchone("SELECT value FROM state WHERE key = ?", (key,))
        return bytes(row[0]) if row is not None else None

    async def has_state(self, txn: Txn, key: str) -> bool:
        return await txn.fetchone("SELECT 1 FROM state WHERE key = ?", (key,)) is not None

    async def select_last_accepted(self, txn: Txn, writer: bytes) -> tuple[bytes, int] | None:
        """The newest log of ``writer`` (by its head's clock) and how far this node has
        accepted it: up to its head, or to just before a fork point; None: no log of it."""
        found = await txn.fetchone(_LAST_ACCEPTED, (writer,))
        return (bytes(found[0]), int(found[1])) if found else None

    def insert_new_epoch(self, txn: Txn, writer: bytes, epoch: bytes, prev: bytes) -> None:
        """A new epoch's log row of ``writer``, holding ``prev`` (the old epoch's head) at
        seq 0 until its first entry is sealed, which names it as its ``prev``."""
        txn.add(
            "INSERT INTO logs (log_id, writer, epoch, head_seq, head_id, forked_at) "
            "VALUES ((SELECT coalesce(max(log_id), 0) + 1 FROM logs), ?, ?, 0, ?, NULL)",
            (writer, epoch, prev),
        )

    def head_of(self, log: LogId) -> LogHead | None:
        return self.logs.heads.get(log)
