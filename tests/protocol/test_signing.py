"""Keys, sealing and the authenticity rule: amortised and per-entry verdicts always agree."""

from __future__ import annotations

import hashlib

import pytest
from protokit import (
    EPOCH,
    KEY,
    corrupt_sig,
    flip,
    make_run,
    rule_verdicts,
    seal_one,
    with_sig,
)

from protocol.entry import Entry, decode_header
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.signing import (
    SigningKey,
    authentic_from,
    authenticate,
    linked,
    verify_signature,
)

OTHER = SigningKey(b"\x07" * 32)


def _both(run: list[Entry]) -> list[bool]:
    """The verdicts, after checking that both modes and the independent rule agree on them."""
    amortised = authenticate(run)
    assert authenticate(run, amortised=False) == amortised
    assert amortised == rule_verdicts(run)
    return amortised


@pytest.fixture(scope="module")
def run_1000() -> list[Entry]:
    return make_run(1000)


@pytest.fixture(scope="module")
def run_50() -> list[Entry]:
    return make_run(50)


def test_signing_key_needs_a_32_byte_seed() -> None:
    for seed in (b"", bytes(31), bytes(33), bytearray(32), "x" * 32):
        with pytest.raises(LocalProtocolError) as info:
            SigningKey(seed)  # type: ignore[arg-type]
        assert info.value.field == "seed"
    assert SigningKey(bytes(range(32))).public == KEY.public != OTHER.public


def test_verify_signature() -> None:
    sig = KEY.sign(b"data")
    assert sig == KEY.sign(b"data")  # Ed25519 is deterministic
    assert verify_signature(KEY.public, sig, b"data")
    assert not verify_signature(KEY.public, sig, b"datA")
    assert not verify_signature(OTHER.public, sig, b"data")
    assert not verify_signature(KEY.public, flip(sig, 63, 0x01), b"data")
    assert not verify_signature(b"\xff" * 32, sig, b"data")  # not a curve point


def test_sealed_entries_link() -> None:
    a, b = make_run(2)
    assert b.header.prev == a.id == hashlib.sha256(a.raw).digest()
    assert linked(a, b)
    assert not linked(b, a)
    assert not linked(a, seal_one(2, a.id, key=OTHER))
    assert not linked(a, seal_one(2, a.id, epoch=b"\x23" * 8))
    assert not linked(a, seal_one(3, a.id))


def test_a_long_run_is_authentic_in_both_modes(run_1000: list[Entry]) -> None:
    assert authenticate(run_1000) == [True] * 1000
    assert authenticate(run_1000, amortised=False) == [True] * 1000


def test_empty_and_lone_entries() -> None:
    good = seal_one(1, None)
    assert authenticate([]) == []
    assert _both([good]) == [True]
    assert _both([corrupt_sig(good)]) == [False]


def test_a_bad_signature_is_vouched_for_by_a_later_linked_one() -> None:
    assert _both(make_run(2, bad_sig_at=frozenset({0}))) == [True, True]
    assert _both(make_run(5, bad_sig_at=frozenset({0, 1, 2, 3}))) == [True] * 5
    assert _both(make_run(3, bad_sig_at=frozenset({2}))) == [True, True, False]
    assert _both(make_run(3, bad_sig_at=frozenset({0, 1, 2}))) == [False] * 3


def test_tampering_each_signature_in_place(run_50: list[Entry]) -> None:
    for i in range(50):
        run = [*run_50[:i], corrupt_sig(run_50[i]), *run_50[i + 1 :]]
        assert _both(run) == [j != i for j in range(50)]  # the link to it breaks as well


def test_tampering_each_signature_the_writer_chained_over() -> None:
    for i in range(50):
        run = make_run(50, bad_sig_at=frozenset({i}))
        assert _both(run) == [i != 49 or j != 49 for j in range(50)]


@pytest.mark.parametrize("i", [0, 1, 500, 998, 999])
def test_tampering_a_sample_of_a_long_run(run_1000: list[Entry], i: int) -> None:
    in_place = [*run_1000[:i], corrupt_sig(run_1000[i]), *run_1000[i + 1 :]]
    assert _both(in_place) == [j != i for j in range(1000)]
    chained = run_1000[:i] + make_run(
        1000 - i, bad_sig_at=frozenset({0}), start_seq=i + 1, prev=run_1000[i - 1].id if i else None
    )
    assert _both(chained) == [i != 999 or j != 999 for j in range(1000)]


def test_many_bad_signatures_in_a_long_run() -> None:
    bad = frozenset(range(0, 1000, 3)) | frozenset(range(990, 1000))
    verdicts = _both(make_run(1000, bad_sig_at=bad))
    assert verdicts == [j < 990 for j in range(1000)]  # 989 is the last that verifies


