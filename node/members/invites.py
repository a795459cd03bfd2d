"""Invites: a signed, expiring, single-use permission to join the mesh
(docs/mesh.md §Invites and joining).

An invite is text: ``mli1.`` followed by base64url (no padding) of a canonical msgpack array
and the authority's 64-byte Ed25519 signature of it::

    [1, mesh (16 bytes), authority key (32), invite id (16), [workspace…], expires (ms), label]

and, when the grant it promises holds the payloads of some workspaces only (docs/partial.md),
an eighth field, the sorted ``[workspace…]`` of ``holds``.

The signature covers ``"memlane invite v1\\0"`` followed by the array's bytes, so it can never
be mistaken for an entry's signature.  The invite carries the authority key so a joiner can
check the invite, and the authority's certificate, before it trusts either.

``redeem`` is the authority's side of joining, a pure function: given the invite, the
joiner's node key, the time and whether the invite was already used, it checks the invite and
returns the ``member.add`` payload to author and the joiner's certificate.  Recording the use
and authoring the entry, in one transaction, is ``MeshAuthority.redeem``'s.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from node.members.certs import node_certificate, raw_public
from node.members.errors import InviteError
from node.members.membership import grant_payload
from protocol.canonical import decode_canonical, encode_canonical
from protocol.errors import ProtocolError
from protocol.signing import SigningKey, verify_signature

__all__ = ["PREFIX", "Invite", "Redeemed", "issue", "read", "redeem"]

PREFIX = "mli1."
_VERSION = 1
_DOMAIN = b"memlane invite v1\0"
_SIG = 64
_MAX_BYTES = 24 * 1024
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+\Z")


@dataclass(frozen=True, slots=True)
class Invite:
    mesh: bytes
    authority: bytes
    invite_id: bytes
    workspaces: tuple[str, ...]
    expires: int
    label: str | None = None
    holds: tuple[str, ...] | None = None  # None: all

    def _fields(self) -> list[Any]:
        fields = [
            _VERSION,
            self.mesh,
            self.authority,
            self.invite_id,
            list(self.workspaces),
            self.expires,
            self.label,
        ]
        return fields if self.holds is None else [*fields, list(self.holds)]


@dataclass(frozen=True, slots=True)
class Redeemed:
    """What the authority hands a joiner: the grant it authors and the joiner's certificate."""

    invite: Invite
    payload: dict[str, Any]
    certificate: x509.Certificate


def issue(
    authority: SigningKey,
    mesh: bytes,
    invite_id: bytes,
    workspaces: Sequence[str],
    expires: int,
    label: str | None = None,
    holds: Sequence[str] | None = None,
) -> str:
    """The invite's text, signed by ``authority`` (``invite_id``: 16 random bytes)."""
    # The grant it promises must be valid.
    promised = grant_payload(bytes(32), workspaces, expires, label, holds=holds)
    held = promised.get("holds")
    invite = Invite(
        mesh,
        authority.public,
        invite_id,
        tuple(workspaces),
        expires,
        label,
        None if held is None else tuple(held),
    )
    body = encode_canonical(invite._fields())
    sig = authority.sign(_DOMAIN + body)
    return PREFIX + base64.urlsafe_b64encode(body + sig).rstrip(b"=").decode()


def read(text: str) -> Invite:
    """Decode an invite and check its signature against the authority key it names; raises
    ``InviteError``.  (The authority also checks that the key is its own: ``redeem``.)"""
    text = text.strip()
    encoded = text[len(PREFIX) :]
    if not text.startswith(PREFIX) or len(text) > _MAX_BYTES or not _BASE64URL.match(encoded):
        raise InviteError("not a memlane invite")
    try:
        blob = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InviteError("not a memlane invite") from exc
    body, sig = blob[:-_SIG], blob[-_SIG:]
    invite = _fields(body)
    if len(sig) != _SIG or not verify_signature(invite.authority, sig, _DOMAIN + body):
        raise InviteError("the invite's signature does not verify")
    return invite


def _fields(body: bytes) -> Invite:
    try:
        value = decode_canonical(body, what="invite", max_bytes=_MAX_BYTES)
    except ProtocolError as exc:
        raise InviteError("not a memlane invite") from exc
    if not isinstance(value, list) or len(value) not in (7, 8) or value[0] != _VERSION:
        raise InviteError("not a memlane invite (or a version this node does not know)")
    _, mesh, authority, invite_id, workspaces, expires, label, *rest = value
    holds = rest[0] if rest else None
    ok = (
        _is_bytes(mesh, 16)
        and _is_bytes(authority, 32)
        and _is_bytes(invite_id, 16)
        and _is_names(workspaces)
        and (holds is None or _is_names(holds))
        and type(expires) is int
        and (label is None or isinstance(label, str))
    )
    if not ok:
        raise InviteError("not a memlane invite")
    return Invite(
        mesh,
        authority,
        invite_id,
        tuple(workspaces),
        expires,
        label,
        None if holds is None else tuple(holds),
    )


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(w, str) for w in value)


def _is_bytes(value: Any, size: int) -> bool:
    return type(value) is bytes and len(value) == size


def redeem(
    text: str,
    joiner: bytes,
    now: int,
    *,
    authority: Ed25519PrivateKey,
    mesh: bytes,
    used: bool,
    cert_lifetime_ms: int,
) -> Redeemed:
    """Check an invite presented by the node whose key is ``joiner`` at ``now`` (ms): signed
    by this mesh's authority, for this mesh, not expired, not ``used``.  Returns the
    ``member.add`` payload (workspaces from the invite, certificate expiry ``now`` +
    ``cert_lifetime_ms``) and the joiner's certificate.  Raises ``InviteError``."""
    invite = read(text)
    if invite.authority != raw_public(authority):
        raise InviteError("the invite was not issued by this mesh's authority")
    if invite.mesh != mesh:
        raise InviteError("the invite is for another mesh")
    if now >= invite.expires:
        raise InviteError("the invite has expired")
    if used:
        raise InviteError("the invite was already used")
    expires = now + cert_lifetime_ms
    payload = grant_payload(joiner, invite.workspaces, expires, invite.label, holds=invite.holds)
    certificate = node_certificate(authority, mesh, joiner, issued=now, expires=expires)
    return Redeemed(invite, payload, certificate)
