"""LangGraph store items as the SRs they are (docs/langgraph.md §The mapping): agents see live
items in their lane, never a tombstone; a search with a query is find over the lane, with its
scores; the items' table is derived from the log like every view.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import need

need("langgraph", module=True)

from node.errors import Refusal  # noqa: E402
from node.langgraph import MemlaneStore  # noqa: E402
from node.node import Node  # noqa: E402
from node.views.items import item_id  # noqa: E402
from tests.node.langgraphkit import issue, make_node, plain  # noqa: E402


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_node(tmp_path / "node")


@pytest.fixture
def token(data: Path) -> str:
    return issue(data, ["team"])[0]


@pytest.fixture
def store(data: Path, token: str) -> Iterator[MemlaneStore]:
    with MemlaneStore(data, token) as opened:
        opened.put(("memories", "ada"), "m1", {"text": "prefers the dark theme", "n": 1})
        opened.put(("memories", "ada"), "m2", {"text": "deploys on fridays", "n": 2})
        opened.put(("memories", "bob"), "m1", {"text": "dark chocolate and coffee", "n": 3})
        opened.put(("notes",), "n1", {"text": "the dark side of the moon", "n": 4})
        yield opened


@pytest.mark.asyncio
async def test_live_items_are_srs_of_their_lane_and_tombstones_are_nowhere(
    data: Path, token: str, store: MemlaneStore
) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        since = (await node.e_timeline(caller, action="list"))["results"][0]["ingest_time"]
    store.delete(("memories", "ada"), "m2")
    gone = item_id("team", ("memories", "ada"), "m2")
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        listed = (await node.e_timeline(caller, action="list"))["results"]
        assert {r["title"] for r in listed} == {"m1", "n1"}
        assert len(listed) == 3
        assert {r["lane"] for r in listed} == {"langgraph"}
        one = next(r for r in listed if r["sr_id"] == item_id("team", ("notes",), "n1"))
        assert json.loads(one["text"]) == {
            "key": "n1",
            "namespace": ["notes"],
            "value": {"n": 4, "text": "the dark side of the moon"},
        }
        found = (await node.e_timeline(caller, action="find", query="fridays"))["results"]
        assert found == []
        # since the last put: the delete is the one change, and a tombstone is not reported
        assert (await node.e_timeline(caller, action="changes", since=since))["changes"] == []
        with pytest.raises(Refusal, match="unknown sr_id"):
            await node.e_write(caller, sr_id=gone, text="back?")


def test_a_query_ranks_by_find_and_keeps_prefix_filter_and_page(store: MemlaneStore) -> None:
    ranked = store.search((), query="dark")
    assert [i.key for i in ranked][:1] == ["m1"]  # ties and all, three items hold "dark"
    assert {(i.namespace, i.key) for i in ranked} == {
        (("memories", "ada"), "m1"),
        (("memories", "bob"), "m1"),
        (("notes",), "n1"),
    }
    scores = [i.score for i in ranked]
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    under = store.search(("memories",), query="dark")
    assert {i.namespace for i in under} == {("memories", "ada"), ("memories", "bob")}
    kept = store.search(("memories",), query="dark", filter={"n": {"$gt": 1}})
    assert plain(kept) == [
        (("memories", "bob"), "m1", {"n": 3, "text": "dark chocolate and coffee"})
    ]
    assert plain(store.search((), query="dark", offset=1, limit=1)) == plain(ranked[1:2])
    assert store.search((), query="nothing matches this") == []


def test_without_a_query_the_newest_version_comes_first(store: MemlaneStore) -> None:
    store.put(("memories", "ada"), "m1", {"text": "prefers the light theme", "n": 5})
    assert [(i.namespace, i.key) for i in store.search(("memories",))] == [
        (("memories", "ada"), "m1"),
        (("memories", "bob"), "m1"),
        (("memories", "ada"), "m2"),
    ]
    assert all(i.score is None for i in store.search(()))


@pytest.mark.asyncio
async def test_the_items_table_is_the_logs_again_after_a_rebuild(
    data: Path, store: MemlaneStore
) -> None:
    store.delete(("memories", "bob"), "m1")
    store.put(("memories", "ada"), "m2", {"text": "now on mondays"})
    before = plain(store.search((), limit=100))
    async with Node.open(data) as node:
        await node.rebuild_views()
    assert plain(store.search((), limit=100)) == before
    assert store.list_namespaces() == [("memories", "ada"), ("notes",)]


@pytest.mark.asyncio
async def test_an_erased_item_is_gone_and_its_key_spent(
    data: Path, token: str, store: MemlaneStore
) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        sr_id = item_id("team", ("notes",), "n1")
        await node.e_erase(caller, sr_id=sr_id, reason="a test of erasure")
    assert store.get(("notes",), "n1") is None
    assert store.list_namespaces() == [("memories", "ada"), ("memories", "bob")]
    with pytest.raises(Refusal, match="was erased: its key cannot be written again"):
        store.put(("notes",), "n1", {"text": "back again"})
    assert store.get(("notes",), "n1") is None


@pytest.mark.asyncio
async def test_an_item_moved_out_of_the_lane_is_no_item_until_moved_back(
    data: Path, token: str, store: MemlaneStore
) -> None:
    sr_id = item_id("team", ("notes",), "n1")
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        await node.e_adjust(caller, sr_id=sr_id, lane="archive")
    assert store.get(("notes",), "n1") is None
    assert ("notes",) not in store.list_namespaces()
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        await node.e_adjust(caller, sr_id=sr_id, lane="langgraph")
    back = store.get(("notes",), "n1")
    assert back is not None
    assert back.value == {"n": 4, "text": "the dark side of the moon"}
