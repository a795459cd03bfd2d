"""The writer's in-memory picture of the logs it holds: heads, positions, the clock.

Only the writer changes the store, so this cache is exact while the writer runs; it is loaded
at open and reloaded after a rolled-back batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import msgpack

from node.store.connection import Connection
from node.store.pending import Fetch, PendingTally
from protocol.clock import Hlc
from protocol.entry import LogId

__all__ = ["DROPPED", "LogHead", "LogTable", "decode_hlc", "encode_hlc"]

DROPPED = 0  # a log's forked_at when it is hidden whole: over its writer's bound (logbound)

_PENDING_LOGS = "SELECT DISTINCT writer, epoch FROM pending"


@dataclass(slots=True)
class LogHead:
    """``seq`` is the newest position handed out; ``id`` is the id of the entry at ``id_seq``
    (for this node's own log, sealing on the writer's thread catches ``id_seq`` up to ``seq``)."""

    log_id: int
    seq: int
    id: bytes | None
    forked_at: int | None = None
    id_seq: int = 0

    def hides(self, seq: int) -> bool:
        return self.forked_at is not None and seq >= self.forked_at


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
            self.heads[(bytes(w), bytes(e))] = LogHead(log_id, seq, head_id, forked, seq)
        self.next_log_id = max((h.log_id for h in self.heads.values()), default=0) + 1
        self.writer_logs = Counter(
            w for (w, _), h in self.heads.items() if h.seq and h.forked_at != DROPPED
        )
        self.next_pos = await _scalar(conn, "SELECT coalesce(max(pos), 0) FROM headers") + 1
        rows = await conn.execute_fetchall(_PENDING_LOGS)
        self.pending_logs = {(bytes(w), bytes(e)) for w, e in rows}
        self.pending_tally = PendingTally()  # counted when something next asks to wait

    async def pending_left(self, fetch: Fetch) -> None:
        """Take in that rows left the pending area (expired or cleared)."""
        self.pending_logs = {(bytes(w), bytes(e)) for w, e in await fetch(_PENDING_LOGS, ())}
        self.pending_tally.stale = True

    def head(self, log: LogId) -> LogHead:
        """The head of ``log``, registering an empty one (seq 0) if it is new."""
        head = self.heads.get(log)
        if head is None:
            head = self.heads[log] = LogHead(self.next_log_id, 0, None)
            self.next_log_id += 1
        return head

    def take_pos(self) -> int:
        pos = self.next_pos
        self.next_pos += 1
        return pos


async def _scalar(conn: Connection, sql: str) -> int:
    rows = await conn.execute_fetchall(sql)
    return int(rows[0][0]) if rows else 0
