"""The mesh authority's side: admitting, revoking, inviting, certifying (docs/mesh.md).

Every change of membership is an entry of the authority's own log, sealed with the authority
key (``authority.key``, present in the authority node's data directory only) through the
store's single writer, so it is applied to ``Membership`` in the transaction that stores it.
Checks that depend on the current members run inside that transaction, before anything is
queued, so concurrent changes cannot interleave between check and entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from node.identity import load_key, node_id, random_bytes
from node.members import certs, invites
from node.members.errors import MeshError, NotAuthority, UnknownMember
from node.members.membership import ALL_WORKSPACES, Member, Membership, grant_payload
from node.store import Ingest, Store, Txn
from protocol.kinds import encode_payload
from protocol.signing import SigningKey

__all__ = [
    "DEFAULT_CERT_LIFETIME_MS",
    "DEFAULT_INVITE_LIFETIME_MS",
    "MeshAuthority",
]

DEFAULT_CERT_LIFETIME_MS = 90 * 24 * 3600 * 1000
DEFAULT_INVITE_LIFETIME_MS = 24 * 3600 * 1000


class MeshAuthority:
    """Membership changes, invites and certificates, on the node holding the authority key."""

    def __init__(
        self, store: Store, membership: Membership, mesh: bytes, key_file: Path, own_key: bytes
    ) -> None:
        self.store = store
        self.membership = membership
        self.mesh = mesh
        self.key_file = key_file
        self.own_key = own_key
        self._keys: tuple[SigningKey, Ed25519PrivateKey] | None = None
        self._epoch: bytes | None = None

    def keys(self) -> tuple[SigningKey, Ed25519PrivateKey]:
        """The authority key, for entries and for certificates; ``NotAuthority`` if this node
        does not hold it."""
        if self._keys is None:
            if not self.key_file.exists():
                raise NotAuthority("this node does not hold the mesh authority key")
            signing, private = load_key(self.key_file), certs.private_key(self.key_file)
            if signing.public != self.membership.authority:
                raise NotAuthority(f"{self.key_file} is not this mesh's authority key")
            self._keys = (signing, private)
        return self._keys

    async def _author(self, kind: str, build: Any) -> None:
        signing, _ = self.keys()
        if self._epoch is None:
            self._epoch = await self.store.get_state("authority_epoch")
            if self._epoch is None:
                raise NotAuthority("this store holds no authority log")
        await self.store.author(signing, self.mesh, self._epoch, kind, build)

    # -- membership ----------------------------------------------------------------------------

    async def add(
        self,
        key: bytes,
        *,
        workspaces: Sequence[str] = (ALL_WORKSPACES,),
        cert_expires: int | None = None,
        label: str | None = None,
        max_logs: int | None = None,
        holds: Sequence[str] | None = None,
    ) -> Member:
        """Author ``member.add`` for ``key`` (also how a grant is changed or renewed)."""
        if cert_expires is None:
            cert_expires = self.store.wall() + DEFAULT_CERT_LIFETIME_MS
        payload = grant_payload(
            key, workspaces, cert_expires, label, max_logs=max_logs, holds=holds
        )
        await self._grant(key, payload)
        await self._release(key)
        return self._member(key)

    async def regrant(
        self, name: str, *, max_logs: int | None = None, holds: Sequence[str] | None = None
    ) -> Member:
        """Author ``member.add`` for the member named by ``name`` with its grant as it is —
        workspaces, certificate expiry, label, certificate — but ``max_logs`` and ``holds``
        where given (docs/partial.md: a node whose ``holds`` shrinks erases those payloads)."""
        member = self.membership.find(name)
        if member.revoked is not None or member.added_at is None:
            raise UnknownMember(f"node {member.node_id} is revoked: its grant cannot change")
        payload = grant_payload(
            member.key,
            member.workspaces,
            member.cert_expires,
            member.label,
            member.certificate,
            max_logs=member.max_logs if max_logs is None else max_logs,
            holds=member.holds if holds is None else holds,
        )
        await self._grant(member.key, payload)
        return self._member(member.key)

    async def revoke(self, name: str) -> Member:
        """Author ``member.revoke`` for the member named by ``name`` (node id or key hex),
        cutting it off after the last (epoch, seq) of it this node has accepted."""

        async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
            member = self.membership.find(name)
            if member.revoked is not None:
                raise UnknownMember(f"node {member.node_id} is already revoked")
            if member.key == self.own_key:
                raise MeshError("a node cannot revoke its own key")
            found = await self.store.select_last_accepted(txn, member.key)
            epoch, seq = found if found else (None, 0)
            payload = {"node": member.key, "last_epoch": epoch if seq else None, "last_seq": seq}
            built.append(member.key)
            return encode_payload("member.revoke", payload), payload

        built: list[bytes] = []
        await self._author("member.revoke", build)
        return self._member(built[0])

    async def renew_due(self, *, before_ms: int, lifetime_ms: int) -> list[Member]:
        """Renew every other member whose grant ends within ``before_ms``: a ``member.add``
        with the same workspaces and label, ``lifetime_ms`` from now, carrying the new node
        certificate (PEM) for the member to take from the log.  The renewed members."""
        now = self.store.wall()
        due = [
            m.key
            for m in self.membership.members()
            if m.key != self.own_key and m.admits(now) and m.cert_expires - now < before_ms
        ]
        for key in due:
            await self._renew(key, now + lifetime_ms)
        return [self._member(key) for key in due]

    async def _renew(self, key: bytes, expires: int) -> None:
        member = self._member(key)
        certificate = certs.node_certificate(
            self.keys()[1], self.mesh, key, issued=self.store.wall(), expires=expires
        )
        pem = certs.pem(certificate).decode()
        payload = grant_payload(
            key,
            member.workspaces,
            expires,
            member.label,
            pem,
            max_logs=member.max_logs,
            holds=member.holds,
        )
        await self._grant(key, payload)

    async def _grant(self, key: bytes, payload: dict[str, Any]) -> None:
        """Author ``member.add`` with ``payload``, unless ``key`` was revoked meanwhile."""
        data = encode_payload("member.add", payload)

        async def build(_txn: Txn) -> tuple[bytes, dict[str, Any]]:
            self._refuse_revoked(key)
            return data, payload

        await self._author("member.add", build)

    def _refuse_revoked(self, key: bytes) -> None:
        member = self.membership.get(key)
        if member is not None and member.revoked is not None:
            raise MeshError(f"node {node_id(key)} was revoked; a revoked key cannot return")

    def _member(self, key: bytes) -> Member:
        member = self.membership.get(key)
        assert member is not None  # its entry was applied when it was stored
        return member

    async def _release(self, key: bytes) -> None:
        """Entries of ``key`` that waited for its ``member.add`` are stored now."""
        if any(log[0] == key for log in self.store.logs.pending_logs):
            await Ingest(self.store).receive((), source="membership")

    # -- invites -------------------------------------------------------------------------------

    def invite(
        self,
        *,
        workspaces: Sequence[str] = (ALL_WORKSPACES,),
        lifetime_ms: int = DEFAULT_INVITE_LIFETIME_MS,
        label: str | None = None,
        expires: int | None = None,
        holds: Sequence[str] | None = None,
    ) -> str:
        """A signed invite, valid for one use and for ``lifetime_ms`` from now, or until
        ``expires`` (ms) when given; ``holds``: the workspaces whose payloads the joiner will
        hold (None: all)."""
        now = self.store.wall()
        expires = now + lifetime_ms if expires is None else expires
        if expires <= now:
            raise MeshError("an invite must be valid for some time")
        signing, _ = self.keys()
        return invites.issue(
            signing, self.mesh, random_bytes(16), workspaces, expires, label, holds
        )

    async def redeem(
        self, text: str, joiner: bytes, *, cert_lifetime_ms: int = DEFAULT_CERT_LIFETIME_MS
    ) -> invites.Redeemed:
        """Admit ``joiner`` on an invite: check it, record its use and author ``member.add``
        in one transaction; return the grant and the joiner's certificate."""
        _, private = self.keys()
        used_key = f"invite:{invites.read(text).invite_id.hex()}"
        now = self.store.wall()
        done: list[invites.Redeemed] = []

        async def build(txn: Txn) -> tuple[bytes, dict[str, Any]]:
            used = await self.store.has_state(txn, used_key)
            self._refuse_revoked(joiner)
            redeemed = invites.redeem(
                text,
                joiner,
                now,
                authority=private,
                mesh=self.mesh,
                used=used,
                cert_lifetime_ms=cert_lifetime_ms,
            )
            self.store.put_state(txn, used_key, joiner)
            done.append(redeemed)
            return encode_payload("member.add", redeemed.payload), redeemed.payload

        await self._author("member.add", build)
        await self._release(joiner)
        return done[0]

    # -- certificates --------------------------------------------------------------------------

    def authority_certificate(self) -> x509.Certificate:
        return certs.authority_certificate(self.keys()[1], self.mesh)

    def node_certificate(self, key: bytes) -> x509.Certificate:
        """A certificate for the admitted node ``key``, expiring as its newest grant says."""
        member = self.membership.get(key)
        if member is None or not member.admits(self.store.wall()):
            raise UnknownMember(f"node {node_id(key)} is not an admitted, unrevoked member")
        now = self.store.wall()
        return certs.node_certificate(
            self.keys()[1], self.mesh, key, issued=now, expires=member.cert_expires
        )
