"""The vector index's queue, and dropping its tables (node/search/schema.py ``_VECTORS``): plain
SQL, no numpy, so a node with no embedder can drop a stored index without loading what makes
one."""

from __future__ import annotations

from typing import Any

from node.store import Reader, Store
from node.store.writer import Txn
from node.views.sr_queries import LIVE_DOCS, SHOWN_COLUMNS, shown_at

__all__ = ["QUEUED_DOCS", "forget_index", "forgetting", "queue_live", "select_queued"]

# The docs waiting to be embedded, for the SR view's finds (``Semantic.queued``): an SR queued
# is left to BM25 until its vector is of its current text.
QUEUED_DOCS = "SELECT doc FROM sr_embed_queue"
_QUEUED = (
    f"SELECT q.doc, {SHOWN_COLUMNS} FROM sr_embed_queue q {shown_at('q.doc')} "  # noqa: S608
    "ORDER BY q.doc DESC LIMIT ?"
)

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


async def select_queued(reader: Reader, *, limit: int) -> list[Any]:
    """The newest ``limit`` docs waiting to be embedded, each as (doc, sr_id, title, text,
    tags_text) — the SR's fields None when no SR is shown at that doc any more."""
    return await reader.fetchall(_QUEUED, (limit,))


def queue_live(txn: Txn) -> None:
    """Queue every shown SR's doc to be embedded."""
    txn.add(f"INSERT INTO sr_embed_queue (doc) {LIVE_DOCS}", ())
