"""e_timeline (docs/tools/e_timeline.md): list, find, intersect and traverse over what the caller
can read.

Argument checking and the refusal texts live in ``timeline_spec``; the queries in
``node.views.timeline``; ``changes`` is answered by ``node.tools.changes``.  ``checked_spec``
raises every refusal of the tool's own before it reads anything, so the window guard can
check a call before it files its row (docs/time-windows.md, decision 5).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from node.access.callers import Caller
from node.errors import EmbedderError, EmbedderUnavailable, Refusal
from node.logging import get_logger
from node.store import Reader, Store
from node.tools.changes import changes
from node.tools.context import ToolContext
from node.tools.timeline_spec import (
    SINCE_BEFORE_AS_OF,
    Profile,
    TimelineSpec,
    closed_at,
    invalid,
    parse_spec,
)
from node.views import sr_queries
from node.views import timeline as tl
from node.views.find import Semantic, find
from node.views.query_terms import query_terms
from node.views.timeline import MIN_DENSE

if TYPE_CHECKING:  # numpy and the embedders load only where an embedder is configured
    from node.search.index import VectorIndex

__all__ = [
    "MIN_DENSE",
    "QUERY_TIMEOUT",
    "checked_spec",
    "e_timeline",
    "run",
    "semantic_leg",
    "window_field",
]

QUERY_TIMEOUT = 2.0  # seconds find waits for its query's vector before BM25 answers alone

log = get_logger(__name__)


async def e_timeline(ctx: ToolContext, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """The tool: ``turn`` among ``args`` is the turn's context (docs/time-windows.md); with it
    the call's window is filed, and the call may be filled or refused before dispatch."""
    sent = {name: value for name, value in args.items() if name != "turn"}
    store, profiles, zone = ctx.store, ctx.profiles, ctx.windows.zone

    async def run_at(values: Mapping[str, Any], now: int | None) -> dict[str, Any]:
        return await run(store, caller, values, profiles, zone, ctx.vectors, now)

    async def check(values: Mapping[str, Any], now: int) -> object:
        return await checked_spec(store, caller, values, profiles, zone, now)

    return await ctx.windows.call(
        caller,
        "e_timeline",
        sent,
        args.get("turn"),
        run=run_at,
        check=check,
        trim_field=window_field,
    )


