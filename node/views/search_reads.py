"""What find reads of the text index (``node.views.search_index``), inside one read
transaction: the segments, the query's term ids, the caller's scopes and lanes as masks, its
scope statistics, and the postings of the terms asked.

A reader holds the segments between questions (``Held``: each one's docs, gone mask and, for
a small one, its postings) and asks only which changed: segments are immutable but for their
gone mask, whose ``version`` grows with it.  A large segment's postings are read per term.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from node.access.callers import Caller
from node.store import Reader
from node.store.reader import Fetch
from node.views.read_rule import readable_scopes
from node.views.segments import Docs, Postings, decode_docs, decode_list, decode_postings
from node.views.timeline import Query, scope_stats_query

__all__ = ["LIST_CACHE_BYTES", "Cache", "Held", "Read", "cache_of", "read"]

Mask = npt.NDArray[np.bool_]
List = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8]]


@dataclass(slots=True)
class Held:
    """A segment as a reader holds it."""

    version: int
    docs: Docs
    gone: Mask
    postings: Postings | None  # a small segment's; None: read per term
    _readable: tuple[frozenset[int], Mask, int, int] | None = None

    def readable(self, scopes: frozenset[int], scope_ok: Mask) -> Mask:
        """Its slots the caller may read (remembered for the last set of scopes)."""
        return self._of(scopes, scope_ok)[1]

    def field_lengths(self, scopes: frozenset[int], scope_ok: Mask) -> tuple[int, int]:
        """The words of the titles and the tags of its slots the caller may read."""
        _, _, titles, tags = self._of(scopes, scope_ok)
        return titles, tags

    def _of(self, scopes: frozenset[int], scope_ok: Mask) -> tuple[frozenset[int], Mask, int, int]:
        if self._readable is None or self._readable[0] != scopes:
            ok = scope_ok[self.docs.scopes] & ~self.gone
            titles = int(self.docs.titles[ok].sum(dtype=np.int64))
            tags = int(self.docs.tags[ok].sum(dtype=np.int64))
            self._readable = (scopes, ok, titles, tags)
        return self._readable


LIST_CACHE_BYTES = 64 << 20  # a reader's large segments' lists held between questions


@dataclass(slots=True)
class Cache:
    """What a reader holds between questions: every segment (``Held``), and the most recently
    asked lists of large segments — theirs never change (a merge makes a new segment) —
    up to ``LIST_CACHE_BYTES``; None: the segment does not hold the term."""

    segments: dict[int, Held] = field(default_factory=dict)
    lists: OrderedDict[tuple[int, int], List | None] = field(default_factory=OrderedDict)
    bytes: int = 0

    def keep(self, key: tuple[int, int], found: List | None) -> None:
        self.lists[key] = found
        self.bytes += 0 if found is None else found[0].nbytes + found[1].nbytes
        while self.bytes > LIST_CACHE_BYTES and self.lists:
            _, dropped = self.lists.popitem(last=False)
            self.bytes -= 0 if dropped is None else dropped[0].nbytes + dropped[1].nbytes


_CACHES: weakref.WeakKeyDictionary[Reader, Cache] = weakref.WeakKeyDictionary()


def cache_of(reader: Reader) -> Cache:
    return _CACHES.setdefault(reader, Cache())


@dataclass(slots=True)
class Read:
    """A question's reads: each segment (by id, in order) with the lists of the terms it
    holds (term → slots, counts), and the caller's view of the index."""

    segments: list[tuple[Held, dict[str, List]]]
    scopes: frozenset[int]
    scope_ok: Mask
    lane_ok: Mask | None  # None: every lane
    docs: int  # what the caller can read: how many SRs,
    length: int  # their total length,
    titles: int  # and the part of it their titles
    tags: int  # and their tags make
    ids: dict[str, int] = field(default_factory=dict)  # the terms the index holds, by term


