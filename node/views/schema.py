"""The views' tables (docs/architecture.md §Table owners): their statements in each version's
step of the store's migrations, which ``node.schema`` composes with the other owners'.

Views are derived from the log: a step that changes them creates empty tables and ends by
marking them stale (``VIEWS_STALE``, the store's statement); opening the store then replays
the log.
"""

from __future__ import annotations

from collections.abc import Mapping

from node.store.schema import VIEWS_STALE

__all__ = ["SEARCH_TOKENIZER", "VIEW_STEPS"]

# The local deletions of SRs (node/views/srs.py), stamped with this node's HLC.
_DELETIONS = """\
CREATE TABLE deletions (
    pos INTEGER PRIMARY KEY,
    sr_id TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    hlc_wall INTEGER NOT NULL,
    hlc_counter INTEGER NOT NULL,
    principal TEXT NOT NULL
);
CREATE INDEX deletions_sr ON deletions (sr_id, hlc_wall, hlc_counter);
"""

# The first indexes of SRs and episodes, which the SR and episode views replace.
_INDEXES = """
CREATE TABLE sr_index (
    sr_id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    pos INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE episode_index (
    id TEXT PRIMARY KEY,
    vault TEXT NOT NULL,
    caller TEXT NOT NULL,
    pos INTEGER NOT NULL,
    hlc_wall INTEGER NOT NULL,
    hlc_counter INTEGER NOT NULL,
    forgotten INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX episode_caller ON episode_index (caller, vault, hlc_wall, hlc_counter);
CREATE TABLE forgotten (id TEXT PRIMARY KEY) WITHOUT ROWID;
"""

# The SR view (node/views/srs.py).
_SR_VIEW = """
DROP TABLE sr_index;
CREATE TABLE sr_versions (
    sr_id TEXT NOT NULL,
    ord BLOB NOT NULL,
    pos INTEGER NOT NULL,
    wall INTEGER NOT NULL,
    state BLOB NOT NULL,
    present INTEGER NOT NULL,
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    private INTEGER NOT NULL,
    full_digest BLOB NOT NULL,
    public_digest BLOB NOT NULL,
    links_digest BLOB NOT NULL,
    PRIMARY KEY (sr_id, ord)
) WITHOUT ROWID;
CREATE INDEX sr_versions_wall ON sr_versions (wall);
CREATE INDEX sr_versions_pos ON sr_versions (pos);
CREATE TABLE srs (
    doc INTEGER PRIMARY KEY,
    sr_id TEXT NOT NULL UNIQUE,
    live INTEGER NOT NULL,
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    private INTEGER NOT NULL,
    lane TEXT NOT NULL,
    conversational INTEGER NOT NULL,
    title TEXT NOT NULL,
    text TEXT NOT NULL,
    tags_text TEXT NOT NULL,
    ingest_time INTEGER,
    content_time INTEGER,
    created_time INTEGER,
    deleted INTEGER NOT NULL DEFAULT 0,
    doclen INTEGER NOT NULL DEFAULT 0,
    state BLOB NOT NULL
);
CREATE INDEX srs_by_ingest ON srs (workspace, ingest_time, sr_id) WHERE live = 1;
CREATE INDEX srs_by_content ON srs (workspace, content_time, sr_id) WHERE live = 1;
CREATE TABLE sr_tags (tag TEXT NOT NULL, sr_id TEXT NOT NULL, PRIMARY KEY (tag, sr_id))
    WITHOUT ROWID;
CREATE INDEX sr_tags_sr ON sr_tags (sr_id);
CREATE TABLE sr_links (src TEXT NOT NULL, dst TEXT NOT NULL, PRIMARY KEY (src, dst))
    WITHOUT ROWID;
CREATE INDEX sr_links_dst ON sr_links (dst, src);
CREATE VIRTUAL TABLE sr_fts USING fts5 (title, text, tags, content='');
CREATE VIRTUAL TABLE sr_vocab USING fts5vocab (sr_fts, instance);
-- Search statistics per reader scope (public, or one owner's private SRs), kept by triggers so
-- BM25 can use the document count and lengths of exactly what a caller may read.
CREATE TABLE sr_stats (
    workspace TEXT NOT NULL,
    private INTEGER NOT NULL,
    owner TEXT NOT NULL,
    docs INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (workspace, private, owner)
) WITHOUT ROWID;
CREATE TRIGGER srs_stats_insert AFTER INSERT ON srs WHEN NEW.live AND NOT NEW.deleted BEGIN
    INSERT INTO sr_stats SELECT NEW.workspace, NEW.private,
        CASE WHEN NEW.private THEN NEW.owner ELSE '' END, 1, NEW.doclen WHERE 1
    ON CONFLICT DO UPDATE SET docs = docs + 1, length = length + excluded.length;
END;
CREATE TRIGGER srs_stats_delete AFTER DELETE ON srs WHEN OLD.live AND NOT OLD.deleted BEGIN
    UPDATE sr_stats SET docs = docs - 1, length = length - OLD.doclen
    WHERE workspace = OLD.workspace AND private = OLD.private
      AND owner = CASE WHEN OLD.private THEN OLD.owner ELSE '' END;
END;
CREATE TRIGGER srs_stats_update AFTER UPDATE ON srs BEGIN
    UPDATE sr_stats SET docs = docs - 1, length = length - OLD.doclen
    WHERE OLD.live AND NOT OLD.deleted AND workspace = OLD.workspace
      AND private = OLD.private AND owner = CASE WHEN OLD.private THEN OLD.owner ELSE '' END;
    INSERT INTO sr_stats SELECT NEW.workspace, NEW.private,
        CASE WHEN NEW.private THEN NEW.owner ELSE '' END, 1, NEW.doclen
        WHERE NEW.live AND NOT NEW.deleted
    ON CONFLICT DO UPDATE SET docs = docs + 1, length = length + excluded.length;
END;
CREATE TABLE sr_due (wall INTEGER NOT NULL, sr_id TEXT NOT NULL, PRIMARY KEY (wall, sr_id))
    WITHOUT ROWID;
-- changes walks a window's local deletions by their stamp.
CREATE INDEX deletions_wall ON deletions (hlc_wall);
"""

