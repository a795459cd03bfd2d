"""The vector index's tables (docs/search.md §The vector index and fusion): their statements in
the step of the store's migrations that made them, which ``node.schema`` composes with the other
owners'.  The triggers that keep the queue are on the SR view's ``srs``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["INDEX_STEPS"]

# The vector index of the semantic leg (node/search/index.py): derived from the SR view, never
# in the log or a bundle, rebuilt when the embedder's model changes.  ``sr_vector_model``
# names the model the vectors are of (no row: no embedder, and nothing is queued);
# ``sr_vectors`` holds each SR's vector (int8, round(127 · unit vector)) with the digest of the
# text it was made from and the doc it was made for; ``sr_embed_queue`` lists the docs whose
# SR was written or moved since — kept by triggers while a model is named.
_VECTORS = """
CREATE TABLE sr_vector_model (model TEXT NOT NULL);
CREATE TABLE sr_vectors (
    sr_id TEXT PRIMARY KEY,
    doc INTEGER NOT NULL,
    digest BLOB NOT NULL,
    vec BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE sr_embed_queue (doc INTEGER PRIMARY KEY);
CREATE TRIGGER srs_embed_insert AFTER INSERT ON srs
WHEN NEW.live AND EXISTS (SELECT 1 FROM sr_vector_model) BEGIN
    INSERT INTO sr_embed_queue (doc) VALUES (NEW.doc) ON CONFLICT DO NOTHING;
END;
CREATE TRIGGER srs_embed_update AFTER UPDATE ON srs
WHEN NEW.live AND (NOT OLD.live OR NEW.doc != OLD.doc OR NEW.title IS NOT OLD.title
    OR NEW.text IS NOT OLD.text OR NEW.tags_text IS NOT OLD.tags_text)
    AND EXISTS (SELECT 1 FROM sr_vector_model) BEGIN
    INSERT INTO sr_embed_queue (doc) VALUES (NEW.doc) ON CONFLICT DO NOTHING;
END;
"""

# An erased SR's vector goes with it (docs/erasure.md): its ``srs`` row is withdrawn, then
# deleted.  A row deleted while shown is a rebuild emptying the view: its vector is kept, to
# be found again by its digest.
_ERASED_VECTORS = """
CREATE TRIGGER srs_vector_erased AFTER DELETE ON srs WHEN NOT OLD.live BEGIN
    DELETE FROM sr_vectors WHERE sr_id = OLD.sr_id;
END;
"""

# The index's statements, by the version whose step they belong to.
INDEX_STEPS: Mapping[int, str] = {9: _VECTORS, 14: _ERASED_VECTORS}
