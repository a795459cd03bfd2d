"""A record's versions as one caller may see them (the look ``sr_history``, docs/web.md
§Pages): each version of ``sr_versions`` in the fold's order, with the entry that made it —
its kind (a write, a correction, an adjustment), the principal its payload names, the node
whose log holds it.

What the caller is shown follows e_timeline's ``changes``: a version it could not read (the SR
private to another then, or not yet written) is not shown at all; a version it reads whose
difference from the one before lies only in what it cannot read (a private field, a link to an
SR it cannot read) is shown as changed in what it cannot see, without content; private fields
only to their owner or an admin; links only to SRs it can read now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from node.access.callers import Caller
from node.identity import node_id
from node.store import Reader
from node.views.fold import COMPARED, SrState
from node.views.read_rule import may_read_sr, readable_srs
from node.views.shown import instant
from protocol.canonical import decode_canonical
from protocol.kinds import decode_payload

__all__ = ["MAX_VERSIONS", "History", "select_history"]

MAX_VERSIONS = 500  # the newest shown; older ones are counted as earlier
_VERSIONS = """
SELECT v.wall, v.state, v.present, v.workspace, v.owner, v.private, h.kind, p.data, l.writer
FROM sr_versions v LEFT JOIN headers h ON h.pos = v.pos LEFT JOIN payloads p ON p.pos = v.pos
LEFT JOIN logs l ON l.log_id = h.log_id
WHERE v.sr_id = ? AND v.wall <= ? ORDER BY v.ord DESC LIMIT ?
"""
_KINDS = {"sr.put": "written", "sr.correct": "corrected", "sr.adjust": "adjusted"}


@dataclass(frozen=True, slots=True)
class History:
    current: dict[str, Any]  # as e_timeline's results show the SR
    versions: list[dict[str, Any]]  # oldest first
    earlier: bool  # versions older than the first shown exist


async def select_history(reader: Reader, caller: Caller, sr_id: str, now: int) -> History | None:
    """The SR's history for ``caller``; None unless it may read the SR at this moment."""
    rule, params = readable_srs(caller)
    blob = await reader.scalar(f"SELECT shown FROM srs WHERE sr_id = ? AND {rule}",  # noqa: S608
                               (sr_id, *params))  # fmt: skip
    if blob is None:
        return None
    rows = await reader.fetchall(_VERSIONS, (sr_id, now, MAX_VERSIONS + 1))
    earlier = len(rows) > MAX_VERSIONS
    readable = await _readable_targets(reader, caller, rows[:MAX_VERSIONS])
    versions, before = [], None
    for row in reversed(rows[:MAX_VERSIONS]):
        _, state_blob, present, workspace, owner, private, *_ = row
        if not (present and may_read_sr(caller, workspace, owner, bool(private))):
            before = None  # unseen: the next one it reads is shown as it stands
            continue
        state = _state(state_blob)
        seen = _seen(caller, state, readable)
        versions.append(_version(row, seen, before))
        before = seen
    return History(msgpack.unpackb(blob, raw=False), versions, earlier)


def _state(blob: Any) -> SrState:
    return SrState.from_doc(decode_canonical(bytes(blob), what="sr"))


async def _readable_targets(reader: Reader, caller: Caller, rows: list[Any]) -> set[str]:
    """The SRs the versions link to that the caller can read now."""
    targets = sorted({t for row in rows for t in _state(row[1]).links})
    if not targets:
        return set()
    rule, params = readable_srs(caller)
    marks = ",".join("?" * len(targets))
    found = await reader.fetchall(
        f"SELECT sr_id FROM srs WHERE sr_id IN ({marks}) AND {rule}",  # noqa: S608
        (*targets, *params),
    )
    return {r[0] for r in found}


def _seen(caller: Caller, state: SrState, readable: set[str]) -> dict[str, Any]:
    """What ``caller`` reads of one version: the compared fields, links it can read, private
    fields for their owner or an admin only."""
    fields = state.compared()
    fields["links"] = [t for t in state.links if t in readable]
    if not caller.may_read_private_fields(state.owner or ""):
        del fields["private_fields"]
    fields["content_time"] = instant(state.content_time)
    return fields


def _version(row: Any, seen: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any]:
    wall, *_, kind, data, writer = row
    principal = None
    if kind is not None and data is not None:
        principal = decode_payload(kind, bytes(data)).get("principal")
    changed = [f for f in COMPARED if f in seen and (before is None or before.get(f) != seen[f])]
    return {
        "at": instant(wall), "kind": _KINDS.get(kind or "", kind), "by": principal,
        "node_id": node_id(bytes(writer)) if writer is not None else None,
        "first": before is None, "fields": changed if before is not None else [],
        "hidden_change": before is not None and not changed, "state": seen,
    }  # fmt: skip
