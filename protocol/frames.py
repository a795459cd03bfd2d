"""Framing: length-prefixed msgpack bodies, split and unpacked within limits (docs/protocol.md §2).

A frame is a 4-byte big-endian unsigned body length ``n`` followed by ``n`` bytes of body, one
msgpack document.  The length is checked against ``MAX_FRAME_BYTES`` as soon as the prefix is
in, so an oversized frame is refused before a byte of its body is buffered; the body is then
scanned, and only then unpacked with explicit msgpack limits.  The scan reads msgpack headers
without building anything and refuses a body holding more objects or deeper nesting than its
limits allow: an empty array is one byte but a Python list of some seventy, so lengths alone
cannot bound what unpacking allocates — a count of objects does (docs/protocol.md §2).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.errors import LocalProtocolError, OverLimits, RemoteProtocolError

__all__ = [
    "MAX_BUFFERED_BYTES",
    "MAX_FRAME_BYTES",
    "PREFIX_BYTES",
    "BodyLimits",
    "FrameReader",
    "encode_frame",
    "scan_body",
    "unpack_body",
]

MAX_FRAME_BYTES = 4 * 1024 * 1024
"""The largest frame body either side may send."""

PREFIX_BYTES = 4

MAX_BUFFERED_BYTES = 2 * (PREFIX_BYTES + MAX_FRAME_BYTES)
"""The most unread bytes a reader holds: one incomplete frame plus one more chunk of input.
A caller that drains every frame before feeding again never comes near it."""

_PREFIX = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The limits a body is unpacked with: the largest ``bin``, ``str`` (in bytes), array and
    map anywhere in it, how many objects it holds in all (every value, containers included),
    and how deep its containers nest (a bare array is depth 1)."""

    max_bin_len: int
    max_str_len: int
    max_array_len: int
    max_map_len: int
    max_objects: int
    max_depth: int


def encode_frame(body: bytes) -> bytes:
    """``body`` behind its length prefix; a body out of bounds is ``LocalProtocolError``."""
    if not 0 < len(body) <= MAX_FRAME_BYTES:
        raise LocalProtocolError(
            f"a frame body is 1 to {MAX_FRAME_BYTES} bytes, not {len(body)}", field="frame"
        )
    return _PREFIX.pack(len(body)) + body


class FrameReader:
    """Splits a byte stream into frame bodies.  ``feed`` bytes in; ``next_frame`` returns one
    body, or None until a whole frame is buffered."""

    __slots__ = ("_buf", "_start")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame."""
        return len(self._buf) - self._start

    def feed(self, data: bytes) -> None:
        if self.buffered + len(data) > MAX_BUFFERED_BYTES:
            raise LocalProtocolError(
                f"more than {MAX_BUFFERED_BYTES} bytes unread; take frames before feeding more",
                field="buffer",
            )
        if self._start:  # drop what was consumed, once per feed rather than once per frame
            del self._buf[: self._start]
            self._start = 0
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole body, or None; a bad length prefix raises ``RemoteProtocolError``
        as soon as its four bytes are in."""
        if self.buffered < PREFIX_BYTES:
            return None
        (length,) = _PREFIX.unpack_from(self._buf, self._start)
        if length > MAX_FRAME_BYTES:
            raise RemoteProtocolError(
                f"frame of {length} bytes exceeds the limit of {MAX_FRAME_BYTES}",
                field="frame_length",
            )
        if length == 0:
            raise RemoteProtocolError("a frame body is never empty", field="frame")
        begin = self._start + PREFIX_BYTES
        end = begin + length
        if len(self._buf) < end:
            return None
        self._start = end
        with memoryview(self._buf) as view:  # one copy of the body, not a slice and a copy
            return bytes(view[begin:end])


