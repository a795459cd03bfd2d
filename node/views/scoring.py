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
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from node.views.search_reads import Held, List, Read
from node.views.timeline import Query

__all__ = ["FIELD_WEIGHTS", "Scored", "frequencies", "score"]

K1, B = 1.2, 0.75
# A term's count in each field (title, text, tags: node/views/segments.py ``FIELDS``) weighs
# this much in its tf (docs/tools/e_timeline.md §find).
FIELD_WEIGHTS = (3.0, 1.0, 1.5)
_MARGIN = 1e-9  # the bounds' sum must fall short of a score by more than rounding could add

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
    among its postings, in every segment), for the terms the index holds."""
    df: dict[str, int] = {}
    for h, lists in got.segments:
        readable = h.readable(got.scopes, got.scope_ok)
        for term, (slots, _) in lists.items():
            df[term] = df.get(term, 0) + int(np.count_nonzero(readable[slots]))
    return df


@dataclass(slots=True)
class _Segment:
    held: Held
    lists: dict[str, List]
    passes: npt.NDArray[np.bool_]
    taken: Slots  # the candidates so far (sorted slots)


def score(got: Read, q: Query, df: dict[str, int], need: int, *, complete: bool) -> Scored:
    """The best ``need`` docs that pass the caller's filters and hold a term of ``df`` (term
    → its document frequency), by score; every such doc when ``complete``."""
    docs = got.docs
    fields = (got.titles, got.length - got.titles - got.tags, got.tags)
    average = tuple(total / docs if docs else 0.0 for total in fields)
    idf = {t: math.log(1 + (docs - n + 0.5) / (n + 0.5)) for t, n in sorted(df.items()) if n}
    segments = [
        _Segment(h, lists, _passes(h, got, q), np.zeros(0, np.int64)) for h, lists in got.segments
    ]
    order = sorted(idf, key=lambda t: (-idf[t], t))  # the rarest (highest bound) first
    scores: list[Scores] = []
    keys: list[Keys] = []
    for k, term in enumerate(order):
        for s in segments:
            new = _new_candidates(s, term)
            if len(new):
                scores.append(_full(s, new, idf, average))
                keys.append(s.held.docs.keys[new])
        rest = sum((K1 + 1) * idf[t] for t in order[k + 1 :])
        if not complete and rest and scores:
            best = np.concatenate(scores)
            if len(best) >= need and rest * (1 + _MARGIN) < np.partition(best, -need)[-need]:
                return _best(best, np.concatenate(keys), need)
    if not scores:
        return Scored(np.zeros(0, np.float64), np.zeros(0, np.int64), True)
    return Scored(np.concatenate(scores), np.concatenate(keys), True)


def _passes(h: Held, got: Read, q: Query) -> npt.NDArray[np.bool_]:
    """Its slots the caller may read and whose filters (conversational only, lanes) pass."""
    passes = h.readable(got.scopes, got.scope_ok).copy()
    if q.conversational_only:
        passes &= h.docs.conversational
    if got.lane_ok is not None:
        passes &= got.lane_ok[h.docs.lanes]
    return passes


def _new_candidates(s: _Segment, term: str) -> Slots:
    """The slots holding ``term`` that pass and are not candidates yet (they become ones)."""
    found = s.lists.get(term)
    if found is None:
        return np.zeros(0, np.int64)
    slots = found[0][s.passes[found[0]]].astype(np.int64)
    new = np.setdiff1d(slots, s.taken, assume_unique=True)
    if len(new):
        s.taken = np.union1d(s.taken, new)
    return new


def _full(s: _Segment, slots: Slots, idf: dict[str, float], average: tuple[float, ...]) -> Scores:
    """The scores of ``slots`` (sorted): every term's part, in sorted-term order."""
    acc = np.zeros(len(slots), np.float64)
    d = s.held.docs
    titles, tags = d.titles[slots], d.tags[slots]
    lengths = (titles, d.lengths[slots] - titles - tags, tags)
    norms = [_norm(n, a) for n, a in zip(lengths, average, strict=True)]
    for term, weight in idf.items():  # sorted by term
        found = s.lists.get(term)
        if found is None:
            continue
        held, tfs = found
        at = np.searchsorted(held, slots)
        hit = at < len(held)
        hit[hit] = held[at[hit]] == slots[hit]
        if not hit.any():
            continue
        tf = tfs[at[hit]]
        w = FIELD_WEIGHTS
        t = w[0] * tf[:, 0] / norms[0][hit] + w[1] * tf[:, 1] / norms[1][hit]
        t = t + w[2] * tf[:, 2] / norms[2][hit]
        acc[hit] += weight * t * (K1 + 1) / (t + K1)
    return acc


def _norm(lengths: npt.NDArray[np.uint32], average: float) -> Scores:
    """A field's normalised lengths: (1 − b) + b · length / average (1 where no doc the caller
    reads has the field)."""
    if average <= 0:
        return np.ones(len(lengths), np.float64)
    return (1 - B) + B * lengths.astype(np.float64) / average


def _best(scores: Scores, keys: Keys, need: int) -> Scored:
    """The ``need`` highest scores and every score tied with the last of them."""
    cut = np.partition(scores, -need)[-need]
    chosen = scores >= cut
    return Scored(scores[chosen], keys[chosen], False)
