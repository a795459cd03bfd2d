"""Views are derived from the log (docs/tools/e_timeline.md §Views at a moment): rebuilding
them from the log changes nothing, and SAME ENTRIES, SAME ANSWERS — nodes holding the same
entries, received in any order and batching, answer every e_timeline question alike at the same
moment.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.identity import DB_FILE
from node.node import Node
from node.views.search_index import load_segment
from node.views.srs import DOC_SLOTS
from protocol.clock import Hlc
from protocol.entry import Entry
from tests.node.clikit import run
from tests.node.helpers import ForeignWriter, Wall, admit, held_entries, sr_payload

MINUTE = 60_000
HOUR = 60 * MINUTE
READ_WRITE = ("read:workspace", "write:workspace")
ADMIN = ("read:workspace", "write:workspace", "admin:workspace")
VIEW_TABLES = (
    "sr_versions",
    "srs",
    "sr_docs",
    "sr_tags",
    "sr_links",
    "sr_due",
    "sr_stats",
    "episode_entries",
    "episodes",
    "episode_due",
)
ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")


def fid(n: int) -> str:
    return f"00000000-0000-7000-8000-{n:012d}"


async def caller(node: Node, principal: str, workspace: str, scopes: Sequence[str]) -> Caller:
    return await node.authenticate((await node.create_token(principal, workspace, scopes)).token)


async def snapshot(node: Node) -> dict[str, list[tuple[Any, ...]]]:
    """Every view table's rows (``srs`` and ``sr_docs`` with their ``doc`` numbering cut to
    its millisecond), and the search index by SR rather than by ``doc``."""
    reader = node.reader()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table in VIEW_TABLES:
        columns = [r[1] for r in await reader.fetchall(f"PRAGMA table_info({table})")]
        if table in ("srs", "sr_docs"):
            columns[columns.index("doc")] = f"doc / {DOC_SLOTS}"
        listed = ", ".join(columns)
        out[table] = [
            tuple(r)
            for r in await reader.fetchall(f"SELECT {listed} FROM {table} ORDER BY {listed}")
        ]
        assert out[table] or table in ("sr_due", "episode_due"), table
    # A scope whose last SR left it keeps a row counting 0 documents (the triggers never delete
    # one); a rebuild folds an SR's entries in one transaction and may never pass through that
    # scope.  Such rows count nothing, so they are not part of what must be identical.
    out["sr_stats"] = [r for r in out["sr_stats"] if r[3:] != (0, 0)]
    out.update(await search_index(node))
    return out


async def search_index(node: Node) -> dict[str, list[tuple[Any, ...]]]:
    """The search indexes by SR rather than by ``doc``: FTS5's vocabulary and its own totals
    (its "averages" record: documents and tokens per column), which a row left behind by a
    withdrawn SR, or a 'delete' of values never indexed, would move; and the text index's
    postings and per-doc values of every doc it holds (not gone), whatever its segments."""
    db = sqlite3.connect(node.path / DB_FILE)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, sr_fts, instance)")
        vocab = db.execute(
            "SELECT s.sr_id, v.term, v.col, v.offset FROM temp.v v JOIN srs s ON s.doc = v.doc "
            "ORDER BY 1, 2, 3, 4"
        ).fetchall()
        totals = db.execute("SELECT block FROM sr_fts_data WHERE id = 1").fetchall()
        indexed = _text_index(db)
    finally:
        db.close()
    assert vocab
    assert totals
    assert indexed
    return {"sr_vocab": vocab, "sr_fts totals": totals, "text index": indexed}


def _text_index(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """(sr_id, length, scope, lane, conversational, [(term, field counts)]) of each doc the
    text index holds."""
    names = dict(db.execute("SELECT doc, sr_id FROM srs"))
    terms = dict(db.execute("SELECT id, term FROM sr_terms"))
    scopes = {
        i: tuple(r) for i, *r in db.execute("SELECT id, workspace, private, owner FROM sr_scopes")
    }
    lanes = dict(db.execute("SELECT id, lane FROM sr_lanes"))
    out = []
    for (seg,) in db.execute("SELECT seg FROM sr_segments").fetchall():
        segment, gone = load_segment(db, seg)
        held: dict[int, list[tuple[str, int, int, int]]] = {}
        for term, slots, tfs in segment.postings.lists():
            for slot, counts in zip(slots.tolist(), tfs.tolist(), strict=True):
                held.setdefault(slot, []).append((terms[term], *counts))
        d = segment.docs
        out += [
            (
                names[int(d.keys[slot])],
                int(d.lengths[slot]),
                scopes[int(d.scopes[slot])],
                lanes[int(d.lanes[slot])],
                bool(d.conversational[slot]),
                sorted(held.get(slot, [])),
            )
            for slot in range(len(d))
            if not gone[slot]
        ]
    return sorted(out)


async def all_pages(node: Node, who: Caller, args: dict[str, Any]) -> list[dict[str, Any]]:
    answers = []
    for page in range(1, 100):
        answer = await node.e_timeline(who, page=page, page_size=3, **args)
        answers.append(answer)
        if not answer["has_more"]:
            return answers
    raise AssertionError("too many pages")


async def answers(node: Node, callers: dict[str, Caller]) -> dict[str, Any]:
    """Every question of the reading actions each caller can ask of this corpus."""
    out: dict[str, Any] = {}
    for name, who in callers.items():
        listed = await node.e_timeline(who, action="list", page_size=100)
        ids = sorted(r["sr_id"] for r in listed["results"])
        questions: list[dict[str, Any]] = (
            [{"action": "list", "order_by": order} for order in ORDERS]
            + [
                {
                    "action": "list",
                    "order_by": "content_time_asc",
                    "start_date": "2024-01-01",
                    "end_date": "2024-12-31",
                },
                {"action": "list", "is_conversational_only": True},
                {"action": "find", "query": "memo"},
                {"action": "find", "query": "memo zephyr"},
                {"action": "find", "query": "memo zephyr", "shed_idf_noise": False},
                {"action": "find", "query": "peer", "order_by": "content_time_asc"},
                {"action": "intersect", "match": ["alpha"]},
                {"action": "intersect", "match": ["alpha", "memo"]},
                {"action": "intersect", "match": ["alpha", "memo"], "shed_idf_noise": False},
            ]
            + [{"action": "traverse", "sr_id": sr_id} for sr_id in ids]
        )
        out[name] = [(q, await all_pages(node, who, q)) for q in questions]
        out[name + " listed"] = listed
    return out


# -- rebuild -----------------------------------------------------------------------------------


def foreign_entries(mesh: bytes, t: int) -> tuple[list[Entry], list[Entry]]:
    """Two writers' logs about shared SRs: creates, updates, corrections, adjustments, with
    clocks interleaved across the logs (so arrival order is not fold order)."""
    a = ForeignWriter(mesh, seed=b"\x0a" * 32, epoch=b"\xa0" * 8)
    b = ForeignWriter(mesh, seed=b"\x0b" * 32, epoch=b"\xb0" * 8)
    put, fix, adj = "sr.put", "sr.correct", "sr.adjust"
    f1, f2, f3, f4 = fid(1), fid(2), fid(3), fid(4)
    # An update of f3 ordered before f3's creation (which b writes next).
    a.next(put, sr_payload(f3, create=False, text="set before the create"), hlc=Hlc(t + 3, 0))
    b.next(put, sr_payload(f3, title="peer three", tags=["alpha", "memo"]), hlc=Hlc(t + 5, 0))
    a.next(
        put,
        sr_payload(
            f1,
            title="peer memo one",
            text="memo zephyr",
            tags=["alpha"],
            content_time=1_710_000_000_000,
        ),
        hlc=Hlc(t + 10, 0),
    )
    b.next(
        put,
        sr_payload(f2, title="peer two", text="zephyr", links=[f1], conversational=True),
        hlc=Hlc(t + 20, 0),
    )
    b.next(
        fix,
        {
            "sr_id": f1,
            "workspace": "team",
            "principal": "remote",
            "reason": "typo",
            "text": "memo corrected",
        },
        hlc=Hlc(t + 30, 0),
    )
    # Same wall and counter in both logs: the writer key orders them.
    a.next(
        adj,
        {
            "sr_id": f2,
            "workspace": "team",
            "principal": "remote",
            "tags": ["alpha"],
            "lane": "peer",
            "content_time": 1_720_000_000_000,
        },
        hlc=Hlc(t + 40, 0),
    )
    a.next(put, sr_payload(f2, create=False, title="peer two again"), hlc=Hlc(t + 40, 0))
    b.next(put, sr_payload(f2, create=False, title="peer two by b"), hlc=Hlc(t + 40, 0))
    b.next(
        adj,
        {"sr_id": f1, "workspace": "team", "principal": "remote", "visibility": "private"},
        hlc=Hlc(t + 50, 0),
    )
    a.next(put, sr_payload(f4, title="peer four memo", links=[f2, f3]), hlc=Hlc(t + 60, 0))
    # One entry that comes due within the test, one still in the future when it ends.
    b.next(
        put, sr_payload(f3, create=False, title="peer three, later"), hlc=Hlc(t + 20 * MINUTE, 0)
    )
    a.next(
        put, sr_payload(f4, create=False, title="peer four from the future"), hlc=Hlc(t + HOUR, 0)
    )
    # An SR created ten minutes ahead (beyond the allowed skew): shown once its time comes.
    b.next(
        put,
        sr_payload(fid(7), title="peer seven, created ahead", text="memo"),
        hlc=Hlc(t + 10 * MINUTE, 0),
    )
    # Ordered before that future version, but it may arrive after it (a fold again).
    b.next(put, sr_payload(f4, create=False, text="b on four"), hlc=Hlc(t + 61, 0))
    return a.entries, b.entries


async def mixed_history(node: Node, wall: Wall) -> dict[str, Caller]:
    alice = await caller(node, "alice", "team", READ_WRITE)
    bob = await caller(node, "bob", "team", READ_WRITE)
    root = await caller(node, "root", "team", ADMIN)
    remote = await caller(node, "remote", "team", READ_WRITE)
    olga = await caller(node, "olga", "other", READ_WRITE)

    async def write(who: Caller, **args: Any) -> str:
        wall.now += 1000
        return str((await node.e_write(who, **args))["sr_id"])

    s = [
        await write(
            alice,
            title="memo one",
            text="memo zephyr",
            tags=["alpha"],
            content_time="2024-03-05T00:00:00Z",
        ),
        await write(alice, title="two", text="memo", conversational=True),
        await write(alice, title="three", text="zephyr zephyr", lane="research"),
        await write(alice, title="four", text="to be deleted memo"),
        await write(alice, title="five", text="deleted and back", tags=["alpha"]),
    ]
    private = await write(bob, title="bob's", text="memo alpha", visibility="private", links=[s[0]])
    await write(bob, title="bob public", text="links", links=[s[0], s[2]])
    await write(olga, title="elsewhere memo", text="alpha")
    wall.now += 1000
    await node.e_write(alice, sr_id=s[0], title="memo one, updated", links=[s[1]])
    await node.e_correct(alice, sr_id=s[1], reason="wrong", text="memo corrected")
    await node.e_adjust(
        alice,
        sr_id=s[2],
        tags=["alpha"],
        lane="ops",
        visibility="private",
        content_time="2024-06-01",
    )
    await node.e_adjust(bob, sr_id=private, visibility="workspace")
    briefly = await write(bob, title="private for a moment", text="memo", visibility="private")
    await node.e_adjust(bob, sr_id=briefly, visibility="workspace")
    wall.now += 1000
    await node.e_delete(alice, sr_id=s[3])
    await node.e_delete(alice, sr_id=s[4])
    wall.now += 1000
    await node.e_undelete(alice, sr_id=s[4])
    first = (await node.work_record(alice, summary="one"))["id"]
    second = (await node.work_record(alice, summary="two"))["id"]
    await node.work_result(alice, id=first, status="done")
    await node.work_forget(alice, id=second)
    # Foreign entries, shuffled: a later entry of a log waits in pending for its gap.
    a, b = foreign_entries(node.info.mesh, wall.now)
    await admit(node, a[0].header.writer, b[0].header.writer)
    arrivals = [*a, *b]
    random.Random(7).shuffle(arrivals)
    for start in range(0, len(arrivals), 3):
        await node.receive(arrivals[start : start + 3], source="peer")
    reader = node.reader()
    assert await reader.count("pending") == 0
    wall.now += 30 * MINUTE
    return {"alice": alice, "bob": bob, "root": root, "remote": remote, "olga": olga}


@pytest.mark.asyncio
async def test_rebuild_changes_no_view_and_no_answer(node: Node, wall: Wall) -> None:
    callers = await mixed_history(node, wall)
    before_answers = await answers(node, callers)  # brings the views to this moment
    before = await snapshot(node)
    assert before["sr_due"], "the future entry should still be waiting"
    reader = node.reader()
    applied = sum(e.applied for _, e in await held_entries(node))
    docs = await reader.fetchall("SELECT doc FROM srs ORDER BY sr_id")

    assert await node.rebuild_views() == applied
    assert await snapshot(node) == before
    assert await answers(node, callers) == before_answers
    # Docs are keyed by ingest time, not by arrival: each in its millisecond's slots.
    rows = await reader.fetchall("SELECT doc, ingest_time FROM srs WHERE live = 1")
    assert rows
    assert all(doc // DOC_SLOTS == ingest for doc, ingest in rows)
    assert [r[0] // DOC_SLOTS for r in docs] == [
        r[0] // DOC_SLOTS for r in await reader.fetchall("SELECT doc FROM srs ORDER BY sr_id")
    ]
    # Twice is the same as once; and the rebuilt views still catch up when time comes.
    await node.rebuild_views()
    assert await snapshot(node) == before
    wall.now += HOUR
    titles = [
        r["title"]
        for r in (await node.e_timeline(callers["alice"], action="list", page_size=100))["results"]
    ]
    assert titles[0] == "peer four from the future"
    assert await reader.count("sr_due") == 0


async def rebuild_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``memlane views rebuild …`` through the command line's entry point, in-process
    (tests/node/clikit.py), off the event loop."""
    return await asyncio.to_thread(run, "views", "rebuild", *args)


