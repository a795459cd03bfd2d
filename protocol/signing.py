"""Keys, signatures, sealing, and the one authenticity rule (docs/entries.md).

**The rule.**  An entry is authentic when its own signature verifies, or when a later entry of
the same log, linked to it by an unbroken chain of ``prev`` ids, has a signature that verifies.
Each link's ``prev`` is the SHA-256 of the whole previous header (its signature included), so a
verifying signature on the last entry of a linked run vouches for every entry before it.
``authenticate`` applies the rule to a run; with ``amortised=True`` it checks signatures from
the end backwards and stops at the first that verifies (usually one check for a whole run),
with ``amortised=False`` it checks every signature and then applies the rule — the verdict is
the same either way, which the tests check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import pairwise

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from protocol.clock import Hlc
from protocol.entry import ENVELOPE_VERSION, Entry, Header, payload_digest
from protocol.errors import LocalProtocolError

__all__ = ["SigningKey", "authentic_from", "authenticate", "linked", "seal", "verify_signature"]


class SigningKey:
    """An Ed25519 private key; the seed is passed in (``protocol`` makes no randomness)."""

    __slots__ = ("_key", "public")

    def __init__(self, seed: bytes) -> None:
        if type(seed) is not bytes or len(seed) != 32:
            raise LocalProtocolError("an Ed25519 seed is 32 bytes", field="seed")
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.public: bytes = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)


def verify_signature(writer: bytes, sig: bytes, data: bytes) -> bool:
    """Whether ``sig`` is ``writer``'s Ed25519 signature of ``data``."""
    try:
        Ed25519PublicKey.from_public_bytes(writer).verify(sig, data)
    except (InvalidSignature, ValueError):
        return False
    return True


def _verifies(entry: Entry) -> bool:
    h = entry.header
    return verify_signature(h.writer, h.sig, h.signing_bytes())


def seal(
    key: SigningKey,
    *,
    mesh: bytes,
    epoch: bytes,
    seq: int,
    prev: bytes | None,
    hlc: Hlc,
    kind: str,
    payload: bytes,
) -> Entry:
    """Author one entry: build its header, sign it, and return it with its payload."""
    digest = payload_digest(payload)
    signed = [
        ENVELOPE_VERSION,
        mesh,
        key.public,
        epoch,
        seq,
        prev,
        [hlc.wall, hlc.counter],
        kind,
        digest,
        len(payload),
    ]
    sig = key.sign(msgpack.packb(signed, use_bin_type=True))
    header = Header(
        ENVELOPE_VERSION, mesh, key.public, epoch, seq, prev, hlc, kind, digest, len(payload), sig
    )
    raw = msgpack.packb([*signed, sig], use_bin_type=True)
    return Entry(header, raw, hashlib.sha256(raw).digest(), payload)


def linked(earlier: Entry, later: Entry) -> bool:
    """Whether ``later`` directly follows ``earlier`` in the same log."""
    a, b = earlier.header, later.header
    return a.log == b.log and b.seq == a.seq + 1 and b.prev == earlier.id


def authenticate(run: Sequence[Entry], *, amortised: bool = True) -> list[bool]:
    """The authenticity verdict for each entry of ``run`` (entries of one log, in seq order).

    A break in the chain (a missing seq or a ``prev`` that does not match) splits the run:
    nothing after a break can vouch for anything before it.
    """
    verdicts = [False] * len(run)
    start = 0
    for i in range(1, len(run) + 1):
        if i == len(run) or not linked(run[i - 1], run[i]):
            _judge_segment(run, start, i, verdicts, amortised)
            start = i
    return verdicts


def _judge_segment(
    run: Sequence[Entry], start: int, stop: int, out: list[bool], amortised: bool
) -> None:
    if amortised:
        vouched = next((i for i in range(stop - 1, start - 1, -1) if _verifies(run[i])), None)
    else:
        own = [_verifies(run[i]) for i in range(start, stop)]
        vouched = max((start + i for i, ok in enumerate(own) if ok), default=None)
    if vouched is not None:
        for i in range(start, vouched + 1):
            out[i] = True


def authentic_from(
    head_seq: int, head_id: bytes | None, candidates: Sequence[Entry], *, amortised: bool = True
) -> list[Entry]:
    """The longest run of authentic candidates that links on from a log's head, in seq order.

    What links from a head is a tree, not a line: a forged copy of an entry, or the other side
    of a fork, shares its parent.  The rule is applied per branch — an entry is authentic when
    its own signature verifies or an authentic child vouches for it — so a forged sibling
    cannot hold back the genuine entry, and each entry's verdict is the same alone or in any
    company.  Amortised, an entry's own signature is checked only when no child vouches for it
    (one check for an ordinary run).  ``head_seq`` 0 is an empty log: any seq 1 attaches.
    """
    line = _as_line(head_seq, head_id, candidates)
    if line is not None:  # the usual case: one run, nothing beside it
        verdicts = authenticate(line, amortised=amortised)
        return line[: verdicts.index(False) if False in verdicts else len(line)]
    children: dict[bytes | None, list[Entry]] = {}
    for e in candidates:
        children.setdefault(e.header.prev, []).append(e)

    def following(seq: int, parent: bytes | None) -> list[Entry]:
        if seq == 0:  # seq 1 names the head of the epoch it continues, or nothing
            return [e for e in candidates if e.header.seq == 1]
        return [e for e in children.get(parent, []) if e.header.seq == seq + 1]

    roots = following(head_seq, head_id)
    kids: dict[bytes, list[Entry]] = {}
    order, level = [], roots
    while level:  # breadth first: every child comes after its parent
        order += level
        for e in level:
            kids[e.id] = following(e.header.seq, e.id)
        level = [k for e in level for k in kids[e.id]]
    ok: dict[bytes, bool] = {}
    for e in reversed(order):
        vouched = any(ok[k.id] for k in kids[e.id])
        ok[e.id] = (vouched and amortised) or _verifies(e) or vouched
    run: list[Entry] = []
    options = roots
    while (nxt := next((e for e in options if ok[e.id]), None)) is not None:
        run.append(nxt)
        options = kids[nxt.id]
    return run


def _as_line(
    head_seq: int, head_id: bytes | None, candidates: Sequence[Entry]
) -> list[Entry] | None:
    """``candidates`` in seq order when they are exactly one run linked on from the head."""
    line = sorted(candidates, key=lambda e: e.header.seq)
    if not line or line[0].header.seq != head_seq + 1:
        return None
    if head_seq and line[0].header.prev != head_id:
        return None
    if not all(linked(a, b) for a, b in pairwise(line)):
        return None
    return line
