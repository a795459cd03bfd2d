"""Reads of the LangGraph store's items (node/views/items.py, docs/langgraph.md), each under
the read rule: an item is an SR, shown to a caller only as ``e_timeline`` would show it
(``readable_srs``: live, not deleted here, readable by the caller).

An exact get is a lookup of ``store_items_by_key``; a namespace prefix is one range of an index
(labels end in ``.``); the newest first is the fold order of the items' versions
(``updated_ord``), the same on every node.

A search's filter is checked in SQL first (``FieldTest``: ``json_extract`` of the envelope's
value), then exactly by the caller's ``keep``.  Where a prefix holds few items (at most
``NARROW``) the ids of its range are sorted newest first from ``store_items_by_namespace``
alone, and their rows read a page of ids at a time, until the page of items is whole; where
it holds more, the workspace's newest items are walked first (``store_items_by_update``,
``WINDOW`` of them), from which a common filter fills a page without reading the rest, and
only then the range, older than the window.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.store.reader import Fetch
from node.views.items import namespace_of, namespace_range, namespace_text
from node.views.read_rule import readable_srs

__all__ = [
    "NARROW",
    "WINDOW",
    "FieldTest",
    "ItemRow",
    "addressable",
    "fetch_item",
    "item_query",
    "range_query",
    "select_item",
    "select_item_ids",
    "select_items",
    "select_namespaces",
    "walk_query",
]

NARROW = 2_000  # items under a prefix, at most, that are read as one range and sorted
WINDOW = 8_000  # a workspace's newest items walked for a wider prefix before its range is read

_COLUMNS = "i.sr_id, i.namespace, i.key, i.created_at, i.updated_at, i.updated_ord, srs.text"
_FROM = "FROM store_items i JOIN srs ON srs.sr_id = i.sr_id"
_BY_UPDATE = "FROM store_items i INDEXED BY store_items_by_update JOIN srs ON srs.sr_id = i.sr_id"


_TESTS = frozenset({"=", "<", "<=", ">", ">="})


def addressable(key: str) -> bool:
    """Whether a JSON path (``$.value."key"``) names ``key``: SQLite matches a quoted label
    against the key as the JSON text spells it, so only a key JSON writes unescaped — no
    ``"``, backslash or control character."""
    return json.dumps(key, ensure_ascii=False) == f'"{key}"'


@dataclass(frozen=True, slots=True)
class FieldTest:
    """``value[key] op operand`` as SQLite compares the envelope's JSON (``json_extract``:
    numbers as numbers, text as text, either before the other): a test the caller's exact
    check implies, so SQL may leave out what fails it.  ``key`` is a key of the value that
    JSON writes as it is (``addressable``)."""

    key: str
    op: str
    operand: str | float

    def __post_init__(self) -> None:
        if self.op not in _TESTS:
            raise ValueError(f"no field test {self.op!r}")
        if not addressable(self.key):
            raise ValueError(f"a JSON path cannot name the key {self.key!r}")

    def sql(self) -> tuple[str, tuple[Any, ...]]:
        return f"json_extract(srs.text, ?) {self.op} ?", (f'$.value."{self.key}"', self.operand)


@dataclass(frozen=True, slots=True)
class ItemRow:
    """An item as a reader sees it: times in ms (created: its SR's creation; updated: its
    current version's ingest time)."""

    sr_id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int


def _row(row: Sequence[Any]) -> ItemRow:
    sr_id, namespace, key, created, updated, _, text = row
    value = json.loads(text)["value"]
    return ItemRow(sr_id, namespace_of(namespace), key, value, created, updated)


def item_query(caller: Caller, namespace: Sequence[str], key: str) -> tuple[str, tuple[Any, ...]]:
    """The statement of an exact get, with its parameters: a lookup of
    ``store_items_by_key`` (tests/node/test_langgraph_store.py holds its plan)."""
    rule, params = readable_srs(caller)
    sql = (
        f"SELECT {_COLUMNS} {_FROM} WHERE i.workspace = ? AND i.namespace = ? AND i.key = ? "
        f"AND {rule}"
    )
    return sql, (caller.workspace, namespace_text(namespace), key, *params)


