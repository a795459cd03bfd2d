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

from node.store.schema import SEARCH_TOKENIZER

__all__ = ["MAX_CACHED", "QueryTerm", "query_terms"]

MAX_CACHED = 4096  # queries whose terms are remembered (agents ask the same words again)
_CUT = SEARCH_TOKENIZER.removeprefix("porter ")
assert _CUT != SEARCH_TOKENIZER, "the index stems: its unstemmed twin drops only the stemmer"


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
    """The terms of ``text`` in order, each stem once (its first word kept)."""
    seen: dict[str, QueryTerm] = {}
    for word, term in _TOKENIZER.pairs(text):
        seen.setdefault(term, QueryTerm(word, term))
    return tuple(seen.values())
