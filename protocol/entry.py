"""Entry headers: fields, canonical encoding, ids (docs/entries.md).

A header is encoded as one msgpack array in this fixed order::

    [v, mesh, writer, epoch, seq, prev, [hlc_wall, hlc_counter], kind,
     payload_hash, payload_len, sig]

The signature covers the canonical encoding of the first ten fields (the same array without
``sig``); the entry id is SHA-256 of the whole array, ``sig`` included, so each ``prev`` link
binds the previous entry's signature as well as its content.  No floats appear anywhere.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.canonical import decode_canonical
from protocol.clock import Hlc
from protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = [
    "ENVELOPE_VERSION",
    "MAX_HEADER_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_SEQ",
    "Entry",
    "Header",
    "LogId",
    "decode_header",
    "payload_digest",
]

ENVELOPE_VERSION = 1
MAX_HEADER_BYTES = 512
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_SEQ = (1 << 63) - 1
_KIND = re.compile(r"[a-z][a-z0-9_]{0,30}(\.[a-z][a-z0-9_]{0,30}){1,3}\Z")
_LENGTHS = {"mesh": 16, "writer": 32, "epoch": 8, "payload_hash": 32, "sig": 64}
_FIELDS = 11

LogId = tuple[bytes, bytes]
"""(writer, epoch): one append-only log."""


def payload_digest(payload: bytes) -> bytes:
    """The ``payload_hash`` of a payload's bytes."""
    return hashlib.sha256(payload).digest()


@dataclass(frozen=True, slots=True)
class Header:
    """A signed entry header; fields are checked when it is built."""

    v: int
    mesh: bytes
    writer: bytes
    epoch: bytes
    seq: int
    prev: bytes | None
    hlc: Hlc
    kind: str
    payload_hash: bytes
    payload_len: int
    sig: bytes

    def __post_init__(self) -> None:
        _check_header(self)

    @property
    def log(self) -> LogId:
        return (self.writer, self.epoch)

    def signed_part(self) -> list[Any]:
        """The array the signature covers, in field order."""
        return [
            self.v,
            self.mesh,
            self.writer,
            self.epoch,
            self.seq,
            self.prev,
            [self.hlc.wall, self.hlc.counter],
            self.kind,
            self.payload_hash,
            self.payload_len,
        ]

    def signing_bytes(self) -> bytes:
        return _pack(self.signed_part())

    def encode(self) -> bytes:
        return _pack([*self.signed_part(), self.sig])


def _pack(fields: list[Any]) -> bytes:
    # Header fields hold no maps, so plain packb is already the canonical encoding.
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def _check_header(h: Header) -> None:
    # The common case is checked in one expression (this runs for every entry decoded or
    # sealed); the slow path below names the field at fault.
    if (
        type(h.v) is int
        and h.v == ENVELOPE_VERSION
        and type(h.mesh) is bytes
        and len(h.mesh) == 16
        and type(h.writer) is bytes
        and len(h.writer) == 32
        and type(h.epoch) is bytes
        and len(h.epoch) == 8
        and type(h.payload_hash) is bytes
        and len(h.payload_hash) == 32
        and type(h.sig) is bytes
        and len(h.sig) == 64
        and (h.prev is None or (type(h.prev) is bytes and len(h.prev) == 32))
        and type(h.seq) is int
        and 1 <= h.seq <= MAX_SEQ
        and type(h.payload_len) is int
        and 0 <= h.payload_len <= MAX_PAYLOAD_BYTES
        and isinstance(h.hlc, Hlc)
        and type(h.kind) is str
        and _KIND.match(h.kind)
    ):
        return
    raise _header_problem(h)


def _header_problem(h: Header) -> LocalProtocolError:
    if h.v != ENVELOPE_VERSION or type(h.v) is not int:
        return LocalProtocolError(f"unknown envelope version {h.v!r}", field="v")
    for name, size in _LENGTHS.items():
        value = getattr(h, name)
        if type(value) is not bytes or len(value) != size:
            return LocalProtocolError(f"must be {size} bytes", field=name)
    if h.prev is not None and (type(h.prev) is not bytes or len(h.prev) != 32):
        return LocalProtocolError("must be 32 bytes or absent", field="prev")
    if type(h.seq) is not int or not 1 <= h.seq <= MAX_SEQ:
        return LocalProtocolError("must be an integer ≥ 1", field="seq")
    if type(h.payload_len) is not int or not 0 <= h.payload_len <= MAX_PAYLOAD_BYTES:
        return LocalProtocolError(f"must be in [0, {MAX_PAYLOAD_BYTES}]", field="payload_len")
    if not isinstance(h.hlc, Hlc):
        return LocalProtocolError("must be an Hlc", field="hlc")
    return LocalProtocolError("must be a dotted lower-case name", field="kind")


@dataclass(frozen=True, slots=True)
class Entry:
    """A header with its canonical bytes, its id, and its payload when present."""

    header: Header
    raw: bytes
    id: bytes
    payload: bytes | None

    @classmethod
    def of(cls, header: Header, payload: bytes | None) -> Entry:
        raw = header.encode()
        return cls(header, raw, hashlib.sha256(raw).digest(), payload)

    @classmethod
    def decode(cls, raw: bytes, payload: bytes | None) -> Entry:
        """Decode received bytes; raises ``RemoteProtocolError``."""
        entry = cls(decode_header(raw), raw, hashlib.sha256(raw).digest(), payload)
        if payload is not None:
            entry.check_payload()
        return entry

    def check_payload(self) -> None:
        """The payload, if present, is the one the header commits to."""
        if self.payload is None:
            return
        if len(self.payload) != self.header.payload_len:
            raise RemoteProtocolError("length differs from payload_len", field="payload")
        if payload_digest(self.payload) != self.header.payload_hash:
            raise RemoteProtocolError("hash differs from payload_hash", field="payload")

    def without_payload(self) -> Entry:
        return Entry(self.header, self.raw, self.id, None)

    def with_payload(self, payload: bytes | None) -> Entry:
        """The same header carrying ``payload``, not yet checked against it
        (``check_payload`` does that; the receive path always does)."""
        return Entry(self.header, self.raw, self.id, payload)


def decode_header(raw: bytes) -> Header:
    """Strictly decode canonical header bytes; anything else raises ``RemoteProtocolError``."""
    doc = decode_canonical(raw, what="header", max_bytes=MAX_HEADER_BYTES)
    if not isinstance(doc, list) or not doc:
        raise RemoteProtocolError("must be an array", field="header")
    if doc[0] != ENVELOPE_VERSION or type(doc[0]) is not int:
        raise RemoteProtocolError(f"unknown envelope version {doc[0]!r}", field="v")
    if len(doc) != _FIELDS:
        raise RemoteProtocolError(f"must have {_FIELDS} fields", field="header")
    hlc = doc[6]
    if not isinstance(hlc, list) or len(hlc) != 2:
        raise RemoteProtocolError("must be [wall, counter]", field="hlc")
    try:
        v, mesh, writer, epoch, seq, prev, _, kind, payload_hash, payload_len, sig = doc
        return Header(
            v, mesh, writer, epoch, seq, prev, _hlc(hlc), kind, payload_hash, payload_len, sig
        )
    except ProtocolError as exc:
        raise RemoteProtocolError(exc.hint, field=exc.field) from exc


def _hlc(pair: list[Any]) -> Hlc:
    try:
        return Hlc(pair[0], pair[1])
    except ValueError as exc:
        raise RemoteProtocolError(str(exc), field="hlc") from exc
