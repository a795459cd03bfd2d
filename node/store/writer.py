"""The single writer: one task owns the write connection and group-commits.

Callers ``submit`` an operation and await its result.  The writer takes every operation queued
at that moment (up to ``max_batch``), runs them one after another into one transaction, and
commits once; only then does each caller's await return, so an acknowledged write is durable
(``synchronous=FULL``) and concurrent authors share one fsync.

Commits are pipelined: while batch N is being committed on SQLite's side, the writer already
runs the operations of batch N+1 on the event loop (sealing, signing, the views' folds; reads
of rows neither batch wrote go to a connection of their own, ``Txn.fetch_committed``).  Batch
N+1 builds on N's state, so if N's commit fails, N+1 fails with it and the in-memory state is
reloaded.  A batch begins at its first trip to SQLite; if another connection committed since
the store last looked (``Stale``), the batch — with the one after it, built on the same state —
is built again and committed alone, each holding the write lock from its start and reloading
the state under it, so that busy neighbours cannot keep a batch stale.  An operation may therefore
run more than once before its batch commits; only the last run's rows and result count.

An operation that refuses (raises ``NodeError``) fails alone and leaves no rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from node.errors import NodeError, StoreError
from node.store.connection import Connection, store_error
from node.store.txn import Fetch, Stale, Txn

__all__ = ["GroupWriter", "Operation"]

Operation = Callable[[Txn], Awaitable[Any]]


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True)
class _Job:
    op: Operation
    done: asyncio.Future[Any] = field(default_factory=_future)
    value: Any = None
    error: BaseException | None = None


class GroupWriter:
    """Runs operations in group-committed, pipelined transactions on one connection."""

    def __init__(
        self,
        conn: Connection,
        *,
        on_rollback: Callable[[], Awaitable[None]],
        on_stale: Callable[[int], Awaitable[None]],
        expect: Callable[[], int | None],
        before_commit: Callable[[Txn], None],
        committed: Fetch | None = None,
        max_batch: int = 512,
    ) -> None:
        self._conn = conn
        self._on_rollback = on_rollback
        self._on_stale = on_stale
        self._expect = expect
        self._before_commit = before_commit
        self._committed = committed
        self._max_batch = max_batch
        self._queue: deque[_Job | None] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._serial = 0
        self._wide = False  # the batch built last was ``Txn.wide``
        self.commits = 0
        self.rebuilt = 0  # batches built again because another connection had committed

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
        inflight: tuple[asyncio.Task[BaseException | None], list[_Job]] | None = None
        stopping = False
        while not stopping:
            batch, stopping = await self._next_batch(inflight[0] if inflight else None)
            if inflight is not None and inflight[0].done():
                await self._after(*inflight)  # settled before this batch is built on it
                inflight = None
            if not batch:
                continue
            txn = self._txn(self._expect())
            built = await self._build(batch, txn)
            if inflight is not None:
                failed, before = await inflight[0], inflight[1]
                inflight = None
                if isinstance(failed, Stale):  # this one was built on what that never made
                    await txn.rollback()
                    await self._alone(before)
                    await self._alone(batch)
                    continue
                if failed is not None:
                    await self._discard(txn, batch, failed)
                    continue
            if isinstance(built, Stale):
                await txn.rollback()
                await self._alone(batch)
                continue
            inflight = (asyncio.create_task(self._commit(txn, batch, built)), batch)
            # Let the commit reach SQLite's queue before the next batch can queue reads:
            # the connection runs work in submission order, and batch N+1 builds on N.
            await asyncio.sleep(0)
        if inflight is not None:
            await self._after(*inflight)

    async def _after(self, task: asyncio.Task[BaseException | None], batch: list[_Job]) -> None:
        """Wait for ``batch``'s commit; redo it if it was stale."""
        if isinstance(await task, Stale):
            await self._alone(batch)

    async def _alone(self, batch: list[_Job]) -> None:
        """Build and commit ``batch`` after a stale one, holding the write lock from the start
        (reloading first if another connection committed), so that busy neighbours cannot
        keep it stale."""
        self.rebuilt += 1
        txn = self._txn(expect=None)
        try:
            version = await txn.lock()
            if version != self._expect():
                await self._on_stale(version)
        except (sqlite3.Error, ValueError) as exc:
            await self._discard(txn, batch, exc)
            return
        await self._commit(txn, batch, await self._build(batch, txn))

    async def _next_batch(
        self, committing: asyncio.Task[BaseException | None] | None
    ) -> tuple[list[_Job], bool]:
        """Everything queued now, up to ``max_batch``: one transaction, one fsync for all;
        nothing if ``committing`` ends first.
        (Taking only part of the queue, to build one half while the other commits, was
        measured slower: the two threads then fight over the GIL.)"""
        while not self._queue:
            if committing is not None and committing.done():
                return [], False  # (a stale batch is redone before anything is taken)
            self._wakeup = asyncio.get_running_loop().create_future()
            waits: set[asyncio.Future[Any]] = {self._wakeup}
            if committing is not None:
                waits.add(committing)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        batch: list[_Job] = []
        while len(batch) < self._max_batch and self._queue:
            job = self._queue.popleft()
            if job is None:
                return batch, True
            batch.append(job)
        return batch, False

    def _txn(self, expect: int | None) -> Txn:
        self._serial += 1
        committed = None if self._wide else self._committed
        return Txn(self._conn, expect=expect, serial=self._serial, committed=committed)

    async def _build(self, batch: list[_Job], txn: Txn) -> BaseException | None:
        """Run each operation into ``txn``; an unexpected error voids the whole batch
        (``Stale``: build it again)."""
        try:
            for job in batch:
                await _run_one(job, txn)
            self._before_commit(txn)
        except Exception as exc:
            return exc
        finally:
            self._wide = txn.wide
        return None

    async def _commit(
        self, txn: Txn, batch: list[_Job], built: BaseException | None
    ) -> BaseException | None:
        """Commit (or void) one batch and settle its callers; return the failure, if any
        (``Stale``: rolled back, its callers not settled)."""
        error = built
        if error is None:
            try:
                await txn.commit()
                self.commits += 1
            except Stale as stale:
                return stale
            except (sqlite3.Error, ValueError) as exc:
                error = exc
        if error is not None:
            await self._discard(txn, batch, error)
            return error
        for job in batch:
            _settle(job.done, job.value, job.error)
        return None

    async def _discard(self, txn: Txn, batch: list[_Job], cause: BaseException) -> None:
        # A connection that cannot roll back (its statement process is gone) fails the
        # batches after this one at their own first trip; this one's callers hear now.
        with contextlib.suppress(sqlite3.Error, ValueError, StoreError):
            await txn.rollback()
            await self._on_rollback()
        error: BaseException = cause
        if isinstance(cause, sqlite3.Error | ValueError):
            error = store_error("the write transaction failed and was rolled back", cause)
        elif not isinstance(cause, NodeError):
            error = StoreError(f"the batch failed and was rolled back: {cause!r}")
        for job in batch:
            _settle(job.done, None, error)


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
