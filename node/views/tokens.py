"""The search index's tokenizer, exactly: SQLite FTS5's own (``SEARCH_TOKENIZER``), run on a
private in-memory connection — for queries (``query_terms``) and for the text index's docs
(``search_index``) alike, so a query's terms are the terms the index holds.

FTS5 cuts text at every character that is not a letter, a digit or a private-use character,
whitespace included, and stems each token on its own; so a text's terms are its whitespace
chunks' terms, one chunk after another.  Docs are cut that way: each distinct chunk goes
through FTS5 once and is remembered (``MAX_CHUNKS``), and most chunks of a new doc — its
words, with their punctuation — have been seen before.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from itertools import chain

from node.views.schema import SEARCH_TOKENIZER

__all__ = ["MAX_CHUNKS", "Tokenizer", "token_count", "tokenizer"]

MAX_CHUNKS = 50_000  # whitespace chunks whose terms are remembered (then forgotten at once)
_CUT = SEARCH_TOKENIZER.removeprefix("porter ")
assert _CUT != SEARCH_TOKENIZER, "the index stems: its unstemmed twin drops only the stemmer"


class Tokenizer:
    """Two FTS5 tables, stemmed and not, on a connection of their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        for name, how in (("cut", _CUT), ("stem", SEARCH_TOKENIZER)):
            self._db.execute(f"CREATE VIRTUAL TABLE {name} USING fts5 (x, tokenize='{how}')")
            self._db.execute(f"CREATE VIRTUAL TABLE {name}_at USING fts5vocab ({name}, instance)")
        self._chunks: dict[str, tuple[str, ...]] = {}

    def pairs(self, text: str) -> list[tuple[str, str]]:
        """(word, term) of each token of ``text``, in order: as cut, and as stemmed."""
        with self._lock:
            words, stems = (self._tokens(name, [text])[0] for name in ("cut", "stem"))
        assert len(words) == len(stems), "stemming keeps every token's place"
        return list(zip(words, stems, strict=True))

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The stemmed terms of each of ``texts``, in order."""
        split, of = self.cut(texts)
        return [[t for c in chunks for t in of[c]] for chunks in split]

    def cut(self, texts: Sequence[str]) -> tuple[list[list[str]], dict[str, tuple[str, ...]]]:
        """Each of ``texts`` as its whitespace chunks, and the stemmed terms of each chunk."""
        split = [text.split() for text in texts]
        with self._lock:
            known = self._chunks
            every = set(chain.from_iterable(split))
            new = list(every - known.keys())
            if len(known) + len(new) > MAX_CHUNKS:
                known.clear()
                new = list(every)
            for start in range(0, len(new), 1000):
                part = new[start : start + 1000]
                known.update(zip(part, self._tokens("stem", part), strict=True))
            return split, dict(zip(every, map(known.__getitem__, every), strict=True))

    def _tokens(self, table: str, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens of each of ``texts`` through ``table``'s tokenizer, in order."""
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany(
                f"INSERT INTO {table} (rowid, x) VALUES (?, ?)",  # noqa: S608 - a name
                enumerate(texts),
            )
            rows = db.execute(
                f"SELECT doc, term FROM {table}_at ORDER BY doc, offset"  # noqa: S608
            ).fetchall()
        finally:
            db.execute("ROLLBACK")
        out: list[list[str]] = [[] for _ in texts]
        for doc, term in rows:
            out[doc].append(term)
        return [tuple(found) for found in out]


tokenizer = Tokenizer()

# Words as a doc's length counts them (docs/tools/e_timeline.md §find): runs of letters and digits.
_WORD = re.compile(r"[^\W_]+")


def token_count(text: str) -> int:
    return len(_WORD.findall(text))
