"""The text index find reads (docs/search.md §The text index): the SR view's readable rows as
segments of postings, kept in the transaction that changes them.

Triggers on ``sr_docs`` (the narrow row of each readable SR) queue every doc that enters or
leaves it.  When the transaction is written (``settle``, on the writer connection's thread,
just before the commit, and at each flush of a long one) the queue becomes one new segment
of the docs that entered — their title, text and tags cut by the index's tokenizer — and the
docs that left are marked gone in their segments.  Segments of a tier (fewer than 8, 64, 512 …
live docs) are merged eight at a time, gone docs left behind; a segment of 32,768 live docs
or more is merged no more.  So the index is what the store committed, in every process that
writes the store, and a node stopped mid-way has nothing to repair: the transaction holds it.

A segment of fewer than ``BLOB_SLOTS`` docs is one row (its postings one blob); a larger one
keeps a row per term (``sr_postings``), so find reads only the terms it asks for.  Terms,
reader scopes and lanes are numbered in dictionaries of their own.

An erased SR (its ``srs`` row deleted while withdrawn) is noted by a trigger; the scrub after
an erase (``scrub``) rewrites every segment holding any version of it, and drops from the
dictionary each term no segment holds any more, so no byte of its text is left in the index.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from node.allocator import give_back
from node.views.segments import (
    FIELDS,
    Docs,
    Postings,
    Segment,
    decode_docs,
    decode_list,
    decode_postings,
    encode_docs,
    encode_list,
    encode_postings,
    merged_docs,
    merged_postings,
)
from node.views.tokens import token_count, tokenizer

__all__ = [
    "BLOB_SLOTS",
    "CLEAR",
    "FANOUT",
    "TOP_TIER",
    "TextIndex",
    "load_segment",
    "scope_key",
    "sr_hash",
]

BLOB_SLOTS = 4_096  # a segment of fewer docs is one row; a larger one a row per term
FANOUT = 8  # segments of one tier merged this many at a time
TOP_TIER = 5  # a segment of 8 ** 5 = 32,768 live docs or more is merged no more
GIVE_BACK_DOCS = 512  # a batch (or its merges) of this many docs or more gives back what it freed
MAX_TERMS = 50_000  # term ids remembered by the writer (then forgotten at once)

CLEAR = (
    "DELETE FROM sr_segments",
    "DELETE FROM sr_postings",
    "DELETE FROM sr_index_docs",
    "DELETE FROM sr_index_queue",
    "DELETE FROM sr_index_erased",
    "DELETE FROM sr_terms",
)
_QUEUED = "SELECT doc FROM sr_index_queue"
_ENTERED = (  # each doc's text, reader scope, lane, flag, length and its number of tags
    "SELECT d.doc, s.sr_id, s.title, s.text, s.tags_text, d.workspace, d.private, d.owner, "
    "d.lane, d.conversational, d.doclen, "
    "(SELECT count(*) FROM sr_tags t WHERE t.sr_id = s.sr_id) "
    "FROM sr_docs d JOIN srs s ON s.doc = d.doc WHERE d.doc IN ({marks})"
)
_TERM_IDS = "SELECT term, id FROM sr_terms WHERE term IN ({marks})"
_PLACED = "SELECT doc, seg, slot FROM sr_index_docs WHERE doc IN ({marks})"
_SEGMENT = "SELECT slots, live, docs, gone, postings FROM sr_segments WHERE seg = ?"
_NEW_SEGMENT = (
    "INSERT INTO sr_segments (slots, live, version, docs, gone, postings) VALUES (?, ?, 0, ?, ?, ?)"
)
_PLACE = "INSERT OR REPLACE INTO sr_index_docs (seg, slot, doc) VALUES (?, ?, ?)"
_MOVED = "UPDATE sr_index_docs SET seg = ?, slot = ? WHERE doc = ?"
_MASK = "SELECT slots, live, gone FROM sr_segments WHERE seg = ?"
_GONE = "UPDATE sr_segments SET live = ?, version = version + 1, gone = ? WHERE seg = ?"


def sr_hash(sr_id: str) -> int:
    """An SR's id as a slot keeps it (for the scrub): 64 bits of its BLAKE2b digest."""
    digest = hashlib.blake2b(sr_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def scope_key(workspace: str, private: int, owner: str) -> tuple[str, int, str]:
    """A reader scope (``sr_stats``' key): a public SR's owner does not narrow it."""
    return workspace, int(private), owner if private else ""


def load_segment(db: sqlite3.Connection, seg: int) -> tuple[Segment, npt.NDArray[np.bool_]]:
    """A whole segment and its gone mask."""
    slots, _, docs, gone, blob = db.execute(_SEGMENT, (seg,)).fetchone()
    if blob is not None:
        postings = decode_postings(blob)
    else:
        rows = db.execute(
            "SELECT term, list FROM sr_postings WHERE seg = ? ORDER BY term", (seg,)
        ).fetchall()
        postings = _joined([(t, *decode_list(data)) for t, data in rows])
    mask = np.unpackbits(np.frombuffer(gone, np.uint8), count=slots).astype(bool)
    return Segment(decode_docs(docs), postings), mask


def _joined(
    lists: Sequence[tuple[int, npt.NDArray[np.uint32], npt.NDArray[np.uint8]]],
) -> Postings:
    sizes = np.array([len(s) for _, s, _ in lists], np.int64)
    return Postings(
        np.array([t for t, _, _ in lists], np.int64),
        np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        np.concatenate([s for _, s, _ in lists]) if lists else np.zeros(0, np.uint32),
        np.concatenate([f for _, _, f in lists]) if lists else np.zeros((0, 3), np.uint8),
    )


def _counted(owners: npt.NDArray[np.int64], terms: npt.NDArray[np.int64], texts: int) -> Postings:
    """Postings of ``texts`` texts (each slot's fields, in order): each of ``terms`` (term
    ids) is in field ``owner % len(FIELDS)`` of slot ``owner // len(FIELDS)``."""
    pairs, counts = np.unique(terms * texts + owners, return_counts=True)
    term, at = np.divmod(pairs, texts)  # ordered by term, then slot, then field
    slot, field = np.divmod(at, len(FIELDS))
    first = np.ones(len(pairs), bool)
    first[1:] = (term[1:] != term[:-1]) | (slot[1:] != slot[:-1])
    row = np.cumsum(first) - 1
    tfs = np.zeros((int(first.sum()), len(FIELDS)), np.int64)
    tfs[row, field] = counts
    return Postings.of_columns(term[first], slot[first], tfs)


def _chunks(items: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def _tier(live: int) -> int:
    tier = 0
    while live >= FANOUT:
        live //= FANOUT
        tier += 1
    return tier


class TextIndex:
    """The index's writer, with the dictionaries' ids it has looked up."""

    def __init__(self) -> None:
        self._terms: dict[str, int] = {}
        self._scopes: dict[tuple[str, int, str], int] = {}
        self._lanes: dict[str, int] = {}

    def reset(self) -> None:
        """Forget the ids (a batch was rolled back: ids it made are gone)."""
        self._terms.clear()
        self._scopes.clear()
        self._lanes.clear()

    def settle(self, db: sqlite3.Connection) -> None:
        """Bring the index up to the rows written so far in this transaction."""
        queued = [doc for (doc,) in db.execute(_QUEUED)]
        if queued:
            db.execute("DELETE FROM sr_index_queue")
            self._withdraw(db, queued)
            entered = [row for part in _chunks(queued) for row in _rows(db, _ENTERED, part)]
            if entered:
                self._write(db, self._segment(db, entered))
            merged = self._merge_due(db)
            if len(queued) + merged >= GIVE_BACK_DOCS:
                give_back()  # the arrays of a large batch or merge, megabytes each (allocator.py)
        if db.execute("SELECT 1 FROM sr_index_erased LIMIT 1").fetchone():
            self.scrub(db)

    # -- docs in, docs out ------------------------------------------------------------------------

    def _withdraw(self, db: sqlite3.Connection, docs: Sequence[int]) -> None:
        """Mark the docs that left (those the index holds) gone in their segments."""
        by_seg: dict[int, list[int]] = defaultdict(list)
        for part in _chunks(docs):
            for _, seg, slot in _rows(db, _PLACED, part):
                by_seg[seg].append(slot)
            db.execute(
                f"DELETE FROM sr_index_docs WHERE doc IN ({','.join('?' * len(part))})",  # noqa: S608
                part,
            )
        for seg, slots in by_seg.items():
            count, live, gone = db.execute(_MASK, (seg,)).fetchone()
            mask = np.unpackbits(np.frombuffer(gone, np.uint8), count=count)
            mask[slots] = 1
            db.execute(_GONE, (live - len(slots), np.packbits(mask).tobytes(), seg))

    def _segment(self, db: sqlite3.Connection, rows: Sequence[Sequence[Any]]) -> Segment:
        """A segment of the docs of ``rows`` (``_ENTERED``'s), in that order."""
        split, of = tokenizer.cut([text for r in rows for text in (r[2], r[3], r[4])])
        ids = self._term_ids(db, set(chain.from_iterable(of.values())))
        chunk_at = {chunk: at for at, chunk in enumerate(of)}
        words = np.fromiter(map(chunk_at.__getitem__, chain.from_iterable(split)), np.int64)
        sizes = np.fromiter(map(len, of.values()), np.int64, len(of))  # terms per chunk
        per_word = sizes[words]
        starts = np.repeat(np.cumsum(sizes)[words] - np.cumsum(per_word), per_word)
        chunk_terms = np.fromiter(map(ids.__getitem__, chain.from_iterable(of.values())), np.int64)
        owners = np.repeat(np.arange(len(split)), np.fromiter(map(len, split), np.int64))
        postings = _counted(
            np.repeat(owners, per_word), chunk_terms[starts + np.arange(len(starts))], len(split)
        )
        scopes = self._ids(
            db,
            self._scopes,
            "sr_scopes",
            ("workspace", "private", "owner"),
            {scope_key(*r[5:8]) for r in rows},
        )
        lanes = self._ids(db, self._lanes, "sr_lanes", ("lane",), {(r[8],) for r in rows})
        titles = [token_count(r[2]) for r in rows]
        docs = Docs(
            np.array([r[0] for r in rows], np.int64),
            np.array([r[10] for r in rows], np.uint32),
            np.array(titles, np.uint32),
            np.array([r[11] for r in rows], np.uint32),
            np.array([scopes[scope_key(*r[5:8])] for r in rows], np.uint32),
            np.array([lanes[(r[8],)] for r in rows], np.uint32),
            np.array([bool(r[9]) for r in rows], bool),
            np.array([sr_hash(r[1]) for r in rows], np.int64),
        )
        return Segment(docs, postings)

    def _term_ids(self, db: sqlite3.Connection, terms: set[str]) -> dict[str, int]:
        """The dictionary ids of ``terms``, new ones made."""
        known = self._terms
        missing = [t for t in terms if t not in known]
        if missing:
            if len(known) + len(missing) > MAX_TERMS:
                known.clear()
                missing = list(terms)
            db.executemany(
                "INSERT OR IGNORE INTO sr_terms (term) VALUES (?)", ((t,) for t in missing)
            )
            for part in _chunks(missing):
                known.update(_rows(db, _TERM_IDS, part))
        return known

    def _ids(
        self,
        db: sqlite3.Connection,
        known: dict[Any, int],
        table: str,
        columns: tuple[str, ...],
        keys: set[Any],
    ) -> dict[Any, int]:
        """The dictionary ids of ``keys`` (tuples of ``columns``' values), new ones made."""
        missing = [k for k in keys if k not in known]
        if missing:
            if len(known) + len(missing) > MAX_TERMS:
                known.clear()
                missing = list(keys)
            names, marks = ", ".join(columns), ", ".join("?" * len(columns))
            where = " AND ".join(f"{c} = ?" for c in columns)
            db.executemany(
                f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})",  # noqa: S608
                missing,
            )
            select = f"SELECT id FROM {table} WHERE {where}"  # noqa: S608
            for key in missing:
                known[key] = db.execute(select, key).fetchone()[0]
        return {k: known[k] for k in keys}

    def _write(self, db: sqlite3.Connection, segment: Segment) -> int:
        return self._written(db, segment.docs, [segment.postings])[0]

    def _written(
        self,
        db: sqlite3.Connection,
        docs: Docs,
        postings: Iterable[Postings],
        *,
        moved: bool = False,
    ) -> tuple[int, set[int]]:
        """A new segment of ``docs`` with ``postings`` (ranges of term ids, in order): its
        id, and the term ids it holds.  ``moved``: the docs are placed already (a merge)."""
        n = len(docs)
        small = Postings.joined(list(postings)) if n < BLOB_SLOTS else None
        blank = np.packbits(np.zeros(n, np.uint8)).tobytes()
        blob = None if small is None else encode_postings(small)
        seg = int(db.execute(_NEW_SEGMENT, (n, n, encode_docs(docs), blank, blob)).lastrowid or 0)
        held: set[int] = set()
        for part in [small] if small is not None else postings:
            held.update(part.terms.tolist())
            if small is None:
                db.executemany(
                    "INSERT INTO sr_postings (seg, term, list) VALUES (?, ?, ?)",
                    ((seg, t, encode_list(s, f)) for t, s, f in part.lists()),
                )
        placed = zip(repeat(seg), range(n), docs.keys.tolist())
        db.executemany(_MOVED if moved else _PLACE, placed)
        return seg, held

    # -- merges -------------------------------------------------------------------------------

    def _merge_due(self, db: sqlite3.Connection) -> int:
        """Merge the oldest ``FANOUT`` segments of the lowest tier that has as many, while
        one has; how many docs the merges took in."""
        merged = 0
        while True:
            tiers: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for seg, live in db.execute("SELECT seg, live FROM sr_segments ORDER BY seg"):
                if _tier(live) < TOP_TIER:
                    tiers[_tier(live)].append((seg, live))
            full = sorted(t for t, segs in tiers.items() if len(segs) >= FANOUT)
            if not full:
                return merged
            due = tiers[full[0]][:FANOUT]
            self.rewrite(db, [seg for seg, _ in due])
            merged += sum(live for _, live in due)

    def rewrite(self, db: sqlite3.Connection, segs: Sequence[int]) -> set[int]:
        """Merge ``segs`` into one segment of their docs that are not gone (none: no
        segment); the term ids they held that it does not."""
        parts = [(segment, ~gone) for segment, gone in (load_segment(db, seg) for seg in segs)]
        docs = merged_docs(parts)
        marks = ",".join("?" * len(segs))
        for table in ("sr_segments", "sr_postings"):
            db.execute(f"DELETE FROM {table} WHERE seg IN ({marks})", segs)  # noqa: S608
        kept: set[int] = set()
        if len(docs):
            kept = self._written(db, docs, merged_postings(parts), moved=True)[1]
        return {int(t) for segment, _ in parts for t in segment.postings.terms} - kept

    # -- the scrub after an erase ---------------------------------------------------------------

    def scrub(self, db: sqlite3.Connection) -> None:
        """Rewrite each segment that holds a version of an SR erased since the last scrub,
        and drop the terms that no segment holds any more."""
        erased = [sr_hash(sr_id) for (sr_id,) in db.execute("SELECT sr_id FROM sr_index_erased")]
        db.execute("DELETE FROM sr_index_erased")
        if not erased:
            return
        hashes = np.array(erased, np.int64)
        dropped: set[int] = set()
        for seg, docs in db.execute("SELECT seg, docs FROM sr_segments").fetchall():
            if np.isin(decode_docs(docs).ids, hashes).any():
                dropped |= self.rewrite(db, [seg])
        blobs = [decode_postings(b) for (b,) in db.execute(_BLOBS)]
        for term in sorted(dropped):
            held = (
                any(p.find(term) is not None for p in blobs)
                or db.execute(
                    "SELECT 1 FROM sr_postings WHERE term = ? LIMIT 1", (term,)
                ).fetchone()
            )
            if not held:
                db.execute("DELETE FROM sr_terms WHERE id = ?", (term,))
        self.reset()


_BLOBS = "SELECT postings FROM sr_segments WHERE postings IS NOT NULL"
_HELD = (  # the segments first: the postings' key leads with them
    "SELECT 1 FROM sr_postings WHERE seg IN "
    "(SELECT seg FROM sr_segments WHERE postings IS NULL) AND term = ? LIMIT 1"
)


def _rows(db: sqlite3.Connection, sql: str, keys: Sequence[Any]) -> list[Any]:
    return db.execute(sql.format(marks=",".join("?" * len(keys))), keys).fetchall()