def _run_with_break(kind: str) -> list[Entry]:
    """Five entries; the second has a bad signature, and the third starts after a break."""
    e0, e1 = make_run(2, bad_sig_at=frozenset({1}))
    if kind == "wrong prev":
        e2 = seal_one(3, hashlib.sha256(b"elsewhere").digest())
    elif kind == "skipped seq":
        e2 = seal_one(4, e1.id)
    else:
        e2 = seal_one(3, e1.id, key=OTHER)
    return [
        e0,
        e1,
        *make_run(
            3,
            start_seq=e2.header.seq,
            prev=e2.header.prev,
            key=OTHER if kind == "other log" else KEY,
        ),
    ]


@pytest.mark.parametrize("kind", ["wrong prev", "skipped seq", "other log"])
def test_a_break_stops_later_signatures_vouching_across_it(kind: str) -> None:
    run = _run_with_break(kind)
    assert not linked(run[1], run[2])
    assert _both(run) == [True, False, True, True, True]
    assert _both(run[:2]) == [True, False]


def test_a_repaired_link_lets_the_signature_vouch_again() -> None:
    e0, e1 = make_run(2, bad_sig_at=frozenset({1}))
    assert _both([e0, e1, *make_run(3, start_seq=3, prev=e1.id)]) == [True] * 5


def _judge_flipped(run: list[Entry], j: int, pos: int, mask: int) -> None:
    raw = flip(run[j].raw, pos, mask)
    try:
        header = decode_header(raw)
    except RemoteProtocolError:
        return  # detected: the bytes are not a header any more
    forged = Entry.decode(raw, None)
    assert header != run[j].header
    assert forged.id != run[j].id
    verdicts = _both([*run[:j], forged, *run[j + 1 :]])
    assert verdicts[j] is False
    assert verdicts == [k != j for k in range(len(run))]


def test_flipping_any_header_byte_in_a_run_is_detected() -> None:
    run = [entry.without_payload() for entry in make_run(4)]
    for j in range(len(run)):
        for pos in range(len(run[j].raw)):
            for mask in (0x01, 0xFF):
                _judge_flipped(run, j, pos, mask)


def test_a_forged_signature_from_another_key_is_not_authentic() -> None:
    genuine = seal_one(1, None)
    forged = with_sig(genuine, OTHER.sign(genuine.header.signing_bytes()))
    assert _both([forged]) == [False]
    assert _both([forged, seal_one(2, forged.id)]) == [True, True]  # the writer chained it


def test_a_payload_tamper_is_detected() -> None:
    entry = seal_one(1, None)
    assert entry.payload is not None
    tampered = flip(entry.payload, len(entry.payload) - 1, 0x01)
    with pytest.raises(RemoteProtocolError) as info:
        Entry.decode(entry.raw, tampered)
    assert info.value.field == "payload"
    with pytest.raises(RemoteProtocolError):
        Entry(entry.header, entry.raw, entry.id, tampered).check_payload()
    Entry.decode(entry.raw, entry.payload).check_payload()


def test_entries_of_another_epoch_are_another_log() -> None:
    a = seal_one(1, None)
    b = seal_one(1, None, epoch=b"\x99" * 8)
    assert a.header.log != b.header.log == (KEY.public, b"\x99" * 8)
    assert a.header.log == (KEY.public, EPOCH)
    assert _both([a, b]) == [True, True]


# -- authentic_from: the rule over what links on from a log's head ---------------------------


def _prefix_len(verdicts: list[bool]) -> int:
    return next((i for i, ok in enumerate(verdicts) if not ok), len(verdicts))


@pytest.mark.parametrize("bad", [frozenset(), frozenset({3}), frozenset({9}), frozenset({0, 9})])
@pytest.mark.parametrize("amortised", [True, False])
def test_authentic_from_agrees_with_the_rule_on_a_line(
    bad: frozenset[int], amortised: bool
) -> None:
    run = make_run(10, bad_sig_at=bad)
    got = authentic_from(0, None, run, amortised=amortised)
    assert got == run[: _prefix_len(rule_verdicts(run))]


def test_authentic_from_continues_a_head() -> None:
    run = make_run(10)
    assert authentic_from(4, run[3].id, run[4:]) == run[4:]
    assert authentic_from(4, b"\x00" * 32, run[4:]) == []  # does not link on from that head


def test_a_forged_sibling_does_not_hold_back_the_genuine_entry() -> None:
    run = make_run(6)
    forged = corrupt_sig(seal_one(3, run[1].id, payload=b"\x80"))
    for company in ([forged, *run], [*run, forged], [forged, *run[:3]]):
        got = authentic_from(0, None, company)
        assert got == [e for e in run if any(e.id == c.id for c in company)]
    assert authentic_from(2, run[1].id, [forged]) == []
