"""MemlaneStore beside LangGraph's own stores (docs/langgraph.md §Beside LangGraph's own
stores): seeded random sequences of batches — puts, overwrites, deletes, gets, prefix searches
with filters, offsets and limits, ``list_namespaces`` with conditions and depths, no query —
applied to ``InMemoryStore``, ``SqliteStore`` and ``MemlaneStore``, every answer compared with
timestamps left out.

The references' quirks, and how the comparison meets them:

- ``InMemoryStore`` documents no search order (it answers in the order its dicts were filled),
  and ``SqliteStore`` orders by ``updated_at`` stamped to the second, so items written in one
  second tie in no stated order.  Each reference is therefore asked for every match (offset 0,
  no limit), the two sets must be equal, and the expected page is that set in the order the
  items were written, newest first, cut by the search's offset and limit: memlane's answer must
  be exactly that page.
- ``InMemoryStore`` keeps a namespace emptied by deletes, or named by a get, in
  ``list_namespaces``: its empty namespaces are dropped before each batch.
- ``SqliteStore`` sorts namespaces as dot-joined text: its full list is compared sorted as
  tuples (``InMemoryStore``'s order, and memlane's), then paged.
- ``SqliteStore`` reads a dict filter as operators, so nested-dict filters are compared with
  ``InMemoryStore`` alone; operators are given only the fields every value holds as numbers
  or text (``InMemoryStore`` raises on others).
- Both answer a batch's reads before its puts, and a key's last put wins: so does memlane.

One node serves every sequence, each in a workspace of its own; odd seeds go through
``abatch``, even ones through ``batch``; a third of them read every search by walking the
newest items first (as a prefix holding many items is read), the rest by reading each
prefix's range.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from random import Random
from typing import Any

import pytest

from tests.extras import need

need("langgraph", module=True)

from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402
from langgraph.store.sqlite import SqliteStore  # noqa: E402

from node.identity import DB_FILE  # noqa: E402
from node.langgraph import MemlaneStore  # noqa: E402
from node.langgraph.filters import narrowing  # noqa: E402
from node.node import Node  # noqa: E402
from node.views import item_reads  # noqa: E402
from node.views.item_reads import item_query, range_query, walk_query  # noqa: E402
from tests.node.langgraphkit import issue, make_node, plain, plain_one  # noqa: E402

SEQUENCES = 300
LABELS = ("a", "b", "a-b", "c")  # "a-b" sorts before ("a", "b") as text, after as a tuple
KEYS = ("k0", "k1", "k2", "k3")
EVERY = 1_000_000  # a limit that holds every match


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    data = make_node(tmp_path_factory.mktemp("langgraph") / "node", durable=False)
    return data, issue(data, [f"w{seed}" for seed in range(SEQUENCES)])


# -- what a sequence is made of ----------------------------------------------------------------


def _value(rng: Random) -> dict[str, Any]:
    value: dict[str, Any] = {
        "n": rng.randrange(10),
        "s": rng.choice("xyz"),
        "t": [rng.randrange(3) for _ in range(rng.randrange(3))],
        "d": {"p": rng.randrange(3), "q": rng.choice("uv")},
        "f": rng.random() < 0.5,
    }
    if rng.random() < 0.5:
        value["o"] = rng.choice(["v", None])
    return value


# Filters, each with whether SqliteStore reads it as InMemoryStore does.
_FILTERS: list[Callable[[Random], tuple[dict[str, Any], bool]]] = [
    lambda r: ({"s": r.choice("xyz")}, True),
    lambda r: ({"n": r.randrange(10)}, True),
    lambda r: ({"f": r.random() < 0.5}, True),
    lambda r: ({"t": [r.randrange(3) for _ in range(r.randrange(3))]}, True),
    lambda r: ({"o": r.choice(["v", None])}, True),
    lambda r: ({"n": {"$gt": r.randrange(10)}}, True),
    lambda r: ({"n": {"$gte": r.randrange(5), "$lt": r.randrange(4, 10)}}, True),
    lambda r: ({"n": {"$lte": r.randrange(10)}, "s": {"$ne": r.choice("xyz")}}, True),
    lambda r: ({"s": {"$eq": r.choice("xyz")}, "f": False}, True),
    lambda r: ({"n": {"$ne": r.randrange(10)}, "t": []}, True),
    lambda r: ({"d": {"p": r.randrange(3)}}, False),
    lambda r: ({"d": {"p": {"$gte": 1}, "q": r.choice("uv")}}, False),
]


class Script:
    """One seeded sequence's namespaces and batches."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = Random(seed)
        pool = {tuple(rng.choice(LABELS) for _ in range(rng.randint(1, 3))) for _ in range(8)}
        self.pool = sorted(pool)

    def batches(self) -> Iterator[list[Op]]:
        rng = self.rng
        for _ in range(rng.randint(6, 10)):
            yield [self._op() for _ in range(rng.randint(1, 3))]

    def _op(self) -> Op:
        rng, ns = self.rng, self.rng.choice(self.pool)
        kind = rng.choices(["put", "delete", "get", "search", "list"], [5, 2, 2, 3, 2])[0]
        if kind == "put":
            return PutOp(ns, rng.choice(KEYS), _value(rng))
        if kind == "delete":
            return PutOp(ns, rng.choice(KEYS), None)
        if kind == "get":
            return GetOp(ns if rng.random() < 0.8 else (*ns, "z"), rng.choice(KEYS))
        if kind == "search":
            filter_ = rng.choice(_FILTERS)(rng)[0] if rng.random() < 0.7 else None
            limit = rng.choice([1, 2, 3, 5, 100])
            return SearchOp(ns[: rng.randrange(len(ns) + 1)], filter_, limit, rng.randrange(4))
        return self._list(ns)

    def _list(self, ns: tuple[str, ...]) -> ListNamespacesOp:
        rng, conditions = self.rng, []
        if rng.random() < 0.6:
            conditions.append(
                MatchCondition("prefix", self._starred(ns[: rng.randint(1, len(ns))]))
            )
        if rng.random() < 0.4:
            conditions.append(
                MatchCondition("suffix", self._starred(ns[-rng.randint(1, len(ns)) :]))
            )
        depth = rng.choice([None, None, 1, 2, 3])
        limit = rng.choice([1, 2, 4, 100])
        return ListNamespacesOp(tuple(conditions), depth, limit, rng.randrange(3))

    def _starred(self, path: tuple[str, ...]) -> tuple[str, ...]:
        if self.rng.random() < 0.3:
            at = self.rng.randrange(len(path))
            return (*path[:at], "*", *path[at + 1 :])
        return path


