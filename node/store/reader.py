"""Reads on a separate connection (WAL readers never block the writer)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from node.store.connection import Connection, translated
from protocol.canonical import decode_canonical

__all__ = [
    "READ_CACHE",
    "AuditRow",
    "ChangedLog",
    "Fetch",
    "LogRow",
    "Marks",
    "Origin",
    "Reader",
    "Snapshot",
    "SpanEntry",
    "StoredEntry",
]


@dataclass(frozen=True, slots=True)
class LogRow:
    log_id: int
    writer: bytes
    epoch: bytes
    head_seq: int
    head_id: bytes | None
    forked_at: int | None


_ORIGINS = (
    "SELECT h.pos, h.kind, p.data, l.writer FROM headers h JOIN logs l ON l.log_id = h.log_id "
    "LEFT JOIN payloads p ON p.pos = h.pos WHERE h.pos IN ({marks})"
)


@dataclass(frozen=True, slots=True)
class Origin:
    kind: str
    payload: bytes | None
    writer: bytes


@dataclass(frozen=True, slots=True)
class StoredEntry:
    pos: int
    seq: int
    raw: bytes
    payload: bytes | None
    applied: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every log's head and the newest header position, as of one instant."""

    pos: int
    logs: tuple[LogRow, ...]


@dataclass(frozen=True, slots=True)
class SpanEntry:
    """One stored entry of a log, as sync sends it."""

    seq: int
    id: bytes
    raw: bytes
    payload: bytes | None
    workspace: str | None = None  # where its payload is placed (docs/partial.md)


@dataclass(frozen=True, slots=True)
class ChangedLog:
    """A log that gained entries after some position: its newest seq and position since."""

    log_id: int
    writer: bytes
    epoch: bytes
    head_seq: int
    pos: int


@dataclass(frozen=True, slots=True)
class Marks:
    """How far the store has got: its newest header position and how many fork proofs it
    holds (both only grow)."""

    pos: int
    forks: int


@dataclass(frozen=True, slots=True)
class AuditRow:
    seq: int
    event: str
    at: int
    workspace: str | None
    subject: str | None
    principal: str | None
    entry: bytes | None
    detail: dict[str, Any]


T = TypeVar("T")
Fetch = Callable[..., list[Any]]  # (sql, args=()) -> rows, on the reader's own thread

# The reader's page cache: 16 MiB, not SQLite's 2 MiB, so that a search's postings, the narrow
# rows they are checked against and the page's SR rows stay cached between questions.
READ_CACHE = "PRAGMA cache_size=-16384"
_READ_FAILED = "reading the store failed"


