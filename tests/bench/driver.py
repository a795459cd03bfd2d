"""The SQLite driver under the store's writer: memlane's own connection thread
(``node.store.connection``) beside aiosqlite's public API, on the same transactions.

Each run seals 3,200 SR entries in transactions of 32 (``ingest.RawLog.rows``: the rows the
store writes for them, the signing included) on the event loop and writes them into a fresh
database (WAL, ``synchronous=FULL``):

- **connection thread**: each transaction is one call on the connection's thread —
  ``BEGIN IMMEDIATE``, one ``executemany`` per statement, ``COMMIT`` — as ``Txn.commit`` does;
- **aiosqlite**: the same statements through ``aiosqlite.Connection``'s public methods
  (``execute``, ``executemany``, ``commit``), each a trip to its thread.

The two alternate in rounds, so the machine's load falls on both sides of the ratio.  What the
numbers cannot show is the other thing the store asks of the thread and aiosqlite's public API
has no way to give: running its own function there — sealing authored entries on the writer's
thread as the batch is written, chained in commit order (docs/architecture.md §Decisions).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite

from node.store.connection import Connection
from tests.bench.common import SMOKE, Ratio, Result, Row, Stopwatch, progress
from tests.bench.ingest import RawLog, sr_fields

__all__ = ["run"]

THREAD = "memlane connection thread, 32 entries/txn"
AIOSQLITE = "aiosqlite public API, 32 entries/txn"
RATIOS = (Ratio("aiosqlite / connection thread", AIOSQLITE, THREAD),)
_PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON")

Batch = list[tuple[str, dict[str, Any]]]
Write = Callable[[list[tuple[str, list[Any]]]], Awaitable[None]]


def _batches(entries: int, per_txn: int) -> list[Batch]:
    work = [(f"author{i % 32:02d}", sr_fields(i)) for i in range(entries)]
    return [work[i : i + per_txn] for i in range(0, entries, per_txn)]


async def _run(path: Path, batches: list[Batch], write: Write) -> float:
    log = RawLog(path)  # the schema, and the rows each transaction writes
    log.close()
    with Stopwatch() as sw:
        for batch in batches:
            await write(log.rows(batch))
    return sw.seconds


async def thread(path: Path, batches: list[Batch]) -> float:
    conn = await Connection.open(path, isolation_level=None)
    for pragma in _PRAGMAS:
        await conn.execute(pragma)

    async def write(statements: list[tuple[str, list[Any]]]) -> None:
        def one_trip(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            for sql, rows in statements:
                db.executemany(sql, rows)
            db.commit()

        await conn.call(one_trip)

    try:
        return await _run(path, batches, write)
    finally:
        await conn.close()


async def through_aiosqlite(path: Path, batches: list[Batch]) -> float:
    async with aiosqlite.connect(path, isolation_level=None) as db:
        for pragma in _PRAGMAS:
            await db.execute(pragma)

        async def write(statements: list[tuple[str, list[Any]]]) -> None:
            await db.execute("BEGIN IMMEDIATE")
            for sql, rows in statements:
                await db.executemany(sql, rows)
            await db.execute("COMMIT")

        return await _run(path, batches, write)


def run(*, quick: bool, workdir: Path) -> Result:
    entries, rounds = (320, 1) if quick else (3_200, 5)
    batches = _batches(entries, 32)
    timings: dict[str, list[float]] = {THREAD: [], AIOSQLITE: []}
    for i in range(rounds):
        progress(f"driver: round {i + 1} of {rounds}")
        for label, fn in ((THREAD, thread), (AIOSQLITE, through_aiosqlite)):
            path = workdir / f"{label.split()[0]}-{i}.db"
            timings[label].append(asyncio.run(fn(path, batches)))
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
    return Result(
        title="driver: the writer's SQLite driver" + (SMOKE if quick else ""),
        rows=[Row(label, entries, tuple(seconds)) for label, seconds in timings.items()],
        ratios=list(RATIOS),
        notes=[
            f"aiosqlite {aiosqlite.__version__}; each transaction's rows sealed on the loop, "
            "the same for both; rate = entries / median run",
        ],
    )
