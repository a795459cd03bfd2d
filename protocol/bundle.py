"""Bundle files: entries carried between nodes that never meet (docs/bundles.md).

A bundle is ``MAGIC`` followed by frames (``protocol.frames``: a 4-byte length, then one
canonical msgpack body)::

    [1, {header}]                      once, first
    [2, header bytes, payload or nil]  one per entry, each log's entries together in seq order
    [3, count, digest, sig]            once, last

``digest`` is SHA-256 of every byte before the last frame (the magic, the header frame and
every entry frame); ``sig`` is the exporter's Ed25519 signature over the canonical encoding of
``["memlane bundle", header body, count, digest]``.  ``BundleReader`` is fed the file's bytes
and hands back the header, each entry and the end: it checks every limit, the order, each
entry's payload against its header, the mesh, and that every entry is authentic under the one
rule (``protocol.signing``) — chain-amortised: one signature check per linked run of a log —
and at the end the count, the digest and the signature.  It holds one frame and one entry per
log at a time, so memory does not grow with the bundle.

A frontier file (``encode_frontier_file``) is what a node that wants an incremental bundle
hands to the exporter: its mesh, its node key and its frontier.
"""

from __future__ import annotations

import enum
import hashlib
import struct
from dataclasses import dataclass, field
from typing import Any

from protocol.canonical import decode_canonical, encode_canonical
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, Entry, LogId
from protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from protocol.frames import FrameReader, encode_frame, scan_body
from protocol.frontier import MAX_FRONTIER_TIPS, Frontier
from protocol.signing import SigningKey, linked, verify_signature

__all__ = [
    "FORMAT_VERSION",
    "FRONTIER_MAGIC",
    "MAGIC",
    "MAX_BUNDLE_HEADER_BYTES",
    "BundleEnd",
    "BundleEvent",
    "BundleHeader",
    "BundleReader",
    "BundleWriter",
    "FrontierFile",
    "decode_frontier_file",
    "encode_frontier_file",
]

MAGIC = b"\x89MLBNDL\n"
FRONTIER_MAGIC = b"\x89MLFRNT\n"
FORMAT_VERSION = 1
# Two frontiers of the most logs a frontier lists (MAX_FRONTIER_TIPS), at 88 bytes a tip.
MAX_BUNDLE_HEADER_BYTES = 20 * 1024 * 1024
# What such a header holds, counted before it is unpacked (a header of 20 MiB of empty arrays
# would be twenty million lists): two frontiers of five objects a tip, the map and its fields;
# nested four deep (frame, map, tips, tip).
_HEADER_OBJECTS = 2 * (1 + 5 * MAX_FRONTIER_TIPS) + 64
_HEADER_DEPTH = 4
_MAX_RECORD_BYTES = MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES + 16
_CONTEXT = "memlane bundle"
_HEADER, _ENTRY, _END = 1, 2, 3
_PREFIX = struct.Struct(">I")


def _remote(exc: ProtocolError) -> RemoteProtocolError:
    return (
        exc
        if isinstance(exc, RemoteProtocolError)
        else RemoteProtocolError(exc.hint, field=exc.field)
    )


def _frontier(value: Any, what: str) -> Frontier:
    try:
        return Frontier.from_rows(value)
    except ProtocolError as exc:
        raise RemoteProtocolError(exc.hint, field=f"{what}.{exc.field}") from exc


