"""Two processes writing one node's store — a ``memlane write`` beside a running ``memlane
serve`` — each see what the other committed: a batch that begins after another connection
committed is built again on reloaded state, and the batch queued behind it is built on that
state."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from node.identity import DB_FILE
from node.node import Node
from node.schema import MIGRATIONS
from node.store import Store, StoreOptions
from node.store.views import View
from node.store.writer import Txn
from node.views import default_views
from protocol.kinds import decode_payload, encode_payload
from tests.node.helpers import Wall, sr_payload

SCOPES = ("read:workspace", "write:workspace")
SR_ID = "00000000-0000-7000-8000-000000000001"


@pytest.mark.asyncio
async def test_two_openers_of_one_store_write_in_turn(node_dir: Path, wall: Wall):
    options = StoreOptions()
    async with (
        Node.open(node_dir, wall=wall, options=options) as a,
        Node.open(node_dir, wall=wall, options=options) as b,
    ):
        token = (await a.create_token("alice", "team", SCOPES)).token
        alice_a, alice_b = await a.authenticate(token), await b.authenticate(token)
        sr = (await a.e_write(alice_a, title="one", text="first"))["sr_id"]
        wall.now += 1
        await b.e_write(alice_b, sr_id=sr, text="second")
        wall.now += 1
        await a.e_adjust(alice_a, sr_id=sr, tags=["x"])
        wall.now += 1
        first = (await b.work_record(alice_b, summary="b's"))["id"]
        second = await a.work_record(alice_a, summary="a's")
        assert second["prev_id"] == first  # a saw b's episode, read from the store
        for node, who in ((a, alice_a), (b, alice_b)):
            (shown,) = (await node.e_timeline(who, action="list"))["results"]
            assert (shown["title"], shown["text"], shown["tags"]) == ("one", "second", ["x"])
            assert shown["has_adjustment"] is True
        report = await a.verify()
        assert report.ok, report.problems
    entries = None
    async with Node.open(node_dir, wall=wall) as again:
        entries = await again.entries()
        assert (await again.verify()).ok
    own = [e for e in entries if e.header.writer == again.info.public_key]
    assert [e.header.seq for e in own] == list(range(1, len(own) + 1))
    assert len(own) == 5


_PUT = "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)"


async def _open(path: Path, wall: Wall) -> Store:
    return await Store.open(
        path,
        wall=wall,
        options=StoreOptions(),
        views=default_views(),
        migrations=MIGRATIONS,
    )


@pytest.mark.asyncio
async def test_a_batch_gone_stale_with_nothing_behind_it_is_redone(tmp_path: Path, wall: Wall):
    """The last batch before a quiet spell meets another connection's commit: the writer
    redoes it at once, not when the next write comes."""
    a, b = (
        await _open(tmp_path / "s.db", wall),
        await _open(tmp_path / "s.db", wall),
    )
    runs = 0
    try:

        async def elsewhere(txn: Txn) -> None:
            txn.add(_PUT, ("other", b"b"))

        async def only(txn: Txn) -> int:
            nonlocal runs
            runs += 1
            if runs == 1:
                await b.run(elsewhere)
            txn.add(_PUT, ("only", b"1"))
            return runs

        assert await asyncio.wait_for(a.run(only), 30) == 2
        assert a.reader is not None
        assert await a.reader.state("only") == b"1"
    finally:
        await a.close()
        await b.close()


@pytest.mark.asyncio
async def test_a_batch_queued_behind_a_stale_one_is_built_on_the_reloaded_state(
    tmp_path: Path, wall: Wall
):
    """Batch 1 meets another connection's commit before its first trip and is built again
    holding the lock; batch 2, queued meanwhile, is built once, on the state reloaded for
    batch 1, and commits."""
    runs = {"first": 0, "second": 0}
    building = asyncio.Event()
    a, b = (
        await _open(tmp_path / "s.db", wall),
        await _open(tmp_path / "s.db", wall),
    )
    assert a._writer is not None
    commits = a._writer.commits
    try:

        async def elsewhere(txn: Txn) -> None:
            txn.add(_PUT, ("other", b"b"))

        async def first(txn: Txn) -> int:
            runs["first"] += 1
            building.set()
            if runs["first"] == 1:
                await b.run(elsewhere)  # committed before this batch's first trip
            txn.add(_PUT, ("first", b"1"))
            return runs["first"]

        async def second(txn: Txn) -> int:
            runs["second"] += 1
            txn.add(_PUT, ("second", b"2"))
            return runs["second"]

        one = a.run(first)
        await building.wait()  # batch 1 is being built: what follows is batch 2
        two = a.run(second)
        assert (await one, await two) == (2, 1)
        assert (a._writer.rebuilt, a._writer.commits - commits) == (1, 2)
        assert a.reader is not None
        for key, value in (("first", b"1"), ("second", b"2"), ("other", b"b")):
            assert await a.reader.state(key) == value
    finally:
        await a.close()
        await b.close()


class _CommitsElsewhere(View):
    """A view whose first load waits for another connection's commit: the store's open is
    then between reading its heads and positions and reading the database's version."""

    kinds: frozenset[str] = frozenset()
    clear = restore = countable = scrub = ()
    next_due = None

    def __init__(self, commit: Callable[[], Awaitable[object]]) -> None:
        self._commit: Callable[[], Awaitable[object]] | None = commit

    async def load(self, scalar: Callable[[str], Awaitable[Any]]) -> None:
        del scalar
        if self._commit is not None:
            commit, self._commit = self._commit, None
            await commit()


@pytest.mark.asyncio
async def test_a_store_opened_while_another_commits_takes_fresh_positions(
    node_dir: Path, wall: Wall
):
    """A ``memlane write`` opens the store just as ``serve`` commits, and nothing is written
    after: what it loaded before that commit is not taken as current (it once reused the
    position the commit took: "UNIQUE constraint failed: headers.pos")."""
    async with Node.open(node_dir, wall=wall) as a:
        alice = await a.authenticate((await a.create_token("alice", "team", SCOPES)).token)
        meanwhile = _CommitsElsewhere(lambda: a.e_write(alice, title="served", text="a"))
        b = await Store.open(
            node_dir / DB_FILE,
            wall=wall,
            options=StoreOptions(),
            views=(*default_views(), meanwhile),
            migrations=MIGRATIONS,
        )
        try:
            data = encode_payload("sr.put", sr_payload(SR_ID, principal="alice", title="b"))
            content = (data, decode_payload("sr.put", data))
            await b.author(a.key, a.info.mesh, a.info.epoch, "sr.put", content)
        finally:
            await b.close()
        assert {r["title"] for r in (await a.e_timeline(alice, action="list"))["results"]} == {
            "served",
            "b",
        }
        report = await a.verify()
        assert report.ok, report.problems
