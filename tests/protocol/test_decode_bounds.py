"""What a frame can make the decoder build (docs/protocol.md §2): a frame packed with empty
containers, nested deep, or typed as the largest message is refused before it is unpacked,
quickly and without allocating; every legal message still decodes; and a refused document is
not kept alive by the error or by the failed session."""

from __future__ import annotations

import contextlib
import gc
import os
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from linkkit import pair_in
from protokit import FAST

from protocol.batch import MAX_BATCH_ENTRIES
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES, encode_frame, scan_body
from protocol.frontier import MAX_FRONTIER_LOGS, FrontierPart, Tip
from protocol.messages import (
    MAX_FEATURES,
    MAX_VERSIONS,
    Entries,
    Error,
    ErrorCode,
    Hello,
    Message,
    Push,
    decode_message,
    encode_message,
)
from protocol.payloads import MAX_WANT, Answer, Payloads, Want
from protocol.session import State


def _array16(n: int) -> bytes:
    return b"\xdc" + n.to_bytes(2, "big")


def _filled(head: bytes, unit: bytes, per: int = 10_000) -> bytes:
    """``head`` then one array of as many arrays of ``per`` ``unit`` as fit in a frame."""
    chunk = _array16(per) + unit * per
    n = (MAX_FRAME_BYTES - len(head) - 3) // len(chunk)
    return head + _array16(n) + chunk * n


BOMBS = {
    # 4.19 M empty arrays in 419 arrays of 10,000: each array is within max_array_len.
    "empty arrays": _filled(b"", b"\x90"),
    "empty maps": _filled(b"", b"\x80"),
    # The same, behind a frontier's type, so the largest message's budget applies.
    "empty arrays as a frontier": b"\x9f\x03" + (_array16(10_000) + b"\x90" * 10_000) * 14,
    "empty maps as entries": b"\x93\x04" + _filled(b"", b"\x80")[:-1] + b"\xc2",
    "deep arrays": b"\x91" * (MAX_FRAME_BYTES - 1) + b"\x01",
    "deep arrays as a frontier": b"\x92\x03" + b"\x91" * 1_000_000 + b"\x90",
}


def _measured(call: Callable[[], Any]) -> tuple[float, int]:
    """Seconds ``call`` took and the peak bytes it allocated, with its error swallowed."""
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    with contextlib.suppress(RemoteProtocolError):
        call()
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak


@pytest.mark.parametrize("body", list(BOMBS.values()), ids=list(BOMBS))
def test_a_bomb_is_refused_quickly_without_allocating(body: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="not msgpack within limits") as caught:
        decode_message(body)
    assert caught.value.field == "body"
    elapsed, peak = _measured(lambda: decode_message(body))
    assert elapsed < 0.5  # it took 2.6 to 6.3 s before the scan; 0.1 s now, 0.2 under load
    assert peak < 4 * len(body)


def test_what_a_refused_frame_may_build_is_bounded_whatever_its_size() -> None:
    # Within every budget and still no message: five arrays of 10,000 empty arrays, 50 KB.
    body = b"\x96\x03" + (_array16(10_000) + b"\x90" * 10_000) * 5
    elapsed, peak = _measured(lambda: decode_message(body))
    assert elapsed < 0.5
    assert peak < MAX_FRAME_BYTES + (1 << 20)


def test_a_session_fed_a_bomb_fails_with_a_protocol_error() -> None:
    a, _ = pair_in(State.LIVE)
    a.receive_data(encode_frame(BOMBS["empty arrays as a frontier"]))
    with pytest.raises(RemoteProtocolError, match="more than") as caught:
        a.next_event()
    assert caught.value.field == "body"
    reply = decode_message(a.error_reply()[4:])
    assert isinstance(reply, Error)
    assert reply.code == ErrorCode.PROTOCOL


def _tips(n: int) -> tuple[Tip, ...]:
    tips = (Tip(os.urandom(32), os.urandom(8), 1 + i, os.urandom(32)) for i in range(n))
    return tuple(sorted(tips, key=lambda t: t.log))


def test_a_refused_document_is_not_kept_by_its_error() -> None:
    # A frontier at its limit whose last two tips are out of order: unpacked whole (~4 MiB of
    # objects), then refused by its own check.
    tips = _tips(MAX_FRONTIER_LOGS)
    rows = [t.wire() for t in (*tips[:-2], tips[-1], tips[-2])]
    body = msgpack.packb([3, rows], use_bin_type=True)
    del rows, tips
    gc.collect()
    tracemalloc.start()
    try:
        decode_message(body)
    except RemoteProtocolError as exc:
        caught = exc
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "strictly ascending" in str(caught)
    assert peak > 2 * len(body)  # the document was built ...
    assert held < len(body) // 10  # ... and is gone while its error lives on


