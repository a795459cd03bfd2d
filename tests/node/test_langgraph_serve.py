"""``MemlaneStore`` beside a running ``memlane serve`` of the same data directory
(docs/langgraph.md §Threads and processes): the store's writes and an MCP agent's, two
processes on one store, interleave; the agent finds what the graph stored, as an SR of its lane.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import need

need("langgraph", module=True)

from node.langgraph import MemlaneStore  # noqa: E402
from tests.node.mcpkit import Served, Site, ask, make_site, serve, session  # noqa: E402


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return make_site(tmp_path / "node")


@pytest.fixture
def served(site: Site) -> Iterator[Served]:
    running = serve(site, "--mcp-http", "127.0.0.1:0")
    yield running
    code, err = running.stop()
    assert code == 0, err


@pytest.mark.asyncio
async def test_a_store_and_a_served_node_write_one_data_directory(
    site: Site, served: Served
) -> None:
    with MemlaneStore(site.data, site.tokens["alice"]) as store:
        async with session(served.url, site.tokens["alice"]) as agent:
            for i in range(12):  # each process's writes follow the other's commits
                await store.aput(("runs", f"r{i % 3}"), f"step{i}", {"i": i, "note": f"kiwi {i}"})
                await ask(agent, "e_write", title=f"agent note {i}", text=f"mango {i}")
        got = await store.aget(("runs", "r2"), "step11")
        assert got is not None
        assert got.value == {"i": 11, "note": "kiwi 11"}
        assert len(await store.asearch(("runs",), limit=100)) == 12
        assert await store.alist_namespaces() == [("runs", "r0"), ("runs", "r1"), ("runs", "r2")]
        await store.adelete(("runs", "r0"), "step0")
    async with session(served.url, site.tokens["bob"]) as reader:
        found = await ask(reader, "e_timeline", action="find", query="kiwi", page_size=100)
        items = [r for r in found["results"] if r["lane"] == "langgraph"]
        assert len(items) == len(found["results"]) == 11  # the deleted one nowhere
        assert {json.loads(r["text"])["key"] for r in items} == {f"step{i}" for i in range(1, 12)}
        notes = await ask(reader, "e_timeline", action="find", query="mango", page_size=100)
        assert len(notes["results"]) == 12
