"""Golden vectors: the checked-in entries.json pins the header and payload encodings."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from protokit import EPOCH, KEY, MESH, SEED

from protocol.canonical import decode_canonical
from protocol.clock import Hlc
from protocol.entry import Entry, decode_header
from protocol.kinds import KINDS, decode_payload, encode_payload, is_known
from protocol.signing import authenticate, seal

GOLDEN = json.loads((Path(__file__).parent / "golden" / "entries.json").read_text("utf-8"))
VECTORS: list[dict[str, Any]] = GOLDEN["entries"]
BYTE_FIELDS = ("mesh", "writer", "epoch", "payload_hash")


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bin"}:
            return bytes.fromhex(value["$bin"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _entry(vec: dict[str, Any]) -> Entry:
    return Entry.decode(bytes.fromhex(vec["header"]), bytes.fromhex(vec["payload"]))


vectors = pytest.mark.parametrize("vec", VECTORS, ids=[v["name"] for v in VECTORS])


def test_file_pins_the_fixed_inputs() -> None:
    assert bytes.fromhex(GOLDEN["key_seed"]) == SEED
    assert bytes.fromhex(GOLDEN["writer"]) == KEY.public
    assert bytes.fromhex(GOLDEN["mesh"]) == MESH
    assert bytes.fromhex(GOLDEN["epoch"]) == EPOCH


def test_vectors_cover_every_kind_and_an_unknown_one() -> None:
    kinds = {v["fields"]["kind"] for v in VECTORS}
    assert kinds >= set(KINDS) | {"x.future"}
    assert len(VECTORS) >= 12


def test_vectors_form_one_linked_authentic_log() -> None:
    entries = [_entry(v) for v in VECTORS]
    assert [e.header.seq for e in entries] == list(range(1, len(entries) + 1))
    assert entries[0].header.prev is None
    assert all(b.header.prev == a.id for a, b in itertools.pairwise(entries))
    assert authenticate(entries) == [True] * len(entries)
    assert authenticate(entries, amortised=False) == [True] * len(entries)


@vectors
def test_decoding_gives_the_listed_fields(vec: dict[str, Any]) -> None:
    h = decode_header(bytes.fromhex(vec["header"]))
    want = vec["fields"]
    assert (h.v, h.seq, h.kind, h.payload_len) == (
        want["v"],
        want["seq"],
        want["kind"],
        want["payload_len"],
    )
    assert [getattr(h, name).hex() for name in BYTE_FIELDS] == [want[n] for n in BYTE_FIELDS]
    assert (h.prev.hex() if h.prev else None) == want["prev"]
    assert h.hlc == Hlc(*want["hlc"])
    assert h.sig.hex() == vec["sig"]


@vectors
def test_reencoding_gives_the_same_bytes(vec: dict[str, Any]) -> None:
    raw = bytes.fromhex(vec["header"])
    assert decode_header(raw).encode() == raw


@vectors
def test_id_is_sha256_of_the_header_bytes(vec: dict[str, Any]) -> None:
    raw = bytes.fromhex(vec["header"])
    assert hashlib.sha256(raw).hexdigest() == vec["id"]
    assert _entry(vec).id.hex() == vec["id"]


@vectors
def test_resealing_the_same_inputs_gives_identical_bytes(vec: dict[str, Any]) -> None:
    f = vec["fields"]
    entry = seal(
        KEY,
        mesh=MESH,
        epoch=EPOCH,
        seq=f["seq"],
        prev=bytes.fromhex(f["prev"]) if f["prev"] else None,
        hlc=Hlc(*f["hlc"]),
        kind=f["kind"],
        payload=bytes.fromhex(vec["payload"]),
    )
    assert entry.raw.hex() == vec["header"]
    assert entry.id.hex() == vec["id"]
    assert entry.header.sig.hex() == vec["sig"]


@vectors
def test_payload_bytes_match_hash_and_value(vec: dict[str, Any]) -> None:
    kind, body = vec["fields"]["kind"], bytes.fromhex(vec["payload"])
    want = _from_json(vec["payload_value"])
    assert hashlib.sha256(body).hexdigest() == vec["fields"]["payload_hash"]
    assert len(body) == vec["fields"]["payload_len"]
    if is_known(kind):
        assert decode_payload(kind, body) == want
        assert encode_payload(kind, want) == body
    else:
        assert decode_canonical(body, what="payload") == want