def _sqlite_reads(op: Op) -> bool:
    """Whether SqliteStore reads ``op`` as InMemoryStore does (it takes a dict as operators)."""
    if not isinstance(op, SearchOp) or not op.filter:
        return True
    return not any(
        isinstance(v, dict) and not any(k.startswith("$") for k in v) for v in op.filter.values()
    )


def _wide(op: Op) -> Op:
    """``op`` asking for every match: the references' pages are cut here, in written order."""
    if isinstance(op, SearchOp | ListNamespacesOp):
        return op._replace(offset=0, limit=EVERY)
    return op


# -- running one ------------------------------------------------------------------------------


class References:
    """InMemoryStore and SqliteStore, and the order their items were written in."""

    def __init__(self, sqlite: SqliteStore) -> None:
        self.memory = InMemoryStore()
        self.sqlite = sqlite
        self.written: dict[tuple[tuple[str, ...], str], int] = {}
        self._clock = itertools.count()

    def batch(self, ops: list[Op]) -> tuple[list[Any], list[Any]]:
        # InMemoryStore's quirk: a namespace emptied by deletes, or named by a get (even one
        # earlier in the same batch), stays: its empty namespaces are dropped, and its lists
        # are asked for before the batch's gets can name any
        for ns in [ns for ns, held in self.memory._data.items() if not held]:
            del self.memory._data[ns]
        lists = [i for i, op in enumerate(ops) if isinstance(op, ListNamespacesOp)]
        listed = self.memory.batch([_wide(ops[i]) for i in lists])
        from_memory = self.memory.batch([_wide(op) for op in ops])
        for i, answer in zip(lists, listed, strict=True):
            from_memory[i] = answer
        kept = [i for i, op in enumerate(ops) if _sqlite_reads(op)]
        answers = self.sqlite.batch([_wide(ops[i]) for i in kept])
        from_sqlite: list[Any] = [...] * len(ops)
        for i, answer in zip(kept, answers, strict=True):
            from_sqlite[i] = answer
        self._note_puts(ops)
        return from_memory, from_sqlite

    def _note_puts(self, ops: list[Op]) -> None:
        last: dict[tuple[tuple[str, ...], str], Any] = {}
        for op in ops:
            if isinstance(op, PutOp):
                last[(op.namespace, op.key)] = op.value  # a key keeps its first place
        for k, value in last.items():
            if value is None:
                self.written.pop(k, None)
            else:
                self.written[k] = next(self._clock)


def _check(op: Op, got: Any, memory: Any, sqlite: Any, written: dict[Any, int]) -> None:
    if isinstance(op, GetOp):
        assert plain_one(got) == plain_one(memory) == plain_one(sqlite), op
    elif isinstance(op, SearchOp):
        matched = {(ns, key): value for ns, key, value in plain(memory)}
        if sqlite is not ...:
            assert {(ns, key): value for ns, key, value in plain(sqlite)} == matched, op
        newest = sorted(matched, key=lambda k: -written[k])
        page = newest[op.offset : op.offset + op.limit]
        assert plain(got) == [(ns, key, matched[(ns, key)]) for ns, key in page], op
    elif isinstance(op, ListNamespacesOp):
        listed = sorted(memory)
        assert sorted(sqlite) == listed, op
        assert got == listed[op.offset : op.offset + op.limit], op


