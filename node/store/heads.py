"""The writer's in-memory picture of the ``logs`` table: each log's head, the next header
position and log id, the logs with entries waiting in the pending area.

Only the writer changes the store, so this cache is exact while the writer runs; it is loaded
at open and reloaded after a rolled-back batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from node.store.connection import Connection
from node.store.pending import Fetch, PendingTally
from protocol.clock import Hlc
from protocol.entry import LogId

__all__ = ["DROPPED", "LOG_UPSERT", "LogHead", "LogTable", "decode_hlc", "encode_hlc"]

DROPPED = 0  # a log's forked_at when it is hidden whole: over its writer's bound (logbound)
LOG_UPSERT = (
    "INSERT INTO logs (log_id, writer, epoch, head_seq, head_id, forked_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (log_id) DO UPDATE SET "
    "head_seq = excluded.head_seq, head_id = excluded.head_id, forked_at = excluded.forked_at"
)

_PENDING_LOGS = "SELECT DISTINCT writer, epoch FROM pending"


@dataclass(slots=True)
class LogHead:
    """The head of the log ``(writer, epoch)``: ``seq`` is the newest position handed out;
    ``id`` is the id of the entry at ``id_seq`` (for this node's own log, sealing on the
    writer's thread catches ``id_seq`` up to ``seq``); from ``forked_at`` on, its entries are
    hidden."""

    log_id: int
    writer: bytes
    epoch: bytes
    seq: int
    id: bytes | None
    forked_at: int | None = None
    id_seq: int = 0

    def hides(self, seq: int) -> bool:
        return self.forked_at is not None and seq >= self.forked_at

    def row(self) -> tuple[Any, ...]:
        """Its ``logs`` row (``LOG_UPSERT``)."""
        return (self.log_id, self.writer, self.epoch, self.id_seq, self.id, self.forked_at)

    def write_row(self, add: Callable[[str, Sequence[Any]], None]) -> None:
        """Queue its ``logs`` row on the writer's thread, after the batch's entries of this
        log were sealed (``Txn.defer_once``)."""
        add(LOG_UPSERT, self.row())


def encode_hlc(hlc: Hlc) -> bytes:
    packed: bytes = msgpack.packb([hlc.wall, hlc.counter])
    return packed


def decode_hlc(blob: bytes) -> Hlc:
    wall, counter = msgpack.unpackb(blob)
    return Hlc(wall, counter)


class LogTable:
    """Heads of every log, the next header position and log id, and logs with pending rows."""

    def __init__(self) -> None:
        self.heads: dict[LogId, LogHead] = {}
        self.next_pos = 1
        self.next_log_id = 1
        self.pending_logs: set[LogId] = set()
        self.pending_tally = PendingTally()
        self.writer_logs: Counter[bytes] = Counter()  # logs held per writer, dropped ones not

    async def load(self, conn: Connection) -> None:
        self.heads.clear()
        for w, e, log_id, seq, head_id, forked in await conn.execute_fetchall(
            "SELECT writer, epoch, log_id, head_seq, head_id, forked_at FROM logs"
        ):
            self.heads[(bytes(w), bytes(e))] = LogHead(
                log_id, bytes(w), bytes(e), seq, head_id, forked, seq
            )
        self.next_log_id = max((h.log_id for h in self.heads.values()), default=0) + 1
        self.writer_logs = Counter(
            w for (w, _), h in self.heads.items() if h.seq and h.forked_at != DROPPED
        )
        self.next_pos = await _scalar(conn, "SELECT coalesce(max(pos), 0) FROM headers") + 1
        rows = await conn.execute_fetchall(_PENDING_LOGS)
        self.pending_logs = {(bytes(w), bytes(e)) for w, e in rows}
        self.pending_tally = PendingTally(swept=self.pending_tally.swept)  # counted anew

    async def pending_left(self, fetch: Fetch) -> None:
        """Take in that rows left the pending area (expired or cleared)."""
        self.pending_logs = {(bytes(w), bytes(e)) for w, e in await fetch(_PENDING_LOGS, ())}
        self.pending_tally.stale = True

    def head(self, log: LogId) -> LogHead:
        """The head of ``log``, registering an empty one (seq 0) if it is new."""
        head = self.heads.get(log)
        if head is None:
            head = self.heads[log] = LogHead(self.next_log_id, log[0], log[1], 0, None)
            self.next_log_id += 1
        return head

    def take_pos(self) -> int:
        pos = self.next_pos
        self.next_pos += 1
        return pos


async def _scalar(conn: Connection, sql: str) -> int:
    rows = await conn.execute_fetchall(sql)
    return int(rows[0][0]) if rows else 0
