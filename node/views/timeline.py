"""Reading the SR view for e_timeline: list, intersect, traverse and find (DESIGN §4.3).

Every query filters by the caller's read rule (``Caller.readable_srs``) *before* it counts,
ranks or pages, so rows the caller cannot read change nothing it sees.  Orders break ties by
``sr_id``, never by arrival, so every node holding the same entries answers alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from node.authority import Caller
from node.store import Reader
from node.views.fold import SrState
from node.views.srs import terms
from protocol.canonical import decode_canonical

__all__ = [
    "FIND_KEEP",
    "NOISE_SHARE",
    "Page",
    "Query",
    "find",
    "scope_stats",
    "select_page",
    "term_share",
]

FIND_KEEP = 100  # find keeps the most relevant 100, then orders them by time
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


@dataclass(frozen=True, slots=True)
class Page:
    states: list[SrState]
    has_more: bool


def _order(order_by: str, table: str = "srs") -> tuple[str, str]:
    field, _, direction = order_by.rpartition("_")
    column = _COLUMNS[field].replace("srs.", f"{table}.")
    way = "DESC" if direction == "desc" else "ASC"
    return column, f"{column} {way}, {table}.sr_id {way}"


def _filters(q: Query, *, windowed: bool = True) -> tuple[list[str], list[Any]]:
    rule, params = q.caller.readable_srs()
    where: list[str] = [rule]
    args: list[Any] = list(params)
    if q.conversational_only:
        where.append("srs.conversational = 1")
    if q.lanes:
        where.append(f"srs.lane IN ({','.join('?' * len(q.lanes))})")
        args += q.lanes
    column, _ = _order(q.order_by)
    if windowed and q.start_ms is not None:
        where.append(f"{column} >= ?")
        args.append(q.start_ms)
    if windowed and q.end_ms is not None:
        where.append(f"{column} < ?")
        args.append(q.end_ms)
    return where, args


async def select_page(
    reader: Reader, q: Query, *, extra: Sequence[str] = (), extra_args: Sequence[Any] = ()
) -> Page:
    """One page of readable SRs in the window, in ``q.order_by``; ``extra`` narrows further."""
    where, args = _filters(q)
    where += extra
    args += extra_args
    _, order = _order(q.order_by)
    rows = await reader.fetchall(
        f"SELECT srs.state FROM srs WHERE {' AND '.join(where)} "  # noqa: S608 - no values
        f"ORDER BY {order} LIMIT ? OFFSET ?",
        (*args, q.page_size + 1, (q.page - 1) * q.page_size),
    )
    states = [_state(r[0]) for r in rows[: q.page_size]]
    return Page(states, len(rows) > q.page_size)


def _state(blob: bytes) -> SrState:
    return SrState.from_doc(decode_canonical(bytes(blob), what="sr state"))


async def term_share(reader: Reader, caller: Caller, text: str) -> float:
    """The share of the SRs ``caller`` can read that hold ``text`` as a tag or a term."""
    total = await _readable_count(reader, caller)
    if not total:
        return 0.0
    rule, params = caller.readable_srs()
    match = " ".join(f'"{t}"' for t in terms(text)) or '""'
    count = await reader.scalar(
        f"SELECT count(*) FROM srs WHERE {rule} AND (srs.sr_id IN "  # noqa: S608
        "(SELECT sr_id FROM sr_tags WHERE tag = ?) OR srs.doc IN "
        "(SELECT rowid FROM sr_fts WHERE sr_fts MATCH ?))",
        (*params, text, match),
    )
    return int(count) / total


async def _readable_count(reader: Reader, caller: Caller) -> int:
    docs, _ = await scope_stats(reader, caller)
    return docs


async def scope_stats(reader: Reader, caller: Caller) -> tuple[int, int]:
    """(documents, total length) over what ``caller`` can read — from ``sr_stats``."""
    if not caller.has("read:workspace"):
        return 0, 0
    sql, args = "workspace = ?", [caller.workspace]
    if not caller.is_admin:
        sql, args = f"{sql} AND (private = 0 OR owner = ?)", [*args, caller.principal]
    rows = await reader.fetchall(
        f"SELECT coalesce(sum(docs), 0), coalesce(sum(length), 0) FROM sr_stats WHERE {sql}",  # noqa: S608
        args,
    )
    return int(rows[0][0]), int(rows[0][1])


async def find(reader: Reader, q: Query, words: Sequence[str]) -> tuple[list[SrState], bool]:
    """BM25 over title, text and tags with the statistics of what ``q.caller`` can read;
    the ``FIND_KEEP`` best, then ordered by ``q.order_by`` and paged."""
    wanted = list(dict.fromkeys(t for w in words for t in terms(w)))
    if not wanted:
        return [], False
    docs, length = await scope_stats(reader, q.caller)
    hits = await _postings(reader, q, wanted)
    ranked = _rank(hits, docs, length / docs if docs else 1.0)
    where, args = _filters(q, windowed=False)
    _, order = _order(q.order_by)
    kept: list[Any] = []
    for start in range(0, len(ranked), 500):  # the best FIND_KEEP that pass the filters
        chunk = ranked[start : start + 500]
        allowed = {r[0] for r in await reader.fetchall(
            f"SELECT srs.doc FROM srs WHERE srs.doc IN ({','.join('?' * len(chunk))}) "  # noqa: S608
            f"AND {' AND '.join(where)}", (*chunk, *args))}  # fmt: skip
        kept += [d for d in chunk if d in allowed]
        if len(kept) >= FIND_KEEP:
            break
    best = kept[:FIND_KEEP]
    if not best:
        return [], False
    rows = await reader.fetchall(
        f"SELECT srs.state FROM srs WHERE srs.doc IN ({','.join('?' * len(best))}) "  # noqa: S608
        f"ORDER BY {order} LIMIT ? OFFSET ?",
        (*best, q.page_size + 1, (q.page - 1) * q.page_size),
    )
    return [_state(r[0]) for r in rows[: q.page_size]], len(rows) > q.page_size


async def _postings(
    reader: Reader, q: Query, wanted: list[str]
) -> dict[int, tuple[str, int, dict[str, int]]]:
    """doc → (sr_id, length, {term: frequency}) for readable SRs holding any wanted term
    (all of them: document frequencies count what the caller can read, not what it filters)."""
    rule, params = q.caller.readable_srs()
    rows = await reader.fetchall(
        "SELECT v.doc, v.term, count(*), srs.doclen, srs.sr_id FROM sr_vocab v "  # noqa: S608
        f"JOIN srs ON srs.doc = v.doc WHERE v.term IN ({','.join('?' * len(wanted))}) "
        f"AND {rule} GROUP BY v.doc, v.term",
        (*wanted, *params),
    )
    hits: dict[int, tuple[str, int, dict[str, int]]] = {}
    for doc, term, tf, doclen, sr_id in rows:
        hits.setdefault(doc, (sr_id, doclen, {}))[2][term] = tf
    return hits


def _rank(hits: dict[int, tuple[str, int, dict[str, int]]], docs: int, avgdl: float) -> list[int]:
    df: dict[str, int] = {}
    for _, _, tfs in hits.values():
        for term in tfs:
            df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1 + (docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scored = []
    for doc, (sr_id, doclen, tfs) in hits.items():
        norm = _K1 * (1 - _B + _B * doclen / avgdl)
        score = sum(idf[t] * tf * (_K1 + 1) / (tf + norm) for t, tf in tfs.items())
        scored.append((-score, sr_id, doc))
    scored.sort()
    return [doc for _, _, doc in scored]
