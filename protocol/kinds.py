"""The kind registry: every entry kind, its payload schema and its schema version
(docs/entries.md §Kinds).

Payloads are canonical msgpack maps.  Authoring validates strictly (unknown keys refused);
receipt validates the known fields and ignores unknown optional ones, so a later schema version
can add optional fields without breaking older readers.  An entry of a kind missing from this
registry is stored and relayed but not applied (``is_known`` is False).

Times inside payloads are integer milliseconds since the Unix epoch (UTC); the tool layer
parses the strict text forms of ``protocol.timefmt`` into them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.canonical import decode_canonical, encode_canonical
from protocol.clock import MAX_WALL_MS
from protocol.entry import MAX_PAYLOAD_BYTES
from protocol.errors import LocalProtocolError, PayloadError, RemoteProtocolError
from protocol.frontier import MAX_FRONTIER_TIPS
from protocol.schema import (
    Binary,
    Choice,
    Field,
    Flag,
    Integer,
    Nested,
    NestedList,
    Number,
    Schema,
    Text,
    TextList,
    TextMap,
)

__all__ = [
    "KINDS",
    "MAX_ERASED",
    "MAX_LOGS",
    "MAX_MENTION",
    "Kind",
    "decode_payload",
    "encode_payload",
    "has_place",
    "holds_place",
    "is_known",
    "place_of",
    "workspace_of",
]

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
WORKSPACE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
PRINCIPAL = r"[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}"

_uuid = Text(36, 36, UUID)
_workspace = Text(64, 1, WORKSPACE)
_principal = Text(128, 1, PRINCIPAL)
_ms = Integer(0, MAX_WALL_MS)
_count = Integer(0, (1 << 53) - 1)
MAX_LOGS = MAX_FRONTIER_TIPS  # the most logs a member.add may grant: what a frontier lists
_label = Text(64)
_tags = TextList(Text(64), max_items=64)
_instant_text = Text(40)
_entry_id = Text(64, 64, r"[0-9a-f]{64}")
MAX_ERASED = 2048  # the most entries an sr.erase names (docs/erasure.md)


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    version: int
    schema: Schema
    workspace_field: str | None  # the payload field naming the workspace written into


def _f(name: str, t: Any, *, req: bool = False, null: bool = False) -> Field:
    return Field(name, t, required=req, nullable=null)


_SR_IDENTITY = (
    _f("sr_id", _uuid, req=True),
    _f("workspace", _workspace, req=True),
    _f("principal", _principal, req=True),
)
_SR_CONTENT = (
    _f("title", Text(1000, 0)),
    _f("text", Text(100_000, 0)),
    _f("links", TextList(_uuid, max_items=128)),
    _f("conversational", Flag()),
    _f("private_fields", TextMap(Text(64, 1, r"[A-Za-z0-9_.-]+"), Text(10_000, 0), 32)),
)
_SR_META = (
    _f("tags", _tags),
    _f("content_time", _ms),
    _f("lane", _label),
    _f("lane_uuid", _uuid),
    _f("visibility", Choice(("workspace", "private"))),
)

_EPISODE_LATER = (
    _f("task_result", Number(), null=True),
    _f("verdict_at", _ms, null=True),
    _f("status", _label),
    _f("eligibility", _label),
    _f("trust", Number(0.0, 1.0), null=True),
)

MAX_MENTION = 1000  # a window's mention: which of the turn's time mentions it answers

_RANGE = Schema((_f("from", _instant_text, req=True), _f("to", _instant_text, req=True)))
_PERSON = Schema(
    (
        _f("from", _instant_text, req=True),
        _f("to", _instant_text, req=True),
        _f("source", Choice(("answered", "derived-from-reading", "control", "said")), req=True),
        _f("mention", Integer(0, MAX_MENTION)),
    )
)
_REFUSALS = (
    "time-future",
    "time-past",
    "beyond-retention",
    "over-max-range",
    "multi-day",
    "dst-gap",
    "no-form-holds",
)
_CALL_WINDOW_ROW = Schema(
    (
        _f("kind", Choice(("call-window",)), req=True),
        _f("turn", _count, req=True),
        _f("iteration", _count, req=True),
        _f("toolCallId", Text(256), req=True),
        _f("toolName", Text(128), req=True),
        _f(
            "how",
            Choice(("refused", "model", "filled", "bound", "model-chosen", "unread", "not-filled")),
            req=True,
        ),
        _f("form", Integer(0, 64)),
        _f("asked", Nested(_RANGE)),
        _f("person", Nested(_PERSON)),
        _f("by", Choice(("quote", "value"))),
        _f("rounded", Flag()),
        _f("sent", Nested(_RANGE)),
        _f("differs", Nested(Schema((_f("extra", NestedList(_RANGE, 2, 1), req=True),)))),
        _f("trimmedByTool", Flag()),
        _f("partlyBeyondRetention", Flag()),
        _f("why", Choice(("no-window", "several-mentions", "open-reading", "no-exact-form"))),
        _f("refused", Choice(_REFUSALS)),
        _f("argument", Text(128)),
    )
)

_ALL = (
    Kind(
        "sr.put",
        1,
        Schema((*_SR_IDENTITY, _f("create", Flag(), req=True), *_SR_CONTENT, *_SR_META)),
        "workspace",
    ),
    Kind(
        "sr.correct",
        1,
        Schema((*_SR_IDENTITY, _f("reason", Text(2000), req=True), *_SR_CONTENT)),
        "workspace",
    ),
    Kind("sr.adjust", 1, Schema((*_SR_IDENTITY, *_SR_META)), "workspace"),
    # Erases an SR on every node (docs/erasure.md): the payloads of every entry about it, and
    # everything derived from them.  ``entries`` names those its writer held, as a record.
    Kind(
        "sr.erase",
        1,
        Schema(
            (
                *_SR_IDENTITY,
                _f("entries", TextList(_entry_id, max_items=MAX_ERASED), req=True),
                _f("reason", Text(2000, 1), req=True),
            )
        ),
        "workspace",
    ),
    Kind(
        "episode.record",
        1,
        Schema(
            (
                _f("id", _uuid, req=True),
                _f("vault", _workspace, req=True),
                _f("caller", _principal, req=True),
                _f("session_id", Text(128), null=True),
                _f("channel", _label, req=True),
                _f("episode_type", _label, req=True),
                _f("tool", Text(128), null=True),
                _f("error_code", Text(128), null=True),
                _f("duration_ms", _count, null=True),
                _f("result_size", _count, null=True),
                _f("summary", Text(4000, 0), null=True),
                _f("tags", _tags),
                _f("expires_at", _ms, null=True),
                _f("prev_id", _uuid, null=True),
                *_EPISODE_LATER,
            )
        ),
        "vault",
    ),
    Kind(
        "episode.amend",
        1,
        Schema(
            (
                _f("id", _uuid, req=True),
                _f("vault", _workspace, req=True),
                _f("caller", _principal, req=True),
                *_EPISODE_LATER,
            )
        ),
        "vault",
    ),
    Kind(
        "episode.forget",
        1,
        Schema(
            (
                _f("id", _uuid, req=True),
                _f("vault", _workspace, req=True),
                _f("caller", _principal, req=True),
            )
        ),
        "vault",
    ),
    Kind(
        "call.window",
        1,
        Schema(
            (
                _f("workspace", _workspace, req=True),
                _f("principal", _principal, req=True),
                _f("row", Nested(_CALL_WINDOW_ROW), req=True),
            )
        ),
        "workspace",
    ),
    Kind(
        "member.add",
        3,
        Schema(
            (
                _f("node", Binary(32), req=True),
                _f("workspaces", TextList(Text(64, 1, rf"\*|{WORKSPACE}"), 256, 1), req=True),
                _f("cert_expires", _ms, req=True),
                _f("label", _label),
                _f("certificate", Text(4096, 1)),  # PEM: the node certificate of a renewal
                # v2: how many logs (epochs) the key may open; absent, the mesh's default (64).
                _f("max_logs", Integer(1, MAX_LOGS)),
                # v3: the workspaces whose payloads the node may hold (``*``: all); absent, all.
                _f("holds", TextList(Text(64, 1, rf"\*|{WORKSPACE}"), 256, 0)),
            )
        ),
        None,
    ),
    Kind(
        "member.revoke",
        1,
        Schema(
            (
                _f("node", Binary(32), req=True),
                _f("last_epoch", Binary(8), null=True),
                _f("last_seq", _count, req=True),
            )
        ),
        None,
    ),
)

KINDS: Mapping[str, Kind] = {k.name: k for k in _ALL}


def is_known(kind: str) -> bool:
    return kind in KINDS


def encode_payload(kind: str, payload: dict[str, Any]) -> bytes:
    """Validate (strictly) and encode a payload being authored; raises ``PayloadError``."""
    spec = KINDS.get(kind)
    if spec is None:
        raise LocalProtocolError(f"unknown kind {kind!r}", field="kind")
    spec.schema.check(payload, authoring=True)
    data = encode_canonical(payload)
    if len(data) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"is larger than {MAX_PAYLOAD_BYTES} bytes", field="payload")
    return data


def decode_payload(kind: str, data: bytes) -> dict[str, Any]:
    """Decode and validate a received payload of a known kind; raises ``RemoteProtocolError``."""
    spec = KINDS.get(kind)
    if spec is None:
        raise RemoteProtocolError(f"unknown kind {kind!r}", field="kind")
    value = decode_canonical(data, what="payload", max_bytes=MAX_PAYLOAD_BYTES)
    try:
        spec.schema.check(value, authoring=False)
    except PayloadError as exc:
        raise RemoteProtocolError(exc.hint, field=exc.field) from exc
    result: dict[str, Any] = value
    return result


def workspace_of(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The workspace an entry writes into (None for membership entries and unknown kinds)."""
    spec = KINDS.get(kind)
    if spec is None or spec.workspace_field is None:
        return None
    value = payload.get(spec.workspace_field)
    return value if isinstance(value, str) else None


def has_place(kind: str) -> bool:
    """Whether entries of ``kind`` are placed in a workspace, whose holders alone keep their
    payloads (docs/partial.md): not membership entries, erasures or unknown kinds, which
    every node keeps whole."""
    spec = KINDS.get(kind)
    return spec is not None and spec.workspace_field is not None and kind != "sr.erase"


def place_of(kind: str, payload: Mapping[str, Any]) -> str | None:
    """The workspace an entry's payload is placed in, or None (``has_place``)."""
    return workspace_of(kind, payload) if has_place(kind) else None


def holds_place(held: frozenset[str] | None, place: str | None) -> bool:
    """Whether a grant holding the payloads of ``held`` (None: all) holds those placed in
    ``place`` (None: the entries every node keeps whole) — docs/partial.md."""
    return held is None or place is None or place in held
