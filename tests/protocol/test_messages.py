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
from protocol.payloads import MAX_WANT, Answer, Payloads, Want, payloads_room, payloads_size

GOLDEN = json.loads((Path(__file__).parent / "golden" / "messages.json").read_text("utf-8"))
VECTORS: list[dict[str, Any]] = GOLDEN["messages"]
CLASSES = {
    c.__name__: c
    for c in (
        Hello,
        FrontierDigest,
        FrontierPart,
        Entries,
        Credit,
        Push,
        ForkProof,
        Error,
        Bye,
        Want,
        Payloads,
    )
}
MESH, NODE = b"\x11" * 16, b"\x22" * 32
TIP = Tip(b"\x01" * 32, b"\x02" * 8, 5, b"\x03" * 32)
PAIR = (b"\x90" * 100, b"payload")
ID = b"\x0a" * 32


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$bin"}:
        return bytes.fromhex(value["$bin"])
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    return value


def _message(vec: dict[str, Any]) -> Message:
    fields = {k: _from_json(v) for k, v in vec["fields"].items()}
    if vec["type"] == "FrontierPart":
        fields["tips"] = tuple(
            Tip(**{k: _from_json(v) for k, v in t.items()}) for t in vec["fields"]["tips"]
        )
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
    (
        "too many features",
        _raw(1, 1, 0, MESH, NODE, [f"f{i:02}" for i in range(33)]),
        "0 to 32 items",
    ),
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
    ("entries payload as an integer", _raw(4, [[b"h", 7]], True), "0 to 262144 bytes"),
    ("entries tag empty", _raw(4, [[b"h", ""]], True), "a workspace tag matches"),
    ("entries tag starting with a dot", _raw(4, [[b"h", ".team"]], True), "a workspace tag"),
    ("entries tag with a space", _raw(4, [[b"h", "my team"]], True), "a workspace tag"),
    ("entries tag of 65", _raw(4, [[b"h", "t" * 65]], True), "a workspace tag"),
    ("entries tag ending in a newline", _raw(4, [[b"h", "team\n"]], True), "a workspace tag"),
    ("push tag not a workspace", _raw(6, [[b"h", "*"]]), "a workspace tag"),
    (
        "entries payload too long",
        _raw(4, [[b"h", bytes(MAX_PAYLOAD_BYTES + 1)]], True),
        "not msgpack within limits",
    ),
    ("entries beyond the batch limit", _raw(4, [[b"h", None]] * 1025, False), "1 to 1024 items"),
    ("push empty", _raw(6, []), "1 to 1024 items"),
    ("credit of nothing", _raw(5, 0, 0), "a grant of nothing"),
    ("credit beyond the limit", _raw(5, MAX_CREDIT + 1, 0), "integer in [0, 4294967295]"),
    ("credit as a bool", _raw(5, True, 1), "integer in"),
    ("fork proof of one header twice", _raw(7, b"h", b"h"), "the same"),
    ("fork proof header too long", _raw(7, b"h", bytes(513)), "1 to 512 bytes"),
    ("error text too long", _raw(8, 1, "x" * 1025, []), "text of at most 1024"),
    (
        "error text beyond the msgpack limit",
        _raw(8, 1, "é" * 2049, []),
        "not msgpack within limits",
    ),
    ("error versions unsorted", _raw(8, 2, "", [2, 1]), "strictly ascending"),
    ("error code negative", _raw(8, -1, "", []), "integer in [0, 65535]"),
    ("bye with a field", _raw(9, 1), "has 0 fields"),
    ("want of nothing", _raw(10, []), "1 to 256 items"),
    ("want beyond its limit", _raw(10, [ID] * 257), "1 to 256 items"),
    ("want id short", _raw(10, [ID[:31]]), "must be 32 bytes"),
    ("want id as text", _raw(10, ["x" * 32]), "must be 32 bytes"),
    ("want unsorted", _raw(10, [b"\x0b" * 32, ID]), "strictly ascending"),
    ("want repeated", _raw(10, [ID, ID]), "strictly ascending"),
    ("want ids not an array", _raw(10, ID), "must be an array"),
    ("want arity", _raw(10, [ID], True), "has 1 fields"),
    ("payloads arity", _raw(11), "has 1 fields"),
    ("payloads item not an array", _raw(11, [ID]), "must be an array"),
    ("payloads item of three", _raw(11, [[ID, 0, 0]]), "(id, payload or answer) pair"),
    ("payloads id short", _raw(11, [[ID[:31], 0]]), "must be 32 bytes"),
    ("payloads unknown answer", _raw(11, [[ID, 3]]), "must be an answer code (0, 1, 2)"),
    ("payloads negative answer", _raw(11, [[ID, -1]]), "must be an answer code"),
    ("payloads answer as a bool", _raw(11, [[ID, False]]), "payload bytes or an answer code"),
    ("payloads answer as nil", _raw(11, [[ID, None]]), "payload bytes or an answer code"),
    ("payloads payload as text", _raw(11, [[ID, "p"]]), "payload bytes or an answer code"),
    (
        "payloads payload too long",
        _raw(11, [[ID, bytes(MAX_PAYLOAD_BYTES + 1)]]),
        "not msgpack within limits",
    ),
    ("payloads unsorted", _raw(11, [[b"\x0b" * 32, 0], [ID, 0]]), "strictly ascending"),
    ("payloads repeated", _raw(11, [[ID, 0], [ID, b"p"]]), "strictly ascending"),
    ("payloads beyond the limit", _raw(11, [[ID, 0]] * 257), "0 to 256 items"),
    ("text that is not UTF-8", b"\x94\x08\x01\xa2\xff\xfe\x90", "not msgpack within limits"),
    ("a wide integer", b"\x93\x05\xcd\x00\x01\x01", "not canonical"),
    ("a wide type", b"\x91\xcc\x09", "not canonical"),
    ("bytes as bin16", b"\x92\x02\xc5\x00\x20" + bytes(32), "not canonical"),
]


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
    (
        "hello too many features",
        lambda: Hello(1, 0, MESH, NODE, tuple(f"f{i:02}" for i in range(MAX_FEATURES + 1))),
        "features",
    ),
    ("tip epoch", lambda: Tip(TIP.writer, b"\x00", 1, TIP.head), "epoch"),
    ("frontier of non-tips", lambda: FrontierPart((TIP_ROW,)), "tips"),  # type: ignore[arg-type]
    ("frontier unsorted", lambda: FrontierPart((Tip(b"\x09" * 32, *TIP_ROW[1:]), TIP)), "tips"),
    ("frontier beyond a part", lambda: FrontierPart((TIP,) * 10_001), "tips"),
    ("whole frontier unsorted", lambda: Frontier((Tip(b"\x09" * 32, *TIP_ROW[1:]), TIP)), "tips"),
    ("entries too many", lambda: Entries((PAIR,) * (MAX_BATCH_ENTRIES + 1)), "entries"),
    ("entries pair as list", lambda: Entries(([b"h", None],)), "entries"),  # type: ignore[arg-type]
    ("entries header too long", lambda: Entries(((bytes(MAX_HEADER_BYTES + 1), None),)), "header"),
    ("push empty", lambda: Push(()), "entries"),
    ("credit negative", lambda: Credit(-1, 5), "entries"),
    ("credit of nothing", lambda: Credit(0, 0), "credit"),
    ("fork proof same", lambda: ForkProof(b"h", b"h"), "second"),
    ("error text", lambda: Error(1, "x" * (MAX_ERROR_TEXT + 1)), "text"),
    ("error version out of range", lambda: Error(2, "", (70_000,)), "versions"),
    ("digest long", lambda: FrontierDigest(bytes(33)), "digest"),
    ("entries tag not a workspace", lambda: Entries(((b"h", "a/b"),)), "tag"),
    ("push tag empty", lambda: Push(((b"h", ""),)), "tag"),
    ("want of nothing", lambda: Want(()), "ids"),
    ("want as a list", lambda: Want([ID]), "ids"),  # type: ignore[arg-type]
    ("want beyond its limit", lambda: Want(tuple(i.to_bytes(32) for i in range(257))), "ids"),
    ("want id long", lambda: Want((bytes(33),)), "ids"),
    ("want unsorted", lambda: Want((b"\x0b" * 32, ID)), "ids"),
    ("payloads as a list", lambda: Payloads([(ID, 0)]), "items"),  # type: ignore[arg-type]
    ("payloads item as a list", lambda: Payloads(([ID, 0],)), "items"),  # type: ignore[arg-type]
    (
        "payloads beyond the limit",
        lambda: Payloads(tuple((i.to_bytes(32), 0) for i in range(MAX_WANT + 1))),
        "items",
    ),
    ("payloads id short", lambda: Payloads(((b"id", 0),)), "id"),
    ("payloads unknown answer", lambda: Payloads(((ID, 7),)), "answer"),
    (
        "payloads payload too long",
        lambda: Payloads(((ID, bytes(MAX_PAYLOAD_BYTES + 1)),)),
        "payload",
    ),
    ("payloads answer as None", lambda: Payloads(((ID, None),)), "payload"),  # type: ignore[arg-type]
    ("payloads repeated", lambda: Payloads(((ID, 0), (ID, 1))), "items"),
]


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
    st.lists(
        st.tuples(st.integers(1, 512), st.none() | st.integers(0, MAX_PAYLOAD_BYTES)), max_size=40
    ),
    st.integers(0, 50),
    st.integers(0, 3 * MAX_FRAME_BYTES),
)
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


