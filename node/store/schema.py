"""The store's schema and its migrations (docs/architecture.md §Store).

Migrations are numbered; ``schema_version`` records the newest applied.  Opening an older
store applies the missing ones in one transaction; a newer store is refused, never touched.
"""

from __future__ import annotations

import sqlite3

import aiosqlite

from node.errors import StoreVersionError
from node.store.failures import translated

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SEARCH_TOKENIZER", "migrate", "refuse_newer"]

_LOG = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE logs (
    log_id INTEGER PRIMARY KEY,
    writer BLOB NOT NULL,
    epoch BLOB NOT NULL,
    head_seq INTEGER NOT NULL,
    head_id BLOB,
    forked_at INTEGER,
    UNIQUE (writer, epoch)
);
CREATE TABLE headers (
    pos INTEGER PRIMARY KEY,
    id BLOB NOT NULL,
    log_id INTEGER NOT NULL REFERENCES logs(log_id),
    seq INTEGER NOT NULL,
    hlc_wall INTEGER NOT NULL,
    hlc_counter INTEGER NOT NULL,
    kind TEXT NOT NULL,
    applied INTEGER NOT NULL,
    raw BLOB NOT NULL,
    UNIQUE (log_id, seq)
);
CREATE TABLE payloads (pos INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE pending (
    id BLOB PRIMARY KEY,
    writer BLOB NOT NULL,
    epoch BLOB NOT NULL,
    seq INTEGER NOT NULL,
    raw BLOB NOT NULL,
    payload BLOB,
    source TEXT NOT NULL
);
CREATE INDEX pending_log ON pending (writer, epoch, seq);
CREATE TABLE forks (
    writer BLOB NOT NULL,
    epoch BLOB NOT NULL,
    seq INTEGER NOT NULL,
    kept_raw BLOB NOT NULL,
    other_raw BLOB NOT NULL,
    PRIMARY KEY (writer, epoch, seq, other_raw)
) WITHOUT ROWID;
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY,
    event TEXT NOT NULL,
    at INTEGER NOT NULL,
    workspace TEXT,
    subject TEXT,
    principal TEXT,
    entry BLOB,
    detail BLOB
);
CREATE TABLE deletions (
    pos INTEGER PRIMARY KEY,
    sr_id TEXT NOT NULL,
    deleted INTEGER NOT NULL,
    hlc_wall INTEGER NOT NULL,
    hlc_counter INTEGER NOT NULL,
    principal TEXT NOT NULL
);
CREATE INDEX deletions_sr ON deletions (sr_id, hlc_wall, hlc_counter);
CREATE TABLE tokens (
    hash BLOB PRIMARY KEY,
    token_id TEXT NOT NULL UNIQUE,
    principal TEXT NOT NULL,
    workspace TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created INTEGER NOT NULL,
    expires INTEGER,
    revoked INTEGER
) WITHOUT ROWID;
"""

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

# The SR view (node/views/srs.py).  Views are derived from the log: a migration that changes
# them creates empty tables and marks them stale; opening the store then replays the log.
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
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
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
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
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
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
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
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
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
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
"""
assert f"tokenize='{SEARCH_TOKENIZER}'" in _STEMMED, "queries are cut as the index cuts"

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

# What each bundle import brought (node/store/audit.py): per import — the key its
# ``bundle_imported`` event's detail names — the entries with content it stored or filled in,
# by the SR or episode they are about, so the feed shows every reader its own part of one
# event (docs/tools/e_audit.md).
_BUNDLE_SUBJECTS = """
CREATE TABLE bundle_subjects (
    import_key BLOB NOT NULL,
    subject TEXT NOT NULL,
    entries INTEGER NOT NULL,
    PRIMARY KEY (import_key, subject)
) WITHOUT ROWID;
"""

