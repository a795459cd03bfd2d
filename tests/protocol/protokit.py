"""Shared helpers for the protocol suite: fixed keys, runs of entries, payloads, strategies."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.kinds import KINDS, UUID, encode_payload
from protocol.schema import (
    Binary,
    Choice,
    Field,
    Flag,
    Integer,
    Nested,
    NestedList,
    Number,
    Schema,
    Text,
    TextList,
    TextMap,
)
from protocol.signing import SigningKey, seal

__all__ = [
    "BASE_WALL",
    "EPOCH",
    "FAST",
    "KEY",
    "MESH",
    "SEED",
    "VALID",
    "corrupt_sig",
    "flip",
    "make_run",
    "payloads",
    "rule_verdicts",
    "seal_one",
    "with_sig",
]

SEED = bytes(range(32))
KEY = SigningKey(SEED)
MESH = b"\x11" * 16
EPOCH = b"\x22" * 8
BASE_WALL = 1_791_504_000_000  # 2026-10-09T00:00:00Z

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SR = {"sr_id": "0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", "workspace": "team", "principal": "ana"}
_EP = {"id": "0192a3b4-c5d6-7e8f-9a0b-000000000001", "vault": "team", "caller": "agent-1"}
_ROW = {
    "kind": "call-window",
    "turn": 3,
    "iteration": 0,
    "toolCallId": "call_1",
    "toolName": "e_timeline",
    "how": "model",
}

# One minimal valid payload per kind (the validation tests start from these).
VALID: dict[str, dict[str, Any]] = {
    "sr.put": {**_SR, "create": True},
    "sr.correct": {**_SR, "reason": "typo"},
    "sr.adjust": {**_SR},
    "sr.erase": {**_SR, "entries": ["ab" * 32], "reason": "asked to forget"},
    "episode.record": {**_EP, "channel": "cli", "episode_type": "task"},
    "episode.amend": {**_EP},
    "episode.forget": {**_EP},
    "call.window": {"workspace": "team", "principal": "ana", "row": _ROW},
    "member.add": {"node": b"\x33" * 32, "workspaces": ["team"], "cert_expires": BASE_WALL},
    "member.revoke": {"node": b"\x33" * 32, "last_seq": 7},
}

_RUN_PAYLOAD = encode_payload("sr.adjust", VALID["sr.adjust"])


def seal_one(
    seq: int,
    prev: bytes | None,
    *,
    key: SigningKey = KEY,
    epoch: bytes = EPOCH,
    kind: str = "sr.adjust",
    payload: bytes = _RUN_PAYLOAD,
) -> Entry:
    """One entry of the test log at ``seq``, linked to ``prev``."""
    hlc = Hlc(BASE_WALL + seq, 0)
    return seal(
        key, mesh=MESH, epoch=epoch, seq=seq, prev=prev, hlc=hlc, kind=kind, payload=payload
    )


def make_run(
    n: int,
    *,
    bad_sig_at: frozenset[int] = frozenset(),
    start_seq: int = 1,
    prev: bytes | None = None,
    key: SigningKey = KEY,
) -> list[Entry]:
    """A linked run of ``n`` entries; those at ``bad_sig_at`` carry a corrupt signature, and
    the entry after each still links to it (the writer chained over its own bad signature)."""
    run: list[Entry] = []
    for i in range(n):
        entry = seal_one(start_seq + i, prev, key=key)
        if i in bad_sig_at:
            entry = corrupt_sig(entry)
        run.append(entry)
        prev = entry.id
    return run


def with_sig(entry: Entry, sig: bytes) -> Entry:
    return Entry.of(replace(entry.header, sig=sig), entry.payload)


def corrupt_sig(entry: Entry) -> Entry:
    return with_sig(entry, flip(entry.header.sig, 0, 0x01))


def flip(data: bytes, pos: int, mask: int = 0xFF) -> bytes:
    return data[:pos] + bytes([data[pos] ^ mask]) + data[pos + 1 :]


def rule_verdicts(run: list[Entry]) -> list[bool]:
    """The authenticity rule (docs/entries.md), written independently of ``protocol.signing``: an
    entry is authentic when it, or a later entry reached through unbroken ``prev`` links, has a
    verifying sig."""
    out: list[bool] = []
    vouched = False
    for i in reversed(range(len(run))):
        if i + 1 < len(run) and not _links(run[i], run[i + 1]):
            vouched = False
        vouched = vouched or _own_sig_ok(run[i])
        out.append(vouched)
    return out[::-1]


def _links(a: Entry, b: Entry) -> bool:
    ha, hb = a.header, b.header
    same_log = (ha.writer, ha.epoch) == (hb.writer, hb.epoch)
    return same_log and hb.seq == ha.seq + 1 and hb.prev == hashlib.sha256(a.raw).digest()


def _own_sig_ok(entry: Entry) -> bool:
    h = entry.header
    try:
        Ed25519PublicKey.from_public_bytes(h.writer).verify(h.sig, h.signing_bytes())
    except (InvalidSignature, ValueError):
        return False
    return True


# --- payload strategies, derived from the schema objects -------------------------------------


@functools.cache
def payloads(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid payloads of ``kind``, built from its schema."""
    return _schema(KINDS[kind].schema)


def _schema(schema: Schema) -> st.SearchStrategy[dict[str, Any]]:
    required = {f.name: _field(f) for f in schema.fields if f.required}
    optional = {f.name: _field(f) for f in schema.fields if not f.required}
    return st.fixed_dictionaries(required, optional=optional)


def _field(f: Field) -> st.SearchStrategy[Any]:
    value = _value(f.type)
    return st.none() | value if f.nullable else value


def _value(t: Any) -> st.SearchStrategy[Any]:
    match t:
        case Text():
            return _text(t)
        case Choice(values=values):
            return st.sampled_from(values)
        case Integer(lo=lo, hi=hi):
            return st.integers(lo, hi)
        case Number(lo=lo, hi=hi):
            return st.integers(int(lo), int(hi)) | st.floats(lo, hi, allow_nan=False)
        case Flag():
            return st.booleans()
        case Binary(length=n):
            return st.binary(min_size=n, max_size=n)
        case TextList():
            return st.lists(
                _text(t.item), min_size=t.min_items, max_size=min(t.max_items, 4), unique=t.unique
            )
        case TextMap():
            return st.dictionaries(_text(t.key), _text(t.value), max_size=min(t.max_keys, 3))
        case Nested(schema=schema):
            return _schema(schema)
        case NestedList():
            return st.lists(_schema(t.schema), min_size=t.min_items, max_size=min(t.max_items, 2))
    raise AssertionError(f"no strategy for schema type {t!r}")


def _text(t: Text) -> st.SearchStrategy[str]:
    if t.pattern is None:
        return st.text(min_size=t.min_len, max_size=min(t.max_len, 40))
    if t.pattern == UUID:  # from_regex can draw these, but slowly
        return st.uuids().map(str)
    pattern = st.from_regex(t.pattern, fullmatch=True)
    return pattern.filter(lambda s: t.min_len <= len(s) <= t.max_len)
