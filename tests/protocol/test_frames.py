"""The frame splitter and the bounded body decoder: whole, byte by byte, with trailing data,
oversized prefixes refused before their body, and every msgpack limit enforced."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from protokit import FAST

from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import (
    MAX_BUFFERED_BYTES,
    MAX_FRAME_BYTES,
    BodyLimits,
    FrameReader,
    encode_frame,
    unpack_body,
)

LIMITS = BodyLimits(
    max_bin_len=8, max_str_len=8, max_array_len=4, max_map_len=1, max_objects=64, max_depth=4000
)


def test_a_frame_is_a_big_endian_length_then_the_body() -> None:
    assert encode_frame(b"\x93\x01\x02\x03") == b"\x00\x00\x00\x04\x93\x01\x02\x03"
    assert encode_frame(bytes(300))[:4] == b"\x00\x00\x01\x2c"


@pytest.mark.parametrize("size", [0, MAX_FRAME_BYTES + 1])
def test_a_body_out_of_bounds_cannot_be_framed(size: int) -> None:
    with pytest.raises(LocalProtocolError, match="a frame body is 1 to"):
        encode_frame(bytes(size))


def test_the_largest_body_frames() -> None:
    reader = FrameReader()
    reader.feed(encode_frame(bytes(MAX_FRAME_BYTES)))
    assert reader.next_frame() == bytes(MAX_FRAME_BYTES)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def _drain(reader: FrameReader) -> list[bytes]:
    out = []
    while (body := reader.next_frame()) is not None:
        out.append(body)
    return out


BODIES = [b"\x01", b"\x92\xa1a\xc4\x02hi", bytes(range(256)) * 3]


def test_frames_split_whole() -> None:
    reader = FrameReader()
    reader.feed(b"".join(map(encode_frame, BODIES)))
    assert _drain(reader) == BODIES
    assert reader.buffered == 0


def test_frames_split_byte_by_byte() -> None:
    reader = FrameReader()
    got: list[bytes] = []
    for byte in b"".join(map(encode_frame, BODIES)):
        reader.feed(bytes([byte]))
        got += _drain(reader)
    assert got == BODIES


def test_trailing_data_waits_for_the_rest_of_its_frame() -> None:
    reader = FrameReader()
    tail = encode_frame(b"\x05\x06\x07")[:5]
    reader.feed(encode_frame(b"\x01") + tail)
    assert _drain(reader) == [b"\x01"]
    assert reader.buffered == len(tail)
    reader.feed(b"\x06\x07")
    assert _drain(reader) == [b"\x05\x06\x07"]


@FAST
@given(st.lists(st.binary(min_size=1, max_size=300), max_size=8), st.lists(st.integers(0, 5000)))
def test_any_chunking_gives_the_same_frames(bodies: list[bytes], cuts: list[int]) -> None:
    reader = FrameReader()
    got: list[bytes] = []
    for chunk in _split(b"".join(map(encode_frame, bodies)), cuts):
        reader.feed(chunk)
        got += _drain(reader)
    assert got == bodies
    assert reader.buffered == 0


def test_an_oversized_frame_is_refused_from_its_prefix_alone() -> None:
    reader = FrameReader()
    reader.feed((MAX_FRAME_BYTES + 1).to_bytes(4, "big")[:3])
    assert reader.next_frame() is None  # three bytes say nothing yet
    reader.feed(b"\x01")
    with pytest.raises(RemoteProtocolError, match=f"exceeds the limit of {MAX_FRAME_BYTES}"):
        reader.next_frame()


def test_a_frame_at_the_limit_waits_for_its_body() -> None:
    reader = FrameReader()
    reader.feed(MAX_FRAME_BYTES.to_bytes(4, "big"))
    assert reader.next_frame() is None


def test_an_empty_frame_is_refused() -> None:
    reader = FrameReader()
    reader.feed(b"\x00\x00\x00\x00")
    with pytest.raises(RemoteProtocolError, match="never empty"):
        reader.next_frame()


def test_the_reader_refuses_to_hold_more_than_its_bound() -> None:
    reader = FrameReader()
    reader.feed(bytes(MAX_BUFFERED_BYTES - 1))
    with pytest.raises(LocalProtocolError, match="take frames before feeding more"):
        reader.feed(b"\x00\x00")


# --- the body decoder -------------------------------------------------------------------------


def test_a_body_within_limits_unpacks() -> None:
    body = msgpack.packb([1, "text", b"bin", {"k": None}], use_bin_type=True)
    assert unpack_body(body, LIMITS) == [1, "text", b"bin", {"k": None}]


@pytest.mark.parametrize(
    ("value", "limit"),
    [
        (b"x" * 9, "max_bin_len"),
        ("x" * 9, "max_str_len"),
        ([0] * 5, "max_array_len"),
        ({"a": 1, "b": 2}, "max_map_len"),
    ],
    ids=["bin", "str", "array", "map"],
)
def test_each_msgpack_limit_is_enforced(value: object, limit: str) -> None:
    body = msgpack.packb(value, use_bin_type=True)
    with pytest.raises(RemoteProtocolError, match=f"exceeds {limit}"):
        unpack_body(body, LIMITS)


@pytest.mark.parametrize(
    ("body", "hint"),
    [
        (b"\xc7\x00\x01", "ext type 1"),  # a zero-length ext
        (b"\xd4\x01\x00", "not msgpack within limits"),  # fixext 1
        (b"\x91" * 2000 + b"\x01", "not msgpack within limits"),  # nested too deep
        (b"\xa2\xff\xfe", "not msgpack within limits"),  # text that is not UTF-8
        (b"\x81\x01\x02", "not msgpack within limits"),  # an integer map key
        (b"\xc1", "not msgpack within limits"),  # the one unused byte
        (b"\x93\x01\x02", "ends inside a msgpack value"),
        (b"\xdd\xff\xff\xff\xff", "not msgpack within limits"),  # a 4-billion-item array
        (b"\x01\x02", "1 bytes trail the message"),
        (b"", "ends inside a msgpack value"),
    ],
)
def test_bad_bodies_are_remote_errors(body: bytes, hint: str) -> None:
    with pytest.raises(RemoteProtocolError, match=hint):
        unpack_body(body, LIMITS)


@FAST
@given(st.binary(max_size=200))
def test_any_body_unpacks_or_is_refused(body: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        unpack_body(body, LIMITS)
