"""Erasure (docs/erasure.md): ``e_erase`` writes an ``sr.erase``; on every node that holds or
later receives it, the payloads of the SR's entries and every row derived from them go, the
headers stay, and a payload of the SR offered again is never stored.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from typing import Any

import pytest

from node.errors import Forbidden
from node.identity import DB_FILE
from node.node import Node
from node.replica import peer_features
from node.store.erasure import ERASE
from node.transfer.archive import Kdf, create_archive
from node.transfer.verify import verify_log
from node.views.tokens import tokenizer
from protocol.entry import Entry
from tests.node.clikit import ok, run
from tests.node.helpers import (
    ForeignWriter,
    admit,
    events,
    held_entries,
    pending,
    refused,
    sr_payload,
)
from tests.node.synckit import FAST, converged, make_mesh, syncing

SECRET = "zanzibarquux"  # a token no other text holds
UNKNOWN = "00000000-0000-7000-8000-0000000000aa"
SR_ID = "00000000-0000-7000-8000-00000000e1a5"

# Every table that holds rows derived from an SR, by the column naming it.
_BY_SR = {
    "srs": "sr_id",
    "sr_versions": "sr_id",
    "sr_tags": "sr_id",
    "sr_links": "src",
    "sr_due": "sr_id",
    "deletions": "sr_id",
    "sr_vectors": "sr_id",
    "bundle_subjects": "subject",
}


async def _rows(node: Node, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in await node.reader().fetchall(sql, args)]


async def traces(node: Node, sr_id: str) -> dict[str, int]:
    """What is left of an SR: rows naming it, its term in the search index, its bytes in any
    payload or pending payload, and audit events about it other than its erasure."""
    found = {
        t: len(await _rows(node, f"SELECT 1 FROM {t} WHERE {c} = ?", sr_id))
        for t, c in _BY_SR.items()
    }
    (term,) = tokenizer.terms([SECRET])[0]
    found["sr_terms"] = len(await _rows(node, "SELECT 1 FROM sr_terms WHERE term = ?", term))
    needle = SECRET.encode()
    payloads = await _rows(node, "SELECT data FROM payloads")
    found["payloads"] = sum(needle in bytes(d) for (d,) in payloads)
    waiting = await _rows(node, "SELECT payload FROM pending WHERE payload IS NOT NULL")
    found["pending"] = sum(needle in bytes(d) for (d,) in waiting)
    found["audit"] = len(
        await _rows(node, "SELECT 1 FROM audit WHERE subject = ? AND event != 'sr_erased'", sr_id)
    )
    return found


NONE_LEFT = dict.fromkeys([*_BY_SR, "sr_terms", "payloads", "pending", "audit"], 0)


async def _written(node: Node, caller: Any) -> str:
    """An SR with every kind of derived row: versions, search terms, tags, a link, a local
    deletion."""
    sr_id = (
        await node.e_write(
            caller,
            title=f"about {SECRET}",
            text=f"{SECRET} lives here",
            tags=["people"],
            links=[UNKNOWN],
        )
    )["sr_id"]
    await node.e_correct(caller, sr_id=sr_id, text=f"{SECRET} moved", reason="moved")
    await node.e_adjust(caller, sr_id=sr_id, tags=["people", "moved"])
    await node.e_delete(caller, sr_id=sr_id)
    await node.e_undelete(caller, sr_id=sr_id)
    return sr_id


@pytest.mark.asyncio
async def test_erase_leaves_nothing_of_the_sr_but_its_headers(node, make_caller, tmp_path):
    alice = await make_caller()
    sr_id = await _written(node, alice)
    kept = (await node.e_write(alice, title="another", text="stays"))["sr_id"]
    assert (await traces(node, sr_id))["sr_terms"] > 0
    headers = await node.reader().count("headers")

    answer = await node.e_erase(alice, sr_id=sr_id, reason="asked to be forgotten")

    assert (answer["sr_id"], answer["erased"]) == (sr_id, True)
    assert answer["entries"] == 3  # the put, the correction and the adjustment
    assert await traces(node, sr_id) == NONE_LEFT
    assert await node.reader().count("headers") == headers + 1  # the erase itself
    erased = await _rows(node, "SELECT count(*) FROM erased")
    assert erased == [(3,)]
    # As for an SR never written: every tool answers as for an unknown id.
    for tool, args in (("e_write", {"title": "x"}), ("e_delete", {}), ("e_erase", {"reason": "r"})):
        assert await refused(node, tool, alice, sr_id=sr_id, **args) == f"unknown sr_id: {sr_id}"
    listed = await node.e_timeline(alice, action="list")
    assert [r["sr_id"] for r in listed["results"]] == [kept]
    found = await node.e_timeline(alice, action="find", query=SECRET)
    assert found["results"] == []
    # ``changes`` over a window that saw it write, correct and delete it: as never written.
    changed = await node.e_timeline(alice, action="changes", since="2020-01-01", page_size=100)
    assert [c["sr_id"] for c in changed["changes"]] == [kept]
    for fmt in ("jsonl", "markdown"):  # an export never holds it (markdown: a directory)
        out = tmp_path / f"export-{fmt}"
        await node.export(alice, out, fmt)
        files = [p for p in (out.rglob("*") if out.is_dir() else [out]) if p.is_file()]
        assert files
        assert not any(SECRET in p.read_text() for p in files)
        assert any("stays" in p.read_text() for p in files)
    # The headers stay: every log verifies, the erased payloads counted as absent.
    report = await verify_log(node.reader())
    assert report.ok, report.problems
    assert (report.payloads_absent, report.payloads_erased) == (3, 3)
    assert [e.subject for e in await events(node, "sr_erased")] == [sr_id]
    # Once the scrub that follows is done, not a byte of it is left in the files.
    await node.store.scrub()
    for file in (DB_FILE, f"{DB_FILE}-wal"):
        path = node.path / file
        assert SECRET.encode() not in (path.read_bytes() if path.exists() else b""), file
    # The feed keeps the erasure alone, shown to those who could read the SR.
    feed = await node.e_audit(alice)
    about = [(e["event"], e["entry_id"]) for e in feed["events"] if e["subject"] == sr_id]
    assert about == [("sr_erased", answer["entry_id"])]


@pytest.mark.asyncio
async def test_a_private_srs_erasure_is_shown_to_its_owner_alone(node, make_caller):
    alice = await make_caller()
    bob = await make_caller("bob")
    shared = (await node.e_write(alice, title="shared"))["sr_id"]
    private = (await node.e_write(alice, title="mine", visibility="private"))["sr_id"]
    for sr_id in (shared, private):
        await node.e_erase(alice, sr_id=sr_id, reason="r")

    def erased(feed: dict[str, Any]) -> list[str]:
        return [e["subject"] for e in feed["events"] if e["event"] == "sr_erased"]

    assert erased(await node.e_audit(alice)) == [shared, private]
    assert erased(await node.e_audit(bob)) == [shared]


@pytest.mark.asyncio
async def test_only_the_owner_or_an_admin_may_erase_and_others_learn_nothing(node, make_caller):
    alice = await make_caller()
    bob = await make_caller("bob")
    admin = await make_caller(
        "root", "team", ("read:workspace", "write:workspace", "admin:workspace")
    )
    reader = await make_caller("carol", "team", ("read:workspace",))
    elsewhere = await make_caller("alice", "other")
    sr_id = (await node.e_write(alice, title=f"{SECRET}"))["sr_id"]
    private = (await node.e_write(alice, title="mine", visibility="private"))["sr_id"]
    for caller, target in ((bob, sr_id), (bob, private), (elsewhere, sr_id)):
        text = await refused(node, "e_erase", caller, sr_id=target, reason="r")
        assert text == f"unknown sr_id: {target}"
        unknown = await refused(node, "e_erase", caller, sr_id=UNKNOWN, reason="r")
        assert unknown.replace(UNKNOWN, target) == text
    with pytest.raises(Forbidden):
        await node.e_erase(reader, sr_id=sr_id, reason="r")
    assert await refused(node, "e_erase", alice, sr_id=sr_id) == "e_erase needs a reason"
    assert (
        await refused(node, "e_erase", alice, sr_id=sr_id, reason="  ") == "e_erase needs a reason"
    )
    assert (await refused(node, "e_erase", alice, sr_id=sr_id, reason="x" * 2001)).startswith(
        "invalid reason: "
    )
    assert (await refused(node, "e_erase", alice, sr_id=sr_id, reason="r", title="t")) == (
        "e_erase does not take title"
    )
    await node.e_erase(admin, sr_id=sr_id, reason="the workspace's admin")
    assert await traces(node, sr_id) == NONE_LEFT


def _entries(writer: ForeignWriter, sr_id: str = SR_ID) -> list[Entry]:
    """Another node's SR about the secret, then its erase."""
    put = writer.next("sr.put", sr_payload(sr_id, title=SECRET, tags=["people"]))
    fix = writer.next(
        "sr.correct",
        {
            "sr_id": sr_id,
            "workspace": "team",
            "principal": "remote",
            "text": f"{SECRET} again",
            "reason": "r",
        },
    )
    erase = writer.next(
        "sr.erase",
        {
            "sr_id": sr_id,
            "workspace": "team",
            "principal": "remote",
            "entries": [put.id.hex(), fix.id.hex()],
            "reason": "gone",
        },
    )
    return [put, fix, erase]


