"""Sync run by ``memlane serve`` (docs/mesh.md §Running sync): two nodes of one mesh, each in a
real subprocess on loopback, the member dialling the authority over mutual TLS with the
certificate the authority issued it.  An SR written with ``memlane write`` on the first reaches
the second; ``memlane peers`` on each shows the other connected; SIGTERM stops both with exit 0
and leaves the peer table closed.  Also: ``[mesh]`` in config.toml, and a member node without
its certificate refused at start-up."""

from __future__ import annotations

import asyncio
import json

import pytest

from node.address import Listen
from node.config import NodeConfig
from node.errors import ConfigError
from node.mesh.service import CA_FILE, NODE_CERT_FILE
from node.node import Node
from tests.node.helpers import ForeignWriter, admit
from tests.node.servekit import connected, memlane, peers, poll, serve, setup, stop


def test_two_served_nodes_sync_over_tls(tmp_path):
    site = setup(tmp_path)
    one, two = site["one"], site["two"]
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    running = [first]
    try:
        host, port = shown["sync"].rsplit(":", 1)
        assert host == "127.0.0.1"
        assert int(port) > 0
        assert (one / CA_FILE).exists()  # the authority certified itself
        assert (one / NODE_CERT_FILE).exists()
        (two / "config.toml").write_text(f'[mesh]\npeers = ["{shown["sync"]}"]\n')
        second, shown_two = serve(two)
        running.append(second)
        assert shown_two["sync"] is None  # it only dials

        inbound = poll(
            "the member on the authority's table", lambda: connected(one, site["two_id"])
        )
        outbound = poll(
            "the authority on the member's table", lambda: connected(two, site["one_id"])
        )
        # Written by another process once the link is up: it goes out as a push.
        written = json.loads(
            memlane(
                "write",
                "--data",
                str(one),
                "--token",
                site["writer"],
                "--title",
                "served sync",
                "--json",
            ).stdout
        )

        def arrived() -> bool:
            listed = memlane(
                "timeline", "list", "--data", str(two), "--token", site["reader"], "--json"
            ).stdout
            return written["sr_id"] in {r["sr_id"] for r in json.loads(listed)["results"]}

        poll("the SR on the second node", arrived)
        assert inbound["direction"] == "inbound"
        assert outbound["direction"] == "outbound"
        assert outbound["address"] == shown["sync"]
        table = peers(one)
        assert table["listen"] == shown["sync"]
        assert table["serving"]
        text = memlane("peers", "--data", str(two)).stdout
        assert text.startswith("sync serving (as of ")
        assert site["one_id"] in text
        assert "outbound" in text
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err
    for data in (one, two):
        after = peers(data)
        assert not after["serving"]
        assert all(row["state"] == "closed" for row in after["peers"])


def test_a_member_without_its_certificate_does_not_serve(tmp_path):
    site = setup(tmp_path)
    (site["two"] / NODE_CERT_FILE).unlink()
    done = memlane(
        "serve",
        "--data",
        str(site["two"]),
        "--mcp-http",
        "127.0.0.1:0",
        "--peer",
        "127.0.0.1:9",
        check=False,
    )
    assert done.returncode == 1
    assert f"no {NODE_CERT_FILE} in " in done.stderr


def test_peers_before_sync_ever_ran(tmp_path):
    site = setup(tmp_path)
    assert peers(site["one"]) == {"serving": False, "at": None, "listen": None, "peers": []}
    assert memlane("peers", "--data", str(site["one"])).stdout.startswith("no peers")


def test_mesh_config_keys():
    mesh = {"listen": "0.0.0.0:7411", "peers": ["10.0.0.2:7411", "[::1]:7412"]}
    config = NodeConfig.from_mapping({"mesh": mesh})
    assert config.mesh_listen == Listen("0.0.0.0", 7411)
    assert config.mesh_peers == (Listen("10.0.0.2", 7411), Listen("::1", 7412))
    assert NodeConfig.from_mapping({}).mesh_listen is None
    with pytest.raises(ConfigError) as raised:
        NodeConfig.from_mapping(
            {"synchronous": "SOMETIMES", "mesh": {"listen": "nowhere", "peers": ["10.0.0.2:0", 7]}}
        )
    text = str(raised.value)
    assert "synchronous must be" in text  # reported with every other problem
    assert "mesh.listen: 'nowhere' is not HOST:PORT" in text
    assert "mesh.peers: '10.0.0.2:0' names no port" in text
    assert 'mesh.peers: 7 is not a "HOST:PORT" string' in text
    with pytest.raises(ConfigError, match="mesh may set only listen, peers and max_connections"):
        NodeConfig.from_mapping({"mesh": {"port": 7411}})


def test_a_catch_up_shows_in_the_serving_nodes_log(tmp_path):
    """A member that comes up behind by thousands of entries says so in its log while it takes
    them, and once more when it has them all; the log is JSON lines on a pipe."""
    site = setup(tmp_path)
    one, two = site["one"], site["two"]

    async def seed() -> int:
        async with Node.open(one) as node:
            writer = ForeignWriter(node.info.mesh)
            await admit(node, writer)
            for _ in range(6):
                await node.receive(writer.run(500), source="seed")
        return len(writer.entries)

    written = asyncio.run(seed())
    first, shown = serve(one, "--sync-listen", "127.0.0.1:0")
    running = [first]
    try:
        (two / "config.toml").write_text(f'[mesh]\npeers = ["{shown["sync"]}"]\n')
        second, _ = serve(two)
        running.append(second)
        poll(
            "the member caught up",
            lambda: (peers(two)["peers"] or [{}])[0].get("received", 0) >= written,
        )
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    lines = [json.loads(line) for line in codes[0][1].splitlines() if line.startswith("{")]
    said = [
        (e["event"], e.get("behind")) for e in lines if e["event"] in ("catching up", "caught up")
    ]
    events = [event for event, _ in said]
    assert "catching up" in events, codes[0][1]
    assert events.index("catching up") < events.index("caught up")
    assert all(behind > 0 for event, behind in said if event == "catching up")
