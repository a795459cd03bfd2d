"""The SR fold (docs/tools/e_timeline.md §Views at a moment), as pure functions: entries of
one SR, applied in the total order (ingest wall, counter, writer, epoch, seq), give its state.
Per field, the last entry that sets it wins; identity fields come from the creating ``sr.put``
and never change; the correction and adjustment flags are sticky.

| field | set at creation by | changed later by |
| --- | --- | --- |
| sr_id, workspace, owner, created_time | the creating sr.put | never |
| ingest_time, node_id | every entry folded in | every entry folded in |
| title, text, links, conversational, private_fields | sr.put | sr.put, sr.correct |
| tags | sr.put | sr.put, sr.adjust |
| content_time, lane, lane_uuid, visibility | sr.put | sr.adjust |

An entry naming another workspace than the SR's is ignored (a node may not move an SR).  An
SR exists once its creating entry is folded in; entries ordered before it still set fields.
``ingest_time`` and ``node_id`` are the wall clock and the node id of the writer of the last
entry folded in (the node that authored it, whichever node holds it).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import msgpack

from protocol.clock import Hlc

__all__ = [
    "COMPARED",
    "FoldItem",
    "SrState",
    "digests",
    "fold_all",
    "fold_entry",
    "lane_uuid_of",
    "order_key",
]

# The state ``changes`` compares (docs/tools/e_timeline.md §changes, *What is compared*):
# every field but ingest_time, created_time and node_id (who wrote the newest entry is not a
# change of the SR).
COMPARED = (
    "title",
    "text",
    "links",
    "conversational",
    "private_fields",
    "tags",
    "content_time",
    "lane",
    "lane_uuid",
    "visibility",
    "has_correction",
    "has_adjustment",
)

_LANE_NAMESPACE = uuid.UUID("6d656d6c-616e-6500-8000-6c616e655f6e")
_CONTENT = ("title", "text", "links", "conversational", "private_fields")
_PUT_LATER = (*_CONTENT, "tags")
_META = ("tags", "content_time", "lane", "lane_uuid", "visibility")
_SETS: dict[str, tuple[str, ...]] = {
    "sr.correct": _CONTENT,
    "sr.adjust": _META,
}


@lru_cache(maxsize=4096)
def lane_uuid_of(workspace: str, lane: str) -> str:
    """The stable default ``lane_uuid`` of (workspace, lane)."""
    return str(uuid.uuid5(_LANE_NAMESPACE, f"{workspace}/{lane}"))


def order_key(hlc: Hlc, writer: bytes, epoch: bytes, seq: int) -> bytes:
    """The fold's total order as bytes that sort the same way."""
    return (
        hlc.wall.to_bytes(8, "big")
        + hlc.counter.to_bytes(4, "big")
        + writer
        + epoch
        + seq.to_bytes(8, "big")
    )


@dataclass(frozen=True, slots=True)
class SrState:
    sr_id: str
    exists: bool = False
    workspace: str | None = None
    owner: str | None = None
    created_time: int | None = None
    title: str = ""
    text: str = ""
    links: tuple[str, ...] = ()
    conversational: bool = False
    private_fields: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    content_time: int | None = None
    lane: str = "default"
    lane_uuid: str | None = None
    visibility: str = "workspace"
    has_correction: bool = False
    has_adjustment: bool = False
    ingest_time: int | None = None
    node_id: str | None = None  # the writer of the entry ``ingest_time`` is from
    # ``canonical()``, once made: the view stores a state's encoding in two rows.
    _blob: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def effective_lane_uuid(self) -> str:
        return self.lane_uuid or lane_uuid_of(self.workspace or "", self.lane)

    def to_doc(self) -> dict[str, Any]:
        """The state as a plain map (for storage and digests), keys in canonical order
        (spelled out: this runs twice for every SR entry applied; a test holds the order)."""
        return {
            "content_time": self.content_time,
            "conversational": self.conversational,
            "created_time": self.created_time,
            "exists": self.exists,
            "has_adjustment": self.has_adjustment,
            "has_correction": self.has_correction,
            "ingest_time": self.ingest_time,
            "lane": self.lane,
            "lane_uuid": self.lane_uuid,
            "links": list(self.links),
            "node_id": self.node_id,
            "owner": self.owner,
            "private_fields": _sorted_map(self.private_fields),
            "sr_id": self.sr_id,
            "tags": list(self.tags),
            "text": self.text,
            "title": self.title,
            "visibility": self.visibility,
            "workspace": self.workspace,
        }

    def compared(self) -> dict[str, Any]:
        """The fields ``changes`` compares, ``lane_uuid`` as readers see it, keys in
        canonical order."""
        doc = {name: getattr(self, name) for name in _COMPARED_ORDER}
        doc.update(
            links=list(self.links),
            tags=list(self.tags),
            private_fields=_sorted_map(self.private_fields),
            lane_uuid=self.effective_lane_uuid,
        )
        return doc

    def canonical(self) -> bytes:
        """``encode_canonical(self.to_doc())``, without re-sorting what is already sorted
        (made once per state: the state is frozen)."""
        if self._blob is None:
            object.__setattr__(self, "_blob", _pack(self.to_doc()))
        assert self._blob is not None
        return self._blob

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> SrState:
        values = dict(doc)
        for name in ("links", "tags"):
            values[name] = tuple(values.get(name) or ())
        return cls(**values)