async def run(
    store: Store,
    caller: Caller,
    args: Mapping[str, Any],
    profiles: Mapping[str, Profile],
    zone: ZoneInfo | None = None,
    vectors: VectorIndex | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """One call as it runs: ``now`` is the turn's clock the call runs at (None: the node's;
    see ``closed_at``)."""
    spec = await checked_spec(store, caller, args, profiles, zone, now)
    if spec.action == "changes":
        return await changes(store, caller, spec)
    await store.catch_up_views()
    reader = store.reader
    assert reader is not None
    q = tl.Query(
        caller,
        spec.order_by,
        spec.start_ms,
        spec.end_ms,
        spec.conversational_only,
        spec.lanes,
        spec.page,
        spec.page_size,
    )
    answer: dict[str, Any] = {"action": spec.action}
    if spec.action == "find":
        found = query_terms(spec.query or "")
        semantic, said = await semantic_leg(vectors, spec.query or "")
        page, shed = await find(reader, q, found, spec.shed_idf_noise, semantic)
        docs, more, answer["shed_terms"] = page.docs, page.has_more, shed
        if page.pending is not None:
            answer |= said | {"semantic_pending": page.pending}
    elif spec.action == "intersect":
        match, shed = await _shed(reader, caller, list(spec.match), spec.shed_idf_noise)
        page = await tl.intersect(reader, q, match)
        docs, more, answer["shed_terms"] = page.docs, page.has_more, shed
    elif spec.action == "traverse":
        docs, more = await _traverse(reader, q, str(spec.sr_id))
    else:
        page = await tl.select_page(reader, q)
        docs, more = page.docs, page.has_more
    answer |= {"results": docs, "page": spec.page, "page_size": spec.page_size, "has_more": more}
    return answer


async def checked_spec(
    store: Store,
    caller: Caller,
    args: Mapping[str, Any],
    profiles: Mapping[str, Profile],
    zone: ZoneInfo | None = None,
    now: int | None = None,
) -> TimelineSpec:
    """The spec the call runs with, or the tool's own refusal: its arguments, the read scope,
    a ``since`` not before the moment ``changes`` reads to, and a ``traverse`` anchor the
    caller cannot read — answered exactly like an unknown one."""
    spec = closed_at(parse_spec(args, profiles, zone), now)
    caller.require("read:workspace")
    if spec.action == "changes":
        _check_since(spec, store.now_ms())
    elif spec.action == "traverse":
        await store.catch_up_views()  # an anchor whose time has just come is known
        assert store.reader is not None
        await _check_anchor(store.reader, caller, str(spec.sr_id))
    return spec


def _check_since(spec: TimelineSpec, moment: int) -> None:
    as_of = moment if spec.as_of_ms is None else spec.as_of_ms
    if spec.since_ms is not None and spec.since_ms >= as_of:
        raise Refusal(SINCE_BEFORE_AS_OF)


async def _check_anchor(reader: Reader, caller: Caller, anchor: str) -> None:
    if not await sr_queries.has_readable(reader, caller, anchor):
        raise invalid(f"unknown sr_id: {anchor}")


async def semantic_leg(
    vectors: VectorIndex | None, text: str
) -> tuple[Semantic | None, dict[str, Any]]:
    """The vector leg of a find, and what the answer says of it: whether it ranked this
    answer, and if not, why — an embedder that is down, or slower than ``QUERY_TIMEOUT``
    (or ``[search] timeout``, if shorter), leaves the answer to BM25; it never holds it up."""
    if vectors is None:
        return None, {}
    wait = min(QUERY_TIMEOUT, vectors.timeout)
    try:
        async with asyncio.timeout(wait):
            query = await vectors.query(text)
    except (EmbedderError, TimeoutError) as exc:
        vectors.fallbacks += 1
        log.warning("semantic_fallback", error=str(exc) or "timeout", waited_s=wait)
        return Semantic(None, vectors.weight, vectors.queued), {
            "semantic_used": False,
            "semantic_error": _why(exc, wait),
        }
    return Semantic(vectors.nearest(query), vectors.weight, vectors.queued), {"semantic_used": True}


def _why(exc: Exception, wait: float) -> str:
    """What the answer says of a fallback: the embedder's own failure only by its kind (its
    text may name an endpoint the agent has no business knowing; the node's log has it)."""
    if isinstance(exc, TimeoutError):
        return f"the embedder took longer than {wait:g} s"
    if isinstance(exc, EmbedderUnavailable):
        return "the embedder is unavailable (the node's log says why)"
    return str(exc)


def window_field(args: Mapping[str, Any]) -> str:
    """The result field a window bounds: the time the action orders by."""
    order = args.get("order_by")
    return (
        "content_time" if isinstance(order, str) and order.startswith("content") else "ingest_time"
    )


async def _shed(
    reader: Reader, caller: Caller, items: list[str], enabled: bool
) -> tuple[list[str], list[str]]:
    """Drop the items held by more than ``NOISE_SHARE`` of what the caller can read, when it
    can read at least ``MIN_DENSE`` SRs; the rarest item some SR holds is always kept."""
    if not enabled or len(items) < 2:
        return items, []
    docs, _ = await tl.scope_stats(reader, caller)
    if docs < MIN_DENSE:
        return items, []
    shares = {item: await tl.term_share(reader, caller, item) for item in items}
    held = [i for i in items if shares[i] > 0] or items  # an item nothing holds finds nothing
    rarest = min(held, key=lambda i: (shares[i], i))
    kept = [i for i in items if i == rarest or shares[i] <= tl.NOISE_SHARE]
    return kept, [i for i in items if i not in kept]


async def _traverse(reader: Reader, q: tl.Query, anchor: str) -> tuple[list[tl.Doc], bool]:
    """SRs linked from the (checked) anchor or linking to it (depth 1), that the caller can
    read."""
    page = await sr_queries.select_linked(reader, q, anchor)
    return page.docs, page.has_more
