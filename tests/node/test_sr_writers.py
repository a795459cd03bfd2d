"""Who wrote an SR (docs/tools/e_timeline.md §Results): every result, and every change of
``changes``, names the SR's ``caller`` — the principal that created it, its owner — and the
``node_id`` of the node that wrote its current version (the entry its ``ingest_time`` is
from).  Both come from the SR's own entries, so two nodes holding the same entries name the
same writers, never themselves; an entry the fold ignores names nobody; a version whose time
has not come names nobody yet; and a store made before the fields existed gets them from its
log."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import msgpack
import pytest

from node.access.callers import Caller
from node.identity import node_id
from node.node import Node
from protocol.clock import Hlc
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, sr_payload
from tests.node.synckit import make_mesh

# The version schema 11 (the views rebuilt so SR versions name their writers) migrates from.
BEFORE_SR_WRITERS = 10
READS = (
    {"action": "list"},
    {"action": "find", "query": "backup"},
    {"action": "intersect", "match": ["ops"]},
)


def _writers(answer: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {r["sr_id"]: (r["caller"], r["node_id"]) for r in answer["results"]}


async def _changes(node: Node, caller: Caller, **args: Any) -> dict[str, tuple[str, str]]:
    answer = await node.e_timeline(caller, action="changes", since="2020-01-01", **args)
    return {c["sr_id"]: (c["caller"], c["node_id"]) for c in answer["changes"]}


@pytest.mark.asyncio
async def test_a_result_names_its_owner_and_the_node_of_its_latest_version(
    node: Node, make_caller: CallerFactory, foreign: ForeignWriter, wall: Wall
) -> None:
    alice, bob = await make_caller("alice"), await make_caller("bob")
    here, there = node.info.node_id, node_id(foreign.key.public)
    mine = await node.e_write(alice, title="backup plan", text="nightly backup", tags=["ops"])
    wall.now += 10
    await node.e_write(bob, sr_id=mine["sr_id"], text="the nightly backup, at two")
    theirs = "00000000-0000-7000-8000-000000000001"
    await node.receive(
        [foreign.next(payload=sr_payload(theirs, title="backup", tags=["ops"]))], source="peer"
    )
    expected = {mine["sr_id"]: ("alice", here), theirs: ("remote", there)}
    for args in READS:
        assert _writers(await node.e_timeline(bob, **args)) == expected, args
    linked = await node.e_write(alice, title="see also", links=[theirs])
    traversed = await node.e_timeline(bob, action="traverse", sr_id=theirs)
    assert _writers(traversed) == {linked["sr_id"]: ("alice", here)}
    assert await _changes(node, bob) == expected | {linked["sr_id"]: ("alice", here)}

    # A foreign update of alice's SR: its current version is the foreign node's; the owner
    # stays alice.  changes names the writer of the version at as_of.
    before = (await node.e_timeline(bob, action="list"))["results"][0]["ingest_time"]
    foreign.wall, wall.now = wall.now + 100, wall.now + 200
    update = sr_payload(mine["sr_id"], principal="carol", create=False, text="moved to three")
    await node.receive([foreign.next(payload=update)], source="peer")
    listed = _writers(await node.e_timeline(bob, action="list"))
    assert listed[mine["sr_id"]] == ("alice", there)
    assert (await _changes(node, bob, as_of=before))[mine["sr_id"]] == ("alice", here)
    assert (await _changes(node, bob))[mine["sr_id"]] == ("alice", there)


@pytest.mark.asyncio
async def test_an_entry_the_fold_ignores_names_nobody(
    node: Node, make_caller: CallerFactory, foreign: ForeignWriter
) -> None:
    """An entry naming another workspace than the SR's changes nothing of it
    (docs/tools/e_timeline.md §Results): not its writer either, or a writer of another
    workspace would show in this one."""
    alice = await make_caller("alice")
    sr = await node.e_write(alice, title="ours", tags=["ops"])
    stray = sr_payload(sr["sr_id"], workspace="other", create=False, title="theirs")
    await node.receive([foreign.next(payload=stray)], source="peer")
    answer = await node.e_timeline(alice, action="list")
    assert _writers(answer) == {sr["sr_id"]: ("alice", node.info.node_id)}
    assert answer["results"][0]["title"] == "ours"


@pytest.mark.asyncio
async def test_a_version_whose_time_has_not_come_names_nobody_yet(
    node: Node, make_caller: CallerFactory, foreign: ForeignWriter, wall: Wall
) -> None:
    alice = await make_caller("alice")
    sr = await node.e_write(alice, title="ours")
    ahead = wall.now + 3_600_000  # beyond max_clock_skew: shown when its time comes
    update = sr_payload(sr["sr_id"], create=False, title="from the future")
    await node.receive([foreign.next(payload=update, hlc=Hlc(ahead, 0))], source="peer")
    assert _writers(await node.e_timeline(alice, action="list")) == {
        sr["sr_id"]: ("alice", node.info.node_id)
    }
    wall.now = ahead + 1
    assert _writers(await node.e_timeline(alice, action="list")) == {
        sr["sr_id"]: ("alice", node_id(foreign.key.public))
    }


async def _token(data: Path, wall: Wall, principal: str) -> str:
    async with Node.open(data, wall=wall) as node:
        scopes = ("read:workspace", "write:workspace")
        return (await node.create_token(principal, "team", scopes)).token


async def _carry(source: Path, target: Path, wall: Wall, bundle: Path) -> None:
    """Every entry of ``source`` into ``target``, by a bundle (a new file)."""
    async with Node.open(source, wall=wall) as node:
        await node.export_bundle(bundle)
    async with Node.open(target, wall=wall) as node:
        await node.import_bundle(bundle)


@pytest.mark.asyncio
async def test_two_nodes_with_the_same_entries_name_the_same_writers(
    tmp_path: Path, wall: Wall
) -> None:
    foreign = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["a", "b"], wall, [foreign])
    tokens = {n: await _token(dirs[n], wall, p) for n, p in (("a", "alice"), ("b", "bob"))}
    ids: dict[str, str] = {}
    async with Node.open(dirs["a"], wall=wall) as a:
        ids["a"] = a.info.node_id
        alice = await a.authenticate(tokens["a"])
        first = await a.e_write(alice, title="backup plan", text="nightly backup", tags=["ops"])
        wall.now += 10
        second = await a.e_write(
            alice, title="rota", text="backup rota", tags=["ops"], links=[first["sr_id"]]
        )
        theirs = "00000000-0000-7000-8000-000000000001"
        wall.now = foreign.wall = wall.now + 10
        await a.receive(
            [foreign.next(payload=sr_payload(theirs, title="backup", tags=["ops"]))], source="peer"
        )
    await _carry(dirs["a"], dirs["b"], wall, tmp_path / "ab.bundle")
    async with Node.open(dirs["b"], wall=wall) as b:
        ids["b"] = b.info.node_id
        wall.now += 10
        await b.e_write(await b.authenticate(tokens["b"]), sr_id=first["sr_id"], tags=["ops", "db"])
    await _carry(dirs["b"], dirs["a"], wall, tmp_path / "ba.bundle")

    asks = [
        *READS,
        {"action": "traverse", "sr_id": first["sr_id"]},
        {"action": "changes", "since": "2020-01-01"},
    ]
    answers = {}
    for name in ("a", "b"):
        async with Node.open(dirs[name], wall=wall) as opened:
            caller = await opened.authenticate(tokens[name])
            answers[name] = [await opened.e_timeline(caller, **ask) for ask in asks]
    assert answers["a"] == answers["b"]
    assert _writers(answers["a"][0]) == {
        first["sr_id"]: ("alice", ids["b"]),
        second["sr_id"]: ("alice", ids["a"]),
        theirs: ("remote", node_id(foreign.key.public)),
    }


@pytest.mark.asyncio
async def test_a_store_made_before_the_fields_gets_them_from_its_log(
    tmp_path: Path, wall: Wall
) -> None:
    """Schema 11 rebuilds the views: an SR stored without the fields shows them once the
    store is opened."""
    data = tmp_path / "node"
    await Node.init(data, wall=wall)
    token = await _token(data, wall, "alice")
    async with Node.open(data, wall=wall) as node:
        alice = await node.authenticate(token)
        await node.e_write(alice, title="old", tags=["ops"])
        expected = await node.e_timeline(alice, action="list")
    old = tmp_path / "old.db"
    shutil.copy(data / "memlane.db", old)
    with closing(sqlite3.connect(old)) as db, db:
        (shown,) = db.execute("SELECT shown FROM srs").fetchone()
        doc = msgpack.unpackb(shown)
        for name in ("caller", "node_id"):
            del doc[name]
        db.execute("UPDATE srs SET shown = ?", (msgpack.packb(doc),))
        db.execute("UPDATE schema_version SET version = ?", (BEFORE_SR_WRITERS,))
        # The pending area as it was then: schema 13 added its size and arrival; and no
        # erasure yet (schema 14), nor partial replication (schema 15), nor the text index
        # (schema 16), nor LangGraph's store items (schema 17).
        db.executescript(
            "DROP INDEX pending_source; DROP INDEX pending_arrived; "
            "ALTER TABLE pending DROP COLUMN size; "
            "ALTER TABLE pending DROP COLUMN arrived; "
            "DROP TABLE erased_srs; DROP TABLE erased; "
            "DROP TRIGGER srs_vector_erased; "
            "DELETE FROM state WHERE key = 'erase_held'; "
            "DROP INDEX headers_id; DROP TABLE missing; "
            "ALTER TABLE headers DROP COLUMN workspace; "
            "ALTER TABLE pending DROP COLUMN workspace; "
            "DELETE FROM state WHERE key = 'places_due'; "
            "DROP TRIGGER sr_docs_entered; DROP TRIGGER sr_docs_left; "
            "DROP TRIGGER srs_index_erased; DROP TABLE sr_terms; DROP TABLE sr_scopes; "
            "DROP TABLE sr_lanes; DROP TABLE sr_segments; DROP TABLE sr_postings; "
            "DROP TABLE sr_index_docs; DROP TABLE sr_index_queue; DROP TABLE sr_index_erased; "
            "DROP TABLE store_items; "
            "CREATE VIRTUAL TABLE sr_vocab USING fts5vocab (sr_fts, instance);"
        )
    for leftover in data.glob("memlane.db*"):
        leftover.unlink()
    old.rename(data / "memlane.db")
    async with Node.open(data, wall=wall) as node:
        assert await node.e_timeline(await node.authenticate(token), action="list") == expected
