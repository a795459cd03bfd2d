"""Sync messages: frozen dataclasses, validated when built, with one wire form each
(docs/protocol.md §3).

A message travels as the body of one frame: a msgpack array ``[type, field, ...]`` in canonical
form (docs/entries.md §Canonical encoding — smallest forms, ``bin`` for bytes, ``str`` for
text).  Messages hold no maps.  ``decode_message`` accepts a body only when re-encoding what it
decoded gives the same bytes back, so every message has exactly one spelling.  What a message
is built of is ``protocol.wire``; the frontier and its message, ``FrontierPart``, are
``protocol.frontier``; the entries a batch carries, ``protocol.batch``; the payload requests of
partial replication, ``Want`` and ``Payloads``, ``protocol.payloads``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any, ClassVar

import msgpack

from protocol.batch import MAX_BATCH_ENTRIES, WireEntry
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, Entry
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import BodyLimits, unpack_body
from protocol.frontier import MAX_FRONTIER_LOGS, FrontierPart
from protocol.kinds import WORKSPACE
from protocol.payloads import MAX_WANT, Payloads, Want
from protocol.wire import (
    MessageType,
    as_pairs,
    as_tuple,
    check_arity,
    check_ascending,
    check_blob,
    check_int,
    check_items,
)

__all__ = [
    "BODY_LIMITS",
    "DIGEST_BYTES",
    "MAX_CREDIT",
    "MAX_ERROR_TEXT",
    "MAX_FEATURES",
    "MAX_VERSIONS",
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "SUPPORTED_MAJORS",
    "Bye",
    "Credit",
    "Entries",
    "Error",
    "ErrorCode",
    "ForkProof",
    "FrontierDigest",
    "Hello",
    "Message",
    "Payloads",
    "Push",
    "Want",
    "decode_message",
    "encode_message",
]

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 2
SUPPORTED_MAJORS: tuple[int, ...] = (1,)

DIGEST_BYTES = 32
MAX_FEATURES = 32
MAX_VERSIONS = 16
MAX_CREDIT = (1 << 32) - 1
MAX_ERROR_TEXT = 1024
_MAX_U16 = 0xFFFF
_FEATURE = re.compile(r"[a-z][a-z0-9_.-]{0,63}\Z")
_TAG = re.compile(WORKSPACE)


class ErrorCode(IntEnum):
    """Codes an ``Error`` message carries; a receiver treats a code it does not know as
    ``PROTOCOL``."""

    PROTOCOL = 1  # a malformed frame or message, or a message out of turn
    VERSION = 2  # no protocol major version in common
    MESH = 3  # the two nodes belong to different meshes
    LIMIT = 4  # a frame beyond the size limit
    CREDIT = 5  # an entries batch or push beyond the credit granted
    REFUSED = 6  # the node will not sync with this peer now (busy, shutting down, not admitted)
    INTERNAL = 7  # the sending node failed on its own side


# How many objects (every value, containers included) and how deep a nesting the largest legal
# message of each type holds: the outer array and its type count two, a frontier's tip five (its
# array and four fields), an entry three (its pair, header, payload or tag), an answer of a
# payloads message three (its pair, id, payload or code).  A body may hold
# ``_OBJECT_SLACK`` more, so a message just beyond a limit is refused by its own check, with its
# own hint; the bound is what keeps a small frame of empty arrays from unpacking into millions
# of lists (docs/protocol.md §2).
_MOST_OBJECTS: dict[int, tuple[int, int]] = {
    MessageType.HELLO: (2 + 4 + 1 + MAX_FEATURES, 2),
    MessageType.FRONTIER_DIGEST: (3, 1),
    MessageType.FRONTIER: (4 + 5 * MAX_FRONTIER_LOGS, 3),
    MessageType.ENTRIES: (4 + 3 * MAX_BATCH_ENTRIES, 3),
    MessageType.CREDIT: (4, 1),
    MessageType.PUSH: (3 + 3 * MAX_BATCH_ENTRIES, 3),
    MessageType.FORK_PROOF: (4, 1),
    MessageType.ERROR: (5 + MAX_VERSIONS, 2),
    MessageType.BYE: (2, 1),
    MessageType.WANT: (3 + MAX_WANT, 2),
    MessageType.PAYLOADS: (3 + 3 * MAX_WANT, 3),
}
_OBJECT_SLACK = 64

BODY_LIMITS = BodyLimits(
    max_bin_len=MAX_PAYLOAD_BYTES,  # the largest bytes field: one payload
    max_str_len=4 * MAX_ERROR_TEXT,  # the largest text field, in UTF-8 bytes
    max_array_len=MAX_FRONTIER_LOGS,  # the longest array: a frontier's tips
    max_map_len=0,  # no message holds a map
    max_objects=_OBJECT_SLACK,  # a body that is no message: enough to say why
    max_depth=1,
)


def _limits_for(body: bytes) -> BodyLimits:
    """The limits for a body whose first bytes, as canonical encoding writes every message,
    are a fixarray and a positive fixint type; for any other start, ``BODY_LIMITS``."""
    if len(body) < 2 or body[0] & 0xF0 != 0x90 or body[1] not in _MOST_OBJECTS:
        return BODY_LIMITS
    objects, depth = _MOST_OBJECTS[body[1]]
    return replace(BODY_LIMITS, max_objects=objects + _OBJECT_SLACK, max_depth=depth)


def _wire_entries(value: Any, field: str, least: int) -> None:
    check_items(value, field, MAX_BATCH_ENTRIES, least)
    for item in value:
        if type(item) is not tuple or len(item) != 2:
            raise LocalProtocolError("each entry is a (header, payload) pair", field=field)
        header, payload = item
        check_blob(header, "header", 1, MAX_HEADER_BYTES)
        if type(payload) is str:
            if not _TAG.fullmatch(payload):
                raise LocalProtocolError(f"a workspace tag matches {WORKSPACE}", field="tag")
        elif payload is not None:
            check_blob(payload, "payload", 0, MAX_PAYLOAD_BYTES)


def _entries_wire(entries: tuple[WireEntry, ...]) -> list[list[bytes | str | None]]:
    return [[header, payload] for header, payload in entries]


# --- the messages -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """The first message each side sends.  Its layout is the same in every major version, so
    two nodes can always learn that they have no version in common."""

    TYPE: ClassVar[MessageType] = MessageType.HELLO

    major: int
    minor: int
    mesh: bytes
    node: bytes
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_int(self.major, "major", 0, _MAX_U16)
        check_int(self.minor, "minor", 0, _MAX_U16)
        check_blob(self.mesh, "mesh", 16, 16)
        check_blob(self.node, "node", 32, 32)
        check_items(self.features, "features", MAX_FEATURES)
        if not all(type(f) is str and _FEATURE.match(f) for f in self.features):
            raise LocalProtocolError("each is lower-case [a-z][a-z0-9_.-]{0,63}", field="features")
        check_ascending(self.features, "features")

    def wire(self) -> list[Any]:
        return [self.major, self.minor, self.mesh, self.node, list(self.features)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Hello:
        major, minor, mesh, node, features = check_arity(values, 5, "hello")
        return cls(major, minor, mesh, node, as_tuple(features, "features"))


@dataclass(frozen=True, slots=True)
class FrontierDigest:
    """SHA-256 of the sender's frontier (``Frontier.digest``)."""

    TYPE: ClassVar[MessageType] = MessageType.FRONTIER_DIGEST

    digest: bytes

    def __post_init__(self) -> None:
        check_blob(self.digest, "digest", DIGEST_BYTES, DIGEST_BYTES)

    def wire(self) -> list[Any]:
        return [self.digest]

    @classmethod
    def from_wire(cls, values: list[Any]) -> FrontierDigest:
        (digest,) = check_arity(values, 1, "frontier_digest")
        return cls(digest)