def test_batch_room_stops_at_the_batch_limit_with_tags_too() -> None:
    items = [(b"h", "team")] * (MAX_BATCH_ENTRIES + 5)
    assert batch_room(items, entries=MAX_CREDIT, nbytes=MAX_CREDIT) == MAX_BATCH_ENTRIES


# --- workspace tags ---------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["t", "team", "a" * 31, "a" * 32, "A.b_c-9" * 9 + "z"])
def test_a_tagged_entry_round_trips_as_msgpack_text(tag: str) -> None:
    batch = Entries(((b"h", tag), PAIR, (b"g", None)), done=True)
    body = encode_message(batch)
    assert msgpack.unpackb(body)[1][0] == [b"h", tag]
    assert decode_message(body) == batch
    assert decode_message(encode_message(Push(batch.entries))) == Push(batch.entries)


def test_a_tag_costs_its_utf8_length_against_credit() -> None:
    assert entry_cost((b"h" * 100, "team")) == 104
    assert entry_cost((b"h" * 100, None)) == 100
    assert entry_cost((b"h" * 100, b"team")) == 104


def _full_batch(tail: list[tuple[bytes, bytes | str | None]]) -> list[Any]:
    """Fifteen of the largest entries, then one whose payload is sized so that the batch with
    ``tail`` after it encodes to exactly the frame limit."""
    head: list[Any] = [(bytes(MAX_HEADER_BYTES), bytes(MAX_PAYLOAD_BYTES))] * 15
    probe = [*head, (bytes(MAX_HEADER_BYTES), bytes(0x10000)), *tail]
    n = 0x10000 + MAX_FRAME_BYTES - len(encode_message(Entries(tuple(probe))))
    return [*head, (bytes(MAX_HEADER_BYTES), bytes(n)), *tail]