@pytest.mark.asyncio
async def test_a_received_erase_purges_and_a_payload_offered_again_is_never_stored(
    node, foreign, make_caller
):
    put, fix, erase = _entries(foreign)
    assert (await node.receive([put, fix], source="peer")).stored == 2
    alice = await make_caller()
    assert (await node.e_timeline(alice, action="find", query=SECRET))["results"]
    # Another writer's entry about it waits in the pending area (the one before it is late).
    other = ForeignWriter(node.info.mesh, seed=b"\x0b" * 32)
    await admit(node, other)
    about = {"sr_id": SR_ID, "workspace": "team", "principal": "remote"}
    late, waiting = (other.next("sr.adjust", about | {"tags": [f"{SECRET}{i}"]}) for i in (1, 2))
    assert (await node.receive([waiting], source="peer")).pending == 1
    assert (await traces(node, SR_ID))["pending"] == 1
    await node.receive([erase], source="peer")
    assert await traces(node, SR_ID) == NONE_LEFT  # the waiting payload dropped as well
    await node.receive([late], source="peer")  # the gap filled: both kept without content
    assert await traces(node, SR_ID) == NONE_LEFT
    assert not await pending(node)
    # Offered again with their payloads — by a peer that had not heard of the erase, or a
    # bundle made before it: counted as known, never stored.
    again = await node.receive([put, fix], source="old-peer")
    assert (again.duplicate, again.filled) == (2, 0)
    assert await traces(node, SR_ID) == NONE_LEFT
    assert (await verify_log(node.reader())).ok


