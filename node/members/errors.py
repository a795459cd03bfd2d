"""The mesh's errors: membership, invites and peers (docs/mesh.md)."""

from __future__ import annotations

from node.errors import ConfigError, NodeError

__all__ = ["InviteError", "MeshError", "NotAuthority", "PeerRefused", "UnknownMember"]


class MeshError(NodeError):
    """A membership, invite or certificate operation refused."""


class NotAuthority(MeshError, ConfigError):
    """This node does not hold the mesh authority key."""


class UnknownMember(MeshError):
    """No member of this mesh matches, or the one that does cannot take this change."""


class InviteError(MeshError):
    """An invite that cannot be redeemed: malformed, forged, for another mesh, expired, used."""


class PeerRefused(MeshError):
    """A TLS peer whose certificate's key is not an admitted, unrevoked node of this mesh."""