@dataclass(frozen=True, slots=True)
class BundleHeader:
    """What a bundle says about itself: the mesh, the exporter's node key, when it was cut
    (ms), the exporter's frontier then, and the filters: the frontier of the node it was cut
    for (``since``: only what that node lacked) and the one workspace whose payloads travel."""

    mesh: bytes
    exporter: bytes
    created: int
    frontier: Frontier
    since: Frontier | None = None
    workspace: str | None = None
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        checks = (
            (
                self.version == FORMAT_VERSION and type(self.version) is int,
                "version",
                f"unknown bundle format {self.version!r}",
            ),
            (type(self.mesh) is bytes and len(self.mesh) == 16, "mesh", "must be 16 bytes"),
            (
                type(self.exporter) is bytes and len(self.exporter) == 32,
                "exporter",
                "must be 32 bytes",
            ),
            (type(self.created) is int and self.created >= 0, "created", "must be ms ≥ 0"),
            (type(self.frontier) is Frontier, "frontier", "must be a Frontier"),
            (self.since is None or type(self.since) is Frontier, "since", "must be a Frontier"),
            (
                self.workspace is None
                or (type(self.workspace) is str and 0 < len(self.workspace) <= 64),
                "workspace",
                "must be a workspace name",
            ),
        )
        for ok, name, hint in checks:
            if not ok:
                raise LocalProtocolError(hint, field=name)

    def encode(self) -> bytes:
        """The header frame's body."""
        doc = {
            "version": self.version,
            "mesh": self.mesh,
            "exporter": self.exporter,
            "created": self.created,
            "frontier": self.frontier.rows(),
            "since": None if self.since is None else self.since.rows(),
            "workspace": self.workspace,
        }
        return encode_canonical([_HEADER, doc])

    @classmethod
    def decode(cls, doc: Any) -> BundleHeader:
        if not isinstance(doc, dict):
            raise RemoteProtocolError("must be a map", field="header")
        keys = {"version", "mesh", "exporter", "created", "frontier", "since", "workspace"}
        if set(doc) != keys:
            raise RemoteProtocolError(
                f"must have exactly the fields {sorted(keys)}", field="header"
            )
        if doc["version"] != FORMAT_VERSION or type(doc["version"]) is not int:
            raise RemoteProtocolError(f"unknown bundle format {doc['version']!r}", field="version")
        since = None if doc["since"] is None else _frontier(doc["since"], "since")
        try:
            return cls(
                doc["mesh"],
                doc["exporter"],
                doc["created"],
                _frontier(doc["frontier"], "frontier"),
                since,
                doc["workspace"],
            )
        except ProtocolError as exc:
            raise _remote(exc) from exc


@dataclass(frozen=True, slots=True)
class BundleEnd:
    """The end of a verified bundle: how many entries it held and its digest.  The bundle's
    id is the first half of its digest, in hex."""

    count: int
    digest: bytes

    @property
    def bundle_id(self) -> str:
        return self.digest[:16].hex()


BundleEvent = BundleHeader | Entry | BundleEnd


def _signed(header_body: bytes, count: int, digest: bytes) -> bytes:
    return encode_canonical([_CONTEXT, header_body, count, digest])


class BundleWriter:
    """Produces a bundle's bytes: ``start``, then ``entry`` per entry, then ``finish``."""

    def __init__(self, key: SigningKey, header: BundleHeader) -> None:
        if key.public != header.exporter:
            raise LocalProtocolError("the exporter is the signing key", field="exporter")
        self._key = key
        self._body = header.encode()
        self._hash = hashlib.sha256()
        self.count = 0
        self.end: BundleEnd | None = None

    def _out(self, data: bytes) -> bytes:
        self._hash.update(data)
        return data

    def start(self) -> bytes:
        return self._out(MAGIC + encode_frame(self._body))

    def entry(self, entry: Entry) -> bytes:
        self.count += 1
        return self._out(encode_frame(encode_canonical([_ENTRY, entry.raw, entry.payload])))

    def finish(self) -> bytes:
        """The last frame; ``end`` then says what the bundle holds."""
        digest = self._hash.digest()
        sig = self._key.sign(_signed(self._body, self.count, digest))
        self.end = BundleEnd(self.count, digest)
        return encode_frame(encode_canonical([_END, self.count, digest, sig]))


class _Phase(enum.Enum):
    MAGIC = "magic"
    HEADER = "header"
    ENTRIES = "entries"
    DONE = "done"
    ERROR = "error"


