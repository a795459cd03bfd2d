"""Schema migrations (docs/architecture.md §Schema and migrations).

An older store is brought up to ``SCHEMA_VERSION`` when opened, keeping what it holds; a store
written by a newer memlane is refused with ``StoreVersionError`` and not touched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from node.errors import StoreVersionError
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.store import Ingest, Store
from node.store.connection import Connection
from node.store.schema import migrate
from node.views import default_views
from node.views.schema import SEARCH_TOKENIZER
from protocol.clock import Hlc
from tests.node.findref import Stemmer, reference
from tests.node.helpers import ForeignWriter

LATER_TABLES = {"srs", "sr_versions", "episodes", "episode_entries"}  # created by 2 to 4


async def tables(path: Path) -> set[str]:
    async with await Connection.open(path) as conn:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
        return {r[0] for r in await conn.execute_fetchall(sql)}


async def version(path: Path) -> int:
    async with await Connection.open(path) as conn:
        rows = await conn.execute_fetchall("SELECT version FROM schema_version")
    ((value,),) = rows
    return int(value)


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file in ``directory`` (the database and any -wal / -shm beside it), by name."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


async def make_v1(path: Path) -> None:
    async with await Connection.open(path, isolation_level=None) as conn:
        found = await migrate(conn, MIGRATIONS, upto=1)
        assert found == 0
        await conn.execute("INSERT INTO state (key, value) VALUES ('mesh', ?)", (b"m" * 16,))


def test_there_is_something_to_migrate() -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 2


@pytest.mark.asyncio
async def test_a_version_1_store_is_migrated_on_open(tmp_path: Path, wall: Any) -> None:
    path = tmp_path / "memlane.db"
    await make_v1(path)
    assert await version(path) == 1
    assert not LATER_TABLES & await tables(path)

    store = await Store.open(path, wall=wall, views=default_views(), migrations=MIGRATIONS)
    try:
        assert await store.get_state("mesh") == b"m" * 16  # what it held is kept
        # The migrated tables work: a received entry is stored and applied to the SR view.
        foreign = ForeignWriter(b"m" * 16)
        entry = foreign.next()
        assert (await Ingest(store).receive([entry], source="peer")).stored_ids == [entry.id]
        assert store.reader is not None
        assert await store.reader.count("srs") == 1
    finally:
        await store.close()

    assert await version(path) == SCHEMA_VERSION
    assert await tables(path) >= LATER_TABLES

    # Opening a current store again migrates nothing and loses nothing.
    store = await Store.open(path, wall=wall, views=default_views(), migrations=MIGRATIONS)
    try:
        assert store.reader is not None
        assert await store.reader.count("headers") == 1
        assert await store.reader.count("srs") == 1
    finally:
        await store.close()
    assert await version(path) == SCHEMA_VERSION


@pytest.mark.asyncio
async def test_migrate_reports_the_version_it_found(tmp_path: Path) -> None:
    path = tmp_path / "memlane.db"
    await make_v1(path)
    async with await Connection.open(path, isolation_level=None) as conn:
        assert await migrate(conn, MIGRATIONS) == 1
        assert await migrate(conn, MIGRATIONS) == SCHEMA_VERSION
    assert await version(path) == SCHEMA_VERSION


async def bump_version(path: Path, to: int) -> None:
    async with await Connection.open(path, isolation_level=None) as conn:
        await conn.execute("UPDATE schema_version SET version = ?", (to,))


@pytest.mark.asyncio
@pytest.mark.parametrize("journal", ["wal", "delete"])
async def test_a_newer_store_is_refused_and_left_untouched(
    tmp_path: Path, wall: Any, journal: str
) -> None:
    path = tmp_path / "memlane.db"
    store = await Store.open(path, wall=wall, views=default_views(), migrations=MIGRATIONS)
    try:
        await Ingest(store).receive(
            [ForeignWriter(b"m" * 16).next(hlc=Hlc(wall.now, 0))], source="peer"
        )
    finally:
        await store.close()
    await bump_version(path, SCHEMA_VERSION + 1)
    if journal == "delete":  # a newer memlane might not keep the WAL journal
        async with await Connection.open(path, isolation_level=None) as conn:
            await conn.execute("PRAGMA journal_mode=DELETE")
    before = snapshot(tmp_path)
    assert set(before) == {"memlane.db"}

    with pytest.raises(StoreVersionError, match=f"schema version {SCHEMA_VERSION + 1}"):
        await Store.open(path, wall=wall, views=default_views(), migrations=MIGRATIONS)

    assert snapshot(tmp_path) == before


@pytest.mark.asyncio
async def test_a_node_over_a_newer_store_is_refused(node_dir: Path, wall: Any) -> None:
    await bump_version(node_dir / "memlane.db", SCHEMA_VERSION + 1)
    before = snapshot(node_dir)
    with pytest.raises(StoreVersionError):
        async with Node.open(node_dir, wall=wall):
            pytest.fail("a newer store must not open")
    assert snapshot(node_dir) == before


@pytest.mark.asyncio
async def test_episodes_keep_their_rows_when_clustered_by_caller(tmp_path: Path) -> None:
    """The migration that keys episodes by caller copies every row, and (vault, id) stays
    unique."""
    path = tmp_path / "memlane.db"
    before = next(i for i, script in enumerate(MIGRATIONS) if "episodes_clustered" in script)
    rows = [
        (
            f"e{i}",
            bytes([i]),
            i,
            1000 - i,
            "team",
            None,
            f"agent-{i % 3}",
            "api",
            "task",
            None,
            None,
            None,
            "recorded",
            None,
            None,
            None,
            f"s{i}",
            "[]",
            None,
            "eligible",
            i % 2,
            f"e{i - 1}",
            None,
        )
        for i in range(30)
    ]
    async with await Connection.open(path, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=before)
        insert = f"INSERT INTO episodes VALUES ({', '.join('?' * 23)})"
        await conn.call(lambda db: db.executemany(insert, rows))
        await migrate(conn, MIGRATIONS)
        kept = await conn.execute_fetchall("SELECT * FROM episodes")
        other_caller = (*rows[1][:6], "mallory", *rows[1][7:])
        with pytest.raises(sqlite3.IntegrityError):
            await conn.execute(insert, other_caller)
    assert sorted(kept) == sorted(rows)


LOG_TABLES = (
    "state",
    "logs",
    "headers",
    "payloads",
    "pending",
    "forks",
    "audit",
    "deletions",
    "tokens",
)


async def copy_current(conn: Connection, tables: tuple[str, ...]) -> None:
    """Replace the rows of ``tables`` with those of the attached ``cur``, in the columns the
    older store has (later versions add some)."""
    for table in tables:
        names = ", ".join(
            r[1] for r in await conn.execute_fetchall(f"PRAGMA main.table_info({table})")
        )
        await conn.execute(f"DELETE FROM {table}")
        await conn.execute(f"INSERT INTO {table} SELECT {names} FROM cur.{table}")


@pytest.mark.asyncio
async def test_a_version_6_store_answers_the_same_after_its_views_are_rebuilt(
    tmp_path: Path, wall: Any
) -> None:
    """Version 7 keys SR docs by ingest time and stores results as shown: a store of version
    6 (its log; its views in the old layout are dropped) is brought up by replaying its log,
    and answers as the store it was made from."""
    await Node.init(tmp_path / "node", wall=wall)
    asks = [
        {"action": "list"},
        {"action": "find", "query": "alpha"},
        {"action": "intersect", "match": ["red", "blue"]},
        {"action": "list", "page": 2, "page_size": 3, "order_by": "content_time_asc"},
    ]
    async with Node.open(tmp_path / "node", wall=wall) as node:
        issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
        alice = await node.authenticate(issued.token)
        for i in range(12):
            wall.now += 1000
            await node.e_write(
                alice,
                title=f"note {i} alpha" if i % 3 else f"note {i}",
                text="red blue" if i % 2 else "red",
                tags=["blue"] if i % 4 else [],
            )
        newest = (await node.e_timeline(alice, action="list"))["results"][0]["sr_id"]
        await node.e_delete(alice, sr_id=newest)
        before = [await node.e_timeline(alice, **ask) for ask in asks]
    assert [len(b["results"]) for b in before] == [11, 7, 8, 3]
    current = tmp_path / "node" / "memlane.db"
    old = tmp_path / "v6.db"
    async with await Connection.open(old, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=6)
        await conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
        await copy_current(conn, LOG_TABLES)
        await conn.execute("DETACH DATABASE cur")
    for leftover in tmp_path.joinpath("node").glob("memlane.db*"):
        leftover.unlink()
    old.rename(current)
    assert await version(current) == 6
    async with Node.open(tmp_path / "node", wall=wall) as node:
        assert [await node.e_timeline(alice, **ask) for ask in asks] == before
    assert await version(current) == SCHEMA_VERSION


@pytest.mark.asyncio
async def test_a_version_7_store_gets_a_stemmed_search_index_from_its_log(
    tmp_path: Path, wall: Any
) -> None:
    """Version 8 stems the search index: a version 7 store — its views whole, its index
    unstemmed, so ``certificate`` does not find "certificates" — gets the index made again
    from its log when opened, and answers as a store made at version 8."""
    await Node.init(tmp_path / "node", wall=wall)
    asks = [
        {"action": "find", "query": "certificate"},
        {"action": "list"},
        {"action": "find", "query": "renewing certificates"},
        {"action": "intersect", "match": ["certificate"]},
    ]
    async with Node.open(tmp_path / "node", wall=wall) as node:
        issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
        alice = await node.authenticate(issued.token)
        for text in (
            "Renewed the TLS certificates",
            "the certificate expires",
            "unrelated",
            "renew certificates before they expire",
        ):
            wall.now += 1000
            await node.e_write(alice, title="note", text=text)
        before = [await node.e_timeline(alice, **ask) for ask in asks]
    assert [len(b["results"]) for b in before] == [3, 4, 3, 3]
    current, old = tmp_path / "node" / "memlane.db", tmp_path / "v7.db"
    async with await Connection.open(old, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=7)
        await conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
        await copy_current(conn, (*LOG_TABLES, "sr_versions", "srs", "sr_tags", "sr_links"))
        await conn.execute("DETACH DATABASE cur")
        await conn.execute(
            "INSERT INTO sr_fts (rowid, title, text, tags) "
            "SELECT doc, title, text, tags_text FROM srs WHERE live = 1"
        )
        await conn.execute("DELETE FROM state WHERE key = 'views_stale'")
        matches = "SELECT count(*) FROM sr_fts WHERE sr_fts MATCH ?"
        assert [
            ((await conn.execute_fetchall(matches, (w,))) or [(0,)])[0][0]
            for w in ("certificate", "certificates")
        ] == [1, 2]
    for leftover in tmp_path.joinpath("node").glob("memlane.db*"):
        leftover.unlink()
    old.rename(current)
    async with Node.open(tmp_path / "node", wall=wall) as node:
        assert [await node.e_timeline(alice, **ask) for ask in asks] == before
    assert await version(current) == SCHEMA_VERSION
    async with await Connection.open(current) as conn:
        found = await conn.execute_fetchall("SELECT sql FROM sqlite_master WHERE name = 'sr_fts'")
    sql = found[0] if found else None
    assert sql is not None
    assert f"tokenize='{SEARCH_TOKENIZER}'" in sql[0]


@pytest.mark.asyncio
async def test_a_version_15_store_gets_its_text_index_from_its_log(
    tmp_path: Path, wall: Any
) -> None:
    """Version 16 adds the text index find reads: a version 15 store (its log; FTS5 and its
    vocabulary table, no index) gets the index made from its log when opened, and answers by
    the new rule — field weights, contractions — as a store made at version 16."""
    await Node.init(tmp_path / "node", wall=wall)
    asks = [
        {"action": "find", "query": "gateway"},
        {"action": "find", "query": "What is Caroline's gateway?"},
        {"action": "find", "query": "ops notes", "page_size": 2, "page": 2},
    ]
    async with Node.open(tmp_path / "node", wall=wall) as node:
        issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
        alice = await node.authenticate(issued.token)
        for title, text, tags in (
            ("Gateway", "the edge of the network", ["service"]),
            ("Gateway 5xx alert", "the gateway answered 502", ["alert"]),
            ("ops notes", "Caroline restarted the gateway", ["ops"]),
            ("ops notes", "it's quiet", []),
            ("lunch", "nothing about it", ["notes"]),
        ):
            wall.now += 1000
            await node.e_write(alice, title=title, text=text, tags=tags)
        before = [await node.e_timeline(alice, **ask) for ask in asks]
    assert [len(b["results"]) for b in before] == [3, 3, 1]
    current, old = tmp_path / "node" / "memlane.db", tmp_path / "v15.db"
    async with await Connection.open(old, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=15)
        await conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
        await copy_current(conn, LOG_TABLES)
        await conn.execute("DETACH DATABASE cur")
        assert "sr_vocab" in {r[0] for r in await conn.execute_fetchall(_TABLES)}
    for leftover in tmp_path.joinpath("node").glob("memlane.db*"):
        leftover.unlink()
    old.rename(current)
    async with Node.open(tmp_path / "node", wall=wall) as node:
        assert [await node.e_timeline(alice, **ask) for ask in asks] == before
        stem = Stemmer()
        for ask, answer in zip(asks, before, strict=True):
            expected = reference(tmp_path / "node", alice, ask, stem)
            assert [(r["sr_id"], r["rank"], r["score"]) for r in answer["results"]] == (
                expected.results
            )
    assert await version(current) == SCHEMA_VERSION
    assert "sr_vocab" not in await tables(current)
    assert "sr_segments" in await tables(current)


_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


@pytest.mark.asyncio
async def test_a_store_with_a_fork_proof_migrates_and_checks_clean(tmp_path: Path) -> None:
    """The migration that declares the fork proofs' key first copies every proof, and the
    store then answers ``ok`` to ``PRAGMA integrity_check``."""
    path = tmp_path / "memlane.db"
    before = next(i for i, script in enumerate(MIGRATIONS) if "forks_key_first" in script)
    proofs = [(b"w" * 32, b"e" * 16, seq, b"kept-%d" % seq, b"other-%d" % seq) for seq in (3, 9)]
    async with await Connection.open(path, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=before)
        insert = (
            "INSERT INTO forks (writer, epoch, seq, kept_raw, other_raw) VALUES (?, ?, ?, ?, ?)"
        )
        await conn.call(lambda db: db.executemany(insert, proofs))
        assert await migrate(conn, MIGRATIONS) == before
        kept = await conn.execute_fetchall(
            "SELECT writer, epoch, seq, kept_raw, other_raw FROM forks ORDER BY seq"
        )
        checked = await conn.execute_fetchall("PRAGMA integrity_check")
    assert [tuple(r) for r in kept] == proofs
    assert [tuple(r) for r in checked] == [("ok",)]
