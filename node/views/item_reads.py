"""Reads of the LangGraph store's items (node/views/items.py, docs/langgraph.md), each under
the read rule: an item is an SR, shown to a caller only as ``e_timeline`` would show it
(``readable_srs``: live, not deleted here, readable by the caller).

An exact get is a lookup of ``store_items_by_key``; a namespace prefix is one range of it; the
newest first is the fold order of the items' versions (``updated_ord``), the same on every node.
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
    "CHUNK",
    "ItemRow",
    "item_query",
    "items_query",
    "select_item",
    "select_item_ids",
    "select_items",
    "select_namespaces",
]

CHUNK = 256  # rows read at a time when a filter decides which rows count

_COLUMNS = "i.sr_id, i.namespace, i.key, i.created_at, i.updated_at, i.updated_ord, srs.text"
_FROM = "FROM store_items i JOIN srs ON srs.sr_id = i.sr_id"


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


def _where(caller: Caller, prefix: Sequence[str]) -> tuple[str, list[Any]]:
    rule, params = readable_srs(caller)
    where, args = f"i.workspace = ? AND {rule}", [caller.workspace, *params]
    span = namespace_range(prefix)
    if span is not None:
        where += " AND i.namespace >= ? AND i.namespace < ?"
        args += span
    return where, args


def item_query(caller: Caller, namespace: Sequence[str], key: str) -> tuple[str, tuple[Any, ...]]:
    """The statement of an exact get, with its parameters: a lookup of
    ``store_items_by_key`` (tests/node/test_langgraph_store.py holds its plan)."""
    rule, params = readable_srs(caller)
    sql = (
        f"SELECT {_COLUMNS} {_FROM} WHERE i.workspace = ? AND i.namespace = ? AND i.key = ? "
        f"AND {rule}"
    )
    return sql, (caller.workspace, namespace_text(namespace), key, *params)


def items_query(
    caller: Caller, prefix: Sequence[str], *, offset: int, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """The statement of a page of the items under ``prefix``, the newest first, with its
    parameters: a range of ``store_items_by_key`` for a prefix (its plan is held too)."""
    where, args = _where(caller, prefix)
    sql = f"SELECT {_COLUMNS} {_FROM} WHERE {where} ORDER BY i.updated_ord DESC LIMIT ? OFFSET ?"
    return sql, (*args, limit, offset)


async def select_item(
    reader: Reader, caller: Caller, namespace: Sequence[str], key: str
) -> ItemRow | None:
    """The item (namespace, key) of the caller's workspace, if it can read it."""
    rows = await reader.fetchall(*item_query(caller, namespace, key))
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
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> list[ItemRow]:
    """The items under the namespace ``prefix`` whose value ``keep`` keeps (all, when None),
    the newest version first, from the ``offset``-th on, at most ``limit``.  With ``keep``
    they are read a chunk at a time in one read transaction, until the page is whole."""
    if keep is None:
        rows = await reader.fetchall(*items_query(caller, prefix, offset=offset, limit=limit))
        return [_row(r) for r in rows]
    where, args = _where(caller, prefix)
    sql = f"SELECT {_COLUMNS} {_FROM} WHERE {where}"
    kept = await reader.snapshot(lambda fetch: _kept(fetch, sql, args, keep, offset + limit))
    return kept[offset:]


def _kept(
    fetch: Fetch, sql: str, args: list[Any], keep: Callable[[dict[str, Any]], bool], need: int
) -> list[ItemRow]:
    out: list[ItemRow] = []
    first = f"{sql} ORDER BY i.updated_ord DESC LIMIT ?"
    after = f"{sql} AND i.updated_ord < ? ORDER BY i.updated_ord DESC LIMIT ?"
    rows = fetch(first, (*args, CHUNK))
    while rows and len(out) < need:
        out.extend(item for item in map(_row, rows) if keep(item.value))
        rows = fetch(after, (*args, rows[-1][5], CHUNK)) if len(rows) == CHUNK else []
    return out[:need]


async def select_namespaces(
    reader: Reader, caller: Caller, prefix: Sequence[str]
) -> list[tuple[str, ...]]:
    """Every namespace under ``prefix`` that holds an item the caller can read, in the order
    of their text (one range of the index)."""
    where, args = _where(caller, prefix)
    rows = await reader.fetchall(
        f"SELECT DISTINCT i.namespace {_FROM} WHERE {where} ORDER BY i.namespace",
        args,
    )
    return [namespace_of(text) for (text,) in rows]
