"""A record's versions as one caller may see them (the look ``sr_history``, docs/web.md
§Pages): each version of ``sr_versions`` in the fold's order, with the entry that made it —
its kind (a write, a correction, an adjustment), the principal its payload names, the node
whose log holds it.

What the caller is shown follows e_timeline's ``changes``, which compares the states at two
moments and never what lies between: a version it could not read (the SR private to another
then, or not yet written) is not shown and not counted — the read rule is applied in the query,
before the newest ``MAX_VERSIONS`` are taken — and each version it reads is compared with the
one it read before, so a run of versions hidden from it leaves no mark (a sticky flag they set
shows as it shows on the current state).  A version whose difference from that one lies only in
what it cannot read (a private field, a link to an SR it cannot read) is shown as changed in
what it cannot see, without content (``changes``' hidden change); one that changes nothing
compared shows no change.  Private fields only to their owner or an admin; links only to SRs it
can read now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from node.access.callers import Caller
from node.identity import node_id
from node.store import Origin, Reader
from node.views.fold import COMPARED, SrState
from node.views.read_rule import readable_scopes, readable_srs
from node.views.shown import instant
from node.views.sr_queries import select_readable
from protocol.canonical import decode_canonical
from protocol.kinds import decode_payload

__all__ = ["MAX_VERSIONS", "History", "select_history"]

MAX_VERSIONS = 500  # the newest shown; older ones are counted as earlier
# The versions the caller may read, newest first; {rule} is the read rule over the table's own
# columns (``readable_scopes``), applied before the limit.
_VERSIONS = """
SELECT wall, state, full_digest, links_digest, pos FROM sr_versions
WHERE sr_id = ? AND wall <= ? AND present = 1 AND {rule} ORDER BY ord DESC LIMIT ?
"""
_KINDS = {"sr.put": "written", "sr.correct": "corrected", "sr.adjust": "adjusted"}
# The fields a version is shown changing: the compared ones but the flags a correction or an
# adjustment sets, which its kind already says.
_SHOWN_CHANGING = tuple(f for f in COMPARED if f not in ("has_correction", "has_adjustment"))


@dataclass(frozen=True, slots=True)
class _Read:
    seen: dict[str, Any]  # what the caller reads of one version (``_seen``)
    full: bytes  # its digests (``fold.digests``): every compared field but links
    links: bytes


@dataclass(frozen=True, slots=True)
class History:
    current: dict[str, Any]  # as e_timeline's results show the SR
    versions: list[dict[str, Any]]  # oldest first
    earlier: bool  # versions older than the first shown exist


async def select_history(reader: Reader, caller: Caller, sr_id: str, now: int) -> History | None:
    """The SR's history for ``caller``; None unless it may read the SR at this moment."""
    rule, params = readable_srs(caller)
    blob = await reader.scalar(
        f"SELECT shown FROM srs WHERE sr_id = ? AND {rule}",  # noqa: S608
        (sr_id, *params),
    )
    if blob is None:
        return None
    rows = await _select_readable(reader, caller, sr_id, now)
    earlier = len(rows) > MAX_VERSIONS
    rows = rows[:MAX_VERSIONS][::-1]
    states = [_state(row[1]) for row in rows]
    readable = await _readable_targets(reader, caller, states)
    origins = await reader.select_origins([row[4] for row in rows])
    versions: list[dict[str, Any]] = []
    before: _Read | None = None
    for row, state in zip(rows, states, strict=True):
        read = _Read(_seen(caller, state, readable), bytes(row[2]), bytes(row[3]))
        versions.append(_version(row[0], origins.get(row[4]), read, before))
        before = read
    return History(msgpack.unpackb(blob, raw=False), versions, earlier)


async def _select_readable(reader: Reader, caller: Caller, sr_id: str, now: int) -> list[Any]:
    """The newest ``MAX_VERSIONS + 1`` versions ``caller`` may read, newest first."""
    rule, params = readable_scopes(caller)
    return await reader.fetchall(
        _VERSIONS.format(rule=rule), (sr_id, now, *params, MAX_VERSIONS + 1)
    )


def _state(blob: Any) -> SrState:
    return SrState.from_doc(decode_canonical(bytes(blob), what="sr"))


async def _readable_targets(reader: Reader, caller: Caller, states: list[SrState]) -> set[str]:
    """The SRs the versions link to that the caller can read now."""
    return await select_readable(reader, caller, sorted({t for s in states for t in s.links}))


def _seen(caller: Caller, state: SrState, readable: set[str]) -> dict[str, Any]:
    """What ``caller`` reads of one version: the compared fields, links it can read, private
    fields for their owner or an admin only."""
    fields = state.compared()
    fields["links"] = [t for t in state.links if t in readable]
    if not caller.may_read_private_fields(state.owner or ""):
        del fields["private_fields"]
    fields["content_time"] = instant(state.content_time)
    return fields


def _version(wall: int, origin: Origin | None, read: _Read, before: _Read | None) -> dict[str, Any]:
    """One version as shown: who, when, on which node (from the entry that made it, its
    ``origin``), and what changed from the version the caller read before it — each changed
    field's value before (``was``) and after (``state``); by the digests, something it cannot
    see when nothing it sees did."""
    kind = origin.kind if origin is not None else None
    writer = origin.writer if origin is not None else None
    principal = None
    if origin is not None and origin.payload is not None:
        principal = decode_payload(origin.kind, origin.payload).get("principal")
    changed = (
        []
        if before is None
        else [f for f in _SHOWN_CHANGING if f in read.seen and before.seen.get(f) != read.seen[f]]
    )
    unseen = before is not None and (before.full, before.links) != (read.full, read.links)
    return {
        "at": instant(wall),
        "kind": _KINDS.get(kind or "", kind),
        "by": principal,
        "node_id": node_id(writer) if writer is not None else None,
        "first": before is None,
        "fields": changed,
        "was": {} if before is None else {f: before.seen.get(f) for f in changed},
        "hidden_change": unseen and not changed,
        "state": read.seen,
    }
