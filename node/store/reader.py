"""Reads on a separate connection (WAL readers never block the writer)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from node.errors import StoreError
from protocol.canonical import decode_canonical

__all__ = ["AuditRow", "LogRow", "Reader", "StoredEntry"]


@dataclass(frozen=True, slots=True)
class LogRow:
    log_id: int
    writer: bytes
    epoch: bytes
    head_seq: int
    head_id: bytes | None
    forked_at: int | None


@dataclass(frozen=True, slots=True)
class StoredEntry:
    pos: int
    seq: int
    raw: bytes
    payload: bytes | None
    applied: bool


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


class Reader:
    """Read-only queries; one connection, used by one task at a time per call."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, path: Path) -> Reader:
        conn = await aiosqlite.connect(path, isolation_level=None)
        await conn.execute("PRAGMA query_only=1")
        return cls(conn)

    async def close(self) -> None:
        await self._conn.close()

    async def fetchall(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        # One hop to the connection's thread and back (a cursor took three: execute, fetch,
        # close — each a wake-up of both threads).
        try:
            return list(await self._conn.execute_fetchall(sql, args))
        except sqlite3.Error as exc:
            raise StoreError(f"reading the store failed: {exc}") from exc

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

    async def iter_entries(self, log_id: int, *, batch: int = 2000) -> AsyncIterator[StoredEntry]:
        after = 0
        while chunk := await self.select_entries(log_id, gt=after, limit=batch):
            for item in chunk:
                yield item
            after = chunk[-1].seq

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

    async def count(self, table: str) -> int:
        if table not in _COUNTABLE:
            raise ValueError(f"not a countable table: {table}")
        return int(await self.scalar(f"SELECT count(*) FROM {table}"))  # noqa: S608


_COUNTABLE = frozenset(
    {
        "headers",
        "payloads",
        "pending",
        "forks",
        "audit",
        "logs",
        "deletions",
        "tokens",
        "sr_versions",
        "srs",
        "sr_tags",
        "sr_links",
        "sr_due",
        "sr_fts",
        "episode_entries",
        "episodes",
        "episode_due",
    }
)


def _b(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
