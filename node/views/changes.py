"""What changed between two moments, as one caller sees it (docs/tools/e_timeline.md §changes).

For every SR with an entry or a local deletion in ``(since, as_of]``, its version at each
moment is an index lookup in ``sr_versions`` (each version carries digests of what ``changes``
compares: all fields, the public projection, the links).  States are compared, not events:
written-and-deleted inside the window, or changed and changed back, is no change.

The touched SRs are found newest first by walking the wall index down from ``as_of`` and
classified a chunk at a time, so page N costs the SRs up to its end (about N·page_size), not
the whole window and not the store; a page's SRs are then described with their states and
their links' targets read in one query each.  The window's local deletions are read with one
scan of ``deletions`` (it has no index on their time), so that part grows with the deletions
stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.views.fold import COMPARED, SrState
from node.views.items import is_tombstone
from node.views.read_rule import may_read_sr
from protocol.canonical import decode_canonical, encode_canonical

__all__ = ["Change", "changed_values", "describe", "select_changes", "titles_at"]


def _key(ms: int) -> bytes:
    """The first fold-order key after every entry of wall ``ms`` (ord starts with the wall)."""
    return (ms + 1).to_bytes(8, "big")


_VERSION_COLS = (
    "v{n}.present, v{n}.workspace, v{n}.owner, v{n}.private, v{n}.full_digest, "
    "v{n}.public_digest, v{n}.links_digest"
)
_DELETED_AT = (
    "(SELECT d.deleted FROM deletions d WHERE d.sr_id = t.sr_id AND d.hlc_wall <= {m} "
    "ORDER BY d.hlc_wall DESC, d.hlc_counter DESC, d.pos DESC LIMIT 1)"
)
_ORD_AT = (
    "(SELECT v.ord FROM sr_versions v WHERE v.sr_id = t.sr_id AND v.ord < {k} "
    "ORDER BY v.ord DESC LIMIT 1)"
)
# The window's entries newest first, a batch at a time: a descending walk of the wall index
# (``sr_versions_wall`` holds the primary key, so it covers the query).  ``below`` is exclusive.
_WALK = (
    "SELECT wall, sr_id FROM sr_versions WHERE wall > :since AND wall < :below "
    "ORDER BY wall DESC LIMIT :limit"
)
# Every entry of one wall (when a batch holds nothing but that wall).
_AT_WALL = "SELECT wall, sr_id FROM sr_versions WHERE wall = :wall"
# The window's local deletions, all at once (there is no index on their time: a scan).
_DELETIONS = "SELECT hlc_wall, sr_id FROM deletions WHERE hlc_wall > :since AND hlc_wall <= :as_of"
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
_CHUNK = 256  # SRs classified at most per read
_FIRST = 64  # ... and at least
# Both states of some SRs (for describing a page and the targets of their links).
_BOTH_STATES = """
SELECT t.value,
    (SELECT v.state FROM sr_versions v WHERE v.sr_id = t.value AND v.ord < :since_key
     ORDER BY v.ord DESC LIMIT 1),
    (SELECT v.state FROM sr_versions v WHERE v.sr_id = t.value AND v.ord < :as_of_key
     ORDER BY v.ord DESC LIMIT 1)
