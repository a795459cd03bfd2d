"""Sync messages: frozen dataclasses, validated when built, with one wire form each
(docs/protocol.md §3).

A message travels as the body of one frame: a msgpack array ``[type, field, ...]`` in canonical
form (docs/entries.md §Canonical encoding — smallest forms, ``bin`` for bytes, ``str`` for
text).  Messages hold no maps.  ``decode_message`` accepts a body only when re-encoding what it
decoded gives the same bytes back, so every message has exactly one spelling.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from itertools import pairwise
from typing import Any, ClassVar

import msgpack

from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, MAX_SEQ, Entry, LogId
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES, BodyLimits, unpack_body

__all__ = [
    "BODY_LIMITS",
    "DIGEST_BYTES",
    "FRONTIER_PARTS",
    "MAX_BATCH_ENTRIES",
    "MAX_CREDIT",
    "MAX_ERROR_TEXT",
    "MAX_FEATURES",
    "MAX_FRONTIER_LOGS",
    "MAX_FRONTIER_TIPS",
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
    "Frontier",
    "FrontierDigest",
    "FrontierPart",
    "Hello",
    "Message",
    "MessageType",
    "Push",
    "Span",
    "Tip",
    "WireEntry",
    "batch_room",
    "decode_message",
    "encode_message",
    "entry_cost",
]

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 1
SUPPORTED_MAJORS: tuple[int, ...] = (1,)

DIGEST_BYTES = 32
MAX_FEATURES = 32
MAX_VERSIONS = 16
MAX_FRONTIER_LOGS = 10_000  # tips in one frontier message
MAX_FRONTIER_TIPS = 100_000  # tips in a whole frontier, over all its parts
# The feature of protocol 1.1 that lets a frontier of more than MAX_FRONTIER_LOGS tips travel
# in parts (docs/protocol.md §3.3).
FRONTIER_PARTS = "frontier.parts"
MAX_BATCH_ENTRIES = 1024
MAX_CREDIT = (1 << 32) - 1
MAX_ERROR_TEXT = 1024
_MAX_U16 = 0xFFFF
_FEATURE = re.compile(r"[a-z][a-z0-9_.-]{0,63}\Z")

WireEntry = tuple[bytes, bytes | None]
"""An entry on the wire: its raw header bytes and its payload bytes, or None when absent —
exactly as ``Entry.raw`` and ``Entry.payload`` hold them."""


class MessageType(IntEnum):
    """The first element of every message body."""

    HELLO = 1
    FRONTIER_DIGEST = 2
    FRONTIER = 3
    ENTRIES = 4
    CREDIT = 5
    PUSH = 6
    FORK_PROOF = 7
    ERROR = 8
    BYE = 9


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
# array and four fields), an entry three (its pair, header, payload).  A body may hold
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


# --- field checks: each raises LocalProtocolError naming the field ------------------------------


def _blob(value: Any, field: str, lo: int, hi: int) -> None:
    if type(value) is not bytes or not lo <= len(value) <= hi:
        size = f"{lo} bytes" if lo == hi else f"{lo} to {hi} bytes"
        raise LocalProtocolError(f"must be {size}", field=field)


def _int(value: Any, field: str, lo: int, hi: int) -> None:
    if type(value) is not int or not lo <= value <= hi:
        raise LocalProtocolError(f"must be an integer in [{lo}, {hi}]", field=field)


def _items(value: Any, field: str, most: int, least: int = 0) -> None:
    if type(value) is not tuple or not least <= len(value) <= most:
        raise LocalProtocolError(f"must be a tuple of {least} to {most} items", field=field)


def _ascending(keys: Sequence[Any], field: str) -> None:
    if any(a >= b for a, b in pairwise(keys)):
        raise LocalProtocolError("must be strictly ascending (sorted, no repeats)", field=field)


def _wire_entries(value: Any, field: str, least: int) -> None:
    _items(value, field, MAX_BATCH_ENTRIES, least)
    for item in value:
        if type(item) is not tuple or len(item) != 2:
            raise LocalProtocolError("each entry is a (header, payload) pair", field=field)
        header, payload = item
        _blob(header, "header", 1, MAX_HEADER_BYTES)
        if payload is not None:
            _blob(payload, "payload", 0, MAX_PAYLOAD_BYTES)


# --- wire helpers: lists from msgpack become the tuples the dataclasses hold -------------------


def _arity(values: list[Any], n: int, what: str) -> list[Any]:
    if len(values) != n:
        raise LocalProtocolError(f"has {n} fields after its type, not {len(values)}", field=what)
    return values


def _tuple(value: Any, field: str) -> tuple[Any, ...]:
    if type(value) is not list:
        raise LocalProtocolError("must be an array", field=field)
    return tuple(value)


def _pairs(value: Any, field: str) -> tuple[Any, ...]:
    return tuple(_tuple(item, field) for item in _tuple(value, field))


def _entries_wire(entries: tuple[WireEntry, ...]) -> list[list[bytes | None]]:
    return [[header, payload] for header, payload in entries]


def entry_cost(item: WireEntry) -> int:
    """The bytes one entry counts against byte credit: its header plus its payload."""
    header, payload = item
    return len(header) + (len(payload) if payload is not None else 0)


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
        _int(self.major, "major", 0, _MAX_U16)
        _int(self.minor, "minor", 0, _MAX_U16)
        _blob(self.mesh, "mesh", 16, 16)
        _blob(self.node, "node", 32, 32)
        _items(self.features, "features", MAX_FEATURES)
        if not all(type(f) is str and _FEATURE.match(f) for f in self.features):
            raise LocalProtocolError("each is lower-case [a-z][a-z0-9_.-]{0,63}", field="features")
        _ascending(self.features, "features")

    def wire(self) -> list[Any]:
        return [self.major, self.minor, self.mesh, self.node, list(self.features)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Hello:
        major, minor, mesh, node, features = _arity(values, 5, "hello")
        return cls(major, minor, mesh, node, _tuple(features, "features"))


@dataclass(frozen=True, slots=True)
class FrontierDigest:
    """SHA-256 of the sender's frontier (``Frontier.digest``)."""

    TYPE: ClassVar[MessageType] = MessageType.FRONTIER_DIGEST

    digest: bytes

    def __post_init__(self) -> None:
        _blob(self.digest, "digest", DIGEST_BYTES, DIGEST_BYTES)

    def wire(self) -> list[Any]:
        return [self.digest]

    @classmethod
    def from_wire(cls, values: list[Any]) -> FrontierDigest:
        (digest,) = _arity(values, 1, "frontier_digest")
        return cls(digest)


