"""The single writer: one task owns the write connection and group-commits.

Callers ``submit`` an operation and await its result.  The writer takes every operation queued
at that moment (up to ``max_batch``), runs them one after another into one transaction, and
commits once; only then does each caller's await return, so an acknowledged write is durable
(``synchronous=FULL``) and concurrent authors share one fsync.

Commits are pipelined: while batch N is being committed on SQLite's thread, the writer already
runs the operations of batch N+1 (sealing, signing) on the event loop.  Batch N+1 builds on
N's state, so if N's commit fails, N+1 fails with it and the in-memory state is reloaded.

An operation that refuses (raises ``NodeError``) fails alone and leaves no rows.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from node.errors import NodeError, StoreError
from node.store.connection import Connection
from node.store.failures import store_error
from node.store.txn import Txn

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
        on_begin: Callable[[Txn], Awaitable[None]],
        before_commit: Callable[[Txn], None],
        max_batch: int = 512,
    ) -> None:
        self._conn = conn
        self._on_rollback = on_rollback
        self._on_begin = on_begin
        self._before_commit = before_commit
        self._max_batch = max_batch
        self._queue: deque[_Job | None] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.commits = 0

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
        inflight: asyncio.Task[BaseException | None] | None = None
        stopping = False
        while not stopping:
            batch, stopping = await self._next_batch()
            txn = Txn(self._conn)
            built = await self._build(txn, batch) if batch else None
            failed = await inflight if inflight is not None else None
            inflight = None
            if failed is not None:
                await self._discard(txn, batch, failed)
            elif batch:
                inflight = asyncio.create_task(self._commit(txn, batch, built))
                # Let the commit reach SQLite's queue before the next batch can queue reads:
                # the thread runs work in submission order, and batch N+1 builds on N.
                await asyncio.sleep(0)
        if inflight is not None:
            await inflight

    async def _next_batch(self) -> tuple[list[_Job], bool]:
        """Everything queued now, up to ``max_batch``: one transaction, one fsync for all.
        (Taking only part of the queue, to build one half while the other commits, was
        measured slower: the two threads then fight over the GIL.)"""
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

    async def _build(self, txn: Txn, batch: list[_Job]) -> BaseException | None:
        """Run each operation into ``txn``; an unexpected error voids the whole batch."""
        try:
            await self._on_begin(txn)
            for job in batch:
                await _run_one(job, txn)
            self._before_commit(txn)
        except Exception as exc:
            return exc
        return None

    async def _commit(
        self, txn: Txn, batch: list[_Job], built: BaseException | None
    ) -> BaseException | None:
        """Commit (or void) one batch and settle its callers; return the failure, if any."""
        error = built
        if error is None:
            try:
                await txn.commit()
                self.commits += 1
            except (sqlite3.Error, ValueError) as exc:
                error = exc
        if error is not None:
            await self._discard(txn, batch, error)
            return error
        for job in batch:
            _settle(job.done, job.value, job.error)
        return None

    async def _discard(self, txn: Txn, batch: list[_Job], cause: BaseException) -> None:
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