# The episode view (node/views/episodes.py): every episode entry with the later-known fields it
# sets, and each episode's state at this node's moment.
_EPISODE_VIEW = """
DROP TABLE episode_index;
DROP TABLE forgotten;
CREATE TABLE episode_entries (
    id TEXT NOT NULL,
    ord BLOB NOT NULL,
    pos INTEGER NOT NULL,
    wall INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    vault TEXT NOT NULL,
    fields TEXT NOT NULL,
    PRIMARY KEY (id, ord)
) WITHOUT ROWID;
CREATE INDEX episode_entries_pos ON episode_entries (pos);
CREATE TABLE episodes (
    id TEXT NOT NULL,
    ord BLOB NOT NULL,
    pos INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    vault TEXT NOT NULL,
    session_id TEXT,
    caller TEXT NOT NULL,
    channel TEXT NOT NULL,
    episode_type TEXT NOT NULL,
    task_result,
    verdict_at INTEGER,
    tool TEXT,
    status TEXT NOT NULL,
    error_code TEXT,
    duration_ms INTEGER,
    result_size INTEGER,
    summary TEXT,
    tags TEXT NOT NULL,
    trust,
    eligibility TEXT NOT NULL,
    blocked INTEGER NOT NULL,
    prev_id TEXT,
    expires_at INTEGER,
    PRIMARY KEY (vault, id)
) WITHOUT ROWID;
CREATE INDEX episodes_by_caller ON episodes (vault, caller, ts, ord);
CREATE INDEX episodes_by_vault ON episodes (vault, ts, ord);
CREATE TABLE episode_due (
    wall INTEGER NOT NULL,
    vault TEXT NOT NULL,
    id TEXT NOT NULL,
    PRIMARY KEY (wall, vault, id)
) WITHOUT ROWID;
"""

# The call-window view (docs/time-windows.md): every CallWindowRow filed, in fold order per call.
_CALL_WINDOWS = """
CREATE TABLE call_windows (
    pos INTEGER PRIMARY KEY,
    ord BLOB NOT NULL,
    wall INTEGER NOT NULL,
    workspace TEXT NOT NULL,
    principal TEXT NOT NULL,
    tool TEXT NOT NULL,
    turn INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    row TEXT NOT NULL
);
CREATE INDEX call_windows_by_principal ON call_windows (workspace, principal, ord);
CREATE INDEX call_windows_by_workspace ON call_windows (workspace, ord);
"""