@pytest.mark.asyncio
async def test_entries_arriving_after_the_erase_are_kept_without_their_payloads(tmp_path, wall):
    """Same entries, any order: a node that hears of the erase first keeps the SR's entries
    without their payloads, and ends with the same log as one that purged them."""
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    entries = _entries(writer)
    late = writer.next(
        "sr.adjust", {"sr_id": SR_ID, "workspace": "team", "principal": "remote", "tags": [SECRET]}
    )
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        await a.receive([*entries, late], source="in-order")
        # The erase first: it waits for the entries before it, which come without content.
        await b.receive([*entries[2:], late], source="erase-first")
        assert (await traces(b, SR_ID))["pending"] == 1  # the late adjustment names it
        await b.receive(entries[:2], source="the-rest")
        for n in (a, b):
            assert await traces(n, SR_ID) == NONE_LEFT
        assert await _log(a) == await _log(b)
        assert await _rows(a, "SELECT pos FROM erased") != []


async def _log(node: Node) -> list[tuple[bytes, bool]]:
    return sorted((e.raw, e.payload is not None) for _, e in await held_entries(node))


@pytest.mark.asyncio
async def test_an_erase_reaches_only_its_own_workspace(node, make_caller):
    alice = await make_caller()
    sr_id = (await node.e_write(alice, title=SECRET))["sr_id"]
    bare = {"sr_id": sr_id, "principal": "x", "entries": [], "reason": "r"}
    refused_writer = ForeignWriter(node.info.mesh, seed=b"\x09" * 32)
    other_writer = ForeignWriter(node.info.mesh, seed=b"\x0a" * 32)
    await admit(node, refused_writer, other_writer, workspaces=("other",))
    # Naming team's workspace without its grant: refused.  Naming its own: not team's SR.
    erase = refused_writer.next("sr.erase", bare | {"workspace": "team"})
    assert (await node.receive([erase], source="peer")).rejected == 1
    elsewhere = other_writer.next("sr.erase", bare | {"workspace": "other"})
    assert (await node.receive([elsewhere], source="peer")).stored == 1
    assert (await traces(node, sr_id))["sr_terms"] > 0
    assert await _rows(node, "SELECT count(*) FROM erased_srs") == [(0,)]


