"""BM25F over the text index's postings, with numpy (docs/tools/e_timeline.md §find): the best
``need`` docs exactly, without scoring every posting where the rule allows it.

A term's part in a doc is idf · t · (k1 + 1) / (t + k1), where t adds, over the fields (title,
text, tags), the field's weight times the term's count in it over the field's normalised
length — (1 − b) + b · length / the caller's average length of that field.  A doc's score is
its terms' parts added in sorted-term order, in float64, from 0.0 — the additions ``sum``
makes — so every doc scored here has the rule's score to the last bit.

The best ``need`` are found the MaxScore way: a term's part is always below its bound,
idf · (k1 + 1) (t / (t + k1) < 1).  Terms are taken rarest first; the
docs holding any term taken so far are the candidates, each scored in full (every term's part,
looked up in the term's list).  Once the bounds of the terms not yet taken add up to less than
the ``need``-th best candidate's score, no other doc can reach the best ``need`` — nor tie with
them — and the common terms' lists are only looked up, never scored whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from node.views.search_reads import Block, Read
from node.views.timeline import Query

__all__ = ["FIELD_WEIGHTS", "Scored", "Scores", "frequencies", "score"]

K1, B = 1.2, 0.75
# A term's count in each field (title, text, tags: node/views/segments.py ``FIELDS``) weighs
# this much in its tf (docs/tools/e_timeline.md §find).
FIELD_WEIGHTS = (3.0, 1.0, 1.5)
_MARGIN = 1e-9  # the bounds' sum must fall short of a score by more than rounding could add
# A survivor's lookups against the next list's postings: the weight that measured best on the
# questions benchmark at a million SRs (docs/benchmarks.md §questions; 0.1 to 3 tried).
_LOOKUP = 0.25

Scores = npt.NDArray[np.float64]
Keys = npt.NDArray[np.int64]
Slots = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Scored:
    """Docs (their keys) with their scores: the best ``need`` and every doc tied with the
    last of them — or every doc holding a term, when ``complete``."""

    scores: Scores
    keys: Keys
    complete: bool


def frequencies(got: Read) -> dict[str, int]:
    """Each term's document frequency over what the caller can read (the readable slots
    among its postings, in every block), for the terms the index holds."""
    df: dict[str, int] = {}
    for block in got.blocks:
        readable = block.readable(got.scopes, got.scope_ok)
        for term, (slots, _) in block.lists.items():
            df[term] = df.get(term, 0) + int(np.count_nonzero(readable[slots]))
    return df


@dataclass(slots=True)
class _Block:
    block: Block
    passes: npt.NDArray[np.bool_]  # its slots the caller may read and its filters pass
    open: npt.NDArray[np.bool_]  # ... that are not candidates yet
    partial: Scores  # each slot's parts of the terms taken so far (their bounds' order)
    taken: list[Slots] = field(default_factory=list)  # the candidates, in runs


def score(got: Read, q: Query, df: dict[str, int], need: int, *, complete: bool) -> Scored:
    """The best ``need`` docs that pass the caller's filters and hold a term of ``df`` (term
    → its document frequency), by score; every such doc when ``complete``."""
    docs = got.docs
    fields = (got.titles, got.length - got.titles - got.tags, got.tags)
    average = tuple(total / docs if docs else 0.0 for total in fields)
    idf = {t: math.log(1 + (docs - n + 0.5) / (n + 0.5)) for t, n in sorted(df.items()) if n}
    blocks = []
    for b in got.blocks:
        passes = _passes(b, got, q)
        blocks.append(_Block(b, passes, passes.copy(), np.zeros(len(passes), np.float64)))
    order = sorted(idf, key=lambda t: (-idf[t], t))  # the rarest (highest bound) first
    for k, term in enumerate(order):
        for s in blocks:
            _take(s, term, idf[term], average)
        rest = sum((K1 + 1) * idf[t] for t in order[k + 1 :]) * (1 + _MARGIN)
        if complete or not rest:
            continue
        runs = [s.partial[run] for s in blocks for run in s.taken]
        partial = np.concatenate(runs) if runs else np.zeros(0)
        if len(partial) < need:
            continue
        floor = np.partition(partial, -need)[-need] * (1 - _MARGIN)  # the need-th best's, at least
        if rest >= floor:
            continue  # a doc outside the candidates might reach the best need
        # Scoring the survivors in full looks each one up in every term's list; taking the
        # next term scores its list once: the cheaper goes first (either answer is exact).
        survivors = int(np.count_nonzero(partial * (1 + _MARGIN) >= floor - rest))
        following = sum(len(s.block.lists.get(order[k + 1], ((),))[0]) for s in blocks)
        if survivors * len(order) * _LOOKUP > following:
            continue
        return _best(_survivors(blocks, idf, average, floor - rest), need)
    return _survivors(blocks, idf, average, -math.inf)


def _take(s: _Block, term: str, weight: float, average: tuple[float, ...]) -> None:
    """``term`` taken: its part added to the partial score of each doc holding it that
    passes, and those docs candidates."""
    found = s.block.lists.get(term)
    if found is None:
        return
    held, tfs = found
    keep = s.passes[held]
    slots: Slots = held[keep].astype(np.int64)
    s.partial[slots] += _part(s.block, slots, tfs[keep], weight, average)
    new = slots[s.open[slots]]
    if len(new):
        s.open[new] = False
        s.taken.append(new)


def _survivors(
    blocks: list[_Block], idf: dict[str, float], average: tuple[float, ...], least: float
) -> Scored:
    """The candidates whose parts so far reach ``least``, scored in full (every term, in
    sorted-term order, from 0.0: the rule's additions); complete when none are left out."""
    scores: list[Scores] = [np.zeros(0, np.float64)]
    keys: list[Keys] = [np.zeros(0, np.int64)]
    for s in blocks:
        for run in s.taken:
            kept = np.sort(run[s.partial[run] * (1 + _MARGIN) >= least])
            if len(kept):
                scores.append(_full(s.block, kept, idf, average))
                keys.append(s.block.docs.keys[kept])
    return Scored(np.concatenate(scores), np.concatenate(keys), least == -math.inf)


def _passes(b: Block, got: Read, q: Query) -> npt.NDArray[np.bool_]:
    """Its slots the caller may read and whose filters (conversational only, lanes) pass."""
    passes = b.readable(got.scopes, got.scope_ok).copy()
    if q.conversational_only:
        passes &= b.docs.conversational
    if got.lane_ok is not None:
        passes &= got.lane_ok[b.docs.lanes]
    return passes


def _full(b: Block, slots: Slots, idf: dict[str, float], average: tuple[float, ...]) -> Scores:
    """The scores of ``slots`` (ascending): every term's part, in sorted-term order."""
    acc = np.zeros(len(slots), np.float64)
    for term in sorted(idf):
        found = b.lists.get(term)
        if found is None:
            continue
        held, tfs = found
        at = np.searchsorted(held, slots)
        hit = at < len(held)
        hit[hit] = held[at[hit]] == slots[hit]
        if hit.any():
            acc[hit] += _part(b, slots[hit], tfs[at[hit]], idf[term], average)
    return acc


def _part(
    b: Block, slots: Slots, tfs: npt.NDArray[np.uint8], idf: float, average: tuple[float, ...]
) -> Scores:
    """A term's part in the docs of ``slots``, whose counts (by field) are ``tfs``."""
    d, w = b.docs, FIELD_WEIGHTS
    titles, tags = d.titles[slots], d.tags[slots]
    lengths = (titles, d.lengths[slots] - titles - tags, tags)
    n = [_norm(x, a) for x, a in zip(lengths, average, strict=True)]
    t = w[0] * tfs[:, 0] / n[0] + w[1] * tfs[:, 1] / n[1]
    t = t + w[2] * tfs[:, 2] / n[2]
    return idf * t * (K1 + 1) / (t + K1)


def _norm(lengths: npt.NDArray[np.uint32], average: float) -> Scores:
    """A field's normalised lengths: (1 − b) + b · length / average (1 where no doc the caller
    reads has the field)."""
    if average <= 0:
        return np.ones(len(lengths), np.float64)
    return (1 - B) + B * lengths.astype(np.float64) / average


def _best(found: Scored, need: int) -> Scored:
    """The ``need`` highest scores and every score tied with the last of them."""
    cut = np.partition(found.scores, -need)[-need]
    chosen = found.scores >= cut
    return Scored(found.scores[chosen], found.keys[chosen], False)
