"""``memlane serve``'s health endpoint (docs/operations.md §Health and metrics) and its
shutdown: ``/healthz`` and ``/metrics`` answer and the metrics move with activity; SIGTERM in
the middle of a sync loses nothing and a restart resumes where it stopped; the endpoint reads
bad requests with limits; the Prometheus text is well formed."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from pathlib import Path

import pytest

from node.config import NodeConfig, SearchConfig
from node.node import Node
from node.refusals import LIMITS
from node.serve.metrics import _HELP, Metrics, Sample, render
from tests.node.bundlekit import caller, write
from tests.node.helpers import ForeignWriter, admit
from tests.node.servekit import get, memlane, metrics, poll, serve, setup, stop
from tests.node.synckit import write_own


def test_health_and_metrics_answer_and_move(tmp_path):
    site = setup(tmp_path)
    first, shown = serve(site["one"], "--sync-listen", "127.0.0.1:0")
    second, shown_two = serve(site["two"], "--peer", shown["sync"])
    try:
        status, body = get(shown["health"] + "/healthz")
        assert status == 200
        health = json.loads(body)
        assert health["status"] == "ok"
        assert health["store"] == "writable"
        assert health["node_id"] == site["one_id"]
        assert health["sync"] is True
        peer = f'{{peer="{site["one_id"]}"}}'
        received = "memlane_peer_received_entries_total" + peer
        poll("the link up", lambda: received in metrics(shown_two["health"]))
        before, before_two = metrics(shown["health"]), metrics(shown_two["health"])
        for i in range(3):
            memlane(
                "write",
                "--data",
                str(site["one"]),
                "--token",
                site["writer"],
                "--title",
                f"moves {i}",
            )
        after = poll(
            "entries counted",
            lambda: (
                (m := metrics(shown["health"]))["memlane_entries"] >= before["memlane_entries"] + 3
                and m
            ),
        )
        after_two = poll(
            "entries received",
            lambda: (m := metrics(shown_two["health"]))[received] >= before_two[received] + 3 and m,
        )
        assert after["memlane_audit_seq"] > before["memlane_audit_seq"]
        assert after_two["memlane_entries"] >= before_two["memlane_entries"] + 3
        assert after["memlane_open_connections"] == 1
        assert after["memlane_sync_running"] == 1
        assert get(shown["health"] + "/other")[0] == 404
    finally:
        codes = [stop(second), stop(first)]
    assert all(code == 0 for code, _ in codes), codes


def test_sigterm_mid_sync_loses_nothing_and_a_restart_resumes(tmp_path):
    site = setup(tmp_path)
    base = entries(site["two"])  # the authority's log, which it already holds

    async def author() -> int:
        async with Node.open(site["one"]) as one:
            await write_own(one, 6000)
            return await one.reader().max_pos()

    total = asyncio.run(author())
    first, shown = serve(site["one"], "--sync-listen", "127.0.0.1:0")
    try:
        second, shown_two = serve(site["two"], "--peer", shown["sync"])
        stopped_at = _first_arrivals(shown_two["health"], base)
        code, err = stop(second)
        assert code == 0, err
        held = entries(site["two"])
        assert held >= stopped_at  # what it had counted was committed
        assert held < total, "the sync finished before SIGTERM: nothing was interrupted"
        second, shown_two = serve(site["two"], "--peer", shown["sync"])
        poll(
            "the rest after the restart",
            lambda: metrics(shown_two["health"])["memlane_entries"] >= total,
        )
        code, err = stop(second)
        assert code == 0, err
    finally:
        stop(first)
    assert entries(site["two"]) == total
    assert json.loads(memlane("log", "verify", "--data", str(site["two"]), "--json").stdout)["ok"]


def _first_arrivals(health: str, base: int) -> int:
    """The entries held once the sync's first ones have arrived (looked at every 20 ms)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        held = metrics(health)["memlane_entries"]
        if held > base:
            return held
        time.sleep(0.02)
    pytest.fail("no entry arrived within 30 s")


def entries(data: Path) -> int:
    done = memlane("log", "verify", "--data", str(data), "--json")
    return int(json.loads(done.stdout)["entries"])


