"""One SQLite connection and the thread it lives on; ``sqlite3``'s errors as the store's.

``sqlite3`` blocks, so each of the store's connections is opened on a thread of its own and
used only there: ``call`` hands that thread a function of the ``sqlite3.Connection`` and awaits
its result on the event loop.  Calls run one at a time, in the order they were made.  A call
whose awaiting task is cancelled still runs to its end (a commit is not torn in half); its
result is dropped.  ``close`` lets every call already made run, then closes the connection and
ends the thread.

The store reaches SQLite only through here, so its errors are translated here once
(``translated``, ``store_error``): the operator's message names what failed, then SQLite's own
words (node/errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from types import TracebackType
from typing import Any, TypeVar

from node.allocator import one_arena
from node.errors import StoreError

__all__ = ["Connection", "store_error", "translated", "truncate_wal"]

T = TypeVar("T")
Args = Sequence[Any] | Mapping[str, Any]
# A function for the thread and the future its outcome goes to (an event loop's, or a waiting
# thread's); no function: close and stop.
_Done = asyncio.Future[Any] | Future[Any]
_Job = tuple[Callable[[sqlite3.Connection], Any] | None, _Done | None]


class Connection:
    """A ``sqlite3.Connection`` owned by one worker thread; ``open`` makes one."""

    def __init__(self, jobs: SimpleQueue[_Job]) -> None:
        self._jobs = jobs
        self._open = True

    @classmethod
    async def open(cls, path: Path | str, **options: Any) -> Connection:
        """Open the database at ``path`` on a new thread (``options`` go to
        ``sqlite3.connect``: ``isolation_level=None`` for explicit transactions)."""
        one_arena()  # before the process's first connection thread allocates (allocator.py)
        ready = asyncio.get_running_loop().create_future()
        jobs: SimpleQueue[_Job] = SimpleQueue()
        thread = threading.Thread(
            target=_serve,
            args=(str(path), options, jobs, ready),
            name="memlane-sqlite",
        )
        thread.start()
        try:
            await ready
        except BaseException:
            # Not opened (the error is re-raised), or the opener went away: stop the thread.
            jobs.put((None, asyncio.get_running_loop().create_future()))
            raise
        return cls(jobs)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the connection's thread, after every call made before it; return
        what it returns, or raise what it raises."""
        if not self._open:
            raise ValueError("the connection is closed")
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fn, done))
        return await done

    def call_waiting(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``call`` for a thread that runs no event loop: it waits, blocked, for ``fn`` to
        have run on the connection's thread (one hop there and back, none through a loop)."""
        if not self._open:
            raise ValueError("the connection is closed")
        done: Future[T] = Future()
        self._jobs.put((fn, done))
        return done.result()

    async def execute(self, sql: str, args: Args = ()) -> None:
        """Run one statement to its end, its rows (a PRAGMA's answer) dropped."""
        await self.call(lambda db: db.execute(sql, args).fetchall())

    async def execute_fetchall(self, sql: str, args: Args = ()) -> list[Any]:
        """Run one statement and return all its rows: one trip to the thread and back."""
        return await self.call(lambda db: db.execute(sql, args).fetchall())

    async def close(self) -> None:
        """Let the calls already made run, then close the connection and end its thread.
        Closing twice is harmless."""
        if not self._open:
            return
        self._open = False
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put((None, done))
        await done

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __del__(self) -> None:
        # Dropped unclosed: end the thread, so it does not hold the interpreter open.  (The
        # thread holds only the queue, never this object.)
        if getattr(self, "_open", False):
            self._open = False
            self._jobs.put((None, None))


def _serve(
    path: str,
    options: dict[str, Any],
    jobs: SimpleQueue[_Job],
    ready: asyncio.Future[None],
) -> None:
    """The connection's thread: open, then run each job in turn until told to stop."""
    try:
        db = sqlite3.connect(path, **options)
    except BaseException as exc:
        _settle(ready, None, exc)
        return
    _settle(ready, None, None)
    while True:
        fn, done = jobs.get()
        if fn is None:
            break
        try:
            value = fn(db)
        except BaseException as exc:
            _settle(done, None, exc)
        else:
            _settle(done, value, None)
    try:
        db.close()
    except BaseException as exc:
        _settle(done, None, exc)
    else:
        _settle(done, None, None)


def _settle(done: _Done | None, value: Any, error: BaseException | None) -> None:
    """Hand a job's outcome to the event loop that awaits it, or the thread that waits."""
    if done is None:
        return
    if isinstance(done, Future):
        _set(done, value, error)  # thread-safe itself
        return
    with contextlib.suppress(RuntimeError):  # a closed loop: nothing awaits the outcome
        done.get_loop().call_soon_threadsafe(_set, done, value, error)


def _set(done: _Done, value: Any, error: BaseException | None) -> None:
    if done.done():  # the awaiting task was cancelled; the work itself ran regardless
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(value)


def store_error(what: str, exc: BaseException) -> StoreError:
    """``exc`` (an ``sqlite3.Error``, or the ``ValueError`` of a call on a closed
    ``Connection``) as the store's error: ``what`` failed, and SQLite's reason."""
    return StoreError(f"{what}: {exc}")


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Raise an ``sqlite3.Error`` of the block as ``store_error(what, …)``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(what, exc) from exc


_CHECKPOINT_TRIES = 100  # ~5 s of readers finishing before the WAL is left for the next time


async def truncate_wal(path: Path) -> bool:
    """Checkpoint the WAL of the database at ``path`` into its file and cut it to nothing (what
    was written to it is then gone); a reader still on an older snapshot makes it wait a
    little.  False when readers kept it busy throughout."""
    conn = await Connection.open(path, isolation_level=None)
    try:
        for _ in range(_CHECKPOINT_TRIES):
            busy = (await conn.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)"))[0][0]
            if not busy:
                return True
            await asyncio.sleep(0.05)
        return False
    finally:
        await conn.close()
