"""Authoring: sealing entries of this node's own log through the store's writer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from node.store import Authored, Store, Txn
from protocol.signing import SigningKey

__all__ = ["Author"]

Build = Callable[[Txn], Awaitable[tuple[bytes, dict[str, Any]]]]
After = Callable[[Txn, Authored], None]


@dataclass(slots=True)
class Author:
    """This node's writing identity: key, mesh and current epoch, over its store."""

    store: Store
    key: SigningKey
    mesh: bytes
    epoch: bytes

    async def write(self, kind: str, build: Build, after: After | None = None) -> Authored:
        return await self.store.author(self.key, self.mesh, self.epoch, kind, build, after)
