"""``MemlaneStore``: a LangGraph ``BaseStore`` over a memlane node (docs/langgraph.md).

It opens the node through its data directory — beside a running ``memlane serve`` of the same
directory too (two processes share a store: docs/architecture.md §One writer, group commit) —
on a loop in a thread of its own (``NodeThread``), and acts as one token: its caller,
authenticated again for every batch, so a revoked or expired token stops working at once.
Items are SRs of the token's workspace (node/views/items.py); the calls are the tool layer's
(node/tools/items.py).

A batch answers its reads first and then writes its puts, the last put of a key winning — as
LangGraph's own stores do — so a get after a put of the same key in one batch sees the value
from before the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from node.access.callers import Caller
from node.langgraph.filters import check_filter, matches, namespace_matches, narrowing
from node.langgraph.loop import NodeThread
from node.tools import items
from node.tools.context import ToolContext
from node.views.item_reads import ItemRow

__all__ = ["MemlaneStore"]


class MemlaneStore(BaseStore):
    """A LangGraph store whose items are SRs of ``token``'s workspace on the node in
    ``data_dir``; ``embed`` embeds what waits for the vector leg in the background (a served
    node does that itself)."""

    supports_ttl = False

    def __init__(self, data_dir: Path | str, token: str, *, embed: bool = False) -> None:
        self._token = token
        self._node = NodeThread(data_dir, embed=embed)
        try:
            self._node.call(self._caller())  # a token that is no good fails here, at once
        except BaseException:
            self._node.close()
            raise

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the node's loop; only this thread waits.  A batch of gets alone is
        read on the reader's thread straight from this one, the token checked in the same
        read (one hop, not three: the loop's, the token's and the item's)."""
        listed = list(ops)
        _check(listed)
        if listed and all(isinstance(op, GetOp) for op in listed) and self._reads_here():
            keys = [(op.namespace, op.key) for op in listed if isinstance(op, GetOp)]
            rows = items.get_items_waiting(self._node.node.context(), self._token, keys)
            if rows is not None:
                return [None if row is None else Item(**_fields(row)) for row in rows]
        return self._node.call(self._run(listed))

    def _reads_here(self) -> bool:
        """Whether this thread may read on the reader's thread itself: the node is open and
        this is not its loop's thread."""
        return self._node.is_open() and not self._node.is_own()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the node's loop; the caller's loop goes on meanwhile."""
        listed = list(ops)
        _check(listed)
        return await self._node.acall(self._run(listed))

    def close(self) -> None:
        """Close the node; the store answers nothing after."""
        self._node.close()

    def __enter__(self) -> MemlaneStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def _caller(self) -> Caller:
        return await self._node.node.authenticate(self._token)

    async def _run(self, ops: list[Op]) -> list[Result]:
        caller, ctx = await self._caller(), self._node.node.context()
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], items.Put] = {}
        for i, op in enumerate(ops):
            if isinstance(op, PutOp):
                if op.value is not None or op.namespace:  # nothing is ever at ()
                    puts[(tuple(op.namespace), op.key)] = (tuple(op.namespace), op.key, op.value)
            else:
                results[i] = await _read(ctx, caller, op)
        if puts:
            await items.put_items(ctx, caller, list(puts.values()))
        return results


def _check(ops: Sequence[Op]) -> None:
    """Refuse a batch before anything is read or written: namespaces as LangGraph refuses
    them, a TTL, an operator no store knows, a negative limit or offset."""
    for op in ops:
        if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
            raise ValueError(f"Unknown operation type: {type(op)}")
        validate_op_namespace(op)
        if isinstance(op, PutOp):
            _check_put(op)
        elif isinstance(op, SearchOp | ListNamespacesOp):
            _check_page(op.limit, op.offset)
            if isinstance(op, SearchOp) and op.filter:
                check_filter(op.filter)


def _check_put(op: PutOp) -> None:
    if op.ttl is not None:
        raise ValueError("MemlaneStore does not support ttl: items live until deleted")
    if op.value is None:
        return
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if op.namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {op.namespace}'
        )


def _check_page(limit: int, offset: int) -> None:
    for name, n in (("limit", limit), ("offset", offset)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{name} must be a whole number, 0 or more (got {n!r})")


async def _read(ctx: ToolContext, caller: Caller, op: Op) -> Result:
    if isinstance(op, GetOp):
        row = await items.get_item(ctx, caller, op.namespace, op.key)
        return None if row is None else Item(**_fields(row))
    if isinstance(op, SearchOp):
        return await _search(ctx, caller, op)
    assert isinstance(op, ListNamespacesOp)
    return await _namespaces(ctx, caller, op)


async def _search(ctx: ToolContext, caller: Caller, op: SearchOp) -> list[SearchItem]:
    filter_ = op.filter
    keep = (lambda value: matches(value, filter_)) if filter_ else None
    prefix, offset, limit = op.namespace_prefix, op.offset, op.limit
    if not op.query:
        tests = narrowing(filter_) if filter_ else ()
        rows = await items.search_items(
            ctx, caller, prefix, offset=offset, limit=limit, tests=tests, keep=keep
        )
        return [SearchItem(**_fields(row)) for row in rows]
    found = await items.find_items(
        ctx, caller, prefix, op.query, offset=offset, limit=limit, keep=keep
    )
    return [SearchItem(**_fields(row), score=score) for row, score in found]


async def _namespaces(
    ctx: ToolContext, caller: Caller, op: ListNamespacesOp
) -> list[tuple[str, ...]]:
    conditions = op.match_conditions or ()
    head = next((c.path for c in conditions if c.match_type == "prefix"), ())
    literal = tuple(head[: head.index("*")] if "*" in head else head)
    found = await items.item_namespaces(ctx, caller, literal)
    kept = [
        ns for ns in found if all(namespace_matches(c.match_type, c.path, ns) for c in conditions)
    ]
    if op.max_depth is not None:
        kept = list({ns[: op.max_depth] for ns in kept})
    return sorted(kept)[op.offset : op.offset + op.limit]


def _fields(row: ItemRow) -> dict[str, Any]:
    return {
        "namespace": row.namespace,
        "key": row.key,
        "value": row.value,
        "created_at": _instant(row.created_at),
        "updated_at": _instant(row.updated_at),
    }


def _instant(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
