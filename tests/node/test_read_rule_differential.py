"""What a caller cannot read changes nothing it sees (docs/authority.md §The differential test).

The test is differential: the same calls go to a node holding rows the caller cannot read and
to a node where those rows were never written, and the answers must be identical — results,
order, page boundaries, ``has_more``, ``shed_terms``, refusal texts; ``e_audit`` compared
without its node-wide ``seq`` positions (the one documented exception).

All nodes are copies of one freshly initialised node (one mesh), and every SR arrives from
other writers' logs, so ids and times are the same on each node.  The hidden rows are built to
move what a leak would move: they share the visible SRs' vocabulary (document frequencies,
``shed_idf_noise`` shares), are longer (average length), sit at the same ingest times with
interleaved ids (tie-breaks, page boundaries), and link to visible SRs (``traverse``).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from protocol.clock import Hlc
from tests.node.helpers import ForeignWriter, Wall, admit, sr_payload

BASE = 1_790_000_000_000
DAY = 86_400_000
WORDS = ("alpha", "beta", "gamma", "delta")


def _id(n: int) -> str:
    return f"00000000-0000-7000-8000-{n:012d}"


def _visible(i: int) -> dict[str, Any]:
    """SR i of the visible log: workspace SRs by ``remote``, every seventh private to bob."""
    words = [WORDS[i % 4]] * (1 + i % 3) + [WORDS[(i + 1) % 4]]
    fields: dict[str, Any] = {
        "title": f"note {i} {words[0]}",
        "text": " ".join(words),
        "tags": [f"t{i % 5}", WORDS[i % 4]],
        "lane": ("ops", "research")[i % 2],
        "conversational": i % 3 == 0,
        "links": [_id(3 * (i - 1)), _id(3 * (i - 1) + 1)] if i else [],
    }
    if i % 4:
        fields["content_time"] = BASE - (i % 10) * DAY
    if i % 7 == 0:
        fields |= {"visibility": "private", "principal": "bob"}
    return sr_payload(_id(3 * i), "team", **fields)


def _hidden(i: int, offset: int, workspace: str, private: bool) -> dict[str, Any]:
    """A hidden SR: long, heavy in ``alpha``, linking to visible SR i."""
    return sr_payload(
        _id(3 * i + offset),
        workspace,
        title=f"hidden {i} alpha",
        text=" ".join(["alpha"] * 20 + [WORDS[i % 4]] * 5),
        tags=["alpha", f"t{i % 5}"],
        lane=("ops", "research")[i % 2],
        conversational=True,
        links=[_id(3 * i)],
        visibility="private" if private else "workspace",
        content_time=BASE - (i % 10) * DAY,
    )


def _log(seed: int, payloads: list[dict[str, Any]], mesh: bytes) -> list[Any]:
    writer = ForeignWriter(mesh, seed=bytes([seed]) * 32)
    # Ten ms apart, so hidden and visible SRs share ingest times and only sr_id breaks ties.
    return [
        writer.next("sr.put", p, hlc=Hlc(BASE + 10 * (n // 2), n % 2))
        for n, p in enumerate(payloads)
    ]


VISIBLE = [_visible(i) for i in range(150)]
PRIVATE_OF_OTHERS = [_hidden(i, 1, "team", private=True) for i in range(0, 150, 2)]
OTHER_WORKSPACE = [_hidden(i, 2, "elsewhere", private=i % 3 == 0) for i in range(0, 150, 3)]


async def _outcome(node: Node, tool: str, caller: Caller, args: dict[str, Any]) -> Any:
    try:
        return await getattr(node, tool)(caller, **args)
    except Refusal as exc:
        return {"error": exc.text}


def _timeline_calls() -> Iterator[dict[str, Any]]:
    orders = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")
    for order in orders:
        for size in (1, 7, 100):
            for page in (1, 2, 3, 20):
                yield {"action": "list", "order_by": order, "page_size": size, "page": page}
        yield {"action": "list", "order_by": order, "is_conversational_only": True}
        for start, end in (
            ("2026-09-15", "2026-09-19"),
            ("2026-09-21T14:13:20.300Z", "2026-09-21T14:13:20.600Z"),
        ):
            yield {
                "action": "list",
                "order_by": order,
                "start_date": start,
                "end_date": end,
                "page_size": 9,
            }
            yield {
                "action": "intersect",
                "match": ["beta"],
                "order_by": order,
                "start_date": start,
                "end_date": end,
                "page_size": 4,
            }
        for query in ("alpha", "alpha beta", "beta gamma alpha", "delta t3", "hidden"):
            for shed in (True, False):
                for page in (1, 2, 6):
                    yield {
                        "action": "find",
                        "query": query,
                        "order_by": order,
                        "shed_idf_noise": shed,
                        "page": page,
                        "page_size": 19,
                    }
        for match in (["alpha"], ["alpha", "beta"], ["t1", "gamma"], ["hidden"]):
            for shed in (True, False):
                yield {
                    "action": "intersect",
                    "match": match,
                    "order_by": order,
                    "shed_idf_noise": shed,
                    "page_size": 11,
                }
    for i in (0, 1, 2, 6, 7, 30, 149):
        yield {"action": "traverse", "sr_id": _id(3 * i)}
    for i in (0, 6, 30):  # the hidden SRs themselves: unknown to this caller
        yield {"action": "traverse", "sr_id": _id(3 * i + 1)}
        yield {"action": "traverse", "sr_id": _id(3 * i + 2)}


async def _audit_pages(node: Node, caller: Caller, limit: int) -> list[dict[str, Any]]:
    """Every event the caller is shown, paged by ``covered_seq``, without seq values."""
    events, since = [], 0
    while True:
        answer = await node.e_audit(caller, since_seq=since, limit=limit)
        events += [{k: v for k, v in e.items() if k != "seq"} for e in answer["events"]]
        if not answer["events"]:
            return events
        since = answer["covered_seq"]


async def _compare(
    hiding: Node, clean: Node, principal: str, scopes: tuple[str, ...], *, writes: bool
) -> None:
    async def caller(node: Node) -> Caller:
        issued = await node.create_token(principal, "team", scopes)
        return await node.authenticate(issued.token)

    mine, theirs = await caller(hiding), await caller(clean)
    for args in _timeline_calls():
        seen = await _outcome(hiding, "e_timeline", mine, args)
        assert seen == await _outcome(clean, "e_timeline", theirs, args), args
    for limit in (1, 5, 1000):
        assert await _audit_pages(hiding, mine, limit) == await _audit_pages(clean, theirs, limit)
    if not writes:
        return
    for sr_id in (_id(1), _id(2), _id(3 * 30 + 1)):  # hidden here, never written there
        for tool, args in (
            ("e_write", {"sr_id": sr_id, "title": "x"}),
            ("e_correct", {"sr_id": sr_id, "title": "x", "reason": "r"}),
            ("e_adjust", {"sr_id": sr_id, "tags": ["x"]}),
            ("e_delete", {"sr_id": sr_id}),
            ("e_undelete", {"sr_id": sr_id}),
        ):
            seen = await _outcome(hiding, tool, mine, args)
            assert (
                seen
                == await _outcome(clean, tool, theirs, args)
                == {"error": f"unknown sr_id: {sr_id}"}
            )


@pytest_asyncio.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


async def _nodes(
    tmp_path: Path, stack: AsyncExitStack, *hidden: list[dict[str, Any]]
) -> tuple[Node, Node]:
    """(a node holding the visible SRs and ``hidden``, a node holding the visible SRs only):
    copies of one initialised node, so one mesh (the writers admitted)."""
    wall = Wall(BASE + 100 * DAY)
    info = await Node.init(tmp_path / "seed", wall=wall)
    async with Node.open(tmp_path / "seed", wall=wall) as seed:
        await admit(
            seed, *(ForeignWriter(info.mesh, seed=bytes([s]) * 32) for s in (0x11, 0x22, 0x33))
        )
    out = []
    for name, extra in (("hiding", hidden), ("clean", ())):
        shutil.copytree(tmp_path / "seed", tmp_path / name)
        node = await stack.enter_async_context(Node.open(tmp_path / name, wall=wall))
        logs = [(0x11, VISIBLE), *zip((0x22, 0x33), extra, strict=False)]
        for seed, payloads in logs:
            report = await node.receive(_log(seed, payloads, node.info.mesh), source=f"{seed}")
            assert report.stored == len(payloads)
        out.append(node)
    return out[0], out[1]


async def _live(node: Node, workspace: str) -> int:
    reader = node.reader()
    count = await reader.scalar(
        "SELECT count(*) FROM srs WHERE live = 1 AND workspace = ?", (workspace,)
    )
    return int(count)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("principal", "scopes", "writes"),
    [("bob", ("read:workspace",), False), ("alice", ("read:workspace", "write:workspace"), True)],
)
async def test_hidden_rows_change_nothing_a_reader_sees(
    tmp_path: Path, stack: AsyncExitStack, principal: str, scopes: tuple[str, ...], writes: bool
) -> None:
    """Other principals' private SRs and other workspaces' SRs: invisible to readers."""
    hiding, clean = await _nodes(tmp_path, stack, PRIVATE_OF_OTHERS, OTHER_WORKSPACE)
    assert await _live(hiding, "team") == len(VISIBLE) + len(PRIVATE_OF_OTHERS)
    assert await _live(hiding, "elsewhere") == len(OTHER_WORKSPACE)
    await _compare(hiding, clean, principal, scopes, writes=writes)


@pytest.mark.asyncio
async def test_other_workspaces_change_nothing_an_admin_sees(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    """An admin reads every SR of its workspace, private ones too, and nothing of another."""
    hiding, clean = await _nodes(tmp_path, stack, [], OTHER_WORKSPACE)
    assert await _live(hiding, "elsewhere") == len(OTHER_WORKSPACE)
    await _compare(hiding, clean, "ops", ("admin:workspace",), writes=True)
