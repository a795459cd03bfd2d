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


@dataclass(slots=True)
class Block:
    """Segments side by side, their slots numbered on from one segment to the next: their
    docs, gone masks, and the lists (slots ascending) of the terms a question asks."""

    docs: Docs
    gone: Mask
    lists: dict[str, List] = field(default_factory=dict)
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


def _joined(held: Sequence[Held]) -> tuple[Docs, Mask, npt.NDArray[np.int64]]:
    """The docs and gone masks of ``held`` side by side, and where each one's slots begin."""
    sizes = np.array([len(h.docs) for h in held], np.int64)
    bases = np.cumsum(sizes) - sizes
    if not held:
        empty = np.zeros(0, np.uint32)
        docs = Docs(
            np.zeros(0, np.int64),
            empty,
            empty,
            empty,
            empty,
            empty,
            np.zeros(0, bool),
            np.zeros(0, np.int64),
        )
        return docs, np.zeros(0, bool), bases
    return Docs.joined([h.docs for h in held]), np.concatenate([h.gone for h in held]), bases


def _lists(parts: Sequence[tuple[int, List]]) -> List:
    """One term's lists in several segments (with each one's base), as one list."""
    if len(parts) == 1:
        base, (slots, tfs) = parts[0]
        return (slots + base if base else slots), tfs
    return (
        np.concatenate([slots.astype(np.int64) + base for base, (slots, _) in parts]),
        np.concatenate([tfs for _, (_, tfs) in parts]),
    )


LIST_CACHE_BYTES = 64 << 20  # a reader's large segments' lists held between questions


@dataclass(slots=True)
class Cache:
    """What a reader holds between questions: every segment (``Held``), and the most recently
    asked lists of large segments — theirs never change (a merge makes a new segment) —
    up to ``LIST_CACHE_BYTES``; None: the segment does not hold the term."""

    segments: dict[int, Held] = field(default_factory=dict)
    lists: OrderedDict[tuple[int, int], List | None] = field(default_factory=OrderedDict)
    bytes: int = 0
    large: tuple[tuple[tuple[int, int], ...], Block, npt.NDArray[np.int64]] | None = None

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
    """A question's reads: the large segments as one block and the small ones as another,
    each with the lists of the terms asked (term → slots, counts), and the caller's view of
    the index."""

    blocks: list[Block]
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
    blocks = [_large_block(fetch, cache, ids), _small_block(held, ids)]
    lengths = [b.field_lengths(scopes, scope_ok) for b in blocks]
    titles, tags = sum(t for t, _ in lengths), sum(g for _, g in lengths)
    return Read(blocks, scopes, scope_ok, lane_ok, int(docs), int(length), titles, tags, ids)


def _large_block(fetch: Fetch, cache: Cache, ids: dict[str, int]) -> Block:
    """The large segments as one block, held while none of them changes."""
    large = sorted(seg for seg, h in cache.segments.items() if h.postings is None)
    key = tuple((seg, cache.segments[seg].version) for seg in large)
    if cache.large is None or cache.large[0] != key:
        docs, gone, bases = _joined([cache.segments[seg] for seg in large])
        cache.large = (key, Block(docs, gone), bases)
    _, block, bases = cache.large
    base = dict(zip(large, bases.tolist(), strict=True))
    found = _large_lists(fetch, cache, ids)
    block.lists = {}
    for term in ids:
        parts = [(base[seg], found[seg][term]) for seg in large if term in found.get(seg, {})]
        if parts:
            block.lists[term] = _lists(parts)
    return block


def _small_block(held: dict[int, Held], ids: dict[str, int]) -> Block:
    """The small segments as one block, with their lists of ``ids``."""
    small = [held[seg] for seg in sorted(held) if held[seg].postings is not None]
    docs, gone, bases = _joined(small)
    lists: dict[str, List] = {}
    for term, i in ids.items():
        parts = [
            (int(base), got)
            for h, base in zip(small, bases, strict=True)
            if h.postings is not None and (got := h.postings.find(i)) is not None
        ]
        if parts:
            lists[term] = _lists(parts)
    return Block(docs, gone, lists)


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
            h.version, h.gone = version, _mask(gone, slots)


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


def _large_lists(fetch: Fetch, cache: Cache, ids: dict[str, int]) -> dict[int, dict[str, List]]:
    """The lists of ``ids`` (term → id) in every large segment that holds them, by segment,
    from the cache where it has them (what is read is kept there too)."""
    large = [seg for seg, h in cache.segments.items() if h.postings is None]
    got: dict[tuple[int, int], List | None] = {}
    for seg in large:
        for term in ids.values():
            if (seg, term) in cache.lists:
                cache.lists.move_to_end((seg, term))
                got[seg, term] = cache.lists[seg, term]
    asked = sorted({term for seg in large for term in ids.values() if (seg, term) not in got})
    if asked:
        rows = fetch(
            f"SELECT seg, term, list FROM sr_postings WHERE seg IN ({','.join('?' * len(large))}) "  # noqa: S608
            f"AND term IN ({','.join('?' * len(asked))})",
            [*large, *asked],
        )
        found = {(int(seg), int(term)): decode_list(data) for seg, term, data in rows}
        for seg in large:
            for term in asked:
                got[seg, term] = found.get((seg, term))
                cache.keep((seg, term), got[seg, term])
    names = {i: name for name, i in ids.items()}
    out: dict[int, dict[str, List]] = {}
    for (seg, term), listed in got.items():
        if listed is not None:
            out.setdefault(seg, {})[names[term]] = listed
    return out