@dataclass(frozen=True, slots=True)
class _Search:
    """A search's conditions as SQL: the read rule, the prefix's range, the field tests."""

    caller: Caller
    span: tuple[str, str] | None
    tests: tuple[FieldTest, ...]

    def where(self, *, span: bool) -> tuple[str, list[Any]]:
        rule, params = readable_srs(self.caller)
        parts, args = ["i.workspace = ?", rule], [self.caller.workspace, *params]
        if span and self.span is not None:
            parts.append("i.namespace >= ? AND i.namespace < ?")
            args += self.span
        for test in self.tests:
            sql, more = test.sql()
            parts.append(sql)
            args += more
        return " AND ".join(parts), args


Statement = tuple[str, tuple[Any, ...]]


def range_query(
    caller: Caller, prefix: Sequence[str], *, below: bytes | None = None, limit: int
) -> Statement:
    """The ids and fold orders of a page of the items under ``prefix`` (not empty), older
    than ``below``, the newest first: a range of ``store_items_by_namespace`` alone, sorted
    (tests/node/test_langgraph_store.py holds its plan)."""
    return _range(_Search(caller, namespace_range(prefix), ()), below, limit)


def walk_query(
    caller: Caller,
    prefix: Sequence[str],
    tests: Sequence[FieldTest] = (),
    *,
    below: bytes | None = None,
    limit: int,
    window: bytes | None = None,
) -> Statement:
    """A page of the items under ``prefix`` passing ``tests``, older than ``below``, walked
    newest first down ``store_items_by_update`` (no sort), no further than the item of fold
    order ``window`` (its plan is held too)."""
    return _walk(_Search(caller, namespace_range(prefix), tuple(tests)), below, limit, window)


def _range(search: _Search, below: bytes | None, limit: int) -> Statement:
    assert search.span is not None
    sql = (
        "SELECT sr_id, updated_ord FROM store_items INDEXED BY store_items_by_namespace "
        "WHERE workspace = ? AND namespace >= ? AND namespace < ?"
    )
    args: list[Any] = [search.caller.workspace, *search.span]
    if below is not None:
        sql, args = f"{sql} AND updated_ord < ?", [*args, below]
    return f"{sql} ORDER BY updated_ord DESC LIMIT ?", (*args, limit)


def _walk(search: _Search, below: bytes | None, limit: int, window: bytes | None) -> Statement:
    where, args = search.where(span=True)
    for op, bound in (("<", below), (">=", window)):
        if bound is not None:
            where, args = f"{where} AND i.updated_ord {op} ?", [*args, bound]
    sql = f"SELECT {_COLUMNS} {_BY_UPDATE} WHERE {where} ORDER BY i.updated_ord DESC LIMIT ?"
    return sql, (*args, limit)


def _of_ids(search: _Search, sr_ids: Sequence[str]) -> Statement:
    """The rows of the items ``sr_ids`` that pass the search's rule and tests (any order)."""
    where, args = search.where(span=False)
    sql = (
        f"SELECT {_COLUMNS} FROM json_each(?) t CROSS JOIN store_items i ON i.sr_id = t.value "  # noqa: S608
        f"JOIN srs ON srs.sr_id = i.sr_id WHERE {where}"
    )
    return sql, (json.dumps(list(sr_ids)), *args)


async def select_item(
    reader: Reader, caller: Caller, namespace: Sequence[str], key: str
) -> ItemRow | None:
    """The item (namespace, key) of the caller's workspace, if it can read it."""
    return await reader.run(lambda fetch: fetch_item(fetch, caller, namespace, key))


def fetch_item(fetch: Fetch, caller: Caller, namespace: Sequence[str], key: str) -> ItemRow | None:
    """The item (namespace, key) of the caller's workspace, if it can read it: one read on the
    reader's thread (``Reader.run``), alone or among others."""
    rows = fetch(*item_query(caller, namespace, key))
    return _row(rows[0]) if rows else None


async def select_item_ids(reader: Reader, caller: Caller, sr_ids: Sequence[str]) -> list[ItemRow]:
    """The items among the SRs ``sr_ids`` that the caller can read (any order)."""
    rule, params = readable_srs(caller)
    rows = await reader.fetchall(
        f"SELECT {_COLUMNS} FROM json_each(?) t CROSS JOIN store_items i ON i.sr_id = t.value "  # noqa: S608
        f"JOIN srs ON srs.sr_id = i.sr_id WHERE i.workspace = ? AND {rule}",
        (json.dumps(list(sr_ids)), caller.workspace, *params),
    )
    return [_row(r) for r in rows]


