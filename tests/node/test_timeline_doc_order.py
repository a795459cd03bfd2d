"""Reads that order by doc keys (an SR's ingest millisecond, then arrival) answer exactly as
the time index does.  intersect read from the search index gives the answers of the plain
query: the same SRs, order, pages and ``has_more``, for every caller, window and order —
over SRs that share a millisecond (whose docs are in arrival order, not ``sr_id`` order),
that moved to a later millisecond, that are private, deleted or in another workspace.  And
find's pages in ingest order are each in ``list``'s order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from node.access.callers import Caller
from node.node import Node
from node.views import timeline as tl
from node.views.read_rule import readable_srs
from node.views.srs import DOC_SLOTS, terms
from protocol.clock import Hlc
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, sr_payload

TAGS = ("red", "green", "blue", "Red")
WORDS = ("red", "apple", "pear", "plum", "green", "fig")
ORDERS = ("ingest_time_desc", "ingest_time_asc")


def corpus(foreign: ForeignWriter, start: int, rng: random.Random) -> list[Any]:
    """~240 SR entries over 12 milliseconds (20 a millisecond, in a shuffled sr_id order), a
    tenth private, a tenth in another workspace, then 30 updates moving SRs later."""
    entries, ids = [], []
    for n in range(240):
        sr_id = f"0190a000-0000-7000-8000-{rng.randrange(10**12):012d}"
        ids.append(sr_id)
        fields: dict[str, Any] = {
            "title": " ".join(rng.sample(WORDS, 2)),
            "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 6))),
            "tags": sorted(set(rng.sample(TAGS, rng.randint(0, 2)))),
        }
        if n % 10 == 3:
            fields["visibility"] = "private"
        workspace = "elsewhere" if n % 10 == 7 else "team"
        hlc = Hlc(start + n // 20, n % 20)
        entries.append(foreign.next("sr.put", sr_payload(sr_id, workspace, **fields), hlc=hlc))
    for n, sr_id in enumerate(rng.sample(ids, 30)):
        update = sr_payload(sr_id, create=False, text=" ".join(rng.sample(WORDS, 3)))
        entries.append(foreign.next("sr.put", update, hlc=Hlc(start + 20, n)))
    return entries


async def both(node: Node, q: tl.Query, match: list[str]) -> tuple[Any, Any]:
    reader = node.reader()
    fast = await tl.intersect(reader, q, match)
    plain = await tl.intersect_plain(reader, q, match)
    return ([d["sr_id"] for d in fast.docs], fast.has_more), (
        [d["sr_id"] for d in plain.docs],
        plain.has_more,
    )


@pytest.mark.asyncio
async def test_intersect_from_the_index_equals_the_plain_query(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    rng = random.Random(11)
    start = wall.now - 60_000
    entries = corpus(foreign, start, rng)
    for at in range(0, len(entries), 37):
        await node.receive(entries[at : at + 37], source="peer")
    alice = await make_caller("alice", "team", ("read:workspace", "write:workspace"))
    remote = await make_caller("remote", "team", ("read:workspace",))
    admin = await make_caller("root", "team", ("read:workspace", "admin:workspace"))
    listed = await node.e_timeline(admin, action="list", page_size=100)
    await node.e_delete(admin, sr_id=listed["results"][5]["sr_id"])
    reader = node.reader()
    shared = await reader.scalar(
        "SELECT count(*) FROM srs GROUP BY doc / ? ORDER BY 1 DESC LIMIT 1", (DOC_SLOTS,)
    )
    assert shared >= 15, "SRs should share milliseconds"
    callers: list[Caller] = [alice, remote, admin]
    edges = [None, start, start + 5, start + 11, start + 21]
    checked = 0
    for _ in range(300):
        match = rng.sample(["red", "green", "Red", "apple", "plum pear", "fig"], rng.randint(1, 2))
        low, high = sorted(rng.sample(edges[1:], 2)) if rng.random() < 0.5 else (None, None)
        q = tl.Query(
            rng.choice(callers),
            rng.choice(ORDERS),
            low,
            high,
            page=rng.randint(1, 4),
            page_size=rng.randint(1, 9),
        )
        fast, plain = await both(node, q, match)
        assert fast == plain, (q, match)
        checked += bool(plain[0])
    assert checked > 150, "most questions should have answers"


@pytest.mark.asyncio
async def test_intersect_falls_back_when_the_index_order_does_not_hold(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    # A doc below zero (an overfull millisecond's overflow) is outside the time order: the
    # plain query answers, and still finds it.
    start = wall.now - 60_000
    entries = corpus(foreign, start, random.Random(5))[:40]
    await node.receive(entries, source="peer")
    admin = await make_caller("root", "team", ("read:workspace", "admin:workspace"))
    reader = node.reader()
    newest = await reader.fetchall("SELECT sr_id, doc FROM srs ORDER BY doc DESC LIMIT 1")
    sr_id, doc = newest[0]

    async def write(sql: str, args: tuple[Any, ...]) -> None:
        async def op(txn: Any) -> None:
            txn.add(sql, args)

        await node.store.run(op)

    await write("UPDATE srs SET doc = -1 WHERE sr_id = ?", (sr_id,))
    await write(
        "INSERT INTO sr_fts (sr_fts, rowid, title, text, tags) SELECT 'delete', ?, "
        "title, text, tags_text FROM srs WHERE sr_id = ?",
        (doc, sr_id),
    )
    await write(
        "INSERT INTO sr_fts (rowid, title, text, tags) SELECT -1, title, text, "
        "tags_text FROM srs WHERE sr_id = ?",
        (sr_id,),
    )
    title = (await reader.fetchall("SELECT title FROM srs WHERE sr_id = ?", (sr_id,)))[0][0]
    q = tl.Query(admin, "ingest_time_desc", page_size=50)
    fast, plain = await both(node, q, title.split()[:1])
    assert fast == plain
    assert sr_id in fast[0]


@pytest.mark.asyncio
async def test_find_pages_in_ingest_order_follow_the_time_index_within_each_page(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    rng = random.Random(8)
    entries = corpus(foreign, wall.now - 60_000, rng)
    await node.receive(entries, source="peer")
    for caller in (
        await make_caller("alice", "team", ("read:workspace",)),
        await make_caller("root", "team", ("read:workspace", "admin:workspace")),
    ):
        for order in ORDERS:
            everything = [
                r["sr_id"]
                for page in (1, 2, 3)
                for r in (
                    await node.e_timeline(
                        caller, action="list", order_by=order, page=page, page_size=100
                    )
                )["results"]
            ]
            assert len(everything) < 300
            found: list[str] = []
            for page in range(1, 20):
                answer = await node.e_timeline(
                    caller, action="find", query="fig", page=page, page_size=7, order_by=order
                )
                ids = [r["sr_id"] for r in answer["results"]]
                assert ids == [i for i in everything if i in set(ids)]
                found += ids
                if not answer["has_more"]:
                    break
            assert len(found) > 30
            assert len(set(found)) == len(found)
            assert found != [i for i in everything if i in set(found)]  # pages by relevance


@pytest.mark.asyncio
async def test_term_shares_count_what_the_caller_can_read(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    # shed_idf_noise's shares: counted from the search index and the narrow rows, they equal
    # the definition — readable SRs holding the string as a tag or every one of its terms.
    await node.receive(corpus(foreign, wall.now - 60_000, random.Random(4)), source="peer")
    alice = await make_caller("alice", "team", ("read:workspace",))
    listed = await node.e_timeline(alice, action="list", page_size=100)
    await node.e_delete(
        await make_caller("root", "team", ("read:workspace", "admin:workspace")),
        sr_id=listed["results"][0]["sr_id"],
    )
    reader = node.reader()
    rule, params = readable_srs(alice)
    total = await reader.scalar(f"SELECT count(*) FROM srs WHERE {rule}", params)
    for text in ("red", "Red", "plum pear", "fig apple", "nothing", "!!"):
        ands = " ".join(f'"{t}"' for t in terms(text)) or '""'
        expected = await reader.scalar(
            f"SELECT count(*) FROM srs WHERE {rule} AND (srs.sr_id IN (SELECT sr_id FROM "
            "sr_tags WHERE tag = ?) OR srs.doc IN (SELECT rowid FROM sr_fts WHERE sr_fts "
            "MATCH ?))",
            (*params, text, ands),
        )
        assert await tl.term_share(reader, alice, text) == expected / total, text