@pytest.mark.asyncio
async def test_memlane_views_rebuild(node_dir: Path, wall: Wall) -> None:
    async with Node.open(node_dir, wall=wall) as node:
        callers = await mixed_history(node, wall)
        before_answers = await answers(node, callers)
        before = await snapshot(node)
        applied = sum(e.applied for _, e in await held_entries(node))
        tokens = {name: c.token_id for name, c in callers.items()}
    done = await rebuild_command("--data", str(node_dir), "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout) == {"applied": applied}
    text = await rebuild_command("--data", str(node_dir))
    assert (text.returncode, text.stdout.strip()) == (0, f"views rebuilt from {applied} entries")
    async with Node.open(node_dir, wall=wall) as node:
        assert await snapshot(node) == before
        again = {}
        for name, c in callers.items():
            again[name] = await caller(node, c.principal, c.workspace, sorted(c.scopes))
            assert again[name].token_id != tokens[name]
        assert await answers(node, again) == before_answers


# -- same entries, same answers ----------------------------------------------------------------


@pytest.mark.asyncio
async def test_same_entries_same_answers_in_any_order_and_batching(
    tmp_path: Path, wall: Wall
) -> None:
    await Node.init(tmp_path / "x", wall=wall)
    for twin in ("y", "z"):
        shutil.copytree(tmp_path / "x", tmp_path / twin)  # fresh nodes of one mesh
    async with (
        Node.open(tmp_path / "x", wall=wall) as x,
        Node.open(tmp_path / "y", wall=wall) as y,
        Node.open(tmp_path / "z", wall=wall) as z,
    ):
        t = wall.now - 10 * MINUTE
        a, b = foreign_entries(x.info.mesh, t)
        more_a, more_b = _more(a, b, x.info.mesh, t)
        everything = [*a, *more_a, *b, *more_b]
        for n in (x, y, z):
            await admit(n, a[0].header.writer, b[0].header.writer)
        # x: each log whole, in order, one batch each.
        await x.receive([*a, *more_a], source="a")
        await x.receive([*b, *more_b], source="b")
        # y: one entry at a time, shuffled (later entries of a log wait for their gap).
        shuffled = list(everything)
        random.Random(1).shuffle(shuffled)
        for e in shuffled:
            await y.receive([e], source="mixed")
        # z: newest first, in uneven batches.
        backwards = everything[::-1]
        for start, size in ((0, 5), (5, 1), (6, 7), (13, 100)):
            await z.receive(backwards[start : start + size], source="mixed")
        for n in (x, y, z):
            reader = n.reader()
            assert await reader.count("pending") == 0
            # + the authority's member.add of this node and of the two writers
            assert await reader.count("headers") == len(everything) + 3

        wall.now = t + 30 * MINUTE  # one moment for all three: the +20 min entry is due
        got = []
        states = []
        indexes = [await search_index(n) for n in (x, y, z)]
        assert indexes[0] == indexes[1] == indexes[2]
        for n in (x, y, z):
            callers = {
                "alice": await caller(n, "alice", "team", READ_WRITE),
                "remote": await caller(n, "remote", "team", READ_WRITE),
                "root": await caller(n, "root", "team", ADMIN),
                "other": await caller(n, "olga", "other", READ_WRITE),
            }
            got.append(await answers(n, callers))
            reader = n.reader()
            states.append(
                await reader.fetchall("SELECT sr_id, live, deleted, shown FROM srs ORDER BY sr_id")
            )
        assert got[0] == got[1] == got[2]
        assert states[0] == states[1] == states[2]
        # The answers say what the fold says (so agreement is not agreement on nothing).
        listed = {r["sr_id"]: r for r in got[0]["root listed"]["results"]}
        assert listed[fid(2)]["title"] == max(
            ("peer two again", "peer two by b"),
            key=lambda title: {"peer two again": a, "peer two by b": b}[title][0].header.writer,
        )
        assert (listed[fid(2)]["lane"], listed[fid(2)]["tags"]) == ("peer", ["alpha"])
        assert listed[fid(3)]["title"] == "peer three, later"
        assert listed[fid(3)]["text"] == "set before the create"
        assert (listed[fid(4)]["title"], listed[fid(4)]["text"]) == ("peer four memo", "b on four")
        assert listed[fid(1)]["text"] == "memo corrected"
        assert fid(1) not in {r["sr_id"] for r in got[0]["alice listed"]["results"]}
        assert fid(1) in {r["sr_id"] for r in got[0]["remote listed"]["results"]}
        theirs = got[0]["other listed"]["results"]
        assert [(r["sr_id"], r["title"]) for r in theirs] == [(fid(6), "other workspace")]
        assert fid(6) not in listed


def _more(a: list[Entry], b: list[Entry], mesh: bytes, t: int) -> tuple[list[Entry], list[Entry]]:
    """A few more entries continuing both logs."""
    wa = ForeignWriter(mesh, seed=b"\x0a" * 32, epoch=b"\xa0" * 8, entries=list(a))
    wb = ForeignWriter(mesh, seed=b"\x0b" * 32, epoch=b"\xb0" * 8, entries=list(b))
    wa.next(
        "sr.put", sr_payload(fid(5), title="late memo zephyr", links=[fid(1)]), hlc=Hlc(t + 15, 0)
    )
    wb.next(
        "sr.correct",
        {
            "sr_id": fid(5),
            "workspace": "team",
            "principal": "remote",
            "reason": "r",
            "text": "zephyr memo memo",
        },
        hlc=Hlc(t + 16, 0),
    )
    wb.next(
        "sr.put", sr_payload(fid(6), title="other workspace", workspace="other"), hlc=Hlc(t + 17, 0)
    )
    return wa.entries[len(a) :], wb.entries[len(b) :]
