"""The fork proofs one link carries (docs/protocol.md §3.7): how many the peer has brought — at
most ``max_fork_proofs``, beyond which it is flooding — and every pair either side has named,
so that no proof goes to the peer that it sent or was sent before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from node.mesh.errors import PeerFlooding

__all__ = ["ForkProofs"]

_Pair = frozenset[bytes]


@dataclass(slots=True)
class ForkProofs:
    """One link's fork proofs, both ways."""

    most: int  # proofs the peer may bring
    forks_seen: int = 0  # the store's fork count when proofs were last offered to the peer
    _brought: int = 0
    _theirs: set[_Pair] = field(default_factory=set)
    _told: set[_Pair] = field(default_factory=set)

    def taken(self, first: bytes, second: bytes) -> bool:
        """The peer sent this proof: whether it is new to this link (and goes to the store)."""
        self._brought += 1
        if self._brought > self.most:
            raise PeerFlooding(f"more than {self.most} fork proofs")
        pair = frozenset((first, second))
        if pair in self._theirs:
            return False
        self._theirs.add(pair)
        self._told.add(pair)  # no need to tell the peer its own proof
        return True

    def to_tell(self, first: bytes, second: bytes) -> bool:
        """Whether the peer is still to be sent this proof; from now on it counts as told."""
        pair = frozenset((first, second))
        if pair in self._told:
            return False
        self._told.add(pair)
        return True