@pytest.mark.asyncio
async def test_an_erase_on_one_node_of_three_reaches_every_node_and_every_file(tmp_path, wall):
    """A line A – B – C over real sockets: written on A, synced, erased on C; every node
    drops the payloads and derived rows, and after its scrub no file of any node holds a
    byte of the text."""
    dirs = await make_mesh(tmp_path, ["A", "B", "C"], wall)
    async with (
        Node.open(dirs["A"], wall=wall) as a,
        Node.open(dirs["B"], wall=wall) as b,
        Node.open(dirs["C"], wall=wall) as c,
    ):
        nodes = (a, b, c)
        on = {n: await _alice(n) for n in nodes}
        sr_id = await _written(a, on[a])
        async with syncing(a) as sa, syncing(b) as sb, syncing(c) as sc:
            sb.dial(*await sa.listen())
            sb.dial(*await sc.listen())
            await converged(nodes, (sa, sb, sc))
            found = await c.e_timeline(on[c], action="find", query=SECRET)
            assert [r["sr_id"] for r in found["results"]] == [sr_id]
            await c.e_erase(on[c], sr_id=sr_id, reason="asked to be forgotten")
            await converged(nodes, (sa, sb, sc))
        for n in nodes:
            assert await traces(n, sr_id) == NONE_LEFT
            assert (await verify_log(n.reader())).payloads_erased == 3
            await n.store.scrub()
            for file in (DB_FILE, f"{DB_FILE}-wal"):
                path = n.path / file
                assert SECRET.encode() not in (path.read_bytes() if path.exists() else b"")
        assert await _log(a) == await _log(b) == await _log(c)
        # What each node knows of the others' erasing: B met both; A and C never met.
        for x, y in ((b, a), (b, c), (a, b), (c, b)):
            assert ERASE in (await peer_features(x.store, y.key.public) or ())
        assert await peer_features(a.store, c.key.public) is None


@pytest.mark.asyncio
async def test_members_show_which_nodes_apply_erasures(tmp_path, wall):
    """A node whose hello does not offer ``sr.erase`` (an older version) shows as not
    erasing; one never met here, as unknown; this node, as erasing."""
    dirs = await make_mesh(tmp_path, ["A", "B", "C"], wall)
    older = replace(FAST, features=())  # A speaks as a node of the version before erasure
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        async with syncing(a, older) as sa, syncing(b) as sb:
            sb.dial(*await sa.listen())
            await converged((a, b), (sa, sb))
        a_id, b_id = a.info.node_id, b.info.node_id
    members = json.loads(ok(run("mesh", "members", "--data", dirs["B"], "--json")))
    erases = {m["node_id"]: m["erases"] for m in members}
    (c_id,) = set(erases) - {a_id, b_id}
    assert erases == {a_id: False, b_id: True, c_id: None}
    shown = ok(run("mesh", "members", "--data", dirs["B"]))
    assert [line.split()[0] for line in shown.splitlines() if " unknown " in line] == [c_id]


@pytest.mark.asyncio
async def test_a_bundle_and_an_archive_from_before_the_erase_bring_nothing_back(tmp_path, wall):
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    old_bundle, old_archive = tmp_path / "before.bundle", tmp_path / "before.archive"
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        alice = await _alice(a)
        sr_id = await _written(a, alice)
        await a.export_bundle(old_bundle)
        await create_archive(a.path, old_archive, b"passphrase", now=wall(), kdf=Kdf(log_n=12))
        await a.e_erase(alice, sr_id=sr_id, reason="asked to be forgotten")
        async with syncing(a) as sa, syncing(b) as sb:
            sb.dial(*await sa.listen())
            await converged((a, b), (sa, sb))
        await b.import_bundle(old_bundle)  # made before the erase: its payloads are refused
        for node in (a, b):
            assert await traces(node, sr_id) == NONE_LEFT
    await Node.restore_archive(old_archive, tmp_path / "A2", b"passphrase", wall=wall)
    async with Node.open(tmp_path / "A2", wall=wall) as a2, Node.open(dirs["B"], wall=wall) as b:
        assert (await traces(a2, sr_id))["payloads"] == 2  # the archive is from before the erase
        async with syncing(a2) as s2, syncing(b) as sb:
            sb.dial(*await s2.listen())
            await converged((a2, b), (s2, sb))
        assert await traces(a2, sr_id) == NONE_LEFT
        assert await _log(a2) >= await _log(b)