async def select_items(
    reader: Reader,
    caller: Caller,
    prefix: Sequence[str],
    *,
    offset: int,
    limit: int,
    tests: Sequence[FieldTest] = (),
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> list[ItemRow]:
    """The items under the namespace ``prefix`` that pass ``tests`` and whose value ``keep``
    keeps (all, when None), the newest version first, from the ``offset``-th on, at most
    ``limit`` — read in one read transaction, a page at a time until the page is whole."""
    need = offset + limit
    if need == 0:
        return []
    search = _Search(caller, namespace_range(prefix), tuple(tests))
    kept = await reader.snapshot(lambda fetch: _kept(fetch, search, keep, need))
    return kept[offset:]


Rows = list[Sequence[Any]]


@dataclass(frozen=True, slots=True)
class _Way:
    """One way of reading the items newest first, older than ``upper``: a walk down
    ``store_items_by_update``, no older than ``lower``; or a prefix's range, its ids sorted
    from ``store_items_by_namespace`` and then their rows read, a page of ids at a time."""

    walk: bool
    upper: bytes | None = None
    lower: bytes | None = None

    def page(
        self, fetch: Fetch, search: _Search, below: bytes | None, size: int
    ) -> tuple[Rows, bytes | None]:
        """Up to ``size`` rows (a walk) or the rows of up to ``size`` ids (a range) older than
        ``below``, newest first; and the fold order to go on below, or None at the end."""
        below = self.upper if below is None else below
        if self.walk:
            rows = fetch(*_walk(search, below, size, self.lower))
            return rows, (_order(rows[-1]) if len(rows) == size else None)
        ids = fetch(*_range(search, below, size))
        rows = sorted(fetch(*_of_ids(search, [i for i, _ in ids])), key=_order, reverse=True)
        return rows, (bytes(ids[-1][1]) if len(ids) == size else None)


def _order(row: Sequence[Any]) -> bytes:
    return bytes(row[5])


def _kept(
    fetch: Fetch, search: _Search, keep: Callable[[dict[str, Any]], bool] | None, need: int
) -> list[ItemRow]:
    out: list[ItemRow] = []
    for way in _ways(fetch, search):
        below: bytes | None = None
        size = need if way.walk else max(16, 2 * need)  # a range's ids: some fail the tests
        while len(out) < need:
            rows, below = way.page(fetch, search, below, size)
            out += [item for item in map(_row, rows) if keep is None or keep(item.value)]
            if below is None:
                break  # nothing more this way
            size *= 2
    return out[:need]


def _ways(fetch: Fetch, search: _Search) -> list[_Way]:
    """How the items are read, in turn: a narrow prefix's range; else the workspace's
    ``WINDOW`` newest items, then what is older — the rest of the range, or of the whole
    workspace walked on."""
    if search.span is not None and _at_most(fetch, search, NARROW + 1) <= NARROW:
        return [_Way(walk=False)]
    edge = _newest(fetch, search.caller.workspace, WINDOW)
    if edge is None:
        return [_Way(walk=True)]  # the window holds the whole workspace
    return [_Way(walk=True, lower=edge), _Way(walk=search.span is None, upper=edge)]


def _at_most(fetch: Fetch, search: _Search, cap: int) -> int:
    """How many items lie in the prefix's range, counted up to ``cap``."""
    assert search.span is not None
    sql = (
        "SELECT count(*) FROM (SELECT 1 FROM store_items WHERE workspace = ? "
        "AND namespace >= ? AND namespace < ? LIMIT ?)"
    )
    return int(fetch(sql, (search.caller.workspace, *search.span, cap))[0][0])


def _newest(fetch: Fetch, workspace: str, n: int) -> bytes | None:
    """The fold order of the workspace's ``n``-th newest item; None when it holds fewer."""
    rows = fetch(
        "SELECT updated_ord FROM store_items INDEXED BY store_items_by_update "
        "WHERE workspace = ? ORDER BY updated_ord DESC LIMIT 1 OFFSET ?",
        (workspace, n - 1),
    )
    return bytes(rows[0][0]) if rows else None


async def select_namespaces(
    reader: Reader, caller: Caller, prefix: Sequence[str]
) -> list[tuple[str, ...]]:
    """Every namespace under ``prefix`` that holds an item the caller can read, in the order
    of their text (one range of the index)."""
    where, args = _Search(caller, namespace_range(prefix), ()).where(span=True)
    rows = await reader.fetchall(
        f"SELECT DISTINCT i.namespace {_FROM} WHERE {where} ORDER BY i.namespace",
        args,
    )
    return [namespace_of(text) for (text,) in rows]