# Bytes a msgpack header takes beyond its first, for types whose size is fixed (ints, floats,
# fixext: its type byte and data) or given by a length field (bin, str, ext: the length field;
# ext adds its type byte below).
_FIXED = {
    0xC0: 0,
    0xC2: 0,
    0xC3: 0,
    0xCA: 4,
    0xCB: 8,
    0xCC: 1,
    0xCD: 2,
    0xCE: 4,
    0xCF: 8,
    0xD0: 1,
    0xD1: 2,
    0xD2: 4,
    0xD3: 8,
    0xD4: 2,
    0xD5: 3,
    0xD6: 5,
    0xD7: 9,
    0xD8: 17,
}
_SIZED = {  # length bytes, and bytes after the length field before the data (ext's type)
    0xC4: (1, 0),
    0xC5: (2, 0),
    0xC6: (4, 0),
    0xC7: (1, 1),
    0xC8: (2, 1),
    0xC9: (4, 1),
    0xD9: (1, 0),
    0xDA: (2, 0),
    0xDB: (4, 0),
}
_CONTAINER = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}  # length bytes, per item


def _over(what: str) -> OverLimits:
    return OverLimits(f"frame body is not msgpack within limits ({what})", field="body")


def scan_body(body: bytes, *, max_objects: int, max_depth: int) -> None:
    """Refuse ``body`` with ``RemoteProtocolError`` if its first document holds more than
    ``max_objects`` objects or nests containers deeper than ``max_depth``.  Nothing is built;
    a body that is not msgpack at all is left for the unpacker to refuse."""
    pos, end, objects = 0, len(body), 0
    owed = [1]  # items still owed by each open container; the bottom one is the document
    while owed:
        if not owed[-1]:
            owed.pop()
            continue
        owed[-1] -= 1
        if pos >= end:
            return
        objects += 1
        if objects > max_objects:
            raise _over(f"more than {max_objects} objects")
        byte = body[pos]
        pos += 1
        if byte < 0x80 or byte >= 0xE0:  # fixint
            continue
        if byte < 0xA0 or byte in _CONTAINER:
            if byte < 0xA0:  # fixmap, fixarray
                count = (byte & 0x0F) * (2 if byte < 0x90 else 1)
            else:
                size, per = _CONTAINER[byte]
                count = int.from_bytes(body[pos : pos + size]) * per
                pos += size
            if len(owed) > max_depth:
                raise _over(f"nested deeper than {max_depth}")
            owed.append(count)
        elif byte < 0xC0:  # fixstr
            pos += byte & 0x1F
        elif byte in _FIXED:
            pos += _FIXED[byte]
        elif byte in _SIZED:
            size, extra = _SIZED[byte]
            pos += size + extra + int.from_bytes(body[pos : pos + size])
        else:  # 0xc1, never used
            return


def _refuse_ext(code: int, _data: bytes) -> Any:
    # max_ext_len=0 still lets a zero-length ext through; no message has any.
    raise ValueError(f"ext type {code} is not allowed")


def unpack_body(body: bytes, limits: BodyLimits) -> Any:
    """Unpack one msgpack document filling ``body`` exactly, or raise ``RemoteProtocolError``.
    On failure nothing decoded stays reachable from the error."""
    scan_body(body, max_objects=limits.max_objects, max_depth=limits.max_depth)
    unpacker = msgpack.Unpacker(
        raw=False,
        use_list=True,
        strict_map_key=True,
        max_buffer_size=MAX_FRAME_BYTES,
        max_bin_len=limits.max_bin_len,
        max_str_len=limits.max_str_len,
        max_array_len=limits.max_array_len,
        max_map_len=limits.max_map_len,
        max_ext_len=0,
        ext_hook=_refuse_ext,
    )
    try:
        unpacker.feed(body)
        value = unpacker.unpack()
        used = unpacker.tell()
    except msgpack.OutOfData as exc:
        failure = RemoteProtocolError("frame body ends inside a msgpack value", field="body")
        failure.__cause__ = exc
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        failure = _over(f"{type(exc).__name__}: {exc}")
        failure.__cause__ = exc
    else:
        if used == len(body):
            return value
        del value
        failure = RemoteProtocolError(
            f"{len(body) - used} bytes trail the message in its frame", field="body"
        )
    del unpacker  # it may hold a partly built document; the error's traceback holds this frame
    try:
        raise failure
    finally:  # nor may this frame hold its error: that is a cycle, freed only by a collection
        del failure
