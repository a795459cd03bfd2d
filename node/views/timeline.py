"""Reading the SR view for e_timeline: list, intersect, traverse and find
(docs/tools/e_timeline.md).

Every query filters by the caller's read rule (``readable_srs``) *before* it counts,
ranks or pages, so rows the caller cannot read change nothing it sees.  Orders break ties by
``sr_id``, never by arrival, so every node holding the same entries answers alike.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack

from node.authority import Caller
from node.store import Reader
from node.store.reader import Fetch
from node.views.read_rule import readable_scopes, readable_srs
from node.views.srs import DOC_SLOTS, LAST_MS, terms

__all__ = [
    "FUSION_K",
    "NOISE_SHARE",
    "VECTOR_DEPTH",
    "Doc",
    "Neighbour",
    "Page",
    "Query",
    "Semantic",
    "find",
    "intersect",
    "intersect_plain",
    "scope_stats",
    "select_page",
    "term_share",
]

NOISE_SHARE = 0.5  # shed_idf_noise: a term in more than half of what you can read is noise
_K1, _B = 1.2, 0.75
_COLUMNS = {"ingest_time": "srs.ingest_time", "content_time": "srs.content_time"}


@dataclass(frozen=True, slots=True)
class Query:
    """What a reading action asks, already checked."""

    caller: Caller
    order_by: str = "ingest_time_desc"
    start_ms: int | None = None
    end_ms: int | None = None
    conversational_only: bool = False
    lanes: tuple[str, ...] = ()
    page: int = 1
    page_size: int = 20


Doc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Page:
    docs: list[Doc]  # each SR as e_timeline shows it (node/views/shown.py), as stored
    has_more: bool
    pending: int | None = None  # find with a vector leg: readable SRs not yet embedded


def _order(order_by: str, table: str = "srs") -> tuple[str, str]:
    field, _, direction = order_by.rpartition("_")
    column = _COLUMNS[field].replace("srs.", f"{table}.")
    way = "DESC" if direction == "desc" else "ASC"
    return column, f"{column} {way}, {table}.sr_id {way}"


def _filters(q: Query) -> tuple[list[str], list[Any]]:
    rule, params = readable_srs(q.caller)
    narrow, narrow_args = _narrowing(q)
    where: list[str] = [rule, *narrow]
    args: list[Any] = [*params, *narrow_args]
    column, _ = _order(q.order_by)
    if q.start_ms is not None:
        where.append(f"{column} >= ?")
        args.append(q.start_ms)
    if q.end_ms is not None:
        where.append(f"{column} < ?")
        args.append(q.end_ms)
    return where, args


def _narrowing(q: Query) -> tuple[list[str], list[Any]]:
    """What the caller asks to see of what it can read, besides the window."""
    where: list[str] = []
    args: list[Any] = []
    if q.conversational_only:
        where.append("srs.conversational = 1")
    if q.lanes:
        where.append(f"srs.lane IN ({','.join('?' * len(q.lanes))})")
        args += q.lanes
    return where, args


async def select_page(
    reader: Reader,
    q: Query,
    *,
    extra: Sequence[str] = (),
    extra_args: Sequence[Any] = (),
    source: str = "srs",
    source_args: Sequence[Any] = (),
) -> Page:
    """One page of readable SRs in the window, in ``q.order_by``; ``extra`` narrows further.
    ``source`` (with ``source_args``) replaces ``srs`` in the FROM clause: a join that must
    lead the plan (``... CROSS JOIN srs``), for a few candidates the time index would reach
    only by scanning."""
    where, args = _filters(q)
    where += extra
    args += extra_args
    _, order = _order(q.order_by)
    rows = await reader.fetchall(
        f"SELECT srs.shown FROM {source} WHERE {' AND '.join(where)} "  # noqa: S608 - no values
        f"ORDER BY {order} LIMIT ? OFFSET ?",
        (*source_args, *args, q.page_size + 1, (q.page - 1) * q.page_size),
    )
    return Page([_doc(r[0]) for r in rows[: q.page_size]], len(rows) > q.page_size)


# A tag is checked row by row (one primary-key probe) rather than listed whole first: the rows
# are read in time order and the page is full long before a common tag's list would be.
_MATCHES = (
    "(EXISTS (SELECT 1 FROM sr_tags WHERE sr_tags.tag = ? AND sr_tags.sr_id = srs.sr_id) "
    "OR srs.doc IN (SELECT rowid FROM sr_fts WHERE sr_fts MATCH ?))"
)


async def intersect(reader: Reader, q: Query, match: Sequence[str]) -> Page:
    """Readable SRs in the window holding every string of ``match`` as a tag, or as its terms
    in title, text or tags (a phrase)."""
    phrases = [" ".join(terms(m)) for m in match]
    if _by_index(q, match, phrases):
        page = await reader.run(lambda fetch: _intersect_by_index(fetch, q, phrases))
        if page is not None:
            return page
    return await intersect_plain(reader, q, match)


async def intersect_plain(reader: Reader, q: Query, match: Sequence[str]) -> Page:
    """``intersect`` by the time index, each row tested for each string: what the search
    index's own order answers alike, and the answer wherever it cannot."""
    args = [a for m in match for a in (m, '"' + " ".join(terms(m)) + '"')]
    return await select_page(reader, q, extra=[_MATCHES] * len(match), extra_args=args)


