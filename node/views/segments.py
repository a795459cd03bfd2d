"""The search index's segments, as arrays: no SQL, no I/O (docs/search.md §The text index).

A segment is an immutable set of docs.  It numbers them 0 … n − 1 (their *slots*) and keeps,
per slot, what find needs without reading ``srs``: the doc's key, its length, its reader
scope, its lane and whether it is conversational.  Its postings list, for each term id it
holds, the slots holding the term (ascending) and the term's count in each field (title,
text, tags).  A doc that leaves the index later is not taken out of its segment: the
segment's ``gone`` mask marks its slot, and a merge leaves it behind.

Blobs are little-endian arrays in a msgpack map, read back with ``numpy.frombuffer`` (no
copy).  A term's count in one field is kept up to 255.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

__all__ = [
    "FIELDS",
    "TF_MAX",
    "Docs",
    "Postings",
    "Segment",
    "decode_docs",
    "decode_list",
    "decode_postings",
    "encode_docs",
    "encode_list",
    "encode_postings",
    "merged_docs",
    "merged_postings",
]

FIELDS = ("title", "text", "tags")
TF_MAX = 255  # a term's count in one field, as kept

Ints = npt.NDArray[np.int64]
_KEY, _U32, _U8 = np.dtype("<i8"), np.dtype("<u4"), np.dtype("u1")
_DOC_FIELDS = (
    ("keys", _KEY),
    ("lengths", _U32),
    ("titles", _U32),
    ("tags", _U32),
    ("scopes", _U32),
    ("lanes", _U32),
    ("ids", _KEY),
)


def _none(dtype: np.dtype[Any] = _KEY) -> npt.NDArray[Any]:
    return np.zeros(0, dtype)


@dataclass(frozen=True, slots=True)
class Docs:
    """Per slot: the doc's key (``srs.doc``), its length and the part of it its title and its
    tags make, reader scope id, lane id, whether it is conversational, and its SR's id hashed
    (what the scrub after an erase looks for)."""

    keys: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.uint32]
    titles: npt.NDArray[np.uint32]
    tags: npt.NDArray[np.uint32]
    scopes: npt.NDArray[np.uint32]
    lanes: npt.NDArray[np.uint32]
    conversational: npt.NDArray[np.bool_]
    ids: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.keys)

    def taken(self, keep: npt.NDArray[np.bool_]) -> Docs:
        return Docs(
            self.keys[keep],
            self.lengths[keep],
            self.titles[keep],
            self.tags[keep],
            self.scopes[keep],
            self.lanes[keep],
            self.conversational[keep],
            self.ids[keep],
        )

    @staticmethod
    def joined(parts: Sequence[Docs]) -> Docs:
        return Docs(
            np.concatenate([p.keys for p in parts]),
            np.concatenate([p.lengths for p in parts]),
            np.concatenate([p.titles for p in parts]),
            np.concatenate([p.tags for p in parts]),
            np.concatenate([p.scopes for p in parts]),
            np.concatenate([p.lanes for p in parts]),
            np.concatenate([p.conversational for p in parts]),
            np.concatenate([p.ids for p in parts]),
        )


@dataclass(frozen=True, slots=True)
class Postings:
    """Term ids (ascending, once each), where each one's postings start (one more entry: the
    end), and per posting its slot and its counts (one column per field of ``FIELDS``)."""

    terms: Ints
    starts: Ints
    slots: npt.NDArray[np.uint32]
    tfs: npt.NDArray[np.uint8]

    @staticmethod
    def of(rows: npt.NDArray[np.int64]) -> Postings:
        """From rows of (term, slot, title count, text count, tags count), one per (term,
        slot), each term's slots ascending (as a segment's docs are taken, slot by slot)."""
        return Postings.of_columns(rows[:, 0], rows[:, 1], rows[:, 2:])

    @staticmethod
    def of_columns(terms: Ints, slots: npt.NDArray[Any], tfs: npt.NDArray[Any]) -> Postings:
        """The same from its columns: each posting's term, slot and counts (by field)."""
        if not len(terms):
            return Postings(_none(), np.zeros(1, np.int64), _none(_U32), np.zeros((0, 3), _U8))
        order = np.argsort(terms, kind="stable")
        terms = terms[order]
        cuts = np.flatnonzero(terms[1:] != terms[:-1]) + 1
        return Postings(
            terms[np.concatenate([[0], cuts])].astype(np.int64),
            np.concatenate([[0], cuts, [len(terms)]]).astype(np.int64),
            slots[order].astype(_U32),
            np.minimum(tfs[order], TF_MAX).astype(_U8),
        )

    @staticmethod
    def joined(parts: Sequence[Postings]) -> Postings:
        """Postings of successive, disjoint ranges of term ids, as one."""
        offsets = np.cumsum([0, *(len(p.slots) for p in parts[:-1])])
        return Postings(
            np.concatenate([p.terms for p in parts] or [_none()]),
            np.concatenate(
                [[0], *(p.starts[1:] + o for p, o in zip(parts, offsets, strict=True))]
            ).astype(np.int64),
            np.concatenate([p.slots for p in parts] or [_none(_U32)]),
            np.concatenate([p.tfs for p in parts] or [np.zeros((0, 3), _U8)]),
        )

    def find(self, term: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8]] | None:
        """The slots holding ``term`` and their counts, or None."""
        at = int(np.searchsorted(self.terms, term))
        if at == len(self.terms) or self.terms[at] != term:
            return None
        lo, hi = self.starts[at], self.starts[at + 1]
        return self.slots[lo:hi], self.tfs[lo:hi]

    def lists(self) -> list[tuple[int, npt.NDArray[np.uint32], npt.NDArray[np.uint8]]]:
        """(term, slots, counts) of every term."""
        return [
            (int(t), self.slots[lo:hi], self.tfs[lo:hi])
            for t, lo, hi in zip(self.terms, self.starts[:-1], self.starts[1:], strict=True)
        ]


