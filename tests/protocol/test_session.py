"""Two sessions joined back to back: a full sync of several logs, credit spent and given back,
live pushes, a new round, fork proofs, bye, and the polite version refusal."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from linkkit import LOG_A, Link, Peer, Replica, deliver, frame, key_of, make_log, node_id, pair_in
from protokit import MESH, seal_one

from protocol.entry import MAX_PAYLOAD_BYTES, Entry, LogId
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES
from protocol.frontier import MAX_FRONTIER_LOGS, MAX_FRONTIER_TIPS, Frontier, FrontierPart, Tip
from protocol.messages import (
    PROTOCOL_MAJOR,
    SUPPORTED_MAJORS,
    Bye,
    Credit,
    Entries,
    Error,
    ErrorCode,
    ForkProof,
    FrontierDigest,
    Hello,
    Message,
    Push,
    decode_message,
)
from protocol.payloads import PARTIAL, Answer, Payloads, Want, payloads_room, payloads_size
from protocol.session import Balance, ConnectionClosed, Session, State

L1, L2, L3, L4 = make_log(1, 6), make_log(2, 3), make_log(3, 5), make_log(4, 2)


def connect(a_logs: list[list[Entry]], b_logs: list[list[Entry]], window: Credit) -> Link:
    a = Peer("a", Replica(*a_logs), window=window)
    b = Peer("b", Replica(*b_logs), window=window)
    link = Link(a, b)
    link.put(a, a.start())
    link.put(b, b.start())
    link.run()
    return link


def reply_code(session: Session) -> int:
    """The code of the Error frame a failed session offers to send."""
    reply = decode_message(session.error_reply()[4:])
    assert isinstance(reply, Error)
    return reply.code


def ids(replica: Replica) -> dict[LogId, list[bytes]]:
    return {log: [e.id for e in run] for log, run in replica.logs.items()}


def kinds(messages: list[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


def _seqs_per_log(messages: list[Message]) -> dict[LogId, list[int]]:
    seqs: dict[LogId, list[int]] = {}
    for m in messages:
        if isinstance(m, Entries | Push):
            for raw, payload in m.entries:
                h = Entry.decode(raw, payload).header
                seqs.setdefault(h.log, []).append(h.seq)
    return seqs


WINDOWS = [Credit(2, 1 << 20), Credit(1000, 400), Credit(1, 1 << 20)]


@pytest.mark.parametrize("window", WINDOWS, ids=["two-entries", "400-bytes", "one-entry"])
def test_a_full_sync_of_several_logs_converges_within_credit(window: Credit) -> None:
    link = connect([L1, L2, L4[:1]], [L1[:2], L3, L4], window)
    a, b = link.a, link.b
    assert ids(a.replica) == ids(b.replica) == ids(Replica(L1, L2, L3, L4))
    assert a.session.caught_up
    assert b.session.caught_up
    assert a.replica.frontier().digest() == b.replica.frontier().digest()
    # Each side streamed what the other lacked, per log in seq order, and nothing else.
    assert _seqs_per_log(b.received) == {
        L1[0].header.log: [3, 4, 5, 6],
        L2[0].header.log: [1, 2, 3],
    }
    assert _seqs_per_log(a.received) == {L3[0].header.log: [1, 2, 3, 4, 5], L4[0].header.log: [2]}
    # Credit ran out and was given back: batches waited, and the balance is whole again.
    assert a.stalls
    assert b.stalls
    whole = Balance(window.entries, window.nbytes)
    assert a.session.credit == b.session.credit == a.session.granted == whole
    assert kinds(b.received)[:4] == ["Hello", "Credit", "FrontierDigest", "FrontierPart"]


def test_a_batch_waits_for_credit_and_a_grant_resumes_it() -> None:
    a, b = pair_in(State.FRONTIER)  # each side granted the other 100 entries
    items = Entries.of(make_log(7, 101)).entries
    assert a.fits(items) == 100
    deliver(a.send(Entries(items[:100])), b)
    assert a.fits(items[100:]) == 0
    deliver(b.send(Credit(1, 0)), a)
    assert a.fits(items[100:]) == 1
    deliver(a.send(Entries(items[100:], done=True)), b)
    assert a.our_state is b.their_state is State.LIVE


def test_credit_exhaustion_is_enforced_on_both_sides() -> None:
    a, b = pair_in(State.FRONTIER)
    log = make_log(5, 100)
    batch = Entries.of(log)
    assert a.fits(batch.entries) == 100
    deliver(a.send(batch), b)
    assert a.credit.entries == 0
    assert b.granted.entries == 0
    assert a.fits(batch.entries) == 0
    one_more = Entries.of(L1[:1])
    with pytest.raises(LocalProtocolError, match="exceed the credit"):
        a.send(one_more)
    assert a.our_state is State.ERROR
    # The receiver refuses the same batch when a peer sends it anyway.
    with pytest.raises(RemoteProtocolError, match="exceed the credit") as caught:
        deliver(frame(one_more), b)
    assert caught.value.field == "credit"
    assert reply_code(b) == ErrorCode.CREDIT


def test_a_grant_replenishes_and_byte_credit_counts_headers_and_payloads() -> None:
    a, b = pair_in(State.FRONTIER)
    log = make_log(6, 100)
    deliver(a.send(Entries.of(log)), b)
    cost = sum(len(e.raw) + len(e.payload or b"") for e in log)
    assert a.credit == Balance(0, (1 << 20) - cost) == b.granted
    deliver(b.send(Credit(3, 0)), a)
    assert a.credit == Balance(3, (1 << 20) - cost)
    deliver(a.send(Entries.of(L1[:3])), b)
    assert b.granted.entries == 0


def test_outstanding_credit_is_bounded() -> None:
    a, b = pair_in(State.HELLO)
    big = Credit(2**32 - 1, 1)
    with pytest.raises(LocalProtocolError, match="may not exceed"):
        a.send(big)
    with pytest.raises(RemoteProtocolError, match="may not exceed"):
        deliver(frame(big), b)


def test_equal_digests_exchange_no_frontier() -> None:
    link = connect([L1, L2], [L1, L2], Credit(4, 1 << 20))
    for peer in (link.a, link.b):
        assert kinds(peer.received) == ["Hello", "Credit", "FrontierDigest"]
        assert peer.session.caught_up
        assert peer.session.their_frontier is None


def test_live_pushes_follow_catch_up_within_credit() -> None:
    full = make_log(1, 9)
    link = connect([full[:6]], [full[:2]], Credit(2, 1 << 20))
    a, b = link.a, link.b
    link.put(a, a.write(full[6:]))
    link.run()
    assert ids(b.replica) == ids(Replica(full))
    pushes = [m for m in b.received if isinstance(m, Push)]
    assert [len(p.entries) for p in pushes] == [2, 1]  # two, then one after a grant
    assert a.session.credit == Balance(2, 1 << 20)


def test_push_before_catch_up_is_refused_both_ways() -> None:
    a, b = pair_in(State.STREAMING)
    push = Push.of(L1[:1])
    with pytest.raises(LocalProtocolError, match="push is not allowed in state STREAMING"):
        a.send(push)
    with pytest.raises(RemoteProtocolError, match="push is not allowed in state STREAMING"):
        deliver(frame(push), b)


def test_a_new_round_finds_and_streams_what_went_missing() -> None:
    link = connect([L1[:3]], [L1[:3]], Credit(8, 1 << 20))
    a, b = link.a, link.b
    link.put(a, a.begin_round())
    link.run()
    assert a.session.caught_up
    assert not any(isinstance(m, FrontierPart) for m in b.received)
    b.replica.logs[L2[0].header.log] = list(L2)  # arrived at b from elsewhere
    link.put(b, b.begin_round())
    link.run()
    assert ids(a.replica) == ids(b.replica) == ids(Replica(L1[:3], L2))
    assert a.session.caught_up
    assert b.session.caught_up


def test_a_digest_waits_while_the_peer_is_still_streaming() -> None:
    a, b = pair_in(State.STREAMING)
    deliver(a.send(Entries(done=True)), b)  # a is done; b has not said so
    with pytest.raises(LocalProtocolError, match="waits for hello and for the round to end"):
        a.send(FrontierDigest(b"\x01" * 32))


def test_a_fork_found_during_sync_is_proved_and_gossiped() -> None:
    other = seal_one(
        3, L1[1].id, key=key_of(1), payload=b"\x80"
    )  # the writer signed two entries at seq 3
    link = connect([L1[:4]], [[*L1[:2], other]], Credit(4, 1 << 20))
    a, b = link.a, link.b
    assert b.replica.forks == [(other.raw, L1[2].raw)]
    link.put(b, [b.session.send(ForkProof(*b.replica.forks[0]))])
    link.run()
    proof = [m for m in a.received if isinstance(m, ForkProof)]
    assert proof == [ForkProof(other.raw, L1[2].raw)]


def test_fork_proof_of_two_entries_at_one_position() -> None:
    other = seal_one(3, L1[1].id, key=key_of(1), payload=b"\x80")
    assert ForkProof.of(L1[2], other) == ForkProof(L1[2].raw, other.raw)
    with pytest.raises(LocalProtocolError, match="two entries at one position"):
        ForkProof.of(L1[2], L1[3])


def test_bye_closes_cleanly_and_the_end_of_stream_says_so() -> None:
    link = connect([L1], [L1], Credit(4, 1 << 20))
    a, b = link.a, link.b
    link.put(a, [a.session.send(Bye())])
    link.run()
    assert b.received[-1] == Bye()
    assert a.received[-1] == Bye()
    for peer in (a, b):
        assert peer.session.our_state is peer.session.their_state is State.CLOSED
        assert deliver(b"", peer.session) == [ConnectionClosed(clean=True)]


def test_an_end_of_stream_without_bye_is_unclean() -> None:
    a, _ = pair_in(State.LIVE)
    assert deliver(b"", a) == [ConnectionClosed(clean=False)]
    with pytest.raises(LocalProtocolError, match="after the end of stream"):
        a.receive_data(b"\x00")


def test_an_end_of_stream_inside_a_frame_is_an_error() -> None:
    a, b = pair_in(State.LIVE)
    data = a.send(Push.of(L1[:1]))
    b.receive_data(data[:-1])
    b.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="ended inside a frame"):
        b.next_event()
    assert b.error_reply() == b""  # nobody is left to tell


def test_an_unknown_major_version_is_refused_politely() -> None:
    ours = Session(mesh=MESH, node=node_id("old"))
    newer = Hello(PROTOCOL_MAJOR + 1, 0, MESH, node_id("new"), ("push",))
    hello = ours.start()
    with pytest.raises(RemoteProtocolError, match="protocol 2 is not spoken here") as caught:
        deliver(frame(newer), ours)
    assert caught.value.field == "major"
    assert ours.our_state is State.ERROR
    reply = ours.error_reply()
    refusal = decode_message(reply[4:])
    assert refusal == Error(ErrorCode.VERSION, str(caught.value), SUPPORTED_MAJORS)
    assert "this side speaks 1" in refusal.text
    assert ours.error_reply() == b""  # given once
    # The refused side reads the refusal as an ordinary closing message.
    theirs = Session(mesh=MESH, node=node_id("new"))
    theirs.start()
    assert deliver(hello + reply, theirs) == [ours.hello, refusal]
    assert theirs.their_state is State.CLOSED


def test_a_hello_from_another_mesh_is_refused() -> None:
    a = Session(mesh=MESH, node=node_id("a"))
    stranger = Session(mesh=b"\x99" * 16, node=node_id("b"))
    with pytest.raises(RemoteProtocolError, match="is not this mesh"):
        deliver(stranger.start(), a)
    assert reply_code(a) == ErrorCode.MESH


def test_sending_a_hello_this_side_cannot_keep_is_a_local_error() -> None:
    a = Session(mesh=MESH, node=node_id("a"))
    with pytest.raises(LocalProtocolError, match="not spoken here"):
        a.send(replace(a.hello, major=9))
    assert reply_code(a) == ErrorCode.INTERNAL


def test_features_are_those_both_sides_offer() -> None:
    a = Session(mesh=MESH, node=node_id("a"), features=["push", "bundles", "push"])
    b = Session(mesh=MESH, node=node_id("b"), features=["zeta", "push"])
    assert a.features == frozenset()
    deliver(b.start(), a)
    assert a.features == {"frontier.parts", "push"}
    assert a.hello.features == ("bundles", "frontier.parts", "push")


@pytest.mark.parametrize(
    "message",
    [Entries.of(L1[:1]), Entries(done=True), Push.of(L1[:1]), FrontierDigest(b"\x01" * 32)],
    ids=["entries", "done", "push", "digest"],
)
def test_a_message_before_hello_is_refused(message: Message) -> None:
    a = Session(mesh=MESH, node=node_id("a"))
    with pytest.raises(RemoteProtocolError, match="is not allowed in state IDLE") as caught:
        deliver(frame(message), a)
    assert caught.value.field == "state"
    with pytest.raises(LocalProtocolError, match="is not allowed in state IDLE"):
        Session(mesh=MESH, node=node_id("b")).send(message)


def test_entries_before_the_receivers_frontier_are_refused() -> None:
    a, b = pair_in(State.DIGEST)
    frontier = Replica(LOG_A[:1]).frontier()
    deliver(a.send(*frontier.parts()), b)
    assert b.their_frontier == frontier
    # b has not sent its frontier, so a may not stream, nor may anyone pretending to be a.
    with pytest.raises(LocalProtocolError, match="wait for the receiver's frontier"):
        a.send(Entries.of(L1[:1]))
    with pytest.raises(RemoteProtocolError, match="wait for the receiver's frontier"):
        deliver(frame(Entries.of(L1[:1])), b)


def test_a_frontier_must_match_its_digest_and_only_when_digests_differ() -> None:
    a, b = pair_in(State.DIGEST)
    wrong = Replica(L2).frontier()
    with pytest.raises(RemoteProtocolError, match="does not match the digest") as caught:
        deliver(frame(*wrong.parts()), b)
    assert caught.value.field == "digest"
    a, b = pair_in(State.HELLO)
    same = Replica(L1).frontier()
    deliver(a.send(FrontierDigest(same.digest())), b)
    deliver(b.send(FrontierDigest(same.digest())), a)
    assert a.caught_up
    with pytest.raises(RemoteProtocolError, match="frontier is not allowed in state LIVE"):
        deliver(frame(*same.parts()), b)


def test_an_oversized_frame_is_refused_from_its_prefix_alone() -> None:
    a, _ = pair_in(State.LIVE)
    a.receive_data((4 * 1024 * 1024 + 1).to_bytes(4, "big"))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit") as caught:
        a.next_event()
    assert caught.value.field == "frame_length"
    assert reply_code(a) == ErrorCode.LIMIT


def test_an_unknown_message_type_is_refused() -> None:
    a, _ = pair_in(State.LIVE)
    with pytest.raises(RemoteProtocolError, match="unknown message type 42") as caught:
        deliver(b"\x00\x00\x00\x02\x91\x2a", a)
    assert caught.value.field == "type"
    assert reply_code(a) == ErrorCode.PROTOCOL


def test_a_failed_session_refuses_further_use() -> None:
    a, _ = pair_in(State.LIVE)
    with pytest.raises(RemoteProtocolError, match="never empty"):
        deliver(b"\x00\x00\x00\x00", a)
    assert a.our_state is a.their_state is State.ERROR
    assert reply_code(a) == ErrorCode.PROTOCOL
    for use in (lambda: a.send(Bye()), a.next_event, lambda: a.receive_data(b"x")):
        with pytest.raises(LocalProtocolError, match="has failed"):
            use()


def test_the_read_buffer_is_bounded() -> None:
    a, _ = pair_in(State.LIVE)
    chunk = (4 * 1024 * 1024).to_bytes(4, "big") + bytes(4 * 1024 * 1024)
    a.receive_data(chunk)
    a.receive_data(chunk)  # two frames may wait; a third is the caller not reading
    with pytest.raises(LocalProtocolError, match="take frames before feeding more"):
        a.receive_data(chunk)


def test_an_error_message_closes_the_speaker_and_is_not_a_failure() -> None:
    a, b = pair_in(State.STREAMING)
    error = Error(ErrorCode.REFUSED, "shutting down")
    assert deliver(a.send(error), b) == [error]
    assert b.their_state is State.CLOSED
    assert b.our_state is State.STREAMING
    assert deliver(b.send(Bye()), a) == [Bye()]


def test_after_the_peers_bye_anything_more_from_it_is_refused() -> None:
    a, b = pair_in(State.LIVE)
    deliver(a.send(Bye()), b)
    with pytest.raises(RemoteProtocolError, match="not allowed in state CLOSED"):
        deliver(frame(Credit(1, 1)), b)


def test_messages_in_many_frames_and_one_chunk_arrive_in_order() -> None:
    a, b = pair_in(State.LIVE)
    sent = [Push.of(L1[i : i + 1]) for i in range(3)] + [Credit(5, 5), Bye()]
    data = b"".join(a.send(m) for m in sent)
    assert deliver(data, b) == sent
    a, b = pair_in(State.LIVE)
    data = b"".join(a.send(m) for m in sent)
    got = list(itertools.chain.from_iterable(deliver(data[i : i + 1], b) for i in range(len(data))))
    assert got == sent


def _many_tips(n: int, start: int = 0) -> Frontier:
    return Frontier(
        tuple(Tip((start + i).to_bytes(32), b"\x01" * 8, 1, b"\x02" * 32) for i in range(n))
    )


def _round_in_digest(ours: Frontier) -> tuple[Session, Session]:
    a, b = pair_in(State.HELLO)
    deliver(a.send(FrontierDigest(ours.digest())), b)
    deliver(b.send(FrontierDigest(b"\x07" * 32)), a)
    return a, b


def test_a_frontier_beyond_one_message_travels_in_parts() -> None:
    ours = _many_tips(MAX_FRONTIER_LOGS + 5)
    parts = ours.parts()
    assert [len(p.tips) for p in parts] == [MAX_FRONTIER_LOGS, 5]
    assert [p.more for p in parts] == [True, False]
    a, b = _round_in_digest(ours)
    deliver(a.send(parts[0]), b)
    assert b.their_frontier is None  # more to come
    assert b.their_state is State.DIGEST
    deliver(a.send(parts[1]), b)
    assert b.their_frontier == ours
    assert b.their_state is State.FRONTIER


def test_frontier_parts_must_ascend_match_the_digest_and_stay_bounded() -> None:
    ours = _many_tips(4)
    _, b = _round_in_digest(ours)
    deliver(frame(FrontierPart(ours.tips[2:], more=True)), b)
    with pytest.raises(RemoteProtocolError, match="ascending across parts"):
        deliver(frame(FrontierPart(ours.tips[:2])), b)
    _, b = _round_in_digest(ours)
    deliver(frame(FrontierPart(ours.tips[:2], more=True)), b)
    with pytest.raises(RemoteProtocolError, match="does not match the digest"):
        deliver(frame(FrontierPart(ours.tips[2:3])), b)
    _, b = _round_in_digest(ours)
    chunk = MAX_FRONTIER_LOGS
    for i in range(MAX_FRONTIER_TIPS // chunk):
        deliver(frame(FrontierPart(_many_tips(chunk, i * chunk).tips, more=True)), b)
    one_more = FrontierPart(_many_tips(1, MAX_FRONTIER_TIPS).tips, more=True)
    with pytest.raises(RemoteProtocolError, match=f"at most {MAX_FRONTIER_TIPS} logs") as caught:
        deliver(frame(one_more), b)
    assert caught.value.field == "frontier_size"


def test_frontier_parts_need_the_feature_on_both_sides() -> None:
    old = Session(mesh=MESH, node=node_id("b"))
    old.hello = Hello(1, 0, MESH, node_id("b"))  # a 1.0 peer: no features
    a = Session(mesh=MESH, node=node_id("a"))
    deliver(a.start(), old)
    deliver(old.start(), a)
    ours = _many_tips(3)
    deliver(a.send(FrontierDigest(ours.digest())), old)
    deliver(old.send(FrontierDigest(b"\x07" * 32)), a)
    with pytest.raises(LocalProtocolError, match=r"needs 'frontier\.parts' on both sides"):
        a.send(FrontierPart(ours.tips[:1], more=True))


# --- partial replication: workspace tags, wants and their answers ------------------------------


def _partial(state: State = State.LIVE) -> tuple[Session, Session]:
    return pair_in(state, features=(PARTIAL,))


IDS = tuple(sorted(e.id for e in L1))  # six entry ids, ascending


def _tagged(entries: list[Entry], tag: str = "team") -> Push:
    return Push(tuple((e.raw, tag) for e in entries))


def test_a_workspace_tag_needs_partial_on_both_sides() -> None:
    a, b = pair_in(State.LIVE)
    push = _tagged(L1[:1])
    with pytest.raises(LocalProtocolError, match="a workspace tag needs 'partial' on both sides"):
        a.send(push)
    with pytest.raises(RemoteProtocolError, match="a workspace tag needs 'partial'") as caught:
        deliver(frame(push), b)
    assert caught.value.field == "state"
    assert reply_code(b) == ErrorCode.PROTOCOL
    a, b = pair_in(State.FRONTIER)  # in a catch-up batch as in a push
    with pytest.raises(LocalProtocolError, match="a workspace tag needs 'partial'"):
        a.send(Entries(push.entries))
    with pytest.raises(RemoteProtocolError, match="a workspace tag needs 'partial'"):
        deliver(frame(Entries(push.entries, done=True)), b)


def test_a_workspace_tag_needs_partial_offered_by_both_not_one() -> None:
    a = Session(mesh=MESH, node=node_id("a"), features=(PARTIAL,))
    b = Session(mesh=MESH, node=node_id("b"))
    deliver(a.start(), b)
    deliver(b.start(), a)
    assert PARTIAL in a.hello.features
    assert a.features == b.features == {"frontier.parts"}
    deliver(a.send(Credit(4, 1 << 20)), b)
    same = FrontierDigest(b"\x07" * 32)
    deliver(a.send(same), b)
    deliver(b.send(same), a)
    assert b.caught_up
    with pytest.raises(LocalProtocolError, match="needs 'partial' on both sides"):
        b.send(_tagged(L1[:1]))
    with pytest.raises(RemoteProtocolError, match="needs 'partial' on both sides"):
        deliver(frame(Want(IDS)), a)


def test_tagged_entries_travel_and_their_tags_cost_credit_where_both_offer_partial() -> None:
    a, b = _partial(State.FRONTIER)
    batch = Entries(((L1[0].raw, L1[0].payload), (L1[1].raw, "team"), (L1[2].raw, None)))
    before = a.credit
    assert deliver(a.send(batch), b) == [batch]
    cost = len(L1[0].raw) + len(L1[0].payload or b"") + len(L1[1].raw) + 4 + len(L1[2].raw)
    assert before.nbytes - a.credit.nbytes == cost
    assert a.credit == b.granted
    deliver(a.send(Entries(done=True)), b)
    deliver(b.send(Entries(done=True)), a)
    assert deliver(a.send(_tagged(L1[3:5], "ops")), b) == [_tagged(L1[3:5], "ops")]


@pytest.mark.parametrize(
    "message",
    [Want(IDS), Payloads(), Payloads(((IDS[0], Answer.ABSENT),))],
    ids=["want", "empty payloads", "payloads"],
)
def test_wants_and_payloads_need_partial_on_both_sides(message: Message) -> None:
    a, b = pair_in(State.LIVE)
    with pytest.raises(LocalProtocolError, match=r"needs? 'partial' on both sides") as sent:
        a.send(message)
    assert sent.value.field == "state"
    with pytest.raises(RemoteProtocolError, match=r"needs? 'partial' on both sides") as caught:
        deliver(frame(message), b)
    assert caught.value.field == "state"
    assert reply_code(b) == ErrorCode.PROTOCOL


def test_a_want_is_answered_once_and_then_the_asker_may_want_again() -> None:
    a, b = _partial()
    assert not a.wanting
    assert b.owed is None
    assert deliver(a.send(Want(IDS)), b) == [Want(IDS)]
    assert a.wanting
    assert not b.wanting
    assert b.owed == IDS
    assert a.owed is None
    answer = Payloads(((IDS[0], L1[0].payload or b""), (IDS[3], Answer.ERASED)))
    assert deliver(b.send(answer), a) == [answer]
    assert not a.wanting
    assert b.owed is None
    # What went unanswered may be asked for again.
    again = Want((IDS[1], IDS[2], IDS[4], IDS[5]))
    deliver(a.send(again), b)
    assert b.owed == again.ids
    deliver(b.send(Payloads()), a)  # answering none of them answers the want
    assert not a.wanting


def test_a_second_want_waits_for_the_answer_to_the_first() -> None:
    a, b = _partial()
    deliver(a.send(Want(IDS[:2])), b)
    with pytest.raises(LocalProtocolError, match="waits for the answer to the one before"):
        a.send(Want(IDS[2:]))
    assert a.our_state is State.ERROR
    with pytest.raises(RemoteProtocolError, match="waits for the answer") as caught:
        deliver(frame(Want(IDS[2:])), b)
    assert caught.value.field == "state"


def test_each_side_may_have_its_own_want_outstanding() -> None:
    a, b = _partial(State.STREAMING)
    deliver(a.send(Want(IDS[:3])), b)
    deliver(b.send(Want(IDS[3:])), a)
    assert a.wanting
    assert b.wanting
    assert a.owed == IDS[3:]
    assert b.owed == IDS[:3]
    deliver(a.send(Payloads(((IDS[4], Answer.WITHHELD),))), b)
    assert not b.wanting
    assert a.wanting  # its own want is still unanswered
    assert a.our_state is b.their_state is State.STREAMING


def test_payloads_without_a_want_are_refused() -> None:
    a, b = _partial()
    answer = Payloads(((IDS[0], Answer.ABSENT),))
    with pytest.raises(LocalProtocolError, match="none is outstanding"):
        a.send(answer)
    with pytest.raises(RemoteProtocolError, match="none is outstanding") as caught:
        deliver(frame(answer), b)
    assert caught.value.field == "state"
    # Nor may a side answer its own want.
    a, b = _partial()
    deliver(a.send(Want(IDS)), b)
    with pytest.raises(LocalProtocolError, match="none is outstanding"):
        a.send(answer)


def test_payloads_for_an_id_not_asked_for_are_refused() -> None:
    asked = Want(IDS[1:4])
    for stray in (IDS[0], IDS[4]):  # before the first asked and after the last
        answer = Payloads(tuple(sorted([(IDS[2], Answer.ABSENT), (stray, Answer.ABSENT)])))
        a, b = _partial()
        deliver(b.send(asked), a)
        with pytest.raises(LocalProtocolError, match="an id the want did not ask for") as sent:
            a.send(answer)
        assert sent.value.field == "items"
        with pytest.raises(RemoteProtocolError, match="an id the want did not ask for"):
            deliver(frame(answer), b)
    a, b = _partial()
    deliver(b.send(asked), a)
    deliver(a.send(Payloads(((IDS[1], b"p"), (IDS[3], b"q")))), b)  # a subset, in order
    assert not b.wanting


def test_a_payloads_frame_at_the_limit_passes_the_session() -> None:
    a, b = _partial()
    ids = tuple(sorted(make_log(9, 17)[i].id for i in range(17)))
    items: list[tuple[bytes, bytes | int]] = [(i, bytes(MAX_PAYLOAD_BYTES)) for i in ids[:15]]
    items.append((ids[15], bytes(0x10000)))
    items.append((ids[16], Answer.ABSENT))
    items[15] = (ids[15], bytes(0x10000 + MAX_FRAME_BYTES - payloads_size(items)))
    assert payloads_room(items) == len(items)
    deliver(b.send(Want(ids)), a)
    data = a.send(Payloads(tuple(items)))
    assert len(data) == 4 + MAX_FRAME_BYTES
    assert deliver(data, b) == [Payloads(tuple(items))]
    assert not b.wanting