def read(fetch: Fetch, cache: Cache, q: Query, terms: Sequence[str]) -> Read:
    """Everything the question ``terms`` needs, ``cache`` brought up to date."""
    held = cache.segments
    _refresh(fetch, held)
    ids = _term_ids(fetch, terms)
    scopes, scope_ok = _scopes(fetch, q.caller)
    lane_ok = _lanes(fetch, q.lanes) if q.lanes else None
    stats, args = scope_stats_query(q.caller)
    docs, length = fetch(stats, args)[0]
    lists = _large_lists(fetch, cache, ids)
    names = {i: t for t, i in ids.items()}
    segments = []
    for seg in sorted(held):
        h = held[seg]
        found: dict[str, List] = {}
        if h.postings is not None:
            for term, i in ids.items():
                got = h.postings.find(i)
                if got is not None:
                    found[term] = got
        else:
            found = {names[i]: got for (s, i), got in lists.items() if s == seg and got}
        segments.append((h, found))
    lengths = [h.field_lengths(scopes, scope_ok) for h, _ in segments]
    titles, tags = sum(t for t, _ in lengths), sum(g for _, g in lengths)
    return Read(segments, scopes, scope_ok, lane_ok, int(docs), int(length), titles, tags, ids)


def _refresh(fetch: Fetch, held: dict[int, Held]) -> None:
    now = {seg: (version, small) for seg, version, small in fetch(_SEGMENTS)}
    for seg in [s for s in held if s not in now]:
        del held[seg]
    for seg, (version, small) in now.items():
        h = held.get(seg)
        if h is None:
            slots, docs, gone, blob = fetch(_SEGMENT, (seg,))[0]
            postings = decode_postings(blob) if small else None
            held[seg] = Held(version, decode_docs(docs), _mask(gone, slots), postings)
        elif h.version != version:
            slots, gone = fetch(_GONE, (seg,))[0]
            h.version, h.gone, h._readable = version, _mask(gone, slots), None


_SEGMENTS = "SELECT seg, version, postings IS NOT NULL FROM sr_segments"
_SEGMENT = "SELECT slots, docs, gone, postings FROM sr_segments WHERE seg = ?"
_GONE = "SELECT slots, gone FROM sr_segments WHERE seg = ?"


def _mask(gone: bytes, slots: int) -> Mask:
    return np.unpackbits(np.frombuffer(gone, np.uint8), count=slots).astype(bool)


def _term_ids(fetch: Fetch, terms: Sequence[str]) -> dict[str, int]:
    if not terms:
        return {}
    marks = ",".join("?" * len(terms))
    rows = fetch(f"SELECT term, id FROM sr_terms WHERE term IN ({marks})", list(terms))  # noqa: S608
    return {str(t): int(i) for t, i in rows}


def _scopes(fetch: Fetch, caller: Caller) -> tuple[frozenset[int], Mask]:
    where, args = readable_scopes(caller)
    top = fetch("SELECT coalesce(max(id), 0) FROM sr_scopes")[0][0]
    found = frozenset(i for (i,) in fetch(f"SELECT id FROM sr_scopes WHERE {where}", args))  # noqa: S608
    ok = np.zeros(int(top) + 1, bool)
    ok[list(found)] = True
    return found, ok


def _lanes(fetch: Fetch, lanes: Sequence[str]) -> Mask:
    top = fetch("SELECT coalesce(max(id), 0) FROM sr_lanes")[0][0]
    marks = ",".join("?" * len(lanes))
    sql = f"SELECT id FROM sr_lanes WHERE lane IN ({marks})"  # noqa: S608
    ok = np.zeros(int(top) + 1, bool)
    ok[[i for (i,) in fetch(sql, list(lanes))]] = True
    return ok


def _large_lists(
    fetch: Fetch, cache: Cache, ids: dict[str, int]
) -> dict[tuple[int, int], List | None]:
    """The lists of ``ids`` in every large segment, from the cache where it has them."""
    large = [seg for seg, h in cache.segments.items() if h.postings is None]
    wanted = [(seg, term) for seg in large for term in ids.values()]
    for key in wanted:
        if key in cache.lists:
            cache.lists.move_to_end(key)
    asked = sorted({term for seg, term in wanted if (seg, term) not in cache.lists})
    if asked:
        rows = fetch(
            f"SELECT seg, term, list FROM sr_postings WHERE seg IN ({','.join('?' * len(large))}) "  # noqa: S608
            f"AND term IN ({','.join('?' * len(asked))})",
            [*large, *asked],
        )
        found = {(int(seg), int(term)): decode_list(data) for seg, term, data in rows}
        for seg in large:
            for term in asked:
                cache.keep((seg, term), found.get((seg, term)))
    return {key: cache.lists.get(key) for key in wanted}
