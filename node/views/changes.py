"""What changed between two moments, as one caller sees it (DESIGN §4.2–4.3).

For every SR with an entry or a local deletion in ``(since, as_of]``, its version at each
moment is an index lookup in ``sr_versions`` (each version carries digests of what ``changes``
compares: all fields, the public projection, the links).  States are compared, not events:
written-and-deleted inside the window, or changed and changed back, is no change.  Cost grows
with the SRs touched in the window, not with the store.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from node.authority import Caller
from node.store import Reader
from node.views.fold import COMPARED, SrState
from protocol.canonical import decode_canonical, encode_canonical

__all__ = ["Change", "describe", "select_changes"]


def _key(ms: int) -> bytes:
    """The first fold-order key after every entry of wall ``ms`` (ord starts with the wall)."""
    return (ms + 1).to_bytes(8, "big")


_VERSION_COLS = "v{n}.present, v{n}.workspace, v{n}.owner, v{n}.private, v{n}.full_digest, " \
    "v{n}.public_digest, v{n}.links_digest"  # fmt: skip
_DELETED_AT = (
    "(SELECT d.deleted FROM deletions d WHERE d.sr_id = t.sr_id AND d.hlc_wall <= {m} "
    "ORDER BY d.hlc_wall DESC, d.hlc_counter DESC, d.pos DESC LIMIT 1)"
)
_ORD_AT = (
    "(SELECT v.ord FROM sr_versions v WHERE v.sr_id = t.sr_id AND v.ord < {k} "
    "ORDER BY v.ord DESC LIMIT 1)"
)
_TOUCHED = f"""
WITH touched(sr_id) AS (
    SELECT sr_id FROM sr_versions WHERE wall > :since AND wall <= :as_of
    UNION SELECT sr_id FROM deletions WHERE hlc_wall > :since AND hlc_wall <= :as_of
), at AS (
    SELECT t.sr_id,
        {_ORD_AT.format(k=":since_key")} AS o1, {_ORD_AT.format(k=":as_of_key")} AS o2,
        {_DELETED_AT.format(m=":since")} AS d1, {_DELETED_AT.format(m=":as_of")} AS d2,
        max(coalesce((SELECT max(v.wall) FROM sr_versions v WHERE v.sr_id = t.sr_id
                      AND v.wall > :since AND v.wall <= :as_of), 0),
            coalesce((SELECT max(d.hlc_wall) FROM deletions d WHERE d.sr_id = t.sr_id
                      AND d.hlc_wall > :since AND d.hlc_wall <= :as_of), 0)) AS changed_at
    FROM touched t
)
SELECT at.sr_id, at.changed_at, coalesce(at.d1, 0), coalesce(at.d2, 0),
    {_VERSION_COLS.format(n=1)}, {_VERSION_COLS.format(n=2)}
