"""Dropping the vector index's tables (node/search/schema.py ``_VECTORS``): plain SQL, no numpy,
so a node with no embedder can drop a stored index without loading what makes one."""

from __future__ import annotations

from node.store import Store
from node.store.txn import Txn

__all__ = ["forget_index", "forgetting"]

_FORGET = ("DELETE FROM sr_vectors", "DELETE FROM sr_embed_queue", "DELETE FROM sr_vector_model")


async def forget_index(store: Store) -> None:
    """No embedder: drop the index and stop queueing (``sr_vector_model`` empty)."""
    assert store.reader is not None
    if await store.reader.scalar("SELECT count(*) FROM sr_vector_model"):
        await store.run(_forget)


async def _forget(txn: Txn) -> None:
    forgetting(txn)


def forgetting(txn: Txn) -> None:
    """Queue the statements that empty the index, its queue and its model."""
    for sql in _FORGET:
        txn.add(sql, ())
