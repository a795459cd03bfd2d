"""The writer's connection in a child process (node/store/statements.py): a failed statement
fails its batch and leaves nothing, a child that dies fails the writes after it with the
store's error, and a child never outlives the process it serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from node.errors import StoreError
from node.schema import MIGRATIONS
from node.store import Store, StoreOptions
from node.store.txn import Txn
from node.views import default_views
from tests.node.helpers import Wall

_PUT = "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)"


def _children() -> list[int]:
    """This process's statement processes, by their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"statements.py" in cmdline:
            found.append(int(entry.name))
    return found


@pytest_asyncio.fixture
async def store(tmp_path: Path, wall: Wall) -> AsyncIterator[Store]:
    opened = await Store.open(
        tmp_path / "store.db",
        wall=wall,
        views=default_views(),
        options=StoreOptions(statement_process=True),
        migrations=MIGRATIONS,
    )
    try:
        yield opened
    finally:
        await opened.close()


@pytest.mark.asyncio
async def test_a_failed_statement_fails_its_batch_and_leaves_nothing(store: Store):
    async def bad(txn: Txn) -> None:
        txn.add(_PUT, ("kept", b"no"))
        txn.add("INSERT INTO no_such_table VALUES (?)", (1,))
        txn.add(_PUT, ("after", b"no"))

    async def good(txn: Txn) -> None:
        txn.add(_PUT, ("good", b"yes"))

    with pytest.raises(StoreError, match="no such table: no_such_table"):
        await store.run(bad)
    await store.run(good)
    assert store.reader is not None
    assert [await store.reader.state(k) for k in ("kept", "after", "good")] == [None, None, b"yes"]


@pytest.mark.asyncio
async def test_a_statement_process_that_dies_fails_the_writes_after_it(store: Store):
    (child,) = _children()
    os.kill(child, signal.SIGKILL)

    async def write(txn: Txn) -> None:
        txn.add(_PUT, ("late", b"x"))

    with pytest.raises(StoreError, match="the statement process ended"):
        await store.run(write)


def test_the_statement_process_ends_with_the_process_it_serves(tmp_path: Path):
    script = textwrap.dedent(f"""
        import asyncio, os, sys
        from pathlib import Path
        from node.schema import MIGRATIONS
        from node.store import Store, StoreOptions
        from tests.node.test_statements import _children

        async def main():
            await Store.open(Path({str(tmp_path / "store.db")!r}), wall=lambda: 0,
                             options=StoreOptions(statement_process=True),
                             migrations=MIGRATIONS)
            print(*_children(), flush=True)
            os._exit(0)  # no close: the store is dropped as a killed node drops it

        asyncio.run(main())
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    (child,) = map(int, out.stdout.split())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
