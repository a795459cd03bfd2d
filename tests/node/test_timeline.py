"""e_timeline's reading actions (docs/tools/e_timeline.md): list, find, intersect and
traverse over a hand-built corpus with known answers; windows at their edges; paging;
shed_idf_noise; agent_profile; the read rule (private, deleted, another workspace); and the
moment of a view (docs/tools/e_timeline.md §Views at a moment): a future-dated entry appears
when its time comes, and a late entry with an older clock lands in the middle of an SR's
history.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.views.fold import lane_uuid_of
from protocol.clock import Hlc
from protocol.timefmt import format_instant, parse_instant
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, admit, sr_payload

MINUTE = 60_000
READ_WRITE = ("read:workspace", "write:workspace")
ADMIN = ("read:workspace", "write:workspace", "admin:workspace")
ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")
UNKNOWN = "00000000-0000-7000-8000-0000000000aa"


def ms(text: str) -> int:
    return parse_instant(text).ms


@dataclass(frozen=True)
class Spec:
    title: str
    text: str
    tags: tuple[str, ...] = ()
    lane: str = "default"
    content_time: str | None = None
    conversational: bool = False
    links: tuple[int, ...] = ()  # indexes of earlier SRs of the corpus


# Twelve SRs, written one minute apart (index i at BASE + (i + 1) minutes).  "memo" is held by
# 7 of 12 (noise); "zephyr" by 2 (SR 1 four times, SR 4 twice); "alpha" and "beta" as tags or
# terms.  Content times cross a day edge on 2024-03-05; three SRs have none.
CORPUS = (
    Spec(
        "Kickoff memo",
        "memo about the project kickoff",
        ("alpha",),
        content_time="2024-03-05T00:00:00Z",
    ),
    Spec(
        "Zephyr spotted",
        "zephyr zephyr zephyr memo",
        ("alpha", "beta"),
        content_time="2024-03-05T23:59:59.999Z",
        conversational=True,
    ),
    Spec(
        "Budget",
        "budget memo beta",
        ("alpha",),
        lane="research",
        content_time="2024-03-06T00:00:00Z",
    ),
    Spec("Chat log", "we talked memo", conversational=True),
    Spec(
        "Zephyr again", "a zephyr", ("gamma",), lane="research", content_time="2024-01-10T12:00:00Z"
    ),
    Spec(
        "Release",
        "release notes memo",
        ("beta",),
        content_time="2025-06-01T00:00:00Z",
        links=(0, 1),
    ),
    Spec("Retro", "retro memo", ("alpha",)),
    Spec("Standup", "standup chat", content_time="2023-12-31T23:00:00Z", conversational=True),
    Spec("Design", "design memo alpha", content_time="2024-03-05T12:00:00Z"),
    Spec(
        "Ops", "ops runbook", ("ops",), lane="ops", content_time="2024-02-29T00:00:00Z", links=(5,)
    ),
    Spec("Hiring", "hiring plan"),
    Spec("Wrap", "wrap up", ("beta",), content_time="2024-07-04T00:00:00Z", links=(5,)),
)


@dataclass
class Corpus:
    node: Node
    wall: Wall
    alice: Caller
    ids: list[str] = field(default_factory=list)
    ingest: list[int] = field(default_factory=list)  # ms, per index

    def index(self, results: list[dict[str, Any]]) -> list[int]:
        return [self.ids.index(r["sr_id"]) for r in results]

    def content_key(self, i: int) -> int:
        """What content order sorts by: content_time, else created_time."""
        spec = CORPUS[i]
        return ms(spec.content_time) if spec.content_time else self.ingest[i]

    def ordered(self, order_by: str, among: list[int] | None = None) -> list[int]:
        keys = among if among is not None else list(range(len(self.ids)))
        by = self.ingest.__getitem__ if order_by.startswith("ingest") else self.content_key
        return sorted(keys, key=lambda i: (by(i), self.ids[i]), reverse=order_by.endswith("desc"))

    async def ask(self, caller: Caller | None = None, /, **args: Any) -> dict[str, Any]:
        return await self.node.e_timeline(caller or self.alice, **args)

    async def found(self, caller: Caller | None = None, /, **args: Any) -> list[int]:
        answer = await self.ask(caller, page_size=100, **args)
        assert answer["has_more"] is False
        return self.index(answer["results"])


async def refusal(node: Node, caller: Caller, **args: Any) -> str:
    with pytest.raises(Refusal) as info:
        await node.e_timeline(caller, **args)
    return info.value.text


@pytest_asyncio.fixture
async def corpus(node: Node, wall: Wall, make_caller: CallerFactory) -> Corpus:
    alice = await make_caller("alice", "team", READ_WRITE)
    c = Corpus(node, wall, alice)
    base = wall.now
    for i, spec in enumerate(CORPUS):
        wall.now = base + (i + 1) * MINUTE
        args: dict[str, Any] = {
            "title": spec.title,
            "text": spec.text,
            "tags": list(spec.tags),
            "lane": spec.lane,
            "conversational": spec.conversational,
        }
        if spec.content_time:
            args["content_time"] = spec.content_time
        if spec.links:
            args["links"] = [c.ids[j] for j in spec.links]
        written = await node.e_write(alice, **args)
        assert written["ingest_time"] == format_instant(wall.now)
        c.ids.append(written["sr_id"])
        c.ingest.append(wall.now)
    wall.now = base + 30 * MINUTE
    return c


# -- list ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_list_renders_every_field_and_defaults_to_newest_ingest_first(
    corpus: Corpus,
) -> None:
    answer = await corpus.ask(action="list")
    assert answer["action"] == "list"
    assert (answer["page"], answer["page_size"], answer["has_more"]) == (1, 20, False)
    assert corpus.index(answer["results"]) == list(range(11, -1, -1))
    first = {r["sr_id"]: r for r in answer["results"]}[corpus.ids[1]]
    assert first == {
        "sr_id": corpus.ids[1],
        "title": "Zephyr spotted",
        "text": "zephyr zephyr zephyr memo",
        "lane": "default",
        "lane_uuid": lane_uuid_of("team", "default"),
        "content_time": "2024-03-05T23:59:59.999Z",
        "ingest_time": format_instant(corpus.ingest[1]),
        "created_time": format_instant(corpus.ingest[1]),
        "tags": ["alpha", "beta"],
        "conversational": True,
        "has_correction": False,
        "has_adjustment": False,
        "caller": "alice",
        "node_id": corpus.node.info.node_id,
    }


@pytest.mark.asyncio
async def test_list_in_each_order(corpus: Corpus) -> None:
    assert await corpus.found(action="list", order_by="ingest_time_asc") == list(range(12))
    assert await corpus.found(action="list", order_by="ingest_time_desc") == list(range(11, -1, -1))
    # Content order: content_time, and created_time for an SR that has none (3, 6, 10 were
    # created in 2026, after every content time of the corpus).
    expected = [7, 4, 9, 0, 8, 1, 2, 11, 5, 3, 6, 10]
    assert await corpus.found(action="list", order_by="content_time_asc") == expected
    assert await corpus.found(action="list", order_by="content_time_desc") == expected[::-1]
    for order in ORDERS:
        assert await corpus.found(action="list", order_by=order) == corpus.ordered(order)
    answer = await corpus.ask(action="list", order_by="content_time_asc")
    none = [r for r in answer["results"] if r["content_time"] is None]
    assert corpus.index(none) == [3, 6, 10]  # rendered as null, ordered by created_time


@pytest.mark.asyncio
async def test_windows_at_their_edges_on_content_time(corpus: Corpus) -> None:
    async def window(order: str = "content_time_asc", **args: Any) -> list[int]:
        return await corpus.found(action="list", order_by=order, **args)

    # A bare end_date is inclusive of that whole day; 2024-03-06T00:00Z (SR 2) is outside.
    assert await window(start_date="2024-03-05", end_date="2024-03-05") == [0, 8, 1]
    # An instant end_date is exclusive.
    assert await window(start_date="2024-03-05", end_date="2024-03-06T00:00:00Z") == [0, 8, 1]
    assert await window(start_date="2024-03-05", end_date="2024-03-05T23:59:59.999Z") == [0, 8]
    assert await window(start_date="2024-03-05", end_date="2024-03-06T00:00:00.001Z") == [
        0,
        8,
        1,
        2,
    ]
    # start_date is inclusive, as an instant or a bare date (midnight UTC).
    assert await window(start_date="2024-03-05T23:59:59.999Z", end_date="2024-03-06") == [1, 2]
    assert await window(start_date="2024-03-05T00:00:00.001Z", end_date="2024-03-06") == [
        8,
        1,
        2,
    ]
    # An offset is read as the instant it names.
    assert await window(start_date="2024-03-05T13:00:00+01:00", end_date="2024-03-06") == [
        8,
        1,
        2,
    ]
    assert await window("content_time_desc", start_date="2024-03-05", end_date="2024-03-05") == [
        1,
        8,
        0,
    ]
    # Only one edge.
    assert await window(end_date="2024-01-10T12:00:00Z") == [7]
    assert await window(start_date="2025-06-01") == [5, 3, 6, 10]
    # The created_time fallback is windowed too.
    assert await window(start_date=format_instant(corpus.ingest[6])) == [6, 10]


@pytest.mark.asyncio
async def test_the_window_applies_to_the_time_the_action_orders_by(corpus: Corpus) -> None:
    ingest = corpus.ingest
    start, end = format_instant(ingest[2]), format_instant(ingest[5])
    assert await corpus.found(
        action="list", order_by="ingest_time_asc", start_date=start, end_date=end
    ) == [2, 3, 4]
    assert await corpus.found(action="list", start_date=start, end_date=end) == [4, 3, 2]
    just_after = format_instant(ingest[5] + 1)
    assert await corpus.found(action="list", start_date=start, end_date=just_after) == [
        5,
        4,
        3,
        2,
    ]
    # Nothing was ingested on 2024-03-05, though three SRs are about that day.
    day = {"start_date": "2024-03-05", "end_date": "2024-03-05"}
    assert await corpus.found(action="list", **day) == []
    assert await corpus.found(action="list", order_by="content_time_desc", **day) == [1, 8, 0]
    # Every SR was ingested on 2026-09-21 (UTC).
    assert await corpus.found(action="list", end_date="2026-09-21") == list(range(11, -1, -1))
    assert await corpus.found(action="list", end_date="2026-09-20") == []
    assert await corpus.found(action="list", start_date="2026-09-22") == []


@pytest.mark.asyncio
async def test_paging_to_the_end_in_every_order(corpus: Corpus) -> None:
    for order in ORDERS:
        whole = (await corpus.ask(action="list", order_by=order, page_size=100))["results"]
        assert len(whole) == 12
        for size in range(1, 14):
            got: list[dict[str, Any]] = []
            page = 1
            while True:
                answer = await corpus.ask(action="list", order_by=order, page=page, page_size=size)
                assert (answer["page"], answer["page_size"]) == (page, size)
                got += answer["results"]
                if not answer["has_more"]:
                    break
                assert len(answer["results"]) == size
                page += 1
            assert got == whole, (order, size)
            assert page == -(-12 // size)
            past = await corpus.ask(action="list", order_by=order, page=page + 1, page_size=size)
            assert (past["results"], past["has_more"]) == ([], False)


@pytest.mark.asyncio
async def test_conversational_only(corpus: Corpus) -> None:
    assert await corpus.found(action="list", is_conversational_only=True) == [7, 3, 1]
    assert await corpus.found(
        action="list", is_conversational_only=True, order_by="content_time_asc"
    ) == [7, 1, 3]
    assert await corpus.found(
        action="list",
        is_conversational_only=True,
        order_by="content_time_asc",
        start_date="2024-01-01",
    ) == [1, 3]
    assert await corpus.found(action="find", query="zephyr", is_conversational_only=True) == [1]
    answer = await corpus.ask(action="list", is_conversational_only=True, page_size=2)
    assert (corpus.index(answer["results"]), answer["has_more"]) == ([7, 3], True)


# -- find --------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_find_ranks_then_orders_by_time(corpus: Corpus) -> None:
    # SR 1 holds "zephyr" four times, SR 4 twice: relevance puts 1 first, time order does not.
    assert await corpus.found(action="find", query="zephyr") == [4, 1]
    assert await corpus.found(action="find", query="Zephyr", order_by="ingest_time_asc") == [1, 4]
    assert await corpus.found(action="find", query="zephyr", order_by="content_time_asc") == [4, 1]
    assert await corpus.found(action="find", query="runbook") == [9]
    assert await corpus.found(action="find", query="gamma") == [4]  # tags are searched
    assert await corpus.found(action="find", query="nothing-here") == []
    assert await corpus.found(action="find", query="!!!") == []
    answer = await corpus.ask(action="find", query="zephyr")
    assert answer["action"] == "find"
    assert answer["shed_terms"] == []
    assert [r["rank"] for r in answer["results"]] == [2, 1]
    assert answer["results"][1]["score"] > answer["results"][0]["score"] > 0
    # Relevance decides which SRs are on a page: the most relevant is page 1's.
    page1 = await corpus.ask(action="find", query="zephyr", page_size=1)
    page2 = await corpus.ask(action="find", query="zephyr", page_size=1, page=2)
    assert corpus.index(page1["results"]) == [1]
    assert page1["has_more"] is True
    assert corpus.index(page2["results"]) == [4]
    assert page2["has_more"] is False
    assert [r["rank"] for r in page1["results"] + page2["results"]] == [1, 2]


@pytest.mark.asyncio
async def test_find_pages_by_relevance_then_orders_each_page_by_time(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice", "team", READ_WRITE)
    # 101 SRs hold the rare term "zeta": the first written once in a long text (the least
    # relevant; about the newest moment), 99 once in a short text, the last written three
    # times in a short text (the most relevant; about the oldest moment).  Relevance, writing
    # order and content order all differ.
    wall.now += MINUTE
    weak = (
        await node.e_write(
            alice, title="long", text="zeta " + "filler " * 60, content_time="2030-01-01"
        )
    )["sr_id"]
    wall.now += MINUTE
    plain = [
        r["sr_id"]
        for r in await asyncio.gather(
            *(node.e_write(alice, title=f"note {i}", text="zeta") for i in range(99))
        )
    ]
    wall.now += MINUTE
    strong = (
        await node.e_write(alice, title="short", text="zeta zeta zeta", content_time="2000-01-01")
    )["sr_id"]
    for _ in range(3):  # unrelated SRs keep "zeta" rare enough to weigh
        await node.e_write(alice, title="other", text="unrelated")
    wall.now += MINUTE

    async def page(number: int = 1, size: int = 100, **args: Any) -> dict[str, Any]:
        return await node.e_timeline(
            alice, action="find", query="zeta", page=number, page_size=size, **args
        )

    def ids(answer: dict[str, Any]) -> list[str]:
        return [r["sr_id"] for r in answer["results"]]

    first = await page(order_by="content_time_desc")
    assert first["has_more"] is True
    by_content = ids(first)
    assert set(by_content) == {strong, *plain}  # the least relevant is on the next page ...
    assert by_content[-1] == strong  # ... and the most relevant is placed by time: the oldest
    assert first["results"][-1]["rank"] == 1
    assert sorted(r["rank"] for r in first["results"]) == list(range(1, 101))
    assert ids(await page())[0] == strong  # the newest written
    assert ids(await page(order_by="content_time_asc")) == by_content[::-1]
    last = await page(2)
    assert (ids(last), last["results"][0]["rank"], last["has_more"]) == ([weak], 101, False)
    assert (await page(3))["results"] == []
    # Pages of 40 hold ranks 1–40, 41–80 and 81–101, each in time order.
    pages = [await page(n, 40, order_by="content_time_desc") for n in (1, 2, 3)]
    assert [a["has_more"] for a in pages] == [True, True, False]
    ranks = [sorted(r["rank"] for r in a["results"]) for a in pages]
    assert ranks == [list(range(1, 41)), list(range(41, 81)), list(range(81, 102))]
    assert ids(pages[0])[-1] == strong
    assert ids(pages[2])[0] == weak  # content time 2030: the newest of its page
    # Once the most relevant is deleted here, the least relevant is among the first 100.
    await node.e_delete(alice, sr_id=strong)
    again = await page(order_by="content_time_desc")
    assert (ids(again)[0], again["has_more"], len(again["results"])) == (weak, False, 100)
    assert strong not in ids(again)


@pytest.mark.asyncio
async def test_find_breaks_ties_at_the_100th_by_sr_id(
    node: Node, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    # 130 SRs score exactly alike; the 100 kept are those with the smallest sr_ids, not the
    # first or last to arrive (docs follow ingest time; sr_ids do not).
    alice = await make_caller("alice", "team", READ_WRITE)
    ids = [f"0190a000-0000-7000-8000-{i:012d}" for i in range(130)]
    random.Random(3).shuffle(ids)
    entries = [foreign.next("sr.put", sr_payload(i, title="same", text="theta")) for i in ids]
    entries.append(foreign.next("sr.put", sr_payload(ids[0][:-3] + "999", text="unrelated")))
    assert (await node.receive(entries, source="peer")).stored == len(entries)
    answer = await node.e_timeline(
        alice, action="find", query="theta", page_size=100, order_by="ingest_time_asc"
    )
    found = [r["sr_id"] for r in answer["results"]]
    assert sorted(found) == sorted(ids)[:100]
    assert found == [i for i in ids if i in set(found)]  # then by time: arrival order here
    ranks = {r["sr_id"]: r["rank"] for r in answer["results"]}
    assert [ranks[i] for i in sorted(found)] == list(range(1, 101))  # ties ranked by sr_id
    assert len({r["score"] for r in answer["results"]}) == 1
    assert answer["has_more"] is True


# -- shed_idf_noise ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_shed_idf_noise_both_ways(corpus: Corpus) -> None:
    memo = [0, 1, 2, 3, 5, 6, 8]  # 7 of 12 readable SRs: more than half
    shed = await corpus.ask(action="find", query="memo zephyr", page_size=100)
    assert shed["shed_terms"] == ["memo"]
    assert corpus.index(shed["results"]) == [4, 1]
    kept = await corpus.ask(action="find", query="memo zephyr", page_size=100, shed_idf_noise=False)
    assert kept["shed_terms"] == []
    assert corpus.index(kept["results"]) == corpus.ordered("ingest_time_desc", [*memo, 4])
    # A lone term is never shed, however common.
    alone = await corpus.ask(action="find", query="memo", page_size=100)
    assert alone["shed_terms"] == []
    assert corpus.index(alone["results"]) == memo[::-1]
    # Intersect sheds match strings the same way.
    both = await corpus.ask(action="intersect", match=["memo", "zephyr"], page_size=100)
    assert both["shed_terms"] == ["memo"]
    assert corpus.index(both["results"]) == [4, 1]
    strict = await corpus.ask(
        action="intersect", match=["memo", "zephyr"], page_size=100, shed_idf_noise=False
    )
    assert strict["shed_terms"] == []
    assert corpus.index(strict["results"]) == [1]
    # With fewer than 10 readable SRs nothing is shed: delete three (memo is then 6 of 9).
    for i in (7, 10, 11):
        await corpus.node.e_delete(corpus.alice, sr_id=corpus.ids[i])
    sparse = await corpus.ask(action="find", query="memo zephyr", page_size=100)
    assert sparse["shed_terms"] == []
    assert corpus.index(sparse["results"]) == corpus.ordered("ingest_time_desc", [*memo, 4])


@pytest.mark.asyncio
async def test_shed_keeps_the_rarest_term(corpus: Corpus) -> None:
    # memo: 7 of 12; alpha (tag or term): 5 of 12; zephyr: 2 of 12.
    answer = await corpus.ask(action="find", query="memo alpha zephyr", page_size=100)
    assert answer["shed_terms"] == ["memo"]
    # Three more SRs with both: memo 10 of 15, alpha 8 of 15 — both noise now.
    for _ in range(3):
        corpus.wall.now += MINUTE
        await corpus.node.e_write(corpus.alice, title="alpha memo", text="x")
    answer = await corpus.ask(action="find", query="memo alpha zephyr", page_size=100)
    assert answer["shed_terms"] == ["memo", "alpha"]
    assert corpus.index(answer["results"]) == [4, 1]
    # When every term is noise, the rarest stays.
    answer = await corpus.ask(action="find", query="memo alpha", page_size=100)
    assert answer["shed_terms"] == ["memo"]
    assert len(answer["results"]) == 8
    # The rarest kept is the rarest some SR holds: a word nothing holds would find nothing.
    answer = await corpus.ask(action="find", query="memo alpha quux", page_size=100)
    assert answer["shed_terms"] == ["memo"]
    assert len(answer["results"]) == 8


@pytest.mark.asyncio
async def test_find_leaves_stop_words_out_of_the_query(corpus: Corpus) -> None:
    # "zephyr" alone finds 4 and 1; the question's function words change nothing, even with
    # shed_idf_noise off (they are not terms at all) — and shed_terms does not name them.
    alone = await corpus.ask(action="find", query="zephyr", shed_idf_noise=False)
    asked = await corpus.ask(
        action="find", query="What did they do with the zephyr?", shed_idf_noise=False
    )
    assert asked["results"] == alone["results"]
    assert corpus.index(asked["results"]) == [4, 1]
    assert (await corpus.ask(action="find", query="what is the zephyr"))["shed_terms"] == []
    # A query of nothing but stop words keeps them: "the" is in the text of SR 0.
    assert 0 in await corpus.found(action="find", query="the")


# -- intersect ---------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_intersect_needs_every_match_as_a_tag_or_a_term(corpus: Corpus) -> None:
    # alpha: tag of 0, 1, 2, 6; term of 8.  beta: tag of 1, 5, 11; term of 2.
    assert await corpus.found(action="intersect", match=["alpha"]) == [8, 6, 2, 1, 0]
    assert await corpus.found(action="intersect", match=["alpha", "beta"]) == [2, 1]
    assert await corpus.found(
        action="intersect", match=["beta", "alpha"], order_by="ingest_time_asc"
    ) == [1, 2]
    assert await corpus.found(action="intersect", match=["alpha", "beta", "gamma"]) == []
    assert await corpus.found(action="intersect", match="gamma") == [4]
    assert await corpus.found(action="intersect", match=["zephyr spotted"]) == [1]
    assert await corpus.found(action="intersect", match=["spotted zephyr"]) == []
    assert await corpus.found(
        action="intersect",
        match=["alpha"],
        order_by="content_time_asc",
        start_date="2024-03-05",
        end_date="2024-03-05",
    ) == [0, 8, 1]
    answer = await corpus.ask(action="intersect", match=["alpha"], page_size=2, page=3)
    assert (corpus.index(answer["results"]), answer["has_more"]) == ([0], False)
    assert answer["action"] == "intersect"
    assert answer["shed_terms"] == []


# -- traverse ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_traverse_follows_links_both_ways_at_depth_one(corpus: Corpus) -> None:
    # 5 links to 0 and 1; 9 and 11 link to 5.
    five = corpus.ids[5]
    assert await corpus.found(action="traverse", sr_id=five) == [11, 9, 1, 0]
    assert await corpus.found(action="traverse", sr_id=five, order_by="content_time_asc") == [
        9,
        0,
        1,
        11,
    ]
    assert await corpus.found(action="traverse", sr_id=corpus.ids[11]) == [5]
    assert await corpus.found(action="traverse", sr_id=corpus.ids[0]) == [5]
    assert await corpus.found(action="traverse", sr_id=corpus.ids[10]) == []
    assert await corpus.found(
        action="traverse",
        sr_id=five,
        order_by="ingest_time_asc",
        start_date=format_instant(corpus.ingest[1]),
    ) == [1, 9, 11]
    answer = await corpus.ask(action="traverse", sr_id=five, page_size=3)
    assert (corpus.index(answer["results"]), answer["has_more"]) == ([11, 9, 1], True)
    # A link to an SR that does not exist, and a link to itself, show nothing.
    corpus.wall.now += MINUTE
    await corpus.node.e_write(corpus.alice, sr_id=corpus.ids[10], links=[UNKNOWN, corpus.ids[10]])
    assert await corpus.found(action="traverse", sr_id=corpus.ids[10]) == []


@pytest.mark.asyncio
async def test_traverse_from_an_unknown_or_unreadable_anchor(
    corpus: Corpus, make_caller: CallerFactory
) -> None:
    node = corpus.node
    bob = await make_caller("bob", "team", READ_WRITE)
    olga = await make_caller("olga", "other", READ_WRITE)
    secret = (await node.e_write(bob, title="bob's", text="x", visibility="private"))["sr_id"]
    elsewhere = (await node.e_write(olga, title="olga's", text="x"))["sr_id"]
    gone = corpus.ids[10]
    await node.e_delete(corpus.alice, sr_id=gone)
    for anchor in (UNKNOWN, "not-a-uuid", secret, elsewhere, gone):
        text = await refusal(node, corpus.alice, action="traverse", sr_id=anchor)
        assert text == f"Invalid timeline spec: unknown sr_id: {anchor}"
    assert (await node.e_timeline(bob, action="traverse", sr_id=secret))["results"] == []


# -- corrections, adjustments, lanes ---------------------------------------------------------


@pytest.mark.asyncio
async def test_correction_and_adjustment_flags(corpus: Corpus) -> None:
    node, alice, wall = corpus.node, corpus.alice, corpus.wall
    wall.now += MINUTE
    await node.e_correct(alice, sr_id=corpus.ids[0], reason="typo", text="kickoff quokka")
    corrected_at = wall.now
    wall.now += MINUTE
    await node.e_adjust(
        alice, sr_id=corpus.ids[3], tags=["fixed"], content_time="2020-01-01T00:00:00Z"
    )
    adjusted_at = wall.now
    wall.now += MINUTE
    answer = await corpus.ask(action="list", page_size=100)
    flags = {
        corpus.ids.index(r["sr_id"]): (r["has_correction"], r["has_adjustment"])
        for r in answer["results"]
    }
    assert flags[0] == (True, False)
    assert flags[3] == (False, True)
    assert all(flags[i] == (False, False) for i in flags if i not in (0, 3))
    # The newest entry of an SR is its ingest time: both move to the front.
    assert corpus.index(answer["results"])[:2] == [3, 0]
    by_id = {r["sr_id"]: r for r in answer["results"]}
    zero, three = by_id[corpus.ids[0]], by_id[corpus.ids[3]]
    assert zero["text"] == "kickoff quokka"
    assert zero["title"] == "Kickoff memo"
    assert zero["ingest_time"] == format_instant(corrected_at)
    assert zero["created_time"] == format_instant(corpus.ingest[0])
    assert three["tags"] == ["fixed"]
    assert three["content_time"] == "2020-01-01T00:00:00Z"
    assert three["ingest_time"] == format_instant(adjusted_at)
    assert (await corpus.found(action="list", order_by="content_time_asc"))[0] == 3
    assert await corpus.found(action="find", query="quokka") == [0]
    assert 0 not in await corpus.found(action="find", query="about")
    assert await corpus.found(action="intersect", match=["fixed"]) == [3]
    # The flags are sticky: a later plain update keeps them.
    wall.now += MINUTE
    await node.e_write(alice, sr_id=corpus.ids[0], title="Kickoff")
    again = await corpus.ask(action="find", query="quokka")
    assert (again["results"][0]["has_correction"], again["results"][0]["title"]) == (
        True,
        "Kickoff",
    )


@pytest.mark.asyncio
async def test_lane_and_lane_uuid(corpus: Corpus, make_caller: CallerFactory) -> None:
    node, alice = corpus.node, corpus.alice
    answer = await corpus.ask(action="list", page_size=100)
    lanes = {corpus.ids.index(r["sr_id"]): (r["lane"], r["lane_uuid"]) for r in answer["results"]}
    assert {lane for lane, _ in lanes.values()} == {"default", "research", "ops"}
    for lane, lane_id in lanes.values():
        assert lane_id == lane_uuid_of("team", lane)
        assert uuid.UUID(lane_id).version == 5  # derived, not random
    assert lanes[0][1] == lanes[3][1] != lanes[2][1] == lanes[4][1] != lanes[9][1]
    # Stable: another workspace's lane of the same name has another id; an explicit one wins.
    olga = await make_caller("olga", "other", READ_WRITE)
    await node.e_write(olga, title="elsewhere", text="x")
    theirs = (await node.e_timeline(olga, action="list"))["results"]
    assert [(r["lane"], r["lane_uuid"]) for r in theirs] == [
        ("default", lane_uuid_of("other", "default"))
    ]
    assert lane_uuid_of("other", "default") != lane_uuid_of("team", "default")
    chosen = str(uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF))
    corpus.wall.now += MINUTE
    sr_id = (
        await node.e_write(alice, title="own lane", text="x", lane="research", lane_uuid=chosen)
    )["sr_id"]
    mine = (await corpus.ask(action="list", page_size=1))["results"][0]
    assert (mine["sr_id"], mine["lane"], mine["lane_uuid"]) == (sr_id, "research", chosen)
    # An adjusted lane gets that lane's derived id unless one is given.
    corpus.wall.now += MINUTE
    await node.e_adjust(alice, sr_id=corpus.ids[9], lane="research")
    moved = (await corpus.ask(action="list", page_size=1))["results"][0]
    assert (moved["lane"], moved["lane_uuid"]) == ("research", lane_uuid_of("team", "research"))


# -- agent_profile -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_agent_profile_presets(tmp_path: Path, wall: Wall) -> None:
    data = tmp_path / "profiled"
    await Node.init(data, wall=wall)
    (data / "config.toml").write_text(
        '[profiles.brief]\npage_size = 2\norder_by = "ingest_time_asc"\n\n'
        '[profiles.research]\nlanes = ["research"]\n'
    )
    async with Node.open(data, wall=wall) as node:
        alice = await node.authenticate(
            (await node.create_token("alice", "team", READ_WRITE)).token
        )
        ids = []
        for i, lane in enumerate(("default", "research", "default", "research", "default")):
            wall.now += MINUTE
            ids.append((await node.e_write(alice, title=f"sr {i}", text="x", lane=lane))["sr_id"])

        async def got(**args: Any) -> tuple[list[int], int, bool]:
            answer = await node.e_timeline(alice, action="list", **args)
            return (
                [ids.index(r["sr_id"]) for r in answer["results"]],
                answer["page_size"],
                answer["has_more"],
            )

        assert await got() == ([4, 3, 2, 1, 0], 20, False)
        assert await got(agent_profile="brief") == ([0, 1], 2, True)
        assert await got(agent_profile="brief", page=3) == ([4], 2, False)
        # What the call says wins over the profile.
        assert await got(agent_profile="brief", page_size=3) == ([0, 1, 2], 3, True)
        assert await got(agent_profile="brief", order_by="content_time_desc") == ([4, 3], 2, True)
        # An argument equal to its documented default counts as not sent: the profile applies.
        assert await got(agent_profile="brief", order_by="ingest_time_desc") == ([0, 1], 2, True)
        assert await got(agent_profile="research") == ([3, 1], 20, False)
        answer = await node.e_timeline(alice, action="find", query="sr", agent_profile="research")
        assert [ids.index(r["sr_id"]) for r in answer["results"]] == [3, 1]
        for name in ("nope", "Brief", ""):
            text = await refusal(node, alice, action="list", agent_profile=name)
            assert text == f"Invalid timeline spec: unknown agent_profile {name!r}"


# -- the read rule -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_private_srs_are_seen_by_their_owner_and_admins_only(
    corpus: Corpus, make_caller: CallerFactory
) -> None:
    node = corpus.node
    bob = await make_caller("bob", "team", READ_WRITE)
    root = await make_caller("root", "team", ADMIN)
    questions: list[dict[str, Any]] = [
        {"action": "list", "page_size": 5, "page": page} for page in (1, 2, 3)
    ] + [
        {"action": "list", "order_by": "content_time_asc", "page_size": 100},
        {"action": "find", "query": "memo zephyr secret"},
        {"action": "find", "query": "memo zephyr secret", "shed_idf_noise": False},
        {"action": "intersect", "match": ["alpha", "memo"]},
        {"action": "traverse", "sr_id": corpus.ids[5]},
    ]
    before = [await corpus.ask(**q) for q in questions]
    corpus.wall.now += MINUTE
    secret = (
        await node.e_write(
            bob,
            title="secret memo",
            text="zephyr alpha memo memo",
            tags=["alpha"],
            visibility="private",
            links=[corpus.ids[5]],
        )
    )["sr_id"]
    corpus.wall.now += MINUTE
    # Alice sees exactly what she saw before: results, order, pages, flags, shed terms.
    assert [await corpus.ask(**q) for q in questions] == before
    for who in (bob, root):
        assert secret in [r["sr_id"] for r in (await corpus.ask(who, action="list"))["results"]]
        assert (await corpus.ask(who, action="find", query="secret"))["results"][0]["sr_id"] == (
            secret
        )
        traversed = await corpus.ask(who, action="traverse", sr_id=corpus.ids[5], page_size=100)
        assert secret in [r["sr_id"] for r in traversed["results"]]
    assert (await corpus.ask(action="find", query="secret"))["results"] == []


@pytest.mark.asyncio
async def test_deleted_srs_leave_the_timeline_and_come_back(corpus: Corpus) -> None:
    node, alice = corpus.node, corpus.alice
    questions: list[dict[str, Any]] = [
        {"action": "list", "page_size": 100},
        {"action": "find", "query": "zephyr"},
        {"action": "intersect", "match": ["gamma"]},
        {"action": "traverse", "sr_id": corpus.ids[5]},
    ]
    before = [await corpus.ask(**q) for q in questions]
    await node.e_delete(alice, sr_id=corpus.ids[4])
    await node.e_delete(alice, sr_id=corpus.ids[9])
    listed = await corpus.found(action="list")
    assert listed == [i for i in range(11, -1, -1) if i not in (4, 9)]
    assert await corpus.found(action="find", query="zephyr") == [1]
    assert await corpus.found(action="intersect", match=["gamma"]) == []
    assert await corpus.found(action="traverse", sr_id=corpus.ids[5]) == [11, 1, 0]
    admin = await node.authenticate((await node.create_token("root", "team", ADMIN)).token)
    assert 4 not in await corpus.found(admin, action="list")  # local deletion hides for all
    await node.e_undelete(alice, sr_id=corpus.ids[4])
    await node.e_undelete(alice, sr_id=corpus.ids[9])
    assert [await corpus.ask(**q) for q in questions] == before


@pytest.mark.asyncio
async def test_another_workspace_is_invisible(corpus: Corpus, make_caller: CallerFactory) -> None:
    node = corpus.node
    olga = await make_caller("olga", "other", ADMIN)
    before = await corpus.ask(action="list", page_size=100)
    corpus.wall.now += MINUTE
    theirs = (
        await node.e_write(
            olga, title="other memo", text="zephyr", tags=["alpha"], links=[corpus.ids[5]]
        )
    )["sr_id"]
    corpus.wall.now += MINUTE
    assert await corpus.ask(action="list", page_size=100) == before
    assert await corpus.found(action="find", query="zephyr") == [4, 1]
    assert await corpus.found(action="traverse", sr_id=corpus.ids[5]) == [11, 9, 1, 0]
    assert [r["sr_id"] for r in (await corpus.ask(olga, action="list"))["results"]] == [theirs]
    assert (await corpus.ask(olga, action="find", query="memo"))["results"][0]["sr_id"] == theirs
    # Olga's link leads nowhere she can read.
    assert (await corpus.ask(olga, action="traverse", sr_id=theirs))["results"] == []


# -- the moment of a view (docs/tools/e_timeline.md §Views at a moment) ------------------------


@pytest.mark.asyncio
async def test_the_store_says_when_a_read_must_bring_the_views_to_the_moment(
    node: Node, wall: Wall, foreign: ForeignWriter
) -> None:
    """``views_due``: a version held for later is not due until its time, then is, until a
    read's ``catch_up_views`` makes it current (a read that skips the loop asks it first:
    node/tools/items.py)."""
    later = wall.now + 3_600_000
    future_id = "00000000-0000-7000-8000-000000000002"
    entry = foreign.next("sr.put", sr_payload(future_id, title="later"), hlc=Hlc(later, 0))
    assert (await node.receive([entry], source="peer")).stored == 1
    assert not node.store.views_due()
    wall.now = later
    assert node.store.views_due()
    await node.store.catch_up_views()
    assert not node.store.views_due()


@pytest.mark.asyncio
async def test_a_future_entry_appears_when_its_time_comes(
    node: Node, wall: Wall, foreign: ForeignWriter, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice", "team", READ_WRITE)
    reader = node.reader()
    present_id = "00000000-0000-7000-8000-000000000001"
    future_id = "00000000-0000-7000-8000-000000000002"
    now = wall.now
    later = now + 3_600_000  # an hour ahead: beyond the 5-minute max_clock_skew
    entries = [
        foreign.next("sr.put", sr_payload(present_id, title="today"), hlc=Hlc(now - 1000, 0)),
        foreign.next("sr.put", sr_payload(future_id, title="from the future"), hlc=Hlc(later, 0)),
        foreign.next(
            "sr.put",
            sr_payload(present_id, create=False, title="rewritten later"),
            hlc=Hlc(later + 10, 0),
        ),
    ]
    report = await node.receive(entries, source="peer")
    assert report.stored == 3
    # The authority's member.add of this node and of the foreign writer, and these.
    assert await reader.count("headers") == 5

    async def titles() -> dict[str, str]:
        answer = await node.e_timeline(alice, action="list")
        return {r["sr_id"]: r["title"] for r in answer["results"]}

    assert await titles() == {present_id: "today"}
    # A late entry of another writer, ordered before the waiting version, folds the SR again:
    # what is shown is still the newest version whose time has come.
    other = ForeignWriter(node.info.mesh, seed=b"\x09" * 32, epoch=b"\x09" * 8)
    await admit(node, other)
    late = other.next(
        "sr.put", sr_payload(present_id, create=False, text="late"), hlc=Hlc(now - 500, 0)
    )
    assert (await node.receive([late], source="peer-2")).stored == 1
    assert await titles() == {present_id: "today"}
    shown = (await node.e_timeline(alice, action="list"))["results"][0]
    assert (shown["text"], shown["ingest_time"]) == ("late", format_instant(now - 500))
    wall.now = now + 30 * MINUTE
    assert await titles() == {present_id: "today"}
    wall.now = later - 1
    assert await titles() == {present_id: "today"}
    wall.now = later
    assert await titles() == {present_id: "today", future_id: "from the future"}
    found = await node.e_timeline(alice, action="find", query="future")
    assert [(r["sr_id"], r["ingest_time"]) for r in found["results"]] == [
        (future_id, format_instant(later))
    ]
    wall.now = later + 10
    assert await titles() == {present_id: "rewritten later", future_id: "from the future"}
    listed = (await node.e_timeline(alice, action="list"))["results"]
    texts = {r["sr_id"]: r["text"] for r in listed}
    assert texts[present_id] == "late"
    # A future SR whose (later) update arrives before its creation: shown from its creation.
    # (Within the allowed skew an entry moves this node's clock, and so its moment, forward:
    # these are an hour ahead again.)
    ahead_id = "00000000-0000-7000-8000-000000000003"
    ahead = later + 3_600_000
    update = other.next(
        "sr.put", sr_payload(ahead_id, create=False, title="ahead, updated"), hlc=Hlc(ahead + 20, 0)
    )
    create = foreign.next("sr.put", sr_payload(ahead_id, title="ahead"), hlc=Hlc(ahead + 15, 0))
    await node.receive([update], source="peer-2")
    await node.receive([create], source="peer")
    wall.now = ahead + 14
    assert ahead_id not in await titles()
    wall.now = ahead + 15
    assert (await titles())[ahead_id] == "ahead"
    wall.now = ahead + 20
    assert (await titles())[ahead_id] == "ahead, updated"
    assert await reader.count("sr_due") == 0


@pytest.mark.asyncio
async def test_a_late_entry_with_an_older_clock_lands_in_the_middle(
    node: Node, wall: Wall, make_caller: CallerFactory
) -> None:
    alice = await make_caller("alice", "team", READ_WRITE)
    first = ForeignWriter(node.info.mesh, seed=b"\x11" * 32, epoch=b"\x01" * 8)
    second = ForeignWriter(node.info.mesh, seed=b"\x22" * 32, epoch=b"\x02" * 8)
    await admit(node, first, second)
    sr_id = "00000000-0000-7000-8000-000000000010"
    t0 = wall.now - 10 * MINUTE
    create = first.next("sr.put", sr_payload(sr_id, title="v0", text="base"), hlc=Hlc(t0, 0))
    newer = first.next("sr.put", sr_payload(sr_id, create=False, title="v2"), hlc=Hlc(t0 + 2000, 0))
    older = second.next(
        "sr.put", sr_payload(sr_id, create=False, title="v1", text="middle"), hlc=Hlc(t0 + 1000, 0)
    )
    await node.receive([create, newer], source="a")
    await node.receive([older], source="b")  # arrives last, ordered in the middle

    async def state() -> dict[str, Any]:
        (result,) = (await node.e_timeline(alice, action="list"))["results"]
        return result

    now = await state()
    # The newer title wins; the older entry still set the text (nothing newer replaced it).
    assert (now["title"], now["text"]) == ("v2", "middle")
    assert now["ingest_time"] == format_instant(t0 + 2000)
    assert now["created_time"] == format_instant(t0)
    reader = node.reader()
    walls = await reader.fetchall(
        "SELECT wall FROM sr_versions WHERE sr_id = ? ORDER BY ord", (sr_id,)
    )
    assert [w for (w,) in walls] == [t0, t0 + 1000, t0 + 2000]
    # Same wall and counter from both writers: the writer key decides, not arrival.
    tie = Hlc(t0 + 3000, 0)
    from_first = first.next("sr.put", sr_payload(sr_id, create=False, title="first's"), hlc=tie)
    from_second = second.next("sr.put", sr_payload(sr_id, create=False, title="second's"), hlc=tie)
    winner = "first's" if first.key.public > second.key.public else "second's"
    await node.receive([from_second], source="b")
    await node.receive([from_first], source="a")
    assert (await state())["title"] == winner