@dataclass(frozen=True, slots=True)
class Tip:
    """One log of a frontier: its highest contiguous seq and the id of the entry there."""

    writer: bytes
    epoch: bytes
    seq: int
    head: bytes

    def __post_init__(self) -> None:
        _blob(self.writer, "writer", 32, 32)
        _blob(self.epoch, "epoch", 8, 8)
        _int(self.seq, "seq", 1, MAX_SEQ)
        _blob(self.head, "head", 32, 32)

    @property
    def log(self) -> LogId:
        return (self.writer, self.epoch)

    def wire(self) -> list[Any]:
        return [self.writer, self.epoch, self.seq, self.head]


@dataclass(frozen=True, slots=True)
class Span:
    """Entries ``first``..``last`` (inclusive) of ``log`` that a peer lacks.  ``after`` is the
    id the peer holds at ``first - 1`` when its frontier says so: if this side's entry there
    has another id, the logs have forked and the sender starts one entry earlier, so that the
    peer sees the fork."""

    log: LogId
    first: int
    last: int
    after: bytes | None


@dataclass(frozen=True, slots=True)
class Frontier:
    """Every log a node holds, as tips sorted by (writer, epoch): any number of them.  It
    travels as one or more ``FrontierPart`` messages (``parts``) and in bundles."""

    tips: tuple[Tip, ...] = ()

    def __post_init__(self) -> None:
        _tips(self.tips, "tips", sys.maxsize)  # a node may hold more than one peer takes

    @classmethod
    def of(cls, tips: Iterable[Tip]) -> Frontier:
        """A frontier of ``tips`` in any order."""
        return cls(tuple(sorted(tips, key=lambda t: t.log)))

    @classmethod
    def from_heads(cls, heads: Mapping[LogId, tuple[int, bytes]]) -> Frontier:
        """A frontier from (writer, epoch) → (seq, head id); logs at seq 0 are left out."""
        return cls.of(Tip(w, e, seq, head) for (w, e), (seq, head) in heads.items() if seq)

    def rows(self) -> list[list[Any]]:
        """The tips as wire rows ``[writer, epoch, seq, head]``."""
        return [t.wire() for t in self.tips]

    @classmethod
    def from_rows(cls, rows: Any, *, most: int = MAX_FRONTIER_TIPS) -> Frontier:
        return cls(_tip_rows(rows, most))

    def parts(self, most: int = MAX_FRONTIER_LOGS) -> list[FrontierPart]:
        """The messages that carry this frontier: ``most`` tips each, every one but the last
        saying ``more``; one part (perhaps empty) when it fits in one."""
        n = len(self.tips)
        starts = range(0, max(n, 1), most)
        return [FrontierPart(self.tips[i : i + most], i + most < n) for i in starts]

    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding of the tips array (docs/protocol.md §4)."""
        packed: bytes = msgpack.packb(self.rows(), use_bin_type=True)
        return hashlib.sha256(packed).digest()

    def lacking(self, theirs: Frontier) -> list[Span]:
        """What a peer whose frontier is ``theirs`` lacks of this one, log by log in order."""
        known = {t.log: t for t in theirs.tips}
        spans: list[Span] = []
        for tip in self.tips:
            other = known.get(tip.log)
            if other is None:
                spans.append(Span(tip.log, 1, tip.seq, None))
            elif other.seq < tip.seq:
                spans.append(Span(tip.log, other.seq + 1, tip.seq, other.head))
            elif other.seq == tip.seq and other.head != tip.head:
                spans.append(Span(tip.log, tip.seq, tip.seq, None))  # a fork at the tip
        return spans


@dataclass(frozen=True, slots=True)
class FrontierPart:
    """A frontier message: at most ``MAX_FRONTIER_LOGS`` tips of the sender's frontier, in
    order after those of its earlier parts; ``more`` when another part follows (only where
    both hellos offer ``FRONTIER_PARTS``).  A frontier that fits is one part without it."""

    TYPE: ClassVar[MessageType] = MessageType.FRONTIER

    tips: tuple[Tip, ...] = ()
    more: bool = False

    def __post_init__(self) -> None:
        _tips(self.tips, "tips", MAX_FRONTIER_LOGS)
        if type(self.more) is not bool:
            raise LocalProtocolError("must be a bool", field="more")

    def wire(self) -> list[Any]:
        rows = [t.wire() for t in self.tips]
        return [rows, True] if self.more else [rows]

    @classmethod
    def from_wire(cls, values: list[Any]) -> FrontierPart:
        if len(values) == 2 and values[1] is True:
            return cls(_tip_rows(values[0], MAX_FRONTIER_LOGS), True)
        (rows,) = _arity(values, 1, "frontier")
        return cls(_tip_rows(rows, MAX_FRONTIER_LOGS))


def _tips(tips: Any, field: str, most: int) -> None:
    _items(tips, field, most)
    if not all(type(t) is Tip for t in tips):
        raise LocalProtocolError("each is a Tip", field=field)
    _ascending([t.log for t in tips], field)


def _tip_rows(value: Any, most: int) -> tuple[Tip, ...]:
    rows = _pairs(value, "tips")
    if len(rows) > most:
        raise LocalProtocolError(f"must be a tuple of 0 to {most} items", field="tips")
    if not all(len(row) == 4 for row in rows):
        raise LocalProtocolError("each is [writer, epoch, seq, head]", field="tips")
    return tuple(Tip(*row) for row in rows)


@dataclass(frozen=True, slots=True)
class Entries:
    """A batch of catch-up entries.  ``done`` marks the sender's last batch of the round; an
    empty batch is allowed only as that marker."""

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
        entries, done = _arity(values, 2, "entries")
        return cls(_pairs(entries, "entries"), done)


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
        (entries,) = _arity(values, 1, "push")
        return cls(_pairs(entries, "entries"))


@dataclass(frozen=True, slots=True)
class Credit:
    """A grant: the peer may send this many more entries and this many more bytes."""

    TYPE: ClassVar[MessageType] = MessageType.CREDIT

    entries: int
    nbytes: int

    def __post_init__(self) -> None:
        _int(self.entries, "entries", 0, MAX_CREDIT)
        _int(self.nbytes, "nbytes", 0, MAX_CREDIT)
        if not (self.entries or self.nbytes):
            raise LocalProtocolError("a grant of nothing", field="credit")

    def wire(self) -> list[Any]:
        return [self.entries, self.nbytes]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Credit:
        entries, nbytes = _arity(values, 2, "credit")
        return cls(entries, nbytes)


@dataclass(frozen=True, slots=True)
class ForkProof:
    """Two raw headers at one (writer, epoch, seq); the receiver verifies both."""

    TYPE: ClassVar[MessageType] = MessageType.FORK_PROOF

    first: bytes
    second: bytes

    def __post_init__(self) -> None:
        _blob(self.first, "first", 1, MAX_HEADER_BYTES)
        _blob(self.second, "second", 1, MAX_HEADER_BYTES)
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
        first, second = _arity(values, 2, "fork_proof")
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
        _int(self.code, "code", 0, _MAX_U16)
        if type(self.text) is not str or len(self.text) > MAX_ERROR_TEXT:
            raise LocalProtocolError(f"must be text of at most {MAX_ERROR_TEXT}", field="text")
        _items(self.versions, "versions", MAX_VERSIONS)
        for v in self.versions:
            _int(v, "versions", 0, _MAX_U16)
        _ascending(self.versions, "versions")

    def wire(self) -> list[Any]:
        return [self.code, self.text, list(self.versions)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Error:
        code, text, versions = _arity(values, 3, "error")
        return cls(code, text, _tuple(versions, "versions"))


@dataclass(frozen=True, slots=True)
class Bye:
    """The sender is done and closes cleanly."""

    TYPE: ClassVar[MessageType] = MessageType.BYE

    def wire(self) -> list[Any]:
        return []

    @classmethod
    def from_wire(cls, values: list[Any]) -> Bye:
        _arity(values, 0, "bye")
        return cls()


Message = Hello | FrontierDigest | FrontierPart | Entries | Credit | Push | ForkProof | Error | Bye

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


# The encoded size of a batch body beyond its entries: array, type, entries array header, done.
_BATCH_OVERHEAD = 6


def _bin_size(n: int) -> int:
    return n + (2 if n < 0x100 else 3 if n < 0x10000 else 5)


def _encoded_size(item: WireEntry) -> int:
    header, payload = item
    return 1 + _bin_size(len(header)) + (1 if payload is None else _bin_size(len(payload)))


def batch_room(items: Sequence[WireEntry], *, entries: int, nbytes: int) -> int:
    """How many leading ``items`` fit in one batch: within ``entries`` and ``nbytes`` of
    credit, ``MAX_BATCH_ENTRIES``, and ``MAX_FRAME_BYTES`` once encoded."""
    count, cost, size = 0, 0, _BATCH_OVERHEAD
    for item in items[: min(entries, MAX_BATCH_ENTRIES)]:
        cost += entry_cost(item)
        size += _encoded_size(item)
        if cost > nbytes or size > MAX_FRAME_BYTES:
            break
        count += 1
    return count