def raw_request(base: str, data: bytes) -> bytes:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_endpoint_refuses_what_it_does_not_serve(tmp_path):
    site = setup(tmp_path)
    proc, shown = serve(site["one"])
    try:
        base = shown["health"]
        assert raw_request(base, b"POST /healthz HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
        assert raw_request(base, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        oversized = b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n"
        assert raw_request(base, oversized).startswith(b"HTTP/1.1 400 ")
        head = raw_request(base, b"HEAD /healthz HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert head.endswith(b"\r\n\r\n")  # HEAD: no body
        status, body = get(base + "/healthz")
        assert (status, json.loads(body)["sync"]) == (200, False)
        assert metrics(base)["memlane_sync_running"] == 0
    finally:
        stop(proc)


def test_health_can_be_off(tmp_path):
    site = setup(tmp_path)
    proc, shown = serve(site["one"], "--health-listen", "off")
    try:
        assert shown["health"] is None
    finally:
        stop(proc)


def test_the_prometheus_text():
    text = render(
        [
            Sample("memlane_entries", 7),
            Sample("memlane_peer_lag_entries", 2, (("peer", 'a"b\\c'), ("direction", "in"))),
            Sample("memlane_peer_lag_entries", 0, (("peer", "x"), ("direction", "out"))),
        ]
    )
    gauges, refusals = text.split("# HELP memlane_limit_refusals_total", 1)
    assert gauges == (
        "# HELP memlane_entries entries held in the log (every writer)\n"
        "# TYPE memlane_entries gauge\n"
        "memlane_entries 7\n"
        "# HELP memlane_peer_lag_entries entries one side held that the other lacked\n"
        "# TYPE memlane_peer_lag_entries gauge\n"
        'memlane_peer_lag_entries{peer="a\\"b\\\\c",direction="in"} 2\n'
        'memlane_peer_lag_entries{peer="x",direction="out"} 0\n'
    )
    # The family ends where the next begins: tool calls, once this process has metered one.
    lines = refusals.split("\n# HELP", 1)[0].splitlines()  # every limit's series, from zero
    assert lines[1] == "# TYPE memlane_limit_refusals_total counter"
    assert [line.split('"')[1] for line in lines[2:]] == sorted(LIMITS)
    with pytest.raises(KeyError):
        render([Sample("memlane_unknown", 1)])


def _search_samples(samples: list[Sample]) -> dict[str, int]:
    return {s.name: s.value for s in samples if s.name.startswith("memlane_search_")}


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_the_vector_index_metrics(tmp_path):
    data = tmp_path / "node"
    await Node.init(data)
    async with Node.open(data) as node:  # no embedder: no index, no samples of it
        await write(node, await caller(node), "gateway rollout", "disk alarms")
        assert _search_samples(await Metrics(node).collect()) == {}
    wordllama = NodeConfig(search=SearchConfig(embedder="wordllama"))
    async with Node.open(data, config=wordllama, embed=False) as node:
        metrics = Metrics(node)
        assert _search_samples(await metrics.collect()) == {
            "memlane_search_vectors": 0,
            "memlane_search_queued": 2,
            "memlane_search_fallbacks_total": 0,
        }
        assert node.vectors is not None
        while await node.vectors.step():
            pass
        samples = await metrics.collect()
        assert _search_samples(samples) == {
            "memlane_search_vectors": 2,
            "memlane_search_queued": 0,
            "memlane_search_fallbacks_total": 0,
        }
        text = render(samples)
        for name, kind in (
            ("vectors", "gauge"),
            ("queued", "gauge"),
            ("fallbacks_total", "counter"),
        ):
            assert f"# TYPE memlane_search_{name} {kind}\n" in text
            assert f"# HELP memlane_search_{name} " in text
    with socket.socket() as closed:  # an endpoint that is down: each find falls back to BM25
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    down = NodeConfig(search=SearchConfig(embedder="endpoint", url=url, model="m"))
    async with Node.open(data, config=down) as node:  # the node that embeds: made anew
        who = await caller(node)
        for _ in range(2):
            found = await node.e_timeline(who, action="find", query="gateway")
            assert found["semantic_used"] is False
        assert _search_samples(await Metrics(node).collect()) == {
            "memlane_search_vectors": 0,
            "memlane_search_queued": 2,
            "memlane_search_fallbacks_total": 2,
        }


def test_every_metric_family_is_in_the_operations_table():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text("utf-8")
    listed = set(re.findall(r"^\| `(memlane_[a-z_]+)", doc, re.MULTILINE))
    text = render([Sample(name, 0) for name in _HELP])
    families = set(re.findall(r"^# TYPE (memlane_[a-z_]+)", text, re.MULTILINE))
    assert "memlane_limit_refusals_total" in families
    assert families - listed == set()


@pytest.mark.asyncio
async def test_the_pending_area_is_measured_in_entries_and_bytes(tmp_path):
    await Node.init(tmp_path / "n")
    async with Node.open(tmp_path / "n") as node:
        writer = ForeignWriter(node.info.mesh)
        await admit(node, writer)
        _, second = writer.run(2)
        await node.receive([second], source="peer")  # above a gap: it waits
        samples = {s.name: s.value for s in await Metrics(node).collect()}
    assert samples["memlane_pending_entries"] == 1
    assert samples["memlane_pending_bytes"] == len(second.raw) + len(second.payload or b"")
