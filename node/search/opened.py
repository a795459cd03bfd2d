"""The vector index a node keeps while it is open, by its ``[search]`` settings
(docs/search.md): none without an embedder, and the embedders (numpy) load only where one is
configured."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from node.search.settings import SearchConfig
from node.search.tables import forget_index
from node.store import Store

if TYPE_CHECKING:
    from node.search.index import VectorIndex

__all__ = ["open_index"]


@asynccontextmanager
async def open_index(
    store: Store, search: SearchConfig, *, embed: bool
) -> AsyncIterator[VectorIndex | None]:
    """The configured embedder's index, open while the node is; with none, no index is kept
    (a stored one is dropped, where ``embed`` says the node is the one that embeds)."""
    if search.embedder == "none":
        if embed:  # (a one-shot command under another configuration leaves it alone)
            await forget_index(store)
        yield None
        return
    from node.search.embedders import make_embedder  # numpy loads only where one is kept
    from node.search.index import VectorIndex

    index = VectorIndex(
        store,
        make_embedder(search),
        batch=search.batch,
        weight=search.fusion_weight,
        timeout=search.timeout_ms / 1000,
    )
    try:
        await index.open(work=embed)
        yield index
    finally:
        await index.aclose()
