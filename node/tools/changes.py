"""e_timeline action=changes (docs/tools/e_timeline.md §changes): what changed between two moments.

The moments are the writers' clocks, so every node holding the same entries answers the same
(local deletions aside).  Every page reads the same window: page 1 answers the ``as_of`` it
used, later pages must pass it back (checked in ``timeline_spec``); nothing is kept between
calls.  Entries that arrive late can change the answer for a past window — ``e_audit`` is the
catch-up feed.
"""

from __future__ import annotations

from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.store import Store
from node.tools.timeline_spec import TimelineSpec
from node.views.changes import Change, describe, select_changes
from protocol.timefmt import format_instant

__all__ = ["changes"]


async def changes(store: Store, caller: Caller, spec: TimelineSpec) -> dict[str, Any]:
    assert spec.since_ms is not None
    assert store.reader is not None
    as_of = store.now_ms() if spec.as_of_ms is None else spec.as_of_ms
    if spec.since_ms >= as_of:
        raise Refusal("'since' must be before 'as_of'")
    start = (spec.page - 1) * spec.page_size
    found, more = await select_changes(
        store.reader, caller, spec.since_ms, as_of, need=start + spec.page_size
    )
    page = await describe(store.reader, caller, found[start:], spec.since_ms, as_of)
    return {
        "action": "changes",
        "since": format_instant(spec.since_ms),
        "as_of": format_instant(as_of),
        "changes": [_render(c) for c in page],
        "page": spec.page,
        "page_size": spec.page_size,
        "has_more": more,
    }


def _render(c: Change) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sr_id": c.sr_id,
        "change": c.change,
        "changed_at": format_instant(c.changed_at),
    }
    if c.change == "updated":
        out |= {"hidden_change": True} if c.hidden_change else {"fields": list(c.fields)}
    return out | {
        "lane": c.lane,
        "lane_uuid": c.lane_uuid,
        "has_correction": c.has_correction,
        "has_adjustment": c.has_adjustment,
        "caller": c.caller,
        "node_id": c.node_id,
    }
