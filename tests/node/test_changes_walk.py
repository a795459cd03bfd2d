"""The walk that finds the SRs touched in a ``changes`` window (node/views/changes.py).

It reads the wall index downwards a batch at a time and merges the window's deletions in, so
the first page does not read the whole window.  Whatever the batch sizes — batches cut inside
a wall, one wall larger than a batch, deletions at the walls of versions — it must hand out
exactly what one query over the whole window gives: each SR with an entry or a deletion in
``(since, as_of]`` once, with its newest, ordered newest first and by sr_id.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from node.store.reader import Reader
from node.views import changes

# The window's touched SRs in one query: what the walk replaced (and must still equal).
_WHOLE_WINDOW = """
SELECT sr_id, max(w) AS changed_at FROM (
    SELECT sr_id, wall AS w FROM sr_versions WHERE wall > :since AND wall <= :as_of
    UNION ALL
    SELECT sr_id, hlc_wall FROM deletions WHERE hlc_wall > :since AND hlc_wall <= :as_of
) GROUP BY sr_id ORDER BY changed_at DESC, sr_id
"""
_TABLES = """
CREATE TABLE sr_versions (sr_id TEXT NOT NULL, ord BLOB NOT NULL, wall INTEGER NOT NULL,
    PRIMARY KEY (sr_id, ord)) WITHOUT ROWID;
CREATE INDEX sr_versions_wall ON sr_versions (wall);
CREATE TABLE deletions (pos INTEGER PRIMARY KEY, sr_id TEXT NOT NULL, deleted INTEGER NOT NULL,
    hlc_wall INTEGER NOT NULL, hlc_counter INTEGER NOT NULL);
CREATE INDEX deletions_sr ON deletions (sr_id, hlc_wall, hlc_counter);
"""

SRS = [f"sr{i}" for i in range(12)]
_entry = st.tuples(st.sampled_from(SRS), st.integers(0, 12))  # (sr_id, wall)


async def _walked(
    path: Path, since: int, as_of: int, takes: list[int], least: int
) -> list[tuple[str, int]]:
    reader = await Reader.open(path)
    try:
        walk = changes._Walk(reader, since, as_of, least=least)
        out: list[tuple[str, int]] = []
        i = 0
        while not walk.done:
            got = await walk.take(takes[i % len(takes)])
            assert len(got) <= takes[i % len(takes)]
            if not got:
                break
            out += got
            i += 1
        return out
    finally:
        await reader.close()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    versions=st.lists(_entry, max_size=40),
    deletions=st.lists(_entry, max_size=8),
    window=st.tuples(st.integers(-1, 12), st.integers(0, 13)).filter(lambda w: w[0] < w[1]),
    first=st.integers(1, 4),
    takes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
)
@example(  # one wall holds more entries than a batch
    versions=[(sr, 5) for sr in SRS] + [("sr0", 3), ("sr1", 7)],
    deletions=[("sr2", 5), ("sr3", 4)],
    window=(0, 10),
    first=1,
    takes=[1],
)
def test_the_walk_equals_one_query_over_the_window(
    tmp_path_factory: pytest.TempPathFactory,
    versions: list[tuple[str, int]],
    deletions: list[tuple[str, int]],
    window: tuple[int, int],
    first: int,
    takes: list[int],
) -> None:
    path = tmp_path_factory.mktemp("walk") / "walk.db"
    with closing(sqlite3.connect(path)) as db:
        db.executescript(_TABLES)
        db.executemany(
            "INSERT OR IGNORE INTO sr_versions (sr_id, ord, wall) VALUES (?, ?, ?)",
            [
                (sr, wall.to_bytes(8, "big") + i.to_bytes(4, "big"), wall)
                for i, (sr, wall) in enumerate(versions)
            ],
        )
        db.executemany(
            "INSERT INTO deletions (sr_id, deleted, hlc_wall, hlc_counter) VALUES (?, 1, ?, 0)",
            deletions,
        )
        db.commit()
        since, as_of = window
        want = [tuple(r) for r in db.execute(_WHOLE_WINDOW, {"since": since, "as_of": as_of})]
    # small batches (``first``): cut walls, whole walls
    assert asyncio.run(_walked(path, since, as_of, takes, first)) == want
