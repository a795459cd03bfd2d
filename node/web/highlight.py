"""Find's matched terms marked in a result's text: the text escaped, each word a query term
matches (by the search index's own stemming, ``matching_words``) wrapped in ``<mark>``."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from node.views.query_terms import matching_words

__all__ = ["highlighted"]


def highlighted(text: str, query: str) -> Markup:
    """``text`` as safe markup, the words ``query`` matches marked (letter case aside)."""
    words = matching_words(text, query) if text and query else frozenset()
    if not words:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words))) + r")\b", re.I)
    out, at = [], 0
    for m in pattern.finditer(text):
        out += [
            escape(text[at : m.start()]),
            Markup("<mark>"),
            escape(m.group(0)),
            Markup("</mark>"),
        ]
        at = m.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)
