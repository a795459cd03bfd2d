"""find on the project's judged record-style set (``tests/judged/``: a knowledge graph in the MCP
reference memory server's format, imported as ``memlane import`` does): the record titled
exactly "Gateway" first for ``gateway`` over MCP, and the rule's field weights gaining on the
judged queries over the unweighted rule (docs/tools/e_timeline.md §find)."""

from __future__ import annotations

import socket
import statistics

import pytest

from node.access.callers import Caller
from node.mcp.http import http_server
from node.node import Node
from node.views import scoring
from tests.bench.judged import DATA, UNWEIGHTED, load, metrics
from tests.node.helpers import CallerFactory
from tests.node.mcpkit import ask, session

pytestmark = pytest.mark.asyncio


async def _imported(node: Node, make_caller: CallerFactory) -> Caller:
    caller = await make_caller("judge", "w")
    report = await node.import_file(caller, DATA / "memory.jsonl", "mcp-memory")
    assert report.written > 150, report
    return caller


async def test_the_record_titled_gateway_comes_first_over_mcp(
    node: Node, make_caller: CallerFactory
) -> None:
    await _imported(node, make_caller)
    token = (await node.create_token("judge", "w", ("read:workspace",))).token
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    async with http_server(node, listener) as endpoint, session(endpoint.url, token) as client:
        answer = await ask(client, "e_timeline", action="find", query="gateway")
    by_rank = sorted(answer["results"], key=lambda r: r["rank"])
    assert by_rank[0]["title"] == "Gateway", [r["title"] for r in by_rank[:5]]
    mentions = [r for r in by_rank[1:] if "gateway" in r["title"].lower()]
    assert mentions, "the titles holding the word rank right after it"


async def _mrr(node: Node, caller: Caller, weights: tuple[float, float, float]) -> dict[str, float]:
    """Mean reciprocal rank (at 10) by kind of query, and overall (``""``)."""
    kept, scoring.FIELD_WEIGHTS = scoring.FIELD_WEIGHTS, weights
    try:
        found: dict[str, list[float]] = {}
        for j in load():
            answer = await node.e_timeline(caller, action="find", query=j.query)
            ranked = [r["title"] for r in sorted(answer["results"], key=lambda r: r["rank"])]
            value = metrics(j.relevant, ranked)["MRR@10"]
            found.setdefault(j.kind, []).append(value)
            found.setdefault("", []).append(value)
    finally:
        scoring.FIELD_WEIGHTS = kept
    return {kind: statistics.fmean(values) for kind, values in found.items()}


async def test_the_field_weights_gain_on_the_judged_queries(
    node: Node, make_caller: CallerFactory
) -> None:
    caller = await _imported(node, make_caller)
    weighted = await _mrr(node, caller, scoring.FIELD_WEIGHTS)
    plain = await _mrr(node, caller, UNWEIGHTED)
    assert weighted[""] > plain[""], (weighted, plain)
    assert weighted["title"] > plain["title"], (weighted, plain)
    assert all(weighted[k] >= plain[k] - 0.05 for k in plain), (weighted, plain)