FROM at
LEFT JOIN sr_versions v1 ON v1.sr_id = at.sr_id AND v1.ord = at.o1
LEFT JOIN sr_versions v2 ON v2.sr_id = at.sr_id AND v2.ord = at.o2
"""  # noqa: S608 - placeholders only


# The links digest of an SR that links to nothing (``fold.digests``).
_NO_LINKS = hashlib.sha256(encode_canonical([])).digest()


@dataclass(frozen=True, slots=True)
class Change:
    sr_id: str
    change: str  # new | updated | deleted | undeleted
    changed_at: int
    fields: tuple[str, ...] = ()
    hidden_change: bool = False
    lane: str = ""
    lane_uuid: str = ""


@dataclass(frozen=True, slots=True)
class _Side:
    visible: bool
    deleted: bool
    digest: bytes
    full: bytes
    links: bytes
    own: bool  # the caller sees private_fields (owner or admin)


def _side(caller: Caller, deleted: int, cols: tuple[Any, ...]) -> _Side:
    present, workspace, owner, private, full, public, links = cols
    visible = bool(present) and caller.may_read_sr(workspace, owner, bool(private))
    own = visible and caller.may_read_private_fields(owner)
    digest = bytes(full if own else public) if visible else b""
    return _Side(visible, bool(deleted), digest, bytes(full or b""), bytes(links or b""), own)


def _classify(a: _Side, b: _Side) -> str | None:
    """The change between the two moments, before fields are looked at; None for none."""
    if not b.visible:
        return None  # unreadable at as_of: omitted
    if not a.visible:
        return None if b.deleted else "new"
    if a.deleted != b.deleted:
        return "deleted" if b.deleted else "undeleted"
    if b.deleted:
        return None
    if a.digest != b.digest or a.links != b.links:
        return "updated"
    if a.full != b.full:
        return "hidden"
    # The same links at both moments, but what the caller can read of them may differ.
    return None if b.links == _NO_LINKS else "links"


async def select_changes(
    reader: Reader, caller: Caller, since: int, as_of: int
) -> list[tuple[int, str, str]]:
    """Every (changed_at, sr_id, change) in the window for ``caller``, newest first (ties by
    sr_id); ``change`` may be ``hidden`` (only what the caller cannot see changed) or
    ``updated`` (to be confirmed by ``describe``, links being filtered per reader)."""
    rows = await reader.fetchall(
        _TOUCHED,
        {"since": since, "as_of": as_of, "since_key": _key(since), "as_of_key": _key(as_of)},
    )
    found = []
    for sr_id, changed_at, d1, d2, *cols in rows:
        change = _classify(_side(caller, d1, tuple(cols[:7])), _side(caller, d2, tuple(cols[7:])))
        if change == "links":
            change = "updated" if await _links_differ(reader, caller, sr_id, since, as_of) else None
        if change is not None:
            found.append((changed_at, sr_id, change))
    found.sort(key=lambda c: (-c[0], c[1]))
    return found


async def describe(
    reader: Reader, caller: Caller, sr_id: str, change: str, changed_at: int, since: int,
    as_of: int,
) -> Change:  # fmt: skip
    """The reported change, with the fields the caller can see changed."""
    before, after = await _state_at(reader, sr_id, since), await _state_at(reader, sr_id, as_of)
    assert after is not None
    lane = (after.lane, after.effective_lane_uuid)
    if change in ("new", "deleted", "undeleted"):
        return Change(sr_id, change, changed_at, lane=lane[0], lane_uuid=lane[1])
    assert before is not None
    fields = await _changed_fields(reader, caller, before, after, since, as_of)
    if fields:
        return Change(sr_id, "updated", changed_at, tuple(fields), lane=lane[0], lane_uuid=lane[1])
    # Nothing the caller can see changed, so something it cannot see did: a private field,
    # or a link to an SR it cannot read.
    return Change(sr_id, "updated", changed_at, hidden_change=True, lane=lane[0],
                  lane_uuid=lane[1])  # fmt: skip


async def _state_at(reader: Reader, sr_id: str, moment: int) -> SrState | None:
    blob = await reader.scalar(
        "SELECT state FROM sr_versions WHERE sr_id = ? AND ord < ? ORDER BY ord DESC LIMIT 1",
        (sr_id, _key(moment)),
    )
    return None if blob is None else SrState.from_doc(decode_canonical(bytes(blob), what="sr"))


async def _changed_fields(
    reader: Reader, caller: Caller, a: SrState, b: SrState, since: int, as_of: int
) -> list[str]:
    own = caller.may_read_private_fields(b.owner or "")
    x, y = a.compared(), b.compared()
    fields = [f for f in COMPARED if f not in ("links", "private_fields") and x[f] != y[f]]
    if own and x["private_fields"] != y["private_fields"]:
        fields.append("private_fields")
    if await _readable_links(reader, caller, a.links, since) != await _readable_links(
        reader, caller, b.links, as_of
    ):
        fields.append("links")
    return sorted(fields, key=COMPARED.index)


async def _links_differ(reader: Reader, caller: Caller, sr_id: str, since: int, as_of: int) -> bool:
    """Whether the caller reads other links of the SR at the two moments (its targets' read
    rule may have changed in between)."""
    before, after = await _state_at(reader, sr_id, since), await _state_at(reader, sr_id, as_of)
    assert before is not None
    assert after is not None
    return await _readable_links(reader, caller, before.links, since) != await _readable_links(
        reader, caller, after.links, as_of
    )


async def _readable_links(
    reader: Reader, caller: Caller, links: tuple[str, ...], moment: int
) -> list[str]:
    kept = []
    for target in links:
        state = await _state_at(reader, target, moment)
        visible = (
            state is not None
            and state.exists
            and caller.may_read_sr(
                state.workspace or "", state.owner or "", state.visibility == "private"
            )
        )
        if visible:
            kept.append(target)
    return kept
