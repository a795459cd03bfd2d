"""The single writer: one task owns the write connection and group-commits, each batch in one
buffered transaction (``Txn``) — docs/architecture.md §One writer, group commit.

Callers ``submit`` an operation and await its result.  The writer takes every operation queued
at that moment (up to ``max_batch``), runs them one after another into one transaction, and
commits once; only then does each caller's await return, so an acknowledged write is durable
(``synchronous=FULL``) and concurrent authors share one fsync.  An operation that refuses
(raises ``NodeError``) fails alone and leaves no rows; any other failure voids the batch.

The transaction is buffered: rows are gathered per statement and written with ``executemany``
in a single trip to the connection's thread when the batch commits (or before any read inside
it), so a group commit of many appends costs one hop to SQLite's thread, not a handful per
append.  Statements run grouped by their text, in the order each text was first queued;
operations keep to statements that commute apart from that order (inserts, upserts, and
updates or deletes of rows queued earlier).

Batches are written one after another: the next is built once the one before has committed
(building it meanwhile, on the state the one before left, measured no faster on two cores:
docs/architecture.md §Decisions).

A batch begins at its first trip (``BEGIN IMMEDIATE``), not when it is made, so the write lock
is held only while it is written.  It was built on the in-memory state (heads, view caches,
clock) as of the store's last look; if another connection committed since (``PRAGMA
data_version`` moved from ``expect``: a ``memlane write`` beside a running ``memlane serve``),
that first trip raises ``Stale``, and the batch is built again holding the write lock from its
start and reloading the state under it, so that busy neighbours cannot keep it stale.  An
operation may therefore run more than once before its batch commits; only the last run's rows
and result count.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.errors import DiskRefused, NodeError, StoreError
from node.store.connection import Connection, store_error

__all__ = ["Deferred", "Fetch", "GroupWriter", "Operation", "Settle", "Stale", "Txn"]


Row = Sequence[Any]
_Buffer = dict[str, list[Row]]
Mark = tuple[tuple[int, int, int, int], dict[str, int]]


Deferred = Callable[[Callable[[str, Row], None]], None]
"""Work run on the connection's thread just before the rows are written; it may queue rows
(through the function it is given) into statements reserved for it."""


Fetch = Callable[[str, Row], Awaitable[list[Row]]]

Settle = Callable[[sqlite3.Connection], None]
"""Work run on the connection's thread once a flush or the commit has written the rows."""


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
        self, conn: Connection, *, expect: int | None = None, settle: Settle | None = None
    ) -> None:
        self._conn = conn
        self._expect = expect
        self._settle = settle
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
        work, settle = self._take(), self._settle

        def run(db: sqlite3.Connection) -> None:
            _write(db, work)
            if settle is not None:
                settle(db)

        await self._conn.call(run)

    @property
    def rows(self) -> int:
        """Rows queued to be written in this transaction so far."""
        return self._queued

    async def commit(self) -> None:
        """Write what is queued and commit, in one trip; on failure roll back and raise."""
        work, settle = self._take(), self._settle

        def run(db: sqlite3.Connection) -> None:
            try:
                _write(db, work)
                if settle is not None:
                    settle(db)
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


Operation = Callable[[Txn], Awaitable[Any]]


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True)
class _Job:
    op: Operation
    done: asyncio.Future[Any] = field(default_factory=_future)
    value: Any = None
    error: BaseException | None = None


_DISK_REFUSED = (10, 13)  # SQLITE_IOERR (and its extended codes), SQLITE_FULL