def test_a_failed_session_keeps_nothing_it_decoded() -> None:
    a, _ = pair_in(State.LIVE)
    data = encode_frame(encode_message(FrontierPart(_tips(MAX_FRONTIER_LOGS))))
    gc.collect()
    tracemalloc.start()
    a.receive_data(data)
    try:
        a.next_event()
    except RemoteProtocolError as exc:
        assert "not allowed in state LIVE" in str(exc)  # noqa: PT017
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak > 3 * len(data)  # the frontier was built ...
    assert held < 2 * len(data)  # ... and only the frame's bytes outlive it
    with pytest.raises(LocalProtocolError, match="not allowed in state LIVE"):
        a.next_event()  # the failure, as held, still says what it was


LARGEST: dict[str, Callable[[], Message]] = {
    "hello": lambda: Hello(
        1, 0, bytes(16), bytes(32), tuple(f"f{i:02}" for i in range(MAX_FEATURES))
    ),
    "frontier": lambda: FrontierPart(_tips(MAX_FRONTIER_LOGS), more=True),
    "entries": lambda: Entries(((b"h", None),) * MAX_BATCH_ENTRIES, done=True),
    "push": lambda: Push(((b"h", b""),) * MAX_BATCH_ENTRIES),
    "error": lambda: Error(2, "x" * 1024, tuple(range(MAX_VERSIONS))),
    "entries with tags": lambda: Entries(((b"h", "t" * 64),) * MAX_BATCH_ENTRIES, done=True),
    "want": lambda: Want(tuple(i.to_bytes(32) for i in range(MAX_WANT))),
    "payloads": lambda: Payloads(
        tuple((i.to_bytes(32), b"" if i % 2 else Answer.ABSENT) for i in range(MAX_WANT))
    ),
}


@pytest.mark.parametrize("build", list(LARGEST.values()), ids=list(LARGEST))
def test_the_largest_legal_messages_decode(build: Callable[[], Message]) -> None:
    message = build()
    assert decode_message(encode_message(message)) == message


# The most objects a body of each type may hold, as docs/protocol.md §2 counts them (the largest
# legal message's), the 64 more any body may hold, and the deepest nesting.
BUDGETS = {
    "want": (10, 3 + MAX_WANT + 64, 2),
    "payloads": (11, 3 + 3 * MAX_WANT + 64, 3),
}


@pytest.mark.parametrize(("kind", "objects", "depth"), list(BUDGETS.values()), ids=list(BUDGETS))
def test_one_object_past_a_types_budget_is_refused_by_the_scan(
    kind: int, objects: int, depth: int
) -> None:
    def body(n: int) -> bytes:  # the array, its type and an array of n - 3 integers
        packed: bytes = msgpack.packb([kind, [0] * (n - 3)])
        return packed

    with pytest.raises(RemoteProtocolError) as caught:  # scanned, and refused as no message
        decode_message(body(objects))
    assert "within limits" not in str(caught.value)
    with pytest.raises(RemoteProtocolError, match=f"more than {objects} objects"):
        decode_message(body(objects + 1))
    inner: Any = 0
    for _ in range(depth):  # inside the outer array: one level deeper than the type allows
        inner = [inner]
    with pytest.raises(RemoteProtocolError, match=f"nested deeper than {depth}"):
        decode_message(msgpack.packb([kind, inner]))


# --- the scan itself --------------------------------------------------------------------------


def _objects(value: Any) -> int:
    if isinstance(value, list):
        return 1 + sum(_objects(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(_objects(k) + _objects(v) for k, v in value.items())
    return 1


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=70_000)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=40,
)


@FAST
@given(_VALUES)
def test_the_scan_counts_what_msgpack_builds(value: Any) -> None:
    body = msgpack.packb(value, use_bin_type=True)
    objects, depth = _objects(value), _depth(value)
    scan_body(body, max_objects=objects, max_depth=depth)
    with pytest.raises(RemoteProtocolError, match=f"more than {objects - 1} objects"):
        scan_body(body, max_objects=objects - 1, max_depth=depth)
    if depth:
        with pytest.raises(RemoteProtocolError, match=f"nested deeper than {depth - 1}"):
            scan_body(body, max_objects=objects, max_depth=depth - 1)


@pytest.mark.parametrize(
    "body",
    [
        b"\xd4\x01\x00\x01",
        b"\xc7\x03\x01abc\x01",
        b"\xc8\x00\x01\x01a\x01",
        b"\xd8\x01" + bytes(17),
    ],
    ids=["fixext 1", "ext 8", "ext 16", "fixext 16"],
)
def test_the_scan_steps_over_ext_values(body: bytes) -> None:
    # An ext is refused when unpacked; the scan still has to know where it ends.
    scan_body(b"\x92" + body, max_objects=3, max_depth=1)
    with pytest.raises(RemoteProtocolError, match="more than 2 objects"):
        scan_body(b"\x92" + body, max_objects=2, max_depth=1)