@dataclass(frozen=True, slots=True)
class Entries:
    """A batch of catch-up entries.  ``done`` marks the sender's last batch of the round; an
    empty batch is allowed only as that marker.  An entry's payload may be a workspace tag
    (``WireEntry``) only where both hellos offer ``partial``."""

    TYPE: ClassVar[MessageType] = MessageType.ENTRIES

    entries: tuple[WireEntry, ...] = ()
    done: bool = False

    def __post_init__(self) -> None:
        if type(self.done) is not bool:
            raise LocalProtocolError("must be a bool", field="done")
        _wire_entries(self.entries, "entries", 0 if self.done else 1)

    @classmethod
    def of(cls, entries: Iterable[Entry], *, done: bool = False) -> Entries:
        return cls(tuple((e.raw, e.payload) for e in entries), done)

    def wire(self) -> list[Any]:
        return [_entries_wire(self.entries), self.done]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Entries:
        entries, done = check_arity(values, 2, "entries")
        return cls(as_pairs(entries, "entries"), done)


@dataclass(frozen=True, slots=True)
class Push:
    """New entries sent live, after the sender has caught its peer up."""

    TYPE: ClassVar[MessageType] = MessageType.PUSH

    entries: tuple[WireEntry, ...]

    def __post_init__(self) -> None:
        _wire_entries(self.entries, "entries", 1)

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> Push:
        return cls(tuple((e.raw, e.payload) for e in entries))

    def wire(self) -> list[Any]:
        return [_entries_wire(self.entries)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Push:
        (entries,) = check_arity(values, 1, "push")
        return cls(as_pairs(entries, "entries"))


@dataclass(frozen=True, slots=True)
class Credit:
    """A grant: the peer may send this many more entries and this many more bytes."""

    TYPE: ClassVar[MessageType] = MessageType.CREDIT

    entries: int
    nbytes: int

    def __post_init__(self) -> None:
        check_int(self.entries, "entries", 0, MAX_CREDIT)
        check_int(self.nbytes, "nbytes", 0, MAX_CREDIT)
        if not (self.entries or self.nbytes):
            raise LocalProtocolError("a grant of nothing", field="credit")

    def wire(self) -> list[Any]:
        return [self.entries, self.nbytes]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Credit:
        entries, nbytes = check_arity(values, 2, "credit")
        return cls(entries, nbytes)


@dataclass(frozen=True, slots=True)
class ForkProof:
    """Two raw headers at one (writer, epoch, seq); the receiver verifies both."""

    TYPE: ClassVar[MessageType] = MessageType.FORK_PROOF

    first: bytes
    second: bytes

    def __post_init__(self) -> None:
        check_blob(self.first, "first", 1, MAX_HEADER_BYTES)
        check_blob(self.second, "second", 1, MAX_HEADER_BYTES)
        if self.first == self.second:
            raise LocalProtocolError("the two headers are the same", field="second")

    @classmethod
    def of(cls, a: Entry, b: Entry) -> ForkProof:
        if (a.header.log, a.header.seq) != (b.header.log, b.header.seq):
            raise LocalProtocolError("a fork is two entries at one position", field="second")
        return cls(a.raw, b.raw)

    def wire(self) -> list[Any]:
        return [self.first, self.second]

    @classmethod
    def from_wire(cls, values: list[Any]) -> ForkProof:
        first, second = check_arity(values, 2, "fork_proof")
        return cls(first, second)


@dataclass(frozen=True, slots=True)
class Error:
    """Why the sender is closing.  ``versions`` lists the major versions the sender speaks
    (set with ``ErrorCode.VERSION``).  Like ``Hello``, its layout is fixed across majors."""

    TYPE: ClassVar[MessageType] = MessageType.ERROR

    code: int
    text: str
    versions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.code, ErrorCode):  # held as a plain int, as it arrives
            object.__setattr__(self, "code", int(self.code))
        check_int(self.code, "code", 0, _MAX_U16)
        if type(self.text) is not str or len(self.text) > MAX_ERROR_TEXT:
            raise LocalProtocolError(f"must be text of at most {MAX_ERROR_TEXT}", field="text")
        check_items(self.versions, "versions", MAX_VERSIONS)
        for v in self.versions:
            check_int(v, "versions", 0, _MAX_U16)
        check_ascending(self.versions, "versions")

    def wire(self) -> list[Any]:
        return [self.code, self.text, list(self.versions)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Error:
        code, text, versions = check_arity(values, 3, "error")
        return cls(code, text, as_tuple(versions, "versions"))


@dataclass(frozen=True, slots=True)
class Bye:
    """The sender is done and closes cleanly."""

    TYPE: ClassVar[MessageType] = MessageType.BYE

    def wire(self) -> list[Any]:
        return []

    @classmethod
    def from_wire(cls, values: list[Any]) -> Bye:
        check_arity(values, 0, "bye")
        return cls()


Message = (
    Hello
    | FrontierDigest
    | FrontierPart
    | Entries
    | Credit
    | Push
    | ForkProof
    | Error
    | Bye
    | Want
    | Payloads
)

_PARSERS: dict[int, Callable[[list[Any]], Message]] = {
    MessageType.HELLO: Hello.from_wire,
    MessageType.FRONTIER_DIGEST: FrontierDigest.from_wire,
    MessageType.FRONTIER: FrontierPart.from_wire,
    MessageType.ENTRIES: Entries.from_wire,
    MessageType.CREDIT: Credit.from_wire,
    MessageType.PUSH: Push.from_wire,
    MessageType.FORK_PROOF: ForkProof.from_wire,
    MessageType.ERROR: Error.from_wire,
    MessageType.BYE: Bye.from_wire,
    MessageType.WANT: Want.from_wire,
    MessageType.PAYLOADS: Payloads.from_wire,
}


def encode_message(message: Message) -> bytes:
    """The canonical body of ``message`` (no frame prefix)."""
    packed: bytes = msgpack.packb([int(message.TYPE), *message.wire()], use_bin_type=True)
    return packed


def decode_message(body: bytes) -> Message:
    """Decode one frame body, or raise ``RemoteProtocolError`` naming what is wrong.  The error
    keeps nothing decoded reachable: a session holds its failure, and a refused document could
    be as large as its frame allows."""
    doc = unpack_body(body, _limits_for(body))
    parsed = _parse(doc)
    del doc  # the raise below keeps this frame, and its locals, in the traceback
    if isinstance(parsed, RemoteProtocolError):
        try:
            raise parsed
        finally:  # the error's traceback holds this frame: it may not hold the error back
            del parsed
    if encode_message(parsed) != body:
        raise RemoteProtocolError("not canonical msgpack (re-encodes differently)", field="body")
    return parsed


def _parse(doc: Any) -> Message | RemoteProtocolError:
    # Returns its error rather than raising it, so the error holds no frame that holds ``doc``.
    if type(doc) is not list or not doc or type(doc[0]) is not int:
        return RemoteProtocolError("a message is an array that starts with its type", field="body")
    parse = _PARSERS.get(doc[0])
    if parse is None:
        return RemoteProtocolError(f"unknown message type {doc[0]}", field="type")
    try:
        return parse(doc[1:])
    except LocalProtocolError as exc:
        hint, field = exc.hint, exc.field
    return RemoteProtocolError(hint, field=field)
