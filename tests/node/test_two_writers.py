"""Two processes writing one node's store — a ``memlane write`` beside a running ``memlane
serve`` — each see what the other committed: every batch begins by taking the write lock and
reloads the writer's in-memory state when another connection committed since."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.node import Node
from tests.node.conftest import Wall

SCOPES = ("read:workspace", "write:workspace")


@pytest.mark.asyncio
async def test_two_openers_of_one_store_write_in_turn(node_dir: Path, wall: Wall):
    async with Node.open(node_dir, wall=wall) as a, Node.open(node_dir, wall=wall) as b:
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
