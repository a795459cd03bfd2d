"""Messages: golden vectors pin the wire format; every message decodes whole, byte by byte
through the frame splitter, and refuses trailing or missing bytes; every field limit is a
LocalProtocolError when built and a RemoteProtocolError when it arrives."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from protokit import FAST

from protocol.batch import MAX_BATCH_ENTRIES, batch_room, entry_cost
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES, FrameReader, encode_frame
from protocol.frontier import Frontier, FrontierPart, Tip
from protocol.messages import (
    MAX_CREDIT,
    MAX_ERROR_TEXT,
    MAX_FEATURES,
    Bye,
    Credit,
    Entries,
    Error,
    ForkProof,
    FrontierDigest,
    Hello,
    Message,
    Push,
    decode_message,
    encode_message,
)

GOLDEN = json.loads((Path(__file__).parent / "golden" / "messages.json").read_text("utf-8"))
VECTORS: list[dict[str, Any]] = GOLDEN["messages"]
CLASSES = {c.__name__: c for c in (Hello, FrontierDigest, FrontierPart, Entries, Credit, Push,
                                   ForkProof, Error, Bye)}  # fmt: skip
MESH, NODE = b"\x11" * 16, b"\x22" * 32
TIP = Tip(b"\x01" * 32, b"\x02" * 8, 5, b"\x03" * 32)
PAIR = (b"\x90" * 100, b"payload")


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$bin"}:
        return bytes.fromhex(value["$bin"])
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


def _message(vec: dict[str, Any]) -> Message:
    fields = {k: _from_json(v) for k, v in vec["fields"].items()}
    if vec["type"] == "FrontierPart":
        fields["tips"] = tuple(Tip(**{k: _from_json(v) for k, v in t.items()})
                               for t in vec["fields"]["tips"])  # fmt: skip
    message: Message = CLASSES[vec["type"]](**fields)
    return message


def _body(vec: dict[str, Any]) -> bytes:
    return bytes.fromhex(vec["frame"])[4:]


vectors = pytest.mark.parametrize("vec", VECTORS, ids=[v["name"] for v in VECTORS])


def test_vectors_cover_every_message_type() -> None:
    assert {v["type"] for v in VECTORS} == set(CLASSES)


@vectors
def test_the_fields_encode_to_the_golden_frame(vec: dict[str, Any]) -> None:
    assert encode_frame(encode_message(_message(vec))).hex() == vec["frame"]


@vectors
def test_the_golden_frame_decodes_whole(vec: dict[str, Any]) -> None:
    reader = FrameReader()
    reader.feed(bytes.fromhex(vec["frame"]))
    body = reader.next_frame()
    assert body is not None
    assert decode_message(body) == _message(vec)
    assert reader.next_frame() is None
    assert reader.buffered == 0


@vectors
def test_the_golden_frame_decodes_byte_by_byte(vec: dict[str, Any]) -> None:
    frame = bytes.fromhex(vec["frame"])
    reader = FrameReader()
    for i, byte in enumerate(frame):
        reader.feed(bytes([byte]))
        body = reader.next_frame()
        assert (body is None) == (i < len(frame) - 1)
    assert body is not None
    assert decode_message(body) == _message(vec)


@vectors
def test_trailing_data_after_the_frame_waits_for_its_own(vec: dict[str, Any]) -> None:
    frame = bytes.fromhex(vec["frame"])
    reader = FrameReader()
    reader.feed(frame + frame[:5])
    body = reader.next_frame()
    assert body is not None
    assert decode_message(body) == _message(vec)
    assert reader.next_frame() is None
    assert reader.buffered == 5


@vectors
def test_trailing_bytes_inside_a_frame_body_are_refused(vec: dict[str, Any]) -> None:
    with pytest.raises(RemoteProtocolError, match="1 bytes trail the message"):
        decode_message(_body(vec) + b"\xc0")


@vectors
def test_every_truncated_body_is_refused(vec: dict[str, Any]) -> None:
    body = _body(vec)
    for end in range(len(body)):
        with pytest.raises(RemoteProtocolError):
            decode_message(body[:end])


def _raw(*doc: Any) -> bytes:
    packed: bytes = msgpack.packb(list(doc), use_bin_type=True)
    return packed


HELLO = [1, 1, 0, MESH, NODE, []]
TIP_ROW = [TIP.writer, TIP.epoch, TIP.seq, TIP.head]

# (name, body arriving, expected hint): each is refused with a RemoteProtocolError.
BAD_BODIES: list[tuple[str, bytes, str]] = [
    ("not an array", b"\x01", "starts with its type"),
    ("empty array", _raw(), "starts with its type"),
    ("type is text", _raw("hello"), "starts with its type"),
    ("type is a bool", _raw(True), "starts with its type"),
    ("unknown type", _raw(99, 1), "unknown message type 99"),
    ("a map", msgpack.packb({"t": 1}), "not msgpack within limits"),
    ("a zero-length ext", b"\x92\x09\xc7\x00\x01", "not msgpack within limits"),
    ("a float type", b"\x91\xcb" + bytes(8), "starts with its type"),
    ("hello arity", _raw(*HELLO[:-1]), "has 5 fields"),
    ("hello mesh short", _raw(1, 1, 0, MESH[:15], NODE, []), "must be 16 bytes"),
    ("hello mesh as text", _raw(1, 1, 0, "x" * 16, NODE, []), "must be 16 bytes"),
    ("hello major negative", _raw(1, -1, 0, MESH, NODE, []), "integer in [0, 65535]"),
    ("hello features unsorted", _raw(1, 1, 0, MESH, NODE, ["push", "a"]), "strictly ascending"),
    ("hello features repeated", _raw(1, 1, 0, MESH, NODE, ["a", "a"]), "strictly ascending"),
    ("hello feature upper case", _raw(1, 1, 0, MESH, NODE, ["Push"]), "lower-case"),
    ("hello features not an array", _raw(1, 1, 0, MESH, NODE, "push"), "must be an array"),
    ("too many features", _raw(1, 1, 0, MESH, NODE, [f"f{i:02}" for i in range(33)]),
     "0 to 32 items"),
    ("digest short", _raw(2, b"\x00" * 31), "must be 32 bytes"),
    ("frontier tip short", _raw(3, [TIP_ROW[:3]]), "each is [writer, epoch, seq, head]"),
    ("frontier seq 0", _raw(3, [[*TIP_ROW[:2], 0, TIP.head]]), "integer in [1,"),
    ("frontier unsorted", _raw(3, [[b"\x02" * 32, *TIP_ROW[1:]], TIP_ROW]), "strictly ascending"),
    ("frontier repeated", _raw(3, [TIP_ROW, TIP_ROW]), "strictly ascending"),
    ("frontier beyond its limit", _raw(3, [TIP_ROW] * 10_001), "not msgpack within limits"),
    ("entries empty, not done", _raw(4, [], False), "1 to 1024 items"),
    ("entries done not a bool", _raw(4, [], 1), "must be a bool"),
    ("entries pair of three", _raw(4, [[b"h", None, None]], True), "(header, payload) pair"),
    ("entries header empty", _raw(4, [[b"", None]], True), "1 to 512 bytes"),
    ("entries header too long", _raw(4, [[bytes(513), None]], True), "1 to 512 bytes"),
    ("entries payload as text", _raw(4, [[b"h", "p"]], True), "0 to 262144 bytes"),
    ("entries payload too long", _raw(4, [[b"h", bytes(MAX_PAYLOAD_BYTES + 1)]], True),
     "not msgpack within limits"),
    ("entries beyond the batch limit", _raw(4, [[b"h", None]] * 1025, False), "1 to 1024 items"),
    ("push empty", _raw(6, []), "1 to 1024 items"),
    ("credit of nothing", _raw(5, 0, 0), "a grant of nothing"),
    ("credit beyond the limit", _raw(5, MAX_CREDIT + 1, 0), "integer in [0, 4294967295]"),
    ("credit as a bool", _raw(5, True, 1), "integer in"),
    ("fork proof of one header twice", _raw(7, b"h", b"h"), "the same"),
    ("fork proof header too long", _raw(7, b"h", bytes(513)), "1 to 512 bytes"),
    ("error text too long", _raw(8, 1, "x" * 1025, []), "text of at most 1024"),
    ("error text beyond the msgpack limit", _raw(8, 1, "é" * 2049, []),
     "not msgpack within limits"),
    ("error versions unsorted", _raw(8, 2, "", [2, 1]), "strictly ascending"),
    ("error code negative", _raw(8, -1, "", []), "integer in [0, 65535]"),
    ("bye with a field", _raw(9, 1), "has 0 fields"),
    ("text that is not UTF-8", b"\x94\x08\x01\xa2\xff\xfe\x90", "not msgpack within limits"),
    ("a wide integer", b"\x93\x05\xcd\x00\x01\x01", "not canonical"),
    ("a wide type", b"\x91\xcc\x09", "not canonical"),
    ("bytes as bin16", b"\x92\x02\xc5\x00\x20" + bytes(32), "not canonical"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "hint"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES]
)
def test_bad_bodies_are_refused_with_a_hint(body: bytes, hint: str) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(body)
    assert hint in str(caught.value)


# (name, builder, field): each raises LocalProtocolError naming the field.
BAD_BUILDS: list[tuple[str, Any, str]] = [
    ("hello node", lambda: Hello(1, 0, MESH, b"x"), "node"),
    ("hello features as list", lambda: Hello(1, 0, MESH, NODE, ["a"]), "features"),  # type: ignore[arg-type]
    ("hello too many features",
     lambda: Hello(1, 0, MESH, NODE, tuple(f"f{i:02}" for i in range(MAX_FEATURES + 1))),
     "features"),
    ("tip epoch", lambda: Tip(TIP.writer, b"\x00", 1, TIP.head), "epoch"),
    ("frontier of non-tips", lambda: FrontierPart((TIP_ROW,)), "tips"),  # type: ignore[arg-type]
    ("frontier unsorted", lambda: FrontierPart((Tip(b"\x09" * 32, *TIP_ROW[1:]), TIP)), "tips"),
    ("frontier beyond a part", lambda: FrontierPart((TIP,) * 10_001), "tips"),
    ("whole frontier unsorted", lambda: Frontier((Tip(b"\x09" * 32, *TIP_ROW[1:]), TIP)), "tips"),
    ("entries too many", lambda: Entries((PAIR,) * (MAX_BATCH_ENTRIES + 1)), "entries"),
    ("entries pair as list", lambda: Entries(([b"h", None],)), "entries"),  # type: ignore[arg-type]
    ("entries header too long", lambda: Entries(((bytes(MAX_HEADER_BYTES + 1), None),)),
     "header"),
    ("push empty", lambda: Push(()), "entries"),
    ("credit negative", lambda: Credit(-1, 5), "entries"),
    ("credit of nothing", lambda: Credit(0, 0), "credit"),
    ("fork proof same", lambda: ForkProof(b"h", b"h"), "second"),
    ("error text", lambda: Error(1, "x" * (MAX_ERROR_TEXT + 1)), "text"),
    ("error version out of range", lambda: Error(2, "", (70_000,)), "versions"),
    ("digest long", lambda: FrontierDigest(bytes(33)), "digest"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("build", "field"), [b[1:] for b in BAD_BUILDS], ids=[b[0] for b in BAD_BUILDS]
)
def test_invalid_messages_cannot_be_built(build: Any, field: str) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        build()
    assert caught.value.field == field


def test_an_error_code_is_held_as_a_plain_integer() -> None:
    from protocol.messages import ErrorCode

    error = Error(ErrorCode.MESH, "other mesh")
    assert type(error.code) is int
    assert decode_message(encode_message(error)) == error


# --- the frontier digest and what a peer lacks ------------------------------------------------


def _tip(n: int, seq: int, head: int = 0) -> Tip:
    return Tip(bytes([n]) * 32, b"\x00" * 8, seq, bytes([head or n]) * 32)


def test_the_digest_is_sha256_of_the_sorted_tips_array() -> None:
    tips = [_tip(3, 7), _tip(1, 2), _tip(2, 9)]
    ordered = sorted(tips, key=lambda t: t.writer)
    rows = [[t.writer, t.epoch, t.seq, t.head] for t in ordered]
    assert Frontier.of(tips).digest() == hashlib.sha256(msgpack.packb(rows)).digest()
    assert Frontier().digest() == hashlib.sha256(b"\x90").digest()
    # It is the very array the frontier message carries.
    assert encode_message(*Frontier.of(tips).parts())[2:] == msgpack.packb(rows)


@FAST
@given(st.permutations([_tip(n, n * 3) for n in range(1, 7)]))
def test_the_digest_does_not_depend_on_the_order_tips_are_given(tips: list[Tip]) -> None:
    assert Frontier.of(tips).digest() == Frontier.of(reversed(tips)).digest()


def test_the_digest_changes_with_any_seq_or_head() -> None:
    base = Frontier.of([_tip(1, 5), _tip(2, 5)]).digest()
    assert Frontier.of([_tip(1, 6), _tip(2, 5)]).digest() != base
    assert Frontier.of([_tip(1, 5, head=9), _tip(2, 5)]).digest() != base
    assert Frontier.of([_tip(1, 5)]).digest() != base


def test_from_heads_leaves_out_empty_logs() -> None:
    heads = {(b"\x01" * 32, b"\x00" * 8): (0, b"\x00" * 32), _tip(2, 4).log: (4, b"\x02" * 32)}
    assert Frontier.from_heads(heads) == Frontier((_tip(2, 4),))


def test_lacking_names_the_spans_a_peer_is_missing() -> None:
    ours = Frontier.of([_tip(1, 5), _tip(2, 3), _tip(3, 4), _tip(4, 2)])
    theirs = Frontier.of([_tip(2, 1, head=7), _tip(3, 4, head=8), _tip(4, 6), _tip(5, 1)])
    spans = ours.lacking(theirs)
    assert [(s.log[0][0], s.first, s.last, s.after) for s in spans] == [
        (1, 1, 5, None),  # they lack the whole log
        (2, 2, 3, b"\x07" * 32),  # they are behind, holding head 7 at seq 1
        (3, 4, 4, None),  # the same seq with another head: a fork at the tip
    ]  # log 4 they are ahead on, log 5 we lack: nothing to send
    assert ours.lacking(ours) == []


# --- batch room: credit, the batch limit and the frame limit --------------------------------


@FAST
@given(
    st.lists(st.tuples(st.integers(1, 512), st.none() | st.integers(0, MAX_PAYLOAD_BYTES)),
             max_size=40),
    st.integers(0, 50),
    st.integers(0, 3 * MAX_FRAME_BYTES),
)  # fmt: skip
def test_batch_room_is_the_most_that_fits(
    sizes: list[tuple[int, int | None]], entries: int, nbytes: int
) -> None:
    items = [(bytes(h), None if p is None else bytes(p)) for h, p in sizes]
    n = batch_room(items, entries=entries, nbytes=nbytes)
    batch = items[:n]
    assert n <= entries
    assert sum(map(entry_cost, batch)) <= nbytes
    if batch:
        assert len(encode_message(Entries(tuple(batch)))) <= MAX_FRAME_BYTES
        assert len(encode_message(Push(tuple(batch)))) <= MAX_FRAME_BYTES
    if n < min(len(items), entries):  # the next item would break a limit
        more = items[: n + 1]
        too_big = len(encode_message(Entries(tuple(more)))) > MAX_FRAME_BYTES
        assert sum(map(entry_cost, more)) > nbytes or too_big


def test_batch_room_stops_at_the_batch_limit() -> None:
    items = [(b"h", None)] * (MAX_BATCH_ENTRIES + 5)
    assert batch_room(items, entries=MAX_CREDIT, nbytes=MAX_CREDIT) == MAX_BATCH_ENTRIES
