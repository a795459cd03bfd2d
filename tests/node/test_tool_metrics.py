"""Tool calls on ``/metrics`` (docs/operations.md §Health and metrics): calls, refusals and a
latency histogram per tool and surface (``node.serve.meter``).  The meter on its own; a server
built for a surface counting into it; and ``memlane serve`` in a real subprocess, called over
streamable HTTP and scraped over loopback."""

from __future__ import annotations

import re
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from node.mcp.server import build_server
from node.node import Node
from node.serve.meter import BUCKETS, METER, ToolMeter
from tests.node.mcpkit import TOOLS, make_site, session
from tests.node.servekit import serve, stop

_LINE = re.compile(r"^([a-z_]+)(?:\{([^}]*)\})? ([0-9.e+-]+)$")
_LABEL = re.compile(r'([a-z]+)="([^"]*)"')
_FAMILIES = (
    "memlane_tool_calls_total",
    "memlane_tool_refusals_total",
    "memlane_tool_call_seconds",
    "memlane_tool_unknown_calls_total",
)

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parsed(text: str) -> tuple[Series, dict[str, str]]:
    """The tool families' samples by name and labels, and each family's TYPE."""
    samples: Series = defaultdict(dict)
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
        elif line and not line.startswith("#"):
            match = _LINE.match(line)
            assert match, line
            name, labels, value = match.groups()
            if name.startswith("memlane_tool_"):
                samples[name][tuple(_LABEL.findall(labels or ""))] = float(value)
    return samples, types


def tool(name: str, surface: str) -> tuple[tuple[str, str], ...]:
    return (("tool", name), ("surface", surface))


def histogram(samples: Series, name: str, surface: str) -> tuple[list[float], float, float]:
    """(cumulative buckets with +Inf last, sum, count) of one tool's latency histogram."""
    key = tool(name, surface)
    buckets = [
        samples["memlane_tool_call_seconds_bucket"][(*key, ("le", f"{b:g}"))] for b in BUCKETS
    ]
    buckets.append(samples["memlane_tool_call_seconds_bucket"][(*key, ("le", "+Inf"))])
    return (
        buckets,
        samples["memlane_tool_call_seconds_sum"][key],
        samples["memlane_tool_call_seconds_count"][key],
    )


# -- the meter ----------------------------------------------------------------------------------


def test_the_meter_counts_per_tool_and_surface():
    meter = ToolMeter(["a", "b"])
    assert meter.exposition() == ""  # no server built: nothing to show
    meter.serve("http")
    samples, types = parsed(meter.exposition())
    assert types == {
        "memlane_tool_calls_total": "counter",
        "memlane_tool_refusals_total": "counter",
        "memlane_tool_call_seconds": "histogram",
        "memlane_tool_unknown_calls_total": "counter",
    }
    assert samples["memlane_tool_calls_total"] == {tool("a", "http"): 0, tool("b", "http"): 0}
    meter.record("http", "a", 0.0004, refused=False)
    meter.record("http", "a", 0.03, refused=True)
    meter.record("http", "a", 60.0, refused=False)
    meter.record("stdio", "b", 0.002, refused=False)
    meter.record("http", "nope", 0.001, refused=True)
    samples, _ = parsed(meter.exposition())
    assert samples["memlane_tool_calls_total"] == {
        tool("a", "http"): 3,
        tool("b", "http"): 0,
        tool("a", "stdio"): 0,
        tool("b", "stdio"): 1,
    }
    assert samples["memlane_tool_refusals_total"][tool("a", "http")] == 1
    assert samples["memlane_tool_unknown_calls_total"] == {
        (("surface", "http"),): 1,
        (("surface", "stdio"),): 0,
    }
    buckets, total, count = histogram(samples, "a", "http")
    expected = [int(b >= 0.0004) + int(b >= 0.03) for b in BUCKETS] + [3]
    assert (buckets, count) == (expected, 3)
    assert total == pytest.approx(60.0304)
    with pytest.raises(ValueError, match="unknown surface"):
        meter.serve("carrier-pigeon")


@pytest.mark.asyncio
async def test_a_server_built_for_a_surface_counts_its_calls(node: Node):
    issued = await node.create_token("alice", "team", ("read:workspace", "write:workspace"))
    meter, before = ToolMeter(TOOLS), METER.exposition()
    async with Client(
        build_server(node, token=issued.token, surface="stdio", meter=meter)
    ) as client:
        await client.call_tool("e_write", {"title": "counted"})
        await client.call_tool("e_timeline", {"action": "list"})
        await client.call_tool("e_timeline", {"action": "nope"})
    async with Client(build_server(node, token=issued.token, meter=meter)) as client:
        await client.call_tool("e_timeline", {"action": "list"})  # no surface: not counted
    samples, _ = parsed(meter.exposition())
    calls = {k: v for k, v in samples["memlane_tool_calls_total"].items() if v}
    assert calls == {tool("e_write", "stdio"): 1, tool("e_timeline", "stdio"): 2}
    assert samples["memlane_tool_refusals_total"][tool("e_timeline", "stdio")] == 1
    assert {dict(k)["surface"] for k in samples["memlane_tool_calls_total"]} == {"stdio"}
    assert METER.exposition() == before  # the process's meter is the served surfaces'


# -- a served node --------------------------------------------------------------------------------


def scrape(base: str) -> tuple[Series, dict[str, str]]:
    with urllib.request.urlopen(base + "/metrics", timeout=10) as answer:
        assert answer.status == 200
        return parsed(answer.read().decode())


@pytest.mark.asyncio
async def test_a_served_node_shows_its_tool_calls(tmp_path: Path):
    site = make_site(tmp_path / "node")
    proc, shown = serve(site.data)
    try:
        samples, types = scrape(shown["health"])
        assert {types[f] for f in _FAMILIES} == {"counter", "histogram"}
        assert samples["memlane_tool_calls_total"] == {tool(t, "http"): 0 for t in TOOLS}
        async with session(shown["mcp_http"], site.tokens["alice"]) as c:
            written = await c.call_tool("e_write", {"title": "counted", "tags": ["m"]})
            assert written.structured_content is not None
            for _ in range(3):
                await c.call_tool("e_timeline", {"action": "intersect", "match": ["m"]})
            refused: Any = await c.call_tool("e_timeline", {"action": "list", "page": 0})
            assert refused.is_error
            await c.call_tool("e_delete", {"sr_id": written.structured_content["sr_id"]})
            assert (await c.call_tool("not_a_tool", {})).is_error
        samples, _ = scrape(shown["health"])
    finally:
        code, err = stop(proc)
    assert code == 0, err
    calls = {dict(k)["tool"]: v for k, v in samples["memlane_tool_calls_total"].items() if v}
    assert calls == {"e_write": 1, "e_timeline": 4, "e_delete": 1}
    refusals = {dict(k)["tool"]: v for k, v in samples["memlane_tool_refusals_total"].items() if v}
    assert refusals == {"e_timeline": 1}
    assert samples["memlane_tool_unknown_calls_total"] == {(("surface", "http"),): 1}
    # Only the catalog's tools and the served surface: the label sets are bounded.
    for name in ("memlane_tool_calls_total", "memlane_tool_call_seconds_count"):
        assert set(samples[name]) == {tool(t, "http") for t in TOOLS}
    for name, count in (("e_timeline", 4), ("e_write", 1), ("work_record", 0)):
        buckets, total, counted = histogram(samples, name, "http")
        assert counted == buckets[-1] == count
        assert buckets == sorted(buckets)  # cumulative
        assert (total > 0) == (count > 0)
        assert buckets[-2] == count  # none took over 10 s