# Tags either side of msgpack's fixstr limit (31 bytes), and the longest.
@pytest.mark.parametrize("size", [1, 31, 32, 64])
def test_batch_room_is_exact_at_the_frame_limit_with_tags(size: int) -> None:
    tail: list[Any] = [(b"h", "t"), (bytes(300), None), (b"h", "w" * size)]
    items = _full_batch(tail)
    assert len(encode_message(Entries(tuple(items)))) == MAX_FRAME_BYTES
    assert batch_room(items, entries=MAX_CREDIT, nbytes=MAX_CREDIT) == len(items)
    bigger = [*items]
    bigger[15] = (bigger[15][0], bigger[15][1] + b"\x00")  # one byte more: the tag is left out
    assert len(encode_message(Entries(tuple(bigger)))) == MAX_FRAME_BYTES + 1
    assert batch_room(bigger, entries=MAX_CREDIT, nbytes=MAX_CREDIT) == len(items) - 1


# --- want and payloads ------------------------------------------------------------------------


def _ids(n: int) -> tuple[bytes, ...]:
    return tuple(hashlib.sha256(i.to_bytes(2)).digest() for i in range(n))


def test_answers_are_held_as_plain_integers() -> None:
    answer = Payloads(((ID, Answer.WITHHELD), (b"\x0b" * 32, b"payload")))
    assert [type(v) for _, v in answer.items] == [int, bytes]
    assert answer.items[0][1] == 2
    assert decode_message(encode_message(answer)) == answer
    assert answer.ids == (ID, b"\x0b" * 32)


