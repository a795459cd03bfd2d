"""The LangGraph store's items through the tool layer (docs/langgraph.md): what
``node.langgraph.MemlaneStore`` calls, as MCP and the CLI call the tools — not tools of the
catalog, so agents see items only as the SRs they are (lane ``langgraph``).

A put is an ``sr.put`` of the item's SR (node/views/items.py): a create when this node holds
nothing of that SR yet, else an update, so a create is never written over an SR that exists;
a delete is a put of the tombstone; the key of an erased item is refused.  Values that JSON
cannot hold, or too large for an SR, are refused with ``ValueError`` before anything is
written; a token without write scope is refused by the node's own refusal.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from node.access import tokens
from node.access.callers import Caller
from node.errors import Refusal
from node.store import AuditEvent, Txn
from node.store.audit import EntryEvent
from node.store.reader import Fetch
from node.tools.context import ToolContext
from node.tools.timeline import semantic_leg
from node.views import item_reads
from node.views.find import find
from node.views.item_reads import FieldTest, ItemRow
from node.views.items import LANE, MAX_KEY, MAX_TEXT, envelope, item_id, select_item_sr
from node.views.query_terms import query_terms
from node.views.read_rule import may_read_sr
from node.views.timeline import Query
from protocol.errors import PayloadError
from protocol.kinds import encode_payload

__all__ = [
    "FIND_PAGE",
    "Keep",
    "Put",
    "find_items",
    "get_item",
    "get_items_waiting",
    "item_namespaces",
    "put_items",
    "search_items",
]

FIND_PAGE = 100  # the ranks of find read at a time for a search with a query
Keep = Callable[[dict[str, Any]], bool]
Put = tuple[tuple[str, ...], str, Mapping[str, Any] | None]  # namespace, key, value (None: delete)


def _item_text(namespace: Sequence[str], key: str, value: Mapping[str, Any] | None) -> str:
    """The SR text of a put, or ``ValueError`` saying why the value cannot be stored."""
    if not isinstance(key, str) or len(key) > MAX_KEY:
        raise ValueError(f"a key must be text of at most {MAX_KEY} characters")
    if value is not None:
        if not isinstance(value, Mapping):
            raise ValueError(f"a value must be a mapping, not {type(value).__name__}")
        value = dict(value)
        _check_json(value)
    try:
        text = envelope(namespace, key, value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the value is not JSON: {exc}") from exc
    if len(text) > MAX_TEXT:
        raise ValueError(
            f"the value is too large: {len(text):,} characters of JSON, past an SR's {MAX_TEXT:,}"
        )
    return text


def _check_json(value: Any) -> None:
    """JSON's own types, maps keyed by text (``json.dumps`` would turn other keys into text,
    so the value would not come back as it went)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"the value is not JSON: a key {k!r} is not text")
            _check_json(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_json(v)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"the value is not JSON: {value!r} is not a JSON number")


def _payload(caller: Caller, sr_id: str, key: str, text: str, *, create: bool) -> dict[str, Any]:
    base = {"sr_id": sr_id, "workspace": caller.workspace, "principal": caller.principal}
    if not create:
        return base | {"create": False, "title": key, "text": text}
    return base | {
        "create": True,
        "title": key,
        "text": text,
        "lane": LANE,
        "visibility": "workspace",
        "tags": [],
    }


def _encoded(payload: dict[str, Any]) -> bytes:
    try:
        return encode_payload("sr.put", payload)
    except PayloadError as exc:
        raise ValueError(f"the item cannot be stored: {exc.field} {exc.hint}") from exc


async def put_items(ctx: ToolContext, caller: Caller, puts: Sequence[Put]) -> None:
    """Write each put (a delete when its value is None).  Every key and value is checked
    before any is written, and a refusal there writes none; a put the transaction refuses (an
    item private to another principal, an erased item's key) fails alone, and the first such
    refusal is raised once every put has ended.  They are queued together, in order, so they
    share group commits."""
    caller.require("write:workspace")
    texts = [_item_text(ns, key, value) for ns, key, value in puts]
    for text, (ns, key, _) in zip(texts, puts, strict=True):
        _encoded(_payload(caller, item_id(caller.workspace, ns, key), key, text, create=True))
    writes = [
        _put(ctx, caller, ns, key, text) for text, (ns, key, _) in zip(texts, puts, strict=True)
    ]
    done = await asyncio.gather(*writes, return_exceptions=True)  # each put ends, then …
    ctx.written(None)
    for outcome in done:
        if isinstance(outcome, BaseException):
            raise outcome  # … the first refusal is the batch's answer


