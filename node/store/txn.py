"""One write transaction, buffered: rows are gathered per statement and written with
``executemany`` in a single trip to the connection's thread when the batch commits (or before
any read inside it).  A group commit of many appends therefore costs one hop to SQLite's thread,
not a handful per append.

Statements run grouped by their text, in the order each text was first queued; operations keep
to statements that commute apart from that order (inserts, upserts, and updates or deletes of
rows queued earlier).

The transaction begins at its first trip (``BEGIN IMMEDIATE``), not when it is made, so a
batch is built while the one before it commits.  It was built on the in-memory state (heads,
view caches, clock) as of the store's last look; if another connection committed since
(``PRAGMA data_version`` moved from ``expect``), that first trip raises ``Stale`` and the
writer builds the batch again on reloaded state.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from node.store.connection import Connection

__all__ = ["Stale", "Txn"]

Row = Sequence[Any]
_Buffer = dict[str, list[Row]]
Mark = tuple[tuple[int, int, int, int], dict[str, int]]


Deferred = Callable[[Callable[[str, Row], None]], None]
"""Work run on the connection's thread just before the rows are written; it may queue rows
(through the function it is given) into statements reserved for it."""


Fetch = Callable[[str, Row], Awaitable[list[Row]]]


class Stale(Exception):
    """Another connection committed since the batch's state was loaded: build it again."""

    def __init__(self, version: int) -> None:
        super().__init__(f"the database changed (data_version {version})")
        self.version = version


def _write(db: sqlite3.Connection, work: tuple[list[Deferred], _Buffer, int | None]) -> None:
    deferred, buffer, expect = work
    if not db.in_transaction:
        db.execute("BEGIN IMMEDIATE")
        found = int(db.execute("PRAGMA data_version").fetchone()[0])
        if expect is not None and found != expect:
            raise Stale(found)

    def add(sql: str, row: Row) -> None:
        buffer[sql].append(row)

    for fn in deferred:
        fn(add)
    for sql, rows in buffer.items():
        if rows:
            db.executemany(sql, rows)