@dataclass(frozen=True, slots=True)
class Segment:
    docs: Docs
    postings: Postings


MERGE_RANGES = 16  # a large merge builds its postings this many ranges of term ids at a time
RANGE_POSTINGS = 250_000  # ... a smaller one, one range per this many postings (at least one)


def merged_docs(parts: Sequence[tuple[Segment, npt.NDArray[np.bool_]]]) -> Docs:
    """The docs each part keeps, in order: the merged segment's slots."""
    return Docs.joined([segment.docs.taken(keep) for segment, keep in parts])


def merged_postings(parts: Sequence[tuple[Segment, npt.NDArray[np.bool_]]]) -> Iterator[Postings]:
    """The merged segment's postings, a range of term ids at a time (up to ``MERGE_RANGES``,
    one per ``RANGE_POSTINGS``), so a large merge's temporaries are a range's, not the whole
    segment's, and a small one is made in one go."""
    bases = np.cumsum([int(keep.sum()) for _, keep in parts]) - [int(k.sum()) for _, k in parts]
    renumber = [
        (np.cumsum(keep, dtype=np.int64) - 1 + base).astype(_U32)
        for (_, keep), base in zip(parts, bases, strict=True)
    ]
    every = np.unique(np.concatenate([s.postings.terms for s, _ in parts] or [_none()]))
    postings = sum(len(s.postings.slots) for s, _ in parts)
    ranges = max(1, min(MERGE_RANGES, postings // RANGE_POSTINGS))
    edges = every[np.linspace(0, len(every), ranges + 1).astype(np.int64)[1:-1]]
    limits = [None, *edges.tolist(), None]
    for lo, hi in pairwise(limits):
        terms, slots, tfs = [], [], []
        for (segment, keep), moved in zip(parts, renumber, strict=True):
            p = segment.postings
            a = 0 if lo is None else int(np.searchsorted(p.terms, lo))
            b = len(p.terms) if hi is None else int(np.searchsorted(p.terms, hi))
            s0, s1 = p.starts[a], p.starts[b]
            held = keep[p.slots[s0:s1]]
            terms.append(np.repeat(p.terms[a:b], np.diff(p.starts[a : b + 1]))[held])
            slots.append(moved[p.slots[s0:s1][held]])
            tfs.append(p.tfs[s0:s1][held])
        yield Postings.of_columns(np.concatenate(terms), np.concatenate(slots), np.concatenate(tfs))


# -- blobs --------------------------------------------------------------------------------------


def encode_docs(docs: Docs) -> bytes:
    fields = {name: getattr(docs, name).astype(dtype).tobytes() for name, dtype in _DOC_FIELDS}
    fields["conversational"] = np.packbits(docs.conversational).tobytes()
    return msgpack.packb(fields)


def decode_docs(blob: bytes) -> Docs:
    fields = msgpack.unpackb(blob)
    arrays = {name: np.frombuffer(fields[name], dtype) for name, dtype in _DOC_FIELDS}
    n = len(arrays["keys"])
    flags = np.unpackbits(np.frombuffer(fields["conversational"], _U8), count=n)
    return Docs(conversational=flags.astype(bool), **arrays)  # type: ignore[arg-type]


def encode_postings(p: Postings) -> bytes:
    return msgpack.packb(
        {
            "terms": p.terms.astype(_KEY).tobytes(),
            "starts": p.starts.astype(_KEY).tobytes(),
            "slots": p.slots.tobytes(),
            "tfs": p.tfs.tobytes(),
        }
    )


def decode_postings(blob: bytes) -> Postings:
    fields = msgpack.unpackb(blob)
    return Postings(
        np.frombuffer(fields["terms"], _KEY),
        np.frombuffer(fields["starts"], _KEY),
        np.frombuffer(fields["slots"], _U32),
        np.frombuffer(fields["tfs"], _U8).reshape(-1, len(FIELDS)),
    )


def encode_list(slots: npt.NDArray[np.uint32], tfs: npt.NDArray[np.uint8]) -> bytes:
    """One term's postings in one segment: its slots, then its counts."""
    return slots.astype(_U32).tobytes() + tfs.astype(_U8).tobytes()


def decode_list(blob: bytes) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8]]:
    n = len(blob) // (4 + len(FIELDS))
    slots = np.frombuffer(blob, _U32, count=n)
    return slots, np.frombuffer(blob, _U8, offset=4 * n).reshape(-1, len(FIELDS))