# Every SR version names the node that wrote it (``node_id`` in its state, node/views/fold.py)
# and every result its writers (``caller``, ``node_id``, node/views/shown.py): the views are
# rebuilt from the log, whose headers name each entry's writer.
_SR_WRITERS = """
INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');
"""

# Fork proofs with their key's columns declared first, in the key's order (a WITHOUT ROWID row
# stores its key first).  SQLite 3.40's integrity_check reads a NOT NULL column wrongly when a
# WITHOUT ROWID table's last declared column belongs to the key (``other_raw`` did): it
# reported "NULL value in forks.kept_raw" for every healthy proof.  The rows are copied.
_FORKS_KEY_FIRST = """
CREATE TABLE forks_key_first (
    writer BLOB NOT NULL,
    epoch BLOB NOT NULL,
    seq INTEGER NOT NULL,
    other_raw BLOB NOT NULL,
    kept_raw BLOB NOT NULL,
    PRIMARY KEY (writer, epoch, seq, other_raw)
) WITHOUT ROWID;
INSERT INTO forks_key_first (writer, epoch, seq, other_raw, kept_raw)
    SELECT writer, epoch, seq, other_raw, kept_raw FROM forks;
DROP TABLE forks;
ALTER TABLE forks_key_first RENAME TO forks;
"""

# The pending area's bounds (node/store/pending.py): each row's bytes (header and payload), for
# the byte budget, and when it arrived by this node's wall clock, for the expiry.  Rows that
# waited before are stamped with the migration's moment (SQLite's clock, ms), so they expire
# a full ``pending_expiry`` later.
_PENDING_BOUNDS = """
ALTER TABLE pending ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE pending ADD COLUMN arrived INTEGER NOT NULL DEFAULT 0;
UPDATE pending SET size = length(raw) + coalesce(length(payload), 0),
    arrived = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
CREATE INDEX pending_source ON pending (source, arrived);
CREATE INDEX pending_arrived ON pending (arrived);
"""

# Index i holds the script that takes a store from version i to version i + 1.
MIGRATIONS: tuple[str, ...] = (
    _LOG,
    _INDEXES,
    _SR_VIEW,
    _EPISODE_VIEW,
    _CALL_WINDOWS,
    _EPISODES_BY_CALLER,
    _SR_DOCS,
    _STEMMED,
    _VECTORS,
    _BUNDLE_SUBJECTS,
    _SR_WRITERS,
    _FORKS_KEY_FIRST,
    _PENDING_BOUNDS,
)
SCHEMA_VERSION = len(MIGRATIONS)


async def _version(conn: aiosqlite.Connection) -> int:
    async with conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'"
    ) as cur:
        row = await cur.fetchone()
    if not row or not row[0]:
        return 0
    async with conn.execute("SELECT version FROM schema_version") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def refuse_newer(conn: aiosqlite.Connection) -> int:
    """The store's version; ``StoreVersionError`` if a newer memlane wrote it.  Only reads, so
    it runs before anything (even a journal-mode switch) could touch such a store."""
    found = await _version(conn)
    if found > SCHEMA_VERSION:
        raise StoreVersionError(
            f"the store has schema version {found}, newer than this memlane's "
            f"{SCHEMA_VERSION}; upgrade memlane to open it"
        )
    return found


async def migrate(conn: aiosqlite.Connection, *, upto: int = SCHEMA_VERSION) -> int:
    """Bring the store to ``upto``; return the version found.  Runs in one transaction."""
    found = await refuse_newer(conn)
    if found >= upto:
        return found
    script = "".join(MIGRATIONS[found:upto])
    with translated(f"migrating the store from version {found} failed"):
        try:
            await conn.executescript(f"BEGIN IMMEDIATE;{script}")
            await conn.execute("DELETE FROM schema_version")
            await conn.execute("INSERT INTO schema_version VALUES (?)", (upto,))
            await conn.commit()
        except sqlite3.Error:
            if conn.in_transaction:
                await conn.rollback()
            raise
    return found
