"""Framing: length-prefixed msgpack bodies, split and unpacked within limits (docs/protocol.md §2).

A frame is a 4-byte big-endian unsigned body length ``n`` followed by ``n`` bytes of body, one
msgpack document.  The length is checked against ``MAX_FRAME_BYTES`` as soon as the prefix is
in, so an oversized frame is refused before a byte of its body is buffered; the body is then
unpacked with explicit msgpack limits, so no length inside it can make the decoder allocate
more than the frame already holds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "MAX_BUFFERED_BYTES",
    "MAX_FRAME_BYTES",
    "PREFIX_BYTES",
    "BodyLimits",
    "FrameReader",
    "encode_frame",
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
    """The msgpack limits a body is unpacked with: the largest ``bin``, ``str`` (in bytes),
    array and map anywhere in it."""

    max_bin_len: int
    max_str_len: int
    max_array_len: int
    max_map_len: int


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
        return bytes(self._buf[begin:end])


def _refuse_ext(code: int, data: bytes) -> Any:
    # max_ext_len=0 still lets a zero-length ext through; no message has any.
    raise ValueError(f"ext type {code} is not allowed")


def unpack_body(body: bytes, limits: BodyLimits) -> Any:
    """Unpack one msgpack document filling ``body`` exactly, or raise ``RemoteProtocolError``."""
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
    except msgpack.OutOfData as exc:
        raise RemoteProtocolError("frame body ends inside a msgpack value", field="body") from exc
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError) as exc:
        raise RemoteProtocolError(
            f"frame body is not msgpack within limits ({type(exc).__name__}: {exc})",
            field="body",
        ) from exc
    if unpacker.tell() != len(body):
        raise RemoteProtocolError(
            f"{len(body) - unpacker.tell()} bytes trail the message in its frame", field="body"
        )
    return value
