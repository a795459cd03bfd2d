"""Search beyond BM25: the embedders of the semantic leg of ``e_timeline find``, the vector
index and its vectors in memory (docs/search.md).  Nothing is imported here: the embedders load
numpy, which a node without one never needs."""