def _by_index(q: Query, match: Sequence[str], phrases: list[str]) -> bool:
    """Whether the search index can answer in its own (time) order: the order is by ingest
    time, each string's phrase decides it, and the window fits the doc keys."""
    return (
        q.order_by.startswith("ingest_time")
        and all(_index_decides(m, p) for m, p in zip(match, phrases, strict=True))
        and all(t is None or 0 <= t <= LAST_MS for t in (q.start_ms, q.end_ms))
    )


def _index_decides(text: str, phrase: str) -> bool:
    """Whether ``text``'s terms alone decide if it holds: a plain ASCII string with terms
    cuts into the same terms the index holds for it as a tag, so its phrase (and each of its
    terms) holds wherever it is a tag — the tags are indexed too."""
    return text.isascii() and bool(phrase)


def _intersect_by_index(fetch: Fetch, q: Query, phrases: list[str]) -> Page | None:
    """Read the matches newest (or oldest) first straight from the search index, whose rowids
    are the docs' time keys, until the page is full.  Docs of one millisecond are in arrival
    order, so the last millisecond reached is read whole and sorted by ``sr_id``.  None if
    some doc sits out of order (an overfull millisecond's, below zero)."""
    if fetch("SELECT EXISTS (SELECT 1 FROM srs WHERE doc < 0)")[0][0]:
        return None
    where, args = _filters(q)
    desc = q.order_by.endswith("desc")
    low = (q.start_ms or 0) * DOC_SLOTS
    high = (LAST_MS + 1 if q.end_ms is None else q.end_ms) * DOC_SLOTS
    query = " AND ".join(f'"{p}"' for p in phrases)
    sql = (
        f"{_KEYED} sr_fts CROSS JOIN"
        " srs ON srs.doc = sr_fts.rowid WHERE sr_fts MATCH ? AND sr_fts.rowid >= ? "
        f"AND sr_fts.rowid < ? AND {' AND '.join(where)} "
        f"ORDER BY sr_fts.rowid {'DESC' if desc else 'ASC'} LIMIT ?"
    )
    wanted = q.page * q.page_size + 1
    rows = fetch(sql, (query, low, high, *args, wanted))
    if len(rows) == wanted:  # the last millisecond reached, whole
        last = rows[-1][1] // DOC_SLOTS
        rows = [r for r in rows if r[1] // DOC_SLOTS != last] + fetch(
            sql, (query, last * DOC_SLOTS, (last + 1) * DOC_SLOTS, *args, -1)
        )
    return _in_time_order(rows, q)


# (shown, doc, ingest_time, sr_id): what ordering by doc keys needs of each row
Keyed = tuple[bytes, int, int | None, str]
_KEYED = "SELECT srs.shown, srs.doc, srs.ingest_time, srs.sr_id FROM "


def _in_time_order(rows: list[Keyed], q: Query) -> Page:
    """``q``'s page of ``rows``: every row up to the page's end in doc-key order, and all of
    the last millisecond's — sorted by ingest time and ``sr_id`` as the time index orders."""
    rows.sort(
        key=lambda r: (-1 if r[2] is None else r[2], r[3]), reverse=q.order_by.endswith("desc")
    )
    chosen = rows[(q.page - 1) * q.page_size : q.page * q.page_size + 1]
    return Page([_doc(r[0]) for r in chosen[: q.page_size]], len(chosen) > q.page_size)


