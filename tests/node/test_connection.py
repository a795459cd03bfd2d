"""The store's SQLite connection and its thread (node/store/connection.py): calls run one at a
time in the order made, their errors reach the caller, a cancelled call still runs to its end,
and ``close`` lets the calls already made finish first."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from node.store.connection import Connection


@pytest.mark.asyncio
async def test_calls_run_on_one_thread_in_the_order_made(tmp_path: Path) -> None:
    async with await Connection.open(tmp_path / "db", isolation_level=None) as conn:
        await conn.execute("CREATE TABLE t (n INTEGER)")
        seen: list[int] = []

        def put(n: int) -> Callable[[sqlite3.Connection], int]:
            def run(db: sqlite3.Connection) -> int:
                db.execute("INSERT INTO t VALUES (?)", (n,))
                seen.append(threading.get_ident())
                return n

            return run

        got = await asyncio.gather(*(conn.call(put(n)) for n in range(50)))
        assert got == list(range(50))
        assert len(set(seen)) == 1
        assert seen[0] != threading.get_ident()
        assert await conn.execute_fetchall("SELECT n FROM t ORDER BY rowid") == [
            (n,) for n in range(50)
        ]


@pytest.mark.asyncio
async def test_an_error_reaches_the_caller_and_the_connection_goes_on(tmp_path: Path) -> None:
    async with await Connection.open(tmp_path / "db") as conn:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await conn.execute_fetchall("SELECT * FROM missing")

        def boom(_db: sqlite3.Connection) -> None:
            raise KeyError("mine")

        with pytest.raises(KeyError, match="mine"):
            await conn.call(boom)
        assert await conn.execute_fetchall("SELECT 1") == [(1,)]


@pytest.mark.asyncio
async def test_a_thread_without_a_loop_waits_for_its_call_in_turn(tmp_path: Path) -> None:
    """``call_waiting``: another thread's call runs on the connection's thread, after the
    calls made before it, and hands back its answer or its error."""
    async with await Connection.open(tmp_path / "db", isolation_level=None) as conn:
        await conn.execute("CREATE TABLE t (n INTEGER)")
        gate = threading.Event()
        blocked = asyncio.ensure_future(conn.call(lambda _db: gate.wait(5.0)))
        first = asyncio.ensure_future(conn.execute("INSERT INTO t VALUES (1)"))
        waited = asyncio.ensure_future(
            asyncio.to_thread(
                conn.call_waiting, lambda db: db.execute("SELECT n FROM t").fetchall()
            )
        )
        await asyncio.sleep(0.05)
        assert not waited.done()
        gate.set()
        await asyncio.gather(blocked, first)
        assert await waited == [(1,)]
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await asyncio.to_thread(
                conn.call_waiting, lambda db: db.execute("SELECT * FROM missing").fetchall()
            )


@pytest.mark.asyncio
async def test_a_cancelled_call_still_runs_to_its_end(tmp_path: Path) -> None:
    async with await Connection.open(tmp_path / "db", isolation_level=None) as conn:
        await conn.execute("CREATE TABLE t (n INTEGER)")
        gate = threading.Event()

        def slow(db: sqlite3.Connection) -> None:
            gate.wait(5)
            db.execute("INSERT INTO t VALUES (1)")

        task = asyncio.create_task(conn.call(slow))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        assert await conn.execute_fetchall("SELECT n FROM t") == [(1,)]


@pytest.mark.asyncio
async def test_close_lets_the_calls_made_finish_then_refuses_more(tmp_path: Path) -> None:
    conn = await Connection.open(tmp_path / "db", isolation_level=None)
    await conn.execute("CREATE TABLE t (n INTEGER)")
    pending = [
        asyncio.ensure_future(conn.execute("INSERT INTO t VALUES (?)", (n,))) for n in range(20)
    ]
    await asyncio.sleep(0)  # every insert is queued
    await conn.close()
    await asyncio.gather(*pending)
    with pytest.raises(ValueError, match="closed"):
        await conn.execute_fetchall("SELECT 1")
    await conn.close()  # twice is harmless
    async with await Connection.open(tmp_path / "db") as again:
        assert await again.execute_fetchall("SELECT count(*) FROM t") == [(20,)]


@pytest.mark.asyncio
async def test_a_connection_that_cannot_open_raises(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.OperationalError):
        await Connection.open(tmp_path / "no" / "such" / "dir" / "db")
