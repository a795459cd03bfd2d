"""The node's writing identity (``Author``), through which tool handlers write entries."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from node.store import AuthoredEntry, Content, Store
from node.store.audit import EntryEvent
from protocol.signing import SigningKey

__all__ = ["Author"]


@dataclass(slots=True)
class Author:
    """This node's writing identity: key, mesh and current epoch, over its store."""

    store: Store
    key: SigningKey
    mesh: bytes
    epoch: bytes

    def write(
        self, kind: str, content: Content, event: EntryEvent | None = None
    ) -> Awaitable[AuthoredEntry]:
        """Author one entry (``Store.author``); ``content`` is (payload bytes, payload) or an
        async builder; ``event``, the audit event it writes with it."""
        return self.store.author(self.key, self.mesh, self.epoch, kind, content, event)