def _doc(blob: bytes) -> Doc:
    """An SR as e_timeline shows it, as the SR view stored it (``shown_blob``): written here,
    never received, so a plain decode reads it."""
    doc: Doc = msgpack.unpackb(blob, raw=False)
    return doc


async def term_share(reader: Reader, caller: Caller, text: str) -> float:
    """The share of the SRs ``caller`` can read that hold ``text`` as a tag or a term."""
    total = await _readable_count(reader, caller)
    if not total:
        return 0.0
    rule, params = readable_srs(caller)
    found = terms(text)
    match = " ".join(f'"{t}"' for t in found) or '""'  # every term, anywhere
    if _index_decides(text, " ".join(found)):  # the docs holding them, their narrow rows
        sql = (
            f"SELECT count(*) FROM sr_docs srs WHERE srs.doc IN "  # noqa: S608
            f"(SELECT rowid FROM sr_fts WHERE sr_fts MATCH ?) AND {rule}"
        )
        args: tuple[Any, ...] = (match, *params)
    else:
        sql = (
            f"SELECT count(*) FROM srs WHERE {rule} AND (srs.sr_id IN "  # noqa: S608
            "(SELECT sr_id FROM sr_tags WHERE tag = ?) OR srs.doc IN "
            "(SELECT rowid FROM sr_fts WHERE sr_fts MATCH ?))"
        )
        args = (*params, text, match)
    return int(await reader.scalar(sql, args)) / total


async def _readable_count(reader: Reader, caller: Caller) -> int:
    docs, _ = await scope_stats(reader, caller)
    return docs


async def scope_stats(reader: Reader, caller: Caller) -> tuple[int, int]:
    """(documents, total length) over what ``caller`` can read — from ``sr_stats``."""
    sql, args = _stats(caller)
    rows = await reader.fetchall(sql, args)
    return int(rows[0][0]), int(rows[0][1])


def _stats(caller: Caller, *more: str) -> tuple[str, list[Any]]:
    """The query of ``caller``'s scope statistics (each of ``more`` a column after them)."""
    where, args = readable_scopes(caller)
    columns = ", ".join(("coalesce(sum(docs), 0)", "coalesce(sum(length), 0)", *more))
    return f"SELECT {columns} FROM sr_stats WHERE {where}", list(args)  # noqa: S608


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


async def find(
    reader: Reader, q: Query, wanted: Sequence[str], semantic: Semantic | None = None
) -> Page:
    """BM25 over title, text and tags of the index's ``wanted`` terms, with the statistics of
    what ``q.caller`` can read — fused with the vector leg's ranks when ``semantic`` is given.
    Relevance decides which SRs are on each page — page p holds ranks (p−1)·size+1 …
    p·size of those that pass the caller's filters — and ``q.order_by`` orders them within
    it; each carries its ``score`` and ``rank``.  One hop to the reader's thread: its reads
    depend on one another."""
    terms_ = list(dict.fromkeys(wanted))
    return await reader.run(lambda fetch: _find(fetch, q, terms_, semantic))


def _find(fetch: Fetch, q: Query, wanted: list[str], semantic: Semantic | None) -> Page:
    scored: list[Scored] = []
    if wanted:
        (_, _, docs, length, _), *postings = _postings(fetch, q, wanted)
        scored = _scores(postings, docs, length / docs if docs else 1.0)
    need = q.page * q.page_size + 1
    if semantic is None or semantic.nearest is None:
        ranked = _ranked(fetch, scored, need)
    else:
        near = _vector_leg(fetch, q, semantic.nearest)
        ranked = _fused(fetch, scored, near, need, semantic.weight)
    first = (q.page - 1) * q.page_size
    chosen = {doc: (first + i + 1, score)
              for i, (score, _, doc) in enumerate(ranked[first : first + q.page_size])}  # fmt: skip
    pending = None if semantic is None else _pending(fetch, q)
    if not chosen:
        return Page([], False, pending)
    field, _, way = q.order_by.rpartition("_")
    rows = fetch(
        f"SELECT shown, doc, {field}, sr_id FROM srs NOT INDEXED "  # noqa: S608 - a column name
        f"WHERE doc IN ({','.join('?' * len(chosen))})",
        list(chosen),
    )
    rows.sort(key=lambda r: (-1 if r[2] is None else r[2], r[3]), reverse=way == "desc")
    found = [_doc(shown) | {"score": _shown_score(chosen[doc][1]), "rank": chosen[doc][0]}
             for shown, doc, _, _ in rows]  # fmt: skip
    return Page(found, len(ranked) > first + q.page_size, pending)