async def _put(
    ctx: ToolContext, caller: Caller, namespace: Sequence[str], key: str, text: str
) -> None:
    sr_id = item_id(caller.workspace, namespace, key)

    async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
        if sr_id in ctx.store.erasures.srs:
            raise Refusal(_erased(namespace, key))
        known, shown = await select_item_sr(txn, sr_id)
        if shown is not None and not may_read_sr(caller, *shown):
            raise Refusal(_unreadable(namespace, key))
        payload = _payload(caller, sr_id, key, text, create=not known)
        return _encoded(payload), payload

    event = EntryEvent(AuditEvent.SR_WRITTEN, caller.workspace, sr_id, caller.principal)
    await ctx.author.write("sr.put", build, event)


def _erased(namespace: Sequence[str], key: str) -> str:
    # Every node drops what arrives about an erased SR (docs/erasure.md), so a put of its key
    # would show here alone (docs/langgraph.md §Delete is replicated).
    return f"the item {key!r} of {tuple(namespace)!r} was erased: its key cannot be written again"


def _unreadable(namespace: Sequence[str], key: str) -> str:
    # An item made private with e_adjust (docs/langgraph.md §Private items): writing it would
    # fold this principal's value onto an SR it cannot read.
    return f"the item {key!r} of {tuple(namespace)!r} is private to another principal"


async def get_item(
    ctx: ToolContext, caller: Caller, namespace: Sequence[str], key: str
) -> ItemRow | None:
    caller.require("read:workspace")
    await ctx.store.catch_up_views()
    return await item_reads.select_item(ctx.reader(), caller, namespace, key)


def get_items_waiting(
    ctx: ToolContext, token: str, keys: Sequence[tuple[Sequence[str], str]]
) -> list[ItemRow | None] | None:
    """The items at ``keys`` (namespace, key), read by a thread that runs no event loop on
    the reader's own thread — the token checked in the same hop, none through the node's
    loop; or None when a view has a version due (only the loop may bring the views to this
    moment: the caller goes that way instead)."""
    if ctx.store.views_due():
        return None

    def read(fetch: Fetch) -> list[ItemRow | None]:
        caller = tokens.authenticate_in(fetch, token, ctx.store.wall())
        caller.require("read:workspace")
        return [item_reads.fetch_item(fetch, caller, ns, key) for ns, key in keys]

    return ctx.reader().run_waiting(read)


async def search_items(
    ctx: ToolContext,
    caller: Caller,
    prefix: Sequence[str],
    *,
    offset: int,
    limit: int,
    tests: Sequence[FieldTest] = (),
    keep: Keep | None = None,
) -> list[ItemRow]:
    """The items under ``prefix`` that pass ``tests`` (in SQL) and that ``keep`` keeps, the
    newest version first."""
    caller.require("read:workspace")
    await ctx.store.catch_up_views()
    return await item_reads.select_items(
        ctx.reader(), caller, prefix, offset=offset, limit=limit, tests=tests, keep=keep
    )


async def find_items(
    ctx: ToolContext,
    caller: Caller,
    prefix: Sequence[str],
    query: str,
    *,
    offset: int,
    limit: int,
    keep: Keep | None = None,
) -> list[tuple[ItemRow, float]]:
    """The items under ``prefix`` that ``keep`` keeps, in the order e_timeline's find ranks
    their SRs for ``query`` (restricted to the lane), with find's scores."""
    caller.require("read:workspace")
    await ctx.store.catch_up_views()
    reader, terms = ctx.reader(), query_terms(query)
    semantic, _ = await semantic_leg(ctx.vectors, query)
    out: list[tuple[ItemRow, float]] = []
    page, more = 1, True
    while more and len(out) < offset + limit:
        q = Query(caller, lanes=(LANE,), page=page, page_size=FIND_PAGE)
        found, _ = await find(reader, q, terms, True, semantic)
        docs = sorted(found.docs, key=lambda d: int(d["rank"]))
        rows = {
            r.sr_id: r
            for r in await item_reads.select_item_ids(reader, caller, [d["sr_id"] for d in docs])
        }
        for doc in docs:
            row = rows.get(doc["sr_id"])
            if row is not None and _under(row, prefix) and (keep is None or keep(row.value)):
                out.append((row, float(doc["score"])))
        page, more = page + 1, found.has_more
    return out[offset : offset + limit]


def _under(row: ItemRow, prefix: Sequence[str]) -> bool:
    return row.namespace[: len(prefix)] == tuple(prefix)


async def item_namespaces(
    ctx: ToolContext, caller: Caller, prefix: Sequence[str]
) -> list[tuple[str, ...]]:
    """Every namespace under ``prefix`` holding an item the caller can read."""
    caller.require("read:workspace")
    await ctx.store.catch_up_views()
    return await item_reads.select_namespaces(ctx.reader(), caller, prefix)
