"""A query's terms, cut and stemmed by the search index's own tokenizer (docs/tools/e_timeline.md
§find).

``find`` looks its terms up in the index's vocabulary, so they must be exactly the terms the
index holds: the query is cut by FTS5 itself (``node.views.tokens``).  Stemming does not
change how text is cut, so the unstemmed twin's terms stand beside the stems one for one: the
words a caller sees (``shed_terms``) and the terms that are scored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from node.views.tokens import tokenizer

__all__ = [
    "CONTRACTIONS",
    "MAX_CACHED",
    "STOP_WORDS",
    "QueryTerm",
    "matching_words",
    "query_terms",
]

MAX_CACHED = 4096  # queries whose terms are remembered (agents ask the same words again)


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


# An English contraction's or possessive's ending, after a letter: "Caroline's", "it's",
# "don't", "we're".  The tokenizer cuts at the apostrophe, so the ending would be a term of its
# own — ``s`` is in two of five conversational turns (from "it's", "that's") — and it is
# taken off the query (the index keeps it): on LoCoMo, first-page recall 0.7041 → 0.7054 and
# hit rate 0.7618 → 0.7645 (docs/benchmarks.md §quality).
CONTRACTIONS = re.compile(r"(?<=[^\W\d_])['’](?:s|t|m|d|ll|re|ve)\b", re.IGNORECASE)


@lru_cache(maxsize=MAX_CACHED)
def query_terms(text: str) -> tuple[QueryTerm, ...]:
    """The search terms of ``text`` in order, each stem once (its first word kept): its
    contractions' endings left out, and its stop words unless it holds nothing else."""
    pairs = tokenizer.pairs(CONTRACTIONS.sub("", text))
    kept = [p for p in pairs if p[0] not in STOP_WORDS] or pairs
    seen: dict[str, QueryTerm] = {}
    for word, term in kept:
        seen.setdefault(term, QueryTerm(word, term))
    return tuple(seen.values())


def matching_words(text: str, query: str) -> frozenset[str]:
    """The words of ``text`` (as cut: lower case, diacritics off) that ``query``'s search
    terms match — what a page of find's results highlights."""
    wanted = {t.term for t in query_terms(query)}
    return frozenset(word for word, term in tokenizer.pairs(text) if term in wanted)
