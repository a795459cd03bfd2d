"""The vectors of the semantic leg, held in memory for scoring (docs/search.md §The vector index
and fusion).

Vectors are kept as int8 (round(127 · unit vector)), in SQLite and here alike, and scored as
float32 dot products of those integers.  Every partial sum of two such vectors is an integer
no larger than about 127² · (1 + ε) — far below 2²⁴, where float32 stops holding integers
exactly — so a similarity is the same exact integer whatever the BLAS, the summation order or
the machine: two nodes holding the same vectors rank alike, ties broken by ``sr_id``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from node.search.embedders import Vectors

__all__ = ["QUANT", "Held", "Near", "Quantised", "Scored", "quantise"]

QUANT = 127
Quantised = npt.NDArray[np.int8]


def quantise(vectors: Vectors) -> Quantised:
    """Unit rows as int8 components, round(127 · v)."""
    return np.clip(np.rint(vectors * QUANT), -QUANT, QUANT).astype(np.int8)


@dataclass(frozen=True, slots=True)
class Near:
    """One held vector near a query: its similarity (an exact integer), SR and doc."""

    sim: int
    sr_id: str
    doc: int


class Held:
    """Every vector of the index, a row each; the worker puts and moves rows, find reads the
    nearest.  One lock: a row is never read half-written."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}
        self._sr_ids: list[str] = []
        self._docs = np.full(0, -1, dtype=np.int64)
        self._mat = np.zeros((0, dim), dtype=np.float32)

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, sr_id: str, doc: int, vec: Quantised) -> None:
        with self._lock:
            row = self._rows.get(sr_id)
            if row is None:
                row = self._rows[sr_id] = len(self._sr_ids)
                self._sr_ids.append(sr_id)
                self._grow(row + 1)
            self._docs[row] = doc
            self._mat[row] = vec

    def _grow(self, size: int, *, exactly: bool = False) -> None:
        if size <= len(self._docs):
            return
        capacity = size if exactly else max(size, 2 * len(self._docs), 1024)
        docs = np.full(capacity, -1, dtype=np.int64)
        docs[: len(self._docs)] = self._docs
        mat = np.zeros((capacity, self.dim), dtype=np.float32)
        mat[: len(self._mat)] = self._mat
        self._docs, self._mat = docs, mat

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` vectors at once (the index's own, when it opens)."""
        with self._lock:
            self._grow(rows, exactly=True)

    def scored(self, query: Quantised) -> Scored:
        """Every held vector's similarity to ``query``, computed once: the nearest of them can
        then be asked for again and again (the vector leg asks for more until enough pass)."""
        with self._lock:
            n = len(self._sr_ids)
            sims = self._mat[:n] @ query.astype(np.float32)
            return Scored(sims, self._sr_ids, self._docs)


@dataclass(frozen=True, slots=True)
class Scored:
    """A query's similarities to the held vectors, with the rows' SRs and docs as they were.
    Rows only ever grow, so the first ``len(sims)`` of ``sr_ids`` and ``docs`` stay theirs."""

    sims: npt.NDArray[np.float32]
    sr_ids: list[str]
    docs: npt.NDArray[np.int64]

    def nearest(self, count: int) -> list[Near]:
        """The ``count`` most similar and every one tied with the last, most similar first,
        ties by ``sr_id``."""
        if not len(self.sims) or count <= 0:
            return []
        picked = _top(self.sims, count)
        return sorted(
            (Near(int(self.sims[i]), self.sr_ids[i], int(self.docs[i])) for i in picked),
            key=lambda near: (-near.sim, near.sr_id),
        )


def _top(sims: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.intp]:
    """Where the ``count`` highest of ``sims`` are, with every one equal to the lowest kept."""
    if count >= len(sims):
        return np.arange(len(sims))
    cut = np.partition(sims, len(sims) - count)[len(sims) - count]
    return np.flatnonzero(sims >= cut)
