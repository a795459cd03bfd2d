"""What ``MemlaneStore`` refuses, and that nothing is stored when it does (docs/langgraph.md
§Refused, with nothing stored); who may read and write through it (§Reads, §Private items).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.extras import need

need("langgraph", module=True)

from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from node.errors import Forbidden, Refusal, Unauthenticated  # noqa: E402
from node.identity import DB_FILE  # noqa: E402
from node.langgraph import MemlaneStore  # noqa: E402
from node.node import Node  # noqa: E402
from node.views.items import item_id  # noqa: E402
from tests.node.langgraphkit import issue, make_node, plain, plain_one, stored  # noqa: E402


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_node(tmp_path / "node")


@pytest.fixture
def store(data: Path) -> Iterator[MemlaneStore]:
    (token,) = issue(data, ["team"])
    with MemlaneStore(data, token) as opened:
        opened.put(("users", "ada"), "prefs", {"theme": "dark"})
        yield opened


def _refused(data: Path, calls: list[tuple[Callable[[], Any], type[Exception], str]]) -> None:
    before = stored(data)
    for call, error, text in calls:
        with pytest.raises(error, match=text):
            call()
    assert stored(data) == before


def test_namespaces_are_refused_as_langgraph_refuses_them(data: Path, store: MemlaneStore) -> None:
    good = PutOp(("users", "bob"), "prefs", {"theme": "light"})
    _refused(
        data,
        [
            (lambda: store.put((), "k", {"a": 1}), InvalidNamespaceError, "cannot be empty"),
            (lambda: store.put(("langgraph", "x"), "k", {}), InvalidNamespaceError, "Root label"),
            (lambda: store.put(("a.b",), "k", {}), InvalidNamespaceError, "periods"),
            (lambda: store.put(("a", ""), "k", {}), InvalidNamespaceError, "empty strings"),
            (lambda: store.put(("a", 1), "k", {}), InvalidNamespaceError, "must be strings"),
            (lambda: store.put(("a\x00",), "k", {}), InvalidNamespaceError, "NUL"),
            (lambda: store.batch([good, PutOp((), "k", {})]), InvalidNamespaceError, "empty"),
            (
                lambda: store.batch([good, PutOp(("langgraph",), "k", {})]),
                InvalidNamespaceError,
                "Root",
            ),
            (lambda: store.batch([good, GetOp(("a.b",), "k")]), InvalidNamespaceError, "periods"),
            (lambda: store.search(("users.ada",)), InvalidNamespaceError, "periods"),
            (lambda: store.list_namespaces(suffix=("",)), InvalidNamespaceError, "empty"),
            (lambda: store.delete(("a.b",), "k"), InvalidNamespaceError, "periods"),
        ],
    )
    assert plain_one(store.get(("users", "bob"), "prefs")) is None


def test_values_json_cannot_hold_or_too_large_for_an_sr_are_refused(
    data: Path, store: MemlaneStore
) -> None:
    ns, good = ("users", "ada"), PutOp(("users", "bob"), "prefs", {"theme": "light"})

    def put(value: Any, key: str = "k") -> Callable[[], Any]:
        return lambda: store.batch([good, PutOp(ns, key, value)])

    _refused(
        data,
        [
            (put({"a": {1, 2}}), ValueError, "not JSON"),
            (put({"a": datetime.now(UTC)}), ValueError, "not JSON"),
            (put({"a": float("nan")}), ValueError, "not a JSON number"),
            (put({"a": [1, float("inf")]}), ValueError, "not a JSON number"),
            (put({1: "x"}), ValueError, "key 1 is not text"),
            (put({"a": {"b": {2: "x"}}}), ValueError, "key 2 is not text"),
            (put(["a", "b"]), ValueError, "must be a mapping"),
            (put({"a": "x" * 100_000}), ValueError, "too large"),
            (put({"a": "🦜" * 90_000}), ValueError, "cannot be stored: payload"),  # 360 kB
            (put({"a": 1}, "k" * 1001), ValueError, "at most 1000"),
            (lambda: store.put(ns, "k", {"a": 1}, ttl=5), NotImplementedError, "TTL"),
            (lambda: store.batch([good, PutOp(ns, "k", {"a": 1}, ttl=5)]), ValueError, "ttl"),
            (lambda: store.search(ns, filter={"a": {"$in": [1]}}), ValueError, "Unsupported"),
            (lambda: store.search(ns, limit=-1), ValueError, "limit"),
            (lambda: store.list_namespaces(offset=-2), ValueError, "offset"),
        ],
    )
    assert store.get(ns, "prefs").value == {"theme": "dark"}


def test_what_json_holds_comes_back_with_its_types(store: MemlaneStore) -> None:
    value = {
        "text": "naïve café — 日本 🦜",
        "int": 2**60,
        "float": 0.1 + 0.2,
        "neg": -1.5e-300,
        "bool": False,
        "none": None,
        "list": [1, "two", [3.0], {"four": 4}],
        "nested": {"": {"a.b": "dots and all"}},
        "big": "x" * 90_000,
    }
    store.put(("t",), "k", value)
    assert store.get(("t",), "k").value == value
    store.put(("t",), "tuple", {"a": (1, 2)})
    assert store.get(("t",), "tuple").value == {"a": [1, 2]}


def test_a_reader_only_tokens_put_is_refused_with_nothing_stored(
    data: Path, store: MemlaneStore
) -> None:
    (reader,) = issue(data, ["team"], "bob", ["read:workspace"])
    (writer,) = issue(data, ["team"], "carol", ["write:workspace"])
    with MemlaneStore(data, reader) as bob, MemlaneStore(data, writer) as carol:
        assert plain_one(bob.get(("users", "ada"), "prefs")) is not None  # it reads
        need_write = "needs the write:workspace scope on workspace team"
        need_read = "needs the read:workspace scope on workspace team"
        _refused(
            data,
            [
                (lambda: bob.put(("users", "ada"), "prefs", {"theme": "x"}), Forbidden, need_write),
                (lambda: bob.delete(("users", "ada"), "prefs"), Forbidden, need_write),
                (
                    lambda: bob.batch([GetOp(("users", "ada"), "prefs"), PutOp(("n",), "k", {})]),
                    Forbidden,
                    need_write,
                ),
                (lambda: carol.get(("users", "ada"), "prefs"), Forbidden, need_read),
                (lambda: carol.search(("users",)), Forbidden, need_read),
            ],
        )
    assert store.get(("users", "ada"), "prefs").value == {"theme": "dark"}


def test_another_workspaces_token_sees_nothing(data: Path, store: MemlaneStore) -> None:
    (other,) = issue(data, ["elsewhere"], "alice")
    with MemlaneStore(data, other) as there:
        assert there.get(("users", "ada"), "prefs") is None
        assert there.search(("users",)) == [] == there.search(())
        assert there.list_namespaces() == []
        there.put(("users", "ada"), "prefs", {"theme": "light"})  # its own item, apart
        assert there.get(("users", "ada"), "prefs").value == {"theme": "light"}
    assert store.get(("users", "ada"), "prefs").value == {"theme": "dark"}
    assert item_id("team", ("users", "ada"), "prefs") != item_id(
        "elsewhere", ("users", "ada"), "prefs"
    )


def test_items_are_shared_in_the_workspace_and_keep_their_creation(
    data: Path, store: MemlaneStore
) -> None:
    (bob_token,) = issue(data, ["team"], "bob")
    first = store.get(("users", "ada"), "prefs")
    with MemlaneStore(data, bob_token) as bob:
        assert plain_one(bob.get(("users", "ada"), "prefs")) == plain_one(first)
        bob.put(("users", "ada"), "prefs", {"theme": "solarized"})
    again = store.get(("users", "ada"), "prefs")
    assert again is not None
    assert first is not None
    assert again.value == {"theme": "solarized"}
    assert again.created_at == first.created_at < again.updated_at
    store.delete(("users", "ada"), "prefs")
    assert store.get(("users", "ada"), "prefs") is None
    store.put(("users", "ada"), "prefs", {"theme": "dark"})
    back = store.get(("users", "ada"), "prefs")
    assert back is not None
    assert back.created_at == first.created_at


def test_an_item_made_private_is_its_owners_alone(data: Path, store: MemlaneStore) -> None:
    (bob_token,) = issue(data, ["team"], "bob")
    sr_id = item_id("team", ("users", "ada"), "prefs")
    asyncio.run(_adjust(data, "alice", sr_id, visibility="private"))
    with MemlaneStore(data, bob_token) as bob:
        assert bob.get(("users", "ada"), "prefs") is None
        assert bob.search(("users",)) == []
        _refused(
            data,
            [
                (
                    lambda: bob.put(("users", "ada"), "prefs", {"theme": "x"}),
                    Refusal,
                    "private to another",
                )
            ],
        )
    assert store.get(("users", "ada"), "prefs").value == {"theme": "dark"}


async def _adjust(data: Path, principal: str, sr_id: str, **fields: Any) -> None:
    async with Node.open(data) as node:
        token = await node.create_token(principal, "team", ["read:workspace", "write:workspace"])
        await node.e_adjust(await node.authenticate(token.token), sr_id=sr_id, **fields)


def test_a_token_that_is_no_good_is_refused_at_once_and_when_revoked(data: Path) -> None:
    with pytest.raises(Unauthenticated):
        MemlaneStore(data, "mlt_" + "x" * 43)
    (token,) = issue(data, ["team"])
    with MemlaneStore(data, token) as store:
        store.put(("a",), "k", {"n": 1})
        asyncio.run(_revoke_all(data))
        with pytest.raises(Unauthenticated):
            store.get(("a",), "k")


async def _revoke_all(data: Path) -> None:
    async with Node.open(data) as node:
        for token in await node.list_tokens():
            await node.revoke_token(token.token_id)


def test_a_batch_mixes_every_op_reads_first(store: MemlaneStore) -> None:
    store.put(("docs", "a"), "old", {"n": 1})
    ops = [
        PutOp(("docs", "a"), "old", {"n": 2}),
        GetOp(("docs", "a"), "old"),
        PutOp(("docs", "b"), "new", {"n": 3}),
        SearchOp(("docs",), {"n": {"$gte": 1}}, 10, 0),
        ListNamespacesOp((MatchCondition("prefix", ("docs",)),), None, 10, 0),
        PutOp(("docs", "a"), "old", {"n": 4}),  # the last put of a key wins
        PutOp(("docs", "c"), "gone", None),
    ]
    answers = store.batch(ops)
    assert [answers[i] for i in (0, 2, 5, 6)] == [None] * 4
    assert plain_one(answers[1]) == (("docs", "a"), "old", {"n": 1})  # before the batch's puts
    assert plain(answers[3]) == [(("docs", "a"), "old", {"n": 1})]
    assert answers[4] == [("docs", "a")]
    assert store.get(("docs", "a"), "old").value == {"n": 4}
    after = asyncio.run(
        store.abatch([GetOp(("docs", "b"), "new"), SearchOp(("docs",), None, 1, 1)])
    )
    assert plain_one(after[0]) == (("docs", "b"), "new", {"n": 3})
    # a key's last put is written in the place of its first: ("docs", "b") is the newer
    assert plain(after[1]) == [(("docs", "a"), "old", {"n": 4})]


@pytest.mark.asyncio
async def test_the_async_methods_leave_the_callers_loop_free(
    data: Path, store: MemlaneStore
) -> None:
    """While a put waits for the store's write lock (held here by another connection), the
    caller's loop goes on: ``aput`` awaits a future, it does not block the loop."""
    db = sqlite3.connect(data / DB_FILE, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        pending = asyncio.ensure_future(store.aput(("async",), "k", {"n": 1}))
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), 2.0)
        assert not pending.done()
    finally:
        db.execute("ROLLBACK")
        db.close()
    await asyncio.wait_for(pending, 10.0)
    got = await store.aget(("async",), "k")
    assert got is not None
    assert got.value == {"n": 1}
    assert [i.key for i in await store.asearch(("async",))] == ["k"]
    assert await store.alist_namespaces(prefix=("async",)) == [("async",)]
    await store.adelete(("async",), "k")
    assert await store.aget(("async",), "k") is None