def _run(store: MemlaneStore, seed: int) -> int:
    sequence, checked = Script(seed), 0
    with SqliteStore.from_conn_string(":memory:") as sqlite:
        sqlite.setup()
        references = References(sqlite)
        for ops in sequence.batches():
            got = asyncio.run(store.abatch(ops)) if seed % 2 else store.batch(ops)
            written = dict(references.written)  # the order before the batch's puts
            from_memory, from_sqlite = references.batch(ops)
            for op, answer, memory, sqlite_answer in zip(
                ops, got, from_memory, from_sqlite, strict=True
            ):
                _check(op, answer, memory, sqlite_answer, written)
                checked += not isinstance(op, PutOp)
    return checked


@pytest.mark.parametrize("chunk", range(10))
def test_memlane_answers_as_langgraphs_own_stores(
    served: tuple[Path, list[str]], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, tokens = served
    checked = 0
    for seed in range(chunk, SEQUENCES, 10):
        with monkeypatch.context() as patch, MemlaneStore(data, tokens[seed]) as store:
            if seed % 3 == 0:
                # Every search walks: the workspace's 2 newest items, then what is older (a
                # prefix's range, or the workspace walked on).
                patch.setattr(item_reads, "NARROW", 0)
                patch.setattr(item_reads, "WINDOW", 2)
            checked += _run(store, seed)
    assert checked > 200  # reads were compared, not only written


def test_the_sequences_reach_every_kind_of_answer() -> None:
    """The generator makes what the comparison is for: overwrites, deletes of held keys,
    searches that page past matches, filters of each kind, lists with wildcards and depths."""
    seen: set[str] = set()
    for seed in range(SEQUENCES):
        held: set[tuple[tuple[str, ...], str]] = set()
        for ops in Script(seed).batches():
            for op in ops:
                seen |= _kinds(op, held)
    assert seen >= {"overwrite", "delete held", "offset", "nested", "operator", "star", "depth"}


def _kinds(op: Op, held: set[tuple[tuple[str, ...], str]]) -> set[str]:
    if isinstance(op, PutOp):
        k, was = (op.namespace, op.key), (op.namespace, op.key) in held
        (held.discard if op.value is None else held.add)(k)
        return {("delete held" if op.value is None else "overwrite")} if was else set()
    if isinstance(op, SearchOp):
        found = {"offset"} if op.offset else set()
        if not _sqlite_reads(op):
            found.add("nested")
        if op.filter and any(isinstance(v, dict) and "$" in str(v) for v in op.filter.values()):
            found.add("operator")
        return found
    if isinstance(op, ListNamespacesOp):
        stars = any("*" in c.path for c in op.match_conditions)
        return ({"star"} if stars else set()) | ({"depth"} if op.max_depth else set())
    return set()


# -- index lookups, not scans -----------------------------------------------------------------


def test_a_get_and_a_prefix_search_are_index_lookups(tmp_path: Path) -> None:
    data = make_node(tmp_path / "node")
    (token,) = issue(data, ["team"])
    with MemlaneStore(data, token) as store:
        for i in range(50):
            store.put(("users", f"u{i % 5}", "prefs"), f"k{i}", {"i": i})
    caller = asyncio.run(_caller(data, token))
    tests = narrowing({"i": {"$gte": 3}})
    with sqlite3.connect(data / DB_FILE) as db:
        get = _plan(db, *item_query(caller, ("users", "u1", "prefs"), "k1"))
        search = _plan(db, *range_query(caller, ("users", "u1"), below=b"z", limit=10))
        walk = _plan(db, *walk_query(caller, ("users",), tests, below=b"z", limit=10, window=b"a"))
    assert "SEARCH i USING INDEX store_items_by_key (workspace=? AND namespace=? AND key=?)" in get
    assert (
        "SEARCH store_items USING COVERING INDEX store_items_by_namespace (workspace=? AND "
        "namespace>? AND namespace<?)" in search
    )
    # A wide prefix walks the newest first, in the index's order: nothing to sort.
    assert (
        "SEARCH i USING INDEX store_items_by_update (workspace=? AND updated_ord>? AND "
        "updated_ord<?)" in walk
    )
    assert not any("TEMP B-TREE" in line for line in walk), walk
    assert not any(line.startswith("SCAN") for line in get + search + walk), get + search + walk


async def _caller(data: Path, token: str) -> Any:
    async with Node.open(data) as node:
        return await node.authenticate(token)


def _plan(db: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> list[str]:
    return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", args)]


def test_a_prefix_is_whole_labels(tmp_path: Path) -> None:
    """``("a",)`` is not a prefix of ``("a-b",)`` nor of ``("ab",)``: the range stops at the
    label's end (the text ``a.`` … ``a/``)."""
    data = make_node(tmp_path / "node")
    (token,) = issue(data, ["team"])
    with MemlaneStore(data, token) as store:
        for ns in [("a",), ("a", "b"), ("a-b",), ("ab",), ("a", "b", "c"), ("b",)]:
            store.put(ns, "k", {"ns": list(ns)})
        assert {i.namespace for i in store.search(("a",))} == {("a",), ("a", "b"), ("a", "b", "c")}
        assert {i.namespace for i in store.search(("a", "b"))} == {("a", "b"), ("a", "b", "c")}
        assert store.list_namespaces(prefix=("a",)) == [("a",), ("a", "b"), ("a", "b", "c")]
        with pytest.raises(InvalidNamespaceError):
            store.search(("a.b",))
