"""Authoring: sealing entries of this node's own log through the store's writer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from node.store import AuthoredEntry, Content, Store, Txn
from protocol.signing import SigningKey

__all__ = ["Author"]

After = Callable[[Txn, AuthoredEntry], None]


@dataclass(slots=True)
class Author:
    """This node's writing identity: key, mesh and current epoch, over its store."""

    store: Store
    key: SigningKey
    mesh: bytes
    epoch: bytes

    def write(
        self, kind: str, content: Content, after: After | None = None
    ) -> Awaitable[AuthoredEntry]:
        """Author one entry; ``content`` is (payload bytes, payload) or an async builder."""
        return self.store.author(self.key, self.mesh, self.epoch, kind, content, after)
