"""Search beyond BM25: the embedders of the semantic leg of ``e_timeline find``
(docs/search.md)."""

from node.search.embedders import (
    MAX_RESPONSE,
    Embedder,
    EndpointEmbedder,
    NoEmbedder,
    Vectors,
    WordLlamaEmbedder,
    make_embedder,
    unit_rows,
)

__all__ = [
    "MAX_RESPONSE",
    "Embedder",
    "EndpointEmbedder",
    "NoEmbedder",
    "Vectors",
    "WordLlamaEmbedder",
    "make_embedder",
    "unit_rows",
]
