"""Reading the SR view for e_timeline: list, intersect and traverse, and what find shares with
them (docs/tools/e_timeline.md; find's ranking is ``node.views.find``).

Every query filters by the caller's read rule (``readable_srs``) *before* it counts,
ranks or pages, so rows the caller cannot read change nothing it sees.  Orders break ties by
``sr_id``, never by arrival, so every node holding the same entries answers alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from node.access.callers import Caller
from node.store import Reader
from node.store.reader import Fetch
from node.views.read_rule import readable_scopes, readable_srs
from node.views.shown import shown_from_blob
from node.views.srs import DOC_SLOTS, LAST_MS, terms

__all__ = [
    "MIN_DENSE",
    "NOISE_SHARE",
    "Doc",
    "Page",
    "Query",
    "intersect",
    "intersect_plain",
    "narrowing",
    "scope_stats",
    "scope_stats_query",
    "select_page",
    "term_share",
]

NOISE_SHARE = 0.5  # shed_idf_noise: a term in more than half of what you can read is noise
MIN_DENSE = 10  # shed_idf_noise acts only when the caller can read at least this many SRs
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
    narrow, narrow_args = narrowing(q)
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


def narrowing(q: Query) -> tuple[list[str], list[Any]]:
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
    return Page([shown_from_blob(r[0]) for r in rows[: q.page_size]], len(rows) > q.page_size)


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
    return Page([shown_from_blob(r[0]) for r in chosen[: q.page_size]], len(chosen) > q.page_size)


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
    sql, args = scope_stats_query(caller)
    rows = await reader.fetchall(sql, args)
    return int(rows[0][0]), int(rows[0][1])


def scope_stats_query(caller: Caller, *more: str) -> tuple[str, list[Any]]:
    """The query of ``caller``'s scope statistics (each of ``more`` a column after them)."""
    where, args = readable_scopes(caller)
    columns = ", ".join(("coalesce(sum(docs), 0)", "coalesce(sum(length), 0)", *more))
    return f"SELECT {columns} FROM sr_stats WHERE {where}", list(args)  # noqa: S608
