"""A brute-force reference of find's rule (docs/tools/e_timeline.md §find, §shed_idf_noise)
over the SR view's current rows, read straight from the store file.

It shares nothing with the node's search code but the documented constants: it cuts and
stems with SQLite's own FTS5 tokenizer on a connection of its own, counts each readable SR's
terms afresh for every question, and scores, sheds, ranks and pages by the letter of the
documentation.  The text index must give exactly its answers.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.identity import DB_FILE
from node.views.query_terms import CONTRACTIONS, STOP_WORDS
from node.views.scoring import FIELD_WEIGHTS
from node.views.segments import TF_MAX

__all__ = ["Answer", "Stemmer", "reference"]

_K1, _B = 1.2, 0.75
_WORD = re.compile(r"[^\W_]+")
NOISE_SHARE, MIN_DENSE = 0.5, 10


class Stemmer:
    """SQLite's porter tokenizer over unicode61, and its unstemmed twin."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        for name, how in (
            ("cut", "unicode61 remove_diacritics 2"),
            ("stem", "porter unicode61 remove_diacritics 2"),
        ):
            self.db.execute(f"CREATE VIRTUAL TABLE {name} USING fts5 (x, tokenize='{how}')")
            self.db.execute(f"CREATE VIRTUAL TABLE {name}_v USING fts5vocab ({name}, instance)")

    def tokens(self, text: str, table: str = "stem") -> list[str]:
        self.db.execute(f"INSERT INTO {table} (rowid, x) VALUES (1, ?)", (text,))
        found = [t for (t,) in self.db.execute(f"SELECT term FROM {table}_v ORDER BY offset")]
        self.db.execute(f"DELETE FROM {table}")
        return found


@dataclass(frozen=True)
class Answer:
    results: list[tuple[str, int, float]]  # sr_id, rank, score — in the page's order
    has_more: bool
    shed_terms: list[str]


@dataclass(frozen=True)
class _Row:
    sr_id: str
    conversational: bool
    lane: str
    bags: tuple[Counter[str], Counter[str], Counter[str]]  # title, text, tags
    lengths: tuple[int, int, int]  # title, text, tags: the doc's length, by field
    ingest: int | None
    content: int | None


def words(text: str) -> int:
    """A field's length as the rule counts it: runs of letters and digits."""
    return len(_WORD.findall(text))


def _readable(node_dir: Path, caller: Caller, stem: Stemmer) -> list[_Row]:
    db = sqlite3.connect(f"file:{node_dir / DB_FILE}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT sr_id, workspace, owner, private, conversational, lane, title, text, "
            "tags_text, doclen, ingest_time, content_time FROM srs WHERE live = 1 AND deleted = 0"
        ).fetchall()
    finally:
        db.close()
    if not caller.has("read:workspace"):
        return []
    return [
        _Row(
            sr_id,
            bool(conv),
            lane,
            (Counter(stem.tokens(title)), Counter(stem.tokens(text)), Counter(stem.tokens(tags))),
            (words(title), words(text), doclen - words(title) - words(text)),
            ingest,
            content,
        )
        for sr_id, ws, owner, private, conv, lane, title, text, tags, doclen, ingest, content in (
            rows
        )
        if ws == caller.workspace and (not private or owner == caller.principal or caller.is_admin)
    ]


def _terms(stem: Stemmer, query: str) -> list[tuple[str, str]]:
    """(word, term): each stem once, its first word; contractions' endings out; stop words
    out unless nothing else."""
    query = CONTRACTIONS.sub("", query)
    pairs = list(zip(stem.tokens(query, "cut"), stem.tokens(query), strict=True))
    kept = [p for p in pairs if p[0] not in STOP_WORDS] or pairs
    seen: dict[str, tuple[str, str]] = {}
    for word, term in kept:
        seen.setdefault(term, (word, term))
    return list(seen.values())


def _shed(
    terms: list[tuple[str, str]], df: Counter[str], n: int
) -> tuple[list[tuple[str, str]], list[str]]:
    if len(terms) < 2 or n < MIN_DENSE:
        return terms, []
    share = {w: df[t] / n for w, t in terms}
    held = [p for p in terms if share[p[0]] > 0] or terms
    rarest = min(held, key=lambda p: (share[p[0]], p[0]))
    kept = [p for p in terms if p == rarest or share[p[0]] <= NOISE_SHARE]
    return kept, [w for w, t in terms if (w, t) not in kept]


def reference(
    node_dir: Path, caller: Caller, args: dict[str, Any], stem: Stemmer, lanes: tuple[str, ...] = ()
) -> Answer:
    rows = _readable(node_dir, caller, stem)
    n = len(rows)
    average = [sum(r.lengths[f] for r in rows) / n if n else 0.0 for f in range(3)]
    terms = _terms(stem, args["query"])
    df = Counter(t for _, t in terms for r in rows if any(b[t] for b in r.bags))
    kept, shed = _shed(terms, df, n) if args.get("shed_idf_noise", True) else (terms, [])
    wanted = sorted(t for _, t in kept)
    scored = []
    for r in rows:
        if args.get("is_conversational_only") and not r.conversational:
            continue
        if lanes and r.lane not in lanes:
            continue
        norm = [
            (1 - _B) + _B * r.lengths[f] / average[f] if average[f] > 0 else 1.0 for f in range(3)
        ]
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
        w, parts = FIELD_WEIGHTS, []
        for t in wanted:
            tf = [min(b[t], TF_MAX) for b in r.bags]
            if any(tf):
                x = w[0] * tf[0] / norm[0] + w[1] * tf[1] / norm[1]
                x = x + w[2] * tf[2] / norm[2]
                parts.append(idf[t] * x * (_K1 + 1) / (x + _K1))
        if parts:
            scored.append((-sum(parts), r.sr_id, r))
    scored.sort(key=lambda s: (s[0], s[1]))
    size, page = args.get("page_size", 20), args.get("page", 1)
    chosen = [
        (rank, s) for rank, s in enumerate(scored, 1) if (page - 1) * size < rank <= page * size
    ]
    field, _, way = args.get("order_by", "ingest_time_desc").rpartition("_")

    def when(r: _Row) -> int:
        t = r.ingest if field == "ingest_time" else r.content
        return -1 if t is None else t

    chosen.sort(key=lambda c: (when(c[1][2]), c[1][1]), reverse=way == "desc")
    results = [(s[1], rank, round(-s[0], 6)) for rank, s in chosen]
    return Answer(results, len(scored) > page * size, shed)
