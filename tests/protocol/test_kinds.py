"""Kind registry and payload schemas: round trips per kind, refusals naming their field."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protokit import EPOCH, FAST, KEY, MESH, VALID, payloads

from protocol.canonical import encode_canonical
from protocol.clock import Hlc
from protocol.entry import MAX_PAYLOAD_BYTES, MAX_SEQ, Entry
from protocol.errors import LocalProtocolError, PayloadError, RemoteProtocolError
from protocol.kinds import KINDS, decode_payload, encode_payload, is_known, workspace_of
from protocol.schema import (
    Binary,
    Choice,
    Flag,
    Integer,
    Nested,
    NestedList,
    Number,
    Text,
    TextList,
    TextMap,
)
from protocol.signing import seal

ALL_KINDS = sorted(KINDS)
UUID_FIELDS = [
    (k, f.name)
    for k in ALL_KINDS
    for f in KINDS[k].schema.fields
    if isinstance(f.type, Text) and f.type.max_len == 36 and f.type.pattern
]
WRONG: dict[type, list[Any]] = {
    Text: [1, True, b"x", ["x"]],
    Choice: [1, "no-such-choice", b"private"],
    Integer: [True, "1", 1.0, -1],
    Number: [True, "1", [1]],
    Flag: [1, 0, "true"],
    Binary: ["x" * 32, b"\x01" * 31, 5],
    TextList: ["a", {"a": 1}, 1],
    TextMap: [["a"], "a", 1],
    Nested: [[], "x", 1],
    NestedList: [{}, "x"],
}


def _fields(kind: str) -> list[tuple[str, str]]:
    return [(kind, f.name) for f in KINDS[kind].schema.fields]


def _wrong_cases() -> list[tuple[str, str, Any]]:
    cases = []
    for kind in ALL_KINDS:
        for f in KINDS[kind].schema.fields:
            cases += [(kind, f.name, bad) for bad in WRONG[type(f.type)]]
            if not f.nullable:
                cases.append((kind, f.name, None))
    return cases


def _refused_both_ways(kind: str, payload: dict[str, Any], field: str) -> None:
    with pytest.raises(PayloadError) as authored:
        encode_payload(kind, payload)
    assert authored.value.field == field
    with pytest.raises(RemoteProtocolError) as received:
        decode_payload(kind, encode_canonical(payload))
    assert received.value.field == field


def test_valid_samples_cover_every_kind() -> None:
    assert set(VALID) == set(KINDS)
    for kind, payload in VALID.items():
        assert decode_payload(kind, encode_payload(kind, payload)) == payload


@pytest.mark.parametrize("kind", ALL_KINDS)
@FAST
@given(data=st.data())
def test_payloads_round_trip_through_a_sealed_entry(kind: str, data: st.DataObject) -> None:
    payload = data.draw(payloads(kind))
    seq = data.draw(st.integers(1, MAX_SEQ))
    prev = None if seq == 1 else data.draw(st.binary(min_size=32, max_size=32))
    hlc = Hlc(data.draw(st.integers(0, 1 << 45)), data.draw(st.integers(0, (1 << 32) - 1)))
    body = encode_payload(kind, payload)
    entry = seal(KEY, mesh=MESH, epoch=EPOCH, seq=seq, prev=prev, hlc=hlc, kind=kind, payload=body)
    got = Entry.decode(entry.raw, entry.payload)
    assert got == entry
    assert (got.header.seq, got.header.prev, got.header.hlc) == (seq, prev, hlc)
    assert got.payload is not None
    assert decode_payload(kind, got.payload) == payload
    assert encode_payload(kind, decode_payload(kind, got.payload)) == body


@pytest.mark.parametrize(
    ("kind", "name"),
    [(k, f.name) for k in ALL_KINDS for f in KINDS[k].schema.fields if f.required],
)
def test_missing_required_field_is_refused(kind: str, name: str) -> None:
    payload = {k: v for k, v in VALID[kind].items() if k != name}
    _refused_both_ways(kind, payload, name)


@pytest.mark.parametrize(
    "name",
    [f.name for f in KINDS["call.window"].schema.by_name["row"].type.schema.fields if f.required],
)
def test_missing_nested_field_is_refused(name: str) -> None:
    row = {k: v for k, v in VALID["call.window"]["row"].items() if k != name}
    _refused_both_ways("call.window", {**VALID["call.window"], "row": row}, f"row.{name}")


@pytest.mark.parametrize(("kind", "name", "bad"), _wrong_cases())
def test_wrong_type_is_refused(kind: str, name: str, bad: Any) -> None:
    _refused_both_ways(kind, {**VALID[kind], name: bad}, name)


@pytest.mark.parametrize(
    ("kind", "name"),
    [(k, f.name) for k in ALL_KINDS for f in KINDS[k].schema.fields if isinstance(f.type, Text)],
)
def test_over_long_text_is_refused(kind: str, name: str) -> None:
    limit = KINDS[kind].schema.by_name[name].type.max_len
    _refused_both_ways(kind, {**VALID[kind], name: "a" * (limit + 1)}, name)


def test_text_bounds_are_inclusive() -> None:
    payload = {**VALID["sr.correct"], "reason": "r" * 2000, "title": ""}
    assert decode_payload("sr.correct", encode_payload("sr.correct", payload)) == payload
    _refused_both_ways("sr.correct", {**payload, "reason": ""}, "reason")


@pytest.mark.parametrize(("kind", "name"), UUID_FIELDS)
@pytest.mark.parametrize(
    "bad",
    [
        "not-a-uuid",
        "0192A3B4-C5D6-7E8F-9A0B-1C2D3E4F5A6B",
        "0192a3b4c5d67e8f9a0b1c2d3e4f5a6b",
        "0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6g",
        "{192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6}",
    ],
)
def test_bad_uuid_is_refused(kind: str, name: str, bad: str) -> None:
    _refused_both_ways(kind, {**VALID[kind], name: bad}, name)


def test_uuid_fields_are_found() -> None:
    assert ("sr.put", "sr_id") in UUID_FIELDS
    assert ("episode.record", "prev_id") in UUID_FIELDS


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_unknown_field_is_refused_when_authoring(kind: str) -> None:
    with pytest.raises(PayloadError) as info:
        encode_payload(kind, {**VALID[kind], "zz_future": 1})
    assert info.value.field == "zz_future"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_unknown_field_on_receipt_is_accepted_and_ignored(kind: str) -> None:
    got = decode_payload(kind, encode_canonical({**VALID[kind], "zz_future": {"x": [1.5]}}))
    assert {k: v for k, v in got.items() if k != "zz_future"} == VALID[kind]


def test_unknown_nested_field_is_refused_authoring_and_ignored_on_receipt() -> None:
    payload = {**VALID["call.window"], "row": {**VALID["call.window"]["row"], "later": 1}}
    with pytest.raises(PayloadError) as info:
        encode_payload("call.window", payload)
    assert info.value.field == "row.later"
    assert decode_payload("call.window", encode_canonical(payload)) == payload


@pytest.mark.parametrize("kind", ["episode.record", "episode.amend"])
@pytest.mark.parametrize("name", ["task_result", "trust"])
@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, 1.5e15, pytest.param(10**400, id="huge-int")]
)
def test_non_finite_or_out_of_range_numbers_are_refused(kind: str, name: str, bad: Any) -> None:
    payload = {**VALID[kind], name: bad}
    with pytest.raises(PayloadError) as info:
        encode_payload(kind, payload)
    assert info.value.field == name
    if isinstance(bad, float):  # msgpack cannot carry the int; it can carry the float
        _refused_both_ways(kind, payload, name)


@pytest.mark.parametrize(
    ("kind", "change", "field"),
    [
        ("sr.put", {"tags": ["a", "a"]}, "tags"),
        ("sr.put", {"tags": ["a", 1]}, "tags[1]"),
        ("sr.put", {"links": ["nope"]}, "links[0]"),
        ("sr.put", {"private_fields": {"bad key": "v"}}, "private_fields key"),
        ("sr.put", {"private_fields": {"k": "v" * 10_001}}, "private_fields.k"),
        ("sr.put", {"workspace": "-leading-dash"}, "workspace"),
        ("sr.put", {"content_time": 253_402_300_800_000}, "content_time"),
        ("member.add", {"workspaces": []}, "workspaces"),
        ("member.add", {"workspaces": ["**"]}, "workspaces[0]"),
        ("episode.record", {"trust": 1.01}, "trust"),
        ("episode.record", {"duration_ms": 1 << 53}, "duration_ms"),
        (
            "call.window",
            {"row": {**VALID["call.window"]["row"], "differs": {"extra": []}}},
            "row.differs.extra",
        ),
        (
            "call.window",
            {"row": {**VALID["call.window"]["row"], "asked": {"from": "x"}}},
            "row.asked.to",
        ),
    ],
)
def test_item_level_refusals_name_the_item(kind: str, change: dict[str, Any], field: str) -> None:
    _refused_both_ways(kind, {**VALID[kind], **change}, field)


@pytest.mark.parametrize("payload", [[], "x", None, 1])
def test_a_payload_must_be_a_map(payload: Any) -> None:
    with pytest.raises(PayloadError) as info:
        encode_payload("sr.put", payload)
    assert info.value.field == "payload"
    with pytest.raises(RemoteProtocolError):
        decode_payload("sr.put", encode_canonical(payload))


def test_binary_keys_are_refused_on_receipt() -> None:
    with pytest.raises(RemoteProtocolError, match="keys must be text"):
        decode_payload("sr.adjust", encode_canonical({**VALID["sr.adjust"], b"k": 1}))


def test_unknown_kind_cannot_be_authored() -> None:
    with pytest.raises(LocalProtocolError) as info:
        encode_payload("x.future", {})
    assert info.value.field == "kind"
    assert not is_known("x.future")
    assert all(is_known(k) for k in KINDS)


def test_unsorted_map_in_a_payload_is_refused() -> None:
    body = encode_payload("sr.adjust", VALID["sr.adjust"])
    unsorted = msgpack.packb(dict(sorted(VALID["sr.adjust"].items(), reverse=True)))
    assert sorted(unsorted) == sorted(body)
    assert unsorted != body
    with pytest.raises(RemoteProtocolError) as info:
        decode_payload("sr.adjust", unsorted)
    assert info.value.field == "payload"


def test_float32_in_a_payload_is_refused() -> None:
    payload = {**VALID["episode.amend"], "trust": 0.5}
    assert decode_payload("episode.amend", encode_payload("episode.amend", payload)) == payload
    single = msgpack.packb(dict(sorted(payload.items())), use_single_float=True)
    assert msgpack.unpackb(single) == payload
    with pytest.raises(RemoteProtocolError) as info:
        decode_payload("episode.amend", single)
    assert info.value.field == "payload"


def test_trailing_data_after_a_payload_is_refused() -> None:
    body = encode_payload("sr.adjust", VALID["sr.adjust"])
    with pytest.raises(RemoteProtocolError):
        decode_payload("sr.adjust", body + b"\xc0")


def _payload_of_size(size: int) -> dict[str, Any]:
    """An sr.put payload whose canonical encoding is exactly ``size`` bytes."""
    chars = 100_000  # the most sr.put's text may hold
    extra = size - len(encode_canonical({**VALID["sr.put"], "text": "a" * chars}))
    wide, odd = divmod(extra, 2)  # "€" in place of "a" adds two bytes, "é" one
    text = "€" * wide + "é" * odd + "a" * (chars - wide - odd)
    payload = {**VALID["sr.put"], "text": text}
    assert len(encode_canonical(payload)) == size
    return payload


def test_payload_at_the_limit_is_accepted() -> None:
    payload = _payload_of_size(MAX_PAYLOAD_BYTES)
    assert decode_payload("sr.put", encode_payload("sr.put", payload)) == payload


def test_oversized_payload_is_refused_both_ways() -> None:
    payload = _payload_of_size(MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(PayloadError) as authored:
        encode_payload("sr.put", payload)
    assert authored.value.field == "payload"
    with pytest.raises(RemoteProtocolError, match="exceeds the limit") as received:
        decode_payload("sr.put", encode_canonical(payload))
    assert received.value.field == "payload"


@pytest.mark.parametrize(
    ("kind", "want"),
    [
        ("sr.put", "team"),
        ("sr.correct", "team"),
        ("sr.adjust", "team"),
        ("episode.record", "team"),
        ("episode.amend", "team"),
        ("episode.forget", "team"),
        ("call.window", "team"),
        ("member.add", None),
        ("member.revoke", None),
    ],
)
def test_workspace_of_names_the_workspace_written_into(kind: str, want: str | None) -> None:
    assert workspace_of(kind, VALID[kind]) == want


def test_workspace_of_unknown_kind_or_odd_value_is_none() -> None:
    assert workspace_of("x.future", {"workspace": "team"}) is None
    assert workspace_of("sr.put", {"workspace": 5}) is None
    assert workspace_of("sr.put", {**VALID["sr.put"], "workspace": "other"}) == "other"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(KINDS)), st.data())
def test_the_fast_path_and_the_detailed_checks_agree(kind: str, data: st.DataObject) -> None:
    """``Schema.ok`` (the fast path) is True exactly when no detailed check refuses."""
    payload = dict(data.draw(payloads(kind)))
    key = data.draw(st.sampled_from(sorted(payload)))
    payload[key] = data.draw(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(),
            st.text(max_size=80),
            st.binary(max_size=40),
            st.lists(st.text(max_size=5), max_size=3),
        )
    )
    schema = KINDS[kind].schema
    for authoring in (True, False):
        try:
            schema.check(payload, authoring=authoring)
            refused = False
        except PayloadError:
            refused = True
        assert schema.ok(payload, authoring) is not refused
