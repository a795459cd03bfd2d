"""The vector index of the semantic leg (docs/search.md §The vector index and fusion).

A derived index, never in the signed log or a bundle: ``sr_vectors`` holds one vector per SR
(int8, node/search/held.py) for the text it was made from, the embedder's model is named in
``sr_vector_model``, and ``sr_embed_queue`` lists the docs written or moved since (triggers on
``srs`` keep it while a model is named; node/search/schema.py).  A worker embeds the queue in
the background, in batches, newest first, so writes never wait for an embedder; an SR whose
text did not change (it only moved, or the views were rebuilt) keeps its vector.  An index
made by another model is dropped and made again, never mixed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.errors import EmbedderError
from node.logging import get_logger
from node.search.embedders import Embedder
from node.search.held import Held, Near, Quantised, Scored, quantise
from node.search.tables import QUEUED_DOCS, forgetting, queue_live, select_queued
from node.store import Store
from node.store.writer import Txn
from node.views.sr_queries import select_embedded

__all__ = ["IndexStatus", "VectorIndex", "embedded_text"]

log = get_logger(__name__)

IDLE_POLL = 1.0  # seconds between looks at an empty queue (other processes write too)
RETRY = (1.0, 60.0)  # seconds to wait after a failed batch: first, and at most (doubling)


def embedded_text(title: str, text: str, tags_text: str) -> str:
    """What of an SR is embedded: its title, text and tags — never its private fields."""
    return "\n".join(part for part in (title, text, tags_text) if part)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True, slots=True)
class IndexStatus:
    model: str  # the configured embedder's
    stored: str | None  # the stored index's (another until serve or rebuild makes it anew)
    vectors: int  # SRs with a vector
    queued: int  # docs waiting to be embedded
    last_error: str | None


class VectorIndex:
    """The index of one embedder's model over one store, and its background worker."""

    queued = QUEUED_DOCS  # the docs waiting to be embedded, for a find's vector leg

    def __init__(
        self, store: Store, embedder: Embedder, *, batch: int, weight: float, timeout: float
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.batch = batch
        self.timeout = timeout  # seconds an embedder may take ([search] timeout)
        self.weight = weight  # the vector leg's weight in the fusion ([search] fusion_weight)
        self.fallbacks = 0  # finds answered by BM25 alone because the query had no vector
        self.held: Held | None = None
        self.stored: str | None = embedder.model  # the model the stored index is of
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()

    # -- opening and closing -----------------------------------------------------------------

    async def open(self, *, work: bool = True) -> None:
        """Take up the stored index; with ``work``, start embedding what is queued in the
        background.  An index of another model is made anew only with ``work`` (``memlane
        serve``, ``memlane mcp``): a one-shot command under another configuration leaves it
        alone, and its finds rank by BM25, saying why."""
        reader = self.store.reader
        assert reader is not None
        stored = await reader.scalar("SELECT model FROM sr_vector_model")
        if stored not in (None, self.embedder.model) and not work:
            self.stored = stored
            return
        if stored != self.embedder.model:
            await self.store.run(self._restart)
        rows = await reader.fetchall("SELECT sr_id, doc, vec FROM sr_vectors")
        for sr_id, doc, vec in rows:
            self._hold(sr_id, doc, np.frombuffer(vec, dtype=np.int8), room=len(rows))
        if work:
            self._task = asyncio.create_task(self._work(), name="vector-index")

    async def _restart(self, txn: Txn) -> None:
        self.stored = self.embedder.model
        forgetting(txn)
        txn.add("INSERT INTO sr_vector_model (model) VALUES (?)", (self.embedder.model,))
        queue_live(txn)

    async def rebuild(self) -> None:
        """Drop every vector and queue every SR again (``memlane search rebuild``)."""
        await self.store.run(self._restart)
        self.held = None
        self.wake()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.embedder.aclose()

    # -- what find asks --------------------------------------------------------------------

    async def query(self, text: str) -> Quantised:
        """The query's vector; ``EmbedderError`` when it cannot be had, or the index is not
        of this embedder's model."""
        if self.stored != self.embedder.model:  # (the tags may name endpoints: not told)
            raise EmbedderError(
                "the vector index is of another model than the one configured: memlane "
                "serve or memlane search rebuild makes it anew"
            )
        vector: Quantised = quantise(await self.embedder.embed([text]))[0]
        return vector

    def nearest(self, query: Quantised) -> Callable[[int], list[Near]]:
        """The held vectors nearest ``query``, ``count`` at a time; the similarities are
        computed on the first call (on the reader's thread), once."""
        held = self.held
        if held is None:
            return lambda _count: []
        return _Nearest(held, query)

    async def status(self) -> IndexStatus:
        reader = self.store.reader
        assert reader is not None
        vectors, queued = (
            await reader.fetchall(
                "SELECT (SELECT count(*) FROM sr_vectors), (SELECT count(*) FROM sr_embed_queue)"
            )
        )[0]
        return IndexStatus(
            self.embedder.model, self.stored, int(vectors), int(queued), self.last_error
        )

    def wake(self) -> None:
        """Look at the queue now (SRs were written or received here)."""
        self._idle.clear()
        self._wake.set()

    async def settled(self) -> None:
        """Until the worker finds the queue empty."""
        await self._idle.wait()

    # -- the worker --------------------------------------------------------------------------

    async def _work(self) -> None:
        pause = 0.0
        while True:
            try:
                done = await self.step()
                pause, self.last_error = 0.0, None
            except EmbedderError as exc:  # down, slow or refusing: BM25 answers meanwhile
                self.last_error = str(exc)
                pause = min(max(pause * 2, RETRY[0]), RETRY[1])
                log.warning("embedding_failed", error=str(exc), retry_in_s=pause)
                await asyncio.sleep(pause)
                continue
            if not done:
                self._idle.set()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(IDLE_POLL):
                        await self._wake.wait()

    async def step(self) -> int:
        """Embed one batch of the queue; how many queued docs it took (0: none were)."""
        reader = self.store.reader
        assert reader is not None
        rows = await select_queued(reader, limit=self.batch)
        if not rows:
            return 0
        texts = {r[1]: embedded_text(*r[2:]) for r in rows if r[1] is not None}
        known = await self._digests(list(texts))
        fresh = [s for s, t in texts.items() if known.get(s) != _digest(t)]
        vectors = await self.embedder.embed([texts[s] for s in fresh]) if fresh else None
        made = dict(zip(fresh, quantise(vectors), strict=True)) if vectors is not None else {}
        taken: list[tuple[str, int, Quantised]] = await self.store.run(
            lambda txn: self._store(txn, rows, texts, made)
        )
        for sr_id, doc, vec in taken:
            self._hold(sr_id, doc, vec)
        return len(rows)

    async def _digests(self, sr_ids: Sequence[str]) -> dict[str, bytes]:
        reader = self.store.reader
        assert reader is not None
        found: dict[str, bytes] = {}
        for start in range(0, len(sr_ids), 500):
            chunk = sr_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT sr_id, digest FROM sr_vectors WHERE sr_id IN ({marks})"  # noqa: S608
            found.update((s, bytes(d)) for s, d in await reader.fetchall(sql, chunk))
        return found

    async def _store(
        self, txn: Txn, rows: list[Any], texts: dict[str, str], made: dict[str, Quantised]
    ) -> list[tuple[str, int, Quantised]]:
        """Write the batch's vectors (an SR whose text is the one its vector was made from
        keeps it, under its new doc); a queued doc leaves the queue only if its SR still
        reads as it was embedded (an SR written meanwhile at the same doc stays queued)."""
        taken: list[tuple[str, int, Quantised]] = []
        for doc, sr_id, *_ in rows:
            now = await select_embedded(txn, doc, sr_id)
            if sr_id is not None and now is not None and embedded_text(*now) == texts[sr_id]:
                vec = made.get(sr_id)
                if vec is None:
                    txn.add("UPDATE sr_vectors SET doc = ? WHERE sr_id = ?", (doc, sr_id))
                    kept = await txn.fetchone(
                        "SELECT vec FROM sr_vectors WHERE sr_id = ?", (sr_id,)
                    )
                    assert kept is not None, "a known digest has its vector"
                    vec = np.frombuffer(kept[0], dtype=np.int8)
                else:
                    txn.add(
                        "INSERT OR REPLACE INTO sr_vectors (sr_id, doc, digest, vec) "
                        "VALUES (?, ?, ?, ?)",
                        (sr_id, doc, _digest(texts[sr_id]), vec.tobytes()),
                    )
                taken.append((sr_id, doc, vec))
            elif sr_id is not None and now is not None:
                continue  # written again meanwhile: embedded next time
            txn.add("DELETE FROM sr_embed_queue WHERE doc = ?", (doc,))
        return taken

    def _hold(self, sr_id: str, doc: int, vec: Quantised, room: int = 0) -> None:
        if self.held is None or self.held.dim != len(vec):
            self.held = Held(len(vec))
            self.held.reserve(room)
        self.held.put(sr_id, doc, vec)


class _Nearest:
    """``VectorIndex.nearest``'s answer: a query's similarities, scored when first asked."""

    def __init__(self, held: Held, query: Quantised) -> None:
        self._held, self._query = held, query
        self._scored: Scored | None = None

    def __call__(self, count: int) -> list[Near]:
        if self._scored is None:
            self._scored = self._held.scored(self._query)
        return self._scored.nearest(count)
