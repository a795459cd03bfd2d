"""Entry headers: strict decoding of received bytes, validation when built, payload binding."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from protokit import EPOCH, KEY, MESH, seal_one

from protocol.clock import MAX_WALL_MS, Hlc
from protocol.entry import (
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_SEQ,
    Entry,
    decode_header,
)
from protocol.errors import LocalProtocolError, RemoteProtocolError

ENTRY = seal_one(2, hashlib.sha256(b"seq 1").digest())
NAMES = (
    "v",
    "mesh",
    "writer",
    "epoch",
    "seq",
    "prev",
    "hlc",
    "kind",
    "payload_hash",
    "payload_len",
    "sig",
)
BAD_VALUES: list[tuple[str, Any]] = [
    ("v", 0),
    ("v", True),
    ("v", "1"),
    ("v", None),
    ("v", 1.0),
    ("mesh", MESH[:15]),
    ("mesh", MESH + b"\x11"),
    ("mesh", "x" * 16),
    ("mesh", None),
    ("writer", KEY.public[:31]),
    ("writer", None),
    ("writer", 5),
    ("epoch", EPOCH + b"\x22"),
    ("epoch", []),
    ("epoch", EPOCH.hex()),
    ("seq", 0),
    ("seq", -1),
    ("seq", True),
    ("seq", "2"),
    ("seq", MAX_SEQ + 1),
    ("seq", 2.0),
    ("prev", bytes(31)),
    ("prev", bytes(33)),
    ("prev", "x" * 32),
    ("prev", False),
    ("kind", "SR.PUT"),
    ("kind", "sr"),
    ("kind", "sr.put."),
    ("kind", "sr..put"),
    ("kind", "a.b.c.d.e"),
    ("kind", "sr.p-t"),
    ("kind", b"sr.put"),
    ("kind", 5),
    ("kind", "s" * 32 + ".put"),
    ("payload_hash", bytes(31)),
    ("payload_hash", None),
    ("payload_len", -1),
    ("payload_len", MAX_PAYLOAD_BYTES + 1),
    ("payload_len", True),
    ("payload_len", 1.0),
    ("sig", bytes(63)),
    ("sig", bytes(65)),
    ("sig", None),
]
BAD_HLCS: list[Any] = [
    [1],
    [1, 2, 3],
    "x",
    None,
    {"wall": 1},
    [-1, 0],
    [True, 0],
    [0, 1 << 32],
    [0.0, 0],
    [MAX_WALL_MS + 1, 0],
    [0, -1],
    [0, "1"],
]


def _parts(entry: Entry = ENTRY) -> list[bytes]:
    fields = [*entry.header.signed_part(), entry.header.sig]
    return [msgpack.packb(f, use_bin_type=True) for f in fields]


def _raw(parts: list[bytes]) -> bytes:
    return bytes([0x90 | len(parts)]) + b"".join(parts)


def _with(name: str, encoded: bytes) -> bytes:
    parts = _parts()
    parts[NAMES.index(name)] = encoded
    return _raw(parts)


def _refused(raw: bytes, field: str) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_header(raw)
    assert info.value.field == field
    return info.value


def test_helpers_rebuild_the_real_encoding() -> None:
    assert _raw(_parts()) == ENTRY.raw
    assert decode_header(ENTRY.raw) == ENTRY.header


def test_entry_of_and_decode_agree() -> None:
    got = Entry.decode(ENTRY.raw, ENTRY.payload)
    assert got == ENTRY
    assert got.id == hashlib.sha256(ENTRY.raw).digest()
    assert got.header.log == (KEY.public, EPOCH)
    assert got.without_payload() == Entry(ENTRY.header, ENTRY.raw, ENTRY.id, None)
    assert Entry.decode(ENTRY.raw, None).payload is None
    assert Entry.decode(ENTRY.raw, None).with_payload(ENTRY.payload) == ENTRY


def test_a_payload_attached_unchecked_is_checked_on_demand() -> None:
    other = Entry.decode(ENTRY.raw, None).with_payload(b"\x80")
    with pytest.raises(RemoteProtocolError) as caught:
        other.check_payload()
    assert caught.value.field == "payload"


@pytest.mark.parametrize(
    ("name", "padded"),
    [
        ("v", b"\xcc\x01"),
        ("seq", b"\xcd\x00\x02"),
        ("seq", b"\xd0\x02"),
        ("payload_len", b"\xce" + ENTRY.header.payload_len.to_bytes(4, "big")),
        ("hlc", b"\x92\xcf" + ENTRY.header.hlc.wall.to_bytes(8, "big") + b"\xcc\x00"),
    ],
)
def test_integer_padded_to_a_wider_form_is_refused(name: str, padded: bytes) -> None:
    raw = _with(name, padded)
    assert msgpack.unpackb(raw) == msgpack.unpackb(ENTRY.raw)
    _refused(raw, "header")


@pytest.mark.parametrize("name", ["mesh", "writer", "epoch", "prev", "payload_hash", "sig"])
def test_str_where_bytes_belong_is_refused(name: str) -> None:
    value: bytes = getattr(ENTRY.header, name)
    _refused(_with(name, msgpack.packb(value.decode("latin-1"))), name)


def test_bytes_where_text_belongs_is_refused() -> None:
    _refused(_with("kind", msgpack.packb(b"sr.adjust", use_bin_type=True)), "kind")
    _refused(_with("kind", b"\xd9\x09sr.adjust"), "header")  # str8 for a fixstr


def test_bin_in_a_wider_form_is_refused() -> None:
    _refused(_with("sig", b"\xc5\x00\x40" + ENTRY.header.sig), "header")


@pytest.mark.parametrize("tail", [b"\x00", b"\xc0", ENTRY.raw, b"\x91\x01"])
def test_trailing_data_after_a_valid_header_is_refused(tail: bytes) -> None:
    _refused(ENTRY.raw + tail, "header")
    with pytest.raises(RemoteProtocolError):
        Entry.decode(ENTRY.raw + tail, ENTRY.payload)


def test_every_truncation_of_a_header_is_refused() -> None:
    for cut in range(len(ENTRY.raw)):
        with pytest.raises(RemoteProtocolError):
            decode_header(ENTRY.raw[:cut])


@pytest.mark.parametrize("ext", [b"\xd4\x05\x00", b"\xc7\x00\x05", b"\xd8\x01" + bytes(16)])
def test_ext_type_in_a_header_is_refused(ext: bytes) -> None:
    _refused(_with("sig", ext), "header")
    _refused(_with("prev", ext), "header")


def test_wrong_field_count_is_refused() -> None:
    _refused(_raw(_parts()[:-1]), "header")
    _refused(_raw([*_parts(), b"\xc0"]), "header")
    _refused(b"\x90", "header")


@pytest.mark.parametrize("doc", [{"v": 1}, 1, "header", b"x" * 10, None])
def test_a_header_that_is_not_an_array_is_refused(doc: Any) -> None:
    _refused(msgpack.packb(doc, use_bin_type=True), "header")


def test_unknown_envelope_version_is_refused_naming_v() -> None:
    err = _refused(_with("v", b"\x02"), "v")
    assert "unknown envelope version 2" in err.hint
    _refused(_raw([b"\x02"]), "v")  # a v2 header may have any shape; v is read first
    _refused(_raw([b"\x02", *_parts()[1:], b"\xc0"]), "v")


@pytest.mark.parametrize(("name", "bad"), BAD_VALUES)
def test_wrong_value_for_a_field_is_refused_on_receipt(name: str, bad: Any) -> None:
    _refused(_with(name, msgpack.packb(bad, use_bin_type=True)), name)


@pytest.mark.parametrize(("name", "bad"), BAD_VALUES)
def test_wrong_value_for_a_field_is_refused_when_built(name: str, bad: Any) -> None:
    with pytest.raises(LocalProtocolError) as info:
        replace(ENTRY.header, **{name: bad})
    assert info.value.field == name


@pytest.mark.parametrize("bad", BAD_HLCS)
def test_wrong_hlc_is_refused_on_receipt(bad: Any) -> None:
    _refused(_with("hlc", msgpack.packb(bad, use_bin_type=True)), "hlc")


def test_header_hlc_must_be_an_hlc_when_built() -> None:
    with pytest.raises(LocalProtocolError) as info:
        replace(ENTRY.header, hlc=(1, 2))
    assert info.value.field == "hlc"


def test_field_bounds_are_inclusive() -> None:
    h = replace(ENTRY.header, seq=MAX_SEQ, payload_len=MAX_PAYLOAD_BYTES, prev=None)
    assert decode_header(h.encode()) == h
    h = replace(h, payload_len=0, hlc=Hlc(MAX_WALL_MS, (1 << 32) - 1), kind="a1.b_2.c.d")
    assert decode_header(h.encode()) == h


def _sized(total: int) -> bytes:
    """A header-shaped array of exactly ``total`` bytes (its sig field padded)."""
    parts = _parts()
    pad = total - len(_raw(parts)) + len(parts[-1]) - 3
    parts[-1] = b"\xc5" + pad.to_bytes(2, "big") + bytes(pad)
    raw = _raw(parts)
    assert len(raw) == total
    return raw


def test_oversized_header_is_refused_before_decoding() -> None:
    _refused(_sized(MAX_HEADER_BYTES), "sig")
    err = _refused(_sized(MAX_HEADER_BYTES + 1), "header")
    assert "exceeds the limit" in err.hint


def test_payload_must_match_the_header() -> None:
    body = ENTRY.payload
    assert body is not None
    for tampered, hint in [
        (body[:-1], "length"),
        (body + b"\x00", "length"),
        (body[:-1] + bytes([body[-1] ^ 1]), "hash"),
    ]:
        with pytest.raises(RemoteProtocolError, match=hint) as info:
            Entry.decode(ENTRY.raw, tampered)
        assert info.value.field == "payload"
        with pytest.raises(RemoteProtocolError, match=hint):
            Entry(ENTRY.header, ENTRY.raw, ENTRY.id, tampered).check_payload()


def test_the_largest_valid_header_fits_the_limit() -> None:
    longest_kind = "a" * 31 + ("." + "b" * 31) * 3
    h = replace(
        ENTRY.header,
        seq=MAX_SEQ,
        hlc=Hlc(MAX_WALL_MS, (1 << 32) - 1),
        kind=longest_kind,
        payload_len=MAX_PAYLOAD_BYTES,
    )
    assert len(h.encode()) <= MAX_HEADER_BYTES
    assert decode_header(h.encode()) == h