def _shown_score(score: float) -> float:
    """A score as results show it: positive, to six places (the rank carries the order)."""
    return round(-score, 6)


# doc, term, frequency, doc length, whether the doc passes the caller's filters
Posting = tuple[int, str, int, int, int]


def _postings(fetch: Fetch, q: Query, wanted: list[str]) -> list[Any]:
    """The caller's scope statistics as (None, None, documents, length, None), then a
    posting per (doc, term) for each readable SR holding any wanted term — all of them:
    document frequencies count what the caller can read, not what it filters; whether each
    passes the filters comes along.  Each doc is looked up in ``sr_docs`` (a narrow row per
    readable SR), not in the wide ``srs``.  One statement: a compound SELECT gives its parts'
    rows in order."""
    stats, stats_args = _stats(q.caller, "NULL")
    rule, params = readable_srs(q.caller, "srs")
    narrow, narrow_args = _narrowing(q)
    passes = " AND ".join(narrow) or "1"
    rows = fetch(
        f"SELECT NULL, NULL, * FROM ({stats}) UNION ALL "  # noqa: S608
        f"SELECT v.doc, v.term, count(*), srs.doclen, {passes} "
        "FROM sr_vocab v JOIN sr_docs srs ON srs.doc = v.doc "  # the rule's columns, narrow
        f"WHERE v.term IN ({','.join('?' * len(wanted))}) AND {rule} GROUP BY v.doc, v.term",
        (*stats_args, *narrow_args, *wanted, *params),
    )
    assert rows[0][0] is None, "the statistics come first"
    return rows


Scored = tuple[float, int]  # -score, doc


