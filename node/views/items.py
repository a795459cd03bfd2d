"""LangGraph store items as SRs (docs/langgraph.md): an item of a workspace is the SR whose id
is made from (workspace, namespace, key), in the lane ``langgraph``, its title the key and its
text a canonical JSON envelope ``{"key": …, "namespace": […], "value": …}``.  A delete is a
version whose value is null: a tombstone, which the SR view withdraws (no search, tag or
timeline row; ``present`` 0 in its versions) though the fold still holds it, so the next put
folds onto the same SR on every node.

The view keeps ``store_items``, one row per item shown at this moment — its namespace (each
label followed by ``.``, which no label holds, so a namespace prefix is one range of the
index: ``namespace_range``), key,
times and the fold order of its version — written by the SR view with the SR's current row
(``SrView._write_current``), so it follows every apply, refold, catch-up and erase.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from node.identity import uuid8
from node.store.writer import Txn
from node.views.fold import SrState

__all__ = [
    "CLEAR",
    "LANE",
    "MAX_KEY",
    "MAX_TEXT",
    "ItemState",
    "envelope",
    "is_tombstone",
    "item_id",
    "item_of",
    "namespace_of",
    "namespace_range",
    "namespace_text",
    "select_item_sr",
    "show_item",
]

LANE = "langgraph"
MAX_KEY = 1000  # an SR's title, which holds the key
MAX_TEXT = 100_000  # an SR's text, which holds the envelope
_TOMBSTONE_END = ',"value":null}'

_ITEM_OUT = "DELETE FROM store_items WHERE sr_id = ?"
_ITEM_IN = (
    "INSERT INTO store_items (sr_id, workspace, namespace, key, created_at, updated_at, "
    "updated_ord) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
CLEAR = ("DELETE FROM store_items",)
_KNOWN = "SELECT 1 FROM sr_versions WHERE sr_id = ? LIMIT 1"
_SHOWN = "SELECT workspace, owner, private FROM srs WHERE sr_id = ? AND live = 1"


def item_id(workspace: str, namespace: Sequence[str], key: str) -> str:
    """The SR id of the item (namespace, key) of ``workspace``: the same on every node, so
    two nodes putting one key meet on one SR (no label holds ``.`` or NUL, and the key comes
    last: the parts are told apart)."""
    return uuid8("memlane-langgraph", workspace, ".".join(namespace), key)


def namespace_text(namespace: Sequence[str]) -> str:
    """The namespace as ``store_items`` holds it: each label followed by ``.``."""
    return "".join(f"{label}." for label in namespace)


def namespace_of(text: str) -> tuple[str, ...]:
    return tuple(text.split(".")[:-1])


def namespace_range(prefix: Sequence[str]) -> tuple[str, str] | None:
    """[low, high): the ``namespace_text`` of every namespace that starts with ``prefix``
    (a text that starts with ``a.b.`` lies between ``a.b.`` and ``a.b/``, and no other does:
    ``/`` follows ``.``); None for the empty prefix, which every namespace starts with."""
    low = namespace_text(prefix)
    return (low, low[:-1] + "/") if low else None


def envelope(namespace: Sequence[str], key: str, value: Any) -> str:
    """The SR text of an item: canonical JSON (sorted keys, no spaces, no NaN); ``value``
    None for a tombstone.  ``TypeError``/``ValueError`` for what JSON cannot hold."""
    doc = {"key": key, "namespace": list(namespace), "value": value}
    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@dataclass(frozen=True, slots=True)
class ItemState:
    """An item as an SR state holds it; ``value`` None: deleted (a tombstone)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None


def item_of(state: SrState) -> ItemState | None:
    """The item ``state`` holds, or None when it is no item: not in the lane, its text not an
    envelope, or its id not the one its workspace, namespace and key make."""
    if not state.exists or state.lane != LANE or not state.text.startswith('{"key":'):
        return None
    try:
        doc = json.loads(state.text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.keys() != {"key", "namespace", "value"}:
        return None
    namespace, key, value = doc["namespace"], doc["key"], doc["value"]
    if not _is_namespace(namespace) or not isinstance(key, str):
        return None
    if value is not None and not isinstance(value, dict):
        return None
    if item_id(state.workspace or "", namespace, key) != state.sr_id:
        return None
    return ItemState(tuple(namespace), key, value)


def _is_namespace(labels: object) -> bool:
    return (
        isinstance(labels, list)
        and bool(labels)
        and all(isinstance(s, str) and s and "." not in s and "\0" not in s for s in labels)
    )


def is_tombstone(state: SrState) -> bool:
    """Whether ``state`` is a deleted item: withdrawn from every view though it exists."""
    if state.lane != LANE or not state.text.endswith(_TOMBSTONE_END):
        return False
    item = item_of(state)
    return item is not None and item.value is None


def show_item(txn: Txn, sr_id: str, state: SrState, ord_: bytes) -> None:
    """Queue the SR's ``store_items`` row for its shown ``state`` (of fold order ``ord_``):
    none unless it is a live item.  Within one write only the last counts.  An SR whose lane
    is not the items' cannot have a row unless ``sr.adjust`` moved it out of the lane (then
    ``has_adjustment`` is set, and sticks): only those are looked at."""
    if state.exists and state.lane != LANE and not state.has_adjustment:
        return  # never in the lane, so never an item: no row (the SR view's common case)
    item = item_of(state)
    txn.put(_ITEM_OUT, sr_id, (sr_id,))
    if item is None or item.value is None:
        txn.put(_ITEM_IN, sr_id, None)
        return
    row = (
        sr_id,
        state.workspace,
        namespace_text(item.namespace),
        item.key,
        state.created_time,
        state.ingest_time,
        ord_,
    )
    txn.put(_ITEM_IN, sr_id, row)


async def select_item_sr(txn: Txn, sr_id: str) -> tuple[bool, tuple[str, str, bool] | None]:
    """Whether this node holds any entry of the SR ``sr_id`` (a put then updates it: a create
    is only for an SR nothing of which exists here), and (workspace, owner, private) of it
    when it is shown at this moment."""
    known = await txn.fetchone(_KNOWN, (sr_id,)) is not None
    row = await txn.fetchone(_SHOWN, (sr_id,)) if known else None
    return known, None if row is None else (str(row[0]), str(row[1]), bool(row[2]))
