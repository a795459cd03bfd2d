"""Fuzzing the decoders: any input either decodes (and re-encodes to itself) or raises
RemoteProtocolError — nothing else."""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
from hypothesis import given
from hypothesis import strategies as st
from protokit import FAST, VALID, payloads, seal_one

from protocol.canonical import encode_canonical
from protocol.entry import Entry, Header, decode_header
from protocol.errors import RemoteProtocolError
from protocol.kinds import KINDS, decode_payload

ALL_KINDS = sorted(KINDS)
ENTRY = seal_one(7, hashlib.sha256(b"seq 6").digest())

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(1 << 63), (1 << 64) - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=40)
)
values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.text(max_size=12) | st.binary(max_size=4), inner, max_size=4)
    ),
    max_leaves=10,
)
header_like = st.lists(values, min_size=11, max_size=11).map(
    lambda fields: msgpack.packb(fields, use_bin_type=True)
)
noise = st.binary(max_size=600) | st.binary(max_size=64).map(lambda b: ENTRY.raw[:12] + b)


def _header_or_refusal(raw: bytes) -> Header | None:
    try:
        header = decode_header(raw)
    except RemoteProtocolError:
        return None
    assert header.encode() == raw
    return header


def _payload_or_refusal(kind: str, data: bytes) -> dict[str, Any] | None:
    try:
        value = decode_payload(kind, data)
    except RemoteProtocolError:
        return None
    assert encode_canonical(value) == data
    return value


@FAST
@given(noise | header_like)
def test_decode_header_decodes_or_refuses(raw: bytes) -> None:
    _header_or_refusal(raw)


@FAST
@given(noise | header_like, st.none() | st.binary(max_size=64))
def test_entry_decode_decodes_or_refuses(raw: bytes, payload: bytes | None) -> None:
    try:
        entry = Entry.decode(raw, payload)
    except RemoteProtocolError:
        return
    assert entry.raw == raw
    assert entry.id == hashlib.sha256(raw).digest()


@FAST
@given(st.sampled_from(ALL_KINDS), st.binary(max_size=300) | values.map(encode_canonical))
def test_decode_payload_decodes_or_refuses(kind: str, data: bytes) -> None:
    _payload_or_refusal(kind, data)


@FAST
@given(data=st.data())
def test_decode_payload_with_one_field_replaced(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(ALL_KINDS))
    payload = data.draw(payloads(kind))
    name = data.draw(st.sampled_from([*VALID[kind], *payload, "unknown"]))
    payload[name] = data.draw(values)
    _payload_or_refusal(kind, encode_canonical(payload))


@FAST
@given(st.integers(0, len(ENTRY.raw) - 1), st.integers(1, 255))
def test_a_mutated_header_is_refused_or_is_another_header(pos: int, mask: int) -> None:
    raw = ENTRY.raw[:pos] + bytes([ENTRY.raw[pos] ^ mask]) + ENTRY.raw[pos + 1 :]
    header = _header_or_refusal(raw)
    if header is not None:
        assert header != ENTRY.header
        assert Entry.decode(raw, None).id != ENTRY.id


@FAST
@given(st.integers(0, len(ENTRY.raw)), st.binary(min_size=1, max_size=3), st.booleans())
def test_bytes_inserted_or_removed_are_refused(pos: int, extra: bytes, insert: bool) -> None:
    raw = ENTRY.raw
    raw = raw[:pos] + extra + raw[pos:] if insert else raw[:pos] + raw[pos + len(extra) :]
    if raw != ENTRY.raw:
        assert _header_or_refusal(raw) != ENTRY.header
