"""The join exchange (docs/mesh.md §Joining): one request and one answer, each a single frame
(``protocol.frames``) whose body is a canonical msgpack map.  Sans-IO: bytes in, values out.

- ``JoinRequest`` (joiner → authority): the invite text, the joiner's new node key and its
  Ed25519 signature of ``"memlane join v1\\0" + invite id + node key`` (``proof_message``),
  which shows the joiner holds the key it asks to have admitted.
- ``JoinAnswer`` (authority → joiner): the mesh id, the authority key, the authority's log
  entries (raw header and payload bytes, in log order) and two PEM certificates: the mesh's
  authority certificate and the joiner's node certificate.
- ``JoinRefused`` (authority → joiner): why the join was refused, as text.

Every field is checked for type and size; anything else is ``RemoteProtocolError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.canonical import decode_canonical, encode_canonical
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_ENTRIES",
    "MAX_REQUEST_BYTES",
    "VERSION",
    "JoinAnswer",
    "JoinRefused",
    "JoinRequest",
    "decode_answer",
    "decode_request",
    "encode_answer",
    "encode_refused",
    "encode_request",
    "proof_message",
]

VERSION = 1
MAX_REQUEST_BYTES = 32 * 1024
"""The largest request body: an invite is at most 24 KiB of text."""
MAX_ANSWER_BYTES = MAX_FRAME_BYTES
MAX_ENTRIES = 16_384
"""The most authority entries one answer carries."""
MAX_INVITE_CHARS = 24 * 1024
MAX_REASON_CHARS = 1024
MAX_PEM_BYTES = 16 * 1024
_DOMAIN = b"memlane join v1\0"
_KEY, _SIG, _MESH = 32, 64, 16


def proof_message(invite_id: bytes, key: bytes) -> bytes:
    """What the joiner signs with its new node key."""
    return _DOMAIN + invite_id + key


@dataclass(frozen=True, slots=True)
class JoinRequest:
    invite: str
    key: bytes
    proof: bytes


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    mesh: bytes
    authority: bytes
    entries: tuple[tuple[bytes, bytes | None], ...]
    ca: bytes
    certificate: bytes


@dataclass(frozen=True, slots=True)
class JoinRefused:
    reason: str


def _bad(hint: str, field: str = "join") -> RemoteProtocolError:
    return RemoteProtocolError(hint, field=field)


def _is_bytes(value: Any, size: int) -> bool:
    return type(value) is bytes and len(value) == size


def _body(value: dict[str, Any], limit: int) -> bytes:
    body = encode_canonical(value)
    if len(body) > limit:
        raise LocalProtocolError(f"{len(body)} bytes exceeds the limit of {limit}", field="join")
    return body


def _map(body: bytes, keys: set[str], limit: int) -> dict[str, Any]:
    value = decode_canonical(body, what="join", max_bytes=limit)
    if not isinstance(value, dict) or value.get("v") != VERSION or set(value) != keys:
        raise _bad("not a join message of version 1 with exactly the expected fields")
    return value


def encode_request(request: JoinRequest) -> bytes:
    return _body(
        {"v": VERSION, "invite": request.invite, "key": request.key, "proof": request.proof},
        MAX_REQUEST_BYTES,
    )


def decode_request(body: bytes) -> JoinRequest:
    value = _map(body, {"v", "invite", "key", "proof"}, MAX_REQUEST_BYTES)
    invite, key, proof = value["invite"], value["key"], value["proof"]
    if not isinstance(invite, str) or not 0 < len(invite) <= MAX_INVITE_CHARS:
        raise _bad("the invite is text of at most 24 KiB", "invite")
    if not _is_bytes(key, _KEY):
        raise _bad("a node key is 32 bytes", "key")
    if not _is_bytes(proof, _SIG):
        raise _bad("the proof is a 64-byte signature", "proof")
    return JoinRequest(invite, key, proof)


def encode_answer(answer: JoinAnswer) -> bytes:
    return _body(
        {
            "v": VERSION,
            "ok": True,
            "mesh": answer.mesh,
            "authority": answer.authority,
            "entries": [[h, p] for h, p in answer.entries],
            "ca": answer.ca,
            "cert": answer.certificate,
        },
        MAX_ANSWER_BYTES,
    )


def encode_refused(refused: JoinRefused) -> bytes:
    return _body(
        {"v": VERSION, "ok": False, "reason": refused.reason[:MAX_REASON_CHARS]}, MAX_ANSWER_BYTES
    )


def decode_answer(body: bytes) -> JoinAnswer | JoinRefused:
    value = decode_canonical(body, what="join", max_bytes=MAX_ANSWER_BYTES)
    if not isinstance(value, dict) or value.get("ok") is not True:
        refused = _map(body, {"v", "ok", "reason"}, MAX_ANSWER_BYTES)
        reason = refused["reason"]
        if refused["ok"] is not False or not isinstance(reason, str):
            raise _bad("a refusal gives its reason as text", "reason")
        if len(reason) > MAX_REASON_CHARS:
            raise _bad(f"a reason is at most {MAX_REASON_CHARS} characters", "reason")
        return JoinRefused(reason)
    value = _map(body, {"v", "ok", "mesh", "authority", "entries", "ca", "cert"}, MAX_ANSWER_BYTES)
    if not _is_bytes(value["mesh"], _MESH):
        raise _bad("a mesh id is 16 bytes", "mesh")
    if not _is_bytes(value["authority"], _KEY):
        raise _bad("an authority key is 32 bytes", "authority")
    for name in ("ca", "cert"):
        pem = value[name]
        if type(pem) is not bytes or not 0 < len(pem) <= MAX_PEM_BYTES:
            raise _bad(f"a certificate is 1 to {MAX_PEM_BYTES} bytes of PEM", name)
    return JoinAnswer(
        value["mesh"], value["authority"], _entries(value["entries"]), value["ca"], value["cert"]
    )


def _entries(value: Any) -> tuple[tuple[bytes, bytes | None], ...]:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_ENTRIES:
        raise _bad(f"the authority's entries are a list of 1 to {MAX_ENTRIES}", "entries")
    out: list[tuple[bytes, bytes | None]] = []
    for item in value:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and type(item[0]) is bytes
            and (item[1] is None or type(item[1]) is bytes)
        ):
            raise _bad("an entry is [header bytes, payload bytes or nil]", "entries")
        out.append((item[0], item[1]))
    return tuple(out)