FROM json_each(:ids) t
"""


# The links digest of an SR that links to nothing (``fold.digests``).
_NO_LINKS = hashlib.sha256(encode_canonical([])).digest()


@dataclass(frozen=True, slots=True)
class Change:
    sr_id: str
    change: str  # new | updated | deleted | undeleted
    changed_at: int
    fields: tuple[str, ...] = ()
    hidden_change: bool = False
    # The SR at as_of, as the other actions' results show it (docs/tools/e_timeline.md
    # §Results): its lane, its sticky correction / adjustment flags, its owner and the node
    # that wrote its version at as_of.  A deleted SR's are those of its fold at as_of —
    # deletion is local and leaves the fold alone, so nodes with the same entries agree.
    lane: str = ""
    lane_uuid: str = ""
    has_correction: bool = False
    has_adjustment: bool = False
    caller: str | None = None
    node_id: str | None = None


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
    visible = bool(present) and may_read_sr(caller, workspace, owner, bool(private))
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


class _Walk:
    """The SRs touched in the window — an entry or a local deletion in ``(since, as_of]`` —
    newest change first, ties by sr_id, each once with its newest (its ``changed_at``).

    The wall index is walked downwards a batch at a time; the window's deletions are read
    once and merged in.  Walking ``(wall DESC)`` and keeping each SR where it first appears
    gives exactly ``ORDER BY max(wall) DESC, sr_id``, provided the SRs first seen at one wall
    are sorted together: a batch therefore ends on a whole wall."""

    def __init__(self, reader: Reader, since: int, as_of: int, *, least: int = _FIRST) -> None:
        self._reader = reader
        self._least = least  # the smallest batch read from the wall index
        self._since = since
        self._as_of = as_of
        self._below = as_of + 1  # every wall at or above this has been handed to the buffer
        self._deletions: list[tuple[int, str]] | None = None  # newest first
        self._next_deletion = 0
        self._seen: set[str] = set()
        self._ready: list[tuple[str, int]] = []
        self.done = False

    async def take(self, n: int) -> list[tuple[str, int]]:
        """The next (at most) ``n`` SRs, as (sr_id, changed_at)."""
        while len(self._ready) < n and self._below > self._since + 1:
            await self._step(max(2 * n, self._least))
        out, self._ready = self._ready[:n], self._ready[n:]
        self.done = not self._ready and self._below <= self._since + 1
        return out

    async def _step(self, limit: int) -> None:
        if self._deletions is None:
            rows = await self._reader.fetchall(
                _DELETIONS, {"since": self._since, "as_of": self._as_of}
            )
            self._deletions = sorted(((w, sr_id) for w, sr_id in rows), reverse=True)
        args = {"since": self._since, "below": self._below, "limit": limit}
        rows = await self._reader.fetchall(_WALK, args)
        if len(rows) < limit:
            low = self._since + 1  # the rest of the window
        elif rows[0][0] == rows[-1][0]:
            low = rows[-1][0]  # one wall fills the batch: take all of that wall
            rows = await self._reader.fetchall(_AT_WALL, {"wall": low})
        else:
            low = rows[-1][0] + 1  # the lowest wall may be cut: leave it to the next batch
            rows = [r for r in rows if r[0] >= low]
        gone = self._deletions
        while self._next_deletion < len(gone) and gone[self._next_deletion][0] >= low:
            rows.append(gone[self._next_deletion])
            self._next_deletion += 1
        by_wall: dict[int, set[str]] = {}
        for wall, sr_id in rows:
            by_wall.setdefault(wall, set()).add(sr_id)
        for wall in sorted(by_wall, reverse=True):
            fresh = sorted(by_wall[wall] - self._seen)
            self._seen.update(fresh)
            self._ready.extend((sr_id, wall) for sr_id in fresh)
        self._below = low


async def select_changes(
    reader: Reader, caller: Caller, since: int, as_of: int, need: int
) -> tuple[list[tuple[int, str, str]], bool]:
    """The first ``need`` (changed_at, sr_id, change) in the window for ``caller``, newest
    first (ties by sr_id), and whether more exist.  SRs are found and classified in that
    order, a chunk at a time, so a page costs what comes before it, not the whole window.
    ``change`` may be ``hidden`` (only what the caller cannot see changed)."""
    window = {"since": since, "as_of": as_of, "since_key": _key(since), "as_of_key": _key(as_of)}
    walk = _Walk(reader, since, as_of)
    found: list[tuple[int, str, str]] = []
    while not walk.done:
        chunk = await walk.take(min(_CHUNK, max(_FIRST, need + 1 - len(found))))
        if not chunk:
            break
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


_Both = dict[str, tuple[SrState | None, SrState | None]]


async def describe(
    reader: Reader, caller: Caller, found: list[tuple[int, str, str]], since: int, as_of: int
) -> list[Change]:
    """The reported changes of ``found`` ((changed_at, sr_id, change), as ``select_changes``
    gives them), with the fields the caller can see changed.  Their states at both moments
    are read at once, then the states of their links' targets at once."""
    states = await _states(reader, [sr_id for _, sr_id, _ in found], since, as_of)
    compared = [
        (sr_id, states[sr_id])
        for _, sr_id, change in found
        if change not in ("new", "deleted", "undeleted")
    ]
    targets = {t for _, (a, b) in compared for s in (a, b) if s is not None for t in s.links}
    linked = await _states(reader, sorted(targets), since, as_of)
    out = []
    for changed_at, sr_id, change in found:
        before, after = states[sr_id]
        assert after is not None
        shown = _shown_at_as_of(after)
        if change in ("new", "deleted", "undeleted"):
            out.append(Change(sr_id, change, changed_at, **shown))
            continue
        assert before is not None
        fields = _changed_fields(caller, before, after, linked)
        if fields:
            out.append(Change(sr_id, "updated", changed_at, tuple(fields), **shown))
        else:
            # Nothing the caller can see changed, so something it cannot see did: a private
            # field, or a link to an SR it cannot read.
            out.append(Change(sr_id, "updated", changed_at, hidden_change=True, **shown))
    return out


