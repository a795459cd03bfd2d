"""The node's hybrid logical clock (docs/entries.md §Clocks and the three times).

Monotonic across restarts even when the wall clock steps back; advanced by received entries,
but never more than ``max_clock_skew`` past the wall; an entry further ahead is stored with its
own time and audited as ``clock_skew``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from node.store.reader import AuditRow
from protocol.clock import Hlc
from tests.node.helpers import ForeignWriter, admit

MINUTE = 60_000
HOUR = 60 * MINUTE
MAX_SKEW = 5 * MINUTE


async def caller_of(node: Node, token: str | None = None) -> tuple[Caller, str]:
    if token is None:
        token = (await node.create_token("alice", "team", ("write:workspace",))).token
    return await node.authenticate(token), token


async def hlc_of(node: Node, entry_id: bytes) -> Hlc:
    (hlc,) = [e.header.hlc for e in await node.entries() if e.id == entry_id]
    return hlc


async def write(node: Node, caller: Caller, title: str) -> Hlc:
    result = await node.e_write(caller, title=title)
    return await hlc_of(node, bytes.fromhex(result["entry_id"]))


async def skew_events(node: Node) -> list[AuditRow]:
    reader = node.reader()
    return [r for r in await reader.select_audit(limit=10_000) if r.event == "clock_skew"]


@pytest.mark.asyncio
async def test_the_clock_never_goes_back_across_a_restart(node_dir: Path, wall: Any) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        caller, token = await caller_of(node)
        first = await write(node, caller, "before")
        assert first.wall == wall.now

    wall.now -= HOUR  # the machine's clock steps back while the node is down
    async with Node.open(node_dir, wall=wall) as node:
        assert node.store.clock.last >= first
        caller, _ = await caller_of(node, token)
        second = await write(node, caller, "after")
        third = await write(node, caller, "after again")

    assert first < second < third
    assert second.wall == first.wall  # held at the persisted bound, not the stepped-back wall


@pytest.mark.asyncio
async def test_a_received_entry_within_the_skew_moves_the_clock_and_it_persists(
    node_dir: Path, wall: Any
) -> None:
    ahead = Hlc(wall.now + 4 * MINUTE, 7)
    async with Node.open(node_dir, wall=wall) as node:
        foreign = ForeignWriter(node.info.mesh)
        await admit(node, foreign)
        entry = foreign.next(hlc=ahead)
        assert (await node.receive([entry], source="peer")).stored_ids == [entry.id]
        assert node.store.clock.last == ahead
        assert await skew_events(node) == []
        caller, token = await caller_of(node)
        authored = await write(node, caller, "after the peer")
        assert authored > ahead

    wall.now -= HOUR
    async with Node.open(node_dir, wall=wall) as node:
        caller, _ = await caller_of(node, token)
        assert await write(node, caller, "after restart") > authored


@pytest.mark.asyncio
async def test_an_entry_an_hour_ahead_is_stored_as_written_and_audited(
    node: Node, foreign: ForeignWriter, wall: Any
) -> None:
    assert node.store.options.max_clock_skew_ms == MAX_SKEW
    future = Hlc(wall.now + HOUR, 3)
    entry = foreign.next(hlc=future)

    before = node.store.clock.last
    report = await node.receive([entry], source="peer")

    assert report.stored_ids == [entry.id]
    assert await hlc_of(node, entry.id) == future  # stored with its writer's time
    assert node.store.clock.last == before  # not moved, not even up to the bound
    (event,) = await skew_events(node)
    assert event.entry == entry.id
    assert event.detail["source"] == "peer"

    # What this node writes next is stamped at its own wall, not ahead of it.
    caller, _ = await caller_of(node)
    mine = await write(node, caller, "local")
    assert mine.wall == wall.now


@pytest.mark.asyncio
async def test_entries_beyond_the_skew_never_move_the_clock_nor_what_it_persists(
    node_dir: Path, wall: Any
) -> None:
    future = Hlc(wall.now + HOUR, 0)
    async with Node.open(node_dir, wall=wall) as node:
        caller, token = await caller_of(node)
        foreign = ForeignWriter(node.info.mesh)
        await admit(node, foreign)
        mine = await write(node, caller, "before")
        await node.receive([foreign.next(hlc=future)], source="peer")
        assert node.store.clock.last == mine

        # Ten minutes later a second entry from the same future is still beyond the skew.
        wall.now += 10 * MINUTE
        await node.receive([foreign.next(hlc=Hlc(future.wall + 1, 0))], source="peer")
        assert node.store.clock.last == mine
        assert len(await skew_events(node)) == 2

    async with Node.open(node_dir, wall=wall) as node:
        assert node.store.clock.last == mine  # the persisted clock, untouched by either
        caller, _ = await caller_of(node, token)
        assert (await write(node, caller, "after")).wall == wall.now


YEAR = 365 * 24 * HOUR


async def titles(node: Node, caller: Caller) -> set[str]:
    return {r["title"] for r in (await node.e_timeline(caller, action="list"))["results"]}


@pytest.mark.asyncio
async def test_a_peer_a_year_ahead_does_not_drag_the_clock(
    node: Node, foreign: ForeignWriter, wall: Any
) -> None:
    """docs/entries.md §Clocks and the three times: an entry beyond the skew is stored as it
    says, takes effect when its time comes, and moves this node's clock not at all; an entry
    within the skew still moves it."""
    token = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
    caller = await node.authenticate(token.token)
    ahead = foreign.next(hlc=Hlc(wall.now + YEAR, 0))
    assert (await node.receive([ahead], source="peer")).stored_ids == [ahead.id]
    assert await hlc_of(node, ahead.id) == Hlc(wall.now + YEAR, 0)

    wall.now += 1
    mine = await write(node, caller, "mine")
    assert mine == Hlc(wall.now, 0)  # the wall clock, not 5 minutes (nor a year) ahead
    assert await titles(node, caller) == {"mine"}  # the ahead entry waits for its time

    near = Hlc(wall.now + 4 * MINUTE, 2)
    assert (await node.receive([foreign.next(hlc=near)], source="peer")).stored == 1
    assert node.store.clock.last == near  # within the skew: moved, as HLC does
    assert await write(node, caller, "after near") == Hlc(near.wall, 3)

    wall.now += YEAR
    assert await titles(node, caller) == {"mine", "t1", "t2", "after near"}
