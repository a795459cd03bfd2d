"""The join exchange's messages (protocol/join.py): round trips, and strict refusal of
anything else."""

from __future__ import annotations

import pytest

from protocol.canonical import encode_canonical
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.join import (
    MAX_ENTRIES,
    MAX_REQUEST_BYTES,
    JoinAnswer,
    JoinRefused,
    JoinRequest,
    decode_answer,
    decode_request,
    encode_answer,
    encode_refused,
    encode_request,
    proof_message,
)
from protocol.signing import SigningKey, verify_signature

KEY = SigningKey(bytes(range(32)))
REQUEST = JoinRequest("mli1.abc", KEY.public, KEY.sign(proof_message(b"i" * 16, KEY.public)))
ANSWER = JoinAnswer(
    b"m" * 16,
    b"a" * 32,
    ((b"header", b"payload"), (b"bare", None)),
    b"-----BEGIN CERTIFICATE-----",
    b"-----BEGIN CERTIFICATE-----",
)


def test_request_round_trip_and_proof():
    assert decode_request(encode_request(REQUEST)) == REQUEST
    signed = proof_message(b"i" * 16, KEY.public)
    assert signed.startswith(b"memlane join v1\0")
    assert verify_signature(KEY.public, REQUEST.proof, signed)
    assert not verify_signature(KEY.public, REQUEST.proof, proof_message(b"j" * 16, KEY.public))


def test_answer_and_refusal_round_trip():
    assert decode_answer(encode_answer(ANSWER)) == ANSWER
    assert decode_answer(encode_refused(JoinRefused("the invite has expired"))) == JoinRefused(
        "the invite has expired"
    )


@pytest.mark.parametrize(
    "value",
    [
        {"v": 2, "invite": "mli1.abc", "key": KEY.public, "proof": bytes(64)},
        {"v": 1, "invite": "mli1.abc", "key": KEY.public},
        {"v": 1, "invite": "mli1.abc", "key": KEY.public, "proof": bytes(64), "more": 1},
        {"v": 1, "invite": b"mli1.abc", "key": KEY.public, "proof": bytes(64)},
        {"v": 1, "invite": "", "key": KEY.public, "proof": bytes(64)},
        {"v": 1, "invite": "mli1.abc", "key": bytes(31), "proof": bytes(64)},
        {"v": 1, "invite": "mli1.abc", "key": KEY.public, "proof": bytes(63)},
        ["mli1.abc", KEY.public, bytes(64)],
    ],
)
def test_bad_requests_are_refused(value):
    with pytest.raises(RemoteProtocolError):
        decode_request(encode_canonical(value))


def test_requests_are_bounded_and_canonical():
    with pytest.raises(RemoteProtocolError):
        decode_request(b"\x00" * (MAX_REQUEST_BYTES + 1))
    body = encode_request(REQUEST)
    with pytest.raises(RemoteProtocolError):
        decode_request(body + b"\xc0")  # trailing bytes
    with pytest.raises(LocalProtocolError):
        encode_request(JoinRequest("x" * MAX_REQUEST_BYTES, KEY.public, bytes(64)))


def _answer(**changes):
    value = {
        "v": 1,
        "ok": True,
        "mesh": b"m" * 16,
        "authority": b"a" * 32,
        "entries": [[b"h", b"p"]],
        "ca": b"pem",
        "cert": b"pem",
    }
    value.update(changes)
    return encode_canonical({k: v for k, v in value.items() if v is not ...})


@pytest.mark.parametrize(
    "body",
    [
        _answer(v=2),
        _answer(mesh=b"m" * 15),
        _answer(authority="a" * 32),
        _answer(entries=[]),
        _answer(entries=[[b"h"]]),
        _answer(entries=[[b"h", "p"]]),
        _answer(entries=[[b"h", b"p"]] * (MAX_ENTRIES + 1)),
        _answer(ca=b""),
        _answer(cert=...),
        _answer(extra=1),
        encode_canonical({"v": 1, "ok": False}),
        encode_canonical({"v": 1, "ok": False, "reason": 7}),
        encode_canonical({"v": 1, "ok": False, "reason": "x" * 2000}),
        encode_canonical({"v": 1, "ok": 1, "reason": "x"}),
        encode_canonical([1, True]),
    ],
)
def test_bad_answers_are_refused(body):
    with pytest.raises(RemoteProtocolError):
        decode_answer(body)