def test_a_get_is_read_without_the_nodes_loop(store: MemlaneStore) -> None:
    """A batch of gets goes from the caller's thread to the reader's and back: it is answered
    while the node's loop is held up; a put waits for the loop, as every batch with a write
    does."""
    node = store._node
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # the loop's thread, blocked until released
        held.set()
        release.wait(10.0)

    node._loop.call_soon_threadsafe(hold)
    assert held.wait(5.0)
    try:
        with ThreadPoolExecutor(2) as pool:
            got = pool.submit(store.get, ("users", "ada"), "prefs").result(timeout=5.0)
            assert got is not None
            assert got.value == {"theme": "dark"}
            put = pool.submit(store.put, ("users", "ada"), "prefs", {"theme": "light"})
            with pytest.raises(FutureTimeout):
                put.result(timeout=0.3)
            release.set()
            put.result(timeout=10.0)
    finally:
        release.set()
    after = store.get(("users", "ada"), "prefs")
    assert after is not None
    assert after.value == {"theme": "light"}


def test_a_closed_store_answers_nothing(data: Path) -> None:
    (token,) = issue(data, ["team"])
    store = MemlaneStore(data, token)
    store.put(("users", "ada"), "prefs", {"theme": "dark"})
    store.close()
    for call in (
        lambda: store.get(("users", "ada"), "prefs"),
        lambda: store.put(("users", "ada"), "prefs", {"theme": "light"}),
        lambda: store.search(("users",)),
        lambda: asyncio.run(store.aget(("users", "ada"), "prefs")),
    ):
        with pytest.raises(RuntimeError, match="the store is closed"):
            call()
    store.close()  # closing twice is harmless