def test_the_largest_want_and_payloads_round_trip() -> None:
    ids = tuple(sorted(_ids(MAX_WANT)))
    want = Want(ids)
    assert decode_message(encode_message(want)) == want
    answer = Payloads(tuple((i, b"" if n % 2 else n % 3) for n, i in enumerate(ids)))
    assert decode_message(encode_message(answer)) == answer


def _answers(sizes: list[int | None]) -> list[tuple[bytes, bytes | int]]:
    ids = sorted(_ids(len(sizes)))
    return [(i, Answer.ERASED if n is None else bytes(n)) for i, n in zip(ids, sizes, strict=True)]


@FAST
@given(st.lists(st.none() | st.integers(0, MAX_PAYLOAD_BYTES), max_size=40))
def test_payloads_size_is_the_encoded_size_and_room_the_most_that_fits(
    sizes: list[int | None],
) -> None:
    items = _answers(sizes)
    n = payloads_room(items)
    assert payloads_size(items[:n]) == len(encode_message(Payloads(tuple(items[:n]))))
    assert payloads_size(items[:n]) <= MAX_FRAME_BYTES
    if n < len(items):
        assert len(encode_message(Payloads(tuple(items[: n + 1])))) > MAX_FRAME_BYTES
    assert n >= min(len(items), 1)  # one answer always fits


def test_payloads_room_is_exact_at_the_frame_limit() -> None:
    # Fifteen of the largest payloads and a sixteenth sized to fill the frame to the byte.
    sizes: list[int | None] = [MAX_PAYLOAD_BYTES] * 15 + [0x10000, None]
    probe = len(encode_message(Payloads(tuple(_answers(sizes)))))
    sizes[15] = 0x10000 + MAX_FRAME_BYTES - probe
    items = _answers(sizes)
    assert len(encode_message(Payloads(tuple(items)))) == MAX_FRAME_BYTES
    assert payloads_size(items) == MAX_FRAME_BYTES
    assert payloads_room(items) == 17
    assert len(encode_frame(encode_message(Payloads(tuple(items))))) == 4 + MAX_FRAME_BYTES
    sizes[15] += 1
    more = _answers(sizes)
    assert len(encode_message(Payloads(tuple(more)))) == MAX_FRAME_BYTES + 1
    assert payloads_room(more) == 16
    with pytest.raises(LocalProtocolError, match="frame body is 1 to"):
        encode_frame(encode_message(Payloads(tuple(more))))


def test_payloads_room_stops_at_the_want_limit() -> None:
    items = _answers([None] * (MAX_WANT + 3))
    assert payloads_room(items) == MAX_WANT
    assert payloads_room([]) == 0
    assert payloads_size([]) == len(encode_message(Payloads())) == 3