def _shown_at_as_of(state: SrState) -> dict[str, Any]:
    """What every change reports of its SR at as_of.  The flags are fields of the state the caller
    reads (in the public projection ``changes`` compares), so they show nothing of rows the
    caller cannot read."""
    return {
        "lane": state.lane,
        "lane_uuid": state.effective_lane_uuid,
        "has_correction": state.has_correction,
        "has_adjustment": state.has_adjustment,
        "caller": state.owner,
        "node_id": state.node_id,
    }


async def _states(reader: Reader, sr_ids: list[str], since: int, as_of: int) -> _Both:
    """Each SR's state at ``since`` and at ``as_of`` (None where it has no version yet)."""
    if not sr_ids:
        return {}
    rows = await reader.fetchall(
        _BOTH_STATES,
        {"since_key": _key(since), "as_of_key": _key(as_of), "ids": json.dumps(sr_ids)},
    )
    return {r[0]: (_decoded(r[1]), _decoded(r[2])) for r in rows}


def _decoded(blob: Any) -> SrState | None:
    return None if blob is None else SrState.from_doc(decode_canonical(bytes(blob), what="sr"))


def _changed_fields(caller: Caller, a: SrState, b: SrState, linked: _Both) -> list[str]:
    own = caller.may_read_private_fields(b.owner or "")
    x, y = a.compared(), b.compared()
    fields = [f for f in COMPARED if f not in ("links", "private_fields") and x[f] != y[f]]
    if own and x["private_fields"] != y["private_fields"]:
        fields.append("private_fields")
    before = _kept(caller, a.links, {t: linked[t][0] for t in a.links})
    if before != _kept(caller, b.links, {t: linked[t][1] for t in b.links}):
        fields.append("links")
    return sorted(fields, key=COMPARED.index)


async def _state_at(reader: Reader, sr_id: str, moment: int) -> SrState | None:
    blob = await reader.scalar(
        "SELECT state FROM sr_versions WHERE sr_id = ? AND ord < ? ORDER BY ord DESC LIMIT 1",
        (sr_id, _key(moment)),
    )
    return _decoded(blob)


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
    return _kept(caller, links, {t: await _state_at(reader, t, moment) for t in links})


def _kept(caller: Caller, links: tuple[str, ...], states: dict[str, SrState | None]) -> list[str]:
    """The links whose targets the caller can read, given their states at one moment."""
    kept = []
    for target in links:
        if _readable(caller, states[target]):
            kept.append(target)
    return kept


async def changed_values(
    reader: Reader, caller: Caller, sr_ids: list[str], since: int, as_of: int
) -> dict[str, dict[str, tuple[Any, Any]]]:
    """For each of ``sr_ids`` the caller can read at both moments, the fields it sees changed
    between them (as ``describe`` names them) with their values at ``since`` and at ``as_of``:
    links as the targets it can read at each moment, private fields only for their owner or an
    admin.  An SR it cannot read at either moment is left out, as ``changes`` leaves it out of
    ``updated``."""
    states = await _states(reader, sr_ids, since, as_of)
    seen = {
        i: (a, b) for i, (a, b) in states.items() if _readable(caller, a) and _readable(caller, b)
    }
    targets = {t for a, b in seen.values() for s in (a, b) if s is not None for t in s.links}
    linked = await _states(reader, sorted(targets), since, as_of)
    out: dict[str, dict[str, tuple[Any, Any]]] = {}
    for sr_id, (a, b) in seen.items():
        assert a is not None
        assert b is not None
        x, y = a.compared(), b.compared()
        x["links"] = _kept(caller, a.links, {t: linked[t][0] for t in a.links})
        y["links"] = _kept(caller, b.links, {t: linked[t][1] for t in b.links})
        out[sr_id] = {f: (x[f], y[f]) for f in _changed_fields(caller, a, b, linked)}
    return out


async def titles_at(
    reader: Reader, caller: Caller, sr_ids: list[str], as_of: int
) -> dict[str, str]:
    """The titles at ``as_of`` of those of ``sr_ids`` the caller can read then (a deleted SR's
    too: deletion is local and leaves its state, as ``changes`` reports it)."""
    states = await _states(reader, sr_ids, as_of, as_of)
    return {i: b.title for i, (_, b) in states.items() if b is not None and _readable(caller, b)}


def _readable(caller: Caller, state: SrState | None) -> bool:
    return (
        state is not None
        and state.exists
        and not is_tombstone(state)
        and may_read_sr(
            caller, state.workspace or "", state.owner or "", state.visibility == "private"
        )
    )
