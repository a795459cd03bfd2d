"""An SR as e_timeline shows it: its result fields (docs/tools/e_timeline.md §Results), made
when the SR view writes the SR's current row and stored in it (``srs.shown``), so a page of
results is read and decoded, never rendered.  Instants are spelled in UTC, the same on every
node.
"""

from __future__ import annotations

from typing import Any

import msgpack

from node.views.fold import SrState
from protocol.timefmt import format_instant

__all__ = ["instant", "shown", "shown_blob", "shown_from_blob"]

_DAY_MS = 86_400_000
_HH_MM = [f"T{h:02d}:{m:02d}:" for h in range(24) for m in range(60)]
_SS = [f"{s:02d}" for s in range(60)]
_DATES: dict[int, str] = {}  # day since the epoch → YYYY-MM-DD
_MAX_DATES = 65_536


def instant(ms: int | None) -> str | None:
    """``format_instant(ms)`` (UTC), with the date spelled once per day: every SR written
    spells three instants."""
    if ms is None:
        return None
    days = ms // _DAY_MS
    date = _DATES.get(days)
    if date is None:
        if len(_DATES) >= _MAX_DATES:
            _DATES.clear()
        date = _DATES[days] = format_instant(days * _DAY_MS)[: -len("T00:00:00Z")]
    rem = ms - days * _DAY_MS
    secs = rem // 1000
    frac = rem - secs * 1000
    if frac:
        return f"{date}{_HH_MM[secs // 60]}{_SS[secs % 60]}.{frac:03d}".rstrip("0") + "Z"
    return f"{date}{_HH_MM[secs // 60]}{_SS[secs % 60]}Z"


def shown(state: SrState) -> dict[str, Any]:
    """One result, its fields as e_timeline's specification names them, then who wrote it:
    ``caller``, the principal that created it (its owner, as an episode's ``caller`` is the
    principal that recorded it), and ``node_id``, the node that wrote its current version
    (docs/tools/e_timeline.md §Results)."""
    ingest = instant(state.ingest_time)
    return {
        "sr_id": state.sr_id,
        "title": state.title,
        "text": state.text,
        "lane": state.lane,
        "lane_uuid": state.effective_lane_uuid,
        "content_time": instant(state.content_time),
        "ingest_time": ingest,
        "created_time": ingest
        if state.created_time == state.ingest_time
        else instant(state.created_time),
        "tags": list(state.tags),
        "conversational": state.conversational,
        "has_correction": state.has_correction,
        "has_adjustment": state.has_adjustment,
        "caller": state.owner,
        "node_id": state.node_id,
    }


def shown_blob(state: SrState) -> bytes:
    """``shown(state)`` as ``srs.shown`` stores it (msgpack; read back with a plain decode)."""
    blob: bytes = msgpack.packb(shown(state), use_bin_type=True)
    return blob


def shown_from_blob(blob: bytes) -> dict[str, Any]:
    """An SR as e_timeline shows it, as the SR view stored it (``shown_blob``): written here,
    never received, so a plain decode reads it."""
    doc: dict[str, Any] = msgpack.unpackb(blob, raw=False)
    return doc
