"""The pending area's bounds (docs/entries.md §The pending area): entries in all, a share per
source, bytes, and an expiry — so one member filling the area with junk cannot refuse another
source's entry that waits for its gap, and nothing waits for ever.

Real stores on disk, small configured limits; a served node over loopback with a hostile peer
driven by hand (tests/node/synckit.py); and the schema migration that adds the columns.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.config import InvalidConfig, NodeConfig
from node.identity import node_id
from node.mesh.host import LinkOptions
from node.mesh.sync import Sync, SyncOptions
from node.node import Node
from node.refusals import REFUSALS
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.store import StoreOptions
from node.store.connection import Connection
from node.store.schema import migrate
from protocol.entry import Entry
from protocol.messages import Credit, FrontierDigest, Push
from tests.node.helpers import ForeignWriter, admit, events, pending, size, strangers
from tests.node.synckit import RawPeer, wire

pytestmark = pytest.mark.asyncio

SHARE = "this source's share of the pending area is used up"
FULL = "the pending area is full"
BYTES = "the pending area's bytes are used up"
HOUR = 3_600_000


def counted() -> dict[str, int]:
    return {k: REFUSALS.get(k) for k in ("pending_full", "pending_bytes", "pending_source_quota")}


def moved(before: dict[str, int]) -> dict[str, int]:
    return {k: n - before[k] for k, n in counted().items() if n != before[k]}


async def reasons(node: Node) -> list[str]:
    return [r.detail["reason"] for r in await events(node, "entry_rejected")]


async def test_one_source_filling_its_share_leaves_another_sources_waiting_entry_its_place(
    node_dir: Path, wall: Any
) -> None:
    options = StoreOptions(pending_limit=8, pending_per_source=3)
    async with Node.open(node_dir, wall=wall, options=options) as node:
        honest = ForeignWriter(node.info.mesh)
        await admit(node, honest)
        e1, e2, e3 = honest.run(3)
        before = counted()
        junk = await node.receive(strangers(node.info.mesh, 10), source="peer:junk")
        assert (junk.pending, junk.rejected) == (3, 7)
        assert moved(before) == {"pending_source_quota": 7}
        assert await reasons(node) == [SHARE]  # one event a source and minute, counted

        waiting = await node.receive([e2, e3], source="peer:honest")
        assert (waiting.pending, waiting.rejected) == (2, 0)
        released = await node.receive([e1], source="peer:honest")
        assert released.stored_ids == [e1.id, e2.id, e3.id]
        rows, _ = await node.pending()
        assert [(r.source, r.entries, r.logs) for r in rows] == [("peer:junk", 3, 3)]

        # Every source within its share: the area in all is still bounded.
        before = counted()
        for name in ("b", "c"):
            await node.receive(strangers(node.info.mesh, 3), source=f"peer:{name}")
        assert len(await pending(node)) == 8
        assert moved(before) == {"pending_full": 1}


async def test_the_pending_area_holds_at_most_pending_bytes_and_a_source_its_share(
    node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
    e1, e2, e3, e4, e5, e6 = writer.run(6)
    budget = sum(map(size, (e2, e3, e4, e5))) + size(e6) - 1  # four fit, not a fifth
    options = StoreOptions(pending_limit=10, pending_per_source=5, pending_bytes=budget)
    async with Node.open(node_dir, wall=wall, options=options) as node:
        before = counted()
        first = await node.receive([e2, e3, e4], source="peer:a")  # half the bytes: two
        assert (first.pending, first.rejected) == (2, 1)
        second = await node.receive([e4, e5], source="peer:b")
        assert (second.pending, second.rejected) == (2, 0)
        third = await node.receive([e6], source="peer:c")
        assert (third.pending, third.rejected) == (0, 1)
        assert moved(before) == {"pending_source_quota": 1, "pending_bytes": 1}
        assert sorted(await reasons(node)) == sorted([SHARE, BYTES])
        rows, _ = await node.pending()
        assert sum(r.bytes for r in rows) == sum(map(size, (e2, e3, e4, e5)))
        assert (await node.receive([e1, e6], source="peer:c")).stored == 6
        assert await pending(node) == set()


async def test_a_waiting_entry_older_than_pending_expiry_is_dropped_and_audited(
    node_dir: Path, wall: Any
) -> None:
    options = StoreOptions(pending_expiry_ms=HOUR)
    async with Node.open(node_dir, wall=wall, options=options) as node:
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
        e1, e2, e3 = writer.run(3)
        await node.receive([e3], source="peer:a")
        wall.now += 40 * 60_000
        await node.receive([e2], source="peer:b")
        wall.now += 21 * 60_000  # e3 waited 61 minutes, e2 21
        assert (await node.receive([], source="peer:c")).rejected == 0
        assert await pending(node) == {e2.id}
        (row,) = await events(node, "entry_rejected")
        assert (row.entry, row.detail["source"]) == (e3.id, "peer:a")
        assert "pending_expiry" in row.detail["reason"]
        assert (await node.receive([e1], source="peer:c")).stored_ids == [e1.id, e2.id]
    # A node opened later drops at its first receive what waited too long while it was shut.
    async with Node.open(node_dir, wall=wall, options=options) as node:
        _, e5 = writer.run(2)
        await node.receive([e5], source="peer:a")
        wall.now += HOUR + 1
    async with Node.open(node_dir, wall=wall, options=options) as node:
        await node.receive([], source="peer:a")
        assert await pending(node) == set()


async def test_a_bundle_of_waiting_entries_is_bounded_by_its_own_share(
    tmp_path: Path, node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
    other = tmp_path / "other"
    shutil.copytree(node_dir, other)  # the same mesh and members, none of writer's entries
    early, late = writer.run(3), writer.run(10)
    async with Node.open(node_dir, wall=wall) as node:
        await node.receive(early, source="peer:w")
        await node.write_frontier(tmp_path / "frontier")
        await node.receive(late, source="peer:w")
        await node.export_bundle(tmp_path / "late.bundle", since=tmp_path / "frontier")
    options = StoreOptions(pending_limit=100, pending_per_source=4)
    async with Node.open(other, wall=wall, options=options) as node:
        before = counted()
        report = await node.import_bundle(tmp_path / "late.bundle")
        assert (report.pending, report.rejected) == (4, 6)  # above the gap of seq 1 to 3
        assert moved(before) == {"pending_source_quota": 6}
        (row,), _ = await node.pending()
        assert (row.source[:7], row.entries, row.logs) == ("bundle:", 4, 1)
        assert (await node.receive(early, source="peer:w")).stored == 7


async def test_the_bounds_are_configured_and_checked(node_dir: Path, wall: Any) -> None:
    (node_dir / "config.toml").write_text(
        "pending_limit = 50\npending_per_source = 5\npending_bytes = 1048576\n"
        'pending_expiry = "2h"\n'
    )
    async with Node.open(node_dir, wall=wall) as node:
        _, o = await node.pending()
        bounds = (o.pending_limit, o.pending_per_source, o.pending_bytes, o.pending_expiry_ms)
        assert bounds == (50, 5, 1 << 20, 2 * HOUR)
        assert (await node.receive(strangers(node.info.mesh, 7), source="peer:a")).pending == 5
    with pytest.raises(InvalidConfig) as refused:
        NodeConfig.from_mapping(
            {"pending_per_source": -1, "pending_bytes": "1 MiB", "pending_expiry": "a week"}
        )
    assert refused.value.problems == [
        "pending_per_source must be a non-negative integer",
        "pending_bytes must be a non-negative integer",
        "pending_expiry: 'a week' is not a duration like 30s, 5m, 2h, 1d or 1w",
    ]


async def test_schema_13_gives_waiting_rows_their_size_and_an_arrival(tmp_path: Path) -> None:
    """Rows that waited before count their bytes, and arrive at the migration's moment."""
    path = tmp_path / "memlane.db"
    before = next(i for i, script in enumerate(MIGRATIONS) if "pending_arrived" in script)
    assert before == 12 < SCHEMA_VERSION  # the script that takes a store to version 13
    row = (b"i" * 32, b"w" * 32, b"e" * 8, 4, b"r" * 100, b"p" * 50, "peer:x")
    async with await Connection.open(path, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=before)
        await conn.execute(
            "INSERT INTO pending (id, writer, epoch, seq, raw, payload, source) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        assert await migrate(conn, MIGRATIONS) == before
        ((size, arrived),) = await conn.execute_fetchall("SELECT size, arrived FROM pending")
        checked = await conn.execute_fetchall("PRAGMA integrity_check")
    now = time.time_ns() // 1_000_000
    assert size == 150
    assert abs(arrived - now) < 60_000
    assert [tuple(r) for r in checked] == [("ok",)]


# -- a served node and a member that floods it ---------------------------------------------------

WINDOW = 4
OPTIONS = SyncOptions(
    link=LinkOptions(
        credit_entries=WINDOW,
        batch_entries=WINDOW,
        hello_timeout=1.0,
        write_timeout=1.0,
        close_timeout=0.3,
    ),
    poll_interval=0.01,
)


@pytest_asyncio.fixture
async def served(node_dir: Path, wall: Any) -> AsyncIterator[tuple[Node, tuple[str, int]]]:
    options = StoreOptions(pending_limit=12, pending_per_source=4)
    async with Node.open(node_dir, wall=wall, options=options) as node:
        sync = Sync(node.replica(), key=node.key.public, options=OPTIONS)

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await sync.attach(reader, writer)

        async with sync:
            server = await asyncio.start_server(accept, "127.0.0.1", 0)
            try:
                yield node, server.sockets[0].getsockname()[:2]
            finally:
                server.close()


async def live(node: Node, address: tuple[str, int]) -> RawPeer:
    """A peer (its own node key, so its own source) that has said hello and is live."""
    peer = RawPeer(node.info.mesh)
    await peer.connect(address)
    peer.say(peer.hello, Credit(1024, 1 << 31))
    peer.say(*await peer.until(FrontierDigest))
    await peer.until(Credit)
    return peer


async def push(peer: RawPeer, entries: list[Entry]) -> None:
    """Push ``entries`` a window at a time, each after the node gave its credit back."""
    grants = len([m for m in peer.messages() if isinstance(m, Credit)])
    for at in range(0, len(entries), WINDOW):
        peer.say(Push(wire(entries[at : at + WINDOW])))
        grants += 1
        await peer.until(Credit, count=grants)


async def test_a_member_flooding_the_pending_area_leaves_an_honest_peers_entry_its_place(
    served: tuple[Node, tuple[str, int]],
) -> None:
    node, address = served
    writer = ForeignWriter(node.info.mesh)
    await admit(node, writer)
    e1, e2 = writer.run(2)
    hostile, honest = await live(node, address), await live(node, address)
    try:
        await push(hostile, strangers(node.info.mesh, 12))  # three windows of junk
        assert len(await pending(node)) == 4
        await push(honest, [e2])  # waits for its gap
        assert e2.id in await pending(node)
        await push(honest, [e1])
        stored = {e.id for e in await node.entries()}
        assert {e1.id, e2.id} <= stored
        (junk,), _ = await node.pending()
        assert (junk.source, junk.entries) == (f"peer:{node_id(hostile.hello.node)}", 4)
    finally:
        hostile.close()
        honest.close()