class Txn:
    """Buffered writes on the writer connection, inside one transaction."""

    def __init__(
        self,
        conn: Connection,
        *,
        expect: int | None = None,
        serial: int = 0,
        committed: Fetch | None = None,
    ) -> None:
        self._conn = conn
        self._expect = expect
        # The writer numbers its transactions: while this one is built, the one numbered
        # ``serial - 1`` may still be committing, and every earlier one is committed.
        self.serial = serial
        self._committed = committed
        # Set by an operation that rewrites views beyond the rows it names (a rebuild, a
        # log hidden): the batch after it reads everything through its own transaction.
        self.wide = False
        self._buffer: _Buffer = {}
        self._deferred: list[Deferred] = []
        self._final: dict[object, Deferred] = {}
        self._keyed: dict[str, dict[object, int]] = {}
        self._holes: set[str] = set()  # statements with a row withdrawn (``put`` of None)
        self._flushes = 0
        self._replaced = 0
        self._deferrals = 0
        self._queued = 0  # rows ever queued (a count that only grows)
        self._written = 0  # ``_queued`` when the buffer was last written

    def add(self, sql: str, row: Row) -> None:
        """Queue one row for ``sql``."""
        rows = self._buffer.get(sql)  # (setdefault would make a list per row queued)
        if rows is None:
            rows = self._buffer[sql] = []
        rows.append(row)
        self._queued += 1

    def reserve(self, *statements: str) -> None:
        """Give ``statements`` their place in the order now, rows or not."""
        for sql in statements:
            self._buffer.setdefault(sql, [])

    def defer(self, fn: Deferred, *reserve: str) -> None:
        """Run ``fn`` on the connection's thread when this transaction is written; the
        statements it will fill are ``reserve``d now, so they keep their place in the order.
        (Sealing runs this way: signing releases the GIL, the event loop goes on.)"""
        self.reserve(*reserve)
        self._deferred.append(fn)
        self._deferrals += 1

    def defer_once(self, key: object, fn: Deferred) -> None:
        """Like ``defer``, once per ``key``, after every other deferred function."""
        self._final.setdefault(key, fn)

    def put(self, sql: str, key: object, row: Row | None) -> None:
        """Queue ``row`` for ``sql``, replacing a row queued earlier under the same ``key``
        (for upserts where only the last value matters, such as a log's head); ``None``
        withdraws that row and queues none."""
        keyed = self._keyed.get(sql)
        if keyed is None:
            keyed = self._keyed[sql] = {}
        rows = self._buffer.get(sql)
        if rows is None:
            rows = self._buffer[sql] = []
        at = keyed.get(key, -1)
        if at >= 0:
            rows[at] = row  # type: ignore[assignment]  # None: a hole, dropped when written
            self._replaced += 1
            if row is None:
                self._holes.add(sql)
                del keyed[key]
        elif row is not None:
            keyed[key] = len(rows)
            rows.append(row)
        self._queued += 1

    def mark(self) -> Mark:
        """A point to ``rewind`` to if the operation that follows refuses."""
        moves = (self._flushes, self._replaced, self._deferrals, self._queued)
        return moves, {s: len(r) for s, r in self._buffer.items()}

    def rewind(self, mark: Mark) -> bool:
        """Drop rows queued since ``mark``; False when some were already written, replaced
        or deferred (the batch must then be voided).  A read since ``mark`` writes the buffer;
        that is harmless when nothing had been queued since (an operation that reads, then
        refuses, as every unknown-id check does)."""
        (flushes, replaced, deferrals, queued), lengths = mark
        if (replaced, deferrals) != (self._replaced, self._deferrals):
            return False
        if flushes != self._flushes:
            if self._written > queued:
                return False
            lengths = {}  # everything buffered now was queued after the last write
        for sql in list(self._buffer):
            del self._buffer[sql][lengths.get(sql, 0) :]
        for sql, keyed in self._keyed.items():
            self._keyed[sql] = {k: i for k, i in keyed.items() if i < lengths.get(sql, 0)}
        return True

    def _take(self) -> tuple[list[Deferred], _Buffer, int | None]:
        for sql in self._holes:
            self._buffer[sql] = [row for row in self._buffer[sql] if row is not None]
        work = ([*self._deferred, *self._final.values()], self._buffer, self._expect)
        self._deferred, self._final, self._buffer, self._keyed = [], {}, {}, {}
        self._holes = set()
        self._flushes += 1
        self._written = self._queued
        return work

    async def lock(self) -> int:
        """Begin now, taking the write lock, and return the database's ``data_version`` (it
        changes when another connection — another process — commits); no ``expect`` check."""

        def run(db: sqlite3.Connection) -> int:
            if not db.in_transaction:
                db.execute("BEGIN IMMEDIATE")
            return int(db.execute("PRAGMA data_version").fetchone()[0])

        return await self._conn.call(run)

    async def fetch_committed(self, sql: str, args: Row = ()) -> list[Row]:
        """Read what is committed, on a connection of its own, without waiting for the
        batch before this one to commit: for rows that neither it nor this one wrote (the
        caller knows which; ``serial``).  Without such a connection (or after a ``wide``
        batch), ``fetchall``."""
        if self._committed is None:
            return await self.fetchall(sql, args)
        return await self._committed(sql, args)

    async def fetchall(self, sql: str, args: Row = ()) -> list[Row]:
        """Read inside the transaction; queued writes are written first so reads see them."""
        work = self._take()

        def run(db: sqlite3.Connection) -> list[Row]:
            _write(db, work)
            return list(db.execute(sql, args).fetchall())

        return await self._conn.call(run)

    async def fetchone(self, sql: str, args: Row = ()) -> Row | None:
        rows = await self.fetchall(sql, args)
        return rows[0] if rows else None

    async def flush(self) -> None:
        """Write what is queued, inside the still open transaction: a long operation (a
        bundle import) keeps its rows from piling up in memory."""
        work = self._take()

        def run(db: sqlite3.Connection) -> None:
            _write(db, work)

        await self._conn.call(run)

    async def commit(self) -> None:
        """Write what is queued and commit, in one trip; on failure roll back and raise."""
        work = self._take()

        def run(db: sqlite3.Connection) -> None:
            try:
                _write(db, work)
                db.commit()
            except BaseException:
                if db.in_transaction:
                    db.rollback()
                raise

        await self._conn.call(run)

    async def rollback(self) -> None:
        self._take()

        def run(db: sqlite3.Connection) -> None:
            if db.in_transaction:
                db.rollback()

        await self._conn.call(run)
