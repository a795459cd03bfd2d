"""Canonical msgpack: one spelling per value, and a decoder that refuses every other."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from protokit import FAST

from protocol.canonical import MAX_DOCUMENT_BYTES, decode_canonical, encode_canonical
from protocol.errors import RemoteProtocolError

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


def _refused(data: bytes) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_canonical(data, what="doc")
    assert info.value.field == "doc"
    return info.value


def test_maps_are_encoded_with_sorted_keys() -> None:
    assert encode_canonical({"b": 1, "a": 2}) == b"\x82\xa1a\x02\xa1b\x01"
    assert encode_canonical({"z": {"y": 1, "x": 2}}) == encode_canonical({"z": {"x": 2, "y": 1}})


def test_tuples_encode_as_arrays_and_bytes_as_bin() -> None:
    assert encode_canonical((1, 2)) == encode_canonical([1, 2]) == b"\x92\x01\x02"
    assert encode_canonical(b"ab") == b"\xc4\x02ab"
    assert encode_canonical("ab") == b"\xa2ab"


@FAST
@given(values)
def test_canonical_bytes_round_trip(value: Any) -> None:
    data = encode_canonical(value)
    decoded = decode_canonical(data, what="doc")
    assert decoded == value
    assert encode_canonical(decoded) == data


@pytest.mark.parametrize(
    "padded",
    [
        b"\xcc\x05",
        b"\xcd\x00\x05",
        b"\xce\x00\x00\x00\x05",
        b"\xcf" + bytes(7) + b"\x05",
        b"\xd0\x05",
        b"\xd1\x00\x05",
        b"\xd0\xff",
        b"\xcd\x00\xff",
        b"\xd1\xff\x80",
    ],
)
def test_integer_in_a_wider_form_is_refused(padded: bytes) -> None:
    assert msgpack.unpackb(padded) in (5, -1, 255, -128)
    _refused(padded)


@pytest.mark.parametrize(
    "wide",
    [
        b"\xd9\x02ab",
        b"\xda\x00\x02ab",
        b"\xc5\x00\x02ab",
        b"\xdc\x00\x01\x01",
        b"\xde\x00\x01\xa1a\x01",
    ],
)
def test_lengths_in_a_wider_form_are_refused(wide: bytes) -> None:
    msgpack.unpackb(wide)
    _refused(wide)


def test_unsorted_and_duplicate_map_keys_are_refused() -> None:
    _refused(b"\x82\xa1b\x01\xa1a\x02")
    _refused(b"\x82\xa1a\x01\xa1a\x02")
    assert decode_canonical(b"\x82\xa1a\x02\xa1b\x01", what="doc") == {"a": 2, "b": 1}


def test_float32_is_refused_float64_accepted() -> None:
    _refused(b"\xca" + struct.pack(">f", 0.5))
    assert decode_canonical(b"\xcb" + struct.pack(">d", 0.5), what="doc") == 0.5


@pytest.mark.parametrize(
    "ext", [b"\xd4\x05\x00", b"\xc7\x00\x05", b"\xc7\x01\x05\x00", b"\xd6\xff\x00\x00\x00\x00"]
)
def test_ext_types_are_refused(ext: bytes) -> None:
    _refused(ext)
    _refused(b"\x81\xa1x" + ext)


@pytest.mark.parametrize("tail", [b"\x00", b"\xc0", b"\x90", b"\xff" * 3])
def test_trailing_data_is_refused(tail: bytes) -> None:
    _refused(encode_canonical({"a": [1, 2]}) + tail)


def test_not_msgpack_is_refused() -> None:
    assert "not a msgpack document" in _refused(b"\xc1").hint
    _refused(b"")
    _refused(b"\xa3ab")
    _refused(b"\xa2\xff\xfe")  # str that is not UTF-8


def test_document_over_the_limit_is_refused_before_decoding() -> None:
    big = encode_canonical(b"x" * 100)
    assert decode_canonical(big, what="doc", max_bytes=len(big)) == b"x" * 100
    with pytest.raises(RemoteProtocolError, match="exceeds the limit") as info:
        decode_canonical(big, what="doc", max_bytes=len(big) - 1)
    assert info.value.field == "doc"
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        decode_canonical(b"\xc0" * (MAX_DOCUMENT_BYTES + 1), what="doc")


def test_hostile_lengths_and_nesting_are_refused() -> None:
    _refused(b"\xdd\xff\xff\xff\xff")  # array claiming 4 billion items
    _refused(b"\xc6\xff\xff\xff\xff")  # bin claiming 4 GiB
    _refused(b"\x91" * 5000 + b"\xc0")  # nested deeper than any document may be