def _scores(postings: list[Posting], docs: int, avgdl: float) -> list[Scored]:
    """(-score, doc) of each doc that passes the caller's filters.  A doc's score is the sum
    of its terms' parts in the order its postings came (by term), as ``sum`` adds them."""
    df = Counter(p[1] for p in postings)  # postings are unique per (doc, term)
    idf = {t: math.log(1 + (docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    if len(df) == 1:  # one term: one posting per doc, whose part is the doc's score
        (weight,) = idf.values()
        return [
            (-(weight * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * doclen / avgdl))), doc)
            for doc, _, tf, doclen, passes in postings
            if passes
        ]
    parts: dict[int, tuple[float, int, list[float]]] = {}
    for doc, term, tf, doclen, passes in postings:
        found = parts.get(doc)
        if found is None:
            found = parts[doc] = (_K1 * (1 - _B + _B * doclen / avgdl), passes, [])
        found[2].append(idf[term] * tf * (_K1 + 1) / (tf + found[0]))
    return [(-sum(terms), doc) for doc, (_, passes, terms) in parts.items() if passes]


Ranked = tuple[float, str, int]  # -score, sr_id, doc: in rank order when sorted


def _ranked(fetch: Fetch, scored: list[Scored], wanted: int) -> list[Ranked]:
    """The ``wanted`` best of ``scored`` in rank order: by score, ties by ``sr_id`` (docs
    differ from node to node; sr_ids do not).  Only the candidates — those scoring at least
    the ``wanted``-th best — are named."""
    if len(scored) > wanted:
        cut = heapq.nsmallest(wanted, scored)[-1][0]
        scored = [s for s in scored if s[0] <= cut]
    names: dict[int, str] = {}
    for start in range(0, len(scored), 500):
        chunk = [doc for _, doc in scored[start : start + 500]]
        names.update(fetch(
            f"SELECT doc, sr_id FROM srs NOT INDEXED WHERE doc IN ({','.join('?' * len(chunk))})",  # noqa: S608
            chunk,
        ))  # fmt: skip
    return sorted((score, names[doc], doc) for score, doc in scored)[:wanted]


# -- the vector leg (docs/search.md §The vector index and fusion) -------------------------------

VECTOR_DEPTH = 100  # the vector leg's ranks that count: its 100 nearest readable SRs
FUSION_K = 60  # reciprocal rank fusion's constant: a leg's rank r counts 1 / (60 + r)


def _vector_leg(
    fetch: Fetch, q: Query, nearest: Callable[[int], Sequence[Neighbour]]
) -> list[tuple[int, Neighbour]]:
    """(rank, neighbour) of the ``VECTOR_DEPTH`` nearest SRs that the caller can read and its
    filters pass, ties at the cut included: the held vectors are asked for more until that
    many pass (or none are left), so what the caller cannot read never takes a place.  An SR
    queued for embedding (written since its vector was made) is left to BM25."""
    count = VECTOR_DEPTH
    while True:
        found = nearest(count)
        passing = _passing(fetch, q, found)
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


def _passing(fetch: Fetch, q: Query, found: Sequence[Neighbour]) -> set[tuple[int, str]]:
    """(doc, sr_id) of the SRs of ``found`` the caller can read, its filters pass, and whose
    vector is of their current text (not queued)."""
    rule, params = readable_srs(q.caller, "srs")
    narrow, narrow_args = _narrowing(q)
    passes = " AND ".join([rule, *narrow])
    out: set[tuple[int, str]] = set()
    for start in range(0, len(found), 500):
        docs = [n.doc for n in found[start : start + 500]]
        out.update(fetch(
            "SELECT srs.doc, s.sr_id FROM sr_docs srs JOIN srs s ON s.doc = srs.doc "  # noqa: S608
            f"WHERE srs.doc IN ({','.join('?' * len(docs))}) AND {passes} "
            "AND srs.doc NOT IN (SELECT doc FROM sr_embed_queue)",
            (*docs, *params, *narrow_args),
        ))  # fmt: skip
    return out


def _fused(
    fetch: Fetch,
    scored: list[Scored],
    near: list[tuple[int, Neighbour]],
    wanted: int,
    weight: float,
) -> list[Ranked]:
    """The ``wanted`` best by weighted reciprocal rank fusion: (1 − weight) / (60 + BM25 rank)
    + weight / (60 + vector rank), a leg counting only where it ranks the SR; ranks are
    competition ranks (ties share theirs), the fused order's ties go by ``sr_id``.  An SR the
    vector leg does not rank scores by its BM25 rank alone, so beyond the BM25 best
    ``wanted`` + |near| none can reach the ``wanted`` best."""
    best = _ranked(fetch, scored, wanted + len(near))
    near_docs = {n.doc for _, n in near}
    bm25 = {doc: s for s, doc in scored if doc in near_docs} | {doc: s for s, _, doc in best}
    names = {doc: sr_id for _, sr_id, doc in best} | {n.doc: n.sr_id for _, n in near}
    fused = dict.fromkeys(names, 0.0)
    for doc, rank in _competition_ranks(scored, bm25).items():
        fused[doc] += (1 - weight) / (FUSION_K + rank)
    for rank, n in near:
        fused[n.doc] += weight / (FUSION_K + rank)
    return sorted((-f, names[doc], doc) for doc, f in fused.items())[:wanted]


def _competition_ranks(scored: list[Scored], of: dict[int, float]) -> dict[int, int]:
    """The BM25 rank of each doc of ``of`` (doc → its -score): 1 + how many score higher.
    Only the scores above the lowest asked about are sorted."""
    worst = max(of.values(), default=0.0)
    order = sorted(s for s, _ in scored if s <= worst)
    return {doc: 1 + bisect.bisect_left(order, s) for doc, s in of.items()}


def _pending(fetch: Fetch, q: Query) -> int:
    """How many SRs the caller can read wait to be embedded."""
    rule, params = readable_srs(q.caller, "srs")
    rows = fetch(  # the queue leads (CROSS JOIN): it is short, what the caller reads is not
        "SELECT count(*) FROM sr_embed_queue e CROSS JOIN sr_docs srs ON srs.doc = e.doc "  # noqa: S608
        f"WHERE {rule}",
        params,
    )
    return int(rows[0][0])
