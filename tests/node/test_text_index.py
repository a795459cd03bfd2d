"""The text index find reads (docs/search.md §The text index) against a brute-force reference
of the documented rule (``findref``): random stores written a few SRs at a time — private SRs
of several owners, two workspaces, corrections, tag changes, deletions and undeletions,
erasures, conversational and not, texts that tie, several SRs to a millisecond — and random
questions from callers who read different parts of them.  Segments are made tiny (a handful
of docs, merged three at a time and a few terms at a time, a reader's cache of lists a few
hundred bytes) so that every path — small and large segments, merges, gone docs, lists
evicted — runs at test size.  Every answer (ids, order, rank, score, ``has_more``,
``shed_terms``) must equal the reference's.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from node.access.callers import Caller
from node.identity import DB_FILE
from node.node import Node
from node.views import search_index, search_reads, segments
from node.views.find import find
from node.views.query_terms import query_terms
from node.views.timeline import Query
from tests.node.findref import Stemmer, reference
from tests.node.helpers import CallerFactory, Wall

WORDS = [
    "run",
    "runs",
    "running",
    "dog",
    "dogs",
    "cat",
    "quiet",
    "quietly",
    "fig",
    "plum",
    "gateway",
    "gateways",
    "it's",
    "that's",
    "Café",
    "one",
    "2023",
    "July",
    "the",
    "what",
    "did",
]
ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")


@pytest.fixture
def tiny_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_index, "BLOB_SLOTS", 5)
    monkeypatch.setattr(search_index, "FANOUT", 3)
    monkeypatch.setattr(search_index, "TOP_TIER", 3)
    monkeypatch.setattr(search_reads, "LIST_CACHE_BYTES", 200)  # lists evicted all the time
    monkeypatch.setattr(segments, "RANGE_POSTINGS", 4)  # merges made a few terms at a time


def _text(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(WORDS, k=k))


class World:
    """The writers, what they wrote, and the changes made to it at random."""

    def __init__(self, node: Node, wall: Wall, rng: random.Random, callers: list[Caller]):
        self.node, self.wall, self.rng, self.callers = node, wall, rng, callers
        self.written: list[tuple[Caller, str]] = []
        self.deleted: set[str] = set()

    async def write(self) -> None:
        rng = self.rng
        caller = rng.choice(self.callers)
        fields: dict[str, Any] = {
            "title": _text(rng, rng.randint(0, 3)),
            "text": _text(rng, rng.randint(1, 12)),
        }
        if rng.random() < 0.1:
            fields = {"title": "dogs run", "text": "quiet fig"}  # ties
        if rng.random() < 0.5:
            fields["tags"] = rng.sample(("fig", "Plum", "cats", "gateway"), rng.randint(1, 2))
        if rng.random() < 0.2:
            fields["visibility"] = "private"
        if rng.random() < 0.5:
            fields["conversational"] = True
        if rng.random() < 0.3:
            fields["lane"] = rng.choice(("ops", "chat"))
        answer = await self.node.e_write(caller, **fields)
        self.written.append((caller, answer["sr_id"]))
        if rng.random() < 0.6:
            self.wall.now += rng.randint(0, 3)

    async def change(self) -> None:
        if not self.written:
            return
        rng, node = self.rng, self.node
        caller, sr_id = rng.choice(self.written)
        how = rng.random()
        if sr_id in self.deleted:
            await node.e_undelete(caller, sr_id=sr_id)
            self.deleted.discard(sr_id)
        elif how < 0.4:
            await node.e_correct(
                caller, sr_id=sr_id, reason="r", text=_text(rng, rng.randint(1, 8))
            )
        elif how < 0.6:
            tags = rng.sample(("fig", "plum", "quiet"), rng.randint(0, 2))
            await node.e_adjust(caller, sr_id=sr_id, tags=tags)
        elif how < 0.8:
            await node.e_delete(caller, sr_id=sr_id)
            self.deleted.add(sr_id)
        else:
            await node.e_erase(caller, sr_id=sr_id, reason="r")
            self.written.remove((caller, sr_id))


def _question(rng: random.Random) -> dict[str, Any]:
    return {
        "action": "find",
        "query": " ".join(rng.sample(WORDS, rng.randint(1, 4))),
        "order_by": rng.choice(ORDERS),
        "page_size": rng.choice((1, 3, 7, 20)),
        "page": rng.choice((1, 1, 2, 3)),
        "is_conversational_only": rng.random() < 0.25,
        "shed_idf_noise": rng.random() < 0.7,
    }


async def _agrees(
    node: Node, node_dir: Path, caller: Caller, args: dict[str, Any], stem: Stemmer
) -> int:
    expected = reference(node_dir, caller, args, stem)
    answer = await node.e_timeline(caller, **args)
    got = [(r["sr_id"], r["rank"], r["score"]) for r in answer["results"]]
    assert got == expected.results, args
    assert answer["has_more"] is expected.has_more, args
    assert answer["shed_terms"] == expected.shed_terms, args
    return len(got)


async def _callers(make_caller: CallerFactory) -> tuple[list[Caller], list[Caller]]:
    writers = [
        await make_caller("alice", "team"),
        await make_caller("bob", "team"),
        await make_caller("carol", "elsewhere"),
    ]
    readers = [
        *writers,
        await make_caller("root", "team", ("read:workspace", "admin:workspace")),
        await make_caller("dan", "team", ("read:workspace",)),
    ]
    return writers, readers


@pytest.mark.asyncio
@pytest.mark.usefixtures("tiny_segments")
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_answers_equal_the_reference_as_the_store_changes(
    node: Node, node_dir: Path, wall: Wall, make_caller: CallerFactory, seed: int
) -> None:
    rng = random.Random(seed)
    writers, readers = await _callers(make_caller)
    world, stem = World(node, wall, rng, writers), Stemmer()
    compared = 0
    for step in range(120):
        await (world.write() if rng.random() < 0.7 else world.change())
        if step % 4 == 3:
            compared += await _agrees(node, node_dir, rng.choice(readers), _question(rng), stem)
    assert compared > 60, "the questions found too little to compare"
    assert _segments(node_dir) > 1, "the store never held more than one segment"


@pytest.mark.asyncio
@pytest.mark.usefixtures("tiny_segments")
async def test_lanes_narrow_before_ranking(
    node: Node, node_dir: Path, wall: Wall, make_caller: CallerFactory
) -> None:
    rng = random.Random(7)
    writers, readers = await _callers(make_caller)
    world, stem = World(node, wall, rng, writers), Stemmer()
    for _ in range(60):
        await world.write()
    assert node.store.reader is not None
    for _ in range(20):
        args, caller = _question(rng), rng.choice(readers)
        lanes = tuple(rng.sample(("ops", "chat", ""), rng.randint(1, 2)))
        q = Query(
            caller,
            args["order_by"],
            None,
            None,
            args["is_conversational_only"],
            lanes,
            args["page"],
            args["page_size"],
        )
        page, shed = await find(
            node.store.reader, q, query_terms(args["query"]), args["shed_idf_noise"]
        )
        expected = reference(node_dir, caller, args, stem, lanes)
        assert [(d["sr_id"], d["rank"], d["score"]) for d in page.docs] == expected.results
        assert page.has_more is expected.has_more
        assert shed == expected.shed_terms


def _segments(node_dir: Path) -> int:
    db = sqlite3.connect(node_dir / DB_FILE)
    try:
        return int(db.execute("SELECT count(*) FROM sr_segments").fetchone()[0])
    finally:
        db.close()


@pytest.mark.asyncio
@pytest.mark.usefixtures("tiny_segments")
async def test_two_openers_of_one_store_answer_by_the_rule(node_dir: Path, wall: Wall) -> None:
    """Two openers of one store (as ``memlane write`` beside ``memlane serve``) write, change
    and erase in turn; each keeps the index in its own transactions, and each answers as the
    rule over what both committed (its term ids and held segments reloaded when the other
    wrote)."""
    rng, stem = random.Random(11), Stemmer()
    async with Node.open(node_dir, wall=wall) as a, Node.open(node_dir, wall=wall) as b:
        scopes = ("read:workspace", "write:workspace")
        token = (await a.create_token("alice", "team", scopes)).token
        reader = (await a.create_token("dan", "team", ("read:workspace",))).token
        world, who = (
            World(a, wall, rng, [await a.authenticate(token)]),
            await a.authenticate(reader),
        )
        compared = 0
        for step in range(80):
            world.node = rng.choice((a, b))
            await (world.write() if rng.random() < 0.7 else world.change())
            if step % 3 == 2:
                for n in (a, b):
                    compared += await _agrees(n, node_dir, who, _question(rng), stem)
    assert compared > 30


@pytest.mark.asyncio
@pytest.mark.usefixtures("tiny_segments")
async def test_a_merge_as_large_as_a_large_batch_gives_back_what_it_freed(
    node: Node, make_caller: CallerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes one SR at a time never make a large batch, but their segments merge into large
    ones: a merge of ``GIVE_BACK_DOCS`` docs or more hands its freed arrays back to the system
    as a large batch does (node/allocator.py) — a serving node's memory otherwise grew a step
    at each merge."""
    monkeypatch.setattr(search_index, "GIVE_BACK_DOCS", 9)  # tiers of 1, 3, 9 docs (FANOUT 3)
    given: list[bool] = []
    real = search_index.give_back
    monkeypatch.setattr(search_index, "give_back", lambda: given.append(real()) or True)
    alice = await make_caller("alice", "team")
    for i in range(8):
        await node.e_write(alice, title=f"one {i}", text="quiet fig")
    assert given == []  # merges of 3 docs, none of 9 yet
    await node.e_write(alice, title="one more", text="quiet fig")  # 9 docs: a merge of 9
    assert len(given) == 1