# Episodes clustered by caller (node/views/episode_reads.py): a caller's episodes in time order
# share pages, so a chain walk reads a few contiguous pages, not one page a hop.  The rows are
# copied in the new key's order; (vault, id) stays unique through its own index, and the key
# serves what episodes_by_caller did (dropped with the old table).
_EPISODES_BY_CALLER = """
CREATE TABLE episodes_clustered (
    id TEXT NOT NULL,
    ord BLOB NOT NULL,
    pos INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    vault TEXT NOT NULL,
    session_id TEXT,
    caller TEXT NOT NULL,
    channel TEXT NOT NULL,
    episode_type TEXT NOT NULL,
    task_result,
    verdict_at INTEGER,
    tool TEXT,
    status TEXT NOT NULL,
    error_code TEXT,
    duration_ms INTEGER,
    result_size INTEGER,
    summary TEXT,
    tags TEXT NOT NULL,
    trust,
    eligibility TEXT NOT NULL,
    blocked INTEGER NOT NULL,
    prev_id TEXT,
    expires_at INTEGER,
    PRIMARY KEY (vault, caller, ts, ord, id)
) WITHOUT ROWID;
INSERT INTO episodes_clustered
    SELECT id, ord, pos, ts, vault, session_id, caller, channel, episode_type, task_result,
        verdict_at, tool, status, error_code, duration_ms, result_size, summary, tags, trust,
        eligibility, blocked, prev_id, expires_at
    FROM episodes ORDER BY vault, caller, ts, ord, id;
DROP TABLE episodes;
ALTER TABLE episodes_clustered RENAME TO episodes;
CREATE UNIQUE INDEX episodes_by_id ON episodes (vault, id);
CREATE INDEX episodes_by_vault ON episodes (vault, ts, ord);
"""

# SR docs keyed by their ingest time (node/views/srs.py ``DOC_SLOTS``), so the search index's
# rowids run in time order: intersect reads its newest matches straight from the index.  A
# narrow row per readable SR (``sr_docs``, kept by triggers) gives find the read rule and
# length of each posting without a wide ``srs`` row per doc.  ``srs`` keeps each SR as
# e_timeline shows it (``shown``, node/views/shown.py) rather than its state (which
# ``sr_versions`` holds).  Views are rebuilt from the log.
_SR_DOCS = """
DELETE FROM srs;
ALTER TABLE srs RENAME COLUMN state TO shown;
DELETE FROM sr_stats;
INSERT INTO sr_fts (sr_fts) VALUES ('delete-all');
CREATE TABLE sr_docs (
    doc INTEGER PRIMARY KEY,
    live INTEGER NOT NULL DEFAULT 1,
    deleted INTEGER NOT NULL DEFAULT 0,
    workspace TEXT NOT NULL,
    owner TEXT NOT NULL,
    private INTEGER NOT NULL,
    conversational INTEGER NOT NULL,
    lane TEXT NOT NULL,
    doclen INTEGER NOT NULL
);
CREATE TRIGGER sr_docs_insert AFTER INSERT ON srs WHEN NEW.live AND NOT NEW.deleted BEGIN
    INSERT INTO sr_docs (doc, workspace, owner, private, conversational, lane, doclen)
    VALUES (NEW.doc, NEW.workspace, NEW.owner, NEW.private, NEW.conversational, NEW.lane,
            NEW.doclen);
END;
CREATE TRIGGER sr_docs_delete AFTER DELETE ON srs BEGIN
    DELETE FROM sr_docs WHERE doc = OLD.doc;
END;
CREATE TRIGGER sr_docs_update AFTER UPDATE ON srs BEGIN
    DELETE FROM sr_docs WHERE doc = OLD.doc;
    INSERT INTO sr_docs (doc, workspace, owner, private, conversational, lane, doclen)
    SELECT NEW.doc, NEW.workspace, NEW.owner, NEW.private, NEW.conversational, NEW.lane,
           NEW.doclen
    WHERE NEW.live AND NOT NEW.deleted;
END;
"""

# The search index's tokenizer: English (Porter) stems of unicode61's tokens, diacritics off.
# Queries are cut and stemmed by the same tokenizer (node/views/query_terms.py), so a query's
# terms are the terms the index holds.
SEARCH_TOKENIZER = "porter unicode61 remove_diacritics 2"

# The search index stems its terms (``certificate`` finds "certificates"): it is made again
# with the stemming tokenizer, and the views are rebuilt from the log.
_STEMMED = """
DROP TABLE sr_vocab;
DROP TABLE sr_fts;
CREATE VIRTUAL TABLE sr_fts USING fts5 (title, text, tags, content='',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE sr_vocab USING fts5vocab (sr_fts, instance);
"""
assert f"tokenize='{SEARCH_TOKENIZER}'" in _STEMMED, "queries are cut as the index cuts"