class Reader:
    """Read-only queries; one connection, used by one task at a time per call."""

    def __init__(self, conn: Connection, countable: frozenset[str] = frozenset()) -> None:
        self._conn = conn
        self._countable = _COUNTABLE | countable

    @classmethod
    async def open(cls, path: Path, *, countable: frozenset[str] = frozenset()) -> Reader:
        """A reader of the store at ``path``; ``countable``: the views' tables ``count`` may
        count, besides the log's own."""
        conn = await Connection.open(path, isolation_level=None)
        await conn.execute("PRAGMA query_only=1")
        await conn.execute(READ_CACHE)
        return cls(conn, countable)

    async def close(self) -> None:
        await self._conn.close()

    async def fetchall(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        # One hop to the connection's thread and back (a cursor took three: execute, fetch,
        # close — each a wake-up of both threads).
        with translated(_READ_FAILED):
            return await self._conn.execute_fetchall(sql, args)

    async def run(self, fn: Callable[[Fetch], T]) -> T:
        """Run ``fn`` on the connection's thread, reading through the ``fetch`` it is given
        (``fetchall``'s synchronous twin): reads that depend on one another in one hop."""

        def call(db: sqlite3.Connection) -> T:
            return fn(lambda sql, args=(): db.execute(sql, args).fetchall())

        with translated(_READ_FAILED):
            return await self._conn.call(call)

    def run_waiting(self, fn: Callable[[Fetch], T]) -> T:
        """``run`` for a thread that runs no event loop, blocked until ``fn`` has run: one hop
        to the connection's thread and back (a loop's call takes one more, to the loop)."""

        def call(db: sqlite3.Connection) -> T:
            return fn(lambda sql, args=(): db.execute(sql, args).fetchall())

        with translated(_READ_FAILED):
            return self._conn.call_waiting(call)

    async def snapshot(self, fn: Callable[[Fetch], T]) -> T:
        """``run`` inside one read transaction: every read of ``fn`` sees the same commit."""

        def call(db: sqlite3.Connection) -> T:
            db.execute("BEGIN")
            try:
                return fn(lambda sql, args=(): db.execute(sql, args).fetchall())
            finally:
                db.execute("COMMIT")

        with translated(_READ_FAILED):
            return await self._conn.call(call)

    async def scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = await self.fetchall(sql, args)
        return rows[0][0] if rows else None

    async def state(self, key: str) -> bytes | None:
        value = await self.scalar("SELECT value FROM state WHERE key = ?", (key,))
        return bytes(value) if value is not None else None

    async def select_logs(self) -> list[LogRow]:
        rows = await self.fetchall(
            "SELECT log_id, writer, epoch, head_seq, head_id, forked_at FROM logs ORDER BY log_id"
        )
        return [LogRow(r[0], bytes(r[1]), bytes(r[2]), r[3], _b(r[4]), r[5]) for r in rows]

    async def select_entries(
        self, log_id: int, *, gt: int = 0, lte: int | None = None, limit: int = 1000
    ) -> list[StoredEntry]:
        """Entries of one log with ``gt < seq <= lte``, in seq order."""
        rows = await self.fetchall(
            "SELECT h.pos, h.seq, h.raw, p.data, h.applied FROM headers h "
            "LEFT JOIN payloads p ON p.pos = h.pos "
            "WHERE h.log_id = ? AND h.seq > ? AND h.seq <= ? ORDER BY h.seq LIMIT ?",
            (log_id, gt, lte if lte is not None else 1 << 62, limit),
        )
        return [StoredEntry(r[0], r[1], bytes(r[2]), _b(r[3]), bool(r[4])) for r in rows]

    async def select_origins(self, positions: Sequence[int]) -> dict[int, Origin]:
        """The entries at ``positions``: each one's kind, payload (None where absent) and
        writer — where a view's row came from."""
        if not positions:
            return {}
        marks = ",".join("?" * len(positions))
        rows = await self.fetchall(_ORIGINS.format(marks=marks), tuple(positions))
        return {r[0]: Origin(r[1], _b(r[2]), bytes(r[3])) for r in rows}

    async def iter_entries(self, log_id: int, *, batch: int = 2000) -> AsyncIterator[StoredEntry]:
        after = 0
        while chunk := await self.select_entries(log_id, gt=after, limit=batch):
            for item in chunk:
                yield item
            after = chunk[-1].seq

    # -- sync (node/mesh): each read is one statement, so it sees one committed state ---------

    async def select_snapshot(self) -> Snapshot:
        """Every log and the newest header position, in one read: an entry stored after it
        has a greater position."""
        rows = await self.fetchall(
            "SELECT 0, coalesce(max(pos), 0), NULL, NULL, NULL, NULL, NULL FROM headers "
            "UNION ALL SELECT 1, log_id, writer, epoch, head_seq, head_id, forked_at FROM logs"
        )
        pos = next(r[1] for r in rows if r[0] == 0)
        logs = tuple(
            LogRow(r[1], bytes(r[2]), bytes(r[3]), r[4], _b(r[5]), r[6]) for r in rows if r[0]
        )
        return Snapshot(pos, logs)

    async def select_span(
        self, log_id: int, *, gt: int, lte: int, limit: int, max_bytes: int
    ) -> list[SpanEntry]:
        """Entries of one log with ``gt < seq <= lte`` in seq order: at most ``limit`` of
        them, and only as many as fit in ``max_bytes`` counted as sync counts credit (header
        plus payload).  Sizes are read first, so no blob beyond the budget is loaded."""
        rows = await self.fetchall(_SPAN, (log_id, gt, lte, limit, max_bytes))
        return [SpanEntry(r[0], bytes(r[1]), bytes(r[2]), _b(r[3]), r[4]) for r in rows]

    async def select_entry_id(self, log_id: int, seq: int) -> bytes | None:
        value = await self.scalar(
            "SELECT id FROM headers WHERE log_id = ? AND seq = ?", (log_id, seq)
        )
        return _b(value)

    async def select_changed(self, *, gt: int) -> list[ChangedLog]:
        """The logs with entries at positions after ``gt``, each with its newest seq (its
        head: a log's headers run 1..head with no gap) and newest position."""
        rows = await self.fetchall(
            "SELECT l.log_id, l.writer, l.epoch, max(h.seq), max(h.pos) FROM headers h "
            "JOIN logs l ON l.log_id = h.log_id WHERE h.pos > ? GROUP BY l.log_id",
            (gt,),
        )
        return [ChangedLog(r[0], bytes(r[1]), bytes(r[2]), r[3], r[4]) for r in rows]

    async def select_forks(self) -> list[tuple[bytes, bytes]]:
        """Every fork proof held: the kept header and the other, raw."""
        rows = await self.fetchall(
            "SELECT kept_raw, other_raw FROM forks ORDER BY writer, epoch, seq, other_raw"
        )
        return [(bytes(r[0]), bytes(r[1])) for r in rows]

    async def select_marks(self) -> Marks:
        rows = await self.fetchall(
            "SELECT (SELECT coalesce(max(pos), 0) FROM headers), (SELECT count(*) FROM forks)"
        )
        return Marks(int(rows[0][0]), int(rows[0][1]))

    async def select_bundle_subjects(
        self, key: bytes, *, after: str = "", limit: int = 1000
    ) -> dict[str, int]:
        """What the bundle import ``key`` names brought — entries with content, by subject —
        for the first ``limit`` subjects after ``after``."""
        rows = await self.fetchall(
            "SELECT subject, entries FROM bundle_subjects WHERE import_key = ? AND subject > ? "
            "ORDER BY subject LIMIT ?",
            (key, after, limit),
        )
        return {r[0]: int(r[1]) for r in rows}

    async def select_erased(self, sr_ids: Sequence[str]) -> dict[str, tuple[str, str, int]]:
        """Of ``sr_ids`` (one statement's worth), the erased SRs: the workspace, owner and
        privacy each had when erased (docs/erasure.md)."""
        rows = await self.fetchall(
            "SELECT sr_id, workspace, owner, private FROM erased_srs "  # noqa: S608
            f"WHERE sr_id IN ({','.join('?' * len(sr_ids))})",
            list(sr_ids),
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    async def select_audit(self, *, gt: int = 0, limit: int = 100) -> list[AuditRow]:
        rows = await self.fetchall(
            "SELECT seq, event, at, workspace, subject, principal, entry, detail FROM audit "
            "WHERE seq > ? ORDER BY seq LIMIT ?",
            (gt, limit),
        )
        return [
            AuditRow(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                _b(r[6]),
                decode_canonical(bytes(r[7]), what="detail") if r[7] else {},
            )
            for r in rows
        ]

    async def max_audit_seq(self) -> int:
        return int(await self.scalar("SELECT coalesce(max(seq), 0) FROM audit"))

    async def select_audit_counts(self, *, gt: int, lte: int) -> dict[str, int]:
        """How many events of each kind the feed holds with ``gt < seq <= lte``."""
        rows = await self.fetchall(
            "SELECT event, count(*) FROM audit WHERE seq > ? AND seq <= ? GROUP BY event",
            (gt, lte),
        )
        return {str(event): int(count) for event, count in rows}

    async def max_pos(self) -> int:
        """The newest header position (0 for an empty store)."""
        return int(await self.scalar("SELECT coalesce(max(pos), 0) FROM headers"))

    async def sum_pending_bytes(self) -> int:
        """The bytes of the entries waiting in the pending area."""
        return int(await self.scalar("SELECT coalesce(sum(size), 0) FROM pending"))

    async def count(self, table: str) -> int:
        if table not in self._countable:
            raise ValueError(f"not a countable table: {table}")
        return int(await self.scalar(f"SELECT count(*) FROM {table}"))  # noqa: S608


# The first ``limit`` entries above ``gt`` with their running cost; blobs are read only for
# those within the byte budget (length() of a blob does not load it).
_SPAN = (
    "WITH sized AS (SELECT h.pos, h.seq, length(h.raw) + coalesce(length(p.data), 0) AS cost "
    "FROM headers h LEFT JOIN payloads p ON p.pos = h.pos "
    "WHERE h.log_id = ? AND h.seq > ? AND h.seq <= ? ORDER BY h.seq LIMIT ?), "
    "running AS (SELECT pos, seq, sum(cost) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS total "
    "FROM sized) "
    "SELECT r.seq, h.id, h.raw, p.data, h.workspace FROM running r JOIN headers h ON h.pos = r.pos "
    "LEFT JOIN payloads p ON p.pos = r.pos WHERE r.total <= ? ORDER BY r.seq"
)

# The log's tables (and the tokens'); each view names its own (``View.countable``).
_COUNTABLE = frozenset(
    {"headers", "payloads", "pending", "forks", "audit", "logs", "tokens", "erased"}
)


def _b(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
