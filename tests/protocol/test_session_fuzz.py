"""Arbitrary bytes fed to a session, in any state and any chunking, either produce events or
raise RemoteProtocolError — nothing else — and the session never loops or hoards input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from linkkit import LOG_A, LOG_B, frame, pair_in
from protokit import FAST

from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.messages import (
    Bye,
    Credit,
    Entries,
    Error,
    ForkProof,
    FrontierDigest,
    Hello,
    Push,
)
from protocol.payloads import PARTIAL, Answer, Payloads, Want
from protocol.session import NEED_DATA, ConnectionClosed, Session, State

WANT = Want(tuple(sorted(e.id for e in LOG_A)))
SAMPLES = [
    frame(m)
    for m in (
        Hello(1, 0, b"\x11" * 16, b"\x05" * 32),
        Hello(1, 0, b"\x12" * 16, b"\x05" * 32),
        Hello(7, 0, b"\x11" * 16, b"\x05" * 32),
        FrontierDigest(b"\x01" * 32),
        Entries.of(LOG_B[:1]),
        Entries(done=True),
        Push.of(LOG_B),
        Credit(3, 1000),
        ForkProof(LOG_A[0].raw, LOG_B[0].raw),
        Error(1, "x"),
        Bye(),
        Push(((LOG_B[0].raw, "team"),)),
        WANT,
        Want((min(e.id for e in LOG_A),)),
        Payloads(((min(e.id for e in LOG_A), Answer.ERASED),)),
        Payloads(),
    )
]
pieces = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(SAMPLES),
    st.sampled_from(SAMPLES).flatmap(lambda f: st.integers(0, len(f)).map(lambda n: f[:n])),
    st.binary(max_size=40).map(lambda b: len(b).to_bytes(4, "big") + b),
)
STATES = [State.IDLE, State.HELLO, State.DIGEST, State.FRONTIER, State.STREAMING, State.LIVE]


def _feed(session: Session, data: bytes, cuts: list[int]) -> int:
    """Feed ``data`` in chunks, draining after each; return the events seen.  Stops at the
    first RemoteProtocolError, which is re-raised."""
    events = 0
    points = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    start = 0
    for end in points:
        if end > start:
            session.receive_data(data[start:end])
        start = end
        for _ in range(len(data) + 2):  # each event consumes at least five bytes
            event = session.next_event()
            if event is NEED_DATA:
                break
            events += 1
        else:
            raise AssertionError("next_event kept returning events")
        assert session.buffered <= len(data)
    return events


@FAST
@given(
    st.sampled_from(STATES),
    st.lists(pieces, max_size=12),
    st.lists(st.integers(0, 10**6)),
    st.sampled_from([(), (PARTIAL,)]),
)
def test_arbitrary_bytes_give_events_or_a_remote_error(
    state: State, chunks: list[bytes], cuts: list[int], features: tuple[str, ...]
) -> None:
    _, b = pair_in(state, features=features)
    if features and state is not State.IDLE:
        b.send(WANT)  # so a payloads message in the input may answer it
    data = b"".join(chunks)
    try:
        events = _feed(b, data, cuts)
        assert events <= len(data) // 5
        b.receive_data(b"")
        assert isinstance(b.next_event(), ConnectionClosed)
    except RemoteProtocolError:
        assert b.our_state is b.their_state is State.ERROR
        with pytest.raises(LocalProtocolError, match="has failed"):
            b.next_event()
