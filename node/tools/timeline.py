"""e_timeline (seeds/000): list, find, intersect and traverse over what the caller can read.

Argument checking and the refusal texts live in ``timeline_spec``; the queries in
``node.views.timeline``; ``changes`` is answered by ``node.tools.changes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.authority import Caller
from node.errors import Refusal
from node.store import Reader, Store
from node.tools.changes import changes
from node.tools.timeline_spec import Profile, TimelineSpec, parse_spec
from node.views import timeline as tl
from node.views.fold import SrState
from node.views.srs import terms
from protocol.timefmt import format_instant

__all__ = ["MIN_DENSE", "e_timeline", "render"]

MIN_DENSE = 10  # shed_idf_noise acts only when the caller can read at least this many SRs


async def e_timeline(
    store: Store, caller: Caller, args: Mapping[str, Any], profiles: Mapping[str, Profile]
) -> dict[str, Any]:
    spec = parse_spec(args, profiles)
    caller.require("read:workspace")
    if spec.action == "changes":
        return await changes(store, caller, spec)
    await store.catch_up_views()
    reader = store.reader
    assert reader is not None
    q = tl.Query(caller, spec.order_by, spec.start_ms, spec.end_ms, spec.conversational_only,
                 spec.lanes, spec.page, spec.page_size)  # fmt: skip
    answer: dict[str, Any] = {"action": spec.action}
    if spec.action == "find":
        words, shed = await _shed(reader, caller, _words(spec), spec.shed_idf_noise)
        states, more = await tl.find(reader, q, words)
        answer["shed_terms"] = shed
    elif spec.action == "intersect":
        match, shed = await _shed(reader, caller, list(spec.match), spec.shed_idf_noise)
        conditions = [a for m in match for a in _match_args(m)]
        page = await tl.select_page(reader, q, extra=[_MATCHES] * len(match), extra_args=conditions)
        states, more, answer["shed_terms"] = page.states, page.has_more, shed
    elif spec.action == "traverse":
        states, more = await _traverse(reader, caller, q, spec)
    else:
        page = await tl.select_page(reader, q)
        states, more = page.states, page.has_more
    answer |= {"results": [render(s) for s in states], "page": spec.page,
               "page_size": spec.page_size, "has_more": more}  # fmt: skip
    return answer


_MATCHES = (
    "(srs.sr_id IN (SELECT sr_id FROM sr_tags WHERE tag = ?) "
    "OR srs.doc IN (SELECT rowid FROM sr_fts WHERE sr_fts MATCH ?))"
)


def _match_args(text: str) -> tuple[str, str]:
    """A match string holds as a tag, or as its terms in title, text or tags."""
    phrase = " ".join(terms(text))
    return text, f'"{phrase}"' if phrase else '""'


def _words(spec: TimelineSpec) -> list[str]:
    assert spec.query is not None
    return list(dict.fromkeys(terms(spec.query)))


async def _shed(
    reader: Reader, caller: Caller, items: list[str], enabled: bool
) -> tuple[list[str], list[str]]:
    """Drop the items held by more than ``NOISE_SHARE`` of what the caller can read, when it
    can read at least ``MIN_DENSE`` SRs; the rarest item is always kept."""
    if not enabled or len(items) < 2:
        return items, []
    docs, _ = await tl.scope_stats(reader, caller)
    if docs < MIN_DENSE:
        return items, []
    shares = {item: await tl.term_share(reader, caller, item) for item in items}
    rarest = min(items, key=lambda i: (shares[i], i))
    kept = [i for i in items if i == rarest or shares[i] <= tl.NOISE_SHARE]
    return kept, [i for i in items if i not in kept]


async def _traverse(
    reader: Reader, caller: Caller, q: tl.Query, spec: TimelineSpec
) -> tuple[list[SrState], bool]:
    """SRs linked from the anchor or linking to it (depth 1), that the caller can read."""
    anchor = spec.sr_id
    rule, params = caller.readable_srs()
    found = await reader.scalar(
        f"SELECT count(*) FROM srs WHERE srs.sr_id = ? AND {rule}",  # noqa: S608
        (anchor, *params),
    )
    if not found:
        raise Refusal(f"Invalid timeline spec: unknown sr_id: {anchor}")
    linked = (
        "srs.sr_id != ? AND (srs.sr_id IN (SELECT dst FROM sr_links WHERE src = ?) "
        "OR srs.sr_id IN (SELECT src FROM sr_links WHERE dst = ?))"
    )
    page = await tl.select_page(reader, q, extra=[linked], extra_args=[anchor] * 3)
    return page.states, page.has_more


def _instant(ms: int | None) -> str | None:
    return None if ms is None else format_instant(ms)


def render(state: SrState) -> dict[str, Any]:
    """One result, as seeds/000 names its fields."""
    return {
        "sr_id": state.sr_id,
        "title": state.title,
        "text": state.text,
        "lane": state.lane,
        "lane_uuid": state.effective_lane_uuid,
        "content_time": _instant(state.content_time),
        "ingest_time": _instant(state.ingest_time),
        "created_time": _instant(state.created_time),
        "tags": list(state.tags),
        "conversational": state.conversational,
        "has_correction": state.has_correction,
        "has_adjustment": state.has_adjustment,
    }
