"""Items across a mesh (docs/langgraph.md §Across the mesh): a put on node A is found on node B
once they have synced, a delete on A hides the item on B, and overwrites of one key on both
sides converge to one value on both — the version last in the fold's total order (writer clock,
counter, writer, epoch, seq), which every node holding the same entries computes alike.

Each node is held open here for its sync service, and a ``MemlaneStore`` opens each data
directory beside it, as a graph's process opens a served node's; after a store writes, the sync
service is told to look at the store again (``Commits.recheck``), as ``serve`` does at every
look.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.extras import need

need("langgraph", module=True)

from node.langgraph import MemlaneStore  # noqa: E402
from node.mesh.sync import Sync  # noqa: E402
from node.node import Node, system_wall  # noqa: E402
from node.views.fold import order_key  # noqa: E402
from node.views.items import item_id  # noqa: E402
from protocol.kinds import decode_payload  # noqa: E402
from tests.node.langgraphkit import issue, plain  # noqa: E402
from tests.node.synckit import converged, make_mesh, syncing  # noqa: E402

NS = ("team", "facts")


async def _synced(nodes: Sequence[Node], syncs: Sequence[Sync]) -> None:
    for sync in syncs:
        sync.commits.recheck()  # the stores wrote from their own connections
    await converged(nodes, syncs)


@pytest.mark.asyncio
async def test_a_put_a_delete_and_two_overwrites_across_two_nodes(tmp_path: Path) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], system_wall)
    (token_a,), (token_b,) = issue(dirs["A"], ["team"]), issue(dirs["B"], ["team"], "bob")
    async with Node.open(dirs["A"]) as a, Node.open(dirs["B"]) as b:
        with MemlaneStore(dirs["A"], token_a) as on_a, MemlaneStore(dirs["B"], token_b) as on_b:
            async with syncing(a) as sync_a, syncing(b) as sync_b:
                sync_b.dial(*await sync_a.listen())
                await on_a.aput(NS, "capital", {"city": "Paris"})
                await _synced([a, b], [sync_a, sync_b])
                got = await on_b.aget(NS, "capital")
                assert got is not None
                assert got.value == {"city": "Paris"}
                assert plain(await on_b.asearch(("team",))) == [(NS, "capital", {"city": "Paris"})]

                await on_a.adelete(NS, "capital")
                await _synced([a, b], [sync_a, sync_b])
                assert await on_b.aget(NS, "capital") is None
                assert await on_b.asearch(("team",)) == []
                assert await on_b.alist_namespaces() == []

            # Apart, each node overwrites the key: neither has seen the other's put.
            await on_a.aput(NS, "capital", {"city": "Lyon", "by": "A"})
            await on_b.aput(NS, "capital", {"city": "Lille", "by": "B"})
            assert (await on_a.aget(NS, "capital")).value["by"] == "A"
            assert (await on_b.aget(NS, "capital")).value["by"] == "B"

            async with syncing(a) as sync_a, syncing(b) as sync_b:
                sync_b.dial(*await sync_a.listen())
                await _synced([a, b], [sync_a, sync_b])
            here, there = await on_a.aget(NS, "capital"), await on_b.aget(NS, "capital")
            assert here is not None
            assert there is not None
            assert (here.value, here.updated_at) == (there.value, there.updated_at)
            assert here.value == await _last_in_fold_order(a) == await _last_in_fold_order(b)
            assert here.created_at == got.created_at  # the key's first put, on both


async def _last_in_fold_order(node: Node) -> dict[str, str]:
    """The value of the item's version last in the fold's order, from the entries themselves."""
    sr_id = item_id("team", NS, "capital")
    puts = []
    for entry in await node.entries():
        if entry.header.kind == "sr.put" and entry.payload is not None:
            payload = decode_payload("sr.put", entry.payload)
            if payload["sr_id"] == sr_id:
                h = entry.header
                puts.append((order_key(h.hlc, h.writer, h.epoch, h.seq), payload["text"]))
    value: dict[str, str] = json.loads(max(puts)[1])["value"]
    return value
