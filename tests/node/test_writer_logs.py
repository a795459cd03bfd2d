"""How many logs one writer may hold (docs/mesh.md §Logs per writer), and frontiers of more
logs than one frontier message lists (docs/protocol.md §3.3).

A member that opens log after log is bounded by its ``member.add`` (``max_logs``, 64 when it
names none), the same on every node: the first-ranked logs by their first entry's clock are
held, a later one is rejected and audited, and an earlier one arriving late displaces the last
held — so two nodes that received the same logs in opposite orders hold the same ones and
answer alike.  And a frontier of more logs than one frontier message lists travels in parts
over TLS, and a node of more than 10,000 logs still exports a bundle.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from node.members.membership import DEFAULT_MAX_LOGS
from node.node import Node
from node.refusals import REFUSALS
from protocol.entry import Entry
from protocol.frontier import MAX_FRONTIER_LOGS
from tests.node.helpers import FAR_FUTURE_MS, ForeignWriter, Wall, events, sr_payload
from tests.node.synckit import FAST, converged, make_mesh, syncing

pytestmark = pytest.mark.asyncio

SEED = b"\x05" * 32
BASE = 1_790_000_000_000


def _log(mesh: bytes, i: int, n: int = 2) -> list[Entry]:
    """Log ``i`` of the writer: ``n`` entries, each an SR of its own, opened at BASE + 10 i ms."""
    writer = ForeignWriter(mesh, seed=SEED, epoch=(i + 1).to_bytes(8), wall=BASE + 10 * i)
    ids = [f"00000000-0000-7000-8000-{i:06d}{k:06d}" for k in range(n)]
    return [writer.next("sr.put", sr_payload(sr_id, title=f"log {i} {sr_id}")) for sr_id in ids]


async def _member_node(path: Path, max_logs: int | None) -> None:
    """A new node whose mesh admits the writer with ``max_logs``."""
    await Node.init(path, wall=Wall())
    async with Node.open(path, wall=Wall()) as node:
        key = ForeignWriter(b"", seed=SEED).key.public
        await node.membership.admit_member(key, cert_expires=FAR_FUTURE_MS, max_logs=max_logs)


async def _writer_logs(node: Node) -> list[bytes]:
    """The epochs of the writer's logs in this node's frontier."""
    key = ForeignWriter(b"", seed=SEED).key.public
    frontier = (await node.replica().snapshot()).frontier
    return [t.epoch for t in frontier.tips if t.writer == key]


async def _titles(node: Node) -> list[str]:
    caller = await node.authenticate(
        (await node.create_token("r", "team", ("read:workspace",))).token
    )
    result = await node.e_timeline(caller, action="list", page_size=100)
    return sorted(r["title"] for r in result["results"])


async def test_a_writer_holds_its_first_max_logs_whatever_order_they_arrive_in(tmp_path):
    await _member_node(tmp_path / "a", max_logs=3)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    async with Node.open(tmp_path / "a", wall=Wall()) as a, Node.open(tmp_path / "b") as b:
        whole = [_log(a.info.mesh, i, 3) for i in range(5)]
        logs = [log[:2] for log in whole]  # each log's third entry comes later
        before = REFUSALS.get("writer_logs")
        in_order = [await a.receive(log, source="peer-a") for log in logs]
        assert [r.stored for r in in_order] == [2, 2, 2, 0, 0]
        assert [r.rejected for r in in_order] == [0, 0, 0, 2, 2]
        rejected = await events(a, "entry_rejected")
        assert "already holds 3 logs, the most its member.add allows" in str(rejected[0].detail)
        # Opposite order: the late logs are held first, then displaced by earlier ones.
        for log in reversed(logs):
            await b.receive(log, source="peer-b")
        assert REFUSALS.get("writer_logs") == before + 2 + 2
        first_three = [(i + 1).to_bytes(8) for i in range(3)]
        assert await _writer_logs(a) == await _writer_logs(b) == first_three
        assert await _titles(a) == await _titles(b)
        assert len(await _titles(b)) == 6  # two entries of each of the three held logs
        # A dropped log takes nothing more; what it held is a duplicate, changing nothing.
        again = await b.receive(whole[4], source="peer-b")
        assert (again.stored, again.duplicate, again.rejected) == (0, 2, 1)
        assert (await a.receive(whole[0][2:], source="peer-a")).stored == 1
        assert (await b.receive(whole[0][2:], source="peer-b")).stored == 1
        assert await _titles(b) == await _titles(a)
        assert await b.reader().scalar("PRAGMA integrity_check") == "ok"


async def test_a_member_add_without_max_logs_grants_the_mesh_default(tmp_path):
    await _member_node(tmp_path / "n", max_logs=None)
    async with Node.open(tmp_path / "n", wall=Wall()) as node:
        stored = [
            (await node.receive(_log(node.info.mesh, i, 1), source="p")).stored
            for i in range(DEFAULT_MAX_LOGS + 1)
        ]
        assert stored == [1] * DEFAULT_MAX_LOGS + [0]
        assert len(await _writer_logs(node)) == DEFAULT_MAX_LOGS


async def test_a_frontier_in_parts_syncs_between_served_nodes(tmp_path):
    """Over TLS, with frontier messages of ten tips: 25 logs travel in three parts, each way
    (the full size, 10,001 logs in parts of 10,000, is `python -m tests.bench hostile`)."""
    wall = Wall()
    dirs = await make_mesh(tmp_path, ["a", "b"], wall)
    options = replace(FAST, link=replace(FAST.link, frontier_part=10))
    async with Node.open(dirs["a"], wall=wall) as a, Node.open(dirs["b"], wall=wall) as b:
        key = ForeignWriter(b"", seed=SEED).key.public
        await a.membership.admit_member(key, cert_expires=FAR_FUTURE_MS, max_logs=25)
        await a.receive([e for i in range(25) for e in _log(a.info.mesh, i, 1)], source="p")
        async with syncing(a, options) as sync_a, syncing(b, options) as sync_b:
            sync_b.dial(*await sync_a.listen())
            await converged([a, b], [sync_a, sync_b])
        assert len(await _writer_logs(b)) == 25
        assert await _titles(a) == await _titles(b)


async def test_a_node_of_more_logs_than_a_frontier_message_lists_exports_a_bundle(tmp_path):
    """Measured before frontiers in parts: the export raised "tips: must be a tuple of 0 to
    10000 items" (and every sync link failed with it)."""
    n = MAX_FRONTIER_LOGS + 1
    await _member_node(tmp_path / "a", max_logs=n)
    async with Node.open(tmp_path / "a", wall=Wall()) as a:
        report = await a.receive(
            [e for i in range(n) for e in _log(a.info.mesh, i, 1)], source="bundle"
        )
        assert report.stored == n
        exported = await a.export_bundle(tmp_path / "all.bundle")
        frontier = await a.write_frontier(tmp_path / "a.frontier")
    assert exported.entries > n
    assert len(frontier.tips) > n
