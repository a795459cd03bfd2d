"""The store's schema: the log's tables, and the migrations a store is brought through
(docs/architecture.md §Schema and migrations).

Every table has one owner, which writes its statements (docs/architecture.md §Table owners):
the log's are here (``LOG_STEPS``), the views', the search index's and the tokens' in their own
packages.  Whoever opens the store composes them (``compose``, ``node.schema.MIGRATIONS``) and
hands the store the steps: index i takes a store from version i to version i + 1, and
``schema_version`` records the newest applied.  Opening an older store applies the missing
steps in one transaction; a newer store is refused, never touched.  The steps are history:
a new version adds a step, and no step's statements change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from node.errors import StoreVersionError
from node.store.connection import Connection, translated
from node.store.erasure import ERASE_STEP
from node.store.partial import PARTIAL_STEP

__all__ = ["LOG_STEPS", "VIEWS_STALE", "compose", "migrate", "refuse_newer"]

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

# Views are derived from the log: a step that changes them ends by marking them stale, and
# opening the store then replays the log (``Store.rebuild_views``).
VIEWS_STALE = "INSERT OR REPLACE INTO state (key, value) VALUES ('views_stale', x'01');\n"

# The log's statements, by the version whose step they belong to.
LOG_STEPS: Mapping[int, str] = {
    1: _LOG,
    10: _BUNDLE_SUBJECTS,
    12: _FORKS_KEY_FIRST,
    13: _PENDING_BOUNDS,
    14: ERASE_STEP,
    15: PARTIAL_STEP,
}


def compose(*owners: Mapping[int, str]) -> tuple[str, ...]:
    """The migrations: each version's step is its owners' statements, in the order given."""
    newest = max(version for owner in owners for version in owner)
    steps = tuple(
        "".join(owner.get(version, "") for owner in owners) for version in range(1, newest + 1)
    )
    assert all(steps), "every version has a step"
    return steps


async def _version(conn: Connection) -> int:
    rows = await conn.execute_fetchall(
        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'"
    )
    if not rows or not rows[0][0]:
        return 0
    rows = await conn.execute_fetchall("SELECT version FROM schema_version")
    return int(rows[0][0]) if rows else 0


async def refuse_newer(conn: Connection, newest: int) -> int:
    """The store's version; ``StoreVersionError`` if it is past ``newest``, this memlane's (a
    newer memlane wrote it).  Only reads, so it runs before anything (even a journal-mode
    switch) could touch such a store."""
    found = await _version(conn)
    if found > newest:
        raise StoreVersionError(
            f"the store has schema version {found}, newer than this memlane's "
            f"{newest}; upgrade memlane to open it"
        )
    return found


async def migrate(conn: Connection, steps: Sequence[str], *, upto: int | None = None) -> int:
    """Bring the store through ``steps`` to ``upto`` (default: the last); return the version
    found.  Runs in one transaction."""
    upto = len(steps) if upto is None else upto
    found = await refuse_newer(conn, len(steps))
    if found >= upto:
        return found
    script = "".join(steps[found:upto])

    def run(db: sqlite3.Connection) -> None:
        try:
            db.executescript(f"BEGIN IMMEDIATE;{script}")
            db.execute("DELETE FROM schema_version")
            db.execute("INSERT INTO schema_version VALUES (?)", (upto,))
            db.commit()
        except sqlite3.Error:
            if db.in_transaction:
                db.rollback()
            raise

    with translated(f"migrating the store from version {found} failed"):
        await conn.call(run)
    return found