class GroupWriter:
    """Runs operations in group-committed transactions on one connection."""

    def __init__(
        self,
        conn: Connection,
        *,
        on_rollback: Callable[[], Awaitable[None]],
        on_stale: Callable[[int], Awaitable[None]],
        expect: Callable[[], int | None],
        before_commit: Callable[[Txn], None],
        settle: Settle | None = None,
        max_batch: int = 512,
    ) -> None:
        self._conn = conn
        self._settle = settle
        self._on_rollback = on_rollback
        self._on_stale = on_stale
        self._expect = expect
        self._before_commit = before_commit
        self._max_batch = max_batch
        self._queue: deque[_Job | None] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.commits = 0
        self.rebuilt = 0  # batches built again because another connection had committed
        # When the disk last refused a write (a full disk, an I/O error; monotonic seconds),
        # why, and its rows — until one as large commits (small ones pass on a full disk).
        self.failed: tuple[float, str, int] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="memlane-writer")

    def submit(self, op: Operation) -> asyncio.Future[Any]:
        """Queue ``op``; the future resolves once its batch is durable."""
        if self._task is None or self._task.done():
            raise StoreError("the store is closed")
        job = _Job(op)
        self._put(job)
        return job.done

    def _put(self, job: _Job | None) -> None:
        self._queue.append(job)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def stop(self) -> None:
        """Finish what is queued, then stop."""
        if self._task is None:
            return
        self._put(None)
        await self._task
        self._task = None

    async def _run(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = await self._next_batch()
            if batch:
                await self._write(batch)

    async def _next_batch(self) -> tuple[list[_Job], bool]:
        """Everything queued now, up to ``max_batch``: one transaction, one fsync for all;
        and whether the writer was told to stop after it."""
        while not self._queue:
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup
        batch: list[_Job] = []
        while len(batch) < self._max_batch and self._queue:
            job = self._queue.popleft()
            if job is None:
                return batch, True
            batch.append(job)
        return batch, False

    async def _write(self, batch: list[_Job]) -> None:
        """Build ``batch`` into one transaction and commit it; if it was built on state
        another connection has changed since, build it again holding the write lock
        (reloading first), so that busy neighbours cannot keep it stale."""
        txn = Txn(self._conn, expect=self._expect(), settle=self._settle)
        if not await self._commit(txn, batch, await self._build(batch, txn)):
            return
        self.rebuilt += 1
        txn = Txn(self._conn, settle=self._settle)
        try:
            version = await txn.lock()
            if version != self._expect():
                await self._on_stale(version)
        except (sqlite3.Error, ValueError) as exc:
            await self._discard(txn, batch, exc)
            return
        await self._commit(txn, batch, await self._build(batch, txn))

    async def _build(self, batch: list[_Job], txn: Txn) -> BaseException | None:
        """Run each operation into ``txn``; an unexpected error voids the whole batch
        (``Stale``: build it again)."""
        try:
            for job in batch:
                await _run_one(job, txn)
            self._before_commit(txn)
        except Exception as exc:
            return exc
        return None

    async def _commit(self, txn: Txn, batch: list[_Job], built: BaseException | None) -> bool:
        """Commit (or void) one batch and settle its callers; True when it was stale: rolled
        back, its callers not settled, to be built again."""
        error = built
        if error is None:
            try:
                await txn.commit()
                self.commits += 1
                if self.failed is not None and txn.rows >= self.failed[2]:
                    self.failed = None
            except (Stale, sqlite3.Error, ValueError) as exc:
                error = exc
        if isinstance(error, Stale):
            await txn.rollback()
            return True
        if error is not None:
            await self._discard(txn, batch, error)
            return False
        for job in batch:
            _settle(job.done, job.value, job.error)
        return False

    async def _discard(self, txn: Txn, batch: list[_Job], cause: BaseException) -> None:
        with contextlib.suppress(sqlite3.Error, ValueError, StoreError):
            await txn.rollback()
            await self._on_rollback()
        error: BaseException = cause
        if isinstance(cause, sqlite3.Error | ValueError):
            error = store_error("the write transaction failed and was rolled back", cause)
        elif not isinstance(cause, NodeError):
            error = StoreError(f"the batch failed and was rolled back: {cause!r}")
        if _disk_refused(cause):
            error = DiskRefused(str(error))
            self.failed = (time.monotonic(), str(error), txn.rows)
        for job in batch:
            _settle(job.done, None, error)


def _disk_refused(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from, is SQLite's full disk or I/O error."""
    while exc is not None:
        if isinstance(exc, sqlite3.Error) and exc.sqlite_errorcode & 0xFF in _DISK_REFUSED:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


async def _run_one(job: _Job, txn: Txn) -> None:
    job.value, job.error = None, None  # (a batch built again runs its operations again)
    mark = txn.mark()
    try:
        job.value = await job.op(txn)
    except NodeError as exc:
        if not txn.rewind(mark):
            raise StoreError("an operation refused after writing; the batch is void") from exc
        job.error = exc


def _settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():  # the caller went away (cancelled); the write stands or fell regardless
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