# The one table of legal moves: (phase, frame tag) → the phase after it.
_MOVES: dict[tuple[_Phase, int], _Phase] = {
    (_Phase.HEADER, _HEADER): _Phase.ENTRIES,
    (_Phase.ENTRIES, _ENTRY): _Phase.ENTRIES,
    (_Phase.ENTRIES, _END): _Phase.DONE,
}
_LIMITS = {_HEADER: MAX_BUNDLE_HEADER_BYTES, _ENTRY: _MAX_RECORD_BYTES, _END: 256}


@dataclass(slots=True)
class _Chains:
    """Order and authenticity, one log at a time: the run being read is vouched for by the
    signature of its last entry (checked when the run ends)."""

    last: Entry | None = None
    done: set[LogId] = field(default_factory=set)

    def add(self, entry: Entry) -> None:
        last, log = self.last, entry.header.log
        if last is not None and last.header.log == log:
            if entry.header.seq <= last.header.seq:
                raise RemoteProtocolError(
                    f"seq {entry.header.seq} after {last.header.seq}", field="order"
                )
            if not linked(last, entry):
                self._close()
        else:
            self._close()
            if log in self.done:
                raise RemoteProtocolError("a log's entries are not together", field="order")
        self.last = entry

    def finish(self) -> None:
        self._close()

    def _close(self) -> None:
        last, self.last = self.last, None
        if last is None:
            return
        self.done.add(last.header.log)
        h = last.header
        if not verify_signature(h.writer, h.sig, h.signing_bytes()):
            raise RemoteProtocolError(
                f"entry {last.id.hex()} (seq {h.seq} of writer {h.writer.hex()[:16]}) is not "
                "authentic: its signature does not verify and no later entry vouches for it",
                field="entry",
            )


