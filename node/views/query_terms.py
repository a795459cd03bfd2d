"""A query's terms, cut and stemmed by the search index's own tokenizer (docs/tools/e_timeline.md
§find).

``find`` looks its terms up in the index's vocabulary, so they must be exactly the terms the
index holds: the query is given to FTS5 tables with the index's tokenizer, on a private
in-memory SQLite connection (not the store: the store's reader may not write, even to a
temporary table), and read back through ``fts5vocab``.  Stemming does not change how text is
cut, so the unstemmed twin's terms stand beside the stems one for one: the words a caller
sees (``shed_terms``) and the terms that are scored.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache

from node.views.schema import SEARCH_TOKENIZER

__all__ = ["MAX_CACHED", "STOP_WORDS", "QueryTerm", "matching_words", "query_terms"]

MAX_CACHED = 4096  # queries whose terms are remembered (agents ask the same words again)
_CUT = SEARCH_TOKENIZER.removeprefix("porter ")
assert _CUT != SEARCH_TOKENIZER, "the index stems: its unstemmed twin drops only the stemmer"


# English function words — the commonest, the forms of "do", the question words, the personal
# pronouns — are not a query's search terms: a question's "what did she" matches a third to
# half of any conversation and outweighs the words that say what it asks (measured on LoCoMo:
# first-page recall 0.664 with them, 0.704 without; docs/benchmarks.md §quality).  The index
# keeps them, so intersect's phrases still hold.
STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "that",
        "the",
        "to",
        "was",
        "were",
        "will",
        "with",
        "did",
        "do",
        "does",
        "how",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "he",
        "her",
        "him",
        "his",
        "i",
        "me",
        "my",
        "our",
        "she",
        "their",
        "them",
        "they",
        "us",
        "we",
        "you",
        "your",
    )
)


@dataclass(frozen=True, slots=True)
class QueryTerm:
    word: str  # as cut: lower case, diacritics off (what shed_terms names)
    term: str  # as the index holds it: stemmed (what is looked up and scored)


class _Tokenizer:
    """Two one-row FTS5 tables, stemmed and not, on a connection of their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        for name, how in (("cut", _CUT), ("stem", SEARCH_TOKENIZER)):
            self._db.execute(f"CREATE VIRTUAL TABLE {name} USING fts5 (x, tokenize='{how}')")
            self._db.execute(f"CREATE VIRTUAL TABLE {name}_at USING fts5vocab ({name}, instance)")

    def pairs(self, text: str) -> list[tuple[str, str]]:
        """(word, term) of each token of ``text``, in order."""
        with self._lock:
            found = [self._terms(name, text) for name in ("cut", "stem")]
        words, stems = found
        assert words.keys() == stems.keys(), "stemming keeps every token's place"
        return [(words[at], stems[at]) for at in sorted(words)]

    def _terms(self, table: str, text: str) -> dict[int, str]:
        self._db.execute(f"INSERT INTO {table} (rowid, x) VALUES (1, ?)", (text,))  # noqa: S608
        rows = self._db.execute(f"SELECT offset, term FROM {table}_at").fetchall()  # noqa: S608
        self._db.execute(f"DELETE FROM {table}")  # noqa: S608
        return dict(rows)


_TOKENIZER = _Tokenizer()


@lru_cache(maxsize=MAX_CACHED)
def query_terms(text: str) -> tuple[QueryTerm, ...]:
    """The search terms of ``text`` in order, each stem once (its first word kept): its stop
    words left out, unless it holds nothing else."""
    pairs = _TOKENIZER.pairs(text)
    kept = [p for p in pairs if p[0] not in STOP_WORDS] or pairs
    seen: dict[str, QueryTerm] = {}
    for word, term in kept:
        seen.setdefault(term, QueryTerm(word, term))
    return tuple(seen.values())


def matching_words(text: str, query: str) -> frozenset[str]:
    """The words of ``text`` (as cut: lower case, diacritics off) that ``query``'s search
    terms match — what a page of find's results highlights."""
    wanted = {t.term for t in query_terms(query)}
    return frozenset(word for word, term in _TOKENIZER.pairs(text) if term in wanted)