# The text index find reads (node/views/search_index.py): segments of postings kept with the
# rows they index.  The vocabulary table over FTS5 goes (FTS5 stays for intersect's phrases).
# Triggers on ``sr_docs`` queue each doc that enters or leaves it; one on ``srs`` notes each SR
# erased (its row deleted while withdrawn).  The views are rebuilt from the log.
_TEXT_INDEX = """
DROP TABLE sr_vocab;
CREATE TABLE sr_terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE sr_scopes (
    id INTEGER PRIMARY KEY,
    workspace TEXT NOT NULL,
    private INTEGER NOT NULL,
    owner TEXT NOT NULL,
    UNIQUE (workspace, private, owner)
);
CREATE TABLE sr_lanes (id INTEGER PRIMARY KEY, lane TEXT NOT NULL UNIQUE);
CREATE TABLE sr_segments (
    seg INTEGER PRIMARY KEY AUTOINCREMENT,
    slots INTEGER NOT NULL,
    live INTEGER NOT NULL,
    version INTEGER NOT NULL,
    docs BLOB NOT NULL,
    gone BLOB NOT NULL,
    postings BLOB
);
CREATE TABLE sr_postings (
    seg INTEGER NOT NULL,
    term INTEGER NOT NULL,
    list BLOB NOT NULL,
    PRIMARY KEY (seg, term)
) WITHOUT ROWID;
CREATE TABLE sr_index_docs (doc INTEGER PRIMARY KEY, seg INTEGER NOT NULL, slot INTEGER NOT NULL);
CREATE TABLE sr_index_queue (doc INTEGER PRIMARY KEY);
CREATE TABLE sr_index_erased (sr_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TRIGGER sr_docs_entered AFTER INSERT ON sr_docs BEGIN
    INSERT INTO sr_index_queue (doc) VALUES (NEW.doc) ON CONFLICT DO NOTHING;
END;
CREATE TRIGGER sr_docs_left AFTER DELETE ON sr_docs BEGIN
    INSERT INTO sr_index_queue (doc) VALUES (OLD.doc) ON CONFLICT DO NOTHING;
END;
CREATE TRIGGER srs_index_erased AFTER DELETE ON srs WHEN NOT OLD.live BEGIN
    INSERT INTO sr_index_erased (sr_id) VALUES (OLD.sr_id) ON CONFLICT DO NOTHING;
END;
"""

# LangGraph store items (node/views/items.py, docs/langgraph.md): one row per item shown at this
# moment, found by (workspace, namespace, key) — an exact get — and by a namespace prefix, a
# range of the same index (labels are joined by '.', which no label holds); the newest first
# by the fold order of their versions.  A deleted item (a tombstone version) is withdrawn from
# the SR view: the views are rebuilt from the log.
_STORE_ITEMS = """
CREATE TABLE store_items (
    sr_id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_ord BLOB NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX store_items_by_key ON store_items (workspace, namespace, key);
CREATE INDEX store_items_by_update ON store_items (workspace, updated_ord);
"""

# A namespace prefix's items by namespace and the fold order of their versions: the ids of a
# prefix's range, newest first, read from the index alone, sorted, before any of their rows is
# (node/views/item_reads.py).
_STORE_ITEMS_BY_NAMESPACE = """
CREATE INDEX store_items_by_namespace ON store_items (workspace, namespace, updated_ord);
"""

# The views' statements, by the version whose step they belong to; a step that changes a view
# ends by marking the views stale.
VIEW_STEPS: Mapping[int, str] = {
    1: _DELETIONS,
    2: _INDEXES,
    3: _SR_VIEW + VIEWS_STALE,
    4: _EPISODE_VIEW + VIEWS_STALE,
    5: _CALL_WINDOWS + VIEWS_STALE,
    6: _EPISODES_BY_CALLER,
    7: _SR_DOCS + VIEWS_STALE,
    8: _STEMMED + VIEWS_STALE,
    # Every SR version names the node that wrote it (``node_id`` in its state,
    # node/views/fold.py) and every result its writers (``caller``, ``node_id``,
    # node/views/shown.py): the views are rebuilt from the log, whose headers name each
    # entry's writer.
    11: "\n" + VIEWS_STALE,
    16: _TEXT_INDEX + VIEWS_STALE,
    17: _STORE_ITEMS + VIEWS_STALE,
    18: _STORE_ITEMS_BY_NAMESPACE,
}
