"""What changed between two moments, as one caller sees it (DESIGN §4.2–4.3).

For every SR with an entry or a local deletion in ``(since, as_of]``, its version at each
moment is an index lookup in ``sr_versions`` (each version carries digests of what ``changes``
compares: all fields, the public projection, the links).  States are compared, not events:
written-and-deleted inside the window, or changed and changed back, is no change.  Cost grows
with the SRs touched in the window, not with the store.
"""

from __future__ import annotations

import hashlib
import json
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
# The SRs touched in the window, newest change first: cheap (the wall index), one row each.
_TOUCHED = """
SELECT sr_id, max(w) AS changed_at FROM (
    SELECT sr_id, wall AS w FROM sr_versions WHERE wall > :since AND wall <= :as_of
    UNION ALL
    SELECT sr_id, hlc_wall FROM deletions WHERE hlc_wall > :since AND hlc_wall <= :as_of
) GROUP BY sr_id ORDER BY changed_at DESC, sr_id
"""
# Their states at both moments, for one chunk of them.
_STATES = f"""
WITH t(sr_id) AS (SELECT value FROM json_each(:ids)), at AS (
    SELECT t.sr_id,
        {_ORD_AT.format(k=":since_key")} AS o1, {_ORD_AT.format(k=":as_of_key")} AS o2,
        {_DELETED_AT.format(m=":since")} AS d1, {_DELETED_AT.format(m=":as_of")} AS d2
    FROM t
)
SELECT at.sr_id, coalesce(at.d1, 0), coalesce(at.d2, 0),
    {_VERSION_COLS.format(n=1)}, {_VERSION_COLS.format(n=2)}
FROM at
LEFT JOIN sr_versions v1 ON v1.sr_id = at.sr_id AND v1.ord = at.o1
LEFT JOIN sr_versions v2 ON v2.sr_id = at.sr_id AND v2.ord = at.o2
"""  # noqa: S608 - placeholders only
_CHUNK = 256


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
    reader: Reader, caller: Caller, since: int, as_of: int, need: int
) -> tuple[list[tuple[int, str, str]], bool]:
    """The first ``need`` (changed_at, sr_id, change) in the window for ``caller``, newest
    first (ties by sr_id), and whether more exist.  SRs are classified in that order, a
    chunk at a time, so a page costs what comes before it, not the whole window.
    ``change`` may be ``hidden`` (only what the caller cannot see changed)."""
    window = {"since": since, "as_of": as_of, "since_key": _key(since), "as_of_key": _key(as_of)}
    touched = await reader.fetchall(_TOUCHED, window)
    found: list[tuple[int, str, str]] = []
    for start in range(0, len(touched), _CHUNK):
        chunk = touched[start : start + _CHUNK]
        rows = await reader.fetchall(_STATES, window | {"ids": json.dumps([r[0] for r in chunk])})
        states = {r[0]: r for r in rows}
        for sr_id, changed_at in chunk:
            change = await _change_of(reader, caller, states[sr_id], since, as_of)
            if change is not None:
                found.append((changed_at, sr_id, change))
                if len(found) > need:
                    return found[:need], True
    return found, False


async def _change_of(
    reader: Reader, caller: Caller, row: Any, since: int, as_of: int
) -> str | None:
    sr_id, d1, d2, *cols = row
    change = _classify(_side(caller, d1, tuple(cols[:7])), _side(caller, d2, tuple(cols[7:])))
    if change == "links":
        return "updated" if await _links_differ(reader, caller, sr_id, since, as_of) else None
    return change


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