_COMPARED_ORDER = tuple(sorted(COMPARED))


def _sorted_map(value: dict[str, str]) -> dict[str, str]:
    return dict(sorted(value.items())) if len(value) > 1 else dict(value)


def _pack(doc: Any) -> bytes:
    # Keys in canonical order and maps sorted by ``_sorted_map``; states hold no floats, so
    # plain packing is the canonical encoding (a test holds the two equal).
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


FoldItem = tuple[str, int, dict[str, Any], str]  # kind, wall, payload, writer's node id


def fold_all(sr_id: str, entries: list[FoldItem]) -> list[SrState]:
    """The state after each of ``entries`` ((kind, wall, payload, node id), in fold order).

    The SR's workspace is its creating entry's, so entries naming another are skipped even
    when they are ordered before the creation.
    """
    create = next((p for k, _, p, _ in entries if k == "sr.put" and p.get("create")), None)
    workspace = create["workspace"] if create else None
    state, states = SrState(sr_id), []
    for kind, wall, payload, writer in entries:
        if workspace is None or payload.get("workspace") == workspace:
            state = fold_entry(state, kind, wall, payload, writer)
        states.append(state)
    return states


def fold_entry(
    state: SrState, kind: str, wall: int, payload: dict[str, Any], writer: str
) -> SrState:
    """``state`` with one more entry of the SR applied (entries arrive in fold order);
    ``writer`` is the node id of the entry's writer."""
    if state.exists and payload.get("workspace") != state.workspace:
        return state  # an entry cannot move an SR to another workspace
    if kind == "sr.put" and payload.get("create") and not state.exists:
        names = (*_PUT_LATER, "content_time", "lane", "lane_uuid", "visibility")
        changes = _taken(payload, names)
        changes |= {
            "exists": True,
            "workspace": payload["workspace"],
            "owner": payload["principal"],
            "created_time": wall,
        }
    elif kind == "sr.put":
        changes = _taken(payload, _PUT_LATER)
    elif kind in _SETS:
        changes = _taken(payload, _SETS[kind])
        changes["has_correction" if kind == "sr.correct" else "has_adjustment"] = True
    else:
        return state
    changes["ingest_time"] = wall
    changes["node_id"] = writer
    return replace(state, **changes)


def _taken(payload: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for name in names:
        if name in payload and payload[name] is not None:
            value = payload[name]
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


def digests(state: SrState) -> tuple[bytes, bytes, bytes]:
    """(full, public, links) digests of what ``changes`` compares: ``full`` covers every
    compared field but ``links``, ``public`` the same without ``private_fields`` (what a
    reader who is neither owner nor admin sees), ``links`` the links alone (they are filtered
    per reader, so compared apart)."""
    if not state.exists:
        return b"", b"", b""
    # The compared map without links, packed in three runs of its canonical key order —
    # before ``private_fields``, it, after — and joined under a map header for ``full`` (11
    # keys) and ``public`` (10), so the text is packed once.  A test holds both to
    # encode_canonical of the whole map.
    before = _pack(
        {
            "content_time": state.content_time,
            "conversational": state.conversational,
            "has_adjustment": state.has_adjustment,
            "has_correction": state.has_correction,
            "lane": state.lane,
            "lane_uuid": state.effective_lane_uuid,
        }
    )[1:]
    private = _pack({"private_fields": _sorted_map(state.private_fields)})[1:]
    after = _pack(
        {
            "tags": state.tags,
            "text": state.text,
            "title": state.title,
            "visibility": state.visibility,
        }
    )[1:]
    full = hashlib.sha256(b"\x8b" + before + private + after).digest()
    public = hashlib.sha256(b"\x8a" + before + after).digest()
    links = hashlib.sha256(_pack(state.links)).digest() if state.links else _NO_LINKS
    return full, public, links


_NO_LINKS = hashlib.sha256(_pack([])).digest()
