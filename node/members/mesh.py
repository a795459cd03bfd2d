"""This node's mesh as ``serve``, joins and the CLI ask it (``Node.membership``, docs/mesh.md): who
belongs and whom the live membership admits, what the authority node does (membership
changes, invites, certificates, their renewal), the authority's log a joiner is sent, and the
peer snapshot ``memlane serve`` leaves in the store for ``memlane peers``.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography import x509

from node.members.authority import (
    DEFAULT_CERT_LIFETIME_MS,
    DEFAULT_INVITE_LIFETIME_MS,
    MeshAuthority,
)
from node.members.errors import NotAuthority
from node.members.invites import Redeemed
from node.members.membership import ALL_WORKSPACES, Member, Membership
from node.store import Store, Txn

__all__ = ["PEERS_STATE", "MeshMembers"]

PEERS_STATE = "sync_peers"  # the state row of the peer snapshot (node.mesh.service)


class MeshMembers:
    """Membership and the mesh authority of one node, over its store."""

    def __init__(self, store: Store, membership: Membership, authority: MeshAuthority) -> None:
        self._store = store
        self._membership = membership
        self._authority = authority

    # -- who belongs -----------------------------------------------------------------------------

    @property
    def authority_key(self) -> bytes | None:
        """The mesh authority's public key (None before the store has loaded it)."""
        return self._membership.authority

    def may_hold(self, workspace: str) -> bool:
        """Whether this node's grant holds the payloads of ``workspace`` (docs/partial.md)."""
        return self._membership.may_hold(workspace)

    def members(self) -> list[Member]:
        """Every node key the authority's log has added or revoked."""
        return self._membership.members()

    def member(self, key: bytes) -> Member | None:
        """The grant of the node key ``key`` as the log has it now, if it was ever added."""
        return self._membership.get(key)

    def admits(self, key: bytes, now: int | None = None) -> bool:
        """Whether the node key ``key`` is an admitted member at ``now`` (ms; default this
        node's wall clock): granted, not revoked, its grant not expired."""
        return self._membership.admits_peer(key, self._store.wall() if now is None else now)

    def holds_authority(self) -> bool:
        """Whether this is the authority node (its data directory holds the authority key)."""
        try:
            self.require_authority()
        except NotAuthority:
            return False
        return True

    def require_authority(self) -> None:
        """``NotAuthority``, saying why, unless this node holds the mesh authority key."""
        self._authority.keys()

    async def authority_entries(self) -> list[tuple[bytes, bytes | None]]:
        """Every stored entry of the authority's logs (raw header, payload), log by log in seq
        order: what a joiner needs to know the members."""
        reader = self._store.reader
        assert reader is not None
        authority = self.authority_key or b""
        out: list[tuple[bytes, bytes | None]] = []
        for log in await reader.select_logs():
            if log.writer == authority:
                async for stored in reader.iter_entries(log.log_id):
                    out.append((stored.raw, stored.payload))
        return out

    # -- the authority node ----------------------------------------------------------------------

    async def admit_member(
        self,
        key: bytes,
        *,
        workspaces: Sequence[str] = (ALL_WORKSPACES,),
        cert_expires: int | None = None,
        label: str | None = None,
        max_logs: int | None = None,
        holds: Sequence[str] | None = None,
    ) -> Member:
        """Author ``member.add`` for ``key`` with the authority key (this node must hold it);
        ``cert_expires`` defaults to 90 days from now, ``max_logs`` to the mesh's 64,
        ``holds`` to all (docs/partial.md)."""
        return await self._authority.add(
            key,
            workspaces=workspaces,
            cert_expires=cert_expires,
            label=label,
            max_logs=max_logs,
            holds=holds,
        )

    async def regrant(
        self, node: str, *, max_logs: int | None = None, holds: Sequence[str] | None = None
    ) -> Member:
        """Author ``member.add`` for a member (node id or key hex), its grant unchanged but
        for how many logs it may hold (docs/mesh.md §Logs per writer) and the workspaces
        whose payloads it holds (docs/partial.md), where given."""
        return await self._authority.regrant(node, max_logs=max_logs, holds=holds)

    async def revoke_member(self, node: str) -> Member:
        """Author ``member.revoke`` for a member (node id or key hex), after the last
        (epoch, seq) of it this node has accepted."""
        return await self._authority.revoke(node)

    async def renew_due(self, *, before_ms: int, lifetime_ms: int) -> list[Member]:
        """Renew, for another ``lifetime_ms``, every grant ending within ``before_ms``."""
        return await self._authority.renew_due(before_ms=before_ms, lifetime_ms=lifetime_ms)

    def create_invite(
        self,
        *,
        workspaces: Sequence[str] = (ALL_WORKSPACES,),
        lifetime_ms: int = DEFAULT_INVITE_LIFETIME_MS,
        label: str | None = None,
        expires: int | None = None,
        holds: Sequence[str] | None = None,
    ) -> str:
        """A signed, single-use invite to this mesh (``memlane mesh invite``), valid for
        ``lifetime_ms`` from now, or until ``expires`` (ms) when given; ``holds``: the
        workspaces whose payloads the joiner holds (None: all)."""
        return self._authority.invite(
            workspaces=workspaces,
            lifetime_ms=lifetime_ms,
            label=label,
            expires=expires,
            holds=holds,
        )

    async def redeem_invite(
        self, invite: str, joiner_key: bytes, *, cert_lifetime_ms: int = DEFAULT_CERT_LIFETIME_MS
    ) -> Redeemed:
        """The authority's side of a join: admit ``joiner_key`` on ``invite``."""
        return await self._authority.redeem(invite, joiner_key, cert_lifetime_ms=cert_lifetime_ms)

    def authority_certificate(self) -> x509.Certificate:
        return self._authority.authority_certificate()

    def node_certificate(self, key: bytes | None = None) -> x509.Certificate:
        """A certificate for an admitted node key (this node's by default)."""
        return self._authority.node_certificate(self._authority.own_key if key is None else key)

    # -- the peer snapshot -----------------------------------------------------------------------

    async def saved_peers(self) -> bytes | None:
        """The peer snapshot ``memlane serve`` last saved (JSON), if any."""
        return await self._store.get_state(PEERS_STATE)

    async def save_peers(self, data: bytes) -> None:
        """Replace the saved peer snapshot with ``data`` (JSON)."""

        async def op(txn: Txn) -> None:
            self._store.put_state(txn, PEERS_STATE, data)

        await self._store.run(op)
