"""e_timeline's find: BM25 over title, text and tags with the statistics of what the caller
can read, scored with numpy over the text index's postings (``node.views.search_reads``),
and the vector leg fused with it by reciprocal rank (docs/tools/e_timeline.md, docs/search.md
§The text index, §The vector index and fusion).

What the caller cannot read counts nowhere: not in a term's document frequency, not among
the vector leg's nearest.  Ties go by ``sr_id``, never by doc, so every node holding the same
entries answers alike.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from node.store import Reader
from node.store.reader import Fetch
from node.views.query_terms import QueryTerm
from node.views.read_rule import readable_srs
from node.views.scoring import Scores, frequencies, score
from node.views.search_reads import Cache, cache_of, read
from node.views.shown import shown_from_blob
from node.views.timeline import MIN_DENSE, NOISE_SHARE, Page, Query, narrowing

__all__ = ["FUSION_K", "VECTOR_DEPTH", "Neighbour", "Semantic", "find"]


class Neighbour(Protocol):
    """A held vector near the query (node/search/held.py): its similarity, SR and doc."""

    @property
    def sim(self) -> int: ...
    @property
    def sr_id(self) -> str: ...
    @property
    def doc(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Semantic:
    """The vector leg of a find: the held vectors nearest its query, and their weight."""

    # the n nearest held vectors, ties at the cut included; None: the query has no vector,
    # so BM25 ranks alone (and the answer still counts what waits to be embedded)
    nearest: Callable[[int], Sequence[Neighbour]] | None
    weight: float
    queued: str  # the index's statement of the docs waiting to be embedded (node/search)


async def find(
    reader: Reader,
    q: Query,
    wanted: Sequence[QueryTerm],
    shed: bool = True,
    semantic: Semantic | None = None,
) -> tuple[Page, list[str]]:
    """BM25 over title, text and tags of the text index's ``wanted`` terms, with the
    statistics of what ``q.caller`` can read — fused with the vector leg's ranks when
    ``semantic`` is given — and the words shed as noise (``shed``: shed_idf_noise).
    Relevance decides which SRs are on each page — page p holds ranks (p−1)·size+1 …
    p·size of those that pass the caller's filters — and ``q.order_by`` orders them within
    it; each carries its ``score`` and ``rank``.  One read transaction on the reader's
    thread: every read sees the same commit."""
    terms_ = list({t.term: t for t in wanted}.values())
    cache = cache_of(reader)
    return await reader.snapshot(lambda fetch: _find(fetch, cache, q, terms_, shed, semantic))


def _find(
    fetch: Fetch,
    cache: Cache,
    q: Query,
    wanted: list[QueryTerm],
    shed: bool,
    semantic: Semantic | None,
) -> tuple[Page, list[str]]:
    got = read(fetch, cache, q, [t.term for t in wanted])
    df = frequencies(got)
    kept, shed_words = _shed(wanted, df, got.docs) if shed else (wanted, [])
    asked = {t.term: df[t.term] for t in kept if t.term in df}
    need = q.page * q.page_size + 1
    if semantic is None or semantic.nearest is None:
        best = score(got, q, asked, need, complete=False)
        ranked = _ranked(fetch, best.scores, best.keys, need)
    else:  # fusion ranks every doc BM25 scores
        near = _vector_leg(fetch, q, semantic.nearest, semantic.queued)
        every = score(got, q, asked, need, complete=True)
        ranked = _fused(fetch, every.scores, every.keys, near, need, semantic.weight)
    pending = None if semantic is None else _pending(fetch, q, semantic.queued)
    return _page(fetch, q, ranked, pending), shed_words


def _page(fetch: Fetch, q: Query, ranked: list[Ranked], pending: int | None) -> Page:
    """Page ``q.page`` of ``ranked``, in ``q.order_by``, each SR with its score and rank."""
    first = (q.page - 1) * q.page_size
    chosen = {
        doc: (first + i + 1, score)
        for i, (score, _, doc) in enumerate(ranked[first : first + q.page_size])
    }
    if not chosen:
        return Page([], False, pending)
    field, _, way = q.order_by.rpartition("_")
    rows = fetch(
        f"SELECT shown, doc, {field}, sr_id FROM srs NOT INDEXED "  # noqa: S608 - a column name
        f"WHERE doc IN ({','.join('?' * len(chosen))})",
        list(chosen),
    )
    rows.sort(key=lambda r: (-1 if r[2] is None else r[2], r[3]), reverse=way == "desc")
    found = [
        shown_from_blob(shown) | {"score": _shown_score(chosen[doc][1]), "rank": chosen[doc][0]}
        for shown, doc, _, _ in rows
    ]
    return Page(found, len(ranked) > first + q.page_size, pending)


def _shown_score(score: float) -> float:
    """A score as results show it: positive, to six places (the rank carries the order)."""
    return round(-score, 6)


def _shed(
    wanted: list[QueryTerm], df: dict[str, int], docs: int
) -> tuple[list[QueryTerm], list[str]]:
    """shed_idf_noise (docs/tools/e_timeline.md): the words held by more than
    ``NOISE_SHARE`` of what the caller can read go, when it can read at least ``MIN_DENSE``
    SRs and there are two words or more; the rarest word some SR holds always stays."""
    if len(wanted) < 2 or docs < MIN_DENSE:
        return wanted, []
    share = {t.word: df.get(t.term, 0) / docs for t in wanted}
    held = [t for t in wanted if share[t.word] > 0] or wanted
    rarest = min(held, key=lambda t: (share[t.word], t.word))
    kept = [t for t in wanted if t is rarest or share[t.word] <= NOISE_SHARE]
    return kept, [t.word for t in wanted if t not in kept]


Ranked = tuple[float, str, int]  # -score, sr_id, doc: in rank order when sorted


def _ranked(fetch: Fetch, scores: Scores, keys: npt.NDArray[np.int64], wanted: int) -> list[Ranked]:
    """The ``wanted`` best in rank order: by score, ties by ``sr_id`` (docs differ from node
    to node; sr_ids do not).  Only the candidates — those scoring at least the
    ``wanted``-th best — are named."""
    if len(scores) > wanted:
        cut = np.partition(scores, len(scores) - wanted)[len(scores) - wanted]
        chosen = scores >= cut
        scores, keys = scores[chosen], keys[chosen]
    names: dict[int, str] = {}
    docs = keys.tolist()
    for start in range(0, len(docs), 500):
        chunk = docs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT doc, sr_id FROM srs NOT INDEXED WHERE doc IN ({marks})"  # noqa: S608
        names.update(fetch(sql, chunk))
    ranked = [(-s, names[d], d) for s, d in zip(scores.tolist(), docs, strict=True)]
    return sorted(ranked)[:wanted]


# -- the vector leg (docs/search.md §The vector index and fusion) -------------------------------

VECTOR_DEPTH = 100  # the vector leg's ranks that count: its 100 nearest readable SRs
FUSION_K = 60  # reciprocal rank fusion's constant: a leg's rank r counts 1 / (60 + r)


def _vector_leg(
    fetch: Fetch, q: Query, nearest: Callable[[int], Sequence[Neighbour]], queued: str
) -> list[tuple[int, Neighbour]]:
    """(rank, neighbour) of the ``VECTOR_DEPTH`` nearest SRs that the caller can read and its
    filters pass, ties at the cut included: the held vectors are asked for more until that
    many pass (or none are left), so what the caller cannot read never takes a place.  An SR
    queued for embedding (written since its vector was made) is left to BM25."""
    count = VECTOR_DEPTH
    while True:
        found = nearest(count)
        passing = _passing(fetch, q, found, queued)
        kept = [n for n in found if (n.doc, n.sr_id) in passing]
        if len(kept) >= VECTOR_DEPTH or len(found) < count:
            break
        count *= 4
    if len(kept) > VECTOR_DEPTH:
        cut = kept[VECTOR_DEPTH - 1].sim
        kept = [n for n in kept if n.sim >= cut]
    ranks, better = [], 0  # competition ranks: ties share theirs
    for i, n in enumerate(kept):
        better = i if i == 0 or n.sim != kept[i - 1].sim else better
        ranks.append((better + 1, n))
    return ranks


def _passing(
    fetch: Fetch, q: Query, found: Sequence[Neighbour], queued: str
) -> set[tuple[int, str]]:
    """(doc, sr_id) of the SRs of ``found`` the caller can read, its filters pass, and whose
    vector is of their current text (not queued)."""
    rule, params = readable_srs(q.caller, "srs")
    narrow, narrow_args = narrowing(q)
    passes = " AND ".join([rule, *narrow])
    out: set[tuple[int, str]] = set()
    for start in range(0, len(found), 500):
        docs = [n.doc for n in found[start : start + 500]]
        out.update(
            fetch(
                "SELECT srs.doc, s.sr_id FROM sr_docs srs JOIN srs s ON s.doc = srs.doc "  # noqa: S608
                f"WHERE srs.doc IN ({','.join('?' * len(docs))}) AND {passes} "
                f"AND srs.doc NOT IN ({queued})",
                (*docs, *params, *narrow_args),
            )
        )
    return out


def _fused(
    fetch: Fetch,
    scores: Scores,
    keys: npt.NDArray[np.int64],
    near: list[tuple[int, Neighbour]],
    wanted: int,
    weight: float,
) -> list[Ranked]:
    """The ``wanted`` best by weighted reciprocal rank fusion: (1 − weight) / (60 + BM25 rank)
    + weight / (60 + vector rank), a leg counting only where it ranks the SR; ranks are
    competition ranks (ties share theirs), the fused order's ties go by ``sr_id``.  An SR the
    vector leg does not rank scores by its BM25 rank alone, so beyond the BM25 best
    ``wanted`` + |near| none can reach the ``wanted`` best."""
    best = _ranked(fetch, scores, keys, wanted + len(near))
    scored = list(zip((-scores).tolist(), keys.tolist(), strict=True))
    near_docs = {n.doc for _, n in near}
    bm25 = {doc: s for s, doc in scored if doc in near_docs} | {doc: s for s, _, doc in best}
    names = {doc: sr_id for _, sr_id, doc in best} | {n.doc: n.sr_id for _, n in near}
    fused = dict.fromkeys(names, 0.0)
    for doc, rank in _competition_ranks(scored, bm25).items():
        fused[doc] += (1 - weight) / (FUSION_K + rank)
    for rank, n in near:
        fused[n.doc] += weight / (FUSION_K + rank)
    return sorted((-f, names[doc], doc) for doc, f in fused.items())[:wanted]


Scored = tuple[float, int]  # -score, doc


def _competition_ranks(scored: list[Scored], of: dict[int, float]) -> dict[int, int]:
    """The BM25 rank of each doc of ``of`` (doc → its -score): 1 + how many score higher.
    Only the scores above the lowest asked about are sorted."""
    worst = max(of.values(), default=0.0)
    order = sorted(s for s, _ in scored if s <= worst)
    return {doc: 1 + bisect.bisect_left(order, s) for doc, s in of.items()}


def _pending(fetch: Fetch, q: Query, queued: str) -> int:
    """How many SRs the caller can read wait to be embedded."""
    rule, params = readable_srs(q.caller, "srs")
    rows = fetch(  # the queue leads (CROSS JOIN): it is short, what the caller reads is not
        f"SELECT count(*) FROM ({queued}) e CROSS JOIN sr_docs srs ON srs.doc = e.doc "  # noqa: S608
        f"WHERE {rule}",
        params,
    )
    return int(rows[0][0])
