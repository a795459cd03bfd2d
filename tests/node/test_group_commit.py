"""Group commit (docs/architecture.md §One writer, group commit).

Concurrent writers share transactions: each caller's await returns only once its write is
durable, many writes cost few commits, and an operation that refuses fails alone while the
rest of its batch commits.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from tests.node.helpers import counts, held_entries

AUTHORS = 32
ROUNDS = 4
UNKNOWN = "00000000-0000-7000-8000-00000000dead"


async def callers(node: Node, n: int) -> list[Caller]:
    out = []
    for i in range(n):
        issued = await node.create_token(f"agent{i}", "team", ("read:workspace", "write:workspace"))
        out.append(await node.authenticate(issued.token))
    return out


async def own_log(node: Node) -> list[tuple[int, bytes, bool, bool]]:
    """This node's own log: (seq, id, applied, has payload) in seq order."""
    own = (node.info.public_key, node.info.epoch)
    return [
        (e.seq, hashlib.sha256(e.raw).digest(), e.applied, e.payload is not None)
        for log, e in await held_entries(node)
        if (log.writer, log.epoch) == own
    ]


async def sr_index(node: Node) -> set[str]:
    reader = node.reader()
    return {r[0] for r in await reader.fetchall("SELECT sr_id FROM srs WHERE live = 1")}


async def written_events(node: Node) -> int:
    reader = node.reader()
    rows = await reader.select_audit(limit=100_000)
    return sum(r.event == "sr_written" for r in rows)


@pytest.mark.asyncio
async def test_concurrent_authors_share_few_durable_commits(node_dir: Path, wall: Any) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        agents = await callers(node, AUTHORS)
        commits_before = node.store.commits

        async def author(caller: Caller, i: int) -> list[dict[str, Any]]:
            # Each author awaits durability of one write before sending the next.
            return [await node.e_write(caller, title=f"a{i} r{r}") for r in range(ROUNDS)]

        results = [
            r
            for rs in await asyncio.gather(*(author(c, i) for i, c in enumerate(agents)))
            for r in rs
        ]
        commits = node.store.commits - commits_before

    total = AUTHORS * ROUNDS
    assert len(results) == total
    assert len({r["sr_id"] for r in results}) == total
    assert commits <= total // 8, f"{commits} commits for {total} writes"

    # Everything acknowledged is there after reopening, applied, in one unbroken log.
    async with Node.open(node_dir, wall=wall) as node:
        log = await own_log(node)
        assert [seq for seq, *_ in log] == list(range(1, len(log) + 1))
        by_id = {entry_id: (applied, payload) for _, entry_id, applied, payload in log}
        for result in results:
            assert by_id[bytes.fromhex(result["entry_id"])] == (True, True)
        assert len(log) == total
        assert await sr_index(node) == {r["sr_id"] for r in results}
        assert await written_events(node) == total
        verified = await node.verify()
        assert verified.ok, verified.problems


@pytest.mark.asyncio
async def test_a_refusal_inside_a_batch_fails_alone(node_dir: Path, wall: Any) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        (caller,) = await callers(node, 1)
        before = await counts(node)
        commits_before = node.store.commits

        # Every 4th call updates an SR that does not exist (it reads, then refuses).
        def call(i: int) -> Any:
            if i % 4 == 3:
                return node.e_write(caller, sr_id=UNKNOWN, title=f"no {i}")
            return node.e_write(caller, title=f"yes {i}")

        n = 32
        outcomes = await asyncio.gather(*(call(i) for i in range(n)), return_exceptions=True)
        commits = node.store.commits - commits_before

        refused = [o for i, o in enumerate(outcomes) if i % 4 == 3]
        created = [o for i, o in enumerate(outcomes) if i % 4 != 3]
        assert all(
            isinstance(o, Refusal) and o.text == f"unknown sr_id: {UNKNOWN}" for o in refused
        ), refused
        assert all(isinstance(o, dict) and o["created"] for o in created), created
        # Batches are runs of consecutive calls; with this few commits some batch held 11 or
        # more calls, so refusals and successful writes shared a transaction.
        assert commits <= 3, f"{commits} commits for {n} calls"

        after = await counts(node)
        assert after["headers"] == before["headers"] + len(created)
        assert after["payloads"] == before["payloads"] + len(created)
        assert await sr_index(node) == {o["sr_id"] for o in created}
        assert await written_events(node) == len(created)
        log = await own_log(node)
        assert [seq for seq, *_ in log] == list(range(1, len(created) + 1))  # no holes
        assert {e for _, e, *_ in log} == {bytes.fromhex(o["entry_id"]) for o in created}

        # The writer goes on: a later update of a created SR succeeds.
        again = await node.e_write(caller, sr_id=created[0]["sr_id"], title="changed")
        assert again["created"] is False