async def _alice(node: Node) -> Any:
    issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
    return await node.authenticate(issued.token)


@pytest.mark.asyncio
async def test_erases_relayed_before_the_kind_was_known_apply_after_the_upgrade(node_dir, wall):
    """A node of an older version stores and relays an ``sr.erase`` without applying it; on
    its first open after the upgrade (the migration asks for it) it applies what it holds."""
    async with Node.open(node_dir, wall=wall) as node:
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
        put, fix, erase = _entries(writer)
        # The erase's header comes first, without its payload: held, not applied ...
        assert (await node.receive([put, fix, erase.without_payload()], source="p")).stored == 3
    # ... and its payload is then stored as an older node stores a kind it does not know: kept
    # beside the header, never applied; the migration to this version asks for held erases.
    with closing(sqlite3.connect(node_dir / DB_FILE)) as db, db:
        (pos,) = db.execute("SELECT pos FROM headers WHERE kind = 'sr.erase'").fetchone()
        db.execute("INSERT INTO payloads (pos, data) VALUES (?, ?)", (pos, erase.payload))
        db.execute("INSERT INTO state (key, value) VALUES ('erase_held', x'01')")
        held = [d for (d,) in db.execute("SELECT data FROM payloads") if SECRET.encode() in d]
    assert len(held) == 2  # relayed, not applied
    async with Node.open(node_dir, wall=wall) as node:
        assert await traces(node, SR_ID) == NONE_LEFT
        assert await _rows(node, "SELECT count(*) FROM state WHERE key = 'erase_held'") == [(0,)]


@pytest.mark.asyncio
async def test_a_scrub_left_due_is_finished_before_the_store_closes(node_dir, wall):
    """A scrub due while the background one waits out its minute (or a one-shot command that
    closes at once) is finished by closing the store: the state row is gone, and the bytes."""
    due = "SELECT 1 FROM state WHERE key = 'erase_scrub'"
    async with Node.open(node_dir, wall=wall) as node:
        alice = await _alice(node)
        sr_ids = [await _written(node, alice) for _ in range(3)]
        for i in range(200):  # enough of an index for segments to hold the terms apart
            await node.e_write(alice, title=f"filler {i}", text="other words entirely")
        await node.e_erase(alice, sr_id=sr_ids[0], reason="asked to be forgotten")
        for _ in range(500):  # the background scrub takes it, then waits a minute
            if not await _rows(node, due):
                break
            await asyncio.sleep(0.01)
        for sr_id in sr_ids[1:]:
            await node.e_erase(alice, sr_id=sr_id, reason="asked to be forgotten")
        assert await _rows(node, due) == [(1,)]
    with closing(sqlite3.connect(node_dir / DB_FILE)) as db:
        assert db.execute(due).fetchall() == []
    assert SECRET.encode() not in (node_dir / DB_FILE).read_bytes()


@pytest.mark.asyncio
async def test_writes_during_a_scrub_leave_the_index_whole(node, make_caller):
    """The scrub ends while others keep writing, and the search index stays sound (merging
    it a step at a time between their writes grew a level a step until FTS5 failed)."""
    alice = await make_caller()
    sr_ids = [
        (await node.e_write(alice, title=f"{SECRET} {i}", text=f"words {i}"))["sr_id"]
        for i in range(50)
    ]
    await node.e_erase(alice, sr_id=sr_ids[25], reason="asked to be forgotten")
    done = asyncio.Event()

    async def write() -> int:
        written = 0
        while not done.is_set():
            await node.e_write(alice, title="meanwhile", text="a write during the scrub")
            written += 1
            await asyncio.sleep(0)
        return written

    writer = asyncio.create_task(write())
    await asyncio.wait_for(node.store.scrub(), 30)
    done.set()
    assert await writer > 0
    with closing(sqlite3.connect(node.path / DB_FILE)) as db:
        db.execute("INSERT INTO sr_fts (sr_fts) VALUES ('integrity-check')")
    found = await node.e_timeline(alice, action="find", query=SECRET, page_size=100)
    assert len(found["results"]) == 49