class BundleReader:
    """Sans-IO bundle decoder: ``feed`` bytes, take ``next_event`` until None, and call
    ``end_of_input`` when the file has no more.  Any error raises ``RemoteProtocolError`` and
    leaves the reader refusing further use."""

    def __init__(self) -> None:
        self._frames = FrameReader()
        self._phase = _Phase.MAGIC
        self._magic = b""
        self._hash = hashlib.sha256(MAGIC)
        self._chains = _Chains()
        self.header: BundleHeader | None = None
        self._header_body = b""
        self.count = 0

    def feed(self, data: bytes) -> None:
        self._usable()
        if len(self._magic) < len(MAGIC):
            take = len(MAGIC) - len(self._magic)
            self._magic, data = self._magic + data[:take], data[take:]
        if data:
            self._frames.feed(data)

    def next_event(self) -> BundleEvent | None:
        self._usable()
        try:
            return self._next()
        except ProtocolError as exc:
            self._phase = _Phase.ERROR
            raise _remote(exc) from exc

    def end_of_input(self) -> None:
        """The file ended: refuse it unless its last frame was read and nothing trails it."""
        self._usable()
        done, self._phase = self._phase is _Phase.DONE, _Phase.ERROR
        if not done:
            raise RemoteProtocolError("the bundle ends early (truncated)", field="bundle")
        if self._frames.buffered:
            raise RemoteProtocolError("bytes trail the bundle's last frame", field="bundle")
        self._phase = _Phase.DONE

    def _usable(self) -> None:
        if self._phase is _Phase.ERROR:
            raise LocalProtocolError("the reader has failed; start again", field="bundle")

    def _next(self) -> BundleEvent | None:
        if self._phase is _Phase.MAGIC:
            if not MAGIC.startswith(self._magic):
                raise RemoteProtocolError("not a memlane bundle", field="magic")
            if len(self._magic) < len(MAGIC):
                return None
            self._phase = _Phase.HEADER
        if self._phase is _Phase.DONE:
            if self._frames.buffered:
                raise RemoteProtocolError("bytes trail the bundle's last frame", field="bundle")
            return None
        body = self._frames.next_frame()
        if body is None:
            return None
        return self._frame(body)

    def _frame(self, body: bytes) -> BundleEvent:
        # A canonical body is a short array whose first item, the tag, is a one-byte integer.
        tag = body[1] if len(body) > 1 and 0x91 <= body[0] <= 0x9F else 0
        nxt = _MOVES.get((self._phase, tag))
        if nxt is None:
            raise RemoteProtocolError(
                f"frame of type {tag} is not allowed {self._phase.value}", field="frame"
            )
        if tag == _HEADER:
            scan_body(body, max_objects=_HEADER_OBJECTS, max_depth=_HEADER_DEPTH)
        doc = decode_canonical(body, what="frame", max_bytes=_LIMITS[tag])
        if tag != _END:
            self._hash.update(_PREFIX.pack(len(body)) + body)
        self._phase = nxt
        if tag == _HEADER:
            return self._take_header(body, doc)
        if tag == _ENTRY:
            return self._take_entry(doc)
        return self._take_end(doc)

    def _take_header(self, body: bytes, doc: Any) -> BundleHeader:
        if len(doc) != 2:
            raise RemoteProtocolError("must be [1, header]", field="header")
        self.header = BundleHeader.decode(doc[1])
        self._header_body = body
        return self.header

    def _take_entry(self, doc: Any) -> Entry:
        assert self.header is not None
        if len(doc) != 3 or not isinstance(doc[1], bytes):
            raise RemoteProtocolError("must be [2, header bytes, payload]", field="entry")
        if doc[2] is not None and not isinstance(doc[2], bytes):
            raise RemoteProtocolError("must be bytes or nil", field="payload")
        entry = Entry.decode(doc[1], doc[2])
        if entry.header.mesh != self.header.mesh:
            raise RemoteProtocolError("an entry of another mesh", field="mesh")
        self._chains.add(entry)
        self.count += 1
        return entry

    def _take_end(self, doc: Any) -> BundleEnd:
        assert self.header is not None
        if len(doc) != 4:
            raise RemoteProtocolError("must be [3, count, digest, sig]", field="end")
        _, count, digest, sig = doc
        self._chains.finish()
        if count != self.count:
            raise RemoteProtocolError(f"says {count} entries, holds {self.count}", field="count")
        if digest != self._hash.digest():
            raise RemoteProtocolError(
                "the digest does not match the bundle's bytes", field="digest"
            )
        if type(sig) is not bytes or not verify_signature(
            self.header.exporter, sig, _signed(self._header_body, count, digest)
        ):
            raise RemoteProtocolError("the exporter's signature does not verify", field="sig")
        return BundleEnd(count, digest)


@dataclass(frozen=True, slots=True)
class FrontierFile:
    """A node's frontier, written for an exporter to cut an incremental bundle from."""

    mesh: bytes
    node: bytes
    frontier: Frontier


def encode_frontier_file(file: FrontierFile) -> bytes:
    return FRONTIER_MAGIC + encode_canonical(
        [FORMAT_VERSION, file.mesh, file.node, file.frontier.rows()]
    )


def decode_frontier_file(data: bytes) -> FrontierFile:
    """Decode a frontier file or raise ``RemoteProtocolError``."""
    if data[: len(FRONTIER_MAGIC)] != FRONTIER_MAGIC:
        raise RemoteProtocolError("not a memlane frontier file", field="magic")
    body = data[len(FRONTIER_MAGIC) :]
    scan_body(body, max_objects=_HEADER_OBJECTS, max_depth=_HEADER_DEPTH)
    doc = decode_canonical(body, what="frontier file", max_bytes=MAX_BUNDLE_HEADER_BYTES)
    if not isinstance(doc, list) or len(doc) != 4 or doc[0] != FORMAT_VERSION:
        raise RemoteProtocolError("must be [1, mesh, node, tips]", field="frontier file")
    _, mesh, node, tips = doc
    if type(mesh) is not bytes or len(mesh) != 16:
        raise RemoteProtocolError("must be 16 bytes", field="mesh")
    if type(node) is not bytes or len(node) != 32:
        raise RemoteProtocolError("must be 32 bytes", field="node")
    return FrontierFile(mesh, node, _frontier(tips, "frontier"))
